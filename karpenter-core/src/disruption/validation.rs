//! Re-validation of a command against a newer snapshot (upstream `disruption/validation.go`).
//!
//! Upstream waits 15 s after computing an emptiness or consolidation command, then checks it
//! again before acting. The wait belongs to the controller (the core has no clock); these
//! functions are the checks: give them the command and the snapshot observed after the wait.
//! Drift commands are not re-validated (as upstream).
//!
//! A controller (or a test) models the wait as data: compute the command on the snapshot at
//! time `t`, let the cluster change, then call [`validate`] (or [`validate_counted`], which
//! also reports upstream's `failed_validations_total` increment) with the snapshot observed at
//! `t + COMMAND_VALIDATION_DELAY`. A rejected emptiness or consolidation command leaves its
//! method without a command and without setting the consolidated memo; upstream's controller
//! then moves on to the next method (multi-node → single-node), and single-node consolidation
//! does not try its next candidate in the same pass.

use std::collections::BTreeSet;

use jiff::SignedDuration;

use crate::api::DisruptionReason;
use crate::model::Timestamp;
use crate::state::ClusterSnapshot;

use super::budgets::BudgetMapping;
use super::candidates::{Candidate, DisruptionClass, get_candidates};
use super::methods::{Command, DisruptionOptions, Method, should_consolidate, should_empty};
use super::simulate::simulate_scheduling;

/// How long upstream waits between computing an emptiness or consolidation command and
/// re-validating it (`commandValidationDelay`).
pub const COMMAND_VALIDATION_DELAY: SignedDuration = SignedDuration::from_secs(15);

/// Why a command is no longer valid when it is re-validated. The variants are upstream's event
/// reasons (`ConsolidationRejected`: budget, scheduling, churn).
///
/// Not to be confused with [`crate::api::ValidationError`], a field of an API object that
/// breaks the CRD's rules. (Until 0.1 this type was also called `ValidationError`.)
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RevalidationError {
    /// Candidates are no longer candidates (pods or nodes changed).
    #[error("{count} candidates are no longer valid")]
    Churn {
        /// How many candidates were lost.
        count: usize,
    },
    /// A budget no longer allows the command, or a candidate was nominated.
    #[error("{0}")]
    Budget(String),
    /// The candidates' pods would no longer fit, or the replacement would differ.
    #[error("{0}")]
    Scheduling(String),
}

impl RevalidationError {
    /// `budget`, `scheduling` or `churn`, as upstream labels rejections.
    pub fn reason(&self) -> &'static str {
        match self {
            RevalidationError::Churn { .. } => "churn",
            RevalidationError::Budget(_) => "budget",
            RevalidationError::Scheduling(_) => "scheduling",
        }
    }
}

/// The outcome of a re-validation together with upstream's metric increment.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Validation {
    /// The command to execute (an emptiness command may have shrunk), or why there is none.
    pub outcome: Result<Command, RevalidationError>,
    /// Upstream's `voluntary_disruption_failed_validations_total{consolidation_type}`
    /// increment: for emptiness, every proposed candidate when none is left, else one per
    /// candidate dropped because it was nominated or over budget; for consolidation, every
    /// candidate of the command when its candidates fail (churn, nomination, budget). A
    /// scheduling rejection does not count.
    pub failed_validations: usize,
}

/// Re-validates `command` against `snapshot` at `now`. Emptiness commands are validated
/// leniently and may come back with fewer candidates; consolidation commands are all or nothing
/// (upstream `disruption/validation.go`). Other methods pass unchanged.
pub fn validate(
    command: &Command,
    snapshot: &ClusterSnapshot,
    now: Timestamp,
    options: &DisruptionOptions,
) -> Result<Command, RevalidationError> {
    validate_counted(command, snapshot, now, options).outcome
}

/// [`validate`], also reporting how many failed validations upstream would count.
pub fn validate_counted(
    command: &Command,
    snapshot: &ClusterSnapshot,
    now: Timestamp,
    options: &DisruptionOptions,
) -> Validation {
    let snapshot = &*super::methods::buffer_gated(snapshot, options);
    match command.method {
        Method::Emptiness => validate_emptiness(command, snapshot, now),
        Method::SingleNode | Method::MultiNode => {
            let outcome = validate_consolidation(command, snapshot, now, options);
            let failed_validations = match &outcome {
                Err(RevalidationError::Churn { .. } | RevalidationError::Budget(_)) => {
                    command.candidates.len()
                }
                Err(RevalidationError::Scheduling(_)) | Ok(_) => 0,
            };
            Validation {
                outcome,
                failed_validations,
            }
        }
        Method::Drift | Method::StaticDrift | Method::Expiration => Validation {
            outcome: Ok(command.clone()),
            failed_validations: 0,
        },
    }
}

/// The command's candidates that are still candidates of its method in `snapshot`
/// (recomputed with the method's `ShouldDisrupt`), in command order.
fn current_candidates(
    command: &Command,
    snapshot: &ClusterSnapshot,
    now: Timestamp,
) -> Vec<Candidate> {
    let wanted: BTreeSet<&str> = command.candidates.iter().map(|c| c.name()).collect();
    let (all, _) = get_candidates(snapshot, DisruptionClass::Graceful, &|_| false, now);
    let emptiness = command.method == Method::Emptiness;
    let mut found: Vec<Candidate> = all
        .into_iter()
        .filter(|c| wanted.contains(c.name()))
        .filter(|c| {
            if emptiness {
                // Upstream re-runs emptiness' own filter, buffer pods included.
                should_empty(snapshot, c, now)
                    && super::candidates::check_buffer_pods(snapshot, c).is_ok()
            } else {
                should_consolidate(snapshot, c, now)
            }
        })
        .collect();
    let order: Vec<&str> = command.candidates.iter().map(|c| c.name()).collect();
    found.sort_by_key(|c| order.iter().position(|n| *n == c.name()));
    found
}

fn validate_emptiness(command: &Command, snapshot: &ClusterSnapshot, now: Timestamp) -> Validation {
    let still = current_candidates(command, snapshot, now);
    if still.is_empty() {
        return Validation {
            outcome: Err(RevalidationError::Churn {
                count: command.candidates.len(),
            }),
            failed_validations: command.candidates.len(),
        };
    }
    let mut budgets = BudgetMapping::build(snapshot, DisruptionReason::Empty, now).remaining();
    let mut kept = Vec::new();
    let mut failed_validations = 0;
    for c in still {
        let b = budgets.entry(c.node_pool.clone()).or_insert(0);
        if c.node.is_nominated(now) || *b == 0 {
            failed_validations += 1;
            continue;
        }
        *b -= 1;
        kept.push(c);
    }
    if kept.is_empty() {
        return Validation {
            outcome: Err(RevalidationError::Budget(
                "no candidate is within its budget any more".into(),
            )),
            failed_validations,
        };
    }
    let mut out = command.clone();
    out.savings_per_hour = kept.iter().map(|c| c.price).sum();
    out.candidates = kept;
    Validation {
        outcome: Ok(out),
        failed_validations,
    }
}

fn validate_candidates(
    command: &Command,
    snapshot: &ClusterSnapshot,
    now: Timestamp,
) -> Result<Vec<Candidate>, RevalidationError> {
    let current = current_candidates(command, snapshot, now);
    if current.len() != command.candidates.len() {
        return Err(RevalidationError::Churn {
            count: command.candidates.len() - current.len().min(command.candidates.len()),
        });
    }
    if current.iter().any(|c| c.node.is_nominated(now)) {
        return Err(RevalidationError::Budget(
            "a candidate was nominated during validation".into(),
        ));
    }
    let mut budgets =
        BudgetMapping::build(snapshot, DisruptionReason::Underutilized, now).remaining();
    for c in &current {
        let b = budgets.entry(c.node_pool.clone()).or_insert(0);
        if *b == 0 {
            return Err(RevalidationError::Budget(format!(
                "the budget of NodePool {:?} no longer allows the command",
                c.node_pool
            )));
        }
        *b -= 1;
    }
    Ok(current)
}

fn validate_consolidation(
    command: &Command,
    snapshot: &ClusterSnapshot,
    now: Timestamp,
    options: &DisruptionOptions,
) -> Result<Command, RevalidationError> {
    let current = validate_candidates(command, snapshot, now)?;
    let refs: Vec<&Candidate> = current.iter().collect();
    let sim = simulate_scheduling(snapshot, &refs, &options.scheduler, true, now)
        .map_err(|e| RevalidationError::Scheduling(e.to_string()))?;
    if !sim.all_non_pending_scheduled() {
        return Err(RevalidationError::Scheduling(
            "not all pods would schedule any more".into(),
        ));
    }
    let new = &sim.results.new_node_claims;
    match (command.replacements.first(), new.len()) {
        (None, 0) => {}
        (Some(_), 0) => {
            return Err(RevalidationError::Scheduling(
                "the candidates can now be deleted without a replacement".into(),
            ));
        }
        (_, n) if n > 1 => {
            return Err(RevalidationError::Scheduling(format!(
                "the move would now need {n} replacements"
            )));
        }
        (None, _) => {
            return Err(RevalidationError::Scheduling(
                "the candidates can no longer be deleted without a replacement".into(),
            ));
        }
        (Some(planned), _) => {
            let now_types: BTreeSet<&str> =
                new[0].instance_types.iter().map(|it| it.name()).collect();
            if planned
                .instance_types
                .iter()
                .any(|it| !now_types.contains(it.name()))
            {
                return Err(RevalidationError::Scheduling(
                    "the replacement's instance types are no longer all possible".into(),
                ));
            }
        }
    }
    // Upstream checks the candidates once more (race mitigation, issue #1167).
    validate_candidates(command, snapshot, now)?;
    Ok(command.clone())
}

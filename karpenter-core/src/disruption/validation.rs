//! Re-validation of a command against a newer snapshot (spec `disruption.md` §4.1).
//!
//! Upstream waits 15 s after computing an emptiness or consolidation command, then checks it
//! again before acting. The wait belongs to the controller (the core has no clock); these
//! functions are the checks: give them the command and the snapshot observed after the wait.
//! Drift commands are not re-validated (as upstream).

use std::collections::BTreeSet;

use crate::api::DisruptionReason;
use crate::model::Timestamp;
use crate::state::ClusterSnapshot;

use super::budgets::BudgetMapping;
use super::candidates::{Candidate, DisruptionClass, get_candidates};
use super::methods::{Command, DisruptionOptions, Method};
use super::simulate::simulate_scheduling;

/// Why a command is no longer valid. The variants are upstream's event reasons
/// (`ConsolidationRejected`: budget, scheduling, churn).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ValidationError {
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

impl ValidationError {
    /// `budget`, `scheduling` or `churn`, as upstream labels rejections.
    pub fn reason(&self) -> &'static str {
        match self {
            ValidationError::Churn { .. } => "churn",
            ValidationError::Budget(_) => "budget",
            ValidationError::Scheduling(_) => "scheduling",
        }
    }
}

/// Re-validates `command` against `snapshot` at `now`. Emptiness commands are validated
/// leniently and may come back with fewer candidates; consolidation commands are all or nothing
/// (§4.1). Other methods pass unchanged.
pub fn validate(
    command: &Command,
    snapshot: &ClusterSnapshot,
    now: Timestamp,
    options: &DisruptionOptions,
) -> Result<Command, ValidationError> {
    match command.method {
        Method::Emptiness => validate_emptiness(command, snapshot, now),
        Method::SingleNode | Method::MultiNode => {
            validate_consolidation(command, snapshot, now, options)
        }
        Method::Drift | Method::StaticDrift | Method::Expiration => Ok(command.clone()),
    }
}

/// The command's candidates as they are in `snapshot` (recomputed), in command order.
fn current_candidates(
    command: &Command,
    snapshot: &ClusterSnapshot,
    now: Timestamp,
) -> Vec<Candidate> {
    let wanted: BTreeSet<&str> = command.candidates.iter().map(|c| c.name()).collect();
    let (all, _) = get_candidates(snapshot, DisruptionClass::Graceful, &|_| false, now);
    let mut found: Vec<Candidate> = all
        .into_iter()
        .filter(|c| wanted.contains(c.name()))
        .collect();
    let order: Vec<&str> = command.candidates.iter().map(|c| c.name()).collect();
    found.sort_by_key(|c| order.iter().position(|n| *n == c.name()));
    found
}

fn validate_emptiness(
    command: &Command,
    snapshot: &ClusterSnapshot,
    now: Timestamp,
) -> Result<Command, ValidationError> {
    let still: Vec<Candidate> = current_candidates(command, snapshot, now)
        .into_iter()
        .filter(|c| c.is_empty())
        .collect();
    if still.is_empty() {
        return Err(ValidationError::Churn {
            count: command.candidates.len(),
        });
    }
    let mut budgets = BudgetMapping::build(snapshot, DisruptionReason::Empty, now).remaining();
    let mut kept = Vec::new();
    for c in still {
        let b = budgets.entry(c.node_pool.clone()).or_insert(0);
        if c.node.is_nominated(now) || *b == 0 {
            continue;
        }
        *b -= 1;
        kept.push(c);
    }
    if kept.is_empty() {
        return Err(ValidationError::Budget(
            "no candidate is within its budget any more".into(),
        ));
    }
    let mut out = command.clone();
    out.savings_per_hour = kept.iter().map(|c| c.price).sum();
    out.candidates = kept;
    Ok(out)
}

fn validate_candidates(
    command: &Command,
    snapshot: &ClusterSnapshot,
    now: Timestamp,
) -> Result<Vec<Candidate>, ValidationError> {
    let current = current_candidates(command, snapshot, now);
    if current.len() != command.candidates.len() || current.iter().any(|c| c.is_empty()) {
        return Err(ValidationError::Churn {
            count: command.candidates.len() - current.len().min(command.candidates.len()),
        });
    }
    if current.iter().any(|c| c.node.is_nominated(now)) {
        return Err(ValidationError::Budget(
            "a candidate was nominated during validation".into(),
        ));
    }
    let mut budgets =
        BudgetMapping::build(snapshot, DisruptionReason::Underutilized, now).remaining();
    for c in &current {
        let b = budgets.entry(c.node_pool.clone()).or_insert(0);
        if *b == 0 {
            return Err(ValidationError::Budget(format!(
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
) -> Result<Command, ValidationError> {
    let current = validate_candidates(command, snapshot, now)?;
    let refs: Vec<&Candidate> = current.iter().collect();
    let sim = simulate_scheduling(snapshot, &refs, &options.scheduler, true, now)
        .map_err(|e| ValidationError::Scheduling(e.to_string()))?;
    if !sim.all_non_pending_scheduled() {
        return Err(ValidationError::Scheduling(
            "not all pods would schedule any more".into(),
        ));
    }
    let new = &sim.results.new_node_claims;
    match (command.replacements.first(), new.len()) {
        (None, 0) => {}
        (Some(_), 0) => {
            return Err(ValidationError::Scheduling(
                "the candidates can now be deleted without a replacement".into(),
            ));
        }
        (_, n) if n > 1 => {
            return Err(ValidationError::Scheduling(format!(
                "the move would now need {n} replacements"
            )));
        }
        (None, _) => {
            return Err(ValidationError::Scheduling(
                "the candidates can no longer be deleted without a replacement".into(),
            ));
        }
        (Some(planned), _) => {
            let now_types: BTreeSet<&str> = new[0]
                .instance_types
                .iter()
                .map(|it| it.name.as_str())
                .collect();
            if planned
                .instance_types
                .iter()
                .any(|it| !now_types.contains(it.name.as_str()))
            {
                return Err(ValidationError::Scheduling(
                    "the replacement's instance types are no longer all possible".into(),
                ));
            }
        }
    }
    // Upstream checks the candidates once more (race mitigation, issue #1167).
    validate_candidates(command, snapshot, now)?;
    Ok(command.clone())
}

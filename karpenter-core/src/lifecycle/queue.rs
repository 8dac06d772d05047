//! The disruption command queue (upstream `Queue.StartCommand`, `Queue.Reconcile`) as a state
//! machine.
//!
//! A [`QueuedCommand`] disrupts candidate nodes, optionally after launching replacement NodeClaims.
//! Starting it ([`start_steps`]) cordons the candidates with the disrupted taint and sets their
//! `DisruptionReason` condition, creates the replacements, marks the candidates for deletion,
//! nominates the nodes that receive pods and enqueues the command — in that order (candidates
//! are tainted *before* any replacement exists). Each queue pass ([`reconcile`]) then waits for
//! every replacement to be initialized and deletes the candidates, or gives up: a replacement
//! that vanished (not found and unknown to cluster state: an insufficient-capacity error or a
//! liveness timeout) or a command older than its retry duration is *unrecoverable*, and the
//! candidates are untainted, their condition cleared and their deletion mark removed.
//! Replacements that initialized are kept (as upstream); those that never did are deleted
//! ([`QueueOutcome::Unrecoverable::delete_replacements`]; upstream keeps them too, and their
//! pool then runs over its limits once the candidates count again).
//!
//! The retry duration is clamp(80 ms × provider ids in the queue, 10 min, 1 h). Upstream's
//! timeout check runs *after* the attempt, so a command that completes its deletions after the
//! timeout is still reported as failed and its candidates rolled back
//! ([`QueueOutcome::Unrecoverable::delete_candidates`] is then non-empty).
//!
//! [`CommandQueue`] keeps several commands, remembers initialized replacements and applies
//! the per-command exponential backoff (1 s doubling to 10 s).

use std::collections::{BTreeMap, BTreeSet};

use jiff::SignedDuration;

use crate::api::DisruptionReason;
use crate::model::Timestamp;
use crate::state::ClusterSnapshot;
use crate::taints::Taint;

use super::{
    Event, Metric, ObjectKind, TerminationMode, disrupted_taint, event_reasons, metric_names, since,
};

/// Initial per-command requeue delay.
pub const QUEUE_BASE_DELAY: SignedDuration = SignedDuration::from_secs(1);
/// Largest per-command requeue delay.
pub const QUEUE_MAX_DELAY: SignedDuration = SignedDuration::from_secs(10);
/// Shortest retry duration (command timeout).
pub const MIN_RETRY_DURATION: SignedDuration = SignedDuration::from_mins(10);
/// Longest retry duration (command timeout).
pub const MAX_RETRY_DURATION: SignedDuration = SignedDuration::from_hours(1);
/// Retry duration per provider id in the queue.
pub const RETRY_DURATION_SCALE: SignedDuration = SignedDuration::from_millis(80);

/// Unrecoverable reason: a replacement NodeClaim disappeared.
pub const REPLACEMENT_DELETED: &str = "replacement was deleted";
/// Unrecoverable reason: the command exceeded its retry duration.
pub const COMMAND_TIMEOUT: &str = "command reached timeout";

/// The command timeout for a queue holding `entries` provider ids:
/// clamp(80 ms × entries, 10 min, 1 h).
pub fn retry_duration(entries: usize) -> SignedDuration {
    let scaled = i64::try_from(entries)
        .ok()
        .and_then(|n| RETRY_DURATION_SCALE.as_millis().checked_mul(i128::from(n)))
        .and_then(|ms| i64::try_from(ms).ok())
        .map_or(MAX_RETRY_DURATION, SignedDuration::from_millis);
    scaled.clamp(MIN_RETRY_DURATION, MAX_RETRY_DURATION)
}

/// The per-command requeue delay after `failures` unsuccessful passes: 1 s × 2^failures, at
/// most 10 s.
pub fn backoff(failures: u32) -> SignedDuration {
    let secs = 1i64.checked_shl(failures.min(8)).unwrap_or(i64::MAX);
    SignedDuration::from_secs(secs).min(QUEUE_MAX_DELAY)
}

/// One node a command disrupts.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct CommandCandidate {
    /// The provider id (the queue's key).
    pub provider_id: String,
    /// The Node's name (tainted).
    pub node_name: String,
    /// The NodeClaim's name (condition set, deleted).
    pub claim_name: String,
    /// The NodePool (metric label).
    pub nodepool: String,
    /// The capacity type (metric label).
    pub capacity_type: String,
    /// The NodeClaim's termination mode (metric label).
    pub termination_mode: TerminationMode,
    /// Pods that will be rescheduled (`pods_disruption_initiated_total`).
    pub reschedulable_pods: usize,
}

impl CommandCandidate {
    /// A candidate with empty metric labels, graceful termination and no pods.
    pub fn new(
        provider_id: impl Into<String>,
        node_name: impl Into<String>,
        claim_name: impl Into<String>,
    ) -> Self {
        CommandCandidate {
            provider_id: provider_id.into(),
            node_name: node_name.into(),
            claim_name: claim_name.into(),
            nodepool: String::new(),
            capacity_type: String::new(),
            termination_mode: TerminationMode::Graceful,
            reschedulable_pods: 0,
        }
    }
}

/// A disruption command in flight: what the queue tracks from the moment a planned command is
/// started until its candidates are deleted or it is rolled back.
///
/// The planner's decision is [`crate::disruption::Command`] (candidates, replacements, savings);
/// [`QueuedCommand::from_decision`] turns it into this record of names, metric labels and
/// progress. (Until 0.1 both were called `Command`.)
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueuedCommand {
    /// A unique id.
    pub id: String,
    /// The consolidation type (`empty`, `multi`, `single`, or `""` for drift): metric label.
    pub method: String,
    /// Why the candidates are disrupted.
    pub reason: DisruptionReason,
    /// The snake_case consolidation policy of the candidates' NodePool for consolidation
    /// commands, `""` for drift: metric label.
    pub consolidation_policy: String,
    /// The nodes to disrupt.
    pub candidates: Vec<CommandCandidate>,
    /// Names of the replacement NodeClaims to create and wait for.
    pub replacements: Vec<String>,
    /// Existing nodes the simulation put pods on, to nominate.
    pub nominated_nodes: Vec<String>,
    /// When the command was made (its timeout counts from here).
    pub created_at: Timestamp,
    /// Replacements already seen initialized (maintained by [`CommandQueue`]).
    pub initialized: BTreeSet<String>,
}

impl QueuedCommand {
    /// The queue command of a planned disruption command (upstream `Queue.StartCommand`,
    /// `Queue.Reconcile`), `None` for expiration (not a queued method). `replacements` names the
    /// replacement NodeClaims the controller creates (one per planned replacement). The command
    /// carries:
    ///
    /// - `method`: the consolidation type, `empty`, `multi` or `single`, `""` for drift;
    /// - `consolidation_policy`: for consolidation commands the snake_case
    ///   `consolidationPolicy` of the first candidate's NodePool, `""` for drift;
    /// - per candidate its provider id, Node and NodeClaim names, NodePool, capacity type,
    ///   termination mode and number of reschedulable pods;
    /// - `nominated_nodes`: the existing nodes the command's simulation placed pods
    ///   on, CapacityBuffer virtual pods (`snapshot.buffer_pods`) not counted, in result order.
    pub fn from_decision(
        id: impl Into<String>,
        decision: &crate::disruption::Command,
        snapshot: &ClusterSnapshot,
        replacements: Vec<String>,
        created_at: Timestamp,
    ) -> Option<QueuedCommand> {
        use crate::disruption::{Method, Reason};
        let reason = match decision.reason {
            Reason::Empty => DisruptionReason::Empty,
            Reason::Underutilized => DisruptionReason::Underutilized,
            Reason::Drifted => DisruptionReason::Drifted,
            Reason::Expired => return None,
        };
        let method = match decision.method {
            Method::Emptiness => "empty",
            Method::MultiNode => "multi",
            Method::SingleNode => "single",
            Method::Split => "split",
            Method::Drift | Method::StaticDrift => "",
            Method::Expiration => return None,
        };
        let consolidation_policy = if method.is_empty() {
            String::new()
        } else {
            decision
                .candidates
                .first()
                .and_then(|c| snapshot.node_pool(&c.node_pool))
                .map(|p| {
                    use crate::api::ConsolidationPolicy as P;
                    match p.node_pool.spec.disruption.effective_consolidation_policy() {
                        P::WhenEmpty => "when_empty",
                        P::WhenEmptyOrUnderutilized => "when_empty_or_underutilized",
                        P::Balanced => "balanced",
                    }
                    .to_string()
                })
                .unwrap_or_default()
        };
        let candidates = decision
            .candidates
            .iter()
            .map(|c| {
                let claim = c.node_claim();
                let mut cc = CommandCandidate::new(
                    c.provider_id(),
                    c.name(),
                    claim.map_or("", |n| n.name()),
                );
                cc.nodepool = c.node_pool.clone();
                cc.capacity_type = c.capacity_type.clone();
                cc.termination_mode = claim.map_or(TerminationMode::Graceful, TerminationMode::of);
                cc.reschedulable_pods = c.reschedulable_pod_count();
                cc
            })
            .collect();
        let buffer: BTreeSet<String> = snapshot.buffer_pods.iter().map(|p| p.key()).collect();
        let nominated_nodes = decision
            .simulation
            .iter()
            .flat_map(|r| &r.existing_nodes)
            .filter(|n| n.pods.iter().any(|p| !buffer.contains(p)))
            .map(|n| n.name.clone())
            .collect();
        Some(QueuedCommand {
            id: id.into(),
            method: method.to_string(),
            reason,
            consolidation_policy,
            candidates,
            replacements,
            nominated_nodes,
            created_at,
            initialized: BTreeSet::new(),
        })
    }

    /// `delete` without replacements, else `replace` (metric label).
    pub fn decision(&self) -> &'static str {
        if self.replacements.is_empty() {
            "delete"
        } else {
            "replace"
        }
    }

    /// The candidates' provider ids.
    pub fn provider_ids(&self) -> Vec<String> {
        self.candidates
            .iter()
            .map(|c| c.provider_id.clone())
            .collect()
    }
}

/// An action a controller performs for the queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Add the taint to the Node (replacing a taint with the same key).
    TaintNode {
        /// The Node.
        node_name: String,
        /// `karpenter.sh/disrupted:NoSchedule`.
        taint: Taint,
    },
    /// Set the NodeClaim's `DisruptionReason=True` with this reason.
    SetDisruptionReason {
        /// The NodeClaim.
        claim_name: String,
        /// `Underutilized`, `Empty` or `Drifted`.
        reason: String,
    },
    /// Create the replacement NodeClaims (created-reason label = lowercase reason).
    CreateReplacements {
        /// Their names.
        claim_names: Vec<String>,
        /// The `nodeclaims_created_total` reason.
        created_reason: String,
    },
    /// Mark the candidates for deletion in cluster state.
    MarkForDeletion {
        /// Their provider ids.
        provider_ids: Vec<String>,
    },
    /// Nominate nodes that simulation placed pods on.
    Nominate {
        /// Node names.
        node_names: Vec<String>,
    },
    /// Enqueue the command (keyed by its first candidate's NodeClaim).
    Enqueue {
        /// The command.
        command_id: String,
        /// The first candidate's NodeClaim.
        claim_name: String,
    },
    /// Remove the disrupted taint from the Node.
    RemoveTaint {
        /// The Node.
        node_name: String,
    },
    /// Remove the NodeClaim's `DisruptionReason` condition.
    ClearDisruptionReason {
        /// The NodeClaim.
        claim_name: String,
    },
    /// Remove the deletion mark from the candidates in cluster state.
    UnmarkForDeletion {
        /// Their provider ids.
        provider_ids: Vec<String>,
    },
}

/// Why a command cannot start.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum QueueError {
    /// A candidate is already part of a queued command.
    #[error("candidate is being disrupted: {provider_id}")]
    AlreadyDisrupting {
        /// The candidate's provider id.
        provider_id: String,
    },
    /// Marking candidates failed and the command cannot proceed.
    #[error("marking disrupted: {failed} of {total} candidates could not be marked")]
    MarkingFailed {
        /// Candidates that failed.
        failed: usize,
        /// All candidates.
        total: usize,
    },
    /// The command has no candidates.
    #[error("command has no candidates")]
    NoCandidates,
    /// No command with this id is queued.
    #[error("no queued command {id}")]
    NotQueued {
        /// The command id.
        id: String,
    },
}

/// The steps that start a command, in order: per candidate taint the Node and set
/// `DisruptionReason`; create the replacements (if any); mark the candidates for deletion;
/// nominate; enqueue.
pub fn start_steps(command: &QueuedCommand) -> Vec<Step> {
    let taint = disrupted_taint();
    let mut steps = Vec::new();
    for c in &command.candidates {
        steps.push(Step::TaintNode {
            node_name: c.node_name.clone(),
            taint: taint.clone(),
        });
        steps.push(Step::SetDisruptionReason {
            claim_name: c.claim_name.clone(),
            reason: command.reason.as_str().to_string(),
        });
    }
    if !command.replacements.is_empty() {
        steps.push(Step::CreateReplacements {
            claim_names: command.replacements.clone(),
            created_reason: command.reason.as_str().to_lowercase(),
        });
    }
    steps.push(Step::MarkForDeletion {
        provider_ids: command.provider_ids(),
    });
    if !command.nominated_nodes.is_empty() {
        steps.push(Step::Nominate {
            node_names: command.nominated_nodes.clone(),
        });
    }
    if let Some(first) = command.candidates.first() {
        steps.push(Step::Enqueue {
            command_id: command.id.clone(),
            claim_name: first.claim_name.clone(),
        });
    }
    steps
}

/// Checks that no candidate is already queued (`queued` = provider ids in the queue).
pub fn check_start(command: &QueuedCommand, queued: &BTreeSet<String>) -> Result<(), QueueError> {
    if command.candidates.is_empty() {
        return Err(QueueError::NoCandidates);
    }
    match command
        .candidates
        .iter()
        .find(|c| queued.contains(&c.provider_id))
    {
        Some(c) => Err(QueueError::AlreadyDisrupting {
            provider_id: c.provider_id.clone(),
        }),
        None => Ok(()),
    }
}

/// After the taint/condition steps: `marked` are the provider ids marked successfully. If any
/// failed and the command has replacements, or nothing was marked, the command aborts (the
/// taints left behind are cleaned by the disruption loop). A delete-only command proceeds with
/// the marked subset.
pub fn after_marking(
    command: &QueuedCommand,
    marked: &BTreeSet<String>,
) -> Result<QueuedCommand, QueueError> {
    let total = command.candidates.len();
    let ok = command
        .candidates
        .iter()
        .filter(|c| marked.contains(&c.provider_id))
        .count();
    if ok < total && (!command.replacements.is_empty() || ok == 0) {
        return Err(QueueError::MarkingFailed {
            failed: total - ok,
            total,
        });
    }
    let mut kept = command.clone();
    kept.candidates.retain(|c| marked.contains(&c.provider_id));
    Ok(kept)
}

/// What a lookup of a replacement NodeClaim found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplacementState {
    /// The API server has no such NodeClaim; `in_state` says whether cluster state still
    /// knows it (then it is just not visible yet: retry).
    NotFound {
        /// Known to cluster state.
        in_state: bool,
    },
    /// The lookup failed for another reason: retry.
    LookupFailed,
    /// It exists but is not `Initialized=True`.
    Launching,
    /// It is `Initialized=True`.
    Initialized,
}

/// The outcome of a queue pass over a command.
#[derive(Debug, Clone, PartialEq)]
pub enum QueueOutcome {
    /// Replacements are not ready: keep the command and look again.
    Wait {
        /// When to look again (1 s; [`CommandQueue`] applies backoff).
        requeue_after: SignedDuration,
        /// `DisruptionLaunching` / `DisruptionWaitingReadiness` events.
        events: Vec<Event>,
        /// Replacements seen initialized for the first time (remember them).
        newly_initialized: Vec<String>,
    },
    /// Delete every candidate NodeClaim (retrying errors other than not-found); the command
    /// then succeeded and leaves the queue.
    DeleteCandidates {
        /// The NodeClaims to delete.
        claim_names: Vec<String>,
        /// `DisruptionTerminating` events (Node and NodeClaim of each candidate) and launch
        /// events of replacements seen for the first time.
        events: Vec<Event>,
        /// `nodeclaims_disrupted_total` and `pods_disruption_initiated_total` per candidate.
        metrics: Vec<Metric>,
    },
    /// The command failed: run `delete_candidates` deletions (only for the late-success
    /// quirk), then the rollback; the command leaves the queue.
    Unrecoverable {
        /// [`REPLACEMENT_DELETED`] or [`COMMAND_TIMEOUT`] (with the inner reason).
        reason: String,
        /// Candidates to delete first: non-empty only when the pass succeeded after the
        /// timeout (upstream quirk).
        delete_candidates: Vec<String>,
        /// Untaint, clear `DisruptionReason`, unmark for deletion.
        rollback: Vec<Step>,
        /// The replacements that never initialized and still exist: delete them (see
        /// [`reconcile`]; upstream keeps them).
        delete_replacements: Vec<String>,
        /// Events (as for the other outcomes).
        events: Vec<Event>,
        /// `queue_failures_total` by the replacements never initialized, plus the deletion
        /// metrics when `delete_candidates` is non-empty.
        metrics: Vec<Metric>,
    },
}

/// The rollback of a failed command: remove the disrupted taint and clear `DisruptionReason`
/// on every candidate, then unmark them for deletion.
pub fn rollback_steps(command: &QueuedCommand) -> Vec<Step> {
    let mut steps = Vec::new();
    for c in &command.candidates {
        steps.push(Step::RemoveTaint {
            node_name: c.node_name.clone(),
        });
        steps.push(Step::ClearDisruptionReason {
            claim_name: c.claim_name.clone(),
        });
    }
    steps.push(Step::UnmarkForDeletion {
        provider_ids: command.provider_ids(),
    });
    steps
}

/// The cleanup of stale disruption marks that opens every disruption pass (upstream
/// `disruption/controller.go`): a node that is neither part of a queued command (`queued` holds the
/// queued provider ids) nor being deleted must not keep the disrupted taint or a `DisruptionReason`
/// condition left over from an earlier command (for instance one whose controller restarted
/// mid-way). Returns [`Step::RemoveTaint`] for each such Node still carrying the taint and
/// [`Step::ClearDisruptionReason`] for each such initialized NodeClaim still carrying the
/// condition, in snapshot order. Nothing for nodes that are queued or being deleted.
pub fn stale_mark_cleanup(snapshot: &ClusterSnapshot, queued: &BTreeSet<String>) -> Vec<Step> {
    let taint_key = disrupted_taint().key;
    let mut steps = Vec::new();
    for node in &snapshot.nodes {
        if node.is_deleting() || queued.contains(node.provider_id()) {
            continue;
        }
        if let Some(n) = &node.node
            && !n.marked_for_deletion
            && n.taints.iter().any(|t| t.key == taint_key)
        {
            steps.push(Step::RemoveTaint {
                node_name: n.name.clone(),
            });
        }
        if let Some(claim) = &node.node_claim
            && crate::api::find_condition(
                &claim.status.conditions,
                super::conditions::DISRUPTION_REASON,
            )
            .is_some()
            && node.initialized()
        {
            steps.push(Step::ClearDisruptionReason {
                claim_name: claim.name().to_string(),
            });
        }
    }
    steps
}

/// The metrics of a started command (upstream `Queue.StartCommand`):
/// `voluntary_disruption_decisions_total{decision, reason, consolidation_type}` once, and
/// `voluntary_disruption_decisions_by_nodepool_total{nodepool, decision, reason,
/// consolidation_type}` once per distinct NodePool of its candidates (sorted by name). The
/// reason is lowercase.
pub fn start_metrics(command: &QueuedCommand) -> Vec<Metric> {
    let decision = command.decision().to_string();
    let reason = command.reason.as_str().to_lowercase();
    let mut out = vec![Metric::add(
        metric_names::VOLUNTARY_DISRUPTION_DECISIONS_TOTAL,
        1.0,
        [
            ("decision", decision.clone()),
            ("reason", reason.clone()),
            ("consolidation_type", command.method.clone()),
        ],
    )];
    let pools: BTreeSet<&str> = command
        .candidates
        .iter()
        .map(|c| c.nodepool.as_str())
        .collect();
    for pool in pools {
        out.push(Metric::add(
            metric_names::VOLUNTARY_DISRUPTION_DECISIONS_BY_NODEPOOL_TOTAL,
            1.0,
            [
                ("nodepool", pool.to_string()),
                ("decision", decision.clone()),
                ("reason", reason.clone()),
                ("consolidation_type", command.method.clone()),
            ],
        ));
    }
    out
}

fn deletion_metrics(command: &QueuedCommand) -> Vec<Metric> {
    let reason = command.reason.as_str().to_lowercase();
    let mut out = Vec::new();
    for c in &command.candidates {
        let labels = || {
            [
                ("reason", reason.clone()),
                ("nodepool", c.nodepool.clone()),
                ("capacity_type", c.capacity_type.clone()),
                ("consolidation_policy", command.consolidation_policy.clone()),
                ("termination_mode", c.termination_mode.as_str().to_string()),
            ]
        };
        out.push(Metric::add(
            metric_names::NODECLAIMS_DISRUPTED_TOTAL,
            1.0,
            labels(),
        ));
        out.push(Metric::add(
            metric_names::PODS_DISRUPTION_INITIATED_TOTAL,
            c.reschedulable_pods as f64,
            labels(),
        ));
    }
    out
}

fn terminating_events(command: &QueuedCommand) -> Vec<Event> {
    let reason = command.reason.as_str();
    let mut out = Vec::new();
    for c in &command.candidates {
        out.push(Event::normal(
            ObjectKind::Node,
            &c.node_name,
            event_reasons::DISRUPTION_TERMINATING,
            format!("Disrupting Node: {reason}"),
        ));
        out.push(Event::normal(
            ObjectKind::NodeClaim,
            &c.claim_name,
            event_reasons::DISRUPTION_TERMINATING,
            format!("Disrupting NodeClaim: {reason}"),
        ));
    }
    out
}

/// One queue pass over `command` (upstream `Queue.Reconcile`). `states[i]` is the lookup result of
/// `command.replacements[i]` (missing entries count as failed lookups); replacements in
/// `command.initialized` are not looked at again. `queue_entries` is the number of provider
/// ids currently in the queue (for the retry duration).
pub fn reconcile(
    command: &QueuedCommand,
    states: &[ReplacementState],
    now: Timestamp,
    queue_entries: usize,
) -> QueueOutcome {
    let timeout = retry_duration(queue_entries);
    let timed_out = since(now, command.created_at) > timeout;
    let mut events = Vec::new();
    let mut newly_initialized = Vec::new();
    let mut all_ready = true;
    let mut deleted = false;
    for (i, name) in command.replacements.iter().enumerate() {
        if command.initialized.contains(name) {
            continue;
        }
        let state = states
            .get(i)
            .copied()
            .unwrap_or(ReplacementState::LookupFailed);
        match state {
            ReplacementState::NotFound { in_state: false } => {
                deleted = true;
                break;
            }
            ReplacementState::NotFound { in_state: true } | ReplacementState::LookupFailed => {
                all_ready = false;
            }
            ReplacementState::Launching => {
                events.push(Event::normal(
                    ObjectKind::NodeClaim,
                    name,
                    event_reasons::DISRUPTION_LAUNCHING,
                    format!("Launching NodeClaim: {}", command.reason.as_str()),
                ));
                events.push(Event::normal(
                    ObjectKind::NodeClaim,
                    name,
                    event_reasons::DISRUPTION_WAITING_READINESS,
                    "Waiting on readiness to continue disruption",
                ));
                all_ready = false;
            }
            ReplacementState::Initialized => {
                events.push(Event::normal(
                    ObjectKind::NodeClaim,
                    name,
                    event_reasons::DISRUPTION_LAUNCHING,
                    format!("Launching NodeClaim: {}", command.reason.as_str()),
                ));
                newly_initialized.push(name.clone());
            }
        }
    }
    let never_initialized = command
        .replacements
        .iter()
        .filter(|r| !command.initialized.contains(*r) && !newly_initialized.contains(r))
        .count();
    // A failed command's replacements that never initialized and still exist are deleted
    // (upstream keeps them as ordinary nodes): their candidates are un-marked and count
    // against their NodePools' limits again, and a replacement that took a candidate's share
    // would keep the pool over its limits (until a liveness timeout, if it never registers;
    // for good, if it registered and never initializes).
    let delete_replacements: Vec<String> = command
        .replacements
        .iter()
        .enumerate()
        .filter(|(_, r)| !command.initialized.contains(*r) && !newly_initialized.contains(r))
        .filter(|(i, _)| {
            !matches!(
                states.get(*i),
                Some(ReplacementState::NotFound { in_state: false })
            )
        })
        .map(|(_, r)| r.clone())
        .collect();
    let failure_metrics = || {
        if never_initialized == 0 {
            return Vec::new();
        }
        let decision = command.decision().to_string();
        vec![Metric::add(
            metric_names::QUEUE_FAILURES_TOTAL,
            never_initialized as f64,
            [
                ("decision", decision.clone()),
                ("reason", command.reason.as_str().to_lowercase()),
                // Upstream quirk: the decision goes into the consolidation_type label.
                ("consolidation_type", decision),
            ],
        )]
    };
    let unrecoverable = |reason: String, delete: bool, mut events: Vec<Event>| {
        let mut metrics = failure_metrics();
        let mut delete_candidates = Vec::new();
        if delete {
            delete_candidates = command
                .candidates
                .iter()
                .map(|c| c.claim_name.clone())
                .collect();
            events.extend(terminating_events(command));
            metrics.extend(deletion_metrics(command));
        }
        QueueOutcome::Unrecoverable {
            reason,
            delete_candidates,
            rollback: rollback_steps(command),
            delete_replacements: delete_replacements.clone(),
            events,
            metrics,
        }
    };
    if deleted {
        let reason = if timed_out {
            format!("{COMMAND_TIMEOUT}, {REPLACEMENT_DELETED}")
        } else {
            REPLACEMENT_DELETED.to_string()
        };
        return unrecoverable(reason, false, events);
    }
    if !all_ready {
        if timed_out {
            return unrecoverable(
                format!("{COMMAND_TIMEOUT}, replacements not initialized"),
                false,
                events,
            );
        }
        return QueueOutcome::Wait {
            requeue_after: QUEUE_BASE_DELAY,
            events,
            newly_initialized,
        };
    }
    if timed_out {
        return unrecoverable(COMMAND_TIMEOUT.to_string(), true, events);
    }
    events.extend(terminating_events(command));
    QueueOutcome::DeleteCandidates {
        claim_names: command
            .candidates
            .iter()
            .map(|c| c.claim_name.clone())
            .collect(),
        events,
        metrics: deletion_metrics(command),
    }
}

/// Several commands in flight, keyed by id, with the provider-id index, remembered
/// initialized replacements and per-command backoff.
#[derive(Debug, Clone, Default)]
pub struct CommandQueue {
    commands: BTreeMap<String, QueuedCommand>,
    order: Vec<String>,
    provider_ids: BTreeMap<String, String>,
    failures: BTreeMap<String, u32>,
}

impl CommandQueue {
    /// An empty queue.
    pub fn new() -> Self {
        Self::default()
    }

    /// The number of provider ids in the queue.
    pub fn entries(&self) -> usize {
        self.provider_ids.len()
    }

    /// The provider ids in the queue.
    pub fn queued_provider_ids(&self) -> BTreeSet<String> {
        self.provider_ids.keys().cloned().collect()
    }

    /// Whether the provider id belongs to a queued command.
    pub fn contains(&self, provider_id: &str) -> bool {
        self.provider_ids.contains_key(provider_id)
    }

    /// The queued commands, in the order they were started.
    pub fn commands(&self) -> impl Iterator<Item = &QueuedCommand> {
        self.order.iter().filter_map(|id| self.commands.get(id))
    }

    /// The command with this id.
    pub fn get(&self, id: &str) -> Option<&QueuedCommand> {
        self.commands.get(id)
    }

    /// Starts a command: checks its candidates are not queued, registers it and returns the
    /// steps to run ([`start_steps`]). Once the taint/condition steps ran, report which
    /// candidates were marked with [`CommandQueue::after_marking`]; if a later step fails, call
    /// [`CommandQueue::abort`].
    pub fn start(&mut self, command: QueuedCommand) -> Result<Vec<Step>, QueueError> {
        check_start(&command, &self.queued_provider_ids())?;
        let steps = start_steps(&command);
        for p in command.provider_ids() {
            self.provider_ids.insert(p, command.id.clone());
        }
        self.order.push(command.id.clone());
        self.commands.insert(command.id.clone(), command);
        Ok(steps)
    }

    /// Removes a command without any rollback (its start failed).
    pub fn abort(&mut self, id: &str) -> Option<QueuedCommand> {
        self.remove(id)
    }

    /// Applies [`after_marking`] to a queued command once its taint/condition steps ran
    /// (upstream `Queue.StartCommand`): `marked` are the provider ids marked successfully. A
    /// delete-only command keeps only its marked candidates (the others leave the queue: they
    /// are neither blocked from other commands nor deleted); a command that must abort leaves
    /// the queue and the error is returned. `Ok` without change when every candidate was
    /// marked; [`QueueError::NotQueued`] if no such command is queued.
    pub fn after_marking(&mut self, id: &str, marked: &BTreeSet<String>) -> Result<(), QueueError> {
        let Some(command) = self.commands.get(id) else {
            return Err(QueueError::NotQueued { id: id.to_string() });
        };
        match after_marking(command, marked) {
            Ok(kept) => {
                let ids: BTreeSet<String> = kept.provider_ids().into_iter().collect();
                self.provider_ids.retain(|p, c| c != id || ids.contains(p));
                self.commands.insert(id.to_string(), kept);
                Ok(())
            }
            Err(e) => {
                self.remove(id);
                Err(e)
            }
        }
    }

    fn remove(&mut self, id: &str) -> Option<QueuedCommand> {
        let command = self.commands.remove(id)?;
        self.order.retain(|o| o != id);
        self.failures.remove(id);
        self.provider_ids.retain(|_, c| c != id);
        Some(command)
    }

    /// Runs [`reconcile`] for a queued command; on a terminal outcome the command leaves the
    /// queue; on `Wait` the initialized replacements are remembered and `requeue_after` is the
    /// command's backoff. `None` if no such command.
    pub fn reconcile(
        &mut self,
        id: &str,
        states: &[ReplacementState],
        now: Timestamp,
    ) -> Option<QueueOutcome> {
        let entries = self.entries();
        let command = self.commands.get_mut(id)?;
        let mut outcome = reconcile(command, states, now, entries);
        match &mut outcome {
            QueueOutcome::Wait {
                requeue_after,
                newly_initialized,
                ..
            } => {
                command
                    .initialized
                    .extend(newly_initialized.iter().cloned());
                let failures = self.failures.entry(id.to_string()).or_insert(0);
                *requeue_after = backoff(*failures);
                *failures = failures.saturating_add(1);
            }
            QueueOutcome::DeleteCandidates { .. } | QueueOutcome::Unrecoverable { .. } => {
                self.remove(id);
            }
        }
        Some(outcome)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_to_ten_seconds() {
        let secs: Vec<i64> = (0..6).map(|f| backoff(f).as_secs()).collect();
        assert_eq!(secs, [1, 2, 4, 8, 10, 10]);
        assert_eq!(backoff(u32::MAX), QUEUE_MAX_DELAY);
    }

    fn tainted_node(name: &str, initialized: bool, reason: bool) -> crate::state::StateNode {
        use crate::api::{
            Condition, ConditionStatus, NodeClaim, NodeClaimSpec, NodeClassReference,
        };
        let mut node = crate::model::ClusterNode::new(name);
        node.taints.push(disrupted_taint());
        if initialized {
            node.labels
                .insert(crate::labels::INITIALIZED.into(), "true".into());
        }
        let class = NodeClassReference::new("karpenter.k8s.aws", "EC2NodeClass", "default");
        let mut claim = NodeClaim::new(name, NodeClaimSpec::new(class));
        claim.status.provider_id = Some(format!("fake:///{name}"));
        if reason {
            claim.status.conditions.push(Condition {
                type_: super::super::conditions::DISRUPTION_REASON.into(),
                status: ConditionStatus::True,
                reason: Some("Underutilized".into()),
                message: None,
                last_transition_time: None,
                observed_generation: None,
            });
        }
        crate::state::StateNode {
            node: Some(node),
            node_claim: Some(claim),
            pods: Vec::new(),
            marked_for_deletion: false,
            nominated_until: None,
            ready: true,
            volume_limits: Default::default(),
        }
    }

    #[test]
    fn stale_marks_are_cleaned_on_idle_nodes_only() {
        let mut deleting = tainted_node("deleting", true, true);
        deleting.marked_for_deletion = true;
        let snapshot = ClusterSnapshot {
            nodes: vec![
                std::sync::Arc::new(tainted_node("idle", true, true)),
                std::sync::Arc::new(tainted_node("queued", true, true)),
                std::sync::Arc::new(deleting),
                // Uninitialized: the taint goes, the condition is left alone.
                std::sync::Arc::new(tainted_node("young", false, true)),
            ],
            ..ClusterSnapshot::default()
        };
        let queued = BTreeSet::from(["fake:///queued".to_string()]);
        assert_eq!(
            stale_mark_cleanup(&snapshot, &queued),
            [
                Step::RemoveTaint {
                    node_name: "idle".into()
                },
                Step::ClearDisruptionReason {
                    claim_name: "idle".into()
                },
                Step::RemoveTaint {
                    node_name: "young".into()
                },
            ]
        );
    }

    #[test]
    fn retry_duration_saturates() {
        assert_eq!(retry_duration(usize::MAX), MAX_RETRY_DURATION);
        assert_eq!(retry_duration(0), MIN_RETRY_DURATION);
    }
}

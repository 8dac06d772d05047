//! Node repair (upstream `node/health`): replacing nodes whose conditions have been unhealthy for
//! too long.
//!
//! The cloud provider lists [`RepairPolicy`]s (a Node condition type, its unhealthy status and
//! how long it is tolerated). For a Node with a NodeClaim, among the policies that match one of
//! its conditions the one whose termination time (condition `lastTransitionTime` + toleration)
//! comes first decides; before that time the node is looked at again then. A safety threshold
//! stops repair when more than 20 % (rounded up) of the nodes of the NodePool (or of the
//! cluster, for a claim without NodePool label) are unhealthy — unhealthy meaning matching any
//! policy, toleration not considered. Repair sets the termination-timestamp annotation to now
//! (forcing an immediate drain) and deletes the NodeClaim, ignoring budgets and
//! do-not-disrupt.

use jiff::SignedDuration;

use crate::api::{ConditionStatus, NodeClaim};
use crate::labels;
use crate::model::Timestamp;

use super::{
    Event, Metric, NodeCondition, ObjectKind, TERMINATION_TIMESTAMP_ANNOTATION, add,
    claim_is_deleting, disrupted_metrics, event_reasons, format_time, metric_names, metric_reasons,
    parse_time,
};

/// Share of unhealthy nodes (percent, rounded up) above which repair is blocked.
pub const UNHEALTHY_THRESHOLD_PERCENT: usize = 20;
/// Requeue interval while repair is blocked.
pub const REPAIR_BLOCKED_REQUEUE: SignedDuration = SignedDuration::from_mins(5);

/// The cloud provider's repair policies (one type for the trait and the repair decision).
pub use crate::cloud::RepairPolicy;

impl RepairPolicy {
    /// Whether the condition matches this policy's type and status.
    pub fn matches(&self, condition: &NodeCondition) -> bool {
        condition.type_ == self.condition_type && condition.status == self.condition_status
    }

    fn toleration(&self) -> SignedDuration {
        SignedDuration::try_from(self.toleration_duration).unwrap_or(SignedDuration::MAX)
    }
}

/// Whether a Node is unhealthy for the threshold count: some condition matches some policy.
pub fn is_unhealthy(conditions: &[NodeCondition], policies: &[RepairPolicy]) -> bool {
    conditions
        .iter()
        .any(|c| policies.iter().any(|p| p.matches(c)))
}

/// Which nodes the threshold counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RepairScope {
    /// The nodes of the claim's NodePool.
    NodePool,
    /// All nodes of the cluster (the claim has no NodePool label).
    Cluster,
}

/// The repair decision for one Node.
#[derive(Debug, Clone, PartialEq)]
pub enum RepairDecision {
    /// No policy matches: nothing to do.
    Healthy,
    /// A policy matches but its toleration has not run out: look again at this instant.
    RequeueAt(Timestamp),
    /// Too many unhealthy nodes: publish the event, requeue after 5 minutes.
    Blocked {
        /// `NodeRepairBlocked`.
        event: Event,
        /// 5 minutes.
        requeue_after: SignedDuration,
    },
    /// Repair: see [`repair_actions`].
    Repair {
        /// The condition type that triggered repair.
        condition_type: String,
        /// Its status.
        condition_status: ConditionStatus,
    },
}

/// Unhealthy nodes allowed before repair is blocked: ⌈20 % × total⌉.
pub fn allowed_unhealthy(total: usize) -> usize {
    (total.saturating_mul(UNHEALTHY_THRESHOLD_PERCENT)).div_ceil(100)
}

/// Decides repair of a Node from its conditions. `unhealthy` counts the [unhealthy](is_unhealthy)
/// nodes among `total` nodes of `scope` (the node itself included).
pub fn repair_decision(
    node_name: &str,
    conditions: &[NodeCondition],
    policies: &[RepairPolicy],
    unhealthy: usize,
    total: usize,
    scope: RepairScope,
    now: Timestamp,
) -> RepairDecision {
    let earliest = conditions
        .iter()
        .flat_map(|c| {
            policies
                .iter()
                .filter(|p| p.matches(c))
                .map(move |p| (add(c.last_transition_time, p.toleration()), c))
        })
        .min_by_key(|(at, c)| (*at, c.type_.clone()));
    let Some((at, condition)) = earliest else {
        return RepairDecision::Healthy;
    };
    if now < at {
        return RepairDecision::RequeueAt(at);
    }
    if unhealthy > allowed_unhealthy(total) {
        let message = match scope {
            RepairScope::NodePool => "more than 20% nodes are unhealthy in the nodepool",
            RepairScope::Cluster => "more than 20% nodes are unhealthy in the cluster",
        };
        return RepairDecision::Blocked {
            event: Event::warning(
                ObjectKind::Node,
                node_name,
                event_reasons::NODE_REPAIR_BLOCKED,
                message,
            ),
            requeue_after: REPAIR_BLOCKED_REQUEUE,
        };
    }
    RepairDecision::Repair {
        condition_type: condition.type_.clone(),
        condition_status: condition.status,
    }
}

/// What repairing a NodeClaim does.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct RepairActions {
    /// The termination-timestamp annotation to write (now), unless the existing value is
    /// already in the past.
    pub termination_timestamp: Option<String>,
    /// Delete the NodeClaim (it is not deleting yet).
    pub delete_claim: bool,
    /// `nodeclaims_disrupted_total{reason="unhealthy"}`, `pods_disruption_initiated_total`
    /// (when the node has reschedulable pods) and `nodeclaims_unhealthy_disrupted_total`.
    pub metrics: Vec<Metric>,
}

/// The actions of a [`RepairDecision::Repair`] on the Node's NodeClaim, for a node without
/// reschedulable pods (see [`repair_actions_with_pods`]).
pub fn repair_actions(claim: &NodeClaim, condition_type: &str, now: Timestamp) -> RepairActions {
    repair_actions_with_pods(claim, condition_type, 0, now)
}

/// The actions of a [`RepairDecision::Repair`] on the Node's NodeClaim; `reschedulable_pods`
/// (the node's pods that will be rescheduled) is counted in
/// `pods_disruption_initiated_total{reason="unhealthy"}` (upstream `node/health`).
pub fn repair_actions_with_pods(
    claim: &NodeClaim,
    condition_type: &str,
    reschedulable_pods: usize,
    now: Timestamp,
) -> RepairActions {
    let existing = claim
        .metadata
        .annotations
        .get(TERMINATION_TIMESTAMP_ANNOTATION)
        .and_then(|v| parse_time(v));
    let termination_timestamp = match existing {
        Some(t) if t < now => None,
        _ => Some(format_time(now)),
    };
    let label = |k: &str| claim.metadata.labels.get(k).cloned().unwrap_or_default();
    let mut metrics = disrupted_metrics(claim, metric_reasons::UNHEALTHY, "", reschedulable_pods);
    metrics.push(Metric::add(
        metric_names::NODECLAIMS_UNHEALTHY_DISRUPTED_TOTAL,
        1.0,
        [
            ("condition", snake_case(condition_type)),
            ("nodepool", label(labels::NODEPOOL)),
            ("capacity_type", label(labels::CAPACITY_TYPE)),
            (
                "image_id",
                claim.status.image_id.clone().unwrap_or_default(),
            ),
        ],
    ));
    RepairActions {
        termination_timestamp,
        delete_claim: !claim_is_deleting(claim),
        metrics,
    }
}

/// `CamelCase` → `camel_case` (metric label values).
pub fn snake_case(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 4);
    let chars: Vec<char> = s.chars().collect();
    for (i, c) in chars.iter().enumerate() {
        if c.is_uppercase() {
            let prev_lower = i > 0
                && chars
                    .get(i - 1)
                    .is_some_and(|p| p.is_lowercase() || p.is_ascii_digit());
            let next_lower = chars.get(i + 1).is_some_and(|n| n.is_lowercase());
            let prev_upper = i > 0 && chars.get(i - 1).is_some_and(|p| p.is_uppercase());
            if i > 0 && (prev_lower || (prev_upper && next_lower)) {
                out.push('_');
            }
            out.extend(c.to_lowercase());
        } else {
            out.push(*c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snake_case_values() {
        assert_eq!(snake_case("Ready"), "ready");
        assert_eq!(snake_case("MemoryPressure"), "memory_pressure");
        assert_eq!(snake_case("Underutilized"), "underutilized");
        assert_eq!(snake_case("NetworkUnavailable"), "network_unavailable");
        assert_eq!(snake_case("GPUUnhealthy"), "gpu_unhealthy");
    }

    #[test]
    fn threshold_rounds_up() {
        assert_eq!(allowed_unhealthy(0), 0);
        assert_eq!(allowed_unhealthy(1), 1);
        assert_eq!(allowed_unhealthy(5), 1);
        assert_eq!(allowed_unhealthy(6), 2);
        assert_eq!(allowed_unhealthy(10), 2);
        assert_eq!(allowed_unhealthy(11), 3);
    }
}

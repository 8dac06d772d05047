//! Termination (upstream `nodeclaim/lifecycle` finalizer, `node/termination`): finalizing a
//! NodeClaim and draining its Node.
//!
//! - [`finalize_claim`]: the next step of a deleting NodeClaim's finalizer (termination
//!   timestamp annotation → delete Nodes → delete the instance → remove the finalizer).
//! - [`finalize_without_drain`] and [`terminating_node_update`]: the steps of a terminating
//!   Node before its drain (a gone, not-Ready Node skips it; the disrupted taint and the
//!   load-balancer exclusion label).
//! - [`drain_plan`]: which pods of a draining Node to force-delete, which to evict (one
//!   priority tier at a time) and which are still waited for; [`drained_decision`] applies
//!   `MinDrainTime`; [`volume_detachment_decision`] the volume-attachment wait;
//!   [`eviction_decision`] the eviction queue's handling of an eviction response.
//!
//! ```
//! use karpenter_core::lifecycle::termination::drain_plan;
//! use karpenter_core::model::{OwnerReference, Pod, PodPhase};
//!
//! let now: jiff::Timestamp = "2024-01-01T00:00:00Z".parse().unwrap();
//! let mut app = Pod::new("default", "app");
//! app.node_name = Some("n1".into());
//! app.phase = PodPhase::Running;
//! let mut ds = app.clone();
//! ds.name = "ds".into();
//! ds.owner = Some(OwnerReference::new("apps/v1", "DaemonSet", "d").with_controller(true));
//! let plan = drain_plan("n1", &[app, ds], None, now);
//! // Non-critical non-DaemonSet pods go first; the DaemonSet pod waits for the next pass.
//! assert_eq!(plan.evict, ["default/app"]);
//! assert_eq!(plan.waiting, ["default/app", "default/ds"]);
//! assert!(!plan.complete);
//! ```

use jiff::SignedDuration;

use crate::api::{Condition, ConditionStatus, NodeClaim};
use crate::labels;
use crate::model::{Pod, Timestamp};

use super::conditions::{self, ConditionSet, INSTANCE_TERMINATING, REGISTERED};
use super::{
    Event, Metric, Node, NodeUpdate, ObjectKind, TERMINATION_FINALIZER,
    TERMINATION_TIMESTAMP_ANNOTATION, add, claim_deletion_time, disrupted_taint, event_reasons,
    format_time, metric_names, parse_time, since,
};

/// A drain stays `Drained=Unknown` at least this long before it may complete.
pub const MIN_DRAIN_TIME: SignedDuration = SignedDuration::from_secs(5);
/// A terminating pod whose deletion timestamp is more than this in the past is ignored by
/// drain.
pub const STUCK_TERMINATING_AFTER: SignedDuration = SignedDuration::from_mins(1);
/// A pod's `terminationGracePeriodSeconds` when unset (the API server's default).
pub const DEFAULT_POD_TERMINATION_GRACE_SECONDS: i64 = 30;
/// Requeue interval while draining or waiting for volumes.
pub const DRAIN_REQUEUE: SignedDuration = SignedDuration::from_secs(1);
/// Requeue interval while the instance terminates.
pub const INSTANCE_TERMINATION_REQUEUE: SignedDuration = SignedDuration::from_secs(5);
/// Priority classes whose pods are drained last.
pub const CRITICAL_PRIORITY_CLASSES: [&str; 2] =
    ["system-cluster-critical", "system-node-critical"];
/// Label put on terminating Nodes (value `karpenter`).
pub const EXCLUDE_FROM_LOAD_BALANCERS_LABEL: &str =
    "node.kubernetes.io/exclude-from-external-load-balancers";
/// `pods_drained_total` reason when the NodeClaim has no `DisruptionReason` condition.
pub const FORCEFUL_TERMINATION_REASON: &str = "Forceful Termination";
/// Condition reason of `Drained=Unknown`.
pub const DRAINING_REASON: &str = "Draining";
/// Condition reason of `VolumesDetached=False` when the grace period ran out.
pub const TERMINATION_GRACE_PERIOD_ELAPSED: &str = "TerminationGracePeriodElapsed";

// ---------------------------------------------------------------------------------------------
// Termination timestamp
// ---------------------------------------------------------------------------------------------

/// The instant a node's remaining pods are force-deleted: the
/// `karpenter.sh/nodeclaim-termination-timestamp` annotation when present (and valid), else
/// deletion timestamp + `terminationGracePeriod` when both are set, else `None` (drain may
/// take forever).
pub fn termination_timestamp(claim: &NodeClaim) -> Option<Timestamp> {
    if let Some(v) = claim
        .metadata
        .annotations
        .get(TERMINATION_TIMESTAMP_ANNOTATION)
    {
        return parse_time(v);
    }
    let tgp = claim.spec.termination_grace_period.as_ref()?;
    claim_deletion_time(claim).map(|d| add(d, tgp.as_signed_duration()))
}

/// The termination-timestamp annotation to write on a deleting NodeClaim: when it has a
/// `terminationGracePeriod`, a deletion timestamp and no annotation yet. The value is
/// deletion timestamp + grace period (RFC 3339); the event is `TerminationGracePeriodExpiring`.
pub fn termination_timestamp_annotation(claim: &NodeClaim) -> Option<(String, Event)> {
    if claim
        .metadata
        .annotations
        .contains_key(TERMINATION_TIMESTAMP_ANNOTATION)
    {
        return None;
    }
    let tgp = claim.spec.termination_grace_period.as_ref()?;
    let at = add(claim_deletion_time(claim)?, tgp.as_signed_duration());
    let value = format_time(at);
    let event = Event::normal(
        ObjectKind::NodeClaim,
        claim.name(),
        event_reasons::TERMINATION_GRACE_PERIOD_EXPIRING,
        format!("All pods will be deleted by {value}"),
    );
    Some((value, event))
}

// ---------------------------------------------------------------------------------------------
// NodeClaim finalization
// ---------------------------------------------------------------------------------------------

/// The next step of a deleting NodeClaim's finalizer (upstream `nodeclaim/lifecycle` finalizer).
#[derive(Debug, Clone, PartialEq)]
pub enum FinalizeStep {
    /// The claim has no `karpenter.sh/termination` finalizer: nothing to do.
    Done,
    /// Write the termination-timestamp annotation and publish the event.
    WriteTerminationTimestamp {
        /// The annotation value.
        value: String,
        /// `TerminationGracePeriodExpiring`.
        event: Event,
    },
    /// Delete these Nodes (the claim's, not yet deleting), then wait for them to go.
    DeleteNodes {
        /// Node names.
        node_names: Vec<String>,
    },
    /// Nodes are being deleted (drained); wait until none remain.
    AwaitNodes {
        /// Node names.
        node_names: Vec<String>,
    },
    /// Call the cloud provider's `Delete`, write `claim` (`InstanceTerminating=True`) and
    /// requeue; once `Delete` reports the instance gone, call [`finalize_claim`] with
    /// `instance_gone`.
    DeleteInstance {
        /// The claim with `InstanceTerminating=True`.
        claim: Box<NodeClaim>,
        /// Requeue interval (5 s).
        requeue_after: SignedDuration,
    },
    /// Remove the finalizer; update the metrics.
    RemoveFinalizer {
        /// `nodeclaims_terminated_total`.
        metrics: Vec<Metric>,
    },
}

/// Decides the next finalization step of a NodeClaim being deleted. `nodes` are the Nodes
/// with the claim's provider id; `instance_gone` is whether the cloud provider's `Delete` (or
/// `Get`) reported the instance not found.
pub fn finalize_claim(
    claim: &NodeClaim,
    nodes: &[Node],
    instance_gone: bool,
    now: Timestamp,
) -> FinalizeStep {
    if !claim
        .metadata
        .finalizers
        .iter()
        .any(|f| f == TERMINATION_FINALIZER)
    {
        return FinalizeStep::Done;
    }
    if let Some((value, event)) = termination_timestamp_annotation(claim) {
        return FinalizeStep::WriteTerminationTimestamp { value, event };
    }
    if conditions::is_true(&claim.status.conditions, REGISTERED) && !nodes.is_empty() {
        let to_delete: Vec<String> = nodes
            .iter()
            .filter(|n| !n.is_deleting())
            .map(|n| n.name.clone())
            .collect();
        if to_delete.is_empty() {
            return FinalizeStep::AwaitNodes {
                node_names: nodes.iter().map(|n| n.name.clone()).collect(),
            };
        }
        return FinalizeStep::DeleteNodes {
            node_names: to_delete,
        };
    }
    let launched = claim
        .status
        .provider_id
        .as_deref()
        .is_some_and(|p| !p.is_empty());
    if launched && !instance_gone {
        let mut next = claim.clone();
        ConditionSet::for_nodeclaim(&mut next, now).set_true(INSTANCE_TERMINATING);
        return FinalizeStep::DeleteInstance {
            claim: Box::new(next),
            requeue_after: INSTANCE_TERMINATION_REQUEUE,
        };
    }
    let label = |k: &str| claim.metadata.labels.get(k).cloned().unwrap_or_default();
    FinalizeStep::RemoveFinalizer {
        metrics: vec![Metric::add(
            metric_names::NODECLAIMS_TERMINATED_TOTAL,
            1.0,
            [
                ("nodepool", label(labels::NODEPOOL)),
                ("capacity_type", label(labels::CAPACITY_TYPE)),
                ("zone", label(labels::ZONE)),
            ],
        )],
    }
}

// ---------------------------------------------------------------------------------------------
// Node termination: before the drain
// ---------------------------------------------------------------------------------------------

/// Whether a terminating Node's finalizer is removed at once, without drain (upstream
/// `node/termination`): the Node is not `Ready=True` and the cloud provider's `Get` of its provider
/// id reported the instance not found (`instance_not_found`).
pub fn finalize_without_drain(node: &Node, instance_not_found: bool) -> bool {
    !node.is_ready() && instance_not_found
}

/// The change a terminating Node gets before its drain (upstream `node/termination`): the disrupted
/// taint `karpenter.sh/disrupted:NoSchedule` (a taint with the same key but another value or effect
/// is replaced) and the label `node.kubernetes.io/exclude-from-external-load-balancers=karpenter`.
/// `None` when the Node already has both.
pub fn terminating_node_update(node: &Node) -> Option<NodeUpdate> {
    let taint = disrupted_taint();
    let tainted = node
        .taints
        .iter()
        .any(|t| t.key == taint.key && t.value == taint.value && t.effect == taint.effect);
    if tainted
        && node
            .labels
            .get(EXCLUDE_FROM_LOAD_BALANCERS_LABEL)
            .is_some_and(|v| v == "karpenter")
    {
        // Already as termination wants it (the common case: every later reconcile).
        return None;
    }
    let mut next = node.clone();
    if !next
        .taints
        .iter()
        .any(|t| t.key == taint.key && t.value == taint.value && t.effect == taint.effect)
    {
        next.taints.retain(|t| t.key != taint.key);
        next.taints.push(taint);
    }
    next.labels.insert(
        EXCLUDE_FROM_LOAD_BALANCERS_LABEL.to_string(),
        "karpenter".to_string(),
    );
    NodeUpdate::diff(node, &next)
}

// ---------------------------------------------------------------------------------------------
// Drain
// ---------------------------------------------------------------------------------------------

/// Whether the pod's priority class is `system-cluster-critical` or `system-node-critical`.
pub fn is_critical(pod: &Pod) -> bool {
    pod.priority_class_name
        .as_deref()
        .is_some_and(|c| CRITICAL_PRIORITY_CLASSES.contains(&c))
}

/// Whether the pod tolerates `karpenter.sh/disrupted:NoSchedule` (such pods are never drained).
pub fn tolerates_disrupted_taint(pod: &Pod) -> bool {
    let taint = disrupted_taint();
    pod.tolerations.iter().any(|t| t.tolerates(&taint))
}

/// Whether the pod is terminating and its deletion timestamp is more than a minute past.
pub fn is_stuck_terminating(pod: &Pod, now: Timestamp) -> bool {
    pod.deletion_timestamp
        .is_some_and(|d| since(now, d) > STUCK_TERMINATING_AFTER)
}

/// Whether drain waits for the pod: not terminal, not tolerating the disrupted taint, not a
/// mirror pod, and not stuck terminating.
pub fn is_drainable(pod: &Pod, now: Timestamp) -> bool {
    !pod.is_terminal()
        && !tolerates_disrupted_taint(pod)
        && !pod.is_mirror_pod()
        && !is_stuck_terminating(pod, now)
}

/// Whether `karpenter.sh/do-not-disrupt` protects the pod at `now`: `"true"`, or a positive Go
/// duration not yet elapsed since the pod started. The model has no `status.startTime`, so the
/// pod's creation timestamp stands in for it. Other values are ignored.
pub fn do_not_disrupt_active(pod: &Pod, now: Timestamp) -> bool {
    let Some(value) = pod.annotations.get(labels::DO_NOT_DISRUPT_ANNOTATION) else {
        return false;
    };
    if value == "true" {
        return true;
    }
    match crate::api::Duration::parse(value) {
        Ok(d) if d.as_nanos() > 0 => since(now, pod.creation_timestamp) < d.as_signed_duration(),
        _ => false,
    }
}

/// What to do with a draining Node's pods in this pass.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct DrainPlan {
    /// Pods to delete now, bypassing PDBs and do-not-disrupt, with the grace period (seconds)
    /// to delete them with.
    pub force_delete: Vec<(String, i64)>,
    /// Pods to evict through the eviction API: the first non-empty tier only, minus pods
    /// protected by do-not-disrupt (which stay waiting).
    pub evict: Vec<String>,
    /// Every pod drain still waits for (including those above).
    pub waiting: Vec<String>,
    /// No pod is waited for: the drain is done.
    pub complete: bool,
}

/// Plans a drain pass over the pods bound to `node_name` (upstream `node/termination`
/// "awaitDrain"), with do-not-disrupt evaluated by [`do_not_disrupt_active`]. See
/// [`drain_plan_with`].
pub fn drain_plan(
    node_name: &str,
    pods: &[Pod],
    node_termination_time: Option<Timestamp>,
    now: Timestamp,
) -> DrainPlan {
    drain_plan_with(node_name, pods, node_termination_time, now, |p| {
        do_not_disrupt_active(p, now)
    })
}

/// Plans a drain pass, with a caller-supplied do-not-disrupt predicate.
///
/// 1. Pods considered: bound to the node and [drainable](is_drainable). All of them are
///    `waiting`.
/// 2. With a node termination time `T`, a pod whose own grace period would end after `T`
///    (terminating: deletion timestamp after `T`; otherwise `now > T − terminationGracePeriod`,
///    30 s when unset) is force-deleted with grace max(whole seconds left until `T`, 1),
///    whatever its tier, PDBs or do-not-disrupt.
/// 3. The other pods are split into tiers — non-critical non-DaemonSet, non-critical
///    DaemonSet, critical non-DaemonSet, critical DaemonSet — and only the first non-empty tier
///    is evicted (its pods that are not terminating yet). Terminating pods count towards their
///    tier, so a tier waits until the one before it is gone, as upstream's terminator groups
///    the pods still waiting for eviction; pods under do-not-disrupt count towards the tier but
///    are not evicted (they block the drain until they go or the termination time forces them).
///
/// Output lists are sorted by pod key (`namespace/name`).
pub fn drain_plan_with(
    node_name: &str,
    pods: &[Pod],
    node_termination_time: Option<Timestamp>,
    now: Timestamp,
    is_do_not_disrupt: impl Fn(&Pod) -> bool,
) -> DrainPlan {
    let mut drainable: Vec<&Pod> = pods
        .iter()
        .filter(|p| p.node_name.as_deref() == Some(node_name))
        .filter(|p| is_drainable(p, now))
        .collect();
    drainable.sort_by_key(|p| p.key());
    let mut plan = DrainPlan {
        waiting: drainable.iter().map(|p| p.key()).collect(),
        ..DrainPlan::default()
    };
    let mut tiers: [Vec<&Pod>; 4] = Default::default();
    for pod in drainable {
        if let Some(deadline) = node_termination_time {
            let expiring = match pod.deletion_timestamp {
                Some(deleted_at) => deleted_at > deadline,
                None => {
                    let grace = pod
                        .termination_grace_period_seconds
                        .unwrap_or(DEFAULT_POD_TERMINATION_GRACE_SECONDS);
                    now > add(deadline, -SignedDuration::from_secs(grace))
                }
            };
            if expiring {
                let left = since(deadline, now).as_secs().max(1);
                plan.force_delete.push((pod.key(), left));
                continue;
            }
        }
        let tier = match (is_critical(pod), pod.is_daemonset_pod()) {
            (false, false) => 0,
            (false, true) => 1,
            (true, false) => 2,
            (true, true) => 3,
        };
        tiers[tier].push(pod);
    }
    if let Some(tier) = tiers.iter().find(|t| !t.is_empty()) {
        plan.evict = tier
            .iter()
            .filter(|p| !p.is_terminating() && !is_do_not_disrupt(p))
            .map(|p| p.key())
            .collect();
    }
    plan.complete = plan.waiting.is_empty();
    plan
}

/// What to do with the `Drained` condition after a drain pass.
#[derive(Debug, Clone, PartialEq)]
pub enum DrainedDecision {
    /// Pods remain: set `Drained=Unknown` (reason `Draining`) if absent, publish
    /// `FailedDraining` and requeue.
    Draining {
        /// The `FailedDraining` event.
        event: Event,
        /// Requeue interval (1 s).
        requeue_after: SignedDuration,
    },
    /// The drain is done but `Drained` has been `Unknown` for less than `MinDrainTime` (or is
    /// absent: set it to `Unknown`); requeue.
    WaitMinDrainTime {
        /// Requeue interval (1 s).
        requeue_after: SignedDuration,
    },
    /// Set `Drained=True`; count `nodes_drained_total` (only on the transition: empty when
    /// `Drained` was already `True`).
    Drained {
        /// The metric.
        metrics: Vec<Metric>,
    },
}

/// Decides the `Drained` condition from a drain plan: `drained` is the NodeClaim's current
/// `Drained` condition, `nodepool` the metric label.
pub fn drained_decision(
    node_name: &str,
    plan: &DrainPlan,
    drained: Option<&Condition>,
    nodepool: &str,
    now: Timestamp,
) -> DrainedDecision {
    if !plan.complete {
        return DrainedDecision::Draining {
            event: Event::warning(
                ObjectKind::Node,
                node_name,
                event_reasons::FAILED_DRAINING,
                format!(
                    "Failed to drain node, {} pods are waiting to be evicted",
                    plan.waiting.len()
                ),
            ),
            requeue_after: DRAIN_REQUEUE,
        };
    }
    let waited_enough = match drained {
        // Already drained: counted when it became so.
        Some(c) if c.status == ConditionStatus::True => {
            return DrainedDecision::Drained {
                metrics: Vec::new(),
            };
        }
        Some(c) => conditions::age(c, now).is_some_and(|a| a >= MIN_DRAIN_TIME),
        None => false,
    };
    if !waited_enough {
        return DrainedDecision::WaitMinDrainTime {
            requeue_after: DRAIN_REQUEUE,
        };
    }
    DrainedDecision::Drained {
        metrics: vec![Metric::add(
            metric_names::NODES_DRAINED_TOTAL,
            1.0,
            [("nodepool", nodepool.to_string())],
        )],
    }
}

/// What to do about volume attachments still on a terminating Node (upstream `node/termination`
/// "awaitVolumeDetachment").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VolumeDecision {
    /// None left: `VolumesDetached=True`, continue.
    Detached,
    /// Some left and the termination time has not passed: `VolumesDetached=Unknown`, requeue
    /// after 1 s.
    Waiting,
    /// Some left but the termination time passed: `VolumesDetached=False`
    /// (`TerminationGracePeriodElapsed`), continue.
    GracePeriodElapsed,
}

/// Decides the volume-detachment wait. `pending` counts the node's VolumeAttachments except
/// those of PVCs used by pods drain does not wait for.
pub fn volume_detachment_decision(
    pending: usize,
    node_termination_time: Option<Timestamp>,
    now: Timestamp,
) -> VolumeDecision {
    if pending == 0 {
        VolumeDecision::Detached
    } else if node_termination_time.is_some_and(|t| now > t) {
        VolumeDecision::GracePeriodElapsed
    } else {
        VolumeDecision::Waiting
    }
}

/// The first retry delay of a pod whose eviction was refused.
pub const EVICTION_BASE_DELAY: SignedDuration = SignedDuration::from_millis(100);
/// The longest retry delay of a pod whose eviction was refused.
pub const EVICTION_MAX_DELAY: SignedDuration = SignedDuration::from_secs(10);

/// The eviction queue's per-pod retry delay after `failures` refused evictions: 100 ms ×
/// 2^failures, at most 10 s.
pub fn eviction_backoff(failures: u32) -> SignedDuration {
    let ms = 100i64.checked_shl(failures.min(16)).unwrap_or(i64::MAX);
    SignedDuration::from_millis(ms).min(EVICTION_MAX_DELAY)
}

/// What the eviction API answered for one pod (a controller maps its errors onto these).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EvictionResponse {
    /// The eviction was accepted (200/201).
    Evicted,
    /// The pod is gone (404).
    NotFound,
    /// The pod's UID precondition failed: it was replaced (409).
    Conflict,
    /// A PodDisruptionBudget refuses the eviction (429).
    TooManyRequests {
        /// The API server's message.
        message: String,
    },
    /// The pod is covered by more than one PodDisruptionBudget (500 with that message).
    MultiplePdbs {
        /// The API server's message.
        message: String,
    },
    /// Any other error.
    Other {
        /// The HTTP status code (0 if none).
        code: u16,
        /// The error message.
        message: String,
    },
}

impl EvictionResponse {
    /// The `code` label of `pods_eviction_requests_total`.
    pub fn code(&self) -> u16 {
        match self {
            EvictionResponse::Evicted => 200,
            EvictionResponse::NotFound => 404,
            EvictionResponse::Conflict => 409,
            EvictionResponse::TooManyRequests { .. } => 429,
            EvictionResponse::MultiplePdbs { .. } => 500,
            EvictionResponse::Other { code, .. } => *code,
        }
    }
}

/// What the eviction queue does after an eviction call.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct EvictionDecision {
    /// The pod leaves the eviction queue.
    pub done: bool,
    /// Evict again after this delay ([`eviction_backoff`]).
    pub retry_after: Option<SignedDuration>,
    /// `Evicted` (on the pod) or `FailedDraining` (on the node).
    pub events: Vec<Event>,
    /// `pods_eviction_requests_total{code}`, and `pods_drained_total{reason}` on success.
    pub metrics: Vec<Metric>,
}

/// The eviction queue's handling of one response (upstream `node/termination` "Eviction queue"):
/// 404 and 409 end the pod's eviction; 429 and the multiple-PDB error publish `FailedDraining` on
/// the node and retry with [`eviction_backoff`]`(failures)`; other errors retry without an event;
/// success publishes `Evicted` and counts `pods_drained_total{reason = drained_reason}` (see
/// [`pods_drained_reason`]). `failures` counts the pod's earlier refused evictions.
pub fn eviction_decision(
    pod_key: &str,
    node_name: &str,
    response: &EvictionResponse,
    drained_reason: &str,
    failures: u32,
) -> EvictionDecision {
    let mut metrics = vec![Metric::add(
        metric_names::PODS_EVICTION_REQUESTS_TOTAL,
        1.0,
        [("code", response.code().to_string())],
    )];
    let retry = |events: Vec<Event>, metrics: Vec<Metric>| EvictionDecision {
        done: false,
        retry_after: Some(eviction_backoff(failures)),
        events,
        metrics,
    };
    match response {
        EvictionResponse::Evicted => {
            metrics.push(Metric::add(
                metric_names::PODS_DRAINED_TOTAL,
                1.0,
                [("reason", drained_reason.to_string())],
            ));
            EvictionDecision {
                done: true,
                retry_after: None,
                events: vec![Event::normal(
                    ObjectKind::Pod,
                    pod_key,
                    event_reasons::EVICTED,
                    format!("Evicted pod: {drained_reason}"),
                )],
                metrics,
            }
        }
        EvictionResponse::NotFound | EvictionResponse::Conflict => EvictionDecision {
            done: true,
            retry_after: None,
            events: Vec::new(),
            metrics,
        },
        EvictionResponse::TooManyRequests { message }
        | EvictionResponse::MultiplePdbs { message } => {
            let event = Event::warning(
                ObjectKind::Node,
                node_name,
                event_reasons::FAILED_DRAINING,
                format!("Failed to drain node, evicting pod {pod_key}: {message}"),
            );
            retry(vec![event], metrics)
        }
        EvictionResponse::Other { .. } => retry(Vec::new(), metrics),
    }
}

/// The `pods_drained_total` reason: the NodeClaim's `DisruptionReason` condition reason, else
/// `Forceful Termination`.
pub fn pods_drained_reason(claim: Option<&NodeClaim>) -> String {
    claim
        .and_then(|c| {
            crate::api::find_condition(&c.status.conditions, conditions::DISRUPTION_REASON)
        })
        .and_then(|c| c.reason.clone())
        .unwrap_or_else(|| FORCEFUL_TERMINATION_REASON.to_string())
}

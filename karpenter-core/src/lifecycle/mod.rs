//! The node lifecycle as pure state machines: NodeClaim launch, registration, initialization and
//! liveness; termination (finalization and drain); expiration; garbage collection; drift
//! detection and the NodePool hash; node repair; and the disruption command queue.
//!
//! Every function here is deterministic and performs no I/O: its input is objects (NodeClaims,
//! NodePools, [`Node`]s, [`Pod`](crate::model::Pod)s), the results of earlier calls a
//! controller made on its behalf, and `now`; its output is a decision *as data* (updated
//! objects, actions to execute, [`Event`]s and [`Metric`]s to publish, when to requeue). A
//! controller written on top executes the decisions against the API server and the cloud
//! provider.
//!
//! | Area | Module | Upstream controller |
//! |---|---|---|
//! | condition bookkeeping (`Launched`/`Registered`/`Initialized` → `Ready`) | [`conditions`] | operatorpkg `status.ConditionSet` |
//! | launch, registration, initialization, liveness, registration health | [`nodeclaim`] | `nodeclaim.lifecycle` |
//! | `Consolidatable` condition, `lastPodEventTime` | [`consolidatable`] | `nodeclaim.disruption` (consolidation), `nodeclaim.podevents` |
//! | NodeClaim finalization, node drain | [`termination`] | `nodeclaim.lifecycle` (finalize), `node.termination` |
//! | expiration | [`expiration`] | `nodeclaim.expiration` |
//! | garbage collection | [`gc`] | `nodeclaim.garbagecollection` |
//! | drift, NodePool hash | [`drift`] | `nodeclaim.disruption` (drift), `nodepool.hash` |
//! | node repair | [`repair`] | `node.health` |
//! | disruption command queue | [`queue`] | `disruption.Queue` |
//!
//! Times in Kubernetes objects are RFC 3339 strings; [`parse_time`] and [`format_time`] convert
//! them (an unparsable time reads as absent).

pub mod conditions;
pub mod consolidatable;
pub mod drift;
pub mod expiration;
pub mod gc;
pub mod nodeclaim;
pub mod queue;
pub mod repair;
pub mod termination;

use std::collections::BTreeMap;

use jiff::SignedDuration;
use serde::{Deserialize, Serialize};

use crate::api::{ConditionStatus, NodeClaim, OwnerReference};
use crate::labels;
use crate::model::Timestamp;
use crate::resources::ResourceList;
use crate::taints::Taint;

/// Karpenter's taints, defined with the other taints in [`crate::taints`].
pub use crate::taints::{disrupted_taint, unregistered_taint};

pub use conditions::ConditionSet;
pub use drift::{DriftCheck, DriftReason, drift_reason, nodepool_hash};
pub use expiration::{ExpirationDecision, expiration_decision};
pub use gc::{GcDeletion, garbage_collect};
pub use nodeclaim::{
    CreateOutcome, HookStatus, LifecycleStep, RegistrationHealth, RegistrationHook,
    initialization_decision, launch_decision, liveness_decision, registration_decision,
};
pub use queue::{QueueOutcome, QueuedCommand, ReplacementState, Step, reconcile, start_steps};
pub use repair::{RepairDecision, RepairPolicy, repair_decision};
pub use termination::{DrainPlan, drain_plan, termination_timestamp};

/// The finalizer Karpenter puts on NodeClaims and Nodes: `karpenter.sh/termination`.
pub const TERMINATION_FINALIZER: &str = "karpenter.sh/termination";

/// Annotation holding the instant a draining node's pods are force-deleted:
/// `karpenter.sh/nodeclaim-termination-timestamp` (RFC 3339).
pub const TERMINATION_TIMESTAMP_ANNOTATION: &str = "karpenter.sh/nodeclaim-termination-timestamp";

/// Annotation listing the DRA drivers a NodeClaim's pods need (comma-separated):
/// `karpenter.sh/requested-dra-drivers`.
pub const REQUESTED_DRA_DRIVERS_ANNOTATION: &str = "karpenter.sh/requested-dra-drivers";

// ---------------------------------------------------------------------------------------------
// Time
// ---------------------------------------------------------------------------------------------

/// Parses an RFC 3339 time as Kubernetes writes it (`2024-05-01T12:00:00Z`). `None` if it does
/// not parse.
pub fn parse_time(text: &str) -> Option<Timestamp> {
    text.parse::<Timestamp>().ok()
}

/// Formats a time as Kubernetes writes `metav1.Time`: RFC 3339 in UTC with whole seconds
/// (the sub-second part is truncated).
pub fn format_time(t: Timestamp) -> String {
    t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// `t + d`, saturating at the ends of the representable range instead of failing.
pub(crate) fn add(t: Timestamp, d: SignedDuration) -> Timestamp {
    t.checked_add(d).unwrap_or(if d.is_negative() {
        Timestamp::MIN
    } else {
        Timestamp::MAX
    })
}

/// `a - b` as a duration (negative when `a` is before `b`).
pub(crate) fn since(a: Timestamp, b: Timestamp) -> SignedDuration {
    a.duration_since(b)
}

/// The NodeClaim's `metadata.creationTimestamp`, if set and valid.
pub fn claim_creation_time(claim: &NodeClaim) -> Option<Timestamp> {
    claim
        .metadata
        .creation_timestamp
        .as_deref()
        .and_then(parse_time)
}

/// The NodeClaim's `metadata.deletionTimestamp`, if set and valid.
pub fn claim_deletion_time(claim: &NodeClaim) -> Option<Timestamp> {
    claim
        .metadata
        .deletion_timestamp
        .as_deref()
        .and_then(parse_time)
}

/// Whether the NodeClaim is being deleted (a deletion timestamp is set, valid or not).
pub fn claim_is_deleting(claim: &NodeClaim) -> bool {
    claim.metadata.deletion_timestamp.is_some()
}

// ---------------------------------------------------------------------------------------------
// Nodes
// ---------------------------------------------------------------------------------------------

/// A Node condition (`status.conditions[]` of a `core/v1` Node).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeCondition {
    /// The condition type (`Ready`, `MemoryPressure`, ...).
    #[serde(rename = "type")]
    pub type_: String,
    /// The status.
    pub status: ConditionStatus,
    /// When the status last changed.
    pub last_transition_time: Timestamp,
    /// A machine-readable reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// A human-readable message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

impl NodeCondition {
    /// A condition without reason or message.
    pub fn new(type_: impl Into<String>, status: ConditionStatus, since: Timestamp) -> Self {
        NodeCondition {
            type_: type_.into(),
            status,
            last_transition_time: since,
            reason: None,
            message: None,
        }
    }
}

/// A Kubernetes Node as the lifecycle controllers read it. The scheduler's view of a node is
/// [`crate::model::ClusterNode`], a snapshot entry is [`crate::state::StateNode`] (see
/// [`ClusterNode`](crate::model::ClusterNode) for how the three relate).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct Node {
    /// The Node's name.
    pub name: String,
    /// `spec.providerID`.
    #[serde(default, rename = "providerID")]
    pub provider_id: String,
    /// Labels.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Annotations.
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
    /// `spec.taints`.
    #[serde(default)]
    pub taints: Vec<Taint>,
    /// `status.capacity`.
    #[serde(default)]
    pub capacity: ResourceList,
    /// `status.allocatable`.
    #[serde(default)]
    pub allocatable: ResourceList,
    /// `metadata.creationTimestamp` (the epoch when unknown).
    #[serde(default = "epoch")]
    pub creation_timestamp: Timestamp,
    /// `status.conditions`.
    #[serde(default)]
    pub conditions: Vec<NodeCondition>,
    /// `metadata.finalizers`.
    #[serde(default)]
    pub finalizers: Vec<String>,
    /// `metadata.ownerReferences`.
    #[serde(default)]
    pub owner_references: Vec<OwnerReference>,
    /// `metadata.deletionTimestamp`.
    #[serde(default)]
    pub deletion_timestamp: Option<Timestamp>,
}

impl Node {
    /// A node with a name and provider id and nothing else (not Ready).
    pub fn new(name: impl Into<String>, provider_id: impl Into<String>) -> Node {
        Node {
            name: name.into(),
            provider_id: provider_id.into(),
            labels: BTreeMap::new(),
            annotations: BTreeMap::new(),
            taints: Vec::new(),
            capacity: ResourceList::new(),
            allocatable: ResourceList::new(),
            creation_timestamp: Timestamp::UNIX_EPOCH,
            conditions: Vec::new(),
            finalizers: Vec::new(),
            owner_references: Vec::new(),
            deletion_timestamp: None,
        }
    }

    /// The condition of type `type_`, if present.
    pub fn condition(&self, type_: &str) -> Option<&NodeCondition> {
        self.conditions.iter().find(|c| c.type_ == type_)
    }

    /// Whether the `Ready` condition is `True`.
    pub fn is_ready(&self) -> bool {
        self.condition(crate::api::condition_types::READY)
            .is_some_and(|c| c.status == ConditionStatus::True)
    }

    /// Whether the Node is being deleted.
    pub fn is_deleting(&self) -> bool {
        self.deletion_timestamp.is_some()
    }
}

fn epoch() -> Timestamp {
    Timestamp::UNIX_EPOCH
}

/// Changes to make to a Node. Each `Some` field holds the field's complete new value; `None`
/// fields are left alone. Built only when something changes.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct NodeUpdate {
    /// The Node to patch.
    pub node_name: String,
    /// New `metadata.labels`.
    pub labels: Option<BTreeMap<String, String>>,
    /// New `metadata.annotations`.
    pub annotations: Option<BTreeMap<String, String>>,
    /// New `spec.taints`.
    pub taints: Option<Vec<Taint>>,
    /// New `metadata.finalizers`.
    pub finalizers: Option<Vec<String>>,
    /// New `metadata.ownerReferences`.
    pub owner_references: Option<Vec<OwnerReference>>,
}

impl NodeUpdate {
    /// The update that turns `before` into `after` (`None` if they do not differ in the
    /// fields an update can carry).
    pub fn diff(before: &Node, after: &Node) -> Option<NodeUpdate> {
        let update = NodeUpdate {
            node_name: before.name.clone(),
            labels: (before.labels != after.labels).then(|| after.labels.clone()),
            annotations: (before.annotations != after.annotations)
                .then(|| after.annotations.clone()),
            taints: (before.taints != after.taints).then(|| after.taints.clone()),
            finalizers: (before.finalizers != after.finalizers).then(|| after.finalizers.clone()),
            owner_references: (before.owner_references != after.owner_references)
                .then(|| after.owner_references.clone()),
        };
        (!update.is_empty()).then_some(update)
    }

    /// Whether the update changes nothing.
    pub fn is_empty(&self) -> bool {
        self.labels.is_none()
            && self.annotations.is_none()
            && self.taints.is_none()
            && self.finalizers.is_none()
            && self.owner_references.is_none()
    }

    /// Applies the update to a node.
    pub fn apply(&self, node: &mut Node) {
        if let Some(v) = &self.labels {
            node.labels = v.clone();
        }
        if let Some(v) = &self.annotations {
            node.annotations = v.clone();
        }
        if let Some(v) = &self.taints {
            node.taints = v.clone();
        }
        if let Some(v) = &self.finalizers {
            node.finalizers = v.clone();
        }
        if let Some(v) = &self.owner_references {
            node.owner_references = v.clone();
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Events and metrics as data
// ---------------------------------------------------------------------------------------------

/// The kind of object an [`Event`] is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum ObjectKind {
    /// A `core/v1` Node.
    Node,
    /// A `karpenter.sh/v1` NodeClaim.
    NodeClaim,
    /// A `karpenter.sh/v1` NodePool.
    NodePool,
    /// A `core/v1` Pod (`name` is `namespace/name`).
    Pod,
}

/// Whether an event is normal or a warning.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum EventType {
    /// `Normal`.
    Normal,
    /// `Warning`.
    Warning,
}

/// A Kubernetes event to publish.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event {
    /// The kind of the involved object.
    pub kind: ObjectKind,
    /// The involved object's name (`namespace/name` for pods).
    pub name: String,
    /// Normal or Warning.
    pub event_type: EventType,
    /// The reason (`DisruptionTerminating`, `FailedDraining`, ...); see [`event_reasons`].
    pub reason: String,
    /// The message.
    pub message: String,
}

impl Event {
    /// A normal event.
    pub fn normal(
        kind: ObjectKind,
        name: impl Into<String>,
        reason: &str,
        message: impl Into<String>,
    ) -> Event {
        Event {
            kind,
            name: name.into(),
            event_type: EventType::Normal,
            reason: reason.to_string(),
            message: message.into(),
        }
    }

    /// A warning event.
    pub fn warning(
        kind: ObjectKind,
        name: impl Into<String>,
        reason: &str,
        message: impl Into<String>,
    ) -> Event {
        Event {
            event_type: EventType::Warning,
            ..Event::normal(kind, name, reason, message)
        }
    }
}

/// Event reasons used by the lifecycle (upstream `metrics`).
pub mod event_reasons {
    /// A disruption command is launching a replacement.
    pub const DISRUPTION_LAUNCHING: &str = "DisruptionLaunching";
    /// A disruption command waits for a replacement to initialize.
    pub const DISRUPTION_WAITING_READINESS: &str = "DisruptionWaitingReadiness";
    /// A disruption command deletes its candidates.
    pub const DISRUPTION_TERMINATING: &str = "DisruptionTerminating";
    /// A pod was evicted.
    pub const EVICTED: &str = "Evicted";
    /// Drain could not complete yet.
    pub const FAILED_DRAINING: &str = "FailedDraining";
    /// A NodeClaim's termination grace period is running.
    pub const TERMINATION_GRACE_PERIOD_EXPIRING: &str = "TerminationGracePeriodExpiring";
    /// Node repair is blocked by the unhealthy-node threshold.
    pub const NODE_REPAIR_BLOCKED: &str = "NodeRepairBlocked";
    /// A launch failed for lack of capacity.
    pub const INSUFFICIENT_CAPACITY_ERROR: &str = "InsufficientCapacityError";
    /// A registering Node lacks the unregistered taint.
    pub const UNREGISTERED_TAINT_MISSING: &str = "UnregisteredTaintMissing";
}

/// How a metric is updated.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub enum MetricOp {
    /// Add to a counter.
    Add(f64),
    /// Observe a value of a histogram or summary.
    Observe(f64),
}

/// A metric update to perform.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Metric {
    /// The full metric name (`karpenter_nodeclaims_disrupted_total`); see [`metric_names`].
    pub name: String,
    /// Label values.
    pub labels: BTreeMap<String, String>,
    /// The update.
    pub op: MetricOp,
}

impl Metric {
    /// A counter increment by `value`.
    pub fn add<'a>(
        name: &str,
        value: f64,
        labels: impl IntoIterator<Item = (&'a str, String)>,
    ) -> Metric {
        Metric {
            name: name.to_string(),
            labels: labels
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect(),
            op: MetricOp::Add(value),
        }
    }

    /// An observation of `value` by a histogram or summary.
    pub fn observe<'a>(
        name: &str,
        value: f64,
        labels: impl IntoIterator<Item = (&'a str, String)>,
    ) -> Metric {
        Metric {
            op: MetricOp::Observe(value),
            ..Metric::add(name, 0.0, labels)
        }
    }
}

/// Metric names (namespace `karpenter_`, upstream `metrics`).
pub mod metric_names {
    /// `{reason, nodepool, capacity_type, consolidation_policy, termination_mode}`.
    pub const NODECLAIMS_DISRUPTED_TOTAL: &str = "karpenter_nodeclaims_disrupted_total";
    /// Same labels as [`NODECLAIMS_DISRUPTED_TOTAL`], incremented by the number of pods.
    pub const PODS_DISRUPTION_INITIATED_TOTAL: &str = "karpenter_pods_disruption_initiated_total";
    /// `{nodepool, zone}`.
    pub const NODES_CREATED_TOTAL: &str = "karpenter_nodes_created_total";
    /// `{nodepool}`.
    pub const NODES_DRAINED_TOTAL: &str = "karpenter_nodes_drained_total";
    /// `{reason}`: pods evicted by drain.
    pub const PODS_DRAINED_TOTAL: &str = "karpenter_pods_drained_total";
    /// `{code}`: eviction API calls by response code.
    pub const PODS_EVICTION_REQUESTS_TOTAL: &str = "karpenter_pods_eviction_requests_total";
    /// `{nodepool, capacity_type, zone}`.
    pub const NODECLAIMS_TERMINATED_TOTAL: &str = "karpenter_nodeclaims_terminated_total";
    /// `{decision, reason, consolidation_type}`.
    pub const VOLUNTARY_DISRUPTION_DECISIONS_TOTAL: &str =
        "karpenter_voluntary_disruption_decisions_total";
    /// `{nodepool, decision, reason, consolidation_type}`.
    pub const VOLUNTARY_DISRUPTION_DECISIONS_BY_NODEPOOL_TOTAL: &str =
        "karpenter_voluntary_disruption_decisions_by_nodepool_total";
    /// `{decision, reason, consolidation_type}`.
    pub const QUEUE_FAILURES_TOTAL: &str = "karpenter_voluntary_disruption_queue_failures_total";
    /// No labels: seconds from a pod's creation until it was bound (its `PodScheduled`
    /// condition turned true), observed for pods seen pending once they left `Pending`.
    pub const PODS_BOUND_DURATION_SECONDS: &str = "karpenter_pods_bound_duration_seconds";
    /// No labels: seconds from a pod's creation until it was ready (its `Ready` condition
    /// turned true), observed for pods seen pending.
    pub const PODS_STARTUP_DURATION_SECONDS: &str = "karpenter_pods_startup_duration_seconds";
    /// `{condition, nodepool, capacity_type, image_id}`.
    pub const NODECLAIMS_UNHEALTHY_DISRUPTED_TOTAL: &str =
        "karpenter_nodeclaims_unhealthy_disrupted_total";
}

/// Values of the `reason` label of `karpenter_nodeclaims_disrupted_total` for deletions the
/// lifecycle decides.
pub mod metric_reasons {
    /// The launch found no capacity.
    pub const INSUFFICIENT_CAPACITY: &str = "insufficient_capacity";
    /// The node class was not ready at launch.
    pub const NODECLASS_NOT_READY: &str = "nodeclass_not_ready";
    /// Not launched within 5 minutes.
    pub const LAUNCH_TIMEOUT: &str = "launch_timeout";
    /// Not registered within 15 minutes.
    pub const REGISTRATION_TIMEOUT: &str = "registration_timeout";
    /// The instance vanished.
    pub const GARBAGE_COLLECTED: &str = "garbage_collected";
    /// `expireAfter` elapsed.
    pub const EXPIRED: &str = "expired";
    /// Node repair.
    pub const UNHEALTHY: &str = "unhealthy";
}

/// How a NodeClaim's node ends: `graceful` (no termination grace period), `forceful` (a grace
/// period ≤ 0) or `eventual` (a positive grace period). The `termination_mode` metric label.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum TerminationMode {
    /// No `terminationGracePeriod`: drain waits as long as it takes.
    Graceful,
    /// `terminationGracePeriod` ≤ 0.
    Forceful,
    /// A positive `terminationGracePeriod`.
    Eventual,
}

impl TerminationMode {
    /// The mode of a NodeClaim.
    pub fn of(claim: &NodeClaim) -> TerminationMode {
        match &claim.spec.termination_grace_period {
            None => TerminationMode::Graceful,
            Some(d) if d.as_nanos() <= 0 => TerminationMode::Forceful,
            Some(_) => TerminationMode::Eventual,
        }
    }

    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            TerminationMode::Graceful => "graceful",
            TerminationMode::Forceful => "forceful",
            TerminationMode::Eventual => "eventual",
        }
    }
}

/// `karpenter_nodeclaims_disrupted_total` (and, when `pods > 0`,
/// `karpenter_pods_disruption_initiated_total` by `pods`) for a NodeClaim: labels `reason`,
/// `nodepool` and `capacity_type` (from the claim's labels), `consolidation_policy` and
/// `termination_mode`.
pub fn disrupted_metrics(
    claim: &NodeClaim,
    reason: &str,
    consolidation_policy: &str,
    pods: usize,
) -> Vec<Metric> {
    let label = |k: &str| claim.metadata.labels.get(k).cloned().unwrap_or_default();
    let labels = || {
        [
            ("reason", reason.to_string()),
            ("nodepool", label(labels::NODEPOOL)),
            ("capacity_type", label(labels::CAPACITY_TYPE)),
            ("consolidation_policy", consolidation_policy.to_string()),
            (
                "termination_mode",
                TerminationMode::of(claim).as_str().to_string(),
            ),
        ]
    };
    let mut out = vec![Metric::add(
        metric_names::NODECLAIMS_DISRUPTED_TOTAL,
        1.0,
        labels(),
    )];
    if pods > 0 {
        out.push(Metric::add(
            metric_names::PODS_DISRUPTION_INITIATED_TOTAL,
            pods as f64,
            labels(),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_round_trip_truncates_to_seconds() {
        let t: Timestamp = "2024-05-01T12:00:00.750Z".parse().unwrap();
        assert_eq!(format_time(t), "2024-05-01T12:00:00Z");
        assert_eq!(
            parse_time("2024-05-01T12:00:00Z"),
            Some("2024-05-01T12:00:00Z".parse().unwrap())
        );
        assert_eq!(parse_time("yesterday"), None);
    }

    #[test]
    fn add_saturates() {
        assert_eq!(
            add(Timestamp::MAX, SignedDuration::from_hours(1)),
            Timestamp::MAX
        );
        assert_eq!(
            add(Timestamp::MIN, SignedDuration::from_hours(-1)),
            Timestamp::MIN
        );
    }

    #[test]
    fn node_update_diff() {
        let a = Node::new("n", "p");
        let mut b = a.clone();
        assert_eq!(NodeUpdate::diff(&a, &b), None);
        b.labels.insert("x".into(), "y".into());
        let u = NodeUpdate::diff(&a, &b).unwrap();
        assert!(u.labels.is_some() && u.taints.is_none());
        let mut c = a.clone();
        u.apply(&mut c);
        assert_eq!(c, b);
    }
}

//! The NodeClaim lifecycle (upstream `apis/v1/nodeclaim_status.go`, `nodeclaim/lifecycle`): launch,
//! registration, initialization and liveness, plus the per-NodePool registration-health ring
//! buffer.
//!
//! Each step takes the NodeClaim as it is now and what the controller observed, and returns a
//! [`LifecycleStep`]: the NodeClaim after the step (conditions, labels, status), a change to
//! make to the Node, whether to delete the NodeClaim, events, metrics, a registration-health
//! record and when to look again. [`reconcile_lifecycle`] chains the four steps the way
//! upstream's lifecycle controller runs them.
//!
//! ```
//! use karpenter_core::api::{NodeClaim, NodeClaimSpec, NodeClassReference};
//! use karpenter_core::lifecycle::nodeclaim::{CreateOutcome, launch_decision, liveness_decision};
//! use karpenter_core::lifecycle::conditions::{self, LAUNCHED};
//!
//! let t0: jiff::Timestamp = "2024-01-01T00:00:00Z".parse().unwrap();
//! let claim = NodeClaim::new("nc", NodeClaimSpec::new(NodeClassReference::new("g", "K", "c")));
//! let failed = launch_decision(&claim, &CreateOutcome::Failed { message: "boom".into() }, t0);
//! assert!(!conditions::is_true(&failed.claim.status.conditions, LAUNCHED));
//! // Five minutes later the claim has still not launched: delete it.
//! let later = t0 + jiff::SignedDuration::from_mins(5);
//! let step = liveness_decision(&failed.claim, later);
//! assert_eq!(step.delete.map(|d| d.reason), Some("launch_timeout"));
//! ```

use std::collections::{BTreeSet, VecDeque};

use jiff::SignedDuration;

use crate::api::{ConditionStatus, NodeClaim, OwnerReference};
use crate::labels;
use crate::model::Timestamp;

/// The known ephemeral taints, defined with the other taints in [`crate::taints`].
pub use crate::taints::{READINESS_TAINT_PREFIX, is_known_ephemeral_taint, known_ephemeral_taints};

use super::conditions::{
    self, ConditionSet, INITIALIZED, LAUNCHED, NODE_REGISTRATION_HEALTHY, REGISTERED,
};
use super::{
    Event, Metric, Node, NodeUpdate, ObjectKind, REQUESTED_DRA_DRIVERS_ANNOTATION,
    TERMINATION_FINALIZER, disrupted_metrics, event_reasons, metric_names, metric_reasons, since,
    unregistered_taint,
};

/// How long a NodeClaim may stay un-launched (since `Launched` last changed) before it is
/// deleted.
pub const LAUNCH_TIMEOUT: SignedDuration = SignedDuration::from_mins(5);
/// How long a NodeClaim may stay unregistered (since `Registered` last changed) before it is
/// deleted.
pub const REGISTRATION_TIMEOUT: SignedDuration = SignedDuration::from_mins(15);
/// The longest `Launched` message kept for an unexpected launch error, in characters.
pub const LAUNCH_FAILED_MESSAGE_LIMIT: usize = 300;

/// Condition reasons set by the lifecycle.
pub mod reasons {
    /// `Launched=Unknown`: the launch failed with an unexpected error.
    pub const LAUNCH_FAILED: &str = "LaunchFailed";
    /// `Registered`/`Initialized=Unknown`: no Node has the claim's provider id.
    pub const NODE_NOT_FOUND: &str = "NodeNotFound";
    /// `Registered=False`: several Nodes have the claim's provider id.
    pub const MULTIPLE_NODES_FOUND: &str = "MultipleNodesFound";
    /// `Registered=Unknown`: a cloud-provider registration hook has not passed.
    pub const REGISTRATION_HOOK_PENDING: &str = "RegistrationHookPending";
    /// `Initialized=Unknown`: the Node is not Ready.
    pub const NODE_NOT_READY: &str = "NodeNotReady";
    /// `Initialized=Unknown`: a startup taint is still on the Node.
    pub const STARTUP_TAINTS_EXIST: &str = "StartupTaintsExist";
    /// `Initialized=Unknown`: a known ephemeral taint is still on the Node.
    pub const KNOWN_EPHEMERAL_TAINTS_EXIST: &str = "KnownEphemeralTaintsExist";
    /// `Initialized=Unknown`: a requested extended resource has no allocatable yet.
    pub const RESOURCE_NOT_REGISTERED: &str = "ResourceNotRegistered";
    /// `Initialized=Unknown`: a requested DRA driver has not published its pool.
    pub const DRA_DRIVER_POOLS_NOT_PUBLISHED: &str = "DRADriverPoolsNotPublished";
    /// NodePool `NodeRegistrationHealthy=False` after registration timeouts.
    pub const REGISTRATION_FAILED: &str = "RegistrationFailed";
}

/// Messages that go with [`reasons`].
mod messages {
    pub const NODE_NOT_FOUND: &str = "Node not registered with cluster";
    pub const MULTIPLE_NODES_FOUND: &str = "Invariant violated, matched multiple nodes";
    pub const NODE_NOT_READY: &str = "Node status is NotReady";
}

/// The outcome of the cloud provider's `Create` for a NodeClaim, as the launch step consumes
/// it (a controller maps its `CloudProviderError` onto these).
#[derive(Debug, Clone, PartialEq)]
pub enum CreateOutcome {
    /// The instance was created; the claim as the provider returned it (labels, annotations,
    /// `status.providerID`, `imageID`, `capacity`, `allocatable`).
    Created(Box<NodeClaim>),
    /// No capacity for any offering: the claim is deleted.
    InsufficientCapacity {
        /// The provider's message.
        message: String,
    },
    /// The node class is not ready: the claim is deleted.
    NodeClassNotReady {
        /// The provider's message.
        message: String,
    },
    /// A launch error carrying its own condition reason and message; retried.
    CreateError {
        /// The `Launched` condition reason.
        reason: String,
        /// The `Launched` condition message.
        message: String,
    },
    /// Any other error; retried, recorded as reason `LaunchFailed`.
    Failed {
        /// The error message (truncated to 300 characters in the condition).
        message: String,
    },
}

/// The result of one cloud-provider registration hook.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HookStatus {
    /// The hook allows registration.
    Passed,
    /// The hook is not satisfied yet; ask again after `requeue_after`.
    Pending {
        /// When to evaluate the hook again.
        requeue_after: SignedDuration,
    },
    /// The hook failed to evaluate.
    Error {
        /// The error.
        message: String,
    },
}

/// A named registration hook and its result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegistrationHook {
    /// The hook's name.
    pub name: String,
    /// Its result.
    pub status: HookStatus,
}

/// Deleting the NodeClaim, with the `nodeclaims_disrupted_total` reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ClaimDeletion {
    /// The metric reason (`launch_timeout`, `insufficient_capacity`, ...).
    pub reason: &'static str,
}

/// A launch/registration outcome to record in the NodePool's [`RegistrationHealth`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HealthRecord {
    /// Whether the node registered (`true`) or timed out (`false`).
    pub success: bool,
    /// For failures: the reason to give `NodeRegistrationHealthy=False`.
    pub reason: String,
    /// For failures: the message to give `NodeRegistrationHealthy=False`.
    pub message: String,
}

/// What one lifecycle step decided.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct LifecycleStep {
    /// The NodeClaim after the step.
    pub claim: NodeClaim,
    /// Whether `claim` differs from the input (write metadata and status).
    pub claim_changed: bool,
    /// A change to make to the claim's Node.
    pub node_update: Option<NodeUpdate>,
    /// Delete the NodeClaim.
    pub delete: Option<ClaimDeletion>,
    /// Events to publish.
    pub events: Vec<Event>,
    /// Metrics to update.
    pub metrics: Vec<Metric>,
    /// A registration outcome to record for the claim's NodePool.
    pub health: Option<HealthRecord>,
    /// Look at the claim again after this long.
    pub requeue_after: Option<SignedDuration>,
    /// The step failed; the controller should retry with backoff (the claim changes above are
    /// still to be written).
    pub error: Option<String>,
}

impl LifecycleStep {
    fn unchanged(claim: &NodeClaim) -> LifecycleStep {
        LifecycleStep::unchanged_owned(claim.clone())
    }

    /// [`LifecycleStep::unchanged`] taking the claim.
    fn unchanged_owned(claim: NodeClaim) -> LifecycleStep {
        LifecycleStep {
            claim,
            claim_changed: false,
            node_update: None,
            delete: None,
            events: Vec::new(),
            metrics: Vec::new(),
            health: None,
            requeue_after: None,
            error: None,
        }
    }

    fn with_claim(original: &NodeClaim, claim: NodeClaim) -> LifecycleStep {
        let changed = &claim != original;
        LifecycleStep {
            claim_changed: changed,
            ..LifecycleStep::unchanged(&claim)
        }
    }

    fn requeue_min(&mut self, d: Option<SignedDuration>) {
        self.requeue_after = match (self.requeue_after, d) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
    }
}

/// Adds the `karpenter.sh/termination` finalizer if missing (upstream adds it before anything
/// else, so that no instance is launched for a claim that could vanish without cleanup).
/// Returns whether it was added.
pub fn ensure_finalizer(claim: &mut NodeClaim) -> bool {
    if claim
        .metadata
        .finalizers
        .iter()
        .any(|f| f == TERMINATION_FINALIZER)
    {
        return false;
    }
    claim
        .metadata
        .finalizers
        .push(TERMINATION_FINALIZER.to_string());
    true
}

/// Whether the launch step has work to do: `Launched` is absent or `Unknown`. Call the cloud
/// provider's `Create` only then.
pub fn needs_launch(claim: &NodeClaim) -> bool {
    conditions::is_unknown(&claim.status.conditions, LAUNCHED)
}

fn truncate_chars(s: &str, limit: usize) -> String {
    s.chars().take(limit).collect()
}

/// The launch step (upstream `nodeclaim/lifecycle` "Launch"): applies the outcome of `Create`.
///
/// - `Launched` not `Unknown`: nothing (the outcome is ignored).
/// - Created: the provider's labels are added (the claim's own labels win), its annotations
///   merged in (the provider's win), `providerID`, `imageID`, `capacity` and `allocatable`
///   copied; `Launched=True`.
/// - Insufficient capacity: `InsufficientCapacityError` event, delete (`insufficient_capacity`).
/// - Node class not ready: delete (`nodeclass_not_ready`).
/// - Create error: `Launched=Unknown` with its reason and message; retry.
/// - Other error: `Launched=Unknown`, reason `LaunchFailed`, message truncated to 300
///   characters; retry.
pub fn launch_decision(
    claim: &NodeClaim,
    outcome: &CreateOutcome,
    now: Timestamp,
) -> LifecycleStep {
    if !needs_launch(claim) {
        return LifecycleStep::unchanged(claim);
    }
    let mut next = claim.clone();
    let mut set = ConditionSet::for_nodeclaim(&mut next, now);
    let mut error = None;
    match outcome {
        CreateOutcome::Created(launched) => {
            set.set_true(LAUNCHED);
            let mut labs = launched.metadata.labels.clone();
            labs.extend(claim.metadata.labels.clone());
            next.metadata.labels = labs;
            next.metadata
                .annotations
                .extend(launched.metadata.annotations.clone());
            next.status.provider_id = launched.status.provider_id.clone();
            next.status.image_id = launched.status.image_id.clone();
            next.status.capacity = launched.status.capacity.clone();
            next.status.allocatable = launched.status.allocatable.clone();
        }
        CreateOutcome::InsufficientCapacity { message } => {
            let mut step = LifecycleStep::unchanged(claim);
            step.delete = Some(ClaimDeletion {
                reason: metric_reasons::INSUFFICIENT_CAPACITY,
            });
            step.events.push(Event::warning(
                ObjectKind::NodeClaim,
                claim.name(),
                event_reasons::INSUFFICIENT_CAPACITY_ERROR,
                format!("NodeClaim {} event: {message}", claim.name()),
            ));
            step.metrics = disrupted_metrics(claim, metric_reasons::INSUFFICIENT_CAPACITY, "", 0);
            return step;
        }
        CreateOutcome::NodeClassNotReady { .. } => {
            let mut step = LifecycleStep::unchanged(claim);
            step.delete = Some(ClaimDeletion {
                reason: metric_reasons::NODECLASS_NOT_READY,
            });
            step.metrics = disrupted_metrics(claim, metric_reasons::NODECLASS_NOT_READY, "", 0);
            return step;
        }
        CreateOutcome::CreateError { reason, message } => {
            set.set_unknown_with_reason(LAUNCHED, reason, message);
            error = Some(format!("creating nodeclaim: {reason}: {message}"));
        }
        CreateOutcome::Failed { message } => {
            set.set_unknown_with_reason(
                LAUNCHED,
                reasons::LAUNCH_FAILED,
                &truncate_chars(message, LAUNCH_FAILED_MESSAGE_LIMIT),
            );
            error = Some(format!("launching nodeclaim: {message}"));
        }
    }
    let mut step = LifecycleStep::with_claim(claim, next);
    step.error = error;
    step
}

/// The Node after registration's sync: finalizer, owner reference, taints (unless the Node has
/// `karpenter.sh/do-not-sync-taints=true`), labels and annotations (the claim's win).
fn sync_node(claim: &NodeClaim, node: &Node) -> Node {
    let mut synced = node.clone();
    if !synced.finalizers.iter().any(|f| f == TERMINATION_FINALIZER) {
        synced.finalizers.push(TERMINATION_FINALIZER.to_string());
    }
    let owner = OwnerReference {
        api_version: crate::api::API_VERSION.to_string(),
        kind: crate::api::NODECLAIM_KIND.to_string(),
        name: claim.name().to_string(),
        uid: claim.metadata.uid.clone().unwrap_or_default(),
        controller: None,
        block_owner_deletion: Some(true),
    };
    if !synced
        .owner_references
        .iter()
        .any(|o| o.kind == owner.kind && o.name == owner.name && o.uid == owner.uid)
    {
        synced.owner_references.push(owner);
    }
    let sync_taints = synced
        .labels
        .get(labels::DO_NOT_SYNC_TAINTS)
        .is_none_or(|v| v != "true");
    if sync_taints {
        for t in claim.spec.taints.iter().chain(&claim.spec.startup_taints) {
            if !synced.taints.iter().any(|n| n.matches(t)) {
                synced.taints.push(t.clone());
            }
        }
    }
    synced.labels.extend(claim.metadata.labels.clone());
    synced
        .annotations
        .extend(claim.metadata.annotations.clone());
    synced
}

/// The registration step (upstream `nodeclaim/lifecycle` "Registration"). `nodes` are the Nodes
/// whose provider id is the claim's; `hooks` the results of the cloud provider's registration hooks
/// for it.
///
/// Nothing unless `Launched=True` and `Registered` is absent or `Unknown`. No Node →
/// `Registered=Unknown` (`NodeNotFound`); several → `Registered=False` (`MultipleNodesFound`).
/// Otherwise the Node is synced (finalizer, owner reference, taints and startup taints,
/// labels, annotations); a Node with neither the `karpenter.sh/registered` label nor the
/// unregistered taint gets an `UnregisteredTaintMissing` event. A hook that has not passed keeps
/// `Registered=Unknown` (`RegistrationHookPending`) and the unregistered taint, requeueing at the
/// shortest hook interval; when all pass the unregistered taint is removed, the label
/// `karpenter.sh/registered=true` set, `Registered=True`, `status.nodeName` set,
/// `nodes_created_total` counted and a registration success recorded.
pub fn registration_decision(
    claim: &NodeClaim,
    nodes: &[Node],
    hooks: &[RegistrationHook],
    now: Timestamp,
) -> LifecycleStep {
    if registration_idle(claim, nodes) {
        return LifecycleStep::unchanged(claim);
    }
    if conditions::is_true(&claim.status.conditions, REGISTERED) {
        return reregistration(claim, nodes);
    }
    let mut next = claim.clone();
    let node = match nodes {
        [] => {
            ConditionSet::for_nodeclaim(&mut next, now).set_unknown_with_reason(
                REGISTERED,
                reasons::NODE_NOT_FOUND,
                messages::NODE_NOT_FOUND,
            );
            return LifecycleStep::with_claim(claim, next);
        }
        [node] => node,
        _ => {
            ConditionSet::for_nodeclaim(&mut next, now).set_false(
                REGISTERED,
                reasons::MULTIPLE_NODES_FOUND,
                messages::MULTIPLE_NODES_FOUND,
            );
            return LifecycleStep::with_claim(claim, next);
        }
    };
    let mut events = Vec::new();
    let unregistered = unregistered_taint();
    if !node.labels.contains_key(labels::REGISTERED)
        && !node.taints.iter().any(|t| t.matches(&unregistered))
    {
        events.push(Event::warning(
            ObjectKind::NodeClaim,
            claim.name(),
            event_reasons::UNREGISTERED_TAINT_MISSING,
            format!(
                "Missing {} taint which prevents registration related race conditions on Karpenter-managed nodes",
                unregistered
            ),
        ));
    }
    let mut synced = sync_node(claim, node);
    let pending: Vec<&RegistrationHook> = hooks
        .iter()
        .filter(|h| h.status != HookStatus::Passed)
        .collect();
    let mut step;
    if pending.is_empty() {
        synced.taints.retain(|t| !t.matches(&unregistered));
        synced
            .labels
            .insert(labels::REGISTERED.to_string(), "true".to_string());
        ConditionSet::for_nodeclaim(&mut next, now).set_true(REGISTERED);
        next.status.node_name = Some(node.name.clone());
        step = LifecycleStep::with_claim(claim, next);
        step.metrics.push(Metric::add(
            metric_names::NODES_CREATED_TOTAL,
            1.0,
            [
                (
                    "nodepool",
                    claim
                        .metadata
                        .labels
                        .get(labels::NODEPOOL)
                        .cloned()
                        .unwrap_or_default(),
                ),
                (
                    "zone",
                    synced.labels.get(labels::ZONE).cloned().unwrap_or_default(),
                ),
            ],
        ));
        step.health = Some(HealthRecord {
            success: true,
            reason: String::new(),
            message: String::new(),
        });
    } else {
        let names: Vec<String> = pending
            .iter()
            .map(|h| match &h.status {
                HookStatus::Error { message } => format!("{} ({message})", h.name),
                _ => h.name.clone(),
            })
            .collect();
        ConditionSet::for_nodeclaim(&mut next, now).set_unknown_with_reason(
            REGISTERED,
            reasons::REGISTRATION_HOOK_PENDING,
            &format!("Registration hooks pending: {}", names.join(", ")),
        );
        step = LifecycleStep::with_claim(claim, next);
        step.requeue_after = pending
            .iter()
            .filter_map(|h| match h.status {
                HookStatus::Pending { requeue_after } => Some(requeue_after),
                _ => None,
            })
            .min();
        if pending
            .iter()
            .any(|h| matches!(h.status, HookStatus::Error { .. }))
        {
            step.error = Some(format!("registration hooks failed: {}", names.join(", ")));
        }
    }
    step.node_update = NodeUpdate::diff(node, &synced);
    step.events = events;
    step
}

/// A registered claim whose Node carries the unregistered taint without Karpenter's labels: either
/// the Node object was removed behind Karpenter's back (its finalizer bypassed) and created again
/// by the kubelet, or the registration's Node patch was lost (a controller that recorded
/// `Registered=True` before patching the Node and died in between). The Node is synced as at
/// registration, without counting the node again (and marked initialized when the
/// claim is), else it would keep the taint and hold its pods off for good. Upstream skips
/// registered claims; this is a stated deviation (a stuck node is never what a user wants).
/// Whether [`registration_decision`] leaves `claim` and `nodes` as they are: registered with
/// nothing to re-register, or not waiting for its Node (`Registered` not `Unknown`, or not
/// launched).
fn registration_idle(claim: &NodeClaim, nodes: &[Node]) -> bool {
    let conds = &claim.status.conditions;
    if conditions::is_true(conds, REGISTERED) {
        let [node] = nodes else {
            return true;
        };
        let unregistered = unregistered_taint();
        return node.labels.contains_key(labels::REGISTERED)
            || !node.taints.iter().any(|t| t.matches(&unregistered));
    }
    !conditions::is_unknown(conds, REGISTERED) || !conditions::is_true(conds, LAUNCHED)
}

/// The re-registration of a registered claim whose Node lost its registration (see
/// [`registration_idle`] for when there is nothing to do).
fn reregistration(claim: &NodeClaim, nodes: &[Node]) -> LifecycleStep {
    let unregistered = unregistered_taint();
    let [node] = nodes else {
        return LifecycleStep::unchanged(claim);
    };
    let mut synced = sync_node(claim, node);
    synced.taints.retain(|t| !t.matches(&unregistered));
    synced
        .labels
        .insert(labels::REGISTERED.to_string(), "true".to_string());
    if conditions::is_true(&claim.status.conditions, INITIALIZED) {
        synced
            .labels
            .insert(labels::INITIALIZED.to_string(), "true".to_string());
    }
    let mut next = claim.clone();
    next.status.node_name = Some(node.name.clone());
    let mut step = LifecycleStep::with_claim(claim, next);
    step.node_update = NodeUpdate::diff(node, &synced);
    step
}

/// The DRA drivers a claim requests (annotation `karpenter.sh/requested-dra-drivers`,
/// comma-separated), sorted.
pub fn requested_dra_drivers(claim: &NodeClaim) -> BTreeSet<String> {
    claim
        .metadata
        .annotations
        .get(REQUESTED_DRA_DRIVERS_ANNOTATION)
        .map(|v| {
            v.split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(String::from)
                .collect()
        })
        .unwrap_or_default()
}

/// The first unmet initialization requirement, as (reason, message).
fn initialization_blocker(
    claim: &NodeClaim,
    node: &Node,
    dra_published: Option<&BTreeSet<String>>,
) -> Option<(&'static str, String)> {
    if !node.is_ready() {
        return Some((
            reasons::NODE_NOT_READY,
            messages::NODE_NOT_READY.to_string(),
        ));
    }
    for startup in &claim.spec.startup_taints {
        if let Some(t) = node.taints.iter().find(|t| startup.matches(t)) {
            return Some((
                reasons::STARTUP_TAINTS_EXIST,
                format!("StartupTaint {:?} still exists", t.to_string()),
            ));
        }
    }
    if let Some(t) = node.taints.iter().find(|t| is_known_ephemeral_taint(t)) {
        return Some((
            reasons::KNOWN_EPHEMERAL_TAINTS_EXIST,
            format!("KnownEphemeralTaint {:?} still exists", t.to_string()),
        ));
    }
    for (name, q) in claim.spec.resources.requests.iter() {
        if !q.is_zero() && node.allocatable.get_or_zero(name).is_zero() {
            return Some((
                reasons::RESOURCE_NOT_REGISTERED,
                format!("Resource {name:?} was requested but not registered"),
            ));
        }
    }
    if let Some(published) = dra_published {
        let missing: Vec<String> = requested_dra_drivers(claim)
            .into_iter()
            .filter(|d| !published.contains(d))
            .collect();
        if !missing.is_empty() {
            return Some((
                reasons::DRA_DRIVER_POOLS_NOT_PUBLISHED,
                format!("DRA driver pools not published for: {}", missing.join(", ")),
            ));
        }
    }
    None
}

/// The initialization step (upstream `nodeclaim/lifecycle` "Initialization"). `nodes` are the Nodes
/// with the claim's provider id; `dra_published` is `None` when DRA support is off, else the DRA
/// drivers that have published a complete ResourceSlice pool for the Node.
///
/// Nothing unless `Registered=True` and `Initialized` is absent or `Unknown`. Otherwise
/// `Initialized=Unknown` with the first unmet requirement's reason: `NodeNotFound` (not exactly
/// one Node), `NodeNotReady`, `StartupTaintsExist`, `KnownEphemeralTaintsExist`,
/// `ResourceNotRegistered` (a non-zero requested resource with zero allocatable),
/// `DRADriverPoolsNotPublished`. All met: Node label `karpenter.sh/initialized=true`,
/// `Initialized=True`. There is no initialization timeout.
pub fn initialization_decision(
    claim: &NodeClaim,
    nodes: &[Node],
    dra_published: Option<&BTreeSet<String>>,
    now: Timestamp,
) -> LifecycleStep {
    if initialization_idle(claim) {
        return LifecycleStep::unchanged(claim);
    }
    let mut next = claim.clone();
    let [node] = nodes else {
        ConditionSet::for_nodeclaim(&mut next, now).set_unknown_with_reason(
            INITIALIZED,
            reasons::NODE_NOT_FOUND,
            messages::NODE_NOT_FOUND,
        );
        return LifecycleStep::with_claim(claim, next);
    };
    if let Some((reason, message)) = initialization_blocker(claim, node, dra_published) {
        ConditionSet::for_nodeclaim(&mut next, now).set_unknown_with_reason(
            INITIALIZED,
            reason,
            &message,
        );
        return LifecycleStep::with_claim(claim, next);
    }
    let mut labelled = node.clone();
    labelled
        .labels
        .insert(labels::INITIALIZED.to_string(), "true".to_string());
    ConditionSet::for_nodeclaim(&mut next, now).set_true(INITIALIZED);
    let mut step = LifecycleStep::with_claim(claim, next);
    step.node_update = NodeUpdate::diff(node, &labelled);
    step
}

/// Whether [`initialization_decision`] leaves `claim` as it is: `Initialized` is not `Unknown`,
/// or the claim is not registered yet.
fn initialization_idle(claim: &NodeClaim) -> bool {
    !conditions::is_unknown(&claim.status.conditions, INITIALIZED)
        || !conditions::is_true(&claim.status.conditions, REGISTERED)
}

/// Whether [`liveness_decision`] leaves `claim` as it is: once registered.
fn liveness_idle(claim: &NodeClaim) -> bool {
    conditions::is_true(&claim.status.conditions, REGISTERED)
}

/// The liveness step (upstream `nodeclaim/lifecycle` "Liveness"). Nothing once `Registered=True`.
/// If `Launched` is not `True` and its `lastTransitionTime` is at least 5 minutes old, delete the
/// claim (`launch_timeout`); if `Registered` is not `True` and at least 15 minutes old, delete it
/// (`registration_timeout`). Either records a registration failure for the NodePool (reason: the
/// `Launched` condition's reason, or `RegistrationFailed`). Otherwise requeue when the nearer
/// timeout falls due.
pub fn liveness_decision(claim: &NodeClaim, now: Timestamp) -> LifecycleStep {
    let conds = &claim.status.conditions;
    if liveness_idle(claim) {
        return LifecycleStep::unchanged(claim);
    }
    let mut step = LifecycleStep::unchanged(claim);
    let mut timeout = |type_: &str, ttl: SignedDuration| -> Option<bool> {
        let cond = crate::api::find_condition(conds, type_)?;
        if cond.status == ConditionStatus::True {
            return None;
        }
        let since_change = conditions::last_transition(cond).map(|t| since(now, t))?;
        if since_change >= ttl {
            Some(true)
        } else {
            step.requeue_min(Some(ttl - since_change));
            Some(false)
        }
    };
    let launch_expired = timeout(LAUNCHED, LAUNCH_TIMEOUT) == Some(true);
    let registration_expired = timeout(REGISTERED, REGISTRATION_TIMEOUT) == Some(true);
    let (reason, health_reason, health_message) = if launch_expired {
        let launched = crate::api::find_condition(conds, LAUNCHED);
        (
            metric_reasons::LAUNCH_TIMEOUT,
            launched
                .and_then(|c| c.reason.clone())
                .unwrap_or_else(|| reasons::LAUNCH_FAILED.to_string()),
            launched
                .and_then(|c| c.message.clone())
                .unwrap_or_else(|| "Failed to launch node".to_string()),
        )
    } else if registration_expired {
        (
            metric_reasons::REGISTRATION_TIMEOUT,
            reasons::REGISTRATION_FAILED.to_string(),
            "Failed to register node".to_string(),
        )
    } else {
        return step;
    };
    step.requeue_after = None;
    step.delete = Some(ClaimDeletion { reason });
    step.metrics = disrupted_metrics(claim, reason, "", 0);
    step.health = Some(HealthRecord {
        success: false,
        reason: health_reason,
        message: health_message,
    });
    step
}

/// What [`reconcile_lifecycle`] needs besides the claim.
#[derive(Debug, Clone, Copy, Default)]
pub struct LifecycleInputs<'a> {
    /// The outcome of `Create`, when the controller called it (it should when
    /// [`needs_launch`] says so).
    pub create: Option<&'a CreateOutcome>,
    /// The Nodes with the claim's provider id.
    pub nodes: &'a [Node],
    /// Registration hook results.
    pub hooks: &'a [RegistrationHook],
    /// DRA drivers with published pools (`None`: DRA support off).
    pub dra_published: Option<&'a BTreeSet<String>>,
}

/// One pass of the lifecycle controller over a managed NodeClaim that is not being deleted:
/// finalizer, condition initialization, then launch (when `inputs.create` is given),
/// registration, initialization and liveness, each seeing the previous step's claim and Node.
/// Stops at the first step that deletes the claim. Node updates are combined into one.
pub fn reconcile_lifecycle(
    claim: &NodeClaim,
    inputs: LifecycleInputs<'_>,
    now: Timestamp,
) -> LifecycleStep {
    if super::claim_is_deleting(claim) {
        return LifecycleStep::unchanged(claim);
    }
    let mut current = claim.clone();
    ensure_finalizer(&mut current);
    ConditionSet::for_nodeclaim(&mut current, now);
    let original_nodes = inputs.nodes;
    // The Nodes as the steps leave them, copied only when a step updates one.
    let mut nodes: std::borrow::Cow<'_, [Node]> = std::borrow::Cow::Borrowed(original_nodes);
    let mut total = LifecycleStep::unchanged_owned(current);

    fn absorb(
        total: &mut LifecycleStep,
        step: LifecycleStep,
        nodes: &mut std::borrow::Cow<'_, [Node]>,
    ) {
        if let Some(update) = &step.node_update
            && nodes.len() == 1
            && let [node] = nodes.to_mut().as_mut_slice()
        {
            update.apply(node);
        }
        total.claim = step.claim;
        total.delete = total.delete.or(step.delete);
        total.events.extend(step.events);
        total.metrics.extend(step.metrics);
        total.health = total.health.take().or(step.health);
        total.requeue_min(step.requeue_after);
        total.error = total.error.take().or(step.error);
    }

    if let Some(outcome) = inputs.create {
        let step = launch_decision(&total.claim, outcome, now);
        absorb(&mut total, step, &mut nodes);
    }
    // A step that would leave everything as it is is skipped (absorbing it changes nothing):
    // a settled claim is not copied once per step.
    if total.delete.is_none() && !registration_idle(&total.claim, &nodes) {
        let step = registration_decision(&total.claim, &nodes, inputs.hooks, now);
        absorb(&mut total, step, &mut nodes);
    }
    if total.delete.is_none() && !initialization_idle(&total.claim) {
        let step = initialization_decision(&total.claim, &nodes, inputs.dra_published, now);
        absorb(&mut total, step, &mut nodes);
    }
    if total.delete.is_none() && !liveness_idle(&total.claim) {
        let step = liveness_decision(&total.claim, now);
        absorb(&mut total, step, &mut nodes);
    }
    if let (std::borrow::Cow::Owned(nodes), [before]) = (&nodes, original_nodes)
        && let [after] = nodes.as_slice()
    {
        total.node_update = NodeUpdate::diff(before, after);
    }
    total.claim_changed = &total.claim != claim;
    total
}

// ---------------------------------------------------------------------------------------------
// NodePool registration health
// ---------------------------------------------------------------------------------------------

/// Entries kept per NodePool.
pub const REGISTRATION_HEALTH_BUFFER: usize = 4;

/// A NodePool's registration health.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum HealthStatus {
    /// Nothing recorded.
    Unknown,
    /// Fewer than half of the buffer's slots are failures.
    Healthy,
    /// At least half of the buffer's slots (2 of 4) are failures.
    Unhealthy,
}

/// The last [`REGISTRATION_HEALTH_BUFFER`] launch outcomes of a NodePool (a ring buffer).
/// Failures are counted against the buffer's *capacity*, so one failure alone is still healthy.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RegistrationHealth {
    entries: VecDeque<bool>,
}

/// A change to the NodePool's `NodeRegistrationHealthy` condition.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct HealthCondition {
    /// Always `NodeRegistrationHealthy`.
    pub type_: &'static str,
    /// The new status.
    pub status: ConditionStatus,
    /// The reason.
    pub reason: String,
    /// The message.
    pub message: String,
}

impl RegistrationHealth {
    /// An empty buffer.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records an outcome, dropping the oldest beyond the capacity.
    pub fn record(&mut self, success: bool) {
        if self.entries.len() == REGISTRATION_HEALTH_BUFFER {
            self.entries.pop_front();
        }
        self.entries.push_back(success);
    }

    /// The recorded outcomes, oldest first.
    pub fn entries(&self) -> impl Iterator<Item = bool> + '_ {
        self.entries.iter().copied()
    }

    /// The status: `Unknown` when empty; `Unhealthy` when failures / 4 ≥ 0.5.
    pub fn status(&self) -> HealthStatus {
        if self.entries.is_empty() {
            return HealthStatus::Unknown;
        }
        let failures = self.entries.iter().filter(|s| !**s).count();
        if failures * 2 >= REGISTRATION_HEALTH_BUFFER {
            HealthStatus::Unhealthy
        } else {
            HealthStatus::Healthy
        }
    }

    /// The status the buffer would have after recording `success`.
    pub fn dry_run(&self, success: bool) -> HealthStatus {
        let mut copy = self.clone();
        copy.record(success);
        copy.status()
    }

    /// Resets the buffer to represent `status`: empty (Unknown), one success (Healthy) or two
    /// failures (Unhealthy).
    pub fn set_status(&mut self, status: HealthStatus) {
        self.entries.clear();
        match status {
            HealthStatus::Unknown => {}
            HealthStatus::Healthy => self.record(true),
            HealthStatus::Unhealthy => {
                self.record(false);
                self.record(false);
            }
        }
    }

    /// Records a [`HealthRecord`] and returns the `NodeRegistrationHealthy` condition the
    /// NodePool should get: `False` (with the record's reason and message) after a failure
    /// that leaves the pool unhealthy, `True` after a success that leaves it healthy, otherwise
    /// nothing.
    pub fn apply(&mut self, record: &HealthRecord) -> Option<HealthCondition> {
        self.record(record.success);
        match (record.success, self.status()) {
            (false, HealthStatus::Unhealthy) => Some(HealthCondition {
                type_: NODE_REGISTRATION_HEALTHY,
                status: ConditionStatus::False,
                reason: record.reason.clone(),
                message: record.message.clone(),
            }),
            (true, HealthStatus::Healthy) => Some(HealthCondition {
                type_: NODE_REGISTRATION_HEALTHY,
                status: ConditionStatus::True,
                reason: NODE_REGISTRATION_HEALTHY.to_string(),
                message: String::new(),
            }),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn health_ring_buffer() {
        let mut h = RegistrationHealth::new();
        assert_eq!(h.status(), HealthStatus::Unknown);
        h.record(true);
        assert_eq!(h.status(), HealthStatus::Healthy);
        h.record(false);
        assert_eq!(h.status(), HealthStatus::Healthy, "1 of 4 failures");
        h.record(false);
        assert_eq!(h.status(), HealthStatus::Unhealthy, "2 of 4 failures");
        h.set_status(HealthStatus::Unhealthy);
        h.record(true);
        assert_eq!(h.status(), HealthStatus::Unhealthy);
        // Failures roll out of the buffer.
        h.record(true);
        h.record(true);
        assert_eq!(h.status(), HealthStatus::Healthy);
        assert_eq!(h.entries().count(), 4);
        assert_eq!(h.dry_run(false), HealthStatus::Healthy);
    }

    #[test]
    fn truncation_is_char_safe() {
        let s = "é".repeat(400);
        assert_eq!(truncate_chars(&s, 300).chars().count(), 300);
    }
}

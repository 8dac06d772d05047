//! The operator's inputs ([`Input`]) and outputs ([`Action`]), and the cloud calls it asks a
//! shell to make ([`CloudCall`]) with their answers ([`CloudResponse`]).

use std::sync::Arc;

use crate::api::{NodeClaim, NodePool, NodePoolStatus};
use crate::cloud::{CloudProvider, CloudProviderError};
use crate::lifecycle::termination::EvictionResponse;
use crate::lifecycle::{self, Metric, Node, NodeUpdate};
use crate::model::{DaemonSet, InstanceType, Pod, PodDisruptionBudget, Timestamp};

/// Identifies an [`Action`] that expects an answer: a cloud call ([`Action::Cloud`]) or an
/// eviction ([`Action::EvictPod`]). The shell hands it back with the answer
/// ([`Input::CloudResult`], [`Input::EvictionResult`]). Ids are unique within one
/// [`Operator`](super::Operator) instance and increase.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CallId(pub u64);

impl std::fmt::Display for CallId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "call-{}", self.0)
    }
}

/// Something the operator is told: an object of the cluster was added, changed or deleted, a
/// call it asked for finished, or an interruption message arrived.
///
/// Object events carry the object as the API server holds it now (a watch's `Applied`), with
/// its `metadata.resourceVersion`; the operator's view replaces what it had. (A NodeClaim
/// without a `resourceVersion` is taken for this operator's own creation not yet confirmed by
/// the API server, and is not reconciled.) Deletions carry the object's key. Feeding the same
/// object twice is harmless. An object that is being deleted but still has finalizers is
/// *applied* (with its deletion timestamp), not deleted.
#[derive(Debug)]
pub enum Input {
    /// A `karpenter.sh/v1` NodePool was added or changed.
    NodePoolApplied(Box<NodePool>),
    /// A NodePool is gone (by name).
    NodePoolDeleted(String),
    /// A `karpenter.sh/v1` NodeClaim was added or changed.
    NodeClaimApplied(Box<NodeClaim>),
    /// A NodeClaim is gone (by name).
    NodeClaimDeleted(String),
    /// A `core/v1` Node was added or changed.
    NodeApplied(Box<Node>),
    /// A Node is gone (by name).
    NodeDeleted(String),
    /// A Pod was added or changed.
    PodApplied(Box<Pod>),
    /// A Pod is gone (by `namespace/name`).
    PodDeleted(String),
    /// A DaemonSet was added or changed (keyed by `namespace/name`).
    DaemonSetApplied(Box<DaemonSet>),
    /// A DaemonSet is gone (by `namespace/name`).
    DaemonSetDeleted(String),
    /// A PodDisruptionBudget was added or changed (keyed by `namespace/name`).
    PdbApplied(Box<PodDisruptionBudget>),
    /// A PodDisruptionBudget is gone (by `namespace/name`).
    PdbDeleted(String),
    /// A `storage.k8s.io/v1` VolumeAttachment was added or changed: `name` attaches a volume
    /// to the Node `node_name`. Node termination waits for a draining node's attachments to go
    /// (until its termination time).
    VolumeAttachmentApplied {
        /// The VolumeAttachment's name.
        name: String,
        /// `spec.nodeName`.
        node_name: String,
    },
    /// A VolumeAttachment is gone (by name).
    VolumeAttachmentDeleted(String),
    /// A `karpenter.sh/v1alpha1` NodeOverlay was added or changed (read only with
    /// [`OperatorConfig::node_overlay`](super::OperatorConfig::node_overlay)).
    NodeOverlayApplied(Box<crate::api::NodeOverlay>),
    /// A NodeOverlay is gone (by name).
    NodeOverlayDeleted(String),
    /// The shell finished every initial list: the view now holds the whole cluster. Until then
    /// the operator only records objects (upstream waits for its caches to sync before any
    /// controller acts).
    Synced,
    /// A cloud call asked for by [`Action::Cloud`] finished.
    CloudResult {
        /// The id of the [`Action::Cloud`].
        id: CallId,
        /// Its answer.
        response: CloudResponse,
    },
    /// An eviction asked for by [`Action::EvictPod`] was answered.
    EvictionResult {
        /// The id of the [`Action::EvictPod`].
        id: CallId,
        /// The API server's answer.
        response: EvictionResponse,
    },
    /// An API write ([`Action::CreateNodeClaim`], [`Action::UpdateNodeClaim`],
    /// [`Action::PatchNode`], ...) failed. The operator looks at the object again after a
    /// back-off; the shell need not report successes (the watch brings the new object).
    WriteFailed {
        /// The kind of object the write was for.
        kind: lifecycle::ObjectKind,
        /// Its name.
        name: String,
        /// The error, for logs.
        message: String,
    },
    /// A message from the provider's interruption queue (AWS: the SQS queue fed by
    /// EventBridge).
    Interruption(InterruptionEvent),
    /// Nothing happened but time passed: run whatever is due at `now` (a wake-up asked for
    /// by [`Action::WakeAt`] or [`Operator::next_wakeup`](super::Operator::next_wakeup)).
    Tick,
}

/// The kind of an interruption message (the `message_type` values of upstream's AWS
/// interruption controller; `karpenter_aws::interruption::Kind` maps onto it one for one).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum InterruptionKind {
    /// A spot instance will be reclaimed (two-minute warning): the NodeClaim is deleted and the
    /// offering marked unavailable.
    SpotInterrupted,
    /// A rebalance recommendation: only recorded (upstream takes no action).
    RebalanceRecommendation,
    /// The instance is stopping or stopped: the NodeClaim is deleted.
    InstanceStopped,
    /// The instance is shutting down or terminated: the NodeClaim is deleted.
    InstanceTerminated,
    /// A scheduled maintenance event (AWS Health `scheduledChange`): the NodeClaim is deleted.
    ScheduledChange,
    /// A capacity reservation reclaims the instance: the NodeClaim is deleted and the offering
    /// marked unavailable.
    CapacityReservationInterrupted,
}

impl InterruptionKind {
    /// The metric label (`message_type` of upstream's interruption metrics, and the `reason` of
    /// `karpenter_nodeclaims_disrupted_total`).
    pub fn as_str(self) -> &'static str {
        match self {
            InterruptionKind::SpotInterrupted => "spot_interrupted",
            InterruptionKind::RebalanceRecommendation => "rebalance_recommendation",
            InterruptionKind::InstanceStopped => "instance_stopped",
            InterruptionKind::InstanceTerminated => "instance_terminated",
            InterruptionKind::ScheduledChange => "scheduled_change",
            InterruptionKind::CapacityReservationInterrupted => "capacity_reservation_interrupted",
        }
    }

    /// Whether the operator deletes the interrupted instance's NodeClaim (when it is not being
    /// deleted already): every kind but a rebalance recommendation, which is only recorded.
    /// A queue consumer reads it to know which action to wait for before it deletes a message.
    pub fn deletes_nodeclaim(self) -> bool {
        !matches!(self, InterruptionKind::RebalanceRecommendation)
    }

    /// The reason of the Kubernetes event recorded on the NodeClaim (upstream's).
    pub fn event_reason(self) -> &'static str {
        match self {
            InterruptionKind::SpotInterrupted => "SpotInterrupted",
            InterruptionKind::RebalanceRecommendation => "RebalanceRecommendation",
            InterruptionKind::InstanceStopped => "Stopping",
            InterruptionKind::InstanceTerminated => "Terminating",
            InterruptionKind::ScheduledChange => "Unhealthy",
            InterruptionKind::CapacityReservationInterrupted => {
                "CapacityReservationInstanceInterrupted"
            }
        }
    }
}

/// A typed interruption message, as a provider's queue consumer parses it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InterruptionEvent {
    /// What happened.
    pub kind: InterruptionKind,
    /// The affected instance's provider id (`aws:///us-east-1a/i-0123...`).
    pub provider_id: String,
}

impl InterruptionEvent {
    /// An interruption of `kind` for the instance `provider_id`.
    pub fn new(kind: InterruptionKind, provider_id: impl Into<String>) -> Self {
        InterruptionEvent {
            kind,
            provider_id: provider_id.into(),
        }
    }
}

/// A call of the [`CloudProvider`] the operator asks a shell to make. Run it with
/// [`CloudCall::execute`] (or by hand) and feed the answer back as [`Input::CloudResult`].
#[derive(Debug, Clone, PartialEq)]
pub enum CloudCall {
    /// `create(claim)`.
    Create(Box<NodeClaim>),
    /// `delete(claim)`.
    Delete(Box<NodeClaim>),
    /// `get(provider_id)`.
    Get(String),
    /// `list()`.
    List,
    /// `instance_types(node_pool)`.
    InstanceTypes(Box<NodePool>),
    /// `is_drifted(claim)`.
    IsDrifted(Box<NodeClaim>),
}

/// The answer to a [`CloudCall`], variant for variant.
#[derive(Debug)]
pub enum CloudResponse {
    /// The answer to [`CloudCall::Create`].
    Create(Result<Box<NodeClaim>, CloudProviderError>),
    /// The answer to [`CloudCall::Delete`].
    Delete(Result<(), CloudProviderError>),
    /// The answer to [`CloudCall::Get`].
    Get(Result<Box<NodeClaim>, CloudProviderError>),
    /// The answer to [`CloudCall::List`].
    List(Result<Vec<NodeClaim>, CloudProviderError>),
    /// The answer to [`CloudCall::InstanceTypes`].
    InstanceTypes(Result<Vec<Arc<InstanceType>>, CloudProviderError>),
    /// The answer to [`CloudCall::IsDrifted`].
    IsDrifted(Result<Option<String>, CloudProviderError>),
}

impl CloudCall {
    /// Makes the call on `provider` and wraps the answer. This is all a shell needs to do with
    /// an [`Action::Cloud`]:
    ///
    /// ```ignore
    /// let response = call.execute(provider.as_ref()).await;
    /// operator.handle(Input::CloudResult { id, response }, now);
    /// ```
    pub async fn execute(&self, provider: &dyn CloudProvider) -> CloudResponse {
        match self {
            CloudCall::Create(claim) => {
                CloudResponse::Create(provider.create(claim).await.map(Box::new))
            }
            CloudCall::Delete(claim) => CloudResponse::Delete(provider.delete(claim).await),
            CloudCall::Get(id) => CloudResponse::Get(provider.get(id).await.map(Box::new)),
            CloudCall::List => CloudResponse::List(provider.list().await),
            CloudCall::InstanceTypes(pool) => {
                CloudResponse::InstanceTypes(provider.instance_types(pool).await)
            }
            CloudCall::IsDrifted(claim) => {
                CloudResponse::IsDrifted(provider.is_drifted(claim).await)
            }
        }
    }
}

/// Something the operator wants done. The shell carries actions out in order; answers come
/// back as [`Input`]s:
///
/// | action | answer |
/// |---|---|
/// | [`Action::Cloud`] | [`Input::CloudResult`] with the same [`CallId`] (always, error or not) |
/// | [`Action::EvictPod`] | [`Input::EvictionResult`] with the same [`CallId`] (always) |
/// | API writes (create / update / patch / delete) | the watch's `*Applied` / `*Deleted`; on failure [`Input::WriteFailed`] |
/// | [`Action::WakeAt`] | [`Input::Tick`] at (or after) that time |
/// | [`Action::RecordEvent`], [`Action::Metric`], [`Action::NominatePod`] | none |
///
/// The operator applies its own writes to its view at once (so a second pass never repeats
/// them), and the watch later confirms them.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Create this NodeClaim (name, labels, annotations, spec; no status).
    CreateNodeClaim(Box<NodeClaim>),
    /// Write this NodeClaim's metadata (labels, annotations, finalizers, owner references) and
    /// status (the status subresource); its spec is unchanged. It carries the
    /// `resourceVersion` it was computed from: write with that precondition (optimistic
    /// concurrency) and answer a conflict with [`Input::WriteFailed`]; the operator looks again
    /// once the watch brings the newer object. At most one per NodeClaim per
    /// [`Operator::handle`](super::Operator::handle) call.
    UpdateNodeClaim(Box<NodeClaim>),
    /// Delete the NodeClaim (it goes once its finalizer is removed).
    DeleteNodeClaim {
        /// The NodeClaim.
        name: String,
    },
    /// Patch a Node: each `Some` field of the update replaces that field (a merge patch of
    /// those fields). At most one per Node per [`Operator::handle`](super::Operator::handle)
    /// call; the operator's view takes the patch at once.
    PatchNode(NodeUpdate),
    /// Delete the Node (it goes once its finalizer is removed).
    DeleteNode {
        /// The Node.
        name: String,
    },
    /// Evict the pod through the Eviction API (with its UID as precondition); answer with
    /// [`Input::EvictionResult`].
    EvictPod {
        /// The call id to answer with.
        id: CallId,
        /// The pod (`namespace/name`).
        pod: String,
        /// The pod's UID (eviction precondition; empty when unknown).
        uid: String,
    },
    /// Delete the pod with this grace period (a drain past the node's termination time:
    /// bypasses PDBs and do-not-disrupt).
    DeletePod {
        /// The pod (`namespace/name`).
        pod: String,
        /// `gracePeriodSeconds`.
        grace_period_seconds: i64,
    },
    /// A hint for the scheduler (and a `Nominated` event upstream): the pod is expected to run
    /// on `target`, a Node name or, for a NodeClaim not registered yet, the NodeClaim's name.
    /// kube-scheduler does its own binding; the simulator's binder prefers the target.
    NominatePod {
        /// The pod (`namespace/name`).
        pod: String,
        /// The Node or NodeClaim name.
        target: String,
    },
    /// Merge these annotations into the NodePool's (`karpenter.sh/nodepool-hash`, ...).
    AnnotateNodePool {
        /// The NodePool.
        name: String,
        /// Annotations to set.
        annotations: std::collections::BTreeMap<String, String>,
    },
    /// Write the NodeOverlay's status subresource (its `ValidationSucceeded` and `Ready`
    /// conditions).
    UpdateNodeOverlayStatus {
        /// The NodeOverlay.
        name: String,
        /// The new status.
        status: Box<crate::api::NodeOverlayStatus>,
    },
    /// Write the NodePool's status subresource.
    UpdateNodePoolStatus {
        /// The NodePool.
        name: String,
        /// The new status.
        status: Box<NodePoolStatus>,
    },
    /// Call the cloud provider; answer with [`Input::CloudResult`].
    Cloud {
        /// The call id to answer with.
        id: CallId,
        /// The call.
        call: CloudCall,
    },
    /// Publish a Kubernetes event.
    RecordEvent(lifecycle::Event),
    /// Update a metric.
    Metric(Metric),
    /// Deliver [`Input::Tick`] at this time (the earliest pending wake-up; a later `WakeAt`
    /// replaces an earlier one).
    WakeAt(Timestamp),
}

impl Action {
    /// The call id of an action that expects an answer.
    pub fn call_id(&self) -> Option<CallId> {
        match self {
            Action::Cloud { id, .. } | Action::EvictPod { id, .. } => Some(*id),
            _ => None,
        }
    }
}

//! The cloud-provider boundary: the [`CloudProvider`] trait that launches, finds and deletes
//! machines, lists the instance types a NodePool may use, and reports drift and repair policies;
//! and its error enum, [`CloudProviderError`].
//!
//! This is the only asynchronous surface of the crate. The trait is object safe, so callers hold
//! an `Arc<dyn CloudProvider>`; `karpenter-fake` implements it in memory and `karpenter-aws` on
//! EC2.
//!
//! # Implementing a provider
//!
//! A trivial provider that "launches" every claim as one fixed instance type:
//!
//! ```
//! use std::sync::{Arc, Mutex};
//! use std::time::Duration;
//!
//! use async_trait::async_trait;
//! use karpenter_core::api::{ConditionStatus, NodeClaim, NodeClaimSpec, NodeClassReference, NodePool};
//! use karpenter_core::cloud::{CloudProvider, CloudProviderError, RepairPolicy};
//! use karpenter_core::model::{InstanceType, Offering, Overhead};
//! use karpenter_core::requirements::Requirements;
//! use karpenter_core::resources::{Quantity, ResourceList};
//!
//! struct OneType {
//!     instance_type: Arc<InstanceType>,
//!     launched: Mutex<Vec<NodeClaim>>,
//! }
//!
//! #[async_trait]
//! impl CloudProvider for OneType {
//!     async fn create(&self, node_claim: &NodeClaim) -> Result<NodeClaim, CloudProviderError> {
//!         let mut launched = self.launched.lock().map_err(|e| CloudProviderError::other(e.to_string()))?;
//!         let mut claim = node_claim.clone();
//!         claim.status.provider_id = Some(format!("trivial://{}", launched.len()));
//!         claim.status.capacity = self.instance_type.capacity().clone();
//!         claim.status.allocatable = self.instance_type.allocatable().clone();
//!         claim
//!             .metadata
//!             .labels
//!             .insert("node.kubernetes.io/instance-type".into(), self.instance_type.name().to_string());
//!         launched.push(claim.clone());
//!         Ok(claim)
//!     }
//!
//!     async fn delete(&self, node_claim: &NodeClaim) -> Result<(), CloudProviderError> {
//!         let mut launched = self.launched.lock().map_err(|e| CloudProviderError::other(e.to_string()))?;
//!         let id = node_claim.status.provider_id.clone().unwrap_or_default();
//!         let before = launched.len();
//!         launched.retain(|c| c.status.provider_id.as_deref() != Some(id.as_str()));
//!         if launched.len() == before {
//!             return Err(CloudProviderError::not_found(id));
//!         }
//!         Ok(())
//!     }
//!
//!     async fn get(&self, provider_id: &str) -> Result<NodeClaim, CloudProviderError> {
//!         let launched = self.launched.lock().map_err(|e| CloudProviderError::other(e.to_string()))?;
//!         launched
//!             .iter()
//!             .find(|c| c.status.provider_id.as_deref() == Some(provider_id))
//!             .cloned()
//!             .ok_or_else(|| CloudProviderError::not_found(provider_id))
//!     }
//!
//!     async fn list(&self) -> Result<Vec<NodeClaim>, CloudProviderError> {
//!         let launched = self.launched.lock().map_err(|e| CloudProviderError::other(e.to_string()))?;
//!         Ok(launched.clone())
//!     }
//!
//!     async fn instance_types(
//!         &self,
//!         _node_pool: &NodePool,
//!     ) -> Result<Vec<Arc<InstanceType>>, CloudProviderError> {
//!         Ok(vec![self.instance_type.clone()])
//!     }
//!
//!     async fn is_drifted(&self, _node_claim: &NodeClaim) -> Result<Option<String>, CloudProviderError> {
//!         Ok(None)
//!     }
//!
//!     fn repair_policies(&self) -> Vec<RepairPolicy> {
//!         vec![RepairPolicy::new(
//!             karpenter_core::api::condition_types::READY,
//!             ConditionStatus::False,
//!             Duration::from_secs(30 * 60),
//!         )]
//!     }
//!
//!     fn name(&self) -> &str {
//!         "trivial"
//!     }
//! }
//!
//! let capacity: ResourceList = [("cpu", Quantity::from_units(2))].into_iter().collect();
//! let it = InstanceType::new(
//!     "small",
//!     Requirements::new(),
//!     vec![Offering::new("zone-a", "on-demand", 0.1)],
//!     capacity,
//!     Overhead::default(),
//! );
//! let provider: Arc<dyn CloudProvider> = Arc::new(OneType {
//!     instance_type: Arc::new(it),
//!     launched: Mutex::new(Vec::new()),
//! });
//!
//! futures::executor::block_on(async {
//!     let claim = NodeClaim::new("a", NodeClaimSpec::new(NodeClassReference::default()));
//!     let launched = provider.create(&claim).await.unwrap();
//!     let id = launched.status.provider_id.clone().unwrap();
//!     assert_eq!(provider.get(&id).await.unwrap(), launched);
//!     assert_eq!(provider.list().await.unwrap().len(), 1);
//!     provider.delete(&launched).await.unwrap();
//!     assert!(provider.get(&id).await.unwrap_err().is_not_found());
//! });
//! ```

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use crate::api::{ConditionStatus, NodeClaim, NodeClassReference, NodePool};
use crate::labels::LabelPolicy;
use crate::model::InstanceType;

/// A cloud provider: launches machines for NodeClaims and answers questions about them.
///
/// Implementations must be safe to share between tasks (`Send + Sync`); callers hold an
/// `Arc<dyn CloudProvider>`. Every method that talks to the cloud is `async` and returns a
/// [`CloudProviderError`] on failure; callers branch on its variant (e.g. an
/// [`CloudProviderError::InsufficientCapacity`] marks offerings unavailable, a
/// [`CloudProviderError::NodeClaimNotFound`] on delete means the instance is already gone).
#[async_trait]
pub trait CloudProvider: Send + Sync {
    /// Launches a machine for `node_claim` and returns the launched claim: the input with
    /// `status.providerID`, `status.capacity` and `status.allocatable` filled in and
    /// `metadata.labels` resolved to the chosen instance type, zone and capacity type (labels
    /// the claim already carries win).
    async fn create(&self, node_claim: &NodeClaim) -> Result<NodeClaim, CloudProviderError>;

    /// Terminates the machine behind `node_claim` (found by its `status.providerID`). Returns
    /// [`CloudProviderError::NodeClaimNotFound`] when it no longer exists.
    async fn delete(&self, node_claim: &NodeClaim) -> Result<(), CloudProviderError>;

    /// The machine with this provider id, as a NodeClaim. Returns
    /// [`CloudProviderError::NodeClaimNotFound`] when it does not exist.
    async fn get(&self, provider_id: &str) -> Result<NodeClaim, CloudProviderError>;

    /// Every machine the provider manages, as NodeClaims.
    async fn list(&self) -> Result<Vec<NodeClaim>, CloudProviderError>;

    /// The instance types `node_pool` may launch, with their offerings and availability.
    async fn instance_types(
        &self,
        node_pool: &NodePool,
    ) -> Result<Vec<Arc<InstanceType>>, CloudProviderError>;

    /// Whether the machine behind `node_claim` has drifted from its desired configuration
    /// (e.g. its image or node class changed). `Some(reason)` when it has; the reason becomes the
    /// `Drifted` condition's reason.
    async fn is_drifted(
        &self,
        node_claim: &NodeClaim,
    ) -> Result<Option<String>, CloudProviderError>;

    /// Node conditions that make a node unhealthy, and how long each is tolerated before the
    /// node is repaired (replaced).
    fn repair_policies(&self) -> Vec<RepairPolicy>;

    /// The provider's name (`aws`, `fake`, ...), for logs and metrics.
    fn name(&self) -> &str;

    /// The label keys the provider's instance types define beyond core's well-known labels
    /// (e.g. `karpenter.k8s.aws/instance-family`). Pods may select them although a NodePool
    /// leaves them undefined; their values come from the instance types. Default: none.
    fn well_known_labels(&self) -> Vec<String> {
        Vec::new()
    }

    /// Label domains NodePools may not set and pods may not select, beyond `karpenter.sh`
    /// (a provider's own domain, e.g. `karpenter.k8s.aws`). Default: none.
    fn restricted_label_domains(&self) -> Vec<String> {
        Vec::new()
    }

    /// The label key under which nodes launched into a capacity reservation carry the
    /// reservation's id, if the provider has reservations. Default: none.
    fn reservation_id_label(&self) -> Option<&str> {
        None
    }

    /// The label policy a solve for this provider uses: core's well-known labels plus
    /// [`well_known_labels`](Self::well_known_labels), core's restricted domain plus
    /// [`restricted_label_domains`](Self::restricted_label_domains). This is what makes a pod
    /// selecting a provider label schedulable; see
    /// [`SchedulerOptions::for_provider`](crate::scheduling::SchedulerOptions::for_provider).
    fn label_policy(&self) -> LabelPolicy {
        LabelPolicy::core()
            .with_well_known(self.well_known_labels())
            .with_restricted_domains(self.restricted_label_domains())
    }

    /// The node class kinds the provider launches from (upstream `GetSupportedNodeClasses`):
    /// a NodePool whose `nodeClassRef` names another kind is not the provider's. Default: none
    /// declared, which [`supports_node_class`](Self::supports_node_class) reads as "any".
    fn supported_node_classes(&self) -> Vec<NodeClassKind> {
        Vec::new()
    }

    /// Whether a NodePool or NodeClaim referring to `node_class` can be launched by this
    /// provider: its group and kind are among
    /// [`supported_node_classes`](Self::supported_node_classes), or the provider declares none.
    fn supports_node_class(&self, node_class: &NodeClassReference) -> bool {
        let supported = self.supported_node_classes();
        supported.is_empty() || supported.iter().any(|k| k.matches(node_class))
    }
}

/// A kind of node class (API group and kind, e.g. `karpenter.k8s.aws` / `EC2NodeClass`), as a
/// provider declares it in [`CloudProvider::supported_node_classes`].
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub struct NodeClassKind {
    /// The API group (`karpenter.k8s.aws`).
    pub group: String,
    /// The kind (`EC2NodeClass`).
    pub kind: String,
}

impl NodeClassKind {
    /// The node class kind `kind` of API group `group`.
    pub fn new(group: impl Into<String>, kind: impl Into<String>) -> Self {
        NodeClassKind {
            group: group.into(),
            kind: kind.into(),
        }
    }

    /// Whether `reference` names a node class of this kind (group and kind equal; the version
    /// is not compared).
    pub fn matches(&self, reference: &NodeClassReference) -> bool {
        reference.group == self.group && reference.kind == self.kind
    }
}

/// A node condition that, held for longer than `toleration_duration`, makes Karpenter replace
/// the node (upstream `cloudprovider.RepairPolicy`).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RepairPolicy {
    /// The node condition type (e.g. `Ready`).
    pub condition_type: String,
    /// The unhealthy status of that condition (e.g. `False`).
    pub condition_status: ConditionStatus,
    /// How long the condition is tolerated before repair.
    pub toleration_duration: Duration,
}

/// One offering a launch could not get: an instance type in a zone with a capacity type.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub struct UnavailableOffering {
    /// The instance type's name.
    pub instance_type: String,
    /// The zone.
    pub zone: String,
    /// The capacity type (`spot`, `on-demand`, `reserved`).
    pub capacity_type: String,
}

impl RepairPolicy {
    /// Repair when node condition `condition_type` has `condition_status` for longer than
    /// `toleration_duration`.
    pub fn new(
        condition_type: impl Into<String>,
        condition_status: ConditionStatus,
        toleration_duration: Duration,
    ) -> Self {
        RepairPolicy {
            condition_type: condition_type.into(),
            condition_status,
            toleration_duration,
        }
    }
}

impl UnavailableOffering {
    /// The offering of `instance_type` in `zone` with `capacity_type`.
    pub fn new(
        instance_type: impl Into<String>,
        zone: impl Into<String>,
        capacity_type: impl Into<String>,
    ) -> Self {
        UnavailableOffering {
            instance_type: instance_type.into(),
            zone: zone.into(),
            capacity_type: capacity_type.into(),
        }
    }

    /// The offering `offering` of `instance_type`.
    pub fn of(instance_type: &InstanceType, offering: &crate::model::Offering) -> Self {
        UnavailableOffering::new(
            instance_type.name(),
            offering.zone(),
            offering.capacity_type(),
        )
    }
}

impl std::fmt::Display for UnavailableOffering {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}/{}/{}",
            self.instance_type, self.zone, self.capacity_type
        )
    }
}

/// The error a provider's failure came from (an SDK error, an I/O error, ...), kept as the
/// [`source`](std::error::Error::source) of a [`CloudProviderError`].
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Errors of a [`CloudProvider`].
///
/// Callers branch on the variant; the provider's own error, when there is one, is kept as the
/// error's [`source`](std::error::Error::source) (as `object_store` does), so that logs show the
/// whole chain. Build errors with the constructors ([`not_found`](Self::not_found),
/// [`insufficient_capacity`](Self::insufficient_capacity), [`create`](Self::create),
/// [`other`](Self::other), ...) and attach the cause with [`with_source`](Self::with_source):
///
/// ```
/// use std::error::Error as _;
/// use karpenter_core::cloud::CloudProviderError;
///
/// let io = std::io::Error::new(std::io::ErrorKind::TimedOut, "connect timed out");
/// let err = CloudProviderError::timeout("describing instances").with_source(io);
/// assert!(err.is_retryable());
/// assert_eq!(err.to_string(), "timed out: describing instances");
/// assert_eq!(err.source().unwrap().to_string(), "connect timed out");
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CloudProviderError {
    /// The machine does not exist (any more). On delete this means success for the caller.
    #[error("nodeclaim not found: {message}")]
    NodeClaimNotFound {
        /// The provider id that was looked up, if known.
        provider_id: Option<String>,
        /// Details.
        message: String,
        /// The provider's error, if any.
        source: Option<BoxError>,
    },
    /// No capacity was available for any offering tried; the caller marks `offerings`
    /// unavailable for a while and provisions again.
    #[error("insufficient capacity: {message}")]
    InsufficientCapacity {
        /// The offerings that failed (may be empty when the provider cannot tell).
        offerings: Vec<UnavailableOffering>,
        /// Details.
        message: String,
        /// The provider's error, if any.
        source: Option<BoxError>,
    },
    /// The NodeClaim's node class is not ready (missing, or not resolved yet); the claim waits.
    #[error("node class not ready: {message}")]
    NodeClassNotReady {
        /// Details.
        message: String,
        /// The provider's error, if any.
        source: Option<BoxError>,
    },
    /// The launch failed for another reason; `reason` and `message` go into the NodeClaim's
    /// `Launched` condition (upstream `CreateError`).
    #[error("creating nodeclaim: {reason}: {message}")]
    Create {
        /// A machine-readable reason (CamelCase), for the condition's `reason`.
        reason: String,
        /// A human-readable message, for the condition's `message`.
        message: String,
        /// The provider's error, if any.
        source: Option<BoxError>,
    },
    /// The cloud API throttled the request; retry later.
    #[error("throttled: {message}")]
    Throttled {
        /// Details.
        message: String,
        /// The provider's error, if any.
        source: Option<BoxError>,
    },
    /// The cloud API did not answer in time; retry later.
    #[error("timed out: {message}")]
    Timeout {
        /// Details.
        message: String,
        /// The provider's error, if any.
        source: Option<BoxError>,
    },
    /// Any other failure.
    #[error("{message}")]
    Other {
        /// Details.
        message: String,
        /// The provider's error, if any.
        source: Option<BoxError>,
    },
}

impl CloudProviderError {
    /// [`CloudProviderError::NodeClaimNotFound`] for a provider id.
    pub fn not_found(provider_id: impl Into<String>) -> Self {
        let provider_id = provider_id.into();
        CloudProviderError::NodeClaimNotFound {
            message: format!("no instance with provider id {provider_id:?}"),
            provider_id: Some(provider_id),
            source: None,
        }
    }

    /// [`CloudProviderError::InsufficientCapacity`] for the offerings that failed.
    pub fn insufficient_capacity(
        offerings: Vec<UnavailableOffering>,
        message: impl Into<String>,
    ) -> Self {
        CloudProviderError::InsufficientCapacity {
            offerings,
            message: message.into(),
            source: None,
        }
    }

    /// [`CloudProviderError::NodeClassNotReady`] with a message.
    pub fn node_class_not_ready(message: impl Into<String>) -> Self {
        CloudProviderError::NodeClassNotReady {
            message: message.into(),
            source: None,
        }
    }

    /// [`CloudProviderError::Create`] with a CamelCase reason and a message.
    pub fn create(reason: impl Into<String>, message: impl Into<String>) -> Self {
        CloudProviderError::Create {
            reason: reason.into(),
            message: message.into(),
            source: None,
        }
    }

    /// [`CloudProviderError::Throttled`] with a message.
    pub fn throttled(message: impl Into<String>) -> Self {
        CloudProviderError::Throttled {
            message: message.into(),
            source: None,
        }
    }

    /// [`CloudProviderError::Timeout`] with a message.
    pub fn timeout(message: impl Into<String>) -> Self {
        CloudProviderError::Timeout {
            message: message.into(),
            source: None,
        }
    }

    /// [`CloudProviderError::Other`] with a message.
    pub fn other(message: impl Into<String>) -> Self {
        CloudProviderError::Other {
            message: message.into(),
            source: None,
        }
    }

    /// The error with `source` as its cause (replacing any set before).
    pub fn with_source(mut self, source: impl Into<BoxError>) -> Self {
        let slot = match &mut self {
            CloudProviderError::NodeClaimNotFound { source, .. }
            | CloudProviderError::InsufficientCapacity { source, .. }
            | CloudProviderError::NodeClassNotReady { source, .. }
            | CloudProviderError::Create { source, .. }
            | CloudProviderError::Throttled { source, .. }
            | CloudProviderError::Timeout { source, .. }
            | CloudProviderError::Other { source, .. } => source,
        };
        *slot = Some(source.into());
        self
    }

    /// The error's message (without the variant's prefix).
    pub fn message(&self) -> &str {
        match self {
            CloudProviderError::NodeClaimNotFound { message, .. }
            | CloudProviderError::InsufficientCapacity { message, .. }
            | CloudProviderError::NodeClassNotReady { message, .. }
            | CloudProviderError::Create { message, .. }
            | CloudProviderError::Throttled { message, .. }
            | CloudProviderError::Timeout { message, .. }
            | CloudProviderError::Other { message, .. } => message,
        }
    }

    /// Whether this is [`CloudProviderError::NodeClaimNotFound`].
    pub fn is_not_found(&self) -> bool {
        matches!(self, CloudProviderError::NodeClaimNotFound { .. })
    }

    /// Whether this is [`CloudProviderError::InsufficientCapacity`].
    pub fn is_insufficient_capacity(&self) -> bool {
        matches!(self, CloudProviderError::InsufficientCapacity { .. })
    }

    /// Whether this is [`CloudProviderError::NodeClassNotReady`].
    pub fn is_node_class_not_ready(&self) -> bool {
        matches!(self, CloudProviderError::NodeClassNotReady { .. })
    }

    /// Whether retrying the same call later may succeed (throttling and timeouts).
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            CloudProviderError::Throttled { .. } | CloudProviderError::Timeout { .. }
        )
    }
}

#[cfg(test)]
mod tests {
    use std::error::Error as _;

    use super::*;

    #[test]
    fn the_providers_error_is_kept_as_source() {
        let cause = std::io::Error::other("api said no");
        let err = CloudProviderError::create("LaunchFailed", "run instances").with_source(cause);
        assert_eq!(
            err.to_string(),
            "creating nodeclaim: LaunchFailed: run instances"
        );
        assert_eq!(err.message(), "run instances");
        let source = err.source().expect("source kept");
        assert_eq!(source.to_string(), "api said no");
        assert!(source.downcast_ref::<std::io::Error>().is_some());
        assert!(CloudProviderError::other("x").source().is_none());
    }

    #[test]
    fn predicates_follow_the_variant() {
        assert!(CloudProviderError::not_found("a").is_not_found());
        assert!(
            CloudProviderError::insufficient_capacity(Vec::new(), "m").is_insufficient_capacity()
        );
        assert!(CloudProviderError::node_class_not_ready("m").is_node_class_not_ready());
        assert!(CloudProviderError::throttled("m").is_retryable());
        assert!(CloudProviderError::timeout("m").is_retryable());
        assert!(!CloudProviderError::create("R", "m").is_retryable());
    }
}

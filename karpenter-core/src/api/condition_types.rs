//! The status-condition types Karpenter reads and writes, as typed names: use these constants
//! instead of string literals (`find_condition(&claim.status.conditions, condition_types::DRIFTED)`).
//!
//! NodeClaim conditions: [`LAUNCHED`], [`REGISTERED`], [`INITIALIZED`] and their root
//! [`READY`]; [`CONSOLIDATABLE`], [`DRIFTED`], [`DRAINED`], [`VOLUMES_DETACHED`],
//! [`INSTANCE_TERMINATING`], [`CONSISTENT_STATE_FOUND`], [`DISRUPTION_REASON`]. NodePool
//! conditions: [`READY`], [`NODE_REGISTRATION_HEALTHY`]. A Kubernetes Node's readiness is also
//! the condition type [`READY`].

/// `Launched`: the cloud provider created the instance.
pub const LAUNCHED: &str = "Launched";
/// `Registered`: the Node joined the cluster and was synced.
pub const REGISTERED: &str = "Registered";
/// `Initialized`: the Node is ready, untainted and has its resources.
pub const INITIALIZED: &str = "Initialized";
/// `Ready`: the root condition of NodeClaims (and NodePools).
pub const READY: &str = "Ready";
/// `Consolidatable`: the node may be consolidated.
pub const CONSOLIDATABLE: &str = "Consolidatable";
/// `Drifted`: the node no longer matches its NodePool or node class.
pub const DRIFTED: &str = "Drifted";
/// `Drained`: the node's pods were drained.
pub const DRAINED: &str = "Drained";
/// `VolumesDetached`: the node's volume attachments are gone.
pub const VOLUMES_DETACHED: &str = "VolumesDetached";
/// `InstanceTerminating`: the instance is being terminated.
pub const INSTANCE_TERMINATING: &str = "InstanceTerminating";
/// `ConsistentStateFound`.
pub const CONSISTENT_STATE_FOUND: &str = "ConsistentStateFound";
/// `DisruptionReason`: the node is being disrupted, with the reason as condition reason.
pub const DISRUPTION_REASON: &str = "DisruptionReason";
/// NodePool condition `NodeRegistrationHealthy`.
pub const NODE_REGISTRATION_HEALTHY: &str = "NodeRegistrationHealthy";

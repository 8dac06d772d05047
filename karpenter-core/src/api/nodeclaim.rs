//! `NodeClaim` (`karpenter.sh/v1`): a request for one node, and what became of it.

use serde::{Deserialize, Serialize};

use super::duration::{Duration, NillableDuration};
use super::meta::{Condition, ObjectMeta};
use super::nodepool::{NodeClassReference, default_expire_after};
use super::{API_VERSION, null_as_default};
use crate::requirements::NodeSelectorRequirement;
use crate::resources::ResourceList;
use crate::taints::Taint;

/// The kind of a NodeClaim.
pub const NODECLAIM_KIND: &str = "NodeClaim";

/// A NodeClaim.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "kube", derive(schemars::JsonSchema))]
pub struct NodeClaim {
    /// `karpenter.sh/v1`.
    #[serde(default = "default_api_version")]
    pub api_version: String,
    /// `NodeClaim`.
    #[serde(default = "default_nodeclaim_kind")]
    pub kind: String,
    /// Object metadata.
    #[serde(default, deserialize_with = "null_as_default")]
    pub metadata: ObjectMeta,
    /// The desired node.
    pub spec: NodeClaimSpec,
    /// What the cloud provider launched and how far the node got.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "NodeClaimStatus::is_empty"
    )]
    pub status: NodeClaimStatus,
}

fn default_api_version() -> String {
    API_VERSION.to_string()
}

fn default_nodeclaim_kind() -> String {
    NODECLAIM_KIND.to_string()
}

/// An unnamed NodeClaim with `apiVersion` and `kind` set, a [`NodeClaimSpec::default`] spec
/// and an empty status (the crate's stability policy: construct with `..Default::default()`).
impl Default for NodeClaim {
    fn default() -> Self {
        NodeClaim::new(String::new(), NodeClaimSpec::default())
    }
}

impl NodeClaim {
    /// A NodeClaim named `name` with the given spec and an empty status.
    pub fn new(name: impl Into<String>, spec: NodeClaimSpec) -> Self {
        NodeClaim {
            api_version: default_api_version(),
            kind: default_nodeclaim_kind(),
            metadata: ObjectMeta::named(name),
            spec,
            status: NodeClaimStatus::default(),
        }
    }

    /// The NodeClaim's name (`""` if unset).
    pub fn name(&self) -> &str {
        self.metadata.name_or_empty()
    }
}

/// `spec` of a NodeClaim.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "kube", derive(schemars::JsonSchema))]
pub struct NodeClaimSpec {
    /// Taints put on the node.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub taints: Vec<Taint>,
    /// Taints present while the node starts up.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub startup_taints: Vec<Taint>,
    /// Requirements on the node's labels; required by the CRD (see
    /// [`NodeClaimTemplateSpec::requirements`](super::NodeClaimTemplateSpec::requirements) for
    /// why this is an `Option`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requirements: Option<Vec<NodeSelectorRequirement>>,
    /// The resources the pods scheduled to this node request.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "ResourceRequirements::is_empty"
    )]
    pub resources: ResourceRequirements,
    /// The cloud-provider node class.
    pub node_class_ref: NodeClassReference,
    /// How long a draining node may take before pods are deleted forcibly.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub termination_grace_period: Option<Duration>,
    /// How long the node lives before it is replaced (default `720h`, or `Never`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expire_after: Option<NillableDuration>,
}

/// [`NodeClaimSpec::new`] with an empty `nodeClassRef`.
impl Default for NodeClaimSpec {
    fn default() -> Self {
        NodeClaimSpec::new(NodeClassReference::default())
    }
}

impl NodeClaimSpec {
    /// A spec with the given node class and empty requirements.
    pub fn new(node_class_ref: NodeClassReference) -> Self {
        NodeClaimSpec {
            taints: Vec::new(),
            startup_taints: Vec::new(),
            requirements: Some(Vec::new()),
            resources: ResourceRequirements::default(),
            node_class_ref,
            termination_grace_period: None,
            expire_after: None,
        }
    }

    /// The requirements (empty if the field is missing).
    pub fn requirements(&self) -> &[NodeSelectorRequirement] {
        self.requirements.as_deref().unwrap_or(&[])
    }

    /// `expireAfter`, or upstream's default `720h`.
    pub fn effective_expire_after(&self) -> NillableDuration {
        self.expire_after
            .clone()
            .unwrap_or_else(default_expire_after)
    }
}

/// `spec.resources` of a NodeClaim.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "kube", derive(schemars::JsonSchema))]
pub struct ResourceRequirements {
    /// The summed requests of the pods expected on the node.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "ResourceList::is_empty"
    )]
    pub requests: ResourceList,
}

impl ResourceRequirements {
    /// Whether no request is set.
    pub fn is_empty(&self) -> bool {
        self.requests.is_empty()
    }
}

/// `status` of a NodeClaim.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "kube", derive(schemars::JsonSchema))]
pub struct NodeClaimStatus {
    /// The name of the Node object once registered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_name: Option<String>,
    /// The cloud provider's ID of the instance.
    #[serde(
        default,
        rename = "providerID",
        skip_serializing_if = "Option::is_none"
    )]
    pub provider_id: Option<String>,
    /// The image the instance runs.
    #[serde(default, rename = "imageID", skip_serializing_if = "Option::is_none")]
    pub image_id: Option<String>,
    /// The instance's capacity.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "ResourceList::is_empty"
    )]
    pub capacity: ResourceList,
    /// The capacity available to pods.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "ResourceList::is_empty"
    )]
    pub allocatable: ResourceList,
    /// Conditions (`Launched`, `Registered`, `Initialized`, `Ready`, ...).
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub conditions: Vec<Condition>,
    /// When a pod was last scheduled to or removed from the node (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_pod_event_time: Option<String>,
}

impl NodeClaimStatus {
    /// Whether nothing is set.
    pub fn is_empty(&self) -> bool {
        self.node_name.is_none()
            && self.provider_id.is_none()
            && self.image_id.is_none()
            && self.capacity.is_empty()
            && self.allocatable.is_empty()
            && self.conditions.is_empty()
            && self.last_pod_event_time.is_none()
    }
}

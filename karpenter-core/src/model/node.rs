//! Cluster nodes, DaemonSets and PodDisruptionBudgets.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::labels;
use crate::resources::ResourceList;
use crate::taints::Taint;

use super::{LabelSelector, Pod, Timestamp, default_true};

// ---------------------------------------------------------------------------------------------
// Nodes and DaemonSets
// ---------------------------------------------------------------------------------------------

/// A node already in the cluster, or an in-flight NodeClaim that has no Node yet, as the
/// scheduler sees it.
///
/// Three types describe a node, one per room, each with its own job:
/// - [`crate::lifecycle::Node`]: the Kubernetes `Node` object as the lifecycle controllers read
///   and patch it (provider id, conditions, finalizers, owner references);
/// - `ClusterNode` (this type): the scheduling view — labels, taints, capacity, allocatable,
///   whether it is managed and initialized — derived from a Node or an in-flight NodeClaim;
/// - [`crate::state::StateNode`]: one entry of a cluster snapshot, pairing the `ClusterNode`
///   with its NodeClaim and bound pods, as the disruption planner reads it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct ClusterNode {
    /// Node name (or NodeClaim name while unregistered).
    pub name: String,
    /// Node labels (NodeClaim labels while unregistered).
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Node annotations (for example `karpenter.sh/do-not-disrupt`).
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
    /// Current taints.
    #[serde(default)]
    pub taints: Vec<Taint>,
    /// Startup taints of the owning NodeClaim (ignored while the node is uninitialized).
    #[serde(default)]
    pub startup_taints: Vec<Taint>,
    /// Capacity (includes `pods`).
    #[serde(default)]
    pub capacity: ResourceList,
    /// Allocatable resources.
    #[serde(default)]
    pub allocatable: ResourceList,
    /// Whether Karpenter manages the node (it has a NodePool label).
    #[serde(default)]
    pub managed: bool,
    /// Whether the node is initialized (`karpenter.sh/initialized`); unmanaged nodes count as
    /// initialized.
    #[serde(default = "default_true")]
    pub initialized: bool,
    /// Whether the node is marked for deletion (excluded from scheduling).
    #[serde(default)]
    pub marked_for_deletion: bool,
    /// When the node (or its claim) was created.
    #[serde(default = "epoch")]
    pub creation_timestamp: Timestamp,
}

fn epoch() -> Timestamp {
    Timestamp::UNIX_EPOCH
}

impl ClusterNode {
    /// An initialized, unmanaged node with no labels or resources.
    pub fn new(name: impl Into<String>) -> ClusterNode {
        ClusterNode {
            name: name.into(),
            labels: BTreeMap::new(),
            annotations: BTreeMap::new(),
            taints: Vec::new(),
            startup_taints: Vec::new(),
            capacity: ResourceList::new(),
            allocatable: ResourceList::new(),
            managed: false,
            initialized: true,
            marked_for_deletion: false,
            creation_timestamp: Timestamp::UNIX_EPOCH,
        }
    }

    /// The NodePool that owns the node, if any.
    pub fn nodepool(&self) -> Option<&str> {
        self.labels.get(labels::NODEPOOL).map(String::as_str)
    }

    /// The hostname domain: the `kubernetes.io/hostname` label, else the name.
    pub fn hostname(&self) -> &str {
        self.labels
            .get(labels::HOSTNAME)
            .map_or(self.name.as_str(), String::as_str)
    }
}

/// A DaemonSet, represented by the pod it would run on every eligible node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct DaemonSet {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// The pod it runs (requests, tolerations, node selector and required node affinity are
    /// what matter).
    pub pod: Pod,
}

impl DaemonSet {
    /// The DaemonSet `namespace/name` running `pod` on every eligible node.
    pub fn new(namespace: impl Into<String>, name: impl Into<String>, pod: Pod) -> DaemonSet {
        DaemonSet {
            namespace: namespace.into(),
            name: name.into(),
            pod,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// PodDisruptionBudgets
// ---------------------------------------------------------------------------------------------

/// An absolute count or a percentage, as in a PodDisruptionBudget's `minAvailable` and
/// `maxUnavailable` (Kubernetes' `IntOrString`, where strings must be percentages).
///
/// Serialises like Kubernetes: an integer, or a string such as `"50%"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum IntOrPercent {
    /// A number of pods.
    Int(i32),
    /// A percentage of the selected pods (`"50%"` is `Percent(50)`).
    Percent(u32),
}

impl IntOrPercent {
    /// Parses a percentage string such as `"25%"` (digits followed by `%`); `None` otherwise.
    pub fn parse_percent(s: &str) -> Option<IntOrPercent> {
        let digits = s.strip_suffix('%')?;
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        digits.parse().ok().map(IntOrPercent::Percent)
    }
}

impl std::fmt::Display for IntOrPercent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            IntOrPercent::Int(n) => write!(f, "{n}"),
            IntOrPercent::Percent(p) => write!(f, "{p}%"),
        }
    }
}

impl Serialize for IntOrPercent {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            IntOrPercent::Int(n) => serializer.serialize_i32(*n),
            IntOrPercent::Percent(_) => serializer.collect_str(self),
        }
    }
}

impl<'de> Deserialize<'de> for IntOrPercent {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = IntOrPercent;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an integer or a percentage such as \"50%\"")
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<IntOrPercent, E> {
                i32::try_from(v)
                    .map(IntOrPercent::Int)
                    .map_err(|_| E::custom(format!("integer {v} out of range")))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<IntOrPercent, E> {
                i32::try_from(v)
                    .map(IntOrPercent::Int)
                    .map_err(|_| E::custom(format!("integer {v} out of range")))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<IntOrPercent, E> {
                IntOrPercent::parse_percent(v)
                    .ok_or_else(|| E::custom(format!("{v:?} is not a percentage")))
            }
        }
        deserializer.deserialize_any(Visitor)
    }
}

/// A PodDisruptionBudget as the disruption planner sees it. Build it with
/// [`PodDisruptionBudget::new`] and the `with_*` methods (the struct is `#[non_exhaustive]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct PodDisruptionBudget {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// Which pods of the namespace it covers; `None` covers none, an empty selector all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
    /// `spec.minAvailable`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_available: Option<IntOrPercent>,
    /// `spec.maxUnavailable`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_unavailable: Option<IntOrPercent>,
    /// `status.disruptionsAllowed`: how many covered pods may be evicted now.
    #[serde(default)]
    pub disruptions_allowed: i32,
    /// Whether `spec.unhealthyPodEvictionPolicy` is `AlwaysAllow` (pods whose `Ready` condition
    /// is `False` may then always be evicted).
    #[serde(default)]
    pub unhealthy_pod_eviction_policy_always_allow: bool,
}

impl PodDisruptionBudget {
    /// The budget `namespace/name` covering no pods (no selector), without `minAvailable` or
    /// `maxUnavailable`, allowing no disruption.
    ///
    /// ```
    /// use karpenter_core::model::{IntOrPercent, LabelSelector, Pod, PodDisruptionBudget};
    ///
    /// let pdb = PodDisruptionBudget::new("default", "web")
    ///     .with_selector(LabelSelector::from_labels([("app", "web")]))
    ///     .with_max_unavailable(IntOrPercent::Int(1))
    ///     .with_disruptions_allowed(1);
    /// assert!(pdb.selects(&Pod::new("default", "web-0").with_labels([("app", "web")])));
    /// ```
    pub fn new(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        PodDisruptionBudget {
            namespace: namespace.into(),
            name: name.into(),
            selector: None,
            min_available: None,
            max_unavailable: None,
            disruptions_allowed: 0,
            unhealthy_pod_eviction_policy_always_allow: false,
        }
    }

    /// The budget covering the pods of its namespace that `selector` selects.
    pub fn with_selector(mut self, selector: LabelSelector) -> Self {
        self.selector = Some(selector);
        self
    }

    /// The budget with this `spec.minAvailable`.
    pub fn with_min_available(mut self, min_available: IntOrPercent) -> Self {
        self.min_available = Some(min_available);
        self
    }

    /// The budget with this `spec.maxUnavailable`.
    pub fn with_max_unavailable(mut self, max_unavailable: IntOrPercent) -> Self {
        self.max_unavailable = Some(max_unavailable);
        self
    }

    /// The budget with this `status.disruptionsAllowed`.
    pub fn with_disruptions_allowed(mut self, disruptions_allowed: i32) -> Self {
        self.disruptions_allowed = disruptions_allowed;
        self
    }

    /// The budget with (or without) `unhealthyPodEvictionPolicy: AlwaysAllow`.
    pub fn with_unhealthy_pod_eviction_policy_always_allow(mut self, always_allow: bool) -> Self {
        self.unhealthy_pod_eviction_policy_always_allow = always_allow;
        self
    }

    /// Whether the budget forbids every voluntary eviction regardless of pod health:
    /// `maxUnavailable` is `0` or `"0%"`, or `minAvailable` is `"100%"`.
    pub fn is_fully_blocking(&self) -> bool {
        matches!(
            self.max_unavailable,
            Some(IntOrPercent::Int(0) | IntOrPercent::Percent(0))
        ) || self.min_available == Some(IntOrPercent::Percent(100))
    }

    /// Whether the budget covers `pod`: same namespace and the selector matches the pod's
    /// labels (a missing selector matches nothing, an empty one everything).
    pub fn selects(&self, pod: &Pod) -> bool {
        self.namespace == pod.namespace
            && self
                .selector
                .as_ref()
                .is_some_and(|s| s.matches(&pod.labels))
    }
}

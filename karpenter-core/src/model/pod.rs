//! Pods and their owners, as the scheduler sees them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::hostports::HostPort;
use crate::resources::{ResourceList, names};
use crate::taints::Toleration;

use super::{
    NodeAffinity, PodAffinity, PodVolume, Timestamp, TopologySpreadConstraint, default_true,
};

// ---------------------------------------------------------------------------------------------
// Pods
// ---------------------------------------------------------------------------------------------

/// The controller that owns a pod, as far as scheduling cares.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OwnerReference {
    /// `apiVersion` of the owner.
    #[serde(default)]
    pub api_version: String,
    /// Kind of the owner (`ReplicaSet`, `DaemonSet`, `Node`, ...).
    pub kind: String,
    /// Name of the owner.
    pub name: String,
    /// Whether this owner is the managing controller.
    #[serde(default)]
    pub controller: bool,
}

/// A pod's phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub enum PodPhase {
    /// Not yet running.
    #[default]
    Pending,
    /// Running.
    Running,
    /// Terminated successfully.
    Succeeded,
    /// Terminated with failure.
    Failed,
    /// State unknown.
    Unknown,
}

/// A pod as the scheduler sees it.
///
/// `requests` are the pod's *effective* requests (containers, init containers, sidecars and
/// RuntimeClass overhead already combined, limits copied into missing requests); the scheduler
/// adds `pods: 1` itself. Use [`Pod::new`] and the builder-style methods in tests.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Pod {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// Unique id; ties in the scheduling queue are broken by it.
    pub uid: String,
    /// Labels.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Annotations.
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
    /// When the pod was created.
    pub creation_timestamp: Timestamp,
    /// Set when the pod is terminating.
    #[serde(default)]
    pub deletion_timestamp: Option<Timestamp>,
    /// Phase.
    #[serde(default)]
    pub phase: PodPhase,
    /// The node the pod is bound to, if any.
    #[serde(default)]
    pub node_name: Option<String>,
    /// Controlling owner.
    #[serde(default)]
    pub owner: Option<OwnerReference>,
    /// The other owner references (not marked controller). Upstream classifies DaemonSet,
    /// mirror and StatefulSet pods by any owner reference ([`Pod::is_owned_by`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub other_owners: Vec<OwnerReference>,
    /// `spec.nodeSelector`.
    #[serde(default)]
    pub node_selector: BTreeMap<String, String>,
    /// `spec.affinity.nodeAffinity`.
    #[serde(default)]
    pub node_affinity: Option<NodeAffinity>,
    /// `spec.affinity.podAffinity`.
    #[serde(default)]
    pub pod_affinity: Option<PodAffinity>,
    /// `spec.affinity.podAntiAffinity`.
    #[serde(default)]
    pub pod_anti_affinity: Option<PodAffinity>,
    /// `spec.tolerations`.
    #[serde(default)]
    pub tolerations: Vec<Toleration>,
    /// `spec.topologySpreadConstraints`.
    #[serde(default)]
    pub topology_spread_constraints: Vec<TopologySpreadConstraint>,
    /// Effective resource requests (without the implicit `pods: 1`).
    #[serde(default)]
    pub requests: ResourceList,
    /// Host ports of the regular containers.
    #[serde(default)]
    pub host_ports: Vec<HostPort>,
    /// Whether the pod references DRA resource claims.
    #[serde(default)]
    pub has_resource_claims: bool,
    /// `spec.priority`.
    #[serde(default)]
    pub priority: Option<i32>,
    /// `spec.terminationGracePeriodSeconds`.
    #[serde(default)]
    pub termination_grace_period_seconds: Option<i64>,
    /// Whether the pod counts as healthy for PodDisruptionBudgets: false only when its `Ready`
    /// condition is explicitly `False` (what an `unhealthyPodEvictionPolicy: AlwaysAllow` budget
    /// looks at); true when the condition is `True`, `Unknown` or absent.
    #[serde(default = "default_true")]
    pub ready: bool,
    /// `status.startTime`: when the kubelet acknowledged the pod (do-not-disrupt durations count
    /// from it).
    #[serde(default)]
    pub start_time: Option<Timestamp>,
    /// `spec.priorityClassName`.
    #[serde(default)]
    pub priority_class_name: Option<String>,
    /// `spec.volumes` (claims and generic ephemeral volumes matter to scheduling, spec 5.3).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volumes: Vec<PodVolume>,
}

impl Pod {
    /// A pending pod in `namespace` named `name`, with uid `<namespace>/<name>`, created at the
    /// Unix epoch, requesting nothing.
    pub fn new(namespace: impl Into<String>, name: impl Into<String>) -> Pod {
        let namespace = namespace.into();
        let name = name.into();
        Pod {
            uid: format!("{namespace}/{name}"),
            namespace,
            name,
            labels: BTreeMap::new(),
            annotations: BTreeMap::new(),
            creation_timestamp: Timestamp::UNIX_EPOCH,
            deletion_timestamp: None,
            phase: PodPhase::Pending,
            node_name: None,
            owner: None,
            other_owners: Vec::new(),
            node_selector: BTreeMap::new(),
            node_affinity: None,
            pod_affinity: None,
            pod_anti_affinity: None,
            tolerations: Vec::new(),
            topology_spread_constraints: Vec::new(),
            requests: ResourceList::new(),
            host_ports: Vec::new(),
            has_resource_claims: false,
            priority: None,
            termination_grace_period_seconds: None,
            ready: true,
            start_time: None,
            priority_class_name: None,
            volumes: Vec::new(),
        }
    }

    /// The pod with these effective requests (replacing any set before).
    ///
    /// ```
    /// use karpenter_core::model::Pod;
    /// use karpenter_core::resources::Quantity;
    ///
    /// let pod = Pod::new("default", "web").with_requests([("cpu", Quantity::from_milli(500))]);
    /// assert_eq!(pod.requests.get("cpu"), Some(Quantity::from_milli(500)));
    /// ```
    pub fn with_requests<'a>(
        mut self,
        requests: impl IntoIterator<Item = (&'a str, crate::resources::Quantity)>,
    ) -> Pod {
        self.requests = requests.into_iter().collect();
        self
    }

    /// The pod with these labels added.
    pub fn with_labels<'a>(mut self, labels: impl IntoIterator<Item = (&'a str, &'a str)>) -> Pod {
        self.labels.extend(
            labels
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.to_string())),
        );
        self
    }

    /// The pod with these `spec.nodeSelector` entries added.
    pub fn with_node_selector<'a>(
        mut self,
        selector: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Pod {
        self.node_selector.extend(
            selector
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.to_string())),
        );
        self
    }

    /// `namespace/name`.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// Whether the pod is owned by a DaemonSet (`apps/v1`; a DaemonSet kind of another API
    /// group, such as a third-party "advanced DaemonSet", is not one, as upstream).
    pub fn is_daemonset_pod(&self) -> bool {
        self.is_owned_by("apps/v1", "DaemonSet")
    }

    /// Whether the pod is a static (mirror) pod owned by a Node (`v1`).
    pub fn is_mirror_pod(&self) -> bool {
        self.is_owned_by("v1", "Node")
    }

    /// Whether one of the pod's owner references (controller or not) has this apiVersion and
    /// kind (upstream `IsOwnedBy`).
    pub fn is_owned_by(&self, api_version: &str, kind: &str) -> bool {
        self.owner
            .iter()
            .chain(&self.other_owners)
            .any(|o| o.kind == kind && o.api_version == api_version)
    }

    /// Whether the pod has finished (Succeeded or Failed).
    pub fn is_terminal(&self) -> bool {
        matches!(self.phase, PodPhase::Succeeded | PodPhase::Failed)
    }

    /// Whether the pod is being deleted.
    pub fn is_terminating(&self) -> bool {
        self.deletion_timestamp.is_some()
    }

    /// The requests the scheduler packs: the effective requests plus `pods: 1`.
    pub fn scheduling_requests(&self) -> ResourceList {
        let mut r = self.requests.clone();
        r.insert(
            names::PODS,
            r.get_or_zero(names::PODS) + crate::resources::Quantity::from_units(1),
        );
        r
    }
}

//! Pods, their owners and their volumes, as the scheduler sees them. Resolving the volumes
//! through claims, volumes and StorageClasses is the [`volumes`](crate::volumes) module's job.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::hostports::HostPort;
use crate::resources::{ResourceList, names};
use crate::taints::Toleration;

use super::{NodeAffinity, PodAffinity, Timestamp, TopologySpreadConstraint, default_true};

// ---------------------------------------------------------------------------------------------
// Pods
// ---------------------------------------------------------------------------------------------

/// The controller that owns a pod, as far as scheduling cares. Build it with
/// [`OwnerReference::new`] (the struct is `#[non_exhaustive]`: Kubernetes' owner reference has
/// more fields than are modelled today).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
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

impl OwnerReference {
    /// A reference to the `kind` named `name` of `api_version`, not marked as the controller.
    pub fn new(
        api_version: impl Into<String>,
        kind: impl Into<String>,
        name: impl Into<String>,
    ) -> OwnerReference {
        OwnerReference {
            api_version: api_version.into(),
            kind: kind.into(),
            name: name.into(),
            controller: false,
        }
    }

    /// The reference, marked (or not) as the managing controller.
    pub fn with_controller(mut self, controller: bool) -> OwnerReference {
        self.controller = controller;
        self
    }
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
/// adds `pods: 1` itself. Build it with [`Pod::new`] and the `with_*` methods (the struct is
/// `#[non_exhaustive]`: fields will be added as the scheduler models more of the pod spec).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
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
    /// Effective resource limits, as Kubernetes aggregates them (`PodLimits` of
    /// `k8s.io/component-helpers/resource`: the containers' and sidecars' limits summed, raised to
    /// the init phase's peak, pod-level limits, overhead added to the limits that are set). Only
    /// the node metrics read them (`karpenter_nodes_total_pod_limits`); no decision does.
    #[serde(default, skip_serializing_if = "ResourceList::is_empty")]
    pub limits: ResourceList,
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
    /// When the `PodScheduled` condition last turned `True` (`None` while it is not `True`):
    /// the pod latency metrics read it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduled_at: Option<Timestamp>,
    /// When the `Ready` condition last turned `True` (`None` while it is not `True`, unlike
    /// [`Pod::ready`], which is true when the condition is absent): the pod latency metrics read
    /// it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_at: Option<Timestamp>,
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
            limits: ResourceList::new(),
            host_ports: Vec::new(),
            has_resource_claims: false,
            priority: None,
            termination_grace_period_seconds: None,
            ready: true,
            start_time: None,
            scheduled_at: None,
            ready_at: None,
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

    /// The pod with these annotations added.
    pub fn with_annotations<'a>(
        mut self,
        annotations: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Pod {
        self.annotations.extend(
            annotations
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.to_string())),
        );
        self
    }

    /// The pod with this uid (replacing `<namespace>/<name>`).
    pub fn with_uid(mut self, uid: impl Into<String>) -> Pod {
        self.uid = uid.into();
        self
    }

    /// The pod created at `at`.
    pub fn with_creation_timestamp(mut self, at: Timestamp) -> Pod {
        self.creation_timestamp = at;
        self
    }

    /// The pod with these effective limits (replacing any set before).
    pub fn with_limits<'a>(
        mut self,
        limits: impl IntoIterator<Item = (&'a str, crate::resources::Quantity)>,
    ) -> Pod {
        self.limits = limits.into_iter().collect();
        self
    }

    /// The pod in this phase.
    pub fn with_phase(mut self, phase: PodPhase) -> Pod {
        self.phase = phase;
        self
    }

    /// The pod bound to the node named `node`.
    pub fn with_node_name(mut self, node: impl Into<String>) -> Pod {
        self.node_name = Some(node.into());
        self
    }

    /// The pod with this controlling owner.
    pub fn with_owner(mut self, owner: OwnerReference) -> Pod {
        self.owner = Some(owner);
        self
    }

    /// The pod with this `spec.affinity.nodeAffinity`.
    pub fn with_node_affinity(mut self, affinity: NodeAffinity) -> Pod {
        self.node_affinity = Some(affinity);
        self
    }

    /// The pod with this `spec.affinity.podAffinity`.
    pub fn with_pod_affinity(mut self, affinity: PodAffinity) -> Pod {
        self.pod_affinity = Some(affinity);
        self
    }

    /// The pod with this `spec.affinity.podAntiAffinity`.
    pub fn with_pod_anti_affinity(mut self, affinity: PodAffinity) -> Pod {
        self.pod_anti_affinity = Some(affinity);
        self
    }

    /// The pod with these tolerations added.
    pub fn with_tolerations(mut self, tolerations: impl IntoIterator<Item = Toleration>) -> Pod {
        self.tolerations.extend(tolerations);
        self
    }

    /// The pod with these topology spread constraints added.
    pub fn with_topology_spread_constraints(
        mut self,
        constraints: impl IntoIterator<Item = TopologySpreadConstraint>,
    ) -> Pod {
        self.topology_spread_constraints.extend(constraints);
        self
    }

    /// The pod with this `spec.priority`.
    pub fn with_priority(mut self, priority: i32) -> Pod {
        self.priority = Some(priority);
        self
    }

    /// The pod with these volumes added.
    pub fn with_volumes(mut self, volumes: impl IntoIterator<Item = PodVolume>) -> Pod {
        self.volumes.extend(volumes);
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

// ---------------------------------------------------------------------------------------------
// Volumes: the pod's `spec.volumes`, as far as scheduling cares
// ---------------------------------------------------------------------------------------------

/// One entry of a pod's `spec.volumes`, as far as scheduling cares.
///
/// Serialises like Kubernetes: `{name: data, persistentVolumeClaim: {claimName: data}}`,
/// `{name: scratch, ephemeral: {storageClassName: gp3}}`, `{name: tmp, other: emptyDir}`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodVolume {
    /// The volume's name in the pod (`spec.volumes[].name`).
    pub name: String,
    /// Where the volume comes from.
    #[serde(flatten)]
    pub source: VolumeSource,
}

impl PodVolume {
    /// A volume backed by the claim `claim_name` in the pod's namespace.
    pub fn claim(name: impl Into<String>, claim_name: impl Into<String>) -> PodVolume {
        PodVolume {
            name: name.into(),
            source: VolumeSource::PersistentVolumeClaim {
                claim_name: claim_name.into(),
            },
        }
    }

    /// A generic ephemeral volume whose claim template names `storage_class_name`.
    pub fn ephemeral(name: impl Into<String>, storage_class_name: Option<&str>) -> PodVolume {
        PodVolume {
            name: name.into(),
            source: VolumeSource::Ephemeral {
                storage_class_name: storage_class_name.map(str::to_string),
            },
        }
    }

    /// The name of the claim this volume uses in `pod`'s namespace: the claim of a
    /// `persistentVolumeClaim` volume, `<pod name>-<volume name>` for a generic ephemeral volume
    /// (the name the ephemeral-volume controller gives the claim it creates), none otherwise.
    pub fn claim_name(&self, pod: &Pod) -> Option<String> {
        match &self.source {
            VolumeSource::PersistentVolumeClaim { claim_name } => Some(claim_name.clone()),
            VolumeSource::Ephemeral { .. } => Some(format!("{}-{}", pod.name, self.name)),
            VolumeSource::Other(_) => None,
        }
    }
}

/// The source of a [`PodVolume`].
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum VolumeSource {
    /// `persistentVolumeClaim`: an existing claim in the pod's namespace.
    #[serde(rename_all = "camelCase")]
    PersistentVolumeClaim {
        /// `claimName`.
        claim_name: String,
    },
    /// `ephemeral`: a generic ephemeral volume. Its claim, `<pod>-<volume>`, is created with the
    /// pod; scheduling reads that claim (the template's class is informational).
    #[serde(rename_all = "camelCase")]
    Ephemeral {
        /// `volumeClaimTemplate.spec.storageClassName`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        storage_class_name: Option<String>,
    },
    /// Any other source (`emptyDir`, `configMap`, `hostPath`, inline CSI, …), by its field name.
    /// Such volumes do not affect scheduling.
    Other(String),
}

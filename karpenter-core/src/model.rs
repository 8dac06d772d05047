//! The scheduling view of the world: compact pods, nodes, DaemonSets, instance types and
//! offerings.
//!
//! These types carry exactly what the scheduler and the disruption planner read. They are built by
//! the caller: from the [`crate::api`] types, from Kubernetes objects (feature `k8s-openapi`, see
//! the `convert` module) or by hand in tests. Affinity and topology-spread types use Kubernetes'
//! field names in serde, so fixtures can be written as the familiar YAML.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::hostports::HostPort;
use crate::labels;
use crate::requirements::{Operator, Requirement, Requirements};
use crate::resources::{ResourceList, names};
use crate::taints::{Taint, Toleration};

mod volume;
pub use self::volume::{PodVolume, VolumeSource};

/// A point in time, as nanoseconds since the Unix epoch. The core never reads the clock: callers
/// pass times in.
pub type Timestamp = jiff::Timestamp;

// ---------------------------------------------------------------------------------------------
// Label selectors and affinity
// ---------------------------------------------------------------------------------------------

/// The operator of a label-selector expression.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum SelectorOperator {
    /// The label's value is one of the values.
    In,
    /// The label is absent or its value is none of the values.
    NotIn,
    /// The label is present.
    Exists,
    /// The label is absent.
    DoesNotExist,
}

/// One expression of a [`LabelSelector`].
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LabelSelectorRequirement {
    /// The label key.
    pub key: String,
    /// The operator.
    pub operator: SelectorOperator,
    /// The values (for In / NotIn).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<String>,
}

impl LabelSelectorRequirement {
    /// Whether a set of labels satisfies this expression.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        let value = labels.get(&self.key);
        match self.operator {
            SelectorOperator::In => value.is_some_and(|v| self.values.contains(v)),
            SelectorOperator::NotIn => value.is_none_or(|v| !self.values.contains(v)),
            SelectorOperator::Exists => value.is_some(),
            SelectorOperator::DoesNotExist => value.is_none(),
        }
    }
}

/// A Kubernetes label selector. An empty selector matches everything.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LabelSelector {
    /// Labels that must be present with these values.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub match_labels: BTreeMap<String, String>,
    /// Expressions that must all hold.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub match_expressions: Vec<LabelSelectorRequirement>,
}

impl LabelSelector {
    /// A selector matching exactly these labels.
    pub fn from_labels<'a>(labels: impl IntoIterator<Item = (&'a str, &'a str)>) -> Self {
        LabelSelector {
            match_labels: labels
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            match_expressions: Vec::new(),
        }
    }

    /// Whether the labels satisfy every part of the selector.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.match_labels
            .iter()
            .all(|(k, v)| labels.get(k) == Some(v))
            && self.match_expressions.iter().all(|e| e.matches(labels))
    }

    /// Whether the selector is empty (matches everything).
    pub fn is_empty(&self) -> bool {
        self.match_labels.is_empty() && self.match_expressions.is_empty()
    }
}

/// One term of node affinity: all expressions must hold. (`matchFields` are not modelled:
/// upstream ignores them in preferred terms and rejects pods that use them in required terms;
/// converters report such pods as invalid.)
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeSelectorTerm {
    /// The expressions, ANDed.
    #[serde(default)]
    pub match_expressions: Vec<crate::requirements::NodeSelectorRequirement>,
}

/// A weighted preferred node-affinity term.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PreferredSchedulingTerm {
    /// The weight (1-100).
    pub weight: i32,
    /// The term.
    pub preference: NodeSelectorTerm,
}

/// Node affinity: required terms (ORed) and weighted preferences.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeAffinity {
    /// `requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms`: ORed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub required: Vec<NodeSelectorTerm>,
    /// `preferredDuringSchedulingIgnoredDuringExecution`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub preferred: Vec<PreferredSchedulingTerm>,
}

/// A pod (anti-)affinity term.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodAffinityTerm {
    /// Which pods the term refers to. `None` selects nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label_selector: Option<LabelSelector>,
    /// Namespaces to look in (empty and no selector: the pod's own namespace).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub namespaces: Vec<String>,
    /// Namespaces selected by their labels (an empty selector selects every namespace).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace_selector: Option<LabelSelector>,
    /// The node label that defines a topology domain.
    pub topology_key: String,
}

/// A weighted preferred pod (anti-)affinity term.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WeightedPodAffinityTerm {
    /// The weight (1-100).
    pub weight: i32,
    /// The term.
    pub pod_affinity_term: PodAffinityTerm,
}

/// Pod affinity or anti-affinity.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodAffinity {
    /// Required terms (all must hold).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub required: Vec<PodAffinityTerm>,
    /// Preferred terms.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub preferred: Vec<WeightedPodAffinityTerm>,
}

impl PodAffinity {
    /// Whether there are no terms at all.
    pub fn is_empty(&self) -> bool {
        self.required.is_empty() && self.preferred.is_empty()
    }
}

/// `whenUnsatisfiable` of a topology spread constraint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub enum WhenUnsatisfiable {
    /// A hard constraint.
    #[default]
    DoNotSchedule,
    /// A preference, relaxed when it cannot be met.
    ScheduleAnyway,
}

/// `nodeAffinityPolicy` / `nodeTaintsPolicy` of a topology spread constraint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum NodeInclusionPolicy {
    /// Only nodes that match are counted.
    Honor,
    /// Every node is counted.
    Ignore,
}

/// A topology spread constraint.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TopologySpreadConstraint {
    /// The maximum allowed difference between domains.
    pub max_skew: i32,
    /// The node label that defines a domain.
    pub topology_key: String,
    /// Hard or soft.
    #[serde(default)]
    pub when_unsatisfiable: WhenUnsatisfiable,
    /// Which pods are counted (`None` counts nothing).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label_selector: Option<LabelSelector>,
    /// The minimum number of eligible domains.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_domains: Option<i32>,
    /// Whether node affinity limits the counted nodes (default Honor).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_affinity_policy: Option<NodeInclusionPolicy>,
    /// Whether node taints limit the counted nodes (default Ignore).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_taints_policy: Option<NodeInclusionPolicy>,
    /// Pod label keys whose values are added to the selector.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub match_label_keys: Vec<String>,
}

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
// Instance types and offerings
// ---------------------------------------------------------------------------------------------

/// Resources a node reserves for the system; allocatable = capacity − their sum.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Overhead {
    /// Reserved for the kubelet and container runtime.
    #[serde(default)]
    pub kube_reserved: ResourceList,
    /// Reserved for the operating system.
    #[serde(default)]
    pub system_reserved: ResourceList,
    /// The kubelet's hard eviction threshold.
    #[serde(default)]
    pub eviction_threshold: ResourceList,
}

impl Overhead {
    /// The sum of the three parts.
    pub fn total(&self) -> ResourceList {
        self.kube_reserved
            .add(&self.system_reserved)
            .add(&self.eviction_threshold)
    }

    /// `self` with `over` merged on top: per part, the resources of `over` replace those of
    /// `self`; resources `over` does not name are kept.
    pub fn merged_with(&self, over: &Overhead) -> Overhead {
        Overhead {
            kube_reserved: merge_resources(&self.kube_reserved, &over.kube_reserved),
            system_reserved: merge_resources(&self.system_reserved, &over.system_reserved),
            eviction_threshold: merge_resources(&self.eviction_threshold, &over.eviction_threshold),
        }
    }
}

/// One way to buy an instance type: a zone, a capacity type and a price.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Offering {
    /// `topology.kubernetes.io/zone`.
    pub zone: String,
    /// `karpenter.sh/capacity-type`: `spot`, `on-demand` or `reserved`.
    pub capacity_type: String,
    /// Price per hour.
    pub price: f64,
    /// Whether the offering can currently be launched.
    #[serde(default = "default_true")]
    pub available: bool,
    /// For reserved offerings: the reservation's id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reservation_id: Option<String>,
    /// For reserved offerings: instances left in the reservation.
    #[serde(default)]
    pub reservation_capacity: u32,
    /// The offering's requirements: zone and capacity type (and the reservation id label when
    /// the policy defines one). Built by [`Offering::new`]; kept in sync by the constructors.
    #[serde(skip)]
    requirements: Requirements,
    /// Resources that differ on nodes launched through this offering, merged over the instance
    /// type's capacity (the override wins per resource). See [`InstanceType::allocatable_groups`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity_override: Option<ResourceList>,
    /// Overhead that differs on nodes launched through this offering, merged over the instance
    /// type's overhead (per part, the override wins per resource).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overhead_override: Option<Overhead>,
}

fn default_true() -> bool {
    true
}

impl Offering {
    /// An available offering.
    pub fn new(zone: impl Into<String>, capacity_type: impl Into<String>, price: f64) -> Offering {
        let mut o = Offering {
            zone: zone.into(),
            capacity_type: capacity_type.into(),
            price,
            available: true,
            reservation_id: None,
            reservation_capacity: 0,
            requirements: Requirements::new(),
            capacity_override: None,
            overhead_override: None,
        };
        o.rebuild_requirements(None);
        o
    }

    /// A reserved offering (capacity type `reserved`) of reservation `id` with `capacity`
    /// instances left. `reservation_label` is the provider's reservation-id label key.
    pub fn reserved(
        zone: impl Into<String>,
        id: impl Into<String>,
        capacity: u32,
        price: f64,
        reservation_label: &str,
    ) -> Offering {
        let mut o = Offering::new(zone, labels::CAPACITY_TYPE_RESERVED, price);
        o.reservation_id = Some(id.into());
        o.reservation_capacity = capacity;
        o.available = capacity > 0;
        o.rebuild_requirements(Some(reservation_label));
        o
    }

    /// Recomputes the offering's requirements from its fields. With `reservation_label`, non
    /// reserved offerings get `DoesNotExist` for that key and reserved ones `In [id]`.
    pub fn rebuild_requirements(&mut self, reservation_label: Option<&str>) {
        let mut r = Requirements::new();
        r.add(Requirement::new(
            labels::ZONE,
            Operator::In,
            [self.zone.as_str()],
        ));
        r.add(Requirement::new(
            labels::CAPACITY_TYPE,
            Operator::In,
            [self.capacity_type.as_str()],
        ));
        if let Some(key) = reservation_label {
            match &self.reservation_id {
                Some(id) => r.add(Requirement::new(key, Operator::In, [id.as_str()])),
                None => r.add(Requirement::does_not_exist(key)),
            }
        }
        self.requirements = r;
    }

    /// The offering's requirements (zone, capacity type, reservation id).
    pub fn requirements(&self) -> &Requirements {
        &self.requirements
    }

    /// Whether this is a reserved-capacity offering.
    pub fn is_reserved(&self) -> bool {
        self.capacity_type == labels::CAPACITY_TYPE_RESERVED
    }

    /// Whether the offering overrides its instance type's capacity or overhead.
    pub fn has_overrides(&self) -> bool {
        self.capacity_override.is_some() || self.overhead_override.is_some()
    }
}

/// `base` with every resource of `over` inserted (the override wins).
fn merge_resources(base: &ResourceList, over: &ResourceList) -> ResourceList {
    let mut out = base.clone();
    for (name, q) in over.iter() {
        out.insert(name, q);
    }
    out
}

/// A set of an instance type's available offerings that give nodes the same allocatable
/// resources (spec 1.3, upstream `AllocatableOfferingsList`). See
/// [`InstanceType::allocatable_groups`].
#[derive(Debug, Clone, PartialEq)]
pub struct AllocatableGroup {
    /// The allocatable resources of nodes launched through these offerings.
    pub allocatable: ResourceList,
    /// Indices into [`InstanceType::offerings`] of the group's available offerings, in order.
    pub offerings: Vec<usize>,
}

/// A kind of machine the cloud provider can launch, with its offerings.
#[derive(Debug, Clone, PartialEq)]
pub struct InstanceType {
    /// Name; equals its `node.kubernetes.io/instance-type` value.
    pub name: String,
    /// The labels nodes of this type may have, as requirements.
    pub requirements: Requirements,
    /// Ways to buy it.
    pub offerings: Vec<Offering>,
    /// Full capacity.
    pub capacity: ResourceList,
    /// System overhead.
    pub overhead: Overhead,
    allocatable: ResourceList,
}

impl InstanceType {
    /// Builds an instance type and computes its allocatable resources: for every resource in
    /// `capacity`, capacity − overhead (negative results kept); then memory is further reduced
    /// by every `hugepages-*` capacity (clamped at zero).
    ///
    /// The `node.kubernetes.io/instance-type`, zone and capacity-type requirements are added
    /// when missing (the latter two as the union of the *available* offerings' values).
    pub fn new(
        name: impl Into<String>,
        mut requirements: Requirements,
        offerings: Vec<Offering>,
        capacity: ResourceList,
        overhead: Overhead,
    ) -> InstanceType {
        let name = name.into();
        if !requirements.has(labels::INSTANCE_TYPE) {
            requirements.add(Requirement::new(
                labels::INSTANCE_TYPE,
                Operator::In,
                [name.as_str()],
            ));
        }
        let available = offerings.iter().filter(|o| o.available);
        if !requirements.has(labels::ZONE) {
            let zones: Vec<&str> = available.clone().map(|o| o.zone.as_str()).collect();
            requirements.add(Requirement::new(labels::ZONE, Operator::In, zones));
        }
        if !requirements.has(labels::CAPACITY_TYPE) {
            let cts: Vec<&str> = available.map(|o| o.capacity_type.as_str()).collect();
            requirements.add(Requirement::new(labels::CAPACITY_TYPE, Operator::In, cts));
        }
        let allocatable = compute_allocatable(&capacity, &overhead);
        InstanceType {
            name,
            requirements,
            offerings,
            capacity,
            overhead,
            allocatable,
        }
    }

    /// Capacity − overhead (see [`InstanceType::new`]).
    pub fn allocatable(&self) -> &ResourceList {
        &self.allocatable
    }

    /// Whether any available offering carries a capacity or overhead override, i.e. whether
    /// [`allocatable_groups`](Self::allocatable_groups) has more than the base group.
    pub fn has_offering_overrides(&self) -> bool {
        self.available_offerings().any(Offering::has_overrides)
    }

    /// The allocatable groups of the available offerings (spec 1.3, upstream
    /// `AllocatableOfferingsList`). Group 0 is always the base group: [`allocatable`] and the
    /// available offerings without overrides (possibly none). Every further group gathers the
    /// available offerings with the same (capacity override, overhead override) pair, in the
    /// order the pairs are first seen; its allocatable is computed like [`allocatable`] from the
    /// capacity and overhead with the overrides merged on top
    /// ([`Overhead::merged_with`]).
    ///
    /// Computed on each call from the current offerings (they are public and may change, e.g.
    /// when a reservation runs out): callers on a hot path compute it once. Without overrides
    /// (see [`has_offering_overrides`](Self::has_offering_overrides)) the result is the base
    /// group alone.
    ///
    /// [`allocatable`]: Self::allocatable
    pub fn allocatable_groups(&self) -> Vec<AllocatableGroup> {
        let mut groups = vec![AllocatableGroup {
            allocatable: self.allocatable.clone(),
            offerings: Vec::new(),
        }];
        let mut keys: Vec<(Option<&ResourceList>, Option<&Overhead>)> = vec![(None, None)];
        for (i, o) in self.offerings.iter().enumerate() {
            if !o.available {
                continue;
            }
            let key = (o.capacity_override.as_ref(), o.overhead_override.as_ref());
            let g = match keys.iter().position(|k| *k == key) {
                Some(g) => g,
                None => {
                    keys.push(key);
                    groups.push(AllocatableGroup {
                        allocatable: self.allocatable_with(o),
                        offerings: Vec::new(),
                    });
                    groups.len() - 1
                }
            };
            if let Some(group) = groups.get_mut(g) {
                group.offerings.push(i);
            }
        }
        groups
    }

    /// The allocatable resources of a node launched through `offering` (assumed to be one of
    /// this type's): [`allocatable`](Self::allocatable) unless the offering has overrides.
    pub fn allocatable_with(&self, offering: &Offering) -> ResourceList {
        if !offering.has_overrides() {
            return self.allocatable.clone();
        }
        let capacity = match &offering.capacity_override {
            Some(over) => merge_resources(&self.capacity, over),
            None => self.capacity.clone(),
        };
        let overhead = match &offering.overhead_override {
            Some(over) => self.overhead.merged_with(over),
            None => self.overhead.clone(),
        };
        compute_allocatable(&capacity, &overhead)
    }

    /// Available offerings.
    pub fn available_offerings(&self) -> impl Iterator<Item = &Offering> {
        self.offerings.iter().filter(|o| o.available)
    }

    /// The cheapest available offering loosely compatible with `reqs`, if any.
    pub fn cheapest_offering(
        &self,
        reqs: &Requirements,
        policy: &labels::LabelPolicy,
    ) -> Option<&Offering> {
        self.available_offerings()
            .filter(|o| reqs.is_compatible(o.requirements(), Some(policy)))
            .min_by(|a, b| a.price.total_cmp(&b.price))
    }

    /// Upstream's `WorstLaunchPrice`: among available offerings compatible with `reqs`, take the
    /// first capacity type in the precedence reserved → spot → on-demand that has any, and return
    /// its most expensive price; `None` if no offering is compatible.
    pub fn worst_launch_price(
        &self,
        reqs: &Requirements,
        policy: &labels::LabelPolicy,
    ) -> Option<f64> {
        let compatible: Vec<&Offering> = self
            .available_offerings()
            .filter(|o| reqs.is_compatible(o.requirements(), Some(policy)))
            .collect();
        [
            labels::CAPACITY_TYPE_RESERVED,
            labels::CAPACITY_TYPE_SPOT,
            labels::CAPACITY_TYPE_ON_DEMAND,
        ]
        .iter()
        .find_map(|ct| {
            compatible
                .iter()
                .filter(|o| o.capacity_type == *ct)
                .map(|o| o.price)
                .max_by(f64::total_cmp)
        })
    }
}

fn compute_allocatable(capacity: &ResourceList, overhead: &Overhead) -> ResourceList {
    let total = overhead.total();
    let mut alloc = ResourceList::new();
    for (name, q) in capacity.iter() {
        alloc.insert(name, q - total.get_or_zero(name));
    }
    let hugepages: Vec<_> = capacity
        .iter()
        .filter(|(n, _)| n.starts_with("hugepages-"))
        .map(|(_, q)| q)
        .collect();
    if let Some(mut mem) = alloc.get(names::MEMORY) {
        for h in hugepages {
            mem -= h;
        }
        if mem.is_negative() {
            mem = crate::resources::Quantity::ZERO;
        }
        alloc.insert(names::MEMORY, mem);
    }
    alloc
}

// ---------------------------------------------------------------------------------------------
// Nodes and DaemonSets
// ---------------------------------------------------------------------------------------------

/// A node already in the cluster, or an in-flight NodeClaim that has no Node yet, as the
/// scheduler sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
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
pub struct DaemonSet {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// The pod it runs (requests, tolerations, node selector and required node affinity are
    /// what matter).
    pub pod: Pod,
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

/// A PodDisruptionBudget as the disruption planner sees it (spec `disruption.md` 1.4).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
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

#[cfg(test)]
mod pdb_tests {
    use super::*;

    fn pdb(min: Option<IntOrPercent>, max: Option<IntOrPercent>) -> PodDisruptionBudget {
        PodDisruptionBudget {
            namespace: "ns".into(),
            name: "b".into(),
            selector: None,
            min_available: min,
            max_unavailable: max,
            disruptions_allowed: 0,
            unhealthy_pod_eviction_policy_always_allow: false,
        }
    }

    #[test]
    fn fully_blocking() {
        use IntOrPercent::{Int, Percent};
        assert!(pdb(None, Some(Int(0))).is_fully_blocking());
        assert!(pdb(None, Some(Percent(0))).is_fully_blocking());
        assert!(pdb(Some(Percent(100)), None).is_fully_blocking());
        assert!(!pdb(None, Some(Int(1))).is_fully_blocking());
        assert!(!pdb(Some(Int(100)), None).is_fully_blocking());
        assert!(!pdb(Some(Percent(99)), None).is_fully_blocking());
        assert!(!pdb(None, None).is_fully_blocking());
    }

    #[test]
    fn selects_by_namespace_and_selector() {
        let mut pod = Pod::new("ns", "p");
        pod.labels.insert("app".into(), "web".into());
        let mut b = pdb(None, None);
        assert!(!b.selects(&pod), "a missing selector selects nothing");
        b.selector = Some(LabelSelector::default());
        assert!(b.selects(&pod), "an empty selector selects everything");
        b.selector = Some(LabelSelector::from_labels([("app", "db")]));
        assert!(!b.selects(&pod));
        b.selector = Some(LabelSelector::from_labels([("app", "web")]));
        assert!(b.selects(&pod));
        pod.namespace = "other".into();
        assert!(!b.selects(&pod));
    }

    #[test]
    fn int_or_percent_serde() {
        let b: PodDisruptionBudget = serde_json::from_value(serde_json::json!({
            "namespace": "ns", "name": "b", "minAvailable": "50%", "maxUnavailable": 1,
        }))
        .unwrap();
        assert_eq!(b.min_available, Some(IntOrPercent::Percent(50)));
        assert_eq!(b.max_unavailable, Some(IntOrPercent::Int(1)));
        let v = serde_json::to_value(&b).unwrap();
        assert_eq!(v["minAvailable"], "50%");
        assert_eq!(v["maxUnavailable"], 1);
        for bad in [
            serde_json::json!("50"),
            serde_json::json!("%"),
            serde_json::json!(1e20),
        ] {
            assert!(serde_json::from_value::<IntOrPercent>(bad).is_err());
        }
        assert_eq!(
            IntOrPercent::parse_percent("007%"),
            Some(IntOrPercent::Percent(7))
        );
        assert_eq!(IntOrPercent::parse_percent("-1%"), None);
    }

    #[test]
    fn new_pod_fields_default_when_absent() {
        let p: Pod = serde_json::from_value(serde_json::json!({
            "namespace": "ns", "name": "p", "uid": "u", "creationTimestamp": "2024-01-01T00:00:00Z",
        }))
        .unwrap();
        assert!(p.ready);
        assert_eq!(p.start_time, None);
        assert_eq!(p.priority_class_name, None);
        assert_eq!(p, {
            let mut q = Pod::new("ns", "p");
            q.uid = "u".into();
            q.creation_timestamp = p.creation_timestamp;
            q
        });
    }
}

#[cfg(test)]
mod allocatable_group_tests {
    use super::*;
    use crate::resources::Quantity;
    use proptest::prelude::*;

    fn list(entries: &[(&str, i64)]) -> ResourceList {
        let mut l = ResourceList::new();
        for (k, v) in entries {
            l.insert(*k, Quantity::from_units(*v));
        }
        l
    }

    fn instance_type(offerings: Vec<Offering>) -> InstanceType {
        InstanceType::new(
            "it",
            Requirements::new(),
            offerings,
            list(&[("cpu", 4), ("memory", 16), ("pods", 10)]),
            Overhead {
                kube_reserved: list(&[("cpu", 1)]),
                system_reserved: list(&[("memory", 2)]),
                eviction_threshold: ResourceList::new(),
            },
        )
    }

    fn with_capacity(mut o: Offering, c: &[(&str, i64)]) -> Offering {
        o.capacity_override = Some(list(c));
        o
    }

    #[test]
    fn without_overrides_one_base_group_holds_every_available_offering() {
        let mut off = Offering::new("z2", "spot", 0.5);
        off.available = false;
        let it = instance_type(vec![
            Offering::new("z1", "spot", 1.0),
            off,
            Offering::new("z3", "on-demand", 2.0),
        ]);
        assert!(!it.has_offering_overrides());
        let groups = it.allocatable_groups();
        assert_eq!(groups.len(), 1);
        assert_eq!(groups[0].offerings, vec![0, 2]);
        assert_eq!(&groups[0].allocatable, it.allocatable());
        assert_eq!(
            it.allocatable(),
            &list(&[("cpu", 3), ("memory", 14), ("pods", 10)])
        );
    }

    #[test]
    fn overrides_form_groups_in_first_seen_order() {
        let slots = [("example.com/slots", 4)];
        let mut overhead = Offering::new("z1", "on-demand", 1.0);
        overhead.overhead_override = Some(Overhead {
            kube_reserved: list(&[("cpu", 2)]),
            ..Overhead::default()
        });
        let mut unavailable = with_capacity(Offering::new("z3", "spot", 1.0), &[("cpu", 64)]);
        unavailable.available = false;
        let it = instance_type(vec![
            overhead,
            with_capacity(Offering::new("z1", "spot", 1.0), &slots),
            Offering::new("z2", "spot", 1.0),
            with_capacity(Offering::new("z2", "on-demand", 1.0), &slots),
            unavailable,
        ]);
        assert!(it.has_offering_overrides());
        let groups = it.allocatable_groups();
        assert_eq!(groups.len(), 3, "unavailable offerings form no group");
        // Group 0: the base.
        assert_eq!(groups[0].offerings, vec![2]);
        assert_eq!(&groups[0].allocatable, it.allocatable());
        // Group 1: the overhead override (kube-reserved cpu 2 replaces 1; memory kept).
        assert_eq!(groups[1].offerings, vec![0]);
        assert_eq!(
            groups[1].allocatable,
            list(&[("cpu", 2), ("memory", 14), ("pods", 10)])
        );
        // Group 2: the capacity override, merged over the base capacity.
        assert_eq!(groups[2].offerings, vec![1, 3]);
        assert_eq!(
            groups[2].allocatable,
            list(&[
                ("cpu", 3),
                ("example.com/slots", 4),
                ("memory", 14),
                ("pods", 10)
            ])
        );
    }

    #[test]
    fn the_base_group_exists_even_when_every_offering_overrides() {
        let it = instance_type(vec![with_capacity(
            Offering::new("z1", "spot", 1.0),
            &[("cpu", 8)],
        )]);
        let groups = it.allocatable_groups();
        assert_eq!(groups.len(), 2);
        assert!(groups[0].offerings.is_empty());
        assert_eq!(
            groups[1].allocatable.get("cpu"),
            Some(Quantity::from_units(7))
        );
    }

    #[test]
    fn overrides_serde_default_to_none() {
        let o: Offering = serde_json::from_value(serde_json::json!({
            "zone": "z", "capacityType": "spot", "price": 1.0,
        }))
        .unwrap();
        assert_eq!(o.capacity_override, None);
        assert_eq!(o.overhead_override, None);
        let v = serde_json::to_value(&o).unwrap();
        assert!(v.get("capacityOverride").is_none());
        let with = with_capacity(o, &[("cpu", 2)]);
        let back: Offering = serde_json::from_value(serde_json::to_value(&with).unwrap()).unwrap();
        assert_eq!(back.capacity_override, with.capacity_override);
    }

    proptest! {
        /// The groups partition the available offerings; group 0 holds exactly those without
        /// overrides; every offering's group has the allocatable of a launch through it.
        #[test]
        fn groups_partition_available_offerings(
            specs in proptest::collection::vec((any::<bool>(), 0u8..3, 0u8..3), 0..12)
        ) {
            let offerings: Vec<Offering> = specs
                .iter()
                .enumerate()
                .map(|(i, &(available, cap, ovh))| {
                    let mut o = Offering::new(format!("z{i}"), "spot", 1.0);
                    o.available = available;
                    if cap > 0 {
                        o.capacity_override = Some(list(&[("cpu", i64::from(cap) * 8)]));
                    }
                    if ovh > 0 {
                        o.overhead_override = Some(Overhead {
                            system_reserved: list(&[("memory", i64::from(ovh))]),
                            ..Overhead::default()
                        });
                    }
                    o
                })
                .collect();
            let it = instance_type(offerings);
            let groups = it.allocatable_groups();
            prop_assert!(!groups.is_empty());
            let mut seen: Vec<usize> = groups.iter().flat_map(|g| g.offerings.clone()).collect();
            seen.sort_unstable();
            let available: Vec<usize> = it
                .offerings
                .iter()
                .enumerate()
                .filter(|(_, o)| o.available)
                .map(|(i, _)| i)
                .collect();
            prop_assert_eq!(seen, available);
            for &i in &groups[0].offerings {
                prop_assert!(!it.offerings[i].has_overrides());
            }
            for (gi, g) in groups.iter().enumerate() {
                prop_assert!(gi == 0 || !g.offerings.is_empty());
                for &i in &g.offerings {
                    prop_assert_eq!(&it.allocatable_with(&it.offerings[i]), &g.allocatable);
                }
            }
            prop_assert_eq!(groups.len() > 1, it.has_offering_overrides());
        }
    }
}

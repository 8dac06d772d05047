//! The provisioning scheduler (upstream's provisioning scheduler
//! (`provisioning/scheduling/scheduler.go`), `scheduling/topology.go`, `scheduler.go`).
//!
//! Given pending pods, the cluster's existing nodes (and in-flight NodeClaims), the NodePools and
//! their instance types, [`solve`] decides where every pod goes: onto an existing node, onto a
//! NodeClaim created earlier in the same solve, or onto a new NodeClaim built from a NodePool
//! template. Pods that fit nowhere get a reason.
//!
//! The solve is deterministic: the same [`SchedulingInput`] and [`SchedulerOptions`] always give
//! the same [`Results`], byte for byte once serialised. Where upstream Karpenter is
//! deterministic, including its unstable but deterministic `sort.Slice` orders (the in-flight
//! NodeClaim list), this module decides exactly as upstream; where upstream depends on Go map
//! order or random values it uses the documented rules in `docs/conformance.md`.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::labels::LabelPolicy;
use crate::model::{ClusterNode, DaemonSet, InstanceType, Pod};
use crate::requirements::{NodeSelectorRequirement, Requirements};
use crate::resources::ResourceList;
use crate::taints::Taint;
use crate::volumes::{CsiNodeLimits, VolumeCatalog};

/// What to do when the candidate instance types cannot satisfy a requirement's `minValues`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MinValuesPolicy {
    /// The placement fails (upstream's default).
    #[default]
    Strict,
    /// The placement succeeds and the NodeClaim's `minValues` is lowered to what was achieved.
    BestEffort,
}

/// Whether soft constraints (preferred affinities, `ScheduleAnyway` spreads) are honoured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PreferencePolicy {
    /// Preferences are treated as constraints until relaxed one by one (upstream's default).
    #[default]
    Respect,
    /// Preferences are ignored.
    Ignore,
}

/// How reserved-capacity offerings constrain placement (upstream `offeringsToReserve` /
/// `reservationmanager.go`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ReservedCapacityMode {
    /// A pod compatible with a reservation that has no capacity left waits (the provisioner's
    /// mode upstream).
    #[default]
    Strict,
    /// Never fail because of reservations (the scheduler's default mode upstream, used by its
    /// benchmark).
    Fallback,
}

/// Options of a solve. Start from [`SchedulerOptions::default`] or
/// [`SchedulerOptions::for_provider`] and change what differs with the `with_*` methods (the
/// struct is `#[non_exhaustive]`: options will be added).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct SchedulerOptions {
    /// Well-known and restricted labels (core plus the provider's).
    pub label_policy: LabelPolicy,
    /// See [`MinValuesPolicy`].
    pub min_values_policy: MinValuesPolicy,
    /// See [`PreferencePolicy`].
    pub preference_policy: PreferencePolicy,
    /// See [`ReservedCapacityMode`].
    pub reserved_capacity_mode: ReservedCapacityMode,
    /// Instance types kept per NodeClaim after the solve, cheapest first (upstream: 600).
    pub max_instance_types: usize,
    /// Pods that reference DRA resource claims are not scheduled (upstream default `true`).
    pub ignore_dra_requests: bool,
    /// The provider's reservation-id label key (fake: `karpenter.test.sh/reservation-id`).
    pub reservation_id_label: Option<String>,
    /// The packing policy and its guard rails (read by [`packing::solve_packed`]; [`solve`]
    /// always packs as upstream).
    pub packing: packing::PackingOptions,
}

impl Default for SchedulerOptions {
    fn default() -> Self {
        SchedulerOptions {
            label_policy: LabelPolicy::core(),
            min_values_policy: MinValuesPolicy::Strict,
            preference_policy: PreferencePolicy::Respect,
            reserved_capacity_mode: ReservedCapacityMode::Strict,
            max_instance_types: 600,
            ignore_dra_requests: true,
            reservation_id_label: None,
            packing: packing::PackingOptions::default(),
        }
    }
}

impl SchedulerOptions {
    /// The options with this label policy.
    pub fn with_label_policy(mut self, label_policy: LabelPolicy) -> Self {
        self.label_policy = label_policy;
        self
    }

    /// The options with this [`MinValuesPolicy`].
    pub fn with_min_values_policy(mut self, policy: MinValuesPolicy) -> Self {
        self.min_values_policy = policy;
        self
    }

    /// The options with this [`PreferencePolicy`].
    pub fn with_preference_policy(mut self, policy: PreferencePolicy) -> Self {
        self.preference_policy = policy;
        self
    }

    /// The options with this [`ReservedCapacityMode`].
    pub fn with_reserved_capacity_mode(mut self, mode: ReservedCapacityMode) -> Self {
        self.reserved_capacity_mode = mode;
        self
    }

    /// The options keeping at most `max` instance types per NodeClaim.
    pub fn with_max_instance_types(mut self, max: usize) -> Self {
        self.max_instance_types = max;
        self
    }

    /// The options with DRA requests ignored (`true`, the default) or not.
    pub fn with_ignore_dra_requests(mut self, ignore: bool) -> Self {
        self.ignore_dra_requests = ignore;
        self
    }

    /// The options with this reservation-id label key.
    pub fn with_reservation_id_label(mut self, label: Option<String>) -> Self {
        self.reservation_id_label = label;
        self
    }

    /// The options with these packing options (policy override and guard rails).
    pub fn with_packing(mut self, packing: packing::PackingOptions) -> Self {
        self.packing = packing;
        self
    }

    /// The default options with the provider's label policy
    /// ([`CloudProvider::label_policy`](crate::cloud::CloudProvider::label_policy)) and
    /// reservation-id label, so that pods selecting the provider's labels schedule.
    pub fn for_provider<P: crate::cloud::CloudProvider + ?Sized>(provider: &P) -> Self {
        SchedulerOptions {
            label_policy: provider.label_policy(),
            reservation_id_label: provider.reservation_id_label().map(str::to_string),
            ..SchedulerOptions::default()
        }
    }
}

/// A NodePool as the scheduler needs it: its template and its instance types.
///
/// Build it from a `karpenter.sh/v1` NodePool with [`NodePoolInput::from_nodepool`], or with
/// [`NodePoolInput::new`] and the `with_*` methods.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct NodePoolInput {
    /// The NodePool's name.
    pub name: String,
    /// `spec.weight` (None = 0). Higher weights are tried first; ties by name descending.
    pub weight: i32,
    /// `spec.template.spec.requirements`.
    pub requirements: Vec<NodeSelectorRequirement>,
    /// `spec.template.metadata.labels`.
    pub labels: BTreeMap<String, String>,
    /// `spec.template.spec.taints`.
    pub taints: Vec<Taint>,
    /// `spec.template.spec.startupTaints`.
    pub startup_taints: Vec<Taint>,
    /// The node-class label `<group>/<lowercase kind>` = name, if the pool has a nodeClassRef.
    pub node_class_label: Option<(String, String)>,
    /// `spec.limits` (absent resources are unlimited).
    pub limits: ResourceList,
    /// The instance types the cloud provider offers for this pool.
    pub instance_types: Vec<Arc<InstanceType>>,
    /// The pool's packing policy (annotation [`packing::PACKING_ANNOTATION`]); `None` is
    /// `upstream`. [`PackingOptions::policy`](packing::PackingOptions::policy) overrides it.
    pub packing: Option<packing::PackingPolicy>,
}

impl NodePoolInput {
    /// A NodePool input named `name` with these instance types, weight 0, no requirements,
    /// labels, taints, node class or limits.
    pub fn new(name: impl Into<String>, instance_types: Vec<Arc<InstanceType>>) -> Self {
        NodePoolInput {
            name: name.into(),
            weight: 0,
            requirements: Vec::new(),
            labels: BTreeMap::new(),
            taints: Vec::new(),
            startup_taints: Vec::new(),
            node_class_label: None,
            limits: ResourceList::new(),
            instance_types,
            packing: None,
        }
    }

    /// The input with this weight.
    pub fn with_weight(mut self, weight: i32) -> Self {
        self.weight = weight;
        self
    }

    /// The input with these template requirements.
    pub fn with_requirements(mut self, requirements: Vec<NodeSelectorRequirement>) -> Self {
        self.requirements = requirements;
        self
    }

    /// The input with these template labels.
    pub fn with_labels(mut self, labels: BTreeMap<String, String>) -> Self {
        self.labels = labels;
        self
    }

    /// The input with these taints.
    pub fn with_taints(mut self, taints: Vec<Taint>) -> Self {
        self.taints = taints;
        self
    }

    /// The input with these startup taints.
    pub fn with_startup_taints(mut self, startup_taints: Vec<Taint>) -> Self {
        self.startup_taints = startup_taints;
        self
    }

    /// The input with this node-class label (`<group>/<lowercase kind>`, name).
    pub fn with_node_class_label(mut self, label: Option<(String, String)>) -> Self {
        self.node_class_label = label;
        self
    }

    /// The input with these limits.
    pub fn with_limits(mut self, limits: ResourceList) -> Self {
        self.limits = limits;
        self
    }

    /// The input with this packing policy (`None`: `upstream`).
    pub fn with_packing(mut self, packing: Option<packing::PackingPolicy>) -> Self {
        self.packing = packing;
        self
    }

    /// The scheduler's view of a `karpenter.sh/v1` NodePool with the instance types its cloud
    /// provider offers. Limits absent from the pool are unlimited. The packing policy comes from
    /// the annotation [`packing::PACKING_ANNOTATION`]; an unknown value counts as absent
    /// (`upstream`): callers that report it check it with
    /// [`PackingPolicy::from_annotations`](packing::PackingPolicy::from_annotations).
    ///
    /// ```
    /// use karpenter_core::api::{
    ///     NodeClaimTemplate, NodeClaimTemplateSpec, NodeClassReference, NodePool, NodePoolSpec,
    ///     TemplateMetadata,
    /// };
    /// use karpenter_core::scheduling::NodePoolInput;
    ///
    /// let class = NodeClassReference::new("karpenter.k8s.aws", "EC2NodeClass", "default");
    /// let template = NodeClaimTemplate {
    ///     metadata: TemplateMetadata::default(),
    ///     spec: NodeClaimTemplateSpec::new(class),
    /// };
    /// let pool = NodePool::new("default", NodePoolSpec::new(template));
    /// let input = NodePoolInput::from_nodepool(&pool, Vec::new());
    /// assert_eq!(input.name, "default");
    /// assert_eq!(input.weight, 0);
    /// assert_eq!(
    ///     input.node_class_label,
    ///     Some(("karpenter.k8s.aws/ec2nodeclass".to_string(), "default".to_string()))
    /// );
    /// ```
    pub fn from_nodepool(
        pool: &crate::api::NodePool,
        instance_types: Vec<Arc<InstanceType>>,
    ) -> Self {
        let template = &pool.spec.template;
        let class = &template.spec.node_class_ref;
        let node_class_label = (!class.kind.is_empty() && !class.name.is_empty())
            .then(|| (class.label_key(), class.name.clone()));
        NodePoolInput {
            name: pool.name().to_string(),
            weight: pool.spec.effective_weight(),
            requirements: template.spec.requirements().to_vec(),
            labels: template.metadata.labels.clone(),
            taints: template.spec.taints.clone(),
            startup_taints: template.spec.startup_taints.clone(),
            node_class_label,
            limits: pool.spec.limits.clone().unwrap_or_default(),
            instance_types,
            packing: packing::PackingPolicy::from_annotations(&pool.metadata.annotations)
                .ok()
                .flatten(),
        }
    }
}

/// A node already in the cluster (or an in-flight NodeClaim) and the pods bound to it.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ExistingNodeInput {
    /// The node.
    pub node: ClusterNode,
    /// Pods bound to it (all of them, including DaemonSet pods).
    pub pods: Vec<Pod>,
    /// Per-CSI-driver attach limits (from the node's CSINode): driver → volume count. Drivers
    /// without an entry are unlimited (upstream `volumetopology.go` / `volumeusage.go`).
    pub volume_limits: CsiNodeLimits,
}

impl ExistingNodeInput {
    /// The node with its bound pods and no volume limits.
    pub fn new(node: ClusterNode, pods: Vec<Pod>) -> Self {
        ExistingNodeInput {
            node,
            pods,
            volume_limits: CsiNodeLimits::new(),
        }
    }

    /// The input with these per-CSI-driver attach limits.
    pub fn with_volume_limits(mut self, volume_limits: CsiNodeLimits) -> Self {
        self.volume_limits = volume_limits;
        self
    }
}

/// A borrowed existing node: what [`solve_with_existing`] reads for nodes the caller already
/// holds (a consolidation simulation borrows them from its cluster snapshot instead of copying
/// every bound pod).
#[derive(Debug, Clone, Copy)]
pub struct ExistingNodeRef<'a> {
    /// The node.
    pub node: &'a ClusterNode,
    /// Pods bound to it (all of them, including DaemonSet pods).
    pub pods: &'a [Pod],
    /// Per-CSI-driver attach limits (see [`ExistingNodeInput::volume_limits`]).
    pub volume_limits: &'a CsiNodeLimits,
}

impl<'a> From<&'a ExistingNodeInput> for ExistingNodeRef<'a> {
    fn from(n: &'a ExistingNodeInput) -> Self {
        ExistingNodeRef {
            node: &n.node,
            pods: &n.pods,
            volume_limits: &n.volume_limits,
        }
    }
}

/// Everything a solve reads. Start from [`SchedulingInput::new`] and add what the solve reads
/// with the `with_*` methods (the struct is `#[non_exhaustive]`: inputs will be added).
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct SchedulingInput {
    /// Eligible NodePools (ready, dynamic, not being deleted), any order.
    pub node_pools: Vec<NodePoolInput>,
    /// Existing nodes and in-flight NodeClaims with their bound pods.
    pub existing_nodes: Vec<ExistingNodeInput>,
    /// DaemonSets, whose pods add overhead to every node they would run on.
    pub daemonsets: Vec<DaemonSet>,
    /// Pods to place.
    pub pods: Vec<Pod>,
    /// Namespace labels, for pod-affinity terms with a `namespaceSelector`.
    pub namespace_labels: BTreeMap<String, BTreeMap<String, String>>,
    /// PersistentVolumeClaims, PersistentVolumes and StorageClasses the pods' volumes resolve
    /// through (upstream `volumetopology.go` / `volumeusage.go`).
    pub volumes: VolumeCatalog,
    /// Set when the solve simulates a consolidation (upstream
    /// `Requirements.NodeSelectorRequirements`): existing nodes still inside their NodePool's
    /// `consolidateAfter` window refuse pods displaced from the candidates.
    pub consolidation: Option<ConsolidationSimulation>,
}

impl SchedulingInput {
    /// An empty input: no NodePools, nodes, DaemonSets or pods.
    pub fn new() -> Self {
        Self::default()
    }

    /// The input with these NodePools.
    pub fn with_node_pools(mut self, node_pools: Vec<NodePoolInput>) -> Self {
        self.node_pools = node_pools;
        self
    }

    /// The input with these existing nodes.
    pub fn with_existing_nodes(mut self, existing_nodes: Vec<ExistingNodeInput>) -> Self {
        self.existing_nodes = existing_nodes;
        self
    }

    /// The input with these DaemonSets.
    pub fn with_daemonsets(mut self, daemonsets: Vec<DaemonSet>) -> Self {
        self.daemonsets = daemonsets;
        self
    }

    /// The input with these pods to place.
    pub fn with_pods(mut self, pods: Vec<Pod>) -> Self {
        self.pods = pods;
        self
    }

    /// The input with these namespace labels.
    pub fn with_namespace_labels(
        mut self,
        namespace_labels: BTreeMap<String, BTreeMap<String, String>>,
    ) -> Self {
        self.namespace_labels = namespace_labels;
        self
    }

    /// The input with this volume catalog.
    pub fn with_volumes(mut self, volumes: VolumeCatalog) -> Self {
        self.volumes = volumes;
        self
    }

    /// The input simulating a consolidation (or not).
    pub fn with_consolidation(mut self, consolidation: Option<ConsolidationSimulation>) -> Self {
        self.consolidation = consolidation;
        self
    }
}

/// The extra rules of a consolidation simulation.
#[derive(Debug, Clone, Default)]
pub struct ConsolidationSimulation {
    /// Names of existing nodes that may receive only pending pods and pods of deleting nodes.
    pub nodes_refusing_displaced_pods: std::collections::BTreeSet<String>,
    /// Keys (`namespace/name`) of the pods displaced from the candidates.
    pub displaced_pods: std::collections::BTreeSet<String>,
}

/// A NodeClaim the solve decided to create.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct NewNodeClaim {
    /// The NodePool it comes from.
    pub node_pool: String,
    /// Its requirements (template ∧ pods ∧ topology), without the simulation-only keys
    /// (`karpenter.sh/registered`, `karpenter.sh/initialized`) and without the hostname. The
    /// NodeClaim to create also pins the instance types and capacity types: see
    /// [`NewNodeClaim::node_claim_requirements`].
    pub requirements: Requirements,
    /// The instance types it may launch as, cheapest compatible offering first, truncated to
    /// `max_instance_types`.
    pub instance_types: Vec<Arc<InstanceType>>,
    /// Keys (`namespace/name`) of the pods placed on it, in placement order.
    pub pods: Vec<String>,
    /// The pods' requests plus the smallest daemon overhead among the remaining instance types.
    pub requests: ResourceList,
    /// Labels the node will carry (template labels, pool and node-class labels, resolved custom
    /// requirement labels).
    pub labels: BTreeMap<String, String>,
    /// Taints from the template.
    pub taints: Vec<Taint>,
    /// Startup taints from the template.
    pub startup_taints: Vec<Taint>,
    /// Whether a `minValues` was lowered under [`MinValuesPolicy::BestEffort`].
    pub min_values_relaxed: bool,
    /// Reservation ids this claim holds (it launches into one of them).
    pub reservation_ids: Vec<String>,
}

impl NewNodeClaim {
    /// The requirements of the NodeClaim to create (upstream `ToNodeClaim`): [`requirements`]
    /// plus `node.kubernetes.io/instance-type In [instance_types]` (keeping that key's
    /// `minValues`) and `karpenter.sh/capacity-type In [...]`, the capacity types of the
    /// available offerings of those types that are compatible with the requirements.
    ///
    /// [`requirements`]: NewNodeClaim::requirements
    pub fn node_claim_requirements(&self, policy: &LabelPolicy) -> Requirements {
        use crate::requirements::{Operator, Requirement};
        let mut reqs = self.requirements.clone();
        let min_values = reqs
            .get(crate::labels::INSTANCE_TYPE)
            .and_then(|r| r.min_values());
        reqs.remove(crate::labels::INSTANCE_TYPE);
        reqs.add(
            Requirement::new(
                crate::labels::INSTANCE_TYPE,
                Operator::In,
                self.instance_types.iter().map(|it| it.name()),
            )
            .with_min_values(min_values),
        );
        let mut capacity_types = std::collections::BTreeSet::new();
        for it in &self.instance_types {
            for o in it.available_offerings() {
                if self
                    .requirements
                    .is_compatible(o.requirements(), Some(policy))
                {
                    capacity_types.insert(o.capacity_type());
                }
            }
        }
        if !capacity_types.is_empty() {
            reqs.add(Requirement::new(
                crate::labels::CAPACITY_TYPE,
                Operator::In,
                capacity_types,
            ));
        }
        reqs
    }
}

/// An existing node that received pods in this solve.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ExistingNodeResult {
    /// The node's name.
    pub name: String,
    /// Keys (`namespace/name`) of the pods placed on it, in placement order.
    pub pods: Vec<String>,
}

impl ExistingNodeResult {
    /// The node `name` with these pods (`namespace/name`) placed on it.
    pub fn new(name: impl Into<String>, pods: Vec<String>) -> Self {
        ExistingNodeResult {
            name: name.into(),
            pods,
        }
    }
}

/// Why a pod could not be placed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
#[non_exhaustive]
pub struct PodError {
    /// The category of the last failure.
    pub kind: PodErrorKind,
    /// A human-readable reason naming what failed.
    pub message: String,
}

/// The category of a [`PodError`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum PodErrorKind {
    /// No instance type satisfies requirements, resources and offerings together.
    InstanceTypes,
    /// A taint of every candidate is not tolerated.
    Taints,
    /// The pod's node requirements conflict with every NodePool.
    Requirements,
    /// A topology spread or pod (anti-)affinity constraint cannot be met.
    Topology,
    /// NodePool limits are exhausted.
    Limits,
    /// minValues could not be met.
    MinValues,
    /// A reserved offering the pod needs has no capacity left (the pod waits).
    ReservedOffering,
    /// The pod references DRA claims, which are ignored.
    Dra,
    /// Host-port conflict.
    HostPorts,
    /// No NodePool is available.
    NoNodePools,
    /// The pod is invalid for scheduling (restricted label, bad operator, a volume whose claim
    /// is not usable yet, ...).
    Invalid,
}

/// The result of a solve.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct Results {
    /// NodeClaims to create, in creation order.
    pub new_node_claims: Vec<NewNodeClaim>,
    /// Existing nodes that received pods, in the order nodes were considered.
    pub existing_nodes: Vec<ExistingNodeResult>,
    /// Pods that could not be placed, by `namespace/name`.
    pub pod_errors: BTreeMap<String, PodError>,
    /// What upstream's scheduler gauges would show.
    pub metrics: SolveMetrics,
}

pub mod bound;
pub mod defaults;
mod dense;
mod gosort;
mod metrics;
pub mod packing;
mod podreqs;
pub(crate) mod solver;
pub(crate) mod topology;
mod volumes;

pub use metrics::{SolveMetrics, ZONE_FLEXIBLE, ZONE_NONE};

pub(crate) use solver::{ExistingKey, ExistingMemo, solve_with_existing_memo};
pub use solver::{solve, solve_with_existing};

#[cfg(test)]
mod fidelity_tests;
#[cfg(test)]
mod prepared_tests;
#[cfg(test)]
mod tests;

//! Shared helpers of the `suite_test.go` conformance ports (upstream `suite_test.go`): the suite's
//! default NodePool and cluster, a small pod builder, quantities, and round helpers for the
//! scenarios that provision without binding or reschedule pods of deleting nodes.

use std::collections::BTreeSet;
use std::sync::Arc;

use karpenter_core::disruption::candidates::{PdbLimits, is_currently_reschedulable};
use karpenter_core::labels;
use karpenter_core::model::{
    ClusterNode, DaemonSet, InstanceType, LabelSelector, NodeAffinity, NodeSelectorTerm,
    OwnerReference, Pod, PodAffinity, PodAffinityTerm, PodDisruptionBudget,
    PreferredSchedulingTerm, Timestamp, TopologySpreadConstraint, WhenUnsatisfiable,
};
use karpenter_core::requirements::{NodeSelectorRequirement, Operator};
use karpenter_core::resources::{Quantity, ResourceList, names};
use karpenter_core::scheduling::NodePoolInput;
use karpenter_fake::catalog::default_catalog;
use karpenter_fake::harness::{Cluster, Round, node_pool};

/// Parses a Kubernetes quantity written in a test ("10m", "1.8G", "2Gi").
pub fn q(s: &str) -> Quantity {
    Quantity::parse(s).unwrap_or_else(|e| panic!("bad quantity {s:?}: {e}"))
}

/// A resource list from `(name, quantity)` pairs.
pub fn resources(items: &[(&str, &str)]) -> ResourceList {
    let mut r = ResourceList::new();
    for (name, qty) in items {
        r.insert(*name, q(qty));
    }
    r
}

/// A requirement as written in a pod or NodePool.
pub fn req(key: &str, op: Operator, values: &[&str]) -> NodeSelectorRequirement {
    NodeSelectorRequirement::new(key, op, values.iter().copied())
}

/// The suite's NodePool `name` (upstream's `BeforeEach`): `karpenter.sh/capacity-type In [spot,
/// on-demand, reserved]`, limits `cpu: 2000`, the default catalog.
pub fn suite_pool_named(name: &str) -> NodePoolInput {
    let mut pool = node_pool(name, default_catalog());
    pool.requirements = vec![req(
        labels::CAPACITY_TYPE,
        Operator::In,
        &["spot", "on-demand", "reserved"],
    )];
    pool.limits = resources(&[(names::CPU, "2000")]);
    pool
}

/// [`suite_pool_named`] `"default"`.
pub fn suite_pool() -> NodePoolInput {
    suite_pool_named("default")
}

/// A cluster with the suite's default NodePool and `MaxInstanceTypes = 60`.
pub fn suite_cluster() -> Cluster {
    Cluster::new().with_node_pool(suite_pool())
}

/// A cluster with exactly `pool`.
pub fn cluster_with(pool: NodePoolInput) -> Cluster {
    Cluster::new().with_node_pool(pool)
}

/// `namespace/name` of a pod in the `default` namespace.
pub fn key(name: &str) -> String {
    format!("default/{name}")
}

/// Builder-style changes to test pods (upstream `test.PodOptions`).
pub trait PodExt: Sized {
    /// Mutable access to the pod.
    fn pod_mut(&mut self) -> &mut Pod;

    /// Adds a resource request (requests of test pods that only set limits equal the limits).
    fn request(mut self, name: &str, qty: &str) -> Self {
        self.pod_mut().requests.insert(name, q(qty));
        self
    }

    /// Requests `qty` CPU.
    fn cpu(self, qty: &str) -> Self {
        self.request(names::CPU, qty)
    }

    /// Requests `qty` memory.
    fn memory(self, qty: &str) -> Self {
        self.request(names::MEMORY, qty)
    }

    /// Adds a label.
    fn label(mut self, k: &str, v: &str) -> Self {
        self.pod_mut().labels.insert(k.into(), v.into());
        self
    }

    /// Adds a `nodeSelector` entry.
    fn selector(mut self, k: &str, v: &str) -> Self {
        self.pod_mut().node_selector.insert(k.into(), v.into());
        self
    }

    /// Appends an expression to the first required node-affinity term (upstream
    /// `NodeRequirements`: one term with every expression).
    fn require(mut self, k: &str, op: Operator, values: &[&str]) -> Self {
        let affinity = self
            .pod_mut()
            .node_affinity
            .get_or_insert_with(NodeAffinity::default);
        if affinity.required.is_empty() {
            affinity.required.push(NodeSelectorTerm::default());
        }
        affinity.required[0]
            .match_expressions
            .push(req(k, op, values));
        self
    }

    /// Appends a separate required node-affinity term (terms are ORed).
    fn require_term(mut self, term: &[NodeSelectorRequirement]) -> Self {
        self.pod_mut()
            .node_affinity
            .get_or_insert_with(NodeAffinity::default)
            .required
            .push(NodeSelectorTerm {
                match_expressions: term.to_vec(),
            });
        self
    }

    /// Appends an expression to the weight-1 preferred term (upstream `NodePreferences`).
    fn prefer(mut self, k: &str, op: Operator, values: &[&str]) -> Self {
        let affinity = self
            .pod_mut()
            .node_affinity
            .get_or_insert_with(NodeAffinity::default);
        if affinity.preferred.is_empty() {
            affinity.preferred.push(PreferredSchedulingTerm {
                weight: 1,
                preference: NodeSelectorTerm::default(),
            });
        }
        affinity.preferred[0]
            .preference
            .match_expressions
            .push(req(k, op, values));
        self
    }

    /// Appends a preferred node-affinity term of weight `weight`.
    fn prefer_term(mut self, weight: i32, term: &[NodeSelectorRequirement]) -> Self {
        self.pod_mut()
            .node_affinity
            .get_or_insert_with(NodeAffinity::default)
            .preferred
            .push(PreferredSchedulingTerm {
                weight,
                preference: NodeSelectorTerm {
                    match_expressions: term.to_vec(),
                },
            });
        self
    }

    /// A required pod-affinity term selecting `labels` over `topology_key`.
    fn affinity(mut self, labels: &[(&str, &str)], topology_key: &str) -> Self {
        self.pod_mut()
            .pod_affinity
            .get_or_insert_with(PodAffinity::default)
            .required
            .push(term(labels, topology_key));
        self
    }

    /// A required pod-anti-affinity term selecting `labels` over `topology_key`.
    fn anti_affinity(mut self, labels: &[(&str, &str)], topology_key: &str) -> Self {
        self.pod_mut()
            .pod_anti_affinity
            .get_or_insert_with(PodAffinity::default)
            .required
            .push(term(labels, topology_key));
        self
    }

    /// A `DoNotSchedule` spread with `maxSkew` 1 over `topology_key` selecting `labels`.
    fn spread(mut self, labels: &[(&str, &str)], topology_key: &str) -> Self {
        self.pod_mut().topology_spread_constraints.push(
            TopologySpreadConstraint::new(1, topology_key, WhenUnsatisfiable::DoNotSchedule)
                .with_label_selector(LabelSelector::from_labels(labels.iter().copied())),
        );
        self
    }

    /// Sets the controlling owner.
    fn owned_by(mut self, kind: &str, name: &str) -> Self {
        self.pod_mut().owner =
            Some(OwnerReference::new("apps/v1", kind, name).with_controller(true));
        self
    }

    /// Adds a TCP host port on `0.0.0.0`.
    fn host_port(mut self, port: i32) -> Self {
        self.pod_mut()
            .host_ports
            .push(karpenter_core::hostports::HostPort::new("", port, "TCP"));
        self
    }
}

impl PodExt for Pod {
    fn pod_mut(&mut self) -> &mut Pod {
        self
    }
}

fn term(labels: &[(&str, &str)], topology_key: &str) -> PodAffinityTerm {
    PodAffinityTerm::new(
        LabelSelector::from_labels(labels.iter().copied()),
        topology_key,
    )
}

/// A pending pod `default/<name>`.
pub fn pod(name: &str) -> Pod {
    Pod::new("default", name)
}

/// `n` pods `<prefix>-000` … built by `f` (names sort in creation order).
pub fn pods(prefix: &str, n: usize, f: impl Fn(Pod) -> Pod) -> Vec<Pod> {
    (0..n)
        .map(|i| f(pod(&format!("{prefix}-{i:03}"))))
        .collect()
}

/// A DaemonSet `default/<name>` running `template` (its pod's owner is set to the DaemonSet).
pub fn daemonset(name: &str, template: Pod) -> DaemonSet {
    DaemonSet::new("default", name, template.owned_by("DaemonSet", name))
}

/// An existing node named `name` with `allocatable` (= capacity), initialized and unmanaged.
pub fn existing_node(name: &str, allocatable: &[(&str, &str)]) -> ClusterNode {
    let mut node = ClusterNode::new(name);
    node.allocatable = resources(allocatable);
    node.capacity = node.allocatable.clone();
    node
}

/// The node of `pod` after a round, which must have bound it.
pub fn node_of(round: &Round, pod: &str) -> ClusterNode {
    round
        .node_of(pod)
        .unwrap_or_else(|| panic!("{pod} was not scheduled: {:?}", round.results.pod_errors))
        .clone()
}

/// The distinct nodes the given pods were bound to in `round`.
pub fn distinct_nodes(round: &Round, pods: &[Pod]) -> BTreeSet<String> {
    pods.iter().map(|p| node_of(round, &p.key()).name).collect()
}

/// The instance-type label of `node`.
pub fn instance_type(node: &ClusterNode) -> &str {
    node.labels
        .get(labels::INSTANCE_TYPE)
        .map_or("", String::as_str)
}

/// `allocatable − requests of the pods bound to it` of `name`, for one resource (upstream's
/// `StateNode.Available()` read in several scenarios).
pub fn available(cluster: &Cluster, name: &str, resource: &str) -> Quantity {
    let node = cluster
        .node(name)
        .unwrap_or_else(|| panic!("no node {name}"));
    let used: Quantity = cluster
        .pods_on(name)
        .iter()
        .filter(|p| !p.is_terminal())
        .map(|p| p.requests.get_or_zero(resource))
        .fold(Quantity::ZERO, |a, b| a + b);
    node.allocatable.get_or_zero(resource) - used
}

/// The requests of DaemonSet pods bound to `name`, for one resource (upstream's
/// `StateNode.DaemonSetRequests()`).
pub fn daemonset_requests(cluster: &Cluster, name: &str, resource: &str) -> Quantity {
    cluster
        .pods_on(name)
        .iter()
        .filter(|p| p.is_daemonset_pod())
        .map(|p| p.requests.get_or_zero(resource))
        .fold(Quantity::ZERO, |a, b| a + b)
}

/// `instance_type` with extra capacity (upstream tests add to `Capacity` after construction,
/// and allocatable is derived lazily there).
pub fn with_extra_capacity(it: &InstanceType, extra: &[(&str, &str)]) -> Arc<InstanceType> {
    let mut capacity = it.capacity().clone();
    for (name, qty) in extra {
        capacity.insert(*name, q(qty));
    }
    Arc::new(InstanceType::new(
        it.name().to_string(),
        it.requirements().clone(),
        it.offerings.clone(),
        capacity,
        it.overhead().clone(),
    ))
}

/// Pods provisioned without binding (upstream `ExpectProvisionedNoBinding`): they stay in the
/// API server, unbound and pending, and every later round lists them again.
#[derive(Default)]
pub struct Unbound {
    pending: Vec<Pod>,
}

impl Unbound {
    /// Runs a round with the pods provisioned earlier without binding plus `new`, then undoes
    /// the bindings: the nodes launched stay, the pods remain pending.
    pub fn provision(&mut self, cluster: &mut Cluster, new: Vec<Pod>) -> Round {
        self.pending.extend(new);
        let round = cluster.provision(self.pending.clone());
        for p in &self.pending {
            cluster.delete_pod(&p.key());
        }
        round
    }
}

/// A provisioning round triggered with no new pods while some nodes are marked for deletion
/// (upstream `provisioner.go`): the pods of every deleting node that are currently reschedulable
/// (upstream `pod.IsReschedulable`: active or a terminating StatefulSet pod, not DaemonSet or
/// mirror, no active do-not-disrupt, not fully blocked by `pdbs`) are offered as pending pods of
/// the round. The harness only offers unbound pods, so they are detached from their node first.
pub fn provision_deleting_round(cluster: &mut Cluster, pdbs: &[PodDisruptionBudget]) -> Round {
    let limits = PdbLimits::new(pdbs);
    let now = Timestamp::UNIX_EPOCH;
    let deleting: Vec<String> = cluster
        .nodes()
        .filter(|n| n.marked_for_deletion)
        .map(|n| n.name.clone())
        .collect();
    let mut offered = Vec::new();
    for name in &deleting {
        for p in cluster.pods_on(name) {
            if is_currently_reschedulable(p, &limits, now) {
                let mut p = p.clone();
                p.node_name = None;
                offered.push(p);
            }
        }
    }
    for p in &offered {
        cluster.delete_pod(&p.key());
    }
    cluster.provision(offered)
}

/// Marks the node named `name` for deletion.
pub fn mark_for_deletion(cluster: &mut Cluster, name: &str) {
    cluster
        .node_mut(name)
        .unwrap_or_else(|| panic!("no node {name}"))
        .marked_for_deletion = true;
}

/// Asserts `pod` stayed unbound in `round` and got a pod error (upstream `ExpectNotScheduled`).
pub fn assert_not_scheduled(round: &Round, pod: &str) {
    assert!(
        !round.scheduled(pod),
        "{pod} was scheduled on {:?}",
        round.bindings.get(pod)
    );
    assert!(
        round.results.pod_errors.contains_key(pod),
        "{pod} has no pod error: {:?}",
        round.results.pod_errors
    );
}

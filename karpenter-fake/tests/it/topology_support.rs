//! Shared helpers of the ported `topology_test.go` / `instance_selection_test.go` scenarios
//! (upstream `topology_test.go`, `instance_selection_test.go`): a pod builder mirroring upstream's
//! `test.PodOptions`, spread-constraint and affinity-term builders, the default NodePools and skew
//! helpers.

use std::cell::Cell;
use std::collections::{BTreeMap, BTreeSet};

use karpenter_core::labels;
use karpenter_core::model::{
    ClusterNode, LabelSelector, LabelSelectorRequirement, NodeAffinity, NodeInclusionPolicy,
    NodeSelectorTerm, Pod, PodAffinity, PodAffinityTerm, PodPhase, PreferredSchedulingTerm,
    SelectorOperator, Timestamp, TopologySpreadConstraint, WeightedPodAffinityTerm,
    WhenUnsatisfiable,
};
use karpenter_core::requirements::{NodeSelectorRequirement, Operator};
use karpenter_core::resources::{Quantity, ResourceList, names};
use karpenter_core::scheduling::{NodePoolInput, PodErrorKind};
use karpenter_core::taints::{Taint, TaintEffect, Toleration, TolerationOperator};
use karpenter_fake::catalog::default_catalog;
use karpenter_fake::harness::{Cluster, Round, node_pool};

/// The `labels` of upstream's topology suite: `{test: test}`.
pub const TEST_LABELS: [(&str, &str); 1] = [("test", "test")];

thread_local! {
    static NEXT_POD: Cell<u64> = const { Cell::new(0) };
}

fn next_pod_id() -> u64 {
    NEXT_POD.with(|c| {
        let n = c.get() + 1;
        c.set(n);
        n
    })
}

/// `{test: test}` as a selector.
pub fn test_selector() -> LabelSelector {
    LabelSelector::from_labels(TEST_LABELS)
}

/// A selector matching exactly `labels`.
pub fn selector(labels: &[(&str, &str)]) -> LabelSelector {
    LabelSelector::from_labels(labels.iter().copied())
}

/// The selector upstream's `TopologyListOptions` uses for a nil label selector: everything.
pub fn everything() -> LabelSelector {
    LabelSelector::default()
}

/// A `key In [values]` label-selector expression.
pub fn selector_in(key: &str, values: &[&str]) -> LabelSelector {
    LabelSelector::default().with_expression(LabelSelectorRequirement {
        key: key.to_string(),
        operator: SelectorOperator::In,
        values: values.iter().map(|v| v.to_string()).collect(),
    })
}

/// A `DoNotSchedule` spread with `maxSkew` on `key`, selecting `selector`.
pub fn spread(
    key: &str,
    max_skew: i32,
    selector: Option<LabelSelector>,
) -> TopologySpreadConstraint {
    let mut tsc = TopologySpreadConstraint::new(max_skew, key, WhenUnsatisfiable::DoNotSchedule);
    tsc.label_selector = selector;
    tsc
}

/// A `DoNotSchedule` spread with `maxSkew` on `key` selecting `{test: test}`.
pub fn test_spread(key: &str, max_skew: i32) -> TopologySpreadConstraint {
    spread(key, max_skew, Some(test_selector()))
}

/// The spread as `ScheduleAnyway`.
pub fn anyway(mut tsc: TopologySpreadConstraint) -> TopologySpreadConstraint {
    tsc.when_unsatisfiable = WhenUnsatisfiable::ScheduleAnyway;
    tsc
}

/// The spread with `minDomains`.
pub fn min_domains(mut tsc: TopologySpreadConstraint, n: i32) -> TopologySpreadConstraint {
    tsc.min_domains = Some(n);
    tsc
}

/// The spread with a `nodeTaintsPolicy`.
pub fn taints_policy(
    mut tsc: TopologySpreadConstraint,
    policy: NodeInclusionPolicy,
) -> TopologySpreadConstraint {
    tsc.node_taints_policy = Some(policy);
    tsc
}

/// The spread with a `nodeAffinityPolicy`.
pub fn affinity_policy(
    mut tsc: TopologySpreadConstraint,
    policy: NodeInclusionPolicy,
) -> TopologySpreadConstraint {
    tsc.node_affinity_policy = Some(policy);
    tsc
}

/// A pod (anti-)affinity term selecting `labels` on `key`.
pub fn term(labels: &[(&str, &str)], key: &str) -> PodAffinityTerm {
    PodAffinityTerm::new(selector(labels), key.to_string())
}

/// A weighted pod (anti-)affinity term.
pub fn weighted(weight: i32, term: PodAffinityTerm) -> WeightedPodAffinityTerm {
    WeightedPodAffinityTerm {
        weight,
        pod_affinity_term: term,
    }
}

/// A node-selector requirement.
pub fn req(key: &str, op: Operator, values: &[&str]) -> NodeSelectorRequirement {
    NodeSelectorRequirement::new(key, op, values.iter().copied())
}

/// `key In [values]`.
pub fn req_in(key: &str, values: &[&str]) -> NodeSelectorRequirement {
    req(key, Operator::In, values)
}

/// A NoSchedule taint.
pub fn no_schedule(key: &str, value: &str) -> Taint {
    Taint::new(key, value, TaintEffect::NoSchedule)
}

/// A toleration.
pub fn toleration(
    key: &str,
    operator: TolerationOperator,
    value: &str,
    effect: Option<TaintEffect>,
) -> Toleration {
    Toleration {
        key: key.to_string(),
        operator: Some(operator),
        value: value.to_string(),
        effect,
        toleration_seconds: None,
    }
}

/// A resource list from `(name, quantity)` pairs (quantities in Kubernetes notation).
pub fn resources(pairs: &[(&str, &str)]) -> ResourceList {
    let mut r = ResourceList::new();
    for (name, q) in pairs {
        r.insert(*name, Quantity::parse(q).expect("valid quantity"));
    }
    r
}

/// Builds a pod like upstream's `test.UnschedulablePod(test.PodOptions{...})`: namespace
/// `default`, a unique name, and a creation time later than every pod built before it on this
/// thread (so equal-sized pods are queued in generation order, as upstream).
#[derive(Debug, Clone)]
pub struct PodBuilder {
    pod: Pod,
}

/// A new pod builder.
pub fn pod() -> PodBuilder {
    let id = next_pod_id();
    let mut p = Pod::new("default", format!("pod-{id:05}"));
    p.creation_timestamp =
        Timestamp::from_second(i64::try_from(id).unwrap_or(i64::MAX)).expect("valid timestamp");
    PodBuilder { pod: p }
}

impl PodBuilder {
    /// Adds labels.
    pub fn labels(mut self, labels: &[(&str, &str)]) -> Self {
        for (k, v) in labels {
            self.pod.labels.insert(k.to_string(), v.to_string());
        }
        self
    }

    /// Adds the `{test: test}` labels.
    pub fn test_labels(self) -> Self {
        self.labels(&TEST_LABELS)
    }

    /// Sets the namespace (and the uid accordingly).
    pub fn namespace(mut self, ns: &str) -> Self {
        self.pod.namespace = ns.to_string();
        self.pod.uid = format!("{ns}/{}", self.pod.name);
        self
    }

    /// Sets the CPU request.
    pub fn cpu(mut self, q: &str) -> Self {
        self.pod
            .requests
            .insert(names::CPU, Quantity::parse(q).expect("valid quantity"));
        self
    }

    /// Sets the memory request.
    pub fn memory(mut self, q: &str) -> Self {
        self.pod
            .requests
            .insert(names::MEMORY, Quantity::parse(q).expect("valid quantity"));
        self
    }

    /// Adds a `nodeSelector` entry.
    pub fn node_selector(mut self, key: &str, value: &str) -> Self {
        self.pod
            .node_selector
            .insert(key.to_string(), value.to_string());
        self
    }

    /// Adds an expression to the pod's single required node-affinity term (upstream
    /// `NodeRequirements`).
    pub fn node_requirement(mut self, r: NodeSelectorRequirement) -> Self {
        let affinity = self
            .pod
            .node_affinity
            .get_or_insert_with(NodeAffinity::default);
        match affinity.required.first_mut() {
            Some(t) => t.match_expressions.push(r),
            None => affinity.required.push(NodeSelectorTerm {
                match_expressions: vec![r],
            }),
        }
        self
    }

    /// Adds an expression to the pod's single weight-1 preferred node-affinity term (upstream
    /// `NodePreferences`).
    pub fn node_preference(mut self, r: NodeSelectorRequirement) -> Self {
        let affinity = self
            .pod
            .node_affinity
            .get_or_insert_with(NodeAffinity::default);
        match affinity.preferred.first_mut() {
            Some(t) => t.preference.match_expressions.push(r),
            None => affinity.preferred.push(PreferredSchedulingTerm {
                weight: 1,
                preference: NodeSelectorTerm {
                    match_expressions: vec![r],
                },
            }),
        }
        self
    }

    /// Adds a topology spread constraint.
    pub fn spread(mut self, tsc: TopologySpreadConstraint) -> Self {
        self.pod.topology_spread_constraints.push(tsc);
        self
    }

    /// Adds several topology spread constraints.
    pub fn spreads(mut self, tscs: &[TopologySpreadConstraint]) -> Self {
        self.pod
            .topology_spread_constraints
            .extend(tscs.iter().cloned());
        self
    }

    /// Adds a required pod-affinity term.
    pub fn affinity(mut self, t: PodAffinityTerm) -> Self {
        self.pod
            .pod_affinity
            .get_or_insert_with(PodAffinity::default)
            .required
            .push(t);
        self
    }

    /// Adds a preferred pod-affinity term.
    pub fn affinity_preference(mut self, t: WeightedPodAffinityTerm) -> Self {
        self.pod
            .pod_affinity
            .get_or_insert_with(PodAffinity::default)
            .preferred
            .push(t);
        self
    }

    /// Adds a required pod-anti-affinity term.
    pub fn anti_affinity(mut self, t: PodAffinityTerm) -> Self {
        self.pod
            .pod_anti_affinity
            .get_or_insert_with(PodAffinity::default)
            .required
            .push(t);
        self
    }

    /// Adds a preferred pod-anti-affinity term.
    pub fn anti_affinity_preference(mut self, t: WeightedPodAffinityTerm) -> Self {
        self.pod
            .pod_anti_affinity
            .get_or_insert_with(PodAffinity::default)
            .preferred
            .push(t);
        self
    }

    /// Adds a toleration.
    pub fn toleration(mut self, t: Toleration) -> Self {
        self.pod.tolerations.push(t);
        self
    }

    /// Sets the phase.
    pub fn phase(mut self, phase: PodPhase) -> Self {
        self.pod.phase = phase;
        self
    }

    /// Sets empty pod affinity and anti-affinity (no terms).
    pub fn empty_pod_affinities(mut self) -> Self {
        self.pod.pod_affinity = Some(PodAffinity::default());
        self.pod.pod_anti_affinity = Some(PodAffinity::default());
        self
    }

    /// The pod.
    pub fn build(self) -> Pod {
        self.pod
    }
}

/// `n` pods built by `f` from fresh builders (upstream `test.UnschedulablePods(options, n)`).
pub fn pods(n: usize, f: impl Fn(PodBuilder) -> PodBuilder) -> Vec<Pod> {
    (0..n).map(|_| f(pod()).build()).collect()
}

/// `n` pods labelled `{test: test}` carrying `tscs`.
pub fn spread_pods(n: usize, tscs: &[TopologySpreadConstraint]) -> Vec<Pod> {
    pods(n, |p| p.test_labels().spreads(tscs))
}

/// Upstream's topology-suite NodePool: `karpenter.sh/capacity-type Exists` over the default
/// catalog, named `name`.
pub fn topology_pool(name: &str) -> NodePoolInput {
    let mut pool = node_pool(name, default_catalog());
    pool.requirements = vec![req(labels::CAPACITY_TYPE, Operator::Exists, &[])];
    pool
}

/// A cluster with [`topology_pool`] named `default`.
pub fn topology_cluster() -> Cluster {
    Cluster::new().with_node_pool(topology_pool("default"))
}

/// Replaces the requirements of the pool named `name`.
pub fn set_requirements(c: &mut Cluster, name: &str, reqs: Vec<NodeSelectorRequirement>) {
    c.node_pool_mut(name).expect("pool exists").requirements = reqs;
}

/// An unmanaged existing node (upstream `test.Node`) with these labels, taints and allocatable.
pub fn existing_node(
    name: &str,
    labels: &[(&str, &str)],
    taints: Vec<Taint>,
    allocatable: ResourceList,
) -> ClusterNode {
    let mut n = ClusterNode::new(name);
    for (k, v) in labels {
        n.labels.insert(k.to_string(), v.to_string());
    }
    n.taints = taints;
    n.capacity = allocatable.clone();
    n.allocatable = allocatable;
    n
}

/// Upstream's `ExpectSkew`: counts per domain of the bound pods of `namespace` (all namespaces
/// when `None`) that `selector` matches, sorted ascending.
pub fn skew_in(
    c: &Cluster,
    namespace: Option<&str>,
    key: &str,
    selector: &LabelSelector,
) -> Vec<usize> {
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for (node, pod) in c.bound_pods() {
        if namespace.is_some_and(|ns| ns != pod.namespace)
            || pod.is_terminal()
            || pod.is_terminating()
            || !selector.matches(&pod.labels)
        {
            continue;
        }
        let domain = if key == labels::HOSTNAME {
            Some(node.name.clone())
        } else {
            node.labels.get(key).cloned()
        };
        if let Some(d) = domain {
            *counts.entry(d).or_insert(0) += 1;
        }
    }
    let mut out: Vec<usize> = counts.into_values().collect();
    out.sort_unstable();
    out
}

/// Upstream's `ExpectMaxSkew`: max − min of [`Cluster::skew`] (0 when no domain holds a pod).
pub fn max_skew(c: &Cluster, key: &str, selector: &LabelSelector) -> usize {
    let s = c.skew(key, selector);
    match (s.first(), s.last()) {
        (Some(min), Some(max)) => max - min,
        _ => 0,
    }
}

/// The largest per-domain count of [`Cluster::skew`] (0 when empty).
pub fn largest(c: &Cluster, key: &str, selector: &LabelSelector) -> usize {
    c.skew(key, selector).last().copied().unwrap_or(0)
}

/// Asserts every pod was bound in `round`.
pub fn assert_all_scheduled(round: &Round, pods: &[Pod]) {
    for p in pods {
        assert!(
            round.scheduled(&p.key()),
            "{} not scheduled: {:?}",
            p.key(),
            round.results.pod_errors.get(&p.key())
        );
    }
}

/// Asserts no pod was bound in `round`.
pub fn assert_none_scheduled(round: &Round, pods: &[Pod]) {
    for p in pods {
        assert!(!round.scheduled(&p.key()), "{} was scheduled", p.key());
    }
}

/// Asserts `pod` was not bound in `round` and failed with a topology error.
pub fn assert_topology_error(round: &Round, pod: &Pod) {
    assert!(!round.scheduled(&pod.key()), "{} was scheduled", pod.key());
    let err = round
        .results
        .pod_errors
        .get(&pod.key())
        .unwrap_or_else(|| panic!("{} has no pod error", pod.key()));
    assert_eq!(err.kind, PodErrorKind::Topology, "{}: {err}", pod.key());
}

/// The node names `pods` were bound to in `c`.
pub fn node_names(c: &Cluster, pods: &[Pod]) -> BTreeSet<String> {
    pods.iter()
        .filter_map(|p| c.node_of(&p.key()).map(|n| n.name.clone()))
        .collect()
}

/// The name of the node `p` is bound to; panics when unbound.
pub fn node_of(c: &Cluster, p: &Pod) -> ClusterNode {
    c.node_of(&p.key())
        .unwrap_or_else(|| panic!("{} is not bound", p.key()))
        .clone()
}

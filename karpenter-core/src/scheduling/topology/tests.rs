//! Unit tests of the topology (upstream `scheduling/topology.go` and the topology scenarios of 7.2,
//! reduced to direct calls of `add_requirements` / `record`).

use std::collections::BTreeMap;
use std::sync::Arc;

use super::*;
use crate::labels::{CAPACITY_TYPE, HOSTNAME, ZONE};
use crate::model::WhenUnsatisfiable;
use crate::model::{
    ClusterNode, InstanceType, NodeAffinity, NodeSelectorTerm, Offering, Overhead, PodAffinity,
    PodPhase, Timestamp, WeightedPodAffinityTerm,
};
use crate::model::{
    LabelSelector, LabelSelectorRequirement, NodeInclusionPolicy, SelectorOperator,
    TopologySpreadConstraint,
};
use crate::requirements::{NodeSelectorRequirement, Operator};
use crate::resources::ResourceList;
use crate::scheduling::ExistingNodeInput;
use crate::scheduling::ExistingNodeRef;
use crate::taints::{TaintEffect, Toleration, TolerationOperator};

// ---------------------------------------------------------------------------------------------
// Builders
// ---------------------------------------------------------------------------------------------

fn pod(name: &str, labels: &[(&str, &str)]) -> Pod {
    let mut p = Pod::new("default", name);
    p.labels = labels
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    p
}

fn selector(labels: &[(&str, &str)]) -> LabelSelector {
    LabelSelector::from_labels(labels.iter().copied())
}

fn tsc(key: &str, max_skew: i32, sel: Option<LabelSelector>) -> TopologySpreadConstraint {
    TopologySpreadConstraint {
        max_skew,
        topology_key: key.to_string(),
        when_unsatisfiable: WhenUnsatisfiable::DoNotSchedule,
        label_selector: sel,
        min_domains: None,
        node_affinity_policy: None,
        node_taints_policy: None,
        match_label_keys: Vec::new(),
    }
}

fn term(key: &str, sel: &[(&str, &str)]) -> PodAffinityTerm {
    PodAffinityTerm {
        label_selector: Some(selector(sel)),
        namespaces: Vec::new(),
        namespace_selector: None,
        topology_key: key.to_string(),
    }
}

fn required(terms: Vec<PodAffinityTerm>) -> Option<PodAffinity> {
    Some(PodAffinity {
        required: terms,
        preferred: Vec::new(),
    })
}

fn req(key: &str, op: Operator, values: &[&str]) -> Requirement {
    Requirement::new(key, op, values.iter().copied())
}

fn reqs(list: Vec<Requirement>) -> Requirements {
    list.into_iter().collect()
}

/// A NodeClaim's requirements: its hostname plus extras.
fn claim(host: &str, extra: Vec<Requirement>) -> Requirements {
    let mut r = reqs(extra);
    r.add(req(HOSTNAME, Operator::In, &[host]));
    r
}

fn node(name: &str, labels: &[(&str, &str)]) -> ClusterNode {
    let mut n = ClusterNode::new(name);
    n.labels = labels
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    n.labels.insert(HOSTNAME.to_string(), name.to_string());
    n
}

fn bound(mut p: Pod, node: &str) -> Pod {
    p.node_name = Some(node.to_string());
    if p.phase == PodPhase::Pending {
        p.phase = PodPhase::Running;
    }
    p
}

fn universe(key: &str, domains: &[&str]) -> DomainUniverse {
    let mut u = DomainUniverse::default();
    for d in domains {
        u.insert(key, d, &[]);
    }
    u
}

fn zones() -> DomainUniverse {
    universe(ZONE, &["a", "b", "c"])
}

struct Env {
    universe: DomainUniverse,
    nodes: Vec<ExistingNodeInput>,
    policy: PreferencePolicy,
    namespaces: BTreeMap<String, BTreeMap<String, String>>,
}

impl Env {
    fn new(universe: DomainUniverse) -> Env {
        Env {
            universe,
            nodes: Vec::new(),
            policy: PreferencePolicy::Respect,
            namespaces: BTreeMap::new(),
        }
    }

    fn node(mut self, node: ClusterNode, pods: Vec<Pod>) -> Env {
        let pods = pods.into_iter().map(|p| bound(p, &node.name)).collect();
        self.nodes.push(ExistingNodeInput {
            node,
            pods,
            volume_limits: Default::default(),
        });
        self
    }

    fn build(self, batch: &[Pod]) -> Topology<'static> {
        self.build_classes(batch, &[])
    }

    /// [`build`](Self::build) with the batch's pod classes.
    fn build_classes(self, batch: &[Pod], classes: &[u32]) -> Topology<'static> {
        let classes: &'static [u32] = Box::leak(classes.to_vec().into_boxed_slice());
        // The topology borrows the nodes and the batch; tests leak them to keep the builder
        // simple.
        let batch: &'static [Pod] = Box::leak(batch.to_vec().into_boxed_slice());
        let batch: &'static [&'static Pod] = Box::leak(batch.iter().collect());
        let owned: &'static [ExistingNodeInput] = Box::leak(self.nodes.into_boxed_slice());
        let nodes: &'static [ExistingNodeRef<'static>] = Box::leak(
            owned
                .iter()
                .map(ExistingNodeRef::from)
                .collect::<Box<[_]>>(),
        );
        Topology::new(TopologyInput {
            preference_policy: self.policy,
            universe: std::sync::Arc::new(self.universe),
            base: std::sync::Arc::new(TopologyBase::new(nodes.to_vec(), &self.namespaces, batch)),
            removed: &[],
            batch_pods: batch,
            batch_classes: classes,
            batch_uids_distinct: false,
        })
    }
}

/// Tries `p` on a node/claim; returns the chosen requirement of `key` (as `Display`) or the error.
fn place(t: &Topology<'_>, p: &Pod, node: &Requirements, key: &str) -> Result<String, String> {
    let strict = strict_reqs(p);
    t.add_requirements(p, &strict, node)
        .map(|r| {
            r.get(key)
                .map_or_else(|| "-".to_string(), ToString::to_string)
        })
        .map_err(|e| e.to_string())
}

/// The pod's strict requirements: node selector ∧ first required term.
fn strict_reqs(p: &Pod) -> Requirements {
    let mut r = Requirements::from_labels(
        p.node_selector
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str())),
    );
    if let Some(term) = p.node_affinity.as_ref().and_then(|a| a.required.first()) {
        r.add_all(&Requirements::from_node_selector_requirements(
            &term.match_expressions,
        ));
    }
    r
}

/// Places `p` on the node/claim (which must succeed) and records it; returns the final
/// requirements.
fn commit(t: &mut Topology<'_>, p: &Pod, node: &Requirements) -> Requirements {
    let strict = strict_reqs(p);
    let out = t
        .add_requirements(p, &strict, node)
        .unwrap_or_else(|e| panic!("{} should fit: {e}", p.name));
    let mut merged = node.clone();
    merged.add_all(&out);
    if let Some(h) = merged.get(HOSTNAME).and_then(|r| r.single_value()) {
        let h = h.to_string();
        t.register(HOSTNAME, &h);
    }
    t.record(p, &[], &merged);
    merged
}

/// Counts of the first (normal or inverse) group of `kind` and `key`.
fn counts(t: &Topology<'_>, inverse: bool, kind: TopologyType, key: &str) -> BTreeMap<String, u32> {
    let groups = if inverse { &t.inverse } else { &t.groups };
    let g = groups
        .iter()
        .find(|g| g.kind == kind && t.keys[g.key as usize].key == key)
        .expect("group exists");
    let kd = &t.keys[g.key as usize];
    g.known_domains()
        .map(|(id, c)| (kd.name(id).to_string(), c))
        .collect()
}

fn map(entries: &[(&str, u32)]) -> BTreeMap<String, u32> {
    entries.iter().map(|(k, v)| (k.to_string(), *v)).collect()
}

fn spread_pod(name: &str, key: &str, max_skew: i32) -> Pod {
    let mut p = pod(name, &[("app", "web")]);
    p.topology_spread_constraints = vec![tsc(key, max_skew, Some(selector(&[("app", "web")])))];
    p
}

// ---------------------------------------------------------------------------------------------
// Spread
// ---------------------------------------------------------------------------------------------

#[test]
fn zonal_spread_collapses_to_the_smallest_least_loaded_domain() {
    let pods: Vec<Pod> = (0..5)
        .map(|i| spread_pod(&format!("p{i}"), ZONE, 1))
        .collect();
    let mut t = Env::new(zones()).build(&pods);
    let mut chosen = Vec::new();
    for (i, p) in pods.iter().take(4).enumerate() {
        let merged = commit(&mut t, p, &claim(&format!("h{i}"), vec![]));
        chosen.push(merged.get(ZONE).expect("zone chosen").to_string());
    }
    assert_eq!(
        chosen,
        [
            "topology.kubernetes.io/zone In [a]",
            "topology.kubernetes.io/zone In [b]",
            "topology.kubernetes.io/zone In [c]",
            "topology.kubernetes.io/zone In [a]",
        ]
    );
    assert_eq!(
        counts(&t, false, TopologyType::Spread, ZONE),
        map(&[("a", 2), ("b", 1), ("c", 1)])
    );
    // The candidate's own zone set limits the choice; skew still holds.
    let node = claim("h9", vec![req(ZONE, Operator::In, &["a", "b"])]);
    assert_eq!(
        place(&t, &pods[4], &node, ZONE),
        Ok(format!("{ZONE} In [b]"))
    );
    // A pod the topology never saw is not constrained by the groups it would own.
    let stranger = spread_pod("stranger", ZONE, 1);
    assert!(!t.constrains(&stranger));
}

#[test]
fn spread_refuses_a_domain_that_would_exceed_max_skew() {
    let pods: Vec<Pod> = (0..3)
        .map(|i| spread_pod(&format!("p{i}"), ZONE, 1))
        .collect();
    let mut t = Env::new(zones()).build(&pods);
    commit(
        &mut t,
        &pods[0],
        &claim("h0", vec![req(ZONE, Operator::In, &["a"])]),
    );
    let only_a = claim("h1", vec![req(ZONE, Operator::In, &["a"])]);
    let strict = Requirements::new();
    let e = t
        .add_requirements(&pods[1], &strict, &only_a)
        .expect_err("over maxSkew");
    assert_eq!((e.kind(), e.key()), (TopologyType::Spread, ZONE));
    let err = place(&t, &pods[1], &only_a, ZONE).unwrap_err();
    assert_eq!(
        err,
        "unsatisfiable topology constraint for topology spread, key=topology.kubernetes.io/zone \
         (counts = a: 1, b: 0, c: 0, podDomains = topology.kubernetes.io/zone Exists, \
         nodeDomains = topology.kubernetes.io/zone In [a])"
    );
}

#[test]
fn unknown_topology_key_has_no_domain() {
    let p = spread_pod("p", "unknown", 1);
    let t = Env::new(zones()).build(std::slice::from_ref(&p));
    assert!(place(&t, &p, &claim("h", vec![]), "unknown").is_err());
    let free = pod("free", &[("app", "web")]);
    assert!(!t.constrains(&free));
}

#[test]
fn hostname_spread_special_case() {
    let pods: Vec<Pod> = (0..3)
        .map(|i| spread_pod(&format!("p{i}"), HOSTNAME, 1))
        .collect();
    let mut t = Env::new(zones()).build(&pods);
    // A brand-new claim's host is unknown to the group: counts 0.
    assert_eq!(
        place(&t, &pods[0], &claim("h1", vec![]), HOSTNAME),
        Ok(format!("{HOSTNAME} In [h1]"))
    );
    assert!(!t.hostname_check(&pods[0]).rejects(t.hostname_id("h1")));
    commit(&mut t, &pods[0], &claim("h1", vec![]));
    // h1 now holds one; another self-selecting pod would make it 2 > maxSkew even though the
    // global minimum over known hosts is 1 (it is assumed to be 0).
    assert!(place(&t, &pods[1], &claim("h1", vec![]), HOSTNAME).is_err());
    assert!(t.hostname_check(&pods[1]).rejects(t.hostname_id("h1")));
    assert!(t.hostname_check(&pods[1]).rejects(t.hostname_id("h1")));
    assert!(!t.hostname_check(&pods[1]).rejects(t.hostname_id("h2")));
    assert!(place(&t, &pods[1], &claim("h2", vec![]), HOSTNAME).is_ok());
    // A non-self-selecting pod owning the same constraint may join h1 (1 ≤ 1).
    let mut other = pod("other", &[("app", "db")]);
    other.topology_spread_constraints = pods[0].topology_spread_constraints.clone();
    let mut t2 = Env::new(zones()).build(&[pods[0].clone(), other.clone()]);
    commit(&mut t2, &pods[0], &claim("h1", vec![]));
    assert!(!t2.hostname_check(&other).rejects(t2.hostname_id("h1")));
    assert!(place(&t2, &other, &claim("h1", vec![]), HOSTNAME).is_ok());
}

#[test]
fn min_domains_forces_the_global_minimum_to_zero() {
    let make = |name: &str, min_domains: Option<i32>| {
        let mut p = spread_pod(name, ZONE, 1);
        p.topology_spread_constraints[0].min_domains = min_domains;
        p
    };
    for (min_domains, third_fits) in [(None, true), (Some(2), true), (Some(3), false)] {
        let pods: Vec<Pod> = (0..3)
            .map(|i| make(&format!("p{i}"), min_domains))
            .collect();
        let mut t = Env::new(universe(ZONE, &["a", "b"])).build(&pods);
        commit(&mut t, &pods[0], &claim("h0", vec![]));
        commit(&mut t, &pods[1], &claim("h1", vec![]));
        assert_eq!(
            counts(&t, false, TopologyType::Spread, ZONE),
            map(&[("a", 1), ("b", 1)])
        );
        // Two eligible domains < minDomains 3 ⇒ min = 0 ⇒ each domain may hold at most 1.
        assert_eq!(
            place(&t, &pods[2], &claim("h2", vec![]), ZONE).is_ok(),
            third_fits,
            "minDomains {min_domains:?}"
        );
    }
}

#[test]
fn non_self_selecting_spread_only_needs_skew_of_existing_counts() {
    // Existing: zone a holds two matching pods, zone b one, c none ⇒ min 0.
    let env = || {
        Env::new(zones())
            .node(
                node("n1", &[(ZONE, "a")]),
                vec![pod("e1", &[("app", "web")]), pod("e2", &[("app", "web")])],
            )
            .node(
                node("n2", &[(ZONE, "b")]),
                vec![pod("e3", &[("app", "web")])],
            )
    };
    let mut selecting = spread_pod("s", ZONE, 2);
    selecting.labels.insert("app".into(), "web".into());
    let mut other = spread_pod("o", ZONE, 2);
    other.labels.insert("app".into(), "api".into());
    let t = env().build(&[selecting.clone(), other.clone()]);
    assert_eq!(
        counts(&t, false, TopologyType::Spread, ZONE),
        map(&[("a", 2), ("b", 1), ("c", 0)])
    );
    let in_a = claim("h", vec![req(ZONE, Operator::In, &["a"])]);
    assert!(place(&t, &selecting, &in_a, ZONE).is_err(), "3 - 0 > 2");
    assert_eq!(place(&t, &other, &in_a, ZONE), Ok(format!("{ZONE} In [a]")));
    // Unconstrained: the least loaded domain (count, not count+1, for a non-selecting pod).
    assert_eq!(
        place(&t, &other, &claim("h", vec![]), ZONE),
        Ok(format!("{ZONE} In [c]"))
    );
    // Recording the non-selected pod changes nothing.
    let mut t = env().build(&[other.clone()]);
    commit(&mut t, &other, &claim("h", vec![]));
    assert_eq!(
        counts(&t, false, TopologyType::Spread, ZONE),
        map(&[("a", 2), ("b", 1), ("c", 0)])
    );
}

#[test]
fn spread_records_only_collapsed_domains() {
    let p = spread_pod("p", ZONE, 1);
    let mut anti = pod("anti", &[("app", "x")]);
    anti.pod_anti_affinity = Some(PodAffinity {
        required: Vec::new(),
        preferred: vec![WeightedPodAffinityTerm {
            weight: 1,
            pod_affinity_term: term(ZONE, &[("app", "web")]),
        }],
    });
    let mut t = Env::new(zones()).build(&[p.clone(), anti]);
    t.record(
        &p,
        &[],
        &claim("h", vec![req(ZONE, Operator::In, &["a", "b"])]),
    );
    assert_eq!(
        counts(&t, false, TopologyType::Spread, ZONE),
        map(&[("a", 0), ("b", 0), ("c", 0)])
    );
    // ... while anti-affinity groups selecting the pod block every possible domain.
    assert_eq!(
        counts(&t, false, TopologyType::PodAntiAffinity, ZONE),
        map(&[("a", 1), ("b", 1), ("c", 0)])
    );
    // No requirement for the key: nothing at all.
    t.record(&p, &[], &claim("h2", vec![]));
    assert_eq!(
        counts(&t, false, TopologyType::PodAntiAffinity, ZONE),
        map(&[("a", 1), ("b", 1), ("c", 0)])
    );
}

#[test]
fn pods_with_the_same_term_share_one_group() {
    let a = spread_pod("a", ZONE, 1);
    let b = spread_pod("b", ZONE, 1);
    let mut c = spread_pod("c", ZONE, 1);
    c.node_selector.insert("disk".into(), "ssd".into());
    let mut d = spread_pod("d", ZONE, 1);
    d.node_selector.insert("disk".into(), "hdd".into());
    let t = Env::new(zones()).build(&[a, b, c, d]);
    // a and b share; c and d differ by their node filter values (upstream would share them).
    assert_eq!(t.groups.len(), 3);
}

#[test]
fn selectors_compare_as_sets() {
    let expr = |values: &[&str]| LabelSelectorRequirement {
        key: "app".into(),
        operator: SelectorOperator::In,
        values: values.iter().map(ToString::to_string).collect(),
    };
    let with = |exprs: Vec<LabelSelectorRequirement>| {
        let mut p = pod("p", &[]);
        let s = LabelSelector {
            match_expressions: exprs,
            ..LabelSelector::default()
        };
        p.topology_spread_constraints = vec![tsc(ZONE, 1, Some(s))];
        p
    };
    let mut p1 = with(vec![expr(&["x", "y"]), expr(&["z"])]);
    let mut p2 = with(vec![expr(&["z"]), expr(&["y", "x", "y"]), expr(&["z"])]);
    p1.uid = "1".into();
    p2.uid = "2".into();
    let t = Env::new(zones()).build(&[p1, p2]);
    assert_eq!(t.groups.len(), 1);
}

// ---------------------------------------------------------------------------------------------
// Affinity
// ---------------------------------------------------------------------------------------------

fn self_affine(name: &str, key: &str) -> Pod {
    let mut p = pod(name, &[("app", "db")]);
    p.pod_affinity = required(vec![term(key, &[("app", "db")])]);
    p
}

#[test]
fn self_affinity_bootstraps_on_the_first_domain_then_pins() {
    let pods: Vec<Pod> = (0..3)
        .map(|i| self_affine(&format!("p{i}"), ZONE))
        .collect();
    let mut t = Env::new(zones()).build(&pods);
    // Nothing populated: the smallest domain allowed by pod ∩ node, plus the smallest allowed by
    // the pod (here the same).
    let merged = commit(&mut t, &pods[0], &claim("h0", vec![]));
    assert_eq!(
        merged.get(ZONE).map(ToString::to_string),
        Some(format!("{ZONE} In [a]"))
    );
    // Later pods are pinned to the populated domain.
    assert_eq!(
        place(&t, &pods[1], &claim("h1", vec![]), ZONE),
        Ok(format!("{ZONE} In [a]"))
    );
    let in_b = claim("h1", vec![req(ZONE, Operator::In, &["b", "c"])]);
    assert!(place(&t, &pods[1], &in_b, ZONE).is_err());
}

#[test]
fn affinity_bootstrap_prefers_the_node_domains() {
    let pods = [self_affine("p0", ZONE)];
    let t = Env::new(zones()).build(&pods);
    let node = claim("h", vec![req(ZONE, Operator::In, &["b", "c"])]);
    let out = t
        .add_requirements(&pods[0], &Requirements::new(), &node)
        .expect("bootstrap");
    // The group offered {a (first allowed by the pod), b (first in pod ∩ node)}; the caller's
    // intersection keeps b.
    assert_eq!(
        out.get(ZONE).map(ToString::to_string),
        Some(format!("{ZONE} In [b]"))
    );
}

#[test]
fn affinity_to_pods_that_do_not_exist_never_fits() {
    let mut p = pod("p", &[("app", "web")]);
    p.pod_affinity = required(vec![term(ZONE, &[("app", "ghost")])]);
    let t = Env::new(zones()).build(std::slice::from_ref(&p));
    assert!(place(&t, &p, &claim("h", vec![]), ZONE).is_err());
    let mut h = pod("q", &[("app", "web")]);
    h.pod_affinity = required(vec![term(HOSTNAME, &[("app", "ghost")])]);
    let t = Env::new(zones()).build(std::slice::from_ref(&h));
    assert!(t.hostname_check(&h).rejects(t.hostname_id("h")));
    assert!(place(&t, &h, &claim("h", vec![]), HOSTNAME).is_err());
}

#[test]
fn hostname_self_affinity() {
    let pods: Vec<Pod> = (0..2)
        .map(|i| self_affine(&format!("p{i}"), HOSTNAME))
        .collect();
    let mut t = Env::new(zones()).build(&pods);
    assert!(!t.hostname_check(&pods[0]).rejects(t.hostname_id("h1")));
    commit(&mut t, &pods[0], &claim("h1", vec![]));
    assert!(place(&t, &pods[1], &claim("h1", vec![]), HOSTNAME).is_ok());
    assert!(place(&t, &pods[1], &claim("h2", vec![]), HOSTNAME).is_err());
    // The quick check cannot tell (it would need the pod's own domains): unsure.
    assert!(!t.hostname_check(&pods[1]).rejects(t.hostname_id("h2")));
}

#[test]
fn affinity_to_a_placed_pod_follows_it() {
    let target = pod("target", &[("app", "db")]);
    let mut follower = pod("f", &[("app", "web")]);
    follower.pod_affinity = required(vec![term(ZONE, &[("app", "db")])]);
    let mut t = Env::new(zones()).build(&[target.clone(), follower.clone()]);
    assert!(place(&t, &follower, &claim("h", vec![]), ZONE).is_err());
    // An undetermined zone is not recorded for affinity...
    t.record(
        &target,
        &[],
        &claim("h0", vec![req(ZONE, Operator::In, &["a", "b"])]),
    );
    assert!(place(&t, &follower, &claim("h", vec![]), ZONE).is_err());
    // ... a collapsed one is.
    t.record(
        &target,
        &[],
        &claim("h0", vec![req(ZONE, Operator::In, &["b"])]),
    );
    assert_eq!(
        place(&t, &follower, &claim("h", vec![]), ZONE),
        Ok(format!("{ZONE} In [b]"))
    );
}

// ---------------------------------------------------------------------------------------------
// Anti-affinity
// ---------------------------------------------------------------------------------------------

fn anti_to(name: &str, key: &str, sel: &[(&str, &str)]) -> Pod {
    let mut p = pod(name, &[("role", "anti")]);
    p.pod_anti_affinity = required(vec![term(key, sel)]);
    p
}

#[test]
fn schroedinger_anti_affinity_blocks_every_possible_domain() {
    let target = pod("target", &[("app", "t")]);
    let anti = anti_to("anti", ZONE, &[("app", "t")]);
    let mut t = Env::new(zones()).build(&[target.clone(), anti.clone()]);
    // The target is selected by the anti pod's inverse group: it is constrained to the empty
    // zones, i.e. all of them, which pins its claim to In [a b c].
    assert!(t.constrains(&target));
    let merged = commit(&mut t, &target, &claim("h0", vec![]));
    assert_eq!(
        merged.get(ZONE).map(ToString::to_string),
        Some(format!("{ZONE} In [a b c]"))
    );
    // Recording the target blocked every zone it might land in.
    assert_eq!(
        counts(&t, false, TopologyType::PodAntiAffinity, ZONE),
        map(&[("a", 1), ("b", 1), ("c", 1)])
    );
    assert!(place(&t, &anti, &claim("h1", vec![]), ZONE).is_err());
}

#[test]
fn inverse_anti_affinity_of_a_placed_batch_pod() {
    let anti = anti_to("anti", ZONE, &[("app", "t")]);
    let target = pod("target", &[("app", "t")]);
    let mut t = Env::new(zones()).build(&[anti.clone(), target.clone()]);
    let merged = commit(
        &mut t,
        &anti,
        &claim("h0", vec![req(ZONE, Operator::In, &["b"])]),
    );
    assert_eq!(
        merged.get(ZONE).map(ToString::to_string),
        Some(format!("{ZONE} In [b]"))
    );
    assert_eq!(
        counts(&t, true, TopologyType::PodAntiAffinity, ZONE),
        map(&[("a", 0), ("b", 1), ("c", 0)])
    );
    assert_eq!(
        place(&t, &target, &claim("h1", vec![]), ZONE),
        Ok(format!("{ZONE} In [a c]"))
    );
}

#[test]
fn inverse_anti_affinity_from_existing_pods() {
    let web = pod("web", &[("app", "web")]);
    let t = Env::new(zones())
        .node(
            node("n1", &[(ZONE, "a")]),
            vec![
                anti_to("e1", ZONE, &[("app", "web")]),
                anti_to("e2", HOSTNAME, &[("app", "web")]),
            ],
        )
        .build(std::slice::from_ref(&web));
    assert!(t.constrains(&web));
    assert_eq!(
        place(&t, &web, &claim("h", vec![]), ZONE),
        Ok(format!("{ZONE} In [b c]"))
    );
    assert!(
        place(
            &t,
            &web,
            &claim("h", vec![req(ZONE, Operator::In, &["a"])]),
            ZONE
        )
        .is_err()
    );
    // The hostname term recorded n1 (registered as an existing hostname too).
    assert!(t.hostname_check(&web).rejects(t.hostname_id("n1")));
    assert!(!t.hostname_check(&web).rejects(t.hostname_id("n2")));
    let n1 = claim("n1", vec![req(ZONE, Operator::In, &["a"])]);
    assert!(t.add_requirements(&web, &Requirements::new(), &n1).is_err());
    // Pods the terms do not select are free.
    let api = pod("api", &[("app", "api")]);
    assert!(!t.constrains(&api));
}

#[test]
fn existing_anti_affinity_pods_in_the_batch_or_terminal_are_ignored() {
    let batch_anti = anti_to("moving", ZONE, &[("app", "web")]);
    let web = pod("web", &[("app", "web")]);
    let t = Env::new(zones())
        .node(node("n1", &[(ZONE, "a")]), vec![batch_anti.clone()])
        .build(&[batch_anti, web.clone()]);
    // `moving` owns the inverse group (as a batch pod) but nothing is recorded for it.
    assert!(t.constrains(&web));
    assert_eq!(
        place(&t, &web, &claim("h", vec![]), ZONE),
        Ok(format!("{ZONE} In [a b c]"))
    );
    let mut done = anti_to("done", ZONE, &[("app", "web")]);
    done.phase = PodPhase::Succeeded;
    let mut env = Env::new(zones()).node(node("n1", &[(ZONE, "a")]), vec![]);
    env.nodes[0].pods.push(done);
    let t = env.build(std::slice::from_ref(&web));
    assert!(!t.constrains(&web));
}

#[test]
fn hostname_anti_affinity_and_register_unregister() {
    let pods: Vec<Pod> = (0..2)
        .map(|i| {
            let mut p = pod(&format!("p{i}"), &[("app", "nginx")]);
            p.pod_anti_affinity = required(vec![term(HOSTNAME, &[("app", "nginx")])]);
            p
        })
        .collect();
    let mut t = Env::new(zones()).build(&pods);
    commit(&mut t, &pods[0], &claim("h1", vec![]));
    assert!(t.hostname_check(&pods[1]).rejects(t.hostname_id("h1")));
    assert!(place(&t, &pods[1], &claim("h1", vec![]), HOSTNAME).is_err());
    assert_eq!(
        place(&t, &pods[1], &claim("h2", vec![]), HOSTNAME),
        Ok(format!("{HOSTNAME} In [h2]"))
    );
    t.unregister(HOSTNAME, "h1");
    assert!(!t.hostname_check(&pods[1]).rejects(t.hostname_id("h1")));
    assert!(place(&t, &pods[1], &claim("h1", vec![]), HOSTNAME).is_ok());
    t.register(HOSTNAME, "h1");
    assert_eq!(
        counts(&t, false, TopologyType::PodAntiAffinity, HOSTNAME),
        map(&[("h1", 0)])
    );
}

#[test]
fn anti_affinity_allows_only_known_empty_domains() {
    let p = anti_to("p", "rack", &[("app", "x")]);
    let t = Env::new(universe("rack", &["r1", "r2"])).build(std::slice::from_ref(&p));
    let node = claim("h", vec![req("rack", Operator::In, &["r2", "r9"])]);
    assert_eq!(place(&t, &p, &node, "rack"), Ok("rack In [r2]".to_string()));
    let unknown = claim("h", vec![req("rack", Operator::In, &["r9"])]);
    assert!(place(&t, &p, &unknown, "rack").is_err());
}

// ---------------------------------------------------------------------------------------------
// Node filter (nodeTaintsPolicy / nodeAffinityPolicy)
// ---------------------------------------------------------------------------------------------

fn tainted(name: &str, value: &str) -> ClusterNode {
    let mut n = node(name, &[("fake-label", value)]);
    n.taints = vec![Taint::new("dedicated", "x", TaintEffect::NoSchedule)];
    n
}

#[test]
fn node_taints_policy() {
    for (policy, second_fits) in [
        (None, false),
        (Some(NodeInclusionPolicy::Ignore), false),
        (Some(NodeInclusionPolicy::Honor), true),
    ] {
        let pods: Vec<Pod> = (0..2)
            .map(|i| {
                let mut p = spread_pod(&format!("p{i}"), "fake-label", 1);
                p.topology_spread_constraints[0].node_taints_policy = policy;
                p
            })
            .collect();
        let mut t = Env::new(universe("fake-label", &["baz"]))
            .node(tainted("foo", "foo"), vec![])
            .node(tainted("bar", "bar"), vec![])
            .build(&pods);
        let baz = claim("h0", vec![req("fake-label", Operator::In, &["baz"])]);
        commit(&mut t, &pods[0], &baz);
        let baz = claim("h1", vec![req("fake-label", Operator::In, &["baz"])]);
        assert_eq!(
            place(&t, &pods[1], &baz, "fake-label").is_ok(),
            second_fits,
            "policy {policy:?}"
        );
    }
}

#[test]
fn node_taints_policy_honor_uses_pool_taints_of_universe_domains() {
    let mut u = universe("fake-label", &["foo"]);
    u.insert(
        "fake-label",
        "bar",
        &[Taint::new("team", "b", TaintEffect::NoSchedule)],
    );
    let make = |tolerate: bool| {
        let mut p = spread_pod("p", "fake-label", 1);
        p.topology_spread_constraints[0].node_taints_policy = Some(NodeInclusionPolicy::Honor);
        if tolerate {
            p.tolerations = vec![Toleration {
                key: "team".into(),
                operator: Some(TolerationOperator::Exists),
                ..Toleration::default()
            }];
        }
        p
    };
    let t = Env::new(u.clone()).build(&[make(false)]);
    assert_eq!(
        counts(&t, false, TopologyType::Spread, "fake-label"),
        map(&[("foo", 0)])
    );
    let t = Env::new(u).build(&[make(true)]);
    assert_eq!(
        counts(&t, false, TopologyType::Spread, "fake-label"),
        map(&[("bar", 0), ("foo", 0)])
    );
}

#[test]
fn node_affinity_policy() {
    for (policy, counted) in [
        (None, map(&[("baz", 0)])),
        (Some(NodeInclusionPolicy::Honor), map(&[("baz", 0)])),
        (
            Some(NodeInclusionPolicy::Ignore),
            map(&[("bar", 1), ("baz", 0), ("foo", 0)]),
        ),
    ] {
        let mut p = spread_pod("p", "fake-label", 1);
        p.node_selector.insert("selector".into(), "value".into());
        p.topology_spread_constraints[0].node_affinity_policy = policy;
        let t = Env::new(universe("fake-label", &["baz"]))
            .node(
                node("foo", &[("fake-label", "foo"), ("selector", "mismatch")]),
                vec![],
            )
            .node(
                node("bar", &[("fake-label", "bar"), ("selector", "mismatch")]),
                vec![pod("e", &[("app", "web")])],
            )
            .build(std::slice::from_ref(&p));
        assert_eq!(
            counts(&t, false, TopologyType::Spread, "fake-label"),
            counted,
            "policy {policy:?}"
        );
    }
}

#[test]
fn node_filter_uses_required_node_affinity_terms_ored() {
    let mut p = spread_pod("p", ZONE, 1);
    p.node_affinity = Some(NodeAffinity {
        required: vec![
            NodeSelectorTerm {
                match_expressions: vec![NodeSelectorRequirement::new(
                    "disk",
                    Operator::In,
                    ["ssd"],
                )],
            },
            NodeSelectorTerm {
                match_expressions: vec![NodeSelectorRequirement::new(
                    "gpu",
                    Operator::Exists,
                    Vec::<String>::new(),
                )],
            },
        ],
        preferred: Vec::new(),
    });
    let t = Env::new(zones())
        .node(
            node("n1", &[(ZONE, "a"), ("disk", "ssd")]),
            vec![pod("e1", &[("app", "web")])],
        )
        .node(
            node("n2", &[(ZONE, "b"), ("gpu", "1")]),
            vec![pod("e2", &[("app", "web")])],
        )
        .node(
            node("n3", &[(ZONE, "c"), ("disk", "hdd")]),
            vec![pod("e3", &[("app", "web")])],
        )
        .build(std::slice::from_ref(&p));
    assert_eq!(
        counts(&t, false, TopologyType::Spread, ZONE),
        map(&[("a", 1), ("b", 1), ("c", 0)])
    );
    // Recording honours the filter against the claim's requirements too (strictly: a claim
    // without the key does not match).
    let mut t = t;
    t.record(&p, &[], &claim("h", vec![req(ZONE, Operator::In, &["c"])]));
    assert_eq!(counts(&t, false, TopologyType::Spread, ZONE)["c"], 0);
    t.record(
        &p,
        &[],
        &claim(
            "h",
            vec![
                req(ZONE, Operator::In, &["c"]),
                req("gpu", Operator::In, &["2"]),
            ],
        ),
    );
    assert_eq!(counts(&t, false, TopologyType::Spread, ZONE)["c"], 1);
}

// ---------------------------------------------------------------------------------------------
// Selectors, matchLabelKeys, namespaces
// ---------------------------------------------------------------------------------------------

#[test]
fn match_label_keys_split_the_group_per_value() {
    let make = |name: &str, rev: Option<&str>| {
        let mut p = spread_pod(name, HOSTNAME, 1);
        if let Some(rev) = rev {
            p.labels.insert("rev".into(), rev.into());
        }
        p.topology_spread_constraints[0].match_label_keys = vec!["rev".into()];
        p
    };
    let a1 = make("a1", Some("a"));
    let a2 = make("a2", Some("a"));
    let b1 = make("b1", Some("b"));
    let plain = make("plain", None);
    let mut t = Env::new(zones()).build(&[a1.clone(), a2.clone(), b1.clone(), plain.clone()]);
    assert_eq!(
        t.groups.len(),
        3,
        "rev=a, rev=b, and the unchanged selector"
    );
    commit(&mut t, &a1, &claim("h1", vec![]));
    assert!(place(&t, &b1, &claim("h1", vec![]), HOSTNAME).is_ok());
    assert!(place(&t, &a2, &claim("h1", vec![]), HOSTNAME).is_err());
    assert!(place(&t, &a2, &claim("h2", vec![]), HOSTNAME).is_ok());
    // The pod without the label keeps the plain selector, which counts a1 too.
    assert!(place(&t, &plain, &claim("h1", vec![]), HOSTNAME).is_err());
}

#[test]
fn nil_selector_selects_nothing_but_counts_every_existing_pod() {
    let pods: Vec<Pod> = (0..3)
        .map(|i| {
            let mut p = pod(&format!("p{i}"), &[("app", "web")]);
            p.topology_spread_constraints = vec![tsc(HOSTNAME, 1, None)];
            p
        })
        .collect();
    let mut t = Env::new(zones())
        .node(
            node("n1", &[]),
            vec![pod("e1", &[]), pod("e2", &[("x", "y")])],
        )
        .build(&pods);
    // Batch pods never count: all three fit on one new host.
    for p in &pods {
        commit(&mut t, p, &claim("h1", vec![]));
    }
    assert_eq!(counts(&t, false, TopologyType::Spread, HOSTNAME)["h1"], 0);
    // Upstream quirk: the existing pods were all counted when the group was created.
    assert_eq!(counts(&t, false, TopologyType::Spread, HOSTNAME)["n1"], 2);
    assert!(t.hostname_check(&pods[0]).rejects(t.hostname_id("n1")));
}

#[test]
fn invalid_selectors_select_nothing() {
    let s = LabelSelector {
        match_expressions: vec![LabelSelectorRequirement {
            key: "app".into(),
            operator: SelectorOperator::In,
            values: Vec::new(),
        }],
        ..LabelSelector::default()
    };
    let mut p = pod("p", &[("app", "web")]);
    p.topology_spread_constraints = vec![tsc(HOSTNAME, 1, Some(s))];
    let mut t = Env::new(zones())
        .node(node("n1", &[]), vec![pod("e1", &[("app", "web")])])
        .build(std::slice::from_ref(&p));
    commit(&mut t, &p, &claim("h1", vec![]));
    assert_eq!(
        counts(&t, false, TopologyType::Spread, HOSTNAME),
        map(&[("h1", 0), ("n1", 0)])
    );
    // An empty (non-nil) selector selects everything.
    let mut q = pod("q", &[("app", "web")]);
    q.topology_spread_constraints = vec![tsc(HOSTNAME, 1, Some(LabelSelector::default()))];
    let mut t = Env::new(zones()).build(std::slice::from_ref(&q));
    commit(&mut t, &q, &claim("h1", vec![]));
    assert_eq!(counts(&t, false, TopologyType::Spread, HOSTNAME)["h1"], 1);
}

#[test]
fn affinity_namespaces() {
    let mut target = Pod::new("other", "target");
    target.labels.insert("app".into(), "db".into());
    let make = |namespaces: Vec<String>, selector: Option<LabelSelector>| {
        let mut p = pod("p", &[("app", "web")]);
        let mut term = term(HOSTNAME, &[("app", "db")]);
        term.namespaces = namespaces;
        term.namespace_selector = selector;
        p.pod_affinity = required(vec![term]);
        p
    };
    let cases = [
        (make(Vec::new(), None), false),
        (make(vec!["other".into()], None), true),
        (make(Vec::new(), Some(LabelSelector::default())), true),
        (make(Vec::new(), Some(selector(&[("team", "red")]))), false),
        (make(Vec::new(), Some(selector(&[("team", "blue")]))), true),
    ];
    for (i, (p, fits)) in cases.into_iter().enumerate() {
        let mut env = Env::new(zones());
        env.namespaces.insert(
            "other".into(),
            BTreeMap::from([("team".into(), "blue".into())]),
        );
        let mut t = env.build(&[target.clone(), p.clone()]);
        commit(&mut t, &target, &claim("h1", vec![]));
        assert_eq!(
            place(&t, &p, &claim("h1", vec![]), HOSTNAME).is_ok(),
            fits,
            "case {i}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Counting existing pods
// ---------------------------------------------------------------------------------------------

#[test]
fn counting_skips_terminal_terminating_batch_and_unlabeled_node_pods() {
    let web = |name: &str| pod(name, &[("app", "web")]);
    let mut succeeded = web("succeeded");
    succeeded.phase = PodPhase::Succeeded;
    let mut failed = web("failed");
    failed.phase = PodPhase::Failed;
    let mut terminating = web("terminating");
    terminating.deletion_timestamp = Some(Timestamp::UNIX_EPOCH);
    let moving = spread_pod("moving", ZONE, 1);
    let mut elsewhere = Pod::new("other-ns", "elsewhere");
    elsewhere.labels.insert("app".into(), "web".into());
    let mut n1 = node("n1", &[(ZONE, "a")]);
    n1.taints = vec![Taint::new("t", "", TaintEffect::NoSchedule)];
    let p = spread_pod("p", ZONE, 1);
    let n1_pods = vec![
        web("r1"),
        web("r2"),
        pod("unlabeled", &[]),
        succeeded,
        failed,
        terminating,
        moving.clone(),
        elsewhere,
    ];
    let env = |marked: bool| {
        let mut n2 = node("n2", &[(ZONE, "b")]);
        n2.marked_for_deletion = marked;
        Env::new(universe(ZONE, &["a", "b"]))
            .node(n1.clone(), n1_pods.clone())
            .node(n2, vec![web("r3")])
            .node(node("n3", &[]), vec![web("r4")])
            .node(node("n4", &[(ZONE, "d")]), vec![])
    };
    let t = env(false).build(&[p.clone(), moving.clone()]);
    // d is discovered from the empty node n4; n3 has no zone, so r4 is not counted.
    assert_eq!(
        counts(&t, false, TopologyType::Spread, ZONE),
        map(&[("a", 2), ("b", 1), ("d", 0)])
    );
    // A node marked for deletion still has its pods counted but does not add domains.
    let t = env(true).build(&[p.clone(), moving]);
    assert_eq!(
        counts(&t, false, TopologyType::Spread, ZONE),
        map(&[("a", 2), ("b", 1), ("d", 0)])
    );
    // Hostname key: nodes without the hostname label count under their name.
    let mut h = spread_pod("h", HOSTNAME, 1);
    h.uid = "h".into();
    let mut bare = ClusterNode::new("bare");
    bare.labels.clear();
    let t = Env::new(zones())
        .node(bare, vec![web("r5"), web("r6")])
        .build(std::slice::from_ref(&h));
    assert_eq!(counts(&t, false, TopologyType::Spread, HOSTNAME)["bare"], 2);
}

// ---------------------------------------------------------------------------------------------
// Preference policy, update and ownership
// ---------------------------------------------------------------------------------------------

#[test]
fn ignore_policy_drops_preferences() {
    let mut p = pod("p", &[("app", "web")]);
    let mut soft = tsc(ZONE, 1, Some(selector(&[("app", "web")])));
    soft.when_unsatisfiable = WhenUnsatisfiable::ScheduleAnyway;
    p.topology_spread_constraints = vec![soft];
    p.pod_anti_affinity = Some(PodAffinity {
        required: Vec::new(),
        preferred: vec![WeightedPodAffinityTerm {
            weight: 1,
            pod_affinity_term: term(ZONE, &[("app", "web")]),
        }],
    });
    let mut env = Env::new(zones());
    env.policy = PreferencePolicy::Ignore;
    let t = env.build(std::slice::from_ref(&p));
    assert!(!t.constrains(&p));
    let t = Env::new(zones()).build(std::slice::from_ref(&p));
    assert!(t.constrains(&p));
    assert_eq!(t.groups.len(), 2);
    assert!(
        t.inverse.is_empty(),
        "preferred anti-affinity is never tracked inversely"
    );
}

#[test]
fn update_replaces_ownership_after_relaxation() {
    let mut p = pod("p", &[("app", "web")]);
    p.pod_affinity = Some(PodAffinity {
        required: Vec::new(),
        preferred: vec![WeightedPodAffinityTerm {
            weight: 1,
            pod_affinity_term: term(ZONE, &[("app", "ghost")]),
        }],
    });
    let mut t = Env::new(zones()).build(std::slice::from_ref(&p));
    assert!(place(&t, &p, &claim("h", vec![]), ZONE).is_err());
    let mut relaxed = p.clone();
    relaxed.pod_affinity = Some(PodAffinity::default());
    t.update(&relaxed);
    assert!(!t.constrains(&relaxed));
    assert_eq!(
        place(&t, &relaxed, &claim("h", vec![]), ZONE),
        Ok("-".to_string())
    );
    t.update(&p);
    assert!(t.constrains(&p));
}

#[test]
fn a_new_inverse_group_after_construction_reaches_known_pods() {
    let web = pod("web", &[("app", "web")]);
    let mut t = Env::new(zones()).build(std::slice::from_ref(&web));
    assert!(!t.constrains(&web));
    let anti = anti_to("late", HOSTNAME, &[("app", "web")]);
    t.update(&anti);
    assert!(t.constrains(&web));
    t.record(&anti, &[], &claim("h1", vec![]));
    assert!(t.hostname_check(&web).rejects(t.hostname_id("h1")));
}

#[test]
fn existing_hostnames_are_registered() {
    let pods: Vec<Pod> = (0..1)
        .map(|i| {
            let mut p = pod(&format!("p{i}"), &[("app", "nginx")]);
            p.pod_anti_affinity = required(vec![term(HOSTNAME, &[("app", "nginx")])]);
            p
        })
        .collect();
    let mut gone = node("gone", &[]);
    gone.marked_for_deletion = true;
    let t = Env::new(zones())
        .node(node("n1", &[]), vec![])
        .node(gone, vec![])
        .build(&pods);
    assert_eq!(
        counts(&t, false, TopologyType::PodAntiAffinity, HOSTNAME),
        map(&[("n1", 0)])
    );
}

// ---------------------------------------------------------------------------------------------
// Universe
// ---------------------------------------------------------------------------------------------

fn instance_type(name: &str, zones: &[&str], extra: Vec<Requirement>) -> Arc<InstanceType> {
    let offerings = zones
        .iter()
        .map(|z| Offering::new(*z, "on-demand", 1.0))
        .collect();
    Arc::new(InstanceType::new(
        name,
        reqs(extra),
        offerings,
        ResourceList::new(),
        Overhead::default(),
    ))
}

#[test]
fn universe_intersects_pool_and_instance_types() {
    let pool_a = reqs(vec![
        req(ZONE, Operator::In, &["a", "b"]),
        req("capacity.spread", Operator::In, &["2", "3"]),
        req("custom", Operator::NotIn, &["x"]),
    ]);
    let its = vec![
        instance_type("small", &["a", "b", "c"], vec![]),
        instance_type(
            "big",
            &["b", "d"],
            vec![req("size", Operator::In, &["big"])],
        ),
    ];
    let taint = [Taint::new("team", "b", TaintEffect::NoSchedule)];
    let pool_b = reqs(vec![req(ZONE, Operator::In, &["e"])]);
    let empty = reqs(vec![req(ZONE, Operator::In, &["z"])]);
    let u = DomainUniverse::build(&[
        UniversePool {
            requirements: &pool_a,
            taints: &[],
            instance_types: &its,
        },
        UniversePool {
            requirements: &pool_b,
            taints: &taint,
            instance_types: &its,
        },
        UniversePool {
            requirements: &empty,
            taints: &[],
            instance_types: &[],
        },
    ]);
    let domains =
        |key: &str| -> Vec<String> { u.domains(key).map(|(d, _)| d.to_string()).collect() };
    // c and d are offered but excluded by pool A; e comes from pool B's In although no instance
    // type offers it; the pool without instance types adds nothing.
    assert_eq!(domains(ZONE), ["a", "b", "e"]);
    assert_eq!(domains("capacity.spread"), ["2", "3"]);
    assert_eq!(domains("size"), ["big"]);
    assert_eq!(
        domains("node.kubernetes.io/instance-type"),
        ["big", "small"]
    );
    assert_eq!(domains(CAPACITY_TYPE), ["on-demand"]);
    // Upstream quirk: the excluded value of a NotIn the instance types leave undefined.
    assert_eq!(domains("custom"), ["x"]);
    // Taint sets: "e" only from the tainted pool; "a" from the untainted one.
    let taints_of = |d: &str| {
        u.domains(ZONE)
            .find(|(n, _)| *n == d)
            .map(|(_, t)| t.clone())
    };
    assert!(taints_of("a").is_some_and(|t| t.tolerated_by(&[])));
    assert!(taints_of("e").is_some_and(|t| !t.tolerated_by(&[])));
}

#[test]
fn domain_taints_insertion_rule() {
    let t1 = [Taint::new("a", "", TaintEffect::NoSchedule)];
    let t2 = [Taint::new("b", "", TaintEffect::NoSchedule)];
    let mut u = DomainUniverse::default();
    u.insert("k", "d", &t1);
    u.insert("k", "d", &t2);
    let tol_a = [Toleration {
        key: "a".into(),
        operator: Some(TolerationOperator::Exists),
        ..Toleration::default()
    }];
    let get = |u: &DomainUniverse| u.domains("k").next().map(|(_, t)| t.clone()).expect("d");
    assert!(get(&u).tolerated_by(&tol_a));
    assert!(!get(&u).tolerated_by(&[]));
    u.insert("k", "d", &[]);
    assert!(get(&u).tolerated_by(&[]));
    u.insert("k", "d", &t1);
    assert!(
        get(&u).tolerated_by(&[]),
        "once always-tolerated, further sets are ignored"
    );
}

#[test]
fn affinity_groups_honor_pool_taints_with_the_creating_pods_tolerations() {
    let mut u = universe("k", &["x"]);
    u.insert(
        "k",
        "y",
        &[Taint::new("team", "b", TaintEffect::NoSchedule)],
    );
    let p = anti_to("p", "k", &[("app", "x")]);
    let t = Env::new(u.clone()).build(std::slice::from_ref(&p));
    assert_eq!(
        place(&t, &p, &claim("h", vec![]), "k"),
        Ok("k In [x]".to_string())
    );
    let mut q = p.clone();
    q.tolerations = vec![Toleration {
        operator: Some(TolerationOperator::Exists),
        ..Toleration::default()
    }];
    let t = Env::new(u).build(std::slice::from_ref(&q));
    assert_eq!(
        place(&t, &q, &claim("h", vec![]), "k"),
        Ok("k In [x y]".to_string())
    );
}

#[test]
fn error_lists_at_most_25_domains() {
    let names: Vec<String> = (0..30).map(|i| format!("d{i:02}")).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let p = spread_pod("p", "k", 1);
    let t = Env::new(universe("k", &refs)).build(std::slice::from_ref(&p));
    let err = place(
        &t,
        &p,
        &claim("h", vec![req("k", Operator::In, &["nope"])]),
        "k",
    )
    .unwrap_err();
    assert!(err.contains("d00: 0, d01: 0"), "{err}");
    assert!(
        err.contains("d24: 0 and 5 other(s), podDomains = k Exists, nodeDomains = k In [nope])"),
        "{err}"
    );
}

mod classes;

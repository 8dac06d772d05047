//! Ported `topology_test.go` (upstream `topology_test.go`): Context "Topology › Pod
//! Affinity/Anti-Affinity".

use std::collections::BTreeMap;

use karpenter_core::labels::{ARCH, HOSTNAME, ZONE};
use karpenter_core::model::{LabelSelector, Pod, PodAffinityTerm};
use karpenter_fake::harness::Cluster;

use crate::topology_support::*;

const S2: [(&str, &str); 1] = [("security", "s2")];

fn s2_hostname() -> PodAffinityTerm {
    term(&S2, HOSTNAME)
}

fn s2_zone() -> PodAffinityTerm {
    term(&S2, ZONE)
}

/// Ten pods spread on hostname (`{test: test}`, maxSkew 1): upstream's way to create ten nodes.
fn ten_hostname_spread_pods() -> Vec<Pod> {
    spread_pods(10, &[test_spread(HOSTNAME, 1)])
}

/// Three 2-cpu pods pinned to test-zone-1, -2 and -3, built by `f`.
fn zone_pods(f: impl Fn(PodBuilder) -> PodBuilder) -> Vec<Pod> {
    ["test-zone-1", "test-zone-2", "test-zone-3"]
        .iter()
        .map(|z| f(pod().cpu("2").node_selector(ZONE, z)).build())
        .collect()
}

fn delete_pending(c: &mut Cluster) {
    let pending: Vec<String> = c.pending().iter().map(Pod::key).collect();
    for key in pending {
        c.delete_pod(&key);
    }
}

#[test]
fn should_schedule_a_pod_with_empty_pod_affinity_and_anti_affinity() {
    let mut c = topology_cluster();
    let p = pod().empty_pod_affinities().build();
    assert!(c.provision(vec![p.clone()]).scheduled(&p.key()));
}

#[test]
fn should_respect_pod_affinity_hostname() {
    let mut c = topology_cluster();
    let aff1 = pod().labels(&S2).build();
    let aff2 = pod().affinity(s2_hostname()).build();
    let mut ps = ten_hostname_spread_pods();
    ps.push(aff1.clone());
    ps.push(aff2.clone());
    let round = c.provision(ps);
    assert_all_scheduled(&round, &[aff1.clone(), aff2.clone()]);
    assert_eq!(node_of(&c, &aff1).name, node_of(&c, &aff2).name);
}

#[test]
fn should_respect_pod_affinity_arch() {
    let mut c = topology_cluster();
    let tsc = spread(HOSTNAME, 1, Some(selector(&S2)));
    let aff1 = pod()
        .labels(&S2)
        .spread(tsc.clone())
        .cpu("2")
        .node_selector(ARCH, "arm64")
        .build();
    let aff2 = pod()
        .labels(&S2)
        .spread(tsc)
        .cpu("1")
        .affinity(term(&S2, ARCH))
        .build();
    let round = c.provision(vec![aff1.clone(), aff2.clone()]);
    assert_all_scheduled(&round, &[aff1.clone(), aff2.clone()]);
    let (n1, n2) = (node_of(&c, &aff1), node_of(&c, &aff2));
    assert_eq!(n1.labels[ARCH], n2.labels[ARCH]);
    assert_ne!(n1.name, n2.name);
}

#[test]
fn should_respect_self_pod_affinity_hostname() {
    let mut c = topology_cluster();
    let ps = pods(3, |p| p.labels(&S2).affinity(s2_hostname()));
    let round = c.provision(ps.clone());
    assert_all_scheduled(&round, &ps);
    assert_eq!(node_names(&c, &ps).len(), 1);
}

#[test]
fn should_respect_self_pod_affinity_for_first_empty_topology_domain_only_hostname() {
    let mut c = topology_cluster();
    let make = || pods(10, |p| p.labels(&S2).affinity(s2_hostname()));
    let first = make();
    let round = c.provision(first.clone());
    // A node holds at most five pods: one node with five pods, five pods left over.
    let scheduled: Vec<Pod> = first
        .iter()
        .filter(|p| round.scheduled(&p.key()))
        .cloned()
        .collect();
    assert_eq!(scheduled.len(), 5);
    assert_eq!(node_names(&c, &scheduled).len(), 1);
    // A later batch cannot schedule either, even though the node is not initialized yet.
    let second = make();
    let round = c.provision(second.clone());
    assert_none_scheduled(&round, &second);
}

#[test]
fn should_respect_self_pod_affinity_for_first_empty_topology_domain_only_hostname_constrained_zones()
 {
    let mut c = topology_cluster();
    // One pod in test-zone-1: it counts for pod affinity although the others' node selectors
    // differ (node filters only apply to spreads).
    c.provision(vec![
        pod()
            .labels(&S2)
            .node_selector(ZONE, "test-zone-1")
            .affinity(s2_hostname())
            .build(),
    ]);
    let ps = pods(10, |p| {
        p.labels(&S2)
            .node_requirement(req_in(ZONE, &["test-zone-2", "test-zone-3"]))
            .affinity(s2_hostname())
    });
    let round = c.provision(ps.clone());
    assert_none_scheduled(&round, &ps);
}

#[test]
fn should_respect_self_pod_affinity_zone() {
    let mut c = topology_cluster();
    let ps = pods(3, |p| p.labels(&S2).affinity(s2_zone()));
    let round = c.provision(ps.clone());
    assert_all_scheduled(&round, &ps);
    assert_eq!(node_names(&c, &ps).len(), 1);
}

#[test]
fn should_respect_self_pod_affinity_zone_with_constraint() {
    let mut c = topology_cluster();
    let ps = pods(3, |p| {
        p.labels(&S2)
            .affinity(s2_zone())
            .node_requirement(req_in(ZONE, &["test-zone-3"]))
    });
    let round = c.provision(ps.clone());
    assert_all_scheduled(&round, &ps);
    assert_eq!(node_names(&c, &ps).len(), 1);
    for p in &ps {
        assert_eq!(node_of(&c, p).labels[ZONE], "test-zone-3");
    }
}

#[test]
fn should_allow_two_nodes_to_be_created_when_two_pods_with_matching_affinities_have_incompatible_selectors()
 {
    let mut c = topology_cluster();
    let s1 = [("security", "s1")];
    let make = |zone: &str| {
        pod()
            .labels(&s1)
            .affinity(term(&s1, ZONE))
            .node_requirement(req_in(ZONE, &[zone]))
            .build()
    };
    let (p1, p2) = (make("test-zone-2"), make("test-zone-3"));
    let round = c.provision(vec![p1.clone(), p2.clone()]);
    assert_all_scheduled(&round, &[p1.clone(), p2.clone()]);
    let (n1, n2) = (node_of(&c, &p1), node_of(&c, &p2));
    assert_eq!(n1.labels[ZONE], "test-zone-2");
    assert_eq!(n2.labels[ZONE], "test-zone-3");
    assert_ne!(n1.name, n2.name);
}

#[test]
fn should_allow_violation_of_preferred_pod_affinity() {
    let mut c = topology_cluster();
    let aff2 = pod()
        .affinity_preference(weighted(50, s2_hostname()))
        .build();
    let mut ps = ten_hostname_spread_pods();
    ps.push(aff2.clone());
    let round = c.provision(ps);
    assert!(round.scheduled(&aff2.key()));
}

#[test]
fn should_allow_violation_of_preferred_pod_anti_affinity() {
    let mut c = topology_cluster();
    let anti = pods(10, |p| {
        p.anti_affinity_preference(weighted(50, term(&TEST_LABELS, ZONE)))
    });
    let mut ps = spread_pods(3, &[test_spread(ZONE, 1)]);
    ps.extend(anti.iter().cloned());
    let round = c.provision(ps);
    assert_all_scheduled(&round, &anti);
}

#[test]
fn should_separate_nodes_using_simple_pod_anti_affinity_on_hostname() {
    let mut c = topology_cluster();
    for _ in 0..10 {
        let aff1 = pod().labels(&S2).build();
        let aff2 = pod().anti_affinity(s2_hostname()).build();
        let round = c.provision(vec![aff2.clone(), aff1.clone()]);
        assert_all_scheduled(&round, &[aff1.clone(), aff2.clone()]);
        assert_ne!(node_of(&c, &aff1).name, node_of(&c, &aff2).name);
    }
}

#[test]
fn should_not_violate_pod_anti_affinity_on_zone() {
    let mut c = topology_cluster();
    let zoned = zone_pods(|p| p.labels(&S2));
    let anti = pod().anti_affinity(s2_zone()).build();
    let mut ps = zoned.clone();
    ps.push(anti.clone());
    let round = c.provision(ps);
    assert_all_scheduled(&round, &zoned);
    assert_topology_error(&round, &anti);
}

#[test]
fn should_not_violate_pod_anti_affinity_on_zone_other_schedules_first() {
    let mut c = topology_cluster();
    let target = pod().labels(&S2).cpu("2").build();
    let anti = pod().anti_affinity(s2_zone()).build();
    let round = c.provision(vec![target.clone(), anti.clone()]);
    // The target schedules first, in a zone not yet known.
    assert!(round.scheduled(&target.key()));
    assert_topology_error(&round, &anti);
}

#[test]
fn should_not_violate_pod_anti_affinity_arch() {
    let mut c = topology_cluster();
    let tsc = spread(HOSTNAME, 1, Some(selector(&S2)));
    let aff1 = pod()
        .labels(&S2)
        .spread(tsc.clone())
        .cpu("2")
        .node_selector(ARCH, "arm64")
        .build();
    let aff2 = pod()
        .labels(&S2)
        .spread(tsc)
        .cpu("1")
        .anti_affinity(term(&S2, ARCH))
        .build();
    let round = c.provision(vec![aff1.clone(), aff2.clone()]);
    assert_all_scheduled(&round, &[aff1.clone(), aff2.clone()]);
    assert_ne!(
        node_of(&c, &aff1).labels[ARCH],
        node_of(&c, &aff2).labels[ARCH]
    );
}

#[test]
fn should_violate_preferred_pod_anti_affinity_on_zone_inverse() {
    let mut c = topology_cluster();
    let zoned = zone_pods(|p| p.anti_affinity_preference(weighted(10, s2_zone())));
    let target = pod().labels(&S2).build();
    let mut ps = zoned.clone();
    ps.push(target.clone());
    let round = c.provision(ps);
    assert_all_scheduled(&round, &zoned);
    // Only a preference: the target schedules.
    assert!(round.scheduled(&target.key()));
}

#[test]
fn should_not_violate_pod_anti_affinity_on_zone_inverse() {
    let mut c = topology_cluster();
    let zoned = zone_pods(|p| p.anti_affinity(s2_zone()));
    let target = pod().labels(&S2).build();
    let mut ps = zoned.clone();
    ps.push(target.clone());
    let round = c.provision(ps);
    assert_all_scheduled(&round, &zoned);
    // Every zone holds a pod whose required anti-affinity forbids the target.
    assert_topology_error(&round, &target);
}

#[test]
fn should_not_violate_pod_anti_affinity_on_zone_schrodinger() {
    let mut c = topology_cluster();
    let anywhere = pod().anti_affinity(s2_zone()).cpu("2").build();
    let target = pod().labels(&S2).build();
    let round = c.provision(vec![anywhere.clone(), target.clone()]);
    assert!(round.scheduled(&anywhere.key()));
    // The anti-affine pod might be in any zone: the target cannot schedule yet.
    assert_topology_error(&round, &target);
    // Once launched, its zone is committed and the target schedules elsewhere.
    let round = c.provision(vec![target.clone()]);
    assert!(round.scheduled(&target.key()));
    assert_ne!(
        node_of(&c, &anywhere).labels[ZONE],
        node_of(&c, &target).labels[ZONE]
    );
}

#[test]
fn should_not_violate_pod_anti_affinity_on_zone_inverse_with_existing_nodes() {
    let mut c = topology_cluster();
    let zoned = zone_pods(|p| p.anti_affinity(s2_zone()));
    let round = c.provision(zoned.clone());
    assert_all_scheduled(&round, &zoned);
    let target = pod().labels(&S2).build();
    let round = c.provision(vec![target.clone()]);
    assert_topology_error(&round, &target);
}

#[test]
fn should_violate_preferred_pod_anti_affinity_on_zone_inverse_with_existing_nodes() {
    let mut c = topology_cluster();
    let zoned = zone_pods(|p| p.anti_affinity_preference(weighted(10, s2_zone())));
    let round = c.provision(zoned.clone());
    assert_all_scheduled(&round, &zoned);
    let target = pod().labels(&S2).build();
    let round = c.provision(vec![target.clone()]);
    assert!(round.scheduled(&target.key()));
}

#[test]
fn should_allow_violation_of_a_pod_affinity_preference_with_a_conflicting_required_constraint() {
    let mut c = topology_cluster();
    let constraint = test_spread(HOSTNAME, 1);
    let aff1 = pod().labels(&S2).build();
    let mut ps = pods(3, |p| {
        p.test_labels()
            .spread(constraint.clone())
            .affinity_preference(weighted(50, s2_hostname()))
    });
    ps.push(aff1);
    let round = c.provision(ps.clone());
    assert_all_scheduled(&round, &ps);
    assert_eq!(skew_in(&c, None, HOSTNAME, &test_selector()), vec![1, 1, 1]);
}

#[test]
fn should_support_pod_anti_affinity_with_a_zone_topology() {
    let mut c = topology_cluster();
    let make = || pods(3, |p| p.labels(&S2).anti_affinity(s2_zone()));
    // Late committal: a zone is only known once the node exists, so one pod per round.
    for expected in [vec![1], vec![1, 1], vec![1, 1, 1], vec![1, 1, 1]] {
        c.provision(make());
        assert_eq!(skew_in(&c, Some("default"), ZONE, &everything()), expected);
        delete_pending(&mut c);
    }
}

#[test]
fn should_not_schedule_pods_with_affinity_to_a_non_existent_pod() {
    let mut c = topology_cluster();
    let ps = pods(10, |p| p.affinity(s2_zone()));
    let round = c.provision(ps.clone());
    for p in &ps {
        assert_topology_error(&round, p);
    }
}

#[test]
fn should_support_pod_affinity_with_zone_topology_unconstrained_target() {
    let mut c = topology_cluster();
    let aff = pods(10, |p| p.affinity(s2_zone()));
    let target = pod().labels(&S2).build();
    let mut ps = aff.clone();
    ps.push(target.clone());
    let round = c.provision(ps);
    // The target's zone is not determined yet: the others cannot follow it.
    assert_none_scheduled(&round, &aff);
    assert_eq!(skew_in(&c, Some("default"), ZONE, &everything()), vec![1]);
    let round = c.provision(aff.clone());
    assert_all_scheduled(&round, &aff);
    assert_eq!(skew_in(&c, Some("default"), ZONE, &everything()), vec![11]);
}

#[test]
fn should_support_pod_affinity_with_zone_topology_constrained_target() {
    let mut c = topology_cluster();
    let target = pod()
        .labels(&S2)
        .node_requirement(req_in(ZONE, &["test-zone-1"]))
        .build();
    let mut ps = pods(10, |p| p.affinity(s2_zone()));
    ps.push(target);
    c.provision(ps);
    assert_eq!(skew_in(&c, Some("default"), ZONE, &everything()), vec![11]);
}

#[test]
fn should_handle_multiple_dependent_affinities() {
    let db = [("type", "db"), ("spread", "spread")];
    let web = [("type", "web"), ("spread", "spread")];
    let cache = [("type", "cache"), ("spread", "spread")];
    let ui = [("type", "ui"), ("spread", "spread")];
    for _ in 0..50 {
        let mut c = topology_cluster();
        // DB → Web → Cache → UI must schedule in that order.
        let ps = vec![
            pod().labels(&db).build(),
            pod().labels(&web).affinity(term(&db, HOSTNAME)).build(),
            pod().labels(&cache).affinity(term(&web, HOSTNAME)).build(),
            pod().labels(&ui).affinity(term(&cache, HOSTNAME)).build(),
        ];
        let round = c.provision(ps.clone());
        assert_all_scheduled(&round, &ps);
    }
}

#[test]
fn should_fail_to_schedule_pods_with_unsatisfiable_dependencies() {
    let mut c = topology_cluster();
    let p = pod()
        .labels(&[("type", "db"), ("spread", "spread")])
        .affinity(term(&[("type", "web"), ("spread", "spread")], HOSTNAME))
        .build();
    let round = c.provision(vec![p.clone()]);
    assert_topology_error(&round, &p);
}

/// Ten hostname-spread pods, a target labelled `security=s2` in `namespace`, and a pod with
/// hostname affinity `affinity` to it: provisions them and returns the target and the affine
/// pod.
fn namespace_scenario(
    c: &mut Cluster,
    namespace: &str,
    affinity: PodAffinityTerm,
) -> (Pod, Pod, karpenter_fake::harness::Round) {
    let aff1 = pod().labels(&S2).namespace(namespace).build();
    let aff2 = pod().affinity(affinity).build();
    let mut ps = ten_hostname_spread_pods();
    ps.push(aff1.clone());
    ps.push(aff2.clone());
    let round = c.provision(ps);
    (aff1, aff2, round)
}

#[test]
fn should_filter_pod_affinity_topologies_by_namespace_no_matching_pods() {
    let mut c = topology_cluster();
    c.namespace_labels
        .insert("other-ns-no-match".into(), BTreeMap::new());
    let (aff1, aff2, round) = namespace_scenario(&mut c, "other-ns-no-match", s2_hostname());
    assert!(round.scheduled(&aff1.key()));
    // The target is in another namespace that the term neither lists nor selects.
    assert_topology_error(&round, &aff2);
}

#[test]
fn should_filter_pod_affinity_topologies_by_namespace_matching_pods_namespace_list() {
    let mut c = topology_cluster();
    c.namespace_labels
        .insert("other-ns-list".into(), BTreeMap::new());
    let mut t = s2_hostname();
    t.namespaces = vec!["other-ns-list".into()];
    let (aff1, aff2, round) = namespace_scenario(&mut c, "other-ns-list", t);
    assert_all_scheduled(&round, &[aff1.clone(), aff2.clone()]);
    assert_eq!(node_of(&c, &aff1).name, node_of(&c, &aff2).name);
}

#[test]
fn should_filter_pod_affinity_topologies_by_namespace_empty_namespace_selector() {
    let mut c = topology_cluster();
    c.namespace_labels.insert(
        "empty-ns-selector".into(),
        [("foo".to_string(), "bar".to_string())].into(),
    );
    let mut t = s2_hostname();
    // An empty namespace selector selects every namespace.
    t.namespace_selector = Some(LabelSelector::default());
    let (aff1, aff2, round) = namespace_scenario(&mut c, "empty-ns-selector", t);
    assert_all_scheduled(&round, &[aff1.clone(), aff2.clone()]);
    assert_eq!(node_of(&c, &aff1).name, node_of(&c, &aff2).name);
}

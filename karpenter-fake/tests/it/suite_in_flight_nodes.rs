//! `suite_test.go` › In-Flight Nodes (+ Topology, Taints, Daemonsets) (upstream `suite_test.go`).
//!
//! Nodes launched by the harness are registered but uninitialized ("in flight") until marked
//! initialized, like the nodes upstream's `ExpectProvisioned` creates.

use std::sync::Arc;

use karpenter_core::labels;
use karpenter_core::model::{ClusterNode, LabelSelector};
use karpenter_core::requirements::Operator::In;
use karpenter_core::resources::{Quantity, names};
use karpenter_core::taints::{Taint, TaintEffect};
use karpenter_fake::catalog::{InstanceTypeOptions, new_instance_type};
use karpenter_fake::harness::Cluster;

use crate::suite_kit::*;

#[test]
fn should_not_launch_a_second_node_if_there_is_an_in_flight_node_that_can_support_the_pod() {
    let mut c = suite_cluster();
    let r1 = c.provision(vec![pod("a").cpu("10m")]);
    let n1 = node_of(&r1, &key("a"));
    let r2 = c.provision(vec![pod("b").cpu("10m")]);
    assert_eq!(node_of(&r2, &key("b")).name, n1.name);
    assert!(r2.launched.is_empty());
}

#[test]
fn should_not_launch_a_second_node_if_there_is_an_in_flight_node_that_can_support_the_pod_node_selectors()
 {
    let mut c = suite_cluster();
    let r1 = c.provision(vec![pod("a").cpu("10m").require(
        labels::ZONE,
        In,
        &["test-zone-2"],
    )]);
    let n1 = node_of(&r1, &key("a"));
    assert_eq!(n1.labels[labels::ZONE], "test-zone-2");
    // test-zone-2 is in the intersection and the node has room: no new node.
    let r2 = c.provision(vec![pod("b").cpu("10m").require(
        labels::ZONE,
        In,
        &["test-zone-1", "test-zone-2"],
    )]);
    assert_eq!(node_of(&r2, &key("b")).name, n1.name);
    // The node is in test-zone-2, so this pod needs a new node.
    let r3 = c.provision(vec![pod("c").cpu("10m").require(
        labels::ZONE,
        In,
        &["test-zone-1", "test-zone-3"],
    )]);
    assert_ne!(node_of(&r3, &key("c")).name, n1.name);
}

#[test]
fn should_launch_a_second_node_if_a_pod_wont_fit_on_the_existingnodes_node() {
    let mut c = suite_cluster();
    let r1 = c.provision(vec![pod("a").cpu("1001m")]);
    let n1 = node_of(&r1, &key("a"));
    assert_eq!(instance_type(&n1), "small-instance-type");
    // The small node has 2 cpu (1.9 allocatable): both pods can't fit on it.
    let r2 = c.provision(vec![pod("b").cpu("1")]);
    assert_ne!(node_of(&r2, &key("b")).name, n1.name);
}

#[test]
fn should_launch_a_second_node_if_a_pod_isnt_compatible_with_the_existingnodes_node_node_selector()
{
    let mut c = suite_cluster();
    let r1 = c.provision(vec![pod("a").cpu("10m")]);
    let n1 = node_of(&r1, &key("a"));
    let r2 = c.provision(vec![pod("b").selector(labels::ARCH, "arm64")]);
    assert_ne!(node_of(&r2, &key("b")).name, n1.name);
}

#[test]
fn should_launch_a_second_node_if_an_in_flight_node_is_terminating() {
    let mut c = suite_cluster();
    let r1 = c.provision(vec![pod("a").cpu("10m")]);
    let n1 = node_of(&r1, &key("a"));
    // Upstream deletes the NodeClaim and Node; the scheduler no longer considers the node.
    mark_for_deletion(&mut c, &n1.name);
    let r2 = c.provision(vec![pod("b").cpu("10m")]);
    assert_ne!(node_of(&r2, &key("b")).name, n1.name);
}

/// Upstream picks a random number of pods (0–9) for each of 10 rounds and asserts a property
/// of the result; this runs the same property over fixed pseudo-random sequences.
#[test]
fn should_pack_in_flight_nodes_before_launching_new_nodes() {
    // Enough CPU for four 1-cpu pods plus a little overhead.
    let medium = Arc::new(new_instance_type(
        "medium",
        InstanceTypeOptions::with_resources(resources(&[(names::CPU, "4.25"), (names::PODS, "4")])),
    ));
    for seed in 1..=16u64 {
        let mut pool = suite_pool();
        pool.instance_types = vec![medium.clone()];
        let mut c = cluster_with(pool);
        let mut state = seed;
        let mut next = || {
            // SplitMix64 step.
            state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        };
        for round in 0..10 {
            let n = usize::try_from(next() % 10).unwrap_or(0);
            let batch = pods(&format!("r{round}"), n, |p| p.cpu("1"));
            let r = c.provision(batch.clone());
            for p in &batch {
                assert!(
                    r.scheduled(&p.key()),
                    "seed {seed}: {:?}",
                    r.results.pod_errors
                );
            }
        }
        let names: Vec<String> = c.nodes().map(|n| n.name.clone()).collect();
        let with_free_cpu = names
            .iter()
            .filter(|n| available(&c, n, names::CPU) >= Quantity::from_units(1))
            .count();
        assert!(
            with_free_cpu <= 1,
            "seed {seed}: {with_free_cpu} nodes with a free cpu"
        );
    }
}

#[test]
fn should_not_launch_a_second_node_if_there_is_an_in_flight_node_that_can_support_the_pod_2011() {
    let mut c = suite_cluster();
    let mut unbound = Unbound::default();
    unbound.provision(&mut c, vec![pod("a").cpu("10m")]);
    assert_eq!(c.node_count(), 1);
    // The pod is still pending (unschedulable again) and provisioned again.
    unbound.provision(&mut c, Vec::new());
    assert_eq!(c.node_count(), 1);
}

/// Upstream marks a random one of 100 in-flight NodeClaims initialized; this checks several
/// positions, including the one whose name sorts last.
#[test]
fn should_order_initialized_nodes_for_scheduling_uninitialized_nodes_when_all_other_nodes_are_inflight()
 {
    for initialized in [0usize, 37, 99] {
        let mut c = suite_cluster();
        for i in 0..100 {
            c.add_node(launched_small_node(
                &format!("claim-{i:03}"),
                i == initialized,
            ));
        }
        let round = c.provision(vec![pod("a")]);
        assert_eq!(
            node_of(&round, &key("a")).name,
            format!("claim-{initialized:03}")
        );
    }
}

/// A managed node of the default pool launched as `small-instance-type` (what the fake provider
/// picks for a NodeClaim without requirements), initialized or not.
pub(crate) fn launched_small_node(name: &str, initialized: bool) -> ClusterNode {
    let mut node = existing_node(
        name,
        &[
            (names::CPU, "1900m"),
            (names::MEMORY, "2038Mi"),
            (names::PODS, "5"),
        ],
    );
    node.capacity = resources(&[
        (names::CPU, "2"),
        (names::MEMORY, "2Gi"),
        (names::PODS, "5"),
    ]);
    node.managed = true;
    node.initialized = initialized;
    for (k, v) in [
        (labels::NODEPOOL, "default"),
        (labels::INSTANCE_TYPE, "small-instance-type"),
        (labels::CAPACITY_TYPE, "spot"),
        (labels::ZONE, "test-zone-1"),
        (labels::ARCH, "amd64"),
        (labels::OS, "linux"),
    ] {
        node.labels.insert(k.into(), v.into());
    }
    if initialized {
        node.labels
            .insert(labels::INITIALIZED.into(), "true".into());
    }
    node
}

#[test]
fn should_schedule_pods_with_the_same_host_port_to_different_nodes() {
    let mut c = suite_cluster();
    let round = c.provision(vec![pod("a").host_port(8080), pod("b").host_port(8080)]);
    assert_ne!(
        node_of(&round, &key("a")).name,
        node_of(&round, &key("b")).name
    );
}

mod topology {
    use super::*;

    const FOO: [(&str, &str); 1] = [("foo", "bar")];

    fn spread_pods(prefix: &str, n: usize, key: &str) -> Vec<karpenter_core::model::Pod> {
        pods(prefix, n, |p| p.label("foo", "bar").spread(&FOO, key))
    }

    #[test]
    fn should_balance_pods_across_zones_with_in_flight_nodes() {
        let mut c = suite_cluster();
        let selector = LabelSelector::from_labels(FOO);
        c.provision(spread_pods("a", 4, labels::ZONE));
        assert_eq!(c.skew(labels::ZONE, &selector), vec![1, 1, 2]);
        let nodes = c.node_count();
        c.provision(spread_pods("b", 5, labels::ZONE));
        assert_eq!(c.skew(labels::ZONE, &selector), vec![3, 3, 3]);
        // The in-flight nodes can take the pods: no new nodes.
        assert_eq!(c.node_count(), nodes);
    }

    #[test]
    fn should_balance_pods_across_hostnames_with_in_flight_nodes() {
        let mut c = suite_cluster();
        let selector = LabelSelector::from_labels(FOO);
        c.provision(spread_pods("a", 4, labels::HOSTNAME));
        assert_eq!(c.skew(labels::HOSTNAME, &selector), vec![1, 1, 1, 1]);
        c.provision(spread_pods("b", 5, labels::HOSTNAME));
        // New nodes are preferred to satisfy the spread over reusing the in-flight ones.
        assert_eq!(c.skew(labels::HOSTNAME, &selector), vec![1; 9]);
    }
}

mod taints {
    use super::*;

    fn custom_taint() -> Taint {
        Taint::new("foo.com/taint", "tainted", TaintEffect::NoSchedule)
    }

    /// Provisions an 8-cpu pod, then deletes it so the node is empty. Returns the node's name.
    fn empty_node_after_big_pod(c: &mut Cluster) -> String {
        let r = c.provision(vec![pod("initial").cpu("8")]);
        let name = node_of(&r, &key("initial")).name;
        assert!(c.delete_pod(&key("initial")));
        name
    }

    fn node_mut<'a>(c: &'a mut Cluster, name: &str) -> &'a mut ClusterNode {
        c.node_mut(name).unwrap_or_else(|| panic!("no node {name}"))
    }

    #[test]
    fn should_assume_pod_will_schedule_to_a_tainted_node_with_no_taints() {
        let mut c = suite_cluster();
        let n1 = empty_node_after_big_pod(&mut c);
        node_mut(&mut c, &n1).taints.clear();
        let r = c.provision(vec![pod("second")]);
        assert_eq!(node_of(&r, &key("second")).name, n1);
    }

    #[test]
    fn should_assume_pod_will_schedule_to_a_node_with_ephemeral_taint_not_ready_noexecute_when_the_node_is_uninitialized()
     {
        let mut c = suite_cluster();
        let r = c.provision(vec![pod("initial")]);
        let n1 = node_of(&r, &key("initial")).name;
        assert!(c.delete_pod(&key("initial")));
        node_mut(&mut c, &n1).taints = vec![Taint::new(
            "node.kubernetes.io/not-ready",
            "",
            TaintEffect::NoExecute,
        )];
        // Uninitialized: the not-ready taint is ephemeral and ignored.
        let r = c.provision(vec![pod("second")]);
        assert_eq!(node_of(&r, &key("second")).name, n1);
        assert!(c.delete_pod(&key("second")));
        // Initialized: the taint counts, and the pod doesn't tolerate it.
        assert!(c.mark_initialized(&n1));
        let r = c.provision(vec![pod("third")]);
        assert_ne!(node_of(&r, &key("third")).name, n1);
    }

    #[test]
    fn should_not_assume_pod_will_schedule_to_a_tainted_node() {
        let mut c = suite_cluster();
        let n1 = empty_node_after_big_pod(&mut c);
        assert!(c.mark_initialized(&n1));
        node_mut(&mut c, &n1).taints.push(custom_taint());
        let r = c.provision(vec![pod("second")]);
        assert_ne!(node_of(&r, &key("second")).name, n1);
    }

    #[test]
    fn should_assume_pod_will_schedule_to_a_tainted_node_with_a_custom_startup_taint() {
        let mut pool = suite_pool();
        pool.startup_taints.push(custom_taint());
        let mut c = cluster_with(pool);
        let n1 = empty_node_after_big_pod(&mut c);
        let node = c.node(&n1).expect("node");
        assert!(node.taints.iter().any(|t| *t == custom_taint()));
        let r = c.provision(vec![pod("second")]);
        assert_eq!(node_of(&r, &key("second")).name, n1);
    }

    #[test]
    fn should_not_assume_pod_will_schedule_to_a_node_with_startup_taints_after_initialization() {
        let startup = Taint::new("ignore-me", "nothing-to-see-here", TaintEffect::NoSchedule);
        let mut pool = suite_pool();
        pool.startup_taints = vec![startup.clone()];
        let mut c = cluster_with(pool);
        let r = c.provision(vec![pod("initial")]);
        let n1 = node_of(&r, &key("initial")).name;
        assert!(c.delete_pod(&key("initial")));
        // Initialized (the startup taint was removed at some point) and the startup taint is
        // back: it is a real taint now.
        assert!(c.mark_initialized(&n1));
        let node = node_mut(&mut c, &n1);
        node.taints = vec![startup];
        node.capacity = resources(&[(names::PODS, "10")]);
        let r = c.provision(vec![pod("second")]);
        assert_ne!(node_of(&r, &key("second")).name, n1);
    }

    #[test]
    fn should_consider_a_tainted_notready_node_as_in_flight_even_if_initialized() {
        let mut c = suite_cluster();
        let r = c.provision(vec![pod("a").cpu("10m")]);
        let n1 = node_of(&r, &key("a")).name;
        // Upstream labels the Node initialized and taints it, but never re-syncs cluster state
        // before the next round: the scheduler still sees an uninitialized node, whose known
        // ephemeral taints are ignored. The node carries the taints here, uninitialized.
        node_mut(&mut c, &n1).taints = vec![
            Taint::new("node.kubernetes.io/not-ready", "", TaintEffect::NoSchedule),
            Taint::new(
                "node.kubernetes.io/unreachable",
                "",
                TaintEffect::NoSchedule,
            ),
            Taint::new(
                "node.cloudprovider.kubernetes.io/uninitialized",
                "true",
                TaintEffect::NoSchedule,
            ),
        ];
        let r = c.provision(vec![pod("b").cpu("10m")]);
        assert_eq!(node_of(&r, &key("b")).name, n1);
    }
}

mod daemonsets {
    use super::*;
    use karpenter_core::requirements::Operator;

    fn approx(q: Quantity, expected: &str) {
        assert_eq!(q, self::q(expected), "expected {expected}, got {q}");
    }

    #[test]
    fn should_track_daemonset_usage_separately_so_we_know_how_many_ds_resources_are_remaining_to_be_scheduled()
     {
        let mut c = suite_cluster();
        c.add_daemonset(daemonset("ds", pod("ds-template").cpu("1").memory("1Gi")));
        let r = c.provision(vec![pod("initial").cpu("8")]);
        let n1 = node_of(&r, &key("initial")).name;
        assert!(c.delete_pod(&key("initial")));
        // No pods: the full 16 cpu − 100m overhead.
        approx(daemonset_requests(&c, &n1, names::CPU), "0");
        approx(available(&c, &n1, names::CPU), "15.9");
        // The DaemonSet's pod binds (requesting more memory than the template).
        let ds_pod = pod("ds-pod")
            .cpu("1")
            .memory("2Gi")
            .owned_by("DaemonSet", "ds");
        assert!(c.bind(ds_pod, &n1));
        approx(daemonset_requests(&c, &n1, names::CPU), "1");
        approx(available(&c, &n1, names::CPU), "14.9");
        // The remaining DaemonSet overhead is zero: 14.9 cpu are left for the pod.
        let r = c.provision(vec![pod("second").cpu("14.9")]);
        assert_eq!(node_of(&r, &key("second")).name, n1);
    }

    #[test]
    fn should_handle_unexpected_daemonset_pods_binding_to_the_node() {
        let mut c = suite_cluster();
        c.add_daemonset(daemonset(
            "ds1",
            pod("ds1-template")
                .selector("my-node-label", "value")
                .cpu("1")
                .memory("1Gi"),
        ));
        c.add_daemonset(daemonset("ds2", pod("ds2-template").cpu("1m")));
        let r = c.provision(vec![pod("initial").cpu("8")]);
        let n1 = node_of(&r, &key("initial")).name;
        // A label Karpenter can't track appears on the node.
        node_mut_labels(&mut c, &n1).insert("my-node-label".into(), "value".into());
        assert!(c.delete_pod(&key("initial")));
        approx(daemonset_requests(&c, &n1, names::CPU), "0");
        approx(available(&c, &n1, names::CPU), "15.9");
        let ds_pod = pod("ds1-pod")
            .selector("my-node-label", "value")
            .cpu("1")
            .memory("2Gi")
            .owned_by("DaemonSet", "ds1");
        assert!(c.bind(ds_pod, &n1));
        approx(daemonset_requests(&c, &n1, names::CPU), "1");
        approx(available(&c, &n1, names::CPU), "14.9");
        // The remaining DaemonSet overhead is clamped at zero per resource, so the node has
        // less than 15.5 cpu left: a new node.
        let r = c.provision(vec![pod("second").cpu("15.5")]);
        assert_ne!(node_of(&r, &key("second")).name, n1);
    }

    fn node_mut_labels<'a>(
        c: &'a mut Cluster,
        name: &str,
    ) -> &'a mut std::collections::BTreeMap<String, String> {
        &mut c.node_mut(name).expect("node").labels
    }

    #[test]
    fn should_properly_handle_daemonset_resources_with_node_affinity_for_karpenter_sh_initialized_and_karpenter_sh_registered()
     {
        let mut c = suite_cluster();
        c.add_daemonset(daemonset(
            "ds1",
            pod("ds1-template")
                .require(labels::INITIALIZED, Operator::In, &["true"])
                .cpu("1"),
        ));
        c.add_daemonset(daemonset(
            "ds2",
            pod("ds2-template")
                .require(labels::REGISTERED, Operator::In, &["true"])
                .cpu("1"),
        ));
        let r = c.provision(vec![pod("initial").cpu("2")]);
        let n1 = node_of(&r, &key("initial")).name;
        // Both daemons count as overhead: 2 + 2 cpu need the 16-cpu type, not the 4-cpu one.
        assert_eq!(r.launched.len(), 1);
        approx(
            c.node(&n1).expect("node").capacity.get_or_zero(names::CPU),
            "16",
        );
        // The simulation-only requirements don't leak into the NodeClaim.
        let claim = r.claim_of(&n1).expect("claim");
        let reqs = claim.node_claim_requirements(&c.options.label_policy);
        for k in [labels::REGISTERED, labels::INITIALIZED] {
            assert!(!reqs.has(k), "requirement {k} leaked");
            assert!(!claim.labels.contains_key(k), "label {k} leaked");
        }
        assert!(c.delete_pod(&key("initial")));
        approx(daemonset_requests(&c, &n1, names::CPU), "0");
        approx(available(&c, &n1, names::CPU), "15.9");
        assert!(c.bind(pod("ds1-pod").cpu("1").owned_by("DaemonSet", "ds1"), &n1));
        assert!(c.bind(pod("ds2-pod").cpu("1").owned_by("DaemonSet", "ds2"), &n1));
        approx(daemonset_requests(&c, &n1, names::CPU), "2");
        approx(available(&c, &n1, names::CPU), "13.9");
    }
}

//! `suite_test.go` › Existing Nodes (+ Daemonsets) (upstream `suite_test.go`).

use karpenter_core::labels;
use karpenter_core::requirements::Operator::In;
use karpenter_core::resources::names;
use karpenter_fake::harness::Cluster;

use crate::suite_in_flight_nodes::launched_small_node;
use crate::suite_kit::*;

#[test]
fn should_schedule_a_pod_to_an_existing_node_unowned_by_karpenter() {
    let mut c = suite_cluster();
    c.add_node(existing_node(
        "unowned",
        &[
            (names::CPU, "10"),
            (names::MEMORY, "10Gi"),
            (names::PODS, "110"),
        ],
    ));
    let round = c.provision(vec![pod("a").cpu("10m")]);
    assert_eq!(node_of(&round, &key("a")).name, "unowned");
    assert!(round.launched.is_empty());
}

#[test]
fn should_schedule_multiple_pods_to_an_existing_node_unowned_by_karpenter() {
    let mut c = suite_cluster();
    c.add_node(existing_node(
        "unowned",
        &[
            (names::CPU, "10"),
            (names::MEMORY, "100Gi"),
            (names::PODS, "110"),
        ],
    ));
    let pods = pods("p", 100, |p| p.cpu("10m"));
    let round = c.provision(pods.clone());
    for p in &pods {
        assert_eq!(node_of(&round, &p.key()).name, "unowned");
    }
    assert!(round.launched.is_empty());
}

/// Upstream marks a random one of 100 registered nodes initialized; this checks several
/// positions, including the one whose name sorts last.
#[test]
fn should_order_initialized_nodes_for_scheduling_uninitialized_nodes() {
    for initialized in [0usize, 58, 99] {
        let mut c = suite_cluster();
        for i in 0..100 {
            let mut node = launched_small_node(&format!("node-{i:03}"), i == initialized);
            node.labels.insert(labels::REGISTERED.into(), "true".into());
            c.add_node(node);
        }
        let round = c.provision(vec![pod("a")]);
        assert_eq!(
            node_of(&round, &key("a")).name,
            format!("node-{initialized:03}")
        );
    }
}

/// A managed, initialized node without zone (or other well-known) labels.
fn unlabelled_managed_node(allocatable: &[(&str, &str)]) -> karpenter_core::model::ClusterNode {
    let mut node = existing_node("unlabelled", allocatable);
    node.managed = true;
    node.initialized = true;
    node.labels
        .insert(labels::INITIALIZED.into(), "true".into());
    node.labels.insert(labels::REGISTERED.into(), "true".into());
    node
}

#[test]
fn should_consider_a_pod_incompatible_with_an_existing_node_but_compatible_with_nodepool() {
    let mut c = Cluster::new();
    c.add_node(unlabelled_managed_node(&[
        (names::CPU, "10"),
        (names::MEMORY, "10Gi"),
        (names::PODS, "110"),
    ]));
    let p = pod("a").require(labels::ZONE, In, &["test-zone-1"]);
    // The node doesn't define the zone (strict compatibility) and there is no NodePool yet.
    let round = c.provision(vec![p.clone()]);
    assert_not_scheduled(&round, &key("a"));
    c.add_node_pool(suite_pool());
    let round = c.provision(vec![p]);
    let node = node_of(&round, &key("a"));
    assert_ne!(node.name, "unlabelled");
    assert_eq!(node.labels[labels::ZONE], "test-zone-1");
}

mod daemonsets {
    use super::*;

    #[test]
    fn should_not_subtract_daemonset_overhead_that_is_not_strictly_compatible_with_an_existing_node()
     {
        let mut c = suite_cluster();
        c.add_node(unlabelled_managed_node(&[
            (names::CPU, "1"),
            (names::MEMORY, "1Gi"),
            (names::PODS, "110"),
        ]));
        // Not compatible with the node (it has no zone label).
        c.add_daemonset(daemonset(
            "ds",
            pod("ds-template").cpu("100").memory("100Gi").require(
                labels::ZONE,
                In,
                &["test-zone-1"],
            ),
        ));
        let round = c.provision(vec![pod("a").cpu("1").memory("1Gi")]);
        assert_eq!(node_of(&round, &key("a")).name, "unlabelled");
        // The node is full, and the DaemonSet's overhead swamps every instance type of the pool.
        let round = c.provision(vec![pod("b").cpu("1").memory("1Gi")]);
        assert_not_scheduled(&round, &key("b"));
    }
}

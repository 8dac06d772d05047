//! `suite_test.go` › Binpacking (upstream `suite_test.go`).
//!
//! Pods carry their *effective* requests (upstream `utils/pod/scheduling.go`): where upstream sets
//! limits only, init containers or a RuntimeClass overhead, the test pod's requests are what
//! Kubernetes computes from them (noted per scenario).

use std::collections::BTreeSet;
use std::sync::Arc;

use karpenter_core::labels;
use karpenter_core::model::Offering;
use karpenter_core::resources::names;
use karpenter_fake::catalog::{self, InstanceTypeOptions, new_instance_type};

use crate::suite_kit::*;

#[test]
fn should_schedule_a_small_pod_on_the_smallest_instance() {
    let mut c = suite_cluster();
    let round = c.provision(vec![pod("a").memory("100M")]);
    assert_eq!(
        instance_type(&node_of(&round, &key("a"))),
        "small-instance-type"
    );
}

#[test]
fn should_schedule_a_small_pod_on_the_smallest_possible_instance_type() {
    let mut c = suite_cluster();
    // 2000M fits the small type's 2Gi − 10Mi allocatable.
    let round = c.provision(vec![pod("a").memory("2000M")]);
    assert_eq!(
        instance_type(&node_of(&round, &key("a"))),
        "small-instance-type"
    );
}

#[test]
fn should_take_pod_runtime_class_into_consideration() {
    let mut c = suite_cluster();
    // cpu 1 plus a RuntimeClass overhead (podFixed) of cpu 2: effective request cpu 3.
    let round = c.provision(vec![pod("a").cpu("3")]);
    assert_eq!(
        instance_type(&node_of(&round, &key("a"))),
        "default-instance-type"
    );
}

#[test]
fn should_schedule_multiple_small_pods_on_the_smallest_possible_instance_type() {
    let mut c = suite_cluster();
    let pods = pods("p", 5, |p| p.memory("10M"));
    let round = c.provision(pods.clone());
    assert_eq!(distinct_nodes(&round, &pods).len(), 1);
    for p in &pods {
        assert_eq!(
            instance_type(&node_of(&round, &p.key())),
            "small-instance-type"
        );
    }
}

#[test]
fn should_create_new_nodes_when_a_node_is_at_capacity() {
    let mut c = suite_cluster();
    let pods = pods("p", 40, |p| {
        p.selector(labels::ARCH, "amd64").memory("1.8G")
    });
    let round = c.provision(pods.clone());
    assert_eq!(distinct_nodes(&round, &pods).len(), 20);
    for p in &pods {
        assert_eq!(
            instance_type(&node_of(&round, &p.key())),
            "default-instance-type"
        );
    }
}

#[test]
fn should_pack_small_and_large_pods_together() {
    let mut c = suite_cluster();
    let mut all = pods("large", 40, |p| {
        p.selector(labels::ARCH, "amd64").memory("1.8G")
    });
    all.extend(pods("small", 20, |p| {
        p.selector(labels::ARCH, "amd64").memory("400M")
    }));
    let round = c.provision(all.clone());
    // Two large pods fill a default-instance-type node, leaving room for exactly one small pod.
    assert_eq!(distinct_nodes(&round, &all).len(), 20);
    for p in &all {
        assert_eq!(
            instance_type(&node_of(&round, &p.key())),
            "default-instance-type"
        );
    }
}

#[test]
fn should_pack_nodes_tightly() {
    let mut pool = suite_pool();
    pool.instance_types = catalog::instance_types(5);
    let mut c = cluster_with(pool);
    let round = c.provision(vec![pod("big").cpu("4.5"), pod("small").cpu("1")]);
    let (big, small) = (node_of(&round, &key("big")), node_of(&round, &key("small")));
    assert_ne!(big.name, small.name);
    // The small pod gets a smaller node than the one nearly filled by the big pod.
    assert_ne!(instance_type(&big), instance_type(&small));
}

#[test]
fn should_handle_zero_quantity_resource_requests() {
    let mut c = suite_cluster();
    let round = c.provision(vec![pod("a").request("foo.com/weird-resources", "0")]);
    assert!(round.scheduled(&key("a")), "{:?}", round.results.pod_errors);
}

#[test]
fn should_not_schedule_pods_that_exceed_every_instance_types_capacity() {
    let mut c = suite_cluster();
    let round = c.provision(vec![pod("a").memory("2Ti")]);
    assert_not_scheduled(&round, &key("a"));
}

#[test]
fn should_create_new_nodes_when_a_node_is_at_capacity_due_to_pod_limits_per_node() {
    let mut c = suite_cluster();
    let pods = pods("p", 25, |p| {
        p.selector(labels::ARCH, "amd64").memory("1m").cpu("1m")
    });
    let round = c.provision(pods.clone());
    // Every type takes 5 pods: five of the cheapest.
    assert_eq!(distinct_nodes(&round, &pods).len(), 5);
    for p in &pods {
        assert_eq!(
            instance_type(&node_of(&round, &p.key())),
            "small-instance-type"
        );
    }
}

#[test]
fn should_take_into_account_initcontainer_resource_requests_when_binpacking() {
    let mut c = suite_cluster();
    // Container 1 cpu / 1Gi, init container 2 cpu / 1Gi: effective requests 2 cpu / 1Gi.
    let round = c.provision(vec![pod("a").cpu("2").memory("1Gi")]);
    assert_eq!(
        instance_type(&node_of(&round, &key("a"))),
        "default-instance-type"
    );
}

#[test]
fn should_not_schedule_pods_when_initcontainer_resource_requests_are_greater_than_available_instance_types()
 {
    let mut c = suite_cluster();
    // Container 1 cpu / 1Gi, init container 2 cpu / 1Ti: effective requests 2 cpu / 1Ti.
    let round = c.provision(vec![pod("a").cpu("2").memory("1Ti")]);
    assert_not_scheduled(&round, &key("a"));
}

#[test]
fn should_select_for_valid_instance_types_regardless_of_price() {
    let it = |name: &str, cpu: &str, mem: &str, price: f64| {
        Arc::new(new_instance_type(
            name,
            InstanceTypeOptions {
                resources: resources(&[(names::CPU, cpu), (names::MEMORY, mem)]),
                offerings: vec![Offering::new(
                    "test-zone-1a",
                    labels::CAPACITY_TYPE_ON_DEMAND,
                    price,
                )],
                ..Default::default()
            },
        ))
    };
    let mut pool = suite_pool();
    pool.instance_types = vec![
        it("medium", "2", "2Gi", 3.0),
        it("small", "1", "1Gi", 2.0),
        it("large", "4", "4Gi", 1.0),
    ];
    let mut c = cluster_with(pool);
    // Limits only: requests 1m cpu / 1Mi.
    let round = c.provision(vec![pod("a").cpu("1m").memory("1Mi")]);
    let node = node_of(&round, &key("a"));
    // large is the cheapest, but all three are valid options of the NodeClaim.
    assert_eq!(instance_type(&node), "large");
    let claim = round.claim_of(&node.name).expect("launched in this round");
    let options: BTreeSet<&str> = claim
        .instance_types
        .iter()
        .map(|it| it.name.as_str())
        .collect();
    assert_eq!(options, BTreeSet::from(["small", "medium", "large"]));
    let policy = &c.options.label_policy;
    let reqs = claim.node_claim_requirements(policy);
    let listed: BTreeSet<&str> = reqs
        .get(labels::INSTANCE_TYPE)
        .expect("instance-type requirement")
        .values()
        .collect();
    assert_eq!(listed, options);
}

use std::sync::Arc;

use karpenter_core::labels;
use karpenter_core::model::{
    ClusterNode, LabelSelector, Pod, TopologySpreadConstraint, WhenUnsatisfiable,
};
use karpenter_core::requirements::{NodeSelectorRequirement, Operator};
use karpenter_core::resources::{Quantity, ResourceList, names};
use karpenter_core::taints::{Taint, TaintEffect};
use karpenter_fake::catalog::{
    self, InstanceTypeOptions, RESERVATION_ID_LABEL, default_catalog, new_instance_type,
};
use karpenter_fake::harness::{Cluster, node_pool};

fn cluster() -> Cluster {
    let mut pool = node_pool("default", default_catalog());
    pool.requirements = vec![NodeSelectorRequirement::new(
        labels::CAPACITY_TYPE,
        Operator::In,
        ["spot", "on-demand", "reserved"],
    )];
    Cluster::new().with_node_pool(pool)
}

fn pod(name: &str) -> Pod {
    Pod::new("default", name)
}

fn key(name: &str) -> String {
    format!("default/{name}")
}

#[test]
fn launches_a_labelled_uninitialized_node() {
    let mut c = cluster();
    let round = c.provision(vec![pod("a")]);
    assert!(round.scheduled(&key("a")));
    assert_eq!(round.launched.len(), 1);
    let node = round.node_of(&key("a")).unwrap();
    assert_eq!(node.labels[labels::NODEPOOL], "default");
    assert_eq!(node.labels[labels::HOSTNAME], node.name);
    assert_eq!(node.labels[labels::REGISTERED], "true");
    assert_eq!(node.labels[labels::INSTANCE_TYPE], "small-instance-type");
    assert_eq!(node.labels[labels::CAPACITY_TYPE], "spot");
    assert_eq!(node.labels[labels::ZONE], "test-zone-1");
    assert!(node.managed);
    assert!(!node.initialized);
    assert_eq!(
        node.allocatable.get(names::CPU),
        Some(Quantity::from_milli(1900))
    );
    assert_eq!(c.node_count(), 1);
    assert_eq!(c.pods_on(&node.name).len(), 1);
    assert_eq!(
        c.pods_on(&node.name)[0].node_name.as_deref(),
        Some(node.name.as_str())
    );
    assert!(c.pending().is_empty());
    let claim = round.claim_of(&node.name).unwrap();
    assert_eq!(claim.pods, vec![key("a")]);

    assert!(c.mark_initialized(&node.name.clone()));
    let n = c.nodes().next().unwrap();
    assert!(n.initialized);
    assert_eq!(n.labels[labels::INITIALIZED], "true");
    assert!(!c.mark_initialized("nope"));
}

#[test]
fn zone_3_selector_launches_on_demand() {
    let mut c = cluster();
    let mut p = pod("a");
    p.node_selector
        .insert(labels::ZONE.into(), "test-zone-3".into());
    let round = c.provision(vec![p]);
    let node = round.node_of(&key("a")).unwrap();
    assert_eq!(node.labels[labels::ZONE], "test-zone-3");
    assert_eq!(node.labels[labels::CAPACITY_TYPE], "on-demand");
}

#[test]
fn unschedulable_pods_stay_pending() {
    let mut c = cluster();
    let mut p = pod("a");
    p.node_selector
        .insert(labels::ZONE.into(), "unknown".into());
    let round = c.provision(vec![p]);
    assert!(!round.scheduled(&key("a")));
    assert!(round.node_of(&key("a")).is_none());
    assert!(round.results.pod_errors.contains_key(&key("a")));
    assert_eq!(c.pending().len(), 1);
    assert_eq!(c.node_count(), 0);
    assert!(c.delete_pod(&key("a")));
    assert!(c.pending().is_empty());
    assert!(!c.delete_pod(&key("a")));
}

#[test]
fn only_pods_passed_to_the_call_are_bound() {
    let mut c = Cluster::new();
    let round = c.provision(vec![pod("a")]);
    assert!(!round.scheduled(&key("a")), "no NodePool yet");
    c.add_node_pool(node_pool("default", default_catalog()));
    let round = c.provision(vec![pod("b")]);
    assert!(round.scheduled(&key("b")));
    assert!(
        !round.scheduled(&key("a")),
        "a was solved for but not passed"
    );
    assert_eq!(c.pending().len(), 1);
    let round = c.provision(vec![pod("a")]);
    assert!(round.scheduled(&key("a")));
    assert!(c.pending().is_empty());
}

#[test]
fn in_flight_and_existing_nodes_are_reused() {
    let mut c = cluster();
    let r1 = c.provision(vec![pod("a")]);
    let first = r1.node_of(&key("a")).unwrap().name.clone();
    let r2 = c.provision(vec![pod("b")]);
    assert!(r2.launched.is_empty());
    assert_eq!(r2.node_of(&key("b")).unwrap().name, first);
    assert_eq!(c.pods_on(&first).len(), 2);

    let mut c = cluster();
    let mut node = ClusterNode::new("existing");
    let mut alloc = ResourceList::new();
    alloc.insert(names::CPU, Quantity::from_units(10));
    alloc.insert(names::MEMORY, Quantity::from_bytes(10 << 30));
    alloc.insert(names::PODS, Quantity::from_units(100));
    node.capacity = alloc.clone();
    node.allocatable = alloc;
    c.add_node(node);
    let round = c.provision(vec![pod("a")]);
    assert!(round.launched.is_empty());
    assert_eq!(round.node_of(&key("a")).unwrap().name, "existing");
    assert_eq!(c.node_of(&key("a")).unwrap().name, "existing");
}

#[test]
fn taints_and_startup_taints() {
    let mut c = Cluster::new();
    let mut pool = node_pool("default", default_catalog());
    pool.startup_taints = vec![Taint {
        key: "startup".into(),
        value: String::new(),
        effect: TaintEffect::NoSchedule,
        time_added: None,
    }];
    c.add_node_pool(pool);
    let round = c.provision(vec![pod("a")]);
    let node = round.node_of(&key("a")).unwrap();
    assert_eq!(node.taints.len(), 1);
    assert_eq!(node.startup_taints.len(), 1);
    assert_eq!(node.taints[0].key, "startup");
}

#[test]
fn hostname_spread_skew() {
    let mut c = cluster();
    let selector = LabelSelector::from_labels([("app", "web")]);
    let pods: Vec<Pod> = (0..4)
        .map(|i| {
            let mut p = pod(&format!("web-{i}"));
            p.labels.insert("app".into(), "web".into());
            p.topology_spread_constraints = vec![
                TopologySpreadConstraint::new(
                    1,
                    labels::HOSTNAME,
                    WhenUnsatisfiable::DoNotSchedule,
                )
                .with_label_selector(selector.clone()),
            ];
            p
        })
        .collect();
    let round = c.provision(pods);
    assert_eq!(round.bindings.len(), 4);
    assert_eq!(c.skew(labels::HOSTNAME, &selector), vec![1, 1, 1, 1]);
    assert_eq!(
        c.skew(
            labels::ZONE,
            &LabelSelector::from_labels([("app", "other")])
        ),
        Vec::<usize>::new()
    );
}

#[test]
fn launches_consume_reservations() {
    let mut offerings = catalog::default_offerings(1.0);
    offerings.push(karpenter_core::model::Offering::reserved(
        "test-zone-2",
        "r-1",
        1,
        0.5,
        RESERVATION_ID_LABEL,
    ));
    let it = new_instance_type(
        "reservable",
        InstanceTypeOptions {
            offerings,
            ..Default::default()
        },
    );
    let mut c = Cluster::new().with_node_pool(node_pool("default", vec![Arc::new(it)]));
    let round = c.provision(vec![pod("a")]);
    let node = round.node_of(&key("a")).unwrap();
    assert_eq!(node.labels[labels::CAPACITY_TYPE], "reserved");
    assert_eq!(node.labels[RESERVATION_ID_LABEL], "r-1");
    let reserved = &c.node_pools[0].instance_types[0].offerings[5];
    assert_eq!(reserved.reservation_capacity, 0);
    assert!(!reserved.available);
}

fn zonal_pods(prefix: &str, n: usize) -> Vec<Pod> {
    (0..n)
        .map(|i| {
            let mut p = pod(&format!("{prefix}-{i}"));
            p.labels.insert("test".into(), "test".into());
            p.topology_spread_constraints = vec![
                TopologySpreadConstraint::new(1, labels::ZONE, WhenUnsatisfiable::DoNotSchedule)
                    .with_label_selector(LabelSelector::from_labels([("test", "test")])),
            ];
            p
        })
        .collect()
}

/// Upstream "should balance pods across zones with in-flight nodes".
#[test]
fn zonal_spread_over_in_flight_nodes() {
    let mut c = Cluster::new();
    let mut pool = node_pool("default", default_catalog());
    pool.requirements = vec![NodeSelectorRequirement::new(
        labels::CAPACITY_TYPE,
        Operator::Exists,
        Vec::<String>::new(),
    )];
    pool.labels.insert("test".into(), "test".into());
    c.add_node_pool(pool);
    let selector = LabelSelector::from_labels([("test", "test")]);
    c.provision(zonal_pods("a", 4));
    assert_eq!(c.skew(labels::ZONE, &selector), vec![1, 1, 2]);
    let nodes = c.node_count();
    let round = c.provision(zonal_pods("b", 5));
    assert_eq!(c.skew(labels::ZONE, &selector), vec![3, 3, 3]);
    assert!(round.launched.is_empty());
    assert_eq!(c.node_count(), nodes);
}

//! Upstream `topology_test.go` `topology_test.go`, Context "Topology › DefaultConstraints":
//! kube-scheduler's default topology spread constraints, applied by the harness before each solve
//! (`karpenter_core::scheduling::defaults`).
//!
//! Pods are owned by a ReplicaSet selecting `test=test` unless noted; the pool is the topology
//! suite's (`karpenter.sh/capacity-type Exists`, default catalog).

use karpenter_core::labels;
use karpenter_core::model::{
    ClusterNode, LabelSelector, OwnerReference, Pod, TopologySpreadConstraint, WhenUnsatisfiable,
};
use karpenter_core::requirements::{NodeSelectorRequirement, Operator};
use karpenter_core::resources::{Quantity, ResourceList, names};
use karpenter_core::scheduling::defaults::{Service, WorkloadKind, WorkloadSelector};
use karpenter_fake::catalog::{ZONE_1, ZONE_2, default_catalog};
use karpenter_fake::harness::{Cluster, node_pool};

const NS: &str = "default";

/// The topology suite's cluster: one pool with `capacity-type Exists`, optionally restricted to
/// `zones`, and a ReplicaSet `rs` selecting `test=test`.
fn cluster(zones: &[&str]) -> Cluster {
    let mut pool = node_pool("default", default_catalog());
    pool.requirements = vec![NodeSelectorRequirement::new(
        labels::CAPACITY_TYPE,
        Operator::Exists,
        Vec::<String>::new(),
    )];
    if !zones.is_empty() {
        pool.requirements.push(NodeSelectorRequirement::new(
            labels::ZONE,
            Operator::In,
            zones.iter().copied(),
        ));
    }
    let mut c = Cluster::new().with_node_pool(pool);
    c.workload_selectors
        .push(replica_set("rs", &[("test", "test")]));
    c
}

fn replica_set(name: &str, selector: &[(&str, &str)]) -> WorkloadSelector {
    WorkloadSelector {
        namespace: NS.into(),
        kind: WorkloadKind::ReplicaSet,
        name: name.into(),
        selector: LabelSelector::from_labels(selector.iter().copied()),
    }
}

fn owner(kind: &str, name: &str) -> Option<OwnerReference> {
    Some(
        OwnerReference::new(
            if kind == "Job" { "batch/v1" } else { "apps/v1" },
            kind,
            name,
        )
        .with_controller(true),
    )
}

/// `n` pods named `<prefix>-<i>` with `labels`, owned by ReplicaSet `rs`.
fn pods_of(prefix: &str, n: usize, labels: &[(&str, &str)], rs: &str) -> Vec<Pod> {
    (0..n)
        .map(|i| {
            let mut p = Pod::new(NS, format!("{prefix}-{i}"));
            p.labels = labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            p.owner = owner("ReplicaSet", rs);
            p
        })
        .collect()
}

/// `n` pods labelled `test=test`, owned by ReplicaSet `rs`.
fn pods(prefix: &str, n: usize) -> Vec<Pod> {
    pods_of(prefix, n, &[("test", "test")], "rs")
}

fn spread(key: &str) -> TopologySpreadConstraint {
    TopologySpreadConstraint::new(1, key, WhenUnsatisfiable::DoNotSchedule)
}

fn test_selector() -> LabelSelector {
    LabelSelector::from_labels([("test", "test")])
}

fn scheduled(round: &karpenter_fake::harness::Round, pods: &[Pod]) -> usize {
    pods.iter().filter(|p| round.scheduled(&p.key())).count()
}

#[test]
fn should_apply_default_zonal_spread_to_a_pod_that_declares_no_constraints_of_its_own() {
    let mut c = cluster(&[]);
    c.default_constraints = vec![spread(labels::ZONE)];
    let batch = pods("p", 4);
    let round = c.provision(batch.clone());
    assert_eq!(scheduled(&round, &batch), 4);
    assert_eq!(c.skew(labels::ZONE, &test_selector()), vec![1, 1, 2]);
}

#[test]
fn should_apply_default_hostname_spread_to_a_pod_that_declares_no_constraints_of_its_own() {
    let mut c = cluster(&[]);
    c.default_constraints = vec![spread(labels::HOSTNAME)];
    let batch = pods("p", 3);
    let round = c.provision(batch.clone());
    assert_eq!(scheduled(&round, &batch), 3);
    assert_eq!(c.skew(labels::HOSTNAME, &test_selector()), vec![1, 1, 1]);
}

#[test]
fn should_not_apply_the_default_to_a_pod_that_declares_its_own_constraints() {
    let mut c = cluster(&[]);
    c.default_constraints = vec![spread(labels::HOSTNAME)];
    let mut own = spread(labels::HOSTNAME);
    own.max_skew = 3;
    own.label_selector = Some(test_selector());
    let batch: Vec<Pod> = pods("p", 3)
        .into_iter()
        .map(|mut p| {
            p.topology_spread_constraints = vec![own.clone()];
            p
        })
        .collect();
    let round = c.provision(batch.clone());
    assert_eq!(scheduled(&round, &batch), 3);
    assert_eq!(c.skew(labels::HOSTNAME, &test_selector()), vec![3]);
}

#[test]
fn should_carry_min_domains_through_a_synthesized_default() {
    let mut c = cluster(&[ZONE_1, ZONE_2]);
    let mut default = spread(labels::ZONE);
    default.min_domains = Some(3);
    c.default_constraints = vec![default];
    // With minDomains 3 over two zones the global minimum stays 0, so no zone may hold more
    // than one pod; without it, the four pods would spread (2, 2).
    let batch = pods("p", 4);
    let round = c.provision(batch.clone());
    assert_eq!(scheduled(&round, &batch), 2);
    assert_eq!(c.skew(labels::ZONE, &test_selector()), vec![1, 1]);
}

#[test]
fn should_not_schedule_past_a_synthesized_do_not_schedule_default_that_cant_be_satisfied() {
    let mut c = cluster(&[ZONE_1]);
    let mut default = spread(labels::ZONE);
    default.min_domains = Some(3);
    c.default_constraints = vec![default];
    let batch = pods("p", 3);
    let round = c.provision(batch.clone());
    assert_eq!(scheduled(&round, &batch), 1);
    assert_eq!(c.skew(labels::ZONE, &test_selector()), vec![1]);
}

#[test]
fn should_relax_a_synthesized_schedule_anyway_default_when_it_cant_be_satisfied() {
    let mut c = cluster(&[ZONE_1]);
    let mut default = spread(labels::ZONE);
    default.min_domains = Some(3);
    default.when_unsatisfiable = WhenUnsatisfiable::ScheduleAnyway;
    c.default_constraints = vec![default];
    let batch = pods("p", 3);
    let round = c.provision(batch.clone());
    assert_eq!(scheduled(&round, &batch), 3);
    assert_eq!(c.skew(labels::ZONE, &test_selector()), vec![3]);
}

#[test]
fn should_be_a_no_op_when_no_default_constraints_are_configured() {
    let mut c = cluster(&[]);
    let batch = pods("p", 3);
    let round = c.provision(batch.clone());
    assert_eq!(scheduled(&round, &batch), 3);
    assert_eq!(round.launched.len(), 1);
    assert_eq!(c.skew(labels::HOSTNAME, &test_selector()), vec![3]);
}

#[test]
fn should_not_apply_the_default_to_a_pod_with_no_owner_and_no_matching_service() {
    let mut c = cluster(&[]);
    c.default_constraints = vec![spread(labels::HOSTNAME)];
    // A Service in the namespace that selects other pods does not count.
    c.services.push(Service {
        namespace: NS.into(),
        name: "other".into(),
        selector: Some([("app".to_string(), "other".to_string())].into()),
    });
    let batch: Vec<Pod> = pods("p", 3)
        .into_iter()
        .map(|mut p| {
            p.owner = None;
            p
        })
        .collect();
    let round = c.provision(batch.clone());
    assert_eq!(scheduled(&round, &batch), 3);
    assert_eq!(round.launched.len(), 1);
    assert_eq!(c.skew(labels::HOSTNAME, &test_selector()), vec![3]);
}

#[test]
fn should_count_pre_existing_cluster_pods_through_the_deduced_selector() {
    let mut c = cluster(&[ZONE_1, ZONE_2]);
    c.default_constraints = vec![spread(labels::ZONE)];
    let mut node = ClusterNode::new("existing");
    node.labels = [
        (labels::ZONE.to_string(), ZONE_1.to_string()),
        (labels::HOSTNAME.to_string(), "existing".to_string()),
    ]
    .into();
    let mut alloc = ResourceList::new();
    alloc.insert(names::CPU, Quantity::from_units(4));
    alloc.insert(names::MEMORY, Quantity::from_bytes(4 << 30));
    alloc.insert(names::PODS, Quantity::from_units(10));
    node.capacity = alloc.clone();
    node.allocatable = alloc;
    let running: Vec<Pod> = pods("running", 2)
        .into_iter()
        .map(|mut p| {
            p.phase = karpenter_core::model::PodPhase::Running;
            p
        })
        .collect();
    c.add_node_with_pods(node, running);

    let batch = pods("p", 2);
    let round = c.provision(batch.clone());
    assert_eq!(scheduled(&round, &batch), 2);
    for p in &batch {
        assert_eq!(
            round.node_of(&p.key()).unwrap().labels[labels::ZONE],
            ZONE_2
        );
    }
    assert_eq!(c.skew(labels::ZONE, &test_selector()), vec![2, 2]);
}

#[test]
fn should_spread_each_workload_independently() {
    let mut c = cluster(&[]);
    c.default_constraints = vec![spread(labels::HOSTNAME)];
    c.workload_selectors = vec![
        replica_set("rs-a", &[("app", "a")]),
        replica_set("rs-b", &[("app", "b")]),
    ];
    let mut batch = pods_of("a", 3, &[("app", "a")], "rs-a");
    batch.extend(pods_of("b", 3, &[("app", "b")], "rs-b"));
    let round = c.provision(batch.clone());
    assert_eq!(scheduled(&round, &batch), 6);
    for app in ["a", "b"] {
        let sel = LabelSelector::from_labels([("app", app)]);
        assert_eq!(c.skew(labels::HOSTNAME, &sel), vec![1, 1, 1], "app {app}");
    }
}

#[test]
fn should_spread_each_deployment_revision_independently() {
    let mut c = cluster(&[]);
    c.default_constraints = vec![spread(labels::HOSTNAME)];
    c.workload_selectors = vec![
        replica_set("web-h1", &[("app", "web"), ("pod-template-hash", "h1")]),
        replica_set("web-h2", &[("app", "web"), ("pod-template-hash", "h2")]),
    ];
    let mut batch = pods_of(
        "h1",
        3,
        &[("app", "web"), ("pod-template-hash", "h1")],
        "web-h1",
    );
    batch.extend(pods_of(
        "h2",
        3,
        &[("app", "web"), ("pod-template-hash", "h2")],
        "web-h2",
    ));
    let round = c.provision(batch.clone());
    assert_eq!(scheduled(&round, &batch), 6);
    for hash in ["h1", "h2"] {
        let sel = LabelSelector::from_labels([("pod-template-hash", hash)]);
        assert_eq!(
            c.skew(labels::HOSTNAME, &sel),
            vec![1, 1, 1],
            "revision {hash}"
        );
    }
}

#[test]
fn should_deduce_a_selector_from_a_matching_service_for_a_pod_with_no_supported_owner() {
    let mut c = cluster(&[]);
    c.default_constraints = vec![spread(labels::ZONE)];
    c.services.push(Service {
        namespace: NS.into(),
        name: "svc".into(),
        selector: Some([("test".to_string(), "test".to_string())].into()),
    });
    let batch: Vec<Pod> = pods("job", 4)
        .into_iter()
        .map(|mut p| {
            p.owner = owner("Job", "job");
            p
        })
        .collect();
    let round = c.provision(batch.clone());
    assert_eq!(scheduled(&round, &batch), 4);
    assert_eq!(c.skew(labels::ZONE, &test_selector()), vec![1, 1, 2]);
}

/// Not an upstream scenario: the defaults go to the solve's copies only; the cluster's pending
/// pods keep their (empty) constraints.
#[test]
fn defaults_are_injected_into_the_scheduling_copies_only() {
    let mut c = cluster(&[ZONE_1]);
    let mut default = spread(labels::ZONE);
    default.min_domains = Some(3);
    c.default_constraints = vec![default];
    let batch = pods("p", 3);
    c.provision(batch);
    assert_eq!(c.pending().len(), 2);
    assert!(
        c.pending()
            .iter()
            .all(|p| p.topology_spread_constraints.is_empty())
    );
    let input = c.scheduling_input();
    assert!(
        input
            .pods
            .iter()
            .all(|p| p.topology_spread_constraints.len() == 1)
    );
}

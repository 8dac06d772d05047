//! Solver unit tests on a small hand-built catalog. The upstream conformance scenarios live in
//! `karpenter-fake`'s integration tests, on upstream's own fake catalogs.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::labels;
use crate::model::{ClusterNode, DaemonSet, InstanceType, Offering, Overhead, Pod};
use crate::requirements::{NodeSelectorRequirement, Operator, Requirement, Requirements};
use crate::resources::{Quantity, ResourceList, names};
use crate::taints::{Taint, TaintEffect, Toleration, TolerationOperator};

use super::*;

fn q(s: &str) -> Quantity {
    Quantity::parse(s).expect("valid quantity")
}

fn rl(pairs: &[(&str, &str)]) -> ResourceList {
    pairs.iter().map(|(k, v)| (*k, q(v))).collect()
}

/// An instance type with cpu/memory/pods and one on-demand offering per zone at `price`.
fn it(name: &str, cpu: &str, mem: &str, pods: &str, price: f64, arch: &str) -> Arc<InstanceType> {
    let mut reqs = Requirements::new();
    reqs.add(Requirement::new(labels::ARCH, Operator::In, [arch]));
    reqs.add(Requirement::new(labels::OS, Operator::In, ["linux"]));
    let offerings = ["zone-a", "zone-b"]
        .iter()
        .flat_map(|z| {
            [
                Offering::new(*z, labels::CAPACITY_TYPE_ON_DEMAND, price),
                Offering::new(*z, labels::CAPACITY_TYPE_SPOT, price * 0.5),
            ]
        })
        .collect();
    Arc::new(InstanceType::new(
        name,
        reqs,
        offerings,
        rl(&[("cpu", cpu), ("memory", mem), ("pods", pods)]),
        Overhead {
            kube_reserved: rl(&[("cpu", "100m"), ("memory", "100Mi")]),
            ..Overhead::default()
        },
    ))
}

pub(super) fn catalog() -> Vec<Arc<InstanceType>> {
    vec![
        it("small", "2", "4Gi", "10", 0.1, "amd64"),
        it("medium", "4", "8Gi", "20", 0.2, "amd64"),
        it("large", "8", "16Gi", "40", 0.4, "amd64"),
        it("arm-large", "8", "16Gi", "40", 0.3, "arm64"),
    ]
}

pub(super) fn pool(name: &str) -> NodePoolInput {
    NodePoolInput {
        name: name.to_string(),
        weight: 0,
        requirements: vec![],
        labels: BTreeMap::new(),
        taints: vec![],
        startup_taints: vec![],
        node_class_label: None,
        limits: ResourceList::new(),
        instance_types: catalog(),
        packing: None,
    }
}

fn pod(name: &str, cpu: &str, mem: &str) -> Pod {
    let mut p = Pod::new("default", name);
    p.requests = rl(&[("cpu", cpu), ("memory", mem)]);
    p
}

fn input(pools: Vec<NodePoolInput>, pods: Vec<Pod>) -> SchedulingInput {
    SchedulingInput {
        node_pools: pools,
        pods,
        ..SchedulingInput::default()
    }
}

#[test]
fn packs_pods_onto_the_cheapest_sufficient_type() {
    let pods = (0..3).map(|i| pod(&format!("p{i}"), "1", "1Gi")).collect();
    let r = solve(
        &input(vec![pool("default")], pods),
        &SchedulerOptions::default(),
    );
    assert!(r.pod_errors.is_empty(), "{:?}", r.pod_errors);
    assert_eq!(r.new_node_claims.len(), 1);
    let claim = &r.new_node_claims[0];
    assert_eq!(claim.pods.len(), 3);
    // 3 cpu do not fit "small" (1.9 cpu allocatable). Options are ordered by their cheapest
    // compatible offering: spot at half price makes medium 0.10, arm-large 0.15, large 0.20.
    let names: Vec<&str> = claim.instance_types.iter().map(|t| t.name()).collect();
    assert_eq!(names, ["medium", "arm-large", "large"]);
    assert_eq!(claim.requests.get_or_zero(names::CPU), q("3"));
    assert_eq!(claim.requests.get_or_zero(names::PODS), q("3"));
    assert_eq!(
        claim.labels.get(labels::NODEPOOL).map(String::as_str),
        Some("default")
    );
    assert!(!claim.requirements.has(labels::HOSTNAME));
    assert!(!claim.requirements.has(labels::REGISTERED));
}

#[test]
fn queue_orders_largest_first_and_claims_fill_least_loaded_first() {
    // Two 7-cpu pods need separate large nodes; the small pods go to the least-loaded claim.
    let pods = vec![
        pod("small-0", "500m", "100Mi"),
        pod("big-0", "7", "1Gi"),
        pod("big-1", "7", "1Gi"),
        pod("small-1", "500m", "100Mi"),
    ];
    let r = solve(
        &input(vec![pool("default")], pods),
        &SchedulerOptions::default(),
    );
    assert!(r.pod_errors.is_empty(), "{:?}", r.pod_errors);
    assert_eq!(r.new_node_claims.len(), 2);
    assert_eq!(
        r.new_node_claims[0].pods,
        ["default/big-0", "default/small-0"]
    );
    assert_eq!(
        r.new_node_claims[1].pods,
        ["default/big-1", "default/small-1"]
    );
}

#[test]
fn unschedulable_pod_gets_a_resource_reason() {
    let r = solve(
        &input(vec![pool("default")], vec![pod("huge", "200", "1Gi")]),
        &SchedulerOptions::default(),
    );
    let err = &r.pod_errors["default/huge"];
    assert_eq!(err.kind, PodErrorKind::InstanceTypes);
    assert!(
        err.message
            .contains("no instance type has enough resources"),
        "{}",
        err.message
    );
    assert!(err.message.contains("cpu=200"), "{}", err.message);
}

#[test]
fn existing_nodes_are_used_first() {
    let mut node = ClusterNode::new("node-1");
    node.allocatable = rl(&[("cpu", "4"), ("memory", "8Gi"), ("pods", "10")]);
    node.labels
        .insert(labels::ARCH.to_string(), "amd64".to_string());
    let mut inp = input(vec![pool("default")], vec![pod("a", "1", "1Gi")]);
    inp.existing_nodes.push(ExistingNodeInput {
        node,
        pods: vec![],
        volume_limits: Default::default(),
    });
    let r = solve(&inp, &SchedulerOptions::default());
    assert!(r.new_node_claims.is_empty());
    assert_eq!(r.existing_nodes.len(), 1);
    assert_eq!(r.existing_nodes[0].pods, ["default/a"]);
}

#[test]
fn taints_must_be_tolerated() {
    let mut p = pool("tainted");
    p.taints = vec![Taint::new("dedicated", "gpu", TaintEffect::NoSchedule)];
    let r = solve(
        &input(vec![p.clone()], vec![pod("a", "1", "1Gi")]),
        &SchedulerOptions::default(),
    );
    assert_eq!(r.pod_errors["default/a"].kind, PodErrorKind::Taints);
    assert!(r.pod_errors["default/a"].message.contains("dedicated=gpu"));
    let mut tolerant = pod("b", "1", "1Gi");
    tolerant.tolerations.push(Toleration {
        key: "dedicated".into(),
        operator: Some(TolerationOperator::Exists),
        ..Toleration::default()
    });
    let r = solve(
        &input(vec![p], vec![tolerant]),
        &SchedulerOptions::default(),
    );
    assert!(r.pod_errors.is_empty());
    assert_eq!(r.new_node_claims[0].taints.len(), 1);
}

#[test]
fn weights_order_templates_and_requirements_select_arch() {
    let mut arm = pool("arm");
    arm.weight = 10;
    arm.requirements = vec![NodeSelectorRequirement::new(
        labels::ARCH,
        Operator::In,
        ["arm64"],
    )];
    let r = solve(
        &input(vec![pool("default"), arm], vec![pod("a", "1", "1Gi")]),
        &SchedulerOptions::default(),
    );
    assert_eq!(r.new_node_claims[0].node_pool, "arm");
    let mut amd = pod("b", "1", "1Gi");
    amd.node_selector
        .insert(labels::ARCH.to_string(), "amd64".to_string());
    let mut arm = pool("arm");
    arm.weight = 10;
    arm.requirements = vec![NodeSelectorRequirement::new(
        labels::ARCH,
        Operator::In,
        ["arm64"],
    )];
    let r = solve(
        &input(vec![pool("default"), arm], vec![amd]),
        &SchedulerOptions::default(),
    );
    assert_eq!(r.new_node_claims[0].node_pool, "default");
}

#[test]
fn limits_cap_new_capacity() {
    let mut p = pool("limited");
    p.limits = rl(&[("cpu", "8")]);
    let pods = (0..3).map(|i| pod(&format!("p{i}"), "3", "1Gi")).collect();
    let r = solve(&input(vec![p], pods), &SchedulerOptions::default());
    // The first claim may become a large (8 cpu), exhausting the limit pessimistically.
    assert_eq!(r.new_node_claims.len(), 1);
    assert_eq!(r.pod_errors.len(), 1);
    let err = r.pod_errors.values().next().expect("one error");
    assert_eq!(err.kind, PodErrorKind::Limits);
    assert!(err.message.contains("exceed limits"), "{}", err.message);

    let mut p = pool("nodes");
    p.limits = rl(&[("nodes", "1")]);
    let mut inp = input(vec![p], vec![pod("a", "7", "1Gi")]);
    let mut node = ClusterNode::new("n");
    node.labels
        .insert(labels::NODEPOOL.to_string(), "nodes".to_string());
    node.managed = true;
    inp.existing_nodes.push(ExistingNodeInput {
        node,
        pods: vec![],
        volume_limits: Default::default(),
    });
    let r = solve(&inp, &SchedulerOptions::default());
    assert!(
        r.pod_errors["default/a"]
            .message
            .contains("node limits have been exhausted")
    );
}

#[test]
fn daemonset_overhead_is_counted_per_instance_type() {
    let mut ds_pod = pod("ds", "1", "1Gi");
    ds_pod.owner = Some(crate::model::OwnerReference {
        api_version: "apps/v1".into(),
        kind: "DaemonSet".into(),
        name: "ds".into(),
        controller: true,
    });
    let mut inp = input(vec![pool("default")], vec![pod("a", "1", "1Gi")]);
    inp.daemonsets.push(DaemonSet {
        namespace: "default".into(),
        name: "ds".into(),
        pod: ds_pod,
    });
    let r = solve(&inp, &SchedulerOptions::default());
    let claim = &r.new_node_claims[0];
    // 1 + 1 cpu + 2 pods do not fit small (1.9 cpu).
    assert!(claim.instance_types.iter().all(|t| t.name() != "small"));
    assert_eq!(claim.requests.get_or_zero(names::CPU), q("2"));
    assert_eq!(claim.requests.get_or_zero(names::PODS), q("2"));
}

#[test]
fn restricted_selectors_are_rejected_before_scheduling() {
    let mut p = pod("a", "1", "1Gi");
    p.node_selector
        .insert(labels::HOSTNAME.to_string(), "x".to_string());
    let r = solve(
        &input(vec![pool("default")], vec![p]),
        &SchedulerOptions::default(),
    );
    assert_eq!(r.pod_errors["default/a"].kind, PodErrorKind::Invalid);
}

#[test]
fn host_ports_separate_pods() {
    let mut a = pod("a", "100m", "10Mi");
    a.host_ports = vec![crate::hostports::HostPort::new("", 8080, "TCP")];
    let mut b = pod("b", "100m", "10Mi");
    b.host_ports = a.host_ports.clone();
    let r = solve(
        &input(vec![pool("default")], vec![a, b]),
        &SchedulerOptions::default(),
    );
    assert_eq!(r.new_node_claims.len(), 2);
}

#[test]
fn solve_is_deterministic() {
    let pods: Vec<Pod> = (0..50)
        .map(|i| pod(&format!("p{i:02}"), ["100m", "1", "2"][i % 3], "256Mi"))
        .collect();
    let inp = input(vec![pool("default")], pods);
    let a = solve(&inp, &SchedulerOptions::default());
    let b = solve(&inp, &SchedulerOptions::default());
    assert_eq!(
        format!("{:?}", a.new_node_claims),
        format!("{:?}", b.new_node_claims)
    );
    assert_eq!(a.pod_errors, b.pod_errors);
}

//! `suite_test.go` › No Pre-Binding (upstream `suite_test.go`): pods provisioned without binding
//! stay pending and take part in later rounds.

use karpenter_core::labels;
use karpenter_core::resources::{ResourceList, names};
use karpenter_fake::catalog::{VENDOR_A_RESOURCE, VENDOR_B_RESOURCE};

use crate::suite_kit::*;

#[test]
fn should_not_bind_pods_to_nodes() {
    let mut c = suite_cluster();
    let mut unbound = Unbound::default();
    assert_eq!(c.node_count(), 0);
    unbound.provision(&mut c, vec![pod("a").cpu("10m")]);
    assert!(c.node_of(&key("a")).is_none());
    assert_eq!(c.node_count(), 1);
    unbound.provision(&mut c, vec![pod("b").cpu("10m")]);
    assert!(c.node_of(&key("b")).is_none());
    // The second pod fits the in-flight node: no second node.
    assert_eq!(c.node_count(), 1);
}

/// What cluster state reports as an uninitialized managed node's allocatable (upstream
/// `StateNode.Allocatable()`): the Node's status, with zero or missing quantities taken from
/// the NodeClaim's status. `ClusterNode` carries one allocatable list, so whoever builds it
/// applies this rule; the scenario checks the scheduler with the state's view.
fn state_allocatable(node_status: &ResourceList, node_claim_status: &ResourceList) -> ResourceList {
    let mut out = node_status.clone();
    for (name, q) in node_claim_status.iter() {
        if out.get(name).is_none_or(|v| v.is_zero()) {
            out.insert(name, q);
        }
    }
    out
}

#[test]
fn should_handle_resource_zeroing_of_extended_resources_by_kubelet() {
    let mut c = suite_cluster();
    let mut unbound = Unbound::default();
    let gpu_pod = |name: &str| pod(name).cpu("10m").request(VENDOR_A_RESOURCE, "1");
    unbound.provision(&mut c, vec![gpu_pod("a")]);
    assert_eq!(c.node_count(), 1);
    let name = c.nodes().next().expect("node").name.clone();
    let claim_allocatable = c.node(&name).expect("node").allocatable.clone();
    // The kubelet zeroes the extended resources at startup.
    let zeroed_capacity = resources(&[(VENDOR_A_RESOURCE, "0")]);
    let zeroed_allocatable = resources(&[(VENDOR_B_RESOURCE, "0")]);
    let node = c.node_mut(&name).expect("node");
    node.capacity = state_allocatable(&zeroed_capacity, &node.capacity.clone());
    node.allocatable = state_allocatable(&zeroed_allocatable, &claim_allocatable);
    assert_eq!(
        node.allocatable.get(VENDOR_A_RESOURCE),
        claim_allocatable.get(VENDOR_A_RESOURCE)
    );
    unbound.provision(&mut c, vec![gpu_pod("b")]);
    // Both pods fit the in-flight node's NodeClaim capacity: no second node.
    assert_eq!(c.node_count(), 1);
    assert!(
        !c.node(&name)
            .expect("node")
            .allocatable
            .get_or_zero(names::CPU)
            .is_zero()
    );
}

#[test]
fn should_respect_self_pod_affinity_without_pod_binding_zone() {
    let mut c = suite_cluster();
    let mut unbound = Unbound::default();
    let aff = [("security", "s2")];
    let affine = |name: &str| {
        pod(name)
            .label("security", "s2")
            .affinity(&aff, labels::ZONE)
    };
    unbound.provision(&mut c, vec![affine("a")]);
    assert_eq!(c.node_count(), 1);
    // The second pod can go to the in-flight node: self-affinity takes the existing node's
    // domain rather than any viable domain.
    unbound.provision(&mut c, vec![affine("b")]);
    assert_eq!(c.node_count(), 1);
}

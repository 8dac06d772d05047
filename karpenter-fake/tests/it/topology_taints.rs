//! Ported `topology_test.go` (upstream `topology_test.go`): Describe "Taints" (pool
//! `karpenter.sh/capacity-type Exists`).

use karpenter_core::taints::{TaintEffect, TolerationOperator};

use crate::topology_support::*;

#[test]
fn should_taint_nodes_with_nodepool_taints() {
    let mut c = topology_cluster();
    let taint = no_schedule("test", "bar");
    c.node_pool_mut("default").unwrap().taints = vec![taint.clone()];
    let p = pod()
        .toleration(toleration(
            "",
            TolerationOperator::Exists,
            "",
            Some(TaintEffect::NoSchedule),
        ))
        .build();
    let round = c.provision(vec![p.clone()]);
    assert!(round.scheduled(&p.key()));
    assert!(node_of(&c, &p).taints.contains(&taint));
}

#[test]
fn should_schedule_pods_that_tolerate_nodepool_constraints() {
    let mut c = topology_cluster();
    c.node_pool_mut("default").unwrap().taints = vec![no_schedule("test-key", "test-value")];
    let tolerating = vec![
        pod()
            .toleration(toleration(
                "test-key",
                TolerationOperator::Exists,
                "",
                Some(TaintEffect::NoSchedule),
            ))
            .build(),
        pod()
            .toleration(toleration(
                "test-key",
                TolerationOperator::Equal,
                "test-value",
                Some(TaintEffect::NoSchedule),
            ))
            .build(),
    ];
    let round = c.provision(tolerating.clone());
    assert_all_scheduled(&round, &tolerating);
    let others = vec![
        // Missing toleration.
        pod().build(),
        // Key mismatch with Exists.
        pod()
            .toleration(toleration("invalid", TolerationOperator::Exists, "", None))
            .build(),
        // Value mismatch.
        pod()
            .toleration(toleration(
                "test-key",
                TolerationOperator::Equal,
                "",
                Some(TaintEffect::NoSchedule),
            ))
            .build(),
    ];
    let round = c.provision(others.clone());
    assert_none_scheduled(&round, &others);
}

#[test]
fn should_provision_nodes_with_taints_and_schedule_pods_if_the_taint_is_only_a_startup_taint() {
    let mut c = topology_cluster();
    c.node_pool_mut("default").unwrap().startup_taints =
        vec![no_schedule("ignore-me", "nothing-to-see-here")];
    let p = pod().build();
    assert!(c.provision(vec![p.clone()]).scheduled(&p.key()));
}

/// Upstream expects the node's single default taint; the harness's nodes carry no default
/// taint (the unregistered taint is removed at registration), so the assertion is that the
/// pod's `Exists` toleration generated no taint at all.
#[test]
fn should_not_generate_taints_for_op_exists() {
    let mut c = topology_cluster();
    let p = pod()
        .toleration(toleration(
            "test-key",
            TolerationOperator::Exists,
            "",
            Some(TaintEffect::NoExecute),
        ))
        .build();
    let round = c.provision(vec![p.clone()]);
    assert!(round.scheduled(&p.key()));
    assert!(node_of(&c, &p).taints.is_empty());
}

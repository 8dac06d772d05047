//! `suite_test.go` › NodePool requirements instance filtering (upstream `suite_test.go`,
//! `NewScheduler`, `Scheduler.add`).

use karpenter_core::labels;
use karpenter_core::requirements::NodeSelectorRequirement;
use karpenter_core::requirements::Operator::In;
use karpenter_fake::harness::{Cluster, Round};

use crate::suite_kit::*;

const FILTERED: &str = "nodepool requirements filtered out all available instance types";

/// Upstream `test.ReplaceRequirements`: drops the pool's requirements on the given keys, then
/// appends the given requirements.
fn replace_requirements(c: &mut Cluster, reqs: &[NodeSelectorRequirement]) {
    let pool = c.node_pool_mut("default").expect("default pool");
    pool.requirements
        .retain(|r| !reqs.iter().any(|n| n.key == r.key));
    pool.requirements.extend(reqs.iter().cloned());
}

fn assert_filtered_errors(round: &Round, count: usize) {
    assert_eq!(
        round.results.pod_errors.len(),
        count,
        "{:?}",
        round.results.pod_errors
    );
    for (pod, err) in &round.results.pod_errors {
        assert!(!round.scheduled(pod));
        assert!(err.message.contains(FILTERED), "{pod}: {}", err.message);
    }
}

#[test]
fn should_return_appropriate_pod_error_when_no_available_instance_types_exist() {
    let mut c = suite_cluster();
    let round = c.provision(vec![pod("normal")]);
    assert!(round.scheduled(&key("normal")));
    replace_requirements(
        &mut c,
        &[req(
            labels::INSTANCE_TYPE,
            In,
            &["non-existent-instance-type"],
        )],
    );
    // Too big for the existing node, and no instance type is left.
    let round = c.provision(vec![pod("test-pod-filtered").cpu("32").memory("256Gi")]);
    assert_filtered_errors(&round, 1);
}

#[test]
fn should_handle_multiple_pods_when_requirements_filter_out_all_instance_types() {
    let mut c = suite_cluster();
    replace_requirements(&mut c, &[req(labels::ARCH, In, &["non-existent-arch"])]);
    let round = c.provision(vec![pod("pod-1"), pod("pod-2"), pod("pod-3")]);
    assert_filtered_errors(&round, 3);
}

#[test]
fn should_handle_conflicting_requirements_that_eliminate_all_instance_types() {
    let mut c = suite_cluster();
    replace_requirements(
        &mut c,
        &[
            req(labels::ARCH, In, &["amd64"]),
            req(labels::ARCH, In, &["arm64"]),
        ],
    );
    let round = c.provision(vec![pod("conflicting-requirements-pod")]);
    assert_filtered_errors(&round, 1);
}

#[test]
fn should_handle_zone_requirements_that_filter_out_all_instance_types() {
    let mut c = suite_cluster();
    replace_requirements(
        &mut c,
        &[req(
            labels::ZONE,
            In,
            &["non-existent-zone-1", "non-existent-zone-2"],
        )],
    );
    let round = c.provision(vec![pod("zone-filtered-pod")]);
    assert_filtered_errors(&round, 1);
}

//! `suite_test.go` › Instance Type Compatibility (+ Provider Specific Labels).

use karpenter_core::labels;
use karpenter_core::requirements::Operator::{DoesNotExist, Exists, In};
use karpenter_fake::catalog::{self, SIZE_LABEL, SPECIAL_LABEL};
use karpenter_fake::harness::Cluster;

use crate::suite_kit::*;

/// The suite pool with its requirements replaced by `kubernetes.io/arch In [archs]`.
fn arch_pool(archs: &[&str]) -> Cluster {
    let mut pool = suite_pool();
    pool.requirements = vec![req(labels::ARCH, In, archs)];
    cluster_with(pool)
}

const BOTH_ARCHS: [&str; 2] = ["arm64", "amd64"];

#[test]
fn should_not_schedule_if_requesting_more_resources_than_any_instance_type_has() {
    let mut c = suite_cluster();
    let round = c.provision(vec![pod("a").cpu("512")]);
    assert_not_scheduled(&round, &key("a"));
}

#[test]
fn should_launch_pods_with_different_archs_on_different_instances() {
    let mut c = arch_pool(&BOTH_ARCHS);
    let pods = vec![
        pod("amd").selector(labels::ARCH, "amd64"),
        pod("arm").selector(labels::ARCH, "arm64"),
    ];
    let round = c.provision(pods.clone());
    assert_eq!(distinct_nodes(&round, &pods).len(), 2);
}

#[test]
fn should_exclude_instance_types_that_are_not_supported_by_the_pod_constraints_node_affinity_instance_type()
 {
    let mut c = arch_pool(&["amd64"]);
    let p = pod("a").require(labels::INSTANCE_TYPE, In, &["arm-instance-type"]);
    let round = c.provision(vec![p]);
    // The arm instance type conflicts with the pool's amd64-only requirement.
    assert_not_scheduled(&round, &key("a"));
}

#[test]
fn should_exclude_instance_types_that_are_not_supported_by_the_pod_constraints_node_affinity_operating_system()
 {
    let mut c = arch_pool(&["amd64"]);
    let round = c.provision(vec![pod("a").require(labels::OS, In, &["ios"])]);
    // Only the arm instance type runs ios, and the pool excludes arm64.
    assert_not_scheduled(&round, &key("a"));
}

#[test]
fn should_exclude_instance_types_that_are_not_supported_by_the_provider_constraints_arch() {
    let mut c = arch_pool(&["amd64"]);
    // Limits only: requests default to the limits (14 cpu), which only the arm type offers.
    let round = c.provision(vec![pod("a").cpu("14")]);
    assert_not_scheduled(&round, &key("a"));
}

#[test]
fn should_launch_pods_with_different_operating_systems_on_different_instances() {
    let mut c = arch_pool(&BOTH_ARCHS);
    let pods = vec![
        pod("linux").selector(labels::OS, "linux"),
        pod("windows").selector(labels::OS, "windows"),
    ];
    let round = c.provision(pods.clone());
    assert_eq!(distinct_nodes(&round, &pods).len(), 2);
}

#[test]
fn should_launch_pods_with_different_instance_type_node_selectors_on_different_instances() {
    let mut c = arch_pool(&BOTH_ARCHS);
    let pods = vec![
        // The beta label is normalized to node.kubernetes.io/instance-type.
        pod("beta").selector("beta.kubernetes.io/instance-type", "small-instance-type"),
        pod("stable").selector(labels::INSTANCE_TYPE, "default-instance-type"),
    ];
    let round = c.provision(pods.clone());
    assert_eq!(distinct_nodes(&round, &pods).len(), 2);
    assert_eq!(
        instance_type(&node_of(&round, &key("beta"))),
        "small-instance-type"
    );
    assert_eq!(
        instance_type(&node_of(&round, &key("stable"))),
        "default-instance-type"
    );
}

#[test]
fn should_launch_pods_with_different_zone_selectors_on_different_instances() {
    let mut c = arch_pool(&BOTH_ARCHS);
    let pods = vec![
        pod("z1").selector(labels::ZONE, "test-zone-1"),
        pod("z2").selector(labels::ZONE, "test-zone-2"),
    ];
    let round = c.provision(pods.clone());
    assert_eq!(distinct_nodes(&round, &pods).len(), 2);
}

const GPU_1: &str = "karpenter.sh/super-great-gpu";
const GPU_2: &str = "karpenter.sh/even-better-gpu";

/// `InstanceTypes(5)` where type 0 has 25 of [`GPU_1`] and type 1 has 25 of [`GPU_2`].
fn gpu_cluster() -> Cluster {
    let mut types = catalog::instance_types(5);
    types[0] = with_extra_capacity(&types[0], &[(GPU_1, "25")]);
    types[1] = with_extra_capacity(&types[1], &[(GPU_2, "25")]);
    let mut pool = suite_pool();
    pool.instance_types = types;
    cluster_with(pool)
}

#[test]
fn should_launch_pods_with_resources_that_arent_on_any_single_instance_type_on_different_instances()
{
    let mut c = gpu_cluster();
    let pods = vec![
        pod("gpu1").request(GPU_1, "1"),
        pod("gpu2").request(GPU_2, "1"),
    ];
    let round = c.provision(pods.clone());
    assert_eq!(distinct_nodes(&round, &pods).len(), 2);
}

#[test]
fn should_fail_to_schedule_a_pod_with_resources_requests_that_arent_on_a_single_instance_type() {
    let mut c = gpu_cluster();
    let round = c.provision(vec![pod("a").request(GPU_1, "1").request(GPU_2, "1")]);
    assert_not_scheduled(&round, &key("a"));
}

mod provider_specific_labels {
    use super::*;

    fn fake_it_cluster() -> Cluster {
        let mut pool = suite_pool();
        pool.instance_types = catalog::instance_types(5);
        cluster_with(pool)
    }

    #[test]
    fn should_filter_instance_types_that_match_labels() {
        let mut c = fake_it_cluster();
        let round = c.provision(vec![
            pod("large").selector(SIZE_LABEL, "large"),
            pod("small").selector(SIZE_LABEL, "small"),
        ]);
        assert_eq!(instance_type(&node_of(&round, &key("large"))), "fake-it-4");
        assert_eq!(instance_type(&node_of(&round, &key("small"))), "fake-it-0");
    }

    #[test]
    fn should_not_schedule_with_incompatible_labels() {
        let mut c = fake_it_cluster();
        let round = c.provision(vec![
            pod("a")
                .selector(SIZE_LABEL, "large")
                .selector(labels::INSTANCE_TYPE, "fake-it-0"),
            pod("b")
                .selector(SIZE_LABEL, "small")
                .selector(labels::INSTANCE_TYPE, "fake-it-4"),
        ]);
        assert_not_scheduled(&round, &key("a"));
        assert_not_scheduled(&round, &key("b"));
    }

    #[test]
    fn should_schedule_optional_labels() {
        let mut c = fake_it_cluster();
        let round = c.provision(vec![pod("a").require(SPECIAL_LABEL, Exists, &[])]);
        let node = node_of(&round, &key("a"));
        assert!(node.labels.contains_key(SPECIAL_LABEL));
        assert_eq!(instance_type(&node), "fake-it-4");
    }

    #[test]
    fn should_schedule_without_optional_labels_if_disallowed() {
        // A fresh default NodePool (no requirements).
        let mut c = Cluster::new().with_node_pool(karpenter_fake::harness::node_pool(
            "default",
            catalog::instance_types(5),
        ));
        let round = c.provision(vec![pod("a").require(SPECIAL_LABEL, DoesNotExist, &[])]);
        assert!(
            !node_of(&round, &key("a"))
                .labels
                .contains_key(SPECIAL_LABEL)
        );
    }
}

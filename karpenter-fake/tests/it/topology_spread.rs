//! Ported `topology_test.go` (upstream `topology_test.go`): the top-level "Topology" scenarios and
//! the Contexts "Zonal", "Hostname" and "CapacityType".
//!
//! Upstream's `test.Pod` pods without a node name are not "provisionable" (they lack the
//! `PodScheduled=False/Unschedulable` condition), so the provisioner never sees them: the
//! scenarios that list such pods as "ignored, pending" simply do not pass them to a round.

use karpenter_core::labels::{ARCH, CAPACITY_TYPE, HOSTNAME, INSTANCE_TYPE, ZONE};
use karpenter_core::model::PodPhase;
use karpenter_fake::harness::Cluster;

use crate::topology_support::*;

/// Existing nodes of the "only count running/scheduled pods" scenarios: two with a domain of
/// `key` and one without, no allocatable, with their bound pods (unlabelled, other-namespace,
/// failed, succeeded and terminating pods included: none of them counts). Returns the cluster.
fn counting_cluster(key: &str, first: &str, second: &str) -> Cluster {
    let mut c = topology_cluster();
    let no_resources = resources(&[]);
    let wrong_namespace = "wrong-namespace";
    let mut terminating = pod().test_labels().build();
    terminating.deletion_timestamp = Some(karpenter_core::model::Timestamp::UNIX_EPOCH);
    c.add_node_with_pods(
        existing_node("first", &[(key, first)], Vec::new(), no_resources.clone()),
        vec![
            pod().build(),                                          // ignored: missing labels
            pod().test_labels().namespace(wrong_namespace).build(), // ignored: wrong namespace
            pod().test_labels().phase(PodPhase::Failed).build(),    // ignored: Failed
            pod().test_labels().phase(PodPhase::Succeeded).build(), // ignored: Succeeded
            terminating,                                            // ignored: terminating
            pod().test_labels().build(),
            pod().test_labels().build(),
        ],
    );
    c.add_node_with_pods(
        existing_node("second", &[(key, second)], Vec::new(), no_resources.clone()),
        vec![pod().test_labels().build()],
    );
    c.add_node_with_pods(
        existing_node("third", &[], Vec::new(), no_resources), // ignored: no domain
        vec![pod().test_labels().build()],
    );
    c
}

/// Describe "Topology" (top-level Its).
mod topology {
    use super::*;

    #[test]
    fn should_ignore_unknown_topology_keys() {
        let mut c = topology_cluster();
        let constrained = pod()
            .test_labels()
            .spread(test_spread("unknown", 1))
            .build();
        let plain = pod().build();
        let round = c.provision(vec![constrained.clone(), plain.clone()]);
        assert_topology_error(&round, &constrained);
        assert!(round.scheduled(&plain.key()));
    }

    /// Upstream skips this on Kubernetes ≥ 1.24 (admission rejects the selector); an invalid
    /// selector selects nothing, so the spread never constrains.
    #[test]
    fn should_not_spread_an_invalid_label_selector() {
        let mut c = topology_cluster();
        let tsc = spread(
            ZONE,
            1,
            Some(selector(&[("app.kubernetes.io/name", "{{ zqfmgb }}")])),
        );
        c.provision(spread_pods(2, &[tsc]));
        assert_eq!(c.skew(ZONE, &test_selector()), vec![2]);
    }

    #[test]
    fn should_not_spread_when_a_nil_label_selector_is_defined() {
        let mut c = topology_cluster();
        c.provision(spread_pods(2, &[spread(ZONE, 1, None)]));
        assert_eq!(c.skew(ZONE, &everything()), vec![2]);
    }
}

/// Context "Zonal".
mod zonal {
    use super::*;

    fn zonal() -> karpenter_core::model::TopologySpreadConstraint {
        test_spread(ZONE, 1)
    }

    #[test]
    fn should_balance_pods_across_zones_match_labels() {
        let mut c = topology_cluster();
        c.provision(spread_pods(4, &[zonal()]));
        assert_eq!(c.skew(ZONE, &test_selector()), vec![1, 1, 2]);
    }

    #[test]
    fn should_balance_pods_across_zones_match_expressions() {
        let mut c = topology_cluster();
        let sel = selector_in("test", &["test"]);
        c.provision(spread_pods(4, &[spread(ZONE, 1, Some(sel.clone()))]));
        assert_eq!(c.skew(ZONE, &sel), vec![1, 1, 2]);
    }

    #[test]
    fn should_respect_nodepool_zonal_constraints() {
        let mut c = topology_cluster();
        set_requirements(
            &mut c,
            "default",
            vec![req_in(ZONE, &["test-zone-1", "test-zone-2", "test-zone-3"])],
        );
        c.provision(spread_pods(4, &[zonal()]));
        assert_eq!(c.skew(ZONE, &test_selector()), vec![1, 1, 2]);
    }

    #[test]
    fn should_respect_nodepool_zonal_constraints_subset_with_requirements() {
        let mut c = topology_cluster();
        set_requirements(
            &mut c,
            "default",
            vec![req_in(ZONE, &["test-zone-1", "test-zone-2"])],
        );
        c.provision(spread_pods(4, &[zonal()]));
        assert_eq!(c.skew(ZONE, &test_selector()), vec![2, 2]);
    }

    #[test]
    fn should_respect_nodepool_zonal_constraints_subset_with_labels() {
        let mut c = topology_cluster();
        c.node_pool_mut("default")
            .unwrap()
            .labels
            .insert(ZONE.into(), "test-zone-1".into());
        c.provision(spread_pods(4, &[zonal()]));
        assert_eq!(c.skew(ZONE, &test_selector()), vec![4]);
    }

    #[test]
    fn should_respect_nodepool_zonal_constraints_subset_with_requirements_and_labels() {
        let mut c = topology_cluster();
        set_requirements(
            &mut c,
            "default",
            vec![req_in(ZONE, &["test-zone-1", "test-zone-2"])],
        );
        c.node_pool_mut("default")
            .unwrap()
            .labels
            .insert(ZONE.into(), "test-zone-1".into());
        c.provision(spread_pods(4, &[zonal()]));
        assert_eq!(c.skew(ZONE, &test_selector()), vec![4]);
    }

    #[test]
    fn should_respect_nodepool_zonal_constraints_subset_with_labels_across_nodepools() {
        let mut c = topology_cluster();
        set_requirements(
            &mut c,
            "default",
            vec![req_in(ZONE, &["test-zone-1", "test-zone-2"])],
        );
        c.node_pool_mut("default")
            .unwrap()
            .labels
            .insert(ZONE.into(), "test-zone-1".into());
        let mut second = topology_pool("second");
        second.requirements.clear();
        second.labels.insert(ZONE.into(), "test-zone-2".into());
        c.add_node_pool(second);
        c.provision(spread_pods(4, &[zonal()]));
        assert_eq!(c.skew(ZONE, &test_selector()), vec![2, 2]);
    }

    #[test]
    fn should_respect_nodepool_zonal_constraints_existing_pod() {
        let mut c = topology_cluster();
        let first = pod()
            .test_labels()
            .cpu("1.1")
            .node_selector(ZONE, "test-zone-3")
            .build();
        assert!(c.provision(vec![first.clone()]).scheduled(&first.key()));
        set_requirements(
            &mut c,
            "default",
            vec![req_in(ZONE, &["test-zone-1", "test-zone-2"])],
        );
        c.provision(pods(6, |p| p.test_labels().cpu("1.1").spread(zonal())));
        // Zone-3 holds one pod and cannot be used: at most two per other zone.
        assert_eq!(c.skew(ZONE, &test_selector()), vec![1, 2, 2]);
    }

    #[test]
    fn should_schedule_to_the_non_minimum_domain_if_its_all_thats_available() {
        let mut c = topology_cluster();
        let tsc = test_spread(ZONE, 5);
        let make = |n| pods(n, |p| p.test_labels().cpu("1.1").spread(tsc.clone()));
        set_requirements(&mut c, "default", vec![req_in(ZONE, &["test-zone-1"])]);
        c.provision(make(1));
        assert_eq!(c.skew(ZONE, &test_selector()), vec![1]);
        set_requirements(&mut c, "default", vec![req_in(ZONE, &["test-zone-2"])]);
        c.provision(make(1));
        assert_eq!(c.skew(ZONE, &test_selector()), vec![1, 1]);
        set_requirements(&mut c, "default", vec![req_in(ZONE, &["test-zone-3"])]);
        c.provision(make(10));
        assert_eq!(c.skew(ZONE, &test_selector()), vec![1, 1, 6]);
    }

    #[test]
    fn should_only_schedule_to_minimum_domains_if_already_violating_max_skew() {
        let mut c = topology_cluster();
        let make = |n| pods(n, |p| p.test_labels().cpu("1.1").spread(zonal()));
        let first = make(9);
        c.provision(first.clone());
        assert_eq!(c.skew(ZONE, &test_selector()), vec![3, 3, 3]);
        for p in &first {
            if node_of(&c, p).labels[ZONE] != "test-zone-1" {
                assert!(c.delete_pod(&p.key()));
            }
        }
        assert_eq!(c.skew(ZONE, &test_selector()), vec![3]);
        c.provision(make(3));
        assert_eq!(c.skew(ZONE, &test_selector()), vec![1, 2, 3]);
    }

    #[test]
    fn should_not_violate_max_skew_when_unsat_do_not_schedule() {
        let mut c = topology_cluster();
        let make = |n| pods(n, |p| p.test_labels().cpu("1.1").spread(zonal()));
        set_requirements(&mut c, "default", vec![req_in(ZONE, &["test-zone-1"])]);
        c.provision(make(1));
        assert_eq!(c.skew(ZONE, &test_selector()), vec![1]);
        set_requirements(
            &mut c,
            "default",
            vec![req_in(ZONE, &["test-zone-2", "test-zone-3"])],
        );
        c.provision(make(10));
        assert_eq!(c.skew(ZONE, &test_selector()), vec![1, 2, 2]);
    }

    #[test]
    fn should_not_violate_max_skew_when_unsat_do_not_schedule_discover_domains() {
        let mut c = topology_cluster();
        set_requirements(&mut c, "default", vec![req_in(ZONE, &["test-zone-1"])]);
        c.provision(vec![pod().test_labels().cpu("1.1").build()]);
        set_requirements(
            &mut c,
            "default",
            vec![req_in(ZONE, &["test-zone-2", "test-zone-3"])],
        );
        c.provision(pods(10, |p| p.test_labels().cpu("1.1").spread(zonal())));
        // Zone-1 is discovered from the existing node and its pod.
        assert_eq!(c.skew(ZONE, &test_selector()), vec![1, 2, 2]);
    }

    #[test]
    fn should_only_count_running_scheduled_pods_with_matching_labels_scheduled_to_nodes_with_a_corresponding_domain()
     {
        let mut c = counting_cluster(ZONE, "test-zone-1", "test-zone-2");
        let round = c.provision(spread_pods(2, &[zonal()]));
        assert_eq!(round.bindings.len(), 2);
        assert_eq!(
            skew_in(&c, Some("default"), ZONE, &test_selector()),
            vec![1, 2, 2]
        );
    }

    #[test]
    fn should_match_all_pods_when_label_selector_is_not_specified() {
        let mut c = topology_cluster();
        c.provision(vec![pod().build()]);
        assert_eq!(c.skew(ZONE, &everything()), vec![1]);
    }

    #[test]
    fn should_handle_interdependent_selectors() {
        let mut c = topology_cluster();
        let ps = pods(5, |p| p.spread(test_spread(HOSTNAME, 1)));
        let round = c.provision(ps.clone());
        assert_all_scheduled(&round, &ps);
        assert_eq!(node_names(&c, &ps).len(), 1);
    }

    #[test]
    fn should_respect_min_domains_constraints() {
        let mut c = topology_cluster();
        set_requirements(
            &mut c,
            "default",
            vec![req_in(ZONE, &["test-zone-1", "test-zone-2"])],
        );
        c.provision(spread_pods(3, &[min_domains(zonal(), 3)]));
        assert_eq!(c.skew(ZONE, &test_selector()), vec![1, 1]);
    }

    #[test]
    fn satisfied_min_domains_constraints_equal_should_allow_expected_pod_scheduling() {
        let mut c = topology_cluster();
        set_requirements(
            &mut c,
            "default",
            vec![req_in(ZONE, &["test-zone-1", "test-zone-2", "test-zone-3"])],
        );
        c.provision(spread_pods(11, &[min_domains(zonal(), 3)]));
        assert_eq!(c.skew(ZONE, &test_selector()), vec![3, 4, 4]);
    }

    #[test]
    fn satisfied_min_domains_constraints_greater_than_minimum_should_allow_expected_pod_scheduling()
    {
        let mut c = topology_cluster();
        set_requirements(
            &mut c,
            "default",
            vec![req_in(ZONE, &["test-zone-1", "test-zone-2", "test-zone-3"])],
        );
        c.provision(spread_pods(11, &[min_domains(zonal(), 2)]));
        assert_eq!(c.skew(ZONE, &test_selector()), vec![3, 4, 4]);
    }
}

/// Context "Hostname".
mod hostname {
    use super::*;

    fn app_pods(app: &str, arch: Option<&str>) -> Vec<karpenter_core::model::Pod> {
        pods(2, |p| {
            let p = p.labels(&[("app", app)]).spread(spread(
                HOSTNAME,
                1,
                Some(selector(&[("app", app)])),
            ));
            match arch {
                Some(a) => p.node_requirement(req_in(ARCH, &[a])),
                None => p,
            }
        })
    }

    #[test]
    fn should_balance_pods_across_nodes() {
        let mut c = topology_cluster();
        c.provision(spread_pods(4, &[test_spread(HOSTNAME, 1)]));
        assert_eq!(c.skew(HOSTNAME, &test_selector()), vec![1, 1, 1, 1]);
    }

    #[test]
    fn should_balance_pods_on_the_same_hostname_up_to_maxskew() {
        let mut c = topology_cluster();
        c.provision(spread_pods(4, &[test_spread(HOSTNAME, 4)]));
        assert_eq!(c.skew(HOSTNAME, &test_selector()), vec![4]);
    }

    #[test]
    fn balance_multiple_deployments_with_hostname_topology_spread() {
        let mut c = topology_cluster();
        let mut ps = app_pods("app1", None);
        ps.extend(app_pods("app2", None));
        let round = c.provision(ps.clone());
        assert_all_scheduled(&round, &ps);
        assert_eq!(c.node_count(), 2);
    }

    #[test]
    fn balance_multiple_deployments_with_hostname_topology_spread_and_varying_arch() {
        let mut c = topology_cluster();
        let mut ps = app_pods("app1", Some("amd64"));
        ps.extend(app_pods("app2", Some("arm64")));
        let round = c.provision(ps.clone());
        assert_all_scheduled(&round, &ps);
        assert_eq!(c.node_count(), 4);
    }
}

/// Context "CapacityType".
mod capacity_type {
    use super::*;

    fn ct() -> karpenter_core::model::TopologySpreadConstraint {
        test_spread(CAPACITY_TYPE, 1)
    }

    #[test]
    fn should_balance_pods_across_capacity_types() {
        let mut c = topology_cluster();
        c.provision(spread_pods(4, &[ct()]));
        assert_eq!(c.skew(CAPACITY_TYPE, &test_selector()), vec![2, 2]);
    }

    #[test]
    fn should_respect_nodepool_capacity_type_constraints() {
        let mut c = topology_cluster();
        set_requirements(
            &mut c,
            "default",
            vec![req_in(CAPACITY_TYPE, &["spot", "on-demand"])],
        );
        c.provision(spread_pods(4, &[ct()]));
        assert_eq!(c.skew(CAPACITY_TYPE, &test_selector()), vec![2, 2]);
    }

    #[test]
    fn should_not_violate_max_skew_when_unsat_do_not_schedule_capacity_type() {
        let mut c = topology_cluster();
        let make = |n| pods(n, |p| p.test_labels().cpu("1.1").spread(ct()));
        set_requirements(&mut c, "default", vec![req_in(CAPACITY_TYPE, &["spot"])]);
        c.provision(make(1));
        assert_eq!(c.skew(CAPACITY_TYPE, &test_selector()), vec![1]);
        set_requirements(
            &mut c,
            "default",
            vec![req_in(CAPACITY_TYPE, &["on-demand"])],
        );
        c.provision(make(5));
        assert_eq!(c.skew(CAPACITY_TYPE, &test_selector()), vec![1, 2]);
    }

    #[test]
    fn should_violate_max_skew_when_unsat_schedule_anyway_capacity_type() {
        let mut c = topology_cluster();
        let make = |n| pods(n, |p| p.test_labels().cpu("1.1").spread(anyway(ct())));
        set_requirements(&mut c, "default", vec![req_in(CAPACITY_TYPE, &["spot"])]);
        c.provision(make(1));
        assert_eq!(c.skew(CAPACITY_TYPE, &test_selector()), vec![1]);
        set_requirements(
            &mut c,
            "default",
            vec![req_in(CAPACITY_TYPE, &["on-demand"])],
        );
        c.provision(make(5));
        assert_eq!(c.skew(CAPACITY_TYPE, &test_selector()), vec![1, 5]);
    }

    #[test]
    fn should_only_count_running_scheduled_pods_with_matching_labels_scheduled_to_nodes_with_a_corresponding_domain()
     {
        let mut c = counting_cluster(CAPACITY_TYPE, "spot", "on-demand");
        let round = c.provision(spread_pods(2, &[ct()]));
        assert_eq!(round.bindings.len(), 2);
        assert_eq!(
            skew_in(&c, Some("default"), CAPACITY_TYPE, &test_selector()),
            vec![2, 3]
        );
    }

    #[test]
    fn should_match_all_pods_when_label_selector_is_not_specified() {
        let mut c = topology_cluster();
        c.provision(vec![pod().build()]);
        assert_eq!(c.skew(CAPACITY_TYPE, &everything()), vec![1]);
    }

    #[test]
    fn should_handle_interdependent_selectors() {
        let mut c = topology_cluster();
        let ps = pods(5, |p| p.spread(test_spread(HOSTNAME, 1)));
        let round = c.provision(ps.clone());
        assert_all_scheduled(&round, &ps);
        assert_eq!(node_names(&c, &ps).len(), 1);
    }

    #[test]
    fn should_balance_pods_across_capacity_types_node_required_affinity_constrained() {
        let mut c = topology_cluster();
        let first = pod()
            .test_labels()
            .node_requirement(req_in(ZONE, &["test-zone-1"]))
            .node_requirement(req_in(CAPACITY_TYPE, &["on-demand"]))
            .build();
        assert!(c.provision(vec![first.clone()]).scheduled(&first.key()));
        // The node filter (zone-2 ∧ spot) excludes the existing on-demand pod from the count:
        // all five go to one spot node.
        c.provision(pods(5, |p| {
            p.test_labels()
                .node_requirement(req_in(ZONE, &["test-zone-2"]))
                .node_requirement(req_in(CAPACITY_TYPE, &["spot"]))
                .spread(ct())
        }));
        assert_eq!(c.skew(CAPACITY_TYPE, &test_selector()), vec![1, 5]);
    }

    #[test]
    fn should_balance_pods_across_capacity_types_no_constraints() {
        let mut c = topology_cluster();
        let first = pod()
            .test_labels()
            .node_selector(INSTANCE_TYPE, "single-pod-instance-type")
            .node_requirement(req_in(CAPACITY_TYPE, &["on-demand"]))
            .build();
        assert!(c.provision(vec![first.clone()]).scheduled(&first.key()));
        set_requirements(&mut c, "default", vec![req_in(CAPACITY_TYPE, &["spot"])]);
        c.provision(pods(5, |p| p.test_labels().cpu("2").spread(ct())));
        assert_eq!(c.skew(CAPACITY_TYPE, &test_selector()), vec![1, 2]);
    }

    #[test]
    fn should_balance_pods_across_arch_no_constraints() {
        let mut c = topology_cluster();
        let first = pod()
            .test_labels()
            .node_selector(INSTANCE_TYPE, "single-pod-instance-type")
            .node_requirement(req_in(ARCH, &["amd64"]))
            .build();
        assert!(c.provision(vec![first.clone()]).scheduled(&first.key()));
        set_requirements(&mut c, "default", vec![req_in(ARCH, &["arm64"])]);
        c.provision(pods(5, |p| {
            p.test_labels().cpu("2").spread(test_spread(ARCH, 1))
        }));
        assert_eq!(c.skew(ARCH, &test_selector()), vec![1, 2]);
    }
}

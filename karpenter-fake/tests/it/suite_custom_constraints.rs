//! `suite_test.go` › Custom Constraints (upstream `suite_test.go`).
//!
//! Upstream has two copies of the "Well Known Labels", "Constraints Validation" and "Scheduling
//! Logic" Contexts. The second copies repeat the first ones' scenarios word for word, minus the
//! `Gte`/`Lte` scenarios, the not-ready NodePool scenario and the metric assertions of the
//! restricted-label scenario; one test here covers a scenario in both copies.

use karpenter_core::labels;
use karpenter_core::requirements::Operator::{self, DoesNotExist, Exists, In, NotIn};
use karpenter_fake::catalog::INTEGER_LABEL;

use crate::suite_kit::*;

mod nodepool_with_labels {
    use super::*;

    fn labelled_cluster() -> karpenter_fake::harness::Cluster {
        let mut pool = suite_pool();
        pool.labels.insert("test-key".into(), "test-value".into());
        cluster_with(pool)
    }

    #[test]
    fn should_schedule_unconstrained_pods_that_dont_have_matching_node_selectors() {
        let mut c = labelled_cluster();
        let round = c.provision(vec![pod("a")]);
        assert_eq!(node_of(&round, &key("a")).labels["test-key"], "test-value");
    }

    #[test]
    fn should_not_schedule_pods_that_have_conflicting_node_selectors() {
        let mut c = labelled_cluster();
        let round = c.provision(vec![pod("a").selector("test-key", "different-value")]);
        assert_not_scheduled(&round, &key("a"));
    }

    #[test]
    fn should_not_schedule_pods_that_have_node_selectors_with_undefined_key() {
        let mut c = suite_cluster();
        let round = c.provision(vec![pod("a").selector("test-key", "test-value")]);
        assert_not_scheduled(&round, &key("a"));
    }

    #[test]
    fn should_schedule_pods_that_have_matching_requirements() {
        let mut c = labelled_cluster();
        let p = pod("a").require("test-key", In, &["test-value", "another-value"]);
        let round = c.provision(vec![p]);
        assert_eq!(node_of(&round, &key("a")).labels["test-key"], "test-value");
    }

    #[test]
    fn should_not_schedule_pods_that_have_conflicting_requirements() {
        let mut c = labelled_cluster();
        let round = c.provision(vec![pod("a").require("test-key", In, &["another-value"])]);
        assert_not_scheduled(&round, &key("a"));
    }
}

/// Both copies of "Well Known Labels"; the `Gte`/`Lte` scenarios are in the first copy only.
mod well_known_labels {
    use super::*;

    fn pool_requiring(
        r: &[karpenter_core::requirements::NodeSelectorRequirement],
    ) -> karpenter_fake::harness::Cluster {
        let mut pool = suite_pool();
        pool.requirements = r.to_vec();
        cluster_with(pool)
    }

    fn zone_of(round: &karpenter_fake::harness::Round, pod: &str) -> String {
        node_of(round, pod).labels[labels::ZONE].clone()
    }

    #[test]
    fn should_use_nodepool_constraints() {
        let mut c = pool_requiring(&[req(labels::ZONE, In, &["test-zone-2"])]);
        let round = c.provision(vec![pod("a")]);
        assert_eq!(zone_of(&round, &key("a")), "test-zone-2");
    }

    #[test]
    fn should_use_node_selectors() {
        let mut c = pool_requiring(&[req(labels::ZONE, In, &["test-zone-1", "test-zone-2"])]);
        let round = c.provision(vec![pod("a").selector(labels::ZONE, "test-zone-2")]);
        assert_eq!(zone_of(&round, &key("a")), "test-zone-2");
    }

    #[test]
    fn should_not_schedule_nodes_with_a_hostname_selector() {
        let mut c = suite_cluster();
        let round = c.provision(vec![pod("a").selector(labels::HOSTNAME, "red-node")]);
        assert_not_scheduled(&round, &key("a"));
    }

    #[test]
    fn should_not_schedule_the_pod_if_nodeselector_unknown() {
        let mut c = pool_requiring(&[req(labels::ZONE, In, &["test-zone-1"])]);
        let round = c.provision(vec![pod("a").selector(labels::ZONE, "unknown")]);
        assert_not_scheduled(&round, &key("a"));
    }

    #[test]
    fn should_not_schedule_if_node_selector_outside_of_nodepool_constraints() {
        let mut c = pool_requiring(&[req(labels::ZONE, In, &["test-zone-1"])]);
        let round = c.provision(vec![pod("a").selector(labels::ZONE, "test-zone-2")]);
        assert_not_scheduled(&round, &key("a"));
    }

    #[test]
    fn should_schedule_compatible_requirements_with_operator_in() {
        let mut c = suite_cluster();
        let round = c.provision(vec![pod("a").require(labels::ZONE, In, &["test-zone-3"])]);
        assert_eq!(zone_of(&round, &key("a")), "test-zone-3");
    }

    fn integer_label_with_pool_requirement(op: Operator, value: &str) -> String {
        let mut c = pool_requiring(&[req(INTEGER_LABEL, op, &[value])]);
        let round = c.provision(vec![pod("a")]);
        node_of(&round, &key("a")).labels[INTEGER_LABEL].clone()
    }

    #[test]
    fn should_schedule_compatible_requirements_with_operator_gt() {
        assert_eq!(integer_label_with_pool_requirement(Operator::Gt, "8"), "16");
    }

    #[test]
    fn should_schedule_compatible_requirements_with_operator_lt() {
        assert_eq!(integer_label_with_pool_requirement(Operator::Lt, "8"), "2");
    }

    #[test]
    fn should_schedule_compatible_requirements_with_operator_gte() {
        assert_eq!(
            integer_label_with_pool_requirement(Operator::Gte, "16"),
            "16"
        );
    }

    #[test]
    fn should_schedule_compatible_requirements_with_operator_lte() {
        assert_eq!(integer_label_with_pool_requirement(Operator::Lte, "2"), "2");
    }

    #[test]
    fn should_not_schedule_incompatible_preferences_and_requirements_with_operator_in() {
        let mut c = suite_cluster();
        let round = c.provision(vec![pod("a").require(labels::ZONE, In, &["unknown"])]);
        assert_not_scheduled(&round, &key("a"));
    }

    #[test]
    fn should_schedule_compatible_requirements_with_operator_notin() {
        let mut c = suite_cluster();
        let p = pod("a").require(
            labels::ZONE,
            NotIn,
            &["test-zone-1", "test-zone-2", "unknown"],
        );
        let round = c.provision(vec![p]);
        assert_eq!(zone_of(&round, &key("a")), "test-zone-3");
    }

    #[test]
    fn should_not_schedule_incompatible_preferences_and_requirements_with_operator_notin() {
        let mut c = suite_cluster();
        let p = pod("a").require(
            labels::ZONE,
            NotIn,
            &["test-zone-1", "test-zone-2", "test-zone-3", "unknown"],
        );
        let round = c.provision(vec![p]);
        assert_not_scheduled(&round, &key("a"));
    }

    const ALL_ZONES_AND_UNKNOWN: [&str; 4] =
        ["test-zone-1", "test-zone-2", "test-zone-3", "unknown"];

    #[test]
    fn should_schedule_compatible_preferences_and_requirements_with_operator_in() {
        let mut c = suite_cluster();
        let p = pod("a")
            .require(labels::ZONE, In, &ALL_ZONES_AND_UNKNOWN)
            .prefer(labels::ZONE, In, &["test-zone-2", "unknown"]);
        let round = c.provision(vec![p]);
        assert_eq!(zone_of(&round, &key("a")), "test-zone-2");
    }

    #[test]
    fn should_schedule_incompatible_preferences_and_requirements_with_operator_in() {
        let mut c = suite_cluster();
        let p = pod("a")
            .require(labels::ZONE, In, &ALL_ZONES_AND_UNKNOWN)
            .prefer(labels::ZONE, In, &["unknown"]);
        let round = c.provision(vec![p]);
        assert!(round.scheduled(&key("a")), "{:?}", round.results.pod_errors);
    }

    #[test]
    fn should_schedule_compatible_preferences_and_requirements_with_operator_notin() {
        let mut c = suite_cluster();
        let p = pod("a")
            .require(labels::ZONE, In, &ALL_ZONES_AND_UNKNOWN)
            .prefer(labels::ZONE, NotIn, &["test-zone-1", "test-zone-3"]);
        let round = c.provision(vec![p]);
        assert_eq!(zone_of(&round, &key("a")), "test-zone-2");
    }

    #[test]
    fn should_schedule_incompatible_preferences_and_requirements_with_operator_notin() {
        let mut c = suite_cluster();
        let p = pod("a")
            .require(labels::ZONE, In, &ALL_ZONES_AND_UNKNOWN)
            .prefer(
                labels::ZONE,
                NotIn,
                &["test-zone-1", "test-zone-2", "test-zone-3"],
            );
        let round = c.provision(vec![p]);
        assert!(round.scheduled(&key("a")), "{:?}", round.results.pod_errors);
    }

    #[test]
    fn should_schedule_compatible_node_selectors_preferences_and_requirements() {
        let mut c = suite_cluster();
        let zones = ["test-zone-1", "test-zone-2", "test-zone-3"];
        let p = pod("a")
            .selector(labels::ZONE, "test-zone-3")
            .require(labels::ZONE, In, &zones)
            .prefer(labels::ZONE, In, &zones);
        let round = c.provision(vec![p]);
        assert_eq!(zone_of(&round, &key("a")), "test-zone-3");
    }

    #[test]
    fn should_combine_multidimensional_node_selectors_preferences_and_requirements() {
        let mut c = suite_cluster();
        let p = pod("a")
            .selector(labels::ZONE, "test-zone-3")
            .selector(labels::INSTANCE_TYPE, "arm-instance-type")
            .require(labels::ZONE, In, &["test-zone-1", "test-zone-3"])
            .require(
                labels::INSTANCE_TYPE,
                In,
                &["default-instance-type", "arm-instance-type"],
            )
            .prefer(labels::ZONE, NotIn, &["unknown"])
            .prefer(labels::INSTANCE_TYPE, NotIn, &["unknown"]);
        let round = c.provision(vec![p]);
        let node = node_of(&round, &key("a"));
        assert_eq!(node.labels[labels::ZONE], "test-zone-3");
        assert_eq!(instance_type(&node), "arm-instance-type");
    }
}

/// Both copies of "Constraints Validation". The first copy's restricted-label scenario also
/// checks scheduling-decision metrics, which are not ported (no metrics in the core).
mod constraints_validation {
    use super::*;

    #[test]
    fn should_not_schedule_pods_that_have_node_selectors_with_restricted_labels() {
        // Upstream's RestrictedLabels is {kubernetes.io/hostname}.
        let mut c = suite_cluster();
        let round = c.provision(vec![pod("a").require(labels::HOSTNAME, In, &["test"])]);
        assert_not_scheduled(&round, &key("a"));
    }

    #[test]
    fn should_not_schedule_pods_that_have_node_selectors_with_restricted_domains() {
        // Upstream's RestrictedLabelDomains is {karpenter.sh}.
        let mut c = suite_cluster();
        let round = c.provision(vec![pod("a").require("karpenter.sh/test", In, &["test"])]);
        assert_not_scheduled(&round, &key("a"));
    }

    /// Pool requirements `<key> In [test-value]` for every key; one pod per key, each in its own
    /// round, lands on a node carrying every key.
    fn pool_labels_reach_nodes(keys: &[&str]) {
        let mut pool = suite_pool();
        pool.requirements = keys.iter().map(|k| req(k, In, &["test-value"])).collect();
        let mut c = cluster_with(pool);
        for (i, k) in keys.iter().enumerate() {
            let name = format!("p{i}");
            let round = c.provision(vec![pod(&name)]);
            let node = node_of(&round, &key(&name));
            assert_eq!(
                node.labels.get(*k).map(String::as_str),
                Some("test-value"),
                "{k}"
            );
        }
    }

    /// "…with label in the kubernetes domains" (first copy) and "…in kubernetes domains" (second).
    #[test]
    fn should_schedule_pods_that_have_node_selectors_with_label_in_the_kubernetes_domains() {
        pool_labels_reach_nodes(&["kubernetes.io/test", "k8s.io/test"]);
    }

    #[test]
    fn should_schedule_pods_that_have_node_selectors_with_label_in_subdomain_from_kubernetes_domains()
     {
        pool_labels_reach_nodes(&["subdomain.kubernetes.io/test", "subdomain.k8s.io/test"]);
    }

    #[test]
    fn should_schedule_pods_that_have_node_selectors_with_label_in_wellknown_label_list() {
        let mut c = suite_cluster();
        let pods = vec![
            pod("zone").selector(labels::ZONE, "test-zone-1"),
            pod("instance-type").selector(labels::INSTANCE_TYPE, "default-instance-type"),
            pod("arch").selector(labels::ARCH, "arm64"),
            pod("os").selector(labels::OS, "linux"),
            pod("capacity-type").selector(labels::CAPACITY_TYPE, "spot"),
        ];
        let round = c.provision(pods.clone());
        for p in &pods {
            assert!(
                round.scheduled(&p.key()),
                "{}: {:?}",
                p.key(),
                round.results.pod_errors
            );
        }
    }
}

/// Both copies of "Scheduling Logic". Not ported: "should not schedule pods with nodePool which
/// is not ready" (first copy only) — NodePool readiness is decided by the caller that builds the
/// scheduling input (only ready pools are passed); the core has nothing to exercise.
mod scheduling_logic {
    use super::*;

    fn test_key_pool(values: &[&str]) -> karpenter_fake::harness::Cluster {
        let mut pool = suite_pool();
        pool.requirements = vec![req("test-key", In, values)];
        cluster_with(pool)
    }

    fn provision_one(
        c: &mut karpenter_fake::harness::Cluster,
        p: karpenter_core::model::Pod,
    ) -> karpenter_fake::harness::Round {
        c.provision(vec![p])
    }

    #[test]
    fn should_not_schedule_pods_that_have_node_selectors_with_in_operator_and_undefined_key() {
        let mut c = suite_cluster();
        let round = provision_one(&mut c, pod("a").require("test-key", In, &["test-value"]));
        assert_not_scheduled(&round, &key("a"));
    }

    #[test]
    fn should_schedule_pods_that_have_node_selectors_with_notin_operator_and_undefined_key() {
        let mut c = suite_cluster();
        let round = provision_one(&mut c, pod("a").require("test-key", NotIn, &["test-value"]));
        let node = node_of(&round, &key("a"));
        assert_ne!(
            node.labels.get("test-key").map(String::as_str),
            Some("test-value")
        );
    }

    #[test]
    fn should_not_schedule_pods_that_have_node_selectors_with_exists_operator_and_undefined_key() {
        let mut c = suite_cluster();
        let round = provision_one(&mut c, pod("a").require("test-key", Exists, &[]));
        assert_not_scheduled(&round, &key("a"));
    }

    #[test]
    fn should_schedule_pods_that_with_doesnotexists_operator_and_undefined_key() {
        let mut c = suite_cluster();
        let round = provision_one(&mut c, pod("a").require("test-key", DoesNotExist, &[]));
        assert!(!node_of(&round, &key("a")).labels.contains_key("test-key"));
    }

    #[test]
    fn should_schedule_unconstrained_pods_that_dont_have_matching_node_selectors() {
        let mut c = test_key_pool(&["test-value"]);
        let round = provision_one(&mut c, pod("a"));
        assert_eq!(node_of(&round, &key("a")).labels["test-key"], "test-value");
    }

    #[test]
    fn should_schedule_pods_that_have_node_selectors_with_matching_value_and_in_operator() {
        let mut c = test_key_pool(&["test-value"]);
        let round = provision_one(&mut c, pod("a").require("test-key", In, &["test-value"]));
        assert_eq!(node_of(&round, &key("a")).labels["test-key"], "test-value");
    }

    #[test]
    fn should_not_schedule_pods_that_have_node_selectors_with_matching_value_and_notin_operator() {
        let mut c = test_key_pool(&["test-value"]);
        let round = provision_one(&mut c, pod("a").require("test-key", NotIn, &["test-value"]));
        assert_not_scheduled(&round, &key("a"));
    }

    #[test]
    fn should_schedule_the_pod_with_exists_operator_and_defined_key() {
        let mut c = test_key_pool(&["test-value"]);
        let round = provision_one(&mut c, pod("a").require("test-key", Exists, &[]));
        assert!(round.scheduled(&key("a")), "{:?}", round.results.pod_errors);
    }

    #[test]
    fn should_not_schedule_the_pod_with_doesnotexists_operator_and_defined_key() {
        let mut c = test_key_pool(&["test-value"]);
        let round = provision_one(&mut c, pod("a").require("test-key", DoesNotExist, &[]));
        assert_not_scheduled(&round, &key("a"));
    }

    #[test]
    fn should_not_schedule_pods_that_have_node_selectors_with_different_value_and_in_operator() {
        let mut c = test_key_pool(&["test-value"]);
        let round = provision_one(&mut c, pod("a").require("test-key", In, &["another-value"]));
        assert_not_scheduled(&round, &key("a"));
    }

    #[test]
    fn should_schedule_pods_that_have_node_selectors_with_different_value_and_notin_operator() {
        let mut c = test_key_pool(&["test-value"]);
        let round = provision_one(
            &mut c,
            pod("a").require("test-key", NotIn, &["another-value"]),
        );
        assert_eq!(node_of(&round, &key("a")).labels["test-key"], "test-value");
    }

    #[test]
    fn should_schedule_compatible_pods_to_the_same_node() {
        let mut c = test_key_pool(&["test-value", "another-value"]);
        let round = c.provision(vec![
            pod("a").require("test-key", In, &["test-value"]),
            pod("b").require("test-key", NotIn, &["another-value"]),
        ]);
        let (n1, n2) = (node_of(&round, &key("a")), node_of(&round, &key("b")));
        assert_eq!(n1.labels["test-key"], "test-value");
        assert_eq!(n2.labels["test-key"], "test-value");
        assert_eq!(n1.name, n2.name);
    }

    #[test]
    fn should_schedule_incompatible_pods_to_the_different_node() {
        let mut c = test_key_pool(&["test-value", "another-value"]);
        let round = c.provision(vec![
            pod("a").require("test-key", In, &["test-value"]),
            pod("b").require("test-key", In, &["another-value"]),
        ]);
        let (n1, n2) = (node_of(&round, &key("a")), node_of(&round, &key("b")));
        assert_eq!(n1.labels["test-key"], "test-value");
        assert_eq!(n2.labels["test-key"], "another-value");
        assert_ne!(n1.name, n2.name);
    }

    #[test]
    fn exists_operator_should_not_overwrite_the_existing_value() {
        let mut c = suite_cluster();
        let p = pod("a")
            .require(labels::ZONE, In, &["non-existent-zone"])
            .require(labels::ZONE, Exists, &[]);
        let round = provision_one(&mut c, p);
        assert_not_scheduled(&round, &key("a"));
    }
}

//! `suite_test.go` › Ignore Preferences and › MinValuesPolicy (upstream
//! `pkg/controllers/provisioning/suite_test.go`): the scheduler under `PREFERENCE_POLICY=Ignore`
//! and under `MIN_VALUES_POLICY=Strict|BestEffort`.

use std::sync::Arc;

use karpenter_core::labels;
use karpenter_core::model::{InstanceType, Offering};
use karpenter_core::requirements::Operator::In;
use karpenter_core::resources::names;
use karpenter_core::scheduling::{MinValuesPolicy, PreferencePolicy};
use karpenter_fake::catalog::{InstanceTypeOptions, new_instance_type};
use karpenter_fake::harness::{Cluster, Round};

use crate::suite_kit::*;

mod ignore_preferences {
    use super::*;

    #[test]
    fn should_ignore_node_affinity_preferences() {
        let mut c = suite_cluster();
        c.options.preference_policy = PreferencePolicy::Ignore;
        let zone1 = pod("zone1").selector(labels::ZONE, "test-zone-1").cpu("2");
        let zone2 = pods("zone2", 2, |p| {
            p.selector(labels::ZONE, "test-zone-2").cpu("3")
        });
        // Respecting the preference would put it beside the zone-2 pods; ignored, it goes to the
        // node with the fewest pods.
        let affinity = pod("affinity")
            .cpu("1")
            .prefer_term(1, &[req(labels::ZONE, In, &["test-zone-2"])]);
        let mut all = vec![zone1, affinity];
        all.extend(zone2);
        let round = c.provision(all);
        let zone1_node = node_of(&round, &key("zone1")).name;
        let zone2_node = node_of(&round, &key("zone2-000")).name;
        assert!(round.scheduled(&key("zone2-001")));
        let affinity_node = node_of(&round, &key("affinity")).name;
        assert_eq!(affinity_node, zone1_node);
        assert_ne!(affinity_node, zone2_node);
    }
}

/// Two arm64 types of 4 cpu and 4Gi, one spot offering each (zones `test-zone-1-spot`,
/// `test-zone-2-spot`) at 0.52, as the MinValuesPolicy scenarios declare them.
fn two_types() -> Vec<Arc<InstanceType>> {
    ["instance-type-1", "instance-type-2"]
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let mut o = InstanceTypeOptions::with_resources(resources(&[
                (names::CPU, "4"),
                (names::MEMORY, "4Gi"),
            ]));
            o.architecture = "arm64".into();
            o.operating_systems = vec!["linux".into()];
            o.offerings = vec![Offering::new(
                format!("test-zone-{}-spot", i + 1),
                "spot",
                0.52,
            )];
            Arc::new(new_instance_type(name, o))
        })
        .collect()
}

fn cluster(
    policy: MinValuesPolicy,
    requirement: karpenter_core::requirements::NodeSelectorRequirement,
) -> Cluster {
    let mut pool = suite_pool_named("default");
    pool.instance_types = two_types();
    pool.requirements = vec![requirement];
    let mut c = cluster_with(pool);
    c.options.min_values_policy = policy;
    c
}

fn small_pod() -> karpenter_core::model::Pod {
    pod("p").cpu("0.9").memory("0.9Gi")
}

fn min_values_of(round: &Round, key: &str) -> Option<i64> {
    round.results.new_node_claims[0]
        .requirements
        .get(key)
        .and_then(|r| r.min_values())
}

mod with_instance_type_requirements {
    use super::*;

    fn requirement() -> karpenter_core::requirements::NodeSelectorRequirement {
        req(
            labels::INSTANCE_TYPE,
            In,
            &["instance-type-1", "instance-type-2", "instance-type-3"],
        )
        .with_min_values(Some(3))
    }

    #[test]
    fn strict_should_not_schedule_when_min_values_requirement_is_not_met() {
        let mut c = cluster(MinValuesPolicy::Strict, requirement());
        let round = c.provision(vec![small_pod()]);
        assert_not_scheduled(&round, &key("p"));
    }

    #[test]
    fn best_effort_should_schedule_even_when_min_values_requirement_is_not_met() {
        let mut c = cluster(MinValuesPolicy::BestEffort, requirement());
        let round = c.provision(vec![small_pod()]);
        assert!(round.scheduled(&key("p")), "{:?}", round.results.pod_errors);
        let claim = &round.results.new_node_claims[0];
        assert!(claim.min_values_relaxed, "the relaxed annotation is set");
        assert_eq!(min_values_of(&round, labels::INSTANCE_TYPE), Some(2));
        assert_eq!(
            instance_type(&node_of(&round, &key("p"))),
            "instance-type-1"
        );
    }
}

mod with_zone_requirements {
    use super::*;

    fn requirement() -> karpenter_core::requirements::NodeSelectorRequirement {
        req(
            labels::ZONE,
            In,
            &["test-zone-1-spot", "test-zone-2-spot", "test-zone-3-spot"],
        )
        .with_min_values(Some(3))
    }

    #[test]
    fn strict_should_not_schedule_when_zone_min_values_requirement_is_not_met() {
        let mut c = cluster(MinValuesPolicy::Strict, requirement());
        let round = c.provision(vec![small_pod()]);
        assert_not_scheduled(&round, &key("p"));
    }

    #[test]
    fn best_effort_should_schedule_even_when_zone_min_values_requirement_is_not_met() {
        let mut c = cluster(MinValuesPolicy::BestEffort, requirement());
        let round = c.provision(vec![small_pod()]);
        assert!(round.scheduled(&key("p")), "{:?}", round.results.pod_errors);
        assert!(round.results.new_node_claims[0].min_values_relaxed);
        assert_eq!(min_values_of(&round, labels::ZONE), Some(2));
        let zone = node_of(&round, &key("p")).labels[labels::ZONE].clone();
        assert!(
            zone == "test-zone-1-spot" || zone == "test-zone-2-spot",
            "{zone}"
        );
    }
}

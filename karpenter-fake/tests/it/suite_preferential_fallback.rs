//! `suite_test.go` › Preferential Fallback (upstream `suite_test.go`, `preferences.go`).

use karpenter_core::labels;
use karpenter_core::requirements::Operator::{In, NotIn};

use crate::suite_kit::*;

mod required {
    use super::*;

    #[test]
    fn should_not_relax_the_final_term() {
        let mut pool = suite_pool();
        pool.requirements = vec![
            req(labels::ZONE, In, &["test-zone-1"]),
            req(labels::INSTANCE_TYPE, In, &["default-instance-type"]),
        ];
        let mut c = cluster_with(pool);
        let p = pod("a").require_term(&[req(labels::ZONE, In, &["invalid"])]);
        let round = c.provision(vec![p]);
        assert_not_scheduled(&round, &key("a"));
    }

    #[test]
    fn should_relax_multiple_terms() {
        let mut c = suite_cluster();
        let p = pod("a")
            .require_term(&[req(labels::ZONE, In, &["invalid"])])
            .require_term(&[req(labels::ZONE, In, &["invalid"])])
            .require_term(&[req(labels::ZONE, In, &["test-zone-1"])])
            .require_term(&[req(labels::ZONE, In, &["test-zone-2"])]);
        let round = c.provision(vec![p]);
        // The first satisfiable term wins; the last one is never reached.
        assert_eq!(
            node_of(&round, &key("a")).labels[labels::ZONE],
            "test-zone-1"
        );
    }
}

mod preferred {
    use super::*;

    #[test]
    fn should_relax_all_terms() {
        let mut c = suite_cluster();
        let p = pod("a")
            .prefer_term(1, &[req(labels::ZONE, In, &["invalid"])])
            .prefer_term(1, &[req(labels::INSTANCE_TYPE, In, &["invalid"])]);
        let round = c.provision(vec![p]);
        assert!(round.scheduled(&key("a")), "{:?}", round.results.pod_errors);
    }

    #[test]
    fn should_relax_to_use_lighter_weights() {
        let mut pool = suite_pool();
        pool.requirements = vec![req(labels::ZONE, In, &["test-zone-1", "test-zone-2"])];
        let mut c = cluster_with(pool);
        let p = pod("a")
            .prefer_term(100, &[req(labels::INSTANCE_TYPE, In, &["test-zone-3"])])
            .prefer_term(50, &[req(labels::ZONE, In, &["test-zone-2"])])
            .prefer_term(1, &[req(labels::ZONE, In, &["test-zone-1"])]);
        let round = c.provision(vec![p]);
        assert_eq!(
            node_of(&round, &key("a")).labels[labels::ZONE],
            "test-zone-2"
        );
    }

    #[test]
    fn should_schedule_even_if_preference_is_conflicting_with_requirement() {
        let mut c = suite_cluster();
        let p = pod("a")
            .prefer_term(1, &[req(labels::ZONE, NotIn, &["test-zone-3"])])
            .require_term(&[req(labels::ZONE, In, &["test-zone-3"])]);
        let round = c.provision(vec![p]);
        assert_eq!(
            node_of(&round, &key("a")).labels[labels::ZONE],
            "test-zone-3"
        );
    }

    #[test]
    fn should_schedule_even_if_preference_requirements_are_conflicting() {
        let mut c = suite_cluster();
        let p = pod("a").prefer(labels::ZONE, In, &["invalid"]).prefer(
            labels::ZONE,
            NotIn,
            &["invalid"],
        );
        let round = c.provision(vec![p]);
        assert!(round.scheduled(&key("a")), "{:?}", round.results.pod_errors);
    }
}

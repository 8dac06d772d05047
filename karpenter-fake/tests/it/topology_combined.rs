//! Ported `topology_test.go` (upstream `topology_test.go`): the Contexts "Combined Hostname and
//! Zonal Topology", "MatchLabelKeys", "NodeTaintsPolicy", "NodeAffinityPolicy", "Combined Zonal
//! and Capacity Type Topology", "Combined Hostname, Zonal, and Capacity Type Topology",
//! "Combined Zonal Topology and Node Affinity" and "Combined Capacity Type Topology and Node
//! Affinity".

use karpenter_core::labels::{CAPACITY_TYPE, HOSTNAME, ZONE};
use karpenter_core::model::{NodeInclusionPolicy, TopologySpreadConstraint};
use karpenter_core::resources::names;
use karpenter_core::taints::TolerationOperator;
use karpenter_fake::catalog::instance_types_assorted;
use karpenter_fake::harness::Cluster;

use crate::topology_support::*;

/// Context "Combined Hostname and Zonal Topology".
mod combined_hostname_and_zonal {
    use super::*;

    #[test]
    fn should_spread_pods_while_respecting_both_constraints_hostname_and_zonal() {
        let mut c = topology_cluster();
        let tscs = [test_spread(ZONE, 1), test_spread(HOSTNAME, 3)];
        for (batch, zones) in [
            (2, vec![1, 1]),
            (3, vec![1, 2, 2]),
            (5, vec![3, 3, 4]),
            (11, vec![7, 7, 7]),
        ] {
            c.provision(spread_pods(batch, &tscs));
            assert_eq!(c.skew(ZONE, &test_selector()), zones, "after {batch}");
            assert!(largest(&c, HOSTNAME, &test_selector()) <= 3);
        }
    }

    #[test]
    fn should_balance_pods_across_nodepool_requirements() {
        let key = "capacity.spread.4-1";
        let mut spot = topology_pool("spot");
        spot.requirements = vec![
            req_in(CAPACITY_TYPE, &["spot"]),
            req_in(key, &["2", "3", "4", "5"]),
        ];
        let mut on_demand = topology_pool("on-demand");
        on_demand.requirements = vec![req_in(CAPACITY_TYPE, &["on-demand"]), req_in(key, &["1"])];
        let mut c = Cluster::new()
            .with_node_pool(spot)
            .with_node_pool(on_demand);
        let ps = spread_pods(20, &[test_spread(key, 1)]);
        let round = c.provision(ps.clone());
        assert_all_scheduled(&round, &ps);
        assert_eq!(c.skew(key, &test_selector()), vec![4, 4, 4, 4, 4]);
        // The spread across NodePools forces a 4:1 spot to on-demand split.
        assert_eq!(c.skew(CAPACITY_TYPE, &test_selector()), vec![4, 16]);
    }

    /// The first of upstream's two Its named "should spread pods while respecting both
    /// constraints": zonal `DoNotSchedule` over a pool limited to zones 1 and 2, hostname
    /// `ScheduleAnyway`, and a zone-3 pool that cannot launch (cpu limit 0).
    #[test]
    fn should_spread_pods_while_respecting_both_constraints_zone_limited_pools() {
        let mut c = topology_cluster();
        set_requirements(
            &mut c,
            "default",
            vec![req_in(ZONE, &["test-zone-1", "test-zone-2"])],
        );
        let mut disabled = topology_pool("disabled");
        disabled.requirements = vec![req_in(ZONE, &["test-zone-3"])];
        disabled.limits = resources(&[(names::CPU, "0")]);
        c.add_node_pool(disabled);
        let tscs = [test_spread(ZONE, 1), anyway(test_spread(HOSTNAME, 1))];
        c.provision(spread_pods(10, &tscs));
        // One pod per zone (zone-3 cannot be launched), one pod per node.
        assert_eq!(c.skew(ZONE, &test_selector()), vec![1, 1]);
        assert_eq!(c.skew(HOSTNAME, &test_selector()), vec![1, 1]);
    }

    /// The second of upstream's two Its named "should spread pods while respecting both
    /// constraints": capacity type (maxSkew 1) and hostname (maxSkew 3).
    #[test]
    fn should_spread_pods_while_respecting_both_constraints_capacity_type_and_hostname() {
        let mut c = topology_cluster();
        let tscs = [test_spread(CAPACITY_TYPE, 1), test_spread(HOSTNAME, 3)];
        for (batch, cts) in [
            (2, vec![1, 1]),
            (3, vec![2, 3]),
            (5, vec![5, 5]),
            (11, vec![10, 11]),
        ] {
            c.provision(spread_pods(batch, &tscs));
            assert_eq!(
                c.skew(CAPACITY_TYPE, &test_selector()),
                cts,
                "after {batch}"
            );
            assert!(largest(&c, HOSTNAME, &test_selector()) <= 3);
        }
    }
}

/// Context "MatchLabelKeys".
mod match_label_keys {
    use super::*;

    fn keyed() -> TopologySpreadConstraint {
        let mut tsc = test_spread(HOSTNAME, 1);
        tsc.match_label_keys = vec!["test-label".to_string()];
        tsc
    }

    #[test]
    fn should_support_match_label_keys() {
        let mut c = topology_cluster();
        let mut ps = pods(2, |p| {
            p.test_labels()
                .labels(&[("test-label", "value-a")])
                .spread(keyed())
        });
        ps.extend(pods(2, |p| {
            p.test_labels()
                .labels(&[("test-label", "value-b")])
                .spread(keyed())
        }));
        c.provision(ps);
        // Two nodes, each with one pod of each "deployment" (without matchLabelKeys: 4 nodes).
        assert_eq!(c.skew(HOSTNAME, &test_selector()), vec![2, 2]);
    }

    #[test]
    fn should_ignore_unknown_labels_specified_in_match_label_keys() {
        let mut c = topology_cluster();
        c.provision(spread_pods(4, &[keyed()]));
        assert_eq!(c.skew(HOSTNAME, &test_selector()), vec![1, 1, 1, 1]);
    }
}

/// Context "NodeTaintsPolicy".
mod node_taints_policy {
    use super::*;

    const SPREAD_LABEL: &str = "fake-label";
    const TAINT_KEY: &str = "taint-key";

    /// Pool labelled `fake-label=baz`; two tainted existing nodes `foo` and `bar` with 100m of
    /// cpu.
    fn tainted_nodes_cluster() -> Cluster {
        let mut c = topology_cluster();
        c.node_pool_mut("default").unwrap().labels =
            [(SPREAD_LABEL.to_string(), "baz".to_string())].into();
        for domain in ["foo", "bar"] {
            c.add_node(existing_node(
                &format!("node-{domain}"),
                &[(SPREAD_LABEL, domain)],
                vec![no_schedule("taintname", "taintvalue")],
                resources(&[(names::CPU, "100m")]),
            ));
        }
        c.provision(Vec::new());
        c
    }

    /// The default pool plus `fake-label In [foo]`, and a tainted pool with `fake-label In
    /// [bar]`.
    fn tainted_pool_cluster() -> Cluster {
        let mut c = topology_cluster();
        c.node_pool_mut("default")
            .unwrap()
            .requirements
            .push(req_in(SPREAD_LABEL, &["foo"]));
        let mut tainted = topology_pool("tainted");
        tainted.taints = vec![no_schedule(TAINT_KEY, "taint-value")];
        tainted.requirements.push(req_in(SPREAD_LABEL, &["bar"]));
        c.add_node_pool(tainted);
        c
    }

    fn policy_spread(policy: NodeInclusionPolicy) -> TopologySpreadConstraint {
        taints_policy(test_spread(SPREAD_LABEL, 1), policy)
    }

    #[test]
    fn should_balance_pods_across_a_label_node_taints_policy_ignore() {
        let mut c = tainted_nodes_cluster();
        let tsc = policy_spread(NodeInclusionPolicy::Ignore);
        c.provision(pods(5, |p| p.test_labels().cpu("1").spread(tsc.clone())));
        // Three domains are known (foo, bar, baz) but only baz can be created.
        assert_eq!(c.skew(SPREAD_LABEL, &test_selector()), vec![1]);
    }

    #[test]
    fn should_balance_pods_across_a_label_node_taints_policy_honor() {
        let mut c = tainted_nodes_cluster();
        let tsc = policy_spread(NodeInclusionPolicy::Honor);
        c.provision(pods(5, |p| p.test_labels().cpu("1").spread(tsc.clone())));
        assert_eq!(c.skew(SPREAD_LABEL, &test_selector()), vec![5]);
    }

    #[test]
    fn should_balance_pods_across_a_label_when_discovered_from_the_nodepool_node_taints_policy_ignore()
     {
        let mut c = tainted_pool_cluster();
        c.provision(spread_pods(
            2,
            &[policy_spread(NodeInclusionPolicy::Ignore)],
        ));
        // One pod in foo; the other would need bar, whose pool the pods do not tolerate.
        assert_eq!(c.skew(SPREAD_LABEL, &test_selector()), vec![1]);
    }

    #[test]
    fn should_balance_pods_across_a_label_when_discovered_from_the_nodepool_node_taints_policy_honor()
     {
        let mut c = tainted_pool_cluster();
        c.provision(spread_pods(2, &[policy_spread(NodeInclusionPolicy::Honor)]));
        assert_eq!(c.skew(SPREAD_LABEL, &test_selector()), vec![2]);
    }

    #[test]
    fn should_balance_pods_across_a_label_when_mutually_exclusive_nodepools_by_taints_share_domains_node_taints_policy_honor()
     {
        let mut c = Cluster::new();
        let tsc = policy_spread(NodeInclusionPolicy::Honor);
        let mut ps = Vec::new();
        for (i, domains) in [["foo", "bar"], ["foo", "baz"]].iter().enumerate() {
            let value = format!("nodepool-{i}");
            let mut pool = topology_pool(&format!("pool-{i}"));
            pool.taints = vec![no_schedule(TAINT_KEY, &value)];
            pool.requirements.push(req_in(SPREAD_LABEL, domains));
            c.add_node_pool(pool);
            let t = toleration(
                TAINT_KEY,
                TolerationOperator::Equal,
                &value,
                Some(karpenter_core::taints::TaintEffect::NoSchedule),
            );
            ps.extend(pods((i + 1) * 2, |p| {
                p.test_labels().spread(tsc.clone()).toleration(t.clone())
            }));
        }
        let round = c.provision(ps.clone());
        assert_all_scheduled(&round, &ps);
        // foo: 2 (either pool), bar: 1 (pool 0), baz: 3 (pool 1).
        assert_eq!(c.skew(SPREAD_LABEL, &test_selector()), vec![1, 2, 3]);
    }
}

/// Context "NodeAffinityPolicy".
mod node_affinity_policy {
    use super::*;

    const SPREAD_LABEL: &str = "fake-label";
    const AFFINITY_LABEL: &str = "selector";

    /// Pool labelled `fake-label=baz`, `selector=value`; existing nodes `foo` and `bar` labelled
    /// `selector=mismatch` with 100m of cpu.
    fn cluster() -> Cluster {
        let mut c = topology_cluster();
        c.node_pool_mut("default").unwrap().labels = [
            (SPREAD_LABEL.to_string(), "baz".to_string()),
            (AFFINITY_LABEL.to_string(), "value".to_string()),
        ]
        .into();
        for domain in ["foo", "bar"] {
            c.add_node(existing_node(
                &format!("node-{domain}"),
                &[(SPREAD_LABEL, domain), (AFFINITY_LABEL, "mismatch")],
                Vec::new(),
                resources(&[(names::CPU, "100m")]),
            ));
        }
        c.provision(Vec::new());
        c
    }

    fn run(policy: NodeInclusionPolicy) -> Cluster {
        let mut c = cluster();
        let tsc = affinity_policy(test_spread(SPREAD_LABEL, 1), policy);
        c.provision(pods(5, |p| {
            p.test_labels()
                .cpu("1")
                .node_selector(AFFINITY_LABEL, "value")
                .spread(tsc.clone())
        }));
        c
    }

    #[test]
    fn should_balance_pods_across_a_label_node_affinity_policy_ignore() {
        let c = run(NodeInclusionPolicy::Ignore);
        // foo and bar count although the pods cannot go there: one pod in baz.
        assert_eq!(c.skew(SPREAD_LABEL, &test_selector()), vec![1]);
    }

    #[test]
    fn should_balance_pods_across_a_label_node_affinity_policy_honor() {
        let c = run(NodeInclusionPolicy::Honor);
        assert_eq!(c.skew(SPREAD_LABEL, &test_selector()), vec![5]);
    }
}

/// Context "Combined Zonal and Capacity Type Topology".
mod combined_zonal_and_capacity_type {
    use super::*;

    #[test]
    fn should_spread_pods_while_respecting_both_constraints() {
        let mut c = topology_cluster();
        let tscs = [test_spread(CAPACITY_TYPE, 1), test_spread(ZONE, 1)];
        for (batch, ct_max, zone_max) in [(2, 1, 1), (3, 3, 2), (3, 5, 4), (11, 11, 7)] {
            c.provision(spread_pods(batch, &tscs));
            assert!(largest(&c, CAPACITY_TYPE, &test_selector()) <= ct_max);
            assert!(largest(&c, ZONE, &test_selector()) <= zone_max);
        }
    }
}

/// Context "Combined Hostname, Zonal, and Capacity Type Topology".
mod combined_hostname_zonal_and_capacity_type {
    use super::*;

    #[test]
    fn should_spread_pods_while_respecting_all_constraints() {
        let mut pool = topology_pool("default");
        pool.instance_types = instance_types_assorted();
        let mut c = Cluster::new().with_node_pool(pool);
        let tscs = [
            test_spread(CAPACITY_TYPE, 1),
            test_spread(ZONE, 2),
            test_spread(HOSTNAME, 3),
        ];
        for i in 1..15 {
            let ps = spread_pods(i, &tscs);
            let round = c.provision(ps.clone());
            assert!(max_skew(&c, CAPACITY_TYPE, &test_selector()) <= 1);
            assert!(max_skew(&c, ZONE, &test_selector()) <= 2);
            assert!(max_skew(&c, HOSTNAME, &test_selector()) <= 3);
            assert_all_scheduled(&round, &ps);
        }
    }
}

/// Context "Combined Zonal Topology and Node Affinity".
mod combined_zonal_and_node_affinity {
    use super::*;

    fn zonal() -> TopologySpreadConstraint {
        test_spread(ZONE, 1)
    }

    #[test]
    fn should_limit_spread_options_by_node_selector() {
        let mut c = topology_cluster();
        let mut ps = pods(5, |p| {
            p.test_labels()
                .spread(zonal())
                .node_selector(ZONE, "test-zone-1")
        });
        ps.extend(pods(10, |p| {
            p.test_labels()
                .spread(zonal())
                .node_selector(ZONE, "test-zone-2")
        }));
        c.provision(ps);
        assert_eq!(c.skew(ZONE, &test_selector()), vec![5, 10]);
    }

    #[test]
    fn should_limit_spread_options_by_node_requirements() {
        let mut c = topology_cluster();
        c.provision(pods(10, |p| {
            p.test_labels()
                .spread(zonal())
                .node_requirement(req_in(ZONE, &["test-zone-1", "test-zone-2"]))
        }));
        assert_eq!(c.skew(ZONE, &test_selector()), vec![5, 5]);
    }

    #[test]
    fn should_limit_spread_options_by_required_node_affinity() {
        let mut c = topology_cluster();
        c.provision(pods(6, |p| {
            p.test_labels()
                .spread(zonal())
                .node_requirement(req_in(ZONE, &["test-zone-1", "test-zone-2"]))
        }));
        assert_eq!(c.skew(ZONE, &test_selector()), vec![3, 3]);
        set_requirements(
            &mut c,
            "default",
            vec![req_in(ZONE, &["test-zone-1", "test-zone-2", "test-zone-3"])],
        );
        c.provision(vec![
            pod()
                .test_labels()
                .spread(zonal())
                .node_requirement(req_in(ZONE, &["test-zone-2", "test-zone-3"]))
                .build(),
        ]);
        // Zone-3 is empty: the pod goes there although the skew is still violated.
        assert_eq!(c.skew(ZONE, &test_selector()), vec![1, 3, 3]);
        c.provision(spread_pods(5, &[zonal()]));
        assert_eq!(c.skew(ZONE, &test_selector()), vec![4, 4, 4]);
    }

    #[test]
    fn should_not_limit_spread_options_by_preferred_node_affinity() {
        let mut c = topology_cluster();
        c.provision(pods(6, |p| {
            p.test_labels()
                .spread(zonal())
                .node_preference(req_in(ZONE, &["test-zone-1", "test-zone-2"]))
        }));
        assert_eq!(c.skew(ZONE, &test_selector()), vec![2, 2, 2]);
    }
}

/// Context "Combined Capacity Type Topology and Node Affinity".
mod combined_capacity_type_and_node_affinity {
    use super::*;

    fn ct() -> TopologySpreadConstraint {
        test_spread(CAPACITY_TYPE, 1)
    }

    #[test]
    fn should_limit_spread_options_by_node_selector() {
        let mut c = topology_cluster();
        let mut ps = pods(5, |p| {
            p.test_labels()
                .spread(anyway(ct()))
                .node_selector(CAPACITY_TYPE, "spot")
        });
        ps.extend(pods(5, |p| {
            p.test_labels()
                .spread(anyway(ct()))
                .node_selector(CAPACITY_TYPE, "on-demand")
        }));
        c.provision(ps);
        assert_eq!(c.skew(CAPACITY_TYPE, &test_selector()), vec![5, 5]);
    }

    #[test]
    fn should_limit_spread_options_by_node_affinity_capacity_type() {
        let mut c = topology_cluster();
        c.provision(pods(3, |p| {
            p.test_labels()
                .spread(ct())
                .node_requirement(req_in(CAPACITY_TYPE, &["spot"]))
        }));
        assert_eq!(c.skew(CAPACITY_TYPE, &test_selector()), vec![3]);
        c.provision(vec![
            pod()
                .test_labels()
                .spread(ct())
                .node_requirement(req_in(CAPACITY_TYPE, &["on-demand", "spot"]))
                .build(),
        ]);
        // On-demand is empty: the pod goes there although the skew is still violated.
        assert_eq!(c.skew(CAPACITY_TYPE, &test_selector()), vec![1, 3]);
        c.provision(spread_pods(5, &[ct()]));
        assert_eq!(c.skew(CAPACITY_TYPE, &test_selector()), vec![4, 5]);
    }
}

//! Upstream `suite_test.go` `suite_test.go`, Context "Metrics", as data: `Results::metrics`
//! (`karpenter_core::scheduling::SolveMetrics`, upstream `GetTopologyZoneConstraints`).
//!
//! Skipped upstream scenarios (no equivalent as data; see the report):
//! - "should surface the schedulingDuration metric after executing a scheduling loop" and
//!   "should set the PodSchedulerDecisionSeconds metric after a scheduling loop": wall-clock
//!   histograms; the core has no clock, so callers time solves themselves.
//! - "Pending Pods by Effective Zone Metric › should report metric correctly for volume
//!   constraints" (three entries): the scheduler does not model volume topology.

use std::collections::BTreeMap;

use karpenter_core::labels;
use karpenter_core::model::{
    ClusterNode, LabelSelector, NodeAffinity, NodeSelectorTerm, Offering, Pod, PodAffinity,
    PodAffinityTerm, PodPhase, PreferredSchedulingTerm, TopologySpreadConstraint,
    WhenUnsatisfiable,
};
use karpenter_core::requirements::{NodeSelectorRequirement, Operator};
use karpenter_core::resources::{Quantity, ResourceList, names};
use karpenter_core::scheduling::{PodErrorKind, ZONE_FLEXIBLE, ZONE_NONE};
use karpenter_fake::catalog::{
    InstanceTypeOptions, RESERVATION_ID_LABEL, ZONE_1, ZONE_2, ZONE_3, ZONES, default_catalog,
    default_offerings, new_instance_type,
};
use karpenter_fake::harness::{Cluster, Round, node_pool};

const NS: &str = "default";

/// The scheduling suite's cluster: `capacity-type In [spot, on-demand, reserved]`.
fn cluster() -> Cluster {
    let mut pool = node_pool("default", default_catalog());
    pool.requirements = vec![NodeSelectorRequirement::new(
        labels::CAPACITY_TYPE,
        Operator::In,
        ["spot", "on-demand", "reserved"],
    )];
    Cluster::new().with_node_pool(pool)
}

fn pod(name: &str) -> Pod {
    Pod::new(NS, name)
}

fn labelled(name: &str, app: &str) -> Pod {
    let mut p = pod(name);
    p.labels.insert("app".into(), app.into());
    p
}

fn app(app: &str) -> LabelSelector {
    LabelSelector::from_labels([("app", app)])
}

/// A node in `zone` running `pods` (phase Running).
fn add_zone_node(c: &mut Cluster, name: &str, zone: &str, pods: Vec<Pod>) {
    let mut node = ClusterNode::new(name);
    node.labels = [
        (labels::ZONE.to_string(), zone.to_string()),
        (labels::HOSTNAME.to_string(), name.to_string()),
    ]
    .into();
    let mut r = ResourceList::new();
    r.insert(names::CPU, Quantity::from_units(1));
    r.insert(names::MEMORY, Quantity::from_bytes(1 << 30));
    r.insert(names::PODS, Quantity::from_units(10));
    node.capacity = r.clone();
    node.allocatable = r;
    let pods = pods
        .into_iter()
        .map(|mut p| {
            p.phase = PodPhase::Running;
            p
        })
        .collect();
    c.add_node_with_pods(node, pods);
}

fn zone_term(app_label: &str) -> PodAffinityTerm {
    PodAffinityTerm::new(app(app_label), labels::ZONE)
}

fn zone_spread(app_label: &str, min_domains: Option<i32>) -> TopologySpreadConstraint {
    let mut tsc = TopologySpreadConstraint::new(1, labels::ZONE, WhenUnsatisfiable::DoNotSchedule)
        .with_label_selector(app(app_label));
    tsc.min_domains = min_domains;
    tsc
}

fn zones(round: &Round) -> BTreeMap<String, usize> {
    round.results.metrics.pending_pods_by_effective_zone.clone()
}

fn expect(entries: &[(&str, usize)]) -> BTreeMap<String, usize> {
    entries.iter().map(|(k, v)| (k.to_string(), *v)).collect()
}

#[test]
fn should_surface_the_queue_depth_metric_while_executing_the_scheduling_loop() {
    let mut c = cluster();
    let pods: Vec<Pod> = (0..1000)
        .map(|i| {
            let mut p = labelled(&format!("p-{i}"), "spread");
            p.pod_anti_affinity = Some(PodAffinity {
                required: vec![PodAffinityTerm::new(app("spread"), labels::HOSTNAME)],
                preferred: Vec::new(),
            });
            p
        })
        .collect();
    let round = c.provision(pods);
    let m = &round.results.metrics;
    assert!(m.queue_depth_max > 0);
    assert_eq!(
        m.queue_depth_max, 1000,
        "every pod is queued when the loop starts"
    );
    assert_eq!(round.node_claims().len(), 1000);
}

#[test]
fn should_surface_the_unschedulable_pods_count_metric_while_executing_the_scheduling_loop() {
    let mut c = cluster();
    let mut pods: Vec<Pod> = (0..10)
        .map(|i| {
            let mut p = pod(&format!("bad-{i}"));
            p.node_selector
                .insert(labels::INSTANCE_TYPE.into(), "unknown-instance-type".into());
            p
        })
        .collect();
    pods.extend((0..5).map(|i| pod(&format!("good-{i}"))));
    let round = c.provision(pods);
    assert_eq!(round.results.metrics.unschedulable_pods, 10);
    assert_eq!(round.results.metrics.ignored_pods, 0);
    assert_eq!(round.bindings.len(), 5);
}

mod pending_pods_by_effective_zone_metric {
    use super::*;

    #[test]
    fn should_report_zone_of_pods_correctly_when_pods_are_flexible_to_zones() {
        let mut c = cluster();
        let round = c.provision(vec![pod("a"), pod("b")]);
        assert_eq!(zones(&round), expect(&[(ZONE_FLEXIBLE, 2)]));
    }

    #[test]
    fn should_report_zone_of_pods_correctly_when_pods_are_flexible_to_zones_with_a_zone_selector() {
        // Upstream's second entry of the same name: three pods selecting test-zone-2.
        let mut c = cluster();
        let pods = (0..3)
            .map(|i| {
                let mut p = pod(&format!("p-{i}"));
                p.node_selector.insert(labels::ZONE.into(), ZONE_2.into());
                p
            })
            .collect();
        let round = c.provision(pods);
        assert_eq!(zones(&round), expect(&[(ZONE_2, 3)]));
    }

    #[test]
    fn should_report_zone_of_pods_correctly_when_multiple_pods_have_different_zone_constraints() {
        let mut c = cluster();
        let mut a = pod("a");
        a.node_selector.insert(labels::ZONE.into(), ZONE_1.into());
        let mut b = pod("b");
        b.node_affinity = Some(NodeAffinity {
            required: vec![NodeSelectorTerm {
                match_expressions: vec![NodeSelectorRequirement::new(
                    labels::ZONE,
                    Operator::In,
                    [ZONE_2],
                )],
            }],
            preferred: Vec::new(),
        });
        let round = c.provision(vec![a, b]);
        assert_eq!(zones(&round), expect(&[(ZONE_1, 1), (ZONE_2, 1)]));
    }

    #[test]
    fn should_report_zone_of_pods_correctly_when_pod_has_preferred_zone_affinity() {
        let mut c = cluster();
        let mut p = pod("p");
        p.node_affinity = Some(NodeAffinity {
            required: Vec::new(),
            preferred: vec![PreferredSchedulingTerm {
                weight: 1,
                preference: NodeSelectorTerm {
                    match_expressions: vec![NodeSelectorRequirement::new(
                        labels::ZONE,
                        Operator::In,
                        [ZONE_1],
                    )],
                },
            }],
        });
        let round = c.provision(vec![p]);
        assert_eq!(zones(&round), expect(&[(ZONE_FLEXIBLE, 1)]));
    }

    #[test]
    fn should_report_zone_of_pods_correctly_when_pods_have_required_pod_affinity() {
        let mut c = cluster();
        add_zone_node(&mut c, "n1", ZONE_1, vec![labelled("target", "target")]);
        let mut p = pod("p");
        p.pod_affinity = Some(PodAffinity {
            required: vec![zone_term("target")],
            preferred: Vec::new(),
        });
        let round = c.provision(vec![p]);
        assert_eq!(zones(&round), expect(&[(ZONE_1, 1)]));
    }

    #[test]
    fn should_report_zone_of_pods_correctly_when_pods_have_required_pod_anti_affinity() {
        let mut c = cluster();
        add_zone_node(&mut c, "n1", ZONE_1, vec![labelled("t1", "target")]);
        add_zone_node(&mut c, "n2", ZONE_2, vec![labelled("t2", "target")]);
        let mut p = pod("p");
        p.pod_anti_affinity = Some(PodAffinity {
            required: vec![zone_term("target")],
            preferred: Vec::new(),
        });
        let round = c.provision(vec![p]);
        assert_eq!(zones(&round), expect(&[(ZONE_3, 1)]));
    }

    #[test]
    fn should_report_zone_of_pods_correctly_when_pods_have_restricting_tscs() {
        let mut c = cluster();
        add_zone_node(&mut c, "n1", ZONE_1, vec![labelled("e1", "web")]);
        add_zone_node(&mut c, "n2", ZONE_2, vec![labelled("e2", "web")]);
        let mut p = labelled("p", "web");
        p.topology_spread_constraints = vec![zone_spread("web", None)];
        let round = c.provision(vec![p]);
        assert_eq!(zones(&round), expect(&[(ZONE_3, 1)]));
    }

    #[test]
    fn should_report_zone_of_pods_correctly_when_tsc_is_unsatisfiable() {
        let mut c = cluster();
        for (i, zone) in ZONES.iter().enumerate() {
            add_zone_node(
                &mut c,
                &format!("n{i}"),
                zone,
                vec![
                    labelled(&format!("e{i}a"), "web"),
                    labelled(&format!("e{i}b"), "web"),
                ],
            );
        }
        let mut p = labelled("p", "web");
        p.topology_spread_constraints = vec![zone_spread("web", Some(4))];
        let round = c.provision(vec![p]);
        assert_eq!(zones(&round), expect(&[(ZONE_NONE, 1)]));
    }

    #[test]
    fn should_report_zone_of_pods_correctly_when_pod_affinity_is_unsatisfiable() {
        let mut c = cluster();
        let mut p = pod("p");
        p.pod_affinity = Some(PodAffinity {
            required: vec![zone_term("nobody")],
            preferred: Vec::new(),
        });
        let round = c.provision(vec![p]);
        assert_eq!(zones(&round), expect(&[(ZONE_NONE, 1)]));
    }

    #[test]
    fn should_report_zone_of_pods_correctly_when_pod_anti_affinity_is_unsatisfiable() {
        let mut c = cluster();
        for (i, zone) in ZONES.iter().enumerate() {
            add_zone_node(
                &mut c,
                &format!("n{i}"),
                zone,
                vec![labelled(&format!("t{i}"), "target")],
            );
        }
        let mut p = pod("p");
        p.pod_anti_affinity = Some(PodAffinity {
            required: vec![zone_term("target")],
            preferred: Vec::new(),
        });
        let round = c.provision(vec![p]);
        assert_eq!(zones(&round), expect(&[(ZONE_NONE, 1)]));
    }
}

// ---- beyond the upstream scenarios -----------------------------------------------------------

/// Pods rejected before scheduling are ignored, not unschedulable, and have no effective zone.
#[test]
fn invalid_pods_are_counted_as_ignored() {
    let mut c = cluster();
    let mut bad = pod("bad");
    bad.node_selector
        .insert(labels::HOSTNAME.into(), "some-host".into());
    let round = c.provision(vec![bad, pod("good")]);
    let m = &round.results.metrics;
    assert_eq!(m.ignored_pods, 1);
    assert_eq!(m.unschedulable_pods, 0);
    assert_eq!(m.queue_depth_max, 1);
    assert_eq!(
        m.pending_pods_by_effective_zone,
        expect(&[(ZONE_FLEXIBLE, 1)])
    );
    assert_eq!(
        round.results.pod_errors["default/bad"].kind,
        PodErrorKind::Invalid
    );
}

/// A pod deferred by a reserved-offering error is a pod error but not unschedulable.
#[test]
fn reserved_offering_errors_are_not_unschedulable() {
    let mut offerings: Vec<Offering> = default_offerings(1.0);
    offerings.push(Offering::reserved(
        ZONE_1,
        "r-1",
        1,
        0.01,
        RESERVATION_ID_LABEL,
    ));
    let it = new_instance_type(
        "reservable",
        InstanceTypeOptions {
            offerings,
            ..Default::default()
        },
    );
    let mut c = Cluster::new().with_node_pool(node_pool("default", vec![it.into()]));
    let pods = ["a", "b"]
        .map(|n| {
            let mut p = labelled(n, "db");
            p.pod_anti_affinity = Some(PodAffinity {
                required: vec![PodAffinityTerm::new(app("db"), labels::HOSTNAME)],
                preferred: Vec::new(),
            });
            p
        })
        .to_vec();
    let round = c.provision(pods);
    let errors = &round.results.pod_errors;
    assert_eq!(errors.len(), 1);
    assert!(
        errors
            .values()
            .all(|e| e.kind == PodErrorKind::ReservedOffering)
    );
    assert_eq!(round.results.metrics.unschedulable_pods, 0);
}

/// Only pending pods get an effective zone.
#[test]
fn only_pending_pods_get_an_effective_zone() {
    let mut c = cluster();
    let mut running = pod("running");
    running.phase = PodPhase::Running;
    let round = c.provision(vec![running, pod("pending")]);
    assert_eq!(
        zones(&round),
        expect(&[(ZONE_FLEXIBLE, 1)]),
        "the running pod (e.g. from a deleting node) is scheduled but not counted"
    );
    assert_eq!(round.results.metrics.queue_depth_max, 2);
}

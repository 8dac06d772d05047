//! Ported `instance_selection_test.go` (upstream `instance_selection_test.go`): Describe "Instance
//! Type Selection" and its Context "MinValues".
//!
//! Upstream shuffles `InstanceTypesAssorted()` randomly before each test; here every scenario
//! runs over several fixed [`shuffle`] seeds. "Cheapest" means the launched node's cheapest
//! compatible offering costs the catalog's minimum price (0.2073741824, 1 cpu / 1 GiB); "every
//! candidate satisfies X" checks each instance type of the first NodeClaim (upstream: the
//! instance-type requirement of the first `Create` call).

use std::sync::Arc;

use karpenter_core::labels::{ARCH, CAPACITY_TYPE, INSTANCE_TYPE, OS, ZONE};
use karpenter_core::model::{ClusterNode, InstanceType, Offering, Pod};
use karpenter_core::requirements::{NodeSelectorRequirement, Operator, Requirement, Requirements};
use karpenter_core::resources::{Quantity, ResourceList, names};
use karpenter_core::scheduling::PodErrorKind;
use karpenter_fake::catalog::{
    InstanceTypeOptions, fake_label_policy, instance_types_assorted, new_instance_type, shuffle,
};
use karpenter_fake::harness::{Cluster, Round, node_pool};

use crate::topology_support::{pod, pods, req, req_in};

/// The shuffle seeds every scenario runs with.
const SEEDS: [u64; 3] = [1, 42, 20_240_601];

/// The assorted catalog shuffled with `seed`.
fn catalog(seed: u64) -> Vec<Arc<InstanceType>> {
    let mut types = instance_types_assorted();
    shuffle(&mut types, seed);
    types
}

/// The suite's pool: `capacity-type In [spot, on-demand]`, `arch In [arm64, amd64]`, over
/// `types`.
fn cluster_with(types: Vec<Arc<InstanceType>>) -> Cluster {
    let mut pool = node_pool("default", types);
    pool.requirements = vec![
        req_in(CAPACITY_TYPE, &["spot", "on-demand"]),
        req_in(ARCH, &["arm64", "amd64"]),
    ];
    Cluster::new().with_node_pool(pool)
}

fn set_pool_requirements(c: &mut Cluster, reqs: Vec<NodeSelectorRequirement>) {
    c.node_pool_mut("default")
        .expect("default pool")
        .requirements = reqs;
}

fn min_price(types: &[Arc<InstanceType>]) -> f64 {
    types
        .iter()
        .flat_map(|it| it.offerings.iter().map(|o| o.price))
        .fold(f64::MAX, f64::min)
}

/// Upstream's `nodePrice`: the cheapest offering of the node's instance type compatible with
/// the node's labels.
fn node_price(types: &[Arc<InstanceType>], node: &ClusterNode) -> f64 {
    let name = &node.labels[INSTANCE_TYPE];
    let it = types
        .iter()
        .find(|it| &it.name == name)
        .expect("launched type is in the catalog");
    let reqs = Requirements::from_labels(node.labels.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    it.cheapest_offering(&reqs, &fake_label_policy())
        .expect("a compatible offering")
        .price
}

/// The instance types of the round's first NodeClaim.
fn candidates(round: &Round) -> &[Arc<InstanceType>] {
    &round
        .node_claims()
        .first()
        .expect("a NodeClaim was created")
        .instance_types
}

fn has_label(it: &InstanceType, key: &str, value: &str) -> bool {
    match key {
        ARCH | OS => it.requirements.get(key).is_some_and(|r| r.has(value)),
        ZONE => it.offerings.iter().any(|o| o.zone == value),
        CAPACITY_TYPE => it.offerings.iter().any(|o| o.capacity_type == value),
        _ => panic!("unsupported label {key}"),
    }
}

/// Upstream `ExpectInstancesWithLabel`.
fn expect_label(round: &Round, key: &str, value: &str) {
    let cands = candidates(round);
    assert!(!cands.is_empty());
    for it in cands {
        assert!(has_label(it, key, value), "{} lacks {key}={value}", it.name);
    }
}

/// Upstream `ExpectInstancesWithOffering`.
fn expect_offering(round: &Round, capacity_type: &str, zone: &str) {
    let cands = candidates(round);
    assert!(!cands.is_empty());
    for it in cands {
        assert!(
            it.offerings
                .iter()
                .any(|o| o.capacity_type == capacity_type && o.zone == zone),
            "{} lacks a {capacity_type}/{zone} offering",
            it.name
        );
    }
}

/// Runs one unconstrained-size pod built by `pod_reqs` on the suite cluster (pool requirements
/// replaced by `pool_reqs` when given) for every seed; asserts it lands on a cheapest instance
/// and hands the round to `check`.
fn cheapest(
    pool_reqs: Option<Vec<NodeSelectorRequirement>>,
    pod_reqs: &[NodeSelectorRequirement],
    check: impl Fn(&Round),
) {
    for seed in SEEDS {
        let types = catalog(seed);
        let min = min_price(&types);
        let mut c = cluster_with(types.clone());
        if let Some(reqs) = pool_reqs.clone() {
            set_pool_requirements(&mut c, reqs);
        }
        let mut b = pod();
        for r in pod_reqs {
            b = b.node_requirement(r.clone());
        }
        let p = b.build();
        let round = c.provision(vec![p.clone()]);
        let node = round
            .node_of(&p.key())
            .unwrap_or_else(|| panic!("seed {seed}: not scheduled"));
        assert_eq!(node_price(&types, node), min, "seed {seed}");
        check(&round);
    }
}

#[test]
fn should_schedule_on_one_of_the_cheapest_instances() {
    cheapest(None, &[], |_| {});
}

#[test]
fn should_schedule_on_one_of_the_cheapest_instances_pod_arch_amd64() {
    cheapest(None, &[req_in(ARCH, &["amd64"])], |r| {
        expect_label(r, ARCH, "amd64")
    });
}

#[test]
fn should_schedule_on_one_of_the_cheapest_instances_pod_arch_arm64() {
    cheapest(None, &[req_in(ARCH, &["arm64"])], |r| {
        expect_label(r, ARCH, "arm64")
    });
}

#[test]
fn should_schedule_on_one_of_the_cheapest_instances_prov_arch_amd64() {
    cheapest(Some(vec![req_in(ARCH, &["amd64"])]), &[], |r| {
        expect_label(r, ARCH, "amd64")
    });
}

#[test]
fn should_schedule_on_one_of_the_cheapest_instances_prov_arch_arm64() {
    cheapest(Some(vec![req_in(ARCH, &["arm64"])]), &[], |r| {
        expect_label(r, ARCH, "arm64")
    });
}

/// Upstream has this It twice, identically.
#[test]
fn should_schedule_on_one_of_the_cheapest_instances_prov_os_windows() {
    cheapest(Some(vec![req_in(OS, &["windows"])]), &[], |r| {
        expect_label(r, OS, "windows")
    });
}

#[test]
fn should_schedule_on_one_of_the_cheapest_instances_pod_os_windows() {
    cheapest(None, &[req_in(OS, &["windows"])], |r| {
        expect_label(r, OS, "windows")
    });
}

/// Upstream has this It twice, identically.
#[test]
fn should_schedule_on_one_of_the_cheapest_instances_pod_os_linux() {
    cheapest(None, &[req_in(OS, &["linux"])], |r| {
        expect_label(r, OS, "linux")
    });
}

#[test]
fn should_schedule_on_one_of_the_cheapest_instances_prov_zone_test_zone_2() {
    cheapest(Some(vec![req_in(ZONE, &["test-zone-2"])]), &[], |r| {
        expect_label(r, ZONE, "test-zone-2")
    });
}

#[test]
fn should_schedule_on_one_of_the_cheapest_instances_pod_zone_test_zone_2() {
    cheapest(None, &[req_in(ZONE, &["test-zone-2"])], |r| {
        expect_label(r, ZONE, "test-zone-2")
    });
}

#[test]
fn should_schedule_on_one_of_the_cheapest_instances_prov_ct_spot() {
    cheapest(Some(vec![req_in(CAPACITY_TYPE, &["spot"])]), &[], |r| {
        expect_label(r, CAPACITY_TYPE, "spot")
    });
}

#[test]
fn should_schedule_on_one_of_the_cheapest_instances_pod_ct_spot() {
    cheapest(None, &[req_in(CAPACITY_TYPE, &["spot"])], |r| {
        expect_label(r, CAPACITY_TYPE, "spot")
    });
}

#[test]
fn should_schedule_on_one_of_the_cheapest_instances_prov_ct_ondemand_prov_zone_test_zone_1() {
    cheapest(
        Some(vec![
            req_in(CAPACITY_TYPE, &["on-demand"]),
            req_in(ZONE, &["test-zone-1"]),
        ]),
        &[],
        |r| expect_offering(r, "on-demand", "test-zone-1"),
    );
}

#[test]
fn should_schedule_on_one_of_the_cheapest_instances_pod_ct_spot_pod_zone_test_zone_1() {
    cheapest(
        None,
        &[
            req_in(CAPACITY_TYPE, &["spot"]),
            req_in(ZONE, &["test-zone-1"]),
        ],
        |r| expect_offering(r, "spot", "test-zone-1"),
    );
}

#[test]
fn should_schedule_on_one_of_the_cheapest_instances_prov_ct_spot_pod_zone_test_zone_2() {
    cheapest(
        Some(vec![req_in(CAPACITY_TYPE, &["spot"])]),
        &[req_in(ZONE, &["test-zone-2"])],
        |r| expect_offering(r, "spot", "test-zone-2"),
    );
}

#[test]
fn should_schedule_on_one_of_the_cheapest_instances_prov_ct_ondemand_test_zone_1_arm64_windows() {
    cheapest(
        Some(vec![
            req_in(ARCH, &["arm64"]),
            req_in(OS, &["windows"]),
            req_in(CAPACITY_TYPE, &["on-demand"]),
            req_in(ZONE, &["test-zone-1"]),
        ]),
        &[],
        |r| {
            expect_offering(r, "on-demand", "test-zone-1");
            expect_label(r, OS, "windows");
            expect_label(r, ARCH, "arm64");
        },
    );
}

/// Upstream's name says "prov = spot/test-zone-2, pod = amd64/linux" but its body restricts the
/// pool to amd64/linux and the pod to spot/test-zone-2; the body is ported.
#[test]
fn should_schedule_on_one_of_the_cheapest_instances_prov_spot_test_zone_2_pod_amd64_linux() {
    cheapest(
        Some(vec![req_in(ARCH, &["amd64"]), req_in(OS, &["linux"])]),
        &[
            req_in(CAPACITY_TYPE, &["spot"]),
            req_in(ZONE, &["test-zone-2"]),
        ],
        |r| {
            expect_offering(r, "spot", "test-zone-2");
            expect_label(r, OS, "linux");
            expect_label(r, ARCH, "amd64");
        },
    );
}

#[test]
fn should_schedule_on_one_of_the_cheapest_instances_pod_ct_spot_test_zone_2_amd64_linux() {
    cheapest(
        None,
        &[
            req_in(ARCH, &["amd64"]),
            req_in(OS, &["linux"]),
            req_in(CAPACITY_TYPE, &["spot"]),
            req_in(ZONE, &["test-zone-2"]),
        ],
        |r| {
            expect_offering(r, "spot", "test-zone-2");
            expect_label(r, OS, "linux");
            expect_label(r, ARCH, "amd64");
        },
    );
}

/// Removes the arm64 types offered in test-zone-2 (upstream's filter for the next two
/// scenarios).
fn without_zone_2_arm(types: Vec<Arc<InstanceType>>) -> Vec<Arc<InstanceType>> {
    types
        .into_iter()
        .filter(|it| {
            !it.offerings.iter().any(|o| o.zone == "test-zone-2") || has_label(it, ARCH, "amd64")
        })
        .collect()
}

fn expect_unschedulable(c: &mut Cluster, p: Pod) {
    let round = c.provision(vec![p.clone()]);
    assert!(!round.scheduled(&p.key()));
    assert!(round.node_claims().is_empty(), "no create call");
}

#[test]
fn should_not_schedule_if_no_instance_type_matches_selector_pod_arch_arm() {
    for seed in SEEDS {
        let types: Vec<_> = catalog(seed)
            .into_iter()
            .filter(|it| has_label(it, ARCH, "amd64"))
            .collect();
        assert!(!types.is_empty());
        let mut c = cluster_with(types);
        expect_unschedulable(
            &mut c,
            pod().node_requirement(req_in(ARCH, &["arm64"])).build(),
        );
    }
}

#[test]
fn should_not_schedule_if_no_instance_type_matches_selector_pod_arch_arm_zone_test_zone_2() {
    for seed in SEEDS {
        let types = without_zone_2_arm(catalog(seed));
        assert!(!types.is_empty());
        let mut c = cluster_with(types);
        expect_unschedulable(
            &mut c,
            pod()
                .node_requirement(req_in(ARCH, &["arm64"]))
                .node_requirement(req_in(ZONE, &["test-zone-2"]))
                .build(),
        );
    }
}

#[test]
fn should_not_schedule_if_no_instance_type_matches_selector_prov_arch_arm_pod_zone_test_zone_2() {
    for seed in SEEDS {
        let types = without_zone_2_arm(catalog(seed));
        assert!(!types.is_empty());
        let mut c = cluster_with(types);
        set_pool_requirements(&mut c, vec![req_in(ARCH, &["arm64"])]);
        expect_unschedulable(
            &mut c,
            pod()
                .node_requirement(req_in(ZONE, &["test-zone-2"]))
                .build(),
        );
    }
}

#[test]
fn should_schedule_on_an_instance_with_enough_resources() {
    let types = catalog(SEEDS[0]);
    let before: Vec<(ResourceList, ResourceList)> = types
        .iter()
        .map(|it| (it.capacity.clone(), it.overhead.total()))
        .collect();
    // Three of these pods always fit on at least one instance type.
    for cpu in [0.1, 1.0, 2.0, 2.5, 4.0, 8.0, 16.0] {
        for mem in [0.1, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0] {
            let mut c = cluster_with(types.clone());
            let (cpu_q, mem_q) = (format!("{cpu:.1}"), format!("{mem:.1}Gi"));
            let ps = pods(3, |p| p.cpu(&cpu_q).memory(&mem_q));
            let round = c.provision(ps.clone());
            let nodes: std::collections::BTreeSet<_> = ps
                .iter()
                .map(|p| {
                    round
                        .node_of(&p.key())
                        .unwrap_or_else(|| panic!("{cpu_q}/{mem_q}: not scheduled"))
                        .name
                        .clone()
                })
                .collect();
            assert_eq!(nodes.len(), 1, "{cpu_q}/{mem_q}: one node");
            let per_pod = |q: &str| Quantity::parse(q).unwrap();
            for it in candidates(&round) {
                let overhead = it.overhead.total();
                let total_cpu = per_pod(&cpu_q)
                    + per_pod(&cpu_q)
                    + per_pod(&cpu_q)
                    + overhead.get_or_zero(names::CPU);
                let total_mem = per_pod(&mem_q)
                    + per_pod(&mem_q)
                    + per_pod(&mem_q)
                    + overhead.get_or_zero(names::MEMORY);
                assert!(
                    total_cpu < it.capacity.get_or_zero(names::CPU),
                    "{}",
                    it.name
                );
                assert!(
                    total_mem < it.capacity.get_or_zero(names::MEMORY),
                    "{}",
                    it.name
                );
            }
        }
    }
    for (it, (capacity, overhead)) in types.iter().zip(&before) {
        assert_eq!(&it.capacity, capacity, "{} capacity modified", it.name);
        assert_eq!(
            &it.overhead.total(),
            overhead,
            "{} overhead modified",
            it.name
        );
    }
}

/// A fake type (arch, linux, `cpu`/`memory`) with the given offerings and extra requirements.
fn custom_type(
    name: &str,
    arch: &str,
    cpu: &str,
    memory: &str,
    offerings: Vec<Offering>,
    extra: Vec<Requirement>,
) -> Arc<InstanceType> {
    let mut resources = ResourceList::new();
    resources.insert(names::CPU, Quantity::parse(cpu).unwrap());
    resources.insert(names::MEMORY, Quantity::parse(memory).unwrap());
    Arc::new(new_instance_type(
        name,
        InstanceTypeOptions {
            resources,
            offerings,
            architecture: arch.to_string(),
            operating_systems: vec!["linux".to_string()],
            requirements: extra,
        },
    ))
}

#[test]
fn should_schedule_on_cheaper_on_demand_instance_even_when_spot_price_ordering_would_place_other_instance_types_first()
 {
    let offerings = |od: f64, spot: f64| {
        vec![
            Offering::new("test-zone-1a", "on-demand", od),
            Offering::new("test-zone-1a", "spot", spot),
        ]
    };
    let types = vec![
        custom_type(
            "test-instance1",
            "amd64",
            "1",
            "1Gi",
            offerings(1.0, 0.2),
            vec![],
        ),
        custom_type(
            "test-instance2",
            "amd64",
            "1",
            "1Gi",
            offerings(1.3, 0.1),
            vec![],
        ),
    ];
    let mut c = cluster_with(types);
    set_pool_requirements(&mut c, vec![req_in(CAPACITY_TYPE, &["on-demand"])]);
    let p = pod().build();
    let round = c.provision(vec![p.clone()]);
    let node = round.node_of(&p.key()).expect("scheduled");
    assert_eq!(node.labels[INSTANCE_TYPE], "test-instance1");
}

/// Context "MinValues": pods of 0.9 cpu / 0.9 GiB, so two pods fit only on the bigger types.
mod min_values {
    use super::*;

    const NUMERICAL: &str = "karpenter/numerical-value";

    /// A spot type in `test-zone-1-spot` priced `price`, with `numerical-value In [value]` when
    /// given.
    fn mv_type(
        name: &str,
        arch: &str,
        cpu: &str,
        price: f64,
        value: Option<&str>,
    ) -> Arc<InstanceType> {
        let memory = format!("{cpu}Gi");
        custom_type(
            name,
            arch,
            cpu,
            &memory,
            vec![Offering::new("test-zone-1-spot", "spot", price)],
            value
                .map(|v| vec![Requirement::new(NUMERICAL, Operator::In, [v])])
                .unwrap_or_default(),
        )
    }

    fn with_min(mut r: NodeSelectorRequirement, min: i64) -> NodeSelectorRequirement {
        r.min_values = Some(min);
        r
    }

    fn cluster(types: Vec<Arc<InstanceType>>, reqs: Vec<NodeSelectorRequirement>) -> Cluster {
        let mut pool = node_pool("default", types);
        pool.requirements = reqs;
        Cluster::new().with_node_pool(pool)
    }

    fn two_pods(extra: &[NodeSelectorRequirement]) -> Vec<Pod> {
        pods(2, |p| {
            let mut p = p.cpu("0.9").memory("0.9Gi");
            for r in extra {
                p = p.node_requirement(r.clone());
            }
            p
        })
    }

    /// Both pods schedule, on different nodes, and the first NodeClaim keeps ≥ 2 candidates.
    fn expect_two_nodes(c: &mut Cluster) {
        let ps = two_pods(&[]);
        let round = c.provision(ps.clone());
        let n1 = round
            .node_of(&ps[0].key())
            .expect("pod 1 scheduled")
            .name
            .clone();
        let n2 = round
            .node_of(&ps[1].key())
            .expect("pod 2 scheduled")
            .name
            .clone();
        assert_ne!(n1, n2);
        assert!(candidates(&round).len() >= 2);
    }

    fn expect_none(c: &mut Cluster, ps: Vec<Pod>) -> Round {
        let round = c.provision(ps.clone());
        for p in &ps {
            assert!(!round.scheduled(&p.key()), "{} scheduled", p.key());
        }
        round
    }

    #[test]
    fn should_schedule_respecting_the_min_values_from_instance_type_requirements() {
        let mut c = cluster(
            vec![
                mv_type("instance-type-1", "arm64", "1", 0.52, None),
                mv_type("instance-type-2", "arm64", "4", 1.0, None),
            ],
            vec![with_min(
                req_in(INSTANCE_TYPE, &["instance-type-1", "instance-type-2"]),
                2,
            )],
        );
        expect_two_nodes(&mut c);
    }

    #[test]
    fn should_schedule_respecting_the_min_values_in_gt_operator() {
        let mut c = cluster(
            vec![
                mv_type("instance-type-1", "arm64", "1", 0.52, Some("2")),
                mv_type("instance-type-2", "arm64", "1", 1.0, Some("3")),
                mv_type("instance-type-3", "arm64", "4", 1.2, Some("4")),
            ],
            vec![with_min(req(NUMERICAL, Operator::Gt, &["2"]), 2)],
        );
        expect_two_nodes(&mut c);
    }

    #[test]
    fn scheduler_should_fail_if_the_min_values_in_gt_operator_is_not_satisfied() {
        let mut c = cluster(
            vec![
                mv_type("instance-type-1", "arm64", "1", 0.52, Some("2")),
                mv_type("instance-type-2", "arm64", "4", 1.0, Some("3")),
            ],
            vec![with_min(req(NUMERICAL, Operator::Exists, &[]), 2)],
        );
        let ps = two_pods(&[req(NUMERICAL, Operator::Gt, &["2"])]);
        let round = expect_none(&mut c, ps.clone());
        for p in &ps {
            let err = round.results.pod_errors.get(&p.key()).expect("a pod error");
            assert_eq!(err.kind, PodErrorKind::MinValues, "{err}");
            assert!(
                err.message.contains(
                    "minValues requirement is not met for label(s) (label(s)=[karpenter/numerical-value])"
                ),
                "{err}"
            );
        }
    }

    #[test]
    fn should_schedule_respecting_the_min_values_in_lt_operator() {
        let mut c = cluster(
            vec![
                mv_type("instance-type-1", "arm64", "1", 0.52, Some("2")),
                mv_type("instance-type-2", "arm64", "2", 1.0, Some("3")),
                mv_type("instance-type-3", "arm64", "4", 1.2, Some("4")),
            ],
            vec![with_min(req(NUMERICAL, Operator::Lt, &["4"]), 2)],
        );
        expect_two_nodes(&mut c);
    }

    #[test]
    fn scheduler_should_fail_if_the_min_values_in_lt_operator_is_not_satisfied() {
        let mut c = cluster(
            vec![
                mv_type("instance-type-1", "arm64", "2", 0.52, Some("2")),
                mv_type("instance-type-2", "arm64", "4", 1.2, Some("4")),
            ],
            vec![with_min(req(NUMERICAL, Operator::Lt, &["4"]), 2)],
        );
        expect_none(&mut c, two_pods(&[]));
    }

    #[test]
    fn should_schedule_considering_the_max_of_the_min_values_of_in_and_not_in_operators_in_the_instance_type_requirements()
     {
        let mut c = cluster(
            vec![
                mv_type("instance-type-1", "arm64", "1", 0.52, None),
                mv_type("instance-type-2", "arm64", "2", 1.0, None),
                mv_type("instance-type-3", "arm64", "4", 1.2, None),
            ],
            vec![
                with_min(
                    req_in(
                        INSTANCE_TYPE,
                        &["instance-type-1", "instance-type-2", "instance-type-3"],
                    ),
                    1,
                ),
                with_min(req(INSTANCE_TYPE, Operator::NotIn, &["instance-type-3"]), 2),
            ],
        );
        expect_two_nodes(&mut c);
    }

    #[test]
    fn should_schedule_considering_the_max_of_the_min_values_of_gt_and_lt_operators() {
        let mut c = cluster(
            vec![
                mv_type("instance-type-1", "arm64", "1", 0.52, Some("2")),
                mv_type("instance-type-2", "arm64", "1", 1.0, Some("3")),
                mv_type("instance-type-3", "arm64", "4", 1.2, Some("4")),
                mv_type("instance-type-4", "arm64", "4", 1.2, Some("5")),
            ],
            vec![
                with_min(req(NUMERICAL, Operator::Gt, &["2"]), 1),
                with_min(req(NUMERICAL, Operator::Lt, &["5"]), 2),
            ],
        );
        expect_two_nodes(&mut c);
    }

    #[test]
    fn schedule_should_fail_if_minimum_number_of_instance_types_is_not_met_as_per_the_min_values_in_the_requirement()
     {
        for seed in SEEDS {
            let types: Vec<_> = catalog(seed).into_iter().take(10).collect();
            let mut c = cluster(
                types,
                vec![with_min(req(INSTANCE_TYPE, Operator::Exists, &[]), 11)],
            );
            expect_none(&mut c, vec![pod().build()]);
        }
    }

    #[test]
    fn schedule_should_fail_if_minimum_number_of_instance_types_is_not_met_as_per_the_min_values_in_the_requirement_after_truncation()
     {
        let mut c = cluster(
            vec![
                mv_type("instance-type-1", "arm64", "1", 0.52, None),
                mv_type("instance-type-2", "arm64", "4", 1.0, None),
            ],
            vec![with_min(
                req_in(INSTANCE_TYPE, &["instance-type-1", "instance-type-2"]),
                2,
            )],
        );
        c.options.max_instance_types = 1;
        expect_none(&mut c, two_pods(&[]));
    }

    #[test]
    fn should_schedule_and_pick_the_max_of_min_values_of_instance_types_if_multiple_operators_are_used_for_the_same_requirement()
     {
        let mut c = cluster(
            vec![
                mv_type("instance-type-1", "arm64", "1", 0.52, None),
                mv_type("instance-type-2", "arm64", "4", 1.0, None),
            ],
            vec![
                with_min(req(INSTANCE_TYPE, Operator::Exists, &[]), 1),
                with_min(
                    req_in(INSTANCE_TYPE, &["instance-type-1", "instance-type-2"]),
                    2,
                ),
            ],
        );
        expect_two_nodes(&mut c);
    }

    #[test]
    fn should_schedule_and_respect_multiple_requirement_keys_with_min_values() {
        let mut c = cluster(
            vec![
                mv_type("instance-type-1", "arm64", "1", 0.52, None),
                mv_type("instance-type-2", "amd64", "4", 1.0, None),
            ],
            vec![
                with_min(req(ARCH, Operator::Exists, &[]), 2),
                with_min(
                    req_in(INSTANCE_TYPE, &["instance-type-1", "instance-type-2"]),
                    1,
                ),
            ],
        );
        expect_two_nodes(&mut c);
    }
}

//! Upstream's NodeOverlay controller scenarios (`pkg/controllers/nodeoverlay/suite_test.go`),
//! on fixtures of our own.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::json;

use super::*;
use crate::api::NodeOverlay;
use crate::labels::LabelPolicy;
use crate::model::{InstanceType, Offering, Overhead};
use crate::requirements::{Operator, Requirement, Requirements};
use crate::resources::{Quantity, ResourceList};

fn q(s: &str) -> Quantity {
    Quantity::parse(s).unwrap()
}

fn instance_type(name: &str, arch: &str, offerings: &[(&str, &str, f64)]) -> Arc<InstanceType> {
    let mut reqs = Requirements::new();
    reqs.add(Requirement::new("kubernetes.io/arch", Operator::In, [arch]));
    reqs.add(Requirement::new(
        "kubernetes.io/os",
        Operator::In,
        ["linux"],
    ));
    let capacity: ResourceList = [("cpu", q("4")), ("memory", q("16Gi")), ("pods", q("110"))]
        .into_iter()
        .collect();
    let offerings = offerings
        .iter()
        .map(|(zone, ct, price)| Offering::new(*zone, *ct, *price))
        .collect();
    Arc::new(InstanceType::new(
        name,
        reqs,
        offerings,
        capacity,
        Overhead::default(),
    ))
}

/// The default fixture: one type, one spot offering in test-zone-1 at 1.02 (upstream's).
fn default_type() -> Arc<InstanceType> {
    instance_type(
        "default-instance-type",
        "amd64",
        &[("test-zone-1", "spot", 1.02)],
    )
}

fn overlay(name: &str, spec: serde_json::Value) -> NodeOverlay {
    let o: NodeOverlay = serde_json::from_value(json!({
        "apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay",
        "metadata": {"name": name}, "spec": spec
    }))
    .unwrap();
    assert_eq!(o.validate(), Ok(()), "fixture {name} is valid");
    o
}

fn req(key: &str, op: &str, values: &[&str]) -> serde_json::Value {
    json!({"key": key, "operator": op, "values": values})
}

struct Pool {
    name: String,
    labels: BTreeMap<String, String>,
    types: Vec<Arc<InstanceType>>,
}

fn pool(name: &str, types: Vec<Arc<InstanceType>>) -> Pool {
    Pool {
        name: name.into(),
        labels: BTreeMap::new(),
        types,
    }
}

fn run(overlays: &[NodeOverlay], pools: &[Pool]) -> Applied {
    let views: Vec<PoolTypes<'_>> = pools
        .iter()
        .map(|p| PoolTypes {
            name: &p.name,
            labels: &p.labels,
            instance_types: &p.types,
        })
        .collect();
    apply(overlays, &views, &LabelPolicy::core())
}

fn prices(a: &Applied, pool: &str, it: &str) -> Vec<f64> {
    a.instance_types[pool]
        .iter()
        .find(|t| t.name() == it)
        .unwrap()
        .offerings
        .iter()
        .map(|o| (o.price * 1e6).round() / 1e6)
        .collect()
}

fn capacity(a: &Applied, pool: &str, it: &str, resource: &str) -> Option<Quantity> {
    a.instance_types[pool]
        .iter()
        .find(|t| t.name() == it)
        .unwrap()
        .capacity()
        .get(resource)
}

fn outcome<'a>(a: &'a Applied, name: &str) -> &'a Outcome {
    &a.outcomes[name]
}

#[test]
fn zero_overlays_leave_instance_types_untouched() {
    let pools = [pool("default", vec![default_type()])];
    let a = run(&[], &pools);
    assert!(Arc::ptr_eq(
        &a.instance_types["default"][0],
        &pools[0].types[0]
    ));
    assert!(a.outcomes.is_empty());
}

#[test]
fn a_single_overlay_passes_and_applies_its_price() {
    for (spec, want) in [
        (json!({"requirements": [], "price": "13234.223"}), 13234.223),
        (
            json!({"requirements": [], "priceAdjustment": "+1000"}),
            1001.02,
        ),
    ] {
        let a = run(
            &[overlay("a", spec)],
            &[pool("default", vec![default_type()])],
        );
        assert_eq!(outcome(&a, "a"), &Outcome::Applied);
        assert_eq!(outcome(&a, "a").condition().0, "True");
        assert_eq!(prices(&a, "default", "default-instance-type"), [want]);
        assert!(a.price_overlaid["default"].contains("default-instance-type"));
    }
}

#[test]
fn runtime_validation_failures_are_reported_and_not_applied() {
    // A requirement on a restricted key (accepted by the CRD's pattern, refused at runtime).
    let mut bad = overlay("bad", json!({"requirements": [], "price": "13234.223"}));
    bad.spec.requirements = vec![crate::api::OverlayRequirement {
        key: "kubernetes.io/hostname".into(),
        operator: Operator::In,
        values: vec!["x".into()],
    }];
    let mut cap = overlay(
        "cap",
        json!({"requirements": [], "capacity": {"example.com/fuse": "1"}}),
    );
    cap.spec.capacity = Some([("memory", q("1Gi"))].into_iter().collect());
    let a = run(&[bad, cap], &[pool("default", vec![default_type()])]);
    for name in ["bad", "cap"] {
        let (status, reason, _) = outcome(&a, name).condition();
        assert_eq!((status, reason), ("False", "RuntimeValidation"), "{name}");
    }
    assert_eq!(prices(&a, "default", "default-instance-type"), [1.02]);
    assert_eq!(
        capacity(&a, "default", "default-instance-type", "memory"),
        Some(q("16Gi"))
    );
}

fn arm_and_amd() -> Vec<Arc<InstanceType>> {
    vec![
        instance_type(
            "arm-instance-type",
            "arm64",
            &[
                ("test-zone-1", "spot", 1.0),
                ("test-zone-1", "on-demand", 2.0),
            ],
        ),
        instance_type(
            "amd-instance-type",
            "amd64",
            &[
                ("test-zone-1", "spot", 1.5),
                ("test-zone-2", "on-demand", 3.0),
            ],
        ),
    ]
}

#[test]
fn overlapping_instance_type_requirements_at_equal_weight_conflict() {
    let a_ = overlay(
        "overlay-a",
        json!({"requirements": [req("kubernetes.io/arch", "In", &["arm64"])], "weight": 10, "price": "1.03"}),
    );
    let b = overlay(
        "overlay-b",
        json!({"requirements": [req("karpenter.sh/capacity-type", "Exists", &[])], "weight": 10, "price": "23"}),
    );
    let a = run(&[a_, b], &[pool("default", arm_and_amd())]);
    // Equal weights: the name later in the alphabet goes first, so overlay-a conflicts.
    assert_eq!(outcome(&a, "overlay-b"), &Outcome::Applied);
    assert_eq!(outcome(&a, "overlay-a"), &Outcome::Conflict);
    assert_eq!(
        outcome(&a, "overlay-a").condition().2,
        "conflict with another overlay"
    );
    assert_eq!(prices(&a, "default", "arm-instance-type"), [23.0, 23.0]);
    assert_eq!(prices(&a, "default", "amd-instance-type"), [23.0, 23.0]);
}

#[test]
fn disjoint_instance_type_requirements_do_not_conflict() {
    let arm = overlay(
        "overlay-a",
        json!({"requirements": [req("kubernetes.io/arch", "In", &["arm64"])], "weight": 10, "price": "1.03"}),
    );
    let amd = overlay(
        "overlay-b",
        json!({"requirements": [req("kubernetes.io/arch", "In", &["amd64"])], "weight": 10, "price": "23"}),
    );
    let a = run(&[arm, amd], &[pool("default", arm_and_amd())]);
    assert_eq!(outcome(&a, "overlay-a"), &Outcome::Applied);
    assert_eq!(outcome(&a, "overlay-b"), &Outcome::Applied);
    assert_eq!(prices(&a, "default", "arm-instance-type"), [1.03, 1.03]);
    assert_eq!(prices(&a, "default", "amd-instance-type"), [23.0, 23.0]);
}

#[test]
fn offering_requirements_conflict_on_shared_zone_or_capacity_type_only() {
    let zone = "topology.kubernetes.io/zone";
    let ct = "karpenter.sh/capacity-type";
    let cases = [
        // Overlap on a zone: conflict.
        (
            req(zone, "In", &["test-zone-1"]),
            req(zone, "In", &["test-zone-1", "test-zone-2"]),
            true,
        ),
        // Overlap on a capacity type: conflict.
        (
            req(ct, "In", &["spot"]),
            req(ct, "In", &["spot", "on-demand"]),
            true,
        ),
        // Disjoint zones: no conflict.
        (
            req(zone, "In", &["test-zone-1"]),
            req(zone, "In", &["test-zone-2"]),
            false,
        ),
        // Disjoint capacity types: no conflict.
        (req(ct, "In", &["spot"]), req(ct, "NotIn", &["spot"]), false),
    ];
    for (ra, rb, conflict) in cases {
        let a_ = overlay(
            "overlay-a",
            json!({"requirements": [ra], "weight": 10, "priceAdjustment": "+54"}),
        );
        let b = overlay(
            "overlay-b",
            json!({"requirements": [rb], "weight": 10, "priceAdjustment": "-2"}),
        );
        let a = run(&[a_, b], &[pool("default", arm_and_amd())]);
        assert_eq!(outcome(&a, "overlay-b"), &Outcome::Applied);
        let want = if conflict {
            Outcome::Conflict
        } else {
            Outcome::Applied
        };
        assert_eq!(outcome(&a, "overlay-a"), &want);
    }
}

#[test]
fn identical_price_changes_at_equal_weight_still_conflict() {
    for field in ["price", "priceAdjustment"] {
        let value = if field == "price" { "100" } else { "+100" };
        let a_ = overlay(
            "overlay-a",
            json!({"requirements": [], "weight": 10, field: value}),
        );
        let b = overlay(
            "overlay-b",
            json!({"requirements": [], "weight": 10, field: value}),
        );
        let a = run(&[a_, b], &[pool("default", vec![default_type()])]);
        assert_eq!(outcome(&a, "overlay-a"), &Outcome::Conflict, "{field}");
    }
}

#[test]
fn different_weights_do_not_conflict_and_the_heavier_wins() {
    for (heavy, light, want) in [
        (json!({"price": "34"}), json!({"price": "2"}), 34.0),
        (
            json!({"priceAdjustment": "-4"}),
            json!({"priceAdjustment": "-2"}),
            0.0,
        ),
        (
            json!({"priceAdjustment": "+1000"}),
            json!({"price": "2"}),
            1001.02,
        ),
    ] {
        let mut h = json!({"requirements": [], "weight": 20});
        let mut l = json!({"requirements": [], "weight": 10});
        h.as_object_mut()
            .unwrap()
            .extend(heavy.as_object().unwrap().clone());
        l.as_object_mut()
            .unwrap()
            .extend(light.as_object().unwrap().clone());
        let a = run(
            &[overlay("z-light", l), overlay("a-heavy", h)],
            &[pool("default", vec![default_type()])],
        );
        assert_eq!(outcome(&a, "a-heavy"), &Outcome::Applied);
        assert_eq!(outcome(&a, "z-light"), &Outcome::Applied);
        assert_eq!(prices(&a, "default", "default-instance-type"), [want]);
    }
}

#[test]
fn a_weightless_overlay_counts_as_weight_zero() {
    let a_ = overlay("a", json!({"requirements": [], "price": "5"}));
    let b = overlay("b", json!({"requirements": [], "price": "7"}));
    let c = overlay("c", json!({"requirements": [], "price": "9", "weight": 1}));
    let a = run(&[a_, b, c], &[pool("default", vec![default_type()])]);
    assert_eq!(outcome(&a, "c"), &Outcome::Applied);
    assert_eq!(
        outcome(&a, "b"),
        &Outcome::Applied,
        "0 differs from the last weight, 1"
    );
    assert_eq!(outcome(&a, "a"), &Outcome::Conflict, "same weight as b");
    assert_eq!(prices(&a, "default", "default-instance-type"), [9.0]);
}

#[test]
fn prices_apply_per_capacity_type_and_per_zone() {
    let types = || {
        vec![instance_type(
            "default-instance-type",
            "amd64",
            &[
                ("test-zone-1", "spot", 1.02),
                ("test-zone-1", "on-demand", 5.02),
                ("test-zone-2", "spot", 1.02),
            ],
        )]
    };
    let a = run(
        &[overlay(
            "od",
            json!({"requirements": [req("karpenter.sh/capacity-type", "In", &["on-demand"])], "priceAdjustment": "+1000"}),
        )],
        &[pool("default", types())],
    );
    assert_eq!(
        prices(&a, "default", "default-instance-type"),
        [1.02, 1005.02, 1.02]
    );
    let a = run(
        &[overlay(
            "z2",
            json!({"requirements": [req("topology.kubernetes.io/zone", "In", &["test-zone-2"])], "price": "121.421"}),
        )],
        &[pool("default", types())],
    );
    assert_eq!(
        prices(&a, "default", "default-instance-type"),
        [1.02, 5.02, 121.421]
    );
}

#[test]
fn overlays_not_matching_any_type_change_nothing() {
    let a = run(
        &[overlay(
            "a",
            json!({"requirements": [req("node.kubernetes.io/instance-type", "In", &["other"])], "price": "13234.223"}),
        )],
        &[pool("default", vec![default_type()])],
    );
    assert_eq!(outcome(&a, "a"), &Outcome::Applied);
    assert_eq!(prices(&a, "default", "default-instance-type"), [1.02]);
    assert!(a.price_overlaid.is_empty());
}

#[test]
fn nodepool_and_template_label_requirements_select_pools() {
    let mut labelled = pool("labelled", vec![default_type()]);
    labelled.labels.insert("team".into(), "ml".into());
    let pools = [
        pool("default", vec![default_type()]),
        labelled,
        pool("other", vec![default_type()]),
    ];
    let a = run(
        &[
            overlay(
                "by-pool",
                json!({"requirements": [req("karpenter.sh/nodepool", "In", &["default"])], "price": "7", "weight": 2}),
            ),
            overlay(
                "by-label",
                json!({"requirements": [req("team", "In", &["ml"])], "capacity": {"example.com/gpu-slice": "4"}, "price": "9", "weight": 1}),
            ),
        ],
        &pools,
    );
    assert_eq!(prices(&a, "default", "default-instance-type"), [7.0]);
    assert_eq!(prices(&a, "labelled", "default-instance-type"), [9.0]);
    assert_eq!(prices(&a, "other", "default-instance-type"), [1.02]);
    assert_eq!(
        capacity(
            &a,
            "labelled",
            "default-instance-type",
            "example.com/gpu-slice"
        ),
        Some(q("4"))
    );
    assert_eq!(
        capacity(
            &a,
            "default",
            "default-instance-type",
            "example.com/gpu-slice"
        ),
        None
    );
    // A label no pool has is an undefined key: nothing selected.
    let a = run(
        &[overlay(
            "none",
            json!({"requirements": [req("team", "In", &["web"])], "price": "1"}),
        )],
        &pools,
    );
    assert!(a.price_overlaid.is_empty());
}

#[test]
fn conflicts_in_any_pool_block_the_overlay_in_every_pool() {
    // overlay-a conflicts with overlay-b in "second" only, yet applies nowhere.
    let pools = [
        pool("first", vec![default_type()]),
        pool("second", vec![default_type()]),
    ];
    let b = overlay(
        "overlay-b",
        json!({"requirements": [req("karpenter.sh/nodepool", "In", &["second"])], "weight": 10, "price": "3"}),
    );
    let a_ = overlay(
        "overlay-a",
        json!({"requirements": [], "weight": 10, "price": "4"}),
    );
    let a = run(&[a_, b], &pools);
    assert_eq!(outcome(&a, "overlay-a"), &Outcome::Conflict);
    assert_eq!(prices(&a, "first", "default-instance-type"), [1.02]);
    assert_eq!(prices(&a, "second", "default-instance-type"), [3.0]);
}

#[test]
fn conflicts_on_one_type_block_the_overlay_on_every_type() {
    let b = overlay(
        "overlay-b",
        json!({"requirements": [req("kubernetes.io/arch", "In", &["arm64"])], "weight": 10, "price": "3"}),
    );
    let a_ = overlay(
        "overlay-a",
        json!({"requirements": [], "weight": 10, "price": "4"}),
    );
    let a = run(&[a_, b], &[pool("default", arm_and_amd())]);
    assert_eq!(outcome(&a, "overlay-a"), &Outcome::Conflict);
    assert_eq!(
        prices(&a, "default", "amd-instance-type"),
        [1.5, 3.0],
        "no partial application"
    );
    assert_eq!(prices(&a, "default", "arm-instance-type"), [3.0, 3.0]);
}

#[test]
fn capacity_overlays_conflict_only_on_a_shared_resource_at_equal_weight() {
    let gpu = "example.com/gpu";
    let fuse = "smarter-devices/fuse";
    // Same resource, same weight, overlapping types: conflict.
    let a = run(
        &[
            overlay(
                "overlay-a",
                json!({"requirements": [], "weight": 10, "capacity": {gpu: "1"}}),
            ),
            overlay(
                "overlay-b",
                json!({"requirements": [req("kubernetes.io/arch", "In", &["amd64"])], "weight": 10, "capacity": {gpu: "2"}}),
            ),
        ],
        &[pool("default", arm_and_amd())],
    );
    assert_eq!(outcome(&a, "overlay-a"), &Outcome::Conflict);
    assert_eq!(
        capacity(&a, "default", "amd-instance-type", gpu),
        Some(q("2"))
    );
    assert_eq!(capacity(&a, "default", "arm-instance-type", gpu), None);
    // Same resource, same weight, disjoint types: both apply.
    let a = run(
        &[
            overlay(
                "overlay-a",
                json!({"requirements": [req("kubernetes.io/arch", "In", &["arm64"])], "weight": 10, "capacity": {gpu: "1"}}),
            ),
            overlay(
                "overlay-b",
                json!({"requirements": [req("kubernetes.io/arch", "In", &["amd64"])], "weight": 10, "capacity": {gpu: "2"}}),
            ),
        ],
        &[pool("default", arm_and_amd())],
    );
    assert_eq!(
        capacity(&a, "default", "arm-instance-type", gpu),
        Some(q("1"))
    );
    assert_eq!(
        capacity(&a, "default", "amd-instance-type", gpu),
        Some(q("2"))
    );
    // Different resources, same weight: merged.
    let a = run(
        &[
            overlay(
                "overlay-a",
                json!({"requirements": [], "weight": 10, "capacity": {gpu: "1"}}),
            ),
            overlay(
                "overlay-b",
                json!({"requirements": [], "weight": 10, "capacity": {fuse: "3"}}),
            ),
        ],
        &[pool("default", vec![default_type()])],
    );
    assert_eq!(outcome(&a, "overlay-a"), &Outcome::Applied);
    assert_eq!(
        capacity(&a, "default", "default-instance-type", gpu),
        Some(q("1"))
    );
    assert_eq!(
        capacity(&a, "default", "default-instance-type", fuse),
        Some(q("3"))
    );
    // Same resource, different weights: the heavier wins, the rest merge in.
    let a = run(
        &[
            overlay(
                "light",
                json!({"requirements": [], "weight": 1, "capacity": {gpu: "1", fuse: "5"}}),
            ),
            overlay(
                "heavy",
                json!({"requirements": [], "weight": 9, "capacity": {gpu: "8"}}),
            ),
        ],
        &[pool("default", vec![default_type()])],
    );
    assert_eq!(
        capacity(&a, "default", "default-instance-type", gpu),
        Some(q("8"))
    );
    assert_eq!(
        capacity(&a, "default", "default-instance-type", fuse),
        Some(q("5"))
    );
    assert!(a.capacity_overlaid["default"].contains("default-instance-type"));
}

#[test]
fn capacity_overlays_raise_allocatable_and_keep_other_resources() {
    let a = run(
        &[overlay(
            "gpu",
            json!({"requirements": [], "capacity": {"example.com/gpu": "2"}}),
        )],
        &[pool("default", vec![default_type()])],
    );
    let it = &a.instance_types["default"][0];
    assert_eq!(it.allocatable().get("example.com/gpu"), Some(q("2")));
    assert_eq!(it.capacity().get("cpu"), Some(q("4")));
    assert_eq!(
        prices(&a, "default", "default-instance-type"),
        [1.02],
        "price untouched"
    );
}

#[test]
fn price_and_capacity_from_two_overlays_on_one_type() {
    let a = run(
        &[
            overlay(
                "price",
                json!({"requirements": [], "weight": 10, "price": "0.5"}),
            ),
            overlay(
                "capacity",
                json!({"requirements": [], "weight": 10, "capacity": {"example.com/gpu": "1"}}),
            ),
        ],
        &[pool("default", vec![default_type()])],
    );
    assert_eq!(outcome(&a, "price"), &Outcome::Applied);
    assert_eq!(outcome(&a, "capacity"), &Outcome::Applied);
    assert_eq!(prices(&a, "default", "default-instance-type"), [0.5]);
    assert_eq!(
        capacity(&a, "default", "default-instance-type", "example.com/gpu"),
        Some(q("1"))
    );
}

#[test]
fn multiple_overlays_update_different_offerings() {
    let t = || {
        vec![instance_type(
            "default-instance-type",
            "amd64",
            &[
                ("test-zone-1", "spot", 1.0),
                ("test-zone-2", "spot", 1.0),
                ("test-zone-3", "on-demand", 2.0),
            ],
        )]
    };
    let a = run(
        &[
            overlay(
                "z1",
                json!({"requirements": [req("topology.kubernetes.io/zone", "In", &["test-zone-1"])], "weight": 5, "price": "0.1"}),
            ),
            overlay(
                "z2",
                json!({"requirements": [req("topology.kubernetes.io/zone", "In", &["test-zone-2"])], "weight": 5, "price": "0.2"}),
            ),
            overlay(
                "od",
                json!({"requirements": [req("karpenter.sh/capacity-type", "In", &["on-demand"])], "weight": 5, "priceAdjustment": "-50%"}),
            ),
        ],
        &[pool("default", t())],
    );
    assert!(a.outcomes.values().all(|o| *o == Outcome::Applied));
    assert_eq!(
        prices(&a, "default", "default-instance-type"),
        [0.1, 0.2, 1.0]
    );
}

#[test]
fn empty_pools_give_empty_lists() {
    let a = run(
        &[overlay("a", json!({"requirements": [], "price": "1"}))],
        &[pool("default", vec![])],
    );
    assert!(a.instance_types["default"].is_empty());
    assert_eq!(outcome(&a, "a"), &Outcome::Applied);
}

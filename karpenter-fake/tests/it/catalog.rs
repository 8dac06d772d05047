use std::collections::BTreeSet;

use karpenter_core::labels;
use karpenter_core::model::{InstanceType, Offering};
use karpenter_core::requirements::{Operator, Requirement};
use karpenter_core::resources::{Quantity, ResourceList, names};
use karpenter_fake::catalog::{
    self, INTEGER_LABEL, InstanceTypeOptions, RESERVATION_ID_LABEL, SIZE_LABEL, SPECIAL_LABEL,
    default_catalog, fake_label_policy, instance_types, instance_types_assorted, new_instance_type,
    price_from_resources, shuffle,
};

const GI: i64 = 1 << 30;
const MI: i64 = 1 << 20;

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

fn values(it: &InstanceType, key: &str) -> Vec<String> {
    let r = it
        .requirements()
        .get(key)
        .unwrap_or_else(|| panic!("{key} undefined"));
    r.values().map(String::from).collect()
}

fn op(it: &InstanceType, key: &str) -> Operator {
    it.requirements()
        .get(key)
        .unwrap_or_else(|| panic!("{key} undefined"))
        .operator()
}

fn offering_pairs(it: &InstanceType) -> Vec<(String, String)> {
    it.offerings
        .iter()
        .map(|o| (o.capacity_type().to_string(), o.zone().to_string()))
        .collect()
}

fn default_pairs() -> Vec<(String, String)> {
    [
        ("spot", "test-zone-1"),
        ("spot", "test-zone-2"),
        ("on-demand", "test-zone-1"),
        ("on-demand", "test-zone-2"),
        ("on-demand", "test-zone-3"),
    ]
    .iter()
    .map(|(a, b)| (a.to_string(), b.to_string()))
    .collect()
}

#[test]
fn benchmark_catalog_prices_are_exact() {
    let types = instance_types(400);
    assert_eq!(types.len(), 400);
    // The spec's values, as f64 literals.
    assert_eq!(types[0].offerings[0].price, 0.3147483648);
    assert_eq!(types[4].offerings[0].price, 1.573741824);
    assert!(close(types[399].offerings[0].price, 125.89934592));
    for (i, it) in types.iter().enumerate() {
        assert_eq!(it.name(), format!("fake-it-{i}"));
        let expected = (i as f64 + 1.0) * 0.3147483648;
        for o in &it.offerings {
            assert!(close(o.price, expected), "{} price {}", it.name(), o.price);
        }
    }
    for pair in types.windows(2) {
        assert!(pair[0].offerings[0].price < pair[1].offerings[0].price);
    }
}

#[test]
fn fake_it_0_and_4() {
    let types = instance_types(5);
    let it0 = &types[0];
    assert_eq!(
        it0.capacity().get(names::CPU),
        Some(Quantity::from_units(1))
    );
    assert_eq!(
        it0.capacity().get(names::MEMORY),
        Some(Quantity::from_bytes(2 * GI))
    );
    assert_eq!(
        it0.capacity().get(names::PODS),
        Some(Quantity::from_units(10))
    );
    assert_eq!(
        it0.allocatable().get(names::CPU),
        Some(Quantity::from_milli(900))
    );
    assert_eq!(
        it0.allocatable().get(names::MEMORY),
        Some(Quantity::from_bytes(2 * GI - 10 * MI))
    );
    assert_eq!(
        it0.allocatable().get(names::PODS),
        Some(Quantity::from_units(10))
    );
    assert_eq!(values(it0, labels::INSTANCE_TYPE), ["fake-it-0"]);
    assert_eq!(values(it0, labels::ARCH), ["amd64"]);
    assert_eq!(values(it0, labels::OS), ["darwin", "linux", "windows"]);
    assert_eq!(
        values(it0, labels::ZONE),
        ["test-zone-1", "test-zone-2", "test-zone-3"]
    );
    assert_eq!(values(it0, labels::CAPACITY_TYPE), ["on-demand", "spot"]);
    assert_eq!(values(it0, INTEGER_LABEL), ["1"]);
    assert_eq!(values(it0, SIZE_LABEL), ["small"]);
    assert_eq!(op(it0, SPECIAL_LABEL), Operator::DoesNotExist);
    assert_eq!(offering_pairs(it0), default_pairs());
    assert!(
        it0.offerings
            .iter()
            .all(|o| o.available && o.reservation_id().is_none())
    );

    let it4 = &types[4];
    assert_eq!(
        it4.capacity().get(names::CPU),
        Some(Quantity::from_units(5))
    );
    assert_eq!(
        it4.capacity().get(names::MEMORY),
        Some(Quantity::from_bytes(10 * GI))
    );
    assert_eq!(
        it4.capacity().get(names::PODS),
        Some(Quantity::from_units(50))
    );
    assert_eq!(
        it4.allocatable().get(names::CPU),
        Some(Quantity::from_milli(4900))
    );
    assert_eq!(values(it4, INTEGER_LABEL), ["5"]);
    assert_eq!(values(it4, SIZE_LABEL), ["large"]);
    assert_eq!(values(it4, SPECIAL_LABEL), ["optional"]);
    // Offering requirements: exactly capacity type and zone.
    let o = &it4.offerings[0];
    let keys: Vec<&str> = o.requirements().keys().collect();
    assert_eq!(keys, [labels::CAPACITY_TYPE, labels::ZONE]);
}

#[test]
fn size_boundary_needs_both_cpu_and_memory() {
    let mk = |cpu: i64, mem_gi: i64| {
        let mut r = ResourceList::new();
        r.insert(names::CPU, Quantity::from_units(cpu));
        r.insert(names::MEMORY, Quantity::from_bytes(mem_gi * GI));
        new_instance_type("t", InstanceTypeOptions::with_resources(r))
    };
    assert_eq!(values(&mk(4, 64), SIZE_LABEL), ["small"]);
    assert_eq!(values(&mk(8, 8), SIZE_LABEL), ["small"]);
    assert_eq!(values(&mk(5, 9), SIZE_LABEL), ["large"]);
}

#[test]
fn defaults_and_overhead() {
    let it = new_instance_type("x", InstanceTypeOptions::default());
    assert_eq!(it.capacity().get(names::CPU), Some(Quantity::from_units(4)));
    assert_eq!(
        it.capacity().get(names::MEMORY),
        Some(Quantity::from_bytes(4 * GI))
    );
    assert_eq!(
        it.capacity().get(names::PODS),
        Some(Quantity::from_units(5))
    );
    assert_eq!(
        it.overhead().kube_reserved.get(names::CPU),
        Some(Quantity::from_milli(100))
    );
    assert_eq!(
        it.overhead().kube_reserved.get(names::MEMORY),
        Some(Quantity::from_bytes(10 * MI))
    );
    assert!(it.overhead().system_reserved.is_empty());
    assert!(it.overhead().eviction_threshold.is_empty());
    assert_eq!(it.offerings[0].price, 0.8294967296);

    // Zero counts as absent.
    let mut r = ResourceList::new();
    r.insert(names::CPU, Quantity::ZERO);
    let it = new_instance_type("y", InstanceTypeOptions::with_resources(r));
    assert_eq!(it.capacity().get(names::CPU), Some(Quantity::from_units(4)));
}

#[test]
fn options_are_honoured() {
    let offerings = vec![
        Offering::new("test-zone-2", "on-demand", 1.0),
        {
            let mut o = Offering::new("test-zone-3", "spot", 0.5);
            o.available = false;
            o
        },
        Offering::reserved("test-zone-1", "r-1", 2, 0.1, RESERVATION_ID_LABEL),
    ];
    let it = new_instance_type(
        "custom",
        InstanceTypeOptions {
            offerings,
            architecture: "arm64".into(),
            operating_systems: vec!["linux".into()],
            requirements: vec![Requirement::new("custom", Operator::In, ["a", "b"])],
            ..Default::default()
        },
    );
    assert_eq!(values(&it, labels::ARCH), ["arm64"]);
    assert_eq!(values(&it, labels::OS), ["linux"]);
    // Only available offerings contribute zones and capacity types.
    assert_eq!(values(&it, labels::ZONE), ["test-zone-1", "test-zone-2"]);
    assert_eq!(
        values(&it, labels::CAPACITY_TYPE),
        ["on-demand", "reserved"]
    );
    assert_eq!(values(&it, "custom"), ["a", "b"]);
    assert_eq!(it.offerings.len(), 3);
    assert_eq!(it.offerings[2].reservation_id(), Some("r-1"));
}

#[test]
fn pricing_rules() {
    let mut r = ResourceList::new();
    r.insert(names::CPU, Quantity::from_units(2));
    r.insert(names::MEMORY, Quantity::from_bytes(2 * GI));
    r.insert(names::PODS, Quantity::from_units(100));
    r.insert("fake.com/vendor-a", Quantity::from_units(7));
    r.insert("example.com/other", Quantity::from_units(3));
    assert!(close(price_from_resources(&r), 0.2 + 0.2147483648 + 1.0));
}

#[test]
fn default_catalog_contents() {
    let types = default_catalog();
    let names: Vec<&str> = types.iter().map(|t| t.name()).collect();
    assert_eq!(
        names,
        [
            "default-instance-type",
            "small-instance-type",
            "gpu-vendor-instance-type",
            "gpu-vendor-b-instance-type",
            "arm-instance-type",
            "single-pod-instance-type",
        ]
    );
    let price = |i: usize| types[i].offerings[0].price;
    assert_eq!(price(0), 0.8294967296);
    assert_eq!(price(1), 0.4147483648);
    assert!(close(price(2), 1.8294967296));
    assert!(close(price(3), 1.8294967296));
    assert!(close(price(4), 15.3438953472));
    assert_eq!(price(5), 0.8294967296);
    for t in &types {
        assert_eq!(offering_pairs(t), default_pairs(), "{}", t.name());
    }
    assert_eq!(
        types[2].capacity().get("fake.com/vendor-a"),
        Some(Quantity::from_units(2))
    );
    assert_eq!(
        types[3].capacity().get("fake.com/vendor-b"),
        Some(Quantity::from_units(2))
    );
    let arm = &types[4];
    assert_eq!(values(arm, labels::ARCH), ["arm64"]);
    assert_eq!(
        values(arm, labels::OS),
        ["darwin", "ios", "linux", "windows"]
    );
    assert_eq!(values(arm, INTEGER_LABEL), ["16"]);
    assert_eq!(values(arm, SIZE_LABEL), ["large"]);
    assert_eq!(values(arm, SPECIAL_LABEL), ["optional"]);
    assert_eq!(
        types[5].capacity().get(names::PODS),
        Some(Quantity::from_units(1))
    );
    assert_eq!(values(&types[1], INTEGER_LABEL), ["2"]);
}

#[test]
fn assorted_catalog() {
    let types = instance_types_assorted();
    assert_eq!(types.len(), 1344);
    let names: BTreeSet<&str> = types.iter().map(|t| t.name()).collect();
    assert_eq!(names.len(), 1344, "names are unique");
    let first = &types[0];
    assert_eq!(first.name(), "1-cpu-1-mem-amd64-linux-test-zone-1-spot");
    assert_eq!(first.offerings.len(), 1);
    assert_eq!(first.offerings[0].price, 0.2073741824);
    assert_eq!(values(first, labels::ZONE), ["test-zone-1"]);
    assert_eq!(values(first, labels::CAPACITY_TYPE), ["spot"]);
    assert_eq!(values(first, labels::OS), ["linux"]);
    assert_eq!(
        first.capacity().get(names::PODS),
        Some(Quantity::from_units(5))
    );
    assert_eq!(types[1].name(), "1-cpu-1-mem-arm64-linux-test-zone-1-spot");
    assert_eq!(
        types[2].name(),
        "1-cpu-1-mem-amd64-windows-test-zone-1-spot"
    );
    assert_eq!(
        types[4].name(),
        "1-cpu-1-mem-amd64-linux-test-zone-1-on-demand"
    );
    assert_eq!(types[8].name(), "1-cpu-1-mem-amd64-linux-test-zone-2-spot");
    let min = types
        .iter()
        .map(|t| t.offerings[0].price)
        .min_by(f64::total_cmp)
        .unwrap();
    assert_eq!(min, 0.2073741824);
    assert!(
        types
            .iter()
            .any(|t| t.name() == "64-cpu-128-mem-arm64-windows-test-zone-3-on-demand")
    );
}

#[test]
fn shuffle_is_a_seeded_permutation() {
    let mut a: Vec<usize> = (0..100).collect();
    let mut b = a.clone();
    let mut c = a.clone();
    shuffle(&mut a, 42);
    shuffle(&mut b, 42);
    shuffle(&mut c, 43);
    assert_eq!(a, b);
    assert_ne!(a, c);
    assert_ne!(a, (0..100).collect::<Vec<_>>());
    let mut sorted = a.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, (0..100).collect::<Vec<_>>());
    let mut empty: Vec<u8> = Vec::new();
    shuffle(&mut empty, 1);
}

#[test]
fn label_policy() {
    let p = fake_label_policy();
    for key in [
        SIZE_LABEL,
        SPECIAL_LABEL,
        INTEGER_LABEL,
        RESERVATION_ID_LABEL,
        labels::ZONE,
    ] {
        assert!(p.is_well_known(key), "{key}");
    }
    assert!(p.is_restricted(labels::HOSTNAME));
    assert!(catalog::FAKE_WELL_KNOWN_LABELS.contains(&"integer"));
}

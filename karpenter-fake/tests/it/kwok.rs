//! The kwok provider's contract: its catalog checked against upstream's published numbers, the
//! launch rule, the Node shape and the node class.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use karpenter_core::api::{
    Condition, ConditionStatus, NodeClaim, NodeClaimSpec, NodeClassReference,
};
use karpenter_core::labels;
use karpenter_core::model::InstanceType;
use karpenter_core::requirements::{NodeSelectorRequirement, Operator};
use karpenter_core::resources::{Quantity, ResourceList, names};
use karpenter_core::taints::{Taint, TaintEffect};
use karpenter_fake::kwok::{
    self, KwokLaunchError, KwokNodeClass, KwokNodeClassError, KwokNodeClassStatus, KwokRng,
};

const GI: i64 = 1 << 30;
const MI: i64 = 1 << 20;

// Every type's on-demand and spot price per hour as upstream's kwok catalog lists them
// (Karpenter v1.14.1), in catalog order.
const PUBLISHED_PRICES: [(&str, f64, f64); 144] = [
    ("c-1x-amd64-linux", 0.027147483648, 0.019003238553599998),
    ("c-1x-arm64-linux", 0.027147483648, 0.019003238553599998),
    ("c-1x-amd64-windows", 0.027147483648, 0.019003238553599998),
    ("c-1x-arm64-windows", 0.027147483648, 0.019003238553599998),
    ("s-1x-amd64-linux", 0.029294967296, 0.020506477107199998),
    ("s-1x-arm64-linux", 0.029294967296, 0.020506477107199998),
    ("s-1x-amd64-windows", 0.029294967296, 0.020506477107199998),
    ("s-1x-arm64-windows", 0.029294967296, 0.020506477107199998),
    ("m-1x-amd64-linux", 0.033589934592, 0.023512954214399997),
    ("m-1x-arm64-linux", 0.033589934592, 0.023512954214399997),
    ("m-1x-amd64-windows", 0.033589934592, 0.023512954214399997),
    ("m-1x-arm64-windows", 0.033589934592, 0.023512954214399997),
    ("c-2x-amd64-linux", 0.054294967296, 0.038006477107199996),
    ("c-2x-arm64-linux", 0.054294967296, 0.038006477107199996),
    ("c-2x-amd64-windows", 0.054294967296, 0.038006477107199996),
    ("c-2x-arm64-windows", 0.054294967296, 0.038006477107199996),
    ("s-2x-amd64-linux", 0.058589934592, 0.041012954214399995),
    ("s-2x-arm64-linux", 0.058589934592, 0.041012954214399995),
    ("s-2x-amd64-windows", 0.058589934592, 0.041012954214399995),
    ("s-2x-arm64-windows", 0.058589934592, 0.041012954214399995),
    ("m-2x-amd64-linux", 0.067179869184, 0.047025908428799994),
    ("m-2x-arm64-linux", 0.067179869184, 0.047025908428799994),
    ("m-2x-amd64-windows", 0.067179869184, 0.047025908428799994),
    ("m-2x-arm64-windows", 0.067179869184, 0.047025908428799994),
    ("c-4x-amd64-linux", 0.108589934592, 0.07601295421439999),
    ("c-4x-arm64-linux", 0.108589934592, 0.07601295421439999),
    ("c-4x-amd64-windows", 0.108589934592, 0.07601295421439999),
    ("c-4x-arm64-windows", 0.108589934592, 0.07601295421439999),
    ("s-4x-amd64-linux", 0.117179869184, 0.08202590842879999),
    ("s-4x-arm64-linux", 0.117179869184, 0.08202590842879999),
    ("s-4x-amd64-windows", 0.117179869184, 0.08202590842879999),
    ("s-4x-arm64-windows", 0.117179869184, 0.08202590842879999),
    ("m-4x-amd64-linux", 0.134359738368, 0.09405181685759999),
    ("m-4x-arm64-linux", 0.134359738368, 0.09405181685759999),
    ("m-4x-amd64-windows", 0.134359738368, 0.09405181685759999),
    ("m-4x-arm64-windows", 0.134359738368, 0.09405181685759999),
    ("c-8x-amd64-linux", 0.217179869184, 0.15202590842879998),
    ("c-8x-arm64-linux", 0.217179869184, 0.15202590842879998),
    ("c-8x-amd64-windows", 0.217179869184, 0.15202590842879998),
    ("c-8x-arm64-windows", 0.217179869184, 0.15202590842879998),
    ("s-8x-amd64-linux", 0.234359738368, 0.16405181685759998),
    ("s-8x-arm64-linux", 0.234359738368, 0.16405181685759998),
    ("s-8x-amd64-windows", 0.234359738368, 0.16405181685759998),
    ("s-8x-arm64-windows", 0.234359738368, 0.16405181685759998),
    ("m-8x-amd64-linux", 0.268719476736, 0.18810363371519997),
    ("m-8x-arm64-linux", 0.268719476736, 0.18810363371519997),
    ("m-8x-amd64-windows", 0.268719476736, 0.18810363371519997),
    ("m-8x-arm64-windows", 0.268719476736, 0.18810363371519997),
    ("c-16x-amd64-linux", 0.434359738368, 0.30405181685759997),
    ("c-16x-arm64-linux", 0.434359738368, 0.30405181685759997),
    ("c-16x-amd64-windows", 0.434359738368, 0.30405181685759997),
    ("c-16x-arm64-windows", 0.434359738368, 0.30405181685759997),
    ("s-16x-amd64-linux", 0.468719476736, 0.32810363371519996),
    ("s-16x-arm64-linux", 0.468719476736, 0.32810363371519996),
    ("s-16x-amd64-windows", 0.468719476736, 0.32810363371519996),
    ("s-16x-arm64-windows", 0.468719476736, 0.32810363371519996),
    ("m-16x-amd64-linux", 0.537438953472, 0.37620726743039995),
    ("m-16x-arm64-linux", 0.537438953472, 0.37620726743039995),
    ("m-16x-amd64-windows", 0.537438953472, 0.37620726743039995),
    ("m-16x-arm64-windows", 0.537438953472, 0.37620726743039995),
    ("c-32x-amd64-linux", 0.868719476736, 0.6081036337151999),
    ("c-32x-arm64-linux", 0.868719476736, 0.6081036337151999),
    ("c-32x-amd64-windows", 0.868719476736, 0.6081036337151999),
    ("c-32x-arm64-windows", 0.868719476736, 0.6081036337151999),
    ("s-32x-amd64-linux", 0.937438953472, 0.6562072674303999),
    ("s-32x-arm64-linux", 0.937438953472, 0.6562072674303999),
    ("s-32x-amd64-windows", 0.937438953472, 0.6562072674303999),
    ("s-32x-arm64-windows", 0.937438953472, 0.6562072674303999),
    ("m-32x-amd64-linux", 1.074877906944, 0.7524145348607999),
    ("m-32x-arm64-linux", 1.074877906944, 0.7524145348607999),
    ("m-32x-amd64-windows", 1.074877906944, 0.7524145348607999),
    ("m-32x-arm64-windows", 1.074877906944, 0.7524145348607999),
    ("c-48x-amd64-linux", 1.3030792151040003, 0.9121554505728001),
    ("c-48x-arm64-linux", 1.3030792151040003, 0.9121554505728001),
    (
        "c-48x-amd64-windows",
        1.3030792151040003,
        0.9121554505728001,
    ),
    ("c-48x-arm64-windows", 1.303079215104, 0.9121554505728),
    ("s-48x-amd64-linux", 1.4061584302080001, 0.9843109011456),
    ("s-48x-arm64-linux", 1.4061584302080001, 0.9843109011456),
    ("s-48x-amd64-windows", 1.4061584302080001, 0.9843109011456),
    ("s-48x-arm64-windows", 1.4061584302080001, 0.9843109011456),
    ("m-48x-amd64-linux", 1.612316860416, 1.1286218022912),
    ("m-48x-arm64-linux", 1.612316860416, 1.1286218022912),
    ("m-48x-amd64-windows", 1.612316860416, 1.1286218022912),
    ("m-48x-arm64-windows", 1.612316860416, 1.1286218022912),
    ("c-64x-amd64-linux", 1.737438953472, 1.2162072674303999),
    ("c-64x-arm64-linux", 1.737438953472, 1.2162072674303999),
    ("c-64x-amd64-windows", 1.737438953472, 1.2162072674303999),
    ("c-64x-arm64-windows", 1.737438953472, 1.2162072674303999),
    ("s-64x-amd64-linux", 1.874877906944, 1.3124145348607998),
    ("s-64x-arm64-linux", 1.874877906944, 1.3124145348607998),
    ("s-64x-amd64-windows", 1.874877906944, 1.3124145348607998),
    ("s-64x-arm64-windows", 1.874877906944, 1.3124145348607998),
    ("m-64x-amd64-linux", 2.149755813888, 1.5048290697215998),
    ("m-64x-arm64-linux", 2.149755813888, 1.5048290697215998),
    ("m-64x-amd64-windows", 2.149755813888, 1.5048290697215998),
    ("m-64x-arm64-windows", 2.149755813888, 1.5048290697215998),
    ("c-96x-amd64-linux", 2.6061584302080005, 1.8243109011456002),
    ("c-96x-arm64-linux", 2.6061584302080005, 1.8243109011456002),
    (
        "c-96x-amd64-windows",
        2.6061584302080005,
        1.8243109011456002,
    ),
    (
        "c-96x-arm64-windows",
        2.6061584302080005,
        1.8243109011456002,
    ),
    ("s-96x-amd64-linux", 2.8123168604160003, 1.9686218022912),
    ("s-96x-arm64-linux", 2.8123168604160003, 1.9686218022912),
    ("s-96x-amd64-windows", 2.8123168604160003, 1.9686218022912),
    ("s-96x-arm64-windows", 2.8123168604160003, 1.9686218022912),
    ("m-96x-amd64-linux", 3.224633720832, 2.2572436045824),
    ("m-96x-arm64-linux", 3.224633720832, 2.2572436045824),
    ("m-96x-amd64-windows", 3.224633720832, 2.2572436045824),
    ("m-96x-arm64-windows", 3.224633720832, 2.2572436045824),
    ("c-128x-amd64-linux", 3.474877906944, 2.4324145348607997),
    ("c-128x-arm64-linux", 3.474877906944, 2.4324145348607997),
    ("c-128x-amd64-windows", 3.474877906944, 2.4324145348607997),
    ("c-128x-arm64-windows", 3.474877906944, 2.4324145348607997),
    ("s-128x-amd64-linux", 3.749755813888, 2.6248290697215997),
    ("s-128x-arm64-linux", 3.749755813888, 2.6248290697215997),
    ("s-128x-amd64-windows", 3.749755813888, 2.6248290697215997),
    ("s-128x-arm64-windows", 3.749755813888, 2.6248290697215997),
    ("m-128x-amd64-linux", 4.299511627776, 3.0096581394431996),
    ("m-128x-arm64-linux", 4.299511627776, 3.0096581394431996),
    ("m-128x-amd64-windows", 4.299511627776, 3.0096581394431996),
    ("m-128x-arm64-windows", 4.299511627776, 3.0096581394431996),
    ("c-192x-amd64-linux", 5.212316860416001, 3.6486218022912005),
    ("c-192x-arm64-linux", 5.212316860416, 3.6486218022912),
    (
        "c-192x-amd64-windows",
        5.212316860416001,
        3.6486218022912005,
    ),
    (
        "c-192x-arm64-windows",
        5.212316860416001,
        3.6486218022912005,
    ),
    ("s-192x-amd64-linux", 5.6246337208320005, 3.9372436045824),
    ("s-192x-arm64-linux", 5.6246337208320005, 3.9372436045824),
    ("s-192x-amd64-windows", 5.6246337208320005, 3.9372436045824),
    ("s-192x-arm64-windows", 5.6246337208320005, 3.9372436045824),
    ("m-192x-amd64-linux", 6.449267441664, 4.5144872091648),
    ("m-192x-arm64-linux", 6.449267441664, 4.5144872091648),
    ("m-192x-amd64-windows", 6.449267441664, 4.5144872091648),
    ("m-192x-arm64-windows", 6.449267441664, 4.5144872091648),
    ("c-256x-amd64-linux", 6.949755813888, 4.8648290697215995),
    ("c-256x-arm64-linux", 6.949755813888, 4.8648290697215995),
    ("c-256x-amd64-windows", 6.949755813888, 4.8648290697215995),
    ("c-256x-arm64-windows", 6.949755813888, 4.8648290697215995),
    ("s-256x-amd64-linux", 7.499511627776, 5.249658139443199),
    ("s-256x-arm64-linux", 7.499511627776, 5.249658139443199),
    ("s-256x-amd64-windows", 7.499511627776, 5.249658139443199),
    ("s-256x-arm64-windows", 7.499511627776, 5.249658139443199),
    ("m-256x-amd64-linux", 8.599023255552, 6.019316278886399),
    ("m-256x-arm64-linux", 8.599023255552, 6.019316278886399),
    ("m-256x-amd64-windows", 8.599023255552, 6.019316278886399),
    ("m-256x-arm64-windows", 8.599023255552, 6.019316278886399),
];

fn find(types: &[Arc<InstanceType>], name: &str) -> Arc<InstanceType> {
    types
        .iter()
        .find(|it| it.name() == name)
        .cloned()
        .unwrap_or_else(|| panic!("{name} not in the catalog"))
}

fn values(it: &InstanceType, key: &str) -> Vec<String> {
    let r = it
        .requirements()
        .get(key)
        .unwrap_or_else(|| panic!("{key} undefined on {}", it.name()));
    assert_eq!(r.operator(), Operator::In, "{key} on {}", it.name());
    r.values().map(String::from).collect()
}

fn rl(entries: &[(&str, Quantity)]) -> ResourceList {
    entries.iter().map(|(k, q)| (*k, *q)).collect()
}

fn req(key: &str, values: &[&str]) -> NodeSelectorRequirement {
    NodeSelectorRequirement::new(key, Operator::In, values.iter().copied())
}

fn claim(name: &str, requirements: Vec<NodeSelectorRequirement>) -> NodeClaim {
    let mut spec = NodeClaimSpec::new(NodeClassReference::new(
        kwok::GROUP,
        kwok::NODECLASS_KIND,
        "default",
    ));
    spec.requirements = Some(requirements);
    NodeClaim::new(name, spec)
}

/// `(family, cpu, arch, os)` of a generated name, or `None` if it does not parse.
fn parse_name(name: &str) -> Option<(String, i64, String, String)> {
    let mut parts = name.split('-');
    let family = parts.next()?.to_string();
    let cpu = parts.next()?.strip_suffix('x')?.parse().ok()?;
    let arch = parts.next()?.to_string();
    let os = parts.next()?.to_string();
    parts.next().is_none().then_some((family, cpu, arch, os))
}

#[test]
fn kwok_catalog_has_144_uniquely_named_parseable_types() {
    let types = kwok::instance_types();
    assert_eq!(types.len(), 144);
    assert_eq!(kwok::INSTANCE_TYPE_COUNT, 144);
    let names: BTreeSet<&str> = types.iter().map(|it| it.name()).collect();
    assert_eq!(names.len(), 144);
    for it in &types {
        let (family, cpu, arch, os) =
            parse_name(it.name()).unwrap_or_else(|| panic!("{} does not parse", it.name()));
        let factor = match family.as_str() {
            "c" => 2,
            "s" => 4,
            "m" => 8,
            other => panic!("family {other}"),
        };
        assert!(kwok::CPUS.contains(&cpu));
        assert!(["amd64", "arm64"].contains(&arch.as_str()));
        assert!(["linux", "windows"].contains(&os.as_str()));
        assert_eq!(values(it, labels::INSTANCE_TYPE), [it.name()]);
        assert_eq!(values(it, labels::ARCH), [arch.as_str()]);
        assert_eq!(values(it, labels::OS), [os.as_str()]);
        assert_eq!(values(it, kwok::INSTANCE_FAMILY_LABEL), [family.as_str()]);
        assert_eq!(values(it, kwok::INSTANCE_SIZE_LABEL), [cpu.to_string()]);
        assert_eq!(values(it, kwok::INSTANCE_CPU_LABEL), [cpu.to_string()]);
        let memory = Quantity::from_bytes(cpu * factor * GI);
        assert_eq!(
            values(it, kwok::INSTANCE_MEMORY_LABEL),
            [memory.to_string()]
        );
        assert_eq!(
            it.capacity().get(names::CPU),
            Some(Quantity::from_units(cpu))
        );
        assert_eq!(it.capacity().get(names::MEMORY), Some(memory));
    }
}

#[test]
fn kwok_catalog_is_in_upstreams_order() {
    let types = kwok::instance_types();
    let got: Vec<&str> = types.iter().map(|it| it.name()).collect();
    let published: Vec<&str> = PUBLISHED_PRICES.iter().map(|(n, _, _)| *n).collect();
    assert_eq!(got, published);
    assert_eq!(
        got[..5],
        [
            "c-1x-amd64-linux",
            "c-1x-arm64-linux",
            "c-1x-amd64-windows",
            "c-1x-arm64-windows",
            "s-1x-amd64-linux"
        ]
    );
    assert_eq!(got[143], "m-256x-arm64-windows");
}

#[test]
fn kwok_prices_are_upstreams_to_the_bit() {
    let types = kwok::instance_types();
    for (name, on_demand, spot) in PUBLISHED_PRICES {
        let it = find(&types, name);
        for o in &it.offerings {
            let want = if o.capacity_type() == "spot" {
                spot
            } else {
                on_demand
            };
            assert_eq!(
                o.price.to_bits(),
                want.to_bits(),
                "{name} {} {}: {} != {want}",
                o.zone(),
                o.capacity_type(),
                o.price
            );
        }
    }
}

#[test]
fn kwok_spot_is_seven_tenths_of_on_demand() {
    for it in kwok::instance_types() {
        let on_demand: Vec<f64> = it
            .offerings
            .iter()
            .filter(|o| o.capacity_type() == "on-demand")
            .map(|o| o.price)
            .collect();
        let spot: Vec<f64> = it
            .offerings
            .iter()
            .filter(|o| o.capacity_type() == "spot")
            .map(|o| o.price)
            .collect();
        assert_eq!(on_demand.len(), 4);
        assert_eq!(spot.len(), 4);
        for (s, od) in spot.iter().zip(&on_demand) {
            assert_eq!(*s, od * 0.7, "{}", it.name());
        }
    }
}

#[test]
fn kwok_price_formula() {
    // 0.025 per CPU plus 0.001 per 10^9 bytes of memory.
    assert_eq!(kwok::on_demand_price(1, 2 * GI), 0.027147483648);
    assert_eq!(kwok::on_demand_price(256, 2048 * GI), 8.599023255552);
    // The two published prices that are the fused rounding of the formula.
    assert_eq!(kwok::on_demand_price(48, 96 * GI), 1.3030792151040003);
    assert_eq!(
        kwok::catalog_on_demand_price("c-48x-amd64-linux", 48, 96 * GI),
        1.3030792151040003
    );
    assert_eq!(
        kwok::catalog_on_demand_price("c-48x-arm64-windows", 48, 96 * GI),
        1.303079215104
    );
    assert_eq!(
        kwok::catalog_on_demand_price("c-192x-arm64-linux", 192, 384 * GI),
        5.212316860416
    );
    assert_eq!(kwok::spot_price(0.027147483648), 0.019003238553599998);
}

#[test]
fn kwok_pods_are_sixteen_per_cpu_up_to_1024() {
    for it in kwok::instance_types() {
        let cpu = it.capacity().get_or_zero(names::CPU).value();
        let pods = it.capacity().get_or_zero(names::PODS).value();
        assert_eq!(pods, (16 * cpu).min(1024), "{}", it.name());
        assert_eq!(kwok::pods_for(cpu), pods);
    }
    assert_eq!(kwok::pods_for(48), 768);
    assert_eq!(kwok::pods_for(64), 1024);
    assert_eq!(kwok::pods_for(256), 1024);
}

#[test]
fn kwok_offerings_are_every_zone_spot_then_on_demand_all_available() {
    for it in kwok::instance_types() {
        let pairs: Vec<(&str, &str)> = it
            .offerings
            .iter()
            .map(|o| (o.zone(), o.capacity_type()))
            .collect();
        let want: Vec<(&str, &str)> = kwok::ZONES
            .iter()
            .flat_map(|z| [(*z, "spot"), (*z, "on-demand")])
            .collect();
        assert_eq!(pairs, want, "{}", it.name());
        assert!(it.offerings.iter().all(|o| o.available && !o.is_reserved()));
        assert_eq!(
            values(&it, labels::ZONE),
            ["test-zone-a", "test-zone-b", "test-zone-c", "test-zone-d"]
        );
        assert_eq!(values(&it, labels::CAPACITY_TYPE), ["on-demand", "spot"]);
    }
}

/// One type checked field by field: name, its labels, capacity, allocatable, overhead, prices.
#[allow(clippy::too_many_arguments)]
fn check_type(
    name: &str,
    (family, cpu, memory, memory_label): (&str, i64, i64, &str),
    (arch, os): (&str, &str),
    pods: i64,
    on_demand: f64,
    spot: f64,
) {
    let types = kwok::instance_types();
    let it = find(&types, name);
    let keys: Vec<&str> = it.requirements().iter().map(|r| r.key()).collect();
    let want_keys: BTreeSet<&str> = [
        labels::INSTANCE_TYPE,
        labels::ARCH,
        labels::OS,
        labels::ZONE,
        labels::CAPACITY_TYPE,
        kwok::INSTANCE_SIZE_LABEL,
        kwok::INSTANCE_FAMILY_LABEL,
        kwok::INSTANCE_CPU_LABEL,
        kwok::INSTANCE_MEMORY_LABEL,
    ]
    .into();
    assert_eq!(keys.iter().copied().collect::<BTreeSet<_>>(), want_keys);
    assert_eq!(values(&it, labels::ARCH), [arch]);
    assert_eq!(values(&it, labels::OS), [os]);
    assert_eq!(values(&it, kwok::INSTANCE_FAMILY_LABEL), [family]);
    assert_eq!(values(&it, kwok::INSTANCE_SIZE_LABEL), [cpu.to_string()]);
    assert_eq!(values(&it, kwok::INSTANCE_CPU_LABEL), [cpu.to_string()]);
    assert_eq!(values(&it, kwok::INSTANCE_MEMORY_LABEL), [memory_label]);
    assert_eq!(
        *it.capacity(),
        rl(&[
            (names::CPU, Quantity::from_units(cpu)),
            (names::MEMORY, Quantity::from_bytes(memory)),
            (names::PODS, Quantity::from_units(pods)),
            (names::EPHEMERAL_STORAGE, Quantity::from_bytes(20 * GI)),
        ])
    );
    assert_eq!(
        it.overhead().kube_reserved,
        rl(&[
            (names::CPU, Quantity::from_milli(100)),
            (names::MEMORY, Quantity::from_bytes(10 * MI)),
        ])
    );
    assert!(it.overhead().system_reserved.is_empty());
    assert!(it.overhead().eviction_threshold.is_empty());
    assert_eq!(
        *it.allocatable(),
        rl(&[
            (names::CPU, Quantity::from_milli(cpu * 1000 - 100)),
            (names::MEMORY, Quantity::from_bytes(memory - 10 * MI)),
            (names::PODS, Quantity::from_units(pods)),
            (names::EPHEMERAL_STORAGE, Quantity::from_bytes(20 * GI)),
        ])
    );
    for o in &it.offerings {
        let want = if o.capacity_type() == "spot" {
            spot
        } else {
            on_demand
        };
        assert_eq!(o.price, want, "{name} {}", o.zone());
    }
}

#[test]
fn kwok_c_1x_amd64_linux() {
    check_type(
        "c-1x-amd64-linux",
        ("c", 1, 2 * GI, "2Gi"),
        ("amd64", "linux"),
        16,
        0.027147483648,
        0.019003238553599998,
    );
}

#[test]
fn kwok_s_48x_arm64_linux() {
    check_type(
        "s-48x-arm64-linux",
        ("s", 48, 192 * GI, "192Gi"),
        ("arm64", "linux"),
        768,
        1.4061584302080001,
        0.9843109011456,
    );
}

#[test]
fn kwok_c_48x_arm64_windows() {
    // One of the two types whose published price is one rounding below the formula's.
    check_type(
        "c-48x-arm64-windows",
        ("c", 48, 96 * GI, "96Gi"),
        ("arm64", "windows"),
        768,
        1.303079215104,
        0.9121554505728,
    );
}

#[test]
fn kwok_m_128x_amd64_windows() {
    check_type(
        "m-128x-amd64-windows",
        ("m", 128, 1024 * GI, "1Ti"),
        ("amd64", "windows"),
        1024,
        4.299511627776,
        3.0096581394431996,
    );
}

#[test]
fn kwok_m_256x_arm64_windows() {
    check_type(
        "m-256x-arm64-windows",
        ("m", 256, 2048 * GI, "2Ti"),
        ("arm64", "windows"),
        1024,
        8.599023255552,
        6.019316278886399,
    );
}

#[test]
fn kwok_memory_label_is_the_canonical_quantity() {
    let types = kwok::instance_types();
    let memory = |name: &str| values(&find(&types, name), kwok::INSTANCE_MEMORY_LABEL);
    assert_eq!(memory("m-192x-amd64-linux"), ["1536Gi"]);
    assert_eq!(memory("s-256x-amd64-linux"), ["1Ti"]);
    assert_eq!(memory("c-96x-amd64-linux"), ["192Gi"]);
}

#[test]
fn kwok_label_helpers() {
    assert_eq!(
        kwok::instance_type_name(16, 2, "amd64", "linux"),
        "c-16x-amd64-linux"
    );
    assert_eq!(
        kwok::instance_type_name(1, 3, "arm64", "windows"),
        "e-1x-arm64-windows"
    );
    assert_eq!(kwok::size_label_value("c-16x-amd64-linux", "16"), "16");
    assert_eq!(kwok::size_label_value("m5.2xlarge", "8"), "2xlarge");
    assert_eq!(kwok::size_label_value("m5.metal", "96"), "metal");
    assert_eq!(kwok::size_label_value("m5.huge", "8"), "8");
    assert_eq!(kwok::family_label_value("c-16x-amd64-linux"), "c");
    assert_eq!(kwok::family_label_value("m5.large"), "m5");
    assert_eq!(kwok::family_label_value("Standard"), "S");
    assert_eq!(kwok::family_label_value(""), "");
}

#[test]
fn kwok_label_policy_adds_its_labels_and_domain() {
    let policy = kwok::label_policy();
    for key in kwok::WELL_KNOWN_LABELS {
        assert!(policy.is_well_known(key), "{key}");
        assert!(!policy.is_restricted(key), "{key}");
    }
    assert_eq!(
        kwok::WELL_KNOWN_LABELS,
        [
            "karpenter.kwok.sh/instance-size",
            "karpenter.kwok.sh/instance-family",
            "karpenter.kwok.sh/instance-cpu",
            "karpenter.kwok.sh/instance-memory",
        ]
    );
    assert!(policy.is_well_known(labels::ZONE));
    assert!(policy.is_restricted("karpenter.kwok.sh/other"));
    assert!(policy.is_restricted("sub.karpenter.kwok.sh/other"));
    assert!(!policy.is_well_known(kwok::KWOK_NODE_KEY));
    assert!(!policy.is_well_known(kwok::PARTITION_LABEL));
}

#[test]
fn kwok_provider_constants() {
    assert_eq!(kwok::PROVIDER_NAME, "kwok");
    assert_eq!(kwok::GROUP, "karpenter.kwok.sh");
    assert_eq!(kwok::VERSION, "v1alpha1");
    assert_eq!(kwok::API_VERSION, "karpenter.kwok.sh/v1alpha1");
    assert_eq!(kwok::NODECLASS_KIND, "KWOKNodeClass");
    assert_eq!(kwok::PROVIDER_ID_PREFIX, "kwok://");
    assert_eq!(kwok::KWOK_NODE_KEY, "kwok.x-k8s.io/node");
    assert_eq!(kwok::KWOK_NODE_VALUE, "fake");
    let class = kwok::supported_node_class();
    assert!(class.matches(&NodeClassReference::new(
        "karpenter.kwok.sh",
        "KWOKNodeClass",
        "x"
    )));
    let policies = kwok::repair_policies();
    assert_eq!(policies.len(), 2);
    for (p, status) in policies
        .iter()
        .zip([ConditionStatus::False, ConditionStatus::Unknown])
    {
        assert_eq!(p.condition_type, "Ready");
        assert_eq!(p.condition_status, status);
        assert_eq!(p.toleration_duration, Duration::from_secs(600));
    }
    assert_eq!(kwok::provider_id("n1"), "kwok://n1");
    assert_eq!(kwok::node_name_from_provider_id("kwok://n1"), "n1");
    assert!(kwok::is_kwok_provider_id("kwok://n1"));
    assert!(!kwok::is_kwok_provider_id("aws:///us-east-1a/i-1"));
}

// ---------------------------------------------------------------------------------------------
// Launch
// ---------------------------------------------------------------------------------------------

fn sample_claim() -> NodeClaim {
    let mut c = claim(
        "default-x7k2p",
        vec![
            req(labels::NODEPOOL, &["default"]),
            req(
                labels::INSTANCE_TYPE,
                &["s-2x-amd64-linux", "c-2x-amd64-linux"],
            ),
            req(labels::CAPACITY_TYPE, &["on-demand"]),
            req(labels::ZONE, &["test-zone-b"]),
            req(labels::OS, &["linux"]),
        ],
    );
    c.metadata.labels = BTreeMap::from([
        ("karpenter.sh/nodepool".to_string(), "default".to_string()),
        ("team".to_string(), "a".to_string()),
    ]);
    c.metadata.annotations =
        BTreeMap::from([("karpenter.sh/nodepool-hash".to_string(), "123".to_string())]);
    c.spec.resources.requests = rl(&[
        (names::CPU, Quantity::from_milli(1500)),
        (names::MEMORY, Quantity::from_bytes(GI)),
        (names::PODS, Quantity::from_units(3)),
    ]);
    c
}

#[test]
fn kwok_node_shape() {
    let types = kwok::instance_types();
    let claim = sample_claim();
    let mut rng = KwokRng::new(7);
    let launch = kwok::create(
        &claim,
        &types,
        Some(&KwokNodeClass::new("default")),
        &mut rng,
    )
    .expect("launch");
    let node = &launch.node;

    assert_eq!(launch.choice.instance_type.name(), "c-2x-amd64-linux");
    assert_eq!(launch.choice.offering.zone(), "test-zone-b");
    assert_eq!(launch.choice.offering.capacity_type(), "on-demand");

    // kwok-<claim>-<adjectivenoun>-<sequence>-<10 alphanumerics>-<u32>
    let rest = node
        .name
        .strip_prefix("kwok-default-x7k2p-")
        .expect("name prefix");
    let parts: Vec<&str> = rest.split('-').collect();
    assert_eq!(parts.len(), 4, "{}", node.name);
    assert!(parts[0].chars().all(|c| c.is_ascii_lowercase()));
    assert_eq!(parts[1], "1");
    assert_eq!(parts[2].len(), 10);
    assert!(
        parts[2]
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
    );
    assert!(parts[3].parse::<u32>().is_ok());
    assert_eq!(node.provider_id, format!("kwok://{}", node.name));

    let want_labels: BTreeMap<String, String> = [
        ("karpenter.sh/nodepool", "default"),
        ("team", "a"),
        ("node.kubernetes.io/instance-type", "c-2x-amd64-linux"),
        ("karpenter.sh/capacity-type", "on-demand"),
        ("topology.kubernetes.io/zone", "test-zone-b"),
        ("kubernetes.io/os", "linux"),
        ("kubernetes.io/arch", "amd64"),
        ("karpenter.kwok.sh/instance-size", "2"),
        ("karpenter.kwok.sh/instance-family", "c"),
        ("karpenter.kwok.sh/instance-cpu", "2"),
        ("karpenter.kwok.sh/instance-memory", "4Gi"),
        ("eks-node-viewer/instance-price", "0.054295"),
        ("kwok-partition", "a"),
        ("kubernetes.io/hostname", "default-x7k2p"),
        ("kwok.x-k8s.io/node", "fake"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    assert_eq!(node.labels, want_labels);
    assert_eq!(
        node.annotations,
        BTreeMap::from([
            ("karpenter.sh/nodepool-hash".to_string(), "123".to_string()),
            ("kwok.x-k8s.io/node".to_string(), "fake".to_string()),
        ])
    );
    assert_eq!(
        node.taints,
        [Taint {
            key: "karpenter.sh/unregistered".to_string(),
            value: String::new(),
            effect: TaintEffect::NoExecute,
            time_added: None,
        }]
    );
    // Capacity is the claim's requests; allocatable those overwritten by the type's allocatable.
    assert_eq!(node.capacity, claim.spec.resources.requests);
    assert_eq!(
        node.allocatable,
        rl(&[
            (names::CPU, Quantity::from_milli(1900)),
            (names::MEMORY, Quantity::from_bytes(4 * GI - 10 * MI)),
            (names::PODS, Quantity::from_units(32)),
            (names::EPHEMERAL_STORAGE, Quantity::from_bytes(20 * GI)),
        ])
    );
    assert_eq!(kwok::NODE_PHASE, "Pending");
    assert_eq!(launch.registration_delay, Duration::ZERO);

    // The NodeClaim create answers with.
    let nc = &launch.node_claim;
    assert_eq!(nc.name(), node.name);
    assert_eq!(nc.metadata.labels, node.labels);
    assert_eq!(nc.metadata.annotations, node.annotations);
    assert_eq!(nc.spec.requirements, None);
    assert!(nc.spec.taints.is_empty());
    assert_eq!(nc.status.node_name.as_deref(), Some(node.name.as_str()));
    assert_eq!(
        nc.status.provider_id.as_deref(),
        Some(node.provider_id.as_str())
    );
    assert_eq!(nc.status.capacity, node.capacity);
    assert_eq!(nc.status.allocatable, node.allocatable);
    assert_eq!(kwok::node_claim_from_node(node), *nc);
}

#[test]
fn kwok_node_labels_resolved_values_win_over_claim_labels() {
    let types = kwok::instance_types();
    let mut claim = sample_claim();
    claim
        .metadata
        .labels
        .insert(labels::ZONE.to_string(), "test-zone-c".to_string());
    claim
        .metadata
        .labels
        .insert(labels::HOSTNAME.to_string(), "elsewhere".to_string());
    let choice = kwok::choose_offering(&claim, &types, &mut KwokRng::new(1)).expect("choice");
    let node = kwok::node_for(&claim, &choice, "n", "a");
    assert_eq!(node.labels[labels::ZONE], "test-zone-b");
    assert_eq!(node.labels[labels::HOSTNAME], "default-x7k2p");
    assert_eq!(node.name, "n");
    assert_eq!(node.provider_id, "kwok://n");
}

#[test]
fn kwok_launch_picks_the_cheapest_type_in_requirement_order() {
    let types = kwok::instance_types();
    // s-4x is dearer than c-4x, whatever the order they are listed in.
    for order in [
        ["s-4x-amd64-linux", "c-4x-amd64-linux"],
        ["c-4x-amd64-linux", "s-4x-amd64-linux"],
    ] {
        let c = claim("x", vec![req(labels::INSTANCE_TYPE, &order)]);
        let choice = kwok::choose_offering(&c, &types, &mut KwokRng::new(3)).expect("choice");
        assert_eq!(choice.instance_type.name(), "c-4x-amd64-linux");
        // Spot is cheapest when both capacity types are allowed.
        assert_eq!(choice.offering.capacity_type(), "spot");
        assert_eq!(choice.offering.price, 0.07601295421439999);
    }
    // Equal prices: the first listed stays.
    for order in [
        ["c-4x-arm64-linux", "c-4x-amd64-linux"],
        ["c-4x-amd64-linux", "c-4x-arm64-linux"],
    ] {
        let c = claim("x", vec![req(labels::INSTANCE_TYPE, &order)]);
        let choice = kwok::choose_offering(&c, &types, &mut KwokRng::new(3)).expect("choice");
        assert_eq!(choice.instance_type.name(), order[0]);
    }
}

#[test]
fn kwok_launch_draws_the_zone_among_the_cheapest_compatible_offerings() {
    let types = kwok::instance_types();
    let open = claim(
        "x",
        vec![
            req(labels::INSTANCE_TYPE, &["c-1x-amd64-linux"]),
            req(labels::CAPACITY_TYPE, &["on-demand"]),
        ],
    );
    let narrow = claim(
        "x",
        vec![
            req(labels::INSTANCE_TYPE, &["c-1x-amd64-linux"]),
            req(labels::CAPACITY_TYPE, &["on-demand"]),
            req(labels::ZONE, &["test-zone-a", "test-zone-d"]),
        ],
    );
    let mut rng = KwokRng::new(11);
    let mut zones_open = BTreeSet::new();
    let mut zones_narrow = BTreeSet::new();
    for _ in 0..200 {
        let o = kwok::choose_offering(&open, &types, &mut rng).expect("open");
        assert_eq!(o.offering.capacity_type(), "on-demand");
        zones_open.insert(o.offering.zone().to_string());
        let n = kwok::choose_offering(&narrow, &types, &mut rng).expect("narrow");
        zones_narrow.insert(n.offering.zone().to_string());
    }
    assert_eq!(zones_open.len(), 4);
    assert_eq!(
        zones_narrow,
        BTreeSet::from(["test-zone-a".to_string(), "test-zone-d".to_string()])
    );
}

#[test]
fn kwok_launch_a_type_without_usable_offering_discards_the_choice() {
    let mut types = kwok::instance_types();
    for it in &mut types {
        if it.name() == "c-1x-arm64-linux" {
            for o in &mut Arc::make_mut(it).offerings {
                o.available = false;
            }
        }
    }
    // c-1x-amd64 is chosen, the unusable c-1x-arm64 discards it, then the dearer s-1x is taken.
    let c = claim(
        "x",
        vec![req(
            labels::INSTANCE_TYPE,
            &["c-1x-amd64-linux", "c-1x-arm64-linux", "s-1x-amd64-linux"],
        )],
    );
    let choice = kwok::choose_offering(&c, &types, &mut KwokRng::new(5)).expect("choice");
    assert_eq!(choice.instance_type.name(), "s-1x-amd64-linux");
    // Ending on the unusable type leaves nothing chosen.
    let c = claim(
        "x",
        vec![req(
            labels::INSTANCE_TYPE,
            &["c-1x-amd64-linux", "c-1x-arm64-linux"],
        )],
    );
    assert_eq!(
        kwok::choose_offering(&c, &types, &mut KwokRng::new(5)),
        Err(KwokLaunchError::NoCompatibleOffering(
            "c-1x-arm64-linux".to_string()
        ))
    );
}

#[test]
fn kwok_launch_translation_errors() {
    let types = kwok::instance_types();
    let class = KwokNodeClass::new("default");
    let none = claim("x", vec![req(labels::OS, &["linux"])]);
    assert_eq!(
        kwok::choose_offering(&none, &types, &mut KwokRng::new(1)),
        Err(KwokLaunchError::MissingInstanceTypeRequirement)
    );
    let unknown = claim("x", vec![req(labels::INSTANCE_TYPE, &["t3.micro"])]);
    assert_eq!(
        kwok::choose_offering(&unknown, &types, &mut KwokRng::new(1)),
        Err(KwokLaunchError::UnknownInstanceType("t3.micro".to_string()))
    );
    // A translation failure is reported before the node class is looked at.
    let err = kwok::create(&unknown, &types, None, &mut KwokRng::new(1)).expect_err("fails");
    assert!(!err.is_insufficient_capacity());
    assert!(
        err.message().starts_with("translating nodeclaim to node, "),
        "{err}"
    );
    let err = kwok::create(&none, &types, Some(&class), &mut KwokRng::new(1)).expect_err("fails");
    assert!(
        err.message()
            .contains("instance type requirement not found"),
        "{err}"
    );
}

#[test]
fn kwok_launch_node_class_errors() {
    let types = kwok::instance_types();
    let claim = sample_claim();

    let err = kwok::create(&claim, &types, None, &mut KwokRng::new(1)).expect_err("missing class");
    assert!(err.is_insufficient_capacity(), "{err}");
    assert!(err.message().contains("\"default\" not found"), "{err}");

    let mut not_ready = KwokNodeClass::new("default");
    not_ready.status.conditions[0].status = ConditionStatus::False;
    not_ready.status.conditions[0].message = Some("waiting on subnets".to_string());
    let err = kwok::create(&claim, &types, Some(&not_ready), &mut KwokRng::new(1))
        .expect_err("not ready");
    assert!(err.is_node_class_not_ready(), "{err}");
    assert_eq!(err.message(), "waiting on subnets");

    // Unknown, or no Ready condition at all, does not block a launch.
    let mut unknown = KwokNodeClass::new("default");
    unknown.status.conditions[0].status = ConditionStatus::Unknown;
    assert!(kwok::create(&claim, &types, Some(&unknown), &mut KwokRng::new(1)).is_ok());
    let mut bare = KwokNodeClass::new("default");
    bare.status = KwokNodeClassStatus::default();
    assert!(kwok::create(&claim, &types, Some(&bare), &mut KwokRng::new(1)).is_ok());

    let mut slow = KwokNodeClass::new("default");
    slow.spec.node_registration_delay = Some("1m30s".parse().expect("duration"));
    let launch = kwok::create(&claim, &types, Some(&slow), &mut KwokRng::new(1)).expect("ok");
    assert_eq!(launch.registration_delay, Duration::from_secs(90));
}

#[test]
fn kwok_launch_is_reproducible_from_the_seed() {
    let types = kwok::instance_types();
    let class = KwokNodeClass::new("default");
    let a = kwok::create(&sample_claim(), &types, Some(&class), &mut KwokRng::new(42));
    let b = kwok::create(&sample_claim(), &types, Some(&class), &mut KwokRng::new(42));
    assert_eq!(a.expect("a"), b.expect("b"));
    let mut rng = KwokRng::new(42);
    let first = kwok::node_name("c", &mut rng);
    let second = kwok::node_name("c", &mut rng);
    assert_ne!(first, second);
    assert!(second.split('-').nth(2).is_some());
    assert_eq!(second.split('-').nth(3), Some("2"), "{second}");
}

// ---------------------------------------------------------------------------------------------
// KWOKNodeClass
// ---------------------------------------------------------------------------------------------

#[test]
fn kwok_nodeclass_status_defaults_to_ready() {
    let class: KwokNodeClass = serde_json::from_value(serde_json::json!({
        "apiVersion": "karpenter.kwok.sh/v1alpha1",
        "kind": "KWOKNodeClass",
        "metadata": {"name": "default"}
    }))
    .expect("parse");
    assert_eq!(class.name(), "default");
    assert!(class.is_ready());
    assert_eq!(class.not_ready_message(), None);
    assert_eq!(
        class.status.conditions,
        [Condition {
            type_: "Ready".to_string(),
            status: ConditionStatus::True,
            reason: Some("Ready".to_string()),
            message: Some(String::new()),
            last_transition_time: Some("2024-01-01T01:01:01Z".to_string()),
            observed_generation: None,
        }]
    );
    assert_eq!(class, KwokNodeClass::new("default"));

    // A status written without conditions is kept as is: Ready reads Unknown.
    let class: KwokNodeClass = serde_json::from_value(serde_json::json!({
        "apiVersion": "karpenter.kwok.sh/v1alpha1",
        "kind": "KWOKNodeClass",
        "metadata": {"name": "default"},
        "status": {}
    }))
    .expect("parse");
    assert_eq!(class.ready_status(), ConditionStatus::Unknown);
    assert!(!class.is_ready());
    assert_eq!(class.not_ready_message(), None);
}

#[test]
fn kwok_nodeclass_round_trips_and_validates() {
    let value = serde_json::json!({
        "apiVersion": "karpenter.kwok.sh/v1alpha1",
        "kind": "KWOKNodeClass",
        "metadata": {"name": "slow"},
        "spec": {"nodeRegistrationDelay": "2m"},
        "status": {"conditions": [{"type": "Ready", "status": "False", "reason": "Broken",
            "message": "broken", "lastTransitionTime": "2025-01-01T00:00:00Z"}]}
    });
    let class: KwokNodeClass = serde_json::from_value(value.clone()).expect("parse");
    assert_eq!(class.registration_delay(), Duration::from_secs(120));
    assert_eq!(class.not_ready_message().as_deref(), Some("broken"));
    assert_eq!(class.validate(), Ok(()));
    assert_eq!(serde_json::to_value(&class).expect("serialise"), value);

    let mut bad = class.clone();
    bad.spec.node_registration_delay = Some("1.5s".parse().expect("duration"));
    assert_eq!(
        bad.validate(),
        Err(KwokNodeClassError::NodeRegistrationDelay(
            "1.5s".to_string()
        ))
    );
}

#[test]
fn kwok_nodeclass_crd() {
    let crd = kwok::nodeclass_crd();
    assert_eq!(crd["metadata"]["name"], "kwoknodeclasses.karpenter.kwok.sh");
    assert_eq!(crd["spec"]["group"], "karpenter.kwok.sh");
    assert_eq!(crd["spec"]["scope"], "Cluster");
    assert_eq!(crd["spec"]["names"]["kind"], "KWOKNodeClass");
    assert_eq!(crd["spec"]["names"]["plural"], "kwoknodeclasses");
    assert_eq!(
        crd["spec"]["names"]["shortNames"],
        serde_json::json!(["kwoknc", "kwokncs"])
    );
    assert_eq!(
        crd["spec"]["names"]["categories"],
        serde_json::json!(["karpenter"])
    );
    let version = &crd["spec"]["versions"][0];
    assert_eq!(version["name"], "v1alpha1");
    assert_eq!(version["subresources"], serde_json::json!({"status": {}}));
    let schema = &version["schema"]["openAPIV3Schema"]["properties"];
    assert_eq!(
        schema["spec"]["properties"]["nodeRegistrationDelay"]["pattern"],
        "^([0-9]+(s|m|h))+$"
    );
    assert_eq!(
        schema["status"]["default"],
        serde_json::json!({"conditions": [{"type": "Ready", "status": "True", "reason": "Ready",
            "message": "", "lastTransitionTime": "2024-01-01T01:01:01Z"}]})
    );
}

//! Instance-type catalogs equivalent to upstream Karpenter's fake cloud provider
//! (`pkg/cloudprovider/fake/instancetype.go`, upstream `cloudprovider/fake`).
//!
//! - [`new_instance_type`] builds one fake instance type with upstream's defaults, pricing and
//!   requirements;
//! - [`instance_types`] is the benchmark catalog (`fake-it-0` … `fake-it-<n-1>`);
//! - [`default_catalog`] is what the fake provider offers when nothing else is configured;
//! - [`instance_types_assorted`] is the 1,344-type catalog of the instance-selection tests
//!   (use [`shuffle`] to randomise its order reproducibly);
//! - [`fake_label_policy`] is the core [`LabelPolicy`] extended with the fake provider's
//!   well-known labels.
//!
//! ```
//! use karpenter_fake::catalog;
//!
//! let types = catalog::instance_types(400);
//! assert_eq!(types[0].name, "fake-it-0");
//! assert!((types[4].offerings[0].price - 1.573741824).abs() < 1e-12);
//! ```

use std::sync::Arc;

use karpenter_core::labels::{self, LabelPolicy};
use karpenter_core::model::{InstanceType, Offering, Overhead};
use karpenter_core::requirements::{Operator, Requirement, Requirements};
use karpenter_core::resources::{Quantity, ResourceList, names};

/// The fake provider's instance-size label: `small` or `large`.
pub const SIZE_LABEL: &str = "size";
/// The fake provider's "exotic" label: `optional` on large types, absent (`DoesNotExist`) on
/// small ones.
pub const SPECIAL_LABEL: &str = "special";
/// The fake provider's integer label: the type's CPU count, rounded up.
pub const INTEGER_LABEL: &str = "integer";
/// The fake provider's reservation-id label (upstream `cloudprovider.ReservationIDLabel` under
/// the fake provider).
pub const RESERVATION_ID_LABEL: &str = "karpenter.test.sh/reservation-id";

/// Extended resource `fake.com/vendor-a`; adds a flat 1.0 to a type's price.
pub const VENDOR_A_RESOURCE: &str = "fake.com/vendor-a";
/// Extended resource `fake.com/vendor-b`; adds a flat 1.0 to a type's price.
pub const VENDOR_B_RESOURCE: &str = "fake.com/vendor-b";

/// Zone `test-zone-1`.
pub const ZONE_1: &str = "test-zone-1";
/// Zone `test-zone-2`.
pub const ZONE_2: &str = "test-zone-2";
/// Zone `test-zone-3` (on-demand only in the default offerings).
pub const ZONE_3: &str = "test-zone-3";
/// The three fake zones, in order.
pub const ZONES: [&str; 3] = [ZONE_1, ZONE_2, ZONE_3];

/// Architecture `amd64` (the default).
pub const ARCH_AMD64: &str = "amd64";
/// Architecture `arm64`.
pub const ARCH_ARM64: &str = "arm64";

/// The label keys the fake provider adds to the well-known set, in upstream's order.
pub const FAKE_WELL_KNOWN_LABELS: [&str; 4] = [
    SIZE_LABEL,
    SPECIAL_LABEL,
    INTEGER_LABEL,
    RESERVATION_ID_LABEL,
];

/// The core [`LabelPolicy`] plus the fake provider's well-known labels (`size`, `special`,
/// `integer`, `karpenter.test.sh/reservation-id`).
///
/// ```
/// let policy = karpenter_fake::catalog::fake_label_policy();
/// assert!(policy.is_well_known("size"));
/// assert!(policy.is_well_known(karpenter_core::labels::ZONE));
/// ```
pub fn fake_label_policy() -> LabelPolicy {
    LabelPolicy::core().with_well_known(FAKE_WELL_KNOWN_LABELS)
}

/// Options of [`new_instance_type`]. Empty fields take upstream's defaults.
#[derive(Debug, Clone, Default)]
pub struct InstanceTypeOptions {
    /// Capacity. `cpu`, `memory` and `pods` default to 4, 4Gi and 5 when absent or zero; other
    /// resources are kept as given.
    pub resources: ResourceList,
    /// Offerings; empty means [`default_offerings`] at the type's price.
    pub offerings: Vec<Offering>,
    /// `kubernetes.io/arch`; empty means `amd64`.
    pub architecture: String,
    /// `kubernetes.io/os` values; empty means {linux, windows, darwin}.
    pub operating_systems: Vec<String>,
    /// Extra requirements, intersected into the type's requirements before `size`/`special`.
    pub requirements: Vec<Requirement>,
}

impl InstanceTypeOptions {
    /// Options with the given capacity and every other field defaulted.
    pub fn with_resources(resources: ResourceList) -> Self {
        InstanceTypeOptions {
            resources,
            ..Default::default()
        }
    }
}

/// Upstream's `PriceFromResources`: 0.1 per CPU core, 0.1 per 10^9 bytes of memory, a flat 1.0
/// for each of `fake.com/vendor-a` and `fake.com/vendor-b` (whatever the quantity), nothing for
/// anything else. Resources are summed in name order.
pub fn price_from_resources(resources: &ResourceList) -> f64 {
    let mut price = 0.0;
    for (name, q) in resources.iter() {
        match name {
            names::CPU => price += 0.1 * q.as_f64(),
            names::MEMORY => price += (0.1 * q.as_f64()) / 1e9,
            VENDOR_A_RESOURCE | VENDOR_B_RESOURCE => price += 1.0,
            _ => {}
        }
    }
    price
}

/// The five default offerings, all available at `price`, in upstream's order: spot in
/// test-zone-1 and test-zone-2, then on-demand in test-zone-1, test-zone-2 and test-zone-3.
pub fn default_offerings(price: f64) -> Vec<Offering> {
    [
        (labels::CAPACITY_TYPE_SPOT, ZONE_1),
        (labels::CAPACITY_TYPE_SPOT, ZONE_2),
        (labels::CAPACITY_TYPE_ON_DEMAND, ZONE_1),
        (labels::CAPACITY_TYPE_ON_DEMAND, ZONE_2),
        (labels::CAPACITY_TYPE_ON_DEMAND, ZONE_3),
    ]
    .into_iter()
    .map(|(ct, zone)| Offering::new(zone, ct, price))
    .collect()
}

/// The fake overhead: kube-reserved `cpu: 100m`, `memory: 10Mi`.
pub fn fake_overhead() -> Overhead {
    let mut kube_reserved = ResourceList::new();
    kube_reserved.insert(names::CPU, Quantity::from_milli(100));
    kube_reserved.insert(names::MEMORY, Quantity::from_bytes(10 * MI));
    Overhead {
        kube_reserved,
        ..Overhead::default()
    }
}

const MI: i64 = 1 << 20;
const GI: i64 = 1 << 30;

fn gib(n: i64) -> Quantity {
    Quantity::from_bytes(n * GI)
}

fn default_if_zero(resources: &mut ResourceList, name: &str, default: Quantity) {
    if resources.get(name).is_none_or(|q| q.is_zero()) {
        resources.insert(name, default);
    }
}

/// Builds a fake instance type (upstream `fake.NewInstanceType`, upstream `fake.NewInstanceType`).
///
/// Requirements: `node.kubernetes.io/instance-type In [name]`, `kubernetes.io/arch In [arch]`,
/// `kubernetes.io/os In [os…]`, zone and capacity type `In` the values of the available
/// offerings, `integer In [ceil(cpu)]`, then the extra requirements, then `size In [large]` ∧
/// `special In [optional]` when cpu > 4 and memory > 8Gi, else `size In [small]` ∧
/// `special DoesNotExist`. Overhead: [`fake_overhead`].
///
/// ```
/// use karpenter_fake::catalog::{new_instance_type, InstanceTypeOptions};
///
/// let it = new_instance_type("default-instance-type", InstanceTypeOptions::default());
/// assert_eq!(it.offerings.len(), 5);
/// assert!((it.offerings[0].price - 0.8294967296).abs() < 1e-12);
/// ```
pub fn new_instance_type(name: &str, options: InstanceTypeOptions) -> InstanceType {
    let InstanceTypeOptions {
        mut resources,
        offerings,
        architecture,
        operating_systems,
        requirements: extra,
    } = options;
    default_if_zero(&mut resources, names::CPU, Quantity::from_units(4));
    default_if_zero(&mut resources, names::MEMORY, gib(4));
    default_if_zero(&mut resources, names::PODS, Quantity::from_units(5));

    let offerings = if offerings.is_empty() {
        default_offerings(price_from_resources(&resources))
    } else {
        offerings
    };
    let architecture = if architecture.is_empty() {
        ARCH_AMD64.to_string()
    } else {
        architecture
    };
    let operating_systems = if operating_systems.is_empty() {
        vec![
            "linux".to_string(),
            "windows".to_string(),
            "darwin".to_string(),
        ]
    } else {
        operating_systems
    };

    let cpu = resources.get_or_zero(names::CPU);
    let memory = resources.get_or_zero(names::MEMORY);
    let available: Vec<&Offering> = offerings.iter().filter(|o| o.available).collect();

    let mut reqs = Requirements::new();
    reqs.add(Requirement::new(
        labels::INSTANCE_TYPE,
        Operator::In,
        [name],
    ));
    reqs.add(Requirement::new(
        labels::ARCH,
        Operator::In,
        [&architecture],
    ));
    reqs.add(Requirement::new(
        labels::OS,
        Operator::In,
        &operating_systems,
    ));
    reqs.add(Requirement::new(
        labels::ZONE,
        Operator::In,
        available.iter().map(|o| o.zone.as_str()),
    ));
    reqs.add(Requirement::new(
        labels::CAPACITY_TYPE,
        Operator::In,
        available.iter().map(|o| o.capacity_type.as_str()),
    ));
    reqs.add(Requirement::new(
        INTEGER_LABEL,
        Operator::In,
        [cpu.value().to_string()],
    ));
    for r in extra {
        reqs.add(r);
    }
    if cpu > Quantity::from_units(4) && memory > gib(8) {
        reqs.add(Requirement::new(SIZE_LABEL, Operator::In, ["large"]));
        reqs.add(Requirement::new(SPECIAL_LABEL, Operator::In, ["optional"]));
    } else {
        reqs.add(Requirement::new(SIZE_LABEL, Operator::In, ["small"]));
        reqs.add(Requirement::does_not_exist(SPECIAL_LABEL));
    }

    InstanceType::new(name, reqs, offerings, resources, fake_overhead())
}

/// The benchmark catalog, upstream `fake.InstanceTypes(n)` (upstream `fake.InstanceTypes`): for `i`
/// in `0..n`, `fake-it-<i>` with `i+1` CPUs, `2(i+1)` GiB of memory, `10(i+1)` pods and the default
/// offerings at price `(i+1) × 0.3147483648`.
pub fn instance_types(n: usize) -> Vec<Arc<InstanceType>> {
    (0..n)
        .map(|i| {
            let k = i64::try_from(i).unwrap_or(i64::MAX).saturating_add(1);
            let mut resources = ResourceList::new();
            resources.insert(names::CPU, Quantity::from_units(k));
            resources.insert(
                names::MEMORY,
                Quantity::from_bytes(k.saturating_mul(2 * GI)),
            );
            resources.insert(names::PODS, Quantity::from_units(k.saturating_mul(10)));
            Arc::new(new_instance_type(
                &format!("fake-it-{i}"),
                InstanceTypeOptions::with_resources(resources),
            ))
        })
        .collect()
}

fn resources(cpu: i64, memory_gib: i64, pods: i64) -> ResourceList {
    let mut r = ResourceList::new();
    r.insert(names::CPU, Quantity::from_units(cpu));
    r.insert(names::MEMORY, gib(memory_gib));
    r.insert(names::PODS, Quantity::from_units(pods));
    r
}

/// The fake provider's default catalog (upstream `cloudprovider/fake/instancetype.go`), in this
/// order: `default-instance-type` (4 cpu, 4Gi, 5 pods), `small-instance-type` (2 cpu, 2Gi),
/// `gpu-vendor-instance-type` (defaults + `fake.com/vendor-a: 2`), `gpu-vendor-b-instance-type`
/// (defaults + `fake.com/vendor-b: 2`), `arm-instance-type` (arm64, OS {ios, linux, windows,
/// darwin}, 16 cpu, 128Gi) and `single-pod-instance-type` (4 cpu, 4Gi, 1 pod).
pub fn default_catalog() -> Vec<Arc<InstanceType>> {
    let mut vendor_a = ResourceList::new();
    vendor_a.insert(VENDOR_A_RESOURCE, Quantity::from_units(2));
    let mut vendor_b = ResourceList::new();
    vendor_b.insert(VENDOR_B_RESOURCE, Quantity::from_units(2));
    let types = [
        ("default-instance-type", InstanceTypeOptions::default()),
        (
            "small-instance-type",
            InstanceTypeOptions::with_resources(resources(2, 2, 5)),
        ),
        (
            "gpu-vendor-instance-type",
            InstanceTypeOptions::with_resources(vendor_a),
        ),
        (
            "gpu-vendor-b-instance-type",
            InstanceTypeOptions::with_resources(vendor_b),
        ),
        (
            "arm-instance-type",
            InstanceTypeOptions {
                resources: resources(16, 128, 5),
                architecture: ARCH_ARM64.to_string(),
                operating_systems: ["ios", "linux", "windows", "darwin"]
                    .map(String::from)
                    .to_vec(),
                ..Default::default()
            },
        ),
        (
            "single-pod-instance-type",
            InstanceTypeOptions::with_resources(resources(4, 4, 1)),
        ),
    ];
    types
        .into_iter()
        .map(|(name, options)| Arc::new(new_instance_type(name, options)))
        .collect()
}

/// Upstream `fake.InstanceTypesAssorted()` (upstream `cloudprovider/fake/instancetype.go`),
/// unshuffled: for cpu ∈ {1,2,4,…,64} × memory GiB ∈ {1,2,4,…,128} × zone × capacity type ∈ {spot,
/// on-demand} × os ∈ {linux}, {windows} × arch ∈ {amd64, arm64}, one type named
/// `<cpu>-cpu-<mem>-mem-<arch>-<os>-<zone>-<ct>` with exactly one available offering (that zone and
/// capacity type) priced by [`price_from_resources`]. 1,344 types.
pub fn instance_types_assorted() -> Vec<Arc<InstanceType>> {
    let mut out = Vec::with_capacity(1344);
    for cpu in [1, 2, 4, 8, 16, 32, 64] {
        for mem in [1, 2, 4, 8, 16, 32, 64, 128] {
            for zone in ZONES {
                for ct in [labels::CAPACITY_TYPE_SPOT, labels::CAPACITY_TYPE_ON_DEMAND] {
                    for os in ["linux", "windows"] {
                        for arch in [ARCH_AMD64, ARCH_ARM64] {
                            let mut resources = ResourceList::new();
                            resources.insert(names::CPU, Quantity::from_units(cpu));
                            resources.insert(names::MEMORY, gib(mem));
                            let price = price_from_resources(&resources);
                            let name = format!("{cpu}-cpu-{mem}-mem-{arch}-{os}-{zone}-{ct}");
                            out.push(Arc::new(new_instance_type(
                                &name,
                                InstanceTypeOptions {
                                    resources,
                                    offerings: vec![Offering::new(zone, ct, price)],
                                    architecture: arch.to_string(),
                                    operating_systems: vec![os.to_string()],
                                    requirements: Vec::new(),
                                },
                            )));
                        }
                    }
                }
            }
        }
    }
    out
}

/// Shuffles `items` in place with a Fisher–Yates shuffle driven by a SplitMix64 generator
/// seeded with `seed`: the same seed always gives the same order.
///
/// ```
/// let mut a: Vec<u32> = (0..10).collect();
/// let mut b = a.clone();
/// karpenter_fake::catalog::shuffle(&mut a, 7);
/// karpenter_fake::catalog::shuffle(&mut b, 7);
/// assert_eq!(a, b);
/// ```
pub fn shuffle<T>(items: &mut [T], seed: u64) {
    let mut state = seed;
    let mut next = move || {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    };
    for i in (1..items.len()).rev() {
        let bound = u64::try_from(i).unwrap_or(u64::MAX).saturating_add(1);
        let j = usize::try_from(next() % bound).unwrap_or(0);
        items.swap(i, j);
    }
}

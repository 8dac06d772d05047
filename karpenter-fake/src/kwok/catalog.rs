//! The kwok provider's instance-type catalog: 144 generated types, their labels, prices and
//! overhead.

use std::sync::Arc;

use karpenter_core::labels::{self, LabelPolicy};
use karpenter_core::model::{InstanceType, Offering, Overhead};
use karpenter_core::requirements::{Operator, Requirement, Requirements};
use karpenter_core::resources::{Quantity, ResourceList, names};

use super::{
    GROUP, INSTANCE_CPU_LABEL, INSTANCE_FAMILY_LABEL, INSTANCE_MEMORY_LABEL, INSTANCE_SIZE_LABEL,
};

/// The four zones every kwok instance type is offered in, in catalog order.
pub const ZONES: [&str; 4] = ["test-zone-a", "test-zone-b", "test-zone-c", "test-zone-d"];

/// The CPU counts of the catalog, in catalog order.
pub const CPUS: [i64; 12] = [1, 2, 4, 8, 16, 32, 48, 64, 96, 128, 192, 256];

/// The families of the catalog, in catalog order: the family letter and the GiB of memory per
/// CPU (`c`: compute, 2 GiB; `s`: standard, 4 GiB; `m`: memory, 8 GiB).
pub const FAMILIES: [(&str, i64); 3] = [("c", 2), ("s", 4), ("m", 8)];

/// The operating systems of the catalog, in catalog order (one per instance type).
pub const OPERATING_SYSTEMS: [&str; 2] = ["linux", "windows"];

/// The architectures of the catalog, in catalog order.
pub const ARCHITECTURES: [&str; 2] = ["amd64", "arm64"];

/// The capacity types of every type's offerings, in the order they are listed per zone.
pub const CAPACITY_TYPES: [&str; 2] = [labels::CAPACITY_TYPE_SPOT, labels::CAPACITY_TYPE_ON_DEMAND];

/// The number of instance types in the catalog.
pub const INSTANCE_TYPE_COUNT: usize =
    CPUS.len() * FAMILIES.len() * OPERATING_SYSTEMS.len() * ARCHITECTURES.len();

/// A spot offering costs this fraction of the on-demand price.
pub const SPOT_PRICE_FACTOR: f64 = 0.7;

/// The most pods a type holds, whatever its size.
pub const MAX_PODS: i64 = 1024;

/// Pods per CPU.
pub const PODS_PER_CPU: i64 = 16;

/// Ephemeral storage of every type: 20 GiB.
pub const EPHEMERAL_STORAGE_BYTES: i64 = 20 * GI;

/// The label keys the kwok provider adds to the well-known set.
pub const WELL_KNOWN_LABELS: [&str; 4] = [
    INSTANCE_SIZE_LABEL,
    INSTANCE_FAMILY_LABEL,
    INSTANCE_CPU_LABEL,
    INSTANCE_MEMORY_LABEL,
];

/// Types whose shipped on-demand price is one rounding off [`on_demand_price`]: the published
/// catalog was generated on a machine that fused the CPU term's multiply with the sum, and for
/// these two the fused result differs in the last bit. Their price is
/// `fma(0.025, cpu, memory term)`.
const FUSED_PRICE_TYPES: [&str; 2] = ["c-48x-arm64-windows", "c-192x-arm64-linux"];

const MI: i64 = 1 << 20;
const GI: i64 = 1 << 30;

/// The core [`LabelPolicy`] plus the kwok provider's well-known labels
/// (`karpenter.kwok.sh/instance-{size,family,cpu,memory}`) and its restricted label domain,
/// `karpenter.kwok.sh`.
///
/// ```
/// use karpenter_fake::kwok;
///
/// let policy = kwok::label_policy();
/// assert!(policy.is_well_known(kwok::INSTANCE_CPU_LABEL));
/// assert!(policy.is_restricted("karpenter.kwok.sh/anything-else"));
/// assert!(!policy.is_restricted(kwok::INSTANCE_SIZE_LABEL));
/// ```
pub fn label_policy() -> LabelPolicy {
    LabelPolicy::core()
        .with_well_known(WELL_KNOWN_LABELS)
        .with_restricted_domains([GROUP])
}

/// The overhead of every kwok type: kube-reserved `cpu: 100m`, `memory: 10Mi`; no
/// system-reserved, no eviction threshold.
pub fn overhead() -> Overhead {
    let mut kube_reserved = ResourceList::new();
    kube_reserved.insert(names::CPU, Quantity::from_milli(100));
    kube_reserved.insert(names::MEMORY, Quantity::from_bytes(10 * MI));
    Overhead {
        kube_reserved,
        ..Overhead::default()
    }
}

/// The family letter of a memory-per-CPU factor: `c` for 2, `s` for 4, `m` for 8, `e`
/// ("exotic") for anything else.
pub fn family_of(memory_factor: i64) -> &'static str {
    match memory_factor {
        2 => "c",
        4 => "s",
        8 => "m",
        _ => "e",
    }
}

/// A generated type's name: `<family>-<cpu>x-<arch>-<os>`, e.g. `c-16x-amd64-linux`.
///
/// ```
/// assert_eq!(karpenter_fake::kwok::instance_type_name(16, 2, "amd64", "linux"), "c-16x-amd64-linux");
/// ```
pub fn instance_type_name(cpu: i64, memory_factor: i64, arch: &str, os: &str) -> String {
    format!("{}-{cpu}x-{arch}-{os}", family_of(memory_factor))
}

/// Pods a type of `cpu` CPUs holds: `min(16 × cpu, 1024)` (and never negative).
pub fn pods_for(cpu: i64) -> i64 {
    cpu.saturating_mul(PODS_PER_CPU).clamp(0, MAX_PODS)
}

/// The on-demand price per hour of a type with `cpu` CPUs and `memory_bytes` of memory:
/// `0.025 × cpu + 0.001 × bytes / 10⁹`, evaluated in that order in `f64`.
///
/// ```
/// let p = karpenter_fake::kwok::on_demand_price(1, 2 << 30);
/// assert_eq!(p, 0.027147483648);
/// ```
pub fn on_demand_price(cpu: i64, memory_bytes: i64) -> f64 {
    cpu_term(cpu) + memory_term(memory_bytes)
}

// The catalog's numbers are small integers: the conversions to f64 are exact.
#[allow(clippy::cast_precision_loss)]
fn cpu_term(cpu: i64) -> f64 {
    0.025 * cpu as f64
}

#[allow(clippy::cast_precision_loss)]
fn memory_term(memory_bytes: i64) -> f64 {
    0.001 * memory_bytes as f64 / 1e9
}

/// The on-demand price of the named catalog type with `cpu` CPUs and `memory_bytes` of memory
/// as the published catalog lists it: [`on_demand_price`], except for the two types whose
/// published price is the fused-multiply-add rounding of the same formula.
#[allow(clippy::cast_precision_loss)]
pub fn catalog_on_demand_price(name: &str, cpu: i64, memory_bytes: i64) -> f64 {
    if FUSED_PRICE_TYPES.contains(&name) {
        0.025_f64.mul_add(cpu as f64, memory_term(memory_bytes))
    } else {
        on_demand_price(cpu, memory_bytes)
    }
}

/// The spot price for an on-demand price: `on_demand × 0.7`.
pub fn spot_price(on_demand: f64) -> f64 {
    on_demand * SPOT_PRICE_FACTOR
}

/// The instance-size label value of a type name: the size of an AWS-style name
/// (`<family>.<size>`, size one of `nano`, `micro`, `small`, `medium`, `large`, `<n>xlarge`,
/// `metal`), else `cpu` (the CPU count as written). Every generated type takes the latter.
pub fn size_label_value(name: &str, cpu: &str) -> String {
    if let Some((family, size)) = name.split_once('.') {
        let family_ok = !family.is_empty()
            && family
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_');
        let size_ok = matches!(
            size,
            "nano" | "micro" | "small" | "medium" | "large" | "metal"
        ) || size
            .strip_suffix("xlarge")
            .is_some_and(|n| n.chars().all(|c| c.is_ascii_digit()));
        if family_ok && size_ok {
            return size.to_string();
        }
    }
    cpu.to_string()
}

/// The instance-family label value of a type name: the part before the first `.` or `-`, or the
/// first character when there is neither (empty for an empty name).
pub fn family_label_value(name: &str) -> String {
    match name.split_once(['.', '-']) {
        Some((family, _)) => family.to_string(),
        None => name.chars().next().map(String::from).unwrap_or_default(),
    }
}

/// The kwok catalog: 144 instance types, in the published order (CPU count, then family `c`,
/// `s`, `m`, then OS linux, windows, then arch amd64, arm64).
///
/// Each type has capacity `cpu`, `memory` (`cpu × 2/4/8 GiB`), `pods` ([`pods_for`]) and
/// `ephemeral-storage: 20Gi`, the [`overhead`], and eight available offerings, per zone
/// `test-zone-a`..`test-zone-d` one spot then one on-demand, spot at 0.7 × on-demand
/// ([`catalog_on_demand_price`]). Its requirements: `node.kubernetes.io/instance-type`,
/// `kubernetes.io/arch`, `kubernetes.io/os`, zone (the four zones), capacity type (spot,
/// on-demand), and the four `karpenter.kwok.sh/instance-*` labels: size and cpu are the CPU
/// count, family the letter, memory the canonical quantity (`2Gi`, `1Ti`, `1536Gi`).
///
/// ```
/// let types = karpenter_fake::kwok::instance_types();
/// assert_eq!(types.len(), 144);
/// assert_eq!(types[0].name(), "c-1x-amd64-linux");
/// ```
pub fn instance_types() -> Vec<Arc<InstanceType>> {
    let mut out = Vec::with_capacity(INSTANCE_TYPE_COUNT);
    for cpu in CPUS {
        for (_, factor) in FAMILIES {
            for os in OPERATING_SYSTEMS {
                for arch in ARCHITECTURES {
                    out.push(Arc::new(new_instance_type(cpu, factor, arch, os)));
                }
            }
        }
    }
    out
}

/// One generated type: `cpu` CPUs, `memory_factor` GiB per CPU, one architecture and one OS
/// (see [`instance_types`]).
pub fn new_instance_type(cpu: i64, memory_factor: i64, arch: &str, os: &str) -> InstanceType {
    let name = instance_type_name(cpu, memory_factor, arch, os);
    let memory_bytes = cpu.saturating_mul(memory_factor).saturating_mul(GI);
    let cpu_q = Quantity::from_units(cpu);
    let memory_q = Quantity::from_bytes(memory_bytes);

    let mut capacity = ResourceList::new();
    capacity.insert(names::CPU, cpu_q);
    capacity.insert(names::MEMORY, memory_q);
    capacity.insert(names::PODS, Quantity::from_units(pods_for(cpu)));
    capacity.insert(
        names::EPHEMERAL_STORAGE,
        Quantity::from_bytes(EPHEMERAL_STORAGE_BYTES),
    );

    let on_demand = catalog_on_demand_price(&name, cpu, memory_bytes);
    let mut offerings = Vec::with_capacity(ZONES.len() * CAPACITY_TYPES.len());
    for zone in ZONES {
        for ct in CAPACITY_TYPES {
            let price = if ct == labels::CAPACITY_TYPE_SPOT {
                spot_price(on_demand)
            } else {
                on_demand
            };
            offerings.push(Offering::new(zone, ct, price));
        }
    }

    let cpu_text = cpu_q.to_string();
    let mut reqs = Requirements::new();
    reqs.add(Requirement::new(
        labels::INSTANCE_TYPE,
        Operator::In,
        [&name],
    ));
    reqs.add(Requirement::new(labels::ARCH, Operator::In, [arch]));
    reqs.add(Requirement::new(labels::OS, Operator::In, [os]));
    reqs.add(Requirement::new(labels::ZONE, Operator::In, ZONES));
    reqs.add(Requirement::new(
        labels::CAPACITY_TYPE,
        Operator::In,
        CAPACITY_TYPES,
    ));
    reqs.add(Requirement::new(
        INSTANCE_SIZE_LABEL,
        Operator::In,
        [size_label_value(&name, &cpu_text)],
    ));
    reqs.add(Requirement::new(
        INSTANCE_FAMILY_LABEL,
        Operator::In,
        [family_label_value(&name)],
    ));
    reqs.add(Requirement::new(
        INSTANCE_CPU_LABEL,
        Operator::In,
        [&cpu_text],
    ));
    reqs.add(Requirement::new(
        INSTANCE_MEMORY_LABEL,
        Operator::In,
        [memory_q.to_string()],
    ));

    InstanceType::new(name, reqs, offerings, capacity, overhead())
}

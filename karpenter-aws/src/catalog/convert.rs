//! EC2 `InstanceTypeInfo` → catalog instance type: capacity, overhead, labels and offerings,
//! following upstream's rules (aws/karpenter-provider-aws `pkg/providers/instancetype`,
//! `pkg/providers/pricing`).

use std::collections::{BTreeMap, BTreeSet};

use karpenter_core::catalog::{CatalogInstanceType, CatalogOffering, CatalogOverhead};
use karpenter_core::labels as core_labels;
use karpenter_core::resources::{Quantity, ResourceList};

use super::ec2::{InstanceTypeInfo, NetworkInfo};
use super::labels;
use super::options::{AwsCatalogOptions, EvictionSignal, MEMORY_AVAILABLE, NODEFS_AVAILABLE};
use super::quantity::{self, MI, Suffixes};
use super::{DropReason, resources};

/// The EC2 usage classes Karpenter turns into capacity types (capacity blocks are ignored).
const ON_DEMAND: &str = core_labels::CAPACITY_TYPE_ON_DEMAND;
const SPOT: &str = core_labels::CAPACITY_TYPE_SPOT;

/// Converts one instance type. `zones` are the zones where EC2 offers it; `on_demand_price` its
/// on-demand price in USD per hour. Options must have been validated.
pub(crate) fn convert(
    info: &InstanceTypeInfo,
    zones: Option<&BTreeSet<String>>,
    on_demand_price: Option<f64>,
    opts: &AwsCatalogOptions,
) -> Result<CatalogInstanceType, DropReason> {
    let name = info
        .instance_type
        .clone()
        .ok_or(DropReason::MissingData("InstanceType"))?;

    // The DescribeInstanceTypes filters: HVM and an x86_64 or arm64 architecture.
    if !info
        .supported_virtualization_types
        .iter()
        .any(|v| v == "hvm")
    {
        return Err(DropReason::UnsupportedVirtualization(
            info.supported_virtualization_types.clone(),
        ));
    }
    let architectures = info
        .processor_info
        .as_ref()
        .map(|p| p.supported_architectures.as_slice())
        .unwrap_or_default();
    let arch = architectures
        .iter()
        .find_map(|a| kube_architecture(a))
        .ok_or_else(|| DropReason::UnsupportedArchitecture(architectures.to_vec()))?;

    // Windows families only run on amd64: the OS requirement is empty otherwise.
    let family = opts.ami_family;
    let os = if family.is_windows() {
        if arch != "amd64" {
            return Err(DropReason::NoOperatingSystem);
        }
        "windows"
    } else {
        "linux"
    };
    // The only AMI-family compatibility rule: AL2023 does not boot on a1.
    if family == super::AmiFamily::Al2023 && name.starts_with("a1.") {
        return Err(DropReason::IncompatibleWithAmiFamily(family.name()));
    }
    node_class_compatibility(info, opts)?;

    let vcpus = info
        .vcpu_info
        .as_ref()
        .and_then(|v| v.default_vcpus)
        .filter(|n| *n > 0)
        .ok_or(DropReason::MissingData("VCpuInfo.DefaultVCpus"))?;
    let memory_mib = info
        .memory_info
        .as_ref()
        .and_then(|m| m.size_in_mib)
        .filter(|n| *n > 0)
        .ok_or(DropReason::MissingData("MemoryInfo.SizeInMiB"))?;

    let capacity_types: Vec<&'static str> = [ON_DEMAND, SPOT]
        .into_iter()
        .filter(|ct| info.supported_usage_classes.iter().any(|uc| uc == ct))
        .collect();
    if capacity_types.is_empty() {
        return Err(DropReason::NoCapacityType(
            info.supported_usage_classes.clone(),
        ));
    }
    let zones = zones
        .filter(|z| !z.is_empty())
        .ok_or(DropReason::NotOffered)?;
    let on_demand_price = on_demand_price
        .filter(|p| p.is_finite() && *p > 0.0)
        .ok_or(DropReason::NoOnDemandPrice)?;

    // ---- capacity ----
    let mut capacity = ResourceList::new();
    capacity.insert(resources::CPU, Quantity::from_units(vcpus));

    let memory_capacity_mib = memory_capacity_mib(
        memory_mib,
        architectures.first().map(String::as_str),
        opts.vm_memory_overhead_percent,
    );
    if memory_capacity_mib <= 0 {
        return Err(DropReason::NoUsableMemory);
    }
    capacity.insert(resources::MEMORY, quantity::mebibytes(memory_capacity_mib));

    let (storage_bytes, storage_suffixes) = ephemeral_storage(info, opts);
    capacity.insert(
        resources::EPHEMERAL_STORAGE,
        quantity::bytes(storage_bytes, storage_suffixes),
    );

    let network = info.network_info.as_ref();
    let pods = match opts.max_pods {
        Some(n) => n,
        // EFA-only interfaces on card 0 take an ENI the VPC CNI cannot use.
        None if family.eni_limited_pod_density() => eni_limited_pods(
            network,
            opts.reserved_enis.saturating_add(
                opts.network_interfaces
                    .iter()
                    .filter(|n| n.efa_only && n.network_card_index == 0)
                    .count() as i64,
            ),
        )?,
        None => 110,
    };
    let pods = match opts.pods_per_core {
        Some(ppc) if ppc > 0 && family.pods_per_core_enabled() => {
            pods.min(ppc.saturating_mul(vcpus))
        }
        _ => pods,
    };
    capacity.insert(resources::PODS, Quantity::from_units(pods));

    for (resource, count) in extended_resources(info, family.is_windows(), opts) {
        if count > 0 {
            capacity.insert(resource, Quantity::from_units(count));
        }
    }

    // ---- overhead ----
    let overhead_pods = if family.eni_limited_memory_overhead() {
        eni_limited_pods(network, 0)?
    } else {
        pods
    };
    let mut kube_reserved = ResourceList::new();
    kube_reserved.insert(
        resources::CPU,
        quantity::milli(kube_reserved_cpu_millis(vcpus)),
    );
    kube_reserved.insert(
        resources::MEMORY,
        quantity::mebibytes(11 * overhead_pods + 255),
    );
    kube_reserved.insert(resources::EPHEMERAL_STORAGE, quantity::mebibytes(1024));
    for (k, v) in opts.kube_reserved.iter() {
        kube_reserved.insert(k, v);
    }

    let mut eviction_threshold = ResourceList::new();
    eviction_threshold.insert(resources::MEMORY, quantity::mebibytes(100));
    eviction_threshold.insert(
        resources::EPHEMERAL_STORAGE,
        // ceil(10% of the ephemeral storage)
        quantity::bytes(storage_bytes.saturating_add(9) / 10, storage_suffixes),
    );
    let signals = [
        (
            MEMORY_AVAILABLE,
            resources::MEMORY,
            memory_capacity_mib * MI,
        ),
        (
            NODEFS_AVAILABLE,
            resources::EPHEMERAL_STORAGE,
            storage_bytes,
        ),
    ];
    for (signal, resource, capacity_bytes) in signals {
        // Validated up front, so an error here cannot happen; treat it as "not set".
        if let Ok(Some(value)) = opts.eviction_signal(signal) {
            let value = match value {
                EvictionSignal::Quantity(q) => q,
                EvictionSignal::Percent(p) => {
                    let bytes = (capacity_bytes as f64 / 100.0 * p).ceil() as i64;
                    quantity::bytes(bytes, Suffixes::Binary)
                }
            };
            eviction_threshold.insert(resource, value);
        }
    }

    let overhead = CatalogOverhead {
        kube_reserved,
        system_reserved: opts.system_reserved.clone(),
        eviction_threshold,
    };

    // ---- labels ----
    let labels = compute_labels(info, &name, arch, os, vcpus, memory_mib, opts);

    // ---- offerings ----
    let spot_price = estimate_spot_price(on_demand_price, opts.spot_price_factor);
    let mut offerings = Vec::with_capacity(zones.len() * capacity_types.len());
    for zone in zones {
        for &capacity_type in &capacity_types {
            offerings.push(CatalogOffering {
                zone: zone.clone(),
                capacity_type: capacity_type.to_owned(),
                price: if capacity_type == SPOT {
                    spot_price
                } else {
                    on_demand_price
                },
                available: true,
            });
        }
    }

    Ok(CatalogInstanceType {
        name,
        capacity,
        overhead,
        labels,
        offerings,
    })
}

/// `x86_64` → `amd64`, `arm64` → `arm64`; anything else is not a Kubernetes architecture here.
fn kube_architecture(aws: &str) -> Option<&'static str> {
    match aws {
        "x86_64" => Some("amd64"),
        "arm64" => Some("arm64"),
        _ => None,
    }
}

/// Memory capacity in MiB: the type's memory, less 64 MiB of CMA on Graviton (first
/// architecture arm64), less `ceil(memory × vm_overhead)` MiB.
pub(crate) fn memory_capacity_mib(
    size_in_mib: i64,
    first_architecture: Option<&str>,
    vm_overhead: f64,
) -> i64 {
    let mib = if first_architecture == Some("arm64") {
        size_in_mib - 64
    } else {
        size_in_mib
    };
    // Upstream multiplies the byte count and divides back to MiB in floating point; scaling by
    // powers of two is exact, so this is the same number.
    let overhead_mib = ((mib * MI) as f64 * vm_overhead / MI as f64).ceil() as i64;
    mib - overhead_mib
}

/// The ephemeral-storage capacity in bytes and how to print it.
fn ephemeral_storage(info: &InstanceTypeInfo, opts: &AwsCatalogOptions) -> (i64, Suffixes) {
    if opts.instance_store_raid0
        && let Some(gb) = info
            .instance_storage_info
            .as_ref()
            .and_then(|s| s.total_size_in_gb)
            .filter(|gb| *gb > 0)
    {
        return (gb.saturating_mul(1_000_000_000), Suffixes::Decimal);
    }
    let bytes = opts
        .ephemeral_storage_bytes
        .unwrap_or_else(|| opts.ami_family.default_ephemeral_storage_bytes());
    (bytes, Suffixes::Binary)
}

/// Upstream's node-class compatibility checks: the class's network interfaces fit the type's
/// cards (ENA supported, the card exists, the device index is below its interface limit, no
/// more `efa-only` interfaces than EFA allows), nested virtualization is supported when
/// enabled, connection tracking needs Nitro, and the placement group's strategy is supported.
fn node_class_compatibility(
    info: &InstanceTypeInfo,
    opts: &AwsCatalogOptions,
) -> Result<(), DropReason> {
    let incompatible = |what| Err(DropReason::IncompatibleWithNodeClass(what));
    if !opts.network_interfaces.is_empty() {
        let Some(network) = info
            .network_info
            .as_ref()
            .filter(|n| !n.network_cards.is_empty())
        else {
            return incompatible("networkInterfaces");
        };
        if network.ena_support.as_deref() == Some("unsupported") {
            return incompatible("networkInterfaces");
        }
        for ni in &opts.network_interfaces {
            let card = usize::try_from(ni.network_card_index)
                .ok()
                .filter(|i| *i < network.network_cards.len())
                .and_then(|_| {
                    network
                        .network_cards
                        .iter()
                        .find(|c| c.network_card_index == Some(ni.network_card_index))
                });
            let fits = card
                .and_then(|c| c.maximum_network_interfaces)
                .is_some_and(|max| max > ni.device_index);
            if !fits {
                return incompatible("networkInterfaces");
            }
        }
        let efa_only = opts
            .network_interfaces
            .iter()
            .filter(|n| n.efa_only)
            .count() as i64;
        let efa_max = network
            .efa_info
            .as_ref()
            .and_then(|e| e.maximum_efa_interfaces);
        if efa_only > 0 && efa_max.is_none_or(|m| efa_only > m) {
            return incompatible("networkInterfaces");
        }
    }
    if opts.nested_virtualization
        && !info.processor_info.as_ref().is_some_and(|p| {
            p.supported_features
                .iter()
                .any(|f| f == "nested-virtualization")
        })
    {
        return incompatible("cpuOptions.nestedVirtualization");
    }
    if opts.connection_tracking && info.hypervisor.as_deref() != Some("nitro") {
        return incompatible("connectionTracking");
    }
    if let Some(strategy) = &opts.placement_group_strategy
        && !info
            .placement_group_info
            .as_ref()
            .is_some_and(|p| p.supported_strategies.contains(strategy))
    {
        return incompatible("placementGroupSelector");
    }
    Ok(())
}

/// The VPC CNI pod limit: `usable ENIs × (IPv4 per ENI − 1) + 2`, with usable = the default
/// card's interfaces less `reserved_enis` (0 pods when none is usable).
pub(crate) fn eni_limited_pods(
    network: Option<&NetworkInfo>,
    reserved_enis: i64,
) -> Result<i64, DropReason> {
    let network = network.ok_or(DropReason::MissingData("NetworkInfo"))?;
    let card_index = network
        .default_network_card_index
        .ok_or(DropReason::MissingData(
            "NetworkInfo.DefaultNetworkCardIndex",
        ))?;
    let card = network
        .network_cards
        .iter()
        .find(|c| c.network_card_index == Some(card_index))
        .or_else(|| {
            usize::try_from(card_index)
                .ok()
                .and_then(|i| network.network_cards.get(i))
        })
        .ok_or(DropReason::MissingData("NetworkInfo.NetworkCards"))?;
    let interfaces = card
        .maximum_network_interfaces
        .ok_or(DropReason::MissingData(
            "NetworkInfo.NetworkCards[].MaximumNetworkInterfaces",
        ))?;
    let ips = network
        .ipv4_addresses_per_interface
        .ok_or(DropReason::MissingData(
            "NetworkInfo.Ipv4AddressesPerInterface",
        ))?;
    let usable = interfaces.saturating_sub(reserved_enis).max(0);
    if usable == 0 {
        return Ok(0);
    }
    Ok(usable.saturating_mul((ips - 1).max(0)).saturating_add(2))
}

/// kube-reserved CPU in milli-cores: 6% of the first core, 1% of the second, 0.5% of the third
/// and fourth, 0.25% of the rest, each band rounded down separately.
pub(crate) fn kube_reserved_cpu_millis(vcpus: i64) -> i64 {
    // (start, end, numerator, denominator) in milli-cores.
    const BANDS: [(i64, i64, i64, i64); 4] = [
        (0, 1000, 6, 100),
        (1000, 2000, 1, 100),
        (2000, 4000, 5, 1000),
        (4000, 1 << 31, 25, 10_000),
    ];
    let millis = vcpus.saturating_mul(1000);
    BANDS
        .iter()
        .filter(|(start, ..)| millis >= *start)
        .map(|&(start, end, num, den)| (millis.min(end) - start) * num / den)
        .sum()
}

/// Extended resources with their counts (zero included; the caller drops zeros).
fn extended_resources(
    info: &InstanceTypeInfo,
    windows: bool,
    opts: &AwsCatalogOptions,
) -> Vec<(&'static str, i64)> {
    let gpus = info
        .gpu_info
        .as_ref()
        .map(|g| g.gpus.as_slice())
        .unwrap_or_default();
    let gpu_count = |manufacturer: &str| -> i64 {
        gpus.iter()
            .filter(|g| g.manufacturer.as_deref() == Some(manufacturer))
            .filter_map(|g| g.count)
            .sum()
    };
    let neuron = info
        .neuron_info
        .as_ref()
        .map(|n| n.neuron_devices.as_slice())
        .unwrap_or_default();
    let neuron_devices: i64 = neuron.iter().filter_map(|d| d.count).sum();
    let neuron_cores = neuron.first().map_or(0, |d| {
        d.count
            .unwrap_or(0)
            .saturating_mul(d.core_info.as_ref().and_then(|c| c.count).unwrap_or(0))
    });
    let network = info.network_info.as_ref();
    // The class's interfaces, when it lists them, decide how many EFA devices a node has.
    let efa = if opts.network_interfaces.is_empty() {
        network
            .and_then(|n| n.efa_info.as_ref())
            .and_then(|e| e.maximum_efa_interfaces)
            .unwrap_or(0)
    } else {
        opts.network_interfaces
            .iter()
            .filter(|n| n.efa_only)
            .count() as i64
    };
    let mut out = vec![
        (resources::NVIDIA_GPU, gpu_count("NVIDIA")),
        (resources::AMD_GPU, gpu_count("AMD")),
        (resources::HABANA_GAUDI, gpu_count("Habana")),
        (resources::AWS_NEURON, neuron_devices),
        (resources::AWS_NEURON_CORE, neuron_cores),
        (resources::EFA, efa),
    ];
    if windows {
        // Upstream reads IPv4-per-interface from its static VPC limits table; the API's value is
        // the same figure for nearly every type.
        let ips = network
            .and_then(|n| n.ipv4_addresses_per_interface)
            .unwrap_or(0);
        out.push((resources::PRIVATE_IPV4_ADDRESS, (ips - 1).max(0)));
    }
    out
}

/// Upstream's label-value normalisation: lower case, spaces to dashes.
fn lower_kebab(s: &str) -> String {
    s.replace(' ', "-").to_lowercase()
}

/// `instance-category` and `instance-generation`: upstream matches
/// `^([a-z]+)(-[0-9]+tb)?([0-9]+).*\.` against the type name.
pub(crate) fn category_and_generation(name: &str) -> Option<(&str, &str)> {
    let letters = name.bytes().take_while(u8::is_ascii_lowercase).count();
    if letters == 0 {
        return None;
    }
    let (category, rest) = name.split_at(letters);
    let generation = |s: &str| -> Option<usize> {
        let digits = s.bytes().take_while(u8::is_ascii_digit).count();
        // The generation must be followed, somewhere, by a dot.
        (digits > 0 && s[digits..].contains('.')).then_some(digits)
    };
    // With the optional `-<n>tb` group first, as the regex tries it first.
    if let Some(after_dash) = rest.strip_prefix('-') {
        let n = after_dash.bytes().take_while(u8::is_ascii_digit).count();
        if n > 0
            && let Some(tail) = after_dash[n..].strip_prefix("tb")
            && let Some(digits) = generation(tail)
        {
            return Some((category, &tail[..digits]));
        }
    }
    generation(rest).map(|digits| (category, &rest[..digits]))
}

#[allow(clippy::too_many_arguments)]
fn compute_labels(
    info: &InstanceTypeInfo,
    name: &str,
    arch: &str,
    os: &str,
    vcpus: i64,
    memory_mib: i64,
    opts: &AwsCatalogOptions,
) -> BTreeMap<String, String> {
    let mut l = BTreeMap::new();
    let mut put = |k: &str, v: String| {
        l.insert(k.to_owned(), v);
    };
    put(core_labels::INSTANCE_TYPE, name.to_owned());
    put(core_labels::ARCH, arch.to_owned());
    put(core_labels::OS, os.to_owned());
    put(core_labels::REGION, opts.region.clone());
    if let Some(build) = opts.ami_family.windows_build() {
        put(core_labels::WINDOWS_BUILD, build.to_owned());
    }

    put(labels::INSTANCE_CPU, vcpus.to_string());
    put(labels::INSTANCE_MEMORY, memory_mib.to_string());
    if let Some(p) = &info.processor_info {
        put(
            labels::INSTANCE_CPU_MANUFACTURER,
            lower_kebab(p.manufacturer.as_deref().unwrap_or_default()),
        );
        let mhz = (p.sustained_clock_speed_in_ghz.unwrap_or(0.0) * 1000.0).round() as i64;
        put(
            labels::INSTANCE_CPU_SUSTAINED_CLOCK_SPEED_MHZ,
            mhz.to_string(),
        );
    }
    put(
        labels::INSTANCE_HYPERVISOR,
        info.hypervisor.clone().unwrap_or_default(),
    );
    let network = info.network_info.as_ref();
    put(
        labels::INSTANCE_ENCRYPTION_IN_TRANSIT_SUPPORTED,
        network
            .and_then(|n| n.encryption_in_transit_supported)
            .unwrap_or(false)
            .to_string(),
    );
    put(
        labels::NITRO_SANDBOX,
        (info.nitro_enclaves_support.as_deref() == Some("supported")).to_string(),
    );

    if let Some((category, generation)) = category_and_generation(name) {
        put(labels::INSTANCE_CATEGORY, category.to_owned());
        put(labels::INSTANCE_GENERATION, generation.to_owned());
    }
    let parts: Vec<&str> = name.split('.').collect();
    if let [family, size] = parts.as_slice() {
        put(labels::INSTANCE_FAMILY, (*family).to_owned());
        put(labels::INSTANCE_SIZE, (*size).to_owned());
    }
    let family_part = parts.first().copied().unwrap_or_default();
    put(
        labels::INSTANCE_CAPABILITY_FLEX,
        family_part.contains("-flex").to_string(),
    );

    if let Some(storage) = &info.instance_storage_info
        && storage.nvme_support.as_deref() != Some("unsupported")
        && let Some(gb) = storage.total_size_in_gb
    {
        put(labels::INSTANCE_LOCAL_NVME, gb.to_string());
    }

    // Upstream reads a static table scraped from the AWS docs; the API's per-card baseline
    // bandwidth gives the same figure for ~96% of types (moto's data files).
    if let Some(n) = network {
        let baselines: Vec<f64> = n
            .network_cards
            .iter()
            .filter_map(|c| c.baseline_bandwidth_in_gbps)
            .collect();
        if !baselines.is_empty() {
            let mbps = (baselines.iter().sum::<f64>() * 1000.0).round() as i64;
            put(labels::INSTANCE_NETWORK_BANDWIDTH, mbps.to_string());
        }
    }

    if let Some(ebs) = &info.ebs_info
        && ebs.ebs_optimized_support.as_deref() == Some("default")
        && let Some(optimized) = &ebs.ebs_optimized_info
    {
        put(
            labels::INSTANCE_EBS_BANDWIDTH,
            optimized.maximum_bandwidth_in_mbps.unwrap_or(0).to_string(),
        );
    }

    if let Some(gpu_info) = &info.gpu_info
        && let [gpu] = gpu_info.gpus.as_slice()
    {
        put(
            labels::INSTANCE_GPU_NAME,
            lower_kebab(gpu.name.as_deref().unwrap_or_default()),
        );
        put(
            labels::INSTANCE_GPU_MANUFACTURER,
            lower_kebab(gpu.manufacturer.as_deref().unwrap_or_default()),
        );
        put(
            labels::INSTANCE_GPU_COUNT,
            gpu.count.unwrap_or(0).to_string(),
        );
        if let Some(mib) = gpu.memory_info.as_ref().and_then(|m| m.size_in_mib) {
            put(labels::INSTANCE_GPU_MEMORY, mib.to_string());
        }
    }

    if info.neuron_info.is_none()
        && let Some(acc_info) = &info.inference_accelerator_info
        && let [acc] = acc_info.accelerators.as_slice()
    {
        put(
            labels::INSTANCE_ACCELERATOR_NAME,
            lower_kebab(acc.name.as_deref().unwrap_or_default()),
        );
        put(
            labels::INSTANCE_ACCELERATOR_MANUFACTURER,
            lower_kebab(acc.manufacturer.as_deref().unwrap_or_default()),
        );
        put(
            labels::INSTANCE_ACCELERATOR_COUNT,
            acc.count.unwrap_or(0).to_string(),
        );
    }
    if let Some(neuron) = &info.neuron_info
        && let [device] = neuron.neuron_devices.as_slice()
    {
        put(
            labels::INSTANCE_ACCELERATOR_NAME,
            lower_kebab(device.name.as_deref().unwrap_or_default()),
        );
        put(labels::INSTANCE_ACCELERATOR_MANUFACTURER, "aws".to_owned());
        put(
            labels::INSTANCE_ACCELERATOR_COUNT,
            device.count.unwrap_or(0).to_string(),
        );
    }
    l
}

/// `on_demand × factor`, rounded to a millionth of a dollar (never rounded down to zero).
pub(crate) fn estimate_spot_price(on_demand: f64, factor: f64) -> f64 {
    let raw = on_demand * factor;
    let rounded = (raw * 1e6).round() / 1e6;
    if rounded > 0.0 { rounded } else { raw }
}

//! SDK shapes to this crate's plain data and back: instance type descriptions (for the catalog
//! conversion), subnets, security groups, images, filters and tags.

use std::collections::BTreeMap;

use aws_sdk_ec2::types as ec2;

use crate::ami::Image;
use crate::catalog::ec2 as cat;
use crate::resolve::{Filter, SecurityGroupInfo, SubnetInfo};

/// An SDK `InstanceTypeInfo` as the catalog's [`cat::InstanceTypeInfo`] (the fields the
/// conversion reads; the same shape the embedded catalog deserializes from JSON).
pub fn instance_type_info(i: &ec2::InstanceTypeInfo) -> cat::InstanceTypeInfo {
    let int = |v: Option<i32>| v.map(i64::from);
    cat::InstanceTypeInfo {
        instance_type: i.instance_type().map(|t| t.as_str().to_string()),
        vcpu_info: i.v_cpu_info().map(|v| cat::VCpuInfo {
            default_vcpus: int(v.default_v_cpus()),
        }),
        memory_info: i.memory_info().map(|m| cat::MemoryInfo {
            size_in_mib: m.size_in_mib(),
        }),
        processor_info: i.processor_info().map(|p| cat::ProcessorInfo {
            supported_architectures: p
                .supported_architectures()
                .iter()
                .map(|a| a.as_str().to_string())
                .collect(),
            manufacturer: p.manufacturer().map(str::to_string),
            sustained_clock_speed_in_ghz: p.sustained_clock_speed_in_ghz(),
            supported_features: p
                .supported_features()
                .iter()
                .map(|f| f.as_str().to_string())
                .collect(),
        }),
        network_info: i.network_info().map(|n| cat::NetworkInfo {
            default_network_card_index: int(n.default_network_card_index()),
            network_cards: n
                .network_cards()
                .iter()
                .map(|c| cat::NetworkCardInfo {
                    network_card_index: int(c.network_card_index()),
                    maximum_network_interfaces: int(c.maximum_network_interfaces()),
                    baseline_bandwidth_in_gbps: c.baseline_bandwidth_in_gbps(),
                    peak_bandwidth_in_gbps: c.peak_bandwidth_in_gbps(),
                })
                .collect(),
            maximum_network_interfaces: int(n.maximum_network_interfaces()),
            ipv4_addresses_per_interface: int(n.ipv4_addresses_per_interface()),
            encryption_in_transit_supported: n.encryption_in_transit_supported(),
            efa_info: n.efa_info().map(|e| cat::EfaInfo {
                maximum_efa_interfaces: int(e.maximum_efa_interfaces()),
            }),
            network_performance: n.network_performance().map(str::to_string),
            ena_support: n.ena_support().map(|e| e.as_str().to_string()),
        }),
        gpu_info: i.gpu_info().map(|g| cat::GpuInfo {
            gpus: g
                .gpus()
                .iter()
                .map(|d| cat::GpuDeviceInfo {
                    name: d.name().map(str::to_string),
                    manufacturer: d.manufacturer().map(str::to_string),
                    count: int(d.count()),
                    memory_info: d.memory_info().map(|m| cat::MemoryInfo {
                        size_in_mib: int(m.size_in_mib()),
                    }),
                })
                .collect(),
        }),
        neuron_info: i.neuron_info().map(|n| cat::NeuronInfo {
            neuron_devices: n
                .neuron_devices()
                .iter()
                .map(|d| cat::NeuronDeviceInfo {
                    name: d.name().map(str::to_string),
                    count: int(d.count()),
                    core_info: d.core_info().map(|c| cat::NeuronDeviceCoreInfo {
                        count: int(c.count()),
                    }),
                })
                .collect(),
        }),
        inference_accelerator_info: i.inference_accelerator_info().map(|a| {
            cat::InferenceAcceleratorInfo {
                accelerators: a
                    .accelerators()
                    .iter()
                    .map(|d| cat::InferenceDeviceInfo {
                        name: d.name().map(str::to_string),
                        manufacturer: d.manufacturer().map(str::to_string),
                        count: int(d.count()),
                    })
                    .collect(),
            }
        }),
        instance_storage_info: i.instance_storage_info().map(|s| cat::InstanceStorageInfo {
            total_size_in_gb: s.total_size_in_gb(),
            nvme_support: s.nvme_support().map(|n| n.as_str().to_string()),
        }),
        ebs_info: i.ebs_info().map(|e| cat::EbsInfo {
            ebs_optimized_support: e.ebs_optimized_support().map(|s| s.as_str().to_string()),
            ebs_optimized_info: e.ebs_optimized_info().map(|o| cat::EbsOptimizedInfo {
                maximum_bandwidth_in_mbps: int(o.maximum_bandwidth_in_mbps()),
            }),
        }),
        supported_usage_classes: i
            .supported_usage_classes()
            .iter()
            .map(|u| u.as_str().to_string())
            .collect(),
        supported_virtualization_types: i
            .supported_virtualization_types()
            .iter()
            .map(|v| v.as_str().to_string())
            .collect(),
        hypervisor: i.hypervisor().map(|h| h.as_str().to_string()),
        bare_metal: i.bare_metal(),
        nitro_enclaves_support: i.nitro_enclaves_support().map(|n| n.as_str().to_string()),
        placement_group_info: i.placement_group_info().map(|p| cat::PlacementGroupInfo {
            supported_strategies: p
                .supported_strategies()
                .iter()
                .map(|s| s.as_str().to_string())
                .collect(),
        }),
    }
}

/// EC2 tags as a map (tags without a key are skipped).
pub fn tags(tags: &[ec2::Tag]) -> BTreeMap<String, String> {
    tags.iter()
        .filter_map(|t| {
            Some((
                t.key()?.to_string(),
                t.value().unwrap_or_default().to_string(),
            ))
        })
        .collect()
}

/// A map of tags as EC2 tags.
pub fn to_tags(tags: &BTreeMap<String, String>) -> Vec<ec2::Tag> {
    tags.iter()
        .map(|(k, v)| ec2::Tag::builder().key(k).value(v).build())
        .collect()
}

/// A filter as an EC2 filter.
pub fn filter(f: &Filter) -> ec2::Filter {
    ec2::Filter::builder()
        .name(&f.name)
        .set_values(Some(f.values.clone()))
        .build()
}

/// An EC2 subnet as a [`SubnetInfo`].
pub fn subnet(s: &ec2::Subnet) -> SubnetInfo {
    SubnetInfo {
        id: s.subnet_id().unwrap_or_default().to_string(),
        zone: s.availability_zone().unwrap_or_default().to_string(),
        zone_id: s.availability_zone_id().map(str::to_string),
        available_ip_address_count: s.available_ip_address_count().map_or(0, i64::from),
        tags: tags(s.tags()),
    }
}

/// An EC2 security group as a [`SecurityGroupInfo`].
pub fn security_group(g: &ec2::SecurityGroup) -> SecurityGroupInfo {
    SecurityGroupInfo {
        id: g.group_id().unwrap_or_default().to_string(),
        name: g.group_name().map(str::to_string),
        tags: tags(g.tags()),
    }
}

/// An EC2 image as an [`Image`].
pub fn image(i: &ec2::Image) -> Image {
    Image {
        id: i.image_id().unwrap_or_default().to_string(),
        name: i.name().map(str::to_string),
        architecture: i
            .architecture()
            .map(|a| a.as_str().to_string())
            .unwrap_or_default(),
        creation_date: i.creation_date().unwrap_or_default().to_string(),
        deprecation_time: i.deprecation_time().map(str::to_string),
        owner_id: i.owner_id().map(str::to_string),
        tags: tags(i.tags()),
    }
}

//! The subset of EC2's `DescribeInstanceTypes` `InstanceTypeInfo` structure the catalog reads,
//! with the API's PascalCase field names (the shape moto ships in `instance_types.json`).
//!
//! Every field is optional (or an empty list when absent) and unknown fields are ignored, so one
//! odd entry never fails the whole file; conversion decides what a missing datum means.

use serde::Deserialize;

/// One instance type as `DescribeInstanceTypes` describes it (only the fields the catalog uses).
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct InstanceTypeInfo {
    /// The type name, e.g. `m5.large`.
    pub instance_type: Option<String>,
    /// vCPU information.
    #[serde(rename = "VCpuInfo")]
    pub vcpu_info: Option<VCpuInfo>,
    /// Memory information.
    pub memory_info: Option<MemoryInfo>,
    /// Processor information.
    pub processor_info: Option<ProcessorInfo>,
    /// Networking information (ENIs, IPs, bandwidth, EFA).
    pub network_info: Option<NetworkInfo>,
    /// GPUs, when the type has any.
    pub gpu_info: Option<GpuInfo>,
    /// AWS Neuron devices (Inferentia, Trainium), when the type has any.
    pub neuron_info: Option<NeuronInfo>,
    /// Inference accelerators, when the type has any.
    pub inference_accelerator_info: Option<InferenceAcceleratorInfo>,
    /// Local instance store, when the type has any.
    pub instance_storage_info: Option<InstanceStorageInfo>,
    /// EBS information.
    pub ebs_info: Option<EbsInfo>,
    /// `on-demand`, `spot`, `capacity-block`.
    #[serde(default)]
    pub supported_usage_classes: Vec<String>,
    /// `hvm`, `paravirtual`.
    #[serde(default)]
    pub supported_virtualization_types: Vec<String>,
    /// `nitro` or `xen`; absent on bare metal.
    pub hypervisor: Option<String>,
    /// Whether the type is bare metal.
    pub bare_metal: Option<bool>,
    /// `supported` or `unsupported`.
    pub nitro_enclaves_support: Option<String>,
    /// The placement-group strategies the type supports.
    pub placement_group_info: Option<PlacementGroupInfo>,
}

/// `PlacementGroupInfo`.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct PlacementGroupInfo {
    /// `cluster`, `partition`, `spread`.
    #[serde(default)]
    pub supported_strategies: Vec<String>,
}

/// `VCpuInfo`.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct VCpuInfo {
    /// The default number of vCPUs.
    #[serde(rename = "DefaultVCpus")]
    pub default_vcpus: Option<i64>,
}

/// `MemoryInfo` (also the per-device memory of GPUs and accelerators).
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
pub struct MemoryInfo {
    /// Memory size in MiB.
    #[serde(rename = "SizeInMiB")]
    pub size_in_mib: Option<i64>,
}

/// `ProcessorInfo`.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct ProcessorInfo {
    /// `x86_64`, `arm64`, `i386`, `x86_64_mac`, `arm64_mac`, in the API's order.
    #[serde(default)]
    pub supported_architectures: Vec<String>,
    /// `Intel`, `AMD`, `AWS`, `Apple`.
    pub manufacturer: Option<String>,
    /// Sustained all-core clock speed in GHz.
    pub sustained_clock_speed_in_ghz: Option<f64>,
    /// Additional processor features (`amd-sev-snp`, `nested-virtualization`).
    #[serde(default)]
    pub supported_features: Vec<String>,
}

/// `NetworkInfo`.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct NetworkInfo {
    /// Index of the default network card (the one the VPC CNI uses).
    pub default_network_card_index: Option<i64>,
    /// Per network card limits.
    #[serde(default)]
    pub network_cards: Vec<NetworkCardInfo>,
    /// Maximum network interfaces over all cards.
    pub maximum_network_interfaces: Option<i64>,
    /// IPv4 addresses per interface.
    #[serde(rename = "Ipv4AddressesPerInterface")]
    pub ipv4_addresses_per_interface: Option<i64>,
    /// Whether in-transit encryption is supported.
    pub encryption_in_transit_supported: Option<bool>,
    /// EFA limits, when EFA is supported.
    pub efa_info: Option<EfaInfo>,
    /// Human readable network performance, e.g. `Up to 10 Gigabit`.
    pub network_performance: Option<String>,
    /// `unsupported`, `supported`, `required`.
    pub ena_support: Option<String>,
}

/// `NetworkCardInfo`.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct NetworkCardInfo {
    /// The card's index.
    pub network_card_index: Option<i64>,
    /// Maximum network interfaces on this card.
    pub maximum_network_interfaces: Option<i64>,
    /// Baseline bandwidth of this card in Gbps.
    pub baseline_bandwidth_in_gbps: Option<f64>,
    /// Peak (burst) bandwidth of this card in Gbps.
    pub peak_bandwidth_in_gbps: Option<f64>,
}

/// `EfaInfo`.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct EfaInfo {
    /// Maximum EFA interfaces.
    pub maximum_efa_interfaces: Option<i64>,
}

/// `GpuInfo`.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct GpuInfo {
    /// One entry per GPU model.
    #[serde(default)]
    pub gpus: Vec<GpuDeviceInfo>,
}

/// `GpuDeviceInfo`.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct GpuDeviceInfo {
    /// Model name, e.g. `T4`.
    pub name: Option<String>,
    /// `NVIDIA`, `AMD`, `Habana`, ...
    pub manufacturer: Option<String>,
    /// Number of GPUs of this model.
    pub count: Option<i64>,
    /// Memory per GPU.
    pub memory_info: Option<MemoryInfo>,
}

/// `NeuronInfo`.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct NeuronInfo {
    /// One entry per device model.
    #[serde(default)]
    pub neuron_devices: Vec<NeuronDeviceInfo>,
}

/// `NeuronDeviceInfo`.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct NeuronDeviceInfo {
    /// Device name, e.g. `Inferentia2`.
    pub name: Option<String>,
    /// Number of devices.
    pub count: Option<i64>,
    /// Cores per device.
    pub core_info: Option<NeuronDeviceCoreInfo>,
}

/// `NeuronDeviceCoreInfo`.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct NeuronDeviceCoreInfo {
    /// Number of cores per device.
    pub count: Option<i64>,
}

/// `InferenceAcceleratorInfo`.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct InferenceAcceleratorInfo {
    /// One entry per accelerator model.
    #[serde(default)]
    pub accelerators: Vec<InferenceDeviceInfo>,
}

/// `InferenceDeviceInfo`.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct InferenceDeviceInfo {
    /// Accelerator name.
    pub name: Option<String>,
    /// Manufacturer.
    pub manufacturer: Option<String>,
    /// Number of accelerators.
    pub count: Option<i64>,
}

/// `InstanceStorageInfo`.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct InstanceStorageInfo {
    /// Total instance store size in GB (decimal).
    #[serde(rename = "TotalSizeInGB")]
    pub total_size_in_gb: Option<i64>,
    /// `unsupported`, `supported`, `required`.
    pub nvme_support: Option<String>,
}

/// `EbsInfo`.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct EbsInfo {
    /// `unsupported`, `supported`, `default`.
    pub ebs_optimized_support: Option<String>,
    /// EBS-optimized limits.
    pub ebs_optimized_info: Option<EbsOptimizedInfo>,
}

/// `EbsOptimizedInfo`.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct EbsOptimizedInfo {
    /// Maximum EBS bandwidth in Mbps.
    pub maximum_bandwidth_in_mbps: Option<i64>,
}

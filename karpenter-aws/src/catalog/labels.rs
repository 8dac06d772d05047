//! The `karpenter.k8s.aws/*` label keys the instance-type catalog sets (upstream
//! `pkg/apis/v1/labels.go`). The generic Kubernetes keys live in `karpenter_core::labels`.

/// The AWS provider's label and API group.
pub const GROUP: &str = "karpenter.k8s.aws";

/// `karpenter.k8s.aws/instance-category`, e.g. `m` for `m5.large`.
pub const INSTANCE_CATEGORY: &str = "karpenter.k8s.aws/instance-category";
/// `karpenter.k8s.aws/instance-family`, e.g. `m5`.
pub const INSTANCE_FAMILY: &str = "karpenter.k8s.aws/instance-family";
/// `karpenter.k8s.aws/instance-generation`, e.g. `5`.
pub const INSTANCE_GENERATION: &str = "karpenter.k8s.aws/instance-generation";
/// `karpenter.k8s.aws/instance-size`, e.g. `large`.
pub const INSTANCE_SIZE: &str = "karpenter.k8s.aws/instance-size";
/// `karpenter.k8s.aws/instance-capability-flex`: `true` for `-flex` families.
pub const INSTANCE_CAPABILITY_FLEX: &str = "karpenter.k8s.aws/instance-capability-flex";
/// `karpenter.k8s.aws/instance-cpu`: the vCPU count.
pub const INSTANCE_CPU: &str = "karpenter.k8s.aws/instance-cpu";
/// `karpenter.k8s.aws/instance-cpu-manufacturer`: `intel`, `amd`, `aws`.
pub const INSTANCE_CPU_MANUFACTURER: &str = "karpenter.k8s.aws/instance-cpu-manufacturer";
/// `karpenter.k8s.aws/instance-cpu-sustained-clock-speed-mhz`.
pub const INSTANCE_CPU_SUSTAINED_CLOCK_SPEED_MHZ: &str =
    "karpenter.k8s.aws/instance-cpu-sustained-clock-speed-mhz";
/// `karpenter.k8s.aws/instance-memory`: memory in MiB, before any overhead.
pub const INSTANCE_MEMORY: &str = "karpenter.k8s.aws/instance-memory";
/// `karpenter.k8s.aws/instance-hypervisor`: `nitro`, `xen`, or empty on bare metal.
pub const INSTANCE_HYPERVISOR: &str = "karpenter.k8s.aws/instance-hypervisor";
/// `karpenter.k8s.aws/instance-encryption-in-transit-supported`: `true` / `false`.
pub const INSTANCE_ENCRYPTION_IN_TRANSIT_SUPPORTED: &str =
    "karpenter.k8s.aws/instance-encryption-in-transit-supported";
/// `karpenter.k8s.aws/nitro-sandbox`: `true` when the type supports Nitro Enclaves.
pub const NITRO_SANDBOX: &str = "karpenter.k8s.aws/nitro-sandbox";
/// `karpenter.k8s.aws/instance-local-nvme`: local NVMe instance store in GB.
pub const INSTANCE_LOCAL_NVME: &str = "karpenter.k8s.aws/instance-local-nvme";
/// `karpenter.k8s.aws/instance-network-bandwidth`: baseline bandwidth in Mbps.
pub const INSTANCE_NETWORK_BANDWIDTH: &str = "karpenter.k8s.aws/instance-network-bandwidth";
/// `karpenter.k8s.aws/instance-ebs-bandwidth`: maximum EBS bandwidth in Mbps.
pub const INSTANCE_EBS_BANDWIDTH: &str = "karpenter.k8s.aws/instance-ebs-bandwidth";
/// `karpenter.k8s.aws/instance-gpu-name`, e.g. `t4`.
pub const INSTANCE_GPU_NAME: &str = "karpenter.k8s.aws/instance-gpu-name";
/// `karpenter.k8s.aws/instance-gpu-manufacturer`, e.g. `nvidia`.
pub const INSTANCE_GPU_MANUFACTURER: &str = "karpenter.k8s.aws/instance-gpu-manufacturer";
/// `karpenter.k8s.aws/instance-gpu-count`.
pub const INSTANCE_GPU_COUNT: &str = "karpenter.k8s.aws/instance-gpu-count";
/// `karpenter.k8s.aws/instance-gpu-memory`: memory per GPU in MiB.
pub const INSTANCE_GPU_MEMORY: &str = "karpenter.k8s.aws/instance-gpu-memory";
/// `karpenter.k8s.aws/instance-accelerator-name`, e.g. `inferentia2`.
pub const INSTANCE_ACCELERATOR_NAME: &str = "karpenter.k8s.aws/instance-accelerator-name";
/// `karpenter.k8s.aws/instance-accelerator-manufacturer`, e.g. `aws`.
pub const INSTANCE_ACCELERATOR_MANUFACTURER: &str =
    "karpenter.k8s.aws/instance-accelerator-manufacturer";
/// `karpenter.k8s.aws/instance-accelerator-count`.
pub const INSTANCE_ACCELERATOR_COUNT: &str = "karpenter.k8s.aws/instance-accelerator-count";
/// `karpenter.k8s.aws/instance-tenancy`: `default` / `dedicated` (multi-valued, so never a
/// catalog label).
pub const INSTANCE_TENANCY: &str = "karpenter.k8s.aws/instance-tenancy";
/// `topology.k8s.aws/zone-id`: the zone ID (needs subnet data, so never a catalog label).
pub const TOPOLOGY_ZONE_ID: &str = "topology.k8s.aws/zone-id";

/// Every label key above that the catalog can set on an instance type; useful to extend a
/// `karpenter_core::labels::LabelPolicy` with the provider's well-known keys.
pub const WELL_KNOWN: [&str; 22] = [
    INSTANCE_CATEGORY,
    INSTANCE_FAMILY,
    INSTANCE_GENERATION,
    INSTANCE_SIZE,
    INSTANCE_CAPABILITY_FLEX,
    INSTANCE_CPU,
    INSTANCE_CPU_MANUFACTURER,
    INSTANCE_CPU_SUSTAINED_CLOCK_SPEED_MHZ,
    INSTANCE_MEMORY,
    INSTANCE_HYPERVISOR,
    INSTANCE_ENCRYPTION_IN_TRANSIT_SUPPORTED,
    NITRO_SANDBOX,
    INSTANCE_LOCAL_NVME,
    INSTANCE_NETWORK_BANDWIDTH,
    INSTANCE_EBS_BANDWIDTH,
    INSTANCE_GPU_NAME,
    INSTANCE_GPU_MANUFACTURER,
    INSTANCE_GPU_COUNT,
    INSTANCE_GPU_MEMORY,
    INSTANCE_ACCELERATOR_NAME,
    INSTANCE_ACCELERATOR_MANUFACTURER,
    INSTANCE_ACCELERATOR_COUNT,
];

//! Resource names the catalog puts in `capacity` and `overhead`.

/// `cpu`.
pub const CPU: &str = "cpu";
/// `memory`.
pub const MEMORY: &str = "memory";
/// `ephemeral-storage`.
pub const EPHEMERAL_STORAGE: &str = "ephemeral-storage";
/// `pods`.
pub const PODS: &str = "pods";
/// `nvidia.com/gpu`: NVIDIA GPUs.
pub const NVIDIA_GPU: &str = "nvidia.com/gpu";
/// `amd.com/gpu`: AMD GPUs.
pub const AMD_GPU: &str = "amd.com/gpu";
/// `habana.ai/gaudi`: Habana Gaudi accelerators.
pub const HABANA_GAUDI: &str = "habana.ai/gaudi";
/// `aws.amazon.com/neuron`: AWS Neuron devices (Inferentia, Trainium).
pub const AWS_NEURON: &str = "aws.amazon.com/neuron";
/// `aws.amazon.com/neuroncore`: AWS Neuron cores.
pub const AWS_NEURON_CORE: &str = "aws.amazon.com/neuroncore";
/// `vpc.amazonaws.com/efa`: Elastic Fabric Adapter interfaces.
pub const EFA: &str = "vpc.amazonaws.com/efa";
/// `vpc.amazonaws.com/pod-eni`: branch ENIs for security groups per pod (needs upstream's static
/// VPC limits table, which the EC2 API does not provide; the catalog never sets it).
pub const AWS_POD_ENI: &str = "vpc.amazonaws.com/pod-eni";
/// `vpc.amazonaws.com/PrivateIPv4Address`: secondary IPv4 addresses (Windows nodes only).
pub const PRIVATE_IPV4_ADDRESS: &str = "vpc.amazonaws.com/PrivateIPv4Address";

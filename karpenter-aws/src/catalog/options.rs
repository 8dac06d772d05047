//! Options that shape the catalog, with upstream's defaults.

use std::collections::BTreeMap;

use karpenter_core::resources::{Quantity, ResourceList};

use super::CatalogError;

/// The default on-demand price multiplier used to estimate spot prices offline.
///
/// `0.35` means spot is estimated at 35% of the on-demand price (a 65% discount), roughly the
/// long-run average spot discount for current-generation types in us-east-1. It is an
/// **estimate**: no spot price snapshot ships with the crate because spot prices move hourly.
pub const DEFAULT_SPOT_PRICE_FACTOR: f64 = 0.35;

/// The spot price multiplier that reproduces upstream Karpenter before its first successful spot
/// price refresh: every spot offering is priced at the type's on-demand price.
pub const UPSTREAM_FALLBACK_SPOT_PRICE_FACTOR: f64 = 1.0;

/// Upstream's default `VM_MEMORY_OVERHEAD_PERCENT`.
pub const DEFAULT_VM_MEMORY_OVERHEAD_PERCENT: f64 = 0.075;

/// The EC2NodeClass AMI family, as far as it shapes capacity, overhead and labels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum AmiFamily {
    /// Amazon Linux 2.
    Al2,
    /// Amazon Linux 2023 (upstream's default family).
    #[default]
    Al2023,
    /// Bottlerocket.
    Bottlerocket,
    /// Windows Server 2019.
    Windows2019,
    /// Windows Server 2022.
    Windows2022,
    /// Windows Server 2025.
    Windows2025,
    /// A custom AMI.
    Custom,
}

impl AmiFamily {
    /// Parses the EC2NodeClass `amiFamily` spelling (`AL2`, `AL2023`, `Bottlerocket`,
    /// `Windows2019`, `Windows2022`, `Windows2025`, `Custom`).
    pub fn from_name(name: &str) -> Option<Self> {
        Some(match name {
            "AL2" => Self::Al2,
            "AL2023" => Self::Al2023,
            "Bottlerocket" => Self::Bottlerocket,
            "Windows2019" => Self::Windows2019,
            "Windows2022" => Self::Windows2022,
            "Windows2025" => Self::Windows2025,
            "Custom" => Self::Custom,
            _ => return None,
        })
    }

    /// The EC2NodeClass `amiFamily` spelling.
    pub fn name(self) -> &'static str {
        match self {
            Self::Al2 => "AL2",
            Self::Al2023 => "AL2023",
            Self::Bottlerocket => "Bottlerocket",
            Self::Windows2019 => "Windows2019",
            Self::Windows2022 => "Windows2022",
            Self::Windows2025 => "Windows2025",
            Self::Custom => "Custom",
        }
    }

    /// Whether the family is a Windows family.
    pub fn is_windows(self) -> bool {
        matches!(
            self,
            Self::Windows2019 | Self::Windows2022 | Self::Windows2025
        )
    }

    /// The `node.kubernetes.io/windows-build` value of a Windows family.
    pub fn windows_build(self) -> Option<&'static str> {
        match self {
            Self::Windows2019 => Some("10.0.17763"),
            Self::Windows2022 => Some("10.0.20348"),
            Self::Windows2025 => Some("10.0.26100"),
            _ => None,
        }
    }

    /// Whether `pods` follows the ENI formula (else 110) when `maxPods` is not set.
    pub fn eni_limited_pod_density(self) -> bool {
        !self.is_windows()
    }

    /// Whether kubelet's `podsPerCore` is honoured.
    pub fn pods_per_core_enabled(self) -> bool {
        self != Self::Bottlerocket
    }

    /// Whether the kube-reserved memory uses the ENI-limited pod count with no reserved ENIs
    /// (rather than the resolved `pods` capacity).
    pub fn eni_limited_memory_overhead(self) -> bool {
        matches!(self, Self::Al2 | Self::Al2023 | Self::Custom)
    }

    /// The size of the family's default ephemeral block device in bytes (20Gi; Windows 50Gi).
    pub fn default_ephemeral_storage_bytes(self) -> i64 {
        if self.is_windows() {
            50 << 30
        } else {
            20 << 30
        }
    }
}

/// Options of the catalog conversion. [`Default`] gives upstream's defaults for us-east-1 and
/// [`DEFAULT_SPOT_PRICE_FACTOR`].
#[derive(Debug, Clone, PartialEq)]
pub struct AwsCatalogOptions {
    /// The region; must be the region of the data (`us-east-1` for the embedded catalog).
    pub region: String,
    /// The EC2NodeClass AMI family (default AL2023).
    pub ami_family: AmiFamily,
    /// `VM_MEMORY_OVERHEAD_PERCENT` as a fraction (default 0.075), in `[0, 1)`.
    pub vm_memory_overhead_percent: f64,
    /// Spot prices are estimated as `on-demand price × spot_price_factor` (see
    /// [`DEFAULT_SPOT_PRICE_FACTOR`]; [`UPSTREAM_FALLBACK_SPOT_PRICE_FACTOR`] reproduces upstream's
    /// behaviour before it has fetched spot prices). Must be finite and positive.
    pub spot_price_factor: f64,
    /// kubelet `maxPods`; `None` lets the AMI family decide (ENI formula, or 110 on Windows).
    pub max_pods: Option<i64>,
    /// kubelet `podsPerCore`; `None` or 0 disables it.
    pub pods_per_core: Option<i64>,
    /// `RESERVED_ENIS` (default 0): ENIs kept out of the pod formula.
    pub reserved_enis: i64,
    /// The node's ephemeral (root) volume size in bytes, as resolved from the EC2NodeClass
    /// `blockDeviceMappings`; `None` uses the AMI family default (20Gi; Windows 50Gi).
    pub ephemeral_storage_bytes: Option<i64>,
    /// `instanceStorePolicy: RAID0`: types with instance store use its total size (decimal GB)
    /// as ephemeral storage.
    pub instance_store_raid0: bool,
    /// kubelet `kubeReserved` entries; each overrides the computed value of its resource.
    pub kube_reserved: ResourceList,
    /// kubelet `systemReserved` (default empty).
    pub system_reserved: ResourceList,
    /// kubelet `evictionHard`: `memory.available` and `nodefs.available` override the memory and
    /// ephemeral-storage thresholds (a quantity, or a percentage of capacity;
    /// `100%` counts as 0). Other signals are ignored, as upstream does.
    pub eviction_hard: BTreeMap<String, String>,
    /// The EC2NodeClass `networkInterfaces` (empty: Karpenter's default interface). When set,
    /// a type must have the cards and device indices they name and support ENA (and EFA for
    /// `efa-only` interfaces); `vpc.amazonaws.com/efa` is the number of `efa-only` interfaces
    /// and those on card 0 leave the pod formula.
    pub network_interfaces: Vec<InterfaceSlot>,
    /// `cpuOptions.nestedVirtualization: enabled`: only types listing `nested-virtualization`
    /// in `ProcessorInfo.SupportedFeatures` are compatible.
    pub nested_virtualization: bool,
    /// `connectionTracking` is set: only Nitro types are compatible.
    pub connection_tracking: bool,
    /// The strategy of the class's resolved placement group (`cluster`, `partition`,
    /// `spread`): only types supporting it are compatible.
    pub placement_group_strategy: Option<String>,
}

/// One EC2NodeClass `networkInterfaces[]` entry as the catalog reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct InterfaceSlot {
    /// `networkCardIndex`.
    pub network_card_index: i64,
    /// `deviceIndex`.
    pub device_index: i64,
    /// `interfaceType: efa-only`.
    pub efa_only: bool,
}

impl Default for AwsCatalogOptions {
    fn default() -> Self {
        Self {
            region: "us-east-1".to_owned(),
            ami_family: AmiFamily::default(),
            vm_memory_overhead_percent: DEFAULT_VM_MEMORY_OVERHEAD_PERCENT,
            spot_price_factor: DEFAULT_SPOT_PRICE_FACTOR,
            max_pods: None,
            pods_per_core: None,
            reserved_enis: 0,
            ephemeral_storage_bytes: None,
            instance_store_raid0: false,
            kube_reserved: ResourceList::new(),
            system_reserved: ResourceList::new(),
            eviction_hard: BTreeMap::new(),
            network_interfaces: Vec::new(),
            nested_virtualization: false,
            connection_tracking: false,
            placement_group_strategy: None,
        }
    }
}

/// The kubelet eviction signal for memory.
pub(crate) const MEMORY_AVAILABLE: &str = "memory.available";
/// The kubelet eviction signal for the node filesystem.
pub(crate) const NODEFS_AVAILABLE: &str = "nodefs.available";

/// An `evictionHard` value: an absolute quantity or a percentage of capacity.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum EvictionSignal {
    /// An absolute quantity.
    Quantity(Quantity),
    /// A percentage in `[0, 100)` (100% already mapped to 0).
    Percent(f64),
}

impl AwsCatalogOptions {
    /// Checks every option, returning the first invalid one.
    pub fn validate(&self) -> Result<(), CatalogError> {
        let invalid = |option: &'static str, message: String| {
            Err(CatalogError::InvalidOption { option, message })
        };
        let p = self.vm_memory_overhead_percent;
        if !p.is_finite() || !(0.0..1.0).contains(&p) {
            return invalid(
                "vm_memory_overhead_percent",
                format!("{p} is not a fraction in [0, 1)"),
            );
        }
        let f = self.spot_price_factor;
        if !f.is_finite() || f <= 0.0 {
            return invalid(
                "spot_price_factor",
                format!("{f} is not a finite positive number"),
            );
        }
        if let Some(n) = self.max_pods.filter(|n| *n < 0) {
            return invalid("max_pods", format!("{n} is negative"));
        }
        if let Some(n) = self.pods_per_core.filter(|n| *n < 0) {
            return invalid("pods_per_core", format!("{n} is negative"));
        }
        if self.reserved_enis < 0 {
            return invalid(
                "reserved_enis",
                format!("{} is negative", self.reserved_enis),
            );
        }
        if let Some(n) = self.ephemeral_storage_bytes.filter(|n| *n <= 0) {
            return invalid("ephemeral_storage_bytes", format!("{n} is not positive"));
        }
        for signal in [MEMORY_AVAILABLE, NODEFS_AVAILABLE] {
            self.eviction_signal(signal)?;
        }
        Ok(())
    }

    /// The parsed `evictionHard` value of `signal`, if set.
    pub(crate) fn eviction_signal(
        &self,
        signal: &'static str,
    ) -> Result<Option<EvictionSignal>, CatalogError> {
        let Some(value) = self.eviction_hard.get(signal) else {
            return Ok(None);
        };
        let Some(number) = value.strip_suffix('%') else {
            if value.trim().is_empty() {
                return Err(CatalogError::InvalidOption {
                    option: "eviction_hard",
                    message: format!("{signal}: empty value"),
                });
            }
            return Quantity::parse(value.trim())
                .map(|q| Some(EvictionSignal::Quantity(q)))
                .map_err(|e| CatalogError::InvalidOption {
                    option: "eviction_hard",
                    message: format!("{signal}: {e}"),
                });
        };
        match number.trim().parse::<f64>() {
            Ok(p) if p.is_finite() && (0.0..=100.0).contains(&p) => {
                Ok(Some(EvictionSignal::Percent(if p == 100.0 {
                    0.0
                } else {
                    p
                })))
            }
            _ => Err(CatalogError::InvalidOption {
                option: "eviction_hard",
                message: format!("{signal}: {value:?} is not a percentage in [0%, 100%]"),
            }),
        }
    }
}

//! The offline AWS instance-type catalog: real EC2 data for us-east-1 embedded in the crate and
//! converted with upstream Karpenter's capacity, overhead, label and offering rules
//! (aws/karpenter-provider-aws `pkg/providers/instancetype`, `pkg/providers/pricing`), into the
//! catalog-file shape of the `karpenter plan` contract
//! ([`karpenter_core::catalog`], which owns the format; its types are re-exported here).
//!
//! ```
//! use karpenter_aws::catalog::{offline_catalog, AwsCatalogOptions};
//!
//! let catalog = offline_catalog(&AwsCatalogOptions::default()).unwrap();
//! let m5 = catalog.iter().find(|it| it.name == "m5.xlarge").unwrap();
//! assert_eq!(m5.capacity.get_or_zero("memory").to_string(), "15155Mi");
//! assert_eq!(m5.capacity.get_or_zero("pods").to_string(), "58");
//! assert_eq!(m5.overhead.kube_reserved.get_or_zero("cpu").to_string(), "80m");
//! ```
//!
//! # Data
//!
//! Three files under `data/`, embedded with `include_bytes!` so a clone builds alone:
//! `DescribeInstanceTypes` output as moto 5.2.5 ships it, `DescribeInstanceTypeOfferings` per
//! availability zone of us-east-1 (zones a–f) from the same package, and an on-demand Linux price
//! snapshot for us-east-1 (2026-07-20).
//!
//! # What is computed (per type, AMI family AL2023 unless configured)
//!
//! - **capacity**: `cpu` = default vCPUs; `memory` = MiB − 64 on Graviton − ceil(MiB ×
//!   [`AwsCatalogOptions::vm_memory_overhead_percent`]); `ephemeral-storage` = the family's
//!   default volume (20Gi) unless configured; `pods` = the VPC CNI ENI formula (or `maxPods`,
//!   `podsPerCore`); `nvidia.com/gpu`, `amd.com/gpu`, `habana.ai/gaudi`, `aws.amazon.com/neuron`,
//!   `aws.amazon.com/neuroncore`, `vpc.amazonaws.com/efa` when non-zero.
//! - **overhead**: kube-reserved CPU by core bands, memory 11 × pods + 255 MiB, ephemeral-storage
//!   1Gi; system-reserved empty; eviction memory 100Mi and 10% of ephemeral-storage.
//! - **labels**: every single-valued label of upstream's `computeRequirements` (see [`labels`]).
//! - **offerings**: one per zone where EC2 offers the type and per capacity type the type
//!   supports (`on-demand`, `spot`; capacity blocks are ignored), all available.
//!
//! # Prices and what is dropped
//!
//! On-demand offerings use the price snapshot. **Spot prices are an estimate**: on-demand ×
//! [`AwsCatalogOptions::spot_price_factor`] (default [`DEFAULT_SPOT_PRICE_FACTOR`] = 0.35, i.e.
//! a 65% discount), rounded to a millionth of a dollar. Upstream, before its first spot price
//! refresh, prices every spot offering at the on-demand price; set the factor to
//! [`UPSTREAM_FALLBACK_SPOT_PRICE_FACTOR`] to reproduce that.
//!
//! Upstream marks an offering without a price unavailable, and an offering in a zone where the
//! type is not offered unavailable too. A type with no available offering can never launch, so
//! the catalog leaves such types out instead of listing unavailable offerings; the
//! [`CatalogReport`] says which types were dropped and why ([`DropReason`]). Types upstream
//! never lists (not HVM, neither x86_64 nor arm64) or cannot use with the AMI family (AL2023 on
//! `a1.*`, Windows on arm64) are dropped as well.
//!
//! With the default options the embedded data gives 1334 instance types and 12534 offerings
//! (6288 on-demand, 6246 spot); of the 1395 described types, 9 Mac types fail the architecture
//! filter, 20 are offered in no us-east-1 zone, 26 have no on-demand price (`r9g*`, `r9gd*`,
//! `t8i*`) and 6 are `a1.*` types AL2023 cannot boot.
//!
//! # Not reproduced
//!
//! `vpc.amazonaws.com/pod-eni` (needs upstream's static VPC limits table; never set),
//! `topology.k8s.aws/zone-id` (needs the nodeclass's subnets), `karpenter.k8s.aws/instance-tenancy`
//! (multi-valued: not a single-valued label), reserved-capacity and placement-group labels and
//! offerings. `instance-network-bandwidth` is derived from the API's per-card baseline bandwidth
//! instead of upstream's static table scraped from the AWS docs (the two agree for ~96% of
//! types).

mod convert;
pub mod ec2;
pub mod labels;
mod options;
mod quantity;
pub mod resources;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;

use serde::Deserialize;

pub use self::ec2::InstanceTypeInfo;
pub use self::options::{
    AmiFamily, AwsCatalogOptions, DEFAULT_SPOT_PRICE_FACTOR, DEFAULT_VM_MEMORY_OVERHEAD_PERCENT,
    InterfaceSlot, UPSTREAM_FALLBACK_SPOT_PRICE_FACTOR,
};
pub use karpenter_core::catalog::{
    CatalogFile, CatalogInstanceType, CatalogOffering, CatalogOverhead,
};

/// The region of the embedded data.
pub const EMBEDDED_REGION: &str = "us-east-1";

/// `DescribeInstanceTypes` output (moto 5.2.5), gzip-compressed.
const EMBEDDED_INSTANCE_TYPES: &[u8] = include_bytes!("../../data/aws-instance-types.json.gz");
/// `DescribeInstanceTypeOfferings` by availability zone for us-east-1, gzip-compressed.
const EMBEDDED_OFFERINGS: &[u8] = include_bytes!("../../data/aws-offerings-us-east-1.json.gz");
/// On-demand Linux prices for us-east-1, gzip-compressed.
pub(crate) const EMBEDDED_PRICES: &[u8] =
    include_bytes!("../../data/aws-ondemand-prices-us-east-1.json.gz");

/// Why the catalog could not be built.
#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    /// A gzip stream could not be decompressed.
    #[error("decompressing {what}: {source}")]
    Decompress {
        /// Which input.
        what: &'static str,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A JSON input did not have the expected shape.
    #[error("parsing {what}: {source}")]
    Parse {
        /// Which input.
        what: &'static str,
        /// The underlying error.
        source: serde_json::Error,
    },
    /// The options ask for a region the data does not cover.
    #[error("no instance type data for region {requested:?}: the data covers {available:?}")]
    UnsupportedRegion {
        /// The region asked for.
        requested: String,
        /// The region of the data.
        available: String,
    },
    /// An option is out of range.
    #[error("invalid option {option}: {message}")]
    InvalidOption {
        /// The option's field name.
        option: &'static str,
        /// What is wrong.
        message: String,
    },
}

/// Why an instance type of the EC2 data is not in the catalog.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DropReason {
    /// Not HVM (upstream's DescribeInstanceTypes filter).
    #[error("virtualization types {0:?} do not include hvm")]
    UnsupportedVirtualization(Vec<String>),
    /// Neither x86_64 nor arm64 (upstream's DescribeInstanceTypes filter), e.g. Mac types.
    #[error("architectures {0:?} include neither x86_64 nor arm64")]
    UnsupportedArchitecture(Vec<String>),
    /// A Windows AMI family on an arm64 type: no operating system can run on it.
    #[error("no operating system: Windows runs on amd64 only")]
    NoOperatingSystem,
    /// The AMI family cannot boot this type (AL2023 on `a1.*`).
    #[error("incompatible with AMI family {0}")]
    IncompatibleWithAmiFamily(&'static str),
    /// Supports neither on-demand nor spot (e.g. capacity blocks only).
    #[error("usage classes {0:?} include neither on-demand nor spot")]
    NoCapacityType(Vec<String>),
    /// EC2 offers the type in no zone of the region.
    #[error("not offered in any zone of the region")]
    NotOffered,
    /// No on-demand price: upstream marks every offering unavailable (spot falls back to the
    /// on-demand price too).
    #[error("no on-demand price")]
    NoOnDemandPrice,
    /// A datum the conversion needs is absent (named by its API path).
    #[error("missing {0}")]
    MissingData(&'static str),
    /// Memory overhead leaves no memory.
    #[error("no memory left after the VM overhead")]
    NoUsableMemory,
    /// The type cannot run what the EC2NodeClass asks for (its network interfaces, nested
    /// virtualization, connection tracking or placement-group strategy; named).
    #[error("incompatible with the EC2NodeClass {0}")]
    IncompatibleWithNodeClass(&'static str),
}

impl DropReason {
    /// A short stable identifier of the reason, e.g. `no-on-demand-price`.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::UnsupportedVirtualization(_) => "unsupported-virtualization",
            Self::UnsupportedArchitecture(_) => "unsupported-architecture",
            Self::NoOperatingSystem => "no-operating-system",
            Self::IncompatibleWithAmiFamily(_) => "incompatible-with-ami-family",
            Self::NoCapacityType(_) => "no-capacity-type",
            Self::NotOffered => "not-offered",
            Self::NoOnDemandPrice => "no-on-demand-price",
            Self::MissingData(_) => "missing-data",
            Self::NoUsableMemory => "no-usable-memory",
            Self::IncompatibleWithNodeClass(_) => "incompatible-with-node-class",
        }
    }
}

/// An instance type left out of the catalog.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DroppedInstanceType {
    /// The instance type name.
    pub name: String,
    /// Why it was left out.
    pub reason: DropReason,
}

/// The catalog and what was left out.
#[derive(Debug, Clone, PartialEq)]
pub struct CatalogReport {
    /// The converted instance types, sorted by name.
    pub instance_types: Vec<CatalogInstanceType>,
    /// The instance types left out, sorted by name.
    pub dropped: Vec<DroppedInstanceType>,
}

impl CatalogReport {
    /// The number of dropped types per [`DropReason::kind`].
    pub fn dropped_by_kind(&self) -> BTreeMap<&'static str, usize> {
        let mut counts = BTreeMap::new();
        for d in &self.dropped {
            *counts.entry(d.reason.kind()).or_insert(0) += 1;
        }
        counts
    }

    /// The total number of offerings over all converted types.
    pub fn offering_count(&self) -> usize {
        self.instance_types
            .iter()
            .map(|it| it.offerings.len())
            .sum()
    }
}

/// The raw inputs of a catalog: instance type descriptions, offering zones and on-demand prices
/// for one region.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct CatalogSources {
    /// The region the offerings and prices describe.
    pub region: String,
    /// Instance type name → its `DescribeInstanceTypes` description.
    pub instance_types: BTreeMap<String, InstanceTypeInfo>,
    /// Instance type name → the availability zones where EC2 offers it.
    pub offerings: BTreeMap<String, BTreeSet<String>>,
    /// Instance type name → on-demand price in USD per hour (only finite positive prices).
    pub on_demand_prices: BTreeMap<String, f64>,
}

/// One row of `DescribeInstanceTypeOfferings`.
#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct OfferingRow {
    instance_type: String,
    location: String,
}

/// The price snapshot file.
#[derive(Deserialize)]
struct PriceFile {
    region: String,
    prices: BTreeMap<String, serde_json::Value>,
}

impl CatalogSources {
    /// The data embedded in the crate (us-east-1).
    pub fn embedded() -> Result<Self, CatalogError> {
        Self::from_json(
            &gunzip(EMBEDDED_INSTANCE_TYPES, "embedded instance types")?,
            &gunzip(EMBEDDED_OFFERINGS, "embedded offerings")?,
            &gunzip(EMBEDDED_PRICES, "embedded prices")?,
        )
    }

    /// Parses uncompressed inputs: a JSON object of instance type name → `InstanceTypeInfo`
    /// (PascalCase, as `DescribeInstanceTypes` / moto), a JSON list of
    /// `{"InstanceType", "Location"}` rows (`DescribeInstanceTypeOfferings` with location type
    /// availability-zone) and a price file `{"region", "prices": {type: USD per hour}}`.
    /// Zero, negative or non-numeric prices are skipped, as upstream skips them.
    pub fn from_json(
        instance_types_json: &[u8],
        offerings_json: &[u8],
        prices_json: &[u8],
    ) -> Result<Self, CatalogError> {
        let instance_types: BTreeMap<String, InstanceTypeInfo> =
            serde_json::from_slice(instance_types_json).map_err(|source| CatalogError::Parse {
                what: "instance types",
                source,
            })?;
        let rows: Vec<OfferingRow> =
            serde_json::from_slice(offerings_json).map_err(|source| CatalogError::Parse {
                what: "instance type offerings",
                source,
            })?;
        let mut offerings: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for row in rows {
            offerings
                .entry(row.instance_type)
                .or_default()
                .insert(row.location);
        }
        let prices: PriceFile =
            serde_json::from_slice(prices_json).map_err(|source| CatalogError::Parse {
                what: "on-demand prices",
                source,
            })?;
        let on_demand_prices = prices
            .prices
            .into_iter()
            .filter_map(|(name, value)| {
                let price = value.as_f64()?;
                (price.is_finite() && price > 0.0).then_some((name, price))
            })
            .collect();
        Ok(Self {
            region: prices.region,
            instance_types,
            offerings,
            on_demand_prices,
        })
    }
}

/// Decompresses a gzip stream.
pub fn gunzip(bytes: &[u8], what: &'static str) -> Result<Vec<u8>, CatalogError> {
    let mut out = Vec::with_capacity(bytes.len().saturating_mul(8));
    flate2::read::GzDecoder::new(bytes)
        .read_to_end(&mut out)
        .map_err(|source| CatalogError::Decompress { what, source })?;
    Ok(out)
}

/// Builds the catalog from `sources` with `opts`, reporting the types left out.
pub fn build_catalog(
    sources: &CatalogSources,
    opts: &AwsCatalogOptions,
) -> Result<CatalogReport, CatalogError> {
    opts.validate()?;
    if opts.region != sources.region {
        return Err(CatalogError::UnsupportedRegion {
            requested: opts.region.clone(),
            available: sources.region.clone(),
        });
    }
    let mut instance_types = Vec::with_capacity(sources.instance_types.len());
    let mut dropped = Vec::new();
    // BTreeMap iteration: sorted by the key, which is the instance type name.
    for (key, info) in &sources.instance_types {
        let name = info.instance_type.as_deref().unwrap_or(key);
        let converted = convert::convert(
            info,
            sources.offerings.get(name),
            sources.on_demand_prices.get(name).copied(),
            opts,
        );
        match converted {
            Ok(it) => instance_types.push(it),
            Err(reason) => dropped.push(DroppedInstanceType {
                name: name.to_owned(),
                reason,
            }),
        }
    }
    instance_types.sort_by(|a, b| a.name.cmp(&b.name));
    dropped.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(CatalogReport {
        instance_types,
        dropped,
    })
}

/// The embedded us-east-1 catalog with the types that were left out.
pub fn offline_catalog_report(opts: &AwsCatalogOptions) -> Result<CatalogReport, CatalogError> {
    opts.validate()?;
    if opts.region != EMBEDDED_REGION {
        return Err(CatalogError::UnsupportedRegion {
            requested: opts.region.clone(),
            available: EMBEDDED_REGION.to_owned(),
        });
    }
    build_catalog(&CatalogSources::embedded()?, opts)
}

/// The embedded us-east-1 catalog, sorted by instance type name.
pub fn offline_catalog(opts: &AwsCatalogOptions) -> Result<Vec<CatalogInstanceType>, CatalogError> {
    offline_catalog_report(opts).map(|r| r.instance_types)
}

//! The catalog file shape of the `karpenter plan` contract (`docs/plan-contract.md`, "Catalog
//! file"): what `karpenter plan --catalog PATH` reads and what the embedded AWS catalog produces.
//!
//! Quantities are kept as Kubernetes quantity strings (`"4"`, `"15155Mi"`, `"80m"`, `"20Gi"`);
//! converting them into core quantities is the consumer's job.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// A whole catalog file: `instanceTypes: [...]`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CatalogFile {
    /// The instance types, in the order given (the embedded catalog sorts them by name).
    #[serde(default)]
    pub instance_types: Vec<CatalogInstanceType>,
}

/// One instance type of a catalog file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CatalogInstanceType {
    /// The instance type name, e.g. `m5.xlarge` (also the `node.kubernetes.io/instance-type` label).
    pub name: String,
    /// Resource name to quantity string (`cpu`, `memory`, `pods`, `ephemeral-storage` and
    /// extended resources such as `nvidia.com/gpu`). Zero-valued extended resources are omitted.
    pub capacity: BTreeMap<String, String>,
    /// What the node reserves for itself; allocatable = capacity − all three parts.
    #[serde(default)]
    pub overhead: CatalogOverhead,
    /// The type's own single-valued labels (well-known and `karpenter.k8s.aws/*`). Zone and
    /// capacity type come from the offerings.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Where and how the type can be bought, with a price per hour in USD.
    #[serde(default)]
    pub offerings: Vec<CatalogOffering>,
}

/// The three overhead parts of an instance type (kubelet `kubeReserved`, `systemReserved` and the
/// hard eviction thresholds), each a resource name to quantity string map.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CatalogOverhead {
    /// `kubeReserved`: by default cpu, memory and ephemeral-storage.
    #[serde(default)]
    pub kube_reserved: BTreeMap<String, String>,
    /// `systemReserved`: empty unless the user configures it.
    #[serde(default)]
    pub system_reserved: BTreeMap<String, String>,
    /// Hard eviction thresholds: by default memory 100Mi and 10% of ephemeral-storage.
    #[serde(default)]
    pub eviction_threshold: BTreeMap<String, String>,
}

/// One offering: a zone and a capacity type with its price.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CatalogOffering {
    /// Availability zone name, e.g. `us-east-1a`.
    pub zone: String,
    /// `on-demand`, `spot` or `reserved`.
    pub capacity_type: String,
    /// Price in USD per hour.
    pub price: f64,
    /// Whether the offering can be launched now; absent means `true`.
    #[serde(default = "default_true", skip_serializing_if = "is_true")]
    pub available: bool,
}

fn default_true() -> bool {
    true
}

#[allow(clippy::trivially_copy_pass_by_ref)] // serde's skip_serializing_if passes a reference
fn is_true(value: &bool) -> bool {
    *value
}

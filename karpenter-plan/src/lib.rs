//! The offline planner behind the `karpenter` binary's `plan` and `simulate` commands
//! (the JSON contract: `docs/plan-contract.md`).
//!
//! - [`manifests`]: `-f` inputs into typed, located objects;
//! - [`migrate`]: `karpenter migrate`, v1beta1 NodePools and EC2NodeClasses rewritten as v1;
//! - [`catalog`]: `--catalog aws|fake:N|PATH`;
//! - [`plan`]: the catalog's instance types per NodePool, the world
//!   ([`karpenter_core::world`]), the solve, pricing;
//! - [`error`]: why no plan was made, and its exit status;
//! - [`explain`]: why pods were left out (`--explain`);
//! - [`lowerbound`]: the proven cost lower bound (karpenter-core's `scheduling::bound`);
//! - [`settings`]: `--feature-gates`, `--preference-policy`, `--min-values-policy`;
//! - [`warnings`]: operator advice with stable rule ids;
//! - [`output`]: JSON, YAML and the table;
//! - [`disruption`]: the `--disruption` hook;
//! - [`simulate`]: `karpenter simulate`, the operator loops over a simulated day of a
//!   workload, with and without consolidation;
//! - `live` (feature `live`): `karpenter plan --from-cluster`, the live cluster as documents.
//!
//! No cluster, cloud or network is needed: everything runs on the embedded catalogs and the
//! documents given.

pub mod catalog;
pub mod disruption;
pub mod error;
pub mod explain;
#[cfg(feature = "live")]
pub mod live;
pub mod manifests;
pub mod migrate;
pub mod output;
pub mod plan;
pub mod settings;
pub mod simulate;
pub mod warnings;

/// The proven cost lower bound of `karpenter plan` (moved to karpenter-core).
pub use karpenter_core::scheduling::bound as lowerbound;

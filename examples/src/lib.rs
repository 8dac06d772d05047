//! The library behind the `karpenter` binary: `karpenter plan`, the offline what-if planner
//! (`docs/plan-contract.md`), `karpenter crds` and `karpenter controller`.
//!
//! - [`manifests`]: `-f` inputs into typed, located objects;
//! - [`catalog`]: `--catalog aws|fake:N|PATH`;
//! - [`plan`]: the catalog's instance types per NodePool, the world
//!   ([`karpenter_core::world`]), the solve, pricing;
//! - [`explain`]: why pods were left out (`--explain`);
//! - [`lowerbound`]: the proven cost lower bound (karpenter-core's `scheduling::bound`);
//! - [`warnings`]: operator advice with stable rule ids;
//! - [`output`]: JSON, YAML and the table;
//! - [`disruption`]: the `--disruption` hook;
//! - [`live`]: `karpenter plan --from-cluster`, the live cluster as documents;
//! - [`simulate`]: `karpenter simulate`, the operator loops over a simulated day of a
//!   workload, with and without consolidation;
//! - [`crds`]: `karpenter crds`;
//! - [`controller`]: `karpenter controller`, the kube-rs shell around the operator loops;
//! - [`cli`]: the command line.

pub mod catalog;
pub mod cli;
pub mod controller;
pub mod crds;
pub mod disruption;
pub mod explain;
pub mod live;
pub mod manifests;
pub mod output;
pub mod plan;
pub mod simulate;
pub mod warnings;

/// The proven cost lower bound of `karpenter plan` (moved to karpenter-core).
pub use karpenter_core::scheduling::bound as lowerbound;

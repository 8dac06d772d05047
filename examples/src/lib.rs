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
//! - `live`: `karpenter plan --from-cluster`, the live cluster as documents (feature
//!   `controller`);
//! - [`simulate`]: `karpenter simulate`, the operator loops over a simulated day of a
//!   workload, with and without consolidation;
//! - `crds`: `karpenter crds` (feature `controller`);
//! - `controller`: `karpenter controller`, the kube-rs shell around the operator loops (feature
//!   `controller`, on by default);
//! - [`cli`]: the command line.
//!
//! Without the `controller` feature (`default-features = false`) the crate is the offline
//! planner alone: no kube-rs, tokio or HTTP server is built, and the cluster-facing commands
//! answer that the binary was built without them.

pub mod catalog;
pub mod cli;
#[cfg(feature = "controller")]
pub mod controller;
#[cfg(feature = "controller")]
pub mod crds;
pub mod disruption;
pub mod explain;
#[cfg(feature = "controller")]
pub mod live;
pub mod manifests;
pub mod output;
pub mod plan;
pub mod simulate;
pub mod warnings;

/// The proven cost lower bound of `karpenter plan` (moved to karpenter-core).
pub use karpenter_core::scheduling::bound as lowerbound;

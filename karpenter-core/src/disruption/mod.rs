//! The disruption planner: which nodes may be disrupted, in which order, and within which
//! budgets (upstream's disruption and lifecycle controllers).
//!
//! Everything here is a pure function of a [`crate::state::ClusterSnapshot`] and the time `now`,
//! which callers pass in. Outputs are in deterministic orders.
//!
//! - [`candidates`]: which nodes are disruption candidates and why the others are not (upstream
//!   `GetCandidates` / `NewCandidate`);
//! - [`budgets`]: how many nodes of each NodePool may be disrupted for a reason (upstream
//!   `nodepool.go` disruption budgets);
//! - [`cost`]: eviction and rescheduling costs, lifetime remaining, `consolidateAfter` (upstream
//!   `utils/disruption/disruption.go`);
//! - [`simulate`]: would the pods of some candidates fit elsewhere (upstream `SimulateScheduling`)?
//!   A [`simulate::SimulationContext`] prepares the scheduler over a snapshot once; each simulation
//!   then leaves the candidates out and places their pods, at a cost close to the pods it moves
//!   (about 2 ms per candidate on a 1,000-node cluster, see `docs/performance.md`);
//! - [`methods`]: emptiness, static drift, drift, multi-node and single-node consolidation, one
//!   pass ([`run_pass`]) or every command played forward ([`plan`]);
//! - [`validation`]: re-validating a command against a newer snapshot (upstream
//!   `disruption/validation.go`).
//!
//! ```
//! use karpenter_core::disruption::{DisruptionOptions, run_pass};
//! use karpenter_core::model::Timestamp;
//! use karpenter_core::state::ClusterSnapshot;
//!
//! let snapshot = ClusterSnapshot::default();
//! let outcome = run_pass(&snapshot, Timestamp::UNIX_EPOCH, &DisruptionOptions::default(), &|_| false);
//! assert!(outcome.commands.is_empty());
//! ```

pub mod budgets;
pub mod candidates;
pub mod cost;
pub(crate) mod facts;
pub mod methods;
mod pods;
pub mod simulate;
pub mod validation;

pub use methods::{
    Command, DisruptionOptions, Method, PassOutcome, Plan, Reason, TimeBudget,
    consolidation_candidates_of, evaluate_consolidation, evaluate_consolidation_with,
    multi_node_pass, plan, run_pass, run_pass_counted, single_node_pass, split_pass,
};

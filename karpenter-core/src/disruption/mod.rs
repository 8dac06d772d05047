//! The disruption planner: which nodes may be disrupted, in which order, and within which
//! budgets (spec `disruption.md`).
//!
//! Everything here is a pure function of a [`crate::state::ClusterSnapshot`] and the time `now`,
//! which callers pass in. Outputs are in deterministic orders.
//!
//! - [`candidates`]: which nodes are disruption candidates and why the others are not (§1);
//! - [`budgets`]: how many nodes of each NodePool may be disrupted for a reason (§3);
//! - [`cost`]: eviction and rescheduling costs, lifetime remaining, `consolidateAfter` (§1.7).

pub mod budgets;
pub mod candidates;
pub mod cost;
pub mod methods;
pub mod simulate;
pub mod validation;

pub use methods::{
    Command, DisruptionOptions, Method, PassOutcome, Plan, Reason, TimeBudget,
    consolidation_candidates_of, evaluate_consolidation, evaluate_consolidation_with,
    multi_node_pass, plan, run_pass, single_node_pass,
};

//! `--disruption`: the disruption planner's view of the existing cluster.
//!
//! **Not wired yet.** [`plan_disruption`] is the hook the disruption planner fills: it receives
//! everything the planner needs ([`DisruptionInput`]) and returns the contract's `disruption`
//! object ([`DisruptionPlan`]). Until it does, it returns `None`, `karpenter plan --disruption`
//! prints "disruption planning is not wired yet" on standard error and the output has no
//! `disruption` key.

use karpenter_core::api::{NodeClaim, NodePool};
use karpenter_core::model::{DaemonSet, InstanceType, PodDisruptionBudget, Timestamp};
use karpenter_core::scheduling::{ExistingNodeInput, NodePoolInput, SchedulerOptions};
use serde::Serialize;
use std::sync::Arc;

use crate::output::ClaimOutput;

/// The message printed on standard error while [`plan_disruption`] is not wired.
pub const NOT_WIRED: &str = "disruption planning is not wired yet";

/// Everything the disruption planner reads.
#[derive(Debug, Clone)]
pub struct DisruptionInput<'a> {
    /// The time budgets, expiry and `consolidateAfter` are evaluated at (`--now`).
    pub now: Timestamp,
    /// The valid, non-static NodePools, sorted by name.
    pub nodepools: &'a [NodePool],
    /// The scheduler's view of the same NodePools (same order), with their instance types.
    pub node_pool_inputs: &'a [NodePoolInput],
    /// Existing nodes and in-flight NodeClaims with the pods bound to them (sorted by name).
    pub nodes: &'a [ExistingNodeInput],
    /// The input's NodeClaims (launched or not).
    pub nodeclaims: &'a [NodeClaim],
    /// DaemonSets.
    pub daemonsets: &'a [DaemonSet],
    /// PodDisruptionBudgets.
    pub pdbs: &'a [PodDisruptionBudget],
    /// Every instance type of the catalog the NodePools use (for pricing existing nodes).
    pub instance_types: &'a [Arc<InstanceType>],
    /// The options the provisioning plan used (label policy included).
    pub scheduler_options: &'a SchedulerOptions,
}

/// The contract's `disruption` object.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DisruptionPlan {
    /// What the planner would do, in order.
    pub commands: Vec<DisruptionCommand>,
    /// Nodes that could not be disrupted, with the reason.
    pub blocked: Vec<BlockedNode>,
}

/// One disruption command.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DisruptionCommand {
    /// `Empty`, `Underutilized`, `Drifted` or `Expired`.
    pub reason: String,
    /// `emptiness`, `drift`, `expiration`, `single-node` or `multi-node`.
    pub method: String,
    /// The nodes to remove.
    pub candidates: Vec<String>,
    /// The NodeClaims to launch first.
    pub replacements: Vec<ClaimOutput>,
    /// Price of the candidates minus price of the replacements.
    pub savings_per_hour: f64,
}

/// A node the planner may not disrupt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BlockedNode {
    /// The node.
    pub node: String,
    /// Why (`pod default/db-0 has karpenter.sh/do-not-disrupt`).
    pub reason: String,
}

/// The disruption planner hook. Returns `None` while not wired (see the module documentation).
pub fn plan_disruption(input: &DisruptionInput<'_>) -> Option<DisruptionPlan> {
    let _ = input;
    None
}

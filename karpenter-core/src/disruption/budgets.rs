//! Per-NodePool disruption budgets for one disruption reason (upstream
//! `BuildDisruptionBudgetMapping`, upstream's `BuildDisruptionBudgetMapping`).
//!
//! For each NodePool of the snapshot:
//!
//! - `num_nodes` counts its nodes that are managed (have a NodeClaim), initialized, and whose
//!   NodeClaim is not `InstanceTerminating` — uninitialized replacements do not inflate
//!   percentages;
//! - `disrupting` counts those among them whose Node is not `Ready` or that are being deleted or
//!   are marked for deletion — they already consume budget;
//! - `allowed` is [`NodePool::allowed_disruptions_or_zero`] for `num_nodes` (any invalid budget
//!   gives 0);
//! - the pool may start `max(allowed − disrupting, 0)` more disruptions.

use std::collections::BTreeMap;

use crate::api::{DisruptionReason, NodePool};
use crate::model::Timestamp;
use crate::state::ClusterSnapshot;

pub use super::facts::{counts_towards_budget, is_consuming_budget};

/// The budget of one NodePool for one reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct PoolBudget {
    /// Nodes counted towards percentages (managed, initialized, not `InstanceTerminating`).
    pub num_nodes: usize,
    /// Disruptions the budgets allow among `num_nodes`
    /// ([`UNBOUNDED_DISRUPTIONS`](crate::api::UNBOUNDED_DISRUPTIONS) when no budget limits this
    /// reason); the `nodepools_allowed_disruptions` gauge.
    pub allowed: usize,
    /// Counted nodes that are not Ready or are being deleted; the
    /// `nodepools_nodes_consuming_budgets` gauge.
    pub disrupting: usize,
}

impl PoolBudget {
    /// How many more nodes may be disrupted: `max(allowed − disrupting, 0)`.
    pub fn remaining(&self) -> usize {
        self.allowed.saturating_sub(self.disrupting)
    }

    /// Whether the budgets block every disruption of a pool that has nodes (upstream then
    /// publishes a `DisruptionBlocked` event on the NodePool, see [`blocked_message`]).
    pub fn is_blocked(&self) -> bool {
        self.num_nodes != 0 && self.allowed == 0
    }
}

/// The budgets of every NodePool of a snapshot for one reason.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct BudgetMapping {
    /// The reason the budgets were evaluated for.
    pub reason: DisruptionReason,
    /// Per NodePool name.
    pub pools: BTreeMap<String, PoolBudget>,
}

/// The per-NodePool node counts budgets are evaluated from, whatever the reason: nodes counted
/// towards percentages ([`counts_towards_budget`]) and, among them, those already consuming
/// budget ([`is_consuming_budget`]). Count once per snapshot and evaluate every reason from it
/// with [`BudgetMapping::from_counts`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PoolCounts {
    counts: BTreeMap<String, (usize, usize)>,
}

impl PoolCounts {
    /// Counts the nodes of `snapshot` by NodePool.
    pub fn of(snapshot: &ClusterSnapshot) -> PoolCounts {
        let facts: Vec<_> = snapshot
            .nodes
            .iter()
            .map(|n| crate::disruption::facts::of(snapshot, n))
            .collect();
        let mut counts: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
        for node in facts.iter().filter(|f| f.counts_towards_budget) {
            let entry = counts
                .entry(node.nodepool.as_deref().unwrap_or_default())
                .or_default();
            entry.0 += 1;
            if node.consuming_budget {
                entry.1 += 1;
            }
        }
        PoolCounts {
            counts: counts
                .into_iter()
                .map(|(pool, n)| (pool.to_string(), n))
                .collect(),
        }
    }

    /// `(counted nodes, nodes consuming budget)` of `node_pool` (zeros for a pool without nodes).
    pub fn get(&self, node_pool: &str) -> (usize, usize) {
        self.counts.get(node_pool).copied().unwrap_or_default()
    }
}

impl BudgetMapping {
    /// Evaluates the budgets of every NodePool of `snapshot` for `reason` at `now`.
    pub fn build(snapshot: &ClusterSnapshot, reason: DisruptionReason, now: Timestamp) -> Self {
        BudgetMapping::from_counts(&PoolCounts::of(snapshot), snapshot, reason, now)
    }

    /// [`BudgetMapping::build`] from counts already taken over `snapshot`
    /// ([`PoolCounts::of`]), for a caller that evaluates several reasons.
    pub fn from_counts(
        counts: &PoolCounts,
        snapshot: &ClusterSnapshot,
        reason: DisruptionReason,
        now: Timestamp,
    ) -> Self {
        let pools = snapshot
            .node_pools
            .iter()
            .map(|state| {
                let pool: &NodePool = &state.node_pool;
                let (num_nodes, disrupting) = counts.get(pool.name());
                let allowed = pool.allowed_disruptions_or_zero(reason, num_nodes, now);
                (
                    pool.name().to_string(),
                    PoolBudget {
                        num_nodes,
                        allowed,
                        disrupting,
                    },
                )
            })
            .collect();
        BudgetMapping { reason, pools }
    }

    /// How many more nodes each NodePool may disrupt ([`PoolBudget::remaining`]).
    pub fn remaining(&self) -> BTreeMap<String, usize> {
        self.pools
            .iter()
            .map(|(name, b)| (name.clone(), b.remaining()))
            .collect()
    }

    /// How many more nodes `node_pool` may disrupt (0 for an unknown pool).
    pub fn remaining_for(&self, node_pool: &str) -> usize {
        self.pools.get(node_pool).map_or(0, PoolBudget::remaining)
    }

    /// The pools whose budgets block every disruption ([`PoolBudget::is_blocked`]), by name,
    /// with upstream's event message.
    pub fn blocked(&self) -> Vec<(String, String)> {
        self.pools
            .iter()
            .filter(|(_, b)| b.is_blocked())
            .map(|(name, _)| (name.clone(), blocked_message(self.reason)))
            .collect()
    }
}

/// Upstream's `DisruptionBlocked` NodePool event message for a budget allowing nothing.
pub fn blocked_message(reason: DisruptionReason) -> String {
    format!(
        "No allowed disruptions for disruption reason {} due to blocking budget",
        reason.as_str()
    )
}

/// How many more nodes each NodePool of the snapshot may disrupt for `reason` at `now`:
/// `max(allowed − disrupting, 0)` (see the [module documentation](self)). Pools whose budgets do
/// not limit `reason` map to a value near
/// [`UNBOUNDED_DISRUPTIONS`](crate::api::UNBOUNDED_DISRUPTIONS).
pub fn build_disruption_budget_mapping(
    snapshot: &ClusterSnapshot,
    reason: DisruptionReason,
    now: Timestamp,
) -> BTreeMap<String, usize> {
    BudgetMapping::build(snapshot, reason, now).remaining()
}

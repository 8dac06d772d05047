//! The Balanced consolidation policy: a move is approved when its savings, weighed against its
//! disruption cost with the pool's totals, score at least [`BALANCED_K`](super::BALANCED_K).

use super::BALANCED_K;
use crate::api::ConsolidationPolicy;
use crate::disruption::candidates::{Candidate, current_price};
use crate::disruption::cost::eviction_cost;
use crate::labels;
use crate::state::ClusterSnapshot;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

#[derive(Debug, Clone, Copy, Default)]
pub(super) struct PoolTotals {
    pub(super) cost: f64,
    pub(super) disruption: f64,
}

pub(super) fn balanced_totals(
    snapshot: &ClusterSnapshot,
    candidates: &[Candidate],
) -> BTreeMap<String, PoolTotals> {
    let mut totals: BTreeMap<String, PoolTotals> = BTreeMap::new();
    // Only Balanced NodePools read the totals ([`balanced_approves`] approves a move of any other
    // pool without them): with none in the snapshot, no total is needed.
    if !snapshot
        .node_pools
        .iter()
        .any(|p| is_balanced(snapshot, p.node_pool.name()))
    {
        return totals;
    }
    let by_name: BTreeMap<&str, &Candidate> = candidates.iter().map(|c| (c.name(), c)).collect();
    // `TotalCost`: the pool's tracked cost (upstream's ClusterCost: every NodeClaim of the pool
    // with its instance-type, zone and capacity-type labels, at its offering's price) when
    // positive, else the summed prices of the pool's candidates.
    let tracked = tracked_pool_costs(snapshot);
    let mut candidate_cost: BTreeMap<&str, f64> = BTreeMap::new();
    for c in candidates {
        *candidate_cost.entry(c.node_pool.as_str()).or_default() += c.price;
    }
    for (pool, fallback) in candidate_cost {
        let cost = tracked.get(pool).copied().filter(|c| *c > 0.0);
        totals.entry(pool.to_string()).or_default().cost = cost.unwrap_or(fallback);
    }
    for (pool, cost) in tracked {
        if cost > 0.0 {
            totals.entry(pool.to_string()).or_default().cost = cost;
        }
    }
    for node in &snapshot.nodes {
        let Some(pool) = node.nodepool() else {
            continue;
        };
        let cost = match by_name.get(node.name()) {
            Some(c) => c.reschedule_disruption_cost,
            // Upstream's incrementally tracked cost: cluster state drops terminal pods.
            None => {
                1.0 + node
                    .pods
                    .iter()
                    .filter(|p| !p.is_daemonset_pod() && !p.is_terminal())
                    .map(|p| eviction_cost(p).max(0.0))
                    .sum::<f64>()
            }
        };
        totals.entry(pool.to_string()).or_default().disruption += cost;
    }
    totals
}

/// Upstream's ClusterCost per NodePool: the summed price of every NodeClaim whose own labels name
/// the pool, an instance type, a zone and a capacity type, priced at the offering of the pool's
/// instance type with that zone and capacity type (0 when there is none).
pub(super) fn tracked_pool_costs(snapshot: &ClusterSnapshot) -> BTreeMap<&str, f64> {
    let mut costs: BTreeMap<&str, f64> = BTreeMap::new();
    for claim in snapshot.nodes.iter().filter_map(|n| n.node_claim.as_ref()) {
        let label = |key: &str| claim.metadata.labels.get(key).map(String::as_str);
        let (Some(pool), Some(it), Some(zone), Some(ct)) = (
            label(labels::NODEPOOL),
            label(labels::INSTANCE_TYPE),
            label(labels::ZONE),
            label(labels::CAPACITY_TYPE),
        ) else {
            continue;
        };
        let instance_type = snapshot
            .node_pool(pool)
            .and_then(|p| p.instance_types.iter().find(|t| t.name() == it));
        *costs.entry(pool).or_default() += current_price(instance_type.map(Arc::as_ref), zone, ct);
    }
    costs
}

pub(super) fn is_balanced(snapshot: &ClusterSnapshot, pool: &str) -> bool {
    snapshot.node_pool(pool).is_some_and(|p| {
        p.node_pool.spec.disruption.effective_consolidation_policy()
            == ConsolidationPolicy::Balanced
    })
}

pub(super) fn score(totals: &PoolTotals, savings: f64, disruption: f64) -> f64 {
    if totals.cost <= 0.0 || totals.disruption <= 0.0 {
        return 0.0;
    }
    let savings_fraction = savings / totals.cost;
    let disruption_fraction = disruption / totals.disruption;
    if savings_fraction <= 0.0 {
        0.0
    } else if disruption_fraction == 0.0 {
        f64::INFINITY
    } else {
        savings_fraction / disruption_fraction
    }
}

/// Whether every Balanced NodePool of a move approves it.
pub(super) fn balanced_approves(
    snapshot: &ClusterSnapshot,
    totals: &BTreeMap<String, PoolTotals>,
    candidates: &[Candidate],
    move_savings: f64,
) -> bool {
    let pools: BTreeSet<&str> = candidates.iter().map(|c| c.node_pool.as_str()).collect();
    let move_price: f64 = candidates.iter().map(|c| c.price).sum();
    pools.iter().all(|pool| {
        if !is_balanced(snapshot, pool) {
            return true;
        }
        let Some(t) = totals.get(*pool) else {
            return false;
        };
        let in_pool: Vec<&Candidate> = candidates.iter().filter(|c| c.node_pool == *pool).collect();
        let pool_price: f64 = in_pool.iter().map(|c| c.price).sum();
        let pool_savings = if pools.len() > 1 && move_price > 0.0 {
            move_savings * (pool_price / move_price)
        } else {
            move_savings
        };
        let disruption: f64 = in_pool.iter().map(|c| c.reschedule_disruption_cost).sum();
        score(t, pool_savings, disruption) >= 1.0 / BALANCED_K
    })
}

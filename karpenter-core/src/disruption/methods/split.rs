//! Split consolidation (not an upstream method; only for NodePools under the `cost` packing
//! policy): replace one node by several cheaper ones, or several by several.
//!
//! Upstream's consolidation only ever replaces nodes by *one* node, so a node that grew large
//! for a burst of pods stays large once most of them are gone unless a single smaller type
//! holds the rest. Under the `cost` packing policy
//! ([`crate::scheduling::packing`]), this method simulates removing the candidate(s) exactly as
//! single-node consolidation does; the pods that would need new nodes are then packed by the
//! cost-aware search, and the command replaces the candidate(s) by those nodes when
//!
//! - every displaced pod schedules (on existing nodes or the replacements);
//! - the saving is at least [`DisruptionOptions::split_savings_threshold`] of the candidates'
//!   price (default 20%), so that nodes do not churn for pennies;
//! - the candidates' NodePools have disruption budget left for them (`Underutilized`);
//! - the re-pack is independent of the rest of the cluster: no pod of the cluster has a topology
//!   spread constraint or a pod (anti-)affinity term (the replacements are packed without the
//!   existing nodes, so those could not be counted), and no candidate is spot unless
//!   spot-to-spot consolidation is enabled.
//!
//! Candidates are tried most expensive first (an oversized node is where a split saves most);
//! then, per NodePool, every candidate its budget allows together (several by several).

use std::collections::{BTreeMap, BTreeSet};

use super::consolidation::savings;
use super::{Command, DisruptionOptions, Method, PassOutcome, Reason, Sims};
use crate::api::DisruptionReason;
use crate::disruption::budgets::blocked_message;
use crate::disruption::candidates::Candidate;
use crate::labels;
use crate::model::{Pod, Timestamp};
use crate::scheduling::packing::{PackingPolicy, solve_packed};
use crate::scheduling::{ExistingNodeResult, NodePoolInput, Results, SchedulingInput};
use crate::state::ClusterSnapshot;

/// Most candidates a several-by-several split replaces at once.
const MAX_SET: usize = 10;

/// The packing policy of a NodePool of the snapshot under these options.
fn pool_policy(
    snapshot: &ClusterSnapshot,
    pool: &str,
    options: &DisruptionOptions,
) -> PackingPolicy {
    options.scheduler.packing.policy.unwrap_or_else(|| {
        snapshot
            .node_pool(pool)
            .and_then(|p| {
                PackingPolicy::from_annotations(&p.node_pool.metadata.annotations)
                    .ok()
                    .flatten()
            })
            .unwrap_or_default()
    })
}

/// Whether some pod of the cluster counts where other pods land.
fn cluster_constrained(snapshot: &ClusterSnapshot) -> bool {
    let constrained = |p: &Pod| {
        !p.topology_spread_constraints.is_empty()
            || p.pod_affinity.is_some()
            || p.pod_anti_affinity.is_some()
    };
    snapshot.pending_pods.iter().any(constrained)
        || snapshot
            .nodes
            .iter()
            .flat_map(|n| n.pods.iter())
            .any(constrained)
}

/// What splitting `candidates` would do: the replacements, where every displaced pod goes, and
/// the saving; `Ok(None)` when there is nothing to split (the pods fit on existing nodes, which
/// single- and multi-node consolidation handle).
pub(crate) fn evaluate_split(
    sims: &Sims<'_>,
    snapshot: &ClusterSnapshot,
    candidates: &[Candidate],
    options: &DisruptionOptions,
) -> Result<Option<(Vec<crate::scheduling::NewNodeClaim>, Results, f64)>, String> {
    let refs: Vec<&Candidate> = candidates.iter().collect();
    let Ok(sim) = sims.get().simulate(&refs, true) else {
        return Ok(None);
    };
    if !sim.all_non_pending_scheduled() {
        return Err("not all pods would schedule".into());
    }
    if sim.results.new_node_claims.is_empty() {
        return Ok(None);
    }
    // The pods the faithful simulation sends to new nodes: the candidates' pods among them are
    // re-packed; pending pods stay out of the command (provisioning places them).
    let displaced: BTreeMap<String, &Pod> = candidates
        .iter()
        .flat_map(|c| c.reschedulable_pods())
        .map(|p| (p.key(), p))
        .collect();
    let to_pack: Vec<Pod> = sim
        .results
        .new_node_claims
        .iter()
        .flat_map(|c| c.pods.iter())
        .filter_map(|k| displaced.get(k).map(|p| (*p).clone()))
        .collect();
    if to_pack.is_empty() {
        return Ok(None);
    }
    let node_pools: Vec<NodePoolInput> = crate::disruption::simulate::eligible_node_pools(snapshot);
    let input = SchedulingInput::new()
        .with_node_pools(node_pools)
        .with_daemonsets(snapshot.daemonsets.clone())
        .with_namespace_labels(snapshot.namespace_labels.clone())
        .with_volumes(snapshot.volumes.clone())
        .with_pods(to_pack);
    let mut scheduler = options.scheduler.clone();
    scheduler.reserved_capacity_mode = crate::scheduling::ReservedCapacityMode::Fallback;
    let outcome = solve_packed(&input, &scheduler);
    if !outcome.results.pod_errors.is_empty() {
        return Err("the displaced pods do not all fit on new nodes".into());
    }
    let replacements = outcome.results.new_node_claims;
    let policy = &options.scheduler.label_policy;
    let saving = savings(candidates, &replacements, policy);
    let existing: Vec<ExistingNodeResult> = sim
        .results
        .existing_nodes
        .iter()
        .map(|n| {
            let pods = n
                .pods
                .iter()
                .filter(|k| displaced.contains_key(*k))
                .cloned()
                .collect();
            ExistingNodeResult::new(n.name.clone(), pods)
        })
        .filter(|n| !n.pods.is_empty())
        .collect();
    let placement = Results {
        new_node_claims: replacements.clone(),
        existing_nodes: existing,
        pod_errors: BTreeMap::new(),
        metrics: Default::default(),
    };
    Ok(Some((replacements, placement, saving)))
}

/// The command splitting `candidates`, when it passes the threshold.
pub(super) fn split_command(
    sims: &Sims<'_>,
    snapshot: &ClusterSnapshot,
    candidates: Vec<Candidate>,
    options: &DisruptionOptions,
) -> Result<Option<Command>, String> {
    let price: f64 = candidates.iter().map(|c| c.price).sum();
    let Some((replacements, placement, saving)) =
        evaluate_split(sims, snapshot, &candidates, options)?
    else {
        return Ok(None);
    };
    let threshold = options.split_savings_threshold * price;
    if saving <= 0.0 || saving < threshold {
        return Err(format!(
            "a split saves {saving:.4}/h, under the threshold of {threshold:.4}/h ({:.0}% of the price)",
            options.split_savings_threshold * 100.0
        ));
    }
    Ok(Some(Command {
        method: Method::Split,
        reason: Reason::Underutilized,
        candidates,
        replacements,
        savings_per_hour: saving,
        simulation: Some(placement),
    }))
}

/// Split consolidation over the pass's candidates (see the module documentation).
pub(crate) fn split(
    sims: &Sims<'_>,
    snapshot: &ClusterSnapshot,
    candidates: &[Candidate],
    now: Timestamp,
    out: &mut PassOutcome,
    options: &DisruptionOptions,
) {
    let mut cands: Vec<Candidate> = sims
        .consolidation_candidates(snapshot, candidates, now)
        .iter()
        .filter(|c| pool_policy(snapshot, &c.node_pool, options) == PackingPolicy::Cost)
        .filter(|c| {
            options.spot_to_spot_consolidation || c.capacity_type != labels::CAPACITY_TYPE_SPOT
        })
        .cloned()
        .collect();
    if cands.is_empty() {
        return;
    }
    out.eligible_nodes.insert(Method::Split, cands.len());
    if cluster_constrained(snapshot) {
        return;
    }
    cands.sort_by(|a, b| {
        b.price
            .total_cmp(&a.price)
            .then_with(|| a.name().cmp(b.name()))
    });
    let budgets = sims.budgets(snapshot, DisruptionReason::Underutilized, now);
    let mut allowed: Vec<Candidate> = Vec::new();
    for c in &cands {
        if budgets.get(&c.node_pool).copied().unwrap_or(0) == 0 {
            out.block(options, c.name(), || {
                blocked_message(DisruptionReason::Underutilized)
            });
            continue;
        }
        allowed.push(c.clone());
        match split_command(sims, snapshot, vec![c.clone()], options) {
            Ok(Some(command)) => {
                out.commands.push(command);
                return;
            }
            Ok(None) => {}
            Err(reason) => out.block(options, c.name(), || reason),
        }
    }
    // Several by several: per NodePool, the candidates its budget allows, together.
    let pools: BTreeSet<&str> = allowed.iter().map(|c| c.node_pool.as_str()).collect();
    for pool in pools {
        let room = budgets.get(pool).copied().unwrap_or(0).min(MAX_SET);
        let set: Vec<Candidate> = allowed
            .iter()
            .filter(|c| c.node_pool == pool)
            .take(room)
            .cloned()
            .collect();
        if set.len() < 2 {
            continue;
        }
        if let Ok(Some(command)) = split_command(sims, snapshot, set, options) {
            out.commands.push(command);
            return;
        }
    }
}

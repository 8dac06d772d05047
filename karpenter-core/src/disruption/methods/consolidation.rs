//! Consolidation (single- and multi-node): candidate selection, the replacement search and the
//! price filters that decide whether a replacement is worth launching.

use super::balanced::{balanced_approves, balanced_totals, is_balanced};
use super::{
    Command, DisruptionOptions, MIN_INSTANCE_TYPES_FOR_SPOT_TO_SPOT, Method, PassOutcome, Reason,
    Sims, should_consolidate,
};
use crate::api::DisruptionReason;
use crate::disruption::candidates::{Candidate, interleave, sort_by_savings_ratio};
use crate::disruption::simulate::{Simulation, Simulator};
use crate::labels::{self, LabelPolicy};
use crate::model::{InstanceType, Timestamp};
use crate::requirements::{Operator, Requirement, Requirements};
use crate::scheduling::{NewNodeClaim, Results};
use crate::state::ClusterSnapshot;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// The launch price of a replacement: its cheapest instance type's cheapest compatible
/// available offering.
pub(super) fn replacement_price(r: &NewNodeClaim, policy: &LabelPolicy) -> f64 {
    r.instance_types
        .first()
        .and_then(|it| it.cheapest_offering(&r.requirements, policy))
        .map_or(0.0, |o| o.price)
}

pub(super) fn savings(
    candidates: &[Candidate],
    replacements: &[NewNodeClaim],
    policy: &LabelPolicy,
) -> f64 {
    candidates.iter().map(|c| c.price).sum::<f64>()
        - replacements
            .iter()
            .map(|r| replacement_price(r, policy))
            .sum::<f64>()
}

pub(super) fn min_values_ok(r: &NewNodeClaim, its: &[Arc<InstanceType>]) -> Result<(), String> {
    if !r.requirements.has_min_values() {
        return Ok(());
    }
    r.requirements
        .satisfies_min_values(its.iter().map(|it| it.requirements()))
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// What consolidating `candidates` would do: `Ok(None)` means no action.
pub(super) fn compute_consolidation(
    simulator: &Simulator<'_>,
    candidates: &[Candidate],
    options: &DisruptionOptions,
) -> Result<Option<(Vec<NewNodeClaim>, Simulation)>, String> {
    compute_consolidation_with(simulator, candidates, options, false)
}

/// [`compute_consolidation`]; `repeated`: one of many simulations sharing their pods
/// ([`Simulator::simulate_repeated`]), whose caller records no reason for a rejected set (the
/// multi-node search): the simulation stops at its second new NodeClaim, which rejects the set
/// whatever else the simulation would find.
pub(super) fn compute_consolidation_with(
    simulator: &Simulator<'_>,
    candidates: &[Candidate],
    options: &DisruptionOptions,
    repeated: bool,
) -> Result<Option<(Vec<NewNodeClaim>, Simulation)>, String> {
    let policy = &options.scheduler.label_policy;
    let refs: Vec<&Candidate> = candidates.iter().collect();
    let simulated = if repeated {
        // Consolidation rejects a simulation with two or more new NodeClaims: the search's
        // simulations stop at the second (the search records nothing for a rejected prefix).
        simulator.simulate_repeated(&refs, true, Some(1))
    } else {
        simulator.simulate(&refs, true)
    };
    let sim = match simulated {
        Ok(s) => s,
        Err(_) => return Ok(None),
    };
    if !sim.all_non_pending_scheduled() {
        return Err(format!(
            "not all pods would schedule, {}",
            summarize(&sim.displaced_errors)
        ));
    }
    match sim.results.new_node_claims.len() {
        0 => return Ok(Some((Vec::new(), sim))),
        1 => {}
        n => return Err(format!("can't remove without creating {n} candidates")),
    }
    let mut replacement = sim.results.new_node_claims[0].clone();
    let candidate_price: f64 = candidates.iter().map(|c| c.price).sum();
    let all_spot = candidates
        .iter()
        .all(|c| c.capacity_type == labels::CAPACITY_TYPE_SPOT);
    let admits_spot = replacement
        .requirements
        .get(labels::CAPACITY_TYPE)
        .is_none_or(|r| r.has(labels::CAPACITY_TYPE_SPOT));
    if all_spot && admits_spot {
        if !options.spot_to_spot_consolidation {
            return Err(
                "SpotToSpotConsolidation is disabled, can't replace a spot node with a spot node"
                    .into(),
            );
        }
        replacement.requirements.add(Requirement::new(
            labels::CAPACITY_TYPE,
            Operator::In,
            [labels::CAPACITY_TYPE_SPOT],
        ));
        let reqs = replacement.requirements.clone();
        replacement.instance_types.retain(|it| {
            it.available_offerings().any(|o| {
                o.capacity_type() == labels::CAPACITY_TYPE_SPOT
                    && reqs.is_compatible(o.requirements(), Some(policy))
            })
        });
        filter_by_price(&mut replacement, candidate_price, policy)?;
        if candidates.len() == 1 {
            let n = replacement.instance_types.len();
            if n < MIN_INSTANCE_TYPES_FOR_SPOT_TO_SPOT {
                return Err(format!(
                    "SpotToSpotConsolidation requires {MIN_INSTANCE_TYPES_FOR_SPOT_TO_SPOT} cheaper instance type options than the current candidate to consolidate, got {n}"
                ));
            }
            let mut keep = MIN_INSTANCE_TYPES_FOR_SPOT_TO_SPOT;
            if replacement.requirements.has_min_values()
                && let Ok(needed) = replacement.requirements.satisfies_min_values(
                    replacement
                        .instance_types
                        .iter()
                        .map(|it| it.requirements()),
                )
            {
                keep = keep.max(needed);
            }
            replacement.instance_types.truncate(keep);
        }
        return Ok(Some((vec![replacement], sim)));
    }
    filter_by_price(&mut replacement, candidate_price, policy)?;
    // Prefer spot when both spot and on-demand remain possible (upstream
    // `disruption/consolidation.go`). A replacement without a capacity-type requirement admits both
    // (upstream reads it as `Exists`), whatever its instance types offer.
    match replacement.requirements.get(labels::CAPACITY_TYPE).cloned() {
        Some(ct) => {
            if ct.has(labels::CAPACITY_TYPE_SPOT) && ct.has(labels::CAPACITY_TYPE_ON_DEMAND) {
                let mut narrowed = Requirement::new(
                    labels::CAPACITY_TYPE,
                    Operator::In,
                    [labels::CAPACITY_TYPE_SPOT],
                );
                narrowed.set_min_values(ct.min_values());
                replacement.requirements.remove(labels::CAPACITY_TYPE);
                replacement.requirements.add(narrowed);
            }
        }
        None => replacement.requirements.add(Requirement::new(
            labels::CAPACITY_TYPE,
            Operator::In,
            [labels::CAPACITY_TYPE_SPOT],
        )),
    }
    // Deliberate difference: when no option offers what the narrowed requirements allow,
    // upstream still issues the command, its launch fails and the node stays (after a taint and
    // a rollback). The end state is the same without the attempt.
    let launchable = replacement.instance_types.iter().any(|it| {
        it.available_offerings().any(|o| {
            replacement
                .requirements
                .is_compatible(o.requirements(), Some(policy))
        })
    });
    if !launchable {
        return Err(
            "replacement would not launch: narrowed to spot, but no cheaper option offers spot"
                .into(),
        );
    }
    Ok(Some((vec![replacement], sim)))
}

/// Keeps the options whose worst launch price is strictly below `limit`; minValues must stay
/// satisfiable.
pub(super) fn filter_by_price(
    replacement: &mut NewNodeClaim,
    limit: f64,
    policy: &LabelPolicy,
) -> Result<(), String> {
    let reqs = replacement.requirements.clone();
    replacement.instance_types.retain(|it| {
        it.worst_launch_price(&reqs, policy)
            .is_some_and(|p| p < limit)
    });
    if replacement.instance_types.is_empty() {
        return Err("can't replace with a cheaper node".into());
    }
    min_values_ok(replacement, &replacement.instance_types)
        .map_err(|e| format!("Filtering by price: {e}"))
}

/// Multi-node: drop replacement options priced at or above the cheapest candidate of the same
/// instance type ([A, A, small] → delete one A instead of buying another A), as upstream's
/// `filterOutSameInstanceType` (upstream `disruption/multinodeconsolidation.go`):
///
/// - a candidate's type is priced at its cheapest offering compatible with the node's labels
///   (available or not), the cheapest over the candidates of that type; a type none of whose
///   candidates has such an offering is priced 0 (upstream reads a missing map entry), which
///   drops every option;
/// - the limit is the lowest such price among the types the replacement may launch as, unbounded
///   when it shares no type with the candidates;
/// - the options are always re-filtered against the limit with the replacement's current
///   (possibly spot-narrowed) requirements, so an option without any compatible available
///   offering is dropped even when no type is shared; minValues must stay satisfiable.
pub(super) fn filter_out_same_instance_type(
    replacement: &mut NewNodeClaim,
    candidates: &[Candidate],
    policy: &LabelPolicy,
) -> bool {
    let names: BTreeSet<&str> = replacement
        .instance_types
        .iter()
        .map(|it| it.name())
        .collect();
    let mut price_by_type: BTreeMap<&str, Option<f64>> = BTreeMap::new();
    for c in candidates {
        let Some(it) = c
            .instance_type
            .as_ref()
            .filter(|it| names.contains(it.name()))
        else {
            continue;
        };
        let node_labels = Requirements::from_labels(
            c.node
                .labels()
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str())),
        );
        let cheapest = it
            .offerings
            .iter()
            .filter(|o| node_labels.is_compatible(o.requirements(), Some(policy)))
            .map(|o| o.price)
            .min_by(f64::total_cmp);
        let entry = price_by_type.entry(it.name()).or_insert(None);
        if let Some(p) = cheapest {
            *entry = Some(entry.map_or(p, |e| e.min(p)));
        }
    }
    let max_price = price_by_type
        .values()
        .map(|p| p.unwrap_or(0.0))
        .min_by(f64::total_cmp)
        .unwrap_or(f64::INFINITY);
    let reqs = replacement.requirements.clone();
    replacement.instance_types.retain(|it| {
        it.worst_launch_price(&reqs, policy)
            .is_some_and(|p| p < max_price)
    });
    !replacement.instance_types.is_empty()
        && min_values_ok(replacement, &replacement.instance_types).is_ok()
}

pub(super) fn summarize(errors: &BTreeMap<String, String>) -> String {
    let shown: Vec<String> = errors
        .iter()
        .take(5)
        .map(|(p, e)| format!("{p}: {e}"))
        .collect();
    shown.join("; ")
}
pub(super) fn consolidation_candidates(
    snapshot: &ClusterSnapshot,
    candidates: &[Candidate],
    now: Timestamp,
) -> Vec<Candidate> {
    let mut cands: Vec<Candidate> = candidates
        .iter()
        .filter(|c| should_consolidate(snapshot, c, now))
        .cloned()
        .collect();
    sort_by_savings_ratio(&mut cands);
    cands
}

pub(super) fn multi_node(
    sims: &Sims<'_>,
    snapshot: &ClusterSnapshot,
    candidates: &[Candidate],
    now: Timestamp,
    out: &mut PassOutcome,
    options: &DisruptionOptions,
) {
    let cands = sims.consolidation_candidates(snapshot, candidates, now);
    out.eligible_nodes.insert(Method::MultiNode, cands.len());
    if cands.is_empty() {
        return;
    }
    let mut budgets = sims.budgets(snapshot, DisruptionReason::Underutilized, now);
    let mut kept = Vec::new();
    let mut constrained = false;
    for c in cands.iter() {
        let b = budgets.entry(c.node_pool.clone()).or_insert(0);
        if *b == 0 {
            constrained = true;
            continue;
        }
        *b -= 1;
        kept.push(c.clone());
    }
    if kept.len() < 2 {
        if !constrained {
            out.consolidated.insert(Method::MultiNode);
        }
        return;
    }
    let totals = balanced_totals(snapshot, candidates);
    let policy = &options.scheduler.label_policy;
    let max_parallel = options
        .multi_node_candidate_limit
        .map_or(kept.len(), |l| l.min(kept.len()));
    let (mut lo, mut hi) = (
        1usize,
        if kept.len() <= max_parallel {
            kept.len() - 1
        } else {
            max_parallel
        },
    );
    // The best valid trial: (prefix end, replacements, savings, simulation). Its candidates are
    // copied once, at the end.
    let mut best: Option<(usize, Vec<NewNodeClaim>, f64, Results)> = None;
    let mut trials = 0usize;
    // Prefixes whose displaced pods provably cannot all land are rejected without a simulation
    // (a rejected prefix records nothing, so the outcome is the same).
    let precheck =
        super::precheck::MultiNodePrecheck::new(snapshot, sims.rooms(snapshot, now), &kept);
    while lo <= hi {
        if options.multi_node_time_budget.exhausted(trials) {
            // Upstream returns the last valid command found before the deadline, if any.
            out.multi_node_timed_out = true;
            break;
        }
        trials += 1;
        let mid = (lo + hi) / 2;
        let prefix = &kept[..=mid];
        // The binary search's trials share their pods: per-pod work is done once.
        let valid = match (!precheck.hopeless(mid))
            .then(|| compute_consolidation_with(sims.get(), prefix, options, true))
        {
            Some(Ok(Some((mut replacements, sim)))) => {
                let ok = replacements
                    .first_mut()
                    .is_none_or(|r| filter_out_same_instance_type(r, prefix, policy));
                let saving = savings(prefix, &replacements, policy);
                if ok && balanced_approves(snapshot, &totals, prefix, saving) {
                    best = Some((mid, replacements, saving, sim.results));
                    true
                } else {
                    false
                }
            }
            _ => false,
        };
        if valid {
            lo = mid + 1;
        } else if mid == 0 {
            break;
        } else {
            hi = mid - 1;
        }
    }
    match best {
        Some((end, replacements, saving, results)) => out.commands.push(Command {
            method: Method::MultiNode,
            reason: Reason::Underutilized,
            candidates: kept[..=end].to_vec(),
            replacements,
            savings_per_hour: saving,
            simulation: Some(results),
        }),
        None if !constrained => {
            out.consolidated.insert(Method::MultiNode);
        }
        None => {}
    }
}

pub(super) fn single_node(
    sims: &Sims<'_>,
    snapshot: &ClusterSnapshot,
    candidates: &[Candidate],
    now: Timestamp,
    out: &mut PassOutcome,
    options: &DisruptionOptions,
) {
    let sorted = sims.consolidation_candidates(snapshot, candidates, now);
    let cands = interleave(
        sorted.iter().collect(),
        &options.previously_unseen_node_pools,
    );
    out.eligible_nodes.insert(Method::SingleNode, cands.len());
    if cands.is_empty() {
        return;
    }
    let budgets = sims.budgets(snapshot, DisruptionReason::Underutilized, now);
    let totals = balanced_totals(snapshot, candidates);
    let policy = &options.scheduler.label_policy;
    let mut constrained = false;
    let mut unseen: BTreeSet<String> = cands.iter().map(|c| c.node_pool.clone()).collect();
    let precheck = options
        .single_node_precheck
        .then(|| super::precheck::SingleNodePrecheck::new(snapshot, sims.rooms(snapshot, now)));
    for (considered, c) in cands.into_iter().enumerate() {
        if options.single_node_time_budget.exhausted(considered) {
            // Upstream gives up without a command and remembers the pools it never reached.
            out.unseen_node_pools = Some(unseen);
            return;
        }
        unseen.remove(&c.node_pool);
        if budgets.get(&c.node_pool).copied().unwrap_or(0) == 0 {
            constrained = true;
            out.block(options, c.name(), || {
                crate::disruption::budgets::blocked_message(DisruptionReason::Underutilized)
            });
            continue;
        }
        // Balanced pre-filter: even deleting the node outright must pass the threshold.
        if is_balanced(snapshot, &c.node_pool)
            && totals.get(&c.node_pool).is_some_and(|t| t.cost > 0.0)
            && !balanced_approves(snapshot, &totals, std::slice::from_ref(c), c.price)
        {
            continue;
        }
        if let Some(hopeless) = precheck.as_ref().and_then(|p| p.hopeless(c)) {
            out.block(options, c.name(), || hopeless.to_string());
            continue;
        }
        let one = vec![c.clone()];
        match compute_consolidation(sims.get(), &one, options) {
            Ok(Some((replacements, sim))) => {
                let saving = savings(&one, &replacements, policy);
                if !balanced_approves(snapshot, &totals, &one, saving) {
                    continue;
                }
                out.commands.push(Command {
                    method: Method::SingleNode,
                    reason: Reason::Underutilized,
                    candidates: one,
                    replacements,
                    savings_per_hour: saving,
                    simulation: Some(sim.results),
                });
                return;
            }
            Ok(None) => {}
            Err(reason) => {
                if let Some(c) = one.first() {
                    out.block(options, c.name(), || reason);
                }
            }
        }
    }
    if !constrained {
        out.consolidated.insert(Method::SingleNode);
    }
    // Every candidate considered: no NodePool is left unseen.
    out.unseen_node_pools = Some(unseen);
}

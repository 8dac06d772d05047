//! Local improvement of a cost-aware plan: re-packing the pods of the cost pools' new
//! NodeClaims in groups.
//!
//! It runs only on *free-form* batches, where a group of pods can be re-solved on its own
//! without changing what any constraint sees:
//!
//! - no pod (pending or bound to an existing node) has a topology spread constraint or a pod
//!   (anti-)affinity term, so no pod counts where another one lands;
//! - the solve is not a consolidation simulation, and no instance type of a cost pool has a
//!   reserved offering (two groups could otherwise both count on the same reservation);
//! - the merged plan is checked against every cost pool's limits (each new NodeClaim counted at
//!   its largest instance type's capacity, as the solver counts it) and `nodes` limit.
//!
//! The pods of the cost pools' new NodeClaims are re-packed by a multi-resource bin packer
//! ([`super::binpack`]): for the whole batch, and for the batch split by shape (pods grouped by
//! their memory-to-CPU ratio at thresholds between the ratios of the cost pools' instance types:
//! compute-, general- and memory-optimised families), it proposes one group of pods per node,
//! filling nodes evenly in CPU and memory. The cheapest proposal by estimate is then
//! *materialised*: each group is solved on its own by the faithful solve, so every NodeClaim of
//! the result honours requirements, taints, `minValues`, DaemonSet overhead, host ports and
//! volumes exactly as a faithful NodeClaim does.
//!
//! The re-packed plan is kept only when it lowers the plan's cost. Each re-packed NodeClaim offers the
//! [`instance_types_per_claim`](super::PackingOptions::instance_types_per_claim) cheapest
//! instance types that hold its pods (the solve of a group prepares only those, which keeps the
//! search fast).

use std::collections::{BTreeMap, BTreeSet};

use crate::model::Pod;
use crate::resources::{ResourceList, names};
use crate::scheduling::{NewNodeClaim, Results, SchedulingInput};

use super::binpack::{self, Dims, Kind};
use super::{PackingOutcome, Search, claim_price, plan_cost};

/// Memory-to-CPU ratio thresholds tried at most.
const MAX_THRESHOLDS: usize = 3;

/// Node kinds the packer tries per group (the best by whole-group estimate).
const TRIES: usize = 3;

/// Whether the batch is free-form (see the module documentation).
pub(super) fn free_form(search: &Search<'_>) -> bool {
    let input = search.input;
    let constrained = |p: &Pod| {
        !p.topology_spread_constraints.is_empty()
            || p.pod_affinity.is_some()
            || p.pod_anti_affinity.is_some()
    };
    input.consolidation.is_none()
        && !input.pods.iter().any(constrained)
        && !input
            .existing_nodes
            .iter()
            .flat_map(|n| n.pods.iter())
            .any(constrained)
        && !search.cost_pools.iter().any(|&i| {
            input.node_pools[i]
                .instance_types
                .iter()
                .any(|it| it.offerings.iter().any(|o| o.is_reserved()))
        })
}

/// GiB of memory per CPU core.
fn ratio(resources: &ResourceList) -> f64 {
    let cpu = resources.get_or_zero(names::CPU).as_f64();
    let mem = resources.get_or_zero(names::MEMORY).as_f64() / (1u64 << 30) as f64;
    if cpu <= 0.0 { f64::INFINITY } else { mem / cpu }
}

/// Thresholds between the most common memory-to-CPU ratios of the cost pools' instance types
/// (rounded to a quarter GiB per core), at their geometric means, ascending.
fn thresholds(search: &Search<'_>) -> Vec<f64> {
    let mut counts: BTreeMap<i64, usize> = BTreeMap::new();
    for &i in &search.cost_pools {
        for it in &search.input.node_pools[i].instance_types {
            let r = ratio(it.capacity());
            if r.is_finite() {
                *counts.entry((r * 4.0).round() as i64).or_default() += 1;
            }
        }
    }
    let mut common: Vec<(usize, i64)> = counts.into_iter().map(|(r, n)| (n, r)).collect();
    common.sort_by(|a, b| b.cmp(a));
    let mut ratios: Vec<i64> = common
        .into_iter()
        .take(MAX_THRESHOLDS + 1)
        .map(|(_, r)| r)
        .collect();
    ratios.sort_unstable();
    ratios
        .windows(2)
        .map(|w| ((w[0] as f64 / 4.0) * (w[1] as f64 / 4.0)).sqrt())
        .collect()
}

/// The partitions of the pods (by index) tried: each threshold alone (two groups), then all of
/// them.
fn partitions(requests: &[ResourceList], thresholds: &[f64]) -> Vec<Vec<Vec<usize>>> {
    let ratios: Vec<f64> = requests.iter().map(ratio).collect();
    let split = |cuts: &[f64]| -> Vec<Vec<usize>> {
        let mut groups: Vec<Vec<usize>> = vec![Vec::new(); cuts.len() + 1];
        for (p, r) in ratios.iter().enumerate() {
            let g = cuts.iter().filter(|&&c| *r > c).count();
            groups[g].push(p);
        }
        groups.retain(|g| !g.is_empty());
        groups
    };
    let mut out: Vec<Vec<Vec<usize>>> = thresholds.iter().map(|t| split(&[*t])).collect();
    if thresholds.len() > 1 {
        out.push(split(thresholds));
    }
    out.retain(|p| p.len() > 1);
    out
}

/// A sub-solve input: the same NodePools (non-cost pools without instance types, so the pods
/// stay on cost pools), DaemonSets, namespaces and volumes, no existing node, these pods.
fn sub_input(search: &Search<'_>, pods: Vec<Pod>) -> SchedulingInput {
    let input = search.input;
    let mut node_pools = input.node_pools.clone();
    for (i, np) in node_pools.iter_mut().enumerate() {
        if !search.cost_pools.contains(&i) {
            np.instance_types.clear();
        }
    }
    SchedulingInput {
        node_pools,
        existing_nodes: Vec::new(),
        daemonsets: input.daemonsets.clone(),
        pods,
        namespace_labels: input.namespace_labels.clone(),
        volumes: input.volumes.clone(),
        consolidation: None,
    }
}

/// Whether the claims keep every cost pool's limits (each counted at its largest instance
/// type's capacity; existing nodes of the pool at theirs).
pub(super) fn within_limits(search: &Search<'_>, claims: &[NewNodeClaim]) -> bool {
    let input = search.input;
    search.cost_pools.iter().all(|&i| {
        let np = &input.node_pools[i];
        if np.limits.is_empty() {
            return true;
        }
        let existing: Vec<_> = input
            .existing_nodes
            .iter()
            .filter(|n| n.node.nodepool() == Some(np.name.as_str()))
            .collect();
        let mine: Vec<&NewNodeClaim> = claims.iter().filter(|c| c.node_pool == np.name).collect();
        np.limits.iter().all(|(name, limit)| {
            if name == names::NODES {
                return (existing.len() + mine.len()) as i64 <= limit.value();
            }
            let used: i64 = existing
                .iter()
                .map(|n| n.node.capacity.get_or_zero(name).milli_value())
                .chain(mine.iter().map(|c| {
                    c.instance_types
                        .iter()
                        .map(|it| it.capacity().get_or_zero(name).milli_value())
                        .max()
                        .unwrap_or(0)
                }))
                .sum();
            used <= limit.milli_value()
        })
    })
}

/// Sum of the claims' prices.
fn price_of(claims: &[NewNodeClaim], search: &Search<'_>) -> f64 {
    let policy = &search.options.label_policy;
    claims.iter().map(|c| claim_price(c, policy)).sum()
}

/// The node kinds of the cost pools for the packer: each instance type at or above the
/// minimum node size with an offering the pool allows, its allocatable minus every DaemonSet's
/// requests (an over-estimate of the overhead: the packer must not over-fill), at its cheapest
/// such offering.
fn kinds(search: &Search<'_>, dims: &Dims) -> Vec<(Kind, usize, usize)> {
    let policy = &search.options.label_policy;
    let mut overhead = ResourceList::new();
    for d in &search.input.daemonsets {
        overhead.add_assign(&d.pod.requests);
    }
    let overhead = dims.dense(&overhead);
    let mut out = Vec::new();
    for &i in &search.cost_pools {
        let np = &search.input.node_pools[i];
        let reqs = &search.pool_reqs[i];
        for (t, it) in np.instance_types.iter().enumerate() {
            if super::cpu_millis(it) < search.options.packing.min_node_cpu_millis
                || reqs.intersects(it.requirements()).is_err()
            {
                continue;
            }
            let Some(o) = it.cheapest_offering(reqs, policy) else {
                continue;
            };
            let capacity: Vec<i64> = dims
                .dense(it.allocatable())
                .iter()
                .zip(&overhead)
                .map(|(a, o)| a - o)
                .collect();
            out.push((
                Kind {
                    capacity,
                    price: o.price,
                },
                i,
                t,
            ));
        }
    }
    out
}

/// Solves each proposed group on its own, offering only the instance types that can hold the
/// group's total; `None` when a pod is left out.
fn materialise(
    search: &Search<'_>,
    pods: &[Pod],
    groups: &[Vec<usize>],
    dense: &[Vec<i64>],
    kinds: &[(Kind, usize, usize)],
    solves: &mut usize,
) -> Option<Vec<NewNodeClaim>> {
    let mut claims = Vec::new();
    let mut input = sub_input(search, Vec::new());
    for group in groups {
        let dims = dense.first().map_or(0, Vec::len);
        let mut total = vec![0i64; dims];
        for &p in group {
            for d in 0..dims {
                total[d] += dense[p][d];
            }
        }
        let mut fitting: Vec<(f64, usize, usize)> = kinds
            .iter()
            .filter(|(k, _, _)| total.iter().zip(&k.capacity).all(|(t, c)| t <= c))
            .map(|(k, i, t)| (k.price, *i, *t))
            .collect();
        fitting.sort_by(|a, b| a.0.total_cmp(&b.0).then((a.1, a.2).cmp(&(b.1, b.2))));
        let keep = search
            .options
            .packing
            .instance_types_per_claim
            .max(search.options.packing.spot_min_instance_types)
            .max(1);
        let holding: BTreeSet<(usize, usize)> =
            fitting.iter().take(keep).map(|&(_, i, t)| (i, t)).collect();
        for &i in &search.cost_pools {
            let all = &search.input.node_pools[i].instance_types;
            let kept: Vec<_> = all
                .iter()
                .enumerate()
                .filter(|(t, _)| holding.contains(&(i, *t)))
                .map(|(_, it)| it.clone())
                .collect();
            input.node_pools[i].instance_types = if holding.is_empty() {
                all.clone()
            } else {
                kept
            };
        }
        input.pods = group.iter().map(|&p| pods[p].clone()).collect();
        let results = crate::scheduling::solve(&input, search.options);
        *solves += 1;
        if !results.pod_errors.is_empty() {
            return None;
        }
        claims.extend(results.new_node_claims);
    }
    Some(claims)
}

/// Tries the moves of the module documentation on the outcome's plan.
pub(super) fn improve(search: &Search<'_>, outcome: &mut PackingOutcome) {
    let cost_names: BTreeSet<&str> = search
        .cost_pools
        .iter()
        .map(|&i| search.input.node_pools[i].name.as_str())
        .collect();
    let (kept, movable): (Vec<NewNodeClaim>, Vec<NewNodeClaim>) = outcome
        .results
        .new_node_claims
        .iter()
        .cloned()
        .partition(|c| !cost_names.contains(c.node_pool.as_str()));
    if movable.is_empty() {
        return;
    }
    let by_key: BTreeMap<String, &Pod> = search.input.pods.iter().map(|p| (p.key(), p)).collect();
    let Some(pods): Option<Vec<Pod>> = movable
        .iter()
        .flat_map(|c| c.pods.iter())
        .map(|k| by_key.get(k).map(|p| (*p).clone()))
        .collect()
    else {
        return;
    };
    let current = price_of(&movable, search);
    let requests: Vec<ResourceList> = pods.iter().map(Pod::scheduling_requests).collect();
    let dims = Dims::new(requests.iter());
    let dense: Vec<Vec<i64>> = requests.iter().map(|r| dims.dense(r)).collect();
    let kinds = kinds(search, &dims);
    let plain: Vec<Kind> = kinds.iter().map(|(k, _, _)| k.clone()).collect();

    // Proposals: the whole batch, and the batch split by shape.
    let all: Vec<usize> = (0..pods.len()).collect();
    let mut partitions_tried: Vec<Vec<Vec<usize>>> = vec![vec![all]];
    partitions_tried.extend(partitions(&requests, &thresholds(search)));
    let mut best: Option<(f64, Vec<Vec<usize>>)> = None;
    for partition in partitions_tried {
        let mut groups = Vec::new();
        let mut estimate = 0.0;
        let mut ok = true;
        for part in partition {
            let members: Vec<(usize, Vec<i64>)> =
                part.iter().map(|&p| (p, dense[p].clone())).collect();
            match binpack::propose(&members, &plain, TRIES) {
                Some(p) => {
                    estimate += p.estimate;
                    groups.extend(p.groups);
                }
                None => {
                    ok = false;
                    break;
                }
            }
        }
        if ok && best.as_ref().is_none_or(|(e, _)| estimate < *e) {
            best = Some((estimate, groups));
        }
    }
    let Some((estimate, groups)) = best else {
        return;
    };
    if estimate >= current {
        return;
    }
    let mut solves = 0;
    let materialised = materialise(search, &pods, &groups, &dense, &kinds, &mut solves);
    outcome.candidate_solves += solves;
    let Some(repacked) = materialised else {
        return;
    };
    let mut claims = kept;
    claims.extend(repacked);
    if !within_limits(search, &claims) {
        return;
    }
    let results = Results {
        new_node_claims: claims,
        existing_nodes: outcome.results.existing_nodes.clone(),
        pod_errors: outcome.results.pod_errors.clone(),
        metrics: outcome.results.metrics.clone(),
    };
    let cost = plan_cost(&results, &search.options.label_policy);
    if cost < outcome.cost * (1.0 - 1e-9) && search.guard.accepts(&results) {
        outcome.cost = cost;
        outcome.results = results;
    }
}

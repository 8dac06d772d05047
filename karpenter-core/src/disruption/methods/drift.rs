//! Drift and static drift: replace drifted nodes, by simulation (dynamic NodePools) or one
//! replacement per node straight from the NodePool template (static NodePools).

use super::consolidation::{savings, summarize};
use super::{Command, DisruptionOptions, Method, PassOutcome, Reason, Sims, should_drift};
use crate::api::DisruptionReason;
use crate::disruption::budgets::{BudgetMapping, PoolCounts};
use crate::disruption::candidates::{Candidate, sort_for_drift};
use crate::disruption::simulate::condition_true;
use crate::labels::{self, LabelPolicy};
use crate::model::{InstanceType, Timestamp};
use crate::requirements::{Operator, Requirement};
use crate::scheduling::NewNodeClaim;
use crate::state::ClusterSnapshot;
use std::collections::BTreeMap;
use std::sync::Arc;

/// StaticDrift (upstream `disruption/staticdrift.go`): per static NodePool, within its budget and
/// its `nodes` limit and only once scale-down has caught up (running nodes ≤ replicas), each
/// drifted node gets one replacement built straight from the NodePool template (no scheduling
/// simulation: the cloud provider chooses among the pool's instance types).
pub(super) fn static_drift(
    snapshot: &ClusterSnapshot,
    counts: &PoolCounts,
    candidates: &[Candidate],
    now: Timestamp,
    out: &mut PassOutcome,
    options: &DisruptionOptions,
) {
    let mut by_pool: BTreeMap<&str, Vec<&Candidate>> = BTreeMap::new();
    for c in candidates {
        if c.owned_by_static_node_pool
            && condition_true(&c.node, crate::api::condition_types::DRIFTED) == Some(true)
        {
            by_pool.entry(c.node_pool.as_str()).or_default().push(c);
        }
    }
    out.eligible_nodes
        .insert(Method::StaticDrift, by_pool.values().map(Vec::len).sum());
    if by_pool.is_empty() {
        return;
    }
    let budgets =
        BudgetMapping::from_counts(counts, snapshot, DisruptionReason::Drifted, now).remaining();
    for (pool_name, cands) in by_pool {
        let Some(pool) = snapshot.node_pool(pool_name) else {
            continue;
        };
        let budget = budgets.get(pool_name).copied().unwrap_or(0);
        if budget == 0 {
            for c in &cands {
                out.block(options, c.name(), || {
                    crate::disruption::budgets::blocked_message(DisruptionReason::Drifted)
                });
            }
            continue;
        }
        let in_pool = snapshot
            .nodes
            .iter()
            .filter(|n| n.nodepool() == Some(pool_name));
        let (mut running, mut deleting) = (0usize, 0usize);
        for n in in_pool {
            if n.is_deleting() {
                deleting += 1;
            } else {
                running += 1;
            }
        }
        let replicas = pool.node_pool.spec.replicas.unwrap_or(0).max(0) as usize;
        if running > replicas {
            continue;
        }
        let limit = pool
            .node_pool
            .spec
            .limits
            .as_ref()
            .and_then(|l| l.get(crate::resources::names::NODES))
            .map_or(usize::MAX, |q| q.value().max(0) as usize);
        let want = budget.min(cands.len());
        let granted = want.min(limit.saturating_sub(running + deleting));
        for c in cands.into_iter().take(granted) {
            let replacement = static_replacement(pool, &options.scheduler.label_policy);
            let candidates = vec![c.clone()];
            let saving = savings(
                &candidates,
                std::slice::from_ref(&replacement),
                &options.scheduler.label_policy,
            );
            out.commands.push(Command {
                method: Method::StaticDrift,
                reason: Reason::Drifted,
                candidates,
                replacements: vec![replacement],
                savings_per_hour: saving,
                simulation: None,
            });
        }
    }
}

/// A NodeClaim straight from a NodePool's template: its requirements and labels, every
/// instance type of the pool compatible with them, cheapest first.
pub(super) fn static_replacement(
    pool: &crate::state::NodePoolState,
    policy: &LabelPolicy,
) -> NewNodeClaim {
    let input = crate::scheduling::NodePoolInput::from_nodepool(
        &pool.node_pool,
        pool.instance_types.clone(),
    );
    let mut requirements =
        crate::requirements::Requirements::from_node_selector_requirements(&input.requirements);
    let mut node_labels = input.labels.clone();
    node_labels.insert(labels::NODEPOOL.to_string(), input.name.clone());
    if let Some((k, v)) = &input.node_class_label {
        node_labels.insert(k.clone(), v.clone());
    }
    for (k, v) in &node_labels {
        requirements.add(Requirement::new(k, Operator::In, [v.as_str()]));
    }
    let mut its: Vec<(f64, usize, Arc<InstanceType>)> = input
        .instance_types
        .iter()
        .enumerate()
        .filter(|(_, it)| it.requirements().intersects(&requirements).is_ok())
        .filter_map(|(i, it)| {
            it.cheapest_offering(&requirements, policy)
                .map(|o| (o.price, i, it.clone()))
        })
        .collect();
    its.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    NewNodeClaim {
        node_pool: input.name.clone(),
        requirements,
        instance_types: its.into_iter().map(|x| x.2).collect(),
        pods: Vec::new(),
        requests: crate::resources::ResourceList::new(),
        labels: node_labels,
        taints: input.taints.clone(),
        startup_taints: input.startup_taints.clone(),
        min_values_relaxed: false,
        reservation_ids: Vec::new(),
    }
}

pub(super) fn drift(
    sims: &Sims<'_>,
    snapshot: &ClusterSnapshot,
    candidates: &[Candidate],
    now: Timestamp,
    out: &mut PassOutcome,
    options: &DisruptionOptions,
) {
    let mut cands: Vec<Candidate> = candidates
        .iter()
        .filter(|c| should_drift(c))
        .cloned()
        .collect();
    out.eligible_nodes.insert(Method::Drift, cands.len());
    if cands.is_empty() {
        return;
    }
    sort_for_drift(&mut cands);
    let budgets = sims.budgets(snapshot, DisruptionReason::Drifted, now);
    for c in cands {
        if budgets.get(&c.node_pool).copied().unwrap_or(0) == 0 {
            out.block(options, c.name(), || {
                crate::disruption::budgets::blocked_message(DisruptionReason::Drifted)
            });
            continue;
        }
        let sim = match sims.get().simulate(&[&c], false) {
            Ok(s) => s,
            Err(_) => continue,
        };
        if !sim.all_non_pending_scheduled() {
            out.block(options, c.name(), || {
                format!(
                    "not all pods would schedule, {}",
                    summarize(&sim.displaced_errors)
                )
            });
            continue;
        }
        let replacements = sim.results.new_node_claims.clone();
        let candidates = vec![c];
        let saving = savings(&candidates, &replacements, &options.scheduler.label_policy);
        out.commands.push(Command {
            method: Method::Drift,
            reason: Reason::Drifted,
            candidates,
            replacements,
            savings_per_hour: saving,
            simulation: Some(sim.results),
        });
        return;
    }
}

//! Playing commands forward: [`plan`](super::plan) applies each command to a working copy of the
//! snapshot (candidates removed, replacements and moved pods added) until nothing more is done.

use super::consolidation::savings;
use super::{Command, DisruptionOptions, Method, Plan, Reason, run_pass};
use crate::api::{
    self, Condition, ConditionStatus, NodeClaim, NodeClaimSpec, NodeClaimStatus, ObjectMeta,
};
use crate::disruption::candidates::Candidate;
use crate::disruption::cost::is_expired;
use crate::labels::{self, LabelPolicy};
use crate::model::{ClusterNode, Pod, Timestamp};
use crate::scheduling::NewNodeClaim;
use crate::state::{ClusterSnapshot, StateNode};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// Every command the controller would issue from `snapshot` at `now`: expired NodeClaims first,
/// then passes until no method acts (each command applied to a working copy of the snapshot).
pub fn plan(snapshot: &ClusterSnapshot, now: Timestamp, options: &DisruptionOptions) -> Plan {
    let mut plan = Plan::default();
    let mut working = snapshot.clone();
    let mut counter = 0usize;

    // Expiration (upstream `nodeclaim/expiration`): forceful, outside budgets and candidacy rules.
    let expired: Vec<Arc<StateNode>> = working
        .nodes
        .iter()
        .filter(|n| n.node_claim.as_ref().is_some_and(|c| is_expired(c, now)))
        .cloned()
        .collect();
    if !expired.is_empty() {
        let candidates: Vec<Candidate> = expired
            .iter()
            .map(|n| crate::disruption::candidates::describe_candidate(&working, n))
            .collect();
        let cmd = Command {
            method: Method::Expiration,
            reason: Reason::Expired,
            savings_per_hour: savings(&candidates, &[], &options.scheduler.label_policy),
            candidates,
            replacements: Vec::new(),
            simulation: None,
        };
        apply(&mut working, &cmd, now, &mut counter, options);
        plan.commands.push(cmd);
    }

    let limit = 2 * working.nodes.len() + 10;
    for _ in 0..limit {
        let pass = run_pass(&working, now, options, &|_| false);
        for (node, reason) in pass.blocked {
            plan.blocked.entry(node).or_insert(reason);
        }
        if pass.commands.is_empty() {
            break;
        }
        for cmd in pass.commands {
            for c in &cmd.candidates {
                plan.blocked.remove(c.name());
            }
            apply(&mut working, &cmd, now, &mut counter, options);
            plan.commands.push(cmd);
        }
    }
    let disrupted: BTreeSet<String> = plan
        .commands
        .iter()
        .flat_map(|c| c.candidates.iter().map(|c| c.name().to_string()))
        .collect();
    plan.blocked.retain(|n, _| !disrupted.contains(n));
    plan
}

/// Applies a command to the working snapshot: candidates leave; replacements join as
/// initialized nodes launched at `now` on their cheapest option; displaced pods move where the
/// simulation put them (or become pending when there was no simulation).
pub(super) fn apply(
    snapshot: &mut ClusterSnapshot,
    cmd: &Command,
    now: Timestamp,
    counter: &mut usize,
    options: &DisruptionOptions,
) {
    let policy = &options.scheduler.label_policy;
    let gone: BTreeSet<&str> = cmd.candidates.iter().map(|c| c.name()).collect();
    let displaced: BTreeMap<String, Pod> = cmd
        .candidates
        .iter()
        .flat_map(|c| c.reschedulable_pods())
        .map(|p| (p.key(), p.clone()))
        .collect();
    snapshot.nodes.retain(|n| !gone.contains(n.name()));
    let sim = cmd.simulation.as_ref();
    let mut placed = BTreeSet::new();
    for (i, r) in cmd.replacements.iter().enumerate() {
        *counter += 1;
        let name = format!("{}-replacement-{:04}", r.node_pool, *counter);
        let class = snapshot.node_pool(&r.node_pool).map_or_else(
            || api::NodeClassReference::new("", "", ""),
            |p| p.node_pool.spec.template.spec.node_class_ref.clone(),
        );
        let mut node = new_state_node(&name, r, class, now, policy);
        let sim_claim = sim.and_then(|s| s.new_node_claims.get(i));
        for key in sim_claim.map(|c| c.pods.as_slice()).unwrap_or_default() {
            if let Some(p) = displaced.get(key) {
                let mut p = p.clone();
                p.node_name = Some(name.clone());
                node.pods.push(p);
                placed.insert(key.clone());
            }
        }
        snapshot.nodes.push(Arc::new(node));
    }
    let Some(sim) = sim else {
        snapshot.pending_pods.extend(displaced.into_values());
        return;
    };
    for dest in &sim.existing_nodes {
        let Some(target) = snapshot
            .nodes
            .iter_mut()
            .find(|n| crate::disruption::simulate::cluster_node(n).hostname() == dest.name)
        else {
            continue;
        };
        let target = Arc::make_mut(target);
        for key in &dest.pods {
            if let Some(p) = displaced.get(key) {
                let mut p = p.clone();
                p.node_name = Some(target.name().to_string());
                target.pods.push(p);
                placed.insert(key.clone());
            }
        }
    }
    for (key, p) in displaced {
        if !placed.contains(&key) {
            snapshot.pending_pods.push(p);
        }
    }
}

pub(super) fn new_state_node(
    name: &str,
    r: &NewNodeClaim,
    class: api::NodeClassReference,
    now: Timestamp,
    policy: &LabelPolicy,
) -> StateNode {
    let it = r.instance_types.first();
    let offering = it.and_then(|it| it.cheapest_offering(&r.requirements, policy));
    let mut node_labels = r.labels.clone();
    node_labels.insert(labels::NODEPOOL.to_string(), r.node_pool.clone());
    node_labels.insert(labels::HOSTNAME.to_string(), name.to_string());
    node_labels.insert(labels::INITIALIZED.to_string(), "true".to_string());
    node_labels.insert(labels::REGISTERED.to_string(), "true".to_string());
    if let Some(it) = it {
        node_labels.insert(labels::INSTANCE_TYPE.to_string(), it.name().to_string());
        for req in it.requirements().iter() {
            if let Some(v) = req.single_value() {
                node_labels
                    .entry(req.key().to_string())
                    .or_insert_with(|| v.to_string());
            }
        }
    }
    if let Some(o) = offering {
        node_labels.insert(labels::ZONE.to_string(), o.zone().to_string());
        node_labels.insert(
            labels::CAPACITY_TYPE.to_string(),
            o.capacity_type().to_string(),
        );
    }
    let mut node = ClusterNode::new(name);
    node.labels = node_labels.clone();
    node.taints = r.taints.clone();
    node.managed = true;
    node.initialized = true;
    node.creation_timestamp = now;
    if let Some(it) = it {
        node.capacity = it.capacity().clone();
        node.allocatable = it.allocatable().clone();
    }
    let stamp = now.to_string();
    let claim = NodeClaim {
        api_version: api::API_VERSION.to_string(),
        kind: "NodeClaim".to_string(),
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            labels: node_labels,
            creation_timestamp: Some(stamp.clone()),
            ..ObjectMeta::default()
        },
        spec: NodeClaimSpec {
            taints: r.taints.clone(),
            startup_taints: r.startup_taints.clone(),
            requirements: Some(
                r.node_claim_requirements(policy)
                    .to_node_selector_requirements(),
            ),
            ..NodeClaimSpec::new(class)
        },
        status: NodeClaimStatus {
            node_name: Some(name.to_string()),
            provider_id: Some(format!("planned://{name}")),
            capacity: node.capacity.clone(),
            allocatable: node.allocatable.clone(),
            conditions: vec![Condition {
                type_: crate::api::condition_types::INITIALIZED.to_string(),
                status: ConditionStatus::True,
                reason: None,
                message: None,
                last_transition_time: Some(stamp),
                observed_generation: None,
            }],
            ..NodeClaimStatus::default()
        },
    };
    StateNode {
        node: Some(node),
        node_claim: Some(claim),
        pods: Vec::new(),
        marked_for_deletion: false,
        nominated_until: None,
        ready: true,
        volume_limits: Default::default(),
    }
}

//! Provisioning: the batcher's windows, the solve, NodeClaims created from it, pods nominated
//! (spec `scheduler.md` 3.0).

use std::collections::BTreeSet;
use std::sync::Arc;

use crate::api::{NodeClaim, NodePool};
use crate::disruption::candidates::is_reschedulable;
use crate::disruption::facts::{self, NodeFacts};
use crate::disruption::simulate::{cluster_node, cluster_node_as, eligible_node_pools};
use crate::labels::LabelPolicy;
use crate::lifecycle::{self, Event, Metric, ObjectKind, TERMINATION_FINALIZER, add, format_time};
use crate::model::Timestamp;
use crate::resources::ResourceList;
use crate::scheduling::packing::PackingPolicy;
use crate::scheduling::{self, ExistingNodeInput, ExistingNodeRef, NewNodeClaim, SchedulingInput};
use crate::state::StateNode;

use super::{Action, Operator};

/// The provisioning batcher's window.
#[derive(Debug, Clone, Default)]
pub(super) struct Batcher {
    /// When the open window started.
    opened: Option<Timestamp>,
    /// The last new trigger.
    last: Option<Timestamp>,
    /// Pods seen in this window.
    seen: BTreeSet<String>,
}

/// `karpenter_nodeclaims_created_total{reason, nodepool, min_values_relaxed}`.
pub const NODECLAIMS_CREATED_TOTAL: &str = "karpenter_nodeclaims_created_total";
/// Event reason of a pod the solve could not place.
pub const FAILED_SCHEDULING: &str = "FailedScheduling";

impl Operator {
    /// A pending pod was seen: opens the batch window or extends it (a pod already seen in this
    /// window does not extend it).
    pub(super) fn trigger(&mut self, key: &str, now: Timestamp) {
        if self.batcher.opened.is_none() {
            self.batcher.opened = Some(now);
        }
        if self.batcher.seen.insert(key.to_string()) {
            self.batcher.last = Some(now);
        }
    }

    /// Triggers provisioning for every pending pod.
    pub(super) fn trigger_if_pending(&mut self, now: Timestamp) {
        let keys: Vec<String> = self.view.pending_pod_keys().cloned().collect();
        for k in keys {
            self.trigger(&k, now);
        }
    }

    /// When the open batch window closes: at `idle` after the last new pod, at most `max` after
    /// it opened.
    pub(super) fn batch_due(&self) -> Option<Timestamp> {
        let opened = self.batcher.opened?;
        let last = self.batcher.last.unwrap_or(opened);
        Some(
            add(last, self.config.batch_idle_duration)
                .min(add(opened, self.config.batch_max_duration)),
        )
    }

    pub(super) fn run_provisioning(&mut self, now: Timestamp, out: &mut Vec<Action>) {
        if self.retry_at.is_some_and(|t| t <= now) {
            self.retry_at = None;
            self.trigger_if_pending(now);
        }
        let Some(due) = self.batch_due() else {
            return;
        };
        if due > now {
            return;
        }
        if !self.view.claims_launched() {
            // Upstream waits for cluster state to be synced (every NodeClaim launched) before it
            // schedules; a NodeClaim update wakes us. Keep the window, without a time.
            self.batcher.last = Some(now);
            self.batcher.opened = Some(now);
            self.retry_at = Some(add(now, self.config.batch_idle_duration));
            return;
        }
        self.batcher = Batcher::default();
        self.provisioning_rounds += 1;
        self.provision(now, out);
    }

    /// One provisioning round: solve the pending pods (and those of deleting nodes) against the
    /// cluster, create the new NodeClaims, nominate.
    fn provision(&mut self, now: Timestamp, out: &mut Vec<Action>) {
        let snapshot = self.view.snapshot(
            &self.marked,
            &self.nominated,
            &self.unavailable.keys().cloned().collect(),
        );
        let mut pods = snapshot.pending_pods.clone();
        // The nodes not being deleted, with their facts; the pods of the others are placed again.
        let mut live_nodes: Vec<(&Arc<StateNode>, Arc<NodeFacts>)> = Vec::new();
        for sn in &snapshot.nodes {
            let node_facts = facts::of(&snapshot, sn);
            if node_facts.deleting {
                pods.extend(sn.pods.iter().filter(|p| is_reschedulable(p)).cloned());
            } else {
                live_nodes.push((sn, node_facts));
            }
        }
        if pods.is_empty() {
            return;
        }
        let mut input = SchedulingInput {
            node_pools: eligible_node_pools(&snapshot),
            existing_nodes: Vec::new(),
            daemonsets: snapshot.daemonsets.clone(),
            pods,
            namespace_labels: snapshot.namespace_labels.clone(),
            volumes: snapshot.volumes.clone(),
            consolidation: None,
        };
        let options = &self.config.scheduler;
        let results =
            if scheduling::packing::pool_policies(&input, options).contains(&PackingPolicy::Cost) {
                // The cost-aware search re-solves the input: it owns its nodes.
                input.existing_nodes = live_nodes
                    .iter()
                    .map(|(sn, _)| ExistingNodeInput {
                        node: cluster_node(sn),
                        pods: sn.pods.clone(),
                        volume_limits: sn.volume_limits.clone(),
                    })
                    .collect();
                scheduling::packing::solve_with_policy(&input, options)
            } else {
                // Without a NodePool under `cost`, the policy's solve is the faithful one: the nodes
                // and their pods are borrowed from the snapshot (same nodes, same order).
                let nodes: Vec<_> = live_nodes
                    .iter()
                    .map(|(sn, f)| (cluster_node_as(sn, f.node_reads_as_is), *sn))
                    .collect();
                let refs: Vec<ExistingNodeRef<'_>> = nodes
                    .iter()
                    .map(|(node, sn)| ExistingNodeRef {
                        node: node.as_ref(),
                        pods: &sn.pods,
                        volume_limits: &sn.volume_limits,
                    })
                    .collect();
                let keys: Vec<scheduling::ExistingKey> = nodes
                    .iter()
                    .map(|(_, sn)| Arc::clone(sn) as scheduling::ExistingKey)
                    .collect();
                let memo = Some((&mut self.prepared, keys.as_slice()));
                scheduling::solve_with_existing_memo(&input, &refs, options, memo)
            };
        let until = add(now, self.config.nomination_ttl);
        for node in &results.existing_nodes {
            self.nominated.insert(node.name.clone(), until);
            for pod in &node.pods {
                out.push(Action::NominatePod {
                    pod: pod.clone(),
                    target: node.name.clone(),
                });
            }
        }
        for r in &results.new_node_claims {
            let Some(pool) = self.view.node_pools.get(&r.node_pool).cloned() else {
                continue;
            };
            if let Some(exceeded) = self
                .pool_usage(&r.node_pool)
                .exceeds(&pool.spec.limits.clone().unwrap_or_default())
            {
                out.push(Action::RecordEvent(Event::warning(
                    ObjectKind::NodePool,
                    r.node_pool.clone(),
                    "NodePoolLimitsExceeded",
                    format!("not creating a nodeclaim: {exceeded}"),
                )));
                continue;
            }
            let name = self.claim_name(&r.node_pool);
            let claim = to_node_claim(r, &pool, &name, &self.config.scheduler.label_policy, now);
            out.push(Action::CreateNodeClaim(Box::new(claim.clone())));
            out.push(Action::Metric(Metric::add(
                NODECLAIMS_CREATED_TOTAL,
                1.0,
                [
                    ("reason", "provisioning".to_string()),
                    ("nodepool", r.node_pool.clone()),
                    ("min_values_relaxed", r.min_values_relaxed.to_string()),
                ],
            )));
            for pod in &r.pods {
                out.push(Action::NominatePod {
                    pod: pod.clone(),
                    target: name.clone(),
                });
            }
            self.view.put_claim(claim);
        }
        for (pod, error) in &results.pod_errors {
            out.push(Action::RecordEvent(Event::warning(
                ObjectKind::Pod,
                pod.clone(),
                FAILED_SCHEDULING,
                format!("Failed to schedule pod, {error}"),
            )));
        }
        // Upstream's pod controller requeues a provisionable pod every 10 s for as long as it
        // stays pending, not only when the solve failed it: a pod placed on an existing or
        // in-flight node may still find it full when it binds (another pod took the room), and
        // needs another round.
        if !snapshot.pending_pods.is_empty() {
            self.retry_at = Some(add(now, self.config.unschedulable_retry));
        }
    }

    /// What a NodePool's NodeClaims count against its limits, as upstream counts a NodePool's
    /// usage (its `status.resources`, which the provisioner's limit check reads): the capacity
    /// of every NodeClaim of the pool (its requests while it has not launched) plus `nodes: 1`
    /// each, leaving out the NodeClaims being deleted (or whose Node is). A deleted node's
    /// instance still runs while it drains, so the pool's running capacity can exceed its
    /// limits for that time; the limits bound what the pool keeps. Unlike upstream, the
    /// candidates of a disruption command still waiting for its replacements keep counting
    /// until they are deleted: a failed command un-marks them, and their share must still be
    /// there (see [`crate::disruption::simulate::held_by_commands`]).
    pub(super) fn pool_usage(&self, pool: &str) -> ResourceList {
        let mut total = ResourceList::new();
        let deleting_nodes: std::collections::BTreeSet<&str> = self
            .view
            .nodes()
            .values()
            .filter(|n| n.deletion_timestamp.is_some())
            .map(|n| n.provider_id.as_str())
            .collect();
        for c in self.view.claims_of_pool(pool) {
            if self.marked_for_deletion(c, &deleting_nodes) {
                continue;
            }
            if c.status.capacity.is_empty() {
                total.add_assign(&c.spec.resources.requests);
            } else {
                total.add_assign(&c.status.capacity);
            }
            total.add_assign(&ResourceList::from_iter([(
                crate::resources::names::NODES,
                crate::resources::Quantity::from_milli(1000),
            )]));
        }
        total
    }

    /// Whether a NodeClaim is being deleted, or its Node (`deleting_nodes`: the provider ids
    /// of the Nodes being deleted). Candidates of a disruption command in flight are not: a
    /// failed command un-marks them.
    fn marked_for_deletion(
        &self,
        claim: &NodeClaim,
        deleting_nodes: &std::collections::BTreeSet<&str>,
    ) -> bool {
        if lifecycle::claim_is_deleting(claim) {
            return true;
        }
        claim
            .status
            .provider_id
            .as_deref()
            .filter(|p| !p.is_empty())
            .is_some_and(|pid| deleting_nodes.contains(pid))
    }

    /// Upstream's pod latency metrics for a pod update (`pod` is the new state, the view still
    /// holds the old one): a pod seen `Pending` is followed until it is bound and until it is
    /// ready, and then `karpenter_pods_bound_duration_seconds` and
    /// `karpenter_pods_startup_duration_seconds` observe the seconds from its creation to the
    /// condition's transition. A pod that turns terminal before it was ready is dropped.
    pub(super) fn pod_latency(
        &mut self,
        key: &str,
        pod: &crate::model::Pod,
        out: &mut Vec<Action>,
    ) {
        use crate::lifecycle::metric_names::{
            PODS_BOUND_DURATION_SECONDS, PODS_STARTUP_DURATION_SECONDS,
        };
        use crate::model::PodPhase;
        if pod.phase == PodPhase::Pending {
            self.unstarted.insert(key.to_string());
            self.unbound.insert(key.to_string());
            return;
        }
        let seconds = |at: Timestamp| {
            at.duration_since(pod.creation_timestamp)
                .as_secs_f64()
                .max(0.0)
        };
        if self.unstarted.contains(key) {
            if let Some(ready) = pod.ready_at {
                out.push(Action::Metric(Metric::observe(
                    PODS_STARTUP_DURATION_SECONDS,
                    seconds(ready),
                    [],
                )));
                self.unstarted.remove(key);
            } else if pod.is_terminal() {
                self.unstarted.remove(key);
            }
        }
        if self.unbound.contains(key) {
            if let Some(bound) = pod.scheduled_at {
                out.push(Action::Metric(Metric::observe(
                    PODS_BOUND_DURATION_SECONDS,
                    seconds(bound),
                    [],
                )));
                self.unbound.remove(key);
            } else if pod.is_terminal() {
                self.unbound.remove(key);
            }
        }
    }

    /// Records a pod event (bound, terminal, terminating) on the NodeClaim of `node` for the
    /// `Consolidatable` condition's `lastPodEventTime`.
    pub(super) fn pod_event(&mut self, pod_key: &str, node: &str, now: Timestamp) {
        let Some(pod) = self.view.pods().get(pod_key).cloned() else {
            return;
        };
        self.pod_event_deleted(node, &pod, now);
    }

    pub(super) fn pod_event_deleted(
        &mut self,
        node: &str,
        pod: &crate::model::Pod,
        now: Timestamp,
    ) {
        let Some(n) = self.view.nodes().get(node) else {
            return;
        };
        let Some(claim) = self.view.claim_with_provider_id(&n.provider_id) else {
            return;
        };
        if let Some(next) = lifecycle::consolidatable::record_pod_event(claim, pod, now) {
            let name = claim.name().to_string();
            self.pod_events.insert(
                name.clone(),
                next.status.last_pod_event_time.unwrap_or_default(),
            );
            self.claims.mark(&name);
        }
    }
}

/// The NodeClaim the operator creates for a planned claim: [`crate::launch::to_node_claim`]
/// (upstream's ToNodeClaim) with a concrete name instead of `generateName`, the termination
/// finalizer and the creation time.
pub(super) fn to_node_claim(
    planned: &NewNodeClaim,
    pool: &NodePool,
    name: &str,
    policy: &LabelPolicy,
    now: Timestamp,
) -> NodeClaim {
    let mut claim = crate::launch::to_node_claim(planned, pool, policy);
    claim.metadata.name = Some(name.to_string());
    claim.metadata.extra.remove(crate::launch::GENERATE_NAME);
    for (k, v) in &pool.spec.template.metadata.labels {
        claim
            .metadata
            .labels
            .entry(k.clone())
            .or_insert_with(|| v.clone());
    }
    claim.metadata.finalizers = vec![TERMINATION_FINALIZER.to_string()];
    claim.metadata.creation_timestamp = Some(format_time(now));
    claim
}

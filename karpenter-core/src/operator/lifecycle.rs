//! NodeClaim lifecycle (launch, registration, initialization, liveness; `Consolidatable`,
//! `Drifted`; expiration), NodeClaim finalization and Node termination (drain through
//! evictions), node repair: the operator's calls into [`crate::lifecycle`].

use jiff::SignedDuration;

use crate::api::{ConditionStatus, NodeClaim};
use crate::cloud::{CloudProviderError, UnavailableOffering};
use crate::labels;
use crate::lifecycle::conditions::{self, ConditionSet, DRAINED, LAUNCHED, VOLUMES_DETACHED};
use crate::lifecycle::nodeclaim::{CreateOutcome, LifecycleInputs, reconcile_lifecycle};
use crate::lifecycle::termination::{
    DRAIN_REQUEUE, DRAINING_REASON, DrainedDecision, EvictionResponse, FinalizeStep,
    TERMINATION_GRACE_PERIOD_ELAPSED, VolumeDecision, drain_plan, drained_decision,
    eviction_decision, finalize_claim, pods_drained_reason, terminating_node_update,
    termination_timestamp, volume_detachment_decision,
};
use crate::lifecycle::{
    self, ExpirationDecision, Metric, NodeUpdate, TERMINATION_FINALIZER,
    TERMINATION_TIMESTAMP_ANNOTATION, add, claim_is_deleting, expiration_decision,
};
use crate::model::Timestamp;

use super::{Action, CallId, CloudCall, CloudResponse, Eviction, Operator, Pending};

/// How long a `create` result is remembered for a NodeClaim whose status write has not been
/// seen yet (upstream caches launch results per NodeClaim for an hour).
pub const LAUNCH_CACHE_TTL: SignedDuration = SignedDuration::from_hours(1);

/// `karpenter_nodes_terminated_total{nodepool}`.
pub const NODES_TERMINATED_TOTAL: &str = "karpenter_nodes_terminated_total";

impl Operator {
    /// Whether `claim` is Karpenter's: it belongs to a NodePool, or its `nodeClassRef` names a
    /// node class kind of the provider ([`OperatorConfig::node_classes`](super::OperatorConfig::node_classes)).
    pub(super) fn is_managed(&self, claim: &NodeClaim) -> bool {
        claim.metadata.labels.contains_key(labels::NODEPOOL)
            || self
                .config
                .node_classes
                .iter()
                .any(|k| k.matches(&claim.spec.node_class_ref))
    }

    /// One reconcile of a NodeClaim: finalization when it is being deleted, else expiration,
    /// the lifecycle steps, and the disruption conditions.
    pub(super) fn reconcile_claim(&mut self, name: &str, now: Timestamp, out: &mut Vec<Action>) {
        let Some(claim) = self.claim_for_write(name) else {
            return;
        };
        // A NodeClaim this operator created and the API has not confirmed yet: wait for it.
        if claim.metadata.resource_version.is_none() {
            return;
        }
        if claim_is_deleting(&claim) {
            self.finalize(&claim, now, out);
            return;
        }
        // A standalone NodeClaim (no NodePool) of the provider's node class is managed too; it
        // has no registration health nor disruption conditions, which are the NodePool's.
        let pool_name = claim.metadata.labels.get(labels::NODEPOOL).cloned();
        if !self.is_managed(&claim) {
            return;
        }
        if let Some((_, CreateOutcome::Created(_))) = self.launch_cache.get(name)
            && conditions::is_true(&claim.status.conditions, LAUNCHED)
        {
            self.launch_cache.remove(name);
        }
        self.launch_cache
            .retain(|_, (at, _)| add(*at, LAUNCH_CACHE_TTL) > now);
        match expiration_decision(&claim, now) {
            ExpirationDecision::Expire { metrics } => {
                out.push(Action::DeleteNodeClaim {
                    name: name.to_string(),
                });
                out.extend(metrics.into_iter().map(Action::Metric));
                return;
            }
            ExpirationDecision::RequeueAt(t) => self.claims.requeue(name, t),
            ExpirationDecision::Skip => {}
        }
        let create = self.launch_cache.get(name).map(|(_, o)| o.clone());
        if lifecycle::nodeclaim::needs_launch(&claim)
            && create.is_none()
            && !self.launching.contains(name)
        {
            let mut launching = claim.clone();
            lifecycle::nodeclaim::ensure_finalizer(&mut launching);
            self.launching.insert(name.to_string());
            self.call(
                Pending::Launch(name.to_string()),
                CloudCall::Create(Box::new(launching)),
                out,
            );
        }
        let step = {
            // The claim's Nodes, borrowed from the view when there is one (the usual case).
            let refs: Vec<&crate::lifecycle::Node> = self.view.node_refs_of_claim(&claim).collect();
            let copies: Vec<crate::lifecycle::Node>;
            let nodes: &[crate::lifecycle::Node] = match refs.as_slice() {
                [] => &[],
                [one] => std::slice::from_ref(*one),
                many => {
                    copies = many.iter().map(|n| (*n).clone()).collect();
                    &copies
                }
            };
            reconcile_lifecycle(
                &claim,
                LifecycleInputs {
                    create: create.as_ref(),
                    nodes,
                    hooks: &[],
                    dra_published: None,
                },
                now,
            )
        };
        if !matches!(create, Some(CreateOutcome::Created(_)) | None) {
            // A failed launch is retried with a new `create`.
            self.launch_cache.remove(name);
        }
        out.extend(step.events.into_iter().map(Action::RecordEvent));
        out.extend(step.metrics.into_iter().map(Action::Metric));
        if let (Some(health), Some(pool_name)) = (&step.health, &pool_name) {
            let condition = self
                .registration_health
                .entry(pool_name.clone())
                .or_default()
                .apply(health);
            if let Some(c) = condition {
                self.health_conditions.insert(pool_name.clone(), c);
            }
            self.pools.mark(pool_name);
        }
        if step.delete.is_some() {
            out.push(Action::DeleteNodeClaim {
                name: name.to_string(),
            });
            return;
        }
        let mut next = step.claim;
        if let Some(t) = self.pod_events.remove(name)
            && next.status.last_pod_event_time.as_deref() < Some(t.as_str())
        {
            next.status.last_pod_event_time = Some(t);
        }
        if let Some(pool_name) = &pool_name {
            self.disruption_conditions(&mut next, pool_name, now, out);
        }
        if next != claim {
            self.write_claim(next);
        }
        if let Some(update) = &step.node_update {
            self.patch_node(update);
        }
        if let Some(after) = step.requeue_after {
            self.claims.requeue(name, add(now, after));
        }
        if step.error.is_some() {
            self.claims.fail(name, now);
        } else {
            self.claims.succeed(name);
        }
    }

    /// The `Consolidatable` and `Drifted` conditions (upstream `nodeclaim.disruption`), and the
    /// periodic `is_drifted` call.
    fn disruption_conditions(
        &mut self,
        claim: &mut NodeClaim,
        pool_name: &str,
        now: Timestamp,
        out: &mut Vec<Action>,
    ) {
        let name = claim.name().to_string();
        // Everything read from the view first, so the pool and its instance types are borrowed.
        let Some(pool) = self.view.node_pools.get(pool_name) else {
            return;
        };
        let requeue_at = lifecycle::consolidatable::apply_consolidatable(pool, claim, now);
        let check = conditions::is_true(&claim.status.conditions, LAUNCHED).then(|| {
            let types = self
                .view
                .instance_types
                .get(pool_name)
                .map_or(&[][..], Vec::as_slice);
            lifecycle::drift::drift_reason(
                claim,
                pool,
                types,
                self.cloud_drift.get(&name).and_then(Option::as_deref),
                now,
                self.instance_type_checked.get(&name).copied(),
                &self.config.drift,
            )
        });
        if let Some(t) = requeue_at {
            self.claims.requeue(&name, t);
        }
        let Some(check) = check else {
            return;
        };
        if check.instance_type_check_passed {
            self.instance_type_checked.insert(name.clone(), now);
        }
        lifecycle::drift::apply_drift_condition(claim, &check, now);
        let due = self
            .drift_checked
            .get(&name)
            .is_none_or(|t| add(*t, self.config.drift_check_period) <= now);
        if due {
            self.drift_checked.insert(name.clone(), now);
            self.call(
                Pending::IsDrifted(name.clone()),
                CloudCall::IsDrifted(Box::new(claim.clone())),
                out,
            );
        }
        self.claims
            .requeue(&name, add(now, self.config.drift_check_period));
    }

    /// The finalizer of a deleting NodeClaim (spec 6.5).
    fn finalize(&mut self, claim: &NodeClaim, now: Timestamp, out: &mut Vec<Action>) {
        let name = claim.name().to_string();
        let nodes = self.view.nodes_of_claim(claim);
        let gone = self.instance_gone.contains(&name);
        match finalize_claim(claim, &nodes, gone, now) {
            FinalizeStep::Done | FinalizeStep::AwaitNodes { .. } => {}
            FinalizeStep::WriteTerminationTimestamp { value, event } => {
                let mut next = claim.clone();
                next.metadata
                    .annotations
                    .insert(TERMINATION_TIMESTAMP_ANNOTATION.to_string(), value);
                self.write_claim(next);
                out.push(Action::RecordEvent(event));
            }
            FinalizeStep::DeleteNodes { node_names } => {
                for n in node_names {
                    out.push(Action::DeleteNode { name: n });
                }
            }
            FinalizeStep::DeleteInstance {
                claim: next,
                requeue_after,
            } => {
                if *next != *claim {
                    self.write_claim(*next);
                }
                self.delete_instance(claim, out);
                self.claims.requeue(&name, add(now, requeue_after));
            }
            FinalizeStep::RemoveFinalizer { metrics } => {
                let mut next = claim.clone();
                next.metadata
                    .finalizers
                    .retain(|f| f != TERMINATION_FINALIZER);
                self.write_claim(next);
                out.extend(metrics.into_iter().map(Action::Metric));
            }
        }
    }

    /// Calls `delete` for the NodeClaim's instance unless a call is in flight.
    fn delete_instance(&mut self, claim: &NodeClaim, out: &mut Vec<Action>) {
        let name = claim.name().to_string();
        if self.deleting_instance.insert(name.clone()) {
            self.call(
                Pending::DeleteInstance(name),
                CloudCall::Delete(Box::new(claim.clone())),
                out,
            );
        }
    }

    /// One reconcile of a Node: termination when it is being deleted with our finalizer,
    /// repair (behind its flag) otherwise.
    pub(super) fn reconcile_node(&mut self, name: &str, now: Timestamp, out: &mut Vec<Action>) {
        let Some(node) = self.node_for_write(name) else {
            return;
        };
        if node.is_deleting() {
            if node.finalizers.iter().any(|f| f == TERMINATION_FINALIZER) {
                self.terminate_node(&node, now, out);
            }
            return;
        }
        if self.config.node_repair {
            self.repair_node(&node, now, out);
        }
    }

    /// Node termination (spec 6.6).
    fn terminate_node(&mut self, node: &lifecycle::Node, now: Timestamp, out: &mut Vec<Action>) {
        let name = node.name.clone();
        let claim = self
            .view
            .claim_with_provider_id(&node.provider_id)
            .and_then(|c| self.claim_for_write(c.name()));
        if let Some(c) = &claim
            && !claim_is_deleting(c)
        {
            out.push(Action::DeleteNodeClaim {
                name: c.name().to_string(),
            });
        }
        let remove_finalizer = |this: &mut Operator, out: &mut Vec<Action>| {
            let mut finalizers = node.finalizers.clone();
            finalizers.retain(|f| f != TERMINATION_FINALIZER);
            this.patch_node(&NodeUpdate {
                node_name: node.name.clone(),
                finalizers: Some(finalizers),
                ..NodeUpdate::default()
            });
            out.push(Action::Metric(Metric::add(
                NODES_TERMINATED_TOTAL,
                1.0,
                [(
                    "nodepool",
                    node.labels
                        .get(labels::NODEPOOL)
                        .cloned()
                        .unwrap_or_default(),
                )],
            )));
        };
        if !node.is_ready() {
            if self.node_instance_gone.contains(&name) {
                remove_finalizer(self, out);
                return;
            }
            if !self.node_instance_checked.contains(&name) {
                if self.node_instance_checking.insert(name.clone()) {
                    self.call(
                        Pending::NodeInstance(name.clone()),
                        CloudCall::Get(node.provider_id.clone()),
                        out,
                    );
                }
                return;
            }
        }
        let deadline = claim.as_ref().and_then(termination_timestamp);
        if let Some(update) = terminating_node_update(node) {
            self.patch_node(&update);
        }
        let pods = self.view.pods_on(&name);
        let plan = drain_plan(&name, &pods, deadline, now);
        for (pod, grace) in &plan.force_delete {
            out.push(Action::DeletePod {
                pod: pod.clone(),
                grace_period_seconds: *grace,
            });
        }
        for pod in &plan.evict {
            self.evictions
                .entry(pod.clone())
                .or_insert_with(|| Eviction {
                    next_at: Some(now),
                    ..Eviction::default()
                });
        }
        let nodepool = node
            .labels
            .get(labels::NODEPOOL)
            .cloned()
            .unwrap_or_default();
        let drained = claim
            .as_ref()
            .and_then(|c| crate::api::find_condition(&c.status.conditions, DRAINED).cloned());
        let mut claim_next = claim.clone();
        let decision = drained_decision(&name, &plan, drained.as_ref(), &nodepool, now);
        let done = match decision {
            DrainedDecision::Draining {
                event,
                requeue_after,
            } => {
                out.push(Action::RecordEvent(event));
                self.nodes.requeue(&name, add(now, requeue_after));
                if let Some(c) = claim_next.as_mut()
                    && drained.is_none()
                {
                    set_condition(c, DRAINED, ConditionStatus::Unknown, DRAINING_REASON, now);
                }
                false
            }
            DrainedDecision::WaitMinDrainTime { requeue_after } => {
                self.nodes.requeue(&name, add(now, requeue_after));
                if let Some(c) = claim_next.as_mut()
                    && drained.is_none()
                {
                    set_condition(c, DRAINED, ConditionStatus::Unknown, DRAINING_REASON, now);
                }
                false
            }
            DrainedDecision::Drained { metrics } => {
                out.extend(metrics.into_iter().map(Action::Metric));
                if let Some(c) = claim_next.as_mut() {
                    set_condition(c, DRAINED, ConditionStatus::True, DRAINED, now);
                }
                // Attachments of volumes whose pods drain does not wait for are not told apart:
                // every attachment on the node is waited for.
                let pending = self.view.volume_attachments_on(&name).len();
                let (status, reason, done) =
                    match volume_detachment_decision(pending, deadline, now) {
                        VolumeDecision::Detached => (ConditionStatus::True, VOLUMES_DETACHED, true),
                        VolumeDecision::Waiting => {
                            self.nodes.requeue(&name, add(now, DRAIN_REQUEUE));
                            (ConditionStatus::Unknown, "AwaitingVolumeDetachment", false)
                        }
                        VolumeDecision::GracePeriodElapsed => (
                            ConditionStatus::False,
                            TERMINATION_GRACE_PERIOD_ELAPSED,
                            true,
                        ),
                    };
                if let Some(c) = claim_next.as_mut() {
                    set_condition(c, VOLUMES_DETACHED, status, reason, now);
                }
                done
            }
        };
        if let (Some(before), Some(after)) = (&claim, claim_next)
            && *before != after
        {
            self.write_claim(after);
        }
        if !done {
            return;
        }
        match &claim {
            Some(c) if !self.instance_gone.contains(c.name()) => {
                self.delete_instance(c, out);
                self.nodes.requeue(
                    &name,
                    add(now, lifecycle::termination::INSTANCE_TERMINATION_REQUEUE),
                );
            }
            _ => remove_finalizer(self, out),
        }
    }

    /// Issues the evictions that are due.
    pub(super) fn run_evictions(&mut self, now: Timestamp, out: &mut Vec<Action>) {
        let due: Vec<String> = self
            .evictions
            .iter()
            .filter(|(_, e)| e.in_flight.is_none() && e.next_at.is_some_and(|t| t <= now))
            .map(|(k, _)| k.clone())
            .collect();
        for key in due {
            let Some(pod) = self.view.pods().get(&key) else {
                self.evictions.remove(&key);
                continue;
            };
            let uid = pod.uid.clone();
            let id = CallId(self.next_call);
            self.next_call += 1;
            self.calls.insert(id, Pending::Evict(key.clone()));
            if let Some(e) = self.evictions.get_mut(&key) {
                e.in_flight = Some(id);
            }
            out.push(Action::EvictPod { id, pod: key, uid });
        }
    }

    /// The answer to an eviction.
    pub(super) fn eviction_result(
        &mut self,
        id: CallId,
        response: EvictionResponse,
        now: Timestamp,
        out: &mut Vec<Action>,
    ) {
        let Some(Pending::Evict(key)) = self.calls.remove(&id) else {
            return;
        };
        let node = self
            .view
            .pods()
            .get(&key)
            .and_then(|p| p.node_name.clone())
            .unwrap_or_default();
        let claim = self
            .view
            .nodes()
            .get(&node)
            .and_then(|n| self.view.claim_with_provider_id(&n.provider_id));
        let reason = pods_drained_reason(claim);
        let failures = self.evictions.get(&key).map_or(0, |e| e.failures);
        let decision = eviction_decision(&key, &node, &response, &reason, failures);
        out.extend(decision.events.into_iter().map(Action::RecordEvent));
        out.extend(decision.metrics.into_iter().map(Action::Metric));
        if decision.done {
            // Settled: kept (not retried) until the watch reports the pod gone.
            let uid = self.view.pods().get(&key).map(|p| p.uid.clone());
            match (self.evictions.get_mut(&key), uid) {
                (Some(e), Some(uid)) => {
                    e.in_flight = None;
                    e.next_at = None;
                    e.settled = Some(uid);
                }
                _ => {
                    self.evictions.remove(&key);
                }
            }
        } else if let Some(e) = self.evictions.get_mut(&key) {
            e.in_flight = None;
            e.failures = e.failures.saturating_add(1);
            e.next_at = decision.retry_after.map(|d| add(now, d));
        }
        if self.view.nodes().contains_key(&node) {
            self.nodes.mark(&node);
        }
    }

    /// Node repair (spec 8), behind the `NodeRepair` gate.
    fn repair_node(&mut self, node: &lifecycle::Node, now: Timestamp, out: &mut Vec<Action>) {
        use lifecycle::repair::{RepairDecision, RepairScope, repair_decision};
        let Some(claim) = self.view.claim_with_provider_id(&node.provider_id).cloned() else {
            return;
        };
        if claim_is_deleting(&claim) || self.config.repair_policies.is_empty() {
            return;
        }
        let policies = self.config.repair_policies.clone();
        let pool = node.labels.get(labels::NODEPOOL).cloned();
        let (scope, peers): (RepairScope, Vec<&lifecycle::Node>) = match &pool {
            Some(p) => (
                RepairScope::NodePool,
                self.view
                    .nodes()
                    .values()
                    .filter(|n| n.labels.get(labels::NODEPOOL) == Some(p))
                    .collect(),
            ),
            None => (RepairScope::Cluster, self.view.nodes().values().collect()),
        };
        let unhealthy = peers
            .iter()
            .filter(|n| lifecycle::repair::is_unhealthy(&n.conditions, &policies))
            .count();
        match repair_decision(
            &node.name,
            &node.conditions,
            &policies,
            unhealthy,
            peers.len(),
            scope,
            now,
        ) {
            RepairDecision::Healthy => {}
            RepairDecision::RequeueAt(t) => self.nodes.requeue(&node.name, t),
            RepairDecision::Blocked {
                event,
                requeue_after,
            } => {
                out.push(Action::RecordEvent(event));
                self.nodes.requeue(&node.name, add(now, requeue_after));
            }
            RepairDecision::Repair { condition_type, .. } => {
                let pods = self
                    .view
                    .pods_on(&node.name)
                    .iter()
                    .filter(|p| crate::disruption::candidates::is_reschedulable(p))
                    .count();
                let actions =
                    lifecycle::repair::repair_actions_with_pods(&claim, &condition_type, pods, now);
                if let Some(ts) = actions.termination_timestamp
                    && let Some(mut next) = self.claim_for_write(claim.name())
                {
                    next.metadata
                        .annotations
                        .insert(TERMINATION_TIMESTAMP_ANNOTATION.to_string(), ts);
                    self.write_claim(next);
                }
                if actions.delete_claim {
                    out.push(Action::DeleteNodeClaim {
                        name: claim.name().to_string(),
                    });
                }
                out.extend(actions.metrics.into_iter().map(Action::Metric));
            }
        }
    }

    /// The answer to a cloud call.
    pub(super) fn cloud_result(
        &mut self,
        pending: Pending,
        response: CloudResponse,
        now: Timestamp,
        out: &mut Vec<Action>,
    ) {
        match (pending, response) {
            (Pending::Launch(name), CloudResponse::Create(result)) => {
                self.launching.remove(&name);
                let outcome = match result {
                    Ok(claim) => CreateOutcome::Created(claim),
                    Err(e) => {
                        if let CloudProviderError::InsufficientCapacity { offerings, .. } = &e {
                            self.mark_unavailable(offerings, now);
                        }
                        create_outcome(e)
                    }
                };
                self.launch_cache.insert(name.clone(), (now, outcome));
                self.claims.mark(&name);
            }
            (Pending::DeleteInstance(name), CloudResponse::Delete(result)) => {
                self.deleting_instance.remove(&name);
                match result {
                    Err(e) if e.is_not_found() => {
                        self.instance_gone.insert(name.clone());
                        self.claims.mark(&name);
                        self.nodes_of_claim_dirty(&name);
                    }
                    Err(_) => {
                        self.claims.fail(&name, now);
                    }
                    Ok(()) => {}
                }
            }
            (Pending::NodeInstance(node), CloudResponse::Get(result)) => {
                self.node_instance_checking.remove(&node);
                match result {
                    Err(e) if e.is_not_found() => {
                        self.node_instance_gone.insert(node.clone());
                        self.node_instance_checked.insert(node.clone());
                    }
                    Ok(_) => {
                        self.node_instance_checked.insert(node.clone());
                    }
                    Err(_) => {}
                }
                self.nodes.mark(&node);
            }
            (Pending::IsDrifted(name), CloudResponse::IsDrifted(Ok(reason))) => {
                let changed = self.cloud_drift.get(&name).cloned().flatten() != reason;
                self.cloud_drift.insert(name.clone(), reason);
                if changed {
                    self.claims.mark(&name);
                }
            }
            (Pending::InstanceTypes(pool), CloudResponse::InstanceTypes(result)) => {
                self.instance_types_result(&pool, result, now);
            }
            (Pending::GcList, CloudResponse::List(result)) => self.gc_result(result, now, out),
            (Pending::DeleteOrphan(pid), CloudResponse::Delete(_)) => {
                self.orphan_deletes.remove(&pid);
            }
            // A response of the wrong kind for its call: drop it (a shell bug).
            _ => {}
        }
    }

    /// Holds offerings unavailable for the configured TTL.
    pub(super) fn mark_unavailable(&mut self, offerings: &[UnavailableOffering], now: Timestamp) {
        let until = add(now, self.config.unavailable_offering_ttl);
        for o in offerings {
            self.unavailable.insert(o.clone(), until);
        }
    }
}

/// The launch step's view of a `create` error.
fn create_outcome(e: CloudProviderError) -> CreateOutcome {
    match e {
        CloudProviderError::InsufficientCapacity { message, .. } => {
            CreateOutcome::InsufficientCapacity { message }
        }
        CloudProviderError::NodeClassNotReady { message, .. } => {
            CreateOutcome::NodeClassNotReady { message }
        }
        CloudProviderError::Create {
            reason, message, ..
        } => CreateOutcome::CreateError { reason, message },
        other => CreateOutcome::Failed {
            message: other.to_string(),
        },
    }
}

/// Sets a NodeClaim condition (outside the `Ready` dependents).
fn set_condition(
    claim: &mut NodeClaim,
    type_: &str,
    status: ConditionStatus,
    reason: &str,
    now: Timestamp,
) {
    ConditionSet::for_nodeclaim(claim, now).set(type_, status, reason, "");
}

//! Instance types per NodePool, NodePool status and hash annotations, garbage collection, and
//! interruption messages.

use std::collections::BTreeSet;
use std::sync::Arc;

use jiff::SignedDuration;

use crate::api::{Condition, ConditionStatus, NodeClaim, find_condition};
use crate::cloud::{CloudProviderError, UnavailableOffering};
use crate::labels;
use crate::lifecycle::conditions::NODE_REGISTRATION_HEALTHY;
use crate::lifecycle::{
    self, Event, Metric, ObjectKind, add, claim_is_deleting, disrupted_metrics, format_time,
};
use crate::model::{InstanceType, Timestamp};

use super::{Action, CloudCall, InterruptionEvent, InterruptionKind, Operator, Pending};

/// How long before a failed `instance_types` call is retried.
const INSTANCE_TYPES_RETRY: SignedDuration = SignedDuration::from_secs(30);
/// `karpenter_interruption_received_messages_total{message_type}`.
pub const INTERRUPTION_RECEIVED_TOTAL: &str = "karpenter_interruption_received_messages_total";
/// NodePool condition `Ready`.
pub const NODEPOOL_READY: &str = "Ready";

impl Operator {
    /// Asks for the instance types of NodePools that are due.
    pub(super) fn refresh_instance_types(&mut self, now: Timestamp, out: &mut Vec<Action>) {
        let due: Vec<String> = self
            .instance_types_due
            .iter()
            .filter(|(_, t)| **t <= now)
            .map(|(p, _)| p.clone())
            .collect();
        for pool in due {
            self.instance_types_due.remove(&pool);
            let Some(np) = self.view.node_pools.get(&pool).cloned() else {
                continue;
            };
            if self.instance_types_in_flight.insert(pool.clone()) {
                self.call(
                    Pending::InstanceTypes(pool),
                    CloudCall::InstanceTypes(Box::new(np)),
                    out,
                );
            }
        }
    }

    pub(super) fn instance_types_result(
        &mut self,
        pool: &str,
        result: Result<Vec<Arc<InstanceType>>, CloudProviderError>,
        now: Timestamp,
    ) {
        self.instance_types_in_flight.remove(pool);
        if !self.view.node_pools.contains_key(pool) {
            return;
        }
        match result {
            Ok(types) => {
                let was_empty = self.view.instance_types.get(pool).is_none_or(Vec::is_empty);
                if self.config.node_overlay {
                    self.provider_instance_types
                        .insert(pool.to_string(), types.clone());
                    self.overlays_dirty = true;
                }
                self.view.instance_types.insert(pool.to_string(), types);
                self.instance_types_due.insert(
                    pool.to_string(),
                    add(now, self.config.instance_types_refresh),
                );
                self.pools.mark(pool);
                if was_empty {
                    self.trigger_if_pending(now);
                }
            }
            Err(_) => {
                self.instance_types_due
                    .insert(pool.to_string(), add(now, INSTANCE_TYPES_RETRY));
            }
        }
    }

    /// Applies the NodeOverlays to the provider's instance types of every NodePool when they or
    /// the instance types changed (gate `NodeOverlay`), and writes each overlay's
    /// `ValidationSucceeded` (and `Ready`) condition when it changes. A change re-opens
    /// consolidation (upstream marks the cluster unconsolidated).
    pub(super) fn apply_overlays(&mut self, now: Timestamp, out: &mut Vec<Action>) {
        if !self.config.node_overlay || !self.overlays_dirty {
            return;
        }
        self.overlays_dirty = false;
        let overlays: Vec<crate::api::NodeOverlay> = self.overlays.values().cloned().collect();
        let applied = {
            let views: Vec<crate::overlay::PoolTypes<'_>> = self
                .provider_instance_types
                .iter()
                .filter_map(|(name, types)| {
                    self.view
                        .node_pools
                        .get(name)
                        .map(|np| crate::overlay::PoolTypes {
                            name: name.as_str(),
                            labels: &np.spec.template.metadata.labels,
                            instance_types: types,
                        })
                })
                .collect();
            crate::overlay::apply(&overlays, &views, &self.config.scheduler.label_policy)
        };
        for (pool, types) in applied.instance_types {
            if self.view.instance_types.get(&pool) != Some(&types) {
                self.view.instance_types.insert(pool.clone(), types);
                self.pools.mark(&pool);
            }
        }
        self.state_changes += 1;
        for overlay in &overlays {
            let Some(outcome) = applied.outcomes.get(overlay.name()) else {
                continue;
            };
            let (status, reason, message) = outcome.condition();
            let status = match status {
                "True" => ConditionStatus::True,
                _ => ConditionStatus::False,
            };
            let mut new = overlay.status.clone();
            set_pool_condition(
                &mut new.conditions,
                crate::api::CONDITION_VALIDATION_SUCCEEDED,
                status,
                reason,
                &message,
                now,
            );
            let (ready_reason, ready_message) = if status == ConditionStatus::True {
                (NODEPOOL_READY, String::new())
            } else {
                (reason, message.clone())
            };
            set_pool_condition(
                &mut new.conditions,
                NODEPOOL_READY,
                status,
                ready_reason,
                &ready_message,
                now,
            );
            for c in &mut new.conditions {
                if c.type_ == crate::api::CONDITION_VALIDATION_SUCCEEDED
                    || c.type_ == NODEPOOL_READY
                {
                    c.observed_generation = overlay.metadata.generation;
                }
            }
            if new != overlay.status {
                if let Some(stored) = self.overlays.get_mut(overlay.name()) {
                    stored.status = new.clone();
                }
                out.push(Action::UpdateNodeOverlayStatus {
                    name: overlay.name().to_string(),
                    status: Box::new(new),
                });
            }
        }
        self.trigger_if_pending(now);
    }

    /// NodePool status (readiness, resources, node count, registration health) and the hash
    /// annotations of the NodePool and its NodeClaims.
    pub(super) fn reconcile_pool(&mut self, name: &str, now: Timestamp, out: &mut Vec<Action>) {
        let Some(np) = self.view.node_pools.get(name).cloned() else {
            return;
        };
        let hash = lifecycle::drift::hash_reconcile(&np, self.view.claims_of_pool(name));
        if let Some(annotations) = hash.nodepool_annotations {
            out.push(Action::AnnotateNodePool {
                name: name.to_string(),
                annotations,
            });
        }
        for u in hash.claim_updates {
            if let Some(mut claim) = self.claim_for_write(&u.claim_name) {
                claim.metadata.annotations.extend(u.annotations);
                self.write_claim(claim);
            }
        }
        let old = np.status.clone().unwrap_or_default();
        let mut status = old.clone();
        let (resources, nodes) = self.view.pool_status_totals(name);
        status.resources = resources;
        status.nodes = Some(nodes);
        let ready = self
            .view
            .instance_types
            .get(name)
            .is_some_and(|t| !t.is_empty());
        let (ready_status, reason, message) = if ready {
            (ConditionStatus::True, NODEPOOL_READY, "")
        } else {
            (
                ConditionStatus::False,
                "InstanceTypesNotFound",
                "the cloud provider returned no instance types",
            )
        };
        set_pool_condition(
            &mut status.conditions,
            NODEPOOL_READY,
            ready_status,
            reason,
            message,
            now,
        );
        match self.health_conditions.get(name) {
            Some(h) => set_pool_condition(
                &mut status.conditions,
                NODE_REGISTRATION_HEALTHY,
                h.status,
                &h.reason,
                &h.message,
                now,
            ),
            None => {
                if find_condition(&status.conditions, NODE_REGISTRATION_HEALTHY).is_none() {
                    set_pool_condition(
                        &mut status.conditions,
                        NODE_REGISTRATION_HEALTHY,
                        ConditionStatus::Unknown,
                        "AwaitingReconciliation",
                        "object is awaiting reconciliation",
                        now,
                    );
                }
            }
        }
        if np.status.as_ref() != Some(&status) {
            out.push(Action::UpdateNodePoolStatus {
                name: name.to_string(),
                status: Box::new(status),
            });
        }
    }

    /// Starts a garbage-collection pass when due.
    pub(super) fn run_gc(&mut self, now: Timestamp, out: &mut Vec<Action>) {
        if self.gc_in_flight || self.gc_due.is_none_or(|t| t > now) {
            return;
        }
        self.gc_due = Some(add(now, self.config.gc_period));
        self.gc_in_flight = true;
        self.call(Pending::GcList, CloudCall::List, out);
    }

    /// Garbage collection over the provider's instances (spec 6.7), and the provider-side
    /// collection of instances no NodeClaim refers to (the AWS provider's instance GC): an
    /// instance seen unreferenced for at least [`instance_gc_grace`] is deleted, with its Nodes.
    ///
    /// [`instance_gc_grace`]: super::OperatorConfig::instance_gc_grace
    pub(super) fn gc_result(
        &mut self,
        result: Result<Vec<NodeClaim>, CloudProviderError>,
        now: Timestamp,
        out: &mut Vec<Action>,
    ) {
        self.gc_in_flight = false;
        let Ok(instances) = result else {
            return;
        };
        let listed: BTreeSet<&str> = instances
            .iter()
            .filter(|i| i.metadata.deletion_timestamp.is_none())
            .filter_map(|i| i.status.provider_id.as_deref())
            .collect();
        let deletions = lifecycle::garbage_collect(
            self.view
                .node_claims()
                .values()
                .filter(|c| self.is_managed(c)),
            &listed,
            self.view.nodes().values(),
        );
        for d in deletions {
            out.push(Action::DeleteNodeClaim { name: d.claim_name });
            out.extend(d.metrics.into_iter().map(Action::Metric));
        }
        let referenced: BTreeSet<&str> = self
            .view
            .node_claims()
            .values()
            .filter_map(|c| c.status.provider_id.as_deref())
            .collect();
        let mut unreferenced = Vec::new();
        for instance in &instances {
            let Some(pid) = instance.status.provider_id.as_deref() else {
                continue;
            };
            if referenced.contains(pid) {
                self.orphans.remove(pid);
            } else {
                unreferenced.push((pid, instance));
            }
        }
        drop(referenced);
        let mut new_orphans = false;
        for (pid, instance) in unreferenced {
            let first = *self.orphans.entry(pid.to_string()).or_insert_with(|| {
                new_orphans = true;
                now
            });
            if lifecycle::since(now, first) >= self.config.instance_gc_grace
                && self.orphan_deletes.insert(pid.to_string())
            {
                for n in self.view.nodes_with_provider_id(pid) {
                    out.push(Action::DeleteNode { name: n.name });
                }
                self.call(
                    Pending::DeleteOrphan(pid.to_string()),
                    CloudCall::Delete(Box::new(instance.clone())),
                    out,
                );
            }
        }
        self.orphans.retain(|pid, _| {
            instances
                .iter()
                .any(|i| i.status.provider_id.as_ref() == Some(pid))
        });
        if new_orphans {
            // Look again as soon as the grace period has passed.
            let again = add(now, self.config.instance_gc_grace);
            self.gc_due = Some(self.gc_due.map_or(again, |t| t.min(again)));
        }
    }

    /// An interruption message (the provider's `interruption` controller): spot interruptions,
    /// state changes and scheduled maintenance delete the NodeClaim (spot interruptions also
    /// mark the offering unavailable); rebalance recommendations are only recorded.
    pub(super) fn interruption(
        &mut self,
        event: InterruptionEvent,
        now: Timestamp,
        out: &mut Vec<Action>,
    ) {
        out.push(Action::Metric(Metric::add(
            INTERRUPTION_RECEIVED_TOTAL,
            1.0,
            [("message_type", event.kind.as_str().to_string())],
        )));
        let Some(claim) = self
            .view
            .claim_with_provider_id(&event.provider_id)
            .cloned()
        else {
            return;
        };
        let (message, hides_offering) = match event.kind {
            InterruptionKind::RebalanceRecommendation => {
                out.push(Action::RecordEvent(Event::normal(
                    ObjectKind::NodeClaim,
                    claim.name(),
                    event.kind.event_reason(),
                    "Spot rebalance recommendation was triggered",
                )));
                return;
            }
            InterruptionKind::SpotInterrupted => ("Spot interruption warning was triggered", true),
            InterruptionKind::CapacityReservationInterrupted => (
                "Capacity reservation interruption warning was triggered",
                true,
            ),
            InterruptionKind::InstanceStopped => ("Instance is stopping", false),
            InterruptionKind::InstanceTerminated => ("Instance is terminating", false),
            InterruptionKind::ScheduledChange => {
                ("An unhealthy warning was triggered for the instance", false)
            }
        };
        if hides_offering {
            let label = |k: &str| claim.metadata.labels.get(k).cloned().unwrap_or_default();
            self.mark_unavailable(
                &[UnavailableOffering {
                    instance_type: label(labels::INSTANCE_TYPE),
                    zone: label(labels::ZONE),
                    capacity_type: label(labels::CAPACITY_TYPE),
                }],
                now,
            );
        }
        out.push(Action::RecordEvent(Event::warning(
            ObjectKind::NodeClaim,
            claim.name(),
            event.kind.event_reason(),
            message,
        )));
        if event.kind.deletes_nodeclaim() && !claim_is_deleting(&claim) {
            let pods = self
                .view
                .nodes_of_claim(&claim)
                .iter()
                .flat_map(|n| self.view.pods_on(&n.name))
                .filter(crate::disruption::candidates::is_reschedulable)
                .count();
            out.push(Action::DeleteNodeClaim {
                name: claim.name().to_string(),
            });
            out.extend(
                disrupted_metrics(&claim, event.kind.as_str(), "", pods)
                    .into_iter()
                    .map(Action::Metric),
            );
        }
    }
}

/// Sets a NodePool condition, keeping its transition time when the status does not change.
fn set_pool_condition(
    conditions: &mut Vec<Condition>,
    type_: &str,
    status: ConditionStatus,
    reason: &str,
    message: &str,
    now: Timestamp,
) {
    let existing = conditions.iter_mut().find(|c| c.type_ == type_);
    let new = |last: Option<String>| Condition {
        type_: type_.to_string(),
        status,
        reason: Some(reason.to_string()),
        message: (!message.is_empty()).then(|| message.to_string()),
        last_transition_time: last.or_else(|| Some(format_time(now))),
        observed_generation: None,
    };
    match existing {
        Some(c) => {
            let last = (c.status == status)
                .then(|| c.last_transition_time.clone())
                .flatten();
            let observed = c.observed_generation;
            *c = new(last);
            c.observed_generation = observed;
        }
        None => conditions.push(new(None)),
    }
}

//! The invariants the chaos runs check after every step (see [`super::chaos`]).

use std::collections::{BTreeMap, BTreeSet};

use jiff::SignedDuration;
use karpenter_core::api::{ConditionStatus, DisruptionReason, condition_types, find_condition};
use karpenter_core::disruption::candidates::PdbLimits;
use karpenter_core::labels;
use karpenter_core::lifecycle::ObjectKind;
use karpenter_core::model::{PodDisruptionBudget, Timestamp};
use karpenter_core::resources::ResourceList;

use super::{Sim, lifecycle_add};

/// An invariant that did not hold.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Violation {
    /// A cloud instance no NodeClaim refers to outlived the allowed time.
    #[error("instance {provider_id} leaked: no NodeClaim refers to it since {since} ({age} ago)")]
    Leak {
        /// The instance.
        provider_id: String,
        /// First seen unreferenced.
        since: Timestamp,
        /// How long ago.
        age: SignedDuration,
    },
    /// A pod stayed pending without being bound or reported unschedulable.
    #[error(
        "pod {pod} pending since {since} ({age}) without being bound or reported unschedulable"
    )]
    PodNeverScheduled {
        /// The pod.
        pod: String,
        /// Pending since.
        since: Timestamp,
        /// How long.
        age: SignedDuration,
    },
    /// More voluntary disruptions in flight than a NodePool's budgets allow.
    #[error(
        "NodePool {node_pool}: {in_flight} voluntary disruptions in flight ({nodes:?}) but its budgets allow {allowed} of {total} nodes"
    )]
    BudgetExceeded {
        /// The NodePool.
        node_pool: String,
        /// Disruptions in flight when the last one started.
        in_flight: usize,
        /// The nodes.
        nodes: Vec<String>,
        /// What the budgets allowed.
        allowed: usize,
        /// Nodes counted.
        total: usize,
    },
    /// A NodePool's launched capacity went over its `spec.limits`.
    #[error("NodePool {node_pool}: {resource} {used} over its limit {limit}")]
    LimitExceeded {
        /// The NodePool.
        node_pool: String,
        /// The resource.
        resource: String,
        /// In use.
        used: String,
        /// The limit.
        limit: String,
    },
    /// A node holding a do-not-disrupt pod was disrupted voluntarily, or such a pod evicted.
    #[error("node {node} was drained voluntarily while holding do-not-disrupt pod {pod}")]
    DoNotDisruptDrained {
        /// The node.
        node: String,
        /// The pod.
        pod: String,
    },
    /// A node whose pods a PodDisruptionBudget protects was disrupted voluntarily.
    #[error("node {node} was disrupted voluntarily although a PDB blocks evicting {reason}")]
    PdbBlockedDrained {
        /// The node.
        node: String,
        /// Why the PDB blocks.
        reason: String,
    },
    /// `create` was called for a NodeClaim whose instance the API already recorded.
    #[error("NodeClaim {node_claim} was launched twice")]
    LaunchedTwice {
        /// The NodeClaim.
        node_claim: String,
    },
    /// A replica carried out a write or cloud call while it did not hold the leader-election
    /// Lease, or while another replica led too.
    #[error(
        "replica {} acted at {} while the Lease was held by {:?}{}: {}",
        .0.replica,
        .0.at,
        .0.holder,
        .0.other_leader.as_ref().map(|o| format!(" and {o} led too")).unwrap_or_default(),
        .0.action
    )]
    NonLeaderActed(Box<super::NonLeaderAct>),
    /// The operator (or the simulator) panicked.
    #[error("panic: {message}")]
    Panic {
        /// The panic message.
        message: String,
    },
    /// The simulation stopped: the operator kept asking to run at the same instant.
    #[error("{message}")]
    Livelock {
        /// The simulator's error.
        message: String,
    },
}

impl Violation {
    /// A short name of the invariant (`leak`, `pending`, `budget`, `limit`, `do-not-disrupt`,
    /// `pdb`, `launched-twice`, `non-leader-acted`, `panic`, `livelock`).
    pub fn invariant(&self) -> &'static str {
        match self {
            Violation::Leak { .. } => "leak",
            Violation::PodNeverScheduled { .. } => "pending",
            Violation::BudgetExceeded { .. } => "budget",
            Violation::LimitExceeded { .. } => "limit",
            Violation::DoNotDisruptDrained { .. } => "do-not-disrupt",
            Violation::PdbBlockedDrained { .. } => "pdb",
            Violation::LaunchedTwice { .. } => "launched-twice",
            Violation::NonLeaderActed(_) => "non-leader-acted",
            Violation::Panic { .. } => "panic",
            Violation::Livelock { .. } => "livelock",
        }
    }
}

/// Bounds of the time-based invariants.
#[derive(Debug, Clone, Copy)]
pub struct Bounds {
    /// How long an instance may stay unreferenced.
    pub leak: SignedDuration,
    /// How long a pod may stay pending without being reported unschedulable, when no launch
    /// that never registers happened while it waited.
    pub pending: SignedDuration,
    /// How much longer it may wait for each launch that never registers while it waits (the
    /// registration timeout).
    pub registration_timeout: SignedDuration,
    /// How much longer an instance may stay unreferenced for each cloud call made to fail
    /// around it (the garbage collection's period: a failed pass is retried one period later).
    pub gc_period: SignedDuration,
}

/// The checker's memory between steps.
#[derive(Debug, Default)]
pub(super) struct Checker {
    unreferenced: BTreeMap<String, Timestamp>,
    pending: BTreeMap<String, Timestamp>,
    reported: BTreeMap<String, Timestamp>,
    events_seen: usize,
    evictions_seen: usize,
    double_launches_seen: usize,
    non_leader_acts_seen: usize,
    disrupting: BTreeSet<String>,
    checked_rv: u64,
}

impl Checker {
    /// Checks every invariant against the simulation as it is now.
    pub(super) fn check(&mut self, sim: &Sim, bounds: &Bounds) -> Result<(), Violation> {
        let now = sim.now();
        self.check_leader(sim)?;
        self.check_launches(sim)?;
        self.check_leaks(sim, now, bounds)?;
        self.check_pending(sim, now, bounds)?;
        self.check_evictions(sim)?;
        self.check_disruptions(sim, now)?;
        check_limits(sim)?;
        Ok(())
    }

    /// The invariants cheap enough to check after each of the simulator's inner steps:
    /// launches, evictions and disruptions starting.
    pub(super) fn check_fast(&mut self, sim: &Sim) -> Result<(), Violation> {
        self.check_leader(sim)?;
        if sim.api().rv() == self.checked_rv {
            return Ok(());
        }
        self.checked_rv = sim.api().rv();
        self.check_launches(sim)?;
        self.check_evictions(sim)?;
        self.check_disruptions(sim, sim.now())
    }

    /// Drops the events and evictions the checker has read (keeps long runs' memory flat).
    pub(super) fn forget_seen(&mut self, sim: &mut Sim) {
        sim.events.drain(..self.events_seen.min(sim.events.len()));
        self.events_seen = 0;
        let n = self.evictions_seen.min(sim.observed.evictions.len());
        sim.observed.evictions.drain(..n);
        self.evictions_seen = 0;
        sim.metrics.clear();
        // Failed calls long before every unreferenced instance no longer count (an hour is
        // more than any leak bound).
        let horizon = self
            .unreferenced
            .values()
            .min()
            .copied()
            .unwrap_or(sim.now())
            .checked_sub(SignedDuration::from_hours(1))
            .unwrap_or(Timestamp::MIN);
        sim.observed.failed_calls.retain(|t| *t >= horizon);
        // A lost launch counts for a pod while its NodeClaim may hold the pod's nomination:
        // until its registration timeout. Those whose timeout passed before the oldest pending
        // pod started waiting (or before now, when none waits) no longer count; a NodeClaim
        // still within its timeout is kept even when no pod is pending, as a pod arriving later
        // may be nominated to it.
        let timeout = karpenter_core::lifecycle::nodeclaim::REGISTRATION_TIMEOUT;
        let oldest = self
            .pending
            .values()
            .min()
            .copied()
            .unwrap_or(sim.now())
            .min(sim.now());
        sim.observed
            .lost_launches
            .retain(|t| lifecycle_add(*t, timeout) > oldest);
    }

    fn check_leader(&mut self, sim: &Sim) -> Result<(), Violation> {
        let acts = &sim.observed.non_leader_acts;
        if let Some(a) = acts.get(self.non_leader_acts_seen) {
            return Err(Violation::NonLeaderActed(Box::new(a.clone())));
        }
        self.non_leader_acts_seen = acts.len();
        Ok(())
    }

    fn check_launches(&mut self, sim: &Sim) -> Result<(), Violation> {
        let doubles = &sim.observed.double_launches;
        if let Some(name) = doubles.get(self.double_launches_seen) {
            return Err(Violation::LaunchedTwice {
                node_claim: name.clone(),
            });
        }
        self.double_launches_seen = doubles.len();
        Ok(())
    }

    fn check_leaks(&mut self, sim: &Sim, now: Timestamp, b: &Bounds) -> Result<(), Violation> {
        let leaked: BTreeSet<String> = sim.leaked_instances().into_iter().collect();
        self.unreferenced.retain(|p, _| leaked.contains(p));
        for pid in leaked {
            let since = *self.unreferenced.entry(pid.clone()).or_insert(now);
            let age = now.duration_since(since);
            let failed = sim
                .observed
                .failed_calls
                .iter()
                .filter(|t| lifecycle_add(**t, b.leak) >= since)
                .count();
            let bound = b.leak + b.gc_period * i32::try_from(failed).unwrap_or(i32::MAX);
            if age > bound {
                return Err(Violation::Leak {
                    provider_id: pid,
                    since,
                    age,
                });
            }
        }
        Ok(())
    }

    fn check_pending(&mut self, sim: &Sim, now: Timestamp, b: &Bounds) -> Result<(), Violation> {
        for e in sim.events.iter().skip(self.events_seen) {
            if e.kind == ObjectKind::Pod && e.reason == "FailedScheduling" {
                self.reported.insert(e.name.clone(), now);
            }
        }
        self.events_seen = sim.events.len();
        let pending: BTreeSet<String> = sim
            .api()
            .pods
            .values()
            .filter(|p| p.node_name.is_none() && !p.is_terminal())
            .map(|p| p.key())
            .collect();
        self.pending.retain(|k, _| pending.contains(k));
        self.reported.retain(|k, _| pending.contains(k));
        let lost = &sim.observed.lost_launches;
        for key in pending {
            let since = *self.pending.entry(key.clone()).or_insert(now);
            let age = now.duration_since(since);
            // Each launch that never registers and whose NodeClaim still lives while the pod
            // waits may hold it for one registration timeout (upstream's 15 minutes) before
            // the NodeClaim is deleted and the pod provisioned again.
            let waited_on = lost
                .iter()
                .filter(|t| lifecycle_add(**t, b.registration_timeout) > since)
                .count();
            let bound =
                b.pending + b.registration_timeout * i32::try_from(waited_on).unwrap_or(i32::MAX);
            if age > bound && !self.reported.contains_key(&key) {
                return Err(Violation::PodNeverScheduled {
                    pod: key,
                    since,
                    age,
                });
            }
        }
        Ok(())
    }

    fn check_evictions(&mut self, sim: &Sim) -> Result<(), Violation> {
        for r in sim.observed.evictions.iter().skip(self.evictions_seen) {
            if !r.do_not_disrupt {
                continue;
            }
            let involuntary = sim
                .api()
                .nodes
                .get(&r.node)
                .is_none_or(|n| sim.observed.involuntary.contains(&n.provider_id));
            if !involuntary {
                return Err(Violation::DoNotDisruptDrained {
                    node: r.node.clone(),
                    pod: r.pod.clone(),
                });
            }
        }
        self.evictions_seen = sim.observed.evictions.len();
        Ok(())
    }

    /// Voluntary disruptions: when a node starts being disrupted (disrupted taint or deletion)
    /// without an involuntary cause, its pods must be disruptable and its pool's budgets must
    /// allow one more.
    fn check_disruptions(&mut self, sim: &Sim, now: Timestamp) -> Result<(), Violation> {
        let api = sim.api();
        // The NodeClaim of a provider id: the last by name, when several share it.
        let claim_of = |pid: &str| -> Option<&karpenter_core::api::NodeClaim> {
            api.claims_with_provider_id(pid).next_back()
        };
        let voluntary = |n: &karpenter_core::lifecycle::Node| {
            let claim = claim_of(n.provider_id.as_str());
            let claim_deleting = claim.is_some_and(|c| c.metadata.deletion_timestamp.is_some());
            let tainted = n
                .taints
                .iter()
                .any(|t| t.key == labels::DISRUPTED_TAINT_KEY);
            (tainted || n.is_deleting() || claim_deleting)
                && !sim.observed.involuntary.contains(&n.provider_id)
        };
        // Every node the rule above can accept is deleting, tainted or shares its provider id
        // with a deleting NodeClaim: the API's index of those is all there is to look at.
        let disrupting: Vec<&karpenter_core::lifecycle::Node> = api
            .maybe_disrupted_nodes()
            .into_iter()
            .filter_map(|name| api.nodes.get(name))
            .filter(|n| voluntary(n))
            .collect();
        let started: Vec<&karpenter_core::lifecycle::Node> = disrupting
            .iter()
            .copied()
            .filter(|n| !self.disrupting.contains(&n.name))
            .collect();
        self.disrupting = disrupting.iter().map(|n| n.name.clone()).collect();
        if started.is_empty() {
            return Ok(());
        }
        let pdbs: Vec<PodDisruptionBudget> = api.pdbs.values().cloned().collect();
        let limits = PdbLimits::new(&pdbs);
        for node in &started {
            let pods: Vec<_> = api
                .pods_on(&node.name)
                .filter(|p| !p.is_daemonset_pod() && !p.is_terminal())
                .cloned()
                .collect();
            if let Some(p) = pods.iter().find(|p| {
                p.annotations
                    .get(labels::DO_NOT_DISRUPT_ANNOTATION)
                    .is_some_and(|v| v == "true")
            }) {
                return Err(Violation::DoNotDisruptDrained {
                    node: node.name.clone(),
                    pod: p.key(),
                });
            }
            if let Err(e) = limits.can_evict_pods(&pods, now) {
                return Err(Violation::PdbBlockedDrained {
                    node: node.name.clone(),
                    reason: e.to_string(),
                });
            }
        }
        // Budgets, per pool of a node that started.
        let pools: BTreeSet<&str> = started
            .iter()
            .filter_map(|n| n.labels.get(labels::NODEPOOL).map(String::as_str))
            .collect();
        for pool_name in pools {
            let Some(pool) = api.node_pools.get(pool_name) else {
                continue;
            };
            let counted: Vec<&karpenter_core::lifecycle::Node> = api
                .nodes
                .values()
                .filter(|n| n.labels.get(labels::NODEPOOL).map(String::as_str) == Some(pool_name))
                .filter(|n| n.labels.get(labels::INITIALIZED).map(String::as_str) == Some("true"))
                .filter(|n| {
                    claim_of(n.provider_id.as_str()).is_some_and(|c| {
                        find_condition(&c.status.conditions, condition_types::INSTANCE_TERMINATING)
                            .is_none_or(|c| c.status != ConditionStatus::True)
                    })
                })
                .collect();
            let in_flight: Vec<String> = counted
                .iter()
                .filter(|n| voluntary(n))
                .map(|n| n.name.clone())
                .collect();
            let allowed = DisruptionReason::ALL
                .iter()
                .map(|r| pool.allowed_disruptions_or_zero(*r, counted.len(), now))
                .max()
                .unwrap_or(0);
            if in_flight.len() > allowed {
                return Err(Violation::BudgetExceeded {
                    node_pool: pool_name.to_string(),
                    in_flight: in_flight.len(),
                    nodes: in_flight,
                    allowed,
                    total: counted.len(),
                });
            }
        }
        Ok(())
    }
}

/// Every NodePool's active capacity within its `spec.limits`, counted as upstream counts a
/// NodePool's usage against its limits (the NodePool's `status.resources`, which the
/// provisioner's limit check and the scheduler's remaining resources read): the capacity of
/// every NodeClaim of the pool with an instance, plus `nodes: 1` each, leaving out the ones
/// marked for deletion (a deletion timestamp on the NodeClaim or its Node, or the `disrupted`
/// taint a disruption command puts on its candidates before it creates their replacements).
/// Instances being deleted or replaced still run, so the pool's running capacity can exceed
/// its limits while they drain: that is upstream's semantics (a replacement is launched before
/// its candidate goes), not a violation.
fn check_limits(sim: &Sim) -> Result<(), Violation> {
    let api = sim.api();
    let marked: BTreeSet<&str> = api
        .nodes
        .values()
        .filter(|n| {
            n.deletion_timestamp.is_some()
                || n.taints
                    .iter()
                    .any(|t| t.key == labels::DISRUPTED_TAINT_KEY)
        })
        .map(|n| n.provider_id.as_str())
        .collect();
    for (name, pool) in &api.node_pools {
        let Some(limits) = pool.spec.limits.as_ref().filter(|l| !l.is_empty()) else {
            continue;
        };
        let mut used = ResourceList::new();
        for c in api.node_claims.values() {
            if c.metadata.labels.get(labels::NODEPOOL).map(String::as_str) != Some(name.as_str())
                || c.metadata.deletion_timestamp.is_some()
            {
                continue;
            }
            let Some(pid) = c.status.provider_id.as_deref() else {
                continue;
            };
            if marked.contains(pid) {
                continue;
            }
            used.add_assign(&c.status.capacity);
            used.add_assign(&ResourceList::from_iter([(
                karpenter_core::resources::names::NODES.to_string(),
                karpenter_core::resources::Quantity::from_milli(1000),
            )]));
        }
        if let Some(resource) = used.exceeds(limits) {
            return Err(Violation::LimitExceeded {
                node_pool: name.clone(),
                used: used.get_or_zero(&resource).to_string(),
                limit: limits.get_or_zero(&resource).to_string(),
                resource,
            });
        }
    }
    Ok(())
}

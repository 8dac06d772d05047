//! Sound pre-checks for consolidation: they recognise, without a scheduling simulation, a
//! candidate set whose consolidation cannot succeed, so the simulation is skipped and the pass
//! decides exactly as it would have.
//!
//! Consolidating candidates succeeds only when every displaced pod lands somewhere: on an
//! existing node (a pod placed on a node that has not initialized fails the simulation) or on
//! the one NodeClaim a simulation may add (two or more new NodeClaims, or a pod that finds no
//! place, end in "no action").
//!
//! "Fits on no other node" counts the nodes a displaced pod may land on: not being deleted (the
//! simulation leaves those out), initialized, and not refusing displaced pods (a node inside its
//! NodePool's `consolidateAfter` window refuses them: every consolidation simulation runs with
//! that rule). It is judged on an upper bound of each such node's room, in the scheduler's own
//! milli-units: its allocatable (the larger of what the Node and its NodeClaim report) less the
//! requests of its pods that are not terminal. The scheduler starts every existing node from at
//! most that room (it also takes DaemonSet overhead still due) and only ever takes room away
//! during a simulation, and it places a pod only where every requested resource fits. A pod one
//! of whose requests exceeds the largest such room of every other node can therefore land on no
//! existing node.
//!
//! - Single-node ([`DisruptionOptions::single_node_precheck`](super::DisruptionOptions)): a
//!   replacement needs an instance type that launches strictly cheaper than the candidate (the
//!   price filter keeps an instance type only when its worst launch price, the price of one of its
//!   available offerings, is below the candidate's). So when no available offering of any
//!   NodePool's instance types is cheaper than the candidate, and one displaced pod fits on no
//!   other node even alone, the simulation can only end in "no action" with a reason.
//! - Multi-node ([`MultiNodePrecheck`], always on: multi-node consolidation records no reason
//!   for a prefix it rejects, so skipping the simulation is not observable): the displaced pods of
//!   a prefix of candidates that fit on no node outside their own all need the one new NodeClaim.
//!   When, for some resource, their summed requests exceed the allocatable of every instance type
//!   of every NodePool (an upper bound of what one new node can hold), the prefix cannot be
//!   consolidated. Instance types with offering overrides (whose allocatable differs per
//!   offering) turn the check off.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use smallvec::SmallVec;

use crate::disruption::candidates::{Candidate, PdbLimits, is_currently_reschedulable};
use crate::disruption::cost::is_under_consolidate_after;
use crate::disruption::facts::scheduling_milli;
use crate::model::{Pod, Timestamp};
use crate::state::{ClusterSnapshot, StateNode};

/// A node of the snapshot, by identity (the address of its entry, alive for the whole pass).
type NodeId = usize;

fn node_id(node: &Arc<StateNode>) -> NodeId {
    Arc::as_ptr(node) as NodeId
}

/// The largest room of one resource over the snapshot's nodes, twice: so the largest room of
/// every node but one is known.
#[derive(Debug, Clone, Copy, Default)]
struct TopTwo {
    first: Option<(i64, NodeId)>,
    second: Option<(i64, NodeId)>,
}

impl TopTwo {
    fn offer(&mut self, room: i64, node: NodeId) {
        match self.first {
            Some((best, _)) if room <= best => {
                if self.second.is_none_or(|(s, _)| room > s) {
                    self.second = Some((room, node));
                }
            }
            _ => {
                self.second = self.first;
                self.first = Some((room, node));
            }
        }
    }

    /// The largest room over every node but `node`, at least zero (a node that does not list
    /// the resource has room zero; counting one more such node is always an upper bound).
    fn largest_without(&self, node: NodeId) -> i64 {
        let pick = match self.first {
            Some((_, n)) if n == node => self.second,
            other => other,
        };
        pick.map_or(0, |(room, _)| room).max(0)
    }
}

/// Per resource name, the largest rooms (milli-units) over the nodes a displaced pod may land
/// on (see the [module documentation](self)), over one pass's snapshot: the consolidation
/// methods of a pass share it.
pub(super) struct Rooms {
    room: BTreeMap<String, TopTwo>,
    pdbs: PdbLimits,
    /// Names of the pods every simulation places anyway (pending and CapacityBuffer pods), by
    /// namespace: a displaced pod with such a namespace and name is not told apart from them, so
    /// it is never judged stuck.
    pending: BTreeMap<String, BTreeSet<String>>,
    now: Timestamp,
}

/// A displaced pod that fits on no other node: the resource, what it wants, the most free.
type Stuck = (String, i64, i64);

impl Rooms {
    /// The rooms of `snapshot`'s nodes at `now` (the snapshot the simulations run on).
    pub(super) fn new(snapshot: &ClusterSnapshot, now: Timestamp) -> Self {
        let mut room: BTreeMap<String, TopTwo> = BTreeMap::new();
        for sn in &snapshot.nodes {
            // Deleting nodes take no pods; a displaced pod placed on an uninitialized node fails
            // the simulation (upstream: "would schedule against uninitialized nodeclaim").
            let facts = crate::disruption::facts::of(snapshot, sn);
            if facts.deleting {
                continue;
            }
            if !facts.initialized || refuses_displaced(snapshot, sn, facts.nodepool.as_deref(), now)
            {
                continue;
            }
            let id = node_id(sn);
            for (name, r) in &facts.room {
                match room.get_mut(&**name) {
                    Some(t) => t.offer(*r, id),
                    None => {
                        let mut t = TopTwo::default();
                        t.offer(*r, id);
                        room.insert(name.to_string(), t);
                    }
                }
            }
        }
        let mut pending: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for p in snapshot.pending_pods.iter().chain(&snapshot.buffer_pods) {
            pending
                .entry(p.namespace.clone())
                .or_default()
                .insert(p.name.clone());
        }
        Rooms {
            room,
            pdbs: PdbLimits::new(&snapshot.pdbs),
            pending,
            now,
        }
    }

    /// The displaced pods of `c` (those a simulation moves), each with why it fits on no node
    /// but `c`'s own, when it does not.
    fn displaced<'c>(&self, c: &'c Candidate) -> impl Iterator<Item = (&'c Pod, Option<Stuck>)> {
        let own = node_id(&c.node);
        c.reschedulable_pods()
            .filter(|p| is_currently_reschedulable(p, &self.pdbs, self.now))
            .map(move |p| {
                let pending = self
                    .pending
                    .get(p.namespace.as_str())
                    .is_some_and(|names| names.contains(p.name.as_str()));
                let stuck = if !pending { self.stuck(p, own) } else { None };
                (p, stuck)
            })
    }

    fn stuck(&self, p: &Pod, own: NodeId) -> Option<Stuck> {
        for (name, wanted) in scheduling_milli(p) {
            if wanted <= 0 {
                continue;
            }
            let largest = self.room.get(name).map_or(0, |t| t.largest_without(own));
            if wanted > largest {
                return Some((name.to_string(), wanted, largest));
            }
        }
        None
    }
}

/// Whether every consolidation simulation over `snapshot` at `now` makes `sn` refuse displaced
/// pods: its NodeClaim is inside its NodePool's `consolidateAfter` window (the rule
/// `SimulationContext` applies).
fn refuses_displaced(
    snapshot: &ClusterSnapshot,
    sn: &StateNode,
    nodepool: Option<&str>,
    now: Timestamp,
) -> bool {
    match (
        nodepool.and_then(|n| snapshot.node_pool(n)),
        sn.node_claim.as_ref(),
    ) {
        (Some(pool), Some(claim)) => is_under_consolidate_after(&pool.node_pool, claim, now),
        _ => false,
    }
}

/// The single-node pre-check over a pass's snapshot, built once per pass.
pub(super) struct SingleNodePrecheck<'r> {
    /// The cheapest available offering over every NodePool's instance types.
    cheapest: f64,
    rooms: &'r Rooms,
}

impl<'r> SingleNodePrecheck<'r> {
    /// The pre-check over `snapshot` (the snapshot the simulations run on) with its `rooms`.
    pub(super) fn new(snapshot: &ClusterSnapshot, rooms: &'r Rooms) -> Self {
        let cheapest = snapshot
            .node_pools
            .iter()
            .flat_map(|p| p.instance_types.iter())
            .flat_map(|it| it.available_offerings().map(|o| o.price))
            .min_by(f64::total_cmp)
            .unwrap_or(f64::INFINITY);
        SingleNodePrecheck { cheapest, rooms }
    }

    /// Why consolidating `c` alone cannot succeed, when that is certain; `None` when only the
    /// simulation can tell.
    pub(super) fn hopeless<'c>(&self, c: &'c Candidate) -> Option<Hopeless<'c>> {
        // A replacement needs an option strictly cheaper than the candidate.
        let cheapest_or_cheaper = matches!(
            c.price.partial_cmp(&self.cheapest),
            Some(std::cmp::Ordering::Less | std::cmp::Ordering::Equal)
        );
        if !cheapest_or_cheaper || c.node.is_deleting() {
            return None;
        }
        self.rooms
            .displaced(c)
            .find_map(|(p, stuck)| stuck.map(|s| (p, s)))
            .map(|(pod, (resource, wanted, largest))| Hopeless {
                pod,
                resource,
                wanted,
                largest,
            })
    }
}

/// Why the single-node pre-check rejects a candidate: one displaced pod fits on no other node
/// and no instance type launches cheaper. Displays as the reason recorded for the candidate.
pub(super) struct Hopeless<'c> {
    pod: &'c Pod,
    resource: String,
    wanted: i64,
    largest: i64,
}

impl std::fmt::Display for Hopeless<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let Hopeless {
            pod,
            resource,
            wanted,
            largest,
        } = self;
        write!(
            f,
            "pod {} fits on no other node ({resource}: {wanted}m wanted, at most {largest}m free) and no instance type launches cheaper than the candidate",
            pod.key()
        )
    }
}

/// The multi-node pre-check over a pass's ordered candidates (see the
/// [module documentation](self)): which prefixes cannot be consolidated.
pub(super) struct MultiNodePrecheck {
    /// Per candidate, in order: the summed requests (milli-units, per resource) of its displaced
    /// pods that fit on no node outside their own.
    stuck: Vec<SmallVec<[(String, i64); 2]>>,
    /// Per resource, the largest allocatable of any instance type of any NodePool; `None` when
    /// some instance type has offering overrides (the check is off).
    largest_new: Option<BTreeMap<String, i64>>,
}

impl MultiNodePrecheck {
    /// The pre-check of the prefixes of `candidates` over `snapshot` with its `rooms`.
    pub(super) fn new(snapshot: &ClusterSnapshot, rooms: &Rooms, candidates: &[Candidate]) -> Self {
        let types = || {
            snapshot
                .node_pools
                .iter()
                .flat_map(|p| p.instance_types.iter())
        };
        if types().any(|it| it.has_offering_overrides()) {
            return MultiNodePrecheck {
                stuck: Vec::new(),
                largest_new: None,
            };
        }
        let mut largest_new: BTreeMap<String, i64> = BTreeMap::new();
        for it in types() {
            for (name, q) in it.allocatable().iter() {
                let m = q.milli_value();
                match largest_new.get_mut(name) {
                    Some(v) => *v = (*v).max(m),
                    None => {
                        largest_new.insert(name.to_string(), m);
                    }
                }
            }
        }
        let stuck = candidates
            .iter()
            .map(|c| {
                let mut sums: SmallVec<[(String, i64); 2]> = SmallVec::new();
                for (p, s) in rooms.displaced(c) {
                    if s.is_none() {
                        continue;
                    }
                    for (name, m) in scheduling_milli(p).into_iter().filter(|(_, m)| *m > 0) {
                        match sums.iter_mut().find(|(n, _)| n == name) {
                            Some((_, v)) => *v = v.saturating_add(m),
                            None => sums.push((name.to_string(), m)),
                        }
                    }
                }
                sums
            })
            .collect();
        MultiNodePrecheck {
            stuck,
            largest_new: Some(largest_new),
        }
    }

    /// Whether consolidating the candidates up to `end` (included) certainly fails: the pods
    /// they displace that fit on no other existing node need more of some resource than any one
    /// instance type allocates.
    pub(super) fn hopeless(&self, end: usize) -> bool {
        let (Some(largest), Some(prefix)) = (&self.largest_new, self.stuck.get(..=end)) else {
            return false;
        };
        let mut total: BTreeMap<&str, i64> = BTreeMap::new();
        for (name, m) in prefix.iter().flatten() {
            let v = total.entry(name.as_str()).or_insert(0);
            *v = v.saturating_add(*m);
        }
        total
            .iter()
            .any(|(name, wanted)| *wanted > largest.get(*name).copied().unwrap_or(0))
    }
}

#[cfg(test)]
#[path = "precheck_tests.rs"]
mod tests;

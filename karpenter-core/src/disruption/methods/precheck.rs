//! A sound pre-check for single-node consolidation ([`DisruptionOptions::single_node_precheck`]):
//! it recognises, without a scheduling simulation, a candidate whose consolidation cannot
//! succeed, so the simulation is skipped and the pass decides exactly as it would have.
//!
//! Consolidating one candidate succeeds only when its displaced pods all land on existing nodes
//! (a delete), or when the simulation needs exactly one new NodeClaim and one of its instance
//! types launches strictly cheaper than the candidate (a replacement: the price filter keeps an
//! instance type only when its worst launch price, the price of one of its available offerings,
//! is below the candidate's). So when no available offering of any NodePool's instance types is
//! cheaper than the candidate, and one displaced pod fits on no other node even alone, the
//! simulation can only end in "no action" with a reason.
//!
//! "Fits on no other node" counts the nodes a displaced pod may land on for the consolidation to
//! succeed: not being deleted (the simulation leaves those out) and initialized (a displaced pod
//! placed on an uninitialized node fails the simulation). It is judged on an upper bound of each
//! such node's room, in the scheduler's own milli-units: its allocatable (the larger of what the Node and its NodeClaim report) less
//! the requests of its pods that are not terminal. The scheduler starts every existing node from
//! at most that room (it also takes DaemonSet overhead still due) and only ever takes room away
//! during a simulation, and it places a pod only where every requested resource fits. A pod one
//! of whose requests exceeds the largest such room of every other node can therefore land on no
//! existing node.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::disruption::candidates::{Candidate, PdbLimits, is_currently_reschedulable};
use crate::model::Timestamp;
use crate::state::{ClusterSnapshot, StateNode};

/// The largest room of one resource over the snapshot's nodes, twice: so the largest room of
/// every node but one is known.
#[derive(Debug, Clone, Copy, Default)]
struct TopTwo<'s> {
    first: Option<(i64, &'s Arc<StateNode>)>,
    second: Option<(i64, &'s Arc<StateNode>)>,
}

impl<'s> TopTwo<'s> {
    fn offer(&mut self, room: i64, node: &'s Arc<StateNode>) {
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
    fn largest_without(&self, node: &Arc<StateNode>) -> i64 {
        let pick = match self.first {
            Some((_, n)) if Arc::ptr_eq(n, node) => self.second,
            other => other,
        };
        pick.map_or(0, |(room, _)| room).max(0)
    }
}

/// What the pre-check reads from a pass's snapshot, built once per pass.
pub(super) struct SingleNodePrecheck<'s> {
    /// The cheapest available offering over every NodePool's instance types.
    cheapest: f64,
    /// Per resource name, the largest rooms (milli-units) over the snapshot's nodes.
    room: BTreeMap<String, TopTwo<'s>>,
    pdbs: PdbLimits,
    now: Timestamp,
}

impl<'s> SingleNodePrecheck<'s> {
    /// The pre-check over `snapshot` at `now` (the snapshot the simulations run on).
    pub(super) fn new(snapshot: &'s ClusterSnapshot, now: Timestamp) -> Self {
        let cheapest = snapshot
            .node_pools
            .iter()
            .flat_map(|p| p.instance_types.iter())
            .flat_map(|it| it.available_offerings().map(|o| o.price))
            .min_by(f64::total_cmp)
            .unwrap_or(f64::INFINITY);
        let mut room: BTreeMap<String, TopTwo<'s>> = BTreeMap::new();
        let mut node_room: BTreeMap<String, i64> = BTreeMap::new();
        for sn in &snapshot.nodes {
            // Deleting nodes take no pods; a displaced pod placed on an uninitialized node fails
            // the simulation (upstream: "would schedule against uninitialized nodeclaim").
            if sn.is_deleting() || !sn.initialized() {
                continue;
            }
            node_room.clear();
            let reported = sn.node.as_ref().map(|n| &n.allocatable);
            let claimed = sn.node_claim.as_ref().map(|c| &c.status.allocatable);
            for list in [reported, claimed].into_iter().flatten() {
                for (name, q) in list.iter() {
                    let m = q.milli_value();
                    node_room
                        .entry(name.to_string())
                        .and_modify(|r| *r = (*r).max(m))
                        .or_insert(m);
                }
            }
            for p in sn.pods.iter().filter(|p| !p.is_terminal()) {
                for (name, q) in &p.scheduling_requests() {
                    let r = node_room.entry(name.to_string()).or_insert(0);
                    *r = r.saturating_sub(q.milli_value());
                }
            }
            for (name, r) in &node_room {
                match room.get_mut(name.as_str()) {
                    Some(t) => t.offer(*r, sn),
                    None => {
                        let mut t = TopTwo::default();
                        t.offer(*r, sn);
                        room.insert(name.clone(), t);
                    }
                }
            }
        }
        SingleNodePrecheck {
            cheapest,
            room,
            pdbs: PdbLimits::new(&snapshot.pdbs),
            now,
        }
    }

    /// Why consolidating `c` alone cannot succeed, when that is certain; `None` when only the
    /// simulation can tell.
    pub(super) fn hopeless(&self, c: &Candidate) -> Option<String> {
        // A replacement needs an option strictly cheaper than the candidate.
        let cheapest_or_cheaper = matches!(
            c.price.partial_cmp(&self.cheapest),
            Some(std::cmp::Ordering::Less | std::cmp::Ordering::Equal)
        );
        if !cheapest_or_cheaper || c.node.is_deleting() {
            return None;
        }
        for p in c.reschedulable_pods() {
            if !is_currently_reschedulable(p, &self.pdbs, self.now) {
                continue;
            }
            for (name, q) in &p.scheduling_requests() {
                let wanted = q.milli_value();
                if wanted <= 0 {
                    continue;
                }
                let largest = self
                    .room
                    .get(name)
                    .map_or(0, |t| t.largest_without(&c.node));
                if wanted > largest {
                    return Some(format!(
                        "pod {} fits on no other node ({name}: {wanted}m wanted, at most {largest}m free) and no instance type launches cheaper than the candidate",
                        p.key()
                    ));
                }
            }
        }
        None
    }
}

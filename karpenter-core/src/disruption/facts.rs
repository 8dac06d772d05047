//! What a disruption pass reads of each snapshot node that depends on the node alone, computed
//! once per node and shared: by the candidate checks and descriptions, the budgets' node counts
//! and the consolidation pre-checks' rooms of one pass, and, through the memo the operator keeps
//! in its snapshots, by every later pass while the node's snapshot entry is unchanged.
//!
//! Entries are keyed by the node's [`Arc`] and hold it: a snapshot node behind an `Arc` cannot
//! change (a simulation that changes a node replaces it with [`Arc::make_mut`], which copies a
//! shared node), so an entry is valid for exactly as long as it exists. Nothing here depends on
//! the time, the NodePools or the rest of the snapshot.
//!
//! The readings the facts are made of live here too, below every module that reads the facts
//! (the budgets, the candidates, the simulation and the consolidation pre-checks), so that none
//! of them is imported back: whether a node counts towards and consumes budget (re-exported by
//! [`super::budgets`]), its do-not-disrupt annotation, whether its stored Node reads as is, and
//! its room for displaced pods. The pod predicates they use are in [`super::pods`].

use std::sync::Arc;

use smallvec::SmallVec;

use crate::api::{ConditionStatus, find_condition};
use crate::labels;
use crate::model::{ClusterNode, Pod};
use crate::resources::{Quantity, names};
use crate::state::{ClusterSnapshot, StateNode};

use super::cost;
use super::pods::is_reschedulable;

/// The facts of one node (see the [module documentation](self)).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct NodeFacts {
    /// The `karpenter.sh/nodepool` label of [`StateNode::labels`].
    pub(crate) nodepool: Option<Box<str>>,
    /// The `node.kubernetes.io/instance-type` label.
    pub(crate) instance_type: Option<Box<str>>,
    /// The `topology.kubernetes.io/zone` label.
    pub(crate) zone: Option<Box<str>>,
    /// The `karpenter.sh/capacity-type` label.
    pub(crate) capacity_type: Option<Box<str>>,
    /// [`StateNode::initialized`].
    pub(crate) initialized: bool,
    /// [`StateNode::is_deleting`].
    pub(crate) deleting: bool,
    /// The node has a stored Node that reads as is as a cluster node
    /// ([`stored_node_reads_as_is`]).
    pub(crate) node_reads_as_is: bool,
    /// The node's `karpenter.sh/do-not-disrupt` annotation is `"true"`.
    pub(crate) do_not_disrupt: bool,
    /// Positions in `node.pods` of the pods [`is_reschedulable`] accepts, in node order.
    pub(crate) reschedulable: Arc<[u32]>,
    /// 1 + the reschedulable pods' positive eviction costs.
    pub(crate) reschedule_disruption_cost: f64,
    /// [`counts_towards_budget`].
    pub(crate) counts_towards_budget: bool,
    /// [`is_consuming_budget`].
    pub(crate) consuming_budget: bool,
    /// Per resource, the node's room for displaced pods in milli-units (the consolidation
    /// pre-checks' upper bound; see `methods::precheck`).
    pub(crate) room: Vec<(Box<str>, i64)>,
}

impl NodeFacts {
    /// The facts of `node`.
    pub(crate) fn of(node: &StateNode) -> NodeFacts {
        let known = node.well_known_labels();
        let reschedulable: Arc<[u32]> = node
            .pods
            .iter()
            .enumerate()
            .filter(|(_, p)| is_reschedulable(p))
            .filter_map(|(i, _)| u32::try_from(i).ok())
            .collect();
        let reschedule_disruption_cost = cost::reschedule_disruption_cost(
            reschedulable
                .iter()
                .filter_map(|&i| node.pods.get(i as usize)),
        );
        NodeFacts {
            nodepool: known.nodepool.map(Box::from),
            instance_type: known.instance_type.map(Box::from),
            zone: known.zone.map(Box::from),
            capacity_type: known.capacity_type.map(Box::from),
            initialized: node.initialized(),
            deleting: node.is_deleting(),
            node_reads_as_is: stored_node_reads_as_is(node),
            do_not_disrupt: node_do_not_disrupt(node),
            reschedulable,
            reschedule_disruption_cost,
            counts_towards_budget: counts_towards_budget(node),
            consuming_budget: is_consuming_budget(node),
            room: node_room(node),
        }
    }
}

/// The facts of `node`, from the memo `snapshot` carries ([`ClusterSnapshot::memo`]).
pub(crate) fn of(snapshot: &ClusterSnapshot, node: &Arc<StateNode>) -> Arc<NodeFacts> {
    snapshot.memo.get_or_compute(node, || NodeFacts::of(node))
}

// ---------------------------------------------------------------------------------------------
// The readings (shared with the budgets, the candidates, the simulation and the pre-checks)
// ---------------------------------------------------------------------------------------------

/// Whether a node counts towards its pool's budget: managed, initialized, and its NodeClaim not
/// `InstanceTerminating`.
pub fn counts_towards_budget(node: &StateNode) -> bool {
    let Some(claim) = &node.node_claim else {
        return false;
    };
    let terminating = find_condition(
        &claim.status.conditions,
        crate::api::condition_types::INSTANCE_TERMINATING,
    )
    .is_some_and(|c| c.status == ConditionStatus::True);
    node.initialized() && !terminating
}

/// Whether a counted node already consumes budget: its Node is not Ready, or it is being
/// deleted or marked for deletion.
pub fn is_consuming_budget(node: &StateNode) -> bool {
    !node.ready || node.is_deleting()
}

/// Whether the node's `karpenter.sh/do-not-disrupt` annotation is `"true"` (other values do not
/// block).
pub(crate) fn node_do_not_disrupt(node: &StateNode) -> bool {
    node.annotations()
        .get(labels::DO_NOT_DISRUPT_ANNOTATION)
        .is_some_and(|v| v == "true")
}

/// Whether the node has a stored Node that [`cluster_node`](super::simulate::cluster_node) would
/// return unchanged.
pub(crate) fn stored_node_reads_as_is(node: &StateNode) -> bool {
    let Some(n) = &node.node else {
        return false;
    };
    let initialized = node.initialized();
    let claim_agrees = node.node_claim.as_ref().is_none_or(|c| {
        n.managed && n.startup_taints == c.spec.startup_taints && (initialized || reports_all(n, c))
    });
    claim_agrees && n.initialized == initialized && n.marked_for_deletion == node.is_deleting()
}

/// Whether a Node reports every resource its NodeClaim's status has (nothing to fall back on).
fn reports_all(node: &ClusterNode, claim: &crate::api::NodeClaim) -> bool {
    let covered = |reported: &crate::resources::ResourceList,
                   fallback: &crate::resources::ResourceList| {
        fallback
            .iter()
            .all(|(name, q)| q.is_zero() || !reported.get_or_zero(name).is_zero())
    };
    covered(&node.capacity, &claim.status.capacity)
        && covered(&node.allocatable, &claim.status.allocatable)
}

/// The room of `sn` for displaced pods, per resource, in milli-units (see the module
/// documentation of `methods::precheck`): the larger of what its Node and its NodeClaim report as
/// allocatable, less the requests of its pods that are not terminal.
pub(crate) fn node_room(sn: &StateNode) -> Vec<(Box<str>, i64)> {
    let mut node_room: Vec<(&str, i64)> = Vec::new();
    let reported = sn.node.as_ref().map(|n| &n.allocatable);
    let claimed = sn.node_claim.as_ref().map(|c| &c.status.allocatable);
    for list in [reported, claimed].into_iter().flatten() {
        for (name, q) in list.iter() {
            let m = q.milli_value();
            let r = slot(&mut node_room, name, m);
            *r = (*r).max(m);
        }
    }
    for p in sn.pods.iter().filter(|p| !p.is_terminal()) {
        for (name, m) in scheduling_milli(p) {
            let r = slot(&mut node_room, name, 0);
            *r = r.saturating_sub(m);
        }
    }
    node_room
        .into_iter()
        .map(|(name, r)| (Box::from(name), r))
        .collect()
}

/// The value of `name` in a short list, added as `init` when missing.
fn slot<'a, 'v>(list: &'v mut Vec<(&'a str, i64)>, name: &'a str, init: i64) -> &'v mut i64 {
    let i = match list.iter().position(|(n, _)| *n == name) {
        Some(i) => i,
        None => {
            list.push((name, init));
            list.len() - 1
        }
    };
    &mut list[i].1
}

/// [`Pod::scheduling_requests`] in milli-units, in name order, without building the list.
pub(crate) fn scheduling_milli(p: &Pod) -> SmallVec<[(&str, i64); 4]> {
    let one = Quantity::from_units(1);
    let mut out: SmallVec<[(&str, i64); 4]> = SmallVec::new();
    let mut pods_done = false;
    for (name, q) in p.requests.iter() {
        if !pods_done && name >= names::PODS {
            pods_done = true;
            if name == names::PODS {
                out.push((names::PODS, (q + one).milli_value()));
                continue;
            }
            out.push((names::PODS, one.milli_value()));
        }
        out.push((name, q.milli_value()));
    }
    if !pods_done {
        out.push((names::PODS, one.milli_value()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::labels;
    use crate::model::ClusterNode;
    use crate::state::NodeMemo;

    fn node(name: &str, pool: &str) -> StateNode {
        let mut n = ClusterNode::new(name);
        n.labels.insert(labels::NODEPOOL.into(), pool.into());
        n.labels.insert(labels::ZONE.into(), "zone-a".into());
        StateNode::new(Some(n), None, Vec::new())
    }

    #[test]
    fn facts_are_computed_once_per_node_and_dropped_with_it() {
        let snapshot = ClusterSnapshot::new(Vec::new(), [node("a", "p"), node("b", "q")]);
        let a = Arc::clone(&snapshot.nodes[0]);
        let first = of(&snapshot, &a);
        assert_eq!(*first, NodeFacts::of(&a));
        assert_eq!(first.nodepool.as_deref(), Some("p"));
        assert_eq!(first.zone.as_deref(), Some("zone-a"));
        assert!(Arc::ptr_eq(&first, &of(&snapshot, &a)), "kept");
        // A copy shares the memo; a changed node is a new entry, its old one stays until a
        // snapshot without it is built over the memo.
        let mut copy = snapshot.clone();
        Arc::make_mut(&mut copy.nodes[0])
            .node
            .as_mut()
            .map(|n| n.labels.insert(labels::NODEPOOL.into(), "r".into()));
        assert_eq!(of(&copy, &copy.nodes[0]).nodepool.as_deref(), Some("r"));
        assert_eq!(of(&snapshot, &a).nodepool.as_deref(), Some("p"));
        assert_eq!(copy.memo.len(), 2);
        let memo: Arc<NodeMemo> = Arc::clone(&copy.memo);
        let rebuilt = ClusterSnapshot::new(Vec::new(), []).with_memo_of(&memo);
        assert_eq!(
            rebuilt.memo.len(),
            0,
            "no node of the new snapshot: nothing kept"
        );
    }
}

//! What a disruption pass reads of each snapshot node that depends on the node alone, computed
//! once per node and shared: by the candidate checks and descriptions, the budgets' node counts
//! and the consolidation pre-checks' rooms of one pass, and, through the memo the operator keeps
//! in its snapshots, by every later pass while the node's snapshot entry is unchanged.
//!
//! Entries are keyed by the node's [`Arc`] and hold it: a snapshot node behind an `Arc` cannot
//! change (a simulation that changes a node replaces it with [`Arc::make_mut`], which copies a
//! shared node), so an entry is valid for exactly as long as it exists. Nothing here depends on
//! the time, the NodePools or the rest of the snapshot.

use std::sync::Arc;

use crate::state::{ClusterSnapshot, StateNode};

use super::budgets::{counts_towards_budget, is_consuming_budget};
use super::candidates::{is_reschedulable, node_do_not_disrupt};
use super::cost;
use super::simulate::stored_node_reads_as_is;

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
            room: super::methods::node_room(node),
        }
    }
}

/// The facts of `node`, from the memo `snapshot` carries ([`ClusterSnapshot::memo`]).
pub(crate) fn of(snapshot: &ClusterSnapshot, node: &Arc<StateNode>) -> Arc<NodeFacts> {
    snapshot.memo.get_or_compute(node, || NodeFacts::of(node))
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

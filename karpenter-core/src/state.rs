//! A snapshot of the cluster that the scheduler and the disruption planner read.
//!
//! The caller builds it (from a `kubectl get -o yaml` dump, from a controller's informer caches,
//! or by hand in tests); nothing here performs I/O. Nodes are held behind [`Arc`], so cloning a
//! snapshot to simulate a change costs one pointer copy per node, and a simulation that changes a
//! node replaces only that node ([`Arc::make_mut`]).

use std::any::Any;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};

use crate::api::{self, ConditionStatus, NodeClaim, NodePool};
use crate::labels;
use crate::model::{ClusterNode, DaemonSet, InstanceType, Pod, PodDisruptionBudget, Timestamp};

/// A NodePool with the instance types its cloud provider offers for it. Build it with
/// [`NodePoolState::new`] (the struct is `#[non_exhaustive]`).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct NodePoolState {
    /// The NodePool.
    pub node_pool: NodePool,
    /// Its instance types (empty when the provider returned none or failed).
    pub instance_types: Vec<Arc<InstanceType>>,
    /// Whether the NodePool's `Ready` condition is true (only ready pools provision).
    pub ready: bool,
}

impl NodePoolState {
    /// A ready NodePool offering these instance types.
    pub fn new(node_pool: NodePool, instance_types: Vec<Arc<InstanceType>>) -> NodePoolState {
        NodePoolState {
            node_pool,
            instance_types,
            ready: true,
        }
    }

    /// The pool with its `Ready` condition true or not.
    pub fn with_ready(mut self, ready: bool) -> NodePoolState {
        self.ready = ready;
        self
    }
}

/// The well-known labels of a node ([`StateNode::well_known_labels`]); `None` where missing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct WellKnownLabels<'a> {
    /// `karpenter.sh/nodepool`.
    pub nodepool: Option<&'a str>,
    /// `node.kubernetes.io/instance-type`.
    pub instance_type: Option<&'a str>,
    /// `topology.kubernetes.io/zone`.
    pub zone: Option<&'a str>,
    /// `karpenter.sh/capacity-type`.
    pub capacity_type: Option<&'a str>,
}

/// One node of the cluster as Karpenter tracks it: a NodeClaim, its Node, or both, with the pods
/// bound to it. The Node is held in its scheduling view, [`ClusterNode`] (see there for how the
/// three node types relate). Build it with [`StateNode::new`] and the `with_*` methods (the
/// struct is `#[non_exhaustive]`).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct StateNode {
    /// The Node, once registered.
    pub node: Option<ClusterNode>,
    /// The NodeClaim, for managed nodes.
    pub node_claim: Option<NodeClaim>,
    /// Pods bound to the node (`spec.nodeName`), all of them.
    pub pods: Vec<Pod>,
    /// Marked for deletion in memory by a disruption command (or being deleted).
    pub marked_for_deletion: bool,
    /// Nominated for pending pods until this time.
    pub nominated_until: Option<Timestamp>,
    /// Whether the Node's `Ready` condition is true.
    pub ready: bool,
    /// Per-CSI-driver volume limits of the node (from its CSINode); empty when unknown.
    pub volume_limits: crate::volumes::CsiNodeLimits,
}

impl StateNode {
    /// A ready node from its Node (once registered) and its NodeClaim (for managed nodes), with
    /// these bound pods; not marked for deletion, not nominated, without volume limits.
    pub fn new(node: Option<ClusterNode>, node_claim: Option<NodeClaim>, pods: Vec<Pod>) -> Self {
        StateNode {
            node,
            node_claim,
            pods,
            marked_for_deletion: false,
            nominated_until: None,
            ready: true,
            volume_limits: crate::volumes::CsiNodeLimits::new(),
        }
    }

    /// The node with its `Ready` condition true or not.
    pub fn with_ready(mut self, ready: bool) -> Self {
        self.ready = ready;
        self
    }

    /// The node marked (or not) for deletion.
    pub fn with_marked_for_deletion(mut self, marked: bool) -> Self {
        self.marked_for_deletion = marked;
        self
    }

    /// The node nominated for pending pods until `until`.
    pub fn with_nominated_until(mut self, until: Timestamp) -> Self {
        self.nominated_until = Some(until);
        self
    }

    /// The node with these per-CSI-driver volume limits.
    pub fn with_volume_limits(mut self, limits: crate::volumes::CsiNodeLimits) -> Self {
        self.volume_limits = limits;
        self
    }

    /// The node's name: the Node's, else the NodeClaim's.
    pub fn name(&self) -> &str {
        match (&self.node, &self.node_claim) {
            (Some(n), _) => &n.name,
            (None, Some(c)) => c.name(),
            (None, None) => "",
        }
    }

    /// The labels that count (upstream `NewCandidate`, upstream `StateNode.Labels`): the Node's
    /// once registered (unmanaged nodes always are), the NodeClaim's before.
    pub fn labels(&self) -> &BTreeMap<String, String> {
        static EMPTY: BTreeMap<String, String> = BTreeMap::new();
        match (&self.node, &self.node_claim) {
            (Some(n), _) if self.registered() => &n.labels,
            (_, Some(c)) => &c.metadata.labels,
            (Some(n), None) => &n.labels,
            (None, None) => &EMPTY,
        }
    }

    /// The annotations that count (upstream `NewCandidate`): the Node's once registered, the
    /// NodeClaim's before.
    pub fn annotations(&self) -> &BTreeMap<String, String> {
        static EMPTY: BTreeMap<String, String> = BTreeMap::new();
        match (&self.node, &self.node_claim) {
            (Some(n), _) if self.registered() => &n.annotations,
            (_, Some(c)) => &c.metadata.annotations,
            (Some(n), None) => &n.annotations,
            (None, None) => &EMPTY,
        }
    }

    /// Whether the Node carries `karpenter.sh/registered=true` (unmanaged nodes count as
    /// registered; a NodeClaim without a Node is not).
    pub fn registered(&self) -> bool {
        if !self.managed() {
            return true;
        }
        self.node
            .as_ref()
            .and_then(|n| n.labels.get(labels::REGISTERED))
            .is_some_and(|v| v == "true")
    }

    /// The NodePool, instance-type, zone and capacity-type labels of [`StateNode::labels`], read
    /// in one pass over the labels (cheaper than four look-ups for a caller that needs several).
    pub fn well_known_labels(&self) -> WellKnownLabels<'_> {
        let mut known = WellKnownLabels::default();
        for (key, value) in self.labels() {
            let slot = match key.as_str() {
                labels::NODEPOOL => &mut known.nodepool,
                labels::INSTANCE_TYPE => &mut known.instance_type,
                labels::ZONE => &mut known.zone,
                labels::CAPACITY_TYPE => &mut known.capacity_type,
                _ => continue,
            };
            *slot = Some(value.as_str());
        }
        known
    }

    /// The NodePool label.
    pub fn nodepool(&self) -> Option<&str> {
        self.labels().get(labels::NODEPOOL).map(String::as_str)
    }

    /// Whether Karpenter manages the node (it has a NodeClaim).
    pub fn managed(&self) -> bool {
        self.node_claim.is_some()
    }

    /// Whether the Node carries `karpenter.sh/initialized=true` (unmanaged nodes count as
    /// initialized).
    pub fn initialized(&self) -> bool {
        if !self.managed() {
            return true;
        }
        self.node
            .as_ref()
            .and_then(|n| n.labels.get(labels::INITIALIZED))
            .is_some_and(|v| v == "true")
    }

    /// Whether the node is being deleted or is marked for deletion: the in-memory mark, a
    /// NodeClaim deletion timestamp or `InstanceTerminating=True`, or (without a NodeClaim) a
    /// Node that is being deleted.
    pub fn is_deleting(&self) -> bool {
        if self.marked_for_deletion {
            return true;
        }
        match &self.node_claim {
            Some(c) => {
                c.metadata.deletion_timestamp.is_some()
                    || api::find_condition(
                        &c.status.conditions,
                        crate::api::condition_types::INSTANCE_TERMINATING,
                    )
                    .is_some_and(|cond| cond.status == ConditionStatus::True)
            }
            None => self.node.as_ref().is_some_and(|n| n.marked_for_deletion),
        }
    }

    /// Whether the node is nominated at `now`.
    pub fn is_nominated(&self, now: Timestamp) -> bool {
        self.nominated_until.is_some_and(|t| t > now)
    }

    /// The `node.kubernetes.io/instance-type` label.
    pub fn instance_type(&self) -> Option<&str> {
        self.labels().get(labels::INSTANCE_TYPE).map(String::as_str)
    }

    /// The `topology.kubernetes.io/zone` label.
    pub fn zone(&self) -> Option<&str> {
        self.labels().get(labels::ZONE).map(String::as_str)
    }

    /// The `karpenter.sh/capacity-type` label.
    pub fn capacity_type(&self) -> Option<&str> {
        self.labels().get(labels::CAPACITY_TYPE).map(String::as_str)
    }

    /// The NodeClaim's provider id, else the node name.
    pub fn provider_id(&self) -> &str {
        self.node_claim
            .as_ref()
            .and_then(|c| c.status.provider_id.as_deref())
            .filter(|p| !p.is_empty())
            .unwrap_or_else(|| self.name())
    }
}

/// Everything the disruption planner (and a provisioning round) reads about the cluster. Build
/// it with [`ClusterSnapshot::new`] and the `with_*` methods (the struct is
/// `#[non_exhaustive]`: what the planner reads will grow).
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct ClusterSnapshot {
    /// NodePools with their instance types.
    pub node_pools: Vec<NodePoolState>,
    /// Nodes and NodeClaims with their bound pods.
    pub nodes: Vec<Arc<StateNode>>,
    /// Pods waiting for capacity (provisionable).
    pub pending_pods: Vec<Pod>,
    /// DaemonSets.
    pub daemonsets: Vec<DaemonSet>,
    /// PodDisruptionBudgets.
    pub pdbs: Vec<PodDisruptionBudget>,
    /// Namespace labels, for affinity terms with namespace selectors.
    pub namespace_labels: BTreeMap<String, BTreeMap<String, String>>,
    /// PersistentVolumeClaims, PersistentVolumes and StorageClasses.
    pub volumes: crate::volumes::VolumeCatalog,
    /// How many CapacityBuffer virtual pods the caller's last provisioning pass placed on each
    /// existing node, by node name (upstream's `bufferPodCounts`, rebuilt after every provisioning
    /// pass and only filled with the `CapacityBuffer` feature gate on). Emptiness does not delete a
    /// node with a positive count (upstream `disruption/emptiness.go`). Nodes without an entry host
    /// none.
    pub buffer_pod_counts: BTreeMap<String, usize>,
    /// The CapacityBuffer virtual pods (the provisioner's virtual-pod cache). Disruption
    /// simulations count them as pending pods when the `CapacityBuffer` gate
    /// ([`DisruptionOptions::capacity_buffer`](crate::disruption::DisruptionOptions::capacity_buffer))
    /// is on (upstream `SimulateScheduling`), so a replacement must leave room for them; their own
    /// failure to fit never blocks a disruption.
    pub buffer_pods: Vec<Pod>,
    /// Values derived from single nodes (the disruption pass's node facts), computed on first
    /// use and shared by the snapshot's copies; a caller that builds its snapshots from a cache of
    /// unchanged nodes passes the memo on ([`ClusterSnapshot::with_memo_of`]) so later passes
    /// reuse them.
    pub(crate) memo: Arc<NodeMemo>,
}

impl ClusterSnapshot {
    /// This snapshot sharing `memo` for its derived node values, with the entries of nodes it
    /// no longer holds dropped from the memo.
    pub(crate) fn with_memo_of(mut self, memo: &Arc<NodeMemo>) -> Self {
        memo.retain_nodes_of(&self);
        self.memo = Arc::clone(memo);
        self
    }

    /// A snapshot of these NodePools and nodes, with nothing else (no pending pods, DaemonSets,
    /// budgets, namespace labels, volumes or buffer pods).
    pub fn new(
        node_pools: Vec<NodePoolState>,
        nodes: impl IntoIterator<Item = StateNode>,
    ) -> ClusterSnapshot {
        ClusterSnapshot {
            node_pools,
            nodes: nodes.into_iter().map(Arc::new).collect(),
            ..ClusterSnapshot::default()
        }
    }

    /// The snapshot with these pending pods added.
    pub fn with_pending_pods(mut self, pods: impl IntoIterator<Item = Pod>) -> Self {
        self.pending_pods.extend(pods);
        self
    }

    /// The snapshot with these DaemonSets added.
    pub fn with_daemonsets(mut self, daemonsets: impl IntoIterator<Item = DaemonSet>) -> Self {
        self.daemonsets.extend(daemonsets);
        self
    }

    /// The snapshot with these PodDisruptionBudgets added.
    pub fn with_pdbs(mut self, pdbs: impl IntoIterator<Item = PodDisruptionBudget>) -> Self {
        self.pdbs.extend(pdbs);
        self
    }

    /// The snapshot with these namespace labels (by namespace name).
    pub fn with_namespace_labels(
        mut self,
        namespace_labels: BTreeMap<String, BTreeMap<String, String>>,
    ) -> Self {
        self.namespace_labels = namespace_labels;
        self
    }

    /// The snapshot with these PersistentVolumeClaims, PersistentVolumes and StorageClasses.
    pub fn with_volumes(mut self, volumes: crate::volumes::VolumeCatalog) -> Self {
        self.volumes = volumes;
        self
    }

    /// The snapshot with these CapacityBuffer virtual pods added.
    pub fn with_buffer_pods(mut self, pods: impl IntoIterator<Item = Pod>) -> Self {
        self.buffer_pods.extend(pods);
        self
    }

    /// The snapshot with these CapacityBuffer virtual pod counts (by node name).
    pub fn with_buffer_pod_counts(mut self, counts: BTreeMap<String, usize>) -> Self {
        self.buffer_pod_counts = counts;
        self
    }

    /// The NodePool named `name`.
    pub fn node_pool(&self, name: &str) -> Option<&NodePoolState> {
        self.node_pools.iter().find(|p| p.node_pool.name() == name)
    }

    /// How many CapacityBuffer virtual pods the last provisioning pass placed on the node named
    /// `node` (0 when it has no entry in [`ClusterSnapshot::buffer_pod_counts`]).
    pub fn buffer_pod_count(&self, node: &str) -> usize {
        self.buffer_pod_counts.get(node).copied().unwrap_or(0)
    }
}

/// A value derived from a node alone, by node (see [`ClusterSnapshot::memo`]). Entries are
/// keyed by the node's [`Arc`] and hold it: a snapshot node behind an `Arc` cannot change (a
/// simulation that changes a node replaces it through [`Arc::make_mut`], which copies a shared
/// node), so an entry is valid for as long as it exists.
#[derive(Default)]
pub(crate) struct NodeMemo {
    entries: Mutex<MemoEntries>,
}

type MemoEntries = rustc_hash::FxHashMap<usize, (Arc<StateNode>, Arc<dyn Any + Send + Sync>)>;

impl fmt::Debug for NodeMemo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("NodeMemo")
    }
}

impl NodeMemo {
    /// The value of `node`, computed by `compute` when the memo has none (or one of another
    /// type).
    pub(crate) fn get_or_compute<T: Any + Send + Sync>(
        &self,
        node: &Arc<StateNode>,
        compute: impl FnOnce() -> T,
    ) -> Arc<T> {
        let key = Arc::as_ptr(node) as usize;
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(value) = entries
            .get(&key)
            .and_then(|(_, v)| Arc::clone(v).downcast::<T>().ok())
        {
            return value;
        }
        let value = Arc::new(compute());
        entries.insert(
            key,
            (
                Arc::clone(node),
                Arc::clone(&value) as Arc<dyn Any + Send + Sync>,
            ),
        );
        value
    }

    /// Forgets the entries of nodes `snapshot` no longer holds.
    fn retain_nodes_of(&self, snapshot: &ClusterSnapshot) {
        let live: rustc_hash::FxHashSet<usize> = snapshot
            .nodes
            .iter()
            .map(|n| Arc::as_ptr(n) as usize)
            .collect();
        self.entries
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|key, _| live.contains(key));
    }

    /// How many nodes have a value.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.entries
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }
}

//! The operator's in-memory view of the cluster, and the [`ClusterSnapshot`] the scheduler and
//! the disruption planner read, built from it.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use crate::api::{NodeClaim, NodePool};
use crate::cloud::UnavailableOffering;
use crate::labels;
use crate::lifecycle::{self, Node};
use crate::model::{
    ClusterNode, DaemonSet, InstanceType, Offering, Pod, PodDisruptionBudget, Timestamp,
};
use crate::resources::{Quantity, ResourceList};
use crate::state::{ClusterSnapshot, NodePoolState, StateNode};

/// Everything the operator knows about the cluster, as the API server last reported it (plus
/// NodeClaims it created and has not seen confirmed yet), and the instance types the cloud
/// provider last reported per NodePool. Iteration orders are by name.
///
/// NodeClaims, Nodes, Pods and VolumeAttachments are written only through the view's own
/// methods, which keep indexes over them (NodeClaims and Nodes by provider id, NodeClaims by
/// NodePool, Pods by Node, the pods waiting for a node, the NodeClaims not launched yet,
/// VolumeAttachments by Node), so the loops' look-ups cost the size of the answer rather than
/// the size of the cluster. Every index is a set of names, so its iteration order is the
/// primary map's.
#[derive(Debug, Clone, Default)]
pub struct ClusterView {
    pub(crate) node_pools: BTreeMap<String, NodePool>,
    pub(crate) instance_types: BTreeMap<String, Vec<Arc<InstanceType>>>,
    claims: BTreeMap<String, NodeClaim>,
    nodes: BTreeMap<String, Node>,
    pods: BTreeMap<String, Pod>,
    pub(crate) daemonsets: BTreeMap<String, DaemonSet>,
    pub(crate) pdbs: BTreeMap<String, PodDisruptionBudget>,
    volume_attachments: BTreeMap<String, String>,
    index: Index,
    cache: SnapshotCache,
}

/// The snapshot's nodes kept from one [`ClusterView::snapshot`] to the next: an entry is built
/// again only when its NodeClaim, its Node or the pods bound to it were written since, or when
/// its in-memory marks (marked for deletion, nominated) differ; the others are shared.
#[derive(Debug, Clone, Default)]
struct SnapshotCache {
    /// Entries of NodeClaims, by NodeClaim name (looked up, never iterated).
    claims: rustc_hash::FxHashMap<String, Arc<StateNode>>,
    /// Entries of unmanaged Nodes without a NodeClaim, by Node name.
    unclaimed: BTreeMap<String, Arc<StateNode>>,
    /// NodeClaims written since the last snapshot (or whose Node was).
    dirty_claims: rustc_hash::FxHashSet<String>,
    /// Names of the Nodes written, or whose bound pods were, since the last snapshot.
    dirty_nodes: rustc_hash::FxHashSet<String>,
    /// The values derived from the entries, passed on to every snapshot (see
    /// [`ClusterSnapshot::with_memo_of`]).
    memo: Arc<crate::state::NodeMemo>,
}

/// Names by a key only ever looked up, never iterated (hashing a long provider id once beats
/// comparing it down a tree); each key's names stay ordered.
type Lookup = rustc_hash::FxHashMap<String, BTreeSet<String>>;

/// The view's indexes (see [`ClusterView`]).
#[derive(Debug, Clone, Default)]
struct Index {
    /// NodeClaim names by non-empty provider id.
    claims_by_provider_id: Lookup,
    /// NodeClaim names by their `karpenter.sh/nodepool` label.
    claims_by_pool: Lookup,
    /// NodeClaims that are not being deleted and have no provider id yet.
    unlaunched: BTreeSet<String>,
    /// Node names by non-empty provider id.
    nodes_by_provider_id: Lookup,
    /// Names of the Nodes without a `karpenter.sh/nodepool` label (unmanaged).
    unmanaged_nodes: BTreeSet<String>,
    /// Pod keys by the name of the node they are bound to.
    pods_by_node: Lookup,
    /// Keys of the pods [`is_provisionable`] accepts.
    provisionable: BTreeSet<String>,
    /// VolumeAttachment names by node name.
    attachments_by_node: Lookup,
    /// Running totals of each NodePool's NodeClaims (by the `karpenter.sh/nodepool` label).
    pool_totals: BTreeMap<String, PoolTotals>,
}

/// The running totals of one NodePool's NodeClaims that its status reports: capacity summed
/// per resource and how many have a node (see [`ClusterView::pool_status_totals`]).
#[derive(Debug, Clone, Default)]
struct PoolTotals {
    /// Per resource name: the sum of the NodeClaims' capacity in nano-units (unclamped), how
    /// many NodeClaims list the resource, and how many of those list it as non-zero.
    capacity: BTreeMap<String, (i128, usize, usize)>,
    /// NodeClaims with a node name.
    nodes: i64,
    /// NodeClaims with a negative capacity entry (the sum is then recomputed in full).
    negative: usize,
}

impl PoolTotals {
    fn apply(&mut self, claim: &NodeClaim, add: bool) {
        let sign = if add { 1 } else { -1 };
        let step = |n: usize| if add { n + 1 } else { n.saturating_sub(1) };
        for (name, q) in claim.status.capacity.iter() {
            let entry = self.capacity.entry(name.to_string()).or_default();
            entry.0 = entry.0.saturating_add(sign * q.nanos());
            entry.1 = step(entry.1);
            if !q.is_zero() {
                entry.2 = step(entry.2);
            }
            if entry.1 == 0 {
                self.capacity.remove(name);
            }
        }
        if claim.status.capacity.iter().any(|(_, q)| q.is_negative()) {
            self.negative = step(self.negative);
        }
        if claim.status.node_name.is_some() {
            self.nodes += sign as i64;
        }
    }
}

/// Adds `name` to the set under `key`.
fn index_add(index: &mut Lookup, key: &str, name: &str) {
    index
        .entry(key.to_string())
        .or_default()
        .insert(name.to_string());
}

/// Removes `name` from the set under `key` (and the set once empty).
fn index_remove(index: &mut Lookup, key: &str, name: &str) {
    if let Some(set) = index.get_mut(key) {
        set.remove(name);
        if set.is_empty() {
            index.remove(key);
        }
    }
}

/// The non-empty provider id of a NodeClaim.
fn claim_provider_id(claim: &NodeClaim) -> Option<&str> {
    claim
        .status
        .provider_id
        .as_deref()
        .filter(|p| !p.is_empty())
}

impl Index {
    fn add_claim(&mut self, name: &str, claim: &NodeClaim) {
        if let Some(pid) = claim_provider_id(claim) {
            index_add(&mut self.claims_by_provider_id, pid, name);
        } else if !lifecycle::claim_is_deleting(claim) {
            self.unlaunched.insert(name.to_string());
        }
        if let Some(pool) = claim.metadata.labels.get(labels::NODEPOOL) {
            index_add(&mut self.claims_by_pool, pool, name);
            self.pool_totals
                .entry(pool.clone())
                .or_default()
                .apply(claim, true);
        }
    }

    fn remove_claim(&mut self, name: &str, claim: &NodeClaim) {
        if let Some(pid) = claim_provider_id(claim) {
            index_remove(&mut self.claims_by_provider_id, pid, name);
        }
        self.unlaunched.remove(name);
        if let Some(pool) = claim.metadata.labels.get(labels::NODEPOOL) {
            index_remove(&mut self.claims_by_pool, pool, name);
            if let Some(totals) = self.pool_totals.get_mut(pool.as_str()) {
                totals.apply(claim, false);
                if totals.capacity.is_empty() && totals.nodes == 0 && totals.negative == 0 {
                    self.pool_totals.remove(pool.as_str());
                }
            }
        }
    }

    fn add_node(&mut self, name: &str, node: &Node) {
        if !node.provider_id.is_empty() {
            index_add(&mut self.nodes_by_provider_id, &node.provider_id, name);
        }
        if !node.labels.contains_key(labels::NODEPOOL) {
            self.unmanaged_nodes.insert(name.to_string());
        }
    }

    fn remove_node(&mut self, name: &str, node: &Node) {
        if !node.provider_id.is_empty() {
            index_remove(&mut self.nodes_by_provider_id, &node.provider_id, name);
        }
        self.unmanaged_nodes.remove(name);
    }

    fn add_pod(&mut self, key: &str, pod: &Pod) {
        if let Some(n) = pod.node_name.as_deref() {
            index_add(&mut self.pods_by_node, n, key);
        }
        if is_provisionable(pod) {
            self.provisionable.insert(key.to_string());
        }
    }

    fn remove_pod(&mut self, key: &str, pod: &Pod) {
        if let Some(n) = pod.node_name.as_deref() {
            index_remove(&mut self.pods_by_node, n, key);
        }
        self.provisionable.remove(key);
    }
}

impl ClusterView {
    /// The NodePools, by name.
    pub fn node_pools(&self) -> &BTreeMap<String, NodePool> {
        &self.node_pools
    }

    /// The instance types the cloud provider last reported for each NodePool.
    pub fn instance_types(&self) -> &BTreeMap<String, Vec<Arc<InstanceType>>> {
        &self.instance_types
    }

    /// The NodeClaims, by name.
    pub fn node_claims(&self) -> &BTreeMap<String, NodeClaim> {
        &self.claims
    }

    /// The Nodes, by name.
    pub fn nodes(&self) -> &BTreeMap<String, Node> {
        &self.nodes
    }

    /// The Pods, by `namespace/name`.
    pub fn pods(&self) -> &BTreeMap<String, Pod> {
        &self.pods
    }

    /// Creates or replaces a NodeClaim (by its name).
    pub(crate) fn put_claim(&mut self, claim: NodeClaim) {
        let name = claim.name().to_string();
        if let Some(old) = self.claims.get(&name) {
            self.index.remove_claim(&name, old);
        }
        self.index.add_claim(&name, &claim);
        self.cache.dirty_claims.insert(name.clone());
        self.claims.insert(name, claim);
    }

    /// Removes a NodeClaim.
    pub(crate) fn remove_claim(&mut self, name: &str) -> Option<NodeClaim> {
        let claim = self.claims.remove(name)?;
        self.index.remove_claim(name, &claim);
        self.cache.dirty_claims.insert(name.to_string());
        Some(claim)
    }

    /// Creates or replaces a Node (by its name).
    pub(crate) fn put_node(&mut self, node: Node) {
        let name = node.name.clone();
        if let Some(old) = self.nodes.get(&name) {
            self.index.remove_node(&name, old);
            let pid = old.provider_id.clone();
            self.node_written(&name, &pid);
        }
        self.index.add_node(&name, &node);
        self.node_written(&name, &node.provider_id);
        self.nodes.insert(name, node);
    }

    /// Removes a Node.
    pub(crate) fn remove_node(&mut self, name: &str) -> Option<Node> {
        let node = self.nodes.remove(name)?;
        self.index.remove_node(name, &node);
        self.node_written(name, &node.provider_id);
        Some(node)
    }

    /// Marks the snapshot entries a write of the Node `name` with `provider_id` touches: its
    /// own, and those of the NodeClaims with that provider id.
    fn node_written(&mut self, name: &str, provider_id: &str) {
        self.cache.dirty_nodes.insert(name.to_string());
        if let Some(claims) = self.index.claims_by_provider_id.get(provider_id) {
            self.cache.dirty_claims.extend(claims.iter().cloned());
        }
    }

    /// Creates or replaces a Pod (by its key).
    pub(crate) fn put_pod(&mut self, pod: Pod) {
        let key = pod.key();
        if let Some(old) = self.pods.get(&key) {
            self.index.remove_pod(&key, old);
            if let Some(n) = &old.node_name {
                self.cache.dirty_nodes.insert(n.clone());
            }
        }
        self.index.add_pod(&key, &pod);
        if let Some(n) = &pod.node_name {
            self.cache.dirty_nodes.insert(n.clone());
        }
        self.pods.insert(key, pod);
    }

    /// Removes a Pod.
    pub(crate) fn remove_pod(&mut self, key: &str) -> Option<Pod> {
        let pod = self.pods.remove(key)?;
        self.index.remove_pod(key, &pod);
        if let Some(n) = &pod.node_name {
            self.cache.dirty_nodes.insert(n.clone());
        }
        Some(pod)
    }

    /// Creates or replaces a VolumeAttachment (name → node name).
    pub(crate) fn put_volume_attachment(&mut self, name: String, node_name: String) {
        if let Some(old) = self.volume_attachments.get(&name) {
            index_remove(&mut self.index.attachments_by_node, old, &name);
        }
        index_add(&mut self.index.attachments_by_node, &node_name, &name);
        self.volume_attachments.insert(name, node_name);
    }

    /// Removes a VolumeAttachment; returns the node it was on.
    pub(crate) fn remove_volume_attachment(&mut self, name: &str) -> Option<String> {
        let node = self.volume_attachments.remove(name)?;
        index_remove(&mut self.index.attachments_by_node, &node, name);
        Some(node)
    }

    /// The Nodes whose provider id is `provider_id`, by name.
    pub fn nodes_with_provider_id(&self, provider_id: &str) -> Vec<Node> {
        self.node_refs_with_provider_id(provider_id)
            .cloned()
            .collect()
    }

    /// The Nodes whose provider id is `provider_id`, by name, borrowed.
    pub(crate) fn node_refs_with_provider_id<'a>(
        &'a self,
        provider_id: &str,
    ) -> impl Iterator<Item = &'a Node> + 'a {
        self.index
            .nodes_by_provider_id
            .get(provider_id)
            .into_iter()
            .flatten()
            .filter_map(|n| self.nodes.get(n))
    }

    /// The Nodes of a NodeClaim (by its provider id; none before launch).
    pub fn nodes_of_claim(&self, claim: &NodeClaim) -> Vec<Node> {
        self.node_refs_of_claim(claim).cloned().collect()
    }

    /// [`ClusterView::nodes_of_claim`], borrowed.
    pub(crate) fn node_refs_of_claim<'a>(
        &'a self,
        claim: &NodeClaim,
    ) -> impl Iterator<Item = &'a Node> + 'a {
        claim
            .status
            .provider_id
            .as_deref()
            .map(|p| self.node_refs_with_provider_id(p))
            .into_iter()
            .flatten()
    }

    /// The NodeClaim whose provider id is `provider_id` (the first by name when several are).
    pub fn claim_with_provider_id(&self, provider_id: &str) -> Option<&NodeClaim> {
        self.index
            .claims_by_provider_id
            .get(provider_id)?
            .iter()
            .find_map(|n| self.claims.get(n))
    }

    /// The NodeClaims labelled with the NodePool `pool`, by name.
    pub fn claims_of_pool<'a>(&'a self, pool: &str) -> impl Iterator<Item = &'a NodeClaim> + 'a {
        self.index
            .claims_by_pool
            .get(pool)
            .into_iter()
            .flatten()
            .filter_map(|n| self.claims.get(n))
    }

    /// What the status of the NodePool `pool` reports about its NodeClaims: their capacity
    /// summed per resource, and how many have a node. The same list, quantities and formats as
    /// adding every NodeClaim's capacity in name order ([`ResourceList::add_assign`]), read
    /// from running totals: only the formats are looked up in the NodeClaims (each resource
    /// prints as the first NodeClaim with a non-zero quantity of it, else the last listing it).
    pub(crate) fn pool_status_totals(&self, pool: &str) -> (ResourceList, i64) {
        let Some(totals) = self.index.pool_totals.get(pool) else {
            return (ResourceList::new(), 0);
        };
        if totals.negative > 0 {
            let mut resources = ResourceList::new();
            for c in self.claims_of_pool(pool) {
                resources.add_assign(&c.status.capacity);
            }
            return (resources, totals.nodes);
        }
        let mut resources = ResourceList::new();
        for (name, (sum, _, nonzero)) in &totals.capacity {
            let format = if *nonzero > 0 {
                self.claims_of_pool(pool)
                    .filter_map(|c| c.status.capacity.get(name))
                    .find(|q| !q.is_zero())
            } else {
                self.index
                    .claims_by_pool
                    .get(pool)
                    .into_iter()
                    .flatten()
                    .rev()
                    .filter_map(|n| self.claims.get(n))
                    .find_map(|c| c.status.capacity.get(name))
            }
            .map(|q| q.format())
            .unwrap_or_default();
            resources.insert(name.clone(), Quantity::from_nanos(*sum, format));
        }
        (resources, totals.nodes)
    }

    /// VolumeAttachments on the node named `node`, by name.
    pub fn volume_attachments_on(&self, node: &str) -> Vec<&str> {
        self.index
            .attachments_by_node
            .get(node)
            .into_iter()
            .flatten()
            .map(String::as_str)
            .collect()
    }

    /// Pods bound to the node named `node`, by key.
    pub fn pods_on(&self, node: &str) -> Vec<Pod> {
        self.pod_refs_on(node).cloned().collect()
    }

    /// Pods bound to the node named `node`, by key, borrowed.
    pub(crate) fn pod_refs_on<'a>(&'a self, node: &str) -> impl Iterator<Item = &'a Pod> + 'a {
        self.index
            .pods_by_node
            .get(node)
            .into_iter()
            .flatten()
            .filter_map(|k| self.pods.get(k))
    }

    /// Whether every NodeClaim that is not being deleted has launched (a provider id): upstream's
    /// "cluster state synced" condition for provisioning and disruption.
    pub fn claims_launched(&self) -> bool {
        self.index.unlaunched.is_empty()
    }

    /// Keys of the pods waiting for a node (see [`ClusterView::pending_pods`]), by key.
    pub(crate) fn pending_pod_keys(&self) -> impl Iterator<Item = &String> {
        self.index.provisionable.iter()
    }

    /// Pods waiting for a node: unbound, not terminal or terminating, not owned by a DaemonSet
    /// or a Node (mirror pods), by key.
    pub fn pending_pods(&self) -> Vec<Pod> {
        self.index
            .provisionable
            .iter()
            .filter_map(|k| self.pods.get(k))
            .cloned()
            .collect()
    }

    /// The snapshot the scheduler and the disruption planner read: every NodeClaim with its
    /// Node (matched by provider id) and the Nodes without a NodeClaim, with their bound pods.
    /// `marked` holds provider ids marked for deletion in memory, `nominated` nomination
    /// deadlines by node name, `unavailable` offerings to hide from the instance types.
    ///
    /// The nodes' entries are kept for the next snapshot, which builds again only those whose
    /// NodeClaim, Node, bound pods or marks changed (the others are the same `Arc`s).
    pub(crate) fn snapshot(
        &mut self,
        marked: &BTreeSet<String>,
        nominated: &BTreeMap<String, Timestamp>,
        unavailable: &BTreeSet<UnavailableOffering>,
    ) -> ClusterSnapshot {
        let mut cache = std::mem::take(&mut self.cache);
        // Entries of NodeClaims gone since the last snapshot (every other NodeClaim's entry is
        // checked below, so none outlives a change).
        for name in &cache.dirty_claims {
            if !self.claims.contains_key(name) {
                cache.claims.remove(name);
            }
        }
        let mut unclaimed_entries = BTreeMap::new();
        let mut nodes = Vec::with_capacity(self.claims.len());
        for claim in self.claims.values() {
            let marked_for_deletion = claim_provider_id(claim).is_some_and(|p| marked.contains(p));
            // An entry whose NodeClaim was not written since, nor any Node with its provider id
            // (a write of either marks the NodeClaim dirty), still has the NodeClaim's first
            // Node, so its name: it is kept unless the pods bound there or the marks changed.
            let kept = cache
                .claims
                .get(claim.name())
                .filter(|sn| {
                    let name = sn.name();
                    !cache.dirty_claims.contains(claim.name())
                        && !cache.dirty_nodes.contains(name)
                        && sn.marked_for_deletion == marked_for_deletion
                        && sn.nominated_until == nominated.get(name).copied()
                })
                .map(Arc::clone);
            let sn = match kept {
                Some(sn) => sn,
                None => {
                    // The first Node by name with the NodeClaim's provider id.
                    let node = claim_provider_id(claim)
                        .and_then(|p| self.node_refs_with_provider_id(p).next());
                    let name = node.map_or(claim.name(), |n| n.name.as_str());
                    let nominated_until = nominated.get(name).copied();
                    let mut sn = StateNode {
                        node: node.map(|n| cluster_node_of(n, Some(claim))),
                        node_claim: Some(claim.clone()),
                        pods: self.pod_refs_on(name).cloned().collect(),
                        marked_for_deletion,
                        nominated_until,
                        ready: node.is_some_and(Node::is_ready),
                        volume_limits: Default::default(),
                    };
                    if let Some(n) = sn.node.as_mut() {
                        n.marked_for_deletion = sn.marked_for_deletion
                            || node.is_some_and(Node::is_deleting)
                            || lifecycle::claim_is_deleting(claim);
                    }
                    let sn = Arc::new(sn);
                    cache
                        .claims
                        .insert(claim.name().to_string(), Arc::clone(&sn));
                    sn
                }
            };
            nodes.push(sn);
        }
        // A managed Node whose NodeClaim is gone (or not seen yet) is not tracked; an unmanaged
        // Node is an ordinary existing node.
        for n in self
            .index
            .unmanaged_nodes
            .iter()
            .filter_map(|name| self.nodes.get(name))
        {
            // A Node some NodeClaim matched above (the first Node by name of its provider id)
            // is that NodeClaim's.
            let claimed = !n.provider_id.is_empty()
                && self
                    .index
                    .claims_by_provider_id
                    .contains_key(&n.provider_id)
                && self
                    .node_refs_with_provider_id(&n.provider_id)
                    .next()
                    .is_some_and(|first| first.name == n.name);
            if claimed {
                continue;
            }
            let marked_for_deletion = marked.contains(&n.name);
            let nominated_until = nominated.get(&n.name).copied();
            let kept = cache.unclaimed.remove(&n.name).filter(|sn| {
                !cache.dirty_nodes.contains(&n.name)
                    && sn.marked_for_deletion == marked_for_deletion
                    && sn.nominated_until == nominated_until
            });
            let sn = kept.unwrap_or_else(|| {
                Arc::new(StateNode {
                    node: Some(cluster_node_of(n, None)),
                    node_claim: None,
                    pods: self.pod_refs_on(n.name.as_str()).cloned().collect(),
                    marked_for_deletion,
                    nominated_until,
                    ready: n.is_ready(),
                    volume_limits: Default::default(),
                })
            });
            unclaimed_entries.insert(n.name.clone(), Arc::clone(&sn));
            nodes.push(sn);
        }
        cache.unclaimed = unclaimed_entries;
        cache.dirty_claims.clear();
        cache.dirty_nodes.clear();
        let memo = Arc::clone(&cache.memo);
        self.cache = cache;
        let node_pools = self
            .node_pools
            .values()
            .map(|np| {
                let types = self
                    .instance_types
                    .get(np.name())
                    .map(|t| hide_unavailable(t, unavailable))
                    .unwrap_or_default();
                NodePoolState {
                    ready: !types.is_empty() && np.metadata.deletion_timestamp.is_none(),
                    node_pool: np.clone(),
                    instance_types: types,
                }
            })
            .collect();
        ClusterSnapshot {
            node_pools,
            nodes,
            pending_pods: self.pending_pods(),
            daemonsets: self.daemonsets.values().cloned().collect(),
            pdbs: self.pdbs.values().cloned().collect(),
            ..ClusterSnapshot::default()
        }
        .with_memo_of(&memo)
    }
}

/// Whether the provisioner considers the pod: unbound, not terminal, not terminating, not a
/// DaemonSet or mirror pod.
pub fn is_provisionable(pod: &Pod) -> bool {
    pod.node_name.is_none()
        && !pod.is_terminal()
        && !pod.is_terminating()
        && !pod.is_daemonset_pod()
        && !pod.is_mirror_pod()
}

/// Instance types with the offerings in `unavailable` marked unavailable (copies only the types
/// that change).
fn hide_unavailable(
    types: &[Arc<InstanceType>],
    unavailable: &BTreeSet<UnavailableOffering>,
) -> Vec<Arc<InstanceType>> {
    if unavailable.is_empty() {
        return types.to_vec();
    }
    types
        .iter()
        .map(|it| {
            let hit = |o: &Offering| o.available && unavailable.contains(&offering_key(it, o));
            if !it.offerings.iter().any(hit) {
                return Arc::clone(it);
            }
            let mut copy = Arc::clone(it);
            let keys: Vec<bool> = it
                .offerings
                .iter()
                .map(|o| unavailable.contains(&offering_key(it, o)))
                .collect();
            for (o, hidden) in Arc::make_mut(&mut copy).offerings.iter_mut().zip(keys) {
                if hidden {
                    o.available = false;
                }
            }
            copy
        })
        .collect()
}

/// The key of an offering in the unavailable-offerings cache.
fn offering_key(it: &InstanceType, o: &Offering) -> UnavailableOffering {
    UnavailableOffering::of(it, o)
}

/// The scheduler's view of a Node (with its NodeClaim for managed nodes).
pub(crate) fn cluster_node_of(node: &Node, claim: Option<&NodeClaim>) -> ClusterNode {
    let mut out = ClusterNode::new(node.name.clone());
    out.labels = node.labels.clone();
    out.annotations = node.annotations.clone();
    out.taints = node.taints.clone();
    out.capacity = node.capacity.clone();
    out.allocatable = node.allocatable.clone();
    out.creation_timestamp = node.creation_timestamp;
    out.managed = claim.is_some();
    if let Some(c) = claim {
        out.startup_taints = c.spec.startup_taints.clone();
        out.initialized = node
            .labels
            .get(labels::INITIALIZED)
            .is_some_and(|v| v == "true");
    }
    out.marked_for_deletion = node.is_deleting();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::NodeClaimSpec;

    fn claim(name: &str, pool: &str, capacity: &[(&str, &str)], node: bool) -> NodeClaim {
        let mut c = NodeClaim::new(name, NodeClaimSpec::default());
        c.metadata
            .labels
            .insert(labels::NODEPOOL.to_string(), pool.to_string());
        c.status.capacity = capacity
            .iter()
            .map(|(k, v)| (*k, Quantity::parse(v).unwrap()))
            .collect();
        c.status.node_name = node.then(|| format!("node-{name}"));
        c
    }

    /// The status totals as summing every NodeClaim of the pool in name order gives them.
    fn summed(view: &ClusterView, pool: &str) -> (String, ResourceList, i64) {
        let mut resources = ResourceList::new();
        let mut nodes = 0;
        for c in view.claims_of_pool(pool) {
            resources.add_assign(&c.status.capacity);
            nodes += i64::from(c.status.node_name.is_some());
        }
        (resources.to_string(), resources, nodes)
    }

    fn assert_totals(view: &ClusterView, pool: &str) {
        let (text, resources, nodes) = summed(view, pool);
        let (got, got_nodes) = view.pool_status_totals(pool);
        assert_eq!(got, resources);
        assert_eq!(got.to_string(), text, "formats as a fresh sum prints them");
        assert_eq!(got_nodes, nodes);
    }

    #[test]
    fn pool_status_totals_follow_puts_and_removes_with_the_formats_of_a_fresh_sum() {
        let mut view = ClusterView::default();
        assert_eq!(view.pool_status_totals("a"), (ResourceList::new(), 0));
        view.put_claim(claim("a-1", "a", &[("cpu", "2"), ("memory", "4Gi")], true));
        view.put_claim(claim("a-2", "a", &[("cpu", "1500m"), ("gpu", "0")], false));
        view.put_claim(claim("a-0", "a", &[("cpu", "0"), ("memory", "1e9")], true));
        view.put_claim(claim("b-1", "b", &[("cpu", "8")], true));
        assert_totals(&view, "a");
        assert_totals(&view, "b");
        // Replaced: launched, then its node gone.
        view.put_claim(claim("a-2", "a", &[("cpu", "3"), ("gpu", "1")], true));
        assert_totals(&view, "a");
        view.put_claim(claim("a-2", "a", &[("cpu", "3")], false));
        assert_totals(&view, "a");
        view.remove_claim("a-1");
        assert_totals(&view, "a");
        view.remove_claim("a-0");
        view.remove_claim("a-2");
        assert_eq!(view.pool_status_totals("a"), (ResourceList::new(), 0));
        // A negative quantity (never a real capacity) falls back to the full sum.
        view.put_claim(claim("a-3", "a", &[("cpu", "-1")], false));
        view.put_claim(claim("a-4", "a", &[("cpu", "1")], false));
        assert_totals(&view, "a");
        assert_totals(&view, "b");
    }

    /// The nodes of `view`'s snapshot, and of a snapshot built from nothing kept, printed.
    fn both_snapshots(
        view: &mut ClusterView,
        marked: &BTreeSet<String>,
        nominated: &BTreeMap<String, Timestamp>,
    ) -> (String, String) {
        let mut fresh = view.clone();
        fresh.cache = SnapshotCache::default();
        let none = BTreeSet::new();
        let kept = view.snapshot(marked, nominated, &none);
        let built = fresh.snapshot(marked, nominated, &none);
        (format!("{:?}", kept.nodes), format!("{:?}", built.nodes))
    }

    fn bound(name: &str, node: &str) -> Pod {
        let mut p = Pod::new("default", name);
        p.node_name = Some(node.to_string());
        p
    }

    #[test]
    fn a_snapshot_built_from_kept_entries_equals_one_built_afresh() {
        let mut view = ClusterView::default();
        let mut nominated = BTreeMap::new();
        let mut marked = BTreeSet::new();
        let mut launched = claim("a-1", "a", &[("cpu", "2")], true);
        launched.status.provider_id = Some("fake://1".to_string());
        view.put_claim(launched.clone());
        view.put_claim(claim("a-2", "a", &[], false));
        view.put_node(Node::new("n-1", "fake://1"));
        view.put_node(Node::new("unmanaged", ""));
        view.put_pod(bound("p-1", "n-1"));
        view.put_pod(bound("p-2", "unmanaged"));
        let (kept, built) = both_snapshots(&mut view, &marked, &nominated);
        assert_eq!(kept, built);
        let first = view.snapshot(&marked, &nominated, &BTreeSet::new());
        let again = view.snapshot(&marked, &nominated, &BTreeSet::new());
        assert!(
            first
                .nodes
                .iter()
                .zip(&again.nodes)
                .all(|(a, b)| Arc::ptr_eq(a, b)),
            "nothing written: every entry is kept"
        );
        // Each kind of write, then the marks, changes the entries it touches.
        type Write = Box<dyn Fn(&mut ClusterView)>;
        let writes: Vec<Write> = vec![
            Box::new(|v| v.put_pod(bound("p-3", "n-1"))),
            Box::new(|v| {
                v.remove_pod("default/p-1");
            }),
            Box::new(|v| {
                let mut p = bound("p-2", "n-1");
                p.labels.insert("moved".into(), "yes".into());
                v.put_pod(p);
            }),
            Box::new(|v| {
                let mut n = Node::new("n-1", "fake://1");
                n.labels.insert("x".into(), "y".into());
                v.put_node(n);
            }),
            // A second Node with the same provider id, first by name: the NodeClaim's Node.
            Box::new(|v| v.put_node(Node::new("m-0", "fake://1"))),
            Box::new(|v| {
                v.remove_node("m-0");
            }),
            Box::new(|v| {
                let mut c = claim("a-2", "a", &[("cpu", "1")], false);
                c.status.provider_id = Some("fake://2".to_string());
                v.put_claim(c);
            }),
            Box::new(|v| v.put_node(Node::new("n-2", "fake://2"))),
            Box::new(|v| {
                v.remove_claim("a-1");
            }),
            // The unmanaged Node gains a NodePool label (no NodeClaim: not tracked), then
            // loses it again.
            Box::new(|v| {
                let mut n = Node::new("unmanaged", "");
                n.labels.insert(labels::NODEPOOL.into(), "a".into());
                v.put_node(n);
            }),
            Box::new(|v| v.put_node(Node::new("unmanaged", ""))),
            Box::new(|v| {
                v.remove_node("unmanaged");
            }),
        ];
        for (i, write) in writes.iter().enumerate() {
            write(&mut view);
            if i == 3 {
                nominated.insert("n-1".to_string(), Timestamp::UNIX_EPOCH);
                marked.insert("fake://2".to_string());
                marked.insert("unmanaged".to_string());
            }
            if i == 6 {
                nominated.clear();
            }
            let (kept, built) = both_snapshots(&mut view, &marked, &nominated);
            assert_eq!(kept, built, "after write {i}");
            let unmanaged = view
                .snapshot(&marked, &nominated, &BTreeSet::new())
                .nodes
                .iter()
                .any(|n| n.name() == "unmanaged");
            assert_eq!(unmanaged, i != 9 && i != 11, "after write {i}");
        }
    }
}

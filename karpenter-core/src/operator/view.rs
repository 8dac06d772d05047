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
}

/// The view's indexes (see [`ClusterView`]).
#[derive(Debug, Clone, Default)]
struct Index {
    /// NodeClaim names by non-empty provider id.
    claims_by_provider_id: BTreeMap<String, BTreeSet<String>>,
    /// NodeClaim names by their `karpenter.sh/nodepool` label.
    claims_by_pool: BTreeMap<String, BTreeSet<String>>,
    /// NodeClaims that are not being deleted and have no provider id yet.
    unlaunched: BTreeSet<String>,
    /// Node names by non-empty provider id.
    nodes_by_provider_id: BTreeMap<String, BTreeSet<String>>,
    /// Pod keys by the name of the node they are bound to.
    pods_by_node: BTreeMap<String, BTreeSet<String>>,
    /// Keys of the pods [`is_provisionable`] accepts.
    provisionable: BTreeSet<String>,
    /// VolumeAttachment names by node name.
    attachments_by_node: BTreeMap<String, BTreeSet<String>>,
}

/// Adds `name` to the set under `key`.
fn index_add(index: &mut BTreeMap<String, BTreeSet<String>>, key: &str, name: &str) {
    index
        .entry(key.to_string())
        .or_default()
        .insert(name.to_string());
}

/// Removes `name` from the set under `key` (and the set once empty).
fn index_remove(index: &mut BTreeMap<String, BTreeSet<String>>, key: &str, name: &str) {
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
        }
    }

    fn remove_claim(&mut self, name: &str, claim: &NodeClaim) {
        if let Some(pid) = claim_provider_id(claim) {
            index_remove(&mut self.claims_by_provider_id, pid, name);
        }
        self.unlaunched.remove(name);
        if let Some(pool) = claim.metadata.labels.get(labels::NODEPOOL) {
            index_remove(&mut self.claims_by_pool, pool, name);
        }
    }

    fn add_node(&mut self, name: &str, node: &Node) {
        if !node.provider_id.is_empty() {
            index_add(&mut self.nodes_by_provider_id, &node.provider_id, name);
        }
    }

    fn remove_node(&mut self, name: &str, node: &Node) {
        if !node.provider_id.is_empty() {
            index_remove(&mut self.nodes_by_provider_id, &node.provider_id, name);
        }
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
        self.claims.insert(name, claim);
    }

    /// Removes a NodeClaim.
    pub(crate) fn remove_claim(&mut self, name: &str) -> Option<NodeClaim> {
        let claim = self.claims.remove(name)?;
        self.index.remove_claim(name, &claim);
        Some(claim)
    }

    /// Creates or replaces a Node (by its name).
    pub(crate) fn put_node(&mut self, node: Node) {
        let name = node.name.clone();
        if let Some(old) = self.nodes.get(&name) {
            self.index.remove_node(&name, old);
        }
        self.index.add_node(&name, &node);
        self.nodes.insert(name, node);
    }

    /// Removes a Node.
    pub(crate) fn remove_node(&mut self, name: &str) -> Option<Node> {
        let node = self.nodes.remove(name)?;
        self.index.remove_node(name, &node);
        Some(node)
    }

    /// Creates or replaces a Pod (by its key).
    pub(crate) fn put_pod(&mut self, pod: Pod) {
        let key = pod.key();
        if let Some(old) = self.pods.get(&key) {
            self.index.remove_pod(&key, old);
        }
        self.index.add_pod(&key, &pod);
        self.pods.insert(key, pod);
    }

    /// Removes a Pod.
    pub(crate) fn remove_pod(&mut self, key: &str) -> Option<Pod> {
        let pod = self.pods.remove(key)?;
        self.index.remove_pod(key, &pod);
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
        claim
            .status
            .provider_id
            .as_deref()
            .map(|p| self.nodes_with_provider_id(p))
            .unwrap_or_default()
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
    pub(crate) fn snapshot(
        &self,
        marked: &BTreeSet<String>,
        nominated: &BTreeMap<String, Timestamp>,
        unavailable: &BTreeSet<UnavailableOffering>,
    ) -> ClusterSnapshot {
        let pods_of = |name: &str| -> Vec<Pod> { self.pod_refs_on(name).cloned().collect() };
        // Nodes by provider id, so matching claims to nodes is not quadratic.
        let mut by_provider_id: BTreeMap<&str, &Node> = BTreeMap::new();
        for n in self.nodes.values() {
            by_provider_id.entry(n.provider_id.as_str()).or_insert(n);
        }
        let mut nodes = Vec::new();
        let mut claimed_nodes: BTreeSet<&str> = BTreeSet::new();
        for claim in self.claims.values() {
            let node = claim
                .status
                .provider_id
                .as_deref()
                .filter(|p| !p.is_empty())
                .and_then(|p| by_provider_id.get(p).copied());
            if let Some(n) = node {
                claimed_nodes.insert(&n.name);
            }
            let provider_id = claim.status.provider_id.clone().unwrap_or_default();
            let name = node.map_or(claim.name(), |n| n.name.as_str());
            let mut sn = StateNode {
                node: node.map(|n| cluster_node_of(n, Some(claim))),
                node_claim: Some(claim.clone()),
                pods: pods_of(name),
                marked_for_deletion: !provider_id.is_empty() && marked.contains(&provider_id),
                nominated_until: nominated.get(name).copied(),
                ready: node.is_some_and(Node::is_ready),
                volume_limits: Default::default(),
            };
            if let Some(n) = sn.node.as_mut() {
                n.marked_for_deletion = sn.marked_for_deletion
                    || node.is_some_and(Node::is_deleting)
                    || lifecycle::claim_is_deleting(claim);
            }
            nodes.push(Arc::new(sn));
        }
        for n in self.nodes.values() {
            if claimed_nodes.contains(n.name.as_str()) {
                continue;
            }
            // A managed Node whose NodeClaim is gone (or not seen yet) is not tracked; an
            // unmanaged Node is an ordinary existing node.
            if n.labels.contains_key(labels::NODEPOOL) {
                continue;
            }
            nodes.push(Arc::new(StateNode {
                node: Some(cluster_node_of(n, None)),
                node_claim: None,
                pods: pods_of(n.name.as_str()),
                marked_for_deletion: marked.contains(&n.name),
                nominated_until: nominated.get(&n.name).copied(),
                ready: n.is_ready(),
                volume_limits: Default::default(),
            }));
        }
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

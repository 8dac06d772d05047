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
#[derive(Debug, Clone, Default)]
pub struct ClusterView {
    pub(crate) node_pools: BTreeMap<String, NodePool>,
    pub(crate) instance_types: BTreeMap<String, Vec<Arc<InstanceType>>>,
    pub(crate) claims: BTreeMap<String, NodeClaim>,
    pub(crate) nodes: BTreeMap<String, Node>,
    pub(crate) pods: BTreeMap<String, Pod>,
    pub(crate) daemonsets: BTreeMap<String, DaemonSet>,
    pub(crate) pdbs: BTreeMap<String, PodDisruptionBudget>,
    pub(crate) volume_attachments: BTreeMap<String, String>,
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

    /// The Nodes whose provider id is `provider_id`, by name.
    pub fn nodes_with_provider_id(&self, provider_id: &str) -> Vec<Node> {
        if provider_id.is_empty() {
            return Vec::new();
        }
        self.nodes
            .values()
            .filter(|n| n.provider_id == provider_id)
            .cloned()
            .collect()
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

    /// The NodeClaim whose provider id is `provider_id`.
    pub fn claim_with_provider_id(&self, provider_id: &str) -> Option<&NodeClaim> {
        if provider_id.is_empty() {
            return None;
        }
        self.claims
            .values()
            .find(|c| c.status.provider_id.as_deref() == Some(provider_id))
    }

    /// VolumeAttachments on the node named `node`, by name.
    pub fn volume_attachments_on(&self, node: &str) -> Vec<&str> {
        self.volume_attachments
            .iter()
            .filter(|(_, n)| n.as_str() == node)
            .map(|(a, _)| a.as_str())
            .collect()
    }

    /// Pods bound to the node named `node`, by key.
    pub fn pods_on(&self, node: &str) -> Vec<Pod> {
        self.pods
            .values()
            .filter(|p| p.node_name.as_deref() == Some(node))
            .cloned()
            .collect()
    }

    /// Whether every NodeClaim that is not being deleted has launched (a provider id): upstream's
    /// "cluster state synced" condition for provisioning and disruption.
    pub fn claims_launched(&self) -> bool {
        self.claims.values().all(|c| {
            lifecycle::claim_is_deleting(c)
                || c.status
                    .provider_id
                    .as_deref()
                    .is_some_and(|p| !p.is_empty())
        })
    }

    /// Pods waiting for a node: unbound, not terminal or terminating, not owned by a DaemonSet
    /// or a Node (mirror pods), by key.
    pub fn pending_pods(&self) -> Vec<Pod> {
        self.pods
            .values()
            .filter(|p| is_provisionable(p))
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
        // References first, so each pod is copied once, into the node that holds it.
        let mut pods_by_node: BTreeMap<&str, Vec<&Pod>> = BTreeMap::new();
        for p in self.pods.values() {
            if let Some(n) = p.node_name.as_deref() {
                pods_by_node.entry(n).or_default().push(p);
            }
        }
        let pods_of = |name: &str| -> Vec<Pod> {
            pods_by_node
                .get(name)
                .map(|ps| ps.iter().map(|p| (*p).clone()).collect())
                .unwrap_or_default()
        };
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

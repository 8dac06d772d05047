//! The in-memory cluster API of the simulator.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use karpenter_core::api::{NodeClaim, NodePool};
use karpenter_core::lifecycle::{self, Node, ObjectKind, format_time};
use karpenter_core::model::{DaemonSet, Pod, PodDisruptionBudget, Timestamp};
use karpenter_core::operator::Input;
use karpenter_core::resources::ResourceList;

/// An API write that failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApiError {
    /// The object does not exist.
    #[error("{kind:?} {name} not found")]
    NotFound {
        /// Its kind.
        kind: ObjectKind,
        /// Its name.
        name: String,
    },
    /// The object exists already.
    #[error("{kind:?} {name} already exists")]
    AlreadyExists {
        /// Its kind.
        kind: ObjectKind,
        /// Its name.
        name: String,
    },
    /// The write was based on an old `resourceVersion`.
    #[error("{kind:?} {name}: the object has been modified")]
    Conflict {
        /// Its kind.
        kind: ObjectKind,
        /// Its name.
        name: String,
    },
    /// The API server failed the write (a 5xx, or the request timed out before reaching it):
    /// nothing was written.
    #[error("{kind:?} {name}: the server failed the write")]
    ServerError {
        /// Its kind.
        kind: ObjectKind,
        /// Its name.
        name: String,
    },
}

/// The in-memory cluster API: objects with `resourceVersion`s, deletion with finalizers, and
/// the watch events each write produces.
#[derive(Debug, Default)]
pub struct ClusterApi {
    rv: u64,
    /// NodePools by name.
    pub node_pools: BTreeMap<String, NodePool>,
    /// NodeClaims by name.
    pub node_claims: BTreeMap<String, NodeClaim>,
    /// Nodes by name.
    pub nodes: BTreeMap<String, Node>,
    /// Pods by `namespace/name`.
    pub pods: BTreeMap<String, Pod>,
    /// DaemonSets by `namespace/name`.
    pub daemonsets: BTreeMap<String, DaemonSet>,
    /// PodDisruptionBudgets by `namespace/name`.
    pub pdbs: BTreeMap<String, PodDisruptionBudget>,
    /// VolumeAttachments: name → Node name.
    pub volume_attachments: BTreeMap<String, String>,
    /// The leader-election Lease (two replicas only; it produces no watch events for the
    /// operator).
    pub lease: Option<karpenter_core::leader::LeaseRecord>,
    /// Watch events not yet delivered.
    pub(super) events: VecDeque<Input>,
    /// Bumped by every write that can change where a pending pod binds (pods and Nodes).
    binding_generation: u64,
    /// Keys of the pods waiting for kube-scheduler (see [`waits_for_binding`]).
    unbound: BTreeSet<String>,
    /// Per node name, the scheduling requests of the pods bound to it.
    used: BTreeMap<String, ResourceList>,
    /// Per node name, the keys of the pods bound to it.
    pods_by_node: BTreeMap<String, BTreeSet<String>>,
    /// NodeClaim names by provider id (NodeClaims with one).
    claims_by_provider_id: BTreeMap<String, BTreeSet<String>>,
    /// Node names by provider id.
    nodes_by_provider_id: BTreeMap<String, BTreeSet<String>>,
    /// Names of the Nodes being deleted or carrying the `disrupted` taint.
    disruption_marked_nodes: BTreeSet<String>,
    /// Provider ids of the NodeClaims being deleted, with how many such NodeClaims each.
    deleting_claim_provider_ids: BTreeMap<String, usize>,
}

/// Adds (`add`) or removes `name` under `key` of a set-valued index.
fn index_set(index: &mut BTreeMap<String, BTreeSet<String>>, key: &str, name: &str, add: bool) {
    if add {
        index
            .entry(key.to_string())
            .or_default()
            .insert(name.to_string());
    } else if let Some(set) = index.get_mut(key) {
        set.remove(name);
        if set.is_empty() {
            index.remove(key);
        }
    }
}

/// Whether kube-scheduler would look at `pod`: unbound, not terminal, not terminating.
pub(super) fn waits_for_binding(pod: &Pod) -> bool {
    pod.node_name.is_none() && !pod.is_terminal() && !pod.is_terminating()
}

impl ClusterApi {
    /// The latest `resourceVersion` handed out (it grows with every write).
    pub fn rv(&self) -> u64 {
        self.rv
    }

    /// A counter that moves with every write that can change where a pending pod binds
    /// (pods and Nodes), and only then.
    pub(super) fn binding_generation(&self) -> u64 {
        self.binding_generation
    }

    /// The pods waiting for kube-scheduler, by key.
    pub(super) fn unbound_pods(&self) -> impl Iterator<Item = &Pod> {
        self.unbound.iter().filter_map(|k| self.pods.get(k))
    }

    /// The scheduling requests of the pods bound to the node named `node`.
    pub(super) fn used_on(&self, node: &str) -> Option<&ResourceList> {
        self.used.get(node)
    }

    /// The pods bound to the node named `node`, by key.
    pub(super) fn pods_on<'a>(&'a self, node: &str) -> impl Iterator<Item = &'a Pod> + 'a {
        self.pods_by_node
            .get(node)
            .into_iter()
            .flatten()
            .filter_map(|k| self.pods.get(k))
    }

    /// The NodeClaims whose provider id is `provider_id`, by name.
    pub(super) fn claims_with_provider_id<'a>(
        &'a self,
        provider_id: &str,
    ) -> impl DoubleEndedIterator<Item = &'a NodeClaim> + 'a {
        self.claims_by_provider_id
            .get(provider_id)
            .into_iter()
            .flatten()
            .filter_map(|n| self.node_claims.get(n))
    }

    /// Names of the Nodes that may be being disrupted: deleting, carrying the `disrupted` taint,
    /// or whose provider id is that of a NodeClaim being deleted (a superset of the nodes whose
    /// disruption started; the caller applies its own rule to each).
    pub(super) fn maybe_disrupted_nodes(&self) -> BTreeSet<&str> {
        let mut out: BTreeSet<&str> = self
            .disruption_marked_nodes
            .iter()
            .map(String::as_str)
            .collect();
        for pid in self.deleting_claim_provider_ids.keys() {
            if let Some(names) = self.nodes_by_provider_id.get(pid) {
                out.extend(names.iter().map(String::as_str));
            }
        }
        out
    }

    fn index_node(&mut self, node: &Node, add: bool) {
        index_set(
            &mut self.nodes_by_provider_id,
            &node.provider_id,
            &node.name,
            add,
        );
        let marked = node.is_deleting()
            || node
                .taints
                .iter()
                .any(|t| t.key == karpenter_core::labels::DISRUPTED_TAINT_KEY);
        if !add {
            self.disruption_marked_nodes.remove(&node.name);
        } else if marked {
            self.disruption_marked_nodes.insert(node.name.clone());
        }
    }

    /// Inserts or replaces a Node in the map and the indexes.
    fn store_node(&mut self, node: Node) {
        if let Some(old) = self.nodes.remove(&node.name) {
            self.index_node(&old, false);
        }
        self.index_node(&node, true);
        self.nodes.insert(node.name.clone(), node);
    }

    /// Removes a Node from the map and the indexes.
    fn drop_node(&mut self, name: &str) -> Option<Node> {
        let node = self.nodes.remove(name)?;
        self.index_node(&node, false);
        Some(node)
    }

    fn index_claim(&mut self, claim: &NodeClaim, add: bool) {
        let Some(pid) = claim.status.provider_id.as_deref() else {
            return;
        };
        index_set(&mut self.claims_by_provider_id, pid, claim.name(), add);
        if claim.metadata.deletion_timestamp.is_some() {
            if add {
                *self
                    .deleting_claim_provider_ids
                    .entry(pid.to_string())
                    .or_default() += 1;
            } else if let Some(n) = self.deleting_claim_provider_ids.get_mut(pid) {
                *n -= 1;
                if *n == 0 {
                    self.deleting_claim_provider_ids.remove(pid);
                }
            }
        }
    }

    /// Inserts or replaces a NodeClaim in the map and the indexes.
    fn store_claim(&mut self, claim: NodeClaim) {
        let name = claim.name().to_string();
        if let Some(old) = self.node_claims.remove(&name) {
            self.index_claim(&old, false);
        }
        self.index_claim(&claim, true);
        self.node_claims.insert(name, claim);
    }

    /// Removes a NodeClaim from the map and the indexes.
    fn drop_claim(&mut self, name: &str) -> Option<NodeClaim> {
        let claim = self.node_claims.remove(name)?;
        self.index_claim(&claim, false);
        Some(claim)
    }

    fn index_pod(&mut self, key: &str, pod: &Pod, add: bool) {
        if let Some(n) = pod.node_name.as_deref() {
            index_set(&mut self.pods_by_node, n, key, add);
            let requests = pod.scheduling_requests();
            let used = self.used.entry(n.to_string()).or_default();
            if add {
                used.add_assign(&requests);
            } else {
                *used = used.sub(&requests);
            }
        }
        if add && waits_for_binding(pod) {
            self.unbound.insert(key.to_string());
        } else if !add {
            self.unbound.remove(key);
        }
    }

    fn next_rv(&mut self) -> String {
        self.rv += 1;
        self.rv.to_string()
    }

    /// Every object as a watch's initial list would deliver it.
    pub fn list_all(&self) -> Vec<Input> {
        let mut out = Vec::new();
        out.extend(
            self.node_pools
                .values()
                .map(|o| Input::NodePoolApplied(Box::new(o.clone()))),
        );
        out.extend(
            self.node_claims
                .values()
                .map(|o| Input::NodeClaimApplied(Box::new(o.clone()))),
        );
        out.extend(
            self.nodes
                .values()
                .map(|o| Input::NodeApplied(Box::new(o.clone()))),
        );
        out.extend(
            self.pods
                .values()
                .map(|o| Input::PodApplied(Box::new(o.clone()))),
        );
        out.extend(
            self.daemonsets
                .values()
                .map(|o| Input::DaemonSetApplied(Box::new(o.clone()))),
        );
        out.extend(
            self.pdbs
                .values()
                .map(|o| Input::PdbApplied(Box::new(o.clone()))),
        );
        out.extend(self.volume_attachments.iter().map(|(name, node)| {
            Input::VolumeAttachmentApplied {
                name: name.clone(),
                node_name: node.clone(),
            }
        }));
        out
    }

    /// Creates or replaces a NodePool (its spec changes bump `generation`).
    pub fn apply_node_pool(&mut self, mut np: NodePool) {
        let name = np.name().to_string();
        let generation = match self.node_pools.get(&name) {
            Some(old) if old.spec == np.spec => old.metadata.generation.unwrap_or(1),
            Some(old) => old.metadata.generation.unwrap_or(1) + 1,
            None => 1,
        };
        if let Some(old) = self.node_pools.get(&name) {
            np.metadata.uid = old.metadata.uid.clone();
            for (k, v) in &old.metadata.annotations {
                np.metadata
                    .annotations
                    .entry(k.clone())
                    .or_insert_with(|| v.clone());
            }
            if np.status.is_none() {
                np.status = old.status.clone();
            }
        } else {
            np.metadata.uid = Some(format!("uid-nodepool-{name}"));
        }
        np.metadata.generation = Some(generation);
        np.metadata.resource_version = Some(self.next_rv());
        self.events
            .push_back(Input::NodePoolApplied(Box::new(np.clone())));
        self.node_pools.insert(name, np);
    }

    /// Creates a NodeClaim.
    pub fn create_node_claim(
        &mut self,
        mut claim: NodeClaim,
        now: Timestamp,
    ) -> Result<(), ApiError> {
        let name = claim.name().to_string();
        if self.node_claims.contains_key(&name) {
            return Err(ApiError::AlreadyExists {
                kind: ObjectKind::NodeClaim,
                name,
            });
        }
        claim.metadata.uid = Some(format!("uid-nodeclaim-{name}-{}", self.rv + 1));
        claim.metadata.creation_timestamp = Some(format_time(now));
        claim.metadata.generation = Some(1);
        claim.metadata.resource_version = Some(self.next_rv());
        claim.status = Default::default();
        self.events
            .push_back(Input::NodeClaimApplied(Box::new(claim.clone())));
        self.store_claim(claim);
        Ok(())
    }

    /// Writes a NodeClaim's metadata and status (optimistic concurrency when it carries a
    /// `resourceVersion`). Removing the last finalizer of a deleting NodeClaim removes it.
    pub fn update_node_claim(&mut self, claim: NodeClaim) -> Result<(), ApiError> {
        let name = claim.name().to_string();
        let Some(current) = self.node_claims.get(&name) else {
            return Err(ApiError::NotFound {
                kind: ObjectKind::NodeClaim,
                name,
            });
        };
        if claim.metadata.resource_version.is_some()
            && claim.metadata.resource_version != current.metadata.resource_version
        {
            return Err(ApiError::Conflict {
                kind: ObjectKind::NodeClaim,
                name,
            });
        }
        let mut next = current.clone();
        next.metadata.labels = claim.metadata.labels;
        next.metadata.annotations = claim.metadata.annotations;
        next.metadata.finalizers = claim.metadata.finalizers;
        next.metadata.owner_references = claim.metadata.owner_references;
        next.status = claim.status;
        if next == *current {
            return Ok(());
        }
        if next.metadata.deletion_timestamp.is_some() && next.metadata.finalizers.is_empty() {
            self.drop_claim(&name);
            self.rv += 1;
            self.events.push_back(Input::NodeClaimDeleted(name));
            return Ok(());
        }
        next.metadata.resource_version = Some(self.next_rv());
        self.events
            .push_back(Input::NodeClaimApplied(Box::new(next.clone())));
        self.store_claim(next);
        Ok(())
    }

    /// Deletes a NodeClaim (sets its deletion timestamp while finalizers remain).
    pub fn delete_node_claim(&mut self, name: &str, now: Timestamp) -> Result<(), ApiError> {
        let Some(claim) = self.node_claims.get(name) else {
            return Err(ApiError::NotFound {
                kind: ObjectKind::NodeClaim,
                name: name.to_string(),
            });
        };
        if claim.metadata.finalizers.is_empty() {
            self.drop_claim(name);
            self.rv += 1;
            self.events
                .push_back(Input::NodeClaimDeleted(name.to_string()));
            return Ok(());
        }
        if claim.metadata.deletion_timestamp.is_none() {
            let mut claim = claim.clone();
            claim.metadata.deletion_timestamp = Some(format_time(now));
            self.rv += 1;
            claim.metadata.resource_version = Some(self.rv.to_string());
            self.events
                .push_back(Input::NodeClaimApplied(Box::new(claim.clone())));
            self.store_claim(claim);
        }
        Ok(())
    }

    /// Creates or replaces a Node.
    pub fn put_node(&mut self, node: Node) {
        self.rv += 1;
        self.binding_generation += 1;
        self.events
            .push_back(Input::NodeApplied(Box::new(node.clone())));
        self.store_node(node);
    }

    /// Patches a Node. Removing the last finalizer of a deleting Node removes it.
    pub fn patch_node(&mut self, update: &lifecycle::NodeUpdate) -> Result<(), ApiError> {
        let Some(node) = self.nodes.get(&update.node_name) else {
            return Err(ApiError::NotFound {
                kind: ObjectKind::Node,
                name: update.node_name.clone(),
            });
        };
        let mut next = node.clone();
        update.apply(&mut next);
        if next == *node {
            return Ok(());
        }
        if next.is_deleting() && next.finalizers.is_empty() {
            self.drop_node(&update.node_name);
            self.rv += 1;
            self.binding_generation += 1;
            self.events
                .push_back(Input::NodeDeleted(update.node_name.clone()));
            return Ok(());
        }
        self.put_node(next);
        Ok(())
    }

    /// Deletes a Node (sets its deletion timestamp while finalizers remain).
    pub fn delete_node(&mut self, name: &str, now: Timestamp) -> Result<(), ApiError> {
        let Some(node) = self.nodes.get(name) else {
            return Err(ApiError::NotFound {
                kind: ObjectKind::Node,
                name: name.to_string(),
            });
        };
        if node.finalizers.is_empty() {
            self.drop_node(name);
            self.rv += 1;
            self.binding_generation += 1;
            self.events.push_back(Input::NodeDeleted(name.to_string()));
            return Ok(());
        }
        if node.deletion_timestamp.is_none() {
            let mut next = node.clone();
            next.deletion_timestamp = Some(now);
            self.put_node(next);
        }
        Ok(())
    }

    /// Creates or replaces a Pod.
    pub fn put_pod(&mut self, pod: Pod) {
        self.rv += 1;
        self.binding_generation += 1;
        self.events
            .push_back(Input::PodApplied(Box::new(pod.clone())));
        let key = pod.key();
        if let Some(old) = self.pods.remove(&key) {
            self.index_pod(&key, &old, false);
        }
        self.index_pod(&key, &pod, true);
        self.pods.insert(key, pod);
    }

    /// Deletes a Pod at once.
    pub fn delete_pod(&mut self, key: &str) -> Option<Pod> {
        let pod = self.pods.remove(key)?;
        self.index_pod(key, &pod, false);
        self.rv += 1;
        self.binding_generation += 1;
        self.events.push_back(Input::PodDeleted(key.to_string()));
        Some(pod)
    }

    /// Removes a Node at once, finalizers and all (no watch event: the caller sends it; the
    /// `resourceVersion` does not move, as before this method existed).
    pub(super) fn remove_node_now(&mut self, name: &str) -> Option<Node> {
        let node = self.drop_node(name)?;
        self.binding_generation += 1;
        Some(node)
    }

    /// Creates or replaces a DaemonSet.
    pub fn put_daemonset(&mut self, ds: DaemonSet) {
        self.rv += 1;
        self.events
            .push_back(Input::DaemonSetApplied(Box::new(ds.clone())));
        self.daemonsets
            .insert(format!("{}/{}", ds.namespace, ds.name), ds);
    }

    /// Creates or replaces a PodDisruptionBudget.
    pub fn put_pdb(&mut self, pdb: PodDisruptionBudget) {
        self.rv += 1;
        self.events
            .push_back(Input::PdbApplied(Box::new(pdb.clone())));
        self.pdbs
            .insert(format!("{}/{}", pdb.namespace, pdb.name), pdb);
    }
}

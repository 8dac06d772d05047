//! Existing nodes in a solve: their state before the solve (remaining resources after their
//! pods and daemon overhead, host ports, taints) and placing a pod on one.

use std::any::Any;
use std::sync::Arc;

use rustc_hash::FxHashMap;

use crate::hostports::HostPortUsage;
use crate::labels;
use crate::model::{ClusterNode, DaemonSet};
use crate::requirements::{LabelInterner, Operator, Requirement, Requirements};
use crate::resources::ResourceList;
use crate::taints::{self, Taint, is_known_ephemeral_taint};
use crate::volumes::VolumeCatalog;

use super::super::ExistingNodeRef;
use super::super::dense::{self, ResourceIndex};
use super::super::volumes::NodeVolumes;
use super::{ExistingNode, PodState, Solver, daemon_compatible, topology_key_cache};

impl Solver<'_> {
    // ---- existing nodes ------------------------------------------------------------------

    pub(super) fn existing_can_add(&self, n: usize, st: &PodState<'_>) -> Option<Requirements> {
        let node = &self.existing[n];
        if st.displaced && self.existing_meta[n].refuses_displaced {
            return None;
        }
        // The cheapest and most selective check first (the order of checks is not observable).
        if !dense::fits(&st.requests, &node.remaining) {
            return None;
        }
        taints::tolerates_all(&st.pod.tolerations, &node.taints).ok()?;
        node.volumes.fits(&st.volumes.usage).ok()?;
        node.host_ports
            .conflicts(&st.key, &st.pod.host_ports)
            .ok()?;
        if !node.requirements.is_compatible(&st.reqs.requirements, None) {
            return None;
        }
        let reqs = node.requirements.intersection(&st.reqs.requirements);
        if st.volumes.unconstrained() {
            return self.existing_topology(st, reqs);
        }
        // Volume alternatives in order (spec 3.7 step 6): merged into the node's requirements
        // only, never into the pod's own topology domains.
        st.volumes.alternatives.iter().find_map(|volume| {
            if !reqs.is_compatible(volume, None) {
                return None;
            }
            self.existing_topology(st, reqs.intersection(volume))
        })
    }

    pub(super) fn existing_topology(
        &self,
        st: &PodState<'_>,
        mut reqs: Requirements,
    ) -> Option<Requirements> {
        if st.constrained {
            let topo = self
                .topology
                .add_requirements_at(&st.pod, st.topology_ref, &st.reqs.strict, &reqs)
                .ok()?;
            if !reqs.is_compatible(&topo, None) {
                return None;
            }
            reqs = topo;
        }
        Some(reqs)
    }

    pub(super) fn existing_add(
        &mut self,
        n: usize,
        idx: usize,
        st: &PodState<'_>,
        reqs: Requirements,
    ) {
        let Some(slot) = self.existing.get_mut(n) else {
            return;
        };
        // Copy-on-write, without copying the requirements the placement replaces.
        if Arc::get_mut(slot).is_none() {
            let old = &**slot;
            *slot = Arc::new(ExistingNode {
                name: old.name.clone(),
                requirements: Requirements::default(),
                taints: old.taints.clone(),
                remaining: old.remaining.clone(),
                host_ports: old.host_ports.clone(),
                volumes: old.volumes.clone(),
                pods: old.pods.clone(),
            });
        }
        let node = Arc::make_mut(slot);
        dense::sub_assign(&mut node.remaining, &st.requests);
        self.existing_cpu
            .set(n, node.remaining.first().copied().unwrap_or(0));
        node.host_ports.add(&st.key, &st.pod.host_ports);
        node.volumes.add(&st.volumes.usage);
        node.pods.push(idx);
        node.requirements = reqs;
        self.topology.record_at(
            &st.pod,
            st.topology_ref,
            st.known_class(),
            &node.taints,
            &node.requirements,
        );
        if let Some(meta) = self.existing_meta.get_mut(n) {
            meta.topology_keys = Some(Box::new(topology_key_cache(
                &self.topology,
                &node.requirements,
            )));
        }
    }
}

pub(super) fn build_existing<'a>(
    input: &ExistingNodeRef<'a>,
    daemons: &[&DaemonSet],
    index: &ResourceIndex,
    interner: &mut LabelInterner<'a>,
) -> ExistingNode {
    let node: &ClusterNode = input.node;
    let taints: Vec<Taint> = if node.managed && !node.initialized {
        node.taints
            .iter()
            .filter(|t| {
                !is_known_ephemeral_taint(t) && !node.startup_taints.iter().any(|s| s.matches(t))
            })
            .cloned()
            .collect()
    } else {
        node.taints.clone()
    };
    let mut requirements = Requirements::from_labels_interned(
        node.labels.iter().map(|(k, v)| (k.as_str(), v.as_str())),
        interner,
    );
    requirements.add(Requirement::new(
        labels::HOSTNAME,
        Operator::In,
        [node.hostname()],
    ));
    let mut used = index.zero();
    let mut daemon_used = ResourceList::new();
    let mut host_ports = HostPortUsage::default();
    for p in input.pods.iter().filter(|p| !p.is_terminal()) {
        dense::add_assign(&mut used, &index.dense(&p.scheduling_requests()));
        if p.is_daemonset_pod() {
            daemon_used.add_assign(&p.scheduling_requests());
        }
        // Recording no ports on an empty usage is a no-op: skip building the pod key.
        if !p.host_ports.is_empty() || !host_ports.is_empty() {
            host_ports.add(&p.key(), &p.host_ports);
        }
    }
    let mut daemon_total = ResourceList::new();
    for d in daemons {
        let mut tol = d.pod.tolerations.clone();
        tol.push(taints::prefer_no_schedule_wildcard());
        if taints::tolerates_all(&tol, &taints).is_ok()
            && daemon_compatible(&d.pod, &requirements, None, None)
        {
            daemon_total.add_assign(&d.pod.scheduling_requests());
        }
    }
    let mut remaining_daemon = daemon_total.sub(&daemon_used);
    remaining_daemon.clamp_non_negative();
    let mut remaining = index.dense(&node.allocatable);
    dense::sub_assign(&mut remaining, &used);
    dense::sub_assign(&mut remaining, &index.dense(&remaining_daemon));
    ExistingNode {
        name: node.hostname().to_string(),
        requirements,
        taints,
        remaining,
        host_ports,
        volumes: NodeVolumes::default(),
        pods: Vec::new(),
    }
}

/// What a caller names an existing node by for [`ExistingMemo`]: a shared value standing for
/// the node's whole input (its `ClusterNode`, its pods and its volume limits) that cannot change
/// while it is shared, such as the `Arc` of a cluster snapshot's node. The memo holds a weak
/// reference to the key: the key's allocation, so its address, stays the node's for as long as
/// an entry exists, without keeping the node's contents (its pods) alive once the caller drops
/// it.
pub(crate) type ExistingKey = Arc<dyn Any + Send + Sync>;

/// What the memo keeps of a key (see [`ExistingKey`]).
type WeakKey = std::sync::Weak<dyn Any + Send + Sync>;

/// Existing nodes as one preparation built them, kept for the next: the operator prepares every
/// node of the cluster for each provisioning round, and most of them have not changed since the
/// last one. An entry is reused when the caller names the node by the same key and the inputs
/// every node's preparation reads besides its own (the DaemonSets, the resource index and the
/// volume catalog) are equal to those it was built with; the result is then exactly the one
/// building it again would give. Each preparation keeps the entries of its own nodes only.
#[derive(Default)]
pub(crate) struct ExistingMemo {
    /// The shared inputs the entries were built with.
    context: Option<MemoContext>,
    /// Entries by the address of their key.
    entries: FxHashMap<usize, (WeakKey, Arc<ExistingNode>)>,
    /// The entries of the preparation under way.
    next: FxHashMap<usize, (WeakKey, Arc<ExistingNode>)>,
    /// How many nodes the last preparation reused.
    reused: usize,
}

impl std::fmt::Debug for ExistingMemo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExistingMemo")
            .field("entries", &self.entries.len())
            .field("reused", &self.reused)
            .finish()
    }
}

/// The inputs of a node's preparation that are not the node's own.
struct MemoContext {
    daemons: Vec<DaemonSet>,
    index: ResourceIndex,
    volumes: VolumeCatalog,
}

fn key_address(key: &ExistingKey) -> usize {
    Arc::as_ptr(key).cast::<()>() as usize
}

impl ExistingMemo {
    /// Starts a preparation with these shared inputs: forgets every entry when they differ from
    /// the last preparation's.
    pub(super) fn begin(
        &mut self,
        daemons: &[&DaemonSet],
        index: &ResourceIndex,
        volumes: &VolumeCatalog,
    ) {
        let same = self.context.as_ref().is_some_and(|c| {
            c.daemons.iter().eq(daemons.iter().copied())
                && c.index == *index
                && c.volumes == *volumes
        });
        if !same {
            self.entries.clear();
            self.context = Some(MemoContext {
                daemons: daemons.iter().map(|d| (*d).clone()).collect(),
                index: index.clone(),
                volumes: volumes.clone(),
            });
        }
        self.next.clear();
        self.reused = 0;
    }

    /// The node named `key`: the last preparation's when it had one, else `build`'s.
    pub(super) fn node(
        &mut self,
        key: &ExistingKey,
        build: impl FnOnce() -> ExistingNode,
    ) -> Arc<ExistingNode> {
        let address = key_address(key);
        let node = match self.entries.remove(&address) {
            Some((_, node)) => {
                self.reused += 1;
                node
            }
            None => Arc::new(build()),
        };
        self.next
            .insert(address, (Arc::downgrade(key), Arc::clone(&node)));
        node
    }

    /// Ends the preparation: its nodes are the entries the next one may reuse.
    pub(super) fn end(&mut self) {
        self.entries = std::mem::take(&mut self.next);
    }

    /// How many nodes the memo holds.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// How many nodes the last preparation took from the memo instead of building them.
    #[cfg(test)]
    pub(crate) fn reused(&self) -> usize {
        self.reused
    }
}

//! Existing nodes in a solve: their state before the solve (remaining resources after their
//! pods and daemon overhead, host ports, taints) and placing a pod on one.

use std::sync::Arc;

use crate::hostports::HostPortUsage;
use crate::labels;
use crate::model::{ClusterNode, DaemonSet};
use crate::requirements::{LabelInterner, Operator, Requirement, Requirements};
use crate::resources::ResourceList;
use crate::taints::{self, Taint, is_known_ephemeral_taint};

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

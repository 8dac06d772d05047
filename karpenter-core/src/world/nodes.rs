//! Nodes, NodeClaims (matched to their Node or in flight) and storage.

use std::collections::BTreeMap;

use crate::api::NodeClaim;
use crate::convert::{
    csi_node_limits_from_k8s, node_from_k8s, pv_from_k8s, pvc_from_k8s, storage_class_from_k8s,
};
use crate::labels;
use crate::model::{ClusterNode, Timestamp};
use crate::requirements::{Operator, Requirements};
use crate::scheduling::{ExistingNodeInput, NodePoolInput};
use crate::volumes::VolumeSource;

use super::{Located, Objects, SourcedPod, World, WorldError};

fn existing(node: ClusterNode) -> ExistingNodeInput {
    ExistingNodeInput {
        node,
        pods: Vec::new(),
        volume_limits: Default::default(),
    }
}

/// Adds the Nodes, then the NodeClaims: a claim with a Node (by `status.nodeName` or
/// `status.providerID`) gives it its startup taints; one without is an in-flight node.
pub(super) fn add_nodes(world: &mut World, objects: &Objects<'_>) -> Result<(), WorldError> {
    let mut provider_ids: BTreeMap<String, String> = BTreeMap::new();
    for n in objects.nodes {
        let node = node_from_k8s(&n.object).map_err(|e| WorldError::convert(n, "", &e))?;
        if let Some(pid) = n.object.spec.as_ref().and_then(|s| s.provider_id.clone()) {
            provider_ids.insert(pid, node.name.clone());
        }
        if world.nodes.contains_key(&node.name) {
            return Err(WorldError::invalid(
                n.origin.clone(),
                n.name.clone(),
                "metadata.name",
                "Duplicate value: a Node of this name is already in the input",
            ));
        }
        world.nodes.insert(node.name.clone(), existing(node));
    }
    let mut claims: Vec<&Located<NodeClaim>> = objects.node_claims.iter().collect();
    claims.sort_by(|a, b| a.object.name().cmp(b.object.name()));
    for c in claims {
        if let Err(errors) = c.object.validate() {
            world
                .notices
                .push(format!("{}: {}: {errors}", c.origin, c.name));
        }
        let status = &c.object.status;
        let node_name = status
            .node_name
            .clone()
            .filter(|n| world.nodes.contains_key(n))
            .or_else(|| {
                status
                    .provider_id
                    .as_ref()
                    .and_then(|p| provider_ids.get(p).cloned())
            });
        match node_name.and_then(|n| world.nodes.get_mut(&n)) {
            Some(existing) => {
                existing.node.startup_taints = c.object.spec.startup_taints.clone();
            }
            None => {
                let node = inflight_node(c, &world.node_pool_inputs)?;
                if world.nodes.contains_key(&node.name) {
                    return Err(WorldError::invalid(
                        c.origin.clone(),
                        c.name.clone(),
                        "metadata.name",
                        "Duplicate value: a Node or NodeClaim of this name is already in the input",
                    ));
                }
                world.nodes.insert(node.name.clone(), existing(node));
            }
        }
        world.node_claims.push(c.object.clone());
    }
    Ok(())
}

/// An in-flight NodeClaim (no Node yet) as a node: its labels plus the single values of its
/// requirements, its status resources (or, before launch, its instance type's from the
/// NodePools' instance types), its taints; not initialized.
fn inflight_node(
    claim: &Located<NodeClaim>,
    pools: &[NodePoolInput],
) -> Result<ClusterNode, WorldError> {
    let c = &claim.object;
    let mut node = ClusterNode::new(c.name());
    node.labels = c.metadata.labels.clone();
    let reqs = Requirements::from_node_selector_requirements(c.spec.requirements());
    for r in reqs.iter() {
        if r.operator() == Operator::In
            && let Some(v) = r.single_value()
        {
            node.labels
                .entry(r.key().to_string())
                .or_insert_with(|| v.to_string());
        }
    }
    node.taints = c.spec.taints.clone();
    node.startup_taints = c.spec.startup_taints.clone();
    node.capacity = c.status.capacity.clone();
    node.allocatable = if c.status.allocatable.is_empty() {
        c.status.capacity.clone()
    } else {
        c.status.allocatable.clone()
    };
    if node.allocatable.is_empty()
        && let Some(it_name) = node.labels.get(labels::INSTANCE_TYPE)
    {
        let pool = node.labels.get(labels::NODEPOOL);
        let found = pools
            .iter()
            .filter(|p| pool.is_none_or(|n| *n == p.name))
            .chain(pools.iter())
            .flat_map(|p| p.instance_types.iter())
            .find(|it| it.name == *it_name);
        if let Some(it) = found {
            node.capacity = it.capacity.clone();
            node.allocatable = it.allocatable().clone();
        }
    }
    node.managed = node.labels.contains_key(labels::NODEPOOL);
    node.initialized = false;
    node.marked_for_deletion = c.metadata.deletion_timestamp.is_some();
    node.creation_timestamp = match c.metadata.creation_timestamp.as_deref() {
        None => Timestamp::UNIX_EPOCH,
        Some(t) => t.parse::<Timestamp>().map_err(|e| {
            WorldError::invalid(
                claim.origin.clone(),
                claim.name.clone(),
                "metadata.creationTimestamp",
                format!("Invalid value: {t:?}: {e}"),
            )
        })?,
    };
    Ok(node)
}

/// The volume catalog of the PersistentVolumeClaims, PersistentVolumes and StorageClasses, and
/// the CSINodes' limits set on their nodes. Objects without any of the three storage kinds
/// plan as if pods mounted no claims (a notice says so), rather than leaving every pod with a
/// claim unplanned.
pub(super) fn add_volumes(
    world: &mut World,
    objects: &Objects<'_>,
    pods: &mut [SourcedPod],
) -> Result<(), WorldError> {
    for c in objects.claims {
        let claim = pvc_from_k8s(&c.object).map_err(|e| WorldError::convert(c, "", &e))?;
        world.volumes.add_claim(claim);
    }
    for v in objects.volumes {
        let pv = pv_from_k8s(&v.object).map_err(|e| WorldError::convert(v, "", &e))?;
        world.volumes.add_volume(pv);
    }
    for c in objects.storage_classes {
        let class =
            storage_class_from_k8s(&c.object).map_err(|e| WorldError::convert(c, "", &e))?;
        world.volumes.add_storage_class(class);
    }
    for c in objects.csinodes {
        let (node, limits) =
            csi_node_limits_from_k8s(&c.object).map_err(|e| WorldError::convert(c, "", &e))?;
        match world.nodes.get_mut(&node) {
            Some(n) => n.volume_limits = limits,
            None => world.notices.push(format!(
                "{}: {}: node {node} is not in the input: ignored",
                c.origin, c.name
            )),
        }
    }
    let mounts_claims = |p: &SourcedPod| {
        p.pod
            .volumes
            .iter()
            .any(|v| !matches!(v.source, VolumeSource::Other(_)))
    };
    if world.volumes.is_empty() && pods.iter().any(mounts_claims) {
        world.notices.push(
            "pods mount PersistentVolumeClaims but the input has no PersistentVolumeClaim, \
             PersistentVolume or StorageClass: volume topology and limits are ignored"
                .to_string(),
        );
        for p in pods.iter_mut() {
            p.pod.volumes.clear();
        }
    }
    Ok(())
}

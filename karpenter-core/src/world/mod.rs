//! From Kubernetes objects to the scheduler's and the disruption planner's input (feature
//! `k8s-openapi`): the code that `karpenter plan` runs over manifests and that a controller runs
//! over the objects of its reflector caches.
//!
//! The caller decodes the objects (typed `k8s-openapi` objects, `karpenter.sh/v1` NodePools and
//! NodeClaims) and wraps each in a [`Located`] that says where it came from (a file and document
//! for the planner, anything for a controller): errors and notices repeat it. Then:
//!
//! 1. [`usable_node_pools`] checks the NodePools (unique names, valid against the label policy)
//!    and leaves out static and deleting ones;
//! 2. the caller looks up each usable NodePool's instance types (its cloud provider or catalog);
//! 3. [`build`] turns everything into a [`World`]: NodePools as the scheduler takes them,
//!    DaemonSets, PodDisruptionBudgets, existing nodes with their bound pods (NodeClaims without a
//!    Node become in-flight nodes), the volume catalog, and the pending pods, workloads expanded
//!    by the rule of [`workloads`](self#workloads).
//!
//! # Workloads
//!
//! A Deployment, ReplicaSet, StatefulSet or Job becomes pending pods only for the replicas that
//! have no pod in the input, as the workload controllers would create them:
//!
//! - a Deployment is expanded only when no ReplicaSet it owns is in the input (its ReplicaSet is
//!   expanded instead);
//! - a ReplicaSet, StatefulSet or Job gets `desired - active` pods, where `desired` is
//!   `spec.replicas` (Job: `spec.parallelism`, capped by the completions still to do; none while
//!   suspended or once finished) and `active` counts the pods of the input it owns
//!   (`metadata.ownerReferences`, by kind, name and uid) that have neither finished nor are being
//!   deleted;
//! - a Deployment without its ReplicaSet in the input also counts the pods owned by a missing
//!   ReplicaSet named `<deployment>-<pod-template-hash>`, which is how the Deployment controller
//!   names them;
//! - a StatefulSet gets the ordinals `<name>-<i>` (`i` below `replicas`) that have no active pod;
//!   the others get `<name>-<i>` for the first free `i` from 0.
//!
//! So a manifest directory (workloads, no pods) expands every replica, and a
//! `kubectl get -o yaml` dump (Deployments, their ReplicaSets, their pods) only what is missing.
//! Finished pods (phase `Succeeded` or `Failed`) are neither planned nor counted.
//!
//! ```
//! use k8s_openapi::api::apps::v1::{ReplicaSet, ReplicaSetSpec};
//! use k8s_openapi::api::core::v1::{Container, Pod, PodSpec, PodTemplateSpec};
//! use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
//! use karpenter_core::world::{self, Located, Objects, Workload};
//!
//! let spec = PodSpec { containers: vec![Container { name: "app".into(), ..Default::default() }], ..Default::default() };
//! let rs = ReplicaSet {
//!     metadata: ObjectMeta { name: Some("web-5d8f".into()), uid: Some("rs-1".into()), ..Default::default() },
//!     spec: Some(ReplicaSetSpec {
//!         replicas: Some(3),
//!         template: Some(PodTemplateSpec { metadata: None, spec: Some(spec.clone()) }),
//!         ..Default::default()
//!     }),
//!     status: None,
//! };
//! // One of its three pods is already in the input.
//! let pod = Pod {
//!     metadata: ObjectMeta {
//!         name: Some("web-5d8f-x7k2p".into()),
//!         owner_references: Some(vec![OwnerReference {
//!             api_version: "apps/v1".into(), kind: "ReplicaSet".into(),
//!             name: "web-5d8f".into(), uid: "rs-1".into(), controller: Some(true), ..Default::default()
//!         }]),
//!         ..Default::default()
//!     },
//!     spec: Some(spec),
//!     status: None,
//! };
//! let workloads = [Located::new("rs.yaml", "ReplicaSet/default/web-5d8f", Workload::ReplicaSet(Box::new(rs)))];
//! let pods = [Located::new("pod.yaml", "Pod/default/web-5d8f-x7k2p", pod)];
//! let objects = Objects { workloads: &workloads, pods: &pods, ..Objects::default() };
//! let world = world::build(&objects).unwrap();
//! let pending: Vec<String> = world.pending.iter().map(|p| p.pod.key()).collect();
//! assert_eq!(pending, ["default/web-5d8f-x7k2p", "default/web-5d8f-0", "default/web-5d8f-1"]);
//! ```

mod nodes;
mod workloads;

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::apps::v1 as apps;
use k8s_openapi::api::batch::v1 as batch;
use k8s_openapi::api::core::v1 as core;
use k8s_openapi::api::policy::v1 as policy;
use k8s_openapi::api::storage::v1 as storage;

use crate::api::{NodeClaim, NodePool};
use crate::convert::{
    ConvertError, daemonset_from_k8s_with_pod, newest_daemonset_pod, pdb_from_k8s, pod_from_k8s,
};
use crate::labels::LabelPolicy;
use crate::model::{DaemonSet, InstanceType, Pod, PodDisruptionBudget};
use crate::scheduling::{ExistingNodeInput, NodePoolInput, SchedulingInput};
use crate::volumes::VolumeCatalog;

pub use workloads::MAX_REPLICAS;

/// An object and where it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Located<T> {
    /// Where the object came from, for messages (`pods.yaml: document 3`); free text.
    pub origin: String,
    /// `Kind/name` or `Kind/namespace/name`, for messages.
    pub name: String,
    /// The object.
    pub object: T,
}

impl<T> Located<T> {
    /// An object from `origin`, called `name` in messages.
    pub fn new(origin: impl Into<String>, name: impl Into<String>, object: T) -> Self {
        Located {
            origin: origin.into(),
            name: name.into(),
            object,
        }
    }
}

/// A workload whose pod template becomes pending pods (see [the rule](self#workloads)).
#[derive(Debug, Clone, PartialEq)]
pub enum Workload {
    /// `apps/v1 Deployment`.
    Deployment(Box<apps::Deployment>),
    /// `apps/v1 ReplicaSet`.
    ReplicaSet(Box<apps::ReplicaSet>),
    /// `apps/v1 StatefulSet`.
    StatefulSet(Box<apps::StatefulSet>),
    /// `batch/v1 Job`.
    Job(Box<batch::Job>),
}

/// Why the objects do not make a world: the object and field at fault.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum WorldError {
    /// An object breaks a schema or validation rule, or clashes with another.
    #[error("{origin}: {object}: {field}: {message}")]
    Invalid {
        /// Where the object came from ([`Located::origin`]).
        origin: String,
        /// `Kind/name` or `Kind/namespace/name`.
        object: String,
        /// The field path (`spec.replicas`); `-` for the whole object.
        field: String,
        /// What is wrong.
        message: String,
    },
}

impl WorldError {
    /// A [`WorldError::Invalid`] about `object` from `origin`; an empty `field` becomes `-`.
    pub fn invalid(
        origin: impl Into<String>,
        object: impl Into<String>,
        field: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        let field = field.into();
        WorldError::Invalid {
            origin: origin.into(),
            object: object.into(),
            field: if field.is_empty() { "-".into() } else { field },
            message: message.into(),
        }
    }

    /// The error of converting `located`'s object, with `prefix` before the field path (the
    /// template's `spec.template.` for a workload's pods).
    pub(crate) fn convert<T>(located: &Located<T>, prefix: &str, e: &ConvertError) -> Self {
        // The ConvertError's message without its `object: field` prefix.
        let full = e.to_string();
        let rest = full
            .strip_prefix(&format!("{}: ", e.object()))
            .unwrap_or(&full);
        let field = e.field();
        let rest = rest.strip_prefix(field.as_str()).unwrap_or(rest);
        let message = rest.trim_start_matches(": ").trim().to_string();
        WorldError::invalid(
            located.origin.clone(),
            located.name.clone(),
            format!("{prefix}{field}"),
            message,
        )
    }
}

/// The objects a world is built from. Every slice may be empty.
#[derive(Debug, Clone, Copy, Default)]
pub struct Objects<'a> {
    /// The usable NodePools (see [`usable_node_pools`]), each with the instance types it may
    /// launch, in the order the caller wants them planned (the planner: by name).
    pub node_pools: &'a [(NodePool, Vec<Arc<InstanceType>>)],
    /// `karpenter.sh/v1 NodeClaim`s: matched to their Node by `status.nodeName` or
    /// `status.providerID`, else in flight.
    pub node_claims: &'a [Located<NodeClaim>],
    /// `v1 Node`s.
    pub nodes: &'a [Located<core::Node>],
    /// `v1 Pod`s: bound when `spec.nodeName` is set, pending otherwise.
    pub pods: &'a [Located<core::Pod>],
    /// Deployments, ReplicaSets, StatefulSets and Jobs.
    pub workloads: &'a [Located<Workload>],
    /// `apps/v1 DaemonSet`s.
    pub daemonsets: &'a [Located<apps::DaemonSet>],
    /// `policy/v1 PodDisruptionBudget`s.
    pub pdbs: &'a [Located<policy::PodDisruptionBudget>],
    /// `v1 PersistentVolumeClaim`s.
    pub claims: &'a [Located<core::PersistentVolumeClaim>],
    /// `v1 PersistentVolume`s.
    pub volumes: &'a [Located<core::PersistentVolume>],
    /// `storage.k8s.io/v1 StorageClass`es.
    pub storage_classes: &'a [Located<storage::StorageClass>],
    /// `storage.k8s.io/v1 CSINode`s (nodes' per-driver volume limits).
    pub csinodes: &'a [Located<storage::CSINode>],
}

/// The object a pod comes from: itself, or the workload that would create it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodSource {
    /// Where the object came from ([`Located::origin`]).
    pub origin: String,
    /// `Pod/namespace/name` or `Deployment/namespace/web` ([`Located::name`]).
    pub object: String,
    /// The workload that would create the pod; `None` for a pod of the input (whose name and
    /// labels are the pod's own).
    pub workload: Option<WorkloadSource>,
}

/// The workload a pending pod stands for a replica of.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkloadSource {
    /// The workload's `metadata.name`.
    pub name: String,
    /// Its pod-template labels, then its own labels.
    pub labels: BTreeMap<String, String>,
}

/// A pod of the world and the object it comes from.
#[derive(Debug, Clone, PartialEq)]
pub struct SourcedPod {
    /// The pod, as the scheduler sees it.
    pub pod: Pod,
    /// Its source (shared by a workload's pods).
    pub source: Arc<PodSource>,
}

/// The scheduler's and the disruption planner's view of the objects.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct World {
    /// The NodePools, in the order given.
    pub node_pools: Vec<NodePool>,
    /// The same NodePools as the scheduler takes them, with their instance types.
    pub node_pool_inputs: Vec<NodePoolInput>,
    /// DaemonSets (overhead on every node they would run on).
    pub daemonsets: Vec<DaemonSet>,
    /// PodDisruptionBudgets.
    pub pdbs: Vec<PodDisruptionBudget>,
    /// Pods to plan: unbound input pods (not finished, not terminating, not DaemonSet or
    /// mirror pods), then the workloads' missing replicas, in input order.
    pub pending: Vec<SourcedPod>,
    /// Existing nodes by name: Nodes, then NodeClaims without a Node (in flight), each with
    /// its bound pods.
    pub nodes: BTreeMap<String, ExistingNodeInput>,
    /// Bound pods by `namespace/name`, with their source.
    pub bound: BTreeMap<String, SourcedPod>,
    /// The NodeClaims, sorted by name.
    pub node_claims: Vec<NodeClaim>,
    /// PersistentVolumeClaims, PersistentVolumes and StorageClasses.
    pub volumes: VolumeCatalog,
    /// Things worth telling the user: ignored objects, invalid NodeClaims, storage left out.
    pub notices: Vec<String>,
}

impl World {
    /// The provisioning scheduler's input: the NodePools, the existing nodes, the DaemonSets,
    /// the pending pods and the volumes.
    pub fn scheduling_input(&self) -> SchedulingInput {
        SchedulingInput {
            node_pools: self.node_pool_inputs.clone(),
            existing_nodes: self.nodes.values().cloned().collect(),
            daemonsets: self.daemonsets.clone(),
            pods: self.pending.iter().map(|p| p.pod.clone()).collect(),
            volumes: self.volumes.clone(),
            ..SchedulingInput::default()
        }
    }
}

/// The NodePools that provision, sorted by name, with a notice for each left out.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct UsableNodePools<'a> {
    /// The usable NodePools, sorted by name.
    pub node_pools: Vec<&'a Located<NodePool>>,
    /// The ones left out and why (static: `spec.replicas`; being deleted).
    pub notices: Vec<String>,
}

/// Checks the NodePools: names unique and every NodePool valid against `policy` (the first
/// error names the field; the others follow in the message). Static NodePools
/// (`spec.replicas`) and NodePools being deleted do not provision: they are left out with a
/// notice.
pub fn usable_node_pools<'a>(
    pools: &'a [Located<NodePool>],
    policy: &LabelPolicy,
) -> Result<UsableNodePools<'a>, WorldError> {
    let mut by_name: BTreeMap<&str, &Located<NodePool>> = BTreeMap::new();
    for p in pools {
        if let Some(prev) = by_name.insert(p.object.name(), p) {
            return Err(WorldError::invalid(
                p.origin.clone(),
                p.name.clone(),
                "metadata.name",
                format!("Duplicate value: also defined at {}", prev.origin),
            ));
        }
        if let Err(errors) = p.object.validate(policy) {
            let mut iter = errors.0.into_iter();
            if let Some(first) = iter.next() {
                let rest: Vec<String> = iter.map(|e| e.to_string()).collect();
                let mut message = format!("{first}");
                if let Some(stripped) = message.strip_prefix(&format!("{}: ", first.path)) {
                    message = stripped.to_string();
                }
                if !rest.is_empty() {
                    message = format!("{message} (also: {})", rest.join("; "));
                }
                return Err(WorldError::invalid(
                    p.origin.clone(),
                    p.name.clone(),
                    first.path,
                    message,
                ));
            }
        }
    }
    let mut out = UsableNodePools::default();
    for (name, p) in by_name {
        if p.object.is_static() {
            out.notices.push(format!(
                "{}: NodePool/{name}: static (spec.replicas): not used for provisioning",
                p.origin
            ));
        } else if p.object.metadata.deletion_timestamp.is_some() {
            out.notices.push(format!(
                "{}: NodePool/{name}: being deleted: not used for provisioning",
                p.origin
            ));
        } else {
            out.node_pools.push(p);
        }
    }
    Ok(out)
}

/// Builds the world from `objects` (see the [module documentation](self)).
///
/// Fails on the first object that cannot be converted (naming its origin, object and field), on
/// two pods with one `namespace/name`, on two Nodes (or a Node and an in-flight NodeClaim) with
/// one name, and on a workload whose replica count is negative or above [`MAX_REPLICAS`].
pub fn build(objects: &Objects<'_>) -> Result<World, WorldError> {
    let mut world = World::default();
    for (pool, types) in objects.node_pools {
        world
            .node_pool_inputs
            .push(NodePoolInput::from_nodepool(pool, types.clone()));
        world.node_pools.push(pool.clone());
    }
    // A DaemonSet's newest live pod, when the input has one, is its template (as upstream).
    for d in objects.daemonsets {
        let live = newest_daemonset_pod(&d.object, objects.pods.iter().map(|p| &p.object));
        let ds = daemonset_from_k8s_with_pod(&d.object, live)
            .map_err(|e| WorldError::convert(d, "", &e))?;
        world.daemonsets.push(ds);
    }
    for p in objects.pdbs {
        let pdb = pdb_from_k8s(&p.object).map_err(|e| WorldError::convert(p, "", &e))?;
        world.pdbs.push(pdb);
    }

    let mut pods = input_pods(objects.pods)?;
    pods.extend(workloads::expand(objects.workloads, objects.pods)?);
    check_unique(&pods)?;

    nodes::add_nodes(&mut world, objects)?;
    nodes::add_volumes(&mut world, objects, &mut pods)?;

    // Bound pods onto nodes; pending pods to plan.
    for p in pods {
        let pod = &p.pod;
        match pod.node_name.clone() {
            Some(node) => match world.nodes.get_mut(&node) {
                Some(n) => {
                    n.pods.push(p.pod.clone());
                    world.bound.insert(p.pod.key(), p);
                }
                None => world.notices.push(format!(
                    "{}: {}: bound to node {node}, which is not in the input: ignored",
                    p.source.origin, p.source.object
                )),
            },
            None => {
                if pod.is_daemonset_pod() || pod.is_mirror_pod() {
                    continue;
                }
                if pod.is_terminating() {
                    world.notices.push(format!(
                        "{}: {}: pod {} is terminating: not planned",
                        p.source.origin,
                        p.source.object,
                        pod.key()
                    ));
                    continue;
                }
                world.pending.push(p);
            }
        }
    }
    Ok(world)
}

/// The input pods that have not finished, converted.
fn input_pods(pods: &[Located<core::Pod>]) -> Result<Vec<SourcedPod>, WorldError> {
    let mut out = Vec::with_capacity(pods.len());
    for p in pods {
        let pod = pod_from_k8s(&p.object).map_err(|e| WorldError::convert(p, "", &e))?;
        if pod.is_terminal() {
            continue;
        }
        let source = Arc::new(PodSource {
            origin: p.origin.clone(),
            object: p.name.clone(),
            workload: None,
        });
        out.push(SourcedPod { pod, source });
    }
    Ok(out)
}

/// Two pods with one `namespace/name` are an error naming both sources.
fn check_unique(pods: &[SourcedPod]) -> Result<(), WorldError> {
    let mut seen: BTreeMap<String, &PodSource> = BTreeMap::new();
    for p in pods {
        let key = p.pod.key();
        if let Some(prev) = seen.get(&key) {
            return Err(WorldError::invalid(
                p.source.origin.clone(),
                p.source.object.clone(),
                "metadata.name",
                format!(
                    "Duplicate value: pod {key} is also produced by {} ({})",
                    prev.object, prev.origin
                ),
            ));
        }
        seen.insert(key, &p.source);
    }
    Ok(())
}

#[cfg(test)]
mod tests;

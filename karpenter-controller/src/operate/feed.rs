//! Kubernetes objects -> operator inputs: the conversion of each watched change, and the
//! [`Feeder`] that turns the watch's changes into the operator's inputs in order.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1 as core;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use karpenter_core::lifecycle::{self, NodeUpdate};
use karpenter_core::operator::Input;

use super::super::cluster::Change;

fn key(meta: &ObjectMeta) -> String {
    format!(
        "{}/{}",
        meta.namespace.as_deref().unwrap_or("default"),
        meta.name.as_deref().unwrap_or("")
    )
}

/// The operator input for a watch change (`None` for changes the operator does not read, and
/// for objects that cannot be converted, which are logged). A DaemonSet is converted on its own
/// here; [`Feeder`] converts it with one of its pods when one runs.
pub fn input_for(change: Change) -> Option<Input> {
    match change {
        Change::NodePool(p) => match (*p).clone().into_nodepool() {
            Ok(pool) => Some(Input::NodePoolApplied(Box::new(pool))),
            Err(e) => {
                tracing::warn!(error = %e, "NodePool not understood");
                None
            }
        },
        Change::NodePoolDeleted(p) => Some(Input::NodePoolDeleted(
            p.metadata.name.clone().unwrap_or_default(),
        )),
        Change::NodeClaim(c) => match (*c).clone().into_nodeclaim() {
            Ok(claim) => Some(Input::NodeClaimApplied(Box::new(claim))),
            Err(e) => {
                tracing::warn!(error = %e, "NodeClaim not understood");
                None
            }
        },
        Change::NodeClaimDeleted(c) => Some(Input::NodeClaimDeleted(
            c.metadata.name.clone().unwrap_or_default(),
        )),
        Change::Node(n) => match karpenter_core::convert::lifecycle_node_from_k8s(&n) {
            Ok(node) => Some(Input::NodeApplied(Box::new(node))),
            Err(e) => {
                tracing::warn!(error = %e, "Node not understood");
                None
            }
        },
        Change::NodeDeleted(n) => Some(Input::NodeDeleted(
            n.metadata.name.clone().unwrap_or_default(),
        )),
        Change::Pod(p) => pod_input(&p).0,
        Change::PodDeleted(p) => Some(Input::PodDeleted(key(&p.metadata))),
        Change::DaemonSet(d) => daemonset_input(&d, None),
        Change::DaemonSetDeleted(d) => Some(Input::DaemonSetDeleted(key(&d.metadata))),
        Change::Pdb(p) => match karpenter_core::convert::pdb_from_k8s(&p) {
            Ok(pdb) => Some(Input::PdbApplied(Box::new(pdb))),
            Err(e) => {
                tracing::warn!(error = %e, "PodDisruptionBudget not understood");
                None
            }
        },
        Change::PdbDeleted(p) => Some(Input::PdbDeleted(key(&p.metadata))),
        Change::VolumeAttachment(a) => Some(Input::VolumeAttachmentApplied {
            name: a.metadata.name.clone().unwrap_or_default(),
            node_name: a.spec.node_name.clone(),
        }),
        Change::VolumeAttachmentDeleted(a) => Some(Input::VolumeAttachmentDeleted(
            a.metadata.name.clone().unwrap_or_default(),
        )),
        Change::NodeOverlay(o) => match (*o).clone().into_nodeoverlay() {
            Ok(overlay) => Some(Input::NodeOverlayApplied(Box::new(overlay))),
            Err(e) => {
                tracing::warn!(error = %e, "NodeOverlay not understood");
                None
            }
        },
        Change::NodeOverlayDeleted(o) => Some(Input::NodeOverlayDeleted(
            o.metadata.name.clone().unwrap_or_default(),
        )),
        Change::Interruption(e) => Some(Input::Interruption(e)),
        Change::Other(_) | Change::Synced(_) => None,
    }
}

/// The input for a Pod, and the conversion error when the input is the stand-in of an
/// unreadable bound pod ([`unreadable_bound_pod`]).
fn pod_input(p: &core::Pod) -> (Option<Input>, Option<String>) {
    match karpenter_core::convert::pod_from_k8s(p) {
        Ok(pod) => (Some(Input::PodApplied(Box::new(pod))), None),
        // Fail closed: a bound pod that cannot be read still occupies and protects its node.
        Err(e) => match unreadable_bound_pod(p) {
            Some(pod) => (Some(Input::PodApplied(Box::new(pod))), Some(e.to_string())),
            None => {
                tracing::debug!(error = %e, pod = %key(&p.metadata), "pending pod not understood; not provisioned for");
                (None, None)
            }
        },
    }
}

/// The stand-in for a pod bound to a node that could not be converted (`None` for a pod that
/// is not bound, or has finished): the pod as far as it can be known, on its node, annotated
/// `karpenter.sh/do-not-disrupt`. Dropping it would make its node look emptier than it is, so
/// that consolidation and drain would pass over the pod, its PodDisruptionBudget and its own
/// annotations; the stand-in keeps the node from voluntary disruption instead (failing closed).
pub fn unreadable_bound_pod(pod: &core::Pod) -> Option<karpenter_core::model::Pod> {
    use karpenter_core::model::PodPhase;
    let node = pod.spec.as_ref()?.node_name.clone()?;
    let phase = match pod.status.as_ref().and_then(|s| s.phase.as_deref()) {
        Some("Succeeded" | "Failed") => return None,
        Some("Running") => PodPhase::Running,
        Some("Pending") => PodPhase::Pending,
        _ => PodPhase::Unknown,
    };
    let meta = &pod.metadata;
    let mut out = karpenter_core::model::Pod::new(
        meta.namespace.as_deref().unwrap_or("default"),
        meta.name.as_deref().unwrap_or_default(),
    );
    if let Some(uid) = &meta.uid {
        out.uid = uid.clone();
    }
    out.labels = meta.labels.clone().unwrap_or_default();
    out.annotations = meta.annotations.clone().unwrap_or_default();
    out.annotations.insert(
        karpenter_core::labels::DO_NOT_DISRUPT_ANNOTATION.to_string(),
        "true".to_string(),
    );
    if let Some(t) = &meta.creation_timestamp {
        out.creation_timestamp = t.0;
    }
    out.deletion_timestamp = meta.deletion_timestamp.as_ref().map(|t| t.0);
    out.node_name = Some(node);
    out.phase = phase;
    Some(out)
}

fn daemonset_input(d: &DaemonSet, pod: Option<&core::Pod>) -> Option<Input> {
    match karpenter_core::convert::daemonset_from_k8s_with_pod(d, pod) {
        Ok(ds) => Some(Input::DaemonSetApplied(Box::new(ds))),
        Err(e) => {
            tracing::warn!(error = %e, "DaemonSet not understood");
            None
        }
    }
}

/// The uid of the DaemonSet that owns `pod`, if one does.
fn owning_daemonset(pod: &core::Pod) -> Option<&str> {
    pod.metadata
        .owner_references
        .iter()
        .flatten()
        .find(|o| o.kind == "DaemonSet")
        .map(|o| o.uid.as_str())
}

/// Turns watch changes into operator inputs. Pods are not kept here (the operator's view is
/// their only copy): for each DaemonSet, one of its pods is, since a DaemonSet's running pod
/// describes it best (its resolved requests, as upstream reads it); a DaemonSet is converted
/// again when its first pod shows up.
#[derive(Default)]
pub struct Feeder {
    daemonsets: BTreeMap<String, Arc<DaemonSet>>,
    daemonset_pods: BTreeMap<String, Arc<core::Pod>>,
    synced: BTreeSet<&'static str>,
    /// Bound pods that could not be converted, by key, already reported.
    unreadable: BTreeSet<String>,
    /// Newly found unreadable bound pods (key, error), for the shell to report once.
    unreadable_new: Vec<(String, String)>,
    /// Each Node as the operator's view has it: the base its Node updates are decided on
    /// (see [`edits`]).
    nodes: BTreeMap<String, lifecycle::Node>,
    /// Each NodePool's `resourceVersion` as the operator last saw it: the version its status
    /// is computed from.
    pool_versions: BTreeMap<String, String>,
    /// NodeOverlays are watched too (their gate is on).
    node_overlay: bool,
}

impl Feeder {
    /// A feeder that also waits for the NodeOverlay watch's initial list before it reports
    /// [`synced`](Self::synced) (the `NodeOverlay` gate).
    pub fn with_node_overlay(mut self, on: bool) -> Self {
        self.node_overlay = on;
        self
    }

    /// The inputs for `change`, in order. Hand each to the operator after [`Self::observe`].
    pub fn inputs(&mut self, change: Change) -> Vec<Input> {
        self.convert(change)
    }

    /// Records what the shell keeps of `input` (each Node as the operator's view has it, each
    /// NodePool's `resourceVersion`): call it right before the operator handles `input`, and
    /// carry out the actions of that input before observing the next, so the Node an update
    /// is diffed against is the one the operator decided on.
    pub fn observe(&mut self, input: &Input) {
        {
            match input {
                Input::NodeApplied(n) => {
                    self.nodes.insert(n.name.clone(), (**n).clone());
                }
                Input::NodeDeleted(name) => {
                    self.nodes.remove(name);
                }
                Input::NodePoolApplied(p) => match &p.metadata.resource_version {
                    Some(rv) => {
                        self.pool_versions.insert(p.name().to_string(), rv.clone());
                    }
                    None => {
                        self.pool_versions.remove(p.name());
                    }
                },
                Input::NodePoolDeleted(name) => {
                    self.pool_versions.remove(name);
                }
                _ => {}
            }
        }
    }

    /// The Node as the operator's view has it, and records `update`, which the view took
    /// at once (the operator applies its own Node patches to its view when it emits them).
    pub fn node_base(&mut self, update: &NodeUpdate) -> Option<lifecycle::Node> {
        let node = self.nodes.get_mut(&update.node_name)?;
        let base = node.clone();
        update.apply(node);
        Some(base)
    }

    /// The `resourceVersion` of the NodePool as the operator last saw it.
    pub fn pool_version(&self, name: &str) -> Option<&str> {
        self.pool_versions.get(name).map(String::as_str)
    }

    fn convert(&mut self, change: Change) -> Vec<Input> {
        let mut out = Vec::new();
        match &change {
            Change::Synced(kind) => {
                self.synced.insert(kind);
            }
            Change::Pod(p) => {
                if let Some(uid) = owning_daemonset(p)
                    && !self.daemonset_pods.contains_key(uid)
                {
                    self.daemonset_pods.insert(uid.to_string(), p.clone());
                    if let Some(d) = self.daemonsets.get(uid) {
                        out.extend(daemonset_input(d, Some(p)));
                    }
                }
                let (input, unreadable) = pod_input(p);
                match unreadable {
                    Some(e) if self.unreadable.insert(key(&p.metadata)) => {
                        self.unreadable_new.push((key(&p.metadata), e));
                    }
                    Some(_) => {}
                    None => {
                        self.unreadable.remove(&key(&p.metadata));
                    }
                }
                out.extend(input);
                return out;
            }
            Change::PodDeleted(p) => {
                self.unreadable.remove(&key(&p.metadata));
                let uid = self.daemonset_pods.iter().find_map(|(uid, kept)| {
                    (kept.metadata.name == p.metadata.name
                        && kept.metadata.namespace == p.metadata.namespace)
                        .then(|| uid.clone())
                });
                if let Some(uid) = uid {
                    self.daemonset_pods.remove(&uid);
                }
            }
            Change::DaemonSet(d) => {
                let uid = d.metadata.uid.clone().unwrap_or_default();
                self.daemonsets.insert(uid.clone(), d.clone());
                let pod = self.daemonset_pods.get(&uid).map(|p| p.as_ref());
                out.extend(daemonset_input(d, pod));
                return out;
            }
            Change::DaemonSetDeleted(d) => {
                let uid = d.metadata.uid.clone().unwrap_or_default();
                self.daemonsets.remove(&uid);
                self.daemonset_pods.remove(&uid);
            }
            _ => {}
        }
        out.extend(input_for(change));
        out
    }

    /// The bound pods found unreadable since the last call (`namespace/name`, the error), each
    /// reported once while it exists.
    pub fn take_unreadable(&mut self) -> Vec<(String, String)> {
        std::mem::take(&mut self.unreadable_new)
    }

    /// Whether every watched kind's initial list has been fed.
    pub fn synced(&self) -> bool {
        self.synced.len() >= super::super::cluster::watched_kinds(self.node_overlay)
    }
}

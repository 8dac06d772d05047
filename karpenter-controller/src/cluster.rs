//! The controller's view of the cluster: one kube-rs watch per kind the operator reads, and a
//! channel of changes for the operator.
//!
//! Pods, most of a cluster's objects, are kept in one place only: the operator's view (the
//! operator shell feeds it every change, leading or not). The other kinds, a few thousand
//! objects at most, also have an in-memory store here (a kube-rs reflector store) that the
//! metrics, the merge patches and the AWS interruption consumer read.

use std::collections::BTreeSet;
use std::fmt::Debug;
use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::storage::v1::{CSINode, StorageClass, VolumeAttachment};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use karpenter_core::crd::{KubeNodeClaim, KubeNodeOverlay, KubeNodePool};
use kube::runtime::reflector::Store;
use kube::runtime::reflector::store::Writer;
use kube::runtime::watcher::Event;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;
use tokio::sync::{mpsc, watch};

/// A change seen by a watch, for the operator.
#[derive(Debug, Clone)]
pub enum Change {
    /// A Pod was created or changed.
    Pod(Arc<Pod>),
    /// A Pod was deleted.
    PodDeleted(Arc<Pod>),
    /// A Node was created or changed.
    Node(Arc<Node>),
    /// A Node was deleted.
    NodeDeleted(Arc<Node>),
    /// A NodeClaim was created or changed.
    NodeClaim(Arc<KubeNodeClaim>),
    /// A NodeClaim was deleted.
    NodeClaimDeleted(Arc<KubeNodeClaim>),
    /// A NodePool was created or changed.
    NodePool(Arc<KubeNodePool>),
    /// A NodePool was deleted.
    NodePoolDeleted(Arc<KubeNodePool>),
    /// A DaemonSet was created or changed.
    DaemonSet(Arc<DaemonSet>),
    /// A DaemonSet was deleted.
    DaemonSetDeleted(Arc<DaemonSet>),
    /// A PodDisruptionBudget was created or changed.
    Pdb(Arc<PodDisruptionBudget>),
    /// A PodDisruptionBudget was deleted.
    PdbDeleted(Arc<PodDisruptionBudget>),
    /// A VolumeAttachment was created or changed.
    VolumeAttachment(Arc<VolumeAttachment>),
    /// A VolumeAttachment was deleted.
    VolumeAttachmentDeleted(Arc<VolumeAttachment>),
    /// A NodeOverlay was created or changed (watched with the `NodeOverlay` gate only).
    NodeOverlay(Arc<KubeNodeOverlay>),
    /// A NodeOverlay was deleted.
    NodeOverlayDeleted(Arc<KubeNodeOverlay>),
    /// Another kind the scheduler reads (volumes, CSINodes) changed.
    Other(&'static str),
    /// A watch finished its initial list (the kind's name).
    Synced(&'static str),
    /// A message of the cloud provider's interruption queue (not a watch change; a provider's
    /// queue consumer sends it on the same channel, see [`crate::ProviderContext`]).
    Interruption(karpenter_core::operator::InterruptionEvent),
}

/// The stores of the watched kinds other than Pods (whose only copy is the operator's view).
#[derive(Clone)]
pub struct Caches {
    /// Nodes.
    pub nodes: Store<Node>,
    /// NodeClaims.
    pub nodeclaims: Store<KubeNodeClaim>,
    /// NodePools.
    pub nodepools: Store<KubeNodePool>,
    /// DaemonSets.
    pub daemonsets: Store<DaemonSet>,
    /// PodDisruptionBudgets.
    pub pdbs: Store<PodDisruptionBudget>,
    /// PersistentVolumeClaims.
    pub pvcs: Store<PersistentVolumeClaim>,
    /// PersistentVolumes.
    pub pvs: Store<PersistentVolume>,
    /// StorageClasses.
    pub storage_classes: Store<StorageClass>,
    /// CSINodes.
    pub csinodes: Store<CSINode>,
    synced: watch::Receiver<usize>,
    kinds: usize,
}

/// How many changes may wait for the operator: a watch whose change finds the channel full
/// waits (and reads no further) until the operator has taken one, so a slow operator slows the
/// watches instead of piling their changes up in memory.
pub const CHANGES_CAPACITY: usize = 4096;

/// How many kinds are always watched (NodeOverlays add one with their gate on).
pub const WATCHED_KINDS: usize = 11;

/// How many kinds are watched: [`WATCHED_KINDS`], plus NodeOverlays when `node_overlay`.
pub fn watched_kinds(node_overlay: bool) -> usize {
    WATCHED_KINDS + usize::from(node_overlay)
}

impl Caches {
    /// Whether every watch has completed its initial list (the changes of the lists may still
    /// be on their way to the operator: it counts [`Change::Synced`] itself).
    pub fn synced(&self) -> bool {
        *self.synced.borrow() >= self.kinds
    }
}

/// Starts the watch of one kind: every event is trimmed, applied to `store` when there is one,
/// and sent to the operator as a [`Change`]. When a watch lists again (after an expired
/// resource version or a reconnect), objects of the kind that the new list no longer holds are
/// sent as deletions through `gone` (when given), so the operator never keeps an object that was
/// deleted while the watch was down.
#[allow(clippy::too_many_arguments)]
fn spawn_watch<K>(
    api: Api<K>,
    kind: &'static str,
    trim: fn(&mut K),
    wrap: fn(Event<K>) -> Option<Change>,
    gone: Option<fn(ObjectMeta) -> Change>,
    mut store: Option<Writer<K>>,
    changes: mpsc::Sender<Change>,
    synced: Arc<watch::Sender<usize>>,
    mut shutdown: watch::Receiver<bool>,
) where
    K: Resource + Clone + Debug + DeserializeOwned + Send + Sync + 'static,
    K::DynamicType: Default + Eq + std::hash::Hash + Clone + Send + Sync,
{
    let stream = watcher(api, watcher::Config::default())
        .default_backoff()
        .modify(move |o| {
            strip(o);
            trim(o);
        });
    tokio::spawn(async move {
        let mut stream = std::pin::pin!(stream);
        let mut counted = false;
        // The keys (namespace, name) seen, and those of a list in progress.
        let mut known: BTreeSet<(String, String)> = BTreeSet::new();
        let mut relisted: BTreeSet<(String, String)> = BTreeSet::new();
        loop {
            let next = tokio::select! {
                n = stream.next() => n,
                _ = shutdown.wait_for(|s| *s) => return,
            };
            match next {
                None => return,
                Some(Err(e)) => {
                    tracing::warn!(kind, error = %e, "watch failed; retrying with backoff");
                }
                Some(Ok(event)) => {
                    if let Some(w) = store.as_mut() {
                        w.apply_watcher_event(&event);
                    }
                    if gone.is_some() {
                        match &event {
                            Event::Init => relisted.clear(),
                            Event::InitApply(o) => {
                                relisted.insert(object_key(o.meta()));
                            }
                            Event::Apply(o) => {
                                known.insert(object_key(o.meta()));
                            }
                            Event::Delete(o) => {
                                known.remove(&object_key(o.meta()));
                            }
                            Event::InitDone => {}
                        }
                    }
                    if matches!(event, Event::InitDone) {
                        if let Some(gone) = gone {
                            let relisted = std::mem::take(&mut relisted);
                            for (namespace, name) in known.difference(&relisted) {
                                let meta = ObjectMeta {
                                    namespace: (!namespace.is_empty()).then(|| namespace.clone()),
                                    name: Some(name.clone()),
                                    ..ObjectMeta::default()
                                };
                                if changes.send(gone(meta)).await.is_err() {
                                    return;
                                }
                            }
                            known = relisted;
                        }
                        if !counted {
                            counted = true;
                            synced.send_modify(|n| *n += 1);
                        }
                        if changes.send(Change::Synced(kind)).await.is_err() {
                            return;
                        }
                    } else if let Some(change) = wrap(event)
                        && changes.send(change).await.is_err()
                    {
                        return;
                    }
                }
            }
        }
    });
}

fn object_key(meta: &ObjectMeta) -> (String, String) {
    (
        meta.namespace.clone().unwrap_or_default(),
        meta.name.clone().unwrap_or_default(),
    )
}

/// A store and its writer for a kind the caches keep.
fn store<K>() -> (Store<K>, Option<Writer<K>>)
where
    K: Resource + Clone + 'static,
    K::DynamicType: Default + Eq + std::hash::Hash + Clone,
{
    let writer: Writer<K> = Writer::default();
    (writer.as_reader(), Some(writer))
}

/// What no loop reads is dropped before an object enters a cache: `managedFields` (often a
/// third of an object's size) and the `kubectl.kubernetes.io/last-applied-configuration`
/// annotation (a second copy of the object's spec).
fn strip<K: Resource>(o: &mut K) {
    o.meta_mut().managed_fields = None;
    if let Some(a) = o.meta_mut().annotations.as_mut() {
        a.remove(LAST_APPLIED);
    }
}

/// `kubectl apply`'s copy of the applied object.
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// Keeps everything of a kind.
fn keep<K>(_: &mut K) {}

/// What of a Pod no loop, conversion or metric reads, dropped before it enters the cache (pods
/// are most of a cluster's objects): per container the command, arguments, environment,
/// probes, lifecycle hooks, mounts and security context (kept: name, image, resources, ports,
/// restart and resize policies), per container status everything but the allocated and
/// current resources, and the contents of projected, ConfigMap, Secret and downward-API
/// volumes (kept: their names and kinds; the scheduler reads only claims and ephemeral
/// volumes).
pub fn trim_pod(pod: &mut Pod) {
    use k8s_openapi::api::core::v1 as core;
    fn container(c: &mut core::Container) {
        c.command = None;
        c.args = None;
        c.env = None;
        c.env_from = None;
        c.liveness_probe = None;
        c.readiness_probe = None;
        c.startup_probe = None;
        c.lifecycle = None;
        c.volume_mounts = None;
        c.volume_devices = None;
        c.security_context = None;
        c.working_dir = None;
        c.termination_message_path = None;
        c.termination_message_policy = None;
    }
    fn status(s: &mut core::ContainerStatus) {
        s.state = None;
        s.last_state = None;
        s.container_id = None;
        s.image_id = String::new();
        s.volume_mounts = None;
        s.user = None;
        s.allocated_resources_status = None;
    }
    if let Some(spec) = pod.spec.as_mut() {
        spec.containers.iter_mut().for_each(container);
        spec.init_containers
            .iter_mut()
            .flatten()
            .for_each(container);
        spec.ephemeral_containers = None;
        for v in spec.volumes.iter_mut().flatten() {
            if v.projected.is_some() {
                v.projected = Some(core::ProjectedVolumeSource::default());
            }
            if v.config_map.is_some() {
                v.config_map = Some(core::ConfigMapVolumeSource::default());
            }
            if v.secret.is_some() {
                v.secret = Some(core::SecretVolumeSource::default());
            }
            if v.downward_api.is_some() {
                v.downward_api = Some(core::DownwardAPIVolumeSource::default());
            }
        }
    }
    if let Some(st) = pod.status.as_mut() {
        for s in [
            st.container_statuses.as_mut(),
            st.init_container_statuses.as_mut(),
        ]
        .into_iter()
        .flatten()
        {
            s.iter_mut().for_each(status);
        }
        st.ephemeral_container_statuses = None;
    }
}

macro_rules! wrapper {
    ($name:ident, $k:ty, $applied:ident, $deleted:ident) => {
        fn $name(e: Event<$k>) -> Option<Change> {
            match e {
                Event::Apply(o) | Event::InitApply(o) => Some(Change::$applied(Arc::new(o))),
                Event::Delete(o) => Some(Change::$deleted(Arc::new(o))),
                Event::Init | Event::InitDone => None,
            }
        }
    };
}
wrapper!(pod_change, Pod, Pod, PodDeleted);
wrapper!(node_change, Node, Node, NodeDeleted);
wrapper!(nodeclaim_change, KubeNodeClaim, NodeClaim, NodeClaimDeleted);
wrapper!(nodepool_change, KubeNodePool, NodePool, NodePoolDeleted);
wrapper!(ds_change, DaemonSet, DaemonSet, DaemonSetDeleted);
wrapper!(pdb_change, PodDisruptionBudget, Pdb, PdbDeleted);
wrapper!(
    attachment_change,
    VolumeAttachment,
    VolumeAttachment,
    VolumeAttachmentDeleted
);
wrapper!(
    overlay_change,
    KubeNodeOverlay,
    NodeOverlay,
    NodeOverlayDeleted
);

fn other<K>(kind: &'static str) -> impl Fn(Event<K>) -> Option<Change> {
    move |e| match e {
        Event::Init | Event::InitDone => None,
        _ => Some(Change::Other(kind)),
    }
}

/// Starts every watch (NodeOverlays only when `node_overlay`: their CRD need not be installed
/// otherwise); the stores fill as the initial lists arrive, and every object and change (the
/// initial lists' objects too) is sent on `tx` (bounded: see [`CHANGES_CAPACITY`]).
pub fn start(
    client: &Client,
    tx: mpsc::Sender<Change>,
    shutdown: watch::Receiver<bool>,
    node_overlay: bool,
) -> Caches {
    let (synced_tx, synced_rx) = watch::channel(0usize);
    let synced = Arc::new(synced_tx);
    macro_rules! w {
        ($k:ty, $kind:literal, $trim:expr, $wrap:expr, $gone:expr, $store:expr) => {
            spawn_watch::<$k>(
                Api::all(client.clone()),
                $kind,
                $trim,
                $wrap,
                $gone,
                $store,
                tx.clone(),
                synced.clone(),
                shutdown.clone(),
            )
        };
    }
    // Function pointers for the kinds that only signal "something changed".
    fn pvc(e: Event<PersistentVolumeClaim>) -> Option<Change> {
        other("PersistentVolumeClaim")(e)
    }
    fn pv(e: Event<PersistentVolume>) -> Option<Change> {
        other("PersistentVolume")(e)
    }
    fn sc(e: Event<StorageClass>) -> Option<Change> {
        other("StorageClass")(e)
    }
    fn csi(e: Event<CSINode>) -> Option<Change> {
        other("CSINode")(e)
    }
    fn pod_gone(metadata: ObjectMeta) -> Change {
        Change::PodDeleted(Arc::new(Pod {
            metadata,
            ..Pod::default()
        }))
    }
    fn node_gone(metadata: ObjectMeta) -> Change {
        Change::NodeDeleted(Arc::new(Node {
            metadata,
            ..Node::default()
        }))
    }
    fn attachment_gone(metadata: ObjectMeta) -> Change {
        Change::VolumeAttachmentDeleted(Arc::new(VolumeAttachment {
            metadata,
            ..VolumeAttachment::default()
        }))
    }
    w!(Pod, "Pod", trim_pod, pod_change, Some(pod_gone), None);
    // VolumeAttachments: a draining Node's termination waits for its attachments to go. Only
    // the operator's view keeps them (name -> node).
    w!(
        VolumeAttachment,
        "VolumeAttachment",
        keep,
        attachment_change,
        Some(attachment_gone),
        None
    );
    let (nodes, writer) = store();
    w!(Node, "Node", keep, node_change, Some(node_gone), writer);
    let (nodeclaims, writer) = store();
    w!(
        KubeNodeClaim,
        "NodeClaim",
        keep,
        nodeclaim_change,
        None,
        writer
    );
    let (nodepools, writer) = store();
    w!(
        KubeNodePool,
        "NodePool",
        keep,
        nodepool_change,
        None,
        writer
    );
    let (daemonsets, writer) = store();
    w!(DaemonSet, "DaemonSet", keep, ds_change, None, writer);
    let (pdbs, writer) = store();
    w!(
        PodDisruptionBudget,
        "PodDisruptionBudget",
        keep,
        pdb_change,
        None,
        writer
    );
    let (pvcs, writer) = store();
    w!(
        PersistentVolumeClaim,
        "PersistentVolumeClaim",
        keep,
        pvc,
        None,
        writer
    );
    let (pvs, writer) = store();
    w!(PersistentVolume, "PersistentVolume", keep, pv, None, writer);
    let (storage_classes, writer) = store();
    w!(StorageClass, "StorageClass", keep, sc, None, writer);
    let (csinodes, writer) = store();
    w!(CSINode, "CSINode", keep, csi, None, writer);
    fn overlay_gone(metadata: ObjectMeta) -> Change {
        Change::NodeOverlayDeleted(Arc::new(KubeNodeOverlay {
            metadata,
            spec: Default::default(),
            status: None,
        }))
    }
    if node_overlay {
        w!(
            KubeNodeOverlay,
            "NodeOverlay",
            keep,
            overlay_change,
            Some(overlay_gone),
            None
        );
    }
    Caches {
        nodes,
        nodeclaims,
        nodepools,
        daemonsets,
        pdbs,
        pvcs,
        pvs,
        storage_classes,
        csinodes,
        synced: synced_rx,
        kinds: watched_kinds(node_overlay),
    }
}

/// A reflector store's objects, for code that wants plain references.
pub fn objects<K>(store: &Store<K>) -> Vec<Arc<K>>
where
    K: Resource + Clone + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    store.state()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Trimming drops only what the operator does not read: the converted pod is the same
    /// (stripping removes managedFields and kubectl's last-applied copy).
    #[test]
    fn a_trimmed_pod_converts_to_the_same_operator_pod() {
        let probe = json!({"httpGet": {"path": "/healthz", "port": 8080}, "periodSeconds": 5});
        let mut pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": "web-1", "namespace": "shop", "uid": "u1",
                         "labels": {"app": "web"},
                         "annotations": {"karpenter.sh/do-not-disrupt": "true",
                                         LAST_APPLIED: "{\"big\": true}"},
                         "managedFields": [{"manager": "kubectl", "operation": "Apply"}],
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                              "name": "web", "uid": "rs", "controller": true}]},
            "spec": {
                "nodeName": "n1",
                "nodeSelector": {"disk": "ssd"},
                "tolerations": [{"key": "team", "operator": "Exists"}],
                "initContainers": [{"name": "sidecar", "image": "s", "restartPolicy": "Always",
                                    "env": [{"name": "A", "value": "1"}],
                                    "resources": {"requests": {"cpu": "100m"}}}],
                "containers": [{
                    "name": "app", "image": "web:1",
                    "command": ["/bin/web"], "args": ["--port", "8080"],
                    "env": [{"name": "B", "value": "2"}],
                    "ports": [{"containerPort": 8080, "hostPort": 8080}],
                    "livenessProbe": probe, "readinessProbe": probe,
                    "volumeMounts": [{"name": "data", "mountPath": "/data"}],
                    "securityContext": {"runAsUser": 1000},
                    "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}
                }],
                "volumes": [
                    {"name": "data", "persistentVolumeClaim": {"claimName": "data-web-1"}},
                    {"name": "token", "projected": {"sources": [{"serviceAccountToken": {"path": "t"}}]}},
                    {"name": "conf", "configMap": {"name": "web"}},
                    {"name": "tmp", "emptyDir": {}}
                ]
            },
            "status": {
                "phase": "Running",
                "startTime": "2026-01-01T00:00:00Z",
                "conditions": [{"type": "Ready", "status": "True"}],
                "containerStatuses": [{"name": "app", "image": "web:1", "imageID": "sha",
                                       "ready": true, "restartCount": 0,
                                       "allocatedResources": {"cpu": "1", "memory": "1Gi"},
                                       "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}}}]
            }
        }))
        .unwrap();
        strip(&mut pod);
        let before = karpenter_core::convert::pod_from_k8s(&pod).unwrap();
        trim_pod(&mut pod);
        let after = karpenter_core::convert::pod_from_k8s(&pod).unwrap();
        assert_eq!(format!("{before:?}"), format!("{after:?}"));
        assert!(pod.metadata.managed_fields.is_none());
        let annotations = pod.metadata.annotations.as_ref().unwrap();
        assert!(!annotations.contains_key(LAST_APPLIED));
        assert!(annotations.contains_key("karpenter.sh/do-not-disrupt"));
        let spec = pod.spec.as_ref().unwrap();
        let app = &spec.containers[0];
        assert!(app.env.is_none() && app.liveness_probe.is_none() && app.command.is_none());
        assert!(app.ports.is_some() && app.resources.is_some());
        let token = spec.volumes.as_ref().unwrap()[1]
            .projected
            .as_ref()
            .unwrap();
        assert!(token.sources.is_none());
        let status = &pod
            .status
            .as_ref()
            .unwrap()
            .container_statuses
            .as_ref()
            .unwrap()[0];
        assert!(status.state.is_none() && status.allocated_resources.is_some());
    }
}

//! The controller's view of the cluster: one kube-rs reflector (a watch plus an in-memory
//! store) per kind the operator reads, and a channel of changes for the operator.

use std::fmt::Debug;
use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::storage::v1::{CSINode, StorageClass};
use karpenter_core::crd::{KubeNodeClaim, KubeNodePool};
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
    /// Another kind the scheduler reads (volumes, CSINodes) changed.
    Other(&'static str),
    /// A watch finished its initial list (the kind's name).
    Synced(&'static str),
    /// A message of the cloud provider's interruption queue (not a watch change; the AWS
    /// mode's queue consumer sends it on the same channel).
    Interruption(karpenter_core::operator::InterruptionEvent),
}

/// The stores of every watched kind.
#[derive(Clone)]
pub struct Caches {
    /// Pods.
    pub pods: Store<Pod>,
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
}

/// How many kinds are watched.
pub const WATCHED_KINDS: usize = 10;

impl Caches {
    /// Whether every watch has completed its initial list.
    pub fn synced(&self) -> bool {
        *self.synced.borrow() >= WATCHED_KINDS
    }
}

fn spawn_watch<K>(
    api: Api<K>,
    kind: &'static str,
    wrap: fn(Event<K>) -> Option<Change>,
    changes: mpsc::UnboundedSender<Change>,
    synced: Arc<watch::Sender<usize>>,
    mut shutdown: watch::Receiver<bool>,
) -> Store<K>
where
    K: Resource + Clone + Debug + DeserializeOwned + Send + Sync + 'static,
    K::DynamicType: Default + Eq + std::hash::Hash + Clone + Send + Sync,
{
    let writer: Writer<K> = Writer::default();
    let reader = writer.as_reader();
    let stream = watcher(api, watcher::Config::default())
        .default_backoff()
        .reflect(writer);
    tokio::spawn(async move {
        let mut stream = std::pin::pin!(stream);
        let mut counted = false;
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
                    if matches!(event, Event::InitDone) {
                        if !counted {
                            counted = true;
                            synced.send_modify(|n| *n += 1);
                        }
                        let _ = changes.send(Change::Synced(kind));
                    } else if let Some(change) = wrap(event) {
                        let _ = changes.send(change);
                    }
                }
            }
        }
    });
    reader
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

fn other<K>(kind: &'static str) -> impl Fn(Event<K>) -> Option<Change> {
    move |e| match e {
        Event::Init | Event::InitDone => None,
        _ => Some(Change::Other(kind)),
    }
}

/// Starts every watch; the stores fill as the initial lists arrive, then every change is also
/// sent on the returned channel.
pub fn start(
    client: &Client,
    shutdown: watch::Receiver<bool>,
) -> (Caches, mpsc::UnboundedReceiver<Change>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let (synced_tx, synced_rx) = watch::channel(0usize);
    let synced = Arc::new(synced_tx);
    macro_rules! w {
        ($k:ty, $kind:literal, $wrap:expr) => {
            spawn_watch::<$k>(
                Api::all(client.clone()),
                $kind,
                $wrap,
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
    let caches = Caches {
        pods: w!(Pod, "Pod", pod_change),
        nodes: w!(Node, "Node", node_change),
        nodeclaims: w!(KubeNodeClaim, "NodeClaim", nodeclaim_change),
        nodepools: w!(KubeNodePool, "NodePool", nodepool_change),
        daemonsets: w!(DaemonSet, "DaemonSet", ds_change),
        pdbs: w!(PodDisruptionBudget, "PodDisruptionBudget", pdb_change),
        pvcs: w!(PersistentVolumeClaim, "PersistentVolumeClaim", pvc),
        pvs: w!(PersistentVolume, "PersistentVolume", pv),
        storage_classes: w!(StorageClass, "StorageClass", sc),
        csinodes: w!(CSINode, "CSINode", csi),
        synced: synced_rx,
    };
    (caches, rx)
}

/// A reflector store's objects, for code that wants plain references.
pub fn objects<K>(store: &Store<K>) -> Vec<Arc<K>>
where
    K: Resource + Clone + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    store.state()
}

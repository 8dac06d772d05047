//! The operator shell: while this replica leads, feed the operator loops
//! (`karpenter_core::operator`) every object of the watch caches and every change after that,
//! and carry out what they ask for: NodeClaim, Node, NodePool and Pod writes become API calls,
//! cloud calls go to the CloudProvider, evictions to the Eviction API, events to `core/v1`
//! Events, metrics to the registry, wake-ups to a tokio timer. Nothing here decides anything.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1 as core;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use karpenter_core::api::NodeClaim;
use karpenter_core::cloud::CloudProvider;
use karpenter_core::crd::{KubeNodeClaim, KubeNodeOverlay, KubeNodePool};
use karpenter_core::lifecycle::termination::EvictionResponse;
use karpenter_core::lifecycle::{self, EventType, NodeUpdate, ObjectKind};
use karpenter_core::model::Timestamp;
use karpenter_core::operator::{Action, CloudCall, Input, Operator, OperatorConfig};
use karpenter_core::scheduling::SchedulerOptions;
use kube::api::{DeleteParams, EvictParams, Patch, PatchParams, PostParams, Preconditions};
use kube::runtime::reflector::ObjectRef;
use kube::{Api, Client};
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot, watch};

use super::cluster::{Caches, Change};
use super::leader::Leadership;
use super::metrics::{Metrics, ReconcileObserver};
use super::settings::ControllerArgs;
use karpenter_core::features::Gate;

pub mod dedupe;
pub mod edits;
mod feed;

pub use feed::{Feeder, input_for, unreadable_bound_pod};

/// What the operator shell needs.
pub struct Context {
    /// The API client.
    pub client: Client,
    /// The cloud provider.
    pub provider: Arc<dyn CloudProvider>,
    /// The watch caches.
    pub caches: Caches,
    /// The metrics.
    pub metrics: Arc<Metrics>,
    /// The settings.
    pub settings: ControllerArgs,
    /// Whether this replica may act: checked before every write and cloud call.
    pub leadership: Leadership,
    /// Held (a clone) by every API or cloud call that runs in a task of its own; shutdown
    /// waits until every clone is dropped (see [`InFlight`]).
    pub in_flight: InFlight,
    /// The events published recently, so that those the loops repeat on every pass are
    /// published once per object per window ([`dedupe`]).
    pub events: std::sync::Mutex<dedupe::EventDedupe>,
}

/// Tracks the calls still running in tasks of their own, so that a shutdown lets them finish.
#[derive(Clone)]
pub struct InFlight {
    _held: mpsc::Sender<()>,
}

impl InFlight {
    /// A tracker, and the receiver whose `recv()` returns `None` once the tracker and every
    /// clone of it are dropped.
    pub fn new() -> (InFlight, mpsc::Receiver<()>) {
        let (tx, rx) = mpsc::channel(1);
        (InFlight { _held: tx }, rx)
    }
}

/// How long a shutdown waits for calls in flight (evictions, cloud calls, events).
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(20);

/// The longest any API call of the shell may take: a request that has no answer by then fails
/// (and its object is retried through the operator), so one hung request cannot stall the loops.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// `call`, failed with a [`kube::Error::Service`] when it has no answer within
/// [`REQUEST_TIMEOUT`].
pub async fn bounded<T>(
    call: impl std::future::Future<Output = kube::Result<T>>,
) -> kube::Result<T> {
    match tokio::time::timeout(REQUEST_TIMEOUT, call).await {
        Ok(result) => result,
        Err(_) => Err(kube::Error::Service(
            format!("no answer within {REQUEST_TIMEOUT:?}").into(),
        )),
    }
}

/// The operator's configuration from the settings, with the provider's repair policies (read
/// only when the `NodeRepair` feature gate is on).
pub fn operator_config(settings: &ControllerArgs, provider: &dyn CloudProvider) -> OperatorConfig {
    let to_signed = |d: Duration| jiff::SignedDuration::try_from(d).unwrap_or_default();
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or_default()
        ^ u64::from(std::process::id()).rotate_left(32);
    let mut config = OperatorConfig::default();
    config.batch_idle_duration = to_signed(settings.batch_idle_duration);
    config.batch_max_duration = to_signed(settings.batch_max_duration);
    config.node_repair = settings.feature_gates.enabled(Gate::NodeRepair);
    config.node_overlay = settings.feature_gates.enabled(Gate::NodeOverlay);
    config.disruption = config.disruption.clone().with_spot_to_spot_consolidation(
        settings
            .feature_gates
            .enabled(Gate::SpotToSpotConsolidation),
    );
    config.name_seed = seed;
    // Standalone NodeClaims (no NodePool) of the provider's node classes are managed.
    config.node_classes = provider.supported_node_classes();
    config.repair_policies = if config.node_repair {
        provider.repair_policies()
    } else {
        Vec::new()
    };
    // The provider's well-known labels and reservation label, so that pods selecting them
    // schedule (upstream's scheduler reads them from the provider too), and the policies of
    // PREFERENCE_POLICY and MIN_VALUES_POLICY.
    let mut scheduler = SchedulerOptions::for_provider(provider);
    scheduler.preference_policy = settings.preference_policy;
    scheduler.min_values_policy = settings.min_values_policy;
    let packing = settings.packing.as_deref().and_then(|p| p.parse().ok());
    config.scheduler = scheduler.with_packing(
        karpenter_core::scheduling::packing::PackingOptions::default().with_policy(packing),
    );
    config
}

fn now() -> Timestamp {
    jiff::Timestamp::now()
}

// ---------------------------------------------------------------------------------------------
// The loop
// ---------------------------------------------------------------------------------------------

/// A request to recompute the cluster gauges from the operator's view; answered when done.
pub type RefreshRequest = oneshot::Sender<()>;

/// Runs the operator shell until shutdown. One operator lives as long as the process: while
/// this replica follows, it is fed every object and change but not synced, so it only records
/// them (and answers metric refreshes); once this replica leads and every initial list is in,
/// it is synced and its actions are carried out. Leadership, once lost, is not regained: the
/// process stops, as upstream's does, and a restart starts from fresh lists.
pub async fn run(
    ctx: Context,
    mut changes: mpsc::Receiver<Change>,
    mut leading: watch::Receiver<bool>,
    mut shutdown: watch::Receiver<bool>,
    mut refresh: mpsc::Receiver<RefreshRequest>,
) {
    let mut op = Operator::new(operator_config(&ctx.settings, ctx.provider.as_ref()));
    let mut feeder =
        Feeder::default().with_node_overlay(ctx.settings.feature_gates.enabled(Gate::NodeOverlay));
    // Follow: record every change; act on nothing.
    while !*leading.borrow() || !feeder.synced() {
        tokio::select! {
            _ = leading.changed() => {}
            c = changes.recv() => match c {
                Some(c) => {
                    for input in feeder.inputs(c) {
                        feeder.observe(&input);
                        op.handle(input, now());
                    }
                }
                None => return,
            },
            Some(r) = refresh.recv() => refresh_metrics(&ctx, &op, r),
            _ = shutdown.wait_for(|s| *s) => return,
        }
    }
    tracing::info!("leading: starting the operator loops");
    lead(
        &ctx,
        op,
        feeder,
        &mut changes,
        &mut leading,
        &mut shutdown,
        &mut refresh,
    )
    .await;
}

/// The metric counting bound pods the controller could not read (each protects its node).
pub const UNREADABLE_PODS: &str = "karpenter_pods_unreadable_total";

/// Reports each newly found unreadable bound pod once: a warning event on the pod and
/// [`UNREADABLE_PODS`].
fn report_unreadable(ctx: &Context, feeder: &mut Feeder) {
    for (pod, error) in feeder.take_unreadable() {
        tracing::warn!(pod = %pod, error = %error, "bound pod not understood: its node is protected from disruption");
        ctx.metrics
            .apply(&lifecycle::Metric::add(UNREADABLE_PODS, 1.0, []));
        record_event(
            ctx,
            lifecycle::Event::warning(
                ObjectKind::Pod,
                pod,
                "FailedToRead",
                format!(
                    "Karpenter could not read this pod ({error}); its node is protected from disruption until it can"
                ),
            ),
        );
    }
}

fn refresh_metrics(ctx: &Context, op: &Operator, reply: RefreshRequest) {
    let nodes = ctx.caches.nodes.state();
    let pools = ctx.caches.nodepools.state();
    let nodes: Vec<&core::Node> = nodes.iter().map(|n| n.as_ref()).collect();
    let pools: Vec<&KubeNodePool> = pools.iter().map(|p| p.as_ref()).collect();
    ctx.metrics.refresh(
        op.view().pods().values(),
        &nodes,
        &pools,
        op.eligible_nodes(),
        now(),
    );
    ctx.metrics.refresh_operator(op, now());
    let _ = reply.send(());
}

async fn lead(
    ctx: &Context,
    mut op: Operator,
    mut feeder: Feeder,
    changes: &mut mpsc::Receiver<Change>,
    leading: &mut watch::Receiver<bool>,
    shutdown: &mut watch::Receiver<bool>,
    refresh: &mut mpsc::Receiver<RefreshRequest>,
) {
    let mut actions = op.handle_observed(
        Input::Synced,
        now(),
        &mut ReconcileObserver::new(&ctx.metrics),
    );
    // The answers of calls made in tasks of their own; a full channel holds those tasks back.
    let (results_tx, mut results) = mpsc::channel::<Input>(RESULTS_CAPACITY);
    // Writes of this loop that failed, fed back before anything else.
    let mut failed = Vec::new();
    loop {
        for action in actions.drain(..) {
            // Leadership ends at the renew deadline, whatever the election task has had time
            // to say: no action runs after it.
            if !ctx.leadership.is_leading() {
                tracing::warn!(
                    "leadership ended (renew deadline passed): stopping the operator loops"
                );
                return;
            }
            execute(ctx, action, &results_tx, &mut feeder, &mut failed).await;
        }
        let sleep = match op.next_wakeup() {
            Some(t) => {
                let wait = t.duration_since(now());
                Duration::try_from(wait)
                    .unwrap_or_default()
                    .max(Duration::from_millis(10))
            }
            None => Duration::from_secs(3600),
        };
        let mut inputs = if !failed.is_empty() {
            std::mem::take(&mut failed)
        } else {
            tokio::select! {
                c = changes.recv() => match c {
                    Some(c) => feeder.inputs(c),
                    None => return,
                },
                r = results.recv() => r.into_iter().collect(),
                _ = tokio::time::sleep(sleep) => vec![Input::Tick],
                Some(r) = refresh.recv() => {
                    refresh_metrics(ctx, &op, r);
                    Vec::new()
                }
                _ = leading.changed() => {
                    if !*leading.borrow() {
                        tracing::warn!("lost leadership: stopping the operator loops");
                        return;
                    }
                    Vec::new()
                }
                _ = shutdown.wait_for(|s| *s) => return,
            }
        };
        // Everything else already waiting joins this step: the actions of one step run one
        // after the other, so a step per change would let a busy cluster's changes queue up
        // faster than they are read, and the operator decide (and write) on a stale view.
        inputs.extend(ready_inputs(&mut feeder, changes, &mut results));
        report_unreadable(ctx, &mut feeder);
        // Each input's actions are carried out before the next input is observed: a Node
        // update is diffed against the Node the operator decided it on (see
        // [`Feeder::observe`]), so another writer's entries that arrived later in the same
        // batch are never taken for entries the operator removed.
        for input in inputs {
            feeder.observe(&input);
            // A pass can take a while (a consolidation over a large cluster): it runs with this
            // worker handed over to the other tasks, so the Lease renewal and the servers go on.
            let step = tokio::task::block_in_place(|| {
                op.handle_observed(input, now(), &mut ReconcileObserver::new(&ctx.metrics))
            });
            for action in step {
                if !ctx.leadership.is_leading() {
                    tracing::warn!(
                        "leadership ended (renew deadline passed): stopping the operator loops"
                    );
                    return;
                }
                execute(ctx, action, &results_tx, &mut feeder, &mut failed).await;
            }
        }
    }
}

/// The inputs of every change and every result already waiting on their channels, without
/// waiting for more: the watch changes first (in order), then the results of finished writes
/// and calls.
pub fn ready_inputs(
    feeder: &mut Feeder,
    changes: &mut mpsc::Receiver<Change>,
    results: &mut mpsc::Receiver<Input>,
) -> Vec<Input> {
    let mut inputs = Vec::new();
    while let Ok(c) = changes.try_recv() {
        inputs.extend(feeder.inputs(c));
    }
    while let Ok(r) = results.try_recv() {
        inputs.push(r);
    }
    inputs
}

// ---------------------------------------------------------------------------------------------
// Actions -> API calls
// ---------------------------------------------------------------------------------------------

/// A JSON merge patch of a string map: the new entries, and `null` for keys that were removed.
pub fn map_patch(old: Option<&BTreeMap<String, String>>, new: &BTreeMap<String, String>) -> Value {
    let mut m = serde_json::Map::new();
    for k in old.into_iter().flatten().map(|(k, _)| k) {
        if !new.contains_key(k) {
            m.insert(k.clone(), Value::Null);
        }
    }
    for (k, v) in new {
        m.insert(k.clone(), Value::String(v.clone()));
    }
    Value::Object(m)
}

fn write_failed(failed: &mut Vec<Input>, kind: ObjectKind, name: &str, e: impl std::fmt::Display) {
    tracing::warn!(kind = ?kind, name, error = %e, "API write failed");
    failed.push(Input::WriteFailed {
        kind,
        name: name.to_string(),
        message: e.to_string(),
    });
}

fn is_not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}

fn split_key(pod: &str) -> (&str, &str) {
    pod.split_once('/').unwrap_or(("default", pod))
}

async fn execute(
    ctx: &Context,
    action: Action,
    results: &mpsc::Sender<Input>,
    feeder: &mut Feeder,
    failed: &mut Vec<Input>,
) {
    let claims: Api<KubeNodeClaim> = Api::all(ctx.client.clone());
    let nodes: Api<core::Node> = Api::all(ctx.client.clone());
    let pools: Api<KubeNodePool> = Api::all(ctx.client.clone());
    let merge = PatchParams::default();
    match action {
        Action::CreateNodeClaim(claim) => {
            let name = claim.name().to_string();
            let result = match KubeNodeClaim::from_nodeclaim(&claim) {
                Ok(mut k) => {
                    k.status = None;
                    bounded(claims.create(&PostParams::default(), &k))
                        .await
                        .map(|_| ())
                        .map_err(|e| e.to_string())
                }
                Err(e) => Err(e.to_string()),
            };
            match result {
                Ok(()) => {
                    // Upstream's provisioner logs it, or its disruption controller for a
                    // replacement.
                    let controller = if claim
                        .metadata
                        .annotations
                        .contains_key(karpenter_core::labels::REPLACES_ANNOTATION)
                    {
                        "disruption"
                    } else {
                        "provisioner"
                    };
                    let pool = claim
                        .metadata
                        .labels
                        .get(karpenter_core::labels::NODEPOOL)
                        .cloned()
                        .unwrap_or_default();
                    tracing::info!(controller, nodepool = %pool, nodeclaim = %name, "created nodeclaim")
                }
                Err(e) => write_failed(failed, ObjectKind::NodeClaim, &name, e),
            }
        }
        Action::UpdateNodeClaim(claim) => update_nodeclaim(ctx, &claims, &claim, failed).await,
        Action::DeleteNodeClaim { name } => {
            match bounded(claims.delete(&name, &DeleteParams::default())).await {
                Ok(_) => tracing::info!(nodeclaim = %name, "deleting nodeclaim"),
                Err(e) if is_not_found(&e) => {}
                Err(e) => write_failed(failed, ObjectKind::NodeClaim, &name, e),
            }
        }
        Action::PatchNode(update) => {
            let base = feeder.node_base(&update);
            patch_node(ctx, &nodes, base, &update, failed).await
        }
        Action::DeleteNode { name } => {
            match bounded(nodes.delete(&name, &DeleteParams::default())).await {
                Ok(_) => {
                    tracing::info!(controller = "node.termination", node = %name, "deleting node")
                }
                Err(e) if is_not_found(&e) => {}
                Err(e) => write_failed(failed, ObjectKind::Node, &name, e),
            }
        }
        Action::EvictPod { id, pod, uid } => {
            let client = ctx.client.clone();
            let results = results.clone();
            let guard = ctx.in_flight.clone();
            let leadership = ctx.leadership.clone();
            tokio::spawn(async move {
                let _guard = guard;
                if !leadership.is_leading() {
                    return;
                }
                let response = evict(client, &pod, &uid).await;
                let _ = results.send(Input::EvictionResult { id, response }).await;
            });
        }
        Action::DeletePod {
            pod,
            grace_period_seconds,
        } => {
            let (ns, name) = split_key(&pod);
            let api: Api<core::Pod> = Api::namespaced(ctx.client.clone(), ns);
            let params = DeleteParams {
                grace_period_seconds: u32::try_from(grace_period_seconds.max(0)).ok(),
                ..DeleteParams::default()
            };
            if let Err(e) = bounded(api.delete(name, &params)).await
                && !is_not_found(&e)
            {
                write_failed(failed, ObjectKind::Pod, &pod, e);
            }
        }
        Action::NominatePod { pod, target } => {
            tracing::debug!(pod = %pod, target = %target, "pod nominated");
        }
        Action::AnnotateNodePool { name, annotations } => {
            let patch = json!({"metadata": {"annotations": annotations}});
            if let Err(e) = bounded(pools.patch(&name, &merge, &Patch::Merge(&patch))).await
                && !is_not_found(&e)
            {
                write_failed(failed, ObjectKind::NodePool, &name, e);
            }
        }
        Action::UpdateNodeOverlayStatus { name, status } => {
            let overlays: Api<KubeNodeOverlay> = Api::all(ctx.client.clone());
            let patch = json!({"status": status});
            if let Err(e) =
                bounded(overlays.patch_status(&name, &merge, &Patch::Merge(&patch))).await
                && !is_not_found(&e)
            {
                // The next change of the overlays or of the instance types writes it again.
                tracing::warn!(nodeoverlay = %name, error = %e, "writing the NodeOverlay status failed");
            }
        }
        Action::UpdateNodePoolStatus { name, status } => {
            // A compare-and-swap on the version the status was computed from: a NodePool
            // changed since is answered 409, and the operator computes its status again.
            let mut patch = json!({"status": status});
            if let Some(rv) = feeder.pool_version(&name) {
                patch["metadata"] = json!({ "resourceVersion": rv });
            }
            if let Err(e) = bounded(pools.patch_status(&name, &merge, &Patch::Merge(&patch))).await
                && !is_not_found(&e)
            {
                write_failed(failed, ObjectKind::NodePool, &name, e);
            }
        }
        Action::Cloud { id, call } => {
            let provider = ctx.provider.clone();
            let metrics = ctx.metrics.clone();
            let results = results.clone();
            let guard = ctx.in_flight.clone();
            let leadership = ctx.leadership.clone();
            tokio::spawn(async move {
                let _guard = guard;
                // The task may start late: a call of a replica that no longer leads is not made.
                if !leadership.is_leading() {
                    tracing::warn!(call = ?cloud_method(&call), "not leading any more: cloud call dropped");
                    return;
                }
                let method = cloud_method(&call);
                let started = Instant::now();
                let response = call.execute(provider.as_ref()).await;
                metrics.cloud_call(
                    cloud_controller(&call),
                    method,
                    provider.name(),
                    started.elapsed(),
                    crate::metrics::cloud_error(&response),
                );
                if let CloudCall::Create(claim) = &call {
                    tracing::info!(controller = "nodeclaim.lifecycle", nodeclaim = %claim.name(), "launching instance");
                }
                let _ = results.send(Input::CloudResult { id, response }).await;
            });
        }
        Action::RecordEvent(event) => record_event(ctx, event),
        Action::Metric(metric) => {
            if !ctx.metrics.apply(&metric) {
                tracing::debug!(metric = %metric.name, "metric not exported");
            }
        }
        Action::WakeAt(_) => {}
    }
}

fn cloud_method(call: &CloudCall) -> &'static str {
    match call {
        CloudCall::Create(_) => "Create",
        CloudCall::Delete(_) => "Delete",
        CloudCall::Get(_) => "Get",
        CloudCall::List => "List",
        CloudCall::InstanceTypes(_) => "GetInstanceTypes",
        CloudCall::IsDrifted(_) => "IsDrifted",
    }
}

/// The upstream controller that makes `call` (the `controller` label of the cloud provider
/// metrics): launches, deletions and lookups are the NodeClaim lifecycle's, listing is garbage
/// collection's, instance types the provisioner's and drift the NodeClaim disruption
/// controller's.
fn cloud_controller(call: &CloudCall) -> &'static str {
    match call {
        CloudCall::Create(_) | CloudCall::Delete(_) | CloudCall::Get(_) => "nodeclaim.lifecycle",
        CloudCall::List => "nodeclaim.garbagecollection",
        CloudCall::InstanceTypes(_) => "provisioner",
        CloudCall::IsDrifted(_) => "nodeclaim.disruption",
    }
}

async fn update_nodeclaim(
    ctx: &Context,
    claims: &Api<KubeNodeClaim>,
    claim: &NodeClaim,
    failed: &mut Vec<Input>,
) {
    let name = claim.name().to_string();
    let cached = ctx.caches.nodeclaims.get(&ObjectRef::new(&name));
    let old = cached.as_ref().map(|c| &c.metadata);
    // The resourceVersion the operator decided on makes the patch a compare-and-swap: when
    // another writer changed the NodeClaim since (a finalizer, a label), the API server answers
    // 409, nothing of theirs is overwritten, and the operator decides again on the new object.
    let mut meta = json!({
        "labels": map_patch(old.and_then(|m| m.labels.as_ref()), &claim.metadata.labels),
        "annotations": map_patch(old.and_then(|m| m.annotations.as_ref()), &claim.metadata.annotations),
        "finalizers": claim.metadata.finalizers,
    });
    if let Some(rv) = &claim.metadata.resource_version {
        meta["resourceVersion"] = json!(rv);
    }
    let meta_patch = json!({ "metadata": meta });
    let params = PatchParams::default();
    let patched = match bounded(claims.patch(&name, &params, &Patch::Merge(&meta_patch))).await {
        Ok(patched) => patched,
        Err(e) => {
            if !is_not_found(&e) {
                write_failed(failed, ObjectKind::NodeClaim, &name, e);
            }
            return;
        }
    };
    let status = match KubeNodeClaim::from_nodeclaim(claim) {
        Ok(k) => serde_json::to_value(&k.status).unwrap_or(Value::Null),
        Err(e) => {
            write_failed(failed, ObjectKind::NodeClaim, &name, e);
            return;
        }
    };
    if status.is_null() {
        return;
    }
    // Compare-and-swap again, against the version the metadata patch just wrote.
    let status_patch = json!({
        "metadata": {"resourceVersion": patched.metadata.resource_version},
        "status": status,
    });
    if let Err(e) = bounded(claims.patch_status(&name, &params, &Patch::Merge(&status_patch))).await
        && !is_not_found(&e)
    {
        write_failed(failed, ObjectKind::NodeClaim, &name, e);
    }
}

/// How many answers of calls made in tasks of their own (cloud calls, evictions) may wait for
/// the operator; a task whose answer finds the channel full waits.
pub const RESULTS_CAPACITY: usize = 1024;

/// How many times a Node patch is built again on a fresh read after a 409.
const NODE_PATCH_ATTEMPTS: usize = 5;

/// Applies the operator's edits of a Node ([`edits::node_patch`]): to the cached Node first,
/// and on a 409 (the Node changed since) to a fresh read, a few times; then the operator is
/// told the write failed and decides again.
async fn patch_node(
    ctx: &Context,
    nodes: &Api<core::Node>,
    base: Option<lifecycle::Node>,
    update: &NodeUpdate,
    failed: &mut Vec<Input>,
) {
    let name = &update.node_name;
    // Without a base (a Node the operator never saw) nothing is known to be the operator's:
    // its entries are added, nothing is removed.
    let base = base.unwrap_or_else(|| lifecycle::Node::new(name.clone(), String::new()));
    let mut live = ctx.caches.nodes.get(&ObjectRef::new(name));
    for attempt in 1..=NODE_PATCH_ATTEMPTS {
        let node = match live.take() {
            Some(n) => n,
            None => match bounded(nodes.get(name)).await {
                Ok(n) => Arc::new(n),
                Err(e) if is_not_found(&e) => return,
                Err(e) => return write_failed(failed, ObjectKind::Node, name, e),
            },
        };
        let Some(patch) = edits::node_patch(&base, update, &node) else {
            return;
        };
        match bounded(nodes.patch(name, &PatchParams::default(), &Patch::Merge(&patch))).await {
            Ok(_) => return,
            Err(e) if is_not_found(&e) => return,
            Err(kube::Error::Api(s)) if s.code == 409 && attempt < NODE_PATCH_ATTEMPTS => {
                tracing::debug!(node = %name, attempt, "node changed since read: reading it again");
            }
            Err(e) => return write_failed(failed, ObjectKind::Node, name, e),
        }
    }
}

async fn evict(client: Client, pod: &str, uid: &str) -> EvictionResponse {
    let (ns, name) = split_key(pod);
    let api: Api<core::Pod> = Api::namespaced(client, ns);
    let params = EvictParams {
        delete_options: Some(DeleteParams {
            preconditions: (!uid.is_empty()).then(|| Preconditions {
                uid: Some(uid.to_string()),
                resource_version: None,
            }),
            ..DeleteParams::default()
        }),
        ..EvictParams::default()
    };
    match bounded(api.evict(name, &params)).await {
        Ok(_) => EvictionResponse::Evicted,
        Err(kube::Error::Api(s)) => match s.code {
            404 => EvictionResponse::NotFound,
            409 => EvictionResponse::Conflict,
            429 => EvictionResponse::TooManyRequests { message: s.message },
            500 if s.message.contains("more than one PodDisruptionBudget") => {
                EvictionResponse::MultiplePdbs { message: s.message }
            }
            code => EvictionResponse::Other {
                code,
                message: s.message,
            },
        },
        Err(e) => EvictionResponse::Other {
            code: 0,
            message: e.to_string(),
        },
    }
}

fn record_event(ctx: &Context, event: lifecycle::Event) {
    // A poisoned lock (a panic elsewhere) publishes rather than drops.
    let admitted = ctx
        .events
        .lock()
        .map(|mut d| d.admit(&event, Instant::now()))
        .unwrap_or(true);
    if !admitted {
        tracing::debug!(reason = %event.reason, object = %event.name, "event deduped");
        return;
    }
    let (namespace, name, kind, api_version) = match event.kind {
        ObjectKind::Pod => {
            let (ns, n) = split_key(&event.name);
            (ns.to_string(), n.to_string(), "Pod", "v1")
        }
        ObjectKind::Node => ("default".to_string(), event.name.clone(), "Node", "v1"),
        ObjectKind::NodeClaim => (
            "default".to_string(),
            event.name.clone(),
            "NodeClaim",
            "karpenter.sh/v1",
        ),
        ObjectKind::NodePool => (
            "default".to_string(),
            event.name.clone(),
            "NodePool",
            "karpenter.sh/v1",
        ),
    };
    let t = Time(now());
    let k8s_event = core::Event {
        metadata: ObjectMeta {
            generate_name: Some(format!("{name}.")),
            namespace: Some(namespace.clone()),
            ..ObjectMeta::default()
        },
        involved_object: core::ObjectReference {
            api_version: Some(api_version.to_string()),
            kind: Some(kind.to_string()),
            name: Some(name),
            namespace: (event.kind == ObjectKind::Pod).then(|| namespace.clone()),
            ..core::ObjectReference::default()
        },
        reason: Some(event.reason.clone()),
        message: Some(event.message.clone()),
        type_: Some(
            match event.event_type {
                EventType::Normal => "Normal",
                EventType::Warning => "Warning",
            }
            .to_string(),
        ),
        source: Some(core::EventSource {
            component: Some("karpenter".to_string()),
            host: None,
        }),
        first_timestamp: Some(t.clone()),
        last_timestamp: Some(t),
        count: Some(1),
        ..core::Event::default()
    };
    let api: Api<core::Event> = Api::namespaced(ctx.client.clone(), &namespace);
    let guard = ctx.in_flight.clone();
    tokio::spawn(async move {
        let _guard = guard;
        if let Err(e) = bounded(api.create(&PostParams::default(), &k8s_event)).await {
            tracing::debug!(error = %e, "recording an event failed");
        }
    });
    tracing::info!(reason = %event.reason, object = %event.name, message = %event.message, "event");
}

#[cfg(test)]
mod tests;

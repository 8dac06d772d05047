//! The operator loops: what a running Karpenter does between solves, written once as
//! events-in / actions-out logic over an in-memory view of the cluster.
//!
//! An [`Operator`] is fed [`Input`]s — objects applied or deleted (from a watch, or the
//! simulator's in-memory API), answers to the calls it asked for, interruption messages, timer
//! ticks — each with the current time `now`, and answers with [`Action`]s as data: NodeClaims to
//! create, update or delete, Nodes to patch or delete, pods to evict, cloud-provider calls to
//! make, events and metrics to publish, and when to wake it next. A *shell* carries the actions
//! out and feeds the results back: the controller (kube-rs watches, API calls, tokio timers) and
//! the simulator in `karpenter-fake` (an in-memory API and a virtual clock). Neither shell holds
//! a decision of its own: every decision is made here, by the `scheduling`, `disruption` and
//! `lifecycle` modules, which the loops call and never copy.
//!
//! # Wiring a shell
//!
//! ```text
//! let mut op = Operator::new(OperatorConfig::default());
//! for object in initial_lists { op.handle(Input::NodeApplied(..), now); ... }
//! let actions = op.handle(Input::Synced, now);       // loops start acting
//! loop {
//!     for action in actions {
//!         match action {
//!             Action::Cloud { id, call } => spawn(async {            // any order, in parallel
//!                 let response = call.execute(provider).await;
//!                 send(Input::CloudResult { id, response });
//!             }),
//!             Action::EvictPod { id, pod, uid } => spawn(evict, then send(Input::EvictionResult { id, .. })),
//!             Action::WakeAt(t) => reset_timer(t),                   // then send(Input::Tick)
//!             write => apply_to_api(write),                          // on error send(Input::WriteFailed)
//!         }
//!     }
//!     let (input, now) = next_input().await;                         // watch event, result, timer
//!     actions = op.handle(input, now);
//! }
//! ```
//!
//! The operator is single-threaded state: call [`Operator::handle`] from one task. Every call
//! runs whatever is due at `now` after applying the input, so a shell may also just call it with
//! [`Input::Tick`] at [`Operator::next_wakeup`].
//!
//! # Loops
//!
//! | loop | upstream controller | trigger |
//! |---|---|---|
//! | provisioning | `provisioning` (batcher, provisioner) | a pending pod appears; windows of 1 s idle / 10 s max |
//! | NodeClaim lifecycle | `nodeclaim.lifecycle` | NodeClaim or Node change, create result, requeues |
//! | NodeClaim disruption conditions | `nodeclaim.disruption` | NodeClaim, NodePool or pod change; 5 min drift re-check |
//! | expiration | `nodeclaim.expiration` | `expireAfter` elapsed |
//! | disruption and its queue | `disruption` | every 10 s; 15 s validation wait; queue requeues |
//! | termination | `nodeclaim.lifecycle` (finalize), `node.termination` | deletion timestamps |
//! | NodePool status and hash | `nodepool.readiness`, `.counter`, `.hash`, registration health | NodePool, NodeClaim changes |
//! | garbage collection | `nodeclaim.garbagecollection` (+ the provider's instance GC) | every 2 min |
//! | node repair (flag) | `node.health` | Node condition changes |
//! | interruption | the provider's `interruption` controller | [`Input::Interruption`] |

//!
//! # Not modelled yet
//!
//! NodePools with
//! `spec.replicas` (static provisioning; static drift does run), cloud-provider registration
//! hooks, DRA, CapacityBuffer pods, default topology-spread constraints and PVC volume
//! topology in provisioning (the snapshot has no namespaces, volumes or CSI limits), NodeClass
//! readiness (a NodePool is `Ready` when its provider returned instance types), gauges such as
//! `karpenter_pods_state` (a shell computes them from [`Operator::view`],
//! [`Operator::disruption_budgets`], [`Operator::unstarted_pods`] and [`Operator::work_queues`]),
//! duration histograms other than the pods' bound and startup durations (a shell times the
//! loops through a [`LoopObserver`]).
//! VolumeAttachments of volumes whose pods drain does not wait for are waited for too.

mod disruption;
mod inspect;
mod lifecycle;
mod maintenance;
mod provisioning;
mod types;
mod view;
mod work;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use jiff::SignedDuration;

use crate::cloud::{RepairPolicy, UnavailableOffering};
use crate::disruption::DisruptionOptions;
use crate::lifecycle::drift::DriftOptions;
use crate::lifecycle::nodeclaim::RegistrationHealth;
use crate::lifecycle::queue::CommandQueue;
use crate::model::Timestamp;
use crate::scheduling::SchedulerOptions;

pub use types::{
    Action, CallId, CloudCall, CloudResponse, Input, InterruptionEvent, InterruptionKind,
};
pub use view::{ClusterView, is_provisionable};
use work::Work;

/// Upstream's controller names (the `controller` label of controller-runtime's metrics) of the
/// loops that report reconciles to a [`LoopObserver`].
pub mod controllers {
    /// The NodeClaim loop: lifecycle, disruption conditions, expiration, finalizer.
    pub const NODECLAIM_LIFECYCLE: &str = "nodeclaim.lifecycle";
    /// The Node loop: termination (drain, volume detachment), repair.
    pub const NODE_TERMINATION: &str = "node.termination";
    /// The NodePool loop: readiness, resource counters, hash annotations.
    pub const NODEPOOL_READINESS: &str = "nodepool.readiness";
    /// A provisioning round (a closed batch window solved).
    pub const PROVISIONER: &str = "provisioner";
    /// A disruption pass.
    pub const DISRUPTION: &str = "disruption";
}

/// How a reconcile ended (controller-runtime's `result` label).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ReconcileResult {
    /// Done; nothing more is due for the object.
    Success,
    /// Failed; the object is retried with back-off.
    Error,
    /// Done for now; the object is due again at a later time.
    RequeueAfter,
}

impl ReconcileResult {
    /// controller-runtime's label value: `success`, `error` or `requeue_after`.
    pub fn as_str(self) -> &'static str {
        match self {
            ReconcileResult::Success => "success",
            ReconcileResult::Error => "error",
            ReconcileResult::RequeueAfter => "requeue_after",
        }
    }
}

/// Told about every reconcile the loops run inside one [`Operator::handle_observed`] call, so
/// a shell can count and time them (the operator itself reads no clock).
///
/// Each reconcile is announced by [`LoopObserver::started`] and ends with
/// [`LoopObserver::finished`]; a `started` that is not followed by `finished` (for the same
/// controller, before the next `started`) means the loop found nothing to do (a provisioning
/// window still open, a disruption pass not due) and is not a reconcile. A write that failed
/// later (an [`Input::WriteFailed`], a cloud call's error) is told by [`LoopObserver::failed`]
/// while that input is applied.
pub trait LoopObserver {
    /// A loop of `controller` starts a reconcile.
    fn started(&mut self, controller: &'static str);
    /// The reconcile `started` announced ended with `result`.
    fn finished(&mut self, controller: &'static str, result: ReconcileResult);
    /// A write a reconcile of `controller` asked for failed (the object is retried).
    fn failed(&mut self, controller: &'static str);
}

/// The observer that ignores everything ([`Operator::handle`]).
impl LoopObserver for () {
    fn started(&mut self, _: &'static str) {}
    fn finished(&mut self, _: &'static str, _: ReconcileResult) {}
    fn failed(&mut self, _: &'static str) {}
}

/// One per-object loop's reconcile queue (see [`Operator::work_queues`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct WorkQueue {
    /// The controller name ([`controllers`]).
    pub controller: &'static str,
    /// Objects waiting to be reconciled now.
    pub depth: usize,
    /// Objects that became due so far.
    pub adds: u64,
}

/// Settings of the operator loops (upstream's flags and defaults).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct OperatorConfig {
    /// `BATCH_IDLE_DURATION`: a batch closes when no new pending pod arrived for this long
    /// (default 1 s).
    pub batch_idle_duration: SignedDuration,
    /// `BATCH_MAX_DURATION`: a batch closes at the latest this long after it opened (default
    /// 10 s).
    pub batch_max_duration: SignedDuration,
    /// How often pods still pending after a provisioning round trigger provisioning again
    /// (default 10 s, as upstream requeues a provisionable pod).
    pub unschedulable_retry: SignedDuration,
    /// The scheduler's options.
    pub scheduler: SchedulerOptions,
    /// The disruption planner's options (its `scheduler` field is replaced by
    /// [`OperatorConfig::scheduler`]); by default upstream's, with the single-node pre-check
    /// on ([`DisruptionOptions::single_node_precheck`]).
    pub disruption: DisruptionOptions,
    /// Options of the drift check.
    pub drift: DriftOptions,
    /// The disruption loop's poll interval when no method acted (default 10 s).
    pub disruption_poll: SignedDuration,
    /// The wait before an emptiness or consolidation command is re-validated (default 15 s).
    pub validation_delay: SignedDuration,
    /// How long a node stays nominated after pods were placed on it (default 20 s).
    pub nomination_ttl: SignedDuration,
    /// Garbage-collection period (default 2 min).
    pub gc_period: SignedDuration,
    /// A cloud instance no NodeClaim refers to is deleted once it has been seen unreferenced
    /// for this long (default 30 s, the AWS provider's instance garbage collection).
    pub instance_gc_grace: SignedDuration,
    /// How often each NodePool's instance types are asked for again (default 5 min).
    pub instance_types_refresh: SignedDuration,
    /// How long an offering stays unavailable after an insufficient-capacity error or a spot
    /// interruption (default 3 min, the AWS provider's cache).
    pub unavailable_offering_ttl: SignedDuration,
    /// How often a launched NodeClaim's drift is re-checked (default 5 min).
    pub drift_check_period: SignedDuration,
    /// Feature gate `NodeRepair` (default off).
    pub node_repair: bool,
    /// The provider's repair policies (used only with [`OperatorConfig::node_repair`]).
    pub repair_policies: Vec<RepairPolicy>,
    /// Feature gate `NodeOverlay` (default off): NodeOverlays adjust the instance types of
    /// every NodePool ([`crate::overlay`]) and get their `ValidationSucceeded` condition.
    pub node_overlay: bool,
    /// Seed of generated NodeClaim names (`<nodepool>-<5 characters>`): give each operator
    /// instance its own (the controller: random; the simulator: per run).
    pub name_seed: u64,
    /// The provider's node class kinds ([`CloudProvider::supported_node_classes`]). A
    /// NodeClaim is managed when it carries `karpenter.sh/nodepool` or when its `nodeClassRef`
    /// names one of these kinds (upstream's `IsManaged`): a standalone NodeClaim, created by a
    /// user without a NodePool, launches, registers and terminates like any other. Empty (the
    /// default): only NodePool-owned NodeClaims are managed.
    ///
    /// [`CloudProvider::supported_node_classes`]: crate::cloud::CloudProvider::supported_node_classes
    pub node_classes: Vec<crate::cloud::NodeClassKind>,
}

impl Default for OperatorConfig {
    fn default() -> Self {
        OperatorConfig {
            batch_idle_duration: SignedDuration::from_secs(1),
            batch_max_duration: SignedDuration::from_secs(10),
            unschedulable_retry: SignedDuration::from_secs(10),
            scheduler: SchedulerOptions::default(),
            // The operator does not read the reasons of blocked candidates: the single-node
            // pre-check only saves simulations.
            disruption: DisruptionOptions::default().with_single_node_precheck(true),
            drift: DriftOptions::default(),
            disruption_poll: SignedDuration::from_secs(10),
            validation_delay: crate::disruption::validation::COMMAND_VALIDATION_DELAY,
            nomination_ttl: SignedDuration::from_secs(20),
            gc_period: crate::lifecycle::gc::GC_PERIOD,
            instance_gc_grace: SignedDuration::from_secs(30),
            instance_types_refresh: SignedDuration::from_mins(5),
            unavailable_offering_ttl: SignedDuration::from_mins(3),
            drift_check_period: SignedDuration::from_mins(5),
            node_repair: false,
            repair_policies: Vec::new(),
            node_overlay: false,
            name_seed: 0,
            node_classes: Vec::new(),
        }
    }
}

/// What a cloud call in flight was for.
#[derive(Debug, Clone)]
enum Pending {
    /// `create` for this NodeClaim.
    Launch(String),
    /// `delete` for this NodeClaim (its finalizer).
    DeleteInstance(String),
    /// `get` for a terminating Node that is not Ready.
    NodeInstance(String),
    /// `instance_types` for this NodePool.
    InstanceTypes(String),
    /// `is_drifted` for this NodeClaim.
    IsDrifted(String),
    /// `list` for garbage collection.
    GcList,
    /// `delete` of a leaked instance (by provider id).
    DeleteOrphan(String),
    /// An eviction of this pod.
    Evict(String),
}

/// The eviction state of one pod of a draining node.
#[derive(Debug, Clone, Default)]
struct Eviction {
    failures: u32,
    next_at: Option<Timestamp>,
    in_flight: Option<CallId>,
    /// The UID of the pod the API answered for, once an eviction succeeded or found the pod
    /// gone: it is not evicted again until the watch reports it deleted (or a new pod of the
    /// same name), however stale the view is meanwhile. Without this, a lagging watch turned
    /// every answer into an immediate new eviction of the same pod.
    settled: Option<String>,
}

/// A command computed by a disruption pass, waiting out the validation delay.
#[derive(Debug, Clone)]
struct PendingValidation {
    due: Timestamp,
    commands: Vec<crate::disruption::Command>,
}

/// The operator: the cluster view and the state of every loop. See the [module
/// documentation](self).
#[derive(Debug)]
pub struct Operator {
    config: OperatorConfig,
    view: ClusterView,
    synced: bool,
    now: Timestamp,
    next_call: u64,
    next_name: u64,
    calls: BTreeMap<CallId, Pending>,
    // NodeClaim lifecycle and termination
    claims: Work,
    launching: BTreeSet<String>,
    launch_cache: BTreeMap<String, (Timestamp, crate::lifecycle::CreateOutcome)>,
    instance_gone: BTreeSet<String>,
    deleting_instance: BTreeSet<String>,
    registration_health: BTreeMap<String, RegistrationHealth>,
    health_conditions: BTreeMap<String, crate::lifecycle::nodeclaim::HealthCondition>,
    pod_events: BTreeMap<String, String>,
    staged_claims: BTreeMap<String, crate::api::NodeClaim>,
    staged_nodes: BTreeMap<String, crate::lifecycle::Node>,
    /// Nodes whose patch this operator applied to the view before the API confirmed it: the
    /// Node as the watch last showed it, put back if the patch fails.
    unconfirmed_nodes: BTreeMap<String, crate::lifecycle::Node>,
    cloud_drift: BTreeMap<String, Option<String>>,
    drift_checked: BTreeMap<String, Timestamp>,
    instance_type_checked: BTreeMap<String, Timestamp>,
    // Nodes
    nodes: Work,
    node_instance_gone: BTreeSet<String>,
    node_instance_checking: BTreeSet<String>,
    node_instance_checked: BTreeSet<String>,
    evictions: BTreeMap<String, Eviction>,
    // NodePools
    pools: Work,
    instance_types_due: BTreeMap<String, Timestamp>,
    instance_types_in_flight: BTreeSet<String>,
    /// The provider's instance types per NodePool, before NodeOverlays.
    provider_instance_types: BTreeMap<String, Vec<Arc<crate::model::InstanceType>>>,
    /// NodeOverlays by name (gate on only).
    overlays: BTreeMap<String, crate::api::NodeOverlay>,
    /// The overlays or the instance types they apply to changed since they were last applied.
    overlays_dirty: bool,
    unavailable: BTreeMap<UnavailableOffering, Timestamp>,
    // Provisioning
    batcher: provisioning::Batcher,
    retry_at: Option<Timestamp>,
    /// The existing nodes the last provisioning round prepared, by snapshot node.
    prepared: crate::scheduling::ExistingMemo,
    // Disruption
    disruption_due: Option<Timestamp>,
    validation: Option<PendingValidation>,
    queue: CommandQueue,
    queue_due: BTreeMap<String, Timestamp>,
    marked: BTreeSet<String>,
    nominated: BTreeMap<String, Timestamp>,
    next_command: u64,
    /// Object events applied so far (upstream's cluster-state "consolidation state").
    state_changes: u64,
    /// When a disruption pass last found nothing, and `state_changes` then (upstream's
    /// "consolidated" memo).
    consolidated: Option<(u64, Timestamp)>,
    /// Candidates the last pass of each disruption reason found eligible.
    eligible_nodes: BTreeMap<&'static str, usize>,
    /// The budgets of every NodePool for each disruption reason, as the last pass found them.
    budgets: BTreeMap<(String, &'static str), crate::disruption::budgets::PoolBudget>,
    /// Disruption passes run so far.
    disruption_passes: u64,
    /// Provisioning rounds run so far.
    provisioning_rounds: u64,
    // Pod latency
    /// Pods seen `Pending` that are not yet ready (upstream's pod metrics controller's
    /// `pendingPods`).
    unstarted: BTreeSet<String>,
    /// Pods seen `Pending` whose binding has not been observed yet (`unscheduledPods`).
    unbound: BTreeSet<String>,
    // Garbage collection
    gc_due: Option<Timestamp>,
    gc_in_flight: bool,
    orphans: BTreeMap<String, Timestamp>,
    orphan_deletes: BTreeSet<String>,
    last_wakeup: Option<Timestamp>,
}

impl Operator {
    /// An operator with an empty view. Feed it the cluster's objects, then [`Input::Synced`].
    pub fn new(config: OperatorConfig) -> Operator {
        Operator {
            config,
            view: ClusterView::default(),
            synced: false,
            now: Timestamp::UNIX_EPOCH,
            next_call: 1,
            next_name: 0,
            calls: BTreeMap::new(),
            claims: Work::default(),
            launching: BTreeSet::new(),
            launch_cache: BTreeMap::new(),
            instance_gone: BTreeSet::new(),
            deleting_instance: BTreeSet::new(),
            registration_health: BTreeMap::new(),
            health_conditions: BTreeMap::new(),
            pod_events: BTreeMap::new(),
            staged_claims: BTreeMap::new(),
            staged_nodes: BTreeMap::new(),
            unconfirmed_nodes: BTreeMap::new(),
            cloud_drift: BTreeMap::new(),
            drift_checked: BTreeMap::new(),
            instance_type_checked: BTreeMap::new(),
            nodes: Work::default(),
            node_instance_gone: BTreeSet::new(),
            node_instance_checking: BTreeSet::new(),
            node_instance_checked: BTreeSet::new(),
            evictions: BTreeMap::new(),
            pools: Work::default(),
            instance_types_due: BTreeMap::new(),
            instance_types_in_flight: BTreeSet::new(),
            provider_instance_types: BTreeMap::new(),
            overlays: BTreeMap::new(),
            overlays_dirty: false,
            unavailable: BTreeMap::new(),
            batcher: provisioning::Batcher::default(),
            retry_at: None,
            prepared: Default::default(),
            disruption_due: None,
            validation: None,
            queue: CommandQueue::new(),
            queue_due: BTreeMap::new(),
            marked: BTreeSet::new(),
            nominated: BTreeMap::new(),
            next_command: 0,
            state_changes: 0,
            consolidated: None,
            eligible_nodes: BTreeMap::new(),
            budgets: BTreeMap::new(),
            disruption_passes: 0,
            provisioning_rounds: 0,
            unstarted: BTreeSet::new(),
            unbound: BTreeSet::new(),
            gc_due: None,
            gc_in_flight: false,
            orphans: BTreeMap::new(),
            orphan_deletes: BTreeSet::new(),
            last_wakeup: None,
        }
    }

    /// Applies `input` at `now`, runs every loop that has work due, and returns the actions to
    /// carry out, ending with [`Action::WakeAt`] when the next wake-up changed.
    pub fn handle(&mut self, input: Input, now: Timestamp) -> Vec<Action> {
        self.handle_observed(input, now, &mut ())
    }

    /// [`Operator::handle`], telling `observer` about every reconcile the loops run (the
    /// controller's reconcile metrics: counts, results, and durations measured by the shell).
    pub fn handle_observed(
        &mut self,
        input: Input,
        now: Timestamp,
        observer: &mut dyn LoopObserver,
    ) -> Vec<Action> {
        if now > self.now {
            self.now = now;
        }
        let now = self.now;
        let mut out = Vec::new();
        let errors = [self.claims.errors, self.nodes.errors, self.pools.errors];
        self.apply(input, now, &mut out);
        // Failures reported by the input (a write or a cloud call that failed) are errors of
        // the loop that asked for it.
        let after = [self.claims.errors, self.nodes.errors, self.pools.errors];
        let names = [
            controllers::NODECLAIM_LIFECYCLE,
            controllers::NODE_TERMINATION,
            controllers::NODEPOOL_READINESS,
        ];
        for ((before, after), controller) in errors.into_iter().zip(after).zip(names) {
            for _ in before..after {
                observer.failed(controller);
            }
        }
        if self.synced {
            self.run(now, &mut out, observer);
        }
        // Writes go first (Node patches, then NodeClaim updates): a NodeClaim's status is
        // persisted before the cloud calls that follow from it are made.
        let mut writes = Vec::new();
        self.flush(&mut writes);
        writes.append(&mut out);
        let mut out = writes;
        let next = self.next_wakeup();
        if next != self.last_wakeup {
            self.last_wakeup = next;
            if let Some(t) = next {
                out.push(Action::WakeAt(t));
            }
        }
        out
    }

    fn call(&mut self, pending: Pending, call: CloudCall, out: &mut Vec<Action>) -> CallId {
        let id = CallId(self.next_call);
        self.next_call += 1;
        self.calls.insert(id, pending);
        out.push(Action::Cloud { id, call });
        id
    }

    /// Applies one input to the view and the loops' state.
    fn apply(&mut self, input: Input, now: Timestamp, out: &mut Vec<Action>) {
        if !matches!(
            input,
            Input::Synced
                | Input::CloudResult { .. }
                | Input::EvictionResult { .. }
                | Input::WriteFailed { .. }
                | Input::Interruption(_)
                | Input::Tick
        ) {
            self.state_changes += 1;
        }
        match input {
            Input::NodePoolApplied(np) => {
                let name = np.name().to_string();
                let changed = self.view.node_pools.get(&name).is_none_or(|old| {
                    old.spec != np.spec || old.metadata.generation != np.metadata.generation
                });
                let annotations_changed = self
                    .view
                    .node_pools
                    .get(&name)
                    .is_none_or(|old| old.metadata.annotations != np.metadata.annotations);
                if changed {
                    self.instance_types_due.insert(name.clone(), now);
                }
                let labels_changed = self.view.node_pools.get(&name).is_none_or(|old| {
                    old.spec.template.metadata.labels != np.spec.template.metadata.labels
                });
                self.overlays_dirty |= labels_changed && !self.overlays.is_empty();
                self.view.node_pools.insert(name.clone(), *np);
                if changed || annotations_changed {
                    // Drift (the hash annotation) and the disruption conditions read the pool.
                    self.claims_of_pool_dirty(&name);
                }
                self.pools.mark(&name);
            }
            Input::NodePoolDeleted(name) => {
                self.view.node_pools.remove(&name);
                self.view.instance_types.remove(&name);
                self.provider_instance_types.remove(&name);
                self.overlays_dirty |= !self.overlays.is_empty();
                self.instance_types_due.remove(&name);
                self.pools.forget(&name);
            }
            Input::NodeClaimApplied(claim) => {
                let name = claim.name().to_string();
                if let Some(pool) = claim.metadata.labels.get(crate::labels::NODEPOOL) {
                    self.pools.mark(pool);
                }
                self.view.put_claim(*claim);
                self.claims.mark(&name);
                self.nodes_of_claim_dirty(&name);
            }
            Input::NodeClaimDeleted(name) => {
                if let Some(c) = self.view.remove_claim(&name) {
                    if let Some(pool) = c.metadata.labels.get(crate::labels::NODEPOOL) {
                        self.pools.mark(pool);
                    }
                    if let Some(pid) = &c.status.provider_id
                        && !self.queue.contains(pid)
                    {
                        self.marked.remove(pid);
                    }
                }
                self.forget_claim(&name);
                // Its pods may need a new home.
                self.trigger_if_pending(now);
            }
            Input::NodeApplied(node) => {
                let name = node.name.clone();
                let pid = node.provider_id.clone();
                let disrupted = node
                    .taints
                    .iter()
                    .any(|t| t.key == crate::labels::DISRUPTED_TAINT_KEY);
                // What the watch shows is the truth, our patches included or not.
                self.unconfirmed_nodes.remove(&name);
                self.view.put_node(*node);
                self.nodes.mark(&name);
                if let Some(c) = self.view.claim_with_provider_id(&pid) {
                    let c = c.name().to_string();
                    self.claims.mark(&c);
                }
                // A node carrying the disrupted taint may hold pods to move (upstream's
                // provisioner is triggered by such nodes).
                if disrupted {
                    self.trigger_if_pending(now);
                }
            }
            Input::NodeDeleted(name) => {
                if let Some(n) = self.view.remove_node(&name)
                    && let Some(c) = self.view.claim_with_provider_id(&n.provider_id)
                {
                    let c = c.name().to_string();
                    self.claims.mark(&c);
                }
                self.nodes.forget(&name);
                self.unconfirmed_nodes.remove(&name);
                self.node_instance_gone.remove(&name);
                self.node_instance_checked.remove(&name);
                self.nominated.remove(&name);
            }
            Input::PodApplied(pod) => {
                let key = pod.key();
                // A new pod under a settled eviction's name is a pod to evict anew.
                if self
                    .evictions
                    .get(&key)
                    .is_some_and(|e| e.settled.as_ref().is_some_and(|uid| *uid != pod.uid))
                {
                    self.evictions.remove(&key);
                }
                let was_pending = self.view.pods().get(&key).is_some_and(is_provisionable);
                let pending = is_provisionable(&pod);
                let node = pod.node_name.clone();
                let newly_bound_or_terminal = self.view.pods().get(&key).is_none_or(|old| {
                    old.node_name != pod.node_name
                        || old.is_terminal() != pod.is_terminal()
                        || old.is_terminating() != pod.is_terminating()
                });
                self.pod_latency(&key, &pod, out);
                self.view.put_pod(*pod);
                if pending && !was_pending {
                    self.trigger(&key, now);
                }
                if let Some(n) = node {
                    if self.view.nodes().get(&n).is_some_and(|n| n.is_deleting()) {
                        self.nodes.mark(&n);
                    }
                    if newly_bound_or_terminal {
                        self.pod_event(&key, &n, now);
                    }
                }
            }
            Input::PodDeleted(key) => {
                if let Some(p) = self.view.remove_pod(&key)
                    && let Some(n) = p.node_name.clone()
                {
                    if self.view.nodes().contains_key(&n) {
                        self.nodes.mark(&n);
                    }
                    self.pod_event_deleted(&n, &p, now);
                }
                self.evictions.remove(&key);
                self.unstarted.remove(&key);
                self.unbound.remove(&key);
            }
            Input::DaemonSetApplied(ds) => {
                let key = format!("{}/{}", ds.namespace, ds.name);
                self.view.daemonsets.insert(key, *ds);
            }
            Input::DaemonSetDeleted(key) => {
                self.view.daemonsets.remove(&key);
            }
            Input::PdbApplied(pdb) => {
                let key = format!("{}/{}", pdb.namespace, pdb.name);
                self.view.pdbs.insert(key, *pdb);
            }
            Input::PdbDeleted(key) => {
                self.view.pdbs.remove(&key);
            }
            Input::VolumeAttachmentApplied { name, node_name } => {
                if self.view.nodes().contains_key(&node_name) {
                    self.nodes.mark(&node_name);
                }
                self.view.put_volume_attachment(name, node_name);
            }
            Input::VolumeAttachmentDeleted(name) => {
                if let Some(node) = self.view.remove_volume_attachment(&name)
                    && self.view.nodes().contains_key(&node)
                {
                    self.nodes.mark(&node);
                }
            }
            Input::Synced => {
                if !self.synced {
                    self.synced = true;
                    self.start(now);
                }
            }
            Input::CloudResult { id, response } => {
                if let Some(pending) = self.calls.remove(&id) {
                    self.cloud_result(pending, response, now, out);
                }
            }
            Input::EvictionResult { id, response } => self.eviction_result(id, response, now, out),
            Input::WriteFailed { kind, name, .. } => {
                use crate::lifecycle::ObjectKind;
                match kind {
                    ObjectKind::NodeClaim => {
                        // A create that failed leaves nothing behind: drop the unconfirmed copy.
                        if self
                            .view
                            .node_claims()
                            .get(&name)
                            .is_some_and(|c| c.metadata.resource_version.is_none())
                        {
                            self.view.remove_claim(&name);
                            self.trigger_if_pending(now);
                        } else {
                            self.claims.fail(&name, now);
                        }
                    }
                    ObjectKind::Node => {
                        // The view holds the failed patch: go back to the Node as the watch
                        // last showed it (a taint we removed is still there), so neither the
                        // scheduler nor the next reconcile starts from a write that never
                        // happened.
                        if let Some(observed) = self.unconfirmed_nodes.remove(&name) {
                            self.view.put_node(observed);
                            self.trigger_if_pending(now);
                        }
                        let due = self.nodes.fail(&name, now);
                        // The NodeClaim's lifecycle writes its Node too (registration,
                        // initialization): it looks again with the Node's back-off.
                        let claim = self.view.nodes().get(&name).and_then(|n| {
                            self.view
                                .claim_with_provider_id(&n.provider_id)
                                .map(|c| c.name().to_string())
                        });
                        if let Some(claim) = claim {
                            self.claims.requeue(&claim, due);
                        }
                    }
                    ObjectKind::NodePool => {
                        self.pools.fail(&name, now);
                    }
                    ObjectKind::Pod => {}
                }
            }
            Input::Interruption(event) => self.interruption(event, now, out),
            Input::NodeOverlayApplied(overlay) => {
                if self.config.node_overlay {
                    let name = overlay.name().to_string();
                    // A status write of ours comes back as an event: only a new spec (or a
                    // new overlay) is applied again.
                    if self
                        .overlays
                        .get(&name)
                        .is_none_or(|old| old.spec != overlay.spec)
                    {
                        self.overlays_dirty = true;
                    }
                    self.overlays.insert(name, *overlay);
                }
            }
            Input::NodeOverlayDeleted(name) => {
                if self.overlays.remove(&name).is_some() {
                    self.overlays_dirty = true;
                }
            }
            Input::Tick => {}
        }
    }

    /// Starts the periodic loops once the view is complete.
    fn start(&mut self, now: Timestamp) {
        self.disruption_due = Some(now);
        self.gc_due = Some(crate::lifecycle::add(now, self.config.gc_period));
        let pools: Vec<String> = self.view.node_pools.keys().cloned().collect();
        for p in pools {
            self.instance_types_due.insert(p.clone(), now);
            self.pools.mark(&p);
        }
        let claims: Vec<String> = self.view.node_claims().keys().cloned().collect();
        for c in claims {
            self.claims.mark(&c);
        }
        let nodes: Vec<String> = self.view.nodes().keys().cloned().collect();
        for n in nodes {
            self.nodes.mark(&n);
        }
        self.trigger_if_pending(now);
    }

    /// One round of every loop at `now`.
    fn run(&mut self, now: Timestamp, out: &mut Vec<Action>, observer: &mut dyn LoopObserver) {
        self.unavailable.retain(|_, until| *until > now);
        // A nomination keeps its node out of disruption; when it lapses, the node may be a
        // candidate again, so a memoised "nothing to consolidate" no longer holds. (Pods still
        // pending are placed, and their nodes nominated, again every round: see `provision`.)
        let nominated = self.nominated.len();
        self.nominated.retain(|_, until| *until > now);
        if self.nominated.len() != nominated {
            self.state_changes += 1;
        }
        self.refresh_instance_types(now, out);
        self.apply_overlays(now, out);
        for name in self.claims.take(now) {
            observer.started(controllers::NODECLAIM_LIFECYCLE);
            let errors = self.claims.errors;
            self.reconcile_claim(&name, now, out);
            let result = self.claims.result(&name, errors);
            observer.finished(controllers::NODECLAIM_LIFECYCLE, result);
        }
        for name in self.nodes.take(now) {
            observer.started(controllers::NODE_TERMINATION);
            let errors = self.nodes.errors;
            self.reconcile_node(&name, now, out);
            let result = self.nodes.result(&name, errors);
            observer.finished(controllers::NODE_TERMINATION, result);
        }
        self.run_evictions(now, out);
        for name in self.pools.take(now) {
            observer.started(controllers::NODEPOOL_READINESS);
            let errors = self.pools.errors;
            self.reconcile_pool(&name, now, out);
            let result = self.pools.result(&name, errors);
            observer.finished(controllers::NODEPOOL_READINESS, result);
        }
        observer.started(controllers::PROVISIONER);
        let rounds = self.provisioning_rounds;
        self.run_provisioning(now, out);
        if self.provisioning_rounds != rounds {
            observer.finished(controllers::PROVISIONER, ReconcileResult::Success);
        }
        observer.started(controllers::DISRUPTION);
        let passes = self.disruption_passes;
        self.run_disruption(now, out);
        if self.disruption_passes != passes {
            observer.finished(controllers::DISRUPTION, ReconcileResult::Success);
        }
        self.run_gc(now, out);
    }

    /// The NodeClaim as this step last wrote it, else as the view has it.
    fn claim_for_write(&self, name: &str) -> Option<crate::api::NodeClaim> {
        self.staged_claims
            .get(name)
            .or_else(|| self.view.node_claims().get(name))
            .cloned()
    }

    /// Stages a NodeClaim write: one [`Action::UpdateNodeClaim`] per NodeClaim is emitted at the
    /// end of the step, with everything the loops changed.
    fn write_claim(&mut self, claim: crate::api::NodeClaim) {
        self.staged_claims.insert(claim.name().to_string(), claim);
    }

    /// The Node as this step last wrote it, else as the view has it.
    fn node_for_write(&self, name: &str) -> Option<crate::lifecycle::Node> {
        self.staged_nodes
            .get(name)
            .or_else(|| self.view.nodes().get(name))
            .cloned()
    }

    /// Stages a Node write (see [`Operator::write_claim`]).
    fn write_node(&mut self, node: crate::lifecycle::Node) {
        self.staged_nodes.insert(node.name.clone(), node);
    }

    /// Stages a Node update.
    fn patch_node(&mut self, update: &crate::lifecycle::NodeUpdate) {
        if let Some(mut node) = self.node_for_write(&update.node_name) {
            update.apply(&mut node);
            self.write_node(node);
        }
    }

    /// Emits the staged writes. Node patches are applied to the view at once (a patch carries
    /// whole fields, so a later patch must start from it), and undone if the write fails
    /// ([`Input::WriteFailed`]); NodeClaim updates carry the
    /// `resourceVersion` they were based on and wait for the watch.
    ///
    /// Node patches go before NodeClaim updates, as upstream orders them: a NodeClaim's status
    /// records what was done to its Node (`Registered=True` once the unregistered taint is gone),
    /// so a controller that dies between the two writes leaves a claim that is still
    /// unregistered, which the next reconcile finishes, never a registered claim whose Node
    /// keeps the taint.
    fn flush(&mut self, out: &mut Vec<Action>) {
        for (name, node) in std::mem::take(&mut self.staged_nodes) {
            let Some(before) = self.view.nodes().get(&name) else {
                continue;
            };
            if let Some(update) = crate::lifecycle::NodeUpdate::diff(before, &node) {
                out.push(Action::PatchNode(update));
                if !self.unconfirmed_nodes.contains_key(&name) {
                    self.unconfirmed_nodes.insert(name.clone(), before.clone());
                }
                self.view.put_node(node);
            }
        }
        for (name, claim) in std::mem::take(&mut self.staged_claims) {
            if self.view.node_claims().get(&name) != Some(&claim) {
                out.push(Action::UpdateNodeClaim(Box::new(claim)));
            }
        }
    }

    fn claims_of_pool_dirty(&mut self, pool: &str) {
        let names: Vec<String> = self
            .view
            .claims_of_pool(pool)
            .map(|c| c.name().to_string())
            .collect();
        for n in names {
            self.claims.mark(&n);
        }
    }

    fn nodes_of_claim_dirty(&mut self, claim: &str) {
        let Some(c) = self.view.node_claims().get(claim) else {
            return;
        };
        let names: Vec<String> = match c.status.provider_id.as_deref() {
            Some(pid) => self
                .view
                .node_refs_with_provider_id(pid)
                .map(|n| n.name.clone())
                .collect(),
            None => Vec::new(),
        };
        for n in names {
            self.nodes.mark(&n);
        }
    }

    fn forget_claim(&mut self, name: &str) {
        self.claims.forget(name);
        self.launching.remove(name);
        self.launch_cache.remove(name);
        self.instance_gone.remove(name);
        self.deleting_instance.remove(name);
        self.cloud_drift.remove(name);
        self.drift_checked.remove(name);
        self.instance_type_checked.remove(name);
    }

    /// A fresh NodeClaim name for `pool`: `<pool>-<5 characters>`, unused in the view.
    fn claim_name(&mut self, pool: &str) -> String {
        const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
        loop {
            self.next_name += 1;
            let mut x = self
                .config
                .name_seed
                .wrapping_mul(0x9E37_79B9_7F4A_7C15)
                .wrapping_add(self.next_name.wrapping_mul(0xBF58_476D_1CE4_E5B9));
            x ^= x >> 31;
            x = x.wrapping_mul(0x94D0_49BB_1331_11EB);
            x ^= x >> 29;
            let mut suffix = String::with_capacity(5);
            for _ in 0..5 {
                let i = usize::try_from(x % ALPHABET.len() as u64).unwrap_or(0);
                suffix.push(char::from(ALPHABET[i]));
                x /= ALPHABET.len() as u64;
            }
            let name = format!("{pool}-{suffix}");
            if !self.view.node_claims().contains_key(&name) {
                return name;
            }
        }
    }
}

#[cfg(test)]
mod tests;

//! The simulator shell of the operator loops: an in-memory cluster API, the
//! [`FakeCloudProvider`], a binder that plays kube-scheduler, kubelets that register and
//! initialize nodes after a delay, and a virtual clock that jumps to the next thing due.
//!
//! The simulator holds no decision of its own: every decision is the
//! [`karpenter_core::operator::Operator`]'s, exactly as in the controller. It only plays the
//! parts of the world around Karpenter (the API server, kube-scheduler, kubelets, workload
//! controllers that recreate evicted pods).
//!
//! ```
//! use karpenter_core::model::Pod;
//! use karpenter_core::resources::Quantity;
//! use karpenter_fake::sim::{Sim, SimConfig, node_pool};
//!
//! let mut sim = Sim::new(SimConfig::default());
//! sim.apply_node_pool(node_pool("default"));
//! let mut pod = Pod::new("default", "app");
//! pod.requests.insert("cpu", Quantity::from_units(1));
//! sim.add_pod(pod);
//! sim.start();
//! sim.run_for(jiff::SignedDuration::from_mins(2)).unwrap();
//! assert!(sim.api().pods["default/app"].node_name.is_some());
//! ```

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::future::Future;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use jiff::SignedDuration;
use karpenter_core::api::{
    ConditionStatus, NodeClaim, NodeClaimTemplate, NodeClaimTemplateSpec, NodeClassReference,
    NodePool, NodePoolSpec, TemplateMetadata,
};
use karpenter_core::disruption::candidates::PdbLimits;
use karpenter_core::labels;
use karpenter_core::lifecycle::termination::EvictionResponse;
use karpenter_core::lifecycle::{self, Metric, Node, NodeCondition, unregistered_taint};
use karpenter_core::model::{Pod, PodDisruptionBudget, PodPhase, Timestamp};
use karpenter_core::operator::{Action, CloudCall, CloudResponse, Input, Operator, OperatorConfig};
use karpenter_core::resources::ResourceList;
use karpenter_core::taints::TaintEffect;

use crate::FakeCloudProvider;

mod api;
pub mod chaos;
mod event;
mod invariants;
mod replicas;
mod rng;
pub mod scripted;
mod step;
pub mod workload;
mod world;
pub use self::api::{ApiError, ClusterApi};
pub use self::replicas::{NonLeaderAct, ReplicaConfig};
pub use self::world::{EvictionRecord, Observations, RUN_FOR_ANNOTATION};

/// A NodePool named `name` with the fake node class, no requirements and the default
/// disruption settings (consolidate when empty or underutilized after 0 s, budget 10 %).
pub fn node_pool(name: &str) -> NodePool {
    let class = NodeClassReference::new("karpenter.test.sh", "TestNodeClass", "default");
    let template = NodeClaimTemplate {
        metadata: TemplateMetadata::default(),
        spec: NodeClaimTemplateSpec::new(class),
    };
    NodePool::new(name, NodePoolSpec::new(template))
}

/// Settings of a simulation.
#[derive(Debug, Clone)]
pub struct SimConfig {
    /// The operator's settings.
    pub operator: OperatorConfig,
    /// The virtual clock's start.
    pub start: Timestamp,
    /// How long after a launch its Node registers (kubelet start).
    pub register_delay: SignedDuration,
    /// How long after registering a Node becomes Ready (and its startup taints are removed,
    /// as the daemon owning them would).
    pub ready_delay: SignedDuration,
    /// Whether launched instances register at all (`false`: a launch whose node never joins).
    pub register_nodes: bool,
    /// How many inputs may be handled at one instant before the simulation reports a livelock.
    pub max_inputs_per_instant: usize,
    /// Print every input handed to the operator to standard error (for debugging a scenario).
    pub trace: bool,
    /// A seeded bug: when set, every batch of actions the operator asks for passes through it
    /// before the simulated shell carries the batch out, so a test can break the operator's
    /// promises on purpose (launch twice, disrupt past a budget, ...) and show that an
    /// invariant catches it. `None` (the default) carries out every batch as asked.
    pub seeded_bug: Option<SeededBug>,
    /// Two replicas with leader election on a Lease (see [`ReplicaConfig`]); `None` (the
    /// default): one replica that always leads.
    pub replicas: Option<ReplicaConfig>,
}

/// A seeded bug (see [`SimConfig::seeded_bug`]): rewrites a batch of the operator's actions,
/// given the cluster as the batch finds it.
pub type SeededBug = fn(&ClusterApi, &mut Vec<Action>);

impl Default for SimConfig {
    fn default() -> Self {
        let mut operator = OperatorConfig::default();
        operator.scheduler = crate::harness::suite_options();
        SimConfig {
            operator,
            start: "2026-01-01T00:00:00Z"
                .parse()
                .unwrap_or(Timestamp::UNIX_EPOCH),
            register_delay: SignedDuration::from_secs(20),
            ready_delay: SignedDuration::from_secs(10),
            register_nodes: true,
            max_inputs_per_instant: 100_000,
            trace: false,
            seeded_bug: None,
            replicas: None,
        }
    }
}

/// Why a simulation stopped early.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SimError {
    /// The operator kept being woken at the same instant without time moving on.
    #[error(
        "livelock at {at}: more than {limit} inputs handled without the clock moving (due: {due:?})"
    )]
    Livelock {
        /// The instant.
        at: Timestamp,
        /// The limit that was reached.
        limit: usize,
        /// The operator's loops that kept asking to be woken at that instant.
        due: Vec<String>,
    },
}

/// Something the world (not the operator) does at a time.
#[derive(Debug)]
enum WorldEvent {
    /// The kubelet of this instance registers its Node.
    Register(Box<NodeClaim>),
    /// The Node becomes Ready; startup taints are removed.
    Ready(String),
    /// A pod that ran for its `RUN_FOR_ANNOTATION` completes (by key, with its UID).
    Complete(String, String),
    /// A watch event held back by an injected watch lag reaches the operator.
    Deliver(Box<Input>),
}

/// A counter of what the operator asked for, for assertions.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ActionCounts {
    /// NodeClaims created.
    pub node_claims_created: usize,
    /// NodeClaim deletions asked for (repeats included).
    pub node_claim_deletes: usize,
    /// `create` calls of the cloud provider.
    pub launches: usize,
    /// Evictions asked for.
    pub evictions: usize,
    /// API writes that failed.
    pub write_failures: usize,
}

/// A simulated cluster driven by the operator loops. See the [module documentation](self).
#[derive(Debug)]
pub struct Sim {
    config: SimConfig,
    api: ClusterApi,
    provider: Arc<FakeCloudProvider>,
    operator: Operator,
    now: Timestamp,
    inbox: VecDeque<Input>,
    world: BTreeMap<(Timestamp, u64), WorldEvent>,
    world_seq: u64,
    nominations: BTreeMap<String, String>,
    /// The binding generation of the API at which [`Sim::bind_pending`] last bound nothing.
    nothing_to_bind: Option<u64>,
    replacement_seq: u64,
    restarts: u64,
    inputs_at_instant: usize,
    faults: world::FaultState,
    pdb_rv: u64,
    workloads: workload::Workloads,
    /// What the world saw the operator do, for invariants.
    pub observed: Observations,
    /// Kubernetes events the operator published, in order.
    pub events: Vec<lifecycle::Event>,
    /// Metric updates the operator made, in order.
    pub metrics: Vec<Metric>,
    /// What the operator asked for.
    pub counts: ActionCounts,
    /// The API writes that failed, in order.
    pub write_errors: Vec<ApiError>,
    /// How many inputs the operator was handed.
    pub inputs_delivered: u64,
    crash: Option<CrashPoint>,
    /// The second replica and the election (see [`SimConfig::replicas`]).
    replicas: Option<Box<replicas::Replicas>>,
    /// With one replica: paused (see [`Sim::pause_leader`]) until then.
    paused_until: Option<Timestamp>,
}

/// An armed crash of the controller (see [`Sim::crash_before`]).
struct CrashPoint(Box<dyn FnMut(&Action) -> bool + Send>);

impl std::fmt::Debug for CrashPoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CrashPoint")
    }
}

impl Sim {
    /// A simulation with an empty cluster and a [`FakeCloudProvider`] offering the default
    /// catalog.
    pub fn new(config: SimConfig) -> Sim {
        Sim::with_provider(config, Arc::new(FakeCloudProvider::new()))
    }

    /// A simulation over a given provider.
    pub fn with_provider(config: SimConfig, provider: Arc<FakeCloudProvider>) -> Sim {
        let operator = Operator::new(config.operator.clone());
        let replicas = config.replicas.map(|r| {
            // The second replica names its NodeClaims from another seed, as two processes
            // would.
            let mut second = config.operator.clone();
            second.name_seed = second.name_seed.wrapping_add(1 << 40);
            Box::new(replicas::Replicas::new(
                r,
                Operator::new(second),
                config.start,
            ))
        });
        Sim {
            now: config.start,
            config,
            api: ClusterApi::default(),
            provider,
            operator,
            inbox: VecDeque::new(),
            world: BTreeMap::new(),
            world_seq: 0,
            nominations: BTreeMap::new(),
            nothing_to_bind: None,
            replacement_seq: 0,
            restarts: 0,
            inputs_at_instant: 0,
            faults: world::FaultState::default(),
            pdb_rv: 0,
            workloads: workload::Workloads::default(),
            observed: Observations::default(),
            events: Vec::new(),
            metrics: Vec::new(),
            counts: ActionCounts::default(),
            write_errors: Vec::new(),
            inputs_delivered: 0,
            crash: None,
            replicas,
            paused_until: None,
        }
    }

    /// The virtual time.
    pub fn now(&self) -> Timestamp {
        self.now
    }

    /// The cluster API.
    pub fn api(&self) -> &ClusterApi {
        &self.api
    }

    /// The cloud provider.
    pub fn provider(&self) -> &Arc<FakeCloudProvider> {
        &self.provider
    }

    /// The operator.
    pub fn operator(&self) -> &Operator {
        &self.operator
    }

    /// The settings (change them between steps, e.g. to stop nodes from registering).
    pub fn config_mut(&mut self) -> &mut SimConfig {
        &mut self.config
    }

    /// Creates or replaces a NodePool.
    pub fn apply_node_pool(&mut self, np: NodePool) {
        self.api.apply_node_pool(np);
    }

    /// Adds a pod (pending unless it names a node).
    pub fn add_pod(&mut self, mut pod: Pod) {
        if pod.uid.is_empty() {
            pod.uid = format!("uid-pod-{}", pod.key());
        }
        pod.creation_timestamp = self.now;
        self.api.put_pod(pod);
    }

    /// Deletes a pod (a workload scaling down).
    pub fn delete_pod(&mut self, key: &str) {
        self.api.delete_pod(key);
    }

    /// Adds a PodDisruptionBudget.
    pub fn add_pdb(&mut self, pdb: PodDisruptionBudget) {
        self.api.put_pdb(pdb);
    }

    /// Attaches a volume to a node (a VolumeAttachment named `name`).
    pub fn attach_volume(&mut self, name: &str, node: &str) {
        self.api
            .volume_attachments
            .insert(name.to_string(), node.to_string());
        self.api.events.push_back(Input::VolumeAttachmentApplied {
            name: name.to_string(),
            node_name: node.to_string(),
        });
    }

    /// Detaches the volume of the VolumeAttachment `name`.
    pub fn detach_volume(&mut self, name: &str) {
        if self.api.volume_attachments.remove(name).is_some() {
            self.api
                .events
                .push_back(Input::VolumeAttachmentDeleted(name.to_string()));
        }
    }

    /// Delivers an interruption message (as a provider's queue consumer would).
    pub fn interrupt(&mut self, event: karpenter_core::operator::InterruptionEvent) {
        self.push_to_leader(Input::Interruption(event));
    }

    /// Feeds the operator the whole cluster, then [`Input::Synced`].
    pub fn start(&mut self) {
        self.drain_api_events();
        let inputs = self.api.list_all();
        self.api.events.clear();
        self.inbox.clear();
        // A new process starts new watches: nothing held back by a lag reaches it.
        self.world
            .retain(|_, e| !matches!(e, WorldEvent::Deliver(_)));
        self.faults.lag_until = None;
        self.faults.last_release = None;
        if self.replicas.is_some() {
            self.start_replicas();
            return;
        }
        for input in inputs {
            self.deliver(input);
        }
        self.deliver(Input::Synced);
    }

    /// Replaces the operator by a new instance built from the cluster's state alone (a crash
    /// and restart of the controller): answers to calls in flight are lost.
    pub fn restart_operator(&mut self) {
        if self.replicas.is_some() {
            // Two replicas: the leader's pod is replaced and the other replica takes over.
            self.crash_replica();
            return;
        }
        self.restarts += 1;
        let mut config = self.config.operator.clone();
        config.name_seed = config.name_seed.wrapping_add(self.restarts);
        self.operator = Operator::new(config);
        self.inbox.clear();
        self.start();
    }

    /// Arms a crash: the next time the operator asks for an action `at` accepts, that action
    /// and every later action of the same batch are dropped (the process died between two API
    /// calls) and the operator is restarted from the cluster's state alone, as
    /// [`Sim::restart_operator`] does. One crash per call.
    pub fn crash_before(&mut self, at: impl FnMut(&Action) -> bool + Send + 'static) {
        self.crash = Some(CrashPoint(Box::new(at)));
    }

    /// Whether a crash armed by [`Sim::crash_before`] is still waiting for its action.
    pub fn crash_armed(&self) -> bool {
        self.crash.is_some()
    }

    /// How many times the operator was restarted.
    pub fn restarts(&self) -> u64 {
        self.restarts
    }

    fn drain_api_events(&mut self) {
        while let Some(e) = self.api.events.pop_front() {
            match self.faults.watch_release(self.now) {
                // Held back: delivered in order, after every event held back before it.
                Some(at) => self.schedule(at, WorldEvent::Deliver(Box::new(e))),
                None => self.push_watch(e),
            }
        }
    }

    /// Hands one input to the operator and carries out its actions.
    fn deliver(&mut self, input: Input) {
        self.inputs_delivered += 1;
        if self.config.trace {
            eprintln!("{} <- {}", self.now, input_summary(&input));
        }
        let mut actions = self.operator.handle(input, self.now);
        if let Some(bug) = self.config.seeded_bug {
            bug(&self.api, &mut actions);
        }
        let gate = self.gate();
        if gate == replicas::Gate::Drop {
            actions.clear();
        }
        let mut crashed = false;
        let mut lost = false;
        for action in actions {
            // The controller's rule: no action after leadership ended.
            if gate == replicas::Gate::Leader && !self.current_may_act() {
                lost = true;
                break;
            }
            if let Some(CrashPoint(at)) = &mut self.crash
                && at(&action)
            {
                self.crash = None;
                crashed = true;
                break;
            }
            self.note_act(&action);
            self.execute(action);
        }
        self.drain_api_events();
        if crashed {
            self.restart_operator();
        } else if lost {
            self.leadership_lost();
        }
    }

    fn write_failed(&mut self, error: ApiError) {
        self.counts.write_failures += 1;
        self.write_errors.push(error.clone());
        let (kind, name) = match &error {
            ApiError::NotFound { kind, name }
            | ApiError::AlreadyExists { kind, name }
            | ApiError::Conflict { kind, name }
            | ApiError::ServerError { kind, name } => (*kind, name.clone()),
        };
        self.inbox.push_back(Input::WriteFailed {
            kind,
            name,
            message: error.to_string(),
        });
    }

    fn execute(&mut self, action: Action) {
        let now = self.now;
        if let Some(error) = self.faults.take_write_fault(&action) {
            self.write_failed(error);
            return;
        }
        let result = match action {
            Action::CreateNodeClaim(claim) => {
                self.counts.node_claims_created += 1;
                self.api.create_node_claim(*claim, now)
            }
            Action::UpdateNodeClaim(claim) => self.api.update_node_claim(*claim),
            Action::DeleteNodeClaim { name } => {
                self.counts.node_claim_deletes += 1;
                self.api.delete_node_claim(&name, now)
            }
            Action::PatchNode(update) => self.api.patch_node(&update),
            Action::DeleteNode { name } => self.api.delete_node(&name, now),
            Action::EvictPod { id, pod, uid } => {
                self.counts.evictions += 1;
                let response = self.evict(&pod, &uid);
                self.drain_api_events();
                self.inbox.push_back(Input::EvictionResult { id, response });
                Ok(())
            }
            Action::DeletePod { pod, .. } => {
                self.remove_pod(&pod);
                Ok(())
            }
            Action::NominatePod { pod, target } => {
                self.nominations.insert(pod, target);
                Ok(())
            }
            Action::AnnotateNodePool { name, annotations } => {
                if let Some(mut np) = self.api.node_pools.get(&name).cloned() {
                    np.metadata.annotations.extend(annotations);
                    self.api.apply_node_pool(np);
                }
                Ok(())
            }
            // The simulated API holds no NodeOverlays (`karpenter simulate` applies them to the
            // catalog before the run), so the operator never asks for an overlay status.
            Action::UpdateNodeOverlayStatus { .. } => Ok(()),
            Action::UpdateNodePoolStatus { name, status } => {
                if let Some(mut np) = self.api.node_pools.get(&name).cloned() {
                    np.status = Some(*status);
                    self.api.apply_node_pool(np);
                }
                Ok(())
            }
            Action::Cloud { id, call } => {
                if let CloudCall::Create(claim) = &call {
                    self.counts.launches += 1;
                    self.observe_create(claim);
                }
                let response = block_on(call.execute(self.provider.as_ref()));
                if let CloudResponse::Create(Ok(launched)) = &response {
                    self.observe_launched(launched);
                    if self.config.register_nodes {
                        if self.faults.take_lost_launch(launched) {
                            self.observed.lost_launches.push(now);
                        } else {
                            let at = lifecycle_add(now, self.config.register_delay);
                            self.schedule(at, WorldEvent::Register(launched.clone()));
                        }
                    }
                }
                let response = self.faults.maybe_time_out(response);
                self.drain_api_events();
                self.inbox.push_back(Input::CloudResult { id, response });
                Ok(())
            }
            Action::RecordEvent(e) => {
                self.events.push(e);
                Ok(())
            }
            Action::Metric(m) => {
                self.metrics.push(m);
                Ok(())
            }
            Action::WakeAt(_) => Ok(()),
        };
        if let Err(e) = result {
            self.drain_api_events();
            self.write_failed(e);
        }
    }

    /// The Eviction API: 404 when gone, 409 on a UID mismatch, 429 when a PDB refuses, else the
    /// pod is deleted (and its workload recreates it).
    fn evict(&mut self, key: &str, uid: &str) -> EvictionResponse {
        let Some(pod) = self.api.pods.get(key) else {
            return EvictionResponse::NotFound;
        };
        if !uid.is_empty() && pod.uid != uid {
            return EvictionResponse::Conflict;
        }
        let pod = pod.clone();
        let pdbs: Vec<PodDisruptionBudget> = self.api.pdbs.values().cloned().collect();
        if let Err(e) = PdbLimits::new(&pdbs).can_evict_pods(std::slice::from_ref(&pod), self.now) {
            return EvictionResponse::TooManyRequests {
                message: e.to_string(),
            };
        }
        self.observe_eviction(&pod);
        self.remove_pod(key);
        self.consume_pdb_disruption(&pod);
        EvictionResponse::Evicted
    }

    /// Deletes a pod; a pod with a controlling owner (other than a DaemonSet or a Node) is
    /// recreated pending under a new name, as its ReplicaSet would.
    fn remove_pod(&mut self, key: &str) {
        let Some(pod) = self.api.delete_pod(key) else {
            return;
        };
        self.nominations.remove(key);
        let owned = pod
            .owner
            .as_ref()
            .is_some_and(|o| o.controller && o.kind != "DaemonSet" && o.kind != "Node");
        if owned {
            self.replacement_seq += 1;
            let mut next = pod.clone();
            let base = match pod.name.rsplit_once("-r") {
                Some((b, n)) if !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()) => b,
                _ => pod.name.as_str(),
            }
            .to_string();
            next.name = format!("{base}-r{}", self.replacement_seq);
            next.uid = format!("uid-pod-{}/{}", next.namespace, next.name);
            next.node_name = None;
            next.phase = PodPhase::Pending;
            next.deletion_timestamp = None;
            next.creation_timestamp = self.now;
            self.api.put_pod(next);
        }
    }

    fn schedule(&mut self, at: Timestamp, event: WorldEvent) {
        self.world_seq += 1;
        self.world.insert((at, self.world_seq), event);
    }

    fn world_event(&mut self, event: WorldEvent) {
        let now = self.now;
        match event {
            WorldEvent::Register(instance) => {
                let pid = instance.status.provider_id.clone().unwrap_or_default();
                // The instance was terminated before its kubelet started.
                if !self.provider.has_instance(&pid) {
                    return;
                }
                // Nodes are named after their instance (as EC2's `ip-...` names are), so a
                // NodeClaim launched twice never shares a Node name.
                let name = pid
                    .strip_prefix(crate::provider::PROVIDER_ID_PREFIX)
                    .map_or_else(|| instance.name().to_string(), |id| format!("node-{id}"));
                if self.api.nodes.contains_key(&name) {
                    return;
                }
                let mut node = Node::new(name.clone(), pid);
                node.labels = instance.metadata.labels.clone();
                node.labels
                    .insert(labels::HOSTNAME.to_string(), name.clone());
                node.taints.push(unregistered_taint());
                node.taints.extend(instance.spec.taints.iter().cloned());
                node.taints
                    .extend(instance.spec.startup_taints.iter().cloned());
                node.capacity = instance.status.capacity.clone();
                node.allocatable = instance.status.allocatable.clone();
                node.creation_timestamp = now;
                node.conditions
                    .push(NodeCondition::new("Ready", ConditionStatus::False, now));
                self.api.put_node(node.clone());
                self.start_daemon_pods(&node);
                let at = lifecycle_add(now, self.config.ready_delay);
                self.schedule(at, WorldEvent::Ready(name));
            }
            WorldEvent::Ready(name) => {
                let Some(mut node) = self.api.nodes.get(&name).cloned() else {
                    return;
                };
                let instance_alive = self.provider.has_instance(&node.provider_id);
                if !instance_alive {
                    return;
                }
                node.conditions.retain(|c| c.type_ != "Ready");
                node.conditions
                    .push(NodeCondition::new("Ready", ConditionStatus::True, now));
                let startup: Vec<_> = self
                    .api
                    .node_claims
                    .values()
                    .filter(|c| c.status.provider_id.as_deref() == Some(node.provider_id.as_str()))
                    .flat_map(|c| c.spec.startup_taints.clone())
                    .collect();
                node.taints
                    .retain(|t| !startup.iter().any(|s| s.matches(t)));
                self.api.put_node(node);
            }
            WorldEvent::Complete(key, uid) => self.complete_pod(&key, &uid),
            WorldEvent::Deliver(input) => self.push_watch(*input),
        }
    }

    /// Plays kube-scheduler: binds pending pods to Ready, schedulable nodes they fit on,
    /// preferring the node (or NodeClaim's node) they were nominated to. Returns whether
    /// anything was bound. An approximation: node selectors, taints and resource requests are
    /// honoured; affinity and topology spread are not.
    pub fn bind_pending(&mut self) -> bool {
        // Nothing bound at this generation, and no pod or Node changed since: nothing binds now
        // either (a nomination only orders the nodes tried, so it cannot make a pod fit).
        let generation = self.api.binding_generation();
        if self.nothing_to_bind == Some(generation) {
            return false;
        }
        let pending: Vec<Pod> = self.api.unbound_pods().cloned().collect();
        if pending.is_empty() {
            self.nothing_to_bind = Some(generation);
            return false;
        }
        // The Nodes a pod may bind to in this call (ready, not being deleted), in name order,
        // with their free room; neither changes while pods bind, except a bound pod's Node's
        // room.
        let mut open: Vec<OpenNode> = self
            .api
            .nodes
            .iter()
            .filter(|(_, node)| node.is_ready() && !node.is_deleting())
            .map(|(name, node)| OpenNode {
                name: name.clone(),
                free: free_room(&node.allocatable, self.api.used_on(name)),
            })
            .collect();
        let mut bound = false;
        for mut pod in pending {
            let preferred = self.nominations.get(&pod.key()).map(|t| {
                self.api
                    .node_claims
                    .get(t)
                    .and_then(|c| c.status.node_name.clone())
                    .unwrap_or_else(|| t.clone())
            });
            let requests = pod.scheduling_requests();
            let fits = |open: &OpenNode| {
                let Some(free) = &open.free else {
                    return false;
                };
                let Some(node) = self.api.nodes.get(&open.name) else {
                    return false;
                };
                requests.iter().all(|(name, q)| q <= free.get_or_zero(name))
                    && node.taints.iter().all(|t| {
                        t.effect == TaintEffect::PreferNoSchedule
                            || pod.tolerations.iter().any(|tol| tol.tolerates(t))
                    })
                    && pod
                        .node_selector
                        .iter()
                        .all(|(k, v)| node.labels.get(k) == Some(v))
            };
            let preferred = preferred.and_then(|p| {
                open.binary_search_by(|o| o.name.as_str().cmp(p.as_str()))
                    .ok()
                    .filter(|&i| fits(&open[i]))
            });
            let target = preferred.or_else(|| open.iter().position(fits));
            if let Some(i) = target {
                let name = open[i].name.clone();
                pod.node_name = Some(name.clone());
                pod.phase = PodPhase::Running;
                pod.start_time = Some(self.now);
                self.nominations.remove(&pod.key());
                if let Some(run_for) = world::run_for(&pod) {
                    let at = lifecycle_add(self.now, run_for);
                    self.schedule(at, WorldEvent::Complete(pod.key(), pod.uid.clone()));
                }
                // Counts its requests on the node for the pods after it.
                self.api.put_pod(pod);
                open[i].free = self
                    .api
                    .nodes
                    .get(&name)
                    .and_then(|node| free_room(&node.allocatable, self.api.used_on(&name)));
                bound = true;
            }
        }
        self.drain_api_events();
        if !bound {
            self.nothing_to_bind = Some(self.api.binding_generation());
        }
        bound
    }

    /// Handles one queued input, or binds pending pods, or moves the clock to the next thing
    /// due (firing world events and waking the operator). Returns `Ok(false)` when nothing is
    /// left to do before `deadline`.
    pub fn step(&mut self, deadline: Timestamp) -> Result<bool, SimError> {
        if self.replicas.is_some() {
            return self.step_replicas(deadline);
        }
        self.refresh_pdbs();
        if self.paused_until.is_some_and(|t| t <= self.now) {
            self.paused_until = None;
        }
        let paused = self.paused_until.is_some();
        if !paused && let Some(input) = self.inbox.pop_front() {
            self.inputs_at_instant += 1;
            if self.inputs_at_instant > self.config.max_inputs_per_instant {
                return Err(SimError::Livelock {
                    at: self.now,
                    limit: self.config.max_inputs_per_instant,
                    due: Vec::new(),
                });
            }
            self.deliver(input);
            return Ok(true);
        }
        if self.bind_pending() {
            return Ok(true);
        }
        let world_next = self.world.keys().next().map(|(t, _)| *t);
        let wakeup = match self.paused_until {
            Some(t) => Some(t),
            None => self.operator.next_wakeup(),
        };
        let next = [world_next, wakeup].into_iter().flatten().min();
        if !self.advance(next, deadline)? {
            return Ok(false);
        }
        if self.paused_until.is_some_and(|t| t <= self.now) {
            self.paused_until = None;
        }
        self.tick();
        Ok(true)
    }

    /// Wakes the operator (every leading replica) now, unless it is paused.
    fn tick(&mut self) {
        if self.replicas.is_some() {
            self.tick_replicas(true);
        } else if self.paused_until.is_none() {
            self.deliver(Input::Tick);
        }
    }

    /// Moves time to `next` (the earliest thing due) unless it is past `deadline`, delivers
    /// the world events due by then and counts one more input at this instant (a livelock past
    /// [`SimConfig::max_inputs_per_instant`]). `false` when nothing is due by `deadline`.
    pub(crate) fn advance(
        &mut self,
        next: Option<Timestamp>,
        deadline: Timestamp,
    ) -> Result<bool, SimError> {
        let Some(next) = next else {
            return Ok(false);
        };
        if next > deadline {
            return Ok(false);
        }
        if next > self.now {
            self.now = next;
            self.inputs_at_instant = 0;
        }
        let due: Vec<(Timestamp, u64)> = self
            .world
            .keys()
            .take_while(|(t, _)| *t <= self.now)
            .copied()
            .collect();
        for k in due {
            if let Some(e) = self.world.remove(&k) {
                self.world_event(e);
            }
        }
        self.drain_api_events();
        self.inputs_at_instant += 1;
        if self.inputs_at_instant > self.config.max_inputs_per_instant {
            return Err(SimError::Livelock {
                at: self.now,
                limit: self.config.max_inputs_per_instant,
                due: self
                    .operator
                    .wakeups()
                    .into_iter()
                    .filter(|(_, t)| *t <= self.now)
                    .map(|(n, _)| n.to_string())
                    .collect(),
            });
        }
        Ok(true)
    }

    /// Moves the clock to `t` (when it is later than now) and wakes the operator there; run
    /// [`Sim::step`] afterwards to handle what follows.
    pub fn advance_to(&mut self, t: Timestamp) {
        if t > self.now {
            self.now = t;
            self.inputs_at_instant = 0;
            self.tick();
        }
    }

    /// Runs until nothing is due before `now + d`, then sets the clock to `now + d`.
    pub fn run_for(&mut self, d: SignedDuration) -> Result<(), SimError> {
        let deadline = lifecycle_add(self.now, d);
        while self.step(deadline)? {}
        if deadline > self.now {
            self.now = deadline;
            self.inputs_at_instant = 0;
            self.tick();
            while self.step(deadline)? {}
        }
        Ok(())
    }

    /// Runs until `done` holds (checked after every step) or `limit` of virtual time passed.
    /// Returns whether `done` held.
    pub fn run_until(
        &mut self,
        limit: SignedDuration,
        mut done: impl FnMut(&Sim) -> bool,
    ) -> Result<bool, SimError> {
        let deadline = lifecycle_add(self.now, limit);
        loop {
            if done(self) {
                return Ok(true);
            }
            if !self.step(deadline)? {
                return Ok(done(self));
            }
        }
    }

    /// Pods not bound to a node, by key.
    pub fn pending_pods(&self) -> Vec<String> {
        self.api
            .pods
            .values()
            .filter(|p| p.node_name.is_none())
            .map(Pod::key)
            .collect()
    }

    /// Provider ids of instances no NodeClaim refers to.
    pub fn leaked_instances(&self) -> Vec<String> {
        let referenced: BTreeSet<&str> = self
            .api
            .node_claims
            .values()
            .filter_map(|c| c.status.provider_id.as_deref())
            .collect();
        let mut leaked = Vec::new();
        self.provider.for_each_instance(|i| {
            if let Some(p) = i.status.provider_id.as_deref()
                && !referenced.contains(p)
            {
                leaked.push(p.to_string());
            }
        });
        leaked
    }
}

fn input_summary(input: &Input) -> String {
    match input {
        Input::NodePoolApplied(o) => format!("NodePoolApplied {}", o.name()),
        Input::NodeClaimApplied(o) => format!("NodeClaimApplied {}", o.name()),
        Input::NodeApplied(o) => format!("NodeApplied {}", o.name),
        Input::PodApplied(o) => format!("PodApplied {}", o.key()),
        Input::CloudResult { id, response } => format!(
            "CloudResult {id} {}",
            match response {
                CloudResponse::Create(r) => format!("create ok={}", r.is_ok()),
                CloudResponse::Delete(r) => format!("delete {r:?}"),
                CloudResponse::Get(r) => format!("get ok={}", r.is_ok()),
                CloudResponse::List(_) => "list".to_string(),
                CloudResponse::InstanceTypes(_) => "instance types".to_string(),
                CloudResponse::IsDrifted(r) => format!("drifted {r:?}"),
            }
        ),
        other => format!("{other:?}").chars().take(120).collect(),
    }
}

/// Whether `requests` fit on a node of `allocatable` beside pods requesting `used`: exactly
/// `ResourceList::fits(requests, &allocatable.sub(used))`, without building the difference.
/// A Node pods may bind to (see [`Sim::bind_pending`]).
struct OpenNode {
    name: String,
    /// Its room: `None` when something already overflows it.
    free: Option<ResourceList>,
}

/// What is left of `allocatable` beside `used`, over the names of both; `None` when an entry is
/// negative (an overcommitted Node takes no pod, as the scheduler's `fits` refuses a total with
/// any negative entry). A name of neither list has no room.
fn free_room(allocatable: &ResourceList, used: Option<&ResourceList>) -> Option<ResourceList> {
    let mut free = allocatable.clone();
    if let Some(used) = used {
        for (name, q) in used.iter() {
            free.insert(name, free.get_or_zero(name) - q);
        }
    }
    let overflows = free.iter().any(|(_, q)| q.is_negative());
    (!overflows).then_some(free)
}

fn lifecycle_add(t: Timestamp, d: SignedDuration) -> Timestamp {
    t.checked_add(d).unwrap_or(Timestamp::MAX)
}

/// Polls a future that never waits (the fake provider's) to completion.
fn block_on<F: Future>(future: F) -> F::Output {
    let mut future = std::pin::pin!(future);
    let mut cx = Context::from_waker(Waker::noop());
    loop {
        if let Poll::Ready(v) = future.as_mut().poll(&mut cx) {
            return v;
        }
    }
}

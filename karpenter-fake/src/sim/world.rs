//! The parts of the world around the operator that faults and workloads need: the DaemonSet
//! controller (a daemon pod on every node it fits), pods that complete after running for a
//! while (Jobs), the PodDisruptionBudget controller (`status.disruptionsAllowed`), Nodes
//! removed behind the operator's back, and the injected cloud faults that live in the shell
//! (a call whose answer is lost to a timeout, a launch whose node never registers).
//!
//! It also records what the invariants of [`super::chaos`] look at ([`Observations`]).

use std::collections::{BTreeMap, BTreeSet};

use jiff::SignedDuration;
use karpenter_core::api::NodeClaim;
use karpenter_core::cloud::CloudProviderError;
use karpenter_core::labels;
use karpenter_core::lifecycle::Node;
use karpenter_core::lifecycle::ObjectKind;
use karpenter_core::model::Timestamp;
use karpenter_core::model::{IntOrPercent, OwnerReference, Pod, PodPhase};
use karpenter_core::operator::{Action, CloudResponse, Input};
use karpenter_core::taints::TaintEffect;

use super::{ApiError, Sim, WorldEvent, lifecycle_add};

/// A pod annotation read by the simulator: a bound pod carrying it completes (phase
/// `Succeeded`, then deleted as a finished Job's pod is) once it has run for this long
/// (a Kubernetes duration such as `90s` or `15m`).
pub const RUN_FOR_ANNOTATION: &str = "sim.karpenter-rs.io/run-for";

/// The duration of a pod's [`RUN_FOR_ANNOTATION`], if it has a valid one.
pub(super) fn run_for(pod: &Pod) -> Option<SignedDuration> {
    let text = pod.annotations.get(RUN_FOR_ANNOTATION)?;
    karpenter_core::api::Duration::parse(text)
        .ok()
        .map(|d| d.as_signed_duration())
}

/// Faults that live in the shell rather than in the provider.
#[derive(Debug, Clone, Default)]
pub(super) struct FaultState {
    /// The next this many cloud calls take effect, but their answer is lost: the operator is
    /// told the call timed out.
    pub(super) timeouts: usize,
    /// The next this many successful launches never register a Node.
    pub(super) lost_launches: usize,
    /// The next this many updates (NodeClaim updates, Node patches, NodePool status) fail
    /// with a 409 Conflict, as when another writer changed the object first.
    pub(super) conflicts: usize,
    /// The next this many API writes fail with a server error; nothing is written.
    pub(super) write_errors: usize,
    /// Watch events are held back until this instant...
    pub(super) lag_until: Option<Timestamp>,
    /// ...by this long each.
    pub(super) lag: SignedDuration,
    /// When the last held-back watch event is delivered (later events queue behind it, so
    /// the watch never reorders).
    pub(super) last_release: Option<Timestamp>,
}

impl FaultState {
    /// Whether `launched` is a launch whose node never registers (consumes one).
    pub(super) fn take_lost_launch(&mut self, _launched: &NodeClaim) -> bool {
        if self.lost_launches == 0 {
            return false;
        }
        self.lost_launches -= 1;
        true
    }

    /// The error an injected API fault gives `action`, if one is due (consumes it). Only
    /// writes fail; conflicts only hit updates, which carry a `resourceVersion`.
    pub(super) fn take_write_fault(&mut self, action: &Action) -> Option<ApiError> {
        let (kind, name, update) = match action {
            Action::CreateNodeClaim(c) => (ObjectKind::NodeClaim, c.name().to_string(), false),
            Action::UpdateNodeClaim(c) => (ObjectKind::NodeClaim, c.name().to_string(), true),
            Action::DeleteNodeClaim { name } => (ObjectKind::NodeClaim, name.clone(), false),
            Action::PatchNode(u) => (ObjectKind::Node, u.node_name.clone(), true),
            Action::DeleteNode { name } => (ObjectKind::Node, name.clone(), false),
            Action::UpdateNodePoolStatus { name, .. } => (ObjectKind::NodePool, name.clone(), true),
            _ => return None,
        };
        if update && self.conflicts > 0 {
            self.conflicts -= 1;
            return Some(ApiError::Conflict { kind, name });
        }
        if self.write_errors > 0 {
            self.write_errors -= 1;
            return Some(ApiError::ServerError { kind, name });
        }
        None
    }

    /// When a watch event produced `now` reaches the operator, if not at once: `lag` later
    /// while a watch lag lasts, and never before an event held back earlier.
    pub(super) fn watch_release(&mut self, now: Timestamp) -> Option<Timestamp> {
        let lagging = self.lag_until.is_some_and(|until| now < until);
        let queued = self.last_release.filter(|t| *t > now);
        let at = match (lagging, queued) {
            (true, q) => Some(lifecycle_add(now, self.lag).max(q.unwrap_or(now))),
            (false, q) => q,
        };
        if at.is_some() {
            self.last_release = at;
        }
        at
    }

    /// `response`, or a timeout error in its place when a timeout is injected.
    pub(super) fn maybe_time_out(&mut self, response: CloudResponse) -> CloudResponse {
        if self.timeouts == 0 {
            return response;
        }
        self.timeouts -= 1;
        let e = || CloudProviderError::timeout("injected: the call timed out after taking effect");
        match response {
            CloudResponse::Create(_) => CloudResponse::Create(Err(e())),
            CloudResponse::Delete(_) => CloudResponse::Delete(Err(e())),
            CloudResponse::Get(_) => CloudResponse::Get(Err(e())),
            CloudResponse::List(_) => CloudResponse::List(Err(e())),
            CloudResponse::InstanceTypes(_) => CloudResponse::InstanceTypes(Err(e())),
            CloudResponse::IsDrifted(_) => CloudResponse::IsDrifted(Err(e())),
        }
    }
}

/// A pod the Eviction API let go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EvictionRecord {
    /// When.
    pub at: karpenter_core::model::Timestamp,
    /// The pod (`namespace/name`).
    pub pod: String,
    /// The node it was evicted from.
    pub node: String,
    /// Whether it carried `karpenter.sh/do-not-disrupt: "true"`.
    pub do_not_disrupt: bool,
}

/// What the world saw the operator do, kept for invariants.
#[derive(Debug, Clone, Default)]
pub struct Observations {
    /// NodeClaims `create` was called for although the API already held their instance
    /// (`status.providerID` set): a NodeClaim launched twice.
    pub double_launches: Vec<String>,
    /// Every instance launched: provider id → the NodeClaim it was launched for.
    pub launched: BTreeMap<String, String>,
    /// Evictions granted, in order (drained by whoever checks them).
    pub evictions: Vec<EvictionRecord>,
    /// Provider ids of instances whose node was disrupted involuntarily (an interruption, a
    /// Node deleted by someone else, a launch that never registered).
    pub involuntary: BTreeSet<String>,
    /// When each launch whose node never registers (an injected fault) succeeded, in order.
    pub lost_launches: Vec<karpenter_core::model::Timestamp>,
    /// When each injected failing cloud call (throttled or timed out) was injected, one entry
    /// per call.
    pub failed_calls: Vec<karpenter_core::model::Timestamp>,
    /// Writes and cloud calls carried out by a replica that did not hold the Lease then, or
    /// while another replica led too (two replicas only).
    pub non_leader_acts: Vec<super::NonLeaderAct>,
}

impl Sim {
    /// Makes the next `n` updates the operator asks for (NodeClaim updates, Node patches,
    /// NodePool status) fail with 409 Conflict, as when another writer got there first.
    pub fn conflict_next_updates(&mut self, n: usize) {
        self.faults.conflicts += n;
    }

    /// Makes the next `n` API writes the operator asks for fail with a server error.
    pub fn fail_next_writes(&mut self, n: usize) {
        self.faults.write_errors += n;
    }

    /// Holds every watch event back by `lag` for the next `lasting` (a slow or lagging watch;
    /// events keep their order).
    pub fn lag_watch(&mut self, lag: SignedDuration, lasting: SignedDuration) {
        self.faults.lag = lag;
        self.faults.lag_until = Some(lifecycle_add(self.now, lasting));
    }

    /// The watch restarts and lists again, as after an expired watch (410 Gone): the events
    /// held back by a lag are dropped, except deletions of objects that are gone (a relist
    /// reports those as deletions), and every object is delivered again.
    pub fn relist(&mut self) {
        self.drain_api_events();
        let held: Vec<(Timestamp, u64)> = self
            .world
            .iter()
            .filter(|(_, e)| matches!(e, WorldEvent::Deliver(_)))
            .map(|(k, _)| *k)
            .collect();
        self.faults.lag_until = None;
        self.faults.last_release = None;
        for k in held {
            if let Some(WorldEvent::Deliver(input)) = self.world.remove(&k)
                && self.is_gone(&input)
            {
                self.push_watch(*input);
            }
        }
        for input in self.api.list_all() {
            self.push_watch(input);
        }
    }

    /// Whether `input` is the deletion of an object the API no longer holds.
    fn is_gone(&self, input: &Input) -> bool {
        let api = &self.api;
        match input {
            Input::NodePoolDeleted(n) => !api.node_pools.contains_key(n),
            Input::NodeClaimDeleted(n) => !api.node_claims.contains_key(n),
            Input::NodeDeleted(n) => !api.nodes.contains_key(n),
            Input::PodDeleted(k) => !api.pods.contains_key(k),
            Input::DaemonSetDeleted(k) => !api.daemonsets.contains_key(k),
            Input::PdbDeleted(k) => !api.pdbs.contains_key(k),
            Input::VolumeAttachmentDeleted(n) => !api.volume_attachments.contains_key(n),
            _ => false,
        }
    }

    /// Makes the next `n` cloud calls take effect but answer with a timeout (the answer is
    /// lost on the way back: a launched instance the operator does not learn about, a delete
    /// it believes failed).
    pub fn time_out_next_calls(&mut self, n: usize) {
        self.faults.timeouts += n;
    }

    /// Makes the next `n` successful launches never register a Node (the kubelet never
    /// starts).
    pub fn lose_next_launches(&mut self, n: usize) {
        self.faults.lost_launches += n;
    }

    /// Removes a Node from the API at once, finalizers and all (as `kubectl delete --force`
    /// after a finalizer was stripped, or a cluster restore): its pods are deleted by the pod
    /// garbage collector (and recreated by their workloads); the kubelet registers the Node
    /// again if its instance still runs. Returns whether the Node existed.
    pub fn remove_node_behind_back(&mut self, name: &str) -> bool {
        let Some(node) = self.api.remove_node_now(name) else {
            return false;
        };
        self.api
            .events
            .push_back(Input::NodeDeleted(name.to_string()));
        self.observed.involuntary.insert(node.provider_id.clone());
        let pods: Vec<String> = self
            .api
            .pods
            .values()
            .filter(|p| p.node_name.as_deref() == Some(name))
            .map(Pod::key)
            .collect();
        for key in pods {
            self.remove_pod(&key);
        }
        let instance = self.provider.instance(&node.provider_id);
        if let Some(instance) = instance {
            let at = lifecycle_add(self.now, self.config.register_delay);
            self.schedule(at, WorldEvent::Register(Box::new(instance)));
        }
        self.drain_api_events();
        true
    }

    /// Deletes a Node through the API as a user would (`kubectl delete node`): it gets a
    /// deletion timestamp and the operator's termination takes over. Returns whether the Node
    /// existed.
    pub fn delete_node_as_user(&mut self, name: &str) -> bool {
        let Some(pid) = self.api.nodes.get(name).map(|n| n.provider_id.clone()) else {
            return false;
        };
        self.observed.involuntary.insert(pid);
        let ok = self.api.delete_node(name, self.now).is_ok();
        self.drain_api_events();
        ok
    }

    /// The price per hour of every instance the provider runs now (the offering price of its
    /// instance type, zone and capacity type; instances whose offering is unknown count 0).
    pub fn hourly_cost(&self) -> f64 {
        // Summed in launch order, as the figures were always summed.
        let mut total = 0.0;
        for price in self.provider.instance_prices() {
            total += price;
        }
        total
    }

    pub(super) fn observe_create(&mut self, claim: &NodeClaim) {
        let known = self
            .api
            .node_claims
            .get(claim.name())
            .and_then(|c| c.status.provider_id.as_ref());
        if known.is_some() {
            self.observed.double_launches.push(claim.name().to_string());
        }
    }

    pub(super) fn observe_launched(&mut self, launched: &NodeClaim) {
        if let Some(pid) = &launched.status.provider_id {
            self.observed
                .launched
                .insert(pid.clone(), launched.name().to_string());
        }
    }

    pub(super) fn observe_eviction(&mut self, pod: &Pod) {
        self.observed.evictions.push(EvictionRecord {
            at: self.now,
            pod: pod.key(),
            node: pod.node_name.clone().unwrap_or_default(),
            do_not_disrupt: pod
                .annotations
                .get(labels::DO_NOT_DISRUPT_ANNOTATION)
                .is_some_and(|v| v == "true"),
        });
    }

    /// Starts a pod of every DaemonSet that fits `node` on it (the DaemonSet controller).
    pub(super) fn start_daemon_pods(&mut self, node: &Node) {
        let daemonsets: Vec<_> = self.api.daemonsets.values().cloned().collect();
        for ds in daemonsets {
            if !daemon_fits(&ds.pod, node) {
                continue;
            }
            let mut pod = ds.pod.clone();
            pod.namespace = ds.namespace.clone();
            pod.name = format!("{}-{}", ds.name, node.name);
            pod.uid = format!("uid-pod-{}/{}", pod.namespace, pod.name);
            pod.owner = Some(
                OwnerReference::new("apps/v1", "DaemonSet", ds.name.clone()).with_controller(true),
            );
            pod.node_name = Some(node.name.clone());
            pod.phase = PodPhase::Running;
            pod.creation_timestamp = self.now;
            pod.start_time = Some(self.now);
            if !self.api.pods.contains_key(&pod.key()) {
                self.api.put_pod(pod);
            }
        }
    }

    /// A pod that ran for its time completes and goes (a finished Job's pod).
    pub(super) fn complete_pod(&mut self, key: &str, uid: &str) {
        let Some(pod) = self.api.pods.get(key) else {
            return;
        };
        if pod.uid != uid || pod.node_name.is_none() {
            return;
        }
        let mut done = pod.clone();
        done.phase = PodPhase::Succeeded;
        self.api.put_pod(done);
        self.api.delete_pod(key);
        self.nominations.remove(key);
    }

    /// The Eviction API lowers `disruptionsAllowed` of the budgets covering an evicted pod at
    /// once (the PDB controller recomputes it later).
    pub(super) fn consume_pdb_disruption(&mut self, pod: &Pod) {
        let keys: Vec<String> = self
            .api
            .pdbs
            .iter()
            .filter(|(_, b)| b.selects(pod))
            .map(|(k, _)| k.clone())
            .collect();
        for k in keys {
            if let Some(mut pdb) = self.api.pdbs.get(&k).cloned() {
                pdb.disruptions_allowed = (pdb.disruptions_allowed - 1).max(0);
                self.api.put_pdb(pdb);
            }
        }
    }

    /// The PodDisruptionBudget controller: `disruptionsAllowed` = healthy covered pods (bound
    /// and running) minus the pods that must stay healthy; recomputed when pods changed.
    pub(super) fn refresh_pdbs(&mut self) {
        if self.api.pdbs.is_empty() || self.pdb_rv == self.api.rv() {
            return;
        }
        let keys: Vec<String> = self.api.pdbs.keys().cloned().collect();
        for k in keys {
            let Some(pdb) = self.api.pdbs.get(&k) else {
                continue;
            };
            let covered: Vec<&Pod> = self
                .api
                .pods
                .values()
                .filter(|p| pdb.selects(p) && !p.is_terminal())
                .collect();
            let expected = i64::try_from(covered.len()).unwrap_or(i64::MAX);
            let healthy = i64::try_from(
                covered
                    .iter()
                    .filter(|p| p.node_name.is_some() && p.phase == PodPhase::Running)
                    .count(),
            )
            .unwrap_or(i64::MAX);
            let scaled = |v: IntOrPercent| match v {
                IntOrPercent::Int(n) => i64::from(n),
                IntOrPercent::Percent(p) => (i64::from(p) * expected + 99) / 100,
            };
            let desired = match (pdb.min_available, pdb.max_unavailable) {
                (Some(min), _) => scaled(min),
                (None, Some(max)) => expected - scaled(max),
                (None, None) => expected,
            };
            let allowed = i32::try_from((healthy - desired).max(0)).unwrap_or(i32::MAX);
            if allowed != pdb.disruptions_allowed {
                let mut next = pdb.clone();
                next.disruptions_allowed = allowed;
                self.api.put_pdb(next);
            }
        }
        self.pdb_rv = self.api.rv();
    }
}

/// Whether a daemon pod runs on `node`: its node selector matches (node affinity is not
/// looked at) and it tolerates the node's
/// `NoSchedule`/`NoExecute` taints other than the ones a daemon tolerates anyway (not ready,
/// unregistered, disrupted).
fn daemon_fits(pod: &Pod, node: &Node) -> bool {
    if !pod
        .node_selector
        .iter()
        .all(|(k, v)| node.labels.get(k) == Some(v))
    {
        return false;
    }
    node.taints.iter().all(|t| {
        t.effect == TaintEffect::PreferNoSchedule
            || t.key.starts_with("node.kubernetes.io/")
            || t.key.starts_with("karpenter.sh/")
            || pod.tolerations.iter().any(|tol| tol.tolerates(t))
    })
}

//! Disruption candidates (upstream `GetCandidates` / `NewCandidate`): which nodes a disruption
//! method may consider, the reason every other node is not a candidate, pod classification,
//! PodDisruptionBudget checks and the orders in which the methods walk their candidates.
//!
//! [`get_candidates`] applies upstream's `NewCandidate` rules ([`new_candidate`]) to every node
//! of a [`ClusterSnapshot`] and returns both the candidates and the rejections (a plan can show
//! the latter as "blocked"). Methods then filter the candidates with their own predicate and
//! order them with [`sort_by_savings_ratio`], [`interleave_by_node_pool`] or [`sort_for_drift`].

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use crate::api::{NodeClaim, find_condition};
use crate::model::{InstanceType, Pod, PodDisruptionBudget, Timestamp};
use crate::state::{ClusterSnapshot, StateNode};

use super::facts::{NodeFacts, node_do_not_disrupt};
pub use super::pods::{
    DoNotDisrupt, is_active, is_disruptable, is_do_not_disrupt_active, is_evictable,
    is_owned_by_statefulset, is_reschedulable, tolerates_disrupted_taint,
};

/// The disrupted taint, defined with the other taints in [`crate::taints`].
pub use crate::taints::disrupted_taint;

use super::cost;

// ---------------------------------------------------------------------------------------------
// Disruption class
// ---------------------------------------------------------------------------------------------

/// How a method disrupts, which decides whether pods that block eviction block candidacy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum DisruptionClass {
    /// Emptiness and consolidation: a node whose pods cannot be evicted (an active
    /// `karpenter.sh/do-not-disrupt` pod, a blocking PDB) is never a candidate.
    Graceful,
    /// Drift: a node whose NodeClaim has a `terminationGracePeriod` stays a candidate even if its
    /// pods block eviction, because the grace period bounds the drain.
    Eventual,
}

// ---------------------------------------------------------------------------------------------
// Pod classification (upstream `utils/pod/scheduling.go`; the PDB-free predicates are in
// `pods`, re-exported here)
// ---------------------------------------------------------------------------------------------

/// Whether the scheduling simulation should find a new home for the pod now (upstream's
/// `IsCurrentlyReschedulable`): reschedulable, no active do-not-disrupt annotation, and not
/// fully blocked by a PDB (a pod that will not be evicted does not need capacity yet).
pub fn is_currently_reschedulable(pod: &Pod, pdbs: &PdbLimits, now: Timestamp) -> bool {
    is_reschedulable(pod)
        && !is_do_not_disrupt_active(pod, now).is_active()
        && !pdbs.is_fully_blocked(pod, now)
}

// ---------------------------------------------------------------------------------------------
// PodDisruptionBudgets (upstream `utils/pdb/pdb.go`)
// ---------------------------------------------------------------------------------------------

/// Why PodDisruptionBudgets prevent evicting a set of pods. PDBs are named `namespace/name`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PdbError {
    /// The PDB covering a pod blocks its eviction.
    #[error("pdb prevents pod evictions (PodDisruptionBudget=[{pdb}])")]
    Blocked {
        /// The PDB.
        pdb: String,
    },
    /// More than one PDB covers a pod, which the eviction API refuses.
    #[error(
        "eviction does not support multiple PDBs (PodDisruptionBudget(s)=[{}])",
        pdbs.join(" ")
    )]
    Multiple {
        /// The PDBs covering the pod, in snapshot order.
        pdbs: Vec<String>,
    },
}

/// What makes a PDB block an eviction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BlockingMode {
    /// `status.disruptionsAllowed == 0` (the candidate check).
    ZeroDisruptions,
    /// The PDB can never allow an eviction (the simulation's check).
    FullyBlocking,
}

/// A snapshot of the cluster's PodDisruptionBudgets (upstream's `pdb.Limits`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PdbLimits {
    pdbs: Vec<PodDisruptionBudget>,
}

fn pdb_key(pdb: &PodDisruptionBudget) -> String {
    format!("{}/{}", pdb.namespace, pdb.name)
}

impl PdbLimits {
    /// The limits of `pdbs`.
    pub fn new(pdbs: &[PodDisruptionBudget]) -> PdbLimits {
        PdbLimits {
            pdbs: pdbs.to_vec(),
        }
    }

    /// The PDBs covering `pod` (same namespace, selector matches), in snapshot order.
    pub fn matching<'a>(&'a self, pod: &'a Pod) -> impl Iterator<Item = &'a PodDisruptionBudget> {
        self.pdbs.iter().filter(move |pdb| pdb.selects(pod))
    }

    fn check_pod(&self, pod: &Pod, now: Timestamp, mode: BlockingMode) -> Result<(), PdbError> {
        if !is_evictable(pod, now) {
            return Ok(());
        }
        let matching: Vec<&PodDisruptionBudget> = self.matching(pod).collect();
        if matching.len() > 1 {
            return Err(PdbError::Multiple {
                pdbs: matching.into_iter().map(pdb_key).collect(),
            });
        }
        let Some(pdb) = matching.first() else {
            return Ok(());
        };
        if pdb.unhealthy_pod_eviction_policy_always_allow && !pod.ready {
            return Ok(());
        }
        let blocks = match mode {
            BlockingMode::ZeroDisruptions => pdb.disruptions_allowed == 0,
            BlockingMode::FullyBlocking => pdb.is_fully_blocking(),
        };
        if blocks {
            Err(PdbError::Blocked { pdb: pdb_key(pdb) })
        } else {
            Ok(())
        }
    }

    /// Whether every pod could be evicted (upstream's `CanEvictPods`), checking pods in order
    /// and reporting the first that cannot. Pods that would not be evicted (see
    /// [`is_evictable`]) pass; a pod covered by more than one PDB fails; a pod covered by a PDB
    /// with `unhealthyPodEvictionPolicy: AlwaysAllow` passes when it is not ready; otherwise the
    /// pod fails when its PDB's `status.disruptionsAllowed` is 0.
    pub fn can_evict_pods(&self, pods: &[Pod], now: Timestamp) -> Result<(), PdbError> {
        pods.iter()
            .try_for_each(|pod| self.check_pod(pod, now, BlockingMode::ZeroDisruptions))
    }

    /// Whether PDBs block evicting `pod` for good: as [`PdbLimits::can_evict_pods`] but a PDB
    /// only blocks when it is fully blocking (`maxUnavailable` 0 or `0%`, or `minAvailable`
    /// `100%`), whatever its current `disruptionsAllowed`.
    pub fn is_fully_blocked(&self, pod: &Pod, now: Timestamp) -> bool {
        self.check_pod(pod, now, BlockingMode::FullyBlocking)
            .is_err()
    }
}

// ---------------------------------------------------------------------------------------------
// Candidate errors (upstream `NewCandidate`)
// ---------------------------------------------------------------------------------------------

/// Why a node's pods prevent its disruption (upstream's `PodBlockEvictionError`). Eventual
/// methods ignore these for NodeClaims with a `terminationGracePeriod`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PodBlockEvictionError {
    /// An active pod has an active `karpenter.sh/do-not-disrupt` annotation.
    #[error("pod has \"karpenter.sh/do-not-disrupt\" annotation (Pod={pod})")]
    DoNotDisrupt {
        /// The pod, `namespace/name`.
        pod: String,
    },
    /// A PodDisruptionBudget blocks the eviction of a pod.
    #[error(transparent)]
    Pdb(#[from] PdbError),
}

/// Why a node is not a disruption candidate. The messages are upstream's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CandidateError {
    /// A command in the orchestration queue already disrupts the node.
    #[error("candidate is already being disrupted")]
    AlreadyBeingDisrupted,
    /// The node has no NodeClaim.
    #[error("node isn't managed by karpenter")]
    NotManaged,
    /// The NodeClaim has no Node yet.
    #[error("nodeclaim does not have an associated node")]
    NoNode,
    /// The Node lacks `karpenter.sh/initialized=true`.
    #[error("node isn't initialized")]
    NotInitialized,
    /// The node is being deleted or is marked for deletion.
    #[error("node is deleting or marked for deletion")]
    Deleting,
    /// The node is nominated for pending pods.
    #[error("node is nominated for a pending pod")]
    Nominated,
    /// The node carries `karpenter.sh/do-not-disrupt: "true"`.
    #[error("disruption is blocked through the \"karpenter.sh/do-not-disrupt\" annotation")]
    DoNotDisruptNode,
    /// The node has no `karpenter.sh/nodepool` label.
    #[error("node doesn't have required label (label=karpenter.sh/nodepool)")]
    MissingNodePoolLabel,
    /// The NodePool does not exist or has no instance types.
    #[error("nodepool not found (NodePool={node_pool})")]
    NodePoolNotFound {
        /// The NodePool label's value.
        node_pool: String,
    },
    /// The node's pods block eviction.
    #[error(transparent)]
    PodBlockEviction(#[from] PodBlockEvictionError),
}

impl CandidateError {
    /// The message of the `DisruptionBlocked` event upstream publishes for this rejection (on
    /// the Node, and on the NodeClaim when there is one): the error sentence-cased, with
    /// `NodePool not found (NodePool=x)` spelled as upstream. `None` for a node already being
    /// disrupted, which publishes nothing.
    pub fn event_message(&self) -> Option<String> {
        match self {
            CandidateError::AlreadyBeingDisrupted => None,
            CandidateError::NodePoolNotFound { node_pool } => {
                Some(format!("NodePool not found (NodePool={node_pool})"))
            }
            other => Some(sentence_case(&other.to_string())),
        }
    }

    /// Whether the rejection comes from the node's pods (what eventual methods may ignore).
    pub fn is_pod_block_eviction(&self) -> bool {
        matches!(self, CandidateError::PodBlockEviction(_))
    }
}

fn sentence_case(text: &str) -> String {
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// Checks the node itself (upstream's `ValidateNodeDisruptable`), first failure wins: managed,
/// has a Node, initialized, not deleting or marked, not nominated at `now`, no
/// `karpenter.sh/do-not-disrupt: "true"` annotation on the Node (other values do not block),
/// and a `karpenter.sh/nodepool` label. Annotations and labels are the Node's once it is
/// registered, the NodeClaim's before ([`StateNode::annotations`], [`StateNode::labels`]).
pub fn validate_node_disruptable(node: &StateNode, now: Timestamp) -> Result<(), CandidateError> {
    check_node(
        node,
        node.initialized(),
        node_do_not_disrupt(node),
        node.nodepool(),
        now,
    )
}

/// [`validate_node_disruptable`] with the node's initialized state, do-not-disrupt annotation
/// and NodePool label already read.
fn check_node(
    node: &StateNode,
    initialized: bool,
    do_not_disrupt: bool,
    nodepool: Option<&str>,
    now: Timestamp,
) -> Result<(), CandidateError> {
    if node.node_claim.is_none() {
        return Err(CandidateError::NotManaged);
    }
    if node.node.is_none() {
        return Err(CandidateError::NoNode);
    }
    if !initialized {
        return Err(CandidateError::NotInitialized);
    }
    if node.is_deleting() {
        return Err(CandidateError::Deleting);
    }
    if node.is_nominated(now) {
        return Err(CandidateError::Nominated);
    }
    if do_not_disrupt {
        return Err(CandidateError::DoNotDisruptNode);
    }
    if nodepool.is_none() {
        return Err(CandidateError::MissingNodePoolLabel);
    }
    Ok(())
}

/// Checks the node's pods (upstream's `ValidatePodsDisruptable`): first any pod that is not
/// disruptable ([`is_disruptable`]: active with an active do-not-disrupt annotation — every
/// kind of pod, DaemonSet and mirror pods included), then the PDBs over all pods
/// ([`PdbLimits::can_evict_pods`]).
pub fn validate_pods_disruptable(
    pods: &[Pod],
    pdbs: &PdbLimits,
    now: Timestamp,
) -> Result<(), PodBlockEvictionError> {
    if let Some(pod) = pods.iter().find(|p| !is_disruptable(p, now)) {
        return Err(PodBlockEvictionError::DoNotDisrupt { pod: pod.key() });
    }
    pdbs.can_evict_pods(pods, now)?;
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Candidates (upstream `NewCandidate`, `disruption/types.go` `Candidate`)
// ---------------------------------------------------------------------------------------------

/// A node that a disruption method may disrupt.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Candidate {
    /// The node (with its NodeClaim and pods).
    pub node: Arc<StateNode>,
    /// The NodePool (`karpenter.sh/nodepool` label); the pool exists in the snapshot.
    pub node_pool: String,
    /// The instance type named by `node.kubernetes.io/instance-type`, if the pool offers it.
    pub instance_type: Option<Arc<InstanceType>>,
    /// The `topology.kubernetes.io/zone` label (empty when missing).
    pub zone: String,
    /// The `karpenter.sh/capacity-type` label (empty when missing).
    pub capacity_type: String,
    /// The price of the node's current offering (see [`current_price`]); 0 when unknown.
    pub price: f64,
    /// Positions in `node.pods` of the bound pods that would need a new home
    /// ([`is_reschedulable`]), in node order: the candidate refers to the node's pods rather than
    /// copying them (see [`Candidate::reschedulable_pods`]).
    reschedulable: Arc<[u32]>,
    /// 1 + the sum of the reschedulable pods' positive eviction costs.
    pub reschedule_disruption_cost: f64,
    /// Whether the NodePool is static (`spec.replicas` set).
    pub owned_by_static_node_pool: bool,
}

impl Candidate {
    /// The bound pods that would need a new home ([`is_reschedulable`]), in node order.
    pub fn reschedulable_pods(&self) -> impl Iterator<Item = &Pod> + Clone + '_ {
        self.reschedulable
            .iter()
            .filter_map(|&i| self.node.pods.get(i as usize))
    }

    /// How many of the node's pods would need a new home.
    pub fn reschedulable_pod_count(&self) -> usize {
        self.reschedulable.len()
    }

    /// The node's name.
    pub fn name(&self) -> &str {
        self.node.name()
    }

    /// The node's provider id (the key of the orchestration queue).
    pub fn provider_id(&self) -> &str {
        self.node.provider_id()
    }

    /// The NodeClaim (every candidate has one).
    pub fn node_claim(&self) -> Option<&NodeClaim> {
        self.node.node_claim.as_ref()
    }

    /// Whether disrupting the node displaces nothing that matters: no reschedulable pod has a
    /// positive eviction cost (so a node whose pods all have very negative
    /// `pod-deletion-cost` counts as empty).
    pub fn is_empty(&self) -> bool {
        self.reschedule_disruption_cost <= cost::BASE_COST
    }

    /// Price per unit of disruption: `price / reschedule_disruption_cost`; higher is disrupted
    /// first. For empty nodes this is the price.
    pub fn savings_ratio(&self) -> f64 {
        self.price / self.reschedule_disruption_cost
    }

    /// Upstream's legacy `DisruptionCost`: the summed eviction cost of *all* bound pods times
    /// the NodeClaim's [`cost::lifetime_remaining`] (still used by static-pool scale-down).
    pub fn disruption_cost(&self, now: Timestamp) -> f64 {
        let lifetime = self
            .node_claim()
            .map_or(1.0, |nc| cost::lifetime_remaining(nc, now));
        cost::rescheduling_cost(&self.node.pods) * lifetime
    }

    /// When the NodeClaim's `Drifted` condition last changed (`None` if absent or unparsable).
    pub fn drifted_since(&self) -> Option<Timestamp> {
        self.node_claim()
            .and_then(|nc| {
                find_condition(&nc.status.conditions, crate::api::condition_types::DRIFTED)
            })
            .and_then(|c| cost::parse_time(c.last_transition_time.as_deref()))
    }
}

/// The price of the node's current offering: the first offering of `instance_type` whose zone
/// and capacity type equal the node's labels, available or not; 0 without an instance type,
/// without a match, or for a NaN price.
pub fn current_price(instance_type: Option<&InstanceType>, zone: &str, capacity_type: &str) -> f64 {
    instance_type
        .and_then(|it| {
            it.offerings
                .iter()
                .find(|o| o.zone() == zone && o.capacity_type() == capacity_type)
        })
        .map(|o| o.price)
        .filter(|p| !p.is_nan())
        .unwrap_or(0.0)
}

/// Builds the candidate for `node` (upstream's `NewCandidate`), applying the rejection rules of
/// upstream `NewCandidate` in order:
///
/// 1. `in_queue(provider id)` → [`CandidateError::AlreadyBeingDisrupted`];
/// 2. [`validate_node_disruptable`];
/// 3. the NodePool is missing from the snapshot or has no instance types →
///    [`CandidateError::NodePoolNotFound`] (the snapshot's pools are taken to be those of the
///    cloud provider in use);
/// 4. [`validate_pods_disruptable`] — ignored when `class` is [`DisruptionClass::Eventual`] and
///    the NodeClaim has a `terminationGracePeriod`.
///
/// A missing or unknown instance type, zone or capacity type does not reject the node.
pub fn new_candidate(
    snapshot: &ClusterSnapshot,
    node: &Arc<StateNode>,
    pdbs: &PdbLimits,
    class: DisruptionClass,
    in_queue: &dyn Fn(&str) -> bool,
    now: Timestamp,
) -> Result<Candidate, CandidateError> {
    if in_queue(node.provider_id()) {
        return Err(CandidateError::AlreadyBeingDisrupted);
    }
    let facts = crate::disruption::facts::of(snapshot, node);
    check_node(
        node,
        facts.initialized,
        facts.do_not_disrupt,
        facts.nodepool.as_deref(),
        now,
    )?;
    let pool_name = facts.nodepool.as_deref().unwrap_or_default();
    snapshot
        .node_pool(pool_name)
        .filter(|p| !p.instance_types.is_empty())
        .ok_or_else(|| CandidateError::NodePoolNotFound {
            node_pool: pool_name.to_string(),
        })?;
    if let Err(e) = validate_pods_disruptable(&node.pods, pdbs, now) {
        let has_grace_period = node
            .node_claim
            .as_ref()
            .is_some_and(|nc| nc.spec.termination_grace_period.is_some());
        if !(class == DisruptionClass::Eventual && has_grace_period) {
            return Err(e.into());
        }
    }
    Ok(describe(snapshot, node, &facts))
}

/// The candidate record of `node` without any candidacy rule: its NodePool, instance type,
/// current price and reschedulable pods. [`new_candidate`] applies the rules first; forceful
/// disruption (expiration) uses this directly.
pub fn describe_candidate(snapshot: &ClusterSnapshot, node: &Arc<StateNode>) -> Candidate {
    describe(
        snapshot,
        node,
        &crate::disruption::facts::of(snapshot, node),
    )
}

/// [`describe_candidate`] from the node's facts.
fn describe(snapshot: &ClusterSnapshot, node: &Arc<StateNode>, facts: &NodeFacts) -> Candidate {
    let pool_name = facts.nodepool.as_deref().unwrap_or_default();
    let pool = snapshot.node_pool(pool_name);
    let instance_type = facts.instance_type.as_deref().and_then(|name| {
        pool.and_then(|p| {
            p.instance_types
                .iter()
                .find(|it| it.name() == name)
                .cloned()
        })
    });
    let zone = facts.zone.as_deref().unwrap_or_default().to_string();
    let capacity_type = facts
        .capacity_type
        .as_deref()
        .unwrap_or_default()
        .to_string();
    let price = current_price(instance_type.as_deref(), &zone, &capacity_type);
    Candidate {
        node: Arc::clone(node),
        node_pool: pool_name.to_string(),
        instance_type,
        zone,
        capacity_type,
        price,
        reschedulable: Arc::clone(&facts.reschedulable),
        reschedule_disruption_cost: facts.reschedule_disruption_cost,
        owned_by_static_node_pool: pool.is_some_and(|p| p.node_pool.is_static()),
    }
}

/// A node that is not a candidate, and why.
pub type Rejection = (String, CandidateError);

/// Applies [`new_candidate`] to every node of the snapshot, in snapshot order, with the
/// snapshot's PDBs. Returns the candidates and, for every other node, its name and the reason
/// (callers sort candidates themselves).
pub fn get_candidates(
    snapshot: &ClusterSnapshot,
    class: DisruptionClass,
    in_queue: &dyn Fn(&str) -> bool,
    now: Timestamp,
) -> (Vec<Candidate>, Vec<Rejection>) {
    let pdbs = PdbLimits::new(&snapshot.pdbs);
    let mut candidates = Vec::new();
    let mut rejections = Vec::new();
    for node in &snapshot.nodes {
        match new_candidate(snapshot, node, &pdbs, class, in_queue, now) {
            Ok(c) => candidates.push(c),
            Err(e) => rejections.push((node.name().to_string(), e)),
        }
    }
    (candidates, rejections)
}

// ---------------------------------------------------------------------------------------------
// CapacityBuffer virtual pods (upstream `disruption/emptiness.go`)
// ---------------------------------------------------------------------------------------------

/// Why emptiness leaves an empty node alone: the caller's last provisioning pass placed
/// CapacityBuffer virtual pods on it, so deleting it would only make the provisioner launch the
/// capacity again. The message is that of upstream's `Unconsolidatable` event.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("Node {node:?} has buffer pods")]
#[non_exhaustive]
pub struct BufferPodsError {
    /// The node's name.
    pub node: String,
    /// How many virtual pods the provisioning pass placed on it (at least 1).
    pub count: usize,
}

/// Checks that `candidate` hosts no CapacityBuffer virtual pods according to
/// [`ClusterSnapshot::buffer_pod_counts`] (upstream's `HasBufferPods`, part of emptiness's
/// `ShouldDisrupt`). A zero count, or no entry, is no protection. The check reads the data
/// whatever the `CapacityBuffer` gate: a caller with the gate off has no counts to pass.
pub fn check_buffer_pods(
    snapshot: &ClusterSnapshot,
    candidate: &Candidate,
) -> Result<(), BufferPodsError> {
    match snapshot.buffer_pod_count(candidate.name()) {
        0 => Ok(()),
        count => Err(BufferPodsError {
            node: candidate.name().to_string(),
            count,
        }),
    }
}

// ---------------------------------------------------------------------------------------------
// Ordering (upstream's candidate ordering in `disruption/helpers.go`)
// ---------------------------------------------------------------------------------------------

/// Sorts by [`Candidate::savings_ratio`], highest first (emptiness, multi- and single-node
/// consolidation). Ties are broken by node name ascending: upstream leaves them in cluster-map
/// order, which is unspecified.
pub fn sort_by_savings_ratio(candidates: &mut [Candidate]) {
    candidates.sort_by(|a, b| {
        b.savings_ratio()
            .total_cmp(&a.savings_ratio())
            .then_with(|| a.name().cmp(b.name()))
    });
}

/// Interleaves candidates by NodePool, round robin (single-node consolidation): the first
/// candidate of every pool, then the second of every pool, and so on; each pool keeps its
/// candidates' relative order. Pools in `previously_unseen` (not reached before the previous
/// run timed out) come first, by name, then the other pools by name (upstream's order among
/// them is map order).
pub fn interleave_by_node_pool(
    candidates: Vec<Candidate>,
    previously_unseen: &BTreeSet<String>,
) -> Vec<Candidate> {
    interleave(candidates, previously_unseen)
}

/// [`interleave_by_node_pool`] over owned or borrowed candidates.
pub(crate) fn interleave<C: std::borrow::Borrow<Candidate>>(
    candidates: Vec<C>,
    previously_unseen: &BTreeSet<String>,
) -> Vec<C> {
    let total = candidates.len();
    let mut by_pool: BTreeMap<String, std::collections::VecDeque<C>> = BTreeMap::new();
    for c in candidates {
        by_pool
            .entry(c.borrow().node_pool.clone())
            .or_default()
            .push_back(c);
    }
    let (first, rest): (Vec<String>, Vec<String>) = by_pool
        .keys()
        .cloned()
        .partition(|name| previously_unseen.contains(name));
    let order: Vec<String> = first.into_iter().chain(rest).collect();
    let mut result = Vec::with_capacity(total);
    while result.len() < total {
        for name in &order {
            if let Some(c) = by_pool.get_mut(name).and_then(|q| q.pop_front()) {
                result.push(c);
            }
        }
    }
    result
}

/// Orders drift candidates: by the `Drifted` condition's `lastTransitionTime`, oldest first (a
/// missing time counts as oldest, like Go's zero time; ties by node name), then stably moves the
/// candidates without reschedulable pods to the front.
pub fn sort_for_drift(candidates: &mut [Candidate]) {
    candidates.sort_by(|a, b| {
        a.drifted_since()
            .cmp(&b.drifted_since())
            .then_with(|| a.name().cmp(b.name()))
    });
    // A stable sort on a boolean key is a stable partition.
    candidates.sort_by_key(|c| c.reschedulable_pod_count() != 0);
}

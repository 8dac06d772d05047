//! Scheduling simulation (upstream `SimulateScheduling`): would the pods of some candidates fit
//! elsewhere, and on what? Runs the provisioning scheduler ([`crate::scheduling::solve`]) — never
//! a copy of it — over the cluster without the candidates.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};

use crate::api::ConditionStatus;
use crate::model::{ClusterNode, Pod, Timestamp};
use crate::scheduling::solver::{PodHint, Prepared, SolveRequest};
use crate::scheduling::{
    ExistingNodeRef, NodePoolInput, ReservedCapacityMode, Results, SchedulerOptions,
    SchedulingInput,
};
use crate::state::{ClusterSnapshot, StateNode};

use super::candidates::{Candidate, PdbLimits, is_currently_reschedulable};
use super::cost::is_under_consolidate_after;

/// Why a simulation could not run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SimulationError {
    /// A candidate is already being deleted (upstream `errCandidateDeleting`); callers skip it.
    #[error("candidate {0} is already being deleted")]
    CandidateDeleting(String),
    /// A candidate names no node of the snapshot the simulator was prepared over (it comes from
    /// another snapshot).
    #[error("candidate {0} is not a node of the simulated snapshot")]
    UnknownCandidate(String),
    /// The simulation needed more new NodeClaims than the caller's limit
    /// ([`Simulator::simulate_repeated`]) and was stopped there.
    #[error("the simulation needs more than {0} new NodeClaims")]
    TooManyNewNodeClaims(usize),
}

/// The outcome of a simulation.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Simulation {
    /// The scheduler's results over the cluster without the candidates.
    pub results: Results,
    /// Pods that were bound before the simulation (displaced from candidates or deleting nodes)
    /// and found no place, with the reason: any entry blocks the disruption. Pods that were
    /// already pending may stay unschedulable without blocking it.
    pub displaced_errors: BTreeMap<String, String>,
}

impl Simulation {
    /// Upstream's `AllNonPendingPodsScheduled`.
    pub fn all_non_pending_scheduled(&self) -> bool {
        self.displaced_errors.is_empty()
    }
}

/// The scheduler's view of a state node: its Node, or (while unregistered) what its NodeClaim
/// says.
pub fn cluster_node(node: &StateNode) -> ClusterNode {
    let mut out = match (&node.node, &node.node_claim) {
        (Some(n), _) => n.clone(),
        (None, Some(claim)) => {
            let mut n = ClusterNode::new(claim.name());
            n.labels = claim.metadata.labels.clone();
            n.annotations = claim.metadata.annotations.clone();
            n.taints = claim.spec.taints.clone();
            n.taints.extend(claim.spec.startup_taints.iter().cloned());
            n.capacity = claim.status.capacity.clone();
            n.allocatable = claim.status.allocatable.clone();
            n
        }
        (None, None) => ClusterNode::new(""),
    };
    if let Some(claim) = &node.node_claim {
        out.managed = true;
        out.startup_taints = claim.spec.startup_taints.clone();
        if node.node.is_some() && !node.initialized() {
            // Upstream `controllers/state`: before initialization, resources the Node does not
            // report yet (zero) come from the NodeClaim's status.
            fill_unreported(&mut out.capacity, &claim.status.capacity);
            fill_unreported(&mut out.allocatable, &claim.status.allocatable);
        }
    }
    out.initialized = node.initialized();
    out.marked_for_deletion = node.is_deleting();
    out
}

/// Sets every resource of `reported` that is zero or absent to its value in `fallback`.
fn fill_unreported(
    reported: &mut crate::resources::ResourceList,
    fallback: &crate::resources::ResourceList,
) {
    for (name, q) in fallback.iter() {
        if reported.get_or_zero(name).is_zero() && !q.is_zero() {
            reported.insert(name, q);
        }
    }
}

/// [`cluster_node`] without the copy when the stored Node already reads as it would (the usual
/// case: a registered node whose flags are up to date), which `reads_as_is` tells (the node
/// facts' [`stored_node_reads_as_is`](super::facts::stored_node_reads_as_is)).
pub(crate) fn cluster_node_as(node: &StateNode, reads_as_is: bool) -> Cow<'_, ClusterNode> {
    match &node.node {
        Some(n) if reads_as_is => Cow::Borrowed(n),
        _ => Cow::Owned(cluster_node(node)),
    }
}

/// The NodePools a simulation (or a provisioning round) may launch from: ready, dynamic, not
/// being deleted, with instance types; their limits less what the candidates of disruption
/// commands in flight hold ([`held_by_commands`]).
pub fn eligible_node_pools(snapshot: &ClusterSnapshot) -> Vec<NodePoolInput> {
    let held = held_by_commands(snapshot);
    snapshot
        .node_pools
        .iter()
        .filter(|p| {
            p.ready
                && !p.node_pool.is_static()
                && p.node_pool.metadata.deletion_timestamp.is_none()
                && !p.instance_types.is_empty()
        })
        .map(|p| {
            let mut input = NodePoolInput::from_nodepool(&p.node_pool, p.instance_types.clone());
            if let Some(h) = held.get(input.name.as_str()) {
                let mut limits = crate::resources::ResourceList::new();
                for (name, limit) in input.limits.iter() {
                    limits.insert(name, limit - h.get_or_zero(name));
                }
                input.limits = limits;
            }
            input
        })
        .collect()
}

/// Per NodePool, the capacity (and `nodes: 1` each) of the nodes a disruption command marked
/// for deletion whose NodeClaim is not being deleted yet: the candidates of commands still
/// waiting for their replacements.
///
/// Upstream leaves such candidates out of a NodePool's usage from the moment they are marked,
/// so a provisioning round (or another command's replacement) may take their share of the
/// limits while the command waits; when the command then fails (a replacement that never
/// initializes, a command timeout) its candidates are un-marked and count again, and the pool
/// runs over its limits for good. Karpenter-rs keeps their share held until their NodeClaims
/// are deleted, so a failed command cannot leave its pool over its limits; the cost is that
/// new pods of a pool at its limits wait for the candidates' deletion (the replacements'
/// initialization) before they get capacity there.
pub fn held_by_commands(
    snapshot: &ClusterSnapshot,
) -> BTreeMap<&str, crate::resources::ResourceList> {
    let mut held: BTreeMap<&str, crate::resources::ResourceList> = BTreeMap::new();
    for sn in &snapshot.nodes {
        let Some(claim) = &sn.node_claim else {
            continue;
        };
        if !sn.marked_for_deletion || claim.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let Some(pool) = sn.nodepool() else {
            continue;
        };
        let entry = held.entry(pool).or_default();
        entry.add_assign(&cluster_node(sn).capacity);
        entry.add_assign(&crate::resources::ResourceList::from_iter([(
            crate::resources::names::NODES,
            crate::resources::Quantity::from_units(1),
        )]));
    }
    held
}

/// What every simulation over one snapshot shares (upstream `SimulateScheduling`), built once: the
/// scheduler's view of the nodes, the NodePools it may launch from, the pods every simulation must
/// place (pending pods and the pods of deleting nodes), the nodes still inside their
/// `consolidateAfter` window. [`SimulationContext::simulator`] prepares the scheduler over it; each
/// simulation then costs little beyond the pods it moves.
///
/// ```
/// use karpenter_core::disruption::simulate::SimulationContext;
/// use karpenter_core::model::Timestamp;
/// use karpenter_core::scheduling::SchedulerOptions;
/// use karpenter_core::state::ClusterSnapshot;
///
/// let snapshot = ClusterSnapshot::default();
/// let options = SchedulerOptions::default();
/// let context = SimulationContext::new(&snapshot, &options, Timestamp::UNIX_EPOCH);
/// let simulator = context.simulator();
/// let simulation = simulator.simulate(&[], true).expect("no candidate is being deleted");
/// assert!(simulation.all_non_pending_scheduled());
/// assert!(simulation.results.new_node_claims.is_empty());
/// ```
pub struct SimulationContext<'s> {
    snapshot: &'s ClusterSnapshot,
    options: SchedulerOptions,
    now: Timestamp,
    /// NodePools, DaemonSets, namespaces, volumes; `pods` holds the pods every simulation
    /// places (pending pods, then the pods of deleting nodes).
    input: SchedulingInput,
    pending: BTreeSet<String>,
    from_deleting: BTreeSet<String>,
    /// The scheduler's view of every node not being deleted, in snapshot order, with the
    /// position of its [`StateNode`] in the snapshot.
    nodes: Vec<(usize, Cow<'s, ClusterNode>)>,
    /// Node name → position in `nodes` (looked up, never iterated).
    positions: rustc_hash::FxHashMap<&'s str, usize>,
    /// Nodes inside their NodePool's `consolidateAfter` window (by scheduler node name).
    refusing: BTreeSet<String>,
    /// Uninitialized destinations: hostname → the message of pods placed there.
    uninitialized: BTreeMap<String, String>,
    pdbs: PdbLimits,
}

impl<'s> SimulationContext<'s> {
    /// The context of simulations over `snapshot` at `now`. Reserved capacity is simulated in
    /// fallback mode, as upstream does.
    pub fn new(
        snapshot: &'s ClusterSnapshot,
        scheduler: &SchedulerOptions,
        now: Timestamp,
    ) -> SimulationContext<'s> {
        let pdbs = PdbLimits::new(&snapshot.pdbs);
        let mut pods = snapshot.pending_pods.clone();
        // CapacityBuffer virtual pods are pending pods too (dropped by the methods when gated
        // off).
        pods.extend(snapshot.buffer_pods.iter().cloned());
        let pending: BTreeSet<String> = pods.iter().map(|p| p.key()).collect();
        let mut from_deleting = BTreeSet::new();
        let mut nodes = Vec::new();
        let mut positions = rustc_hash::FxHashMap::default();
        positions.reserve(snapshot.nodes.len());
        let mut refusing = BTreeSet::new();
        let mut uninitialized = BTreeMap::new();
        for (i, node) in snapshot.nodes.iter().enumerate() {
            let facts = super::facts::of(snapshot, node);
            if facts.deleting {
                for p in &node.pods {
                    if super::candidates::is_reschedulable(p)
                        && is_currently_reschedulable(p, &pdbs, now)
                    {
                        from_deleting.insert(p.key());
                        pods.push(p.clone());
                    }
                }
                continue;
            }
            let cn = cluster_node_as(node, facts.node_reads_as_is);
            if !cn.initialized {
                let claim = node.node_claim.as_ref().map_or("", |c| c.name());
                uninitialized.insert(
                    cn.hostname().to_string(),
                    format!(
                        "would schedule against uninitialized nodeclaim/{claim}, node/{}",
                        node.name()
                    ),
                );
            }
            if let (Some(pool), Some(claim)) = (
                facts
                    .nodepool
                    .as_deref()
                    .and_then(|n| snapshot.node_pool(n)),
                node.node_claim.as_ref(),
            ) && is_under_consolidate_after(&pool.node_pool, claim, now)
            {
                refusing.insert(cn.name.clone());
            }
            positions.insert(node.name(), nodes.len());
            nodes.push((i, cn));
        }
        let mut options = scheduler.clone();
        options.reserved_capacity_mode = ReservedCapacityMode::Fallback;
        SimulationContext {
            snapshot,
            options,
            now,
            input: SchedulingInput {
                node_pools: eligible_node_pools(snapshot),
                existing_nodes: Vec::new(),
                daemonsets: snapshot.daemonsets.clone(),
                pods,
                namespace_labels: snapshot.namespace_labels.clone(),
                volumes: snapshot.volumes.clone(),
                consolidation: None,
            },
            pending,
            from_deleting,
            nodes,
            positions,
            refusing,
            uninitialized,
            pdbs,
        }
    }

    /// Prepares the scheduler over the context (the cost of one simulation's set-up, paid
    /// once).
    pub fn simulator(&self) -> Simulator<'_> {
        let nodes = self
            .nodes
            .iter()
            .filter_map(|(i, cn)| {
                let node = self.snapshot.nodes.get(*i)?;
                Some(ExistingNodeRef {
                    node: cn.as_ref(),
                    pods: &node.pods,
                    volume_limits: &node.volume_limits,
                })
            })
            .collect();
        let pods: Vec<&Pod> = self.input.pods.iter().collect();
        Simulator {
            context: self,
            prepared: Prepared::new(&self.input, nodes, &self.options, &pods),
            hints: std::sync::OnceLock::new(),
        }
    }
}

/// The scheduler prepared over a [`SimulationContext`]: runs any number of simulations.
pub struct Simulator<'c> {
    context: &'c SimulationContext<'c>,
    prepared: Prepared<'c>,
    /// What the solver computes per pod, for every pod a simulation may place: built by the
    /// first [`Simulator::simulate_repeated`].
    hints: std::sync::OnceLock<HintTable>,
}

/// The solver's hints ([`PodHint`]) of the context's pods (pending pods and the pods of
/// deleting nodes), then of the pods of every node of the context, in order.
struct HintTable {
    hints: Vec<PodHint>,
    /// Per entry of the context's `nodes`: the position of its first pod's hint.
    node_start: Vec<usize>,
}

/// The position of `pod` in `pods`, when it is one of its elements (not a copy).
fn position_in(pods: &[Pod], pod: &Pod) -> Option<usize> {
    let size = std::mem::size_of::<Pod>();
    let offset = (pod as *const Pod as usize).checked_sub(pods.as_ptr() as usize)?;
    let i = offset.checked_div(size)?;
    pods.get(i).filter(|p| std::ptr::eq(*p, pod)).map(|_| i)
}

impl Simulator<'_> {
    /// Simulates removing `candidates` (upstream `SimulateScheduling`): their reschedulable pods
    /// (those no PDB or do-not-disrupt blocks now) join the pending pods and the pods of deleting
    /// nodes. With `consolidation`, existing nodes still inside their NodePool's `consolidateAfter`
    /// window refuse the candidates' pods.
    pub fn simulate(
        &self,
        candidates: &[&Candidate],
        consolidation: bool,
    ) -> Result<Simulation, SimulationError> {
        self.run(candidates, consolidation, false, None)
    }

    /// [`simulate`](Self::simulate) for callers that simulate many candidate sets sharing
    /// their pods (the multi-node consolidation search): what the solver computes per pod
    /// before placing it and no simulation changes (its key, its place in the queue order) is
    /// computed once, on the first call, for every pod of the snapshot, and shared by every
    /// such simulation. With `new_claim_limit`, a simulation that needs more new NodeClaims
    /// than that stops as soon as it does, with [`SimulationError::TooManyNewNodeClaims`]
    /// (consolidation rejects such a simulation whatever else it finds). Otherwise the result
    /// is the same.
    pub fn simulate_repeated(
        &self,
        candidates: &[&Candidate],
        consolidation: bool,
        new_claim_limit: Option<usize>,
    ) -> Result<Simulation, SimulationError> {
        self.run(candidates, consolidation, true, new_claim_limit)
    }

    fn hint_table(&self) -> &HintTable {
        self.hints.get_or_init(|| {
            let ctx = self.context;
            let mut pods: Vec<&Pod> = ctx.input.pods.iter().collect();
            let mut node_start = Vec::with_capacity(ctx.nodes.len());
            for (i, _) in &ctx.nodes {
                node_start.push(pods.len());
                if let Some(node) = ctx.snapshot.nodes.get(*i) {
                    pods.extend(node.pods.iter());
                }
            }
            HintTable {
                hints: self.prepared.pod_hints(&pods),
                node_start,
            }
        })
    }

    fn run(
        &self,
        candidates: &[&Candidate],
        consolidation: bool,
        repeated: bool,
        new_claim_limit: Option<usize>,
    ) -> Result<Simulation, SimulationError> {
        let ctx = self.context;
        if let Some(c) = candidates.iter().find(|c| c.node.is_deleting()) {
            return Err(SimulationError::CandidateDeleting(c.name().to_string()));
        }
        let mut removed = vec![false; ctx.nodes.len()];
        // The pods are borrowed: the solve copies none of them.
        let mut pods: Vec<&Pod> = ctx.input.pods.iter().collect();
        // Which pods are displaced matters only to nodes that refuse them: without any, the keys
        // are not collected (the solve is the same).
        let track_displaced = consolidation && !ctx.refusing.is_empty();
        let mut displaced = BTreeSet::new();
        // The hints of `pods`, while every pod has one (a candidate's node is the snapshot's).
        let table = repeated.then(|| self.hint_table());
        let mut hints: Option<Vec<&PodHint>> =
            table.map(|t| t.hints.iter().take(pods.len()).collect());
        for c in candidates {
            let position = ctx.positions.get(c.name()).copied();
            match position.and_then(|i| removed.get_mut(i)) {
                Some(r) => *r = true,
                None => return Err(SimulationError::UnknownCandidate(c.name().to_string())),
            }
            let node_pods = position
                .and_then(|i| ctx.nodes.get(i))
                .and_then(|(i, _)| ctx.snapshot.nodes.get(*i))
                .map(|n| n.pods.as_slice());
            for p in c.reschedulable_pods() {
                if is_currently_reschedulable(p, &ctx.pdbs, ctx.now) {
                    if track_displaced {
                        displaced.insert(p.key());
                    }
                    pods.push(p);
                    if let Some(h) = hints.as_mut() {
                        let hint = table.zip(position).and_then(|(t, at)| {
                            let i = position_in(node_pods?, p)?;
                            t.hints.get(t.node_start.get(at)? + i)
                        });
                        match hint {
                            Some(hint) => h.push(hint),
                            None => hints = None,
                        }
                    }
                }
            }
        }
        let results = self
            .prepared
            .solve(&SolveRequest {
                pods: &pods,
                removed: &removed,
                refusing: consolidation.then_some(&ctx.refusing),
                displaced: track_displaced.then_some(&displaced),
                hints: hints.as_deref(),
                new_claim_limit,
            })
            .ok_or(SimulationError::TooManyNewNodeClaims(
                new_claim_limit.unwrap_or_default(),
            ))?;

        let mut displaced_errors: BTreeMap<String, String> = results
            .pod_errors
            .iter()
            .filter(|(key, _)| !ctx.pending.contains(*key))
            .map(|(key, e)| (key.clone(), e.message.clone()))
            .collect();
        for node in results
            .existing_nodes
            .iter()
            .filter(|_| !ctx.uninitialized.is_empty())
        {
            if let Some(message) = ctx.uninitialized.get(&node.name) {
                for pod in &node.pods {
                    if !ctx.from_deleting.contains(pod) && !ctx.pending.contains(pod) {
                        displaced_errors.insert(pod.clone(), message.clone());
                    }
                }
            }
        }
        Ok(Simulation {
            results,
            displaced_errors,
        })
    }
}

/// Simulates removing `candidates` (upstream `SimulateScheduling`) with a one-off
/// [`SimulationContext`]: callers that simulate several candidate sets over one snapshot should
/// build the context and its [`Simulator`] once. With `consolidation`, existing nodes still inside
/// their NodePool's `consolidateAfter` window refuse the candidates' pods. Reserved capacity is
/// simulated in fallback mode, as upstream does.
pub fn simulate_scheduling(
    snapshot: &ClusterSnapshot,
    candidates: &[&Candidate],
    scheduler: &SchedulerOptions,
    consolidation: bool,
    now: Timestamp,
) -> Result<Simulation, SimulationError> {
    SimulationContext::new(snapshot, scheduler, now)
        .simulator()
        .simulate(candidates, consolidation)
}

/// Whether the NodeClaim of `node` carries condition `type_` with status True.
pub(crate) fn condition_true(node: &StateNode, type_: &str) -> Option<bool> {
    let claim = node.node_claim.as_ref()?;
    crate::api::find_condition(&claim.status.conditions, type_)
        .map(|c| c.status == ConditionStatus::True)
}

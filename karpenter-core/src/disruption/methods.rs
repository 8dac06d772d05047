//! The disruption methods (upstream `controllers/disruption`) and a driver that plays the
//! disruption controller's passes forward on a snapshot.
//!
//! [`run_pass`] is one pass of upstream's controller: the methods in production order — emptiness,
//! static drift, drift, multi-node consolidation, single-node consolidation — and the first one
//! that produces a command wins. [`plan`] repeats passes on a copy of the snapshot, applying each
//! command (candidates removed, replacements and moved pods added), until nothing more would be
//! done; expired NodeClaims (upstream `nodeclaim/expiration`, not a method: no budgets, no
//! simulation) come first.
//!
//! Differences from upstream, each deliberate:
//! - no 15 s validation wait: a pure planner has no clock to wait on; the controller re-validates
//!   against a newer snapshot with the same functions;
//! - multi-node consolidation searches every candidate, not the first 100, unless
//!   [`DisruptionOptions::multi_node_candidate_limit`] says otherwise, and runs to the end
//!   unless the caller passes a [`TimeBudget`] ([`DisruptionOptions::multi_node_time_budget`]);
//! - single-node consolidation evaluates every candidate unless the caller passes a
//!   [`TimeBudget`] ([`DisruptionOptions::single_node_time_budget`]); the NodePools it did not
//!   reach are data the caller carries to the next pass, not state kept here;
//! - a replacement that upstream `disruption/consolidation.go` narrows to spot while none of its
//!   options offers spot is not issued (upstream issues it, the launch fails and the node stays:
//!   the same end state);
//! - split consolidation ([`Method::Split`], not upstream) runs last, and only for NodePools under
//!   the `cost` packing policy: it replaces one node by several cheaper ones, or several by
//!   several, when that saves at least [`DisruptionOptions::split_savings_threshold`];
//! - a NodeClaim without a `Consolidatable` condition (a hand-written or offline snapshot) is
//!   judged by the rule the condition controller applies (upstream
//!   `nodeclaim/disruption/consolidation.go`): initialized and outside `consolidateAfter`.

mod balanced;
mod consolidation;
mod drift;
mod emptiness;
mod precheck;
mod replay;
mod split;

use self::consolidation::{
    compute_consolidation, consolidation_candidates, multi_node, savings, single_node,
};
use self::drift::{drift, static_drift};
use self::emptiness::emptiness;
pub use self::replay::plan;

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use crate::api::{self, ConsolidationPolicy};
use crate::model::Timestamp;
use crate::scheduling::{NewNodeClaim, Results, SchedulerOptions};
use crate::state::{ClusterSnapshot, StateNode};

use super::budgets::PoolCounts;
use super::candidates::{Candidate, DisruptionClass, get_candidates};
use super::cost::is_under_consolidate_after;
use super::simulate::{SimulationContext, Simulator, condition_true};

/// The scheduler prepared over a pass's snapshot, built on first use (a pass that ends at
/// emptiness never needs it) and shared by every simulation of the pass.
struct Sims<'c> {
    context: &'c SimulationContext<'c>,
    simulator: std::cell::OnceCell<Simulator<'c>>,
    /// The consolidation pre-checks' rooms over the pass's snapshot, built on first use.
    rooms: std::cell::OnceCell<precheck::Rooms>,
    /// The budgets' node counts over the pass's snapshot, taken on first use.
    pool_counts: std::cell::OnceCell<PoolCounts>,
    /// The consolidation candidates of the pass's candidates (the nodes of the candidates they
    /// came from, and the sorted list), built on first use.
    consolidation: std::cell::OnceCell<(Vec<Arc<StateNode>>, Vec<Candidate>)>,
}

impl<'c> Sims<'c> {
    fn new(context: &'c SimulationContext<'c>) -> Sims<'c> {
        Sims {
            context,
            simulator: std::cell::OnceCell::new(),
            rooms: std::cell::OnceCell::new(),
            pool_counts: std::cell::OnceCell::new(),
            consolidation: std::cell::OnceCell::new(),
        }
    }

    /// The consolidation candidates of `candidates` over `snapshot` at `now` (the pass's),
    /// sorted by savings ratio: computed once for the consolidation methods of a pass, which
    /// all start from the pass's candidates; a call with another slice computes its own.
    fn consolidation_candidates(
        &self,
        snapshot: &ClusterSnapshot,
        candidates: &[Candidate],
        now: Timestamp,
    ) -> std::borrow::Cow<'_, [Candidate]> {
        let (first, sorted) = self.consolidation.get_or_init(|| {
            let nodes = candidates.iter().map(|c| Arc::clone(&c.node)).collect();
            (nodes, consolidation_candidates(snapshot, candidates, now))
        });
        let same = first.len() == candidates.len()
            && first
                .iter()
                .zip(candidates)
                .all(|(n, c)| Arc::ptr_eq(n, &c.node));
        if same {
            std::borrow::Cow::Borrowed(sorted)
        } else {
            std::borrow::Cow::Owned(consolidation_candidates(snapshot, candidates, now))
        }
    }

    /// How many more nodes each NodePool of `snapshot` (the pass's snapshot) may disrupt for
    /// `reason` ([`BudgetMapping::remaining`](super::budgets::BudgetMapping::remaining)), from
    /// node counts taken once per pass.
    fn budgets(
        &self,
        snapshot: &ClusterSnapshot,
        reason: api::DisruptionReason,
        now: Timestamp,
    ) -> BTreeMap<String, usize> {
        let counts = self.pool_counts.get_or_init(|| PoolCounts::of(snapshot));
        super::budgets::BudgetMapping::from_counts(counts, snapshot, reason, now).remaining()
    }

    /// The pre-checks' rooms of `snapshot` at `now`, the pass's snapshot (the one the context
    /// was built over).
    fn rooms(&self, snapshot: &ClusterSnapshot, now: Timestamp) -> &precheck::Rooms {
        self.rooms
            .get_or_init(|| precheck::Rooms::new(snapshot, now))
    }

    /// The budgets' node counts, already taken over the context's snapshot.
    fn with_counts(self, counts: &PoolCounts) -> Sims<'c> {
        let _ = self.pool_counts.set(counts.clone());
        self
    }

    fn get(&self) -> &Simulator<'c> {
        self.simulator.get_or_init(|| self.context.simulator())
    }
}

/// The spot-to-spot rule: a single spot node is replaced by spot only with at least this many
/// cheaper instance types (upstream `disruption/consolidation.go`).
pub const MIN_INSTANCE_TYPES_FOR_SPOT_TO_SPOT: usize = 15;
/// Balanced consolidation's `k`: a move is approved when its score is at least `1 / k`.
pub const BALANCED_K: f64 = 2.0;

/// Options of the disruption planner. Start from [`DisruptionOptions::default`] (upstream's
/// defaults) and change what differs with the `with_*` methods (the struct is
/// `#[non_exhaustive]`: options will be added).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct DisruptionOptions {
    /// The scheduler's options (label policy, minValues and preference policies).
    pub scheduler: SchedulerOptions,
    /// Feature gate `SpotToSpotConsolidation` (upstream default: off).
    pub spot_to_spot_consolidation: bool,
    /// Cap on multi-node consolidation's candidates (upstream: 100). `None`: every candidate.
    pub multi_node_candidate_limit: Option<usize>,
    /// Feature gate `CapacityBuffer` (upstream default: off): simulations count the snapshot's
    /// [`ClusterSnapshot::buffer_pods`] as pending pods (upstream `SimulateScheduling`).
    /// Emptiness's protection of nodes hosting buffer pods reads
    /// [`ClusterSnapshot::buffer_pod_counts`] either way.
    pub capacity_buffer: bool,
    /// The caller's time budget for single-node consolidation (upstream: a 3-minute deadline).
    /// Default [`TimeBudget::Unlimited`]: every candidate is evaluated.
    pub single_node_time_budget: TimeBudget,
    /// The caller's time budget for multi-node consolidation (upstream: a 1-minute deadline),
    /// asked before each trial of the binary search (`considered` = trials done). When it runs
    /// out, the largest valid prefix found so far is the command, if any. Default
    /// [`TimeBudget::Unlimited`]: the search runs to the end.
    pub multi_node_time_budget: TimeBudget,
    /// NodePools whose single-node candidates an earlier pass did not reach before its time
    /// budget ran out (upstream's `PreviouslyUnseenNodePools`): their candidates are evaluated
    /// first. The caller keeps this between passes from [`PassOutcome::unseen_node_pools`].
    pub previously_unseen_node_pools: BTreeSet<String>,
    /// Split consolidation ([`Method::Split`], NodePools under the `cost` packing policy only)
    /// acts only when it saves at least this fraction of the candidates' price (default 0.2).
    pub split_savings_threshold: f64,
    /// Skip the simulation of a single-node candidate that provably cannot be consolidated:
    /// no available offering of any NodePool is cheaper than it and one of its displaced pods
    /// fits on no other node even alone (see `methods/precheck.rs`). Decisions are the same
    /// either way; only the reason recorded in [`PassOutcome::blocked`] for such a candidate
    /// differs (the pre-check's instead of the simulation's). Default off; the operator turns
    /// it on (it does not read the reasons).
    pub single_node_precheck: bool,
    /// Record in [`PassOutcome::blocked`] why nodes were not disrupted (default on). A caller
    /// that never reads the reasons (the operator) turns it off: the pass then leaves `blocked`
    /// empty and spends nothing on their text. Decisions are the same either way.
    pub record_blocked: bool,
}

impl Default for DisruptionOptions {
    fn default() -> Self {
        DisruptionOptions {
            scheduler: SchedulerOptions::default(),
            spot_to_spot_consolidation: false,
            multi_node_candidate_limit: None,
            capacity_buffer: false,
            single_node_time_budget: TimeBudget::default(),
            multi_node_time_budget: TimeBudget::default(),
            previously_unseen_node_pools: BTreeSet::new(),
            split_savings_threshold: 0.2,
            single_node_precheck: false,
            record_blocked: true,
        }
    }
}

impl DisruptionOptions {
    /// The options with these scheduler options.
    pub fn with_scheduler(mut self, scheduler: SchedulerOptions) -> Self {
        self.scheduler = scheduler;
        self
    }

    /// The options with the `SpotToSpotConsolidation` feature gate on or off.
    pub fn with_spot_to_spot_consolidation(mut self, enabled: bool) -> Self {
        self.spot_to_spot_consolidation = enabled;
        self
    }

    /// The options with this cap on multi-node consolidation's candidates (`None`: every
    /// candidate).
    pub fn with_multi_node_candidate_limit(mut self, limit: Option<usize>) -> Self {
        self.multi_node_candidate_limit = limit;
        self
    }

    /// The options with the `CapacityBuffer` feature gate on or off.
    pub fn with_capacity_buffer(mut self, enabled: bool) -> Self {
        self.capacity_buffer = enabled;
        self
    }

    /// The options with this time budget for single-node consolidation.
    pub fn with_single_node_time_budget(mut self, budget: TimeBudget) -> Self {
        self.single_node_time_budget = budget;
        self
    }

    /// The options with this time budget for multi-node consolidation.
    pub fn with_multi_node_time_budget(mut self, budget: TimeBudget) -> Self {
        self.multi_node_time_budget = budget;
        self
    }

    /// The options with these NodePools' single-node candidates evaluated first.
    pub fn with_previously_unseen_node_pools(mut self, pools: BTreeSet<String>) -> Self {
        self.previously_unseen_node_pools = pools;
        self
    }

    /// The options with the single-node pre-check on or off (see
    /// [`DisruptionOptions::single_node_precheck`]).
    pub fn with_single_node_precheck(mut self, enabled: bool) -> Self {
        self.single_node_precheck = enabled;
        self
    }

    /// The options recording why nodes were not disrupted, or not (see
    /// [`DisruptionOptions::record_blocked`]).
    pub fn with_record_blocked(mut self, record: bool) -> Self {
        self.record_blocked = record;
        self
    }

    /// The options with this split consolidation savings threshold (a fraction of the
    /// candidates' price).
    pub fn with_split_savings_threshold(mut self, threshold: f64) -> Self {
        self.split_savings_threshold = threshold;
        self
    }
}

/// How long a method may keep evaluating candidates. The planner has no clock: the caller's
/// budget is either a count of candidates or a probe of the caller's own clock. Upstream gives
/// single-node consolidation 3 minutes, checked before each candidate; no budget is needed for
/// correctness, only to bound a pass's running time.
#[derive(Clone, Default)]
pub enum TimeBudget {
    /// Evaluate every candidate.
    #[default]
    Unlimited,
    /// Time is up once this many candidates have been considered (a deterministic stand-in for
    /// a deadline; `Candidates(0)` is a deadline that has already passed).
    Candidates(usize),
    /// Asked before each candidate; `true` means the caller's deadline has passed.
    Deadline(Arc<dyn Fn() -> bool + Send + Sync>),
}

impl TimeBudget {
    /// Whether time is up before considering the next candidate, `considered` having been
    /// considered already.
    pub fn exhausted(&self, considered: usize) -> bool {
        match self {
            TimeBudget::Unlimited => false,
            TimeBudget::Candidates(limit) => considered >= *limit,
            TimeBudget::Deadline(passed) => passed(),
        }
    }
}

impl std::fmt::Debug for TimeBudget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TimeBudget::Unlimited => f.write_str("Unlimited"),
            TimeBudget::Candidates(n) => f.debug_tuple("Candidates").field(n).finish(),
            TimeBudget::Deadline(_) => f.write_str("Deadline(..)"),
        }
    }
}

/// The snapshot the methods simulate on: without the CapacityBuffer virtual pods unless the
/// gate is on (a copy only when there are pods to drop). Every entry point that simulates
/// applies it once ([`run_pass`], [`multi_node_pass`], [`evaluate_consolidation`]); command
/// re-validation should too.
pub(crate) fn buffer_gated<'a>(
    snapshot: &'a ClusterSnapshot,
    options: &DisruptionOptions,
) -> Cow<'a, ClusterSnapshot> {
    if options.capacity_buffer || snapshot.buffer_pods.is_empty() {
        Cow::Borrowed(snapshot)
    } else {
        let mut gated = snapshot.clone();
        gated.buffer_pods.clear();
        Cow::Owned(gated)
    }
}

/// Which method produced a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Method {
    /// Empty nodes are deleted.
    Emptiness,
    /// A drifted node is replaced (or deleted).
    Drift,
    /// A drifted node of a static NodePool (`spec.replicas`) is replaced one for one.
    StaticDrift,
    /// Several nodes are replaced by at most one.
    MultiNode,
    /// One node is deleted or replaced by a cheaper one.
    SingleNode,
    /// An expired NodeClaim is deleted (not a method upstream; listed for completeness).
    Expiration,
    /// One node is replaced by several cheaper ones, or several by several (not upstream: the
    /// `cost` packing policy's split consolidation).
    Split,
}

impl Method {
    /// The contract's name: `emptiness`, `drift`, `multi-node`, `single-node`, `expiration`,
    /// `split`.
    pub fn as_str(self) -> &'static str {
        match self {
            Method::Emptiness => "emptiness",
            Method::Drift | Method::StaticDrift => "drift",
            Method::MultiNode => "multi-node",
            Method::SingleNode => "single-node",
            Method::Expiration => "expiration",
            Method::Split => "split",
        }
    }
}

/// Why a command disrupts nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Reason {
    /// The nodes are empty.
    Empty,
    /// The nodes are underutilized (consolidation).
    Underutilized,
    /// The nodes drifted from their NodePool.
    Drifted,
    /// The NodeClaims reached `expireAfter`.
    Expired,
}

impl Reason {
    /// The contract's name: `Empty`, `Underutilized`, `Drifted`, `Expired`.
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Empty => "Empty",
            Reason::Underutilized => "Underutilized",
            Reason::Drifted => "Drifted",
            Reason::Expired => "Expired",
        }
    }
}

/// A decision: disrupt these candidates, launching these replacements first. The planner builds
/// it; a caller that builds one by hand (to re-validate or queue it) starts from
/// [`Command::new`] (the struct is `#[non_exhaustive]`).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Command {
    /// The method.
    pub method: Method,
    /// The reason.
    pub reason: Reason,
    /// The nodes to disrupt.
    pub candidates: Vec<Candidate>,
    /// NodeClaims to launch before the candidates go (empty: delete only).
    pub replacements: Vec<NewNodeClaim>,
    /// Σ candidate prices − Σ replacement launch prices, per hour (upstream
    /// `EstimatedSavings`).
    pub savings_per_hour: f64,
    /// Where the displaced pods would go (absent for emptiness and expiration).
    pub simulation: Option<Results>,
}

impl Command {
    /// A command of `method` for `reason` that deletes `candidates` without replacements,
    /// saving nothing, without a simulation.
    pub fn new(method: Method, reason: Reason, candidates: Vec<Candidate>) -> Self {
        Command {
            method,
            reason,
            candidates,
            replacements: Vec::new(),
            savings_per_hour: 0.0,
            simulation: None,
        }
    }

    /// The command launching these replacements before the candidates go.
    pub fn with_replacements(mut self, replacements: Vec<NewNodeClaim>) -> Self {
        self.replacements = replacements;
        self
    }

    /// The command with this estimated saving per hour.
    pub fn with_savings_per_hour(mut self, savings_per_hour: f64) -> Self {
        self.savings_per_hour = savings_per_hour;
        self
    }

    /// The command with this simulation of where the displaced pods go.
    pub fn with_simulation(mut self, simulation: Results) -> Self {
        self.simulation = Some(simulation);
        self
    }

    /// `delete` or `replace`, as upstream's metrics label decisions.
    pub fn decision(&self) -> &'static str {
        if self.replacements.is_empty() {
            "delete"
        } else {
            "replace"
        }
    }
}

/// One pass: the command(s) of the first method that acted, and nodes that were blocked. An
/// output of the planner (`#[non_exhaustive]`: it will report more); a caller that needs one by
/// hand starts from [`PassOutcome::default`].
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct PassOutcome {
    /// The commands (one method's).
    pub commands: Vec<Command>,
    /// Nodes that a method would disrupt but could not, with the reason.
    pub blocked: Vec<(String, String)>,
    /// The consolidation methods (emptiness, multi-node, single-node) whose "consolidated" memo
    /// upstream would set in this pass (upstream `disruption/controller.go`): the method ran, had
    /// candidates, found no command, and no candidate was held back by a budget. The caller keeps
    /// the memo (upstream skips a memoized method until cluster state changes); a method that
    /// produced a command, or whose candidates were blocked by a budget, is never listed.
    pub consolidated: BTreeSet<Method>,
    /// The new value of [`DisruptionOptions::previously_unseen_node_pools`], when single-node
    /// consolidation changed it: the NodePools it did not reach before its time budget ran out,
    /// or an empty set once it considered every candidate without a command. `None`: keep the
    /// old value (single-node consolidation did not run, had no candidates, or returned a
    /// command — upstream leaves the set alone then).
    pub unseen_node_pools: Option<BTreeSet<String>>,
    /// For every method that ran in this pass, how many nodes it found eligible: candidates
    /// that pass its own filter (upstream's `ShouldDisrupt`), before budgets. Upstream reports
    /// this as the gauge `voluntary_disruption_eligible_nodes{reason}` (emptiness `empty`; static
    /// drift and drift `drifted`; multi- and single-node consolidation `underutilized`, each
    /// method overwriting the gauge of its reason when it runs).
    pub eligible_nodes: BTreeMap<Method, usize>,
    /// Whether multi-node consolidation ran out of its time budget in this pass (upstream
    /// counts `voluntary_disruption_consolidation_timeouts_total{consolidation_type="multi"}`).
    pub multi_node_timed_out: bool,
}

impl PassOutcome {
    /// Records why `node` was not disrupted, when the options ask for reasons
    /// ([`DisruptionOptions::record_blocked`]); `reason` is only called then.
    fn block(&mut self, options: &DisruptionOptions, node: &str, reason: impl FnOnce() -> String) {
        if options.record_blocked {
            self.blocked.push((node.to_string(), reason()));
        }
    }

    /// Whether single-node consolidation ran out of its time budget in this pass (upstream
    /// counts `voluntary_disruption_consolidation_timeouts_total{consolidation_type="single"}`).
    pub fn single_node_timed_out(&self) -> bool {
        self.unseen_node_pools
            .as_ref()
            .is_some_and(|u| !u.is_empty())
    }
}

/// The whole plan: every command the controller would issue, pass after pass. An output of the
/// planner (`#[non_exhaustive]`: it will report more); a caller that needs one by hand starts
/// from [`Plan::default`].
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct Plan {
    /// Commands in the order they would be issued.
    pub commands: Vec<Command>,
    /// Nodes that could not be disrupted, with the first reason seen (by node name).
    pub blocked: BTreeMap<String, String>,
}

// ---------------------------------------------------------------------------------------------
// ShouldDisrupt predicates
// ---------------------------------------------------------------------------------------------

fn pool_of<'a>(snapshot: &'a ClusterSnapshot, c: &Candidate) -> Option<&'a api::NodePool> {
    snapshot.node_pool(&c.node_pool).map(|p| &p.node_pool)
}

fn consolidation_disabled(pool: &api::NodePool) -> bool {
    pool.spec
        .disruption
        .effective_consolidate_after()
        .duration()
        .is_none()
}

/// `Consolidatable`: the NodeClaim's condition when present, else the rule of upstream
/// `nodeclaim/disruption/consolidation.go`.
fn consolidatable(pool: &api::NodePool, node: &StateNode, now: Timestamp) -> bool {
    if let Some(v) = condition_true(node, crate::api::condition_types::CONSOLIDATABLE) {
        return v;
    }
    let Some(claim) = &node.node_claim else {
        return false;
    };
    !consolidation_disabled(pool)
        && node.initialized()
        && !is_under_consolidate_after(pool, claim, now)
}

pub(super) fn should_empty(snapshot: &ClusterSnapshot, c: &Candidate, now: Timestamp) -> bool {
    let Some(pool) = pool_of(snapshot, c) else {
        return false;
    };
    !c.owned_by_static_node_pool
        && !consolidation_disabled(pool)
        && c.is_empty()
        && consolidatable(pool, &c.node, now)
}

fn should_drift(c: &Candidate) -> bool {
    !c.owned_by_static_node_pool
        && condition_true(&c.node, crate::api::condition_types::DRIFTED) == Some(true)
}

pub(super) fn should_consolidate(
    snapshot: &ClusterSnapshot,
    c: &Candidate,
    now: Timestamp,
) -> bool {
    let Some(pool) = pool_of(snapshot, c) else {
        return false;
    };
    !c.owned_by_static_node_pool
        && c.instance_type.is_some()
        && !c.capacity_type.is_empty()
        && !c.zone.is_empty()
        && !consolidation_disabled(pool)
        && !c.is_empty()
        && pool.spec.disruption.effective_consolidation_policy() != ConsolidationPolicy::WhenEmpty
        && consolidatable(pool, &c.node, now)
}

/// Evaluates consolidating exactly `candidates` (upstream `disruption/consolidation.go`): the
/// command it would give (a delete or a replacement by one cheaper node), `Ok(None)` when a
/// candidate is already being deleted, or the reason it is not worth doing. Budgets and Balanced
/// scoring are not applied here.
///
/// Each call prepares the scheduler over the whole snapshot; to evaluate many candidate sets of
/// one snapshot, prepare once with [`SimulationContext`] and call [`evaluate_consolidation_with`].
pub fn evaluate_consolidation(
    snapshot: &ClusterSnapshot,
    candidates: &[Candidate],
    now: Timestamp,
    options: &DisruptionOptions,
) -> Result<Option<Command>, String> {
    let snapshot = &*buffer_gated(snapshot, options);
    let context = SimulationContext::new(snapshot, &options.scheduler, now);
    evaluate_consolidation_with(&context.simulator(), candidates, options)
}

/// [`evaluate_consolidation`] with a scheduler prepared once for the snapshot (its
/// [`SimulationContext`] must have been built with `options.scheduler`, over a snapshot without
/// CapacityBuffer pods unless `options.capacity_buffer` is on).
///
/// ```
/// use karpenter_core::disruption::simulate::SimulationContext;
/// use karpenter_core::disruption::{DisruptionOptions, evaluate_consolidation_with};
/// use karpenter_core::model::Timestamp;
/// use karpenter_core::state::ClusterSnapshot;
///
/// let snapshot = ClusterSnapshot::default();
/// let options = DisruptionOptions::default();
/// let context = SimulationContext::new(&snapshot, &options.scheduler, Timestamp::UNIX_EPOCH);
/// let simulator = context.simulator();
/// // With no candidate, nothing moves: the command deletes nothing and launches nothing.
/// let command = evaluate_consolidation_with(&simulator, &[], &options).unwrap().unwrap();
/// assert!(command.replacements.is_empty());
/// ```
pub fn evaluate_consolidation_with(
    simulator: &Simulator<'_>,
    candidates: &[Candidate],
    options: &DisruptionOptions,
) -> Result<Option<Command>, String> {
    let policy = &options.scheduler.label_policy;
    Ok(
        compute_consolidation(simulator, candidates, options)?.map(|(replacements, sim)| Command {
            method: if candidates.len() == 1 {
                Method::SingleNode
            } else {
                Method::MultiNode
            },
            reason: Reason::Underutilized,
            savings_per_hour: savings(candidates, &replacements, policy),
            candidates: candidates.to_vec(),
            replacements,
            simulation: Some(sim.results),
        }),
    )
}

/// The consolidation candidates of a snapshot, in the order multi- and single-node
/// consolidation consider them (savings ratio, highest first).
pub fn consolidation_candidates_of(snapshot: &ClusterSnapshot, now: Timestamp) -> Vec<Candidate> {
    let (graceful, _) = get_candidates(snapshot, DisruptionClass::Graceful, &|_| false, now);
    consolidation_candidates(snapshot, &graceful, now)
}

/// A consolidation method's signature, for [`one_method_pass`].
type MethodFn =
    fn(&Sims<'_>, &ClusterSnapshot, &[Candidate], Timestamp, &mut PassOutcome, &DisruptionOptions);

/// One consolidation method alone over every graceful candidate of the snapshot (CapacityBuffer
/// pods gated as in a full pass).
fn one_method_pass(
    snapshot: &ClusterSnapshot,
    now: Timestamp,
    options: &DisruptionOptions,
    method: MethodFn,
) -> PassOutcome {
    let mut out = PassOutcome::default();
    let snapshot = &*buffer_gated(snapshot, options);
    let (graceful, _) = get_candidates(snapshot, DisruptionClass::Graceful, &|_| false, now);
    let context = SimulationContext::new(snapshot, &options.scheduler, now);
    method(
        &Sims::new(&context),
        snapshot,
        &graceful,
        now,
        &mut out,
        options,
    );
    out
}

/// Multi-node consolidation alone (upstream `disruption/multinodeconsolidation.go`), over every
/// candidate of the snapshot.
pub fn multi_node_pass(
    snapshot: &ClusterSnapshot,
    now: Timestamp,
    options: &DisruptionOptions,
) -> PassOutcome {
    one_method_pass(snapshot, now, options, multi_node)
}

/// Single-node consolidation alone (upstream `disruption/singlenodeconsolidation.go`), over every
/// candidate of the snapshot: what upstream's controller runs next when multi-node consolidation
/// found nothing or its command failed validation.
pub fn single_node_pass(
    snapshot: &ClusterSnapshot,
    now: Timestamp,
    options: &DisruptionOptions,
) -> PassOutcome {
    one_method_pass(snapshot, now, options, single_node)
}

/// One pass of the disruption controller (upstream `disruption/controller.go`): emptiness, static
/// drift, drift, multi-node and single-node consolidation in production order; the first method
/// with a command wins (static drift may issue several commands, one per replaced node). `in_queue`
/// says which provider ids are already being disrupted.
pub fn run_pass(
    snapshot: &ClusterSnapshot,
    now: Timestamp,
    options: &DisruptionOptions,
    in_queue: &dyn Fn(&str) -> bool,
) -> PassOutcome {
    run_pass_counted(snapshot, &PoolCounts::of(snapshot), now, options, in_queue)
}

/// [`run_pass`] with the budgets' node counts of `snapshot` already taken
/// ([`PoolCounts::of`]), for a caller that needs them too (the operator's budget gauges): the
/// pass's methods use these counts instead of counting again.
pub fn run_pass_counted(
    snapshot: &ClusterSnapshot,
    counts: &PoolCounts,
    now: Timestamp,
    options: &DisruptionOptions,
    in_queue: &dyn Fn(&str) -> bool,
) -> PassOutcome {
    let mut out = PassOutcome::default();
    let snapshot = &*buffer_gated(snapshot, options);
    let (graceful, rejected) = get_candidates(snapshot, DisruptionClass::Graceful, in_queue, now);
    for (node, e) in rejected {
        out.block(options, &node, || e.to_string());
    }
    emptiness(snapshot, counts, &graceful, now, &mut out, options);
    if !out.commands.is_empty() {
        return out;
    }
    let eventual = drifted_candidates(snapshot, in_queue, now);
    static_drift(snapshot, counts, &eventual, now, &mut out, options);
    if !out.commands.is_empty() {
        return out;
    }
    let context = SimulationContext::new(snapshot, &options.scheduler, now);
    let sims = Sims::new(&context).with_counts(counts);
    drift(&sims, snapshot, &eventual, now, &mut out, options);
    if !out.commands.is_empty() {
        return out;
    }
    multi_node(&sims, snapshot, &graceful, now, &mut out, options);
    if !out.commands.is_empty() {
        return out;
    }
    single_node(&sims, snapshot, &graceful, now, &mut out, options);
    if !out.commands.is_empty() {
        return out;
    }
    split::split(&sims, snapshot, &graceful, now, &mut out, options);
    out
}

/// The eventual-class candidates whose NodeClaim is drifted, in snapshot order: all that drift
/// and static drift consider (both skip every other candidate), without building the others.
fn drifted_candidates(
    snapshot: &ClusterSnapshot,
    in_queue: &dyn Fn(&str) -> bool,
    now: Timestamp,
) -> Vec<Candidate> {
    let pdbs = super::candidates::PdbLimits::new(&snapshot.pdbs);
    snapshot
        .nodes
        .iter()
        .filter(|n| condition_true(n, api::condition_types::DRIFTED) == Some(true))
        .filter_map(|n| {
            super::candidates::new_candidate(
                snapshot,
                n,
                &pdbs,
                DisruptionClass::Eventual,
                in_queue,
                now,
            )
            .ok()
        })
        .collect()
}

/// Whether splitting `candidates` still passes on `snapshot` (command re-validation).
pub(crate) fn revalidate_split(
    snapshot: &ClusterSnapshot,
    candidates: Vec<Candidate>,
    now: Timestamp,
    options: &DisruptionOptions,
) -> Result<(), String> {
    let context = SimulationContext::new(snapshot, &options.scheduler, now);
    match split::split_command(&Sims::new(&context), snapshot, candidates, options)? {
        Some(_) => Ok(()),
        None => Err("the candidates no longer need new nodes".into()),
    }
}

/// Split consolidation alone (see [`Method::Split`]) over every candidate of the snapshot.
pub fn split_pass(
    snapshot: &ClusterSnapshot,
    now: Timestamp,
    options: &DisruptionOptions,
) -> PassOutcome {
    one_method_pass(snapshot, now, options, split::split)
}

//! The disruption methods (spec `disruption.md` §2) and a driver that plays the disruption
//! controller's passes forward on a snapshot.
//!
//! [`run_pass`] is one pass of upstream's controller: the methods in production order —
//! emptiness, static drift, drift, multi-node consolidation, single-node consolidation — and the
//! first one that produces a command wins. [`plan`] repeats passes on a copy of the snapshot, applying each
//! command (candidates removed, replacements and moved pods added), until nothing more would be
//! done; expired NodeClaims (§2.5, not a method: no budgets, no simulation) come first.
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
//! - a replacement that §2.6 step 9 narrows to spot while none of its options offers spot is
//!   not issued (upstream issues it, the launch fails and the node stays: the same end state);
//! - a NodeClaim without a `Consolidatable` condition (a hand-written or offline snapshot) is
//!   judged by the rule the condition controller applies (§6.4): initialized and outside
//!   `consolidateAfter`.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use crate::api::{
    self, Condition, ConditionStatus, ConsolidationPolicy, DisruptionReason, NodeClaim,
    NodeClaimSpec, NodeClaimStatus, ObjectMeta,
};
use crate::labels::{self, LabelPolicy};
use crate::lifecycle::expiration::{ExpirationDecision, expiration_decision};
use crate::model::{ClusterNode, InstanceType, Pod, Timestamp};
use crate::requirements::{Operator, Requirement, Requirements};
use crate::scheduling::{NewNodeClaim, Results, SchedulerOptions};
use crate::state::{ClusterSnapshot, StateNode};

use super::budgets::BudgetMapping;
use super::candidates::{
    Candidate, DisruptionClass, check_buffer_pods, current_price, get_candidates,
    interleave_by_node_pool, sort_by_savings_ratio, sort_for_drift,
};
use super::cost::{eviction_cost, is_under_consolidate_after};
use super::simulate::{Simulation, SimulationContext, Simulator, condition_true};

/// The scheduler prepared over a pass's snapshot, built on first use (a pass that ends at
/// emptiness never needs it) and shared by every simulation of the pass.
struct Sims<'c> {
    context: &'c SimulationContext<'c>,
    simulator: std::cell::OnceCell<Simulator<'c>>,
}

impl<'c> Sims<'c> {
    fn new(context: &'c SimulationContext<'c>) -> Sims<'c> {
        Sims {
            context,
            simulator: std::cell::OnceCell::new(),
        }
    }

    fn get(&self) -> &Simulator<'c> {
        self.simulator.get_or_init(|| self.context.simulator())
    }
}

/// The spot-to-spot rule: a single spot node is replaced by spot only with at least this many
/// cheaper instance types (§2.6.1).
pub const MIN_INSTANCE_TYPES_FOR_SPOT_TO_SPOT: usize = 15;
/// Balanced consolidation's `k`: a move is approved when its score is at least `1 / k`.
pub const BALANCED_K: f64 = 2.0;

/// Options of the disruption planner.
#[derive(Debug, Clone, Default)]
pub struct DisruptionOptions {
    /// The scheduler's options (label policy, minValues and preference policies).
    pub scheduler: SchedulerOptions,
    /// Feature gate `SpotToSpotConsolidation` (upstream default: off).
    pub spot_to_spot_consolidation: bool,
    /// Cap on multi-node consolidation's candidates (upstream: 100). `None`: every candidate.
    pub multi_node_candidate_limit: Option<usize>,
    /// Feature gate `CapacityBuffer` (upstream default: off): simulations count the snapshot's
    /// [`ClusterSnapshot::buffer_pods`] as pending pods (spec §5). Emptiness's protection of
    /// nodes hosting buffer pods reads [`ClusterSnapshot::buffer_pod_counts`] either way.
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
}

impl Method {
    /// The contract's name: `emptiness`, `drift`, `multi-node`, `single-node`, `expiration`.
    pub fn as_str(self) -> &'static str {
        match self {
            Method::Emptiness => "emptiness",
            Method::Drift | Method::StaticDrift => "drift",
            Method::MultiNode => "multi-node",
            Method::SingleNode => "single-node",
            Method::Expiration => "expiration",
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

/// A decision: disrupt these candidates, launching these replacements first.
#[derive(Debug, Clone)]
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
    /// `delete` or `replace`, as upstream's metrics label decisions.
    pub fn decision(&self) -> &'static str {
        if self.replacements.is_empty() {
            "delete"
        } else {
            "replace"
        }
    }
}

/// One pass: the command(s) of the first method that acted, and nodes that were blocked.
#[derive(Debug, Clone, Default)]
pub struct PassOutcome {
    /// The commands (one method's).
    pub commands: Vec<Command>,
    /// Nodes that a method would disrupt but could not, with the reason.
    pub blocked: Vec<(String, String)>,
    /// The consolidation methods (emptiness, multi-node, single-node) whose "consolidated"
    /// memo upstream would set in this pass (§2.1): the method ran, had candidates, found no
    /// command, and no candidate was held back by a budget. The caller keeps the memo (upstream
    /// skips a memoized method until cluster state changes); a method that produced a command,
    /// or whose candidates were blocked by a budget, is never listed.
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
    /// Whether single-node consolidation ran out of its time budget in this pass (upstream
    /// counts `voluntary_disruption_consolidation_timeouts_total{consolidation_type="single"}`).
    pub fn single_node_timed_out(&self) -> bool {
        self.unseen_node_pools
            .as_ref()
            .is_some_and(|u| !u.is_empty())
    }
}

/// The whole plan: every command the controller would issue, pass after pass.
#[derive(Debug, Clone, Default)]
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

/// `Consolidatable`: the NodeClaim's condition when present, else the rule of §6.4.
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

// ---------------------------------------------------------------------------------------------
// Consolidation (§2.6)
// ---------------------------------------------------------------------------------------------

/// The launch price of a replacement: its cheapest instance type's cheapest compatible
/// available offering.
fn replacement_price(r: &NewNodeClaim, policy: &LabelPolicy) -> f64 {
    r.instance_types
        .first()
        .and_then(|it| it.cheapest_offering(&r.requirements, policy))
        .map_or(0.0, |o| o.price)
}

fn savings(candidates: &[Candidate], replacements: &[NewNodeClaim], policy: &LabelPolicy) -> f64 {
    candidates.iter().map(|c| c.price).sum::<f64>()
        - replacements
            .iter()
            .map(|r| replacement_price(r, policy))
            .sum::<f64>()
}

fn min_values_ok(r: &NewNodeClaim, its: &[Arc<InstanceType>]) -> Result<(), String> {
    if !r.requirements.has_min_values() {
        return Ok(());
    }
    r.requirements
        .satisfies_min_values(its.iter().map(|it| it.requirements()))
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// What consolidating `candidates` would do: `Ok(None)` means no action.
fn compute_consolidation(
    simulator: &Simulator<'_>,
    candidates: &[Candidate],
    options: &DisruptionOptions,
) -> Result<Option<(Vec<NewNodeClaim>, Simulation)>, String> {
    let policy = &options.scheduler.label_policy;
    let refs: Vec<&Candidate> = candidates.iter().collect();
    let sim = match simulator.simulate(&refs, true) {
        Ok(s) => s,
        Err(_) => return Ok(None),
    };
    if !sim.all_non_pending_scheduled() {
        return Err(format!(
            "not all pods would schedule, {}",
            summarize(&sim.displaced_errors)
        ));
    }
    match sim.results.new_node_claims.len() {
        0 => return Ok(Some((Vec::new(), sim))),
        1 => {}
        n => return Err(format!("can't remove without creating {n} candidates")),
    }
    let mut replacement = sim.results.new_node_claims[0].clone();
    let candidate_price: f64 = candidates.iter().map(|c| c.price).sum();
    let all_spot = candidates
        .iter()
        .all(|c| c.capacity_type == labels::CAPACITY_TYPE_SPOT);
    let admits_spot = replacement
        .requirements
        .get(labels::CAPACITY_TYPE)
        .is_none_or(|r| r.has(labels::CAPACITY_TYPE_SPOT));
    if all_spot && admits_spot {
        if !options.spot_to_spot_consolidation {
            return Err(
                "SpotToSpotConsolidation is disabled, can't replace a spot node with a spot node"
                    .into(),
            );
        }
        replacement.requirements.add(Requirement::new(
            labels::CAPACITY_TYPE,
            Operator::In,
            [labels::CAPACITY_TYPE_SPOT],
        ));
        let reqs = replacement.requirements.clone();
        replacement.instance_types.retain(|it| {
            it.available_offerings().any(|o| {
                o.capacity_type() == labels::CAPACITY_TYPE_SPOT
                    && reqs.is_compatible(o.requirements(), Some(policy))
            })
        });
        filter_by_price(&mut replacement, candidate_price, policy)?;
        if candidates.len() == 1 {
            let n = replacement.instance_types.len();
            if n < MIN_INSTANCE_TYPES_FOR_SPOT_TO_SPOT {
                return Err(format!(
                    "SpotToSpotConsolidation requires {MIN_INSTANCE_TYPES_FOR_SPOT_TO_SPOT} cheaper instance type options than the current candidate to consolidate, got {n}"
                ));
            }
            let mut keep = MIN_INSTANCE_TYPES_FOR_SPOT_TO_SPOT;
            if replacement.requirements.has_min_values()
                && let Ok(needed) = replacement.requirements.satisfies_min_values(
                    replacement
                        .instance_types
                        .iter()
                        .map(|it| it.requirements()),
                )
            {
                keep = keep.max(needed);
            }
            replacement.instance_types.truncate(keep);
        }
        return Ok(Some((vec![replacement], sim)));
    }
    filter_by_price(&mut replacement, candidate_price, policy)?;
    // Prefer spot when both spot and on-demand remain possible (§2.6 step 9). A replacement
    // without a capacity-type requirement admits both (upstream reads it as `Exists`), whatever
    // its instance types offer.
    match replacement.requirements.get(labels::CAPACITY_TYPE).cloned() {
        Some(ct) => {
            if ct.has(labels::CAPACITY_TYPE_SPOT) && ct.has(labels::CAPACITY_TYPE_ON_DEMAND) {
                let mut narrowed = Requirement::new(
                    labels::CAPACITY_TYPE,
                    Operator::In,
                    [labels::CAPACITY_TYPE_SPOT],
                );
                narrowed.set_min_values(ct.min_values());
                replacement.requirements.remove(labels::CAPACITY_TYPE);
                replacement.requirements.add(narrowed);
            }
        }
        None => replacement.requirements.add(Requirement::new(
            labels::CAPACITY_TYPE,
            Operator::In,
            [labels::CAPACITY_TYPE_SPOT],
        )),
    }
    // Deliberate difference: when no option offers what the narrowed requirements allow,
    // upstream still issues the command, its launch fails and the node stays (after a taint and
    // a rollback). The end state is the same without the attempt.
    let launchable = replacement.instance_types.iter().any(|it| {
        it.available_offerings().any(|o| {
            replacement
                .requirements
                .is_compatible(o.requirements(), Some(policy))
        })
    });
    if !launchable {
        return Err(
            "replacement would not launch: narrowed to spot, but no cheaper option offers spot"
                .into(),
        );
    }
    Ok(Some((vec![replacement], sim)))
}

/// Keeps the options whose worst launch price is strictly below `limit`; minValues must stay
/// satisfiable.
fn filter_by_price(
    replacement: &mut NewNodeClaim,
    limit: f64,
    policy: &LabelPolicy,
) -> Result<(), String> {
    let reqs = replacement.requirements.clone();
    replacement.instance_types.retain(|it| {
        it.worst_launch_price(&reqs, policy)
            .is_some_and(|p| p < limit)
    });
    if replacement.instance_types.is_empty() {
        return Err("can't replace with a cheaper node".into());
    }
    min_values_ok(replacement, &replacement.instance_types)
        .map_err(|e| format!("Filtering by price: {e}"))
}

/// Multi-node: drop replacement options priced at or above the cheapest candidate of the same
/// instance type ([A, A, small] → delete one A instead of buying another A), as upstream's
/// `filterOutSameInstanceType` (§2.7):
///
/// - a candidate's type is priced at its cheapest offering compatible with the node's labels
///   (available or not), the cheapest over the candidates of that type; a type none of whose
///   candidates has such an offering is priced 0 (upstream reads a missing map entry), which
///   drops every option;
/// - the limit is the lowest such price among the types the replacement may launch as, unbounded
///   when it shares no type with the candidates;
/// - the options are always re-filtered against the limit with the replacement's current
///   (possibly spot-narrowed) requirements, so an option without any compatible available
///   offering is dropped even when no type is shared; minValues must stay satisfiable.
fn filter_out_same_instance_type(
    replacement: &mut NewNodeClaim,
    candidates: &[Candidate],
    policy: &LabelPolicy,
) -> bool {
    let names: BTreeSet<&str> = replacement
        .instance_types
        .iter()
        .map(|it| it.name())
        .collect();
    let mut price_by_type: BTreeMap<&str, Option<f64>> = BTreeMap::new();
    for c in candidates {
        let Some(it) = c
            .instance_type
            .as_ref()
            .filter(|it| names.contains(it.name()))
        else {
            continue;
        };
        let node_labels = Requirements::from_labels(
            c.node
                .labels()
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str())),
        );
        let cheapest = it
            .offerings
            .iter()
            .filter(|o| node_labels.is_compatible(o.requirements(), Some(policy)))
            .map(|o| o.price)
            .min_by(f64::total_cmp);
        let entry = price_by_type.entry(it.name()).or_insert(None);
        if let Some(p) = cheapest {
            *entry = Some(entry.map_or(p, |e| e.min(p)));
        }
    }
    let max_price = price_by_type
        .values()
        .map(|p| p.unwrap_or(0.0))
        .min_by(f64::total_cmp)
        .unwrap_or(f64::INFINITY);
    let reqs = replacement.requirements.clone();
    replacement.instance_types.retain(|it| {
        it.worst_launch_price(&reqs, policy)
            .is_some_and(|p| p < max_price)
    });
    !replacement.instance_types.is_empty()
        && min_values_ok(replacement, &replacement.instance_types).is_ok()
}

fn summarize(errors: &BTreeMap<String, String>) -> String {
    let shown: Vec<String> = errors
        .iter()
        .take(5)
        .map(|(p, e)| format!("{p}: {e}"))
        .collect();
    shown.join("; ")
}

// ---------------------------------------------------------------------------------------------
// Balanced (§2.8)
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, Default)]
struct PoolTotals {
    cost: f64,
    disruption: f64,
}

fn balanced_totals(
    snapshot: &ClusterSnapshot,
    candidates: &[Candidate],
) -> BTreeMap<String, PoolTotals> {
    let mut totals: BTreeMap<String, PoolTotals> = BTreeMap::new();
    let by_name: BTreeMap<&str, &Candidate> = candidates.iter().map(|c| (c.name(), c)).collect();
    // `TotalCost`: the pool's tracked cost (upstream's ClusterCost: every NodeClaim of the pool
    // with its instance-type, zone and capacity-type labels, at its offering's price) when
    // positive, else the summed prices of the pool's candidates.
    let tracked = tracked_pool_costs(snapshot);
    let mut candidate_cost: BTreeMap<&str, f64> = BTreeMap::new();
    for c in candidates {
        *candidate_cost.entry(c.node_pool.as_str()).or_default() += c.price;
    }
    for (pool, fallback) in candidate_cost {
        let cost = tracked.get(pool).copied().filter(|c| *c > 0.0);
        totals.entry(pool.to_string()).or_default().cost = cost.unwrap_or(fallback);
    }
    for (pool, cost) in tracked {
        if cost > 0.0 {
            totals.entry(pool.to_string()).or_default().cost = cost;
        }
    }
    for node in &snapshot.nodes {
        let Some(pool) = node.nodepool() else {
            continue;
        };
        let cost = match by_name.get(node.name()) {
            Some(c) => c.reschedule_disruption_cost,
            // Upstream's incrementally tracked cost: cluster state drops terminal pods.
            None => {
                1.0 + node
                    .pods
                    .iter()
                    .filter(|p| !p.is_daemonset_pod() && !p.is_terminal())
                    .map(|p| eviction_cost(p).max(0.0))
                    .sum::<f64>()
            }
        };
        totals.entry(pool.to_string()).or_default().disruption += cost;
    }
    totals
}

/// Upstream's ClusterCost per NodePool: the summed price of every NodeClaim whose own labels name
/// the pool, an instance type, a zone and a capacity type, priced at the offering of the pool's
/// instance type with that zone and capacity type (0 when there is none).
fn tracked_pool_costs(snapshot: &ClusterSnapshot) -> BTreeMap<&str, f64> {
    let mut costs: BTreeMap<&str, f64> = BTreeMap::new();
    for claim in snapshot.nodes.iter().filter_map(|n| n.node_claim.as_ref()) {
        let label = |key: &str| claim.metadata.labels.get(key).map(String::as_str);
        let (Some(pool), Some(it), Some(zone), Some(ct)) = (
            label(labels::NODEPOOL),
            label(labels::INSTANCE_TYPE),
            label(labels::ZONE),
            label(labels::CAPACITY_TYPE),
        ) else {
            continue;
        };
        let instance_type = snapshot
            .node_pool(pool)
            .and_then(|p| p.instance_types.iter().find(|t| t.name() == it));
        *costs.entry(pool).or_default() += current_price(instance_type.map(Arc::as_ref), zone, ct);
    }
    costs
}

fn is_balanced(snapshot: &ClusterSnapshot, pool: &str) -> bool {
    snapshot.node_pool(pool).is_some_and(|p| {
        p.node_pool.spec.disruption.effective_consolidation_policy()
            == ConsolidationPolicy::Balanced
    })
}

fn score(totals: &PoolTotals, savings: f64, disruption: f64) -> f64 {
    if totals.cost <= 0.0 || totals.disruption <= 0.0 {
        return 0.0;
    }
    let savings_fraction = savings / totals.cost;
    let disruption_fraction = disruption / totals.disruption;
    if savings_fraction <= 0.0 {
        0.0
    } else if disruption_fraction == 0.0 {
        f64::INFINITY
    } else {
        savings_fraction / disruption_fraction
    }
}

/// Whether every Balanced NodePool of a move approves it.
fn balanced_approves(
    snapshot: &ClusterSnapshot,
    totals: &BTreeMap<String, PoolTotals>,
    candidates: &[Candidate],
    move_savings: f64,
) -> bool {
    let pools: BTreeSet<&str> = candidates.iter().map(|c| c.node_pool.as_str()).collect();
    let move_price: f64 = candidates.iter().map(|c| c.price).sum();
    pools.iter().all(|pool| {
        if !is_balanced(snapshot, pool) {
            return true;
        }
        let Some(t) = totals.get(*pool) else {
            return false;
        };
        let in_pool: Vec<&Candidate> = candidates.iter().filter(|c| c.node_pool == *pool).collect();
        let pool_price: f64 = in_pool.iter().map(|c| c.price).sum();
        let pool_savings = if pools.len() > 1 && move_price > 0.0 {
            move_savings * (pool_price / move_price)
        } else {
            move_savings
        };
        let disruption: f64 = in_pool.iter().map(|c| c.reschedule_disruption_cost).sum();
        score(t, pool_savings, disruption) >= 1.0 / BALANCED_K
    })
}

// ---------------------------------------------------------------------------------------------
// The methods
// ---------------------------------------------------------------------------------------------

fn emptiness(
    snapshot: &ClusterSnapshot,
    candidates: &[Candidate],
    now: Timestamp,
    out: &mut PassOutcome,
    options: &DisruptionOptions,
) {
    let mut cands: Vec<Candidate> = Vec::new();
    for c in candidates.iter().filter(|c| should_empty(snapshot, c, now)) {
        match check_buffer_pods(snapshot, c) {
            Ok(()) => cands.push(c.clone()),
            Err(e) => out.blocked.push((c.name().to_string(), e.to_string())),
        }
    }
    out.eligible_nodes.insert(Method::Emptiness, cands.len());
    if cands.is_empty() {
        return;
    }
    sort_by_savings_ratio(&mut cands);
    let mut budgets = BudgetMapping::build(snapshot, DisruptionReason::Empty, now).remaining();
    let mut taken = Vec::new();
    let mut constrained = false;
    for c in cands {
        let b = budgets.entry(c.node_pool.clone()).or_insert(0);
        if *b == 0 {
            constrained = true;
            out.blocked.push((
                c.name().to_string(),
                super::budgets::blocked_message(DisruptionReason::Empty),
            ));
            continue;
        }
        *b -= 1;
        taken.push(c);
    }
    if taken.is_empty() {
        if !constrained {
            out.consolidated.insert(Method::Emptiness);
        }
        return;
    }
    let saving = savings(&taken, &[], &options.scheduler.label_policy);
    out.commands.push(Command {
        method: Method::Emptiness,
        reason: Reason::Empty,
        candidates: taken,
        replacements: Vec::new(),
        savings_per_hour: saving,
        simulation: None,
    });
}

/// StaticDrift (§2.3): per static NodePool, within its budget and its `nodes` limit and only
/// once scale-down has caught up (running nodes ≤ replicas), each drifted node gets one
/// replacement built straight from the NodePool template (no scheduling simulation: the cloud
/// provider chooses among the pool's instance types).
fn static_drift(
    snapshot: &ClusterSnapshot,
    candidates: &[Candidate],
    now: Timestamp,
    out: &mut PassOutcome,
    options: &DisruptionOptions,
) {
    let mut by_pool: BTreeMap<&str, Vec<&Candidate>> = BTreeMap::new();
    for c in candidates {
        if c.owned_by_static_node_pool
            && condition_true(&c.node, crate::api::condition_types::DRIFTED) == Some(true)
        {
            by_pool.entry(c.node_pool.as_str()).or_default().push(c);
        }
    }
    out.eligible_nodes
        .insert(Method::StaticDrift, by_pool.values().map(Vec::len).sum());
    if by_pool.is_empty() {
        return;
    }
    let budgets = BudgetMapping::build(snapshot, DisruptionReason::Drifted, now).remaining();
    for (pool_name, cands) in by_pool {
        let Some(pool) = snapshot.node_pool(pool_name) else {
            continue;
        };
        let budget = budgets.get(pool_name).copied().unwrap_or(0);
        if budget == 0 {
            for c in &cands {
                out.blocked.push((
                    c.name().to_string(),
                    super::budgets::blocked_message(DisruptionReason::Drifted),
                ));
            }
            continue;
        }
        let in_pool = snapshot
            .nodes
            .iter()
            .filter(|n| n.nodepool() == Some(pool_name));
        let (mut running, mut deleting) = (0usize, 0usize);
        for n in in_pool {
            if n.is_deleting() {
                deleting += 1;
            } else {
                running += 1;
            }
        }
        let replicas = pool.node_pool.spec.replicas.unwrap_or(0).max(0) as usize;
        if running > replicas {
            continue;
        }
        let limit = pool
            .node_pool
            .spec
            .limits
            .as_ref()
            .and_then(|l| l.get(crate::resources::names::NODES))
            .map_or(usize::MAX, |q| q.value().max(0) as usize);
        let want = budget.min(cands.len());
        let granted = want.min(limit.saturating_sub(running + deleting));
        for c in cands.into_iter().take(granted) {
            let replacement = static_replacement(pool, &options.scheduler.label_policy);
            let candidates = vec![c.clone()];
            let saving = savings(
                &candidates,
                std::slice::from_ref(&replacement),
                &options.scheduler.label_policy,
            );
            out.commands.push(Command {
                method: Method::StaticDrift,
                reason: Reason::Drifted,
                candidates,
                replacements: vec![replacement],
                savings_per_hour: saving,
                simulation: None,
            });
        }
    }
}

/// A NodeClaim straight from a NodePool's template: its requirements and labels, every
/// instance type of the pool compatible with them, cheapest first.
fn static_replacement(pool: &crate::state::NodePoolState, policy: &LabelPolicy) -> NewNodeClaim {
    let input = crate::scheduling::NodePoolInput::from_nodepool(
        &pool.node_pool,
        pool.instance_types.clone(),
    );
    let mut requirements =
        crate::requirements::Requirements::from_node_selector_requirements(&input.requirements);
    let mut node_labels = input.labels.clone();
    node_labels.insert(labels::NODEPOOL.to_string(), input.name.clone());
    if let Some((k, v)) = &input.node_class_label {
        node_labels.insert(k.clone(), v.clone());
    }
    for (k, v) in &node_labels {
        requirements.add(Requirement::new(k, Operator::In, [v.as_str()]));
    }
    let mut its: Vec<(f64, usize, Arc<InstanceType>)> = input
        .instance_types
        .iter()
        .enumerate()
        .filter(|(_, it)| it.requirements().intersects(&requirements).is_ok())
        .filter_map(|(i, it)| {
            it.cheapest_offering(&requirements, policy)
                .map(|o| (o.price, i, it.clone()))
        })
        .collect();
    its.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    NewNodeClaim {
        node_pool: input.name.clone(),
        requirements,
        instance_types: its.into_iter().map(|x| x.2).collect(),
        pods: Vec::new(),
        requests: crate::resources::ResourceList::new(),
        labels: node_labels,
        taints: input.taints.clone(),
        startup_taints: input.startup_taints.clone(),
        min_values_relaxed: false,
        reservation_ids: Vec::new(),
    }
}

fn drift(
    sims: &Sims<'_>,
    snapshot: &ClusterSnapshot,
    candidates: &[Candidate],
    now: Timestamp,
    out: &mut PassOutcome,
    options: &DisruptionOptions,
) {
    let mut cands: Vec<Candidate> = candidates
        .iter()
        .filter(|c| should_drift(c))
        .cloned()
        .collect();
    out.eligible_nodes.insert(Method::Drift, cands.len());
    if cands.is_empty() {
        return;
    }
    sort_for_drift(&mut cands);
    let budgets = BudgetMapping::build(snapshot, DisruptionReason::Drifted, now).remaining();
    for c in cands {
        if budgets.get(&c.node_pool).copied().unwrap_or(0) == 0 {
            out.blocked.push((
                c.name().to_string(),
                super::budgets::blocked_message(DisruptionReason::Drifted),
            ));
            continue;
        }
        let sim = match sims.get().simulate(&[&c], false) {
            Ok(s) => s,
            Err(_) => continue,
        };
        if !sim.all_non_pending_scheduled() {
            out.blocked.push((
                c.name().to_string(),
                format!(
                    "not all pods would schedule, {}",
                    summarize(&sim.displaced_errors)
                ),
            ));
            continue;
        }
        let replacements = sim.results.new_node_claims.clone();
        let candidates = vec![c];
        let saving = savings(&candidates, &replacements, &options.scheduler.label_policy);
        out.commands.push(Command {
            method: Method::Drift,
            reason: Reason::Drifted,
            candidates,
            replacements,
            savings_per_hour: saving,
            simulation: Some(sim.results),
        });
        return;
    }
}

fn consolidation_candidates(
    snapshot: &ClusterSnapshot,
    candidates: &[Candidate],
    now: Timestamp,
) -> Vec<Candidate> {
    let mut cands: Vec<Candidate> = candidates
        .iter()
        .filter(|c| should_consolidate(snapshot, c, now))
        .cloned()
        .collect();
    sort_by_savings_ratio(&mut cands);
    cands
}

fn multi_node(
    sims: &Sims<'_>,
    snapshot: &ClusterSnapshot,
    candidates: &[Candidate],
    now: Timestamp,
    out: &mut PassOutcome,
    options: &DisruptionOptions,
) {
    let cands = consolidation_candidates(snapshot, candidates, now);
    out.eligible_nodes.insert(Method::MultiNode, cands.len());
    if cands.is_empty() {
        return;
    }
    let mut budgets =
        BudgetMapping::build(snapshot, DisruptionReason::Underutilized, now).remaining();
    let mut kept = Vec::new();
    let mut constrained = false;
    for c in cands {
        let b = budgets.entry(c.node_pool.clone()).or_insert(0);
        if *b == 0 {
            constrained = true;
            continue;
        }
        *b -= 1;
        kept.push(c);
    }
    if kept.len() < 2 {
        if !constrained {
            out.consolidated.insert(Method::MultiNode);
        }
        return;
    }
    let totals = balanced_totals(snapshot, candidates);
    let policy = &options.scheduler.label_policy;
    let max_parallel = options
        .multi_node_candidate_limit
        .map_or(kept.len(), |l| l.min(kept.len()));
    let (mut lo, mut hi) = (
        1usize,
        if kept.len() <= max_parallel {
            kept.len() - 1
        } else {
            max_parallel
        },
    );
    // The best valid trial: (prefix end, replacements, savings, simulation). Its candidates are
    // copied once, at the end.
    let mut best: Option<(usize, Vec<NewNodeClaim>, f64, Results)> = None;
    let mut trials = 0usize;
    while lo <= hi {
        if options.multi_node_time_budget.exhausted(trials) {
            // Upstream returns the last valid command found before the deadline, if any.
            out.multi_node_timed_out = true;
            break;
        }
        trials += 1;
        let mid = (lo + hi) / 2;
        let prefix = &kept[..=mid];
        let valid = match compute_consolidation(sims.get(), prefix, options) {
            Ok(Some((mut replacements, sim))) => {
                let ok = replacements
                    .first_mut()
                    .is_none_or(|r| filter_out_same_instance_type(r, prefix, policy));
                let saving = savings(prefix, &replacements, policy);
                if ok && balanced_approves(snapshot, &totals, prefix, saving) {
                    best = Some((mid, replacements, saving, sim.results));
                    true
                } else {
                    false
                }
            }
            _ => false,
        };
        if valid {
            lo = mid + 1;
        } else if mid == 0 {
            break;
        } else {
            hi = mid - 1;
        }
    }
    match best {
        Some((end, replacements, saving, results)) => out.commands.push(Command {
            method: Method::MultiNode,
            reason: Reason::Underutilized,
            candidates: kept[..=end].to_vec(),
            replacements,
            savings_per_hour: saving,
            simulation: Some(results),
        }),
        None if !constrained => {
            out.consolidated.insert(Method::MultiNode);
        }
        None => {}
    }
}

fn single_node(
    sims: &Sims<'_>,
    snapshot: &ClusterSnapshot,
    candidates: &[Candidate],
    now: Timestamp,
    out: &mut PassOutcome,
    options: &DisruptionOptions,
) {
    let cands = interleave_by_node_pool(
        consolidation_candidates(snapshot, candidates, now),
        &options.previously_unseen_node_pools,
    );
    out.eligible_nodes.insert(Method::SingleNode, cands.len());
    if cands.is_empty() {
        return;
    }
    let budgets = BudgetMapping::build(snapshot, DisruptionReason::Underutilized, now).remaining();
    let totals = balanced_totals(snapshot, candidates);
    let policy = &options.scheduler.label_policy;
    let mut constrained = false;
    let mut unseen: BTreeSet<String> = cands.iter().map(|c| c.node_pool.clone()).collect();
    for (considered, c) in cands.into_iter().enumerate() {
        if options.single_node_time_budget.exhausted(considered) {
            // Upstream gives up without a command and remembers the pools it never reached.
            out.unseen_node_pools = Some(unseen);
            return;
        }
        unseen.remove(&c.node_pool);
        if budgets.get(&c.node_pool).copied().unwrap_or(0) == 0 {
            constrained = true;
            out.blocked.push((
                c.name().to_string(),
                super::budgets::blocked_message(DisruptionReason::Underutilized),
            ));
            continue;
        }
        // Balanced pre-filter: even deleting the node outright must pass the threshold.
        if is_balanced(snapshot, &c.node_pool)
            && totals.get(&c.node_pool).is_some_and(|t| t.cost > 0.0)
            && !balanced_approves(snapshot, &totals, std::slice::from_ref(&c), c.price)
        {
            continue;
        }
        let one = vec![c];
        match compute_consolidation(sims.get(), &one, options) {
            Ok(Some((replacements, sim))) => {
                let saving = savings(&one, &replacements, policy);
                if !balanced_approves(snapshot, &totals, &one, saving) {
                    continue;
                }
                out.commands.push(Command {
                    method: Method::SingleNode,
                    reason: Reason::Underutilized,
                    candidates: one,
                    replacements,
                    savings_per_hour: saving,
                    simulation: Some(sim.results),
                });
                return;
            }
            Ok(None) => {}
            Err(reason) => {
                if let Some(c) = one.first() {
                    out.blocked.push((c.name().to_string(), reason));
                }
            }
        }
    }
    if !constrained {
        out.consolidated.insert(Method::SingleNode);
    }
    // Every candidate considered: no NodePool is left unseen.
    out.unseen_node_pools = Some(unseen);
}

/// Evaluates consolidating exactly `candidates` (§2.6): the command it would give (a delete or a
/// replacement by one cheaper node), `Ok(None)` when a candidate is already being deleted, or
/// the reason it is not worth doing. Budgets and Balanced scoring are not applied here.
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

/// Multi-node consolidation alone (§2.7), over every candidate of the snapshot.
pub fn multi_node_pass(
    snapshot: &ClusterSnapshot,
    now: Timestamp,
    options: &DisruptionOptions,
) -> PassOutcome {
    one_method_pass(snapshot, now, options, multi_node)
}

/// Single-node consolidation alone (§2.9), over every candidate of the snapshot: what upstream's
/// controller runs next when multi-node consolidation found nothing or its command failed
/// validation.
pub fn single_node_pass(
    snapshot: &ClusterSnapshot,
    now: Timestamp,
    options: &DisruptionOptions,
) -> PassOutcome {
    one_method_pass(snapshot, now, options, single_node)
}

/// One pass of the disruption controller (§2.1 step 4): emptiness, static drift, drift,
/// multi-node and single-node consolidation in production order; the first method with a
/// command wins (static drift may issue several commands, one per replaced node).
/// `in_queue` says which provider ids are already being disrupted.
pub fn run_pass(
    snapshot: &ClusterSnapshot,
    now: Timestamp,
    options: &DisruptionOptions,
    in_queue: &dyn Fn(&str) -> bool,
) -> PassOutcome {
    let mut out = PassOutcome::default();
    let snapshot = &*buffer_gated(snapshot, options);
    let (graceful, rejected) = get_candidates(snapshot, DisruptionClass::Graceful, in_queue, now);
    out.blocked
        .extend(rejected.into_iter().map(|(n, e)| (n, e.to_string())));
    emptiness(snapshot, &graceful, now, &mut out, options);
    if !out.commands.is_empty() {
        return out;
    }
    let (eventual, _) = get_candidates(snapshot, DisruptionClass::Eventual, in_queue, now);
    static_drift(snapshot, &eventual, now, &mut out, options);
    if !out.commands.is_empty() {
        return out;
    }
    let context = SimulationContext::new(snapshot, &options.scheduler, now);
    let sims = Sims::new(&context);
    drift(&sims, snapshot, &eventual, now, &mut out, options);
    if !out.commands.is_empty() {
        return out;
    }
    multi_node(&sims, snapshot, &graceful, now, &mut out, options);
    if !out.commands.is_empty() {
        return out;
    }
    single_node(&sims, snapshot, &graceful, now, &mut out, options);
    out
}

// ---------------------------------------------------------------------------------------------
// Playing commands forward
// ---------------------------------------------------------------------------------------------

/// Every command the controller would issue from `snapshot` at `now`: expired NodeClaims first,
/// then passes until no method acts (each command applied to a working copy of the snapshot).
pub fn plan(snapshot: &ClusterSnapshot, now: Timestamp, options: &DisruptionOptions) -> Plan {
    let mut plan = Plan::default();
    let mut working = snapshot.clone();
    let mut counter = 0usize;

    // Expiration (§2.5): forceful, outside budgets and candidacy rules.
    let expired: Vec<Arc<StateNode>> = working
        .nodes
        .iter()
        .filter(|n| {
            n.node_claim.as_ref().is_some_and(|c| {
                matches!(
                    expiration_decision(c, now),
                    ExpirationDecision::Expire { .. }
                )
            })
        })
        .cloned()
        .collect();
    if !expired.is_empty() {
        let candidates: Vec<Candidate> = expired
            .iter()
            .map(|n| super::candidates::describe_candidate(&working, n))
            .collect();
        let cmd = Command {
            method: Method::Expiration,
            reason: Reason::Expired,
            savings_per_hour: savings(&candidates, &[], &options.scheduler.label_policy),
            candidates,
            replacements: Vec::new(),
            simulation: None,
        };
        apply(&mut working, &cmd, now, &mut counter, options);
        plan.commands.push(cmd);
    }

    let limit = 2 * working.nodes.len() + 10;
    for _ in 0..limit {
        let pass = run_pass(&working, now, options, &|_| false);
        for (node, reason) in pass.blocked {
            plan.blocked.entry(node).or_insert(reason);
        }
        if pass.commands.is_empty() {
            break;
        }
        for cmd in pass.commands {
            for c in &cmd.candidates {
                plan.blocked.remove(c.name());
            }
            apply(&mut working, &cmd, now, &mut counter, options);
            plan.commands.push(cmd);
        }
    }
    let disrupted: BTreeSet<String> = plan
        .commands
        .iter()
        .flat_map(|c| c.candidates.iter().map(|c| c.name().to_string()))
        .collect();
    plan.blocked.retain(|n, _| !disrupted.contains(n));
    plan
}

/// Applies a command to the working snapshot: candidates leave; replacements join as
/// initialized nodes launched at `now` on their cheapest option; displaced pods move where the
/// simulation put them (or become pending when there was no simulation).
fn apply(
    snapshot: &mut ClusterSnapshot,
    cmd: &Command,
    now: Timestamp,
    counter: &mut usize,
    options: &DisruptionOptions,
) {
    let policy = &options.scheduler.label_policy;
    let gone: BTreeSet<&str> = cmd.candidates.iter().map(|c| c.name()).collect();
    let displaced: BTreeMap<String, Pod> = cmd
        .candidates
        .iter()
        .flat_map(|c| c.reschedulable_pods.iter())
        .map(|p| (p.key(), p.clone()))
        .collect();
    snapshot.nodes.retain(|n| !gone.contains(n.name()));
    let sim = cmd.simulation.as_ref();
    let mut placed = BTreeSet::new();
    for (i, r) in cmd.replacements.iter().enumerate() {
        *counter += 1;
        let name = format!("{}-replacement-{:04}", r.node_pool, *counter);
        let class = snapshot.node_pool(&r.node_pool).map_or_else(
            || api::NodeClassReference::new("", "", ""),
            |p| p.node_pool.spec.template.spec.node_class_ref.clone(),
        );
        let mut node = new_state_node(&name, r, class, now, policy);
        let sim_claim = sim.and_then(|s| s.new_node_claims.get(i));
        for key in sim_claim.map(|c| c.pods.as_slice()).unwrap_or_default() {
            if let Some(p) = displaced.get(key) {
                let mut p = p.clone();
                p.node_name = Some(name.clone());
                node.pods.push(p);
                placed.insert(key.clone());
            }
        }
        snapshot.nodes.push(Arc::new(node));
    }
    let Some(sim) = sim else {
        snapshot.pending_pods.extend(displaced.into_values());
        return;
    };
    for dest in &sim.existing_nodes {
        let Some(target) = snapshot
            .nodes
            .iter_mut()
            .find(|n| super::simulate::cluster_node(n).hostname() == dest.name)
        else {
            continue;
        };
        let target = Arc::make_mut(target);
        for key in &dest.pods {
            if let Some(p) = displaced.get(key) {
                let mut p = p.clone();
                p.node_name = Some(target.name().to_string());
                target.pods.push(p);
                placed.insert(key.clone());
            }
        }
    }
    for (key, p) in displaced {
        if !placed.contains(&key) {
            snapshot.pending_pods.push(p);
        }
    }
}

fn new_state_node(
    name: &str,
    r: &NewNodeClaim,
    class: api::NodeClassReference,
    now: Timestamp,
    policy: &LabelPolicy,
) -> StateNode {
    let it = r.instance_types.first();
    let offering = it.and_then(|it| it.cheapest_offering(&r.requirements, policy));
    let mut node_labels = r.labels.clone();
    node_labels.insert(labels::NODEPOOL.to_string(), r.node_pool.clone());
    node_labels.insert(labels::HOSTNAME.to_string(), name.to_string());
    node_labels.insert(labels::INITIALIZED.to_string(), "true".to_string());
    node_labels.insert(labels::REGISTERED.to_string(), "true".to_string());
    if let Some(it) = it {
        node_labels.insert(labels::INSTANCE_TYPE.to_string(), it.name().to_string());
        for req in it.requirements().iter() {
            if let Some(v) = req.single_value() {
                node_labels
                    .entry(req.key().to_string())
                    .or_insert_with(|| v.to_string());
            }
        }
    }
    if let Some(o) = offering {
        node_labels.insert(labels::ZONE.to_string(), o.zone().to_string());
        node_labels.insert(
            labels::CAPACITY_TYPE.to_string(),
            o.capacity_type().to_string(),
        );
    }
    let mut node = ClusterNode::new(name);
    node.labels = node_labels.clone();
    node.taints = r.taints.clone();
    node.managed = true;
    node.initialized = true;
    node.creation_timestamp = now;
    if let Some(it) = it {
        node.capacity = it.capacity().clone();
        node.allocatable = it.allocatable().clone();
    }
    let stamp = now.to_string();
    let claim = NodeClaim {
        api_version: api::API_VERSION.to_string(),
        kind: "NodeClaim".to_string(),
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            labels: node_labels,
            creation_timestamp: Some(stamp.clone()),
            ..ObjectMeta::default()
        },
        spec: NodeClaimSpec {
            taints: r.taints.clone(),
            startup_taints: r.startup_taints.clone(),
            requirements: Some(
                r.node_claim_requirements(policy)
                    .to_node_selector_requirements(),
            ),
            ..NodeClaimSpec::new(class)
        },
        status: NodeClaimStatus {
            node_name: Some(name.to_string()),
            provider_id: Some(format!("planned://{name}")),
            capacity: node.capacity.clone(),
            allocatable: node.allocatable.clone(),
            conditions: vec![Condition {
                type_: crate::api::condition_types::INITIALIZED.to_string(),
                status: ConditionStatus::True,
                reason: None,
                message: None,
                last_transition_time: Some(stamp),
                observed_generation: None,
            }],
            ..NodeClaimStatus::default()
        },
    };
    StateNode {
        node: Some(node),
        node_claim: Some(claim),
        pods: Vec::new(),
        marked_for_deletion: false,
        nominated_until: None,
        ready: true,
        volume_limits: Default::default(),
    }
}

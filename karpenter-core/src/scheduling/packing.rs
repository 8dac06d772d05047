//! Cost-aware packing: the opt-in `cost` packing policy, layered on top of the faithful solve.
//!
//! Upstream packs a batch of pending pods onto as few NodeClaims as will hold them, growing each
//! claim to bigger instance types; price only picks among the types that fit the whole claim.
//! Under the `cost` policy the scheduler also tries solves in which the NodePools that opted in
//! offer only their instance types up to a size cap (and down to a minimum node size), and keeps
//! the cheapest plan. Every candidate is a complete faithful solve of the same input whose
//! NodePools simply offer fewer instance types, so it honours every constraint the faithful
//! solve honours (requirements, taints, topology, affinities, limits, `minValues`, DaemonSet
//! overhead per node, host ports, volumes). A candidate is kept only when:
//!
//! - it schedules every pod the faithful solve schedules;
//! - it costs strictly less than the faithful plan (so the result is never dearer);
//! - the topology domains the pods' spread and affinity terms count are the same with and
//!   without the cap (a cap must not hide a zone from a spread constraint);
//! - it respects the guard rails of [`PackingOptions`]: at most
//!   [`max_new_nodes`](PackingOptions::max_new_nodes) new NodeClaims, and every claim that may
//!   launch as spot keeps at least
//!   [`spot_min_instance_types`](PackingOptions::spot_min_instance_types) instance types
//!   (offering diversity for spot).
//!
//! On *free-form* batches (no topology spread, no pod affinity, no reserved offering, not a
//! consolidation simulation) the search first re-packs the cost pools' pods with a
//! multi-resource bin packer and solves each proposed node's pods on their own (see
//! `improve.rs`): the cap sweep runs when that finds nothing cheaper, and on every other batch.
//!
//! The policy is chosen per NodePool with the annotation [`PACKING_ANNOTATION`]
//! (`karpenter-rs.io/packing: cost|upstream`, see [`NodePoolInput::packing`]) and overridden
//! globally by [`PackingOptions::policy`]. Without any pool under `cost`, [`solve_packed`]
//! returns exactly the faithful solve. The search is deterministic: the caps are tried in a
//! fixed order and ties keep the earlier (larger-cap) plan.
//!
//! [`NodePoolInput::packing`]: super::NodePoolInput::packing

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use crate::labels::{self, LabelPolicy};
use crate::model::{InstanceType, Pod};
use crate::requirements::{Operator, Requirement, Requirements};
use crate::resources::names;

use super::{NewNodeClaim, NodePoolInput, Results, SchedulerOptions, SchedulingInput, solve};

mod binpack;
mod improve;

/// The NodePool annotation choosing its packing policy: `cost` or `upstream` (the default).
pub const PACKING_ANNOTATION: &str = "karpenter-rs.io/packing";

/// How pending pods are packed onto new NodeClaims.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum PackingPolicy {
    /// Upstream Karpenter's packing, decision for decision (the default).
    #[default]
    Upstream,
    /// Search for a cheaper plan that honours the same constraints (see the
    /// [module documentation](self)).
    Cost,
}

impl PackingPolicy {
    /// The policy's name: `upstream` or `cost`.
    pub fn as_str(self) -> &'static str {
        match self {
            PackingPolicy::Upstream => "upstream",
            PackingPolicy::Cost => "cost",
        }
    }

    /// The policy a NodePool's annotations ask for: `None` without [`PACKING_ANNOTATION`], an
    /// error naming the annotation when its value is neither `cost` nor `upstream`.
    pub fn from_annotations(
        annotations: &BTreeMap<String, String>,
    ) -> Result<Option<PackingPolicy>, UnknownPackingPolicy> {
        annotations
            .get(PACKING_ANNOTATION)
            .map(|v| v.parse())
            .transpose()
    }
}

impl fmt::Display for PackingPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A packing policy name that is neither `cost` nor `upstream`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown packing policy {value:?}: the policies are \"upstream\" and \"cost\"")]
pub struct UnknownPackingPolicy {
    /// The value given.
    pub value: String,
}

impl FromStr for PackingPolicy {
    type Err = UnknownPackingPolicy;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "upstream" => Ok(PackingPolicy::Upstream),
            "cost" => Ok(PackingPolicy::Cost),
            _ => Err(UnknownPackingPolicy {
                value: s.to_string(),
            }),
        }
    }
}

/// Options of the packing policy, part of [`SchedulerOptions`]. Start from
/// [`PackingOptions::default`] and change what differs with the `with_*` methods.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PackingOptions {
    /// The policy of every NodePool, overriding their annotations; `None` (the default) lets
    /// each NodePool's [`PACKING_ANNOTATION`] decide (absent: `upstream`).
    pub policy: Option<PackingPolicy>,
    /// Guard rail: under `cost`, new nodes have at least this many CPU millicores of capacity
    /// (default 2000: no node smaller than 2 vCPU is chosen *for cost*; the faithful plan is
    /// kept when it is cheapest).
    pub min_node_cpu_millis: i64,
    /// Guard rail: a cost-aware plan creates at most this many new NodeClaims in one batch
    /// (default 500; the faithful plan is never rejected by it).
    pub max_new_nodes: usize,
    /// Guard rail: every NodeClaim of a cost-aware plan that may launch as spot keeps at least
    /// this many instance types to choose from (default 5), or as many as the faithful plan's
    /// least flexible spot claim if that is fewer. `minValues` is always honoured on top.
    pub spot_min_instance_types: usize,
    /// The most candidate solves the cap sweep runs beyond the faithful one (default 12).
    pub max_candidate_solves: usize,
    /// Guard rail: a NodeClaim of a re-packed free-form plan offers at most this many instance
    /// types, the cheapest that hold its pods (default 30, never fewer than
    /// [`spot_min_instance_types`](Self::spot_min_instance_types)).
    pub instance_types_per_claim: usize,
}

impl Default for PackingOptions {
    fn default() -> Self {
        PackingOptions {
            policy: None,
            min_node_cpu_millis: 2000,
            max_new_nodes: 500,
            spot_min_instance_types: 5,
            max_candidate_solves: 12,
            instance_types_per_claim: 30,
        }
    }
}

impl PackingOptions {
    /// The options with this global policy override (`None`: per NodePool).
    pub fn with_policy(mut self, policy: Option<PackingPolicy>) -> Self {
        self.policy = policy;
        self
    }

    /// The options with this minimum node size, in CPU millicores.
    pub fn with_min_node_cpu_millis(mut self, millis: i64) -> Self {
        self.min_node_cpu_millis = millis;
        self
    }

    /// The options with this maximum number of new NodeClaims per batch.
    pub fn with_max_new_nodes(mut self, max: usize) -> Self {
        self.max_new_nodes = max;
        self
    }

    /// The options with this minimum number of instance types per spot-capable claim.
    pub fn with_spot_min_instance_types(mut self, min: usize) -> Self {
        self.spot_min_instance_types = min;
        self
    }

    /// The options with this many instance types per re-packed NodeClaim.
    pub fn with_instance_types_per_claim(mut self, n: usize) -> Self {
        self.instance_types_per_claim = n;
        self
    }

    /// The options with this budget of candidate solves.
    pub fn with_max_candidate_solves(mut self, max: usize) -> Self {
        self.max_candidate_solves = max;
        self
    }
}

/// What [`solve_packed`] found: the plan the policy chooses, and the faithful plan's cost next
/// to it.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct PackingOutcome {
    /// The plan the policy chooses: the faithful solve, or a cheaper cost-aware one.
    pub results: Results,
    /// The hourly cost of [`results`](Self::results)' new NodeClaims (see [`plan_cost`]).
    pub cost: f64,
    /// The hourly cost of the faithful solve's new NodeClaims.
    pub faithful_cost: f64,
    /// Whether some NodePool was under the `cost` policy (otherwise no search ran).
    pub searched: bool,
    /// Whether [`results`](Self::results) is a cost-aware plan rather than the faithful one.
    pub improved: bool,
    /// Candidate solves run beyond the faithful one.
    pub candidate_solves: usize,
    /// The faithful plan, when [`results`](Self::results) replaced it (`improved`).
    pub faithful: Option<Results>,
}

/// The policy each NodePool of `input` is under: the global override, else its annotation.
pub fn pool_policies(input: &SchedulingInput, options: &SchedulerOptions) -> Vec<PackingPolicy> {
    input
        .node_pools
        .iter()
        .map(|np| {
            options
                .packing
                .policy
                .or(np.packing)
                .unwrap_or(PackingPolicy::Upstream)
        })
        .collect()
}

/// The hourly price of one new NodeClaim: its cheapest available offering compatible with its
/// requirements among its instance types (0 when none is, which a solve never returns).
pub fn claim_price(claim: &NewNodeClaim, policy: &LabelPolicy) -> f64 {
    claim
        .instance_types
        .iter()
        .filter_map(|it| it.cheapest_offering(&claim.requirements, policy))
        .map(|o| o.price)
        .min_by(f64::total_cmp)
        .unwrap_or(0.0)
}

/// The hourly cost of a solve: the sum of [`claim_price`] over its new NodeClaims.
pub fn plan_cost(results: &Results, policy: &LabelPolicy) -> f64 {
    results
        .new_node_claims
        .iter()
        .map(|c| claim_price(c, policy))
        .sum()
}

/// A solve under the packing policy; see [`solve_packed`]. Without any NodePool under `cost`
/// this is exactly [`solve`].
pub fn solve_with_policy(input: &SchedulingInput, options: &SchedulerOptions) -> Results {
    solve_packed(input, options).results
}

/// Runs the faithful solve and, when some NodePool is under the `cost` policy, the cost-aware
/// search (see the [module documentation](self)).
pub fn solve_packed(input: &SchedulingInput, options: &SchedulerOptions) -> PackingOutcome {
    let faithful = solve(input, options);
    let policy = &options.label_policy;
    let faithful_cost = plan_cost(&faithful, policy);
    let policies = pool_policies(input, options);
    let mut outcome = PackingOutcome {
        results: faithful,
        cost: faithful_cost,
        faithful_cost,
        searched: false,
        improved: false,
        candidate_solves: 0,
        faithful: None,
    };
    if !policies.contains(&PackingPolicy::Cost) || outcome.results.new_node_claims.is_empty() {
        return outcome;
    }
    outcome.searched = true;
    Search::new(input, options, &policies, &outcome.results).run(&mut outcome);
    outcome
}

/// The acceptance test a candidate passes against the faithful plan.
pub(super) struct Guard<'a> {
    faithful_errors: BTreeSet<String>,
    max_new_nodes: usize,
    spot_min_types: usize,
    policy: &'a LabelPolicy,
}

impl<'a> Guard<'a> {
    fn new(faithful: &Results, options: &'a SchedulerOptions) -> Self {
        let policy = &options.label_policy;
        let faithful_spot_min = faithful
            .new_node_claims
            .iter()
            .filter(|c| may_launch_spot(c, policy))
            .map(|c| c.instance_types.len())
            .min()
            .unwrap_or(usize::MAX);
        Guard {
            faithful_errors: faithful.pod_errors.keys().cloned().collect(),
            max_new_nodes: options
                .packing
                .max_new_nodes
                .max(faithful.new_node_claims.len()),
            spot_min_types: options
                .packing
                .spot_min_instance_types
                .min(faithful_spot_min),
            policy,
        }
    }

    /// Whether the candidate schedules every pod the faithful plan schedules and keeps the
    /// guard rails.
    pub(super) fn accepts(&self, candidate: &Results) -> bool {
        candidate
            .pod_errors
            .keys()
            .all(|k| self.faithful_errors.contains(k))
            && candidate.new_node_claims.len() <= self.max_new_nodes
            && candidate.new_node_claims.iter().all(|c| {
                c.instance_types.len() >= self.spot_min_types || !may_launch_spot(c, self.policy)
            })
    }
}

/// Whether some instance type of the claim has an available spot offering compatible with it.
fn may_launch_spot(claim: &NewNodeClaim, policy: &LabelPolicy) -> bool {
    claim.instance_types.iter().any(|it| {
        it.available_offerings().any(|o| {
            o.capacity_type() == labels::CAPACITY_TYPE_SPOT
                && claim
                    .requirements
                    .is_compatible(o.requirements(), Some(policy))
        })
    })
}

/// An instance type's CPU capacity in millicores.
fn cpu_millis(it: &InstanceType) -> i64 {
    it.capacity().get_or_zero(names::CPU).milli_value()
}

/// The topology keys some pod's spread constraint or pod (anti-)affinity term counts domains
/// of, hostname excepted (hostname domains come from nodes, never from instance types).
fn topology_keys(input: &SchedulingInput) -> BTreeSet<String> {
    let mut keys = BTreeSet::new();
    let pods = input
        .pods
        .iter()
        .chain(input.existing_nodes.iter().flat_map(|n| n.pods.iter()));
    for pod in pods {
        add_pod_topology_keys(pod, &mut keys);
    }
    keys.remove(labels::HOSTNAME);
    keys
}

fn add_pod_topology_keys(pod: &Pod, keys: &mut BTreeSet<String>) {
    for c in &pod.topology_spread_constraints {
        keys.insert(c.topology_key.clone());
    }
    for a in [&pod.pod_affinity, &pod.pod_anti_affinity]
        .into_iter()
        .flatten()
    {
        for t in &a.required {
            keys.insert(t.topology_key.clone());
        }
        for t in &a.preferred {
            keys.insert(t.pod_affinity_term.topology_key.clone());
        }
    }
}

/// The pool's requirements on the topology keys, as the domain universe reads them (template
/// requirements and template labels).
fn pool_key_requirements(np: &NodePoolInput) -> Requirements {
    let mut reqs = Requirements::from_node_selector_requirements(&np.requirements);
    for (k, v) in &np.labels {
        reqs.add(Requirement::new(k, Operator::In, [v.as_str()]));
    }
    reqs
}

/// The values of `key` that instance type `it` contributes to the pool's topology domains
/// (the pool's requirement intersected with the type's, or whichever side defines the key).
fn domain_values(pool: &Requirements, it: &InstanceType, key: &str) -> BTreeSet<String> {
    match (pool.get(key), it.requirements().get(key)) {
        (Some(p), Some(t)) => p.intersection(t).values().map(str::to_string).collect(),
        (Some(p), None) => p.values().map(str::to_string).collect(),
        (None, Some(t)) => t.values().map(str::to_string).collect(),
        (None, None) => BTreeSet::new(),
    }
}

/// The free-form re-pack and the cap sweep.
struct Search<'a> {
    input: &'a SchedulingInput,
    options: &'a SchedulerOptions,
    /// Pools under `cost`, by index into `input.node_pools`.
    cost_pools: Vec<usize>,
    guard: Guard<'a>,
    /// Per pool: the topology keys and their domain values over all of the pool's types.
    keys: BTreeSet<String>,
    pool_reqs: Vec<Requirements>,
}

impl<'a> Search<'a> {
    fn new(
        input: &'a SchedulingInput,
        options: &'a SchedulerOptions,
        policies: &[PackingPolicy],
        faithful: &Results,
    ) -> Self {
        let cost_pools = policies
            .iter()
            .enumerate()
            .filter(|(_, p)| **p == PackingPolicy::Cost)
            .map(|(i, _)| i)
            .collect();
        Search {
            input,
            options,
            cost_pools,
            guard: Guard::new(faithful, options),
            keys: topology_keys(input),
            pool_reqs: input.node_pools.iter().map(pool_key_requirements).collect(),
        }
    }

    /// The candidate caps: the distinct CPU capacities of the cost pools' instance types at or
    /// above the minimum node size, largest first, without the largest (no cap at all), thinned
    /// to the solve budget by keeping caps spread evenly over the list.
    fn caps(&self) -> Vec<i64> {
        let min = self.options.packing.min_node_cpu_millis;
        let caps: BTreeSet<i64> = self
            .cost_pools
            .iter()
            .flat_map(|&i| self.input.node_pools[i].instance_types.iter())
            .map(|it| cpu_millis(it))
            .filter(|&c| c >= min)
            .collect();
        let mut caps: Vec<i64> = caps.into_iter().rev().collect();
        // A cap at the largest size is the faithful solve unless a floor applies.
        let floor_removes = self
            .cost_pools
            .iter()
            .flat_map(|&i| self.input.node_pools[i].instance_types.iter())
            .any(|it| cpu_millis(it) < min);
        if !floor_removes && !caps.is_empty() {
            caps.remove(0);
        }
        let budget = self.options.packing.max_candidate_solves;
        if caps.len() > budget && budget > 0 {
            let n = caps.len();
            caps = (0..budget)
                .map(|i| caps[i * (n - 1) / (budget - 1).max(1)])
                .collect::<BTreeSet<_>>()
                .into_iter()
                .rev()
                .collect();
        } else if budget == 0 {
            caps.clear();
        }
        caps
    }

    /// The cost pools' instance types within `[min, cap]`, or `None` when the cap would change
    /// a topology domain some pod counts (or leave a cost pool with no instance type while it
    /// had some).
    fn capped_pools(&self, cap: i64) -> Option<Vec<(usize, Vec<Arc<InstanceType>>)>> {
        let min = self.options.packing.min_node_cpu_millis;
        let mut out = Vec::new();
        for &i in &self.cost_pools {
            let np = &self.input.node_pools[i];
            let kept: Vec<Arc<InstanceType>> = np
                .instance_types
                .iter()
                .filter(|it| (min..=cap).contains(&cpu_millis(it)))
                .cloned()
                .collect();
            if kept.len() == np.instance_types.len() {
                continue;
            }
            if kept.is_empty() {
                return None;
            }
            for key in &self.keys {
                let all: BTreeSet<String> = np
                    .instance_types
                    .iter()
                    .flat_map(|it| domain_values(&self.pool_reqs[i], it, key))
                    .collect();
                let capped: BTreeSet<String> = kept
                    .iter()
                    .flat_map(|it| domain_values(&self.pool_reqs[i], it, key))
                    .collect();
                if all != capped {
                    return None;
                }
            }
            out.push((i, kept));
        }
        Some(out)
    }

    fn run(self, outcome: &mut PackingOutcome) {
        let faithful = outcome.results.clone();
        // Free-form batches are re-packed first; the cap sweep runs when that found nothing
        // cheaper (or the batch is not free-form).
        if improve::free_form(&self) {
            improve::improve(&self, outcome);
        }
        if outcome.cost >= outcome.faithful_cost * (1.0 - 1e-9) {
            let mut solves = 0;
            let base = std::mem::take(&mut outcome.results);
            let (best, cost) = self.sweep(
                self.input,
                base,
                outcome.cost,
                &|r| self.guard.accepts(r),
                &mut solves,
            );
            outcome.results = best;
            outcome.candidate_solves += solves;
            outcome.cost = outcome.cost.min(cost);
        }
        if outcome.cost < outcome.faithful_cost * (1.0 - 1e-9) {
            outcome.improved = true;
            outcome.faithful = Some(faithful);
        } else {
            outcome.results = faithful;
            outcome.cost = outcome.faithful_cost;
        }
    }

    /// The cap sweep over `input` (the search's input or a sub-solve's, with the same NodePools
    /// in the same order): starting from `base` at `base_cost`, the cheapest accepted candidate.
    fn sweep(
        &self,
        input: &SchedulingInput,
        base: Results,
        base_cost: f64,
        accept: &dyn Fn(&Results) -> bool,
        solves: &mut usize,
    ) -> (Results, f64) {
        let policy = &self.options.label_policy;
        let mut work = input.clone();
        let mut best = base;
        let mut best_cost = base_cost;
        let mut best_cap: Option<i64> = None;
        let mut worse_in_a_row = 0;
        let base_errors = best.pod_errors.len();
        for cap in self.caps() {
            let Some(pools) = self.capped_pools(cap) else {
                continue;
            };
            if pools.is_empty() {
                continue;
            }
            for (i, kept) in &pools {
                work.node_pools[*i].instance_types = kept.clone();
            }
            let candidate = solve(&work, self.options);
            *solves += 1;
            if !accept(&candidate) {
                // Smaller caps only leave more pods out.
                if candidate.pod_errors.len() > base_errors {
                    break;
                }
                continue;
            }
            let cost = plan_cost(&candidate, policy);
            if cost < best_cost * (1.0 - 1e-9) {
                best = candidate;
                best_cost = cost;
                best_cap = Some(cap);
                worse_in_a_row = 0;
            } else {
                worse_in_a_row += 1;
                // Past the best cap the cost rises with every smaller one (more nodes, more
                // DaemonSet overhead): stop after two in a row.
                if best_cap.is_some() && worse_in_a_row >= 2 {
                    break;
                }
            }
        }
        (best, best_cost)
    }
}

#[cfg(test)]
mod tests;

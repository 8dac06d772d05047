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
    /// A cap at or above which a capped solve provably repeats the faithful packing (see
    /// `Search::repeat_cap()`); `None` when that cannot be shown.
    repeat_cap: Option<i64>,
    /// The smallest cap that can hold every pod of the cost pools' new NodeClaims (see
    /// `Search::cap_floor()`).
    cap_floor: i64,
    /// Per cost pool (index): its instance types without offering overrides, cheapest first at
    /// the pool's offerings, for [`Search::widen`]; empty when some DaemonSet's overhead
    /// depends on the instance type (a node selector or required node affinity).
    by_price: Vec<(usize, Vec<Arc<InstanceType>>)>,
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
        let mut search = Search {
            input,
            options,
            cost_pools,
            guard: Guard::new(faithful, options),
            keys: topology_keys(input),
            pool_reqs: input.node_pools.iter().map(pool_key_requirements).collect(),
            repeat_cap: None,
            cap_floor: 0,
            by_price: Vec::new(),
        };
        search.by_price = search.by_price();
        search.cap_floor = search.cap_floor(faithful);
        search.repeat_cap = search.repeat_cap(faithful);
        search
    }

    /// The cost pools' instance types by price (see the `by_price` field).
    fn by_price(&self) -> Vec<(usize, Vec<Arc<InstanceType>>)> {
        let policy = &self.options.label_policy;
        let uniform_overhead = self.input.daemonsets.iter().all(|d| {
            d.pod.node_selector.is_empty()
                && d.pod
                    .node_affinity
                    .as_ref()
                    .is_none_or(|a| a.required.is_empty())
        });
        if !uniform_overhead {
            return Vec::new();
        }
        self.cost_pools
            .iter()
            .map(|&i| {
                let mut priced: Vec<(f64, &Arc<InstanceType>)> = self.input.node_pools[i]
                    .instance_types
                    .iter()
                    .filter(|it| !it.has_offering_overrides())
                    .filter_map(|it| {
                        it.cheapest_offering(&self.pool_reqs[i], policy)
                            .map(|o| (o.price, it))
                    })
                    .collect();
                priced.sort_by(|a, b| a.0.total_cmp(&b.0));
                (i, priced.into_iter().map(|(_, it)| it.clone()).collect())
            })
            .collect()
    }

    /// The smallest cap that can hold every pod the faithful plan puts on the cost pools' new
    /// NodeClaims: per resource, the largest such request needs an instance type whose
    /// allocatable holds it, so a cap below the smallest such type leaves that pod out (or
    /// sends it elsewhere). `i64::MAX` when no type of the cost pools holds it.
    fn cap_floor(&self, faithful: &Results) -> i64 {
        let placed: BTreeSet<&str> = faithful
            .new_node_claims
            .iter()
            .filter(|c| {
                self.cost_pools
                    .iter()
                    .any(|&i| self.input.node_pools[i].name == c.node_pool)
            })
            .flat_map(|c| c.pods.iter().map(String::as_str))
            .collect();
        let mut largest = crate::resources::ResourceList::new();
        for pod in self
            .input
            .pods
            .iter()
            .filter(|p| placed.contains(p.key().as_str()))
        {
            for (name, q) in pod.scheduling_requests().iter() {
                if largest.get(name).is_none_or(|l| q > l) {
                    largest.insert(name, q);
                }
            }
        }
        let types: Vec<&Arc<InstanceType>> = self
            .cost_pools
            .iter()
            .flat_map(|&i| self.input.node_pools[i].instance_types.iter())
            .collect();
        largest
            .iter()
            .map(|(name, q)| {
                types
                    .iter()
                    .filter(|it| it.allocatable().get_or_zero(name) >= q)
                    .map(|it| cpu_millis(it))
                    .min()
                    .unwrap_or(i64::MAX)
            })
            .max()
            .unwrap_or(0)
    }

    /// The smallest CPU cap at or above which a capped solve makes exactly the faithful solve's
    /// decisions, so that it cannot be cheaper; `None` when that cannot be shown.
    ///
    /// The argument: take a cap under which every new NodeClaim of a cost pool in the faithful
    /// plan keeps an instance type (at or above the minimum node size, and with the pool's
    /// `minValues` still met by the kept types). The capped solve then decides every step as
    /// the faithful one does, by induction over the steps: a pod the faithful solve adds to a
    /// claim (or opens a claim with) leaves that claim a part of a final claim, and the kept
    /// type that holds the final claim holds the part too (requests only grow and requirements
    /// only narrow as pods are added); a placement the faithful solve rejects has no instance
    /// type left among all of them, so none among the kept ones either; the topology domains
    /// are the same ([`Search::capped_pools`] checks that) and the other NodePools are
    /// untouched. Same claims with fewer instance types each cannot cost less. Reserved
    /// offerings (counted across claims) and relaxed `minValues` void the argument.
    fn repeat_cap(&self, faithful: &Results) -> Option<i64> {
        let min = self.options.packing.min_node_cpu_millis;
        let reserved = self.cost_pools.iter().any(|&i| {
            self.input.node_pools[i]
                .instance_types
                .iter()
                .any(|it| it.offerings.iter().any(|o| o.is_reserved()))
        });
        if reserved {
            return None;
        }
        let cost_names: BTreeSet<&str> = self
            .cost_pools
            .iter()
            .map(|&i| self.input.node_pools[i].name.as_str())
            .collect();
        let mut repeat = i64::MIN;
        for claim in &faithful.new_node_claims {
            if !cost_names.contains(claim.node_pool.as_str()) {
                continue;
            }
            if claim.min_values_relaxed {
                return None;
            }
            let mut kept: Vec<&InstanceType> = claim
                .instance_types
                .iter()
                .map(|it| it.as_ref())
                .filter(|it| cpu_millis(it) >= min)
                .collect();
            kept.sort_by_key(|it| cpu_millis(it));
            let holds = |cap: i64| {
                !claim.requirements.has_min_values()
                    || claim
                        .requirements
                        .satisfies_min_values(
                            kept.iter()
                                .filter(|it| cpu_millis(it) <= cap)
                                .map(|it| it.requirements()),
                        )
                        .is_ok()
            };
            let need = kept
                .iter()
                .map(|it| cpu_millis(it))
                .find(|&cap| holds(cap))?;
            repeat = repeat.max(need);
        }
        Some(repeat)
    }

    /// The candidate caps, smallest first: the distinct CPU capacities of the cost pools'
    /// instance types at or above the minimum node size and the floor (`Search::cap_floor()`:
    /// a smaller cap has no type for some pod), and below the repeat cap
    /// (`Search::repeat_cap()`: caps at or above it repeat the faithful plan); thinned to the
    /// solve budget by keeping caps spread evenly over the list.
    fn caps(&self) -> Vec<i64> {
        let min = self.options.packing.min_node_cpu_millis.max(self.cap_floor);
        let below = self.repeat_cap.unwrap_or(i64::MAX);
        let caps: BTreeSet<i64> = self
            .cost_pools
            .iter()
            .flat_map(|&i| self.input.node_pools[i].instance_types.iter())
            .map(|it| cpu_millis(it))
            .filter(|&c| c >= min && c < below)
            .collect();
        let mut caps: Vec<i64> = caps.into_iter().collect();
        // Without a repeat cap: a cap at the largest size is the faithful solve unless a floor
        // applies.
        let floor = self.options.packing.min_node_cpu_millis;
        let floor_removes = self
            .cost_pools
            .iter()
            .flat_map(|&i| self.input.node_pools[i].instance_types.iter())
            .any(|it| cpu_millis(it) < floor);
        if self.repeat_cap.is_none() && !floor_removes {
            caps.pop();
        }
        let budget = self.options.packing.max_candidate_solves;
        if caps.len() > budget && budget > 0 {
            let n = caps.len();
            caps = (0..budget)
                .map(|i| caps[i * (n - 1) / (budget - 1).max(1)])
                .collect::<BTreeSet<_>>()
                .into_iter()
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

    /// A capped candidate with its spot flexibility restored where the cap took it away: a
    /// NodeClaim of a cost pool that may launch as spot and offers fewer instance types than
    /// the guard asks for gets the pool's other instance types that hold it (compatible with its
    /// requirements, with an offering it may launch, its requests within their allocatable),
    /// cheapest first at the pool's offerings, whatever their size, up to the guard's count. The claim's pods and
    /// requirements stay as the capped solve decided them; only its choice of instance types
    /// grows, as the faithful solve's would with the same pods. It is done only where each
    /// instance type's overhead is the same (no DaemonSet with a node selector or required node
    /// affinity, no offering override, no reservation), and the widened plan must keep the cost
    /// pools' limits (each claim counted at its largest instance type); otherwise the candidate
    /// is returned as it is.
    fn widen(&self, mut candidate: Results) -> Results {
        let policy = &self.options.label_policy;
        let want = self.guard.spot_min_types;
        let needs = |c: &NewNodeClaim| {
            c.instance_types.len() < want
                && c.reservation_ids.is_empty()
                && may_launch_spot(c, policy)
        };
        if self.by_price.is_empty() || !candidate.new_node_claims.iter().any(needs) {
            return candidate;
        }
        let mut widened = false;
        let mut claims = candidate.new_node_claims.clone();
        for claim in claims.iter_mut().filter(|c| needs(c)) {
            let Some((_, types)) = self
                .by_price
                .iter()
                .find(|(i, _)| self.input.node_pools[*i].name == claim.node_pool)
            else {
                continue;
            };
            let missing = want - claim.instance_types.len();
            let extra: Vec<Arc<InstanceType>> = types
                .iter()
                .filter(|it| {
                    !claim.instance_types.iter().any(|c| c.name() == it.name())
                        && crate::resources::ResourceList::fits(&claim.requests, it.allocatable())
                        && it.requirements().intersects(&claim.requirements).is_ok()
                        && it.cheapest_offering(&claim.requirements, policy).is_some()
                })
                .take(missing)
                .cloned()
                .collect();
            if extra.is_empty() {
                continue;
            }
            claim.instance_types.extend(extra);
            let price = |it: &Arc<InstanceType>| {
                it.cheapest_offering(&claim.requirements, policy)
                    .map_or(f64::INFINITY, |o| o.price)
            };
            let mut priced: Vec<(f64, Arc<InstanceType>)> = claim
                .instance_types
                .drain(..)
                .map(|it| (price(&it), it))
                .collect();
            priced.sort_by(|a, b| a.0.total_cmp(&b.0));
            claim.instance_types = priced.into_iter().map(|(_, it)| it).collect();
            widened = true;
        }
        // Otherwise the capped solve's own claims stay (and the guard judges them).
        if widened && improve::within_limits(self, &claims) {
            candidate.new_node_claims = claims;
        }
        candidate
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
        let mut found = false;
        let mut rising = 0;
        let mut previous = f64::INFINITY;
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
            let candidate = self.widen(solve(&work, self.options));
            *solves += 1;
            // A candidate that leaves pods out is skipped: larger caps may hold them.
            if !accept(&candidate) {
                continue;
            }
            let cost = plan_cost(&candidate, policy);
            if cost < best_cost * (1.0 - 1e-9) {
                best = candidate;
                best_cost = cost;
                found = true;
                rising = 0;
            } else if cost > previous * (1.0 + 1e-9) {
                // The cost over the caps falls to a minimum, then rises towards the faithful
                // plan's (fewer, larger nodes that fill less evenly): two rises in a row past
                // the best cap, or three before any cheaper plan, end the sweep.
                rising += 1;
                if rising >= if found { 2 } else { 3 } {
                    break;
                }
            } else {
                rising = 0;
            }
            previous = cost;
        }
        (best, best_cost)
    }
}

#[cfg(test)]
mod tests;

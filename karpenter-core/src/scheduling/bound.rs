//! A proven lower bound on the hourly cost of any set of new nodes that holds a set of pods
//! (`karpenter plan`'s `summary.lowerBoundPerHour`). The method and its proof are in
//! `docs/lower-bound.md`; in short:
//!
//! - **Columns** are the node kinds a new node can be: a NodePool and one of its instance types,
//!   with the cheapest price the pool may launch it at and the allocatable resources left after
//!   the DaemonSets that surely run on it.
//! - **Pod classes** group pods by the set of columns they are compatible with (a *superset* of
//!   where the scheduler could put them: fewer exclusions only weaken the bound).
//! - The **LP** `min Σ price_k x_k` s.t. for every class `c` and resource `d`:
//!   `Σ_{k ∈ K_c} alloc_{k,d} x_k ≥ demand_{c,d}`, where `K_c` is the union of the columns of `c`
//!   and every class whose columns lie inside `c`'s (the demand counts all those classes), plus
//!   one row over all pods, `x ≥ 0`. Every packing is a feasible point (count its nodes of each
//!   column), so the LP optimum is at most any packing's cost.
//! - The LP is solved in its **dual** form; the dual solution is scaled until it is feasible
//!   (checked here, not trusted from the solver), so by weak duality its objective is a lower
//!   bound whatever the solver's rounding.
//! - Each pod alone needs a node: the bound is also at least the most expensive "cheapest
//!   compatible column" over the pods; and pods that must be on pairwise different nodes
//!   (hostname anti-affinity) need one node each: at least the sum of their cheapest columns.
//! - **Integer covers**: for every row and resource, the nodes of the row's columns must
//!   together offer the row's demand, and they come in whole nodes: the cheapest multiset of
//!   columns whose allocatable covers the demand (an unbounded knapsack cover, solved exactly by
//!   dynamic programming on a grid that rounds every node *up* to the next grid unit, which only
//!   relaxes it) is a lower bound too. This closes most of the LP's gap on small plans.

use std::collections::{BTreeMap, BTreeSet};

use good_lp::{Expression, Solution, SolverModel, Variable, microlp, variable, variables};
use std::sync::Arc;

use crate::labels::{self, LabelPolicy};
use crate::model::{DaemonSet, InstanceType, Pod};
use crate::requirements::{Operator, Requirement, Requirements};
use crate::resources::ResourceList;
use crate::scheduling::{NodePoolInput, Results, SchedulingInput};
use crate::taints::{self, Toleration};

/// A node kind a new node can be: a NodePool's instance type.
#[derive(Debug, Clone, PartialEq)]
pub struct BoundColumn {
    /// `pool/instance-type`, for debugging.
    pub name: String,
    /// The cheapest hourly price it can launch at.
    pub price: f64,
    /// Resources available to the pods (allocatable minus sure DaemonSet overhead).
    pub allocatable: ResourceList,
}

/// A pod and the columns it could be placed on (a superset is fine).
#[derive(Debug, Clone, PartialEq)]
pub struct BoundPod {
    /// Its scheduling requests (including `pods: 1`).
    pub requests: ResourceList,
    /// Indices into the columns.
    pub compatible: Vec<usize>,
    /// Pods with the same group need pairwise different nodes (required hostname
    /// anti-affinity that each of them matches).
    pub exclusive_group: Option<usize>,
}

/// Relative slack subtracted from the certified bound to absorb floating-point rounding in its
/// own evaluation.
const SAFETY: f64 = 1e-9;

/// The lower bound, in the columns' price unit per hour. Pods with no compatible column are
/// ignored (they cannot be on any new node). Returns 0 for no pods.
pub fn lower_bound(columns: &[BoundColumn], pods: &[BoundPod]) -> f64 {
    let pods: Vec<&BoundPod> = pods
        .iter()
        .filter(|p| p.compatible.iter().any(|&k| k < columns.len()))
        .collect();
    if pods.is_empty() {
        return 0.0;
    }
    // Each pod alone.
    let single = pods
        .iter()
        .map(|p| {
            p.compatible
                .iter()
                .filter_map(|&k| columns.get(k))
                .map(|c| c.price)
                .fold(f64::INFINITY, f64::min)
        })
        .fold(0.0, f64::max);
    let mut exclusive: BTreeMap<usize, f64> = BTreeMap::new();
    for p in &pods {
        if let Some(g) = p.exclusive_group {
            let cheapest = p
                .compatible
                .iter()
                .filter_map(|&k| columns.get(k))
                .map(|c| c.price)
                .fold(f64::INFINITY, f64::min);
            *exclusive.entry(g).or_insert(0.0) += cheapest;
        }
    }
    let exclusive = exclusive.values().copied().fold(0.0, f64::max) * (1.0 - SAFETY);
    let single = single.max(exclusive);
    let rows = rows(columns, &pods);
    let lp = lp_bound(columns, &rows).unwrap_or(0.0);
    let cover = rows
        .iter()
        .flat_map(|row| {
            row.demand
                .iter()
                .map(move |(d, demand)| integer_cover(columns, &row.columns, d, *demand))
        })
        .fold(0.0, f64::max);
    single.max(lp).max(cover).max(0.0)
}

/// Grid steps of the integer cover: each node is over-counted by less than `1/GRID` of the
/// demand.
const GRID: usize = 1000;

/// The cheapest multiset of `columns` whose allocatable `resource` adds up to `demand`, on a
/// grid of `demand / GRID` with every node's allocatable rounded up to the grid (a
/// relaxation), minus [`SAFETY`]. 0 when no column offers the resource.
fn integer_cover(
    columns: &[BoundColumn],
    allowed: &BTreeSet<usize>,
    resource: &str,
    demand: f64,
) -> f64 {
    if demand.is_nan() || demand <= 0.0 || !demand.is_finite() {
        return 0.0;
    }
    let unit = demand / GRID as f64;
    // (grid size, price), keeping for each size only the cheapest, then dropping items that a
    // bigger-or-equal, cheaper-or-equal item dominates.
    let mut items: Vec<(usize, f64)> = allowed
        .iter()
        .filter_map(|&k| columns.get(k))
        .filter_map(|c| {
            let a = c.allocatable.get(resource)?.as_f64();
            if a.is_nan() || a <= 0.0 || !c.price.is_finite() || c.price < 0.0 {
                return None;
            }
            let size = (a / unit * (1.0 + 1e-9)).ceil();
            let size = if size >= GRID as f64 {
                GRID
            } else {
                size.max(1.0) as usize
            };
            Some((size, c.price))
        })
        .collect();
    if items.is_empty() {
        return 0.0;
    }
    items.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.total_cmp(&b.1)));
    let mut pareto: Vec<(usize, f64)> = Vec::new();
    for (size, price) in items {
        if pareto.last().is_none_or(|&(_, p)| price < p) {
            pareto.push((size, price));
        }
    }
    // best[j]: the cheapest cover of at least j grid units.
    let mut best = vec![0.0f64; GRID + 1];
    for j in 1..=GRID {
        best[j] = pareto
            .iter()
            .map(|&(size, price)| price + best[j.saturating_sub(size)])
            .fold(f64::INFINITY, f64::min);
    }
    let v = best[GRID];
    if v.is_finite() {
        v * (1.0 - SAFETY)
    } else {
        0.0
    }
}

/// One constraint family: a set of columns and the demand that must be covered by them.
struct Row {
    columns: BTreeSet<usize>,
    demand: BTreeMap<String, f64>,
}

fn add_demand(into: &mut BTreeMap<String, f64>, requests: &ResourceList) {
    for (name, q) in requests.iter() {
        let v = q.as_f64();
        if v > 0.0 {
            *into.entry(name.to_string()).or_insert(0.0) += v;
        }
    }
}

/// The constraint rows (see the module documentation).
fn rows(columns: &[BoundColumn], pods: &[&BoundPod]) -> Vec<Row> {
    // Classes by compatible column set.
    let mut classes: BTreeMap<BTreeSet<usize>, BTreeMap<String, f64>> = BTreeMap::new();
    for p in pods {
        let set: BTreeSet<usize> = p
            .compatible
            .iter()
            .copied()
            .filter(|&k| k < columns.len())
            .collect();
        add_demand(classes.entry(set).or_default(), &p.requests);
    }
    // Rows: each class with every class whose columns it contains; and all pods.
    let mut rows: Vec<Row> = Vec::new();
    for set in classes.keys() {
        let mut demand = BTreeMap::new();
        for (other, d) in &classes {
            if other.is_subset(set) {
                for (k, v) in d {
                    *demand.entry(k.clone()).or_insert(0.0) += v;
                }
            }
        }
        rows.push(Row {
            columns: set.clone(),
            demand,
        });
    }
    if classes.len() > 1 {
        let mut all = Row {
            columns: BTreeSet::new(),
            demand: BTreeMap::new(),
        };
        for (set, d) in &classes {
            all.columns.extend(set.iter().copied());
            for (k, v) in d {
                *all.demand.entry(k.clone()).or_insert(0.0) += v;
            }
        }
        rows.push(all);
    }
    rows
}

fn lp_bound(columns: &[BoundColumn], rows: &[Row]) -> Option<f64> {
    // Per-resource scale: the largest allocatable, so coefficients are at most 1.
    let mut scale: BTreeMap<&str, f64> = BTreeMap::new();
    for c in columns {
        for (name, q) in c.allocatable.iter() {
            let v = q.as_f64();
            let e = scale.entry(name).or_insert(0.0);
            if v > *e {
                *e = v;
            }
        }
    }
    let alloc = |k: usize, d: &str| -> f64 {
        let s = scale.get(d).copied().unwrap_or(0.0);
        if s <= 0.0 {
            return 0.0;
        }
        columns
            .get(k)
            .and_then(|c| c.allocatable.get(d))
            .map_or(0.0, |q| (q.as_f64() / s).max(0.0))
    };

    // Dual variables y[row, resource] ≥ 0, for resources some column of the row offers.
    let mut vars = variables!();
    let mut duals: Vec<(usize, String, f64, Variable)> = Vec::new();
    for (r, row) in rows.iter().enumerate() {
        for (d, demand) in &row.demand {
            let s = scale.get(d.as_str()).copied().unwrap_or(0.0);
            if s <= 0.0 || !row.columns.iter().any(|&k| alloc(k, d) > 0.0) {
                continue;
            }
            let v = vars.add(variable().min(0.0));
            duals.push((r, d.clone(), demand / s, v));
        }
    }
    if duals.is_empty() {
        return None;
    }
    let objective: Expression = duals.iter().map(|(_, _, b, v)| *b * *v).sum();
    let mut model = vars.maximise(objective).using(microlp);
    let used: BTreeSet<usize> = rows
        .iter()
        .flat_map(|r| r.columns.iter().copied())
        .collect();
    for &k in &used {
        let lhs: Expression = duals
            .iter()
            .filter(|(r, ..)| rows[*r].columns.contains(&k))
            .map(|(_, d, _, v)| alloc(k, d) * *v)
            .sum();
        model = model.with(lhs.leq(columns[k].price));
    }
    let solution = model.solve().ok()?;

    // Certify: clamp, then scale into dual feasibility, then evaluate.
    let y: Vec<f64> = duals
        .iter()
        .map(|(.., v)| {
            let x = solution.value(*v);
            if x.is_finite() { x.max(0.0) } else { 0.0 }
        })
        .collect();
    let mut factor: f64 = 1.0;
    for &k in &used {
        let lhs: f64 = duals
            .iter()
            .zip(&y)
            .filter(|((r, ..), _)| rows[*r].columns.contains(&k))
            .map(|((_, d, ..), yv)| alloc(k, d) * yv)
            .sum();
        let price = columns[k].price;
        if lhs > price {
            factor = factor.min(if lhs > 0.0 { price / lhs } else { 0.0 });
        }
    }
    let factor = factor.max(0.0);
    let value: f64 = duals
        .iter()
        .zip(&y)
        .map(|((_, _, b, _), yv)| b * yv * factor)
        .sum();
    value.is_finite().then_some(value * (1.0 - SAFETY))
}

/// A NodePool's template requirements as the scheduler builds them (requirements, template
/// labels, the NodePool label and the node-class label).
pub fn template_requirements(np: &NodePoolInput) -> Requirements {
    let mut reqs = Requirements::from_node_selector_requirements(&np.requirements);
    let mut l = np.labels.clone();
    l.insert(labels::NODEPOOL.to_string(), np.name.clone());
    if let Some((k, v)) = &np.node_class_label {
        l.insert(k.clone(), v.clone());
    }
    for (k, v) in &l {
        reqs.add(Requirement::new(k, Operator::In, [v.as_str()]));
    }
    reqs
}

/// The tolerations with a wildcard `PreferNoSchedule` toleration added (a soft taint never
/// keeps a pod off a node).
pub fn with_prefer_no_schedule(tolerations: &[Toleration]) -> Vec<Toleration> {
    let mut t = tolerations.to_vec();
    t.push(taints::prefer_no_schedule_wildcard());
    t
}

/// The pod's node-selector terms: the node selector ANDed with each required node-affinity term
/// (one term, the selector alone, without node affinity).
pub fn pod_terms(pod: &Pod) -> Vec<Requirements> {
    let selector = Requirements::from_labels(
        pod.node_selector
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str())),
    );
    match pod
        .node_affinity
        .as_ref()
        .filter(|a| !a.required.is_empty())
    {
        None => vec![selector],
        Some(a) => a
            .required
            .iter()
            .map(|term| {
                selector.intersection(&Requirements::from_node_selector_requirements(
                    &term.match_expressions,
                ))
            })
            .collect(),
    }
}

/// The lower-bound columns, each column's (pool index, instance type), and each pool's template
/// requirements.
type Columns = (
    Vec<BoundColumn>,
    Vec<(usize, Arc<InstanceType>)>,
    Vec<Requirements>,
);

/// The lower-bound columns: every (NodePool, instance type) a new node can be, priced at the
/// cheapest offering the pool may launch, with allocatable less the DaemonSets that surely run
/// on it.
fn bound_columns(
    pools: &[NodePoolInput],
    daemonsets: &[DaemonSet],
    policy: &LabelPolicy,
) -> Columns {
    let mut columns = Vec::new();
    let mut meta = Vec::new();
    let mut pool_reqs = Vec::new();
    for (pi, np) in pools.iter().enumerate() {
        let reqs = template_requirements(np);
        // DaemonSets that run on every node of the pool whatever its type.
        let mut overhead = ResourceList::new();
        for d in daemonsets {
            let p = &d.pod;
            let unconditional = p.node_selector.is_empty()
                && p.node_affinity
                    .as_ref()
                    .is_none_or(|a| a.required.is_empty())
                && !p.has_resource_claims
                && taints::tolerates_all(&with_prefer_no_schedule(&p.tolerations), &np.taints)
                    .is_ok();
            if unconditional {
                overhead.add_assign(&p.scheduling_requests());
            }
        }
        for it in &np.instance_types {
            if it.requirements().intersects(&reqs).is_err() {
                continue;
            }
            let price = it
                .available_offerings()
                .filter(|o| reqs.is_compatible(o.requirements(), Some(policy)))
                .map(|o| o.price)
                .fold(f64::INFINITY, f64::min);
            if !price.is_finite() {
                continue;
            }
            let mut allocatable = it.allocatable().sub(&overhead);
            allocatable.clamp_non_negative();
            columns.push(BoundColumn {
                name: format!("{}/{}", np.name, it.name()),
                price,
                allocatable,
            });
            meta.push((pi, it.clone()));
        }
        pool_reqs.push(reqs);
    }
    (columns, meta, pool_reqs)
}

/// A key shared by pods that must be on pairwise different nodes: the pod's namespace and its
/// first required hostname anti-affinity term that selects the pod itself (so every pod with
/// the same key selects every other).
fn exclusive_key(pod: &Pod) -> Option<String> {
    let anti = pod.pod_anti_affinity.as_ref()?;
    anti.required
        .iter()
        .find(|term| {
            term.topology_key == labels::HOSTNAME
                && term.namespace_selector.is_none()
                && (term.namespaces.is_empty() || term.namespaces.contains(&pod.namespace))
                && term
                    .label_selector
                    .as_ref()
                    .is_some_and(|s| s.matches(&pod.labels))
        })
        .map(|term| format!("{term:?}"))
        .map(|term| format!("{}/{term}", pod.namespace))
}

/// The lower bound for the pods a solve placed on new NodeClaims: every set of new nodes of
/// `input`'s NodePools that holds those pods costs at least this much per hour (see the
/// [module documentation](self)). 0 when the solve placed no pod on a new NodeClaim.
pub fn plan_lower_bound(input: &SchedulingInput, results: &Results, policy: &LabelPolicy) -> f64 {
    let placed: BTreeSet<&str> = results
        .new_node_claims
        .iter()
        .flat_map(|c| c.pods.iter().map(String::as_str))
        .collect();
    if placed.is_empty() {
        return 0.0;
    }
    let (columns, meta, pool_reqs) = bound_columns(&input.node_pools, &input.daemonsets, policy);
    // Compatibility per scheduling signature (replicas share one).
    let mut cache: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    let mut groups: BTreeMap<String, usize> = BTreeMap::new();
    let mut pods = Vec::new();
    for pod in input
        .pods
        .iter()
        .filter(|p| placed.contains(p.key().as_str()))
    {
        let requests = pod.scheduling_requests();
        let signature = format!(
            "{:?}",
            (
                &pod.node_selector,
                &pod.node_affinity,
                &pod.tolerations,
                &requests,
            )
        );
        let compatible = cache
            .entry(signature)
            .or_insert_with(|| {
                let terms = pod_terms(pod);
                let tolerations = with_prefer_no_schedule(&pod.tolerations);
                let tolerated: Vec<bool> = input
                    .node_pools
                    .iter()
                    .map(|np| taints::tolerates_all(&tolerations, &np.taints).is_ok())
                    .collect();
                (0..columns.len())
                    .filter(|&k| {
                        let (pi, it) = &meta[k];
                        tolerated[*pi]
                            && ResourceList::fits(&requests, &columns[k].allocatable)
                            && terms.iter().any(|t| {
                                t.intersects(&pool_reqs[*pi]).is_ok()
                                    && t.intersects(it.requirements()).is_ok()
                            })
                    })
                    .collect()
            })
            .clone();
        let exclusive_group = match exclusive_key(pod) {
            Some(key) => {
                let next = groups.len();
                Some(*groups.entry(key).or_insert(next))
            }
            None => None,
        };
        pods.push(BoundPod {
            requests,
            compatible,
            exclusive_group,
        });
    }
    lower_bound(&columns, &pods)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::Quantity;
    use proptest::prelude::*;

    fn rl(cpu: i64, mem: i64) -> ResourceList {
        let mut r = ResourceList::new();
        r.insert("cpu", Quantity::from_units(cpu));
        r.insert("memory", Quantity::from_units(mem));
        r
    }

    fn col(cpu: i64, mem: i64, price: f64) -> BoundColumn {
        BoundColumn {
            name: format!("{cpu}x{mem}"),
            price,
            allocatable: rl(cpu, mem),
        }
    }

    fn fits(pods: &[(i64, i64)], c: &BoundColumn) -> bool {
        let cpu: i64 = pods.iter().map(|p| p.0).sum();
        let mem: i64 = pods.iter().map(|p| p.1).sum();
        Quantity::from_units(cpu) <= c.allocatable.get_or_zero("cpu")
            && Quantity::from_units(mem) <= c.allocatable.get_or_zero("memory")
    }

    /// The cheapest packing, by enumerating set partitions (restricted growth strings).
    fn brute_force(
        columns: &[BoundColumn],
        pods: &[(i64, i64)],
        compat: &[Vec<usize>],
        exclusive: &[bool],
    ) -> Option<f64> {
        let n = pods.len();
        let mut best: Option<f64> = None;
        let mut assign = vec![0usize; n];
        loop {
            let blocks = assign.iter().copied().max().map_or(0, |m| m + 1);
            let mut cost = 0.0;
            let mut ok = true;
            for b in 0..blocks {
                let members: Vec<usize> = (0..n).filter(|&i| assign[i] == b).collect();
                let block: Vec<(i64, i64)> = members.iter().map(|&i| pods[i]).collect();
                if members.iter().filter(|&&i| exclusive[i]).count() > 1 {
                    ok = false;
                    break;
                }
                let cheapest = (0..columns.len())
                    .filter(|k| members.iter().all(|&i| compat[i].contains(k)))
                    .filter(|&k| fits(&block, &columns[k]))
                    .map(|k| columns[k].price)
                    .fold(f64::INFINITY, f64::min);
                if cheapest.is_infinite() {
                    ok = false;
                    break;
                }
                cost += cheapest;
            }
            if ok {
                best = Some(best.map_or(cost, |b: f64| b.min(cost)));
            }
            // Next restricted growth string.
            let mut i = n;
            loop {
                if i <= 1 {
                    return best;
                }
                i -= 1;
                let max_prev = assign[..i].iter().copied().max().unwrap_or(0);
                if assign[i] <= max_prev {
                    assign[i] += 1;
                    for a in assign.iter_mut().skip(i + 1) {
                        *a = 0;
                    }
                    break;
                }
            }
        }
    }

    fn bound_pods(pods: &[(i64, i64)], compat: &[Vec<usize>]) -> Vec<BoundPod> {
        pods.iter()
            .zip(compat)
            .map(|(p, c)| BoundPod {
                requests: rl(p.0, p.1),
                compatible: c.clone(),
                exclusive_group: None,
            })
            .collect()
    }

    #[test]
    fn exact_fill_is_tight() {
        let cols = vec![col(4, 16, 0.192), col(8, 32, 0.384)];
        let pods: Vec<(i64, i64)> = vec![(1, 2); 8];
        let compat = vec![vec![0, 1]; 8];
        let lb = lower_bound(&cols, &bound_pods(&pods, &compat));
        assert!((lb - 0.384).abs() < 1e-6, "{lb}");
    }

    #[test]
    fn whole_nodes_close_the_lp_gap() {
        // The LP prices 4 CPUs at the big type's rate (0.075); whole nodes cost at least 0.15.
        let cols = vec![col(3, 16, 0.1), col(8, 32, 0.15)];
        let pods: Vec<(i64, i64)> = vec![(1, 2); 4];
        let compat = vec![vec![0, 1]; 4];
        let lb = lower_bound(&cols, &bound_pods(&pods, &compat));
        assert!((lb - 0.15).abs() < 1e-6, "{lb}");
    }

    #[test]
    fn anti_affine_pods_need_a_node_each() {
        let cols = vec![col(4, 16, 0.1)];
        let mut pods = bound_pods(&[(1, 1); 3], &[vec![0], vec![0], vec![0]]);
        for p in &mut pods {
            p.exclusive_group = Some(7);
        }
        let lb = lower_bound(&cols, &pods);
        assert!((lb - 0.3).abs() < 1e-6, "{lb}");
    }

    #[test]
    fn a_single_large_pod_needs_a_whole_node() {
        let cols = vec![col(2, 8, 0.1), col(16, 64, 0.8)];
        let pods = vec![(10, 1)];
        let lb = lower_bound(&cols, &bound_pods(&pods, &[vec![1]]));
        assert!((lb - 0.8).abs() < 1e-9, "{lb}");
    }

    #[test]
    fn class_rows_see_restricted_pods() {
        // GPU-like pods may only use the expensive column; others the cheap one.
        let cols = vec![col(4, 4, 0.1), col(4, 4, 1.0)];
        let pods = vec![(2, 1), (2, 1), (2, 1), (2, 1)];
        let compat = vec![vec![1], vec![1], vec![1], vec![1]];
        let lb = lower_bound(&cols, &bound_pods(&pods, &compat));
        assert!((lb - 2.0).abs() < 1e-6, "{lb}");
        assert_eq!(lower_bound(&cols, &[]), 0.0);
        // No compatible column: ignored.
        assert_eq!(lower_bound(&cols, &bound_pods(&[(1, 1)], &[vec![]])), 0.0);
    }

    proptest! {
        #[test]
        fn never_exceeds_the_optimal_packing(
            cols in prop::collection::vec((1i64..8, 1i64..16, 1u32..1000), 1..4),
            pods in prop::collection::vec((1i64..6, 1i64..10, any::<u8>(), any::<bool>()), 1..6),
        ) {
            let columns: Vec<BoundColumn> = cols
                .iter()
                .map(|&(c, m, p)| col(c, m, f64::from(p) / 1000.0))
                .collect();
            let reqs: Vec<(i64, i64)> = pods.iter().map(|&(c, m, ..)| (c, m)).collect();
            let exclusive: Vec<bool> = pods.iter().map(|p| p.3).collect();
            // A random subset of the columns the pod fits, never empty when one fits.
            let compat: Vec<Vec<usize>> = pods
                .iter()
                .map(|&(c, m, mask, _)| {
                    let fitting: Vec<usize> = (0..columns.len())
                        .filter(|&k| fits(&[(c, m)], &columns[k]))
                        .collect();
                    let chosen: Vec<usize> = fitting
                        .iter()
                        .copied()
                        .filter(|k| mask & (1 << k) != 0)
                        .collect();
                    if chosen.is_empty() { fitting } else { chosen }
                })
                .collect();
            let mut bp = bound_pods(&reqs, &compat);
            for (p, &e) in bp.iter_mut().zip(&exclusive) {
                p.exclusive_group = e.then_some(0);
            }
            let lb = lower_bound(&columns, &bp);
            prop_assert!(lb >= 0.0);
            // Pods that fit nowhere are ignored by the bound: drop them for the packing too.
            let keep: Vec<usize> = (0..reqs.len()).filter(|&i| !compat[i].is_empty()).collect();
            let kept_reqs: Vec<(i64, i64)> = keep.iter().map(|&i| reqs[i]).collect();
            let kept_compat: Vec<Vec<usize>> = keep.iter().map(|&i| compat[i].clone()).collect();
            let kept_exclusive: Vec<bool> = keep.iter().map(|&i| exclusive[i]).collect();
            if let Some(opt) = brute_force(&columns, &kept_reqs, &kept_compat, &kept_exclusive) {
                prop_assert!(lb <= opt + 1e-9, "bound {} > optimum {}", lb, opt);
            } else {
                prop_assert!(kept_reqs.is_empty());
            }
        }
    }
}

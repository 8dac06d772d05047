//! The cost rows of the benchmark reporter: what the `cost` packing policy buys.
//!
//! - `cost:N[:SEED]`: a seeded generic mix of `N` pods (CPU uniform in 100m-4, memory uniform
//!   in 128Mi-8Gi, no other constraint) on the embedded AWS catalog, one NodePool restricted to
//!   categories c, m and r, generation > 2, on-demand;
//! - `cost-diverse:N`: upstream's diverse benchmark workload (`makeDiversePods(N)`) on
//!   `fake.InstanceTypes(400)`.
//!
//! Each row reports the faithful (upstream) plan's cost, the cost-aware plan's cost, the proven
//! lower bound of the pods placed on new nodes, and the solve time of each policy.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use karpenter_aws::catalog::{AwsCatalogOptions, CatalogSources, build_catalog, labels as aws};
use karpenter_core::labels::LabelPolicy;
use karpenter_core::model::{InstanceType, Pod};
use karpenter_core::requirements::{NodeSelectorRequirement, Operator};
use karpenter_core::resources::Quantity;
use karpenter_core::scheduling::bound::plan_lower_bound;
use karpenter_core::scheduling::packing::{PackingOptions, PackingPolicy, plan_cost, solve_packed};
use karpenter_core::scheduling::{
    NodePoolInput, PreferencePolicy, SchedulerOptions, SchedulingInput, solve,
};

use crate::scenario;
use crate::workload::Workload;

/// A small deterministic generator (SplitMix64).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `lo..=hi`.
    fn between(&mut self, lo: i64, hi: i64) -> i64 {
        lo + (self.next() % (hi - lo + 1) as u64) as i64
    }
}

/// `n` pending pods of the generic mix drawn with `seed`: CPU uniform in 100m-4000m, memory
/// uniform in 128Mi-8192Mi.
pub fn generic_pods(n: usize, seed: u64) -> Vec<Pod> {
    let mut rng = Rng(seed);
    (0..n)
        .map(|i| {
            let cpu = rng.between(100, 4000);
            let mem = rng.between(128, 8192);
            Pod::new("default", format!("mix-{i}")).with_requests([
                ("cpu", Quantity::from_milli(cpu)),
                ("memory", Quantity::from_bytes(mem * 1024 * 1024)),
            ])
        })
        .collect()
}

/// The embedded AWS catalog's instance types (default EC2NodeClass) and the AWS label policy.
pub fn aws_instance_types() -> Result<(Vec<Arc<InstanceType>>, LabelPolicy), String> {
    let sources = CatalogSources::embedded().map_err(|e| e.to_string())?;
    let report =
        build_catalog(&sources, &AwsCatalogOptions::default()).map_err(|e| e.to_string())?;
    let types = report
        .instance_types
        .iter()
        .map(|it| {
            it.to_instance_type()
                .map(Arc::new)
                .map_err(|e| e.to_string())
        })
        .collect::<Result<Vec<_>, _>>()?;
    let policy = LabelPolicy::core()
        .with_well_known(aws::WELL_KNOWN)
        .with_restricted_domains([aws::GROUP]);
    Ok((types, policy))
}

/// The generic mix's input: one NodePool over the AWS catalog restricted to categories c, m
/// and r, generation > 2, on-demand; `n` pods drawn with `seed`.
pub fn generic_input(n: usize, seed: u64, types: Vec<Arc<InstanceType>>) -> SchedulingInput {
    let pool = NodePoolInput::new("default", types)
        .with_requirements(vec![
            NodeSelectorRequirement::new(aws::INSTANCE_CATEGORY, Operator::In, ["c", "m", "r"]),
            NodeSelectorRequirement::new(aws::INSTANCE_GENERATION, Operator::Gt, ["2"]),
            NodeSelectorRequirement::new(
                karpenter_core::labels::CAPACITY_TYPE,
                Operator::In,
                ["on-demand"],
            ),
        ])
        .with_node_class_label(Some((
            "karpenter.k8s.aws/ec2nodeclass".to_string(),
            "default".to_string(),
        )))
        .with_labels(BTreeMap::new());
    SchedulingInput::new()
        .with_node_pools(vec![pool])
        .with_pods(generic_pods(n, seed))
}

/// One cost row's figures.
#[derive(Debug, Clone, PartialEq)]
pub struct CostRow {
    /// Pods in the batch.
    pub pods: usize,
    /// Pods the cost-aware plan schedules.
    pub scheduled: usize,
    /// New NodeClaims of the faithful and the cost-aware plan.
    pub nodes: (usize, usize),
    /// Hourly cost of the faithful plan.
    pub faithful: f64,
    /// Hourly cost of the cost-aware plan.
    pub cost_aware: f64,
    /// The proven lower bound for the pods the cost-aware plan puts on new nodes.
    pub bound: f64,
    /// Time of one faithful solve.
    pub faithful_time: Duration,
    /// Time of one cost-aware solve (faithful solve and search included).
    pub cost_time: Duration,
}

/// The fastest of a few runs of `f` (at least one; at most 5 or ~2 s).
fn time<T>(mut f: impl FnMut() -> T) -> Duration {
    let mut best = Duration::MAX;
    let start = Instant::now();
    let mut runs = 0;
    while runs < 1 || (runs < 5 && start.elapsed() < Duration::from_secs(2)) {
        let t = Instant::now();
        std::hint::black_box(f());
        best = best.min(t.elapsed());
        runs += 1;
    }
    best
}

/// Measures one input under both policies.
pub fn measure(input: &SchedulingInput, options: &SchedulerOptions) -> CostRow {
    let policy = &options.label_policy;
    let faithful = solve(input, options);
    let cost_options = options
        .clone()
        .with_packing(PackingOptions::default().with_policy(Some(PackingPolicy::Cost)));
    let outcome = solve_packed(input, &cost_options);
    let bound = plan_lower_bound(input, &outcome.results, policy);
    CostRow {
        pods: input.pods.len(),
        scheduled: input.pods.len() - outcome.results.pod_errors.len(),
        nodes: (
            faithful.new_node_claims.len(),
            outcome.results.new_node_claims.len(),
        ),
        faithful: plan_cost(&faithful, policy),
        cost_aware: outcome.cost,
        bound,
        faithful_time: time(|| solve(input, options)),
        cost_time: time(|| solve_packed(input, &cost_options)),
    }
}

/// Runs a cost row (`cost:N[:SEED]` or `cost-diverse:N`) and returns the child's output line
/// (`K` and the figures), or an error naming the row.
pub fn run_row(row: &str) -> Result<String, String> {
    let parts: Vec<&str> = row.split(':').collect();
    let number = |i: usize| -> Result<u64, String> {
        parts
            .get(i)
            .ok_or_else(|| format!("row {row:?}: missing count"))?
            .parse()
            .map_err(|_| format!("row {row:?}: bad number"))
    };
    let r = match parts.first().copied() {
        Some("cost") => {
            let n = number(1)? as usize;
            let seed = if parts.len() > 2 { number(2)? } else { 1 };
            let (types, policy) = aws_instance_types()?;
            let options = SchedulerOptions::default().with_label_policy(policy);
            measure(&generic_input(n, seed, types), &options)
        }
        Some("cost-diverse") => {
            let n = number(1)? as usize;
            let pods = scenario::to_pods(&Workload::new().diverse_pods(n));
            measure(
                &scenario::input(pods),
                &scenario::options(PreferencePolicy::Respect),
            )
        }
        _ => return Err(format!("unknown cost row {row:?}")),
    };
    Ok(format!(
        "K {} {} {} {} {} {} {} {} {}",
        r.pods,
        r.scheduled,
        r.nodes.0,
        r.nodes.1,
        r.faithful,
        r.cost_aware,
        r.bound,
        r.faithful_time.as_nanos(),
        r.cost_time.as_nanos()
    ))
}

/// Prints the cost table from the children's lines (without their `K ` prefix).
pub fn print_table(rows: &[(String, String)], markdown: bool) {
    let header = [
        "row",
        "pods",
        "nodes (faithful / cost)",
        "faithful $/h",
        "cost-aware $/h",
        "lower bound $/h",
        "faithful / bound",
        "cost-aware / bound",
        "faithful solve",
        "cost-aware solve",
        "time ratio",
    ];
    let mut lines = Vec::new();
    for (row, text) in rows {
        let f: Vec<f64> = text
            .split_whitespace()
            .filter_map(|x| x.parse().ok())
            .collect();
        let [pods, scheduled, nf, nc, faithful, cost, bound, tf, tc] = f[..] else {
            eprintln!("row {row}: unreadable output {text:?}");
            continue;
        };
        let ratio = |x: f64| {
            if bound > 0.0 {
                format!("{:.3}", x / bound)
            } else {
                "n/a".to_string()
            }
        };
        lines.push(vec![
            row.clone(),
            format!("{pods} ({scheduled} scheduled)"),
            format!("{nf} / {nc}"),
            format!("{faithful:.4}"),
            format!("{cost:.4}"),
            format!("{bound:.4}"),
            ratio(faithful),
            ratio(cost),
            format!("{:.2} ms", tf / 1e6),
            format!("{:.2} ms", tc / 1e6),
            format!("{:.1}x", tc / tf.max(1.0)),
        ]);
    }
    if markdown {
        println!("| {} |", header.join(" | "));
        println!("|{}", " --- |".repeat(header.len()));
        for l in &lines {
            println!("| {} |", l.join(" | "));
        }
        return;
    }
    println!("{}", header.join("  "));
    for l in &lines {
        println!("{}", l.join("  "));
    }
}

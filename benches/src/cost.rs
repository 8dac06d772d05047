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
use std::time::Duration;

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

use crate::report;
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
        faithful_time: report::fastest(5, Duration::from_secs(2), || solve(input, options)),
        cost_time: report::fastest(5, Duration::from_secs(2), || {
            solve_packed(input, &cost_options)
        }),
    }
}

/// The tag of a cost row's output line.
pub const TAG: &str = "K";

/// Whether `row` is a cost row (`cost:N[:SEED]` or `cost-diverse:N`).
pub fn is_cost_row(row: &str) -> bool {
    row.starts_with("cost:") || row.starts_with("cost-diverse:")
}

/// Runs a cost row (`cost:N[:SEED]` or `cost-diverse:N`) and returns the child's output line
/// ([`TAG`] and the figures), or an error naming the row.
pub fn run_row(row: &str) -> Result<String, String> {
    let (kind, numbers) = report::parse_row(row)?;
    let r = match (kind, numbers.as_slice()) {
        ("cost", [n, rest @ ..]) if rest.len() <= 1 => {
            let seed = rest.first().copied().unwrap_or(1);
            let (types, policy) = aws_instance_types()?;
            let options = SchedulerOptions::default().with_label_policy(policy);
            measure(&generic_input(*n as usize, seed, types), &options)
        }
        ("cost-diverse", [n]) => {
            let pods = scenario::to_pods(&Workload::new().diverse_pods(*n as usize));
            measure(
                &scenario::input(pods),
                &scenario::options(PreferencePolicy::Respect),
            )
        }
        _ => return Err(format!("unknown cost row {row:?}")),
    };
    let figures = [
        r.pods.to_string(),
        r.scheduled.to_string(),
        r.nodes.0.to_string(),
        r.nodes.1.to_string(),
        r.faithful.to_string(),
        r.cost_aware.to_string(),
        r.bound.to_string(),
        r.faithful_time.as_nanos().to_string(),
        r.cost_time.as_nanos().to_string(),
    ];
    Ok(report::tagged_line(TAG, &figures))
}

/// Prints the cost table from the children's figures (the text after [`TAG`]).
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
        let Some([pods, scheduled, nf, nc, faithful, cost, bound, tf, tc]) =
            report::figures::<f64, 9>(text)
        else {
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
    report::print_table(&header, &lines, markdown);
}

//! The simulator's measurements (the reporter's `sim:N` and `soak:N` rows): how many simulated
//! steps per second the simulator plays on a large cluster, and a long run with every fault on
//! whose cost over time is compared with the same run without consolidation and with the
//! lower bound of the pods it holds (`karpenter_core::scheduling::bound`).
//!
//! Both drive `karpenter_fake::sim::chaos`, so the operator loops run as in the reliability
//! suite, with every invariant checked after every step.

use std::time::{Duration, Instant};

use karpenter_core::api::NillableDuration;
use karpenter_core::model::Pod;
use karpenter_core::resources::{Quantity, ResourceList, names};
use karpenter_core::scheduling::bound::{BoundColumn, BoundPod, lower_bound};
use karpenter_fake::sim::Sim;
use karpenter_fake::sim::chaos::{
    ChaosConfig, Event, FaultRates, Scenario, SimRng, play, play_observed,
};
use karpenter_fake::sim::workload::{Deployment, daemonset};

/// Deployments of the large cluster (each starts with `nodes / DEPLOYMENTS` replicas).
const DEPLOYMENTS: usize = 10;

/// A cluster of about `nodes` nodes for `steps` minute steps: one NodePool over a 2-cpu
/// instance type, ten Deployments of 1.2-cpu pods (one pod per node), a DaemonSet, and each
/// step one Deployment scaled by up to 5 % up or down (new nodes launched, empty ones
/// consolidated). No faults.
pub fn large_cluster(nodes: usize, steps: usize) -> Scenario {
    let per = u32::try_from((nodes / DEPLOYMENTS).max(1)).unwrap_or(u32::MAX);
    let mut scenario = Scenario::generate(0, steps, FaultRates::none());
    let mut rng = SimRng::new(7);
    scenario.setup.node_pools = vec![karpenter_fake::sim::node_pool("default")];
    scenario.setup.instance_types = karpenter_fake::catalog::instance_types(2)
        .into_iter()
        .skip(1)
        .collect();
    scenario.setup.daemonsets = vec![daemonset("node-agent", 100, 128)];
    scenario.setup.deployments = (0..DEPLOYMENTS)
        .map(|i| (Deployment::new(format!("web-{i}"), 1200, 1024), per))
        .collect();
    let names: Vec<String> = (0..DEPLOYMENTS).map(|i| format!("web-{i}")).collect();
    let spread = u64::from(per / 20).max(1);
    scenario.steps = (0..steps)
        .map(|_| {
            let name = rng.pick(&names).clone();
            let replicas = u64::from(per) - spread + rng.range(0, 2 * spread);
            vec![Event::Scale {
                deployment: name,
                replicas: u32::try_from(replicas).unwrap_or(per),
            }]
        })
        .collect();
    scenario
}

/// What a `sim:N` row measured.
#[derive(Debug, Clone)]
pub struct SpeedRow {
    /// Steps played (one simulated minute each).
    pub steps: usize,
    /// The most nodes at once.
    pub peak_nodes: usize,
    /// Inputs the operator handled.
    pub inputs: u64,
    /// Wall time of the run (setup excluded).
    pub elapsed: Duration,
}

impl SpeedRow {
    /// Simulated steps per wall-clock second.
    pub fn steps_per_second(&self) -> f64 {
        self.steps as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

/// Plays [`large_cluster`] and times it.
pub fn speed(nodes: usize, steps: usize) -> Result<SpeedRow, String> {
    let scenario = large_cluster(nodes, steps);
    let config = ChaosConfig {
        steps,
        faults: FaultRates::none(),
        ..ChaosConfig::default()
    };
    let start = Instant::now();
    let report = play(&scenario, &config)
        .map_err(|(step, at, v)| format!("sim:{nodes}: step {step} ({at}): {v}"))?;
    Ok(SpeedRow {
        steps: report.steps,
        peak_nodes: report.peak_nodes,
        inputs: report.inputs,
        elapsed: start.elapsed(),
    })
}

/// One sample of a soak: the hourly price of what runs, with and without consolidation, and
/// the lower bound of the pods the consolidated run holds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SoakSample {
    /// The step sampled.
    pub step: usize,
    /// Price per hour of the instances running (consolidation as the NodePools say).
    pub cost: f64,
    /// The same with consolidation off (`consolidateAfter: Never`), same events and faults.
    pub baseline: f64,
    /// A lower bound on the price per hour of any set of nodes holding the consolidated run's
    /// pods.
    pub lower_bound: f64,
}

/// What a `soak:N` row measured.
#[derive(Debug, Clone)]
pub struct SoakRow {
    /// The seed of the scenario.
    pub seed: u64,
    /// Steps played by each run.
    pub steps: usize,
    /// Cost of the run over its span (price per hour × hours).
    pub cost: f64,
    /// Cost of the baseline over its span.
    pub baseline_cost: f64,
    /// The lower bound integrated over the span (sampled).
    pub lower_bound_cost: f64,
    /// Samples, every `sample_every` steps.
    pub samples: Vec<SoakSample>,
    /// Operator restarts (injected crashes) in the run.
    pub restarts: usize,
    /// Instances launched by the run / by the baseline.
    pub launches: (usize, usize),
    /// Wall time of both runs.
    pub elapsed: Duration,
}

/// The lower bound of the pods `sim` holds (bound or pending, DaemonSet pods excepted) on the
/// scenario's instance types, each at its cheapest available offering with the DaemonSets'
/// requests taken from its allocatable.
pub fn cluster_lower_bound(sim: &Sim, scenario: &Scenario) -> f64 {
    let mut daemon = ResourceList::new();
    for ds in &scenario.setup.daemonsets {
        daemon.add_assign(&ds.pod.requests);
        daemon.add_assign(&ResourceList::from_iter([(
            names::PODS,
            Quantity::from_units(1),
        )]));
    }
    let columns: Vec<BoundColumn> = scenario
        .setup
        .instance_types
        .iter()
        .filter_map(|it| {
            let price = it
                .available_offerings()
                .map(|o| o.price)
                .min_by(f64::total_cmp)?;
            Some(BoundColumn {
                name: it.name().to_string(),
                price,
                allocatable: it.allocatable().sub(&daemon),
            })
        })
        .collect();
    let all: Vec<usize> = (0..columns.len()).collect();
    let pods: Vec<BoundPod> = sim
        .api()
        .pods
        .values()
        .filter(|p: &&Pod| !p.is_daemonset_pod() && !p.is_terminal())
        .map(|p| {
            let mut requests = p.requests.clone();
            requests.insert(names::PODS, Quantity::from_units(1));
            BoundPod {
                requests,
                compatible: all.clone(),
                exclusive_group: None,
            }
        })
        .collect();
    lower_bound(&columns, &pods)
}

/// Plays the chaos scenario of `seed` for `steps` steps with every fault on, and the same
/// scenario with consolidation off in every NodePool; samples both every `sample_every` steps.
pub fn soak(seed: u64, steps: usize, sample_every: usize) -> Result<SoakRow, String> {
    let faults = FaultRates::default_on();
    let scenario = Scenario::generate(seed, steps, faults);
    let mut baseline = scenario.clone();
    for np in &mut baseline.setup.node_pools {
        np.spec.disruption.consolidate_after = NillableDuration::parse("Never").ok();
    }
    let config = ChaosConfig {
        steps,
        faults,
        ..ChaosConfig::default()
    };
    let every = sample_every.max(1);
    let start = Instant::now();
    let mut samples: Vec<SoakSample> = Vec::new();
    let report = play_observed(&scenario, &config, |step, sim| {
        if step % every == every - 1 {
            samples.push(SoakSample {
                step: step + 1,
                cost: sim.hourly_cost(),
                baseline: 0.0,
                lower_bound: cluster_lower_bound(sim, &scenario),
            });
        }
    })
    .map_err(|(step, at, v)| format!("soak seed {seed}: step {step} ({at}): {v}"))?;
    let base = play(&baseline, &config).map_err(|(step, at, v)| {
        format!("soak seed {seed}, no consolidation: step {step} ({at}): {v}")
    })?;
    for s in &mut samples {
        s.baseline = base.hourly_cost.get(s.step - 1).copied().unwrap_or(0.0);
    }
    let hours = config.step.as_secs_f64() / 3600.0 * every as f64;
    let lower_bound_cost = samples.iter().map(|s| s.lower_bound * hours).sum();
    Ok(SoakRow {
        seed,
        steps: report.steps,
        cost: report.cost,
        baseline_cost: base.cost,
        lower_bound_cost,
        samples,
        restarts: report.restarts,
        launches: (report.launches, base.launches),
        elapsed: start.elapsed(),
    })
}

/// Runs a reporter row: `sim:N[:STEPS]` (a cluster of about N nodes for STEPS minute steps,
/// default 1,440: a simulated day) answers `S <nodes> <steps> <peak nodes> <inputs> <nanos>`;
/// `soak:STEPS[:SEED]` (seed 0 by default) answers `W <seed> <steps> <cost> <baseline cost>
/// <lower bound cost> <restarts> <launches> <baseline launches> <nanos>` and one line
/// `w <step> <cost/h> <baseline/h> <lower bound/h>` per hour sampled.
pub fn run_row(row: &str) -> Result<String, String> {
    let mut parts = row.split(':');
    let kind = parts.next().unwrap_or_default();
    let mut number = |what: &str, default: Option<u64>| -> Result<u64, String> {
        match parts.next() {
            Some(text) => text
                .parse()
                .map_err(|_| format!("row {row:?}: bad {what} {text:?}")),
            None => default.ok_or_else(|| format!("row {row:?}: missing {what}")),
        }
    };
    match kind {
        "sim" => {
            let nodes = usize::try_from(number("node count", None)?).unwrap_or(usize::MAX);
            let steps = usize::try_from(number("step count", Some(1440))?).unwrap_or(1440);
            let r = speed(nodes, steps)?;
            Ok(format!(
                "S {nodes} {} {} {} {}",
                r.steps,
                r.peak_nodes,
                r.inputs,
                r.elapsed.as_nanos()
            ))
        }
        "soak" => {
            let steps = usize::try_from(number("step count", None)?).unwrap_or(usize::MAX);
            let seed = number("seed", Some(0))?;
            let r = soak(seed, steps, 60)?;
            let mut out = format!(
                "W {} {} {:.4} {:.4} {:.4} {} {} {} {}",
                r.seed,
                r.steps,
                r.cost,
                r.baseline_cost,
                r.lower_bound_cost,
                r.restarts,
                r.launches.0,
                r.launches.1,
                r.elapsed.as_nanos()
            );
            for s in &r.samples {
                out.push_str(&format!(
                    "\nw {} {:.4} {:.4} {:.4}",
                    s.step, s.cost, s.baseline, s.lower_bound
                ));
            }
            Ok(out)
        }
        other => Err(format!("unknown row kind {other:?}")),
    }
}

fn print_lines(header: &[&str], lines: &[Vec<String>], markdown: bool) {
    if markdown {
        println!("| {} |", header.join(" | "));
        println!("|{}", " --- |".repeat(header.len()));
        for l in lines {
            println!("| {} |", l.join(" | "));
        }
    } else {
        println!("{}", header.join("  "));
        for l in lines {
            println!("{}", l.join("  "));
        }
    }
}

/// Prints the `sim:` rows' answers (`row`, the text after `S `).
pub fn print_speed(rows: &[(String, String)], markdown: bool) {
    let header = [
        "row",
        "steps",
        "peak nodes",
        "operator inputs",
        "wall time",
        "steps/s",
        "simulated day (1,440 steps)",
    ];
    let mut lines = Vec::new();
    for (row, text) in rows {
        let f: Vec<f64> = text
            .split_whitespace()
            .filter_map(|x| x.parse().ok())
            .collect();
        let [_, steps, peak, inputs, nanos] = f[..] else {
            eprintln!("row {row}: unreadable output {text:?}");
            continue;
        };
        let secs = nanos / 1e9;
        let per_second = steps / secs.max(1e-9);
        lines.push(vec![
            row.clone(),
            format!("{steps:.0}"),
            format!("{peak:.0}"),
            format!("{inputs:.0}"),
            format!("{secs:.1} s"),
            format!("{per_second:.1}"),
            format!("{:.1} s", 1440.0 / per_second.max(1e-9)),
        ]);
    }
    print_lines(&header, &lines, markdown);
}

/// Prints the `soak:` rows' answers (`row`, the text after `W `): a summary per row, then the
/// hourly samples of each row, every `stride` hours.
pub fn print_soak(rows: &[(String, String)], markdown: bool) {
    let header = [
        "row",
        "seed",
        "steps",
        "cost",
        "no consolidation",
        "lower bound",
        "cost / no consolidation",
        "cost / lower bound",
        "restarts",
        "launches (no consolidation)",
        "wall time (both runs)",
    ];
    let mut lines = Vec::new();
    let mut samples: Vec<(String, Vec<Vec<f64>>)> = Vec::new();
    for (row, text) in rows {
        let mut it = text.lines();
        let f: Vec<f64> = it
            .next()
            .unwrap_or_default()
            .split_whitespace()
            .filter_map(|x| x.parse().ok())
            .collect();
        let [seed, steps, cost, base, bound, restarts, l1, l2, nanos] = f[..] else {
            eprintln!("row {row}: unreadable output {text:?}");
            continue;
        };
        lines.push(vec![
            row.clone(),
            format!("{seed:.0}"),
            format!("{steps:.0}"),
            format!("{cost:.2}"),
            format!("{base:.2}"),
            format!("{bound:.2}"),
            format!("{:.3}", cost / base.max(1e-9)),
            format!("{:.3}", cost / bound.max(1e-9)),
            format!("{restarts:.0}"),
            format!("{l1:.0} ({l2:.0})"),
            format!("{:.1} s", nanos / 1e9),
        ]);
        let rows: Vec<Vec<f64>> = it
            .filter_map(|l| l.strip_prefix("w "))
            .map(|l| {
                l.split_whitespace()
                    .filter_map(|x| x.parse().ok())
                    .collect()
            })
            .collect();
        samples.push((row.clone(), rows));
    }
    print_lines(&header, &lines, markdown);
    for (row, rows) in samples {
        println!();
        println!(
            "{row}: price per hour every 16 simulated hours (1,000 steps; hourly samples averaged)"
        );
        println!();
        let header = [
            "steps",
            "cost $/h",
            "no consolidation $/h",
            "lower bound $/h",
        ];
        let mut lines = Vec::new();
        for chunk in rows.chunks(16) {
            let n = chunk.len() as f64;
            let avg = |i: usize| {
                chunk
                    .iter()
                    .map(|r| r.get(i).copied().unwrap_or(0.0))
                    .sum::<f64>()
                    / n
            };
            let last = chunk.last().and_then(|r| r.first()).copied().unwrap_or(0.0);
            lines.push(vec![
                format!("{last:.0}"),
                format!("{:.2}", avg(1)),
                format!("{:.2}", avg(2)),
                format!("{:.2}", avg(3)),
            ]);
        }
        print_lines(&header, &lines, markdown);
    }
}

//! The scheduling benchmark reporter: reproduces upstream's `BenchmarkScheduling*` workloads
//! (upstream `scheduling_benchmark_test.go`) and prints, per row, pods, nodes, time per solve, time
//! per pod, pods/s and peak memory.
//!
//! ```text
//! cargo run --release -p karpenter-bench --bin reporter            # every row, a table
//! cargo run --release -p karpenter-bench --bin reporter -- --markdown
//! cargo run --release -p karpenter-bench --bin reporter -- --rows diverse:1000,diverse:20000
//! ```
//!
//! Each row runs in a child process (this binary with `--child ROW`), so the peak resident
//! memory (`VmHWM` of `/proc/self/status`) belongs to that row alone.

use std::process::Command;
use std::time::{Duration, Instant};

use karpenter_bench::scenario;
use karpenter_bench::workload::Workload;
use karpenter_core::scheduling::{PreferencePolicy, solve};

const DEFAULT_ROWS: &[&str] = &[
    "diverse:1",
    "diverse:50",
    "diverse:100",
    "diverse:500",
    "diverse:1000",
    "diverse:1500",
    "diverse:2000",
    "diverse:5000",
    "diverse:10000",
    "diverse:20000",
    "respect:4000",
    "ignore:4000",
    "consolidation:100",
    "consolidation:400",
    "consolidation:1000",
    "consolidation:5000",
    // The cost rows (karpenter_bench::cost).
    "cost:50",
    "cost:200",
    "cost:1000",
    "cost:5000",
    "cost-diverse:1000",
];

struct Row {
    name: String,
    pods: usize,
    scheduled: usize,
    nodes: usize,
    iterations: u32,
    per_solve: Duration,
    peak_kib: u64,
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let Some(pos) = args.iter().position(|a| a == "--child") {
        let Some(row) = args.get(pos + 1) else {
            eprintln!("--child needs a row such as diverse:1000");
            std::process::exit(2);
        };
        match run_row(row) {
            Ok(line) => println!("{line}"),
            Err(e) => {
                eprintln!("{e}");
                std::process::exit(2);
            }
        }
        return;
    }
    let markdown = args.iter().any(|a| a == "--markdown");
    let rows: Vec<String> = match args.iter().position(|a| a == "--rows") {
        Some(pos) => args
            .get(pos + 1)
            .map(|s| s.split(',').map(str::to_string).collect())
            .unwrap_or_default(),
        None => DEFAULT_ROWS.iter().map(|s| s.to_string()).collect(),
    };
    let exe = match std::env::current_exe() {
        Ok(e) => e,
        Err(e) => {
            eprintln!("cannot find the reporter executable: {e}");
            std::process::exit(1);
        }
    };
    let mut results = Vec::new();
    let mut consolidation: Vec<(String, String)> = Vec::new();
    let mut cost: Vec<(String, String)> = Vec::new();
    for row in &rows {
        let out = Command::new(&exe).arg("--child").arg(row).output();
        match out {
            Ok(o) if o.status.success() => {
                let text = String::from_utf8_lossy(&o.stdout);
                if let Some(rest) = text.trim().strip_prefix("K ") {
                    cost.push((row.clone(), rest.to_string()));
                    continue;
                }
                if let Some(rest) = text.trim().strip_prefix("C ") {
                    consolidation.push((row.clone(), rest.to_string()));
                    continue;
                }
                match parse_child(row, text.trim()) {
                    Some(r) => results.push(r),
                    None => eprintln!("row {row}: unreadable output {text:?}"),
                }
            }
            Ok(o) => eprintln!("row {row} failed: {}", String::from_utf8_lossy(&o.stderr)),
            Err(e) => eprintln!("row {row} could not start: {e}"),
        }
    }
    print_table(&results, markdown);
    if !consolidation.is_empty() {
        println!();
        print_consolidation(&consolidation, markdown);
    }
    if !cost.is_empty() {
        println!();
        karpenter_bench::cost::print_table(&cost, markdown);
    }
}

fn print_consolidation(rows: &[(String, String)], markdown: bool) {
    let header = [
        "row",
        "nodes",
        "candidates",
        "evaluated",
        "prepare",
        "single-node eval",
        "multi-node pass",
        "removed by pass",
        "peak RSS",
    ];
    let mut lines = Vec::new();
    for (row, text) in rows {
        let f: Vec<u64> = text
            .split_whitespace()
            .filter_map(|x| x.parse().ok())
            .collect();
        let [
            nodes,
            candidates,
            evaluated,
            prepare,
            per,
            multi,
            removed,
            peak,
        ] = f[..]
        else {
            eprintln!("row {row}: unreadable output {text:?}");
            continue;
        };
        lines.push(vec![
            row.clone(),
            nodes.to_string(),
            candidates.to_string(),
            evaluated.to_string(),
            format!("{:.3} ms", prepare as f64 / 1e6),
            format!("{:.3} ms", per as f64 / 1e6),
            format!("{:.3} s", multi as f64 / 1e9),
            removed.to_string(),
            format!("{:.1} MB", peak as f64 / 1024.0),
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

fn run_row(row: &str) -> Result<String, String> {
    if row.starts_with("cost") {
        return karpenter_bench::cost::run_row(row);
    }
    let (kind, n) = row
        .split_once(':')
        .ok_or_else(|| format!("row {row:?} is not KIND:N"))?;
    let n: usize = n.parse().map_err(|_| format!("row {row:?}: bad count"))?;
    if kind == "consolidation" {
        return run_consolidation_row(n);
    }
    let policy = match kind {
        "diverse" | "respect" => PreferencePolicy::Respect,
        "ignore" => PreferencePolicy::Ignore,
        other => return Err(format!("unknown row kind {other:?}")),
    };
    // A fresh generator per row (upstream shares one per process; see workload docs).
    let draws = match kind {
        "diverse" => Workload::new().diverse_pods(n),
        _ => Workload::new().preference_pods(n),
    };
    let pods = scenario::to_pods(&draws);
    let input = scenario::input(pods);
    let options = scenario::options(policy);
    // Warm-up and the reported solve.
    let (scheduled, nodes) = {
        let results = solve(&input, &options);
        (n - results.pod_errors.len(), results.new_node_claims.len())
    };
    let mut iterations = 0u32;
    let start = Instant::now();
    while iterations < 3 || (start.elapsed() < Duration::from_secs(2) && iterations < 1000) {
        std::hint::black_box(solve(&input, &options));
        iterations += 1;
    }
    let per_solve = start.elapsed() / iterations;
    Ok(format!(
        "{n} {scheduled} {nodes} {iterations} {} {}",
        per_solve.as_nanos(),
        peak_rss_kib()
    ))
}

/// A consolidation row: `<nodes> <candidates> <evaluated> <ns to prepare the simulator> <ns per
/// single-node evaluation> <ns for a full multi-node pass> <nodes removed by that pass> <peak
/// KiB>`.
fn run_consolidation_row(n: usize) -> Result<String, String> {
    use karpenter_bench::consolidation;
    use karpenter_core::disruption::{
        DisruptionOptions, consolidation_candidates_of, evaluate_consolidation_with,
        multi_node_pass, simulate::SimulationContext,
    };
    let snapshot = consolidation::cluster(n);
    let now = consolidation::now();
    let options =
        DisruptionOptions::default().with_scheduler(scenario::options(PreferencePolicy::Respect));
    let candidates = consolidation_candidates_of(&snapshot, now);
    // Single-node: evaluate candidates one by one (every candidate up to 200, spread evenly).
    let step = (candidates.len() / 200).max(1);
    let sample: Vec<_> = candidates.iter().step_by(step).take(200).collect();
    // The scheduler is prepared once per snapshot (as a disruption pass does), then each
    // candidate is one simulation over it.
    let start = Instant::now();
    let context = SimulationContext::new(&snapshot, &options.scheduler, now);
    let simulator = context.simulator();
    let prepare = start.elapsed();
    let start = Instant::now();
    for c in &sample {
        let _ = std::hint::black_box(evaluate_consolidation_with(
            &simulator,
            std::slice::from_ref(*c),
            &options,
        ));
    }
    let per_candidate = start.elapsed() / (sample.len().max(1) as u32);
    drop(simulator);
    // Multi-node: one full pass over every candidate (no cap, no time-out).
    let start = Instant::now();
    let pass = multi_node_pass(&snapshot, now, &options);
    let multi = start.elapsed();
    let removed: usize = pass.commands.iter().map(|c| c.candidates.len()).sum();
    Ok(format!(
        "C {n} {} {} {} {} {} {removed} {}",
        candidates.len(),
        sample.len(),
        prepare.as_nanos(),
        per_candidate.as_nanos(),
        multi.as_nanos(),
        peak_rss_kib()
    ))
}

fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

fn parse_child(row: &str, line: &str) -> Option<Row> {
    let f: Vec<u64> = line
        .split_whitespace()
        .map(|x| x.parse().ok())
        .collect::<Option<_>>()?;
    let [pods, scheduled, nodes, iterations, nanos, peak] = f[..] else {
        return None;
    };
    Some(Row {
        name: row.to_string(),
        pods: pods as usize,
        scheduled: scheduled as usize,
        nodes: nodes as usize,
        iterations: iterations as u32,
        per_solve: Duration::from_nanos(nanos),
        peak_kib: peak,
    })
}

fn print_table(rows: &[Row], markdown: bool) {
    let header = [
        "row",
        "pods",
        "scheduled",
        "nodes",
        "solves",
        "time/solve",
        "time/pod",
        "pods/s",
        "peak RSS",
    ];
    let lines: Vec<[String; 9]> = rows
        .iter()
        .map(|r| {
            let per_pod = r.per_solve.as_secs_f64() / r.pods.max(1) as f64;
            [
                r.name.clone(),
                r.pods.to_string(),
                r.scheduled.to_string(),
                r.nodes.to_string(),
                r.iterations.to_string(),
                format!("{:.3} ms", r.per_solve.as_secs_f64() * 1e3),
                format!("{:.2} µs", per_pod * 1e6),
                format!("{:.0}", 1.0 / per_pod),
                format!("{:.1} MB", r.peak_kib as f64 / 1024.0),
            ]
        })
        .collect();
    if markdown {
        println!("| {} |", header.join(" | "));
        println!("|{}", " --- |".repeat(header.len()));
        for l in &lines {
            println!("| {} |", l.join(" | "));
        }
        return;
    }
    let widths: Vec<usize> = (0..header.len())
        .map(|i| {
            lines
                .iter()
                .map(|l| l[i].chars().count())
                .chain([header[i].len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let fmt = |cells: Vec<&str>| {
        cells
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:>w$}"))
            .collect::<Vec<_>>()
            .join("  ")
    };
    println!("{}", fmt(header.to_vec()));
    for l in &lines {
        println!("{}", fmt(l.iter().map(String::as_str).collect()));
    }
}

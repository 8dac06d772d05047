//! The scheduling benchmark reporter: reproduces upstream's `BenchmarkScheduling*` workloads
//! (upstream `scheduling_benchmark_test.go`) and prints, per row, pods, nodes, time per solve, time
//! per pod, pods/s and peak memory.
//!
//! ```text
//! cargo run --release -p karpenter-bench --bin reporter            # every row, a table
//! cargo run --release -p karpenter-bench --bin reporter -- --markdown
//! cargo run --release -p karpenter-bench --bin reporter -- --rows diverse:1000,diverse:20000
//! cargo run --release -p karpenter-bench --bin reporter -- --once --raw --rows diverse:5000
//! cargo run --release -p karpenter-bench --bin reporter -- --help
//! ```
//!
//! Each row runs in a child process (this binary with `--child ROW`), so the peak resident
//! memory (`VmHWM` of `/proc/self/status`) belongs to that row alone.
//!
//! The reporter runs on mimalloc, not the system allocator: the simulator rows allocate and free
//! millions of short-lived objects per simulated hour, and glibc's allocator took about a third
//! of their cycles (docs/performance.md). mimalloc's defaults keep freed memory a little longer
//! than glibc, which would raise the scheduling rows' peak memory (the 20,000-pod row from 97 to
//! 152 MB), so every row runs with [`ALLOCATOR_ENV`]: memory is returned at once and arenas are
//! committed on demand, which keeps peak memory at glibc's. A `--child` run started without
//! those variables starts itself again with them, so a row measures the same by hand. Libraries
//! leave the allocator to the binary that embeds them: this choice is the reporter's.

use std::process::Command;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The mimalloc options every row runs with (read by mimalloc when the process starts).
const ALLOCATOR_ENV: [(&str, &str); 2] = [
    ("MIMALLOC_PURGE_DELAY", "0"),
    ("MIMALLOC_ARENA_EAGER_COMMIT", "0"),
];

/// This binary with [`ALLOCATOR_ENV`] set.
fn configured(exe: &std::path::Path) -> Command {
    let mut command = Command::new(exe);
    command.envs(ALLOCATOR_ENV);
    command
}

/// Whether this process started with [`ALLOCATOR_ENV`].
fn allocator_configured() -> bool {
    ALLOCATOR_ENV
        .iter()
        .all(|(name, value)| std::env::var_os(name).is_some_and(|v| v == *value))
}
use std::time::{Duration, Instant};

use karpenter_bench::workload::Workload;
use karpenter_bench::{cost, report, scenario};
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
    // The simulator (karpenter_bench::simulation).
    "sim:1000",
    "soak:10000",
];

/// The tag of a consolidation row's output line.
const CONSOLIDATION_TAG: &str = "C";

struct Row {
    name: String,
    pods: usize,
    scheduled: usize,
    nodes: usize,
    iterations: u32,
    per_solve: Duration,
    peak_kib: u64,
}

const HELP: &str = "\
reporter: upstream's BenchmarkScheduling* workloads (and consolidation) solved by karpenter-core

USAGE:
    reporter [--rows ROW,ROW,...] [--once] [--markdown | --raw]
    reporter --help

ROWS (default: every row below):
    diverse:N        makeDiversePods(N) over fake.InstanceTypes(400), PreferencePolicy Respect
    respect:N        makePreferencePods(N), PreferencePolicy Respect
    ignore:N         makePreferencePods(N), PreferencePolicy Ignore
    consolidation:N  a cluster of N nodes: prepare, single-node evaluation, multi-node pass
    cost:N[:SEED]    a generic mix of N pods on the embedded AWS catalog: faithful and cost-aware
                     plans, the lower bound, solve times (karpenter_bench::cost)
    cost-diverse:N   makeDiversePods(N) on fake.InstanceTypes(400), as cost:N
    sim:N[:STEPS]    the simulator on a cluster of about N nodes for STEPS minute steps (1,440,
                     a simulated day, by default): steps per second
    soak:STEPS[:SEED]  the chaos scenario of SEED (0) for STEPS steps with every fault on: cost
                     over time against the same run without consolidation and the lower bound

OPTIONS:
    --rows LIST   comma-separated rows to run, in order
    --once        time exactly one solve per row, the first of its process (no warm-up, no
                  averaging): what upstream's `-test.benchtime=1x` measures
    --markdown    print the tables as Markdown
    --raw         print one machine-readable line per scheduling row:
                  ROW PODS SCHEDULED NODES SOLVES NANOS_PER_SOLVE PEAK_RSS_KIB
    -h, --help    print this help

Each row runs in a child process (this binary with `--child ROW`), so its peak resident memory
(VmHWM) is that row's alone.
";

/// Command-line options of the reporter.
struct Args {
    rows: Vec<String>,
    markdown: bool,
    raw: bool,
    once: bool,
    child: Option<String>,
}

fn parse_args(args: &[String]) -> Result<Args, String> {
    let mut parsed = Args {
        rows: DEFAULT_ROWS.iter().map(|s| s.to_string()).collect(),
        markdown: false,
        raw: false,
        once: false,
        child: None,
    };
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--markdown" => parsed.markdown = true,
            "--raw" => parsed.raw = true,
            "--once" => parsed.once = true,
            "--rows" => {
                let list = it
                    .next()
                    .ok_or("--rows needs a list such as diverse:1000")?;
                parsed.rows = list
                    .split(',')
                    .filter(|s| !s.is_empty())
                    .map(str::to_string)
                    .collect();
            }
            "--child" => {
                let row = it
                    .next()
                    .ok_or("--child needs a row such as diverse:1000")?;
                parsed.child = Some(row.clone());
            }
            other => return Err(format!("unknown argument {other:?} (see --help)")),
        }
    }
    Ok(parsed)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--help" || a == "-h") {
        print!("{HELP}");
        return;
    }
    let args = match parse_args(&args) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("reporter: {e}");
            std::process::exit(2);
        }
    };
    let exe = match std::env::current_exe() {
        Ok(e) => e,
        Err(e) => {
            eprintln!("cannot find the reporter executable: {e}");
            std::process::exit(1);
        }
    };
    if let Some(row) = &args.child {
        if !allocator_configured() {
            // Started by hand: run the row as the parent would, with the allocator's options.
            let status = configured(&exe).args(std::env::args_os().skip(1)).status();
            match status {
                Ok(s) => std::process::exit(s.code().unwrap_or(1)),
                Err(e) => {
                    eprintln!("cannot start the reporter again: {e}");
                    std::process::exit(1);
                }
            }
        }
        match run_row(row, args.once) {
            Ok(line) => println!("{line}"),
            Err(e) => {
                eprintln!("{e}");
                std::process::exit(2);
            }
        }
        return;
    }
    let mut results = Vec::new();
    let mut consolidation: Vec<(String, String)> = Vec::new();
    let mut cost_rows: Vec<(String, String)> = Vec::new();
    let mut speed: Vec<(String, String)> = Vec::new();
    let mut soak: Vec<(String, String)> = Vec::new();
    let mut failed = false;
    for row in &args.rows {
        let mut command = configured(&exe);
        command.arg("--child").arg(row);
        if args.once {
            command.arg("--once");
        }
        match command.output() {
            Ok(o) if o.status.success() => {
                let text = String::from_utf8_lossy(&o.stdout);
                if let Some(rest) = report::strip_tag(&text, "S") {
                    speed.push((row.clone(), rest.to_string()));
                    continue;
                }
                if let Some(rest) = report::strip_tag(&text, "W") {
                    soak.push((row.clone(), rest.to_string()));
                    continue;
                }
                if let Some(rest) = report::strip_tag(&text, cost::TAG) {
                    cost_rows.push((row.clone(), rest.to_string()));
                    continue;
                }
                if let Some(rest) = report::strip_tag(&text, CONSOLIDATION_TAG) {
                    consolidation.push((row.clone(), rest.to_string()));
                    continue;
                }
                match parse_child(row, text.trim()) {
                    Some(r) => results.push(r),
                    None => {
                        failed = true;
                        eprintln!("row {row}: unreadable output {text:?}");
                    }
                }
            }
            Ok(o) => {
                failed = true;
                eprintln!("row {row} failed: {}", String::from_utf8_lossy(&o.stderr));
            }
            Err(e) => {
                failed = true;
                eprintln!("row {row} could not start: {e}");
            }
        }
    }
    if args.raw {
        for r in &results {
            println!(
                "{} {} {} {} {} {} {}",
                r.name,
                r.pods,
                r.scheduled,
                r.nodes,
                r.iterations,
                r.per_solve.as_nanos(),
                r.peak_kib
            );
        }
        for (row, text) in &consolidation {
            println!("{row} {CONSOLIDATION_TAG} {text}");
        }
    } else {
        if !results.is_empty() {
            print_table(&results, args.markdown);
        }
        if !consolidation.is_empty() {
            if !results.is_empty() {
                println!();
            }
            print_consolidation(&consolidation, args.markdown);
        }
    }
    if !cost_rows.is_empty() {
        println!();
        cost::print_table(&cost_rows, args.markdown);
    }
    if !speed.is_empty() {
        println!();
        karpenter_bench::simulation::print_speed(&speed, args.markdown);
    }
    if !soak.is_empty() {
        println!();
        karpenter_bench::simulation::print_soak(&soak, args.markdown);
    }
    if failed {
        std::process::exit(1);
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
        "single-node eval (CPU)",
        "multi-node pass",
        "multi-node pass (CPU)",
        "removed by pass",
        "peak RSS",
    ];
    let mut lines = Vec::new();
    for (row, text) in rows {
        let Some(
            [
                nodes,
                candidates,
                evaluated,
                prepare,
                per,
                multi,
                removed,
                peak,
                per_cpu,
                multi_cpu,
            ],
        ) = report::figures::<u64, 10>(text)
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
            format!("{:.3} ms", per_cpu as f64 / 1e6),
            format!("{:.3} s", multi as f64 / 1e9),
            format!("{:.3} s", multi_cpu as f64 / 1e9),
            removed.to_string(),
            format!("{:.1} MB", peak as f64 / 1024.0),
        ]);
    }
    report::print_table(&header, &lines, markdown);
}

fn run_row(row: &str, once: bool) -> Result<String, String> {
    if cost::is_cost_row(row) {
        return cost::run_row(row);
    }
    if row.starts_with("sim:") || row.starts_with("soak:") {
        return karpenter_bench::simulation::run_row(row);
    }
    let (kind, n) = match report::parse_row(row)? {
        (kind, numbers) if numbers.len() == 1 => (kind, numbers[0] as usize),
        _ => return Err(format!("row {row:?} is not KIND:N")),
    };
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
    // The draws are the generator's scratch, not input: freed before the solve.
    drop(draws);
    let input = scenario::input(pods);
    let options = scenario::options(policy);
    // `--once`: the first solve of the process alone, timed (upstream's `benchtime=1x`).
    // Otherwise a warm-up solve, then solves repeated for about two seconds and averaged.
    let start = Instant::now();
    let (scheduled, nodes) = {
        let results = solve(&input, &options);
        (n - results.pod_errors.len(), results.new_node_claims.len())
    };
    let first = start.elapsed();
    let (iterations, per_solve) = if once {
        (1u32, first)
    } else {
        let mut iterations = 0u32;
        let start = Instant::now();
        while iterations < 3 || (start.elapsed() < Duration::from_secs(2) && iterations < 1000) {
            std::hint::black_box(solve(&input, &options));
            iterations += 1;
        }
        (iterations, start.elapsed() / iterations)
    };
    Ok(report::tagged_line(
        "",
        &[
            n.to_string(),
            scheduled.to_string(),
            nodes.to_string(),
            iterations.to_string(),
            per_solve.as_nanos().to_string(),
            report::peak_rss_kib().to_string(),
        ],
    ))
}

/// A consolidation row: `<nodes> <candidates> <evaluated> <ns to prepare the simulator> <ns per
/// single-node evaluation> <ns for a full multi-node pass> <nodes removed by that pass> <peak
/// KiB> <CPU ns per single-node evaluation> <CPU ns for the multi-node pass>` (CPU time of the
/// thread: comparable on a loaded machine; 0 where it cannot be read).
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
    let cpu_start = report::thread_cpu_ns();
    for c in &sample {
        let _ = std::hint::black_box(evaluate_consolidation_with(
            &simulator,
            std::slice::from_ref(*c),
            &options,
        ));
    }
    let per_candidate = start.elapsed() / (sample.len().max(1) as u32);
    let per_candidate_cpu =
        report::thread_cpu_ns().saturating_sub(cpu_start) / (sample.len().max(1) as u64);
    drop(simulator);
    // Multi-node: one full pass over every candidate (no cap, no time-out).
    let start = Instant::now();
    let cpu_start = report::thread_cpu_ns();
    let pass = multi_node_pass(&snapshot, now, &options);
    let multi = start.elapsed();
    let multi_cpu = report::thread_cpu_ns().saturating_sub(cpu_start);
    let removed: usize = pass.commands.iter().map(|c| c.candidates.len()).sum();
    Ok(report::tagged_line(
        CONSOLIDATION_TAG,
        &[
            n.to_string(),
            candidates.len().to_string(),
            sample.len().to_string(),
            prepare.as_nanos().to_string(),
            per_candidate.as_nanos().to_string(),
            multi.as_nanos().to_string(),
            removed.to_string(),
            report::peak_rss_kib().to_string(),
            per_candidate_cpu.to_string(),
            multi_cpu.to_string(),
        ],
    ))
}

fn parse_child(row: &str, line: &str) -> Option<Row> {
    let [pods, scheduled, nodes, iterations, nanos, peak] = report::figures::<u64, 6>(line)?;
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
    let lines: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            let per_pod = r.per_solve.as_secs_f64() / r.pods.max(1) as f64;
            vec![
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
    report::print_table(&header, &lines, markdown);
}

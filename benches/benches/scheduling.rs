//! Criterion benches of the provisioning solve on upstream's benchmark workload (upstream
//! `scheduling_benchmark_test.go`) and of one consolidation evaluation. The reporter binary
//! (`cargo run --release -p karpenter-bench --bin reporter`) prints the full table.

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use karpenter_bench::{consolidation, scenario, workload::Workload};
use karpenter_core::disruption::simulate::SimulationContext;
use karpenter_core::disruption::{
    DisruptionOptions, consolidation_candidates_of, evaluate_consolidation_with, multi_node_pass,
};
use karpenter_core::scheduling::{PreferencePolicy, solve};

fn scheduling(c: &mut Criterion) {
    let mut group = c.benchmark_group("solve/diverse");
    group.sample_size(10);
    // Every scheduling row of the performance targets (1,000 to 20,000 pods).
    for n in [100usize, 1000, 5000, 10000, 20000] {
        let input = scenario::input(scenario::to_pods(&Workload::new().diverse_pods(n)));
        let options = scenario::options(PreferencePolicy::Respect);
        group.throughput(Throughput::Elements(n as u64));
        group.bench_with_input(BenchmarkId::from_parameter(n), &input, |b, input| {
            b.iter(|| solve(input, &options));
        });
    }
    group.finish();
}

fn consolidation_eval(c: &mut Criterion) {
    let now = consolidation::now();
    let options =
        DisruptionOptions::default().with_scheduler(scenario::options(PreferencePolicy::Respect));
    let mut group = c.benchmark_group("consolidation");
    group.sample_size(10);
    // The consolidation targets' rows: 1,000 and 5,000 nodes.
    for n in [100usize, 1000, 5000] {
        let snapshot = consolidation::cluster(n);
        let candidates = consolidation_candidates_of(&snapshot, now);
        // Preparing the scheduler over the snapshot: once per disruption pass.
        group.bench_function(BenchmarkId::new("prepare", n), |b| {
            b.iter(|| {
                let context = SimulationContext::new(&snapshot, &options.scheduler, now);
                std::hint::black_box(context.simulator());
            });
        });
        // One single-node candidate over the prepared scheduler (targets: <= 1 ms at 1,000
        // nodes, <= 5 ms at 5,000), cycling through the candidates.
        let context = SimulationContext::new(&snapshot, &options.scheduler, now);
        let simulator = context.simulator();
        let mut next = 0usize;
        group.bench_function(BenchmarkId::new("single-node-eval", n), |b| {
            b.iter(|| {
                let c = &candidates[next % candidates.len()];
                next += 1;
                evaluate_consolidation_with(&simulator, std::slice::from_ref(c), &options)
            });
        });
        // A full multi-node pass over every candidate (targets: < 0.5 s at 1,000 nodes, < 2 s
        // at 5,000).
        group.bench_function(BenchmarkId::new("multi-node-pass", n), |b| {
            b.iter(|| multi_node_pass(&snapshot, now, &options));
        });
    }
    group.finish();
}

criterion_group!(benches, scheduling, consolidation_eval);
criterion_main!(benches);

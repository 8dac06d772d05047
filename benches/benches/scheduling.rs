//! Criterion benches of the provisioning solve on upstream's benchmark workload (spec
//! `scheduler.md` 6.5) and of one consolidation evaluation. The reporter binary
//! (`cargo run --release -p karpenter-bench --bin reporter`) prints the full table.

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use karpenter_bench::{consolidation, scenario, workload::Workload};
use karpenter_core::disruption::{
    DisruptionOptions, consolidation_candidates_of, evaluate_consolidation,
};
use karpenter_core::scheduling::{PreferencePolicy, solve};

fn scheduling(c: &mut Criterion) {
    let mut group = c.benchmark_group("solve/diverse");
    group.sample_size(10);
    for n in [100usize, 1000, 5000] {
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
    let snapshot = consolidation::cluster(100);
    let now = consolidation::now();
    let options = DisruptionOptions {
        scheduler: scenario::options(PreferencePolicy::Respect),
        ..DisruptionOptions::default()
    };
    let candidates = consolidation_candidates_of(&snapshot, now);
    let mut group = c.benchmark_group("consolidation");
    group.sample_size(10);
    group.bench_function("single-node-eval/100-nodes", |b| {
        b.iter(|| evaluate_consolidation(&snapshot, &candidates[..1], now, &options));
    });
    group.finish();
}

criterion_group!(benches, scheduling, consolidation_eval);
criterion_main!(benches);

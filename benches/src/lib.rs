//! Benchmark workloads shared by the criterion benches and the benchmark reporter.

pub mod consolidation;
pub mod cost;
pub mod gorand;
pub mod report;
pub mod scenario;
pub mod simulation;
pub mod workload;

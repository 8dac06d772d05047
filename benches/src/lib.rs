//! Benchmark workloads shared by the criterion benches and the benchmark reporter.

//! Converts the full embedded us-east-1 catalog (instance types × offerings × prices) for one
//! NodePool, as the provider does per EC2NodeClass, and prints the time and the memory it
//! takes: `cargo run --release -p karpenter-aws --example catalog_convert`.

use std::time::Instant;

use karpenter_aws::catalog::{AwsCatalogOptions, CatalogSources, build_catalog};

/// The process's peak resident set (VmHWM) in KiB, where /proc exists.
fn peak_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let sources = CatalogSources::embedded()?;
    let before = peak_rss_kib().unwrap_or(0);
    let opts = AwsCatalogOptions::default();
    let runs = 20;
    let mut best = f64::INFINITY;
    let mut count = (0, 0);
    for _ in 0..runs {
        let t = Instant::now();
        let report = build_catalog(&sources, &opts)?;
        // As `AwsCloudProvider` does: each catalog-file entry is consumed as it is converted,
        // so the two forms of the whole catalog are never held at once.
        let mut types = Vec::with_capacity(report.instance_types.len());
        for it in report.instance_types {
            types.push(it.to_instance_type()?);
        }
        let ms = t.elapsed().as_secs_f64() * 1e3;
        best = best.min(ms);
        count = (
            types.len(),
            types.iter().map(|t| t.offerings.len()).sum::<usize>(),
        );
    }
    let after = peak_rss_kib().unwrap_or(0);
    println!(
        "{} instance types, {} offerings: best of {runs} {best:.1} ms; peak RSS {:.1} MiB \
         ({:.1} MiB over the loaded sources)",
        count.0,
        count.1,
        after as f64 / 1024.0,
        after.saturating_sub(before) as f64 / 1024.0
    );
    Ok(())
}

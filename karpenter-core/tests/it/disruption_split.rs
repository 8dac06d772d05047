//! Split consolidation (the `cost` packing policy): one oversized node replaced by several
//! cheaper ones, within budgets and above the savings threshold; off under `upstream`.

use std::sync::Arc;

use super::disruption_scenarios::{ZONE, itype, node, now, opts, pool_with, snapshot};
use karpenter_core::api::ConsolidationPolicy;
use karpenter_core::disruption::{Method, Reason, run_pass, split_pass};
use karpenter_core::labels;
use karpenter_core::model::{InstanceType, Offering};
use karpenter_core::scheduling::packing::{PACKING_ANNOTATION, PackingOptions, PackingPolicy};
use karpenter_core::state::ClusterSnapshot;

/// On-demand only; the 16-CPU type costs a premium (twice the 8-CPU price per CPU).
fn premium_catalog() -> Vec<Arc<InstanceType>> {
    [
        ("small", 2, 0.1),
        ("medium", 4, 0.2),
        ("large", 8, 0.4),
        ("xlarge", 16, 1.6),
    ]
    .into_iter()
    .map(|(name, cpu, price)| {
        itype(
            name,
            cpu,
            vec![Offering::new(ZONE, labels::CAPACITY_TYPE_ON_DEMAND, price)],
        )
    })
    .collect()
}

/// One xlarge node ($1.6/h) holding five 3-CPU pods: no single type but xlarge holds them
/// (single-node consolidation finds nothing), while two large and one medium node do for
/// $1.0/h.
fn oversized(budget: &str, cost: bool) -> ClusterSnapshot {
    let types = premium_catalog();
    let mut pool = pool_with(
        "default",
        ConsolidationPolicy::WhenEmptyOrUnderutilized,
        budget,
        types.clone(),
    );
    if cost {
        pool.node_pool
            .metadata
            .annotations
            .insert(PACKING_ANNOTATION.to_string(), "cost".to_string());
    }
    snapshot(vec![pool], vec![node("big", "default", &types[3], 5, "3")])
}

#[test]
fn split_replaces_one_oversized_node_by_cheaper_ones() {
    let p = run_pass(&oversized("100%", true), now(), &opts(), &|_| false);
    assert_eq!(p.commands.len(), 1, "{:?}", p.blocked);
    let cmd = &p.commands[0];
    assert_eq!(cmd.method, Method::Split);
    assert_eq!(cmd.method.as_str(), "split");
    assert_eq!(cmd.reason, Reason::Underutilized);
    assert_eq!(
        cmd.candidates.iter().map(|c| c.name()).collect::<Vec<_>>(),
        ["big"]
    );
    assert!(cmd.replacements.len() >= 2, "{}", cmd.replacements.len());
    assert!(
        (cmd.savings_per_hour - 0.6).abs() < 1e-9,
        "{}",
        cmd.savings_per_hour
    );
    // Every displaced pod has a place on the replacements.
    let placed: usize = cmd.replacements.iter().map(|r| r.pods.len()).sum();
    assert_eq!(placed, 5);
    // Each replacement launches as its cheapest type: a large or a medium, never the xlarge.
    for r in &cmd.replacements {
        let launch = r.instance_types.first().map(|t| t.name());
        assert!(matches!(launch, Some("large" | "medium")), "{launch:?}");
    }
}

#[test]
fn split_is_off_under_the_upstream_policy() {
    let p = run_pass(&oversized("100%", false), now(), &opts(), &|_| false);
    assert!(p.commands.is_empty());
    // The global override turns it off for an annotated pool too.
    let o = opts().with_scheduler(
        opts()
            .scheduler
            .with_packing(PackingOptions::default().with_policy(Some(PackingPolicy::Upstream))),
    );
    assert!(
        run_pass(&oversized("100%", true), now(), &o, &|_| false)
            .commands
            .is_empty()
    );
    // ... and on for a pool without the annotation.
    let o = opts().with_scheduler(
        opts()
            .scheduler
            .with_packing(PackingOptions::default().with_policy(Some(PackingPolicy::Cost))),
    );
    let p = run_pass(&oversized("100%", false), now(), &o, &|_| false);
    assert_eq!(p.commands.first().map(|c| c.method), Some(Method::Split));
}

#[test]
fn split_respects_a_zero_budget() {
    let p = split_pass(&oversized("0", true), now(), &opts());
    assert!(p.commands.is_empty());
    assert!(p.blocked.iter().any(|(n, _)| n == "big"), "{:?}", p.blocked);
}

#[test]
fn split_needs_the_saving_to_pass_the_threshold() {
    // The split saves 37.5% of the node's price: under a 50% threshold it does not act.
    let o = opts().with_split_savings_threshold(0.5);
    let p = split_pass(&oversized("100%", true), now(), &o);
    assert!(p.commands.is_empty());
    let reason = p
        .blocked
        .iter()
        .find(|(n, _)| n == "big")
        .map(|(_, r)| r.as_str())
        .unwrap_or_default();
    assert!(reason.contains("threshold"), "{reason}");
}

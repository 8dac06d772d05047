//! karpenter-core's provider conformance suite against [`FakeCloudProvider`].

use std::sync::Arc;

use futures::executor::block_on;
use karpenter_core::api::{NodeClaim, NodeClaimSpec, NodeClassReference};
use karpenter_core::cloud::{CloudProviderError, UnavailableOffering};
use karpenter_core::conformance::{
    Check, ConformanceConfig, ConformanceError, InsufficientCapacityCase, Outcome, run_all,
};
use karpenter_core::labels;
use karpenter_fake::FakeCloudProvider;
use karpenter_fake::provider::{NODE_CLASS_GROUP, NODE_CLASS_KIND};

fn config(provider: &Arc<FakeCloudProvider>) -> ConformanceConfig {
    let class = NodeClassReference::new(NODE_CLASS_GROUP, NODE_CLASS_KIND, "default");
    let mut claim = NodeClaim::new("conformance", NodeClaimSpec::new(class));
    claim
        .metadata
        .labels
        .insert(labels::NODEPOOL.into(), "default".into());
    let p = Arc::clone(provider);
    ConformanceConfig::new(claim)
        .with_unknown_provider_id("fake://999999")
        .with_insufficient_capacity(
            // The offering an unconstrained claim launches into (the cheapest).
            InsufficientCapacityCase::new(UnavailableOffering::new(
                "small-instance-type",
                "test-zone-1",
                "spot",
            ))
            .with_inject(move |o| p.fail_offering(&o.instance_type, &o.zone, &o.capacity_type)),
        )
}

#[test]
fn the_fake_provider_passes_every_check() {
    let provider = Arc::new(FakeCloudProvider::new());
    let report = block_on(run_all(provider.as_ref(), &config(&provider)));
    assert!(report.is_success(), "{report}");
    for check in Check::ALL {
        assert!(
            matches!(report.outcome(check), Some(Outcome::Passed)),
            "{check} did not run: {report}"
        );
    }
    // Everything the suite launched is gone again.
    assert!(provider.instances().is_empty());
}

#[test]
fn a_throttled_get_fails_the_not_found_check() {
    let provider = Arc::new(FakeCloudProvider::new());
    provider.fail_next(1, || CloudProviderError::throttled("slow down"));
    let report = block_on(run_all(provider.as_ref(), &config(&provider)));
    let failures: Vec<&ConformanceError> = report.failures().collect();
    assert_eq!(failures.len(), 1, "{report}");
    assert_eq!(
        failures[0].to_string(),
        "not-found: get of an unknown id(fake://999999) should answer NodeClaimNotFound, \
         got Err(throttled: slow down)"
    );
}

#[test]
fn a_failing_create_fails_every_launching_check() {
    let provider = Arc::new(FakeCloudProvider::new());
    provider.fail_creates_after(0);
    let report = block_on(run_all(provider.as_ref(), &config(&provider)));
    let failed: Vec<Check> = report.failures().map(ConformanceError::check).collect();
    assert_eq!(
        failed,
        [
            Check::CreateGetListDelete,
            Check::LaunchedLabels,
            Check::IdempotentDelete,
            Check::InsufficientCapacity,
        ]
    );
}

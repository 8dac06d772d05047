//! Runs karpenter-core's provider conformance suite against the example cloud provider of the
//! `custom_provider` example: create -> get -> list -> delete, not-found answers, idempotent
//! delete, the labels of a launched claim, and insufficient capacity for one offering.
//!
//! Run with `cargo run -p karpenter-core --features conformance --example provider_conformance`.

#[path = "common/example_cloud.rs"]
mod example_cloud;

use std::sync::Arc;

use karpenter_core::cloud::UnavailableOffering;
use karpenter_core::conformance::{ConformanceConfig, InsufficientCapacityCase, run_all};
use karpenter_core::labels;
use karpenter_core::prelude::*;

use example_cloud::{ExampleCloud, catalog};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let cloud = Arc::new(ExampleCloud::new(catalog()));

    // The claim the suite launches: what a NodePool of this provider would ask for.
    let class = NodeClassReference::new("cloud.example.com", "ExampleNodeClass", "default");
    let mut claim = NodeClaim::new("conformance", NodeClaimSpec::new(class));
    claim
        .metadata
        .labels
        .insert(labels::NODEPOOL.into(), "default".into());

    // Insufficient capacity: the cheapest offering runs out right before the check launches a
    // claim pinned to it.
    let out = Arc::clone(&cloud);
    let config = ConformanceConfig::new(claim)
        .with_unknown_provider_id("example://999")
        .with_insufficient_capacity(
            InsufficientCapacityCase::new(UnavailableOffering::new(
                "general-2",
                "zone-a",
                "on-demand",
            ))
            .with_inject(move |offering| out.run_out_of_capacity(offering)),
        );

    let report = futures::executor::block_on(run_all(cloud.as_ref(), &config));
    print!("{report}");
    report.into_result()?;
    Ok(())
}

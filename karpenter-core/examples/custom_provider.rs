//! A custom cloud provider and one provisioning round through `dyn CloudProvider`:
//! list the instance types of a NodePool, solve the pending pods, turn each planned claim into a
//! `karpenter.sh/v1` NodeClaim and create it.
//!
//! Run with `cargo run -p karpenter-core --example custom_provider`.

#[path = "common/example_cloud.rs"]
mod example_cloud;

use std::sync::Arc;

use karpenter_core::prelude::*;

use example_cloud::{ExampleCloud, FAMILY_LABEL, catalog};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let cloud: Arc<dyn CloudProvider> = Arc::new(ExampleCloud::new(catalog()));

    let class = NodeClassReference::new("cloud.example.com", "ExampleNodeClass", "default");
    let pool = NodePool::new(
        "default",
        NodePoolSpec::new(NodeClaimTemplate::new(NodeClaimTemplateSpec::new(class))),
    );
    if !cloud.supports_node_class(&pool.spec.template.spec.node_class_ref) {
        return Err("the NodePool's node class is not the provider's".into());
    }

    // Web pods anywhere, batch pods on the compute family (a provider label).
    let mut pods: Vec<Pod> = (0..4)
        .map(|i| {
            Pod::new("default", format!("web-{i}"))
                .with_requests([("cpu", Quantity::from_milli(1500))])
        })
        .collect();
    pods.extend((0..2).map(|i| {
        Pod::new("default", format!("batch-{i}"))
            .with_requests([("cpu", Quantity::from_units(1))])
            .with_node_selector([(FAMILY_LABEL, "compute")])
    }));

    futures::executor::block_on(async {
        let instance_types = cloud.instance_types(&pool).await?;
        let input = SchedulingInput::new()
            .with_node_pools(vec![NodePoolInput::from_nodepool(&pool, instance_types)])
            .with_pods(pods);
        // The provider's labels become well-known, so the batch pods' selector schedules.
        let options = SchedulerOptions::for_provider(cloud.as_ref());
        let results = solve(&input, &options);
        for (pod, error) in &results.pod_errors {
            println!("unschedulable {pod}: {error}");
        }
        if !results.pod_errors.is_empty() {
            return Err("some pods did not schedule".into());
        }

        let mut total = 0.0;
        for (i, claim) in results.new_node_claims.iter().enumerate() {
            let mut node_claim = to_node_claim(claim, &pool, &options.label_policy);
            node_claim.metadata.name = Some(format!("{}-{i}", claim.node_pool));
            let launched = cloud.create(&node_claim).await?;
            let labels = &launched.metadata.labels;
            let price = claim.launch_price(&options.label_policy).unwrap_or(0.0);
            total += price;
            println!(
                "{}: {} in {} for {} pods at ${price:.3}/h ({})",
                launched.name(),
                labels["node.kubernetes.io/instance-type"],
                labels["topology.kubernetes.io/zone"],
                claim.pods.len(),
                launched.status.provider_id.as_deref().unwrap_or("?"),
            );
        }
        println!("{} nodes, ${total:.3}/h", cloud.list().await?.len());
        Ok(())
    })
}

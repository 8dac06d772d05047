//! karpenter-core's provider conformance suite against `AwsCloudProvider` on moto, with
//! insufficient capacity injected at the SDK's HTTP layer.

use std::sync::Arc;

use karpenter_core::api::{NodeClaim, NodeClaimSpec, NodeClassReference};
use karpenter_core::cloud::CloudProvider;
use karpenter_core::cloud::UnavailableOffering;
use karpenter_core::conformance::{
    Check, ConformanceConfig, InsufficientCapacityCase, Outcome, run_all,
};
use karpenter_core::requirements::{NodeSelectorRequirement, Operator};

use super::env::{Cluster, clients, cluster_name};
use super::inject::{self, Faults};

/// A claim of NodePool `default` the class can launch: two instance types, any capacity type
/// (spot is cheaper in moto, so the suite launches spot).
fn template() -> NodeClaim {
    let mut spec = NodeClaimSpec::new(NodeClassReference::new(
        "karpenter.k8s.aws",
        "EC2NodeClass",
        "default",
    ));
    spec.requirements = Some(vec![NodeSelectorRequirement::new(
        "node.kubernetes.io/instance-type",
        Operator::In,
        ["m5.large", "m5.xlarge"],
    )]);
    let mut claim = NodeClaim::new("conformance", spec);
    claim
        .metadata
        .labels
        .insert("karpenter.sh/nodepool".into(), "default".into());
    claim
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs moto (scripts/moto/install.sh): scripts/test runs these with --ignored"]
async fn the_aws_provider_passes_every_conformance_check() {
    let faults = Arc::new(Faults::default());
    let clients = clients(Some(inject::client(Arc::clone(&faults)))).await;
    let cluster = Cluster::create(&cluster_name("conformance"), clients).await;
    let class = cluster.resolved(cluster.node_class("default")).await;
    let provider = cluster.provider(vec![class]);
    let exhausted = Arc::clone(&faults);
    let config = ConformanceConfig::new(template())
        .with_unknown_provider_id("aws:///us-east-1a/i-0123456789abcdef0")
        .with_insufficient_capacity(
            InsufficientCapacityCase::new(UnavailableOffering::new(
                "m5.large",
                "us-east-1a",
                "on-demand",
            ))
            .with_inject(move |o| {
                exhausted
                    .exhausted
                    .lock()
                    .unwrap()
                    .insert(o.instance_type.clone());
            }),
        );
    let report = run_all(provider.as_ref(), &config).await;
    assert!(report.is_success(), "{report}");
    for check in Check::ALL {
        assert!(
            matches!(report.outcome(check), Some(Outcome::Passed)),
            "{check} did not run: {report}"
        );
    }
    // The insufficient-capacity check went through the injected CreateFleet error, and left
    // the offering unavailable for the next round.
    assert_eq!(*faults.injected.lock().unwrap(), 1);
    assert!(provider.is_unavailable("on-demand", "m5.large", "us-east-1a"));
    // Everything the suite launched is gone again.
    assert!(provider.list().await.unwrap().is_empty());
}

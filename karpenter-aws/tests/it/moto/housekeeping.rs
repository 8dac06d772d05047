//! The provider's and resolver's periodic work against moto: launch-template cleanup,
//! instance-profile garbage collection, the price refresh.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use karpenter_aws::pricing::{GetProductsPage, GetProductsRequest, PricingApi, PricingError};
use karpenter_aws::sdk::nodeclass::NodeClassResolver;
use karpenter_aws::sdk::provider::{AwsCloudProvider, NodeClassStore, ProviderOptions};
use karpenter_core::api::{NodeClaim, NodeClaimSpec, NodeClassReference};
use karpenter_core::cloud::CloudProvider;
use karpenter_core::requirements::{NodeSelectorRequirement, Operator};

use super::env::{Cluster, clients, cluster_name};

fn claim(name: &str) -> NodeClaim {
    let mut spec = NodeClaimSpec::new(NodeClassReference::new(
        "karpenter.k8s.aws",
        "EC2NodeClass",
        "default",
    ));
    spec.requirements = Some(vec![NodeSelectorRequirement::new(
        "node.kubernetes.io/instance-type",
        Operator::In,
        ["m5.large"],
    )]);
    let mut c = NodeClaim::new(name, spec);
    c.metadata
        .labels
        .insert("karpenter.sh/nodepool".into(), "default".into());
    c
}

fn provider_with(
    cluster: &Cluster,
    class: karpenter_aws::nodeclass::EC2NodeClass,
    ttl: Duration,
) -> Arc<AwsCloudProvider> {
    let store: NodeClassStore = Arc::new(std::sync::RwLock::new(
        [(class.name().to_string(), class)].into_iter().collect(),
    ));
    let mut options = ProviderOptions::new(&cluster.name, "https://api.example.test");
    options.launch_template_ttl = ttl;
    Arc::new(AwsCloudProvider::new(cluster.clients.clone(), options, store).unwrap())
}

async fn template_exists(cluster: &Cluster, name: &str) -> bool {
    cluster
        .clients
        .ec2
        .describe_launch_templates()
        .launch_template_names(name)
        .send()
        .await
        .is_ok_and(|o| !o.launch_templates().is_empty())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs moto (scripts/moto/install.sh): scripts/test runs these with --ignored"]
async fn unused_launch_templates_are_deleted_and_a_deleted_class_takes_its_own() {
    let clients = clients(None).await;
    let cluster = Cluster::create(&cluster_name("ltclean"), clients).await;
    let class = cluster.resolved(cluster.node_class("default")).await;
    // The TTL is long enough that a loaded machine's slow calls between the launch and the
    // first cleanup stay inside it (CI once took over 500 ms there).
    let ttl = Duration::from_secs(5);
    let provider = provider_with(&cluster, class.clone(), ttl);
    provider.create(&claim("a")).await.unwrap();
    // The template the launch made, found through the cluster tag by a fresh provider.
    let fresh = provider_with(&cluster, class.clone(), ttl);
    assert_eq!(fresh.hydrate_launch_templates().await.unwrap(), 1);
    // Used just now: kept.
    assert!(
        provider
            .cleanup_launch_templates()
            .await
            .unwrap()
            .is_empty()
    );
    tokio::time::sleep(ttl + Duration::from_millis(100)).await;
    let deleted = provider.cleanup_launch_templates().await.unwrap();
    assert_eq!(deleted.len(), 1, "{deleted:?}");
    assert!(deleted[0].starts_with("karpenter.k8s.aws/"), "{deleted:?}");
    assert!(!template_exists(&cluster, &deleted[0]).await);
    // The fresh provider's entry expired too; the template is already gone, which is fine.
    assert_eq!(fresh.cleanup_launch_templates().await.unwrap(), deleted);

    // A new launch makes it again; deleting the class deletes it.
    provider.create(&claim("b")).await.unwrap();
    assert!(template_exists(&cluster, &deleted[0]).await);
    assert!(
        provider
            .delete_class_launch_templates("other")
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        provider
            .delete_class_launch_templates("default")
            .await
            .unwrap(),
        deleted
    );
    assert!(!template_exists(&cluster, &deleted[0]).await);
    let calls = provider.counters().snapshot();
    assert_eq!(calls["CreateLaunchTemplate"], 2);
    assert_eq!(calls["DeleteLaunchTemplate"], 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs moto (scripts/moto/install.sh): scripts/test runs these with --ignored"]
async fn instance_profiles_of_gone_classes_are_garbage_collected() {
    let clients = clients(None).await;
    let cluster = Cluster::create(&cluster_name("ipgc"), clients).await;
    let resolver = NodeClassResolver::new(cluster.clients.clone(), &cluster.name, "1.33")
        .with_profile_protection(Duration::ZERO);
    let mut class = cluster.node_class("default");
    class.status = resolver
        .reconcile(&class, jiff::Timestamp::now())
        .await
        .unwrap()
        .status;
    let profile = class.status.instance_profile.clone().unwrap();
    // A profile of another cluster (moto ignores PathPrefix: the path is checked client-side).
    let iam = &cluster.clients.iam;
    let foreign = format!("{}-foreign", cluster.name);
    iam.create_instance_profile()
        .instance_profile_name(&foreign)
        .path("/karpenter/us-east-1/another-cluster/uid/")
        .send()
        .await
        .unwrap();
    let none = BTreeSet::new();
    // Referenced by a class status, or by a live NodeClaim: kept.
    assert!(
        resolver
            .garbage_collect_instance_profiles(std::slice::from_ref(&class), &none)
            .await
            .unwrap()
            .is_empty()
    );
    let in_use: BTreeSet<String> = [profile.clone()].into_iter().collect();
    assert!(
        resolver
            .garbage_collect_instance_profiles(&[], &in_use)
            .await
            .unwrap()
            .is_empty()
    );
    // Protected right after creation (the default hour).
    let protecting = NodeClassResolver::new(cluster.clients.clone(), &cluster.name, "1.33");
    let mut other = cluster.node_class("other");
    other.metadata.uid = Some(format!("uid-other-{}", cluster.name));
    let other_profile = protecting
        .reconcile(&other, jiff::Timestamp::now())
        .await
        .unwrap()
        .status
        .instance_profile
        .unwrap();
    assert!(
        protecting
            .garbage_collect_instance_profiles(std::slice::from_ref(&class), &none)
            .await
            .unwrap()
            .is_empty()
    );
    // The class is gone: its profile (and the unprotected other one) is deleted, the foreign
    // one stays.
    let mut deleted = resolver
        .garbage_collect_instance_profiles(&[], &none)
        .await
        .unwrap();
    deleted.sort();
    let mut want = vec![profile.clone(), other_profile];
    want.sort();
    assert_eq!(deleted, want);
    assert!(
        iam.get_instance_profile()
            .instance_profile_name(&profile)
            .send()
            .await
            .is_err()
    );
    assert!(
        iam.get_instance_profile()
            .instance_profile_name(&foreign)
            .send()
            .await
            .is_ok()
    );
}

/// Recorded GetProducts pages with m5.large at $0.50 instead of the snapshot's $0.096.
struct RaisedPrices;

#[async_trait::async_trait]
impl PricingApi for RaisedPrices {
    async fn get_products(
        &self,
        request: &GetProductsRequest,
    ) -> Result<GetProductsPage, PricingError> {
        let metal = request
            .filters
            .iter()
            .any(|f| f.value == "Compute Instance (bare metal)");
        let page = if metal {
            include_str!("../../fixtures/pricing/get-products-metal.json")
        } else if request.next_token.is_some() {
            include_str!("../../fixtures/pricing/get-products-shared-page2.json")
        } else {
            include_str!("../../fixtures/pricing/get-products-shared-page1.json")
        };
        let page = page.replace("0.0960000000", "0.5000000000");
        serde_json::from_str(&page).map_err(|e| PricingError::Api(e.to_string()))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs moto (scripts/moto/install.sh): scripts/test runs these with --ignored"]
async fn a_price_refresh_changes_the_prices_the_scheduler_sees() {
    let clients = clients(None).await;
    let cluster = Cluster::create(&cluster_name("prices"), clients).await;
    let class = cluster.resolved(cluster.node_class("default")).await;
    let provider = cluster.provider(vec![class.clone()]);
    let od = |types: &[Arc<karpenter_core::model::InstanceType>]| {
        let m5 = types.iter().find(|t| t.name() == "m5.large").unwrap();
        m5.offerings
            .iter()
            .find(|o| o.capacity_type() == "on-demand")
            .unwrap()
            .price
    };
    let before = provider.instance_types_for_class(&class).await.unwrap();
    assert!((od(&before) - 0.096).abs() < 1e-9);
    let n = provider
        .refresh_on_demand_prices(&RaisedPrices)
        .await
        .unwrap();
    assert!(n >= 4, "{n}");
    let after = provider.instance_types_for_class(&class).await.unwrap();
    assert!((od(&after) - 0.5).abs() < 1e-9, "{}", od(&after));
    // A failing refresh keeps the prices.
    struct Down;
    #[async_trait::async_trait]
    impl PricingApi for Down {
        async fn get_products(
            &self,
            _: &GetProductsRequest,
        ) -> Result<GetProductsPage, PricingError> {
            Err(PricingError::Api("unavailable".into()))
        }
    }
    assert!(provider.refresh_on_demand_prices(&Down).await.is_err());
    let kept = provider.instance_types_for_class(&class).await.unwrap();
    assert!((od(&kept) - 0.5).abs() < 1e-9);
    // Spot prices come from moto's DescribeSpotPriceHistory.
    assert!(provider.refresh_spot_prices().await.unwrap() > 0);
}

//! The two stand-ins scripts/moto/server.py adds to moto (which lacks them): AWS's public EKS
//! AMI parameters under `/aws/service/eks/` can be published and changed, and the Price List
//! API's GetProducts answers with on-demand prices the provider's parser reads.

use aws_sdk_ssm::types::ParameterType;
use karpenter_aws::sdk::pricing::SdkPricing;

use super::env::{REGION, clients};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs moto (scripts/moto/install.sh): scripts/test runs these with --ignored"]
async fn public_eks_ami_parameters_can_be_published_and_changed() {
    let clients = clients(None).await;
    let name = format!(
        "/aws/service/eks/optimized-ami/9.{}/amazon-linux-2023/x86_64/standard/recommended/image_id",
        std::process::id()
    );
    for (value, version) in [("ami-00000000000000001", 1), ("ami-00000000000000002", 2)] {
        let put = clients
            .ssm
            .put_parameter()
            .name(&name)
            .value(value)
            .r#type(ParameterType::String)
            .overwrite(true)
            .send()
            .await
            .unwrap();
        assert_eq!(put.version(), version);
        let got = clients
            .ssm
            .get_parameter()
            .name(&name)
            .send()
            .await
            .unwrap();
        let p = got.parameter().unwrap();
        assert_eq!(p.name(), Some(name.as_str()));
        assert_eq!(p.value(), Some(value));
    }
    // Only the EKS parameters: other reserved names are still refused, as by AWS.
    let err = clients
        .ssm
        .put_parameter()
        .name("/aws/service/other/x")
        .value("v")
        .r#type(ParameterType::String)
        .send()
        .await
        .unwrap_err();
    assert!(format!("{err:?}").contains("reserved"), "{err:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs moto (scripts/moto/install.sh): scripts/test runs these with --ignored"]
async fn get_products_answers_on_demand_prices() {
    let clients = clients(None).await;
    let api = SdkPricing::new(clients.pricing.clone());
    let prices = karpenter_aws::pricing::fetch_on_demand(&api, REGION)
        .await
        .unwrap();
    assert_eq!(prices.get("m5.large"), Some(&0.096), "{prices:?}");
    assert_eq!(prices.get("m5.metal"), Some(&4.608), "{prices:?}");
    assert!(prices.len() >= 5, "{prices:?}");
}

//! The Price List client on aws-sdk-pricing, on recorded GetProducts responses served at the
//! SDK's HTTP layer (moto has no Price List API): the request the SDK sends and the prices the
//! responses give.

use std::sync::{Arc, Mutex};

use aws_credential_types::Credentials;
use aws_smithy_runtime_api::client::http::{
    HttpClient, HttpConnector, HttpConnectorFuture, HttpConnectorSettings, SharedHttpClient,
    SharedHttpConnector,
};
use aws_smithy_runtime_api::client::orchestrator::HttpRequest;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_runtime_api::http::{Response, StatusCode};
use aws_smithy_types::body::SdkBody;
use karpenter_aws::pricing::fetch_on_demand;
use karpenter_aws::sdk::AwsClients;
use karpenter_aws::sdk::pricing::SdkPricing;

/// Answers GetProducts from the recorded pages and keeps every request (target, body).
#[derive(Debug, Clone, Default)]
struct Replay {
    requests: Arc<Mutex<Vec<(String, serde_json::Value)>>>,
}

impl HttpClient for Replay {
    fn http_connector(
        &self,
        _settings: &HttpConnectorSettings,
        _components: &RuntimeComponents,
    ) -> SharedHttpConnector {
        SharedHttpConnector::new(self.clone())
    }
}

impl HttpConnector for Replay {
    fn call(&self, request: HttpRequest) -> HttpConnectorFuture {
        let target = request
            .headers()
            .get("x-amz-target")
            .unwrap_or_default()
            .to_string();
        let body: serde_json::Value = request
            .body()
            .bytes()
            .and_then(|b| serde_json::from_slice(b).ok())
            .unwrap_or_default();
        let metal = body["Filters"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|f| f["Value"] == "Compute Instance (bare metal)");
        let page = if metal {
            include_str!("../fixtures/pricing/get-products-metal.json")
        } else if body.get("NextToken").is_some() {
            include_str!("../fixtures/pricing/get-products-shared-page2.json")
        } else {
            include_str!("../fixtures/pricing/get-products-shared-page1.json")
        };
        self.requests.lock().unwrap().push((target, body));
        let mut resp = Response::new(StatusCode::try_from(200).unwrap(), SdkBody::from(page));
        resp.headers_mut()
            .insert("content-type", "application/x-amz-json-1.1");
        HttpConnectorFuture::ready(Ok(resp))
    }
}

#[tokio::test]
async fn get_products_requests_and_responses_map_onto_prices() {
    let replay = Replay::default();
    let clients = AwsClients::with_endpoint(
        "http://127.0.0.1:9",
        "ap-southeast-2",
        Credentials::new("testing", "testing", None, None, "replay"),
        Some(SharedHttpClient::new(replay.clone())),
    )
    .await
    .unwrap();
    let api = SdkPricing::new(clients.pricing.clone());
    let prices = fetch_on_demand(&api, "us-east-1").await.unwrap();
    assert!(prices.len() >= 2, "{prices:?}");
    assert!(prices.contains_key("m5.metal"), "{prices:?}");
    let requests = replay.requests.lock().unwrap().clone();
    // Two shared-tenancy pages and one bare-metal page.
    assert_eq!(requests.len(), 3, "{requests:?}");
    for (target, body) in &requests {
        assert_eq!(target, "AWSPriceListService.GetProducts");
        assert_eq!(body["ServiceCode"], "AmazonEC2");
        assert_eq!(body["MaxResults"], 100);
        let filters = body["Filters"].as_array().unwrap();
        assert!(filters.iter().all(|f| f["Type"] == "TERM_MATCH"));
        assert!(
            filters
                .iter()
                .any(|f| f["Field"] == "regionCode" && f["Value"] == "us-east-1")
        );
    }
    assert!(requests[1].1.get("NextToken").is_some());
}

//! Fault injection at the SDK's HTTP layer: moto never reports CreateFleet errors, so this
//! client answers a CreateFleet whose overrides include an exhausted instance type with
//! `InsufficientInstanceCapacity` for those overrides and no instance, as EC2 does when a pool
//! has no capacity. It also records the EC2 actions sent with `DryRun=true` and can answer them
//! `UnauthorizedOperation` (moto never checks permissions). Every other request goes to moto
//! unchanged.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use aws_smithy_runtime_api::client::http::{
    HttpClient, HttpConnector, HttpConnectorFuture, HttpConnectorSettings, SharedHttpClient,
    SharedHttpConnector,
};
use aws_smithy_runtime_api::client::orchestrator::HttpRequest;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_runtime_api::http::{Response, StatusCode};
use aws_smithy_types::body::SdkBody;

/// Instance types with no capacity, and how many CreateFleet calls were answered with an
/// error; EC2 actions whose dry runs are unauthorized, and the dry runs seen.
#[derive(Debug, Default)]
pub struct Faults {
    pub exhausted: Mutex<BTreeSet<String>>,
    pub injected: Mutex<usize>,
    pub unauthorized: Mutex<BTreeSet<String>>,
    pub dry_runs: Mutex<Vec<String>>,
}

#[derive(Debug, Clone)]
struct Injector {
    inner: SharedHttpClient,
    faults: Arc<Faults>,
}

#[derive(Debug)]
struct InjectingConnector {
    inner: SharedHttpConnector,
    faults: Arc<Faults>,
}

/// An HTTP client for the SDK that injects the faults of `faults`.
pub fn client(faults: Arc<Faults>) -> SharedHttpClient {
    SharedHttpClient::new(Injector {
        inner: karpenter_aws::sdk::http_client(),
        faults,
    })
}

impl HttpClient for Injector {
    fn http_connector(
        &self,
        settings: &HttpConnectorSettings,
        components: &RuntimeComponents,
    ) -> SharedHttpConnector {
        SharedHttpConnector::new(InjectingConnector {
            inner: self.inner.http_connector(settings, components),
            faults: Arc::clone(&self.faults),
        })
    }
}

fn decode(s: &str) -> String {
    let mut out = Vec::new();
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < b.len() => {
                let h = std::str::from_utf8(&b[i + 1..i + 3]).unwrap_or("00");
                out.push(u8::from_str_radix(h, 16).unwrap_or(b'?'));
                i += 2;
            }
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The overrides of a CreateFleet form body: prefix → field → value.
fn overrides(body: &str) -> BTreeMap<String, BTreeMap<String, String>> {
    let mut out: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    for pair in body.split('&') {
        let Some((k, v)) = pair.split_once('=') else {
            continue;
        };
        let k = decode(k);
        if !k.contains(".Overrides.") {
            continue;
        }
        if let Some((prefix, field)) = k.rsplit_once('.') {
            out.entry(prefix.to_string())
                .or_default()
                .insert(field.to_string(), decode(v));
        }
    }
    out
}

fn ice_response(hits: &[&BTreeMap<String, String>]) -> String {
    let mut items = String::new();
    for o in hits {
        let g = |f: &str| o.get(f).cloned().unwrap_or_default();
        items.push_str(&format!(
            "<item><launchTemplateAndOverrides><overrides><instanceType>{}</instanceType>\
             <availabilityZone>{}</availabilityZone><subnetId>{}</subnetId></overrides>\
             </launchTemplateAndOverrides><lifecycle>on-demand</lifecycle>\
             <errorCode>InsufficientInstanceCapacity</errorCode><errorMessage>We currently do \
             not have sufficient {} capacity in the Availability Zone you requested.</errorMessage></item>",
            g("InstanceType"),
            g("AvailabilityZone"),
            g("SubnetId"),
            g("InstanceType"),
        ));
    }
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\
         <CreateFleetResponse xmlns=\"http://ec2.amazonaws.com/doc/2016-11-15/\">\
         <requestId>injected</requestId><fleetId>fleet-injected</fleetId>\
         <errorSet>{items}</errorSet><fleetInstanceSet/></CreateFleetResponse>"
    )
}

impl HttpConnector for InjectingConnector {
    fn call(&self, request: HttpRequest) -> HttpConnectorFuture {
        let body = request
            .body()
            .bytes()
            .map(|b| String::from_utf8_lossy(b).into_owned())
            .unwrap_or_default();
        if body.contains("DryRun=true")
            && let Some(action) = body
                .split('&')
                .find_map(|p| p.strip_prefix("Action="))
                .map(str::to_string)
        {
            self.faults.dry_runs.lock().unwrap().push(action.clone());
            if self.faults.unauthorized.lock().unwrap().contains(&action) {
                let xml = "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Response><Errors><Error>\
                           <Code>UnauthorizedOperation</Code><Message>You are not authorized to \
                           perform this operation.</Message></Error></Errors>\
                           <RequestID>injected</RequestID></Response>";
                let resp = Response::new(StatusCode::try_from(403).unwrap(), SdkBody::from(xml));
                return HttpConnectorFuture::ready(Ok(resp));
            }
        }
        if body.contains("Action=CreateFleet") {
            let exhausted = self.faults.exhausted.lock().unwrap().clone();
            let all = overrides(&body);
            let hits: Vec<&BTreeMap<String, String>> = all
                .values()
                .filter(|o| o.get("InstanceType").is_some_and(|t| exhausted.contains(t)))
                .collect();
            if !hits.is_empty() {
                *self.faults.injected.lock().unwrap() += 1;
                let xml = ice_response(&hits);
                let resp = Response::new(StatusCode::try_from(200).unwrap(), SdkBody::from(xml));
                return HttpConnectorFuture::ready(Ok(resp));
            }
        }
        self.inner.call(request)
    }
}

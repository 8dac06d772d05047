//! `karpenter controller --cloud-provider aws` (feature `aws`): the AWS provider on EC2, the
//! EC2NodeClass status loop, and the interruption-queue consumer.
//!
//! - [`provider`] builds the SDK clients from the standard AWS chain (environment, IRSA / Pod
//!   Identity, IMDS), checks EC2 connectivity (DescribeInstanceTypes dry run) and returns
//!   `karpenter_aws::sdk::provider::AwsCloudProvider`.
//! - [`spawn`] starts the node-class loop (every EC2NodeClass resolved through EC2, SSM and IAM
//!   every minute; the status written while this replica leads; the provider reads the
//!   resolved classes) and, when `INTERRUPTION_QUEUE` is set, the SQS consumer, whose events go
//!   to the operator as `Input::Interruption` (the operator decides what they do).
//!
//! Settings beyond the shared flags, read from the environment as upstream's chart sets them:
//! `AWS_REGION` (else the SDK's chain), `CLUSTER_CA_BUNDLE`, `CLUSTER_SERVICE_CIDR` (AL2023's
//! NodeConfig; default `10.100.0.0/16`), `VM_MEMORY_OVERHEAD_PERCENT` (0.075), `RESERVED_ENIS`
//! (0).

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use karpenter_aws::nodeclass::EC2NodeClass;
use karpenter_aws::sdk::AwsClients;
use karpenter_aws::sdk::interruption::InterruptionQueue;
use karpenter_aws::sdk::nodeclass::NodeClassResolver;
use karpenter_aws::sdk::provider::{AwsCloudProvider, NodeClassStore, ProviderOptions};
use karpenter_core::cloud::CloudProvider;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams};
use kube::{Api, Client};
use tokio::sync::{mpsc, watch};

use super::ControllerError;
use super::cluster::{Caches, Change, objects};
use super::settings::ControllerArgs;

/// How often every EC2NodeClass is resolved again.
pub const NODE_CLASS_INTERVAL: Duration = Duration::from_secs(60);

/// What the AWS mode runs besides the provider.
pub struct Runtime {
    client: Client,
    clients: AwsClients,
    resolver: NodeClassResolver,
    store: NodeClassStore,
    queue: Option<String>,
}

fn env_parse<T: std::str::FromStr>(name: &str, default: T) -> Result<T, ControllerError> {
    match std::env::var(name) {
        Ok(v) if !v.is_empty() => v
            .parse()
            .map_err(|_| ControllerError::Settings(format!("{name}: invalid value {v:?}"))),
        _ => Ok(default),
    }
}

/// The AWS provider for the cluster of `args`, and what [`spawn`] runs.
pub async fn provider(
    client: &Client,
    args: &ControllerArgs,
) -> Result<(Arc<dyn CloudProvider>, Runtime), ControllerError> {
    if args.cluster_name.is_empty() {
        return Err(ControllerError::Settings(
            "CLUSTER_NAME (--cluster-name) is required with --cloud-provider aws".into(),
        ));
    }
    if args.cluster_endpoint.is_empty() {
        return Err(ControllerError::Settings(
            "CLUSTER_ENDPOINT (--cluster-endpoint) is required with --cloud-provider aws".into(),
        ));
    }
    let region = std::env::var("AWS_REGION").ok().filter(|r| !r.is_empty());
    let clients = AwsClients::from_env(region)
        .await
        .map_err(|e| ControllerError::CloudProvider(e.to_string()))?;
    let version = client
        .apiserver_version()
        .await
        .map_err(|e| ControllerError::Client(format!("reading the API server version: {e}")))?;
    let k8s = format!(
        "{}.{}",
        version.major,
        version
            .minor
            .trim_end_matches(|c: char| !c.is_ascii_digit())
    );
    let mut options = ProviderOptions::new(&args.cluster_name, &args.cluster_endpoint);
    options.cluster_ca_bundle = std::env::var("CLUSTER_CA_BUNDLE")
        .ok()
        .filter(|s| !s.is_empty());
    if let Ok(cidr) = std::env::var("CLUSTER_SERVICE_CIDR")
        && !cidr.is_empty()
    {
        options.cluster_cidr = Some(cidr);
    }
    options.vm_memory_overhead_percent = env_parse(
        "VM_MEMORY_OVERHEAD_PERCENT",
        options.vm_memory_overhead_percent,
    )?;
    options.reserved_enis = env_parse("RESERVED_ENIS", options.reserved_enis)?;
    let store: NodeClassStore = Arc::new(RwLock::new(BTreeMap::new()));
    let provider = AwsCloudProvider::new(clients.clone(), options, Arc::clone(&store))
        .map_err(|e| ControllerError::CloudProvider(e.to_string()))?;
    provider
        .check_connectivity()
        .await
        .map_err(|e| ControllerError::CloudProvider(format!("EC2 connectivity check: {e}")))?;
    tracing::info!(region = %clients.region, cluster = %args.cluster_name, kubernetes = %k8s, "AWS cloud provider");
    let runtime = Runtime {
        client: client.clone(),
        resolver: NodeClassResolver::new(clients.clone(), &args.cluster_name, k8s),
        clients,
        store,
        queue: Some(args.interruption_queue.clone()).filter(|q| !q.is_empty()),
    };
    Ok((Arc::new(provider), runtime))
}

/// Starts the node-class loop and, with a queue, the interruption consumer.
pub fn spawn(
    runtime: Runtime,
    caches: Caches,
    changes: mpsc::UnboundedSender<Change>,
    leading: watch::Receiver<bool>,
    shutdown: watch::Receiver<bool>,
) {
    let runtime = Arc::new(runtime);
    tokio::spawn(node_classes(
        Arc::clone(&runtime),
        leading,
        shutdown.clone(),
    ));
    if runtime.queue.is_some() {
        tokio::spawn(interruptions(runtime, caches, changes, shutdown));
    }
}

fn ec2nodeclass_api(client: &Client) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk(karpenter_aws::nodeclass::GROUP, "v1", "EC2NodeClass");
    let ar = ApiResource::from_gvk_with_plural(&gvk, "ec2nodeclasses");
    Api::all_with(client.clone(), &ar)
}

async fn node_classes(
    rt: Arc<Runtime>,
    leading: watch::Receiver<bool>,
    mut shutdown: watch::Receiver<bool>,
) {
    let api = ec2nodeclass_api(&rt.client);
    loop {
        match api.list(&ListParams::default()).await {
            Ok(list) => {
                let mut seen = BTreeMap::new();
                for obj in list.items {
                    let name = obj.metadata.name.clone().unwrap_or_default();
                    let value = match serde_json::to_value(&obj) {
                        Ok(v) => v,
                        Err(e) => {
                            tracing::warn!(nodeclass = %name, error = %e, "EC2NodeClass not readable");
                            continue;
                        }
                    };
                    let mut class = match EC2NodeClass::from_json_value(value) {
                        Ok(c) => c,
                        Err(e) => {
                            tracing::warn!(nodeclass = %name, error = %e, "EC2NodeClass not decodable");
                            continue;
                        }
                    };
                    match rt.resolver.reconcile(&class, jiff::Timestamp::now()).await {
                        Ok(r) => {
                            class.status = r.status;
                            if *leading.borrow() {
                                let patch = serde_json::json!({"status": &class.status});
                                if let Err(e) = api
                                    .patch_status(
                                        &name,
                                        &PatchParams::default(),
                                        &Patch::Merge(&patch),
                                    )
                                    .await
                                {
                                    tracing::warn!(nodeclass = %name, error = %e, "writing EC2NodeClass status");
                                }
                            }
                        }
                        Err(e) => {
                            tracing::warn!(nodeclass = %name, error = %e, "resolving EC2NodeClass");
                        }
                    }
                    seen.insert(name, class);
                }
                *rt.store
                    .write()
                    .unwrap_or_else(std::sync::PoisonError::into_inner) = seen;
            }
            Err(e) => tracing::warn!(error = %e, "listing EC2NodeClasses"),
        }
        tokio::select! {
            _ = tokio::time::sleep(NODE_CLASS_INTERVAL) => {}
            _ = shutdown.changed() => return,
        }
    }
}

/// Instance id → provider id of every NodeClaim in the cache.
fn provider_ids(caches: &Caches) -> BTreeMap<String, String> {
    objects(&caches.nodeclaims)
        .iter()
        .filter_map(|c| {
            let v = serde_json::to_value(&**c).ok()?;
            let pid = v.pointer("/status/providerID")?.as_str()?.to_string();
            let id = karpenter_aws::launch::parse_provider_id(&pid)?.to_string();
            Some((id, pid))
        })
        .collect()
}

async fn interruptions(
    rt: Arc<Runtime>,
    caches: Caches,
    changes: mpsc::UnboundedSender<Change>,
    mut shutdown: watch::Receiver<bool>,
) {
    let Some(name) = rt.queue.clone() else {
        return;
    };
    let queue = loop {
        match InterruptionQueue::new(&rt.clients, &name).await {
            Ok(q) => break q,
            Err(e) => {
                tracing::error!(queue = %name, error = %e, "interruption queue unavailable; retrying");
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_secs(30)) => {}
                    _ = shutdown.changed() => return,
                }
            }
        }
    };
    tracing::info!(queue = %queue.url(), "interruption handling on");
    loop {
        let ids = provider_ids(&caches);
        let poll = queue.poll(
            Duration::from_secs(karpenter_aws::sdk::interruption::WAIT_SECONDS as u64),
            |id| ids.get(id).cloned(),
            |e| {
                let _ = changes.send(Change::Interruption(e));
            },
        );
        tokio::select! {
            r = poll => match r {
                Ok(stats) => {
                    for m in stats.malformed {
                        tracing::warn!(error = m, "interruption message that is no interruption event deleted");
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %e, "receiving interruption messages");
                    tokio::time::sleep(Duration::from_secs(5)).await;
                }
            },
            _ = shutdown.changed() => return,
        }
    }
}

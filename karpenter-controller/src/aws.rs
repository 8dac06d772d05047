//! `karpenter controller --cloud-provider aws` (feature `aws`): the AWS provider on EC2, the
//! EC2NodeClass status loop, and the interruption-queue consumer.
//!
//! - [`AwsProvider::new`] builds the SDK clients from the standard AWS chain (environment, IRSA / Pod
//!   Identity, IMDS), checks EC2 connectivity (DescribeInstanceTypes dry run) and returns
//!   `karpenter_aws::sdk::provider::AwsCloudProvider`.
//! - [`AwsProvider`]'s [`Provider::start`] starts, all on the leader only, the node-class loop (every EC2NodeClass resolved through EC2, SSM and IAM
//!   every minute, with the dry-run permission checks unless `DISABLE_DRY_RUN=true`; the status
//!   written; the provider reads the resolved classes; a deleted
//!   class's launch templates deleted), the housekeeping (this
//!   cluster's launch templates found at start, unused ones deleted every minute, managed
//!   instance profiles of gone classes garbage-collected every 30 minutes), the price refresh
//!   (on-demand from the Price List API unless `ISOLATED_VPC=true` or in a `us-gov` region,
//!   spot from DescribeSpotPriceHistory; at start and every 12 hours, as upstream; the
//!   scheduler sees the new prices in the next instance-type list) and, when
//!   `INTERRUPTION_QUEUE` is set, the SQS consumer, whose events go to the operator as
//!   `Input::Interruption` (the operator decides what they do).
//!
//! Settings beyond the shared flags, read from the environment as upstream's chart sets them:
//! `AWS_REGION` (else the SDK's chain), `CLUSTER_CA_BUNDLE`, `CLUSTER_SERVICE_CIDR` (AL2023's
//! NodeConfig; default `10.100.0.0/16`), `VM_MEMORY_OVERHEAD_PERCENT` (0.075), `RESERVED_ENIS`
//! (0).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use karpenter_aws::nodeclass::EC2NodeClass;
use karpenter_aws::sdk::AwsClients;
use karpenter_aws::sdk::interruption::InterruptionQueue;
use karpenter_aws::sdk::nodeclass::{NodeClassResolver, PROFILE_GC_INTERVAL};
use karpenter_aws::sdk::pricing::SdkPricing;
use karpenter_aws::sdk::provider::{
    AwsCloudProvider, INSTANCE_PROFILE_ANNOTATION, NodeClassStore, PRICE_REFRESH_INTERVAL,
    ProviderOptions,
};
use karpenter_core::cloud::CloudProvider;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams};
use kube::{Api, Client};
use tokio::sync::watch;

use crate::ControllerError;
use crate::cluster::{Caches, Change, objects};
use crate::provider::{Provider, ProviderContext};
use crate::settings::ControllerArgs;

/// How often every EC2NodeClass is resolved again.
pub const NODE_CLASS_INTERVAL: Duration = Duration::from_secs(60);

/// How often unused launch templates are deleted.
pub const LAUNCH_TEMPLATE_CLEANUP_INTERVAL: Duration = Duration::from_secs(60);

/// The AWS provider as the controller runs it: `AwsCloudProvider` and the loops around it
/// (see the module docs). Build it with [`AwsProvider::new`].
pub struct AwsProvider {
    client: Client,
    clients: AwsClients,
    provider: Arc<AwsCloudProvider>,
    resolver: NodeClassResolver,
    store: NodeClassStore,
    queue: Option<String>,
    on_demand_refresh: bool,
}

fn env_true(name: &str) -> bool {
    std::env::var(name).is_ok_and(|v| v.eq_ignore_ascii_case("true"))
}

fn env_parse<T: std::str::FromStr>(name: &str, default: T) -> Result<T, ControllerError> {
    match std::env::var(name) {
        Ok(v) if !v.is_empty() => v
            .parse()
            .map_err(|_| ControllerError::Settings(format!("{name}: invalid value {v:?}"))),
        _ => Ok(default),
    }
}

impl AwsProvider {
    /// The AWS provider for the cluster of `args`.
    pub async fn new(
        client: &Client,
        args: &ControllerArgs,
    ) -> Result<AwsProvider, ControllerError> {
        if args.cluster_name.is_empty() {
            return Err(ControllerError::Settings(
                "CLUSTER_NAME (--cluster-name) is required with --cloud-provider aws".into(),
            ));
        }
        if args.cluster_endpoint.is_empty() {
            return Err(ControllerError::Settings(
                "CLUSTER_ENDPOINT (--cluster-endpoint) is required with --cloud-provider aws"
                    .into(),
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
            .map(Arc::new)
            .map_err(|e| ControllerError::CloudProvider(e.to_string()))?;
        provider
            .check_connectivity()
            .await
            .map_err(|e| ControllerError::CloudProvider(format!("EC2 connectivity check: {e}")))?;
        tracing::info!(region = %clients.region, cluster = %args.cluster_name, kubernetes = %k8s, "AWS cloud provider");
        let on_demand_refresh = !env_true("ISOLATED_VPC") && !clients.region.starts_with("us-gov");
        Ok(AwsProvider {
            client: client.clone(),
            resolver: NodeClassResolver::new(clients.clone(), &args.cluster_name, k8s)
                .with_dry_run(!env_true("DISABLE_DRY_RUN")),
            clients,
            provider: Arc::clone(&provider),
            store,
            queue: Some(args.interruption_queue.clone()).filter(|q| !q.is_empty()),
            on_demand_refresh,
        })
    }
}

impl Provider for AwsProvider {
    fn cloud_provider(&self) -> Arc<dyn CloudProvider> {
        self.provider.clone()
    }

    /// Starts the node-class loop, the housekeeping, the price refresh and, with a queue, the
    /// interruption consumer.
    fn start(self: Box<Self>, ctx: ProviderContext) {
        let runtime = Arc::new(*self);
        tokio::spawn(node_classes(Arc::clone(&runtime), ctx.clone()));
        tokio::spawn(housekeeping(Arc::clone(&runtime), ctx.clone()));
        tokio::spawn(prices(Arc::clone(&runtime), ctx.clone()));
        if runtime.queue.is_some() {
            tokio::spawn(interruptions(runtime, ctx));
        }
    }
}

/// Waits until this replica leads; `false` when the controller stops first. Every AWS loop
/// acts only while leading: a follower neither writes (status, IAM, launch templates) nor
/// consumes the interruption queue, whose messages the leader's operator must act on.
async fn until_leading(
    leading: &mut watch::Receiver<bool>,
    shutdown: &mut watch::Receiver<bool>,
) -> bool {
    tokio::select! {
        r = leading.wait_for(|l| *l) => r.is_ok(),
        _ = shutdown.wait_for(|s| *s) => false,
    }
}

/// Sleeps for `period`; `false` when the controller stops first.
async fn pause(period: Duration, shutdown: &mut watch::Receiver<bool>) -> bool {
    tokio::select! {
        _ = tokio::time::sleep(period) => true,
        _ = shutdown.wait_for(|s| *s) => false,
    }
}

fn ec2nodeclass_api(client: &Client) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk(karpenter_aws::nodeclass::GROUP, "v1", "EC2NodeClass");
    let ar = ApiResource::from_gvk_with_plural(&gvk, "ec2nodeclasses");
    Api::all_with(client.clone(), &ar)
}

async fn node_classes(rt: Arc<AwsProvider>, ctx: ProviderContext) {
    let ProviderContext {
        mut leading,
        mut shutdown,
        leadership,
        ..
    } = ctx;
    let api = ec2nodeclass_api(&rt.client);
    loop {
        if !until_leading(&mut leading, &mut shutdown).await {
            return;
        }
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
                            if leadership.is_leading() {
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
                let gone: Vec<String> = {
                    let mut store = rt
                        .store
                        .write()
                        .unwrap_or_else(std::sync::PoisonError::into_inner);
                    let gone = store
                        .keys()
                        .filter(|k| !seen.contains_key(*k))
                        .cloned()
                        .collect();
                    *store = seen;
                    gone
                };
                // A deleted class's launch templates go with it (upstream's finalizer step;
                // its instance profile goes with the next garbage collection).
                if leadership.is_leading() {
                    for name in gone {
                        match rt.provider.delete_class_launch_templates(&name).await {
                            Ok(deleted) => {
                                tracing::info!(nodeclass = %name, templates = deleted.len(), "deleted the launch templates of a deleted EC2NodeClass")
                            }
                            Err(e) => {
                                tracing::warn!(nodeclass = %name, error = %e, "deleting launch templates")
                            }
                        }
                    }
                }
            }
            Err(e) => tracing::warn!(error = %e, "listing EC2NodeClasses"),
        }
        if !pause(NODE_CLASS_INTERVAL, &mut shutdown).await {
            return;
        }
    }
}

/// The instance profiles live NodeClaims launched with (their
/// `karpenter.k8s.aws/instance-profile-name` annotations).
fn profiles_in_use(caches: &Caches) -> BTreeSet<String> {
    objects(&caches.nodeclaims)
        .iter()
        .filter_map(|c| {
            let v = serde_json::to_value(&**c).ok()?;
            let key = INSTANCE_PROFILE_ANNOTATION
                .replace('~', "~0")
                .replace('/', "~1");
            Some(
                v.pointer(&format!("/metadata/annotations/{key}"))?
                    .as_str()?
                    .to_string(),
            )
        })
        .collect()
}

/// Launch-template cleanup and instance-profile garbage collection while this replica leads.
async fn housekeeping(rt: Arc<AwsProvider>, ctx: ProviderContext) {
    let ProviderContext {
        caches,
        mut leading,
        mut shutdown,
        leadership,
        ..
    } = ctx;
    let mut hydrated = false;
    let mut last_gc: Option<std::time::Instant> = None;
    loop {
        if !until_leading(&mut leading, &mut shutdown).await {
            return;
        }
        if leadership.is_leading() {
            if !hydrated {
                match rt.provider.hydrate_launch_templates().await {
                    Ok(n) => {
                        hydrated = true;
                        tracing::info!(templates = n, "this cluster's launch templates");
                    }
                    Err(e) => tracing::warn!(error = %e, "listing launch templates"),
                }
            }
            match rt.provider.cleanup_launch_templates().await {
                Ok(deleted) if !deleted.is_empty() => {
                    tracing::info!(templates = ?deleted, "deleted unused launch templates")
                }
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "deleting unused launch templates"),
            }
            if last_gc.is_none_or(|t| t.elapsed() >= PROFILE_GC_INTERVAL) {
                let classes: Vec<EC2NodeClass> = rt
                    .store
                    .read()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .values()
                    .cloned()
                    .collect();
                // Only once the classes are known: an empty store at start would make every
                // managed profile look unreferenced.
                if !classes.is_empty() || last_gc.is_some() {
                    match rt
                        .resolver
                        .garbage_collect_instance_profiles(&classes, &profiles_in_use(&caches))
                        .await
                    {
                        Ok(deleted) => {
                            last_gc = Some(std::time::Instant::now());
                            if !deleted.is_empty() {
                                tracing::info!(profiles = ?deleted, "deleted unused instance profiles");
                            }
                        }
                        Err(e) => tracing::warn!(error = %e, "instance profile garbage collection"),
                    }
                }
            }
        }
        if !pause(LAUNCH_TEMPLATE_CLEANUP_INTERVAL, &mut shutdown).await {
            return;
        }
    }
}

/// On-demand and spot prices at start and every 12 hours.
async fn prices(rt: Arc<AwsProvider>, ctx: ProviderContext) {
    let ProviderContext {
        mut leading,
        mut shutdown,
        ..
    } = ctx;
    let pricing = SdkPricing::new(rt.clients.pricing.clone());
    loop {
        if !until_leading(&mut leading, &mut shutdown).await {
            return;
        }
        if rt.on_demand_refresh {
            match rt.provider.refresh_on_demand_prices(&pricing).await {
                Ok(n) => tracing::info!(types = n, "on-demand prices refreshed"),
                Err(e) => {
                    tracing::warn!(error = %e, "refreshing on-demand prices; keeping the current ones")
                }
            }
        }
        match rt.provider.refresh_spot_prices().await {
            Ok(n) => tracing::info!(offerings = n, "spot prices refreshed"),
            Err(e) => {
                tracing::warn!(error = %e, "refreshing spot prices; keeping the current ones")
            }
        }
        if !pause(PRICE_REFRESH_INTERVAL, &mut shutdown).await {
            return;
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

async fn interruptions(rt: Arc<AwsProvider>, ctx: ProviderContext) {
    let ProviderContext {
        caches,
        changes,
        mut leading,
        mut shutdown,
        leadership,
        ..
    } = ctx;
    let Some(name) = rt.queue.clone() else {
        return;
    };
    if !until_leading(&mut leading, &mut shutdown).await {
        return;
    }
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
        // Only the leader receives (and so deletes) messages: a follower's operator would
        // drop the actions they call for.
        if !until_leading(&mut leading, &mut shutdown).await {
            return;
        }
        if !leadership.is_leading() {
            return;
        }
        let ids = provider_ids(&caches);
        let mut received = Vec::new();
        let poll = queue.poll(
            Duration::from_secs(karpenter_aws::sdk::interruption::WAIT_SECONDS as u64),
            |id| ids.get(id).cloned(),
            |e| received.push(e),
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
        // The operator's channel is bounded: a full one holds the next poll back.
        for e in received {
            if changes.send(Change::Interruption(e)).await.is_err() {
                return;
            }
        }
    }
}

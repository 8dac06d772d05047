//! `karpenter controller --cloud-provider aws` (feature `aws`): the AWS provider on EC2, the
//! EC2NodeClass status loop, and the interruption-queue consumer.
//!
//! - [`AwsProvider::new`] builds the SDK clients from the standard AWS chain (environment, IRSA / Pod
//!   Identity, IMDS), checks EC2 connectivity (DescribeInstanceTypes dry run) and returns
//!   `karpenter_aws::sdk::provider::AwsCloudProvider`.
//! - [`AwsProvider`]'s [`Provider::start`] starts, all on the leader only, the node-class loop (every EC2NodeClass resolved through EC2, SSM and IAM
//!   every minute and at once when a class is created, changed or deleted, with the dry-run permission checks unless `DISABLE_DRY_RUN=true`; the status
//!   written; the provider reads the resolved classes; a deleted
//!   class's launch templates and instance profile deleted), the housekeeping (this
//!   cluster's launch templates found at start, unused ones deleted every minute, managed
//!   instance profiles of gone classes garbage-collected every 30 minutes), the price refresh
//!   (on-demand from the Price List API unless `ISOLATED_VPC=true` or in a `us-gov` region,
//!   spot from DescribeSpotPriceHistory; at start and every 12 hours, as upstream; the
//!   scheduler sees the new prices in the next instance-type list) and, when
//!   `INTERRUPTION_QUEUE` is set, the SQS consumer, whose events go to the operator as
//!   `Input::Interruption` (the operator decides what they do); a message is deleted only once
//!   its action is durable ([`OperatorHandoff`]: the NodeClaim delete shows in the watch
//!   cache), or when it needs none, or when it is no interruption event (counted in
//!   `karpenter_interruption_message_errors_total{error}` and logged once); a capacity
//!   reservation interruption also leaves the reservation with nothing to offer until the next
//!   describe. And the capacity-reservation loop ([`reservations`]): NodeClaims in expiring
//!   capacity blocks deleted, those of ended reservations made `on-demand`.
//!
//! Settings beyond the shared flags, read from the environment as upstream's chart sets them:
//! `AWS_REGION` (else the SDK's chain), `CLUSTER_CA_BUNDLE`, `CLUSTER_SERVICE_CIDR` (AL2023's
//! NodeConfig), `VM_MEMORY_OVERHEAD_PERCENT` (0.075), `RESERVED_ENIS` (0). `CLUSTER_ENDPOINT`,
//! `CLUSTER_CA_BUNDLE` and `CLUSTER_SERVICE_CIDR` are optional: whichever is empty comes from
//! `eks:DescribeCluster` (`karpenter_aws::cluster`); a failed call, or a value neither gives,
//! stops the start with an error naming the setting and the call. The Kubernetes version is
//! the API server's, else the one `eks:DescribeCluster` reported.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use karpenter_aws::cluster::GivenSettings;
use karpenter_aws::nodeclass::EC2NodeClass;
use karpenter_aws::sdk::AwsClients;
use karpenter_aws::sdk::cluster::cluster_settings;
use karpenter_aws::sdk::interruption::{
    InterruptionHandler, InterruptionQueue, Malformed, Received,
};
use karpenter_aws::sdk::nodeclass::{NodeClassResolver, PROFILE_GC_INTERVAL};
use karpenter_aws::sdk::pricing::SdkPricing;
use karpenter_aws::sdk::provider::{
    AwsCloudProvider, NodeClassStore, PRICE_REFRESH_INTERVAL, ProviderOptions,
};
use karpenter_core::cloud::CloudProvider;
use karpenter_core::crd::KubeNodeClaim;
use karpenter_core::operator::InterruptionEvent;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams};
use kube::runtime::reflector::Store;
use kube::{Api, Client};
use tokio::sync::watch;

use crate::ControllerError;
use crate::cluster::{Caches, Change, objects};
use crate::provider::{Provider, ProviderContext};
use crate::settings::ControllerArgs;

mod classes;
pub mod reservations;

use classes::{AbortOnDrop, class_changes, class_deleted, profiles_in_use};

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
        let region = std::env::var("AWS_REGION").ok().filter(|r| !r.is_empty());
        let clients = AwsClients::from_env(region)
            .await
            .map_err(|e| ControllerError::CloudProvider(e.to_string()))?;
        // The endpoint, CA bundle and service CIDR: the settings, else eks:DescribeCluster.
        let given = GivenSettings::new(
            Some(args.cluster_endpoint.clone()),
            std::env::var("CLUSTER_CA_BUNDLE").ok(),
            std::env::var("CLUSTER_SERVICE_CIDR").ok(),
        );
        let cluster = cluster_settings(&clients, &args.cluster_name, &given)
            .await
            .map_err(|e| ControllerError::Settings(e.to_string()))?;
        // The Kubernetes version: the API server's (as upstream reads it), else the one
        // eks:DescribeCluster reported.
        let k8s = match client.apiserver_version().await {
            Ok(version) => format!(
                "{}.{}",
                version.major,
                version
                    .minor
                    .trim_end_matches(|c: char| !c.is_ascii_digit())
            ),
            Err(e) => match &cluster.version {
                Some(v) => {
                    tracing::warn!(error = %e, version = %v, "API server version unreadable; using the one eks:DescribeCluster reported");
                    v.clone()
                }
                None => {
                    return Err(ControllerError::Client(format!(
                        "reading the API server version: {e}"
                    )));
                }
            },
        };
        let mut options = ProviderOptions::new(&args.cluster_name, &cluster.endpoint);
        options.cluster_ca_bundle = Some(cluster.ca_bundle.clone());
        options.cluster_cidr = Some(cluster.service_cidr.clone());
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
        tracing::info!(region = %clients.region, cluster = %args.cluster_name, endpoint = %cluster.endpoint, service_cidr = %cluster.service_cidr, kubernetes = %k8s, described = given.needs_describe(), "AWS cloud provider");
        let on_demand_refresh = !env_true("ISOLATED_VPC") && !clients.region.starts_with("us-gov");
        Ok(AwsProvider {
            client: client.clone(),
            resolver: NodeClassResolver::new(clients.clone(), &args.cluster_name, k8s)
                .with_dry_run(!env_true("DISABLE_DRY_RUN"))
                .with_reservation_availability(provider.reservation_availability()),
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

    /// Starts the node-class loop, the housekeeping, the price refresh, the tagging of
    /// registered instances and, with a queue, the interruption consumer.
    fn start(self: Box<Self>, ctx: ProviderContext) {
        let runtime = Arc::new(*self);
        tokio::spawn(node_classes(Arc::clone(&runtime), ctx.clone()));
        tokio::spawn(housekeeping(Arc::clone(&runtime), ctx.clone()));
        tokio::spawn(prices(Arc::clone(&runtime), ctx.clone()));
        tokio::spawn(tagging(Arc::clone(&runtime), ctx.clone()));
        tokio::spawn(reservations::reservations(
            Arc::clone(&runtime),
            ctx.clone(),
        ));
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
        caches,
        mut leading,
        mut shutdown,
        leadership,
        ..
    } = ctx;
    let api = ec2nodeclass_api(&rt.client);
    let wake = Arc::new(tokio::sync::Notify::new());
    let watch = tokio::spawn(class_changes(api.clone(), Arc::clone(&wake)));
    let _stop_watch = AbortOnDrop(watch);
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
                            tracing::warn!(controller = "nodeclass", nodeclass = %name, error = %e, "EC2NodeClass not readable");
                            continue;
                        }
                    };
                    let mut class = match EC2NodeClass::from_json_value(value) {
                        Ok(c) => c,
                        Err(e) => {
                            tracing::warn!(controller = "nodeclass", nodeclass = %name, error = %e, "EC2NodeClass not decodable");
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
                                    tracing::warn!(controller = "nodeclass", nodeclass = %name, error = %e, "writing EC2NodeClass status");
                                }
                            }
                        }
                        Err(e) => {
                            tracing::warn!(controller = "nodeclass", nodeclass = %name, error = %e, "resolving EC2NodeClass");
                        }
                    }
                    seen.insert(name, class);
                }
                let gone: Vec<EC2NodeClass> = {
                    let mut store = rt
                        .store
                        .write()
                        .unwrap_or_else(std::sync::PoisonError::into_inner);
                    let gone = store
                        .iter()
                        .filter(|(k, _)| !seen.contains_key(*k))
                        .map(|(_, c)| c.clone())
                        .collect();
                    *store = seen;
                    gone
                };
                // A deleted class's launch templates and instance profile go with it
                // (upstream's finalizer steps).
                if leadership.is_leading() {
                    let in_use = profiles_in_use(&caches);
                    for class in gone {
                        class_deleted(&rt, &class, &in_use).await;
                    }
                }
            }
            Err(e) => tracing::warn!(error = %e, "listing EC2NodeClasses"),
        }
        // Every minute, and at once when a class is created, changed or deleted.
        tokio::select! {
            _ = tokio::time::sleep(NODE_CLASS_INTERVAL) => {}
            _ = wake.notified() => {}
            _ = shutdown.wait_for(|s| *s) => return,
        }
    }
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

/// How often the NodeClaims are looked at for instances to tag after registration.
pub const TAGGING_INTERVAL: Duration = Duration::from_secs(5);

/// Tags the instance of every registered NodeClaim once, as upstream's `nodeclaim.tagging`
/// controller (`karpenter_aws::launch::registered`): `Name` = the node, `karpenter.sh/nodeclaim`
/// = the NodeClaim, `eks:eks-cluster-name`, each only when missing; then the NodeClaim is
/// annotated `karpenter.k8s.aws/tagged: "true"` so it is not tagged again. Leader only.
async fn tagging(rt: Arc<AwsProvider>, ctx: ProviderContext) {
    use karpenter_aws::launch::registered::{TaggableClaim, instance_to_tag, tagged_annotations};
    let ProviderContext {
        caches,
        client,
        mut leading,
        mut shutdown,
        leadership,
        ..
    } = ctx;
    let api: Api<KubeNodeClaim> = Api::all(client);
    let no_annotations = BTreeMap::new();
    loop {
        if !until_leading(&mut leading, &mut shutdown).await {
            return;
        }
        for c in objects(&caches.nodeclaims) {
            let name = c.metadata.name.clone().unwrap_or_default();
            let status = c.status.as_ref();
            let node_name = status.and_then(|s| s.node_name.as_deref());
            let claim = TaggableClaim {
                name: &name,
                annotations: c.metadata.annotations.as_ref().unwrap_or(&no_annotations),
                node_name,
                provider_id: status.and_then(|s| s.provider_id.as_deref()),
                deleting: c.metadata.deletion_timestamp.is_some(),
            };
            let Some(instance) = instance_to_tag(&claim) else {
                continue;
            };
            if !leadership.is_leading() {
                break;
            }
            let node = node_name.unwrap_or_default();
            match rt
                .provider
                .tag_registered_instance(&instance, &name, node)
                .await
            {
                Ok(tags) => {
                    if !tags.is_empty() {
                        tracing::info!(nodeclaim = %name, instance = %instance, tags = ?tags, "tagged the instance of a registered node");
                    }
                }
                Err(e) if e.is_not_found() => continue,
                Err(e) => {
                    tracing::warn!(nodeclaim = %name, instance = %instance, error = %e, "tagging the instance of a registered node");
                    continue;
                }
            }
            if !leadership.is_leading() {
                break;
            }
            let patch = serde_json::json!({"metadata": {"annotations": tagged_annotations()}});
            if let Err(e) = crate::operate::bounded(api.patch(
                &name,
                &PatchParams::default(),
                &Patch::Merge(&patch),
            ))
            .await
                && !matches!(&e, kube::Error::Api(s) if s.code == 404)
            {
                tracing::warn!(nodeclaim = %name, error = %e, "annotating a tagged NodeClaim");
            }
        }
        if !pause(TAGGING_INTERVAL, &mut shutdown).await {
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

/// A NodeClaim of the cache as the interruption consumer sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct ClaimRef {
    name: String,
    provider_id: String,
    deleting: bool,
    reservation: Option<String>,
}

/// Instance id → the NodeClaim launched as it, of every NodeClaim in the cache.
fn claims_by_instance(nodeclaims: &Store<KubeNodeClaim>) -> BTreeMap<String, ClaimRef> {
    objects(nodeclaims)
        .iter()
        .filter_map(|c| {
            let pid = c.status.as_ref()?.provider_id.clone()?;
            let id = karpenter_aws::launch::parse_provider_id(&pid)?.to_string();
            Some((
                id,
                ClaimRef {
                    name: c.metadata.name.clone().unwrap_or_default(),
                    provider_id: pid,
                    deleting: c.metadata.deletion_timestamp.is_some(),
                    reservation: c.metadata.labels.as_ref().and_then(|l| {
                        l.get(karpenter_aws::reservation::CAPACITY_RESERVATION_ID)
                            .cloned()
                    }),
                },
            ))
        })
        .collect()
}

/// Whether the NodeClaim `name` is being deleted, or gone, in the cache: its delete was
/// accepted by the API server.
fn deleting_or_gone(nodeclaims: &Store<KubeNodeClaim>, name: &str) -> bool {
    nodeclaims
        .get(&kube::runtime::reflector::ObjectRef::new(name))
        .is_none_or(|c| c.metadata.deletion_timestamp.is_some())
}

/// How long the consumer waits for the NodeClaim deletes of one message to show in the cache
/// before it keeps the message for another delivery: well inside the visibility timeout.
pub const INTERRUPTION_ACTION_WAIT: Duration = Duration::from_secs(15);

/// How often the consumer looks at the cache while it waits.
const INTERRUPTION_ACTION_POLL: Duration = Duration::from_millis(50);

/// Hands a message's events to this replica's operator and reports the action durable once
/// every NodeClaim the operator is to delete is being deleted (or gone) in the watch cache,
/// that is, the API server accepted the delete. A replica that does not lead reports nothing
/// durable: its operator drops the actions, so the message stays for the leader.
pub struct OperatorHandoff {
    nodeclaims: Store<KubeNodeClaim>,
    changes: tokio::sync::mpsc::Sender<Change>,
    leadership: crate::leader::Leadership,
    wait: Duration,
    reservations: Option<karpenter_aws::sdk::reservation::SharedAvailability>,
}

impl OperatorHandoff {
    /// A handoff to the operator fed by `changes`, confirming through the NodeClaim cache.
    pub fn new(
        nodeclaims: Store<KubeNodeClaim>,
        changes: tokio::sync::mpsc::Sender<Change>,
        leadership: crate::leader::Leadership,
    ) -> Self {
        OperatorHandoff {
            nodeclaims,
            changes,
            leadership,
            wait: INTERRUPTION_ACTION_WAIT,
            reservations: None,
        }
    }

    /// The same handoff marking the reservation of a NodeClaim whose capacity reservation is
    /// interrupted as having nothing left in `availability` (upstream).
    pub fn with_reservations(
        mut self,
        availability: karpenter_aws::sdk::reservation::SharedAvailability,
    ) -> Self {
        self.reservations = Some(availability);
        self
    }

    /// The same handoff with another confirmation wait.
    pub fn with_wait(mut self, wait: Duration) -> Self {
        self.wait = wait;
        self
    }
}

#[async_trait::async_trait]
impl InterruptionHandler for OperatorHandoff {
    async fn act(&self, message: &Received, events: Vec<InterruptionEvent>) -> Result<(), String> {
        if !self.leadership.is_leading() {
            return Err("this replica does not lead: the message is left for the leader".into());
        }
        let claims: BTreeMap<String, ClaimRef> = claims_by_instance(&self.nodeclaims)
            .into_values()
            .map(|c| (c.provider_id.clone(), c))
            .collect();
        let mut awaited = Vec::new();
        for event in events {
            // The delete the operator is to make: only for a kind that deletes, and a claim not
            // being deleted already (then the message is a no-op once recorded).
            if event.kind.deletes_nodeclaim()
                && let Some(c) = claims.get(&event.provider_id)
                && !c.deleting
            {
                awaited.push(c.name.clone());
            }
            if event.kind
                == karpenter_core::operator::InterruptionKind::CapacityReservationInterrupted
                && let (Some(a), Some(id)) = (
                    &self.reservations,
                    claims
                        .get(&event.provider_id)
                        .and_then(|c| c.reservation.as_ref()),
                )
            {
                karpenter_aws::sdk::reservation::lock(a).mark_unavailable(id);
            }
            // The operator's channel is bounded: a full one holds the handoff back.
            self.changes
                .send(Change::Interruption(event))
                .await
                .map_err(|_| "the operator stopped".to_string())?;
        }
        let deadline = tokio::time::Instant::now() + self.wait;
        loop {
            awaited.retain(|name| !deleting_or_gone(&self.nodeclaims, name));
            if awaited.is_empty() {
                return Ok(());
            }
            if !self.leadership.is_leading() {
                return Err(format!(
                    "leadership lost before the delete of NodeClaim {} was seen",
                    awaited.join(", ")
                ));
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(format!(
                    "the delete of NodeClaim {} was not seen within {:?} (message {})",
                    awaited.join(", "),
                    self.wait,
                    message.message_id
                ));
            }
            tokio::time::sleep(INTERRUPTION_ACTION_POLL).await;
        }
    }
}

/// Counts and logs (once: the message is deleted) an interruption message that is no
/// interruption event.
fn report_malformed(metrics: &crate::metrics::Metrics, m: &Malformed) {
    tracing::warn!(message = %m.message_id, error = %m.error, "interruption message that is no interruption event; deleted");
    metrics.apply(&karpenter_core::lifecycle::Metric::add(
        karpenter_aws::interruption::MESSAGE_ERRORS,
        1.0,
        [("error", m.error.label().to_string())],
    ));
}

async fn interruptions(rt: Arc<AwsProvider>, ctx: ProviderContext) {
    let ProviderContext {
        caches,
        changes,
        mut leading,
        mut shutdown,
        leadership,
        metrics,
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
    let handoff = OperatorHandoff::new(caches.nodeclaims.clone(), changes, leadership.clone())
        .with_reservations(rt.provider.reservation_availability());
    loop {
        // Only the leader receives messages: a follower's operator would drop the actions
        // they call for (and the handoff would keep them anyway).
        if !until_leading(&mut leading, &mut shutdown).await {
            return;
        }
        if !leadership.is_leading() {
            return;
        }
        let ids = claims_by_instance(&caches.nodeclaims);
        let poll = queue.poll(
            Duration::from_secs(karpenter_aws::sdk::interruption::WAIT_SECONDS as u64),
            |id| ids.get(id).map(|c| c.provider_id.clone()),
            &handoff,
        );
        tokio::select! {
            r = poll => match r {
                Ok(stats) => {
                    for m in &stats.malformed {
                        report_malformed(&metrics, m);
                    }
                    metrics.apply(&karpenter_core::lifecycle::Metric::add(
                        karpenter_aws::interruption::DELETED_MESSAGES,
                        stats.deleted as f64,
                        [],
                    ));
                    for (id, why) in &stats.kept {
                        tracing::warn!(message = %id, reason = %why, "interruption message kept for another delivery");
                    }
                    for (id, e) in &stats.delete_errors {
                        tracing::warn!(message = %id, error = %e, "interruption message handled but not deleted; it will be handled again");
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

#[cfg(test)]
mod tests {
    use super::classes::{class_changed, class_profile_to_keep};
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use karpenter_core::operator::InterruptionKind;
    use kube::runtime::reflector::store::Writer;
    use kube::runtime::watcher;
    use std::collections::BTreeSet;
    use std::sync::Mutex;
    use tokio::sync::mpsc;

    fn claim(name: &str, instance: &str, deleting: bool) -> KubeNodeClaim {
        let mut c: KubeNodeClaim = serde_json::from_value(serde_json::json!({
            "apiVersion": "karpenter.sh/v1",
            "kind": "NodeClaim",
            "metadata": {"name": name},
            "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}, "requirements": []},
            "status": {"providerID": format!("aws:///us-east-1a/{instance}")}
        }))
        .unwrap();
        if deleting {
            c.metadata.deletion_timestamp = Some(Time(jiff::Timestamp::UNIX_EPOCH));
        }
        c
    }

    fn message() -> Received {
        Received {
            message_id: "m-1".into(),
            receipt_handle: "r-1".into(),
            body: String::new(),
        }
    }

    fn event(kind: InterruptionKind, instance: &str) -> InterruptionEvent {
        InterruptionEvent::new(kind, format!("aws:///us-east-1a/{instance}"))
    }

    /// A store holding `claims`, its writer, and a handoff on it.
    fn setup(
        claims: &[KubeNodeClaim],
        leadership: crate::leader::Leadership,
    ) -> (
        Writer<KubeNodeClaim>,
        OperatorHandoff,
        mpsc::Receiver<Change>,
    ) {
        let (reader, mut writer) = kube::runtime::reflector::store::<KubeNodeClaim>();
        for c in claims {
            writer.apply_watcher_event(&watcher::Event::Apply(c.clone()));
        }
        let (tx, rx) = mpsc::channel(64);
        let handoff =
            OperatorHandoff::new(reader, tx, leadership).with_wait(Duration::from_secs(30));
        (writer, handoff, rx)
    }

    #[tokio::test]
    async fn a_message_is_durable_only_once_its_nodeclaim_delete_shows() {
        let (writer, handoff, mut rx) = setup(
            &[claim("a", "i-a", false)],
            crate::leader::Leadership::always(),
        );
        // The operator stand-in: the delete is accepted (the watch shows the deletion
        // timestamp) only after the event arrived; the order is recorded.
        let order = Arc::new(Mutex::new(Vec::new()));
        let o = Arc::clone(&order);
        let operator = tokio::spawn(async move {
            let mut writer = writer;
            let Some(Change::Interruption(e)) = rx.recv().await else {
                panic!("no interruption handed on");
            };
            assert_eq!(e.kind, InterruptionKind::SpotInterrupted);
            tokio::task::yield_now().await;
            o.lock().unwrap().push("delete accepted");
            writer.apply_watcher_event(&watcher::Event::Apply(claim("a", "i-a", true)));
        });
        handoff
            .act(
                &message(),
                vec![event(InterruptionKind::SpotInterrupted, "i-a")],
            )
            .await
            .unwrap();
        order.lock().unwrap().push("durable");
        operator.await.unwrap();
        assert_eq!(*order.lock().unwrap(), ["delete accepted", "durable"]);
    }

    #[tokio::test]
    async fn no_ops_are_durable_at_once_and_still_handed_on() {
        let (_writer, handoff, mut rx) = setup(
            &[claim("a", "i-a", true), claim("b", "i-b", false)],
            crate::leader::Leadership::always(),
        );
        // Already deleting; a rebalance recommendation (recorded, nothing deleted); a claim
        // gone from the cache.
        handoff
            .act(
                &message(),
                vec![
                    event(InterruptionKind::SpotInterrupted, "i-a"),
                    event(InterruptionKind::RebalanceRecommendation, "i-b"),
                    event(InterruptionKind::InstanceTerminated, "i-gone"),
                ],
            )
            .await
            .unwrap();
        let mut handed = 0;
        while let Ok(Change::Interruption(_)) = rx.try_recv() {
            handed += 1;
        }
        assert_eq!(handed, 3);
    }

    #[tokio::test]
    async fn a_follower_keeps_the_message_and_hands_nothing_on() {
        let (_writer, handoff, mut rx) = setup(
            &[claim("a", "i-a", false)],
            crate::leader::Leadership::elected(),
        );
        let err = handoff
            .act(
                &message(),
                vec![event(InterruptionKind::SpotInterrupted, "i-a")],
            )
            .await
            .unwrap_err();
        assert!(err.contains("does not lead"), "{err}");
        assert!(rx.try_recv().is_err());
    }

    #[tokio::test]
    async fn a_delete_that_never_shows_keeps_the_message() {
        let (_writer, handoff, _rx) = setup(
            &[claim("a", "i-a", false)],
            crate::leader::Leadership::always(),
        );
        let handoff = handoff.with_wait(Duration::from_millis(100));
        let err = handoff
            .act(
                &message(),
                vec![event(InterruptionKind::SpotInterrupted, "i-a")],
            )
            .await
            .unwrap_err();
        assert!(err.contains("NodeClaim a was not seen"), "{err}");
    }

    #[test]
    fn a_deleted_class_keeps_its_profile_only_while_a_nodeclaim_names_it() {
        let mut class = EC2NodeClass::from_json_value(serde_json::json!({
            "apiVersion": "karpenter.k8s.aws/v1",
            "kind": "EC2NodeClass",
            "metadata": {"name": "default"},
            "spec": {"amiSelectorTerms": [{"alias": "al2023@latest"}], "role": "r",
                     "subnetSelectorTerms": [{"id": "subnet-1"}],
                     "securityGroupSelectorTerms": [{"id": "sg-1"}]}
        }))
        .unwrap();
        class.status.instance_profile = Some("c_1".into());
        let used: BTreeSet<String> = ["c_1".to_string()].into();
        assert_eq!(class_profile_to_keep(&class, &used), Some("c_1".into()));
        assert_eq!(class_profile_to_keep(&class, &BTreeSet::new()), None);
    }

    #[test]
    fn only_new_changed_or_deleted_classes_wake_the_loop() {
        let mut seen = BTreeMap::new();
        assert!(class_changed(&mut seen, "a", Some(1), false));
        // A status write keeps the generation.
        assert!(!class_changed(&mut seen, "a", Some(1), false));
        assert!(class_changed(&mut seen, "a", Some(2), false));
        assert!(class_changed(&mut seen, "a", Some(2), true));
        assert!(!class_changed(&mut seen, "a", Some(2), true));
    }

    #[test]
    fn claims_are_found_by_instance_id() {
        let (reader, mut writer) = kube::runtime::reflector::store::<KubeNodeClaim>();
        writer.apply_watcher_event(&watcher::Event::Apply(claim("a", "i-0abc", true)));
        let m = claims_by_instance(&reader);
        assert_eq!(
            m.get("i-0abc"),
            Some(&ClaimRef {
                name: "a".into(),
                provider_id: "aws:///us-east-1a/i-0abc".into(),
                deleting: true,
                reservation: None,
            })
        );
        assert!(deleting_or_gone(&reader, "a"));
        assert!(deleting_or_gone(&reader, "nope"));
    }
}

//! [`AwsCloudProvider`]: karpenter-core's `CloudProvider` on EC2.
//!
//! - Instance types: DescribeInstanceTypes (HVM, x86_64 or arm64) and
//!   DescribeInstanceTypeOfferings (by availability zone), refreshed every 12 hours, converted
//!   per EC2NodeClass by [`crate::catalog::build_catalog`] (the code of the embedded catalog)
//!   with the class's [`catalog_options`](crate::nodeclass::EC2NodeClass::catalog_options),
//!   restricted to the zones of the class's subnets; on-demand prices from
//!   [`crate::pricing::Prices`] (the embedded snapshot, or a Pricing API refresh), spot prices
//!   from DescribeSpotPriceHistory; offerings in the unavailable-offerings cache are marked
//!   unavailable. Derived lists are cached for 5 minutes per class.
//! - Create: the class must be `Ready`; the capacity type is `spot` when the claim allows it
//!   and a spot offering is usable, else `on-demand`; one launch template per AMI
//!   (named from a hash of its content, looked up by name and created when missing, cached);
//!   one CreateFleet `instant` request ([`crate::launch::build_fleet_request`]), batched with
//!   identical requests of the same moment ([`batch`](super::provider) window: 35 ms idle, 1 s
//!   at most); its result goes through [`crate::launch::handle_fleet_result`] and the
//!   unavailable-offerings cache, so an insufficient-capacity error makes the next round pick
//!   another offering.
//! - Get / List / Delete: DescribeInstances by id or by the cluster's tags, TerminateInstances.
//! - Drift: [`crate::drift::nodeclaim_drift`] with the instance's subnet and security groups.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use aws_sdk_ec2::types as ec2;
use karpenter_core::api::{NodeClaim, NodeClaimSpec, NodeClassReference, NodePool};
use karpenter_core::cloud::{
    CloudProvider, CloudProviderError, NodeClassKind, RepairPolicy, UnavailableOffering,
};
use karpenter_core::launch::{drop_zeros, launch_labels};
use karpenter_core::model::InstanceType;
use karpenter_core::requirements::Requirements;
use karpenter_core::resources::ResourceList;
use tokio::sync::oneshot;

use super::{AwsClients, convert, error_code};
use crate::catalog::{
    AwsCatalogOptions, CatalogSources, UPSTREAM_FALLBACK_SPOT_PRICE_FACTOR, build_catalog,
};
use crate::launch::{
    self, FleetError, FleetInput, FleetInstance, FleetRequest, LaunchOutcome, Offering,
    TemplateRef, UnavailableOfferings,
};
use crate::nodeclass::reconcile::READY;
use crate::nodeclass::{EC2NodeClass, GROUP, KIND};
use crate::pricing::{Prices, SpotPriceRecord};
use crate::userdata::{self, BootstrapOptions, BootstrapTaint};
use crate::{ami, drift};

/// How long derived instance-type lists are reused (upstream's
/// `InstanceTypesZonesAndOfferingsTTL`).
pub const INSTANCE_TYPES_TTL: Duration = Duration::from_secs(5 * 60);
/// How often instance types, offerings and spot prices are described again.
pub const EC2_REFRESH_INTERVAL: Duration = Duration::from_secs(12 * 3600);
/// How long a launch template is trusted to exist without looking again.
pub const LAUNCH_TEMPLATE_TTL: Duration = Duration::from_secs(60);
/// CreateFleet batching: a window closes after this long without a new identical request...
pub const FLEET_BATCH_IDLE: Duration = Duration::from_millis(35);
/// ...or this long after it opened.
pub const FLEET_BATCH_MAX: Duration = Duration::from_secs(1);
/// The instance states Get and List consider alive.
pub const LIVE_STATES: &[&str] = &["pending", "running", "stopping", "stopped", "shutting-down"];
/// The annotation naming the instance profile a NodeClaim launched with.
pub const INSTANCE_PROFILE_ANNOTATION: &str = "karpenter.k8s.aws/instance-profile-name";

/// The cluster the provider launches nodes for.
#[derive(Debug, Clone, PartialEq)]
pub struct ProviderOptions {
    /// `CLUSTER_NAME`: tags, launch-template scoping, user data.
    pub cluster_name: String,
    /// `CLUSTER_ENDPOINT`: the API server URL nodes join.
    pub cluster_endpoint: String,
    /// `CLUSTER_CA_BUNDLE` (base64), if not discovered by the node.
    pub cluster_ca_bundle: Option<String>,
    /// The cluster's service CIDR (AL2023's NodeConfig needs it).
    pub cluster_cidr: Option<String>,
    /// `VM_MEMORY_OVERHEAD_PERCENT` as a fraction (default 0.075).
    pub vm_memory_overhead_percent: f64,
    /// `RESERVED_ENIS` (default 0).
    pub reserved_enis: i64,
    /// CreateFleet batching: the window closes after this long without a new identical
    /// request (default [`FLEET_BATCH_IDLE`], upstream's 35 ms; at most [`FLEET_BATCH_MAX`]).
    pub fleet_batch_idle: Duration,
}

impl ProviderOptions {
    /// Options for `cluster_name` at `cluster_endpoint` with upstream's defaults.
    pub fn new(cluster_name: impl Into<String>, cluster_endpoint: impl Into<String>) -> Self {
        ProviderOptions {
            cluster_name: cluster_name.into(),
            cluster_endpoint: cluster_endpoint.into(),
            cluster_ca_bundle: None,
            cluster_cidr: Some("10.100.0.0/16".into()),
            vm_memory_overhead_percent: crate::catalog::DEFAULT_VM_MEMORY_OVERHEAD_PERCENT,
            reserved_enis: 0,
            fleet_batch_idle: FLEET_BATCH_IDLE,
        }
    }
}

/// The EC2NodeClasses the provider launches from, by name, with their status (written by the
/// node-class controller, read by the provider).
pub type NodeClassStore = Arc<RwLock<BTreeMap<String, EC2NodeClass>>>;

/// How many calls of each kind the provider made (for benchmarks and tests).
#[derive(Debug, Default)]
pub struct ApiCounters {
    /// CreateFleet.
    pub create_fleet: AtomicU64,
    /// DescribeInstances.
    pub describe_instances: AtomicU64,
    /// TerminateInstances.
    pub terminate_instances: AtomicU64,
    /// CreateLaunchTemplate.
    pub create_launch_template: AtomicU64,
    /// DescribeLaunchTemplates.
    pub describe_launch_templates: AtomicU64,
    /// DescribeInstanceTypes pages.
    pub describe_instance_types: AtomicU64,
}

impl ApiCounters {
    /// A snapshot as (call, count) pairs.
    pub fn snapshot(&self) -> BTreeMap<&'static str, u64> {
        let g = |a: &AtomicU64| a.load(Ordering::Relaxed);
        BTreeMap::from([
            ("CreateFleet", g(&self.create_fleet)),
            ("DescribeInstances", g(&self.describe_instances)),
            ("TerminateInstances", g(&self.terminate_instances)),
            ("CreateLaunchTemplate", g(&self.create_launch_template)),
            (
                "DescribeLaunchTemplates",
                g(&self.describe_launch_templates),
            ),
            ("DescribeInstanceTypes", g(&self.describe_instance_types)),
        ])
    }
}

/// The EC2 data instance types are built from.
struct Ec2Data {
    sources: CatalogSources,
    fetched: Instant,
}

/// A derived instance-type list of one class.
struct TypesEntry {
    key: String,
    types: Vec<Arc<InstanceType>>,
    built: Instant,
}

/// One caller's share of a batched CreateFleet.
type FleetShare = Result<(Vec<FleetInstance>, Vec<FleetError>), (String, String)>;

/// Callers waiting on one CreateFleet window.
struct FleetBucket {
    request: FleetRequest,
    waiters: Vec<oneshot::Sender<FleetShare>>,
    last_join: Instant,
}

/// The AWS cloud provider.
pub struct AwsCloudProvider {
    clients: AwsClients,
    options: ProviderOptions,
    node_classes: NodeClassStore,
    prices: Mutex<Prices>,
    ec2_data: tokio::sync::Mutex<Option<Arc<Ec2Data>>>,
    types: Mutex<BTreeMap<String, TypesEntry>>,
    unavailable: Mutex<UnavailableOfferings>,
    launch_templates: Mutex<BTreeMap<String, Instant>>,
    launch_template_lock: tokio::sync::Mutex<()>,
    fleet_batches: Arc<Mutex<HashMap<String, FleetBucket>>>,
    counters: Arc<ApiCounters>,
}

impl std::fmt::Debug for AwsCloudProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AwsCloudProvider")
            .field("region", &self.clients.region)
            .field("cluster", &self.options.cluster_name)
            .finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn other(context: &str, code: &str, message: &str) -> CloudProviderError {
    if code == "RequestLimitExceeded" || code == "Throttling" {
        return CloudProviderError::throttled(format!("{context}: {code}: {message}"));
    }
    if code.is_empty() {
        CloudProviderError::other(format!("{context}: {message}"))
    } else {
        CloudProviderError::other(format!("{context}: {code}: {message}"))
    }
}

impl AwsCloudProvider {
    /// A provider on `clients` for the cluster of `options`, launching from the classes in
    /// `node_classes`. Prices start from the embedded snapshot.
    pub fn new(
        clients: AwsClients,
        options: ProviderOptions,
        node_classes: NodeClassStore,
    ) -> Result<Self, CloudProviderError> {
        let prices = Prices::embedded()
            .map_err(|e| CloudProviderError::other(format!("loading embedded prices: {e}")))?;
        Ok(AwsCloudProvider {
            clients,
            options,
            node_classes,
            prices: Mutex::new(prices),
            ec2_data: tokio::sync::Mutex::new(None),
            types: Mutex::new(BTreeMap::new()),
            unavailable: Mutex::new(UnavailableOfferings::new()),
            launch_templates: Mutex::new(BTreeMap::new()),
            launch_template_lock: tokio::sync::Mutex::new(()),
            fleet_batches: Arc::new(Mutex::new(HashMap::new())),
            counters: Arc::new(ApiCounters::default()),
        })
    }

    /// The node-class store the provider reads.
    pub fn node_classes(&self) -> &NodeClassStore {
        &self.node_classes
    }

    /// The call counters.
    pub fn counters(&self) -> &ApiCounters {
        &self.counters
    }

    /// The provider's options.
    pub fn options(&self) -> &ProviderOptions {
        &self.options
    }

    /// Replaces the price state (after a Pricing API refresh).
    pub fn update_prices(&self, f: impl FnOnce(&mut Prices)) {
        f(&mut lock(&self.prices));
        lock(&self.types).clear();
    }

    /// Whether the offering is in the unavailable-offerings cache now.
    pub fn is_unavailable(&self, capacity_type: &str, instance_type: &str, zone: &str) -> bool {
        lock(&self.unavailable).is_unavailable(
            capacity_type,
            instance_type,
            zone,
            &[],
            jiff::Timestamp::now(),
        )
    }

    fn class(&self, name: &str) -> Option<EC2NodeClass> {
        self.node_classes
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(name)
            .cloned()
    }

    /// Startup check: DescribeInstanceTypes with `DryRun=true` succeeds (or answers
    /// `DryRunOperation`).
    pub async fn check_connectivity(&self) -> Result<(), CloudProviderError> {
        match self
            .clients
            .ec2
            .describe_instance_types()
            .dry_run(true)
            .send()
            .await
        {
            Ok(_) => Ok(()),
            Err(e) => {
                let (code, message) = error_code(&e);
                if code == "DryRunOperation" {
                    Ok(())
                } else {
                    Err(other("DescribeInstanceTypes (dry run)", &code, &message))
                }
            }
        }
    }

    /// Describes instance types, offerings and spot prices now (also done lazily on first use
    /// and every [`EC2_REFRESH_INTERVAL`]).
    pub async fn refresh_ec2(&self) -> Result<(), CloudProviderError> {
        let mut guard = self.ec2_data.lock().await;
        let data = self.describe_ec2().await?;
        *guard = Some(Arc::new(data));
        lock(&self.types).clear();
        Ok(())
    }

    async fn ec2(&self) -> Result<Arc<Ec2Data>, CloudProviderError> {
        let mut guard = self.ec2_data.lock().await;
        if let Some(d) = guard.as_ref()
            && d.fetched.elapsed() < EC2_REFRESH_INTERVAL
        {
            return Ok(Arc::clone(d));
        }
        let data = Arc::new(self.describe_ec2().await?);
        *guard = Some(Arc::clone(&data));
        lock(&self.types).clear();
        Ok(data)
    }

    async fn describe_ec2(&self) -> Result<Ec2Data, CloudProviderError> {
        let ec2c = &self.clients.ec2;
        let mut instance_types = BTreeMap::new();
        let mut token = None;
        loop {
            self.counters
                .describe_instance_types
                .fetch_add(1, Ordering::Relaxed);
            let out = ec2c
                .describe_instance_types()
                .filters(
                    ec2::Filter::builder()
                        .name("supported-virtualization-type")
                        .values("hvm")
                        .build(),
                )
                .filters(
                    ec2::Filter::builder()
                        .name("processor-info.supported-architecture")
                        .values("x86_64")
                        .values("arm64")
                        .build(),
                )
                .max_results(100)
                .set_next_token(token)
                .send()
                .await
                .map_err(|e| {
                    let (c, m) = error_code(&e);
                    other("DescribeInstanceTypes", &c, &m)
                })?;
            for i in out.instance_types() {
                if let Some(t) = i.instance_type() {
                    instance_types.insert(t.as_str().to_string(), convert::instance_type_info(i));
                }
            }
            token = out.next_token().map(str::to_string);
            if token.is_none() {
                break;
            }
        }
        let mut offerings: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        let mut token = None;
        loop {
            let out = ec2c
                .describe_instance_type_offerings()
                .location_type(ec2::LocationType::AvailabilityZone)
                .max_results(1000)
                .set_next_token(token)
                .send()
                .await
                .map_err(|e| {
                    let (c, m) = error_code(&e);
                    other("DescribeInstanceTypeOfferings", &c, &m)
                })?;
            for o in out.instance_type_offerings() {
                if let (Some(t), Some(z)) = (o.instance_type(), o.location()) {
                    offerings
                        .entry(t.as_str().to_string())
                        .or_default()
                        .insert(z.to_string());
                }
            }
            token = out.next_token().map(str::to_string);
            if token.is_none() {
                break;
            }
        }
        // Spot prices: a failure keeps the previous ones (on-demand fallback before the first
        // success), as upstream.
        let spot = self.describe_spot_prices().await;
        {
            let mut prices = lock(&self.prices);
            prices.update_spot(spot);
        }
        Ok(Ec2Data {
            sources: CatalogSources {
                region: self.clients.region.clone(),
                instance_types,
                offerings,
                on_demand_prices: BTreeMap::new(),
            },
            fetched: Instant::now(),
        })
    }

    async fn describe_spot_prices(
        &self,
    ) -> Result<BTreeMap<(String, String), f64>, crate::pricing::PricingError> {
        let mut records = Vec::new();
        let mut token = None;
        loop {
            let out = self
                .clients
                .ec2
                .describe_spot_price_history()
                .product_descriptions("Linux/UNIX")
                .product_descriptions("Linux/UNIX (Amazon VPC)")
                .start_time(aws_smithy_types::DateTime::from(
                    std::time::SystemTime::now(),
                ))
                .max_results(1000)
                .set_next_token(token)
                .send()
                .await
                .map_err(|e| {
                    let (c, m) = error_code(&e);
                    crate::pricing::PricingError::Api(format!("DescribeSpotPriceHistory: {c} {m}"))
                })?;
            for r in out.spot_price_history() {
                records.push(SpotPriceRecord {
                    instance_type: r
                        .instance_type()
                        .map(|t| t.as_str().to_string())
                        .unwrap_or_default(),
                    availability_zone: r.availability_zone().unwrap_or_default().to_string(),
                    spot_price: r.spot_price().unwrap_or_default().to_string(),
                    timestamp: r
                        .timestamp()
                        .and_then(|t| t.fmt(aws_smithy_types::date_time::Format::DateTime).ok()),
                });
            }
            token = out
                .next_token()
                .filter(|t| !t.is_empty())
                .map(str::to_string);
            if token.is_none() {
                break;
            }
        }
        crate::pricing::spot_prices(&records)
    }

    /// The instance types of `class`: the catalog conversion of the EC2 data with the class's
    /// options, offerings in the zones of its subnets, current prices and availability.
    pub async fn instance_types_for_class(
        &self,
        class: &EC2NodeClass,
    ) -> Result<Vec<Arc<InstanceType>>, CloudProviderError> {
        let data = self.ec2().await?;
        let name = class.name().to_string();
        let zones: BTreeSet<String> = class
            .status
            .subnets
            .iter()
            .map(|s| s.zone.clone())
            .collect();
        let base = AwsCatalogOptions {
            region: self.clients.region.clone(),
            vm_memory_overhead_percent: self.options.vm_memory_overhead_percent,
            reserved_enis: self.options.reserved_enis,
            spot_price_factor: UPSTREAM_FALLBACK_SPOT_PRICE_FACTOR,
            ..AwsCatalogOptions::default()
        };
        let opts = class.catalog_options(&base).map_err(|e| {
            CloudProviderError::node_class_not_ready(format!("EC2NodeClass {name}: {e}"))
        })?;
        let key = format!(
            "{zones:?}|{:?}|{opts:?}",
            class.status.amis.iter().map(|a| &a.id).collect::<Vec<_>>()
        );
        let cached = {
            let types = lock(&self.types);
            types
                .get(&name)
                .filter(|e| e.key == key && e.built.elapsed() < INSTANCE_TYPES_TTL)
                .map(|e| e.types.clone())
        };
        let types = match cached {
            Some(t) => t,
            None => {
                let built = self.build_types(&data, &zones, &opts)?;
                lock(&self.types).insert(
                    name,
                    TypesEntry {
                        key,
                        types: built.clone(),
                        built: Instant::now(),
                    },
                );
                built
            }
        };
        Ok(self.apply_unavailable(types))
    }

    fn build_types(
        &self,
        data: &Ec2Data,
        zones: &BTreeSet<String>,
        opts: &AwsCatalogOptions,
    ) -> Result<Vec<Arc<InstanceType>>, CloudProviderError> {
        let prices = lock(&self.prices).clone();
        let mut sources = CatalogSources {
            region: data.sources.region.clone(),
            instance_types: data.sources.instance_types.clone(),
            offerings: data
                .sources
                .offerings
                .iter()
                .map(|(t, z)| (t.clone(), z.intersection(zones).cloned().collect()))
                .collect(),
            on_demand_prices: BTreeMap::new(),
        };
        sources.on_demand_prices = sources
            .instance_types
            .keys()
            .filter_map(|t| prices.on_demand_price(t).map(|p| (t.clone(), p)))
            .collect();
        let report = build_catalog(&sources, opts)
            .map_err(|e| CloudProviderError::other(format!("converting instance types: {e}")))?;
        let mut out = Vec::with_capacity(report.instance_types.len());
        for mut it in report.instance_types {
            for o in &mut it.offerings {
                if o.capacity_type == "spot" {
                    match prices.spot_price(&it.name, &o.zone) {
                        Some(p) => o.price = p,
                        None => o.available = false,
                    }
                }
            }
            let converted = it.to_instance_type().map_err(|e| {
                CloudProviderError::other(format!("instance type {}: {e}", it.name))
            })?;
            out.push(Arc::new(converted));
        }
        Ok(out)
    }

    fn apply_unavailable(&self, mut types: Vec<Arc<InstanceType>>) -> Vec<Arc<InstanceType>> {
        let now = jiff::Timestamp::now();
        let mut cache = lock(&self.unavailable);
        cache.expire(now);
        if cache.is_empty() {
            return types;
        }
        for it in &mut types {
            let hit: Vec<usize> = it
                .offerings
                .iter()
                .enumerate()
                .filter(|(_, o)| {
                    o.available
                        && cache.is_unavailable(o.capacity_type(), it.name(), o.zone(), &[], now)
                })
                .map(|(i, _)| i)
                .collect();
            if hit.is_empty() {
                continue;
            }
            let t = Arc::make_mut(it);
            for i in hit {
                if let Some(o) = t.offerings.get_mut(i) {
                    o.available = false;
                }
            }
        }
        types
    }

    fn ready_class(
        &self,
        reference: &NodeClassReference,
    ) -> Result<EC2NodeClass, CloudProviderError> {
        let Some(class) = self.class(&reference.name) else {
            return Err(CloudProviderError::insufficient_capacity(
                Vec::new(),
                format!("EC2NodeClass {:?} not found", reference.name),
            ));
        };
        match class.status.condition(READY) {
            Some(c) if c.status == karpenter_core::api::ConditionStatus::True => {
                let generation = class.metadata.generation;
                if generation.is_some()
                    && c.observed_generation.is_some_and(|g| Some(g) != generation)
                {
                    return Err(CloudProviderError::node_class_not_ready(format!(
                        "EC2NodeClass {:?}: status is for an older generation",
                        reference.name
                    )));
                }
                Ok(class)
            }
            Some(c) if c.status == karpenter_core::api::ConditionStatus::Unknown => {
                Err(CloudProviderError::create(
                    "NodeClassReadinessUnknown",
                    format!("EC2NodeClass {:?} readiness is unknown", reference.name),
                ))
            }
            _ => Err(CloudProviderError::node_class_not_ready(format!(
                "EC2NodeClass {:?} is not ready",
                reference.name
            ))),
        }
    }

    /// Ensures the launch template for `class`, `claim` and `image_id` exists and returns its
    /// name.
    async fn ensure_launch_template(
        &self,
        class: &EC2NodeClass,
        claim: &NodeClaim,
        image_id: &str,
        tags: &BTreeMap<String, String>,
    ) -> Result<String, CloudProviderError> {
        let family = class.spec.resolved_ami_family().unwrap_or_default();
        let mut taints: Vec<BootstrapTaint> = claim
            .spec
            .taints
            .iter()
            .chain(&claim.spec.startup_taints)
            .map(|t| BootstrapTaint {
                key: t.key.clone(),
                value: t.value.clone(),
                effect: t.effect.to_string(),
            })
            .collect();
        taints.sort_by(|a, b| a.key.cmp(&b.key).then_with(|| a.effect.cmp(&b.effect)));
        let boot = BootstrapOptions {
            cluster_name: self.options.cluster_name.clone(),
            api_server_endpoint: self.options.cluster_endpoint.clone(),
            ca_bundle: self.options.cluster_ca_bundle.clone(),
            cluster_cidr: self.options.cluster_cidr.clone(),
            ipv6: false,
            labels: claim.metadata.labels.clone(),
            taints,
            kubelet: class.spec.kubelet.clone(),
            max_pods: class.spec.kubelet.as_ref().and_then(|k| k.max_pods),
            instance_store_raid0: class.spec.instance_store_policy.as_deref() == Some("RAID0"),
            custom_user_data: class.spec.user_data.clone(),
        };
        let user_data = userdata::user_data(family, &boot)
            .map_err(|e| CloudProviderError::create("UserDataInvalid", e.to_string()))?;
        let user_data = userdata::base64(user_data.as_bytes());
        let metadata = class.spec.resolved_metadata_options();
        let security_groups: Vec<String> = class
            .status
            .security_groups
            .iter()
            .map(|g| g.id.clone())
            .collect();
        let profile = class.status.instance_profile.clone();
        let content = serde_json::json!({
            "imageId": image_id,
            "userData": user_data,
            "securityGroups": security_groups,
            "instanceProfile": profile,
            "metadata": [metadata.http_endpoint, metadata.http_protocol_ipv6,
                metadata.http_put_response_hop_limit, metadata.http_tokens],
            "blockDeviceMappings": serde_json::to_value(&class.spec.block_device_mappings).unwrap_or_default(),
            "associatePublicIpAddress": class.spec.associate_public_ip_address,
            "detailedMonitoring": class.spec.detailed_monitoring,
            "tags": tags,
        });
        let name = launch::launch_template_name(&content);
        {
            let mut cache = lock(&self.launch_templates);
            if let Some(seen) = cache.get_mut(&name)
                && seen.elapsed() < LAUNCH_TEMPLATE_TTL
            {
                *seen = Instant::now();
                return Ok(name);
            }
        }
        // One launch at a time looks a template up or creates it; the others wait and then find
        // it in the cache.
        let _single = self.launch_template_lock.lock().await;
        if lock(&self.launch_templates)
            .get(&name)
            .is_some_and(|seen| seen.elapsed() < LAUNCH_TEMPLATE_TTL)
        {
            return Ok(name);
        }
        self.counters
            .describe_launch_templates
            .fetch_add(1, Ordering::Relaxed);
        let found = self
            .clients
            .ec2
            .describe_launch_templates()
            .launch_template_names(&name)
            .max_results(1)
            .send()
            .await;
        let exists = match found {
            Ok(out) => !out.launch_templates().is_empty(),
            Err(e) => {
                let (code, message) = error_code(&e);
                if code != "InvalidLaunchTemplateName.NotFoundException" {
                    return Err(other("DescribeLaunchTemplates", &code, &message));
                }
                false
            }
        };
        if !exists {
            let mut data = ec2::RequestLaunchTemplateData::builder()
                .image_id(image_id)
                .user_data(&user_data)
                .metadata_options(
                    ec2::LaunchTemplateInstanceMetadataOptionsRequest::builder()
                        .http_endpoint(ec2::LaunchTemplateInstanceMetadataEndpointState::from(
                            metadata.http_endpoint.as_str(),
                        ))
                        .http_protocol_ipv6(ec2::LaunchTemplateInstanceMetadataProtocolIpv6::from(
                            metadata.http_protocol_ipv6.as_str(),
                        ))
                        .http_put_response_hop_limit(
                            i32::try_from(metadata.http_put_response_hop_limit).unwrap_or(1),
                        )
                        .http_tokens(ec2::LaunchTemplateHttpTokensState::from(
                            metadata.http_tokens.as_str(),
                        ))
                        .instance_metadata_tags(
                            ec2::LaunchTemplateInstanceMetadataTagsState::Disabled,
                        )
                        .build(),
                )
                .monitoring(
                    ec2::LaunchTemplatesMonitoringRequest::builder()
                        .enabled(class.spec.detailed_monitoring.unwrap_or(false))
                        .build(),
                )
                .network_interfaces(
                    ec2::LaunchTemplateInstanceNetworkInterfaceSpecificationRequest::builder()
                        .device_index(0)
                        .set_associate_public_ip_address(class.spec.associate_public_ip_address)
                        .set_groups(Some(security_groups.clone()))
                        .build(),
                )
                .tag_specifications(
                    ec2::LaunchTemplateTagSpecificationRequest::builder()
                        .resource_type(ec2::ResourceType::NetworkInterface)
                        .set_tags(Some(convert::to_tags(tags)))
                        .build(),
                );
            if let Some(p) = &profile {
                data = data.iam_instance_profile(
                    ec2::LaunchTemplateIamInstanceProfileSpecificationRequest::builder()
                        .name(p)
                        .build(),
                );
            }
            for m in &class.spec.block_device_mappings {
                let mut b = ec2::LaunchTemplateBlockDeviceMappingRequest::builder()
                    .set_device_name(m.device_name.clone());
                if let Some(e) = &m.ebs {
                    let size = e
                        .volume_size
                        .as_deref()
                        .and_then(|s| karpenter_core::resources::Quantity::parse(s).ok())
                        .map(|q| {
                            i32::try_from((q.value() + (1 << 30) - 1) >> 30).unwrap_or(i32::MAX)
                        });
                    b = b.ebs(
                        ec2::LaunchTemplateEbsBlockDeviceRequest::builder()
                            .set_delete_on_termination(e.delete_on_termination)
                            .set_encrypted(e.encrypted)
                            .set_iops(e.iops.and_then(|v| i32::try_from(v).ok()))
                            .set_kms_key_id(e.kms_key_id.clone())
                            .set_snapshot_id(e.snapshot_id.clone())
                            .set_throughput(e.throughput.and_then(|v| i32::try_from(v).ok()))
                            .set_volume_size(size)
                            .set_volume_type(e.volume_type.as_deref().map(ec2::VolumeType::from))
                            .build(),
                    );
                }
                data = data.block_device_mappings(b.build());
            }
            self.counters
                .create_launch_template
                .fetch_add(1, Ordering::Relaxed);
            let created = self
                .clients
                .ec2
                .create_launch_template()
                .launch_template_name(&name)
                .launch_template_data(data.build())
                .tag_specifications(
                    ec2::TagSpecification::builder()
                        .resource_type(ec2::ResourceType::LaunchTemplate)
                        .set_tags(Some(convert::to_tags(tags)))
                        .build(),
                )
                .send()
                .await;
            if let Err(e) = created {
                let (code, message) = error_code(&e);
                // Another launch created it meanwhile.
                if code != "InvalidLaunchTemplateName.AlreadyExistsException" {
                    return Err(CloudProviderError::create(
                        launch::error_reason(&code, &message),
                        format!("creating launch template: {code}: {message}"),
                    ));
                }
            }
        }
        lock(&self.launch_templates).insert(name.clone(), Instant::now());
        Ok(name)
    }

    /// Sends `request` through the CreateFleet batcher: identical requests within the window
    /// become one call with `TotalTargetCapacity = N`; each caller gets one instance (or the
    /// fleet's errors).
    async fn create_fleet(&self, request: FleetRequest) -> FleetShare {
        let key = serde_json::to_string(&request).unwrap_or_default();
        let (tx, rx) = oneshot::channel();
        let leader = {
            let mut batches = lock(&self.fleet_batches);
            match batches.get_mut(&key) {
                Some(b) => {
                    b.waiters.push(tx);
                    b.last_join = Instant::now();
                    false
                }
                None => {
                    batches.insert(
                        key.clone(),
                        FleetBucket {
                            request,
                            waiters: vec![tx],
                            last_join: Instant::now(),
                        },
                    );
                    true
                }
            }
        };
        if leader {
            let batches = Arc::clone(&self.fleet_batches);
            let ec2c = self.clients.ec2.clone();
            let counters = Arc::clone(&self.counters);
            let idle_for = self.options.fleet_batch_idle;
            // The window and the call run in their own task, so a caller that gives up does not
            // strand the others.
            tokio::spawn(async move {
                let opened = Instant::now();
                loop {
                    tokio::time::sleep(idle_for).await;
                    let idle = lock(&batches)
                        .get(&key)
                        .is_none_or(|b| b.last_join.elapsed() >= idle_for);
                    if idle || opened.elapsed() >= FLEET_BATCH_MAX {
                        break;
                    }
                }
                let Some(bucket) = lock(&batches).remove(&key) else {
                    return;
                };
                counters.create_fleet.fetch_add(1, Ordering::Relaxed);
                let n = bucket.waiters.len();
                let result = send_fleet(&ec2c, &bucket.request, n).await;
                match result {
                    Ok((instances, errors)) => {
                        let mut instances = instances.into_iter();
                        for w in bucket.waiters {
                            let mine: Vec<FleetInstance> = instances.next().into_iter().collect();
                            let mut errs = errors.clone();
                            if mine.is_empty() && errs.is_empty() {
                                errs.push(FleetError {
                                    code: "UnfulfillableCapacity".into(),
                                    message: "too few instances returned".into(),
                                    instance_type: None,
                                    zone: None,
                                    subnet_id: None,
                                });
                            }
                            let _ = w.send(Ok((mine, errs)));
                        }
                    }
                    Err(e) => {
                        for w in bucket.waiters {
                            let _ = w.send(Err(e.clone()));
                        }
                    }
                }
            });
        }
        rx.await.unwrap_or_else(|_| {
            Err((
                String::new(),
                "the CreateFleet batch was dropped".to_string(),
            ))
        })
    }

    async fn describe_instance(
        &self,
        instance_id: &str,
    ) -> Result<ec2::Instance, CloudProviderError> {
        self.counters
            .describe_instances
            .fetch_add(1, Ordering::Relaxed);
        let out = self
            .clients
            .ec2
            .describe_instances()
            .instance_ids(instance_id)
            .filters(
                ec2::Filter::builder()
                    .name("instance-state-name")
                    .set_values(Some(LIVE_STATES.iter().map(|s| s.to_string()).collect()))
                    .build(),
            )
            .send()
            .await;
        let out = match out {
            Ok(o) => o,
            Err(e) => {
                let (code, message) = error_code(&e);
                if code == "InvalidInstanceID.NotFound" {
                    return Err(CloudProviderError::not_found(instance_id));
                }
                return Err(other("DescribeInstances", &code, &message));
            }
        };
        out.reservations()
            .iter()
            .flat_map(|r| r.instances())
            .find(|i| i.instance_id() == Some(instance_id))
            .cloned()
            .ok_or_else(|| CloudProviderError::not_found(instance_id))
    }

    /// An EC2 instance as a NodeClaim: name from the `karpenter.sh/nodeclaim` tag, labels from
    /// the instance type (when the class's types are known), zone, capacity type and nodepool.
    async fn instance_to_claim(&self, i: &ec2::Instance) -> NodeClaim {
        let tags = convert::tags(i.tags());
        let class_name = tags.get(launch::NODECLASS_TAG).cloned().unwrap_or_default();
        let reference = NodeClassReference::new(GROUP, KIND, class_name.clone());
        let mut claim = NodeClaim::new(
            tags.get(launch::NODECLAIM_TAG).cloned().unwrap_or_default(),
            NodeClaimSpec::new(reference),
        );
        let zone = i
            .placement()
            .and_then(|p| p.availability_zone())
            .unwrap_or_default()
            .to_string();
        let type_name = i
            .instance_type()
            .map(|t| t.as_str().to_string())
            .unwrap_or_default();
        let spot = i.instance_lifecycle() == Some(&ec2::InstanceLifecycleType::Spot)
            || i.spot_instance_request_id().is_some();
        let capacity_type = if spot { "spot" } else { "on-demand" };
        let instance_id = i.instance_id().unwrap_or_default();
        let mut labels = BTreeMap::new();
        if let Some(class) = self.class(&class_name)
            && let Ok(types) = self.instance_types_for_class(&class).await
            && let Some(it) = types.iter().find(|t| t.name() == type_name)
        {
            if let Some(o) = it
                .offerings
                .iter()
                .find(|o| o.zone() == zone && o.capacity_type() == capacity_type)
            {
                labels = launch_labels(it, o, &Requirements::new(), &BTreeMap::new(), None);
            }
            claim.status.capacity = drop_zeros(it.capacity());
            claim.status.allocatable = drop_zeros(it.allocatable());
        }
        labels.insert(karpenter_core::labels::INSTANCE_TYPE.into(), type_name);
        labels.insert(karpenter_core::labels::ZONE.into(), zone.clone());
        labels.insert(
            karpenter_core::labels::CAPACITY_TYPE.into(),
            capacity_type.into(),
        );
        if let Some(pool) = tags.get(launch::NODEPOOL_TAG) {
            labels.insert(karpenter_core::labels::NODEPOOL.into(), pool.clone());
        }
        claim.metadata.labels = labels;
        claim.metadata.creation_timestamp = i
            .launch_time()
            .and_then(|t| t.fmt(aws_smithy_types::date_time::Format::DateTime).ok());
        let state = i.state().and_then(|s| s.name());
        if matches!(
            state,
            Some(ec2::InstanceStateName::ShuttingDown | ec2::InstanceStateName::Terminated)
        ) {
            claim.metadata.deletion_timestamp = claim.metadata.creation_timestamp.clone();
        }
        claim.status.provider_id = Some(launch::provider_id(&zone, instance_id));
        claim.status.image_id = i.image_id().map(str::to_string);
        claim
    }
}

/// One CreateFleet call for `n` instances; its instances and errors as plain data, or the API
/// error's (code, message).
async fn send_fleet(
    ec2c: &aws_sdk_ec2::Client,
    r: &FleetRequest,
    n: usize,
) -> Result<(Vec<FleetInstance>, Vec<FleetError>), (String, String)> {
    let mut req = ec2c
        .create_fleet()
        .r#type(ec2::FleetType::from(r.r#type.as_str()))
        .target_capacity_specification(
            ec2::TargetCapacitySpecificationRequest::builder()
                .total_target_capacity(i32::try_from(n).unwrap_or(i32::MAX))
                .default_target_capacity_type(ec2::DefaultTargetCapacityType::from(
                    r.default_target_capacity_type.as_str(),
                ))
                .build(),
        )
        .set_context(r.context.clone());
    if let Some(s) = &r.spot_allocation_strategy {
        req = req.spot_options(
            ec2::SpotOptionsRequest::builder()
                .allocation_strategy(ec2::SpotAllocationStrategy::from(s.as_str()))
                .build(),
        );
    }
    if let Some(s) = &r.on_demand_allocation_strategy {
        req = req.on_demand_options(
            ec2::OnDemandOptionsRequest::builder()
                .allocation_strategy(ec2::FleetOnDemandAllocationStrategy::from(s.as_str()))
                .build(),
        );
    }
    for (resource, tags) in &r.tag_specifications {
        req = req.tag_specifications(
            ec2::TagSpecification::builder()
                .resource_type(ec2::ResourceType::from(resource.as_str()))
                .set_tags(Some(convert::to_tags(tags)))
                .build(),
        );
    }
    for c in &r.launch_template_configs {
        let overrides = c
            .overrides
            .iter()
            .map(|o| {
                ec2::FleetLaunchTemplateOverridesRequest::builder()
                    .instance_type(ec2::InstanceType::from(o.instance_type.as_str()))
                    .subnet_id(&o.subnet_id)
                    .image_id(&o.image_id)
                    .availability_zone(&o.availability_zone)
                    .priority(o.priority)
                    .build()
            })
            .collect();
        req = req.launch_template_configs(
            ec2::FleetLaunchTemplateConfigRequest::builder()
                .launch_template_specification(
                    ec2::FleetLaunchTemplateSpecificationRequest::builder()
                        .launch_template_name(&c.launch_template_name)
                        .version(&c.version)
                        .build(),
                )
                .set_overrides(Some(overrides))
                .build(),
        );
    }
    let out = req.send().await.map_err(|e| error_code(&e))?;
    let mut instances = Vec::new();
    for i in out.instances() {
        let o = i
            .launch_template_and_overrides()
            .and_then(|l| l.overrides());
        for id in i.instance_ids() {
            instances.push(FleetInstance {
                instance_id: id.clone(),
                instance_type: i
                    .instance_type()
                    .or_else(|| o.and_then(|o| o.instance_type()))
                    .map(|t| t.as_str().to_string())
                    .unwrap_or_default(),
                zone: o
                    .and_then(|o| o.availability_zone())
                    .unwrap_or_default()
                    .to_string(),
                subnet_id: o
                    .and_then(|o| o.subnet_id())
                    .unwrap_or_default()
                    .to_string(),
                image_id: o.and_then(|o| o.image_id()).unwrap_or_default().to_string(),
            });
        }
    }
    let errors = out
        .errors()
        .iter()
        .map(|e| {
            let o = e
                .launch_template_and_overrides()
                .and_then(|l| l.overrides());
            FleetError {
                code: e.error_code().unwrap_or_default().to_string(),
                message: e.error_message().unwrap_or_default().to_string(),
                instance_type: o
                    .and_then(|o| o.instance_type())
                    .map(|t| t.as_str().to_string()),
                zone: o.and_then(|o| o.availability_zone()).map(str::to_string),
                subnet_id: o.and_then(|o| o.subnet_id()).map(str::to_string),
            }
        })
        .collect();
    Ok((instances, errors))
}

#[async_trait]
impl CloudProvider for AwsCloudProvider {
    async fn create(&self, node_claim: &NodeClaim) -> Result<NodeClaim, CloudProviderError> {
        let class = self.ready_class(&node_claim.spec.node_class_ref)?;
        let types = self.instance_types_for_class(&class).await.map_err(|e| {
            CloudProviderError::create("InstanceTypeResolutionFailed", e.to_string())
        })?;
        let requirements =
            Requirements::from_node_selector_requirements(node_claim.spec.requirements());
        let requests = &node_claim.spec.resources.requests;
        let policy = self.label_policy();
        // The instance-type requirement first (NodeClaims list their types): a cheap name check
        // that spares the full compatibility test for the rest of the catalog.
        let named = requirements.get(karpenter_core::labels::INSTANCE_TYPE);
        let candidates: Vec<&Arc<InstanceType>> = types
            .iter()
            .filter(|it| named.is_none_or(|r| r.has(it.name())))
            .filter(|it| {
                requirements.is_compatible(it.requirements(), Some(&policy))
                    && ResourceList::fits(requests, it.allocatable())
            })
            .collect();
        let usable = |o: &karpenter_core::model::Offering| {
            o.available && requirements.is_compatible(o.requirements(), Some(&policy))
        };
        let has = |ct: &str| {
            candidates.iter().any(|it| {
                it.offerings
                    .iter()
                    .any(|o| o.capacity_type() == ct && usable(o))
            })
        };
        let capacity_type = if has("spot") { "spot" } else { "on-demand" };
        let mut offerings: Vec<Offering> = candidates
            .iter()
            .flat_map(|it| {
                it.offerings
                    .iter()
                    .filter(|o| o.capacity_type() == capacity_type && usable(o))
                    .map(|o| Offering {
                        instance_type: it.name().to_string(),
                        zone: o.zone().to_string(),
                        capacity_type: capacity_type.to_string(),
                        price: o.price,
                    })
            })
            .collect();
        offerings.sort_by(|a, b| {
            a.price
                .total_cmp(&b.price)
                .then_with(|| a.instance_type.cmp(&b.instance_type))
                .then_with(|| a.zone.cmp(&b.zone))
        });
        if offerings.is_empty() {
            return Err(CloudProviderError::insufficient_capacity(
                Vec::new(),
                "all requested instance types were unavailable during launch",
            ));
        }
        let offered: BTreeSet<&str> = offerings.iter().map(|o| o.instance_type.as_str()).collect();
        let by_ami = ami::map_to_instance_types(
            &class.status.amis,
            candidates
                .iter()
                .filter(|it| offered.contains(it.name()))
                .map(|it| (it.name(), it.requirements())),
        );
        if by_ami.is_empty() {
            return Err(CloudProviderError::create(
                "NoCompatibleAMI",
                "no instance types satisfy requirements of amis",
            ));
        }
        let pool = node_claim
            .metadata
            .labels
            .get(karpenter_core::labels::NODEPOOL)
            .cloned()
            .unwrap_or_default();
        let tags = launch::launch_tags(
            &class.spec.tags,
            &self.options.cluster_name,
            &pool,
            class.name(),
        );
        let mut templates = Vec::new();
        for (image_id, instance_types) in by_ami {
            let name = self
                .ensure_launch_template(&class, node_claim, &image_id, &tags)
                .await?;
            templates.push(TemplateRef {
                name,
                image_id,
                instance_types,
            });
        }
        let subnets: Vec<crate::resolve::SubnetInfo> = class
            .status
            .subnets
            .iter()
            .enumerate()
            .map(|(i, s)| crate::resolve::SubnetInfo {
                id: s.id.clone(),
                zone: s.zone.clone(),
                zone_id: s.zone_id.clone(),
                // Status order is most free addresses first.
                available_ip_address_count: i64::try_from(class.status.subnets.len() - i)
                    .unwrap_or(0),
                tags: BTreeMap::new(),
            })
            .collect();
        let zonal_subnets = crate::resolve::zonal_subnets(&subnets)
            .into_iter()
            .map(|(z, s)| (z, s.id))
            .collect();
        let input = FleetInput {
            capacity_type: capacity_type.to_string(),
            templates,
            offerings,
            zonal_subnets,
            tags,
            context: class.spec.context.clone(),
            price_overlay: false,
        };
        let request = launch::build_fleet_request(&input)
            .map_err(|e| CloudProviderError::insufficient_capacity(Vec::new(), e.to_string()))?;
        let decision = match self.create_fleet(request).await {
            Ok((instances, errors)) => {
                launch::handle_fleet_result(capacity_type, &instances, &errors)
            }
            Err((code, message)) => {
                if code.is_empty() {
                    return Err(CloudProviderError::other(format!("CreateFleet: {message}")));
                }
                if code == "InvalidLaunchTemplateName.NotFoundException" {
                    lock(&self.launch_templates).clear();
                }
                launch::FleetDecision {
                    outcome: launch::handle_api_error(&code, &message),
                    unavailable_offerings: Vec::new(),
                    unavailable_capacity_types: Vec::new(),
                    unavailable_subnets: Vec::new(),
                    launch_failures: Vec::new(),
                }
            }
        };
        if !decision.unavailable_offerings.is_empty()
            || !decision.unavailable_capacity_types.is_empty()
            || !decision.unavailable_subnets.is_empty()
        {
            lock(&self.unavailable).apply(&decision, jiff::Timestamp::now());
        }
        let fi = match decision.outcome {
            LaunchOutcome::Launched(fi) => fi,
            LaunchOutcome::InsufficientCapacity(message) => {
                let offerings = decision
                    .unavailable_offerings
                    .iter()
                    .map(|k| UnavailableOffering::new(&k.instance_type, &k.zone, &k.capacity_type))
                    .collect();
                return Err(CloudProviderError::insufficient_capacity(
                    offerings, message,
                ));
            }
            LaunchOutcome::Create { reason, message } => {
                return Err(CloudProviderError::create(reason, message));
            }
        };
        let it = types
            .iter()
            .find(|t| t.name() == fi.instance_type)
            .ok_or_else(|| {
                CloudProviderError::other(format!(
                    "CreateFleet launched {} which was not requested",
                    fi.instance_type
                ))
            })?;
        let offering = it
            .offerings
            .iter()
            .find(|o| o.zone() == fi.zone && o.capacity_type() == capacity_type)
            .ok_or_else(|| {
                CloudProviderError::other(format!(
                    "CreateFleet launched {} in {} which was not requested",
                    fi.instance_type, fi.zone
                ))
            })?;
        let mut launched = node_claim.clone();
        launched.metadata.labels = launch_labels(
            it,
            offering,
            &requirements,
            &node_claim.metadata.labels,
            None,
        );
        for (k, v) in drift::hash_annotations(&class) {
            launched.metadata.annotations.insert(k.to_string(), v);
        }
        if let Some(p) = &class.status.instance_profile {
            launched
                .metadata
                .annotations
                .insert(INSTANCE_PROFILE_ANNOTATION.into(), p.clone());
        }
        launched.status.provider_id = Some(launch::provider_id(&fi.zone, &fi.instance_id));
        launched.status.image_id = Some(fi.image_id.clone());
        launched.status.capacity = drop_zeros(it.capacity());
        launched.status.allocatable = drop_zeros(it.allocatable());
        Ok(launched)
    }

    async fn delete(&self, node_claim: &NodeClaim) -> Result<(), CloudProviderError> {
        let provider_id = node_claim.status.provider_id.clone().unwrap_or_default();
        let id = launch::parse_provider_id(&provider_id)
            .ok_or_else(|| CloudProviderError::not_found(provider_id.clone()))?
            .to_string();
        let instance = self.describe_instance(&id).await?;
        if instance.state().and_then(|s| s.name()) == Some(&ec2::InstanceStateName::ShuttingDown) {
            return Ok(());
        }
        self.counters
            .terminate_instances
            .fetch_add(1, Ordering::Relaxed);
        match self
            .clients
            .ec2
            .terminate_instances()
            .instance_ids(&id)
            .send()
            .await
        {
            Ok(_) => Ok(()),
            Err(e) => {
                let (code, message) = error_code(&e);
                if code == "InvalidInstanceID.NotFound" {
                    Err(CloudProviderError::not_found(provider_id))
                } else {
                    Err(other("TerminateInstances", &code, &message))
                }
            }
        }
    }

    async fn get(&self, provider_id: &str) -> Result<NodeClaim, CloudProviderError> {
        let id = launch::parse_provider_id(provider_id)
            .ok_or_else(|| CloudProviderError::not_found(provider_id))?;
        let instance = self.describe_instance(id).await?;
        Ok(self.instance_to_claim(&instance).await)
    }

    async fn list(&self) -> Result<Vec<NodeClaim>, CloudProviderError> {
        let mut out = Vec::new();
        let mut token = None;
        loop {
            self.counters
                .describe_instances
                .fetch_add(1, Ordering::Relaxed);
            let page = self
                .clients
                .ec2
                .describe_instances()
                .filters(
                    ec2::Filter::builder()
                        .name("tag-key")
                        .values(launch::NODEPOOL_TAG)
                        .build(),
                )
                .filters(
                    ec2::Filter::builder()
                        .name(format!("tag:{}", launch::CLUSTER_NAME_TAG))
                        .values(&self.options.cluster_name)
                        .build(),
                )
                .filters(
                    ec2::Filter::builder()
                        .name("instance-state-name")
                        .set_values(Some(LIVE_STATES.iter().map(|s| s.to_string()).collect()))
                        .build(),
                )
                .max_results(1000)
                .set_next_token(token)
                .send()
                .await
                .map_err(|e| {
                    let (c, m) = error_code(&e);
                    other("DescribeInstances", &c, &m)
                })?;
            for r in page.reservations() {
                for i in r.instances() {
                    // The class tag is checked here: some EC2 emulations keep only the last
                    // of two `tag-key` filters.
                    if i.tags()
                        .iter()
                        .any(|t| t.key() == Some(launch::NODECLASS_TAG))
                    {
                        out.push(self.instance_to_claim(i).await);
                    }
                }
            }
            token = page
                .next_token()
                .filter(|t| !t.is_empty())
                .map(str::to_string);
            if token.is_none() {
                break;
            }
        }
        Ok(out)
    }

    async fn instance_types(
        &self,
        node_pool: &NodePool,
    ) -> Result<Vec<Arc<InstanceType>>, CloudProviderError> {
        let name = &node_pool.spec.template.spec.node_class_ref.name;
        match self.class(name) {
            Some(class) => self.instance_types_for_class(&class).await,
            None => Ok(Vec::new()),
        }
    }

    async fn is_drifted(
        &self,
        node_claim: &NodeClaim,
    ) -> Result<Option<String>, CloudProviderError> {
        let Some(class) = self.class(&node_claim.spec.node_class_ref.name) else {
            return Ok(None);
        };
        let type_name = node_claim
            .metadata
            .labels
            .get(karpenter_core::labels::INSTANCE_TYPE)
            .cloned()
            .unwrap_or_default();
        let types = self.instance_types_for_class(&class).await?;
        let type_requirements = types
            .iter()
            .find(|t| t.name() == type_name)
            .map(|t| t.requirements().clone())
            .unwrap_or_default();
        let view = match node_claim
            .status
            .provider_id
            .as_deref()
            .and_then(launch::parse_provider_id)
        {
            Some(id) => {
                let i = self.describe_instance(id).await?;
                let mut groups: Vec<String> = i
                    .security_groups()
                    .iter()
                    .filter_map(|g| g.group_id().map(str::to_string))
                    .collect();
                if groups.is_empty() {
                    // Some EC2 emulations report the groups on the network interfaces only.
                    groups = i
                        .network_interfaces()
                        .iter()
                        .flat_map(|n| n.groups())
                        .filter_map(|g| g.group_id().map(str::to_string))
                        .collect();
                }
                groups.sort();
                groups.dedup();
                Some(drift::InstanceView {
                    subnet_id: i.subnet_id().unwrap_or_default().to_string(),
                    security_group_ids: groups,
                })
            }
            None => None,
        };
        drift::nodeclaim_drift(&class, node_claim, &type_requirements, view.as_ref())
            .map(|r| r.map(|r| r.as_str().to_string()))
            .map_err(|e| CloudProviderError::other(e.to_string()))
    }

    fn repair_policies(&self) -> Vec<RepairPolicy> {
        use karpenter_core::api::ConditionStatus::{False, Unknown};
        let m = |n: u64| Duration::from_secs(n * 60);
        vec![
            RepairPolicy::new("Ready", False, m(30)),
            RepairPolicy::new("Ready", Unknown, m(30)),
            RepairPolicy::new("AcceleratedHardwareReady", False, m(10)),
            RepairPolicy::new("StorageReady", False, m(30)),
            RepairPolicy::new("NetworkingReady", False, m(30)),
            RepairPolicy::new("KernelReady", False, m(30)),
            RepairPolicy::new("ContainerRuntimeReady", False, m(30)),
        ]
    }

    fn name(&self) -> &str {
        "aws"
    }

    fn well_known_labels(&self) -> Vec<String> {
        crate::catalog::labels::WELL_KNOWN
            .iter()
            .map(|s| s.to_string())
            .collect()
    }

    fn restricted_label_domains(&self) -> Vec<String> {
        vec![GROUP.to_string()]
    }

    fn supported_node_classes(&self) -> Vec<NodeClassKind> {
        vec![NodeClassKind::new(GROUP, KIND)]
    }
}

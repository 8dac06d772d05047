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
//! - Reservations: the class's `status.capacityReservations` become reserved offerings
//!   (module `reserved`), with the instances left from the availability the node-class resolver
//!   syncs.
//! - Create: the class must be `Ready`; the capacity type is `reserved`, then `spot`, when the
//!   claim allows it and such an offering is usable, else `on-demand` (upstream's order). A
//!   reserved launch uses one launch template per reservation (targeting it) and one kind of
//!   reservation ([`crate::reservation::pick_for_launch`]); its capacity errors mark the
//!   reservation empty rather than the offering unavailable. Otherwise one launch template per AMI
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
/// How long a launch template is trusted to exist without a launch using it (upstream: a
/// minute; then it is deleted).
pub const LAUNCH_TEMPLATE_TTL: Duration = Duration::from_secs(60);
/// CreateFleet batching: a window closes after this long without a new identical request...
pub const FLEET_BATCH_IDLE: Duration = Duration::from_millis(35);
/// ...or this long after it opened.
pub const FLEET_BATCH_MAX: Duration = Duration::from_secs(1);
/// DescribeInstances / TerminateInstances batching: a window closes after this long without a
/// new request (upstream's 100 ms)...
pub const INSTANCE_BATCH_IDLE: Duration = Duration::from_millis(100);
/// ...or this long after it opened...
pub const INSTANCE_BATCH_MAX: Duration = Duration::from_secs(1);
/// ...or at this many instance ids.
pub const INSTANCE_BATCH_MAX_ITEMS: usize = 500;
/// The instance states Get and List consider alive.
pub const LIVE_STATES: &[&str] = &["pending", "running", "stopping", "stopped", "shutting-down"];
/// `topology.k8s.aws/zone-id`.
const ZONE_ID: &str = crate::catalog::labels::TOPOLOGY_ZONE_ID;
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
    /// DescribeInstances / TerminateInstances batching: the window closes after this long
    /// without a new request (default [`INSTANCE_BATCH_IDLE`], upstream's 100 ms; at most
    /// [`INSTANCE_BATCH_MAX`] or [`INSTANCE_BATCH_MAX_ITEMS`] ids).
    pub instance_batch_idle: Duration,
    /// How long a launch template is trusted to exist without a launch using it; then
    /// [`AwsCloudProvider::cleanup_launch_templates`] deletes it (default
    /// [`LAUNCH_TEMPLATE_TTL`], upstream's minute).
    pub launch_template_ttl: Duration,
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
            instance_batch_idle: INSTANCE_BATCH_IDLE,
            launch_template_ttl: LAUNCH_TEMPLATE_TTL,
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
    /// DeleteLaunchTemplate.
    pub delete_launch_template: AtomicU64,
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
            ("DeleteLaunchTemplate", g(&self.delete_launch_template)),
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
    placement_groups: Mutex<BTreeMap<String, (Instant, crate::placement::PlacementGroup)>>,
    reservations: crate::sdk::reservation::SharedAvailability,
    launch_template_lock: tokio::sync::Mutex<()>,
    fleet_batches: Arc<Mutex<HashMap<String, FleetBucket>>>,
    describe_batcher: batch::IdBatcher<ec2::Instance>,
    terminate_batcher: batch::IdBatcher<()>,
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

/// The mapping of an EC2 call's error onto a [`CloudProviderError`] (see [`other`]), for
/// `map_err` after `send().await`.
fn api_error<E>(
    context: &'static str,
) -> impl Fn(aws_sdk_ec2::error::SdkError<E>) -> CloudProviderError
where
    E: aws_sdk_ec2::error::ProvideErrorMetadata + std::error::Error + 'static,
{
    move |e| {
        let (c, m) = error_code(&e);
        other(context, &c, &m)
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
        let instance_idle = options.instance_batch_idle;
        Ok(AwsCloudProvider {
            clients,
            options,
            node_classes,
            prices: Mutex::new(prices),
            ec2_data: tokio::sync::Mutex::new(None),
            types: Mutex::new(BTreeMap::new()),
            unavailable: Mutex::new(UnavailableOfferings::new()),
            launch_templates: Mutex::new(BTreeMap::new()),
            placement_groups: Mutex::new(BTreeMap::new()),
            reservations: crate::sdk::reservation::shared_availability(),
            launch_template_lock: tokio::sync::Mutex::new(()),
            fleet_batches: Arc::new(Mutex::new(HashMap::new())),
            describe_batcher: batch::IdBatcher::new(
                instance_idle,
                INSTANCE_BATCH_MAX,
                INSTANCE_BATCH_MAX_ITEMS,
            ),
            terminate_batcher: batch::IdBatcher::new(
                instance_idle,
                INSTANCE_BATCH_MAX,
                INSTANCE_BATCH_MAX_ITEMS,
            ),
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

    /// An IPv6 cluster: its service CIDR is IPv6 (upstream's IP family).
    fn ipv6(&self) -> bool {
        self.options
            .cluster_cidr
            .as_deref()
            .is_some_and(|c| c.contains(':'))
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
}

mod batch;
mod fleet;
mod housekeeping;
mod instances;
mod placement;
mod reserved;
mod types;

pub(crate) use fleet::launch_template_data;
pub use housekeeping::{LAUNCH_TEMPLATE_PREFIX, PRICE_REFRESH_INTERVAL};
pub use placement::PLACEMENT_GROUP_TTL;

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
        // The zone-id requirement is checked per offering here (the type lists the ids of
        // all its zones).
        let zone_ids = types::zone_ids(&class);
        let zone_id_requirement = requirements.get(ZONE_ID);
        let usable = |o: &karpenter_core::model::Offering| {
            o.available
                && requirements.is_compatible(o.requirements(), Some(&policy))
                && zone_id_requirement
                    .is_none_or(|r| zone_ids.get(o.zone()).is_some_and(|id| r.has(id)))
        };
        let has = |ct: &str| {
            candidates.iter().any(|it| {
                it.offerings
                    .iter()
                    .any(|o| o.capacity_type() == ct && usable(o))
            })
        };
        let capacity_type = if has("reserved") {
            "reserved"
        } else if has("spot") {
            "spot"
        } else {
            "on-demand"
        };
        let reserved = capacity_type == "reserved";
        let mut offerings: Vec<Offering> = if reserved {
            reserved::launch_offerings(&candidates, usable)
        } else {
            candidates
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
                            reservation_id: None,
                        })
                })
                .collect()
        };
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
        let placement_group = self.placement_group(&class).await?;
        let placement = placement_group
            .as_ref()
            .map(|g| crate::launch::template::Placement {
                group_id: g.id.clone(),
                partition_number: g.partition_for(&requirements),
            });
        // A NodeClaim that requests EFA gets one template per EFA count: each interface is
        // created on its own network card (upstream's grouping).
        let wants_efa = requests.contains_key(crate::catalog::resources::EFA);
        let mut templates = Vec::new();
        for (image_id, instance_types) in by_ami {
            let mut by_efa: BTreeMap<i64, Vec<String>> = BTreeMap::new();
            for t in instance_types {
                let efa = if wants_efa {
                    types.iter().find(|it| it.name() == t).map_or(0, |it| {
                        it.capacity()
                            .get_or_zero(crate::catalog::resources::EFA)
                            .value()
                    })
                } else {
                    0
                };
                by_efa.entry(efa).or_default().push(t);
            }
            for (efa_count, instance_types) in by_efa {
                // A reserved launch: one template per reservation, targeting it.
                let targets = if reserved {
                    reserved::targets(&offerings, &instance_types, &class)
                        .into_iter()
                        .map(|(t, types)| (Some(t), types))
                        .collect()
                } else {
                    vec![(None, instance_types)]
                };
                for (reservation, instance_types) in targets {
                    let reservation_id = reservation.as_ref().map(|r| r.id.clone());
                    let params = crate::launch::template::TemplateParams {
                        image_id: image_id.clone(),
                        tags: tags.clone(),
                        efa_count,
                        placement: placement.clone(),
                        reservation,
                        ..Default::default()
                    };
                    let name = self
                        .ensure_launch_template(&class, node_claim, params)
                        .await?;
                    templates.push(TemplateRef {
                        name,
                        image_id: image_id.clone(),
                        instance_types,
                        reservation_id,
                    });
                }
            }
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
            reserved_target_capacity_type: reserved
                .then(|| reserved::target_capacity_type(&offerings, &class)),
            offerings: offerings.clone(),
            zonal_subnets,
            tags,
            context: class.spec.context.clone(),
            price_overlay: false,
        };
        let request = launch::build_fleet_request(&input)
            .map_err(|e| CloudProviderError::insufficient_capacity(Vec::new(), e.to_string()))?;
        let mut decision = match self.create_fleet(request).await {
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
        if reserved {
            self.reservations_failed(&mut decision, &offerings);
        }
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
        let reservation_id = reserved::reservation_of(&offerings, &fi.instance_type, &fi.zone);
        let offering = it
            .offerings
            .iter()
            .find(|o| {
                o.zone() == fi.zone
                    && o.capacity_type() == capacity_type
                    && o.reservation_id() == reservation_id
            })
            .ok_or_else(|| {
                CloudProviderError::other(format!(
                    "CreateFleet launched {} in {} which was not requested",
                    fi.instance_type, fi.zone
                ))
            })?;
        if let Some(id) = reservation_id {
            self.reservation_launched(id);
        }
        let mut launched = node_claim.clone();
        launched.metadata.labels = launch_labels(
            it,
            offering,
            &requirements,
            &node_claim.metadata.labels,
            Some(crate::reservation::CAPACITY_RESERVATION_ID),
        );
        match zone_ids.get(&fi.zone) {
            Some(id) => launched.metadata.labels.insert(ZONE_ID.into(), id.clone()),
            None => launched.metadata.labels.remove(ZONE_ID),
        };
        if let (Some(g), Some(p)) = (&placement_group, &placement) {
            let labels = &mut launched.metadata.labels;
            labels.insert(crate::placement::PLACEMENT_GROUP_ID.into(), g.id.clone());
            labels.remove(crate::placement::PLACEMENT_GROUP_PARTITION);
            if let Some(n) = p.partition_number {
                labels.insert(
                    crate::placement::PLACEMENT_GROUP_PARTITION.into(),
                    n.to_string(),
                );
            }
        }
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
        let instance = match self.describe_instance(&id).await {
            Err(e) if e.is_not_found() => {
                self.reservation_terminated(node_claim);
                return Err(e);
            }
            r => r?,
        };
        if instance.state().and_then(|s| s.name()) == Some(&ec2::InstanceStateName::ShuttingDown) {
            return Ok(());
        }
        match self.terminate_instance(&id).await {
            Err(e) if e.is_not_found() => {
                self.reservation_terminated(node_claim);
                Err(CloudProviderError::not_found(provider_id))
            }
            r => r,
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
                .map_err(api_error("DescribeInstances"))?;
            for r in page.reservations() {
                for i in r.instances() {
                    // The class and cluster tags are checked here too: some EC2 emulations
                    // keep only the last of two `tag-key` filters, or ignore tag filters whose
                    // key has a colon.
                    let tags = convert::tags(i.tags());
                    if tags.contains_key(launch::NODECLASS_TAG)
                        && tags.get(launch::CLUSTER_NAME_TAG) == Some(&self.options.cluster_name)
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
        // A class the node-class loop has not resolved yet is not ready (rather than a pool
        // without instance types): the operator asks again soon instead of at the next
        // refresh, minutes later.
        match self.class(name).filter(|c| !c.status.is_empty()) {
            Some(class) => self.instance_types_for_class(&class).await,
            None => Err(CloudProviderError::node_class_not_ready(format!(
                "EC2NodeClass {name} is not resolved yet"
            ))),
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
            .chain([
                &ZONE_ID,
                &crate::placement::PLACEMENT_GROUP_ID,
                &crate::placement::PLACEMENT_GROUP_PARTITION,
                &crate::reservation::CAPACITY_RESERVATION_ID,
                &crate::reservation::CAPACITY_RESERVATION_TYPE,
                &crate::reservation::CAPACITY_RESERVATION_INTERRUPTIBLE,
            ])
            .map(|s| s.to_string())
            .collect()
    }

    fn reservation_id_label(&self) -> Option<&str> {
        Some(crate::reservation::CAPACITY_RESERVATION_ID)
    }

    fn restricted_label_domains(&self) -> Vec<String> {
        vec![GROUP.to_string()]
    }

    fn supported_node_classes(&self) -> Vec<NodeClassKind> {
        vec![NodeClassKind::new(GROUP, KIND)]
    }
}

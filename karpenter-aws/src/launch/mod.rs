//! The launch path as data: launch tags, the provider ID, launch-template names from a hash of
//! their content, the block devices of a launch template (the AMI family's defaults unless the
//! class lists its own), the CreateFleet request, and what a CreateFleet result (or API error) means:
//! which offerings become unavailable for three minutes and what the NodeClaim's launch
//! outcome is. [`registered`]: the tags written once the node has registered.
//!
//! The SDK shell translates [`FleetRequest`] into `aws_sdk_ec2` builders field for field, and
//! the CreateFleet output into [`FleetInstance`]s and [`FleetError`]s for [`handle_fleet_result`].

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::nodeclass::hash::{canonical, fnv1a64};

mod devices;
pub mod registered;
pub mod template;
pub use devices::{
    DEFAULT_VOLUME_TYPE, block_device_mappings, default_block_device_mappings, volume_size_gib,
};

/// `karpenter.sh/nodepool`.
pub const NODEPOOL_TAG: &str = "karpenter.sh/nodepool";
/// `karpenter.sh/nodeclaim` (written by the tagging controller once the node is known).
pub const NODECLAIM_TAG: &str = "karpenter.sh/nodeclaim";
/// `eks:eks-cluster-name`.
pub const CLUSTER_NAME_TAG: &str = "eks:eks-cluster-name";
/// `karpenter.k8s.aws/ec2nodeclass`.
pub const NODECLASS_TAG: &str = "karpenter.k8s.aws/ec2nodeclass";
/// The prefix of launch-template names.
pub const LAUNCH_TEMPLATE_NAME_PREFIX: &str = "karpenter.k8s.aws/";
/// At most this many instance types per CreateFleet request.
pub const MAX_INSTANCE_TYPES: usize = 60;

/// The capacity-fulfilment error codes that mark an offering unavailable.
pub const UNFULFILLABLE_CAPACITY_CODES: &[&str] = &[
    "InsufficientInstanceCapacity",
    "MaxSpotInstanceCountExceeded",
    "VcpuLimitExceeded",
    "UnfulfillableCapacity",
    "Unsupported",
    "InsufficientFreeAddressesInSubnet",
    "MaxFleetCountExceeded",
    "ReservationCapacityExceeded",
];
/// The error code after which all of spot is unavailable.
pub const SPOT_SLR_CODE: &str = "AuthFailure.ServiceLinkedRoleCreationNotPermitted";

/// The tags of everything launched for a NodeClaim: the class's tags overlaid with
/// `kubernetes.io/cluster/{cluster}=owned`, `karpenter.sh/nodepool`, `eks:eks-cluster-name` and
/// `karpenter.k8s.aws/ec2nodeclass`.
pub fn launch_tags(
    class_tags: &BTreeMap<String, String>,
    cluster: &str,
    nodepool: &str,
    nodeclass: &str,
) -> BTreeMap<String, String> {
    let mut tags = class_tags.clone();
    tags.insert(format!("kubernetes.io/cluster/{cluster}"), "owned".into());
    tags.insert(NODEPOOL_TAG.into(), nodepool.into());
    tags.insert(CLUSTER_NAME_TAG.into(), cluster.into());
    tags.insert(NODECLASS_TAG.into(), nodeclass.into());
    tags
}

/// `aws:///<zone>/<instance-id>`.
pub fn provider_id(zone: &str, instance_id: &str) -> String {
    format!("aws:///{zone}/{instance_id}")
}

/// The instance id of a provider ID (`scheme:///zone/id`), or `None` when malformed.
pub fn parse_provider_id(provider_id: &str) -> Option<&str> {
    let (_, rest) = provider_id.split_once(":///")?;
    let (_, id) = rest.rsplit_once('/')?;
    (!id.is_empty()).then_some(id)
}

/// The name of a launch template: `karpenter.k8s.aws/<hash>` of its content (any serialisable
/// description of the launch-template data; equal content gives equal names, so templates are
/// reused across NodeClaims and recreated when the content changes).
pub fn launch_template_name<T: Serialize>(content: &T) -> String {
    let v = serde_json::to_value(content).unwrap_or(serde_json::Value::Null);
    format!(
        "{LAUNCH_TEMPLATE_NAME_PREFIX}{}",
        fnv1a64(canonical(&v).as_bytes())
    )
}

/// A launchable offering (already filtered: available, compatible with the NodeClaim).
#[derive(Debug, Clone, PartialEq)]
pub struct Offering {
    /// The instance type.
    pub instance_type: String,
    /// The zone.
    pub zone: String,
    /// `on-demand`, `spot` or `reserved`.
    pub capacity_type: String,
    /// USD per hour.
    pub price: f64,
    /// The capacity reservation of a `reserved` offering.
    pub reservation_id: Option<String>,
}

/// A resolved launch template and the instance types it serves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TemplateRef {
    /// The template name.
    pub name: String,
    /// The AMI baked into it.
    pub image_id: String,
    /// The instance types it serves.
    pub instance_types: Vec<String>,
    /// The capacity reservation the template launches into: it then serves only that
    /// reservation's offerings (upstream: one template per reservation).
    pub reservation_id: Option<String>,
}

/// Everything CreateFleet is built from.
#[derive(Debug, Clone, PartialEq)]
pub struct FleetInput {
    /// The chosen capacity type (`on-demand`, `spot`, `reserved`).
    pub capacity_type: String,
    /// The launch templates.
    pub templates: Vec<TemplateRef>,
    /// Available offerings of the chosen capacity type.
    pub offerings: Vec<Offering>,
    /// The subnet chosen per zone.
    pub zonal_subnets: BTreeMap<String, String>,
    /// The launch tags.
    pub tags: BTreeMap<String, String>,
    /// `spec.context`.
    pub context: Option<String>,
    /// Whether the NodeClaim carries the price-overlay annotation (prioritized strategies).
    pub price_overlay: bool,
    /// For a `reserved` launch: `DefaultTargetCapacityType` by the reservations' kind
    /// ([`crate::reservation::target_capacity_type`]); `on-demand` when unset.
    pub reserved_target_capacity_type: Option<String>,
}

/// One `Overrides[]` entry.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct FleetOverride {
    /// `InstanceType`.
    pub instance_type: String,
    /// `SubnetId`.
    pub subnet_id: String,
    /// `ImageId`.
    pub image_id: String,
    /// `AvailabilityZone` (lets errors be attributed).
    pub availability_zone: String,
    /// `Priority` = the offering price.
    pub priority: f64,
}

/// One `LaunchTemplateConfigs[]` entry.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct LaunchTemplateConfig {
    /// `LaunchTemplateSpecification.LaunchTemplateName`.
    pub launch_template_name: String,
    /// `LaunchTemplateSpecification.Version` (`$Latest`).
    pub version: String,
    /// `Overrides`.
    pub overrides: Vec<FleetOverride>,
}

/// A CreateFleet request (`Type=instant`).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct FleetRequest {
    /// `Type`: `instant`.
    pub r#type: String,
    /// `TargetCapacitySpecification.DefaultTargetCapacityType`.
    pub default_target_capacity_type: String,
    /// `TargetCapacitySpecification.TotalTargetCapacity` (1; a batcher raises it).
    pub total_target_capacity: i32,
    /// `SpotOptions.AllocationStrategy`.
    pub spot_allocation_strategy: Option<String>,
    /// `OnDemandOptions.AllocationStrategy`.
    pub on_demand_allocation_strategy: Option<String>,
    /// `Context`.
    pub context: Option<String>,
    /// `TagSpecifications`: resource type → tags (`instance`, `volume`, `fleet`).
    pub tag_specifications: BTreeMap<String, BTreeMap<String, String>>,
    /// `LaunchTemplateConfigs`.
    pub launch_template_configs: Vec<LaunchTemplateConfig>,
}

/// Why no request can be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FleetBuildError {
    /// No template has an offering in a zone with a subnet.
    #[error("no capacity offerings are currently available given the constraints")]
    NoOfferings,
}

/// Builds the CreateFleet request: spot uses `price-capacity-optimized` (or
/// `capacity-optimized-prioritized` with a price overlay), on-demand and reserved
/// `lowest-price` (or `prioritized`); a reserved launch targets
/// [`FleetInput::reserved_target_capacity_type`]; tags on instance, volume and fleet; one
/// config per template with one override per (type, zone) offering whose zone has a subnet
/// (a reservation's template: that reservation's offerings only), at most
/// [`MAX_INSTANCE_TYPES`] types (cheapest first); configs without overrides are dropped.
pub fn build_fleet_request(input: &FleetInput) -> Result<FleetRequest, FleetBuildError> {
    let spot = input.capacity_type == "spot";
    // The cheapest MAX_INSTANCE_TYPES types overall.
    let mut cheapest: BTreeMap<&str, f64> = BTreeMap::new();
    for o in &input.offerings {
        let e = cheapest.entry(&o.instance_type).or_insert(f64::INFINITY);
        *e = e.min(o.price);
    }
    let mut ranked: Vec<(&str, f64)> = cheapest.into_iter().collect();
    ranked.sort_by(|a, b| a.1.total_cmp(&b.1).then_with(|| a.0.cmp(b.0)));
    let keep: BTreeSet<&str> = ranked
        .iter()
        .take(MAX_INSTANCE_TYPES)
        .map(|(n, _)| *n)
        .collect();

    let mut configs = Vec::new();
    for t in &input.templates {
        let mut seen = BTreeSet::new();
        let mut overrides = Vec::new();
        for o in &input.offerings {
            if !keep.contains(o.instance_type.as_str())
                || !t.instance_types.contains(&o.instance_type)
                || (t.reservation_id.is_some() && t.reservation_id != o.reservation_id)
            {
                continue;
            }
            let Some(subnet) = input.zonal_subnets.get(&o.zone) else {
                continue;
            };
            if !seen.insert((o.instance_type.clone(), o.zone.clone())) {
                continue;
            }
            overrides.push(FleetOverride {
                instance_type: o.instance_type.clone(),
                subnet_id: subnet.clone(),
                image_id: t.image_id.clone(),
                availability_zone: o.zone.clone(),
                priority: o.price,
            });
        }
        if !overrides.is_empty() {
            configs.push(LaunchTemplateConfig {
                launch_template_name: t.name.clone(),
                version: "$Latest".into(),
                overrides,
            });
        }
    }
    if configs.is_empty() {
        return Err(FleetBuildError::NoOfferings);
    }
    let tags: BTreeMap<String, BTreeMap<String, String>> = ["instance", "volume", "fleet"]
        .into_iter()
        .map(|r| (r.to_string(), input.tags.clone()))
        .collect();
    Ok(FleetRequest {
        r#type: "instant".into(),
        default_target_capacity_type: if spot {
            "spot".to_string()
        } else if input.capacity_type == "reserved" {
            input
                .reserved_target_capacity_type
                .clone()
                .unwrap_or_else(|| "on-demand".to_string())
        } else {
            "on-demand".to_string()
        },
        total_target_capacity: 1,
        spot_allocation_strategy: spot.then(|| {
            if input.price_overlay {
                "capacity-optimized-prioritized"
            } else {
                "price-capacity-optimized"
            }
            .to_string()
        }),
        on_demand_allocation_strategy: (!spot).then(|| {
            if input.price_overlay {
                "prioritized"
            } else {
                "lowest-price"
            }
            .to_string()
        }),
        context: input.context.clone(),
        tag_specifications: tags,
        launch_template_configs: configs,
    })
}

/// One `Errors[]` entry of a CreateFleet output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FleetError {
    /// `ErrorCode`.
    pub code: String,
    /// `ErrorMessage`.
    pub message: String,
    /// `LaunchTemplateAndOverrides.Overrides.InstanceType`.
    pub instance_type: Option<String>,
    /// `...Overrides.AvailabilityZone`.
    pub zone: Option<String>,
    /// `...Overrides.SubnetId`.
    pub subnet_id: Option<String>,
}

/// One launched instance of a CreateFleet output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FleetInstance {
    /// The instance id.
    pub instance_id: String,
    /// The instance type.
    pub instance_type: String,
    /// The zone of the echoed override.
    pub zone: String,
    /// The subnet of the echoed override.
    pub subnet_id: String,
    /// The AMI of the echoed override.
    pub image_id: String,
}

/// An offering marked unavailable.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct OfferingKey {
    /// `on-demand`, `spot`.
    pub capacity_type: String,
    /// The instance type.
    pub instance_type: String,
    /// The zone.
    pub zone: String,
}

/// The launch outcome of a NodeClaim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LaunchOutcome {
    /// An instance was launched.
    Launched(FleetInstance),
    /// Every error was a capacity error: core's `InsufficientCapacityError`.
    InsufficientCapacity(String),
    /// Core's `CreateError{reason, message}` (the NodeClaim's Launched condition).
    Create {
        /// The reason.
        reason: String,
        /// The message.
        message: String,
    },
}

/// What a CreateFleet result means.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FleetDecision {
    /// The outcome.
    pub outcome: LaunchOutcome,
    /// Offerings to mark unavailable for three minutes.
    pub unavailable_offerings: Vec<OfferingKey>,
    /// Capacity types to mark unavailable (`spot` after the service-linked-role error).
    pub unavailable_capacity_types: Vec<String>,
    /// Subnets to mark unavailable (no free addresses).
    pub unavailable_subnets: Vec<String>,
    /// `karpenter_cloudprovider_instance_launch_failures_total` increments: (zone,
    /// capacity_type, reason).
    pub launch_failures: Vec<(String, String, String)>,
}

/// Upstream's reason for an EC2 error code (and message), used for `CreateError` and the
/// launch-failure metric.
pub fn error_reason(code: &str, message: &str) -> &'static str {
    let m = message.to_ascii_lowercase();
    match code {
        "UnauthorizedOperation" | "AccessDenied" | "AccessDeniedException" => "Unauthorized",
        "InvalidParameter" if m.contains("different networks") => "SecurityGroupSubnetVPCMismatch",
        "InvalidParameterValue" if m.contains("iam instance profile") => {
            "InstanceProfileNameInvalid"
        }
        "InvalidLaunchTemplateName.NotFoundException" | "InvalidLaunchTemplateId.NotFound" => {
            "LaunchTemplateNotFound"
        }
        "InvalidUserData.Malformed" | "InvalidParameterValue" if m.contains("user data") => {
            "UserDataSizeLimitExceeded"
        }
        "InvalidAMIID.Malformed" => "InvalidAMIID",
        "InvalidAMIID.NotFound" | "InvalidAMIID.Unavailable" => "AMINotFound",
        "RequestLimitExceeded" | "Throttling" => "RequestLimitExceeded",
        "InternalError" | "InternalFailure" | "ServiceUnavailable" => "InternalError",
        "InvalidParameterCombination" if m.contains("free tier") => "FreeTierIneligible",
        "MaxFleetCountExceeded" | "FleetQuotaExceeded" => "FleetQuotaExceeded",
        "PendingVerification" => "AccountPendingVerification",
        "MaxSpotInstanceCountExceeded" => "SpotQuotaExceeded",
        "VcpuLimitExceeded" => "VCPULimitExceeded",
        "InsufficientFreeAddressesInSubnet" => "InsufficientFreeAddressesInSubnet",
        SPOT_SLR_CODE => "SpotSLRCreationFailed",
        "AuthFailure" if m.contains("ami") => "AMIAuthorizationFailure",
        "InsufficientInstanceCapacity" | "UnfulfillableCapacity" => "InsufficientCapacity",
        _ => "LaunchFailed",
    }
}

/// The outcome of a CreateFleet call that failed as a whole (an API error, not `Errors[]`).
pub fn handle_api_error(code: &str, message: &str) -> LaunchOutcome {
    LaunchOutcome::Create {
        reason: error_reason(code, message).into(),
        message: format!("{code}: {message}"),
    }
}

/// Decides what a CreateFleet output means for a non-reserved launch of `capacity_type`:
/// every capacity error ([`UNFULFILLABLE_CAPACITY_CODES`]) marks its (capacity type, type,
/// zone) unavailable; [`SPOT_SLR_CODE`] marks all of spot unavailable;
/// `InsufficientFreeAddressesInSubnet` marks its subnet unavailable. The first instance wins;
/// with none, the outcome is `InsufficientCapacity` when every error was a capacity error (or
/// there were none), else `Create{LaunchFailed-or-reason}` with the unique `code: message`
/// strings joined.
pub fn handle_fleet_result(
    capacity_type: &str,
    instances: &[FleetInstance],
    errors: &[FleetError],
) -> FleetDecision {
    let mut d = FleetDecision {
        outcome: LaunchOutcome::InsufficientCapacity(
            "all requested instance types were unavailable during launch".into(),
        ),
        unavailable_offerings: Vec::new(),
        unavailable_capacity_types: Vec::new(),
        unavailable_subnets: Vec::new(),
        launch_failures: Vec::new(),
    };
    let mut all_capacity = true;
    let mut messages: Vec<String> = Vec::new();
    for e in errors {
        d.launch_failures.push((
            e.zone.clone().unwrap_or_default(),
            capacity_type.to_string(),
            error_reason(&e.code, &e.message).to_string(),
        ));
        let ice = UNFULFILLABLE_CAPACITY_CODES.contains(&e.code.as_str());
        if ice && let (Some(t), Some(z)) = (&e.instance_type, &e.zone) {
            let key = OfferingKey {
                capacity_type: capacity_type.to_string(),
                instance_type: t.clone(),
                zone: z.clone(),
            };
            if !d.unavailable_offerings.contains(&key) {
                d.unavailable_offerings.push(key);
            }
        }
        if e.code == "InsufficientFreeAddressesInSubnet"
            && let Some(s) = &e.subnet_id
            && !d.unavailable_subnets.contains(s)
        {
            d.unavailable_subnets.push(s.clone());
        }
        if e.code == SPOT_SLR_CODE && !d.unavailable_capacity_types.iter().any(|c| c == "spot") {
            d.unavailable_capacity_types.push("spot".into());
        }
        if !ice && e.code != SPOT_SLR_CODE {
            all_capacity = false;
        }
        let m = format!("{}: {}", e.code, e.message);
        if !messages.contains(&m) {
            messages.push(m);
        }
    }
    if let Some(first) = instances.first() {
        d.outcome = LaunchOutcome::Launched(first.clone());
    } else if !all_capacity {
        let reason = errors
            .iter()
            .find(|e| {
                !UNFULFILLABLE_CAPACITY_CODES.contains(&e.code.as_str()) && e.code != SPOT_SLR_CODE
            })
            .map(|e| error_reason(&e.code, &e.message))
            .unwrap_or("LaunchFailed");
        d.outcome = LaunchOutcome::Create {
            reason: reason.into(),
            message: messages.join("; "),
        };
    }
    d
}

/// The unavailable-offerings cache: offerings, whole capacity types and subnets marked
/// unavailable for a TTL (three minutes, upstream's `UnavailableOfferingsTTL`), with the clock
/// injected (`now` in every call). A per-type sequence number changes on every insert and
/// expiry, so derived caches know when to rebuild.
#[derive(Debug, Clone, Default)]
pub struct UnavailableOfferings {
    ttl: std::time::Duration,
    offerings: BTreeMap<OfferingKey, jiff::Timestamp>,
    capacity_types: BTreeMap<String, jiff::Timestamp>,
    subnets: BTreeMap<String, jiff::Timestamp>,
    seq: BTreeMap<String, u64>,
    global_seq: u64,
}

/// Upstream's unavailable-offerings TTL.
pub const UNAVAILABLE_OFFERINGS_TTL: std::time::Duration = std::time::Duration::from_secs(180);

impl UnavailableOfferings {
    /// An empty cache with upstream's TTL.
    pub fn new() -> Self {
        Self::with_ttl(UNAVAILABLE_OFFERINGS_TTL)
    }

    /// An empty cache with `ttl`.
    pub fn with_ttl(ttl: std::time::Duration) -> Self {
        UnavailableOfferings {
            ttl,
            ..Default::default()
        }
    }

    fn expiry(&self, now: jiff::Timestamp) -> jiff::Timestamp {
        let span = jiff::SignedDuration::try_from(self.ttl).unwrap_or(jiff::SignedDuration::MAX);
        now.checked_add(span).unwrap_or(jiff::Timestamp::MAX)
    }

    /// Marks an offering unavailable until `now + ttl`.
    pub fn mark_offering(&mut self, key: OfferingKey, now: jiff::Timestamp) {
        *self.seq.entry(key.instance_type.clone()).or_default() += 1;
        let until = self.expiry(now);
        self.offerings.insert(key, until);
    }

    /// Marks a whole capacity type unavailable.
    pub fn mark_capacity_type(&mut self, capacity_type: &str, now: jiff::Timestamp) {
        self.global_seq += 1;
        let until = self.expiry(now);
        self.capacity_types.insert(capacity_type.to_string(), until);
    }

    /// Marks a subnet unavailable.
    pub fn mark_subnet(&mut self, subnet_id: &str, now: jiff::Timestamp) {
        self.global_seq += 1;
        let until = self.expiry(now);
        self.subnets.insert(subnet_id.to_string(), until);
    }

    /// Applies a [`FleetDecision`].
    pub fn apply(&mut self, d: &FleetDecision, now: jiff::Timestamp) {
        for k in &d.unavailable_offerings {
            self.mark_offering(k.clone(), now);
        }
        for c in &d.unavailable_capacity_types {
            self.mark_capacity_type(c, now);
        }
        for s in &d.unavailable_subnets {
            self.mark_subnet(s, now);
        }
    }

    /// Drops expired entries (bumping sequence numbers as upstream's eviction does).
    pub fn expire(&mut self, now: jiff::Timestamp) {
        let mut bumped = Vec::new();
        self.offerings.retain(|k, until| {
            let keep = *until > now;
            if !keep {
                bumped.push(k.instance_type.clone());
            }
            keep
        });
        for t in bumped {
            *self.seq.entry(t).or_default() += 1;
        }
        let before = self.capacity_types.len() + self.subnets.len();
        self.capacity_types.retain(|_, until| *until > now);
        self.subnets.retain(|_, until| *until > now);
        if self.capacity_types.len() + self.subnets.len() != before {
            self.global_seq += 1;
        }
    }

    /// Whether the offering is unavailable at `now` (itself, its capacity type, or — when
    /// `zone_subnets` are given — every subnet of its zone).
    pub fn is_unavailable(
        &self,
        capacity_type: &str,
        instance_type: &str,
        zone: &str,
        zone_subnets: &[String],
        now: jiff::Timestamp,
    ) -> bool {
        let live = |until: Option<&jiff::Timestamp>| until.is_some_and(|u| *u > now);
        let key = OfferingKey {
            capacity_type: capacity_type.into(),
            instance_type: instance_type.into(),
            zone: zone.into(),
        };
        live(self.offerings.get(&key))
            || live(self.capacity_types.get(capacity_type))
            || (!zone_subnets.is_empty() && zone_subnets.iter().all(|s| live(self.subnets.get(s))))
    }

    /// The offerings still available at `now` (the next scheduling round's view after an
    /// insufficient-capacity error).
    pub fn available<'a>(
        &self,
        offerings: &'a [Offering],
        now: jiff::Timestamp,
    ) -> Vec<&'a Offering> {
        offerings
            .iter()
            .filter(|o| !self.is_unavailable(&o.capacity_type, &o.instance_type, &o.zone, &[], now))
            .collect()
    }

    /// Whether nothing is marked unavailable (expired entries count until
    /// [`expire`](Self::expire) drops them).
    pub fn is_empty(&self) -> bool {
        self.offerings.is_empty() && self.capacity_types.is_empty() && self.subnets.is_empty()
    }

    /// The sequence number of an instance type (changes on insert and expiry) combined with
    /// the global one.
    pub fn seq_num(&self, instance_type: &str) -> (u64, u64) {
        (
            self.seq.get(instance_type).copied().unwrap_or(0),
            self.global_seq,
        )
    }
}

#[cfg(test)]
mod tests;

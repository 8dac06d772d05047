//! `EC2NodeClass` (`karpenter.k8s.aws/v1`): the AWS settings a NodePool launches nodes with.
//!
//! - The serde types accept upstream's YAML unchanged: every field of the v1 CRD is typed, so
//!   decoding and encoding again gives the same document. Unknown fields are rejected (what
//!   `kubectl apply` does with server-side strict field validation), except inside `kubelet`,
//!   which upstream keeps as an open map (any `KubeletConfiguration` field, see
//!   [`KubeletConfiguration::extra`]).
//! - [`EC2NodeClass::validate`] applies the CRD's schema and CEL rules (module [`validation`]).
//! - Defaults: the CRD's only default is `metadataOptions` ([`MetadataOptions::resolved`]:
//!   IMDSv2 required, hop limit 1); [`EC2NodeClassSpec::resolved_ami_family`] infers the AMI
//!   family from an alias.
//! - [`reconcile`] computes the status (resolved subnets, security groups, AMIs, instance profile
//!   and conditions) from what the AWS APIs returned; [`options`] turns the class into the
//!   catalog options that shape instance types; [`hash`] is the static hash drift compares.

pub mod hash;
pub mod options;
pub mod reconcile;
pub mod validation;

use std::collections::BTreeMap;

use karpenter_core::api::{Condition, ObjectMeta};
use karpenter_core::requirements::NodeSelectorRequirement;
use serde::{Deserialize, Serialize};

use crate::catalog::AmiFamily;

/// The API group and version: `karpenter.k8s.aws/v1`.
pub const API_VERSION: &str = "karpenter.k8s.aws/v1";
/// The kind: `EC2NodeClass`.
pub const KIND: &str = "EC2NodeClass";
/// The API group: `karpenter.k8s.aws`.
pub const GROUP: &str = "karpenter.k8s.aws";

/// An `EC2NodeClass` object.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "kube", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EC2NodeClass {
    /// `karpenter.k8s.aws/v1`.
    #[serde(default)]
    pub api_version: String,
    /// `EC2NodeClass`.
    #[serde(default)]
    pub kind: String,
    /// Object metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// The desired state.
    #[serde(default)]
    pub spec: EC2NodeClassSpec,
    /// The observed state, written by the node-class controller.
    #[serde(default, skip_serializing_if = "EC2NodeClassStatus::is_empty")]
    pub status: EC2NodeClassStatus,
}

impl EC2NodeClass {
    /// A class named `name` with `spec` and an empty status.
    pub fn new(name: impl Into<String>, spec: EC2NodeClassSpec) -> Self {
        EC2NodeClass {
            api_version: API_VERSION.to_string(),
            kind: KIND.to_string(),
            metadata: ObjectMeta::named(name),
            spec,
            status: EC2NodeClassStatus::default(),
        }
    }

    /// `metadata.name` (empty when unset).
    pub fn name(&self) -> &str {
        self.metadata.name_or_empty()
    }

    /// Decodes a class from JSON, naming the field a decoding error is about
    /// (`spec.kubelet.maxPods: invalid type: ...`).
    pub fn from_json_value(value: serde_json::Value) -> Result<Self, DecodeError> {
        serde_path_to_error::deserialize(value).map_err(|e| DecodeError {
            path: e.path().to_string(),
            message: e.into_inner().to_string(),
        })
    }
}

/// A document that is not an EC2NodeClass (wrong JSON types, unknown fields).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {message}")]
pub struct DecodeError {
    /// The field (`spec.kubelet.maxPods`; `.` for the whole object).
    pub path: String,
    /// What is wrong.
    pub message: String,
}

/// `EC2NodeClass.spec`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "kube", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EC2NodeClassSpec {
    /// Subnets to launch into (terms ORed; required, 1..30).
    #[serde(default)]
    pub subnet_selector_terms: Vec<SubnetSelectorTerm>,
    /// Security groups of the nodes (terms ORed; required, 1..30).
    #[serde(default)]
    pub security_group_selector_terms: Vec<SecurityGroupSelectorTerm>,
    /// On-demand capacity reservations to use (at most 30).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub capacity_reservation_selector_terms: Vec<CapacityReservationSelectorTerm>,
    /// The placement group to launch into.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement_group_selector: Option<PlacementGroupSelector>,
    /// Whether the primary network interface gets a public IPv4 address.
    #[serde(
        default,
        rename = "associatePublicIPAddress",
        skip_serializing_if = "Option::is_none"
    )]
    pub associate_public_ip_address: Option<bool>,
    /// IPv4 (or IPv6) prefixes per network interface.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ip_prefix_count: Option<i32>,
    /// The AMIs (terms ORed; required, 1..30).
    #[serde(default)]
    pub ami_selector_terms: Vec<AmiSelectorTerm>,
    /// `AL2`, `AL2023`, `Bottlerocket`, `Custom`, `Windows2019`, `Windows2022`, `Windows2025`;
    /// optional when an alias names the family.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ami_family: Option<String>,
    /// User data merged with the generated bootstrap (verbatim for `Custom`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_data: Option<String>,
    /// The IAM role of the nodes; Karpenter manages an instance profile for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    /// An existing instance profile, used as is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_profile: Option<String>,
    /// Tags on every resource launched for the class.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tags: BTreeMap<String, String>,
    /// kubelet settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubelet: Option<KubeletConfiguration>,
    /// Block devices of the launch template (at most 50).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub block_device_mappings: Vec<BlockDeviceMapping>,
    /// `RAID0`: combine the instance-store disks and use them for ephemeral storage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_store_policy: Option<String>,
    /// Explicit network interfaces.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub network_interfaces: Vec<NetworkInterface>,
    /// Detailed (1-minute) CloudWatch monitoring.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detailed_monitoring: Option<bool>,
    /// Instance metadata service options (see [`MetadataOptions::resolved`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata_options: Option<MetadataOptions>,
    /// Connection-tracking timeouts of the primary interface.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connection_tracking: Option<ConnectionTracking>,
    /// The CreateFleet `Context`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<String>,
    /// CPU options.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_options: Option<CpuOptions>,
}

impl EC2NodeClassSpec {
    /// The AMI family: `amiFamily` when set and known, else the family of the alias term, else
    /// `None` (an invalid class; [`EC2NodeClass::validate`] reports it).
    pub fn resolved_ami_family(&self) -> Option<AmiFamily> {
        if let Some(name) = &self.ami_family {
            return AmiFamily::from_name(name);
        }
        self.alias().and_then(|a| a.family)
    }

    /// The parsed alias of the first alias term.
    pub fn alias(&self) -> Option<Alias> {
        self.ami_selector_terms
            .iter()
            .find_map(|t| t.alias.as_deref())
            .map(Alias::parse)
    }

    /// The metadata options with the CRD defaults filled in.
    pub fn resolved_metadata_options(&self) -> ResolvedMetadataOptions {
        self.metadata_options.clone().unwrap_or_default().resolved()
    }
}

/// An `amiSelectorTerms[]` alias, `family@version` (`al2023@latest`, `bottlerocket@v1.20.3`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Alias {
    /// The family part (`al2023`).
    pub family_name: String,
    /// The family, when it is one of the six alias families.
    pub family: Option<AmiFamily>,
    /// The version part (`latest`, `v20240625`); empty when the alias has no `@`.
    pub version: String,
}

impl Alias {
    /// Splits an alias at its first `@`.
    pub fn parse(alias: &str) -> Alias {
        let (family_name, version) = alias.split_once('@').unwrap_or((alias, ""));
        let family = match family_name {
            "al2" => Some(AmiFamily::Al2),
            "al2023" => Some(AmiFamily::Al2023),
            "bottlerocket" => Some(AmiFamily::Bottlerocket),
            "windows2019" => Some(AmiFamily::Windows2019),
            "windows2022" => Some(AmiFamily::Windows2022),
            "windows2025" => Some(AmiFamily::Windows2025),
            _ => None,
        };
        Alias {
            family_name: family_name.to_string(),
            family,
            version: version.to_string(),
        }
    }

    /// Whether the version is `latest` (the AMI moves with each release).
    pub fn is_latest(&self) -> bool {
        self.version == "latest"
    }
}

/// `subnetSelectorTerms[]`: by id, or by tags.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "kube", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SubnetSelectorTerm {
    /// Tags the subnet must carry (`*` matches any value).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tags: BTreeMap<String, String>,
    /// The subnet id (`subnet-...`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
}

/// `securityGroupSelectorTerms[]`: by id, by group name, or by tags.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "kube", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SecurityGroupSelectorTerm {
    /// Tags the group must carry (`*` matches any value).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tags: BTreeMap<String, String>,
    /// The group id (`sg-...`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The group name (`GroupName`, not the `Name` tag).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// `capacityReservationSelectorTerms[]`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "kube", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CapacityReservationSelectorTerm {
    /// Tags the reservation must carry.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tags: BTreeMap<String, String>,
    /// The reservation id (`cr-...`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The owning account (12 digits).
    #[serde(default, rename = "ownerID", skip_serializing_if = "Option::is_none")]
    pub owner_id: Option<String>,
    /// `open` or `targeted`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_match_criteria: Option<String>,
}

/// `placementGroupSelector`: by name or by id.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "kube", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PlacementGroupSelector {
    /// The group name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The group id (`pg-...`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
}

/// `amiSelectorTerms[]`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "kube", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AmiSelectorTerm {
    /// `family@version` (must be the only term).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alias: Option<String>,
    /// Tags the image must carry (`*` matches any value).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tags: BTreeMap<String, String>,
    /// The image id (`ami-...`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The image name (wildcards allowed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The owner (account id or alias such as `amazon`, `self`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// An SSM parameter (name or ARN) holding an image id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ssm_parameter: Option<String>,
}

/// `kubelet`: the typed settings Karpenter reads, plus any other `KubeletConfiguration` field
/// (passed through on AL2023 and Custom, rejected on the other families).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "kube", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct KubeletConfiguration {
    /// Cluster DNS server addresses.
    #[serde(default, rename = "clusterDNS", skip_serializing_if = "Vec::is_empty")]
    pub cluster_dns: Vec<String>,
    /// Pods per node (overrides the ENI formula).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_pods: Option<i64>,
    /// Pods per vCPU (not on Bottlerocket).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pods_per_core: Option<i64>,
    /// Resources reserved for the OS (`cpu`, `memory`, `ephemeral-storage`, `pid`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_reserved: Option<BTreeMap<String, String>>,
    /// Resources reserved for Kubernetes daemons (same keys); each replaces the computed value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kube_reserved: Option<BTreeMap<String, String>>,
    /// Hard eviction thresholds by signal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eviction_hard: Option<BTreeMap<String, String>>,
    /// Soft eviction thresholds by signal (each needs a grace period).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eviction_soft: Option<BTreeMap<String, String>>,
    /// Grace periods of the soft thresholds (each needs a threshold).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eviction_soft_grace_period: Option<BTreeMap<String, String>>,
    /// The longest pod grace period honoured during soft eviction (seconds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eviction_max_pod_grace_period: Option<i64>,
    /// Disk use (percent) that always triggers image garbage collection.
    #[serde(
        default,
        rename = "imageGCHighThresholdPercent",
        skip_serializing_if = "Option::is_none"
    )]
    pub image_gc_high_threshold_percent: Option<i64>,
    /// Disk use (percent) image garbage collection frees down to.
    #[serde(
        default,
        rename = "imageGCLowThresholdPercent",
        skip_serializing_if = "Option::is_none"
    )]
    pub image_gc_low_threshold_percent: Option<i64>,
    /// Whether CPU CFS quota is enforced for containers with CPU limits.
    #[serde(
        default,
        rename = "cpuCFSQuota",
        skip_serializing_if = "Option::is_none"
    )]
    pub cpu_cfs_quota: Option<bool>,
    /// Any other `KubeletConfiguration` field, kept as written.
    #[serde(flatten)]
    pub extra: BTreeMap<String, serde_json::Value>,
}

/// `blockDeviceMappings[]`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "kube", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BlockDeviceMapping {
    /// The device name (`/dev/xvda`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_name: Option<String>,
    /// The EBS volume.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ebs: Option<BlockDevice>,
    /// Whether this volume holds the kubelet root directory (at most one).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub root_volume: bool,
}

/// `blockDeviceMappings[].ebs`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "kube", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BlockDevice {
    /// Delete the volume with the instance.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delete_on_termination: Option<bool>,
    /// Encrypt the volume.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encrypted: Option<bool>,
    /// Provisioned IOPS.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iops: Option<i64>,
    /// The KMS key of the encryption.
    #[serde(default, rename = "kmsKeyID", skip_serializing_if = "Option::is_none")]
    pub kms_key_id: Option<String>,
    /// The snapshot to create the volume from.
    #[serde(
        default,
        rename = "snapshotID",
        skip_serializing_if = "Option::is_none"
    )]
    pub snapshot_id: Option<String>,
    /// Throughput in MiB/s (gp3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub throughput: Option<i64>,
    /// Snapshot initialization rate in MiB/s (100..300, needs `snapshotID`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_initialization_rate: Option<i64>,
    /// The size, a quantity (`100Gi`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_size: Option<String>,
    /// `standard`, `io1`, `io2`, `gp2`, `sc1`, `st1` or `gp3`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_type: Option<String>,
}

/// `networkInterfaces[]`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "kube", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NetworkInterface {
    /// The network card.
    #[serde(default)]
    pub network_card_index: i64,
    /// The device index on the card.
    #[serde(default)]
    pub device_index: i64,
    /// `interface` or `efa-only`.
    #[serde(default)]
    pub interface_type: String,
}

/// `metadataOptions` as written (unset fields take the CRD defaults, see [`Self::resolved`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "kube", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MetadataOptions {
    /// `enabled` or `disabled` (default `enabled`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_endpoint: Option<String>,
    /// `enabled` or `disabled` (default `disabled`).
    #[serde(
        default,
        rename = "httpProtocolIPv6",
        skip_serializing_if = "Option::is_none"
    )]
    pub http_protocol_ipv6: Option<String>,
    /// 1..64 (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_put_response_hop_limit: Option<i64>,
    /// `required` (IMDSv2, default) or `optional`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_tokens: Option<String>,
}

/// `metadataOptions` with the CRD defaults filled in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedMetadataOptions {
    /// `enabled` or `disabled`.
    pub http_endpoint: String,
    /// `enabled` or `disabled`.
    pub http_protocol_ipv6: String,
    /// 1..64.
    pub http_put_response_hop_limit: i64,
    /// `required` or `optional`.
    pub http_tokens: String,
}

impl MetadataOptions {
    /// The CRD defaults for unset fields: endpoint enabled, IPv6 disabled, hop limit 1, tokens
    /// required (IMDSv2).
    pub fn resolved(self) -> ResolvedMetadataOptions {
        ResolvedMetadataOptions {
            http_endpoint: self.http_endpoint.unwrap_or_else(|| "enabled".into()),
            http_protocol_ipv6: self.http_protocol_ipv6.unwrap_or_else(|| "disabled".into()),
            http_put_response_hop_limit: self.http_put_response_hop_limit.unwrap_or(1),
            http_tokens: self.http_tokens.unwrap_or_else(|| "required".into()),
        }
    }
}

/// `connectionTracking` timeouts in seconds.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "kube", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ConnectionTracking {
    /// 60..432000.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp_established_timeout: Option<i64>,
    /// 60..180.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub udp_stream_timeout: Option<i64>,
    /// 30..60.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub udp_timeout: Option<i64>,
}

/// `cpuOptions`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "kube", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CpuOptions {
    /// `enabled` or `disabled`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nested_virtualization: Option<String>,
}

/// `EC2NodeClass.status`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "kube", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct EC2NodeClassStatus {
    /// Resolved subnets, most available IPs first, then by id.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub subnets: Vec<StatusSubnet>,
    /// Resolved security groups, by id.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub security_groups: Vec<StatusSecurityGroup>,
    /// Resolved capacity reservations.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub capacity_reservations: Vec<StatusCapacityReservation>,
    /// Resolved AMIs, newest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub amis: Vec<StatusAmi>,
    /// The instance profile nodes launch with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_profile: Option<String>,
    /// Conditions; `Ready` is the root.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

impl EC2NodeClassStatus {
    /// Whether nothing is set.
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }

    /// The condition of `type_`.
    pub fn condition(&self, type_: &str) -> Option<&Condition> {
        self.conditions.iter().find(|c| c.type_ == type_)
    }
}

/// `status.subnets[]`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "kube", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct StatusSubnet {
    /// The subnet id.
    pub id: String,
    /// Its availability zone.
    pub zone: String,
    /// Its availability-zone id.
    #[serde(default, rename = "zoneID", skip_serializing_if = "Option::is_none")]
    pub zone_id: Option<String>,
}

/// `status.securityGroups[]`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "kube", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct StatusSecurityGroup {
    /// The group id.
    pub id: String,
    /// The group name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// `status.capacityReservations[]`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "kube", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct StatusCapacityReservation {
    /// The zone.
    pub availability_zone: String,
    /// When the reservation ends (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_time: Option<String>,
    /// The reservation id.
    pub id: String,
    /// `open` or `targeted`.
    #[serde(default)]
    pub instance_match_criteria: String,
    /// The instance type.
    pub instance_type: String,
    /// The owning account.
    #[serde(default, rename = "ownerID")]
    pub owner_id: String,
    /// `default` or `capacity-block`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reservation_type: Option<String>,
    /// Whether the reservation can be interrupted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interruptible: Option<bool>,
    /// `active` or `expiring`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
}

/// `status.amis[]`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "kube", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct StatusAmi {
    /// The image id.
    pub id: String,
    /// The image name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Whether the image is deprecated.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub deprecated: bool,
    /// The instance types the image serves (architecture, GPU/accelerator variant, OS).
    #[serde(default)]
    pub requirements: Vec<NodeSelectorRequirement>,
}

#[cfg(test)]
mod tests;

//! The launch-template data of a launch as plain data: what upstream's
//! `CreateLaunchTemplateInputBuilder` puts into `LaunchTemplateData`, decided from the
//! EC2NodeClass, the image, the user data and the launch's own parameters (EFA interfaces,
//! placement group, capacity reservation). The SDK shell translates [`TemplateData`] field for
//! field; its serialisation is also what names the template ([`super::launch_template_name`]),
//! so two launches share a template exactly when their data are equal.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::nodeclass::{BlockDeviceMapping, ConnectionTracking, EC2NodeClass};

/// What a launch adds to the class's launch-template settings.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TemplateParams {
    /// The AMI.
    pub image_id: String,
    /// The user data, base64 (`None` for the dry-run permission check).
    pub user_data: Option<String>,
    /// The launch tags (network interfaces and the template itself).
    pub tags: BTreeMap<String, String>,
    /// EFA interfaces to create, one per network card (the instance types' EFA count when the
    /// NodeClaim requests `vpc.amazonaws.com/efa`, else 0). The class's own
    /// `networkInterfaces` take precedence.
    pub efa_count: i64,
    /// An IPv6 cluster: prefixes are IPv6, the primary interface gets a primary IPv6 address.
    pub ipv6: bool,
    /// The placement group (and partition) to launch into.
    pub placement: Option<Placement>,
    /// The capacity reservation to launch into.
    pub reservation: Option<ReservationTarget>,
}

/// `Placement` of the launch template.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct Placement {
    /// `GroupId`.
    pub group_id: String,
    /// `PartitionNumber` (partition placement groups, when the NodeClaim pins one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub partition_number: Option<i32>,
}

/// A launch into a capacity reservation.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct ReservationTarget {
    /// `CapacityReservationTarget.CapacityReservationId`.
    pub id: String,
    /// `InstanceMarketOptions.MarketType`: `capacity-block` for capacity blocks,
    /// `interruptible-capacity-reservation` for interruptible reservations, else `None`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub market_type: Option<String>,
}

/// One `NetworkInterfaces[]` entry.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct InterfaceData {
    /// `NetworkCardIndex`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub network_card_index: Option<i32>,
    /// `DeviceIndex`.
    pub device_index: i32,
    /// `InterfaceType` (`interface`, `efa`, `efa-only`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interface_type: Option<String>,
    /// `Groups`: the status security groups.
    pub groups: Vec<String>,
    /// `AssociatePublicIpAddress`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub associate_public_ip_address: Option<bool>,
    /// `Ipv4PrefixCount`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ipv4_prefix_count: Option<i32>,
    /// `Ipv6PrefixCount`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ipv6_prefix_count: Option<i32>,
    /// `PrimaryIpv6`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub primary_ipv6: Option<bool>,
    /// `Ipv6AddressCount`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ipv6_address_count: Option<i32>,
    /// `ConnectionTrackingSpecification` (seconds).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub connection_tracking: Option<ConnectionTracking>,
}

/// `MetadataOptions`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct MetadataData {
    /// `HttpEndpoint`.
    pub http_endpoint: String,
    /// `HttpProtocolIpv6`.
    pub http_protocol_ipv6: String,
    /// `HttpPutResponseHopLimit`.
    pub http_put_response_hop_limit: i64,
    /// `HttpTokens`.
    pub http_tokens: String,
    /// `InstanceMetadataTags`: always `disabled`, as upstream (account defaults must not turn
    /// tags in the metadata on: Karpenter's tag keys are not valid there).
    pub instance_metadata_tags: String,
}

/// `LaunchTemplateData` and the template's resource tags.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct TemplateData {
    /// `ImageId`.
    pub image_id: String,
    /// `UserData` (base64).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user_data: Option<String>,
    /// `IamInstanceProfile.Name`: the status instance profile.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub instance_profile: Option<String>,
    /// `Monitoring.Enabled`: `detailedMonitoring`.
    pub monitoring: bool,
    /// `MetadataOptions`: `metadataOptions` with the CRD defaults.
    pub metadata_options: MetadataData,
    /// `BlockDeviceMappings`: the class's, else the AMI family's defaults.
    pub block_device_mappings: Vec<BlockDeviceMapping>,
    /// `NetworkInterfaces` (always set, so the security groups live on the interfaces).
    pub network_interfaces: Vec<InterfaceData>,
    /// `CpuOptions.NestedVirtualization`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nested_virtualization: Option<String>,
    /// `Placement`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub placement: Option<Placement>,
    /// `CapacityReservationSpecification` (`capacity-reservations-only` with the target) and
    /// `InstanceMarketOptions`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reservation: Option<ReservationTarget>,
    /// `TagSpecifications` (network-interface) and the template's own tags.
    pub tags: BTreeMap<String, String>,
}

/// The launch-template data of `class` for a launch with `params`, as upstream builds it.
///
/// Network interfaces: the class's `networkInterfaces` as listed (`efa-only` ones get no
/// prefixes, public address or connection tracking, which EC2 refuses there); else, with
/// `params.efa_count > 0`, one `efa` interface per network card (device 0 on card 0, device 1
/// on the others); else one interface at device 0. Every interface but `efa-only` carries the
/// status security groups, `associatePublicIPAddress`, `ipPrefixCount` (as IPv6 prefixes on an
/// IPv6 cluster, with a primary IPv6 address) and `connectionTracking`.
pub fn template_data(class: &EC2NodeClass, params: &TemplateParams) -> TemplateData {
    let spec = &class.spec;
    let groups: Vec<String> = class
        .status
        .security_groups
        .iter()
        .map(|g| g.id.clone())
        .collect();
    let prefixes = spec.ip_prefix_count;
    let ip_fields = |iface: &mut InterfaceData| {
        if params.ipv6 {
            iface.ipv6_prefix_count = prefixes;
            iface.primary_ipv6 = Some(true);
            iface.ipv6_address_count = Some(1);
        } else {
            iface.ipv4_prefix_count = prefixes;
        }
    };
    let network_interfaces: Vec<InterfaceData> = if !spec.network_interfaces.is_empty() {
        spec.network_interfaces
            .iter()
            .map(|n| {
                let efa_only = n.interface_type == "efa-only";
                let mut iface = InterfaceData {
                    network_card_index: Some(clamp(n.network_card_index)),
                    device_index: clamp(n.device_index),
                    interface_type: Some(n.interface_type.clone()),
                    groups: groups.clone(),
                    ..InterfaceData::default()
                };
                if !efa_only {
                    ip_fields(&mut iface);
                    iface.associate_public_ip_address = spec.associate_public_ip_address;
                    iface.connection_tracking = spec.connection_tracking.clone();
                }
                iface
            })
            .collect()
    } else if params.efa_count > 0 {
        (0..params.efa_count)
            .map(|card| {
                let mut iface = InterfaceData {
                    network_card_index: Some(clamp(card)),
                    device_index: if card == 0 { 0 } else { 1 },
                    interface_type: Some("efa".into()),
                    groups: groups.clone(),
                    associate_public_ip_address: spec.associate_public_ip_address,
                    connection_tracking: spec.connection_tracking.clone(),
                    ..InterfaceData::default()
                };
                ip_fields(&mut iface);
                iface
            })
            .collect()
    } else {
        let mut iface = InterfaceData {
            device_index: 0,
            groups,
            associate_public_ip_address: spec.associate_public_ip_address,
            connection_tracking: spec.connection_tracking.clone(),
            ..InterfaceData::default()
        };
        ip_fields(&mut iface);
        vec![iface]
    };
    let metadata = spec.resolved_metadata_options();
    TemplateData {
        image_id: params.image_id.clone(),
        user_data: params.user_data.clone(),
        instance_profile: class.status.instance_profile.clone(),
        monitoring: spec.detailed_monitoring.unwrap_or(false),
        metadata_options: MetadataData {
            http_endpoint: metadata.http_endpoint,
            http_protocol_ipv6: metadata.http_protocol_ipv6,
            http_put_response_hop_limit: metadata.http_put_response_hop_limit,
            http_tokens: metadata.http_tokens,
            instance_metadata_tags: "disabled".into(),
        },
        block_device_mappings: super::block_device_mappings(class),
        network_interfaces,
        nested_virtualization: spec
            .cpu_options
            .as_ref()
            .and_then(|c| c.nested_virtualization.clone()),
        placement: params.placement.clone(),
        reservation: params.reservation.clone(),
        tags: params.tags.clone(),
    }
}

/// An index the CRD bounds (validated: 0 or more) as EC2's 32-bit integer.
fn clamp(v: i64) -> i32 {
    i32::try_from(v.max(0)).unwrap_or(i32::MAX)
}

#[cfg(test)]
mod tests;

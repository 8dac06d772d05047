use super::*;
use crate::nodeclass::{
    CpuOptions, EC2NodeClass, EC2NodeClassSpec, MetadataOptions, NetworkInterface,
    StatusSecurityGroup,
};

fn class(spec: EC2NodeClassSpec) -> EC2NodeClass {
    let mut c = EC2NodeClass::new("default", spec);
    c.status.security_groups = vec![StatusSecurityGroup {
        id: "sg-1".into(),
        name: None,
    }];
    c.status.instance_profile = Some("profile".into());
    c
}

fn params() -> TemplateParams {
    TemplateParams {
        image_id: "ami-1".into(),
        user_data: Some("dXNlcmRhdGE=".into()),
        tags: [("team".to_string(), "ml".to_string())].into(),
        ..TemplateParams::default()
    }
}

fn conntrack() -> ConnectionTracking {
    ConnectionTracking {
        tcp_established_timeout: Some(3600),
        udp_stream_timeout: Some(120),
        udp_timeout: Some(45),
    }
}

#[test]
fn the_default_interface_carries_the_classes_network_settings() {
    let c = class(EC2NodeClassSpec {
        associate_public_ip_address: Some(true),
        ip_prefix_count: Some(2),
        connection_tracking: Some(conntrack()),
        detailed_monitoring: Some(true),
        cpu_options: Some(CpuOptions {
            nested_virtualization: Some("enabled".into()),
        }),
        metadata_options: Some(MetadataOptions {
            http_tokens: Some("optional".into()),
            http_put_response_hop_limit: Some(3),
            ..MetadataOptions::default()
        }),
        ami_family: Some("AL2023".into()),
        ..EC2NodeClassSpec::default()
    });
    let d = template_data(&c, &params());
    assert_eq!(
        d.network_interfaces,
        [InterfaceData {
            device_index: 0,
            groups: vec!["sg-1".into()],
            associate_public_ip_address: Some(true),
            ipv4_prefix_count: Some(2),
            connection_tracking: Some(conntrack()),
            ..InterfaceData::default()
        }]
    );
    assert!(d.monitoring);
    assert_eq!(d.nested_virtualization.as_deref(), Some("enabled"));
    assert_eq!(d.metadata_options.http_tokens, "optional");
    assert_eq!(d.metadata_options.http_put_response_hop_limit, 3);
    assert_eq!(d.metadata_options.http_endpoint, "enabled");
    assert_eq!(d.metadata_options.instance_metadata_tags, "disabled");
    assert_eq!(d.instance_profile.as_deref(), Some("profile"));
    assert_eq!(d.user_data.as_deref(), Some("dXNlcmRhdGE="));
    assert_eq!(d.tags["team"], "ml");
    // AL2023's default root volume.
    assert_eq!(d.block_device_mappings.len(), 1);
    assert_eq!(d.placement, None);
}

#[test]
fn ipv6_clusters_get_ipv6_prefixes_and_a_primary_ipv6_address() {
    let c = class(EC2NodeClassSpec {
        ip_prefix_count: Some(1),
        ..EC2NodeClassSpec::default()
    });
    let d = template_data(
        &c,
        &TemplateParams {
            ipv6: true,
            ..params()
        },
    );
    let n = &d.network_interfaces[0];
    assert_eq!(n.ipv4_prefix_count, None);
    assert_eq!(n.ipv6_prefix_count, Some(1));
    assert_eq!(n.primary_ipv6, Some(true));
    assert_eq!(n.ipv6_address_count, Some(1));
}

#[test]
fn efa_launches_get_one_efa_interface_per_card() {
    let c = class(EC2NodeClassSpec::default());
    let d = template_data(
        &c,
        &TemplateParams {
            efa_count: 3,
            ..params()
        },
    );
    let shape: Vec<(Option<i32>, i32, Option<&str>)> = d
        .network_interfaces
        .iter()
        .map(|n| {
            (
                n.network_card_index,
                n.device_index,
                n.interface_type.as_deref(),
            )
        })
        .collect();
    assert_eq!(
        shape,
        [
            (Some(0), 0, Some("efa")),
            (Some(1), 1, Some("efa")),
            (Some(2), 1, Some("efa"))
        ]
    );
    assert!(d.network_interfaces.iter().all(|n| n.groups == ["sg-1"]));
}

#[test]
fn the_classes_own_interfaces_win_and_efa_only_ones_get_no_ip_settings() {
    let c = class(EC2NodeClassSpec {
        associate_public_ip_address: Some(false),
        ip_prefix_count: Some(4),
        connection_tracking: Some(conntrack()),
        network_interfaces: vec![
            NetworkInterface {
                network_card_index: 0,
                device_index: 0,
                interface_type: "interface".into(),
            },
            NetworkInterface {
                network_card_index: 1,
                device_index: 0,
                interface_type: "efa-only".into(),
            },
        ],
        ..EC2NodeClassSpec::default()
    });
    // The class's interfaces take precedence over the EFA count.
    let d = template_data(
        &c,
        &TemplateParams {
            efa_count: 8,
            ..params()
        },
    );
    assert_eq!(d.network_interfaces.len(), 2);
    let primary = &d.network_interfaces[0];
    assert_eq!(primary.interface_type.as_deref(), Some("interface"));
    assert_eq!(primary.network_card_index, Some(0));
    assert_eq!(primary.ipv4_prefix_count, Some(4));
    assert_eq!(primary.associate_public_ip_address, Some(false));
    assert_eq!(primary.connection_tracking, Some(conntrack()));
    let efa = &d.network_interfaces[1];
    assert_eq!(efa.interface_type.as_deref(), Some("efa-only"));
    assert_eq!(efa.network_card_index, Some(1));
    assert_eq!(efa.ipv4_prefix_count, None);
    assert_eq!(efa.associate_public_ip_address, None);
    assert_eq!(efa.connection_tracking, None);
    assert_eq!(efa.groups, ["sg-1"]);
}

#[test]
fn placement_and_reservation_come_from_the_launch() {
    let c = class(EC2NodeClassSpec::default());
    let p = TemplateParams {
        placement: Some(Placement {
            group_id: "pg-1".into(),
            partition_number: Some(2),
        }),
        reservation: Some(ReservationTarget {
            id: "cr-1".into(),
            market_type: Some("capacity-block".into()),
        }),
        ..params()
    };
    let d = template_data(&c, &p);
    assert_eq!(d.placement, p.placement);
    assert_eq!(d.reservation, p.reservation);
    // Different launch parameters are different templates.
    assert_ne!(
        super::super::launch_template_name(&d),
        super::super::launch_template_name(&template_data(&c, &params()))
    );
    assert_eq!(
        super::super::launch_template_name(&d),
        super::super::launch_template_name(&template_data(&c, &p))
    );
}

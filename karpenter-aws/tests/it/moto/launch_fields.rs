//! Every EC2NodeClass field a launch applies, read back from moto: the launch template through
//! DescribeLaunchTemplateVersions (moto keeps `LaunchTemplateData` as sent), the instance's
//! tags through DescribeInstances. Placement groups come from the stand-in of
//! scripts/moto/standins.py (moto has no placement groups).

use aws_sdk_ec2::types as ec2;
use karpenter_aws::nodeclass::EC2NodeClass;
use karpenter_core::api::{NodeClaim, NodeClaimSpec, NodeClassReference};
use karpenter_core::cloud::CloudProvider;
use karpenter_core::requirements::{NodeSelectorRequirement, Operator};
use karpenter_core::resources::Quantity;

use super::env::{Cluster, clients, cluster_name};

fn claim(name: &str, class: &str, types: &[&str]) -> NodeClaim {
    let mut spec = NodeClaimSpec::new(NodeClassReference::new(
        "karpenter.k8s.aws",
        "EC2NodeClass",
        class,
    ));
    spec.requirements = Some(vec![
        NodeSelectorRequirement::new(
            "node.kubernetes.io/instance-type",
            Operator::In,
            types.iter().copied(),
        ),
        NodeSelectorRequirement::new("karpenter.sh/capacity-type", Operator::In, ["on-demand"]),
    ]);
    let mut c = NodeClaim::new(name, spec);
    c.metadata
        .labels
        .insert("karpenter.sh/nodepool".into(), "default".into());
    c
}

/// The data of the one launch template this cluster has for `class`.
pub async fn template_data(cluster: &Cluster, class: &str) -> ec2::ResponseLaunchTemplateData {
    let ec2c = &cluster.clients.ec2;
    let listed = ec2c
        .describe_launch_templates()
        .filters(
            ec2::Filter::builder()
                .name("tag:eks:eks-cluster-name")
                .values(&cluster.name)
                .build(),
        )
        .max_results(200)
        .send()
        .await
        .unwrap();
    let names: Vec<String> = listed
        .launch_templates()
        .iter()
        .filter(|t| {
            let tags = karpenter_aws::sdk::convert::tags(t.tags());
            tags.get("eks:eks-cluster-name") == Some(&cluster.name)
                && tags
                    .get("karpenter.k8s.aws/ec2nodeclass")
                    .map(String::as_str)
                    == Some(class)
        })
        .filter_map(|t| t.launch_template_name().map(str::to_string))
        .collect();
    assert_eq!(names.len(), 1, "{class}: {names:?}");
    let versions = ec2c
        .describe_launch_template_versions()
        .launch_template_name(&names[0])
        .versions("$Latest")
        .send()
        .await
        .unwrap();
    versions.launch_template_versions()[0]
        .launch_template_data()
        .unwrap()
        .clone()
}

fn with_spec(cluster: &Cluster, name: &str, extra: serde_json::Value) -> EC2NodeClass {
    let mut v = serde_json::to_value(cluster.node_class(name)).unwrap();
    v["metadata"]["uid"] = format!("uid-{name}-{}", cluster.name).into();
    for (k, val) in extra.as_object().unwrap() {
        v["spec"][k] = val.clone();
    }
    let c = EC2NodeClass::from_json_value(v).unwrap();
    c.validate().unwrap();
    c
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs moto (scripts/moto/install.sh): scripts/test runs these with --ignored"]
async fn every_launch_field_of_the_class_reaches_the_launch_template() {
    let clients = clients(None).await;
    let cluster = Cluster::create(&cluster_name("fields"), clients).await;
    let pg_name = format!("{}-pg", cluster.name);
    let pg = cluster
        .clients
        .ec2
        .create_placement_group()
        .group_name(&pg_name)
        .strategy(ec2::PlacementStrategy::Partition)
        .partition_count(3)
        .send()
        .await
        .unwrap();
    let pg_id = pg
        .placement_group()
        .and_then(|g| g.group_id())
        .unwrap()
        .to_string();
    let user_data = "#!/bin/bash\necho custom\n";
    let class = with_spec(
        &cluster,
        "fields",
        serde_json::json!({
            "amiFamily": "Custom",
            "userData": user_data,
            "placementGroupSelector": {"name": pg_name},
            "associatePublicIPAddress": true,
            "ipPrefixCount": 2,
            "detailedMonitoring": true,
            "metadataOptions": {"httpEndpoint": "enabled", "httpProtocolIPv6": "disabled",
                "httpPutResponseHopLimit": 3, "httpTokens": "optional"},
            "connectionTracking": {"tcpEstablishedTimeout": 3600, "udpStreamTimeout": 120,
                "udpTimeout": 45},
            "networkInterfaces": [{"networkCardIndex": 0, "deviceIndex": 0,
                "interfaceType": "interface"}],
            "blockDeviceMappings": [{"deviceName": "/dev/xvda", "rootVolume": true, "ebs": {
                "volumeSize": "80Gi", "volumeType": "gp3", "iops": 4000, "throughput": 250,
                "encrypted": true, "deleteOnTermination": true}}],
            "tags": {"team": "platform", "cost-center": "42"}
        }),
    );
    let class = cluster.resolved(class).await;
    let provider = cluster.provider(vec![class.clone()]);
    let types = provider.instance_types_for_class(&class).await.unwrap();
    // Every type carries the placement group, partitions 1..3.
    let m5 = types.iter().find(|t| t.name() == "m5.large").unwrap();
    assert!(
        m5.requirements()
            .get("karpenter.k8s.aws/placement-group-id")
            .unwrap()
            .has(&pg_id)
    );
    let mut c = claim("fields-a", "fields", &["m5.large"]);
    c.spec
        .requirements
        .as_mut()
        .unwrap()
        .push(NodeSelectorRequirement::new(
            "karpenter.k8s.aws/placement-group-partition",
            Operator::In,
            ["3", "2"],
        ));
    let launched = provider.create(&c).await.unwrap();
    let labels = &launched.metadata.labels;
    assert_eq!(labels["karpenter.k8s.aws/placement-group-id"], pg_id);
    assert_eq!(labels["karpenter.k8s.aws/placement-group-partition"], "2");

    let d = template_data(&cluster, "fields").await;
    let placement = d.placement().expect("Placement");
    assert_eq!(placement.group_id(), Some(pg_id.as_str()));
    assert_eq!(placement.partition_number(), Some(2));
    let nis = d.network_interfaces();
    assert_eq!(nis.len(), 1, "{nis:?}");
    let ni = &nis[0];
    assert_eq!(ni.network_card_index(), Some(0));
    assert_eq!(ni.device_index(), Some(0));
    assert_eq!(ni.interface_type(), Some("interface"));
    assert_eq!(ni.associate_public_ip_address(), Some(true));
    assert_eq!(ni.ipv4_prefix_count(), Some(2));
    assert_eq!(ni.groups(), std::slice::from_ref(&cluster.security_group));
    let ct = ni.connection_tracking_specification().expect("conntrack");
    assert_eq!(ct.tcp_established_timeout(), Some(3600));
    assert_eq!(ct.udp_stream_timeout(), Some(120));
    assert_eq!(ct.udp_timeout(), Some(45));
    assert_eq!(d.monitoring().and_then(|m| m.enabled()), Some(true));
    let md = d.metadata_options().expect("metadata options");
    assert_eq!(md.http_tokens().map(|t| t.as_str()), Some("optional"));
    assert_eq!(md.http_put_response_hop_limit(), Some(3));
    assert_eq!(md.http_endpoint().map(|t| t.as_str()), Some("enabled"));
    assert_eq!(
        md.http_protocol_ipv6().map(|t| t.as_str()),
        Some("disabled")
    );
    assert_eq!(
        md.instance_metadata_tags().map(|t| t.as_str()),
        Some("disabled")
    );
    let bdm = &d.block_device_mappings()[0];
    let ebs = bdm.ebs().unwrap();
    assert_eq!(bdm.device_name(), Some("/dev/xvda"));
    assert_eq!(ebs.volume_size(), Some(80));
    assert_eq!(ebs.iops(), Some(4000));
    assert_eq!(ebs.throughput(), Some(250));
    assert_eq!(ebs.encrypted(), Some(true));
    assert_eq!(ebs.delete_on_termination(), Some(true));
    assert_eq!(
        d.iam_instance_profile().and_then(|p| p.name()),
        class.status.instance_profile.as_deref()
    );
    // Custom user data goes in verbatim (base64).
    let decoded = base64_decode(d.user_data().unwrap());
    assert_eq!(decoded, user_data);
    // Outside a reservation: open reservations are not used.
    assert_eq!(
        d.capacity_reservation_specification()
            .and_then(|c| c.capacity_reservation_preference())
            .map(|p| p.as_str()),
        Some("none")
    );
    // The class's tags and Karpenter's on the interfaces...
    let ni_tags: std::collections::BTreeMap<String, String> = d
        .tag_specifications()
        .iter()
        .filter(|t| t.resource_type() == Some(&ec2::ResourceType::NetworkInterface))
        .flat_map(|t| karpenter_aws::sdk::convert::tags(t.tags()))
        .collect();
    assert_eq!(ni_tags["team"], "platform");
    assert_eq!(ni_tags["cost-center"], "42");
    assert_eq!(ni_tags["karpenter.k8s.aws/ec2nodeclass"], "fields");
    // ...and on the instance (CreateFleet's instance tags).
    let id =
        karpenter_aws::launch::parse_provider_id(launched.status.provider_id.as_deref().unwrap())
            .unwrap()
            .to_string();
    let out = cluster
        .clients
        .ec2
        .describe_instances()
        .instance_ids(&id)
        .send()
        .await
        .unwrap();
    let instance = &out.reservations()[0].instances()[0];
    let tags = karpenter_aws::sdk::convert::tags(instance.tags());
    assert_eq!(tags["team"], "platform");
    assert_eq!(tags["karpenter.sh/nodepool"], "default");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs moto (scripts/moto/install.sh): scripts/test runs these with --ignored"]
async fn efa_requests_get_efa_interfaces_and_nested_virtualization_reaches_cpu_options() {
    let clients = clients(None).await;
    let cluster = Cluster::create(&cluster_name("efa"), clients).await;
    let efa = cluster
        .resolved(with_spec(&cluster, "efa", serde_json::json!({})))
        .await;
    let nested = cluster
        .resolved(with_spec(
            &cluster,
            "nested",
            serde_json::json!({"cpuOptions": {"nestedVirtualization": "enabled"}}),
        ))
        .await;
    let provider = cluster.provider(vec![efa.clone(), nested.clone()]);
    // The catalog reflects EFA capacity as upstream: the type's maximum EFA interfaces.
    let types = provider.instance_types_for_class(&efa).await.unwrap();
    let efa_type = types
        .iter()
        .filter(|t| {
            t.capacity().get_or_zero("vpc.amazonaws.com/efa").value() == 1
                && t.offerings.iter().any(|o| o.capacity_type() == "on-demand")
        })
        .min_by(|a, b| {
            let p = |t: &karpenter_core::model::InstanceType| {
                t.offerings
                    .iter()
                    .map(|o| o.price)
                    .fold(f64::INFINITY, f64::min)
            };
            p(a).total_cmp(&p(b))
        })
        .expect("a type with one EFA interface");
    let mut c = claim("efa-a", "efa", &[efa_type.name()]);
    c.spec
        .resources
        .requests
        .insert("vpc.amazonaws.com/efa", Quantity::from_units(1));
    let launched = provider.create(&c).await.unwrap();
    assert_eq!(
        launched
            .status
            .capacity
            .get_or_zero("vpc.amazonaws.com/efa")
            .value(),
        1
    );
    let d = template_data(&cluster, "efa").await;
    let nis = d.network_interfaces();
    assert_eq!(nis.len(), 1, "{nis:?}");
    assert_eq!(nis[0].interface_type(), Some("efa"));
    assert_eq!(nis[0].network_card_index(), Some(0));
    assert_eq!(nis[0].device_index(), Some(0));

    // Nested virtualization: only types that support it, and the template asks for it.
    let types = provider.instance_types_for_class(&nested).await.unwrap();
    assert!(!types.is_empty());
    let all = provider.instance_types_for_class(&efa).await.unwrap();
    assert!(types.len() < all.len(), "{} of {}", types.len(), all.len());
    let name = types
        .iter()
        .find(|t| t.offerings.iter().any(|o| o.capacity_type() == "on-demand"))
        .unwrap()
        .name()
        .to_string();
    provider
        .create(&claim("nested-a", "nested", &[&name]))
        .await
        .unwrap();
    let d = template_data(&cluster, "nested").await;
    assert_eq!(
        d.cpu_options()
            .and_then(|c| c.nested_virtualization())
            .map(|n| n.as_str()),
        Some("enabled")
    );
}

fn base64_decode(s: &str) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut bits = 0u32;
    let mut n = 0;
    let mut out = Vec::new();
    for c in s.bytes().filter(|c| *c != b'=') {
        let v = ALPHABET.iter().position(|a| *a == c).expect("base64") as u32;
        bits = (bits << 6) | v;
        n += 6;
        if n >= 8 {
            n -= 8;
            out.push((bits >> n) as u8);
            bits &= (1 << n) - 1;
        }
    }
    String::from_utf8(out).unwrap()
}

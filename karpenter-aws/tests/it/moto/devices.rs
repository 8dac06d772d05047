//! The block devices of the launch templates moto received: the AMI family's encrypted gp3
//! defaults, or the class's own mappings instead.

use aws_sdk_ec2::types as ec2;
use karpenter_aws::nodeclass::{BlockDevice, BlockDeviceMapping, EC2NodeClass};
use karpenter_core::api::{NodeClaim, NodeClaimSpec, NodeClassReference};
use karpenter_core::cloud::CloudProvider;
use karpenter_core::requirements::{NodeSelectorRequirement, Operator};

use super::env::{Cluster, clients, cluster_name};

fn claim(name: &str, class: &str) -> NodeClaim {
    let mut spec = NodeClaimSpec::new(NodeClassReference::new(
        "karpenter.k8s.aws",
        "EC2NodeClass",
        class,
    ));
    spec.requirements = Some(vec![
        NodeSelectorRequirement::new(
            "node.kubernetes.io/instance-type",
            Operator::In,
            ["m5.large"],
        ),
        NodeSelectorRequirement::new("karpenter.sh/capacity-type", Operator::In, ["on-demand"]),
    ]);
    let mut c = NodeClaim::new(name, spec);
    c.metadata
        .labels
        .insert("karpenter.sh/nodepool".into(), "default".into());
    c
}

/// The block devices of the one launch template this cluster has for `class`, as
/// DescribeLaunchTemplateVersions returns them: (device, type, size GiB, encrypted).
async fn template_devices(cluster: &Cluster, class: &str) -> Vec<(String, String, i32, bool)> {
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
    // Tags checked here too: not every EC2 emulation applies tag filters.
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
    let data = versions.launch_template_versions()[0]
        .launch_template_data()
        .unwrap();
    data.block_device_mappings()
        .iter()
        .map(|m| {
            let ebs = m.ebs().expect("an EBS volume");
            (
                m.device_name().unwrap_or_default().to_string(),
                ebs.volume_type()
                    .map(|t| t.as_str().to_string())
                    .unwrap_or_default(),
                ebs.volume_size().unwrap_or_default(),
                ebs.encrypted().unwrap_or(false),
            )
        })
        .collect()
}

fn named(cluster: &Cluster, name: &str, family: &str) -> EC2NodeClass {
    let mut c = cluster.node_class(name);
    c.metadata.uid = Some(format!("uid-{name}-{}", cluster.name));
    c.spec.ami_family = Some(family.into());
    c
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs moto (scripts/moto/install.sh): scripts/test runs these with --ignored"]
async fn launch_templates_get_the_families_default_volumes_or_the_classes_own() {
    let clients = clients(None).await;
    let cluster = Cluster::create(&cluster_name("devices"), clients).await;
    let al2023 = named(&cluster, "al2023", "AL2023");
    let bottlerocket = named(&cluster, "bottlerocket", "Bottlerocket");
    let mut own = named(&cluster, "own", "AL2023");
    own.spec.block_device_mappings = vec![BlockDeviceMapping {
        device_name: Some("/dev/xvda".into()),
        ebs: Some(BlockDevice {
            volume_size: Some("100Gi".into()),
            volume_type: Some("io2".into()),
            iops: Some(3000),
            ..BlockDevice::default()
        }),
        root_volume: true,
    }];
    let mut classes = Vec::new();
    for c in [al2023, bottlerocket, own] {
        classes.push(cluster.resolved(c).await);
    }
    let provider = cluster.provider(classes);
    for class in ["al2023", "bottlerocket", "own"] {
        provider
            .create(&claim(&format!("{class}-a"), class))
            .await
            .unwrap();
    }
    let v = |d: &str, t: &str, s: i32, e: bool| (d.to_string(), t.to_string(), s, e);
    assert_eq!(
        template_devices(&cluster, "al2023").await,
        [v("/dev/xvda", "gp3", 20, true)]
    );
    assert_eq!(
        template_devices(&cluster, "bottlerocket").await,
        [
            v("/dev/xvda", "gp3", 4, true),
            v("/dev/xvdb", "gp3", 20, true)
        ]
    );
    assert_eq!(
        template_devices(&cluster, "own").await,
        [v("/dev/xvda", "io2", 100, false)]
    );
}

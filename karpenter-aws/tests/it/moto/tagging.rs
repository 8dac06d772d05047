//! Tags written after registration, against moto: `Name` = the node, `karpenter.sh/nodeclaim` =
//! the NodeClaim, each only when the instance lacks the key (a `Name` in `spec.tags` stays).

use std::collections::BTreeMap;

use karpenter_core::api::{NodeClaim, NodeClaimSpec, NodeClassReference};
use karpenter_core::cloud::CloudProvider;
use karpenter_core::requirements::{NodeSelectorRequirement, Operator};

use super::env::{Cluster, clients, cluster_name};

fn claim(name: &str) -> NodeClaim {
    let mut spec = NodeClaimSpec::new(NodeClassReference::new(
        "karpenter.k8s.aws",
        "EC2NodeClass",
        "default",
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

async fn instance_tags(cluster: &Cluster, id: &str) -> BTreeMap<String, String> {
    let d = cluster
        .clients
        .ec2
        .describe_instances()
        .instance_ids(id)
        .send()
        .await
        .unwrap();
    karpenter_aws::sdk::convert::tags(d.reservations()[0].instances()[0].tags())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs moto (scripts/moto/install.sh): scripts/test runs these with --ignored"]
async fn a_registered_instance_gets_its_name_and_nodeclaim_tags_once() {
    let clients = clients(None).await;
    let cluster = Cluster::create(&cluster_name("tagging"), clients).await;
    let plain = cluster.resolved(cluster.node_class("default")).await;
    let provider = cluster.provider(vec![plain]);
    let launched = provider.create(&claim("default-x7k2p")).await.unwrap();
    let pid = launched.status.provider_id.clone().unwrap();
    let id = karpenter_aws::launch::parse_provider_id(&pid)
        .unwrap()
        .to_string();
    let before = instance_tags(&cluster, &id).await;
    assert!(!before.contains_key("Name"), "{before:?}");
    assert!(!before.contains_key("karpenter.sh/nodeclaim"), "{before:?}");

    let written = provider
        .tag_registered_instance(&id, "default-x7k2p", "ip-10-0-0-17.ec2.internal")
        .await
        .unwrap();
    // eks:eks-cluster-name is written at launch already: only the two new keys.
    assert_eq!(
        written.keys().map(String::as_str).collect::<Vec<_>>(),
        ["Name", "karpenter.sh/nodeclaim"]
    );
    let after = instance_tags(&cluster, &id).await;
    assert_eq!(after["Name"], "ip-10-0-0-17.ec2.internal");
    assert_eq!(after["karpenter.sh/nodeclaim"], "default-x7k2p");
    assert_eq!(after["eks:eks-cluster-name"], cluster.name);
    assert_eq!(after["karpenter.sh/nodepool"], "default");
    // Again: nothing left to write.
    let again = provider
        .tag_registered_instance(&id, "default-x7k2p", "ip-10-0-0-17.ec2.internal")
        .await
        .unwrap();
    assert!(again.is_empty(), "{again:?}");

    // An instance EC2 does not know is not-found (its NodeClaim is gone).
    let err = provider
        .tag_registered_instance("i-00000000000000000", "gone", "node")
        .await
        .unwrap_err();
    assert!(err.is_not_found(), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs moto (scripts/moto/install.sh): scripts/test runs these with --ignored"]
async fn a_custom_name_tag_stays() {
    let clients = clients(None).await;
    let cluster = Cluster::create(&cluster_name("tagname"), clients).await;
    let mut class = cluster.node_class("default");
    class.spec.tags.insert("Name".into(), "custom-name".into());
    let class = cluster.resolved(class).await;
    let provider = cluster.provider(vec![class]);
    let launched = provider.create(&claim("default-q9w8e")).await.unwrap();
    let pid = launched.status.provider_id.clone().unwrap();
    let id = karpenter_aws::launch::parse_provider_id(&pid)
        .unwrap()
        .to_string();
    let written = provider
        .tag_registered_instance(&id, "default-q9w8e", "ip-10-0-0-18.ec2.internal")
        .await
        .unwrap();
    assert!(!written.contains_key("Name"));
    let after = instance_tags(&cluster, &id).await;
    assert_eq!(after["Name"], "custom-name");
    assert_eq!(after["karpenter.sh/nodeclaim"], "default-q9w8e");
}

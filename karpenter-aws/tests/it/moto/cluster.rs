//! eks:DescribeCluster against moto's EKS: the settings the user did not give come from the
//! cluster, the ones given win, and an unknown cluster is an error naming the call and the
//! cluster.

use aws_sdk_eks::types::{KubernetesNetworkConfigRequest, VpcConfigRequest};
use karpenter_aws::cluster::{ClusterSettingsError, GivenSettings};
use karpenter_aws::sdk::cluster::{cluster_settings, describe_cluster};

use super::env::{clients, cluster_name};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs moto (scripts/moto/install.sh): scripts/test runs these with --ignored"]
async fn missing_settings_come_from_describe_cluster() {
    let clients = clients(None).await;
    let name = cluster_name("eks");
    let created = clients
        .eks
        .create_cluster()
        .name(&name)
        .role_arn("arn:aws:iam::123456789012:role/eks")
        .version("1.33")
        .resources_vpc_config(VpcConfigRequest::builder().subnet_ids("subnet-1").build())
        .kubernetes_network_config(
            KubernetesNetworkConfigRequest::builder()
                .service_ipv4_cidr("172.31.0.0/16")
                .build(),
        )
        .send()
        .await
        .unwrap();
    let cluster = created.cluster().unwrap();
    let endpoint = cluster.endpoint().unwrap().to_string();
    let ca = cluster
        .certificate_authority()
        .and_then(|a| a.data())
        .unwrap()
        .to_string();
    assert!(!endpoint.is_empty() && !ca.is_empty());

    // Nothing given (the install notes' settings): everything from the call.
    let s = cluster_settings(&clients, &name, &GivenSettings::default())
        .await
        .unwrap();
    assert_eq!(s.endpoint, endpoint);
    assert_eq!(s.ca_bundle, ca);
    assert_eq!(s.service_cidr, "172.31.0.0/16");
    assert_eq!(s.version.as_deref(), Some("1.33"));
    assert!(!s.ipv6());

    // What is given wins; the rest still comes from the call.
    let given = GivenSettings::new(
        Some("https://10.0.0.1:6443".into()),
        None,
        Some(String::new()),
    );
    let s = cluster_settings(&clients, &name, &given).await.unwrap();
    assert_eq!(s.endpoint, "https://10.0.0.1:6443");
    assert_eq!(s.ca_bundle, ca);
    assert_eq!(s.service_cidr, "172.31.0.0/16");

    let d = describe_cluster(&clients.eks, &name).await.unwrap();
    assert_eq!(d.endpoint.as_deref(), Some(endpoint.as_str()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs moto (scripts/moto/install.sh): scripts/test runs these with --ignored"]
async fn an_unknown_cluster_is_an_error_naming_the_call_and_the_cluster() {
    let clients = clients(None).await;
    let name = cluster_name("no-such-cluster");
    let err = cluster_settings(&clients, &name, &GivenSettings::default())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, ClusterSettingsError::DescribeFailed { cluster, .. } if *cluster == name),
        "{err}"
    );
    let msg = err.to_string();
    assert!(
        msg.starts_with(&format!(
            "eks:DescribeCluster for cluster \"{name}\" failed (needed because CLUSTER_ENDPOINT, CLUSTER_CA_BUNDLE, CLUSTER_SERVICE_CIDR not set"
        )),
        "{msg}"
    );
    assert!(msg.contains("ResourceNotFoundException"), "{msg}");

    // Everything given: no call, no error, although the cluster is unknown to EKS.
    let given = GivenSettings::new(
        Some("https://10.0.0.1:6443".into()),
        Some("Q0E=".into()),
        Some("10.100.0.0/16".into()),
    );
    let s = cluster_settings(&clients, &name, &given).await.unwrap();
    assert_eq!(s.version, None);
}

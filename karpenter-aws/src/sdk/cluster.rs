//! `eks:DescribeCluster`: the cluster facts ([`crate::cluster`]) the user did not set.

use super::{AwsClients, display_chain};
use crate::cluster::{ClusterSettings, ClusterSettingsError, DescribedCluster, GivenSettings};

/// What `eks:DescribeCluster` says about the cluster `name`; `Err` carries the call's error
/// (code, message and causes).
pub async fn describe_cluster(
    eks: &aws_sdk_eks::Client,
    name: &str,
) -> Result<DescribedCluster, String> {
    let out = eks
        .describe_cluster()
        .name(name)
        .send()
        .await
        .map_err(|e| display_chain(&e))?;
    let Some(c) = out.cluster() else {
        return Err("the answer has no cluster".to_string());
    };
    let net = c.kubernetes_network_config();
    Ok(DescribedCluster {
        endpoint: c.endpoint().map(str::to_string),
        ca_bundle: c
            .certificate_authority()
            .and_then(|a| a.data())
            .map(str::to_string),
        service_ipv4_cidr: net.and_then(|n| n.service_ipv4_cidr()).map(str::to_string),
        service_ipv6_cidr: net.and_then(|n| n.service_ipv6_cidr()).map(str::to_string),
        version: c.version().map(str::to_string),
    }
    .normalized())
}

/// The cluster facts for `cluster`: `given`, completed by `eks:DescribeCluster` when some
/// setting is missing ([`crate::cluster::resolve`]; the call is made only then).
pub async fn cluster_settings(
    clients: &AwsClients,
    cluster: &str,
    given: &GivenSettings,
) -> Result<ClusterSettings, ClusterSettingsError> {
    let described = if given.needs_describe() {
        Some(describe_cluster(&clients.eks, cluster).await)
    } else {
        None
    };
    crate::cluster::resolve(cluster, given, described)
}

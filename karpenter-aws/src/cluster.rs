//! The cluster facts the AWS mode needs to bootstrap nodes: the API server endpoint, its CA
//! bundle, the service CIDR (IPv4 or IPv6) and the Kubernetes version. Each comes from the
//! user's setting when there is one (`CLUSTER_ENDPOINT`, `CLUSTER_CA_BUNDLE`,
//! `CLUSTER_SERVICE_CIDR`), else from `eks:DescribeCluster`, as upstream falls back to it.
//!
//! This module decides, sans IO: [`GivenSettings::needs_describe`] says whether the call is
//! needed, [`resolve`] combines the settings with its answer ([`DescribedCluster`]) and names
//! the setting and the call when neither gives a value ([`ClusterSettingsError`]). The call
//! itself is `sdk::cluster::describe_cluster` (feature `sdk`).

/// The call this module's errors name.
pub const DESCRIBE_CLUSTER: &str = "eks:DescribeCluster";

/// What the user set (an empty setting counts as not set).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GivenSettings {
    /// `CLUSTER_ENDPOINT`.
    pub endpoint: Option<String>,
    /// `CLUSTER_CA_BUNDLE` (base64).
    pub ca_bundle: Option<String>,
    /// `CLUSTER_SERVICE_CIDR`.
    pub service_cidr: Option<String>,
}

fn non_empty(s: Option<String>) -> Option<String> {
    s.map(|s| s.trim().to_string()).filter(|s| !s.is_empty())
}

impl GivenSettings {
    /// The settings, each `None` when empty or blank.
    pub fn new(
        endpoint: Option<String>,
        ca_bundle: Option<String>,
        service_cidr: Option<String>,
    ) -> Self {
        GivenSettings {
            endpoint: non_empty(endpoint),
            ca_bundle: non_empty(ca_bundle),
            service_cidr: non_empty(service_cidr),
        }
    }

    /// The settings that are not set, by name: the ones `eks:DescribeCluster` must answer.
    pub fn missing(&self) -> Vec<&'static str> {
        let mut out = Vec::new();
        if self.endpoint.is_none() {
            out.push("CLUSTER_ENDPOINT");
        }
        if self.ca_bundle.is_none() {
            out.push("CLUSTER_CA_BUNDLE");
        }
        if self.service_cidr.is_none() {
            out.push("CLUSTER_SERVICE_CIDR");
        }
        out
    }

    /// Whether `eks:DescribeCluster` is needed: some setting is not set.
    pub fn needs_describe(&self) -> bool {
        !self.missing().is_empty()
    }
}

/// What `eks:DescribeCluster` answered (each field `None` when absent or empty).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DescribedCluster {
    /// `cluster.endpoint`.
    pub endpoint: Option<String>,
    /// `cluster.certificateAuthority.data` (base64).
    pub ca_bundle: Option<String>,
    /// `cluster.kubernetesNetworkConfig.serviceIpv4Cidr`.
    pub service_ipv4_cidr: Option<String>,
    /// `cluster.kubernetesNetworkConfig.serviceIpv6Cidr`.
    pub service_ipv6_cidr: Option<String>,
    /// `cluster.version` (`1.33`).
    pub version: Option<String>,
}

impl DescribedCluster {
    /// The answer with empty or blank fields as `None`.
    pub fn normalized(self) -> Self {
        DescribedCluster {
            endpoint: non_empty(self.endpoint),
            ca_bundle: non_empty(self.ca_bundle),
            service_ipv4_cidr: non_empty(self.service_ipv4_cidr),
            service_ipv6_cidr: non_empty(self.service_ipv6_cidr),
            version: non_empty(self.version),
        }
    }
}

/// The cluster facts the provider uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterSettings {
    /// The API server URL nodes join.
    pub endpoint: String,
    /// The CA bundle (base64).
    pub ca_bundle: String,
    /// The service CIDR: the setting, else the cluster's IPv4 service CIDR, else its IPv6 one
    /// (an IPv6 cluster has only the latter).
    pub service_cidr: String,
    /// The Kubernetes version `eks:DescribeCluster` reported (`None` when it was not called);
    /// the controller reads the API server's version first, as upstream does.
    pub version: Option<String>,
}

impl ClusterSettings {
    /// Whether the service CIDR is IPv6 (the nodes bootstrap with the IPv6 family).
    pub fn ipv6(&self) -> bool {
        self.service_cidr.contains(':')
    }
}

/// Why the cluster facts are not known. Each message names the setting and the call.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClusterSettingsError {
    /// The call failed (permission, unknown cluster, network).
    #[error(
        "{DESCRIBE_CLUSTER} for cluster {cluster:?} failed (needed because {} not set; set them or allow the call): {message}",
        .missing.join(", ")
    )]
    DescribeFailed {
        /// `CLUSTER_NAME`.
        cluster: String,
        /// The settings that made the call needed.
        missing: Vec<&'static str>,
        /// The call's error.
        message: String,
    },
    /// Neither the setting nor the call's answer gives the value.
    #[error(
        "{setting} is not set and {DESCRIBE_CLUSTER} for cluster {cluster:?} returned no {field}: set {setting}"
    )]
    Missing {
        /// `CLUSTER_NAME`.
        cluster: String,
        /// The setting (`CLUSTER_ENDPOINT`).
        setting: &'static str,
        /// The field of the answer (`cluster.endpoint`).
        field: &'static str,
    },
}

/// The cluster facts from `given` and, when it was needed ([`GivenSettings::needs_describe`]),
/// the answer of `eks:DescribeCluster` for `cluster` (`Err` with the call's error message when
/// the call failed). A setting wins over the answer; a value that neither gives is an error
/// naming the setting and the call.
pub fn resolve(
    cluster: &str,
    given: &GivenSettings,
    described: Option<Result<DescribedCluster, String>>,
) -> Result<ClusterSettings, ClusterSettingsError> {
    let described = match described {
        Some(Ok(d)) => Some(d.normalized()),
        Some(Err(message)) => {
            return Err(ClusterSettingsError::DescribeFailed {
                cluster: cluster.to_string(),
                missing: given.missing(),
                message,
            });
        }
        None => None,
    };
    let missing = |setting, field| ClusterSettingsError::Missing {
        cluster: cluster.to_string(),
        setting,
        field,
    };
    let d = described.clone().unwrap_or_default();
    let endpoint = given
        .endpoint
        .clone()
        .or(d.endpoint)
        .ok_or_else(|| missing("CLUSTER_ENDPOINT", "cluster.endpoint"))?;
    let ca_bundle = given
        .ca_bundle
        .clone()
        .or(d.ca_bundle)
        .ok_or_else(|| missing("CLUSTER_CA_BUNDLE", "cluster.certificateAuthority.data"))?;
    let service_cidr = given
        .service_cidr
        .clone()
        .or(d.service_ipv4_cidr)
        .or(d.service_ipv6_cidr)
        .ok_or_else(|| {
            missing(
                "CLUSTER_SERVICE_CIDR",
                "cluster.kubernetesNetworkConfig.serviceIpv4Cidr or serviceIpv6Cidr",
            )
        })?;
    Ok(ClusterSettings {
        endpoint,
        ca_bundle,
        service_cidr,
        version: d.version,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn described() -> DescribedCluster {
        DescribedCluster {
            endpoint: Some("https://ABC.gr7.us-east-1.eks.amazonaws.com".into()),
            ca_bundle: Some("Q0E=".into()),
            service_ipv4_cidr: Some("172.20.0.0/16".into()),
            service_ipv6_cidr: None,
            version: Some("1.33".into()),
        }
    }

    #[test]
    fn settings_win_and_the_call_fills_the_rest() {
        let given = GivenSettings::new(
            Some("https://given".into()),
            Some(String::new()),
            Some("  ".into()),
        );
        assert_eq!(
            given.missing(),
            ["CLUSTER_CA_BUNDLE", "CLUSTER_SERVICE_CIDR"]
        );
        assert!(given.needs_describe());
        let s = resolve("c", &given, Some(Ok(described()))).unwrap();
        assert_eq!(s.endpoint, "https://given");
        assert_eq!(s.ca_bundle, "Q0E=");
        assert_eq!(s.service_cidr, "172.20.0.0/16");
        assert_eq!(s.version.as_deref(), Some("1.33"));
        assert!(!s.ipv6());
    }

    #[test]
    fn everything_given_needs_no_call() {
        let given = GivenSettings::new(
            Some("https://given".into()),
            Some("Q0E=".into()),
            Some("10.100.0.0/16".into()),
        );
        assert!(!given.needs_describe());
        let s = resolve("c", &given, None).unwrap();
        assert_eq!(s.service_cidr, "10.100.0.0/16");
        assert_eq!(s.version, None);
    }

    #[test]
    fn an_ipv6_cluster_gets_its_ipv6_service_cidr() {
        let d = DescribedCluster {
            service_ipv4_cidr: Some(String::new()),
            service_ipv6_cidr: Some("fd30:1c53:5f8a::/108".into()),
            ..described()
        };
        let s = resolve("c", &GivenSettings::default(), Some(Ok(d))).unwrap();
        assert_eq!(s.service_cidr, "fd30:1c53:5f8a::/108");
        assert!(s.ipv6());
    }

    #[test]
    fn a_failed_call_names_the_call_the_cluster_and_the_settings() {
        let given = GivenSettings::new(None, Some("Q0E=".into()), None);
        let err = resolve(
            "prod",
            &given,
            Some(Err("AccessDeniedException: not authorized".into())),
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "eks:DescribeCluster for cluster \"prod\" failed (needed because \
             CLUSTER_ENDPOINT, CLUSTER_SERVICE_CIDR not set; set them or allow the call): \
             AccessDeniedException: not authorized"
        );
    }

    #[test]
    fn a_value_neither_gives_names_the_setting_and_the_call() {
        for (d, setting) in [
            (
                DescribedCluster {
                    endpoint: Some(String::new()),
                    ..described()
                },
                "CLUSTER_ENDPOINT",
            ),
            (
                DescribedCluster {
                    ca_bundle: None,
                    ..described()
                },
                "CLUSTER_CA_BUNDLE",
            ),
            (
                DescribedCluster {
                    service_ipv4_cidr: None,
                    ..described()
                },
                "CLUSTER_SERVICE_CIDR",
            ),
        ] {
            let err = resolve("prod", &GivenSettings::default(), Some(Ok(d))).unwrap_err();
            assert!(
                matches!(&err, ClusterSettingsError::Missing { setting: s, .. } if *s == setting),
                "{err}"
            );
            let msg = err.to_string();
            assert!(
                msg.starts_with(&format!(
                    "{setting} is not set and eks:DescribeCluster for cluster \"prod\" returned no "
                )),
                "{msg}"
            );
        }
        // Not called although needed: the same error (nothing to take the value from).
        let err = resolve("prod", &GivenSettings::default(), None).unwrap_err();
        assert!(err.to_string().starts_with("CLUSTER_ENDPOINT is not set"));
    }
}

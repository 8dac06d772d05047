//! User data per AMI family: AL2023 nodeadm (MIME multipart with a NodeConfig part), AL2
//! `bootstrap.sh` (MIME multipart with a shell part), Bottlerocket TOML (the user's settings
//! merged with Karpenter's), Windows PowerShell, and Custom (verbatim). The functions return the
//! plain text; [`base64`] encodes it for the launch template.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::catalog::AmiFamily;
use crate::nodeclass::KubeletConfiguration;

/// The MIME boundary upstream uses.
pub const BOUNDARY: &str = "//";
/// The label telling core not to sync taints from the NodeClaim (all families but Custom).
pub const DO_NOT_SYNC_TAINTS_LABEL: &str = "karpenter.sh/do-not-sync-taints";
/// The startup taint every node registers with.
pub const UNREGISTERED_TAINT_KEY: &str = "karpenter.sh/unregistered";

/// A taint to register the node with.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct BootstrapTaint {
    /// The key.
    pub key: String,
    /// The value (may be empty).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub value: String,
    /// `NoSchedule`, `PreferNoSchedule` or `NoExecute`.
    pub effect: String,
}

/// What the bootstrap needs.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BootstrapOptions {
    /// The cluster name.
    pub cluster_name: String,
    /// The API server URL.
    pub api_server_endpoint: String,
    /// The cluster CA bundle (base64).
    pub ca_bundle: Option<String>,
    /// The service CIDR (required by AL2023's NodeConfig).
    pub cluster_cidr: Option<String>,
    /// Whether the cluster is IPv6.
    pub ipv6: bool,
    /// The NodeClaim's labels.
    pub labels: BTreeMap<String, String>,
    /// The NodeClaim's taints and startup taints.
    pub taints: Vec<BootstrapTaint>,
    /// The class's kubelet settings.
    pub kubelet: Option<KubeletConfiguration>,
    /// The resolved max pods (the class's `maxPods`, or the type's pods when the family needs
    /// it passed).
    pub max_pods: Option<i64>,
    /// `instanceStorePolicy: RAID0`.
    pub instance_store_raid0: bool,
    /// The class's `userData`.
    pub custom_user_data: Option<String>,
}

/// Why user data cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UserDataError {
    /// The class's Bottlerocket user data is not TOML.
    #[error("spec.userData: invalid Bottlerocket TOML: {0}")]
    InvalidToml(String),
    /// AL2023 needs the cluster's service CIDR.
    #[error("AL2023 needs the cluster's service CIDR")]
    MissingClusterCidr,
    /// The class's MIME user data is malformed.
    #[error("spec.userData: invalid MIME multipart: {0}")]
    InvalidMime(String),
}

/// Labels passed to the kubelet: those in a domain that is, or ends with, `kubernetes.io` or
/// `k8s.io` are dropped (kubelet may not set them), others kept.
pub fn kubelet_labels(labels: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    labels
        .iter()
        .filter(|(k, _)| {
            let Some((domain, _)) = k.split_once('/') else {
                return true;
            };
            !(domain == "kubernetes.io"
                || domain.ends_with(".kubernetes.io")
                || domain == "k8s.io"
                || domain.ends_with(".k8s.io"))
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

fn all_taints(o: &BootstrapOptions) -> Vec<BootstrapTaint> {
    let mut t = o.taints.clone();
    t.push(BootstrapTaint {
        key: UNREGISTERED_TAINT_KEY.into(),
        value: String::new(),
        effect: "NoExecute".into(),
    });
    t
}

fn labels_for(family: AmiFamily, o: &BootstrapOptions) -> BTreeMap<String, String> {
    let mut l = kubelet_labels(&o.labels);
    if family != AmiFamily::Custom {
        l.insert(DO_NOT_SYNC_TAINTS_LABEL.into(), "true".into());
    }
    l
}

fn join_labels(l: &BTreeMap<String, String>) -> String {
    l.iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

fn taint_string(t: &BootstrapTaint) -> String {
    if t.value.is_empty() {
        format!("{}:{}", t.key, t.effect)
    } else {
        format!("{}={}:{}", t.key, t.value, t.effect)
    }
}

/// The user data of `family` (plain text).
pub fn user_data(family: AmiFamily, o: &BootstrapOptions) -> Result<String, UserDataError> {
    match family {
        AmiFamily::Al2023 => al2023(o),
        AmiFamily::Al2 => al2(o),
        AmiFamily::Bottlerocket => bottlerocket(o),
        AmiFamily::Windows2019 | AmiFamily::Windows2022 | AmiFamily::Windows2025 => Ok(windows(o)),
        AmiFamily::Custom => Ok(o.custom_user_data.clone().unwrap_or_default()),
    }
}

/// One part of a MIME multipart document.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Part {
    content_type: String,
    body: String,
}

/// Splits MIME multipart user data into parts (headers other than Content-Type are dropped).
fn mime_parts(text: &str) -> Result<Vec<Part>, UserDataError> {
    let ct = text
        .lines()
        .take_while(|l| !l.trim().is_empty())
        .find(|l| l.to_ascii_lowercase().starts_with("content-type:"))
        .ok_or_else(|| UserDataError::InvalidMime("no Content-Type header".into()))?;
    let boundary = ct
        .split(';')
        .find_map(|p| p.trim().strip_prefix("boundary="))
        .map(|b| b.trim_matches('"').to_string())
        .ok_or_else(|| UserDataError::InvalidMime("no boundary".into()))?;
    let delim = format!("--{boundary}");
    let mut parts = Vec::new();
    for chunk in text.split(&delim).skip(1) {
        if chunk.starts_with("--") {
            break;
        }
        let chunk = chunk.trim_start_matches(['\r', '\n']);
        let (headers, body) = chunk
            .split_once("\n\n")
            .or_else(|| chunk.split_once("\r\n\r\n"))
            .unwrap_or((chunk, ""));
        let content_type = headers
            .lines()
            .find_map(|l| {
                let (k, v) = l.split_once(':')?;
                k.trim()
                    .eq_ignore_ascii_case("content-type")
                    .then(|| v.trim().to_string())
            })
            .unwrap_or_else(|| "text/x-shellscript; charset=\"us-ascii\"".into());
        parts.push(Part {
            content_type,
            body: body.trim_end_matches(['\r', '\n']).to_string(),
        });
    }
    Ok(parts)
}

fn is_mime(text: &str) -> bool {
    text.trim_start()
        .to_ascii_lowercase()
        .starts_with("mime-version:")
}

fn render_mime(parts: &[Part]) -> String {
    let mut s =
        format!("MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"{BOUNDARY}\"\n\n");
    for p in parts {
        s.push_str(&format!(
            "--{BOUNDARY}\nContent-Type: {}\n\n{}\n\n",
            p.content_type, p.body
        ));
    }
    s.push_str(&format!("--{BOUNDARY}--\n"));
    s
}

fn shell_part(body: &str) -> Part {
    Part {
        content_type: "text/x-shellscript; charset=\"us-ascii\"".into(),
        body: body.trim_end().to_string(),
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct NodeConfig {
    api_version: &'static str,
    kind: &'static str,
    spec: NodeConfigSpec,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct NodeConfigSpec {
    cluster: ClusterDetails,
    #[serde(skip_serializing_if = "Option::is_none")]
    instance: Option<serde_json::Value>,
    kubelet: KubeletSection,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ClusterDetails {
    api_server_endpoint: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    certificate_authority: Option<String>,
    cidr: String,
    name: String,
}

#[derive(Serialize)]
struct KubeletSection {
    config: BTreeMap<String, serde_json::Value>,
    flags: Vec<String>,
}

fn al2023(o: &BootstrapOptions) -> Result<String, UserDataError> {
    let cidr = o
        .cluster_cidr
        .clone()
        .ok_or(UserDataError::MissingClusterCidr)?;
    let mut parts = Vec::new();
    if let Some(custom) = o
        .custom_user_data
        .as_deref()
        .filter(|s| !s.trim().is_empty())
    {
        if is_mime(custom) {
            parts.extend(mime_parts(custom)?);
        } else if custom.trim_start().starts_with("apiVersion:") {
            parts.push(Part {
                content_type: "application/node.eks.aws".into(),
                body: custom.trim_end().to_string(),
            });
        } else {
            parts.push(shell_part(custom));
        }
    }
    let mut config: BTreeMap<String, serde_json::Value> = o
        .kubelet
        .as_ref()
        .and_then(|k| serde_json::to_value(k).ok())
        .and_then(|v| v.as_object().cloned())
        .map(|m| m.into_iter().collect())
        .unwrap_or_default();
    if let Some(n) = o.max_pods {
        config.insert("maxPods".into(), n.into());
    }
    config.insert(
        "registerWithTaints".into(),
        serde_json::to_value(all_taints(o)).unwrap_or_default(),
    );
    let node_config = NodeConfig {
        api_version: "node.eks.aws/v1alpha1",
        kind: "NodeConfig",
        spec: NodeConfigSpec {
            cluster: ClusterDetails {
                api_server_endpoint: o.api_server_endpoint.clone(),
                certificate_authority: o.ca_bundle.clone(),
                cidr,
                name: o.cluster_name.clone(),
            },
            instance: o
                .instance_store_raid0
                .then(|| serde_json::json!({"localStorage": {"strategy": "RAID0"}})),
            kubelet: KubeletSection {
                config,
                flags: vec![format!(
                    "--node-labels=\"{}\"",
                    join_labels(&labels_for(AmiFamily::Al2023, o))
                )],
            },
        },
    };
    let yaml = serde_saphyr::to_string(&node_config).unwrap_or_default();
    parts.push(Part {
        content_type: "application/node.eks.aws".into(),
        body: format!("# Karpenter Generated NodeConfig\n{}", yaml.trim_end()),
    });
    Ok(render_mime(&parts))
}

fn kubelet_args(family: AmiFamily, o: &BootstrapOptions) -> Vec<String> {
    let mut args = vec![format!(
        "--node-labels=\"{}\"",
        join_labels(&labels_for(family, o))
    )];
    let taints: Vec<String> = all_taints(o).iter().map(taint_string).collect();
    args.push(format!("--register-with-taints=\"{}\"", taints.join(",")));
    if let Some(n) = o.max_pods {
        args.push(format!("--max-pods={n}"));
    }
    if let Some(k) = &o.kubelet {
        let map = |m: &Option<BTreeMap<String, String>>, sep: &str| {
            m.as_ref().filter(|m| !m.is_empty()).map(|m| {
                m.iter()
                    .map(|(k, v)| format!("{k}{sep}{v}"))
                    .collect::<Vec<_>>()
                    .join(",")
            })
        };
        if let Some(n) = k.pods_per_core {
            args.push(format!("--pods-per-core={n}"));
        }
        for (flag, m, sep) in [
            ("--system-reserved", &k.system_reserved, "="),
            ("--kube-reserved", &k.kube_reserved, "="),
            ("--eviction-hard", &k.eviction_hard, "<"),
            ("--eviction-soft", &k.eviction_soft, "<"),
            (
                "--eviction-soft-grace-period",
                &k.eviction_soft_grace_period,
                "=",
            ),
        ] {
            if let Some(v) = map(m, sep) {
                args.push(format!("{flag}=\"{v}\""));
            }
        }
        if let Some(n) = k.eviction_max_pod_grace_period {
            args.push(format!("--eviction-max-pod-grace-period={n}"));
        }
        if let Some(n) = k.image_gc_high_threshold_percent {
            args.push(format!("--image-gc-high-threshold={n}"));
        }
        if let Some(n) = k.image_gc_low_threshold_percent {
            args.push(format!("--image-gc-low-threshold={n}"));
        }
        if let Some(b) = k.cpu_cfs_quota {
            args.push(format!("--cpu-cfs-quota={b}"));
        }
    }
    args
}

fn al2(o: &BootstrapOptions) -> Result<String, UserDataError> {
    let mut parts = Vec::new();
    if let Some(custom) = o
        .custom_user_data
        .as_deref()
        .filter(|s| !s.trim().is_empty())
    {
        if is_mime(custom) {
            parts.extend(mime_parts(custom)?);
        } else {
            parts.push(shell_part(custom));
        }
    }
    let mut script = format!(
        "#!/bin/bash -xe\nexec > >(tee /var/log/user-data.log|logger -t user-data -s 2>/dev/console) 2>&1\n/etc/eks/bootstrap.sh '{}' --apiserver-endpoint '{}'",
        o.cluster_name, o.api_server_endpoint
    );
    if let Some(ca) = &o.ca_bundle {
        script.push_str(&format!(" --b64-cluster-ca '{ca}'"));
    }
    if o.ipv6 {
        script.push_str(" \\\n--ip-family ipv6");
    }
    if let Some(dns) = o.kubelet.as_ref().and_then(|k| k.cluster_dns.first()) {
        script.push_str(&format!(" \\\n--dns-cluster-ip '{dns}'"));
    }
    if o.max_pods.is_some() {
        script.push_str(" \\\n--use-max-pods false");
    }
    script.push_str(&format!(
        " \\\n--kubelet-extra-args '{}'",
        kubelet_args(AmiFamily::Al2, o).join(" ")
    ));
    if o.instance_store_raid0 {
        script.push_str(" \\\n--local-disks raid0");
    }
    parts.push(shell_part(&script));
    Ok(render_mime(&parts).replace('\r', ""))
}

fn bottlerocket(o: &BootstrapOptions) -> Result<String, UserDataError> {
    let custom = o.custom_user_data.as_deref().unwrap_or("");
    let mut doc: toml::Table = custom
        .parse()
        .map_err(|e: toml::de::Error| UserDataError::InvalidToml(e.message().to_string()))?;
    let settings = table(&mut doc, "settings");
    let k8s = table(settings, "kubernetes");
    let s = |v: &str| toml::Value::String(v.to_string());
    k8s.insert("cluster-name".into(), s(&o.cluster_name));
    k8s.insert("api-server".into(), s(&o.api_server_endpoint));
    if let Some(ca) = &o.ca_bundle {
        k8s.insert("cluster-certificate".into(), s(ca));
    }
    let labels = table(k8s, "node-labels");
    for (k, v) in labels_for(AmiFamily::Bottlerocket, o) {
        labels.insert(k, s(&v));
    }
    let mut taints: BTreeMap<String, Vec<toml::Value>> = BTreeMap::new();
    for t in all_taints(o) {
        let v = if t.value.is_empty() {
            format!(":{}", t.effect)
        } else {
            format!("{}:{}", t.value, t.effect)
        };
        taints.entry(t.key).or_default().push(s(&v));
    }
    let node_taints = table(k8s, "node-taints");
    for (k, v) in taints {
        node_taints.insert(k, toml::Value::Array(v));
    }
    if let Some(n) = o.max_pods {
        k8s.insert("max-pods".into(), toml::Value::Integer(n));
    }
    if let Some(k) = &o.kubelet {
        if let Some(dns) = k.cluster_dns.first() {
            k8s.insert("cluster-dns-ip".into(), s(dns));
        }
        for (name, m) in [
            ("system-reserved", &k.system_reserved),
            ("kube-reserved", &k.kube_reserved),
            ("eviction-hard", &k.eviction_hard),
            ("eviction-soft", &k.eviction_soft),
            ("eviction-soft-grace-period", &k.eviction_soft_grace_period),
        ] {
            if let Some(m) = m.as_ref().filter(|m| !m.is_empty()) {
                let t = table(k8s, name);
                for (key, v) in m {
                    t.insert(key.clone(), s(v));
                }
            }
        }
        if let Some(n) = k.eviction_max_pod_grace_period {
            k8s.insert(
                "eviction-max-pod-grace-period".into(),
                toml::Value::Integer(n),
            );
        }
        if let Some(n) = k.image_gc_high_threshold_percent {
            k8s.insert("image-gc-high-threshold-percent".into(), s(&n.to_string()));
        }
        if let Some(n) = k.image_gc_low_threshold_percent {
            k8s.insert("image-gc-low-threshold-percent".into(), s(&n.to_string()));
        }
        if let Some(b) = k.cpu_cfs_quota {
            k8s.insert("cpu-cfs-quota-enforced".into(), toml::Value::Boolean(b));
        }
    }
    if o.instance_store_raid0 {
        let settings = table(&mut doc, "settings");
        let commands = table(settings, "bootstrap-commands");
        let mount = table(commands, "000-mount-instance-storage");
        mount.insert(
            "commands".into(),
            toml::Value::Array(vec![
                toml::Value::Array(vec![s("apiclient"), s("ephemeral-storage"), s("init")]),
                toml::Value::Array(vec![s("apiclient"), s("ephemeral-storage"), s("bind")]),
            ]),
        );
        mount.insert("mode".into(), s("always"));
        mount.insert("essential".into(), toml::Value::Boolean(true));
    }
    Ok(toml::to_string(&doc).unwrap_or_default())
}

fn table<'a>(t: &'a mut toml::Table, key: &str) -> &'a mut toml::Table {
    let entry = t
        .entry(key.to_string())
        .or_insert_with(|| toml::Value::Table(toml::Table::new()));
    if !entry.is_table() {
        *entry = toml::Value::Table(toml::Table::new());
    }
    match entry {
        toml::Value::Table(t) => t,
        _ => unreachable!("replaced by a table above"),
    }
}

fn windows(o: &BootstrapOptions) -> String {
    let mut s = String::from("<powershell>\n");
    if let Some(custom) = o
        .custom_user_data
        .as_deref()
        .filter(|c| !c.trim().is_empty())
    {
        let inner = custom
            .trim()
            .trim_start_matches("<powershell>")
            .trim_end_matches("</powershell>")
            .trim();
        s.push_str(inner);
        s.push('\n');
    }
    s.push_str(&format!(
        "[string]$EKSBootstrapScriptFile = \"$env:ProgramFiles\\Amazon\\EKS\\Start-EKSBootstrap.ps1\"\n& $EKSBootstrapScriptFile -EKSClusterName '{}' -APIServerEndpoint '{}'",
        o.cluster_name, o.api_server_endpoint
    ));
    if let Some(ca) = &o.ca_bundle {
        s.push_str(&format!(" -Base64ClusterCA '{ca}'"));
    }
    s.push_str(&format!(
        " -KubeletExtraArgs '{}'",
        kubelet_args(AmiFamily::Windows2022, o).join(" ")
    ));
    if let Some(dns) = o.kubelet.as_ref().and_then(|k| k.cluster_dns.first()) {
        s.push_str(&format!(" -DNSClusterIP '{dns}'"));
    }
    s.push_str("\n</powershell>");
    s
}

/// Standard base64 with padding.
pub fn base64(data: &[u8]) -> String {
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        out.push(T[(n >> 18) as usize & 63] as char);
        out.push(T[(n >> 12) as usize & 63] as char);
        out.push(if chunk.len() > 1 {
            T[(n >> 6) as usize & 63] as char
        } else {
            '='
        });
        out.push(if chunk.len() > 2 {
            T[n as usize & 63] as char
        } else {
            '='
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts() -> BootstrapOptions {
        BootstrapOptions {
            cluster_name: "my-cluster".into(),
            api_server_endpoint: "https://example.eks.amazonaws.com".into(),
            ca_bundle: Some("Q0E=".into()),
            cluster_cidr: Some("10.100.0.0/16".into()),
            labels: [
                ("karpenter.sh/nodepool".to_string(), "default".to_string()),
                (
                    "node.kubernetes.io/instance-type".to_string(),
                    "m5.large".to_string(),
                ),
                (
                    "node-restriction.kubernetes.io/x".to_string(),
                    "y".to_string(),
                ),
                ("team".to_string(), "a".to_string()),
            ]
            .into(),
            taints: vec![BootstrapTaint {
                key: "gpu".into(),
                value: "true".into(),
                effect: "NoSchedule".into(),
            }],
            max_pods: Some(29),
            ..Default::default()
        }
    }

    #[test]
    fn base64_matches_rfc4648() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
        assert_eq!(base64(b"foobar"), "Zm9vYmFy");
    }

    #[test]
    fn labels_in_kubernetes_domains_are_dropped() {
        let l = kubelet_labels(&opts().labels);
        assert_eq!(
            l.keys().collect::<Vec<_>>(),
            ["karpenter.sh/nodepool", "team"]
        );
    }

    #[test]
    fn al2023_nodeadm_with_custom_shell_script() {
        let mut o = opts();
        o.custom_user_data = Some("#!/bin/bash\necho hi\n".into());
        o.instance_store_raid0 = true;
        o.kubelet = Some(KubeletConfiguration {
            cluster_dns: vec!["10.100.0.10".into()],
            ..Default::default()
        });
        let u = user_data(AmiFamily::Al2023, &o).unwrap();
        assert!(
            u.starts_with("MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"//\"\n")
        );
        let shell = u.find("text/x-shellscript").unwrap();
        let nodeconfig = u.find("# Karpenter Generated NodeConfig").unwrap();
        assert!(shell < nodeconfig, "user parts come first");
        assert!(u.contains("echo hi"));
        assert!(u.trim_end().ends_with("--//--"));
        let yaml = &u[nodeconfig..u.rfind("--//--").unwrap()];
        let v: serde_json::Value = serde_saphyr::from_str(yaml).unwrap();
        assert_eq!(v["kind"], "NodeConfig");
        assert_eq!(v["spec"]["cluster"]["cidr"], "10.100.0.0/16");
        assert_eq!(v["spec"]["cluster"]["name"], "my-cluster");
        assert_eq!(v["spec"]["kubelet"]["config"]["maxPods"], 29);
        assert_eq!(
            v["spec"]["kubelet"]["config"]["clusterDNS"][0],
            "10.100.0.10"
        );
        assert_eq!(
            v["spec"]["kubelet"]["config"]["registerWithTaints"][1]["key"],
            "karpenter.sh/unregistered"
        );
        assert_eq!(v["spec"]["instance"]["localStorage"]["strategy"], "RAID0");
        let flags = v["spec"]["kubelet"]["flags"][0].as_str().unwrap();
        assert_eq!(
            flags,
            "--node-labels=\"karpenter.sh/do-not-sync-taints=true,karpenter.sh/nodepool=default,team=a\""
        );
        let no_cidr = BootstrapOptions {
            cluster_cidr: None,
            ..opts()
        };
        assert_eq!(
            user_data(AmiFamily::Al2023, &no_cidr),
            Err(UserDataError::MissingClusterCidr)
        );
    }

    #[test]
    fn al2023_passes_mime_and_nodeconfig_parts_through() {
        let mut o = opts();
        o.custom_user_data = Some("MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"BOUNDARY\"\n\n--BOUNDARY\nContent-Type: application/node.eks.aws\n\napiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  kubelet:\n    config:\n      shutdownGracePeriod: 30s\n\n--BOUNDARY--\n".into());
        let u = user_data(AmiFamily::Al2023, &o).unwrap();
        assert_eq!(
            u.matches("Content-Type: application/node.eks.aws").count(),
            2
        );
        assert!(u.contains("shutdownGracePeriod: 30s"));
        o.custom_user_data = Some("apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\n".into());
        let u = user_data(AmiFamily::Al2023, &o).unwrap();
        assert_eq!(
            u.matches("Content-Type: application/node.eks.aws").count(),
            2
        );
    }

    #[test]
    fn al2_bootstrap_script() {
        let mut o = opts();
        o.kubelet = Some(KubeletConfiguration {
            cluster_dns: vec!["10.100.0.10".into()],
            system_reserved: Some([("cpu".to_string(), "100m".to_string())].into()),
            eviction_hard: Some([("memory.available".to_string(), "5%".to_string())].into()),
            ..Default::default()
        });
        let u = user_data(AmiFamily::Al2, &o).unwrap();
        assert!(u.contains("/etc/eks/bootstrap.sh 'my-cluster' --apiserver-endpoint 'https://example.eks.amazonaws.com' --b64-cluster-ca 'Q0E='"));
        assert!(u.contains("--dns-cluster-ip '10.100.0.10'"));
        assert!(u.contains("--use-max-pods false"));
        assert!(u.contains("--max-pods=29"));
        assert!(u.contains(
            "--register-with-taints=\"gpu=true:NoSchedule,karpenter.sh/unregistered:NoExecute\""
        ));
        assert!(u.contains("--system-reserved=\"cpu=100m\""));
        assert!(u.contains("--eviction-hard=\"memory.available<5%\""));
    }

    #[test]
    fn bottlerocket_merges_user_toml() {
        let mut o = opts();
        o.custom_user_data = Some(
            "[settings.kubernetes]\nmax-pods = 110\ncluster-name = \"spoofed\"\n[settings.kernel.sysctl]\n\"net.core.somaxconn\" = \"65535\"\n".into(),
        );
        o.instance_store_raid0 = true;
        let u = user_data(AmiFamily::Bottlerocket, &o).unwrap();
        let v: toml::Table = u.parse().unwrap();
        let k8s = v["settings"]["kubernetes"].as_table().unwrap();
        assert_eq!(k8s["cluster-name"].as_str(), Some("my-cluster"));
        assert_eq!(k8s["max-pods"].as_integer(), Some(29));
        assert_eq!(k8s["node-labels"]["team"].as_str(), Some("a"));
        assert_eq!(
            k8s["node-taints"]["gpu"][0].as_str(),
            Some("true:NoSchedule")
        );
        assert_eq!(
            v["settings"]["kernel"]["sysctl"]["net.core.somaxconn"].as_str(),
            Some("65535")
        );
        assert!(v["settings"]["bootstrap-commands"]["000-mount-instance-storage"].is_table());
        o.custom_user_data = Some("this is not = = toml".into());
        assert!(matches!(
            user_data(AmiFamily::Bottlerocket, &o),
            Err(UserDataError::InvalidToml(_))
        ));
    }

    #[test]
    fn windows_and_custom() {
        let mut o = opts();
        o.custom_user_data = Some("<powershell>Write-Host hi</powershell>".into());
        let u = user_data(AmiFamily::Windows2022, &o).unwrap();
        assert!(u.starts_with("<powershell>\nWrite-Host hi\n"));
        assert!(u.contains("-EKSClusterName 'my-cluster'"));
        assert!(u.ends_with("</powershell>"));
        o.custom_user_data = Some("anything\r\n".into());
        assert_eq!(user_data(AmiFamily::Custom, &o).unwrap(), "anything\r\n");
    }
}

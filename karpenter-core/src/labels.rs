//! Well-known label keys, annotation keys, taint keys, label normalisation and the rules that say
//! which label keys a NodePool or pod may use.
//!
//! Upstream keeps the set of well-known labels in a process-global variable that cloud providers
//! extend at start-up. This crate has no global state: the set lives in a [`LabelPolicy`] value
//! that callers build once (core defaults plus their provider's keys) and pass to the scheduler.
//!
//! ```
//! use karpenter_core::labels::{self, LabelPolicy};
//!
//! let policy = LabelPolicy::core().with_well_known(["karpenter.k8s.aws/instance-family"]);
//! assert!(policy.is_well_known(labels::ZONE));
//! assert!(policy.is_restricted("kubernetes.io/hostname"));
//! assert!(policy.is_restricted("karpenter.sh/custom"));
//! assert!(!policy.is_restricted(labels::CAPACITY_TYPE));
//! assert_eq!(labels::normalize_key("beta.kubernetes.io/arch"), labels::ARCH);
//! ```

use std::collections::BTreeSet;

/// The API group of Karpenter's own objects and labels.
pub const GROUP: &str = "karpenter.sh";

/// `karpenter.sh/nodepool`: the NodePool that owns a node.
pub const NODEPOOL: &str = "karpenter.sh/nodepool";
/// `karpenter.sh/capacity-type`: `spot`, `on-demand` or `reserved`.
pub const CAPACITY_TYPE: &str = "karpenter.sh/capacity-type";
/// `karpenter.sh/initialized`: set once a node is initialized.
pub const INITIALIZED: &str = "karpenter.sh/initialized";
/// `karpenter.sh/registered`: set once a node has registered.
pub const REGISTERED: &str = "karpenter.sh/registered";
/// `karpenter.sh/do-not-sync-taints`.
pub const DO_NOT_SYNC_TAINTS: &str = "karpenter.sh/do-not-sync-taints";
/// `kubernetes.io/hostname`.
pub const HOSTNAME: &str = "kubernetes.io/hostname";
/// `topology.kubernetes.io/zone`.
pub const ZONE: &str = "topology.kubernetes.io/zone";
/// `topology.kubernetes.io/region`.
pub const REGION: &str = "topology.kubernetes.io/region";
/// `node.kubernetes.io/instance-type`.
pub const INSTANCE_TYPE: &str = "node.kubernetes.io/instance-type";
/// `kubernetes.io/arch`.
pub const ARCH: &str = "kubernetes.io/arch";
/// `kubernetes.io/os`.
pub const OS: &str = "kubernetes.io/os";
/// `node.kubernetes.io/windows-build`.
pub const WINDOWS_BUILD: &str = "node.kubernetes.io/windows-build";

/// Capacity type `spot`.
pub const CAPACITY_TYPE_SPOT: &str = "spot";
/// Capacity type `on-demand`.
pub const CAPACITY_TYPE_ON_DEMAND: &str = "on-demand";
/// Capacity type `reserved`.
pub const CAPACITY_TYPE_RESERVED: &str = "reserved";
/// The capacity types upstream knows, in the order its validation lists them.
pub const CAPACITY_TYPES: [&str; 3] = [
    CAPACITY_TYPE_ON_DEMAND,
    CAPACITY_TYPE_SPOT,
    CAPACITY_TYPE_RESERVED,
];

/// Annotation `karpenter.sh/do-not-disrupt` (pods and nodes).
pub const DO_NOT_DISRUPT_ANNOTATION: &str = "karpenter.sh/do-not-disrupt";
/// Annotation `karpenter.sh/nodepool-hash`.
pub const NODEPOOL_HASH_ANNOTATION: &str = "karpenter.sh/nodepool-hash";
/// Annotation `karpenter.sh/nodepool-hash-version`.
pub const NODEPOOL_HASH_VERSION_ANNOTATION: &str = "karpenter.sh/nodepool-hash-version";
/// The current value of the NodePool hash version annotation.
pub const NODEPOOL_HASH_VERSION: &str = "v3";
/// Annotation `karpenter.sh/nodeclaim-min-values-relaxed` (`"true"` / `"false"`).
pub const MIN_VALUES_RELAXED_ANNOTATION: &str = "karpenter.sh/nodeclaim-min-values-relaxed";

/// Annotation `karpenter-rs.sh/replaces` (not upstream's): on a disruption command's
/// replacement NodeClaim, the names of the command's candidate NodeClaims, comma-separated.
/// The command queue lives in memory; after a restart it lets the operator find the
/// replacements of a command it lost (see `Operator::orphaned_replacements`).
pub const REPLACES_ANNOTATION: &str = "karpenter-rs.sh/replaces";

/// Taint key `karpenter.sh/disrupted` (effect NoSchedule) put on nodes being disrupted.
pub const DISRUPTED_TAINT_KEY: &str = "karpenter.sh/disrupted";
/// Taint key `karpenter.sh/unregistered` (effect NoExecute) put on nodes until they register.
pub const UNREGISTERED_TAINT_KEY: &str = "karpenter.sh/unregistered";

/// Label keys that upstream rewrites to their current names whenever a requirement is built.
pub const NORMALIZED_LABELS: [(&str, &str); 5] = [
    ("failure-domain.beta.kubernetes.io/zone", ZONE),
    ("failure-domain.beta.kubernetes.io/region", REGION),
    ("beta.kubernetes.io/arch", ARCH),
    ("beta.kubernetes.io/os", OS),
    ("beta.kubernetes.io/instance-type", INSTANCE_TYPE),
];

/// Rewrites a deprecated label key to its current name (`beta.kubernetes.io/arch` →
/// `kubernetes.io/arch`); other keys are returned unchanged.
pub fn normalize_key(key: &str) -> &str {
    NORMALIZED_LABELS
        .iter()
        .find(|(old, _)| *old == key)
        .map_or(key, |(_, new)| new)
}

/// Which label keys are well-known (may be requested by pods although a NodePool leaves them
/// undefined; their values come from instance types) and which label domains are restricted
/// (may not be set by NodePools or selected by pods).
///
/// Build it once per process from [`LabelPolicy::core`] plus the cloud provider's keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabelPolicy {
    well_known: BTreeSet<String>,
    restricted_domains: BTreeSet<String>,
}

impl Default for LabelPolicy {
    fn default() -> Self {
        Self::core()
    }
}

impl LabelPolicy {
    /// Upstream core's well-known labels and its one restricted domain, `karpenter.sh`.
    pub fn core() -> Self {
        let well_known = [
            NODEPOOL,
            ZONE,
            REGION,
            INSTANCE_TYPE,
            ARCH,
            OS,
            CAPACITY_TYPE,
            WINDOWS_BUILD,
        ]
        .into_iter()
        .map(String::from)
        .collect();
        LabelPolicy {
            well_known,
            restricted_domains: BTreeSet::from([GROUP.to_string()]),
        }
    }

    /// Adds well-known label keys (a provider's instance-type labels).
    pub fn with_well_known<I, S>(mut self, keys: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.well_known.extend(keys.into_iter().map(Into::into));
        self
    }

    /// Adds restricted label domains (a provider's own domain, e.g. `karpenter.k8s.aws`).
    pub fn with_restricted_domains<I, S>(mut self, domains: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.restricted_domains
            .extend(domains.into_iter().map(Into::into));
        self
    }

    /// Whether `key` is a well-known label.
    pub fn is_well_known(&self, key: &str) -> bool {
        self.well_known.contains(key)
    }

    /// The well-known label keys, sorted.
    pub fn well_known(&self) -> impl Iterator<Item = &str> {
        self.well_known.iter().map(String::as_str)
    }

    /// Whether `key` is restricted: `kubernetes.io/hostname`, or a key whose domain is a
    /// restricted domain or a subdomain of one, unless the key is well-known.
    pub fn is_restricted(&self, key: &str) -> bool {
        if key == HOSTNAME {
            return true;
        }
        if self.is_well_known(key) {
            return false;
        }
        match label_domain(key) {
            Some(domain) => self
                .restricted_domains
                .iter()
                .any(|r| domain == r || domain.ends_with(&format!(".{r}"))),
            None => false,
        }
    }
}

/// The domain (prefix before `/`) of a label key, if it has one.
pub fn label_domain(key: &str) -> Option<&str> {
    key.split_once('/').map(|(domain, _)| domain)
}

/// Kubernetes' qualified-name rule for label keys: an optional DNS-subdomain prefix (at most 253
/// characters) and `/`, then a name of at most 63 characters of `[A-Za-z0-9._-]` that starts and
/// ends with an alphanumeric character. Returns a description of the problem, if any.
pub fn validate_qualified_name(key: &str) -> Result<(), String> {
    let (prefix, name) = match key.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    if let Some(prefix) = prefix {
        if prefix.is_empty() {
            return Err("prefix part must be non-empty".into());
        }
        validate_dns_subdomain(prefix).map_err(|e| format!("prefix part {e}"))?;
    }
    if name.is_empty() {
        return Err("name part must be non-empty".into());
    }
    if name.len() > 63 {
        return Err("name part must be no more than 63 characters".into());
    }
    if !is_label_token(name) {
        return Err(
            "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
                .into(),
        );
    }
    Ok(())
}

/// Kubernetes' label-value rule: empty, or at most 63 characters of `[A-Za-z0-9._-]` starting and
/// ending with an alphanumeric character.
pub fn validate_label_value(value: &str) -> Result<(), String> {
    if value.is_empty() {
        return Ok(());
    }
    if value.len() > 63 {
        return Err("must be no more than 63 characters".into());
    }
    if !is_label_token(value) {
        return Err(
            "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
                .into(),
        );
    }
    Ok(())
}

/// Kubernetes' DNS-1123 subdomain rule: at most 253 characters of lowercase alphanumerics, `-`
/// and `.`, starting and ending with an alphanumeric character.
pub fn validate_dns_subdomain(value: &str) -> Result<(), String> {
    if value.len() > 253 {
        return Err("must be no more than 253 characters".into());
    }
    let ok_chars = value
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.');
    let ends_ok = value
        .bytes()
        .next()
        .zip(value.bytes().last())
        .is_some_and(|(a, z)| a.is_ascii_alphanumeric() && z.is_ascii_alphanumeric());
    if !ok_chars || !ends_ok {
        return Err("must be a lowercase RFC 1123 subdomain".into());
    }
    Ok(())
}

fn is_label_token(s: &str) -> bool {
    let bytes = s.as_bytes();
    let alnum = |b: u8| b.is_ascii_alphanumeric();
    !bytes.is_empty()
        && alnum(bytes[0])
        && alnum(bytes[bytes.len() - 1])
        && bytes
            .iter()
            .all(|&b| alnum(b) || b == b'-' || b == b'_' || b == b'.')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn restricted_rules() {
        let p = LabelPolicy::core();
        assert!(p.is_restricted(HOSTNAME));
        assert!(p.is_restricted("karpenter.sh/test"));
        assert!(p.is_restricted("sub.karpenter.sh/test"));
        assert!(
            !p.is_restricted(NODEPOOL),
            "well-known keys are not restricted"
        );
        assert!(!p.is_restricted("kubernetes.io/test"));
        assert!(!p.is_restricted("subdomain.k8s.io/test"));
        assert!(!p.is_restricted("notkarpenter.sh/test"));
        assert!(!p.is_restricted("plain"));
        let aws = p.with_restricted_domains(["karpenter.k8s.aws"]);
        assert!(aws.is_restricted("karpenter.k8s.aws/whatever"));
    }

    #[test]
    fn normalization() {
        assert_eq!(
            normalize_key("failure-domain.beta.kubernetes.io/zone"),
            ZONE
        );
        assert_eq!(normalize_key("custom"), "custom");
    }

    #[test]
    fn qualified_names() {
        assert!(validate_qualified_name("example.com/key").is_ok());
        assert!(validate_qualified_name("key_1.a-b").is_ok());
        assert!(validate_qualified_name("/key").is_err());
        assert!(validate_qualified_name("Example.com/key").is_err());
        assert!(validate_qualified_name("example.com/").is_err());
        assert!(validate_qualified_name("-key").is_err());
        assert!(validate_qualified_name(&"k".repeat(64)).is_err());
        assert!(validate_label_value("").is_ok());
        assert!(validate_label_value("a.b-c_d").is_ok());
        assert!(validate_label_value("a b").is_err());
    }
}

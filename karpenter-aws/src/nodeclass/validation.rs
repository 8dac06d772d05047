//! EC2NodeClass validation equal to upstream's v1 CRD: OpenAPI patterns, ranges and enums, and
//! the CEL rules, plus the tag and kubelet checks the node-class controller repeats at runtime.
//! Errors use karpenter-core's [`ValidationErrors`] with the same field-path style as NodePool
//! validation (`spec.amiSelectorTerms[0].alias`, `spec.tags[karpenter.sh/nodepool]`).

use std::collections::BTreeMap;

use karpenter_core::api::{ValidationError, ValidationErrorKind as K, ValidationErrors};
use karpenter_core::resources::Quantity;

use super::{
    API_VERSION, Alias, AmiSelectorTerm, BlockDeviceMapping, EC2NodeClass, EC2NodeClassSpec, KIND,
    KubeletConfiguration,
};
use crate::catalog::AmiFamily;

/// At most this many terms in each selector list.
pub const MAX_SELECTOR_TERMS: usize = 30;
/// At most this many tags in one selector term.
pub const MAX_SELECTOR_TAGS: usize = 20;
/// At most this many block device mappings.
pub const MAX_BLOCK_DEVICE_MAPPINGS: usize = 50;
/// At most this many network interfaces.
pub const MAX_NETWORK_INTERFACES: usize = 150;
/// The longest alias.
pub const MAX_ALIAS_LENGTH: usize = 30;
/// The alias families.
pub const ALIAS_FAMILIES: &[&str] = &[
    "al2",
    "al2023",
    "bottlerocket",
    "windows2019",
    "windows2022",
    "windows2025",
];
/// The `amiFamily` values.
pub const AMI_FAMILIES: &[&str] = &[
    "AL2",
    "AL2023",
    "Bottlerocket",
    "Custom",
    "Windows2019",
    "Windows2022",
    "Windows2025",
];
/// `spec.tags` keys a user may not set (Karpenter writes them).
pub const RESTRICTED_TAG_KEYS: &[&str] = &[
    "eks:eks-cluster-name",
    "karpenter.sh/nodepool",
    "karpenter.sh/nodeclaim",
    "karpenter.k8s.aws/ec2nodeclass",
];
/// `spec.tags` key prefix a user may not use.
pub const RESTRICTED_TAG_PREFIX: &str = "kubernetes.io/cluster";
/// Keys of `kubelet.systemReserved` / `kubeReserved`.
pub const RESERVED_RESOURCE_KEYS: &[&str] = &["cpu", "memory", "ephemeral-storage", "pid"];
/// Keys of `kubelet.evictionHard` / `evictionSoft` / `evictionSoftGracePeriod`.
pub const EVICTION_SIGNALS: &[&str] = &[
    "memory.available",
    "nodefs.available",
    "nodefs.inodesFree",
    "imagefs.available",
    "imagefs.inodesFree",
    "pid.available",
];
/// The kubelet fields Karpenter manages; the only ones families other than AL2023 and Custom
/// accept.
pub const MANAGED_KUBELET_FIELDS: &[&str] = &[
    "clusterDNS",
    "maxPods",
    "podsPerCore",
    "systemReserved",
    "kubeReserved",
    "evictionHard",
    "evictionSoft",
    "evictionSoftGracePeriod",
    "evictionMaxPodGracePeriod",
    "imageGCHighThresholdPercent",
    "imageGCLowThresholdPercent",
    "cpuCFSQuota",
];
/// EBS volume types.
pub const VOLUME_TYPES: &[&str] = &["standard", "io1", "io2", "gp2", "sc1", "st1", "gp3"];

#[derive(Clone)]
struct Path(String);

impl Path {
    fn new(s: &str) -> Path {
        Path(s.to_string())
    }
    fn field(&self, name: &str) -> Path {
        Path(format!("{}.{name}", self.0))
    }
    fn index(&self, i: usize) -> Path {
        Path(format!("{}[{i}]", self.0))
    }
    fn key(&self, k: &str) -> Path {
        Path(format!("{}[{k}]", self.0))
    }
}

struct Errs(Vec<ValidationError>);

impl Errs {
    fn push(&mut self, path: &Path, kind: K, message: impl Into<String>) {
        self.0.push(ValidationError {
            path: path.0.clone(),
            kind,
            message: message.into(),
        });
    }
}

/// Whether `s` contains `prefix` followed by at least one of `[0-9a-z]` (the CRD patterns such
/// as `ami-[0-9a-z]+` are unanchored, so this is what the API server checks).
fn contains_id(s: &str, prefix: &str) -> bool {
    s.match_indices(prefix).any(|(i, _)| {
        s[i + prefix.len()..]
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_digit() || c.is_ascii_lowercase())
    })
}

/// Whether `s` is exactly `prefix` followed by `[0-9a-z]+` (the anchored patterns).
fn is_id(s: &str, prefix: &str) -> bool {
    s.strip_prefix(prefix).is_some_and(|rest| {
        !rest.is_empty()
            && rest
                .chars()
                .all(|c| c.is_ascii_digit() || c.is_ascii_lowercase())
    })
}

impl EC2NodeClass {
    /// Checks the class against upstream's CRD (schema and CEL rules) and the tag and kubelet
    /// checks of upstream's node-class controller, returning every violation.
    ///
    /// Rules (paths relative to the object):
    /// - `apiVersion` `karpenter.k8s.aws/v1`, `kind` `EC2NodeClass`, `metadata.name` set;
    /// - exactly one of `spec.role` / `spec.instanceProfile`, each non-empty;
    /// - `amiFamily` one of [`AMI_FAMILIES`]; required unless a term has an alias; with an alias
    ///   it equals the alias family or is `Custom`;
    /// - `amiSelectorTerms`: 1..30 terms; each sets tags, id, name, alias or ssmParameter; `id`
    ///   excludes alias/tags/name/owner; `alias` excludes id/tags/name/owner and must be the only
    ///   term; alias `^[a-zA-Z0-9]+@.+$`, at most 30 characters, family in [`ALIAS_FAMILIES`],
    ///   Windows only `@latest`; id pattern `ami-[0-9a-z]+`;
    /// - `subnetSelectorTerms`: 1..30; each has tags or id; id `subnet-[0-9a-z]+`; id and tags
    ///   together are rejected when every term mixes them (upstream's `!self.all(...)`);
    /// - `securityGroupSelectorTerms`: 1..30; tags, id or name; id `sg-[0-9a-z]+`; id and name
    ///   exclusivity with the same `all` quirk;
    /// - `capacityReservationSelectorTerms`: at most 30; tags, id or instanceMatchCriteria; id
    ///   `^cr-[0-9a-z]+$`; ownerID 12 digits; criteria `open`/`targeted`;
    /// - selector tag maps: at most 20 entries, no empty key or value;
    /// - `spec.tags`: no empty key, none of [`RESTRICTED_TAG_KEYS`], no key starting with
    ///   `kubernetes.io/cluster`;
    /// - `blockDeviceMappings`: at most 50, at most one `rootVolume`; `ebs` has snapshotID or
    ///   volumeSize; volumeSize a quantity of 1..59000Gi / 1..64000G / 1..58Ti / 1..64T;
    ///   volumeType one of [`VOLUME_TYPES`]; `volumeInitializationRate` 100..300 with a
    ///   snapshotID;
    /// - `metadataOptions`: httpEndpoint and httpProtocolIPv6 `enabled`/`disabled`, hop limit
    ///   1..64, httpTokens `required`/`optional`;
    /// - `instanceStorePolicy` `RAID0`; `ipPrefixCount` ≥ 0; `placementGroupSelector` exactly one
    ///   of name (non-empty) / id (`^pg-[0-9a-z]+$`); `networkInterfaces` as upstream;
    ///   `connectionTracking` ranges with at least one field; `cpuOptions.nestedVirtualization`
    ///   `enabled`/`disabled`;
    /// - `kubelet`: maxPods, podsPerCore ≥ 0; reserved maps keyed by [`RESERVED_RESOURCE_KEYS`]
    ///   with quantities not starting with `-`; eviction maps keyed by [`EVICTION_SIGNALS`];
    ///   every evictionSoft key has a grace period and vice versa; image GC thresholds 0..100,
    ///   high > low; `registerWithTaints` forbidden; fields outside [`MANAGED_KUBELET_FIELDS`]
    ///   and more than one clusterDNS entry only on AL2023 and Custom.
    pub fn validate(&self) -> Result<(), ValidationErrors> {
        let mut e = Errs(Vec::new());
        if self.api_version != API_VERSION {
            e.push(
                &Path::new("apiVersion"),
                K::NotSupported,
                format!("{:?}: supported values: {API_VERSION:?}", self.api_version),
            );
        }
        if self.kind != KIND {
            e.push(
                &Path::new("kind"),
                K::NotSupported,
                format!("{:?}: supported values: {KIND:?}", self.kind),
            );
        }
        if self.name().is_empty() {
            e.push(&Path::new("metadata.name"), K::Required, "name is required");
        }
        validate_spec(&mut e, &self.spec, &Path::new("spec"));
        if e.0.is_empty() {
            Ok(())
        } else {
            Err(ValidationErrors(e.0))
        }
    }
}

fn validate_spec(e: &mut Errs, spec: &EC2NodeClassSpec, p: &Path) {
    // role / instanceProfile
    match (&spec.role, &spec.instance_profile) {
        (Some(_), Some(_)) | (None, None) => e.push(
            &p.field("role"),
            K::Invalid,
            "must specify exactly one of ['role', 'instanceProfile']",
        ),
        _ => {}
    }
    if spec.role.as_deref() == Some("") {
        e.push(&p.field("role"), K::Invalid, "role cannot be empty");
    }
    if spec.instance_profile.as_deref() == Some("") {
        e.push(
            &p.field("instanceProfile"),
            K::Invalid,
            "instanceProfile cannot be empty",
        );
    }

    validate_ami_terms(e, spec, p);
    validate_subnet_terms(e, spec, &p.field("subnetSelectorTerms"));
    validate_sg_terms(e, spec, &p.field("securityGroupSelectorTerms"));
    validate_cr_terms(e, spec, &p.field("capacityReservationSelectorTerms"));

    let tags = p.field("tags");
    for k in spec.tags.keys() {
        if k.is_empty() {
            e.push(&tags, K::Invalid, "empty tag keys aren't supported");
        } else if RESTRICTED_TAG_KEYS.contains(&k.as_str()) || k.starts_with(RESTRICTED_TAG_PREFIX)
        {
            e.push(
                &tags.key(k),
                K::Forbidden,
                format!("tag contains a restricted tag matching {k:?}"),
            );
        }
    }

    validate_block_devices(
        e,
        &spec.block_device_mappings,
        &p.field("blockDeviceMappings"),
    );

    if let Some(m) = &spec.metadata_options {
        let mp = p.field("metadataOptions");
        enum_check(
            e,
            &mp.field("httpEndpoint"),
            m.http_endpoint.as_deref(),
            &["enabled", "disabled"],
        );
        enum_check(
            e,
            &mp.field("httpProtocolIPv6"),
            m.http_protocol_ipv6.as_deref(),
            &["enabled", "disabled"],
        );
        enum_check(
            e,
            &mp.field("httpTokens"),
            m.http_tokens.as_deref(),
            &["required", "optional"],
        );
        range_check(
            e,
            &mp.field("httpPutResponseHopLimit"),
            m.http_put_response_hop_limit,
            1,
            64,
        );
    }
    enum_check(
        e,
        &p.field("instanceStorePolicy"),
        spec.instance_store_policy.as_deref(),
        &["RAID0"],
    );
    if let Some(n) = spec.ip_prefix_count.filter(|n| *n < 0) {
        e.push(
            &p.field("ipPrefixCount"),
            K::Invalid,
            format!("{n}: must be greater than or equal to 0"),
        );
    }
    if let Some(pg) = &spec.placement_group_selector {
        let pp = p.field("placementGroupSelector");
        match (&pg.name, &pg.id) {
            (Some(_), Some(_)) | (None, None) => e.push(
                &pp,
                K::Invalid,
                "exactly one of 'name' or 'id' must be specified",
            ),
            _ => {}
        }
        if pg.name.as_deref() == Some("") {
            e.push(&pp.field("name"), K::Invalid, "must not be empty");
        }
        if let Some(id) = &pg.id
            && !is_id(id, "pg-")
        {
            e.push(
                &pp.field("id"),
                K::Invalid,
                format!("{id:?}: must match ^pg-[0-9a-z]+$"),
            );
        }
    }
    validate_network_interfaces(e, spec, &p.field("networkInterfaces"));
    if let Some(ct) = &spec.connection_tracking {
        let cp = p.field("connectionTracking");
        if ct.tcp_established_timeout.is_none()
            && ct.udp_stream_timeout.is_none()
            && ct.udp_timeout.is_none()
        {
            e.push(
                &cp,
                K::Required,
                "at least one of tcpEstablishedTimeout, udpStreamTimeout or udpTimeout must be set",
            );
        }
        range_check(
            e,
            &cp.field("tcpEstablishedTimeout"),
            ct.tcp_established_timeout,
            60,
            432_000,
        );
        range_check(
            e,
            &cp.field("udpStreamTimeout"),
            ct.udp_stream_timeout,
            60,
            180,
        );
        range_check(e, &cp.field("udpTimeout"), ct.udp_timeout, 30, 60);
    }
    if let Some(cpu) = &spec.cpu_options {
        enum_check(
            e,
            &p.field("cpuOptions").field("nestedVirtualization"),
            cpu.nested_virtualization.as_deref(),
            &["enabled", "disabled"],
        );
    }
    if let Some(k) = &spec.kubelet {
        validate_kubelet(e, k, spec.resolved_ami_family(), &p.field("kubelet"));
    }
}

fn enum_check(e: &mut Errs, p: &Path, value: Option<&str>, allowed: &[&str]) {
    if let Some(v) = value
        && !allowed.contains(&v)
    {
        e.push(
            p,
            K::NotSupported,
            format!("{v:?}: supported values: {}", quote_list(allowed)),
        );
    }
}

fn range_check(e: &mut Errs, p: &Path, value: Option<i64>, min: i64, max: i64) {
    if let Some(v) = value
        && !(min..=max).contains(&v)
    {
        e.push(p, K::Invalid, format!("{v}: must be in {min}..={max}"));
    }
}

fn quote_list(items: &[&str]) -> String {
    items
        .iter()
        .map(|s| format!("{s:?}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn selector_tags(e: &mut Errs, tags: &BTreeMap<String, String>, p: &Path) {
    if tags.len() > MAX_SELECTOR_TAGS {
        e.push(
            p,
            K::TooMany,
            format!(
                "{}: must have at most {MAX_SELECTOR_TAGS} items",
                tags.len()
            ),
        );
    }
    for (k, v) in tags {
        if k.is_empty() || v.is_empty() {
            e.push(
                &p.key(k),
                K::Invalid,
                "empty tag keys or values aren't supported",
            );
        }
    }
}

fn term_count(e: &mut Errs, n: usize, p: &Path, required: bool) {
    if required && n == 0 {
        e.push(p, K::Required, "must have at least one term");
    }
    if n > MAX_SELECTOR_TERMS {
        e.push(
            p,
            K::TooMany,
            format!("{n}: must have at most {MAX_SELECTOR_TERMS} items"),
        );
    }
}

fn validate_ami_terms(e: &mut Errs, spec: &EC2NodeClassSpec, p: &Path) {
    let tp = p.field("amiSelectorTerms");
    let terms = &spec.ami_selector_terms;
    term_count(e, terms.len(), &tp, true);
    let has_alias = terms.iter().any(|t| t.alias.is_some());
    if has_alias && terms.len() > 1 {
        e.push(
            &tp,
            K::Invalid,
            "'alias' is mutually exclusive, cannot be set with a combination of other amiSelectorTerms",
        );
    }
    for (i, t) in terms.iter().enumerate() {
        validate_ami_term(e, t, &tp.index(i));
    }
    match &spec.ami_family {
        Some(f) if !AMI_FAMILIES.contains(&f.as_str()) => e.push(
            &p.field("amiFamily"),
            K::NotSupported,
            format!("{f:?}: supported values: {}", quote_list(AMI_FAMILIES)),
        ),
        Some(f) => {
            if let Some(alias) = spec.alias()
                && let Some(family) = alias.family
                && f != "Custom"
                && AmiFamily::from_name(f) != Some(family)
            {
                e.push(
                    &p.field("amiFamily"),
                    K::Invalid,
                    format!(
                        "{f:?}: must be {:?} or \"Custom\" when using an alias of family {:?}",
                        family.name(),
                        alias.family_name
                    ),
                );
            }
        }
        None if !has_alias => e.push(
            &p.field("amiFamily"),
            K::Required,
            "must specify amiFamily if amiSelectorTerms does not contain an alias",
        ),
        None => {}
    }
}

fn validate_ami_term(e: &mut Errs, t: &AmiSelectorTerm, p: &Path) {
    let has_tags = !t.tags.is_empty();
    if !has_tags
        && t.id.is_none()
        && t.name.is_none()
        && t.alias.is_none()
        && t.ssm_parameter.is_none()
    {
        e.push(
            p,
            K::Required,
            "expected at least one, got none, ['tags', 'id', 'name', 'alias', 'ssmParameter']",
        );
    }
    if t.id.is_some() && (t.alias.is_some() || has_tags || t.name.is_some() || t.owner.is_some()) {
        e.push(
            &p.field("id"),
            K::Invalid,
            "'id' is mutually exclusive, cannot be set with a combination of other fields in amiSelectorTerms[*]",
        );
    }
    if t.alias.is_some() && (t.id.is_some() || has_tags || t.name.is_some() || t.owner.is_some()) {
        e.push(
            &p.field("alias"),
            K::Invalid,
            "'alias' is mutually exclusive, cannot be set with a combination of other fields in amiSelectorTerms[*]",
        );
    }
    if let Some(id) = &t.id
        && !contains_id(id, "ami-")
    {
        e.push(
            &p.field("id"),
            K::Invalid,
            format!("{id:?}: must match ami-[0-9a-z]+"),
        );
    }
    if let Some(alias) = &t.alias {
        let ap = p.field("alias");
        let parsed = Alias::parse(alias);
        let well_formed = !parsed.family_name.is_empty()
            && parsed
                .family_name
                .chars()
                .all(|c| c.is_ascii_alphanumeric())
            && alias.contains('@')
            && !parsed.version.is_empty();
        if alias.len() > MAX_ALIAS_LENGTH {
            e.push(
                &ap,
                K::Invalid,
                format!("must be at most {MAX_ALIAS_LENGTH} characters"),
            );
        }
        if !well_formed {
            e.push(
                &ap,
                K::Invalid,
                format!("{alias:?}: must match ^[a-zA-Z0-9]+@.+$"),
            );
        } else if parsed.family.is_none() {
            e.push(
                &ap,
                K::NotSupported,
                format!(
                    "{alias:?}: family is not supported, must be one of the following: {}",
                    ALIAS_FAMILIES.join(", ")
                ),
            );
        } else if parsed.family.is_some_and(AmiFamily::is_windows) && !parsed.is_latest() {
            e.push(
                &ap,
                K::Invalid,
                format!("{alias:?}: windows families may only specify version 'latest'"),
            );
        }
    }
    selector_tags(e, &t.tags, &p.field("tags"));
}

fn validate_subnet_terms(e: &mut Errs, spec: &EC2NodeClassSpec, p: &Path) {
    let terms = &spec.subnet_selector_terms;
    term_count(e, terms.len(), p, true);
    if !terms.is_empty() && terms.iter().all(|t| t.id.is_some() && !t.tags.is_empty()) {
        e.push(
            p,
            K::Invalid,
            "'id' is mutually exclusive, cannot be set with a combination of other fields in a subnet selector term",
        );
    }
    for (i, t) in terms.iter().enumerate() {
        let tp = p.index(i);
        if t.tags.is_empty() && t.id.is_none() {
            e.push(
                &tp,
                K::Required,
                "expected at least one, got none, ['tags', 'id']",
            );
        }
        if let Some(id) = &t.id
            && !contains_id(id, "subnet-")
        {
            e.push(
                &tp.field("id"),
                K::Invalid,
                format!("{id:?}: must match subnet-[0-9a-z]+"),
            );
        }
        selector_tags(e, &t.tags, &tp.field("tags"));
    }
}

fn validate_sg_terms(e: &mut Errs, spec: &EC2NodeClassSpec, p: &Path) {
    let terms = &spec.security_group_selector_terms;
    term_count(e, terms.len(), p, true);
    if !terms.is_empty()
        && terms
            .iter()
            .all(|t| t.id.is_some() && (!t.tags.is_empty() || t.name.is_some()))
    {
        e.push(
            p,
            K::Invalid,
            "'id' is mutually exclusive, cannot be set with a combination of other fields in a security group selector term",
        );
    }
    if !terms.is_empty()
        && terms
            .iter()
            .all(|t| t.name.is_some() && (!t.tags.is_empty() || t.id.is_some()))
    {
        e.push(
            p,
            K::Invalid,
            "'name' is mutually exclusive, cannot be set with a combination of other fields in a security group selector term",
        );
    }
    for (i, t) in terms.iter().enumerate() {
        let tp = p.index(i);
        if t.tags.is_empty() && t.id.is_none() && t.name.is_none() {
            e.push(
                &tp,
                K::Required,
                "expected at least one, got none, ['tags', 'id', 'name']",
            );
        }
        if let Some(id) = &t.id
            && !contains_id(id, "sg-")
        {
            e.push(
                &tp.field("id"),
                K::Invalid,
                format!("{id:?}: must match sg-[0-9a-z]+"),
            );
        }
        selector_tags(e, &t.tags, &tp.field("tags"));
    }
}

fn validate_cr_terms(e: &mut Errs, spec: &EC2NodeClassSpec, p: &Path) {
    let terms = &spec.capacity_reservation_selector_terms;
    term_count(e, terms.len(), p, false);
    if !terms.is_empty()
        && terms.iter().all(|t| {
            t.id.is_some()
                && (!t.tags.is_empty()
                    || t.owner_id.is_some()
                    || t.instance_match_criteria.is_some())
        })
    {
        e.push(
            p,
            K::Invalid,
            "'id' is mutually exclusive, cannot be set along with tags in a capacity reservation selector term",
        );
    }
    for (i, t) in terms.iter().enumerate() {
        let tp = p.index(i);
        if t.tags.is_empty() && t.id.is_none() && t.instance_match_criteria.is_none() {
            e.push(
                &tp,
                K::Required,
                "expected at least one, got none, ['tags', 'id', 'instanceMatchCriteria']",
            );
        }
        if let Some(id) = &t.id
            && !is_id(id, "cr-")
        {
            e.push(
                &tp.field("id"),
                K::Invalid,
                format!("{id:?}: must match ^cr-[0-9a-z]+$"),
            );
        }
        if let Some(owner) = &t.owner_id
            && !(owner.len() == 12 && owner.chars().all(|c| c.is_ascii_digit()))
        {
            e.push(
                &tp.field("ownerID"),
                K::Invalid,
                format!("{owner:?}: must match ^[0-9]{{12}}$"),
            );
        }
        enum_check(
            e,
            &tp.field("instanceMatchCriteria"),
            t.instance_match_criteria.as_deref(),
            &["open", "targeted"],
        );
        selector_tags(e, &t.tags, &tp.field("tags"));
    }
}

/// The largest `volumeSize` per unit (`^((?:[1-9][0-9]{0,3}|[1-4][0-9]{4}|[5][0-8][0-9]{3}|59000)Gi|...)$`).
fn volume_size_ok(s: &str) -> bool {
    for (unit, max) in [("Gi", 59_000u32), ("Ti", 58), ("G", 64_000), ("T", 64)] {
        if let Some(n) = s.strip_suffix(unit) {
            return !n.is_empty()
                && !n.starts_with('0')
                && n.chars().all(|c| c.is_ascii_digit())
                && n.parse::<u32>().is_ok_and(|v| (1..=max).contains(&v));
        }
    }
    false
}

fn validate_block_devices(e: &mut Errs, bdms: &[BlockDeviceMapping], p: &Path) {
    if bdms.len() > MAX_BLOCK_DEVICE_MAPPINGS {
        e.push(
            p,
            K::TooMany,
            format!(
                "{}: must have at most {MAX_BLOCK_DEVICE_MAPPINGS} items",
                bdms.len()
            ),
        );
    }
    if bdms.iter().filter(|b| b.root_volume).count() > 1 {
        e.push(
            p,
            K::Invalid,
            "must have only one blockDeviceMappings with rootVolume",
        );
    }
    for (i, b) in bdms.iter().enumerate() {
        let Some(ebs) = &b.ebs else { continue };
        let ep = p.index(i).field("ebs");
        if ebs.snapshot_id.is_none() && ebs.volume_size.is_none() {
            e.push(&ep, K::Required, "snapshotID or volumeSize must be defined");
        }
        if let Some(size) = &ebs.volume_size
            && !volume_size_ok(size)
        {
            e.push(
                &ep.field("volumeSize"),
                K::Invalid,
                format!("{size:?}: must be 1-59000Gi, 1-64000G, 1-58Ti or 1-64T"),
            );
        }
        enum_check(
            e,
            &ep.field("volumeType"),
            ebs.volume_type.as_deref(),
            VOLUME_TYPES,
        );
        if let Some(rate) = ebs.volume_initialization_rate {
            range_check(
                e,
                &ep.field("volumeInitializationRate"),
                Some(rate),
                100,
                300,
            );
            if ebs.snapshot_id.is_none() {
                e.push(
                    &ep.field("volumeInitializationRate"),
                    K::Invalid,
                    "volumeInitializationRate requires snapshotID",
                );
            }
        }
        for (name, v) in [("iops", ebs.iops), ("throughput", ebs.throughput)] {
            if let Some(v) = v.filter(|v| *v < 0) {
                e.push(
                    &ep.field(name),
                    K::Invalid,
                    format!("{v}: must be greater than or equal to 0"),
                );
            }
        }
    }
}

fn validate_network_interfaces(e: &mut Errs, spec: &EC2NodeClassSpec, p: &Path) {
    let nis = &spec.network_interfaces;
    if nis.is_empty() {
        return;
    }
    if nis.len() > MAX_NETWORK_INTERFACES {
        e.push(
            p,
            K::TooMany,
            format!(
                "{}: must have at most {MAX_NETWORK_INTERFACES} items",
                nis.len()
            ),
        );
    }
    if !nis.iter().any(|n| {
        n.network_card_index == 0 && n.device_index == 0 && n.interface_type == "interface"
    }) {
        e.push(
            p,
            K::Required,
            "must include an interface of type 'interface' at networkCardIndex 0, deviceIndex 0",
        );
    }
    let mut seen = std::collections::BTreeSet::new();
    let mut efa_per_card: BTreeMap<i64, usize> = BTreeMap::new();
    for (i, n) in nis.iter().enumerate() {
        let np = p.index(i);
        if n.network_card_index < 0 {
            e.push(&np.field("networkCardIndex"), K::Invalid, "must be >= 0");
        }
        if n.device_index < 0 {
            e.push(&np.field("deviceIndex"), K::Invalid, "must be >= 0");
        }
        enum_check(
            e,
            &np.field("interfaceType"),
            Some(&n.interface_type),
            &["interface", "efa-only"],
        );
        if !seen.insert((n.network_card_index, n.device_index)) {
            e.push(
                &np,
                K::Duplicate,
                "networkCardIndex and deviceIndex pairs must be unique",
            );
        }
        if n.interface_type == "efa-only" {
            let c = efa_per_card.entry(n.network_card_index).or_default();
            *c += 1;
            if *c > 1 {
                e.push(
                    &np,
                    K::Invalid,
                    "at most one efa-only interface per network card",
                );
            }
        }
    }
}

fn validate_kubelet(e: &mut Errs, k: &KubeletConfiguration, family: Option<AmiFamily>, p: &Path) {
    for (name, v) in [("maxPods", k.max_pods), ("podsPerCore", k.pods_per_core)] {
        if let Some(v) = v.filter(|v| *v < 0) {
            e.push(
                &p.field(name),
                K::Invalid,
                format!("{v}: must be greater than or equal to 0"),
            );
        }
    }
    for (name, map) in [
        ("systemReserved", &k.system_reserved),
        ("kubeReserved", &k.kube_reserved),
    ] {
        let mp = p.field(name);
        for (key, value) in map.iter().flatten() {
            if !RESERVED_RESOURCE_KEYS.contains(&key.as_str()) {
                e.push(
                    &mp.key(key),
                    K::NotSupported,
                    format!(
                        "valid keys for {name} are {}",
                        quote_list(RESERVED_RESOURCE_KEYS)
                    ),
                );
            }
            if value.starts_with('-') {
                e.push(
                    &mp.key(key),
                    K::Invalid,
                    format!("{value:?}: must not be negative"),
                );
            } else if Quantity::parse(value).is_err() {
                e.push(
                    &mp.key(key),
                    K::Invalid,
                    format!("{value:?}: not a quantity"),
                );
            }
        }
    }
    for (name, map) in [
        ("evictionHard", &k.eviction_hard),
        ("evictionSoft", &k.eviction_soft),
        ("evictionSoftGracePeriod", &k.eviction_soft_grace_period),
    ] {
        let mp = p.field(name);
        for (key, value) in map.iter().flatten() {
            if !EVICTION_SIGNALS.contains(&key.as_str()) {
                e.push(
                    &mp.key(key),
                    K::NotSupported,
                    format!("valid keys for {name} are {}", quote_list(EVICTION_SIGNALS)),
                );
            }
            if name != "evictionSoftGracePeriod" && !eviction_value_ok(value) {
                e.push(
                    &mp.key(key),
                    K::Invalid,
                    format!("{value:?}: must be a quantity or a percentage"),
                );
            }
        }
    }
    let soft = k.eviction_soft.clone().unwrap_or_default();
    let grace = k.eviction_soft_grace_period.clone().unwrap_or_default();
    for key in soft.keys().filter(|key| !grace.contains_key(*key)) {
        e.push(
            &p.field("evictionSoft").key(key),
            K::Invalid,
            format!("key {key:?} does not have a matching evictionSoftGracePeriod"),
        );
    }
    for key in grace.keys().filter(|key| !soft.contains_key(*key)) {
        e.push(
            &p.field("evictionSoftGracePeriod").key(key),
            K::Invalid,
            format!("key {key:?} does not have a matching evictionSoft threshold value"),
        );
    }
    range_check(
        e,
        &p.field("imageGCHighThresholdPercent"),
        k.image_gc_high_threshold_percent,
        0,
        100,
    );
    range_check(
        e,
        &p.field("imageGCLowThresholdPercent"),
        k.image_gc_low_threshold_percent,
        0,
        100,
    );
    if let (Some(hi), Some(lo)) = (
        k.image_gc_high_threshold_percent,
        k.image_gc_low_threshold_percent,
    ) && hi <= lo
    {
        e.push(
            &p.field("imageGCHighThresholdPercent"),
            K::Invalid,
            "imageGCHighThresholdPercent must be greater than imageGCLowThresholdPercent",
        );
    }
    if k.extra.contains_key("registerWithTaints") {
        e.push(
            &p.field("registerWithTaints"),
            K::Forbidden,
            "Karpenter sets registerWithTaints; use the NodePool's taints",
        );
    }
    let arbitrary = matches!(family, Some(AmiFamily::Al2023 | AmiFamily::Custom));
    if !arbitrary {
        for key in k.extra.keys().filter(|key| *key != "registerWithTaints") {
            e.push(
                &p.field(key),
                K::Forbidden,
                format!(
                    "unsupported kubelet field for this AMI family; supported fields are {}",
                    MANAGED_KUBELET_FIELDS.join(", ")
                ),
            );
        }
        if k.cluster_dns.len() > 1 {
            e.push(
                &p.field("clusterDNS"),
                K::TooMany,
                "at most one clusterDNS entry for this AMI family",
            );
        }
    }
}

fn eviction_value_ok(v: &str) -> bool {
    match v.strip_suffix('%') {
        Some(n) => n
            .parse::<f64>()
            .is_ok_and(|p| p.is_finite() && (0.0..=100.0).contains(&p)),
        None => !v.starts_with('-') && Quantity::parse(v).is_ok(),
    }
}

#[cfg(test)]
mod unit {
    use super::*;

    #[test]
    fn id_patterns() {
        assert!(contains_id("ami-0abc", "ami-"));
        assert!(contains_id("x-ami-1", "ami-"));
        assert!(!contains_id("ami-", "ami-"));
        assert!(!contains_id("ami-ABC", "ami-"));
        assert!(is_id("cr-12ab", "cr-"));
        assert!(!is_id("xcr-12ab", "cr-"));
    }

    #[test]
    fn volume_sizes() {
        for ok in ["1Gi", "100Gi", "59000Gi", "64000G", "58Ti", "64T"] {
            assert!(volume_size_ok(ok), "{ok}");
        }
        for bad in ["0Gi", "59001Gi", "65T", "100", "10Mi", "01Gi", "Gi"] {
            assert!(!volume_size_ok(bad), "{bad}");
        }
    }
}

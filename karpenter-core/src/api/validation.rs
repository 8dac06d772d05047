//! Validation equal to upstream's: the CRD's OpenAPI patterns and CEL rules, plus the runtime
//! checks upstream runs before a NodePool becomes ready (`RuntimeValidate`). Every error is
//! reported, each with the path of the offending field.

use std::collections::BTreeSet;
use std::fmt;

use super::cron::{Schedule, matches_schedule_pattern};
use super::duration::{Duration, NillableDuration};
use super::meta::Condition;
use super::nodeclaim::NodeClaim;
use super::nodepool::{Budget, NODEPOOL_KIND, NodeClassReference, NodePool};
use super::{API_VERSION, nodeclaim::NODECLAIM_KIND};
use crate::labels::{self, LabelPolicy};
use crate::requirements::{NodeSelectorRequirement, Operator};
use crate::taints::Taint;

/// What kind of rule a field breaks (after Kubernetes' `field.ErrorType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum ValidationErrorKind {
    /// A required field is missing or empty.
    Required,
    /// A value has the wrong JSON type (a string where a number is expected, ...).
    Type,
    /// A value breaks a pattern, range or rule.
    Invalid,
    /// A value is not one of the allowed values.
    NotSupported,
    /// A value appears twice where it must be unique.
    Duplicate,
    /// A list or map has more entries than allowed.
    TooMany,
    /// A value (a label key or domain) is reserved.
    Forbidden,
}

impl ValidationErrorKind {
    fn describe(self) -> &'static str {
        match self {
            ValidationErrorKind::Required => "Required value",
            ValidationErrorKind::Type => "Invalid type",
            ValidationErrorKind::Invalid => "Invalid value",
            ValidationErrorKind::NotSupported => "Unsupported value",
            ValidationErrorKind::Duplicate => "Duplicate value",
            ValidationErrorKind::TooMany => "Too many",
            ValidationErrorKind::Forbidden => "Forbidden",
        }
    }
}

/// One broken rule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {}: {message}", kind.describe())]
pub struct ValidationError {
    /// The field, e.g. `spec.template.spec.requirements[2].values`.
    pub path: String,
    /// The kind of rule.
    pub kind: ValidationErrorKind,
    /// What is wrong.
    pub message: String,
}

/// All the rules an object breaks (never empty when returned as an error).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ValidationErrors(pub Vec<ValidationError>);

impl ValidationErrors {
    /// The errors.
    pub fn errors(&self) -> &[ValidationError] {
        &self.0
    }

    /// The paths of the errors, in order.
    pub fn paths(&self) -> Vec<&str> {
        self.0.iter().map(|e| e.path.as_str()).collect()
    }

    /// Whether some error is about exactly `path`.
    pub fn has_path(&self, path: &str) -> bool {
        self.0.iter().any(|e| e.path == path)
    }

    /// Whether there is no error.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The number of errors.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    fn push(&mut self, path: &Path, kind: ValidationErrorKind, message: impl Into<String>) {
        self.0.push(ValidationError {
            path: path.0.clone(),
            kind,
            message: message.into(),
        });
    }

    pub(crate) fn into_result(self) -> Result<(), ValidationErrors> {
        if self.0.is_empty() { Ok(()) } else { Err(self) }
    }
}

impl fmt::Display for ValidationErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ValidationErrors {}

impl IntoIterator for ValidationErrors {
    type Item = ValidationError;
    type IntoIter = std::vec::IntoIter<ValidationError>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter()
    }
}

/// A field path under construction (`spec.template.spec.requirements[2].values`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Path(pub(crate) String);

impl Path {
    pub(crate) fn root() -> Self {
        Path(String::new())
    }

    pub(crate) fn field(&self, name: &str) -> Self {
        if self.0.is_empty() {
            Path(name.to_string())
        } else {
            Path(format!("{}.{name}", self.0))
        }
    }

    pub(crate) fn index(&self, i: usize) -> Self {
        Path(format!("{}[{i}]", self.0))
    }

    pub(crate) fn key(&self, k: &str) -> Self {
        Path(format!("{}[{k}]", self.0))
    }
}

use ValidationErrorKind as K;

/// At most this many requirements (CRD `maxItems`).
pub const MAX_REQUIREMENTS: usize = 100;
/// At most this many template labels (CRD `maxProperties`).
pub const MAX_TEMPLATE_LABELS: usize = 100;
/// At most this many budgets, and reasons per budget (CRD `maxItems`).
pub const MAX_BUDGETS: usize = 50;
/// `minValues` range (CRD `minimum`/`maximum`).
pub const MIN_VALUES_RANGE: std::ops::RangeInclusive<i64> = 1..=50;
/// `weight` range (CRD `minimum`/`maximum`).
pub const WEIGHT_RANGE: std::ops::RangeInclusive<i32> = 1..=100;

impl NodePool {
    /// Checks the NodePool against upstream's CRD schema and CEL rules and its runtime
    /// validation, returning every violation. `policy` decides which label keys are restricted
    /// (upstream's `IsRestrictedLabel`; pass the cloud provider's policy).
    ///
    /// Rules (paths relative to the object):
    /// - `apiVersion` is `karpenter.sh/v1`, `kind` is `NodePool`;
    /// - template labels: at most 100; keys are qualified names, neither `karpenter.sh/nodepool`
    ///   nor `kubernetes.io/hostname`, not in a domain ending in `karpenter.sh` (except
    ///   `karpenter.sh/capacity-type`) and not restricted by `policy`; values are label values;
    /// - requirements: present (the v1 CRD requires the list, which may be empty), at most 100,
    ///   each as [`validate_requirement`] with the NodePool rules (`karpenter.sh/nodepool`
    ///   forbidden, `policy` applied, capacity-type values known);
    /// - taints and startup taints: keys and non-empty values are qualified names; a key/effect
    ///   pair appears once across both lists;
    /// - `nodeClassRef`: group, kind, name non-empty, group without `/`;
    /// - `expireAfter`, `consolidateAfter`: `^(([0-9]+(s|m|h))+|Never)$`;
    ///   `terminationGracePeriod`: `^([0-9]+(s|m|h))+$`;
    /// - budgets: at most 50; `nodes` matches `^((100|[0-9]{1,2})%|[0-9]+)$`; `schedule` and
    ///   `duration` both set or both unset; `schedule` matches the CRD pattern and parses as
    ///   cron; `duration` matches `^((([0-9]+(h|m))|([0-9]+h[0-9]+m))(0s)?)$`; `reasons`
    ///   unique, at most 50;
    /// - `weight` in 1..=100; `replicas` ≥ 0; with `replicas`, no `weight` and no limit but
    ///   `nodes`;
    /// - status conditions: `type`, `status`, `reason`, `message`, `lastTransitionTime` present
    ///   and well-formed, types unique.
    pub fn validate(&self, policy: &LabelPolicy) -> Result<(), ValidationErrors> {
        let mut errs = ValidationErrors::default();
        let root = Path::root();
        check_type_meta(
            &mut errs,
            &root,
            &self.api_version,
            &self.kind,
            NODEPOOL_KIND,
        );
        let spec = root.field("spec");
        let template = spec.field("template");

        // Template labels.
        let labels_path = template.field("metadata").field("labels");
        let labels = &self.spec.template.metadata.labels;
        if labels.len() > MAX_TEMPLATE_LABELS {
            errs.push(
                &labels_path,
                K::TooMany,
                format!("must have at most {MAX_TEMPLATE_LABELS} items"),
            );
        }
        for (key, value) in labels {
            let p = labels_path.key(key);
            if let Err(e) = labels::validate_qualified_name(key) {
                errs.push(&p, K::Invalid, format!("invalid key name {key:?}: {e}"));
            }
            if let Err(e) = labels::validate_label_value(value) {
                errs.push(&p, K::Invalid, format!("invalid value {value:?}: {e}"));
            }
            if let Some(reason) = restricted_label(key, key, Some(policy), true) {
                errs.push(&p, K::Forbidden, reason);
            }
        }

        // Template spec.
        let tspec = template.field("spec");
        let ts = &self.spec.template.spec;
        check_requirements(
            &mut errs,
            &tspec.field("requirements"),
            ts.requirements.as_deref(),
            Some(policy),
        );
        check_taints(&mut errs, &tspec, &ts.taints, &ts.startup_taints, true);
        check_node_class_ref(&mut errs, &tspec.field("nodeClassRef"), &ts.node_class_ref);
        if let Some(d) = &ts.expire_after {
            check_nillable(&mut errs, &tspec.field("expireAfter"), d);
        }
        if let Some(d) = &ts.termination_grace_period {
            check_grace_period(&mut errs, &tspec.field("terminationGracePeriod"), d);
        }

        // Disruption.
        let dis = spec.field("disruption");
        if let Some(d) = &self.spec.disruption.consolidate_after {
            check_nillable(&mut errs, &dis.field("consolidateAfter"), d);
        }
        if let Some(budgets) = &self.spec.disruption.budgets {
            let bp = dis.field("budgets");
            if budgets.len() > MAX_BUDGETS {
                errs.push(
                    &bp,
                    K::TooMany,
                    format!("must have at most {MAX_BUDGETS} items"),
                );
            }
            for (i, b) in budgets.iter().enumerate() {
                check_budget(&mut errs, &bp.index(i), b);
            }
        }

        // Weight, replicas, static pools.
        if let Some(w) = self.spec.weight
            && !WEIGHT_RANGE.contains(&w)
        {
            errs.push(
                &spec.field("weight"),
                K::Invalid,
                format!("{w}: must be between 1 and 100"),
            );
        }
        if let Some(r) = self.spec.replicas {
            if r < 0 {
                errs.push(
                    &spec.field("replicas"),
                    K::Invalid,
                    format!("{r}: must be greater than or equal to 0"),
                );
            }
            if let Some(limits) = &self.spec.limits
                && limits.keys().any(|k| k != "nodes")
            {
                errs.push(
                    &spec.field("limits"),
                    K::Forbidden,
                    "only 'limits.nodes' is supported on static NodePools",
                );
            }
            if self.spec.weight.is_some() {
                errs.push(
                    &spec.field("weight"),
                    K::Forbidden,
                    "'weight' is not supported on static NodePools",
                );
            }
        }

        if let Some(status) = &self.status {
            check_conditions(
                &mut errs,
                &root.field("status").field("conditions"),
                &status.conditions,
                true,
            );
        }
        errs.into_result()
    }
}

impl NodeClaim {
    /// Checks the NodeClaim against upstream's NodeClaim CRD (which has no runtime validation of
    /// its own): requirements (present, at most 100, keys well-formed, not
    /// `kubernetes.io/hostname`, not in a domain ending in `karpenter.sh` except
    /// `karpenter.sh/capacity-type` and `karpenter.sh/nodepool`, operator/value rules as
    /// [`validate_requirement`]), taint keys and values, `nodeClassRef`, durations, and status
    /// conditions (`type`, `status` and `lastTransitionTime` required, types unique).
    pub fn validate(&self) -> Result<(), ValidationErrors> {
        let mut errs = ValidationErrors::default();
        let root = Path::root();
        check_type_meta(
            &mut errs,
            &root,
            &self.api_version,
            &self.kind,
            NODECLAIM_KIND,
        );
        let spec = root.field("spec");
        let s = &self.spec;
        check_requirements(
            &mut errs,
            &spec.field("requirements"),
            s.requirements.as_deref(),
            None,
        );
        check_taints(&mut errs, &spec, &s.taints, &s.startup_taints, false);
        check_node_class_ref(&mut errs, &spec.field("nodeClassRef"), &s.node_class_ref);
        if let Some(d) = &s.expire_after {
            check_nillable(&mut errs, &spec.field("expireAfter"), d);
        }
        if let Some(d) = &s.termination_grace_period {
            check_grace_period(&mut errs, &spec.field("terminationGracePeriod"), d);
        }
        check_conditions(
            &mut errs,
            &root.field("status").field("conditions"),
            &self.status.conditions,
            false,
        );
        errs.into_result()
    }
}

fn check_type_meta(
    errs: &mut ValidationErrors,
    root: &Path,
    api_version: &str,
    kind: &str,
    want_kind: &str,
) {
    if api_version != API_VERSION {
        errs.push(
            &root.field("apiVersion"),
            K::NotSupported,
            format!("{api_version:?}: supported values: {API_VERSION:?}"),
        );
    }
    if kind != want_kind {
        errs.push(
            &root.field("kind"),
            K::NotSupported,
            format!("{kind:?}: supported values: {want_kind:?}"),
        );
    }
}

/// Why `key` may not be used as a label or requirement key, if it may not.
///
/// `raw` is the key as written (checked by the CRD's CEL rules), `normalized` the key after
/// upstream's alias normalisation (checked by the runtime rules when `policy` is given).
/// `nodepool_forbidden` is true for NodePools (the CEL rule forbidding `karpenter.sh/nodepool`).
fn restricted_label(
    raw: &str,
    normalized: &str,
    policy: Option<&LabelPolicy>,
    nodepool_forbidden: bool,
) -> Option<String> {
    if nodepool_forbidden && (raw == labels::NODEPOOL || normalized == labels::NODEPOOL) {
        return Some(format!("label {:?} is restricted", labels::NODEPOOL));
    }
    if raw == labels::HOSTNAME {
        return Some(format!("label {:?} is restricted", labels::HOSTNAME));
    }
    // CEL: self in [capacity-type, nodepool] || !self.find("^([^/]+)").endsWith("karpenter.sh").
    // Note `endsWith`: any domain ending in "karpenter.sh" (even "notkarpenter.sh") is caught.
    let domain = raw.split('/').next().unwrap_or("");
    if raw != labels::CAPACITY_TYPE && raw != labels::NODEPOOL && domain.ends_with(labels::GROUP) {
        return Some(format!("label domain {:?} is restricted", labels::GROUP));
    }
    if let Some(policy) = policy
        && policy.is_restricted(normalized)
    {
        return Some(format!(
            "using label {normalized} is not allowed as it might interfere with the internal provisioning logic; specify a well known label or a custom label that does not use a restricted domain"
        ));
    }
    None
}

fn check_requirements(
    errs: &mut ValidationErrors,
    path: &Path,
    requirements: Option<&[NodeSelectorRequirement]>,
    policy: Option<&LabelPolicy>,
) {
    let Some(requirements) = requirements else {
        errs.push(
            path,
            K::Required,
            "the v1 API requires the requirements list (it may be empty)",
        );
        return;
    };
    if requirements.len() > MAX_REQUIREMENTS {
        errs.push(
            path,
            K::TooMany,
            format!("must have at most {MAX_REQUIREMENTS} items"),
        );
    }
    for (i, r) in requirements.iter().enumerate() {
        for e in requirement_errors(r, policy, &path.index(i), policy.is_some()) {
            errs.0.push(e);
        }
    }
}

/// Validates one requirement as upstream does for NodePools (`policy` given: CRD rules plus
/// runtime rules, `karpenter.sh/nodepool` forbidden) or NodeClaims (`policy` `None`: CRD rules
/// only). Errors carry paths relative to the requirement (`key`, `values`, `values[1]`,
/// `minValues`).
///
/// Operator rules: `In` needs at least one value; `Gt`, `Lt`, `Gte`, `Lte` need exactly one value,
/// an integer ≥ 0; `NotIn`, `Exists` and `DoesNotExist` have no rule on values (upstream's CRD
/// only documents that `Exists`/`DoesNotExist` take none). `minValues` is in 1..=50, and with
/// `In` at most the number of values. Every value is a valid label value. For NodePools, an `In`
/// on `karpenter.sh/capacity-type` needs a known capacity type among its values (and at least
/// `minValues` known ones).
pub fn validate_requirement(
    requirement: &NodeSelectorRequirement,
    policy: Option<&LabelPolicy>,
) -> Result<(), ValidationErrors> {
    ValidationErrors(requirement_errors(
        requirement,
        policy,
        &Path::root(),
        policy.is_some(),
    ))
    .into_result()
}

/// The runtime rules of a NodeOverlay requirement (upstream's `ValidateRequirement`): those of
/// a NodePool requirement, except that `karpenter.sh/nodepool` is allowed.
pub(crate) fn overlay_requirement_runtime(
    requirement: &NodeSelectorRequirement,
    policy: &LabelPolicy,
) -> Result<(), ValidationErrors> {
    ValidationErrors(requirement_errors(
        requirement,
        Some(policy),
        &Path::root(),
        false,
    ))
    .into_result()
}

fn requirement_errors(
    r: &NodeSelectorRequirement,
    policy: Option<&LabelPolicy>,
    path: &Path,
    nodepool_forbidden: bool,
) -> Vec<ValidationError> {
    let mut errs = ValidationErrors::default();
    let key_path = path.field("key");
    let values_path = path.field("values");
    let normalized = labels::normalize_key(&r.key);

    // Key shape: runtime uses Kubernetes' qualified-name rule; the CRD's pattern (NodeClaims) is
    // the same shape without the per-part length limits, plus at most 316 characters.
    let key_error = if policy.is_some() {
        labels::validate_qualified_name(&r.key).err()
    } else {
        crd_key_pattern(&r.key).err()
    };
    if let Some(e) = key_error {
        errs.push(
            &key_path,
            K::Invalid,
            format!("key {:?} is not a qualified name: {e}", r.key),
        );
    }
    if let Some(reason) = restricted_label(&r.key, normalized, policy, nodepool_forbidden) {
        errs.push(&key_path, K::Forbidden, reason);
    }

    for (j, v) in r.values.iter().enumerate() {
        if let Err(e) = labels::validate_label_value(v) {
            errs.push(
                &values_path.index(j),
                K::Invalid,
                format!("invalid value {v:?} for key {}: {e}", r.key),
            );
        }
    }

    match r.operator {
        Operator::In if r.values.is_empty() => errs.push(
            &values_path,
            K::Required,
            format!("key {} with operator In must have a value defined", r.key),
        ),
        Operator::Gt | Operator::Lt | Operator::Gte | Operator::Lte => {
            let ok = match r.values.as_slice() {
                [v] => v.parse::<i64>().is_ok_and(|n| n >= 0),
                _ => false,
            };
            if !ok {
                errs.push(
                    &values_path,
                    K::Invalid,
                    format!(
                        "key {} with operator {} must have a single positive integer value",
                        r.key, r.operator
                    ),
                );
            }
        }
        _ => {}
    }

    if let Some(m) = r.min_values {
        if !MIN_VALUES_RANGE.contains(&m) {
            errs.push(
                &path.field("minValues"),
                K::Invalid,
                format!("{m}: must be between 1 and 50"),
            );
        }
        let count = i64::try_from(r.values.len()).unwrap_or(i64::MAX);
        if r.operator == Operator::In && count < m {
            errs.push(
                &values_path,
                K::Invalid,
                format!(
                    "key {} with operator In and minValues {m} must have at least {m} values, has {count}",
                    r.key
                ),
            );
        }
    }

    // Runtime (NodePool) check of well-known values: only capacity-type has a known value set.
    if policy.is_some() && normalized == labels::CAPACITY_TYPE && r.operator == Operator::In {
        let known = r
            .values
            .iter()
            .filter(|v| labels::CAPACITY_TYPES.contains(&v.as_str()))
            .count();
        let expected = labels::CAPACITY_TYPES.join(", ");
        if known == 0 {
            if !r.values.is_empty() {
                errs.push(
                    &values_path,
                    K::NotSupported,
                    format!(
                        "no valid values found in {:?} for {}, expected one of: {expected}",
                        r.values, r.key
                    ),
                );
            }
        } else if let Some(m) = r.min_values
            && i64::try_from(known).unwrap_or(i64::MAX) < m
        {
            errs.push(
                    &values_path,
                    K::Invalid,
                    format!(
                        "not enough valid values found in {:?} for {}, expected at least {m} valid values from: {expected}",
                        r.values, r.key
                    ),
                );
        }
    }
    errs.0
}

/// The CRD's key pattern
/// `^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*(\/))?([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$`
/// with `maxLength: 316`.
fn crd_key_pattern(key: &str) -> Result<(), String> {
    if key.len() > 316 {
        return Err("must be no more than 316 characters".into());
    }
    let (prefix, name) = match key.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    if let Some(prefix) = prefix {
        let label_ok = |l: &str| {
            let b = l.as_bytes();
            !b.is_empty()
                && b.iter()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
                && b.first().is_some_and(u8::is_ascii_alphanumeric)
                && b.last().is_some_and(u8::is_ascii_alphanumeric)
        };
        if !prefix.split('.').all(label_ok) {
            return Err("prefix part must be a lowercase RFC 1123 subdomain".into());
        }
    }
    let b = name.as_bytes();
    let ok = !b.is_empty()
        && b.first().is_some_and(u8::is_ascii_alphanumeric)
        && b.last().is_some_and(u8::is_ascii_alphanumeric)
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'));
    if !ok {
        return Err("name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character".into());
    }
    Ok(())
}

fn check_taints(
    errs: &mut ValidationErrors,
    spec: &Path,
    taints: &[Taint],
    startup: &[Taint],
    runtime: bool,
) {
    let mut seen = BTreeSet::new();
    for (field, list) in [("taints", taints), ("startupTaints", startup)] {
        let lp = spec.field(field);
        for (i, t) in list.iter().enumerate() {
            let p = lp.index(i);
            if t.key.is_empty() {
                errs.push(&p.field("key"), K::Required, "taint key may not be empty");
            } else {
                // Runtime uses the qualified-name rule; the CRD pattern is the same shape.
                let check = if runtime {
                    labels::validate_qualified_name(&t.key)
                } else {
                    crd_key_pattern(&t.key)
                };
                if let Err(e) = check {
                    errs.push(
                        &p.field("key"),
                        K::Invalid,
                        format!("invalid taint key {:?}: {e}", t.key),
                    );
                }
            }
            // Upstream checks taint values with the qualified-name rule too (CRD pattern and
            // runtime), which is stricter than the label-value rule in some ways and looser in
            // others (it allows one `/`).
            if !t.value.is_empty() {
                let check = if runtime {
                    labels::validate_qualified_name(&t.value)
                } else {
                    crd_key_pattern(&t.value)
                };
                if let Err(e) = check {
                    errs.push(
                        &p.field("value"),
                        K::Invalid,
                        format!("invalid taint value {:?}: {e}", t.value),
                    );
                }
            }
            if runtime && !seen.insert((t.key.clone(), t.effect)) {
                errs.push(
                    &p,
                    K::Duplicate,
                    format!(
                        "duplicate taint Key/Effect pair {}={}",
                        t.key,
                        t.effect.as_str()
                    ),
                );
            }
        }
    }
}

fn check_node_class_ref(errs: &mut ValidationErrors, path: &Path, r: &NodeClassReference) {
    if r.group.is_empty() {
        errs.push(&path.field("group"), K::Required, "group may not be empty");
    } else if r.group.contains('/') {
        errs.push(
            &path.field("group"),
            K::Invalid,
            format!("{:?}: must not contain '/'", r.group),
        );
    }
    if r.kind.is_empty() {
        errs.push(&path.field("kind"), K::Required, "kind may not be empty");
    }
    if r.name.is_empty() {
        errs.push(&path.field("name"), K::Required, "name may not be empty");
    }
}

fn check_nillable(errs: &mut ValidationErrors, path: &Path, d: &NillableDuration) {
    if !d.matches_api_pattern() {
        errs.push(
            path,
            K::Invalid,
            format!("{:?}: must match ^(([0-9]+(s|m|h))+|Never)$", d.as_str()),
        );
    }
}

fn check_grace_period(errs: &mut ValidationErrors, path: &Path, d: &Duration) {
    if !d.matches_api_pattern() {
        errs.push(
            path,
            K::Invalid,
            format!("{:?}: must match ^([0-9]+(s|m|h))+$", d.as_str()),
        );
    }
}

/// `^((100|[0-9]{1,2})%|[0-9]+)$`.
fn matches_budget_nodes(nodes: &str) -> bool {
    if let Some(pct) = nodes.strip_suffix('%') {
        pct == "100" || (matches!(pct.len(), 1 | 2) && pct.bytes().all(|b| b.is_ascii_digit()))
    } else {
        !nodes.is_empty() && nodes.bytes().all(|b| b.is_ascii_digit())
    }
}

fn check_budget(errs: &mut ValidationErrors, p: &Path, b: &Budget) {
    if !matches_budget_nodes(&b.nodes) {
        errs.push(
            &p.field("nodes"),
            K::Invalid,
            format!("{:?}: must be an integer or a percentage 0%..100% (^((100|[0-9]{{1,2}})%|[0-9]+)$)", b.nodes),
        );
    }
    match (&b.schedule, &b.duration) {
        (Some(_), None) => errs.push(
            &p.field("duration"),
            K::Required,
            "'schedule' must be set with 'duration'",
        ),
        (None, Some(_)) => errs.push(
            &p.field("schedule"),
            K::Required,
            "'schedule' must be set with 'duration'",
        ),
        _ => {}
    }
    if let Some(s) = &b.schedule {
        if !matches_schedule_pattern(s) {
            errs.push(
                &p.field("schedule"),
                K::Invalid,
                format!("{s:?}: must be a 5-field cron expression or one of @annually, @yearly, @monthly, @weekly, @daily, @midnight, @hourly"),
            );
        } else if let Err(e) = Schedule::parse(s) {
            errs.push(&p.field("schedule"), K::Invalid, e.to_string());
        }
    }
    if let Some(d) = &b.duration
        && !d.matches_budget_pattern()
    {
        errs.push(
            &p.field("duration"),
            K::Invalid,
            format!(
                "{:?}: must be hours and/or minutes (^((([0-9]+(h|m))|([0-9]+h[0-9]+m))(0s)?)$)",
                d.as_str()
            ),
        );
    }
    if let Some(reasons) = &b.reasons {
        let rp = p.field("reasons");
        if reasons.len() > MAX_BUDGETS {
            errs.push(
                &rp,
                K::TooMany,
                format!("must have at most {MAX_BUDGETS} items"),
            );
        }
        let mut seen = BTreeSet::new();
        for (i, r) in reasons.iter().enumerate() {
            if !seen.insert(*r) {
                errs.push(&rp.index(i), K::Duplicate, format!("{:?}", r.as_str()));
            }
        }
    }
}

/// Condition `type` pattern (a qualified name, at most 316 characters).
fn check_conditions(
    errs: &mut ValidationErrors,
    path: &Path,
    conditions: &[Condition],
    nodepool: bool,
) {
    let mut seen = BTreeSet::new();
    for (i, c) in conditions.iter().enumerate() {
        let p = path.index(i);
        if c.type_.is_empty() {
            errs.push(&p.field("type"), K::Required, "type may not be empty");
        } else if let Err(e) = crd_key_pattern(&c.type_) {
            errs.push(&p.field("type"), K::Invalid, format!("{:?}: {e}", c.type_));
        }
        if !seen.insert(c.type_.as_str()) {
            errs.push(
                &p,
                K::Duplicate,
                format!("condition type {:?} appears twice", c.type_),
            );
        }
        match &c.last_transition_time {
            None => errs.push(
                &p.field("lastTransitionTime"),
                K::Required,
                "the CRD requires lastTransitionTime",
            ),
            Some(t) => {
                if t.parse::<jiff::Timestamp>().is_err() {
                    errs.push(
                        &p.field("lastTransitionTime"),
                        K::Invalid,
                        format!("{t:?}: must be an RFC 3339 date-time"),
                    );
                }
            }
        }
        match c.reason.as_deref() {
            None | Some("") if nodepool => {
                errs.push(&p.field("reason"), K::Required, "the CRD requires a reason")
            }
            None | Some("") => {}
            Some(r) => {
                if r.len() > 1024 || !reason_pattern(r) {
                    errs.push(
                        &p.field("reason"),
                        K::Invalid,
                        format!("{r:?}: must match ^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"),
                    );
                }
            }
        }
        match &c.message {
            None if nodepool => errs.push(
                &p.field("message"),
                K::Required,
                "the CRD requires a message",
            ),
            Some(m) if m.len() > 32768 => errs.push(
                &p.field("message"),
                K::Invalid,
                "must be no more than 32768 characters",
            ),
            _ => {}
        }
        if let Some(g) = c.observed_generation
            && g < 0
        {
            errs.push(
                &p.field("observedGeneration"),
                K::Invalid,
                format!("{g}: must be greater than or equal to 0"),
            );
        }
    }
}

/// `^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$`.
fn reason_pattern(r: &str) -> bool {
    let b = r.as_bytes();
    let inner = |c: &u8| c.is_ascii_alphanumeric() || matches!(c, b'_' | b',' | b':');
    b.first().is_some_and(u8::is_ascii_alphabetic)
        && b.last()
            .is_some_and(|c| c.is_ascii_alphanumeric() || *c == b'_')
        && b.iter().all(inner)
}

#[cfg(test)]
mod tests;

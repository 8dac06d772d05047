//! `NodeOverlay` (`karpenter.sh/v1alpha1`): a price, a price adjustment or extra extended
//! resources for the instance types (and offerings) its requirements select, with a weight
//! that orders overlays. How overlays apply: [`crate::overlay`].
//!
//! ```
//! use karpenter_core::api::NodeOverlay;
//!
//! let overlay: NodeOverlay = serde_json::from_value(serde_json::json!({
//!     "apiVersion": "karpenter.sh/v1alpha1",
//!     "kind": "NodeOverlay",
//!     "metadata": {"name": "discount"},
//!     "spec": {
//!         "requirements": [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]}],
//!         "priceAdjustment": "-10%",
//!         "weight": 10
//!     }
//! })).unwrap();
//! assert!(overlay.validate().is_ok());
//! assert_eq!(overlay.spec.effective_weight(), 10);
//! ```

use serde::{Deserialize, Serialize};

use super::meta::{Condition, ObjectMeta};
use super::null_as_default;
use super::validation::{ValidationError, ValidationErrorKind as K, ValidationErrors};
use crate::labels::LabelPolicy;
use crate::requirements::{NodeSelectorRequirement, Operator};
use crate::resources::ResourceList;

/// The API version of NodeOverlays.
pub const NODEOVERLAY_API_VERSION: &str = "karpenter.sh/v1alpha1";
/// The kind of a NodeOverlay.
pub const NODEOVERLAY_KIND: &str = "NodeOverlay";
/// The condition the controller writes on every NodeOverlay (it also feeds `Ready`).
pub const CONDITION_VALIDATION_SUCCEEDED: &str = "ValidationSucceeded";
/// The most requirements a NodeOverlay may have.
pub const MAX_OVERLAY_REQUIREMENTS: usize = 100;
/// The range of `spec.weight`.
pub const OVERLAY_WEIGHT_RANGE: std::ops::RangeInclusive<i32> = 1..=10000;
/// Resources an overlay's `capacity` may not set (upstream's well-known resources).
pub const RESTRICTED_OVERLAY_RESOURCES: [&str; 4] = ["cpu", "memory", "ephemeral-storage", "pods"];
/// Annotation upstream puts on a NodeClaim launched with an overlaid price.
pub const PRICE_OVERLAY_APPLIED_ANNOTATION: &str = "karpenter.sh/price-overlay-applied";
/// Annotation upstream puts on a NodeClaim launched with overlaid capacity.
pub const CAPACITY_OVERLAY_APPLIED_ANNOTATION: &str = "karpenter.sh/capacity-overlay-applied";

/// A NodeOverlay.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "kube", derive(schemars::JsonSchema))]
pub struct NodeOverlay {
    /// `karpenter.sh/v1alpha1`.
    #[serde(default = "default_api_version")]
    pub api_version: String,
    /// `NodeOverlay`.
    #[serde(default = "default_kind")]
    pub kind: String,
    /// Object metadata.
    #[serde(default, deserialize_with = "null_as_default")]
    pub metadata: ObjectMeta,
    /// The desired state.
    pub spec: NodeOverlaySpec,
    /// The observed state.
    #[serde(default, skip_serializing_if = "NodeOverlayStatus::is_empty")]
    pub status: NodeOverlayStatus,
}

fn default_api_version() -> String {
    NODEOVERLAY_API_VERSION.to_string()
}

fn default_kind() -> String {
    NODEOVERLAY_KIND.to_string()
}

/// A requirement of a NodeOverlay: a NodePool requirement without `minValues`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[cfg_attr(feature = "kube", derive(schemars::JsonSchema))]
pub struct OverlayRequirement {
    /// The label key.
    pub key: String,
    /// In, NotIn, Exists, DoesNotExist, Gt, Lt, Gte or Lte.
    pub operator: Operator,
    /// The values (one integer for Gt, Lt, Gte and Lte; none for Exists and DoesNotExist).
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "null_as_default"
    )]
    pub values: Vec<String>,
}

impl OverlayRequirement {
    /// The requirement as a NodePool-style requirement (no `minValues`).
    pub fn as_node_selector_requirement(&self) -> NodeSelectorRequirement {
        NodeSelectorRequirement::new(self.key.clone(), self.operator, self.values.clone())
    }
}

/// What a NodeOverlay changes, and where.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[cfg_attr(feature = "kube", derive(schemars::JsonSchema))]
pub struct NodeOverlaySpec {
    /// The instance types and offerings the overlay applies to: well-known labels (instance
    /// type, zone, capacity type, `karpenter.sh/nodepool`, provider labels) and the NodePools'
    /// template labels. Empty: every instance type of every NodePool.
    #[serde(default, deserialize_with = "null_as_default")]
    pub requirements: Vec<OverlayRequirement>,
    /// A change of price: `+0.5` / `-0.5` (added) or `+10%` / `-15%` (relative, at least
    /// -100%).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub price_adjustment: Option<String>,
    /// A price that replaces the offering's (`0.42`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub price: Option<String>,
    /// Extended resources added to (or replacing the same resource in) the capacity of the
    /// selected instance types; never cpu, memory, ephemeral-storage or pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<ResourceList>,
    /// The precedence among overlays that select the same instance type (1..=10000; unset
    /// counts as 0). Equal weights that change the same thing conflict.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<i32>,
}

impl NodeOverlaySpec {
    /// The weight, 0 when unset.
    pub fn effective_weight(&self) -> i32 {
        self.weight.unwrap_or(0)
    }

    /// The price change: `price` if set, else `priceAdjustment`.
    pub fn price_change(&self) -> Option<&str> {
        self.price.as_deref().or(self.price_adjustment.as_deref())
    }
}

/// The observed state of a NodeOverlay.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "kube", derive(schemars::JsonSchema))]
pub struct NodeOverlayStatus {
    /// `ValidationSucceeded` and `Ready`.
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "null_as_default"
    )]
    pub conditions: Vec<Condition>,
}

impl NodeOverlayStatus {
    fn is_empty(&self) -> bool {
        self.conditions.is_empty()
    }
}

impl Default for NodeOverlay {
    fn default() -> Self {
        NodeOverlay::new(String::new(), NodeOverlaySpec::default())
    }
}

/// Whether `text` matches upstream's `price` pattern `^\d+(\.\d+)?$`.
pub fn is_valid_price(text: &str) -> bool {
    let (int, frac) = match text.split_once('.') {
        Some((i, f)) => (i, Some(f)),
        None => (text, None),
    };
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    digits(int) && frac.is_none_or(digits)
}

/// Whether `text` matches upstream's `priceAdjustment` pattern: a signed number (`+0.5`,
/// `-3`, `+.5`), a positive percentage (`+10%`, `+250.5%`), or a negative one from `-0%` to
/// `-100%` (at most two integer digits, or exactly `-100%`).
pub fn is_valid_price_adjustment(text: &str) -> bool {
    // `\d*\.?\d+`: digits, optionally with one dot, ending in a digit.
    let number = |s: &str| {
        let (int, frac) = match s.split_once('.') {
            Some((i, f)) => (i, f),
            None => ("", s),
        };
        int.bytes().all(|b| b.is_ascii_digit())
            && !frac.is_empty()
            && frac.bytes().all(|b| b.is_ascii_digit())
    };
    if text == "-100%" {
        return true;
    }
    if let Some(pct) = text.strip_suffix('%') {
        if let Some(n) = pct.strip_prefix('+') {
            return number(n);
        }
        if let Some(n) = pct.strip_prefix('-') {
            // -\d{1,2}(\.\d+)?
            let (int, frac) = match n.split_once('.') {
                Some((i, f)) => (i, Some(f)),
                None => (n, None),
            };
            return (1..=2).contains(&int.len())
                && int.bytes().all(|b| b.is_ascii_digit())
                && frac.is_none_or(|f| !f.is_empty() && f.bytes().all(|b| b.is_ascii_digit()));
        }
        return false;
    }
    match text.strip_prefix('+').or_else(|| text.strip_prefix('-')) {
        Some(n) => number(n),
        None => false,
    }
}

/// `price` after an overlay's price change (upstream `AdjustedPrice`): an unsigned value
/// replaces it; `+x` / `-x` add; `+x%` / `-x%` scale; the result is never below zero. A change
/// that does not parse (validation rejects those) leaves the price unchanged.
pub fn adjusted_price(price: f64, change: &str) -> f64 {
    if change.is_empty() {
        return price;
    }
    if !change.starts_with('+') && !change.starts_with('-') {
        return change.parse().unwrap_or(price);
    }
    let adjusted = match change.strip_suffix('%') {
        Some(pct) => match pct.parse::<f64>() {
            Ok(p) => price * (1.0 + p / 100.0),
            Err(_) => return price,
        },
        None => match change.parse::<f64>() {
            Ok(d) => price + d,
            Err(_) => return price,
        },
    };
    adjusted.max(0.0)
}

impl NodeOverlay {
    /// A NodeOverlay named `name` with the given spec.
    pub fn new(name: impl Into<String>, spec: NodeOverlaySpec) -> Self {
        NodeOverlay {
            api_version: default_api_version(),
            kind: default_kind(),
            metadata: ObjectMeta::named(name),
            spec,
            status: NodeOverlayStatus::default(),
        }
    }

    /// The name (empty if unset).
    pub fn name(&self) -> &str {
        self.metadata.name_or_empty()
    }

    /// Upstream's CRD rules (patterns, ranges and CEL): every violation with its path
    /// (`spec.requirements[0].values`). The API server refuses such an object.
    pub fn validate(&self) -> Result<(), ValidationErrors> {
        let mut errs = Vec::new();
        let push = |errs: &mut Vec<ValidationError>, path: String, kind, message: String| {
            errs.push(ValidationError {
                path,
                kind,
                message,
            })
        };
        let spec = &self.spec;
        if spec.requirements.len() > MAX_OVERLAY_REQUIREMENTS {
            push(
                &mut errs,
                "spec.requirements".into(),
                K::TooMany,
                format!(
                    "{} requirements: must have at most {MAX_OVERLAY_REQUIREMENTS} items",
                    spec.requirements.len()
                ),
            );
        }
        for (i, r) in spec.requirements.iter().enumerate() {
            let path = format!("spec.requirements[{i}]");
            // The CRD's key pattern and restricted domains are the NodeClaim requirement rules;
            // karpenter.sh/nodepool is allowed.
            if let Err(e) =
                super::validation::validate_requirement(&r.as_node_selector_requirement(), None)
            {
                for e in e.0 {
                    push(&mut errs, format!("{path}.{}", e.path), e.kind, e.message);
                }
            }
            if r.operator == Operator::NotIn && r.values.is_empty() {
                push(
                    &mut errs,
                    format!("{path}.values"),
                    K::Required,
                    "requirements with operator 'NotIn' must have a value defined".into(),
                );
            }
        }
        if let Some(p) = &spec.price
            && !is_valid_price(p)
        {
            push(
                &mut errs,
                "spec.price".into(),
                K::Invalid,
                format!(
                    "{p:?}: must be an unsigned decimal number such as 0.42 (pattern ^\\d+(\\.\\d+)?$)"
                ),
            );
        }
        if let Some(p) = &spec.price_adjustment
            && !is_valid_price_adjustment(p)
        {
            push(
                &mut errs,
                "spec.priceAdjustment".into(),
                K::Invalid,
                format!(
                    "{p:?}: must be a signed number (+0.5, -0.5) or a signed percentage (+10%, \
                     -15%; not below -100%)"
                ),
            );
        }
        if spec.price.is_some() && spec.price_adjustment.is_some() {
            push(
                &mut errs,
                "spec".into(),
                K::Invalid,
                "cannot set both 'price' and 'priceAdjustment'".into(),
            );
        }
        if let Some(capacity) = &spec.capacity {
            for name in capacity.keys() {
                if RESTRICTED_OVERLAY_RESOURCES.contains(&name) {
                    push(
                        &mut errs,
                        format!("spec.capacity.{name}"),
                        K::Forbidden,
                        format!(
                            "invalid resource restricted: {name} (capacity adds extended \
                             resources only, never cpu, memory, ephemeral-storage or pods)"
                        ),
                    );
                }
            }
        }
        if let Some(w) = spec.weight
            && !OVERLAY_WEIGHT_RANGE.contains(&w)
        {
            push(
                &mut errs,
                "spec.weight".into(),
                K::Invalid,
                format!("{w}: must be between 1 and 10000"),
            );
        }
        ValidationErrors(errs).into_result()
    }

    /// Upstream's runtime validation (`RuntimeValidate`), which the controller reports in the
    /// `ValidationSucceeded` condition instead of refusing the object: requirement keys must be
    /// qualified names and not restricted under `policy` (well-known and
    /// `karpenter.sh/nodepool` allowed), capacity-type values known; `NotIn` needs values;
    /// `capacity` sets no well-known resource.
    pub fn runtime_validate(&self, policy: &LabelPolicy) -> Result<(), ValidationErrors> {
        let mut errs = Vec::new();
        for (i, r) in self.spec.requirements.iter().enumerate() {
            let path = format!("spec.requirements[{i}]");
            if let Err(e) = super::validation::overlay_requirement_runtime(
                &r.as_node_selector_requirement(),
                policy,
            ) {
                for e in e.0 {
                    errs.push(ValidationError {
                        path: format!("{path}.{}", e.path),
                        kind: e.kind,
                        message: format!(
                            "invalid value: {} in requirements, restricted",
                            e.message
                        ),
                    });
                }
            }
            if r.operator == Operator::NotIn && r.values.is_empty() {
                errs.push(ValidationError {
                    path: format!("{path}.values"),
                    kind: K::Required,
                    message: format!(
                        "key {} with operator NotIn must have a value defined",
                        r.key
                    ),
                });
            }
        }
        if let Some(capacity) = &self.spec.capacity {
            for name in capacity.keys() {
                if RESTRICTED_OVERLAY_RESOURCES.contains(&name) {
                    errs.push(ValidationError {
                        path: format!("spec.capacity.{name}"),
                        kind: K::Forbidden,
                        message: format!("invalid capacity: {name} in resource, restricted"),
                    });
                }
            }
        }
        ValidationErrors(errs).into_result()
    }
}

#[cfg(test)]
mod tests;

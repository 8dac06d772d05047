//! Serde types for the `karpenter.sh/v1` API (NodePool, NodeClaim) that accept upstream's YAML
//! unchanged, plus validation equal to upstream's CRD rules and the budget arithmetic the
//! disruption planner needs.
//!
//! # Reading objects
//!
//! The types deserialise from any serde format (`serde_saphyr::from_str::<NodePool>(yaml)`
//! works). Optional fields are `Option`s or empty collections, so an object serialises back with
//! upstream's field names and without fields the user did not write; upstream's defaults are
//! applied by accessors instead ([`Disruption::effective_budgets`],
//! [`Disruption::effective_consolidate_after`], [`Disruption::effective_consolidation_policy`],
//! [`NodeClaimTemplateSpec::effective_expire_after`], [`NodePoolSpec::effective_weight`]).
//! The one exception is a budget's `nodes`, which the CRD defaults inside each budget written
//! without it: it reads (and serialises) as `10%`.
//!
//! # Unknown fields
//!
//! Like the API server, the typed objects drop fields the schema does not define (metadata
//! excepted: unknown metadata fields are kept in [`ObjectMeta::extra`]). To learn which fields
//! were dropped, decode through a [`serde_json::Value`] with [`nodepool_from_value`] /
//! [`nodeclaim_from_value`] (or [`object_from_value`]), which report their paths
//! (`status.instanceType`) in [`Parsed::unknown_fields`]; [`unknown_fields_nodepool`] and
//! [`unknown_fields_nodeclaim`] give the list alone. The same walk names the field of every
//! value that cannot be decoded (`spec.template.spec.requirements[0].operator: Unsupported
//! value: unknown variant ...`), which a plain serde error does not.
//!
//! ```
//! use karpenter_core::api;
//! use serde_json::json;
//!
//! let value = json!({
//!     "apiVersion": "karpenter.sh/v1",
//!     "kind": "NodePool",
//!     "metadata": {"name": "default"},
//!     "spec": {"template": {"spec": {
//!         "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
//!         "requirements": [],
//!         "colour": "blue"
//!     }}}
//! });
//! let parsed = api::nodepool_from_value(value).unwrap();
//! assert_eq!(parsed.unknown_fields, ["spec.template.spec.colour"]);
//! assert!(parsed.object.validate(&karpenter_core::labels::LabelPolicy::core()).is_ok());
//! assert_eq!(parsed.object.spec.disruption.effective_budgets()[0].nodes, "10%");
//! ```
//!
//! # Validation
//!
//! [`NodePool::validate`] and [`NodeClaim::validate`] check upstream's CRD patterns and CEL
//! rules (and, for NodePools, upstream's runtime validation) and return every violation with its
//! path.

pub mod condition_types;
mod cron;
mod duration;
mod meta;
mod nodeclaim;
mod nodeoverlay;
mod nodepool;
mod schema;
mod validation;

use serde::{Deserialize, Deserializer};
use serde_json::Value;

pub use cron::{CronError, Schedule, matches_schedule_pattern};
pub use duration::{Duration, DurationError, NEVER, NillableDuration};
pub use meta::{Condition, ConditionStatus, ObjectMeta, OwnerReference, find_condition};
pub use nodeclaim::{
    NODECLAIM_KIND, NodeClaim, NodeClaimSpec, NodeClaimStatus, ResourceRequirements,
};
pub use nodeoverlay::{
    CAPACITY_OVERLAY_APPLIED_ANNOTATION, CONDITION_VALIDATION_SUCCEEDED, MAX_OVERLAY_REQUIREMENTS,
    NODEOVERLAY_API_VERSION, NODEOVERLAY_KIND, NodeOverlay, NodeOverlaySpec, NodeOverlayStatus,
    OVERLAY_WEIGHT_RANGE, OverlayRequirement, PRICE_OVERLAY_APPLIED_ANNOTATION,
    RESTRICTED_OVERLAY_RESOURCES, adjusted_price, is_valid_price, is_valid_price_adjustment,
};
pub use nodepool::{
    Budget, BudgetError, ConsolidationPolicy, DEFAULT_BUDGET_NODES, DEFAULT_CONSOLIDATE_AFTER,
    DEFAULT_EXPIRE_AFTER, Disruption, DisruptionReason, Limits, NODEPOOL_KIND, NodeClaimTemplate,
    NodeClaimTemplateSpec, NodeClassReference, NodePool, NodePoolSpec, NodePoolStatus,
    TemplateMetadata, UNBOUNDED_DISRUPTIONS,
};
pub use validation::{
    MAX_BUDGETS, MAX_REQUIREMENTS, MAX_TEMPLATE_LABELS, MIN_VALUES_RANGE, ValidationError,
    ValidationErrorKind, ValidationErrors, WEIGHT_RANGE, validate_requirement,
};

/// The API version of NodePools and NodeClaims.
pub const API_VERSION: &str = "karpenter.sh/v1";

/// Decodes `null` as the type's default (Kubernetes treats `null` like an absent field).
pub(crate) fn null_as_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

/// Why an object could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ApiError {
    /// Values with the wrong type or an unknown enum value, or required fields missing; each
    /// error names its field.
    #[error("invalid {kind}: {errors}")]
    Schema {
        /// `NodePool` or `NodeClaim`.
        kind: &'static str,
        /// The problems, with paths.
        errors: ValidationErrors,
    },
    /// The decoder rejected the object for a reason the schema walk did not foresee.
    #[error("cannot decode {kind}: {message}")]
    Decode {
        /// `NodePool` or `NodeClaim`.
        kind: &'static str,
        /// The decoder's message.
        message: String,
    },
    /// [`object_from_value`] was given an object that is neither a NodePool nor a NodeClaim.
    #[error("unsupported object: apiVersion {api_version:?}, kind {kind:?}")]
    UnsupportedKind {
        /// The object's `apiVersion` (empty if missing).
        api_version: String,
        /// The object's `kind` (empty if missing).
        kind: String,
    },
}

impl ApiError {
    /// The field errors, if this is a schema error.
    pub fn field_errors(&self) -> Option<&ValidationErrors> {
        match self {
            ApiError::Schema { errors, .. } => Some(errors),
            _ => None,
        }
    }
}

/// A decoded object and the fields it had that the schema does not define.
#[derive(Debug, Clone, PartialEq)]
pub struct Parsed<T> {
    /// The object.
    pub object: T,
    /// Paths of the fields that were ignored (`status.instanceType`), sorted; warnings, not
    /// errors.
    pub unknown_fields: Vec<String>,
}

fn decode<T: serde::de::DeserializeOwned>(
    node: &schema::Node,
    kind: &'static str,
    value: Value,
) -> Result<Parsed<T>, ApiError> {
    let report = schema::walk(node, &value);
    if !report.errors.is_empty() {
        return Err(ApiError::Schema {
            kind,
            errors: report.errors,
        });
    }
    let object = serde_json::from_value(value).map_err(|e| ApiError::Decode {
        kind,
        message: e.to_string(),
    })?;
    Ok(Parsed {
        object,
        unknown_fields: report.unknown,
    })
}

/// Decodes a NodePool from a JSON value (e.g. YAML read with `serde_saphyr` into a
/// [`serde_json::Value`]), reporting unknown fields and naming the field of any value that
/// cannot be decoded. Does not validate: call [`NodePool::validate`].
pub fn nodepool_from_value(value: Value) -> Result<Parsed<NodePool>, ApiError> {
    decode(&schema::NODEPOOL, NODEPOOL_KIND, value)
}

/// Decodes a NodeClaim from a JSON value; see [`nodepool_from_value`].
pub fn nodeclaim_from_value(value: Value) -> Result<Parsed<NodeClaim>, ApiError> {
    decode(&schema::NODECLAIM, NODECLAIM_KIND, value)
}

/// The paths of the fields of a NodePool value that the `karpenter.sh/v1` schema does not
/// define, sorted.
pub fn unknown_fields_nodepool(value: &Value) -> Vec<String> {
    schema::walk(&schema::NODEPOOL, value).unknown
}

/// The paths of the fields of a NodeClaim value that the `karpenter.sh/v1` schema does not
/// define, sorted.
pub fn unknown_fields_nodeclaim(value: &Value) -> Vec<String> {
    schema::walk(&schema::NODECLAIM, value).unknown
}

/// A NodePool or a NodeClaim.
#[derive(Debug, Clone, PartialEq)]
pub enum Object {
    /// A NodePool.
    NodePool(Box<NodePool>),
    /// A NodeClaim.
    NodeClaim(Box<NodeClaim>),
}

/// Decodes a NodePool or NodeClaim, chosen by the value's `apiVersion` (`karpenter.sh/v1`) and
/// `kind`.
pub fn object_from_value(value: Value) -> Result<Parsed<Object>, ApiError> {
    let text = |k: &str| {
        value
            .get(k)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let (api_version, kind) = (text("apiVersion"), text("kind"));
    match (api_version.as_str(), kind.as_str()) {
        (API_VERSION, NODEPOOL_KIND) => nodepool_from_value(value).map(|p| Parsed {
            object: Object::NodePool(Box::new(p.object)),
            unknown_fields: p.unknown_fields,
        }),
        (API_VERSION, NODECLAIM_KIND) => nodeclaim_from_value(value).map(|p| Parsed {
            object: Object::NodeClaim(Box::new(p.object)),
            unknown_fields: p.unknown_fields,
        }),
        _ => Err(ApiError::UnsupportedKind { api_version, kind }),
    }
}

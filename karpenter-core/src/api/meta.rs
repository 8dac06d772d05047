//! The small part of Kubernetes' `meta/v1` that NodePools and NodeClaims carry: object metadata
//! and status conditions.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::null_as_default;

/// Object metadata (`metadata`), with the fields this crate reads typed and every other field
/// (`generateName`, `managedFields`, `selfLink`, ...) kept verbatim in [`ObjectMeta::extra`], so
/// that metadata round-trips unchanged. Timestamps are kept as the RFC 3339 strings written.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "kube", derive(schemars::JsonSchema))]
pub struct ObjectMeta {
    /// The object's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The namespace (NodePools and NodeClaims are cluster-scoped, so normally unset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Labels.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "BTreeMap::is_empty"
    )]
    pub labels: BTreeMap<String, String>,
    /// Annotations.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "BTreeMap::is_empty"
    )]
    pub annotations: BTreeMap<String, String>,
    /// The object's UID.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
    /// When the object was created (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub creation_timestamp: Option<String>,
    /// When deletion was requested (RFC 3339); set while finalizers run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deletion_timestamp: Option<String>,
    /// The generation of the desired state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation: Option<i64>,
    /// The resource version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_version: Option<String>,
    /// Owner references.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub owner_references: Vec<OwnerReference>,
    /// Finalizers.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub finalizers: Vec<String>,
    /// Every other metadata field, verbatim.
    #[serde(flatten)]
    pub extra: BTreeMap<String, serde_json::Value>,
}

impl ObjectMeta {
    /// Metadata with just a name.
    pub fn named(name: impl Into<String>) -> Self {
        ObjectMeta {
            name: Some(name.into()),
            ..ObjectMeta::default()
        }
    }

    /// The name, or `""` when unset.
    pub fn name_or_empty(&self) -> &str {
        self.name.as_deref().unwrap_or("")
    }
}

/// An owner reference (`metadata.ownerReferences[]`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "kube", derive(schemars::JsonSchema))]
pub struct OwnerReference {
    /// The owner's API version.
    #[serde(default)]
    pub api_version: String,
    /// The owner's kind.
    #[serde(default)]
    pub kind: String,
    /// The owner's name.
    #[serde(default)]
    pub name: String,
    /// The owner's UID.
    #[serde(default)]
    pub uid: String,
    /// Whether the owner is the managing controller.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub controller: Option<bool>,
    /// Whether the owner cannot be deleted before this object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub block_owner_deletion: Option<bool>,
}

/// A condition's status.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[cfg_attr(feature = "kube", derive(schemars::JsonSchema))]
pub enum ConditionStatus {
    /// `"True"`.
    True,
    /// `"False"`.
    False,
    /// `"Unknown"` (the default: nothing is known yet).
    #[default]
    Unknown,
}

impl ConditionStatus {
    /// The status as written in YAML.
    pub fn as_str(self) -> &'static str {
        match self {
            ConditionStatus::True => "True",
            ConditionStatus::False => "False",
            ConditionStatus::Unknown => "Unknown",
        }
    }
}

/// A status condition (`status.conditions[]`), as upstream's `status.Condition`.
///
/// `reason`, `message` and `lastTransitionTime` are optional here so that objects written by hand
/// (like the seed guide's NodeClaim) parse; validation reports what the CRD requires.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "kube", derive(schemars::JsonSchema))]
pub struct Condition {
    /// The condition type (`Ready`, `Launched`, ...).
    #[serde(rename = "type")]
    pub type_: String,
    /// The status.
    pub status: ConditionStatus,
    /// A machine-readable reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// A human-readable message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// When the status last changed (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<String>,
    /// The `metadata.generation` the condition was computed from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

impl Condition {
    /// Whether the status is `True`.
    pub fn is_true(&self) -> bool {
        self.status == ConditionStatus::True
    }
}

/// The condition of type `type_` in `conditions`, if any.
pub fn find_condition<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

//! Taints and tolerations with Kubernetes semantics.

use serde::{Deserialize, Serialize};

/// A taint's effect.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum TaintEffect {
    /// Pods that do not tolerate the taint are not scheduled onto the node.
    NoSchedule,
    /// The scheduler tries to avoid the node (Karpenter treats it as hard until relaxation).
    PreferNoSchedule,
    /// Pods that do not tolerate the taint are evicted.
    NoExecute,
}

impl TaintEffect {
    /// The effect's name as written in YAML.
    pub fn as_str(self) -> &'static str {
        match self {
            TaintEffect::NoSchedule => "NoSchedule",
            TaintEffect::PreferNoSchedule => "PreferNoSchedule",
            TaintEffect::NoExecute => "NoExecute",
        }
    }
}

/// A node taint: `{key, value, effect}` as in Kubernetes' `core/v1` Taint.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Taint {
    /// The taint key.
    pub key: String,
    /// The taint value (may be empty).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub value: String,
    /// The effect.
    pub effect: TaintEffect,
    /// When the taint was added (RFC 3339), kept for round-tripping.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_added: Option<String>,
}

/// A toleration's operator. An absent operator means `Equal`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize)]
pub enum TolerationOperator {
    /// The toleration matches any value of the key.
    Exists,
    /// The toleration matches only `value` (the default).
    #[default]
    Equal,
    /// Numeric: the taint's value (an integer) is greater than the toleration's value.
    Gt,
    /// Numeric: the taint's value (an integer) is less than the toleration's value.
    Lt,
}

/// A pod toleration as in Kubernetes' `core/v1` Toleration.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Toleration {
    /// The key to match; empty with `Exists` matches every key.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub key: String,
    /// The operator (absent = `Equal`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operator: Option<TolerationOperator>,
    /// The value to match.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub value: String,
    /// The effect to match; absent matches every effect.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effect: Option<TaintEffect>,
    /// For NoExecute: how long the pod stays bound after the taint appears.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub toleration_seconds: Option<i64>,
}

//! The node-requirement algebra (spec section 2): one [`Requirement`] per label key, and the
//! serde shape upstream uses for requirements in NodePools and NodeClaims.

use serde::{Deserialize, Serialize};

/// A node-selector operator, as written in YAML. `Gte` and `Lte` are the inclusive forms
/// upstream's NodePool API accepts besides Kubernetes' own operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Operator {
    /// The label's value is one of `values`.
    In,
    /// The label is absent or its value is none of `values`.
    NotIn,
    /// The label is present (any value).
    Exists,
    /// The label is absent.
    DoesNotExist,
    /// The label's value is an integer greater than the single value.
    Gt,
    /// The label's value is an integer less than the single value.
    Lt,
    /// The label's value is an integer greater than or equal to the single value.
    Gte,
    /// The label's value is an integer less than or equal to the single value.
    Lte,
}

impl Operator {
    /// The operator's name as written in YAML.
    pub fn as_str(self) -> &'static str {
        match self {
            Operator::In => "In",
            Operator::NotIn => "NotIn",
            Operator::Exists => "Exists",
            Operator::DoesNotExist => "DoesNotExist",
            Operator::Gt => "Gt",
            Operator::Lt => "Lt",
            Operator::Gte => "Gte",
            Operator::Lte => "Lte",
        }
    }
}

impl std::fmt::Display for Operator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A requirement as written in a NodePool or NodeClaim (`NodeSelectorRequirementWithMinValues`
/// upstream): `{key, operator, values, minValues}`. Field names and their order match upstream's
/// YAML; `values` is omitted when empty and `minValues` when unset.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeSelectorRequirement {
    /// The label key.
    pub key: String,
    /// The operator.
    pub operator: Operator,
    /// The values (empty for `Exists` / `DoesNotExist`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<String>,
    /// The minimum number of distinct values the candidate instance types must offer for `key`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_values: Option<i64>,
}

impl NodeSelectorRequirement {
    /// A requirement without `minValues`.
    pub fn new<K, I, V>(key: K, operator: Operator, values: I) -> Self
    where
        K: Into<String>,
        I: IntoIterator<Item = V>,
        V: Into<String>,
    {
        NodeSelectorRequirement {
            key: key.into(),
            operator,
            values: values.into_iter().map(Into::into).collect(),
            min_values: None,
        }
    }
}

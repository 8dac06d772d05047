//! Label selectors, node and pod affinity, and topology-spread constraints.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

// ---------------------------------------------------------------------------------------------
// Label selectors and affinity
// ---------------------------------------------------------------------------------------------

/// The operator of a label-selector expression.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum SelectorOperator {
    /// The label's value is one of the values.
    In,
    /// The label is absent or its value is none of the values.
    NotIn,
    /// The label is present.
    Exists,
    /// The label is absent.
    DoesNotExist,
}

/// One expression of a [`LabelSelector`].
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LabelSelectorRequirement {
    /// The label key.
    pub key: String,
    /// The operator.
    pub operator: SelectorOperator,
    /// The values (for In / NotIn).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<String>,
}

impl LabelSelectorRequirement {
    /// The expression `key operator values` (values are ignored by `Exists` and
    /// `DoesNotExist`).
    pub fn new<'a>(
        key: impl Into<String>,
        operator: SelectorOperator,
        values: impl IntoIterator<Item = &'a str>,
    ) -> Self {
        LabelSelectorRequirement {
            key: key.into(),
            operator,
            values: values.into_iter().map(str::to_string).collect(),
        }
    }

    /// Whether a set of labels satisfies this expression.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        let value = labels.get(&self.key);
        match self.operator {
            SelectorOperator::In => value.is_some_and(|v| self.values.contains(v)),
            SelectorOperator::NotIn => value.is_none_or(|v| !self.values.contains(v)),
            SelectorOperator::Exists => value.is_some(),
            SelectorOperator::DoesNotExist => value.is_none(),
        }
    }
}

/// A Kubernetes label selector. An empty selector matches everything. Build it with
/// [`LabelSelector::default`], [`LabelSelector::from_labels`] or
/// [`LabelSelector::from_expressions`] and the `with_*` methods (the struct is
/// `#[non_exhaustive]`).
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct LabelSelector {
    /// Labels that must be present with these values.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub match_labels: BTreeMap<String, String>,
    /// Expressions that must all hold.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub match_expressions: Vec<LabelSelectorRequirement>,
}

impl LabelSelector {
    /// A selector matching exactly these labels.
    pub fn from_labels<'a>(labels: impl IntoIterator<Item = (&'a str, &'a str)>) -> Self {
        LabelSelector {
            match_labels: labels
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            match_expressions: Vec::new(),
        }
    }

    /// A selector of these expressions only.
    pub fn from_expressions(
        expressions: impl IntoIterator<Item = LabelSelectorRequirement>,
    ) -> Self {
        LabelSelector {
            match_labels: BTreeMap::new(),
            match_expressions: expressions.into_iter().collect(),
        }
    }

    /// The selector with these `matchLabels` entries added.
    pub fn with_match_labels<'a>(
        mut self,
        labels: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Self {
        self.match_labels.extend(
            labels
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.to_string())),
        );
        self
    }

    /// The selector with this expression added.
    pub fn with_expression(mut self, expression: LabelSelectorRequirement) -> Self {
        self.match_expressions.push(expression);
        self
    }

    /// Whether the labels satisfy every part of the selector.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.match_labels
            .iter()
            .all(|(k, v)| labels.get(k) == Some(v))
            && self.match_expressions.iter().all(|e| e.matches(labels))
    }

    /// Whether the selector is empty (matches everything).
    pub fn is_empty(&self) -> bool {
        self.match_labels.is_empty() && self.match_expressions.is_empty()
    }
}

/// One term of node affinity: all expressions must hold. (`matchFields` are not modelled:
/// upstream ignores them in preferred terms and rejects pods that use them in required terms;
/// converters report such pods as invalid.)
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeSelectorTerm {
    /// The expressions, ANDed.
    #[serde(default)]
    pub match_expressions: Vec<crate::requirements::NodeSelectorRequirement>,
}

/// A weighted preferred node-affinity term.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PreferredSchedulingTerm {
    /// The weight (1-100).
    pub weight: i32,
    /// The term.
    pub preference: NodeSelectorTerm,
}

/// Node affinity: required terms (ORed) and weighted preferences.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeAffinity {
    /// `requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms`: ORed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub required: Vec<NodeSelectorTerm>,
    /// `preferredDuringSchedulingIgnoredDuringExecution`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub preferred: Vec<PreferredSchedulingTerm>,
}

/// A pod (anti-)affinity term. Build it with [`PodAffinityTerm::new`] and the `with_*` methods
/// (the struct is `#[non_exhaustive]`: Kubernetes' term also has `matchLabelKeys` and
/// `mismatchLabelKeys`, not modelled yet).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct PodAffinityTerm {
    /// Which pods the term refers to. `None` selects nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label_selector: Option<LabelSelector>,
    /// Namespaces to look in (empty and no selector: the pod's own namespace).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub namespaces: Vec<String>,
    /// Namespaces selected by their labels (an empty selector selects every namespace).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace_selector: Option<LabelSelector>,
    /// The node label that defines a topology domain.
    pub topology_key: String,
}

impl PodAffinityTerm {
    /// A term over the pods `selector` selects in the pod's own namespace, with domains defined
    /// by `topology_key`.
    pub fn new(selector: LabelSelector, topology_key: impl Into<String>) -> Self {
        PodAffinityTerm {
            label_selector: Some(selector),
            namespaces: Vec::new(),
            namespace_selector: None,
            topology_key: topology_key.into(),
        }
    }

    /// The term looking in these namespaces.
    pub fn with_namespaces<'a>(mut self, namespaces: impl IntoIterator<Item = &'a str>) -> Self {
        self.namespaces = namespaces.into_iter().map(str::to_string).collect();
        self
    }

    /// The term looking in the namespaces this selector selects.
    pub fn with_namespace_selector(mut self, selector: LabelSelector) -> Self {
        self.namespace_selector = Some(selector);
        self
    }
}

/// A weighted preferred pod (anti-)affinity term.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WeightedPodAffinityTerm {
    /// The weight (1-100).
    pub weight: i32,
    /// The term.
    pub pod_affinity_term: PodAffinityTerm,
}

/// Pod affinity or anti-affinity.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodAffinity {
    /// Required terms (all must hold).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub required: Vec<PodAffinityTerm>,
    /// Preferred terms.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub preferred: Vec<WeightedPodAffinityTerm>,
}

impl PodAffinity {
    /// Whether there are no terms at all.
    pub fn is_empty(&self) -> bool {
        self.required.is_empty() && self.preferred.is_empty()
    }
}

/// `whenUnsatisfiable` of a topology spread constraint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub enum WhenUnsatisfiable {
    /// A hard constraint.
    #[default]
    DoNotSchedule,
    /// A preference, relaxed when it cannot be met.
    ScheduleAnyway,
}

/// `nodeAffinityPolicy` / `nodeTaintsPolicy` of a topology spread constraint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum NodeInclusionPolicy {
    /// Only nodes that match are counted.
    Honor,
    /// Every node is counted.
    Ignore,
}

/// A topology spread constraint. Build it with [`TopologySpreadConstraint::new`] and the
/// `with_*` methods (the struct is `#[non_exhaustive]`: Kubernetes keeps adding fields to it).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct TopologySpreadConstraint {
    /// The maximum allowed difference between domains.
    pub max_skew: i32,
    /// The node label that defines a domain.
    pub topology_key: String,
    /// Hard or soft.
    #[serde(default)]
    pub when_unsatisfiable: WhenUnsatisfiable,
    /// Which pods are counted (`None` counts nothing).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label_selector: Option<LabelSelector>,
    /// The minimum number of eligible domains.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_domains: Option<i32>,
    /// Whether node affinity limits the counted nodes (default Honor).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_affinity_policy: Option<NodeInclusionPolicy>,
    /// Whether node taints limit the counted nodes (default Ignore).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_taints_policy: Option<NodeInclusionPolicy>,
    /// Pod label keys whose values are added to the selector.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub match_label_keys: Vec<String>,
}

impl TopologySpreadConstraint {
    /// A constraint of `max_skew` over the domains of `topology_key`, hard or soft by
    /// `when_unsatisfiable`, counting no pods until a selector is set
    /// ([`TopologySpreadConstraint::with_label_selector`]).
    ///
    /// ```
    /// use karpenter_core::model::{LabelSelector, TopologySpreadConstraint, WhenUnsatisfiable};
    ///
    /// let tsc = TopologySpreadConstraint::new(
    ///     1,
    ///     "topology.kubernetes.io/zone",
    ///     WhenUnsatisfiable::DoNotSchedule,
    /// )
    /// .with_label_selector(LabelSelector::from_labels([("app", "web")]));
    /// assert_eq!(tsc.max_skew, 1);
    /// ```
    pub fn new(
        max_skew: i32,
        topology_key: impl Into<String>,
        when_unsatisfiable: WhenUnsatisfiable,
    ) -> Self {
        TopologySpreadConstraint {
            max_skew,
            topology_key: topology_key.into(),
            when_unsatisfiable,
            label_selector: None,
            min_domains: None,
            node_affinity_policy: None,
            node_taints_policy: None,
            match_label_keys: Vec::new(),
        }
    }

    /// The constraint counting the pods `selector` selects.
    pub fn with_label_selector(mut self, selector: LabelSelector) -> Self {
        self.label_selector = Some(selector);
        self
    }

    /// The constraint with this `minDomains`.
    pub fn with_min_domains(mut self, min_domains: i32) -> Self {
        self.min_domains = Some(min_domains);
        self
    }

    /// The constraint with this `nodeAffinityPolicy`.
    pub fn with_node_affinity_policy(mut self, policy: NodeInclusionPolicy) -> Self {
        self.node_affinity_policy = Some(policy);
        self
    }

    /// The constraint with this `nodeTaintsPolicy`.
    pub fn with_node_taints_policy(mut self, policy: NodeInclusionPolicy) -> Self {
        self.node_taints_policy = Some(policy);
        self
    }

    /// The constraint with these `matchLabelKeys`.
    pub fn with_match_label_keys<'a>(mut self, keys: impl IntoIterator<Item = &'a str>) -> Self {
        self.match_label_keys = keys.into_iter().map(str::to_string).collect();
        self
    }
}

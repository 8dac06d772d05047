//! `NodePool` (`karpenter.sh/v1`): the user's description of which nodes may be launched, and
//! its disruption budgets.

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, Serialize};

use super::cron::{CronError, Schedule};
use super::duration::{Duration, NillableDuration};
use super::meta::{Condition, ObjectMeta};
use super::{API_VERSION, null_as_default};
use crate::requirements::NodeSelectorRequirement;
use crate::resources::ResourceList;
use crate::taints::Taint;

/// The kind of a NodePool.
pub const NODEPOOL_KIND: &str = "NodePool";

/// Upstream's default `expireAfter`: 30 days.
pub const DEFAULT_EXPIRE_AFTER: &str = "720h";
/// Upstream's default `consolidateAfter`.
pub const DEFAULT_CONSOLIDATE_AFTER: &str = "0s";
/// Upstream's default budget `nodes` value (and the only default budget).
pub const DEFAULT_BUDGET_NODES: &str = "10%";
/// What a budget that imposes no limit allows ([`Budget::allowed_disruptions`] when the budget
/// is inactive, [`NodePool::allowed_disruptions`] when no budget applies). Upstream uses Go's
/// `math.MaxInt32` for this; callers should only compare and subtract with saturation.
pub const UNBOUNDED_DISRUPTIONS: usize = usize::MAX;

/// A NodePool.
///
/// Fields the user may omit are `Option`s (or empty collections) so that an object serialises
/// back exactly as written; the `effective_*` accessors apply upstream's CRD defaults.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "kube", derive(schemars::JsonSchema))]
pub struct NodePool {
    /// `karpenter.sh/v1`.
    #[serde(default = "default_api_version")]
    pub api_version: String,
    /// `NodePool`.
    #[serde(default = "default_nodepool_kind")]
    pub kind: String,
    /// Object metadata.
    #[serde(default, deserialize_with = "null_as_default")]
    pub metadata: ObjectMeta,
    /// The desired state.
    pub spec: NodePoolSpec,
    /// The observed state, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<NodePoolStatus>,
}

fn default_api_version() -> String {
    API_VERSION.to_string()
}

fn default_nodepool_kind() -> String {
    NODEPOOL_KIND.to_string()
}

/// An unnamed NodePool with `apiVersion` and `kind` set, a [`NodePoolSpec::default`] spec and
/// no status (the crate's stability policy: construct with `..Default::default()`).
impl Default for NodePool {
    fn default() -> Self {
        NodePool::new(String::new(), NodePoolSpec::default())
    }
}

impl NodePool {
    /// A NodePool named `name` with the given spec.
    pub fn new(name: impl Into<String>, spec: NodePoolSpec) -> Self {
        NodePool {
            api_version: default_api_version(),
            kind: default_nodepool_kind(),
            metadata: ObjectMeta::named(name),
            spec,
            status: None,
        }
    }

    /// The NodePool's name (`""` if unset).
    pub fn name(&self) -> &str {
        self.metadata.name_or_empty()
    }

    /// Whether the pool is static (`spec.replicas` set); static pools are not used by the
    /// provisioning scheduler.
    pub fn is_static(&self) -> bool {
        self.spec.replicas.is_some()
    }

    /// The allowed number of disruptions for `reason` among `total_nodes` nodes at `now`: the
    /// minimum over the effective budgets (see [`Disruption::effective_budgets`]) that apply to
    /// `reason`; [`UNBOUNDED_DISRUPTIONS`] if none applies or none is active.
    ///
    /// As upstream, an error in *any* budget is returned even if that budget does not apply to
    /// `reason` (see [`NodePool::allowed_disruptions_or_zero`] for upstream's fail-closed use).
    pub fn allowed_disruptions(
        &self,
        reason: DisruptionReason,
        total_nodes: usize,
        now: jiff::Timestamp,
    ) -> Result<usize, BudgetError> {
        let mut allowed = UNBOUNDED_DISRUPTIONS;
        let mut first_error = None;
        for budget in self.spec.disruption.effective_budgets() {
            let value = match budget.allowed_disruptions(total_nodes, now) {
                Ok(v) => v,
                Err(e) => {
                    first_error.get_or_insert(e);
                    0
                }
            };
            if budget.applies_to(reason) {
                allowed = allowed.min(value);
            }
        }
        match first_error {
            Some(e) => Err(e),
            None => Ok(allowed),
        }
    }

    /// [`NodePool::allowed_disruptions`], failing closed: any budget error gives 0 (upstream's
    /// `MustGetAllowedDisruptions`).
    pub fn allowed_disruptions_or_zero(
        &self,
        reason: DisruptionReason,
        total_nodes: usize,
        now: jiff::Timestamp,
    ) -> usize {
        self.allowed_disruptions(reason, total_nodes, now)
            .unwrap_or(0)
    }
}

/// `spec` of a NodePool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "kube", derive(schemars::JsonSchema))]
pub struct NodePoolSpec {
    /// The template of the NodeClaims this pool launches.
    pub template: NodeClaimTemplate,
    /// Disruption settings.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "Disruption::is_unset"
    )]
    pub disruption: Disruption,
    /// Upper bounds on the total resources (and `nodes`) of the pool's nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<Limits>,
    /// Priority among pools (1..=100); unset counts as 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<i32>,
    /// If set, the pool is static and keeps exactly this many nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i64>,
}

/// [`NodePoolSpec::new`] with a [`NodeClaimTemplate::default`] template.
impl Default for NodePoolSpec {
    fn default() -> Self {
        NodePoolSpec::new(NodeClaimTemplate::default())
    }
}

impl NodePoolSpec {
    /// A spec with the given template and everything else unset.
    pub fn new(template: NodeClaimTemplate) -> Self {
        NodePoolSpec {
            template,
            disruption: Disruption::default(),
            limits: None,
            weight: None,
            replicas: None,
        }
    }

    /// The weight, 0 when unset.
    pub fn effective_weight(&self) -> i32 {
        self.weight.unwrap_or(0)
    }
}

/// `spec.limits`: a resource list; `nodes` limits the node count.
pub type Limits = ResourceList;

/// `spec.template`: metadata and spec for the NodeClaims a pool launches.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "kube", derive(schemars::JsonSchema))]
pub struct NodeClaimTemplate {
    /// Labels and annotations put on every node.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "TemplateMetadata::is_empty"
    )]
    pub metadata: TemplateMetadata,
    /// The NodeClaim spec.
    pub spec: NodeClaimTemplateSpec,
}

/// [`NodeClaimTemplate::new`] with a [`NodeClaimTemplateSpec::default`] spec.
impl Default for NodeClaimTemplate {
    fn default() -> Self {
        NodeClaimTemplate::new(NodeClaimTemplateSpec::default())
    }
}

impl NodeClaimTemplate {
    /// A template with this spec and no labels or annotations.
    pub fn new(spec: NodeClaimTemplateSpec) -> Self {
        NodeClaimTemplate {
            metadata: TemplateMetadata::default(),
            spec,
        }
    }
}

/// `spec.template.metadata`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "kube", derive(schemars::JsonSchema))]
pub struct TemplateMetadata {
    /// Labels applied to every node (and, for scheduling, `In [value]` requirements).
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "BTreeMap::is_empty"
    )]
    pub labels: BTreeMap<String, String>,
    /// Annotations applied to every node.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "BTreeMap::is_empty"
    )]
    pub annotations: BTreeMap<String, String>,
}

impl TemplateMetadata {
    /// Whether both maps are empty.
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty() && self.annotations.is_empty()
    }
}

/// `spec.template.spec`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "kube", derive(schemars::JsonSchema))]
pub struct NodeClaimTemplateSpec {
    /// Taints put on the nodes; pods must tolerate them.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub taints: Vec<Taint>,
    /// Taints present while a node starts up; ignored by the scheduler.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub startup_taints: Vec<Taint>,
    /// Requirements on the nodes' labels. The v1 CRD requires this list (it may be empty); it is
    /// an `Option` here so that a manifest without it still parses and validation can name the
    /// missing field. Read it with [`NodeClaimTemplateSpec::requirements`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requirements: Option<Vec<NodeSelectorRequirement>>,
    /// The cloud-provider node class.
    pub node_class_ref: NodeClassReference,
    /// How long a node lives before it is replaced (default `720h`, or `Never`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expire_after: Option<NillableDuration>,
    /// How long a draining node may take before pods are deleted forcibly.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub termination_grace_period: Option<Duration>,
}

/// [`NodeClaimTemplateSpec::new`] with an empty `nodeClassRef`.
impl Default for NodeClaimTemplateSpec {
    fn default() -> Self {
        NodeClaimTemplateSpec::new(NodeClassReference::default())
    }
}

impl NodeClaimTemplateSpec {
    /// A spec with the given node class and empty requirements.
    pub fn new(node_class_ref: NodeClassReference) -> Self {
        NodeClaimTemplateSpec {
            taints: Vec::new(),
            startup_taints: Vec::new(),
            requirements: Some(Vec::new()),
            node_class_ref,
            expire_after: None,
            termination_grace_period: None,
        }
    }

    /// The requirements (empty if the field is missing).
    pub fn requirements(&self) -> &[NodeSelectorRequirement] {
        self.requirements.as_deref().unwrap_or(&[])
    }

    /// `expireAfter`, or upstream's default `720h`.
    pub fn effective_expire_after(&self) -> NillableDuration {
        self.expire_after
            .clone()
            .unwrap_or_else(default_expire_after)
    }
}

pub(crate) fn default_expire_after() -> NillableDuration {
    NillableDuration::Duration(Duration::from_parts(
        DEFAULT_EXPIRE_AFTER,
        720 * 3600 * 1_000_000_000,
    ))
}

/// `nodeClassRef`: which cloud-provider node class to use.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "kube", derive(schemars::JsonSchema))]
pub struct NodeClassReference {
    /// The API group (e.g. `karpenter.k8s.aws`).
    #[serde(default, deserialize_with = "null_as_default")]
    pub group: String,
    /// The kind (e.g. `EC2NodeClass`).
    #[serde(default, deserialize_with = "null_as_default")]
    pub kind: String,
    /// The name.
    #[serde(default, deserialize_with = "null_as_default")]
    pub name: String,
}

impl NodeClassReference {
    /// A reference to `group`/`kind` named `name`.
    pub fn new(group: impl Into<String>, kind: impl Into<String>, name: impl Into<String>) -> Self {
        NodeClassReference {
            group: group.into(),
            kind: kind.into(),
            name: name.into(),
        }
    }

    /// The label NodeClaims of this class carry: `<group>/<lowercase kind>`.
    pub fn label_key(&self) -> String {
        format!("{}/{}", self.group, self.kind.to_lowercase())
    }
}

/// `spec.disruption`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "kube", derive(schemars::JsonSchema))]
pub struct Disruption {
    /// How long a node must be consolidatable before it is consolidated (default `0s`, or
    /// `Never`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consolidate_after: Option<NillableDuration>,
    /// Which nodes consolidation may remove (default `WhenEmptyOrUnderutilized`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consolidation_policy: Option<ConsolidationPolicy>,
    /// Disruption budgets. `None` (field absent) means upstream's default `[{nodes: "10%"}]`;
    /// an explicit empty list means no budget at all (unbounded), as upstream.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budgets: Option<Vec<Budget>>,
}

impl Disruption {
    /// Whether no field is set (the whole `disruption` object is then omitted on output).
    pub fn is_unset(&self) -> bool {
        self.consolidate_after.is_none()
            && self.consolidation_policy.is_none()
            && self.budgets.is_none()
    }

    /// `consolidateAfter`, or the default `0s`.
    pub fn effective_consolidate_after(&self) -> NillableDuration {
        self.consolidate_after.clone().unwrap_or_else(|| {
            NillableDuration::Duration(Duration::from_parts(DEFAULT_CONSOLIDATE_AFTER, 0))
        })
    }

    /// `consolidationPolicy`, or the default `WhenEmptyOrUnderutilized`.
    pub fn effective_consolidation_policy(&self) -> ConsolidationPolicy {
        self.consolidation_policy.unwrap_or_default()
    }

    /// The budgets in force: as written, or `[{nodes: "10%"}]` when the field is absent.
    pub fn effective_budgets(&self) -> Vec<Budget> {
        match &self.budgets {
            Some(b) => b.clone(),
            None => vec![Budget::nodes(DEFAULT_BUDGET_NODES)],
        }
    }
}

/// `consolidationPolicy`.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[cfg_attr(feature = "kube", derive(schemars::JsonSchema))]
pub enum ConsolidationPolicy {
    /// Only empty nodes are consolidated.
    WhenEmpty,
    /// Empty and underutilized nodes are consolidated (the default).
    #[default]
    WhenEmptyOrUnderutilized,
    /// Underutilized nodes are consolidated only when the savings outweigh the disruption.
    Balanced,
}

/// Why a node is disrupted; budgets may be limited to some reasons.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "kube", derive(schemars::JsonSchema))]
pub enum DisruptionReason {
    /// Consolidation of underutilized nodes.
    Underutilized,
    /// Removal of empty nodes.
    Empty,
    /// Replacement of drifted nodes.
    Drifted,
}

impl DisruptionReason {
    /// All reasons, in upstream's order.
    pub const ALL: [DisruptionReason; 3] = [
        DisruptionReason::Underutilized,
        DisruptionReason::Empty,
        DisruptionReason::Drifted,
    ];

    /// The reason as written in YAML.
    pub fn as_str(self) -> &'static str {
        match self {
            DisruptionReason::Underutilized => "Underutilized",
            DisruptionReason::Empty => "Empty",
            DisruptionReason::Drifted => "Drifted",
        }
    }
}

/// A disruption budget: at most `nodes` of the pool's nodes may be disrupted at once, while the
/// budget is active.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "kube", derive(schemars::JsonSchema))]
pub struct Budget {
    /// A count (`"5"`) or a percentage (`"10%"`); defaults to `10%` when absent, as the CRD.
    #[serde(
        default = "default_budget_nodes",
        deserialize_with = "nodes_or_default"
    )]
    pub nodes: String,
    /// When the budget becomes active: a 5-field cron expression or macro, in UTC.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<String>,
    /// How long the budget stays active after each schedule hit (hours and minutes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration: Option<Duration>,
    /// The reasons the budget applies to; `None` means all. (An explicit empty list applies to
    /// no reason, as upstream.)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasons: Option<Vec<DisruptionReason>>,
}

fn default_budget_nodes() -> String {
    DEFAULT_BUDGET_NODES.to_string()
}

fn nodes_or_default<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    Ok(Option::<String>::deserialize(d)?.unwrap_or_else(default_budget_nodes))
}

/// Why a budget cannot be evaluated. Upstream treats these as "fail closed" (0 disruptions).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BudgetError {
    /// The schedule is not a valid cron expression (or a duration is set without a schedule).
    #[error("invariant violated, {0}")]
    InvalidSchedule(#[from] CronError),
    /// `nodes` is neither an integer nor a percentage.
    #[error(
        "invalid budget nodes value {0:?}: expected an integer or a percentage such as \"10%\""
    )]
    InvalidNodes(String),
}

/// The CRD's default budget: always active, `nodes: 10%`, every reason.
impl Default for Budget {
    fn default() -> Self {
        Budget::nodes(DEFAULT_BUDGET_NODES)
    }
}

impl Budget {
    /// An always-active budget allowing `nodes` (count or percentage).
    pub fn nodes(nodes: impl Into<String>) -> Self {
        Budget {
            nodes: nodes.into(),
            schedule: None,
            duration: None,
            reasons: None,
        }
    }

    /// Whether the budget applies to `reason` (`reasons` unset, or containing it).
    pub fn applies_to(&self, reason: DisruptionReason) -> bool {
        self.reasons.as_ref().is_none_or(|r| r.contains(&reason))
    }

    /// Whether the budget is active at `now`: always if neither `schedule` nor `duration` is
    /// set; otherwise iff a schedule hit (cron, UTC, one-second resolution) lies in
    /// `(now - duration, now]`. A duration longer than the recurrence makes it always active.
    ///
    /// Upstream quirk, kept: upstream's cron library gives up looking for the next hit after five
    /// years and returns the zero time, which counts as active; so a schedule that never fires
    /// (e.g. `0 0 30 2 *`) makes its budget permanently active. A missing `duration` counts as
    /// zero (never active); a `duration` without `schedule` is an error (validation rejects
    /// both).
    pub fn is_active(&self, now: jiff::Timestamp) -> Result<bool, BudgetError> {
        if self.schedule.is_none() && self.duration.is_none() {
            return Ok(true);
        }
        let schedule = Schedule::parse(self.schedule.as_deref().unwrap_or(""))?;
        let duration = self
            .duration
            .as_ref()
            .map_or(jiff::SignedDuration::ZERO, Duration::as_signed_duration);
        let utc = jiff::tz::TimeZone::UTC;
        let now_civil = now.to_zoned(utc.clone()).datetime();
        let checkpoint = now
            .checked_sub(duration)
            .map(|t| t.to_zoned(utc.clone()).datetime())
            .unwrap_or(jiff::civil::DateTime::MIN);
        // The cron library works on years 1..=5000; earlier checkpoints are all alike here.
        let floor = jiff::civil::date(1, 1, 1).at(0, 0, 0, 0);
        let checkpoint = checkpoint.max(floor);
        let year_limit = i32::from(checkpoint.year()) + 5;
        match schedule.next_after(checkpoint) {
            Some(hit) if i32::from(hit.year()) <= year_limit => Ok(hit <= now_civil),
            // No hit within five years: upstream sees the zero time, which is not after now.
            _ => Ok(true),
        }
    }

    /// How many nodes this budget allows to be disrupted among `total_nodes` at `now`:
    /// [`UNBOUNDED_DISRUPTIONS`] when inactive; otherwise the count, or the percentage of
    /// `total_nodes` rounded **up** (5% of 10 → 1, 10% of 19 → 2, "0%" → 0).
    pub fn allowed_disruptions(
        &self,
        total_nodes: usize,
        now: jiff::Timestamp,
    ) -> Result<usize, BudgetError> {
        if !self.is_active(now)? {
            return Ok(UNBOUNDED_DISRUPTIONS);
        }
        self.nodes_value(total_nodes)
    }

    /// The `nodes` value applied to `total_nodes`, ignoring the schedule. Negative values (which
    /// validation rejects) allow nothing.
    pub fn nodes_value(&self, total_nodes: usize) -> Result<usize, BudgetError> {
        let invalid = || BudgetError::InvalidNodes(self.nodes.clone());
        if let Ok(count) = self.nodes.parse::<i64>() {
            return Ok(usize::try_from(count.max(0)).unwrap_or(usize::MAX));
        }
        let percent: i64 = self
            .nodes
            .strip_suffix('%')
            .and_then(|p| p.parse().ok())
            .ok_or_else(invalid)?;
        let percent = u128::try_from(percent.max(0)).unwrap_or(0);
        let total = u128::try_from(total_nodes).unwrap_or(u128::MAX);
        let scaled = (percent.saturating_mul(total)).div_ceil(100);
        Ok(usize::try_from(scaled).unwrap_or(usize::MAX))
    }
}

/// `status` of a NodePool.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "kube", derive(schemars::JsonSchema))]
pub struct NodePoolStatus {
    /// The total resources of the pool's nodes.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "ResourceList::is_empty"
    )]
    pub resources: ResourceList,
    /// The number of nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nodes: Option<i64>,
    /// The node class generation last observed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_class_observed_generation: Option<i64>,
    /// Conditions (`Ready`, `NodeClassReady`, ...).
    #[serde(
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub conditions: Vec<Condition>,
}

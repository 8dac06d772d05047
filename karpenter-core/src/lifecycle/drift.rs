//! Drift detection (upstream `nodeclaim/disruption/drift.go`) and the NodePool hash.
//!
//! # The NodePool hash
//!
//! A NodePool's *static* fields are hashed; a NodeClaim records the hash of its NodePool when it
//! is created (annotation `karpenter.sh/nodepool-hash`, with `karpenter.sh/nodepool-hash-version`),
//! and is `NodePoolDrifted` once the NodePool's hash differs. Hashed are exactly the template's
//! metadata `labels` and `annotations`, `taints`, `startupTaints`, `nodeClassRef` (group, kind,
//! name), `terminationGracePeriod` and `expireAfter` (defaulted to `720h`); slices are hashed as
//! sets (order and duplicates do not matter), zero values (empty maps and lists, empty strings,
//! `expireAfter: Never` or `0s`) count as absent, and durations are hashed by length (`1h` and
//! `60m` are the same). Requirements, budgets, consolidation settings, limits, weight and
//! replicas are not hashed.
//!
//! Upstream hashes with Go's `hashstructure` v2, whose value we cannot reproduce. We hash a
//! canonical byte encoding of the same fields with 64-bit FNV-1a and write the decimal value,
//! under our own hash version [`HASH_VERSION`] (`v3-rs1`) instead of upstream's `v3`. Upstream's
//! version-bump rule makes a migration safe: when the hash controller ([`hash_reconcile`]) sees
//! a NodePool whose version annotation is not ours, every NodeClaim of that pool with another
//! version is re-stamped with our version and — unless it already has a `Drifted` condition —
//! with the NodePool's current hash. A cluster moving from upstream Karpenter to this
//! implementation (or back) therefore sees no spurious drift, and NodeClaims that were already
//! drifted stay drifted. Static drift is only evaluated when the NodePool's and the NodeClaim's
//! versions are equal, so NodeClaims not yet re-stamped are never reported as drifted.
//!
//! # Drift reasons
//!
//! [`drift_reason`] evaluates, in order: `NodePoolDrifted` (hash), `RequirementsDrifted` (the
//! NodeClaim's labels no longer satisfy the NodePool's requirements), `InstanceTypeNotFound`
//! (checked only for NodeClaims older than 1 h and at most every 30 min) and the cloud
//! provider's own reason.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use jiff::SignedDuration;

use crate::api::{NodeClaim, NodePool};
use crate::labels::{self, LabelPolicy};
use crate::model::{InstanceType, Timestamp};
use crate::requirements::{Operator, Requirement, Requirements};
use crate::taints::Taint;

use super::conditions::{self, ConditionSet, DRIFTED, LAUNCHED};
use super::{claim_creation_time, since};

/// Our NodePool hash version (upstream's is `v3`; ours differs because the hash function
/// does).
pub const HASH_VERSION: &str = "v3-rs1";
/// How often drift is re-evaluated.
pub const DRIFT_REQUEUE: SignedDuration = SignedDuration::from_mins(5);
/// NodeClaims younger than this are not checked for `InstanceTypeNotFound`.
pub const INSTANCE_TYPE_CHECK_MIN_AGE: SignedDuration = SignedDuration::from_hours(1);
/// A passed `InstanceTypeNotFound` check is trusted for this long.
pub const INSTANCE_TYPE_CHECK_TTL: SignedDuration = SignedDuration::from_mins(30);

/// Why a NodeClaim drifted.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum DriftReason {
    /// The NodePool's static fields changed (hash).
    NodePoolDrifted,
    /// The NodeClaim's labels no longer satisfy the NodePool's requirements.
    RequirementsDrifted,
    /// The NodeClaim's instance type (or a compatible offering of it) is no longer offered.
    InstanceTypeNotFound,
    /// A cloud-provider reason (e.g. an image or subnet change).
    Provider(String),
}

impl DriftReason {
    /// The reason as written in the `Drifted` condition.
    pub fn as_str(&self) -> &str {
        match self {
            DriftReason::NodePoolDrifted => "NodePoolDrifted",
            DriftReason::RequirementsDrifted => "RequirementsDrifted",
            DriftReason::InstanceTypeNotFound => "InstanceTypeNotFound",
            DriftReason::Provider(r) => r,
        }
    }
}

impl std::fmt::Display for DriftReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

// ---------------------------------------------------------------------------------------------
// Hash
// ---------------------------------------------------------------------------------------------

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(FNV_OFFSET, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(FNV_PRIME)
    })
}

/// A canonical, unambiguous byte encoding: every item is tagged and length-prefixed.
#[derive(Default)]
struct Encoder {
    out: Vec<u8>,
}

impl Encoder {
    fn bytes(&mut self, b: &[u8]) {
        self.out.extend_from_slice(&(b.len() as u64).to_le_bytes());
        self.out.extend_from_slice(b);
    }

    fn tag(&mut self, tag: u8) {
        self.out.push(tag);
    }

    /// A string field, omitted when empty.
    fn string(&mut self, tag: u8, s: &str) {
        if !s.is_empty() {
            self.tag(tag);
            self.bytes(s.as_bytes());
        }
    }

    fn nanos(&mut self, tag: u8, n: i64) {
        self.tag(tag);
        self.out.extend_from_slice(&n.to_le_bytes());
    }

    /// A map, omitted when empty (entries in key order).
    fn map(&mut self, tag: u8, m: &BTreeMap<String, String>) {
        if m.is_empty() {
            return;
        }
        self.tag(tag);
        self.out.extend_from_slice(&(m.len() as u64).to_le_bytes());
        for (k, v) in m {
            self.bytes(k.as_bytes());
            self.bytes(v.as_bytes());
        }
    }

    /// A list as a set (sorted, deduplicated encodings), omitted when empty.
    fn set(&mut self, tag: u8, items: BTreeSet<Vec<u8>>) {
        if items.is_empty() {
            return;
        }
        self.tag(tag);
        self.out
            .extend_from_slice(&(items.len() as u64).to_le_bytes());
        for item in items {
            self.bytes(&item);
        }
    }
}

fn encode_taint(t: &Taint) -> Vec<u8> {
    let mut e = Encoder::default();
    e.string(1, &t.key);
    e.string(2, &t.value);
    e.string(3, t.effect.as_str());
    e.string(4, t.time_added.as_deref().unwrap_or(""));
    e.out
}

/// The canonical encoding of a NodePool's hashed fields.
fn hashed_fields(np: &NodePool) -> Vec<u8> {
    let template = &np.spec.template;
    let spec = &template.spec;
    let mut e = Encoder::default();
    e.map(1, &template.metadata.labels);
    e.map(2, &template.metadata.annotations);
    e.set(3, spec.taints.iter().map(encode_taint).collect());
    e.set(4, spec.startup_taints.iter().map(encode_taint).collect());
    let r = &spec.node_class_ref;
    if !(r.group.is_empty() && r.kind.is_empty() && r.name.is_empty()) {
        e.tag(5);
        e.string(1, &r.group);
        e.string(2, &r.kind);
        e.string(3, &r.name);
    }
    if let Some(tgp) = &spec.termination_grace_period {
        e.nanos(6, tgp.as_nanos());
    }
    if let Some(d) = spec.effective_expire_after().duration()
        && d.as_nanos() != 0
    {
        e.nanos(7, d.as_nanos());
    }
    e.out
}

/// The NodePool's hash (decimal), see the [module docs](self).
pub fn nodepool_hash(np: &NodePool) -> String {
    fnv1a(&hashed_fields(np)).to_string()
}

/// The hash annotations a new NodeClaim of `np` gets: `karpenter.sh/nodepool-hash` and
/// `karpenter.sh/nodepool-hash-version`.
pub fn claim_hash_annotations(np: &NodePool) -> BTreeMap<String, String> {
    BTreeMap::from([
        (
            labels::NODEPOOL_HASH_ANNOTATION.to_string(),
            nodepool_hash(np),
        ),
        (
            labels::NODEPOOL_HASH_VERSION_ANNOTATION.to_string(),
            HASH_VERSION.to_string(),
        ),
    ])
}

/// Annotations to set on one NodeClaim.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ClaimAnnotationUpdate {
    /// The NodeClaim's name.
    pub claim_name: String,
    /// Annotations to set (merged over the existing ones).
    pub annotations: BTreeMap<String, String>,
}

/// What the NodePool hash controller writes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct HashReconcile {
    /// Hash annotations to set on the NodePool, when they differ from its current ones.
    pub nodepool_annotations: Option<BTreeMap<String, String>>,
    /// Version bumps of the pool's NodeClaims (only when the NodePool's version is not ours).
    pub claim_updates: Vec<ClaimAnnotationUpdate>,
}

/// The hash controller (`nodepool.hash`): keeps the NodePool's hash annotations current and,
/// when its version annotation is not [`HASH_VERSION`], re-stamps the NodeClaims of the pool
/// (label `karpenter.sh/nodepool`) whose version differs: new version, and the NodePool's
/// current hash unless the NodeClaim has a `Drifted` condition. Claims are visited in input
/// order (any iterable of NodeClaim references: a slice, a `Vec`, or borrowed from an index).
pub fn hash_reconcile<'a>(
    np: &NodePool,
    claims: impl IntoIterator<Item = &'a NodeClaim>,
) -> HashReconcile {
    let wanted = claim_hash_annotations(np);
    let np_annotations = &np.metadata.annotations;
    let mut out = HashReconcile::default();
    if np_annotations
        .get(labels::NODEPOOL_HASH_VERSION_ANNOTATION)
        .map(String::as_str)
        != Some(HASH_VERSION)
    {
        let hash = nodepool_hash(np);
        for c in claims {
            if c.metadata.labels.get(labels::NODEPOOL).map(String::as_str) != Some(np.name()) {
                continue;
            }
            if c.metadata
                .annotations
                .get(labels::NODEPOOL_HASH_VERSION_ANNOTATION)
                .map(String::as_str)
                == Some(HASH_VERSION)
            {
                continue;
            }
            let mut annotations = BTreeMap::from([(
                labels::NODEPOOL_HASH_VERSION_ANNOTATION.to_string(),
                HASH_VERSION.to_string(),
            )]);
            if crate::api::find_condition(&c.status.conditions, DRIFTED).is_none() {
                annotations.insert(labels::NODEPOOL_HASH_ANNOTATION.to_string(), hash.clone());
            }
            out.claim_updates.push(ClaimAnnotationUpdate {
                claim_name: c.name().to_string(),
                annotations,
            });
        }
    }
    if wanted.iter().any(|(k, v)| np_annotations.get(k) != Some(v)) {
        out.nodepool_annotations = Some(wanted);
    }
    out
}

/// Static drift: the NodePool and the NodeClaim both carry hash and version annotations, the
/// versions are equal and the hashes differ. Reads the NodePool's *annotations* (kept current
/// by [`hash_reconcile`]).
pub fn is_static_drifted(np: &NodePool, claim: &NodeClaim) -> bool {
    let get = |m: &BTreeMap<String, String>, k: &str| m.get(k).cloned();
    let (Some(np_hash), Some(np_version), Some(nc_hash), Some(nc_version)) = (
        get(&np.metadata.annotations, labels::NODEPOOL_HASH_ANNOTATION),
        get(
            &np.metadata.annotations,
            labels::NODEPOOL_HASH_VERSION_ANNOTATION,
        ),
        get(
            &claim.metadata.annotations,
            labels::NODEPOOL_HASH_ANNOTATION,
        ),
        get(
            &claim.metadata.annotations,
            labels::NODEPOOL_HASH_VERSION_ANNOTATION,
        ),
    ) else {
        return false;
    };
    np_version == nc_version && np_hash != nc_hash
}

// ---------------------------------------------------------------------------------------------
// Requirements and instance-type drift
// ---------------------------------------------------------------------------------------------

/// Requirements drift: the NodePool's template requirements (with `minValues`) are not
/// strictly compatible with the requirements of the NodeClaim's labels.
pub fn is_requirements_drifted(np: &NodePool, claim: &NodeClaim) -> bool {
    let pool = Requirements::from_node_selector_requirements(np.spec.template.spec.requirements());
    let labels = Requirements::from_labels(
        claim
            .metadata
            .labels
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str())),
    );
    !labels.is_compatible(&pool, None)
}

/// Settings of [`drift_reason`] that depend on the cloud provider. Build them with
/// [`DriftOptions::new`] or [`DriftOptions::default`] (the struct is `#[non_exhaustive]`).
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct DriftOptions {
    /// The label policy (well-known labels may be undefined on the NodeClaim when matching
    /// offerings).
    pub policy: LabelPolicy,
    /// Labels describing reserved capacity (e.g. the reservation id), dropped from a
    /// `reserved` NodeClaim's labels before matching offerings.
    pub reserved_capacity_labels: Vec<String>,
}

impl DriftOptions {
    /// Options with this label policy and no reserved-capacity labels.
    pub fn new(policy: LabelPolicy) -> Self {
        DriftOptions {
            policy,
            reserved_capacity_labels: Vec::new(),
        }
    }

    /// The options dropping these labels from a `reserved` NodeClaim's labels before matching
    /// offerings.
    pub fn with_reserved_capacity_labels(mut self, labels: Vec<String>) -> Self {
        self.reserved_capacity_labels = labels;
        self
    }
}

/// Instance-type drift: the NodeClaim has no instance-type label, the type is not among
/// `instance_types`, or none of its offerings is compatible with the NodeClaim's labels (for
/// `reserved` NodeClaims the capacity type is relaxed to reserved or on-demand and the
/// reserved-capacity labels are ignored).
pub fn is_instance_type_drifted(
    claim: &NodeClaim,
    instance_types: &[Arc<InstanceType>],
    options: &DriftOptions,
) -> bool {
    let Some(name) = claim.metadata.labels.get(labels::INSTANCE_TYPE) else {
        return true;
    };
    let Some(it) = instance_types.iter().find(|it| it.name() == name) else {
        return true;
    };
    let reserved = claim
        .metadata
        .labels
        .get(labels::CAPACITY_TYPE)
        .is_some_and(|ct| ct == labels::CAPACITY_TYPE_RESERVED);
    let mut reqs = Requirements::from_labels(
        claim
            .metadata
            .labels
            .iter()
            .filter(|(k, _)| !(reserved && options.reserved_capacity_labels.contains(k)))
            .map(|(k, v)| (k.as_str(), v.as_str())),
    );
    if reserved {
        reqs.remove(labels::CAPACITY_TYPE);
        reqs.add(Requirement::new(
            labels::CAPACITY_TYPE,
            Operator::In,
            [
                labels::CAPACITY_TYPE_RESERVED,
                labels::CAPACITY_TYPE_ON_DEMAND,
            ],
        ));
    }
    !it.offerings
        .iter()
        .any(|o| reqs.is_compatible(o.requirements(), Some(&options.policy)))
}

/// The result of [`drift_reason`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DriftCheck {
    /// The drift reason, if drifted.
    pub reason: Option<DriftReason>,
    /// The instance-type check ran and passed: remember `now` as the claim's last successful
    /// check (pass it back as `last_instance_type_check`).
    pub instance_type_check_passed: bool,
}

/// Computes a launched NodeClaim's drift reason, by precedence: `NodePoolDrifted` →
/// `RequirementsDrifted` → `InstanceTypeNotFound` → `cloud_drift` (the cloud provider's
/// `IsDrifted` result; empty counts as none).
///
/// The instance-type check runs only when the claim is older than 1 h and
/// `last_instance_type_check` (the last *successful* check) is absent or at least 30 min old.
pub fn drift_reason(
    claim: &NodeClaim,
    node_pool: &NodePool,
    instance_types: &[Arc<InstanceType>],
    cloud_drift: Option<&str>,
    now: Timestamp,
    last_instance_type_check: Option<Timestamp>,
    options: &DriftOptions,
) -> DriftCheck {
    let drifted = |reason| DriftCheck {
        reason: Some(reason),
        instance_type_check_passed: false,
    };
    if is_static_drifted(node_pool, claim) {
        return drifted(DriftReason::NodePoolDrifted);
    }
    if is_requirements_drifted(node_pool, claim) {
        return drifted(DriftReason::RequirementsDrifted);
    }
    let old_enough =
        claim_creation_time(claim).is_some_and(|c| since(now, c) > INSTANCE_TYPE_CHECK_MIN_AGE);
    let cached = last_instance_type_check.is_some_and(|t| since(now, t) < INSTANCE_TYPE_CHECK_TTL);
    let mut passed = false;
    if old_enough && !cached {
        if is_instance_type_drifted(claim, instance_types, options) {
            return drifted(DriftReason::InstanceTypeNotFound);
        }
        passed = true;
    }
    DriftCheck {
        reason: cloud_drift
            .filter(|r| !r.is_empty())
            .map(|r| DriftReason::Provider(r.to_string())),
        instance_type_check_passed: passed,
    }
}

/// The `Drifted` condition after a drift evaluation.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct DriftUpdate {
    /// The NodeClaim with its `Drifted` condition set or cleared.
    pub claim: NodeClaim,
    /// Whether the claim changed.
    pub changed: bool,
    /// Re-evaluate after this long (5 min for launched claims).
    pub requeue_after: Option<SignedDuration>,
}

/// Applies a drift evaluation to the `Drifted` condition: a claim not `Launched=True` loses it
/// (no requeue; `check` is ignored); otherwise it is set `True` with reason = message = the
/// drift reason, or cleared when there is none, and drift is re-evaluated in 5 minutes.
pub fn drift_condition_update(
    claim: &NodeClaim,
    check: &DriftCheck,
    now: Timestamp,
) -> DriftUpdate {
    let mut next = claim.clone();
    let requeue_after = apply_drift_condition(&mut next, check, now);
    DriftUpdate {
        changed: &next != claim,
        claim: next,
        requeue_after,
    }
}

/// [`drift_condition_update`] on the claim in place (no copy for a caller that owns it): leaves
/// `claim` as the update's `claim` and returns its `requeue_after`.
pub(crate) fn apply_drift_condition(
    claim: &mut NodeClaim,
    check: &DriftCheck,
    now: Timestamp,
) -> Option<SignedDuration> {
    let launched = conditions::is_true(&claim.status.conditions, LAUNCHED);
    let requeue_after = launched.then_some(DRIFT_REQUEUE);
    let reason = check.reason.as_ref().filter(|_| launched);
    match reason {
        Some(r) => {
            ConditionSet::for_nodeclaim(claim, now).set_true_with_reason(
                DRIFTED,
                r.as_str(),
                r.as_str(),
            );
        }
        None => {
            if crate::api::find_condition(&claim.status.conditions, DRIFTED).is_some() {
                ConditionSet::for_nodeclaim(claim, now).clear(DRIFTED);
            }
        }
    }
    requeue_after
}

// ---------------------------------------------------------------------------------------------
// Drift over a snapshot
// ---------------------------------------------------------------------------------------------

/// What the caller knows per NodeClaim for [`evaluate_snapshot_drift`], beyond the snapshot.
#[derive(Debug, Clone, Default)]
pub struct SnapshotDriftInput {
    /// See [`DriftOptions`].
    pub options: DriftOptions,
    /// The cloud provider's drift reason (its `IsDrifted` result) per NodeClaim name; a claim
    /// absent here has none (the offline planner has no provider to ask).
    pub cloud_drift: BTreeMap<String, String>,
    /// The last successful `InstanceTypeNotFound` check per NodeClaim name (see
    /// [`drift_reason`]); absent means never checked.
    pub last_instance_type_check: BTreeMap<String, Timestamp>,
}

/// What [`evaluate_snapshot_drift`] did to the snapshot.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct SnapshotDrift {
    /// The hash controller's writes, per NodePool name (only pools with something to write),
    /// already applied to the snapshot.
    pub hash_updates: Vec<(String, HashReconcile)>,
    /// NodeClaims whose `Drifted` condition changed, with their drift reason (`None`: cleared),
    /// already applied to the snapshot. In node order.
    pub changed: Vec<(String, Option<DriftReason>)>,
    /// NodeClaims whose instance-type check ran and passed at `now` (remember them as
    /// [`SnapshotDriftInput::last_instance_type_check`]).
    pub instance_type_checks_passed: Vec<String>,
}

/// The cloud provider's drift reasons already recorded on the snapshot's NodeClaims: a
/// `Drifted=True` condition whose reason is none of the core reasons (`NodePoolDrifted`,
/// `RequirementsDrifted`, `InstanceTypeNotFound`), by NodeClaim name. A caller without a cloud
/// provider (the offline planner) passes these as [`SnapshotDriftInput::cloud_drift`], so
/// that drift the provider reported (an image or subnet change) is kept, not cleared.
pub fn recorded_provider_drift(
    snapshot: &crate::state::ClusterSnapshot,
) -> BTreeMap<String, String> {
    let core = [
        DriftReason::NodePoolDrifted,
        DriftReason::RequirementsDrifted,
        DriftReason::InstanceTypeNotFound,
    ];
    snapshot
        .nodes
        .iter()
        .filter_map(|n| n.node_claim.as_ref())
        .filter_map(|c| {
            let cond = crate::api::find_condition(&c.status.conditions, DRIFTED)?;
            let reason = cond.reason.as_deref().filter(|r| !r.is_empty())?;
            (cond.is_true() && !core.iter().any(|k| k.as_str() == reason))
                .then(|| (c.name().to_string(), reason.to_string()))
        })
        .collect()
}

/// Evaluates drift over a snapshot as the controllers do before a disruption pass, and writes
/// the result into it:
///
/// 1. the NodePool hash controller ([`hash_reconcile`]) for every NodePool: the pool's hash
///    annotations are made current and, when its hash version is not ours, its NodeClaims
///    are re-stamped (the hash-version rule: no spurious drift after a version change, and
///    claims already `Drifted` stay drifted);
/// 2. the NodeClaim drift controller for every NodeClaim of a NodePool in the snapshot and
///    not being deleted: [`drift_reason`] (static drift, requirements drift,
///    `InstanceTypeNotFound` against the pool's current instance types, the cloud provider's
///    reason), applied with [`drift_condition_update`] (only `Launched` claims drift).
///
/// The disruption methods then read the `Drifted` conditions as usual. Used by the offline
/// planner; the controller's operator loop calls the same function on its view.
pub fn evaluate_snapshot_drift(
    snapshot: &mut crate::state::ClusterSnapshot,
    now: Timestamp,
    input: &SnapshotDriftInput,
) -> SnapshotDrift {
    let mut out = SnapshotDrift::default();
    // 1. Hash controller.
    for pool in &mut snapshot.node_pools {
        let np = &mut pool.node_pool;
        let claims: Vec<NodeClaim> = snapshot
            .nodes
            .iter()
            .filter_map(|n| n.node_claim.clone())
            .collect();
        let update = hash_reconcile(np, &claims);
        if update == HashReconcile::default() {
            continue;
        }
        if let Some(a) = &update.nodepool_annotations {
            np.metadata.annotations.extend(a.clone());
        }
        for u in &update.claim_updates {
            for node in &mut snapshot.nodes {
                if node
                    .node_claim
                    .as_ref()
                    .is_some_and(|c| c.name() == u.claim_name)
                {
                    let node = Arc::make_mut(node);
                    if let Some(c) = node.node_claim.as_mut() {
                        c.metadata.annotations.extend(u.annotations.clone());
                    }
                }
            }
        }
        out.hash_updates.push((np.name().to_string(), update));
    }
    // 2. Drift controller.
    for node in &mut snapshot.nodes {
        let Some(claim) = node.node_claim.as_ref() else {
            continue;
        };
        if claim.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let Some(pool) = claim
            .metadata
            .labels
            .get(labels::NODEPOOL)
            .and_then(|p| snapshot.node_pools.iter().find(|s| s.node_pool.name() == p))
        else {
            continue;
        };
        let name = claim.name().to_string();
        let check = drift_reason(
            claim,
            &pool.node_pool,
            &pool.instance_types,
            input.cloud_drift.get(&name).map(String::as_str),
            now,
            input.last_instance_type_check.get(&name).copied(),
            &input.options,
        );
        if check.instance_type_check_passed {
            out.instance_type_checks_passed.push(name.clone());
        }
        let update = drift_condition_update(claim, &check, now);
        if update.changed {
            let reason = conditions::is_true(&update.claim.status.conditions, DRIFTED)
                .then(|| check.reason.clone())
                .flatten();
            out.changed.push((name, reason));
            Arc::make_mut(node).node_claim = Some(update.claim);
        }
    }
    out
}

#[cfg(test)]
mod snapshot_tests {
    use super::*;
    use crate::model::Offering;
    use crate::resources::ResourceList;
    use crate::state::{ClusterSnapshot, NodePoolState, StateNode};

    const POOL: &str = "apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    metadata: {labels: {team: a}}
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
";

    fn pool(yaml: &str) -> NodePool {
        serde_saphyr::from_str(yaml).expect("valid NodePool")
    }

    /// A launched NodeClaim of `np` (with its hash annotations), created at 00:00.
    fn claim(np: &NodePool, instance_type: &str) -> NodeClaim {
        let yaml = format!(
            "apiVersion: karpenter.sh/v1
kind: NodeClaim
metadata:
  name: default-x
  creationTimestamp: '2026-01-01T00:00:00Z'
  labels:
    karpenter.sh/nodepool: default
    karpenter.sh/capacity-type: on-demand
    node.kubernetes.io/instance-type: {instance_type}
    topology.kubernetes.io/zone: zone-a
    team: a
spec:
  nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}
status:
  conditions:
    - {{type: Launched, status: 'True', reason: Launched, message: '', lastTransitionTime: '2026-01-01T00:00:00Z'}}
"
        );
        let mut c: NodeClaim = serde_saphyr::from_str(&yaml).expect("valid NodeClaim");
        c.metadata.annotations.extend(claim_hash_annotations(np));
        c
    }

    fn it(name: &str) -> Arc<InstanceType> {
        Arc::new(InstanceType::new(
            name,
            Requirements::new(),
            vec![Offering::new(
                "zone-a",
                labels::CAPACITY_TYPE_ON_DEMAND,
                0.1,
            )],
            ResourceList::new(),
            Default::default(),
        ))
    }

    fn snapshot(np: NodePool, claim: NodeClaim, types: &[&str]) -> ClusterSnapshot {
        ClusterSnapshot {
            node_pools: vec![NodePoolState {
                node_pool: np,
                instance_types: types.iter().map(|t| it(t)).collect(),
                ready: true,
            }],
            nodes: vec![Arc::new(StateNode {
                node: None,
                node_claim: Some(claim),
                pods: vec![],
                marked_for_deletion: false,
                nominated_until: None,
                ready: true,
                volume_limits: Default::default(),
            })],
            ..ClusterSnapshot::default()
        }
    }

    fn drifted(s: &ClusterSnapshot) -> Option<String> {
        let c = s.nodes[0].node_claim.as_ref()?;
        crate::api::find_condition(&c.status.conditions, DRIFTED)
            .filter(|c| c.is_true())
            .and_then(|c| c.reason.clone())
    }

    fn at(s: &str) -> Timestamp {
        s.parse().expect("timestamp")
    }

    #[test]
    fn unchanged_pool_and_offered_type_do_not_drift() {
        let np = pool(POOL);
        let mut s = snapshot(np.clone(), claim(&np, "m5.large"), &["m5.large"]);
        let out = evaluate_snapshot_drift(&mut s, at("2026-01-01T05:00:00Z"), &Default::default());
        assert_eq!(drifted(&s), None);
        assert!(out.changed.is_empty());
        assert_eq!(out.instance_type_checks_passed, ["default-x"]);
        // The pool got its hash annotations, as the hash controller writes them.
        assert_eq!(
            s.node_pools[0]
                .node_pool
                .metadata
                .annotations
                .get(labels::NODEPOOL_HASH_ANNOTATION),
            Some(&nodepool_hash(&np))
        );
    }

    #[test]
    fn a_template_change_drifts_by_hash() {
        let old = pool(POOL);
        let new = pool(&POOL.replace("team: a", "team: b"));
        let mut s = snapshot(new, claim(&old, "m5.large"), &["m5.large"]);
        let out = evaluate_snapshot_drift(&mut s, at("2026-01-01T00:10:00Z"), &Default::default());
        assert_eq!(drifted(&s).as_deref(), Some("NodePoolDrifted"));
        assert_eq!(
            out.changed,
            [("default-x".to_string(), Some(DriftReason::NodePoolDrifted))]
        );
    }

    #[test]
    fn another_hash_version_is_restamped_not_drifted() {
        // A claim stamped by another implementation (upstream's `v3`): the version rule
        // re-stamps it with the pool's current hash instead of reporting drift.
        let old = pool(POOL);
        let new = pool(&POOL.replace("team: a", "team: b"));
        let mut c = claim(&old, "m5.large");
        c.metadata.annotations.insert(
            labels::NODEPOOL_HASH_VERSION_ANNOTATION.to_string(),
            "v3".to_string(),
        );
        let mut new_with_v3 = new.clone();
        new_with_v3.metadata.annotations.insert(
            labels::NODEPOOL_HASH_VERSION_ANNOTATION.to_string(),
            "v3".to_string(),
        );
        let mut s = snapshot(new_with_v3, c, &["m5.large"]);
        let out = evaluate_snapshot_drift(&mut s, at("2026-01-01T00:10:00Z"), &Default::default());
        assert_eq!(drifted(&s), None);
        assert_eq!(out.hash_updates[0].1.claim_updates.len(), 1);
        let annotations = &s.nodes[0].node_claim.as_ref().unwrap().metadata.annotations;
        assert_eq!(
            annotations.get(labels::NODEPOOL_HASH_ANNOTATION),
            Some(&nodepool_hash(&new))
        );
    }

    #[test]
    fn a_requirement_change_drifts() {
        let old = pool(POOL);
        // Requirements are not hashed: only the requirements check sees this.
        let new = pool(&POOL.replace("values: [on-demand]", "values: [spot]"));
        let mut s = snapshot(new, claim(&old, "m5.large"), &["m5.large"]);
        evaluate_snapshot_drift(&mut s, at("2026-01-01T00:10:00Z"), &Default::default());
        assert_eq!(drifted(&s).as_deref(), Some("RequirementsDrifted"));
    }

    #[test]
    fn a_vanished_instance_type_drifts_after_an_hour() {
        let np = pool(POOL);
        let c = claim(&np, "m4.large");
        // Younger than 1 h: not checked yet.
        let mut s = snapshot(np.clone(), c.clone(), &["m5.large"]);
        evaluate_snapshot_drift(&mut s, at("2026-01-01T00:30:00Z"), &Default::default());
        assert_eq!(drifted(&s), None);
        let mut s = snapshot(np, c, &["m5.large"]);
        let out = evaluate_snapshot_drift(&mut s, at("2026-01-01T02:00:00Z"), &Default::default());
        assert_eq!(drifted(&s).as_deref(), Some("InstanceTypeNotFound"));
        assert!(out.instance_type_checks_passed.is_empty());
    }

    #[test]
    fn a_recorded_provider_reason_is_kept() {
        let np = pool(POOL);
        let mut c = claim(&np, "m5.large");
        c.status.conditions.push(crate::api::Condition {
            type_: DRIFTED.to_string(),
            status: crate::api::ConditionStatus::True,
            reason: Some("AMIDrift".to_string()),
            message: Some("AMIDrift".to_string()),
            last_transition_time: Some("2026-01-01T01:00:00Z".to_string()),
            observed_generation: None,
        });
        let mut s = snapshot(np, c, &["m5.large"]);
        let input = SnapshotDriftInput {
            cloud_drift: recorded_provider_drift(&s),
            ..SnapshotDriftInput::default()
        };
        assert_eq!(
            input.cloud_drift.get("default-x").map(String::as_str),
            Some("AMIDrift")
        );
        evaluate_snapshot_drift(&mut s, at("2026-01-01T05:00:00Z"), &input);
        assert_eq!(drifted(&s).as_deref(), Some("AMIDrift"));
        // Without it, nothing the core checks finds drift: the condition is cleared.
        evaluate_snapshot_drift(&mut s, at("2026-01-01T05:00:00Z"), &Default::default());
        assert_eq!(drifted(&s), None);
    }
}

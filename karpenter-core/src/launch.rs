//! The steps between a solve and a launch, shared by every cloud provider.
//!
//! 1. [`to_node_claim`] turns a NodeClaim the scheduler planned ([`NewNodeClaim`]) into the
//!    `karpenter.sh/v1` [`NodeClaim`] to create (upstream `NodeClaimTemplate.ToNodeClaim`):
//!    requirements (instance types and capacity types pinned, `minValues` kept), labels, taints,
//!    startup taints, requests, the node class, the NodePool hash annotations and an owner
//!    reference to the NodePool.
//! 2. A provider's `create` resolves that NodeClaim against its instance types with
//!    [`resolve_launch`]: the cheapest compatible available offering ([`choose_launch`]) and the
//!    labels it resolves ([`launch_labels`]); [`Launch::launched`] then fills in the launched
//!    claim. The fake provider, the AWS provider and custom providers all launch through these,
//!    so a launch means the same thing everywhere.
//!
//! ```
//! use std::sync::Arc;
//!
//! use karpenter_core::launch::{resolve_launch, to_node_claim};
//! use karpenter_core::prelude::*;
//!
//! let capacity: ResourceList = [("cpu", Quantity::from_units(4)), ("pods", Quantity::from_units(10))]
//!     .into_iter()
//!     .collect();
//! let it = Arc::new(InstanceType::new(
//!     "c.large",
//!     Requirements::new(),
//!     vec![Offering::new("zone-a", "on-demand", 0.20), Offering::new("zone-b", "spot", 0.07)],
//!     capacity,
//!     Overhead::default(),
//! ));
//! let class = NodeClassReference::new("example.com", "ExampleNodeClass", "default");
//! let pool = NodePool::new("default", NodePoolSpec::new(NodeClaimTemplate::new(NodeClaimTemplateSpec::new(class))));
//!
//! let input = SchedulingInput::new()
//!     .with_node_pools(vec![NodePoolInput::from_nodepool(&pool, vec![it.clone()])])
//!     .with_pods(vec![Pod::new("default", "web").with_requests([("cpu", Quantity::from_units(1))])]);
//! let options = SchedulerOptions::default();
//! let results = solve(&input, &options);
//! let node_claim = to_node_claim(&results.new_node_claims[0], &pool, &options.label_policy);
//! assert_eq!(node_claim.metadata.labels["karpenter.sh/nodepool"], "default");
//!
//! let launch = resolve_launch(&node_claim, &[it], &options.label_policy, None, |_, _| false).unwrap();
//! assert_eq!(launch.offering().zone(), "zone-b"); // spot is cheapest
//! let launched = launch.launched(&node_claim, "example://1");
//! assert_eq!(launched.metadata.labels["topology.kubernetes.io/zone"], "zone-b");
//! assert_eq!(launched.status.provider_id.as_deref(), Some("example://1"));
//! ```

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::api::{NodeClaim, NodeClaimSpec, NodePool, ObjectMeta, OwnerReference};
use crate::labels::{self, LabelPolicy};
use crate::model::{InstanceType, Offering};
use crate::requirements::{Operator, Requirements};
use crate::resources::ResourceList;
use crate::scheduling::NewNodeClaim;

/// The `metadata` key under which [`to_node_claim`] puts the name prefix (`<nodepool>-`) the
/// API server completes into a unique name (Kubernetes' `generateName`).
pub const GENERATE_NAME: &str = "generateName";

/// The `karpenter.sh/v1` NodeClaim to create for a claim the scheduler planned (upstream
/// `NodeClaimTemplate.ToNodeClaim`).
///
/// - `spec.requirements`: [`NewNodeClaim::node_claim_requirements`] (the claim's requirements
///   with `node.kubernetes.io/instance-type In [its instance types]`, keeping that key's
///   `minValues`, and `karpenter.sh/capacity-type In [usable capacity types]`), sorted by key;
/// - `spec.resources.requests`: the pods' requests plus daemon overhead;
/// - `spec.taints`, `spec.startupTaints`: the claim's (from the NodePool template);
/// - `spec.nodeClassRef`, `spec.expireAfter`, `spec.terminationGracePeriod`: the NodePool
///   template's;
/// - `metadata.labels`: the claim's labels plus `karpenter.sh/nodepool`;
/// - `metadata.annotations`: the template's annotations, the NodePool hash
///   (`karpenter.sh/nodepool-hash`, `karpenter.sh/nodepool-hash-version`) and
///   `karpenter.sh/nodeclaim-min-values-relaxed` (`"true"` or `"false"`) when any requirement
///   carries `minValues`;
/// - `metadata.ownerReferences`: the NodePool (`blockOwnerDeletion: true`);
/// - no name: `metadata.generateName` is `<nodepool>-`; set `metadata.name` for a concrete name.
///
/// `pool` is the NodePool the claim came from (`claim.node_pool`); `policy` the label policy of
/// the solve.
pub fn to_node_claim(claim: &NewNodeClaim, pool: &NodePool, policy: &LabelPolicy) -> NodeClaim {
    let template = &pool.spec.template;
    let requirements = claim.node_claim_requirements(policy);

    let mut labels = claim.labels.clone();
    labels.insert(labels::NODEPOOL.to_string(), claim.node_pool.clone());

    let mut annotations = template.metadata.annotations.clone();
    annotations.extend(crate::lifecycle::drift::claim_hash_annotations(pool));
    if requirements.has_min_values() {
        annotations.insert(
            labels::MIN_VALUES_RELAXED_ANNOTATION.to_string(),
            claim.min_values_relaxed.to_string(),
        );
    }

    let mut metadata = ObjectMeta {
        labels,
        annotations,
        owner_references: vec![OwnerReference {
            api_version: crate::api::API_VERSION.to_string(),
            kind: crate::api::NODEPOOL_KIND.to_string(),
            name: claim.node_pool.clone(),
            uid: pool.metadata.uid.clone().unwrap_or_default(),
            controller: None,
            block_owner_deletion: Some(true),
        }],
        ..ObjectMeta::default()
    };
    metadata.extra.insert(
        GENERATE_NAME.to_string(),
        serde_json::Value::String(format!("{}-", claim.node_pool)),
    );

    let mut spec = NodeClaimSpec::new(template.spec.node_class_ref.clone());
    spec.taints = claim.taints.clone();
    spec.startup_taints = claim.startup_taints.clone();
    spec.requirements = Some(requirements.to_node_selector_requirements());
    spec.resources.requests = claim.requests.clone();
    spec.expire_after = template.spec.expire_after.clone();
    spec.termination_grace_period = template.spec.termination_grace_period.clone();

    let mut node_claim = NodeClaim::new("", spec);
    node_claim.metadata = metadata;
    node_claim
}

impl NewNodeClaim {
    /// The price per hour this claim launches at: that of the offering [`choose_launch`] picks
    /// among its instance types for its NodeClaim requirements and requests (the cheapest
    /// compatible available offering). `None` when none can launch it.
    pub fn launch_price(&self, policy: &LabelPolicy) -> Option<f64> {
        let requirements = self.node_claim_requirements(policy);
        let choice = choose_launch(
            &self.instance_types,
            &requirements,
            &self.requests,
            policy,
            |_, _| false,
        )?;
        let it = self.instance_types.get(choice.instance_type)?;
        it.offerings.get(choice.offering).map(|o| o.price)
    }
}

/// What [`choose_launch`] picked: indices into the candidate instance types and into that type's
/// offerings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct LaunchChoice {
    /// Index of the chosen instance type in the candidates.
    pub instance_type: usize,
    /// Index of the chosen offering in that type's offerings.
    pub offering: usize,
}

/// Chooses the instance type and offering a NodeClaim launches as (as upstream's fake provider, `fake.CloudProvider.Create`).
///
/// Candidates are the instance types loosely compatible (with `policy`) with `requirements`,
/// having an available offering compatible with `requirements` that `excluded` does not reject,
/// and whose base allocatable fits `requests`. The cheapest such type wins (by its cheapest
/// usable offering; ties keep the order of `instance_types`). Its offering is the cheapest usable
/// *reserved* offering if any (reserved capacity is already paid for), else the cheapest usable
/// offering; ties keep list order (so on offerings of equal price, as the fake provider's, the
/// first in list order, as upstream's fake provider). `excluded` lets a provider skip offerings
/// it knows to be failing (an unavailable-offerings cache).
///
/// `None` when no instance type can launch the claim.
pub fn choose_launch(
    instance_types: &[Arc<InstanceType>],
    requirements: &Requirements,
    requests: &ResourceList,
    policy: &LabelPolicy,
    excluded: impl Fn(&InstanceType, &Offering) -> bool,
) -> Option<LaunchChoice> {
    let usable = |it: &InstanceType, o: &Offering| {
        o.available
            && requirements.is_compatible(o.requirements(), Some(policy))
            && !excluded(it, o)
    };
    let mut best: Option<(usize, f64)> = None;
    for (i, it) in instance_types.iter().enumerate() {
        if !requirements.is_compatible(it.requirements(), Some(policy))
            || !ResourceList::fits(requests, it.allocatable())
        {
            continue;
        }
        let cheapest = it
            .offerings
            .iter()
            .filter(|o| usable(it, o))
            .map(|o| o.price)
            .min_by(f64::total_cmp);
        if let Some(price) = cheapest
            && best.is_none_or(|(_, p)| price.total_cmp(&p).is_lt())
        {
            best = Some((i, price));
        }
    }
    let (index, _) = best?;
    let it = instance_types.get(index)?;
    let cheapest = |reserved: bool| {
        it.offerings
            .iter()
            .enumerate()
            .filter(|(_, o)| (!reserved || o.is_reserved()) && usable(it, o))
            .min_by(|(_, a), (_, b)| a.price.total_cmp(&b.price))
            .map(|(i, _)| i)
    };
    let offering = cheapest(true).or_else(|| cheapest(false))?;
    Some(LaunchChoice {
        instance_type: index,
        offering,
    })
}

/// The labels of a node launched as `instance_type` through `offering` (as upstream's fake provider, `fake.CloudProvider.Create`): for every
/// instance-type requirement with operator `In`, one of its values; then the offering's zone,
/// capacity type and, when `reservation_label` is given and the offering is reserved, its
/// reservation id under that key; then the offering's own labels ([`Offering::labels`]); then
/// `claim_labels`, which win.
///
/// Upstream takes an arbitrary value of a multi-valued requirement (Go set order); here the
/// value is deterministic: the smallest value that the claim's `requirements` allow for that key,
/// or the smallest value if the claim allows none of them or does not constrain the key. So a
/// claim requiring `kubernetes.io/os In [linux]` on a type offering {darwin, linux, windows} gets
/// `linux`.
pub fn launch_labels(
    instance_type: &InstanceType,
    offering: &Offering,
    requirements: &Requirements,
    claim_labels: &BTreeMap<String, String>,
    reservation_label: Option<&str>,
) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for r in instance_type.requirements().iter() {
        if r.operator() != Operator::In {
            continue;
        }
        let allowed = requirements.get(r.key());
        let value = r
            .values()
            .find(|v| allowed.is_some_and(|a| a.has(v)))
            .or_else(|| r.values().next());
        if let Some(v) = value {
            out.insert(r.key().to_string(), v.to_string());
        }
    }
    out.insert(labels::ZONE.to_string(), offering.zone().to_string());
    out.insert(
        labels::CAPACITY_TYPE.to_string(),
        offering.capacity_type().to_string(),
    );
    if let (Some(key), Some(id)) = (reservation_label, offering.reservation_id()) {
        out.insert(key.to_string(), id.to_string());
    }
    for (key, value) in offering.labels() {
        if let Some(v) = value {
            out.insert(key.clone(), v.clone());
        }
    }
    for (k, v) in claim_labels {
        out.insert(k.clone(), v.clone());
    }
    out
}

/// Takes one instance out of a reserved offering: its `reservation_capacity` drops by one and it
/// becomes unavailable at zero. Non-reserved offerings and out-of-range indices are left alone.
/// The instance type is copied first if the `Arc` is shared.
pub fn consume_reservation(instance_type: &mut Arc<InstanceType>, offering: usize) {
    let reserved = instance_type
        .offerings
        .get(offering)
        .is_some_and(Offering::is_reserved);
    if !reserved {
        return;
    }
    if let Some(o) = Arc::make_mut(instance_type).offerings.get_mut(offering) {
        o.reservation_capacity = o.reservation_capacity.saturating_sub(1);
        if o.reservation_capacity == 0 {
            o.available = false;
        }
    }
}

/// `resources` without its zero quantities (what a launched node reports).
pub fn drop_zeros(resources: &ResourceList) -> ResourceList {
    resources.iter().filter(|(_, q)| !q.is_zero()).collect()
}

/// A resolved launch: the instance type and offering a NodeClaim launches as, and the labels
/// the node gets. Built by [`resolve_launch`].
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Launch {
    choice: LaunchChoice,
    instance_type: Arc<InstanceType>,
    offering: Offering,
    labels: BTreeMap<String, String>,
}

impl Launch {
    /// The indices of the choice in the instance types passed to [`resolve_launch`] (for
    /// [`consume_reservation`]).
    pub fn choice(&self) -> LaunchChoice {
        self.choice
    }

    /// The chosen instance type.
    pub fn instance_type(&self) -> &Arc<InstanceType> {
        &self.instance_type
    }

    /// The chosen offering.
    pub fn offering(&self) -> &Offering {
        &self.offering
    }

    /// The node's labels ([`launch_labels`]).
    pub fn labels(&self) -> &BTreeMap<String, String> {
        &self.labels
    }

    /// The price per hour of the launch.
    pub fn price(&self) -> f64 {
        self.offering.price
    }

    /// `node_claim` as launched, what a provider's `create` returns (as upstream's fake provider
    /// builds it): the claim's name and annotations, [`labels`](Self::labels) as its labels, a
    /// copy of its spec, and a status holding only `providerID` and the `capacity` and
    /// `allocatable` of the instance type through the offering (zero quantities dropped).
    /// Nothing else of the claim (finalizers, owners, conditions...) is part of an instance.
    pub fn launched(&self, node_claim: &NodeClaim, provider_id: impl Into<String>) -> NodeClaim {
        let mut launched = NodeClaim::new(node_claim.name(), node_claim.spec.clone());
        launched.metadata.labels = self.labels.clone();
        launched.metadata.annotations = node_claim.metadata.annotations.clone();
        launched.status.provider_id = Some(provider_id.into());
        let capacity = match &self.offering.capacity_override {
            Some(over) => {
                let mut c = self.instance_type.capacity().clone();
                for (name, q) in over.iter() {
                    c.insert(name, q);
                }
                c
            }
            None => self.instance_type.capacity().clone(),
        };
        launched.status.capacity = drop_zeros(&capacity);
        launched.status.allocatable =
            drop_zeros(&self.instance_type.allocatable_with(&self.offering));
        launched
    }
}

/// Resolves how `node_claim` launches among `instance_types` (as upstream's fake provider, `fake.CloudProvider.Create`): its requirements and
/// requests are read from the claim's spec, [`choose_launch`] picks the cheapest usable offering
/// (skipping those `excluded` rejects) and [`launch_labels`] resolves the node's labels, the
/// claim's own labels winning. `reservation_label` is the provider's reservation-id label key.
///
/// `None` when no instance type can launch the claim; a provider then answers
/// [`CloudProviderError::InsufficientCapacity`](crate::cloud::CloudProviderError::InsufficientCapacity).
pub fn resolve_launch(
    node_claim: &NodeClaim,
    instance_types: &[Arc<InstanceType>],
    policy: &LabelPolicy,
    reservation_label: Option<&str>,
    excluded: impl Fn(&InstanceType, &Offering) -> bool,
) -> Option<Launch> {
    let requirements =
        Requirements::from_node_selector_requirements(node_claim.spec.requirements());
    let requests = &node_claim.spec.resources.requests;
    let choice = choose_launch(instance_types, &requirements, requests, policy, excluded)?;
    let instance_type = Arc::clone(instance_types.get(choice.instance_type)?);
    let offering = instance_type.offerings.get(choice.offering)?.clone();
    let labels = launch_labels(
        &instance_type,
        &offering,
        &requirements,
        &node_claim.metadata.labels,
        reservation_label,
    );
    Some(Launch {
        choice,
        instance_type,
        offering,
        labels,
    })
}

#[cfg(test)]
mod tests;

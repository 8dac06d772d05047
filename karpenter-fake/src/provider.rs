//! [`FakeCloudProvider`]: an in-memory [`CloudProvider`] that launches NodeClaims the way upstream
//! Karpenter's fake provider does (upstream `fake.CloudProvider.Create`), records every call and
//! can be told to fail.
//!
//! The launch rules are also exposed as plain functions ([`choose_launch`], [`launch_labels`],
//! [`consume_reservation`]) so that the provisioning harness (module `harness`) launches exactly
//! like the provider without going through `async`.
//!
//! ```
//! use karpenter_core::api::{NodeClaim, NodeClaimSpec, NodeClassReference};
//! use karpenter_core::cloud::CloudProvider;
//! use karpenter_core::labels;
//! use karpenter_fake::FakeCloudProvider;
//!
//! let provider = FakeCloudProvider::new();
//! let claim = NodeClaim::new("a", NodeClaimSpec::new(NodeClassReference::default()));
//! let launched = futures::executor::block_on(provider.create(&claim)).unwrap();
//! assert_eq!(launched.status.provider_id.as_deref(), Some("fake://1"));
//! // Unconstrained: the cheapest type, first offering in list order (spot in test-zone-1).
//! assert_eq!(launched.metadata.labels[labels::INSTANCE_TYPE], "small-instance-type");
//! assert_eq!(launched.metadata.labels[labels::CAPACITY_TYPE], "spot");
//! assert_eq!(launched.metadata.labels[labels::ZONE], "test-zone-1");
//! ```

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use async_trait::async_trait;
use karpenter_core::api::{ConditionStatus, NodeClaim, NodePool};
use karpenter_core::cloud::{CloudProvider, CloudProviderError, RepairPolicy, UnavailableOffering};
use karpenter_core::labels::{self, LabelPolicy};
use karpenter_core::model::{InstanceType, Offering};
use karpenter_core::requirements::{Operator, Requirements};
use karpenter_core::resources::ResourceList;

use crate::catalog::{self, RESERVATION_ID_LABEL};

/// The prefix of the provider ids the fake provider assigns (`fake://1`, `fake://2`, …).
pub const PROVIDER_ID_PREFIX: &str = "fake://";

/// The name [`FakeCloudProvider`] reports.
pub const PROVIDER_NAME: &str = "fake";

// ---------------------------------------------------------------------------------------------
// Launch rules (upstream `fake.CloudProvider.Create`)
// ---------------------------------------------------------------------------------------------

/// What [`choose_launch`] picked: indices into the candidate instance types and into that type's
/// offerings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LaunchChoice {
    /// Index of the chosen instance type in the candidates.
    pub instance_type: usize,
    /// Index of the chosen offering in that type's `offerings`.
    pub offering: usize,
}

/// Chooses the instance type and offering a NodeClaim launches as (upstream
/// `fake.CloudProvider.Create`).
///
/// Candidates are the instance types loosely compatible (2.7, with `policy`) with
/// `requirements`, having an available offering compatible with `requirements` that `excluded`
/// does not reject, and whose base allocatable fits `requests`. The cheapest such type wins (by
/// its cheapest usable offering; ties keep the catalog order). Its offering is the first usable
/// *reserved* offering if any, else the first usable offering in list order — so an
/// unconstrained claim on the default offerings lands on spot in test-zone-1, and a claim
/// pinned to test-zone-3 on on-demand.
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
        if !requirements.is_compatible(&it.requirements, Some(policy))
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
    let offering = it
        .offerings
        .iter()
        .position(|o| o.is_reserved() && usable(it, o))
        .or_else(|| it.offerings.iter().position(|o| usable(it, o)))?;
    Some(LaunchChoice {
        instance_type: index,
        offering,
    })
}

/// The labels of a node launched as `instance_type` with `offering` (upstream
/// `fake.CloudProvider.Create`): for every instance-type requirement with operator `In`, one of its
/// values; then the offering's zone, capacity type and reservation id (under
/// [`RESERVATION_ID_LABEL`]); then `claim_labels`, which win.
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
) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for r in instance_type.requirements.iter() {
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
    out.insert(labels::ZONE.to_string(), offering.zone.clone());
    out.insert(
        labels::CAPACITY_TYPE.to_string(),
        offering.capacity_type.clone(),
    );
    if let Some(id) = &offering.reservation_id {
        out.insert(RESERVATION_ID_LABEL.to_string(), id.clone());
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

/// `resources` without its zero quantities.
pub fn drop_zeros(resources: &ResourceList) -> ResourceList {
    resources.iter().filter(|(_, q)| !q.is_zero()).collect()
}

// ---------------------------------------------------------------------------------------------
// Calls
// ---------------------------------------------------------------------------------------------

/// A call made to a [`FakeCloudProvider`], with its arguments. Calls are recorded before they
/// succeed or fail.
#[derive(Debug, Clone, PartialEq)]
pub enum Call {
    /// [`CloudProvider::create`].
    Create(Box<NodeClaim>),
    /// [`CloudProvider::delete`].
    Delete(Box<NodeClaim>),
    /// [`CloudProvider::get`] with the provider id.
    Get(String),
    /// [`CloudProvider::list`].
    List,
    /// [`CloudProvider::instance_types`] with the NodePool's name (empty when unnamed).
    InstanceTypes(String),
    /// [`CloudProvider::is_drifted`].
    IsDrifted(Box<NodeClaim>),
}

impl Call {
    /// The kind of call.
    pub fn kind(&self) -> CallKind {
        match self {
            Call::Create(_) => CallKind::Create,
            Call::Delete(_) => CallKind::Delete,
            Call::Get(_) => CallKind::Get,
            Call::List => CallKind::List,
            Call::InstanceTypes(_) => CallKind::InstanceTypes,
            Call::IsDrifted(_) => CallKind::IsDrifted,
        }
    }
}

/// The kind of a [`Call`], without its arguments.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum CallKind {
    /// `create`.
    Create,
    /// `delete`.
    Delete,
    /// `get`.
    Get,
    /// `list`.
    List,
    /// `instance_types`.
    InstanceTypes,
    /// `is_drifted`.
    IsDrifted,
}

// ---------------------------------------------------------------------------------------------
// The provider
// ---------------------------------------------------------------------------------------------

/// An in-memory cloud provider for tests.
///
/// - **Instance types**: [`catalog::default_catalog`] for every NodePool unless set with
///   [`set_instance_types`](Self::set_instance_types) (all pools) or
///   [`set_node_pool_instance_types`](Self::set_node_pool_instance_types) (one pool).
/// - **Create** follows upstream `fake.CloudProvider.Create` (see [`choose_launch`] and
///   [`launch_labels`]) over the instance types of the claim's `karpenter.sh/nodepool`; the
///   launched claim gets provider id `fake://<n>` (n = 1, 2, …), the type's capacity and
///   allocatable (zero quantities dropped) and the resolved labels. Launching into a reserved
///   offering consumes one instance of the reservation. When no instance type can launch the claim,
///   `create` fails with [`CloudProviderError::InsufficientCapacity`] (listing the injected
///   offering failures that stood in the way, if any).
/// - **Instances** are kept in memory; `get`, `list` (in launch order) and `delete` use them and
///   answer [`CloudProviderError::NodeClaimNotFound`] for unknown ids.
/// - **Calls** are recorded ([`calls`](Self::calls)).
/// - **Failures** can be injected: [`fail_offering`](Self::fail_offering) (insufficient
///   capacity for one offering), [`fail_next`](Self::fail_next) (the next calls fail with a given
///   error, e.g. throttling or a timeout) and [`fail_creates_after`](Self::fail_creates_after)
///   (partial failure of a batch of launches).
/// - **Drift** is set per provider id with [`set_drifted`](Self::set_drifted).
///
/// State lives behind a `std::sync::Mutex`; no async runtime is needed (use
/// `futures::executor::block_on` in tests).
#[derive(Debug)]
pub struct FakeCloudProvider {
    label_policy: LabelPolicy,
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    default_instance_types: Vec<Arc<InstanceType>>,
    node_pool_instance_types: BTreeMap<String, Vec<Arc<InstanceType>>>,
    instances: BTreeMap<u64, NodeClaim>,
    next_id: u64,
    calls: Vec<Call>,
    failed_offerings: BTreeSet<UnavailableOffering>,
    next_errors: VecDeque<CloudProviderError>,
    creates_left: Option<usize>,
    drifted: BTreeMap<String, String>,
    repair_policies: Vec<RepairPolicy>,
}

impl State {
    fn new() -> Self {
        State {
            default_instance_types: catalog::default_catalog(),
            node_pool_instance_types: BTreeMap::new(),
            instances: BTreeMap::new(),
            next_id: 1,
            calls: Vec::new(),
            failed_offerings: BTreeSet::new(),
            next_errors: VecDeque::new(),
            creates_left: None,
            drifted: BTreeMap::new(),
            repair_policies: default_repair_policies(),
        }
    }

    fn instance_types_mut(&mut self, node_pool: &str) -> &mut Vec<Arc<InstanceType>> {
        match self.node_pool_instance_types.get_mut(node_pool) {
            Some(types) => types,
            None => &mut self.default_instance_types,
        }
    }
}

/// The fake provider's default repair policies: node conditions `BadNode=False` and
/// `ExampleReady=False`, each tolerated for 30 minutes.
pub fn default_repair_policies() -> Vec<RepairPolicy> {
    ["BadNode", "ExampleReady"]
        .into_iter()
        .map(|t| RepairPolicy {
            condition_type: t.to_string(),
            condition_status: ConditionStatus::False,
            toleration_duration: Duration::from_secs(30 * 60),
        })
        .collect()
}

fn parse_provider_id(provider_id: &str) -> Option<u64> {
    provider_id
        .strip_prefix(PROVIDER_ID_PREFIX)
        .and_then(|n| n.parse().ok())
}

impl Default for FakeCloudProvider {
    fn default() -> Self {
        Self::new()
    }
}

impl FakeCloudProvider {
    /// A provider with the default catalog, no instances, no failures, using
    /// [`catalog::fake_label_policy`] for loose compatibility.
    pub fn new() -> Self {
        FakeCloudProvider {
            label_policy: catalog::fake_label_policy(),
            state: Mutex::new(State::new()),
        }
    }

    /// Uses `policy` instead of [`catalog::fake_label_policy`] for loose compatibility.
    pub fn with_label_policy(mut self, policy: LabelPolicy) -> Self {
        self.label_policy = policy;
        self
    }

    /// The label policy used for loose compatibility.
    pub fn label_policy(&self) -> &LabelPolicy {
        &self.label_policy
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock cannot leave the state half-updated in a way that
        // matters to a test double; keep going with whatever is there.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Offers `instance_types` to every NodePool without its own list (replaces the default
    /// catalog).
    pub fn set_instance_types(&self, instance_types: Vec<Arc<InstanceType>>) {
        self.state().default_instance_types = instance_types;
    }

    /// Offers `instance_types` to the NodePool named `node_pool` only.
    pub fn set_node_pool_instance_types(
        &self,
        node_pool: impl Into<String>,
        instance_types: Vec<Arc<InstanceType>>,
    ) {
        self.state()
            .node_pool_instance_types
            .insert(node_pool.into(), instance_types);
    }

    /// The instance types offered to the NodePool named `node_pool` (its own list, else the
    /// shared one), including reservation capacity consumed so far. Not recorded as a call.
    pub fn instance_types_for(&self, node_pool: &str) -> Vec<Arc<InstanceType>> {
        self.state().instance_types_mut(node_pool).clone()
    }

    /// Every call so far, in order.
    pub fn calls(&self) -> Vec<Call> {
        self.state().calls.clone()
    }

    /// The number of calls of `kind` so far.
    pub fn call_count(&self, kind: CallKind) -> usize {
        self.state()
            .calls
            .iter()
            .filter(|c| c.kind() == kind)
            .count()
    }

    /// The NodeClaims passed to `create` so far (successful or not), in order.
    pub fn create_calls(&self) -> Vec<NodeClaim> {
        self.state()
            .calls
            .iter()
            .filter_map(|c| match c {
                Call::Create(nc) => Some((**nc).clone()),
                _ => None,
            })
            .collect()
    }

    /// Forgets the recorded calls (instances and failures are kept).
    pub fn clear_calls(&self) {
        self.state().calls.clear();
    }

    /// The launched instances, in launch order (like `list`, but not recorded as a call).
    pub fn instances(&self) -> Vec<NodeClaim> {
        self.state().instances.values().cloned().collect()
    }

    /// Makes the offering (`instance_type`, `zone`, `capacity_type`) fail with insufficient
    /// capacity: `create` skips it, and fails with [`CloudProviderError::InsufficientCapacity`]
    /// listing the failed offerings when nothing else fits the claim.
    pub fn fail_offering(
        &self,
        instance_type: impl Into<String>,
        zone: impl Into<String>,
        capacity_type: impl Into<String>,
    ) {
        self.state().failed_offerings.insert(UnavailableOffering {
            instance_type: instance_type.into(),
            zone: zone.into(),
            capacity_type: capacity_type.into(),
        });
    }

    /// Makes the next `n` calls that can fail (every method but `repair_policies` and `name`)
    /// return `error`. Queued after errors already injected.
    pub fn fail_next(&self, n: usize, error: CloudProviderError) {
        self.state()
            .next_errors
            .extend(std::iter::repeat_n(error, n));
    }

    /// Lets `k` more creates succeed; every later create fails with
    /// [`CloudProviderError::Create`] (reason `CreateLimitReached`) — a batch that partially
    /// fails.
    pub fn fail_creates_after(&self, k: usize) {
        self.state().creates_left = Some(k);
    }

    /// Marks the instance with `provider_id` drifted for `reason`.
    pub fn set_drifted(&self, provider_id: impl Into<String>, reason: impl Into<String>) {
        self.state()
            .drifted
            .insert(provider_id.into(), reason.into());
    }

    /// Clears the drift of the instance with `provider_id`.
    pub fn clear_drifted(&self, provider_id: &str) {
        self.state().drifted.remove(provider_id);
    }

    /// Replaces the repair policies.
    pub fn set_repair_policies(&self, policies: Vec<RepairPolicy>) {
        self.state().repair_policies = policies;
    }

    /// Back to a fresh provider: default catalog, no instances, no recorded calls, no injected
    /// failures, no drift, default repair policies, ids restarting at `fake://1`.
    pub fn reset(&self) {
        *self.state() = State::new();
    }

    fn begin(&self, call: Call) -> Result<MutexGuard<'_, State>, CloudProviderError> {
        let mut state = self.state();
        state.calls.push(call);
        match state.next_errors.pop_front() {
            Some(err) => Err(err),
            None => Ok(state),
        }
    }

    fn launch(
        &self,
        state: &mut State,
        node_claim: &NodeClaim,
    ) -> Result<NodeClaim, CloudProviderError> {
        if state.creates_left == Some(0) {
            return Err(CloudProviderError::Create {
                reason: "CreateLimitReached".to_string(),
                message: "the fake provider was told to fail further creates".to_string(),
            });
        }
        let node_pool = node_claim
            .metadata
            .labels
            .get(labels::NODEPOOL)
            .cloned()
            .unwrap_or_default();
        let requirements =
            Requirements::from_node_selector_requirements(node_claim.spec.requirements());
        let requests = &node_claim.spec.resources.requests;
        let policy = &self.label_policy;
        let failed = &state.failed_offerings;
        let is_failed = |it: &InstanceType, o: &Offering| {
            failed.contains(&UnavailableOffering {
                instance_type: it.name.clone(),
                zone: o.zone.clone(),
                capacity_type: o.capacity_type.clone(),
            })
        };
        let types = match state.node_pool_instance_types.get(&node_pool) {
            Some(types) => types,
            None => &state.default_instance_types,
        };
        let Some(choice) = choose_launch(types, &requirements, requests, policy, is_failed) else {
            // Which injected failures stood in the way, if any.
            let offerings: Vec<UnavailableOffering> = types
                .iter()
                .filter(|it| {
                    requirements.is_compatible(&it.requirements, Some(policy))
                        && ResourceList::fits(requests, it.allocatable())
                })
                .flat_map(|it| {
                    it.offerings
                        .iter()
                        .filter(|o| {
                            o.available
                                && requirements.is_compatible(o.requirements(), Some(policy))
                                && is_failed(it, o)
                        })
                        .map(|o| UnavailableOffering {
                            instance_type: it.name.clone(),
                            zone: o.zone.clone(),
                            capacity_type: o.capacity_type.clone(),
                        })
                })
                .collect();
            let message = if offerings.is_empty() {
                "no instance type with an available offering satisfies the nodeclaim".to_string()
            } else {
                let list: Vec<String> = offerings.iter().map(ToString::to_string).collect();
                format!("all compatible offerings failed: {}", list.join(", "))
            };
            return Err(CloudProviderError::InsufficientCapacity { offerings, message });
        };

        let types = state.instance_types_mut(&node_pool);
        let Some(slot) = types.get_mut(choice.instance_type) else {
            return Err(CloudProviderError::other(
                "instance type vanished during launch",
            ));
        };
        let instance_type = Arc::clone(slot);
        let Some(offering) = instance_type.offerings.get(choice.offering).cloned() else {
            return Err(CloudProviderError::other("offering vanished during launch"));
        };
        consume_reservation(slot, choice.offering);

        let id = state.next_id;
        state.next_id += 1;
        let mut launched = node_claim.clone();
        launched.metadata.labels = launch_labels(
            &instance_type,
            &offering,
            &requirements,
            &node_claim.metadata.labels,
        );
        launched.status.provider_id = Some(format!("{PROVIDER_ID_PREFIX}{id}"));
        launched.status.capacity = drop_zeros(&instance_type.capacity);
        launched.status.allocatable = drop_zeros(instance_type.allocatable());
        state.instances.insert(id, launched.clone());
        if let Some(left) = state.creates_left.as_mut() {
            *left = left.saturating_sub(1);
        }
        Ok(launched)
    }
}

#[async_trait]
impl CloudProvider for FakeCloudProvider {
    async fn create(&self, node_claim: &NodeClaim) -> Result<NodeClaim, CloudProviderError> {
        let mut state = self.begin(Call::Create(Box::new(node_claim.clone())))?;
        self.launch(&mut state, node_claim)
    }

    async fn delete(&self, node_claim: &NodeClaim) -> Result<(), CloudProviderError> {
        let mut state = self.begin(Call::Delete(Box::new(node_claim.clone())))?;
        let provider_id = node_claim.status.provider_id.clone().unwrap_or_default();
        match parse_provider_id(&provider_id).and_then(|id| state.instances.remove(&id)) {
            Some(_) => {
                state.drifted.remove(&provider_id);
                Ok(())
            }
            None => Err(CloudProviderError::not_found(provider_id)),
        }
    }

    async fn get(&self, provider_id: &str) -> Result<NodeClaim, CloudProviderError> {
        let state = self.begin(Call::Get(provider_id.to_string()))?;
        parse_provider_id(provider_id)
            .and_then(|id| state.instances.get(&id))
            .cloned()
            .ok_or_else(|| CloudProviderError::not_found(provider_id))
    }

    async fn list(&self) -> Result<Vec<NodeClaim>, CloudProviderError> {
        let state = self.begin(Call::List)?;
        Ok(state.instances.values().cloned().collect())
    }

    async fn instance_types(
        &self,
        node_pool: &NodePool,
    ) -> Result<Vec<Arc<InstanceType>>, CloudProviderError> {
        let name = node_pool.metadata.name.clone().unwrap_or_default();
        let mut state = self.begin(Call::InstanceTypes(name.clone()))?;
        Ok(state.instance_types_mut(&name).clone())
    }

    async fn is_drifted(
        &self,
        node_claim: &NodeClaim,
    ) -> Result<Option<String>, CloudProviderError> {
        let state = self.begin(Call::IsDrifted(Box::new(node_claim.clone())))?;
        Ok(node_claim
            .status
            .provider_id
            .as_ref()
            .and_then(|id| state.drifted.get(id))
            .cloned())
    }

    fn repair_policies(&self) -> Vec<RepairPolicy> {
        self.state().repair_policies.clone()
    }

    fn name(&self) -> &str {
        PROVIDER_NAME
    }
}

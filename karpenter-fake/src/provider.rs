//! [`FakeCloudProvider`]: an in-memory [`CloudProvider`] that launches NodeClaims the way upstream
//! Karpenter's fake provider does (upstream `fake.CloudProvider.Create`), records every call and
//! can be told to fail.
//!
//! The launch rules are core's ([`karpenter_core::launch`]): the provider, the provisioning
//! harness (module `harness`) and every other provider launch the same way.
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
use karpenter_core::cloud::{
    CloudProvider, CloudProviderError, NodeClassKind, RepairPolicy, UnavailableOffering,
};
use karpenter_core::labels::{self, LabelPolicy};
use karpenter_core::launch::{consume_reservation, resolve_launch};
use karpenter_core::model::{InstanceType, Offering};
use karpenter_core::requirements::Requirements;
use karpenter_core::resources::ResourceList;

use crate::catalog::{self, FAKE_WELL_KNOWN_LABELS, RESERVATION_ID_LABEL};

/// The node class kind the fake provider supports (upstream's test `TestNodeClass`).
pub const NODE_CLASS_GROUP: &str = "karpenter.test.sh";

/// The kind of [`NODE_CLASS_GROUP`]'s node class.
pub const NODE_CLASS_KIND: &str = "TestNodeClass";

/// The prefix of the provider ids the fake provider assigns (`fake://1`, `fake://2`, …).
pub const PROVIDER_ID_PREFIX: &str = "fake://";

/// The name [`FakeCloudProvider`] reports.
pub const PROVIDER_NAME: &str = "fake";

/// `resources` without its zero quantities (re-exported from
/// [`karpenter_core::launch::drop_zeros`]).
pub use karpenter_core::launch::drop_zeros;

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
/// - **Create** follows upstream `fake.CloudProvider.Create` ([`karpenter_core::launch::resolve_launch`]) over the
///   instance types of the claim's `karpenter.sh/nodepool`; the launched claim gets provider id
///   `fake://<n>` (n = 1, 2, …), the type's capacity and allocatable (zero quantities dropped)
///   and the resolved labels. Launching into a reserved offering consumes one instance of the
///   reservation. When no instance type can launch the claim, `create` fails with
///   [`CloudProviderError::InsufficientCapacity`] (listing the injected offering failures that
///   stood in the way, if any).
/// - **Instances** are kept in memory; `get`, `list` (in launch order) and `delete` use them and
///   answer [`CloudProviderError::NodeClaimNotFound`] for unknown ids.
/// - **Calls** are recorded ([`calls`](Self::calls)), unless the call log is turned off
///   ([`set_call_log`](Self::set_call_log)): a long simulation makes millions of calls.
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
    /// Whether calls are recorded in `calls`.
    call_log: bool,
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
            call_log: true,
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
        .map(|t| RepairPolicy::new(t, ConditionStatus::False, Duration::from_secs(30 * 60)))
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

    /// Turns the call log on (the default, and after [`reset`](Self::reset)) or off. While it is
    /// off, calls behave as before (injected failures included) but are not recorded, so
    /// [`calls`](Self::calls), [`call_count`](Self::call_count) and
    /// [`create_calls`](Self::create_calls) leave them out. The simulator's scenarios turn it off:
    /// the log keeps a copy of every NodeClaim passed to `create`, `delete` and `is_drifted`, and
    /// a simulated day of a large cluster would hold gigabytes of them.
    pub fn set_call_log(&self, on: bool) {
        self.state().call_log = on;
    }

    /// The launched instances, in launch order (like `list`, but not recorded as a call).
    pub fn instances(&self) -> Vec<NodeClaim> {
        self.state().instances.values().cloned().collect()
    }

    /// The launched instance with this provider id, if it runs (like `get`, but not recorded
    /// as a call).
    pub fn instance(&self, provider_id: &str) -> Option<NodeClaim> {
        let id = parse_provider_id(provider_id)?;
        self.state()
            .instances
            .get(&id)
            .filter(|i| i.status.provider_id.as_deref() == Some(provider_id))
            .cloned()
    }

    /// Whether an instance with this provider id runs (not recorded as a call).
    pub fn has_instance(&self, provider_id: &str) -> bool {
        parse_provider_id(provider_id).is_some_and(|id| {
            self.state()
                .instances
                .get(&id)
                .is_some_and(|i| i.status.provider_id.as_deref() == Some(provider_id))
        })
    }

    /// Calls `f` with every launched instance, in launch order, borrowed (no copy, not recorded
    /// as a call).
    /// The price per hour of every instance, in launch order: the price of the offering its
    /// instance-type, zone and capacity-type labels name among its NodePool's instance types
    /// ([`instance_types_for`](Self::instance_types_for)); 0 when one of those labels is missing
    /// or names no offering.
    pub fn instance_prices(&self) -> Vec<f64> {
        let state = self.state();
        let types_of = |pool: &str| {
            state
                .node_pool_instance_types
                .get(pool)
                .unwrap_or(&state.default_instance_types)
        };
        state
            .instances
            .values()
            .map(|instance| {
                let l = &instance.metadata.labels;
                let (Some(it), Some(zone), Some(ct)) = (
                    l.get(labels::INSTANCE_TYPE),
                    l.get(labels::ZONE),
                    l.get(labels::CAPACITY_TYPE),
                ) else {
                    return 0.0;
                };
                let pool = l.get(labels::NODEPOOL).map_or("", String::as_str);
                types_of(pool)
                    .iter()
                    .find(|t| t.name() == it.as_str())
                    .and_then(|t| {
                        t.offerings
                            .iter()
                            .find(|o| o.zone() == zone.as_str() && o.capacity_type() == ct.as_str())
                    })
                    .map_or(0.0, |o| o.price)
            })
            .collect()
    }

    /// Calls `f` with every instance, in launch order.
    pub fn for_each_instance(&self, mut f: impl FnMut(&NodeClaim)) {
        for instance in self.state().instances.values() {
            f(instance);
        }
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
        self.state()
            .failed_offerings
            .insert(UnavailableOffering::new(instance_type, zone, capacity_type));
    }

    /// Ends an insufficient-capacity failure injected with
    /// [`fail_offering`](Self::fail_offering): the offering launches again.
    pub fn recover_offering(&self, instance_type: &str, zone: &str, capacity_type: &str) {
        self.state()
            .failed_offerings
            .remove(&UnavailableOffering::new(
                instance_type,
                zone,
                capacity_type,
            ));
    }

    /// The offerings currently failing with insufficient capacity.
    pub fn failed_offerings(&self) -> Vec<UnavailableOffering> {
        self.state().failed_offerings.iter().cloned().collect()
    }

    /// Makes the next `n` calls that can fail (every method but `repair_policies` and `name`)
    /// return an error made by `error` (called `n` times now: errors carry their source and are
    /// not `Clone`). Queued after errors already injected.
    pub fn fail_next(&self, n: usize, error: impl Fn() -> CloudProviderError) {
        let errors: Vec<CloudProviderError> = (0..n).map(|_| error()).collect();
        self.state().next_errors.extend(errors);
    }

    /// Lets `k` more creates succeed; every later create fails with
    /// [`CloudProviderError::Create`] (reason `CreateLimitReached`) — a batch that partially
    /// fails.
    pub fn fail_creates_after(&self, k: usize) {
        self.state().creates_left = Some(k);
    }

    /// Lifts the limit set with [`fail_creates_after`](Self::fail_creates_after): creates
    /// succeed again (when capacity allows).
    pub fn allow_all_creates(&self) {
        self.state().creates_left = None;
    }

    /// Forgets the errors queued with [`fail_next`](Self::fail_next) that were not returned yet.
    pub fn clear_next_errors(&self) {
        self.state().next_errors.clear();
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

    /// Locks the state, logging the call (built only when the log is on) and failing it when
    /// an error is queued.
    fn begin(
        &self,
        call: impl FnOnce() -> Call,
    ) -> Result<MutexGuard<'_, State>, CloudProviderError> {
        let mut state = self.state();
        if state.call_log {
            state.calls.push(call());
        }
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
            return Err(CloudProviderError::create(
                "CreateLimitReached",
                "the fake provider was told to fail further creates",
            ));
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
        let is_failed =
            |it: &InstanceType, o: &Offering| failed.contains(&UnavailableOffering::of(it, o));
        let types = match state.node_pool_instance_types.get(&node_pool) {
            Some(types) => types,
            None => &state.default_instance_types,
        };
        let Some(launch) = resolve_launch(
            node_claim,
            types,
            policy,
            Some(RESERVATION_ID_LABEL),
            is_failed,
        ) else {
            // Which injected failures stood in the way, if any.
            let offerings: Vec<UnavailableOffering> = types
                .iter()
                .filter(|it| {
                    requirements.is_compatible(it.requirements(), Some(policy))
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
                        .map(|o| UnavailableOffering::of(it, o))
                })
                .collect();
            let message = if offerings.is_empty() {
                "no instance type with an available offering satisfies the nodeclaim".to_string()
            } else {
                let list: Vec<String> = offerings.iter().map(ToString::to_string).collect();
                format!("all compatible offerings failed: {}", list.join(", "))
            };
            return Err(CloudProviderError::insufficient_capacity(
                offerings, message,
            ));
        };

        let types = state.instance_types_mut(&node_pool);
        let Some(slot) = types.get_mut(launch.choice().instance_type) else {
            return Err(CloudProviderError::other(
                "instance type vanished during launch",
            ));
        };
        consume_reservation(slot, launch.choice().offering);

        let id = state.next_id;
        state.next_id += 1;
        let launched = launch.launched(node_claim, format!("{PROVIDER_ID_PREFIX}{id}"));
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
        let mut state = self.begin(|| Call::Create(Box::new(node_claim.clone())))?;
        self.launch(&mut state, node_claim)
    }

    async fn delete(&self, node_claim: &NodeClaim) -> Result<(), CloudProviderError> {
        let mut state = self.begin(|| Call::Delete(Box::new(node_claim.clone())))?;
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
        let state = self.begin(|| Call::Get(provider_id.to_string()))?;
        parse_provider_id(provider_id)
            .and_then(|id| state.instances.get(&id))
            .cloned()
            .ok_or_else(|| CloudProviderError::not_found(provider_id))
    }

    async fn list(&self) -> Result<Vec<NodeClaim>, CloudProviderError> {
        let state = self.begin(|| Call::List)?;
        Ok(state.instances.values().cloned().collect())
    }

    async fn instance_types(
        &self,
        node_pool: &NodePool,
    ) -> Result<Vec<Arc<InstanceType>>, CloudProviderError> {
        let name = node_pool.metadata.name.clone().unwrap_or_default();
        let mut state = self.begin(|| Call::InstanceTypes(name.clone()))?;
        Ok(state.instance_types_mut(&name).clone())
    }

    async fn is_drifted(
        &self,
        node_claim: &NodeClaim,
    ) -> Result<Option<String>, CloudProviderError> {
        let state = self.begin(|| Call::IsDrifted(Box::new(node_claim.clone())))?;
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

    fn well_known_labels(&self) -> Vec<String> {
        FAKE_WELL_KNOWN_LABELS
            .iter()
            .map(|k| k.to_string())
            .collect()
    }

    fn reservation_id_label(&self) -> Option<&str> {
        Some(RESERVATION_ID_LABEL)
    }

    /// The policy set with [`FakeCloudProvider::with_label_policy`] (by default
    /// [`catalog::fake_label_policy`]: core's plus the fake's well-known labels).
    fn label_policy(&self) -> LabelPolicy {
        self.label_policy.clone()
    }

    fn supported_node_classes(&self) -> Vec<NodeClassKind> {
        vec![NodeClassKind::new(NODE_CLASS_GROUP, NODE_CLASS_KIND)]
    }
}

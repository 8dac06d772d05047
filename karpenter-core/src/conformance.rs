//! A conformance suite for [`CloudProvider`] implementations (feature `conformance`).
//!
//! The checks drive any `&dyn CloudProvider` through the calls the operator loops make and
//! verify the contract they rely on:
//!
//! - [`Check::NotFound`]: `get` and `delete` of a provider id the provider never issued answer
//!   [`CloudProviderError::NodeClaimNotFound`];
//! - [`Check::CreateGetListDelete`]: a launched claim has a provider id and a capacity; `get`
//!   finds it under that id, `list` lists it, `delete` succeeds, and afterwards `get` answers
//!   not-found and `list` no longer lists it;
//! - [`Check::LaunchedLabels`]: a launched claim carries the well-known labels (instance type,
//!   zone, capacity type, NodePool, architecture, OS by default), keeps the labels it was
//!   created with, resolves them within its requirements, and `get` reports the same instance
//!   type, zone and capacity type;
//! - [`Check::IdempotentDelete`]: deleting a claim twice succeeds, then answers not-found (never
//!   another error);
//! - [`Check::InsufficientCapacity`] (when configured): a launch whose only offering has no
//!   capacity fails with [`CloudProviderError::InsufficientCapacity`] (listing that offering
//!   when the provider lists any) and launches nothing.
//!
//! Each check is an `async fn` returning `Result<(), ConformanceError>`; [`run_all`] runs them
//! all and returns a [`ConformanceReport`]. The suite needs no async runtime of its own: await it
//! from any executor (`futures::executor::block_on`, `#[tokio::test]`, ...). Every claim it
//! launches is deleted again, also when a check fails (best effort).
//!
//! # Example
//!
//! ```
//! # use std::sync::{Arc, Mutex};
//! # use async_trait::async_trait;
//! # use karpenter_core::api::{NodeClaim, NodeClaimSpec, NodeClassReference, NodePool};
//! # use karpenter_core::cloud::{CloudProvider, CloudProviderError, RepairPolicy};
//! # use karpenter_core::labels;
//! # use karpenter_core::launch::resolve_launch;
//! # use karpenter_core::model::{InstanceType, Offering, Overhead};
//! # use karpenter_core::requirements::{Operator, Requirement, Requirements};
//! # use karpenter_core::resources::{Quantity, ResourceList};
//! use karpenter_core::conformance::{ConformanceConfig, run_all};
//!
//! // A provider that launches from one instance type in one zone (any provider will do).
//! struct Tiny {
//!     types: Vec<Arc<InstanceType>>,
//!     machines: Mutex<Vec<NodeClaim>>,
//! }
//!
//! #[async_trait]
//! impl CloudProvider for Tiny {
//!     async fn create(&self, claim: &NodeClaim) -> Result<NodeClaim, CloudProviderError> {
//!         let launch = resolve_launch(claim, &self.types, &self.label_policy(), None, |_, _| false)
//!             .ok_or_else(|| CloudProviderError::insufficient_capacity(Vec::new(), "no capacity"))?;
//!         let mut machines = self.machines.lock().unwrap();
//!         let launched = launch.launched(claim, format!("tiny://{}", machines.len() + 1));
//!         machines.push(launched.clone());
//!         Ok(launched)
//!     }
//!     async fn delete(&self, claim: &NodeClaim) -> Result<(), CloudProviderError> {
//!         let id = claim.status.provider_id.clone().unwrap_or_default();
//!         let mut machines = self.machines.lock().unwrap();
//!         let before = machines.len();
//!         machines.retain(|m| m.status.provider_id.as_deref() != Some(id.as_str()));
//!         if machines.len() == before { Err(CloudProviderError::not_found(id)) } else { Ok(()) }
//!     }
//!     async fn get(&self, id: &str) -> Result<NodeClaim, CloudProviderError> {
//!         let machines = self.machines.lock().unwrap();
//!         machines.iter().find(|m| m.status.provider_id.as_deref() == Some(id)).cloned()
//!             .ok_or_else(|| CloudProviderError::not_found(id))
//!     }
//!     async fn list(&self) -> Result<Vec<NodeClaim>, CloudProviderError> {
//!         Ok(self.machines.lock().unwrap().clone())
//!     }
//!     async fn instance_types(&self, _: &NodePool) -> Result<Vec<Arc<InstanceType>>, CloudProviderError> {
//!         Ok(self.types.clone())
//!     }
//!     async fn is_drifted(&self, _: &NodeClaim) -> Result<Option<String>, CloudProviderError> {
//!         Ok(None)
//!     }
//!     fn repair_policies(&self) -> Vec<RepairPolicy> { Vec::new() }
//!     fn name(&self) -> &str { "tiny" }
//! }
//!
//! let mut requirements = Requirements::new();
//! requirements.add(Requirement::new(labels::ARCH, Operator::In, ["amd64"]));
//! requirements.add(Requirement::new(labels::OS, Operator::In, ["linux"]));
//! let capacity: ResourceList = [("cpu", Quantity::from_units(2))].into_iter().collect();
//! let it = InstanceType::new("tiny.small", requirements, vec![Offering::new("zone-a", "on-demand", 0.1)],
//!     capacity, Overhead::default());
//! let provider = Tiny { types: vec![Arc::new(it)], machines: Mutex::new(Vec::new()) };
//!
//! // The claim the suite launches: a NodePool's claim the provider can satisfy.
//! let mut claim = NodeClaim::new("conformance", NodeClaimSpec::new(NodeClassReference::default()));
//! claim.metadata.labels.insert(labels::NODEPOOL.into(), "default".into());
//! let config = ConformanceConfig::new(claim).with_unknown_provider_id("tiny://999");
//!
//! let report = futures::executor::block_on(run_all(&provider, &config));
//! assert!(report.is_success(), "{report}");
//! ```

use std::collections::BTreeSet;
use std::fmt;
use std::sync::Arc;

use crate::api::NodeClaim;
use crate::cloud::{CloudProvider, CloudProviderError, UnavailableOffering};
use crate::labels;
use crate::requirements::{NodeSelectorRequirement, Operator, Requirements};

/// The label keys a launched claim must carry by default (see
/// [`ConformanceConfig::with_required_labels`]).
pub const DEFAULT_REQUIRED_LABELS: [&str; 6] = [
    labels::INSTANCE_TYPE,
    labels::ZONE,
    labels::CAPACITY_TYPE,
    labels::NODEPOOL,
    labels::ARCH,
    labels::OS,
];

/// The provider id [`ConformanceConfig::new`] uses for "an id the provider never issued".
pub const DEFAULT_UNKNOWN_PROVIDER_ID: &str = "conformance:///does-not-exist";

/// One check of the suite.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum Check {
    /// `get` / `delete` of an unknown provider id answer not-found.
    NotFound,
    /// create, get, list, delete, then get and list no longer find the claim.
    CreateGetListDelete,
    /// The labels of a launched claim.
    LaunchedLabels,
    /// A second delete succeeds or answers not-found.
    IdempotentDelete,
    /// A launch without capacity fails with insufficient capacity and launches nothing.
    InsufficientCapacity,
}

impl Check {
    /// Every check, in the order [`run_all`] runs them (insufficient capacity last: its
    /// injection may outlive the check).
    pub const ALL: [Check; 5] = [
        Check::NotFound,
        Check::CreateGetListDelete,
        Check::LaunchedLabels,
        Check::IdempotentDelete,
        Check::InsufficientCapacity,
    ];

    /// The check's name (`not-found`, `create-get-list-delete`, `launched-labels`,
    /// `idempotent-delete`, `insufficient-capacity`); also the suffix of the claim names it
    /// launches.
    pub fn as_str(self) -> &'static str {
        match self {
            Check::NotFound => "not-found",
            Check::CreateGetListDelete => "create-get-list-delete",
            Check::LaunchedLabels => "launched-labels",
            Check::IdempotentDelete => "idempotent-delete",
            Check::InsufficientCapacity => "insufficient-capacity",
        }
    }
}

impl fmt::Display for Check {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What the provider did wrong: the check, the call or property, and what was seen.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConformanceError {
    /// A call that should have succeeded failed.
    #[error("{check}: {call} failed: {source}")]
    Call {
        /// The check.
        check: Check,
        /// The call (`create`, `get`, `list`, `delete`).
        call: &'static str,
        /// The provider's error.
        source: CloudProviderError,
    },
    /// `create` returned a claim without `status.providerID`.
    #[error("{check}: create returned a claim without status.providerID")]
    MissingProviderId {
        /// The check.
        check: Check,
    },
    /// `create` returned a claim with an empty `status.capacity`.
    #[error("{check}: create returned {provider_id} with an empty status.capacity")]
    EmptyCapacity {
        /// The check.
        check: Check,
        /// The launched claim's provider id.
        provider_id: String,
    },
    /// `get` returned a claim with another provider id.
    #[error("{check}: get({provider_id}) returned a claim with provider id {got:?}")]
    WrongProviderId {
        /// The check.
        check: Check,
        /// The id asked for.
        provider_id: String,
        /// The id of the claim returned.
        got: Option<String>,
    },
    /// `list` does not list a launched claim.
    #[error("{check}: list does not contain {provider_id} after create")]
    NotListed {
        /// The check.
        check: Check,
        /// The launched claim's provider id.
        provider_id: String,
    },
    /// `list` still lists a deleted claim.
    #[error("{check}: list still contains {provider_id} after delete")]
    ListedAfterDelete {
        /// The check.
        check: Check,
        /// The deleted claim's provider id.
        provider_id: String,
    },
    /// A call that should have answered [`CloudProviderError::NodeClaimNotFound`] did not.
    #[error("{check}: {call}({provider_id}) should answer NodeClaimNotFound, got {got}")]
    ExpectedNotFound {
        /// The check.
        check: Check,
        /// The call and situation (`get of an unknown id`, `get after delete`, ...).
        call: &'static str,
        /// The provider id.
        provider_id: String,
        /// What the call returned instead (`Ok(..)` or the error).
        got: String,
    },
    /// A launched claim lacks a required label (or has it empty).
    #[error("{check}: the launched claim {provider_id} has no label {key}")]
    MissingLabel {
        /// The check.
        check: Check,
        /// The launched claim's provider id.
        provider_id: String,
        /// The label key.
        key: String,
    },
    /// A launched claim changed or dropped a label it was created with.
    #[error("{check}: the launched claim {provider_id} has {key}={got:?}, created with {want:?}")]
    LabelChanged {
        /// The check.
        check: Check,
        /// The launched claim's provider id.
        provider_id: String,
        /// The label key.
        key: String,
        /// The value the claim was created with.
        want: String,
        /// The launched claim's value (`None`: dropped).
        got: Option<String>,
    },
    /// A launched claim's label value is outside the claim's requirement on that key.
    #[error(
        "{check}: the launched claim {provider_id} has {key}={value:?}, outside its requirement"
    )]
    LabelOutsideRequirements {
        /// The check.
        check: Check,
        /// The launched claim's provider id.
        provider_id: String,
        /// The label key.
        key: String,
        /// The label value.
        value: String,
    },
    /// `get` reports another instance type, zone or capacity type than `create` did.
    #[error("{check}: get({provider_id}) has {key}={got:?}, create returned {want:?}")]
    LabelMismatch {
        /// The check.
        check: Check,
        /// The provider id.
        provider_id: String,
        /// The label key.
        key: String,
        /// The value `create` returned.
        want: String,
        /// The value `get` returned (`None`: absent).
        got: Option<String>,
    },
    /// A second delete answered an error other than not-found.
    #[error("{check}: the second delete of {provider_id} failed with {source}")]
    SecondDelete {
        /// The check.
        check: Check,
        /// The provider id.
        provider_id: String,
        /// The error (not [`CloudProviderError::NodeClaimNotFound`]).
        source: CloudProviderError,
    },
    /// A launch that should have failed with insufficient capacity did not.
    #[error(
        "{check}: create of a claim pinned to {offering} should fail with InsufficientCapacity, got {got}"
    )]
    ExpectedInsufficientCapacity {
        /// The check.
        check: Check,
        /// The offering without capacity.
        offering: UnavailableOffering,
        /// What `create` returned instead.
        got: String,
    },
    /// The insufficient-capacity error lists offerings, but not the one without capacity.
    #[error("{check}: the InsufficientCapacity error lists {listed:?} but not {offering}")]
    OfferingNotReported {
        /// The check.
        check: Check,
        /// The offering without capacity.
        offering: UnavailableOffering,
        /// The offerings the error lists.
        listed: Vec<String>,
    },
    /// A failed launch left a machine behind.
    #[error("{check}: the failed create left {provider_ids:?} behind in list")]
    LaunchedDespiteError {
        /// The check.
        check: Check,
        /// The provider ids that appeared in `list`.
        provider_ids: Vec<String>,
    },
}

impl ConformanceError {
    /// The check that failed.
    pub fn check(&self) -> Check {
        match self {
            ConformanceError::Call { check, .. }
            | ConformanceError::MissingProviderId { check }
            | ConformanceError::EmptyCapacity { check, .. }
            | ConformanceError::WrongProviderId { check, .. }
            | ConformanceError::NotListed { check, .. }
            | ConformanceError::ListedAfterDelete { check, .. }
            | ConformanceError::ExpectedNotFound { check, .. }
            | ConformanceError::MissingLabel { check, .. }
            | ConformanceError::LabelChanged { check, .. }
            | ConformanceError::LabelOutsideRequirements { check, .. }
            | ConformanceError::LabelMismatch { check, .. }
            | ConformanceError::SecondDelete { check, .. }
            | ConformanceError::ExpectedInsufficientCapacity { check, .. }
            | ConformanceError::OfferingNotReported { check, .. }
            | ConformanceError::LaunchedDespiteError { check, .. } => *check,
        }
    }
}

/// A hook that makes the provider answer insufficient capacity for an offering (called right
/// before the insufficient-capacity check's launch).
pub type InjectHook = Arc<dyn Fn(&UnavailableOffering) + Send + Sync>;

/// How the insufficient-capacity check provokes the error: the offering without capacity, the
/// claim to launch (by default the template pinned to that offering) and an optional hook that
/// tells the provider to fail (omit it when the provider already fails that offering, e.g. a
/// replayed or intercepted cloud API).
#[derive(Clone)]
#[non_exhaustive]
pub struct InsufficientCapacityCase {
    /// The offering without capacity.
    pub offering: UnavailableOffering,
    /// The claim to launch; `None`: [`ConformanceConfig::node_claim`] with its instance-type,
    /// zone and capacity-type requirements replaced by the offering's.
    pub node_claim: Option<NodeClaim>,
    /// Called with [`offering`](Self::offering) right before the launch.
    pub inject: Option<InjectHook>,
}

impl InsufficientCapacityCase {
    /// The case for `offering`, launching the pinned template, without a hook.
    pub fn new(offering: UnavailableOffering) -> Self {
        InsufficientCapacityCase {
            offering,
            node_claim: None,
            inject: None,
        }
    }

    /// The case launching `node_claim` instead of the pinned template.
    pub fn with_node_claim(mut self, node_claim: NodeClaim) -> Self {
        self.node_claim = Some(node_claim);
        self
    }

    /// The case calling `inject` with the offering before the launch.
    pub fn with_inject(
        mut self,
        inject: impl Fn(&UnavailableOffering) + Send + Sync + 'static,
    ) -> Self {
        self.inject = Some(Arc::new(inject));
        self
    }
}

impl fmt::Debug for InsufficientCapacityCase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InsufficientCapacityCase")
            .field("offering", &self.offering)
            .field("node_claim", &self.node_claim)
            .field("inject", &self.inject.as_ref().map(|_| ".."))
            .finish()
    }
}

/// What the suite needs to know about the provider under test. Build it with
/// [`ConformanceConfig::new`] and the `with_*` methods.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ConformanceConfig {
    /// The claim every check launches (renamed `<name>-<check>`): one the provider can launch,
    /// carrying the `karpenter.sh/nodepool` label and the requirements and resources of a real
    /// claim of that NodePool.
    pub node_claim: NodeClaim,
    /// A well-formed provider id the provider never issued (for the not-found check).
    pub unknown_provider_id: String,
    /// The label keys a launched claim must carry.
    pub required_labels: Vec<String>,
    /// The insufficient-capacity case; `None` skips that check.
    pub insufficient_capacity: Option<InsufficientCapacityCase>,
}

impl ConformanceConfig {
    /// A configuration launching `node_claim`, with [`DEFAULT_UNKNOWN_PROVIDER_ID`],
    /// [`DEFAULT_REQUIRED_LABELS`] and no insufficient-capacity case.
    pub fn new(node_claim: NodeClaim) -> Self {
        ConformanceConfig {
            node_claim,
            unknown_provider_id: DEFAULT_UNKNOWN_PROVIDER_ID.to_string(),
            required_labels: DEFAULT_REQUIRED_LABELS
                .iter()
                .map(|k| k.to_string())
                .collect(),
            insufficient_capacity: None,
        }
    }

    /// The configuration with this unknown provider id (use the provider's own format, e.g.
    /// `aws:///us-east-1a/i-0123456789abcdef0`, when it rejects malformed ids differently).
    pub fn with_unknown_provider_id(mut self, provider_id: impl Into<String>) -> Self {
        self.unknown_provider_id = provider_id.into();
        self
    }

    /// The configuration requiring these label keys on a launched claim.
    pub fn with_required_labels<'a>(mut self, keys: impl IntoIterator<Item = &'a str>) -> Self {
        self.required_labels = keys.into_iter().map(str::to_string).collect();
        self
    }

    /// The configuration running the insufficient-capacity check with `case`.
    pub fn with_insufficient_capacity(mut self, case: InsufficientCapacityCase) -> Self {
        self.insufficient_capacity = Some(case);
        self
    }

    /// The template renamed for `check`.
    fn claim_for(&self, check: Check) -> NodeClaim {
        let mut claim = self.node_claim.clone();
        let name = match self.node_claim.name() {
            "" => "conformance",
            name => name,
        };
        claim.metadata.name = Some(format!("{name}-{check}"));
        claim.status = Default::default();
        claim
    }
}

/// The outcome of one check.
#[derive(Debug)]
#[non_exhaustive]
pub enum Outcome {
    /// The provider behaved as required.
    Passed,
    /// The check did not run (the reason).
    Skipped(&'static str),
    /// The provider did not behave as required.
    Failed(ConformanceError),
}

/// The outcomes of [`run_all`], one per [`Check`] in [`Check::ALL`] order.
#[derive(Debug)]
#[non_exhaustive]
pub struct ConformanceReport {
    /// The provider's [`CloudProvider::name`].
    pub provider: String,
    /// Each check with its outcome.
    pub results: Vec<(Check, Outcome)>,
}

impl ConformanceReport {
    /// Whether no check failed (skipped checks do not fail).
    pub fn is_success(&self) -> bool {
        self.failures().next().is_none()
    }

    /// The failures, in check order.
    pub fn failures(&self) -> impl Iterator<Item = &ConformanceError> {
        self.results.iter().filter_map(|(_, o)| match o {
            Outcome::Failed(e) => Some(e),
            _ => None,
        })
    }

    /// The outcome of `check`.
    pub fn outcome(&self, check: Check) -> Option<&Outcome> {
        self.results
            .iter()
            .find(|(c, _)| *c == check)
            .map(|(_, o)| o)
    }

    /// `Ok(report)` when every check passed or was skipped, else the failures as one error.
    pub fn into_result(self) -> Result<ConformanceReport, ConformanceFailures> {
        if self.is_success() {
            return Ok(self);
        }
        let failures = self
            .results
            .into_iter()
            .filter_map(|(_, o)| match o {
                Outcome::Failed(e) => Some(e),
                _ => None,
            })
            .collect();
        Err(ConformanceFailures {
            provider: self.provider,
            failures,
        })
    }
}

impl fmt::Display for ConformanceReport {
    /// One line per check: `provider: check: passed | skipped (reason) | FAILED: error`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (check, outcome) in &self.results {
            match outcome {
                Outcome::Passed => writeln!(f, "{}: {check}: passed", self.provider)?,
                Outcome::Skipped(why) => {
                    writeln!(f, "{}: {check}: skipped ({why})", self.provider)?
                }
                Outcome::Failed(e) => writeln!(f, "{}: {check}: FAILED: {e}", self.provider)?,
            }
        }
        Ok(())
    }
}

/// The failed checks of a [`ConformanceReport`], as one error.
#[derive(Debug, thiserror::Error)]
#[error("provider {provider}: {} conformance check(s) failed: {}", failures.len(), list(failures))]
#[non_exhaustive]
pub struct ConformanceFailures {
    /// The provider's name.
    pub provider: String,
    /// The failures, in check order.
    pub failures: Vec<ConformanceError>,
}

fn list(failures: &[ConformanceError]) -> String {
    let items: Vec<String> = failures.iter().map(ToString::to_string).collect();
    items.join("; ")
}

/// Runs every check of [`Check::ALL`] in order against `provider` and reports each outcome.
/// A failing check does not stop the others.
pub async fn run_all(
    provider: &dyn CloudProvider,
    config: &ConformanceConfig,
) -> ConformanceReport {
    let mut results = Vec::new();
    for check in Check::ALL {
        let outcome = match check {
            Check::NotFound => check_not_found(provider, config).await.into(),
            Check::CreateGetListDelete => {
                check_create_get_list_delete(provider, config).await.into()
            }
            Check::LaunchedLabels => check_launched_labels(provider, config).await.into(),
            Check::IdempotentDelete => check_idempotent_delete(provider, config).await.into(),
            Check::InsufficientCapacity => match &config.insufficient_capacity {
                None => Outcome::Skipped("no insufficient-capacity case configured"),
                Some(_) => check_insufficient_capacity(provider, config).await.into(),
            },
        };
        results.push((check, outcome));
    }
    ConformanceReport {
        provider: provider.name().to_string(),
        results,
    }
}

impl From<Result<(), ConformanceError>> for Outcome {
    fn from(r: Result<(), ConformanceError>) -> Outcome {
        match r {
            Ok(()) => Outcome::Passed,
            Err(e) => Outcome::Failed(e),
        }
    }
}

fn describe<T>(r: &Result<T, CloudProviderError>) -> String {
    match r {
        Ok(_) => "Ok(..)".to_string(),
        Err(e) => format!("Err({e})"),
    }
}

fn expect_not_found<T>(
    check: Check,
    call: &'static str,
    provider_id: &str,
    r: Result<T, CloudProviderError>,
) -> Result<(), ConformanceError> {
    match r {
        Err(e) if e.is_not_found() => Ok(()),
        other => Err(ConformanceError::ExpectedNotFound {
            check,
            call,
            provider_id: provider_id.to_string(),
            got: describe(&other),
        }),
    }
}

/// Maps a failed provider call of `check` to [`ConformanceError::Call`].
fn call_failed(
    check: Check,
    call: &'static str,
) -> impl FnOnce(CloudProviderError) -> ConformanceError {
    move |source| ConformanceError::Call {
        check,
        call,
        source,
    }
}

/// When [`with_launched`] deletes the claim it launched.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Cleanup {
    /// After the body, whatever its result.
    Always,
    /// Only when the body failed (a passing body deleted the claim itself).
    OnFailure,
}

/// The set-up the launching checks share: launches `check`'s claim (the template renamed for
/// the check), runs `body` with the claim sent, the launched claim and its provider id, and
/// deletes the launched claim as `cleanup` says.
async fn with_launched(
    provider: &dyn CloudProvider,
    config: &ConformanceConfig,
    check: Check,
    cleanup_when: Cleanup,
    body: impl AsyncFnOnce(&NodeClaim, &NodeClaim, &str) -> Result<(), ConformanceError>,
) -> Result<(), ConformanceError> {
    let claim = config.claim_for(check);
    let (launched, id) = launch(provider, check, &claim).await?;
    let result = body(&claim, &launched, &id).await;
    if cleanup_when == Cleanup::Always || result.is_err() {
        cleanup(provider, &launched).await;
    }
    result
}

/// Launches `claim` and returns it with its provider id (checked present).
async fn launch(
    provider: &dyn CloudProvider,
    check: Check,
    claim: &NodeClaim,
) -> Result<(NodeClaim, String), ConformanceError> {
    let launched = provider
        .create(claim)
        .await
        .map_err(call_failed(check, "create"))?;
    match launched.status.provider_id.clone() {
        Some(id) if !id.is_empty() => Ok((launched, id)),
        _ => Err(ConformanceError::MissingProviderId { check }),
    }
}

/// Deletes a claim a check launched (best effort).
async fn cleanup(provider: &dyn CloudProvider, launched: &NodeClaim) {
    // Best effort: the check's own result is what matters; a claim already gone answers
    // not-found.
    let _ = provider.delete(launched).await;
}

async fn list_ids(
    provider: &dyn CloudProvider,
    check: Check,
) -> Result<BTreeSet<String>, ConformanceError> {
    let claims = provider.list().await.map_err(call_failed(check, "list"))?;
    Ok(claims
        .into_iter()
        .filter_map(|c| c.status.provider_id)
        .collect())
}

/// [`Check::NotFound`]: `get` and `delete` of [`ConformanceConfig::unknown_provider_id`] answer
/// [`CloudProviderError::NodeClaimNotFound`].
pub async fn check_not_found(
    provider: &dyn CloudProvider,
    config: &ConformanceConfig,
) -> Result<(), ConformanceError> {
    let check = Check::NotFound;
    let id = config.unknown_provider_id.as_str();
    expect_not_found(check, "get of an unknown id", id, provider.get(id).await)?;
    let mut claim = config.claim_for(check);
    claim.status.provider_id = Some(id.to_string());
    expect_not_found(
        check,
        "delete of an unknown id",
        id,
        provider.delete(&claim).await,
    )
}

/// [`Check::CreateGetListDelete`]: create the template; the launched claim has a provider id
/// and a non-empty capacity; `get` returns a claim with that id; `list` contains it; `delete`
/// succeeds; then `get` answers not-found and `list` no longer contains it.
pub async fn check_create_get_list_delete(
    provider: &dyn CloudProvider,
    config: &ConformanceConfig,
) -> Result<(), ConformanceError> {
    let check = Check::CreateGetListDelete;
    with_launched(
        provider,
        config,
        check,
        Cleanup::OnFailure,
        async |_, launched, id| create_get_list_delete(provider, check, launched, id).await,
    )
    .await
}

async fn create_get_list_delete(
    provider: &dyn CloudProvider,
    check: Check,
    launched: &NodeClaim,
    id: &str,
) -> Result<(), ConformanceError> {
    if launched.status.capacity.is_empty() {
        return Err(ConformanceError::EmptyCapacity {
            check,
            provider_id: id.to_string(),
        });
    }
    let got = provider.get(id).await.map_err(call_failed(check, "get"))?;
    if got.status.provider_id.as_deref() != Some(id) {
        return Err(ConformanceError::WrongProviderId {
            check,
            provider_id: id.to_string(),
            got: got.status.provider_id,
        });
    }
    if !list_ids(provider, check).await?.contains(id) {
        return Err(ConformanceError::NotListed {
            check,
            provider_id: id.to_string(),
        });
    }
    provider
        .delete(launched)
        .await
        .map_err(call_failed(check, "delete"))?;
    expect_not_found(check, "get after delete", id, provider.get(id).await)?;
    if list_ids(provider, check).await?.contains(id) {
        return Err(ConformanceError::ListedAfterDelete {
            check,
            provider_id: id.to_string(),
        });
    }
    Ok(())
}

/// [`Check::LaunchedLabels`]: the launched claim carries every
/// [`ConformanceConfig::required_labels`] key with a non-empty value, keeps every label of the
/// template, has values within the template's requirements, and `get` returns the same
/// instance type, zone and capacity type.
pub async fn check_launched_labels(
    provider: &dyn CloudProvider,
    config: &ConformanceConfig,
) -> Result<(), ConformanceError> {
    with_launched(
        provider,
        config,
        Check::LaunchedLabels,
        Cleanup::Always,
        async |claim, launched, id| launched_labels(provider, config, claim, launched, id).await,
    )
    .await
}

async fn launched_labels(
    provider: &dyn CloudProvider,
    config: &ConformanceConfig,
    claim: &NodeClaim,
    launched: &NodeClaim,
    id: &str,
) -> Result<(), ConformanceError> {
    let check = Check::LaunchedLabels;
    let labels = &launched.metadata.labels;
    for key in &config.required_labels {
        if labels.get(key).is_none_or(String::is_empty) {
            return Err(ConformanceError::MissingLabel {
                check,
                provider_id: id.to_string(),
                key: key.clone(),
            });
        }
    }
    for (key, want) in &claim.metadata.labels {
        if labels.get(key) != Some(want) {
            return Err(ConformanceError::LabelChanged {
                check,
                provider_id: id.to_string(),
                key: key.clone(),
                want: want.clone(),
                got: labels.get(key).cloned(),
            });
        }
    }
    let requirements = Requirements::from_node_selector_requirements(claim.spec.requirements());
    for (key, value) in labels {
        if let Some(r) = requirements.get(key)
            && !r.has(value)
        {
            return Err(ConformanceError::LabelOutsideRequirements {
                check,
                provider_id: id.to_string(),
                key: key.clone(),
                value: value.clone(),
            });
        }
    }
    let got = provider.get(id).await.map_err(call_failed(check, "get"))?;
    for key in [labels::INSTANCE_TYPE, labels::ZONE, labels::CAPACITY_TYPE] {
        let Some(want) = labels.get(key) else {
            continue;
        };
        if got.metadata.labels.get(key) != Some(want) {
            return Err(ConformanceError::LabelMismatch {
                check,
                provider_id: id.to_string(),
                key: key.to_string(),
                want: want.clone(),
                got: got.metadata.labels.get(key).cloned(),
            });
        }
    }
    Ok(())
}

/// [`Check::IdempotentDelete`]: create the template, delete it (must succeed), delete it again
/// (must succeed or answer not-found).
pub async fn check_idempotent_delete(
    provider: &dyn CloudProvider,
    config: &ConformanceConfig,
) -> Result<(), ConformanceError> {
    let check = Check::IdempotentDelete;
    with_launched(
        provider,
        config,
        check,
        Cleanup::OnFailure,
        async |_, launched, id| {
            provider
                .delete(launched)
                .await
                .map_err(call_failed(check, "delete"))?;
            match provider.delete(launched).await {
                Ok(()) => Ok(()),
                Err(e) if e.is_not_found() => Ok(()),
                Err(source) => Err(ConformanceError::SecondDelete {
                    check,
                    provider_id: id.to_string(),
                    source,
                }),
            }
        },
    )
    .await
}

/// [`Check::InsufficientCapacity`]: with the configured case (a check without one passes
/// trivially; [`run_all`] reports it skipped), call the hook, launch the case's claim: it must
/// fail with [`CloudProviderError::InsufficientCapacity`], whose offerings (when it lists any)
/// include the case's offering, and `list` must show no new machine.
pub async fn check_insufficient_capacity(
    provider: &dyn CloudProvider,
    config: &ConformanceConfig,
) -> Result<(), ConformanceError> {
    let check = Check::InsufficientCapacity;
    let Some(case) = &config.insufficient_capacity else {
        return Ok(());
    };
    let claim = match &case.node_claim {
        Some(claim) => claim.clone(),
        None => pinned(config.claim_for(check), &case.offering),
    };
    if let Some(inject) = &case.inject {
        inject(&case.offering);
    }
    let before = list_ids(provider, check).await?;
    let result = provider.create(&claim).await;
    let failure = match result {
        Err(CloudProviderError::InsufficientCapacity { offerings, .. }) => {
            if !offerings.is_empty() && !offerings.contains(&case.offering) {
                Some(ConformanceError::OfferingNotReported {
                    check,
                    offering: case.offering.clone(),
                    listed: offerings.iter().map(ToString::to_string).collect(),
                })
            } else {
                None
            }
        }
        Ok(launched) => {
            cleanup(provider, &launched).await;
            return Err(ConformanceError::ExpectedInsufficientCapacity {
                check,
                offering: case.offering.clone(),
                got: format!(
                    "a launch ({})",
                    launched
                        .status
                        .provider_id
                        .as_deref()
                        .unwrap_or("no provider id")
                ),
            });
        }
        Err(e) => Some(ConformanceError::ExpectedInsufficientCapacity {
            check,
            offering: case.offering.clone(),
            got: format!("Err({e})"),
        }),
    };
    if let Some(failure) = failure {
        return Err(failure);
    }
    let after = list_ids(provider, check).await?;
    let new: Vec<String> = after.difference(&before).cloned().collect();
    if new.is_empty() {
        Ok(())
    } else {
        Err(ConformanceError::LaunchedDespiteError {
            check,
            provider_ids: new,
        })
    }
}

/// `claim` with its instance-type, zone and capacity-type requirements replaced by
/// `offering`'s.
pub fn pinned(mut claim: NodeClaim, offering: &UnavailableOffering) -> NodeClaim {
    let keys = [labels::INSTANCE_TYPE, labels::ZONE, labels::CAPACITY_TYPE];
    let mut requirements: Vec<NodeSelectorRequirement> = claim
        .spec
        .requirements()
        .iter()
        .filter(|r| !keys.contains(&r.key.as_str()))
        .cloned()
        .collect();
    for (key, value) in keys.into_iter().zip([
        offering.instance_type.as_str(),
        offering.zone.as_str(),
        offering.capacity_type.as_str(),
    ]) {
        requirements.push(NodeSelectorRequirement::new(key, Operator::In, [value]));
    }
    claim.spec.requirements = Some(requirements);
    claim
}

#[cfg(test)]
mod tests;

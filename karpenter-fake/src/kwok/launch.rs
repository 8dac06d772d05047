//! How the kwok provider launches a NodeClaim: the instance type and offering it picks, the
//! Node it creates, and the NodeClaim it answers with.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use karpenter_core::api::{NodeClaim, NodeClaimSpec};
use karpenter_core::cloud::CloudProviderError;
use karpenter_core::labels;
use karpenter_core::model::{InstanceType, Offering};
use karpenter_core::requirements::{Operator, Requirements};
use karpenter_core::resources::ResourceList;
use karpenter_core::taints::{Taint, unregistered_taint};

use super::{
    GROUP, KWOK_NODE_KEY, KWOK_NODE_VALUE, NODE_VIEWER_PRICE_LABEL, NODECLASS_PLURAL,
    PARTITION_LABEL, PARTITIONS, PROVIDER_ID_PREFIX, label_policy, nodeclass::KwokNodeClass,
};

/// The phase a kwok Node is created in.
pub const NODE_PHASE: &str = "Pending";

/// Attempts at creating a launched instance's Node before giving up (the error is logged; the
/// NodeClaim then fails registration like any instance that never joins).
pub const NODE_CREATE_ATTEMPTS: u32 = 4;
/// The wait after the first failed attempt.
pub const NODE_CREATE_INITIAL_BACKOFF: Duration = Duration::from_millis(10);
/// Each further wait is this many times the previous one.
pub const NODE_CREATE_BACKOFF_FACTOR: f64 = 5.0;
/// Each wait is lengthened by a random fraction of up to this much of itself.
pub const NODE_CREATE_BACKOFF_JITTER: f64 = 0.1;

/// Why a NodeClaim cannot be turned into a kwok Node.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum KwokLaunchError {
    /// The NodeClaim has no `node.kubernetes.io/instance-type` requirement.
    #[error("instance type requirement not found")]
    MissingInstanceTypeRequirement,
    /// The requirement names a type the catalog does not have.
    #[error("instance type not found, instance-type={0}")]
    UnknownInstanceType(String),
    /// The last type considered has no available offering compatible with the claim, so no
    /// offering is chosen.
    #[error("no compatible available offering, instance-type={0}")]
    NoCompatibleOffering(String),
}

/// The random draws of the kwok provider (node names, ties between equally cheap offerings,
/// partitions): a SplitMix64 generator and the name sequence number. Keep one per process; the
/// same seed gives the same draws.
#[derive(Debug, Clone)]
pub struct KwokRng {
    state: u64,
    sequence: u64,
}

const ADJECTIVES: [&str; 16] = [
    "amber", "brave", "calm", "dapper", "eager", "fuzzy", "gentle", "happy", "icy", "jolly",
    "keen", "lucky", "merry", "nimble", "proud", "quiet",
];
const NOUNS: [&str; 16] = [
    "badger", "comet", "dingo", "falcon", "gecko", "heron", "koala", "lemur", "marten", "newt",
    "otter", "panda", "quokka", "raven", "stoat", "walrus",
];
const ALPHANUMERIC: &[u8; 36] = b"abcdefghijklmnopqrstuvwxyz0123456789";

impl KwokRng {
    /// A generator seeded with `seed`, its name sequence at zero.
    pub fn new(seed: u64) -> Self {
        KwokRng {
            state: seed,
            sequence: 0,
        }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// The next 32 random bits.
    pub fn next_u32(&mut self) -> u32 {
        u32::try_from(self.next_u64() >> 32).unwrap_or(u32::MAX)
    }

    /// A random index below `len` (0 when `len` is 0).
    pub fn index(&mut self, len: usize) -> usize {
        let bound = u64::try_from(len).unwrap_or(u64::MAX);
        if bound == 0 {
            return 0;
        }
        usize::try_from(self.next_u64() % bound).unwrap_or(0)
    }

    /// A unique random name, lowercase: `<adjective><noun>-<sequence>-<10 alphanumerics>`; the
    /// sequence counts the names this generator made.
    pub fn random_name(&mut self) -> String {
        self.sequence = self.sequence.saturating_add(1);
        let adjective = ADJECTIVES.get(self.index(ADJECTIVES.len())).unwrap_or(&"");
        let noun = NOUNS.get(self.index(NOUNS.len())).unwrap_or(&"");
        let tail: String = (0..10)
            .map(|_| {
                let i = self.index(ALPHANUMERIC.len());
                char::from(ALPHANUMERIC.get(i).copied().unwrap_or(b'a'))
            })
            .collect();
        format!("{adjective}{noun}-{}-{tail}", self.sequence)
    }
}

/// The name of a Node launched for the NodeClaim `claim_name`:
/// `kwok-<claim>-<random name>-<random u32>` ([`KwokRng::random_name`]).
pub fn node_name(claim_name: &str, rng: &mut KwokRng) -> String {
    let random = rng.random_name();
    let n = rng.next_u32();
    format!("kwok-{claim_name}-{random}-{n}")
}

/// A Node's provider id: `kwok://<node name>`.
pub fn provider_id(node_name: &str) -> String {
    format!("{PROVIDER_ID_PREFIX}{node_name}")
}

/// The Node name a provider id designates: the id with every `kwok://` removed.
pub fn node_name_from_provider_id(provider_id: &str) -> String {
    provider_id.replace(PROVIDER_ID_PREFIX, "")
}

/// Whether a Node with this provider id is a kwok instance (its id starts with `kwok://`).
pub fn is_kwok_provider_id(provider_id: &str) -> bool {
    provider_id.starts_with(PROVIDER_ID_PREFIX)
}

/// The instance type and offering a launch picked.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct KwokChoice {
    /// The chosen instance type.
    pub instance_type: Arc<InstanceType>,
    /// The chosen offering (one of the type's).
    pub offering: Offering,
}

/// Picks the instance type and offering a NodeClaim launches as.
///
/// The claim's first `node.kubernetes.io/instance-type` requirement lists the candidate types;
/// they are visited in the order listed, each looked up in `instance_types`. For each, its
/// available offerings compatible with the claim's requirements (undefined well-known labels
/// allowed, with [`label_policy`]) are grouped by price; a type whose cheapest such price is
/// strictly below the best so far replaces it (so on equal prices the earlier type stays), and
/// its offering is drawn at random among those at that price (so a claim open to several zones
/// lands in a random one of the cheapest).
///
/// A type with no usable offering counts as price 0: visited after a choice, it discards that
/// choice, and the next type visited is taken whatever its price. If the last type visited
/// leaves no offering chosen, the launch fails with
/// [`KwokLaunchError::NoCompatibleOffering`].
pub fn choose_offering(
    node_claim: &NodeClaim,
    instance_types: &[Arc<InstanceType>],
    rng: &mut KwokRng,
) -> Result<KwokChoice, KwokLaunchError> {
    let spec_requirements = node_claim.spec.requirements();
    let candidates = spec_requirements
        .iter()
        .find(|r| r.key == labels::INSTANCE_TYPE)
        .ok_or(KwokLaunchError::MissingInstanceTypeRequirement)?;
    let requirements = Requirements::from_node_selector_requirements(spec_requirements);
    let policy = label_policy();

    let mut chosen: Option<(&Arc<InstanceType>, Option<&Offering>)> = None;
    for name in &candidates.values {
        let it = instance_types
            .iter()
            .find(|it| it.name() == name)
            .ok_or_else(|| KwokLaunchError::UnknownInstanceType(name.clone()))?;
        let usable: Vec<&Offering> = it
            .offerings
            .iter()
            .filter(|o| o.available && requirements.is_compatible(o.requirements(), Some(&policy)))
            .collect();
        let cheapest = usable
            .iter()
            .map(|o| o.price)
            .min_by(f64::total_cmp)
            .unwrap_or(0.0);
        let best = chosen.and_then(|(_, o)| o);
        if best.is_none_or(|o| cheapest < o.price) {
            let ties: Vec<&Offering> = usable.into_iter().filter(|o| o.price == cheapest).collect();
            let pick = if ties.is_empty() {
                None
            } else {
                ties.get(rng.index(ties.len())).copied()
            };
            chosen = Some((it, pick));
        }
    }
    match chosen {
        Some((it, Some(offering))) => Ok(KwokChoice {
            instance_type: Arc::clone(it),
            offering: offering.clone(),
        }),
        Some((it, None)) => Err(KwokLaunchError::NoCompatibleOffering(it.name().to_string())),
        None => Err(KwokLaunchError::NoCompatibleOffering(String::new())),
    }
}

/// A kwok Node as pure data: what the controller writes to the API server for a launch.
///
/// A kwok Node has no owner reference when created: Karpenter's registration adds the one to
/// its NodeClaim (with the termination finalizer, the claim's taints, labels and annotations)
/// once the Node exists, as for every provider.
///
/// A caller that reads a Node back from the API server (for `get` and `list`) fills a
/// [`KwokNode::default`] with what it read and passes it to [`node_claim_from_node`].
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct KwokNode {
    /// `metadata.name` ([`node_name`]).
    pub name: String,
    /// `spec.providerID`: `kwok://<name>`.
    pub provider_id: String,
    /// `metadata.labels` ([`node_labels`]).
    pub labels: BTreeMap<String, String>,
    /// `metadata.annotations`: the claim's plus `kwok.x-k8s.io/node: fake`.
    pub annotations: BTreeMap<String, String>,
    /// `spec.taints`: only `karpenter.sh/unregistered:NoExecute`.
    pub taints: Vec<Taint>,
    /// `status.capacity`: the claim's resource requests.
    pub capacity: ResourceList,
    /// `status.allocatable`: the claim's resource requests overwritten by the instance type's
    /// allocatable resources.
    pub allocatable: ResourceList,
}

/// `annotations` plus `kwok.x-k8s.io/node: fake`.
pub fn with_kwok_annotation(annotations: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    let mut out = annotations.clone();
    out.insert(KWOK_NODE_KEY.to_string(), KWOK_NODE_VALUE.to_string());
    out
}

/// The labels of the Node a claim launches as, each step overwriting the previous ones: the
/// claim's labels; every claim requirement `In` exactly one value, as that value; the instance
/// type's name; every instance-type requirement `In` exactly one value; the offering's zone and
/// capacity type; `eks-node-viewer/instance-price` (the offering's price, six decimals);
/// `kwok-partition` (`partition`); `kubernetes.io/hostname` (the claim's name); and
/// `kwok.x-k8s.io/node: fake`.
pub fn node_labels(
    node_claim: &NodeClaim,
    instance_type: &InstanceType,
    offering: &Offering,
    partition: &str,
) -> BTreeMap<String, String> {
    let mut out = node_claim.metadata.labels.clone();
    for r in node_claim.spec.requirements() {
        if r.operator == Operator::In
            && let [value] = r.values.as_slice()
        {
            out.insert(r.key.clone(), value.clone());
        }
    }
    out.insert(
        labels::INSTANCE_TYPE.to_string(),
        instance_type.name().to_string(),
    );
    let single_values = instance_type
        .requirements()
        .iter()
        .chain(offering.requirements().iter());
    for r in single_values {
        if r.operator() == Operator::In
            && r.len() == 1
            && let Some(value) = r.values().next()
        {
            out.insert(r.key().to_string(), value.to_string());
        }
    }
    out.insert(
        NODE_VIEWER_PRICE_LABEL.to_string(),
        format!("{:.6}", offering.price),
    );
    out.insert(PARTITION_LABEL.to_string(), partition.to_string());
    out.insert(labels::HOSTNAME.to_string(), node_claim.name().to_string());
    out.insert(KWOK_NODE_KEY.to_string(), KWOK_NODE_VALUE.to_string());
    out
}

/// The Node a claim launches as through `choice`, named `name`, in partition `partition` (see
/// [`KwokNode`] for each field).
pub fn node_for(
    node_claim: &NodeClaim,
    choice: &KwokChoice,
    name: &str,
    partition: &str,
) -> KwokNode {
    let requests = &node_claim.spec.resources.requests;
    let mut allocatable = requests.clone();
    for (resource, q) in choice.instance_type.allocatable().iter() {
        allocatable.insert(resource, q);
    }
    KwokNode {
        name: name.to_string(),
        provider_id: provider_id(name),
        labels: node_labels(
            node_claim,
            &choice.instance_type,
            &choice.offering,
            partition,
        ),
        annotations: with_kwok_annotation(&node_claim.metadata.annotations),
        taints: vec![unregistered_taint()],
        capacity: requests.clone(),
        allocatable,
    }
}

/// The NodeClaim the provider reports for a kwok Node (what `create`, `get` and `list` return):
/// named after the Node, with its labels, its annotations plus `kwok.x-k8s.io/node: fake`, an
/// empty spec (no requirements) and a status of the Node's name, provider id, capacity and
/// allocatable.
pub fn node_claim_from_node(node: &KwokNode) -> NodeClaim {
    let spec = NodeClaimSpec {
        requirements: None,
        ..NodeClaimSpec::default()
    };
    let mut claim = NodeClaim::new(node.name.clone(), spec);
    claim.metadata.labels = node.labels.clone();
    claim.metadata.annotations = with_kwok_annotation(&node.annotations);
    claim.status.node_name = Some(node.name.clone());
    claim.status.provider_id = Some(node.provider_id.clone());
    claim.status.capacity = node.capacity.clone();
    claim.status.allocatable = node.allocatable.clone();
    claim
}

/// A launch's result: the Node to create (after `registration_delay`), the NodeClaim to answer
/// `create` with, and the choice behind them.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct KwokLaunch {
    /// The Node to create.
    pub node: KwokNode,
    /// What `create` returns ([`node_claim_from_node`] of [`node`](Self::node)).
    pub node_claim: NodeClaim,
    /// How long to wait before creating the Node (the class's `nodeRegistrationDelay`).
    pub registration_delay: Duration,
    /// The instance type and offering chosen.
    pub choice: KwokChoice,
}

/// The kwok provider's `create` without its I/O: `node_class` is the `KWOKNodeClass` named by the
/// claim's `nodeClassRef.name` (`None` when it does not exist).
///
/// In order: the Node is built ([`node_name`], [`choose_offering`], a random partition of
/// [`PARTITIONS`], [`node_for`]), a failure being an
/// [`Other`](CloudProviderError::Other) error `translating nodeclaim to node, …`; a missing class
/// is [`InsufficientCapacity`](CloudProviderError::InsufficientCapacity) (no offerings listed);
/// a class whose `Ready` condition is `False` is
/// [`NodeClassNotReady`](CloudProviderError::NodeClassNotReady) with the condition's message.
/// Otherwise the caller creates [`KwokLaunch::node`] after [`KwokLaunch::registration_delay`]
/// (without waiting for it; retrying on any error [`NODE_CREATE_ATTEMPTS`] times with the
/// backoff above) and answers with [`KwokLaunch::node_claim`].
pub fn create(
    node_claim: &NodeClaim,
    instance_types: &[Arc<InstanceType>],
    node_class: Option<&KwokNodeClass>,
    rng: &mut KwokRng,
) -> Result<KwokLaunch, CloudProviderError> {
    let name = node_name(node_claim.name(), rng);
    let choice = choose_offering(node_claim, instance_types, rng).map_err(|e| {
        CloudProviderError::other(format!("translating nodeclaim to node, {e}")).with_source(e)
    })?;
    let partition = PARTITIONS.get(rng.index(PARTITIONS.len())).unwrap_or(&"");
    let node = node_for(node_claim, &choice, &name, partition);

    let Some(class) = node_class else {
        return Err(CloudProviderError::insufficient_capacity(
            Vec::new(),
            format!(
                "resolving node class from nodeclaim, {NODECLASS_PLURAL}.{GROUP} {:?} not found",
                node_claim.spec.node_class_ref.name
            ),
        ));
    };
    if let Some(message) = class.not_ready_message() {
        return Err(CloudProviderError::node_class_not_ready(message));
    }
    Ok(KwokLaunch {
        node_claim: node_claim_from_node(&node),
        node,
        registration_delay: class.registration_delay(),
        choice,
    })
}

//! The kwok cloud provider's contract, as pure data and logic (no I/O): the provider upstream
//! Karpenter's end-to-end suites run against, whose instances are Node objects that kwok (the
//! kubelet simulator) plays the kubelet of. `docs/kwok.md` describes the contract for users.
//!
//! - [`instance_types`]: the 144-type catalog (`c-16x-amd64-linux`, …) with its labels, prices
//!   and overhead; [`label_policy`]: the well-known labels and restricted domain it adds;
//! - [`create`]: a launch — the type and offering picked ([`choose_offering`]), the Node built
//!   ([`KwokNode`], [`node_for`]) and the NodeClaim answered ([`node_claim_from_node`]), with
//!   the node-class checks and their errors;
//! - [`KwokNodeClass`]: the `karpenter.kwok.sh/v1alpha1` node class, its readiness and its
//!   CustomResourceDefinition ([`nodeclass_crd`]).
//!
//! The caller does the I/O: reading the `KWOKNodeClass`, creating the Node after the class's
//! registration delay, and for `get`/`list`/`delete` reading Nodes whose provider id starts with
//! [`PROVIDER_ID_PREFIX`].
//!
//! ```
//! use karpenter_core::api::{NodeClaim, NodeClaimSpec, NodeClassReference};
//! use karpenter_core::requirements::{NodeSelectorRequirement, Operator};
//! use karpenter_fake::kwok::{self, KwokNodeClass, KwokRng};
//!
//! let catalog = kwok::instance_types();
//! let mut spec = NodeClaimSpec::new(NodeClassReference::new(kwok::GROUP, kwok::NODECLASS_KIND, "default"));
//! spec.requirements = Some(vec![
//!     NodeSelectorRequirement::new("node.kubernetes.io/instance-type", Operator::In, ["s-4x-amd64-linux", "c-4x-amd64-linux"]),
//!     NodeSelectorRequirement::new("karpenter.sh/capacity-type", Operator::In, ["on-demand"]),
//! ]);
//! let claim = NodeClaim::new("default-abcde", spec);
//!
//! let launch = kwok::create(&claim, &catalog, Some(&KwokNodeClass::new("default")), &mut KwokRng::new(1)).unwrap();
//! assert_eq!(launch.choice.instance_type.name(), "c-4x-amd64-linux"); // the cheaper one
//! assert_eq!(launch.node.labels["kubernetes.io/hostname"], "default-abcde");
//! assert!(launch.node.provider_id.starts_with("kwok://kwok-default-abcde-"));
//! ```

mod catalog;
mod launch;
mod nodeclass;

use std::time::Duration;

use karpenter_core::api::ConditionStatus;
use karpenter_core::cloud::{NodeClassKind, RepairPolicy};

pub use catalog::{
    ARCHITECTURES, CAPACITY_TYPES, CPUS, EPHEMERAL_STORAGE_BYTES, FAMILIES, INSTANCE_TYPE_COUNT,
    MAX_PODS, OPERATING_SYSTEMS, PODS_PER_CPU, SPOT_PRICE_FACTOR, WELL_KNOWN_LABELS, ZONES,
    catalog_on_demand_price, family_label_value, family_of, instance_type_name, instance_types,
    label_policy, new_instance_type, on_demand_price, overhead, pods_for, size_label_value,
    spot_price,
};
pub use launch::{
    KwokChoice, KwokLaunch, KwokLaunchError, KwokNode, KwokRng, NODE_CREATE_ATTEMPTS,
    NODE_CREATE_BACKOFF_FACTOR, NODE_CREATE_BACKOFF_JITTER, NODE_CREATE_INITIAL_BACKOFF,
    NODE_PHASE, choose_offering, create, is_kwok_provider_id, node_claim_from_node, node_for,
    node_labels, node_name, node_name_from_provider_id, provider_id, with_kwok_annotation,
};
pub use nodeclass::{
    CONDITION_READY, DEFAULT_READY_TRANSITION_TIME, KwokNodeClass, KwokNodeClassError,
    KwokNodeClassSpec, KwokNodeClassStatus, NODE_REGISTRATION_DELAY_PATTERN, NODECLASS_CATEGORIES,
    NODECLASS_SHORT_NAMES, NODECLASS_SINGULAR, nodeclass_crd,
};

/// The provider's name, `kwok`.
pub const PROVIDER_NAME: &str = "kwok";

/// The API group of the node class and of the provider's labels, `karpenter.kwok.sh`.
pub const GROUP: &str = "karpenter.kwok.sh";
/// The node class API version, `v1alpha1`.
pub const VERSION: &str = "v1alpha1";
/// `karpenter.kwok.sh/v1alpha1`.
pub const API_VERSION: &str = "karpenter.kwok.sh/v1alpha1";
/// The node class kind, `KWOKNodeClass`.
pub const NODECLASS_KIND: &str = "KWOKNodeClass";
/// The node class resource (plural), `kwoknodeclasses`.
pub const NODECLASS_PLURAL: &str = "kwoknodeclasses";

/// Provider ids are `kwok://<node name>`.
pub const PROVIDER_ID_PREFIX: &str = "kwok://";

/// `karpenter.kwok.sh/instance-size`: the type's size (the CPU count for generated types).
pub const INSTANCE_SIZE_LABEL: &str = "karpenter.kwok.sh/instance-size";
/// `karpenter.kwok.sh/instance-family`: `c`, `s` or `m` for generated types.
pub const INSTANCE_FAMILY_LABEL: &str = "karpenter.kwok.sh/instance-family";
/// `karpenter.kwok.sh/instance-cpu`: the CPU count.
pub const INSTANCE_CPU_LABEL: &str = "karpenter.kwok.sh/instance-cpu";
/// `karpenter.kwok.sh/instance-memory`: the memory as a quantity (`32Gi`, `1Ti`).
pub const INSTANCE_MEMORY_LABEL: &str = "karpenter.kwok.sh/instance-memory";

/// `kwok.x-k8s.io/node`: the annotation (and label) by which kwok recognises the Nodes it
/// manages.
pub const KWOK_NODE_KEY: &str = "kwok.x-k8s.io/node";
/// The value of [`KWOK_NODE_KEY`], `fake`.
pub const KWOK_NODE_VALUE: &str = "fake";
/// `eks-node-viewer/instance-price`: the launch price per hour, for node viewers.
pub const NODE_VIEWER_PRICE_LABEL: &str = "eks-node-viewer/instance-price";
/// `kwok-partition`: the kwok partition a Node belongs to.
pub const PARTITION_LABEL: &str = "kwok-partition";
/// The partitions Nodes are spread over (one: `a`).
pub const PARTITIONS: [&str; 1] = ["a"];

/// How long a Node's `Ready` condition may be `False` or `Unknown` before Karpenter repairs it.
pub const REPAIR_TOLERATION: Duration = Duration::from_secs(10 * 60);

/// The node class kind the provider launches from: `karpenter.kwok.sh` / `KWOKNodeClass`.
pub fn supported_node_class() -> NodeClassKind {
    NodeClassKind::new(GROUP, NODECLASS_KIND)
}

/// The provider's repair policies: node condition `Ready` `False`, and `Ready` `Unknown`, each
/// tolerated for [`REPAIR_TOLERATION`].
pub fn repair_policies() -> Vec<RepairPolicy> {
    [ConditionStatus::False, ConditionStatus::Unknown]
        .into_iter()
        .map(|status| RepairPolicy::new("Ready", status, REPAIR_TOLERATION))
        .collect()
}

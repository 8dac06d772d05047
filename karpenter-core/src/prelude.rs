//! The types a user starts from, for a glob import: `use karpenter_core::prelude::*;`.
//!
//! - the `karpenter.sh/v1` objects: [`NodePool`] and [`NodeClaim`] with the parts needed to build
//!   them in code;
//! - the scheduling model: [`Pod`], [`InstanceType`], [`Offering`], [`Overhead`],
//!   [`ClusterNode`], [`DaemonSet`], [`Requirements`], [`Quantity`], [`ResourceList`], taints
//!   and tolerations;
//! - the solve: [`solve`], [`SchedulingInput`], [`NodePoolInput`], [`ExistingNodeInput`],
//!   [`SchedulerOptions`], [`Results`], [`NewNodeClaim`];
//! - the launch: [`CloudProvider`], [`CloudProviderError`], [`to_node_claim`],
//!   [`resolve_launch`], [`LabelPolicy`].

pub use crate::api::{
    NodeClaim, NodeClaimSpec, NodeClaimTemplate, NodeClaimTemplateSpec, NodeClassReference,
    NodePool, NodePoolSpec,
};
pub use crate::cloud::{CloudProvider, CloudProviderError};
pub use crate::labels::LabelPolicy;
pub use crate::launch::{resolve_launch, to_node_claim};
pub use crate::model::{ClusterNode, DaemonSet, InstanceType, Offering, Overhead, Pod};
pub use crate::requirements::{Operator, Requirement, Requirements};
pub use crate::resources::{Quantity, ResourceList};
pub use crate::scheduling::{
    ExistingNodeInput, NewNodeClaim, NodePoolInput, Results, SchedulerOptions, SchedulingInput,
    solve,
};
pub use crate::taints::{Taint, TaintEffect, Toleration};

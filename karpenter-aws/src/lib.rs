//! # karpenter-aws
//!
//! The AWS provider for `karpenter-core`: the decisions of upstream Karpenter's AWS provider as
//! pure functions over plain data, and (feature `sdk`) the shell on the AWS SDK for Rust that
//! translates requests and responses and calls them ([`sdk`]: `AwsCloudProvider` on EC2,
//! node-class resolution through EC2, SSM and IAM, the Price List client, the SQS interruption
//! consumer, `eks:DescribeCluster`). Without the feature nothing here calls AWS.
//!
//! - [`nodeclass`]: the `EC2NodeClass` types (upstream YAML unchanged), validation equal to the
//!   CRD's rules, defaults, how a class shapes instance types, its static hash, and the
//!   node-class reconcile step ([`nodeclass::reconcile::reconcile`]); `crd` (feature `kube`)
//!   is its CustomResourceDefinition.
//! - [`cluster`]: the endpoint, CA bundle, service CIDR and version nodes bootstrap with, from
//!   the settings or `eks:DescribeCluster`.
//! - [`ami`], [`resolve`]: AMI, subnet and security-group resolution.
//! - [`launch`], [`userdata`]: launch tags, provider IDs, launch-template names, user data per
//!   AMI family, the CreateFleet request, what its result means, the unavailable-offerings
//!   cache.
//! - [`drift`]: EC2NodeClass drift. [`interruption`]: interruption-queue messages and actions.
//! - [`pricing`]: on-demand (Price List API behind a trait) and spot prices, with the embedded
//!   snapshot as fallback. [`catalog`]: instance types from EC2 data with upstream's capacity,
//!   overhead and label rules, and the offline us-east-1 catalog.
//! - `sdk` (feature `sdk`): the I/O shell described above.

#![cfg_attr(docsrs, feature(doc_cfg))]

pub mod ami;
pub mod catalog;
pub mod cluster;
#[cfg(feature = "kube")]
#[cfg_attr(docsrs, doc(cfg(feature = "kube")))]
pub mod crd;
pub mod drift;
pub mod instanceprofile;
pub mod interruption;
pub mod launch;
mod network;
pub mod nodeclass;
pub mod placement;
pub mod pricing;
pub mod reservation;
pub mod resolve;
#[cfg(feature = "sdk")]
#[cfg_attr(docsrs, doc(cfg(feature = "sdk")))]
pub mod sdk;
pub mod userdata;

pub use catalog::{
    AwsCatalogOptions, CatalogError, CatalogInstanceType, CatalogOffering, CatalogOverhead,
    offline_catalog,
};

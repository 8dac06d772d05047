//! # karpenter-aws
//!
//! The AWS provider for `karpenter-core`: EC2NodeClass, instance types built from EC2 data with
//! upstream's capacity and overhead rules, and the offline us-east-1 catalog.

pub mod ami;
pub mod catalog;
#[cfg(feature = "kube")]
pub mod crd;
pub mod drift;
pub mod interruption;
pub mod launch;
pub mod nodeclass;
pub mod pricing;
pub mod resolve;
pub mod userdata;

pub use catalog::{
    AwsCatalogOptions, CatalogError, CatalogInstanceType, CatalogOffering, CatalogOverhead,
    offline_catalog,
};

//! # karpenter-core
//!
//! Karpenter's node-autoscaling decisions as a library: the `karpenter.sh/v1` API types, exact
//! Kubernetes resource quantities, the node-requirement algebra, the provisioning scheduler and
//! the disruption planner.
//!
//! The crate is *sans-IO* and deterministic: it performs no network or file I/O, never reads the
//! wall clock (time is a parameter) and iterates in stable orders, so the same input always gives
//! the same output. The only async surface is the [`cloud::CloudProvider`] trait, which callers
//! implement (see `karpenter-fake` for an in-memory provider and `karpenter-aws` for EC2).
//!
//! Data flows one way: [`api`] → [`model`] → scheduling / disruption → results.

#![cfg_attr(docsrs, feature(doc_cfg))]

pub mod api;
pub mod catalog;
pub mod cloud;
#[cfg(feature = "k8s-openapi")]
#[cfg_attr(docsrs, doc(cfg(feature = "k8s-openapi")))]
pub mod convert;
#[cfg(feature = "kube")]
#[cfg_attr(docsrs, doc(cfg(feature = "kube")))]
pub mod crd;
pub mod disruption;
pub mod hostports;
pub mod labels;
pub mod lifecycle;
pub mod model;
pub mod operator;
pub mod requirements;
pub mod resources;
pub mod scheduling;
pub mod state;
pub mod taints;
pub mod volumes;
#[cfg(feature = "k8s-openapi")]
#[cfg_attr(docsrs, doc(cfg(feature = "k8s-openapi")))]
pub mod world;

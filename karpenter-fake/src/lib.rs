//! # karpenter-fake
//!
//! An in-memory [`karpenter_core::cloud::CloudProvider`] for tests, and the instance-type
//! catalogs upstream Karpenter's tests and benchmarks use.
//!
//! - [`catalog`]: fake instance types (`fake.NewInstanceType`), the benchmark catalog
//!   (`fake-it-<i>`), the default and assorted catalogs, and the fake label policy;
//! - [`provider`]: [`FakeCloudProvider`], which launches NodeClaims like upstream's fake
//!   provider, records every call and can be told to fail;
//! - [`kwok`]: the kwok provider's contract (its 144-type catalog, the Nodes it launches, the
//!   `KWOKNodeClass`), as pure data and logic;
//! - [`harness`]: a provisioning-round [`harness::Cluster`] for conformance tests;
//! - [`sim`]: the simulator shell of the operator loops ([`sim::Sim`]): an in-memory cluster
//!   API, kubelets, a binder and a virtual clock.

pub mod catalog;
pub mod harness;
pub mod kwok;
pub mod provider;
pub mod sim;

pub use catalog::{
    InstanceTypeOptions, RESERVATION_ID_LABEL, default_catalog, fake_label_policy, instance_types,
    instance_types_assorted, new_instance_type,
};
pub use provider::{Call, CallKind, FakeCloudProvider};

//! # karpenter-fake
//!
//! An in-memory [`karpenter_core::cloud::CloudProvider`] for tests, and the instance-type
//! catalogs upstream Karpenter's tests and benchmarks use.

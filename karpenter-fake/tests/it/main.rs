//! Integration tests of karpenter-fake: catalogs, the fake provider and the provisioning harness.

mod catalog;
mod harness;
mod metrics;
mod overrides;
mod provider;

//! Integration tests of karpenter-fake: catalogs, the fake provider and the provisioning harness.

mod catalog;
mod defaults;
mod harness;
mod metrics;
mod overrides;
mod provider;

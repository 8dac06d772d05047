//! Integration tests of karpenter-fake: catalogs, the fake provider and the provisioning harness.

mod catalog;
mod harness;
mod instance_selection;
mod provider;
mod topology_affinity;
mod topology_combined;
mod topology_spread;
mod topology_support;
mod topology_taints;

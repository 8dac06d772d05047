//! Integration tests of karpenter-fake: catalogs, the fake provider and the provisioning harness.

mod catalog;
mod defaults;
mod harness;
mod instance_selection;
mod metrics;
mod overrides;
mod provider;
mod sim;
mod suite_binpacking;
mod suite_custom_constraints;
mod suite_deleting_nodes;
mod suite_dra;
mod suite_existing_nodes;
mod suite_in_flight_nodes;
mod suite_instance_types;
mod suite_kit;
mod suite_no_pre_binding;
mod suite_nodepool_filtering;
mod suite_preferential_fallback;
mod suite_reserved_instance_types;
mod topology_affinity;
mod topology_combined;
mod topology_spread;
mod topology_support;
mod topology_taints;
mod volumes;

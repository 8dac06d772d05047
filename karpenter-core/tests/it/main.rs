//! The integration-test binary of `karpenter-core` (one binary, one module per area).

mod api;
mod disruption_audit;
mod disruption_buffer_scenarios;
mod disruption_candidates;
mod disruption_methods;
mod disruption_remaining_scenarios;
mod disruption_scenarios;
mod disruption_split;
mod disruption_validation_scenarios;
mod house;
mod lifecycle;
mod lifecycle_audit;
mod module_cycles;

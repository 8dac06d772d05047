//! Every metric family this controller exports, and the series names their samples carry:
//! what a dashboard or an alert may read ([`exported_series`]). A test checks the list against
//! the registry's scrape.

use std::collections::BTreeSet;

use super::{COUNTERS, HISTOGRAMS, SUMMARIES};

/// The gauges (full names), beside the operator's [`COUNTERS`], [`HISTOGRAMS`] and
/// [`SUMMARIES`].
pub const GAUGES: &[&str] = &[
    "karpenter_build_info",
    "karpenter_cloudprovider_instance_type_cpu_cores",
    "karpenter_cloudprovider_instance_type_memory_bytes",
    "karpenter_cloudprovider_instance_type_offering_available",
    "karpenter_cloudprovider_instance_type_offering_price_estimate",
    "karpenter_cluster_state_node_count",
    "karpenter_cluster_state_synced",
    "karpenter_cluster_utilization_percent",
    "karpenter_nodepools_allowed_disruptions",
    "karpenter_nodepools_cost_total",
    "karpenter_nodepools_limit",
    "karpenter_nodepools_nodes_consuming_budgets",
    "karpenter_nodepools_usage",
    "karpenter_nodes_allocatable",
    "karpenter_nodes_current_lifetime_seconds",
    "karpenter_nodes_system_overhead",
    "karpenter_nodes_total_daemon_limits",
    "karpenter_nodes_total_daemon_requests",
    "karpenter_nodes_total_pod_limits",
    "karpenter_nodes_total_pod_requests",
    "karpenter_pods_state",
    "karpenter_pods_unbound_time_seconds",
    "karpenter_pods_unstarted_time_seconds",
    "karpenter_voluntary_disruption_eligible_nodes",
    "workqueue_depth",
];

/// The counters registered outside [`COUNTERS`] (controller-runtime's), by series name.
pub const OTHER_COUNTERS: &[&str] = &[
    "controller_runtime_reconcile_total",
    "controller_runtime_reconcile_errors_total",
    "workqueue_adds_total",
];

/// The histograms registered outside [`HISTOGRAMS`].
pub const OTHER_HISTOGRAMS: &[&str] = &[
    "karpenter_cloudprovider_duration_seconds",
    "controller_runtime_reconcile_time_seconds",
];

/// Every series name a scrape can carry: gauges and counters as named, histograms with
/// `_bucket`, `_sum` and `_count`, summaries bare (the quantiles), with `_sum` and `_count`.
pub fn exported_series() -> BTreeSet<String> {
    let mut out: BTreeSet<String> = GAUGES.iter().map(|s| s.to_string()).collect();
    out.extend(COUNTERS.iter().map(|(n, _)| n.to_string()));
    out.extend(OTHER_COUNTERS.iter().map(|n| n.to_string()));
    for name in HISTOGRAMS
        .iter()
        .map(|(n, _)| *n)
        .chain(OTHER_HISTOGRAMS.iter().copied())
    {
        for suffix in ["_bucket", "_sum", "_count"] {
            out.insert(format!("{name}{suffix}"));
        }
    }
    for (name, _) in SUMMARIES {
        for suffix in ["", "_sum", "_count"] {
            out.insert(format!("{name}{suffix}"));
        }
    }
    out
}

//! The metric names operators' guides use, mapped to upstream Karpenter's current (v1.14)
//! names and to what this controller exports. `docs/controller.md` ("Names from older guides")
//! shows this table; the tests scrape the controller for every name in its `ours` column.

/// One metric name a guide uses, and what answers it now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GuideMetric {
    /// The name as the guide writes it.
    pub guide: &'static str,
    /// Upstream's current name (v1.14), `None` when upstream never had such a metric.
    pub upstream: Option<&'static str>,
    /// Upstream's current labels of that metric.
    pub labels: &'static [&'static str],
    /// When and how upstream changed it, or how to get the guide's answer.
    pub change: &'static str,
    /// The metrics this controller exports that answer it (each with samples once the
    /// controller has launched a node).
    pub ours: &'static [&'static str],
}

/// Every metric name of the seed guide's monitoring section (its metric list, its Grafana
/// queries and its alerts), as [`GuideMetric`]s.
pub const GUIDE_METRICS: &[GuideMetric] = &[
    GuideMetric {
        guide: "karpenter_nodeclaims_created_total",
        upstream: Some("karpenter_nodeclaims_created_total"),
        labels: &["reason", "nodepool", "min_values_relaxed"],
        change: "unchanged",
        ours: &["karpenter_nodeclaims_created_total"],
    },
    GuideMetric {
        guide: "karpenter_nodeclaims_terminated_total",
        upstream: Some("karpenter_nodeclaims_terminated_total"),
        labels: &["nodepool", "capacity_type", "zone"],
        change: "unchanged",
        ours: &["karpenter_nodeclaims_terminated_total"],
    },
    GuideMetric {
        guide: "karpenter_nodes_total",
        upstream: None,
        labels: &[],
        change: "never an upstream metric; count the per-node series instead: \
                 `count by (nodepool) (karpenter_nodes_current_lifetime_seconds)`",
        ours: &["karpenter_nodes_current_lifetime_seconds"],
    },
    GuideMetric {
        guide: "karpenter_nodes_allocatable",
        upstream: Some("karpenter_nodes_allocatable"),
        labels: &[
            "node_name",
            "nodepool",
            "instance_type",
            "capacity_type",
            "zone",
            "arch",
            "resource_type",
            "...",
        ],
        change: "unchanged (one label per well-known node label, plus node_name, phase, managed)",
        ours: &["karpenter_nodes_allocatable"],
    },
    GuideMetric {
        guide: "karpenter_disruption_actions_performed_total",
        upstream: Some("karpenter_voluntary_disruption_decisions_total"),
        labels: &["decision", "reason", "consolidation_type"],
        change: "renamed in v1.0.0 (2024-08); labels action, method became decision, reason",
        ours: &["karpenter_voluntary_disruption_decisions_total"],
    },
    GuideMetric {
        guide: "karpenter_cloudprovider_duration_seconds",
        upstream: Some("karpenter_cloudprovider_duration_seconds"),
        labels: &["controller", "method", "provider"],
        change: "unchanged",
        ours: &["karpenter_cloudprovider_duration_seconds"],
    },
    GuideMetric {
        guide: "karpenter_cloudprovider_errors_total",
        upstream: Some("karpenter_cloudprovider_errors_total"),
        labels: &["controller", "method", "provider", "error"],
        change: "unchanged",
        ours: &["karpenter_cloudprovider_errors_total"],
    },
    GuideMetric {
        guide: "karpenter_cloudprovider_instance_type_price_estimate",
        upstream: Some("karpenter_cloudprovider_instance_type_offering_price_estimate"),
        labels: &["instance_type", "capacity_type", "zone"],
        change: "renamed in v0.36.0 (2024-03), label region dropped; it never had a nodepool \
                 label: the cost of a NodePool is `karpenter_nodepools_cost_total`",
        ours: &[
            "karpenter_cloudprovider_instance_type_offering_price_estimate",
            "karpenter_nodepools_cost_total",
        ],
    },
    GuideMetric {
        guide: "karpenter_provisioner_scheduling_duration_seconds",
        upstream: Some("karpenter_scheduler_scheduling_duration_seconds"),
        labels: &["controller"],
        change: "renamed in v1.0.0 (2024-08), merged with \
                 `karpenter_provisioner_scheduling_simulation_duration_seconds`",
        ours: &["karpenter_scheduler_scheduling_duration_seconds"],
    },
    GuideMetric {
        guide: "karpenter_nodepools_limit",
        upstream: Some("karpenter_nodepools_limit"),
        labels: &["nodepool", "resource_type"],
        change: "unchanged (set only for the resources a NodePool limits)",
        ours: &["karpenter_nodepools_limit"],
    },
];

/// Every name of [`GUIDE_METRICS`]'s `ours` columns, deduplicated, in order.
pub fn exported_names() -> Vec<&'static str> {
    let mut out: Vec<&'static str> = Vec::new();
    for m in GUIDE_METRICS {
        for name in m.ours {
            if !out.contains(name) {
                out.push(name);
            }
        }
    }
    out
}

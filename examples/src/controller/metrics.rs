//! Prometheus metrics with upstream Karpenter's names and labels (namespace `karpenter_`).
//!
//! Counters and histograms are updated as the operator loops ask (`Action::Metric`, by
//! upstream's full metric name); the gauges that describe the cluster
//! (`karpenter_pods_state`, `karpenter_nodes_total_pod_requests`, `karpenter_nodes_allocatable`,
//! `karpenter_nodepools_limit`, `karpenter_cluster_state_node_count`, ...) are recomputed from
//! the watch caches by [`Metrics::refresh`] before each scrape, so they never go stale.

use std::collections::BTreeMap;
use std::sync::atomic::AtomicU64;

use k8s_openapi::api::core::v1::{Node, Pod};
use karpenter_core::crd::KubeNodePool;
use karpenter_core::labels;
use karpenter_core::lifecycle::{Metric, MetricOp};
use karpenter_core::resources::{Quantity, ResourceList};
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// Label values as ordered pairs (upstream's label names).
pub type Labels = Vec<(&'static str, String)>;

type GaugeF = Gauge<f64, AtomicU64>;

/// Label sets of the counters and histograms the operator updates (label names are data).
pub type DynLabels = Vec<(String, String)>;

type CounterF = Counter<f64, AtomicU64>;

/// The counters the operator loops update through `Action::Metric`, by full name, with help.
pub const COUNTERS: &[(&str, &str)] = &[
    (
        "karpenter_nodeclaims_created_total",
        "Number of nodeclaims created in total by Karpenter.",
    ),
    (
        "karpenter_nodeclaims_terminated_total",
        "Number of nodeclaims terminated in total by Karpenter.",
    ),
    (
        "karpenter_nodeclaims_disrupted_total",
        "Number of nodeclaims disrupted in total by Karpenter.",
    ),
    (
        "karpenter_nodeclaims_unhealthy_disrupted_total",
        "Number of unhealthy nodeclaims disrupted in total by Karpenter.",
    ),
    (
        "karpenter_nodes_created_total",
        "Number of nodes created in total by Karpenter.",
    ),
    (
        "karpenter_nodes_terminated_total",
        "Number of nodes terminated in total by Karpenter.",
    ),
    (
        "karpenter_nodes_drained_total",
        "The number of nodes drained by Karpenter.",
    ),
    (
        "karpenter_pods_drained_total",
        "The number of pods drained during node termination.",
    ),
    (
        "karpenter_pods_eviction_requests_total",
        "The number of pod eviction requests by response code.",
    ),
    (
        "karpenter_pods_disruption_initiated_total",
        "The number of pods disrupted by Karpenter.",
    ),
    (
        "karpenter_voluntary_disruption_decisions_total",
        "Number of disruption decisions performed.",
    ),
    (
        "karpenter_voluntary_disruption_decisions_by_nodepool_total",
        "Number of disruption decisions performed, by nodepool.",
    ),
    (
        "karpenter_voluntary_disruption_queue_failures_total",
        "Number of times actions in the disruption queue failed.",
    ),
    (
        "karpenter_voluntary_disruption_failed_validations_total",
        "Number of candidates that failed validation.",
    ),
    (
        "karpenter_voluntary_disruption_consolidation_timeouts_total",
        "Number of times the consolidation algorithm reached a timeout.",
    ),
    (
        "karpenter_consolidation_moves_total",
        "Number of consolidation moves.",
    ),
    (
        "karpenter_interruption_received_messages_total",
        "Count of messages received from the interruption queue.",
    ),
    (
        "karpenter_cloudprovider_errors_total",
        "Total number of errors returned from CloudProvider calls.",
    ),
];

/// The histograms the operator loops update through `Action::Metric`, by full name, with help.
pub const HISTOGRAMS: &[(&str, &str)] = &[
    (
        "karpenter_voluntary_disruption_decision_evaluation_duration_seconds",
        "Duration of the disruption decision evaluation process in seconds.",
    ),
    (
        "karpenter_scheduler_scheduling_duration_seconds",
        "Duration of the scheduling simulation.",
    ),
    (
        "karpenter_nodeclaims_termination_duration_seconds",
        "Duration of nodeclaim termination in seconds.",
    ),
    (
        "karpenter_nodeclaims_instance_termination_duration_seconds",
        "Duration of the instance termination in seconds.",
    ),
    (
        "karpenter_nodes_termination_duration_seconds",
        "Duration of node termination in seconds.",
    ),
    (
        "karpenter_nodes_lifetime_duration_seconds",
        "The lifetime duration of the nodes since creation.",
    ),
    (
        "karpenter_pods_startup_duration_seconds",
        "The time from pod creation until the pod is running.",
    ),
    (
        "karpenter_consolidation_score",
        "Consolidation score of a decision.",
    ),
];

/// Every metric the controller exports.
pub struct Metrics {
    registry: Registry,
    counters: BTreeMap<&'static str, Family<DynLabels, CounterF>>,
    histograms: BTreeMap<&'static str, Family<DynLabels, Histogram>>,
    /// `karpenter_cloudprovider_duration_seconds` {controller, method, provider}.
    pub cloudprovider_duration: Family<Labels, Histogram>,
    /// `karpenter_pods_state` {name, namespace, owner, node, nodepool, zone, arch,
    /// capacity_type, instance_type, phase}: 1 per pod.
    pub pods_state: Family<Labels, GaugeF>,
    /// `karpenter_nodes_total_pod_requests` {node_name, nodepool, resource_type, ...}.
    pub nodes_total_pod_requests: Family<Labels, GaugeF>,
    /// `karpenter_nodes_allocatable` {node_name, nodepool, resource_type, ...}.
    pub nodes_allocatable: Family<Labels, GaugeF>,
    /// `karpenter_nodepools_limit` {nodepool, resource_type}.
    pub nodepools_limit: Family<Labels, GaugeF>,
    /// `karpenter_cluster_state_node_count`.
    pub cluster_state_node_count: GaugeF,
    /// `karpenter_cluster_state_synced`: 1 once every watch cache has its first list.
    pub cluster_state_synced: GaugeF,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

fn histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.005, 2.0, 14))
}

impl Metrics {
    /// A registry with every family registered.
    pub fn new() -> Metrics {
        let mut registry = Registry::with_prefix("karpenter");
        let mut counters = BTreeMap::new();
        for (name, help) in COUNTERS {
            let family = Family::<DynLabels, CounterF>::default();
            // The registry adds the prefix, and `_total` to counters.
            let short = name
                .trim_start_matches("karpenter_")
                .trim_end_matches("_total");
            registry.register(short, *help, family.clone());
            counters.insert(*name, family);
        }
        let mut histograms = BTreeMap::new();
        for (name, help) in HISTOGRAMS {
            let family = Family::<DynLabels, Histogram>::new_with_constructor(
                histogram as fn() -> Histogram,
            );
            registry.register(name.trim_start_matches("karpenter_"), *help, family.clone());
            histograms.insert(*name, family);
        }
        let m = Metrics {
            registry: Registry::default(),
            counters,
            histograms,
            cloudprovider_duration: Family::new_with_constructor(histogram),
            pods_state: Family::default(),
            nodes_total_pod_requests: Family::default(),
            nodes_allocatable: Family::default(),
            nodepools_limit: Family::default(),
            cluster_state_node_count: GaugeF::default(),
            cluster_state_synced: GaugeF::default(),
        };
        registry.register(
            "cloudprovider_duration_seconds",
            "Duration of cloud provider method calls.",
            m.cloudprovider_duration.clone(),
        );
        registry.register(
            "pods_state",
            "Pod state is the current state of pods.",
            m.pods_state.clone(),
        );
        registry.register(
            "nodes_total_pod_requests",
            "Node total pod requests are the resources requested by pods bound to nodes, including daemonsets.",
            m.nodes_total_pod_requests.clone(),
        );
        registry.register(
            "nodes_allocatable",
            "Node allocatable are the resources allocatable by nodes.",
            m.nodes_allocatable.clone(),
        );
        registry.register(
            "nodepools_limit",
            "Limits specified on the nodepool that restrict the quantity of resources provisioned.",
            m.nodepools_limit.clone(),
        );
        registry.register(
            "cluster_state_node_count",
            "Current count of nodes in cluster state.",
            m.cluster_state_node_count.clone(),
        );
        registry.register(
            "cluster_state_synced",
            "Returns 1 if cluster state is synced and 0 otherwise.",
            m.cluster_state_synced.clone(),
        );
        Metrics { registry, ..m }
    }

    /// Applies a metric update the operator asked for. Returns `false` (and changes nothing)
    /// for a name this registry does not export.
    pub fn apply(&self, metric: &Metric) -> bool {
        let labels: DynLabels = metric
            .labels
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        match metric.op {
            MetricOp::Add(v) => match self.counters.get(metric.name.as_str()) {
                Some(f) => {
                    f.get_or_create(&labels).inc_by(v);
                    true
                }
                None => false,
            },
            MetricOp::Observe(v) => match self.histograms.get(metric.name.as_str()) {
                Some(f) => {
                    f.get_or_create(&labels).observe(v);
                    true
                }
                None => false,
            },
        }
    }

    /// The Prometheus text exposition of every metric.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = encode(&mut out, &self.registry);
        out
    }

    /// Recomputes the cluster-describing gauges from the caches.
    pub fn refresh(&self, pods: &[&Pod], nodes: &[&Node], nodepools: &[&KubeNodePool]) {
        self.pods_state.clear();
        self.nodes_total_pod_requests.clear();
        self.nodes_allocatable.clear();
        self.nodepools_limit.clear();
        let node_labels = |name: &str| -> Labels {
            let node = nodes
                .iter()
                .find(|n| n.metadata.name.as_deref() == Some(name));
            let l = node.and_then(|n| n.metadata.labels.as_ref());
            let get = |k: &str| l.and_then(|l| l.get(k)).cloned().unwrap_or_default();
            vec![
                ("node_name", name.to_string()),
                ("nodepool", get(labels::NODEPOOL)),
                ("instance_type", get(labels::INSTANCE_TYPE)),
                ("capacity_type", get(labels::CAPACITY_TYPE)),
                ("zone", get(labels::ZONE)),
                ("arch", get(labels::ARCH)),
            ]
        };
        let mut requests: std::collections::BTreeMap<String, ResourceList> = Default::default();
        for pod in pods {
            let node = pod
                .spec
                .as_ref()
                .and_then(|s| s.node_name.clone())
                .unwrap_or_default();
            let mut l = if node.is_empty() {
                vec![
                    ("node_name", String::new()),
                    ("nodepool", String::new()),
                    ("instance_type", String::new()),
                    ("capacity_type", String::new()),
                    ("zone", String::new()),
                    ("arch", String::new()),
                ]
            } else {
                node_labels(&node)
            };
            l[0].0 = "node";
            let owner = pod
                .metadata
                .owner_references
                .as_ref()
                .and_then(|o| o.first())
                .map(|o| format!("{}/{}", o.kind, o.name))
                .unwrap_or_default();
            let phase = pod
                .status
                .as_ref()
                .and_then(|s| s.phase.clone())
                .unwrap_or_default();
            let mut labels: Labels = vec![
                ("name", pod.metadata.name.clone().unwrap_or_default()),
                (
                    "namespace",
                    pod.metadata.namespace.clone().unwrap_or_default(),
                ),
                ("owner", owner),
            ];
            labels.extend(l);
            labels.push(("phase", phase.clone()));
            self.pods_state.get_or_create(&labels).set(1.0);
            let terminal = phase == "Succeeded" || phase == "Failed";
            if !node.is_empty()
                && !terminal
                && let Ok(r) = karpenter_core::convert::effective_requests(pod)
            {
                requests.entry(node).or_default().add_assign(&r);
            }
        }
        for node in nodes {
            let name = node.metadata.name.clone().unwrap_or_default();
            let base = node_labels(&name);
            let allocatable = node.status.as_ref().and_then(|s| s.allocatable.as_ref());
            for (resource, q) in allocatable.into_iter().flatten() {
                if let Ok(q) = Quantity::parse(&q.0) {
                    let mut l = base.clone();
                    l.push(("resource_type", resource.clone()));
                    self.nodes_allocatable.get_or_create(&l).set(q.as_f64());
                }
            }
            if let Some(r) = requests.get(&name) {
                for (resource, q) in r.iter() {
                    let mut l = base.clone();
                    l.push(("resource_type", resource.to_string()));
                    self.nodes_total_pod_requests
                        .get_or_create(&l)
                        .set(q.as_f64());
                }
            }
        }
        for pool in nodepools {
            let name = pool.metadata.name.clone().unwrap_or_default();
            for (resource, q) in pool.spec.limits.iter().flat_map(|l| l.iter()) {
                let l = vec![
                    ("nodepool", name.clone()),
                    ("resource_type", resource.to_string()),
                ];
                self.nodepools_limit.get_or_create(&l).set(q.as_f64());
            }
        }
        self.cluster_state_node_count.set(nodes.len() as f64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operator_metrics_are_exported_under_upstream_names() {
        let m = Metrics::new();
        let created = Metric::add(
            "karpenter_nodeclaims_created_total",
            1.0,
            [
                ("reason", "provisioned".to_string()),
                ("nodepool", "default".to_string()),
                ("min_values_relaxed", "false".to_string()),
            ],
        );
        assert!(m.apply(&created));
        assert!(m.apply(&created));
        assert!(!m.apply(&Metric::add("karpenter_unknown_total", 1.0, [])));
        let text = m.encode();
        assert!(
            text.contains("karpenter_nodeclaims_created_total{min_values_relaxed=\"false\",nodepool=\"default\",reason=\"provisioned\"} 2"),
            "{text}"
        );
        assert!(
            text.contains("# TYPE karpenter_nodeclaims_created counter"),
            "{text}"
        );
        assert!(!text.contains("karpenter_unknown"), "{text}");
    }

    #[test]
    fn cluster_gauges_follow_the_caches() {
        let m = Metrics::new();
        let node: Node = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "n1", "labels": {"karpenter.sh/nodepool": "default"}},
            "status": {"allocatable": {"cpu": "4", "memory": "16Gi"}}
        }))
        .unwrap();
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p1", "namespace": "default"},
            "spec": {"nodeName": "n1", "containers": [{"name": "c", "resources": {"requests": {"cpu": "1500m"}}}]},
            "status": {"phase": "Running"}
        }))
        .unwrap();
        m.refresh(&[&pod], &[&node], &[]);
        let text = m.encode();
        assert!(
            text.contains(
                "karpenter_nodes_total_pod_requests{node_name=\"n1\",nodepool=\"default\""
            ),
            "{text}"
        );
        assert!(text.contains("resource_type=\"cpu\"} 1.5"), "{text}");
        assert!(
            text.contains("karpenter_pods_state{name=\"p1\",namespace=\"default\""),
            "{text}"
        );
        assert!(
            text.contains("karpenter_cluster_state_node_count 1"),
            "{text}"
        );
        m.refresh(&[], &[], &[]);
        assert!(
            !m.encode().contains("karpenter_pods_state{"),
            "gauges of gone pods are dropped"
        );
    }
}

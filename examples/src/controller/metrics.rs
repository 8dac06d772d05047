//! Prometheus metrics with upstream Karpenter's names and labels (namespace `karpenter_`).
//!
//! Counters and histograms are updated as the operator loops ask (`Action::Metric`, by
//! upstream's full metric name); the gauges that describe the cluster
//! (`karpenter_pods_state`, `karpenter_nodes_total_pod_requests`, `karpenter_nodes_allocatable`,
//! `karpenter_nodepools_limit`, `karpenter_cluster_state_node_count`, ...) are recomputed from
//! the watch caches by [`Metrics::refresh`] before each scrape, so they never go stale.

use std::collections::BTreeMap;
use std::sync::atomic::AtomicU64;

use k8s_openapi::api::core::v1::Node;
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
    /// Well-known label key -> metric label name (`topology.kubernetes.io/zone` -> `zone`).
    node_label_names: BTreeMap<String, String>,
    /// `karpenter_cloudprovider_duration_seconds` {controller, method, provider}.
    pub cloudprovider_duration: Family<Labels, Histogram>,
    /// `karpenter_pods_state` {name, namespace, owner, node, scheduled, nodepool, zone, arch,
    /// capacity_type, instance_type, phase, ready, managed}: 1 per pod.
    pub pods_state: Family<Labels, GaugeF>,
    /// `karpenter_nodes_total_pod_requests` {node labels, resource_type}: every pod bound to
    /// the node, DaemonSet pods included.
    pub nodes_total_pod_requests: Family<DynLabels, GaugeF>,
    /// `karpenter_nodes_total_daemon_requests` {node labels, resource_type}: the DaemonSet
    /// pods bound to the node.
    pub nodes_total_daemon_requests: Family<DynLabels, GaugeF>,
    /// `karpenter_nodes_allocatable` {node labels, resource_type}.
    pub nodes_allocatable: Family<DynLabels, GaugeF>,
    /// `karpenter_nodes_system_overhead` {node labels, resource_type}: capacity − allocatable.
    pub nodes_system_overhead: Family<DynLabels, GaugeF>,
    /// `karpenter_nodes_current_lifetime_seconds` {node labels}.
    pub nodes_current_lifetime_seconds: Family<DynLabels, GaugeF>,
    /// `karpenter_cluster_utilization_percent` {resource_type}: pod requests over allocatable
    /// of every node.
    pub cluster_utilization_percent: Family<Labels, GaugeF>,
    /// `karpenter_nodepools_limit` {nodepool, resource_type}.
    pub nodepools_limit: Family<Labels, GaugeF>,
    /// `karpenter_nodepools_usage` {nodepool, resource_type}: the NodePool's
    /// `status.resources`.
    pub nodepools_usage: Family<Labels, GaugeF>,
    /// `karpenter_voluntary_disruption_eligible_nodes` {reason}.
    pub voluntary_disruption_eligible_nodes: Family<Labels, GaugeF>,
    /// `karpenter_cluster_state_node_count`.
    pub cluster_state_node_count: GaugeF,
    /// `karpenter_cluster_state_synced`: 1 once every watch cache has its first list.
    pub cluster_state_synced: GaugeF,
    /// `karpenter_build_info` {version}: 1.
    pub build_info: Family<Labels, GaugeF>,
}

/// Upstream's metric name of a resource: lower case, `-` as `_` (`ephemeral_storage`).
pub fn resource_label(resource: &str) -> String {
    resource.to_lowercase().replace('-', "_")
}

/// Upstream's metric value of a quantity: cores for `cpu`, units for the rest.
fn quantity_value(q: Quantity) -> f64 {
    q.as_f64()
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new(&karpenter_core::labels::LabelPolicy::core())
    }
}

fn histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.005, 2.0, 14))
}

impl Metrics {
    /// A registry with every family registered; the node metrics are labelled by `policy`'s
    /// well-known labels (core's and the provider's), as upstream's are.
    pub fn new(policy: &karpenter_core::labels::LabelPolicy) -> Metrics {
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
        let node_label_names = policy
            .well_known()
            .filter_map(|key| {
                let (_, name) = key.split_once('/')?;
                Some((key.to_string(), resource_label(name)))
            })
            .collect();
        let m = Metrics {
            registry: Registry::default(),
            counters,
            histograms,
            node_label_names,
            cloudprovider_duration: Family::new_with_constructor(histogram),
            pods_state: Family::default(),
            nodes_total_pod_requests: Family::default(),
            nodes_total_daemon_requests: Family::default(),
            nodes_allocatable: Family::default(),
            nodes_system_overhead: Family::default(),
            nodes_current_lifetime_seconds: Family::default(),
            cluster_utilization_percent: Family::default(),
            nodepools_limit: Family::default(),
            nodepools_usage: Family::default(),
            voluntary_disruption_eligible_nodes: Family::default(),
            cluster_state_node_count: GaugeF::default(),
            cluster_state_synced: GaugeF::default(),
            build_info: Family::default(),
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
            "Node total pod requests are the resources requested by pods bound to nodes, including the DaemonSet pods.",
            m.nodes_total_pod_requests.clone(),
        );
        registry.register(
            "nodes_total_daemon_requests",
            "Node total daemon requests are the resource requested by DaemonSet pods bound to nodes.",
            m.nodes_total_daemon_requests.clone(),
        );
        registry.register(
            "nodes_allocatable",
            "Node allocatable are the resources allocatable by nodes.",
            m.nodes_allocatable.clone(),
        );
        registry.register(
            "nodes_system_overhead",
            "Node system daemon overhead are the resources reserved for system overhead, the difference between the node's capacity and allocatable values are reported by the status.",
            m.nodes_system_overhead.clone(),
        );
        registry.register(
            "nodes_current_lifetime_seconds",
            "Node age in seconds",
            m.nodes_current_lifetime_seconds.clone(),
        );
        registry.register(
            "cluster_utilization_percent",
            "Utilization of allocatable resources by pod requests",
            m.cluster_utilization_percent.clone(),
        );
        registry.register(
            "nodepools_limit",
            "Limits specified on the nodepool that restrict the quantity of resources provisioned.",
            m.nodepools_limit.clone(),
        );
        registry.register(
            "nodepools_usage",
            "The amount of resources that have been provisioned for a nodepool. Labeled by nodepool name and resource type.",
            m.nodepools_usage.clone(),
        );
        registry.register(
            "voluntary_disruption_eligible_nodes",
            "Number of nodes eligible for disruption by Karpenter. Labeled by disruption reason.",
            m.voluntary_disruption_eligible_nodes.clone(),
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
        registry.register(
            "build_info",
            "A metric with a constant '1' value labeled by version from which karpenter was built.",
            m.build_info.clone(),
        );
        m.build_info
            .get_or_create(&vec![("version", env!("CARGO_PKG_VERSION").to_string())])
            .set(1.0);
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

    /// The labels of a node's metrics (upstream's): every well-known label under its metric
    /// name, `node_name`, `phase` and `managed` (whether a NodePool owns the node).
    fn node_labels(&self, node: &Node) -> DynLabels {
        let labels = node.metadata.labels.as_ref();
        let get = |k: &str| labels.and_then(|l| l.get(k)).cloned().unwrap_or_default();
        let mut out: BTreeMap<String, String> = self
            .node_label_names
            .iter()
            .map(|(key, name)| (name.clone(), get(key)))
            .collect();
        out.insert(
            "node_name".to_string(),
            node.metadata.name.clone().unwrap_or_default(),
        );
        out.insert(
            "phase".to_string(),
            node.status
                .as_ref()
                .and_then(|s| s.phase.clone())
                .unwrap_or_default(),
        );
        out.insert(
            "managed".to_string(),
            (!get(labels::NODEPOOL).is_empty()).to_string(),
        );
        out.into_iter().collect()
    }

    /// Recomputes the cluster-describing gauges: pods from the operator's view, Nodes and
    /// NodePools from the caches, the disruption eligibility from the operator's last passes.
    pub fn refresh<'a>(
        &self,
        pods: impl IntoIterator<Item = &'a karpenter_core::model::Pod>,
        nodes: &[&Node],
        nodepools: &[&KubeNodePool],
        eligible: &BTreeMap<&'static str, usize>,
        now: jiff::Timestamp,
    ) {
        self.pods_state.clear();
        self.nodes_total_pod_requests.clear();
        self.nodes_total_daemon_requests.clear();
        self.nodes_allocatable.clear();
        self.nodes_system_overhead.clear();
        self.nodes_current_lifetime_seconds.clear();
        self.cluster_utilization_percent.clear();
        self.nodepools_limit.clear();
        self.nodepools_usage.clear();
        self.voluntary_disruption_eligible_nodes.clear();
        let by_name: BTreeMap<&str, &Node> = nodes
            .iter()
            .filter_map(|n| Some((n.metadata.name.as_deref()?, *n)))
            .collect();
        let mut requests: BTreeMap<&str, ResourceList> = BTreeMap::new();
        let mut daemon_requests: BTreeMap<&str, ResourceList> = BTreeMap::new();
        for pod in pods {
            let node_name = pod.node_name.as_deref().unwrap_or_default();
            let node = by_name.get(node_name);
            let node_label = |k: &str| {
                node.and_then(|n| n.metadata.labels.as_ref())
                    .and_then(|l| l.get(k))
                    .cloned()
                    .unwrap_or_default()
            };
            let owner = pod
                .owner
                .as_ref()
                .or(pod.other_owners.first())
                .map(|o| {
                    format!(
                        "/apis/{}/namespaces/{}/{}s/{}",
                        o.api_version,
                        pod.namespace,
                        o.kind.to_lowercase(),
                        o.name
                    )
                })
                .unwrap_or_default();
            let phase = format!("{:?}", pod.phase);
            let nodepool = node_label(labels::NODEPOOL);
            let labels: Labels = vec![
                ("name", pod.name.clone()),
                ("namespace", pod.namespace.clone()),
                ("owner", owner),
                ("node", node_name.to_string()),
                ("scheduled", (!node_name.is_empty()).to_string()),
                ("nodepool", nodepool.clone()),
                ("zone", node_label(labels::ZONE)),
                ("arch", node_label(labels::ARCH)),
                ("capacity_type", node_label(labels::CAPACITY_TYPE)),
                ("instance_type", node_label(labels::INSTANCE_TYPE)),
                ("phase", phase),
                (
                    "ready",
                    (pod.ready && pod.phase == karpenter_core::model::PodPhase::Running)
                        .to_string(),
                ),
                ("managed", (!nodepool.is_empty()).to_string()),
            ];
            self.pods_state.get_or_create(&labels).set(1.0);
            if !node_name.is_empty() && !pod.is_terminal() {
                requests
                    .entry(node_name)
                    .or_default()
                    .add_assign(&pod.requests);
                if pod.is_daemonset_pod() {
                    daemon_requests
                        .entry(node_name)
                        .or_default()
                        .add_assign(&pod.requests);
                }
            }
        }
        let mut cluster_allocatable = ResourceList::new();
        let mut cluster_requested = ResourceList::new();
        for node in nodes {
            let name = node.metadata.name.as_deref().unwrap_or_default();
            let base = self.node_labels(node);
            let with = |resource: &str| {
                let mut l = base.clone();
                l.push(("resource_type".to_string(), resource_label(resource)));
                l
            };
            let parse = |list: Option<
                &BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>,
            >|
             -> ResourceList {
                list.into_iter()
                    .flatten()
                    .filter_map(|(k, q)| Some((k.clone(), Quantity::parse(&q.0).ok()?)))
                    .collect()
            };
            let status = node.status.as_ref();
            let allocatable = parse(status.and_then(|s| s.allocatable.as_ref()));
            let capacity = parse(status.and_then(|s| s.capacity.as_ref()));
            for (resource, q) in allocatable.iter() {
                self.nodes_allocatable
                    .get_or_create(&with(resource))
                    .set(quantity_value(q));
            }
            for (resource, q) in capacity.iter() {
                let overhead = q.as_f64() - allocatable.get(resource).map_or(0.0, |a| a.as_f64());
                self.nodes_system_overhead
                    .get_or_create(&with(resource))
                    .set(overhead);
            }
            let empty = ResourceList::new();
            let pod_requests = requests.get(name).unwrap_or(&empty);
            for (resource, q) in pod_requests.iter() {
                self.nodes_total_pod_requests
                    .get_or_create(&with(resource))
                    .set(quantity_value(q));
            }
            for (resource, q) in daemon_requests.get(name).unwrap_or(&empty).iter() {
                self.nodes_total_daemon_requests
                    .get_or_create(&with(resource))
                    .set(quantity_value(q));
            }
            if let Some(created) = &node.metadata.creation_timestamp {
                let age = now.duration_since(created.0).as_secs_f64().max(0.0);
                self.nodes_current_lifetime_seconds
                    .get_or_create(&base)
                    .set(age);
            }
            cluster_allocatable.add_assign(&allocatable);
            cluster_requested.add_assign(pod_requests);
        }
        for (resource, allocatable) in cluster_allocatable.iter() {
            let total = allocatable.as_f64();
            if total == 0.0 {
                continue;
            }
            let used = cluster_requested.get(resource).map_or(0.0, |q| q.as_f64());
            self.cluster_utilization_percent
                .get_or_create(&vec![("resource_type", resource_label(resource))])
                .set(100.0 * used / total);
        }
        for pool in nodepools {
            let name = pool.metadata.name.clone().unwrap_or_default();
            for (resource, q) in pool.spec.limits.iter().flat_map(|l| l.iter()) {
                let l = vec![
                    ("nodepool", name.clone()),
                    ("resource_type", resource_label(resource)),
                ];
                self.nodepools_limit.get_or_create(&l).set(q.as_f64());
            }
            let usage = pool.status.as_ref().map(|s| &s.resources);
            for (resource, q) in usage.into_iter().flat_map(|r| r.iter()) {
                let l = vec![
                    ("nodepool", name.clone()),
                    ("resource_type", resource_label(resource)),
                ];
                self.nodepools_usage.get_or_create(&l).set(q.as_f64());
            }
        }
        for (reason, n) in eligible {
            self.voluntary_disruption_eligible_nodes
                .get_or_create(&vec![("reason", reason.to_string())])
                .set(*n as f64);
        }
        self.cluster_state_node_count.set(nodes.len() as f64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operator_metrics_are_exported_under_upstream_names() {
        let m = Metrics::default();
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

    fn model_pod(name: &str, node: Option<&str>, cpu_milli: i64) -> karpenter_core::model::Pod {
        let mut p = karpenter_core::model::Pod::new("default", name);
        p.node_name = node.map(str::to_string);
        p.phase = karpenter_core::model::PodPhase::Running;
        p.requests.insert("cpu", Quantity::from_milli(cpu_milli));
        p
    }

    fn line<'a>(text: &'a str, prefix: &str, contains: &[&str]) -> Option<&'a str> {
        text.lines()
            .find(|l| l.starts_with(prefix) && contains.iter().all(|c| l.contains(c)))
    }

    #[test]
    fn cluster_gauges_follow_the_view_with_upstreams_labels() {
        let m = Metrics::new(&karpenter_core::labels::LabelPolicy::core());
        let node: Node = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "n1", "creationTimestamp": "2026-01-01T00:00:00Z",
                         "labels": {"karpenter.sh/nodepool": "default",
                                    "topology.kubernetes.io/zone": "zone-a",
                                    "karpenter.sh/capacity-type": "spot"}},
            "status": {"capacity": {"cpu": "4", "memory": "16Gi", "ephemeral-storage": "20Gi"},
                       "allocatable": {"cpu": "3500m", "memory": "15Gi", "ephemeral-storage": "20Gi"}}
        }))
        .unwrap();
        let app = model_pod("p1", Some("n1"), 1500);
        let mut daemon = model_pod("ds-1", Some("n1"), 250);
        daemon.owner = Some(
            karpenter_core::model::OwnerReference::new("apps/v1", "DaemonSet", "agent")
                .with_controller(true),
        );
        let pending = {
            let mut p = model_pod("waiting", None, 100);
            p.phase = karpenter_core::model::PodPhase::Pending;
            p
        };
        let pool: KubeNodePool = serde_json::from_value(serde_json::json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodePool",
            "metadata": {"name": "default"},
            "spec": {"template": {"spec": {
                         "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                         "requirements": []}},
                     "limits": {"cpu": "100"}},
            "status": {"resources": {"cpu": "4", "memory": "16Gi", "nodes": "1"}}
        }))
        .unwrap();
        let eligible = BTreeMap::from([("empty", 2usize), ("underutilized", 5)]);
        let now: jiff::Timestamp = "2026-01-01T01:00:00Z".parse().unwrap();
        m.refresh(
            [&app, &daemon, &pending],
            &[&node],
            &[&pool],
            &eligible,
            now,
        );
        let text = m.encode();
        // Node metrics carry every well-known label, node_name, phase and managed.
        let requests = line(
            &text,
            "karpenter_nodes_total_pod_requests{",
            &["resource_type=\"cpu\""],
        )
        .unwrap_or_else(|| panic!("{text}"));
        for label in [
            "node_name=\"n1\"",
            "nodepool=\"default\"",
            "zone=\"zone-a\"",
            "capacity_type=\"spot\"",
            "instance_type=\"\"",
            "region=\"\"",
            "managed=\"true\"",
            "phase=\"\"",
        ] {
            assert!(requests.contains(label), "{label} in {requests}");
        }
        assert!(
            requests.ends_with(" 1.75"),
            "app and daemon pods: {requests}"
        );
        let daemon_requests = line(
            &text,
            "karpenter_nodes_total_daemon_requests{",
            &["resource_type=\"cpu\""],
        )
        .unwrap_or_else(|| panic!("{text}"));
        assert!(daemon_requests.ends_with(" 0.25"), "{daemon_requests}");
        let overhead = line(
            &text,
            "karpenter_nodes_system_overhead{",
            &["resource_type=\"cpu\""],
        )
        .unwrap_or_else(|| panic!("{text}"));
        assert!(overhead.ends_with(" 0.5"), "{overhead}");
        assert!(
            line(
                &text,
                "karpenter_nodes_allocatable{",
                &["resource_type=\"ephemeral_storage\""]
            )
            .is_some(),
            "resource names as upstream's: {text}"
        );
        let lifetime = line(&text, "karpenter_nodes_current_lifetime_seconds{", &[]).unwrap();
        assert!(lifetime.ends_with(" 3600.0"), "{lifetime}");
        let utilization = line(
            &text,
            "karpenter_cluster_utilization_percent{",
            &["resource_type=\"cpu\""],
        )
        .unwrap();
        assert!(
            utilization.ends_with(" 50.0"),
            "1.75 of 3.5 cores: {utilization}"
        );
        // NodePool usage and limits.
        let usage = line(
            &text,
            "karpenter_nodepools_usage{",
            &["nodepool=\"default\"", "resource_type=\"cpu\""],
        )
        .unwrap_or_else(|| panic!("{text}"));
        assert!(usage.ends_with(" 4.0"), "{usage}");
        assert!(
            line(
                &text,
                "karpenter_nodepools_limit{",
                &["resource_type=\"cpu\""]
            )
            .is_some_and(|l| l.ends_with(" 100.0"))
        );
        // Disruption eligibility by reason.
        assert!(
            text.contains("karpenter_voluntary_disruption_eligible_nodes{reason=\"empty\"} 2"),
            "{text}"
        );
        assert!(
            text.contains(
                "karpenter_voluntary_disruption_eligible_nodes{reason=\"underutilized\"} 5"
            ),
            "{text}"
        );
        // Pod state: scheduled, ready and managed, the owner as upstream's self link.
        let ds = line(&text, "karpenter_pods_state{", &["name=\"ds-1\""]).unwrap();
        assert!(
            ds.contains("owner=\"/apis/apps/v1/namespaces/default/daemonsets/agent\""),
            "{ds}"
        );
        assert!(
            ds.contains("scheduled=\"true\"")
                && ds.contains("ready=\"true\"")
                && ds.contains("managed=\"true\""),
            "{ds}"
        );
        let waiting = line(&text, "karpenter_pods_state{", &["name=\"waiting\""]).unwrap();
        assert!(
            waiting.contains("scheduled=\"false\"")
                && waiting.contains("ready=\"false\"")
                && waiting.contains("managed=\"false\""),
            "{waiting}"
        );
        assert!(
            text.contains("karpenter_cluster_state_node_count 1"),
            "{text}"
        );
        assert!(text.contains("karpenter_build_info{version="), "{text}");
        m.refresh([], &[], &[], &BTreeMap::new(), now);
        let text = m.encode();
        assert!(
            !text.contains("karpenter_pods_state{"),
            "gauges of gone pods are dropped"
        );
        assert!(
            !text.contains("karpenter_nodes_total_daemon_requests{"),
            "{text}"
        );
    }
}

//! Prometheus metrics with upstream Karpenter's names and labels (namespace `karpenter_`), and
//! controller-runtime's reconcile and work-queue families (`controller_runtime_*`,
//! `workqueue_*`) for the operator's loops.
//!
//! Counters, histograms and the summary are updated as the operator loops ask
//! (`Action::Metric`, by upstream's full metric name); the reconcile metrics as the loops tell
//! a [`ReconcileObserver`]; the gauges that describe the cluster (`karpenter_pods_state`,
//! `karpenter_nodes_total_pod_requests`, `karpenter_nodes_allocatable`,
//! `karpenter_nodepools_limit`, `karpenter_cluster_state_node_count`, ...) are recomputed from
//! the watch caches and the operator's view by [`Metrics::refresh`] and
//! [`Metrics::refresh_operator`] before each scrape, so they never go stale.

use std::collections::BTreeMap;
use std::sync::atomic::AtomicU64;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Node;
use karpenter_core::crd::KubeNodePool;
use karpenter_core::labels;
use karpenter_core::lifecycle::{Metric, MetricOp};
use karpenter_core::operator::{LoopObserver, Operator, ReconcileResult};
use karpenter_core::resources::{Quantity, ResourceList};
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

pub mod guide;
pub mod names;
pub mod offerings;
mod summary;
pub use summary::Summary;

/// Label values as ordered pairs (upstream's label names).
pub type Labels = Vec<(&'static str, String)>;

type GaugeF = Gauge<f64, AtomicU64>;

/// Label sets of the counters and histograms the operator updates (label names are data).
pub type DynLabels = Vec<(String, String)>;

type CounterF = Counter<f64, AtomicU64>;

/// The counters the operator loops update through `Action::Metric`, by full name, with help.
pub const COUNTERS: &[(&str, &str)] = &[
    (
        "karpenter_pods_unreadable_total",
        "Number of bound pods the controller could not read; each protects its node from disruption (karpenter-rs).",
    ),
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
        "karpenter_interruption_deleted_messages_total",
        "Count of messages deleted from the SQS queue.",
    ),
    (
        "karpenter_interruption_message_errors_total",
        "Count of interruption-queue messages that were no interruption events, by error.",
    ),
    (
        CLOUDPROVIDER_ERRORS_TOTAL,
        "Total number of errors returned from CloudProvider calls.",
    ),
];

/// `karpenter_cloudprovider_errors_total` {controller, method, provider, error}.
pub const CLOUDPROVIDER_ERRORS_TOTAL: &str = "karpenter_cloudprovider_errors_total";

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
        "karpenter_pods_bound_duration_seconds",
        "The time from pod creation until the pod is bound.",
    ),
    (
        "karpenter_consolidation_score",
        "Consolidation score of a decision.",
    ),
];

/// The summaries the operator loops update through `Action::Metric` (no labels), with help.
pub const SUMMARIES: &[(&str, &str)] = &[(
    "karpenter_pods_startup_duration_seconds",
    "The time from pod creation until the pod is running.",
)];

/// Upstream's duration buckets (controller-runtime's, extended to 600 s).
pub const DURATION_BUCKETS: &[f64] = &[
    0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9,
    1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 15.0, 20.0,
    25.0, 30.0, 40.0, 50.0, 60.0, 120.0, 150.0, 300.0, 450.0, 600.0,
];

/// The histograms upstream buckets with its `DurationBuckets` ([`DURATION_BUCKETS`]).
const DURATION_BUCKET_HISTOGRAMS: &[&str] = &[
    "karpenter_pods_bound_duration_seconds",
    "karpenter_scheduler_scheduling_duration_seconds",
    "karpenter_voluntary_disruption_decision_evaluation_duration_seconds",
];

/// The quantiles upstream's summaries report.
pub const SUMMARY_QUANTILES: &[f64] = &[0.0, 0.5, 0.9, 0.99, 1.0];

/// How long an observation counts towards a summary's quantiles (Prometheus's default
/// `MaxAge`).
pub const SUMMARY_MAX_AGE: Duration = Duration::from_secs(600);

/// At most this many observations are kept for a summary's quantiles (the oldest go first).
pub const SUMMARY_MAX_SAMPLES: usize = 10_000;

/// Every metric the controller exports.
pub struct Metrics {
    registry: Registry,
    counters: BTreeMap<&'static str, Family<DynLabels, CounterF>>,
    histograms: BTreeMap<&'static str, Family<DynLabels, Histogram>>,
    summaries: BTreeMap<&'static str, (&'static str, Summary)>,
    /// Whether the per-object cluster gauges are computed (`DISABLE_CLUSTER_STATE_OBSERVABILITY`
    /// turns them off).
    cluster_state_observability: bool,
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
    /// `karpenter_nodes_total_pod_limits` {node labels, resource_type}: every pod bound to the
    /// node, DaemonSet pods included.
    pub nodes_total_pod_limits: Family<DynLabels, GaugeF>,
    /// `karpenter_nodes_total_daemon_limits` {node labels, resource_type}: the DaemonSet pods
    /// bound to the node.
    pub nodes_total_daemon_limits: Family<DynLabels, GaugeF>,
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
    /// `karpenter_nodepools_allowed_disruptions` {nodepool, reason}: what the budgets allow.
    pub nodepools_allowed_disruptions: Family<Labels, GaugeF>,
    /// `karpenter_nodepools_nodes_consuming_budgets` {nodepool, reason}: nodes not Ready or
    /// being deleted, which already use budget.
    pub nodepools_nodes_consuming_budgets: Family<Labels, GaugeF>,
    /// `karpenter_pods_unbound_time_seconds` {name, namespace}: pending pods not bound yet.
    pub pods_unbound_time_seconds: Family<Labels, GaugeF>,
    /// `karpenter_pods_unstarted_time_seconds` {name, namespace}: pods seen pending that are
    /// not ready yet.
    pub pods_unstarted_time_seconds: Family<Labels, GaugeF>,
    /// `controller_runtime_reconcile_total` {controller, result}.
    pub reconcile_total: Family<Labels, Counter>,
    /// `controller_runtime_reconcile_errors_total` {controller}.
    pub reconcile_errors_total: Family<Labels, Counter>,
    /// `controller_runtime_reconcile_time_seconds` {controller}.
    pub reconcile_time_seconds: Family<Labels, Histogram>,
    /// `workqueue_depth` {controller, name}.
    pub workqueue_depth: Family<Labels, GaugeF>,
    /// `workqueue_adds_total` {controller, name}.
    pub workqueue_adds_total: Family<Labels, Counter>,
    /// `karpenter_cluster_state_node_count`.
    pub cluster_state_node_count: GaugeF,
    /// `karpenter_cluster_state_synced`: 1 once every watch cache has its first list.
    pub cluster_state_synced: GaugeF,
    /// `karpenter_build_info` {version}: 1.
    pub build_info: Family<Labels, GaugeF>,
    /// The instance-type offering gauges and `karpenter_nodepools_cost_total`.
    pub offerings: offerings::OfferingMetrics,
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

fn duration_histogram() -> Histogram {
    Histogram::new(DURATION_BUCKETS.iter().copied())
}

impl Metrics {
    /// A registry with every family registered; the node metrics are labelled by `policy`'s
    /// well-known labels (core's and the provider's), as upstream's are.
    pub fn new(policy: &karpenter_core::labels::LabelPolicy) -> Metrics {
        let mut root = Registry::default();
        let registry = root.sub_registry_with_prefix("karpenter");
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
            let buckets = if DURATION_BUCKET_HISTOGRAMS.contains(name) {
                duration_histogram as fn() -> Histogram
            } else {
                histogram as fn() -> Histogram
            };
            let family = Family::<DynLabels, Histogram>::new_with_constructor(buckets);
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
        let summaries = SUMMARIES
            .iter()
            .map(|(name, help)| (*name, (*help, Summary::default())))
            .collect();
        let m = Metrics {
            registry: Registry::default(),
            counters,
            histograms,
            summaries,
            cluster_state_observability: true,
            node_label_names,
            cloudprovider_duration: Family::new_with_constructor(histogram),
            pods_state: Family::default(),
            nodes_total_pod_requests: Family::default(),
            nodes_total_daemon_requests: Family::default(),
            nodes_total_pod_limits: Family::default(),
            nodes_total_daemon_limits: Family::default(),
            nodes_allocatable: Family::default(),
            nodes_system_overhead: Family::default(),
            nodes_current_lifetime_seconds: Family::default(),
            cluster_utilization_percent: Family::default(),
            nodepools_limit: Family::default(),
            nodepools_usage: Family::default(),
            voluntary_disruption_eligible_nodes: Family::default(),
            nodepools_allowed_disruptions: Family::default(),
            nodepools_nodes_consuming_budgets: Family::default(),
            pods_unbound_time_seconds: Family::default(),
            pods_unstarted_time_seconds: Family::default(),
            reconcile_total: Family::default(),
            reconcile_errors_total: Family::default(),
            reconcile_time_seconds: Family::new_with_constructor(duration_histogram),
            workqueue_depth: Family::default(),
            workqueue_adds_total: Family::default(),
            cluster_state_node_count: GaugeF::default(),
            cluster_state_synced: GaugeF::default(),
            build_info: Family::default(),
            offerings: offerings::OfferingMetrics::default(),
        };
        m.offerings.register(registry);
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
            "nodes_total_pod_limits",
            "Node total pod limits are the resources specified by pod limits, including the DaemonSet pods.",
            m.nodes_total_pod_limits.clone(),
        );
        registry.register(
            "nodes_total_daemon_limits",
            "Node total daemon limits are the resources specified by DaemonSet pod limits.",
            m.nodes_total_daemon_limits.clone(),
        );
        registry.register(
            "nodepools_allowed_disruptions",
            "The number of nodes for a given NodePool that can be concurrently disrupting at a point in time. Labeled by NodePool. Note that allowed disruptions can change very rapidly, as new nodes may be created and others may be deleted at any point.",
            m.nodepools_allowed_disruptions.clone(),
        );
        registry.register(
            "nodepools_nodes_consuming_budgets",
            "The number of nodes consuming the budget of a nodepool at a point in time. Labeled by NodePool.",
            m.nodepools_nodes_consuming_budgets.clone(),
        );
        registry.register(
            "pods_unbound_time_seconds",
            "The time from pod creation until the pod is bound.",
            m.pods_unbound_time_seconds.clone(),
        );
        registry.register(
            "pods_unstarted_time_seconds",
            "The time from pod creation until the pod is running.",
            m.pods_unstarted_time_seconds.clone(),
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
        // controller-runtime's families, unprefixed.
        root.register(
            "controller_runtime_reconcile",
            "Total number of reconciliations per controller",
            m.reconcile_total.clone(),
        );
        root.register(
            "controller_runtime_reconcile_errors",
            "Total number of reconciliation errors per controller",
            m.reconcile_errors_total.clone(),
        );
        root.register(
            "controller_runtime_reconcile_time_seconds",
            "Length of time per reconciliation per controller",
            m.reconcile_time_seconds.clone(),
        );
        root.register(
            "workqueue_depth",
            "Current depth of workqueue",
            m.workqueue_depth.clone(),
        );
        root.register(
            "workqueue_adds",
            "Total number of adds handled by workqueue",
            m.workqueue_adds_total.clone(),
        );
        Metrics {
            registry: root,
            ..m
        }
    }

    /// Leaves out the per-object cluster gauges (pods, nodes, NodePools; upstream's
    /// `DISABLE_CLUSTER_STATE_OBSERVABILITY`) when `on` is false.
    pub fn with_cluster_state_observability(mut self, on: bool) -> Metrics {
        self.cluster_state_observability = on;
        self
    }

    /// Counts a reconcile of `controller` that ended with `result` and took `elapsed` (when
    /// measured).
    pub fn reconciled(
        &self,
        controller: &'static str,
        result: ReconcileResult,
        elapsed: Option<Duration>,
    ) {
        self.reconcile_total
            .get_or_create(&vec![
                ("controller", controller.to_string()),
                ("result", result.as_str().to_string()),
            ])
            .inc();
        let c = vec![("controller", controller.to_string())];
        if result == ReconcileResult::Error {
            self.reconcile_errors_total.get_or_create(&c).inc();
        }
        if let Some(d) = elapsed {
            self.reconcile_time_seconds
                .get_or_create(&c)
                .observe(d.as_secs_f64());
        }
    }

    /// Records a cloud provider call of `controller` (`karpenter_cloudprovider_duration_seconds`)
    /// and, when it failed with `error` (upstream's error name, or empty),
    /// `karpenter_cloudprovider_errors_total`.
    pub fn cloud_call(
        &self,
        controller: &str,
        method: &str,
        provider: &str,
        elapsed: Duration,
        error: Option<&str>,
    ) {
        let mut labels = vec![
            ("controller", controller.to_string()),
            ("method", method.to_string()),
            ("provider", provider.to_string()),
        ];
        self.cloudprovider_duration
            .get_or_create(&labels)
            .observe(elapsed.as_secs_f64());
        if let Some(error) = error {
            labels.push(("error", error.to_string()));
            self.apply(&Metric::add(CLOUDPROVIDER_ERRORS_TOTAL, 1.0, labels));
        }
    }

    /// Sets the gauges read from the operator itself at `now`: the disruption budgets of the
    /// last pass, the reconcile queues, and (unless cluster state observability is off) the
    /// pod latency gauges of the pods that wait to be bound or to start.
    pub fn refresh_operator(&self, op: &Operator, now: jiff::Timestamp) {
        self.offerings.refresh(op, self.cluster_state_observability);
        self.nodepools_allowed_disruptions.clear();
        self.nodepools_nodes_consuming_budgets.clear();
        for ((pool, reason), budget) in op.disruption_budgets() {
            let l = vec![("nodepool", pool.clone()), ("reason", reason.to_string())];
            // Unbounded reports upstream's `math.MaxInt32`.
            self.nodepools_allowed_disruptions
                .get_or_create(&l)
                .set(budget.allowed.min(i32::MAX as usize) as f64);
            self.nodepools_nodes_consuming_budgets
                .get_or_create(&l)
                .set(budget.disrupting as f64);
        }
        for q in op.work_queues() {
            let l = vec![
                ("controller", q.controller.to_string()),
                ("name", q.controller.to_string()),
            ];
            self.workqueue_depth.get_or_create(&l).set(q.depth as f64);
            let adds = self.workqueue_adds_total.get_or_create(&l);
            adds.inc_by(q.adds.saturating_sub(adds.get()));
        }
        self.pods_unbound_time_seconds.clear();
        self.pods_unstarted_time_seconds.clear();
        if !self.cluster_state_observability {
            return;
        }
        let since = |p: &karpenter_core::model::Pod| {
            now.duration_since(p.creation_timestamp)
                .as_secs_f64()
                .max(0.0)
        };
        let key = |p: &karpenter_core::model::Pod| {
            vec![("name", p.name.clone()), ("namespace", p.namespace.clone())]
        };
        for pod in op.view().pods().values() {
            if pod.phase == karpenter_core::model::PodPhase::Pending
                && pod.scheduled_at.is_none()
                && !pod.is_terminating()
            {
                self.pods_unbound_time_seconds
                    .get_or_create(&key(pod))
                    .set(since(pod));
            }
        }
        for pod in op.unstarted_pods() {
            self.pods_unstarted_time_seconds
                .get_or_create(&key(pod))
                .set(since(pod));
        }
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
            MetricOp::Observe(v) => {
                if let Some(f) = self.histograms.get(metric.name.as_str()) {
                    f.get_or_create(&labels).observe(v);
                    true
                } else if let Some((_, s)) = self.summaries.get(metric.name.as_str()) {
                    s.observe_at(v, Instant::now());
                    true
                } else {
                    false
                }
            }
        }
    }

    /// The Prometheus text exposition of every metric.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = encode(&mut out, &self.registry);
        // The summaries go before the closing `# EOF`.
        let eof = out.rfind("# EOF").unwrap_or(out.len());
        let now = Instant::now();
        let summaries: String = self
            .summaries
            .iter()
            .map(|(name, (help, s))| s.encode_at(name, help, now))
            .collect();
        out.insert_str(eof, &summaries);
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
        self.nodes_total_pod_limits.clear();
        self.nodes_total_daemon_limits.clear();
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
        // Per node: requests, limits, DaemonSet requests, DaemonSet limits (with `pods`, the
        // number of pods, as upstream's `RequestsForPods` / `LimitsForPods` count it).
        let mut per_node: BTreeMap<&str, [ResourceList; 4]> = BTreeMap::new();
        let observe = self.cluster_state_observability;
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
            if observe {
                self.pods_state.get_or_create(&labels).set(1.0);
            }
            if !node_name.is_empty() && !pod.is_terminal() {
                let one = ResourceList::from_iter([("pods", Quantity::from_units(1))]);
                let lists = per_node.entry(node_name).or_default();
                lists[0].add_assign(&pod.requests);
                lists[0].add_assign(&one);
                lists[1].add_assign(&pod.limits);
                lists[1].add_assign(&one);
                if pod.is_daemonset_pod() {
                    lists[2].add_assign(&pod.requests);
                    lists[2].add_assign(&one);
                    lists[3].add_assign(&pod.limits);
                    lists[3].add_assign(&one);
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
            let empty = Default::default();
            let lists: &[ResourceList; 4] = per_node.get(name).unwrap_or(&empty);
            cluster_allocatable.add_assign(&allocatable);
            cluster_requested.add_assign(&lists[0]);
            if !observe {
                continue;
            }
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
            let families = [
                &self.nodes_total_pod_requests,
                &self.nodes_total_pod_limits,
                &self.nodes_total_daemon_requests,
                &self.nodes_total_daemon_limits,
            ];
            for (family, list) in families.into_iter().zip(lists) {
                for (resource, q) in list.iter() {
                    family.get_or_create(&with(resource)).set(quantity_value(q));
                }
            }
            if let Some(created) = &node.metadata.creation_timestamp {
                let age = now.duration_since(created.0).as_secs_f64().max(0.0);
                self.nodes_current_lifetime_seconds
                    .get_or_create(&base)
                    .set(age);
            }
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
        for pool in nodepools.iter().filter(|_| observe) {
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

/// `karpenter_scheduler_scheduling_duration_seconds` {controller}: the provisioner's
/// scheduling simulations (upstream's name since v1.0; `karpenter_provisioner_scheduling_duration_seconds`
/// before).
pub const SCHEDULING_DURATION_SECONDS: &str = "karpenter_scheduler_scheduling_duration_seconds";

/// Counts and times the operator's reconciles into [`Metrics`] (controller-runtime's
/// `controller_runtime_reconcile_*`): hand it to `Operator::handle_observed`.
pub struct ReconcileObserver<'a> {
    metrics: &'a Metrics,
    started: Option<(&'static str, Instant)>,
}

impl<'a> ReconcileObserver<'a> {
    /// An observer recording into `metrics`.
    pub fn new(metrics: &'a Metrics) -> ReconcileObserver<'a> {
        ReconcileObserver {
            metrics,
            started: None,
        }
    }
}

impl LoopObserver for ReconcileObserver<'_> {
    fn started(&mut self, controller: &'static str) {
        self.started = Some((controller, Instant::now()));
    }

    fn finished(&mut self, controller: &'static str, result: ReconcileResult) {
        let elapsed = match self.started.take() {
            Some((c, at)) if c == controller => Some(at.elapsed()),
            _ => None,
        };
        // A provisioner reconcile is a scheduling simulation of the batch (upstream observes
        // `Scheduler.Solve` labelled by the calling controller).
        if let (karpenter_core::operator::controllers::PROVISIONER, Some(d)) = (controller, elapsed)
        {
            self.metrics.apply(&Metric::observe(
                SCHEDULING_DURATION_SECONDS,
                d.as_secs_f64(),
                [("controller", controller.to_string())],
            ));
        }
        self.metrics.reconciled(controller, result, elapsed);
    }

    fn failed(&mut self, controller: &'static str) {
        self.metrics
            .reconciled(controller, ReconcileResult::Error, None);
    }
}

#[cfg(test)]
mod tests;

/// The `error` label of `karpenter_cloudprovider_errors_total` for a failed call (upstream's
/// names of the well-known errors, empty for the others); `None` when the call succeeded.
pub fn cloud_error(response: &karpenter_core::operator::CloudResponse) -> Option<&'static str> {
    let error = match response {
        karpenter_core::operator::CloudResponse::Create(r) => r.as_ref().err(),
        karpenter_core::operator::CloudResponse::Delete(r) => r.as_ref().err(),
        karpenter_core::operator::CloudResponse::Get(r) => r.as_ref().err(),
        karpenter_core::operator::CloudResponse::List(r) => r.as_ref().err(),
        karpenter_core::operator::CloudResponse::InstanceTypes(r) => r.as_ref().err(),
        karpenter_core::operator::CloudResponse::IsDrifted(r) => r.as_ref().err(),
    }?;
    Some(match error {
        karpenter_core::cloud::CloudProviderError::NodeClaimNotFound { .. } => {
            "NodeClaimNotFoundError"
        }
        karpenter_core::cloud::CloudProviderError::InsufficientCapacity { .. } => {
            "InsufficientCapacityError"
        }
        karpenter_core::cloud::CloudProviderError::NodeClassNotReady { .. } => {
            "NodeClassNotReadyError"
        }
        _ => "",
    })
}

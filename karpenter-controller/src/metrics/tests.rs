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
    let mut app = model_pod("p1", Some("n1"), 1500);
    app.limits.insert("cpu", Quantity::from_milli(2000));
    app.limits.insert("memory", Quantity::from_units(1 << 30));
    let mut daemon = model_pod("ds-1", Some("n1"), 250);
    daemon.limits.insert("cpu", Quantity::from_milli(500));
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
    // Limits, as upstream's LimitsForPods: summed per node, DaemonSet pods apart.
    let limit = |family: &str, resource: &str| {
        line(&text, family, &[&format!("resource_type=\"{resource}\"")])
            .unwrap_or_else(|| panic!("{family} {resource}: {text}"))
            .rsplit(' ')
            .next()
            .unwrap_or_default()
            .to_string()
    };
    assert_eq!(limit("karpenter_nodes_total_pod_limits{", "cpu"), "2.5");
    assert_eq!(
        limit("karpenter_nodes_total_pod_limits{", "memory"),
        "1073741824.0"
    );
    assert_eq!(limit("karpenter_nodes_total_daemon_limits{", "cpu"), "0.5");
    // `pods` counts the pods bound to the node, as upstream's requests and limits do.
    assert_eq!(limit("karpenter_nodes_total_pod_requests{", "pods"), "2.0");
    assert_eq!(limit("karpenter_nodes_total_pod_limits{", "pods"), "2.0");
    assert_eq!(
        limit("karpenter_nodes_total_daemon_requests{", "pods"),
        "1.0"
    );
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
        text.contains("karpenter_voluntary_disruption_eligible_nodes{reason=\"underutilized\"} 5"),
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
    assert!(
        !text.contains("karpenter_nodes_total_pod_limits{"),
        "{text}"
    );

    // DISABLE_CLUSTER_STATE_OBSERVABILITY: no per-object gauges; the cluster counts stay.
    let off = Metrics::new(&karpenter_core::labels::LabelPolicy::core())
        .with_cluster_state_observability(false);
    off.refresh([&app, &daemon], &[&node], &[&pool], &eligible, now);
    let text = off.encode();
    for family in [
        "karpenter_pods_state{",
        "karpenter_nodes_total_pod_requests{",
        "karpenter_nodes_allocatable{",
        "karpenter_nodepools_usage{",
    ] {
        assert!(!text.contains(family), "{family}: {text}");
    }
    assert!(
        text.contains("karpenter_cluster_state_node_count 1"),
        "{text}"
    );
    assert!(
        line(&text, "karpenter_cluster_utilization_percent{", &["cpu"]).is_some(),
        "{text}"
    );
}

fn nodepool(budget_nodes: &str) -> karpenter_core::api::NodePool {
    let pool: KubeNodePool = serde_json::from_value(serde_json::json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool",
        "metadata": {"name": "default"},
        "spec": {"template": {"spec": {
                     "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                     "requirements": []}},
                 "disruption": {"budgets": [{"nodes": budget_nodes}]}}
    }))
    .unwrap();
    pool.into_nodepool().unwrap()
}

fn value(text: &str, prefix: &str, contains: &[&str]) -> String {
    line(text, prefix, contains)
        .unwrap_or_else(|| panic!("{prefix} {contains:?}: {text}"))
        .rsplit(' ')
        .next()
        .unwrap_or_default()
        .to_string()
}

/// The gauges read from the operator: disruption budgets of the last pass, the reconcile
/// queues, and the latency gauges of pods waiting to be bound or to start.
#[test]
fn operator_gauges_budgets_queues_and_waiting_pods() {
    use karpenter_core::operator::{Input, OperatorConfig};
    let m = Metrics::default();
    let t0: jiff::Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
    let mut op = Operator::new(OperatorConfig::default());
    op.handle(Input::NodePoolApplied(Box::new(nodepool("3"))), t0);
    let mut waiting = karpenter_core::model::Pod::new("default", "waiting");
    waiting.creation_timestamp = t0;
    op.handle(Input::PodApplied(Box::new(waiting)), t0);
    op.handle(Input::Synced, t0);
    let now = t0 + jiff::SignedDuration::from_secs(42);
    m.refresh_operator(&op, now);
    let text = m.encode();
    for reason in ["Empty", "Drifted", "Underutilized"] {
        assert_eq!(
            value(
                &text,
                "karpenter_nodepools_allowed_disruptions{",
                &["nodepool=\"default\"", &format!("reason=\"{reason}\"")]
            ),
            "3.0"
        );
        assert_eq!(
            value(
                &text,
                "karpenter_nodepools_nodes_consuming_budgets{",
                &[&format!("reason=\"{reason}\"")]
            ),
            "0.0"
        );
    }
    assert_eq!(
        value(
            &text,
            "karpenter_pods_unbound_time_seconds{",
            &["name=\"waiting\"", "namespace=\"default\""]
        ),
        "42.0"
    );
    assert_eq!(
        value(
            &text,
            "karpenter_pods_unstarted_time_seconds{",
            &["waiting"]
        ),
        "42.0"
    );
    assert_eq!(
        value(
            &text,
            "workqueue_adds_total{",
            &[
                "controller=\"nodepool.readiness\"",
                "name=\"nodepool.readiness\""
            ]
        ),
        "1"
    );
    assert_eq!(
        value(
            &text,
            "workqueue_depth{",
            &["controller=\"nodepool.readiness\""]
        ),
        "0.0"
    );
    assert!(text.contains("# TYPE workqueue_adds counter"), "{text}");
    // A reason no budget limits reports upstream's unbounded value (Go's MaxInt32).
    let mut empty_only = nodepool("3");
    empty_only.spec.disruption.budgets = Some(vec![{
        let mut b = karpenter_core::api::Budget::nodes("1");
        b.reasons = Some(vec![karpenter_core::api::DisruptionReason::Empty]);
        b
    }]);
    let mut other = Operator::new(OperatorConfig::default());
    other.handle(Input::NodePoolApplied(Box::new(empty_only)), t0);
    other.handle(Input::Synced, t0);
    let unbounded = Metrics::default();
    unbounded.refresh_operator(&other, now);
    let text2 = unbounded.encode();
    assert_eq!(
        value(
            &text2,
            "karpenter_nodepools_allowed_disruptions{",
            &["Empty"]
        ),
        "1.0"
    );
    assert_eq!(
        value(
            &text2,
            "karpenter_nodepools_allowed_disruptions{",
            &["Drifted"]
        ),
        "2147483647.0"
    );
    // A second refresh does not count the adds twice.
    m.refresh_operator(&op, now);
    assert_eq!(
        value(
            &m.encode(),
            "workqueue_adds_total{",
            &["nodepool.readiness"]
        ),
        "1"
    );
    // The pod bound and started: its gauges go.
    let mut running = karpenter_core::model::Pod::new("default", "waiting");
    running.creation_timestamp = t0;
    running.phase = karpenter_core::model::PodPhase::Running;
    running.node_name = Some("n1".into());
    running.scheduled_at = Some(t0 + jiff::SignedDuration::from_secs(3));
    running.ready_at = Some(t0 + jiff::SignedDuration::from_secs(9));
    for action in op.handle(Input::PodApplied(Box::new(running)), now) {
        if let karpenter_core::operator::Action::Metric(metric) = action {
            m.apply(&metric);
        }
    }
    m.refresh_operator(&op, now);
    let text = m.encode();
    assert!(
        !text.contains("karpenter_pods_unbound_time_seconds{"),
        "{text}"
    );
    assert!(
        !text.contains("karpenter_pods_unstarted_time_seconds{"),
        "{text}"
    );
    // ... and its latencies are observed: bound (a histogram), startup (a summary).
    assert_eq!(
        value(&text, "karpenter_pods_bound_duration_seconds_sum", &[]),
        "3.0"
    );
    assert_eq!(
        value(&text, "karpenter_pods_startup_duration_seconds_count", &[]),
        "1"
    );
}

/// The startup summary reports upstream's quantiles over recent observations, `_sum` and
/// `_count`, inside the exposition (before `# EOF`).
#[test]
fn the_startup_summary_reports_quantiles_sum_and_count() {
    let m = Metrics::default();
    let name = "karpenter_pods_startup_duration_seconds";
    let text = m.encode();
    assert!(
        text.contains(&format!("{name}{{quantile=\"0.5\"}} NaN")),
        "{text}"
    );
    for v in [4.0, 1.0, 3.0, 2.0, 10.0] {
        assert!(m.apply(&Metric::observe(name, v, [])));
    }
    let text = m.encode();
    assert!(text.contains(&format!("# TYPE {name} summary")), "{text}");
    for (q, v) in [("0", "1.0"), ("0.5", "3.0"), ("0.9", "10.0"), ("1", "10.0")] {
        assert!(
            text.contains(&format!("{name}{{quantile=\"{q}\"}} {v}")),
            "{q}: {text}"
        );
    }
    assert!(text.contains(&format!("{name}_sum 20.0")), "{text}");
    assert!(text.contains(&format!("{name}_count 5")), "{text}");
    assert!(text.trim_end().ends_with("# EOF"), "{text}");
    // Old observations leave the quantiles, not the sum and count.
    let s = Summary::default();
    let start = Instant::now();
    s.observe_at(100.0, start);
    s.observe_at(1.0, start + Duration::from_secs(500));
    let later = s.encode_at(name, "h", start + Duration::from_secs(700));
    assert!(later.contains("{quantile=\"1\"} 1.0"), "{later}");
    assert!(later.contains("_sum 101.0"), "{later}");
}

/// The operator's reconciles, through the observer, as controller-runtime's families.
#[test]
fn reconciles_are_counted_timed_and_failures_are_errors() {
    use karpenter_core::operator::{Input, OperatorConfig};
    let m = Metrics::default();
    let t0: jiff::Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
    let mut op = Operator::new(OperatorConfig::default());
    let mut observer = ReconcileObserver::new(&m);
    op.handle_observed(
        Input::NodePoolApplied(Box::new(nodepool("10%"))),
        t0,
        &mut observer,
    );
    op.handle_observed(Input::Synced, t0, &mut observer);
    op.handle_observed(
        Input::WriteFailed {
            kind: karpenter_core::lifecycle::ObjectKind::NodePool,
            name: "default".into(),
            message: "conflict".into(),
        },
        t0,
        &mut observer,
    );
    let text = m.encode();
    assert_eq!(
        value(
            &text,
            "controller_runtime_reconcile_total{",
            &["controller=\"disruption\"", "result=\"success\""]
        ),
        "1"
    );
    assert_eq!(
        value(
            &text,
            "controller_runtime_reconcile_total{",
            &["controller=\"nodepool.readiness\"", "result=\"error\""]
        ),
        "1"
    );
    assert_eq!(
        value(
            &text,
            "controller_runtime_reconcile_errors_total{",
            &["controller=\"nodepool.readiness\""]
        ),
        "1"
    );
    assert_eq!(
        value(
            &text,
            "controller_runtime_reconcile_time_seconds_count{",
            &["controller=\"disruption\""]
        ),
        "1"
    );
    assert!(
        text.contains("# TYPE controller_runtime_reconcile_time_seconds histogram"),
        "{text}"
    );
    assert!(
        !text.contains("karpenter_controller_runtime"),
        "unprefixed: {text}"
    );
}

mod scrape;

//! A scrape of the registry after a simulated scale-up and scale-down: every metric of the
//! guide table ([`guide::GUIDE_METRICS`]) has samples, under upstream's current name and
//! labels.

use super::super::*;
use super::line;
use crate::metrics::guide::{self, GUIDE_METRICS};
use jiff::SignedDuration;
use karpenter_core::model::{OwnerReference, Pod};
use karpenter_core::operator::{CloudCall, LoopObserver};
use karpenter_fake::sim::{Sim, SimConfig, node_pool};

fn app_pod(name: &str) -> Pod {
    let mut pod = Pod::new("default", name);
    pod.requests.insert("cpu", Quantity::from_milli(1500));
    pod.owner = Some(OwnerReference::new("apps/v1", "ReplicaSet", "app").with_controller(true));
    pod
}

/// The Node object the API server would hold for the simulator's node.
fn kube_node(n: &karpenter_core::lifecycle::Node) -> Node {
    let list = |l: &ResourceList| -> serde_json::Value {
        l.iter()
            .map(|(k, q)| (k.to_string(), serde_json::Value::String(q.to_string())))
            .collect::<serde_json::Map<_, _>>()
            .into()
    };
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": n.name, "labels": n.labels,
                     "creationTimestamp": n.creation_timestamp.to_string()},
        "spec": {"providerID": n.provider_id},
        "status": {"capacity": list(&n.capacity), "allocatable": list(&n.allocatable)}
    }))
    .unwrap()
}

/// The series names a family's samples carry (`_total`, `_bucket`, ...), found in `text`.
fn has_samples(text: &str, name: &str) -> bool {
    text.lines().any(|l| {
        !l.starts_with('#')
            && (l.starts_with(&format!("{name}{{"))
                || l.starts_with(&format!("{name}_bucket{{"))
                || l.starts_with(&format!("{name} ")))
    })
}

/// The scrape after a simulated scale-up to ten pods and down to two (plus one pod no
/// instance type fits, which stays pending, and a DaemonSet pod), with the shell's own observations: a failed cloud
/// call and a provisioner reconcile.
fn scenario_scrape() -> String {
    let mut sim = Sim::new(SimConfig::default());
    let mut pool = node_pool("default");
    pool.spec.limits = Some(ResourceList::from_iter([(
        "cpu",
        Quantity::from_units(1000),
    )]));
    sim.apply_node_pool(pool);
    for i in 0..10 {
        sim.add_pod(app_pod(&format!("app-{i}")));
    }
    sim.start();
    let bound = sim
        .run_until(SignedDuration::from_mins(5), |s| {
            s.pending_pods().is_empty()
        })
        .unwrap();
    assert!(bound, "pending: {:?}", sim.pending_pods());
    // Scale down to two pods: nodes are emptied or consolidated away.
    for i in 2..10 {
        sim.delete_pod(&format!("default/app-{i}"));
    }
    sim.run_for(SignedDuration::from_mins(15)).unwrap();
    // A DaemonSet pod on a remaining node, with limits.
    let node = sim.api().nodes.keys().next().expect("a node left").clone();
    let mut daemon = app_pod("agent-1");
    daemon.owner = Some(OwnerReference::new("apps/v1", "DaemonSet", "agent").with_controller(true));
    daemon.requests.insert("cpu", Quantity::from_milli(100));
    daemon.limits.insert("cpu", Quantity::from_milli(200));
    daemon.node_name = Some(node);
    sim.add_pod(daemon);
    let mut huge = app_pod("huge");
    huge.requests.insert("cpu", Quantity::from_units(100_000));
    sim.add_pod(huge);
    sim.run_for(SignedDuration::from_secs(30)).unwrap();

    let m = Metrics::default();
    for metric in &sim.metrics {
        m.apply(metric);
    }
    // The shell's part: a cloud call that failed (a lookup of an instance that is gone), and a
    // provisioner reconcile, which is a scheduling simulation.
    let provider = sim.provider().clone();
    let response = futures::executor::block_on(
        CloudCall::Get("fake://gone".into()).execute(provider.as_ref()),
    );
    let error = crate::metrics::cloud_error(&response);
    assert_eq!(error, Some("NodeClaimNotFoundError"));
    m.cloud_call(
        "nodeclaim.lifecycle",
        "Get",
        "fake",
        Duration::from_millis(3),
        error,
    );
    let mut observer = ReconcileObserver::new(&m);
    observer.started(karpenter_core::operator::controllers::PROVISIONER);
    observer.finished(
        karpenter_core::operator::controllers::PROVISIONER,
        karpenter_core::operator::ReconcileResult::Success,
    );
    // The scrape: gauges from the operator's view and the API objects.
    let op = sim.operator();
    let nodes: Vec<Node> = sim.api().nodes.values().map(kube_node).collect();
    assert!(!nodes.is_empty(), "two pods keep a node");
    let pools: Vec<KubeNodePool> = sim
        .api()
        .node_pools
        .values()
        .map(|p| KubeNodePool::from_nodepool(p).unwrap())
        .collect();
    let now = sim.now();
    m.refresh(
        op.view().pods().values(),
        &nodes.iter().collect::<Vec<_>>(),
        &pools.iter().collect::<Vec<_>>(),
        op.eligible_nodes(),
        now,
    );
    m.refresh_operator(op, now);
    m.encode()
}

/// [`scenario_scrape`] with every operator counter, histogram and summary observed once more
/// (value 0) and a failed reconcile, so every family of the registry has samples.
fn full_scrape() -> String {
    let m = Metrics::default();
    for (name, _) in COUNTERS {
        assert!(m.apply(&Metric::add(name, 0.0, [])));
    }
    for (name, _) in HISTOGRAMS.iter().chain(SUMMARIES) {
        assert!(m.apply(&Metric::observe(name, 0.0, [])));
    }
    m.reconciled(
        karpenter_core::operator::controllers::PROVISIONER,
        karpenter_core::operator::ReconcileResult::Error,
        Some(Duration::ZERO),
    );
    let scenario = scenario_scrape();
    format!("{scenario}\n{}", m.encode())
}

#[test]
fn every_metric_of_the_guide_table_is_scraped_under_its_current_name() {
    let text = scenario_scrape();

    let names = guide::exported_names();
    assert_eq!(names.len(), 11, "{names:?}");
    for name in names {
        assert!(has_samples(&text, name), "{name} has no samples:\n{text}");
    }
    // Upstream's current labels on each.
    for g in GUIDE_METRICS {
        let Some(upstream) = g.upstream else { continue };
        let sample = line(&text, &format!("{upstream}{{"), &[])
            .or_else(|| line(&text, &format!("{upstream}_bucket{{"), &[]))
            .unwrap_or_else(|| panic!("{upstream}: {text}"));
        for label in g.labels.iter().filter(|l| **l != "...") {
            assert!(
                sample.contains(&format!("{label}=\"")),
                "{upstream} lacks label {label}: {sample}"
            );
        }
    }
    // What the guide's queries read: a price per offering, the cost of the NodePool's nodes,
    // a disruption decision, the limit.
    let price = line(
        &text,
        "karpenter_cloudprovider_instance_type_offering_price_estimate{",
        &["capacity_type=\"on-demand\""],
    )
    .unwrap();
    assert!(!price.ends_with(" 0.0"), "{price}");
    let cost: f64 = line(
        &text,
        "karpenter_nodepools_cost_total{",
        &["nodepool=\"default\""],
    )
    .and_then(|l| l.rsplit(' ').next()?.parse().ok())
    .unwrap();
    assert!(cost > 0.0, "{text}");
    assert!(
        line(
            &text,
            "karpenter_voluntary_disruption_decisions_total{",
            &["decision=\"delete\""]
        )
        .is_some(),
        "{text}"
    );
    assert!(
        line(
            &text,
            "karpenter_nodepools_limit{",
            &["nodepool=\"default\"", "resource_type=\"cpu\""]
        )
        .is_some_and(|l| l.ends_with(" 1000.0")),
        "{text}"
    );
    // No name the guide uses that upstream renamed is exported under the old name.
    for g in GUIDE_METRICS.iter().filter(|g| g.upstream != Some(g.guide)) {
        assert!(!has_samples(&text, g.guide), "{}", g.guide);
    }
}

/// The table in docs/controller.md shows every row of [`GUIDE_METRICS`].
#[test]
fn the_docs_table_shows_every_guide_metric() {
    let doc = include_str!("../../../../docs/controller.md");
    for g in GUIDE_METRICS {
        let row = doc
            .lines()
            .find(|l| l.starts_with(&format!("| `{}` |", g.guide)))
            .unwrap_or_else(|| panic!("docs/controller.md has no row for {}", g.guide));
        if let Some(upstream) = g.upstream {
            assert!(row.contains(&format!("`{upstream}`")), "{row}");
        }
        for ours in g.ours {
            assert!(row.contains(&format!("`{ours}`")), "{row}");
        }
    }
}

/// [`names::exported_series`] lists what the registry serves: every sample of a scrape that
/// fills every family is in it, and every name in it is served.
#[test]
fn the_exported_series_list_is_the_registrys() {
    let text = full_scrape();
    let listed = crate::metrics::names::exported_series();
    let served: std::collections::BTreeSet<String> = text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| l.split(['{', ' ']).next().unwrap().to_string())
        .collect();
    let unlisted: Vec<_> = served.difference(&listed).collect();
    assert!(unlisted.is_empty(), "served but not listed: {unlisted:?}");
    let declared: std::collections::BTreeSet<String> = text
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .map(|l| l.split(' ').next().unwrap().to_string())
        .collect();
    for name in &listed {
        let family = ["_bucket", "_sum", "_count", "_total"]
            .iter()
            .find_map(|s| name.strip_suffix(s).filter(|f| declared.contains(*f)))
            .unwrap_or(name);
        assert!(declared.contains(family), "{name} is listed but not served");
    }
}

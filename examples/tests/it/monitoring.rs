//! The chart's alerts (`charts/karpenter/files/alerts.yaml`, the PrometheusRule of
//! `prometheusRule.enabled`) and Grafana dashboards (`files/dashboards/*.json`, the ConfigMaps of
//! `dashboards.enabled`): every PromQL expression parses, and every metric it reads is one the
//! controller exports (`karpenter_controller::metrics::names::exported_series`, which a test of
//! karpenter-controller checks against its registry's scrape).

use std::collections::BTreeSet;
use std::path::PathBuf;

use promql_parser::parser::{self, Expr};
use promql_parser::util::{ExprVisitor, walk_expr};
use serde_json::Value;

fn chart_file(path: &str) -> PathBuf {
    super::root().join("../charts/karpenter/files").join(path)
}

fn read(path: &PathBuf) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Collects the metric names an expression selects.
struct Names(BTreeSet<String>);

impl ExprVisitor for Names {
    type Error = String;

    fn pre_visit(&mut self, expr: &Expr) -> Result<bool, String> {
        let selector = match expr {
            Expr::VectorSelector(vs) => Some(vs),
            Expr::MatrixSelector(ms) => Some(&ms.vs),
            _ => None,
        };
        if let Some(vs) = selector {
            let name = vs
                .name
                .clone()
                .ok_or_else(|| format!("a selector without a metric name: {vs}"))?;
            self.0.insert(name);
        }
        Ok(true)
    }
}

/// The metric names `expr` reads; panics naming `what` when it does not parse.
fn metrics_of(what: &str, expr: &str) -> BTreeSet<String> {
    let ast = parser::parse(expr).unwrap_or_else(|e| panic!("{what}: {expr}: {e}"));
    let mut names = Names(BTreeSet::new());
    walk_expr(&mut names, &ast).unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(!names.0.is_empty(), "{what} reads no metric: {expr}");
    names.0
}

#[derive(Debug, serde::Deserialize)]
struct Group {
    name: String,
    rules: Vec<Rule>,
}

#[derive(Debug, serde::Deserialize)]
struct Rule {
    alert: String,
    expr: String,
    #[serde(rename = "for")]
    for_: String,
    labels: std::collections::BTreeMap<String, String>,
    annotations: std::collections::BTreeMap<String, String>,
}

fn alerts() -> Vec<Group> {
    let path = chart_file("alerts.yaml");
    serde_saphyr::from_str(&read(&path)).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Every dashboard: (file name, its JSON).
fn dashboards() -> Vec<(String, Value)> {
    let dir = chart_file("dashboards");
    let mut out: Vec<(String, Value)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .map(|p| {
            let json =
                serde_json::from_str(&read(&p)).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            (p.file_name().unwrap().to_string_lossy().into_owned(), json)
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// Every (where, expression) of the dashboards' panel targets.
fn panel_expressions() -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (file, dash) in dashboards() {
        for panel in dash["panels"].as_array().expect("panels") {
            let title = panel["title"].as_str().expect("a panel title");
            let targets = panel["targets"].as_array().expect("targets");
            assert!(!targets.is_empty(), "{file}: {title} has no target");
            for t in targets {
                let expr = t["expr"].as_str().expect("a target expr");
                out.push((format!("{file}: {title}"), expr.to_string()));
            }
        }
    }
    out
}

#[test]
fn every_alert_and_panel_reads_only_metrics_the_controller_exports() {
    let exported = karpenter_controller::metrics::names::exported_series();
    let mut exprs: Vec<(String, String)> = alerts()
        .into_iter()
        .flat_map(|g| g.rules)
        .map(|r| (format!("alert {}", r.alert), r.expr))
        .collect();
    exprs.extend(panel_expressions());
    assert!(exprs.len() >= 40, "{}", exprs.len());
    let mut read = BTreeSet::new();
    for (what, expr) in &exprs {
        for name in metrics_of(what, expr) {
            assert!(
                exported.contains(&name),
                "{what} reads {name}, which the controller does not export"
            );
            read.insert(name);
        }
    }
    // The guide's metrics that upstream renamed or never had are read under the current names.
    for g in karpenter_controller::metrics::guide::GUIDE_METRICS {
        if g.upstream != Some(g.guide) {
            assert!(!read.contains(g.guide), "{} is read", g.guide);
        }
    }
    for current in [
        "karpenter_voluntary_disruption_decisions_total",
        "karpenter_scheduler_scheduling_duration_seconds_bucket",
        "karpenter_cloudprovider_instance_type_offering_price_estimate",
        "karpenter_nodepools_cost_total",
        "karpenter_nodes_current_lifetime_seconds",
        "karpenter_nodes_allocatable",
        "karpenter_cloudprovider_errors_total",
    ] {
        assert!(read.contains(current), "no panel or alert reads {current}");
    }
}

/// The seed guide's three alerts (section 14.3): names, `for`, severity.
#[test]
fn the_rule_has_the_guides_three_alerts() {
    let groups = alerts();
    assert_eq!(groups.len(), 1);
    assert_eq!(groups[0].name, "karpenter.rules");
    let got: Vec<(&str, &str, &str)> = groups[0]
        .rules
        .iter()
        .map(|r| {
            (
                r.alert.as_str(),
                r.for_.as_str(),
                r.labels["severity"].as_str(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            ("KarpenterNodePoolNearLimit", "5m", "warning"),
            ("KarpenterHighErrorRate", "10m", "critical"),
            ("KarpenterPendingPods", "10m", "warning"),
        ]
    );
    for r in &groups[0].rules {
        assert!(r.annotations.contains_key("summary"), "{}", r.alert);
    }
    // The guide's first two expressions already use current names and are kept as written.
    let near = metrics_of("near limit", &groups[0].rules[0].expr);
    assert_eq!(
        near,
        BTreeSet::from([
            "karpenter_nodepools_limit".to_string(),
            "karpenter_nodes_allocatable".to_string()
        ])
    );
}

/// Four dashboards (capacity, cost, disruption, controller health), each a Grafana dashboard
/// with a unique uid, a Prometheus data source variable, and laid-out panels.
#[test]
fn the_four_dashboards_are_grafana_dashboards() {
    let dashboards = dashboards();
    let files: Vec<&str> = dashboards.iter().map(|(f, _)| f.as_str()).collect();
    assert_eq!(
        files,
        [
            "karpenter-capacity.json",
            "karpenter-controller.json",
            "karpenter-cost.json",
            "karpenter-disruption.json"
        ]
    );
    let mut uids = BTreeSet::new();
    for (file, d) in &dashboards {
        assert!(uids.insert(d["uid"].as_str().expect("uid")), "{file}");
        assert!(
            d["title"]
                .as_str()
                .is_some_and(|t| t.starts_with("Karpenter / "))
        );
        assert!(d["schemaVersion"].as_u64().is_some(), "{file}");
        let vars = d["templating"]["list"].as_array().expect("templating");
        assert!(
            vars.iter()
                .any(|v| v["name"] == "datasource" && v["query"] == "prometheus"),
            "{file}"
        );
        let mut ids = BTreeSet::new();
        for p in d["panels"].as_array().unwrap() {
            assert!(ids.insert(p["id"].as_u64().expect("id")), "{file}");
            assert_eq!(p["datasource"]["uid"], "${datasource}", "{file}");
            let g = &p["gridPos"];
            let (x, w) = (g["x"].as_u64().unwrap(), g["w"].as_u64().unwrap());
            assert!(x + w <= 24, "{file}: {}", p["title"]);
        }
    }
}

//! `karpenter simulate`: the example day on the seed guide's general-purpose NodePool, the JSON
//! contract's keys (docs/simulate.md), determinism, the baseline, and bad input.

use serde_json::Value;

use crate::{TempDir, karpenter, manifests, root};

fn example_workload() -> String {
    root()
        .join("workloads")
        .join("day.yaml")
        .display()
        .to_string()
}

fn simulate(args: &[&str]) -> crate::Run {
    let mut all = vec!["simulate"];
    all.extend_from_slice(args);
    karpenter(&all, "")
}

fn simulate_ok(args: &[&str]) -> String {
    let run = simulate(args);
    assert_eq!(run.code, 0, "{args:?}\nstderr: {}", run.stderr);
    run.stdout
}

#[test]
fn the_example_day_prints_a_cost_table_a_person_can_read() {
    let gp = manifests("general-purpose");
    let w = example_workload();
    let out = simulate_ok(&["-f", &gp, "--workload", &w, "--duration", "24h"]);
    assert!(
        out.starts_with("Simulated 24h0m0s in 1m0s steps (seed 1, faults: none) on catalog aws"),
        "{out}"
    );
    assert!(out.contains("NodePools: general-purpose"), "{out}");
    for header in [
        "Time",
        "Nodes",
        "$/hour",
        "Total",
        "Pending pods",
        "Baseline nodes",
    ] {
        assert!(out.contains(header), "missing {header:?}:\n{out}");
    }
    // Hourly rows, 01:00 to 24:00.
    for h in 1..=24 {
        assert!(
            out.contains(&format!("| {h:02}:00 |")),
            "no row {h:02}:00:\n{out}"
        );
    }
    for line in [
        "Cost",
        "Peak nodes",
        "Nodes launched",
        "Nodes removed: empty",
        "Pods disrupted",
    ] {
        assert!(out.contains(line), "missing {line:?}:\n{out}");
    }
    assert!(out.contains("Consolidation saved $"), "{out}");
}

#[test]
fn json_has_the_documented_keys_and_consolidation_costs_no_more_than_the_baseline() {
    let gp = manifests("general-purpose");
    let w = example_workload();
    let dir = TempDir::new("simulate-json");
    let svg = dir.0.join("day.svg").display().to_string();
    let out = simulate_ok(&[
        "-f",
        &gp,
        "--workload",
        &w,
        "--duration",
        "24h",
        "-o",
        "json",
        "--svg",
        &svg,
    ]);
    let v: Value = serde_json::from_str(&out).expect("valid JSON");
    for key in [
        "apiVersion",
        "catalog",
        "settings",
        "nodePools",
        "consolidated",
        "baseline",
        "saving",
    ] {
        assert!(v.get(key).is_some(), "missing {key}");
    }
    assert_eq!(v["apiVersion"], "karpenter-rs.io/simulate/v1");
    assert_eq!(v["settings"]["duration"], "24h0m0s");
    assert_eq!(v["settings"]["step"], "1m0s");
    assert_eq!(v["settings"]["seed"], 1);
    assert_eq!(v["settings"]["faults"], "none");
    assert_eq!(v["settings"]["rowMinutes"], 60);
    assert_eq!(v["settings"]["spotInterruptionsPerNodeHour"], 0.02);
    assert_eq!(v["nodePools"], serde_json::json!(["general-purpose"]));
    for run in ["consolidated", "baseline"] {
        let r = &v[run];
        for key in [
            "cost",
            "averageNodes",
            "peakNodes",
            "nodesLaunched",
            "nodesRemoved",
            "nodesTerminated",
            "podsDisrupted",
            "evictions",
            "spotInterruptions",
            "faults",
            "restarts",
            "peakPendingPods",
            "rows",
            "timeline",
        ] {
            assert!(r.get(key).is_some(), "{run}: missing {key}");
        }
        let rows = r["rows"].as_array().unwrap();
        assert_eq!(rows.len(), 24, "{run}: hourly rows");
        assert_eq!(r["timeline"].as_array().unwrap().len(), 24 * 60);
        for key in [
            "minute",
            "time",
            "nodes",
            "costPerHour",
            "cumulativeCost",
            "pendingPods",
            "runningPods",
        ] {
            assert!(rows[0].get(key).is_some(), "{run}: rows: missing {key}");
        }
        assert_eq!(rows[23]["minute"], 24 * 60);
        assert_eq!(rows[0]["time"], "2026-01-01T01:00:00Z");
        assert_eq!(rows[23]["cumulativeCost"], r["cost"]);
        assert!(
            r["peakNodes"].as_u64().unwrap() > 0,
            "{run}: launched nodes"
        );
    }
    let c = v["consolidated"]["cost"].as_f64().unwrap();
    let b = v["baseline"]["cost"].as_f64().unwrap();
    assert!(c > 0.0);
    assert!(b >= c, "baseline {b} >= consolidated {c}");
    let removed = &v["consolidated"]["nodesRemoved"];
    let consolidations =
        removed["empty"].as_u64().unwrap_or(0) + removed["underutilized"].as_u64().unwrap_or(0);
    assert!(consolidations > 0, "consolidation removed nodes: {removed}");
    assert!(
        v["baseline"]["nodesRemoved"].get("empty").is_none()
            && v["baseline"]["nodesRemoved"].get("underutilized").is_none(),
        "no consolidation in the baseline: {}",
        v["baseline"]["nodesRemoved"]
    );
    let saved = v["saving"]["cost"].as_f64().unwrap();
    assert!((saved - (b - c)).abs() < 0.001, "{saved} = {b} - {c}");
    // The chart.
    let chart = std::fs::read_to_string(&svg).expect("--svg wrote the chart");
    assert!(chart.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
    assert_eq!(chart.matches("<polyline").count(), 2, "both runs drawn");
    assert!(chart.trim_end().ends_with("</svg>"));
}

#[test]
fn same_inputs_and_seed_give_the_same_bytes_even_with_faults() {
    let gp = manifests("general-purpose");
    let w = example_workload();
    let dir = TempDir::new("simulate-det");
    let mut outputs = Vec::new();
    for i in 0..2 {
        let svg = dir.0.join(format!("{i}.svg")).display().to_string();
        let out = simulate_ok(&[
            "-f",
            &gp,
            "--workload",
            &w,
            "--duration",
            "4h",
            "--seed",
            "7",
            "--faults",
            "default",
            "-o",
            "json",
            "--svg",
            &svg,
        ]);
        outputs.push((out, std::fs::read(&svg).unwrap()));
    }
    assert!(outputs[0] == outputs[1], "two runs differ");
    let v: Value = serde_json::from_str(&outputs[0].0).unwrap();
    assert_ne!(v["settings"]["faults"], "none");
    let faults = v["consolidated"]["faults"].as_object().unwrap();
    assert!(
        !faults.is_empty(),
        "240 steps at the default rates inject faults"
    );
    // Another seed, another run.
    let other = simulate_ok(&[
        "-f",
        &gp,
        "--workload",
        &w,
        "--duration",
        "4h",
        "--seed",
        "8",
        "--faults",
        "default",
        "-o",
        "json",
    ]);
    assert_ne!(other, outputs[0].0);
}

#[test]
fn a_cluster_dump_is_a_starting_point() {
    let dump = manifests("cluster-dump");
    let dir = TempDir::new("simulate-dump");
    let w = dir.write(
        "w.yaml",
        "jobs:\n  - {name: batch, every: 30m, pods: 2, cpu: 500m, memory: 512Mi, runFor: 10m}\n",
    );
    let run = simulate(&[
        "-f",
        &dump,
        "--workload",
        &w,
        "--duration",
        "1h",
        "--catalog",
        "aws",
        "-o",
        "json",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stderr.contains("nodes are not simulated"),
        "{}",
        run.stderr
    );
    let v: Value = serde_json::from_str(&run.stdout).unwrap();
    let rows = v["consolidated"]["rows"].as_array().unwrap();
    assert!(rows.iter().any(|r| r["runningPods"].as_u64().unwrap() > 2));
}

fn assert_input_error(args: &[&str], parts: &[&str]) {
    let run = simulate(args);
    assert_eq!(run.code, 2, "{args:?}: {}", run.stderr);
    assert!(run.stderr.starts_with("error: "), "{}", run.stderr);
    for p in parts {
        assert!(run.stderr.contains(p), "missing {p:?} in {:?}", run.stderr);
    }
    assert!(!run.stderr.contains("panicked"), "{}", run.stderr);
}

#[test]
fn bad_input_exits_2_naming_the_file_and_field() {
    let gp = manifests("general-purpose");
    let dir = TempDir::new("simulate-bad");
    let ok = example_workload();
    let bad_at = dir.write(
        "bad-at.yaml",
        "deployments:\n  - name: web\n    cpu: 1\n    memory: 1Gi\n    replicas:\n      - {at: 0h, replicas: 2}\n      - {at: noon, replicas: 4}\n",
    );
    assert_input_error(
        &["-f", &gp, "--workload", &bad_at],
        &["bad-at.yaml", "deployments[0].replicas[1].at", "noon"],
    );
    let unknown = dir.write(
        "unknown.yaml",
        "deployments:\n  - name: web\n    cpu: 1\n    memory: 1Gi\n    replica: [{at: 0h, replicas: 2}]\n",
    );
    assert_input_error(
        &["-f", &gp, "--workload", &unknown],
        &["unknown.yaml", "deployments[0]", "replica"],
    );
    let missing_ref = dir.write(
        "ref.yaml",
        "deployments:\n  - name: frontend\n    replicas: [{at: 0h, replicas: 2}]\n",
    );
    assert_input_error(
        &["-f", &gp, "--workload", &missing_ref],
        &[
            "ref.yaml",
            "deployments[0].name",
            "no Deployment \"frontend\"",
        ],
    );
    let bad_cpu = dir.write(
        "cpu.yaml",
        "jobs:\n  - {name: j, every: 1h, cpu: lots, memory: 1Gi, runFor: 5m}\n",
    );
    assert_input_error(
        &["-f", &gp, "--workload", &bad_cpu],
        &["cpu.yaml", "jobs[0].cpu", "lots"],
    );
    let yaml = dir.write("syntax.yaml", "deployments: [\n");
    assert_input_error(
        &["-f", &gp, "--workload", &yaml],
        &["syntax.yaml", "invalid YAML"],
    );
    let empty = dir.write("empty.yaml", "deployments: []\n");
    assert_input_error(
        &["-f", &gp, "--workload", &empty],
        &["empty.yaml", "no workload"],
    );
    assert_input_error(
        &["-f", &gp, "--workload", "no-such-file.yaml"],
        &["--workload no-such-file.yaml"],
    );
    assert_input_error(
        &["-f", &gp, "--workload", &ok, "--duration", "a day"],
        &["--duration \"a day\""],
    );
    assert_input_error(
        &["-f", &gp, "--workload", &ok, "--step", "0s"],
        &["--step", "longer than zero"],
    );
    assert_input_error(
        &[
            "-f",
            &gp,
            "--workload",
            &ok,
            "--duration",
            "1h",
            "--step",
            "2h",
        ],
        &["--step 2h", "longer than --duration"],
    );
    assert_input_error(
        &["-f", &gp, "--workload", &ok, "--faults", "meteor=0.1"],
        &["--faults", "unknown fault \"meteor\""],
    );
    assert_input_error(
        &["-f", &gp, "--workload", &ok, "-o", "yaml"],
        &["--output \"yaml\"", "table or json"],
    );
    assert_input_error(
        &["-f", &gp, "--workload", &ok, "--catalog", "fake:0"],
        &["--catalog"],
    );
    // No NodePool in the input.
    let pods_only = dir.write(
        "m/pod.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers: [{name: c, image: x}]\n",
    );
    assert_input_error(
        &["-f", &pods_only, "--workload", &ok],
        &["no usable NodePool"],
    );
    // A broken NodePool names the file and field, as for plan.
    let np = dir.write(
        "np/np.yaml",
        "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: x}\nspec:\n  template:\n    spec:\n      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}\n      requirements:\n        - {key: karpenter.sh/capacity-type, operator: Maybe, values: [spot]}\n",
    );
    assert_input_error(
        &["-f", &np, "--workload", &ok, "--catalog", "fake:4"],
        &["np.yaml", "NodePool/x"],
    );
}

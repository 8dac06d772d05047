//! Every example scenario: the expected plan (byte for byte) and the facts the seed guide states.

use serde_json::Value;

use crate::{expect_file, karpenter, manifests, plan_json, plan_ok};

const SCENARIOS: [&str; 9] = [
    "anti-affinity",
    "cluster-dump",
    "daemonset-overhead",
    "general-purpose",
    "gpu",
    "multi-arch",
    "nginx",
    "spot-fallback",
    "topology-spread",
];

fn claims(plan: &Value) -> &Vec<Value> {
    plan["nodeClaims"].as_array().expect("nodeClaims")
}

fn launch<'a>(claim: &'a Value, field: &str) -> &'a str {
    claim["launch"][field].as_str().unwrap_or("")
}

#[test]
fn every_scenario_matches_its_expected_plan() {
    for s in SCENARIOS {
        let dir = manifests(s);
        let out = plan_ok(&["-f", &dir, "-o", "json"]);
        expect_file(&format!("{s}.json"), &out);
    }
}

#[test]
fn output_is_byte_identical_across_runs() {
    for s in ["general-purpose", "topology-spread", "cluster-dump", "gpu"] {
        let dir = manifests(s);
        for format in ["json", "yaml", "table"] {
            let a = karpenter(&["plan", "-f", &dir, "-o", format, "--explain"], "");
            let b = karpenter(&["plan", "-f", &dir, "-o", format, "--explain"], "");
            assert_eq!(a.code, 0, "{}", a.stderr);
            assert_eq!(a.stdout, b.stdout, "{s} -o {format}");
            assert_eq!(a.stderr, b.stderr, "{s} -o {format}");
        }
    }
}

#[test]
fn readme_first_command_prints_the_table() {
    // cargo run --release -p karpenter-cli --bin karpenter -- plan -f examples/manifests/general-purpose
    let out = plan_ok(&["-f", "manifests/general-purpose"]);
    assert!(out.starts_with("Catalog: aws (us-east-1); spot prices: estimate: 0.35 x on-demand"));
    for needle in [
        "New NodeClaims: 1",
        "| NodePool",
        "general-purpose",
        "Unschedulable pods: 0",
        "cost:",
        "/month (730 h)",
        "lower bound:",
    ] {
        assert!(out.contains(needle), "missing {needle:?} in\n{out}");
    }
}

#[test]
fn yaml_has_the_json_structure() {
    let dir = manifests("spot-fallback");
    let json: Value = serde_json::from_str(&plan_ok(&["-f", &dir, "-o", "json"])).unwrap();
    let yaml: Value = serde_saphyr::from_str(&plan_ok(&["-f", &dir, "-o", "yaml"])).unwrap();
    assert_eq!(json, yaml);
}

/// Guide 4.1 / 4.5: four pods of 1 CPU / 2 GiB. The guide's m5.xlarge idealises away the
/// kubelet reserve (80m of a 4-vCPU node), so four full CPUs need an 8-vCPU node: all four go
/// on one claim of the general-purpose NodePool.
#[test]
fn general_purpose_packs_four_pods_on_one_node() {
    let plan = plan_json(&["-f", &manifests("general-purpose")]);
    let c = claims(&plan);
    assert_eq!(c.len(), 1);
    assert_eq!(c[0]["nodePool"], "general-purpose");
    assert_eq!(c[0]["pods"].as_array().unwrap().len(), 4);
    assert_eq!(c[0]["requests"]["cpu"], "4");
    assert!(
        !c[0]["instanceTypes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t == "m5.xlarge"),
        "4 CPUs of pods do not fit the 3920m allocatable of an m5.xlarge"
    );
    let s = &plan["summary"];
    assert!(s["lowerBoundPerHour"].as_f64().unwrap() <= s["costPerHour"].as_f64().unwrap());
}

/// Guide 7.3: three replicas with hostname anti-affinity need three nodes.
#[test]
fn anti_affinity_needs_three_nodes() {
    let plan = plan_json(&["-f", &manifests("anti-affinity")]);
    let c = claims(&plan);
    assert_eq!(c.len(), 3);
    assert!(c.iter().all(|x| x["pods"].as_array().unwrap().len() == 1));
    // The bound knows the replicas need a node each: the plan is optimal.
    assert_eq!(plan["summary"]["gap"], 0.0);
}

/// Guide 7.4: six replicas with a zone spread of maxSkew 1 over three zones: two per zone.
#[test]
fn topology_spread_puts_two_pods_in_each_zone() {
    let plan = plan_json(&["-f", &manifests("topology-spread")]);
    let mut per_zone = std::collections::BTreeMap::new();
    for c in claims(&plan) {
        *per_zone.entry(launch(c, "zone").to_string()).or_insert(0) +=
            c["pods"].as_array().unwrap().len();
    }
    let expected: std::collections::BTreeMap<String, usize> = [
        ("us-east-1a".to_string(), 2),
        ("us-east-1b".to_string(), 2),
        ("us-east-1c".to_string(), 2),
    ]
    .into();
    assert_eq!(per_zone, expected);
}

/// Guide 7.5: 2 CPU / 4 GiB plus kube-proxy, aws-node and datadog: 2.325 CPU of requests
/// (2.405 with the 80m kubelet reserve) and ~4.7 GiB: an m5.xlarge.
#[test]
fn daemonset_overhead_gets_an_m5_xlarge() {
    let plan = plan_json(&["-f", &manifests("daemonset-overhead")]);
    let c = claims(&plan);
    assert_eq!(c.len(), 1);
    assert_eq!(launch(&c[0], "instanceType"), "m5.xlarge");
    assert_eq!(c[0]["launch"]["pricePerHour"], 0.192);
    assert_eq!(c[0]["requests"]["cpu"], "2325m");
    assert_eq!(c[0]["requests"]["memory"], "4808Mi");
    assert_eq!(c[0]["requests"]["pods"], "4");
}

/// Install notes: ten nginx pods of 500m (five cores) go onto one 8-vCPU-class spot instance.
#[test]
fn nginx_packs_onto_one_instance() {
    let plan = plan_json(&["-f", &manifests("nginx")]);
    let c = claims(&plan);
    assert_eq!(c.len(), 1);
    assert_eq!(c[0]["pods"].as_array().unwrap().len(), 10);
    assert_eq!(launch(&c[0], "capacityType"), "spot");
    assert!(launch(&c[0], "instanceType").ends_with(".2xlarge"));
    let rules: Vec<&str> = plan["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["rule"].as_str().unwrap())
        .collect();
    assert_eq!(
        rules,
        [
            "spot-without-on-demand-fallback",
            "consolidate-after-too-short",
            "disrupt-all-at-once"
        ]
    );
}

/// Guide 12.1: multi-arch pods go to the ARM NodePool (weight 80); amd64-only pods to x86.
#[test]
fn multi_arch_prefers_arm() {
    let plan = plan_json(&["-f", &manifests("multi-arch")]);
    let c = claims(&plan);
    assert_eq!(c.len(), 2);
    let arm = c.iter().find(|x| x["nodePool"] == "arm-preferred").unwrap();
    assert_eq!(arm["pods"].as_array().unwrap().len(), 3);
    let amd = c.iter().find(|x| x["nodePool"] == "amd-fallback").unwrap();
    assert_eq!(
        amd["pods"],
        serde_json::json!(["default/legacy-0", "default/legacy-1"])
    );
}

/// Guide 5.2: spot preferred with an on-demand fallback.
#[test]
fn spot_preferred_with_on_demand_fallback() {
    let plan = plan_json(&["-f", &manifests("spot-fallback")]);
    let c = claims(&plan);
    let spot = c
        .iter()
        .find(|x| x["nodePool"] == "spot-preferred")
        .unwrap();
    assert_eq!(launch(spot, "capacityType"), "spot");
    assert_eq!(spot["pods"].as_array().unwrap().len(), 6);
    let od = c
        .iter()
        .find(|x| x["nodePool"] == "on-demand-fallback")
        .unwrap();
    assert_eq!(od["pods"], serde_json::json!(["default/db-0"]));
    assert_eq!(launch(od, "capacityType"), "on-demand");
}

/// Guide 7.6: GPU pods on the tainted GPU NodePool; a pod without the toleration is left out.
#[test]
fn gpu_pods_get_gpu_nodes_and_others_are_left_out() {
    let plan = plan_json(&["-f", &manifests("gpu"), "--explain"]);
    let c = claims(&plan);
    assert!(!c.is_empty());
    for claim in c {
        assert_eq!(claim["nodePool"], "gpu-workloads");
        assert!(claim["requests"]["nvidia.com/gpu"].is_string());
    }
    let u = plan["unschedulable"].as_array().unwrap();
    assert_eq!(u.len(), 1);
    assert_eq!(u[0]["pod"], "ml/notebook");
    assert!(u[0]["reason"].as_str().unwrap().contains("nvidia.com/gpu"));
    assert_eq!(u[0]["nodePools"][0]["nodePool"], "gpu-workloads");
}

/// A `kubectl get -o yaml` dump: the pending pod goes onto an existing node, and the controller
/// replica on a Karpenter node is flagged.
#[test]
fn cluster_dump_uses_existing_nodes_and_flags_the_controller() {
    let plan = plan_json(&["-f", &manifests("cluster-dump")]);
    assert!(claims(&plan).is_empty());
    assert_eq!(
        plan["existingNodes"],
        serde_json::json!([{"name": "ip-10-0-1-10.ec2.internal", "pods": ["default/report-29181"]}])
    );
    let w = &plan["warnings"][0];
    assert_eq!(w["rule"], "controller-on-managed-nodes");
    assert_eq!(w["object"], "Pod/kube-system/karpenter-6f8b-xyz34");
    assert_eq!(w["field"], "spec.affinity");
}

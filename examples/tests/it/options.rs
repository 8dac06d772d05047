//! Inputs and options: stdin, lists, directories, catalogs, --allow, --explain, --disruption,
//! the existing cluster.

use serde_json::Value;

use crate::{TempDir, karpenter, manifests, plan_json};

const POOL: &str = "apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements: []
  limits: {cpu: \"1000\"}
  disruption: {consolidateAfter: 10m}
";

fn pod(name: &str, cpu: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}}}\nspec:\n  containers:\n    - name: c\n      resources: {{requests: {{cpu: \"{cpu}\"}}}}\n"
    )
}

fn stdin_json(args: &[&str], input: &str) -> Value {
    let mut all = vec!["plan", "-f", "-", "-o", "json"];
    all.extend_from_slice(args);
    let run = karpenter(&all, input);
    assert_eq!(run.code, 0, "{}", run.stderr);
    serde_json::from_str(&run.stdout).unwrap()
}

fn all_pods(plan: &Value) -> Vec<String> {
    let mut pods: Vec<String> = plan["nodeClaims"]
        .as_array()
        .unwrap()
        .iter()
        .chain(plan["existingNodes"].as_array().unwrap())
        .flat_map(|c| c["pods"].as_array().unwrap().iter())
        .map(|p| p.as_str().unwrap().to_string())
        .collect();
    pods.sort();
    pods
}

#[test]
fn reads_standard_input_with_several_documents() {
    let input = format!("{POOL}---\n{}---\n{}", pod("a", "1"), pod("b", "2"));
    let plan = stdin_json(&["--catalog", "fake:20"], &input);
    assert_eq!(all_pods(&plan), ["default/a", "default/b"]);
    assert_eq!(plan["catalog"]["name"], "fake:20");
    assert!(plan["catalog"].get("spotPrices").is_none());
    let it = plan["nodeClaims"][0]["launch"]["instanceType"]
        .as_str()
        .unwrap();
    assert!(it.starts_with("fake-it-"), "{it}");
}

#[test]
fn reads_kubectl_lists() {
    let input = format!(
        "apiVersion: v1\nkind: List\nitems:\n- {}\n- {}",
        serde_json::to_string(&serde_saphyr::from_str::<Value>(POOL).unwrap()).unwrap(),
        serde_json::to_string(&serde_saphyr::from_str::<Value>(&pod("a", "1")).unwrap()).unwrap()
    );
    let plan = stdin_json(&["--catalog", "fake:5"], &input);
    assert_eq!(all_pods(&plan), ["default/a"]);
}

#[test]
fn reads_several_files_and_directories_recursively() {
    let dir = TempDir::new("dirs");
    dir.write("pools/pool.yaml", POOL);
    dir.write("apps/a/pod.yml", &pod("a", "1"));
    dir.write(
        "apps/b/pod.json",
        &serde_json::to_string(&serde_saphyr::from_str::<Value>(&pod("b", "1")).unwrap()).unwrap(),
    );
    dir.write("apps/notes.txt", "not a manifest");
    let extra = dir.write("extra.yaml", &pod("c", "1"));
    let d = dir.0.join("pools").display().to_string();
    let apps = dir.0.join("apps").display().to_string();
    let plan = plan_json(&["-f", &d, "-f", &apps, "-f", &extra, "--catalog", "fake:5"]);
    assert_eq!(all_pods(&plan), ["default/a", "default/b", "default/c"]);
}

#[test]
fn catalog_files() {
    let dir = TempDir::new("catalog");
    let catalog = dir.write(
        "catalog.yaml",
        "instanceTypes:
  - name: small
    capacity: {cpu: \"2\", memory: 4Gi, pods: \"10\"}
    overhead: {kubeReserved: {cpu: 100m}}
    labels: {kubernetes.io/arch: amd64, example.com/tier: basic}
    offerings:
      - {zone: z1, capacityType: on-demand, price: 0.1}
      - {zone: z1, capacityType: spot, price: 0.03, available: false}
  - name: big
    capacity: {cpu: \"8\", memory: 16Gi, pods: \"40\"}
    labels: {kubernetes.io/arch: amd64, example.com/tier: premium}
    offerings:
      - {zone: z2, capacityType: on-demand, price: 0.5}
",
    );
    let launches = |plan: &Value| -> Vec<(String, String, f64)> {
        plan["nodeClaims"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                (
                    c["launch"]["instanceType"].as_str().unwrap().to_string(),
                    c["launch"]["capacityType"].as_str().unwrap().to_string(),
                    c["launch"]["pricePerHour"].as_f64().unwrap(),
                )
            })
            .collect()
    };
    // The unavailable spot offering is not used.
    let plan = stdin_json(
        &["--catalog", &catalog],
        &format!("{POOL}---\n{}", pod("a", "1")),
    );
    assert_eq!(plan["catalog"]["name"], catalog.as_str());
    assert_eq!(
        launches(&plan),
        [("small".to_string(), "on-demand".to_string(), 0.1)]
    );
    // A catalog label is well-known: a pod may select it although the NodePool does not
    // define it.
    let picky = "apiVersion: v1\nkind: Pod\nmetadata: {name: picky}\nspec:\n  nodeSelector: {example.com/tier: premium}\n  containers: [{name: c}]\n";
    let plan = stdin_json(&["--catalog", &catalog], &format!("{POOL}---\n{picky}"));
    assert_eq!(
        launches(&plan),
        [("big".to_string(), "on-demand".to_string(), 0.5)]
    );
}

#[test]
fn spot_price_factor() {
    let dir = manifests("nginx");
    let plan = plan_json(&["-f", &dir, "--spot-price-factor", "1"]);
    assert_eq!(plan["catalog"]["spotPrices"], "estimate: 1 x on-demand");
    let default = plan_json(&["-f", &dir]);
    let price = |p: &Value| p["summary"]["costPerHour"].as_f64().unwrap();
    assert!(price(&plan) > price(&default));
}

#[test]
fn allow_silences_rules() {
    let dir = manifests("nginx");
    let plan = plan_json(&[
        "-f",
        &dir,
        "--allow",
        "consolidate-after-too-short",
        "--allow",
        "disrupt-all-at-once",
    ]);
    let rules: Vec<&str> = plan["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["rule"].as_str().unwrap())
        .collect();
    assert_eq!(rules, ["spot-without-on-demand-fallback"]);
}

#[test]
fn explain_lists_every_nodepool() {
    let gpu = manifests("gpu");
    let general = manifests("general-purpose");
    let plan = plan_json(&["-f", &gpu, "-f", &general, "--explain"]);
    // The notebook fits the general-purpose pool now; an impossible pod shows both pools.
    let run = karpenter(
        &[
            "plan",
            "-f",
            &gpu,
            "-f",
            &general,
            "-f",
            "-",
            "--explain",
            "-o",
            "json",
        ],
        "apiVersion: v1\nkind: Pod\nmetadata: {name: huge, namespace: ml}\nspec:\n  containers:\n    - name: c\n      resources: {requests: {cpu: \"5000\"}}\n",
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let plan2: Value = serde_json::from_str(&run.stdout).unwrap();
    let huge = plan2["unschedulable"]
        .as_array()
        .unwrap()
        .iter()
        .find(|u| u["pod"] == "ml/huge")
        .unwrap();
    let pools: Vec<&str> = huge["nodePools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["nodePool"].as_str().unwrap())
        .collect();
    // Weight 50 first, then the unweighted GPU pool.
    assert_eq!(pools, ["general-purpose", "gpu-workloads"]);
    assert!(plan["unschedulable"].as_array().unwrap().is_empty());
    // Without --explain there are no per-pool reasons.
    let plain = plan_json(&["-f", &gpu]);
    assert!(plain["unschedulable"][0].get("nodePools").is_none());
}

#[test]
fn disruption_plans_consolidation_of_the_cluster_dump() {
    let dir = manifests("cluster-dump");
    let args = [
        "plan",
        "-f",
        dir.as_str(),
        "--disruption",
        "--now",
        "2026-06-10T00:00:00Z",
        "-o",
        "json",
    ];
    let run = karpenter(&args, "");
    assert_eq!(run.code, 0, "{}", run.stderr);
    let plan: Value = serde_json::from_str(&run.stdout).unwrap();
    let d = &plan["disruption"];
    // The underused node's pods fit elsewhere: single-node consolidation deletes it.
    assert_eq!(d["commands"][0]["reason"], "Underutilized");
    assert_eq!(d["commands"][0]["method"], "single-node");
    assert_eq!(
        d["commands"][0]["candidates"][0],
        "ip-10-0-1-10.ec2.internal"
    );
    assert!(d["commands"][0]["savingsPerHour"].as_f64().unwrap() > 0.0);
    // The node with a do-not-disrupt pod is blocked, and says why.
    let blocked = d["blocked"].as_array().unwrap();
    assert!(
        blocked
            .iter()
            .any(|b| b["node"] == "ip-10-0-3-30.ec2.internal"
                && b["reason"].as_str().unwrap().contains("do-not-disrupt"))
    );
    // Byte-identical across runs.
    assert_eq!(run.stdout, karpenter(&args, "").stdout);
}

#[test]
fn disruption_expires_nodes_past_expire_after() {
    let dir = manifests("cluster-dump");
    let plan = plan_json(&["-f", &dir, "--disruption", "--now", "2026-11-30T00:00:00Z"]);
    let d = &plan["disruption"];
    assert_eq!(d["commands"][0]["reason"], "Expired");
    assert_eq!(d["commands"][0]["method"], "expiration");
}

#[test]
fn existing_cluster_nodes_inflight_claims_and_skipped_pods() {
    let input = format!(
        "{POOL}---
apiVersion: v1
kind: Node
metadata:
  name: n1
  labels: {{karpenter.sh/nodepool: default, karpenter.sh/initialized: \"true\", kubernetes.io/hostname: n1}}
status:
  capacity: {{cpu: \"4\", memory: 8Gi, pods: \"10\"}}
  allocatable: {{cpu: \"4\", memory: 8Gi, pods: \"10\"}}
---
apiVersion: karpenter.sh/v1
kind: NodeClaim
metadata:
  name: default-abcde
  labels: {{karpenter.sh/nodepool: default}}
spec:
  nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}
  requirements:
    - {{key: node.kubernetes.io/instance-type, operator: In, values: [fake-it-3]}}
status:
  capacity: {{cpu: \"4\", memory: 8Gi, pods: \"40\"}}
  allocatable: {{cpu: \"4\", memory: 8Gi, pods: \"40\"}}
---
{}---
apiVersion: v1
kind: Pod
metadata: {{name: bound}}
spec:
  nodeName: n1
  containers: [{{name: c, resources: {{requests: {{cpu: \"3\"}}}}}}]
status: {{phase: Running}}
---
apiVersion: v1
kind: Pod
metadata: {{name: done}}
spec:
  containers: [{{name: c, resources: {{requests: {{cpu: \"100\"}}}}}}]
status: {{phase: Succeeded}}
---
apiVersion: v1
kind: Pod
metadata:
  name: ds-pod
  ownerReferences: [{{apiVersion: apps/v1, kind: DaemonSet, name: ds, uid: u, controller: true}}]
spec:
  containers: [{{name: c, resources: {{requests: {{cpu: \"100\"}}}}}}]
---
apiVersion: batch/v1
kind: Job
metadata: {{name: paused}}
spec:
  suspend: true
  parallelism: 3
  template: {{spec: {{containers: [{{name: c}}], restartPolicy: Never}}}}
",
        pod("big", "3")
    );
    let plan = stdin_json(&["--catalog", "fake:10"], &input);
    // n1 has 1 CPU left: the 3-CPU pod goes to the in-flight claim.
    assert_eq!(
        plan["existingNodes"],
        serde_json::json!([{"name": "default-abcde", "pods": ["default/big"]}])
    );
    assert_eq!(plan["summary"]["pods"], 1);
    assert!(plan["nodeClaims"].as_array().unwrap().is_empty());
}

#[test]
fn pods_bound_to_unknown_nodes_are_ignored_with_a_warning() {
    let input = format!(
        "{POOL}---\napiVersion: v1\nkind: Pod\nmetadata: {{name: lost}}\nspec:\n  nodeName: gone\n  containers: [{{name: c}}]\n"
    );
    let run = karpenter(&["plan", "-f", "-", "--catalog", "fake:3"], &input);
    assert_eq!(run.code, 0);
    assert!(run.stderr.contains("bound to node gone"), "{}", run.stderr);
}

#[test]
fn jobs_expand_by_parallelism() {
    let input = format!(
        "{POOL}---\napiVersion: batch/v1\nkind: Job\nmetadata: {{name: j, namespace: batch}}\nspec:\n  parallelism: 3\n  template: {{spec: {{restartPolicy: Never, containers: [{{name: c, resources: {{requests: {{cpu: 500m}}}}}}]}}}}\n"
    );
    let plan = stdin_json(&["--catalog", "fake:10"], &input);
    assert_eq!(all_pods(&plan), ["batch/j-0", "batch/j-1", "batch/j-2"]);
}

#[test]
fn no_nodepools_is_reported() {
    let run = karpenter(&["plan", "-f", "-", "--catalog", "fake:3"], &pod("a", "1"));
    assert_eq!(run.code, 0);
    assert!(run.stderr.contains("no usable NodePool"), "{}", run.stderr);
    assert!(
        run.stdout.contains("Unschedulable pods: 1"),
        "{}",
        run.stdout
    );
}

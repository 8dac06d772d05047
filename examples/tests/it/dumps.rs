//! `kubectl get -o yaml` dumps: workloads with their ReplicaSets and pods count each pod once.

use crate::{TempDir, karpenter, manifests};

const NODEPOOL: &str = "apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.test.sh, kind: TestNodeClass, name: default}
      requirements: []
";

fn node(name: &str) -> String {
    format!(
        "- apiVersion: v1
  kind: Node
  metadata:
    name: {name}
    labels: {{kubernetes.io/hostname: {name}, kubernetes.io/arch: amd64, kubernetes.io/os: linux}}
  spec: {{providerID: fake://{name}}}
  status: {{allocatable: {{cpu: '4', memory: 16Gi, pods: '110'}}, capacity: {{cpu: '4', memory: 16Gi, pods: '110'}}}}
"
    )
}

fn pod(name: &str, owner: &str, node: Option<&str>, phase: &str) -> String {
    let node = node
        .map(|n| format!("    nodeName: {n}\n"))
        .unwrap_or_default();
    format!(
        "- apiVersion: v1
  kind: Pod
  metadata:
    name: {name}
    namespace: default
    uid: uid-{name}
    labels: {{app: web, pod-template-hash: 5d8f}}
    ownerReferences: [{owner}]
  spec:
{node}    containers: [{{name: c, image: nginx, resources: {{requests: {{cpu: 500m, memory: 512Mi}}}}}}]
  status: {{phase: {phase}}}
"
    )
}

const RS_OWNER: &str =
    "{apiVersion: apps/v1, kind: ReplicaSet, name: web-5d8f, uid: rs-1, controller: true}";

/// Deployment (3 replicas) + its ReplicaSet + 2 bound pods + 1 pending pod + 1 finished pod.
fn deployment_dump() -> String {
    let mut s = format!(
        "{NODEPOOL}---
apiVersion: v1
kind: List
items:
- apiVersion: apps/v1
  kind: Deployment
  metadata: {{name: web, namespace: default, uid: d-1}}
  spec:
    replicas: 3
    selector: {{matchLabels: {{app: web}}}}
    template:
      metadata: {{labels: {{app: web}}}}
      spec: {{containers: [{{name: c, image: nginx, resources: {{requests: {{cpu: 500m, memory: 512Mi}}}}}}]}}
- apiVersion: apps/v1
  kind: ReplicaSet
  metadata:
    name: web-5d8f
    namespace: default
    uid: rs-1
    ownerReferences: [{{apiVersion: apps/v1, kind: Deployment, name: web, uid: d-1, controller: true}}]
  spec:
    replicas: 3
    selector: {{matchLabels: {{app: web, pod-template-hash: 5d8f}}}}
    template:
      metadata: {{labels: {{app: web, pod-template-hash: 5d8f}}}}
      spec: {{containers: [{{name: c, image: nginx, resources: {{requests: {{cpu: 500m, memory: 512Mi}}}}}}]}}
"
    );
    s.push_str(&node("node-a"));
    s.push_str(&node("node-b"));
    s.push_str(&pod("web-5d8f-aaaaa", RS_OWNER, Some("node-a"), "Running"));
    s.push_str(&pod("web-5d8f-bbbbb", RS_OWNER, Some("node-b"), "Running"));
    s.push_str(&pod("web-5d8f-ccccc", RS_OWNER, None, "Pending"));
    s.push_str(&pod(
        "web-5d8f-ddddd",
        RS_OWNER,
        Some("node-a"),
        "Succeeded",
    ));
    s
}

fn plan_dump(text: &str) -> serde_json::Value {
    let dir = TempDir::new("dump");
    let file = dir.write("dump.yaml", text);
    let run = karpenter(
        &["plan", "-f", &file, "--catalog", "fake:20", "-o", "json"],
        "",
    );
    assert_eq!(run.code, 0, "stderr: {}", run.stderr);
    serde_json::from_str(&run.stdout).expect("valid JSON")
}

fn planned_pods(plan: &serde_json::Value) -> Vec<String> {
    let mut pods: Vec<String> = plan["nodeClaims"]
        .as_array()
        .into_iter()
        .flatten()
        .chain(plan["existingNodes"].as_array().into_iter().flatten())
        .flat_map(|c| c["pods"].as_array().cloned().unwrap_or_default())
        .chain(
            plan["unschedulable"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|u| u["pod"].clone()),
        )
        .filter_map(|p| p.as_str().map(str::to_string))
        .collect();
    pods.sort();
    pods
}

#[test]
fn a_deployment_dump_plans_exactly_its_one_pending_pod() {
    let plan = plan_dump(&deployment_dump());
    assert_eq!(plan["summary"]["pods"], 1, "{plan:#}");
    assert_eq!(planned_pods(&plan), ["default/web-5d8f-ccccc"]);
}

#[test]
fn the_same_workloads_without_pods_expand_every_replica() {
    // A manifest directory: no ReplicaSet, no pods.
    let text = deployment_dump();
    let deployment_only: String = text
        .split("- apiVersion: apps/v1\n  kind: ReplicaSet")
        .next()
        .unwrap_or_default()
        .to_string();
    let plan = plan_dump(&deployment_only);
    assert_eq!(
        planned_pods(&plan),
        ["default/web-0", "default/web-1", "default/web-2"]
    );
}

#[test]
fn a_statefulset_dump_plans_its_missing_ordinals() {
    let owner = "{apiVersion: apps/v1, kind: StatefulSet, name: db, uid: s-1, controller: true}";
    let mut text = format!(
        "{NODEPOOL}---
apiVersion: v1
kind: List
items:
- apiVersion: apps/v1
  kind: StatefulSet
  metadata: {{name: db, namespace: default, uid: s-1}}
  spec:
    replicas: 3
    serviceName: db
    selector: {{matchLabels: {{app: web}}}}
    template:
      metadata: {{labels: {{app: web}}}}
      spec: {{containers: [{{name: c, image: postgres, resources: {{requests: {{cpu: 500m, memory: 512Mi}}}}}}]}}
"
    );
    text.push_str(&node("node-a"));
    text.push_str(&pod("db-0", owner, Some("node-a"), "Running"));
    text.push_str(&pod("db-2", owner, None, "Pending"));
    let plan = plan_dump(&text);
    assert_eq!(planned_pods(&plan), ["default/db-1", "default/db-2"]);
}

#[test]
fn a_large_list_is_read() {
    // 3,000 pods in one `kind: List` document: beyond the YAML parser's default node budget.
    let mut text = format!("{NODEPOOL}---\napiVersion: v1\nkind: List\nitems:\n");
    for i in 0..3000 {
        text.push_str(&pod(&format!("p-{i:05}"), RS_OWNER, None, "Pending"));
    }
    let plan = plan_dump(&text);
    assert_eq!(plan["summary"]["pods"], 3000);
}

#[test]
fn the_cluster_dump_example_is_unchanged_by_the_rule() {
    // The shipped dump's pods have no ReplicaSet in the input: each is planned once.
    let plan = crate::plan_json(&["-f", &manifests("cluster-dump")]);
    assert_eq!(plan["summary"]["pods"], 1);
}

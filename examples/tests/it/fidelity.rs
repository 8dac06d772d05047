//! Decisions taken as upstream takes them: drift evaluated by `--disruption` (a requirement
//! change, a template change, a vanished instance type), replicas queued by index, and
//! DaemonSet overhead from the DaemonSet's live pods.

use karpenter_core::api::NodePool;
use karpenter_core::lifecycle::drift::claim_hash_annotations;
use serde_json::Value;

use crate::karpenter;

const POOL: &str = "apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    metadata: {labels: {team: a}}
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
  disruption: {consolidateAfter: Never}
";

/// A Node and its launched NodeClaim (an m5.large in us-east-1a created on 2026-06-01, with
/// `pool`'s hash annotations) running one pod.
fn cluster(pool: &str, instance_type: &str) -> String {
    let np: NodePool = serde_saphyr::from_str(pool).expect("valid NodePool");
    let hash = claim_hash_annotations(&np);
    let annotations: Vec<String> = hash.iter().map(|(k, v)| format!("{k}: '{v}'")).collect();
    let annotations = annotations.join(", ");
    let labels = format!(
        "{{karpenter.sh/nodepool: default, karpenter.sh/capacity-type: on-demand, team: a, \
         node.kubernetes.io/instance-type: {instance_type}, topology.kubernetes.io/zone: us-east-1a, \
         kubernetes.io/arch: amd64, kubernetes.io/os: linux, karpenter.sh/initialized: 'true', \
         karpenter.sh/registered: 'true', kubernetes.io/hostname: n1}}"
    );
    format!(
        "apiVersion: v1
kind: Node
metadata:
  name: n1
  creationTimestamp: '2026-06-01T00:00:00Z'
  labels: {labels}
spec: {{providerID: 'aws:///us-east-1a/i-1'}}
status:
  capacity: {{cpu: '2', memory: 8Gi, pods: '29'}}
  allocatable: {{cpu: 1930m, memory: 7Gi, pods: '29'}}
  conditions: [{{type: Ready, status: 'True'}}]
---
apiVersion: karpenter.sh/v1
kind: NodeClaim
metadata:
  name: default-abc
  creationTimestamp: '2026-06-01T00:00:00Z'
  labels: {labels}
  annotations: {{{annotations}}}
spec:
  nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}
status:
  nodeName: n1
  providerID: 'aws:///us-east-1a/i-1'
  capacity: {{cpu: '2', memory: 8Gi, pods: '29'}}
  allocatable: {{cpu: 1930m, memory: 7Gi, pods: '29'}}
  conditions:
    - {{type: Launched, status: 'True', reason: Launched, message: '', lastTransitionTime: '2026-06-01T00:00:00Z'}}
    - {{type: Registered, status: 'True', reason: Registered, message: '', lastTransitionTime: '2026-06-01T00:00:00Z'}}
    - {{type: Initialized, status: 'True', reason: Initialized, message: '', lastTransitionTime: '2026-06-01T00:00:00Z'}}
---
apiVersion: v1
kind: Pod
metadata: {{name: app, namespace: default}}
spec:
  nodeName: n1
  containers: [{{name: c, resources: {{requests: {{cpu: 500m}}}}}}]
status: {{phase: Running}}
"
    )
}

/// `karpenter plan --disruption` over `input` (the embedded AWS catalog), its `disruption`.
fn disruption(input: &str) -> Value {
    let args = [
        "plan",
        "-f",
        "-",
        "--disruption",
        "--now",
        "2026-06-10T00:00:00Z",
        "-o",
        "json",
    ];
    let run = karpenter(&args, input);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let plan: Value = serde_json::from_str(&run.stdout).expect("valid JSON");
    plan["disruption"].clone()
}

fn drift_candidates(d: &Value) -> Vec<String> {
    d["commands"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["reason"] == "Drifted" && c["method"] == "drift")
        .flat_map(|c| c["candidates"].as_array().unwrap().iter())
        .map(|n| n.as_str().unwrap().to_string())
        .collect()
}

#[test]
fn unchanged_nodepool_does_not_drift() {
    let d = disruption(&format!("{POOL}---\n{}", cluster(POOL, "m5.large")));
    assert!(drift_candidates(&d).is_empty(), "{d}");
}

#[test]
fn template_change_drifts_the_node() {
    // The NodeClaim was created from the pool before its template label changed.
    let changed = POOL.replace("labels: {team: a}", "labels: {team: b}");
    let d = disruption(&format!("{changed}---\n{}", cluster(POOL, "m5.large")));
    assert_eq!(drift_candidates(&d), ["n1"], "{d}");
    // The replacement is launched before the node goes.
    assert_eq!(
        d["commands"][0]["replacements"].as_array().unwrap().len(),
        1
    );
}

#[test]
fn requirement_change_drifts_the_node() {
    // Requirements are not hashed: the NodeClaim's labels no longer satisfy them.
    let changed = POOL.replace("values: [on-demand]", "values: [spot]");
    let d = disruption(&format!("{changed}---\n{}", cluster(&changed, "m5.large")));
    assert_eq!(drift_candidates(&d), ["n1"], "{d}");
}

#[test]
fn vanished_instance_type_drifts_the_node() {
    // No such type in the catalog (say, retired): InstanceTypeNotFound.
    let d = disruption(&format!("{POOL}---\n{}", cluster(POOL, "m0.retired")));
    assert_eq!(drift_candidates(&d), ["n1"], "{d}");
}

#[test]
fn equal_replicas_queue_by_index() {
    // Twelve replicas needing a node each (hostname anti-affinity): NodeClaims are created in
    // queue order, which follows the replica index (web-2 before web-10).
    let input = "apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements: []
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 12
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      affinity:
        podAntiAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
            - {topologyKey: kubernetes.io/hostname, labelSelector: {matchLabels: {app: web}}}
      containers: [{name: c, resources: {requests: {cpu: '1'}}}]
";
    let run = karpenter(&["plan", "-f", "-", "-o", "json"], input);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let plan: Value = serde_json::from_str(&run.stdout).unwrap();
    let first: Vec<String> = plan["nodeClaims"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["pods"][0].as_str().unwrap().to_string())
        .collect();
    let expected: Vec<String> = (0..12).map(|i| format!("default/web-{i}")).collect();
    assert_eq!(first, expected);
}

#[test]
fn daemonset_live_pods_on_amd64_add_nothing_to_an_arm64_claim() {
    // The DaemonSet's template runs anywhere, but its live pod carries an amd64 node selector:
    // upstream takes the live pod as the template, so the arm64 claim has no daemon overhead.
    let daemonset = "apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
        - {key: kubernetes.io/arch, operator: In, values: [arm64]}
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent, namespace: kube-system}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec:
      containers: [{name: c, resources: {requests: {cpu: 300m}}}]
---
apiVersion: v1
kind: Pod
metadata: {name: web, namespace: default}
spec:
  containers: [{name: c, resources: {requests: {cpu: '1'}}}]
";
    let live = "---
apiVersion: v1
kind: Pod
metadata:
  name: agent-x1
  namespace: kube-system
  creationTimestamp: '2026-06-01T00:00:00Z'
  ownerReferences: [{apiVersion: apps/v1, kind: DaemonSet, name: agent, uid: '', controller: true}]
spec:
  nodeSelector: {kubernetes.io/arch: amd64}
  containers: [{name: c, resources: {requests: {cpu: 300m}}}]
";
    let cpu = |input: &str| {
        let run = karpenter(&["plan", "-f", "-", "-o", "json"], input);
        assert_eq!(run.code, 0, "{}", run.stderr);
        let plan: Value = serde_json::from_str(&run.stdout).unwrap();
        plan["nodeClaims"][0]["requests"]["cpu"]
            .as_str()
            .unwrap()
            .to_string()
    };
    // Template only: the 300m counts.
    assert_eq!(cpu(daemonset), "1300m");
    // With the live pod: it does not.
    assert_eq!(cpu(&format!("{daemonset}{live}")), "1");
}

//! Storage inputs: PersistentVolumeClaims, PersistentVolumes, StorageClasses and CSINodes
//! shape the plan (upstream `volumetopology.go` / `volumeusage.go`).

use serde_json::Value;

use crate::karpenter;

const POOL: &str = "apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements: []
";

const STORAGE: &str = "apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: gp3}
provisioner: ebs.csi.aws.com
volumeBindingMode: WaitForFirstConsumer
allowedTopologies: [{matchLabelExpressions: [{key: topology.kubernetes.io/zone, values: [test-zone-2]}]}]
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data}
spec: {storageClassName: gp3}
";

fn pod(name: &str, claim: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}}}\nspec:\n  containers: [{{name: c, resources: {{requests: {{cpu: \"1\"}}}}}}]\n  volumes: [{{name: d, persistentVolumeClaim: {{claimName: {claim}}}}}]\n"
    )
}

fn plan(input: &str) -> (Value, String) {
    let run = karpenter(
        &["plan", "-f", "-", "-o", "json", "--catalog", "fake:5"],
        input,
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    (serde_json::from_str(&run.stdout).unwrap(), run.stderr)
}

#[test]
fn claims_constrain_zones_and_missing_claims_leave_pods_out() {
    let input = format!(
        "{POOL}---\n{STORAGE}---\n{}---\n{}",
        pod("a", "data"),
        pod("b", "missing")
    );
    let (plan, _) = plan(&input);
    let claims = plan["nodeClaims"].as_array().unwrap();
    assert_eq!(claims.len(), 1);
    assert_eq!(claims[0]["pods"][0], "default/a");
    assert_eq!(claims[0]["launch"]["zone"], "test-zone-2");
    let left = &plan["unschedulable"][0];
    assert_eq!(left["pod"], "default/b");
    let reason = left["reason"].as_str().unwrap();
    assert!(
        reason.contains("persistentvolumeclaim default/missing not found"),
        "{reason}"
    );
}

#[test]
fn without_storage_objects_claims_are_ignored_with_a_notice() {
    let (plan, stderr) = plan(&format!("{POOL}---\n{}", pod("a", "data")));
    assert_eq!(plan["nodeClaims"][0]["pods"][0], "default/a");
    assert!(
        stderr.contains("volume topology and limits are ignored"),
        "{stderr}"
    );
}

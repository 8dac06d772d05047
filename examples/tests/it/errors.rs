//! Every error path: exit status 2 for invalid input, with a message naming the file, the
//! document, the object and the field; unknown kinds only warn.

use crate::{TempDir, karpenter};

const NODEPOOL: &str = "apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: default
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
  limits: {cpu: \"100\"}
";

/// Runs `plan -f <file>` over `text` (written as `name`) and returns (exit status, stderr).
fn plan_file(name: &str, text: &str, extra: &[&str]) -> (i32, String) {
    let dir = TempDir::new(&format!("err-{}", name.replace(['/', '.'], "-")));
    let path = dir.write(name, text);
    let mut args = vec!["plan", "-f", path.as_str(), "--catalog", "fake:10"];
    args.extend_from_slice(extra);
    let run = karpenter(&args, "");
    (run.code, run.stderr)
}

fn assert_names(stderr: &str, parts: &[&str]) {
    assert!(stderr.starts_with("error: "), "{stderr}");
    for p in parts {
        assert!(stderr.contains(p), "missing {p:?} in {stderr:?}");
    }
}

#[test]
fn yaml_syntax_error() {
    let (code, err) = plan_file("bad.yaml", &format!("{NODEPOOL}---\nkind: [Pod\n"), &[]);
    assert_eq!(code, 2);
    assert_names(&err, &["bad.yaml", "document 2", "invalid YAML"]);
}

#[test]
fn json_syntax_error() {
    let (code, err) = plan_file("bad.json", "{\"kind\": ", &[]);
    assert_eq!(code, 2);
    assert_names(&err, &["bad.json", "document 1", "invalid JSON"]);
}

#[test]
fn nodepool_schema_error_names_the_field() {
    let text = NODEPOOL.replace("operator: In", "operator: Maybe");
    let (code, err) = plan_file("np.yaml", &text, &[]);
    assert_eq!(code, 2);
    assert_names(
        &err,
        &[
            "np.yaml",
            "document 1",
            "NodePool/default",
            "spec.template.spec.requirements[0].operator",
        ],
    );
}

#[test]
fn nodepool_validation_error_names_the_field() {
    let text = NODEPOOL.replace("  limits:", "  weight: 500\n  limits:");
    let (code, err) = plan_file("np.yaml", &text, &[]);
    assert_eq!(code, 2);
    assert_names(
        &err,
        &["np.yaml", "document 1", "NodePool/default", "spec.weight"],
    );
}

#[test]
fn nodepool_with_a_restricted_label() {
    let text = NODEPOOL.replace(
        "karpenter.sh/capacity-type, operator: In, values: [on-demand]",
        "karpenter.sh/custom, operator: In, values: [x]",
    );
    let (code, err) = plan_file("np.yaml", &text, &[]);
    assert_eq!(code, 2);
    assert_names(
        &err,
        &["NodePool/default", "spec.template.spec.requirements[0]"],
    );
}

#[test]
fn duplicate_nodepools() {
    let (code, err) = plan_file("np.yaml", &format!("{NODEPOOL}---\n{NODEPOOL}"), &[]);
    assert_eq!(code, 2);
    assert_names(
        &err,
        &[
            "document 2",
            "NodePool/default",
            "metadata.name",
            "Duplicate",
        ],
    );
}

#[test]
fn deployment_decode_error_names_the_field() {
    let text = "apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop}
spec:
  replicas: lots
  selector: {}
  template: {spec: {containers: []}}
";
    let (code, err) = plan_file("d.yaml", text, &[]);
    assert_eq!(code, 2);
    assert_names(
        &err,
        &[
            "d.yaml",
            "document 1",
            "Deployment/shop/web",
            "spec.replicas",
        ],
    );
}

#[test]
fn negative_replicas() {
    let text = "apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db}
spec:
  replicas: -1
  serviceName: db
  selector: {}
  template: {spec: {containers: []}}
";
    let (code, err) = plan_file("s.yaml", text, &[]);
    assert_eq!(code, 2);
    assert_names(&err, &["StatefulSet/default/db", "spec.replicas"]);
}

#[test]
fn workload_without_pod_spec() {
    let text = "apiVersion: apps/v1
kind: ReplicaSet
metadata: {name: rs}
spec:
  selector: {}
";
    let (code, err) = plan_file("rs.yaml", text, &[]);
    assert_eq!(code, 2);
    assert_names(&err, &["ReplicaSet/default/rs", "spec.template"]);
}

#[test]
fn pod_with_a_bad_quantity_names_the_field() {
    let text = "apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  containers:
    - name: c
      resources: {requests: {cpu: two}}
";
    let (code, err) = plan_file("p.yaml", text, &[]);
    assert_eq!(code, 2);
    assert_names(
        &err,
        &[
            "p.yaml",
            "Pod/default/p",
            "spec.containers[0].resources.requests",
        ],
    );
}

#[test]
fn workload_template_errors_point_into_the_template() {
    let text = "apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 2
  selector: {}
  template:
    spec:
      containers:
        - name: c
          resources: {requests: {memory: much}}
";
    let (code, err) = plan_file("d.yaml", text, &[]);
    assert_eq!(code, 2);
    assert_names(
        &err,
        &[
            "Deployment/default/web",
            "spec.template.spec.containers[0].resources.requests",
        ],
    );
}

#[test]
fn duplicate_pods() {
    let text = "apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 2
  selector: {}
  template: {spec: {containers: [{name: c}]}}
---
apiVersion: v1
kind: Pod
metadata: {name: web-1}
spec: {containers: [{name: c}]}
";
    let (code, err) = plan_file("dup.yaml", text, &[]);
    assert_eq!(code, 2);
    assert_names(
        &err,
        &[
            "document 2",
            "Pod/default/web-1",
            "Duplicate",
            "Deployment/default/web",
        ],
    );
}

#[test]
fn invalid_ec2nodeclass() {
    let text = "apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  role: r
  amiSelectorTerms: []
  subnetSelectorTerms: [{id: subnet-1}]
  securityGroupSelectorTerms: [{id: sg-1}]
";
    let (code, err) = plan_file("c.yaml", text, &[]);
    assert_eq!(code, 2);
    assert_names(
        &err,
        &["c.yaml", "EC2NodeClass/default", "spec.amiSelectorTerms"],
    );
}

#[test]
fn ec2nodeclass_kubelet_settings_are_checked_with_the_aws_catalog() {
    let dir = TempDir::new("err-kubelet");
    let class = "apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  role: r
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{id: subnet-1}]
  securityGroupSelectorTerms: [{id: sg-1}]
  kubelet: {maxPods: -1}
";
    let path = dir.write("all.yaml", &format!("{class}---\n{NODEPOOL}"));
    let run = karpenter(&["plan", "-f", &path], "");
    assert_eq!(run.code, 2);
    assert_names(
        &run.stderr,
        &["EC2NodeClass/default", "spec.kubelet.maxPods"],
    );
}

#[test]
fn ec2nodeclass_is_checked_with_the_typed_crd_rules() {
    let dir = TempDir::new("err-typed-nodeclass");
    for (spec_extra, field) in [
        (
            "  tags: {karpenter.sh/nodepool: x}\n",
            "spec.tags[karpenter.sh/nodepool]",
        ),
        (
            "  metadataOptions: {httpPutResponseHopLimit: 99}\n",
            "spec.metadataOptions.httpPutResponseHopLimit",
        ),
        (
            "  blockDeviceMappings: [{deviceName: /dev/xvda, ebs: {volumeSize: 100Ti}}]\n",
            "spec.blockDeviceMappings[0].ebs.volumeSize",
        ),
    ] {
        let class = format!(
            "apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {{name: default}}
spec:
  role: r
  amiSelectorTerms: [{{alias: al2023@latest}}]
  subnetSelectorTerms: [{{id: subnet-1}}]
  securityGroupSelectorTerms: [{{id: sg-1}}]
{spec_extra}"
        );
        let path = dir.write("all.yaml", &format!("{class}---\n{NODEPOOL}"));
        let run = karpenter(&["plan", "-f", &path], "");
        assert_eq!(run.code, 2, "{field}: {}", run.stderr);
        assert_names(&run.stderr, &["EC2NodeClass/default", field]);
    }
}

#[test]
fn an_invalid_ec2nodeclass_fails_even_when_no_nodepool_uses_it() {
    let dir = TempDir::new("err-unused-nodeclass");
    let class = |name: &str, extra: &str| {
        format!(
            "apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {{name: {name}}}
spec:
  role: r
  amiSelectorTerms: [{{alias: al2023@latest}}]
  subnetSelectorTerms: [{{id: subnet-1}}]
  securityGroupSelectorTerms: [{{id: sg-1}}]
{extra}"
        )
    };
    let text = format!(
        "{}---\n{}---\n{NODEPOOL}",
        class("default", ""),
        class("unused", "  amiFamily: Bottlerocket\n")
    );
    let path = dir.write("all.yaml", &text);
    let run = karpenter(&["plan", "-f", &path], "");
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert_names(&run.stderr, &["EC2NodeClass/unused", "spec.amiFamily"]);
}

#[test]
fn missing_file() {
    let run = karpenter(&["plan", "-f", "no/such/file.yaml"], "");
    assert_eq!(run.code, 2);
    assert_names(&run.stderr, &["no/such/file.yaml"]);
}

#[test]
fn bad_options() {
    for (args, needle) in [
        (vec!["plan", "-f", "-", "--catalog", "fake:0"], "--catalog"),
        (
            vec![
                "plan",
                "-f",
                "-",
                "--catalog",
                "fake:3",
                "--spot-price-factor",
                "0.5",
            ],
            "--spot-price-factor",
        ),
        (
            vec!["plan", "-f", "-", "--spot-price-factor=-1"],
            "--spot-price-factor",
        ),
        (vec!["plan", "-f", "-", "--now", "yesterday"], "--now"),
        (
            vec!["plan", "-f", "-", "--allow", "no-such-rule"],
            "no-such-rule",
        ),
        (
            vec!["plan", "-f", "-", "--catalog", "missing-catalog.yaml"],
            "missing-catalog.yaml",
        ),
    ] {
        let run = karpenter(&args, "");
        assert_eq!(run.code, 2, "{args:?}: {}", run.stderr);
        assert!(run.stderr.contains(needle), "{args:?}: {}", run.stderr);
    }
}

#[test]
fn usage_errors_exit_2() {
    for args in [
        vec!["plan"],
        vec!["plan", "-f", "x", "-o", "xml"],
        vec!["plan", "--frobnicate"],
        vec!["unknown-subcommand"],
    ] {
        let run = karpenter(&args, "");
        assert_eq!(run.code, 2, "{args:?}");
    }
    assert_eq!(karpenter(&["--help"], "").code, 0);
    assert_eq!(karpenter(&["plan", "--help"], "").code, 0);
}

#[test]
fn invalid_catalog_file_names_the_field() {
    let dir = TempDir::new("err-catalog");
    let catalog = dir.write(
        "catalog.yaml",
        "instanceTypes:\n  - name: a\n    capacity: {cpu: \"2\"}\n    offerings:\n      - {zone: z1, capacityType: spot, price: -1}\n",
    );
    let run = karpenter(&["plan", "-f", "-", "--catalog", &catalog], "");
    assert_eq!(run.code, 2);
    assert_names(
        &run.stderr,
        &["catalog.yaml", "instanceTypes[0].offerings[0].price"],
    );
}

#[test]
fn unknown_kinds_warn_and_continue() {
    let text = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: settings}}\n---\n{NODEPOOL}---\nfoo: bar\n"
    );
    let (code, err) = plan_file("mixed.yaml", &text, &[]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("warning: "), "{err}");
    assert!(err.contains("ConfigMap/default/settings"), "{err}");
    assert!(err.contains("document 3"), "{err}");
}

#[test]
fn unknown_nodepool_fields_warn() {
    let text = NODEPOOL.replace("  limits:", "  colour: blue\n  limits:");
    let (code, err) = plan_file("np.yaml", &text, &[]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("unknown field spec.colour"), "{err}");
}

#[test]
fn nodepool_without_requirements() {
    // The seed guide's team-a NodePool (18.1) has no spec.template.spec.requirements, which the
    // v1 CRD requires.
    let text = "apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: team-a
spec:
  template:
    metadata:
      labels:
        team: team-a
    spec:
      nodeClassRef:
        group: karpenter.k8s.aws
        kind: EC2NodeClass
        name: team-a-nodes
      taints:
        - key: team
          value: team-a
          effect: NoSchedule
  limits:
    cpu: \"500\"
    memory: 500Gi
";
    let (code, err) = plan_file("team-a.yaml", text, &[]);
    assert_eq!(code, 2, "{err}");
    assert_names(
        &err,
        &[
            "team-a.yaml",
            "NodePool/team-a",
            "spec.template.spec.requirements",
        ],
    );
}

//! `karpenter migrate`: the seed guide's v1 examples written as v1beta1 come back as the guide
//! wrote them (the round trip, with v1beta1's defaults written out where v1 would read them
//! differently), hand-written v1beta1 manifests move their kubelet to the EC2NodeClass, the
//! output is valid input to `karpenter plan`, and what cannot be carried over is an error
//! naming the file, the object and the field.

use serde_json::{Value, json};

use crate::{TempDir, karpenter, root};

fn fixtures(dir: &str) -> String {
    root()
        .join("tests/fixtures/migrate")
        .join(dir)
        .display()
        .to_string()
}

/// Every document of a YAML stream, by `Kind/name`.
fn by_name(text: &str) -> Vec<(String, Value)> {
    let docs = karpenter_plan::manifests::documents_from_str("out.yaml", text, false)
        .expect("the output parses");
    docs.into_iter()
        .map(|d| (karpenter_plan::manifests::object_name(&d.value), d.value))
        .collect()
}

fn find<'a>(docs: &'a [(String, Value)], name: &str) -> &'a Value {
    &docs
        .iter()
        .find(|(n, _)| n == name)
        .unwrap_or_else(|| {
            panic!(
                "{name} not in {:?}",
                docs.iter().map(|d| &d.0).collect::<Vec<_>>()
            )
        })
        .1
}

fn migrate_ok(dir: &str) -> (Vec<(String, Value)>, String) {
    let run = karpenter(&["migrate", "-f", &fixtures(dir)], "");
    assert_eq!(run.code, 0, "stderr: {}", run.stderr);
    (by_name(&run.stdout), run.stderr)
}

/// The guide's v1 documents.
fn guide_v1() -> Vec<(String, Value)> {
    let mut out = Vec::new();
    let dir = std::path::Path::new(&fixtures("guide-v1")).to_path_buf();
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        out.extend(by_name(&text));
    }
    out
}

fn set(value: &mut Value, pointer: &str, to: Value) {
    let (parent, key) = pointer.rsplit_once('/').unwrap();
    value
        .pointer_mut(parent)
        .and_then(Value::as_object_mut)
        .unwrap_or_else(|| panic!("{parent}"))
        .insert(key.to_string(), to);
}

#[test]
fn the_guides_v1beta1_examples_come_back_as_the_guide_wrote_them() {
    let (migrated, stderr) = migrate_ok("guide-v1beta1");
    let guide = guide_v1();
    assert_eq!(migrated.len(), guide.len(), "{stderr}");
    for (name, expected) in &guide {
        let mut expected = expected.clone();
        // What v1beta1 cannot say, or says by default, and the migration writes out.
        match name.as_str() {
            // WhenUnderutilized took no consolidateAfter in v1beta1; v1's equivalent is 0s (the
            // guide's 1m / 30s are v1-only choices). v1beta1's expireAfter default is written.
            "NodePool/general-purpose" | "NodePool/spot-workloads" => {
                set(
                    &mut expected,
                    "/spec/disruption/consolidateAfter",
                    json!("0s"),
                );
                set(
                    &mut expected,
                    "/spec/template/spec/expireAfter",
                    json!("720h"),
                );
            }
            // No disruption block: v1beta1's defaults, written as v1.
            "NodePool/arm-preferred" | "NodePool/amd-fallback" => {
                set(
                    &mut expected,
                    "/spec/disruption",
                    json!({"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "0s"}),
                );
                set(
                    &mut expected,
                    "/spec/template/spec/expireAfter",
                    json!("720h"),
                );
            }
            // Exact: WhenEmpty, expireAfter moved; the classes' alias from amiFamily.
            _ => {}
        }
        assert_eq!(find(&migrated, name), &expected, "{name}");
    }
    // Each of the guide's 19.2 rows is explained on stderr.
    for line in [
        "NodePool/general-purpose: spec.disruption.consolidationPolicy: WhenUnderutilized -> WhenEmptyOrUnderutilized",
        "NodePool/batch-jobs: spec.disruption.expireAfter: moved to spec.template.spec.expireAfter (24h)",
        "NodePool/batch-jobs: spec.template.spec.terminationGracePeriod: new in v1",
        "EC2NodeClass/default: spec.amiFamily: AL2023 without amiSelectorTerms -> amiSelectorTerms [{alias: al2023@latest}]",
        "NodePool/spot-workloads: spec.template.spec.nodeClassRef: {apiVersion, kind, name} -> {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}",
    ] {
        assert!(stderr.contains(line), "missing {line:?} in\n{stderr}");
    }
}

#[test]
fn the_migrated_guide_examples_plan() {
    let dir = TempDir::new("migrate-plan");
    let run = karpenter(&["migrate", "-f", &fixtures("guide-v1beta1")], "");
    assert_eq!(run.code, 0, "{}", run.stderr);
    // The batch NodePool's class is not among the guide's; plan what has its class.
    let kept: Vec<String> = by_name(&run.stdout)
        .into_iter()
        .filter(|(n, _)| n != "NodePool/batch-jobs")
        .map(|(_, v)| serde_json::to_string(&v).unwrap())
        .collect();
    let path = dir.write("migrated.yaml", &kept.join("\n---\n"));
    let pod = "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n    - name: c\n      resources: {requests: {cpu: \"1\", memory: 2Gi}}\n";
    let pods = dir.write("pod.yaml", pod);
    let plan = karpenter(&["plan", "-f", &path, "-f", &pods, "-o", "json"], "");
    assert_eq!(plan.code, 0, "{}", plan.stderr);
    let v: Value = serde_json::from_str(&plan.stdout).unwrap();
    assert_eq!(v["nodeClaims"].as_array().map(Vec::len), Some(1), "{v}");
}

#[test]
fn a_shared_kubelet_moves_to_the_class() {
    let (out, stderr) = migrate_ok("kubelet-shared");
    assert_eq!(out.len(), 3, "{out:?}");
    let class = find(&out, "EC2NodeClass/shared");
    assert_eq!(
        class["spec"]["kubelet"],
        json!({"maxPods": 58, "evictionHard": {"memory.available": "5%"}})
    );
    assert_eq!(
        class["spec"]["amiSelectorTerms"],
        json!([{"alias": "bottlerocket@latest"}])
    );
    assert!(class["spec"].get("amiFamily").is_none());
    for pool in ["NodePool/spot-pool", "NodePool/on-demand-pool"] {
        let p = find(&out, pool);
        assert!(
            p["spec"]["template"]["spec"].get("kubelet").is_none(),
            "{p}"
        );
        assert_eq!(
            p["spec"]["template"]["spec"]["nodeClassRef"]["name"],
            "shared"
        );
    }
    // WhenUnderutilized with consolidateAfter Never stays off; expireAfter Never moves.
    let x = find(&out, "NodePool/spot-pool");
    assert_eq!(x["spec"]["disruption"]["consolidateAfter"], "Never");
    assert_eq!(x["spec"]["template"]["spec"]["expireAfter"], "Never");
    assert_eq!(x["spec"]["disruption"]["budgets"], json!([{"nodes": "1"}]));
    assert!(
        stderr.contains("EC2NodeClass/shared: spec.kubelet: set from the kubelet of NodePool(s) spot-pool, on-demand-pool"),
        "{stderr}"
    );
}

#[test]
fn disagreeing_kubelets_get_a_class_per_nodepool() {
    let (out, stderr) = migrate_ok("kubelet-split");
    let names: Vec<&str> = out.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "EC2NodeClass/default",
            "EC2NodeClass/default-a",
            "EC2NodeClass/default-b",
            "NodePool/a",
            "NodePool/b",
            "NodePool/c"
        ]
    );
    let class_of = |pool: &str| {
        find(&out, pool)["spec"]["template"]["spec"]["nodeClassRef"]["name"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert_eq!(class_of("NodePool/a"), "default-a");
    assert_eq!(class_of("NodePool/b"), "default-b");
    assert_eq!(class_of("NodePool/c"), "default");
    assert_eq!(
        find(&out, "EC2NodeClass/default-a")["spec"]["kubelet"],
        json!({"maxPods": 110, "systemReserved": {"cpu": "100m", "memory": "100Mi"}})
    );
    assert_eq!(
        find(&out, "EC2NodeClass/default-b")["spec"]["kubelet"],
        json!({"maxPods": 50})
    );
    assert!(
        find(&out, "EC2NodeClass/default")["spec"]
            .get("kubelet")
            .is_none()
    );
    // The copies are the class but for name and kubelet.
    let mut copy = find(&out, "EC2NodeClass/default-b").clone();
    set(&mut copy, "/metadata/name", json!("default"));
    copy["spec"].as_object_mut().unwrap().remove("kubelet");
    assert_eq!(&copy, find(&out, "EC2NodeClass/default"));
    assert!(
        stderr.contains("NodePool/a: spec.template.spec.kubelet: NodePools a, b, c share EC2NodeClass default with different kubelets: created EC2NodeClass default-a"),
        "{stderr}"
    );
    // v1beta1's IMDS hop limit is kept, and said so.
    assert_eq!(
        find(&out, "EC2NodeClass/default")["spec"]["metadataOptions"]["httpPutResponseHopLimit"],
        2
    );
    assert!(stderr.contains("v1's default hop limit is 1"), "{stderr}");
}

/// Runs `migrate` over `text` and returns (status, stdout, stderr).
fn migrate_text(text: &str) -> (i32, String, String) {
    let dir = TempDir::new("migrate-err");
    let path = dir.write("in.yaml", text);
    let run = karpenter(&["migrate", "-f", &path], "");
    (run.code, run.stdout, run.stderr)
}

const POOL: &str = "apiVersion: karpenter.sh/v1beta1
kind: NodePool
metadata: {name: p}
spec:
  template:
    spec:
      nodeClassRef: {name: c}
      requirements:
        - {key: kubernetes.io/arch, operator: In, values: [amd64]}
";

const CLASS: &str = "apiVersion: karpenter.k8s.aws/v1beta1
kind: EC2NodeClass
metadata: {name: c}
spec:
  amiFamily: AL2023
  role: r
  subnetSelectorTerms: [{tags: {a: b}}]
  securityGroupSelectorTerms: [{tags: {a: b}}]
";

#[test]
fn what_cannot_be_carried_over_is_an_error_naming_the_field() {
    let cases: [(String, &[&str]); 8] = [
        (
            POOL.replace("      requirements:", "      resources: {requests: {cpu: \"2\"}}\n      requirements:"),
            &["in.yaml: document 1: NodePool/p: spec.template.spec.resources: v1 NodePool templates have no resources"],
        ),
        (
            POOL.replace("      requirements:", "      colour: blue\n      requirements:"),
            &["NodePool/p: spec.template.spec.colour: unknown field"],
        ),
        (
            POOL.replace("      requirements:", "      kubelet: {maxPods: 20}\n      requirements:"),
            &["NodePool/p: spec.template.spec.kubelet: v1 keeps the kubelet in the EC2NodeClass, and EC2NodeClass c is not among the inputs"],
        ),
        (
            POOL.replace("  template:\n", "  template:\n    metadata: {annotations: {karpenter.sh/do-not-consolidate: \"true\"}}\n"),
            &["NodePool/p: spec.template.metadata.annotations[karpenter.sh/do-not-consolidate]: karpenter.sh/do-not-consolidate is not supported in v1"],
        ),
        (
            format!("{POOL}  disruption: {{consolidationPolicy: WhenEmpty}}\n"),
            &["NodePool/p: spec.disruption.consolidateAfter: required with consolidationPolicy WhenEmpty"],
        ),
        (
            CLASS.replace("AL2023", "Ubuntu"),
            &["EC2NodeClass/c: spec.amiFamily: Ubuntu is not an AMI family in v1"],
        ),
        (
            // v1 forbids this tag key; v1beta1 allowed it.
            format!("{CLASS}  tags: {{eks:eks-cluster-name: x}}\n"),
            &["EC2NodeClass/c: spec.tags", "not valid v1"],
        ),
        (
            "apiVersion: karpenter.sh/v1alpha5\nkind: Provisioner\nmetadata: {name: old}\nspec: {}\n".to_string(),
            &["Provisioner/old: apiVersion: karpenter.sh/v1alpha5 Provisioner is older than v1beta1"],
        ),
    ];
    for (text, wanted) in cases {
        let (code, out, err) = migrate_text(&text);
        assert_eq!(code, 2, "{text}\n{err}");
        assert!(out.is_empty(), "nothing is written on error: {out}");
        for w in wanted {
            assert!(err.contains(w), "missing {w:?} in {err:?}");
        }
        assert!(err.lines().all(|l| l.starts_with("error: ")), "{err}");
    }
}

#[test]
fn ubuntu_with_ami_terms_becomes_al2_with_ubuntus_root_volume() {
    let text = CLASS.replace(
        "  amiFamily: AL2023\n",
        "  amiFamily: Ubuntu\n  amiSelectorTerms: [{id: ami-0123456789abcdef0}]\n",
    );
    let (code, out, err) = migrate_text(&text);
    assert_eq!(code, 0, "{err}");
    let docs = by_name(&out);
    let spec = &find(&docs, "EC2NodeClass/c")["spec"];
    assert_eq!(spec["amiFamily"], "AL2");
    assert_eq!(
        spec["amiSelectorTerms"],
        json!([{"id": "ami-0123456789abcdef0"}])
    );
    assert_eq!(spec["blockDeviceMappings"][0]["deviceName"], "/dev/sda1");
    assert!(err.contains("Ubuntu -> AL2"), "{err}");
}

#[test]
fn other_kinds_pass_through_and_nodeclaims_are_dropped() {
    let text = format!(
        "{CLASS}---\n{POOL}---\napiVersion: karpenter.sh/v1beta1\nkind: NodeClaim\nmetadata: {{name: p-abc}}\nspec: {{}}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: cm, namespace: ns}}\ndata: {{a: b}}\n"
    );
    let (code, out, err) = migrate_text(&text);
    assert_eq!(code, 0, "{err}");
    let docs = by_name(&out);
    let names: Vec<&str> = docs.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["EC2NodeClass/c", "NodePool/p", "ConfigMap/ns/cm"]);
    assert_eq!(find(&docs, "ConfigMap/ns/cm")["data"], json!({"a": "b"}));
    assert!(err.contains("NodeClaim/p-abc: -: dropped"), "{err}");
    // Migrating the output again changes nothing.
    let (code, again, _) = migrate_text(&out);
    assert_eq!(code, 0);
    assert_eq!(by_name(&again), docs);
}

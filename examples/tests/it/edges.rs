//! The planner's messages an operator reads: `--explain` naming what ruled out every instance
//! type, no empty details, no usable NodePool, `--help`, unknown catalogs, the table's columns.

use serde_json::Value;

use crate::{karpenter, manifests};

const POOL: &str = "apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.test.sh, kind: TestNodeClass, name: default}
      requirements: []
";

fn pod(name: &str, extra: &str, cpu: &str) -> String {
    format!(
        "---\napiVersion: v1\nkind: Pod\nmetadata: {{name: {name}}}\nspec:\n{extra}  containers:\n    - name: c\n      resources: {{requests: {{cpu: \"{cpu}\"}}}}\n"
    )
}

/// `--explain` over standard input with `fake:10`: the per-pool reason of `pod`.
fn explained(input: &str, pod: &str) -> (String, String) {
    let run = karpenter(
        &[
            "plan",
            "-f",
            "-",
            "--catalog",
            "fake:10",
            "--explain",
            "-o",
            "json",
        ],
        input,
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let plan: Value = serde_json::from_str(&run.stdout).unwrap();
    let u = plan["unschedulable"]
        .as_array()
        .unwrap()
        .iter()
        .find(|u| u["pod"] == pod)
        .unwrap_or_else(|| panic!("{pod} not left out: {plan:#}"));
    (
        u["reason"].as_str().unwrap().to_string(),
        u["nodePools"][0]["reason"].as_str().unwrap().to_string(),
    )
}

#[test]
fn explain_names_the_pods_requirement() {
    let input = format!(
        "{POOL}{}",
        pod("s390", "  nodeSelector: {kubernetes.io/arch: s390x}\n", "1")
    );
    let (_, why) = explained(&input, "default/s390");
    assert!(
        why.contains("the pod's requirement kubernetes.io/arch In [s390x]"),
        "{why}"
    );
    assert!(why.contains("rules out all 10 instance types"), "{why}");
}

#[test]
fn explain_names_the_resource() {
    let input = format!("{POOL}{}", pod("huge", "", "500"));
    let (reason, why) = explained(&input, "default/huge");
    assert!(why.starts_with("resource cpu: the pod needs 500"), "{why}");
    assert!(!reason.contains("daemonset overhead={}"), "{reason}");
}

#[test]
fn explain_names_the_nodepools_requirement() {
    let pool = POOL.replace(
        "requirements: []",
        "requirements: [{key: node.kubernetes.io/instance-type, operator: In, values: [no-such-type]}]",
    );
    let input = format!("{pool}{}", pod("a", "", "1"));
    let (_, why) = explained(&input, "default/a");
    assert!(
        why.contains(
            "the NodePool's requirement node.kubernetes.io/instance-type In [no-such-type] matches none of the catalog's 10 instance types"
        ),
        "{why}"
    );
}

#[test]
fn no_daemonset_overhead_noise() {
    let run = karpenter(&["plan", "-f", &manifests("gpu"), "--explain"], "");
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(!run.stdout.contains("overhead={}"), "{}", run.stdout);
    assert!(
        run.stdout.contains("did not tolerate taint"),
        "{}",
        run.stdout
    );
}

#[test]
fn a_pod_with_no_usable_nodepool_says_so() {
    // The only NodePool is static: it does not provision.
    let pool = POOL.replace("spec:\n  template:", "spec:\n  replicas: 2\n  template:");
    let input = format!("{pool}{}", pod("a", "", "1"));
    let run = karpenter(
        &["plan", "-f", "-", "--catalog", "fake:10", "-o", "json"],
        &input,
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let plan: Value = serde_json::from_str(&run.stdout).unwrap();
    let reason = plan["unschedulable"][0]["reason"].as_str().unwrap();
    assert!(reason.starts_with("no usable NodePool"), "{reason}");
    assert!(run.stderr.contains("static"), "{}", run.stderr);
}

#[test]
fn help_gives_exit_codes_spot_factor_and_catalog_format() {
    let run = karpenter(&["plan", "--help"], "");
    assert_eq!(run.code, 0);
    for needle in [
        "Exit status: 0",
        "2 for invalid input",
        "--spot-price-factor x on-demand (default 0.35)",
        "instanceTypes:",
        "offerings:",
        "fake:N",
        "docs/plan-contract.md",
    ] {
        assert!(run.stdout.contains(needle), "{needle}: {}", run.stdout);
    }
}

#[test]
fn an_unknown_catalog_lists_the_names() {
    let run = karpenter(&["plan", "-f", "-", "--catalog", "azure"], POOL);
    assert_eq!(run.code, 2);
    assert!(
        run.stderr
            .contains("--catalog azure: not a catalog name and no such file"),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains("aws") && run.stderr.contains("fake:N"),
        "{}",
        run.stderr
    );
}

#[test]
fn the_table_explains_its_columns_and_lists_every_zone() {
    let run = karpenter(&["plan", "-f", &manifests("general-purpose")], "");
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.contains("| Zones"), "{}", run.stdout);
    assert!(
        run.stdout
            .contains("Options: instance types it may launch as"),
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains("us-east-1{"), "{}", run.stdout);
}

#[test]
fn disruption_with_a_pinned_now_is_byte_identical() {
    let dir = manifests("cluster-dump");
    let args = [
        "plan",
        "-f",
        dir.as_str(),
        "--disruption",
        "--now",
        "2026-06-10T00:00:00Z",
    ];
    let a = karpenter(&args, "");
    let b = karpenter(&args, "");
    assert_eq!(a.code, 0, "{}", a.stderr);
    assert_eq!(a.stdout, b.stdout);
    assert!(a.stdout.contains("Disruption: "), "{}", a.stdout);
}

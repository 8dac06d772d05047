//! Parity with upstream's settings and NodeOverlay: `--feature-gates`, `--preference-policy`
//! and `--min-values-policy` on `plan` and `simulate`, and NodeOverlays in the manifests.

use serde_json::Value;

use crate::{TempDir, karpenter, manifests, root};

/// The nginx example (a spot-only NodePool, ten 500m pods) plus `extra` documents, in a
/// directory of their own.
fn nginx_with(tag: &str, extra: &str) -> TempDir {
    let dir = TempDir::new(tag);
    for f in ["deployment.yaml", "ec2nodeclass.yaml", "nodepool.yaml"] {
        let text = std::fs::read_to_string(root().join("manifests").join("nginx").join(f)).unwrap();
        dir.write(f, &text);
    }
    if !extra.is_empty() {
        dir.write("overlay.yaml", extra);
    }
    dir
}

fn plan(args: &[&str]) -> crate::Run {
    let mut all = vec!["plan"];
    all.extend_from_slice(args);
    karpenter(&all, "")
}

fn plan_json(args: &[&str]) -> (Value, String) {
    let mut all = args.to_vec();
    all.extend_from_slice(&["-o", "json"]);
    let run = plan(&all);
    assert_eq!(run.code, 0, "{args:?}\nstderr: {}", run.stderr);
    (serde_json::from_str(&run.stdout).unwrap(), run.stderr)
}

fn launches(plan: &Value) -> Vec<(String, String, f64)> {
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
}

const OVERLAY: &str = "apiVersion: karpenter.sh/v1alpha1
kind: NodeOverlay
metadata: {name: negotiated-m5}
spec:
  requirements:
    - {key: node.kubernetes.io/instance-type, operator: In, values: [m5.2xlarge]}
  price: \"0.001\"
";

/// The done-when: `karpenter plan -f DIR --feature-gates NodeOverlay=true` on a
/// directory with an overlay prices claims with the overlay's price.
#[test]
fn node_overlay_prices_claims_with_the_overlays_price() {
    let dir = nginx_with("overlay", OVERLAY);
    let path = dir.0.display().to_string();
    let (on, _) = plan_json(&["-f", &path, "--feature-gates", "NodeOverlay=true"]);
    assert_eq!(
        launches(&on),
        [("m5.2xlarge".to_string(), "spot".to_string(), 0.001)],
        "{on:#}"
    );
    assert_eq!(on["summary"]["costPerHour"].as_f64(), Some(0.001));
    // Gate off (upstream's default): the overlay is reported and not applied.
    let (off, stderr) = plan_json(&["-f", &path]);
    assert!(
        stderr.contains(
            "NodeOverlay/negotiated-m5: not applied: the NodeOverlay feature gate is off"
        ),
        "{stderr}"
    );
    let (plain, _) = plan_json(&["-f", &manifests("nginx")]);
    assert_eq!(launches(&off), launches(&plain));
    assert!(launches(&off)[0].2 > 0.001);
}

#[test]
fn node_overlay_adjustments_conflicts_and_bad_overlays() {
    // A -100% adjustment on every spot offering: every claim is free.
    let free = "apiVersion: karpenter.sh/v1alpha1
kind: NodeOverlay
metadata: {name: free-spot}
spec:
  requirements: [{key: karpenter.sh/capacity-type, operator: In, values: [spot]}]
  priceAdjustment: \"-100%\"
";
    let dir = nginx_with("overlay-adjust", free);
    let path = dir.0.display().to_string();
    let (p, _) = plan_json(&["-f", &path, "--feature-gates", "NodeOverlay=true"]);
    assert!(launches(&p).iter().all(|l| l.2 == 0.0), "{p:#}");
    // Two overlays of equal weight on the same offerings: the one whose name comes first in
    // the alphabet conflicts and is reported; the other applies.
    let both = format!(
        "{OVERLAY}---\n{}",
        OVERLAY
            .replace("negotiated-m5", "another-m5")
            .replace("0.001", "0.002")
    );
    let dir = nginx_with("overlay-conflict", &both);
    let path = dir.0.display().to_string();
    let (p, stderr) = plan_json(&["-f", &path, "--feature-gates", "NodeOverlay=true"]);
    assert_eq!(launches(&p)[0].2, 0.001);
    assert!(
        stderr.contains("NodeOverlay/another-m5: not applied: ValidationSucceeded=False, Conflict"),
        "{stderr}"
    );
    // CRD rules: both price and priceAdjustment is invalid input (exit 2, the field named).
    let bad = OVERLAY.replace(
        "price: \"0.001\"",
        "price: \"0.001\"\n  priceAdjustment: \"+1\"",
    );
    let dir = nginx_with("overlay-bad", &bad);
    let path = dir.0.display().to_string();
    let run = plan(&["-f", &path, "--feature-gates", "NodeOverlay=true"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains("NodeOverlay/negotiated-m5"),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr
            .contains("cannot set both 'price' and 'priceAdjustment'"),
        "{}",
        run.stderr
    );
    // Capacity on cpu is refused.
    let bad = OVERLAY.replace("price: \"0.001\"", "capacity: {cpu: \"64\"}");
    let dir = nginx_with("overlay-cpu", &bad);
    let run = plan(&["-f", &dir.0.display().to_string()]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("spec.capacity.cpu"), "{}", run.stderr);
}

#[test]
fn node_overlay_capacity_schedules_extended_resources() {
    let overlay = "apiVersion: karpenter.sh/v1alpha1
kind: NodeOverlay
metadata: {name: fuse}
spec:
  requirements: [{key: node.kubernetes.io/instance-type, operator: In, values: [m5.xlarge]}]
  capacity: {smarter-devices/fuse: \"2\"}
";
    let pod = "apiVersion: v1
kind: Pod
metadata: {name: needs-fuse}
spec:
  containers:
    - name: c
      resources: {requests: {cpu: 100m, smarter-devices/fuse: \"1\"}, limits: {smarter-devices/fuse: \"1\"}}
";
    let dir = TempDir::new("overlay-capacity");
    for f in ["ec2nodeclass.yaml", "nodepool.yaml"] {
        let text = std::fs::read_to_string(root().join("manifests").join("nginx").join(f)).unwrap();
        dir.write(f, &text);
    }
    dir.write("overlay.yaml", overlay);
    dir.write("pod.yaml", pod);
    let path = dir.0.display().to_string();
    let (p, _) = plan_json(&["-f", &path, "--feature-gates", "NodeOverlay=true"]);
    assert_eq!(launches(&p).len(), 1, "{p:#}");
    assert_eq!(launches(&p)[0].0, "m5.xlarge");
    assert_eq!(
        p["nodeClaims"][0]["instanceTypes"],
        serde_json::json!(["m5.xlarge"])
    );
    let (p, _) = plan_json(&["-f", &path]);
    assert!(
        launches(&p).is_empty(),
        "no type has the resource without the overlay"
    );
    assert_eq!(p["unschedulable"].as_array().unwrap().len(), 1);
}

#[test]
fn bad_settings_are_usage_errors_naming_the_flag() {
    let nginx = manifests("nginx");
    for (args, needle) in [
        (
            ["--feature-gates", "NodeOverlays=true"],
            "--feature-gates: unknown feature gate \"NodeOverlays\"",
        ),
        (
            ["--feature-gates", "NodeOverlay=maybe"],
            "--feature-gates: feature gate NodeOverlay: \"maybe\" is not true or false",
        ),
        (
            ["--feature-gates", "StaticCapacity=true"],
            "--feature-gates: StaticCapacity=true",
        ),
        (
            ["--preference-policy", "respect"],
            "--preference-policy: invalid preference policy \"respect\"",
        ),
        (
            ["--min-values-policy", "Loose"],
            "--min-values-policy: invalid min-values policy \"Loose\"",
        ),
    ] {
        let mut all = vec!["-f", nginx.as_str()];
        all.extend_from_slice(&args);
        let run = plan(&all);
        assert_eq!(run.code, 2, "{args:?}: {}", run.stderr);
        assert!(run.stderr.contains(needle), "{args:?}: {}", run.stderr);
        let w = root()
            .join("workloads")
            .join("day.yaml")
            .display()
            .to_string();
        let mut sim = vec!["simulate", "-f", nginx.as_str(), "--workload", w.as_str()];
        sim.extend_from_slice(&args);
        let run = karpenter(&sim, "");
        assert_eq!(run.code, 2, "simulate {args:?}: {}", run.stderr);
        assert!(
            run.stderr.contains(needle),
            "simulate {args:?}: {}",
            run.stderr
        );
    }
    let help = karpenter(&["plan", "--help"], "").stdout;
    for flag in [
        "--feature-gates",
        "--preference-policy",
        "--min-values-policy",
        "NodeOverlay=true",
    ] {
        assert!(help.contains(flag), "{flag} not in plan --help");
    }
    let help = karpenter(&["simulate", "--help"], "").stdout;
    assert!(help.contains("--feature-gates"));
}

const ANY_POOL: &str = "apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements: REQS
";

/// Upstream's PREFERENCE_POLICY: with Respect a preferred node affinity is honoured (relaxed
/// only when it cannot be met); with Ignore it is not read, so the cheaper spot offering wins.
#[test]
fn preference_policy_respect_and_ignore() {
    let pod = "apiVersion: v1
kind: Pod
metadata: {name: prefers-od}
spec:
  affinity:
    nodeAffinity:
      preferredDuringSchedulingIgnoredDuringExecution:
        - weight: 1
          preference:
            matchExpressions: [{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}]
  containers: [{name: c, resources: {requests: {cpu: \"1\"}}}]
";
    let input = format!("{}---\n{pod}", ANY_POOL.replace("REQS", "[]"));
    let run = |policy: &str| -> Value {
        let r = karpenter(
            &[
                "plan",
                "-f",
                "-",
                "-o",
                "json",
                "--preference-policy",
                policy,
            ],
            &input,
        );
        assert_eq!(r.code, 0, "{}", r.stderr);
        serde_json::from_str(&r.stdout).unwrap()
    };
    assert_eq!(launches(&run("Respect"))[0].1, "on-demand");
    assert_eq!(launches(&run("Ignore"))[0].1, "spot");
    let r = karpenter(&["plan", "-f", "-", "-o", "json"], &input);
    let default: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(
        launches(&default)[0].1,
        "on-demand",
        "Respect is the default"
    );
}

/// Upstream's MIN_VALUES_POLICY: minValues that the instance types cannot meet leave the pod
/// out under Strict, and are lowered to what they meet under BestEffort.
#[test]
fn min_values_policy_strict_and_best_effort() {
    let reqs = "
        - {key: node.kubernetes.io/instance-type, operator: In, values: [m5.large, m5.xlarge]}
        - {key: karpenter.k8s.aws/instance-family, operator: Exists, minValues: 2}";
    let pod = "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers: [{name: c, resources: {requests: {cpu: \"1\"}}}]\n";
    let input = format!("{}---\n{pod}", ANY_POOL.replace("REQS", reqs));
    let run = |policy: &str| -> Value {
        let r = karpenter(
            &[
                "plan",
                "-f",
                "-",
                "-o",
                "json",
                "--min-values-policy",
                policy,
            ],
            &input,
        );
        assert_eq!(r.code, 0, "{}", r.stderr);
        serde_json::from_str(&r.stdout).unwrap()
    };
    let strict = run("Strict");
    assert!(launches(&strict).is_empty(), "{strict:#}");
    assert_eq!(strict["unschedulable"][0]["pod"], "default/p", "{strict:#}");
    let best = run("BestEffort");
    assert_eq!(launches(&best).len(), 1, "{best:#}");
}

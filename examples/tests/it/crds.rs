//! `karpenter crds` and the `controller` command line (the controller itself runs in `e2e`).

use super::karpenter;

#[test]
fn crds_prints_the_nodepool_nodeclaim_nodeoverlay_and_ec2nodeclass_crds_as_multi_document_yaml() {
    let run = karpenter(&["crds"], "");
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.starts_with("---\n"));
    let docs: Vec<serde_json::Value> =
        serde_saphyr::from_multiple(&run.stdout).expect("valid multi-document YAML");
    let names: Vec<&str> = docs
        .iter()
        .map(|d| d["metadata"]["name"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(
        names,
        [
            "nodepools.karpenter.sh",
            "nodeclaims.karpenter.sh",
            "nodeoverlays.karpenter.sh",
            "ec2nodeclasses.karpenter.k8s.aws"
        ]
    );
    for d in &docs {
        assert_eq!(d["kind"], "CustomResourceDefinition");
        assert_eq!(d["apiVersion"], "apiextensions.k8s.io/v1");
        let version = if d["spec"]["names"]["kind"] == "NodeOverlay" {
            "v1alpha1"
        } else {
            "v1"
        };
        assert_eq!(d["spec"]["versions"][0]["name"], version);
    }
}

#[test]
fn crds_kwok_adds_the_kwoknodeclass_crd_last() {
    let run = karpenter(&["crds", "--kwok"], "");
    assert_eq!(run.code, 0, "{}", run.stderr);
    let docs: Vec<serde_json::Value> =
        serde_saphyr::from_multiple(&run.stdout).expect("valid multi-document YAML");
    let names: Vec<&str> = docs
        .iter()
        .map(|d| d["metadata"]["name"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(
        names,
        [
            "nodepools.karpenter.sh",
            "nodeclaims.karpenter.sh",
            "nodeoverlays.karpenter.sh",
            "ec2nodeclasses.karpenter.k8s.aws",
            "kwoknodeclasses.karpenter.kwok.sh"
        ]
    );
    let kwok = &docs[4];
    assert_eq!(kwok["spec"]["group"], "karpenter.kwok.sh");
    assert_eq!(kwok["spec"]["scope"], "Cluster");
    assert_eq!(kwok["spec"]["versions"][0]["name"], "v1alpha1");
    assert_eq!(kwok["spec"]["names"]["kind"], "KWOKNodeClass");
}

#[test]
fn controller_help_tells_how_to_deploy_and_lists_upstream_settings() {
    let run = karpenter(&["controller", "--help"], "");
    assert_eq!(run.code, 0, "{}", run.stderr);
    for needle in [
        "karpenter crds | kubectl apply --server-side -f -",
        "deploy/",
        "docs/deploy-eks.md",
        "[env: CLUSTER_NAME=]",
        "[env: INTERRUPTION_QUEUE=]",
        "[env: BATCH_IDLE_DURATION=]",
        "[env: BATCH_MAX_DURATION=]",
        "[env: FEATURE_GATES=]",
        "[env: LOG_LEVEL=]",
        "--cloud-provider",
    ] {
        assert!(
            run.stdout.contains(needle),
            "missing {needle:?} in:\n{}",
            run.stdout
        );
    }
}

#[test]
fn controller_rejects_bad_settings_before_contacting_a_cluster() {
    let run = karpenter(&["controller", "--batch-idle-duration", "3d"], "");
    assert_eq!(run.code, 2);
    assert!(run.stderr.contains("3d"), "{}", run.stderr);
    let run = karpenter(&["controller", "--feature-gates", "NodeRepair=maybe"], "");
    assert_eq!(run.code, 2);
    assert!(run.stderr.contains("NodeRepair"), "{}", run.stderr);
}

#[test]
fn plan_from_cluster_without_a_cluster_fails_with_a_clear_error() {
    let run = karpenter(&["plan", "--kubeconfig", "/nonexistent/kubeconfig"], "");
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("--from-cluster"), "{}", run.stderr);
    assert!(
        run.stderr.contains("/nonexistent/kubeconfig"),
        "{}",
        run.stderr
    );
}

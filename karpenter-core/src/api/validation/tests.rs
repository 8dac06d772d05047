use super::*;

#[test]
fn budget_nodes_pattern() {
    for good in ["0", "5", "10%", "0%", "100%", "99%", "1000"] {
        assert!(matches_budget_nodes(good), "{good}");
    }
    for bad in [
        "", "110%", "1000%", "-10", "-10%", "10.5%", "%", "1000a%", "10 %",
    ] {
        assert!(!matches_budget_nodes(bad), "{bad}");
    }
}

#[test]
fn crd_keys() {
    for good in [
        "Test",
        "test.com/Test",
        "test.com.com/test",
        "key-only",
        "a.b_c",
    ] {
        assert!(crd_key_pattern(good).is_ok(), "{good}");
    }
    for bad in [
        "test.com.com}",
        "Test.com/test",
        "test/test/test",
        "test/",
        "/test",
        "a..b/c",
        "",
    ] {
        assert!(crd_key_pattern(bad).is_err(), "{bad}");
    }
}

#[test]
fn reasons() {
    assert!(reason_pattern("Provisioned"));
    assert!(reason_pattern("A"));
    assert!(reason_pattern("A_b,c:D"));
    assert!(!reason_pattern("A:"));
    assert!(!reason_pattern("1A"));
    assert!(!reason_pattern(""));
}

#[test]
fn restricted_keys() {
    let p = LabelPolicy::core();
    assert!(
        restricted_label(
            "karpenter.sh/nodepool",
            "karpenter.sh/nodepool",
            Some(&p),
            true
        )
        .is_some()
    );
    assert!(
        restricted_label(
            "karpenter.sh/nodepool",
            "karpenter.sh/nodepool",
            None,
            false
        )
        .is_none()
    );
    assert!(
        restricted_label(
            "karpenter.sh/capacity-type",
            "karpenter.sh/capacity-type",
            Some(&p),
            true
        )
        .is_none()
    );
    assert!(
        restricted_label(
            "kubernetes.io/hostname",
            "kubernetes.io/hostname",
            None,
            false
        )
        .is_some()
    );
    assert!(restricted_label("karpenter.sh/custom", "karpenter.sh/custom", None, false).is_some());
    assert!(restricted_label("sub.karpenter.sh/x", "sub.karpenter.sh/x", None, false).is_some());
    // The CEL rule's `endsWith` also catches look-alike domains.
    assert!(restricted_label("notkarpenter.sh/x", "notkarpenter.sh/x", None, false).is_some());
    assert!(restricted_label("kubernetes.io/arch", "kubernetes.io/arch", Some(&p), true).is_none());
    let aws = LabelPolicy::core().with_restricted_domains(["karpenter.k8s.aws"]);
    assert!(
        restricted_label(
            "karpenter.k8s.aws/x",
            "karpenter.k8s.aws/x",
            Some(&aws),
            true
        )
        .is_some()
    );
}

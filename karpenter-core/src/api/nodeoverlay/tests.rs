//! Upstream's NodeOverlay validation scenarios (`nodeoverlay_validation_test.go`): the CRD rules
//! ([`NodeOverlay::validate`]) and the runtime ones ([`NodeOverlay::runtime_validate`]).

use super::*;
use crate::labels::LabelPolicy;
use serde_json::json;

fn overlay(spec: serde_json::Value) -> NodeOverlay {
    serde_json::from_value(json!({
        "apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay",
        "metadata": {"name": "test"}, "spec": spec
    }))
    .unwrap()
}

fn req(key: &str, op: &str, values: &[&str]) -> serde_json::Value {
    json!({"key": key, "operator": op, "values": values})
}

/// Whether both the API server (CRD) and the runtime validation accept it.
fn accepted(o: &NodeOverlay) -> (bool, bool) {
    (
        o.validate().is_ok(),
        o.runtime_validate(&LabelPolicy::core()).is_ok(),
    )
}

#[test]
fn requirements_without_values_for_in_and_not_in_fail() {
    for op in ["In", "NotIn"] {
        let o = overlay(json!({"requirements": [req("Test", op, &[])]}));
        assert!(!accepted(&o).0, "{op}");
        let e = o.validate().unwrap_err().to_string();
        assert!(e.contains("spec.requirements[0].values"), "{e}");
    }
    let o = overlay(json!({"requirements": [req("Test", "NotIn", &[])]}));
    assert!(o.runtime_validate(&LabelPolicy::core()).is_err());
}

#[test]
fn valid_keys_pass_and_invalid_keys_fail() {
    let ok = overlay(json!({"requirements": [
        req("Test", "Exists", &[]), req("test.com/Test", "Exists", &[]),
        req("test.com.com/test", "Exists", &[]), req("key-only", "Exists", &[]),
    ]}));
    assert_eq!(accepted(&ok), (true, true));
    for key in [
        "test.com.com}",
        "Test.com/test",
        "test/test/test",
        "test/",
        "/test",
    ] {
        let o = overlay(json!({"requirements": [req(key, "Exists", &[])]}));
        assert_eq!(accepted(&o), (false, false), "{key}");
    }
}

#[test]
fn the_nodepool_label_is_allowed() {
    let o = overlay(json!({"requirements": [req("karpenter.sh/nodepool", "In", &["default"])]}));
    assert_eq!(accepted(&o), (true, true));
}

#[test]
fn keys_too_long_fail_at_runtime() {
    let long = "a".repeat(250);
    for key in [
        format!("test.com.test.{long}/test"),
        format!("test.com.test/test-{long}"),
    ] {
        let o = overlay(json!({"requirements": [req(&key, "Exists", &[])]}));
        assert!(o.runtime_validate(&LabelPolicy::core()).is_err(), "{key}");
    }
}

#[test]
fn supported_operators_pass_and_unknown_ones_do_not_decode() {
    let zone = "topology.kubernetes.io/zone";
    let o = overlay(json!({"requirements": [
        req(zone, "In", &["test"]), req(zone, "Gt", &["1"]), req(zone, "Lt", &["1"]),
        req(zone, "Gte", &["1"]), req(zone, "Lte", &["1"]), req(zone, "NotIn", &["1"]),
        req(zone, "Exists", &[]),
    ]}));
    assert_eq!(accepted(&o), (true, true));
    let bad: Result<NodeOverlay, _> = serde_json::from_value(json!({
        "metadata": {"name": "x"}, "spec": {"requirements": [req(zone, "unknown", &["test"])]}
    }));
    assert!(bad.is_err());
}

#[test]
fn restricted_domains_fail_and_kubernetes_domains_pass() {
    for domain in ["karpenter.sh", "kubernetes.io/hostname"] {
        let key = if domain.contains('/') {
            domain.to_string()
        } else {
            format!("{domain}/test")
        };
        let o = overlay(json!({"requirements": [req(&key, "In", &["test"])]}));
        assert_eq!(accepted(&o), (false, false), "{key}");
    }
    for domain in [
        "kubernetes.io",
        "k8s.io",
        "subdomain.kubernetes.io",
        "subdomain.k8s.io",
    ] {
        let o = overlay(json!({"requirements": [req(&format!("{domain}/test"), "In", &["test"])]}));
        assert_eq!(accepted(&o), (true, true), "{domain}");
    }
    let policy = LabelPolicy::core();
    for key in policy.well_known() {
        if key == crate::labels::NODEPOOL || key == crate::labels::CAPACITY_TYPE {
            continue;
        }
        let o = overlay(json!({"requirements": [req(key, "In", &["test"])]}));
        assert_eq!(o.validate(), Ok(()), "{key}");
        assert_eq!(o.runtime_validate(&policy), Ok(()), "{key}");
    }
}

#[test]
fn overlapping_and_empty_requirements_pass() {
    let zone = "topology.kubernetes.io/zone";
    let o = overlay(
        json!({"requirements": [req(zone, "In", &["test", "foo"]), req(zone, "NotIn", &["test", "bar"])]}),
    );
    assert_eq!(accepted(&o), (true, true));
    let o = overlay(json!({"requirements": [req("test", "Exists", &[])]}));
    assert_eq!(accepted(&o), (true, true));
    let o = overlay(json!({"requirements": []}));
    assert_eq!(accepted(&o), (true, true));
}

#[test]
fn numeric_operators_need_one_non_negative_integer() {
    let zone = "topology.kubernetes.io/zone";
    for op in ["Gt", "Lt", "Gte", "Lte"] {
        for values in [&[][..], &["1", "2"][..], &["a"][..], &["-1"][..]] {
            let o = overlay(json!({"requirements": [req(zone, op, values)]}));
            assert!(o.validate().is_err(), "{op} {values:?}");
        }
    }
}

#[test]
fn price_and_price_adjustment_are_exclusive() {
    let o = overlay(json!({"requirements": [], "price": "0.432", "priceAdjustment": "+10%"}));
    let e = o.validate().unwrap_err().to_string();
    assert!(
        e.contains("cannot set both 'price' and 'priceAdjustment'"),
        "{e}"
    );
}

#[test]
fn price_patterns() {
    for bad in [
        "+42",
        ".5",
        "42.",
        "42%",
        "3,14",
        "1e10",
        "0x42",
        "forty-two",
        "42a",
        "42 ",
        " 42",
        "42.0.0",
        "-",
        ".",
        "-.42",
    ] {
        let o = overlay(json!({"requirements": [], "price": bad}));
        assert!(o.validate().is_err(), "price {bad:?} accepted");
    }
    for good in ["43", "34.43", "0"] {
        let o = overlay(json!({"requirements": [], "price": good}));
        assert_eq!(o.validate(), Ok(()), "{good}");
    }
}

#[test]
fn price_adjustment_patterns() {
    for bad in [
        "1%", "1", "1.3", "42.", "3,14", "1e10", "-", ".", "-100.0%", "-101.1%", "+42.%", "+-1",
    ] {
        let o = overlay(json!({"requirements": [], "priceAdjustment": bad}));
        assert!(o.validate().is_err(), "priceAdjustment {bad:?} accepted");
    }
    for good in [
        "+1%",
        "-1%",
        "-100%",
        "+100.102%",
        "+298%",
        "+43",
        "-43",
        "+34.43",
        "-34.43",
        "-129",
        "+.5",
        "-99.99%",
    ] {
        let o = overlay(json!({"requirements": [], "priceAdjustment": good}));
        assert_eq!(o.validate(), Ok(()), "{good}");
    }
}

#[test]
fn capacity_takes_extended_resources_only() {
    let o = overlay(json!({"requirements": [], "capacity": {"smarter-devices/fuse": "1"}}));
    assert_eq!(accepted(&o), (true, true));
    for name in ["cpu", "memory", "pods", "ephemeral-storage"] {
        let o = overlay(json!({"requirements": [], "capacity": {name: "1"}}));
        assert_eq!(accepted(&o), (false, false), "{name}");
        let e = o.validate().unwrap_err().to_string();
        assert!(e.contains(&format!("spec.capacity.{name}")), "{e}");
    }
}

#[test]
fn weight_range_and_unknown_fields() {
    for (w, ok) in [(0, false), (1, true), (10000, true), (10001, false)] {
        let o = overlay(json!({"requirements": [], "weight": w}));
        assert_eq!(o.validate().is_ok(), ok, "{w}");
    }
    assert_eq!(
        overlay(json!({"requirements": []})).spec.effective_weight(),
        0
    );
    let typo: Result<NodeOverlay, _> = serde_json::from_value(json!({
        "metadata": {"name": "x"}, "spec": {"requirements": [], "prices": "1"}
    }));
    assert!(typo.unwrap_err().to_string().contains("prices"));
}

#[test]
fn adjusted_price_as_upstream() {
    assert_eq!(adjusted_price(1.02, ""), 1.02);
    assert_eq!(adjusted_price(1.02, "13234.223"), 13234.223);
    assert!((adjusted_price(1.02, "+1000") - 1001.02).abs() < 1e-9);
    assert!((adjusted_price(2.0, "+10%") - 2.2).abs() < 1e-9);
    assert!((adjusted_price(2.0, "-15%") - 1.7).abs() < 1e-9);
    assert_eq!(adjusted_price(2.0, "-100%"), 0.0);
    assert_eq!(adjusted_price(2.0, "-5"), 0.0, "clamped at zero");
}

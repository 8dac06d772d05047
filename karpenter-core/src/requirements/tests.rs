//! Unit tests and property tests for the requirement algebra.

use super::*;
use crate::labels;
use proptest::prelude::*;

const ZONE: &str = labels::ZONE;

fn req(key: &str, op: Operator, values: &[&str]) -> Requirement {
    Requirement::new(key, op, values)
}

fn reqs(list: &[Requirement]) -> Requirements {
    list.iter().cloned().collect()
}

/// Strings used to compare requirements semantically.
const UNIVERSE: &[&str] = &[
    "",
    "a",
    "b",
    "c",
    "zone-1",
    "x",
    "-1",
    "-2",
    "0",
    "1",
    "2",
    "3",
    "4",
    "5",
    "8",
    "9",
    "10",
    "11",
    "01",
    "+2",
    "007",
    "-0",
    "9223372036854775807",
    "-9223372036854775808",
    "99999999999999999999",
];

fn universe_with(extra: &[&Requirement]) -> Vec<String> {
    let mut out: Vec<String> = UNIVERSE.iter().map(|s| s.to_string()).collect();
    for r in extra {
        out.extend(r.values().map(String::from));
        for b in [r.gte(), r.lte()].into_iter().flatten() {
            for d in [-1i64, 0, 1] {
                if let Some(n) = b.checked_add(d) {
                    out.push(n.to_string());
                }
            }
        }
    }
    out
}

/// Same allowed strings over the test universe, same bounds, complement flag and minValues.
fn assert_sem_eq(a: &Requirement, b: &Requirement) {
    assert_eq!(a.is_complement(), b.is_complement(), "{a} vs {b}");
    assert_eq!((a.gte(), a.lte()), (b.gte(), b.lte()), "{a} vs {b}");
    assert_eq!(a.min_values(), b.min_values(), "{a} vs {b}");
    for v in universe_with(&[a, b]) {
        assert_eq!(a.has(&v), b.has(&v), "{a} vs {b} on {v:?}");
    }
}

/// A value `r` allows, if any (used to check `is_empty`).
fn witness(r: &Requirement) -> Option<String> {
    if let Some(v) = r.any() {
        return Some(v);
    }
    if !r.is_complement() {
        return r.values().find(|v| r.has(v)).map(String::from);
    }
    let c = match (r.gte(), r.lte()) {
        (Some(g), _) => g,
        (None, Some(l)) => l,
        (None, None) => return Some("unlisted-witness".into()),
    };
    (1..=r.values().len() + 1)
        .map(|zeros| {
            let pad = "0".repeat(zeros);
            if c < 0 {
                format!("-{pad}{}", c.unsigned_abs())
            } else {
                format!("{pad}{c}")
            }
        })
        .find(|w| r.has(w))
}

// ---------------------------------------------------------------------------------------------
// 2.2 construction, one test per table row
// ---------------------------------------------------------------------------------------------

#[test]
fn construct_in() {
    let r = req("k", Operator::In, &["b", "a", "b"]);
    assert!(!r.is_complement());
    assert_eq!(r.values().collect::<Vec<_>>(), ["a", "b"]);
    assert_eq!((r.gte(), r.lte()), (None, None));
    assert!(r.has("a") && r.has("b") && !r.has("c"));
    assert_eq!(r.operator(), Operator::In);
    assert_eq!(r.len(), 2);
}

#[test]
fn construct_not_in() {
    let r = req("k", Operator::NotIn, &["b", "a"]);
    assert!(r.is_complement());
    assert_eq!(r.values().collect::<Vec<_>>(), ["a", "b"]);
    assert!(!r.has("a") && !r.has("b") && r.has("c") && r.has(""));
    assert_eq!(r.operator(), Operator::NotIn);
    assert_eq!(r.len(), u64::MAX - 2);
}

#[test]
fn construct_exists() {
    let r = req("k", Operator::Exists, &["ignored"]);
    assert!(r.is_complement());
    assert_eq!(r.values().len(), 0);
    assert!(r.has("anything") && r.has("ignored"));
    assert_eq!(r.operator(), Operator::Exists);
    assert_eq!(r, Requirement::exists("k"));
    assert_eq!(r.len(), u64::MAX);
}

#[test]
fn construct_does_not_exist() {
    let r = req("k", Operator::DoesNotExist, &["ignored"]);
    assert!(!r.is_complement());
    assert_eq!(r.values().len(), 0);
    assert!(!r.has("ignored") && !r.has(""));
    assert_eq!(r.operator(), Operator::DoesNotExist);
    assert_eq!(r, Requirement::does_not_exist("k"));
    assert!(r.is_empty());
    assert_eq!(r.len(), 0);
}

#[test]
fn construct_gt() {
    let r = req("k", Operator::Gt, &["8", "100"]);
    assert!(r.is_complement());
    assert_eq!((r.gte(), r.lte()), (Some(9), None));
    assert!(r.has("9") && r.has("100") && !r.has("8") && !r.has("a"));
    assert!(
        r.has("09") && r.has("+9"),
        "Atoi accepts leading zeros and sign"
    );
    assert_eq!(r.operator(), Operator::Exists);
}

#[test]
fn construct_gt_max_is_does_not_exist_without_min_values() {
    let max = i64::MAX.to_string();
    let r = req("k", Operator::Gt, &[&max]);
    assert_eq!(r, Requirement::does_not_exist("k"));
    let mut nsr = NodeSelectorRequirement::new("k", Operator::Gt, [max]);
    nsr.min_values = Some(2);
    let r = Requirement::from_node_selector(&nsr);
    assert_eq!(r, Requirement::does_not_exist("k"));
    assert_eq!(r.min_values(), None);
}

#[test]
fn construct_lt() {
    let r = req("k", Operator::Lt, &["8"]);
    assert!(r.is_complement());
    assert_eq!((r.gte(), r.lte()), (None, Some(7)));
    assert!(r.has("7") && r.has("-100") && !r.has("8") && !r.has("a"));
    assert_eq!(r.operator(), Operator::Exists);
}

#[test]
fn construct_lt_min_is_does_not_exist() {
    let mut nsr = NodeSelectorRequirement::new("k", Operator::Lt, [i64::MIN.to_string()]);
    nsr.min_values = Some(2);
    let r = Requirement::from_node_selector(&nsr);
    assert_eq!(r, Requirement::does_not_exist("k"));
}

#[test]
fn construct_gte_lte() {
    let r = req("k", Operator::Gte, &["8"]);
    assert_eq!((r.is_complement(), r.gte(), r.lte()), (true, Some(8), None));
    assert!(r.has("8") && !r.has("7"));
    let r = req("k", Operator::Lte, &["8"]);
    assert_eq!((r.is_complement(), r.gte(), r.lte()), (true, None, Some(8)));
    assert!(r.has("8") && !r.has("9"));
    assert_eq!(r.operator(), Operator::Exists);
}

#[test]
fn bound_operators_default_to_zero() {
    assert_eq!(req("k", Operator::Gt, &["x"]).gte(), Some(1));
    assert_eq!(req("k", Operator::Lt, &[]).lte(), Some(-1));
    assert_eq!(req("k", Operator::Gte, &[" 3"]).gte(), Some(0));
    assert_eq!(req("k", Operator::Lte, &["1.5"]).lte(), Some(0));
}

#[test]
fn min_values_carried_through() {
    for op in [
        Operator::In,
        Operator::NotIn,
        Operator::Exists,
        Operator::DoesNotExist,
        Operator::Gt,
        Operator::Lt,
        Operator::Gte,
        Operator::Lte,
    ] {
        let mut nsr = NodeSelectorRequirement::new("k", op, ["3"]);
        nsr.min_values = Some(2);
        assert_eq!(
            Requirement::from_node_selector(&nsr).min_values(),
            Some(2),
            "{op}"
        );
    }
    let mut r = req("k", Operator::In, &["a"]).with_min_values(Some(3));
    assert_eq!(r.min_values(), Some(3));
    r.set_min_values(None);
    assert_eq!(r.min_values(), None);
}

#[test]
fn beta_keys_are_normalised() {
    let pairs = [
        ("failure-domain.beta.kubernetes.io/zone", labels::ZONE),
        ("failure-domain.beta.kubernetes.io/region", labels::REGION),
        ("beta.kubernetes.io/arch", labels::ARCH),
        ("beta.kubernetes.io/os", labels::OS),
        ("beta.kubernetes.io/instance-type", labels::INSTANCE_TYPE),
    ];
    for (old, new) in pairs {
        assert_eq!(req(old, Operator::In, &["v"]).key(), new);
        assert_eq!(Requirement::exists(old).key(), new);
        let nsr = NodeSelectorRequirement::new(old, Operator::NotIn, ["v"]);
        assert_eq!(Requirement::from_node_selector(&nsr).key(), new);
        let rs = Requirements::from_labels([(old, "v")]);
        assert!(rs.has(new) && !rs.has(old));
    }
    // The old and new spelling of one key intersect.
    let rs = reqs(&[
        req("beta.kubernetes.io/arch", Operator::In, &["amd64", "arm64"]),
        req(labels::ARCH, Operator::In, &["arm64"]),
    ]);
    assert_eq!(rs.len(), 1);
    assert_eq!(
        rs.get(labels::ARCH).and_then(|r| r.single_value()),
        Some("arm64")
    );
}

// ---------------------------------------------------------------------------------------------
// 2.3 derived views
// ---------------------------------------------------------------------------------------------

#[test]
fn derived_operators() {
    assert_eq!(req("k", Operator::In, &["a"]).operator(), Operator::In);
    assert_eq!(
        req("k", Operator::In, &[]).operator(),
        Operator::DoesNotExist
    );
    assert_eq!(
        req("k", Operator::NotIn, &["a"]).operator(),
        Operator::NotIn
    );
    assert_eq!(req("k", Operator::NotIn, &[]).operator(), Operator::Exists);
    for op in [Operator::Gt, Operator::Lt, Operator::Gte, Operator::Lte] {
        assert_eq!(req("k", op, &["5"]).operator(), Operator::Exists, "{op}");
    }
    // Bounds plus exclusions derive to NotIn.
    let r = req("k", Operator::Gt, &["1"]).intersection(&req("k", Operator::NotIn, &["5"]));
    assert_eq!(r.operator(), Operator::NotIn);
    // An intersection that loses every value is DoesNotExist.
    let r = req("k", Operator::In, &["a"]).intersection(&req("k", Operator::In, &["b"]));
    assert_eq!(r.operator(), Operator::DoesNotExist);
    // Insert turns DoesNotExist into In.
    let mut r = Requirement::does_not_exist("k");
    r.insert("z");
    assert_eq!(r.operator(), Operator::In);
    assert_eq!(r.single_value(), Some("z"));
}

#[test]
fn any_rules() {
    assert_eq!(
        req("k", Operator::In, &["b", "a", "c"]).any().as_deref(),
        Some("a")
    );
    assert_eq!(
        req("k", Operator::In, &["10", "9"]).any().as_deref(),
        Some("10"),
        "string order"
    );
    assert_eq!(Requirement::exists("k").any().as_deref(), Some("0"));
    assert_eq!(
        req("k", Operator::NotIn, &["0", "1", "a"]).any().as_deref(),
        Some("2")
    );
    assert_eq!(req("k", Operator::Gt, &["8"]).any().as_deref(), Some("9"));
    assert_eq!(
        req("k", Operator::Gte, &["-3"]).any().as_deref(),
        Some("-3")
    );
    assert_eq!(req("k", Operator::Lt, &["5"]).any().as_deref(), Some("0"));
    assert_eq!(
        req("k", Operator::Lt, &["0"]).any(),
        None,
        "[0, -1] is empty"
    );
    let r = req("k", Operator::Gte, &["1"])
        .intersection(&req("k", Operator::Lte, &["2"]))
        .intersection(&req("k", Operator::NotIn, &["1", "2"]));
    assert_eq!(r.any(), None, "every integer in range excluded");
    assert!(!r.is_empty(), "but `01` still satisfies it");
    assert!(r.has("01"));
    let top = req("k", Operator::Gte, &[&i64::MAX.to_string()]).intersection(&req(
        "k",
        Operator::NotIn,
        &[&i64::MAX.to_string()],
    ));
    assert_eq!(top.any(), None);
    assert_eq!(Requirement::does_not_exist("k").any(), None);
}

#[test]
fn single_value_and_insert() {
    assert_eq!(req("k", Operator::In, &["a"]).single_value(), Some("a"));
    assert_eq!(req("k", Operator::In, &["a", "b"]).single_value(), None);
    assert_eq!(req("k", Operator::NotIn, &["a"]).single_value(), None);
    let mut r = req("k", Operator::In, &["b"]);
    r.insert("a");
    r.insert("b");
    assert_eq!(r.values().collect::<Vec<_>>(), ["a", "b"]);
    let mut r = req("k", Operator::NotIn, &["a"]);
    r.insert("b");
    assert!(!r.has("b"));
    // Out-of-bounds exclusions are not recorded (they are rejected by the bounds anyway).
    let mut r = req("k", Operator::Gt, &["5"]);
    r.insert("3");
    r.insert("x");
    assert_eq!(r, req("k", Operator::Gt, &["5"]));
    r.insert("7");
    assert!(!r.has("7") && r.has("8"));
}

// ---------------------------------------------------------------------------------------------
// 2.4 intersection rules
// ---------------------------------------------------------------------------------------------

#[test]
fn intersection_both_complement_unions_exclusions() {
    let r = req("k", Operator::NotIn, &["a", "c"]).intersection(&req(
        "k",
        Operator::NotIn,
        &["b", "c"],
    ));
    assert!(r.is_complement());
    assert_eq!(r.values().collect::<Vec<_>>(), ["a", "b", "c"]);
    assert!(req("k", Operator::NotIn, &["a"]).has_intersection(&req("k", Operator::NotIn, &["b"])));
}

#[test]
fn intersection_one_complement_subtracts() {
    let a = req("k", Operator::In, &["a", "b", "c"]);
    let b = req("k", Operator::NotIn, &["b"]);
    for r in [a.intersection(&b), b.intersection(&a)] {
        assert!(!r.is_complement());
        assert_eq!(r.values().collect::<Vec<_>>(), ["a", "c"]);
    }
    assert!(a.has_intersection(&b) && b.has_intersection(&a));
    let all_excluded = req("k", Operator::NotIn, &["a", "b", "c"]);
    assert!(a.intersection(&all_excluded).is_empty());
    assert!(!a.has_intersection(&all_excluded));
}

#[test]
fn intersection_neither_complement_intersects() {
    let r = req("k", Operator::In, &["a", "b"]).intersection(&req("k", Operator::In, &["b", "c"]));
    assert_eq!(r.values().collect::<Vec<_>>(), ["b"]);
    assert!(!req("k", Operator::In, &["a"]).has_intersection(&req("k", Operator::In, &["b"])));
}

#[test]
fn intersection_merges_bounds() {
    let r = req("k", Operator::Gt, &["2"]).intersection(&req("k", Operator::Lt, &["8"]));
    assert_eq!(
        (r.is_complement(), r.gte(), r.lte()),
        (true, Some(3), Some(7))
    );
    let r = r.intersection(&req("k", Operator::Gte, &["5"]));
    assert_eq!((r.gte(), r.lte()), (Some(5), Some(7)));
    let r = r.intersection(&req("k", Operator::Lte, &["6"]));
    assert_eq!((r.gte(), r.lte()), (Some(5), Some(6)));
}

#[test]
fn intersection_empty_bounds_is_does_not_exist_keeping_min_values() {
    let a = req("k", Operator::Gt, &["5"]).with_min_values(Some(1));
    let b = req("k", Operator::Lt, &["6"]).with_min_values(Some(3));
    assert!(!a.has_intersection(&b));
    let r = a.intersection(&b);
    assert_eq!(r, Requirement::does_not_exist("k").with_min_values(Some(3)));
    // Touching bounds are not empty.
    let c = req("k", Operator::Lt, &["7"]);
    assert!(a.has_intersection(&c));
    assert_eq!(a.intersection(&c).any().as_deref(), Some("6"));
}

#[test]
fn intersection_removes_values_outside_bounds_and_drops_bounds_for_sets() {
    let r =
        req("k", Operator::In, &["1", "5", "9", "a"]).intersection(&req("k", Operator::Gt, &["3"]));
    assert!(!r.is_complement());
    assert_eq!(r.values().collect::<Vec<_>>(), ["5", "9"]);
    assert_eq!((r.gte(), r.lte()), (None, None));
    let r =
        req("k", Operator::NotIn, &["1", "5", "a"]).intersection(&req("k", Operator::Gt, &["3"]));
    assert!(r.is_complement());
    assert_eq!(r.values().collect::<Vec<_>>(), ["5"]);
    assert_eq!(r.gte(), Some(4));
    // In vs bounds: no integer inside → no intersection.
    assert!(!req("k", Operator::In, &["a", "2"]).has_intersection(&req("k", Operator::Gt, &["3"])));
}

#[test]
fn intersection_min_values_is_max() {
    let a = req("k", Operator::In, &["1", "2", "3"]).with_min_values(Some(1));
    let b = req("k", Operator::NotIn, &["3"]).with_min_values(Some(2));
    assert_eq!(a.intersection(&b).min_values(), Some(2));
    assert_eq!(b.intersection(&a).min_values(), Some(2));
    let c = req("k", Operator::Exists, &[]);
    assert_eq!(c.intersection(&a).min_values(), Some(1));
    assert_eq!(c.intersection(&c).min_values(), None);
    // Gt 2 minValues 1 ∧ Lt 5 minValues 2 → minValues 2.
    let r = req("k", Operator::Gt, &["2"])
        .with_min_values(Some(1))
        .intersection(&req("k", Operator::Lt, &["5"]).with_min_values(Some(2)));
    assert_eq!(r.min_values(), Some(2));
    assert_eq!((r.gte(), r.lte()), (Some(3), Some(4)));
}

#[test]
fn has_intersection_special_cases() {
    let dne = Requirement::does_not_exist("k");
    let exists = Requirement::exists("k");
    assert!(
        !dne.has_intersection(&dne),
        "two DoesNotExist do not intersect"
    );
    assert!(!dne.has_intersection(&exists) && !exists.has_intersection(&dne));
    assert!(exists.has_intersection(&exists));
    // Both complement: true even if the exclusions are all that is listed.
    let a = req("k", Operator::NotIn, &["a"]);
    assert!(a.has_intersection(&a));
    // Both complement but disjoint bounds: false.
    assert!(!req("k", Operator::Gte, &["5"]).has_intersection(&req("k", Operator::Lte, &["4"])));
}

// ---------------------------------------------------------------------------------------------
// 2.5 / 2.6 / 2.7 Requirements
// ---------------------------------------------------------------------------------------------

#[test]
fn requirements_add_and_get() {
    let mut rs = Requirements::new();
    assert!(rs.is_empty());
    rs.add(req(ZONE, Operator::In, &["a", "b"]));
    rs.add(req(ZONE, Operator::NotIn, &["a"]));
    rs.add(req("custom", Operator::Exists, &[]));
    assert_eq!(rs.len(), 2);
    assert_eq!(rs.keys().collect::<Vec<_>>(), ["custom", ZONE]);
    assert_eq!(rs.get(ZONE).and_then(|r| r.single_value()), Some("b"));
    assert!(rs.has("custom") && !rs.has("other"));
    assert_eq!(rs.get_or_exists("other").operator(), Operator::Exists);
    assert_eq!(rs.get_or_exists("other").key(), "other");
    assert!(matches!(rs.get_or_exists(ZONE), Cow::Borrowed(_)));
    if let Some(r) = rs.get_mut(ZONE) {
        r.set_min_values(Some(1));
    }
    assert_eq!(rs.get(ZONE).and_then(Requirement::min_values), Some(1));
    assert_eq!(
        rs.remove("custom").map(|r| r.operator()),
        Some(Operator::Exists)
    );
    assert_eq!(rs.len(), 1);
    assert_eq!(rs.iter().count(), 1);
}

#[test]
fn from_labels_is_in_per_label() {
    let rs = Requirements::from_labels([(ZONE, "a"), ("custom", "x")]);
    assert_eq!(rs.get(ZONE), Some(&req(ZONE, Operator::In, &["a"])));
    assert_eq!(
        rs.get("custom").and_then(Requirement::single_value),
        Some("x")
    );
}

#[test]
fn add_all_and_intersection() {
    let a = reqs(&[
        req(ZONE, Operator::In, &["a", "b"]),
        req("x", Operator::Exists, &[]),
    ]);
    let b = reqs(&[
        req(ZONE, Operator::In, &["b", "c"]),
        req("y", Operator::In, &["1"]),
    ]);
    let c = a.intersection(&b);
    assert_eq!(c.keys().collect::<Vec<_>>(), [ZONE, "x", "y"]);
    assert_eq!(c.get(ZONE).and_then(Requirement::single_value), Some("b"));
    let mut d = a.clone();
    d.add_all(&b);
    assert_eq!(c, d);
}

#[test]
fn intersects_rules() {
    let node = reqs(&[req(ZONE, Operator::In, &["a"])]);
    // Keys on one side only are ignored.
    assert!(
        node.intersects(&reqs(&[req("other", Operator::In, &["x"])]))
            .is_ok()
    );
    assert!(
        node.intersects(&reqs(&[req(ZONE, Operator::In, &["a", "b"])]))
            .is_ok()
    );
    let err = node
        .intersects(&reqs(&[req(ZONE, Operator::In, &["b"])]))
        .unwrap_err();
    assert_eq!(
        err,
        IncompatibleError::NoIntersection {
            key: ZONE.into(),
            left: "[a]".into(),
            right: "[b]".into()
        }
    );
    assert_eq!(
        err.to_string(),
        "key topology.kubernetes.io/zone: [b] not in [a]"
    );
    // Both NotIn / DoesNotExist: accepted even without intersection.
    let dne = reqs(&[Requirement::does_not_exist("k")]);
    assert!(dne.intersects(&dne).is_ok());
    let notin_bounded =
        reqs(&[req("k", Operator::Gt, &["5"]).intersection(&req("k", Operator::NotIn, &["7"]))]);
    let notin_low =
        reqs(&[req("k", Operator::Lt, &["3"]).intersection(&req("k", Operator::NotIn, &["1"]))]);
    assert!(
        !notin_bounded
            .get("k")
            .is_some_and(|a| notin_low.get("k").is_some_and(|b| a.has_intersection(b)))
    );
    assert!(notin_bounded.intersects(&notin_low).is_ok());
    assert!(dne.intersects(&notin_low).is_ok());
    // DoesNotExist vs Exists: not accepted.
    assert!(dne.intersects(&reqs(&[Requirement::exists("k")])).is_err());
    // In vs DoesNotExist: not accepted.
    assert!(
        dne.intersects(&reqs(&[req("k", Operator::In, &["a"])]))
            .is_err()
    );
}

#[test]
fn compatible_undefined_keys() {
    let policy = LabelPolicy::core();
    let pool = reqs(&[req(ZONE, Operator::In, &["a"])]);
    let err = pool
        .compatible(&reqs(&[req("custom", Operator::In, &["x"])]), Some(&policy))
        .unwrap_err();
    assert_eq!(
        err,
        IncompatibleError::UndefinedKey {
            key: "custom".into()
        }
    );
    assert_eq!(
        err.to_string(),
        "label \"custom\" does not have known values"
    );
}

/// The worked consequences listed under upstream `Requirements.Compatible`.
#[test]
fn compatible_worked_consequences() {
    let policy = LabelPolicy::core().with_well_known(["size", "special", "integer"]);
    let loose = Some(&policy);
    let pool = reqs(&[
        req(ZONE, Operator::In, &["test-zone-1", "test-zone-2"]),
        req("team", Operator::In, &["a"]),
    ]);
    let pod = |r: Requirement| reqs(&[r]);

    // Pod In on an undefined custom key → incompatible; NotIn / DoesNotExist → compatible;
    // Exists → incompatible.
    assert!(!pool.is_compatible(&pod(req("custom", Operator::In, &["x"])), loose));
    assert!(pool.is_compatible(&pod(req("custom", Operator::NotIn, &["x"])), loose));
    assert!(pool.is_compatible(&pod(Requirement::does_not_exist("custom")), loose));
    assert!(!pool.is_compatible(&pod(Requirement::exists("custom")), loose));

    // Pod DoesNotExist on a key the pool defines with In → incompatible; Exists → compatible.
    assert!(!pool.is_compatible(&pod(Requirement::does_not_exist("team")), loose));
    assert!(pool.is_compatible(&pod(Requirement::exists("team")), loose));

    // Well-known keys the pool leaves undefined: accepted loosely, rejected strictly, and
    // resolved against instance types with Intersects.
    let wants_large = pod(req("size", Operator::In, &["large"]));
    assert!(pool.is_compatible(&wants_large, loose));
    assert!(!pool.is_compatible(&wants_large, None));
    let large = reqs(&[req("size", Operator::In, &["large"])]);
    let small = reqs(&[req("size", Operator::In, &["small"])]);
    assert!(large.intersects(&wants_large).is_ok());
    assert!(small.intersects(&wants_large).is_err());

    // Instance type special DoesNotExist vs pod special Exists → incompatible; vs pod special
    // DoesNotExist → compatible.
    let it = reqs(&[Requirement::does_not_exist("special")]);
    assert!(!it.is_compatible(&pod(Requirement::exists("special")), loose));
    assert!(it.intersects(&pod(Requirement::exists("special"))).is_err());
    assert!(it.is_compatible(&pod(Requirement::does_not_exist("special")), loose));
    assert!(it.is_compatible(&pod(Requirement::does_not_exist("special")), None));

    // Zone mismatch reports the constraint side first.
    let err = pool
        .compatible(&pod(req(ZONE, Operator::In, &["test-zone-3"])), loose)
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "key topology.kubernetes.io/zone: [test-zone-3] not in [test-zone-1 test-zone-2]"
    );
}

#[test]
fn strict_compatibility_for_existing_nodes() {
    let node = Requirements::from_labels([(ZONE, "a"), (labels::HOSTNAME, "n1")]);
    assert!(node.is_compatible(&reqs(&[req(ZONE, Operator::In, &["a", "b"])]), None));
    assert!(!node.is_compatible(&reqs(&[req(labels::ARCH, Operator::In, &["amd64"])]), None));
    assert!(node.is_compatible(
        &reqs(&[req(labels::ARCH, Operator::NotIn, &["amd64"])]),
        None
    ));
    assert!(node.is_compatible(&reqs(&[Requirement::does_not_exist("gpu")]), None));
    assert!(!node.is_compatible(&reqs(&[Requirement::does_not_exist(ZONE)]), None));
    // Step 1 is reported before step 2 even when a smaller key fails step 2.
    let err = node
        .compatible(
            &reqs(&[
                req(ZONE, Operator::In, &["b"]),
                req("zzz", Operator::In, &["1"]),
            ]),
            None,
        )
        .unwrap_err();
    assert_eq!(err, IncompatibleError::UndefinedKey { key: "zzz".into() });
}

// ---------------------------------------------------------------------------------------------
// 2.9 minValues
// ---------------------------------------------------------------------------------------------

const NUM: &str = "karpenter/numerical-value";

fn it_types(values: &[&str]) -> Vec<Requirements> {
    values
        .iter()
        .map(|v| Requirements::from_labels([(NUM, *v)]))
        .collect()
}

#[test]
fn min_values_in_and_not_in_take_max() {
    let rs = reqs(&[
        req(NUM, Operator::In, &["1", "2", "3"]).with_min_values(Some(1)),
        req(NUM, Operator::NotIn, &["3"]).with_min_values(Some(2)),
    ]);
    assert!(rs.has_min_values());
    assert_eq!(rs.get(NUM).and_then(Requirement::min_values), Some(2));
    let types = it_types(&["1", "2"]);
    assert_eq!(rs.satisfies_min_values(&types), Ok(2));
    assert!(rs.satisfies_min_values(&types[..1]).is_err());
}

#[test]
fn satisfies_min_values_counts_in_order() {
    let rs = reqs(&[req(NUM, Operator::Gt, &["2"]).with_min_values(Some(2))]);
    let types = it_types(&["3", "3", "4", "5"]);
    assert_eq!(rs.satisfies_min_values(&types), Ok(3));
    // Values outside the requirement still count (upstream counts raw instance-type values).
    assert_eq!(rs.satisfies_min_values(&it_types(&["1", "2"])), Ok(2));
    // No minValues → 0.
    let plain = reqs(&[req(NUM, Operator::Gt, &["2"])]);
    assert!(!plain.has_min_values());
    assert_eq!(plain.satisfies_min_values(&types), Ok(0));
    // Types that don't define the key contribute nothing.
    let undefined = vec![Requirements::from_labels([("other", "1")]); 3];
    let err = rs.satisfies_min_values(&undefined).unwrap_err();
    assert_eq!(err.achieved, BTreeMap::from([(NUM.to_string(), 0)]));
}

#[test]
fn satisfies_min_values_error_message() {
    let rs = reqs(&[req(NUM, Operator::Gt, &["2"]).with_min_values(Some(2))]);
    let err = rs.satisfies_min_values(&it_types(&["3"])).unwrap_err();
    assert_eq!(err.achieved, BTreeMap::from([(NUM.to_string(), 1)]));
    let msg = err.to_string();
    assert!(
        msg.contains("minValues requirement is not met for label(s)"),
        "{msg}"
    );
    assert!(
        msg.contains("(label(s)=[karpenter/numerical-value])"),
        "{msg}"
    );
    // Multiple keys: only the unsatisfied ones are listed.
    let rs = reqs(&[
        req(labels::ARCH, Operator::Exists, &[]).with_min_values(Some(2)),
        req(labels::INSTANCE_TYPE, Operator::In, &["it-1", "it-2"]).with_min_values(Some(1)),
    ]);
    let types = [
        Requirements::from_labels([(labels::ARCH, "arm64"), (labels::INSTANCE_TYPE, "it-1")]),
        Requirements::from_labels([(labels::ARCH, "arm64"), (labels::INSTANCE_TYPE, "it-2")]),
    ];
    let err = rs.satisfies_min_values(&types).unwrap_err();
    assert_eq!(
        err.achieved,
        BTreeMap::from([(labels::ARCH.to_string(), 1)])
    );
    let amd = Requirements::from_labels([(labels::ARCH, "amd64"), (labels::INSTANCE_TYPE, "it-2")]);
    assert_eq!(rs.satisfies_min_values([&types[0], &amd]), Ok(2));
    // Exists minValues 11 over 10 types fails.
    let it_names: Vec<String> = (0..10).map(|i| format!("it-{i}")).collect();
    let types: Vec<Requirements> = it_names
        .iter()
        .map(|n| Requirements::from_labels([(labels::INSTANCE_TYPE, n.as_str())]))
        .collect();
    let rs = reqs(&[Requirement::exists(labels::INSTANCE_TYPE).with_min_values(Some(11))]);
    assert_eq!(
        rs.satisfies_min_values(&types).map_err(|e| e.achieved),
        Err(BTreeMap::from([(labels::INSTANCE_TYPE.to_string(), 10)]))
    );
    // Empty list.
    assert!(rs.satisfies_min_values(&[]).is_err());
}

// ---------------------------------------------------------------------------------------------
// 2.10 serialization, labels, display
// ---------------------------------------------------------------------------------------------

fn nsr(key: &str, op: Operator, values: &[&str], m: Option<i64>) -> NodeSelectorRequirement {
    NodeSelectorRequirement {
        key: key.into(),
        operator: op,
        values: values.iter().map(|s| s.to_string()).collect(),
        min_values: m,
    }
}

#[test]
fn serialization() {
    assert_eq!(
        req("k", Operator::In, &["b", "a"]).to_node_selector_requirements(),
        [nsr("k", Operator::In, &["a", "b"], None)]
    );
    assert_eq!(
        req("k", Operator::NotIn, &["b", "a"]).to_node_selector_requirements(),
        [nsr("k", Operator::NotIn, &["a", "b"], None)]
    );
    assert_eq!(
        Requirement::exists("k").to_node_selector_requirements(),
        [nsr("k", Operator::Exists, &[], None)]
    );
    assert_eq!(
        Requirement::does_not_exist("k")
            .with_min_values(Some(1))
            .to_node_selector_requirements(),
        [nsr("k", Operator::DoesNotExist, &[], Some(1))]
    );
    assert_eq!(
        req("k", Operator::Gt, &["8"]).to_node_selector_requirements(),
        [nsr("k", Operator::Gte, &["9"], None)]
    );
    assert_eq!(
        req("k", Operator::Lt, &["8"]).to_node_selector_requirements(),
        [nsr("k", Operator::Lte, &["7"], None)]
    );
    let both = req("k", Operator::Gt, &["2"])
        .intersection(&req("k", Operator::Lt, &["8"]))
        .with_min_values(Some(2));
    assert_eq!(
        both.to_node_selector_requirements(),
        [
            nsr("k", Operator::Gte, &["3"], Some(2)),
            nsr("k", Operator::Lte, &["7"], Some(2))
        ]
    );
    // Exclusions are kept next to the bounds (upstream would lose them).
    let excl = both.intersection(&req("k", Operator::NotIn, &["5"]));
    assert_eq!(
        excl.to_node_selector_requirements(),
        [
            nsr("k", Operator::Gte, &["3"], Some(2)),
            nsr("k", Operator::Lte, &["7"], Some(2)),
            nsr("k", Operator::NotIn, &["5"], Some(2)),
        ]
    );
    let back = Requirements::from_node_selector_requirements(&excl.to_node_selector_requirements());
    assert_eq!(back.get("k"), Some(&excl));

    let rs = reqs(&[
        req("z", Operator::In, &["1"]),
        req("a", Operator::Exists, &[]),
    ]);
    let out = rs.to_node_selector_requirements();
    assert_eq!(out.iter().map(|r| &*r.key).collect::<Vec<_>>(), ["a", "z"]);
}

#[test]
fn yaml_shape_round_trip() {
    let entries = vec![
        nsr("k", Operator::In, &["a"], Some(1)),
        nsr("k", Operator::NotIn, &["b"], Some(2)),
        nsr("n", Operator::Gt, &["3"], None),
    ];
    let json = serde_json::to_string(&entries).unwrap_or_default();
    assert_eq!(
        json,
        r#"[{"key":"k","operator":"In","values":["a"],"minValues":1},{"key":"k","operator":"NotIn","values":["b"],"minValues":2},{"key":"n","operator":"Gt","values":["3"]}]"#
    );
    let rs = Requirements::from_node_selector_requirements(&entries);
    assert_eq!(
        rs.get("k"),
        Some(&req("k", Operator::In, &["a"]).with_min_values(Some(2)))
    );
    assert_eq!(rs.get("n").and_then(Requirement::gte), Some(4));
}

#[test]
fn custom_labels() {
    let policy = LabelPolicy::core();
    let rs = reqs(&[
        req(ZONE, Operator::In, &["a"]),
        req("karpenter.sh/custom", Operator::In, &["x"]),
        req(labels::HOSTNAME, Operator::In, &["h"]),
        req("team", Operator::In, &["b", "a"]),
        req("gpu-count", Operator::Gt, &["3"]),
        req("tier", Operator::NotIn, &["0"]),
        Requirement::does_not_exist("absent"),
    ]);
    let labels = rs.labels(&policy);
    assert_eq!(
        labels,
        BTreeMap::from([
            ("gpu-count".to_string(), "4".to_string()),
            ("team".to_string(), "a".to_string()),
            ("tier".to_string(), "1".to_string()),
        ])
    );
}

#[test]
fn display() {
    assert_eq!(
        req(ZONE, Operator::In, &["b", "a"]).to_string(),
        "topology.kubernetes.io/zone In [a b]"
    );
    assert_eq!(req("k", Operator::NotIn, &["a"]).to_string(), "k NotIn [a]");
    assert_eq!(Requirement::exists("k").to_string(), "k Exists");
    assert_eq!(
        Requirement::does_not_exist("k").to_string(),
        "k DoesNotExist"
    );
    assert_eq!(
        req("integer", Operator::Gt, &["8"]).to_string(),
        "integer Gt 8"
    );
    assert_eq!(
        req("integer", Operator::Lte, &["8"]).to_string(),
        "integer Lt 9"
    );
    assert_eq!(
        req("k", Operator::Gte, &[&i64::MIN.to_string()]).to_string(),
        format!("k Gte {}", i64::MIN)
    );
    let r = req("k", Operator::Gt, &["1"])
        .intersection(&req("k", Operator::Lt, &["10"]))
        .intersection(&req("k", Operator::NotIn, &["5"]))
        .with_min_values(Some(2));
    assert_eq!(r.to_string(), "k NotIn [5] Gt 1 Lt 10 minValues 2");
    let many = req("k", Operator::In, &["1", "2", "3", "4", "5", "6", "7"]);
    assert_eq!(many.to_string(), "k In [1 2 3 4 5 and 2 others]");
    let rs = reqs(&[req("b", Operator::In, &["1"]), Requirement::exists("a")]);
    assert_eq!(rs.to_string(), "a Exists, b In [1]");
    assert_eq!(Requirements::new().to_string(), "");
}

// ---------------------------------------------------------------------------------------------
// Property tests
// ---------------------------------------------------------------------------------------------

const OPS: [Operator; 8] = [
    Operator::In,
    Operator::NotIn,
    Operator::Exists,
    Operator::DoesNotExist,
    Operator::Gt,
    Operator::Lt,
    Operator::Gte,
    Operator::Lte,
];

const SET_VALUES: &[&str] = &[
    "a", "b", "c", "0", "1", "2", "3", "5", "8", "10", "-1", "01",
];

fn bound_value() -> impl Strategy<Value = String> {
    prop_oneof![
        8 => (-3i64..12).prop_map(|n| n.to_string()),
        1 => Just(i64::MAX.to_string()),
        1 => Just(i64::MIN.to_string()),
        1 => Just("x".to_string()),
    ]
}

fn requirement_for(key: &'static str) -> impl Strategy<Value = Requirement> {
    (
        proptest::sample::select(&OPS[..]),
        proptest::collection::vec(proptest::sample::select(SET_VALUES), 0..4),
        bound_value(),
        proptest::option::of(0i64..4),
    )
        .prop_map(move |(op, set, bound, m)| {
            let values: Vec<String> = match op {
                Operator::Gt | Operator::Lt | Operator::Gte | Operator::Lte => vec![bound],
                _ => set.iter().map(|s| s.to_string()).collect(),
            };
            Requirement::from_node_selector(&NodeSelectorRequirement {
                key: key.into(),
                operator: op,
                values,
                min_values: m,
            })
        })
}

/// Requirements built from one to three requirements, so they include intersections.
fn composite(key: &'static str) -> impl Strategy<Value = Requirement> {
    proptest::collection::vec(requirement_for(key), 1..4).prop_map(|rs| {
        let mut it = rs.into_iter();
        let first = it.next().unwrap_or_else(|| Requirement::exists(key));
        it.fold(first, |acc, r| acc.intersection(&r))
    })
}

const KEYS: [&str; 3] = ["k1", "k2", "k3"];

fn requirements() -> impl Strategy<Value = Requirements> {
    (
        proptest::option::of(composite(KEYS[0])),
        proptest::option::of(composite(KEYS[1])),
        proptest::option::of(composite(KEYS[2])),
    )
        .prop_map(|(a, b, c)| [a, b, c].into_iter().flatten().collect())
}

fn absent(r: &Requirement) -> bool {
    matches!(r.operator(), Operator::NotIn | Operator::DoesNotExist)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn intersection_commutative(a in composite("k"), b in composite("k")) {
        let ab = a.intersection(&b);
        let ba = b.intersection(&a);
        assert_sem_eq(&ab, &ba);
        prop_assert_eq!(ab, ba);
    }

    #[test]
    fn intersection_associative(a in composite("k"), b in composite("k"), c in composite("k")) {
        let left = a.intersection(&b).intersection(&c);
        let right = a.intersection(&b.intersection(&c));
        assert_sem_eq(&left, &right);
        prop_assert_eq!(left, right);
    }

    #[test]
    fn intersection_idempotent(a in composite("k")) {
        let aa = a.intersection(&a);
        assert_sem_eq(&aa, &a);
        prop_assert_eq!(aa, a);
    }

    #[test]
    fn intersection_allows_exactly_common_values(
        a in composite("k"),
        b in composite("k"),
        m in any::<i64>(),
    ) {
        let ab = a.intersection(&b);
        let mut vals = universe_with(&[&a, &b]);
        vals.push(m.to_string());
        vals.push(format!("0{m}"));
        for v in &vals {
            prop_assert_eq!(ab.has(v), a.has(v) && b.has(v), "{} ∩ {} on {:?}", a, b, v);
        }
        prop_assert_eq!(ab.min_values(), a.min_values().max(b.min_values()));
    }

    #[test]
    fn has_intersection_matches_intersection(a in composite("k"), b in composite("k")) {
        let ab = a.intersection(&b);
        prop_assert_eq!(a.has_intersection(&b), !ab.is_empty(), "{} / {} → {}", a, b, ab);
        prop_assert_eq!(a.has_intersection(&b), b.has_intersection(&a));
        // is_empty is exact: a non-empty requirement has a witness, an empty one allows nothing.
        if ab.is_empty() {
            for v in universe_with(&[&a, &b]) {
                prop_assert!(!ab.has(&v));
            }
        } else {
            let w = witness(&ab);
            prop_assert!(w.as_deref().is_some_and(|w| ab.has(w)), "no witness for {}", ab);
        }
    }

    #[test]
    fn any_is_allowed(a in composite("k")) {
        if let Some(v) = a.any() {
            prop_assert!(a.has(&v), "{} any {:?}", a, v);
        }
        if a.operator() == Operator::In {
            let any = a.any();
            prop_assert_eq!(any.as_deref(), a.values().next());
        }
    }

    #[test]
    fn complement_laws(set in proptest::collection::vec(proptest::sample::select(SET_VALUES), 0..5)) {
        let inn = Requirement::new("k", Operator::In, &set);
        let not_in = Requirement::new("k", Operator::NotIn, &set);
        let both = inn.intersection(&not_in);
        prop_assert!(both.is_empty());
        prop_assert!(!inn.has_intersection(&not_in));
        for v in universe_with(&[&inn]) {
            let listed = set.contains(&v.as_str());
            prop_assert_eq!(not_in.has(&v), !listed);
            prop_assert_eq!(inn.has(&v), listed);
            prop_assert!(!both.has(&v));
        }
    }

    #[test]
    fn bounds_match_integers(n in any::<i64>(), m in any::<i64>(), small in -5i64..5) {
        for (n, m) in [(n, m), (small, m % 7), (n, n), (n, n.saturating_add(1)), (n, n.saturating_sub(1))] {
            let ns = n.to_string();
            let ms = m.to_string();
            let gt = Requirement::new("k", Operator::Gt, [&ns]);
            let lt = Requirement::new("k", Operator::Lt, [&ns]);
            let gte = Requirement::new("k", Operator::Gte, [&ns]);
            let lte = Requirement::new("k", Operator::Lte, [&ns]);
            prop_assert_eq!(gt.has(&ms), m > n);
            prop_assert_eq!(lt.has(&ms), m < n);
            prop_assert_eq!(gte.has(&ms), m >= n);
            prop_assert_eq!(lte.has(&ms), m <= n);
            for r in [&gt, &lt, &gte, &lte] {
                let prefixed = format!("x{ms}");
                let decimal = format!("{ms}.0");
                prop_assert!(!r.has(&prefixed));
                prop_assert!(!r.has(&decimal));
                prop_assert!(!r.has(""));
            }
        }
    }

    #[test]
    fn compatible_matches_definition(
        a in requirements(),
        b in requirements(),
        well_known in proptest::sample::subsequence(KEYS.to_vec(), 0..=3),
    ) {
        let policy = LabelPolicy::core().with_well_known(well_known.iter().copied());
        for allow in [None, Some(&policy)] {
            let defined = b.iter().all(|rb| {
                allow.is_some_and(|p| p.is_well_known(rb.key())) || a.has(rb.key()) || absent(rb)
            });
            let intersect = b.iter().all(|rb| match a.get(rb.key()) {
                None => true,
                Some(ra) => !ra.intersection(rb).is_empty() || (absent(ra) && absent(rb)),
            });
            prop_assert_eq!(a.is_compatible(&b, allow), defined && intersect, "{} vs {}", a, b);
            prop_assert_eq!(a.intersects(&b).is_ok(), intersect);
            prop_assert_eq!(a.intersects(&b).is_ok(), b.intersects(&a).is_ok());
        }
    }

    #[test]
    fn node_selector_round_trip(rs in requirements()) {
        let back = Requirements::from_node_selector_requirements(&rs.to_node_selector_requirements());
        prop_assert_eq!(back.len(), rs.len());
        for r in rs.iter() {
            let b = back.get(r.key());
            prop_assert!(b.is_some());
            if let Some(b) = b {
                assert_sem_eq(r, b);
                prop_assert_eq!(b, r);
            }
        }
    }

    #[test]
    fn requirements_intersection_is_per_key(a in requirements(), b in requirements()) {
        let c = a.intersection(&b);
        for key in KEYS {
            match (a.get(key), b.get(key)) {
                (Some(x), Some(y)) => prop_assert_eq!(c.get(key), Some(&y.intersection(x))),
                (Some(x), None) => prop_assert_eq!(c.get(key), Some(x)),
                (None, Some(y)) => prop_assert_eq!(c.get(key), Some(y)),
                (None, None) => prop_assert!(!c.has(key)),
            }
        }
    }
}

mod fast_paths;

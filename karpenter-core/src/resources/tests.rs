use super::quantity::{MAX_NANOS, NANO};
use super::*;
use proptest::prelude::*;

fn q(s: &str) -> Quantity {
    match Quantity::parse(s) {
        Ok(v) => v,
        Err(e) => panic!("{s}: {e}"),
    }
}

fn rl(entries: &[(&str, &str)]) -> ResourceList {
    entries.iter().map(|(k, v)| (*k, q(v))).collect()
}

#[test]
fn decimal_suffixes() {
    let cases: [(&str, i128); 12] = [
        ("1n", 1),
        ("1u", 1_000),
        ("1m", 1_000_000),
        ("1", NANO),
        ("1k", NANO * 1_000),
        ("1M", NANO * 1_000_000),
        ("1G", NANO * 1_000_000_000),
        ("1T", NANO * 1_000_000_000_000),
        ("1P", NANO * 1_000_000_000_000_000),
        ("1E", NANO * 1_000_000_000_000_000_000),
        ("500m", 500_000_000),
        ("-2", -2 * NANO),
    ];
    for (s, nanos) in cases {
        let v = q(s);
        assert_eq!(v.nanos(), nanos, "{s}");
        assert_eq!(v.format(), Format::DecimalSI, "{s}");
    }
}

#[test]
fn binary_suffixes() {
    let cases: [(&str, i128); 7] = [
        ("1Ki", 1 << 10),
        ("1Mi", 1 << 20),
        ("1Gi", 1 << 30),
        ("1Ti", 1 << 40),
        ("1Pi", 1 << 50),
        ("1Ei", 1 << 60),
        ("1.5Gi", 3 << 29),
    ];
    for (s, units) in cases {
        let v = q(s);
        assert_eq!(v.nanos(), units * NANO, "{s}");
        assert_eq!(v.format(), Format::BinarySI, "{s}");
    }
    // 0.1Ki = 102.4 bytes exactly.
    assert_eq!(q("0.1Ki").nanos(), 102_400_000_000);
    // 1e-9 Ki = 1.024e-6 units = 1024 nanos... at finer precision rounds up.
    assert_eq!(q("0.000000001Ki").nanos(), 1024);
    assert_eq!(q("0.0000000000001Ki").nanos(), 1);
}

#[test]
fn exponents() {
    assert_eq!(q("1e3"), q("1000"));
    assert_eq!(q("1E3"), q("1k"));
    assert_eq!(q("1.5E-2"), q("15m"));
    assert_eq!(q("2e+2"), q("200"));
    assert_eq!(q("1e3").format(), Format::DecimalExponent);
    assert_eq!(q("1e0").format(), Format::DecimalExponent);
    assert_eq!(q("0e99999999999999999999"), Quantity::ZERO);
    assert_eq!(q("1e-99999999999999999999").nanos(), 1);
}

#[test]
fn decimal_point_forms() {
    assert_eq!(q(".5"), q("500m"));
    assert_eq!(q("5."), q("5"));
    assert_eq!(q("+5"), q("5"));
    assert_eq!(q("-.5").nanos(), -500_000_000);
    assert_eq!(q("0.000"), Quantity::ZERO);
    assert_eq!(q("00012.3400k"), q("12340"));
}

#[test]
fn sub_nano_rounds_up_away_from_zero() {
    assert_eq!(q("0.1n").nanos(), 1);
    assert_eq!(q("1.0000000001").nanos(), NANO + 1);
    assert_eq!(q("-0.1n").nanos(), -1);
    assert_eq!(q("1.5n").nanos(), 2);
}

#[test]
fn errors() {
    for bad in [
        "", " ", "1 ", " 1", "abc", "1x", "1KiB", "1kk", "1Mi2", "1e", "1e+", "1e1.5", "1..2", ".",
        "+", "-", "--1", "1ki", "1K", "e3", "1ee3", "1e3m", "1Ki3", "0x10", "1,000", "∞",
    ] {
        let err = Quantity::parse(bad);
        assert!(err.is_err(), "{bad:?} parsed as {err:?}");
    }
    assert_eq!(Quantity::parse(""), Err(QuantityError::Empty));
    let msg = Quantity::parse("12xyz").unwrap_err().to_string();
    assert!(msg.contains("12xyz"), "{msg}");
}

#[test]
fn overflow_is_rejected() {
    // i128::MAX nanos is about 1.7e29 units.
    assert!(matches!(
        Quantity::parse("1e30"),
        Err(QuantityError::Overflow { .. })
    ));
    assert!(matches!(
        Quantity::parse("200000000000Ei"),
        Err(QuantityError::Overflow { .. })
    ));
    assert!(Quantity::parse(&"9".repeat(60)).is_err());
    assert!(Quantity::parse("100000000000E").is_ok());
    assert!(Quantity::parse("1e29").is_ok());
    let msg = Quantity::parse("1e30").unwrap_err().to_string();
    assert!(msg.contains("1e30"), "{msg}");
}

#[test]
fn canonical_forms() {
    let cases = [
        ("1536Mi", "1536Mi"),
        ("1024Mi", "1Gi"),
        ("16Gi", "16Gi"),
        ("1.5", "1500m"),
        ("2000m", "2"),
        ("100M", "100M"),
        ("0.1", "100m"),
        ("1000k", "1M"),
        ("1000", "1k"),
        ("1e3", "1e3"),
        ("1.5e3", "1500"),
        ("0.5e0", "500e-3"),
        ("12e6", "12e6"),
        ("0", "0"),
        ("0Gi", "0"),
        ("-0", "0"),
        ("512Ki", "512Ki"),
        ("1023", "1023"),
        ("1Ki", "1Ki"),
        ("0.5Ki", "512"),
        ("1.5Ki", "1536"),
        ("0.1Ki", "102400m"),
        ("1025", "1025"),
        ("-1Gi", "-1Gi"),
        ("-1500m", "-1500m"),
        ("1n", "1n"),
        ("1u", "1u"),
        ("110", "110"),
        ("1E", "1E"),
        ("1000E", "1000E"),
        ("1024Ei", "1024Ei"),
        ("1Gi", "1Gi"),
        ("4096Mi", "4Gi"),
    ];
    for (input, canonical) in cases {
        assert_eq!(q(input).to_string(), canonical, "{input}");
    }
    assert_eq!(Quantity::from_bytes(1 << 30).to_string(), "1Gi");
    assert_eq!(Quantity::from_milli(1500).to_string(), "1500m");
    assert_eq!(Quantity::from_units(4).to_string(), "4");
    assert_eq!(Quantity::ZERO.to_string(), "0");
}

#[test]
fn value_equality_and_hash() {
    use std::collections::BTreeSet;
    assert_eq!(q("1Gi"), q("1073741824"));
    assert_eq!(q("1Gi"), q("1024Mi"));
    assert!(q("1G") < q("1Gi"));
    let set: BTreeSet<Quantity> = [q("1Gi"), q("1024Mi"), q("1073741824")].into();
    assert_eq!(set.len(), 1);
}

#[test]
fn milli_and_value_round_up() {
    assert_eq!(q("1").milli_value(), 1000);
    assert_eq!(q("1.0001").milli_value(), 1001);
    assert_eq!(q("1n").milli_value(), 1);
    assert_eq!(q("1n").value(), 1);
    assert_eq!(q("1.5").value(), 2);
    assert_eq!(q("-1.5").value(), -2);
    assert_eq!(q("2Gi").value(), 2 << 30);
    assert_eq!(q("1e29").value(), i64::MAX);
    assert_eq!(q("-1e29").milli_value(), i64::MIN);
    assert!((q("1.5").as_f64() - 1.5).abs() < 1e-12);
    assert!((q("-2Gi").as_f64() + 2147483648.0).abs() < 1e-3);
}

#[test]
fn arithmetic_and_formats() {
    assert_eq!(q("1Gi") + q("512Mi"), q("1536Mi"));
    assert_eq!((q("1Gi") + q("512Mi")).to_string(), "1536Mi");
    // The left operand's format wins, unless it is zero.
    assert_eq!((q("1") + q("1Ki")).to_string(), "1025");
    assert_eq!((Quantity::ZERO + q("1Ki")).format(), Format::BinarySI);
    let total: Quantity = [q("1Gi"), q("1Gi")].into_iter().sum();
    assert_eq!(total.to_string(), "2Gi");
    assert_eq!(q("1") - q("1500m"), q("-500m"));
    assert_eq!(-q("1"), q("-1"));
    let mut a = q("1");
    a += q("1");
    a -= q("500m");
    assert_eq!(a, q("1.5"));
    let big = Quantity::from_nanos(i128::MAX, Format::DecimalSI);
    assert_eq!(big.checked_add(q("1n")), None);
    assert_eq!((big + q("1")).nanos(), i128::MAX);
    assert_eq!((-big - q("1")).nanos(), -i128::MAX);
    assert_eq!((-big).checked_sub(q("1n")), None);
    assert!(!q("1").is_zero());
    assert!(q("0m").is_zero());
    assert!(q("-1").is_negative());
    assert!(!q("0").is_negative());
}

#[test]
fn serde_forms() {
    let v: Quantity = serde_json::from_str("\"1Gi\"").unwrap_or_default();
    assert_eq!(v, q("1Gi"));
    let v: Quantity = serde_json::from_str("110").unwrap_or_default();
    assert_eq!(v, q("110"));
    let v: Quantity = serde_json::from_str("0.5").unwrap_or_default();
    assert_eq!(v, q("500m"));
    let v: Quantity = serde_json::from_str("-3").unwrap_or_default();
    assert_eq!(v, q("-3"));
    assert!(serde_json::from_str::<Quantity>("\"1 Gi\"").is_err());
    assert!(serde_json::from_str::<Quantity>("true").is_err());
    assert_eq!(
        serde_json::to_string(&q("1024Mi")).ok().as_deref(),
        Some("\"1Gi\"")
    );

    let list: ResourceList =
        serde_saphyr::from_str("cpu: 0.5\nmemory: 1Gi\npods: 110\n").unwrap_or_default();
    assert_eq!(
        list,
        rl(&[("cpu", "500m"), ("memory", "1Gi"), ("pods", "110")])
    );
    assert_eq!(
        serde_json::to_string(&list).ok().as_deref(),
        Some(r#"{"cpu":"500m","memory":"1Gi","pods":"110"}"#)
    );
    let back: ResourceList =
        serde_json::from_str(r#"{"cpu":"500m","memory":"1Gi","pods":110}"#).unwrap_or_default();
    assert_eq!(back, list);
}

#[test]
fn list_basics() {
    let mut l = ResourceList::new();
    assert!(l.is_empty());
    l.insert(names::MEMORY, q("1Gi"));
    l.insert(names::CPU, q("1"));
    assert_eq!(l.len(), 2);
    assert!(l.contains_key("cpu"));
    assert_eq!(l.keys().collect::<Vec<_>>(), ["cpu", "memory"]);
    assert_eq!(l.get("pods"), None);
    assert_eq!(l.get_or_zero("pods"), Quantity::ZERO);
    let pairs: Vec<(&str, Quantity)> = (&l).into_iter().collect();
    assert_eq!(pairs, [("cpu", q("1")), ("memory", q("1Gi"))]);
    assert_eq!(l.remove("cpu"), Some(q("1")));
    assert_eq!(l.to_string(), "{memory: 1Gi}");
}

#[test]
fn list_arithmetic() {
    let a = rl(&[("cpu", "1"), ("memory", "1Gi")]);
    let b = rl(&[("cpu", "500m"), ("pods", "1")]);
    assert_eq!(
        a.add(&b),
        rl(&[("cpu", "1500m"), ("memory", "1Gi"), ("pods", "1")])
    );
    assert_eq!(
        a.sub(&b),
        rl(&[("cpu", "500m"), ("memory", "1Gi"), ("pods", "-1")])
    );
    let mut c = a.clone();
    c.add_assign(&b);
    assert_eq!(c, a.add(&b));
    let mut d = a.sub(&b);
    d.clamp_non_negative();
    assert_eq!(d, rl(&[("cpu", "500m"), ("memory", "1Gi"), ("pods", "0")]));
}

#[test]
fn fits_semantics() {
    let total = rl(&[("cpu", "2"), ("memory", "4Gi")]);
    assert!(ResourceList::fits(&rl(&[("cpu", "2")]), &total));
    assert!(!ResourceList::fits(&rl(&[("cpu", "2001m")]), &total));
    assert!(ResourceList::fits(&ResourceList::new(), &total));
    // Unknown resource: zero fits, non-zero does not.
    assert!(ResourceList::fits(&rl(&[("nvidia.com/gpu", "0")]), &total));
    assert!(!ResourceList::fits(&rl(&[("nvidia.com/gpu", "1")]), &total));
    // Any negative total blocks everything, even an empty candidate.
    let negative = rl(&[("cpu", "2"), ("pods", "-1")]);
    assert!(!ResourceList::fits(&ResourceList::new(), &negative));
    assert!(!ResourceList::fits(&rl(&[("cpu", "1")]), &negative));
}

#[test]
fn max_min_exceeds() {
    let a = rl(&[("cpu", "1"), ("memory", "4Gi")]);
    let b = rl(&[("cpu", "2"), ("pods", "10")]);
    assert_eq!(
        ResourceList::max_per_key([&a, &b]),
        rl(&[("cpu", "2"), ("memory", "4Gi"), ("pods", "10")])
    );
    assert_eq!(ResourceList::min_common([&a, &b]), rl(&[("cpu", "1")]));
    assert_eq!(ResourceList::min_common([&a]), a);
    assert_eq!(
        ResourceList::min_common(std::iter::empty::<&ResourceList>()),
        ResourceList::new()
    );
    assert_eq!(
        ResourceList::max_per_key(std::iter::empty::<&ResourceList>()),
        ResourceList::new()
    );

    let usage = rl(&[("cpu", "10"), ("memory", "1Gi"), ("pods", "5")]);
    assert_eq!(usage.exceeds(&rl(&[("memory", "2Gi")])), None);
    assert_eq!(usage.exceeds(&rl(&[("memory", "1Gi")])), None);
    assert_eq!(
        usage
            .exceeds(&rl(&[("pods", "1"), ("cpu", "1")]))
            .as_deref(),
        Some("cpu")
    );
    assert_eq!(usage.exceeds(&rl(&[("nodes", "0")])), None);
}

fn any_format() -> impl Strategy<Value = Format> {
    prop_oneof![
        Just(Format::DecimalSI),
        Just(Format::BinarySI),
        Just(Format::DecimalExponent)
    ]
}

fn any_quantity() -> impl Strategy<Value = Quantity> {
    let nanos = prop_oneof![
        any::<i64>().prop_map(i128::from),
        (any::<i32>(), 0u32..7).prop_map(|(m, p)| i128::from(m) * NANO * (1i128 << (10 * p))),
        (any::<i32>(), 0u32..28).prop_map(|(m, p)| i128::from(m) * 10i128.pow(p)),
        (-MAX_NANOS..=MAX_NANOS),
    ];
    (nanos, any_format()).prop_map(|(n, f)| Quantity::from_nanos(n, f))
}

fn quantity_string() -> impl Strategy<Value = String> {
    let suffix = prop_oneof![
        Just(String::new()),
        prop::sample::select(vec![
            "n", "u", "m", "k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"
        ])
        .prop_map(str::to_owned),
        (-20i32..20).prop_map(|e| format!("e{e}")),
    ];
    (
        prop::sample::select(vec!["", "+", "-"]),
        0u64..10_000_000,
        prop::option::of(0u64..1_000_000),
        suffix,
    )
        .prop_map(|(sign, int, frac, suffix)| match frac {
            Some(fr) => format!("{sign}{int}.{fr}{suffix}"),
            None => format!("{sign}{int}{suffix}"),
        })
}

proptest! {
    #[test]
    fn print_parse_round_trip(v in any_quantity()) {
        let printed = v.to_string();
        let parsed = Quantity::parse(&printed);
        prop_assert!(parsed.is_ok(), "{printed}: {parsed:?}");
        let parsed = parsed.unwrap_or_default();
        prop_assert_eq!(parsed, v);
        let reprinted = parsed.to_string();
        // Kubernetes prints an integer BinarySI value that no power of 1024 divides without a
        // suffix (`2000`), which then reads back as DecimalSI (`2k`). Everything else keeps
        // its string; that exception is a fixed point after one round.
        let binary_without_suffix = v.format() == Format::BinarySI
            && printed.bytes().all(|b| b.is_ascii_digit() || b == b'-');
        if !binary_without_suffix {
            prop_assert_eq!(&reprinted, &printed);
        }
        let again = Quantity::parse(&reprinted).unwrap_or_default();
        prop_assert_eq!(again, v);
        prop_assert_eq!(again.to_string(), reprinted);
    }

    #[test]
    fn parsed_strings_round_trip(s in quantity_string()) {
        let v = Quantity::parse(&s);
        prop_assert!(v.is_ok(), "{s}: {v:?}");
        let v = v.unwrap_or_default();
        let printed = v.to_string();
        let back = Quantity::parse(&printed).unwrap_or_default();
        prop_assert_eq!(back, v);
        prop_assert_eq!(back.to_string(), printed);
    }

    #[test]
    fn add_sub_inverse(a in any::<i64>(), b in any::<i64>(), fa in any_format(), fb in any_format()) {
        let x = Quantity::from_nanos(i128::from(a), fa);
        let y = Quantity::from_nanos(i128::from(b), fb);
        prop_assert_eq!((x + y) - y, x);
        prop_assert_eq!((x - y) + y, x);
        prop_assert_eq!(x.checked_add(y).and_then(|s| s.checked_sub(y)), Some(x));
        prop_assert_eq!(x + y, y + x);
        prop_assert_eq!(-(-x), x);
    }

    #[test]
    fn ordering_matches_value(a in any_quantity(), b in any_quantity()) {
        prop_assert_eq!(a.cmp(&b), a.nanos().cmp(&b.nanos()));
        prop_assert_eq!(a == b, a.nanos() == b.nanos());
    }

    #[test]
    fn fits_matches_definition(
        cand in prop::collection::btree_map("[a-d]", -5i64..10, 0..4),
        total in prop::collection::btree_map("[a-d]", -2i64..10, 0..4),
    ) {
        let c: ResourceList = cand.iter().map(|(k, v)| (k.clone(), Quantity::from_units(*v))).collect();
        let t: ResourceList = total.iter().map(|(k, v)| (k.clone(), Quantity::from_units(*v))).collect();
        let expected = total.values().all(|v| *v >= 0)
            && cand.iter().all(|(k, v)| *v <= total.get(k).copied().unwrap_or(0));
        prop_assert_eq!(ResourceList::fits(&c, &t), expected);
        // Whatever fits in the total fits in the total plus anything non-negative.
        if expected {
            let extra: ResourceList = [("a", Quantity::from_units(1))].into_iter().collect();
            prop_assert!(ResourceList::fits(&c, &t.add(&extra)));
        }
    }

    #[test]
    fn list_add_sub_inverse(
        a in prop::collection::btree_map("[a-d]", any::<i32>(), 0..4),
        b in prop::collection::btree_map("[a-d]", any::<i32>(), 0..4),
    ) {
        let a: ResourceList = a.iter().map(|(k, v)| (k.clone(), Quantity::from_milli(i64::from(*v)))).collect();
        let b: ResourceList = b.iter().map(|(k, v)| (k.clone(), Quantity::from_milli(i64::from(*v)))).collect();
        let round = a.add(&b).sub(&b);
        for (name, v) in round.iter() {
            prop_assert_eq!(v, a.get_or_zero(name));
        }
        prop_assert!(a.keys().all(|k| round.contains_key(k)));
    }
}

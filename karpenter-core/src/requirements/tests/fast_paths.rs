//! The scheduler's fast paths against the plain definitions: [`Requirements::intersection_if_changed`]
//! against [`Requirements::intersection`], and the one-walk [`Requirements::compatible`] /
//! [`Requirements::intersects`] against a per-key lookup (the previous implementation), error
//! values included.

use super::*;

/// `intersects` by looking each key of the smaller side up in the larger one.
fn intersects_by_lookup(a: &Requirements, b: &Requirements) -> Result<(), IncompatibleError> {
    let a_smaller = a.len() <= b.len();
    let (small, large) = if a_smaller { (a, b) } else { (b, a) };
    for s in small.iter() {
        let Some(l) = large.get(s.key()) else {
            continue;
        };
        let (left, right) = if a_smaller { (s, l) } else { (l, s) };
        if !(left.has_intersection(right) || (absent(left) && absent(right))) {
            return Err(IncompatibleError::NoIntersection {
                key: s.key().to_string(),
                left: left.describe(),
                right: right.describe(),
            });
        }
    }
    Ok(())
}

/// `compatible` as two passes: every undefined key first, then `intersects`.
fn compatible_by_lookup(
    a: &Requirements,
    b: &Requirements,
    allow: Option<&LabelPolicy>,
) -> Result<(), IncompatibleError> {
    for r in b.iter() {
        if allow.is_some_and(|p| p.is_well_known(r.key())) {
            continue;
        }
        if !a.has(r.key()) && !absent(r) {
            return Err(IncompatibleError::UndefinedKey {
                key: r.key().to_string(),
            });
        }
    }
    intersects_by_lookup(a, b)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// The one-walk `compatible` and `intersects` return exactly the per-key lookup's result.
    #[test]
    fn walks_agree_with_lookup(
        a in requirements(),
        b in requirements(),
        well_known in proptest::sample::subsequence(KEYS.to_vec(), 0..=3),
    ) {
        let policy = LabelPolicy::core().with_well_known(well_known.iter().copied());
        for allow in [None, Some(&policy)] {
            prop_assert_eq!(a.compatible(&b, allow), compatible_by_lookup(&a, &b, allow));
            prop_assert_eq!(b.compatible(&a, allow), compatible_by_lookup(&b, &a, allow));
        }
        prop_assert_eq!(a.intersects(&b), intersects_by_lookup(&a, &b));
        // Keys sharing one string (a requirement cloned from the other side) compare equal.
        let shared: Requirements = a.iter().cloned().chain(b.iter().cloned()).collect();
        prop_assert_eq!(shared.intersects(&a), intersects_by_lookup(&shared, &a));
        prop_assert_eq!(a.compatible(&shared, None), compatible_by_lookup(&a, &shared, None));
    }

    /// `None` exactly when the intersection equals the receiver, else the intersection.
    #[test]
    fn agrees_with_intersection(a in requirements(), b in requirements()) {
        let full = a.intersection(&b);
        match a.intersection_if_changed(&b) {
            None => prop_assert_eq!(&full, &a),
            Some(changed) => {
                prop_assert_ne!(&full, &a);
                prop_assert_eq!(changed, full);
            }
        }
    }

    /// Constraints already met (the receiver intersected with them before, or a subset of the
    /// receiver's own keys) change nothing.
    #[test]
    fn met_constraints_change_nothing(a in requirements(), b in requirements()) {
        let narrowed = a.intersection(&b);
        prop_assert_eq!(narrowed.intersection_if_changed(&b), None);
        prop_assert_eq!(narrowed.intersection_if_changed(&narrowed), None);
        prop_assert_eq!(narrowed.intersection_if_changed(&Requirements::new()), None);
    }
}

#[test]
fn a_new_key_or_a_narrower_value_is_a_change() {
    let claim = reqs(&[req("zone", Operator::In, &["a", "b"])]);
    let same = reqs(&[req("zone", Operator::NotIn, &["c"])]);
    assert_eq!(claim.intersection_if_changed(&same), None);
    let narrower = reqs(&[req("zone", Operator::In, &["a"])]);
    assert_eq!(
        claim.intersection_if_changed(&narrower),
        Some(reqs(&[req("zone", Operator::In, &["a"])]))
    );
    let new_key = reqs(&[
        req("arch", Operator::In, &["arm64"]),
        req("zone", Operator::In, &["b", "c"]),
    ]);
    assert_eq!(
        claim.intersection_if_changed(&new_key),
        Some(reqs(&[
            req("arch", Operator::In, &["arm64"]),
            req("zone", Operator::In, &["b"]),
        ]))
    );
    // minValues counts as a change.
    let min = reqs(&[req("zone", Operator::Exists, &[]).with_min_values(Some(2))]);
    assert!(claim.intersection_if_changed(&min).is_some());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Requirements built from label maps through one shared interner equal those built
    /// directly, deprecated keys (normalised) included, whatever the maps share.
    #[test]
    fn interned_labels_agree_with_from_labels(
        maps in proptest::collection::vec(
            proptest::collection::btree_map(
                proptest::sample::select(vec![
                    "a", "b", "zone", "beta.kubernetes.io/arch", "kubernetes.io/arch",
                    "failure-domain.beta.kubernetes.io/zone", "topology.kubernetes.io/zone",
                ]),
                proptest::sample::select(vec!["1", "2", "x", "amd64", "arm64"]),
                0..6,
            ),
            1..4,
        ),
    ) {
        let mut interner = LabelInterner::default();
        for m in &maps {
            let plain = Requirements::from_labels(m.iter().map(|(k, v)| (*k, *v)));
            let interned = Requirements::from_labels_interned(
                m.iter().map(|(k, v)| (*k, *v)),
                &mut interner,
            );
            prop_assert_eq!(interned, plain);
        }
    }
}

//! Registration of the batch once per pod class.

use super::*;

/// The batch registered once per class gives every pod the entry it gets on its own.
#[test]
fn class_registration_gives_each_pod_its_own_entry() {
    let web = |name: &str| {
        let mut p = pod(name, &[("app", "web")]);
        p.topology_spread_constraints
            .push(tsc(ZONE, 1, Some(selector(&[("app", "web")]))));
        p.pod_anti_affinity = required(vec![term(HOSTNAME, &[("app", "web")])]);
        p
    };
    let db = |name: &str| {
        let mut p = pod(name, &[("app", "db")]);
        p.pod_affinity = required(vec![term(ZONE, &[("app", "db")])]);
        p
    };
    let batch = vec![web("w1"), db("d1"), web("w2"), web("w3"), db("d2")];
    let env = || {
        Env::new(zones()).node(
            node("n1", &[(ZONE, "a")]),
            vec![pod("old", &[("app", "web")])],
        )
    };
    let alone = env().build(&batch);
    let by_class = env().build_classes(&batch, &[0, 1, 0, 0, 1]);
    let entries = |t: &Topology<'_>| {
        let mut v: Vec<String> = t.pods.iter().map(|(k, e)| format!("{k}: {e:?}")).collect();
        v.sort();
        v
    };
    assert_eq!(entries(&alone), entries(&by_class));
    assert_eq!(alone.pods.len(), 5);
    for p in &batch {
        let node = claim("h", vec![req(ZONE, Operator::In, &["a", "b"])]);
        let strict = Requirements::default();
        assert_eq!(
            alone
                .add_requirements(p, &strict, &node)
                .map_err(|e| e.to_string()),
            by_class
                .add_requirements(p, &strict, &node)
                .map_err(|e| e.to_string()),
        );
    }
}

use std::collections::BTreeMap;
use std::sync::Arc;

use proptest::prelude::*;

use super::{CommonDomains, Group, GroupSpec, TopologyType};
use crate::scheduling::topology::selector::Selector;

#[derive(Debug, Clone)]
enum Op {
    Register(u32),
    RegisterMany(Vec<u32>),
    Record(u32),
    Unregister(u32),
    Common(Vec<u32>),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0u32..40).prop_map(Op::Register),
        proptest::collection::vec(0u32..40, 0..20).prop_map(Op::RegisterMany),
        (0u32..40).prop_map(Op::Record),
        (0u32..40).prop_map(Op::Unregister),
        proptest::collection::vec(0u32..40, 0..20).prop_map(Op::Common),
    ]
}

fn group() -> Group {
    Group::new(GroupSpec {
        kind: TopologyType::PodAntiAffinity,
        key: 0,
        hostname: true,
        max_skew: i32::MAX,
        min_domains: None,
        namespaces: Arc::from([]),
        selector: Arc::new(Selector::compile(None)),
        nil_selector: true,
        filter: None,
    })
}

proptest! {
    /// Entries plus shared common domains behave exactly like one map of known domains.
    #[test]
    fn storage_matches_a_plain_map(ops in proptest::collection::vec(op(), 0..120)) {
        let mut g = group();
        let mut model: BTreeMap<u32, u32> = BTreeMap::new();
        for op in ops {
            match op {
                Op::Register(id) => {
                    g.register(id);
                    model.entry(id).or_insert(0);
                }
                Op::RegisterMany(ids) => {
                    for &id in &ids {
                        model.entry(id).or_insert(0);
                    }
                    g.register_many(ids);
                }
                Op::Record(id) => {
                    g.record(id);
                    *model.entry(id).or_insert(0) += 1;
                }
                Op::Unregister(id) => {
                    g.unregister(id);
                    model.remove(&id);
                }
                Op::Common(ids) => {
                    g.register_common(&Arc::new(CommonDomains::new(&ids)));
                    for id in ids {
                        model.entry(id).or_insert(0);
                    }
                }
            }
            let known: Vec<(u32, u32)> = g.known_domains().collect();
            let expected: Vec<(u32, u32)> = model.iter().map(|(&k, &v)| (k, v)).collect();
            prop_assert_eq!(&known, &expected);
            prop_assert_eq!(g.known_len(), model.len());
            for id in 0..40 {
                prop_assert_eq!(g.count(id), model.get(&id).copied());
            }
            prop_assert_eq!(g.all_empty(), model.values().all(|&c| c == 0));
            let mut nonzero = g.nonzero.to_vec();
            nonzero.sort_unstable();
            let expected_nonzero: Vec<u32> =
                model.iter().filter(|(_, c)| **c > 0).map(|(&k, _)| k).collect();
            prop_assert_eq!(nonzero, expected_nonzero);
        }
    }
}

//! [`CountMemos`]: the existing pods a new group counts, found once per prepared template and
//! shared by its forks.
//!
//! When a group is created it counts every existing pod it selects (see the module docs of the
//! topology). In a consolidation simulation the groups created are those of the pods the
//! simulation moves (their spreads and affinity terms), and every simulation over one snapshot
//! creates much the same ones again: scanning the cluster's pods each time costs work in
//! proportion to the cluster. A memo records, for one counting signature (topology key,
//! namespaces, selector, node filter), every existing pod the scan over the whole base counts,
//! by domain; a fork then counts a domain's pods that sit on a node it keeps and are not in its
//! batch — the same counts the scan over the fork's nodes gives.

use std::sync::{Arc, Mutex};

use rustc_hash::FxHashMap;

use super::group::NodeFilter;
use super::selector::SelectorKey;

/// What a group's count of the existing pods depends on, besides the nodes left out and the
/// batch.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct CountKey {
    /// The topology key.
    pub(super) key: String,
    pub(super) namespaces: Arc<[String]>,
    /// The selector's identity; `None` for a nil selector.
    pub(super) selector: Option<Arc<SelectorKey>>,
    pub(super) filter: Option<NodeFilter>,
}

/// The pods a group with one [`CountKey`] counts over the whole base, per domain (in the order
/// a full scan meets them).
#[derive(Debug, Default)]
pub(super) struct CountMemo {
    pub(super) domains: Vec<MemoDomain>,
    /// Domain → position in `domains`, while recording.
    positions: FxHashMap<Box<str>, usize>,
}

/// One domain of a [`CountMemo`].
#[derive(Debug)]
pub(super) struct MemoDomain {
    /// A node whose domain it is (the domain's name is that node's).
    pub(super) node: u32,
    /// The counted pods: (position of the pod's node in the base, position of its namespace in
    /// the group's namespaces, position of the pod among the base's countable pods of that
    /// namespace).
    pub(super) pods: Vec<(u32, u32, u32)>,
}

impl CountMemo {
    /// Adds a counted pod of `domain`.
    pub(super) fn push(&mut self, domain: &str, pod: (u32, u32, u32)) {
        let next = self.domains.len();
        let i = match self.positions.get(domain) {
            Some(&i) => i,
            None => {
                self.positions.insert(Box::from(domain), next);
                next
            }
        };
        match self.domains.get_mut(i) {
            Some(d) => d.pods.push(pod),
            None => self.domains.push(MemoDomain {
                node: pod.0,
                pods: vec![pod],
            }),
        }
    }

    /// Drops the recording index.
    pub(super) fn finish(mut self) -> CountMemo {
        self.positions = FxHashMap::default();
        self
    }
}

/// The memos of one template, filled on first use by any of its forks.
#[derive(Debug, Default)]
pub(crate) struct CountMemos {
    memos: Mutex<FxHashMap<CountKey, Arc<CountMemo>>>,
}

impl CountMemos {
    /// The memo of `key`, if one was recorded.
    pub(super) fn get(&self, key: &CountKey) -> Option<Arc<CountMemo>> {
        let memos = self.memos.lock().unwrap_or_else(|e| e.into_inner());
        memos.get(key).cloned()
    }

    /// Records the memo of `key` (the first one recorded wins; all are equal).
    pub(super) fn insert(&self, key: CountKey, memo: CountMemo) -> Arc<CountMemo> {
        let mut memos = self.memos.lock().unwrap_or_else(|e| e.into_inner());
        memos.entry(key).or_insert_with(|| Arc::new(memo)).clone()
    }
}

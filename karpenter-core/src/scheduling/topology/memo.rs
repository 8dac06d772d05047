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
//!
//! Likewise a group without node filter starts from the domains of the active nodes' labels for
//! its key: [`NodeValues`] records, once per key, every node's label value, so that a fork
//! finds the domains its kept nodes carry without reading every node's labels again.

use std::sync::{Arc, Mutex};

use rustc_hash::FxHashMap;

use super::group::{KeyDomains, NodeFilter, SharedTable};
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

/// The label values of one topology key over the base's nodes, recorded once per template.
#[derive(Debug)]
pub(super) struct NodeValues {
    /// The distinct values of the nodes not marked for deletion, in the order the nodes first
    /// show them.
    values: Vec<Box<str>>,
    /// Per node of the base: the position of its value in `values`; [`NodeValues::NONE`] when
    /// the node has no label for the key or is marked for deletion.
    of_node: Vec<u32>,
    /// Per value: how many nodes not marked for deletion carry it.
    nodes: Vec<u32>,
    /// The shared table of the key that recorded the values (a template's key: forks share
    /// it), with each value's id in it ([`NodeValues::NONE`] when absent).
    shared: Option<(SharedTable, Vec<u32>)>,
}

impl NodeValues {
    /// No value.
    const NONE: u32 = u32::MAX;

    /// The values of `nodes` (label maps, and whether the node is marked for deletion) for the
    /// key of `kd`.
    pub(super) fn new<'n>(
        kd: &KeyDomains,
        nodes: impl Iterator<Item = (&'n std::collections::BTreeMap<String, String>, bool)>,
    ) -> NodeValues {
        let mut positions: FxHashMap<&'n str, u32> = FxHashMap::default();
        let mut values: Vec<Box<str>> = Vec::new();
        let mut counts: Vec<u32> = Vec::new();
        let of_node = nodes
            .map(|(labels, marked)| {
                let Some(value) = labels.get(&kd.key).filter(|_| !marked) else {
                    return Self::NONE;
                };
                let next = u32::try_from(values.len()).unwrap_or(Self::NONE);
                let v = *positions.entry(value.as_str()).or_insert(next);
                if v == next {
                    values.push(Box::from(value.as_str()));
                    counts.push(0);
                }
                if let Some(c) = counts.get_mut(v as usize) {
                    *c += 1;
                }
                v
            })
            .collect();
        let ids: Vec<u32> = values
            .iter()
            .map(|v| kd.shared_id(v).unwrap_or(Self::NONE))
            .collect();
        let shared = ids
            .iter()
            .any(|&id| id != Self::NONE)
            .then(|| (kd.shared_table(), ids));
        NodeValues {
            values,
            of_node,
            nodes: counts,
            shared,
        }
    }

    /// The ids in `kd` of the values some node carries that `active` keeps (per node of the
    /// base; a node marked for deletion never counts), interning those `kd` does not know.
    pub(super) fn active_ids(
        &self,
        kd: &mut KeyDomains,
        active: impl Fn(usize) -> bool,
    ) -> Vec<u32> {
        let mut counts = self.nodes.clone();
        for (i, &v) in self.of_node.iter().enumerate() {
            if v != Self::NONE
                && !active(i)
                && let Some(c) = counts.get_mut(v as usize)
            {
                *c = c.saturating_sub(1);
            }
        }
        let shared = self
            .shared
            .as_ref()
            .filter(|(table, _)| kd.shares(table))
            .map(|(_, ids)| ids.as_slice());
        let mut out = Vec::new();
        for (v, (value, &count)) in self.values.iter().zip(&counts).enumerate() {
            if count == 0 {
                continue;
            }
            match shared
                .and_then(|ids| ids.get(v))
                .filter(|&&id| id != Self::NONE)
            {
                Some(&id) => out.push(id),
                None => out.push(kd.intern(value)),
            }
        }
        out
    }
}

/// The memos of one template, filled on first use by any of its forks.
#[derive(Debug, Default)]
pub(crate) struct CountMemos {
    memos: Mutex<FxHashMap<CountKey, Arc<CountMemo>>>,
    /// Per topology key: the nodes' label values.
    node_values: Mutex<FxHashMap<String, Arc<NodeValues>>>,
}

impl CountMemos {
    /// The memo of `key`, if one was recorded.
    pub(super) fn get(&self, key: &CountKey) -> Option<Arc<CountMemo>> {
        let memos = self.memos.lock().unwrap_or_else(|e| e.into_inner());
        memos.get(key).cloned()
    }

    /// The label values of the nodes for the key of `kd`, recorded by `record` on first use.
    pub(super) fn node_values(
        &self,
        kd: &KeyDomains,
        record: impl FnOnce() -> NodeValues,
    ) -> Arc<NodeValues> {
        let mut values = self.node_values.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(v) = values.get(&kd.key) {
            return v.clone();
        }
        let v = Arc::new(record());
        values.insert(kd.key.clone(), v.clone());
        v
    }

    /// Records the memo of `key` (the first one recorded wins; all are equal).
    pub(super) fn insert(&self, key: CountKey, memo: CountMemo) -> Arc<CountMemo> {
        let mut memos = self.memos.lock().unwrap_or_else(|e| e.into_inner());
        memos.entry(key).or_insert_with(|| Arc::new(memo)).clone()
    }
}

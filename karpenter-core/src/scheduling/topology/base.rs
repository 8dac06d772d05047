//! [`TopologyBase`]: what every topology over one set of existing nodes shares, built once.

use super::{CountedPod, InverseProto, InverseTerm, index};
use crate::model::{Pod, PodAffinityTerm};
use crate::scheduling::ExistingNodeRef;
use crate::scheduling::topology::selector::{Selector, SelectorKey};
use rustc_hash::FxHashMap;
use std::collections::BTreeMap;

/// What every [`Topology`] over one set of existing nodes shares, built once: the countable
/// existing pods (terminal and terminating ones left out) by namespace with their label index,
/// the known namespaces, and the existing pods' required anti-affinity terms with their group
/// identities. A topology that leaves some nodes out (a consolidation simulation removing its
/// candidates) skips their pods and terms; the result is the topology of a cluster without
/// them.
#[derive(Debug)]
pub(crate) struct TopologyBase<'a> {
    pub(super) nodes: Vec<ExistingNodeRef<'a>>,
    pub(super) namespaces: BTreeMap<String, BTreeMap<String, String>>,
    pub(super) counted_pods: FxHashMap<&'a str, Vec<CountedPod<'a>>>,
    /// Per namespace: label (key, value) → positions in `counted_pods`, ascending. Lets a new
    /// group visit only the pods carrying its first `matchLabels` pair. Built by the first group
    /// that needs it (see [`TopologyBase::counted_by_label`]).
    counted_by_label: std::sync::OnceLock<LabelIndex>,
    /// UIDs of the countable pods and of the pods with inverse terms, with the position of
    /// their node.
    pub(super) counted_uids: FxHashMap<&'a str, u32>,
    /// The UIDs of `counted_uids` that pods on more than one node carry.
    pub(super) shared_uids: rustc_hash::FxHashSet<&'a str>,
    pub(super) inverse_terms: Vec<InverseTerm<'a>>,
    pub(super) prototypes: Vec<InverseProto>,
}

/// Per namespace: the hash of a label (key, value) ([`label_hash`]) → positions of the
/// namespace's counted pods carrying a label of that hash, ascending. Owned, so the base's
/// lifetime stays covariant: a hash may stand for more than one label, and the positions are a
/// superset its users filter (they test every visited pod's labels).
type LabelIndex = FxHashMap<String, FxHashMap<u64, Vec<u32>>>;

/// The hash of a label (key, value) in [`LabelIndex`].
pub(super) fn label_hash(key: &str, value: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = rustc_hash::FxHasher::default();
    (key, value).hash(&mut h);
    h.finish()
}

impl<'a> TopologyBase<'a> {
    /// Per namespace: label (key, value) → positions in `counted_pods`, ascending (a superset:
    /// see [`LabelIndex`]), built on first use (a solve whose pods count no existing pod never
    /// needs it).
    pub(super) fn counted_by_label(&self) -> &LabelIndex {
        self.counted_by_label.get_or_init(|| {
            let mut out = LabelIndex::default();
            for (&ns, pods) in &self.counted_pods {
                let mut by_label: FxHashMap<u64, Vec<u32>> = FxHashMap::default();
                for (pos, p) in pods.iter().enumerate() {
                    for (lk, lv) in p.labels {
                        let positions = by_label.entry(label_hash(lk, lv)).or_default();
                        // Two labels of one pod may share a hash: each position once.
                        if positions.last() != Some(&index(pos)) {
                            positions.push(index(pos));
                        }
                    }
                }
                out.insert(ns.to_string(), by_label);
            }
            out
        })
    }

    /// The existing nodes the base was built over, in input order.
    pub(crate) fn nodes(&self) -> &[ExistingNodeRef<'a>] {
        &self.nodes
    }

    /// The base over `nodes`. Known namespaces are those of `namespace_labels` plus the
    /// namespaces of `pods` and of every pod bound to `nodes`.
    pub(crate) fn new(
        nodes: Vec<ExistingNodeRef<'a>>,
        namespace_labels: &BTreeMap<String, BTreeMap<String, String>>,
        pods: &[&Pod],
    ) -> TopologyBase<'a> {
        let mut namespaces = namespace_labels.clone();
        let existing_pods = nodes.iter().flat_map(|n| n.pods.iter());
        for p in pods.iter().copied().chain(existing_pods) {
            if !namespaces.contains_key(&p.namespace) {
                namespaces.insert(p.namespace.clone(), BTreeMap::new());
            }
        }
        let mut base = TopologyBase {
            nodes,
            namespaces,
            counted_pods: FxHashMap::default(),
            counted_by_label: std::sync::OnceLock::new(),
            counted_uids: FxHashMap::default(),
            shared_uids: rustc_hash::FxHashSet::default(),
            inverse_terms: Vec::new(),
            prototypes: Vec::new(),
        };
        type ProtoKey = (
            String,
            std::sync::Arc<[String]>,
            Option<std::sync::Arc<SelectorKey>>,
        );
        let mut proto_ids: FxHashMap<ProtoKey, u32> = FxHashMap::default();
        for (i, n) in base.nodes.iter().enumerate() {
            for p in n.pods {
                if p.is_terminal() {
                    continue;
                }
                if !p.is_terminating() {
                    base.counted_pods
                        .entry(p.namespace.as_str())
                        .or_default()
                        .push(CountedPod {
                            node: index(i),
                            uid: &p.uid,
                            labels: &p.labels,
                        });
                    if base
                        .counted_uids
                        .insert(&p.uid, index(i))
                        .is_some_and(|n| n != index(i))
                    {
                        base.shared_uids.insert(&p.uid);
                    }
                }
                let Some(anti) = &p.pod_anti_affinity else {
                    continue;
                };
                if base
                    .counted_uids
                    .insert(&p.uid, index(i))
                    .is_some_and(|n| n != index(i))
                {
                    base.shared_uids.insert(&p.uid);
                }
                for term in &anti.required {
                    let namespaces =
                        term_namespaces(&base.namespaces, &BTreeMap::new(), &p.namespace, term);
                    let selector_key = term
                        .label_selector
                        .as_ref()
                        .map(|s| std::sync::Arc::new(SelectorKey::of(s)));
                    let key: ProtoKey = (term.topology_key.clone(), namespaces, selector_key);
                    let next = index(base.prototypes.len());
                    let proto = *proto_ids.entry(key.clone()).or_insert(next);
                    if proto == next {
                        base.prototypes.push(InverseProto {
                            key: key.0,
                            namespaces: key.1,
                            namespace_selector: term.namespace_selector.is_some(),
                            selector: std::sync::Arc::new(Selector::compile(
                                term.label_selector.as_ref(),
                            )),
                            selector_key: key.2,
                            nil_selector: term.label_selector.is_none(),
                        });
                    }
                    base.inverse_terms.push(InverseTerm {
                        node: index(i),
                        pod: p,
                        term,
                        proto,
                        domain: n.node.labels.get(&term.topology_key).map(String::as_str),
                    });
                }
            }
        }
        base
    }
}

/// The namespaces of a pod (anti-)affinity term (upstream `Topology.Update`), sorted and
/// deduplicated, given the known namespaces.
pub(super) fn term_namespaces(
    known: &BTreeMap<String, BTreeMap<String, String>>,
    extra: &BTreeMap<String, BTreeMap<String, String>>,
    pod_namespace: &str,
    term: &PodAffinityTerm,
) -> std::sync::Arc<[String]> {
    let mut out: Vec<String> = match &term.namespace_selector {
        None if term.namespaces.is_empty() => vec![pod_namespace.to_owned()],
        None => term.namespaces.clone(),
        Some(selector) => {
            let selector = Selector::compile(Some(selector));
            known
                .iter()
                .chain(extra)
                .filter(|(_, labels)| selector.matches(labels))
                .map(|(name, _)| name.clone())
                .chain(term.namespaces.iter().cloned())
                .collect()
        }
    };
    out.sort();
    out.dedup();
    out.into()
}

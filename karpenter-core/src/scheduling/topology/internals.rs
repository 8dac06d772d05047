//! The topology's bookkeeping: interning keys and node filters, creating groups for a pod's
//! terms (and the inverse groups of required anti-affinity) and counting their domains.

use super::base::{TopologyBase, term_namespaces};
use super::memo::{CountKey, CountMemo, NodeValues};
use super::{
    CountedPod, FilterEntry, GroupIdentity, GroupRef, NodeData, PodEntry, PodRef, Topology, index,
};
use crate::labels;
use crate::model::{
    LabelSelector, LabelSelectorRequirement, NodeInclusionPolicy, Pod, PodAffinityTerm,
    SelectorOperator, TopologySpreadConstraint,
};
use crate::requirements::Requirements;
use crate::scheduling::topology::group::TopologyType;
use crate::scheduling::topology::group::{CommonDomains, Group, GroupSpec, KeyDomains, NodeFilter};
use crate::scheduling::topology::selector::{Selector, SelectorKey};
use fixedbitset::FixedBitSet;
use smallvec::SmallVec;
use std::borrow::Cow;
use std::collections::BTreeMap;

impl<'a> Topology<'a> {
    pub(super) fn key_id(&mut self, key: &str) -> u32 {
        if let Some(&id) = self.key_ids.get(key) {
            return id;
        }
        let id = index(self.keys.len());
        self.keys.push(KeyDomains::new(key));
        self.by_key.push(SmallVec::new());
        self.node_domains.push(None);
        self.key_ids.insert(key.to_owned(), id);
        if key == labels::HOSTNAME {
            self.hostname_key = Some(id);
        }
        id
    }

    pub(super) fn filter_id(&mut self, filter: NodeFilter) -> u32 {
        if let Some(&id) = self.filter_ids.get(&filter) {
            return id;
        }
        let id = index(self.filters.len());
        self.filters.push(FilterEntry {
            trivial: filter.is_trivial(),
            filter: filter.clone(),
            nodes: None,
        });
        self.filter_ids.insert(filter, id);
        id
    }

    /// Which existing nodes pass filter `fid`; `None` when every node does.
    pub(super) fn filter_nodes(&mut self, fid: Option<u32>) -> Option<FixedBitSet> {
        let entry = self.filters.get_mut(fid? as usize)?;
        if entry.trivial {
            return None;
        }
        if entry.nodes.is_none() {
            let mut set = FixedBitSet::with_capacity(self.nodes.len());
            for (i, n) in self.nodes.iter_mut().enumerate() {
                let labels = n.labels;
                let requirements = n.requirements.get_or_insert_with(|| {
                    Requirements::from_labels(labels.iter().map(|(k, v)| (k.as_str(), v.as_str())))
                });
                set.set(i, entry.filter.matches(n.taints, requirements));
            }
            entry.nodes = Some(set);
        }
        entry.nodes.clone()
    }

    pub(super) fn for_each_group_of_key(&mut self, kid: u32, f: impl FnMut(&mut Group)) {
        self.for_each_group_of_key_from(kid, 0, f);
    }

    /// [`for_each_group_of_key`](Self::for_each_group_of_key) over the key's groups from the
    /// `from`-th one (in creation order).
    pub(super) fn for_each_group_of_key_from(
        &mut self,
        kid: u32,
        from: usize,
        mut f: impl FnMut(&mut Group),
    ) {
        let Some(refs) = self.by_key.get(kid as usize) else {
            return;
        };
        for r in refs.iter().skip(from) {
            let g = match *r {
                GroupRef::Normal(i) => self.groups.get_mut(i as usize),
                GroupRef::Inverse(i) => self.inverse.get_mut(i as usize),
            };
            if let Some(g) = g {
                f(g);
            }
        }
    }

    /// The namespaces of a pod (anti-)affinity term (upstream `Topology.Update`), sorted and
    /// deduplicated.
    pub(super) fn term_namespaces(
        &self,
        pod_namespace: &str,
        term: &PodAffinityTerm,
    ) -> std::sync::Arc<[String]> {
        term_namespaces(
            &self.base.namespaces,
            &self.extra_namespaces,
            pod_namespace,
            term,
        )
    }

    /// Finds or creates a non-inverse group; creation initialises its domains and counts the
    /// existing pods (upstream `NewTopologyGroup` / `countDomains`).
    pub(super) fn owned_group(&mut self, pod: &Pod, term: OwnedTerm<'_>) -> u32 {
        let key = self.key_id(term.key);
        let filter = term.filter.map(|f| self.filter_id(f));
        let identity = GroupIdentity {
            kind: term.kind,
            key,
            namespaces: term.namespaces,
            max_skew: term.max_skew,
            filter,
            selector: term
                .selector
                .map(|s| std::sync::Arc::new(SelectorKey::of(s))),
        };
        if let Some(&gid) = self.group_ids.get(&identity) {
            return gid;
        }
        let honor_taints = match filter.and_then(|f| self.filters.get(f as usize)) {
            Some(f) => f.filter.taint_policy == NodeInclusionPolicy::Honor,
            None => true,
        };
        let mut group = Group::new(GroupSpec {
            kind: term.kind,
            key,
            hostname: term.key == labels::HOSTNAME,
            max_skew: term.max_skew,
            min_domains: term.min_domains,
            namespaces: identity.namespaces.clone(),
            selector: std::sync::Arc::new(Selector::compile(term.selector)),
            nil_selector: term.selector.is_none(),
            filter,
        });
        self.init_domains(&mut group, pod, honor_taints);
        self.count_domains(&mut group, Some(identity.selector.as_ref()));
        let gid = index(self.groups.len());
        self.group_index.insert(gid, &group.selector);
        if let Some(refs) = self.by_key.get_mut(key as usize) {
            refs.push(GroupRef::Normal(gid));
        }
        self.groups.push(group);
        self.group_ids.insert(identity, gid);
        gid
    }

    /// Finds or creates the inverse group of a required anti-affinity term of `pod`.
    pub(super) fn inverse_group(&mut self, pod: &Pod, term: &PodAffinityTerm) -> u32 {
        let key = self.key_id(&term.topology_key);
        let namespaces = self.term_namespaces(&pod.namespace, term);
        let identity = GroupIdentity {
            kind: TopologyType::PodAntiAffinity,
            key,
            namespaces,
            max_skew: i32::MAX,
            filter: None,
            selector: term
                .label_selector
                .as_ref()
                .map(|s| std::sync::Arc::new(SelectorKey::of(s))),
        };
        if let Some(&gid) = self.inverse_ids.get(&identity) {
            return gid;
        }
        let mut group = Group::new(GroupSpec {
            kind: TopologyType::PodAntiAffinity,
            key,
            hostname: term.topology_key == labels::HOSTNAME,
            max_skew: i32::MAX,
            min_domains: None,
            namespaces: identity.namespaces.clone(),
            selector: std::sync::Arc::new(Selector::compile(term.label_selector.as_ref())),
            nil_selector: term.label_selector.is_none(),
            filter: None,
        });
        self.init_domains(&mut group, pod, true);
        self.push_inverse(group, identity)
    }

    /// Adds a new inverse group.
    pub(super) fn push_inverse(&mut self, group: Group, identity: GroupIdentity) -> u32 {
        let key = group.key;
        let gid = index(self.inverse.len());
        self.inverse_index.insert(gid, &group.selector);
        if let Some(refs) = self.by_key.get_mut(key as usize) {
            refs.push(GroupRef::Inverse(gid));
        }
        self.inverse.push(group);
        self.inverse_ids.insert(identity, gid);
        if !self.defer_inverse_refresh {
            self.refresh_inverse_selecting(Some(gid));
        }
        gid
    }

    /// Registers the universe domains of the group's key (upstream `NewTopologyGroup` /
    /// `countDomains`): all of them, or with `honor_taints` only those some producing pool's taints
    /// are tolerated by `pod`.
    pub(super) fn init_domains(&mut self, group: &mut Group, pod: &Pod, honor_taints: bool) {
        let Some(kd) = self.keys.get_mut(group.key as usize) else {
            return;
        };
        for (domain, taints) in self.universe.domains(&kd.key) {
            if !honor_taints || taints.tolerated_by(&pod.tolerations) {
                group.register(kd.intern(domain));
            }
        }
    }

    /// Discovers domains from existing nodes and counts existing pods (upstream `NewTopologyGroup`
    /// / `countDomains`). `memo_selector` is the group's selector identity (`Some(None)` for a nil
    /// selector), with which a fork finds the pods through its template's memos.
    pub(super) fn count_domains(
        &mut self,
        group: &mut Group,
        memo_selector: Option<Option<&std::sync::Arc<SelectorKey>>>,
    ) {
        let passing = self.filter_nodes(group.filter);
        let passes = |i: usize| passing.as_ref().is_none_or(|set| set.contains(i));
        let Topology {
            keys,
            nodes,
            base,
            excluded,
            excluded_on_kept,
            node_domains,
            filters,
            count_memos,
            ..
        } = self;
        let memos = count_memos.as_deref();
        let Some(kd) = keys.get_mut(group.key as usize) else {
            return;
        };
        if passing.is_none() {
            // Every active node passes: the key's node domains are the same for every such
            // group, computed once and shared.
            let slot = node_domains.get_mut(group.key as usize);
            let common = match slot {
                Some(Some(common)) => common.clone(),
                _ => {
                    let ids = match memos {
                        // A fork: the values of the template's nodes, recorded once, less
                        // those only the nodes it leaves out carry.
                        Some(memos) => {
                            let values = memos.node_values(kd, || {
                                NodeValues::new(
                                    kd,
                                    nodes.iter().zip(&base.nodes).map(|(data, node)| {
                                        (data.labels, node.node.marked_for_deletion)
                                    }),
                                )
                            });
                            values.active_ids(kd, |i| nodes.get(i).is_some_and(|n| n.active))
                        }
                        None => {
                            let mut ids = Vec::new();
                            for node in nodes.iter().filter(|n| n.active) {
                                if let Some(domain) = node.labels.get(&kd.key) {
                                    ids.push(kd.intern(domain));
                                }
                            }
                            ids
                        }
                    };
                    let common = std::sync::Arc::new(CommonDomains::new(&ids));
                    if let Some(slot) = node_domains.get_mut(group.key as usize) {
                        *slot = Some(common.clone());
                    }
                    common
                }
            };
            group.register_common(&common);
        } else {
            let mut ids = Vec::new();
            for (i, node) in nodes.iter().enumerate() {
                if node.active
                    && let Some(domain) = node.labels.get(&kd.key)
                    && passes(i)
                {
                    ids.push(kd.intern(domain));
                }
            }
            group.register_many(ids);
        }
        let view = GroupView::of(group);
        // With the template's memos (a fork), the pods the whole base counts are found once and
        // each fork counts those it keeps.
        if let (Some(memos), Some(selector)) = (memos, memo_selector) {
            let memo_key = CountKey {
                key: kd.key.clone(),
                namespaces: group.namespaces.clone(),
                selector: selector.cloned(),
                filter: group
                    .filter
                    .and_then(|f| filters.get(f as usize))
                    .map(|f| f.filter.clone()),
            };
            let memo = match memos.get(&memo_key) {
                Some(memo) => memo,
                None => {
                    let mut memo = CountMemo::default();
                    scan_counted(base, nodes, &view, &kd.key, &passes, |i, at, _, domain| {
                        memo.push(domain, (index(i), at.0, at.1));
                    });
                    memos.insert(memo_key, memo.finish())
                }
            };
            let check_excluded = *excluded_on_kept;
            let excluded_at = |ns: u32, pos: u32| {
                view.namespaces
                    .get(ns as usize)
                    .and_then(|ns| base.counted_pods.get(ns.as_str()))
                    .and_then(|pods| pods.get(pos as usize))
                    .is_some_and(|p| excluded.contains(p.uid))
            };
            for d in &memo.domains {
                let n = d
                    .pods
                    .iter()
                    .filter(|&&(node, ns, pos)| {
                        nodes.get(node as usize).is_some_and(|n| !n.removed)
                            && !(check_excluded && excluded_at(ns, pos))
                    })
                    .count();
                let Some(node) = nodes.get(d.node as usize) else {
                    continue;
                };
                let domain = match node.labels.get(&kd.key) {
                    Some(v) => v.as_str(),
                    None => node.name,
                };
                if n > 0 {
                    group.record_n(kd.intern(domain), u32::try_from(n).unwrap_or(u32::MAX));
                }
            }
            return;
        }
        let key = kd.key.clone();
        scan_counted(base, nodes, &view, &key, &passes, |i, _, p, domain| {
            let kept = nodes.get(i).is_some_and(|n| !n.removed);
            if kept && (excluded.is_empty() || !excluded.contains(p.uid)) {
                group.record(kd.intern(domain));
            }
        });
    }

    /// Inverse groups selecting a pod with this namespace and labels, ascending.
    pub(super) fn inverse_selecting_for(
        &self,
        namespace: &str,
        labels: &BTreeMap<String, String>,
    ) -> SmallVec<[u32; 2]> {
        let mut candidates: SmallVec<[u32; 8]> = SmallVec::new();
        self.inverse_index.candidates(labels, &mut candidates);
        let mut out: SmallVec<[u32; 2]> = candidates
            .into_iter()
            .filter(|&gid| {
                self.inverse
                    .get(gid as usize)
                    .is_some_and(|g| g.selects(namespace, labels))
            })
            .collect();
        out.sort_unstable();
        out.dedup();
        out
    }

    /// [`refresh_inverse_selecting`](Self::refresh_inverse_selecting)`(None)` right after
    /// [`register_batch`](Self::register_batch), when every known pod is a batch pod: the groups
    /// selecting a pod depend only on its namespace and labels, which the pods of a class share
    /// (both are part of the signature), so they are found once per class. An entry whose
    /// namespace or labels differ from its class's first pod (a duplicate UID, updated on its
    /// own) is computed alone; without one class per pod, every entry is.
    pub(super) fn refresh_batch_inverse_selecting(
        &mut self,
        batch_pods: &[&'a Pod],
        batch_classes: &[u32],
    ) {
        if batch_classes.len() != batch_pods.len() {
            self.refresh_inverse_selecting(None);
            return;
        }
        let mut pods = std::mem::take(&mut self.pods);
        // Per class: its first pod and the groups selecting it.
        type Selecting<'p> = Option<(&'p Pod, SmallVec<[u32; 2]>)>;
        let mut memo: Vec<Selecting<'_>> = Vec::new();
        for (i, (p, &class)) in batch_pods.iter().zip(batch_classes).enumerate() {
            let Some(entry) = pods.get_mut(pods.batch(i)) else {
                continue;
            };
            let c = class as usize;
            if memo.len() <= c {
                memo.resize_with(c + 1, || None);
            }
            // An entry borrowing its own pod's namespace and labels has its class's (the
            // class's pods share them); any other is compared.
            let own = matches!(&entry.namespace, Cow::Borrowed(ns) if std::ptr::eq(*ns, p.namespace.as_str()))
                && matches!(&entry.labels, Cow::Borrowed(l) if std::ptr::eq(*l, &p.labels));
            let cached = memo.get(c).and_then(Option::as_ref).filter(|(first, _)| {
                own || (*entry.namespace == *first.namespace && *entry.labels == first.labels)
            });
            entry.inverse_selecting = match cached {
                Some((_, selecting)) => selecting.clone(),
                None => {
                    let selecting = self.inverse_selecting_for(&entry.namespace, &entry.labels);
                    if let Some(slot) = memo.get_mut(c).filter(|s| s.is_none())
                        && (own || (*entry.namespace == *p.namespace && *entry.labels == p.labels))
                    {
                        *slot = Some((*p, selecting.clone()));
                    }
                    selecting
                }
            };
            self.refresh_host_lists(entry);
        }
        self.pods = pods;
    }

    /// Recomputes the inverse-selection caches of every known pod: fully (`None`), or only for
    /// one new inverse group.
    pub(super) fn refresh_inverse_selecting(&mut self, new_group: Option<u32>) {
        let mut pods = std::mem::take(&mut self.pods);
        for entry in pods.values_mut() {
            match new_group {
                None => {
                    entry.inverse_selecting =
                        self.inverse_selecting_for(&entry.namespace, &entry.labels);
                }
                Some(gid) => {
                    let selects = self
                        .inverse
                        .get(gid as usize)
                        .is_some_and(|g| g.selects(&entry.namespace, &entry.labels));
                    if !selects || entry.inverse_selecting.contains(&gid) {
                        continue;
                    }
                    entry.inverse_selecting.push(gid);
                    entry.inverse_selecting.sort_unstable();
                }
            }
            self.refresh_host_lists(entry);
        }
        self.pods = pods;
    }

    /// [`update_batch`](Self::update_batch) for every pod of the batch, once per class (see
    /// [`TopologyInput::batch_classes`]). While the topology is built, an update finds or
    /// creates its groups by their identity and leaves the inverse selection for later, so a
    /// pod of a class gets exactly its class's first pod's entry (with its own namespace and
    /// labels, equal to the first pod's). A pod whose UID is already known (a duplicate UID in
    /// the batch) merges into that entry, so it is updated on its own.
    /// With `uids_distinct` (no two pods of the batch share a UID, and no entry exists yet)
    /// no UID is looked up.
    pub(super) fn register_batch(
        &mut self,
        batch_pods: &'a [&'a Pod],
        batch_classes: &[u32],
        uids_distinct: bool,
    ) {
        let mut firsts: Vec<Option<PodEntry<'a>>> = Vec::new();
        for (i, p) in batch_pods.iter().enumerate() {
            let class = batch_classes.get(i).map(|&c| c as usize);
            let found = if uids_distinct {
                PodRef::UNKNOWN
            } else {
                self.pods.find(&p.uid)
            };
            let known = found != PodRef::UNKNOWN;
            if !known
                && let Some(first) = class.and_then(|c| firsts.get(c)).and_then(Option::as_ref)
            {
                let mut entry = first.clone();
                entry.namespace = Cow::Borrowed(p.namespace.as_str());
                entry.labels = Cow::Borrowed(&p.labels);
                let at = self
                    .pods
                    .set(PodRef::UNKNOWN, Cow::Borrowed(p.uid.as_str()), entry);
                self.pods.push_batch(at);
                continue;
            }
            let at = self.update_new_batch(p, found);
            self.pods.push_batch(at);
            if let Some(c) = class
                && !known
            {
                if firsts.len() <= c {
                    firsts.resize_with(c + 1, || None);
                }
                if firsts[c].is_none() {
                    firsts[c] = self.pods.get(at).cloned();
                }
            }
        }
    }

    pub(super) fn refresh_host_lists(&self, entry: &mut PodEntry<'a>) {
        entry.host_owned = entry
            .owned
            .iter()
            .copied()
            .filter(|o| {
                self.groups
                    .get(o.group as usize)
                    .is_some_and(|g| g.hostname)
            })
            .collect();
        entry.host_inverse = entry
            .inverse_selecting
            .iter()
            .copied()
            .filter(|&gid| self.inverse.get(gid as usize).is_some_and(|g| g.hostname))
            .collect();
    }
}

/// A term of a pod that owns a non-inverse group.
pub(super) struct OwnedTerm<'a> {
    pub(super) kind: TopologyType,
    pub(super) key: &'a str,
    pub(super) namespaces: std::sync::Arc<[String]>,
    pub(super) selector: Option<&'a LabelSelector>,
    pub(super) max_skew: i32,
    pub(super) min_domains: Option<i32>,
    pub(super) filter: Option<NodeFilter>,
}

/// A spread's selector with `key In [pod's value]` appended for every `matchLabelKeys` key the
/// pod has a label for (keys the pod lacks are ignored). A nil selector stays nil (Kubernetes
/// rejects `matchLabelKeys` without a selector).
pub(super) fn spread_selector<'a>(
    tsc: &'a TopologySpreadConstraint,
    pod: &Pod,
) -> Option<Cow<'a, LabelSelector>> {
    let selector = tsc.label_selector.as_ref()?;
    let extra: Vec<LabelSelectorRequirement> = tsc
        .match_label_keys
        .iter()
        .filter_map(|key| {
            pod.labels.get(key).map(|value| LabelSelectorRequirement {
                key: key.clone(),
                operator: SelectorOperator::In,
                values: vec![value.clone()],
            })
        })
        .collect();
    if extra.is_empty() {
        return Some(Cow::Borrowed(selector));
    }
    let mut s = selector.clone();
    s.match_expressions.extend(extra);
    Some(Cow::Owned(s))
}

/// Visits every countable existing pod of the group's namespaces that the group counts when
/// created, on a node of the base that passes (`passes`) and has a domain for `key` (for
/// `kubernetes.io/hostname` the node name when the label is missing), whether or not the node
/// is left out: `visit(node position, (namespace position in the group's namespaces, pod
/// position among the namespace's countable pods), pod, domain)`, in base order.
fn scan_counted<'a>(
    base: &TopologyBase<'a>,
    nodes: &[NodeData<'a>],
    group: &GroupView,
    key: &str,
    passes: &impl Fn(usize) -> bool,
    mut visit: impl FnMut(usize, (u32, u32), &CountedPod<'a>, &'a str),
) {
    // A pod the selector counts carries its first `matchLabels` pair: only those pods are
    // visited (in the same order as a full scan, so domains are interned identically).
    let first_pair: Option<(&str, &str)> = match &*group.selector {
        Selector::Match(s) if !group.nil_selector => s
            .match_labels
            .iter()
            .next()
            .map(|(k, v)| (k.as_str(), v.as_str())),
        _ => None,
    };
    for (ns, namespace) in group.namespaces.iter().enumerate() {
        let Some(pods) = base.counted_pods.get(namespace.as_str()) else {
            continue;
        };
        let ns = index(ns);
        let mut one = |pos: u32, p: &CountedPod<'a>| {
            if !group.counts_existing(p.labels) {
                return;
            }
            let i = p.node as usize;
            let Some(node) = nodes.get(i) else {
                return;
            };
            let domain = match node.labels.get(key) {
                Some(d) => d.as_str(),
                None if group.hostname => node.name,
                None => return,
            };
            if passes(i) {
                visit(i, (ns, pos), p, domain);
            }
        };
        match first_pair {
            Some(pair) => {
                let Some(positions) = base
                    .counted_by_label()
                    .get(namespace.as_str())
                    .and_then(|by_label| by_label.get(&super::base::label_hash(pair.0, pair.1)))
                else {
                    continue;
                };
                for &pos in positions {
                    if let Some(p) = pods.get(pos as usize) {
                        one(pos, p);
                    }
                }
            }
            None => {
                for (pos, p) in pods.iter().enumerate() {
                    one(index(pos), p);
                }
            }
        }
    }
}

/// What [`scan_counted`] reads of a group.
struct GroupView {
    selector: std::sync::Arc<Selector>,
    nil_selector: bool,
    namespaces: std::sync::Arc<[String]>,
    hostname: bool,
}

impl GroupView {
    fn of(group: &Group) -> GroupView {
        GroupView {
            selector: group.selector.clone(),
            nil_selector: group.nil_selector,
            namespaces: group.namespaces.clone(),
            hostname: group.hostname,
        }
    }

    /// Whether an existing cluster pod counts when the group is created: like
    /// [`Group::selects`], except that a nil selector matches every pod (upstream quirk of
    /// `TopologyListOptions`).
    fn counts_existing(&self, labels: &BTreeMap<String, String>) -> bool {
        self.nil_selector || self.selector.matches(labels)
    }
}

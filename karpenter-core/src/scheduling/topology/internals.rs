//! The topology's bookkeeping: interning keys and node filters, creating groups for a pod's
//! terms (and the inverse groups of required anti-affinity) and counting their domains.

use super::base::term_namespaces;
use super::{CountedPod, FilterEntry, GroupIdentity, GroupRef, PodEntry, Topology, index};
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
        self.count_domains(&mut group);
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
    /// / `countDomains`).
    pub(super) fn count_domains(&mut self, group: &mut Group) {
        let passing = self.filter_nodes(group.filter);
        let passes = |i: usize| passing.as_ref().is_none_or(|set| set.contains(i));
        let Topology {
            keys,
            nodes,
            base,
            excluded,
            node_domains,
            ..
        } = self;
        let (counted_pods, counted_by_label) = (&base.counted_pods, &base.counted_by_label);
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
                    let mut ids = Vec::new();
                    for node in nodes.iter().filter(|n| n.active) {
                        if let Some(domain) = node.labels.get(&kd.key) {
                            ids.push(kd.intern(domain));
                        }
                    }
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
        // A pod the selector counts carries its first `matchLabels` pair: only those pods are
        // visited (in the same order as a full scan, so domains are interned identically).
        let first_pair: Option<(String, String)> = match &*group.selector {
            Selector::Match(s) if !group.nil_selector => s
                .match_labels
                .iter()
                .next()
                .map(|(k, v)| (k.clone(), v.clone())),
            _ => None,
        };
        let namespaces = group.namespaces.clone();
        for namespace in namespaces.iter() {
            let Some(pods) = counted_pods.get(namespace.as_str()) else {
                continue;
            };
            let mut visit = |p: &CountedPod<'_>| {
                if !group.counts_existing(p.labels) {
                    return;
                }
                let i = p.node as usize;
                let Some(node) = nodes.get(i).filter(|n| !n.removed) else {
                    return;
                };
                if !excluded.is_empty() && excluded.contains(p.uid) {
                    return;
                }
                let domain = match node.labels.get(&kd.key) {
                    Some(d) => d.as_str(),
                    None if group.hostname => node.name,
                    None => return,
                };
                if passes(i) {
                    group.record(kd.intern(domain));
                }
            };
            match &first_pair {
                Some((k, v)) => {
                    let Some(positions) = counted_by_label
                        .get(namespace.as_str())
                        .and_then(|by_label| by_label.get(&(k.as_str(), v.as_str())))
                    else {
                        continue;
                    };
                    for &pos in positions {
                        if let Some(p) = pods.get(pos as usize) {
                            visit(p);
                        }
                    }
                }
                None => pods.iter().for_each(&mut visit),
            }
        }
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

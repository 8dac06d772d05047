//! Topology groups: per-domain counts and the domain choice of each group type (upstream
//! `topology.go` / `topologygroup.go`, `TopologyGroup.Get`), plus the spread node filter (upstream
//! `TopologyNodeFilter`) and per-key domain interning.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use fixedbitset::FixedBitSet;
use rustc_hash::FxHashMap;
use smallvec::SmallVec;

use super::selector::Selector;
use crate::model::{NodeInclusionPolicy, Pod, TopologySpreadConstraint};
use crate::requirements::{Operator, Requirement, Requirements};
use crate::taints::{self, Taint, Toleration};

/// The kind of a topology group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum TopologyType {
    /// A topology spread constraint.
    Spread,
    /// A pod affinity term.
    PodAffinity,
    /// A pod anti-affinity term (also used for inverse groups).
    PodAntiAffinity,
}

impl fmt::Display for TopologyType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TopologyType::Spread => "topology spread",
            TopologyType::PodAffinity => "pod affinity",
            TopologyType::PodAntiAffinity => "pod anti-affinity",
        })
    }
}

/// The interned domains (label values) of one topology key, shared by every group with that key.
///
/// Two levels: a frozen table shared (behind an `Arc`) by every topology forked from one
/// prepared template, and the domains this topology interned since, with ids after the shared
/// ones. Cloning costs only the local part.
#[derive(Debug, Clone)]
pub(super) struct KeyDomains {
    /// The topology key.
    pub(super) key: String,
    shared: Arc<DomainTable>,
    local: DomainTable,
}

/// The frozen shared table of a [`KeyDomains`] (see [`KeyDomains::shares`]). Holding it keeps
/// the table alive, so its identity cannot be reused by another.
#[derive(Debug, Clone)]
pub(super) struct SharedTable(Arc<DomainTable>);

/// Interned domains with consecutive ids from `first`.
#[derive(Debug, Clone, Default)]
struct DomainTable {
    first: u32,
    names: Vec<Box<str>>,
    ids: FxHashMap<Box<str>, u32>,
    /// Name → id in string order, for deterministic "first domain" choices and error listings.
    sorted: BTreeMap<Box<str>, u32>,
}

impl DomainTable {
    fn insert(&mut self, domain: &str) -> u32 {
        let id = self
            .first
            .saturating_add(u32::try_from(self.names.len()).unwrap_or(u32::MAX));
        self.names.push(Box::from(domain));
        self.ids.insert(Box::from(domain), id);
        self.sorted.insert(Box::from(domain), id);
        id
    }

    fn name(&self, id: u32) -> Option<&str> {
        let i = id.checked_sub(self.first)?;
        self.names.get(i as usize).map(|n| &**n)
    }
}

impl KeyDomains {
    pub(super) fn new(key: &str) -> KeyDomains {
        KeyDomains {
            key: key.to_owned(),
            shared: Arc::default(),
            local: DomainTable::default(),
        }
    }

    /// The id of `domain`, interning it if new.
    pub(super) fn intern(&mut self, domain: &str) -> u32 {
        match self.lookup(domain) {
            Some(id) => id,
            None => self.local.insert(domain),
        }
    }

    /// The id of `domain`, if it was ever interned. Allocation-free.
    pub(super) fn lookup(&self, domain: &str) -> Option<u32> {
        self.shared
            .ids
            .get(domain)
            .or_else(|| self.local.ids.get(domain))
            .copied()
    }

    /// The id of `domain` in the frozen shared table, if it is there. Allocation-free.
    pub(super) fn shared_id(&self, domain: &str) -> Option<u32> {
        self.shared.ids.get(domain).copied()
    }

    /// The frozen shared table, as a handle that tells which `KeyDomains` share it.
    pub(super) fn shared_table(&self) -> SharedTable {
        SharedTable(Arc::clone(&self.shared))
    }

    /// Whether this key's frozen shared table is `table` (the ids it gives are this key's).
    pub(super) fn shares(&self, table: &SharedTable) -> bool {
        Arc::ptr_eq(&self.shared, &table.0)
    }

    /// The name of an interned domain.
    pub(super) fn name(&self, id: u32) -> &str {
        if id < self.local.first {
            self.shared.name(id).unwrap_or("")
        } else {
            self.local.name(id).unwrap_or("")
        }
    }

    /// Every interned domain in string order.
    pub(super) fn sorted(&self) -> impl Iterator<Item = (&str, u32)> {
        let mut shared = self.shared.sorted.iter().peekable();
        let mut local = self.local.sorted.iter().peekable();
        std::iter::from_fn(move || {
            let next = match (shared.peek(), local.peek()) {
                (Some(a), Some(b)) if b.0 < a.0 => local.next(),
                (Some(_), _) => shared.next(),
                (None, _) => local.next(),
            };
            next.map(|(n, &id)| (&**n, id))
        })
    }

    /// Moves every domain interned so far into the shared table, so that clones share them.
    pub(super) fn freeze(&mut self) {
        if self.local.names.is_empty() {
            return;
        }
        let local = std::mem::take(&mut self.local);
        let shared = Arc::make_mut(&mut self.shared);
        for name in local.names {
            let id = shared.first + u32::try_from(shared.names.len()).unwrap_or(u32::MAX);
            shared.ids.insert(name.clone(), id);
            shared.sorted.insert(name.clone(), id);
            shared.names.push(name);
        }
        self.local.first = shared.first + u32::try_from(shared.names.len()).unwrap_or(u32::MAX);
    }
}

/// Which nodes count for a topology spread constraint (upstream `TopologyNodeFilter`, upstream
/// `TopologyNodeFilter`).
///
/// Built from the pod that created the group: the terms are `nodeSelector ∧ requiredTerm_i` for
/// each required node-affinity term, or just `[nodeSelector]`; plus the pod's tolerations and the
/// two inclusion policies (defaults: taints **Ignore**, affinity **Honor**). Its full value is
/// part of the group identity (upstream only hashes the terms' keys; see the module docs).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct NodeFilter {
    terms: Vec<Requirements>,
    tolerations: Vec<Toleration>,
    pub(super) taint_policy: NodeInclusionPolicy,
    affinity_policy: NodeInclusionPolicy,
}

impl NodeFilter {
    pub(super) fn for_spread(pod: &Pod, tsc: &TopologySpreadConstraint) -> NodeFilter {
        let selector = Requirements::from_labels(
            pod.node_selector
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str())),
        );
        let required = pod
            .node_affinity
            .as_ref()
            .map(|a| a.required.as_slice())
            .unwrap_or_default();
        let terms = if required.is_empty() {
            vec![selector]
        } else {
            required
                .iter()
                .map(|term| {
                    let mut reqs = selector.clone();
                    reqs.add_all(&Requirements::from_node_selector_requirements(
                        &term.match_expressions,
                    ));
                    reqs
                })
                .collect()
        };
        let mut tolerations = pod.tolerations.clone();
        tolerations.sort();
        tolerations.dedup();
        NodeFilter {
            terms,
            tolerations,
            taint_policy: tsc
                .node_taints_policy
                .unwrap_or(NodeInclusionPolicy::Ignore),
            affinity_policy: tsc
                .node_affinity_policy
                .unwrap_or(NodeInclusionPolicy::Honor),
        }
    }

    /// Whether every node passes, whatever its labels and taints.
    pub(super) fn is_trivial(&self) -> bool {
        let affinity_trivial = self.affinity_policy == NodeInclusionPolicy::Ignore
            || self.terms.is_empty()
            || self.terms.iter().any(Requirements::is_empty);
        affinity_trivial && self.taint_policy == NodeInclusionPolicy::Ignore
    }

    /// Whether a node (its taints and label requirements, or a NodeClaim's requirements) counts:
    /// with affinity Honor, `requirements` must be **strictly** compatible with at least one term
    /// (upstream never forwards the loose option here); with taints Honor, the pod's tolerations
    /// must tolerate every taint.
    pub(super) fn matches(&self, taints: &[Taint], requirements: &Requirements) -> bool {
        let affinity = self.affinity_policy != NodeInclusionPolicy::Honor
            || self.terms.is_empty()
            || self
                .terms
                .iter()
                .any(|t| requirements.compatible(t, None).is_ok());
        let tolerated = self.taint_policy != NodeInclusionPolicy::Honor
            || taints::tolerates_all(&self.tolerations, taints).is_ok();
        affinity && tolerated
    }
}

/// Domains that every group of a key learnt at once with count 0 (the hostnames of the existing
/// nodes, registered at construction): shared by those groups instead of copied into each, so
/// that registering `n` hosts into `g` groups costs `O(n + g)`, not `O(n × g)`.
#[derive(Debug)]
pub(super) struct CommonDomains {
    ids: FixedBitSet,
    len: u32,
}

impl CommonDomains {
    /// The set of `ids`.
    pub(super) fn new(ids: &[u32]) -> CommonDomains {
        let size = ids.iter().max().map_or(0, |&m| m as usize + 1);
        let mut set = FixedBitSet::with_capacity(size);
        for &id in ids {
            set.insert(id as usize);
        }
        let len = u32::try_from(set.count_ones(..)).unwrap_or(u32::MAX);
        CommonDomains { ids: set, len }
    }

    fn contains(&self, id: u32) -> bool {
        self.ids.contains(id as usize)
    }
}

/// Slot of a domain a dense [`Counts`] does not hold.
const ABSENT: u32 = u32::MAX;

/// The domains a group knows by its own entry, with their counts: sparse (sorted `(id, count)`
/// pairs) while few, dense (one slot per interned id, O(1) look-ups on the hot path) once they
/// are many compared with the ids in play.
///
/// A sparse set holds its first entries inline, so that cloning a group that knows a domain or
/// two by its own entry (an existing pod's inverse anti-affinity group) allocates nothing.
#[derive(Debug, Clone)]
enum Counts {
    Sparse(SmallVec<[(u32, u32); 2]>),
    Dense(Vec<u32>),
}

impl Counts {
    /// Entries before a sparse set turns dense when ids stay within `DENSITY` times as many.
    const DENSE_AFTER: usize = 16;
    const DENSITY: usize = 4;

    fn get(&self, id: u32) -> Option<u32> {
        match self {
            Counts::Sparse(v) => match v.last() {
                Some(&(last, _)) if last < id => None,
                _ => v
                    .binary_search_by_key(&id, |e| e.0)
                    .ok()
                    .and_then(|i| v.get(i))
                    .map(|e| e.1),
            },
            Counts::Dense(slots) => slots.get(id as usize).copied().filter(|&c| c != ABSENT),
        }
    }

    fn get_mut(&mut self, id: u32) -> Option<&mut u32> {
        match self {
            Counts::Sparse(v) => match v.binary_search_by_key(&id, |e| e.0) {
                Ok(i) => v.get_mut(i).map(|e| &mut e.1),
                Err(_) => None,
            },
            Counts::Dense(slots) => slots.get_mut(id as usize).filter(|c| **c != ABSENT),
        }
    }

    /// Adds `id` (absent) with `count`.
    fn insert(&mut self, id: u32, count: u32) {
        match self {
            Counts::Sparse(v) => {
                let i = match v.last() {
                    Some(&(last, _)) if last < id => v.len(),
                    _ => v.binary_search_by_key(&id, |e| e.0).unwrap_or_else(|i| i),
                };
                v.insert(i, (id, count));
            }
            Counts::Dense(slots) => {
                let i = id as usize;
                if slots.len() <= i {
                    slots.resize(i + 1, ABSENT);
                }
                if let Some(slot) = slots.get_mut(i) {
                    *slot = count;
                }
            }
        }
        self.maybe_densify();
    }

    /// Adds every id of `ids` (ascending, deduplicated, all absent) with count 0.
    fn insert_all(&mut self, ids: &[u32]) {
        match self {
            Counts::Sparse(v) => {
                let mut merged = SmallVec::with_capacity(v.len() + ids.len());
                let mut old = v.iter().copied().peekable();
                for &id in ids {
                    while let Some(&e) = old.peek().filter(|e| e.0 < id) {
                        merged.push(e);
                        old.next();
                    }
                    merged.push((id, 0));
                }
                merged.extend(old);
                *v = merged;
            }
            Counts::Dense(slots) => {
                for &id in ids {
                    let i = id as usize;
                    if slots.len() <= i {
                        slots.resize(i + 1, ABSENT);
                    }
                    if let Some(slot) = slots.get_mut(i) {
                        *slot = 0;
                    }
                }
            }
        }
        self.maybe_densify();
    }

    #[cfg(test)]
    fn remove(&mut self, id: u32) -> Option<u32> {
        match self {
            Counts::Sparse(v) => {
                let i = v.binary_search_by_key(&id, |e| e.0).ok()?;
                Some(v.remove(i).1)
            }
            Counts::Dense(slots) => {
                let slot = slots.get_mut(id as usize).filter(|c| **c != ABSENT)?;
                let c = *slot;
                *slot = ABSENT;
                Some(c)
            }
        }
    }

    fn maybe_densify(&mut self) {
        if let Counts::Sparse(v) = self
            && v.len() >= Self::DENSE_AFTER
            && let Some(&(max, _)) = v.last()
            && (max as usize) < v.len() * Self::DENSITY
        {
            let mut slots = vec![ABSENT; max as usize + 1];
            for &(id, c) in v.iter() {
                if let Some(slot) = slots.get_mut(id as usize) {
                    *slot = c;
                }
            }
            *self = Counts::Dense(slots);
        }
    }

    /// The entries, ascending by id.
    fn iter(&self) -> CountsIter<'_> {
        match self {
            Counts::Sparse(v) => CountsIter::Sparse(v.iter()),
            Counts::Dense(slots) => CountsIter::Dense(slots.iter().enumerate()),
        }
    }
}

/// [`Counts::iter`].
enum CountsIter<'c> {
    Sparse(std::slice::Iter<'c, (u32, u32)>),
    Dense(std::iter::Enumerate<std::slice::Iter<'c, u32>>),
}

impl Iterator for CountsIter<'_> {
    type Item = (u32, u32);

    fn next(&mut self) -> Option<(u32, u32)> {
        match self {
            CountsIter::Sparse(i) => i.next().copied(),
            CountsIter::Dense(i) => i
                .find(|(_, c)| **c != ABSENT)
                .map(|(id, &c)| (u32::try_from(id).unwrap_or(u32::MAX), c)),
        }
    }
}

/// One topology group: a constraint shared by every pod with the same term (upstream `topology.go`
/// / `topologygroup.go`).
#[derive(Debug, Clone)]
pub(super) struct Group {
    pub(super) kind: TopologyType,
    /// Index into the topology's [`KeyDomains`].
    pub(super) key: u32,
    /// Whether the key is `kubernetes.io/hostname` (special cases of upstream `TopologyGroup.Get`).
    pub(super) hostname: bool,
    pub(super) max_skew: i32,
    pub(super) min_domains: Option<i32>,
    /// Sorted, deduplicated.
    pub(super) namespaces: Arc<[String]>,
    pub(super) selector: Arc<Selector>,
    /// The raw selector was nil: counting existing pods then matches everything (upstream quirk).
    pub(super) nil_selector: bool,
    /// Spread groups: the interned node filter. `None` (affinity groups) always matches.
    pub(super) filter: Option<u32>,
    /// Known domains with their own entry, with their counts.
    entries: Counts,
    /// Domains also known, with count 0 unless `entries` has them.
    common: Option<Arc<CommonDomains>>,
    /// The number of known domains (`entries` ∪ `common`).
    known: u32,
    /// Domain ids with a count above zero, in the order they became non-empty.
    nonzero: SmallVec<[u32; 2]>,
}

/// The owner-independent description of a new group.
pub(super) struct GroupSpec {
    pub(super) kind: TopologyType,
    pub(super) key: u32,
    pub(super) hostname: bool,
    pub(super) max_skew: i32,
    pub(super) min_domains: Option<i32>,
    pub(super) namespaces: Arc<[String]>,
    pub(super) selector: Arc<Selector>,
    pub(super) nil_selector: bool,
    pub(super) filter: Option<u32>,
}

impl Group {
    pub(super) fn new(spec: GroupSpec) -> Group {
        Group {
            kind: spec.kind,
            key: spec.key,
            hostname: spec.hostname,
            max_skew: spec.max_skew,
            min_domains: spec.min_domains,
            namespaces: spec.namespaces,
            selector: spec.selector,
            nil_selector: spec.nil_selector,
            filter: spec.filter,
            entries: Counts::Sparse(SmallVec::new()),
            common: None,
            known: 0,
            nonzero: SmallVec::new(),
        }
    }

    /// Whether the group selects a pod in `namespace` with `labels` (upstream `topology.go` /
    /// `topologygroup.go`).
    pub(super) fn selects(&self, namespace: &str, labels: &BTreeMap<String, String>) -> bool {
        self.in_namespace(namespace) && self.selector.matches(labels)
    }

    pub(super) fn in_namespace(&self, namespace: &str) -> bool {
        self.namespaces
            .binary_search_by(|n| n.as_str().cmp(namespace))
            .is_ok()
    }

    fn in_common(&self, id: u32) -> bool {
        self.common.as_ref().is_some_and(|c| c.contains(id))
    }

    /// The count of a domain, `None` if the group does not know it.
    pub(super) fn count(&self, id: u32) -> Option<u32> {
        match self.entries.get(id) {
            Some(c) => Some(c),
            None => self.in_common(id).then_some(0),
        }
    }

    /// Makes the domain known with count 0 (no-op if known).
    pub(super) fn register(&mut self, id: u32) {
        if self.entries.get(id).is_none() && !self.in_common(id) {
            self.entries.insert(id, 0);
            self.known += 1;
        }
    }

    /// [`register`](Self::register) for each of `ids` (any order, duplicates allowed), merged in
    /// one pass.
    pub(super) fn register_many(&mut self, mut ids: Vec<u32>) {
        ids.sort_unstable();
        ids.dedup();
        ids.retain(|&id| !self.in_common(id) && self.entries.get(id).is_none());
        if ids.is_empty() {
            return;
        }
        self.known += u32::try_from(ids.len()).unwrap_or(0);
        self.entries.insert_all(&ids);
    }

    /// Makes every domain of `common` known with count 0 (no-op for known ones).
    pub(super) fn register_common(&mut self, common: &Arc<CommonDomains>) {
        if let Some(current) = &self.common
            && (Arc::ptr_eq(current, common) || current.ids == common.ids)
        {
            return;
        }
        self.materialize_common();
        let overlap = self
            .entries
            .iter()
            .filter(|(id, _)| common.contains(*id))
            .count();
        self.known = self.known - u32::try_from(overlap).unwrap_or(0) + common.len;
        self.common = Some(Arc::clone(common));
    }

    /// Gives every common domain its own entry (count 0) and drops the shared set.
    fn materialize_common(&mut self) {
        let Some(common) = self.common.take() else {
            return;
        };
        let missing: Vec<u32> = common
            .ids
            .ones()
            .map(|id| u32::try_from(id).unwrap_or(u32::MAX))
            .filter(|&id| self.entries.get(id).is_none())
            .collect();
        self.entries.insert_all(&missing);
    }

    /// Forgets the domain and its count.
    #[cfg(test)]
    pub(super) fn unregister(&mut self, id: u32) {
        if self.in_common(id) {
            self.materialize_common();
        }
        if let Some(count) = self.entries.remove(id) {
            if count > 0 {
                self.nonzero.retain(|d| *d != id);
            }
            self.known -= 1;
        }
    }

    /// Counts one more pod in the domain (making it known if needed).
    pub(super) fn record(&mut self, id: u32) {
        self.record_n(id, 1);
    }

    /// Counts `n` more pods in the domain (making it known if needed): `n` times
    /// [`record`](Self::record).
    pub(super) fn record_n(&mut self, id: u32, n: u32) {
        if n == 0 {
            return;
        }
        if let Some(slot) = self.entries.get_mut(id) {
            if *slot == 0 {
                self.nonzero.push(id);
            }
            *slot = slot.saturating_add(n).min(ABSENT - 1);
            return;
        }
        if !self.in_common(id) {
            self.known += 1;
        }
        self.entries.insert(id, n.min(ABSENT - 1));
        self.nonzero.push(id);
    }

    /// Known domains and their counts, in interning order.
    pub(super) fn known_domains(&self) -> KnownDomains<'_> {
        KnownDomains {
            entries: self.entries.iter().peekable(),
            common: self.common.as_ref().map(|c| c.ids.ones().peekable()),
        }
    }

    pub(super) fn known_len(&self) -> usize {
        self.known as usize
    }

    /// Whether no known domain holds a pod (upstream `len(domains) == len(emptyDomains)`).
    pub(super) fn all_empty(&self) -> bool {
        self.nonzero.is_empty()
    }

    fn empty_len(&self) -> usize {
        self.known_len() - self.nonzero.len()
    }

    fn count_by_name(&self, kd: &KeyDomains, name: &str) -> Option<u32> {
        kd.lookup(name).and_then(|id| self.count(id))
    }

    /// Whether some populated domain is allowed by `pod_domains` (upstream
    /// `anyCompatiblePodDomain`).
    fn any_compatible(&self, kd: &KeyDomains, pod_domains: &Requirement) -> bool {
        self.nonzero.iter().any(|&id| pod_domains.has(kd.name(id)))
    }

    /// The string-smallest known domain satisfying `pred`.
    fn first_domain<'k>(&self, kd: &'k KeyDomains, pred: impl Fn(&str) -> bool) -> Option<&'k str> {
        kd.sorted()
            .find(|&(name, id)| self.count(id).is_some() && pred(name))
            .map(|(name, _)| name)
    }

    /// The domains a pod may use for this group (upstream `Topology.AddRequirements`,
    /// `TopologyGroup.Get`, upstream `TopologyGroup.Get`), as an `In` requirement, or `None` if no
    /// domain is allowed.
    pub(super) fn next_domains(
        &self,
        kd: &KeyDomains,
        self_selecting: bool,
        pod_domains: &Requirement,
        node_domains: &Requirement,
    ) -> Option<Requirement> {
        match self.kind {
            TopologyType::Spread => self.next_spread(kd, self_selecting, pod_domains, node_domains),
            TopologyType::PodAffinity => {
                self.next_affinity(kd, self_selecting, pod_domains, node_domains)
            }
            TopologyType::PodAntiAffinity => self.next_anti_affinity(kd, pod_domains, node_domains),
        }
    }

    /// Spread (upstream `nextDomainTopologySpread`).
    ///
    /// Hostname special case: when the node side names exactly one host `h` (every existing node
    /// and NodeClaim does), `count(h) (+1 if self-selecting) ≤ maxSkew` decides — the global
    /// minimum is taken as 0 because a new host can always be created; an unknown host counts 0.
    ///
    /// Otherwise the candidates are the node side's `In` values that the group knows, or every
    /// known domain the node side allows; a candidate with `c = count (+1 if self-selecting)` is
    /// valid iff `c − min ≤ maxSkew` (see [`min_count`](Self::min_count)). The valid candidate
    /// with the smallest `c` wins; ties go to the string-smallest domain (upstream: map order).
    fn next_spread(
        &self,
        kd: &KeyDomains,
        self_selecting: bool,
        pod_domains: &Requirement,
        node_domains: &Requirement,
    ) -> Option<Requirement> {
        let inc = i64::from(self_selecting);
        let max_skew = i64::from(self.max_skew);
        if self.hostname
            && let Some(host) = single_raw_value(node_domains)
        {
            let c = i64::from(self.count_by_name(kd, host).unwrap_or(0)) + inc;
            return (c <= max_skew).then(|| Requirement::new(&kd.key, Operator::In, [host]));
        }
        let min = self.min_count(kd, pod_domains);
        let mut best: Option<(i64, u32)> = None;
        let mut consider = |id: u32, count: u32| {
            let c = i64::from(count) + inc;
            if c - min > max_skew {
                return;
            }
            let better = match best {
                None => true,
                Some((bc, bid)) => c < bc || (c == bc && kd.name(id) < kd.name(bid)),
            };
            if better {
                best = Some((c, id));
            }
        };
        if node_domains.operator() == Operator::In {
            for v in node_domains.values() {
                if let Some(id) = kd.lookup(v)
                    && let Some(count) = self.count(id)
                {
                    consider(id, count);
                }
            }
        } else {
            for (id, count) in self.known_domains() {
                if node_domains.has(kd.name(id)) {
                    consider(id, count);
                }
            }
        }
        best.map(|(_, id)| Requirement::new(&kd.key, Operator::In, [kd.name(id)]))
    }

    /// The global minimum of a spread (upstream `domainMinCount`): 0 for the hostname key (a new
    /// host can always be created); else the smallest count among known domains the pod's own
    /// requirements allow (`i32::MAX` if none); forced to 0 when `minDomains` is set and fewer
    /// such domains exist.
    fn min_count(&self, kd: &KeyDomains, pod_domains: &Requirement) -> i64 {
        if self.hostname {
            return 0;
        }
        let mut min = i64::from(i32::MAX);
        let mut supported: i64 = 0;
        for (id, count) in self.known_domains() {
            if pod_domains.has(kd.name(id)) {
                supported += 1;
                min = min.min(i64::from(count));
            }
        }
        if self.min_domains.is_some_and(|m| supported < i64::from(m)) {
            min = 0;
        }
        min
    }

    /// The domains this group allows on *some* node, whatever that node's own requirement on the
    /// key: a candidate whose requirement on the key has no value in common with the result is
    /// certainly rejected by [`next_domains`](Self::next_domains), so the solver can skip it
    /// without the full check. `None` when no such node-independent set exists: hostname groups
    /// (their special cases depend on the host) and an affinity group that would bootstrap.
    ///
    /// Spread: the known domains with `count (+1 if self-selecting) − min ≤ maxSkew`. Affinity:
    /// the populated domains the pod allows. Anti-affinity: the empty known domains the pod
    /// allows. Each is exactly the union, over every possible node requirement, of what
    /// `next_domains` can return.
    pub(super) fn allowed_on_any_node(
        &self,
        kd: &KeyDomains,
        self_selecting: bool,
        pod_domains: &Requirement,
    ) -> Option<Requirement> {
        if self.hostname {
            return None;
        }
        let mut allowed: Vec<&str> = Vec::new();
        match self.kind {
            TopologyType::Spread => {
                let inc = i64::from(self_selecting);
                let min = self.min_count(kd, pod_domains);
                for (id, count) in self.known_domains() {
                    if i64::from(count) + inc - min <= i64::from(self.max_skew) {
                        allowed.push(kd.name(id));
                    }
                }
            }
            TopologyType::PodAffinity => {
                for &id in &self.nonzero {
                    let name = kd.name(id);
                    if pod_domains.has(name) {
                        allowed.push(name);
                    }
                }
                if allowed.is_empty()
                    && self_selecting
                    && (self.all_empty() || !self.any_compatible(kd, pod_domains))
                {
                    return None;
                }
            }
            TopologyType::PodAntiAffinity => {
                for (id, count) in self.known_domains() {
                    let name = kd.name(id);
                    if count == 0 && pod_domains.has(name) {
                        allowed.push(name);
                    }
                }
            }
        }
        Some(Requirement::new(&kd.key, Operator::In, allowed))
    }

    /// Pod affinity (upstream `nextDomainAffinity`); may allow several domains.
    ///
    /// Hostname special case (node side names one host `h`): `h` not allowed by the pod → none;
    /// `h` populated → `h`; else `h` if the pod selects itself and either every domain is empty
    /// or no populated domain is allowed by the pod (bootstrap); else none.
    ///
    /// Otherwise: every populated domain allowed by both sides. If there is none and the
    /// bootstrap condition holds: the string-smallest known domain allowed by both sides plus the
    /// string-smallest known domain allowed by the pod (upstream: the first of each in map
    /// order); the latter may lie outside the node side and is then removed by the caller's
    /// intersection.
    fn next_affinity(
        &self,
        kd: &KeyDomains,
        self_selecting: bool,
        pod_domains: &Requirement,
        node_domains: &Requirement,
    ) -> Option<Requirement> {
        let bootstrap =
            || self_selecting && (self.all_empty() || !self.any_compatible(kd, pod_domains));
        if self.hostname
            && let Some(host) = single_raw_value(node_domains)
        {
            if !pod_domains.has(host) {
                return None;
            }
            if self.count_by_name(kd, host).unwrap_or(0) > 0 || bootstrap() {
                return Some(Requirement::new(&kd.key, Operator::In, [host]));
            }
            return None;
        }
        let mut options: SmallVec<[&str; 4]> = SmallVec::new();
        if node_domains.operator() == Operator::In {
            for v in node_domains.values() {
                if pod_domains.has(v) && self.count_by_name(kd, v).is_some_and(|c| c > 0) {
                    options.push(v);
                }
            }
        } else {
            for &id in &self.nonzero {
                let name = kd.name(id);
                if pod_domains.has(name) && node_domains.has(name) {
                    options.push(name);
                }
            }
        }
        if options.is_empty() && bootstrap() {
            if let Some(d) = self.first_domain(kd, |d| pod_domains.has(d) && node_domains.has(d)) {
                options.push(d);
            }
            if let Some(d) = self.first_domain(kd, |d| pod_domains.has(d)) {
                options.push(d);
            }
        }
        (!options.is_empty()).then(|| Requirement::new(&kd.key, Operator::In, options))
    }

    /// Pod anti-affinity (upstream `nextDomainAntiAffinity`).
    ///
    /// Hostname special case (node side names one host `h`): allowed iff `count(h) == 0` (an
    /// unknown host counts 0). Otherwise: the empty known domains allowed by both sides; domains
    /// the group does not know are never allowed.
    fn next_anti_affinity(
        &self,
        kd: &KeyDomains,
        pod_domains: &Requirement,
        node_domains: &Requirement,
    ) -> Option<Requirement> {
        if self.hostname
            && let Some(host) = single_raw_value(node_domains)
        {
            return (self.count_by_name(kd, host).unwrap_or(0) == 0)
                .then(|| Requirement::new(&kd.key, Operator::In, [host]));
        }
        let mut options: SmallVec<[&str; 4]> = SmallVec::new();
        if node_domains.operator() == Operator::In && node_domains.values().len() < self.empty_len()
        {
            for v in node_domains.values() {
                if self.count_by_name(kd, v) == Some(0) && pod_domains.has(v) {
                    options.push(v);
                }
            }
        } else {
            for (id, count) in self.known_domains() {
                let name = kd.name(id);
                if count == 0 && node_domains.has(name) && pod_domains.has(name) {
                    options.push(name);
                }
            }
        }
        (!options.is_empty()).then(|| Requirement::new(&kd.key, Operator::In, options))
    }

    /// Up to `max` known domains in string order with their counts, and how many were left out
    /// (for error messages; upstream `pretty.Map(domains, 25)`).
    pub(super) fn sample_counts(&self, kd: &KeyDomains, max: usize) -> (Vec<(String, u32)>, usize) {
        let sample: Vec<(String, u32)> = kd
            .sorted()
            .filter_map(|(name, id)| self.count(id).map(|c| (name.to_owned(), c)))
            .take(max)
            .collect();
        let others = self.known_len().saturating_sub(sample.len());
        (sample, others)
    }
}

/// The known domains of a group with their counts, ascending by id: its entries merged with the
/// common domains it knows.
pub(super) struct KnownDomains<'g> {
    entries: std::iter::Peekable<CountsIter<'g>>,
    common: Option<std::iter::Peekable<fixedbitset::Ones<'g>>>,
}

impl Iterator for KnownDomains<'_> {
    type Item = (u32, u32);

    fn next(&mut self) -> Option<(u32, u32)> {
        let next_common = self
            .common
            .as_mut()
            .and_then(|c| c.peek().copied())
            .map(|id| u32::try_from(id).unwrap_or(u32::MAX));
        match (self.entries.peek().copied(), next_common) {
            (Some(e), Some(c)) if c < e.0 => {
                self.common.as_mut().and_then(|i| i.next());
                Some((c, 0))
            }
            (Some(e), c) => {
                if c == Some(e.0) {
                    self.common.as_mut().and_then(|i| i.next());
                }
                self.entries.next()
            }
            (None, Some(c)) => {
                self.common.as_mut().and_then(|i| i.next());
                Some((c, 0))
            }
            (None, None) => None,
        }
    }
}

/// The only raw value of a requirement, if it has exactly one (upstream
/// `len(nodeDomains.Values()) == 1`, used by the hostname special cases).
fn single_raw_value(r: &Requirement) -> Option<&str> {
    let mut values = r.values();
    if values.len() == 1 {
        values.next()
    } else {
        None
    }
}

#[cfg(test)]
mod storage_tests;

//! Topology groups: per-domain counts and the domain choice of each group type (spec 4.1, 4.8),
//! plus the spread node filter (spec 4.4) and per-key domain interning.

use std::collections::BTreeMap;
use std::fmt;

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
#[derive(Debug)]
pub(super) struct KeyDomains {
    /// The topology key.
    pub(super) key: String,
    names: Vec<Box<str>>,
    ids: FxHashMap<Box<str>, u32>,
    /// Name → id in string order, for deterministic "first domain" choices and error listings.
    sorted: BTreeMap<Box<str>, u32>,
}

impl KeyDomains {
    pub(super) fn new(key: &str) -> KeyDomains {
        KeyDomains {
            key: key.to_owned(),
            names: Vec::new(),
            ids: FxHashMap::default(),
            sorted: BTreeMap::new(),
        }
    }

    /// The id of `domain`, interning it if new.
    pub(super) fn intern(&mut self, domain: &str) -> u32 {
        if let Some(&id) = self.ids.get(domain) {
            return id;
        }
        let id = u32::try_from(self.names.len()).unwrap_or(u32::MAX);
        self.names.push(Box::from(domain));
        self.ids.insert(Box::from(domain), id);
        self.sorted.insert(Box::from(domain), id);
        id
    }

    /// The id of `domain`, if it was ever interned. Allocation-free.
    pub(super) fn lookup(&self, domain: &str) -> Option<u32> {
        self.ids.get(domain).copied()
    }

    /// The name of an interned domain.
    pub(super) fn name(&self, id: u32) -> &str {
        self.names.get(id as usize).map_or("", |n| n)
    }

    /// Every interned domain in string order.
    pub(super) fn sorted(&self) -> impl Iterator<Item = (&str, u32)> {
        self.sorted.iter().map(|(n, &id)| (&**n, id))
    }
}

/// Which nodes count for a topology spread constraint (spec 4.4, upstream `TopologyNodeFilter`).
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

/// Count slot of a domain the group does not know.
const ABSENT: u32 = u32::MAX;

/// One topology group: a constraint shared by every pod with the same term (spec 4.1).
#[derive(Debug)]
pub(super) struct Group {
    pub(super) kind: TopologyType,
    /// Index into the topology's [`KeyDomains`].
    pub(super) key: u32,
    /// Whether the key is `kubernetes.io/hostname` (special cases of spec 4.8).
    pub(super) hostname: bool,
    pub(super) max_skew: i32,
    pub(super) min_domains: Option<i32>,
    /// Sorted, deduplicated.
    pub(super) namespaces: Box<[String]>,
    pub(super) selector: Selector,
    /// The raw selector was nil: counting existing pods then matches everything (upstream quirk).
    pub(super) nil_selector: bool,
    /// Spread groups: the interned node filter. `None` (affinity groups) always matches.
    pub(super) filter: Option<u32>,
    /// Per interned domain id: the count, or [`ABSENT`] if the group does not know the domain.
    counts: Vec<u32>,
    known: u32,
    /// Domain ids with a count above zero, in the order they became non-empty.
    nonzero: Vec<u32>,
}

/// The owner-independent description of a new group.
pub(super) struct GroupSpec {
    pub(super) kind: TopologyType,
    pub(super) key: u32,
    pub(super) hostname: bool,
    pub(super) max_skew: i32,
    pub(super) min_domains: Option<i32>,
    pub(super) namespaces: Box<[String]>,
    pub(super) selector: Selector,
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
            counts: Vec::new(),
            known: 0,
            nonzero: Vec::new(),
        }
    }

    /// Whether the group selects a pod in `namespace` with `labels` (spec 4.1).
    pub(super) fn selects(&self, namespace: &str, labels: &BTreeMap<String, String>) -> bool {
        self.in_namespace(namespace) && self.selector.matches(labels)
    }

    pub(super) fn in_namespace(&self, namespace: &str) -> bool {
        self.namespaces
            .binary_search_by(|n| n.as_str().cmp(namespace))
            .is_ok()
    }

    /// Whether an existing cluster pod counts when the group is created: like
    /// [`selects`](Self::selects), except that a nil selector matches every pod (upstream quirk
    /// of `TopologyListOptions`).
    pub(super) fn counts_existing(&self, labels: &BTreeMap<String, String>) -> bool {
        self.nil_selector || self.selector.matches(labels)
    }

    /// The count of a domain, `None` if the group does not know it.
    pub(super) fn count(&self, id: u32) -> Option<u32> {
        match self.counts.get(id as usize) {
            Some(&c) if c != ABSENT => Some(c),
            _ => None,
        }
    }

    /// Makes the domain known with count 0 (no-op if known).
    pub(super) fn register(&mut self, id: u32) {
        let i = id as usize;
        if self.counts.len() <= i {
            self.counts.resize(i + 1, ABSENT);
        }
        if let Some(slot) = self.counts.get_mut(i)
            && *slot == ABSENT
        {
            *slot = 0;
            self.known += 1;
        }
    }

    /// Forgets the domain and its count.
    #[cfg_attr(not(test), allow(dead_code))]
    pub(super) fn unregister(&mut self, id: u32) {
        if let Some(slot) = self.counts.get_mut(id as usize)
            && *slot != ABSENT
        {
            if *slot > 0 {
                self.nonzero.retain(|&d| d != id);
            }
            *slot = ABSENT;
            self.known -= 1;
        }
    }

    /// Counts one more pod in the domain (making it known if needed).
    pub(super) fn record(&mut self, id: u32) {
        self.register(id);
        if let Some(slot) = self.counts.get_mut(id as usize) {
            if *slot == 0 {
                self.nonzero.push(id);
            }
            *slot = slot.saturating_add(1).min(ABSENT - 1);
        }
    }

    /// Known domains and their counts, in interning order.
    pub(super) fn known_domains(&self) -> impl Iterator<Item = (u32, u32)> + '_ {
        self.counts
            .iter()
            .enumerate()
            .filter(|(_, c)| **c != ABSENT)
            .map(|(i, &c)| (i as u32, c))
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

    /// The domains a pod may use for this group (spec 4.7/4.8, upstream `TopologyGroup.Get`), as
    /// an `In` requirement, or `None` if no domain is allowed.
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

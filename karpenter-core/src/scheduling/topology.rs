//! Topology spread constraints, pod affinity and pod anti-affinity (upstream
//! `scheduling/topology.go`, upstream `topology.go`, `topologygroup.go`, `topologydomaingroup.go`,
//! `topologynodefilter.go`).
//!
//! A [`Topology`] tracks *groups*: one per distinct constraint term, shared by every pod carrying
//! that term. A group counts, per domain (label value of its topology key), the pods it selects.
//! The scheduler asks [`Topology::add_requirements_at`] which domains a pod may use on a candidate
//! node or NodeClaim, and reports every placement with [`Topology::record`].
//!
//! # Group identity
//!
//! Two terms share a group iff they have the same type, topology key, namespace set, `maxSkew`,
//! node filter and selector (upstream `topology.go` / `topologygroup.go`). The selector is compared
//! as upstream hashes it: `matchLabels` plus `matchExpressions` as a set, each expression's values
//! as a set; a nil selector differs from an empty one. `minDomains` is not part of the identity (as
//! upstream): the first pod creating the group decides it, and so decides the group's initial
//! domains (taint policy and tolerations) and node filter.
//!
//! Deviation: upstream hashes only the *keys* of the node filter's requirements, so two spreads
//! whose `nodeSelector`s differ only in values share a group and the first one's filter. Here the
//! whole filter (terms with values, tolerations, both policies) is compared, so they get distinct
//! groups.
//!
//! # Selectors and namespaces
//!
//! A group selects a pod iff the pod's namespace is in the group's namespace set and the selector
//! matches its labels. A nil or invalid selector selects nothing; an empty one selects
//! everything. Upstream quirk, reproduced: when a group is created and counts the pods already in
//! the cluster, a **nil** selector matches every pod (an invalid one still matches none).
//!
//! Spread groups use the pod's namespace. A pod (anti-)affinity term uses the pod's namespace when
//! it lists no `namespaces` and has no `namespaceSelector`; its `namespaces` when it has no
//! selector; otherwise every known namespace the selector matches plus the listed ones (`{}`
//! matches all). Known namespaces are those of [`TopologyInput::namespace_labels`] plus the
//! namespaces of every batch and existing pod (with no labels if not listed). An invalid
//! namespace selector matches no namespace (upstream fails the whole topology construction).
//!
//! # Determinism
//!
//! Upstream iterates Go maps; here:
//! - groups are kept in creation order (a pod's spreads first, then its affinity terms, then its
//!   anti-affinity terms, each in spec order; required before preferred), and
//!   [`Topology::add_requirements_at`] checks the pod's own groups in that order, then the inverse
//!   groups selecting it in creation order — the first failing group is the one reported;
//! - among equally good spread domains the string-smallest wins;
//! - the affinity bootstrap's "first domain" is the string-smallest qualifying domain;
//! - domain universes, namespaces and error listings are sorted.
//!
//! # Existing cluster state
//!
//! [`TopologyInput::nodes`] lists every node (and in-flight NodeClaim) with all the pods bound to
//! it. When a group is created it:
//! 1. starts from the universe domains of its key ([`DomainUniverse`]); with taint policy Honor —
//!    and always for (anti-)affinity groups, whose policy upstream leaves unset — only domains
//!    some producing pool's taints are tolerated by the creating pod;
//! 2. registers (count 0) the key's label value of every node not marked for deletion that passes
//!    the node filter;
//! 3. counts every pod of its namespaces that it selects and that is not terminal, not
//!    terminating and not in the batch: the domain is the node's label value for the key, or for
//!    `kubernetes.io/hostname` the node name when the label is missing; pods on nodes without the
//!    label, or on nodes failing the node filter, are not counted.
//!
//! Upstream discovers domains only from nodes that have a Node object; the input cannot tell
//! in-flight NodeClaims apart, so their labels count too (they carry no bound pods).
//!
//! Existing pods with required anti-affinity (bound, not terminal, not in the batch; terminating
//! ones included, as upstream's cluster state keeps their binding) create *inverse* groups at
//! construction, recording the node's label value for the term's key (no hostname fallback,
//! as upstream).
//!
//! Finally the hostname of every node not marked for deletion is [registered](Topology::register)
//! — after the batch pods' groups exist, as upstream (whose existing nodes register after the
//! topology is built). The scheduler must not register them again (it would be harmless).

mod base;
mod error;
mod fork;
mod internals;
mod memo;
mod pods;
mod update;

pub(crate) use self::base::TopologyBase;
pub(crate) use self::error::TopologyError;
use self::error::{CountsSample, ERROR_SAMPLE, TopologyErrorDetails};
pub(crate) use self::fork::TopologyTemplate;
use self::memo::CountMemos;
use self::pods::PodEntries;
pub(crate) use self::pods::PodRef;

mod group;
mod hostname;
mod selector;
#[cfg(test)]
mod tests;
mod universe;

use std::borrow::Cow;
use std::collections::BTreeMap;

use fixedbitset::FixedBitSet;
use rustc_hash::{FxHashMap, FxHashSet};
use smallvec::SmallVec;

pub(crate) use self::group::TopologyType;
use self::group::{CommonDomains, Group, GroupSpec, KeyDomains, NodeFilter};
use self::selector::{Selector, SelectorIndex, SelectorKey};
pub(crate) use self::universe::{DomainUniverse, UniversePool};
use super::PreferencePolicy;
use crate::labels;
use crate::model::{Pod, PodAffinityTerm};
use crate::requirements::{Requirement, Requirements};
use crate::taints::Taint;

/// Everything [`Topology::new`] reads. Node filters are always checked strictly: upstream never
/// forwards the loose-compatibility label policy to the topology node filter.
pub(crate) struct TopologyInput<'i, 'a> {
    /// Under [`PreferencePolicy::Ignore`] only `DoNotSchedule` spreads and required
    /// (anti-)affinity terms create groups.
    pub preference_policy: PreferencePolicy,
    /// The domains the NodePools can create ([`DomainUniverse::build`]).
    pub universe: std::sync::Arc<DomainUniverse>,
    /// The existing nodes (and in-flight NodeClaims) with **all** their bound pods — the pods
    /// counted by new groups and the sources of inverse anti-affinity — prepared once.
    pub base: std::sync::Arc<TopologyBase<'a>>,
    /// Per node of `base`: whether it is left out of this topology (as if absent); empty: none
    /// is.
    pub removed: &'i [bool],
    /// The pods being scheduled: never counted from the cluster; each gets [`Topology::update`].
    /// Borrowed for the topology's lifetime: its per-pod entries borrow their labels.
    pub batch_pods: &'a [&'a crate::model::Pod],
    /// Per pod of `batch_pods`: its class id. Pods of one class have equal scheduling
    /// signatures (namespace, labels and every constraint; only their identity differs), so
    /// equal entries: the first pod of a class is registered, the others copy its entry.
    /// Empty: every pod is registered on its own.
    pub batch_classes: &'i [u32],
    /// No two pods of `batch_pods` have the same UID (known to the caller): the pods are
    /// registered without looking their UIDs up.
    pub batch_uids_distinct: bool,
}

/// Group identity (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct GroupIdentity {
    kind: TopologyType,
    key: u32,
    namespaces: std::sync::Arc<[String]>,
    max_skew: i32,
    filter: Option<u32>,
    selector: Option<std::sync::Arc<SelectorKey>>,
}

/// A group of either table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum GroupRef {
    Normal(u32),
    Inverse(u32),
}

/// An interned spread node filter with its per-node results.
#[derive(Debug, Clone)]
struct FilterEntry {
    filter: NodeFilter,
    trivial: bool,
    /// Lazily computed: which existing nodes pass.
    nodes: Option<FixedBitSet>,
}

/// An existing node as counting needs it.
#[derive(Debug, Clone)]
struct NodeData<'a> {
    name: &'a str,
    labels: &'a BTreeMap<String, String>,
    taints: &'a [Taint],
    /// The node's labels as requirements, built on first use by a non-trivial node filter.
    requirements: Option<Requirements>,
    active: bool,
    /// Left out of this topology: its domains and pods count nowhere.
    removed: bool,
}

/// An existing pod that new groups may count.
#[derive(Debug)]
struct CountedPod<'a> {
    node: u32,
    uid: &'a str,
    labels: &'a BTreeMap<String, String>,
}

/// A required anti-affinity term of an existing pod, prepared: the sources of inverse groups.
#[derive(Debug)]
struct InverseTerm<'a> {
    /// Position of the pod's node in the base.
    node: u32,
    pod: &'a Pod,
    term: &'a PodAffinityTerm,
    /// Index into [`TopologyBase::prototypes`].
    proto: u32,
    /// The node's label value for the term's key (none: nothing is recorded).
    domain: Option<&'a str>,
}

/// An inverse group as every topology over the base creates it (group identity and selector,
/// computed once).
#[derive(Debug)]
struct InverseProto {
    key: String,
    namespaces: std::sync::Arc<[String]>,
    /// The namespaces came from a `namespaceSelector` (they depend on the known namespaces).
    namespace_selector: bool,
    selector: std::sync::Arc<Selector>,
    selector_key: Option<std::sync::Arc<SelectorKey>>,
    nil_selector: bool,
}

/// A group a pod owns, and whether it selects the pod itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Owned {
    group: u32,
    selects: bool,
}

/// What the topology knows about one pod of the batch (by UID). The namespace and labels are
/// borrowed from the batch pod (relaxation never changes them); a pod known only through a
/// copy with other labels gets its own.
#[derive(Debug, Clone, Default)]
struct PodEntry<'a> {
    namespace: Cow<'a, str>,
    labels: Cow<'a, BTreeMap<String, String>>,
    /// Non-inverse groups the pod owns (upstream `getMatchingTopologies`), in creation order of its
    /// terms.
    owned: SmallVec<[Owned; 4]>,
    /// Inverse groups the pod owns (its required anti-affinity terms).
    inverse_owned: SmallVec<[u32; 2]>,
    /// Inverse groups selecting the pod (upstream `getMatchingTopologies`), ascending.
    inverse_selecting: SmallVec<[u32; 2]>,
    /// The hostname-keyed subsets of `owned` and `inverse_selecting`.
    host_owned: SmallVec<[Owned; 2]>,
    host_inverse: SmallVec<[u32; 2]>,
}

/// Topology state of one solve (upstream `topology.go` / `topologygroup.go`).
#[derive(Debug, Clone)]
pub(crate) struct Topology<'a> {
    preference_policy: PreferencePolicy,
    universe: std::sync::Arc<DomainUniverse>,
    keys: Vec<KeyDomains>,
    key_ids: FxHashMap<String, u32>,
    /// Groups of each key, for `register`/`unregister`.
    by_key: Vec<SmallVec<[GroupRef; 4]>>,
    hostname_key: Option<u32>,
    groups: Vec<Group>,
    group_ids: FxHashMap<GroupIdentity, u32>,
    group_index: SelectorIndex,
    inverse: Vec<Group>,
    inverse_ids: FxHashMap<GroupIdentity, u32>,
    inverse_index: SelectorIndex,
    filters: Vec<FilterEntry>,
    filter_ids: FxHashMap<NodeFilter, u32>,
    /// The known pods' entries, by UID and by batch position.
    pods: PodEntries<'a>,
    nodes: Vec<NodeData<'a>>,
    /// The prepared cluster side: countable existing pods, their label index, namespaces,
    /// inverse anti-affinity terms.
    base: std::sync::Arc<TopologyBase<'a>>,
    /// Batch pods that are also countable existing pods of a node kept in: never counted.
    excluded: FxHashSet<&'a str>,
    /// Some pod of `excluded` sits on a node kept in (not only on left-out ones).
    excluded_on_kept: bool,
    /// Per node of the base, the interned id of its hostname, when every existing hostname was
    /// interned up front (a template and its forks).
    host_ids: Option<std::sync::Arc<[u32]>>,
    /// A fork's template's memos of the existing pods new groups count.
    count_memos: Option<std::sync::Arc<CountMemos>>,
    /// Namespaces of batch pods the base does not know (with no labels).
    extra_namespaces: BTreeMap<String, BTreeMap<String, String>>,
    /// Per key id, once a group without node filter needed them: the domains of the active
    /// nodes' labels for the key.
    node_domains: Vec<Option<std::sync::Arc<CommonDomains>>>,
    /// (key id, domain id) → how many of the key's groups (in `by_key` order) had it
    /// [`register`](Self::register)ed at its last registration.
    registered: FxHashMap<(u32, u32), usize>,
    /// While constructing, inverse-selection caches are computed once at the end.
    defer_inverse_refresh: bool,
}

/// Whether some pod of `excluded` (countable existing pods) sits on a node `removed` keeps.
fn excluded_on_kept(base: &TopologyBase<'_>, excluded: &FxHashSet<&str>, removed: &[bool]) -> bool {
    excluded.iter().any(|uid| {
        base.counted_uids
            .get(uid)
            .is_some_and(|&n| !removed.get(n as usize).copied().unwrap_or(false))
    })
}

fn index(i: usize) -> u32 {
    u32::try_from(i).unwrap_or(u32::MAX)
}

fn push_unique<T: PartialEq + Copy, const N: usize>(v: &mut SmallVec<[T; N]>, x: T)
where
    [T; N]: smallvec::Array<Item = T>,
{
    if !v.contains(&x) {
        v.push(x);
    }
}

impl<'a> Topology<'a> {
    /// Builds the topology (upstream `scheduling/topology.go`): inverse groups from existing pods
    /// with required anti-affinity, then [`update`](Self::update) for every batch pod, then
    /// registers the hostname of every existing node not marked for deletion (see the module docs).
    pub(crate) fn new(input: TopologyInput<'_, 'a>) -> Topology<'a> {
        let base = input.base;
        let removed = |i: usize| input.removed.get(i).copied().unwrap_or(false);
        let excluded: FxHashSet<&'a str> = if base.counted_uids.is_empty() {
            FxHashSet::default()
        } else {
            input
                .batch_pods
                .iter()
                .filter_map(|p| {
                    base.counted_uids
                        .get_key_value(p.uid.as_str())
                        .map(|(k, _)| *k)
                })
                .collect()
        };
        let mut extra_namespaces = BTreeMap::new();
        for p in input.batch_pods {
            if !base.namespaces.contains_key(&p.namespace) {
                extra_namespaces.insert(p.namespace.clone(), BTreeMap::new());
            }
        }
        let nodes = base
            .nodes
            .iter()
            .enumerate()
            .map(|(i, n)| NodeData {
                name: &n.node.name,
                labels: &n.node.labels,
                taints: &n.node.taints,
                requirements: None,
                active: !n.node.marked_for_deletion && !removed(i),
                removed: removed(i),
            })
            .collect();
        let mut t = Topology {
            preference_policy: input.preference_policy,
            universe: input.universe,
            keys: Vec::new(),
            key_ids: FxHashMap::default(),
            by_key: Vec::new(),
            hostname_key: None,
            groups: Vec::new(),
            group_ids: FxHashMap::default(),
            group_index: SelectorIndex::default(),
            inverse: Vec::new(),
            inverse_ids: FxHashMap::default(),
            inverse_index: SelectorIndex::default(),
            filters: Vec::new(),
            filter_ids: FxHashMap::default(),
            pods: PodEntries::default(),
            nodes,
            base: base.clone(),
            excluded_on_kept: excluded_on_kept(&base, &excluded, input.removed),
            excluded,
            count_memos: None,
            host_ids: None,
            extra_namespaces,
            node_domains: Vec::new(),
            registered: FxHashMap::default(),
            defer_inverse_refresh: true,
        };
        // Inverse groups of the existing pods' required anti-affinity terms, in node, pod and
        // term order, from the prototypes prepared in the base.
        let prototypes_valid = t.extra_namespaces.is_empty();
        let mut proto_gid: Vec<Option<u32>> = vec![None; base.prototypes.len()];
        for term in &base.inverse_terms {
            if removed(term.node as usize) || t.excluded.contains(term.pod.uid.as_str()) {
                continue;
            }
            let proto = base.prototypes.get(term.proto as usize);
            let gid = match (proto, proto_gid.get(term.proto as usize).copied().flatten()) {
                (_, Some(gid)) => gid,
                (Some(proto), None) if prototypes_valid || !proto.namespace_selector => {
                    let gid = t.inverse_group_from(term.pod, proto);
                    if let Some(slot) = proto_gid.get_mut(term.proto as usize) {
                        *slot = Some(gid);
                    }
                    gid
                }
                _ => t.inverse_group(term.pod, term.term),
            };
            if let Some(domain) = term.domain
                && let Some(g) = t.inverse.get_mut(gid as usize)
                && let Some(kd) = t.keys.get_mut(g.key as usize)
            {
                g.record(kd.intern(domain));
            }
        }
        t.finish_build(
            input.batch_pods,
            input.batch_classes,
            input.batch_uids_distinct,
            input.removed,
        );
        t
    }

    /// The last steps of every build, fresh or forked from a template: the batch's pods
    /// counted, the inverse groups' selections refreshed, and the hostnames of the nodes kept
    /// (neither marked for deletion nor in `removed`) registered.
    pub(super) fn finish_build(
        &mut self,
        batch_pods: &'a [&'a Pod],
        batch_classes: &[u32],
        uids_distinct: bool,
        removed: &[bool],
    ) {
        self.register_batch(batch_pods, batch_classes, uids_distinct);
        self.defer_inverse_refresh = false;
        self.refresh_batch_inverse_selecting(batch_pods, batch_classes);
        let base = std::sync::Arc::clone(&self.base);
        let kept = |i: usize, n: &crate::scheduling::ExistingNodeRef<'_>| {
            !n.node.marked_for_deletion && !removed.get(i).copied().unwrap_or(false)
        };
        if let (Some(ids), Some(kid)) = (self.host_ids.clone(), self.hostname_key) {
            // The hostnames are interned already: no look-up per node.
            let kept_ids: Vec<u32> = base
                .nodes
                .iter()
                .zip(ids.iter())
                .enumerate()
                .filter(|(i, (n, _))| kept(*i, n))
                .map(|(_, (_, &id))| id)
                .collect();
            self.register_ids(kid, &kept_ids);
            return;
        }
        self.register_all(
            labels::HOSTNAME,
            base.nodes
                .iter()
                .enumerate()
                .filter(|(i, n)| kept(*i, n))
                .map(|(_, n)| n.node.hostname()),
        );
    }

    /// The inverse group of a prepared anti-affinity term (same identity and construction as
    /// [`inverse_group`](Self::inverse_group), without recomputing namespaces and selector).
    fn inverse_group_from(&mut self, pod: &Pod, proto: &InverseProto) -> u32 {
        let key = self.key_id(&proto.key);
        let identity = GroupIdentity {
            kind: TopologyType::PodAntiAffinity,
            key,
            namespaces: proto.namespaces.clone(),
            max_skew: i32::MAX,
            filter: None,
            selector: proto.selector_key.clone(),
        };
        if let Some(&gid) = self.inverse_ids.get(&identity) {
            return gid;
        }
        let mut group = Group::new(GroupSpec {
            kind: TopologyType::PodAntiAffinity,
            key,
            hostname: proto.key == labels::HOSTNAME,
            max_skew: i32::MAX,
            min_domains: None,
            namespaces: identity.namespaces.clone(),
            selector: proto.selector.clone(),
            nil_selector: proto.nil_selector,
            filter: None,
        });
        self.init_domains(&mut group, pod, true);
        self.push_inverse(group, identity)
    }

    /// The domains `pod` may use on a candidate node or NodeClaim (upstream
    /// `scheduling/topology.go`): `node_reqs` intersected with the domains chosen by every group
    /// constraining the pod — the groups it owns, then the inverse anti-affinity groups selecting
    /// it.
    ///
    /// Each group chooses independently from `strict_pod_reqs[key]` (the pod's own domains, from
    /// its node selector and required node affinity; `Exists` if absent) and `node_reqs[key]`
    /// (`Exists` if absent) — never from the progressively tightened result; conflicting choices
    /// surface as an empty requirement in the result, which the caller's compatibility check
    /// rejects. The candidate's taints play no part: the groups consulted here have no taint filter
    /// (inverse groups never filter nodes).
    ///
    /// `at` is where the pod's entry is kept ([`PodRef`]).
    pub(crate) fn add_requirements_at(
        &self,
        pod: &Pod,
        at: PodRef,
        strict_pod_reqs: &Requirements,
        node_reqs: &Requirements,
    ) -> Result<Requirements, TopologyError> {
        let mut result = node_reqs.clone();
        let entry = self.pods.get(at);
        let owned = entry.map(|e| e.owned.as_slice()).unwrap_or_default();
        let inverse: Cow<'_, [u32]> = match entry {
            Some(e) => Cow::Borrowed(e.inverse_selecting.as_slice()),
            None => Cow::Owned(
                self.inverse_selecting_for(&pod.namespace, &pod.labels)
                    .into_vec(),
            ),
        };
        let owned_groups = owned
            .iter()
            .filter_map(|o| Some((self.groups.get(o.group as usize)?, o.selects)));
        let inverse_groups = inverse
            .iter()
            .filter_map(|&gid| Some((self.inverse.get(gid as usize)?, true)));
        for (g, self_selecting) in owned_groups.chain(inverse_groups) {
            let Some(kd) = self.keys.get(g.key as usize) else {
                continue;
            };
            let pod_domains = strict_pod_reqs.get_or_exists(&kd.key);
            let node_domains = node_reqs.get_or_exists(&kd.key);
            match g.next_domains(kd, self_selecting, &pod_domains, &node_domains) {
                Some(domains) => result.add(domains),
                None => {
                    let (entries, others) = g.sample_counts(kd, ERROR_SAMPLE);
                    return Err(TopologyError(Box::new(TopologyErrorDetails {
                        kind: g.kind,
                        key: kd.key.clone(),
                        counts: CountsSample { entries, others },
                        pod_domains: pod_domains.into_owned(),
                        node_domains: node_domains.into_owned(),
                    })));
                }
            }
        }
        Ok(result)
    }

    /// Node-independent domain limits for `pod`: one requirement per non-hostname group that
    /// constrains it (see `Group::allowed_on_any_node`). A node or NodeClaim whose requirement
    /// on such a key has no value in common with the limit (or that lacks the key while the limit
    /// is empty) is certainly rejected by [`add_requirements_at`](Self::add_requirements_at); the
    /// solver computes this once per placement attempt and skips such candidates cheaply.
    /// `at` is where the pod's entry is kept ([`PodRef`]).
    pub(crate) fn domain_prefilter_at(
        &self,
        at: PodRef,
        strict_pod_reqs: &Requirements,
    ) -> SmallVec<[(u32, Requirement); 2]> {
        let mut out = SmallVec::new();
        let Some(entry) = self.pods.get(at) else {
            return out;
        };
        let owned = entry
            .owned
            .iter()
            .filter_map(|o| Some((self.groups.get(o.group as usize)?, o.selects)));
        let inverse = entry
            .inverse_selecting
            .iter()
            .filter_map(|&gid| Some((self.inverse.get(gid as usize)?, true)));
        for (g, self_selecting) in owned.chain(inverse) {
            let Some(kd) = self.keys.get(g.key as usize) else {
                continue;
            };
            let pod_domains = strict_pod_reqs.get_or_exists(&kd.key);
            if let Some(r) = g.allowed_on_any_node(kd, self_selecting, &pod_domains) {
                out.push((g.key, r));
            }
        }
        out
    }

    /// Records that `pod` was placed on a node or NodeClaim with final requirements `node_reqs` and
    /// taints `node_taints` (upstream `Topology.Record`). Call it for every placement, whether or
    /// not the pod [`constrains_at`](Self::constrains_at) anything: groups owned by other pods may select
    /// it.
    ///
    /// For every non-inverse group that selects the pod and whose node filter matches
    /// `(node_taints, node_reqs)`:
    /// - anti-affinity: every value of `node_reqs[key]` is counted — all domains the pod might
    ///   end up in are blocked ("Schrödinger" semantics);
    /// - spread and affinity: only a collapsed `node_reqs[key]` (`In` with exactly one value) is
    ///   counted; otherwise nothing, and nothing later either when the NodeClaim collapses
    ///   (upstream quirk, reproduced).
    ///
    /// For every inverse group the pod owns, every value of `node_reqs[key]` is counted. Nothing
    /// is recorded for a key `node_reqs` lacks. "Every value" is the raw value set, i.e. the
    /// excluded values of a `NotIn` (upstream quirk, reproduced).
    ///
    /// `at` is where the pod's entry is kept ([`PodRef`]); `class`, when given, identifies the
    /// pod's namespace and labels: every pod recorded with one class has the same ones.
    pub(crate) fn record_at(
        &mut self,
        pod: &Pod,
        at: PodRef,
        class: Option<u32>,
        node_taints: &[Taint],
        node_reqs: &Requirements,
    ) {
        for gid in self.selecting_groups(pod, class) {
            let Some(g) = self.groups.get(gid as usize) else {
                continue;
            };
            if let Some(fid) = g.filter
                && let Some(f) = self.filters.get(fid as usize)
                && !f.trivial
                && !f.filter.matches(node_taints, node_reqs)
            {
                continue;
            }
            let (kind, key) = (g.kind, g.key);
            let Some(kd) = self.keys.get_mut(key as usize) else {
                continue;
            };
            let Some(req) = node_reqs.get(&kd.key) else {
                continue;
            };
            let Some(g) = self.groups.get_mut(gid as usize) else {
                continue;
            };
            if kind == TopologyType::PodAntiAffinity {
                for v in req.values() {
                    g.record(kd.intern(v));
                }
            } else if let Some(v) = req.single_value() {
                g.record(kd.intern(v));
            }
        }
        let inverse_owned = self
            .pods
            .get(at)
            .map(|e| e.inverse_owned.clone())
            .unwrap_or_default();
        for gid in inverse_owned {
            let Some(g) = self.inverse.get_mut(gid as usize) else {
                continue;
            };
            let Some(kd) = self.keys.get_mut(g.key as usize) else {
                continue;
            };
            if let Some(req) = node_reqs.get(&kd.key) {
                for v in req.values() {
                    g.record(kd.intern(v));
                }
            }
        }
    }

    /// Makes `domain` known (count 0) to every group, normal and inverse, whose key is `key`
    /// (upstream `Topology.Record` `Register`): hostnames of existing nodes at construction, and
    /// the hostname placeholder of each NodeClaim when a pod is added to it. Groups created later
    /// do not learn it (as upstream).
    pub(crate) fn register(&mut self, key: &str, domain: &str) {
        let Some(&kid) = self.key_ids.get(key) else {
            return;
        };
        let Some(kd) = self.keys.get_mut(kid as usize) else {
            return;
        };
        let id = kd.intern(domain);
        // Groups never forget a registered domain (outside tests): only the groups of the key
        // created since this domain was last registered can learn it (a NodeClaim's hostname is
        // registered again with every pod added to it).
        let groups = self.by_key.get(kid as usize).map_or(0, |refs| refs.len());
        let known_by = self.registered.get(&(kid, id)).copied().unwrap_or(0);
        if known_by >= groups {
            return;
        }
        self.for_each_group_of_key_from(kid, known_by, |g| g.register(id));
        self.registered.insert((kid, id), groups);
    }

    /// [`register`](Self::register) for each domain in order, group by group (same result,
    /// one pass over each group's counts).
    fn register_all<'d>(&mut self, key: &str, domains: impl IntoIterator<Item = &'d str>) {
        let Some(&kid) = self.key_ids.get(key) else {
            return;
        };
        let Some(kd) = self.keys.get_mut(kid as usize) else {
            return;
        };
        let ids: Vec<u32> = domains.into_iter().map(|d| kd.intern(d)).collect();
        self.register_ids(kid, &ids);
    }

    /// [`register_all`](Self::register_all) of domains already interned for key `kid`.
    fn register_ids(&mut self, kid: u32, ids: &[u32]) {
        if ids.is_empty() {
            return;
        }
        let common = std::sync::Arc::new(CommonDomains::new(ids));
        self.for_each_group_of_key(kid, |g| g.register_common(&common));
    }

    /// Forgets `domain` and its counts in every group whose key is `key` (upstream
    /// `Unregister`; the provisioning solve does not need it).
    #[cfg(test)]
    pub(crate) fn unregister(&mut self, key: &str, domain: &str) {
        let Some(&kid) = self.key_ids.get(key) else {
            return;
        };
        let Some(id) = self.keys.get(kid as usize).and_then(|kd| kd.lookup(domain)) else {
            return;
        };
        self.registered.remove(&(kid, id));
        self.for_each_group_of_key(kid, |g| g.unregister(id));
    }

    /// The value set of `r`, a requirement on the topology key with id `kid`, as a bit mask of
    /// the key's interned domain ids: `None` unless `r` is a plain `In` (no complement, no
    /// numeric bounds) whose every value is interned with an id below 64. Two requirements on
    /// one key with masks have a common value iff their masks share a bit (interning is one id
    /// per value), which the solver's per-candidate domain pre-check uses instead of comparing
    /// strings.
    pub(crate) fn domain_mask(&self, kid: u32, r: &Requirement) -> Option<u64> {
        if r.is_complement() || r.gte().is_some() || r.lte().is_some() {
            return None;
        }
        let kd = self.keys.get(kid as usize)?;
        let mut mask = 0u64;
        for v in r.values() {
            let id = kd.lookup(v)?;
            mask |= 1u64.checked_shl(id)?;
        }
        Some(mask)
    }

    /// The topology keys interned so far, by id (ids are stable; new keys are appended).
    pub(crate) fn key_names(&self) -> impl ExactSizeIterator<Item = &str> {
        self.keys.iter().map(|k| k.key.as_str())
    }

    /// The interned id of a hostname domain, once [`register`](Self::register)ed (or known from
    /// an existing node); `None` when no hostname group exists or the host is unknown.
    pub(crate) fn hostname_id(&self, hostname: &str) -> Option<u32> {
        let kd = self.hostname_key.and_then(|k| self.keys.get(k as usize))?;
        kd.lookup(hostname)
    }

    /// [`hostname_id`](Self::hostname_id) of the hostname of the base's node at position
    /// `node`, without a look-up when the hostnames were interned up front.
    pub(crate) fn base_hostname_id(&self, node: usize, hostname: &str) -> Option<u32> {
        match (&self.host_ids, self.hostname_key) {
            (Some(ids), Some(_)) => ids.get(node).copied(),
            _ => self.hostname_id(hostname),
        }
    }

    /// The hostname groups constraining `pod`, resolved once per placement attempt so that
    /// [`HostnameCheck::rejects`] costs a few array reads per candidate. Same rules as the hostname
    /// special cases of `Group::next_domains`: an owned anti-affinity group or an inverse group
    /// selecting the pod that counts the host, an owned spread that would exceed `maxSkew` there,
    /// an owned affinity group that does not count the host and cannot bootstrap it.
    ///
    /// `at` is where the pod's entry is kept ([`PodRef`]).
    pub(crate) fn hostname_check_at(&self, at: PodRef) -> HostnameCheck<'_> {
        let mut check = HostnameCheck {
            owned: SmallVec::new(),
            inverse: SmallVec::new(),
            lasting: HostnameGroups::new(),
        };
        let Some(entry) = self.pods.get(at) else {
            return check;
        };
        for o in &entry.host_owned {
            if let Some(g) = self.groups.get(o.group as usize) {
                check.owned.push((g, o.selects));
                if g.kind != TopologyType::PodAffinity {
                    check
                        .lasting
                        .push(u64::from(o.group) << 1 | u64::from(o.selects));
                }
            }
        }
        for &gid in &entry.host_inverse {
            if let Some(g) = self.inverse.get(gid as usize) {
                check.inverse.push(g);
                check.lasting.push(INVERSE_BIT | u64::from(gid));
            }
        }
        check
    }

    /// Whether [`add_requirements_at`](Self::add_requirements_at) would consult any group for `pod`:
    /// it owns a group, or an inverse anti-affinity group selects it. When `false`,
    /// `add_requirements` returns `node_reqs` unchanged.
    /// `at` is where the pod's entry is kept ([`PodRef`]).
    pub(crate) fn constrains_at(&self, pod: &Pod, at: PodRef) -> bool {
        match self.pods.get(at) {
            Some(e) => !e.owned.is_empty() || !e.inverse_selecting.is_empty(),
            None => !self
                .inverse_selecting_for(&pod.namespace, &pod.labels)
                .is_empty(),
        }
    }

    /// The zones the pod's own zone-keyed groups allow, for the effective-zone metric
    /// (upstream `GetTopologyZoneConstraints`): `None` when the pod owns no non-inverse
    /// group keyed by `topology.kubernetes.io/zone`; otherwise the intersection over those groups
    /// of, with no node-side restriction and `pod_reqs[zone]` (`Exists` if absent) as the pod's
    /// domains:
    /// - spread: every known domain with `count (+1 if self-selecting) − min ≤ maxSkew`;
    /// - affinity and anti-affinity: the domains [`add_requirements_at`](Self::add_requirements_at)
    ///   would allow.
    ///
    /// An empty set means unsatisfiable. (Upstream also reports unsatisfiable when one group
    /// allows nothing, but treats an empty intersection of non-empty sets as unconstrained; the
    /// spec's reading, empty = unsatisfiable, is used.)
    ///
    /// `at` is where the pod's entry is kept ([`PodRef`]).
    pub(crate) fn zone_domains_at(
        &self,
        at: PodRef,
        pod_reqs: &Requirements,
    ) -> Option<std::collections::BTreeSet<String>> {
        let entry = self.pods.get(at)?;
        let mut result: Option<std::collections::BTreeSet<String>> = None;
        for o in &entry.owned {
            let Some(g) = self.groups.get(o.group as usize) else {
                continue;
            };
            let Some(kd) = self.keys.get(g.key as usize) else {
                continue;
            };
            if kd.key != labels::ZONE {
                continue;
            }
            let pod_domains = pod_reqs.get_or_exists(&kd.key);
            let allowed = match g.kind {
                TopologyType::Spread => g.allowed_on_any_node(kd, o.selects, &pod_domains),
                _ => g.next_domains(kd, o.selects, &pod_domains, &Requirement::exists(&kd.key)),
            };
            let zones: std::collections::BTreeSet<String> = allowed
                .iter()
                .flat_map(|r| r.values())
                .map(str::to_owned)
                .collect();
            result = Some(match result {
                None => zones,
                Some(prev) => prev.intersection(&zones).cloned().collect(),
            });
        }
        result
    }
}

/// The hostname groups of one pod, resolved for a placement attempt (see
/// [`Topology::hostname_check_at`]).
pub(crate) struct HostnameCheck<'a> {
    owned: SmallVec<[(&'a Group, bool); 2]>,
    inverse: SmallVec<[&'a Group; 2]>,
    /// The groups whose rejections last (see [`HostnameCheck::lasting_groups`]).
    lasting: HostnameGroups,
}

/// Identifies the hostname groups of a [`HostnameCheck`] whose rejections last: per owned
/// spread or anti-affinity group its id and whether it selects the pod, per inverse group its
/// id (with [`INVERSE_BIT`] set), in the check's order.
pub(crate) type HostnameGroups = SmallVec<[u64; 4]>;

/// Marks an inverse group's id in [`HostnameGroups`].
const INVERSE_BIT: u64 = 1 << 40;

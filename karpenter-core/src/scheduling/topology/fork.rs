//! [`TopologyTemplate`]: the part of a [`Topology`] that every solve over one prepared base
//! shares, built once and forked by each solve (a consolidation simulation) instead of rebuilt.
//!
//! [`Topology::new`] spends most of its time on the existing nodes: one inverse group per
//! existing required anti-affinity term (created from its prototype, its domain recorded) and
//! the interning of every existing hostname. The template holds that state for the base with no
//! node left out and no batch pod, with the hostnames already interned (in a table forks share).
//! A fork clones it, drops what the solve's left-out nodes contributed and goes on as
//! [`Topology::new`] does (batch pods, inverse-selection caches, hostname registration).
//!
//! A fork is exactly the topology [`Topology::new`] builds for the same input, up to the
//! internal ids of domains: groups and keys are created in the same relative order, and the
//! groups only the left-out nodes' terms created become unreachable (no index, no identity, no
//! key list reaches them). When dropping a left-out node's terms cannot be done that way (a
//! group also reached by a kept term was created by a dropped one, or a kept group recorded a
//! dropped term's domain, or a key was introduced by a dropped term, or batch pods bring
//! namespaces the base does not know) [`TopologyTemplate::fork`] returns `None` and the caller
//! builds the topology from scratch.

use std::sync::Arc;

use fixedbitset::FixedBitSet;
use rustc_hash::{FxHashMap, FxHashSet};

use super::{CountMemos, DomainUniverse, GroupRef, Topology, TopologyBase, TopologyInput};
use crate::scheduling::PreferencePolicy;

/// A [`Topology`] over a base with nothing left out and no batch pod, as far as the existing
/// pods' inverse anti-affinity groups: each solve [forks](TopologyTemplate::fork) it.
#[derive(Debug)]
pub(crate) struct TopologyTemplate<'a> {
    topology: Topology<'a>,
    /// Per inverse term of the base: its inverse group.
    term_group: Vec<u32>,
    /// Per inverse group: the term that created it.
    group_first_term: Vec<u32>,
    /// Per inverse group: how many terms reach it.
    group_terms: Vec<u32>,
    /// The terms whose group introduced a topology key.
    key_creators: FixedBitSet,
    /// The existing pods new groups count, found once for every fork.
    memos: Arc<CountMemos>,
}

impl<'a> TopologyTemplate<'a> {
    /// The template over `base`.
    pub(crate) fn new(
        preference_policy: PreferencePolicy,
        universe: Arc<DomainUniverse>,
        base: Arc<TopologyBase<'a>>,
    ) -> TopologyTemplate<'a> {
        // An empty topology over the base (every node left out), then the nodes put back.
        let all = vec![true; base.nodes.len()];
        let mut t = Topology::new(TopologyInput {
            preference_policy,
            universe,
            base: base.clone(),
            removed: &all,
            batch_pods: &[],
            batch_classes: &[],
            batch_uids_distinct: false,
        });
        for (n, data) in base.nodes.iter().zip(t.nodes.iter_mut()) {
            data.removed = false;
            data.active = !n.node.marked_for_deletion;
        }
        t.defer_inverse_refresh = true;

        // The inverse groups, as `Topology::new` creates them when nothing is left out.
        let terms = base.inverse_terms.len();
        let mut term_group = Vec::with_capacity(terms);
        let mut group_first_term = Vec::new();
        let mut group_terms: Vec<u32> = Vec::new();
        let mut key_creators = FixedBitSet::with_capacity(terms);
        let mut proto_gid: Vec<Option<u32>> = vec![None; base.prototypes.len()];
        for (ti, term) in base.inverse_terms.iter().enumerate() {
            let keys_before = t.keys.len();
            let proto = base.prototypes.get(term.proto as usize);
            let gid = match (proto, proto_gid.get(term.proto as usize).copied().flatten()) {
                (_, Some(gid)) => gid,
                (Some(proto), None) => {
                    let gid = t.inverse_group_from(term.pod, proto);
                    if let Some(slot) = proto_gid.get_mut(term.proto as usize) {
                        *slot = Some(gid);
                    }
                    gid
                }
                (None, None) => t.inverse_group(term.pod, term.term),
            };
            if t.keys.len() > keys_before {
                key_creators.insert(ti);
            }
            if gid as usize == group_first_term.len() {
                group_first_term.push(super::index(ti));
                group_terms.push(0);
            }
            if let Some(n) = group_terms.get_mut(gid as usize) {
                *n += 1;
            }
            term_group.push(gid);
            if let Some(domain) = term.domain
                && let Some(g) = t.inverse.get_mut(gid as usize)
                && let Some(kd) = t.keys.get_mut(g.key as usize)
            {
                g.record(kd.intern(domain));
            }
        }
        // Every existing hostname interned once, in the table forks share.
        if let Some(kd) = t.hostname_key.and_then(|k| t.keys.get_mut(k as usize)) {
            let ids: Vec<u32> = base
                .nodes
                .iter()
                .map(|n| kd.intern(n.node.hostname()))
                .collect();
            t.host_ids = Some(ids.into());
        }
        for kd in &mut t.keys {
            kd.freeze();
        }
        TopologyTemplate {
            topology: t,
            term_group,
            group_first_term,
            group_terms,
            key_creators,
            memos: Arc::default(),
        }
    }

    /// The topology [`Topology::new`] builds for `input`, from the template; `None` when the
    /// template cannot produce it (see the module docs) or was prepared over another base.
    pub(crate) fn fork(&self, input: &TopologyInput<'_, 'a>) -> Option<Topology<'a>> {
        let template = &self.topology;
        let base = &template.base;
        if !Arc::ptr_eq(base, &input.base)
            || !Arc::ptr_eq(&template.universe, &input.universe)
            || template.preference_policy != input.preference_policy
            || input
                .batch_pods
                .iter()
                .any(|p| !base.namespaces.contains_key(&p.namespace))
        {
            return None;
        }
        let removed = |i: usize| input.removed.get(i).copied().unwrap_or(false);
        // `Topology::new` excludes the batch pods' UIDs from what the base counts. Only pods on
        // kept nodes are ever checked against that set (terms and pods of left-out nodes are
        // skipped first), and a UID carried on a single node that is left out is on no kept
        // node: those (a simulation's displaced pods) are left out of the set.
        let excluded: FxHashSet<&'a str> = if base.counted_uids.is_empty() {
            FxHashSet::default()
        } else {
            input
                .batch_pods
                .iter()
                .filter_map(|p| {
                    let (uid, &node) = base.counted_uids.get_key_value(p.uid.as_str())?;
                    (!removed(node as usize) || base.shared_uids.contains(uid)).then_some(*uid)
                })
                .collect()
        };

        // The terms `Topology::new` would skip, by group: (how many, whether one recorded).
        let mut dropped: FxHashMap<u32, (u32, bool)> = FxHashMap::default();
        for (ti, term) in base.inverse_terms.iter().enumerate() {
            let skipped = removed(term.node as usize)
                || (!excluded.is_empty() && excluded.contains(term.pod.uid.as_str()));
            if !skipped {
                continue;
            }
            if self.key_creators.contains(ti) {
                return None;
            }
            let gid = *self.term_group.get(ti)?;
            let entry = dropped.entry(gid).or_default();
            entry.0 += 1;
            entry.1 |= term.domain.is_some();
        }
        let mut dead = FixedBitSet::with_capacity(template.inverse.len());
        let mut dead_keys: Vec<u32> = Vec::new();
        for (&gid, &(count, recorded)) in &dropped {
            let all = *self.group_terms.get(gid as usize)?;
            if count == all {
                dead.insert(gid as usize);
                let key = template.inverse.get(gid as usize)?.key;
                if !dead_keys.contains(&key) {
                    dead_keys.push(key);
                }
                continue;
            }
            let first = *self.group_first_term.get(gid as usize)? as usize;
            let first_dropped = base.inverse_terms.get(first).is_some_and(|term| {
                removed(term.node as usize)
                    || (!excluded.is_empty() && excluded.contains(term.pod.uid.as_str()))
            });
            if first_dropped || recorded {
                return None;
            }
        }

        let mut t = template.clone();
        for (i, &r) in input.removed.iter().enumerate() {
            if r && let Some(n) = t.nodes.get_mut(i) {
                n.removed = true;
                n.active = false;
            }
        }
        t.excluded_on_kept = super::excluded_on_kept(base, &excluded, input.removed);
        t.excluded = excluded;
        t.count_memos = Some(self.memos.clone());
        if !dead.is_clear() {
            for gid in dead.ones() {
                if let Some(g) = template.inverse.get(gid) {
                    t.inverse_index.remove(super::index(gid), &g.selector);
                }
            }
            t.inverse_ids.retain(|_, gid| !dead.contains(*gid as usize));
            for key in dead_keys {
                if let Some(refs) = t.by_key.get_mut(key as usize) {
                    refs.retain(
                        |r| !matches!(*r, GroupRef::Inverse(g) if dead.contains(g as usize)),
                    );
                }
            }
        }
        // From here as `Topology::new`.
        t.finish_build(
            input.batch_pods,
            input.batch_classes,
            input.batch_uids_distinct,
            input.removed,
        );
        Some(t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::labels::HOSTNAME;
    use crate::model::{ClusterNode, LabelSelector, Pod, PodAffinity, PodAffinityTerm, PodPhase};
    use crate::requirements::{Operator, Requirement, Requirements};
    use crate::scheduling::{ExistingNodeInput, ExistingNodeRef};
    use std::collections::BTreeMap;

    /// A pod labelled `labels`, bound to `node` when given, with a required hostname
    /// anti-affinity term selecting `avoid` when given.
    fn pod(name: &str, labels: &[(&str, &str)], avoid: Option<(&str, &str)>) -> Pod {
        let mut p = Pod::new("default", name);
        p.uid = name.to_string();
        for (k, v) in labels {
            p.labels.insert(k.to_string(), v.to_string());
        }
        if let Some(pair) = avoid {
            p.pod_anti_affinity = Some(PodAffinity {
                required: vec![PodAffinityTerm::new(
                    LabelSelector::from_labels([pair]),
                    HOSTNAME,
                )],
                preferred: Vec::new(),
            });
        }
        p
    }

    /// Four nodes; each holds a pod avoiding its own kind (`solo=sN`); node 0 also holds a pod
    /// avoiding `app=web`, node 2 a `web` pod.
    fn cluster() -> Vec<ExistingNodeInput> {
        (0..4)
            .map(|n| {
                let name = format!("n{n}");
                let mut node = ClusterNode::new(name.clone());
                node.labels.insert(HOSTNAME.to_string(), name.clone());
                let solo = format!("s{n}");
                let mut pods = vec![pod(
                    &format!("{name}-solo"),
                    &[("solo", &solo)],
                    Some(("solo", &solo)),
                )];
                if n == 0 {
                    pods.push(pod("n0-web-avoider", &[], Some(("app", "web"))));
                }
                if n == 2 {
                    pods.push(pod("n2-web", &[("app", "web")], None));
                }
                for p in &mut pods {
                    p.node_name = Some(name.clone());
                    p.phase = PodPhase::Running;
                }
                ExistingNodeInput {
                    node,
                    pods,
                    volume_limits: Default::default(),
                }
            })
            .collect()
    }

    fn host(name: &str) -> Requirements {
        let mut r = Requirements::default();
        r.add(Requirement::new(HOSTNAME, Operator::In, [name]));
        r
    }

    /// What a topology says about `p` on each existing host and on a new one.
    fn verdicts(t: &Topology<'_>, p: &Pod) -> Vec<Result<String, String>> {
        ["n0", "n1", "n2", "n3", "fresh-host"]
            .iter()
            .map(|h| {
                t.add_requirements(p, &Requirements::default(), &host(h))
                    .map(|r| format!("{:?}", r.get(HOSTNAME)))
                    .map_err(|e| e.to_string())
            })
            .collect()
    }

    #[test]
    fn a_fork_answers_as_a_fresh_topology_and_refuses_what_it_cannot_reproduce() {
        let nodes = cluster();
        let refs: Vec<ExistingNodeRef<'_>> = nodes.iter().map(ExistingNodeRef::from).collect();
        let base = Arc::new(TopologyBase::new(refs, &BTreeMap::new(), &[]));
        let universe = Arc::new(DomainUniverse::default());
        let template =
            TopologyTemplate::new(PreferencePolicy::Respect, universe.clone(), base.clone());
        let input = |removed: &'static [bool], batch: &'static [&'static Pod]| TopologyInput {
            preference_policy: PreferencePolicy::Respect,
            universe: universe.clone(),
            base: base.clone(),
            removed,
            batch_pods: batch,
            batch_classes: &[],
            batch_uids_distinct: false,
        };

        // Node 2 left out: its pods are the batch; its solo group goes, the web pod moves.
        let batch: &'static [Pod] = Box::leak(nodes[2].pods.clone().into_boxed_slice());
        let batch_refs: &'static [&'static Pod] = Box::leak(batch.iter().collect());
        let removed: &'static [bool] = &[false, false, true, false];
        let forked = template
            .fork(&input(removed, batch_refs))
            .expect("node 2 created no key and no group a kept term reaches");
        let fresh = Topology::new(input(removed, batch_refs));
        let probes = [
            batch[0].clone(),
            batch[1].clone(),
            pod("pending-s1", &[("solo", "s1")], None),
            pod("pending-s2", &[("solo", "s2")], None),
        ];
        for p in &probes {
            assert_eq!(verdicts(&forked, p), verdicts(&fresh, p), "pod {}", p.name);
        }
        // The web pod may not go to n0 (its avoider lives there); `s1` may not go to n1.
        assert!(verdicts(&forked, &batch[1])[0].is_err());
        assert!(verdicts(&forked, &probes[2])[1].is_err());
        // The removed node's solo group is gone: `s2` goes anywhere.
        assert!(verdicts(&forked, &probes[3]).iter().all(Result::is_ok));

        // Node 0 introduced the hostname key: leaving it out is built from scratch.
        let batch0: &'static [Pod] = Box::leak(nodes[0].pods.clone().into_boxed_slice());
        let batch0: &'static [&'static Pod] = Box::leak(batch0.iter().collect());
        assert!(
            template
                .fork(&input(&[true, false, false, false], batch0))
                .is_none()
        );
        // Another base: refused.
        let other = Arc::new(TopologyBase::new(Vec::new(), &BTreeMap::new(), &[]));
        let foreign = TopologyInput {
            base: other,
            ..input(&[], &[])
        };
        assert!(template.fork(&foreign).is_none());
    }
}

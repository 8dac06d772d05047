//! [`Topology::update_at`] and its variants: registering a pod's constraints (its groups and
//! the inverse groups of its required anti-affinity terms).

use std::borrow::Cow;
use std::collections::BTreeMap;

use smallvec::SmallVec;

use super::group::{NodeFilter, TopologyType};
use super::internals::{OwnedTerm, spread_selector};
use super::{Owned, PodEntry, PodRef, Topology, push_unique};
use crate::model::{Pod, WhenUnsatisfiable};
use crate::scheduling::PreferencePolicy;

impl<'a> Topology<'a> {
    /// [`update_at`](Self::update_at), the pod's entry found by UID.
    #[cfg(test)]
    pub(crate) fn update(&mut self, pod: &Pod) {
        self.update_at(pod, PodRef::UNKNOWN);
    }

    /// Registers the pod's constraints (upstream `Topology.Update`). Call it for the original pod
    /// and again after every relaxation (with the relaxed copy) or failure (with the original); the
    /// pod is keyed by UID.
    ///
    /// 1. The pod stops owning the non-inverse groups it owned.
    /// 2. Each **required** anti-affinity term finds or creates its inverse group and the pod
    ///    becomes an owner (ownership of inverse groups is never dropped; preferred terms are
    ///    never tracked inversely).
    /// 3. Each spread (under [`PreferencePolicy::Ignore`] only `DoNotSchedule` ones; the
    ///    selector gains `key In [value]` for every `matchLabelKeys` key the pod has a label
    ///    for), each required pod-affinity term and each required pod-anti-affinity term (plus
    ///    the preferred ones under [`PreferencePolicy::Respect`]) finds or creates its group —
    ///    creation counts the existing pods — and the pod becomes an owner.
    ///
    /// The pod's entry is kept at `at` (for a relaxed copy, its original's;
    /// [`PodRef::UNKNOWN`]: found by UID).
    pub(crate) fn update_at(&mut self, pod: &Pod, at: PodRef) {
        let at = match at {
            PodRef::UNKNOWN => self.pods.find(&pod.uid),
            at => at,
        };
        // The entry keeps borrowing the batch pod's labels when this copy has the same ones.
        let known = self.pods.get(at).and_then(|e| {
            (*e.namespace == *pod.namespace && *e.labels == pod.labels)
                .then(|| (e.namespace.clone(), e.labels.clone()))
        });
        let (namespace, labels) = known.unwrap_or_else(|| {
            (
                Cow::Owned(pod.namespace.clone()),
                Cow::Owned(pod.labels.clone()),
            )
        });
        self.update_with(pod, at, Cow::Owned(pod.uid.clone()), namespace, labels);
    }

    /// [`update_at`](Self::update_at) for a pod of the batch (or one living as long): its
    /// entry borrows the pod's namespace and labels.
    pub(crate) fn update_batch(&mut self, pod: &'a Pod, at: PodRef) -> PodRef {
        let at = match at {
            PodRef::UNKNOWN => self.pods.find(&pod.uid),
            at => at,
        };
        self.update_new_batch(pod, at)
    }

    /// [`update_batch`](Self::update_batch) of a pod whose entry is at `at`
    /// ([`PodRef::UNKNOWN`]: no entry has its UID).
    pub(super) fn update_new_batch(&mut self, pod: &'a Pod, at: PodRef) -> PodRef {
        self.update_with(
            pod,
            at,
            Cow::Borrowed(pod.uid.as_str()),
            Cow::Borrowed(pod.namespace.as_str()),
            Cow::Borrowed(&pod.labels),
        )
    }

    /// The update of `pod`, whose UID is `uid` and entry `at` ([`PodRef::UNKNOWN`]: none yet):
    /// returns where its entry is kept.
    fn update_with(
        &mut self,
        pod: &Pod,
        at: PodRef,
        uid: Cow<'a, str>,
        namespace: Cow<'a, str>,
        labels: Cow<'a, BTreeMap<String, String>>,
    ) -> PodRef {
        let respect = self.preference_policy == PreferencePolicy::Respect;
        let mut inverse_owned = self
            .pods
            .get(at)
            .map(|e| e.inverse_owned.clone())
            .unwrap_or_default();
        if let Some(anti) = &pod.pod_anti_affinity {
            for term in &anti.required {
                let gid = self.inverse_group(pod, term);
                push_unique(&mut inverse_owned, gid);
            }
        }

        let mut owned_ids: SmallVec<[u32; 4]> = SmallVec::new();
        for tsc in &pod.topology_spread_constraints {
            if !respect && tsc.when_unsatisfiable != WhenUnsatisfiable::DoNotSchedule {
                continue;
            }
            let selector = spread_selector(tsc, pod);
            let gid = self.owned_group(
                pod,
                OwnedTerm {
                    kind: TopologyType::Spread,
                    key: &tsc.topology_key,
                    namespaces: std::sync::Arc::from([pod.namespace.clone()]),
                    selector: selector.as_deref(),
                    max_skew: tsc.max_skew,
                    min_domains: tsc.min_domains,
                    filter: Some(NodeFilter::for_spread(pod, tsc)),
                },
            );
            push_unique(&mut owned_ids, gid);
        }
        let affinities = [
            (TopologyType::PodAffinity, &pod.pod_affinity),
            (TopologyType::PodAntiAffinity, &pod.pod_anti_affinity),
        ];
        for (kind, affinity) in affinities {
            let Some(affinity) = affinity else {
                continue;
            };
            let preferred = affinity
                .preferred
                .iter()
                .filter(|_| respect)
                .map(|w| &w.pod_affinity_term);
            for term in affinity.required.iter().chain(preferred) {
                let namespaces = self.term_namespaces(&pod.namespace, term);
                let gid = self.owned_group(
                    pod,
                    OwnedTerm {
                        kind,
                        key: &term.topology_key,
                        namespaces,
                        selector: term.label_selector.as_ref(),
                        max_skew: i32::MAX,
                        min_domains: None,
                        filter: None,
                    },
                );
                push_unique(&mut owned_ids, gid);
            }
        }

        let owned = owned_ids
            .iter()
            .filter_map(|&gid| {
                let g = self.groups.get(gid as usize)?;
                Some(Owned {
                    group: gid,
                    selects: g.selects(&pod.namespace, &pod.labels),
                })
            })
            .collect();
        let inverse_selecting = if self.defer_inverse_refresh {
            SmallVec::new()
        } else {
            self.inverse_selecting_for(&pod.namespace, &pod.labels)
        };
        let mut entry = PodEntry {
            namespace,
            labels,
            owned,
            inverse_owned,
            inverse_selecting,
            host_owned: SmallVec::new(),
            host_inverse: SmallVec::new(),
        };
        self.refresh_host_lists(&mut entry);
        self.pods.set(at, uid, entry)
    }
}

//! [`PodEntries`]: where a [`Topology`](super::Topology) keeps what it knows about each pod,
//! and [`PodRef`], a resolved position among them.
//!
//! A pod is known by its UID (a relaxed copy shares its original's entry). The solver asks
//! about a pod many times per placement attempt (once per candidate node or NodeClaim), so it
//! resolves the pod's entry once ([`Topology::batch_pod_ref`](super::Topology::batch_pod_ref)
//! for a pod of the batch, by position, without hashing its UID) and passes the [`PodRef`].
//! The index by UID is built on the first look-up by UID: a batch whose UIDs are known to be
//! distinct ([`TopologyInput::batch_uids_distinct`](super::TopologyInput)) registers its pods
//! without one.

use std::borrow::Cow;

use rustc_hash::FxHashMap;
use smallvec::SmallVec;

use super::PodEntry;

/// The position of a pod's entry in its topology ([`PodEntries`]), or that the pod is unknown.
/// Entries are never removed, so a reference stays valid for the topology's lifetime; an
/// unknown pod's reference does not see an entry created for it later (resolve it again).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PodRef(u32);

impl PodRef {
    /// An unknown pod.
    pub(crate) const UNKNOWN: PodRef = PodRef(u32::MAX);
}

/// The entries of the known pods, by UID, with the entry of each batch position.
#[derive(Debug, Clone, Default)]
pub(super) struct PodEntries<'a> {
    entries: Vec<PodEntry<'a>>,
    /// Per entry: its pod's UID (distinct). Batch pods' UIDs are borrowed.
    uids: Vec<Cow<'a, str>>,
    /// UID → position in `entries`, built from `uids` on the first look-up by UID (`None`
    /// until then).
    ids: Option<FxHashMap<Cow<'a, str>, u32>>,
    /// Per position in the batch (as registered): the pod's entry.
    batch: Vec<u32>,
    /// Per pod class (see [`Topology::record_at`](super::Topology::record_at)): the
    /// non-inverse groups selecting its pods, with how many groups existed when they were
    /// found (groups are only ever added: while none is, the list holds).
    selecting: Vec<Option<(usize, SmallVec<[u32; 8]>)>>,
}

impl<'a> PodEntries<'a> {
    /// The position of `uid`'s entry.
    pub(super) fn find(&mut self, uid: &str) -> PodRef {
        let uids = &self.uids;
        let ids = self.ids.get_or_insert_with(|| {
            uids.iter()
                .enumerate()
                .map(|(i, uid)| (uid.clone(), u32::try_from(i).unwrap_or(u32::MAX)))
                .collect()
        });
        ids.get(uid).map_or(PodRef::UNKNOWN, |&i| PodRef(i))
    }

    /// [`find`](Self::find) without the index (a scan).
    #[cfg(test)]
    pub(super) fn scan(&self, uid: &str) -> PodRef {
        self.uids
            .iter()
            .position(|u| u == uid)
            .map_or(PodRef::UNKNOWN, |i| {
                PodRef(u32::try_from(i).unwrap_or(u32::MAX))
            })
    }

    /// The entry at `r`.
    pub(super) fn get(&self, r: PodRef) -> Option<&PodEntry<'a>> {
        self.entries.get(r.0 as usize)
    }

    /// The entry at `r`, mutably.
    pub(super) fn get_mut(&mut self, r: PodRef) -> Option<&mut PodEntry<'a>> {
        self.entries.get_mut(r.0 as usize)
    }

    /// Sets the entry at `at` (the position of `uid`'s entry, found by [`find`](Self::find),
    /// or [`PodRef::UNKNOWN`] for a UID no entry has): where it is kept.
    pub(super) fn set(&mut self, at: PodRef, uid: Cow<'a, str>, entry: PodEntry<'a>) -> PodRef {
        if let Some(slot) = self.entries.get_mut(at.0 as usize) {
            *slot = entry;
            return at;
        }
        let at = PodRef(u32::try_from(self.entries.len()).unwrap_or(u32::MAX));
        if let Some(ids) = self.ids.as_mut() {
            ids.insert(uid.clone(), at.0);
        }
        self.entries.push(entry);
        self.uids.push(uid);
        at
    }

    /// Records that the next batch position's pod is kept at `r`.
    pub(super) fn push_batch(&mut self, r: PodRef) {
        self.batch.push(r.0);
    }

    /// The entry of the pod at `position` in the batch.
    pub(super) fn batch(&self, position: usize) -> PodRef {
        self.batch
            .get(position)
            .map_or(PodRef::UNKNOWN, |&i| PodRef(i))
    }

    /// Every entry with its pod's UID, in no particular order.
    #[cfg(test)]
    pub(super) fn iter(&self) -> impl Iterator<Item = (&str, &PodEntry<'a>)> {
        self.uids.iter().map(|uid| uid.as_ref()).zip(&self.entries)
    }

    /// How many pods are known.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.entries.len()
    }

    /// Every entry, mutably.
    pub(super) fn values_mut(&mut self) -> impl Iterator<Item = &mut PodEntry<'a>> {
        self.entries.iter_mut()
    }
}

impl super::Topology<'_> {
    /// The non-inverse groups selecting `pod` (its namespace and labels), in the order of the
    /// group index's candidates; found once per `class` while no group is added.
    pub(super) fn selecting_groups(
        &mut self,
        pod: &crate::model::Pod,
        class: Option<u32>,
    ) -> SmallVec<[u32; 8]> {
        let groups = self.groups.len();
        let memo = class.and_then(|c| self.pods.selecting.get(c as usize));
        if let Some(Some((seen, ids))) = memo
            && *seen == groups
        {
            return ids.clone();
        }
        let mut ids: SmallVec<[u32; 8]> = SmallVec::new();
        self.group_index.candidates(&pod.labels, &mut ids);
        ids.retain(|gid| {
            self.groups
                .get(*gid as usize)
                .is_some_and(|g| g.selects(&pod.namespace, &pod.labels))
        });
        // Classes number the batch's pods: no more of them than pods.
        if let Some(c) = class
            .map(|c| c as usize)
            .filter(|&c| c < self.pods.batch.len())
        {
            let memos = &mut self.pods.selecting;
            if memos.len() <= c {
                memos.resize(c + 1, None);
            }
            if let Some(slot) = memos.get_mut(c) {
                *slot = Some((groups, ids.clone()));
            }
        }
        ids
    }

    /// Where the entry of the pod at `position` in the batch is kept (the topology was built
    /// over that batch), without a look-up by UID.
    pub(crate) fn batch_pod_ref(&self, position: usize) -> PodRef {
        self.pods.batch(position)
    }
}

/// The queries by pod, each resolving the pod's entry by UID.
#[cfg(test)]
impl super::Topology<'_> {
    /// Where `pod`'s entry is kept (found by UID), for the `*_at` queries.
    pub(crate) fn pod_ref(&self, pod: &crate::model::Pod) -> PodRef {
        self.pods.scan(&pod.uid)
    }

    pub(crate) fn add_requirements(
        &self,
        pod: &crate::model::Pod,
        strict_pod_reqs: &crate::requirements::Requirements,
        node_reqs: &crate::requirements::Requirements,
    ) -> Result<crate::requirements::Requirements, super::TopologyError> {
        self.add_requirements_at(pod, self.pod_ref(pod), strict_pod_reqs, node_reqs)
    }

    pub(crate) fn record(
        &mut self,
        pod: &crate::model::Pod,
        node_taints: &[crate::taints::Taint],
        node_reqs: &crate::requirements::Requirements,
    ) {
        self.record_at(pod, self.pod_ref(pod), None, node_taints, node_reqs);
    }

    pub(crate) fn hostname_check(&self, pod: &crate::model::Pod) -> super::HostnameCheck<'_> {
        self.hostname_check_at(self.pod_ref(pod))
    }

    pub(crate) fn constrains(&self, pod: &crate::model::Pod) -> bool {
        self.constrains_at(pod, self.pod_ref(pod))
    }
}

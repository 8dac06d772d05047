//! Per-pod hints: what a solve computes for each pod before placing it, computed once for
//! many solves over the same pods.

use crate::model::Pod;
use crate::resources::{Quantity, names};

use super::{Prepared, Solver};

/// What a solve computes for each pod before placing it, computed once by
/// [`Prepared::pod_hints`](super::Prepared::pod_hints) for callers that solve the same pods
/// many times (the multi-node consolidation search). A solve given hints gives exactly the results of one without.
pub(crate) struct PodHint {
    /// `namespace/name`.
    pub(super) key: String,
    /// The pod's rank in the queue order (spec 3.3) among the pods the hints were computed
    /// for; pods that order does not separate share a rank.
    pub(super) rank: u32,
    /// Every resource the pod requests is in the prepared resource index.
    pub(super) registered: bool,
    /// The pod's scheduling class among the pods the hints were computed for: pods with equal
    /// ids have equal [`PodSignature`](super::classes::PodSignature)s.
    pub(super) class: u32,
    /// No other pod the hints were computed for has the pod's UID (so the pods of a solve
    /// whose hints all say so have distinct UIDs).
    pub(super) unique_uid: bool,
}

/// A pod's queue sort key (spec 3.3) before its creation time and UID: CPU and memory.
fn queue_key(pod: &Pod) -> (Quantity, Quantity) {
    (
        pod.requests.get_or_zero(names::CPU),
        pod.requests.get_or_zero(names::MEMORY),
    )
}

/// The queue order (spec 3.3): cpu desc, memory desc, creation time, uid.
fn queue_order(
    (ca, ma, pa): (Quantity, Quantity, &Pod),
    (cb, mb, pb): (Quantity, Quantity, &Pod),
) -> std::cmp::Ordering {
    cb.cmp(&ca)
        .then_with(|| mb.cmp(&ma))
        .then_with(|| pa.creation_timestamp.cmp(&pb.creation_timestamp))
        .then_with(|| pa.uid.cmp(&pb.uid))
}

/// `queue` (positions in `pods`) in the queue order (spec 3.3). The requests are read once per
/// pod, not once per comparison; with hints (one per pod), their ranks give the same order (both
/// sorts are stable).
pub(super) fn queue_sorted(
    pods: &[&Pod],
    mut queue: Vec<usize>,
    hints: Option<&[&PodHint]>,
) -> Vec<usize> {
    if let Some(hints) = hints {
        queue.sort_by_key(|&i| hints.get(i).map_or(0, |h| h.rank));
        return queue;
    }
    let mut keyed: Vec<(Quantity, Quantity, usize)> = queue
        .iter()
        .map(|&i| {
            let (cpu, memory) = queue_key(pods[i]);
            (cpu, memory, i)
        })
        .collect();
    keyed.sort_by(|&(ca, ma, a), &(cb, mb, b)| queue_order((ca, ma, pods[a]), (cb, mb, pods[b])));
    keyed.into_iter().map(|(_, _, i)| i).collect()
}

impl Prepared<'_> {
    /// The hints of `pods` for solves over this preparation ([`SolveRequest::hints`]): their
    /// keys, their ranks in the queue order among `pods`, and whether the resource index
    /// holds every resource they request.
    pub(crate) fn pod_hints(&self, pods: &[&Pod]) -> Vec<PodHint> {
        let mut keyed: Vec<(Quantity, Quantity, usize)> = pods
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let (cpu, memory) = queue_key(p);
                (cpu, memory, i)
            })
            .collect();
        keyed.sort_by(|&(ca, ma, a), &(cb, mb, b)| {
            queue_order((ca, ma, pods[a]), (cb, mb, pods[b]))
        });
        let mut ranks = vec![0u32; pods.len()];
        let mut rank = 0u32;
        for (n, &(cpu, memory, i)) in keyed.iter().enumerate() {
            if n > 0
                && let Some(&(pc, pm, prev)) = keyed.get(n - 1)
                && queue_order((pc, pm, pods[prev]), (cpu, memory, pods[i])).is_ne()
            {
                rank += 1;
            }
            if let Some(slot) = ranks.get_mut(i) {
                *slot = rank;
            }
        }
        let (classes, _) = super::classes::first_appearance_ids(
            pods.iter().map(|p| super::classes::PodSignature::of(p)),
        );
        let (uids, _) = super::classes::first_appearance_ids(pods.iter().map(|p| p.uid.as_str()));
        let mut carriers = vec![0u32; pods.len()];
        for &u in &uids {
            if let Some(n) = carriers.get_mut(u as usize) {
                *n += 1;
            }
        }
        pods.iter()
            .zip(ranks)
            .zip(classes)
            .zip(uids)
            .map(|(((p, rank), class), uid)| PodHint {
                class,
                unique_uid: carriers.get(uid as usize) == Some(&1),
                key: p.key(),
                rank,
                registered: p
                    .requests
                    .keys()
                    .all(|name| self.index.position(name).is_some()),
            })
            .collect()
    }
}

impl Solver<'_> {
    /// Pod `idx`'s key (`namespace/name`).
    pub(super) fn pod_key(&self, idx: usize) -> String {
        match self.hints.and_then(|h| h.get(idx)) {
            Some(h) => h.key.clone(),
            None => self.pods[idx].key(),
        }
    }
}

//! The `Consolidatable` condition and the pod-event time it is measured from (upstream
//! `nodeclaim/disruption/consolidation.go`, `nodeclaim.disruption` and `nodeclaim.podevents`).
//!
//! A NodeClaim becomes `Consolidatable=True` once its NodePool's `consolidateAfter` has passed
//! since the reference time: `status.lastPodEventTime` when set, else when it initialized
//! ([`is_under_consolidate_after`]). Inside the window, for uninitialized claims and with
//! `consolidateAfter: Never` the condition is removed. Static NodePools are not evaluated.
//! `lastPodEventTime` is written when a non-DaemonSet pod bound to the claim's node is bound,
//! becomes terminal or starts terminating — at most once per [`POD_EVENT_DEDUPE`] (10 s, less
//! than the 15 s validation wait, so re-validation sees the churn).
//!
//! The disruption methods read the condition when present and otherwise apply the same rule on
//! the fly (`disruption::methods`); these functions are for the controller that writes it.

use jiff::SignedDuration;

use crate::api::{NodeClaim, NodePool};
use crate::disruption::cost::is_under_consolidate_after;
use crate::model::{Pod, Timestamp};

use super::conditions::{self, CONSOLIDATABLE, ConditionSet, INITIALIZED};
use super::{add, format_time, parse_time, since};

/// The shortest interval between two writes of a NodeClaim's `lastPodEventTime`.
pub const POD_EVENT_DEDUPE: SignedDuration = SignedDuration::from_secs(10);

/// The `Consolidatable` condition after an evaluation.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ConsolidatableUpdate {
    /// The NodeClaim with its `Consolidatable` condition set or removed.
    pub claim: NodeClaim,
    /// Whether the claim changed.
    pub changed: bool,
    /// Evaluate again at this instant (the end of the `consolidateAfter` window).
    pub requeue_at: Option<Timestamp>,
}

/// Evaluates `Consolidatable` for a NodeClaim of `pool` (upstream
/// `nodeclaim/disruption/consolidation.go`): unchanged for static pools; removed with
/// `consolidateAfter: Never` or when the claim is not `Initialized=True`; removed with a requeue at
/// reference time + `consolidateAfter` while inside the window; else set `True`.
pub fn consolidatable_update(
    pool: &NodePool,
    claim: &NodeClaim,
    now: Timestamp,
) -> ConsolidatableUpdate {
    let mut next = claim.clone();
    let requeue_at = apply_consolidatable(pool, &mut next, now);
    ConsolidatableUpdate {
        changed: next != *claim,
        claim: next,
        requeue_at,
    }
}

/// [`consolidatable_update`] on the claim in place (no copy for a caller that owns it): leaves
/// `claim` as the update's `claim` and returns its `requeue_at`.
pub(crate) fn apply_consolidatable(
    pool: &NodePool,
    claim: &mut NodeClaim,
    now: Timestamp,
) -> Option<Timestamp> {
    if pool.is_static() {
        return None;
    }
    let mut requeue_at = None;
    let consolidate_after = pool.spec.disruption.effective_consolidate_after();
    let window = consolidate_after.duration();
    let initialized = conditions::is_true(&claim.status.conditions, INITIALIZED);
    let consolidatable = match window {
        None => false,
        Some(_) if !initialized => false,
        Some(window) if is_under_consolidate_after(pool, claim, now) => {
            let reference = claim
                .status
                .last_pod_event_time
                .as_deref()
                .and_then(parse_time)
                .or_else(|| {
                    crate::api::find_condition(&claim.status.conditions, INITIALIZED)
                        .and_then(conditions::last_transition)
                });
            requeue_at = reference.map(|r| add(r, window.as_signed_duration()));
            false
        }
        Some(_) => true,
    };
    if consolidatable {
        ConditionSet::for_nodeclaim(claim, now).set_true(CONSOLIDATABLE);
    } else if crate::api::find_condition(&claim.status.conditions, CONSOLIDATABLE).is_some() {
        ConditionSet::for_nodeclaim(claim, now).clear(CONSOLIDATABLE);
    }
    requeue_at
}

/// Records a pod event on the NodeClaim of the pod's node (upstream
/// `nodeclaim/disruption/consolidation.go`, `nodeclaim.podevents`): call it when a pod is bound to
/// the node, becomes terminal or starts terminating. Returns the claim with `lastPodEventTime =
/// now`, or `None` when nothing is written: the pod belongs to a DaemonSet, or the last write is
/// less than [`POD_EVENT_DEDUPE`] old.
pub fn record_pod_event(claim: &NodeClaim, pod: &Pod, now: Timestamp) -> Option<NodeClaim> {
    if pod.is_daemonset_pod() {
        return None;
    }
    let last = claim
        .status
        .last_pod_event_time
        .as_deref()
        .and_then(parse_time);
    if last.is_some_and(|l| since(now, l) < POD_EVENT_DEDUPE) {
        return None;
    }
    let mut next = claim.clone();
    next.status.last_pod_event_time = Some(format_time(now));
    Some(next)
}

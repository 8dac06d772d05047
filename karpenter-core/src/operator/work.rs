//! Per-object reconcile bookkeeping of the operator's loops (the work queues).

use std::collections::{BTreeMap, BTreeSet};

use jiff::SignedDuration;

use crate::model::Timestamp;

use super::ReconcileResult;

/// Per-object reconcile bookkeeping: dirty (look now) or due at a time, and failures for
/// back-off.
#[derive(Debug, Clone, Default)]
pub(super) struct Work {
    pub(super) dirty: BTreeSet<String>,
    pub(super) due: BTreeMap<String, Timestamp>,
    pub(super) failures: BTreeMap<String, u32>,
    /// Names that became due (marked, or a requeue time reached) while not already waiting:
    /// controller-runtime's `workqueue_adds_total`.
    pub(super) adds: u64,
    /// Failures so far.
    pub(super) errors: u64,
}

impl Work {
    pub(super) fn mark(&mut self, name: &str) {
        if self.dirty.insert(name.to_string()) {
            self.adds += 1;
        }
    }

    /// Names waiting to be reconciled at `now` (marked, or due): `workqueue_depth`.
    pub(super) fn depth(&self, now: Timestamp) -> usize {
        self.dirty.len()
            + self
                .due
                .iter()
                .filter(|(n, t)| **t <= now && !self.dirty.contains(*n))
                .count()
    }

    /// The result of the reconcile of `name` that started when `errors` failures were counted.
    pub(super) fn result(&self, name: &str, errors: u64) -> ReconcileResult {
        if self.errors != errors {
            ReconcileResult::Error
        } else if self.dirty.contains(name) || self.due.contains_key(name) {
            ReconcileResult::RequeueAfter
        } else {
            ReconcileResult::Success
        }
    }

    pub(super) fn requeue(&mut self, name: &str, at: Timestamp) {
        let e = self.due.entry(name.to_string()).or_insert(at);
        if at < *e {
            *e = at;
        }
    }

    /// Names to reconcile at `now` (dirty or due), removed from both sets.
    pub(super) fn take(&mut self, now: Timestamp) -> Vec<String> {
        let mut names = std::mem::take(&mut self.dirty);
        let due: Vec<String> = self
            .due
            .iter()
            .filter(|(_, t)| **t <= now)
            .map(|(n, _)| n.clone())
            .collect();
        for n in due {
            self.due.remove(&n);
            if names.insert(n) {
                self.adds += 1;
            }
        }
        names.into_iter().collect()
    }

    pub(super) fn next(&self) -> Option<Timestamp> {
        self.due.values().min().copied()
    }

    /// Back-off after a failure: 1 s doubling, at most 5 min.
    pub(super) fn fail(&mut self, name: &str, now: Timestamp) {
        self.errors += 1;
        let n = self.failures.entry(name.to_string()).or_insert(0);
        let delay =
            SignedDuration::from_secs(1i64 << (*n).min(8)).min(SignedDuration::from_mins(5));
        *n = n.saturating_add(1);
        self.requeue(name, crate::lifecycle::add(now, delay));
    }

    pub(super) fn succeed(&mut self, name: &str) {
        self.failures.remove(name);
    }

    pub(super) fn forget(&mut self, name: &str) {
        self.dirty.remove(name);
        self.due.remove(name);
        self.failures.remove(name);
    }
}

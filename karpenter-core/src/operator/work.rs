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
    /// When each waiting name is due.
    due: BTreeMap<String, Timestamp>,
    /// The same entries ordered by time, so the loops find what is due without a scan.
    by_time: BTreeSet<(Timestamp, String)>,
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
                .by_time
                .iter()
                .take_while(|(t, _)| *t <= now)
                .filter(|(_, n)| !self.dirty.contains(n))
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

    /// Reconcile `name` at `at`, or earlier if it already waits for an earlier time.
    pub(super) fn requeue(&mut self, name: &str, at: Timestamp) {
        match self.due.get_mut(name) {
            Some(e) if *e <= at => {}
            Some(e) => {
                let old = std::mem::replace(e, at);
                self.by_time.remove(&(old, name.to_string()));
                self.by_time.insert((at, name.to_string()));
            }
            None => {
                self.due.insert(name.to_string(), at);
                self.by_time.insert((at, name.to_string()));
            }
        }
    }

    /// Names to reconcile at `now` (dirty or due), removed from both sets.
    pub(super) fn take(&mut self, now: Timestamp) -> Vec<String> {
        let mut names = std::mem::take(&mut self.dirty);
        while self.by_time.first().is_some_and(|(t, _)| *t <= now) {
            let Some((_, n)) = self.by_time.pop_first() else {
                break;
            };
            self.due.remove(&n);
            if names.insert(n) {
                self.adds += 1;
            }
        }
        names.into_iter().collect()
    }

    pub(super) fn next(&self) -> Option<Timestamp> {
        self.by_time.first().map(|(t, _)| *t)
    }

    /// Back-off after a failure: 1 s doubling, at most 5 min. Returns when `name` is due again.
    pub(super) fn fail(&mut self, name: &str, now: Timestamp) -> Timestamp {
        self.errors += 1;
        let n = self.failures.entry(name.to_string()).or_insert(0);
        let delay =
            SignedDuration::from_secs(1i64 << (*n).min(8)).min(SignedDuration::from_mins(5));
        *n = n.saturating_add(1);
        let at = crate::lifecycle::add(now, delay);
        self.requeue(name, at);
        at
    }

    pub(super) fn succeed(&mut self, name: &str) {
        self.failures.remove(name);
    }

    pub(super) fn forget(&mut self, name: &str) {
        self.dirty.remove(name);
        if let Some(t) = self.due.remove(name) {
            self.by_time.remove(&(t, name.to_string()));
        }
        self.failures.remove(name);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: i64) -> Timestamp {
        Timestamp::from_second(s).unwrap()
    }

    #[test]
    fn due_names_come_out_in_name_order_with_the_dirty_ones_and_the_earliest_time_wins() {
        let mut w = Work::default();
        w.requeue("b", t(20));
        w.requeue("a", t(30));
        w.requeue("a", t(10)); // earlier: replaces
        w.requeue("b", t(40)); // later: ignored
        w.requeue("c", t(50));
        w.mark("d");
        assert_eq!(w.next(), Some(t(10)));
        assert_eq!(w.depth(t(25)), 3);
        assert_eq!(w.take(t(25)), ["a", "b", "d"]);
        assert_eq!(w.next(), Some(t(50)));
        assert_eq!(w.take(t(25)), Vec::<String>::new());
        w.forget("c");
        assert_eq!(w.next(), None);
        assert_eq!(w.take(t(100)), Vec::<String>::new());
        // d marked, then a and b due: three adds (c was forgotten before its time).
        assert_eq!(w.adds, 3);
    }
}

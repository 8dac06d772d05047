//! Events that the loops repeat on every pass, published once per object per window, as
//! upstream's event recorder dedupes them (by reason and involved object): `FailedScheduling`
//! once per pod per 5 minutes, `Unconsolidatable` once per object per 15 minutes,
//! `DisruptionBlocked` once per Node or NodeClaim per 2 minutes and per NodePool per minute
//! (a NodePool's budgets can change every minute). Other events are published as they come.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use karpenter_core::lifecycle::{Event, ObjectKind};

/// How often expired entries are dropped (the map holds at most the objects of one window).
const PRUNE_EVERY: Duration = Duration::from_secs(60);

/// The dedupe window of an event (`None`: not deduped).
pub fn window(event: &Event) -> Option<Duration> {
    match (event.reason.as_str(), event.kind) {
        ("FailedScheduling", _) => Some(Duration::from_secs(5 * 60)),
        ("Unconsolidatable", _) => Some(Duration::from_secs(15 * 60)),
        ("DisruptionBlocked", ObjectKind::NodePool) => Some(Duration::from_secs(60)),
        ("DisruptionBlocked", _) => Some(Duration::from_secs(2 * 60)),
        _ => None,
    }
}

/// The events published recently, by reason and involved object, until their window ends.
#[derive(Debug, Default)]
pub struct EventDedupe {
    until: HashMap<(String, ObjectKind, String), Instant>,
    next_prune: Option<Instant>,
}

impl EventDedupe {
    /// Whether `event` is published at `now`: not when the same reason was published for the
    /// same object within its [`window`].
    pub fn admit(&mut self, event: &Event, now: Instant) -> bool {
        if self.next_prune.is_none_or(|t| now >= t) {
            self.until.retain(|_, until| *until > now);
            self.next_prune = Some(now + PRUNE_EVERY);
        }
        let Some(window) = window(event) else {
            return true;
        };
        let key = (event.reason.clone(), event.kind, event.name.clone());
        match self.until.get(&key) {
            Some(until) if *until > now => false,
            _ => {
                self.until.insert(key, now + window);
                true
            }
        }
    }

    /// How many objects are remembered.
    pub fn len(&self) -> usize {
        self.until.len()
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.until.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failed(pod: &str) -> Event {
        Event::warning(ObjectKind::Pod, pod, "FailedScheduling", "no nodepool fits")
    }

    #[test]
    fn failed_scheduling_is_published_once_per_pod_per_five_minutes() {
        let t0 = Instant::now();
        let mut d = EventDedupe::default();
        assert!(d.admit(&failed("default/a"), t0));
        // Every 10 s pass of a pending pod: nothing new for 5 minutes.
        for pass in 1..30 {
            let t = t0 + Duration::from_secs(10 * pass);
            assert!(!d.admit(&failed("default/a"), t), "pass {pass}");
        }
        assert!(
            d.admit(&failed("default/b"), t0 + Duration::from_secs(10)),
            "another pod"
        );
        assert!(d.admit(&failed("default/a"), t0 + Duration::from_secs(300)));
        assert!(!d.admit(&failed("default/a"), t0 + Duration::from_secs(310)));
    }

    #[test]
    fn windows_follow_upstream_and_other_events_pass() {
        let t0 = Instant::now();
        let mut d = EventDedupe::default();
        let blocked_pool = Event::normal(ObjectKind::NodePool, "p", "DisruptionBlocked", "budget");
        assert!(d.admit(&blocked_pool, t0));
        assert!(!d.admit(&blocked_pool, t0 + Duration::from_secs(59)));
        assert!(d.admit(&blocked_pool, t0 + Duration::from_secs(60)));
        let blocked_node = Event::normal(ObjectKind::Node, "n", "DisruptionBlocked", "pdb");
        assert!(d.admit(&blocked_node, t0));
        assert!(!d.admit(&blocked_node, t0 + Duration::from_secs(119)));
        let unconsolidatable = Event::normal(ObjectKind::Node, "n", "Unconsolidatable", "x");
        assert!(d.admit(&unconsolidatable, t0));
        assert!(!d.admit(&unconsolidatable, t0 + Duration::from_secs(899)));
        let launched = Event::normal(ObjectKind::NodeClaim, "c", "Launched", "x");
        assert!(d.admit(&launched, t0) && d.admit(&launched, t0));
    }

    /// The map forgets objects once their window ended: it holds one window's worth.
    #[test]
    fn expired_entries_are_dropped() {
        let t0 = Instant::now();
        let mut d = EventDedupe::default();
        for i in 0..100 {
            assert!(d.admit(&failed(&format!("default/p{i}")), t0));
        }
        assert_eq!(d.len(), 100);
        assert!(d.admit(&failed("default/late"), t0 + Duration::from_secs(301)));
        assert_eq!(d.len(), 1);
    }
}

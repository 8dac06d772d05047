//! Leader election on a `coordination.k8s.io/v1` Lease, as client-go's leader election does it:
//! the leader renews `spec.renewTime` every retry period; another replica takes the Lease over
//! only when it has seen the same holder and renew time for longer than the lease duration by
//! its own clock (so clock skew between replicas does not matter); writes use the object's
//! `resourceVersion`, so of two replicas racing for the Lease exactly one wins. On shutdown the
//! leader releases the Lease (empty holder, 1 s duration) so a successor starts at once.
//!
//! A leader that has not renewed within the *renew deadline* (10 s, shorter than the 15 s lease)
//! stops leading at once, before any other replica may take over; every request of the
//! election is bounded by that deadline, so a hung request cannot keep a replica leading.
//! [`Leadership`] tells, without waiting on anything, whether this replica may still act: the
//! operator checks it before every write and cloud call.
//!
//! [`decide`] is the whole decision, a pure function; [`run`] is the loop around it.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::Api;
use kube::api::PostParams;
use tokio::sync::watch;

pub use karpenter_core::leader::Decision;
use karpenter_core::leader::{self as core_leader, LeaseRecord};

/// The election's view of a Lease: its holder, times, duration (15 s when unset) and
/// transitions.
pub fn record_of(lease: &Lease) -> LeaseRecord {
    let spec = lease.spec.clone().unwrap_or_default();
    LeaseRecord {
        holder: spec.holder_identity.unwrap_or_default(),
        acquire_time: spec.acquire_time.map(|t| t.0),
        renew_time: spec.renew_time.map(|t| t.0),
        lease_duration: jiff::SignedDuration::from_secs(i64::from(
            spec.lease_duration_seconds.unwrap_or(15),
        )),
        transitions: spec.lease_transitions.unwrap_or(0),
    }
}

/// Tracks when this replica last saw the Lease's record change (client-go's "observed time"),
/// by the monotonic clock: [`karpenter_core::leader::Observer`] on the time elapsed since the
/// first observation.
#[derive(Debug, Default)]
pub struct Observer {
    base: Option<Instant>,
    inner: core_leader::Observer,
}

impl Observer {
    /// Records `lease` as seen at `now` and returns for how long its holder and renew time
    /// have been unchanged.
    pub fn observe(&mut self, lease: &Lease, now: Instant) -> Duration {
        let base = *self.base.get_or_insert(now);
        let since = jiff::SignedDuration::try_from(now.saturating_duration_since(base))
            .unwrap_or(jiff::SignedDuration::MAX);
        let at = jiff::Timestamp::UNIX_EPOCH
            .checked_add(since)
            .unwrap_or(jiff::Timestamp::MAX);
        let unchanged = self.inner.observe(&record_of(lease), at);
        Duration::try_from(unchanged).unwrap_or_default()
    }
}

/// The decision for replica `me`, given the Lease read (if any) and how long its record has
/// been unchanged (`unchanged_for`, from [`Observer::observe`]):
/// [`karpenter_core::leader::decide`].
pub fn decide(lease: Option<&Lease>, me: &str, unchanged_for: Duration) -> Decision {
    let unchanged =
        jiff::SignedDuration::try_from(unchanged_for).unwrap_or(jiff::SignedDuration::MAX);
    core_leader::decide(lease.map(record_of).as_ref(), me, unchanged)
}

/// Settings of the election (client-go's names; the controller's defaults are client-go's:
/// 15 s, 10 s, 2 s).
#[derive(Debug, Clone)]
pub struct Config {
    /// Lease name.
    pub name: String,
    /// Lease namespace.
    pub namespace: String,
    /// This replica's identity.
    pub identity: String,
    /// How long a Lease is valid without renewal (what followers wait before taking over).
    pub lease_duration: Duration,
    /// How long the leader keeps leading without a successful renewal; shorter than
    /// `lease_duration`, so a leader stops before a follower may start.
    pub renew_deadline: Duration,
    /// How often the leader renews and followers try to acquire.
    pub retry_period: Duration,
}

impl Config {
    /// Checks that `retry_period < renew_deadline < lease_duration`, as client-go requires
    /// ([`karpenter_core::leader::Timing::check`]).
    pub fn check(&self) -> Result<(), String> {
        let d =
            |d: Duration| jiff::SignedDuration::try_from(d).unwrap_or(jiff::SignedDuration::MAX);
        core_leader::Timing {
            lease_duration: d(self.lease_duration),
            renew_deadline: d(self.renew_deadline),
            retry_period: d(self.retry_period),
        }
        .check()
        .map_err(|e| e.to_string())
    }
}

/// Whether this replica may act, readable at any time without waiting: it leads until the
/// instant its last renewal's renew deadline passes, whether or not the election task has run
/// since (a starved or hung election cannot extend it).
#[derive(Debug, Clone)]
pub struct Leadership {
    state: Arc<LeadershipState>,
}

#[derive(Debug)]
struct LeadershipState {
    always: bool,
    until: Mutex<Option<Instant>>,
}

impl Leadership {
    /// Leadership that never ends (a single replica without leader election).
    pub fn always() -> Leadership {
        Leadership {
            state: Arc::new(LeadershipState {
                always: true,
                until: Mutex::new(None),
            }),
        }
    }

    /// Leadership won by an election: none until [`run`] renews a Lease.
    pub fn elected() -> Leadership {
        Leadership {
            state: Arc::new(LeadershipState {
                always: false,
                until: Mutex::new(None),
            }),
        }
    }

    /// Whether this replica leads now.
    pub fn is_leading(&self) -> bool {
        self.is_leading_at(Instant::now())
    }

    /// Whether this replica leads at `now`.
    pub fn is_leading_at(&self, now: Instant) -> bool {
        self.state.always || self.until().is_some_and(|until| now < until)
    }

    fn until(&self) -> Option<Instant> {
        *self
            .state
            .until
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn set_until(&self, until: Option<Instant>) {
        *self
            .state
            .until
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = until;
    }
}

/// Why leadership ended, or could not start.
#[derive(Debug, thiserror::Error)]
pub enum LeaderError {
    /// The leader could not renew within the renew deadline; another replica may lead soon, so
    /// this one stopped acting (the process exits and restarts as a follower).
    #[error(
        "lost the leader-election Lease {namespace}/{name}: not renewed for {elapsed:?} (renew deadline {deadline:?})"
    )]
    Lost {
        /// Lease namespace.
        namespace: String,
        /// Lease name.
        name: String,
        /// Time since the last successful renewal.
        elapsed: Duration,
        /// The renew deadline.
        deadline: Duration,
    },
    /// The Lease cannot be read or written for a reason that will not heal by itself (its
    /// namespace does not exist, or the controller may not use Leases there).
    #[error(
        "the leader-election Lease {namespace}/{name} cannot be used: {reason}; set \
         LEADER_ELECTION_NAMESPACE (--leader-election-namespace) to a namespace that exists and \
         where the controller may get, create and update Leases, or run one replica with \
         DISABLE_LEADER_ELECTION=true"
    )]
    Unusable {
        /// Lease namespace.
        namespace: String,
        /// Lease name.
        name: String,
        /// What the API server answered.
        reason: String,
    },
}

/// Whether `e` means the Lease cannot be used until someone changes the cluster: a missing
/// namespace (the create answers 404) or a forbidden verb (403).
pub fn is_unusable(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 403 || s.code == 404)
}

fn now_micro() -> MicroTime {
    MicroTime(jiff::Timestamp::now())
}

fn held_spec(cfg: &Config, previous: Option<&LeaseSpec>, acquiring: bool) -> LeaseSpec {
    let prev = previous.cloned().unwrap_or_default();
    let previous_record = previous.map(|spec| {
        record_of(&Lease {
            metadata: ObjectMeta::default(),
            spec: Some(spec.clone()),
        })
    });
    let duration = jiff::SignedDuration::from_secs(cfg.lease_duration.as_secs().max(1) as i64);
    let record = core_leader::held(
        previous_record.as_ref(),
        &cfg.identity,
        duration,
        now_micro().0,
        acquiring,
    );
    LeaseSpec {
        holder_identity: Some(record.holder),
        lease_duration_seconds: Some(record.lease_duration.as_secs() as i32),
        acquire_time: record.acquire_time.map(MicroTime),
        renew_time: record.renew_time.map(MicroTime),
        lease_transitions: Some(record.transitions),
        ..prev
    }
}

/// One round: read the Lease, decide, write. Returns whether this replica holds the Lease.
async fn round(api: &Api<Lease>, cfg: &Config, observer: &mut Observer) -> kube::Result<bool> {
    let current = api.get_opt(&cfg.name).await?;
    let unchanged = current
        .as_ref()
        .map(|l| observer.observe(l, Instant::now()))
        .unwrap_or_default();
    match decide(current.as_ref(), &cfg.identity, unchanged) {
        Decision::Follow { .. } => Ok(false),
        Decision::Create => {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(cfg.name.clone()),
                    namespace: Some(cfg.namespace.clone()),
                    ..ObjectMeta::default()
                },
                spec: Some(held_spec(cfg, None, true)),
            };
            match api.create(&PostParams::default(), &lease).await {
                Ok(_) => Ok(true),
                Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
                Err(e) => Err(e),
            }
        }
        d @ (Decision::Renew | Decision::Acquire) => {
            let mut lease = current.unwrap_or_default();
            lease.spec = Some(held_spec(cfg, lease.spec.as_ref(), d == Decision::Acquire));
            // The resourceVersion read above makes this a compare-and-swap.
            match api.replace(&cfg.name, &PostParams::default(), &lease).await {
                Ok(_) => Ok(true),
                Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
                Err(e) => Err(e),
            }
        }
    }
}

/// Runs the election until `shutdown` turns true, publishing leadership on `leading` and in
/// `leadership`. Returns [`LeaderError::Lost`] when the leader could not renew within the renew
/// deadline, and [`LeaderError::Unusable`] when the first rounds find the Lease unusable;
/// releases the Lease on shutdown if held.
pub async fn run(
    api: Api<Lease>,
    cfg: Config,
    leadership: Leadership,
    leading: watch::Sender<bool>,
    mut shutdown: watch::Receiver<bool>,
) -> Result<(), LeaderError> {
    let mut observer = Observer::default();
    let mut last_renewal: Option<Instant> = None;
    // Until one round succeeds, a 403 or 404 ends the election: the namespace or the RBAC is
    // wrong, and retrying forever would only hide it.
    let mut answered = false;
    loop {
        let started = Instant::now();
        let was_leading = *leading.borrow();
        // Every round ends by the renew deadline (of the last renewal, while leading).
        let limit = match last_renewal.filter(|_| was_leading) {
            Some(t) => (t + cfg.renew_deadline).saturating_duration_since(started),
            None => cfg.renew_deadline,
        };
        let held = match tokio::time::timeout(limit, round(&api, &cfg, &mut observer)).await {
            Ok(Ok(held)) => {
                answered = true;
                held
            }
            Ok(Err(e)) if !answered && is_unusable(&e) => {
                return Err(LeaderError::Unusable {
                    namespace: cfg.namespace.clone(),
                    name: cfg.name.clone(),
                    reason: e.to_string(),
                });
            }
            Ok(Err(e)) => {
                tracing::warn!(error = %e, lease = %cfg.name, "leader election round failed");
                false
            }
            Err(_) => {
                tracing::warn!(timeout = ?limit, lease = %cfg.name, "leader election round timed out");
                false
            }
        };
        if held {
            // Measured from when the round started: the API server may have written the
            // renewal at any moment after that.
            last_renewal = Some(started);
            leadership.set_until(Some(started + cfg.renew_deadline));
            if !was_leading {
                tracing::info!(identity = %cfg.identity, lease = %format!("{}/{}", cfg.namespace, cfg.name), "became the leader");
                let _ = leading.send(true);
            }
        } else if was_leading {
            let elapsed = last_renewal.map(|t| t.elapsed()).unwrap_or_default();
            if elapsed >= cfg.renew_deadline || !leadership.is_leading() {
                leadership.set_until(None);
                let _ = leading.send(false);
                return Err(LeaderError::Lost {
                    namespace: cfg.namespace.clone(),
                    name: cfg.name.clone(),
                    elapsed,
                    deadline: cfg.renew_deadline,
                });
            }
        }
        // The next round: one retry period after this one started, but never past the renew
        // deadline while leading.
        let mut wait = cfg.retry_period.saturating_sub(started.elapsed());
        if let Some(t) = last_renewal.filter(|_| *leading.borrow()) {
            wait = wait.min((t + cfg.renew_deadline).saturating_duration_since(Instant::now()));
        }
        let stop = tokio::select! {
            _ = tokio::time::sleep(wait) => false,
            _ = shutdown.wait_for(|s| *s) => true,
        };
        if stop {
            let held = *leading.borrow();
            if held {
                let _ = tokio::time::timeout(cfg.renew_deadline, release(&api, &cfg)).await;
                leadership.set_until(None);
                let _ = leading.send(false);
            }
            return Ok(());
        }
    }
}

/// Gives the Lease up (empty holder, 1 s duration) if this replica still holds it.
async fn release(api: &Api<Lease>, cfg: &Config) {
    let Ok(Some(mut lease)) = api.get_opt(&cfg.name).await else {
        return;
    };
    let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
    if spec.holder_identity.as_deref() != Some(cfg.identity.as_str()) {
        return;
    }
    spec.holder_identity = None;
    spec.lease_duration_seconds = Some(1);
    spec.renew_time = Some(now_micro());
    match api.replace(&cfg.name, &PostParams::default(), &lease).await {
        Ok(_) => tracing::info!(lease = %cfg.name, "released the leader-election Lease"),
        Err(e) => tracing::warn!(error = %e, "releasing the leader-election Lease failed"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lease(holder: Option<&str>, renew: &str) -> Lease {
        Lease {
            metadata: ObjectMeta::default(),
            spec: Some(LeaseSpec {
                holder_identity: holder.map(str::to_string),
                lease_duration_seconds: Some(15),
                renew_time: Some(MicroTime(renew.parse().unwrap())),
                ..LeaseSpec::default()
            }),
        }
    }

    #[test]
    fn a_missing_lease_is_created_and_our_own_is_renewed() {
        assert_eq!(decide(None, "a", Duration::ZERO), Decision::Create);
        let l = lease(Some("a"), "2026-01-01T00:00:00Z");
        assert_eq!(
            decide(Some(&l), "a", Duration::from_secs(99)),
            Decision::Renew
        );
    }

    #[test]
    fn another_holder_is_followed_until_it_stops_renewing() {
        let l = lease(Some("b"), "2026-01-01T00:00:00Z");
        assert_eq!(
            decide(Some(&l), "a", Duration::from_secs(10)),
            Decision::Follow {
                holder: "b".to_string()
            }
        );
        assert_eq!(
            decide(Some(&l), "a", Duration::from_secs(16)),
            Decision::Acquire
        );
        let released = lease(None, "2026-01-01T00:00:00Z");
        assert_eq!(
            decide(Some(&released), "a", Duration::ZERO),
            Decision::Acquire
        );
    }

    #[test]
    fn leadership_ends_at_the_renew_deadline_without_the_election_running() {
        let l = Leadership::elected();
        let t0 = Instant::now();
        assert!(!l.is_leading_at(t0), "no leadership before a renewal");
        l.set_until(Some(t0 + Duration::from_secs(10)));
        assert!(l.is_leading_at(t0 + Duration::from_secs(9)));
        assert!(!l.is_leading_at(t0 + Duration::from_secs(10)));
        assert!(Leadership::always().is_leading_at(t0 + Duration::from_secs(3600)));
    }

    #[test]
    fn the_renew_deadline_lies_between_the_retry_period_and_the_lease_duration() {
        let cfg = |lease, deadline, retry| Config {
            name: "l".into(),
            namespace: "n".into(),
            identity: "i".into(),
            lease_duration: Duration::from_secs(lease),
            renew_deadline: Duration::from_secs(deadline),
            retry_period: Duration::from_secs(retry),
        };
        assert!(cfg(15, 10, 2).check().is_ok());
        assert!(
            cfg(15, 15, 2)
                .check()
                .unwrap_err()
                .contains("lease duration")
        );
        assert!(
            cfg(15, 10, 10)
                .check()
                .unwrap_err()
                .contains("retry period")
        );
    }

    #[test]
    fn the_observer_restarts_its_clock_when_the_record_changes() {
        let mut o = Observer::default();
        let t0 = Instant::now();
        let l1 = lease(Some("b"), "2026-01-01T00:00:00Z");
        assert_eq!(o.observe(&l1, t0), Duration::ZERO);
        assert_eq!(
            o.observe(&l1, t0 + Duration::from_secs(5)),
            Duration::from_secs(5)
        );
        let l2 = lease(Some("b"), "2026-01-01T00:00:02Z");
        assert_eq!(o.observe(&l2, t0 + Duration::from_secs(6)), Duration::ZERO);
        assert_eq!(
            o.observe(&l2, t0 + Duration::from_secs(8)),
            Duration::from_secs(2)
        );
    }
}

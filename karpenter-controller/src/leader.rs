//! Leader election on a `coordination.k8s.io/v1` Lease, as client-go's leader election does it:
//! the leader renews `spec.renewTime` every renew period; another replica takes the Lease over
//! only when it has seen the same holder and renew time for longer than the lease duration by
//! its own clock (so clock skew between replicas does not matter); writes use the object's
//! `resourceVersion`, so of two replicas racing for the Lease exactly one wins. On shutdown the
//! leader releases the Lease (empty holder, 1 s duration) so a successor starts at once.
//!
//! [`decide`] is the whole decision, a pure function; [`run`] is the loop around it.

use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::Api;
use kube::api::PostParams;
use tokio::sync::watch;

/// What this replica does with the Lease it just read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// No Lease exists: create it, holding it.
    Create,
    /// We hold it: renew.
    Renew,
    /// Nobody holds it, or the holder stopped renewing: take it over.
    Acquire,
    /// Someone else holds it and renews: stay a follower.
    Follow {
        /// The current holder.
        holder: String,
    },
}

/// Tracks when this replica last saw the Lease's record change (client-go's "observed time").
#[derive(Debug, Default)]
pub struct Observer {
    last: Option<(Option<String>, Option<String>, Instant)>,
}

impl Observer {
    /// Records `lease` as seen at `now` and returns for how long its holder and renew time
    /// have been unchanged.
    pub fn observe(&mut self, lease: &Lease, now: Instant) -> Duration {
        let spec = lease.spec.as_ref();
        let holder = spec.and_then(|s| s.holder_identity.clone());
        let renew = spec
            .and_then(|s| s.renew_time.as_ref())
            .map(|t| t.0.to_string());
        match &self.last {
            Some((h, r, at)) if *h == holder && *r == renew => now.saturating_duration_since(*at),
            _ => {
                self.last = Some((holder, renew, now));
                Duration::ZERO
            }
        }
    }
}

/// The decision for replica `me`, given the Lease read (if any) and how long its record has
/// been unchanged (`unchanged_for`, from [`Observer::observe`]).
pub fn decide(lease: Option<&Lease>, me: &str, unchanged_for: Duration) -> Decision {
    let Some(lease) = lease else {
        return Decision::Create;
    };
    let spec = lease.spec.clone().unwrap_or_default();
    let holder = spec.holder_identity.unwrap_or_default();
    if holder == me {
        return Decision::Renew;
    }
    if holder.is_empty() {
        return Decision::Acquire;
    }
    let duration = Duration::from_secs(spec.lease_duration_seconds.unwrap_or(15).max(1) as u64);
    if unchanged_for > duration {
        Decision::Acquire
    } else {
        Decision::Follow { holder }
    }
}

/// Settings of the election.
#[derive(Debug, Clone)]
pub struct Config {
    /// Lease name.
    pub name: String,
    /// Lease namespace.
    pub namespace: String,
    /// This replica's identity.
    pub identity: String,
    /// How long a Lease is valid without renewal.
    pub lease_duration: Duration,
    /// How often the leader renews (and followers retry).
    pub renew_period: Duration,
}

/// Why leadership ended.
#[derive(Debug, thiserror::Error)]
pub enum LeaderError {
    /// The leader could not renew within the lease duration; another replica may lead now, so
    /// this one must stop acting (the process exits and restarts as a follower).
    #[error("lost the leader-election Lease {namespace}/{name}: not renewed for {elapsed:?}")]
    Lost {
        /// Lease namespace.
        namespace: String,
        /// Lease name.
        name: String,
        /// Time since the last successful renewal.
        elapsed: Duration,
    },
}

fn now_micro() -> MicroTime {
    MicroTime(jiff::Timestamp::now())
}

fn held_spec(cfg: &Config, previous: Option<&LeaseSpec>, acquiring: bool) -> LeaseSpec {
    let prev = previous.cloned().unwrap_or_default();
    let now = now_micro();
    LeaseSpec {
        holder_identity: Some(cfg.identity.clone()),
        lease_duration_seconds: Some(cfg.lease_duration.as_secs().max(1) as i32),
        acquire_time: if acquiring {
            Some(now.clone())
        } else {
            prev.acquire_time.clone()
        },
        renew_time: Some(now),
        lease_transitions: Some(
            prev.lease_transitions.unwrap_or(0) + i32::from(acquiring && previous.is_some()),
        ),
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

/// Runs the election until `shutdown` turns true, publishing leadership on `leading`. Returns
/// an error when leadership is lost (not renewed within the lease duration); releases the Lease
/// on shutdown if held.
pub async fn run(
    api: Api<Lease>,
    cfg: Config,
    leading: watch::Sender<bool>,
    mut shutdown: watch::Receiver<bool>,
) -> Result<(), LeaderError> {
    let mut observer = Observer::default();
    let mut last_renewal: Option<Instant> = None;
    loop {
        let held = match round(&api, &cfg, &mut observer).await {
            Ok(held) => held,
            Err(e) => {
                tracing::warn!(error = %e, lease = %cfg.name, "leader election round failed");
                false
            }
        };
        let was_leading = *leading.borrow();
        if held {
            last_renewal = Some(Instant::now());
            if !was_leading {
                tracing::info!(identity = %cfg.identity, lease = %format!("{}/{}", cfg.namespace, cfg.name), "became the leader");
                let _ = leading.send(true);
            }
        } else if was_leading {
            let elapsed = last_renewal.map(|t| t.elapsed()).unwrap_or_default();
            if elapsed > cfg.lease_duration {
                let _ = leading.send(false);
                return Err(LeaderError::Lost {
                    namespace: cfg.namespace.clone(),
                    name: cfg.name.clone(),
                    elapsed,
                });
            }
        }
        let stop = tokio::select! {
            _ = tokio::time::sleep(cfg.renew_period) => false,
            _ = shutdown.wait_for(|s| *s) => true,
        };
        if stop {
            let held = *leading.borrow();
            if held {
                release(&api, &cfg).await;
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

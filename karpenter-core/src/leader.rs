//! Leader election on a Lease, as client-go's leader election does it, without I/O: the record
//! a Lease holds ([`LeaseRecord`]), what a replica does with the record it just read
//! ([`decide`]), how long a record has been unchanged by the reader's own clock ([`Observer`]),
//! the record a replica writes ([`held`], [`released`]) and until when a replica may act
//! ([`Tenure`]). The controller's election loop and the simulator's replicas are shells around
//! these, so both follow the same rules:
//!
//! - the leader renews every retry period; another replica takes the Lease over only when it has
//!   seen the same holder and renew time for longer than the lease duration by its own clock (so
//!   clock skew between replicas does not matter); writes are compare-and-swap, so of two
//!   replicas racing for the Lease exactly one wins;
//! - a leader leads until its last successful renewal's round started plus the *renew
//!   deadline*, shorter than the lease duration, so it stops before any other replica may start.
//!
//! ```
//! use jiff::SignedDuration;
//! use karpenter_core::leader::{Decision, Observer, Tenure, Timing, decide, held};
//! use karpenter_core::model::Timestamp;
//!
//! let timing = Timing::default();
//! let t0: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
//! // Replica `a` finds no Lease, creates it and leads until the renew deadline.
//! assert_eq!(decide(None, "a", SignedDuration::ZERO), Decision::Create);
//! let record = held(None, "a", timing.lease_duration, t0, true);
//! let mut tenure = Tenure::default();
//! tenure.renewed(t0, timing.renew_deadline);
//! assert!(tenure.is_leading_at(t0 + SignedDuration::from_secs(9)));
//! assert!(!tenure.is_leading_at(t0 + SignedDuration::from_secs(10)));
//! // Replica `b` follows until it has seen the same record for longer than the lease.
//! let mut observer = Observer::default();
//! assert_eq!(observer.observe(&record, t0), SignedDuration::ZERO);
//! let later = observer.observe(&record, t0 + SignedDuration::from_secs(16));
//! assert_eq!(decide(Some(&record), "b", later), Decision::Acquire);
//! ```

use jiff::SignedDuration;

use crate::model::Timestamp;

/// What a Lease says (the fields of `coordination.k8s.io/v1` `LeaseSpec` the election uses).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseRecord {
    /// The replica holding it; empty when released or never held.
    pub holder: String,
    /// When the current holder acquired it.
    pub acquire_time: Option<Timestamp>,
    /// When the holder last renewed it.
    pub renew_time: Option<Timestamp>,
    /// How long it is valid without renewal (what followers wait before taking over).
    pub lease_duration: SignedDuration,
    /// How many times it changed hands.
    pub transitions: i32,
}

/// What a replica does with the Lease it just read.
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

/// The decision for replica `me`, given the Lease read (if any) and how long its record has
/// been unchanged by this replica's clock (`unchanged_for`, from [`Observer::observe`]). A
/// lease duration under one second counts as one second.
pub fn decide(record: Option<&LeaseRecord>, me: &str, unchanged_for: SignedDuration) -> Decision {
    let Some(record) = record else {
        return Decision::Create;
    };
    if record.holder == me {
        return Decision::Renew;
    }
    if record.holder.is_empty() {
        return Decision::Acquire;
    }
    let duration = record.lease_duration.max(SignedDuration::from_secs(1));
    if unchanged_for > duration {
        Decision::Acquire
    } else {
        Decision::Follow {
            holder: record.holder.clone(),
        }
    }
}

/// Tracks when this replica last saw the Lease's record change (client-go's "observed time"):
/// only the holder and the renew time count, and only this replica's clock.
#[derive(Debug, Clone, Default)]
pub struct Observer {
    last: Option<(String, Option<Timestamp>, Timestamp)>,
}

impl Observer {
    /// Records `record` as seen at `now` and returns for how long its holder and renew time
    /// have been unchanged (zero when they just changed, or on the first call).
    pub fn observe(&mut self, record: &LeaseRecord, now: Timestamp) -> SignedDuration {
        match &self.last {
            Some((holder, renew, at))
                if *holder == record.holder && *renew == record.renew_time =>
            {
                now.duration_since(*at).max(SignedDuration::ZERO)
            }
            _ => {
                self.last = Some((record.holder.clone(), record.renew_time, now));
                SignedDuration::ZERO
            }
        }
    }
}

/// The record replica `me` writes at `now` to create (`previous` is `None`), renew or acquire
/// (`acquiring`) the Lease: itself as holder, renewed now, acquired now when acquiring (else
/// the previous acquire time), and one more transition when it takes over an existing Lease.
pub fn held(
    previous: Option<&LeaseRecord>,
    me: &str,
    lease_duration: SignedDuration,
    now: Timestamp,
    acquiring: bool,
) -> LeaseRecord {
    let prev_transitions = previous.map_or(0, |p| p.transitions);
    LeaseRecord {
        holder: me.to_string(),
        acquire_time: if acquiring {
            Some(now)
        } else {
            previous.and_then(|p| p.acquire_time)
        },
        renew_time: Some(now),
        lease_duration,
        transitions: prev_transitions + i32::from(acquiring && previous.is_some()),
    }
}

/// The record a leader writes at `now` to give the Lease up on shutdown: no holder and a
/// one-second duration, so a successor starts at once.
pub fn released(previous: &LeaseRecord, now: Timestamp) -> LeaseRecord {
    LeaseRecord {
        holder: String::new(),
        renew_time: Some(now),
        lease_duration: SignedDuration::from_secs(1),
        ..previous.clone()
    }
}

/// Settings of the election (client-go's names and defaults: 15 s, 10 s, 2 s).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timing {
    /// How long a Lease is valid without renewal.
    pub lease_duration: SignedDuration,
    /// How long the leader keeps leading without a successful renewal; shorter than
    /// `lease_duration`, so a leader stops before a follower may start.
    pub renew_deadline: SignedDuration,
    /// How often the leader renews and followers try to acquire.
    pub retry_period: SignedDuration,
}

impl Default for Timing {
    fn default() -> Self {
        Timing {
            lease_duration: SignedDuration::from_secs(15),
            renew_deadline: SignedDuration::from_secs(10),
            retry_period: SignedDuration::from_secs(2),
        }
    }
}

/// Election settings that break client-go's rule `retry period < renew deadline < lease
/// duration`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TimingError {
    /// The renew deadline is not shorter than the lease duration.
    #[error(
        "the renew deadline ({renew_deadline:?}) must be shorter than the lease duration ({lease_duration:?})"
    )]
    DeadlineNotShorterThanLease {
        /// The renew deadline.
        renew_deadline: SignedDuration,
        /// The lease duration.
        lease_duration: SignedDuration,
    },
    /// The retry period is not shorter than the renew deadline.
    #[error(
        "the retry period ({retry_period:?}) must be shorter than the renew deadline ({renew_deadline:?})"
    )]
    RetryNotShorterThanDeadline {
        /// The retry period.
        retry_period: SignedDuration,
        /// The renew deadline.
        renew_deadline: SignedDuration,
    },
}

impl Timing {
    /// Checks that `retry_period < renew_deadline < lease_duration`, as client-go requires.
    pub fn check(&self) -> Result<(), TimingError> {
        if self.renew_deadline >= self.lease_duration {
            return Err(TimingError::DeadlineNotShorterThanLease {
                renew_deadline: self.renew_deadline,
                lease_duration: self.lease_duration,
            });
        }
        if self.retry_period >= self.renew_deadline {
            return Err(TimingError::RetryNotShorterThanDeadline {
                retry_period: self.retry_period,
                renew_deadline: self.renew_deadline,
            });
        }
        Ok(())
    }
}

/// Until when a replica leads: the start of the round of its last successful renewal plus the
/// renew deadline (the API server may have written the renewal at any moment after the round
/// started). A replica may act at `now` only if `now` is before that instant, whether or not
/// its election has run since.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tenure {
    until: Option<Timestamp>,
}

impl Tenure {
    /// A renewal succeeded in a round that started at `round_started`.
    pub fn renewed(&mut self, round_started: Timestamp, renew_deadline: SignedDuration) {
        self.until = round_started.checked_add(renew_deadline).ok();
    }

    /// Leadership ends now (lost, released, or the process stopped).
    pub fn end(&mut self) {
        self.until = None;
    }

    /// The instant leadership ends, if this replica has led.
    pub fn until(&self) -> Option<Timestamp> {
        self.until
    }

    /// Whether this replica leads at `now`.
    pub fn is_leading_at(&self, now: Timestamp) -> bool {
        self.until.is_some_and(|until| now < until)
    }
}

#[cfg(test)]
mod tests;

use super::*;

fn t(s: &str) -> Timestamp {
    s.parse().unwrap()
}

fn record(holder: &str, renew: &str) -> LeaseRecord {
    LeaseRecord {
        holder: holder.to_string(),
        acquire_time: None,
        renew_time: Some(t(renew)),
        lease_duration: SignedDuration::from_secs(15),
        transitions: 0,
    }
}

const fn secs(s: i64) -> SignedDuration {
    SignedDuration::from_secs(s)
}

#[test]
fn a_missing_lease_is_created_and_our_own_is_renewed() {
    assert_eq!(decide(None, "a", secs(0)), Decision::Create);
    let r = record("a", "2026-01-01T00:00:00Z");
    assert_eq!(decide(Some(&r), "a", secs(99)), Decision::Renew);
}

#[test]
fn another_holder_is_followed_until_it_stops_renewing() {
    let r = record("b", "2026-01-01T00:00:00Z");
    assert_eq!(
        decide(Some(&r), "a", secs(15)),
        Decision::Follow {
            holder: "b".to_string()
        }
    );
    assert_eq!(decide(Some(&r), "a", secs(16)), Decision::Acquire);
    assert_eq!(
        decide(Some(&record("", "2026-01-01T00:00:00Z")), "a", secs(0)),
        Decision::Acquire
    );
}

#[test]
fn the_observer_restarts_its_clock_when_the_holder_or_renew_time_changes() {
    let mut o = Observer::default();
    let t0 = t("2030-01-01T00:00:00Z");
    let r1 = record("b", "2026-01-01T00:00:00Z");
    assert_eq!(o.observe(&r1, t0), secs(0));
    assert_eq!(o.observe(&r1, t0 + secs(5)), secs(5));
    let r2 = record("b", "2026-01-01T00:00:02Z");
    assert_eq!(o.observe(&r2, t0 + secs(6)), secs(0));
    assert_eq!(o.observe(&r2, t0 + secs(8)), secs(2));
    let r3 = record("c", "2026-01-01T00:00:02Z");
    assert_eq!(o.observe(&r3, t0 + secs(9)), secs(0));
}

#[test]
fn held_records_count_transitions_only_when_taken_over() {
    let t0 = t("2026-01-01T00:00:00Z");
    let created = held(None, "a", secs(15), t0, true);
    assert_eq!(created.holder, "a");
    assert_eq!(created.acquire_time, Some(t0));
    assert_eq!(created.transitions, 0);
    let renewed = held(Some(&created), "a", secs(15), t0 + secs(2), false);
    assert_eq!(renewed.acquire_time, Some(t0));
    assert_eq!(renewed.renew_time, Some(t0 + secs(2)));
    assert_eq!(renewed.transitions, 0);
    let taken = held(Some(&renewed), "b", secs(15), t0 + secs(30), true);
    assert_eq!(taken.acquire_time, Some(t0 + secs(30)));
    assert_eq!(taken.transitions, 1);
    let gone = released(&taken, t0 + secs(31));
    assert_eq!(gone.holder, "");
    assert_eq!(gone.lease_duration, secs(1));
    assert_eq!(gone.transitions, 1);
}

#[test]
fn a_tenure_ends_at_the_renew_deadline_of_the_last_renewal() {
    let t0 = t("2026-01-01T00:00:00Z");
    let mut tenure = Tenure::default();
    assert!(!tenure.is_leading_at(t0), "no leadership before a renewal");
    tenure.renewed(t0, secs(10));
    assert!(tenure.is_leading_at(t0 + secs(9)));
    assert!(!tenure.is_leading_at(t0 + secs(10)));
    tenure.renewed(t0 + secs(2), secs(10));
    assert!(tenure.is_leading_at(t0 + secs(11)));
    tenure.end();
    assert!(!tenure.is_leading_at(t0 + secs(3)));
}

#[test]
fn the_renew_deadline_lies_between_the_retry_period_and_the_lease_duration() {
    let timing = |lease, deadline, retry| Timing {
        lease_duration: secs(lease),
        renew_deadline: secs(deadline),
        retry_period: secs(retry),
    };
    assert_eq!(Timing::default(), timing(15, 10, 2));
    assert!(timing(15, 10, 2).check().is_ok());
    assert!(matches!(
        timing(15, 15, 2).check(),
        Err(TimingError::DeadlineNotShorterThanLease { .. })
    ));
    assert!(matches!(
        timing(15, 10, 10).check(),
        Err(TimingError::RetryNotShorterThanDeadline { .. })
    ));
}

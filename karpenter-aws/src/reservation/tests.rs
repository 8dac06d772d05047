use std::collections::{BTreeMap, BTreeSet};

use super::*;

fn r(id: &str, itype: &str, zone: &str) -> Reservation {
    Reservation {
        id: id.into(),
        instance_type: itype.into(),
        availability_zone: zone.into(),
        owner_id: "111122223333".into(),
        instance_match_criteria: "targeted".into(),
        reservation_type: "default".into(),
        state: "active".into(),
        available_instance_count: 2,
        ..Reservation::default()
    }
}

fn term(f: impl FnOnce(&mut CapacityReservationSelectorTerm)) -> CapacityReservationSelectorTerm {
    let mut t = CapacityReservationSelectorTerm::default();
    f(&mut t);
    t
}

#[test]
fn terms_select_by_id_or_by_tags_owner_and_match_criteria() {
    let mut tagged = r("cr-2", "m5.large", "us-east-1a");
    tagged.tags = BTreeMap::from([("team".into(), "ml".into())]);
    let mut open = r("cr-3", "m5.large", "us-east-1b");
    open.instance_match_criteria = "open".into();
    open.tags = tagged.tags.clone();
    let mut expired = r("cr-4", "m5.large", "us-east-1a");
    expired.state = "expired".into();
    let all = vec![r("cr-1", "c5.large", "us-east-1a"), tagged, open, expired];
    let ids = |terms: &[CapacityReservationSelectorTerm]| {
        select(terms, &all)
            .into_iter()
            .map(|r| r.id)
            .collect::<Vec<_>>()
    };
    assert_eq!(ids(&[term(|t| t.id = Some("cr-1".into()))]), ["cr-1"]);
    let by_tag = term(|t| t.tags = BTreeMap::from([("team".into(), "ml".into())]));
    assert_eq!(ids(std::slice::from_ref(&by_tag)), ["cr-2", "cr-3"]);
    let targeted = term(|t| {
        t.tags = BTreeMap::from([("team".into(), "*".into())]);
        t.instance_match_criteria = Some("targeted".into());
    });
    assert_eq!(ids(&[targeted]), ["cr-2"]);
    let other_owner = term(|t| {
        t.tags = BTreeMap::from([("team".into(), "ml".into())]);
        t.owner_id = Some("999999999999".into());
    });
    assert!(ids(&[other_owner]).is_empty());
    // Terms are ORed, each reservation once; expired ones are never selected.
    assert_eq!(
        ids(&[by_tag.clone(), by_tag, term(|t| t.id = Some("cr-4".into()))]),
        ["cr-2", "cr-3"]
    );
}

#[test]
fn capacity_blocks_read_expiring_forty_minutes_before_their_end() {
    let now: jiff::Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
    let mut block = r("cr-b", "p5.48xlarge", "us-east-1a");
    block.reservation_type = "capacity-block".into();
    block.end_date = Some(now + jiff::SignedDuration::from_mins(39));
    let mut later = block.clone();
    later.id = "cr-c".into();
    later.end_date = Some(now + jiff::SignedDuration::from_mins(41));
    let mut odcr = r("cr-d", "m5.large", "us-east-1a");
    odcr.end_date = block.end_date;
    odcr.interruptible = true;
    let s = status(&[block, later, odcr], now);
    let states: Vec<(&str, Option<&str>)> = s
        .iter()
        .map(|x| (x.id.as_str(), x.state.as_deref()))
        .collect();
    assert_eq!(
        states,
        [
            ("cr-b", Some("expiring")),
            ("cr-c", Some("active")),
            ("cr-d", Some("active"))
        ]
    );
    assert_eq!(s[0].reservation_type.as_deref(), Some("capacity-block"));
    assert_eq!(s[2].interruptible, Some(true));
    assert_eq!(s[0].end_time.as_deref(), Some("2026-01-01T00:39:00Z"));
}

#[test]
fn reserved_offerings_are_nearly_free_and_unavailable_when_empty_expiring_or_out_of_zone() {
    let now: jiff::Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
    let mut expiring = r("cr-x", "m5.large", "us-east-1a");
    expiring.reservation_type = "capacity-block".into();
    expiring.end_date = Some(now);
    let st = status(
        &[
            r("cr-a", "m5.large", "us-east-1a"),
            r("cr-b", "m5.large", "us-east-1b"),
            r("cr-e", "m5.large", "us-east-1a"),
            r("cr-o", "c5.large", "us-east-1a"),
            expiring,
        ],
        now,
    );
    let zones: BTreeSet<String> = ["us-east-1a".to_string()].into();
    let left = |id: &str| if id == "cr-e" { 0 } else { 3 };
    let o = offerings(&st, "m5.large", 0.096, &zones, left);
    let view: Vec<(&str, bool, u32)> = o
        .iter()
        .map(|o| {
            (
                o.reservation_id().unwrap(),
                o.available,
                o.reservation_capacity,
            )
        })
        .collect();
    assert_eq!(
        view,
        [
            ("cr-a", true, 3),
            ("cr-b", false, 3),
            ("cr-e", false, 0),
            ("cr-x", false, 3)
        ]
    );
    assert!(o.iter().all(|o| o.capacity_type() == "reserved"));
    assert!((o[0].price - 0.096 / 1e7).abs() < 1e-15);
    let req = o[0].requirements().get(CAPACITY_RESERVATION_ID).unwrap();
    assert!(req.has("cr-a"));
}

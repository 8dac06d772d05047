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
        select(terms, &all, "2026-01-01T00:00:00Z".parse().unwrap())
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

#[test]
fn ended_and_unknown_reservations_are_not_selected() {
    let now: jiff::Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
    let mut ended = r("cr-1", "m5.large", "us-east-1a");
    ended.end_date = Some(now);
    let mut later = r("cr-2", "m5.large", "us-east-1a");
    later.end_date = Some(now + jiff::SignedDuration::from_secs(1));
    let mut odd_criteria = r("cr-3", "m5.large", "us-east-1a");
    odd_criteria.instance_match_criteria = "something-new".into();
    let mut odd_type = r("cr-4", "m5.large", "us-east-1a");
    odd_type.reservation_type = "something-new".into();
    let all = [ended, later, odd_criteria, odd_type];
    let any = term(|t| t.tags = BTreeMap::new());
    let terms: Vec<_> = ["cr-1", "cr-2", "cr-3", "cr-4"]
        .iter()
        .map(|id| term(|t| t.id = Some((*id).into())))
        .chain([any])
        .collect();
    let ids: Vec<String> = select(&terms, &all, now)
        .into_iter()
        .map(|r| r.id)
        .collect();
    assert_eq!(ids, ["cr-2"]);
}

#[test]
fn each_term_becomes_describe_queries_for_active_reservations() {
    let terms = [
        term(|t| t.id = Some("cr-1".into())),
        term(|t| {
            t.tags = BTreeMap::from([("team".into(), "ml".into()), ("any".into(), "*".into())]);
            t.owner_id = Some("111122223333".into());
            t.instance_match_criteria = Some("targeted".into());
        }),
        term(|t| t.id = Some("cr-1".into())),
    ];
    let q = queries(&terms);
    let f = |n: &str, v: &str| (n.to_string(), vec![v.to_string()]);
    assert_eq!(
        q,
        [
            Query {
                ids: Vec::new(),
                filters: vec![
                    f("state", "active"),
                    f("owner-id", "111122223333"),
                    f("tag-key", "any"),
                    f("tag:team", "ml"),
                    f("instance-match-criteria", "targeted"),
                ],
            },
            Query {
                ids: vec!["cr-1".into()],
                filters: vec![f("state", "active")],
            },
        ]
    );
}

#[test]
fn availability_follows_syncs_launches_terminations_and_failures() {
    let t0: jiff::Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
    let later = t0 + jiff::SignedDuration::from_secs(10);
    let mut a = Availability::new();
    assert_eq!(a.available("cr-a"), 0);
    let mut res = r("cr-a", "m5.large", "us-east-1a");
    res.available_instance_count = 2;
    a.sync(std::slice::from_ref(&res), later);
    // A launch older than the sync was counted by EC2 already.
    a.mark_launched("cr-a", t0);
    assert_eq!(a.available("cr-a"), 2);
    a.mark_launched("cr-a", later);
    assert_eq!(a.available("cr-a"), 1);
    a.mark_terminated("cr-a");
    assert_eq!(a.available("cr-a"), 2);
    a.mark_unavailable("cr-a");
    assert_eq!(a.available("cr-a"), 0);
    a.mark_launched("cr-a", later);
    assert_eq!(a.available("cr-a"), 0);
    // Unknown reservations stay unknown.
    a.mark_terminated("cr-z");
    assert_eq!(a.available("cr-z"), 0);
}

#[test]
fn reserved_offerings_carry_the_type_labels_and_plain_ones_exclude_them() {
    let now: jiff::Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
    let mut block = r("cr-b", "p5.48xlarge", "us-east-1a");
    block.reservation_type = "capacity-block".into();
    block.interruptible = true;
    let st = status(&[block], now);
    let zones: BTreeSet<String> = ["us-east-1a".to_string()].into();
    let o = offerings(&st, "p5.48xlarge", 98.0, &zones, |_| 1);
    let label = |o: &Offering, k: &str| o.labels().get(k).cloned().flatten();
    assert_eq!(
        label(&o[0], CAPACITY_RESERVATION_TYPE).as_deref(),
        Some("capacity-block")
    );
    assert_eq!(
        label(&o[0], CAPACITY_RESERVATION_INTERRUPTIBLE).as_deref(),
        Some("true")
    );
    let plain = without_reservation(Offering::new("us-east-1a", "on-demand", 1.0));
    for k in [
        CAPACITY_RESERVATION_ID,
        CAPACITY_RESERVATION_TYPE,
        CAPACITY_RESERVATION_INTERRUPTIBLE,
    ] {
        assert_eq!(
            plain.requirements().get(k).map(|q| q.operator()),
            Some(karpenter_core::requirements::Operator::DoesNotExist),
            "{k}"
        );
    }
    assert_eq!(market_type("capacity-block", false), Some("capacity-block"));
    assert_eq!(
        market_type("default", true),
        Some("interruptible-capacity-reservation")
    );
    assert_eq!(market_type("default", false), None);
    assert_eq!(
        target_capacity_type("capacity-block", true),
        "capacity-block"
    );
    assert_eq!(target_capacity_type("default", true), "reserved-capacity");
    assert_eq!(target_capacity_type("default", false), "on-demand");
}

#[test]
fn a_launch_picks_one_kind_one_capacity_block_and_one_reservation_per_pool() {
    let offering =
        |id: &str, zone: &str, kind: &str, interruptible: bool, price: f64, left: u32| {
            Offering::reserved(zone, id, left, price, CAPACITY_RESERVATION_ID)
                .with_label(CAPACITY_RESERVATION_TYPE, Some(kind))
                .with_label(
                    CAPACITY_RESERVATION_INTERRUPTIBLE,
                    Some(if interruptible { "true" } else { "false" }),
                )
        };
    let a = offering("cr-a", "us-east-1a", "default", false, 1e-8, 1);
    let b = offering("cr-b", "us-east-1a", "default", false, 1e-8, 5);
    let c = offering("cr-c", "us-east-1b", "default", false, 1e-8, 1);
    let i = offering("cr-i", "us-east-1a", "default", true, 1e-9, 9);
    let blk1 = offering("cr-k1", "us-east-1a", "capacity-block", false, 2e-9, 1);
    let blk2 = offering("cr-k2", "us-east-1b", "capacity-block", false, 3e-9, 1);
    let spot = Offering::new("us-east-1a", "spot", 1e-10);
    let ids = |picked: Vec<(&str, &Offering)>| -> Vec<String> {
        picked
            .into_iter()
            .map(|(t, o)| format!("{t}/{}", o.reservation_id().unwrap()))
            .collect()
    };
    // The cheapest kind wins: the interruptible reservation here.
    let all = [
        ("m5.large", &a),
        ("m5.large", &i),
        ("m5.large", &spot),
        ("p5.48xlarge", &blk1),
    ];
    assert_eq!(ids(pick_for_launch(&all)), ["m5.large/cr-i"]);
    // Capacity blocks: one offering only, the cheapest.
    let blocks = [
        ("p5.48xlarge", &blk2),
        ("p5.48xlarge", &blk1),
        ("m5.large", &b),
    ];
    assert_eq!(ids(pick_for_launch(&blocks)), ["p5.48xlarge/cr-k1"]);
    // Default reservations: per type and zone the one with the most left.
    let defaults = [
        ("m5.large", &a),
        ("m5.large", &b),
        ("m5.large", &c),
        ("c5.large", &a),
    ];
    assert_eq!(
        ids(pick_for_launch(&defaults)),
        ["m5.large/cr-b", "m5.large/cr-c", "c5.large/cr-a"]
    );
    assert!(pick_for_launch(&[("m5.large", &spot)]).is_empty());
}

#[test]
fn claims_in_expiring_capacity_blocks_are_deleted_once() {
    let now: jiff::Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
    let mut block = r("cr-b", "p5.48xlarge", "us-east-1a");
    block.reservation_type = "capacity-block".into();
    block.end_date = Some(now + jiff::SignedDuration::from_mins(40));
    let mut later = block.clone();
    later.id = "cr-l".into();
    later.end_date = Some(now + jiff::SignedDuration::from_mins(41));
    let st = status(&[block, later], now);
    let labelled =
        |id: &str| BTreeMap::from([(CAPACITY_RESERVATION_ID.to_string(), id.to_string())]);
    let (b, l, none) = (labelled("cr-b"), labelled("cr-l"), BTreeMap::new());
    let claims = [
        ("in-block", &b, false),
        ("in-block-deleting", &b, true),
        ("in-later-block", &l, false),
        ("on-demand", &none, false),
    ];
    assert_eq!(expiring_claims(claims, &st), ["in-block"]);
}

#[test]
fn an_ended_reservation_demotes_its_claims_to_on_demand() {
    let labels = BTreeMap::from([
        (
            "karpenter.sh/capacity-type".to_string(),
            "reserved".to_string(),
        ),
        (CAPACITY_RESERVATION_ID.to_string(), "cr-a".to_string()),
        (CAPACITY_RESERVATION_TYPE.to_string(), "default".to_string()),
        (
            CAPACITY_RESERVATION_INTERRUPTIBLE.to_string(),
            "false".to_string(),
        ),
    ]);
    let none = BTreeSet::new();
    let patch = demotion_patch(&labels, "on-demand", &none).unwrap();
    assert_eq!(
        patch,
        serde_json::json!({"metadata": {"labels": {
            "karpenter.sh/capacity-type": "on-demand",
            CAPACITY_RESERVATION_ID: null,
            CAPACITY_RESERVATION_TYPE: null,
            CAPACITY_RESERVATION_INTERRUPTIBLE: null,
        }}})
    );
    // Still reserved by EC2, or the reservation still active: nothing changes.
    assert_eq!(demotion_patch(&labels, "reserved", &none), None);
    let active = BTreeSet::from(["cr-a".to_string()]);
    assert_eq!(demotion_patch(&labels, "on-demand", &active), None);
    // Never the other way round.
    let od = BTreeMap::from([(
        "karpenter.sh/capacity-type".to_string(),
        "on-demand".to_string(),
    )]);
    assert_eq!(demotion_patch(&od, "on-demand", &none), None);
}

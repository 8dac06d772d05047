//! Capacity reservations as data: which reservations `capacityReservationSelectorTerms`
//! select among what DescribeCapacityReservations returned, the node class's
//! `status.capacityReservations`, and the reserved offerings of an instance type, as upstream
//! (`pkg/providers/capacityreservation`, `offering/reserved_capacity_resolver.go`).
//!
//! The SDK shell (`sdk::nodeclass`, `sdk::provider`) describes the reservations of each class's
//! terms ([`queries`]), keeps their instance counts in an [`Availability`] shared by the
//! node-class loop and the provider, writes [`status`] and offers [`offerings`].

use std::collections::BTreeMap;

use karpenter_core::model::Offering;

use crate::nodeclass::{CapacityReservationSelectorTerm, StatusCapacityReservation};

/// `karpenter.k8s.aws/capacity-reservation-id`: the reservation-id label of reserved offerings
/// and of nodes launched into a reservation.
pub const CAPACITY_RESERVATION_ID: &str = "karpenter.k8s.aws/capacity-reservation-id";
/// `karpenter.k8s.aws/capacity-reservation-type`: `default` or `capacity-block`.
pub const CAPACITY_RESERVATION_TYPE: &str = "karpenter.k8s.aws/capacity-reservation-type";
/// `karpenter.k8s.aws/capacity-reservation-interruptible`: `true` or `false`.
pub const CAPACITY_RESERVATION_INTERRUPTIBLE: &str =
    "karpenter.k8s.aws/capacity-reservation-interruptible";
/// A capacity block reads `expiring` this long before its end (upstream: 40 minutes).
pub const CAPACITY_BLOCK_EXPIRY_WINDOW: jiff::SignedDuration = jiff::SignedDuration::from_mins(40);
/// Reserved offerings cost the on-demand price divided by this (upstream), so the scheduler
/// prefers them to anything else.
pub const RESERVED_PRICE_DIVISOR: f64 = 10_000_000.0;

/// One DescribeCapacityReservations entry (the fields Karpenter reads).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reservation {
    /// `CapacityReservationId`.
    pub id: String,
    /// `InstanceType`.
    pub instance_type: String,
    /// `AvailabilityZone`.
    pub availability_zone: String,
    /// `OwnerId`.
    pub owner_id: String,
    /// `InstanceMatchCriteria`: `open` or `targeted`.
    pub instance_match_criteria: String,
    /// `ReservationType`: `default` or `capacity-block`.
    pub reservation_type: String,
    /// `Interruptible`.
    pub interruptible: bool,
    /// `State` (`active`, `expired`, ...).
    pub state: String,
    /// `EndDate`, when the reservation ends.
    pub end_date: Option<jiff::Timestamp>,
    /// `AvailableInstanceCount`.
    pub available_instance_count: u32,
    /// `Tags`.
    pub tags: std::collections::BTreeMap<String, String>,
}

/// Whether `term` selects `r`: its id, else every tag (`*` matches any value), owner and
/// match criteria it names.
pub fn matches(term: &CapacityReservationSelectorTerm, r: &Reservation) -> bool {
    if let Some(id) = &term.id {
        return *id == r.id;
    }
    term.tags
        .iter()
        .all(|(k, v)| r.tags.get(k).is_some_and(|have| v == "*" || have == v))
        && term.owner_id.as_ref().is_none_or(|o| *o == r.owner_id)
        && term
            .instance_match_criteria
            .as_ref()
            .is_none_or(|c| *c == r.instance_match_criteria)
}

/// The active reservations any of `terms` selects, by id, each once; those whose end date
/// is not after `now` are dropped (as upstream), and so are those with an instance match
/// criteria or reservation type upstream does not know (it logs them as unparsable).
pub fn select(
    terms: &[CapacityReservationSelectorTerm],
    all: &[Reservation],
    now: jiff::Timestamp,
) -> Vec<Reservation> {
    let mut out: Vec<Reservation> = all
        .iter()
        .filter(|r| {
            r.state == "active"
                && r.end_date.is_none_or(|end| end > now)
                && matches!(r.instance_match_criteria.as_str(), "open" | "targeted")
                && matches!(r.reservation_type.as_str(), "default" | "capacity-block")
                && terms.iter().any(|t| matches(t, r))
        })
        .cloned()
        .collect();
    out.sort_by(|a, b| a.id.cmp(&b.id));
    out.dedup_by(|a, b| a.id == b.id);
    out
}

/// `status.capacityReservations` of the selected reservations at `now`: capacity blocks read
/// `expiring` within [`CAPACITY_BLOCK_EXPIRY_WINDOW`] of their end, everything else `active`.
pub fn status(selected: &[Reservation], now: jiff::Timestamp) -> Vec<StatusCapacityReservation> {
    selected
        .iter()
        .map(|r| {
            let expiring = r.reservation_type == "capacity-block"
                && r.end_date
                    .is_some_and(|end| end.duration_since(now) <= CAPACITY_BLOCK_EXPIRY_WINDOW);
            StatusCapacityReservation {
                availability_zone: r.availability_zone.clone(),
                end_time: r.end_date.map(|t| t.to_string()),
                id: r.id.clone(),
                instance_match_criteria: r.instance_match_criteria.clone(),
                instance_type: r.instance_type.clone(),
                owner_id: r.owner_id.clone(),
                reservation_type: Some(r.reservation_type.clone()),
                interruptible: Some(r.interruptible),
                state: Some(if expiring { "expiring" } else { "active" }.to_string()),
            }
        })
        .collect()
}

/// The reserved offerings of `instance_type` among the class's reservations: one per
/// reservation of that type, priced at the on-demand price / [`RESERVED_PRICE_DIVISOR`],
/// with `available(id)` instances left; unavailable when none is left, the reservation is
/// expiring or its zone is not one of `zones` (the type's zones with a subnet). Each carries
/// the reservation's id, [`CAPACITY_RESERVATION_TYPE`] and
/// [`CAPACITY_RESERVATION_INTERRUPTIBLE`] as labels (requirements `In [value]`).
pub fn offerings(
    reservations: &[StatusCapacityReservation],
    instance_type: &str,
    on_demand_price: f64,
    zones: &std::collections::BTreeSet<String>,
    available: impl Fn(&str) -> u32,
) -> Vec<Offering> {
    reservations
        .iter()
        .filter(|r| r.instance_type == instance_type)
        .map(|r| {
            let left = available(&r.id);
            let usable = left > 0
                && r.state.as_deref() != Some("expiring")
                && zones.contains(&r.availability_zone);
            Offering::reserved(
                &r.availability_zone,
                &r.id,
                left,
                on_demand_price / RESERVED_PRICE_DIVISOR,
                CAPACITY_RESERVATION_ID,
            )
            .with_label(
                CAPACITY_RESERVATION_TYPE,
                Some(r.reservation_type.as_deref().unwrap_or("default")),
            )
            .with_label(
                CAPACITY_RESERVATION_INTERRUPTIBLE,
                Some(if r.interruptible == Some(true) {
                    "true"
                } else {
                    "false"
                }),
            )
            .with_available(usable)
        })
        .collect()
}

/// A non-reserved offering as the AWS provider lists it: it requires the three reservation
/// labels not to exist (upstream's base offerings), so a pod selecting a reservation never
/// lands on spot or on-demand capacity.
pub fn without_reservation(o: Offering) -> Offering {
    o.with_reservation_label(Some(CAPACITY_RESERVATION_ID))
        .with_label(CAPACITY_RESERVATION_TYPE, None)
        .with_label(CAPACITY_RESERVATION_INTERRUPTIBLE, None)
}

/// The market type of a launch into a reservation (`InstanceMarketOptions.MarketType`):
/// `capacity-block` for capacity blocks, `interruptible-capacity-reservation` for
/// interruptible reservations, none otherwise.
pub fn market_type(reservation_type: &str, interruptible: bool) -> Option<&'static str> {
    if reservation_type == "capacity-block" {
        Some("capacity-block")
    } else if interruptible {
        Some("interruptible-capacity-reservation")
    } else {
        None
    }
}

/// CreateFleet's `DefaultTargetCapacityType` of a launch into a reservation (upstream):
/// `capacity-block` for capacity blocks, `reserved-capacity` for interruptible reservations,
/// else `on-demand`.
pub fn target_capacity_type(reservation_type: &str, interruptible: bool) -> &'static str {
    if reservation_type == "capacity-block" {
        "capacity-block"
    } else if interruptible {
        "reserved-capacity"
    } else {
        "on-demand"
    }
}

/// The reserved offerings a launch may use among the usable ones `(instance type, offering)`
/// (upstream's launch filters): the kind of reservation (default, capacity block,
/// interruptible default) whose cheapest offering is cheapest wins (ties in that order); among
/// capacity blocks only the single cheapest offering is kept (CreateFleet takes one capacity
/// block per request); per instance type and zone, the reservation with the most instances
/// left (CreateFleet takes one offering per pool). In input order otherwise.
pub fn pick_for_launch<'a>(usable: &[(&'a str, &'a Offering)]) -> Vec<(&'a str, &'a Offering)> {
    let kind = |o: &Offering| -> (String, bool) {
        let label = |k: &str| o.labels().get(k).cloned().flatten().unwrap_or_default();
        (
            label(CAPACITY_RESERVATION_TYPE),
            label(CAPACITY_RESERVATION_INTERRUPTIBLE) == "true",
        )
    };
    let rank = |k: &(String, bool)| match (k.0.as_str(), k.1) {
        ("capacity-block", _) => 1,
        (_, true) => 2,
        _ => 0,
    };
    let reserved: Vec<(&str, &Offering)> = usable
        .iter()
        .copied()
        .filter(|(_, o)| o.is_reserved() && o.reservation_id().is_some())
        .collect();
    let Some(best) = reserved
        .iter()
        .map(|(_, o)| (o.price, kind(o)))
        .min_by(|a, b| {
            a.0.total_cmp(&b.0)
                .then_with(|| rank(&a.1).cmp(&rank(&b.1)))
        })
        .map(|(_, k)| k)
    else {
        return Vec::new();
    };
    let of_kind: Vec<(&str, &Offering)> = reserved
        .into_iter()
        .filter(|(_, o)| kind(o) == best)
        .collect();
    if best.0 == "capacity-block" {
        return of_kind
            .into_iter()
            .min_by(|a, b| a.1.price.total_cmp(&b.1.price))
            .into_iter()
            .collect();
    }
    let mut out: Vec<(&str, &Offering)> = Vec::new();
    for (t, o) in of_kind {
        match out
            .iter_mut()
            .find(|(t2, o2)| *t2 == t && o2.zone() == o.zone())
        {
            Some(slot) if slot.1.reservation_capacity < o.reservation_capacity => *slot = (t, o),
            Some(_) => {}
            None => out.push((t, o)),
        }
    }
    out
}

/// One DescribeCapacityReservations call of a class's terms (upstream's query per term).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Query {
    /// `CapacityReservationIds` (a term with an id; no `MaxResults` then).
    pub ids: Vec<String>,
    /// `Filters`: name and values, `state=active` first.
    pub filters: Vec<(String, Vec<String>)>,
}

/// The DescribeCapacityReservations calls of `terms`, each once: a term's id is a query of
/// its own; its tags (`*` as `tag-key`), owner and match criteria are another. Every query
/// asks for `state=active`.
pub fn queries(terms: &[CapacityReservationSelectorTerm]) -> Vec<Query> {
    let active = || vec![("state".to_string(), vec!["active".to_string()])];
    let mut out = Vec::new();
    for t in terms {
        if let Some(id) = &t.id {
            out.push(Query {
                ids: vec![id.clone()],
                filters: active(),
            });
        }
        if !t.tags.is_empty() || t.instance_match_criteria.is_some() {
            let mut filters = active();
            if let Some(owner) = &t.owner_id {
                filters.push(("owner-id".into(), vec![owner.clone()]));
            }
            for (k, v) in &t.tags {
                if v == "*" {
                    filters.push(("tag-key".into(), vec![k.clone()]));
                } else {
                    filters.push((format!("tag:{k}"), vec![v.clone()]));
                }
            }
            if let Some(c) = &t.instance_match_criteria {
                filters.push(("instance-match-criteria".into(), vec![c.clone()]));
            }
            out.push(Query {
                ids: Vec::new(),
                filters,
            });
        }
    }
    out.sort();
    out.dedup();
    out
}

/// How many instances each reservation has left, as last described and adjusted by launches
/// and terminations since (upstream's availability cache), with the clock injected.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Availability {
    entries: BTreeMap<String, (u32, jiff::Timestamp)>,
}

impl Availability {
    /// An empty cache: every reservation has 0 left until described.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records what DescribeCapacityReservations said at `now`.
    pub fn sync(&mut self, described: &[Reservation], now: jiff::Timestamp) {
        for r in described {
            self.entries
                .insert(r.id.clone(), (r.available_instance_count, now));
        }
    }

    /// Instances left in `id` (0 for a reservation never described).
    pub fn available(&self, id: &str) -> u32 {
        self.entries.get(id).map_or(0, |e| e.0)
    }

    /// A launch into `id` at `now` takes one instance, unless the last sync is newer than the
    /// launch (EC2 counted it already).
    pub fn mark_launched(&mut self, id: &str, now: jiff::Timestamp) {
        if let Some(e) = self.entries.get_mut(id)
            && e.1 <= now
        {
            e.0 = e.0.saturating_sub(1);
        }
    }

    /// A terminated instance of `id` gives one back (over-estimating briefly rather than
    /// under-estimating, as upstream).
    pub fn mark_terminated(&mut self, id: &str) {
        if let Some(e) = self.entries.get_mut(id) {
            e.0 = e.0.saturating_add(1);
        }
    }

    /// A reservation that could not launch (insufficient capacity) or whose instances are
    /// being interrupted has nothing left until the next sync.
    pub fn mark_unavailable(&mut self, id: &str) {
        if let Some(e) = self.entries.get_mut(id) {
            e.0 = 0;
        }
    }
}

#[cfg(test)]
mod tests;

/// The NodeClaims to delete because their capacity block is about to end (upstream's
/// `capacityreservation.expiration` controller): those labelled with a reservation id whose
/// status entry (from [`status`]) reads `expiring`, not already being deleted. `claims` are
/// (name, labels, being deleted).
pub fn expiring_claims<'a>(
    claims: impl IntoIterator<Item = (&'a str, &'a BTreeMap<String, String>, bool)>,
    reservations: &[StatusCapacityReservation],
) -> Vec<String> {
    claims
        .into_iter()
        .filter(|(_, labels, deleting)| {
            !deleting
                && labels.get(CAPACITY_RESERVATION_ID).is_some_and(|id| {
                    reservations
                        .iter()
                        .any(|r| r.id == *id && r.state.as_deref() == Some("expiring"))
                })
        })
        .map(|(name, _, _)| name.to_string())
        .collect()
}

/// The label change of a NodeClaim (or its Node) launched into a reservation that has ended
/// (upstream's `capacityreservation.capacitytype` controller): when `labels` say `reserved`,
/// EC2 reports the instance as `on-demand` now and the reservation is no longer active
/// (`active_ids` from DescribeCapacityReservations), a merge patch of `metadata.labels`:
/// `karpenter.sh/capacity-type: on-demand` and the three reservation labels removed (`null`).
/// Only reserved to on-demand: Karpenter never promotes an instance to reserved.
pub fn demotion_patch(
    labels: &BTreeMap<String, String>,
    cloud_capacity_type: &str,
    active_ids: &std::collections::BTreeSet<String>,
) -> Option<serde_json::Value> {
    let reserved = labels
        .get(karpenter_core::labels::CAPACITY_TYPE)
        .map(String::as_str)
        == Some(karpenter_core::labels::CAPACITY_TYPE_RESERVED);
    let still_active = labels
        .get(CAPACITY_RESERVATION_ID)
        .is_some_and(|id| active_ids.contains(id));
    if !reserved || cloud_capacity_type != "on-demand" || still_active {
        return None;
    }
    let mut patch = serde_json::Map::new();
    patch.insert(
        karpenter_core::labels::CAPACITY_TYPE.to_string(),
        "on-demand".into(),
    );
    for key in [
        CAPACITY_RESERVATION_ID,
        CAPACITY_RESERVATION_TYPE,
        CAPACITY_RESERVATION_INTERRUPTIBLE,
    ] {
        patch.insert(key.to_string(), serde_json::Value::Null);
    }
    Some(serde_json::json!({"metadata": {"labels": patch}}))
}

//! Capacity reservations as data: which reservations `capacityReservationSelectorTerms`
//! select among what DescribeCapacityReservations returned, the node class's
//! `status.capacityReservations`, and the reserved offerings of an instance type, as upstream
//! (`pkg/providers/capacityreservation`, `offering/reserved_capacity_resolver.go`).
//!
//! Not wired into the SDK shell yet: the provider does not call DescribeCapacityReservations,
//! so classes get no reserved offerings (see `docs/conformance.md`).

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

/// The active reservations any of `terms` selects, by id, each once.
pub fn select(terms: &[CapacityReservationSelectorTerm], all: &[Reservation]) -> Vec<Reservation> {
    let mut out: Vec<Reservation> = all
        .iter()
        .filter(|r| r.state == "active" && terms.iter().any(|t| matches(t, r)))
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
/// expiring or its zone is not one of `zones` (the type's zones with a subnet).
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
            .with_available(usable)
        })
        .collect()
}

#[cfg(test)]
mod tests;

//! Capacity reservations in the provider (upstream's `ReservedCapacityResolver` and the
//! reserved half of its instance provider): the class's reserved offerings in its instance
//! types, the launch into a reservation, and what the launch's outcome tells the reservation
//! availability.

use super::*;
use crate::launch::FleetDecision;
use crate::launch::template::ReservationTarget;
use crate::nodeclass::StatusCapacityReservation;
use crate::reservation::{self, CAPACITY_RESERVATION_ID};
use crate::sdk::reservation::SharedAvailability;

impl AwsCloudProvider {
    /// The reservation availability the provider reads; the node-class resolver syncs it
    /// ([`crate::sdk::nodeclass::NodeClassResolver::with_reservation_availability`]).
    pub fn reservation_availability(&self) -> SharedAvailability {
        Arc::clone(&self.reservations)
    }

    /// `types` with the reserved offerings of `class`'s `status.capacityReservations`
    /// appended ([`reservation::offerings`]: priced at the on-demand price / 10,000,000, with
    /// the instances the availability says are left, in the zones the type is offered in).
    pub(super) fn apply_reservations(
        &self,
        mut types: Vec<Arc<InstanceType>>,
        class: &EC2NodeClass,
    ) -> Vec<Arc<InstanceType>> {
        let reservations = &class.status.capacity_reservations;
        if reservations.is_empty() {
            return types;
        }
        let availability = crate::sdk::reservation::lock(&self.reservations).clone();
        let prices = lock(&self.prices).clone();
        for it in &mut types {
            if !reservations.iter().any(|r| r.instance_type == it.name()) {
                continue;
            }
            let zones: BTreeSet<String> = it
                .offerings
                .iter()
                .filter(|o| !o.is_reserved())
                .map(|o| o.zone().to_string())
                .collect();
            // Without a price the offering still launches (upstream), at 0.
            let on_demand = prices.on_demand_price(it.name()).unwrap_or(0.0);
            let extra = reservation::offerings(reservations, it.name(), on_demand, &zones, |id| {
                availability.available(id)
            });
            if extra.is_empty() {
                continue;
            }
            // The type's capacity-type requirement (computed from its offerings when it was
            // built) gains `reserved`, as upstream's types list the reserved capacity type.
            let mut requirements = it.requirements().clone();
            if let Some(ct) = requirements.get(karpenter_core::labels::CAPACITY_TYPE)
                && !ct.has(karpenter_core::labels::CAPACITY_TYPE_RESERVED)
            {
                let mut values: Vec<String> = ct.values().map(str::to_string).collect();
                values.push(karpenter_core::labels::CAPACITY_TYPE_RESERVED.to_string());
                requirements.remove(karpenter_core::labels::CAPACITY_TYPE);
                requirements.add(karpenter_core::requirements::Requirement::new(
                    karpenter_core::labels::CAPACITY_TYPE,
                    karpenter_core::requirements::Operator::In,
                    values,
                ));
            }
            let mut offerings = it.offerings.clone();
            offerings.extend(extra);
            *it = Arc::new(InstanceType::new(
                it.name(),
                requirements,
                offerings,
                it.capacity().clone(),
                it.overhead().clone(),
            ));
        }
        types
    }
}

/// The launch offerings of a `reserved` launch: [`reservation::pick_for_launch`] among the
/// usable reserved offerings of `candidates`, each with its reservation id.
pub(super) fn launch_offerings(
    candidates: &[&Arc<InstanceType>],
    usable: impl Fn(&karpenter_core::model::Offering) -> bool,
) -> Vec<Offering> {
    let pairs: Vec<(&str, &karpenter_core::model::Offering)> = candidates
        .iter()
        .flat_map(|it| {
            it.offerings
                .iter()
                .filter(|o| o.is_reserved() && usable(o))
                .map(move |o| (it.name(), o))
        })
        .collect();
    reservation::pick_for_launch(&pairs)
        .into_iter()
        .map(|(t, o)| Offering {
            instance_type: t.to_string(),
            zone: o.zone().to_string(),
            capacity_type: "reserved".to_string(),
            price: o.price,
            reservation_id: o.reservation_id().map(str::to_string),
        })
        .collect()
}

fn status_of<'a>(class: &'a EC2NodeClass, id: &str) -> Option<&'a StatusCapacityReservation> {
    class
        .status
        .capacity_reservations
        .iter()
        .find(|r| r.id == id)
}

/// The launch templates of a reserved launch among `instance_types` (one AMI's): one per
/// reservation of `offerings` whose type is among them, with the reservation as the
/// template's target (`capacity-reservations-only`, and the market type of capacity blocks and
/// interruptible reservations).
pub(super) fn targets(
    offerings: &[Offering],
    instance_types: &[String],
    class: &EC2NodeClass,
) -> Vec<(ReservationTarget, Vec<String>)> {
    let mut out: BTreeMap<String, (ReservationTarget, Vec<String>)> = BTreeMap::new();
    for o in offerings {
        let Some(id) = &o.reservation_id else {
            continue;
        };
        if !instance_types.contains(&o.instance_type) {
            continue;
        }
        let market_type = status_of(class, id).and_then(|r| {
            reservation::market_type(
                r.reservation_type.as_deref().unwrap_or("default"),
                r.interruptible == Some(true),
            )
        });
        let entry = out.entry(id.clone()).or_insert_with(|| {
            (
                ReservationTarget {
                    id: id.clone(),
                    market_type: market_type.map(str::to_string),
                },
                Vec::new(),
            )
        });
        if !entry.1.contains(&o.instance_type) {
            entry.1.push(o.instance_type.clone());
        }
    }
    out.into_values().collect()
}

/// CreateFleet's `DefaultTargetCapacityType` for a reserved launch of `offerings` (they are of
/// one kind, [`reservation::pick_for_launch`]).
pub(super) fn target_capacity_type(offerings: &[Offering], class: &EC2NodeClass) -> String {
    offerings
        .iter()
        .find_map(|o| status_of(class, o.reservation_id.as_deref()?))
        .map_or("on-demand", |r| {
            reservation::target_capacity_type(
                r.reservation_type.as_deref().unwrap_or("default"),
                r.interruptible == Some(true),
            )
        })
        .to_string()
}

/// The reservation of `offerings` launched as (or failing for) `instance_type` in `zone`.
pub(super) fn reservation_of<'a>(
    offerings: &'a [Offering],
    instance_type: &str,
    zone: &str,
) -> Option<&'a str> {
    offerings
        .iter()
        .find(|o| o.instance_type == instance_type && o.zone == zone)
        .and_then(|o| o.reservation_id.as_deref())
}

impl AwsCloudProvider {
    /// A reserved launch's capacity errors mark their reservations as having nothing left
    /// (upstream), instead of entries in the unavailable-offerings cache.
    pub(super) fn reservations_failed(&self, decision: &mut FleetDecision, offerings: &[Offering]) {
        let failed = std::mem::take(&mut decision.unavailable_offerings);
        let mut availability = crate::sdk::reservation::lock(&self.reservations);
        for k in failed {
            if let Some(id) = reservation_of(offerings, &k.instance_type, &k.zone) {
                tracing::debug!(reservation = id, instance_type = %k.instance_type, zone = %k.zone, "marking capacity reservation unavailable");
                availability.mark_unavailable(id);
            }
        }
    }

    /// A launch into reservation `id` takes one of its instances.
    pub(super) fn reservation_launched(&self, id: &str) {
        crate::sdk::reservation::lock(&self.reservations).mark_launched(id, jiff::Timestamp::now());
    }

    /// The instance of a NodeClaim launched into a reservation is gone: the reservation has
    /// one more instance left (upstream marks it on a delete that finds nothing to delete).
    pub(super) fn reservation_terminated(&self, node_claim: &NodeClaim) {
        if let Some(id) = node_claim.metadata.labels.get(CAPACITY_RESERVATION_ID) {
            crate::sdk::reservation::lock(&self.reservations).mark_terminated(id);
        }
    }
}

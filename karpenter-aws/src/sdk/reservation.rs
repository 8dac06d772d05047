//! DescribeCapacityReservations for a class's `capacityReservationSelectorTerms` and the
//! reservation availability the node-class loop and the provider share.
//!
//! [`describe`] runs one call per [`crate::reservation::queries`] entry (paginated, 1000 at a
//! time; an id EC2 does not know is skipped, as upstream), merges the answers by id and syncs
//! the [`SharedAvailability`]. The node-class loop writes `status.capacityReservations` from
//! them; the provider reads the class's status and the availability to list reserved
//! offerings, and marks launches, terminations and failed reservations in it.

use std::sync::{Arc, Mutex};

use aws_sdk_ec2::types as ec2;

use super::{AwsClients, convert, error_code};
use crate::nodeclass::CapacityReservationSelectorTerm;
use crate::reservation::{Availability, Reservation, queries};

/// The reservation availability shared by the node-class loop (which syncs it from
/// DescribeCapacityReservations) and the provider (which reads it and marks launches in it).
pub type SharedAvailability = Arc<Mutex<Availability>>;

/// A new, empty [`SharedAvailability`].
pub fn shared_availability() -> SharedAvailability {
    Arc::new(Mutex::new(Availability::new()))
}

/// Locks `a`, a poisoned lock included (the cache holds plain counts).
pub fn lock(a: &SharedAvailability) -> std::sync::MutexGuard<'_, Availability> {
    a.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// One DescribeCapacityReservations entry as [`Reservation`].
pub fn reservation(r: &ec2::CapacityReservation) -> Reservation {
    Reservation {
        id: r.capacity_reservation_id().unwrap_or_default().to_string(),
        instance_type: r.instance_type().unwrap_or_default().to_string(),
        availability_zone: r.availability_zone().unwrap_or_default().to_string(),
        owner_id: r.owner_id().unwrap_or_default().to_string(),
        instance_match_criteria: r
            .instance_match_criteria()
            .map(|c| c.as_str().to_string())
            .unwrap_or_default(),
        reservation_type: r
            .reservation_type()
            .map_or("default", |t| t.as_str())
            .to_string(),
        interruptible: r.interruptible().unwrap_or(false),
        state: r
            .state()
            .map(|s| s.as_str().to_string())
            .unwrap_or_default(),
        end_date: r.end_date().and_then(|d| {
            jiff::Timestamp::new(d.secs(), i32::try_from(d.subsec_nanos()).unwrap_or(0)).ok()
        }),
        available_instance_count: r
            .available_instance_count()
            .and_then(|n| u32::try_from(n).ok())
            .unwrap_or(0),
        tags: convert::tags(r.tags()),
    }
}

/// The reservations `terms` describe (no call without terms), each once, in id order; their
/// instance counts are synced into `availability` at `now`. `Err` is the call's error code and
/// message.
pub async fn describe(
    clients: &AwsClients,
    terms: &[CapacityReservationSelectorTerm],
    availability: &SharedAvailability,
    now: jiff::Timestamp,
) -> Result<Vec<Reservation>, String> {
    let mut out = std::collections::BTreeMap::new();
    for q in queries(terms) {
        let mut token: Option<String> = None;
        loop {
            let filters = q
                .filters
                .iter()
                .map(|(name, values)| {
                    ec2::Filter::builder()
                        .name(name)
                        .set_values(Some(values.clone()))
                        .build()
                })
                .collect();
            let mut call = clients
                .ec2
                .describe_capacity_reservations()
                .set_filters(Some(filters))
                .set_next_token(token.clone());
            if q.ids.is_empty() {
                call = call.max_results(1000);
            } else {
                call = call.set_capacity_reservation_ids(Some(q.ids.clone()));
            }
            let page = match call.send().await {
                Ok(p) => p,
                Err(e) => {
                    let (code, message) = error_code(&e);
                    if code.starts_with("InvalidCapacityReservationId") {
                        break;
                    }
                    return Err(format!("DescribeCapacityReservations: {code} {message}")
                        .trim()
                        .to_string());
                }
            };
            let found: Vec<Reservation> = page
                .capacity_reservations()
                .iter()
                .map(reservation)
                .collect();
            lock(availability).sync(&found, now);
            for r in found {
                out.insert(r.id.clone(), r);
            }
            token = page
                .next_token()
                .filter(|t| !t.is_empty())
                .map(str::to_string);
            if token.is_none() {
                break;
            }
        }
    }
    Ok(out.into_values().collect())
}

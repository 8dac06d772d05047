//! NodeOverlays applied to the instance types of NodePools, as upstream's NodeOverlay controller
//! and instance-type store do (`pkg/controllers/nodeoverlay`), as one pure function:
//! [`apply`] takes the overlays and every NodePool's instance types and returns the adjusted
//! instance types and each overlay's outcome (its `ValidationSucceeded` condition).
//!
//! The rules:
//!
//! 1. Overlays are taken in precedence order: higher `weight` first (unset counts as 0), and
//!    among equal weights the name later in the alphabet first.
//! 2. An overlay failing runtime validation ([`NodeOverlay::runtime_validate`]) applies nowhere
//!    (reason `RuntimeValidation`).
//! 3. An overlay selects, per NodePool, an instance type when the type's requirements plus the
//!    NodePool's `karpenter.sh/nodepool` label and template labels are compatible with the
//!    overlay's requirements (every key the overlay names must be defined, `NotIn` and
//!    `DoesNotExist` aside), and then those of its offerings (available or not) compatible with
//!    them; a type with no such offering is not selected.
//! 4. Conflicts: an overlay whose weight equals that of the last overlay that changed the price
//!    of a selected offering (price overlays), or that set a resource it also sets on a selected
//!    type (capacity overlays), conflicts. A conflicting overlay applies nowhere, in no NodePool
//!    (reason `Conflict`): there is no partial application.
//! 5. Otherwise it applies: an offering's price takes the first (highest-precedence) price
//!    change that selected it, computed from the provider's price ([`adjusted_price`]); a
//!    type's capacity takes, per resource, the first capacity that set it, merged over the
//!    provider's capacity (allocatable follows).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use crate::api::{CONDITION_VALIDATION_SUCCEEDED, NodeOverlay, OverlayRequirement, adjusted_price};
use crate::labels::{self, LabelPolicy};
use crate::model::InstanceType;
use crate::requirements::{Operator, Requirement, Requirements};
use crate::resources::{Quantity, ResourceList};

/// A NodePool's view for overlay selection.
#[derive(Debug, Clone, Copy)]
pub struct PoolTypes<'a> {
    /// The NodePool's name.
    pub name: &'a str,
    /// Its `spec.template.metadata.labels`.
    pub labels: &'a BTreeMap<String, String>,
    /// Its instance types from the cloud provider.
    pub instance_types: &'a [Arc<InstanceType>],
}

/// What became of one overlay.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Outcome {
    /// Valid and free of conflicts: applied wherever it selects (possibly nowhere).
    Applied,
    /// Failed runtime validation: the message.
    RuntimeValidation(String),
    /// Conflicts with an overlay of the same weight that changes the same price or resource.
    Conflict,
}

impl Outcome {
    /// The `ValidationSucceeded` condition: status (`"True"`/`"False"`), reason and message.
    pub fn condition(&self) -> (&'static str, &'static str, String) {
        match self {
            Outcome::Applied => ("True", CONDITION_VALIDATION_SUCCEEDED, String::new()),
            Outcome::RuntimeValidation(m) => ("False", "RuntimeValidation", m.clone()),
            Outcome::Conflict => ("False", "Conflict", "conflict with another overlay".into()),
        }
    }
}

/// The result of [`apply`].
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Applied {
    /// Per NodePool (by name), its instance types in their input order, adjusted where an
    /// overlay applied (the others are the same `Arc`s).
    pub instance_types: BTreeMap<String, Vec<Arc<InstanceType>>>,
    /// Per overlay (by name), what became of it.
    pub outcomes: BTreeMap<String, Outcome>,
    /// Per NodePool, the names of its instance types whose price some overlay changed.
    pub price_overlaid: BTreeMap<String, BTreeSet<String>>,
    /// Per NodePool, the names of its instance types whose capacity some overlay changed.
    pub capacity_overlaid: BTreeMap<String, BTreeSet<String>>,
}

/// The price change on one offering: the change and the weight of the last overlay that
/// selected the offering (the conflict check compares with it).
#[derive(Debug, Clone)]
struct PriceUpdate {
    change: String,
    lowest_weight: i32,
}

/// The capacity changes on one instance type.
#[derive(Debug, Clone, Default)]
struct CapacityUpdate {
    resources: BTreeMap<String, Quantity>,
    lowest_weight: i32,
    lowest_weight_resources: BTreeSet<String>,
}

#[derive(Debug, Clone, Default)]
struct TypeUpdate {
    /// By offering index.
    prices: BTreeMap<usize, PriceUpdate>,
    capacity: Option<CapacityUpdate>,
}

/// Per NodePool, per instance-type index.
type Store = BTreeMap<String, BTreeMap<usize, TypeUpdate>>;

/// Overlays in precedence order: weight descending, then name descending.
pub fn precedence_order(overlays: &[NodeOverlay]) -> Vec<&NodeOverlay> {
    let mut ordered: Vec<&NodeOverlay> = overlays.iter().collect();
    ordered.sort_by(|a, b| {
        b.spec
            .effective_weight()
            .cmp(&a.spec.effective_weight())
            .then_with(|| b.name().cmp(a.name()))
    });
    ordered
}

fn overlay_requirements(reqs: &[OverlayRequirement]) -> Requirements {
    let mut out = Requirements::new();
    for r in reqs {
        out.add(Requirement::new(
            r.key.as_str(),
            r.operator,
            r.values.iter().map(String::as_str),
        ));
    }
    out
}

/// The offerings of `it` (indices) that `overlay` selects in `pool`; empty when it does not
/// select the type.
fn selected_offerings(
    pool: &PoolTypes<'_>,
    it: &InstanceType,
    overlay: &Requirements,
    policy: &LabelPolicy,
) -> Vec<usize> {
    let mut type_reqs = Requirements::new();
    type_reqs.add(Requirement::new(
        labels::NODEPOOL,
        Operator::In,
        [pool.name],
    ));
    for (k, v) in pool.labels {
        type_reqs.add(Requirement::new(k.as_str(), Operator::In, [v.as_str()]));
    }
    type_reqs.add_all(it.requirements());
    if !type_reqs.is_compatible(overlay, None) {
        return Vec::new();
    }
    it.offerings
        .iter()
        .enumerate()
        .filter(|(_, o)| overlay.is_compatible(o.requirements(), Some(policy)))
        .map(|(i, _)| i)
        .collect()
}

fn conflicts(
    store: &Store,
    pool: &str,
    type_index: usize,
    offerings: &[usize],
    overlay: &NodeOverlay,
) -> bool {
    let Some(update) = store.get(pool).and_then(|p| p.get(&type_index)) else {
        return false;
    };
    let weight = overlay.spec.effective_weight();
    if overlay.spec.price_change().is_some()
        && offerings.iter().any(|o| {
            update
                .prices
                .get(o)
                .is_some_and(|p| p.lowest_weight == weight)
        })
    {
        return true;
    }
    if let (Some(capacity), Some(existing)) = (&overlay.spec.capacity, &update.capacity)
        && existing.lowest_weight == weight
        && capacity
            .keys()
            .any(|r| existing.lowest_weight_resources.contains(r))
    {
        return true;
    }
    false
}

fn record(
    store: &mut Store,
    pool: &str,
    type_index: usize,
    offerings: &[usize],
    overlay: &NodeOverlay,
) {
    let weight = overlay.spec.effective_weight();
    let price = overlay.spec.price_change();
    let capacity = overlay.spec.capacity.as_ref();
    if price.is_none() && capacity.is_none() {
        return;
    }
    let update = store
        .entry(pool.to_string())
        .or_default()
        .entry(type_index)
        .or_default();
    if let Some(change) = price {
        for o in offerings {
            update
                .prices
                .entry(*o)
                .and_modify(|p| p.lowest_weight = weight)
                .or_insert_with(|| PriceUpdate {
                    change: change.to_string(),
                    lowest_weight: weight,
                });
        }
    }
    if let Some(capacity) = capacity {
        let c = update.capacity.get_or_insert_with(CapacityUpdate::default);
        for (name, q) in capacity.iter() {
            c.resources.entry(name.to_string()).or_insert(q);
        }
        c.lowest_weight = weight;
        c.lowest_weight_resources = capacity.keys().map(str::to_string).collect();
    }
}

/// Applies `overlays` to every NodePool's instance types (see the module documentation).
/// `policy` is the label policy of the cloud provider (well-known labels may be left undefined
/// by offerings, and decide which requirement keys are restricted).
pub fn apply(overlays: &[NodeOverlay], pools: &[PoolTypes<'_>], policy: &LabelPolicy) -> Applied {
    let mut store: Store = BTreeMap::new();
    let mut outcomes = BTreeMap::new();
    for overlay in precedence_order(overlays) {
        if let Err(e) = overlay.runtime_validate(policy) {
            outcomes.insert(
                overlay.name().to_string(),
                Outcome::RuntimeValidation(e.to_string()),
            );
            continue;
        }
        let reqs = overlay_requirements(&overlay.spec.requirements);
        let selections: Vec<(&str, usize, Vec<usize>)> = pools
            .iter()
            .flat_map(|pool| {
                let reqs = &reqs;
                pool.instance_types
                    .iter()
                    .enumerate()
                    .filter_map(move |(i, it)| {
                        let offerings = selected_offerings(pool, it, reqs, policy);
                        (!offerings.is_empty()).then_some((pool.name, i, offerings))
                    })
            })
            .collect();
        let conflict = selections
            .iter()
            .any(|(pool, i, offerings)| conflicts(&store, pool, *i, offerings, overlay));
        if conflict {
            outcomes.insert(overlay.name().to_string(), Outcome::Conflict);
            continue;
        }
        for (pool, i, offerings) in &selections {
            record(&mut store, pool, *i, offerings, overlay);
        }
        outcomes.insert(overlay.name().to_string(), Outcome::Applied);
    }

    let mut instance_types = BTreeMap::new();
    let mut price_overlaid: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut capacity_overlaid: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for pool in pools {
        let updates = store.get(pool.name);
        let types = pool
            .instance_types
            .iter()
            .enumerate()
            .map(|(i, it)| match updates.and_then(|u| u.get(&i)) {
                None => it.clone(),
                Some(update) => {
                    let mut adjusted = (**it).clone();
                    for (o, p) in &update.prices {
                        if let Some(offering) = adjusted.offerings.get_mut(*o) {
                            offering.price = adjusted_price(offering.price, &p.change);
                        }
                    }
                    if !update.prices.is_empty() {
                        price_overlaid
                            .entry(pool.name.to_string())
                            .or_default()
                            .insert(it.name().to_string());
                    }
                    if let Some(c) = update.capacity.as_ref().filter(|c| !c.resources.is_empty()) {
                        let mut capacity: ResourceList = adjusted.capacity().clone();
                        for (name, q) in &c.resources {
                            capacity.insert(name.clone(), *q);
                        }
                        adjusted.set_capacity(capacity);
                        capacity_overlaid
                            .entry(pool.name.to_string())
                            .or_default()
                            .insert(it.name().to_string());
                    }
                    Arc::new(adjusted)
                }
            })
            .collect();
        instance_types.insert(pool.name.to_string(), types);
    }
    Applied {
        instance_types,
        outcomes,
        price_overlaid,
        capacity_overlaid,
    }
}

#[cfg(test)]
mod tests;

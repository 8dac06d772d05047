//! Instance types, their offerings and the overhead a node reserves.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::labels;
use crate::requirements::{Operator, Requirement, Requirements};
use crate::resources::{ResourceList, names};

use super::default_true;

// ---------------------------------------------------------------------------------------------
// Instance types and offerings
// ---------------------------------------------------------------------------------------------

/// Resources a node reserves for the system; allocatable = capacity − their sum.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Overhead {
    /// Reserved for the kubelet and container runtime.
    #[serde(default)]
    pub kube_reserved: ResourceList,
    /// Reserved for the operating system.
    #[serde(default)]
    pub system_reserved: ResourceList,
    /// The kubelet's hard eviction threshold.
    #[serde(default)]
    pub eviction_threshold: ResourceList,
}

impl Overhead {
    /// The sum of the three parts.
    pub fn total(&self) -> ResourceList {
        self.kube_reserved
            .add(&self.system_reserved)
            .add(&self.eviction_threshold)
    }

    /// `self` with `over` merged on top: per part, the resources of `over` replace those of
    /// `self`; resources `over` does not name are kept.
    pub fn merged_with(&self, over: &Overhead) -> Overhead {
        Overhead {
            kube_reserved: merge_resources(&self.kube_reserved, &over.kube_reserved),
            system_reserved: merge_resources(&self.system_reserved, &over.system_reserved),
            eviction_threshold: merge_resources(&self.eviction_threshold, &over.eviction_threshold),
        }
    }
}

/// One way to buy an instance type: a zone, a capacity type and a price.
///
/// The zone, capacity type and reservation id are private: they determine the offering's
/// [`requirements`](Offering::requirements), which their setters keep in sync.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(
    rename_all = "camelCase",
    from = "OfferingFields",
    into = "OfferingFields"
)]
#[non_exhaustive]
pub struct Offering {
    zone: String,
    capacity_type: String,
    /// Price per hour.
    pub price: f64,
    /// Whether the offering can currently be launched.
    pub available: bool,
    reservation_id: Option<String>,
    /// For reserved offerings: instances left in the reservation.
    pub reservation_capacity: u32,
    /// The provider's reservation-id label key, when the requirements carry it.
    reservation_label: Option<String>,
    /// Further labels of the provider's: `Some(value)` is a label nodes launched through this
    /// offering get (a requirement `In [value]`), `None` one they never get (`DoesNotExist`),
    /// e.g. AWS's `karpenter.k8s.aws/capacity-reservation-type`.
    labels: BTreeMap<String, Option<String>>,
    /// The offering's requirements: zone and capacity type (and the reservation id label when
    /// the provider defines one, and the provider's labels). Kept in sync by the constructors
    /// and setters.
    requirements: Requirements,
    /// Resources that differ on nodes launched through this offering, merged over the instance
    /// type's capacity (the override wins per resource). See [`InstanceType::allocatable_groups`].
    pub capacity_override: Option<ResourceList>,
    /// Overhead that differs on nodes launched through this offering, merged over the instance
    /// type's overhead (per part, the override wins per resource).
    pub overhead_override: Option<Overhead>,
}

/// The serialised form of an [`Offering`] (its requirements are rebuilt on deserialisation).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct OfferingFields {
    zone: String,
    capacity_type: String,
    price: f64,
    #[serde(default = "default_true")]
    available: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    reservation_id: Option<String>,
    #[serde(default)]
    reservation_capacity: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    reservation_label: Option<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    labels: BTreeMap<String, Option<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    capacity_override: Option<ResourceList>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    overhead_override: Option<Overhead>,
}

impl From<OfferingFields> for Offering {
    fn from(f: OfferingFields) -> Offering {
        let mut o = Offering {
            zone: f.zone,
            capacity_type: f.capacity_type,
            price: f.price,
            available: f.available,
            reservation_id: f.reservation_id,
            reservation_capacity: f.reservation_capacity,
            reservation_label: f.reservation_label,
            labels: f.labels,
            requirements: Requirements::new(),
            capacity_override: f.capacity_override,
            overhead_override: f.overhead_override,
        };
        o.rebuild_requirements();
        o
    }
}

impl From<Offering> for OfferingFields {
    fn from(o: Offering) -> OfferingFields {
        OfferingFields {
            zone: o.zone,
            capacity_type: o.capacity_type,
            price: o.price,
            available: o.available,
            reservation_id: o.reservation_id,
            reservation_capacity: o.reservation_capacity,
            reservation_label: o.reservation_label,
            labels: o.labels,
            capacity_override: o.capacity_override,
            overhead_override: o.overhead_override,
        }
    }
}

impl Offering {
    /// An available offering.
    pub fn new(zone: impl Into<String>, capacity_type: impl Into<String>, price: f64) -> Offering {
        let mut o = Offering {
            zone: zone.into(),
            capacity_type: capacity_type.into(),
            price,
            available: true,
            reservation_id: None,
            reservation_capacity: 0,
            reservation_label: None,
            labels: BTreeMap::new(),
            requirements: Requirements::new(),
            capacity_override: None,
            overhead_override: None,
        };
        o.rebuild_requirements();
        o
    }

    /// A reserved offering (capacity type `reserved`) of reservation `id` with `capacity`
    /// instances left. `reservation_label` is the provider's reservation-id label key.
    pub fn reserved(
        zone: impl Into<String>,
        id: impl Into<String>,
        capacity: u32,
        price: f64,
        reservation_label: &str,
    ) -> Offering {
        let mut o = Offering::new(zone, labels::CAPACITY_TYPE_RESERVED, price);
        o.reservation_id = Some(id.into());
        o.reservation_capacity = capacity;
        o.available = capacity > 0;
        o.reservation_label = Some(reservation_label.to_string());
        o.rebuild_requirements();
        o
    }

    /// The offering with its requirements keyed on the provider's reservation-id label:
    /// `DoesNotExist` for a non-reserved offering, `In [id]` for a reserved one.
    pub fn with_reservation_label(mut self, reservation_label: Option<&str>) -> Offering {
        self.reservation_label = reservation_label.map(str::to_string);
        self.rebuild_requirements();
        self
    }

    /// The offering with a label of the provider's: `Some(value)` makes nodes launched
    /// through it carry `key=value` (the offering requires `key In [value]`), `None` says they
    /// never carry `key` (`key DoesNotExist`), so pods selecting the label land only on
    /// offerings that give it.
    pub fn with_label(mut self, key: &str, value: Option<&str>) -> Offering {
        self.labels
            .insert(key.to_string(), value.map(str::to_string));
        self.rebuild_requirements();
        self
    }

    /// The provider's labels of [`with_label`](Self::with_label): `None` values are keys the
    /// offering's nodes never carry.
    pub fn labels(&self) -> &BTreeMap<String, Option<String>> {
        &self.labels
    }

    /// The offering marked available or not.
    pub fn with_available(mut self, available: bool) -> Offering {
        self.available = available;
        self
    }

    /// The offering with a capacity override (see [`Offering::capacity_override`]).
    pub fn with_capacity_override(mut self, capacity: ResourceList) -> Offering {
        self.capacity_override = Some(capacity);
        self
    }

    /// The offering with an overhead override (see [`Offering::overhead_override`]).
    pub fn with_overhead_override(mut self, overhead: Overhead) -> Offering {
        self.overhead_override = Some(overhead);
        self
    }

    /// Recomputes the offering's requirements from its fields.
    fn rebuild_requirements(&mut self) {
        let mut r = Requirements::new();
        r.add(Requirement::new(
            labels::ZONE,
            Operator::In,
            [self.zone.as_str()],
        ));
        r.add(Requirement::new(
            labels::CAPACITY_TYPE,
            Operator::In,
            [self.capacity_type.as_str()],
        ));
        if let Some(key) = &self.reservation_label {
            match &self.reservation_id {
                Some(id) => r.add(Requirement::new(key, Operator::In, [id.as_str()])),
                None => r.add(Requirement::does_not_exist(key)),
            }
        }
        for (key, value) in &self.labels {
            match value {
                Some(v) => r.add(Requirement::new(key, Operator::In, [v.as_str()])),
                None => r.add(Requirement::does_not_exist(key)),
            }
        }
        self.requirements = r;
    }

    /// `topology.kubernetes.io/zone`.
    pub fn zone(&self) -> &str {
        &self.zone
    }

    /// Moves the offering to another zone (its requirements follow).
    pub fn set_zone(&mut self, zone: impl Into<String>) {
        self.zone = zone.into();
        self.rebuild_requirements();
    }

    /// `karpenter.sh/capacity-type`: `spot`, `on-demand` or `reserved`.
    pub fn capacity_type(&self) -> &str {
        &self.capacity_type
    }

    /// Changes the capacity type (its requirements follow).
    pub fn set_capacity_type(&mut self, capacity_type: impl Into<String>) {
        self.capacity_type = capacity_type.into();
        self.rebuild_requirements();
    }

    /// For reserved offerings: the reservation's id.
    pub fn reservation_id(&self) -> Option<&str> {
        self.reservation_id.as_deref()
    }

    /// Sets or clears the reservation id (its requirements follow when the offering has a
    /// reservation label).
    pub fn set_reservation_id(&mut self, id: Option<String>) {
        self.reservation_id = id;
        self.rebuild_requirements();
    }

    /// The provider's reservation-id label key the requirements carry, if any.
    pub fn reservation_label(&self) -> Option<&str> {
        self.reservation_label.as_deref()
    }

    /// The offering's requirements (zone, capacity type, reservation id).
    pub fn requirements(&self) -> &Requirements {
        &self.requirements
    }

    /// Whether this is a reserved-capacity offering.
    pub fn is_reserved(&self) -> bool {
        self.capacity_type == labels::CAPACITY_TYPE_RESERVED
    }

    /// Whether the offering overrides its instance type's capacity or overhead.
    pub fn has_overrides(&self) -> bool {
        self.capacity_override.is_some() || self.overhead_override.is_some()
    }
}

/// `base` with every resource of `over` inserted (the override wins).
fn merge_resources(base: &ResourceList, over: &ResourceList) -> ResourceList {
    let mut out = base.clone();
    for (name, q) in over.iter() {
        out.insert(name, q);
    }
    out
}

/// A set of an instance type's available offerings that give nodes the same allocatable
/// resources (spec 1.3, upstream `AllocatableOfferingsList`). See
/// [`InstanceType::allocatable_groups`].
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct AllocatableGroup {
    /// The allocatable resources of nodes launched through these offerings.
    pub allocatable: ResourceList,
    /// Indices into [`InstanceType::offerings`] of the group's available offerings, in order.
    pub offerings: Vec<usize>,
}

/// A kind of machine the cloud provider can launch, with its offerings.
///
/// The name, requirements, capacity and overhead are private: the allocatable resources are
/// computed from capacity and overhead, and the requirements from the name; the setters keep
/// them in sync. The offerings are public (availability and reservation capacity change while
/// a provider runs); the zone and capacity-type requirements are computed once, at
/// construction, from the offerings available then.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct InstanceType {
    name: String,
    requirements: Requirements,
    /// Ways to buy it.
    pub offerings: Vec<Offering>,
    capacity: ResourceList,
    overhead: Overhead,
    allocatable: ResourceList,
}

impl InstanceType {
    /// Builds an instance type and computes its allocatable resources: for every resource in
    /// `capacity`, capacity − overhead (negative results kept); then memory is further reduced
    /// by every `hugepages-*` capacity (clamped at zero).
    ///
    /// The `node.kubernetes.io/instance-type`, zone and capacity-type requirements are added
    /// when missing (the latter two as the union of the *available* offerings' values).
    pub fn new(
        name: impl Into<String>,
        mut requirements: Requirements,
        offerings: Vec<Offering>,
        capacity: ResourceList,
        overhead: Overhead,
    ) -> InstanceType {
        let name = name.into();
        if !requirements.has(labels::INSTANCE_TYPE) {
            requirements.add(Requirement::new(
                labels::INSTANCE_TYPE,
                Operator::In,
                [name.as_str()],
            ));
        }
        let available = offerings.iter().filter(|o| o.available);
        if !requirements.has(labels::ZONE) {
            let zones: Vec<&str> = available.clone().map(|o| o.zone.as_str()).collect();
            requirements.add(Requirement::new(labels::ZONE, Operator::In, zones));
        }
        if !requirements.has(labels::CAPACITY_TYPE) {
            let cts: Vec<&str> = available.map(|o| o.capacity_type.as_str()).collect();
            requirements.add(Requirement::new(labels::CAPACITY_TYPE, Operator::In, cts));
        }
        let allocatable = compute_allocatable(&capacity, &overhead);
        InstanceType {
            name,
            requirements,
            offerings,
            capacity,
            overhead,
            allocatable,
        }
    }

    /// The name; equals its `node.kubernetes.io/instance-type` value.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The labels nodes of this type may have, as requirements.
    pub fn requirements(&self) -> &Requirements {
        &self.requirements
    }

    /// Full capacity.
    pub fn capacity(&self) -> &ResourceList {
        &self.capacity
    }

    /// Replaces the capacity and recomputes [`allocatable`](Self::allocatable).
    pub fn set_capacity(&mut self, capacity: ResourceList) {
        self.capacity = capacity;
        self.allocatable = compute_allocatable(&self.capacity, &self.overhead);
    }

    /// System overhead.
    pub fn overhead(&self) -> &Overhead {
        &self.overhead
    }

    /// Replaces the overhead and recomputes [`allocatable`](Self::allocatable).
    pub fn set_overhead(&mut self, overhead: Overhead) {
        self.overhead = overhead;
        self.allocatable = compute_allocatable(&self.capacity, &self.overhead);
    }

    /// Adds a requirement on the labels nodes of this type may have (intersected with the one
    /// already on that key, if any), e.g. a provider label.
    pub fn add_requirement(&mut self, requirement: Requirement) {
        self.requirements.add(requirement);
    }

    /// Capacity − overhead (see [`InstanceType::new`]).
    pub fn allocatable(&self) -> &ResourceList {
        &self.allocatable
    }

    /// Whether any available offering carries a capacity or overhead override, i.e. whether
    /// [`allocatable_groups`](Self::allocatable_groups) has more than the base group.
    pub fn has_offering_overrides(&self) -> bool {
        self.available_offerings().any(Offering::has_overrides)
    }

    /// The allocatable groups of the available offerings (spec 1.3, upstream
    /// `AllocatableOfferingsList`). Group 0 is always the base group: [`allocatable`] and the
    /// available offerings without overrides (possibly none). Every further group gathers the
    /// available offerings with the same (capacity override, overhead override) pair, in the
    /// order the pairs are first seen; its allocatable is computed like [`allocatable`] from the
    /// capacity and overhead with the overrides merged on top
    /// ([`Overhead::merged_with`]).
    ///
    /// Computed on each call from the current offerings (they are public and may change, e.g.
    /// when a reservation runs out): callers on a hot path compute it once. Without overrides
    /// (see [`has_offering_overrides`](Self::has_offering_overrides)) the result is the base
    /// group alone.
    ///
    /// [`allocatable`]: Self::allocatable
    pub fn allocatable_groups(&self) -> Vec<AllocatableGroup> {
        let mut groups = vec![AllocatableGroup {
            allocatable: self.allocatable.clone(),
            offerings: Vec::new(),
        }];
        let mut keys: Vec<(Option<&ResourceList>, Option<&Overhead>)> = vec![(None, None)];
        for (i, o) in self.offerings.iter().enumerate() {
            if !o.available {
                continue;
            }
            let key = (o.capacity_override.as_ref(), o.overhead_override.as_ref());
            let g = match keys.iter().position(|k| *k == key) {
                Some(g) => g,
                None => {
                    keys.push(key);
                    groups.push(AllocatableGroup {
                        allocatable: self.allocatable_with(o),
                        offerings: Vec::new(),
                    });
                    groups.len() - 1
                }
            };
            if let Some(group) = groups.get_mut(g) {
                group.offerings.push(i);
            }
        }
        groups
    }

    /// The allocatable resources of a node launched through `offering` (assumed to be one of
    /// this type's): [`allocatable`](Self::allocatable) unless the offering has overrides.
    pub fn allocatable_with(&self, offering: &Offering) -> ResourceList {
        if !offering.has_overrides() {
            return self.allocatable.clone();
        }
        let capacity = match &offering.capacity_override {
            Some(over) => merge_resources(&self.capacity, over),
            None => self.capacity.clone(),
        };
        let overhead = match &offering.overhead_override {
            Some(over) => self.overhead.merged_with(over),
            None => self.overhead.clone(),
        };
        compute_allocatable(&capacity, &overhead)
    }

    /// Available offerings.
    pub fn available_offerings(&self) -> impl Iterator<Item = &Offering> {
        self.offerings.iter().filter(|o| o.available)
    }

    /// The cheapest available offering loosely compatible with `reqs`, if any.
    pub fn cheapest_offering(
        &self,
        reqs: &Requirements,
        policy: &labels::LabelPolicy,
    ) -> Option<&Offering> {
        self.available_offerings()
            .filter(|o| reqs.is_compatible(o.requirements(), Some(policy)))
            .min_by(|a, b| a.price.total_cmp(&b.price))
    }

    /// Upstream's `WorstLaunchPrice`: among available offerings compatible with `reqs`, take the
    /// first capacity type in the precedence reserved → spot → on-demand that has any, and return
    /// its most expensive price; `None` if no offering is compatible.
    pub fn worst_launch_price(
        &self,
        reqs: &Requirements,
        policy: &labels::LabelPolicy,
    ) -> Option<f64> {
        let compatible: Vec<&Offering> = self
            .available_offerings()
            .filter(|o| reqs.is_compatible(o.requirements(), Some(policy)))
            .collect();
        [
            labels::CAPACITY_TYPE_RESERVED,
            labels::CAPACITY_TYPE_SPOT,
            labels::CAPACITY_TYPE_ON_DEMAND,
        ]
        .iter()
        .find_map(|ct| {
            compatible
                .iter()
                .filter(|o| o.capacity_type == *ct)
                .map(|o| o.price)
                .max_by(f64::total_cmp)
        })
    }
}

fn compute_allocatable(capacity: &ResourceList, overhead: &Overhead) -> ResourceList {
    let total = overhead.total();
    let mut alloc = ResourceList::new();
    for (name, q) in capacity.iter() {
        alloc.insert(name, q - total.get_or_zero(name));
    }
    let hugepages: Vec<_> = capacity
        .iter()
        .filter(|(n, _)| n.starts_with("hugepages-"))
        .map(|(_, q)| q)
        .collect();
    if let Some(mut mem) = alloc.get(names::MEMORY) {
        for h in hugepages {
            mem -= h;
        }
        if mem.is_negative() {
            mem = crate::resources::Quantity::ZERO;
        }
        alloc.insert(names::MEMORY, mem);
    }
    alloc
}

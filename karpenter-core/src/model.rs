//! The scheduling view of the world: compact pods, nodes, DaemonSets, instance types and
//! offerings.
//!
//! These types carry exactly what the scheduler and the disruption planner read. They are built by
//! the caller: from the [`crate::api`] types, from Kubernetes objects (feature `k8s-openapi`, see
//! the `convert` module) or by hand in tests. Affinity and topology-spread types use Kubernetes'
//! field names in serde, so fixtures can be written as the familiar YAML.

mod affinity;
mod instance;
mod node;
mod pod;

pub use self::affinity::{
    LabelSelector, LabelSelectorRequirement, NodeAffinity, NodeInclusionPolicy, NodeSelectorTerm,
    PodAffinity, PodAffinityTerm, PreferredSchedulingTerm, SelectorOperator,
    TopologySpreadConstraint, WeightedPodAffinityTerm, WhenUnsatisfiable,
};
pub use self::instance::{AllocatableGroup, InstanceType, Offering, Overhead};
pub use self::node::{ClusterNode, DaemonSet, IntOrPercent, PodDisruptionBudget};
pub use self::pod::{OwnerReference, Pod, PodPhase, PodVolume, VolumeSource};

/// A point in time, as nanoseconds since the Unix epoch. The core never reads the clock: callers
/// pass times in.
pub type Timestamp = jiff::Timestamp;

fn default_true() -> bool {
    true
}

#[cfg(test)]
mod pdb_tests {
    use super::*;

    fn pdb(min: Option<IntOrPercent>, max: Option<IntOrPercent>) -> PodDisruptionBudget {
        PodDisruptionBudget {
            namespace: "ns".into(),
            name: "b".into(),
            selector: None,
            min_available: min,
            max_unavailable: max,
            disruptions_allowed: 0,
            unhealthy_pod_eviction_policy_always_allow: false,
        }
    }

    #[test]
    fn fully_blocking() {
        use IntOrPercent::{Int, Percent};
        assert!(pdb(None, Some(Int(0))).is_fully_blocking());
        assert!(pdb(None, Some(Percent(0))).is_fully_blocking());
        assert!(pdb(Some(Percent(100)), None).is_fully_blocking());
        assert!(!pdb(None, Some(Int(1))).is_fully_blocking());
        assert!(!pdb(Some(Int(100)), None).is_fully_blocking());
        assert!(!pdb(Some(Percent(99)), None).is_fully_blocking());
        assert!(!pdb(None, None).is_fully_blocking());
    }

    #[test]
    fn selects_by_namespace_and_selector() {
        let mut pod = Pod::new("ns", "p");
        pod.labels.insert("app".into(), "web".into());
        let mut b = pdb(None, None);
        assert!(!b.selects(&pod), "a missing selector selects nothing");
        b.selector = Some(LabelSelector::default());
        assert!(b.selects(&pod), "an empty selector selects everything");
        b.selector = Some(LabelSelector::from_labels([("app", "db")]));
        assert!(!b.selects(&pod));
        b.selector = Some(LabelSelector::from_labels([("app", "web")]));
        assert!(b.selects(&pod));
        pod.namespace = "other".into();
        assert!(!b.selects(&pod));
    }

    #[test]
    fn int_or_percent_serde() {
        let b: PodDisruptionBudget = serde_json::from_value(serde_json::json!({
            "namespace": "ns", "name": "b", "minAvailable": "50%", "maxUnavailable": 1,
        }))
        .unwrap();
        assert_eq!(b.min_available, Some(IntOrPercent::Percent(50)));
        assert_eq!(b.max_unavailable, Some(IntOrPercent::Int(1)));
        let v = serde_json::to_value(&b).unwrap();
        assert_eq!(v["minAvailable"], "50%");
        assert_eq!(v["maxUnavailable"], 1);
        for bad in [
            serde_json::json!("50"),
            serde_json::json!("%"),
            serde_json::json!(1e20),
        ] {
            assert!(serde_json::from_value::<IntOrPercent>(bad).is_err());
        }
        assert_eq!(
            IntOrPercent::parse_percent("007%"),
            Some(IntOrPercent::Percent(7))
        );
        assert_eq!(IntOrPercent::parse_percent("-1%"), None);
    }

    #[test]
    fn new_pod_fields_default_when_absent() {
        let p: Pod = serde_json::from_value(serde_json::json!({
            "namespace": "ns", "name": "p", "uid": "u", "creationTimestamp": "2024-01-01T00:00:00Z",
        }))
        .unwrap();
        assert!(p.ready);
        assert_eq!(p.start_time, None);
        assert_eq!(p.priority_class_name, None);
        assert_eq!(p, {
            let mut q = Pod::new("ns", "p");
            q.uid = "u".into();
            q.creation_timestamp = p.creation_timestamp;
            q
        });
    }
}

#[cfg(test)]
mod allocatable_group_tests {
    use super::*;
    use crate::labels;
    use crate::requirements::{Operator, Requirement, Requirements};
    use crate::resources::{Quantity, ResourceList};
    use proptest::prelude::*;

    fn list(entries: &[(&str, i64)]) -> ResourceList {
        let mut l = ResourceList::new();
        for (k, v) in entries {
            l.insert(*k, Quantity::from_units(*v));
        }
        l
    }

    fn instance_type(offerings: Vec<Offering>) -> InstanceType {
        InstanceType::new(
            "it",
            Requirements::new(),
            offerings,
            list(&[("cpu", 4), ("memory", 16), ("pods", 10)]),
            Overhead {
                kube_reserved: list(&[("cpu", 1)]),
                system_reserved: list(&[("memory", 2)]),
                eviction_threshold: ResourceList::new(),
            },
        )
    }

    fn with_capacity(mut o: Offering, c: &[(&str, i64)]) -> Offering {
        o.capacity_override = Some(list(c));
        o
    }

    #[test]
    fn without_overrides_one_base_group_holds_every_available_offering() {
        let mut off = Offering::new("z2", "spot", 0.5);
        off.available = false;
        let it = instance_type(vec![
            Offering::new("z1", "spot", 1.0),
            off,
            Offering::new("z3", "on-demand", 2.0),
        ]);
        assert!(!it.has_offering_overrides());
        let groups = it.allocatable_groups();
        assert_eq!(groups.len(), 1);
        assert_eq!(groups[0].offerings, vec![0, 2]);
        assert_eq!(&groups[0].allocatable, it.allocatable());
        assert_eq!(
            it.allocatable(),
            &list(&[("cpu", 3), ("memory", 14), ("pods", 10)])
        );
    }

    #[test]
    fn overrides_form_groups_in_first_seen_order() {
        let slots = [("example.com/slots", 4)];
        let mut overhead = Offering::new("z1", "on-demand", 1.0);
        overhead.overhead_override = Some(Overhead {
            kube_reserved: list(&[("cpu", 2)]),
            ..Overhead::default()
        });
        let mut unavailable = with_capacity(Offering::new("z3", "spot", 1.0), &[("cpu", 64)]);
        unavailable.available = false;
        let it = instance_type(vec![
            overhead,
            with_capacity(Offering::new("z1", "spot", 1.0), &slots),
            Offering::new("z2", "spot", 1.0),
            with_capacity(Offering::new("z2", "on-demand", 1.0), &slots),
            unavailable,
        ]);
        assert!(it.has_offering_overrides());
        let groups = it.allocatable_groups();
        assert_eq!(groups.len(), 3, "unavailable offerings form no group");
        // Group 0: the base.
        assert_eq!(groups[0].offerings, vec![2]);
        assert_eq!(&groups[0].allocatable, it.allocatable());
        // Group 1: the overhead override (kube-reserved cpu 2 replaces 1; memory kept).
        assert_eq!(groups[1].offerings, vec![0]);
        assert_eq!(
            groups[1].allocatable,
            list(&[("cpu", 2), ("memory", 14), ("pods", 10)])
        );
        // Group 2: the capacity override, merged over the base capacity.
        assert_eq!(groups[2].offerings, vec![1, 3]);
        assert_eq!(
            groups[2].allocatable,
            list(&[
                ("cpu", 3),
                ("example.com/slots", 4),
                ("memory", 14),
                ("pods", 10)
            ])
        );
    }

    #[test]
    fn the_base_group_exists_even_when_every_offering_overrides() {
        let it = instance_type(vec![with_capacity(
            Offering::new("z1", "spot", 1.0),
            &[("cpu", 8)],
        )]);
        let groups = it.allocatable_groups();
        assert_eq!(groups.len(), 2);
        assert!(groups[0].offerings.is_empty());
        assert_eq!(
            groups[1].allocatable.get("cpu"),
            Some(Quantity::from_units(7))
        );
    }

    #[test]
    fn overrides_serde_default_to_none() {
        let o: Offering = serde_json::from_value(serde_json::json!({
            "zone": "z", "capacityType": "spot", "price": 1.0,
        }))
        .unwrap();
        assert_eq!(o.capacity_override, None);
        assert_eq!(o.overhead_override, None);
        let v = serde_json::to_value(&o).unwrap();
        assert!(v.get("capacityOverride").is_none());
        let with = with_capacity(o, &[("cpu", 2)]);
        let back: Offering = serde_json::from_value(serde_json::to_value(&with).unwrap()).unwrap();
        assert_eq!(back.capacity_override, with.capacity_override);
    }

    #[test]
    fn setters_keep_allocatable_right() {
        let mut it = instance_type(vec![Offering::new("z1", "spot", 1.0)]);
        assert_eq!(it.allocatable().get("cpu"), Some(Quantity::from_units(3)));
        it.set_capacity(list(&[("cpu", 8), ("memory", 32), ("pods", 10)]));
        assert_eq!(it.capacity().get("cpu"), Some(Quantity::from_units(8)));
        assert_eq!(
            it.allocatable(),
            &list(&[("cpu", 7), ("memory", 30), ("pods", 10)])
        );
        it.set_overhead(Overhead::default());
        assert_eq!(it.allocatable(), it.capacity());
        assert_eq!(it.allocatable_groups()[0].allocatable, *it.allocatable());
    }

    #[test]
    fn offering_setters_keep_requirements_right() {
        let zone = |o: &Offering| {
            o.requirements()
                .get(labels::ZONE)
                .and_then(|r| r.single_value().map(str::to_string))
        };
        let mut o = Offering::new("z1", "spot", 1.0);
        o.set_zone("z2");
        assert_eq!(o.zone(), "z2");
        assert_eq!(zone(&o).as_deref(), Some("z2"));
        o.set_capacity_type("on-demand");
        assert!(
            o.requirements()
                .get(labels::CAPACITY_TYPE)
                .is_some_and(|r| r.has("on-demand") && !r.has("spot"))
        );

        let key = "example.com/reservation";
        let mut r = Offering::reserved("z1", "r-1", 2, 0.5, key);
        assert_eq!(r.reservation_id(), Some("r-1"));
        assert_eq!(r.reservation_label(), Some(key));
        assert!(r.requirements().get(key).is_some_and(|q| q.has("r-1")));
        r.set_reservation_id(Some("r-2".to_string()));
        assert!(
            r.requirements()
                .get(key)
                .is_some_and(|q| q.has("r-2") && !q.has("r-1"))
        );
        let plain = Offering::new("z1", "spot", 1.0).with_reservation_label(Some(key));
        assert_eq!(
            plain.requirements().get(key).map(|q| q.operator()),
            Some(Operator::DoesNotExist)
        );
    }

    #[test]
    fn offering_serde_rebuilds_requirements() {
        let key = "example.com/reservation";
        let r = Offering::reserved("z9", "r-1", 2, 0.5, key);
        let back: Offering = serde_json::from_value(serde_json::to_value(&r).unwrap()).unwrap();
        assert_eq!(back, r);
        assert!(back.requirements().get(key).is_some_and(|q| q.has("r-1")));
        assert!(
            back.requirements()
                .get(labels::ZONE)
                .is_some_and(|q| q.has("z9"))
        );
    }

    #[test]
    fn provider_labels_are_requirements_that_survive_serde() {
        let kind = "example.com/reservation-type";
        let r = Offering::reserved("z1", "r-1", 2, 0.5, "example.com/reservation")
            .with_label(kind, Some("capacity-block"));
        assert!(
            r.requirements()
                .get(kind)
                .is_some_and(|q| q.has("capacity-block"))
        );
        assert_eq!(r.labels()[kind].as_deref(), Some("capacity-block"));
        let plain = Offering::new("z1", "on-demand", 1.0).with_label(kind, None);
        assert_eq!(
            plain.requirements().get(kind).map(|q| q.operator()),
            Some(Operator::DoesNotExist)
        );
        // A pod selecting the label is compatible with the offering that gives it only.
        let mut pod = Requirements::new();
        pod.add(Requirement::new(kind, Operator::In, ["capacity-block"]));
        assert!(r.requirements().is_compatible(&pod, None));
        assert!(!plain.requirements().is_compatible(&pod, None));
        for o in [r, plain] {
            let back: Offering = serde_json::from_value(serde_json::to_value(&o).unwrap()).unwrap();
            assert_eq!(back, o);
        }
    }

    proptest! {
        /// The groups partition the available offerings; group 0 holds exactly those without
        /// overrides; every offering's group has the allocatable of a launch through it.
        #[test]
        fn groups_partition_available_offerings(
            specs in proptest::collection::vec((any::<bool>(), 0u8..3, 0u8..3), 0..12)
        ) {
            let offerings: Vec<Offering> = specs
                .iter()
                .enumerate()
                .map(|(i, &(available, cap, ovh))| {
                    let mut o = Offering::new(format!("z{i}"), "spot", 1.0);
                    o.available = available;
                    if cap > 0 {
                        o.capacity_override = Some(list(&[("cpu", i64::from(cap) * 8)]));
                    }
                    if ovh > 0 {
                        o.overhead_override = Some(Overhead {
                            system_reserved: list(&[("memory", i64::from(ovh))]),
                            ..Overhead::default()
                        });
                    }
                    o
                })
                .collect();
            let it = instance_type(offerings);
            let groups = it.allocatable_groups();
            prop_assert!(!groups.is_empty());
            let mut seen: Vec<usize> = groups.iter().flat_map(|g| g.offerings.clone()).collect();
            seen.sort_unstable();
            let available: Vec<usize> = it
                .offerings
                .iter()
                .enumerate()
                .filter(|(_, o)| o.available)
                .map(|(i, _)| i)
                .collect();
            prop_assert_eq!(seen, available);
            for &i in &groups[0].offerings {
                prop_assert!(!it.offerings[i].has_overrides());
            }
            for (gi, g) in groups.iter().enumerate() {
                prop_assert!(gi == 0 || !g.offerings.is_empty());
                for &i in &g.offerings {
                    prop_assert_eq!(&it.allocatable_with(&it.offerings[i]), &g.allocatable);
                }
            }
            prop_assert_eq!(groups.len() > 1, it.has_offering_overrides());
        }
    }
}

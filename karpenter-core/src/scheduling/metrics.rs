//! Scheduler metrics as data (upstream `GetTopologyZoneConstraints` and upstream's scheduler
//! gauges).
//!
//! Upstream Karpenter publishes Prometheus gauges while it solves: the queue depth, the number
//! of unschedulable pods and the pending pods by "effective zone". The core has no clock and no
//! global state, so a solve returns them in [`SolveMetrics`] instead and the caller publishes
//! them. Wall-clock metrics (solve duration, unfinished work, per-pod decision latency) are the
//! caller's to measure.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};

use crate::labels;
use crate::requirements::Operator;

use super::podreqs::PodRequirements;
use super::topology::{PodRef, Topology};
use super::{PodError, PodErrorKind};

/// The effective-zone label of a pod that fits in several zones, or is not zone-constrained.
pub const ZONE_FLEXIBLE: &str = "flexible";
/// The effective-zone label of a pod that fits in no zone.
pub const ZONE_NONE: &str = "none";

/// What upstream's scheduler gauges would show after a solve.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct SolveMetrics {
    /// The largest scheduling-queue length seen at the top of the solve loop (upstream gauge
    /// `karpenter_scheduler_queue_depth`, sampled before every pop): the number of pods queued
    /// when the solve starts, 0 if none.
    pub queue_depth_max: usize,
    /// Pods that could not be placed (upstream gauge
    /// `karpenter_scheduler_unschedulable_pods_count`): every pod error except reserved-offering
    /// errors (deferred decisions) and pods ignored before scheduling.
    pub unschedulable_pods: usize,
    /// Pods rejected before scheduling (invalid for scheduling, or refusing Karpenter capacity;
    /// upstream `karpenter_pods_ignored_pod_count`, counted by the provisioner there).
    pub ignored_pods: usize,
    /// Pending pods (phase `Pending`, passing validation) by effective zone (upstream gauge
    /// `karpenter_scheduler_pending_pods_by_effective_zone`, upstream
    /// `GetTopologyZoneConstraints`), computed before the first placement: a zone name,
    /// [`ZONE_FLEXIBLE`] or [`ZONE_NONE`].
    pub pending_pods_by_effective_zone: BTreeMap<String, usize>,
}

impl SolveMetrics {
    /// Counts a pending pod in its effective zone.
    pub(crate) fn count_pending(&mut self, zone: Cow<'static, str>) {
        match self.pending_pods_by_effective_zone.get_mut(zone.as_ref()) {
            Some(n) => *n += 1,
            None => {
                self.pending_pods_by_effective_zone
                    .insert(zone.into_owned(), 1);
            }
        }
    }

    /// Counts the final pod errors into [`unschedulable_pods`](Self::unschedulable_pods) and
    /// [`ignored_pods`](Self::ignored_pods).
    pub(crate) fn count_errors<'a>(&mut self, errors: impl IntoIterator<Item = &'a PodError>) {
        for e in errors {
            match e.kind {
                PodErrorKind::ReservedOffering => {}
                PodErrorKind::Invalid => self.ignored_pods += 1,
                _ => self.unschedulable_pods += 1,
            }
        }
    }
}

/// The effective zone of a pending pod (upstream `GetTopologyZoneConstraints`, upstream
/// `computeEffectiveZoneFromPod`), from the topology as it stands before the first placement:
///
/// 1. the zones allowed by the pod's own zone-keyed topology groups
///    ([`Topology::zone_domains_at`]); none allowed → [`ZONE_NONE`];
/// 2. the candidate zones are the values of the pod's strict zone requirement if it is `In`,
///    else the group zones if any group constrains the pod, else the pod is [`ZONE_FLEXIBLE`];
/// 3. the candidates allowed by the strict zone requirement and the groups are counted: one →
///    that zone, several → [`ZONE_FLEXIBLE`], none → [`ZONE_NONE`].
///
/// Volume zones are not modelled (upstream intersects them too).
pub(crate) fn effective_zone(
    topology: &Topology,
    at: PodRef,
    reqs: &PodRequirements,
) -> Cow<'static, str> {
    let groups: Option<BTreeSet<String>> = topology.zone_domains_at(at, &reqs.requirements);
    if groups.as_ref().is_some_and(BTreeSet::is_empty) {
        return Cow::Borrowed(ZONE_NONE);
    }
    let zone = reqs.strict.get_or_exists(labels::ZONE);
    let candidates: Vec<&str> = if zone.operator() == Operator::In {
        zone.values().collect()
    } else if let Some(g) = &groups {
        g.iter().map(String::as_str).collect()
    } else {
        return Cow::Borrowed(ZONE_FLEXIBLE);
    };
    let mut matched = candidates
        .into_iter()
        .filter(|z| zone.has(z) && groups.as_ref().is_none_or(|g| g.contains(*z)));
    match (matched.next(), matched.next()) {
        (Some(z), None) => Cow::Owned(z.to_string()),
        (Some(_), Some(_)) => Cow::Borrowed(ZONE_FLEXIBLE),
        (None, _) => Cow::Borrowed(ZONE_NONE),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::model::{
        InstanceType, LabelSelector, Offering, Overhead, Pod, TopologySpreadConstraint,
    };
    use crate::requirements::Requirements;
    use crate::resources::{Quantity, ResourceList};
    use crate::scheduling::{NodePoolInput, SchedulerOptions, SchedulingInput, solve};

    fn error(kind: PodErrorKind) -> PodError {
        PodError {
            kind,
            message: String::new(),
        }
    }

    #[test]
    fn errors_split_into_unschedulable_and_ignored() {
        let mut m = SolveMetrics::default();
        m.count_errors(&[
            error(PodErrorKind::InstanceTypes),
            error(PodErrorKind::Topology),
            error(PodErrorKind::Dra),
            error(PodErrorKind::ReservedOffering),
            error(PodErrorKind::Invalid),
        ]);
        assert_eq!(m.unschedulable_pods, 3);
        assert_eq!(m.ignored_pods, 1);
    }

    #[test]
    fn pending_pods_are_counted_per_zone() {
        let mut m = SolveMetrics::default();
        m.count_pending(Cow::Borrowed(ZONE_FLEXIBLE));
        m.count_pending(Cow::Owned("z".to_string()));
        m.count_pending(Cow::Borrowed(ZONE_FLEXIBLE));
        let expected: BTreeMap<String, usize> =
            [(ZONE_FLEXIBLE.to_string(), 2), ("z".to_string(), 1)].into();
        assert_eq!(m.pending_pods_by_effective_zone, expected);
    }

    fn pool(zones: &[&str]) -> NodePoolInput {
        let mut capacity = ResourceList::new();
        capacity.insert("cpu", Quantity::from_units(4));
        capacity.insert("memory", Quantity::from_bytes(8 << 30));
        capacity.insert("pods", Quantity::from_units(10));
        let offerings = zones
            .iter()
            .map(|z| Offering::new(*z, labels::CAPACITY_TYPE_ON_DEMAND, 1.0))
            .collect();
        let it = InstanceType::new(
            "it",
            Requirements::new(),
            offerings,
            capacity,
            Overhead::default(),
        );
        NodePoolInput {
            name: "pool".into(),
            weight: 0,
            requirements: Vec::new(),
            labels: BTreeMap::new(),
            taints: Vec::new(),
            startup_taints: Vec::new(),
            node_class_label: None,
            limits: ResourceList::new(),
            instance_types: vec![Arc::new(it)],
            packing: None,
        }
    }

    fn zonal(name: &str, zone: Option<&str>) -> Pod {
        let mut p = Pod::new("ns", name);
        p.labels.insert("app".into(), "web".into());
        if let Some(z) = zone {
            p.node_selector.insert(labels::ZONE.into(), z.into());
        }
        p.topology_spread_constraints = vec![TopologySpreadConstraint {
            max_skew: 1,
            topology_key: labels::ZONE.into(),
            when_unsatisfiable: Default::default(),
            label_selector: Some(LabelSelector::from_labels([("app", "web")])),
            min_domains: None,
            node_affinity_policy: None,
            node_taints_policy: None,
            match_label_keys: Vec::new(),
        }];
        p
    }

    fn solve_metrics(zones: &[&str], pods: Vec<Pod>) -> SolveMetrics {
        let input = SchedulingInput {
            node_pools: vec![pool(zones)],
            pods,
            ..SchedulingInput::default()
        };
        solve(&input, &SchedulerOptions::default()).metrics
    }

    #[test]
    fn effective_zone_intersects_the_zone_requirement_with_the_spread_domains() {
        // One zone in the universe: the spread allows only it.
        let m = solve_metrics(&["a"], vec![zonal("p", None)]);
        assert_eq!(
            m.pending_pods_by_effective_zone,
            [("a".to_string(), 1)].into()
        );
        // Two zones: flexible; a selector narrows it to one; a zone outside the domains: none.
        let m = solve_metrics(
            &["a", "b"],
            vec![
                zonal("p", None),
                zonal("q", Some("b")),
                zonal("r", Some("c")),
            ],
        );
        let expected: BTreeMap<String, usize> = [
            (ZONE_FLEXIBLE.to_string(), 1),
            ("b".to_string(), 1),
            (ZONE_NONE.to_string(), 1),
        ]
        .into();
        assert_eq!(m.pending_pods_by_effective_zone, expected);
        assert_eq!(m.queue_depth_max, 3);
        assert_eq!(m.unschedulable_pods, 1);
    }
}

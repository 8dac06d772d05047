//! Volumes in the solve (upstream `volumetopology.go` / `volumeusage.go`): attach limits
//! on existing nodes, and the volumes' topology on existing nodes and new NodeClaims.
//!
//! - [`PodVolumes`]: what a pod's volumes mean for its placement, computed once per pod before
//!   the queue is built (validation failures leave the pod out of the solve);
//! - [`NodeVolumes`]: an existing node's attach-limited volumes and its per-driver limits.
//!
//! New NodeClaims are not volume-limited: their CSI limits are unknown until they register.

use crate::model::Pod;
use crate::requirements::Requirements;
use crate::volumes::{CsiNodeLimits, VolumeCatalog, VolumeError, VolumeUsage};

use super::ExistingNodeRef;

/// What a pod's volumes require of its node.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct PodVolumes {
    /// Topology alternatives, tried in order; empty when no volume constrains the node.
    pub(crate) alternatives: Vec<Requirements>,
    /// Attach-limited volumes per driver.
    pub(crate) usage: VolumeUsage,
}

impl PodVolumes {
    /// Validates the pod's volumes against the catalog and resolves their alternatives and
    /// usage. Pods without volumes skip the look-ups.
    pub(crate) fn prepare(catalog: &VolumeCatalog, pod: &Pod) -> Result<PodVolumes, VolumeError> {
        if pod.volumes.is_empty() {
            return Ok(PodVolumes::default());
        }
        catalog.validate_pod(pod)?;
        Ok(PodVolumes {
            alternatives: catalog.topology_alternatives(pod)?,
            usage: catalog.pod_volume_usage(pod),
        })
    }

    /// Whether no volume constrains the node's topology.
    pub(crate) fn unconstrained(&self) -> bool {
        self.alternatives.is_empty()
    }

    /// The alternatives to try, in order: each alternative, or a single `None` (no volume
    /// requirement) when unconstrained.
    pub(crate) fn alternatives(&self) -> impl Iterator<Item = Option<&Requirements>> {
        let none = self.unconstrained().then_some(None);
        none.into_iter().chain(self.alternatives.iter().map(Some))
    }
}

/// An existing node's attach-limited volumes and limits.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct NodeVolumes {
    limits: CsiNodeLimits,
    usage: VolumeUsage,
    /// Whether the volumes already on the node exceed a limit (then no pod fits:
    /// upstream `existingnode.go` checks the union even for pods without volumes).
    over_limit: bool,
}

impl NodeVolumes {
    /// The volumes of the node's pods (terminal pods excluded) and its limits.
    pub(crate) fn new(catalog: &VolumeCatalog, input: &ExistingNodeRef<'_>) -> NodeVolumes {
        let mut volumes = NodeVolumes {
            limits: input.volume_limits.clone(),
            ..NodeVolumes::default()
        };
        for pod in input.pods.iter().filter(|p| !p.is_terminal()) {
            if !pod.volumes.is_empty() {
                volumes.add(&catalog.pod_volume_usage(pod));
            }
        }
        volumes.over_limit = volumes
            .usage
            .iter()
            .any(|(driver, claims)| exceeds(&volumes.limits, driver, claims.len()));
        volumes
    }

    /// Upstream `existingnode.go`: whether, for every limited driver, the distinct claims already
    /// on the node together with the pod's stay within the limit. Returns a description of the
    /// first driver over its limit.
    pub(crate) fn fits(&self, pod: &VolumeUsage) -> Result<(), String> {
        if self.over_limit {
            return Err("the node's volumes already exceed its volume limits".into());
        }
        if self.limits.is_empty() {
            return Ok(());
        }
        for (driver, claims) in pod {
            let on_node = self.usage.get(driver);
            let new = claims
                .iter()
                .filter(|c| on_node.is_none_or(|n| !n.contains(*c)))
                .count();
            let count = on_node.map_or(0, |n| n.len()) + new;
            if exceeds(&self.limits, driver, count) {
                return Err(format!(
                    "would exceed volume limit of driver {driver:?} ({count} volumes, limit {})",
                    self.limits.get(driver).copied().unwrap_or(0)
                ));
            }
        }
        Ok(())
    }

    /// Records a pod's volumes on the node.
    pub(crate) fn add(&mut self, pod: &VolumeUsage) {
        for (driver, claims) in pod {
            self.usage
                .entry(driver.clone())
                .or_default()
                .extend(claims.iter().cloned());
        }
    }
}

fn exceeds(limits: &CsiNodeLimits, driver: &str, count: usize) -> bool {
    limits
        .get(driver)
        .is_some_and(|&limit| count > usize::try_from(limit).unwrap_or(usize::MAX))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::Arc;

    use super::*;
    use crate::labels;
    use crate::model::{ClusterNode, InstanceType, Offering, Overhead, PodPhase};
    use crate::requirements::{NodeSelectorRequirement, Operator, Requirement};
    use crate::resources::{Quantity, ResourceList};
    use crate::scheduling::{
        ExistingNodeInput, NodePoolInput, PodErrorKind, SchedulerOptions, SchedulingInput, solve,
    };
    use crate::volumes::{
        PersistentVolume, PersistentVolumeClaim, PodVolume, StorageClass, TopologySelectorTerm,
        VolumeBindingMode,
    };

    fn usage(pairs: &[(&str, &[&str])]) -> VolumeUsage {
        pairs
            .iter()
            .map(|(d, cs)| (d.to_string(), cs.iter().map(|c| c.to_string()).collect()))
            .collect()
    }

    fn rl(pairs: &[(&str, i64)]) -> ResourceList {
        pairs
            .iter()
            .map(|(k, v)| (*k, Quantity::from_units(*v)))
            .collect()
    }

    /// A catalog class "wffc" (driver `d`) limited to `zones`, and claims `c0..c<n>` of it.
    fn catalog(zones: &[&str], claims: usize) -> VolumeCatalog {
        let mut c = VolumeCatalog::default();
        let mut class = StorageClass::new("wffc", "d");
        class.volume_binding_mode = VolumeBindingMode::WaitForFirstConsumer;
        class.allowed_topologies = zones
            .iter()
            .map(|z| TopologySelectorTerm::zones([*z]))
            .collect();
        c.add_storage_class(class);
        for i in 0..claims {
            let mut claim = PersistentVolumeClaim::new("ns", format!("c{i}"));
            claim.storage_class_name = Some("wffc".into());
            c.add_claim(claim);
        }
        c
    }

    fn pod(name: &str, claims: &[&str]) -> Pod {
        let mut p = Pod::new("ns", name);
        p.requests = rl(&[("cpu", 1)]);
        for c in claims {
            p.volumes.push(PodVolume::claim(*c, *c));
        }
        p
    }

    fn pool(zones: &[&str]) -> NodePoolInput {
        let offerings = ["z1", "z2"]
            .iter()
            .map(|z| Offering::new(*z, labels::CAPACITY_TYPE_ON_DEMAND, 1.0))
            .collect();
        let it = InstanceType::new(
            "big",
            crate::requirements::Requirements::new(),
            offerings,
            rl(&[("cpu", 64), ("pods", 110)]),
            Overhead::default(),
        );
        NodePoolInput {
            name: "default".into(),
            weight: 0,
            requirements: vec![NodeSelectorRequirement::new(
                labels::ZONE,
                Operator::In,
                zones.iter().copied(),
            )],
            labels: BTreeMap::new(),
            taints: vec![],
            startup_taints: vec![],
            node_class_label: None,
            limits: ResourceList::new(),
            instance_types: vec![Arc::new(it)],
            packing: None,
        }
    }

    fn node(name: &str, zone: &str, pods: Vec<Pod>, limits: &[(&str, u32)]) -> ExistingNodeInput {
        let mut n = ClusterNode::new(name);
        n.labels.insert(labels::ZONE.into(), zone.into());
        n.allocatable = rl(&[("cpu", 64), ("pods", 110)]);
        ExistingNodeInput {
            node: n,
            pods: pods
                .into_iter()
                .map(|mut p| {
                    p.node_name = Some(name.into());
                    if p.phase == PodPhase::Pending {
                        p.phase = PodPhase::Running;
                    }
                    p
                })
                .collect(),
            volume_limits: limits.iter().map(|(d, l)| (d.to_string(), *l)).collect(),
        }
    }

    #[test]
    fn node_volumes_count_distinct_claims_per_driver() {
        let c = catalog(&["z1"], 4);
        let mut finished = pod("done", &["c3"]);
        finished.phase = PodPhase::Succeeded;
        let input = node(
            "n",
            "z1",
            vec![pod("a", &["c0", "c1"]), finished],
            &[("d", 3)],
        );
        let mut v = NodeVolumes::new(&c, &ExistingNodeRef::from(&input));
        // c0 and c1 are on the node (the finished pod's c3 is not): room for one more.
        assert!(v.fits(&usage(&[("d", &["ns/c0", "ns/c2"])])).is_ok());
        assert!(v.fits(&usage(&[("d", &["ns/c2", "ns/c3"])])).is_err());
        assert!(
            v.fits(&usage(&[("other", &["ns/x", "ns/y", "ns/z", "ns/w"])]))
                .is_ok()
        );
        v.add(&usage(&[("d", &["ns/c2"])]));
        assert!(v.fits(&usage(&[("d", &["ns/c0"])])).is_ok());
        let err = v.fits(&usage(&[("d", &["ns/c3"])])).unwrap_err();
        assert!(err.contains("limit 3"), "{err}");
        assert!(v.fits(&VolumeUsage::new()).is_ok());
    }

    #[test]
    fn a_node_over_its_limits_takes_no_pod() {
        let c = catalog(&["z1"], 2);
        let input = node("n", "z1", vec![pod("a", &["c0", "c1"])], &[("d", 1)]);
        let v = NodeVolumes::new(&c, &ExistingNodeRef::from(&input));
        assert!(v.fits(&VolumeUsage::new()).is_err());
    }

    #[test]
    fn alternatives_yield_none_when_unconstrained() {
        let v = PodVolumes::default();
        assert_eq!(v.alternatives().collect::<Vec<_>>(), [None]);
        let mut r = crate::requirements::Requirements::new();
        r.add(Requirement::new(labels::ZONE, Operator::In, ["z1"]));
        let v = PodVolumes {
            alternatives: vec![r.clone()],
            usage: VolumeUsage::new(),
        };
        assert_eq!(v.alternatives().collect::<Vec<_>>(), [Some(&r)]);
    }

    #[test]
    fn pods_with_unusable_claims_are_ignored() {
        let input = SchedulingInput {
            node_pools: vec![pool(&["z1", "z2"])],
            pods: vec![pod("a", &["missing"]), pod("b", &[])],
            volumes: catalog(&["z1"], 0),
            ..SchedulingInput::default()
        };
        let r = solve(&input, &SchedulerOptions::default());
        let err = &r.pod_errors["ns/a"];
        assert_eq!(err.kind, PodErrorKind::Invalid);
        assert!(
            err.message
                .contains("persistentvolumeclaim ns/missing not found"),
            "{}",
            err.message
        );
        assert_eq!(r.new_node_claims.len(), 1);
        assert_eq!(r.new_node_claims[0].pods, ["ns/b"]);
    }

    #[test]
    fn the_first_workable_alternative_constrains_the_node_claim() {
        // The class allows z1 or z2; the pool only z2: the second alternative is used, and it
        // narrows the claim, not the pod.
        let input = SchedulingInput {
            node_pools: vec![pool(&["z2"])],
            pods: vec![pod("a", &["c0"])],
            volumes: catalog(&["z1", "z2"], 1),
            ..SchedulingInput::default()
        };
        let r = solve(&input, &SchedulerOptions::default());
        assert!(r.pod_errors.is_empty(), "{:?}", r.pod_errors);
        let zone = r.new_node_claims[0].requirements.get(labels::ZONE).unwrap();
        assert_eq!(zone.values().collect::<Vec<_>>(), ["z2"]);

        // An existing node in z1 cannot take a pod whose claim allows only z2.
        let input = SchedulingInput {
            node_pools: vec![pool(&["z1", "z2"])],
            existing_nodes: vec![node("n1", "z1", vec![], &[])],
            pods: vec![pod("a", &["c0"]), pod("b", &[])],
            volumes: catalog(&["z2"], 1),
            ..SchedulingInput::default()
        };
        let r = solve(&input, &SchedulerOptions::default());
        assert_eq!(r.existing_nodes[0].pods, ["ns/b"]);
        assert_eq!(r.new_node_claims[0].pods, ["ns/a"]);
    }

    #[test]
    fn existing_nodes_respect_volume_limits_and_shared_claims() {
        let c = catalog(&["z1"], 3);
        let input = SchedulingInput {
            node_pools: vec![pool(&["z1"])],
            existing_nodes: vec![node("n1", "z1", vec![pod("bound", &["c0"])], &[("d", 2)])],
            // a shares c0, b brings c1 (limit reached), d brings c2: over the limit.
            pods: vec![pod("a", &["c0"]), pod("b", &["c1"]), pod("d", &["c2"])],
            volumes: c,
            ..SchedulingInput::default()
        };
        let r = solve(&input, &SchedulerOptions::default());
        assert!(r.pod_errors.is_empty(), "{:?}", r.pod_errors);
        assert_eq!(r.existing_nodes[0].pods, ["ns/a", "ns/b"]);
        assert_eq!(r.new_node_claims.len(), 1);
        assert_eq!(r.new_node_claims[0].pods, ["ns/d"]);
    }

    #[test]
    fn a_bound_volume_that_fits_nowhere_fails_on_every_pool() {
        let mut c = VolumeCatalog::default();
        let mut pv = PersistentVolume::csi("pv", "d");
        pv.node_affinity = vec![crate::model::NodeSelectorTerm {
            match_expressions: vec![NodeSelectorRequirement::new(
                labels::ZONE,
                Operator::In,
                ["z9"],
            )],
        }];
        c.add_volume(pv);
        c.add_claim(PersistentVolumeClaim::bound("ns", "c", "pv"));
        let input = SchedulingInput {
            node_pools: vec![pool(&["z1", "z2"])],
            pods: vec![pod("a", &["c"])],
            volumes: c,
            ..SchedulingInput::default()
        };
        let r = solve(&input, &SchedulerOptions::default());
        let err = &r.pod_errors["ns/a"];
        assert_eq!(err.kind, PodErrorKind::Requirements);
        assert!(
            err.message.contains("incompatible volume requirements"),
            "{}",
            err.message
        );
    }
}

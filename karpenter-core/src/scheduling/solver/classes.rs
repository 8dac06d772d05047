//! Pod classes: the pods of a solve grouped by scheduling signature.
//!
//! Replicas of one Deployment differ only in their identity (name, UID, creation time), which
//! the scheduler reads for the queue order, the results and the per-pod topology entry, never
//! for a decision. Everything else it reads from a pod is the pod's [`PodSignature`]; pods with
//! equal signatures form a class, and what depends only on the signature is computed once per
//! class ([`PodClass`]): validation and its error text, the pod's requirements at each
//! relaxation step, its dense requests. Per pod there remain its class id and its own state
//! (relaxation step and placement). The topology registers a class's pods from one entry (see
//! [`TopologyInput::batch_classes`](crate::scheduling::topology::TopologyInput)).

use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use rustc_hash::FxHashMap;

use crate::hostports::HostPort;
use crate::labels::LabelPolicy;
use crate::model::{NodeAffinity, Pod, PodAffinity, PodPhase, PodVolume, TopologySpreadConstraint};
use crate::resources::ResourceList;
use crate::taints::Toleration;

use super::super::dense::{Res, ResourceIndex};
use super::super::podreqs::{self, PodRequirements};
use super::super::{PodError, PodErrorKind, PreferencePolicy};

/// Everything the scheduler reads from a pod except its identity: two pods with equal
/// signatures are interchangeable for every decision of a solve.
///
/// Read by the solver ([`podreqs`], taints, host ports, volumes, DRA, requests, the pending
/// metric) and by the topology (namespace and labels for selectors, namespaces and
/// `matchLabelKeys`; spreads, pod (anti-)affinity; node selector, node affinity and tolerations
/// for spread node filters and group domains). Pods with volumes keep their UID in the
/// signature: a generic ephemeral volume's claim is named after the pod, so their volume
/// topology is per pod.
///
/// Equality compares every field; the hash reads the cheap, most telling ones (namespace,
/// labels, requests, node selector and how many terms of each kind), which equal signatures
/// share.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PodSignature<'p> {
    namespace: &'p str,
    labels: &'p BTreeMap<String, String>,
    node_selector: &'p BTreeMap<String, String>,
    node_affinity: &'p Option<NodeAffinity>,
    pod_affinity: &'p Option<PodAffinity>,
    pod_anti_affinity: &'p Option<PodAffinity>,
    tolerations: &'p [Toleration],
    topology_spread_constraints: &'p [TopologySpreadConstraint],
    requests: &'p ResourceList,
    host_ports: &'p [HostPort],
    has_resource_claims: bool,
    phase: PodPhase,
    volumes: &'p [PodVolume],
    /// The UID of a pod with volumes (see the type's documentation); `None` otherwise.
    volume_owner: Option<&'p str>,
}

impl Hash for PodSignature<'_> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.namespace.hash(state);
        self.labels.hash(state);
        self.requests.hash(state);
        self.node_selector.hash(state);
        let terms =
            |a: &Option<PodAffinity>| a.as_ref().map(|a| (a.required.len(), a.preferred.len()));
        (
            self.node_affinity
                .as_ref()
                .map(|a| (a.required.len(), a.preferred.len())),
            terms(self.pod_affinity),
            terms(self.pod_anti_affinity),
            self.tolerations.len(),
            self.topology_spread_constraints.len(),
            self.host_ports.len(),
            self.volumes.len(),
        )
            .hash(state);
        self.volume_owner.hash(state);
    }
}

impl<'p> PodSignature<'p> {
    /// The signature of `pod`.
    pub(crate) fn of(pod: &'p Pod) -> PodSignature<'p> {
        PodSignature {
            namespace: &pod.namespace,
            labels: &pod.labels,
            node_selector: &pod.node_selector,
            node_affinity: &pod.node_affinity,
            pod_affinity: &pod.pod_affinity,
            pod_anti_affinity: &pod.pod_anti_affinity,
            tolerations: &pod.tolerations,
            topology_spread_constraints: &pod.topology_spread_constraints,
            requests: &pod.requests,
            host_ports: &pod.host_ports,
            has_resource_claims: pod.has_resource_claims,
            phase: pod.phase,
            volumes: &pod.volumes,
            volume_owner: (!pod.volumes.is_empty()).then_some(pod.uid.as_str()),
        }
    }
}

/// Numbers `keys` by first appearance: per key, its id (equal keys, equal ids; ids in order of
/// first appearance), and per id the position of its first key.
pub(super) fn first_appearance_ids<K: Hash + Eq>(
    keys: impl IntoIterator<Item = K>,
) -> (Vec<u32>, Vec<usize>) {
    let mut seen: FxHashMap<K, u32> = FxHashMap::default();
    let mut ids = Vec::new();
    let mut firsts = Vec::new();
    for (i, key) in keys.into_iter().enumerate() {
        let next = u32::try_from(firsts.len()).unwrap_or(u32::MAX);
        let id = *seen.entry(key).or_insert(next);
        if id == next {
            firsts.push(i);
        }
        ids.push(id);
    }
    (ids, firsts)
}

/// What a class's pods share, computed once per class.
pub(super) struct PodClass {
    /// Why the class's pods are left out before scheduling (spec 1.5), the same text for
    /// each; `None` when they are valid.
    pub(super) invalid: Option<PodError>,
    /// The requirements at each relaxation step reached so far by some pod of the class
    /// (step 0: the unrelaxed pod). Relaxation reads only the signature, so step `k` is the
    /// same for every pod of the class.
    steps: Vec<Arc<PodRequirements>>,
    /// The dense scheduling requests (with the implicit `pods: 1`).
    pub(super) requests: Res,
}

/// The classes of a solve's pods.
pub(super) struct PodClasses {
    /// Per pod of the request: its class id.
    class_of: Vec<u32>,
    classes: Vec<PodClass>,
}

impl PodClasses {
    /// Groups `pods` by signature, in order of first appearance, and computes each class's
    /// shared state from its first pod. `known`: per pod, a class id computed earlier for many
    /// solves (the hints' [`PodHint::class`](super::hints::PodHint)): pods with equal ids have
    /// equal signatures, so the signatures are not hashed again; the classes and their order are
    /// the same.
    pub(super) fn build(
        pods: &[&Pod],
        known: Option<&[u32]>,
        policy: &LabelPolicy,
        preference_policy: PreferencePolicy,
        index: &ResourceIndex,
    ) -> PodClasses {
        let (class_of, firsts) = match known.filter(|k| k.len() == pods.len()) {
            Some(known) => first_appearance_ids(known.iter().copied()),
            None => first_appearance_ids(pods.iter().map(|p| PodSignature::of(p))),
        };
        let classes = firsts
            .iter()
            .filter_map(|&i| pods.get(i))
            .map(|pod| PodClass::of(pod, policy, preference_policy, index))
            .collect();
        PodClasses { class_of, classes }
    }

    /// Per pod of the request: its class id.
    pub(super) fn ids(&self) -> &[u32] {
        &self.class_of
    }

    /// How many classes there are.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.classes.len()
    }

    /// The class id of pod `idx`.
    pub(super) fn class_id(&self, idx: usize) -> u32 {
        self.class_of.get(idx).copied().unwrap_or(u32::MAX)
    }

    /// The class of pod `idx`.
    pub(super) fn of_pod(&self, idx: usize) -> Option<&PodClass> {
        self.classes.get(self.class_id(idx) as usize)
    }

    /// The requirements of class `class` at relaxation step `step`, where `relaxed` is a pod
    /// of the class relaxed `step` times and `changed` says whether the last relaxation
    /// changed its node selector terms (otherwise the requirements are those of the step
    /// before). Computed by the first pod of the class to reach the step.
    pub(super) fn step_requirements(
        &mut self,
        class: u32,
        step: usize,
        relaxed: &Pod,
        changed: bool,
        preference_policy: PreferencePolicy,
    ) -> Arc<PodRequirements> {
        let compute = || Arc::new(podreqs::pod_requirements(relaxed, preference_policy));
        let Some(c) = self.classes.get_mut(class as usize) else {
            return compute();
        };
        if let Some(r) = c.steps.get(step) {
            return r.clone();
        }
        let r = match c.steps.last() {
            Some(previous) if !changed => previous.clone(),
            _ => compute(),
        };
        // Steps are reached in order (a pod at step k passed every step before), so this
        // one is the next.
        if c.steps.len() == step {
            c.steps.push(r.clone());
        }
        r
    }
}

impl PodClass {
    fn of(
        pod: &Pod,
        policy: &LabelPolicy,
        preference_policy: PreferencePolicy,
        index: &ResourceIndex,
    ) -> PodClass {
        let requests = index.dense(&pod.scheduling_requests());
        let invalid = |message: String| PodClass {
            invalid: Some(PodError {
                kind: PodErrorKind::Invalid,
                message,
            }),
            steps: Vec::new(),
            requests: requests.clone(),
        };
        if let Err(m) = podreqs::validate_pod(pod, policy) {
            return invalid(format!("ignoring pod: {m}"));
        }
        let reqs = podreqs::pod_requirements(pod, preference_policy);
        if podreqs::rejects_karpenter(&reqs) {
            return invalid("pod requires karpenter.sh/nodepool DoesNotExist: it does not want Karpenter capacity".into());
        }
        PodClass {
            invalid: None,
            steps: vec![Arc::new(reqs)],
            requests,
        }
    }

    /// The requirements of the unrelaxed pod (`None` for an invalid class).
    pub(super) fn unrelaxed(&self) -> Option<&Arc<PodRequirements>> {
        self.steps.first()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{
        LabelSelector, NodeSelectorTerm, PodAffinityTerm, Timestamp, WhenUnsatisfiable,
    };
    use crate::requirements::{NodeSelectorRequirement, Operator};
    use crate::resources::Quantity;
    use crate::taints::TolerationOperator;

    fn base() -> Pod {
        let mut p = Pod::new("default", "web-1");
        p.labels.insert("app".into(), "web".into());
        p.requests.insert("cpu", Quantity::from_milli(500));
        p
    }

    fn signature_differs(change: impl Fn(&mut Pod)) -> bool {
        let a = base();
        let mut b = base();
        change(&mut b);
        PodSignature::of(&a) != PodSignature::of(&b)
    }

    #[test]
    fn identity_is_not_part_of_the_signature() {
        let a = base();
        let mut b = base();
        b.name = "web-2".into();
        b.uid = "uid-2".into();
        b.creation_timestamp = Timestamp::from_second(7).expect("timestamp");
        b.annotations.insert("note".into(), "x".into());
        assert_eq!(PodSignature::of(&a), PodSignature::of(&b));
        let classes = PodClasses::build(
            &[&a, &b],
            None,
            &LabelPolicy::core(),
            PreferencePolicy::Respect,
            &ResourceIndex::default(),
        );
        assert_eq!(classes.len(), 1);
        assert_eq!(classes.ids(), &[0, 0]);
    }

    #[test]
    fn every_field_the_scheduler_reads_separates_classes() {
        let term = |key: &str| NodeSelectorTerm {
            match_expressions: vec![NodeSelectorRequirement::new(key, Operator::Exists, [""; 0])],
        };
        let affinity_term =
            || PodAffinityTerm::new(LabelSelector::default(), "kubernetes.io/hostname");
        type Change = Box<dyn Fn(&mut Pod)>;
        let changes: Vec<(&str, Change)> = vec![
            ("namespace", Box::new(|p| p.namespace = "other".into())),
            (
                "labels",
                Box::new(|p| {
                    p.labels.insert("app".into(), "api".into());
                }),
            ),
            (
                "node selector",
                Box::new(|p| {
                    p.node_selector.insert("disk".into(), "ssd".into());
                }),
            ),
            (
                "node affinity",
                Box::new(move |p| {
                    p.node_affinity = Some(NodeAffinity {
                        required: vec![term("disk")],
                        preferred: Vec::new(),
                    });
                }),
            ),
            (
                "pod affinity",
                Box::new(move |p| {
                    p.pod_affinity = Some(PodAffinity {
                        required: vec![affinity_term()],
                        preferred: Vec::new(),
                    });
                }),
            ),
            (
                "pod anti-affinity",
                Box::new(move |p| {
                    p.pod_anti_affinity = Some(PodAffinity {
                        required: vec![affinity_term()],
                        preferred: Vec::new(),
                    });
                }),
            ),
            (
                "tolerations",
                Box::new(|p| {
                    p.tolerations.push(Toleration {
                        key: "gpu".into(),
                        operator: Some(TolerationOperator::Exists),
                        ..Toleration::default()
                    });
                }),
            ),
            (
                "spread constraints",
                Box::new(|p| {
                    p.topology_spread_constraints.push(
                        TopologySpreadConstraint::new(
                            1,
                            "topology.kubernetes.io/zone",
                            WhenUnsatisfiable::DoNotSchedule,
                        )
                        .with_label_selector(LabelSelector::default()),
                    );
                }),
            ),
            (
                "requests",
                Box::new(|p| {
                    p.requests.insert("cpu", Quantity::from_milli(501));
                }),
            ),
            (
                "host ports",
                Box::new(|p| {
                    p.host_ports.push(HostPort::new("", 80, "TCP"));
                }),
            ),
            ("DRA claims", Box::new(|p| p.has_resource_claims = true)),
            ("phase", Box::new(|p| p.phase = PodPhase::Running)),
            (
                "volumes",
                Box::new(|p| {
                    p.volumes.push(PodVolume::claim("data", "data-web-1"));
                }),
            ),
        ];
        for (field, change) in &changes {
            assert!(signature_differs(change), "{field} must separate classes");
        }
    }

    #[test]
    fn pods_with_volumes_never_share_a_class() {
        let mut a = base();
        a.volumes.push(PodVolume::claim("data", "shared"));
        let mut b = a.clone();
        b.uid = "uid-2".into();
        assert_ne!(PodSignature::of(&a), PodSignature::of(&b));
    }

    /// Class ids known in advance (another numbering of the same signatures) give the same
    /// classes, in the same order, as hashing the signatures.
    #[test]
    fn known_class_ids_give_the_same_classes() {
        let a = base();
        let mut b = base();
        b.labels.insert("tier".into(), "front".into());
        let mut a2 = base();
        a2.name = "web-3".into();
        a2.uid = "uid-3".into();
        let pods = [&b, &a, &a2, &b];
        let build = |known: Option<&[u32]>| {
            PodClasses::build(
                &pods,
                known,
                &LabelPolicy::core(),
                PreferencePolicy::Respect,
                &ResourceIndex::default(),
            )
        };
        let hashed = build(None);
        assert_eq!(hashed.ids(), &[0, 1, 1, 0]);
        let known = build(Some(&[7, 2, 2, 7]));
        assert_eq!(known.ids(), hashed.ids());
        assert_eq!(known.len(), 2);
        // A known list of the wrong length is ignored.
        assert_eq!(build(Some(&[7])).ids(), hashed.ids());
    }

    #[test]
    fn invalid_classes_carry_the_validation_error() {
        let mut a = base();
        a.node_selector
            .insert("kubernetes.io/hostname".into(), "h".into());
        let classes = PodClasses::build(
            &[&a],
            None,
            &LabelPolicy::core(),
            PreferencePolicy::Respect,
            &ResourceIndex::default(),
        );
        let class = classes.of_pod(0).expect("one class");
        let err = class.invalid.as_ref().expect("invalid");
        assert!(
            err.message
                .starts_with("ignoring pod: nodeSelector uses restricted label")
        );
        assert!(class.unrelaxed().is_none());
    }
}

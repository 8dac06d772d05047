//! Default topology spread constraints (upstream `provisioner.go`, upstream `defaultconstraints.go`).
//!
//! kube-scheduler's `PodTopologySpread` plugin can be configured with default constraints
//! (`--scheduler-config`, `podTopologySpread.defaultConstraints`) that apply to every pod
//! declaring none of its own. Karpenter mirrors them in its simulation so that it launches the
//! nodes kube-scheduler will then spread pods over. Each default gets a label selector deduced
//! from the pod's workload like kube-scheduler's `helper.DefaultSelector`:
//!
//! 1. the labels of every Service in the pod's namespace whose selector matches the pod are
//!    merged (a Service without a selector selects nothing);
//! 2. a controlling ReplicationController's selector labels are merged too;
//! 3. a controlling ReplicaSet's or StatefulSet's selector is ANDed as expressions (its
//!    `matchLabels` become `In` expressions). An invalid selector is ignored.
//!
//! A pod for which nothing can be deduced (no matching Service, no known supported owner, or
//! only empty selectors) gets no defaults. This is a pre-processing step: the caller applies
//! [`apply_default_constraints`] to the *copies* of the pods it passes to
//! [`solve`](super::solve), as upstream's provisioner does, and leaves the cluster's pods alone.
//!
//! ```
//! use karpenter_core::model::{LabelSelector, OwnerReference, Pod, TopologySpreadConstraint};
//! use karpenter_core::scheduling::defaults::{
//!     apply_default_constraints, OwnerIndex, WorkloadKind, WorkloadSelector,
//! };
//!
//! let mut pod = Pod::new("default", "web-abc");
//! pod.labels.insert("app".into(), "web".into());
//! pod.owner = Some(OwnerReference::new("apps/v1", "ReplicaSet", "web").with_controller(true));
//! let owners = OwnerIndex::new([WorkloadSelector {
//!     namespace: "default".into(),
//!     kind: WorkloadKind::ReplicaSet,
//!     name: "web".into(),
//!     selector: LabelSelector::from_labels([("app", "web")]),
//! }]);
//! let zonal: TopologySpreadConstraint = serde_json::from_value(serde_json::json!({
//!     "maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
//! }))
//! .unwrap();
//! let mut pods = vec![pod];
//! apply_default_constraints(&mut pods, &[zonal], &[], &owners);
//! let tsc = &pods[0].topology_spread_constraints[0];
//! assert!(tsc.label_selector.as_ref().unwrap().matches(&pods[0].labels));
//! ```

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::model::{
    LabelSelector, LabelSelectorRequirement, Pod, SelectorOperator, TopologySpreadConstraint,
};

/// A Service, as far as default spread selectors care.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Service {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// `spec.selector`. `None` (a Service without selector) selects no pod; an empty map
    /// selects every pod of the namespace but contributes no label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<BTreeMap<String, String>>,
}

impl Service {
    /// Whether the Service selects `pod`: same namespace and every selector label matches.
    pub fn selects(&self, pod: &Pod) -> bool {
        self.namespace == pod.namespace
            && self
                .selector
                .as_ref()
                .is_some_and(|s| s.iter().all(|(k, v)| pod.labels.get(k) == Some(v)))
    }
}

/// The workload kinds whose selectors kube-scheduler's `DefaultSelector` reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum WorkloadKind {
    /// `v1` ReplicationController: selector labels are merged with the Services' labels.
    ReplicationController,
    /// `apps/v1` ReplicaSet: selector ANDed as expressions.
    ReplicaSet,
    /// `apps/v1` StatefulSet: selector ANDed as expressions.
    StatefulSet,
}

impl WorkloadKind {
    /// The kind named by an owner reference (`kind`, and `apiVersion` unless empty), if it is
    /// one of the supported ones.
    pub fn of_owner(kind: &str, api_version: &str) -> Option<WorkloadKind> {
        let (k, expected) = match kind {
            "ReplicationController" => (WorkloadKind::ReplicationController, "v1"),
            "ReplicaSet" => (WorkloadKind::ReplicaSet, "apps/v1"),
            "StatefulSet" => (WorkloadKind::StatefulSet, "apps/v1"),
            _ => return None,
        };
        (api_version.is_empty() || api_version == expected).then_some(k)
    }
}

/// The selector of a workload that may own pods.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadSelector {
    /// Namespace.
    pub namespace: String,
    /// Kind.
    pub kind: WorkloadKind,
    /// Name.
    pub name: String,
    /// `spec.selector`. For a ReplicationController (whose selector is a plain label map) only
    /// `match_labels` is read.
    pub selector: LabelSelector,
}

/// Workload selectors by (namespace, kind, name), for looking up a pod's controller.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OwnerIndex {
    selectors: BTreeMap<(String, WorkloadKind, String), LabelSelector>,
}

impl OwnerIndex {
    /// An index of `workloads` (a later entry replaces an earlier one with the same key).
    pub fn new(workloads: impl IntoIterator<Item = WorkloadSelector>) -> OwnerIndex {
        let mut index = OwnerIndex::default();
        for w in workloads {
            index.insert(w);
        }
        index
    }

    /// Adds or replaces a workload.
    pub fn insert(&mut self, workload: WorkloadSelector) {
        self.selectors.insert(
            (workload.namespace, workload.kind, workload.name),
            workload.selector,
        );
    }

    /// The selector of a workload.
    pub fn get(&self, namespace: &str, kind: WorkloadKind, name: &str) -> Option<&LabelSelector> {
        self.selectors
            .get(&(namespace.to_string(), kind, name.to_string()))
    }

    /// The number of workloads.
    pub fn len(&self) -> usize {
        self.selectors.len()
    }

    /// Whether the index is empty.
    pub fn is_empty(&self) -> bool {
        self.selectors.is_empty()
    }
}

/// Whether a selector converts to a Kubernetes selector (upstream `LabelSelectorAsSelector`):
/// `In`/`NotIn` need values, `Exists`/`DoesNotExist` take none.
fn is_valid(selector: &LabelSelector) -> bool {
    selector.match_expressions.iter().all(|e| match e.operator {
        SelectorOperator::In | SelectorOperator::NotIn => !e.values.is_empty(),
        SelectorOperator::Exists | SelectorOperator::DoesNotExist => e.values.is_empty(),
    })
}

/// The selector kube-scheduler's `helper.DefaultSelector` deduces for `pod` (see the
/// [module documentation](self)), or `None` when it would be empty.
pub fn default_selector(
    pod: &Pod,
    services: &[Service],
    owners: &OwnerIndex,
) -> Option<LabelSelector> {
    let mut labels: BTreeMap<String, String> = BTreeMap::new();
    for svc in services.iter().filter(|s| s.selects(pod)) {
        if let Some(sel) = &svc.selector {
            labels.extend(sel.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
    }
    let mut expressions: Vec<LabelSelectorRequirement> = Vec::new();
    let owner = pod.owner.as_ref().and_then(|o| {
        let kind = WorkloadKind::of_owner(&o.kind, &o.api_version)?;
        Some((kind, owners.get(&pod.namespace, kind, &o.name)?))
    });
    match owner {
        Some((WorkloadKind::ReplicationController, sel)) => {
            labels.extend(sel.match_labels.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
        Some((WorkloadKind::ReplicaSet | WorkloadKind::StatefulSet, sel)) if is_valid(sel) => {
            expressions.extend(
                sel.match_labels
                    .iter()
                    .map(|(k, v)| LabelSelectorRequirement {
                        key: k.clone(),
                        operator: SelectorOperator::In,
                        values: vec![v.clone()],
                    }),
            );
            expressions.extend(sel.match_expressions.iter().cloned());
        }
        _ => {}
    }
    let selector = LabelSelector {
        match_labels: labels,
        match_expressions: expressions,
    };
    (!selector.is_empty()).then_some(selector)
}

/// Gives every pod of `pods` that declares no topology spread constraint a copy of each of
/// `defaults`, with the label selector [deduced](default_selector) for it (replacing any
/// selector the default carries). Pods with constraints of their own, and pods for which no
/// selector can be deduced, are left unchanged; so is everything when `defaults` is empty.
pub fn apply_default_constraints(
    pods: &mut [Pod],
    defaults: &[TopologySpreadConstraint],
    services: &[Service],
    owners: &OwnerIndex,
) {
    if defaults.is_empty() {
        return;
    }
    for pod in pods
        .iter_mut()
        .filter(|p| p.topology_spread_constraints.is_empty())
    {
        let Some(selector) = default_selector(pod, services, owners) else {
            continue;
        };
        pod.topology_spread_constraints = defaults
            .iter()
            .map(|d| TopologySpreadConstraint {
                label_selector: Some(selector.clone()),
                ..d.clone()
            })
            .collect();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{OwnerReference, WhenUnsatisfiable};

    fn pod(name: &str, labels: &[(&str, &str)]) -> Pod {
        let mut p = Pod::new("ns", name);
        p.labels = labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        p
    }

    fn owned(mut p: Pod, kind: &str, name: &str) -> Pod {
        p.owner = Some(OwnerReference {
            api_version: String::new(),
            kind: kind.into(),
            name: name.into(),
            controller: true,
        });
        p
    }

    fn service(ns: &str, selector: Option<&[(&str, &str)]>) -> Service {
        Service {
            namespace: ns.into(),
            name: "svc".into(),
            selector: selector.map(|s| {
                s.iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect()
            }),
        }
    }

    fn workload(kind: WorkloadKind, name: &str, selector: LabelSelector) -> WorkloadSelector {
        WorkloadSelector {
            namespace: "ns".into(),
            kind,
            name: name.into(),
            selector,
        }
    }

    fn zonal() -> TopologySpreadConstraint {
        TopologySpreadConstraint {
            max_skew: 1,
            topology_key: "topology.kubernetes.io/zone".into(),
            when_unsatisfiable: WhenUnsatisfiable::ScheduleAnyway,
            label_selector: Some(LabelSelector::from_labels([("ignored", "x")])),
            min_domains: Some(3),
            node_affinity_policy: None,
            node_taints_policy: None,
            match_label_keys: Vec::new(),
        }
    }

    #[test]
    fn services_in_the_namespace_selecting_the_pod_merge_their_labels() {
        let p = pod("a", &[("app", "web"), ("tier", "front"), ("x", "y")]);
        let services = [
            service("ns", Some(&[("app", "web")])),
            service("ns", Some(&[("tier", "front")])),
            service("ns", Some(&[("app", "db")])),
            service("other", Some(&[("x", "y")])),
            service("ns", None),
        ];
        let sel = default_selector(&p, &services, &OwnerIndex::default()).unwrap();
        assert_eq!(
            sel,
            LabelSelector::from_labels([("app", "web"), ("tier", "front")])
        );
    }

    #[test]
    fn a_service_without_selector_or_with_an_empty_one_deduces_nothing() {
        let p = pod("a", &[("app", "web")]);
        let owners = OwnerIndex::default();
        assert_eq!(default_selector(&p, &[service("ns", None)], &owners), None);
        assert_eq!(
            default_selector(&p, &[service("ns", Some(&[]))], &owners),
            None
        );
    }

    #[test]
    fn replication_controller_labels_are_merged() {
        let p = owned(
            pod("a", &[("app", "web"), ("rc", "1")]),
            "ReplicationController",
            "rc",
        );
        let owners = OwnerIndex::new([workload(
            WorkloadKind::ReplicationController,
            "rc",
            LabelSelector::from_labels([("rc", "1")]),
        )]);
        let sel = default_selector(&p, &[service("ns", Some(&[("app", "web")]))], &owners);
        assert_eq!(
            sel,
            Some(LabelSelector::from_labels([("app", "web"), ("rc", "1")]))
        );
    }

    #[test]
    fn replica_set_and_stateful_set_selectors_are_anded_as_expressions() {
        for (kind, k) in [
            ("ReplicaSet", WorkloadKind::ReplicaSet),
            ("StatefulSet", WorkloadKind::StatefulSet),
        ] {
            let p = owned(pod("a", &[("app", "web"), ("hash", "h1")]), kind, "w");
            let mut rs = LabelSelector::from_labels([("hash", "h1")]);
            rs.match_expressions.push(LabelSelectorRequirement {
                key: "app".into(),
                operator: SelectorOperator::Exists,
                values: Vec::new(),
            });
            let owners = OwnerIndex::new([workload(k, "w", rs)]);
            let sel =
                default_selector(&p, &[service("ns", Some(&[("app", "web")]))], &owners).unwrap();
            assert_eq!(sel.match_labels.len(), 1);
            assert_eq!(sel.match_labels["app"], "web");
            assert_eq!(
                sel.match_expressions,
                vec![
                    LabelSelectorRequirement {
                        key: "hash".into(),
                        operator: SelectorOperator::In,
                        values: vec!["h1".into()],
                    },
                    LabelSelectorRequirement {
                        key: "app".into(),
                        operator: SelectorOperator::Exists,
                        values: Vec::new(),
                    },
                ]
            );
            assert!(sel.matches(&p.labels));
            let mut other = p.labels.clone();
            other.insert("hash".into(), "h2".into());
            assert!(!sel.matches(&other));
        }
    }

    #[test]
    fn unknown_unsupported_or_invalid_owners_are_ignored() {
        let rs = LabelSelector::from_labels([("app", "web")]);
        let owners = OwnerIndex::new([
            workload(WorkloadKind::ReplicaSet, "w", rs.clone()),
            workload(
                WorkloadKind::StatefulSet,
                "bad",
                LabelSelector {
                    match_labels: BTreeMap::new(),
                    match_expressions: vec![LabelSelectorRequirement {
                        key: "app".into(),
                        operator: SelectorOperator::In,
                        values: Vec::new(),
                    }],
                },
            ),
        ]);
        let base = pod("a", &[("app", "web")]);
        // Unknown name, unsupported kind (a Job), wrong API group, invalid selector.
        assert_eq!(
            default_selector(&owned(base.clone(), "ReplicaSet", "x"), &[], &owners),
            None
        );
        assert_eq!(
            default_selector(&owned(base.clone(), "Job", "w"), &[], &owners),
            None
        );
        let mut wrong_group = owned(base.clone(), "ReplicaSet", "w");
        if let Some(o) = wrong_group.owner.as_mut() {
            o.api_version = "extensions/v1beta1".into();
        }
        assert_eq!(default_selector(&wrong_group, &[], &owners), None);
        assert_eq!(
            default_selector(&owned(base.clone(), "StatefulSet", "bad"), &[], &owners),
            None
        );
        // The same owner in another namespace is not the pod's.
        let mut elsewhere = owned(base.clone(), "ReplicaSet", "w");
        elsewhere.namespace = "other".into();
        assert_eq!(default_selector(&elsewhere, &[], &owners), None);
        let mut apps = owned(base, "ReplicaSet", "w");
        if let Some(o) = apps.owner.as_mut() {
            o.api_version = "apps/v1".into();
        }
        assert!(default_selector(&apps, &[], &owners).is_some());
    }

    #[test]
    fn defaults_go_only_to_pods_without_constraints_and_with_a_selector() {
        let owners = OwnerIndex::new([workload(
            WorkloadKind::ReplicaSet,
            "w",
            LabelSelector::from_labels([("app", "web")]),
        )]);
        let mut own = owned(pod("own", &[("app", "web")]), "ReplicaSet", "w");
        let mut own_tsc = zonal();
        own_tsc.max_skew = 7;
        own.topology_spread_constraints = vec![own_tsc.clone()];
        let mut pods = vec![
            owned(pod("a", &[("app", "web")]), "ReplicaSet", "w"),
            own,
            pod("orphan", &[("app", "web")]),
        ];
        let mut hostname = zonal();
        hostname.topology_key = "kubernetes.io/hostname".into();
        apply_default_constraints(&mut pods, &[zonal(), hostname], &[], &owners);

        let got = &pods[0].topology_spread_constraints;
        assert_eq!(got.len(), 2);
        let expected_selector = LabelSelector {
            match_labels: BTreeMap::new(),
            match_expressions: vec![LabelSelectorRequirement {
                key: "app".into(),
                operator: SelectorOperator::In,
                values: vec!["web".into()],
            }],
        };
        for (tsc, key) in got
            .iter()
            .zip(["topology.kubernetes.io/zone", "kubernetes.io/hostname"])
        {
            assert_eq!(tsc.topology_key, key);
            assert_eq!(tsc.label_selector.as_ref(), Some(&expected_selector));
            assert_eq!(tsc.min_domains, Some(3), "minDomains is carried");
            assert_eq!(tsc.when_unsatisfiable, WhenUnsatisfiable::ScheduleAnyway);
        }
        assert_eq!(pods[1].topology_spread_constraints, vec![own_tsc]);
        assert!(pods[2].topology_spread_constraints.is_empty());
    }

    #[test]
    fn no_defaults_is_a_no_op() {
        let owners = OwnerIndex::new([workload(
            WorkloadKind::ReplicaSet,
            "w",
            LabelSelector::from_labels([("app", "web")]),
        )]);
        let mut pods = vec![owned(pod("a", &[("app", "web")]), "ReplicaSet", "w")];
        let before = pods.clone();
        apply_default_constraints(&mut pods, &[], &[], &owners);
        assert_eq!(pods, before);
    }

    #[test]
    fn serde_round_trip() {
        let w: WorkloadSelector = serde_json::from_value(serde_json::json!({
            "namespace": "ns", "kind": "StatefulSet", "name": "db",
            "selector": {"matchLabels": {"app": "db"}},
        }))
        .unwrap();
        assert_eq!(w.kind, WorkloadKind::StatefulSet);
        let s: Service = serde_json::from_value(serde_json::json!({
            "namespace": "ns", "name": "db",
        }))
        .unwrap();
        assert_eq!(s.selector, None);
        assert_eq!(
            serde_json::from_value::<Service>(serde_json::to_value(&s).unwrap()).unwrap(),
            s
        );
    }
}

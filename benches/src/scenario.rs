//! Upstream's `TestSchedulingProfile` / `BenchmarkScheduling*` set-up as scheduler input (upstream
//! `scheduling_benchmark_test.go`): one NodePool with huge limits over `fake.InstanceTypes(400)`,
//! no existing nodes, no DaemonSets.

use std::collections::BTreeMap;

use karpenter_core::labels;
use karpenter_core::model::{
    LabelSelector, NodeAffinity, NodeSelectorTerm, Pod, PodAffinity, PodAffinityTerm,
    PreferredSchedulingTerm, TopologySpreadConstraint, WeightedPodAffinityTerm, WhenUnsatisfiable,
};
use karpenter_core::requirements::{NodeSelectorRequirement, Operator};
use karpenter_core::resources::{Quantity, ResourceList, names};
use karpenter_core::scheduling::{
    NodePoolInput, PreferencePolicy, ReservedCapacityMode, SchedulerOptions, SchedulingInput,
};

use crate::workload::{PodDraw, PodKind};

/// The label upstream's `test.Pod` puts on every pod and `test.NodePool` on every template.
pub const CLUSTER_LABEL: (&str, &str) = ("testing/cluster", "unspecified");

/// Turns workload draws into pods. Pods are created one nanosecond apart in generation order
/// (upstream's in-memory timestamps are strictly increasing), and get uids `pod-<index>`
/// zero-padded so that uid order equals generation order.
pub fn to_pods(draws: &[PodDraw]) -> Vec<Pod> {
    draws
        .iter()
        .enumerate()
        .map(|(i, d)| to_pod(i, d))
        .collect()
}

fn selector(key: &str, value: &str) -> LabelSelector {
    LabelSelector::from_labels([(key, value)])
}

fn to_pod(i: usize, d: &PodDraw) -> Pod {
    let mut pod = Pod::new("default", format!("pod-{i:06}"));
    pod.uid = format!("uid-{i:06}");
    pod.creation_timestamp = karpenter_core::model::Timestamp::from_nanosecond(i as i128)
        .unwrap_or(karpenter_core::model::Timestamp::UNIX_EPOCH);
    pod.labels = d.labels.iter().cloned().collect();
    pod.labels
        .insert(CLUSTER_LABEL.0.to_string(), CLUSTER_LABEL.1.to_string());
    let mut requests = ResourceList::new();
    requests.insert(names::CPU, Quantity::from_milli(d.cpu_milli));
    requests.insert(
        names::MEMORY,
        Quantity::from_bytes(d.memory_mi * 1024 * 1024),
    );
    pod.requests = requests;
    let spread = |key: &str| {
        TopologySpreadConstraint::new(1, key, WhenUnsatisfiable::DoNotSchedule).with_label_selector(
            selector(
                crate::workload::LABEL_KEY,
                d.spread_selector_value.as_deref().unwrap_or_default(),
            ),
        )
    };
    match d.kind {
        PodKind::Generic => {}
        PodKind::ZonalSpread => pod.topology_spread_constraints = vec![spread(labels::ZONE)],
        PodKind::HostnameSpread => {
            pod.topology_spread_constraints = vec![spread(labels::HOSTNAME)];
        }
        PodKind::ZonalSelfAffinity => {
            let value = pod
                .labels
                .get(crate::workload::AFFINITY_LABEL_KEY)
                .cloned()
                .unwrap_or_default();
            pod.pod_affinity = Some(PodAffinity {
                required: vec![PodAffinityTerm::new(
                    selector(crate::workload::AFFINITY_LABEL_KEY, &value),
                    labels::ZONE,
                )],
                preferred: Vec::new(),
            });
        }
        PodKind::HostnameAntiAffinity => {
            pod.pod_anti_affinity = Some(PodAffinity {
                required: vec![PodAffinityTerm::new(
                    selector(
                        crate::workload::APP_LABEL_KEY,
                        crate::workload::APP_LABEL_VALUE,
                    ),
                    labels::HOSTNAME,
                )],
                preferred: Vec::new(),
            });
        }
        PodKind::Preference => {
            pod.node_affinity = Some(NodeAffinity {
                required: Vec::new(),
                preferred: vec![PreferredSchedulingTerm {
                    weight: 1,
                    preference: NodeSelectorTerm {
                        match_expressions: vec![NodeSelectorRequirement::new(
                            labels::ZONE,
                            Operator::In,
                            [crate::workload::PREFERRED_ZONE],
                        )],
                    },
                }],
            });
            let term = |weight: i32, key: &str| WeightedPodAffinityTerm {
                weight,
                pod_affinity_term: PodAffinityTerm::new(
                    selector(
                        crate::workload::APP_LABEL_KEY,
                        crate::workload::APP_LABEL_VALUE,
                    ),
                    key,
                ),
            };
            pod.pod_anti_affinity = Some(PodAffinity {
                required: Vec::new(),
                preferred: vec![term(10, labels::ZONE), term(1, labels::HOSTNAME)],
            });
        }
    }
    pod
}

/// The benchmark's NodePool: no requirements, the cluster label, the test node class, limits
/// `cpu: 10000000`, `memory: 10000000Gi`, over `karpenter_fake::catalog::instance_types(n)`.
pub fn node_pool(instance_types: usize) -> NodePoolInput {
    let mut limits = ResourceList::new();
    limits.insert(names::CPU, Quantity::from_units(10_000_000));
    limits.insert(
        names::MEMORY,
        Quantity::from_bytes(10_000_000 * 1024 * 1024 * 1024),
    );
    NodePoolInput::new(
        "default",
        karpenter_fake::catalog::instance_types(instance_types),
    )
    .with_labels(BTreeMap::from([(
        CLUSTER_LABEL.0.to_string(),
        CLUSTER_LABEL.1.to_string(),
    )]))
    .with_node_class_label(Some((
        "karpenter.test.sh/testnodeclass".to_string(),
        "default".to_string(),
    )))
    .with_limits(limits)
}

/// The whole input for `pods`.
pub fn input(pods: Vec<Pod>) -> SchedulingInput {
    SchedulingInput::new()
        .with_node_pools(vec![node_pool(400)])
        .with_pods(pods)
}

/// The benchmark's options: fake label policy, reserved capacity in fallback mode, the given
/// preference policy.
pub fn options(preferences: PreferencePolicy) -> SchedulerOptions {
    SchedulerOptions::default()
        .with_label_policy(karpenter_fake::catalog::fake_label_policy())
        .with_preference_policy(preferences)
        .with_reserved_capacity_mode(ReservedCapacityMode::Fallback)
        .with_reservation_id_label(Some(
            karpenter_fake::catalog::RESERVATION_ID_LABEL.to_string(),
        ))
}

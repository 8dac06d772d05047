//! A cluster to consolidate: `n` managed, initialized nodes of assorted sizes from
//! `fake.InstanceTypes(400)`, each holding several pods with mixed constraints (plain pods, zonal
//! spreads, hostname anti-affinity, node selectors), roughly 30-60 % utilized — so that
//! consolidation has real work. Deterministic (Go's `math/rand` seeded with 42).

use std::collections::BTreeMap;

use karpenter_core::api::{
    Budget, Condition, ConditionStatus, ConsolidationPolicy, NillableDuration, NodeClaim,
    NodeClaimSpec, NodeClaimTemplate, NodeClaimTemplateSpec, NodeClassReference, NodePool,
    NodePoolSpec, TemplateMetadata,
};
use karpenter_core::labels;
use karpenter_core::model::{
    ClusterNode, LabelSelector, OwnerReference, Pod, PodAffinity, PodAffinityTerm, PodPhase,
    Timestamp, TopologySpreadConstraint, WhenUnsatisfiable,
};
use karpenter_core::resources::{Quantity, ResourceList, names};
use karpenter_core::state::{ClusterSnapshot, NodePoolState, StateNode};

use crate::gorand::GoRand;

/// The time the benchmark plans at; nodes were created a month earlier.
pub const NOW: &str = "2026-07-01T00:00:00Z";
const CREATED: &str = "2026-06-01T00:00:00Z";
const ZONES: [&str; 3] = ["test-zone-1", "test-zone-2", "test-zone-3"];

/// The planning time.
pub fn now() -> Timestamp {
    NOW.parse().unwrap_or(Timestamp::UNIX_EPOCH)
}

fn condition(type_: &str) -> Condition {
    Condition {
        type_: type_.to_string(),
        status: ConditionStatus::True,
        reason: None,
        message: None,
        last_transition_time: Some(CREATED.to_string()),
        observed_generation: None,
    }
}

/// The cluster of `nodes` nodes.
pub fn cluster(nodes: usize) -> ClusterSnapshot {
    let instance_types = karpenter_fake::catalog::instance_types(400);
    let class = NodeClassReference::new("karpenter.test.sh", "TestNodeClass", "default");
    let mut template_labels = BTreeMap::new();
    template_labels.insert(
        crate::scenario::CLUSTER_LABEL.0.to_string(),
        crate::scenario::CLUSTER_LABEL.1.to_string(),
    );
    let mut spec = NodePoolSpec::new(NodeClaimTemplate {
        metadata: TemplateMetadata {
            labels: template_labels.clone(),
            annotations: BTreeMap::new(),
        },
        spec: NodeClaimTemplateSpec::new(class.clone()),
    });
    spec.disruption.consolidation_policy = Some(ConsolidationPolicy::WhenEmptyOrUnderutilized);
    spec.disruption.consolidate_after = NillableDuration::parse("0s").ok();
    spec.disruption.budgets = Some(vec![Budget {
        nodes: "100%".to_string(),
        schedule: None,
        duration: None,
        reasons: None,
    }]);
    let pool = NodePoolState::new(NodePool::new("default", spec), instance_types.clone());

    let mut rng = GoRand::new(42);
    let sizes = [3usize, 7, 15, 31];
    let mut state_nodes = Vec::with_capacity(nodes);
    for n in 0..nodes {
        let it = &instance_types[sizes[rng.intn(sizes.len())]];
        let zone = ZONES[n % ZONES.len()];
        let ct = if rng.intn(4) == 0 {
            labels::CAPACITY_TYPE_SPOT
        } else {
            labels::CAPACITY_TYPE_ON_DEMAND
        };
        let name = format!("node-{n:05}");
        let mut node_labels = template_labels.clone();
        for (k, v) in [
            (labels::NODEPOOL, "default"),
            (labels::INSTANCE_TYPE, it.name()),
            (labels::ZONE, zone),
            (labels::CAPACITY_TYPE, ct),
            (labels::ARCH, "amd64"),
            (labels::OS, "linux"),
            (labels::HOSTNAME, name.as_str()),
            (labels::INITIALIZED, "true"),
            (labels::REGISTERED, "true"),
            ("karpenter.test.sh/testnodeclass", "default"),
        ] {
            node_labels.insert(k.to_string(), v.to_string());
        }
        let mut node = ClusterNode::new(name.clone());
        node.labels = node_labels.clone();
        node.capacity = it.capacity().clone();
        node.allocatable = it.allocatable().clone();
        node.managed = true;
        let mut claim = NodeClaim::new(name.clone(), NodeClaimSpec::new(class.clone()));
        claim.metadata.labels = node_labels;
        claim.metadata.creation_timestamp = Some(CREATED.to_string());
        claim.status.node_name = Some(name.clone());
        claim.status.provider_id = Some(format!("fake://{name}"));
        claim.status.conditions = vec![condition("Initialized"), condition("Consolidatable")];

        // Fill 30-60 % of the node's CPU.
        let cpu_milli = it.capacity().get_or_zero(names::CPU).milli_value();
        let target = cpu_milli * (30 + rng.intn(31) as i64) / 100;
        let mut used = 0;
        let mut pods = Vec::new();
        while used < target {
            let i = pods.len();
            let cpu = [250i64, 500, 1000][rng.intn(3)];
            let mut p = Pod::new("default", format!("{name}-p{i}"));
            p.uid = format!("{name}-p{i}");
            p.creation_timestamp = now();
            p.node_name = Some(name.clone());
            p.phase = PodPhase::Running;
            p.owner =
                Some(OwnerReference::new("apps/v1", "ReplicaSet", "app").with_controller(true));
            let app = format!("app-{}", rng.intn(20));
            p.labels.insert("app".to_string(), app.clone());
            let mut requests = ResourceList::new();
            requests.insert(names::CPU, Quantity::from_milli(cpu));
            requests.insert(names::MEMORY, Quantity::from_bytes(cpu * 2 * 1024 * 1024));
            p.requests = requests;
            match rng.intn(10) {
                0 => {
                    p.topology_spread_constraints = vec![
                        TopologySpreadConstraint::new(
                            50,
                            labels::ZONE,
                            WhenUnsatisfiable::DoNotSchedule,
                        )
                        .with_label_selector(LabelSelector::from_labels([("app", app.as_str())])),
                    ];
                }
                1 => {
                    let unique = format!("solo-{name}-{i}");
                    p.labels.insert("solo".to_string(), unique.clone());
                    p.pod_anti_affinity = Some(PodAffinity {
                        required: vec![PodAffinityTerm::new(
                            LabelSelector::from_labels([("solo", unique.as_str())]),
                            labels::HOSTNAME,
                        )],
                        preferred: Vec::new(),
                    });
                }
                2 => {
                    p.node_selector
                        .insert(labels::ZONE.to_string(), zone.to_string());
                }
                _ => {}
            }
            used += cpu;
            pods.push(p);
        }
        state_nodes.push(StateNode::new(Some(node), Some(claim), pods));
    }
    ClusterSnapshot::new(vec![pool], state_nodes)
}

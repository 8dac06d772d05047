//! The consolidation pre-checks reject only candidate sets whose simulation cannot produce a
//! command: for random clusters, every prefix (multi-node) and every candidate (single-node) the
//! pre-checks call hopeless is simulated and must fail; and they do fire where expected.

use std::collections::BTreeMap;
use std::sync::Arc;

use proptest::prelude::*;

use super::super::consolidation::{compute_consolidation, consolidation_candidates};
use super::super::{DisruptionOptions, Sims};
use super::{MultiNodePrecheck, Rooms, SingleNodePrecheck};
use crate::api::{
    Condition, ConditionStatus, NillableDuration, NodeClaim, NodeClaimSpec, NodeClaimTemplate,
    NodeClaimTemplateSpec, NodeClassReference, NodePool, NodePoolSpec,
};
use crate::disruption::candidates::{Candidate, DisruptionClass, get_candidates};
use crate::disruption::simulate::SimulationContext;
use crate::labels;
use crate::model::{ClusterNode, InstanceType, Offering, OwnerReference, Pod, PodPhase, Timestamp};
use crate::requirements::{Operator, Requirement, Requirements};
use crate::resources::{Quantity, ResourceList};
use crate::state::{ClusterSnapshot, NodePoolState, StateNode};

const NOW: &str = "2024-06-15T12:00:00Z";
const LONG_AGO: &str = "2024-06-01T00:00:00Z";
const RECENTLY: &str = "2024-06-15T11:59:50Z";
const ZONE: &str = "zone-a";

fn now() -> Timestamp {
    NOW.parse().expect("valid timestamp")
}

fn rl(cpu_milli: i64, memory_mi: i64, pods: i64) -> ResourceList {
    let mut r = ResourceList::new();
    r.insert("cpu", Quantity::from_milli(cpu_milli));
    r.insert("memory", Quantity::from_bytes(memory_mi * 1024 * 1024));
    if pods > 0 {
        r.insert("pods", Quantity::from_units(pods));
    }
    r
}

/// An on-demand instance type of `cpu` vCPUs (4 GiB each, 10 pods per vCPU) at `cpu` × 0.05.
fn instance_type(cpu: i64) -> Arc<InstanceType> {
    let mut reqs = Requirements::new();
    reqs.add(Requirement::new(labels::ARCH, Operator::In, ["amd64"]));
    reqs.add(Requirement::new(labels::OS, Operator::In, ["linux"]));
    Arc::new(InstanceType::new(
        format!("type-{cpu}"),
        reqs,
        vec![Offering::new(
            ZONE,
            labels::CAPACITY_TYPE_ON_DEMAND,
            0.05 * cpu as f64,
        )],
        rl(cpu * 1000, cpu * 4096, cpu * 10),
        Default::default(),
    ))
}

fn catalog() -> Vec<Arc<InstanceType>> {
    [1, 2, 4].into_iter().map(instance_type).collect()
}

fn pool() -> NodePoolState {
    let class = NodeClassReference::new("karpenter.test.sh", "TestNodeClass", "default");
    let mut spec = NodePoolSpec::new(NodeClaimTemplate {
        metadata: Default::default(),
        spec: NodeClaimTemplateSpec::new(class),
    });
    spec.disruption.consolidate_after = NillableDuration::parse("1m").ok();
    NodePoolState::new(NodePool::new("default", spec), catalog())
}

fn condition(type_: &str, at: &str) -> Condition {
    Condition {
        type_: type_.to_string(),
        status: ConditionStatus::True,
        reason: None,
        message: None,
        last_transition_time: Some(at.to_string()),
        observed_generation: None,
    }
}

/// How a node of the random clusters is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Initialized, outside `consolidateAfter`: a candidate.
    Settled,
    /// A pod event 10 s ago, inside the pool's one-minute window: refuses displaced pods.
    Refusing,
    /// Not initialized yet.
    Launching,
    /// Marked for deletion.
    Deleting,
}

fn pod(name: &str, cpu_milli: i64, node: Option<&str>) -> Pod {
    let mut p = Pod::new("default", name);
    p.uid = name.to_string();
    p.requests = rl(cpu_milli, 256, 0);
    p.node_name = node.map(str::to_string);
    p.phase = if node.is_some() {
        PodPhase::Running
    } else {
        PodPhase::Pending
    };
    p.owner = Some(OwnerReference::new("apps/v1", "ReplicaSet", "web").with_controller(true));
    p
}

/// A node of `cpu` vCPUs holding pods of these CPU requests.
fn node(name: &str, cpu: i64, kind: Kind, pods: &[i64]) -> StateNode {
    let it = instance_type(cpu);
    let mut node_labels = BTreeMap::new();
    for (k, v) in [
        (labels::NODEPOOL, "default"),
        (labels::INSTANCE_TYPE, it.name()),
        (labels::ZONE, ZONE),
        (labels::CAPACITY_TYPE, labels::CAPACITY_TYPE_ON_DEMAND),
        (labels::ARCH, "amd64"),
        (labels::OS, "linux"),
        (labels::HOSTNAME, name),
        (labels::REGISTERED, "true"),
    ] {
        node_labels.insert(k.to_string(), v.to_string());
    }
    if kind != Kind::Launching {
        node_labels.insert(labels::INITIALIZED.to_string(), "true".to_string());
    }
    let mut n = ClusterNode::new(name);
    n.labels = node_labels.clone();
    n.capacity = it.capacity().clone();
    n.allocatable = it.allocatable().clone();
    n.managed = true;
    let class = NodeClassReference::new("karpenter.test.sh", "TestNodeClass", "default");
    let mut claim = NodeClaim::new(name, NodeClaimSpec::new(class));
    claim.metadata.labels = node_labels;
    claim.metadata.creation_timestamp = Some(LONG_AGO.to_string());
    claim.status.provider_id = Some(format!("test:///{name}"));
    claim.status.node_name = Some(name.to_string());
    claim.status.capacity = it.capacity().clone();
    claim.status.allocatable = it.allocatable().clone();
    if kind != Kind::Launching {
        claim.status.conditions = vec![condition("Initialized", LONG_AGO)];
    }
    claim.status.last_pod_event_time = Some(
        if kind == Kind::Refusing {
            RECENTLY
        } else {
            LONG_AGO
        }
        .to_string(),
    );
    let pods = pods
        .iter()
        .enumerate()
        .map(|(i, cpu)| pod(&format!("{name}-pod-{i}"), *cpu, Some(name)))
        .collect();
    StateNode::new(Some(n), Some(claim), pods).with_marked_for_deletion(kind == Kind::Deleting)
}

fn candidates(snapshot: &ClusterSnapshot) -> Vec<Candidate> {
    let (graceful, _) = get_candidates(snapshot, DisruptionClass::Graceful, &|_| false, now());
    consolidation_candidates(snapshot, &graceful, now())
}

/// Whether simulating `set` could give a command (what the pre-checks must never deny).
fn could_consolidate(sims: &Sims<'_>, set: &[Candidate], options: &DisruptionOptions) -> bool {
    matches!(compute_consolidation(sims.get(), set, options), Ok(Some(_)))
}

/// Every prefix the multi-node pre-check rejects, and every candidate the single-node one
/// rejects, fails its simulation. Returns how many each rejected.
fn check_sound(snapshot: &ClusterSnapshot) -> (usize, usize) {
    let options = DisruptionOptions::default();
    let context = SimulationContext::new(snapshot, &options.scheduler, now());
    let sims = Sims::new(&context);
    let cands = candidates(snapshot);
    let rooms = Rooms::new(snapshot, now());
    let multi = MultiNodePrecheck::new(snapshot, &rooms, &cands);
    let mut rejected = (0, 0);
    for end in 0..cands.len() {
        if multi.hopeless(end) {
            rejected.0 += 1;
            assert!(
                !could_consolidate(&sims, &cands[..=end], &options),
                "multi-node pre-check rejected a prefix of {} that consolidates",
                end + 1
            );
        }
    }
    let single = SingleNodePrecheck::new(snapshot, &rooms);
    for c in &cands {
        if let Some(reason) = single.hopeless(c) {
            rejected.1 += 1;
            assert!(
                !could_consolidate(&sims, std::slice::from_ref(c), &options),
                "single-node pre-check rejected {} ({reason}) that consolidates",
                c.name()
            );
        }
    }
    rejected
}

/// Full nodes (one 1.5-cpu pod on each 2-cpu node): no pod fits on another node, so every
/// displaced pod needs the one new node. Two of them (3 cpu) fit the largest type (4 cpu),
/// three (4.5 cpu) do not: prefixes of three or more are rejected.
#[test]
fn multi_node_precheck_rejects_prefixes_whose_stuck_pods_overflow_one_new_node() {
    let nodes: Vec<StateNode> = (0..5)
        .map(|i| node(&format!("full-{i}"), 2, Kind::Settled, &[1500]))
        .collect();
    let snapshot = ClusterSnapshot::new(vec![pool()], nodes);
    let cands = candidates(&snapshot);
    assert_eq!(cands.len(), 5);
    let multi = MultiNodePrecheck::new(&snapshot, &Rooms::new(&snapshot, now()), &cands);
    let hopeless: Vec<bool> = (0..5).map(|end| multi.hopeless(end)).collect();
    assert_eq!(hopeless, [false, false, true, true, true]);
    assert_eq!(check_sound(&snapshot), (3, 0));
}

/// Room on another node: the pods may move, so nothing is rejected; room on a node that refuses
/// displaced pods (inside `consolidateAfter`) or that has not initialized does not count.
#[test]
fn room_counts_only_where_displaced_pods_may_land() {
    let full = || -> Vec<StateNode> {
        (0..4)
            .map(|i| node(&format!("full-{i}"), 2, Kind::Settled, &[1500]))
            .collect()
    };
    let with = |extra: StateNode| {
        let mut nodes = full();
        nodes.push(extra);
        ClusterSnapshot::new(vec![pool()], nodes)
    };
    let roomy = with(node("roomy", 4, Kind::Settled, &[100]));
    let cands = candidates(&roomy);
    let multi = MultiNodePrecheck::new(&roomy, &Rooms::new(&roomy, now()), &cands);
    assert!((0..cands.len()).all(|end| !multi.hopeless(end)));
    check_sound(&roomy);

    for kind in [Kind::Refusing, Kind::Launching, Kind::Deleting] {
        let snapshot = with(node("roomy", 4, kind, &[100]));
        let cands = candidates(&snapshot);
        assert_eq!(cands.len(), 4, "{kind:?}");
        let multi = MultiNodePrecheck::new(&snapshot, &Rooms::new(&snapshot, now()), &cands);
        assert!(multi.hopeless(2), "{kind:?}");
        check_sound(&snapshot);
    }
}

/// A pass's consolidation candidates are computed once and shared by its methods; a call with
/// other candidates gets its own, not the pass's.
#[test]
fn a_pass_shares_its_consolidation_candidates() {
    let nodes: Vec<StateNode> = (0..4)
        .map(|i| node(&format!("node-{i}"), 2, Kind::Settled, &[500 + 100 * i]))
        .collect();
    let snapshot = ClusterSnapshot::new(vec![pool()], nodes);
    let options = DisruptionOptions::default();
    let context = SimulationContext::new(&snapshot, &options.scheduler, now());
    let sims = Sims::new(&context);
    let (graceful, _) = get_candidates(&snapshot, DisruptionClass::Graceful, &|_| false, now());
    let names = |cands: &[Candidate]| -> Vec<String> {
        cands.iter().map(|c| c.name().to_string()).collect()
    };
    let expected = names(&consolidation_candidates(&snapshot, &graceful, now()));
    assert_eq!(expected.len(), 4);
    let first = sims.consolidation_candidates(&snapshot, &graceful, now());
    assert!(matches!(first, std::borrow::Cow::Borrowed(_)));
    assert_eq!(names(&first), expected);
    let again = sims.consolidation_candidates(&snapshot, &graceful.clone(), now());
    assert!(
        matches!(again, std::borrow::Cow::Borrowed(_)),
        "same nodes: shared"
    );
    let fewer = &graceful[1..];
    let other = sims.consolidation_candidates(&snapshot, fewer, now());
    assert!(matches!(other, std::borrow::Cow::Owned(_)));
    assert_eq!(
        names(&other),
        names(&consolidation_candidates(&snapshot, fewer, now()))
    );
    assert_eq!(other.len(), 3);
}

/// A pod that is also pending under the same key is never judged stuck (the simulation cannot
/// tell it apart from the pending one, whose failure blocks nothing).
#[test]
fn a_displaced_pod_sharing_a_pending_key_is_not_stuck() {
    let nodes: Vec<StateNode> = (0..4)
        .map(|i| node(&format!("full-{i}"), 2, Kind::Settled, &[1500]))
        .collect();
    let twins: Vec<Pod> = (0..4)
        .map(|i| pod(&format!("full-{i}-pod-0"), 1500, None))
        .collect();
    let snapshot = ClusterSnapshot::new(vec![pool()], nodes).with_pending_pods(twins);
    let cands = candidates(&snapshot);
    let multi = MultiNodePrecheck::new(&snapshot, &Rooms::new(&snapshot, now()), &cands);
    assert!((0..cands.len()).all(|end| !multi.hopeless(end)));
    check_sound(&snapshot);
}

fn kind() -> impl Strategy<Value = Kind> {
    prop_oneof![
        6 => Just(Kind::Settled),
        1 => Just(Kind::Refusing),
        1 => Just(Kind::Launching),
        1 => Just(Kind::Deleting),
    ]
}

/// (cpu of the node's type, kind, free CPU in quarters, pods): mostly full nodes (a little
/// free, one or two pods filling the rest), so that the pre-checks have something to reject,
/// and now and then a roomy or empty one.
fn node_spec() -> impl Strategy<Value = (i64, Kind, i64, usize)> {
    (
        prop_oneof![Just(1i64), Just(2), Just(4)],
        kind(),
        prop_oneof![4 => 0i64..3, 1 => 0i64..17],
        1usize..3,
    )
}

/// The CPU requests (milli) of the pods of a node of `cpu` vCPUs with `free` quarters free.
fn fill(cpu: i64, free: i64, pods: usize) -> Vec<i64> {
    let used = cpu * 1000 - free * 250 - 50;
    if used <= 0 {
        return Vec::new();
    }
    let pods = i64::try_from(pods).unwrap_or(1);
    (0..pods).map(|_| used / pods).filter(|m| *m > 0).collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    /// Random clusters: whatever the pre-checks reject fails its simulation.
    #[test]
    fn prechecks_reject_only_what_cannot_consolidate(
        specs in prop::collection::vec(node_spec(), 1..8),
        pending in prop::collection::vec(1i64..8, 0..3),
    ) {
        let nodes: Vec<StateNode> = specs
            .iter()
            .enumerate()
            .map(|(i, (cpu, kind, free, pods))| {
                node(&format!("node-{i}"), *cpu, *kind, &fill(*cpu, *free, *pods))
            })
            .collect();
        let pending: Vec<Pod> = pending
            .iter()
            .enumerate()
            .map(|(i, q)| pod(&format!("pending-{i}"), q * 250, None))
            .collect();
        let snapshot = ClusterSnapshot::new(vec![pool()], nodes).with_pending_pods(pending);
        check_sound(&snapshot);
    }
}

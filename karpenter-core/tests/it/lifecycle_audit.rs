//! Rule-by-rule audit of upstream `disruption/validation.go` and `orchestration/queue.go`,
//! `SimulateScheduling`, `controllers/nodeclaim`, `nodeclaim/disruption/drift.go`, `node/health`
//! (see `docs/disruption-audit-4-8.md`): one test per rule the scenario ports did not pin down and
//! the audit found missing or wrong.

use std::collections::BTreeSet;

use jiff::Timestamp;
use karpenter_core::api::DisruptionReason;
use karpenter_core::lifecycle::queue::{
    self, CommandCandidate, CommandQueue, QueueError, QueueOutcome, QueuedCommand,
};
use karpenter_core::lifecycle::{MetricOp, metric_names};

fn t0() -> Timestamp {
    "2024-01-01T00:00:00Z".parse().unwrap()
}

fn command(id: &str, candidates: &[&str], replacements: &[&str]) -> QueuedCommand {
    QueuedCommand {
        id: id.into(),
        method: "single".into(),
        reason: DisruptionReason::Underutilized,
        consolidation_policy: "when_empty_or_underutilized".into(),
        candidates: candidates
            .iter()
            .map(|c| {
                let mut cc = CommandCandidate::new(format!("test:///{c}"), format!("node-{c}"), *c);
                cc.nodepool = format!("pool-{c}");
                cc
            })
            .collect(),
        replacements: replacements.iter().map(|r| r.to_string()).collect(),
        nominated_nodes: Vec::new(),
        created_at: t0(),
        initialized: BTreeSet::new(),
    }
}

// ---------------------------------------------------------------------------------------------
// upstream `Queue.StartCommand` StartCommand

/// upstream `Queue.StartCommand`: a delete-only command whose marking partly failed proceeds with
/// the marked subset only, and only that subset is registered in the queue (an unmarked candidate
/// is neither blocked from other commands nor deleted).
#[test]
fn partially_marked_delete_command_is_narrowed_in_the_queue() {
    let mut q = CommandQueue::new();
    q.start(command("c1", &["a", "b"], &[])).unwrap();
    let marked = BTreeSet::from(["test:///a".to_string()]);
    q.after_marking("c1", &marked).unwrap();
    assert!(q.contains("test:///a"));
    assert!(!q.contains("test:///b"), "b was never marked");
    assert_eq!(q.entries(), 1);
    match q.reconcile("c1", &[], t0()).unwrap() {
        QueueOutcome::DeleteCandidates { claim_names, .. } => assert_eq!(claim_names, ["a"]),
        other => panic!("expected deletion, got {other:?}"),
    }
}

/// upstream `Queue.StartCommand`: a command with replacements aborts on any marking failure, and so
/// does a command none of whose candidates were marked; either leaves the queue.
#[test]
fn failed_marking_removes_the_command_from_the_queue() {
    let mut q = CommandQueue::new();
    q.start(command("c1", &["a", "b"], &["r"])).unwrap();
    let marked = BTreeSet::from(["test:///a".to_string()]);
    assert_eq!(
        q.after_marking("c1", &marked),
        Err(QueueError::MarkingFailed {
            failed: 1,
            total: 2
        })
    );
    assert_eq!(q.entries(), 0);
    assert!(q.get("c1").is_none());

    q.start(command("c2", &["c"], &[])).unwrap();
    assert!(q.after_marking("c2", &BTreeSet::new()).is_err());
    assert_eq!(q.entries(), 0);
}

/// upstream `Queue.StartCommand`: starting a command counts `voluntary_disruption_decisions_total`
/// once and `voluntary_disruption_decisions_by_nodepool_total` once per distinct NodePool.
#[test]
fn starting_a_command_counts_decisions() {
    let mut cmd = command("c1", &["a", "b", "c"], &["r"]);
    cmd.candidates[1].nodepool = "pool-a".into();
    let metrics = queue::start_metrics(&cmd);
    let total: Vec<_> = metrics
        .iter()
        .filter(|m| m.name == metric_names::VOLUNTARY_DISRUPTION_DECISIONS_TOTAL)
        .collect();
    assert_eq!(total.len(), 1);
    assert_eq!(total[0].op, MetricOp::Add(1.0));
    assert_eq!(total[0].labels["decision"], "replace");
    assert_eq!(total[0].labels["reason"], "underutilized");
    assert_eq!(total[0].labels["consolidation_type"], "single");
    let pools: Vec<&str> = metrics
        .iter()
        .filter(|m| m.name == metric_names::VOLUNTARY_DISRUPTION_DECISIONS_BY_NODEPOOL_TOTAL)
        .map(|m| m.labels["nodepool"].as_str())
        .collect();
    assert_eq!(pools, ["pool-a", "pool-c"]);
}

// ---------------------------------------------------------------------------------------------
// upstream `nodeclaim/disruption/consolidation.go` Consolidatable condition and pod events

use jiff::SignedDuration;
use karpenter_core::api::{
    Condition, ConditionStatus, NillableDuration, NodeClaim, NodeClaimSpec, NodeClaimTemplate,
    NodeClaimTemplateSpec, NodeClassReference, NodePool, NodePoolSpec, find_condition,
};
use karpenter_core::labels;
use karpenter_core::lifecycle::conditions::{CONSOLIDATABLE, INITIALIZED};
use karpenter_core::lifecycle::consolidatable::{
    POD_EVENT_DEDUPE, consolidatable_update, record_pod_event,
};
use karpenter_core::lifecycle::format_time;
use karpenter_core::model::{OwnerReference, Pod};

fn after(d: SignedDuration) -> Timestamp {
    t0() + d
}

fn secs(n: i64) -> SignedDuration {
    SignedDuration::from_secs(n)
}

fn pool(consolidate_after: &str) -> NodePool {
    let spec = NodeClaimTemplateSpec::new(NodeClassReference::new("g", "K", "c"));
    let template = NodeClaimTemplate {
        metadata: Default::default(),
        spec,
    };
    let mut np = NodePool::new("default", NodePoolSpec::new(template));
    np.spec.disruption.consolidate_after =
        Some(NillableDuration::parse(consolidate_after).unwrap());
    np
}

fn initialized_claim(at: Timestamp) -> NodeClaim {
    let mut c = NodeClaim::new(
        "nc",
        NodeClaimSpec::new(NodeClassReference::new("g", "K", "c")),
    );
    c.metadata
        .labels
        .insert(labels::NODEPOOL.into(), "default".into());
    c.status.conditions.push(Condition {
        type_: INITIALIZED.into(),
        status: ConditionStatus::True,
        reason: Some(INITIALIZED.into()),
        message: None,
        last_transition_time: Some(format_time(at)),
        observed_generation: None,
    });
    c
}

fn consolidatable_status(c: &NodeClaim) -> Option<ConditionStatus> {
    find_condition(&c.status.conditions, CONSOLIDATABLE).map(|c| c.status)
}

/// upstream `nodeclaim/disruption/consolidation.go`: `Consolidatable=True` once the
/// consolidateAfter window since the last pod event (or initialization) has passed; removed (with a
/// requeue at the window's end) inside it, for uninitialized claims and with `consolidateAfter:
/// Never`; not evaluated for static pools.
#[test]
fn consolidatable_condition_follows_consolidate_after() {
    let np = pool("10m");
    let mut c = initialized_claim(t0());
    // Inside the window: no condition, look again when it ends.
    let u = consolidatable_update(&np, &c, after(secs(60)));
    assert_eq!(consolidatable_status(&u.claim), None);
    assert_eq!(u.requeue_at, Some(after(secs(600))));
    // After it: True.
    let u = consolidatable_update(&np, &c, after(secs(600)));
    assert_eq!(consolidatable_status(&u.claim), Some(ConditionStatus::True));
    assert!(u.changed);
    assert_eq!(u.requeue_at, None);
    // A pod event restarts the window and removes the condition.
    let mut with_event = u.claim.clone();
    with_event.status.last_pod_event_time = Some(format_time(after(secs(700))));
    let u2 = consolidatable_update(&np, &with_event, after(secs(710)));
    assert_eq!(consolidatable_status(&u2.claim), None);
    assert_eq!(u2.requeue_at, Some(after(secs(1300))));
    // consolidateAfter: Never removes it.
    let u3 = consolidatable_update(&pool("Never"), &u.claim, after(secs(9000)));
    assert_eq!(consolidatable_status(&u3.claim), None);
    assert_eq!(u3.requeue_at, None);
    // Not initialized: removed.
    c.status.conditions.clear();
    let mut stale = c.clone();
    stale.status.conditions.push(Condition {
        type_: CONSOLIDATABLE.into(),
        status: ConditionStatus::True,
        reason: None,
        message: None,
        last_transition_time: Some(format_time(t0())),
        observed_generation: None,
    });
    let u4 = consolidatable_update(&np, &stale, after(secs(9000)));
    assert_eq!(consolidatable_status(&u4.claim), None);
    assert!(u4.changed);
    // Static pools are skipped altogether.
    let mut static_pool = pool("0s");
    static_pool.spec.replicas = Some(3);
    let u5 = consolidatable_update(&static_pool, &initialized_claim(t0()), after(secs(60)));
    assert!(!u5.changed);
    assert_eq!(consolidatable_status(&u5.claim), None);
}

/// upstream `nodeclaim/disruption/consolidation.go`: `lastPodEventTime` is written for
/// non-DaemonSet pods, at most once per 10 s.
#[test]
fn pod_events_are_deduplicated_for_ten_seconds() {
    assert_eq!(POD_EVENT_DEDUPE, secs(10));
    let c = initialized_claim(t0());
    let pod = Pod::new("default", "app");
    let written = record_pod_event(&c, &pod, after(secs(5))).expect("first event is written");
    assert_eq!(
        written.status.last_pod_event_time.as_deref(),
        Some(format_time(after(secs(5)))).as_deref()
    );
    assert!(record_pod_event(&written, &pod, after(secs(14))).is_none());
    assert!(record_pod_event(&written, &pod, after(secs(15))).is_some());
    let mut ds = pod.clone();
    ds.owner = Some(OwnerReference::new("apps/v1", "DaemonSet", "d").with_controller(true));
    assert!(record_pod_event(&c, &ds, after(secs(60))).is_none());
}

// ---------------------------------------------------------------------------------------------
// upstream `node/termination` Node termination

use karpenter_core::lifecycle::termination::{
    EXCLUDE_FROM_LOAD_BALANCERS_LABEL, finalize_without_drain, terminating_node_update,
};
use karpenter_core::lifecycle::{Node, NodeCondition, TERMINATION_FINALIZER, disrupted_taint};
use karpenter_core::taints::{Taint, TaintEffect};

/// upstream `node/termination`: the terminating Node gets `karpenter.sh/disrupted:NoSchedule`
/// (replacing a taint with the same key but another value or effect) and the label
/// `node.kubernetes.io/exclude-from-external-load-balancers=karpenter`; nothing when both are
/// there.
#[test]
fn terminating_node_is_tainted_and_excluded_from_load_balancers() {
    let mut node = Node::new("n", "test:///n");
    node.taints.push(Taint::new(
        labels::DISRUPTED_TAINT_KEY,
        "x",
        TaintEffect::NoExecute,
    ));
    node.taints
        .push(Taint::new("other", "", TaintEffect::NoSchedule));
    let update = terminating_node_update(&node).expect("node changes");
    update.apply(&mut node);
    assert_eq!(
        node.taints,
        [
            Taint::new("other", "", TaintEffect::NoSchedule),
            disrupted_taint()
        ]
    );
    assert_eq!(
        node.labels
            .get(EXCLUDE_FROM_LOAD_BALANCERS_LABEL)
            .map(String::as_str),
        Some("karpenter")
    );
    assert_eq!(terminating_node_update(&node), None);
}

/// upstream `node/termination`: a Node that is not Ready and whose instance the cloud provider no
/// longer knows loses its finalizer without any drain.
#[test]
fn gone_not_ready_node_is_finalized_without_drain() {
    let mut node = Node::new("n", "test:///n");
    node.finalizers.push(TERMINATION_FINALIZER.into());
    assert!(finalize_without_drain(&node, true));
    assert!(!finalize_without_drain(&node, false));
    node.conditions
        .push(NodeCondition::new("Ready", ConditionStatus::True, t0()));
    assert!(!finalize_without_drain(&node, true));
}

// ---------------------------------------------------------------------------------------------
// upstream `node/health` repair, upstream `nodeclaim/expiration` expiration:
// pods_disruption_initiated_total

use karpenter_core::lifecycle::expiration::{ExpirationDecision, expiration_decision_with_pods};
use karpenter_core::lifecycle::repair::repair_actions_with_pods;

fn registered_claim() -> NodeClaim {
    let mut c = initialized_claim(t0());
    c.metadata
        .labels
        .insert(labels::CAPACITY_TYPE.into(), "spot".into());
    c
}

/// upstream `node/health`: repair counts `pods_disruption_initiated_total` by the node's
/// reschedulable pods.
#[test]
fn repair_counts_initiated_pod_disruptions() {
    let actions = repair_actions_with_pods(&registered_claim(), "Ready", 4, t0());
    let pods = actions
        .metrics
        .iter()
        .find(|m| m.name == metric_names::PODS_DISRUPTION_INITIATED_TOTAL)
        .expect("pods metric");
    assert_eq!(pods.op, MetricOp::Add(4.0));
    assert_eq!(pods.labels["reason"], "unhealthy");
}

/// upstream `nodeclaim/expiration`: expiration counts `pods_disruption_initiated_total` by the
/// node's reschedulable pods.
#[test]
fn expiration_counts_initiated_pod_disruptions() {
    let mut c = registered_claim();
    c.metadata.creation_timestamp = Some(format_time(t0()));
    c.spec.expire_after = Some(NillableDuration::parse("1h").unwrap());
    let ExpirationDecision::Expire { metrics } =
        expiration_decision_with_pods(&c, 2, after(secs(3600)))
    else {
        panic!("expired");
    };
    let pods = metrics
        .iter()
        .find(|m| m.name == metric_names::PODS_DISRUPTION_INITIATED_TOTAL)
        .expect("pods metric");
    assert_eq!(pods.op, MetricOp::Add(2.0));
    assert_eq!(pods.labels["reason"], "expired");
}

// ---------------------------------------------------------------------------------------------
// upstream `controllers/state` Cluster-state view of an uninitialized node

use std::collections::BTreeMap;
use std::sync::Arc;

use karpenter_core::api::{NodeClaimTemplate as Template, NodeClaimTemplateSpec as TemplateSpec};
use karpenter_core::disruption::simulate::SimulationContext;
use karpenter_core::model::{ClusterNode, InstanceType, Offering, Overhead, PodPhase};
use karpenter_core::requirements::{Operator, Requirement, Requirements};
use karpenter_core::resources::{Quantity, ResourceList};
use karpenter_core::scheduling::SchedulerOptions;
use karpenter_core::state::{ClusterSnapshot, NodePoolState, StateNode};

fn four_cpu() -> Arc<InstanceType> {
    let mut reqs = Requirements::new();
    reqs.add(Requirement::new(labels::ARCH, Operator::In, ["amd64"]));
    reqs.add(Requirement::new(labels::OS, Operator::In, ["linux"]));
    let capacity: ResourceList = [
        ("cpu", Quantity::parse("4").unwrap()),
        ("memory", Quantity::parse("16Gi").unwrap()),
        ("pods", Quantity::parse("110").unwrap()),
    ]
    .into_iter()
    .collect();
    Arc::new(InstanceType::new(
        "medium",
        reqs,
        vec![Offering::new(
            "zone-a",
            labels::CAPACITY_TYPE_ON_DEMAND,
            0.2,
        )],
        capacity,
        Overhead::default(),
    ))
}

fn state_node(name: &str, it: &InstanceType, initialized: bool) -> StateNode {
    let mut node_labels = BTreeMap::new();
    for (k, v) in [
        (labels::NODEPOOL, "default"),
        (labels::INSTANCE_TYPE, it.name()),
        (labels::ZONE, "zone-a"),
        (labels::CAPACITY_TYPE, labels::CAPACITY_TYPE_ON_DEMAND),
        (labels::ARCH, "amd64"),
        (labels::OS, "linux"),
        (labels::HOSTNAME, name),
        (labels::REGISTERED, "true"),
    ] {
        node_labels.insert(k.to_string(), v.to_string());
    }
    if initialized {
        node_labels.insert(labels::INITIALIZED.to_string(), "true".to_string());
    }
    let mut n = ClusterNode::new(name);
    n.labels = node_labels.clone();
    n.capacity = it.capacity().clone();
    n.allocatable = it.allocatable().clone();
    n.managed = true;
    n.initialized = initialized;
    let mut claim = NodeClaim::new(
        name,
        NodeClaimSpec::new(NodeClassReference::new("g", "K", "c")),
    );
    claim.metadata.labels = node_labels;
    claim.metadata.creation_timestamp = Some(format_time(t0()));
    claim.status.provider_id = Some(format!("test:///{name}"));
    claim.status.capacity = it.capacity().clone();
    claim.status.allocatable = it.allocatable().clone();
    StateNode::new(Some(n), Some(claim), Vec::new())
}

/// upstream `controllers/state`: before initialization a state node's capacity and allocatable fall
/// back to the NodeClaim's status values where the Node reports zero, so a deleting node's pods can
/// be simulated onto a node whose kubelet has not reported its resources yet
/// (`disruption::simulate::cluster_node`), instead of launching a new NodeClaim.
#[test]
fn uninitialized_node_falls_back_to_the_claims_allocatable() {
    let it = four_cpu();
    let mut deleting = state_node("deleting", &it, true);
    let mut p = Pod::new("default", "moving");
    p.requests = [("cpu", Quantity::parse("2").unwrap())]
        .into_iter()
        .collect();
    p.node_name = Some("deleting".into());
    p.phase = PodPhase::Running;
    p.owner = Some(OwnerReference::new("apps/v1", "ReplicaSet", "rs").with_controller(true));
    deleting.pods.push(p);
    deleting.marked_for_deletion = true;
    let mut fresh = state_node("fresh", &it, false);
    if let Some(n) = fresh.node.as_mut() {
        // The kubelet has not reported allocatable resources yet.
        n.allocatable = ResourceList::new();
        n.capacity = ResourceList::new();
    }
    let template = Template {
        metadata: Default::default(),
        spec: TemplateSpec::new(NodeClassReference::new("g", "K", "c")),
    };
    let snapshot = ClusterSnapshot::new(
        vec![NodePoolState::new(
            NodePool::new("default", NodePoolSpec::new(template)),
            vec![it.clone()],
        )],
        [deleting, fresh],
    );
    let options = SchedulerOptions::default();
    let context = SimulationContext::new(&snapshot, &options, t0());
    let sim = context.simulator().simulate(&[], false).expect("runs");
    assert!(
        sim.all_non_pending_scheduled(),
        "{:?}",
        sim.displaced_errors
    );
    assert!(
        sim.results.new_node_claims.is_empty(),
        "the pod fits the uninitialized node by its NodeClaim's allocatable"
    );
}

// ---------------------------------------------------------------------------------------------
// upstream `node/termination` Eviction queue

use karpenter_core::lifecycle::termination::{
    EvictionResponse, eviction_backoff, eviction_decision,
};

/// upstream `node/termination` eviction queue: 404 and 409 end the pod's eviction; 429 (a PDB) and
/// the multiple-PDB error publish `FailedDraining` and retry with a backoff from 100 ms to 10 s; a
/// success publishes `Evicted` and counts `pods_drained_total{reason}` (the NodeClaim's
/// `DisruptionReason`, else "Forceful Termination").
#[test]
fn eviction_responses() {
    let ok = eviction_decision(
        "default/app",
        "node-a",
        &EvictionResponse::Evicted,
        "Drifted",
        0,
    );
    assert!(ok.done);
    assert_eq!(ok.retry_after, None);
    assert_eq!(ok.events.len(), 1);
    assert_eq!(ok.events[0].reason, "Evicted");
    let drained = ok
        .metrics
        .iter()
        .find(|m| m.name == metric_names::PODS_DRAINED_TOTAL)
        .expect("pods_drained_total");
    assert_eq!(drained.labels["reason"], "Drifted");

    for gone in [EvictionResponse::NotFound, EvictionResponse::Conflict] {
        let d = eviction_decision("default/app", "node-a", &gone, "Drifted", 3);
        assert!(d.done);
        assert!(d.events.is_empty());
        assert!(
            d.metrics
                .iter()
                .all(|m| m.name != metric_names::PODS_DRAINED_TOTAL)
        );
    }

    let pdb = EvictionResponse::TooManyRequests {
        message: "Cannot evict pod as it would violate the pod's disruption budget.".into(),
    };
    let d = eviction_decision("default/app", "node-a", &pdb, "Drifted", 0);
    assert!(!d.done);
    assert_eq!(d.retry_after, Some(SignedDuration::from_millis(100)));
    assert_eq!(d.events[0].reason, "FailedDraining");
    let multi = EvictionResponse::MultiplePdbs {
        message: "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.".into(),
    };
    let d = eviction_decision("default/app", "node-a", &multi, "Drifted", 2);
    assert!(!d.done);
    assert_eq!(d.retry_after, Some(SignedDuration::from_millis(400)));
    assert_eq!(d.events[0].reason, "FailedDraining");

    assert_eq!(eviction_backoff(0), SignedDuration::from_millis(100));
    assert_eq!(eviction_backoff(6), SignedDuration::from_millis(6400));
    assert_eq!(eviction_backoff(7), SignedDuration::from_secs(10));
    assert_eq!(eviction_backoff(u32::MAX), SignedDuration::from_secs(10));
}

// ---------------------------------------------------------------------------------------------
// upstream `nodeclaim/disruption/drift.go` Requirements drift

use karpenter_core::lifecycle::drift::is_requirements_drifted;
use karpenter_core::requirements::NodeSelectorRequirement;

/// upstream `nodeclaim/disruption/drift.go`: requirements drift iff the NodeClaim's labels are not
/// strictly compatible with the NodePool's requirements: an `In` key the NodeClaim lacks drifts it,
/// a `NotIn` or `DoesNotExist` key it lacks does not, and `minValues` (a constraint on the
/// NodeClaim's instance-type choices, not on one node's labels) does not make a matching node
/// drift.
#[test]
fn requirements_drift_rules() {
    let claim_with = |pairs: &[(&str, &str)]| {
        let mut c = NodeClaim::new(
            "nc",
            NodeClaimSpec::new(NodeClassReference::new("g", "K", "c")),
        );
        for (k, v) in pairs {
            c.metadata.labels.insert(k.to_string(), v.to_string());
        }
        c
    };
    let pool_with = |reqs: Vec<NodeSelectorRequirement>| {
        let mut spec = NodeClaimTemplateSpec::new(NodeClassReference::new("g", "K", "c"));
        spec.requirements = Some(reqs);
        NodePool::new(
            "default",
            NodePoolSpec::new(NodeClaimTemplate {
                metadata: Default::default(),
                spec,
            }),
        )
    };
    let mut types =
        NodeSelectorRequirement::new(labels::INSTANCE_TYPE, Operator::In, ["a", "b", "c"]);
    types.min_values = Some(2);
    let np = pool_with(vec![types]);
    assert!(!is_requirements_drifted(
        &np,
        &claim_with(&[(labels::INSTANCE_TYPE, "a")])
    ));
    assert!(is_requirements_drifted(
        &np,
        &claim_with(&[(labels::INSTANCE_TYPE, "d")])
    ));

    let np = pool_with(vec![NodeSelectorRequirement::new(
        "team",
        Operator::In,
        ["x"],
    )]);
    assert!(is_requirements_drifted(&np, &claim_with(&[])));
    assert!(!is_requirements_drifted(&np, &claim_with(&[("team", "x")])));

    let np = pool_with(vec![
        NodeSelectorRequirement::new("team", Operator::NotIn, ["x"]),
        NodeSelectorRequirement::new("gpu", Operator::DoesNotExist, Vec::<String>::new()),
    ]);
    assert!(!is_requirements_drifted(&np, &claim_with(&[])));
    assert!(is_requirements_drifted(&np, &claim_with(&[("gpu", "1")])));
}

// ---------------------------------------------------------------------------------------------
// upstream `Queue.StartCommand`, `Queue.Reconcile` From a planned command to a queued one

use karpenter_core::api::ConsolidationPolicy;
use karpenter_core::disruption::candidates::{DisruptionClass, PdbLimits, new_candidate};
use karpenter_core::disruption::methods::{self as planned, Method, Reason};
use karpenter_core::lifecycle::TerminationMode;
use karpenter_core::scheduling::{ExistingNodeResult, Results};

/// upstream `Queue.StartCommand` and upstream `Queue.Reconcile` labels: the queued command
/// nominates the existing nodes the simulation put real (non-buffer) pods on, labels consolidation
/// commands with the snake_case consolidation policy of the candidates' NodePool (drift: ""), and
/// carries each candidate's capacity type, termination mode and reschedulable pods.
#[test]
fn queued_command_from_a_planned_one() {
    let it = four_cpu();
    let mut candidate_node = state_node("old", &it, true);
    if let Some(c) = candidate_node.node_claim.as_mut() {
        c.spec.termination_grace_period = Some(karpenter_core::api::Duration::parse("1h").unwrap());
    }
    let template = Template {
        metadata: Default::default(),
        spec: TemplateSpec::new(NodeClassReference::new("g", "K", "c")),
    };
    let mut np = NodePool::new("default", NodePoolSpec::new(template));
    np.spec.disruption.consolidation_policy = Some(ConsolidationPolicy::WhenEmptyOrUnderutilized);
    let mut buffer = Pod::new("default", "buffer-0");
    buffer.phase = PodPhase::Pending;
    let snapshot = ClusterSnapshot::new(
        vec![NodePoolState::new(np, vec![it.clone()])],
        [
            candidate_node,
            state_node("receiver", &it, true),
            state_node("buffer-only", &it, true),
        ],
    )
    .with_buffer_pods(vec![buffer]);
    let pdbs = PdbLimits::new(&snapshot.pdbs);
    let candidate = new_candidate(
        &snapshot,
        &snapshot.nodes[0],
        &pdbs,
        DisruptionClass::Graceful,
        &|_| false,
        t0(),
    )
    .expect("a candidate");
    let mut simulation = Results::default();
    simulation.existing_nodes = vec![
        ExistingNodeResult::new("receiver", vec!["default/moved".into()]),
        ExistingNodeResult::new("buffer-only", vec!["default/buffer-0".into()]),
    ];
    let decision =
        planned::Command::new(Method::SingleNode, Reason::Underutilized, vec![candidate])
            .with_savings_per_hour(0.2)
            .with_simulation(simulation);
    let cmd = QueuedCommand::from_decision("c1", &decision, &snapshot, Vec::new(), t0())
        .expect("a queue command");
    assert_eq!(cmd.method, "single");
    assert_eq!(cmd.reason, DisruptionReason::Underutilized);
    assert_eq!(cmd.consolidation_policy, "when_empty_or_underutilized");
    assert_eq!(cmd.nominated_nodes, ["receiver"]);
    let c = &cmd.candidates[0];
    assert_eq!(c.provider_id, "test:///old");
    assert_eq!(c.node_name, "old");
    assert_eq!(c.claim_name, "old");
    assert_eq!(c.nodepool, "default");
    assert_eq!(c.capacity_type, labels::CAPACITY_TYPE_ON_DEMAND);
    assert_eq!(c.termination_mode, TerminationMode::Eventual);

    let mut drift = decision.clone();
    drift.method = Method::Drift;
    drift.reason = Reason::Drifted;
    drift.simulation = None;
    let cmd = QueuedCommand::from_decision("c2", &drift, &snapshot, Vec::new(), t0()).unwrap();
    assert_eq!(cmd.method, "");
    assert_eq!(cmd.consolidation_policy, "");
    assert_eq!(cmd.reason, DisruptionReason::Drifted);
    let mut expired = drift;
    expired.method = Method::Expiration;
    expired.reason = Reason::Expired;
    assert!(QueuedCommand::from_decision("c3", &expired, &snapshot, Vec::new(), t0()).is_none());
}

// ---------------------------------------------------------------------------------------------
// upstream `node/termination` Drained counted once

use karpenter_core::lifecycle::conditions::{ConditionSet, DRAINED};
use karpenter_core::lifecycle::termination::{DrainedDecision, drain_plan, drained_decision};

/// upstream `node/termination`: `nodes_drained_total` counts the transition to `Drained=True`; a
/// later pass over a node already drained (the finalizer is still waiting for volumes or the
/// instance) does not count it again.
#[test]
fn nodes_drained_total_counts_the_transition_once() {
    let done = drain_plan("n1", &[], None, t0());
    let mut c = initialized_claim(t0());
    ConditionSet::for_nodeclaim(&mut c, t0()).set_unknown_with_reason(DRAINED, "Draining", "");
    let draining = find_condition(&c.status.conditions, DRAINED);
    let DrainedDecision::Drained { metrics } =
        drained_decision("n1", &done, draining, "default", after(secs(5)))
    else {
        panic!("drained");
    };
    assert_eq!(metrics.len(), 1);
    ConditionSet::for_nodeclaim(&mut c, after(secs(5))).set_true(DRAINED);
    let drained = find_condition(&c.status.conditions, DRAINED);
    let DrainedDecision::Drained { metrics } =
        drained_decision("n1", &done, drained, "default", after(secs(6)))
    else {
        panic!("still drained");
    };
    assert!(metrics.is_empty(), "{metrics:?}");
}

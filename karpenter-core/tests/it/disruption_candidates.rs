//! `karpenter_core::disruption::{candidates, budgets}`: upstream's "Candidate Filtering" and
//! "BuildDisruptionBudgetMapping" scenarios (upstream `disruption/suite_test.go`), duration-based
//! do-not-disrupt (upstream `drift_test.go`) at the candidate level, ordering helpers, and a
//! property test of the budget mapping against a reference computation.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use karpenter_core::api::{
    Budget, Condition, ConditionStatus, DisruptionReason, Duration, NodeClaim, NodeClaimSpec,
    NodeClaimTemplate, NodeClaimTemplateSpec, NodeClassReference, NodePool, NodePoolSpec,
};
use karpenter_core::disruption::budgets::{
    BudgetMapping, blocked_message, build_disruption_budget_mapping,
};
use karpenter_core::disruption::candidates::{
    Candidate, CandidateError, DisruptionClass, DoNotDisrupt, PdbError, PdbLimits,
    PodBlockEvictionError, current_price, get_candidates, interleave_by_node_pool,
    is_currently_reschedulable, is_do_not_disrupt_active, is_evictable, is_reschedulable,
    new_candidate, sort_by_savings_ratio, sort_for_drift, tolerates_disrupted_taint,
};
use karpenter_core::labels;
use karpenter_core::model::{
    ClusterNode, InstanceType, IntOrPercent, LabelSelector, Offering, Overhead, OwnerReference,
    Pod, PodDisruptionBudget, PodPhase, Timestamp,
};
use karpenter_core::requirements::Requirements;
use karpenter_core::resources::ResourceList;
use karpenter_core::state::{ClusterSnapshot, NodePoolState, StateNode};
use karpenter_core::taints::{TaintEffect, Toleration, TolerationOperator};
use proptest::prelude::*;

// ---------------------------------------------------------------------------------------------
// Builders

const NOW: &str = "2024-06-15T12:00:00Z";
const INSTANCE_TYPE: &str = "default-instance-type";
const ZONE: &str = "test-zone-1";

fn ts(s: &str) -> Timestamp {
    s.parse().expect("valid timestamp")
}

fn now() -> Timestamp {
    ts(NOW)
}

fn minutes(m: i64) -> jiff::SignedDuration {
    jiff::SignedDuration::from_mins(m)
}

fn never_in_queue(_: &str) -> bool {
    false
}

fn condition(type_: &str, status: ConditionStatus, at: &str) -> Condition {
    Condition {
        type_: type_.to_string(),
        status,
        reason: None,
        message: None,
        last_transition_time: Some(at.to_string()),
        observed_generation: None,
    }
}

fn instance_type(name: &str, on_demand: f64, spot: f64) -> Arc<InstanceType> {
    Arc::new(InstanceType::new(
        name,
        Requirements::new(),
        vec![
            Offering::new(ZONE, labels::CAPACITY_TYPE_ON_DEMAND, on_demand),
            Offering::new(ZONE, labels::CAPACITY_TYPE_SPOT, spot),
            Offering::new(
                "test-zone-2",
                labels::CAPACITY_TYPE_ON_DEMAND,
                on_demand * 2.0,
            ),
        ],
        ResourceList::new(),
        Overhead::default(),
    ))
}

fn node_pool(name: &str, budgets: Vec<Budget>) -> NodePoolState {
    let template = NodeClaimTemplate {
        metadata: Default::default(),
        spec: NodeClaimTemplateSpec::new(NodeClassReference::new(
            "karpenter.test.sh",
            "TestNodeClass",
            "default",
        )),
    };
    let mut spec = NodePoolSpec::new(template);
    spec.disruption.budgets = Some(budgets);
    NodePoolState::new(
        NodePool::new(name, spec),
        vec![instance_type(INSTANCE_TYPE, 1.0, 0.5)],
    )
}

/// A NodePool with a 100 % budget (the suite's default).
fn pool(name: &str) -> NodePoolState {
    node_pool(name, vec![Budget::nodes("100%")])
}

/// A managed, registered, initialized, Ready node of `pool` with its NodeClaim (on-demand,
/// `default-instance-type`, `test-zone-1`) and no pods.
fn managed_node(name: &str, pool: &str) -> StateNode {
    let labels: BTreeMap<String, String> = [
        (labels::NODEPOOL, pool),
        (labels::INITIALIZED, "true"),
        (labels::REGISTERED, "true"),
        (labels::INSTANCE_TYPE, INSTANCE_TYPE),
        (labels::ZONE, ZONE),
        (labels::CAPACITY_TYPE, labels::CAPACITY_TYPE_ON_DEMAND),
        (labels::HOSTNAME, name),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let mut claim = NodeClaim::new(
        format!("{name}-claim"),
        NodeClaimSpec::new(NodeClassReference::new(
            "karpenter.test.sh",
            "TestNodeClass",
            "default",
        )),
    );
    claim.metadata.labels = labels.clone();
    claim.metadata.creation_timestamp = Some("2024-06-01T00:00:00Z".to_string());
    claim.status.provider_id = Some(format!("fake:///{name}"));
    claim.status.node_name = Some(name.to_string());
    for t in ["Launched", "Registered", "Initialized"] {
        claim
            .status
            .conditions
            .push(condition(t, ConditionStatus::True, "2024-06-01T00:01:00Z"));
    }
    let mut node = ClusterNode::new(name);
    node.labels = labels;
    node.managed = true;
    StateNode::new(Some(node), Some(claim), Vec::new())
}

/// A running pod bound to `node`, started an hour before [`NOW`], owned by a ReplicaSet.
fn pod(name: &str, node: &str) -> Pod {
    let mut p = Pod::new("default", name);
    p.node_name = Some(node.to_string());
    p.phase = PodPhase::Running;
    p.start_time = Some(ts("2024-06-15T11:00:00Z"));
    p.owner = Some(owner("ReplicaSet", "apps/v1"));
    p.labels.insert("app".to_string(), "test".to_string());
    p
}

fn owner(kind: &str, api_version: &str) -> OwnerReference {
    OwnerReference::new(
        api_version.to_string(),
        kind.to_string(),
        format!("{}-owner", kind.to_lowercase()),
    )
    .with_controller(true)
}

fn dnd(mut p: Pod, value: &str) -> Pod {
    p.annotations.insert(
        labels::DO_NOT_DISRUPT_ANNOTATION.to_string(),
        value.to_string(),
    );
    p
}

fn with_pods(mut n: StateNode, pods: Vec<Pod>) -> StateNode {
    n.pods = pods;
    n
}

fn with_tgp(mut n: StateNode, tgp: &str) -> StateNode {
    if let Some(c) = n.node_claim.as_mut() {
        c.spec.termination_grace_period = Some(Duration::parse(tgp).expect("valid duration"));
    }
    n
}

/// A PDB selecting `app: test` in `default` with `disruptionsAllowed` 0 (and `maxUnavailable`
/// 0 when `fully_blocking`).
fn pdb(name: &str, fully_blocking: bool) -> PodDisruptionBudget {
    PodDisruptionBudget::new("default".to_string(), name.to_string())
        .with_selector(LabelSelector::from_labels([("app", "test")]))
        .with_max_unavailable(IntOrPercent::Int(if fully_blocking { 0 } else { 1 }))
}

fn snapshot(pools: Vec<NodePoolState>, nodes: Vec<StateNode>) -> ClusterSnapshot {
    ClusterSnapshot::new(pools, nodes)
}

fn with_pdbs(mut s: ClusterSnapshot, pdbs: Vec<PodDisruptionBudget>) -> ClusterSnapshot {
    s.pdbs = pdbs;
    s
}

/// The outcome of candidacy for the snapshot's only node.
fn candidacy_at(
    s: &ClusterSnapshot,
    class: DisruptionClass,
    at: Timestamp,
) -> Result<Candidate, CandidateError> {
    let pdbs = PdbLimits::new(&s.pdbs);
    let node = s.nodes.first().expect("one node");
    new_candidate(s, node, &pdbs, class, &never_in_queue, at)
}

fn candidacy(s: &ClusterSnapshot, class: DisruptionClass) -> Result<Candidate, CandidateError> {
    candidacy_at(s, class, now())
}

fn rejection(s: &ClusterSnapshot, class: DisruptionClass) -> CandidateError {
    match candidacy(s, class) {
        Ok(c) => panic!("{} should not be a candidate", c.name()),
        Err(e) => e,
    }
}

fn accepted(s: &ClusterSnapshot, class: DisruptionClass) -> Candidate {
    candidacy(s, class).unwrap_or_else(|e| panic!("should be a candidate: {e}"))
}

fn one_node(n: StateNode) -> ClusterSnapshot {
    snapshot(vec![pool("default")], vec![n])
}

const DND_POD_ERROR: &str = "pod has \"karpenter.sh/do-not-disrupt\" annotation (Pod=default/p)";

// ---------------------------------------------------------------------------------------------
// Candidate Filtering (upstream `disruption/suite_test.go`)

#[test]
fn should_not_consider_candidates_that_have_do_not_disrupt_pods_scheduled_and_no_termination_grace_period()
 {
    let s = one_node(with_pods(
        managed_node("n", "default"),
        vec![dnd(pod("p", "n"), "true")],
    ));
    let e = rejection(&s, DisruptionClass::Graceful);
    assert_eq!(e.to_string(), DND_POD_ERROR);
    assert_eq!(
        e,
        CandidateError::PodBlockEviction(PodBlockEvictionError::DoNotDisrupt {
            pod: "default/p".into()
        })
    );
    assert_eq!(
        e.event_message().as_deref(),
        Some("Pod has \"karpenter.sh/do-not-disrupt\" annotation (Pod=default/p)")
    );
    assert!(e.is_pod_block_eviction());
}

#[test]
fn should_not_consider_candidates_that_have_do_not_disrupt_mirror_pods_scheduled() {
    let mut p = dnd(pod("p", "n"), "true");
    p.owner = Some(owner("Node", "v1"));
    let s = one_node(with_pods(managed_node("n", "default"), vec![p]));
    assert_eq!(
        rejection(&s, DisruptionClass::Graceful).to_string(),
        DND_POD_ERROR
    );
}

#[test]
fn should_not_consider_candidates_that_have_do_not_disrupt_daemonset_pods_scheduled() {
    let mut p = dnd(pod("p", "n"), "true");
    p.owner = Some(owner("DaemonSet", "apps/v1"));
    let s = one_node(with_pods(managed_node("n", "default"), vec![p]));
    assert_eq!(
        rejection(&s, DisruptionClass::Graceful).to_string(),
        DND_POD_ERROR
    );
}

#[test]
fn should_consider_candidates_that_have_do_not_disrupt_pods_scheduled_with_a_termination_grace_period_set_for_eventual_disruption()
 {
    let s = one_node(with_tgp(
        with_pods(
            managed_node("n", "default"),
            vec![dnd(pod("p", "n"), "true")],
        ),
        "300s",
    ));
    let c = accepted(&s, DisruptionClass::Eventual);
    assert_eq!(c.name(), "n");
    // The blocking pod is still one to reschedule.
    assert_eq!(c.reschedulable_pod_count(), 1);
}

#[test]
fn should_consider_candidates_that_have_pdb_blocked_pods_scheduled_with_a_termination_grace_period_set_for_eventual_disruption()
 {
    let s = with_pdbs(
        one_node(with_tgp(
            with_pods(managed_node("n", "default"), vec![pod("p", "n")]),
            "300s",
        )),
        vec![pdb("pdb", false)],
    );
    accepted(&s, DisruptionClass::Eventual);
}

#[test]
fn should_not_consider_candidates_that_have_do_not_disrupt_pods_scheduled_with_a_termination_grace_period_set_for_graceful_disruption()
 {
    let s = one_node(with_tgp(
        with_pods(
            managed_node("n", "default"),
            vec![dnd(pod("p", "n"), "true")],
        ),
        "300s",
    ));
    assert_eq!(
        rejection(&s, DisruptionClass::Graceful).to_string(),
        DND_POD_ERROR
    );
}

#[test]
fn should_not_consider_candidates_that_have_pdb_blocked_pods_scheduled_with_a_termination_grace_period_set_for_graceful_disruption()
 {
    let s = with_pdbs(
        one_node(with_tgp(
            with_pods(managed_node("n", "default"), vec![pod("p", "n")]),
            "300s",
        )),
        vec![pdb("pdb", false)],
    );
    let e = rejection(&s, DisruptionClass::Graceful);
    assert_eq!(
        e.to_string(),
        "pdb prevents pod evictions (PodDisruptionBudget=[default/pdb])"
    );
    assert_eq!(
        e.event_message().as_deref(),
        Some("Pdb prevents pod evictions (PodDisruptionBudget=[default/pdb])")
    );
}

#[test]
fn should_not_consider_candidates_that_have_do_not_disrupt_pods_scheduled_without_a_termination_grace_period_set_for_eventual_disruption()
 {
    let s = one_node(with_pods(
        managed_node("n", "default"),
        vec![dnd(pod("p", "n"), "true")],
    ));
    assert_eq!(
        rejection(&s, DisruptionClass::Eventual).to_string(),
        DND_POD_ERROR
    );
}

#[test]
fn should_not_consider_candidates_that_have_pdb_blocked_pods_scheduled_without_a_termination_grace_period_set_for_eventual_disruption()
 {
    let s = with_pdbs(
        one_node(with_pods(managed_node("n", "default"), vec![pod("p", "n")])),
        vec![pdb("pdb", false)],
    );
    assert_eq!(
        rejection(&s, DisruptionClass::Eventual),
        CandidateError::PodBlockEviction(PodBlockEvictionError::Pdb(PdbError::Blocked {
            pdb: "default/pdb".into()
        }))
    );
}

#[test]
fn should_consider_candidates_that_have_do_not_disrupt_terminating_pods() {
    let mut p = dnd(pod("p", "n"), "true");
    p.deletion_timestamp = Some(ts("2024-06-15T11:59:00Z"));
    let s = one_node(with_pods(managed_node("n", "default"), vec![p]));
    let c = accepted(&s, DisruptionClass::Graceful);
    // A terminating ReplicaSet pod needs no new home.
    assert!((c.reschedulable_pod_count() == 0));
}

#[test]
fn should_consider_candidates_that_have_do_not_disrupt_terminal_pods() {
    for phase in [PodPhase::Succeeded, PodPhase::Failed] {
        let mut p = dnd(pod("p", "n"), "true");
        p.phase = phase;
        let s = one_node(with_pods(managed_node("n", "default"), vec![p]));
        let c = accepted(&s, DisruptionClass::Graceful);
        assert!(c.is_empty());
    }
}

#[test]
fn should_not_consider_candidates_that_have_do_not_disrupt_on_nodes() {
    let mut n = managed_node("n", "default");
    if let Some(node) = n.node.as_mut() {
        node.annotations.insert(
            labels::DO_NOT_DISRUPT_ANNOTATION.to_string(),
            "true".to_string(),
        );
    }
    let e = rejection(&one_node(n), DisruptionClass::Graceful);
    assert_eq!(e, CandidateError::DoNotDisruptNode);
    assert_eq!(
        e.to_string(),
        "disruption is blocked through the \"karpenter.sh/do-not-disrupt\" annotation"
    );
    assert_eq!(
        e.event_message().as_deref(),
        Some("Disruption is blocked through the \"karpenter.sh/do-not-disrupt\" annotation")
    );
    // Only the literal "true" blocks on nodes.
    let mut n = managed_node("n", "default");
    if let Some(node) = n.node.as_mut() {
        node.annotations.insert(
            labels::DO_NOT_DISRUPT_ANNOTATION.to_string(),
            "false".to_string(),
        );
    }
    accepted(&one_node(n), DisruptionClass::Graceful);
}

/// Upstream `NewCandidate`: the do-not-disrupt annotation is read from the Node once it is
/// registered, from the NodeClaim before (upstream `StateNode.Annotations`). An initialized Node
/// without the `karpenter.sh/registered` label is not registered yet.
#[test]
fn do_not_disrupt_on_nodes_is_read_from_the_nodeclaim_until_the_node_registers() {
    let unregistered = |on_node: bool| {
        let mut n = managed_node("n", "default");
        if let Some(node) = n.node.as_mut() {
            node.labels.remove(labels::REGISTERED);
            if on_node {
                node.annotations.insert(
                    labels::DO_NOT_DISRUPT_ANNOTATION.to_string(),
                    "true".to_string(),
                );
            }
        }
        if let Some(claim) = n.node_claim.as_mut()
            && !on_node
        {
            claim.metadata.annotations.insert(
                labels::DO_NOT_DISRUPT_ANNOTATION.to_string(),
                "true".to_string(),
            );
        }
        n
    };
    assert_eq!(
        rejection(&one_node(unregistered(false)), DisruptionClass::Graceful),
        CandidateError::DoNotDisruptNode
    );
    accepted(&one_node(unregistered(true)), DisruptionClass::Graceful);
}

#[test]
fn should_not_consider_candidates_that_have_multiple_pdbs_on_the_same_pod() {
    let mut first = pdb("pdb-1", false);
    first.disruptions_allowed = 5;
    let mut second = pdb("pdb-2", false);
    second.disruptions_allowed = 5;
    let s = with_pdbs(
        one_node(with_pods(managed_node("n", "default"), vec![pod("p", "n")])),
        vec![first, second],
    );
    let e = rejection(&s, DisruptionClass::Graceful);
    let message = e.to_string();
    assert!(
        message.contains("eviction does not support multiple PDBs"),
        "{message}"
    );
    assert!(message.contains("default/pdb-1"), "{message}");
    assert!(message.contains("default/pdb-2"), "{message}");
    assert_eq!(
        message,
        "eviction does not support multiple PDBs (PodDisruptionBudget(s)=[default/pdb-1 default/pdb-2])"
    );
    let event = e.event_message().unwrap_or_default();
    assert!(
        event.starts_with("Eviction does not support multiple PDBs"),
        "{event}"
    );
}

#[test]
fn should_not_consider_candidates_that_have_fully_blocking_pdbs() {
    let s = with_pdbs(
        one_node(with_pods(managed_node("n", "default"), vec![pod("p", "n")])),
        vec![pdb("pdb", true)],
    );
    assert_eq!(
        rejection(&s, DisruptionClass::Graceful).to_string(),
        "pdb prevents pod evictions (PodDisruptionBudget=[default/pdb])"
    );
}

#[test]
fn should_not_consider_candidates_that_have_fully_blocking_pdbs_on_daemonset_pods() {
    let mut p = pod("p", "n");
    p.owner = Some(owner("DaemonSet", "apps/v1"));
    let s = with_pdbs(
        one_node(with_pods(managed_node("n", "default"), vec![p])),
        vec![pdb("pdb", true)],
    );
    assert!(matches!(
        rejection(&s, DisruptionClass::Graceful),
        CandidateError::PodBlockEviction(PodBlockEvictionError::Pdb(PdbError::Blocked { .. }))
    ));
}

#[test]
fn should_consider_candidates_that_have_fully_blocking_pdbs_on_mirror_pods() {
    let mut p = pod("p", "n");
    p.owner = Some(owner("Node", "v1"));
    let s = with_pdbs(
        one_node(with_pods(managed_node("n", "default"), vec![p])),
        vec![pdb("pdb", true)],
    );
    let c = accepted(&s, DisruptionClass::Graceful);
    assert!((c.reschedulable_pod_count() == 0));
}

#[test]
fn should_not_consider_candidates_that_have_do_not_disrupt_pods_without_a_termination_grace_period_set_for_graceful_disruption()
 {
    let s = one_node(with_pods(
        managed_node("n", "default"),
        vec![pod("ok", "n"), dnd(pod("p", "n"), "true")],
    ));
    assert_eq!(
        rejection(&s, DisruptionClass::Graceful).to_string(),
        DND_POD_ERROR
    );
}

#[test]
fn should_not_consider_candidates_that_have_fully_blocking_pdbs_without_a_termination_grace_period_set_for_graceful_disruption()
 {
    let s = with_pdbs(
        one_node(with_pods(managed_node("n", "default"), vec![pod("p", "n")])),
        vec![pdb("pdb", true)],
    );
    assert!(rejection(&s, DisruptionClass::Graceful).is_pod_block_eviction());
}

#[test]
fn should_consider_candidates_that_have_fully_blocking_pdbs_on_terminal_pods() {
    for phase in [PodPhase::Succeeded, PodPhase::Failed] {
        let mut p = pod("p", "n");
        p.phase = phase;
        let s = with_pdbs(
            one_node(with_pods(managed_node("n", "default"), vec![p])),
            vec![pdb("pdb", true)],
        );
        accepted(&s, DisruptionClass::Graceful);
    }
}

#[test]
fn should_consider_candidates_that_have_fully_blocking_pdbs_on_terminating_pods() {
    let mut p = pod("p", "n");
    p.deletion_timestamp = Some(ts("2024-06-15T11:59:00Z"));
    let s = with_pdbs(
        one_node(with_pods(managed_node("n", "default"), vec![p])),
        vec![pdb("pdb", true)],
    );
    accepted(&s, DisruptionClass::Graceful);
}

#[test]
fn should_not_consider_candidates_that_has_just_a_node_representation() {
    let mut n = managed_node("n", "default");
    n.node_claim = None;
    let e = rejection(&one_node(n), DisruptionClass::Graceful);
    assert_eq!(e, CandidateError::NotManaged);
    assert_eq!(e.to_string(), "node isn't managed by karpenter");
}

#[test]
fn should_not_consider_candidate_that_has_just_a_node_claim_representation() {
    let mut n = managed_node("n", "default");
    n.node = None;
    let e = rejection(&one_node(n), DisruptionClass::Graceful);
    assert_eq!(e, CandidateError::NoNode);
    assert_eq!(e.to_string(), "nodeclaim does not have an associated node");
}

#[test]
fn should_not_consider_candidates_that_are_nominated() {
    let mut n = managed_node("n", "default");
    n.nominated_until = Some(now() + minutes(1) / 3);
    let s = one_node(n);
    let e = rejection(&s, DisruptionClass::Graceful);
    assert_eq!(e, CandidateError::Nominated);
    assert_eq!(e.to_string(), "node is nominated for a pending pod");
    assert_eq!(
        e.event_message().as_deref(),
        Some("Node is nominated for a pending pod")
    );
    // Once the nomination window has passed, the node is a candidate again.
    candidacy_at(&s, DisruptionClass::Graceful, now() + minutes(1))
        .unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn should_not_consider_candidates_that_are_deleting() {
    let mut n = managed_node("n", "default");
    if let Some(c) = n.node_claim.as_mut() {
        c.metadata.deletion_timestamp = Some("2024-06-15T11:00:00Z".to_string());
    }
    let e = rejection(&one_node(n), DisruptionClass::Graceful);
    assert_eq!(e, CandidateError::Deleting);
    assert_eq!(e.to_string(), "node is deleting or marked for deletion");
    // InstanceTerminating=True counts as deleting too.
    let mut n = managed_node("n", "default");
    if let Some(c) = n.node_claim.as_mut() {
        c.status.conditions.push(condition(
            "InstanceTerminating",
            ConditionStatus::True,
            "2024-06-15T11:00:00Z",
        ));
    }
    assert_eq!(
        rejection(&one_node(n), DisruptionClass::Graceful),
        CandidateError::Deleting
    );
}

#[test]
fn should_not_consider_candidates_that_are_marked_for_deletion() {
    let mut n = managed_node("n", "default");
    n.marked_for_deletion = true;
    let e = rejection(&one_node(n), DisruptionClass::Graceful);
    assert_eq!(e.to_string(), "node is deleting or marked for deletion");
}

#[test]
fn should_not_consider_candidates_that_arent_yet_initialized() {
    let mut n = managed_node("n", "default");
    if let Some(node) = n.node.as_mut() {
        node.labels.remove(labels::INITIALIZED);
    }
    let e = rejection(&one_node(n), DisruptionClass::Graceful);
    assert_eq!(e, CandidateError::NotInitialized);
    assert_eq!(e.to_string(), "node isn't initialized");
}

#[test]
fn should_not_consider_candidates_that_are_not_owned_by_a_node_pool() {
    let mut n = managed_node("n", "default");
    if let Some(node) = n.node.as_mut() {
        node.labels.remove(labels::NODEPOOL);
    }
    let e = rejection(&one_node(n), DisruptionClass::Graceful);
    assert_eq!(e, CandidateError::MissingNodePoolLabel);
    assert_eq!(
        e.to_string(),
        "node doesn't have required label (label=karpenter.sh/nodepool)"
    );
    assert_eq!(
        e.event_message().as_deref(),
        Some("Node doesn't have required label (label=karpenter.sh/nodepool)")
    );
}

#[test]
fn should_not_consider_candidates_that_are_have_a_non_existent_node_pool() {
    let s = snapshot(vec![pool("other")], vec![managed_node("n", "default")]);
    let e = rejection(&s, DisruptionClass::Graceful);
    assert_eq!(e.to_string(), "nodepool not found (NodePool=default)");
    assert_eq!(
        e.event_message().as_deref(),
        Some("NodePool not found (NodePool=default)")
    );
    // A pool whose provider returned no instance types counts as missing.
    let mut empty = pool("default");
    empty.instance_types.clear();
    let s = snapshot(vec![empty], vec![managed_node("n", "default")]);
    assert_eq!(
        rejection(&s, DisruptionClass::Graceful),
        CandidateError::NodePoolNotFound {
            node_pool: "default".into()
        }
    );
}

fn without_label(key: &str) -> StateNode {
    let mut n = managed_node("n", "default");
    if let Some(node) = n.node.as_mut() {
        node.labels.remove(key);
    }
    n
}

#[test]
fn should_consider_candidates_that_do_not_have_the_capacity_type_label() {
    let c = accepted(
        &one_node(without_label(labels::CAPACITY_TYPE)),
        DisruptionClass::Graceful,
    );
    assert_eq!(c.capacity_type, "");
    assert_eq!(c.price, 0.0);
    assert!(c.instance_type.is_some());
}

#[test]
fn should_consider_candidates_that_do_not_have_the_zone_label() {
    let c = accepted(
        &one_node(without_label(labels::ZONE)),
        DisruptionClass::Graceful,
    );
    assert_eq!(c.zone, "");
    assert_eq!(c.price, 0.0);
}

#[test]
fn should_consider_candidates_that_do_not_have_the_instance_type_label() {
    let c = accepted(
        &one_node(without_label(labels::INSTANCE_TYPE)),
        DisruptionClass::Graceful,
    );
    assert!(c.instance_type.is_none());
    assert_eq!(c.price, 0.0);
}

#[test]
fn should_consider_candidates_that_have_an_instance_type_that_cannot_be_resolved() {
    let mut n = managed_node("n", "default");
    if let Some(node) = n.node.as_mut() {
        node.labels.insert(
            labels::INSTANCE_TYPE.to_string(),
            "unknown-type".to_string(),
        );
    }
    let c = accepted(&one_node(n), DisruptionClass::Graceful);
    assert!(c.instance_type.is_none());
    assert_eq!(c.price, 0.0);
}

#[test]
fn should_not_consider_candidates_that_are_actively_being_processed_in_the_queue() {
    let s = one_node(managed_node("n", "default"));
    let pdbs = PdbLimits::new(&[]);
    let node = &s.nodes[0];
    let in_queue = |id: &str| id == "fake:///n";
    let e = new_candidate(&s, node, &pdbs, DisruptionClass::Graceful, &in_queue, now())
        .err()
        .unwrap_or_else(|| panic!("queued node accepted"));
    assert_eq!(e, CandidateError::AlreadyBeingDisrupted);
    assert_eq!(e.to_string(), "candidate is already being disrupted");
    assert_eq!(e.event_message(), None);
}

#[test]
fn rejection_rules_apply_in_order() {
    // Queued beats everything; not-initialized beats deleting; deleting beats nomination and
    // node DND; node rules beat the NodePool lookup; the NodePool lookup beats pod rules.
    let mut n = managed_node("n", "missing");
    n.marked_for_deletion = true;
    n.nominated_until = Some(now() + minutes(1));
    n.pods = vec![dnd(pod("p", "n"), "true")];
    if let Some(node) = n.node.as_mut() {
        node.annotations.insert(
            labels::DO_NOT_DISRUPT_ANNOTATION.to_string(),
            "true".to_string(),
        );
    }
    let s = snapshot(vec![pool("default")], vec![n.clone()]);
    let pdbs = PdbLimits::new(&[]);
    let always = |_: &str| true;
    let node = &s.nodes[0];
    assert_eq!(
        new_candidate(&s, node, &pdbs, DisruptionClass::Graceful, &always, now()).err(),
        Some(CandidateError::AlreadyBeingDisrupted)
    );
    assert_eq!(
        rejection(&s, DisruptionClass::Graceful),
        CandidateError::Deleting
    );
    n.marked_for_deletion = false;
    let s = snapshot(vec![pool("default")], vec![n.clone()]);
    assert_eq!(
        rejection(&s, DisruptionClass::Graceful),
        CandidateError::Nominated
    );
    n.nominated_until = None;
    let s = snapshot(vec![pool("default")], vec![n.clone()]);
    assert_eq!(
        rejection(&s, DisruptionClass::Graceful),
        CandidateError::DoNotDisruptNode
    );
    if let Some(node) = n.node.as_mut() {
        node.annotations.clear();
    }
    let s = snapshot(vec![pool("default")], vec![n.clone()]);
    assert!(matches!(
        rejection(&s, DisruptionClass::Graceful),
        CandidateError::NodePoolNotFound { .. }
    ));
    let s = snapshot(vec![pool("missing")], vec![n]);
    assert!(rejection(&s, DisruptionClass::Graceful).is_pod_block_eviction());
}

#[test]
fn a_do_not_disrupt_pod_is_reported_before_a_pdb() {
    let s = with_pdbs(
        one_node(with_pods(
            managed_node("n", "default"),
            vec![pod("blocked", "n"), dnd(pod("p", "n"), "true")],
        )),
        vec![pdb("pdb", true)],
    );
    assert_eq!(
        rejection(&s, DisruptionClass::Graceful).to_string(),
        DND_POD_ERROR
    );
}

// ---------------------------------------------------------------------------------------------
// Duration-based do-not-disrupt (upstream `drift_test.go`, at the candidate level)

fn started_at(mut p: Pod, at: Timestamp) -> Pod {
    p.start_time = Some(at);
    p
}

#[test]
fn should_not_drift_nodes_with_pods_that_have_a_duration_based_do_not_disrupt_annotation_that_is_still_active()
 {
    let start = now();
    let s = one_node(with_pods(
        managed_node("n", "default"),
        vec![started_at(dnd(pod("p", "n"), "2m"), start)],
    ));
    assert_eq!(
        candidacy_at(&s, DisruptionClass::Eventual, start)
            .err()
            .map(|e| e.to_string())
            .as_deref(),
        Some(DND_POD_ERROR)
    );
    assert_eq!(
        is_do_not_disrupt_active(&s.nodes[0].pods[0], start + minutes(1)),
        DoNotDisrupt::Active {
            until: Some(start + minutes(2))
        }
    );
    // Exactly at the end of the window the protection has lapsed.
    assert_eq!(
        is_do_not_disrupt_active(&s.nodes[0].pods[0], start + minutes(2)),
        DoNotDisrupt::Inactive
    );
    candidacy_at(&s, DisruptionClass::Eventual, start + minutes(3))
        .unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn should_drift_nodes_with_pods_that_have_an_invalid_do_not_disrupt_annotation_format() {
    let s = one_node(with_pods(
        managed_node("n", "default"),
        vec![dnd(pod("p", "n"), "invalid")],
    ));
    accepted(&s, DisruptionClass::Eventual);
    assert!(matches!(
        is_do_not_disrupt_active(&s.nodes[0].pods[0], now()),
        DoNotDisrupt::Invalid(m) if m.contains("\"invalid\"")
    ));
    for bad in ["0s", "-5m", "", "false", "True"] {
        let p = dnd(pod("p", "n"), bad);
        let state = is_do_not_disrupt_active(&p, now());
        assert!(
            matches!(state, DoNotDisrupt::Invalid(_)),
            "{bad}: {state:?}"
        );
        assert!(!state.is_active());
    }
}

#[test]
fn should_not_drift_nodes_until_the_longest_duration_based_do_not_disrupt_grace_period_expires_across_multiple_pods()
 {
    let start = now();
    let s = one_node(with_pods(
        managed_node("n", "default"),
        vec![
            started_at(dnd(pod("short", "n"), "1m"), start),
            started_at(dnd(pod("p", "n"), "3m"), start),
        ],
    ));
    assert_eq!(
        candidacy_at(&s, DisruptionClass::Eventual, start + minutes(2))
            .err()
            .map(|e| e.to_string())
            .as_deref(),
        Some(DND_POD_ERROR)
    );
    candidacy_at(&s, DisruptionClass::Eventual, start + minutes(4))
        .unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn duration_do_not_disrupt_without_a_start_time_fails_safe() {
    let mut p = dnd(pod("p", "n"), "1m");
    p.start_time = None;
    assert_eq!(
        is_do_not_disrupt_active(&p, now() + minutes(1_000_000)),
        DoNotDisrupt::Active { until: None }
    );
    assert_eq!(
        is_do_not_disrupt_active(&pod("p", "n"), now()),
        DoNotDisrupt::Inactive
    );
    assert_eq!(
        is_do_not_disrupt_active(&dnd(pod("p", "n"), "true"), now()),
        DoNotDisrupt::Active { until: None }
    );
}

// ---------------------------------------------------------------------------------------------
// Pod classification and PDB details

#[test]
fn pod_classification() {
    let running = pod("p", "n");
    assert!(is_reschedulable(&running));
    assert!(is_evictable(&running, now()));

    let mut ds = pod("ds", "n");
    ds.owner = Some(owner("DaemonSet", "apps/v1"));
    assert!(!is_reschedulable(&ds));
    assert!(is_evictable(&ds, now()));

    let mut mirror = pod("m", "n");
    mirror.owner = Some(owner("Node", "v1"));
    assert!(!is_reschedulable(&mirror));
    assert!(!is_evictable(&mirror, now()));

    // Owners are matched by group, version and kind (upstream `IsOwnedBy`): a DaemonSet of
    // another API group (a third-party "advanced DaemonSet") owns an ordinary, reschedulable
    // pod, and a terminating pod of such a StatefulSet is not kept reschedulable.
    let mut other_ds = pod("kruise-ds", "n");
    other_ds.owner = Some(owner("DaemonSet", "apps.kruise.io/v1alpha1"));
    assert!(!other_ds.is_daemonset_pod());
    assert!(is_reschedulable(&other_ds));
    // Any owner reference counts, not only the controller (upstream looks at every one).
    let mut co_owned = pod("co-owned", "n");
    co_owned.owner = Some(owner("ReplicaSet", "apps/v1"));
    co_owned.other_owners = vec![owner("DaemonSet", "apps/v1")];
    assert!(co_owned.is_daemonset_pod());
    assert!(!is_reschedulable(&co_owned));
    let mut other_sts = pod("kruise-sts", "n");
    other_sts.owner = Some(owner("StatefulSet", "apps.kruise.io/v1beta1"));
    other_sts.deletion_timestamp = Some(now());
    assert!(!is_reschedulable(&other_sts));

    let mut terminating_sts = pod("sts", "n");
    terminating_sts.owner = Some(owner("StatefulSet", "apps/v1"));
    terminating_sts.deletion_timestamp = Some(now());
    assert!(is_reschedulable(&terminating_sts));
    assert!(!is_evictable(&terminating_sts, now()));

    let mut terminating = pod("t", "n");
    terminating.deletion_timestamp = Some(now());
    assert!(!is_reschedulable(&terminating));

    let mut tolerant = pod("tol", "n");
    tolerant.tolerations.push(Toleration {
        key: labels::DISRUPTED_TAINT_KEY.to_string(),
        operator: Some(TolerationOperator::Exists),
        effect: Some(TaintEffect::NoSchedule),
        ..Toleration::default()
    });
    assert!(tolerates_disrupted_taint(&tolerant));
    assert!(!is_evictable(&tolerant, now()));
    let mut wildcard = pod("w", "n");
    wildcard.tolerations.push(Toleration {
        operator: Some(TolerationOperator::Exists),
        ..Toleration::default()
    });
    assert!(tolerates_disrupted_taint(&wildcard));
    assert!(!tolerates_disrupted_taint(&running));

    assert!(!is_evictable(&dnd(pod("d", "n"), "true"), now()));
}

#[test]
fn pods_tolerating_the_disrupted_taint_ignore_pdbs() {
    let mut p = pod("p", "n");
    p.tolerations.push(Toleration {
        key: labels::DISRUPTED_TAINT_KEY.to_string(),
        operator: Some(TolerationOperator::Exists),
        ..Toleration::default()
    });
    let s = with_pdbs(
        one_node(with_pods(managed_node("n", "default"), vec![p])),
        vec![pdb("pdb", true)],
    );
    accepted(&s, DisruptionClass::Graceful);
}

#[test]
fn unhealthy_pods_pass_pdbs_that_always_allow_their_eviction() {
    let mut budget = pdb("pdb", true);
    budget.unhealthy_pod_eviction_policy_always_allow = true;
    let limits = PdbLimits::new(&[budget]);
    let mut p = pod("p", "n");
    assert!(
        limits
            .can_evict_pods(std::slice::from_ref(&p), now())
            .is_err()
    );
    assert!(limits.is_fully_blocked(&p, now()));
    p.ready = false;
    assert_eq!(
        limits.can_evict_pods(std::slice::from_ref(&p), now()),
        Ok(())
    );
    assert!(!limits.is_fully_blocked(&p, now()));
}

#[test]
fn pdb_modes_and_currently_reschedulable() {
    // disruptionsAllowed 0 but not fully blocking: blocks candidacy, not simulation.
    let limits = PdbLimits::new(&[pdb("pdb", false)]);
    let p = pod("p", "n");
    assert!(
        limits
            .can_evict_pods(std::slice::from_ref(&p), now())
            .is_err()
    );
    assert!(!limits.is_fully_blocked(&p, now()));
    assert!(is_currently_reschedulable(&p, &limits, now()));

    let fully = PdbLimits::new(&[pdb("pdb", true)]);
    assert!(fully.is_fully_blocked(&p, now()));
    assert!(!is_currently_reschedulable(&p, &fully, now()));
    // minAvailable 100% is fully blocking too; allowed disruptions do not matter.
    let mut min_all = pdb("pdb", false);
    min_all.max_unavailable = None;
    min_all.min_available = Some(IntOrPercent::Percent(100));
    min_all.disruptions_allowed = 3;
    let limits = PdbLimits::new(&[min_all]);
    assert_eq!(
        limits.can_evict_pods(std::slice::from_ref(&p), now()),
        Ok(())
    );
    assert!(limits.is_fully_blocked(&p, now()));

    // Other namespaces, non-matching selectors and nil selectors do not apply.
    let mut other_ns = pdb("pdb", true);
    other_ns.namespace = "other".into();
    let mut other_sel = pdb("pdb2", true);
    other_sel.selector = Some(LabelSelector::from_labels([("app", "other")]));
    let mut nil_sel = pdb("pdb3", true);
    nil_sel.selector = None;
    let limits = PdbLimits::new(&[other_ns, other_sel, nil_sel]);
    assert_eq!(
        limits.can_evict_pods(std::slice::from_ref(&p), now()),
        Ok(())
    );
    assert!(is_currently_reschedulable(&p, &limits, now()));

    // Multiple PDBs block in both modes.
    let mut a = pdb("a", false);
    a.disruptions_allowed = 1;
    let mut b = pdb("b", false);
    b.disruptions_allowed = 1;
    let limits = PdbLimits::new(&[a, b]);
    assert!(limits.is_fully_blocked(&p, now()));
    assert_eq!(
        limits.can_evict_pods(std::slice::from_ref(&p), now()),
        Err(PdbError::Multiple {
            pdbs: vec!["default/a".into(), "default/b".into()]
        })
    );

    // DND pods are not currently reschedulable, DaemonSet pods never are.
    assert!(!is_currently_reschedulable(
        &dnd(pod("d", "n"), "true"),
        &PdbLimits::default(),
        now()
    ));
    let mut ds = pod("ds", "n");
    ds.owner = Some(owner("DaemonSet", "apps/v1"));
    assert!(!is_currently_reschedulable(
        &ds,
        &PdbLimits::default(),
        now()
    ));
}

// ---------------------------------------------------------------------------------------------
// Candidate fields

#[test]
fn candidate_price_cost_and_emptiness() {
    let mut n = managed_node("n", "default");
    let mut ds = pod("ds", "n");
    ds.owner = Some(owner("DaemonSet", "apps/v1"));
    let mut cheap = pod("cheap", "n");
    cheap.annotations.insert(
        "controller.kubernetes.io/pod-deletion-cost".into(),
        "-2147483647".into(),
    );
    n.pods = vec![ds, cheap];
    let c = accepted(&one_node(n.clone()), DisruptionClass::Graceful);
    assert_eq!(c.price, 1.0);
    assert_eq!(c.node_pool, "default");
    assert_eq!(c.zone, ZONE);
    assert_eq!(c.capacity_type, "on-demand");
    assert_eq!(c.provider_id(), "fake:///n");
    assert_eq!(c.reschedulable_pod_count(), 1);
    // The only reschedulable pod has a negative eviction cost: the node counts as empty.
    assert_eq!(c.reschedule_disruption_cost, 1.0);
    assert!(c.is_empty());
    assert_eq!(c.savings_ratio(), 1.0);
    assert!(!c.owned_by_static_node_pool);

    n.pods.push(pod("p", "n"));
    let c = accepted(&one_node(n.clone()), DisruptionClass::Graceful);
    assert_eq!(c.reschedule_disruption_cost, 2.0);
    assert!(!c.is_empty());
    assert_eq!(c.savings_ratio(), 0.5);
    // Legacy cost: all pods (DaemonSet 1 + cheap −10 + p 1) × lifetime remaining.
    let lifetime = 1.0 - (14.5 * 24.0) / 720.0;
    assert!((c.disruption_cost(now()) - (-8.0 * lifetime)).abs() < 1e-9);

    // Spot label picks the spot offering; a static pool is flagged.
    if let Some(node) = n.node.as_mut() {
        node.labels.insert(
            labels::CAPACITY_TYPE.into(),
            labels::CAPACITY_TYPE_SPOT.into(),
        );
    }
    let mut static_pool = pool("default");
    static_pool.node_pool.spec.replicas = Some(3);
    let c = accepted(
        &snapshot(vec![static_pool], vec![n]),
        DisruptionClass::Graceful,
    );
    assert_eq!(c.price, 0.5);
    assert!(c.owned_by_static_node_pool);
}

#[test]
fn current_price_takes_the_first_matching_offering_even_if_unavailable() {
    let mut offerings = vec![
        Offering::new(ZONE, "on-demand", 3.0),
        Offering::new(ZONE, "on-demand", 4.0),
        Offering::new(ZONE, "spot", f64::NAN),
    ];
    offerings[0].available = false;
    let it = InstanceType::new(
        "t",
        Requirements::new(),
        offerings,
        ResourceList::new(),
        Overhead::default(),
    );
    assert_eq!(current_price(Some(&it), ZONE, "on-demand"), 3.0);
    assert_eq!(current_price(Some(&it), ZONE, "spot"), 0.0);
    assert_eq!(current_price(Some(&it), "elsewhere", "on-demand"), 0.0);
    assert_eq!(current_price(None, ZONE, "on-demand"), 0.0);
}

#[test]
fn get_candidates_returns_candidates_and_rejections_in_snapshot_order() {
    let mut deleting = managed_node("b-deleting", "default");
    deleting.marked_for_deletion = true;
    let mut unmanaged = managed_node("d-unmanaged", "default");
    unmanaged.node_claim = None;
    let s = snapshot(
        vec![pool("default")],
        vec![
            managed_node("c", "default"),
            deleting,
            managed_node("a", "default"),
            unmanaged,
        ],
    );
    let (candidates, rejections) =
        get_candidates(&s, DisruptionClass::Graceful, &never_in_queue, now());
    let names: Vec<&str> = candidates.iter().map(Candidate::name).collect();
    assert_eq!(names, ["c", "a"]);
    assert_eq!(
        rejections,
        vec![
            ("b-deleting".to_string(), CandidateError::Deleting),
            ("d-unmanaged".to_string(), CandidateError::NotManaged),
        ]
    );
    // The snapshot's PDBs are used.
    let s = with_pdbs(
        snapshot(
            vec![pool("default")],
            vec![with_pods(managed_node("n", "default"), vec![pod("p", "n")])],
        ),
        vec![pdb("pdb", true)],
    );
    let (candidates, rejections) =
        get_candidates(&s, DisruptionClass::Graceful, &never_in_queue, now());
    assert!(candidates.is_empty());
    assert_eq!(rejections.len(), 1);
}

// ---------------------------------------------------------------------------------------------
// Ordering (upstream's candidate ordering in `disruption/helpers.go`)

/// A candidate named `name` in `pool` with the given price and reschedulable-pod count.
fn priced(name: &str, pool_name: &str, price: f64, pods: usize) -> Candidate {
    let mut n = managed_node(name, pool_name);
    n.pods = (0..pods)
        .map(|i| pod(&format!("{name}-{i}"), name))
        .collect();
    let s = snapshot(vec![pool(pool_name)], vec![n]);
    let mut c = accepted(&s, DisruptionClass::Graceful);
    c.price = price;
    c
}

fn names(cs: &[Candidate]) -> Vec<&str> {
    cs.iter().map(Candidate::name).collect()
}

#[test]
fn sorts_by_savings_ratio_descending_with_name_ties() {
    let mut cs = vec![
        priced("b", "p", 1.0, 1),  // 0.5
        priced("a", "p", 1.0, 1),  // 0.5
        priced("c", "p", 3.0, 2),  // 1.0
        priced("d", "p", 0.25, 0), // 0.25
        priced("e", "p", 2.0, 0),  // 2.0
    ];
    sort_by_savings_ratio(&mut cs);
    assert_eq!(names(&cs), ["e", "c", "a", "b", "d"]);
}

#[test]
fn interleaves_node_pools_round_robin_with_previously_unseen_pools_first() {
    let cs = vec![
        priced("a1", "a", 1.0, 0),
        priced("a2", "a", 1.0, 0),
        priced("a3", "a", 1.0, 0),
        priced("c1", "c", 1.0, 0),
        priced("b1", "b", 1.0, 0),
        priced("b2", "b", 1.0, 0),
    ];
    let out = interleave_by_node_pool(cs.clone(), &BTreeSet::new());
    assert_eq!(names(&out), ["a1", "b1", "c1", "a2", "b2", "a3"]);
    let unseen: BTreeSet<String> = ["c".to_string(), "zzz".to_string()].into();
    let out = interleave_by_node_pool(cs, &unseen);
    assert_eq!(names(&out), ["c1", "a1", "b1", "a2", "b2", "a3"]);
    assert!(interleave_by_node_pool(Vec::new(), &unseen).is_empty());
}

fn drifted(mut c: Candidate, at: Option<&str>) -> Candidate {
    let mut node = (*c.node).clone();
    if let (Some(nc), Some(at)) = (node.node_claim.as_mut(), at) {
        nc.status
            .conditions
            .push(condition("Drifted", ConditionStatus::True, at));
    }
    c.node = Arc::new(node);
    c
}

#[test]
fn drift_order_is_oldest_drift_first_with_empty_nodes_in_front() {
    let mut cs = vec![
        drifted(
            priced("new-full", "p", 1.0, 1),
            Some("2024-06-15T10:00:00Z"),
        ),
        drifted(
            priced("old-full", "p", 1.0, 2),
            Some("2024-06-15T08:00:00Z"),
        ),
        drifted(
            priced("new-empty", "p", 1.0, 0),
            Some("2024-06-15T11:00:00Z"),
        ),
        drifted(
            priced("mid-empty", "p", 1.0, 0),
            Some("2024-06-15T09:00:00Z"),
        ),
        drifted(priced("unknown-full", "p", 1.0, 1), None),
    ];
    assert_eq!(cs[1].drifted_since(), Some(ts("2024-06-15T08:00:00Z")));
    sort_for_drift(&mut cs);
    assert_eq!(
        names(&cs),
        [
            "mid-empty",
            "new-empty",
            "unknown-full",
            "old-full",
            "new-full"
        ]
    );
}

// ---------------------------------------------------------------------------------------------
// BuildDisruptionBudgetMapping (upstream `disruption/suite_test.go`)

fn ten_nodes(pool_name: &str) -> Vec<StateNode> {
    (0..10)
        .map(|i| managed_node(&format!("node-{i}"), pool_name))
        .collect()
}

fn mapping(s: &ClusterSnapshot, pool_name: &str) -> usize {
    let m = build_disruption_budget_mapping(s, DisruptionReason::Drifted, now());
    m.get(pool_name)
        .copied()
        .unwrap_or_else(|| panic!("no entry"))
}

#[test]
fn should_not_consider_nodes_that_are_not_managed_as_part_of_disruption_count() {
    let mut nodes = ten_nodes("default");
    let mut unmanaged = managed_node("unmanaged", "default");
    unmanaged.node_claim = None;
    nodes.push(unmanaged);
    let s = snapshot(vec![pool("default")], nodes);
    assert_eq!(mapping(&s, "default"), 10);
}

#[test]
fn should_not_consider_nodes_that_are_not_initialized_as_part_of_disruption_count() {
    let mut nodes = ten_nodes("default");
    let mut uninitialized = managed_node("uninitialized", "default");
    if let Some(n) = uninitialized.node.as_mut() {
        n.labels.remove(labels::INITIALIZED);
    }
    uninitialized.ready = false;
    nodes.push(uninitialized);
    let s = snapshot(vec![pool("default")], nodes);
    assert_eq!(mapping(&s, "default"), 10);
}

#[test]
fn should_not_consider_nodes_that_have_the_terminating_status_condition_as_part_of_disruption_count()
 {
    let mut nodes = ten_nodes("default");
    let mut terminating = managed_node("terminating", "default");
    if let Some(c) = terminating.node_claim.as_mut() {
        c.status.conditions.push(condition(
            "InstanceTerminating",
            ConditionStatus::True,
            "2024-06-15T11:00:00Z",
        ));
    }
    nodes.push(terminating);
    let s = snapshot(vec![pool("default")], nodes);
    assert_eq!(mapping(&s, "default"), 10);
}

#[test]
fn should_not_return_a_negative_disruption_value() {
    let nodes = ten_nodes("default")
        .into_iter()
        .map(|mut n| {
            n.marked_for_deletion = true;
            n
        })
        .collect();
    let s = snapshot(
        vec![node_pool("default", vec![Budget::nodes("10%")])],
        nodes,
    );
    assert_eq!(mapping(&s, "default"), 0);
    let m = BudgetMapping::build(&s, DisruptionReason::Drifted, now());
    let b = m.pools["default"];
    assert_eq!((b.num_nodes, b.allowed, b.disrupting), (10, 1, 10));
}

#[test]
fn should_consider_nodes_with_a_deletion_timestamp_set_and_marked_for_deletion_to_the_disruption_count()
 {
    let mut nodes = ten_nodes("default");
    if let Some(c) = nodes[0].node_claim.as_mut() {
        c.metadata.deletion_timestamp = Some("2024-06-15T11:00:00Z".to_string());
    }
    nodes[1].marked_for_deletion = true;
    let s = snapshot(vec![pool("default")], nodes);
    assert_eq!(mapping(&s, "default"), 8);
}

#[test]
fn should_consider_not_ready_nodes_to_the_disruption_count() {
    let mut nodes = ten_nodes("default");
    nodes[0].ready = false;
    nodes[1].ready = false;
    let s = snapshot(vec![pool("default")], nodes);
    assert_eq!(mapping(&s, "default"), 8);
    let m = BudgetMapping::build(&s, DisruptionReason::Drifted, now());
    assert_eq!(m.pools["default"].allowed, 10);
    assert_eq!(m.pools["default"].disrupting, 2);
}

#[test]
fn budget_mapping_covers_every_pool_and_reports_blocking_budgets() {
    let mut nodes = ten_nodes("blocked");
    nodes.extend(ten_nodes("open").into_iter().map(|mut n| {
        if let Some(node) = n.node.as_mut() {
            node.labels.insert(labels::NODEPOOL.into(), "open".into());
        }
        n
    }));
    let s = snapshot(
        vec![
            node_pool("blocked", vec![Budget::nodes("0%")]),
            node_pool("empty", vec![Budget::nodes("0")]),
            node_pool("open", vec![Budget::nodes("30%")]),
            node_pool("unbounded", vec![]),
        ],
        nodes,
    );
    let m = BudgetMapping::build(&s, DisruptionReason::Empty, now());
    assert_eq!(m.remaining_for("blocked"), 0);
    assert_eq!(m.remaining_for("open"), 3);
    assert_eq!(m.remaining_for("empty"), 0);
    assert_eq!(m.remaining_for("unbounded"), usize::MAX);
    assert_eq!(m.remaining_for("nope"), 0);
    // Only pools with nodes and nothing allowed are reported.
    assert_eq!(
        m.blocked(),
        vec![(
            "blocked".to_string(),
            "No allowed disruptions for disruption reason Empty due to blocking budget".to_string()
        )]
    );
    assert_eq!(
        blocked_message(DisruptionReason::Drifted),
        "No allowed disruptions for disruption reason Drifted due to blocking budget"
    );
    assert_eq!(m.remaining().len(), 4);
}

// ---------------------------------------------------------------------------------------------
// Property: the mapping equals a reference computation of upstream's rules.

#[derive(Debug, Clone)]
enum NodesValue {
    Count(usize),
    Percent(usize),
    Invalid(&'static str),
}

#[derive(Debug, Clone, Copy)]
enum Window {
    /// No schedule: always active.
    Always,
    /// A schedule that is active at `NOW`.
    ActiveNow(&'static str, &'static str),
    /// A schedule that is inactive at `NOW`.
    InactiveNow(&'static str, &'static str),
    /// An invalid schedule.
    Broken(&'static str, &'static str),
}

#[derive(Debug, Clone)]
struct BudgetDraw {
    nodes: NodesValue,
    window: Window,
    reasons: Option<Vec<DisruptionReason>>,
}

#[derive(Debug, Clone)]
struct NodeDraw {
    pool: usize,
    managed: bool,
    has_node: bool,
    initialized: bool,
    instance_terminating: bool,
    ready: bool,
    marked: bool,
    claim_deleting: bool,
}

fn nodes_value() -> impl Strategy<Value = NodesValue> {
    prop_oneof![
        (0usize..15).prop_map(NodesValue::Count),
        (0usize..=100).prop_map(NodesValue::Percent),
        proptest::sample::select(vec!["abc", "5x%", "%", "1.5"]).prop_map(NodesValue::Invalid),
    ]
}

fn window() -> impl Strategy<Value = Window> {
    // NOW is 2024-06-15T12:00:00Z, a Saturday.
    proptest::sample::select(vec![
        Window::Always,
        Window::ActiveNow("* * * * *", "1h"),
        Window::ActiveNow("@daily", "13h"),
        Window::ActiveNow("0 12 * * *", "10m"),
        Window::InactiveNow("0 0 1 1 *", "10m"),
        Window::InactiveNow("@daily", "11h"),
        Window::InactiveNow("0 13 * * *", "30m"),
        Window::Broken("61 * * * *", "10m"),
        Window::Broken("not a cron", "1h"),
    ])
}

fn budget_draw() -> impl Strategy<Value = BudgetDraw> {
    (
        nodes_value(),
        window(),
        proptest::option::of(proptest::sample::subsequence(
            DisruptionReason::ALL.to_vec(),
            0..=3,
        )),
    )
        .prop_map(|(nodes, window, reasons)| BudgetDraw {
            nodes,
            window,
            reasons,
        })
}

fn node_draw(pools: usize) -> impl Strategy<Value = NodeDraw> {
    (
        0..=pools,
        proptest::bool::weighted(0.85),
        proptest::bool::weighted(0.9),
        proptest::bool::weighted(0.8),
        proptest::bool::weighted(0.1),
        proptest::bool::weighted(0.8),
        proptest::bool::weighted(0.15),
        proptest::bool::weighted(0.1),
    )
        .prop_map(
            |(
                pool,
                managed,
                has_node,
                initialized,
                instance_terminating,
                ready,
                marked,
                claim_deleting,
            )| {
                NodeDraw {
                    pool,
                    managed,
                    has_node,
                    initialized,
                    instance_terminating,
                    ready,
                    marked,
                    claim_deleting,
                }
            },
        )
}

fn pool_name(i: usize) -> String {
    format!("pool-{i}")
}

fn build_budget(d: &BudgetDraw) -> Budget {
    let mut b = Budget::nodes(match &d.nodes {
        NodesValue::Count(n) => n.to_string(),
        NodesValue::Percent(p) => format!("{p}%"),
        NodesValue::Invalid(s) => (*s).to_string(),
    });
    match d.window {
        Window::Always => {}
        Window::ActiveNow(s, dur) | Window::InactiveNow(s, dur) | Window::Broken(s, dur) => {
            b.schedule = Some(s.to_string());
            b.duration = Some(Duration::parse(dur).expect("valid duration"));
        }
    }
    b.reasons = d.reasons.clone();
    b
}

fn build_snapshot(pools: &[Option<Vec<BudgetDraw>>], nodes: &[NodeDraw]) -> ClusterSnapshot {
    let pool_states = pools
        .iter()
        .enumerate()
        .map(|(i, budgets)| {
            let mut p = node_pool(&pool_name(i), Vec::new());
            p.node_pool.spec.disruption.budgets = budgets
                .as_ref()
                .map(|bs| bs.iter().map(build_budget).collect());
            p
        })
        .collect();
    let state_nodes = nodes
        .iter()
        .enumerate()
        .map(|(i, d)| {
            // Pool index == pools.len() names a pool that does not exist.
            let mut n = managed_node(&format!("node-{i}"), &pool_name(d.pool));
            if !d.managed {
                n.node_claim = None;
            }
            if !d.has_node {
                n.node = None;
            }
            if let (false, Some(node)) = (d.initialized, n.node.as_mut()) {
                node.labels.remove(labels::INITIALIZED);
            }
            if let Some(c) = n.node_claim.as_mut() {
                if d.instance_terminating {
                    c.status.conditions.push(condition(
                        "InstanceTerminating",
                        ConditionStatus::True,
                        NOW,
                    ));
                }
                if d.claim_deleting {
                    c.metadata.deletion_timestamp = Some(NOW.to_string());
                }
            }
            n.ready = d.ready;
            n.marked_for_deletion = d.marked;
            n
        })
        .collect();
    snapshot(pool_states, state_nodes)
}

/// Whether evaluating the budget fails: its schedule is broken, or it is active (so its
/// `nodes` is read) and `nodes` is invalid. (Upstream never reads `nodes` of an inactive budget,
/// so an invalid value there does not fail.) Any failure makes the whole pool allow nothing.
fn fails_to_evaluate(b: &BudgetDraw) -> bool {
    match b.window {
        Window::Broken(..) => true,
        Window::Always | Window::ActiveNow(..) => matches!(b.nodes, NodesValue::Invalid(_)),
        Window::InactiveNow(..) => false,
    }
}

/// Upstream's rules, written out directly from the draws.
fn reference(
    pools: &[Option<Vec<BudgetDraw>>],
    nodes: &[NodeDraw],
    reason: DisruptionReason,
) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for (i, budgets) in pools.iter().enumerate() {
        let counted: Vec<&NodeDraw> = nodes
            .iter()
            .filter(|n| {
                n.pool == i && n.managed && n.has_node && n.initialized && !n.instance_terminating
            })
            .collect();
        let num_nodes = counted.len();
        let disrupting = counted
            .iter()
            .filter(|n| !n.ready || n.marked || n.claim_deleting)
            .count();
        let budgets = budgets.clone().unwrap_or_else(|| {
            vec![BudgetDraw {
                nodes: NodesValue::Percent(10),
                window: Window::Always,
                reasons: None,
            }]
        });
        let invalid = budgets.iter().any(fails_to_evaluate);
        let allowed = if invalid {
            0
        } else {
            budgets
                .iter()
                .filter(|b| b.reasons.as_ref().is_none_or(|r| r.contains(&reason)))
                .filter(|b| matches!(b.window, Window::Always | Window::ActiveNow(..)))
                .map(|b| match b.nodes {
                    NodesValue::Count(c) => c,
                    NodesValue::Percent(p) => (p * num_nodes).div_ceil(100),
                    NodesValue::Invalid(_) => 0,
                })
                .min()
                .unwrap_or(usize::MAX)
        };
        out.insert(pool_name(i), allowed.saturating_sub(disrupting));
    }
    out
}

fn scenario() -> impl Strategy<
    Value = (
        Vec<Option<Vec<BudgetDraw>>>,
        Vec<NodeDraw>,
        DisruptionReason,
    ),
> {
    proptest::collection::vec(
        proptest::option::weighted(0.85, proptest::collection::vec(budget_draw(), 0..4)),
        1..4,
    )
    .prop_flat_map(|pools| {
        let n = pools.len();
        (
            Just(pools),
            proptest::collection::vec(node_draw(n), 0..30),
            proptest::sample::select(DisruptionReason::ALL.to_vec()),
        )
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn budget_mapping_matches_the_reference((pools, nodes, reason) in scenario()) {
        let s = build_snapshot(&pools, &nodes);
        let got = build_disruption_budget_mapping(&s, reason, now());
        let want = reference(&pools, &nodes, reason);
        prop_assert_eq!(&got, &want);

        let full = BudgetMapping::build(&s, reason, now());
        for (i, budgets) in pools.iter().enumerate() {
            let name = pool_name(i);
            let value = got.get(&name).copied().unwrap_or(usize::MAX);
            let Some(b) = full.pools.get(&name).copied() else {
                return Err(TestCaseError::fail(format!("{name} missing from the mapping")));
            };
            prop_assert_eq!(value, b.remaining());
            let Some(budgets) = budgets else { continue };
            if budgets.iter().any(fails_to_evaluate) {
                prop_assert_eq!(value, 0);
                continue;
            }
            for d in budgets {
                let applies = d.reasons.as_ref().is_none_or(|r| r.contains(&reason));
                let active = matches!(d.window, Window::Always | Window::ActiveNow(..));
                if !(applies && active) {
                    continue;
                }
                match d.nodes {
                    NodesValue::Count(c) => prop_assert!(value <= c),
                    NodesValue::Percent(p) => {
                        prop_assert!(value <= (p * b.num_nodes).div_ceil(100));
                    }
                    NodesValue::Invalid(_) => {}
                }
            }
        }
    }
}

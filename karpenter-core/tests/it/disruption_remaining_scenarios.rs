//! The last upstream disruption scenarios of upstream's disruption tests that no other file ports:
//! suite_test.go Describe "Simulate Scheduling" (4) and "Disruption Taints" (2), and a
//! consolidation-specific port of consolidation_test.go Context "Static NodePool". The
//! coverage table is `docs/disruption-coverage.md`.
//!
//! The controllers are modelled as in `disruption_validation_scenarios.rs`: a pass is
//! `run_pass`; the queue is `lifecycle::queue`, whose steps `apply_steps` below plays on the
//! snapshot; provisioning is a scheduling simulation without candidates (it places the pending
//! pods and the pods of deleting nodes, as upstream's provisioner does).

use std::collections::BTreeSet;
use std::sync::Arc;

use super::disruption_scenarios::{
    CREATED, NOW, catalog, names, node, now, only, opts, owner, rl, set_condition,
    set_consolidate_after, set_label, snapshot,
};
use karpenter_core::api::{
    Budget, Condition, ConditionStatus, ConsolidationPolicy, NillableDuration, NodeClaimTemplate,
    NodeClaimTemplateSpec, NodeClassReference, NodePool, NodePoolSpec,
};
use karpenter_core::disruption::candidates::{
    DisruptionClass, PdbLimits, disrupted_taint, new_candidate,
};
use karpenter_core::disruption::simulate::{SimulationContext, simulate_scheduling};
use karpenter_core::disruption::{
    Command, Method, PassOutcome, consolidation_candidates_of, multi_node_pass, run_pass,
};
use karpenter_core::labels;
use karpenter_core::lifecycle::queue::{self, CommandQueue, QueueOutcome, ReplacementState, Step};
use karpenter_core::model::{InstanceType, NodeSelectorTerm, Pod, PodPhase, Timestamp};
use karpenter_core::requirements::{NodeSelectorRequirement, Operator};
use karpenter_core::state::{ClusterSnapshot, NodePoolState, StateNode};
use karpenter_core::volumes::{
    PersistentVolume, PersistentVolumeClaim, PersistentVolumeSource, PodVolume, StorageClass,
};

// ---------------------------------------------------------------------------------------------
// Builders (the fixtures of `disruption_scenarios.rs`)
// ---------------------------------------------------------------------------------------------

const PARTITION: &str = "test-partition";

fn later(seconds: i64) -> Timestamp {
    now()
        .checked_add(jiff::SignedDuration::from_secs(seconds))
        .expect("in range")
}

pub(super) fn it(name: &str) -> Arc<InstanceType> {
    catalog()
        .into_iter()
        .find(|t| t.name() == name)
        .expect("known type")
}

pub(super) fn pool(name: &str, policy: ConsolidationPolicy, budget: &str) -> NodePoolState {
    let class = NodeClassReference::new("karpenter.k8s.aws", "EC2NodeClass", "default");
    let mut spec = NodePoolSpec::new(NodeClaimTemplate {
        metadata: Default::default(),
        spec: NodeClaimTemplateSpec::new(class),
    });
    spec.disruption.consolidation_policy = Some(policy);
    spec.disruption.consolidate_after = Some(NillableDuration::parse("0s").expect("duration"));
    spec.disruption.budgets = Some(vec![Budget {
        nodes: budget.to_string(),
        schedule: None,
        duration: None,
        reasons: None,
    }]);
    NodePoolState::new(NodePool::new(name, spec), catalog())
}

/// A running ReplicaSet pod bound to `node` requesting `cpu`.
fn pod(node: &str, name: &str, cpu: &str) -> Pod {
    let mut p = Pod::new("default", name);
    p.requests = rl(&[("cpu", cpu), ("memory", "100Mi")]);
    p.node_name = Some(node.to_string());
    p.phase = PodPhase::Running;
    p.owner = owner("ReplicaSet");
    p
}

/// A launched, registered node that has not finished initialization.
fn uninitialized(mut n: StateNode) -> StateNode {
    if let Some(node) = n.node.as_mut() {
        node.labels.remove(labels::INITIALIZED);
        node.initialized = false;
    }
    if let Some(claim) = n.node_claim.as_mut() {
        claim.metadata.labels.remove(labels::INITIALIZED);
    }
    set_condition(&mut n, "Initialized", ConditionStatus::False, CREATED);
    n
}

fn pass_at(s: &ClusterSnapshot, at: Timestamp, queue: &CommandQueue) -> PassOutcome {
    let queued = queue.queued_provider_ids();
    run_pass(s, at, &opts(), &|p| queued.contains(p))
}

pub(super) fn node_mut<'a>(s: &'a mut ClusterSnapshot, name: &str) -> &'a mut StateNode {
    let n = s
        .nodes
        .iter_mut()
        .find(|n| n.name() == name)
        .expect("known node");
    Arc::make_mut(n)
}

fn node_claims(s: &ClusterSnapshot) -> usize {
    s.nodes.iter().filter(|n| n.node_claim.is_some()).count()
}

// --- The queue, played on the snapshot ---------------------------------------------------------

/// The queue's command for a planned command (`queue::QueuedCommand::from_decision`), replacement
/// NodeClaims named `<id>-replacement-<i>`.
pub(super) fn queue_command(
    id: &str,
    cmd: &Command,
    s: &ClusterSnapshot,
    created_at: Timestamp,
) -> queue::QueuedCommand {
    let replacements = (0..cmd.replacements.len())
        .map(|i| format!("{id}-replacement-{i}"))
        .collect();
    queue::QueuedCommand::from_decision(id, cmd, s, replacements, created_at)
        .expect("a disruption command, not an expiration")
}

pub(super) fn node_by_claim<'a>(
    s: &'a mut ClusterSnapshot,
    claim: &str,
) -> Option<&'a mut StateNode> {
    s.nodes
        .iter_mut()
        .find(|n| n.node_claim.as_ref().is_some_and(|c| c.name() == claim))
        .map(Arc::make_mut)
}

/// Plays queue steps on the snapshot the way the controllers would (replacement creation is
/// left to the test).
pub(super) fn apply_steps(s: &mut ClusterSnapshot, steps: &[Step]) {
    for step in steps {
        match step {
            Step::TaintNode { node_name, taint } => {
                if let Some(n) = node_mut(s, node_name).node.as_mut() {
                    n.taints.retain(|t| t.key != taint.key);
                    n.taints.push(taint.clone());
                }
            }
            Step::RemoveTaint { node_name } => {
                if let Some(n) = node_mut(s, node_name).node.as_mut() {
                    n.taints.retain(|t| t.key != labels::DISRUPTED_TAINT_KEY);
                }
            }
            Step::SetDisruptionReason { claim_name, reason } => {
                if let Some(n) = node_by_claim(s, claim_name) {
                    set_condition(n, "DisruptionReason", ConditionStatus::True, NOW);
                    if let Some(c) = n.node_claim.as_mut()
                        && let Some(cond) = c
                            .status
                            .conditions
                            .iter_mut()
                            .find(|c| c.type_ == "DisruptionReason")
                    {
                        cond.reason = Some(reason.clone());
                    }
                }
            }
            Step::ClearDisruptionReason { claim_name } => {
                if let Some(n) = node_by_claim(s, claim_name)
                    && let Some(c) = n.node_claim.as_mut()
                {
                    c.status
                        .conditions
                        .retain(|c| c.type_ != "DisruptionReason");
                }
            }
            Step::MarkForDeletion { provider_ids } | Step::UnmarkForDeletion { provider_ids } => {
                let mark = matches!(step, Step::MarkForDeletion { .. });
                for n in s.nodes.iter_mut() {
                    if provider_ids.iter().any(|p| p == n.provider_id()) {
                        Arc::make_mut(n).marked_for_deletion = mark;
                    }
                }
            }
            Step::CreateReplacements { .. } | Step::Nominate { .. } | Step::Enqueue { .. } => {}
        }
    }
}

pub(super) fn tainted(s: &ClusterSnapshot, node: &str) -> bool {
    s.nodes
        .iter()
        .find(|n| n.name() == node)
        .and_then(|n| n.node.as_ref())
        .is_some_and(|n| {
            n.taints
                .iter()
                .any(|t| t.key == labels::DISRUPTED_TAINT_KEY)
        })
}

fn disruption_reason(s: &ClusterSnapshot, node: &str) -> Option<Condition> {
    s.nodes
        .iter()
        .find(|n| n.name() == node)
        .and_then(|n| n.node_claim.as_ref())
        .and_then(|c| {
            c.status
                .conditions
                .iter()
                .find(|c| c.type_ == "DisruptionReason")
                .cloned()
        })
}

/// The node a replacement becomes once launched and initialized: the first instance type the
/// planner chose, the labels the replacement's pods asked for.
fn launched_replacement(name: &str, cmd: &Command, i: usize) -> StateNode {
    let r = cmd.replacements.get(i).expect("replacement");
    let cheapest = r.instance_types.first().expect("instance types");
    let mut n = node(name, &r.node_pool, cheapest, 0, "1");
    for (k, v) in &r.labels {
        if !n.labels().contains_key(k) {
            set_label(&mut n, k, v);
        }
    }
    n
}

// ---------------------------------------------------------------------------------------------
// upstream `disruption/suite_test.go` suite_test.go Describe "Simulate Scheduling"
// ---------------------------------------------------------------------------------------------

/// 10 nodes of 3-CPU capacity (medium here: 4 CPU), one 2-CPU pod bound to node-0, every
/// other node marked for deletion, consolidateAfter Never. Simulating the removal of node-0
/// (upstream calls `SimulateScheduling` directly) yields no error for its pod: it goes to a new
/// NodeClaim.
///
/// The rule behind the title (upstream `SimulateScheduling`): a pod moved off a *deleting* node may
/// land on an uninitialized node without error, while a pod displaced from a *candidate* onto an
/// uninitialized node gets the "would schedule against uninitialized nodeclaim" error. Both halves
/// are asserted below.
#[test]
fn simulate_scheduling_should_allow_pods_on_deleting_nodes_to_reschedule_to_uninitialized_nodes() {
    let mut p = pool(
        "default",
        ConsolidationPolicy::WhenEmptyOrUnderutilized,
        "100%",
    );
    set_consolidate_after(&mut p, "Never");
    let medium = it("medium");
    let mut nodes: Vec<StateNode> = (0..10)
        .map(|i| node(&format!("node-{i}"), "default", &medium, 0, "1"))
        .collect();
    nodes[0].pods.push(pod("node-0", "web", "2"));
    for n in nodes.iter_mut().skip(1) {
        n.marked_for_deletion = true;
    }
    let s = snapshot(vec![p], nodes);
    let pdbs = PdbLimits::new(&s.pdbs);
    let candidate = new_candidate(
        &s,
        &s.nodes[0],
        &pdbs,
        DisruptionClass::Graceful,
        &|_| false,
        now(),
    )
    .expect("node-0 is a candidate");
    let sim = simulate_scheduling(&s, &[&candidate], &opts().scheduler, false, now())
        .expect("node-0 is not deleting");
    assert!(!sim.results.pod_errors.contains_key("default/web"));
    assert!(
        sim.all_non_pending_scheduled(),
        "{:?}",
        sim.displaced_errors
    );
    assert_eq!(sim.results.new_node_claims.len(), 1);

    // A deleting node's pod may go to an uninitialized node.
    let mut deleting = node("deleting", "default", &medium, 0, "1");
    deleting.pods.push(pod("deleting", "moving", "2"));
    deleting.marked_for_deletion = true;
    let fresh = uninitialized(node("fresh", "default", &medium, 0, "1"));
    let s = snapshot(
        vec![pool(
            "default",
            ConsolidationPolicy::WhenEmptyOrUnderutilized,
            "100%",
        )],
        vec![deleting, fresh],
    );
    let ctx = SimulationContext::new(&s, &opts().scheduler, now());
    let sim = ctx.simulator().simulate(&[], false).expect("runs");
    assert!(
        sim.all_non_pending_scheduled(),
        "{:?}",
        sim.displaced_errors
    );
    let on_fresh: Vec<&String> = sim
        .results
        .existing_nodes
        .iter()
        .filter(|n| n.name == "fresh")
        .flat_map(|n| n.pods.iter())
        .collect();
    assert_eq!(on_fresh, ["default/moving"]);
    assert!(sim.results.new_node_claims.is_empty());

    // A candidate's pod may not: removing the candidate would need the uninitialized node.
    let mut s = s;
    node_mut(&mut s, "deleting").pods.clear();
    let mut candidate_node = node("candidate", "default", &medium, 0, "1");
    candidate_node.pods.push(pod("candidate", "displaced", "2"));
    s.nodes.push(Arc::new(candidate_node));
    let pdbs = PdbLimits::new(&s.pdbs);
    let candidate = new_candidate(
        &s,
        &s.nodes[2],
        &pdbs,
        DisruptionClass::Graceful,
        &|_| false,
        now(),
    )
    .expect("a candidate");
    let sim = simulate_scheduling(&s, &[&candidate], &opts().scheduler, true, now()).expect("runs");
    let error = sim
        .displaced_errors
        .get("default/displaced")
        .expect("an uninitialized-node error");
    assert!(
        error.contains("would schedule against uninitialized nodeclaim/fresh"),
        "{error}"
    );
    assert!(!sim.all_non_pending_scheduled());
}

/// 10 drifted nodes, each pinned to its own partition (node label `test-partition=i`, its pod
/// selecting it; the NodePool requires the key to exist), budget "3", consolidateAfter Never.
/// Each pass replaces one node (the replacement is launched before the next pass): 11, 12, 13
/// NodeClaims; a fourth pass does nothing because the three candidates still being replaced
/// use up the budget.
#[test]
fn simulate_scheduling_should_allow_multiple_replace_operations_to_happen_successively() {
    let mut p = pool(
        "default",
        ConsolidationPolicy::WhenEmptyOrUnderutilized,
        "3",
    );
    set_consolidate_after(&mut p, "Never");
    p.node_pool.spec.template.spec.requirements = Some(vec![NodeSelectorRequirement {
        key: PARTITION.to_string(),
        operator: Operator::Exists,
        values: Vec::new(),
        min_values: None,
    }]);
    let medium = it("medium");
    let nodes: Vec<StateNode> = (0..10)
        .map(|i| {
            let name = format!("node-{i}");
            let mut n = node(&name, "default", &medium, 0, "1");
            set_label(&mut n, PARTITION, &i.to_string());
            set_condition(&mut n, "Drifted", ConditionStatus::True, CREATED);
            let mut p = pod(&name, &format!("pod-{i}"), "100m");
            p.node_selector.insert(PARTITION.to_string(), i.to_string());
            n.pods.push(p);
            n
        })
        .collect();
    let mut s = snapshot(vec![p], nodes);
    let mut q = CommandQueue::new();
    let mut replaced = Vec::new();
    for round in 0..3 {
        let at = later(round);
        let pass = pass_at(&s, at, &q);
        let cmd = only(&pass);
        assert_eq!((cmd.method, cmd.decision()), (Method::Drift, "replace"));
        assert_eq!(cmd.replacements.len(), 1);
        let candidate = names(cmd)[0].to_string();
        let partition = s
            .nodes
            .iter()
            .find(|n| n.name() == candidate)
            .and_then(|n| n.labels().get(PARTITION).cloned())
            .expect("partition label");
        assert_eq!(
            cmd.replacements[0].labels.get(PARTITION),
            Some(&partition),
            "the replacement keeps the candidate's partition"
        );
        let id = format!("c{round}");
        let steps = q.start(queue_command(&id, cmd, &s, at)).expect("starts");
        apply_steps(&mut s, &steps);
        let replacement = launched_replacement(&format!("{id}-replacement-0"), cmd, 0);
        s.nodes.push(Arc::new(replacement));
        assert_eq!(node_claims(&s), 11 + round as usize);
        replaced.push(candidate);
    }
    let distinct: BTreeSet<&String> = replaced.iter().collect();
    assert_eq!(distinct.len(), 3, "three different nodes: {replaced:?}");

    let fourth = pass_at(&s, later(3), &q);
    assert!(
        fourth.commands.is_empty(),
        "the budget of 3 is used up: {:?}",
        fourth.commands.iter().map(names).collect::<Vec<_>>()
    );
    assert!(
        fourth
            .blocked
            .iter()
            .filter(|(n, _)| !replaced.contains(n))
            .all(|(_, r)| r.contains("blocking budget")),
        "{:?}",
        fourth.blocked
    );
    assert_eq!(node_claims(&s), 13);
}

/// A StatefulSet pod whose claim is bound to a local PersistentVolume pinned to its node by
/// hostname affinity: the affinity is ignored when rescheduling, so the expensive node is still
/// replaced; once the replacement is initialized the queue deletes the old node, leaving one
/// (new) NodeClaim and Node.
#[test]
fn simulate_scheduling_can_replace_node_with_a_local_pv_ignoring_hostname_affinity() {
    let mut n = node("node-0", "default", &it("xlarge"), 0, "1");
    let mut p = pod("node-0", "db-0", "100m");
    p.owner = owner("StatefulSet");
    p.volumes = vec![PodVolume::claim("data", "data-db-0")];
    n.pods.push(p);
    let mut s = snapshot(
        vec![pool(
            "default",
            ConsolidationPolicy::WhenEmptyOrUnderutilized,
            "100%",
        )],
        vec![n],
    );
    s.volumes.add_storage_class(StorageClass::new(
        "local-path",
        "kubernetes.io/no-provisioner",
    ));
    let mut pv = PersistentVolume::new("local-pv", PersistentVolumeSource::Local);
    pv.node_affinity = vec![NodeSelectorTerm {
        match_expressions: vec![NodeSelectorRequirement {
            key: labels::HOSTNAME.to_string(),
            operator: Operator::In,
            values: vec!["node-0".to_string()],
            min_values: None,
        }],
    }];
    s.volumes.add_volume(pv);
    let mut claim = PersistentVolumeClaim::bound("default", "data-db-0", "local-pv");
    claim.storage_class_name = Some("local-path".to_string());
    s.volumes.add_claim(claim);

    let q = CommandQueue::new();
    let pass = pass_at(&s, now(), &q);
    let cmd = only(&pass);
    assert_eq!(names(cmd), ["node-0"]);
    assert_eq!(cmd.decision(), "replace");
    assert_eq!(cmd.replacements.len(), 1);
    assert!(
        cmd.replacements[0]
            .pods
            .contains(&"default/db-0".to_string())
    );

    let mut q = q;
    let steps = q
        .start(queue_command("c1", cmd, &s, now()))
        .expect("starts");
    apply_steps(&mut s, &steps);
    s.nodes
        .push(Arc::new(launched_replacement("c1-replacement-0", cmd, 0)));
    let out = q
        .reconcile("c1", &[ReplacementState::Initialized], later(20))
        .expect("queued");
    let QueueOutcome::DeleteCandidates { claim_names, .. } = out else {
        panic!("the replacement is initialized: {out:?}");
    };
    assert_eq!(claim_names, ["node-0"]);
    s.nodes.retain(|n| n.name() != "node-0");
    let left: Vec<&str> = s.nodes.iter().map(|n| n.name()).collect();
    assert_eq!(left, ["c1-replacement-0"]);
}

/// A drifted node with one ReplicaSet pod: drift plans a replacement. Starting the command
/// creates the replacement *before* marking the candidate for deletion; while the creation
/// hangs, the candidate is tainted but not marked, so provisioning (which re-places the pods
/// of deleting nodes) computes no new NodeClaim. Marking the candidate first would have
/// duplicated the capacity.
#[test]
fn simulate_scheduling_should_ensure_that_we_do_not_duplicate_capacity_for_disrupted_nodes_with_provisioning()
 {
    let mut n = node("node-0", "default", &it("xlarge"), 1, "100m");
    set_condition(&mut n, "Drifted", ConditionStatus::True, CREATED);
    let mut s = snapshot(
        vec![pool(
            "default",
            ConsolidationPolicy::WhenEmptyOrUnderutilized,
            "100%",
        )],
        vec![n],
    );
    let mut q = CommandQueue::new();
    let pass = pass_at(&s, now(), &q);
    let cmd = only(&pass);
    assert_eq!((cmd.method, cmd.decision()), (Method::Drift, "replace"));
    let steps = q
        .start(queue_command("c1", cmd, &s, now()))
        .expect("starts");
    let create = steps
        .iter()
        .position(|s| matches!(s, Step::CreateReplacements { .. }))
        .expect("creates replacements");
    let mark = steps
        .iter()
        .position(|s| matches!(s, Step::MarkForDeletion { .. }))
        .expect("marks for deletion");
    assert!(create < mark, "replacements are created before marking");

    // The steps up to the (hanging) replacement creation have run.
    let before_create = steps.get(..create).expect("prefix");
    apply_steps(&mut s, before_create);
    assert!(tainted(&s, "node-0"));
    assert!(!s.nodes[0].is_deleting());
    let provisioning = simulate_scheduling(&s, &[], &opts().scheduler, false, now()).expect("runs");
    assert!(provisioning.results.new_node_claims.is_empty());
    assert!(provisioning.results.pod_errors.is_empty());

    // Had the candidate been marked first, provisioning would launch a second node for its pod.
    let mut marked = s.clone();
    node_mut(&mut marked, "node-0").marked_for_deletion = true;
    let duplicate =
        simulate_scheduling(&marked, &[], &opts().scheduler, false, now()).expect("runs");
    assert_eq!(duplicate.results.new_node_claims.len(), 1);
}

// ---------------------------------------------------------------------------------------------
// upstream `disruption/suite_test.go` suite_test.go Describe "Disruption Taints"
// ---------------------------------------------------------------------------------------------

/// An expensive on-demand node (xlarge) with one small pod: consolidation would replace it with
/// a cheaper node.
fn expensive_node() -> ClusterSnapshot {
    snapshot(
        vec![pool(
            "default",
            ConsolidationPolicy::WhenEmptyOrUnderutilized,
            "100%",
        )],
        vec![node("node-0", "default", &it("xlarge"), 1, "100m")],
    )
}

/// A node left with the disrupted taint and `DisruptionReason=True` by an earlier disruption
/// action (not in the queue, not being deleted; consolidateAfter Never so no method acts): the
/// pass's cleanup removes the taint and the condition.
#[test]
fn disruption_taints_should_remove_taints_from_node_claims_that_were_left_tainted_from_a_previous_disruption_action()
 {
    let mut s = expensive_node();
    set_consolidate_after(&mut s.node_pools[0], "Never");
    {
        let n = node_mut(&mut s, "node-0");
        if let Some(node) = n.node.as_mut() {
            node.taints.push(disrupted_taint());
        }
        set_condition(n, "DisruptionReason", ConditionStatus::True, CREATED);
    }
    let q = CommandQueue::new();
    let cleanup = queue::stale_mark_cleanup(&s, &q.queued_provider_ids());
    assert_eq!(
        cleanup,
        [
            Step::RemoveTaint {
                node_name: "node-0".into()
            },
            Step::ClearDisruptionReason {
                claim_name: "node-0".into()
            }
        ]
    );
    apply_steps(&mut s, &cleanup);
    assert!(!tainted(&s, "node-0"));
    assert!(disruption_reason(&s, "node-0").is_none());
    assert!(pass_at(&s, now(), &q).commands.is_empty());

    // Marks of a queued or deleting node are not stale.
    let mut marked = expensive_node();
    {
        let n = node_mut(&mut marked, "node-0");
        if let Some(node) = n.node.as_mut() {
            node.taints.push(disrupted_taint());
        }
        set_condition(n, "DisruptionReason", ConditionStatus::True, CREATED);
    }
    let queued = BTreeSet::from(["fake:///node-0".to_string()]);
    assert!(queue::stale_mark_cleanup(&marked, &queued).is_empty());
    node_mut(&mut marked, "node-0").marked_for_deletion = true;
    assert!(queue::stale_mark_cleanup(&marked, &BTreeSet::new()).is_empty());
}

/// Consolidation replaces the expensive node: starting the command taints it and sets
/// `DisruptionReason=True`. The replacement NodeClaim is then deleted (and gone from cluster
/// state): the queue gives up, the rollback removes the taint and the condition, and the stale
/// cleanup has nothing left to do.
#[test]
fn disruption_taints_should_add_and_remove_taints_from_node_claims_that_fail_to_disrupt() {
    let mut s = expensive_node();
    let mut q = CommandQueue::new();
    let pass = pass_at(&s, now(), &q);
    let cmd = only(&pass);
    assert_eq!(cmd.decision(), "replace");
    let steps = q
        .start(queue_command("c1", cmd, &s, now()))
        .expect("starts");
    apply_steps(&mut s, &steps);
    assert_eq!(q.entries(), 1);
    assert!(tainted(&s, "node-0"));
    let reason = disruption_reason(&s, "node-0").expect("DisruptionReason set");
    assert_eq!(reason.status, ConditionStatus::True);
    assert_eq!(reason.reason.as_deref(), Some("Underutilized"));
    assert!(
        queue::stale_mark_cleanup(&s, &q.queued_provider_ids()).is_empty(),
        "a queued command's marks are kept"
    );

    let out = q
        .reconcile(
            "c1",
            &[ReplacementState::NotFound { in_state: false }],
            later(20),
        )
        .expect("queued");
    let QueueOutcome::Unrecoverable { rollback, .. } = out else {
        panic!("the replacement was deleted: {out:?}");
    };
    apply_steps(&mut s, &rollback);
    assert!(!tainted(&s, "node-0"));
    assert!(disruption_reason(&s, "node-0").is_none());
    assert!(!s.nodes[0].is_deleting());
    assert_eq!(q.entries(), 0);
    assert!(queue::stale_mark_cleanup(&s, &q.queued_provider_ids()).is_empty());
}

// ---------------------------------------------------------------------------------------------
// upstream `consolidation_test.go` consolidation_test.go Context "Static NodePool"
// ---------------------------------------------------------------------------------------------

/// Nodes of a static NodePool (`spec.replicas`), with `Consolidatable=True` set by hand and a
/// cheaper replacement available: no consolidation method produces a command.
#[test]
fn consolidation_static_nodepool_should_not_consolidate_static_nodepool_nodes() {
    let mut p = pool(
        "static",
        ConsolidationPolicy::WhenEmptyOrUnderutilized,
        "100%",
    );
    p.node_pool.spec.replicas = Some(2);
    let s = snapshot(
        vec![p],
        vec![
            node("node-0", "static", &it("xlarge"), 1, "100m"),
            node("node-1", "static", &it("xlarge"), 1, "100m"),
        ],
    );
    assert!(consolidation_candidates_of(&s, now()).is_empty());
    assert!(multi_node_pass(&s, now(), &opts()).commands.is_empty());
    let pass = pass_at(&s, now(), &CommandQueue::new());
    assert!(pass.commands.is_empty(), "{:?}", pass.commands);

    // The same nodes in a dynamic pool are consolidated.
    let mut dynamic = s.clone();
    dynamic.node_pools[0].node_pool.spec.replicas = None;
    assert!(
        !pass_at(&dynamic, now(), &CommandQueue::new())
            .commands
            .is_empty()
    );
}

// ---------------------------------------------------------------------------------------------
// upstream `orchestration/queue_test.go` queue_test.go Context "Reconcile"
// ---------------------------------------------------------------------------------------------

/// A started replace command whose replacement is still launching, reconciled well before the
/// command's retry duration (10 min for a short queue): the queue waits, reports no failure,
/// keeps the command and the candidate's taint.
#[test]
fn queue_should_not_return_an_error_when_handling_commands_before_the_timeout() {
    let mut s = expensive_node();
    let mut q = CommandQueue::new();
    let pass = pass_at(&s, now(), &q);
    let cmd = only(&pass);
    assert_eq!(cmd.decision(), "replace");
    let steps = q
        .start(queue_command("c1", cmd, &s, now()))
        .expect("starts");
    apply_steps(&mut s, &steps);
    for seconds in [1, 60, 9 * 60] {
        let out = q
            .reconcile("c1", &[ReplacementState::Launching], later(seconds))
            .expect("queued");
        assert!(
            matches!(out, QueueOutcome::Wait { .. }),
            "still waiting after {seconds} s: {out:?}"
        );
        assert!(q.get("c1").is_some(), "the command is still queued");
        assert!(q.contains("fake:///node-0"));
    }
    assert!(tainted(&s, "node-0"));
}

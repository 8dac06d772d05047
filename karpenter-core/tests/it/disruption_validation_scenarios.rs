//! Upstream's disruption scenarios that need the 15 s validation wait, the "consolidated" memo or
//! the command queue (upstream `disruption/controller.go`, `disruption/validation.go` and
//! `orchestration/queue.go`, `emptiness_test.go`, `drift_test.go`, `consolidation_test.go`), ported
//! against our pure planner and state machines.
//!
//! How upstream's behaviour is modelled, sans-IO:
//! - **the validation wait is data.** Upstream computes a command, blocks 15 s on its clock
//!   (`commandValidationDelay`) while the cluster keeps changing, then re-validates the command
//!   against the newer cluster state. Here a test computes the command with `run_pass` (or the
//!   single method upstream would run) on the snapshot at `now()`, mutates a copy of the
//!   snapshot as the scenario does during the wait (a pod binds, a node is nominated, a budget
//!   changes…), and calls `validation::validate_counted` on the newer snapshot at
//!   `now() + COMMAND_VALIDATION_DELAY`. The outcome (accepted, possibly shrunk, or rejected
//!   and why) and upstream's `failed_validations_total` increment are asserted, then what the
//!   next pass does. Upstream's tests step a fake clock by 31 s; the wait is 15 s either way;
//! - **the consolidated memo is kept by the caller.** `PassOutcome::consolidated` lists the
//!   consolidation methods whose memo upstream would set in that pass; a method blocked by a
//!   budget, or whose command failed validation, does not set it;
//! - **the queue is a state machine.** `lifecycle::queue` returns the steps that start or roll
//!   back a command; `apply_steps` below plays them on the snapshot (taint, condition, deletion
//!   mark) the way the controllers would;
//! - our method order is PRODUCTION order (Emptiness → Drift → Multi → Single), as in
//!   `disruption_scenarios.rs`.

use std::collections::BTreeSet;
use std::sync::Arc;

use super::disruption_remaining_scenarios::{
    apply_steps, it, node_mut, pool, queue_command, tainted,
};
use super::disruption_scenarios::{
    CREATED, consolidation_pool, ct_pool, delete_cluster, names, node, now, one_empty, only,
    option_names, rl, s2s, set_condition, snapshot, spot,
};
use karpenter_core::api::{Budget, ConditionStatus, ConsolidationPolicy, NillableDuration};
use karpenter_core::disruption::simulate::simulate_scheduling;
use karpenter_core::disruption::validation::{
    COMMAND_VALIDATION_DELAY, RevalidationError, Validation, validate, validate_counted,
};
use karpenter_core::disruption::{
    Command, Method, PassOutcome, multi_node_pass, run_pass, single_node_pass,
};
use karpenter_core::labels;
use karpenter_core::lifecycle::queue::{self, CommandQueue, QueueOutcome, ReplacementState};
use karpenter_core::model::{
    IntOrPercent, LabelSelector, OwnerReference, Pod, PodDisruptionBudget, PodPhase, Timestamp,
};
use karpenter_core::state::{ClusterSnapshot, NodePoolState, StateNode};

// ---------------------------------------------------------------------------------------------
// Builders (the same fixtures as `disruption_scenarios.rs`)
// ---------------------------------------------------------------------------------------------

/// The instant upstream re-validates a command computed at `now()`.
fn after_wait() -> Timestamp {
    now()
        .checked_add(COMMAND_VALIDATION_DELAY)
        .expect("in range")
}

/// The second validation of the same controller pass (single-node after multi-node).
fn after_two_waits() -> Timestamp {
    after_wait()
        .checked_add(COMMAND_VALIDATION_DELAY)
        .expect("in range")
}

fn set_budget(p: &mut NodePoolState, nodes: &str) {
    p.node_pool.spec.disruption.budgets = Some(vec![Budget {
        nodes: nodes.to_string(),
        schedule: None,
        duration: None,
        reasons: None,
    }]);
}

/// A running ReplicaSet pod bound to `node` requesting `cpu`, labelled `app=web`.
fn pod(node: &str, name: &str, cpu: &str) -> Pod {
    let mut p = Pod::new("default", name);
    p.requests = rl(&[("cpu", cpu), ("memory", "256Mi")]);
    p.node_name = Some(node.to_string());
    p.phase = PodPhase::Running;
    p.owner = Some(OwnerReference::new("apps/v1", "ReplicaSet", "owner").with_controller(true));
    p.labels.insert("app".into(), "web".into());
    p
}

/// A pending (unschedulable) pod requesting `cpu`.
fn pending(name: &str, cpu: &str) -> Pod {
    let mut p = pod("", name, cpu);
    p.node_name = None;
    p.phase = PodPhase::Pending;
    p
}

fn pass_at(s: &ClusterSnapshot, at: Timestamp) -> PassOutcome {
    run_pass(s, at, &s2s(), &|_| false)
}

// --- Changes made during the wait --------------------------------------------------------------

/// Binds a new pod requesting `cpu` to `node` (upstream's `ExpectManualBinding`).
fn bind(s: &mut ClusterSnapshot, node: &str, name: &str, cpu: &str) {
    node_mut(s, node).pods.push(pod(node, name, cpu));
}

/// Binds a new pod carrying `karpenter.sh/do-not-disrupt: "true"` to `node`.
fn bind_do_not_disrupt(s: &mut ClusterSnapshot, node: &str, name: &str) {
    let mut p = pod(node, name, "100m");
    p.annotations.insert(
        labels::DO_NOT_DISRUPT_ANNOTATION.to_string(),
        "true".to_string(),
    );
    node_mut(s, node).pods.push(p);
}

/// Binds a new pod labelled `app=blocked` to `node`, and adds a PDB over that label allowing no
/// disruption.
fn bind_pdb_blocked(s: &mut ClusterSnapshot, node: &str, name: &str) {
    let mut p = pod(node, name, "100m");
    p.labels.insert("app".into(), "blocked".into());
    node_mut(s, node).pods.push(p);
    if !s.pdbs.iter().any(|b| b.name == "blocked") {
        s.pdbs.push(
            PodDisruptionBudget::new("default".to_string(), "blocked".to_string())
                .with_selector(LabelSelector::from_labels([("app", "blocked")]))
                .with_max_unavailable(IntOrPercent::Int(0)),
        );
    }
}

/// Nominates `node` for pending pods (nomination lasts 20 s upstream).
fn nominate(s: &mut ClusterSnapshot, node: &str) {
    node_mut(s, node).nominated_until = after_wait()
        .checked_add(jiff::SignedDuration::from_secs(20))
        .ok();
}

fn validated(v: &Validation) -> &Command {
    match &v.outcome {
        Ok(cmd) => cmd,
        Err(e) => panic!("expected the command to stay valid: {e}"),
    }
}

fn rejected(v: &Validation) -> &RevalidationError {
    match &v.outcome {
        Ok(cmd) => panic!("expected a rejection, got {:?}", names(cmd)),
        Err(e) => e,
    }
}

// ---------------------------------------------------------------------------------------------
// upstream `emptiness_test.go` Emptiness: the TTL wait
// ---------------------------------------------------------------------------------------------

/// Upstream blocks the loop on the 15 s validation wait, then deletes the node. Nothing changes
/// during the wait, so the emptiness command is still valid afterwards, unchanged.
#[test]
fn emptiness_should_wait_for_the_node_ttl_for_empty_nodes_before_consolidating() {
    let s = one_empty(ConsolidationPolicy::WhenEmpty);
    let p = pass_at(&s, now());
    let cmd = only(&p);
    assert_eq!(cmd.method, Method::Emptiness);
    let v = validate_counted(cmd, &s, after_wait(), &s2s());
    let kept = validated(&v);
    assert_eq!(names(kept), ["node-0"], "deleted after the wait");
    assert_eq!(v.failed_validations, 0);
}

// ---------------------------------------------------------------------------------------------
// upstream `consolidation_test.go` Consolidation Context "TTL"
// ---------------------------------------------------------------------------------------------

/// An xlarge node holding one 1-CPU pod, alone: replaced by a cheaper node.
fn expensive_node() -> ClusterSnapshot {
    snapshot(
        vec![consolidation_pool("100%")],
        vec![node("node-0", "default", &it("xlarge"), 1, "1")],
    )
}

#[test]
fn consolidation_ttl_should_wait_for_the_node_ttl_for_non_empty_nodes_before_consolidating() {
    let s = delete_cluster();
    let p = pass_at(&s, now());
    let cmd = only(&p);
    assert_eq!((cmd.method, cmd.decision()), (Method::SingleNode, "delete"));
    let v = validate_counted(cmd, &s, after_wait(), &s2s());
    assert_eq!(
        names(validated(&v)),
        ["node-1"],
        "one node deleted after the wait"
    );
    assert_eq!(v.failed_validations, 0);
}

/// A 3-CPU pod binds to the candidate during the wait: the replacement now needs a bigger type,
/// so the planned instance types are no longer all possible and the command is rejected
/// (nothing removed). The next pass plans a replacement with the new (bigger) options.
#[test]
fn consolidation_ttl_should_not_consolidate_if_the_action_picks_different_instance_types_after_the_node_ttl_wait()
 {
    let s = expensive_node();
    let p = pass_at(&s, now());
    let cmd = only(&p);
    assert_eq!(cmd.decision(), "replace");
    assert!(option_names(cmd).contains(&"small".to_string()));

    let mut later = s.clone();
    bind(&mut later, "node-0", "big", "3");
    let v = validate_counted(cmd, &later, after_wait(), &s2s());
    let e = rejected(&v);
    assert_eq!(e.reason(), "scheduling", "{e}");
    assert_eq!(
        v.failed_validations, 0,
        "a scheduling rejection is not counted"
    );

    let next = pass_at(&later, after_wait());
    let again = only(&next);
    assert_eq!(again.decision(), "replace");
    assert!(!option_names(again).contains(&"small".to_string()));
}

/// The empty node gets a do-not-disrupt pod during the wait: it is no longer a candidate (churn),
/// nothing is removed, and the next pass leaves it alone.
#[test]
fn consolidation_ttl_should_not_consolidate_if_the_action_becomes_invalid_during_the_node_ttl_wait()
{
    let s = snapshot(
        vec![consolidation_pool("100%")],
        vec![node("node-0", "default", &it("large"), 0, "1")],
    );
    let p = pass_at(&s, now());
    let cmd = only(&p);
    assert_eq!(cmd.method, Method::Emptiness);

    let mut later = s.clone();
    bind_do_not_disrupt(&mut later, "node-0", "dnd");
    let v = validate_counted(cmd, &later, after_wait(), &s2s());
    assert_eq!(rejected(&v).reason(), "churn");
    assert_eq!(v.failed_validations, 1);
    assert!(pass_at(&later, after_wait()).commands.is_empty());
}

#[test]
fn consolidation_ttl_should_not_replace_node_if_a_pod_schedules_with_do_not_disrupt_set_to_true_during_the_ttl_wait()
 {
    let s = expensive_node();
    let p = pass_at(&s, now());
    let cmd = only(&p);
    assert_eq!(cmd.decision(), "replace");
    let mut later = s.clone();
    bind_do_not_disrupt(&mut later, "node-0", "dnd");
    let v = validate_counted(cmd, &later, after_wait(), &s2s());
    assert_eq!(rejected(&v).reason(), "churn");
    assert!(
        pass_at(&later, after_wait()).commands.is_empty(),
        "node kept"
    );
}

#[test]
fn consolidation_ttl_should_not_replace_node_if_a_pod_schedules_with_a_blocking_pdb_during_the_ttl_wait()
 {
    let s = expensive_node();
    let p = pass_at(&s, now());
    let cmd = only(&p);
    assert_eq!(cmd.decision(), "replace");
    let mut later = s.clone();
    bind_pdb_blocked(&mut later, "node-0", "guarded");
    let v = validate_counted(cmd, &later, after_wait(), &s2s());
    assert_eq!(rejected(&v).reason(), "churn");
    assert!(
        pass_at(&later, after_wait()).commands.is_empty(),
        "node kept"
    );
}

#[test]
fn consolidation_ttl_should_not_delete_node_if_pods_schedule_with_do_not_disrupt_set_to_true_during_the_ttl_wait()
 {
    let s = delete_cluster();
    let p = pass_at(&s, now());
    let cmd = only(&p);
    assert_eq!(names(cmd), ["node-1"]);
    let mut later = s.clone();
    bind_do_not_disrupt(&mut later, "node-0", "dnd-0");
    bind_do_not_disrupt(&mut later, "node-1", "dnd-1");
    let v = validate_counted(cmd, &later, after_wait(), &s2s());
    assert_eq!(rejected(&v).reason(), "churn");
    assert_eq!(v.failed_validations, 1);
    assert!(
        pass_at(&later, after_wait()).commands.is_empty(),
        "both nodes kept"
    );
}

#[test]
fn consolidation_ttl_should_not_delete_node_if_pods_schedule_with_a_blocking_pdb_during_the_ttl_wait()
 {
    let s = delete_cluster();
    let p = pass_at(&s, now());
    let cmd = only(&p);
    assert_eq!(names(cmd), ["node-1"]);
    let mut later = s.clone();
    bind_pdb_blocked(&mut later, "node-0", "guarded-0");
    bind_pdb_blocked(&mut later, "node-1", "guarded-1");
    let v = validate_counted(cmd, &later, after_wait(), &s2s());
    assert_eq!(rejected(&v).reason(), "churn");
    assert!(
        pass_at(&later, after_wait()).commands.is_empty(),
        "both nodes kept"
    );
}

/// Not an upstream scenario: the NodePool disables consolidation (`consolidateAfter: Never`)
/// during the wait. Upstream recomputes the candidates with the method's `ShouldDisrupt`, so
/// the command is rejected as churn.
#[test]
fn consolidation_ttl_nodepool_disabling_consolidation_during_the_wait_invalidates_the_command() {
    let s = delete_cluster();
    let p = pass_at(&s, now());
    let cmd = only(&p);
    let mut later = s.clone();
    later.node_pools[0]
        .node_pool
        .spec
        .disruption
        .consolidate_after = Some(NillableDuration::parse("Never").expect("duration"));
    let v = validate_counted(cmd, &later, after_wait(), &s2s());
    assert_eq!(rejected(&v).reason(), "churn");

    let empty = snapshot(
        vec![consolidation_pool("100%")],
        vec![node("node-0", "default", &it("large"), 0, "1")],
    );
    let p = pass_at(&empty, now());
    let mut later = empty.clone();
    later.node_pools[0]
        .node_pool
        .spec
        .disruption
        .consolidate_after = Some(NillableDuration::parse("Never").expect("duration"));
    assert_eq!(
        rejected(&validate_counted(only(&p), &later, after_wait(), &s2s())).reason(),
        "churn"
    );
}

// ---------------------------------------------------------------------------------------------
// upstream `consolidation_test.go` Consolidation Context "Multi-NodeClaim": TTL scenarios
// ---------------------------------------------------------------------------------------------

/// Two large nodes of capacity type `ct`: node-0 with 2 × 1 CPU, node-1 with 1 × 1 CPU. Merged
/// into one smaller node by multi-node consolidation.
fn two_large(ct: &str) -> ClusterSnapshot {
    let mk = |name: &str, pods: usize| {
        let n = node(name, "default", &it("large"), pods, "1");
        if ct == labels::CAPACITY_TYPE_SPOT {
            spot(n)
        } else {
            n
        }
    };
    snapshot(
        vec![ct_pool("100%", ct)],
        vec![mk("node-0", 2), mk("node-1", 1)],
    )
}

fn multi_ttl(ct: &str) {
    let s = two_large(ct);
    let p = pass_at(&s, now());
    let cmd = only(&p);
    assert_eq!(cmd.method, Method::MultiNode);
    assert_eq!(cmd.candidates.len(), 2);
    assert_eq!(cmd.replacements.len(), 1);
    let v = validate_counted(cmd, &s, after_wait(), &s2s());
    let ok = validated(&v);
    assert_eq!(ok.candidates.len(), 2, "both large nodes go after the wait");
    assert_eq!(ok.replacements.len(), 1, "one smaller replacement");
    assert!(!option_names(ok).contains(&"large".to_string()));
}

#[test]
fn consolidation_multi_nodeclaim_should_wait_for_the_node_ttl_for_non_empty_nodes_before_consolidating_on_demand()
 {
    multi_ttl(labels::CAPACITY_TYPE_ON_DEMAND);
}

#[test]
fn consolidation_multi_nodeclaim_should_wait_for_the_node_ttl_for_non_empty_nodes_before_consolidating_spot()
 {
    multi_ttl(labels::CAPACITY_TYPE_SPOT);
}

/// Three empty nodes: in production order (and in upstream's suite order) Emptiness runs before
/// multi-node consolidation and takes all three in one command, validated after the wait.
fn multi_empty(ct: &str) {
    let nodes = (0..3)
        .map(|i| {
            let n = node(&format!("node-{i}"), "default", &it("large"), 0, "1");
            if ct == labels::CAPACITY_TYPE_SPOT {
                spot(n)
            } else {
                n
            }
        })
        .collect();
    let s = snapshot(vec![ct_pool("100%", ct)], nodes);
    let p = pass_at(&s, now());
    let cmd = only(&p);
    assert_eq!(cmd.method, Method::Emptiness);
    let v = validate_counted(cmd, &s, after_wait(), &s2s());
    assert_eq!(
        names(validated(&v)),
        ["node-0", "node-1", "node-2"],
        "all three deleted"
    );
}

#[test]
fn consolidation_multi_nodeclaim_should_consolidate_multiple_empty_nodes_via_multi_nodeclaim_consolidation_on_demand()
 {
    multi_empty(labels::CAPACITY_TYPE_ON_DEMAND);
}

#[test]
fn consolidation_multi_nodeclaim_should_consolidate_multiple_empty_nodes_via_multi_nodeclaim_consolidation_spot()
 {
    multi_empty(labels::CAPACITY_TYPE_SPOT);
}

/// Three large nodes with one 1-CPU pod each: multi-node merges them into one medium. During
/// the wait a 1-CPU pod binds to node-0 and another to node-1: the merge no longer fits a
/// medium (scheduling rejection). Upstream's controller then runs single-node consolidation in
/// the same pass, on the changed cluster: node-2 (fewest pods) is deleted, its pod moving to
/// node-0 or node-1, and that command survives its own wait. Two nodes are left.
fn multi_then_single(ct: &str) {
    let nodes = (0..3)
        .map(|i| {
            let n = node(&format!("node-{i}"), "default", &it("large"), 1, "1");
            if ct == labels::CAPACITY_TYPE_SPOT {
                spot(n)
            } else {
                n
            }
        })
        .collect();
    let s = snapshot(vec![ct_pool("100%", ct)], nodes);
    let p = pass_at(&s, now());
    let multi = only(&p);
    assert_eq!(multi.method, Method::MultiNode);
    assert_eq!(multi.candidates.len(), 3);

    let mut later = s.clone();
    bind(&mut later, "node-0", "extra-0", "1");
    bind(&mut later, "node-1", "extra-1", "1");
    let v = validate_counted(multi, &later, after_wait(), &s2s());
    assert_eq!(rejected(&v).reason(), "scheduling");

    let single = single_node_pass(&later, after_wait(), &s2s());
    let cmd = only(&single);
    assert_eq!(names(cmd), ["node-2"]);
    assert_eq!(cmd.decision(), "delete");
    let v = validate_counted(cmd, &later, after_two_waits(), &s2s());
    assert_eq!(names(validated(&v)), ["node-2"], "2 nodes left");
}

#[test]
fn consolidation_multi_nodeclaim_should_continue_to_single_nodeclaim_consolidation_when_multi_nodeclaim_consolidation_fails_validation_after_the_node_ttl_on_demand()
 {
    multi_then_single(labels::CAPACITY_TYPE_ON_DEMAND);
}

#[test]
fn consolidation_multi_nodeclaim_should_continue_to_single_nodeclaim_consolidation_when_multi_nodeclaim_consolidation_fails_validation_after_the_node_ttl_spot()
 {
    multi_then_single(labels::CAPACITY_TYPE_SPOT);
}

// ---------------------------------------------------------------------------------------------
// upstream `consolidation_test.go` Consolidation Context "Delete": pod churn
// ---------------------------------------------------------------------------------------------

/// Two empty nodes: one emptiness command for both. A pod binds to node-0 during the wait: the
/// lenient emptiness validator drops it and keeps node-1 (no failed validation is counted for a
/// candidate that merely vanished while others remain). The method produced a command, so its
/// memo is not set.
#[test]
fn consolidation_delete_does_not_delete_nodes_with_pod_churn_deletes_nodes_without_pod_churn() {
    let s = snapshot(
        vec![consolidation_pool("100%")],
        vec![
            node("node-0", "default", &it("large"), 0, "1"),
            node("node-1", "default", &it("large"), 0, "1"),
        ],
    );
    let p = pass_at(&s, now());
    let cmd = only(&p);
    assert_eq!(cmd.method, Method::Emptiness);
    assert_eq!(cmd.candidates.len(), 2);
    assert!(!p.consolidated.contains(&Method::Emptiness), "memo unset");

    let mut later = s.clone();
    bind(&mut later, "node-0", "churn", "1");
    let v = validate_counted(cmd, &later, after_wait(), &s2s());
    let kept = validated(&v);
    assert_eq!(names(kept), ["node-1"]);
    assert!((kept.savings_per_hour - 0.4).abs() < 1e-9);
    assert_eq!(v.failed_validations, 0);
}

// ---------------------------------------------------------------------------------------------
// upstream `consolidation_test.go` Consolidation Context "Metrics": invalidated commands
// ---------------------------------------------------------------------------------------------

/// Upstream's test validators inject, during the wait: (a) a 0 % budget, (b) churn — a new pod
/// bound to the first candidate, which is also nominated — or (c) the nomination of every node.
#[derive(Debug, Clone, Copy)]
enum Injection {
    BlockedByBudgets,
    PodChurn,
    CandidateNominated,
}

const INJECTIONS: [Injection; 3] = [
    Injection::BlockedByBudgets,
    Injection::PodChurn,
    Injection::CandidateNominated,
];

fn inject(s: &ClusterSnapshot, cmd: &Command, what: Injection) -> ClusterSnapshot {
    let mut later = s.clone();
    match what {
        Injection::BlockedByBudgets => {
            for p in &mut later.node_pools {
                set_budget(p, "0%");
            }
        }
        Injection::PodChurn => {
            let first = cmd.candidates[0].name().to_string();
            bind(&mut later, &first, "churn", "100m");
            nominate(&mut later, &first);
        }
        Injection::CandidateNominated => {
            let all: Vec<String> = later.nodes.iter().map(|n| n.name().to_string()).collect();
            for n in all {
                nominate(&mut later, &n);
            }
        }
    }
    later
}

/// Every injection rejects the command (no command, memo not set) and counts `expected`
/// failed validations. A nominated node is no longer a candidate at all, so nomination shows
/// up as churn (upstream's `NewCandidate` rejects nominated nodes before the validator's own
/// nomination check).
fn assert_invalidated(s: &ClusterSnapshot, cmd: &Command, method: Method, expected: usize) {
    assert_eq!(cmd.method, method);
    for what in INJECTIONS {
        let later = inject(s, cmd, what);
        let v = validate_counted(cmd, &later, after_wait(), &s2s());
        let e = rejected(&v);
        let want = match what {
            Injection::BlockedByBudgets => "budget",
            Injection::PodChurn | Injection::CandidateNominated => "churn",
        };
        assert_eq!(e.reason(), want, "{what:?}: {e}");
        assert_eq!(v.failed_validations, expected, "{what:?}");
        assert!(validate(cmd, &later, after_wait(), &s2s()).is_err());
    }
}

#[test]
fn consolidation_metrics_should_correctly_report_invalidated_commands_for_emptiness_disruption() {
    let s = snapshot(
        vec![consolidation_pool("100%")],
        vec![node("node-0", "default", &it("large"), 0, "1")],
    );
    let p = pass_at(&s, now());
    assert!(!p.consolidated.contains(&Method::Emptiness));
    assert_invalidated(&s, only(&p), Method::Emptiness, 1);
}

#[test]
fn consolidation_metrics_should_correctly_report_invalidated_commands_for_multi_node_disruption() {
    let s = two_large(labels::CAPACITY_TYPE_ON_DEMAND);
    let p = multi_node_pass(&s, now(), &s2s());
    assert!(!p.consolidated.contains(&Method::MultiNode));
    assert_invalidated(&s, only(&p), Method::MultiNode, 2);
}

#[test]
fn consolidation_metrics_should_correctly_report_invalidated_commands_for_single_node_disruption() {
    let s = delete_cluster();
    let p = single_node_pass(&s, now(), &s2s());
    assert!(!p.consolidated.contains(&Method::SingleNode));
    assert_invalidated(&s, only(&p), Method::SingleNode, 1);
}

// ---------------------------------------------------------------------------------------------
// upstream `consolidation_test.go` Consolidation Context "Budgets": the consolidated memo
// ---------------------------------------------------------------------------------------------

fn empty_nodes(count: usize, pool: &str) -> Vec<StateNode> {
    (0..count)
        .map(|i| node(&format!("{pool}-node-{i}"), pool, &it("large"), 0, "1"))
        .collect()
}

/// Nodes whose pods all fit on one of them: multi- and single-node consolidation would delete
/// them if budgets allowed.
fn busy_nodes(count: usize, pool: &str) -> Vec<StateNode> {
    (0..count)
        .map(|i| node(&format!("{pool}-node-{i}"), pool, &it("large"), 1, "500m"))
        .collect()
}

fn one_pool(budget: &str, nodes: fn(usize, &str) -> Vec<StateNode>) -> ClusterSnapshot {
    snapshot(vec![consolidation_pool(budget)], nodes(10, "default"))
}

fn many_pools(budget: &str, nodes: fn(usize, &str) -> Vec<StateNode>) -> ClusterSnapshot {
    let pools = (0..10)
        .map(|i| {
            pool(
                &format!("np-{i}"),
                ConsolidationPolicy::WhenEmptyOrUnderutilized,
                budget,
            )
        })
        .collect();
    let nodes = (0..10).flat_map(|i| nodes(3, &format!("np-{i}"))).collect();
    snapshot(pools, nodes)
}

fn assert_not_marked(p: &PassOutcome, method: Method) {
    assert!(p.commands.is_empty(), "no command");
    assert!(
        !p.consolidated.contains(&method),
        "{method:?} must not be marked consolidated: {:?}",
        p.consolidated
    );
}

#[test]
fn consolidation_budgets_should_not_mark_empty_node_consolidated_if_the_candidates_cant_be_disrupted_due_to_budgets_with_one_nodepool()
 {
    let p = pass_at(&one_pool("0%", empty_nodes), now());
    assert_not_marked(&p, Method::Emptiness);
}

#[test]
fn consolidation_budgets_should_not_mark_empty_node_consolidated_if_all_candidates_cant_be_disrupted_due_to_budgets_with_many_nodepools()
 {
    let p = pass_at(&many_pools("0%", empty_nodes), now());
    assert_not_marked(&p, Method::Emptiness);
}

#[test]
fn consolidation_budgets_should_not_mark_multi_node_consolidated_if_the_candidates_cant_be_disrupted_due_to_budgets_with_one_nodepool()
 {
    let s = one_pool("0%", busy_nodes);
    assert_not_marked(&multi_node_pass(&s, now(), &s2s()), Method::MultiNode);
    assert_not_marked(&pass_at(&s, now()), Method::MultiNode);
}

#[test]
fn consolidation_budgets_should_not_mark_multi_node_consolidated_if_all_candidates_cant_be_disrupted_due_to_budgets_with_many_nodepools()
 {
    let s = many_pools("0%", busy_nodes);
    assert_not_marked(&multi_node_pass(&s, now(), &s2s()), Method::MultiNode);
    assert_not_marked(&pass_at(&s, now()), Method::MultiNode);
}

#[test]
fn consolidation_budgets_should_not_mark_single_node_consolidated_if_the_candidates_cant_be_disrupted_due_to_budgets_with_one_nodepool()
 {
    let s = one_pool("0%", busy_nodes);
    assert_not_marked(&single_node_pass(&s, now(), &s2s()), Method::SingleNode);
    assert_not_marked(&pass_at(&s, now()), Method::SingleNode);
}

#[test]
fn consolidation_budgets_should_not_mark_single_node_consolidated_if_all_candidates_cant_be_disrupted_due_to_budgets_with_many_nodepools()
 {
    let s = many_pools("0%", busy_nodes);
    assert_not_marked(&single_node_pass(&s, now(), &s2s()), Method::SingleNode);
    assert_not_marked(&pass_at(&s, now()), Method::SingleNode);
}

/// The other side of the memo (upstream `controllers/disruption`): with candidates, no budget in
/// the way and nothing worth doing, multi- and single-node consolidation mark themselves
/// consolidated; a method without candidates (emptiness here) does not run its computation and is
/// not marked.
#[test]
fn consolidation_memo_is_marked_when_nothing_can_be_done_within_budget() {
    // On-demand only; two large nodes with a 7-CPU pod each: neither pod fits on the other
    // node, merging needs an xlarge (not cheaper), a single node needs a large (not cheaper).
    let s = snapshot(
        vec![ct_pool("100%", labels::CAPACITY_TYPE_ON_DEMAND)],
        vec![
            node("node-0", "default", &it("large"), 1, "7"),
            node("node-1", "default", &it("large"), 1, "7"),
        ],
    );
    let p = pass_at(&s, now());
    assert!(p.commands.is_empty(), "{:?}", p.blocked);
    assert_eq!(
        p.consolidated,
        BTreeSet::from([Method::MultiNode, Method::SingleNode])
    );
    // A single candidate: multi-node has nothing to merge and marks itself too.
    let mut one = s.clone();
    one.nodes.truncate(1);
    assert!(
        multi_node_pass(&one, now(), &s2s())
            .consolidated
            .contains(&Method::MultiNode)
    );
    // A budget-blocked candidate in another pool keeps the memos unset even though the
    // default pool's candidates were evaluated.
    let mut mixed = s.clone();
    let mut blocked = ct_pool("0%", labels::CAPACITY_TYPE_ON_DEMAND);
    blocked.node_pool.metadata.name = Some("blocked".to_string());
    mixed.node_pools.push(blocked);
    mixed
        .nodes
        .push(Arc::new(node("blocked-0", "blocked", &it("large"), 1, "7")));
    let p = pass_at(&mixed, now());
    assert!(p.commands.is_empty(), "{:?}", p.commands.first().map(names));
    assert!(p.consolidated.is_empty(), "{:?}", p.consolidated);
}

// ---------------------------------------------------------------------------------------------
// Queue / orchestration (upstream `Queue.StartCommand`, `Queue.Reconcile`): drift untaint,
// Parallelization
// ---------------------------------------------------------------------------------------------

fn has_disruption_reason(s: &ClusterSnapshot, node: &str) -> bool {
    s.nodes
        .iter()
        .find(|n| n.name() == node)
        .and_then(|n| n.node_claim.as_ref())
        .is_some_and(|c| {
            c.status
                .conditions
                .iter()
                .any(|c| c.type_ == "DisruptionReason")
        })
}

/// The drift suite's pool (consolidateAfter 1h) with one drifted node holding one pod;
/// `Consolidatable` cleared (modelled as False).
fn one_drifted() -> ClusterSnapshot {
    let mut p = pool(
        "default",
        ConsolidationPolicy::WhenEmptyOrUnderutilized,
        "100%",
    );
    p.node_pool.spec.disruption.consolidate_after =
        Some(NillableDuration::parse("1h").expect("duration"));
    let mut n = node("node-0", "default", &it("medium"), 1, "1");
    set_condition(&mut n, "Drifted", ConditionStatus::True, CREATED);
    set_condition(&mut n, "Consolidatable", ConditionStatus::False, CREATED);
    snapshot(vec![p], vec![n])
}

/// Drift plans a replacement; starting the command taints the node and sets
/// `DisruptionReason=Drifted`; while queued the node is no candidate. The replacement vanishes
/// (not found and unknown to cluster state: an insufficient-capacity error): the command is
/// unrecoverable, its rollback untaints the node, clears the condition and the deletion mark,
/// and the next pass plans the drift replacement again.
#[test]
fn drift_should_untaint_nodes_when_drift_replacement_fails() {
    let mut s = one_drifted();
    let p = pass_at(&s, now());
    let cmd = only(&p);
    assert_eq!((cmd.method, cmd.decision()), (Method::Drift, "replace"));

    let mut q = CommandQueue::new();
    let steps = q
        .start(queue_command("drift-1", cmd, &s, now()))
        .expect("starts");
    apply_steps(&mut s, &steps);
    assert!(tainted(&s, "node-0"));
    assert!(has_disruption_reason(&s, "node-0"));
    assert!(s.nodes[0].is_deleting());
    let queued = q.queued_provider_ids();
    assert!(
        run_pass(&s, now(), &s2s(), &|p| queued.contains(p))
            .commands
            .is_empty(),
        "a queued candidate is not disrupted twice"
    );

    let out = q
        .reconcile(
            "drift-1",
            &[ReplacementState::NotFound { in_state: false }],
            after_wait(),
        )
        .expect("queued");
    let QueueOutcome::Unrecoverable {
        reason, rollback, ..
    } = out
    else {
        panic!("the replacement was deleted: {out:?}");
    };
    assert_eq!(reason, queue::REPLACEMENT_DELETED);
    apply_steps(&mut s, &rollback);
    assert!(!tainted(&s, "node-0"), "untainted");
    assert!(!has_disruption_reason(&s, "node-0"));
    assert!(!s.nodes[0].is_deleting());
    assert_eq!(q.entries(), 0);

    let retry = pass_at(&s, after_wait());
    assert_eq!(names(only(&retry)), ["node-0"], "drift tries again");
}

/// Consolidation replaces the xlarge node; the command starts (candidate tainted and marked for
/// deletion) and its replacement comes up. A new pending pod arrives before the candidate is
/// gone: provisioning places it, and the candidate's pod, on the in-flight replacement — no
/// third NodeClaim, still 2 nodes.
#[test]
fn consolidation_parallelization_should_not_schedule_an_additional_node_when_receiving_pending_pods_while_consolidating()
 {
    let mut s = expensive_node();
    let p = pass_at(&s, now());
    let cmd = only(&p);
    assert_eq!(cmd.decision(), "replace");
    let cheapest = cmd.replacements[0].instance_types[0].clone();

    let mut q = CommandQueue::new();
    let steps = q
        .start(queue_command("c1", cmd, &s, now()))
        .expect("starts");
    apply_steps(&mut s, &steps);
    // The replacement launches and initializes (upstream's ExpectMakeNewNodeClaimsReady).
    s.nodes.push(Arc::new(node(
        "c1-replacement-0",
        "default",
        &cheapest,
        0,
        "1",
    )));
    s.pending_pods.push(pending("late", "100m"));

    let sim = simulate_scheduling(&s, &[], &s2s().scheduler, false, after_wait()).expect("runs");
    assert!(sim.all_non_pending_scheduled());
    assert!(
        sim.results.pod_errors.is_empty(),
        "{:?}",
        sim.results.pod_errors
    );
    assert!(
        sim.results.new_node_claims.is_empty(),
        "no additional NodeClaim"
    );
    let on_replacement: Vec<&String> = sim
        .results
        .existing_nodes
        .iter()
        .filter(|n| n.name == "c1-replacement-0")
        .flat_map(|n| n.pods.iter())
        .collect();
    assert_eq!(on_replacement.len(), 2, "{on_replacement:?}");
    assert_eq!(s.nodes.len(), 2);

    // The replacement is initialized: the queue deletes the candidate.
    let out = q
        .reconcile("c1", &[ReplacementState::Initialized], after_wait())
        .expect("queued");
    assert!(
        matches!(out, QueueOutcome::DeleteCandidates { claim_names, .. } if claim_names == ["node-0"])
    );
}

/// A node (5 × 1 CPU) is being deleted; a node of the same type was launched for its pods and
/// two of them already run there (nomination expired). Consolidating the new node would need
/// room for its own pods and the 3 still on the deleting node: nothing cheaper fits, so no
/// method acts (upstream's loop just requeues).
#[test]
fn consolidation_parallelization_should_not_consolidate_a_node_that_is_launched_for_pods_on_a_deleting_node()
 {
    let mut old = spot(node("old", "default", &it("large"), 3, "1"));
    old.marked_for_deletion = true;
    // The provisioner launched the cheapest offering: spot.
    let mut new = spot(node("new", "default", &it("large"), 0, "1"));
    new.pods = (0..2)
        .map(|i| pod("new", &format!("moved-{i}"), "1"))
        .collect();
    new.nominated_until = now().checked_sub(jiff::SignedDuration::from_secs(1)).ok();
    let s = snapshot(vec![consolidation_pool("100%")], vec![old, new]);
    let later = now()
        .checked_add(jiff::SignedDuration::from_mins(10))
        .expect("in range");
    let p = pass_at(&s, later);
    assert!(p.commands.is_empty(), "no further action: {:?}", p.blocked);
    // The new node was evaluated (it is a candidate), and nothing was worth doing.
    let cands: Vec<String> = karpenter_core::disruption::consolidation_candidates_of(&s, later)
        .iter()
        .map(|c| c.name().to_string())
        .collect();
    assert_eq!(cands, ["new"]);
    assert!(p.consolidated.contains(&Method::SingleNode));
}

//! Upstream's disruption scenarios that need caller-side data in the planner, ported against our
//! pure planner with the same harness differences as `disruption_scenarios.rs` (production
//! method order, no validation wait, decisions asserted instead of events):
//! - CapacityBuffer virtual pods (upstream `emptiness_test.go` emptiness Context "Buffer pod
//!   protection", upstream `consolidation_test.go` consolidation Context "Buffer Pods");
//! - single-node consolidation's time-outs (upstream `singlenodeconsolidation_test.go` "should
//!   reset timed out nodepools…", "should mark nodepools as timed out…");
//! - consolidation Context "Replace" "should handle failing filterOutSameInstanceType correctly
//!   (without a panic) when minValues isn't satisfied" (a fixture built from our catalogue);
//! - emptiness, drift and consolidation Context "Metrics" "should correctly report eligible
//!   (drifted) nodes" (`PassOutcome::eligible_nodes`);
//! - upstream `disruption/suite_test.go` suite_test Describe "Metrics": the six "should fire
//!   metrics for …" decisions.
//!
//! Upstream's tests call `cluster.UpdateBufferPodCounts` (provider id → count) as the
//! provisioner would after a scheduling pass; here the caller's last provisioning pass is data
//! in the snapshot, [`ClusterSnapshot::buffer_pod_counts`] (node name → count). The virtual
//! pods themselves ([`ClusterSnapshot::buffer_pods`]) only enter simulations with the
//! `CapacityBuffer` gate on ([`DisruptionOptions::capacity_buffer`], default off as upstream).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::disruption_scenarios::{
    CREATED, ZONE, catalog, disrupted, itype, names, node, now, only, option_names, opts, pass,
    pass_with, pod, pool, pool_with, rl, s2s, set_condition, snapshot,
};
use karpenter_core::api::{ConditionStatus, ConsolidationPolicy, NillableDuration};
use karpenter_core::disruption::{
    Command, Method, PassOutcome, Reason, TimeBudget, multi_node_pass,
};
use karpenter_core::labels;
use karpenter_core::model::{InstanceType, Offering, Pod, PodPhase};
use karpenter_core::requirements::{NodeSelectorRequirement, Operator};
use karpenter_core::state::{ClusterSnapshot, StateNode};

// ---------------------------------------------------------------------------------------------
// Builders (copied from disruption_scenarios.rs)
// ---------------------------------------------------------------------------------------------

fn it(name: &str) -> Arc<InstanceType> {
    catalog()
        .into_iter()
        .find(|t| t.name() == name)
        .expect("known type")
}

/// What the caller's last provisioning pass reported: `(node, virtual pods placed on it)`.
fn with_buffer_counts(mut s: ClusterSnapshot, counts: &[(&str, usize)]) -> ClusterSnapshot {
    s.buffer_pod_counts = counts.iter().map(|(n, c)| (n.to_string(), *c)).collect();
    s
}

/// `node`'s blocked reason, if the pass recorded one.
fn blocked_reason<'a>(p: &'a PassOutcome, node: &str) -> Option<&'a str> {
    p.blocked
        .iter()
        .find(|(n, _)| n == node)
        .map(|(_, r)| r.as_str())
}

// ---------------------------------------------------------------------------------------------
// upstream `emptiness_test.go` emptiness_test.go, Context "Buffer pod protection" (policy
// WhenEmpty, 100 % budget)
// ---------------------------------------------------------------------------------------------

fn empty_node(name: &str) -> StateNode {
    node(name, "default", &it("large"), 0, "1")
}

fn emptiness_cluster(nodes: Vec<StateNode>) -> ClusterSnapshot {
    snapshot(
        vec![pool("default", ConsolidationPolicy::WhenEmpty, "100%")],
        nodes,
    )
}

#[test]
fn emptiness_buffer_pod_protection_should_not_disrupt_a_node_that_hosts_virtual_buffer_pods() {
    let s = with_buffer_counts(
        emptiness_cluster(vec![empty_node("node-0")]),
        &[("node-0", 3)],
    );
    let p = pass(&s);
    assert!(p.commands.is_empty(), "kept");
    assert_eq!(
        blocked_reason(&p, "node-0"),
        Some("Node \"node-0\" has buffer pods"),
        "upstream's Unconsolidatable message"
    );
}

#[test]
fn emptiness_buffer_pod_protection_should_disrupt_a_node_once_buffer_pods_are_cleared() {
    let s = with_buffer_counts(
        emptiness_cluster(vec![empty_node("node-0")]),
        &[("node-0", 2)],
    );
    assert!(
        pass(&s).commands.is_empty(),
        "kept while it hosts buffer pods"
    );
    // The next provisioning pass placed no virtual pods on it (buffer consumed or deleted).
    let s = with_buffer_counts(s, &[]);
    let p = pass(&s);
    let cmd = only(&p);
    assert_eq!(cmd.method, Method::Emptiness);
    assert_eq!(names(cmd), ["node-0"]);
}

/// Upstream's validation re-runs emptiness's own filter after the 15 s wait: a node that gained
/// buffer pods meanwhile is no longer disrupted (ours: `validation::validate` against the newer
/// snapshot).
#[test]
fn emptiness_validation_rejects_a_node_that_gained_buffer_pods_during_the_wait() {
    let s = emptiness_cluster(vec![empty_node("node-0")]);
    let p = pass(&s);
    let cmd = only(&p).clone();
    assert_eq!(cmd.method, Method::Emptiness);
    let later = now() + karpenter_core::disruption::validation::COMMAND_VALIDATION_DELAY;
    assert!(karpenter_core::disruption::validation::validate(&cmd, &s, later, &opts()).is_ok());
    let s = with_buffer_counts(s, &[("node-0", 1)]);
    assert!(
        karpenter_core::disruption::validation::validate(&cmd, &s, later, &opts()).is_err(),
        "the node now hosts buffer pods"
    );
}

#[test]
fn emptiness_buffer_pod_protection_should_only_protect_the_specific_node_with_buffer_pods_not_others()
 {
    let s = with_buffer_counts(
        emptiness_cluster(vec![empty_node("node-0"), empty_node("node-1")]),
        &[("node-0", 1)],
    );
    let p = pass(&s);
    let cmd = only(&p);
    assert_eq!(cmd.method, Method::Emptiness);
    assert_eq!(names(cmd), ["node-1"], "the unprotected node is deleted");
    assert!(
        !disrupted(&p).contains("node-0"),
        "the protected node is kept"
    );
}

#[test]
fn emptiness_buffer_pod_protection_should_not_consider_a_node_with_real_pods_and_buffer_pods_as_empty()
 {
    let s = with_buffer_counts(
        emptiness_cluster(vec![node("node-0", "default", &it("large"), 1, "1")]),
        &[("node-0", 2)],
    );
    let p = pass(&s);
    assert!(
        p.commands.is_empty(),
        "kept (WhenEmpty: a node with a pod is never disrupted)"
    );
}

#[test]
fn emptiness_buffer_pod_protection_should_protect_multiple_nodes_that_each_host_buffer_pods() {
    let s = with_buffer_counts(
        emptiness_cluster(vec![empty_node("node-0"), empty_node("node-1")]),
        &[("node-0", 2), ("node-1", 3)],
    );
    let p = pass(&s);
    assert!(p.commands.is_empty(), "both kept");
    assert!(blocked_reason(&p, "node-0").is_some());
    assert!(blocked_reason(&p, "node-1").is_some());
}

#[test]
fn emptiness_buffer_pod_protection_should_not_protect_a_node_with_zero_buffer_pod_count() {
    let s = with_buffer_counts(
        emptiness_cluster(vec![empty_node("node-0")]),
        &[("node-0", 0)],
    );
    let p = pass(&s);
    assert_eq!(
        names(only(&p)),
        ["node-0"],
        "zero buffer pods: empty, deleted"
    );
}

// ---------------------------------------------------------------------------------------------
// upstream `consolidation_test.go` consolidation_test.go, Context "Buffer Pods"
// (WhenEmptyOrUnderutilized, 100 %, SpotToSpot on); nodes run the most expensive instance type
// ---------------------------------------------------------------------------------------------

fn consolidation_cluster(nodes: Vec<StateNode>) -> ClusterSnapshot {
    snapshot(
        vec![pool(
            "default",
            ConsolidationPolicy::WhenEmptyOrUnderutilized,
            "100%",
        )],
        nodes,
    )
}

fn expensive(name: &str, pods: usize) -> StateNode {
    node(name, "default", &it("xlarge"), pods, "1")
}

#[test]
fn consolidation_buffer_pods_should_not_empty_consolidate_a_node_with_only_buffer_pods() {
    let s = with_buffer_counts(
        consolidation_cluster(vec![expensive("node-0", 0)]),
        &[("node-0", 5)],
    );
    let p = pass_with(&s, &s2s());
    assert!(p.commands.is_empty(), "still exists");
}

/// The gate is off (upstream's suite default), so only the counts are known: the node with a
/// real pod is an ordinary consolidation candidate and is replaced by a cheaper one.
#[test]
fn consolidation_buffer_pods_should_allow_consolidation_of_a_node_with_real_pods_and_buffer_pods_to_a_cheaper_instance()
 {
    let s = with_buffer_counts(
        consolidation_cluster(vec![expensive("node-0", 1)]),
        &[("node-0", 2)],
    );
    let p = pass_with(&s, &s2s());
    assert!(!p.commands.is_empty(), "at least one command");
    let cmd = only(&p);
    assert_eq!(names(cmd), ["node-0"]);
    assert_eq!(cmd.decision(), "replace");
}

#[test]
fn consolidation_buffer_pods_should_skip_buffer_only_nodes_in_single_node_consolidation_but_protect_via_emptiness()
 {
    let s = with_buffer_counts(
        consolidation_cluster(vec![expensive("node-0", 0), expensive("node-1", 1)]),
        &[("node-0", 4), ("node-1", 2)],
    );
    let p = pass_with(&s, &s2s());
    assert!(
        !disrupted(&p).contains("node-0"),
        "the buffer-only node is in no command: {:?}",
        p.commands
    );
    assert_eq!(
        blocked_reason(&p, "node-0"),
        Some("Node \"node-0\" has buffer pods")
    );
    // node-1's pod fits on node-0, so single-node consolidation deletes node-1.
    let cmd = only(&p);
    assert_eq!(
        (cmd.method, names(cmd)),
        (Method::SingleNode, vec!["node-1"])
    );
}

#[test]
fn consolidation_buffer_pods_should_consolidate_a_buffer_node_once_buffer_pods_are_cleared() {
    let s = with_buffer_counts(
        consolidation_cluster(vec![expensive("node-0", 0)]),
        &[("node-0", 3)],
    );
    assert!(pass_with(&s, &s2s()).commands.is_empty(), "protected");
    let s = with_buffer_counts(s, &[]);
    let p = pass_with(&s, &s2s());
    let cmd = only(&p);
    assert_eq!(
        (cmd.method, names(cmd)),
        (Method::Emptiness, vec!["node-0"])
    );
}

// --------------------------------------------------------------------------------------------- The
// CapacityBuffer gate in simulations (upstream `SimulateScheduling`: buffer virtual pods are
// pending pods)
// ---------------------------------------------------------------------------------------------

/// A CapacityBuffer virtual pod requesting `cpu` (pending: never bound).
fn virtual_pod(name: &str, cpu: &str) -> Pod {
    let mut p = Pod::new("default", name);
    p.requests = rl(&[("cpu", cpu), ("memory", "256Mi")]);
    p.phase = PodPhase::Pending;
    p
}

/// An xlarge node with one 1-CPU pod, hosting two 3-CPU buffer pods.
fn buffered_expensive_node() -> ClusterSnapshot {
    let mut s = with_buffer_counts(
        consolidation_cluster(vec![expensive("node-0", 1)]),
        &[("node-0", 2)],
    );
    s.buffer_pods = vec![virtual_pod("buffer-0", "3"), virtual_pod("buffer-1", "3")];
    s
}

/// Gate off: the virtual pods are ignored and the replacement only has to fit the real pod.
#[test]
fn capacity_buffer_gate_off_replacement_ignores_the_virtual_pods() {
    let p = pass_with(&buffered_expensive_node(), &s2s());
    let cmd = only(&p);
    assert_eq!(cmd.decision(), "replace");
    assert_eq!(option_names(cmd).first().map(String::as_str), Some("small"));
}

/// Gate on: the simulation schedules the virtual pods as pending pods, so the replacement must
/// leave room for them (1 + 3 + 3 CPU: large or bigger, not small or medium; xlarge stays an
/// option because its spot offering is cheaper than the on-demand node).
#[test]
fn capacity_buffer_gate_on_replacement_must_fit_the_virtual_pods() {
    let o = s2s().with_capacity_buffer(true);
    let p = pass_with(&buffered_expensive_node(), &o);
    let cmd = only(&p);
    assert_eq!(cmd.decision(), "replace");
    assert_eq!(option_names(cmd), ["large", "xlarge"]);
}

/// Virtual pods are pending pods: one that fits nowhere does not block the disruption.
#[test]
fn capacity_buffer_gate_on_unschedulable_virtual_pods_do_not_block_consolidation() {
    let mut s = buffered_expensive_node();
    s.buffer_pods = vec![virtual_pod("huge", "100")];
    let o = s2s().with_capacity_buffer(true);
    let p = pass_with(&s, &o);
    let cmd = only(&p);
    assert_eq!(names(cmd), ["node-0"]);
    assert_eq!(option_names(cmd).first().map(String::as_str), Some("small"));
}

// ---------------------------------------------------------------------------------------------
// upstream `singlenodeconsolidation_test.go` singlenodeconsolidation_test.go, Context "Candidate
// Shuffling": timed-out NodePools
// ---------------------------------------------------------------------------------------------
//
// Upstream's deadline (3 minutes of wall clock, checked before each candidate) is the caller's
// `TimeBudget`; upstream's `PreviouslyUnseenNodePools` field is data the caller passes in
// (`DisruptionOptions::previously_unseen_node_pools`) and gets back
// (`PassOutcome::unseen_node_pools`).

/// On-demand only, price proportional to size, no type fits three nodes' pods: merging nodes is
/// never strictly cheaper.
fn linear_catalog() -> Vec<Arc<InstanceType>> {
    [("small", 2, 0.1), ("medium", 4, 0.2)]
        .into_iter()
        .map(|(name, cpu, price)| {
            itype(
                name,
                cpu,
                vec![Offering::new(ZONE, labels::CAPACITY_TYPE_ON_DEMAND, price)],
            )
        })
        .collect()
}

/// Three NodePools with `per_pool` small nodes each, every node nearly full (a 1500m pod):
/// nothing can be deleted, merged or replaced, so single-node consolidation considers every
/// candidate without finding a command (upstream's fixture, whose pods fit nowhere else and
/// whose nodes already run the cheapest type).
fn unconsolidatable_pools(per_pool: usize) -> ClusterSnapshot {
    let types = linear_catalog();
    let small = types[0].clone();
    let pools = (1..=3)
        .map(|i| {
            pool_with(
                &format!("nodepool-{i}"),
                ConsolidationPolicy::WhenEmptyOrUnderutilized,
                "100%",
                types.clone(),
            )
        })
        .collect();
    let nodes = (1..=3)
        .flat_map(|i| {
            let small = small.clone();
            (0..per_pool).map(move |j| {
                node(
                    &format!("nodepool-{i}-node-{j}"),
                    &format!("nodepool-{i}"),
                    &small,
                    1,
                    "1500m",
                )
            })
        })
        .collect();
    snapshot(pools, nodes)
}

fn unseen(pools: &[&str]) -> BTreeSet<String> {
    pools.iter().map(|p| p.to_string()).collect()
}

#[test]
fn single_node_consolidation_candidate_shuffling_should_reset_timed_out_nodepools_when_all_nodepools_are_evaluated()
 {
    let s = unconsolidatable_pools(1);
    let o = opts().with_previously_unseen_node_pools(unseen(&["nodepool-2"]));
    let p = pass_with(&s, &o);
    assert!(p.commands.is_empty(), "{:?}", p.commands);
    assert_eq!(
        p.unseen_node_pools,
        Some(BTreeSet::new()),
        "nodepool-2 is no longer marked as timed out"
    );
    assert!(!p.single_node_timed_out());
}

#[test]
fn single_node_consolidation_candidate_shuffling_should_mark_nodepools_as_timed_out_when_timeout_occurs()
 {
    let s = unconsolidatable_pools(10);
    // Upstream sets the timeout to -5 s: the deadline has passed before the first candidate.
    let o = opts().with_single_node_time_budget(TimeBudget::Candidates(0));
    let p = pass_with(&s, &o);
    assert!(p.commands.is_empty());
    assert_eq!(
        p.unseen_node_pools,
        Some(unseen(&["nodepool-1", "nodepool-2", "nodepool-3"]))
    );
    assert!(p.single_node_timed_out());
}

/// The same with the caller's clock behind a probe: a deadline that has passed.
#[test]
fn single_node_time_budget_deadline_probe_that_has_passed_marks_every_pool() {
    let s = unconsolidatable_pools(2);
    let o = opts().with_single_node_time_budget(TimeBudget::Deadline(Arc::new(|| true)));
    let p = pass_with(&s, &o);
    assert_eq!(
        p.unseen_node_pools,
        Some(unseen(&["nodepool-1", "nodepool-2", "nodepool-3"]))
    );
}

/// The probe is asked before each candidate: after two candidates (one per pool, round robin)
/// time is up and only the third pool is left unseen.
#[test]
fn single_node_time_budget_deadline_probe_is_asked_before_each_candidate() {
    let s = unconsolidatable_pools(2);
    let asked = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&asked);
    let o = opts().with_single_node_time_budget(TimeBudget::Deadline(Arc::new(move || {
        counter.fetch_add(1, Ordering::SeqCst) >= 2
    })));
    let p = pass_with(&s, &o);
    assert_eq!(asked.load(Ordering::SeqCst), 3);
    assert_eq!(p.unseen_node_pools, Some(unseen(&["nodepool-3"])));
}

/// The caller carries the unseen pools from pass to pass: with time for two candidates, the
/// first pass reaches nodepool-1 and nodepool-2 (round robin), the next starts with nodepool-3.
#[test]
fn single_node_time_budget_unseen_pools_go_first_in_the_next_pass() {
    let s = unconsolidatable_pools(3);
    let mut o = opts().with_single_node_time_budget(TimeBudget::Candidates(2));
    let p = pass_with(&s, &o);
    assert!(p.commands.is_empty());
    assert_eq!(p.unseen_node_pools, Some(unseen(&["nodepool-3"])));
    o.previously_unseen_node_pools = p.unseen_node_pools.unwrap_or_default();
    let p = pass_with(&s, &o);
    // nodepool-3, then nodepool-1: nodepool-2 was not reached in this pass.
    assert_eq!(p.unseen_node_pools, Some(unseen(&["nodepool-2"])));
}

/// A command leaves the memory alone (upstream only rewrites it when the loop ends or times
/// out); so does a pass in which single-node consolidation does not run.
#[test]
fn single_node_time_budget_memory_unchanged_when_a_command_is_found() {
    let s = consolidation_cluster(vec![expensive("node-0", 1)]);
    let o = s2s().with_previously_unseen_node_pools(unseen(&["other"]));
    let p = pass_with(&s, &o);
    assert_eq!(only(&p).method, Method::SingleNode);
    assert_eq!(p.unseen_node_pools, None);

    let s = emptiness_cluster(vec![empty_node("node-0")]);
    let p = pass_with(&s, &o);
    assert_eq!(only(&p).method, Method::Emptiness);
    assert_eq!(p.unseen_node_pools, None);
}

/// Without a budget (the default) every candidate is evaluated and the first command found is
/// the same as upstream's without a timeout.
#[test]
fn single_node_time_budget_unlimited_evaluates_every_candidate() {
    let s = unconsolidatable_pools(10);
    let p = pass(&s);
    assert!(p.commands.is_empty());
    assert_eq!(p.unseen_node_pools, Some(BTreeSet::new()));
}

// ---------------------------------------------------------------------------------------------
// upstream `consolidation_test.go` consolidation_test.go, Context "Replace":
// filterOutSameInstanceType and minValues
// ---------------------------------------------------------------------------------------------

/// Upstream's fixture: a NodePool asking for at least 2 instance types, on-demand only; two
/// 5-CPU types, the nodes' `current-on-demand` at $0.5 and `other-on-demand` at $0.4; three
/// nodes of the current type with 4 allocatable CPUs, holding one, one and two 2-CPU pods.
///
/// Multi-node consolidation tries the first two nodes: their pods need a new node whose
/// options are both types; dropping the candidates' own type (filterOutSameInstanceType)
/// leaves one type, which breaks minValues, so the trial is invalid (no panic, no command).
/// Single-node consolidation then deletes one of the first two nodes (its pod fits on the
/// other): one command, two nodes left.
#[test]
fn consolidation_replace_should_handle_failing_filter_out_same_instance_type_correctly_without_a_panic_when_min_values_isnt_satisfied()
 {
    const ZONE_1A: &str = "test-zone-1a";
    let current = itype(
        "current-on-demand",
        5,
        vec![Offering::new(ZONE_1A, labels::CAPACITY_TYPE_ON_DEMAND, 0.5)],
    );
    let other = itype(
        "other-on-demand",
        5,
        vec![Offering::new(ZONE_1A, labels::CAPACITY_TYPE_ON_DEMAND, 0.4)],
    );
    let mut p = pool_with(
        "default",
        ConsolidationPolicy::WhenEmptyOrUnderutilized,
        "100%",
        vec![current.clone(), other],
    );
    p.node_pool.spec.template.spec.requirements = Some(vec![
        NodeSelectorRequirement {
            key: labels::INSTANCE_TYPE.to_string(),
            operator: Operator::Exists,
            values: Vec::new(),
            min_values: Some(2),
        },
        NodeSelectorRequirement {
            key: labels::CAPACITY_TYPE.to_string(),
            operator: Operator::In,
            values: vec![labels::CAPACITY_TYPE_ON_DEMAND.to_string()],
            min_values: None,
        },
    ]);
    let nodes = [1, 1, 2]
        .into_iter()
        .enumerate()
        .map(|(i, pods)| {
            let mut n = node(&format!("node-{i}"), "default", &current, pods, "2");
            if let Some(k8s) = n.node.as_mut() {
                k8s.labels
                    .insert(labels::ZONE.to_string(), ZONE_1A.to_string());
                k8s.allocatable = rl(&[("cpu", "4"), ("memory", "20Gi"), ("pods", "100")]);
            }
            if let Some(claim) = n.node_claim.as_mut() {
                claim
                    .metadata
                    .labels
                    .insert(labels::ZONE.to_string(), ZONE_1A.to_string());
            }
            n
        })
        .collect();
    let s = snapshot(vec![p], nodes);

    // The multi-node trial over the first two nodes is invalid rather than a replacement by
    // `other-on-demand` alone.
    let multi = multi_node_pass(&s, now(), &s2s());
    assert!(multi.commands.is_empty(), "{:?}", multi.commands);
    // Without minValues the same trial is valid: the two nodes merge into `other-on-demand`.
    let mut relaxed = s.clone();
    if let Some(reqs) = relaxed.node_pools[0]
        .node_pool
        .spec
        .template
        .spec
        .requirements
        .as_mut()
    {
        reqs.retain(|r| r.min_values.is_none());
    }
    let multi = multi_node_pass(&relaxed, now(), &s2s());
    let cmd = only(&multi);
    assert_eq!(names(cmd), ["node-0", "node-1"]);
    assert_eq!(option_names(cmd), ["other-on-demand"]);

    let p = pass_with(&s, &s2s());
    let cmd = only(&p);
    assert_eq!(cmd.method, Method::SingleNode);
    assert_eq!(cmd.decision(), "delete");
    assert_eq!(cmd.candidates.len(), 1);
    assert!(
        ["node-0", "node-1"].contains(&cmd.candidates[0].name()),
        "one of the first two nodes: {:?}",
        names(cmd)
    );
}

// ---------------------------------------------------------------------------------------------
// Context "Metrics": eligible nodes (upstream `emptiness_test.go` emptiness, upstream
// `drift_test.go` drift, upstream `consolidation_test.go` consolidation)
// ---------------------------------------------------------------------------------------------
//
// Upstream's gauge `voluntary_disruption_eligible_nodes{reason}` is `PassOutcome::eligible_nodes`
// here, per method that ran in the pass.

/// The drift suite's node: drifted, `Consolidatable` cleared (modelled as False).
fn drift_node(name: &str, it: &InstanceType, pods: usize) -> StateNode {
    let mut n = node(name, "default", it, pods, "1");
    set_condition(&mut n, "Drifted", ConditionStatus::True, CREATED);
    set_condition(&mut n, "Consolidatable", ConditionStatus::False, CREATED);
    n
}

fn with_do_not_disrupt_pod(mut n: StateNode) -> StateNode {
    if let Some(p) = n.pods.first_mut() {
        p.annotations.insert(
            labels::DO_NOT_DISRUPT_ANNOTATION.to_string(),
            "true".to_string(),
        );
    }
    n
}

fn eligible(p: &PassOutcome, method: Method) -> Option<usize> {
    p.eligible_nodes.get(&method).copied()
}

#[test]
fn emptiness_metrics_should_correctly_report_eligible_nodes() {
    // The node has a pod, so emptiness skips it.
    let s = emptiness_cluster(vec![node("node-0", "default", &it("large"), 1, "1")]);
    let p = pass(&s);
    assert_eq!(eligible(&p, Method::Emptiness), Some(0));
    // Pod deleted: the node is empty and emptiness claims it.
    let s = emptiness_cluster(vec![empty_node("node-0")]);
    let p = pass(&s);
    assert_eq!(eligible(&p, Method::Emptiness), Some(1));
    assert_eq!(only(&p).method, Method::Emptiness);
}

#[test]
fn drift_metrics_should_correctly_report_eligible_drifted_nodes() {
    let mut p = pool(
        "default",
        ConsolidationPolicy::WhenEmptyOrUnderutilized,
        "100%",
    );
    p.node_pool.spec.disruption.consolidate_after =
        Some(NillableDuration::parse("1h").expect("duration"));
    let protected = with_do_not_disrupt_pod(drift_node("node-0", &it("medium"), 1));
    let s = snapshot(vec![p.clone()], vec![protected]);
    let out = pass(&s);
    assert_eq!(eligible(&out, Method::Drift), Some(0));
    assert!(out.commands.is_empty());
    // Annotation removed: the node is eligible for drift (and replaced).
    let s = snapshot(vec![p], vec![drift_node("node-0", &it("medium"), 1)]);
    let out = pass(&s);
    assert_eq!(eligible(&out, Method::Drift), Some(1));
    assert_eq!(only(&out).method, Method::Drift);
}

#[test]
fn consolidation_metrics_should_correctly_report_eligible_nodes() {
    let protected = with_do_not_disrupt_pod(expensive("node-0", 1));
    let p = pass_with(&consolidation_cluster(vec![protected]), &s2s());
    assert_eq!(eligible(&p, Method::MultiNode), Some(0));
    assert_eq!(eligible(&p, Method::SingleNode), Some(0));
    // Annotation removed: one underutilized candidate.
    let p = pass_with(&consolidation_cluster(vec![expensive("node-0", 1)]), &s2s());
    assert_eq!(eligible(&p, Method::MultiNode), Some(1));
    assert_eq!(eligible(&p, Method::SingleNode), Some(1));
}

/// Only the methods that ran report: a pass that stops at emptiness says nothing of the others,
/// and a buffer-protected node is not eligible for emptiness.
#[test]
fn eligible_nodes_only_for_methods_that_ran() {
    let s = with_buffer_counts(
        emptiness_cluster(vec![empty_node("node-0"), empty_node("node-1")]),
        &[("node-0", 1)],
    );
    let p = pass(&s);
    assert_eq!(only(&p).method, Method::Emptiness);
    assert_eq!(
        p.eligible_nodes,
        BTreeMap::from([(Method::Emptiness, 1)]),
        "node-0 hosts buffer pods"
    );
}

// ---------------------------------------------------------------------------------------------
// upstream `disruption/suite_test.go` suite_test.go Describe "Metrics": the decisions upstream
// counts (`voluntary_disruption_decisions_total{decision, reason, consolidation_type}`), asserted
// on the command (`Command::decision`, `Command::reason`, `Command::method`). NodePool
// WhenEmptyOrUnderutilized, consolidateAfter 0s, 100 %; three consolidatable nodes.
// ---------------------------------------------------------------------------------------------

/// A standalone pod (no owner) bound to `node`, as upstream's `test.Pods` makes them.
fn standalone_pod(node: &str, name: &str) -> Pod {
    let mut p = pod(node, name, "100m");
    p.owner = None;
    p
}

fn metrics_cluster(nodes: Vec<StateNode>) -> ClusterSnapshot {
    consolidation_cluster(nodes)
}

/// `(decision, reason, consolidation type)` as upstream labels the decision.
fn decision_labels(cmd: &Command) -> (&'static str, &'static str, &'static str) {
    let consolidation_type = match cmd.method {
        Method::Emptiness => "empty",
        Method::MultiNode => "multi",
        Method::SingleNode => "single",
        _ => "",
    };
    (
        cmd.decision(),
        match cmd.reason {
            Reason::Empty => "empty",
            Reason::Underutilized => "underutilized",
            Reason::Drifted => "drifted",
            Reason::Expired => "expired",
        },
        consolidation_type,
    )
}

#[test]
fn metrics_should_fire_metrics_for_single_node_empty_disruption() {
    let s = metrics_cluster(vec![node("node-0", "default", &it("small"), 0, "1")]);
    let p = pass(&s);
    assert_eq!(decision_labels(only(&p)), ("delete", "empty", "empty"));
    assert_eq!(only(&p).candidates[0].node_pool, "default");
}

/// A drifted node whose pods fit on the other node, which is not consolidatable: drift
/// deletes it.
#[test]
fn metrics_should_fire_metrics_for_single_node_delete_disruption() {
    let mut drifted = node("node-0", "default", &it("small"), 0, "1");
    drifted.pods = vec![
        standalone_pod("node-0", "pod-0"),
        standalone_pod("node-0", "pod-1"),
    ];
    set_condition(&mut drifted, "Drifted", ConditionStatus::True, CREATED);
    let mut other = node("node-1", "default", &it("small"), 0, "1");
    other.pods = vec![
        standalone_pod("node-1", "pod-2"),
        standalone_pod("node-1", "pod-3"),
    ];
    // Upstream clears the condition; an absent condition would be judged by the upstream
    // `nodeclaim/disruption/consolidation.go` rule here.
    set_condition(
        &mut other,
        "Consolidatable",
        ConditionStatus::False,
        CREATED,
    );
    let p = pass(&metrics_cluster(vec![drifted, other]));
    let cmd = only(&p);
    assert_eq!(decision_labels(cmd), ("delete", "drifted", ""));
    assert_eq!(names(cmd), ["node-0"]);
}

#[test]
fn metrics_should_fire_metrics_for_single_node_replace_disruption() {
    let mut drifted = node("node-0", "default", &it("small"), 0, "1");
    drifted.pods = (0..4)
        .map(|i| standalone_pod("node-0", &format!("pod-{i}")))
        .collect();
    set_condition(&mut drifted, "Drifted", ConditionStatus::True, CREATED);
    let p = pass(&metrics_cluster(vec![drifted]));
    assert_eq!(decision_labels(only(&p)), ("replace", "drifted", ""));
}

#[test]
fn metrics_should_fire_metrics_for_multi_node_empty_disruption() {
    let nodes = (0..3)
        .map(|i| node(&format!("node-{i}"), "default", &it("small"), 0, "1"))
        .collect();
    let p = pass(&metrics_cluster(nodes));
    let cmd = only(&p);
    assert_eq!(decision_labels(cmd), ("delete", "empty", "empty"));
    assert_eq!(cmd.candidates.len(), 3, "one decision for all three");
}

/// Sets the capacity type of a node (Node and NodeClaim labels) to spot.
fn spot(mut n: StateNode) -> StateNode {
    for node_labels in [
        n.node.as_mut().map(|k| &mut k.labels),
        n.node_claim.as_mut().map(|c| &mut c.metadata.labels),
    ]
    .into_iter()
    .flatten()
    {
        node_labels.insert(
            labels::CAPACITY_TYPE.to_string(),
            labels::CAPACITY_TYPE_SPOT.to_string(),
        );
    }
    n
}

/// Three nodes on the least expensive offering (spot small) with one small pod each: two are
/// deleted, their pods move to the third (merging all three into one more small node is not a
/// saving: filterOutSameInstanceType drops the candidates' own type).
#[test]
fn metrics_should_fire_metrics_for_multi_node_delete_disruption() {
    let nodes = (0..3)
        .map(|i| {
            spot(node(
                &format!("node-{i}"),
                "default",
                &it("small"),
                1,
                "100m",
            ))
        })
        .collect();
    let p = pass(&metrics_cluster(nodes));
    let cmd = only(&p);
    assert_eq!(decision_labels(cmd), ("delete", "underutilized", "multi"));
    assert_eq!(cmd.candidates.len(), 2);
}

/// Three most expensive nodes with one, one and two pods: merged into one cheaper node.
#[test]
fn metrics_should_fire_metrics_for_multi_node_replace_disruption() {
    let nodes = [1, 1, 2]
        .into_iter()
        .enumerate()
        .map(|(i, pods)| node(&format!("node-{i}"), "default", &it("xlarge"), pods, "1"))
        .collect();
    let p = pass(&metrics_cluster(nodes));
    let cmd = only(&p);
    assert_eq!(decision_labels(cmd), ("replace", "underutilized", "multi"));
    assert_eq!(cmd.candidates.len(), 3);
}

/// Upstream gives multi-node consolidation an already-expired context: no trial runs, nothing is
/// tainted. Here the caller's budget says time is up before the first trial: no command from
/// multi-node consolidation, and the pass reports the time-out. With the budget unlimited the
/// same cluster does consolidate (so the budget is what stopped it).
#[test]
fn metrics_should_stop_multi_node_consolidation_after_context_deadline_is_reached() {
    let cluster = || {
        metrics_cluster(
            [1, 1, 2]
                .into_iter()
                .enumerate()
                .map(|(i, pods)| node(&format!("node-{i}"), "default", &it("xlarge"), pods, "1"))
                .collect(),
        )
    };
    let expired = opts().with_multi_node_time_budget(TimeBudget::Candidates(0));
    let p = multi_node_pass(&cluster(), now(), &expired);
    assert!(p.commands.is_empty(), "{:?}", p.commands);
    assert!(p.multi_node_timed_out);

    // A deadline probe that has already passed behaves the same.
    let probe = opts().with_multi_node_time_budget(TimeBudget::Deadline(Arc::new(|| true)));
    let p = multi_node_pass(&cluster(), now(), &probe);
    assert!(p.commands.is_empty());
    assert!(p.multi_node_timed_out);

    // Time for one trial only: the search stops after it, keeping what it found.
    let one = opts().with_multi_node_time_budget(TimeBudget::Candidates(1));
    let p = multi_node_pass(&cluster(), now(), &one);
    assert!(p.multi_node_timed_out);
    assert!(p.commands.len() <= 1);

    let p = multi_node_pass(&cluster(), now(), &opts());
    assert!(!p.multi_node_timed_out);
    assert_eq!(only(&p).method, Method::MultiNode);
}

//! Rule-by-rule audit of spec `disruption.md` §4-§8 (see `docs/disruption-audit-4-8.md`): one
//! test per rule the scenario ports did not pin down and the audit found missing or wrong.

use std::collections::BTreeSet;

use jiff::Timestamp;
use karpenter_core::api::DisruptionReason;
use karpenter_core::lifecycle::queue::{
    self, Command, CommandCandidate, CommandQueue, QueueError, QueueOutcome,
};
use karpenter_core::lifecycle::{MetricOp, metric_names};

fn t0() -> Timestamp {
    "2024-01-01T00:00:00Z".parse().unwrap()
}

fn command(id: &str, candidates: &[&str], replacements: &[&str]) -> Command {
    Command {
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
// §4.2 StartCommand

/// §4.2 steps 4 and 8: a delete-only command whose marking partly failed proceeds with the
/// marked subset only, and only that subset is registered in the queue (an unmarked candidate
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

/// §4.2 step 4: a command with replacements aborts on any marking failure, and so does a
/// command none of whose candidates were marked; either leaves the queue.
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

/// §4.2 step 9: starting a command counts `voluntary_disruption_decisions_total` once and
/// `voluntary_disruption_decisions_by_nodepool_total` once per distinct NodePool.
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

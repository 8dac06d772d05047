//! Emptiness: delete empty candidates (no reschedulable pods), within their budgets.

use super::consolidation::savings;
use super::{Command, DisruptionOptions, Method, PassOutcome, Reason, should_empty};
use crate::api::DisruptionReason;
use crate::disruption::budgets::{BudgetMapping, PoolCounts};
use crate::disruption::candidates::{Candidate, check_buffer_pods, sort_by_savings_ratio};
use crate::model::Timestamp;
use crate::state::ClusterSnapshot;

pub(super) fn emptiness(
    snapshot: &ClusterSnapshot,
    counts: &PoolCounts,
    candidates: &[Candidate],
    now: Timestamp,
    out: &mut PassOutcome,
    options: &DisruptionOptions,
) {
    let mut cands: Vec<Candidate> = Vec::new();
    for c in candidates.iter().filter(|c| should_empty(snapshot, c, now)) {
        match check_buffer_pods(snapshot, c) {
            Ok(()) => cands.push(c.clone()),
            Err(e) => out.block(options, c.name(), || e.to_string()),
        }
    }
    out.eligible_nodes.insert(Method::Emptiness, cands.len());
    if cands.is_empty() {
        return;
    }
    sort_by_savings_ratio(&mut cands);
    let mut budgets =
        BudgetMapping::from_counts(counts, snapshot, DisruptionReason::Empty, now).remaining();
    let mut taken = Vec::new();
    let mut constrained = false;
    for c in cands {
        let b = budgets.entry(c.node_pool.clone()).or_insert(0);
        if *b == 0 {
            constrained = true;
            out.block(options, c.name(), || {
                crate::disruption::budgets::blocked_message(DisruptionReason::Empty)
            });
            continue;
        }
        *b -= 1;
        taken.push(c);
    }
    if taken.is_empty() {
        if !constrained {
            out.consolidated.insert(Method::Emptiness);
        }
        return;
    }
    let saving = savings(&taken, &[], &options.scheduler.label_policy);
    out.commands.push(Command {
        method: Method::Emptiness,
        reason: Reason::Empty,
        candidates: taken,
        replacements: Vec::new(),
        savings_per_hour: saving,
        simulation: None,
    });
}

//! Status-condition bookkeeping with upstream's semantics (operatorpkg `ConditionSet`).
//!
//! A condition set has a *root* condition (`Ready`) and *dependents* (for NodeClaims:
//! `Launched`, `Registered`, `Initialized`). Opening a set initializes every missing root or
//! dependent condition to `Unknown` (reason `AwaitingReconciliation`). Setting any non-root
//! condition recomputes the root:
//!
//! - every dependent `True` (and observed at the current generation) → root `True`, reason
//!   `Ready`;
//! - otherwise root `False` with reason `UnhealthyDependents` if some dependent is `False` at the
//!   current generation, else `Unknown` with reason `ReconcilingDependents`; the message lists
//!   the unhealthy dependents (`Launched=True, Registered=Unknown`), most recently changed first.
//!
//! A condition's `lastTransitionTime` changes whenever its status, reason or message changes
//! (and only then); its `observedGeneration` is set to the object's generation. Conditions are
//! kept sorted by type.

use jiff::SignedDuration;

use crate::api::{Condition, ConditionStatus, NodeClaim, find_condition};
use crate::model::Timestamp;

use super::{format_time, parse_time};

pub use crate::api::condition_types::{
    CONSISTENT_STATE_FOUND, CONSOLIDATABLE, DISRUPTION_REASON, DRAINED, DRIFTED, INITIALIZED,
    INSTANCE_TERMINATING, LAUNCHED, NODE_REGISTRATION_HEALTHY, READY, REGISTERED, VOLUMES_DETACHED,
};

/// The dependents of a NodeClaim's `Ready` condition.
pub const NODECLAIM_DEPENDENTS: [&str; 3] = [LAUNCHED, REGISTERED, INITIALIZED];

/// Reason of conditions initialized to `Unknown`.
pub const AWAITING_RECONCILIATION: &str = "AwaitingReconciliation";
/// Message of conditions initialized to `Unknown`.
pub const AWAITING_RECONCILIATION_MESSAGE: &str = "object is awaiting reconciliation";
/// Root reason when some dependent is `False`.
pub const UNHEALTHY_DEPENDENTS: &str = "UnhealthyDependents";
/// Root reason when dependents are `Unknown`.
pub const RECONCILING_DEPENDENTS: &str = "ReconcilingDependents";

/// A condition's `lastTransitionTime`, if set and valid.
pub fn last_transition(condition: &Condition) -> Option<Timestamp> {
    condition
        .last_transition_time
        .as_deref()
        .and_then(parse_time)
}

/// How long a condition has had its current status at `now` (`None` without a valid
/// `lastTransitionTime`).
pub fn age(condition: &Condition, now: Timestamp) -> Option<SignedDuration> {
    last_transition(condition).map(|t| now.duration_since(t))
}

/// The status of condition `type_` (`None` if absent).
pub fn status(conditions: &[Condition], type_: &str) -> Option<ConditionStatus> {
    find_condition(conditions, type_).map(|c| c.status)
}

/// Whether condition `type_` is present and `True`.
pub fn is_true(conditions: &[Condition], type_: &str) -> bool {
    status(conditions, type_) == Some(ConditionStatus::True)
}

/// Whether condition `type_` is absent or `Unknown` (the state in which a lifecycle step still
/// has work to do).
pub fn is_unknown(conditions: &[Condition], type_: &str) -> bool {
    matches!(
        status(conditions, type_),
        None | Some(ConditionStatus::Unknown)
    )
}

/// A mutable view of an object's conditions with a root and dependents.
#[derive(Debug)]
pub struct ConditionSet<'a> {
    conditions: &'a mut Vec<Condition>,
    generation: Option<i64>,
    now: Timestamp,
    root: &'static str,
    dependents: &'static [&'static str],
    changed: bool,
}

impl<'a> ConditionSet<'a> {
    /// Opens a set over `conditions`, initializing the root and every dependent that is missing
    /// to `Unknown`.
    pub fn new(
        conditions: &'a mut Vec<Condition>,
        generation: Option<i64>,
        root: &'static str,
        dependents: &'static [&'static str],
        now: Timestamp,
    ) -> Self {
        let mut set = ConditionSet {
            conditions,
            generation,
            now,
            root,
            dependents,
            changed: false,
        };
        for t in dependents.iter().copied().chain([root]) {
            if set.get(t).is_none() {
                set.set_unknown(t);
            }
        }
        set
    }

    /// Opens the set of a NodeClaim (root `Ready`, dependents `Launched`, `Registered`,
    /// `Initialized`).
    pub fn for_nodeclaim(claim: &'a mut NodeClaim, now: Timestamp) -> Self {
        let generation = claim.metadata.generation;
        ConditionSet::new(
            &mut claim.status.conditions,
            generation,
            READY,
            &NODECLAIM_DEPENDENTS,
            now,
        )
    }

    /// Whether any call so far changed a condition (initialization included).
    pub fn changed(&self) -> bool {
        self.changed
    }

    /// The condition of type `type_`.
    pub fn get(&self, type_: &str) -> Option<&Condition> {
        find_condition(self.conditions, type_)
    }

    /// Whether condition `type_` is `True`.
    pub fn is_true(&self, type_: &str) -> bool {
        is_true(self.conditions, type_)
    }

    /// Sets a condition; returns whether anything changed. `lastTransitionTime` moves to `now`
    /// only when status, reason or message change.
    pub fn set(
        &mut self,
        type_: &str,
        status: ConditionStatus,
        reason: &str,
        message: &str,
    ) -> bool {
        let modified = self.set_raw(type_, status, reason, message);
        if type_ != self.root {
            self.recompute_root();
        }
        modified
    }

    /// Sets `type_` to `True` with reason = the type and no message.
    pub fn set_true(&mut self, type_: &str) -> bool {
        self.set(type_, ConditionStatus::True, type_, "")
    }

    /// Sets `type_` to `True` with a reason and message.
    pub fn set_true_with_reason(&mut self, type_: &str, reason: &str, message: &str) -> bool {
        self.set(type_, ConditionStatus::True, reason, message)
    }

    /// Sets `type_` to `Unknown` with reason `AwaitingReconciliation`.
    pub fn set_unknown(&mut self, type_: &str) -> bool {
        self.set(
            type_,
            ConditionStatus::Unknown,
            AWAITING_RECONCILIATION,
            AWAITING_RECONCILIATION_MESSAGE,
        )
    }

    /// Sets `type_` to `Unknown` with a reason and message.
    pub fn set_unknown_with_reason(&mut self, type_: &str, reason: &str, message: &str) -> bool {
        self.set(type_, ConditionStatus::Unknown, reason, message)
    }

    /// Sets `type_` to `False` with a reason and message.
    pub fn set_false(&mut self, type_: &str, reason: &str, message: &str) -> bool {
        self.set(type_, ConditionStatus::False, reason, message)
    }

    /// Removes an abnormal condition (one that is neither the root nor a dependent); returns
    /// whether it was present. Normal conditions cannot be cleared and are left alone.
    pub fn clear(&mut self, type_: &str) -> bool {
        if type_ == self.root || self.dependents.contains(&type_) {
            return false;
        }
        let before = self.conditions.len();
        self.conditions.retain(|c| c.type_ != type_);
        let removed = self.conditions.len() != before;
        self.changed |= removed;
        removed
    }

    fn set_raw(
        &mut self,
        type_: &str,
        status: ConditionStatus,
        reason: &str,
        message: &str,
    ) -> bool {
        let reason = Some(reason.to_string());
        let message = (!message.is_empty()).then(|| message.to_string());
        let now = format_time(self.now);
        let generation = self.generation;
        let modified = match self.conditions.iter_mut().find(|c| c.type_ == type_) {
            Some(c) => {
                let same = c.status == status && c.reason == reason && c.message == message;
                if same && c.observed_generation == generation {
                    false
                } else {
                    if !same || c.last_transition_time.is_none() {
                        c.last_transition_time = Some(now);
                    }
                    c.status = status;
                    c.reason = reason;
                    c.message = message;
                    c.observed_generation = generation;
                    true
                }
            }
            None => {
                self.conditions.push(Condition {
                    type_: type_.to_string(),
                    status,
                    reason,
                    message,
                    last_transition_time: Some(now),
                    observed_generation: generation,
                });
                self.conditions.sort_by(|a, b| a.type_.cmp(&b.type_));
                true
            }
        };
        self.changed |= modified;
        modified
    }

    fn recompute_root(&mut self) {
        let generation = self.generation;
        let mut unhealthy: Vec<&Condition> = self
            .conditions
            .iter()
            .filter(|c| self.dependents.contains(&c.type_.as_str()))
            .filter(|c| c.status != ConditionStatus::True || c.observed_generation != generation)
            .collect();
        if unhealthy.is_empty() {
            let root = self.root;
            self.set_raw(root, ConditionStatus::True, root, "");
            return;
        }
        // Most recently changed first; ties by type for determinism.
        unhealthy.sort_by(|a, b| {
            last_transition(b)
                .cmp(&last_transition(a))
                .then_with(|| a.type_.cmp(&b.type_))
        });
        let any_false = unhealthy
            .iter()
            .any(|c| c.status == ConditionStatus::False && c.observed_generation == generation);
        let message = unhealthy
            .iter()
            .map(|c| format!("{}={}", c.type_, c.status.as_str()))
            .collect::<Vec<_>>()
            .join(", ");
        let (status, reason) = if any_false {
            (ConditionStatus::False, UNHEALTHY_DEPENDENTS)
        } else {
            (ConditionStatus::Unknown, RECONCILING_DEPENDENTS)
        };
        let root = self.root;
        self.set_raw(root, status, reason, &message);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{NodeClaimSpec, NodeClassReference};

    fn t(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn claim() -> NodeClaim {
        NodeClaim::new(
            "nc",
            NodeClaimSpec::new(NodeClassReference::new("g", "K", "n")),
        )
    }

    #[test]
    fn initializes_dependents_and_root_unknown() {
        let mut c = claim();
        let set = ConditionSet::for_nodeclaim(&mut c, t("2024-01-01T00:00:00Z"));
        assert!(set.changed());
        let types: Vec<_> = c
            .status
            .conditions
            .iter()
            .map(|c| c.type_.as_str())
            .collect();
        assert_eq!(types, ["Initialized", "Launched", "Ready", "Registered"]);
        for cond in &c.status.conditions {
            assert_eq!(cond.status, ConditionStatus::Unknown);
            assert_eq!(
                cond.last_transition_time.as_deref(),
                Some("2024-01-01T00:00:00Z")
            );
        }
        let ready = find_condition(&c.status.conditions, READY).unwrap();
        assert_eq!(ready.reason.as_deref(), Some(RECONCILING_DEPENDENTS));
    }

    #[test]
    fn root_true_when_all_dependents_true() {
        let mut c = claim();
        let mut set = ConditionSet::for_nodeclaim(&mut c, t("2024-01-01T00:00:00Z"));
        set.set_true(LAUNCHED);
        set.set_true(REGISTERED);
        assert!(!set.is_true(READY));
        set.set_true(INITIALIZED);
        assert!(set.is_true(READY));
        assert_eq!(set.get(READY).unwrap().reason.as_deref(), Some("Ready"));
        set.set_false(INITIALIZED, "X", "y");
        let ready = set.get(READY).unwrap();
        assert_eq!(ready.status, ConditionStatus::False);
        assert_eq!(ready.reason.as_deref(), Some(UNHEALTHY_DEPENDENTS));
        assert_eq!(ready.message.as_deref(), Some("Initialized=False"));
    }

    #[test]
    fn transition_time_moves_on_status_reason_or_message_change_only() {
        let mut c = claim();
        ConditionSet::for_nodeclaim(&mut c, t("2024-01-01T00:00:00Z")).set_unknown_with_reason(
            REGISTERED,
            "NodeNotFound",
            "m",
        );
        let ltt = |c: &NodeClaim| {
            find_condition(&c.status.conditions, REGISTERED)
                .unwrap()
                .last_transition_time
                .clone()
                .unwrap()
        };
        assert_eq!(ltt(&c), "2024-01-01T00:00:00Z");
        // Same status, reason, message: unchanged.
        let mut set = ConditionSet::for_nodeclaim(&mut c, t("2024-01-01T00:05:00Z"));
        assert!(!set.set_unknown_with_reason(REGISTERED, "NodeNotFound", "m"));
        assert_eq!(ltt(&c), "2024-01-01T00:00:00Z");
        // Message change: moves.
        let mut set = ConditionSet::for_nodeclaim(&mut c, t("2024-01-01T00:06:00Z"));
        assert!(set.set_unknown_with_reason(REGISTERED, "NodeNotFound", "other"));
        assert_eq!(ltt(&c), "2024-01-01T00:06:00Z");
        // Reason change: moves.
        let mut set = ConditionSet::for_nodeclaim(&mut c, t("2024-01-01T00:07:00Z"));
        assert!(set.set_unknown_with_reason(REGISTERED, "Hook", "other"));
        assert_eq!(ltt(&c), "2024-01-01T00:07:00Z");
    }

    #[test]
    fn clear_refuses_normal_conditions() {
        let mut c = claim();
        let mut set = ConditionSet::for_nodeclaim(&mut c, t("2024-01-01T00:00:00Z"));
        assert!(!set.clear(LAUNCHED));
        set.set_true_with_reason(DRIFTED, "NodePoolDrifted", "NodePoolDrifted");
        assert!(set.clear(DRIFTED));
        assert!(!set.clear(DRIFTED));
        assert!(set.get(LAUNCHED).is_some());
    }
}

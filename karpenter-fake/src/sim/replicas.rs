//! Two replicas of the controller with leader election on a Lease in the simulated API
//! ([`SimConfig::replicas`](super::SimConfig::replicas)), and the `pause` fault.
//!
//! Each replica is a shell around an [`Operator`] of its own, fed the same watch events, and
//! runs the election of [`karpenter_core::leader`] every retry period: read the Lease, decide,
//! write. Its shell follows the controller's rules exactly:
//!
//! - a follower's operator is fed every change but never synced, and whatever it asks for is
//!   dropped;
//! - a replica that wins the Lease syncs its operator and carries out its actions while it
//!   leads, that is until its last successful renewal's round started plus the renew deadline
//!   ([`Tenure`]); before every action it checks that, and when leadership has ended the
//!   process stops and restarts as a follower from fresh lists (same identity);
//! - a crash replaces the leader's pod: a new process, with a new identity, starts as a follower,
//!   so the other replica takes over once the Lease expires.
//!
//! A paused replica (`pause`, like SIGSTOP) does nothing: no renewals, no inputs, no actions;
//! watch events queue up for it. When it resumes after its renew deadline passed, it stops and
//! restarts as a follower, as the controller does.
//!
//! Every write and cloud call is checked against the Lease (the `non-leader-acted`
//! invariant): the replica carrying it out must be the Lease's holder at that instant, and no
//! other replica may be leading by its own rule then.

use std::collections::VecDeque;

use jiff::SignedDuration;
use karpenter_core::leader::{self, Decision, Observer, Tenure, Timing};
use karpenter_core::model::Timestamp;
use karpenter_core::operator::{Action, Input, Operator};

use super::{Sim, SimError, lifecycle_add};

/// Settings of a two-replica simulation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ReplicaConfig {
    /// The election's timing (client-go's defaults: lease 15 s, renew deadline 10 s, retry
    /// 2 s).
    pub timing: Timing,
    /// A seeded bug: the shells ignore the renew deadline (a replica that once led goes on
    /// acting until it learns otherwise). `false` follows the controller's rule.
    pub ignore_renew_deadline: bool,
}

/// A write or cloud call carried out by a replica that did not hold the Lease at that instant,
/// or while another replica was leading too.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NonLeaderAct {
    /// When.
    pub at: Timestamp,
    /// The replica that acted.
    pub replica: String,
    /// The Lease's holder then (empty: none).
    pub holder: String,
    /// Another replica leading by its own rule at that instant, if any.
    pub other_leader: Option<String>,
    /// The action.
    pub action: String,
}

/// One replica's shell state.
#[derive(Debug, Clone)]
struct ReplicaState {
    /// The replica's pod (its identity is the pod's name and process generation).
    base: String,
    identity: String,
    observer: Observer,
    tenure: Tenure,
    /// Its operator was synced: it leads (or led and has not noticed it stopped).
    leading: bool,
    next_round: Timestamp,
    paused_until: Option<Timestamp>,
    generation: u32,
}

/// The replicas of a simulation: the current one's operator and inbox are the simulation's
/// own fields (so the single-replica code paths drive it); the other's are parked here.
#[derive(Debug)]
pub(super) struct Replicas {
    config: ReplicaConfig,
    current: usize,
    parked_operator: Operator,
    parked_inbox: VecDeque<Input>,
    states: [ReplicaState; 2],
}

impl Replicas {
    pub(super) fn new(config: ReplicaConfig, operator: Operator, start: Timestamp) -> Replicas {
        let state = |base: &str| ReplicaState {
            base: base.to_string(),
            identity: base.to_string(),
            observer: Observer::default(),
            tenure: Tenure::default(),
            leading: false,
            next_round: start,
            paused_until: None,
            generation: 0,
        };
        Replicas {
            config,
            current: 0,
            parked_operator: operator,
            parked_inbox: VecDeque::new(),
            states: [state("karpenter-a"), state("karpenter-b")],
        }
    }

    /// Whether replica `i`'s shell lets it act at `now`.
    fn may_act(&self, i: usize, now: Timestamp) -> bool {
        let s = &self.states[i];
        s.leading
            && s.paused_until.is_none()
            && (self.config.ignore_renew_deadline || s.tenure.is_leading_at(now))
    }

    fn running(&self, i: usize) -> bool {
        self.states[i].paused_until.is_none()
    }

    fn inbox_len(&self, i: usize, own: &VecDeque<Input>) -> usize {
        if i == self.current {
            own.len()
        } else {
            self.parked_inbox.len()
        }
    }

    /// The replica that leads (synced), else the current one.
    fn leader(&self) -> usize {
        (0..2)
            .find(|&i| self.states[i].leading)
            .unwrap_or(self.current)
    }
}

/// What the shell does with the actions of the replica it just fed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Gate {
    /// One replica without election: carry everything out.
    All,
    /// A follower: drop everything.
    Drop,
    /// A leader: check leadership before every action.
    Leader,
}

/// Whether an action is a write or a cloud call (what only the leader may do).
fn acts(action: &Action) -> bool {
    !matches!(action, Action::WakeAt(_) | Action::Metric(_))
}

fn action_summary(action: &Action) -> String {
    let text = format!("{action:?}");
    text.chars().take(100).collect()
}

impl Sim {
    /// Pauses the leading replica (or the only one) for `d`, like SIGSTOP: no renewals, no
    /// inputs handled, no actions; watch events queue up for it.
    pub fn pause_leader(&mut self, d: SignedDuration) {
        let until = lifecycle_add(self.now, d);
        match self.replicas.as_deref_mut() {
            Some(r) => {
                let i = r.leader();
                r.states[i].paused_until = Some(until);
            }
            None => self.paused_until = Some(until),
        }
    }

    /// The identity of the replica holding the Lease (`None` with one replica, or before the
    /// first election).
    pub fn lease_holder(&self) -> Option<&str> {
        self.api
            .lease
            .as_ref()
            .map(|l| l.holder.as_str())
            .filter(|h| !h.is_empty())
    }

    /// The replicas' identities, in order (empty with one replica).
    pub fn replica_identities(&self) -> Vec<String> {
        self.replicas
            .as_deref()
            .map(|r| r.states.iter().map(|s| s.identity.clone()).collect())
            .unwrap_or_default()
    }

    /// The identity of the replica whose shell lets it act now, if any (with one replica:
    /// `None`).
    pub fn acting_replica(&self) -> Option<String> {
        let r = self.replicas.as_deref()?;
        (0..2)
            .find(|&i| r.may_act(i, self.now))
            .map(|i| r.states[i].identity.clone())
    }

    pub(super) fn gate(&self) -> Gate {
        match self.replicas.as_deref() {
            None => Gate::All,
            Some(r) if r.states[r.current].leading => Gate::Leader,
            Some(_) => Gate::Drop,
        }
    }

    /// Whether the current replica may still act now (see [`Gate::Leader`]).
    pub(super) fn current_may_act(&self) -> bool {
        self.replicas
            .as_deref()
            .is_none_or(|r| r.may_act(r.current, self.now))
    }

    /// Records a write or cloud call by a replica that does not hold the Lease, or while
    /// another replica leads too.
    pub(super) fn note_act(&mut self, action: &Action) {
        let Some(r) = self.replicas.as_deref() else {
            return;
        };
        if !acts(action) {
            return;
        }
        let me = &r.states[r.current].identity;
        let holder = self.lease_holder().unwrap_or_default().to_string();
        let other = 1 - r.current;
        let other_leader = r
            .may_act(other, self.now)
            .then(|| r.states[other].identity.clone());
        if holder != *me || other_leader.is_some() {
            self.observed.non_leader_acts.push(NonLeaderAct {
                at: self.now,
                replica: me.clone(),
                holder,
                other_leader,
                action: action_summary(action),
            });
        }
    }

    /// Hands a watch event to every replica.
    pub(super) fn push_watch(&mut self, input: Input) {
        if let Some(r) = self.replicas.as_deref_mut()
            && let Some(copy) = clone_watch(&input)
        {
            r.parked_inbox.push_back(copy);
        }
        self.inbox.push_back(input);
    }

    /// Hands the leader an input only it receives (an interruption message).
    pub(super) fn push_to_leader(&mut self, input: Input) {
        if let Some(i) = self.replicas.as_deref().map(Replicas::leader) {
            self.switch_to(i);
        }
        self.inbox.push_back(input);
    }

    /// Makes replica `i` the current one.
    fn switch_to(&mut self, i: usize) {
        if let Some(r) = self.replicas.as_deref_mut()
            && r.current != i
        {
            std::mem::swap(&mut self.operator, &mut r.parked_operator);
            std::mem::swap(&mut self.inbox, &mut r.parked_inbox);
            r.current = i;
        }
    }

    /// Starts both replicas as followers, fed the whole cluster; the election makes one lead.
    pub(super) fn start_replicas(&mut self) {
        self.drain_api_events();
        self.api.events.clear();
        for i in 0..2 {
            self.switch_to(i);
            self.inbox.clear();
            for input in self.api.list_all() {
                self.deliver(input);
            }
        }
        self.rounds_due();
    }

    /// Replica `i`'s process stops and a new one starts as a follower from fresh lists; with
    /// `new_pod`, under a new identity (its pod was replaced).
    fn restart_replica(&mut self, i: usize, new_pod: bool) {
        self.switch_to(i);
        self.restarts += 1;
        let now = self.now;
        if let Some(r) = self.replicas.as_deref_mut() {
            let s = &mut r.states[i];
            if new_pod {
                s.generation += 1;
                s.identity = format!("{}-{}", s.base, s.generation);
            }
            s.observer = Observer::default();
            s.tenure.end();
            s.leading = false;
            s.next_round = now;
        }
        let mut config = self.config.operator.clone();
        config.name_seed = config.name_seed.wrapping_add(self.restarts);
        self.operator = Operator::new(config);
        self.inbox.clear();
        for input in self.api.list_all() {
            self.deliver(input);
        }
    }

    /// A crash of the leading replica (or, without one, the current): its pod is replaced.
    pub(super) fn crash_replica(&mut self) {
        let Some(i) = self.replicas.as_deref().map(Replicas::leader) else {
            return;
        };
        self.restart_replica(i, true);
    }

    /// The current replica's leadership ended while it had actions to carry out: its process
    /// stops and restarts as a follower.
    pub(super) fn leadership_lost(&mut self) {
        if let Some(i) = self.replicas.as_deref().map(|r| r.current) {
            self.restart_replica(i, false);
        }
    }

    /// One election round of replica `i` at now.
    fn round(&mut self, i: usize) {
        let now = self.now;
        let Some(r) = self.replicas.as_deref_mut() else {
            return;
        };
        let timing = r.config.timing;
        let ignore_deadline = r.config.ignore_renew_deadline;
        let s = &mut r.states[i];
        s.next_round = lifecycle_add(now, timing.retry_period);
        let current = self.api.lease.clone();
        let unchanged = current
            .as_ref()
            .map(|l| s.observer.observe(l, now))
            .unwrap_or_default();
        let acquiring = match leader::decide(current.as_ref(), &s.identity, unchanged) {
            Decision::Follow { .. } => None,
            Decision::Create | Decision::Acquire => Some(true),
            Decision::Renew => Some(false),
        };
        if let Some(acquiring) = acquiring {
            self.api.lease = Some(leader::held(
                current.as_ref(),
                &s.identity,
                timing.lease_duration,
                now,
                acquiring,
            ));
            s.tenure.renewed(now, timing.renew_deadline);
            if !s.leading {
                s.leading = true;
                self.switch_to(i);
                self.deliver(Input::Synced);
            }
        } else if s.leading && !ignore_deadline && !s.tenure.is_leading_at(now) {
            self.restart_replica(i, false);
        }
    }

    /// Resumes paused replicas whose pause is over and runs the rounds due now.
    fn rounds_due(&mut self) {
        let now = self.now;
        for i in 0..2 {
            let Some(r) = self.replicas.as_deref_mut() else {
                return;
            };
            let s = &mut r.states[i];
            if s.paused_until.is_some_and(|t| t <= now) {
                s.paused_until = None;
                // The process finds its renew deadline passed: it stops and restarts.
                if s.leading && !r.config.ignore_renew_deadline && !s.tenure.is_leading_at(now) {
                    self.restart_replica(i, false);
                }
            }
        }
        for i in 0..2 {
            let due = self
                .replicas
                .as_deref()
                .is_some_and(|r| r.running(i) && r.states[i].next_round <= now);
            if due {
                self.round(i);
            }
        }
    }

    /// When replica `i` next needs the clock: its operator's wake-up while it leads, its next
    /// round, or the end of its pause.
    fn replica_next(&self, i: usize) -> Option<Timestamp> {
        let r = self.replicas.as_deref()?;
        let s = &r.states[i];
        if let Some(t) = s.paused_until {
            return Some(t);
        }
        let wakeup = if !s.leading {
            None
        } else if i == r.current {
            self.operator.next_wakeup()
        } else {
            r.parked_operator.next_wakeup()
        };
        [Some(s.next_round), wakeup].into_iter().flatten().min()
    }

    /// Wakes every running, leading replica whose operator asked to be woken by now (or, with
    /// `all`, whatever it asked).
    pub(super) fn tick_replicas(&mut self, all: bool) {
        let now = self.now;
        for i in 0..2 {
            let due = self.replicas.as_deref().is_some_and(|r| {
                let s = &r.states[i];
                let wakeup = if i == r.current {
                    self.operator.next_wakeup()
                } else {
                    r.parked_operator.next_wakeup()
                };
                r.running(i) && s.leading && (all || wakeup.is_some_and(|t| t <= now))
            });
            if due {
                self.switch_to(i);
                self.deliver(Input::Tick);
            }
        }
    }

    /// [`Sim::step`] with two replicas.
    pub(super) fn step_replicas(&mut self, deadline: Timestamp) -> Result<bool, SimError> {
        self.refresh_pdbs();
        let ready = self.replicas.as_deref().and_then(|r| {
            let order = [r.current, 1 - r.current];
            order
                .into_iter()
                .find(|&i| r.running(i) && r.inbox_len(i, &self.inbox) > 0)
        });
        if let Some(i) = ready {
            self.switch_to(i);
            if let Some(input) = self.inbox.pop_front() {
                self.inputs_at_instant += 1;
                if self.inputs_at_instant > self.config.max_inputs_per_instant {
                    return Err(SimError::Livelock {
                        at: self.now,
                        limit: self.config.max_inputs_per_instant,
                        due: Vec::new(),
                    });
                }
                self.deliver(input);
            }
            return Ok(true);
        }
        if self.bind_pending() {
            return Ok(true);
        }
        let world_next = self.world.keys().next().map(|(t, _)| *t);
        let next = [world_next, self.replica_next(0), self.replica_next(1)]
            .into_iter()
            .flatten()
            .min();
        if !self.advance(next, deadline)? {
            return Ok(false);
        }
        self.rounds_due();
        self.tick_replicas(false);
        Ok(true)
    }
}

/// A copy of a watch event (the other inputs answer one replica's own calls).
fn clone_watch(input: &Input) -> Option<Input> {
    Some(match input {
        Input::NodePoolApplied(o) => Input::NodePoolApplied(o.clone()),
        Input::NodePoolDeleted(n) => Input::NodePoolDeleted(n.clone()),
        Input::NodeClaimApplied(o) => Input::NodeClaimApplied(o.clone()),
        Input::NodeClaimDeleted(n) => Input::NodeClaimDeleted(n.clone()),
        Input::NodeApplied(o) => Input::NodeApplied(o.clone()),
        Input::NodeDeleted(n) => Input::NodeDeleted(n.clone()),
        Input::PodApplied(o) => Input::PodApplied(o.clone()),
        Input::PodDeleted(n) => Input::PodDeleted(n.clone()),
        Input::DaemonSetApplied(o) => Input::DaemonSetApplied(o.clone()),
        Input::DaemonSetDeleted(n) => Input::DaemonSetDeleted(n.clone()),
        Input::PdbApplied(o) => Input::PdbApplied(o.clone()),
        Input::PdbDeleted(n) => Input::PdbDeleted(n.clone()),
        Input::VolumeAttachmentApplied { name, node_name } => Input::VolumeAttachmentApplied {
            name: name.clone(),
            node_name: node_name.clone(),
        },
        Input::VolumeAttachmentDeleted(n) => Input::VolumeAttachmentDeleted(n.clone()),
        Input::NodeOverlayApplied(o) => Input::NodeOverlayApplied(o.clone()),
        Input::NodeOverlayDeleted(n) => Input::NodeOverlayDeleted(n.clone()),
        _ => return None,
    })
}

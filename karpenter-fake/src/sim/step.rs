//! One step of a seeded ([`super::chaos`]) or scripted ([`super::scripted`]) run, shared by both.

use karpenter_core::model::Timestamp;

use super::Sim;
use super::event::{Event, apply_event};

/// Why [`play_step`] stopped before the end of its step.
#[derive(Debug)]
pub(crate) enum StepStop<E> {
    /// The simulation stopped (a livelock).
    Sim(super::SimError),
    /// The check after an inner step failed.
    Check(E),
}

/// Plays one step of a seeded or scripted run: applies `events` ([`apply_event`]; an
/// [`Event::Crash`] arms a restart of the operator after that many inner steps), runs the
/// simulation until `deadline` one inner step at a time, calling `after_inner` after each,
/// restarts the operator where the crash falls (or at the end of the step, when the step had
/// fewer inner steps), and lifts the step's partial-fleet limit
/// ([`crate::FakeCloudProvider::allow_all_creates`]). Returns how many times the operator was
/// restarted.
pub(crate) fn play_step<E>(
    sim: &mut Sim,
    events: &[Event],
    deadline: Timestamp,
    mut after_inner: impl FnMut(&Sim) -> Result<(), E>,
) -> Result<usize, StepStop<E>> {
    let mut crash_after = None;
    for e in events {
        match e {
            Event::Crash { after } => crash_after = Some(*after),
            other => apply_event(sim, other),
        }
    }
    let mut restarts = 0;
    let mut inner = 0usize;
    loop {
        if crash_after == Some(inner) {
            sim.restart_operator();
            restarts += 1;
            crash_after = None;
        }
        let more = sim.step(deadline).map_err(StepStop::Sim)?;
        inner += 1;
        after_inner(sim).map_err(StepStop::Check)?;
        if !more {
            if sim.now() < deadline {
                sim.advance_to(deadline);
                continue;
            }
            break;
        }
    }
    if crash_after.is_some() {
        sim.restart_operator();
        restarts += 1;
    }
    sim.provider().allow_all_creates();
    Ok(restarts)
}

//! What happens during a step of a seeded ([`super::chaos`]) or scripted ([`super::scripted`])
//! run, a workload change or a fault ([`Event`]), and how it applies to a simulation
//! ([`apply_event`]). Public as `sim::chaos::Event` and `sim::chaos::apply_event`.

use std::fmt;

use jiff::SignedDuration;
use karpenter_core::operator::{InterruptionEvent, InterruptionKind};

use super::Sim;
use super::workload::Job;

/// Something that happens during a step: a workload change or a fault.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// A Deployment is scaled.
    Scale {
        /// The Deployment.
        deployment: String,
        /// Its new replica count.
        replicas: u32,
    },
    /// A Job arrives.
    JobArrives(Job),
    /// An offering runs out of capacity.
    Ice {
        /// Instance type.
        instance_type: String,
        /// Zone.
        zone: String,
        /// Capacity type.
        capacity_type: String,
    },
    /// The offering has capacity again.
    IceEnds {
        /// Instance type.
        instance_type: String,
        /// Zone.
        zone: String,
        /// Capacity type.
        capacity_type: String,
    },
    /// The next `calls` cloud calls are throttled.
    Throttle {
        /// How many.
        calls: usize,
    },
    /// The next `calls` cloud calls time out after taking effect.
    Timeout {
        /// How many.
        calls: usize,
    },
    /// Only `succeed` launches succeed during this step.
    PartialFleet {
        /// How many may succeed.
        succeed: usize,
    },
    /// The next launch never registers its node.
    LostLaunch,
    /// A user deletes the `pick`-th Node (modulo the number of Nodes, by name).
    DeleteNode {
        /// Which Node.
        pick: u64,
    },
    /// The `pick`-th Node vanishes behind the operator's back.
    RemoveNode {
        /// Which Node.
        pick: u64,
    },
    /// An interruption message for the `pick`-th launched NodeClaim's instance.
    Interrupt {
        /// What kind.
        kind: InterruptionKind,
        /// Which NodeClaim.
        pick: u64,
    },
    /// The controller crashes after `after` inner steps of this step, then restarts.
    Crash {
        /// Inner steps before the crash.
        after: usize,
    },
    /// The next `writes` updates the controller writes fail with 409 Conflict.
    Conflict {
        /// How many.
        writes: usize,
    },
    /// The next `writes` API writes fail with a server error.
    WriteError {
        /// How many.
        writes: usize,
    },
    /// Every watch event reaches the controller `lag_secs` late, for `lasting_secs`.
    WatchLag {
        /// The lag, in seconds.
        lag_secs: u64,
        /// How long the lag lasts, in seconds.
        lasting_secs: u64,
    },
    /// The controller's watches restart and list every object again.
    Relist,
    /// The leading replica stops for `secs` seconds (like SIGSTOP): no renewals, no inputs,
    /// no actions; its inputs queue up.
    Pause {
        /// How long, in seconds.
        secs: u64,
    },
}

impl Event {
    /// Whether this event is a fault (not a workload change).
    pub fn is_fault(&self) -> bool {
        !matches!(self, Event::Scale { .. } | Event::JobArrives(_))
    }
}

impl fmt::Display for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Event::Scale {
                deployment,
                replicas,
            } => write!(f, "scale {deployment} to {replicas}"),
            Event::JobArrives(j) => write!(
                f,
                "job {} arrives: {} pods of {}m/{}Mi for {}",
                j.name, j.pods, j.cpu_milli, j.memory_mib, j.run_for
            ),
            Event::Ice {
                instance_type,
                zone,
                capacity_type,
            } => write!(
                f,
                "insufficient capacity: {instance_type} {zone} {capacity_type}"
            ),
            Event::IceEnds {
                instance_type,
                zone,
                capacity_type,
            } => write!(f, "capacity back: {instance_type} {zone} {capacity_type}"),
            Event::Throttle { calls } => write!(f, "throttle the next {calls} cloud calls"),
            Event::Timeout { calls } => write!(f, "time out the next {calls} cloud calls"),
            Event::PartialFleet { succeed } => {
                write!(f, "partial fleet: {succeed} launches succeed this step")
            }
            Event::LostLaunch => write!(f, "the next launch never registers"),
            Event::DeleteNode { pick } => write!(f, "user deletes node #{pick}"),
            Event::RemoveNode { pick } => write!(f, "node #{pick} vanishes behind our back"),
            Event::Interrupt { kind, pick } => {
                write!(f, "{} for nodeclaim #{pick}", kind.as_str())
            }
            Event::Crash { after } => write!(f, "controller crash after {after} inner steps"),
            Event::Conflict { writes } => write!(f, "409 Conflict on the next {writes} updates"),
            Event::WriteError { writes } => {
                write!(f, "server error on the next {writes} API writes")
            }
            Event::WatchLag {
                lag_secs,
                lasting_secs,
            } => write!(f, "watch events {lag_secs} s late for {lasting_secs} s"),
            Event::Relist => write!(f, "the watches restart and relist"),
            Event::Pause { secs } => write!(f, "the leader stops for {secs} s"),
        }
    }
}

/// Applies one event to a simulation; a [`Event::Crash`] does nothing here (the step loop
/// restarts the operator after the event's inner steps).
pub fn apply_event(sim: &mut Sim, event: &Event) {
    match event {
        Event::Scale {
            deployment,
            replicas,
        } => {
            sim.scale_deployment(deployment, *replicas);
        }
        Event::JobArrives(job) => sim.add_job(job.clone()),
        Event::Ice {
            instance_type,
            zone,
            capacity_type,
        } => sim
            .provider()
            .fail_offering(instance_type, zone, capacity_type),
        Event::IceEnds {
            instance_type,
            zone,
            capacity_type,
        } => sim
            .provider()
            .recover_offering(instance_type, zone, capacity_type),
        Event::Throttle { calls } => {
            let now = sim.now();
            sim.observed
                .failed_calls
                .extend(std::iter::repeat_n(now, *calls));
            sim.provider().fail_next(*calls, || {
                karpenter_core::cloud::CloudProviderError::throttled(
                    "injected: request limit exceeded",
                )
            });
        }
        Event::Timeout { calls } => {
            let now = sim.now();
            sim.observed
                .failed_calls
                .extend(std::iter::repeat_n(now, *calls));
            sim.time_out_next_calls(*calls);
        }
        Event::PartialFleet { succeed } => sim.provider().fail_creates_after(*succeed),
        Event::LostLaunch => sim.lose_next_launches(1),
        Event::DeleteNode { pick } => {
            if let Some(name) = nth(sim.api().nodes.keys(), *pick) {
                sim.delete_node_as_user(&name);
            }
        }
        Event::RemoveNode { pick } => {
            if let Some(name) = nth(sim.api().nodes.keys(), *pick) {
                sim.remove_node_behind_back(&name);
            }
        }
        Event::Interrupt { kind, pick } => {
            let pids: Vec<String> = sim
                .api()
                .node_claims
                .values()
                .filter_map(|c| c.status.provider_id.clone())
                .collect();
            if let Some(pid) = nth(pids.iter(), *pick) {
                if *kind != InterruptionKind::RebalanceRecommendation {
                    sim.observed.involuntary.insert(pid.clone());
                }
                sim.interrupt(InterruptionEvent::new(*kind, pid));
            }
        }
        Event::Crash { .. } => {}
        Event::Conflict { writes } => sim.conflict_next_updates(*writes),
        Event::WriteError { writes } => sim.fail_next_writes(*writes),
        Event::WatchLag {
            lag_secs,
            lasting_secs,
        } => sim.lag_watch(
            SignedDuration::from_secs(i64::try_from(*lag_secs).unwrap_or(60)),
            SignedDuration::from_secs(i64::try_from(*lasting_secs).unwrap_or(60)),
        ),
        Event::Relist => sim.relist(),
        Event::Pause { secs } => {
            sim.pause_leader(SignedDuration::from_secs(
                i64::try_from(*secs).unwrap_or(60),
            ));
        }
    }
}

fn nth<'a>(items: impl ExactSizeIterator<Item = &'a String>, pick: u64) -> Option<String> {
    let n = items.len() as u64;
    if n == 0 {
        return None;
    }
    let mut items = items;
    items.nth(usize::try_from(pick % n).unwrap_or(0)).cloned()
}

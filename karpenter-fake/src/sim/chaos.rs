//! Chaos runs: a seeded workload and seeded faults played against the operator loops through
//! the simulator, with every invariant checked after every step.
//!
//! A [`Scenario`] is generated from a seed ([`Scenario::generate`]): NodePools (budgets,
//! consolidation settings, sometimes limits), Deployments (some with PodDisruptionBudgets, some
//! with do-not-disrupt pods), DaemonSets, and for every step the things that happen during it:
//! Deployments scaling, Jobs arriving, and the faults of [`FaultRates`]. [`run`] plays it: each
//! step applies its events, lets the simulation run for [`ChaosConfig::step`] of virtual time
//! (a crash restarts the operator between two of the simulator's inner steps), and checks the
//! [`Violation`] list. A failure names the seed, the step and the invariant, and carries the
//! events that still reproduce it after shrinking ([`Failure`]); [`replay`] runs one seed again.
//!
//! ```
//! use karpenter_fake::sim::chaos::{ChaosConfig, FaultRates, run_seed};
//!
//! let config = ChaosConfig { steps: 60, faults: FaultRates::default_on(), ..ChaosConfig::default() };
//! let report = run_seed(7, &config).expect("every invariant holds");
//! assert_eq!(report.steps, 60);
//! ```

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use jiff::SignedDuration;
use karpenter_core::api::{Budget, ConsolidationPolicy, NillableDuration};
use karpenter_core::labels;
use karpenter_core::model::{IntOrPercent, Timestamp};
use karpenter_core::operator::InterruptionKind;
use karpenter_core::resources::{Quantity, ResourceList};

pub use super::event::{Event, apply_event};
pub use super::invariants::Violation;
use super::invariants::{Bounds, Checker};
pub use super::rng::SimRng;
use super::step::{StepStop, play_step};
use super::workload::{Deployment, Job, daemonset};
use super::{Sim, SimConfig, node_pool};
use crate::FakeCloudProvider;

/// The probability of each fault per step.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FaultRates {
    /// `ice`: an offering (instance type, zone, capacity type) runs out of capacity for 5 to
    /// 30 steps.
    pub ice: f64,
    /// `throttle`: the next 1 to 5 cloud calls fail with a throttling error.
    pub throttle: f64,
    /// `timeout`: the next 1 or 2 cloud calls take effect but answer with a timeout.
    pub timeout: f64,
    /// `partial-fleet`: during the step only 0 to 2 launches succeed; the others fail.
    pub partial_fleet: f64,
    /// `lost-launch`: the next launch succeeds but its node never registers.
    pub lost_launch: f64,
    /// `node-delete`: a user deletes a Node through the API (`kubectl delete node`).
    pub node_delete: f64,
    /// `node-remove`: a Node object vanishes behind the operator's back (finalizers bypassed);
    /// its pods are deleted and its kubelet registers it again.
    pub node_remove: f64,
    /// `interrupt`: a spot interruption, rebalance recommendation or instance termination
    /// message for one node's instance.
    pub interrupt: f64,
    /// `crash`: the controller crashes between two inner steps of the step and restarts from
    /// the cluster's state alone.
    pub crash: f64,
    /// `conflict`: the next 1 to 3 updates the controller writes (NodeClaims, Node patches,
    /// NodePool status) fail with 409 Conflict, as when another writer got there first.
    pub conflict: f64,
    /// `write-error`: the next 1 to 3 API writes fail with a server error (nothing written).
    pub write_error: f64,
    /// `watch-lag`: for 1 to 5 minutes every watch event reaches the controller 5 to 60 s
    /// late (in order).
    pub watch_lag: f64,
    /// `relist`: the controller's watches restart and list every object again (events held
    /// back by a lag are replaced by the list).
    pub relist: f64,
    /// `pause`: the leading replica stops for 20 to 60 s (like SIGSTOP): no lease renewals,
    /// no inputs handled, no actions; its inputs queue up. With two replicas the other one
    /// takes over once the Lease expires, and the paused one, when it resumes, finds its renew
    /// deadline passed, restarts and follows.
    pub pause: f64,
}

/// The fault names [`FaultRates::parse`] accepts, in order.
pub const FAULT_NAMES: [&str; 14] = [
    "ice",
    "throttle",
    "timeout",
    "partial-fleet",
    "lost-launch",
    "node-delete",
    "node-remove",
    "interrupt",
    "crash",
    "conflict",
    "write-error",
    "watch-lag",
    "relist",
    "pause",
];

/// A `--faults` specification that could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FaultSpecError {
    /// An unknown fault name.
    #[error("unknown fault {name:?} (known: none, default, {})", FAULT_NAMES.join(", "))]
    UnknownFault {
        /// The name given.
        name: String,
    },
    /// A rate that is not a number in 0..=1.
    #[error("fault {name:?}: rate {value:?} is not a number between 0 and 1")]
    BadRate {
        /// The fault.
        name: String,
        /// The text given.
        value: String,
    },
}

impl FaultRates {
    /// No faults.
    pub fn none() -> Self {
        FaultRates {
            ice: 0.0,
            throttle: 0.0,
            timeout: 0.0,
            partial_fleet: 0.0,
            lost_launch: 0.0,
            node_delete: 0.0,
            node_remove: 0.0,
            interrupt: 0.0,
            crash: 0.0,
            conflict: 0.0,
            write_error: 0.0,
            watch_lag: 0.0,
            relist: 0.0,
            pause: 0.0,
        }
    }

    /// The rates of the reliability suite: every fault, often enough that 2,000 one-minute
    /// steps see each one many times.
    pub fn default_on() -> Self {
        FaultRates {
            ice: 0.03,
            throttle: 0.03,
            timeout: 0.02,
            partial_fleet: 0.02,
            lost_launch: 0.01,
            node_delete: 0.005,
            node_remove: 0.005,
            interrupt: 0.01,
            crash: 0.01,
            ..FaultRates::shell_rates()
        }
    }

    /// The rates of the shell's faults (`conflict`, `write-error`, `watch-lag`, `relist`, `pause`) when
    /// named without a rate: `default,conflict,write-error,watch-lag,relist` turns them all on.
    pub fn shell_rates() -> Self {
        FaultRates {
            conflict: 0.02,
            write_error: 0.02,
            watch_lag: 0.01,
            relist: 0.01,
            pause: 0.005,
            ..FaultRates::none()
        }
    }

    fn slot(&mut self, name: &str) -> Option<&mut f64> {
        Some(match name {
            "ice" => &mut self.ice,
            "throttle" => &mut self.throttle,
            "timeout" => &mut self.timeout,
            "partial-fleet" => &mut self.partial_fleet,
            "lost-launch" => &mut self.lost_launch,
            "node-delete" => &mut self.node_delete,
            "node-remove" => &mut self.node_remove,
            "interrupt" => &mut self.interrupt,
            "crash" => &mut self.crash,
            "conflict" => &mut self.conflict,
            "write-error" => &mut self.write_error,
            "watch-lag" => &mut self.watch_lag,
            "relist" => &mut self.relist,
            "pause" => &mut self.pause,
            _ => return None,
        })
    }

    /// Reads a specification: `none`, `default` ([`FaultRates::default_on`]), or a
    /// comma-separated list of `name=rate` (per step, 0..=1) and `name` (its default rate),
    /// starting from no faults: `crash=0.05,ice`. A list may start with `default` to change
    /// some rates of the defaults: `default,crash=0`.
    pub fn parse(spec: &str) -> Result<Self, FaultSpecError> {
        let mut rates = FaultRates::none();
        let defaults = FaultRates::default_on();
        for part in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (name, value) = match part.split_once('=') {
                Some((n, v)) => (n.trim(), Some(v.trim())),
                None => (part, None),
            };
            match (name, value) {
                ("none", None) => rates = FaultRates::none(),
                ("default" | "all", None) => rates = defaults,
                _ => {
                    let default = *defaults.clone().slot(name).ok_or_else(|| {
                        FaultSpecError::UnknownFault {
                            name: name.to_string(),
                        }
                    })?;
                    let default = if default > 0.0 {
                        default
                    } else {
                        FaultRates::shell_rates().slot(name).map_or(0.0, |r| *r)
                    };
                    let rate = match value {
                        None => default,
                        Some(v) => v
                            .parse::<f64>()
                            .ok()
                            .filter(|r| (0.0..=1.0).contains(r))
                            .ok_or_else(|| FaultSpecError::BadRate {
                                name: name.to_string(),
                                value: v.to_string(),
                            })?,
                    };
                    if let Some(slot) = rates.slot(name) {
                        *slot = rate;
                    }
                }
            }
        }
        Ok(rates)
    }
}

impl Default for FaultRates {
    fn default() -> Self {
        FaultRates::default_on()
    }
}

impl fmt::Display for FaultRates {
    /// The specification [`FaultRates::parse`] reads back.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut copy = *self;
        let parts: Vec<String> = FAULT_NAMES
            .iter()
            .filter_map(|n| {
                let r = *copy.slot(n)?;
                (r > 0.0).then(|| format!("{n}={r}"))
            })
            .collect();
        if parts.is_empty() {
            f.write_str("none")
        } else {
            f.write_str(&parts.join(","))
        }
    }
}

/// What a scenario starts with.
#[derive(Debug, Clone)]
pub struct Setup {
    /// The NodePools.
    pub node_pools: Vec<karpenter_core::api::NodePool>,
    /// Deployments with their initial replica counts.
    pub deployments: Vec<(Deployment, u32)>,
    /// DaemonSets.
    pub daemonsets: Vec<karpenter_core::model::DaemonSet>,
    /// The instance types the provider offers.
    pub instance_types: Vec<Arc<karpenter_core::model::InstanceType>>,
}

/// A seeded scenario: a setup and the events of every step.
#[derive(Debug, Clone)]
pub struct Scenario {
    /// The seed it was generated from.
    pub seed: u64,
    /// The faults it was generated with.
    pub faults: FaultRates,
    /// The starting point.
    pub setup: Setup,
    /// The events of each step, in order.
    pub steps: Vec<Vec<Event>>,
}

/// Settings of a chaos run.
#[derive(Debug, Clone)]
pub struct ChaosConfig {
    /// Steps to run.
    pub steps: usize,
    /// Virtual time per step.
    pub step: SignedDuration,
    /// Fault rates.
    pub faults: FaultRates,
    /// How long an instance may stay unreferenced by any NodeClaim: the garbage collection's
    /// period twice (a collection pass a fault made fail is retried one period later) plus its
    /// grace period; one more period is allowed for each cloud call made to fail (throttled or
    /// timed out) from one bound before the instance was first seen unreferenced.
    pub leak_bound: SignedDuration,
    /// How long a pod may stay pending without being bound or reported unschedulable, plus
    /// one registration timeout (upstream's 15 minutes) for each launch that never registers
    /// while it waits (its NodeClaim holds the pod's nomination until it times out).
    pub pending_bound: SignedDuration,
    /// How many re-runs shrinking a failure may take.
    pub max_shrink_runs: usize,
    /// The simulator's settings.
    pub sim: SimConfig,
}

impl Default for ChaosConfig {
    fn default() -> Self {
        let sim = SimConfig {
            max_inputs_per_instant: 20_000,
            ..SimConfig::default()
        };
        let op = &sim.operator;
        let leak_bound = op.gc_period + op.gc_period + op.instance_gc_grace;
        ChaosConfig {
            steps: 2_000,
            step: SignedDuration::from_mins(1),
            faults: FaultRates::default_on(),
            leak_bound,
            pending_bound: SignedDuration::from_mins(10),
            max_shrink_runs: 40,
            sim,
        }
    }
}

/// What a run did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Report {
    /// Steps run.
    pub steps: usize,
    /// Virtual time covered.
    pub simulated: SignedDuration,
    /// Inputs the operator handled.
    pub inputs: u64,
    /// Events played, by kind (`scale`, `job`, and the fault names).
    pub events: BTreeMap<String, usize>,
    /// Operator restarts.
    pub restarts: usize,
    /// Instances launched.
    pub launches: usize,
    /// The most nodes at once.
    pub peak_nodes: usize,
    /// Cost of the instances over the run (price per hour × hours).
    pub cost: f64,
    /// Cost per step (price per hour of the instances running at the end of each step).
    pub hourly_cost: Vec<f64>,
}

/// A run in which an invariant did not hold.
#[derive(Debug, Clone)]
pub struct Failure {
    /// The seed.
    pub seed: u64,
    /// The fault rates.
    pub faults: FaultRates,
    /// Steps of the run.
    pub steps: usize,
    /// The step after which the invariant was found broken (0-based).
    pub step: usize,
    /// The virtual time then.
    pub at: Timestamp,
    /// What broke.
    pub violation: Violation,
    /// The events (step, event) that still reproduce the failure after shrinking.
    pub trace: Vec<(usize, Event)>,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "seed {} broke invariant `{}` at step {} ({}): {}",
            self.seed,
            self.violation.invariant(),
            self.step,
            self.at,
            self.violation
        )?;
        writeln!(
            f,
            "minimal trace ({} events that still reproduce it):",
            self.trace.len()
        )?;
        for (step, e) in &self.trace {
            writeln!(f, "  step {step:>5}: {e}")?;
        }
        write!(
            f,
            "replay: KARPENTER_CHAOS_SEED={} KARPENTER_CHAOS_STEPS={} KARPENTER_CHAOS_FAULTS={} \
             cargo test -p karpenter-fake --test it sim_chaos::replay_one_seed -- --ignored --nocapture",
            self.seed,
            self.step + 1,
            self.faults
        )
    }
}

const CATALOG_SIZE: usize = 8;

impl Scenario {
    /// The scenario of `seed`: `steps` steps with `faults`.
    pub fn generate(seed: u64, steps: usize, faults: FaultRates) -> Scenario {
        let mut rng = SimRng::new(seed);
        let mut shell_rng = SimRng::new(seed ^ SHELL_FAULT_STREAM);
        let mut pause_rng = SimRng::new(seed ^ PAUSE_FAULT_STREAM);
        let instance_types = crate::catalog::instance_types(CATALOG_SIZE);
        let setup = generate_setup(&mut rng);
        let names: Vec<String> = setup
            .deployments
            .iter()
            .map(|(d, _)| d.name.clone())
            .collect();
        let mut out: Vec<Vec<Event>> = vec![Vec::new(); steps];
        let mut jobs = 0u64;
        for step in 0..steps {
            let mut events = Vec::new();
            if rng.chance(0.15) && !names.is_empty() {
                events.push(Event::Scale {
                    deployment: rng.pick(&names).clone(),
                    replicas: u32::try_from(rng.range(0, 12)).unwrap_or(0),
                });
            }
            if rng.chance(0.05) {
                jobs += 1;
                let mut job = Job::new(
                    format!("job-{jobs}"),
                    u32::try_from(rng.range(1, 4)).unwrap_or(1),
                    i64::try_from(rng.range(1, 8) * 250).unwrap_or(250),
                    i64::try_from(rng.range(1, 8) * 256).unwrap_or(256),
                    SignedDuration::from_mins(i64::try_from(rng.range(2, 45)).unwrap_or(5)),
                );
                if rng.chance(0.3) {
                    job = job.with_do_not_disrupt();
                }
                events.push(Event::JobArrives(job));
            }
            events.extend(fault_events(
                &mut rng,
                &faults,
                &instance_types,
                &crate::catalog::ZONES,
                step,
                steps,
                &mut out,
            ));
            events.extend(shell_fault_events(&mut shell_rng, &faults));
            events.extend(pause_events(&mut pause_rng, &faults));
            out[step].splice(0..0, events);
        }
        Scenario {
            seed,
            faults,
            setup: Setup {
                instance_types,
                ..setup
            },
            steps: out,
        }
    }

    /// Every event with its step.
    pub fn trace(&self) -> Vec<(usize, Event)> {
        self.steps
            .iter()
            .enumerate()
            .flat_map(|(i, es)| es.iter().map(move |e| (i, e.clone())))
            .collect()
    }

    fn with_trace(&self, trace: &[(usize, Event)], steps: usize) -> Scenario {
        let mut out = vec![Vec::new(); steps];
        for (i, e) in trace {
            if *i < steps {
                out[*i].push(e.clone());
            }
        }
        Scenario {
            steps: out,
            ..self.clone()
        }
    }
}

/// The faults of one step drawn from `rng` at `faults`' rates: the events of step `step` (of
/// `steps`) in the order [`Scenario::generate`] draws them. An insufficient-capacity event
/// picks an offering of `instance_types` (not empty) in one of `zones` and schedules its end into `later`
/// (indexed by step) when that falls within the run. A [`Event::Crash`] is for the step loop
/// to carry out (see [`apply_event`]).
pub fn fault_events(
    rng: &mut SimRng,
    faults: &FaultRates,
    instance_types: &[Arc<karpenter_core::model::InstanceType>],
    zones: &[&str],
    step: usize,
    steps: usize,
    later: &mut [Vec<Event>],
) -> Vec<Event> {
    let mut events = Vec::new();
    let out = later;
    if rng.chance(faults.ice) {
        let it = rng.pick(instance_types).name().to_string();
        let zone = rng.pick(zones).to_string();
        let ct = rng
            .pick(&[labels::CAPACITY_TYPE_SPOT, labels::CAPACITY_TYPE_ON_DEMAND])
            .to_string();
        let end = step + usize::try_from(rng.range(5, 30)).unwrap_or(5);
        if end < steps {
            out[end].push(Event::IceEnds {
                instance_type: it.clone(),
                zone: zone.clone(),
                capacity_type: ct.clone(),
            });
        }
        events.push(Event::Ice {
            instance_type: it,
            zone,
            capacity_type: ct,
        });
    }
    if rng.chance(faults.throttle) {
        let calls = usize::try_from(rng.range(1, 5)).unwrap_or(1);
        events.push(Event::Throttle { calls });
    }
    if rng.chance(faults.timeout) {
        let calls = usize::try_from(rng.range(1, 2)).unwrap_or(1);
        events.push(Event::Timeout { calls });
    }
    if rng.chance(faults.partial_fleet) {
        let succeed = usize::try_from(rng.range(0, 2)).unwrap_or(0);
        events.push(Event::PartialFleet { succeed });
    }
    if rng.chance(faults.lost_launch) {
        events.push(Event::LostLaunch);
    }
    if rng.chance(faults.node_delete) {
        events.push(Event::DeleteNode {
            pick: rng.next_u64(),
        });
    }
    if rng.chance(faults.node_remove) {
        events.push(Event::RemoveNode {
            pick: rng.next_u64(),
        });
    }
    if rng.chance(faults.interrupt) {
        let kind = *rng.pick(&[
            InterruptionKind::SpotInterrupted,
            InterruptionKind::SpotInterrupted,
            InterruptionKind::RebalanceRecommendation,
            InterruptionKind::InstanceTerminated,
        ]);
        events.push(Event::Interrupt {
            kind,
            pick: rng.next_u64(),
        });
    }
    if rng.chance(faults.crash) {
        let after = usize::try_from(rng.range(0, 40)).unwrap_or(0);
        events.push(Event::Crash { after });
    }
    events
}

/// Mixed into a scenario's seed for the random stream of the shell's faults
/// ([`shell_fault_events`]), so adding them left every other event of a seed unchanged.
pub const SHELL_FAULT_STREAM: u64 = 0x5348_454c_4c00_0001;

/// The faults of one step that live in the controller's shell: API conflicts and write
/// errors, a lagging watch, a relist. Drawn from their own stream (see
/// [`SHELL_FAULT_STREAM`]); a rate of 0 draws nothing.
pub fn shell_fault_events(rng: &mut SimRng, faults: &FaultRates) -> Vec<Event> {
    let mut events = Vec::new();
    let mut draw = |rate: f64| rate > 0.0 && rng.chance(rate);
    let conflict = draw(faults.conflict);
    let write_error = draw(faults.write_error);
    let watch_lag = draw(faults.watch_lag);
    let relist = draw(faults.relist);
    if conflict {
        let writes = usize::try_from(rng.range(1, 3)).unwrap_or(1);
        events.push(Event::Conflict { writes });
    }
    if write_error {
        let writes = usize::try_from(rng.range(1, 3)).unwrap_or(1);
        events.push(Event::WriteError { writes });
    }
    if watch_lag {
        events.push(Event::WatchLag {
            lag_secs: rng.range(5, 60),
            lasting_secs: rng.range(1, 5) * 60,
        });
    }
    if relist {
        events.push(Event::Relist);
    }
    events
}

/// Mixed into a scenario's seed for the random stream of the `pause` fault
/// ([`pause_events`]), so adding it left every other event of a seed unchanged.
pub const PAUSE_FAULT_STREAM: u64 = 0x5041_5553_4500_0001;

/// The `pause` fault of one step: the leader stops for 20 to 60 s. Drawn from its own stream
/// (see [`PAUSE_FAULT_STREAM`]); a rate of 0 draws nothing.
pub fn pause_events(rng: &mut SimRng, faults: &FaultRates) -> Vec<Event> {
    if faults.pause > 0.0 && rng.chance(faults.pause) {
        vec![Event::Pause {
            secs: rng.range(20, 60),
        }]
    } else {
        Vec::new()
    }
}

fn generate_setup(rng: &mut SimRng) -> Setup {
    let mut default = node_pool("default");
    let budget = rng
        .pick(&["10%", "20%", "50%", "1", "2", "100%"])
        .to_string();
    default.spec.disruption.budgets = Some(vec![Budget::nodes(budget)]);
    default.spec.disruption.consolidation_policy = Some(if rng.chance(0.8) {
        ConsolidationPolicy::WhenEmptyOrUnderutilized
    } else {
        ConsolidationPolicy::WhenEmpty
    });
    let after = rng.pick(&["0s", "30s", "2m", "5m"]);
    default.spec.disruption.consolidate_after = NillableDuration::parse(after).ok();
    let mut node_pools = vec![default];
    if rng.chance(0.5) {
        // A capped pool preferred over an uncapped one: pods overflow when the cap is reached.
        let mut capped = node_pool("capped");
        let mut limits = ResourceList::new();
        let cpus = i64::try_from(rng.range(4, 24)).unwrap_or(8);
        limits.insert("cpu", Quantity::from_units(cpus));
        capped.spec.limits = Some(limits);
        capped.spec.weight = Some(10);
        capped.spec.disruption.budgets = Some(vec![Budget::nodes("1")]);
        node_pools.push(capped);
    }
    let mut deployments = Vec::new();
    for i in 0..rng.range(3, 6) {
        let mut d = Deployment::new(
            format!("app-{i}"),
            i64::try_from(rng.range(1, 20) * 100).unwrap_or(100),
            i64::try_from(rng.range(1, 16) * 256).unwrap_or(256),
        );
        if rng.chance(0.2) {
            d = d.with_do_not_disrupt();
        }
        if rng.chance(0.4) {
            d = match rng.range(0, 3) {
                0 => d.with_min_available(IntOrPercent::Percent(50)),
                1 => d.with_max_unavailable(IntOrPercent::Int(1)),
                2 => d.with_min_available(IntOrPercent::Int(2)),
                _ => d.with_max_unavailable(IntOrPercent::Int(0)),
            };
        }
        let replicas = u32::try_from(rng.range(0, 8)).unwrap_or(0);
        deployments.push((d, replicas));
    }
    let mut daemonsets = vec![daemonset("node-agent", 100, 128)];
    if rng.chance(0.5) {
        daemonsets.push(daemonset("log-shipper", 50, 64));
    }
    Setup {
        node_pools,
        deployments,
        daemonsets,
        instance_types: Vec::new(),
    }
}

/// Builds the simulation of a setup (started).
pub fn build_sim(setup: &Setup, config: &SimConfig) -> Sim {
    let provider = Arc::new(FakeCloudProvider::new());
    // The invariants read the provider's instances, never its call log, which a long run
    // would fill memory with.
    provider.set_call_log(false);
    provider.set_instance_types(setup.instance_types.clone());
    let mut sim = Sim::with_provider(config.clone(), provider);
    for np in &setup.node_pools {
        sim.apply_node_pool(np.clone());
    }
    for ds in &setup.daemonsets {
        sim.add_daemonset(ds.clone());
    }
    for (d, replicas) in &setup.deployments {
        let name = d.name.clone();
        sim.add_deployment(d.clone());
        sim.scale_deployment(&name, *replicas);
    }
    sim.start();
    sim
}

fn event_kind(e: &Event) -> &'static str {
    match e {
        Event::Scale { .. } => "scale",
        Event::JobArrives(_) => "job",
        Event::Ice { .. } => "ice",
        Event::IceEnds { .. } => "ice-ends",
        Event::Throttle { .. } => "throttle",
        Event::Timeout { .. } => "timeout",
        Event::PartialFleet { .. } => "partial-fleet",
        Event::LostLaunch => "lost-launch",
        Event::DeleteNode { .. } => "node-delete",
        Event::RemoveNode { .. } => "node-remove",
        Event::Interrupt { .. } => "interrupt",
        Event::Crash { .. } => "crash",
        Event::Conflict { .. } => "conflict",
        Event::WriteError { .. } => "write-error",
        Event::WatchLag { .. } => "watch-lag",
        Event::Relist => "relist",
        Event::Pause { .. } => "pause",
    }
}

/// Plays `scenario` for `config.steps` steps (at most its length) and checks the invariants
/// after every step. Panics inside the operator are caught and reported as
/// [`Violation::Panic`].
pub fn play(
    scenario: &Scenario,
    config: &ChaosConfig,
) -> Result<Report, (usize, Timestamp, Violation)> {
    play_observed(scenario, config, |_, _| {})
}

/// [`play`], calling `observe` with the step's index and the simulation after each step's
/// invariants held (to sample the cluster over a run: its pods, nodes and cost).
pub fn play_observed(
    scenario: &Scenario,
    config: &ChaosConfig,
    mut observe: impl FnMut(usize, &Sim),
) -> Result<Report, (usize, Timestamp, Violation)> {
    let mut progress = (0usize, config.sim.start);
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        play_inner(scenario, config, &mut progress, &mut observe)
    }));
    match result {
        Ok(r) => r,
        Err(panic) => {
            let message = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_string()))
                .unwrap_or_else(|| "a panic without a message".to_string());
            Err((progress.0, progress.1, Violation::Panic { message }))
        }
    }
}

fn play_inner(
    scenario: &Scenario,
    config: &ChaosConfig,
    progress: &mut (usize, Timestamp),
    observe: &mut dyn FnMut(usize, &Sim),
) -> Result<Report, (usize, Timestamp, Violation)> {
    let mut sim = build_sim(&scenario.setup, &config.sim);
    let bounds = Bounds {
        leak: config.leak_bound,
        pending: config.pending_bound,
        registration_timeout: karpenter_core::lifecycle::nodeclaim::REGISTRATION_TIMEOUT,
        gc_period: config.sim.operator.gc_period,
    };
    let mut checker = Checker::default();
    let mut report = Report::default();
    let steps = config.steps.min(scenario.steps.len());
    for (step, events) in scenario.steps.iter().take(steps).enumerate() {
        *progress = (step, sim.now());
        let fail = |sim: &Sim, v: Violation| (step, sim.now(), v);
        for e in events {
            *report.events.entry(event_kind(e).to_string()).or_default() += 1;
        }
        let deadline = sim.now().checked_add(config.step).unwrap_or(Timestamp::MAX);
        report.restarts += play_step(&mut sim, events, deadline, |sim| checker.check_fast(sim))
            .map_err(|stop| match stop {
                StepStop::Sim(e) => Violation::Livelock {
                    message: e.to_string(),
                },
                StepStop::Check(v) => v,
            })
            .map_err(|v| fail(&sim, v))?;
        checker.check(&sim, &bounds).map_err(|v| fail(&sim, v))?;
        observe(step, &sim);
        let hourly = sim.hourly_cost();
        report.cost += hourly * config.step.as_secs_f64() / 3600.0;
        report.hourly_cost.push(hourly);
        report.peak_nodes = report.peak_nodes.max(sim.api().nodes.len());
        report.steps = step + 1;
        // Keep memory flat over long runs: the checker has read what it needs.
        checker.forget_seen(&mut sim);
    }
    report.simulated = config.step * i32::try_from(report.steps).unwrap_or(i32::MAX);
    report.inputs = sim.inputs_delivered;
    report.launches = sim.counts.launches;
    Ok(report)
}

/// Plays `scenario`; on a failure, shrinks its trace (dropping events while the same
/// invariant still breaks, within [`ChaosConfig::max_shrink_runs`] re-runs) and returns the
/// [`Failure`].
pub fn run(scenario: &Scenario, config: &ChaosConfig) -> Result<Report, Box<Failure>> {
    let (step, at, violation) = match play(scenario, config) {
        Ok(report) => return Ok(report),
        Err(e) => e,
    };
    let steps = step + 1;
    let mut trace: Vec<(usize, Event)> = scenario
        .trace()
        .into_iter()
        .filter(|(i, _)| *i < steps)
        .collect();
    let shrink_config = ChaosConfig {
        steps,
        ..config.clone()
    };
    let still_fails = |trace: &[(usize, Event)]| {
        let candidate = scenario.with_trace(trace, steps);
        matches!(play(&candidate, &shrink_config), Err((_, _, v)) if v.invariant() == violation.invariant())
    };
    let mut runs = 0;
    let mut chunk = trace.len().div_ceil(2).max(1);
    while chunk >= 1 && runs < config.max_shrink_runs && !trace.is_empty() {
        let mut i = 0;
        let mut removed_any = false;
        while i < trace.len() && runs < config.max_shrink_runs {
            let end = (i + chunk).min(trace.len());
            let mut candidate = trace.clone();
            candidate.drain(i..end);
            runs += 1;
            if still_fails(&candidate) {
                trace = candidate;
                removed_any = true;
            } else {
                i = end;
            }
        }
        if chunk == 1 && !removed_any {
            break;
        }
        chunk = (chunk / 2).max(1);
    }
    Err(Box::new(Failure {
        seed: scenario.seed,
        faults: scenario.faults,
        steps: config.steps,
        step,
        at,
        violation,
        trace,
    }))
}

/// Generates the scenario of `seed` with `config`'s steps and faults and [`run`]s it.
pub fn run_seed(seed: u64, config: &ChaosConfig) -> Result<Report, Box<Failure>> {
    let scenario = Scenario::generate(seed, config.steps, config.faults);
    run(&scenario, config)
}

/// Runs one seed again, as a [`Failure`]'s replay line asks: `steps` steps with `faults`
/// (a [`FaultRates::parse`] specification), printing the failure if any.
pub fn replay(seed: u64, steps: usize, faults: &str) -> Result<Report, String> {
    let faults = FaultRates::parse(faults).map_err(|e| e.to_string())?;
    let config = ChaosConfig {
        steps,
        faults,
        ..ChaosConfig::default()
    };
    run_seed(seed, &config).map_err(|f| f.to_string())
}

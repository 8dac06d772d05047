//! Scripted runs: a workload written down in advance (Deployments whose replica counts follow
//! a schedule, Jobs arriving at a fixed interval, spot interruptions at a rate) played against
//! the operator loops, with the cost and the node count probed after every step. This is what
//! `karpenter simulate` runs; [`super::chaos`] plays seeded random workloads instead.
//!
//! A [`Script`] holds the starting point (NodePools and their instance types, DaemonSets,
//! PodDisruptionBudgets, standalone pods) and the workload over time; [`run_script`] plays it
//! for [`ScriptConfig::duration`] in steps of [`ScriptConfig::step`], with the faults of
//! [`ScriptConfig::faults`] drawn from [`ScriptConfig::seed`], and returns a [`ScriptReport`]:
//! one [`Sample`] per step, nodes launched, nodes removed by reason (the operator's own
//! `karpenter_nodeclaims_disrupted_total` reasons), pods disrupted and evicted.
//! [`ScriptConfig::consolidation`] `false` runs the same script with every NodePool's
//! `consolidateAfter` set to `Never` (the baseline a consolidated run is compared with).
//!
//! ```
//! use jiff::SignedDuration;
//! use karpenter_fake::sim::node_pool;
//! use karpenter_fake::sim::scripted::{
//!     DeploymentScript, ReplicaStep, Script, ScriptConfig, run_script,
//! };
//! use karpenter_fake::sim::workload::Deployment;
//!
//! let mut script = Script::new(vec![node_pool("default")]);
//! script.deployments.push(DeploymentScript::new(
//!     Deployment::new("web", 500, 512),
//!     vec![
//!         ReplicaStep::new(SignedDuration::ZERO, 8),
//!         ReplicaStep::new(SignedDuration::from_mins(30), 1),
//!     ],
//! ));
//! let config = ScriptConfig::new(SignedDuration::from_hours(1));
//! let report = run_script(&script, &config, &mut |_, _| {}).unwrap();
//! assert_eq!(report.samples.len(), 60);
//! assert!(report.launched > 0);
//! assert!(report.samples[10].nodes > report.samples[59].nodes, "scaled in and consolidated");
//! ```

use std::collections::BTreeMap;
use std::sync::Arc;

use jiff::SignedDuration;
use karpenter_core::api::{NillableDuration, NodePool};
use karpenter_core::labels::{self, LabelPolicy};
use karpenter_core::lifecycle::{MetricOp, metric_names};
use karpenter_core::model::{DaemonSet, InstanceType, Pod, PodDisruptionBudget, Timestamp};
use karpenter_core::operator::{InterruptionEvent, InterruptionKind};

use super::chaos::{Event, FaultRates, SimRng, fault_events, shell_fault_events};
use super::step::{StepStop, play_step};
use super::workload::{Deployment, Job};
use super::{Sim, SimConfig, SimError, lifecycle_add};
use crate::FakeCloudProvider;

/// One point of a replica schedule: from `at` (since the start) on, `replicas` replicas.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplicaStep {
    /// Since the start of the run (or of the period, with [`DeploymentScript::repeat`]).
    pub at: SignedDuration,
    /// The replica count from then on.
    pub replicas: u32,
}

impl ReplicaStep {
    /// `replicas` replicas from `at` on.
    pub fn new(at: SignedDuration, replicas: u32) -> Self {
        ReplicaStep { at, replicas }
    }
}

/// A Deployment and its replica count over time.
#[derive(Debug, Clone, PartialEq)]
pub struct DeploymentScript {
    /// The Deployment (its pod shape, budget and annotation).
    pub deployment: Deployment,
    /// The replica schedule, in any order; before its first point the Deployment has
    /// [`DeploymentScript::initial`] replicas.
    pub steps: Vec<ReplicaStep>,
    /// The schedule repeats with this period (a daily curve: 24 h); `None`: it runs once.
    pub repeat: Option<SignedDuration>,
    /// Replicas before the first point of the schedule.
    pub initial: u32,
}

impl DeploymentScript {
    /// `deployment` following `steps` once, with no replicas before the first step.
    pub fn new(deployment: Deployment, steps: Vec<ReplicaStep>) -> Self {
        DeploymentScript {
            deployment,
            steps,
            repeat: None,
            initial: 0,
        }
    }

    /// The schedule repeats every `period`.
    pub fn with_repeat(mut self, period: SignedDuration) -> Self {
        self.repeat = Some(period);
        self
    }

    /// With `replicas` before the first point of the schedule.
    pub fn with_initial(mut self, replicas: u32) -> Self {
        self.initial = replicas;
        self
    }

    /// The replica count at `t` since the start.
    pub fn replicas_at(&self, t: SignedDuration) -> u32 {
        let mut t = t;
        let mut wrapped = false;
        if let Some(period) = self.repeat.filter(|p| p.is_positive()) {
            let n = t.as_nanos().div_euclid(period.as_nanos());
            wrapped = n > 0;
            t = SignedDuration::from_nanos_i128(t.as_nanos().rem_euclid(period.as_nanos()));
        }
        let latest = self
            .steps
            .iter()
            .filter(|s| s.at <= t)
            .max_by_key(|s| s.at)
            .map(|s| s.replicas);
        match latest {
            Some(r) => r,
            // Before the first point of a later period: the last point of the period before.
            None if wrapped => self
                .steps
                .iter()
                .max_by_key(|s| s.at)
                .map_or(self.initial, |s| s.replicas),
            None => self.initial,
        }
    }
}

/// Jobs that arrive at a fixed interval: the `k`-th arrival is a copy of `job` named
/// `<job.name>-<k>` (from 1).
#[derive(Debug, Clone, PartialEq)]
pub struct JobSchedule {
    /// The Job every arrival copies (pods, requests, how long each pod runs).
    pub job: Job,
    /// The first arrival, since the start.
    pub start: SignedDuration,
    /// Time between arrivals (positive).
    pub every: SignedDuration,
    /// No arrival at or after this time since the start; `None`: until the run ends.
    pub until: Option<SignedDuration>,
}

impl JobSchedule {
    /// `job` every `every`, from the start of the run to its end.
    pub fn new(job: Job, every: SignedDuration) -> Self {
        JobSchedule {
            job,
            start: SignedDuration::ZERO,
            every,
            until: None,
        }
    }

    /// The arrival times (since the start) in `[from, to)`, with their sequence numbers.
    fn arrivals(&self, from: SignedDuration, to: SignedDuration) -> Vec<(u64, SignedDuration)> {
        let mut out = Vec::new();
        if !self.every.is_positive() {
            return out;
        }
        let end = self.until.map_or(to, |u| u.min(to));
        let every = self.every.as_nanos();
        // The first arrival index at or after `from`.
        let first = if from <= self.start {
            0
        } else {
            (from.as_nanos() - self.start.as_nanos() + every - 1) / every
        };
        let mut k = first;
        loop {
            let at = SignedDuration::from_nanos_i128(self.start.as_nanos() + k * every);
            if at >= end {
                break;
            }
            if at >= from {
                out.push((u64::try_from(k + 1).unwrap_or(u64::MAX), at));
            }
            k += 1;
        }
        out
    }
}

/// What a scripted run starts with and the workload it plays.
#[derive(Debug, Clone)]
pub struct Script {
    /// The NodePools.
    pub node_pools: Vec<NodePool>,
    /// The instance types offered to NodePools without their own entry in
    /// [`Script::pool_instance_types`].
    pub instance_types: Vec<Arc<InstanceType>>,
    /// Instance types per NodePool name.
    pub pool_instance_types: BTreeMap<String, Vec<Arc<InstanceType>>>,
    /// The provider's label policy (`None`: the fake catalog's).
    pub label_policy: Option<LabelPolicy>,
    /// The zones injected insufficient-capacity faults pick from.
    pub zones: Vec<String>,
    /// DaemonSets.
    pub daemonsets: Vec<DaemonSet>,
    /// PodDisruptionBudgets (besides the Deployments' own).
    pub pdbs: Vec<PodDisruptionBudget>,
    /// Pods present from the start (pending; a pod with a controlling owner is recreated when
    /// evicted, as its ReplicaSet would).
    pub pods: Vec<Pod>,
    /// Deployments and their replica schedules.
    pub deployments: Vec<DeploymentScript>,
    /// Jobs arriving at fixed intervals.
    pub jobs: Vec<JobSchedule>,
    /// Spot interruptions per spot node per hour (0: none); each running spot instance is
    /// interrupted with probability `rate × step in hours` per step, drawn from the seed.
    pub spot_interruptions_per_hour: f64,
}

impl Script {
    /// A script with these NodePools over the fake provider's default catalog and no workload.
    pub fn new(node_pools: Vec<NodePool>) -> Self {
        Script {
            node_pools,
            instance_types: crate::catalog::default_catalog(),
            pool_instance_types: BTreeMap::new(),
            label_policy: None,
            zones: crate::catalog::ZONES
                .iter()
                .map(|z| z.to_string())
                .collect(),
            daemonsets: Vec::new(),
            pdbs: Vec::new(),
            pods: Vec::new(),
            deployments: Vec::new(),
            jobs: Vec::new(),
            spot_interruptions_per_hour: 0.0,
        }
    }
}

/// How to play a [`Script`].
#[derive(Debug, Clone)]
pub struct ScriptConfig {
    /// Virtual time to simulate.
    pub duration: SignedDuration,
    /// Virtual time per step (workload changes and faults happen at step boundaries; one
    /// [`Sample`] per step).
    pub step: SignedDuration,
    /// Seed of the faults and spot interruptions.
    pub seed: u64,
    /// Fault rates per step.
    pub faults: FaultRates,
    /// `false`: every NodePool's `consolidateAfter` is set to `Never` (no consolidation, the
    /// baseline).
    pub consolidation: bool,
    /// The simulator's settings.
    pub sim: SimConfig,
}

impl ScriptConfig {
    /// `duration` in one-minute steps, seed 0, no faults, consolidation as the NodePools say,
    /// the default simulator settings.
    pub fn new(duration: SignedDuration) -> Self {
        ScriptConfig {
            duration,
            step: SignedDuration::from_mins(1),
            seed: 0,
            faults: FaultRates::none(),
            consolidation: true,
            sim: SimConfig::default(),
        }
    }

    /// The number of steps: `duration / step`, rounded up.
    pub fn steps(&self) -> usize {
        if !self.step.is_positive() || !self.duration.is_positive() {
            return 0;
        }
        let d = self.duration.as_nanos();
        let s = self.step.as_nanos();
        usize::try_from((d + s - 1) / s).unwrap_or(usize::MAX)
    }
}

/// The cluster at the end of a step.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// Virtual time since the start (the end of the step).
    pub at: SignedDuration,
    /// Nodes (registered Node objects).
    pub nodes: usize,
    /// Instances the provider runs (launched, not yet terminated).
    pub instances: usize,
    /// Their price per hour.
    pub cost_per_hour: f64,
    /// The cost so far (each step's price per hour × its length).
    pub cumulative_cost: f64,
    /// Pods not bound to a node.
    pub pending_pods: usize,
    /// Pods bound to a node (DaemonSet pods included).
    pub running_pods: usize,
}

/// What a scripted run did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ScriptReport {
    /// One sample per step.
    pub samples: Vec<Sample>,
    /// The total cost (the last sample's cumulative cost).
    pub cost: f64,
    /// Instances launched (successful `create` calls).
    pub launched: usize,
    /// NodeClaims disrupted, by the `reason` of `karpenter_nodeclaims_disrupted_total`
    /// (`empty`, `underutilized`, `drifted`, `expired`, `spot_interrupted`, ...).
    pub removed: BTreeMap<String, usize>,
    /// NodeClaims whose instance was terminated (`karpenter_nodeclaims_terminated_total`).
    pub terminated: usize,
    /// Pods on disrupted nodes (`karpenter_pods_disruption_initiated_total`).
    pub pods_disrupted: usize,
    /// Pods the Eviction API let go.
    pub evictions: usize,
    /// Spot interruption messages delivered (from
    /// [`Script::spot_interruptions_per_hour`]).
    pub spot_interruptions: usize,
    /// Injected faults, by name.
    pub faults: BTreeMap<String, usize>,
    /// Operator restarts (injected crashes).
    pub restarts: usize,
    /// The most nodes at once.
    pub peak_nodes: usize,
    /// Inputs the operator handled.
    pub inputs: u64,
}

/// Why a scripted run stopped.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScriptError {
    /// The simulation reported a livelock.
    #[error("at {at} into the run: {source}")]
    Sim {
        /// Virtual time since the start.
        at: SignedDuration,
        /// The simulator's error.
        source: SimError,
    },
    /// The operator panicked (a bug).
    #[error("at {at} into the run: the operator panicked: {message}")]
    Panic {
        /// Virtual time since the start.
        at: SignedDuration,
        /// The panic's message.
        message: String,
    },
}

/// Plays `script` as `config` says. `progress` is called after every step with the steps done
/// and the steps in all. Panics inside the operator are caught and returned as
/// [`ScriptError::Panic`].
pub fn run_script(
    script: &Script,
    config: &ScriptConfig,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<ScriptReport, ScriptError> {
    let mut at = SignedDuration::ZERO;
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        run_inner(script, config, progress, &mut at)
    }));
    match result {
        Ok(r) => r,
        Err(panic) => {
            let message = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_string()))
                .unwrap_or_else(|| "a panic without a message".to_string());
            Err(ScriptError::Panic { at, message })
        }
    }
}

/// `np` with consolidation off: `consolidateAfter: Never`.
pub fn without_consolidation(mut np: NodePool) -> NodePool {
    np.spec.disruption.consolidate_after = NillableDuration::parse("Never").ok();
    np
}

fn build(script: &Script, config: &ScriptConfig) -> Sim {
    let provider = match &script.label_policy {
        Some(p) => FakeCloudProvider::new().with_label_policy(p.clone()),
        None => FakeCloudProvider::new(),
    };
    // Nothing reads a script's call log, and a long run would fill memory with it.
    provider.set_call_log(false);
    provider.set_instance_types(script.instance_types.clone());
    for (pool, types) in &script.pool_instance_types {
        provider.set_node_pool_instance_types(pool.clone(), types.clone());
    }
    let mut sim = Sim::with_provider(config.sim.clone(), Arc::new(provider));
    for np in &script.node_pools {
        let np = if config.consolidation {
            np.clone()
        } else {
            without_consolidation(np.clone())
        };
        sim.apply_node_pool(np);
    }
    for ds in &script.daemonsets {
        sim.add_daemonset(ds.clone());
    }
    for pdb in &script.pdbs {
        sim.add_pdb(pdb.clone());
    }
    for pod in &script.pods {
        sim.add_pod(pod.clone());
    }
    for d in &script.deployments {
        sim.add_deployment(d.deployment.clone());
        sim.scale_deployment(&d.deployment.name, d.replicas_at(SignedDuration::ZERO));
    }
    sim.drain_api_events();
    sim
}

fn run_inner(
    script: &Script,
    config: &ScriptConfig,
    progress: &mut dyn FnMut(usize, usize),
    at: &mut SignedDuration,
) -> Result<ScriptReport, ScriptError> {
    let steps = config.steps();
    let mut sim = build(script, config);
    let start = sim.now();
    sim.start();
    let mut rng = SimRng::new(config.seed);
    let mut shell_rng = SimRng::new(config.seed ^ super::chaos::SHELL_FAULT_STREAM);
    let fault_types: Vec<Arc<InstanceType>> = {
        let mut all: Vec<Arc<InstanceType>> = script.instance_types.clone();
        for types in script.pool_instance_types.values() {
            all.extend(types.iter().cloned());
        }
        all
    };
    let zones: Vec<&str> = script.zones.iter().map(String::as_str).collect();
    let mut later: Vec<Vec<Event>> = vec![Vec::new(); steps];
    let mut report = ScriptReport::default();
    let mut replicas: Vec<u32> = script
        .deployments
        .iter()
        .map(|d| d.replicas_at(SignedDuration::ZERO))
        .collect();
    let step_hours = config.step.as_secs_f64() / 3600.0;
    let mut cumulative = 0.0;
    for step in 0..steps {
        let from = config.step * i32::try_from(step).unwrap_or(i32::MAX);
        let to = from + config.step;
        *at = from;
        // The workload.
        if step > 0 {
            for (d, current) in script.deployments.iter().zip(replicas.iter_mut()) {
                let want = d.replicas_at(from);
                if want != *current {
                    sim.scale_deployment(&d.deployment.name, want);
                    *current = want;
                }
            }
        }
        for schedule in &script.jobs {
            for (k, _) in schedule.arrivals(from, to) {
                let mut job = schedule.job.clone();
                job.name = format!("{}-{k}", schedule.job.name);
                sim.add_job(job);
            }
        }
        // Spot interruptions.
        if script.spot_interruptions_per_hour > 0.0 {
            let p = (script.spot_interruptions_per_hour * step_hours).min(1.0);
            let spot: Vec<String> = sim
                .api()
                .node_claims
                .values()
                .filter(|c| {
                    c.metadata
                        .labels
                        .get(labels::CAPACITY_TYPE)
                        .map(String::as_str)
                        == Some(labels::CAPACITY_TYPE_SPOT)
                })
                .filter_map(|c| c.status.provider_id.clone())
                .collect();
            for pid in spot {
                if rng.chance(p) {
                    report.spot_interruptions += 1;
                    sim.observed.involuntary.insert(pid.clone());
                    sim.interrupt(InterruptionEvent::new(
                        InterruptionKind::SpotInterrupted,
                        pid,
                    ));
                }
            }
        }
        // Faults.
        let mut events = std::mem::take(&mut later[step]);
        if !fault_types.is_empty() && !zones.is_empty() {
            events.extend(fault_events(
                &mut rng,
                &config.faults,
                &fault_types,
                &zones,
                step,
                steps,
                &mut later,
            ));
        }
        events.extend(shell_fault_events(&mut shell_rng, &config.faults));
        for e in &events {
            if !matches!(e, Event::IceEnds { .. }) {
                *report.faults.entry(fault_name(e).to_string()).or_default() += 1;
            }
        }
        // Run the step.
        let deadline = lifecycle_add(start, to);
        report.restarts += play_step(&mut sim, &events, deadline, |_| {
            Ok::<(), std::convert::Infallible>(())
        })
        .map_err(|stop| match stop {
            StepStop::Sim(source) => ScriptError::Sim { at: from, source },
            StepStop::Check(never) => match never {},
        })?;
        // Probe.
        collect(&mut sim, &mut report);
        let cost_per_hour = sim.hourly_cost();
        cumulative += cost_per_hour * step_hours;
        let nodes = sim.api().nodes.len();
        let running = sim
            .api()
            .pods
            .values()
            .filter(|p| p.node_name.is_some() && !p.is_terminal())
            .count();
        let pending = sim
            .api()
            .pods
            .values()
            .filter(|p| p.node_name.is_none() && !p.is_terminal())
            .count();
        report.peak_nodes = report.peak_nodes.max(nodes);
        report.samples.push(Sample {
            at: to,
            nodes,
            instances: sim.provider().instances().len(),
            cost_per_hour,
            cumulative_cost: cumulative,
            pending_pods: pending,
            running_pods: running,
        });
        progress(step + 1, steps);
    }
    report.cost = cumulative;
    report.launched = sim.observed.launched.len();
    report.inputs = sim.inputs_delivered;
    Ok(report)
}

/// Moves what the operator reported during the step into `report` and forgets it (memory stays
/// flat over long runs).
fn collect(sim: &mut Sim, report: &mut ScriptReport) {
    for m in sim.metrics.drain(..) {
        let MetricOp::Add(v) = m.op else { continue };
        let n = if v.is_finite() && v > 0.0 {
            v.round() as usize
        } else {
            0
        };
        match m.name.as_str() {
            metric_names::NODECLAIMS_DISRUPTED_TOTAL => {
                let reason = m.labels.get("reason").cloned().unwrap_or_default();
                *report.removed.entry(reason).or_default() += n;
            }
            metric_names::NODECLAIMS_TERMINATED_TOTAL => report.terminated += n,
            metric_names::PODS_DISRUPTION_INITIATED_TOTAL => report.pods_disrupted += n,
            _ => {}
        }
    }
    report.evictions += sim.observed.evictions.len();
    sim.observed.evictions.clear();
    sim.events.clear();
}

fn fault_name(e: &Event) -> &'static str {
    match e {
        Event::Scale { .. } => "scale",
        Event::JobArrives(_) => "job",
        Event::Ice { .. } | Event::IceEnds { .. } => "ice",
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

/// The instant `d` after `start`.
pub fn instant(start: Timestamp, d: SignedDuration) -> Timestamp {
    lifecycle_add(start, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mins(m: i64) -> SignedDuration {
        SignedDuration::from_mins(m)
    }

    #[test]
    fn a_repeating_schedule_wraps_and_holds_the_last_point_before_the_first() {
        let d = DeploymentScript::new(
            Deployment::new("web", 100, 128),
            vec![
                ReplicaStep::new(mins(60), 10),
                ReplicaStep::new(mins(120), 2),
            ],
        )
        .with_repeat(mins(180))
        .with_initial(4);
        assert_eq!(d.replicas_at(mins(0)), 4);
        assert_eq!(d.replicas_at(mins(61)), 10);
        assert_eq!(d.replicas_at(mins(150)), 2);
        // Second period, before its first point: the last point of the first period.
        assert_eq!(d.replicas_at(mins(200)), 2);
        assert_eq!(d.replicas_at(mins(250)), 10);
    }

    #[test]
    fn job_arrivals_fall_into_their_step_once() {
        let mut s = JobSchedule::new(Job::new("batch", 1, 100, 128, mins(5)), mins(30));
        s.start = mins(10);
        s.until = Some(mins(100));
        let all: Vec<(u64, SignedDuration)> = (0..200)
            .flat_map(|m| s.arrivals(mins(m), mins(m + 1)))
            .collect();
        assert_eq!(
            all,
            vec![(1, mins(10)), (2, mins(40)), (3, mins(70))],
            "every 30 min from 10 min, none at or after 100 min"
        );
    }

    #[test]
    fn the_baseline_keeps_nodes_that_consolidation_removes() {
        let mut script = Script::new(vec![super::super::node_pool("default")]);
        script.deployments.push(DeploymentScript::new(
            Deployment::new("web", 900, 512),
            vec![ReplicaStep::new(mins(0), 6), ReplicaStep::new(mins(20), 1)],
        ));
        let config = ScriptConfig::new(mins(60));
        let on = run_script(&script, &config, &mut |_, _| {}).unwrap();
        let off = run_script(
            &script,
            &ScriptConfig {
                consolidation: false,
                ..config.clone()
            },
            &mut |_, _| {},
        )
        .unwrap();
        assert!(on.cost < off.cost, "{} < {}", on.cost, off.cost);
        let consolidated: usize = ["empty", "underutilized"]
            .iter()
            .filter_map(|r| on.removed.get(*r))
            .sum();
        assert!(consolidated > 0, "{:?}", on.removed);
        assert!(!off.removed.contains_key("empty"), "{:?}", off.removed);
        // Deterministic.
        let again = run_script(&script, &config, &mut |_, _| {}).unwrap();
        assert_eq!(again, on);
    }
}

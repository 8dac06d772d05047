//! `karpenter simulate`: the operator loops over a simulated day (or any duration) of a
//! workload, on the user's NodePools, with and without consolidation.
//!
//! 1. The `-f` input is read as `karpenter plan -f` reads it ([`crate::manifests`], the
//!    catalog, [`karpenter_core::world`]): NodePools with their instance types, DaemonSets,
//!    PodDisruptionBudgets, and the pods of the input (pending, or bound in a dump) as the
//!    starting workload.
//! 2. The workload file ([`workload`]) adds Deployments with replica schedules (their pod
//!    template inline or from a Deployment of `-f`), periodic Jobs and spot interruptions.
//! 3. [`karpenter_fake::sim::scripted::run_script`] plays it twice over the fake provider
//!    offering the catalog: as the NodePools say, and with `consolidateAfter: Never` (the
//!    baseline); same seed, same faults.
//! 4. [`report`] renders the table, the JSON (`docs/simulate.md`) and the SVG chart.

pub mod report;
pub mod workload;

use std::sync::Arc;

use jiff::SignedDuration;
use karpenter_core::features::Gate;
use karpenter_core::model::{InstanceType, Pod};
use karpenter_core::scheduling::packing::{PackingOptions, PackingPolicy};
use karpenter_core::world::{self, Objects, Workload};
use karpenter_fake::sim::SimConfig;
use karpenter_fake::sim::chaos::FaultRates;
use karpenter_fake::sim::scripted::{
    DeploymentScript, JobSchedule, ReplicaStep, Script, ScriptConfig, ScriptReport, run_script,
};
use karpenter_fake::sim::workload::{Deployment, Job};

use crate::catalog::{Catalog, CatalogInfo, CatalogSpec};
use crate::manifests::{Document, Manifests, classify};
use crate::plan::{PlanError, build_world};
use crate::settings::Settings;
use workload::{WorkloadError, WorkloadFile};

/// What `karpenter simulate` was asked.
#[derive(Debug, Clone, PartialEq)]
pub struct SimulateOptions {
    /// `--catalog`.
    pub catalog: CatalogSpec,
    /// `--spot-price-factor`.
    pub spot_price_factor: Option<f64>,
    /// `--duration`.
    pub duration: SignedDuration,
    /// `--step`.
    pub step: SignedDuration,
    /// `--seed`.
    pub seed: u64,
    /// `--faults`.
    pub faults: FaultRates,
    /// `--packing`.
    pub packing: Option<PackingPolicy>,
    /// `--feature-gates`, `--preference-policy`, `--min-values-policy`.
    pub settings: Settings,
}

/// The most steps a run may take (`--duration` / `--step`).
pub const MAX_STEPS: usize = 200_000;

impl From<WorkloadError> for PlanError {
    fn from(e: WorkloadError) -> Self {
        PlanError::Input(e.to_string())
    }
}

/// Both runs and what they were run on.
#[derive(Debug, Clone, PartialEq)]
pub struct Simulation {
    /// The catalog.
    pub catalog: CatalogInfo,
    /// The NodePools simulated, by name.
    pub node_pools: Vec<String>,
    /// The options.
    pub options: SimulateOptions,
    /// Spot interruptions per spot node per hour.
    pub spot_rate: f64,
    /// The start of the virtual clock.
    pub start: karpenter_core::model::Timestamp,
    /// As the NodePools say.
    pub consolidated: ScriptReport,
    /// With `consolidateAfter: Never`.
    pub baseline: ScriptReport,
    /// Notices for standard error.
    pub notices: Vec<String>,
}

/// The script and simulator settings built from the input.
pub struct Prepared {
    /// The script.
    pub script: Script,
    /// The simulator's settings.
    pub sim: SimConfig,
    /// The catalog.
    pub catalog: CatalogInfo,
    /// Notices for standard error.
    pub notices: Vec<String>,
}

/// Builds the script: NodePools with the catalog's instance types, the input's DaemonSets,
/// budgets and pods, and the workload file's Deployments, Jobs and spot rate.
pub fn prepare(
    docs: &[Document],
    workload: &WorkloadFile,
    workload_file: &str,
    opts: &SimulateOptions,
) -> Result<Prepared, PlanError> {
    let m = classify(docs)?;
    let mut notices = m.notices.clone();
    let mut catalog = Catalog::load(&opts.catalog, opts.spot_price_factor)?;
    let aws = opts.catalog == CatalogSpec::Aws;
    let (world, _warnings) = build_world(&m, &mut catalog, aws, &opts.settings, &mut notices)?;
    if world.node_pools.is_empty() {
        return Err(PlanError::Input(
            "no usable NodePool in the -f input: karpenter simulate needs at least one".into(),
        ));
    }
    let mut script = Script::new(world.node_pools.clone());
    let mut all_types: Vec<Arc<InstanceType>> = Vec::new();
    for input in &world.node_pool_inputs {
        script
            .pool_instance_types
            .insert(input.name.clone(), input.instance_types.clone());
        for it in &input.instance_types {
            if !all_types.iter().any(|t| t.name() == it.name()) {
                all_types.push(it.clone());
            }
        }
    }
    script.zones = zones_of(&all_types);
    script.instance_types = all_types;
    script.label_policy = Some(catalog.policy.clone());
    script.daemonsets = world.daemonsets.clone();
    script.pdbs = world.pdbs.clone();

    // The workload file's Deployments.
    let mut referenced: Vec<(String, Option<String>)> = Vec::new();
    for (i, d) in workload.deployments.iter().enumerate() {
        let field = |f: &str| format!("{workload_file}: deployments[{i}].{f}");
        let (template, initial) = match (&d.cpu, &d.memory) {
            (Some(c), Some(mem)) => {
                let cpu = workload::quantity(c).map_err(|e| PlanError::Input(field(&e)))?;
                let memory = workload::quantity(mem).map_err(|e| PlanError::Input(field(&e)))?;
                let ns = d.namespace.as_deref().unwrap_or("default");
                let pod = workload::inline_pod(ns, &d.name, cpu, memory, &d.node_selector);
                (pod, 0)
            }
            _ => {
                let (mut pod, replicas) = deployment_template(&m, &d.name, d.namespace.as_deref())
                    .ok_or_else(|| {
                        PlanError::Input(format!(
                            "{workload_file}: deployments[{i}].name: no Deployment {:?}{} in the \
                             -f input; give cpu and memory to describe its pods here",
                            d.name,
                            d.namespace
                                .as_deref()
                                .map(|n| format!(" in namespace {n:?}"))
                                .unwrap_or_default()
                        ))
                    })?;
                pod.node_selector.extend(d.node_selector.clone());
                referenced.push((d.name.clone(), Some(pod.namespace.clone())));
                (pod, replicas)
            }
        };
        let mut deployment = Deployment::new(d.name.clone(), 0, 0).with_template(template);
        if d.do_not_disrupt {
            deployment = deployment.with_do_not_disrupt();
        }
        if let Some(pdb) = &d.pdb {
            let (min, max) = workload::pdb_value(pdb)
                .map_err(|(f, e)| PlanError::Input(field(&format!("pdb.{f}: {e}"))))?;
            if let Some(min) = min {
                deployment = deployment.with_min_available(min);
            }
            if let Some(max) = max {
                deployment = deployment.with_max_unavailable(max);
            }
        }
        let mut steps = Vec::new();
        for (k, p) in d.replicas.iter().enumerate() {
            let at = workload::duration(&p.at, false)
                .map_err(|e| PlanError::Input(field(&format!("replicas[{k}].at: {e}"))))?;
            steps.push(ReplicaStep::new(at, p.replicas));
        }
        let mut ds = DeploymentScript::new(deployment, steps).with_initial(initial);
        if let Some(r) = &d.repeat {
            let period = workload::duration(r, true)
                .map_err(|e| PlanError::Input(field(&format!("repeat: {e}"))))?;
            ds = ds.with_repeat(period);
        }
        script.deployments.push(ds);
    }

    // The input's pods, minus the replicas of Deployments the workload file drives.
    let is_driven = |pod: &Pod, workload_name: Option<&str>| {
        referenced.iter().any(|(name, ns)| {
            let same_ns = ns.as_deref().is_none_or(|n| n == pod.namespace);
            let by_source = workload_name == Some(name.as_str());
            let by_owner = pod
                .owner
                .as_ref()
                .is_some_and(|o| o.kind == "ReplicaSet" && o.name.starts_with(&format!("{name}-")));
            same_ns && (by_source || by_owner)
        })
    };
    for p in &world.pending {
        let w = p.source.workload.as_ref().map(|w| w.name.as_str());
        if !is_driven(&p.pod, w) {
            script.pods.push(p.pod.clone());
        }
    }
    let mut carried = 0usize;
    for p in world.bound.values() {
        let daemon = p
            .pod
            .owner
            .as_ref()
            .is_some_and(|o| o.kind == "DaemonSet" || o.kind == "Node");
        if daemon || p.pod.is_terminal() || is_driven(&p.pod, None) {
            continue;
        }
        let mut pod = p.pod.clone();
        pod.node_name = None;
        pod.phase = karpenter_core::model::PodPhase::Pending;
        pod.start_time = None;
        script.pods.push(pod);
        carried += 1;
    }
    if !world.nodes.is_empty() {
        notices.push(format!(
            "the input's {} nodes are not simulated: their {carried} pods (DaemonSet pods \
             aside) start pending and Karpenter provisions for them",
            world.nodes.len()
        ));
    }

    // Jobs.
    for (i, j) in workload.jobs.iter().enumerate() {
        let field =
            |f: &str, e: String| PlanError::Input(format!("{workload_file}: jobs[{i}].{f}: {e}"));
        let cpu = workload::quantity(&j.cpu).map_err(|e| field("cpu", e))?;
        let memory = workload::quantity(&j.memory).map_err(|e| field("memory", e))?;
        let run_for = workload::duration(&j.run_for, true).map_err(|e| field("runFor", e))?;
        let every = workload::duration(&j.every, true).map_err(|e| field("every", e))?;
        let ns = j.namespace.as_deref().unwrap_or("default");
        let pod = workload::inline_pod(ns, &j.name, cpu, memory, &j.node_selector);
        let mut job = Job::new(j.name.clone(), j.pods, 0, 0, run_for).with_template(pod);
        if j.do_not_disrupt {
            job = job.with_do_not_disrupt();
        }
        let mut schedule = JobSchedule::new(job, every);
        if let Some(s) = &j.start {
            schedule.start = workload::duration(s, false).map_err(|e| field("start", e))?;
        }
        if let Some(u) = &j.until {
            schedule.until = Some(workload::duration(u, false).map_err(|e| field("until", e))?);
        }
        script.jobs.push(schedule);
    }
    script.spot_interruptions_per_hour = workload
        .spot
        .as_ref()
        .map_or(0.0, |s| s.interruptions_per_node_hour);

    let mut sim = SimConfig::default();
    sim.operator.scheduler = opts
        .settings
        .scheduler_options(catalog.policy.clone())
        .with_packing(PackingOptions::default().with_policy(opts.packing));
    sim.operator.disruption = sim
        .operator
        .disruption
        .clone()
        .with_spot_to_spot_consolidation(opts.settings.enabled(Gate::SpotToSpotConsolidation));
    sim.operator.node_repair = opts.settings.enabled(Gate::NodeRepair);
    if sim.operator.node_repair {
        sim.operator.repair_policies = karpenter_fake::provider::default_repair_policies();
    }
    Ok(Prepared {
        script,
        sim,
        catalog: catalog.info.clone(),
        notices,
    })
}

fn zones_of(types: &[Arc<InstanceType>]) -> Vec<String> {
    let mut zones: Vec<String> = types
        .iter()
        .flat_map(|t| t.offerings.iter().map(|o| o.zone().to_string()))
        .collect();
    zones.sort();
    zones.dedup();
    zones
}

/// The pod template of the Deployment `name` of the input (in `namespace`, or any), as
/// [`karpenter_core::world`] makes its replicas, and its `spec.replicas`.
fn deployment_template(m: &Manifests, name: &str, namespace: Option<&str>) -> Option<(Pod, u32)> {
    let located = m.workloads.iter().find(|w| match &w.object {
        Workload::Deployment(d) => {
            d.metadata.name.as_deref() == Some(name)
                && namespace
                    .is_none_or(|n| d.metadata.namespace.as_deref().unwrap_or("default") == n)
        }
        _ => false,
    })?;
    let Workload::Deployment(d) = &located.object else {
        return None;
    };
    let replicas = d
        .spec
        .as_ref()
        .and_then(|s| s.replicas)
        .map_or(1, |r| u32::try_from(r).unwrap_or(0));
    // One replica of the Deployment alone: the world makes the pod exactly as `plan` would.
    let mut one = (**d).clone();
    if let Some(spec) = one.spec.as_mut() {
        spec.replicas = Some(1);
    }
    let workloads = [world::Located::new(
        located.origin.clone(),
        located.name.clone(),
        Workload::Deployment(Box::new(one)),
    )];
    let objects = Objects {
        node_pools: &[],
        node_claims: &[],
        nodes: &[],
        pods: &[],
        workloads: &workloads,
        daemonsets: &[],
        pdbs: &[],
        claims: &[],
        volumes: &[],
        storage_classes: &[],
        csinodes: &[],
    };
    let w = world::build(&objects).ok()?;
    let pod = w.pending.into_iter().next()?.pod;
    Some((pod, replicas))
}

/// Runs both simulations. `progress` gets (steps done, steps in all) over both runs.
pub fn simulate(
    prepared: &Prepared,
    opts: &SimulateOptions,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<Simulation, PlanError> {
    let config = ScriptConfig {
        duration: opts.duration,
        step: opts.step,
        seed: opts.seed,
        faults: opts.faults,
        consolidation: true,
        sim: prepared.sim.clone(),
    };
    let steps = config.steps();
    if steps > MAX_STEPS {
        return Err(PlanError::Input(format!(
            "--duration / --step: {steps} steps; at most {MAX_STEPS} (use a longer --step)"
        )));
    }
    let total = steps * 2;
    let consolidated = run_script(&prepared.script, &config, &mut |d, _| progress(d, total))
        .map_err(|e| PlanError::Internal(format!("the consolidated run: {e}")))?;
    let baseline_config = ScriptConfig {
        consolidation: false,
        ..config
    };
    let baseline = run_script(&prepared.script, &baseline_config, &mut |d, _| {
        progress(steps + d, total)
    })
    .map_err(|e| PlanError::Internal(format!("the baseline run: {e}")))?;
    Ok(Simulation {
        catalog: prepared.catalog.clone(),
        node_pools: prepared
            .script
            .node_pools
            .iter()
            .map(|p| p.name().to_string())
            .collect(),
        options: opts.clone(),
        spot_rate: prepared.script.spot_interruptions_per_hour,
        start: prepared.sim.start,
        consolidated,
        baseline,
        notices: prepared.notices.clone(),
    })
}

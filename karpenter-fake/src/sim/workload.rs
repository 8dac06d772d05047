//! Workloads for the simulator: Deployments whose replica count changes over time, Jobs whose
//! pods run for a while and finish, DaemonSets, PodDisruptionBudgets and do-not-disrupt pods.
//! The simulator plays their controllers (ReplicaSet, Job, DaemonSet, PDB); the operator sees
//! only the pods, DaemonSets and budgets they produce, as it would in a cluster.
//!
//! ```
//! use karpenter_fake::sim::workload::{Deployment, Job};
//! use karpenter_fake::sim::{Sim, SimConfig, node_pool};
//!
//! let mut sim = Sim::new(SimConfig::default());
//! sim.apply_node_pool(node_pool("default"));
//! sim.add_deployment(Deployment::new("web", 500, 512));
//! sim.scale_deployment("web", 3);
//! sim.add_job(Job::new("batch-1", 2, 1000, 1024, jiff::SignedDuration::from_mins(5)));
//! sim.start();
//! sim.run_for(jiff::SignedDuration::from_mins(3)).unwrap();
//! assert_eq!(sim.workload_pods("web").len(), 3);
//! assert!(sim.pending_pods().is_empty());
//! sim.run_for(jiff::SignedDuration::from_mins(10)).unwrap();
//! assert!(sim.workload_pods("batch-1").is_empty(), "the job's pods finished");
//! ```

use std::collections::BTreeMap;

use jiff::SignedDuration;
use karpenter_core::labels;
use karpenter_core::model::{
    DaemonSet, IntOrPercent, LabelSelector, OwnerReference, Pod, PodDisruptionBudget,
};
use karpenter_core::resources::Quantity;

use super::{RUN_FOR_ANNOTATION, Sim};

/// The namespace workloads run in.
pub const NAMESPACE: &str = "default";

/// The label carrying a workload's name on its pods (what budgets select).
pub const APP_LABEL: &str = "app";

/// A Deployment: identical pods, as many as its replica count asks for.
#[derive(Debug, Clone, PartialEq)]
pub struct Deployment {
    /// Name (also the `app` label of its pods).
    pub name: String,
    /// CPU request per pod, in millicores.
    pub cpu_milli: i64,
    /// Memory request per pod, in MiB.
    pub memory_mib: i64,
    /// Whether its pods carry `karpenter.sh/do-not-disrupt: "true"`.
    pub do_not_disrupt: bool,
    /// A PodDisruptionBudget over its pods: `minAvailable` (count or percent).
    pub min_available: Option<IntOrPercent>,
    /// A PodDisruptionBudget over its pods: `maxUnavailable` (count or percent); used when
    /// `min_available` is not set.
    pub max_unavailable: Option<IntOrPercent>,
    /// A pod template (requests, requirements, tolerations, labels, ...) used instead of
    /// `cpu_milli`/`memory_mib` (see [`Deployment::with_template`]).
    pub template: Option<Box<Pod>>,
}

impl Deployment {
    /// A Deployment named `name` whose pods request `cpu_milli` millicores and `memory_mib`
    /// MiB, without budget or annotation.
    pub fn new(name: impl Into<String>, cpu_milli: i64, memory_mib: i64) -> Self {
        Deployment {
            name: name.into(),
            cpu_milli,
            memory_mib,
            do_not_disrupt: false,
            min_available: None,
            max_unavailable: None,
            template: None,
        }
    }

    /// With pods made from `template` (its namespace, requests, requirements, tolerations,
    /// affinity, labels and annotations; its name, UID, node and owner are replaced). Its
    /// `app` label is set to the Deployment's name when it has none.
    pub fn with_template(mut self, template: Pod) -> Self {
        self.template = Some(Box::new(template));
        self
    }

    /// With pods annotated `karpenter.sh/do-not-disrupt: "true"`.
    pub fn with_do_not_disrupt(mut self) -> Self {
        self.do_not_disrupt = true;
        self
    }

    /// With a PodDisruptionBudget `minAvailable: value`.
    pub fn with_min_available(mut self, value: IntOrPercent) -> Self {
        self.min_available = Some(value);
        self
    }

    /// With a PodDisruptionBudget `maxUnavailable: value`.
    pub fn with_max_unavailable(mut self, value: IntOrPercent) -> Self {
        self.max_unavailable = Some(value);
        self
    }

    /// The PodDisruptionBudget over its pods, if it has one.
    pub fn pdb(&self) -> Option<PodDisruptionBudget> {
        if self.min_available.is_none() && self.max_unavailable.is_none() {
            return None;
        }
        // A template's own `app` label (kept on its pods) is what the budget selects.
        let (namespace, app) = match &self.template {
            Some(t) => (
                t.namespace.as_str(),
                t.labels
                    .get(APP_LABEL)
                    .map_or(self.name.as_str(), String::as_str),
            ),
            None => (NAMESPACE, self.name.as_str()),
        };
        let pdb = PodDisruptionBudget::new(namespace, self.name.clone())
            .with_selector(LabelSelector::from_labels([(APP_LABEL, app)]));
        Some(match (self.min_available, self.max_unavailable) {
            (Some(min), _) => pdb.with_min_available(min),
            (None, Some(max)) => pdb.with_max_unavailable(max),
            (None, None) => pdb,
        })
    }

    fn pod(&self, name: String) -> Pod {
        if let Some(template) = &self.template {
            return templated_pod(
                template,
                name,
                &self.name,
                "ReplicaSet",
                self.do_not_disrupt,
            );
        }
        workload_pod(
            name,
            &self.name,
            "ReplicaSet",
            self.cpu_milli,
            self.memory_mib,
            self.do_not_disrupt,
        )
    }
}

/// A Job: `pods` pods that each complete after running for `run_for` (an evicted pod is
/// recreated and starts over).
#[derive(Debug, Clone, PartialEq)]
pub struct Job {
    /// Name (unique per arrival).
    pub name: String,
    /// How many pods it runs in parallel.
    pub pods: u32,
    /// CPU request per pod, in millicores.
    pub cpu_milli: i64,
    /// Memory request per pod, in MiB.
    pub memory_mib: i64,
    /// How long each pod runs once bound.
    pub run_for: SignedDuration,
    /// Whether its pods carry `karpenter.sh/do-not-disrupt: "true"`.
    pub do_not_disrupt: bool,
    /// A pod template used instead of `cpu_milli`/`memory_mib` (see [`Job::with_template`]).
    pub template: Option<Box<Pod>>,
}

impl Job {
    /// A Job of `pods` pods requesting `cpu_milli` millicores and `memory_mib` MiB each,
    /// running for `run_for`.
    pub fn new(
        name: impl Into<String>,
        pods: u32,
        cpu_milli: i64,
        memory_mib: i64,
        run_for: SignedDuration,
    ) -> Self {
        Job {
            name: name.into(),
            pods,
            cpu_milli,
            memory_mib,
            run_for,
            do_not_disrupt: false,
            template: None,
        }
    }

    /// With pods made from `template`, as [`Deployment::with_template`] does.
    pub fn with_template(mut self, template: Pod) -> Self {
        self.template = Some(Box::new(template));
        self
    }

    /// With pods annotated `karpenter.sh/do-not-disrupt: "true"`.
    pub fn with_do_not_disrupt(mut self) -> Self {
        self.do_not_disrupt = true;
        self
    }
}

/// A DaemonSet whose pod requests `cpu_milli` millicores and `memory_mib` MiB and tolerates
/// every taint (as most node agents do).
pub fn daemonset(name: &str, cpu_milli: i64, memory_mib: i64) -> DaemonSet {
    let mut pod = workload_pod(
        format!("{name}-template"),
        name,
        "DaemonSet",
        cpu_milli,
        memory_mib,
        false,
    );
    pod.tolerations
        .push(karpenter_core::taints::Toleration::exists(""));
    DaemonSet::new(NAMESPACE, name, pod)
}

fn workload_pod(
    name: String,
    app: &str,
    owner_kind: &str,
    cpu_milli: i64,
    memory_mib: i64,
    do_not_disrupt: bool,
) -> Pod {
    let mut pod = Pod::new(NAMESPACE, name);
    pod.uid = String::new();
    pod.requests.insert("cpu", Quantity::from_milli(cpu_milli));
    pod.requests.insert(
        "memory",
        Quantity::from_bytes(memory_mib.saturating_mul(1 << 20)),
    );
    pod.labels.insert(APP_LABEL.to_string(), app.to_string());
    owned(pod, app, owner_kind, do_not_disrupt)
}

/// A pod of the workload `app` made from `template`: a fresh pending pod named `name`, owned
/// by `owner_kind` `app`.
fn templated_pod(
    template: &Pod,
    name: String,
    app: &str,
    owner_kind: &str,
    do_not_disrupt: bool,
) -> Pod {
    let mut pod = template.clone();
    pod.name = name;
    pod.uid = String::new();
    pod.node_name = None;
    pod.phase = karpenter_core::model::PodPhase::Pending;
    pod.deletion_timestamp = None;
    pod.start_time = None;
    pod.labels
        .entry(APP_LABEL.to_string())
        .or_insert_with(|| app.to_string());
    owned(pod, app, owner_kind, do_not_disrupt)
}

/// `pod` owned (as its controller) by the `owner_kind` `app`, with the do-not-disrupt
/// annotation when asked.
fn owned(mut pod: Pod, app: &str, owner_kind: &str, do_not_disrupt: bool) -> Pod {
    let api_version = if owner_kind == "Job" {
        "batch/v1"
    } else {
        "apps/v1"
    };
    pod.owner = Some(OwnerReference::new(api_version, owner_kind, app).with_controller(true));
    if do_not_disrupt {
        pod.annotations.insert(
            labels::DO_NOT_DISRUPT_ANNOTATION.to_string(),
            "true".to_string(),
        );
    }
    pod
}

/// The workload controllers' state kept by the simulator.
#[derive(Debug, Clone, Default)]
pub(super) struct Workloads {
    deployments: BTreeMap<String, Deployment>,
    next_pod: u64,
}

impl Sim {
    /// Adds a Deployment with no replicas (and its PodDisruptionBudget, if it has one); scale
    /// it with [`Sim::scale_deployment`].
    pub fn add_deployment(&mut self, deployment: Deployment) {
        if let Some(pdb) = deployment.pdb() {
            self.api.put_pdb(pdb);
        }
        self.workloads
            .deployments
            .insert(deployment.name.clone(), deployment);
        self.drain_api_events();
    }

    /// Sets a Deployment's replica count: pending pods are added, or pods removed (pending ones
    /// first, then the newest), as its ReplicaSet would. Returns `false` for an unknown
    /// Deployment.
    pub fn scale_deployment(&mut self, name: &str, replicas: u32) -> bool {
        let Some(deployment) = self.workloads.deployments.get(name).cloned() else {
            return false;
        };
        let mut pods: Vec<Pod> = self.workload_pods(name);
        let want = usize::try_from(replicas).unwrap_or(usize::MAX);
        if pods.len() < want {
            for _ in pods.len()..want {
                self.workloads.next_pod += 1;
                let pod = deployment.pod(format!("{name}-{}", self.workloads.next_pod));
                self.add_pod(pod);
            }
        } else if pods.len() > want {
            // Pending first, then the newest.
            pods.sort_by(|a, b| {
                a.node_name
                    .is_some()
                    .cmp(&b.node_name.is_some())
                    .then(b.creation_timestamp.cmp(&a.creation_timestamp))
                    .then(b.name.cmp(&a.name))
            });
            for pod in pods.into_iter().take(self.workload_pods(name).len() - want) {
                self.nominations.remove(&pod.key());
                self.api.delete_pod(&pod.key());
            }
        }
        self.drain_api_events();
        true
    }

    /// Starts a Job's pods.
    pub fn add_job(&mut self, job: Job) {
        for i in 0..job.pods {
            let name = format!("{}-{i}", job.name);
            let mut pod = match &job.template {
                Some(t) => templated_pod(t, name, &job.name, "Job", job.do_not_disrupt),
                None => workload_pod(
                    name,
                    &job.name,
                    "Job",
                    job.cpu_milli,
                    job.memory_mib,
                    job.do_not_disrupt,
                ),
            };
            let secs = job.run_for.as_secs().max(1);
            pod.annotations
                .insert(RUN_FOR_ANNOTATION.to_string(), format!("{secs}s"));
            self.add_pod(pod);
        }
        self.drain_api_events();
    }

    /// Adds a DaemonSet and starts its pod on every registered node it fits.
    pub fn add_daemonset(&mut self, ds: DaemonSet) {
        self.api.put_daemonset(ds);
        let nodes: Vec<_> = self.api.nodes.values().cloned().collect();
        for node in nodes {
            self.start_daemon_pods(&node);
        }
        self.drain_api_events();
    }

    /// The pods of the workload (Deployment, Job or DaemonSet) named `app`, not terminal.
    pub fn workload_pods(&self, app: &str) -> Vec<Pod> {
        self.api
            .pods
            .values()
            .filter(|p| p.owner.as_ref().is_some_and(|o| o.name == app) && !p.is_terminal())
            .cloned()
            .collect()
    }
}

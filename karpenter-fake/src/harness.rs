//! A provisioning-round harness for conformance tests, mirroring upstream's scheduling test
//! harness (upstream's scheduling tests, harness conventions).
//!
//! A [`Cluster`] holds NodePools, nodes with their bound pods, DaemonSets, pending pods and the
//! storage the pods use (a volume catalog and per-node CSI limits).
//! [`Cluster::provision`] runs one provisioning round:
//!
//! 1. the pods passed in join the pending pods (pods left unbound by earlier rounds stay pending
//!    and take part again);
//! 2. the [default topology spread constraints](Cluster::default_constraints), if any, are given
//!    to the copies of the pending pods that have none
//!    ([`karpenter_core::scheduling::defaults`]); then
//!    [`karpenter_core::scheduling::solve`] places every pending pod;
//! 3. every new NodeClaim is launched like [`crate::FakeCloudProvider`] does (upstream
//!    `fake.CloudProvider.Create`, see [`karpenter_core::launch::choose_launch`]) from its NodePool's
//!    instance types, and becomes a registered but uninitialized managed node (labels of the launch
//!    plus `kubernetes.io/hostname` = node name, `karpenter.sh/nodepool` and
//!    `karpenter.sh/registered=true`; the claim's taints and startup taints; the type's capacity
//!    and allocatable);
//! 4. the pods **passed to this call** are bound to the nodes the solve chose (new or existing);
//!    other pending pods stay pending even if the solve placed them.
//!
//! ```
//! use karpenter_core::model::Pod;
//! use karpenter_fake::catalog;
//! use karpenter_fake::harness::{node_pool, Cluster};
//!
//! let mut cluster = Cluster::new().with_node_pool(node_pool("default", catalog::default_catalog()));
//! let round = cluster.provision(vec![Pod::new("default", "a")]);
//! assert!(round.scheduled("default/a"));
//! let node = round.node_of("default/a").unwrap();
//! assert_eq!(node.labels["karpenter.sh/nodepool"], "default");
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use karpenter_core::labels;
use karpenter_core::model::{
    ClusterNode, DaemonSet, InstanceType, LabelSelector, Offering, Pod, TopologySpreadConstraint,
};
use karpenter_core::scheduling::defaults::{
    OwnerIndex, Service, WorkloadSelector, apply_default_constraints,
};
use karpenter_core::scheduling::{
    self, ExistingNodeInput, NewNodeClaim, NodePoolInput, Results, SchedulerOptions,
    SchedulingInput,
};
use karpenter_core::volumes::{CsiNodeLimits, VolumeCatalog};

use crate::catalog::{self, RESERVATION_ID_LABEL};
use karpenter_core::launch::{choose_launch, consume_reservation, drop_zeros, launch_labels};

/// A NodePool named `name` offering `instance_types`, with weight 0 and no requirements, labels,
/// taints, node class or limits. Adjust the public fields as a test needs.
pub fn node_pool(name: impl Into<String>, instance_types: Vec<Arc<InstanceType>>) -> NodePoolInput {
    NodePoolInput::new(name, instance_types)
}

/// The scheduler options of upstream's scheduling suite: [`catalog::fake_label_policy`], the
/// fake reservation-id label, at most 60 instance types per NodeClaim, and the defaults
/// otherwise (strict minValues and reserved capacity, preferences respected).
pub fn suite_options() -> SchedulerOptions {
    SchedulerOptions::default()
        .with_label_policy(catalog::fake_label_policy())
        .with_reservation_id_label(Some(RESERVATION_ID_LABEL.to_string()))
        .with_max_instance_types(60)
}

#[derive(Debug, Clone)]
struct NodeEntry {
    node: ClusterNode,
    pods: Vec<Pod>,
}

/// A simulated cluster: NodePools, nodes with their bound pods, DaemonSets and pending pods.
#[derive(Debug, Clone)]
pub struct Cluster {
    /// The NodePools, with the instance types they offer. Launches consume reserved offerings
    /// of these instance types.
    pub node_pools: Vec<NodePoolInput>,
    /// DaemonSets.
    pub daemonsets: Vec<DaemonSet>,
    /// Namespace labels, for pod-affinity namespace selectors.
    pub namespace_labels: BTreeMap<String, BTreeMap<String, String>>,
    /// Options of every solve (default: [`suite_options`]).
    pub options: SchedulerOptions,
    /// PersistentVolumeClaims, PersistentVolumes and StorageClasses (upstream `volumetopology.go` /
    /// `volumeusage.go`).
    pub volumes: VolumeCatalog,
    /// Per-node CSI attach limits (the nodes' CSINodes), by node name.
    volume_limits: BTreeMap<String, CsiNodeLimits>,
    /// kube-scheduler's default topology spread constraints
    /// (`podTopologySpread.defaultConstraints`), given to the solve's copies of the pending pods
    /// that have no constraints of their own.
    pub default_constraints: Vec<TopologySpreadConstraint>,
    /// Services, for deducing the selectors of default constraints.
    pub services: Vec<Service>,
    /// ReplicationControllers, ReplicaSets and StatefulSets that own pods, for deducing the
    /// selectors of default constraints.
    pub workload_selectors: Vec<WorkloadSelector>,
    nodes: Vec<NodeEntry>,
    pending: Vec<Pod>,
    next_node: u64,
}

impl Default for Cluster {
    fn default() -> Self {
        Self::new()
    }
}

/// A node launched in a round.
#[derive(Debug, Clone)]
pub struct LaunchedNode {
    /// Index of the NodeClaim in [`Round::results`]`.new_node_claims`.
    pub claim: usize,
    /// The node created for it.
    pub node: ClusterNode,
    /// The instance type it launched as.
    pub instance_type: Arc<InstanceType>,
    /// The offering it launched with.
    pub offering: Offering,
}

/// A NodeClaim of a round that could not be launched (no instance type of its NodePool has a
/// compatible available offering that fits its requests).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaunchFailure {
    /// Index of the NodeClaim in [`Round::results`]`.new_node_claims`.
    pub claim: usize,
    /// What went wrong.
    pub message: String,
}

/// The outcome of [`Cluster::provision`].
#[derive(Debug, Clone)]
pub struct Round {
    /// The solve's results.
    pub results: Results,
    /// Nodes launched for the new NodeClaims, in claim order.
    pub launched: Vec<LaunchedNode>,
    /// NodeClaims that could not be launched.
    pub launch_failures: Vec<LaunchFailure>,
    /// Pods bound in this round (only pods passed to the call): pod key → node name.
    pub bindings: BTreeMap<String, String>,
    /// The nodes pods were bound to in this round, by name, as they were at the end of the
    /// round.
    nodes: BTreeMap<String, ClusterNode>,
}

impl Round {
    /// The node `pod` (a `namespace/name` key) was bound to in this round.
    pub fn node_of(&self, pod: &str) -> Option<&ClusterNode> {
        self.bindings.get(pod).and_then(|n| self.nodes.get(n))
    }

    /// Whether `pod` (a `namespace/name` key) was bound in this round.
    pub fn scheduled(&self, pod: &str) -> bool {
        self.bindings.contains_key(pod)
    }

    /// The nodes created in this round, in claim order.
    pub fn created_nodes(&self) -> impl Iterator<Item = &ClusterNode> {
        self.launched.iter().map(|l| &l.node)
    }

    /// The NodeClaims the solve created.
    pub fn node_claims(&self) -> &[NewNodeClaim] {
        &self.results.new_node_claims
    }

    /// The launch of the node named `node`, if it was created in this round.
    pub fn launch_of(&self, node: &str) -> Option<&LaunchedNode> {
        self.launched.iter().find(|l| l.node.name == node)
    }

    /// The NodeClaim behind the node named `node`, if it was created in this round.
    pub fn claim_of(&self, node: &str) -> Option<&NewNodeClaim> {
        self.launch_of(node)
            .and_then(|l| self.results.new_node_claims.get(l.claim))
    }
}

/// The environment variable that runs every [`Cluster`] under a packing policy: `cost` or
/// `upstream` (the suites run under both: `KARPENTER_FAKE_PACKING=cost cargo test -p
/// karpenter-fake --test it topology`). Unset or unknown: the options' default (per NodePool,
/// `upstream` without the annotation).
pub const PACKING_ENV: &str = "KARPENTER_FAKE_PACKING";

/// The packing policy [`PACKING_ENV`] asks for.
fn packing_from_env() -> Option<karpenter_core::scheduling::packing::PackingPolicy> {
    std::env::var(PACKING_ENV).ok()?.parse().ok()
}

impl Cluster {
    /// An empty cluster with [`suite_options`] (and the packing policy of [`PACKING_ENV`], if
    /// set).
    pub fn new() -> Self {
        let options = suite_options().with_packing(
            karpenter_core::scheduling::packing::PackingOptions::default()
                .with_policy(packing_from_env()),
        );
        Cluster {
            node_pools: Vec::new(),
            daemonsets: Vec::new(),
            namespace_labels: BTreeMap::new(),
            options,
            volumes: VolumeCatalog::default(),
            volume_limits: BTreeMap::new(),
            default_constraints: Vec::new(),
            services: Vec::new(),
            workload_selectors: Vec::new(),
            nodes: Vec::new(),
            pending: Vec::new(),
            next_node: 1,
        }
    }

    /// Adds a NodePool (builder style).
    pub fn with_node_pool(mut self, pool: NodePoolInput) -> Self {
        self.node_pools.push(pool);
        self
    }

    /// Adds a NodePool.
    pub fn add_node_pool(&mut self, pool: NodePoolInput) {
        self.node_pools.push(pool);
    }

    /// The NodePool named `name`, for changes.
    pub fn node_pool_mut(&mut self, name: &str) -> Option<&mut NodePoolInput> {
        self.node_pools.iter_mut().find(|p| p.name == name)
    }

    /// Adds a DaemonSet.
    pub fn add_daemonset(&mut self, daemonset: DaemonSet) {
        self.daemonsets.push(daemonset);
    }

    /// Adds an existing node (replacing a node of the same name, and its pods).
    pub fn add_node(&mut self, node: ClusterNode) {
        self.add_node_with_pods(node, Vec::new());
    }

    /// Adds an existing node with pods bound to it (their `node_name` is set).
    pub fn add_node_with_pods(&mut self, node: ClusterNode, pods: Vec<Pod>) {
        self.nodes.retain(|e| e.node.name != node.name);
        let pods = pods
            .into_iter()
            .map(|mut p| {
                p.node_name = Some(node.name.clone());
                p
            })
            .collect();
        self.nodes.push(NodeEntry { node, pods });
    }

    /// Sets the node's attach limit for a CSI driver, as its CSINode's
    /// `spec.drivers[].allocatable.count` would (upstream tests apply a CSINode and reconcile
    /// the node).
    pub fn set_volume_limit(&mut self, node: &str, driver: &str, count: u32) {
        self.volume_limits
            .entry(node.to_string())
            .or_default()
            .insert(driver.to_string(), count);
    }

    /// The node's CSI attach limits.
    pub fn volume_limits(&self, node: &str) -> CsiNodeLimits {
        self.volume_limits.get(node).cloned().unwrap_or_default()
    }

    /// Removes the node named `name` with its pods (and volume limits); returns whether it
    /// existed.
    pub fn remove_node(&mut self, name: &str) -> bool {
        self.volume_limits.remove(name);
        let before = self.nodes.len();
        self.nodes.retain(|e| e.node.name != name);
        self.nodes.len() != before
    }

    /// Every node, in the order added or launched.
    pub fn nodes(&self) -> impl Iterator<Item = &ClusterNode> {
        self.nodes.iter().map(|e| &e.node)
    }

    /// The number of nodes.
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// The node named `name`.
    pub fn node(&self, name: &str) -> Option<&ClusterNode> {
        self.nodes
            .iter()
            .find(|e| e.node.name == name)
            .map(|e| &e.node)
    }

    /// The node named `name`, for changes (labels, taints, deletion mark, …).
    pub fn node_mut(&mut self, name: &str) -> Option<&mut ClusterNode> {
        self.nodes
            .iter_mut()
            .find(|e| e.node.name == name)
            .map(|e| &mut e.node)
    }

    /// Marks the node named `name` initialized (`initialized = true` and the
    /// `karpenter.sh/initialized=true` label; startup and other taints are left as they are).
    /// Returns whether the node exists.
    pub fn mark_initialized(&mut self, name: &str) -> bool {
        match self.node_mut(name) {
            Some(node) => {
                node.initialized = true;
                node.labels
                    .insert(labels::INITIALIZED.to_string(), "true".to_string());
                true
            }
            None => false,
        }
    }

    /// The pods bound to the node named `name` (empty if there is no such node).
    pub fn pods_on(&self, name: &str) -> &[Pod] {
        self.nodes
            .iter()
            .find(|e| e.node.name == name)
            .map_or(&[], |e| e.pods.as_slice())
    }

    /// The node `pod` (a `namespace/name` key) is bound to.
    pub fn node_of(&self, pod: &str) -> Option<&ClusterNode> {
        self.nodes
            .iter()
            .find(|e| e.pods.iter().any(|p| p.key() == pod))
            .map(|e| &e.node)
    }

    /// Every bound pod with its node, in node order.
    pub fn bound_pods(&self) -> impl Iterator<Item = (&ClusterNode, &Pod)> {
        self.nodes
            .iter()
            .flat_map(|e| e.pods.iter().map(move |p| (&e.node, p)))
    }

    /// Pods still pending (passed to an earlier round and not bound).
    pub fn pending(&self) -> &[Pod] {
        &self.pending
    }

    /// Binds `pod` to the node named `node` (sets its `node_name`; removes a pending pod of the
    /// same key). Returns false, changing nothing, if there is no such node.
    pub fn bind(&mut self, mut pod: Pod, node: &str) -> bool {
        let key = pod.key();
        let Some(entry) = self.nodes.iter_mut().find(|e| e.node.name == node) else {
            return false;
        };
        pod.node_name = Some(node.to_string());
        entry.pods.retain(|p| p.key() != key);
        entry.pods.push(pod);
        self.pending.retain(|p| p.key() != key);
        true
    }

    /// Deletes the pod with key `pod`, pending or bound; returns whether it existed.
    pub fn delete_pod(&mut self, pod: &str) -> bool {
        let mut found = false;
        let before = self.pending.len();
        self.pending.retain(|p| p.key() != pod);
        found |= self.pending.len() != before;
        for e in &mut self.nodes {
            let before = e.pods.len();
            e.pods.retain(|p| p.key() != pod);
            found |= e.pods.len() != before;
        }
        found
    }

    /// The scheduling input a round would solve: the NodePools, every node with its pods and
    /// volume limits, the DaemonSets, the pending pods (with the default constraints applied),
    /// the namespace labels and the volume catalog.
    pub fn scheduling_input(&self) -> SchedulingInput {
        let mut pods = self.pending.clone();
        let owners = OwnerIndex::new(self.workload_selectors.iter().cloned());
        apply_default_constraints(
            &mut pods,
            &self.default_constraints,
            &self.services,
            &owners,
        );
        SchedulingInput::new()
            .with_node_pools(self.node_pools.clone())
            .with_existing_nodes(
                self.nodes
                    .iter()
                    .map(|e| {
                        ExistingNodeInput::new(e.node.clone(), e.pods.clone())
                            .with_volume_limits(self.volume_limits(&e.node.name))
                    })
                    .collect(),
            )
            .with_daemonsets(self.daemonsets.clone())
            .with_pods(pods)
            .with_namespace_labels(self.namespace_labels.clone())
            .with_volumes(self.volumes.clone())
    }

    /// Runs one provisioning round with `pods` (see the [module documentation](self)).
    pub fn provision(&mut self, pods: Vec<Pod>) -> Round {
        let mut passed: BTreeMap<String, Pod> = BTreeMap::new();
        for pod in pods {
            let key = pod.key();
            if self.node_of(&key).is_some() {
                continue;
            }
            match self.pending.iter_mut().find(|p| p.key() == key) {
                Some(existing) => *existing = pod.clone(),
                None => self.pending.push(pod.clone()),
            }
            passed.insert(key, pod);
        }

        let results =
            scheduling::packing::solve_with_policy(&self.scheduling_input(), &self.options);

        let mut launched = Vec::new();
        let mut launch_failures = Vec::new();
        let mut placements: Vec<(String, String)> = Vec::new();
        for (index, claim) in results.new_node_claims.iter().enumerate() {
            match self.launch(index, claim) {
                Ok(node) => {
                    for pod in &claim.pods {
                        placements.push((pod.clone(), node.node.name.clone()));
                    }
                    launched.push(node);
                }
                Err(message) => launch_failures.push(LaunchFailure {
                    claim: index,
                    message,
                }),
            }
        }
        for existing in &results.existing_nodes {
            for pod in &existing.pods {
                placements.push((pod.clone(), existing.name.clone()));
            }
        }

        let mut bindings = BTreeMap::new();
        for (key, node) in placements {
            if let Some(pod) = passed.remove(&key)
                && self.bind(pod, &node)
            {
                bindings.insert(key, node);
            }
        }
        let bound_nodes: BTreeSet<&String> = bindings.values().collect();
        let nodes = self
            .nodes
            .iter()
            .filter(|e| bound_nodes.contains(&e.node.name))
            .map(|e| (e.node.name.clone(), e.node.clone()))
            .collect();
        Round {
            results,
            launched,
            launch_failures,
            bindings,
            nodes,
        }
    }

    /// Launches one NodeClaim from its NodePool's instance types (upstream
    /// `fake.CloudProvider.Create`) and adds its node.
    fn launch(&mut self, index: usize, claim: &NewNodeClaim) -> Result<LaunchedNode, String> {
        let policy = &self.options.label_policy;
        let pool = self
            .node_pools
            .iter_mut()
            .find(|p| p.name == claim.node_pool);
        let mut fallback = claim.instance_types.clone();
        let types = match pool {
            Some(pool) => &mut pool.instance_types,
            None => &mut fallback,
        };
        let claim_requirements = claim.node_claim_requirements(policy);
        let choice = choose_launch(
            types,
            &claim_requirements,
            &claim.requests,
            policy,
            |_, _| false,
        )
        .ok_or_else(|| {
            format!(
                "no instance type of nodepool {:?} can launch the nodeclaim",
                claim.node_pool
            )
        })?;
        let slot = types
            .get_mut(choice.instance_type)
            .ok_or_else(|| "instance type vanished during launch".to_string())?;
        let instance_type = Arc::clone(slot);
        let offering = instance_type
            .offerings
            .get(choice.offering)
            .cloned()
            .ok_or_else(|| "offering vanished during launch".to_string())?;
        consume_reservation(slot, choice.offering);

        let name = format!("{}-{:05}", claim.node_pool, self.next_node);
        self.next_node += 1;
        let mut node_labels = launch_labels(
            &instance_type,
            &offering,
            &claim_requirements,
            &claim.labels,
            self.options.reservation_id_label.as_deref(),
        );
        node_labels.insert(labels::NODEPOOL.to_string(), claim.node_pool.clone());
        node_labels.insert(labels::HOSTNAME.to_string(), name.clone());
        node_labels.insert(labels::REGISTERED.to_string(), "true".to_string());
        let mut taints = claim.taints.clone();
        taints.extend(claim.startup_taints.iter().cloned());
        taints.retain(|t| t.key != labels::UNREGISTERED_TAINT_KEY);
        let mut node = ClusterNode::new(name);
        node.labels = node_labels;
        node.taints = taints;
        node.startup_taints = claim.startup_taints.clone();
        node.capacity = drop_zeros(instance_type.capacity());
        node.allocatable = drop_zeros(instance_type.allocatable());
        node.managed = true;
        node.initialized = false;
        self.nodes.push(NodeEntry {
            node: node.clone(),
            pods: Vec::new(),
        });
        Ok(LaunchedNode {
            claim: index,
            node,
            instance_type,
            offering,
        })
    }

    /// Upstream's `ExpectSkew`: for every bound pod (not terminal, not terminating) whose labels
    /// match `selector`, count it in the domain of its node — the node's name for
    /// `kubernetes.io/hostname`, else the node's `key` label (pods on nodes without it are not
    /// counted). Returns the counts per domain, sorted ascending.
    pub fn skew(&self, key: &str, selector: &LabelSelector) -> Vec<usize> {
        let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
        for (node, pod) in self.bound_pods() {
            if pod.is_terminal() || pod.is_terminating() || !selector.matches(&pod.labels) {
                continue;
            }
            let domain = if key == labels::HOSTNAME {
                Some(node.name.as_str())
            } else {
                node.labels.get(key).map(String::as_str)
            };
            if let Some(d) = domain {
                *counts.entry(d).or_insert(0) += 1;
            }
        }
        let mut out: Vec<usize> = counts.into_values().collect();
        out.sort_unstable();
        out
    }
}

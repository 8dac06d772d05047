//! `karpenter plan`: from decoded documents to the contract's output.
//!
//! 1. Decode the documents ([`crate::manifests::classify`]) and load the catalog.
//! 2. Validate every NodePool against the catalog's label policy (exit 2 on the first invalid
//!    one); static (`spec.replicas`) and deleting NodePools are left out of provisioning.
//! 3. Build the scheduler's input: pending pods (bare Pods without `spec.nodeName`, and the
//!    pods of Deployments, ReplicaSets, StatefulSets and Jobs), DaemonSets as overhead, Nodes
//!    with their bound pods, NodeClaims without a Node as in-flight nodes.
//! 4. Solve, price every new NodeClaim at its cheapest compatible offering, compute the lower
//!    bound, explain left-out pods (`--explain`) and collect operator advice.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Pod as K8sPod, PodSpec, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use karpenter_core::api::{NodeClaim, NodePool};
use karpenter_core::convert::{
    ConvertError, csi_node_limits_from_k8s, daemonset_from_k8s_with_pod, newest_daemonset_pod,
    node_from_k8s, pdb_from_k8s, pod_from_k8s, pv_from_k8s, pvc_from_k8s, storage_class_from_k8s,
};
use karpenter_core::labels::{self, LabelPolicy};
use karpenter_core::model::{
    ClusterNode, DaemonSet, InstanceType, Pod, PodDisruptionBudget, Timestamp,
};
use karpenter_core::requirements::{Operator, Requirement, Requirements};
use karpenter_core::resources::ResourceList;
use karpenter_core::scheduling::{
    ExistingNodeInput, NewNodeClaim, NodePoolInput, Results, SchedulerOptions, SchedulingInput,
    solve,
};
use karpenter_core::taints::{self, Toleration};
use karpenter_core::volumes::{VolumeCatalog, VolumeSource};

use crate::catalog::{Catalog, CatalogLoadError, CatalogSpec};
use crate::disruption::{self, DisruptionInput};
use crate::lowerbound::{BoundColumn, BoundPod, lower_bound};
use crate::manifests::{
    Document, Located, ManifestError, Manifests, NodeClass, Origin, Workload, classify,
};
use crate::output::{
    ClaimOutput, ExistingNodeOutput, Launch, PlanOutput, PoolExplanation, Summary,
    UnschedulableOutput,
};
use crate::warnings::{self, PoolContext, RULES, Warning};

/// The most pods one workload may expand into.
pub const MAX_REPLICAS: i32 = 1_000_000;

/// What `karpenter plan` was asked.
#[derive(Debug, Clone, PartialEq)]
pub struct PlanOptions {
    /// `--catalog`.
    pub catalog: CatalogSpec,
    /// `--spot-price-factor` (AWS catalog only).
    pub spot_price_factor: Option<f64>,
    /// `--disruption`.
    pub disruption: bool,
    /// `--now` (or the current time).
    pub now: Timestamp,
    /// `--explain`.
    pub explain: bool,
    /// `--allow RULE`: warnings of these rules are dropped.
    pub allow: Vec<String>,
}

impl PlanOptions {
    /// Options with the AWS catalog and nothing else set.
    pub fn new(now: Timestamp) -> Self {
        PlanOptions {
            catalog: CatalogSpec::Aws,
            spot_price_factor: None,
            disruption: false,
            now,
            explain: false,
            allow: Vec::new(),
        }
    }
}

/// Why no plan was made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    /// Invalid input: exit status 2.
    #[error("{0}")]
    Input(String),
    /// A bug or broken embedded data: exit status 1.
    #[error("internal error: {0}")]
    Internal(String),
}

impl PlanError {
    /// The process exit status for this error.
    pub fn exit_code(&self) -> i32 {
        match self {
            PlanError::Input(_) => 2,
            PlanError::Internal(_) => 1,
        }
    }
}

impl From<ManifestError> for PlanError {
    fn from(e: ManifestError) -> Self {
        PlanError::Input(e.to_string())
    }
}

impl From<CatalogLoadError> for PlanError {
    fn from(e: CatalogLoadError) -> Self {
        match e {
            CatalogLoadError::Input(m) => PlanError::Input(m),
            CatalogLoadError::Internal(m) => PlanError::Internal(m),
        }
    }
}

/// A plan and what to tell the user on standard error.
#[derive(Debug, Clone, PartialEq)]
pub struct PlanResult {
    /// The contract's document.
    pub output: PlanOutput,
    /// Notices for standard error (skipped documents, ignored fields, unwired features).
    pub notices: Vec<String>,
}

/// A pod with where it came from.
#[derive(Debug, Clone)]
struct PodEntry {
    pod: Pod,
    /// The object that produced it (`Pod/ns/name` or `Deployment/ns/web`).
    source: String,
    /// Whether the source is a Karpenter controller.
    controller: bool,
}

/// The ConvertError's message without its `object: field` prefix.
fn convert_message(e: &ConvertError) -> String {
    let full = e.to_string();
    let rest = full
        .strip_prefix(&format!("{}: ", e.object()))
        .unwrap_or(&full);
    let field = e.field();
    let rest = rest.strip_prefix(field.as_str()).unwrap_or(rest);
    rest.trim_start_matches(": ").trim().to_string()
}

fn convert_error(origin: &Origin, object: &str, prefix: &str, e: &ConvertError) -> ManifestError {
    ManifestError::invalid(
        origin,
        object,
        format!("{prefix}{}", e.field()),
        convert_message(e),
    )
}

/// The pods a workload runs: `replicas` (Job: `parallelism`, none while suspended) copies of
/// its template named `<name>-<i>`.
fn expand_workload(w: &Located<Workload>) -> Result<Vec<K8sPod>, ManifestError> {
    let missing = |field: &str| ManifestError::invalid(&w.origin, &w.name, field, "Required value");
    let (meta, count, template, owner_kind, count_field): (
        &ObjectMeta,
        i32,
        Option<&PodTemplateSpec>,
        &str,
        &str,
    ) = match &w.object {
        Workload::Deployment(d) => {
            let spec = d.spec.as_ref().ok_or_else(|| missing("spec"))?;
            (
                &d.metadata,
                spec.replicas.unwrap_or(1),
                Some(&spec.template),
                "ReplicaSet",
                "spec.replicas",
            )
        }
        Workload::ReplicaSet(r) => {
            let spec = r.spec.as_ref().ok_or_else(|| missing("spec"))?;
            (
                &r.metadata,
                spec.replicas.unwrap_or(1),
                spec.template.as_ref(),
                "ReplicaSet",
                "spec.replicas",
            )
        }
        Workload::StatefulSet(s) => {
            let spec = s.spec.as_ref().ok_or_else(|| missing("spec"))?;
            (
                &s.metadata,
                spec.replicas.unwrap_or(1),
                Some(&spec.template),
                "StatefulSet",
                "spec.replicas",
            )
        }
        Workload::Job(j) => {
            let spec = j.spec.as_ref().ok_or_else(|| missing("spec"))?;
            let n = if spec.suspend == Some(true) {
                0
            } else {
                spec.parallelism.unwrap_or(1)
            };
            (
                &j.metadata,
                n,
                Some(&spec.template),
                "Job",
                "spec.parallelism",
            )
        }
    };
    let name = meta
        .name
        .as_deref()
        .filter(|n| !n.is_empty())
        .ok_or_else(|| missing("metadata.name"))?;
    if !(0..=MAX_REPLICAS).contains(&count) {
        return Err(ManifestError::invalid(
            &w.origin,
            &w.name,
            count_field,
            format!("Invalid value: {count}: must be between 0 and {MAX_REPLICAS}"),
        ));
    }
    let template = template.ok_or_else(|| missing("spec.template"))?;
    let spec: &PodSpec = template
        .spec
        .as_ref()
        .ok_or_else(|| missing("spec.template.spec"))?;
    let namespace = meta
        .namespace
        .clone()
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| "default".to_string());
    let tmeta = template.metadata.clone().unwrap_or_default();
    let api_version = match owner_kind {
        "Job" => "batch/v1",
        _ => "apps/v1",
    };
    Ok((0..count)
        .map(|i| {
            let pod_name = format!("{name}-{i}");
            K8sPod {
                metadata: ObjectMeta {
                    name: Some(pod_name.clone()),
                    namespace: Some(namespace.clone()),
                    uid: Some(replica_uid(&namespace, name, i)),
                    labels: tmeta.labels.clone(),
                    annotations: tmeta.annotations.clone(),
                    creation_timestamp: meta.creation_timestamp.clone(),
                    owner_references: Some(vec![OwnerReference {
                        api_version: api_version.to_string(),
                        kind: owner_kind.to_string(),
                        name: name.to_string(),
                        uid: meta.uid.clone().unwrap_or_default(),
                        controller: Some(true),
                        block_owner_deletion: Some(true),
                    }]),
                    ..ObjectMeta::default()
                },
                spec: Some(spec.clone()),
                status: None,
            }
        })
        .collect())
}

/// The synthetic UID of a workload's `i`-th replica: `<namespace>/<name>-<i>`, the index
/// zero-padded to 7 digits so that equal replicas queue by index (`web-2` before `web-10`).
/// Real replicas queue by creation time (one-second resolution), then by their random UIDs;
/// the index stands in for the order a controller creates them in.
fn replica_uid(namespace: &str, name: &str, i: i32) -> String {
    format!("{namespace}/{name}-{i:07}")
}

fn workload_template_labels(w: &Workload) -> BTreeMap<String, String> {
    let template_meta = match w {
        Workload::Deployment(d) => d.spec.as_ref().and_then(|s| s.template.metadata.as_ref()),
        Workload::ReplicaSet(r) => r
            .spec
            .as_ref()
            .and_then(|s| s.template.as_ref())
            .and_then(|t| t.metadata.as_ref()),
        Workload::StatefulSet(s) => s.spec.as_ref().and_then(|s| s.template.metadata.as_ref()),
        Workload::Job(j) => j.spec.as_ref().and_then(|s| s.template.metadata.as_ref()),
    };
    let mut out = template_meta
        .and_then(|m| m.labels.clone())
        .unwrap_or_default();
    let meta = match w {
        Workload::Deployment(d) => &d.metadata,
        Workload::ReplicaSet(r) => &r.metadata,
        Workload::StatefulSet(s) => &s.metadata,
        Workload::Job(j) => &j.metadata,
    };
    out.extend(meta.labels.clone().unwrap_or_default());
    out
}

fn workload_name(w: &Workload) -> &str {
    let meta = match w {
        Workload::Deployment(d) => &d.metadata,
        Workload::ReplicaSet(r) => &r.metadata,
        Workload::StatefulSet(s) => &s.metadata,
        Workload::Job(j) => &j.metadata,
    };
    meta.name.as_deref().unwrap_or("")
}

/// A NodePool's template requirements as the scheduler builds them (requirements, template
/// labels, the NodePool label and the node-class label).
fn template_requirements(np: &NodePoolInput) -> Requirements {
    let mut reqs = Requirements::from_node_selector_requirements(&np.requirements);
    let mut l = np.labels.clone();
    l.insert(labels::NODEPOOL.to_string(), np.name.clone());
    if let Some((k, v)) = &np.node_class_label {
        l.insert(k.clone(), v.clone());
    }
    for (k, v) in &l {
        reqs.add(Requirement::new(k, Operator::In, [v.as_str()]));
    }
    reqs
}

fn with_prefer_no_schedule(tolerations: &[Toleration]) -> Vec<Toleration> {
    let mut t = tolerations.to_vec();
    t.push(taints::prefer_no_schedule_wildcard());
    t
}

/// The pod's node-selector terms: the node selector ANDed with each required node-affinity term
/// (one term, the selector alone, without node affinity).
fn pod_terms(pod: &Pod) -> Vec<Requirements> {
    let selector = Requirements::from_labels(
        pod.node_selector
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str())),
    );
    match pod
        .node_affinity
        .as_ref()
        .filter(|a| !a.required.is_empty())
    {
        None => vec![selector],
        Some(a) => a
            .required
            .iter()
            .map(|term| {
                selector.intersection(&Requirements::from_node_selector_requirements(
                    &term.match_expressions,
                ))
            })
            .collect(),
    }
}

/// The lower-bound columns, each column's (pool index, instance type), and each pool's template
/// requirements.
type Columns = (
    Vec<BoundColumn>,
    Vec<(usize, Arc<InstanceType>)>,
    Vec<Requirements>,
);

/// The lower-bound columns: every (NodePool, instance type) a new node can be, priced at the
/// cheapest offering the pool may launch, with allocatable less the DaemonSets that surely run
/// on it.
fn bound_columns(
    pools: &[NodePoolInput],
    daemonsets: &[DaemonSet],
    policy: &LabelPolicy,
) -> Columns {
    let mut columns = Vec::new();
    let mut meta = Vec::new();
    let mut pool_reqs = Vec::new();
    for (pi, np) in pools.iter().enumerate() {
        let reqs = template_requirements(np);
        // DaemonSets that run on every node of the pool whatever its type.
        let mut overhead = ResourceList::new();
        for d in daemonsets {
            let p = &d.pod;
            let unconditional = p.node_selector.is_empty()
                && p.node_affinity
                    .as_ref()
                    .is_none_or(|a| a.required.is_empty())
                && !p.has_resource_claims
                && taints::tolerates_all(&with_prefer_no_schedule(&p.tolerations), &np.taints)
                    .is_ok();
            if unconditional {
                overhead.add_assign(&p.scheduling_requests());
            }
        }
        for it in &np.instance_types {
            if it.requirements.intersects(&reqs).is_err() {
                continue;
            }
            let price = it
                .available_offerings()
                .filter(|o| reqs.is_compatible(o.requirements(), Some(policy)))
                .map(|o| o.price)
                .fold(f64::INFINITY, f64::min);
            if !price.is_finite() {
                continue;
            }
            let mut allocatable = it.allocatable().sub(&overhead);
            allocatable.clamp_non_negative();
            columns.push(BoundColumn {
                name: format!("{}/{}", np.name, it.name),
                price,
                allocatable,
            });
            meta.push((pi, it.clone()));
        }
        pool_reqs.push(reqs);
    }
    (columns, meta, pool_reqs)
}

/// A key shared by pods that must be on pairwise different nodes: the pod's namespace and its
/// first required hostname anti-affinity term that selects the pod itself (so every pod with
/// the same key selects every other).
fn exclusive_key(pod: &Pod) -> Option<String> {
    let anti = pod.pod_anti_affinity.as_ref()?;
    anti.required
        .iter()
        .find(|term| {
            term.topology_key == labels::HOSTNAME
                && term.namespace_selector.is_none()
                && (term.namespaces.is_empty() || term.namespaces.contains(&pod.namespace))
                && term
                    .label_selector
                    .as_ref()
                    .is_some_and(|s| s.matches(&pod.labels))
        })
        .and_then(|term| serde_json::to_string(term).ok())
        .map(|term| format!("{}/{term}", pod.namespace))
}

/// The lower bound for the pods placed on new NodeClaims.
fn compute_lower_bound(
    input: &SchedulingInput,
    results: &Results,
    policy: &LabelPolicy,
) -> Result<f64, PlanError> {
    let placed: BTreeSet<&str> = results
        .new_node_claims
        .iter()
        .flat_map(|c| c.pods.iter().map(String::as_str))
        .collect();
    if placed.is_empty() {
        return Ok(0.0);
    }
    let (columns, meta, pool_reqs) = bound_columns(&input.node_pools, &input.daemonsets, policy);
    // Compatibility per scheduling signature (replicas share one).
    let mut cache: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    let mut groups: BTreeMap<String, usize> = BTreeMap::new();
    let mut pods = Vec::new();
    for pod in input
        .pods
        .iter()
        .filter(|p| placed.contains(p.key().as_str()))
    {
        let requests = pod.scheduling_requests();
        let signature = serde_json::to_string(&(
            &pod.node_selector,
            &pod.node_affinity,
            &pod.tolerations,
            &requests,
        ))
        .map_err(|e| PlanError::Internal(e.to_string()))?;
        let compatible = cache
            .entry(signature)
            .or_insert_with(|| {
                let terms = pod_terms(pod);
                let tolerations = with_prefer_no_schedule(&pod.tolerations);
                let tolerated: Vec<bool> = input
                    .node_pools
                    .iter()
                    .map(|np| taints::tolerates_all(&tolerations, &np.taints).is_ok())
                    .collect();
                (0..columns.len())
                    .filter(|&k| {
                        let (pi, it) = &meta[k];
                        tolerated[*pi]
                            && ResourceList::fits(&requests, &columns[k].allocatable)
                            && terms.iter().any(|t| {
                                t.intersects(&pool_reqs[*pi]).is_ok()
                                    && t.intersects(&it.requirements).is_ok()
                            })
                    })
                    .collect()
            })
            .clone();
        let exclusive_group = match exclusive_key(pod) {
            Some(key) => {
                let next = groups.len();
                Some(*groups.entry(key).or_insert(next))
            }
            None => None,
        };
        pods.push(BoundPod {
            requests,
            compatible,
            exclusive_group,
        });
    }
    Ok(lower_bound(&columns, &pods))
}

/// The cheapest available offering compatible with the claim among its instance types (the
/// first, in the claim's order, on a tie).
pub(crate) fn launch_of(
    instance_types: &[Arc<InstanceType>],
    requirements: &Requirements,
    policy: &LabelPolicy,
) -> Option<Launch> {
    let mut best: Option<Launch> = None;
    for it in instance_types {
        if let Some(o) = it.cheapest_offering(requirements, policy)
            && best.as_ref().is_none_or(|b| o.price < b.price_per_hour)
        {
            best = Some(Launch {
                instance_type: it.name.clone(),
                zone: o.zone.clone(),
                capacity_type: o.capacity_type.clone(),
                price_per_hour: o.price,
            });
        }
    }
    best
}

fn parse_time(
    origin: &Origin,
    object: &str,
    field: &str,
    text: Option<&str>,
) -> Result<Timestamp, ManifestError> {
    match text {
        None => Ok(Timestamp::UNIX_EPOCH),
        Some(t) => t.parse::<Timestamp>().map_err(|e| {
            ManifestError::invalid(origin, object, field, format!("Invalid value: {t:?}: {e}"))
        }),
    }
}

/// An in-flight NodeClaim (no Node yet) as a node: its labels plus the single values of its
/// requirements, its status resources (or, before launch, its instance type's from the
/// catalog), its taints; not initialized.
fn inflight_node(
    claim: &Located<NodeClaim>,
    pools: &[NodePoolInput],
) -> Result<ClusterNode, ManifestError> {
    let c = &claim.object;
    let mut node = ClusterNode::new(c.name());
    node.labels = c.metadata.labels.clone();
    let reqs = Requirements::from_node_selector_requirements(c.spec.requirements());
    for r in reqs.iter() {
        if r.operator() == Operator::In
            && let Some(v) = r.single_value()
        {
            node.labels
                .entry(r.key().to_string())
                .or_insert_with(|| v.to_string());
        }
    }
    node.taints = c.spec.taints.clone();
    node.startup_taints = c.spec.startup_taints.clone();
    node.capacity = c.status.capacity.clone();
    node.allocatable = if c.status.allocatable.is_empty() {
        c.status.capacity.clone()
    } else {
        c.status.allocatable.clone()
    };
    if node.allocatable.is_empty()
        && let Some(it_name) = node.labels.get(labels::INSTANCE_TYPE)
    {
        let pool = node.labels.get(labels::NODEPOOL);
        let found = pools
            .iter()
            .filter(|p| pool.is_none_or(|n| *n == p.name))
            .chain(pools.iter())
            .flat_map(|p| p.instance_types.iter())
            .find(|it| it.name == *it_name);
        if let Some(it) = found {
            node.capacity = it.capacity.clone();
            node.allocatable = it.allocatable().clone();
        }
    }
    node.managed = node.labels.contains_key(labels::NODEPOOL);
    node.initialized = false;
    node.marked_for_deletion = c.metadata.deletion_timestamp.is_some();
    node.creation_timestamp = parse_time(
        &claim.origin,
        &claim.name,
        "metadata.creationTimestamp",
        c.metadata.creation_timestamp.as_deref(),
    )?;
    Ok(node)
}

/// Everything built from the manifests.
struct World {
    pools: Vec<NodePool>,
    pool_inputs: Vec<NodePoolInput>,
    daemonsets: Vec<DaemonSet>,
    pdbs: Vec<PodDisruptionBudget>,
    pending: Vec<PodEntry>,
    nodes: BTreeMap<String, ExistingNodeInput>,
    bound_sources: BTreeMap<String, PodEntry>,
    nodeclaims: Vec<NodeClaim>,
    warnings: Vec<Warning>,
    volumes: VolumeCatalog,
}

fn build_world(
    m: &Manifests,
    catalog: &mut Catalog,
    aws: bool,
    notices: &mut Vec<String>,
) -> Result<World, PlanError> {
    let policy = catalog.policy.clone();

    // EC2NodeClasses by name.
    let mut classes: BTreeMap<&str, &Located<NodeClass>> = BTreeMap::new();
    for c in &m.nodeclasses {
        if let Some(prev) = classes.insert(c.object.name.as_str(), c) {
            return Err(ManifestError::invalid(
                &c.origin,
                &c.name,
                "metadata.name",
                format!("Duplicate value: also defined at {}", prev.origin),
            )
            .into());
        }
    }

    // NodePools: unique, valid; static and deleting ones left out.
    let mut by_name: BTreeMap<&str, &Located<NodePool>> = BTreeMap::new();
    for p in &m.nodepools {
        if let Some(prev) = by_name.insert(p.object.name(), p) {
            return Err(ManifestError::invalid(
                &p.origin,
                &p.name,
                "metadata.name",
                format!("Duplicate value: also defined at {}", prev.origin),
            )
            .into());
        }
        if let Err(errors) = p.object.validate(&policy) {
            let mut iter = errors.0.into_iter();
            if let Some(first) = iter.next() {
                let rest: Vec<String> = iter.map(|e| e.to_string()).collect();
                let mut message = format!("{first}");
                if let Some(stripped) = message.strip_prefix(&format!("{}: ", first.path)) {
                    message = stripped.to_string();
                }
                if !rest.is_empty() {
                    message = format!("{message} (also: {})", rest.join("; "));
                }
                return Err(ManifestError::invalid(&p.origin, &p.name, first.path, message).into());
            }
        }
    }
    let mut pools = Vec::new();
    let mut pool_inputs = Vec::new();
    let mut warnings = Vec::new();
    for (name, p) in &by_name {
        if p.object.is_static() {
            notices.push(format!(
                "{}: NodePool/{name}: static (spec.replicas): not used for provisioning",
                p.origin
            ));
            continue;
        }
        if p.object.metadata.deletion_timestamp.is_some() {
            notices.push(format!(
                "{}: NodePool/{name}: being deleted: not used for provisioning",
                p.origin
            ));
            continue;
        }
        let class_ref = &p.object.spec.template.spec.node_class_ref;
        let class = if aws
            && class_ref.group == karpenter_aws::catalog::labels::GROUP
            && class_ref.kind == "EC2NodeClass"
        {
            classes.get(class_ref.name.as_str()).copied()
        } else {
            None
        };
        if aws && class.is_none() && !m.nodeclasses.is_empty() {
            warnings.push(warnings::nodeclass_warning(&p.object));
        }
        let types = catalog.instance_types_for(class)?;
        pool_inputs.push(NodePoolInput::from_nodepool(&p.object, types));
        pools.push(p.object.clone());
    }

    // A DaemonSet's newest live pod, when the input has one, is its template (as upstream).
    let daemonsets = m
        .daemonsets
        .iter()
        .map(|d| {
            let live = newest_daemonset_pod(&d.object, m.pods.iter().map(|p| &p.object));
            daemonset_from_k8s_with_pod(&d.object, live)
                .map_err(|e| convert_error(&d.origin, &d.name, "", &e))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let pdbs = m
        .pdbs
        .iter()
        .map(|d| pdb_from_k8s(&d.object).map_err(|e| convert_error(&d.origin, &d.name, "", &e)))
        .collect::<Result<Vec<_>, _>>()?;

    // Pods: bare pods and expanded workloads; keys unique.
    let mut entries: Vec<(Origin, PodEntry)> = Vec::new();
    for p in &m.pods {
        let pod = pod_from_k8s(&p.object).map_err(|e| convert_error(&p.origin, &p.name, "", &e))?;
        let controller = warnings::is_karpenter_controller(&pod.name, &pod.labels);
        entries.push((
            p.origin.clone(),
            PodEntry {
                pod,
                source: p.name.clone(),
                controller,
            },
        ));
    }
    for w in &m.workloads {
        let controller = warnings::is_karpenter_controller(
            workload_name(&w.object),
            &workload_template_labels(&w.object),
        );
        for k in expand_workload(w)? {
            let pod = pod_from_k8s(&k)
                .map_err(|e| convert_error(&w.origin, &w.name, "spec.template.", &e))?;
            entries.push((
                w.origin.clone(),
                PodEntry {
                    pod,
                    source: w.name.clone(),
                    controller,
                },
            ));
        }
    }
    let mut seen: BTreeMap<String, (Origin, String)> = BTreeMap::new();
    for (origin, e) in &entries {
        let key = e.pod.key();
        if let Some((prev_origin, prev)) = seen.get(&key) {
            return Err(ManifestError::invalid(
                origin,
                &e.source,
                "metadata.name",
                format!("Duplicate value: pod {key} is also produced by {prev} ({prev_origin})"),
            )
            .into());
        }
        seen.insert(key, (origin.clone(), e.source.clone()));
    }

    // Nodes, then NodeClaims (matched to nodes, or in flight).
    let mut nodes: BTreeMap<String, ExistingNodeInput> = BTreeMap::new();
    let mut provider_ids: BTreeMap<String, String> = BTreeMap::new();
    for n in &m.nodes {
        let node =
            node_from_k8s(&n.object).map_err(|e| convert_error(&n.origin, &n.name, "", &e))?;
        if let Some(pid) = n.object.spec.as_ref().and_then(|s| s.provider_id.clone()) {
            provider_ids.insert(pid, node.name.clone());
        }
        if nodes.contains_key(&node.name) {
            return Err(ManifestError::invalid(
                &n.origin,
                &n.name,
                "metadata.name",
                "Duplicate value: a Node of this name is already in the input",
            )
            .into());
        }
        nodes.insert(
            node.name.clone(),
            ExistingNodeInput {
                node,
                pods: Vec::new(),
                volume_limits: Default::default(),
            },
        );
    }
    let mut claims: Vec<&Located<NodeClaim>> = m.nodeclaims.iter().collect();
    claims.sort_by(|a, b| a.object.name().cmp(b.object.name()));
    let mut nodeclaims = Vec::new();
    for c in claims {
        if let Err(errors) = c.object.validate() {
            notices.push(format!("{}: {}: {errors}", c.origin, c.name));
        }
        let status = &c.object.status;
        let node_name = status
            .node_name
            .clone()
            .filter(|n| nodes.contains_key(n))
            .or_else(|| {
                status
                    .provider_id
                    .as_ref()
                    .and_then(|p| provider_ids.get(p).cloned())
            });
        match node_name {
            Some(n) => {
                if let Some(existing) = nodes.get_mut(&n) {
                    existing.node.startup_taints = c.object.spec.startup_taints.clone();
                }
            }
            None => {
                let node = inflight_node(c, &pool_inputs)?;
                if nodes.contains_key(&node.name) {
                    return Err(ManifestError::invalid(
                        &c.origin,
                        &c.name,
                        "metadata.name",
                        "Duplicate value: a Node or NodeClaim of this name is already in the input",
                    )
                    .into());
                }
                nodes.insert(
                    node.name.clone(),
                    ExistingNodeInput {
                        node,
                        pods: Vec::new(),
                        volume_limits: Default::default(),
                    },
                );
            }
        }
        nodeclaims.push(c.object.clone());
    }

    // Storage: claims, volumes and classes; CSINodes give nodes their volume limits.
    let volumes = volume_catalog(m, &mut nodes, &mut entries, notices)?;

    // Bound pods onto nodes; pending pods to plan.
    let mut pending = Vec::new();
    let mut bound_sources = BTreeMap::new();
    for (origin, e) in entries {
        let pod = &e.pod;
        if pod.is_terminal() {
            continue;
        }
        match pod.node_name.clone() {
            Some(node) => match nodes.get_mut(&node) {
                Some(n) => {
                    bound_sources.insert(pod.key(), e.clone());
                    n.pods.push(e.pod);
                }
                None => notices.push(format!(
                    "{origin}: {}: bound to node {node}, which is not in the input: ignored",
                    e.source
                )),
            },
            None => {
                if pod.is_daemonset_pod() || pod.is_mirror_pod() {
                    continue;
                }
                if pod.is_terminating() {
                    notices.push(format!(
                        "{origin}: {}: pod {} is terminating: not planned",
                        e.source,
                        pod.key()
                    ));
                    continue;
                }
                pending.push(e);
            }
        }
    }

    Ok(World {
        pools,
        pool_inputs,
        daemonsets,
        pdbs,
        pending,
        nodes,
        bound_sources,
        nodeclaims,
        warnings,
        volumes,
    })
}

/// The volume catalog of the input's PersistentVolumeClaims, PersistentVolumes and
/// StorageClasses, and the CSINodes' limits set on their nodes. An input without any of the
/// three storage kinds plans as if pods mounted no claims (a notice says so), rather than
/// leaving every pod with a claim unplanned.
fn volume_catalog(
    m: &Manifests,
    nodes: &mut BTreeMap<String, ExistingNodeInput>,
    entries: &mut [(Origin, PodEntry)],
    notices: &mut Vec<String>,
) -> Result<VolumeCatalog, PlanError> {
    let mut volumes = VolumeCatalog::default();
    for c in &m.claims {
        let claim =
            pvc_from_k8s(&c.object).map_err(|e| convert_error(&c.origin, &c.name, "", &e))?;
        volumes.add_claim(claim);
    }
    for v in &m.volumes {
        let pv = pv_from_k8s(&v.object).map_err(|e| convert_error(&v.origin, &v.name, "", &e))?;
        volumes.add_volume(pv);
    }
    for c in &m.storage_classes {
        let class = storage_class_from_k8s(&c.object)
            .map_err(|e| convert_error(&c.origin, &c.name, "", &e))?;
        volumes.add_storage_class(class);
    }
    for c in &m.csinodes {
        let (node, limits) = csi_node_limits_from_k8s(&c.object)
            .map_err(|e| convert_error(&c.origin, &c.name, "", &e))?;
        match nodes.get_mut(&node) {
            Some(n) => n.volume_limits = limits,
            None => notices.push(format!(
                "{}: {}: node {node} is not in the input: ignored",
                c.origin, c.name
            )),
        }
    }
    let mounts_claims = |e: &PodEntry| {
        e.pod
            .volumes
            .iter()
            .any(|v| !matches!(v.source, VolumeSource::Other(_)))
    };
    if volumes.is_empty() && entries.iter().any(|(_, e)| mounts_claims(e)) {
        notices.push(
            "pods mount PersistentVolumeClaims but the input has no PersistentVolumeClaim, \
             PersistentVolume or StorageClass: volume topology and limits are ignored"
                .to_string(),
        );
        for (_, e) in entries.iter_mut() {
            e.pod.volumes.clear();
        }
    }
    Ok(volumes)
}

/// `--explain`: for a left-out pod, every NodePool alone and why it could not take the pod.
fn explain(
    pod: &Pod,
    overall: &str,
    input: &SchedulingInput,
    options: &SchedulerOptions,
    cache: &mut BTreeMap<(String, usize), String>,
) -> Result<Vec<PoolExplanation>, PlanError> {
    let mut order: Vec<usize> = (0..input.node_pools.len()).collect();
    order.sort_by(|&a, &b| {
        let (pa, pb) = (&input.node_pools[a], &input.node_pools[b]);
        pb.weight
            .cmp(&pa.weight)
            .then_with(|| pa.name.cmp(&pb.name))
    });
    let mut anonymous = pod.clone();
    anonymous.name = String::new();
    anonymous.uid = String::new();
    let signature =
        serde_json::to_string(&anonymous).map_err(|e| PlanError::Internal(e.to_string()))?;
    let mut out = Vec::new();
    for i in order {
        let np = &input.node_pools[i];
        let reason = match cache.get(&(signature.clone(), i)) {
            Some(r) => r.clone(),
            None => {
                let alone = SchedulingInput {
                    node_pools: vec![np.clone()],
                    existing_nodes: Vec::new(),
                    daemonsets: input.daemonsets.clone(),
                    pods: vec![pod.clone()],
                    namespace_labels: input.namespace_labels.clone(),
                    volumes: input.volumes.clone(),
                    ..SchedulingInput::default()
                };
                let r = solve(&alone, options);
                let reason = match r.pod_errors.get(&pod.key()) {
                    Some(e) => e.message.clone(),
                    None => format!(
                        "the pod alone fits a new node of this NodePool; in the full plan: {overall}"
                    ),
                };
                cache.insert((signature.clone(), i), reason.clone());
                reason
            }
        };
        out.push(PoolExplanation {
            node_pool: np.name.clone(),
            reason,
        });
    }
    Ok(out)
}

/// Runs `karpenter plan` over decoded documents. `progress` is told each phase.
pub fn plan(
    docs: &[Document],
    opts: &PlanOptions,
    progress: &mut dyn FnMut(&str),
) -> Result<PlanResult, PlanError> {
    for rule in &opts.allow {
        if !warnings::is_rule(rule) {
            let known: Vec<&str> = RULES.iter().map(|(r, _)| *r).collect();
            return Err(PlanError::Input(format!(
                "--allow {rule}: unknown rule; the rules are {}",
                known.join(", ")
            )));
        }
    }
    progress("reading manifests");
    let m = classify(docs)?;
    let mut notices = m.notices.clone();

    progress("loading the instance-type catalog");
    let mut catalog = Catalog::load(&opts.catalog, opts.spot_price_factor)?;
    let aws = opts.catalog == CatalogSpec::Aws;
    let world = build_world(&m, &mut catalog, aws, &mut notices)?;
    let policy = catalog.policy.clone();
    let options = SchedulerOptions {
        label_policy: policy.clone(),
        ..SchedulerOptions::default()
    };

    let existing: Vec<ExistingNodeInput> = world.nodes.values().cloned().collect();
    let input = SchedulingInput {
        node_pools: world.pool_inputs.clone(),
        existing_nodes: existing.clone(),
        daemonsets: world.daemonsets.clone(),
        pods: world.pending.iter().map(|e| e.pod.clone()).collect(),
        namespace_labels: BTreeMap::new(),
        volumes: world.volumes.clone(),
        ..SchedulingInput::default()
    };
    if input.node_pools.is_empty() && !input.pods.is_empty() {
        notices.push(
            "no usable NodePool in the input: pending pods can only go to existing nodes".into(),
        );
    }
    progress(&format!("scheduling {} pods", input.pods.len()));
    let results = solve(&input, &options);

    let mut node_claims = Vec::new();
    let mut cost = 0.0;
    for claim in &results.new_node_claims {
        let launch = launch_of(&claim.instance_types, &claim.requirements, &policy);
        if let Some(l) = &launch {
            cost += l.price_per_hour;
        }
        node_claims.push(claim_output(claim, launch));
    }
    let existing_nodes: Vec<ExistingNodeOutput> = results
        .existing_nodes
        .iter()
        .map(|n| ExistingNodeOutput {
            name: n.name.clone(),
            pods: n.pods.clone(),
        })
        .collect();

    let pods_by_key: BTreeMap<String, &Pod> = input.pods.iter().map(|p| (p.key(), p)).collect();
    let mut unschedulable = Vec::new();
    let mut explain_cache = BTreeMap::new();
    if opts.explain && !results.pod_errors.is_empty() {
        progress("explaining unschedulable pods");
    }
    for (key, err) in &results.pod_errors {
        let node_pools = match (opts.explain, pods_by_key.get(key)) {
            (true, Some(pod)) => explain(pod, &err.message, &input, &options, &mut explain_cache)?,
            _ => Vec::new(),
        };
        unschedulable.push(UnschedulableOutput {
            pod: key.clone(),
            reason: err.message.clone(),
            node_pools,
        });
    }

    progress("computing the cost lower bound");
    let bound = compute_lower_bound(&input, &results, &policy)?;
    let scheduled = results
        .new_node_claims
        .iter()
        .map(|c| c.pods.len())
        .sum::<usize>()
        + results
            .existing_nodes
            .iter()
            .map(|n| n.pods.len())
            .sum::<usize>();
    let summary = Summary::new(
        input.pods.len(),
        scheduled,
        results.new_node_claims.len(),
        cost,
        bound,
    );

    // Advice.
    let contexts: Vec<PoolContext<'_>> = world
        .pools
        .iter()
        .zip(&world.pool_inputs)
        .map(|(pool, np)| PoolContext {
            pool,
            instance_types: &np.instance_types,
        })
        .collect();
    let mut all_warnings = world.warnings.clone();
    all_warnings.extend(warnings::nodepool_warnings(&contexts, &policy));
    let mut controller_nodes: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let sources: BTreeMap<String, &PodEntry> =
        world.pending.iter().map(|e| (e.pod.key(), e)).collect();
    for (i, claim) in results.new_node_claims.iter().enumerate() {
        for key in &claim.pods {
            if let Some(e) = sources.get(key).filter(|e| e.controller) {
                controller_nodes
                    .entry(e.source.clone())
                    .or_default()
                    .insert(format!(
                        "new NodeClaim #{} of NodePool {}",
                        i + 1,
                        claim.node_pool
                    ));
            }
        }
    }
    for n in &results.existing_nodes {
        let managed = world.nodes.get(&n.name).is_some_and(|x| x.node.managed);
        for key in &n.pods {
            if let Some(e) = sources.get(key).filter(|e| e.controller && managed) {
                controller_nodes
                    .entry(e.source.clone())
                    .or_default()
                    .insert(n.name.clone());
            }
        }
    }
    for e in world.bound_sources.values() {
        let node = e.pod.node_name.clone().unwrap_or_default();
        let managed = world.nodes.get(&node).is_some_and(|x| x.node.managed);
        if e.controller && managed {
            controller_nodes
                .entry(e.source.clone())
                .or_default()
                .insert(node);
        }
    }
    for (object, nodes) in &controller_nodes {
        let nodes: Vec<String> = nodes.iter().cloned().collect();
        all_warnings.push(warnings::controller_warning(object, &nodes));
    }
    all_warnings.retain(|w| !opts.allow.contains(&w.rule));

    let disruption = if opts.disruption {
        let all_types: Vec<Arc<InstanceType>> = {
            let mut seen = BTreeSet::new();
            world
                .pool_inputs
                .iter()
                .flat_map(|p| p.instance_types.iter())
                .filter(|it| seen.insert(it.name.clone()))
                .cloned()
                .collect()
        };
        let plan = disruption::plan_disruption(&DisruptionInput {
            now: opts.now,
            nodepools: &world.pools,
            node_pool_inputs: &world.pool_inputs,
            nodes: &existing,
            nodeclaims: &world.nodeclaims,
            daemonsets: &world.daemonsets,
            pdbs: &world.pdbs,
            instance_types: &all_types,
            scheduler_options: &options,
        });
        Some(plan)
    } else {
        None
    };

    Ok(PlanResult {
        output: PlanOutput {
            node_claims,
            existing_nodes,
            unschedulable,
            summary,
            catalog: catalog.info.clone(),
            warnings: all_warnings,
            disruption,
        },
        notices,
    })
}

/// The contract's view of a NodeClaim the scheduler decided to create.
pub(crate) fn claim_output(claim: &NewNodeClaim, launch: Option<Launch>) -> ClaimOutput {
    ClaimOutput {
        node_pool: claim.node_pool.clone(),
        instance_types: claim
            .instance_types
            .iter()
            .map(|it| it.name.clone())
            .collect(),
        launch,
        requirements: claim.requirements.to_node_selector_requirements(),
        pods: claim.pods.clone(),
        requests: claim.requests.clone(),
    }
}

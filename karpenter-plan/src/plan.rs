//! `karpenter plan`: from decoded documents to the contract's output.
//!
//! 1. Decode the documents ([`crate::manifests::classify`]) and load the catalog.
//! 2. Validate every NodePool against the catalog's label policy (exit 2 on the first invalid
//!    one; static and deleting NodePools are left out of provisioning), give each the catalog's
//!    instance types (through its EC2NodeClass with the AWS catalog), and build the world with
//!    [`karpenter_core::world`]: pending pods (unbound Pods, and the replicas of Deployments,
//!    ReplicaSets, StatefulSets and Jobs that have no pod in the input), DaemonSets as
//!    overhead, Nodes with their bound pods, NodeClaims without a Node as in-flight nodes.
//! 4. Solve, price every new NodeClaim at its cheapest compatible offering, compute the lower
//!    bound, explain left-out pods (`--explain`) and collect operator advice.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use karpenter_core::model::{InstanceType, Pod, Timestamp};
use karpenter_core::scheduling::packing::{self, PackingOptions, PackingPolicy};
use karpenter_core::scheduling::{Results, SchedulerOptions, SchedulingInput};
use karpenter_core::world::{self, Objects, PodSource, SourcedPod, World};

use karpenter_core::api::{NodeOverlay, NodePool};
use karpenter_core::features::Gate;
use karpenter_core::labels::LabelPolicy;
use karpenter_core::overlay::{self, Outcome, PoolTypes};

use crate::catalog::{Catalog, CatalogSpec};
use crate::disruption::{self, DisruptionInput};
use crate::explain::{explain, tidy_reason};
use crate::manifests::{Document, Located, ManifestError, Manifests, NodeClass, classify};
use crate::output::{
    ExistingNodeOutput, PlanOutput, Summary, UnschedulableOutput, claim_output, launch_of,
};
use crate::settings::Settings;
use crate::warnings::{self, PoolContext, RULES, Warning};

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
    /// `--packing cost|upstream`: the packing policy of every NodePool (`None`: each NodePool's
    /// `karpenter-rs.io/packing` annotation).
    pub packing: Option<PackingPolicy>,
    /// `--feature-gates`, `--preference-policy`, `--min-values-policy`.
    pub settings: Settings,
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
            packing: None,
            settings: Settings::default(),
        }
    }
}

pub use crate::error::PlanError;

/// A plan and what to tell the user on standard error.
#[derive(Debug, Clone, PartialEq)]
pub struct PlanResult {
    /// The contract's document.
    pub output: PlanOutput,
    /// Notices for standard error (skipped documents, ignored fields, unwired features).
    pub notices: Vec<String>,
}

/// The world of the manifests: EC2NodeClasses matched to NodePools (AWS catalog), each usable
/// NodePool's instance types from the catalog, and [`world::build`] over the rest. Returns the
/// advice found on the way (a NodePool whose EC2NodeClass is missing).
pub(crate) fn build_world(
    m: &Manifests,
    catalog: &mut Catalog,
    aws: bool,
    settings: &Settings,
    notices: &mut Vec<String>,
) -> Result<(World, Vec<Warning>), PlanError> {
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

    let usable = world::usable_node_pools(&m.nodepools, &catalog.policy)?;
    notices.extend(usable.notices.iter().cloned());
    let mut pools = Vec::new();
    let mut warnings = Vec::new();
    for p in &usable.node_pools {
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
        pools.push((p.object.clone(), types));
    }
    apply_overlays(m, &mut pools, &catalog.policy, settings, notices);

    let objects = Objects {
        node_pools: &pools,
        node_claims: &m.nodeclaims,
        nodes: &m.nodes,
        pods: &m.pods,
        workloads: &m.workloads,
        daemonsets: &m.daemonsets,
        pdbs: &m.pdbs,
        claims: &m.claims,
        volumes: &m.volumes,
        storage_classes: &m.storage_classes,
        csinodes: &m.csinodes,
    };
    let mut world = world::build(&objects)?;
    notices.append(&mut world.notices);
    Ok((world, warnings))
}

/// The input's NodeOverlays applied to the NodePools' instance types when the `NodeOverlay`
/// gate is on (as upstream's controller does; an overlay that fails runtime validation or
/// conflicts is reported and applies nowhere); with the gate off they are reported and left
/// out, as upstream leaves them.
fn apply_overlays(
    m: &Manifests,
    pools: &mut [(NodePool, Vec<Arc<InstanceType>>)],
    policy: &LabelPolicy,
    settings: &Settings,
    notices: &mut Vec<String>,
) {
    if m.overlays.is_empty() {
        return;
    }
    if !settings.enabled(Gate::NodeOverlay) {
        for o in &m.overlays {
            notices.push(format!(
                "{}: {}: not applied: the NodeOverlay feature gate is off (upstream's default); \
                 pass --feature-gates NodeOverlay=true to apply it",
                o.origin, o.name
            ));
        }
        return;
    }
    let overlays: Vec<NodeOverlay> = m.overlays.iter().map(|o| o.object.clone()).collect();
    let applied = {
        let views: Vec<PoolTypes<'_>> = pools
            .iter()
            .map(|(pool, types)| PoolTypes {
                name: pool.name(),
                labels: &pool.spec.template.metadata.labels,
                instance_types: types,
            })
            .collect();
        overlay::apply(&overlays, &views, policy)
    };
    for o in &m.overlays {
        match applied.outcomes.get(o.object.name()) {
            Some(Outcome::Applied) | None => {}
            Some(outcome) => {
                let (_, reason, message) = outcome.condition();
                notices.push(format!(
                    "{}: {}: not applied: ValidationSucceeded=False, {reason}: {message}",
                    o.origin, o.name
                ));
            }
        }
    }
    for (pool, types) in pools.iter_mut() {
        if let Some(adjusted) = applied.instance_types.get(pool.name()) {
            *types = adjusted.clone();
        }
    }
}

/// Whether a pod (or the workload it is a replica of) is a Karpenter controller (advice: not
/// on a Karpenter node).
fn is_controller(p: &SourcedPod) -> bool {
    match &p.source.workload {
        Some(w) => warnings::is_karpenter_controller(&w.name, &w.labels),
        None => warnings::is_karpenter_controller(&p.pod.name, &p.pod.labels),
    }
}

/// Both packing policies' costs, for the summary.
struct PackingComparison {
    /// The policy of the printed plan (`cost` when some NodePool is under it).
    policy: PackingPolicy,
    upstream_cost: f64,
    cost_aware_cost: f64,
}

/// The solve under the packing policy (`--packing`, else the NodePools' annotations) and, when
/// `--packing` is given or some NodePool carries the annotation, both policies' costs.
fn solve_with_packing(
    input: &SchedulingInput,
    options: &SchedulerOptions,
    world: &World,
    flag: Option<PackingPolicy>,
) -> (Results, Option<PackingComparison>) {
    let annotated = world.node_pools.iter().any(|p| {
        p.metadata
            .annotations
            .contains_key(packing::PACKING_ANNOTATION)
    });
    let options = options
        .clone()
        .with_packing(PackingOptions::default().with_policy(flag));
    let any_cost = packing::pool_policies(input, &options).contains(&PackingPolicy::Cost);
    if flag.is_none() && !annotated {
        return (karpenter_core::scheduling::solve(input, &options), None);
    }
    if any_cost {
        let outcome = packing::solve_packed(input, &options);
        let comparison = PackingComparison {
            policy: PackingPolicy::Cost,
            upstream_cost: outcome.faithful_cost,
            cost_aware_cost: outcome.cost,
        };
        return (outcome.results, Some(comparison));
    }
    // Upstream: the plan is the faithful one; the cost-aware search prices the alternative.
    let all_cost = options
        .clone()
        .with_packing(PackingOptions::default().with_policy(Some(PackingPolicy::Cost)));
    let outcome = packing::solve_packed(input, &all_cost);
    let comparison = PackingComparison {
        policy: PackingPolicy::Upstream,
        upstream_cost: outcome.faithful_cost,
        cost_aware_cost: outcome.cost,
    };
    let results = match outcome.faithful {
        Some(faithful) => faithful,
        None => outcome.results,
    };
    (results, Some(comparison))
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
    let (world, world_warnings) = build_world(&m, &mut catalog, aws, &opts.settings, &mut notices)?;
    let policy = catalog.policy.clone();
    let options = opts.settings.scheduler_options(policy.clone());

    let input = world.scheduling_input();
    if input.node_pools.is_empty() && !input.pods.is_empty() {
        notices.push(
            "no usable NodePool in the input: pending pods can only go to existing nodes".into(),
        );
    }
    progress(&format!("scheduling {} pods", input.pods.len()));
    let (results, comparison) = solve_with_packing(&input, &options, &world, opts.packing);

    let mut node_claims = Vec::new();
    let mut cost = 0.0;
    let universe: BTreeSet<&str> = input
        .node_pools
        .iter()
        .flat_map(|np| np.instance_types.iter())
        .flat_map(|it| it.available_offerings())
        .map(|o| o.zone())
        .collect();
    for claim in &results.new_node_claims {
        let launch = launch_of(&claim.instance_types, &claim.requirements, &policy);
        if let Some(l) = &launch {
            cost += l.price_per_hour;
        }
        node_claims.push(claim_output(claim, launch, Some(&universe)));
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
            reason: tidy_reason(&err.message, input.node_pools.len()),
            node_pools,
        });
    }

    progress("computing the cost lower bound");
    let bound = karpenter_core::scheduling::bound::plan_lower_bound(&input, &results, &policy);
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
    let summary = match comparison {
        Some(c) => summary.with_packing(c.policy.as_str(), c.upstream_cost, c.cost_aware_cost),
        None => summary,
    };

    // Advice.
    let contexts: Vec<PoolContext<'_>> = world
        .node_pools
        .iter()
        .zip(&world.node_pool_inputs)
        .map(|(pool, np)| PoolContext {
            pool,
            instance_types: &np.instance_types,
        })
        .collect();
    let mut all_warnings = world_warnings;
    all_warnings.extend(warnings::nodepool_warnings(&contexts, &policy));
    let mut controller_nodes: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let sources: BTreeMap<String, &PodSource> = world
        .pending
        .iter()
        .filter(|e| is_controller(e))
        .map(|e| (e.pod.key(), &*e.source))
        .collect();
    for (i, claim) in results.new_node_claims.iter().enumerate() {
        for key in &claim.pods {
            if let Some(source) = sources.get(key) {
                controller_nodes
                    .entry(source.object.clone())
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
            if let Some(source) = sources.get(key).filter(|_| managed) {
                controller_nodes
                    .entry(source.object.clone())
                    .or_default()
                    .insert(n.name.clone());
            }
        }
    }
    for e in world.bound.values() {
        let node = e.pod.node_name.clone().unwrap_or_default();
        let managed = world.nodes.get(&node).is_some_and(|x| x.node.managed);
        if is_controller(e) && managed {
            controller_nodes
                .entry(e.source.object.clone())
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
                .node_pool_inputs
                .iter()
                .flat_map(|p| p.instance_types.iter())
                .filter(|it| seen.insert(it.name().to_string()))
                .cloned()
                .collect()
        };
        // EC2NodeClass drift (static hash, AMI) as the AWS provider's IsDrifted reports it,
        // from the typed classes of the input.
        let classes = m
            .nodeclasses
            .iter()
            .map(|c| crate::catalog::typed_nodeclass(&c.origin, &c.name, &c.object.value))
            .collect::<Result<Vec<_>, _>>()?;
        let cloud_drift = karpenter_aws::drift::cloud_drift(&classes, &world.node_claims, |t| {
            all_types
                .iter()
                .find(|it| it.name() == t)
                .map(|it| it.requirements())
        });
        let plan = disruption::plan_disruption(&DisruptionInput {
            now: opts.now,
            cloud_drift: &cloud_drift,
            nodepools: &world.node_pools,
            node_pool_inputs: &world.node_pool_inputs,
            nodes: &input.existing_nodes,
            nodeclaims: &world.node_claims,
            daemonsets: &world.daemonsets,
            pdbs: &world.pdbs,
            instance_types: &all_types,
            scheduler_options: &options,
            spot_to_spot_consolidation: opts.settings.enabled(Gate::SpotToSpotConsolidation),
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

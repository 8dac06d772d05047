//! `--disruption`: what the disruption controller would do to the existing cluster.
//!
//! [`plan_disruption`] turns the input into a [`ClusterSnapshot`], evaluates drift over it as
//! the controllers would before a pass ([`evaluate_snapshot_drift`]: NodePool hash,
//! requirements, instance types; the cloud provider's part is the EC2NodeClass static hash and
//! AMI checks of `karpenter_aws::drift`, plus the provider reasons already recorded in `Drifted`
//! conditions), and runs
//! [`karpenter_core::disruption::plan`]: expired NodeClaims first, then pass after pass of
//! emptiness, drift, multi-node and single-node consolidation, each command applied to a working
//! copy before the next pass. A Node that carries `karpenter.sh/nodepool` but has no NodeClaim in
//! the input (a dump of Nodes only) gets a NodeClaim synthesized from its labels and status, so
//! that offline dumps can be planned; such a claim is not `Launched`, so it is never drifted.

use karpenter_core::api::{
    Condition, ConditionStatus, NodeClaim, NodeClaimSpec, NodeClassReference, NodePool,
};
use karpenter_core::disruption::DisruptionOptions;
use karpenter_core::lifecycle::drift::{
    DriftOptions, SnapshotDriftInput, evaluate_snapshot_drift, recorded_provider_drift,
};
use karpenter_core::model::ClusterNode;
use karpenter_core::model::{DaemonSet, InstanceType, PodDisruptionBudget, Timestamp};
use karpenter_core::scheduling::{ExistingNodeInput, NodePoolInput, SchedulerOptions};
use karpenter_core::state::{ClusterSnapshot, NodePoolState, StateNode};
use std::collections::BTreeMap;
use std::sync::Arc;

use crate::output::{claim_output, launch_of};

/// Everything the disruption planner reads.
#[derive(Debug, Clone)]
pub struct DisruptionInput<'a> {
    /// The time budgets, expiry and `consolidateAfter` are evaluated at (`--now`).
    pub now: Timestamp,
    /// The valid, non-static NodePools, sorted by name.
    pub nodepools: &'a [NodePool],
    /// The scheduler's view of the same NodePools (same order), with their instance types.
    pub node_pool_inputs: &'a [NodePoolInput],
    /// Existing nodes and in-flight NodeClaims with the pods bound to them (sorted by name).
    pub nodes: &'a [ExistingNodeInput],
    /// The input's NodeClaims (launched or not).
    pub nodeclaims: &'a [NodeClaim],
    /// DaemonSets.
    pub daemonsets: &'a [DaemonSet],
    /// PodDisruptionBudgets.
    pub pdbs: &'a [PodDisruptionBudget],
    /// Every instance type of the catalog the NodePools use (for pricing existing nodes).
    pub instance_types: &'a [Arc<InstanceType>],
    /// The options the provisioning plan used (label policy included).
    pub scheduler_options: &'a SchedulerOptions,
    /// Drift the cloud provider reports, by NodeClaim name (for the AWS catalog: the
    /// EC2NodeClass static hash and AMI checks of `karpenter_aws::drift::cloud_drift`). It wins
    /// over a provider reason already recorded in a NodeClaim's `Drifted` condition.
    pub cloud_drift: &'a BTreeMap<String, String>,
    /// The `SpotToSpotConsolidation` feature gate.
    pub spot_to_spot_consolidation: bool,
}

pub use crate::output::{BlockedNode, DisruptionCommand, DisruptionPlan};

/// Plans disruption over the input (see the module documentation).
pub fn plan_disruption(input: &DisruptionInput<'_>) -> DisruptionPlan {
    let mut snapshot = snapshot(input);
    // Drift as the controllers would evaluate it before the pass (hash, requirements,
    // instance types; no cloud provider offline).
    let drift = SnapshotDriftInput {
        options: DriftOptions::new(input.scheduler_options.label_policy.clone())
            .with_reserved_capacity_labels(
                input
                    .scheduler_options
                    .reservation_id_label
                    .iter()
                    .cloned()
                    .collect(),
            ),
        // Provider reasons the input already records, then what the provider's own checks
        // find now (those win).
        cloud_drift: {
            let mut drift = recorded_provider_drift(&snapshot);
            drift.extend(
                input
                    .cloud_drift
                    .iter()
                    .map(|(k, v)| (k.clone(), v.clone())),
            );
            drift
        },
        ..SnapshotDriftInput::default()
    };
    evaluate_snapshot_drift(&mut snapshot, input.now, &drift);
    let options = DisruptionOptions::default()
        .with_scheduler(input.scheduler_options.clone())
        .with_spot_to_spot_consolidation(input.spot_to_spot_consolidation);
    let plan = karpenter_core::disruption::plan(&snapshot, input.now, &options);
    let policy = &input.scheduler_options.label_policy;
    let commands = plan
        .commands
        .iter()
        .map(|c| DisruptionCommand {
            reason: c.reason.as_str().to_string(),
            method: c.method.as_str().to_string(),
            candidates: c.candidates.iter().map(|c| c.name().to_string()).collect(),
            replacements: c
                .replacements
                .iter()
                .map(|r| {
                    let launch = launch_of(&r.instance_types, &r.requirements, policy);
                    claim_output(r, launch, None)
                })
                .collect(),
            savings_per_hour: round6(c.savings_per_hour),
        })
        .collect();
    let blocked = plan
        .blocked
        .into_iter()
        .filter(|(_, reason)| reason != "node isn't managed by karpenter")
        .map(|(node, reason)| BlockedNode { node, reason })
        .collect();
    DisruptionPlan { commands, blocked }
}

fn round6(x: f64) -> f64 {
    (x * 1e6).round() / 1e6
}

fn snapshot(input: &DisruptionInput<'_>) -> ClusterSnapshot {
    let node_pools = input
        .nodepools
        .iter()
        .zip(input.node_pool_inputs)
        .map(|(pool, pi)| NodePoolState::new(pool.clone(), pi.instance_types.clone()))
        .collect();
    let mut nodes = Vec::new();
    for n in input.nodes {
        let claim = input.nodeclaims.iter().find(|c| {
            c.status.node_name.as_deref() == Some(n.node.name.as_str()) || c.name() == n.node.name
        });
        let in_flight = claim.is_some_and(|c| {
            c.name() == n.node.name && c.status.node_name.as_deref() != Some(n.node.name.as_str())
        });
        let claim = claim
            .cloned()
            .or_else(|| n.node.nodepool().map(|_| synthesize_claim(&n.node)));
        let mut node = n.node.clone();
        if claim.is_some() {
            node.managed = true;
        }
        nodes.push(
            StateNode::new((!in_flight).then_some(node), claim, n.pods.clone())
                .with_marked_for_deletion(n.node.marked_for_deletion)
                .with_volume_limits(n.volume_limits.clone()),
        );
    }
    ClusterSnapshot::new(node_pools, nodes)
        .with_daemonsets(input.daemonsets.iter().cloned())
        .with_pdbs(input.pdbs.iter().cloned())
}

/// A NodeClaim for a managed Node that has none in the input: its labels, capacity and
/// allocatable, `Initialized` when the Node carries `karpenter.sh/initialized=true`, created when
/// the Node was.
fn synthesize_claim(node: &ClusterNode) -> NodeClaim {
    let created = node.creation_timestamp.to_string();
    let class = NodeClassReference::new("", "", "");
    let mut claim = NodeClaim::new(node.name.clone(), NodeClaimSpec::new(class));
    claim.metadata.labels = node.labels.clone();
    claim.metadata.annotations = node.annotations.clone();
    claim.metadata.creation_timestamp = Some(created.clone());
    claim.status.node_name = Some(node.name.clone());
    claim.status.provider_id = Some(format!("node://{}", node.name));
    claim.status.capacity = node.capacity.clone();
    claim.status.allocatable = node.allocatable.clone();
    if node.initialized {
        claim.status.conditions.push(Condition {
            type_: karpenter_core::api::condition_types::INITIALIZED.to_string(),
            status: ConditionStatus::True,
            reason: None,
            message: None,
            last_transition_time: Some(created),
            observed_generation: None,
        });
    }
    claim
}

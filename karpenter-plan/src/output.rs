//! The plan as the contract prints it: JSON and YAML with the contract's key names, and a table
//! for people. Output is deterministic: the same plan gives the same bytes.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::sync::Arc;

use comfy_table::{Cell, CellAlignment, ContentArrangement, Table, presets};
use karpenter_core::labels::{self, LabelPolicy};
use karpenter_core::model::InstanceType;
use karpenter_core::requirements::{NodeSelectorRequirement, Requirements};
use karpenter_core::resources::ResourceList;
use karpenter_core::scheduling::NewNodeClaim;
use serde::Serialize;

use crate::catalog::CatalogInfo;
use crate::warnings::Warning;

/// Hours in a month, for `costPerMonth` (365 × 24 / 12).
pub const HOURS_PER_MONTH: f64 = 730.0;

/// The whole plan (the JSON / YAML document).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PlanOutput {
    /// NodeClaims to create, in creation order.
    pub node_claims: Vec<ClaimOutput>,
    /// Existing nodes (and in-flight NodeClaims) that received pending pods.
    pub existing_nodes: Vec<ExistingNodeOutput>,
    /// Pods left out, by `namespace/name`.
    pub unschedulable: Vec<UnschedulableOutput>,
    /// Totals.
    pub summary: Summary,
    /// Where the instance types and prices came from.
    pub catalog: CatalogInfo,
    /// Operator advice.
    pub warnings: Vec<Warning>,
    /// The disruption plan, with `--disruption`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disruption: Option<DisruptionPlan>,
}

/// A new NodeClaim.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClaimOutput {
    /// The NodePool it comes from.
    pub node_pool: String,
    /// Every instance type it may launch as, cheapest first.
    pub instance_types: Vec<String>,
    /// The cheapest available compatible offering (absent if none, which the scheduler
    /// prevents).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub launch: Option<Launch>,
    /// Every zone it may launch in (its instance types' available offerings that its
    /// requirements allow), sorted.
    pub zones: Vec<String>,
    /// Its requirements, sorted by key.
    pub requirements: Vec<NodeSelectorRequirement>,
    /// `namespace/name` of its pods, in placement order.
    pub pods: Vec<String>,
    /// The pods' requests plus DaemonSet overhead.
    pub requests: ResourceList,
}

/// What a NodeClaim launches as.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Launch {
    /// The instance type.
    pub instance_type: String,
    /// The zone.
    pub zone: String,
    /// `on-demand` or `spot`.
    pub capacity_type: String,
    /// Its hourly price.
    pub price_per_hour: f64,
}

/// An existing node that received pods.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ExistingNodeOutput {
    /// The node's (or in-flight NodeClaim's) name.
    pub name: String,
    /// `namespace/name` of the pods placed on it.
    pub pods: Vec<String>,
}

/// A pod left out.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct UnschedulableOutput {
    /// `namespace/name`.
    pub pod: String,
    /// Why.
    pub reason: String,
    /// With `--explain`: every NodePool and why it could not take the pod.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub node_pools: Vec<PoolExplanation>,
}

/// Why one NodePool could not take a pod (`--explain`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PoolExplanation {
    /// The NodePool.
    pub node_pool: String,
    /// Why not.
    pub reason: String,
}

/// Totals.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    /// Pending pods planned for.
    pub pods: usize,
    /// Pods placed (on new claims or existing nodes).
    pub scheduled: usize,
    /// New NodeClaims.
    pub new_node_claims: usize,
    /// Sum of `launch.pricePerHour`.
    pub cost_per_hour: f64,
    /// `costPerHour` × 730.
    pub cost_per_month: f64,
    /// A proven lower bound on the hourly cost of new nodes for the pods sent to new nodes.
    pub lower_bound_per_hour: f64,
    /// `costPerHour / lowerBoundPerHour − 1` (0 when both are 0; absent when only the bound is).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gap: Option<f64>,
    /// The packing policy of the plan (`upstream` or `cost`); present only when `--packing` is
    /// given or a NodePool carries the packing annotation, like the two costs below.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub packing: Option<String>,
    /// The hourly cost of the upstream-faithful plan of the same input.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub upstream_cost_per_hour: Option<f64>,
    /// The hourly cost of the cost-aware plan of the same input (never above the upstream one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost_aware_cost_per_hour: Option<f64>,
}

/// Rounds to `digits` decimals (prices have at most six).
pub fn round_to(x: f64, digits: i32) -> f64 {
    let f = 10f64.powi(digits);
    let r = (x * f).round() / f;
    if r == 0.0 { 0.0 } else { r }
}

/// Rounds down to `digits` decimals (a lower bound must stay below).
pub fn floor_to(x: f64, digits: i32) -> f64 {
    let f = 10f64.powi(digits);
    let r = (x * f).floor() / f;
    if r == 0.0 { 0.0 } else { r }
}

impl Summary {
    /// Totals from the raw figures, rounded for output: cost to 6 decimals, the bound down to 6
    /// decimals, the gap to 4.
    pub fn new(
        pods: usize,
        scheduled: usize,
        new_node_claims: usize,
        cost: f64,
        bound: f64,
    ) -> Summary {
        let cost_per_hour = round_to(cost, 6);
        // The bound comes `SAFETY` (1e-9, relative) below its certified value; flooring after
        // undoing half of that keeps it below while printing exact bounds exactly.
        let lower_bound_per_hour = floor_to((bound * (1.0 + 0.5e-9)).min(cost_per_hour), 6);
        let gap = if lower_bound_per_hour > 0.0 {
            Some(round_to(cost_per_hour / lower_bound_per_hour - 1.0, 4))
        } else if cost_per_hour == 0.0 {
            Some(0.0)
        } else {
            None
        };
        Summary {
            pods,
            scheduled,
            new_node_claims,
            cost_per_hour,
            cost_per_month: round_to(cost_per_hour * HOURS_PER_MONTH, 2),
            lower_bound_per_hour,
            gap,
            packing: None,
            upstream_cost_per_hour: None,
            cost_aware_cost_per_hour: None,
        }
    }

    /// The summary with the packing comparison: the plan's policy and both policies' costs
    /// (rounded to 6 decimals).
    pub fn with_packing(mut self, policy: &str, upstream_cost: f64, cost_aware_cost: f64) -> Self {
        self.packing = Some(policy.to_string());
        self.upstream_cost_per_hour = Some(round_to(upstream_cost, 6));
        self.cost_aware_cost_per_hour = Some(round_to(cost_aware_cost, 6));
        self
    }
}

/// Why the plan could not be printed (a bug: exit status 1).
#[derive(Debug, thiserror::Error)]
#[error("cannot serialise the plan: {0}")]
pub struct RenderError(String);

/// Pretty JSON with a final newline.
pub fn to_json(plan: &PlanOutput) -> Result<String, RenderError> {
    let mut s = serde_json::to_string_pretty(plan).map_err(|e| RenderError(e.to_string()))?;
    s.push('\n');
    Ok(s)
}

/// YAML with the same structure as the JSON.
pub fn to_yaml(plan: &PlanOutput) -> Result<String, RenderError> {
    let mut s = serde_saphyr::to_string(plan).map_err(|e| RenderError(e.to_string()))?;
    if !s.ends_with('\n') {
        s.push('\n');
    }
    Ok(s)
}

fn money(x: f64) -> String {
    format!("${x:.4}")
}

fn table() -> Table {
    let mut t = Table::new();
    t.load_preset(presets::ASCII_FULL_CONDENSED)
        .set_content_arrangement(ContentArrangement::Disabled);
    t
}

fn right(s: impl ToString) -> Cell {
    Cell::new(s.to_string()).set_alignment(CellAlignment::Right)
}

/// The table for people.
pub fn to_table(plan: &PlanOutput) -> String {
    let mut out = String::new();
    let c = &plan.catalog;
    let _ = write!(out, "Catalog: {}", c.name);
    if let Some(r) = &c.region {
        let _ = write!(out, " ({r})");
    }
    if let Some(s) = &c.spot_prices {
        let _ = write!(out, "; spot prices: {s}");
    }
    out.push_str("\n\n");

    let _ = writeln!(out, "New NodeClaims: {}", plan.node_claims.len());
    if !plan.node_claims.is_empty() {
        let mut t = table();
        t.set_header(vec![
            "#",
            "NodePool",
            "Instance type",
            "Zone",
            "Capacity",
            "$/hour",
            "Pods",
            "Options",
            "Zones",
        ]);
        for (i, claim) in plan.node_claims.iter().enumerate() {
            let (it, zone, ct, price) = match &claim.launch {
                Some(l) => (
                    l.instance_type.clone(),
                    l.zone.clone(),
                    l.capacity_type.clone(),
                    money(l.price_per_hour),
                ),
                None => ("-".into(), "-".into(), "-".into(), "-".into()),
            };
            t.add_row(vec![
                right(i + 1),
                Cell::new(&claim.node_pool),
                Cell::new(it),
                Cell::new(zone),
                Cell::new(ct),
                right(price),
                right(claim.pods.len()),
                right(claim.instance_types.len()),
                Cell::new(zone_list(&claim.zones)),
            ]);
        }
        let _ = writeln!(out, "{t}");
        out.push_str(CLAIM_COLUMNS);
    }
    out.push('\n');

    let _ = writeln!(
        out,
        "Existing nodes receiving pods: {}",
        plan.existing_nodes.len()
    );
    if !plan.existing_nodes.is_empty() {
        let mut t = table();
        t.set_header(vec!["Node", "Pods", "Pod names"]);
        for n in &plan.existing_nodes {
            t.add_row(vec![
                Cell::new(&n.name),
                right(n.pods.len()),
                Cell::new(abbreviate(&n.pods)),
            ]);
        }
        let _ = writeln!(out, "{t}");
    }
    out.push('\n');

    // Reasons are long: a list reads better than a table.
    let _ = writeln!(out, "Unschedulable pods: {}", plan.unschedulable.len());
    for u in &plan.unschedulable {
        let _ = writeln!(out, "  {}: {}", u.pod, u.reason);
        for e in &u.node_pools {
            let _ = writeln!(out, "    NodePool {}: {}", e.node_pool, e.reason);
        }
    }
    out.push('\n');

    let s = &plan.summary;
    out.push_str("Summary\n");
    let _ = writeln!(
        out,
        "  pods:            {} pending, {} scheduled, {} unschedulable",
        s.pods,
        s.scheduled,
        s.pods.saturating_sub(s.scheduled)
    );
    let _ = writeln!(out, "  new NodeClaims:  {}", s.new_node_claims);
    let _ = writeln!(
        out,
        "  cost:            {}/hour, ${:.2}/month (730 h)",
        money(s.cost_per_hour),
        s.cost_per_month
    );
    let gap = match s.gap {
        Some(g) => format!("gap {:.2}%", g * 100.0),
        None => "gap n/a".into(),
    };
    let _ = writeln!(
        out,
        "  lower bound:     {}/hour ({gap})",
        money(s.lower_bound_per_hour)
    );
    if let (Some(p), Some(u), Some(c)) = (
        &s.packing,
        s.upstream_cost_per_hour,
        s.cost_aware_cost_per_hour,
    ) {
        let _ = writeln!(
            out,
            "  packing:         {p} (upstream {}/hour, cost-aware {}/hour)",
            money(u),
            money(c)
        );
    }

    if let Some(d) = &plan.disruption {
        let _ = writeln!(out, "\nDisruption: {} command(s)", d.commands.len());
        let mut total = 0.0;
        for (i, c) in d.commands.iter().enumerate() {
            total += c.savings_per_hour;
            let replacements: Vec<String> = c
                .replacements
                .iter()
                .map(|r| match &r.launch {
                    Some(l) => format!(
                        "{} {} {} {}",
                        l.instance_type,
                        l.zone,
                        l.capacity_type,
                        money(l.price_per_hour)
                    ),
                    None => r.node_pool.clone(),
                })
                .collect();
            let _ = writeln!(
                out,
                "  {}. {} ({}): {} -> {}; saves {}/hour",
                i + 1,
                c.reason,
                c.method,
                c.candidates.join(", "),
                if replacements.is_empty() {
                    "delete".to_string()
                } else {
                    format!("replace with {}", replacements.join(", "))
                },
                money(c.savings_per_hour)
            );
        }
        let _ = writeln!(
            out,
            "  total savings: {}/hour, ${:.2}/month (730 h)",
            money(total),
            total * 730.0
        );
        for b in &d.blocked {
            let _ = writeln!(out, "  blocked: {}: {}", b.node, b.reason);
        }
    }

    if !plan.warnings.is_empty() {
        let _ = writeln!(out, "\nWarnings: {}", plan.warnings.len());
        for w in &plan.warnings {
            let _ = writeln!(
                out,
                "  [{}] {} {}: {}",
                w.rule, w.object, w.field, w.message
            );
        }
    }
    out
}

/// What the columns of the NodeClaim table mean.
const CLAIM_COLUMNS: &str = "  Instance type, Zone, Capacity, $/hour: the cheapest available offering the claim may \
launch as\n  Pods: pending pods placed on it; Options: instance types it may launch as (cheapest \
first, in -o json); Zones: every zone it may launch in\n";

/// Zones with a shared prefix written once: `us-east-1{a,b,c}`.
fn zone_list(zones: &[String]) -> String {
    let prefix_len = zones
        .iter()
        .skip(1)
        .fold(zones.first().map_or(0, String::len), |n, z| {
            zones[0]
                .bytes()
                .zip(z.bytes())
                .take(n)
                .take_while(|(a, b)| a == b)
                .count()
        });
    match zones {
        [] => "-".to_string(),
        [one] => one.clone(),
        _ => match zones[0].get(..prefix_len) {
            Some(prefix) if !prefix.is_empty() => {
                let rest: Vec<&str> = zones
                    .iter()
                    .map(|z| z.get(prefix_len..).unwrap_or(""))
                    .collect();
                format!("{prefix}{{{}}}", rest.join(","))
            }
            _ => zones.join(","),
        },
    }
}

/// Up to three names, then a count of the rest.
fn abbreviate(names: &[String]) -> String {
    const SHOWN: usize = 3;
    let mut s = names
        .iter()
        .take(SHOWN)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if names.len() > SHOWN {
        let _ = write!(s, ", ... (+{})", names.len() - SHOWN);
    }
    s
}

/// The contract's `disruption` object.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DisruptionPlan {
    /// What the planner would do, in order.
    pub commands: Vec<DisruptionCommand>,
    /// Nodes that could not be disrupted, with the reason.
    pub blocked: Vec<BlockedNode>,
}

/// One disruption command.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DisruptionCommand {
    /// `Empty`, `Underutilized`, `Drifted` or `Expired`.
    pub reason: String,
    /// `emptiness`, `drift`, `expiration`, `single-node` or `multi-node`.
    pub method: String,
    /// The nodes to remove.
    pub candidates: Vec<String>,
    /// The NodeClaims to launch first.
    pub replacements: Vec<ClaimOutput>,
    /// Price of the candidates minus price of the replacements.
    pub savings_per_hour: f64,
}

/// A node the planner may not disrupt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BlockedNode {
    /// The node.
    pub node: String,
    /// Why (`pod default/db-0 has karpenter.sh/do-not-disrupt`).
    pub reason: String,
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
                instance_type: it.name().to_string(),
                zone: o.zone().to_string(),
                capacity_type: o.capacity_type().to_string(),
                price_per_hour: o.price,
            });
        }
    }
    best
}

/// Every zone a claim may launch in: the zones of its instance types' available offerings that
/// its requirements allow, sorted. Offerings repeat a few (zone, capacity type, reservation)
/// combinations across hundreds of instance types: each is checked against the requirements
/// once, and the scan stops once every zone of `universe` (when known) is found.
fn launch_zones(claim: &NewNodeClaim, universe: Option<&BTreeSet<&str>>) -> Vec<String> {
    let reachable = universe.map(|u| {
        u.iter()
            .filter(|z| {
                claim
                    .requirements
                    .get(labels::ZONE)
                    .is_none_or(|r| r.has(z))
            })
            .count()
    });
    let mut checked: BTreeMap<(&str, &str, Option<&str>), bool> = BTreeMap::new();
    let mut zones: BTreeSet<&str> = BTreeSet::new();
    'types: for it in &claim.instance_types {
        for o in it.available_offerings() {
            if reachable.is_some_and(|n| zones.len() >= n) {
                break 'types;
            }
            if zones.contains(o.zone()) {
                continue;
            }
            let key = (o.zone(), o.capacity_type(), o.reservation_id());
            let allowed = *checked
                .entry(key)
                .or_insert_with(|| claim.requirements.intersects(o.requirements()).is_ok());
            if allowed {
                zones.insert(o.zone());
            }
        }
    }
    zones.into_iter().map(str::to_string).collect()
}

/// The contract's view of a NodeClaim the scheduler decided to create.
/// `universe`, when known, holds every zone of the instance types' available offerings (a
/// shortcut for [`launch_zones`]).
pub(crate) fn claim_output(
    claim: &NewNodeClaim,
    launch: Option<Launch>,
    universe: Option<&BTreeSet<&str>>,
) -> ClaimOutput {
    ClaimOutput {
        node_pool: claim.node_pool.clone(),
        instance_types: claim
            .instance_types
            .iter()
            .map(|it| it.name().to_string())
            .collect(),
        launch,
        zones: launch_zones(claim, universe),
        requirements: claim.requirements.to_node_selector_requirements(),
        pods: claim.pods.clone(),
        requests: claim.requests.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_rounding_and_gap() {
        let s = Summary::new(5, 4, 1, 0.192, 0.18);
        assert_eq!(s.cost_per_hour, 0.192);
        assert_eq!(s.lower_bound_per_hour, 0.18);
        assert_eq!(s.gap, Some(0.0667));
        assert_eq!(s.cost_per_month, 140.16);
        let z = Summary::new(0, 0, 0, 0.0, 0.0);
        assert_eq!(z.gap, Some(0.0));
        // A bound above the cost (rounding) is clamped to the cost.
        let c = Summary::new(1, 1, 1, 0.1, 0.10000001);
        assert_eq!(c.gap, Some(0.0));
        assert_eq!(floor_to(0.1234567, 6), 0.123456);
        assert_eq!(round_to(0.1 + 0.2, 6), 0.3);
    }

    #[test]
    fn zone_lists_share_their_prefix() {
        let z = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            zone_list(&z(&["us-east-1a", "us-east-1b", "us-east-1f"])),
            "us-east-1{a,b,f}"
        );
        assert_eq!(zone_list(&z(&["us-east-1a"])), "us-east-1a");
        assert_eq!(zone_list(&z(&[])), "-");
        assert_eq!(zone_list(&z(&["a", "b"])), "a,b");
    }

    #[test]
    fn abbreviates_long_lists() {
        let names: Vec<String> = (0..5).map(|i| format!("p{i}")).collect();
        assert_eq!(abbreviate(&names), "p0, p1, p2, ... (+2)");
        assert_eq!(abbreviate(&names[..2]), "p0, p1");
    }
}

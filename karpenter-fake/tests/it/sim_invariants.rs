//! Every invariant of the reliability suite shown firing: each test seeds a bug into the
//! simulated shell ([`SimConfig::seeded_bug`]: it rewrites the operator's actions before they
//! are carried out), plays a small scenario and expects the one invariant that bug breaks; the
//! same scenario without the bug holds every invariant. An invariant never shown to fire
//! could be one that cannot fail. (The leak and pending invariants have their own tests in
//! `sim_chaos`.)

use karpenter_core::api::{Budget, ConsolidationPolicy, NillableDuration, NodeClaim};
use karpenter_core::labels;
use karpenter_core::model::IntOrPercent;
use karpenter_core::operator::{Action, CallId, CloudCall};
use karpenter_core::resources::{Quantity, ResourceList};
use karpenter_fake::sim::chaos::{
    ChaosConfig, Event, FaultRates, Scenario, Setup, Violation, play,
};
use karpenter_fake::sim::workload::Deployment;
use karpenter_fake::sim::{ClusterApi, node_pool};

const STEPS: usize = 30;

/// One NodePool (`budget` nodes, consolidating as soon as it can) and one Deployment of
/// `replicas` pods of 1.5 CPU, scaled up at the first step.
fn scenario(budget: &str, deployment: Deployment, replicas: u32) -> Scenario {
    let mut pool = node_pool("default");
    pool.spec.disruption.budgets = Some(vec![Budget::nodes(budget)]);
    pool.spec.disruption.consolidation_policy = Some(ConsolidationPolicy::WhenEmptyOrUnderutilized);
    pool.spec.disruption.consolidate_after = NillableDuration::parse("0s").ok();
    let name = deployment.name.clone();
    let mut steps = vec![Vec::new(); STEPS];
    steps[0].push(Event::Scale {
        deployment: name,
        replicas,
    });
    Scenario {
        seed: 0,
        faults: FaultRates::none(),
        setup: Setup {
            node_pools: vec![pool],
            deployments: vec![(deployment, 0)],
            daemonsets: Vec::new(),
            instance_types: karpenter_fake::catalog::instance_types(8),
        },
        steps,
    }
}

fn app() -> Deployment {
    Deployment::new("app", 1_500, 1_024)
}

fn config(bug: Option<karpenter_fake::sim::SeededBug>) -> ChaosConfig {
    let mut config = ChaosConfig {
        steps: STEPS,
        faults: FaultRates::none(),
        ..ChaosConfig::default()
    };
    config.sim.seeded_bug = bug;
    config
}

/// Plays `scenario` with `bug` and returns the violation; checks first that the scenario
/// holds every invariant without it.
fn violation_of(scenario: &Scenario, bug: karpenter_fake::sim::SeededBug) -> Violation {
    if let Err((step, _, v)) = play(scenario, &config(None)) {
        panic!("without the bug the scenario must hold every invariant; step {step}: {v}");
    }
    let (_, _, v) = play(scenario, &config(Some(bug))).expect_err("the seeded bug must be caught");
    v
}

/// A disruption loop that ignores budgets, PDBs and do-not-disrupt: once every node is
/// initialized and every pod bound, it deletes every NodeClaim.
fn disrupt_everything(api: &ClusterApi, actions: &mut Vec<Action>) {
    let initialized = |c: &NodeClaim| {
        api.nodes.values().any(|n| {
            Some(n.provider_id.as_str()) == c.status.provider_id.as_deref()
                && n.labels.get(labels::INITIALIZED).map(String::as_str) == Some("true")
        })
    };
    let claims: Vec<&NodeClaim> = api.node_claims.values().collect();
    let all_bound = api.pods.values().all(|p| p.node_name.is_some());
    if claims.is_empty()
        || api.pods.is_empty()
        || !all_bound
        || !claims.iter().all(|c| initialized(c))
        || claims
            .iter()
            .any(|c| c.metadata.deletion_timestamp.is_some())
    {
        return;
    }
    actions.extend(claims.iter().map(|c| Action::DeleteNodeClaim {
        name: c.name().to_string(),
    }));
}

#[test]
fn the_budget_invariant_fires_when_disruption_ignores_budgets() {
    let v = violation_of(&scenario("0", app(), 3), disrupt_everything);
    assert!(
        matches!(v, Violation::BudgetExceeded { allowed: 0, .. }),
        "{v}"
    );
    assert_eq!(v.invariant(), "budget");
}

#[test]
fn the_do_not_disrupt_invariant_fires_when_disruption_ignores_the_annotation() {
    let v = violation_of(
        &scenario("100%", app().with_do_not_disrupt(), 2),
        disrupt_everything,
    );
    assert!(matches!(v, Violation::DoNotDisruptDrained { .. }), "{v}");
    assert_eq!(v.invariant(), "do-not-disrupt");
}

#[test]
fn the_pdb_invariant_fires_when_disruption_ignores_a_blocking_pdb() {
    let v = violation_of(
        &scenario("100%", app().with_max_unavailable(IntOrPercent::Int(0)), 2),
        disrupt_everything,
    );
    assert!(matches!(v, Violation::PdbBlockedDrained { .. }), "{v}");
    assert_eq!(v.invariant(), "pdb");
}

/// A shell that retries a launch after its result was recorded: the NodeClaim update that
/// records the instance is followed by a second `create` of the same NodeClaim.
fn relaunch_after_recording(api: &ClusterApi, actions: &mut Vec<Action>) {
    let mut extra = Vec::new();
    for a in actions.iter() {
        if let Action::UpdateNodeClaim(claim) = a
            && claim.status.provider_id.is_some()
            && api
                .node_claims
                .get(claim.name())
                .is_some_and(|c| c.status.provider_id.is_none())
        {
            extra.push((a.clone(), claim.clone()));
        }
    }
    for (i, (update, claim)) in extra.into_iter().enumerate() {
        let at = actions
            .iter()
            .position(|a| *a == update)
            .map_or(actions.len(), |p| p + 1);
        let id = CallId(u64::MAX - u64::try_from(i).unwrap_or(0));
        actions.insert(
            at,
            Action::Cloud {
                id,
                call: CloudCall::Create(claim),
            },
        );
    }
}

#[test]
fn the_launched_twice_invariant_fires_when_a_launch_is_retried_after_it_was_recorded() {
    let v = violation_of(&scenario("100%", app(), 2), relaunch_after_recording);
    assert!(matches!(v, Violation::LaunchedTwice { .. }), "{v}");
    assert_eq!(v.invariant(), "launched-twice");
}

/// A provisioner that ignores limits: every NodeClaim it creates is created twice.
fn create_every_claim_twice(_: &ClusterApi, actions: &mut Vec<Action>) {
    let copies: Vec<Action> = actions
        .iter()
        .filter_map(|a| match a {
            Action::CreateNodeClaim(claim) => {
                let mut copy = claim.clone();
                copy.metadata.name = Some(format!("{}-copy", claim.name()));
                Some(Action::CreateNodeClaim(copy))
            }
            _ => None,
        })
        .collect();
    actions.extend(copies);
}

#[test]
fn the_limit_invariant_fires_when_provisioning_ignores_limits() {
    let mut s = scenario("100%", app(), 2);
    // The limit holds exactly what the pods need on the cheapest fitting nodes.
    let mut limits = ResourceList::new();
    limits.insert("cpu", Quantity::from_units(4));
    s.setup.node_pools[0].spec.limits = Some(limits);
    // No consolidation: the empty copies stay (the limit is checked between steps).
    s.setup.node_pools[0].spec.disruption.consolidate_after = NillableDuration::parse("Never").ok();
    let v = violation_of(&s, create_every_claim_twice);
    assert!(matches!(v, Violation::LimitExceeded { .. }), "{v}");
    assert_eq!(v.invariant(), "limit");
}

/// A seeded bug that rewrites nothing changes nothing: the scenario runs its steps clean.
#[test]
fn a_seeded_bug_that_changes_nothing_holds_every_invariant() {
    fn no_op(_: &ClusterApi, _: &mut Vec<Action>) {}
    let report =
        play(&scenario("0", app(), 3), &config(Some(no_op))).expect("no bug, no violation");
    assert_eq!(report.steps, STEPS);
    assert!(report.launches > 0);
}

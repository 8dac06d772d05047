//! Two replicas with leader election in the simulator: the follower takes over when the leader
//! is paused or crashes, the paused one follows when it resumes, and the `non-leader-acted`
//! invariant fires when a shell ignores the renew deadline.

use jiff::SignedDuration;
use karpenter_core::api::{Budget, ConsolidationPolicy, NillableDuration};
use karpenter_fake::sim::chaos::{
    ChaosConfig, Event, FaultRates, Scenario, Setup, Violation, build_sim, play,
};
use karpenter_fake::sim::workload::Deployment;
use karpenter_fake::sim::{ReplicaConfig, node_pool};

const STEPS: usize = 16;

/// One consolidating NodePool and one Deployment: scaled to 4 at step 0, to 8 at step 4 (while
/// the leader is paused from step 3), to 2 at step 9; plus `faults` at their steps.
fn scenario(faults: Vec<(usize, Event)>) -> Scenario {
    let mut pool = node_pool("default");
    pool.spec.disruption.budgets = Some(vec![Budget::nodes("100%")]);
    pool.spec.disruption.consolidation_policy = Some(ConsolidationPolicy::WhenEmptyOrUnderutilized);
    pool.spec.disruption.consolidate_after = NillableDuration::parse("0s").ok();
    let mut steps = vec![Vec::new(); STEPS];
    for (step, replicas) in [(0, 4), (4, 8), (9, 2)] {
        steps[step].push(Event::Scale {
            deployment: "app".to_string(),
            replicas,
        });
    }
    for (step, e) in faults {
        steps[step].push(e);
    }
    Scenario {
        seed: 0,
        faults: FaultRates::none(),
        setup: Setup {
            node_pools: vec![pool],
            deployments: vec![(Deployment::new("app", 1_500, 1_024), 0)],
            daemonsets: Vec::new(),
            instance_types: karpenter_fake::catalog::instance_types(8),
        },
        steps,
    }
}

fn config(replicas: ReplicaConfig) -> ChaosConfig {
    let mut config = ChaosConfig {
        steps: STEPS,
        faults: FaultRates::none(),
        ..ChaosConfig::default()
    };
    config.sim.replicas = Some(replicas);
    config
}

#[test]
fn one_of_two_replicas_leads_and_the_other_follows() {
    let mut sim = build_sim(
        &scenario(Vec::new()).setup,
        &config(ReplicaConfig::default()).sim,
    );
    sim.scale_deployment("app", 4);
    sim.run_for(SignedDuration::from_mins(3)).unwrap();
    assert_eq!(sim.lease_holder(), Some("karpenter-a"));
    assert_eq!(sim.acting_replica().as_deref(), Some("karpenter-a"));
    assert!(sim.pending_pods().is_empty(), "{:?}", sim.pending_pods());
    assert!(sim.observed.non_leader_acts.is_empty());
    // One operator acted: one NodeClaim per launch, no duplicates from the follower.
    assert_eq!(sim.counts.launches, sim.api().node_claims.len());
}

#[test]
fn a_paused_leader_is_replaced_and_follows_when_it_resumes() {
    let mut sim = build_sim(
        &scenario(Vec::new()).setup,
        &config(ReplicaConfig::default()).sim,
    );
    sim.scale_deployment("app", 4);
    sim.run_for(SignedDuration::from_mins(3)).unwrap();
    assert_eq!(sim.lease_holder(), Some("karpenter-a"));
    sim.pause_leader(SignedDuration::from_secs(40));
    sim.scale_deployment("app", 8);
    // Within the lease duration nobody acts: the paused leader's renew deadline passes first.
    sim.run_for(SignedDuration::from_secs(12)).unwrap();
    assert_eq!(sim.lease_holder(), Some("karpenter-a"));
    assert_eq!(sim.acting_replica(), None);
    sim.run_for(SignedDuration::from_secs(10)).unwrap();
    assert_eq!(
        sim.lease_holder(),
        Some("karpenter-b"),
        "the follower took over"
    );
    assert_eq!(sim.acting_replica().as_deref(), Some("karpenter-b"));
    sim.run_for(SignedDuration::from_mins(3)).unwrap();
    assert_eq!(
        sim.lease_holder(),
        Some("karpenter-b"),
        "the resumed one follows"
    );
    assert_eq!(sim.acting_replica().as_deref(), Some("karpenter-b"));
    assert!(sim.pending_pods().is_empty(), "{:?}", sim.pending_pods());
    assert!(sim.observed.non_leader_acts.is_empty());
    assert!(sim.restarts() >= 1, "the resumed replica restarted");
}

#[test]
fn a_crashed_leaders_lease_is_taken_over_once_it_expires() {
    let mut sim = build_sim(
        &scenario(Vec::new()).setup,
        &config(ReplicaConfig::default()).sim,
    );
    sim.scale_deployment("app", 4);
    sim.run_for(SignedDuration::from_mins(3)).unwrap();
    sim.restart_operator();
    assert_eq!(
        sim.replica_identities(),
        vec!["karpenter-a-1".to_string(), "karpenter-b".to_string()],
        "the crashed pod was replaced"
    );
    sim.scale_deployment("app", 8);
    // Nobody acts until the dead pod's Lease expires; then one of the live replicas (here
    // the new pod, whose first round came before the follower's) takes it over.
    sim.run_for(SignedDuration::from_secs(12)).unwrap();
    assert_eq!(sim.lease_holder(), Some("karpenter-a"));
    assert_eq!(sim.acting_replica(), None);
    sim.run_for(SignedDuration::from_secs(18)).unwrap();
    let holder = sim.lease_holder().map(str::to_string);
    assert!(
        matches!(holder.as_deref(), Some("karpenter-a-1" | "karpenter-b")),
        "{holder:?}"
    );
    assert_eq!(sim.acting_replica(), holder);
    sim.run_for(SignedDuration::from_mins(3)).unwrap();
    assert!(sim.pending_pods().is_empty(), "{:?}", sim.pending_pods());
    assert!(sim.observed.non_leader_acts.is_empty());
}

#[test]
fn every_invariant_holds_through_pauses_and_crashes_of_the_leader() {
    let faults = vec![
        (3, Event::Pause { secs: 40 }),
        (6, Event::Crash { after: 3 }),
        (10, Event::Pause { secs: 25 }),
        (12, Event::Pause { secs: 60 }),
    ];
    let report = play(&scenario(faults), &config(ReplicaConfig::default()))
        .map_err(|(step, at, v)| format!("step {step} ({at}): {v}"))
        .unwrap();
    assert_eq!(report.steps, STEPS);
    assert!(report.restarts >= 1);
}

#[test]
fn the_non_leader_acted_invariant_fires_when_a_shell_ignores_the_renew_deadline() {
    let bug = ReplicaConfig {
        ignore_renew_deadline: true,
        ..ReplicaConfig::default()
    };
    let (_, _, v) = play(
        &scenario(vec![(3, Event::Pause { secs: 40 })]),
        &config(bug),
    )
    .expect_err("the resumed replica acts after the other took over");
    assert!(matches!(v, Violation::NonLeaderActed(_)), "{v}");
    assert_eq!(v.invariant(), "non-leader-acted");
    assert!(v.to_string().contains("karpenter-a"), "{v}");
}

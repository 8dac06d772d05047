//! The faults of the controller's shell, modelled by the simulator: 409 conflicts and server
//! errors on API writes, a lagging watch, a relist. Each is shown to reach the operator, and
//! the operator to come through it with every invariant held.

use karpenter_fake::sim::chaos::{ChaosConfig, Event, FaultRates, Scenario, play, play_observed};
use karpenter_fake::sim::node_pool;
use karpenter_fake::sim::workload::Deployment;

const STEPS: usize = 40;

/// One NodePool and one Deployment scaled to 6 pods at step 0 and to 1 at step 20 (a
/// scale-up, then a consolidation), with `faults` at steps 0 and 20.
fn scenario(faults: &[Event]) -> Scenario {
    let mut s = Scenario::generate(1, STEPS, FaultRates::none());
    s.setup.node_pools = vec![node_pool("default")];
    s.setup.deployments = vec![(Deployment::new("app", 1_500, 1_024), 0)];
    s.setup.daemonsets.clear();
    s.steps = vec![Vec::new(); STEPS];
    for (step, replicas) in [(0, 6), (20, 1)] {
        s.steps[step] = faults.to_vec();
        s.steps[step].push(Event::Scale {
            deployment: "app".into(),
            replicas,
        });
    }
    s
}

fn config() -> ChaosConfig {
    ChaosConfig {
        steps: STEPS,
        faults: FaultRates::none(),
        ..ChaosConfig::default()
    }
}

/// Plays `faults` and returns (write failures seen, pods pending at the end).
fn outcome(faults: &[Event]) -> (usize, usize) {
    let mut failures = 0;
    let mut pending = usize::MAX;
    play_observed(&scenario(faults), &config(), |_, sim| {
        failures = sim.counts.write_failures;
        pending = sim.pending_pods().len();
    })
    .unwrap_or_else(|(step, at, v)| panic!("step {step} ({at}): {v}"));
    (failures, pending)
}

#[test]
fn conflicts_and_server_errors_on_writes_are_retried_to_the_same_end() {
    let (clean, pending) = outcome(&[]);
    assert_eq!(pending, 0);
    let (failed, pending) = outcome(&[
        Event::Conflict { writes: 3 },
        Event::WriteError { writes: 3 },
    ]);
    assert!(
        failed > clean,
        "the injected failures reached the operator: {failed} against {clean} without"
    );
    assert_eq!(pending, 0, "every pod bound in the end");
}

#[test]
fn a_lagging_watch_delays_but_loses_nothing() {
    let lag = Event::WatchLag {
        lag_secs: 45,
        lasting_secs: 240,
    };
    let (_, pending) = outcome(&[lag]);
    assert_eq!(pending, 0);
}

#[test]
fn a_relist_during_a_lag_keeps_the_deletions_it_replaces() {
    let mut s = scenario(&[Event::WatchLag {
        lag_secs: 50,
        lasting_secs: 300,
    }]);
    // The consolidation at step 20 deletes nodes while the watch lags; the relist one step
    // later drops the held-back events, but the deletions must still reach the operator.
    s.steps[21].push(Event::Relist);
    s.steps[23].push(Event::Relist);
    let mut nodes_at_end = usize::MAX;
    play_observed(&s, &config(), |_, sim| nodes_at_end = sim.api().nodes.len())
        .unwrap_or_else(|(step, at, v)| panic!("step {step} ({at}): {v}"));
    let mut clean_nodes = usize::MAX;
    play_observed(&scenario(&[]), &config(), |_, sim| {
        clean_nodes = sim.api().nodes.len()
    })
    .unwrap_or_else(|(step, at, v)| panic!("step {step} ({at}): {v}"));
    assert_eq!(nodes_at_end, clean_nodes, "consolidated to the same end");
}

/// Every shell fault at a high rate, over several seeds of the generated workloads: every
/// invariant holds.
#[test]
fn seeds_with_every_shell_fault_often_keep_every_invariant() {
    let faults =
        FaultRates::parse("conflict=0.3,write-error=0.3,watch-lag=0.1,relist=0.2").unwrap();
    let config = ChaosConfig {
        steps: 300,
        faults,
        ..ChaosConfig::default()
    };
    for seed in 0..4 {
        let scenario = Scenario::generate(seed, 300, faults);
        let shell = scenario
            .trace()
            .iter()
            .filter(|(_, e)| {
                matches!(
                    e,
                    Event::Conflict { .. }
                        | Event::WriteError { .. }
                        | Event::WatchLag { .. }
                        | Event::Relist
                )
            })
            .count();
        assert!(shell > 50, "seed {seed}: {shell} shell faults");
        if let Err((step, at, v)) = play(&scenario, &config) {
            panic!("seed {seed}, step {step} ({at}): {v}");
        }
    }
}

/// The shell faults come from their own random stream: turning them on leaves every other
/// event of a seed as it was.
#[test]
fn shell_faults_leave_a_seeds_other_events_unchanged() {
    let without =
        FaultRates::parse("default,conflict=0,write-error=0,watch-lag=0,relist=0").unwrap();
    let base = FaultRates::default_on();
    assert_eq!(base.conflict, FaultRates::shell_rates().conflict);
    assert!(base.relist > 0.0);
    assert_eq!(without.relist, 0.0);
    for seed in [0, 7, 19] {
        let a = Scenario::generate(seed, 500, without).trace();
        let b: Vec<_> = Scenario::generate(seed, 500, base)
            .trace()
            .into_iter()
            .filter(|(_, e)| {
                !matches!(
                    e,
                    Event::Conflict { .. }
                        | Event::WriteError { .. }
                        | Event::WatchLag { .. }
                        | Event::Relist
                )
            })
            .collect();
        assert_eq!(a, b, "seed {seed}");
    }
}

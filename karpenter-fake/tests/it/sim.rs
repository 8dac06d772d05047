//! Scenario tests of the operator loops through the simulator shell.

use jiff::SignedDuration;
use karpenter_core::model::{OwnerReference, Pod};
use karpenter_core::resources::Quantity;
use karpenter_fake::sim::{Sim, SimConfig, node_pool};

fn deployment_pod(name: &str, cpu_milli: i64) -> Pod {
    let mut pod = Pod::new("default", name);
    pod.requests.insert("cpu", Quantity::from_milli(cpu_milli));
    pod.owner = Some(OwnerReference {
        api_version: "apps/v1".into(),
        kind: "ReplicaSet".into(),
        name: "app".into(),
        controller: true,
    });
    pod
}

#[test]
fn pending_pods_are_provisioned_launched_registered_and_bound() {
    let mut sim = Sim::new(SimConfig::default());
    sim.apply_node_pool(node_pool("default"));
    for i in 0..10 {
        sim.add_pod(deployment_pod(&format!("app-{i}"), 1500));
    }
    sim.start();
    let done = sim
        .run_until(SignedDuration::from_mins(5), |s| {
            s.pending_pods().is_empty()
        })
        .unwrap();
    assert!(done, "pending: {:?}", sim.pending_pods());
    eprintln!("{:#?}", sim.counts);
    eprintln!("{} {:?}", sim.now(), sim.write_errors);
}

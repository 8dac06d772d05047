//! `suite_test.go` › Reserved Instance Types (upstream `suite_test.go`, `offeringsToReserve` /
//! `reservationmanager.go`), in strict reserved mode (the provisioner's, and
//! [`suite_options`](karpenter_fake::harness::suite_options)'s).
//!
//! Catalog: `large-instance-type` (6 cpu, 6Gi), `medium-instance-type` (3 cpu, 3Gi) and
//! `small-instance-type` (2 cpu, 2Gi) with the default offerings; medium and small also get a
//! reserved offering in test-zone-1 with capacity 1, id `r-<name>` and price = their normal
//! price / 100,000.
//!
//! Upstream's fake provider hands every NodePool the same instance-type objects, so a launch into
//! a reservation consumes it for every pool offering that object. The harness keeps one copy of
//! the catalog per pool; [`provision`] propagates each consumed reservation to the other pools'
//! instance types of the same name carrying the same reservation.

use std::sync::Arc;

use karpenter_core::labels;
use karpenter_core::model::{ClusterNode, InstanceType, Offering, Pod};
use karpenter_core::requirements::Operator::In;
use karpenter_core::resources::names;
use karpenter_core::scheduling::NodePoolInput;
use karpenter_fake::catalog::{
    InstanceTypeOptions, RESERVATION_ID_LABEL, default_offerings, new_instance_type,
    price_from_resources,
};
use karpenter_fake::harness::{Cluster, Round};
use karpenter_fake::provider::consume_reservation;

use crate::suite_kit::*;

/// A fake instance type with `cpu`/`memory` and the default offerings plus one reserved
/// offering in test-zone-1 per `(id, capacity)`.
fn reservable(
    name: &str,
    cpu: &str,
    memory: &str,
    reservations: &[(&str, u32)],
) -> Arc<InstanceType> {
    let mut options = InstanceTypeOptions::with_resources(resources(&[
        (names::CPU, cpu),
        (names::MEMORY, memory),
    ]));
    // new_instance_type applies the pod default before pricing; pods don't change the price.
    let price = price_from_resources(&options.resources);
    let mut offerings = default_offerings(price);
    for (id, capacity) in reservations {
        offerings.push(Offering::reserved(
            "test-zone-1",
            *id,
            *capacity,
            price / 100_000.0,
            RESERVATION_ID_LABEL,
        ));
    }
    options.offerings = offerings;
    Arc::new(new_instance_type(name, options))
}

fn small(reservations: &[(&str, u32)]) -> Arc<InstanceType> {
    reservable("small-instance-type", "2", "2Gi", reservations)
}

/// The section's catalog.
fn reserved_catalog() -> Vec<Arc<InstanceType>> {
    vec![
        reservable("large-instance-type", "6", "6Gi", &[]),
        reservable(
            "medium-instance-type",
            "3",
            "3Gi",
            &[("r-medium-instance-type", 1)],
        ),
        small(&[("r-small-instance-type", 1)]),
    ]
}

/// The suite pool `name` with the section's catalog.
fn pool(name: &str) -> NodePoolInput {
    let mut pool = suite_pool_named(name);
    pool.instance_types = reserved_catalog();
    pool
}

/// One provisioning round; reservations consumed by its launches are consumed in every pool
/// offering the same instance type and reservation (see the module documentation).
fn provision(c: &mut Cluster, pods: &[Pod]) -> Round {
    let round = c.provision(pods.to_vec());
    for launch in &round.launched {
        let Some(id) = launch
            .offering
            .reservation_id
            .as_deref()
            .filter(|_| launch.offering.is_reserved())
        else {
            continue;
        };
        let from = &round.results.new_node_claims[launch.claim].node_pool;
        for pool in c.node_pools.iter_mut().filter(|p| &p.name != from) {
            for it in pool
                .instance_types
                .iter_mut()
                .filter(|it| it.name == launch.instance_type.name)
            {
                if let Some(i) = it
                    .offerings
                    .iter()
                    .position(|o| o.is_reserved() && o.reservation_id.as_deref() == Some(id))
                {
                    consume_reservation(it, i);
                }
            }
        }
    }
    round
}

/// The pods of `pods` that `round` did not bind.
fn unbound(round: &Round, pods: &[Pod]) -> Vec<Pod> {
    pods.iter()
        .filter(|p| !round.scheduled(&p.key()))
        .cloned()
        .collect()
}

/// The only node `round` bound pods to.
fn single_node(round: &Round) -> ClusterNode {
    assert_eq!(round.bindings.len(), 1, "bindings: {:?}", round.bindings);
    let pod = round.bindings.keys().next().expect("one binding");
    node_of(round, pod)
}

fn assert_reserved(node: &ClusterNode, expected_type: &str, id: Option<&str>) {
    assert_eq!(
        node.labels[labels::CAPACITY_TYPE],
        labels::CAPACITY_TYPE_RESERVED
    );
    assert_eq!(instance_type(node), expected_type);
    match id {
        Some(id) => assert_eq!(node.labels[RESERVATION_ID_LABEL], id),
        None => assert!(node.labels.contains_key(RESERVATION_ID_LABEL)),
    }
}

fn assert_not_reserved(node: &ClusterNode, expected_type: &str) {
    assert_ne!(
        node.labels[labels::CAPACITY_TYPE],
        labels::CAPACITY_TYPE_RESERVED
    );
    assert!(!node.labels.contains_key(RESERVATION_ID_LABEL));
    assert_eq!(instance_type(node), expected_type);
}

/// Pods labelled `app=test` with hostname anti-affinity to each other, built by `f`.
fn anti_affine(n: usize, f: impl Fn(usize, Pod) -> Pod) -> Vec<Pod> {
    (0..n)
        .map(|i| {
            let p = pod(&format!("p{i}"))
                .label("app", "test")
                .anti_affinity(&[("app", "test")], labels::HOSTNAME);
            f(i, p)
        })
        .collect()
}

#[test]
fn shouldnt_fallback_to_on_demand_or_spot_when_compatible_reserved_offerings_are_available() {
    let mut c = cluster_with(pool("default"));
    // Each fits a small or a medium, but two don't fit a medium.
    let pods = pods("p", 3, |p| p.cpu("1800m"));
    // A NodeClaim compatible with both reservations holds both: one launch per round.
    let r = provision(&mut c, &pods);
    assert_reserved(
        &single_node(&r),
        "small-instance-type",
        Some("r-small-instance-type"),
    );
    let pods = unbound(&r, &pods);
    let r = provision(&mut c, &pods);
    assert_reserved(
        &single_node(&r),
        "medium-instance-type",
        Some("r-medium-instance-type"),
    );
    // Both reservations are used up: fall back to spot or on-demand.
    let pods = unbound(&r, &pods);
    let r = provision(&mut c, &pods);
    assert_not_reserved(&single_node(&r), "small-instance-type");
}

#[test]
fn should_correctly_track_reservations_shared_across_nodepools() {
    let mut c = cluster_with(pool("np-1"));
    c.add_node_pool(pool("np-2"));
    let pods = anti_affine(2, |i, p| {
        p.require(labels::INSTANCE_TYPE, In, &["small-instance-type"])
            .require(labels::NODEPOOL, In, &[&format!("np-{}", i + 1)])
    });
    // The pools share the small reservation: one reserved launch, the other pod waits.
    let r = provision(&mut c, &pods);
    assert_reserved(
        &single_node(&r),
        "small-instance-type",
        Some("r-small-instance-type"),
    );
    let pods = unbound(&r, &pods);
    let r = provision(&mut c, &pods);
    assert_not_reserved(&single_node(&r), "small-instance-type");
}

#[test]
fn should_correctly_track_reservations_for_multiple_nodepools_with_distinct_reservations_for_the_same_instance_pool()
 {
    let mut c = cluster_with(pool("np-1"));
    let mut np2 = pool("np-2");
    np2.instance_types = vec![small(&[("r-distinct", 1)])];
    c.add_node_pool(np2);
    let pods = anti_affine(2, |i, p| {
        p.require(labels::INSTANCE_TYPE, In, &["small-instance-type"])
            .require(labels::NODEPOOL, In, &[&format!("np-{}", i + 1)])
    });
    let r = provision(&mut c, &pods);
    assert_eq!(r.bindings.len(), 2, "{:?}", r.results.pod_errors);
    let nodes: Vec<_> = pods.iter().map(|p| node_of(&r, &p.key())).collect();
    for n in &nodes {
        assert_reserved(n, "small-instance-type", None);
    }
    assert_ne!(
        nodes[0].labels[RESERVATION_ID_LABEL],
        nodes[1].labels[RESERVATION_ID_LABEL]
    );
}

#[test]
fn should_correctly_track_multiple_reservations_for_the_same_instance_pool() {
    let mut np = pool("default");
    np.instance_types[2] = small(&[("r-small-instance-type", 1), ("r-small-instance-type-2", 2)]);
    let mut c = cluster_with(np);
    let pods = anti_affine(4, |_, p| {
        p.require(labels::INSTANCE_TYPE, In, &["small-instance-type"])
    });
    // At most two instances are reservable in total: two launches.
    let r = provision(&mut c, &pods);
    assert_eq!(r.bindings.len(), 2, "{:?}", r.results.pod_errors);
    for p in pods.iter().filter(|p| r.scheduled(&p.key())) {
        assert_reserved(&node_of(&r, &p.key()), "small-instance-type", None);
    }
    // One instance is left in some reservation; the pessimistic hold defers the last pod.
    let pods = unbound(&r, &pods);
    let r = provision(&mut c, &pods);
    assert_reserved(&single_node(&r), "small-instance-type", None);
    let pods = unbound(&r, &pods);
    let r = provision(&mut c, &pods);
    assert_not_reserved(&single_node(&r), "small-instance-type");
}

#[test]
fn shouldnt_fallback_to_a_lower_weight_nodepool_if_a_reserved_offering_is_available() {
    let mut primary = pool("np-primary");
    primary.weight = 100;
    let mut fallback = pool("np-fallback");
    fallback.weight = 50;
    fallback.instance_types = vec![small(&[("r-fallback", 1)])];
    let mut c = cluster_with(primary);
    c.add_node_pool(fallback);
    let pods = anti_affine(2, |_, p| {
        p.require(labels::INSTANCE_TYPE, In, &["small-instance-type"])
    });
    // The second pod fails on the primary pool's reservation and may not use the fallback's.
    let r = provision(&mut c, &pods);
    let node = single_node(&r);
    assert_reserved(&node, "small-instance-type", None);
    assert_eq!(node.labels[labels::NODEPOOL], "np-primary");
    let pods = unbound(&r, &pods);
    let r = provision(&mut c, &pods);
    let node = single_node(&r);
    assert_not_reserved(&node, "small-instance-type");
    assert_eq!(node.labels[labels::NODEPOOL], "np-primary");
}

#[test]
fn shouldnt_relax_preferences_when_a_pod_fails_to_schedule_due_to_a_reserved_offering_error() {
    // Upstream builds a distinct instance type for np-2 but never hands it to the provider, so
    // both pools offer the section's catalog. With equal weights np-2 is tried first (names
    // descending): relaxing the preference would schedule the second pod there at once.
    let mut c = cluster_with(pool("np-1"));
    c.add_node_pool(pool("np-2"));
    let pods = anti_affine(2, |_, p| {
        p.prefer(labels::NODEPOOL, In, &["np-1"]).require(
            labels::INSTANCE_TYPE,
            In,
            &["small-instance-type"],
        )
    });
    let r = provision(&mut c, &pods);
    let node = single_node(&r);
    assert_reserved(&node, "small-instance-type", None);
    assert_eq!(node.labels[labels::NODEPOOL], "np-1");
    let pods = unbound(&r, &pods);
    // The preference still holds: np-1 without a reservation.
    let r = provision(&mut c, &pods);
    let node = single_node(&r);
    assert_not_reserved(&node, "small-instance-type");
    assert_eq!(node.labels[labels::NODEPOOL], "np-1");
}

#[test]
fn should_handle_multiple_pods_on_reserved_nodes() {
    let mut c = cluster_with(pool("np-1"));
    let aff = [("app", "test")];
    let pods: Vec<Pod> = (0..2)
        .map(|i| {
            pod(&format!("p{i}"))
                .label("app", "test")
                .require(labels::INSTANCE_TYPE, In, &["small-instance-type"])
                .require(labels::NODEPOOL, In, &["np-1"])
                .require(labels::CAPACITY_TYPE, In, &[labels::CAPACITY_TYPE_RESERVED])
                .require(labels::ZONE, In, &["test-zone-1"])
                .affinity(&aff, labels::ZONE)
        })
        .collect();
    let r = provision(&mut c, &pods);
    assert_eq!(r.bindings.len(), 2, "{:?}", r.results.pod_errors);
    assert_eq!(distinct_nodes(&r, &pods).len(), 1);
    assert_reserved(
        &node_of(&r, &pods[0].key()),
        "small-instance-type",
        Some("r-small-instance-type"),
    );
}

//! Upstream `suite_test.go` `suite_test.go`, Context "Offering Overrides", plus the
//! allocatable-group rules of upstream `cloudprovider/types.go`,
//! `filterInstanceTypesByRequirements` they rest on.
//!
//! Assertions are on the solve's NodeClaims (their candidate instance types) and pod errors.
//! The harness's fake launch, like upstream's fake provider, checks the claim's requests against
//! the instance type's *base* allocatable, so claims that only fit through an override do not
//! launch; upstream's scenarios look at the scheduling results too.

use std::sync::Arc;

use karpenter_core::labels;
use karpenter_core::model::{InstanceType, Offering, Overhead, Pod};
use karpenter_core::requirements::{NodeSelectorRequirement, Operator};
use karpenter_core::resources::{Quantity, ResourceList, names};
use karpenter_core::scheduling::{PodErrorKind, solve};
use karpenter_fake::catalog::{
    InstanceTypeOptions, ZONE_1, ZONE_2, default_offerings, new_instance_type,
};
use karpenter_fake::harness::{Cluster, node_pool};

const SLOTS: &str = "test.com/extended-slots";

fn slots(n: i64) -> ResourceList {
    let mut l = ResourceList::new();
    l.insert(SLOTS, Quantity::from_units(n));
    l
}

/// A 4-cpu fake type; `offerings` empty means the default offerings.
fn fake_type(name: &str, offerings: Vec<Offering>) -> Arc<InstanceType> {
    Arc::new(new_instance_type(
        name,
        InstanceTypeOptions {
            offerings,
            ..Default::default()
        },
    ))
}

/// The default offerings, each with a capacity override of 4 slots.
fn slot_offerings() -> Vec<Offering> {
    default_offerings(1.0)
        .into_iter()
        .map(|mut o| {
            o.capacity_override = Some(slots(4));
            o
        })
        .collect()
}

/// The scheduling suite's cluster (`capacity-type In [spot, on-demand, reserved]`) over `types`.
fn cluster(types: Vec<Arc<InstanceType>>) -> Cluster {
    let mut pool = node_pool("default", types);
    pool.requirements = vec![NodeSelectorRequirement::new(
        labels::CAPACITY_TYPE,
        Operator::In,
        ["spot", "on-demand", "reserved"],
    )];
    Cluster::new().with_node_pool(pool)
}

fn slot_pod(name: &str) -> Pod {
    let mut p = Pod::new("default", name);
    p.requests = slots(1);
    p
}

fn candidates(c: &Cluster) -> Vec<Vec<String>> {
    solve(&c.scheduling_input(), &c.options)
        .new_node_claims
        .iter()
        .map(|nc| nc.instance_types.iter().map(|it| it.name.clone()).collect())
        .collect()
}

#[test]
fn should_only_select_instance_types_whose_offerings_have_capacity_override_when_pod_requests_an_override_resource()
 {
    let mut c = cluster(vec![
        fake_type("normal", Vec::new()),
        fake_type("override-capable", slot_offerings()),
    ]);
    let round = c.provision(vec![slot_pod("p")]);
    assert!(
        round.results.pod_errors.is_empty(),
        "{:?}",
        round.results.pod_errors
    );
    let claims = round.node_claims();
    assert_eq!(claims.len(), 1);
    let names: Vec<&str> = claims[0]
        .instance_types
        .iter()
        .map(|it| it.name.as_str())
        .collect();
    assert_eq!(names, vec!["override-capable"]);
}

#[test]
fn should_reject_instance_type_when_override_allocatable_fits_but_override_offerings_are_unavailable()
 {
    // The override offerings are unavailable; the type stays launchable through a plain,
    // available offering whose (base) allocatable has no slots.
    let mut offerings: Vec<Offering> = slot_offerings()
        .into_iter()
        .map(|mut o| {
            o.available = false;
            o
        })
        .collect();
    offerings.push(Offering::new(ZONE_1, labels::CAPACITY_TYPE_ON_DEMAND, 1.0));
    let mut c = cluster(vec![
        fake_type("normal", Vec::new()),
        fake_type("override-capable", offerings),
    ]);
    let round = c.provision(vec![slot_pod("p")]);
    assert!(round.node_claims().is_empty());
    let err = &round.results.pod_errors["default/p"];
    assert_eq!(err.kind, PodErrorKind::InstanceTypes);
    assert!(!round.scheduled("default/p"));
}

// ---- allocatable groups (upstream `cloudprovider/types.go`, `filterInstanceTypesByRequirements`),
// beyond the upstream scenarios ----------------------

/// Fit and offering must come from the same allocatable group: the slots exist only through the
/// zone-2 offering, so a pod needing slots in zone 1 has no candidate.
#[test]
fn fit_and_offering_must_come_from_the_same_allocatable_group() {
    let mut with_slots = Offering::new(ZONE_2, labels::CAPACITY_TYPE_ON_DEMAND, 1.0);
    with_slots.capacity_override = Some(slots(4));
    let plain = Offering::new(ZONE_1, labels::CAPACITY_TYPE_ON_DEMAND, 1.0);
    let it = fake_type("mixed", vec![plain, with_slots]);

    let mut c = cluster(vec![it.clone()]);
    let mut zone_1 = slot_pod("z1");
    zone_1
        .node_selector
        .insert(labels::ZONE.into(), ZONE_1.into());
    c.provision(vec![zone_1]);
    assert_eq!(candidates(&c), Vec::<Vec<String>>::new());

    let mut c = cluster(vec![it.clone()]);
    let mut zone_2 = slot_pod("z2");
    zone_2
        .node_selector
        .insert(labels::ZONE.into(), ZONE_2.into());
    c.provision(vec![zone_2]);
    assert_eq!(candidates(&c), vec![vec!["mixed".to_string()]]);

    // Without slots the plain zone-1 offering serves.
    let mut c = cluster(vec![it]);
    let mut plain_pod = Pod::new("default", "plain");
    plain_pod
        .node_selector
        .insert(labels::ZONE.into(), ZONE_1.into());
    let round = c.provision(vec![plain_pod]);
    assert!(round.scheduled("default/plain"));
    assert_eq!(
        round.node_of("default/plain").unwrap().labels[labels::ZONE],
        ZONE_1
    );
}

/// An overhead override that frees CPU lets a pod fit that the base allocatable cannot hold.
#[test]
fn an_overhead_override_changes_the_groups_allocatable() {
    let mut lean = Offering::new(ZONE_1, labels::CAPACITY_TYPE_ON_DEMAND, 1.0);
    let mut no_cpu = ResourceList::new();
    no_cpu.insert(names::CPU, Quantity::ZERO);
    lean.overhead_override = Some(Overhead {
        kube_reserved: no_cpu,
        ..Overhead::default()
    });
    let mut c = cluster(vec![
        fake_type("plain", Vec::new()),
        fake_type("lean", vec![lean]),
    ]);
    // 4 cpu capacity, 100m kube-reserved: the base allocatable is 3900m.
    let mut p = Pod::new("default", "p");
    p.requests.insert(names::CPU, Quantity::from_milli(3950));
    c.provision(vec![p]);
    assert_eq!(candidates(&c), vec![vec!["lean".to_string()]]);
}

/// Offerings that override nothing the pod needs leave scheduling as it was.
#[test]
fn overrides_do_not_change_placements_that_the_base_group_serves() {
    let mut c = cluster(vec![fake_type("override-capable", slot_offerings())]);
    let round = c.provision(vec![Pod::new("default", "p")]);
    assert!(round.scheduled("default/p"));
    assert_eq!(
        round.node_of("default/p").unwrap().labels[labels::INSTANCE_TYPE],
        "override-capable"
    );
}

use std::sync::Arc;

use futures::executor::block_on;
use karpenter_core::api::{
    NodeClaim, NodeClaimSpec, NodeClaimTemplate, NodeClaimTemplateSpec, NodeClassReference,
    NodePool, NodePoolSpec, TemplateMetadata,
};
use karpenter_core::cloud::{CloudProvider, CloudProviderError, UnavailableOffering};
use karpenter_core::labels;
use karpenter_core::model::Offering;
use karpenter_core::requirements::{NodeSelectorRequirement, Operator};
use karpenter_core::resources::{Quantity, names};
use karpenter_fake::catalog::{
    InstanceTypeOptions, RESERVATION_ID_LABEL, instance_types, new_instance_type,
};
use karpenter_fake::{Call, CallKind, FakeCloudProvider};

fn claim(reqs: &[(&str, Operator, &[&str])]) -> NodeClaim {
    let mut nc = NodeClaim::new("claim", NodeClaimSpec::new(NodeClassReference::default()));
    nc.spec.requirements = Some(
        reqs.iter()
            .map(|(k, op, vs)| NodeSelectorRequirement::new(*k, *op, vs.iter().copied()))
            .collect(),
    );
    nc
}

fn label<'a>(nc: &'a NodeClaim, key: &str) -> Option<&'a str> {
    nc.metadata.labels.get(key).map(String::as_str)
}

fn node_pool(name: &str) -> NodePool {
    let template = NodeClaimTemplate {
        metadata: TemplateMetadata::default(),
        spec: NodeClaimTemplateSpec::new(NodeClassReference::default()),
    };
    NodePool::new(name, NodePoolSpec::new(template))
}

#[test]
fn unconstrained_claim_lands_on_cheapest_spot_zone_1() {
    let p = FakeCloudProvider::new();
    let nc = block_on(p.create(&claim(&[]))).unwrap();
    assert_eq!(nc.status.provider_id.as_deref(), Some("fake://1"));
    assert_eq!(
        label(&nc, labels::INSTANCE_TYPE),
        Some("small-instance-type")
    );
    assert_eq!(label(&nc, labels::CAPACITY_TYPE), Some("spot"));
    assert_eq!(label(&nc, labels::ZONE), Some("test-zone-1"));
    assert_eq!(label(&nc, labels::ARCH), Some("amd64"));
    assert_eq!(label(&nc, "integer"), Some("2"));
    assert_eq!(label(&nc, "size"), Some("small"));
    assert_eq!(label(&nc, "special"), None);
    assert_eq!(
        nc.status.capacity.get(names::CPU),
        Some(Quantity::from_units(2))
    );
    assert_eq!(
        nc.status.allocatable.get(names::CPU),
        Some(Quantity::from_milli(1900))
    );
    assert_eq!(nc.metadata.name.as_deref(), Some("claim"));
}

#[test]
fn zone_3_implies_on_demand() {
    let p = FakeCloudProvider::new();
    let nc = block_on(p.create(&claim(&[(labels::ZONE, Operator::In, &["test-zone-3"])]))).unwrap();
    assert_eq!(label(&nc, labels::ZONE), Some("test-zone-3"));
    assert_eq!(label(&nc, labels::CAPACITY_TYPE), Some("on-demand"));
}

#[test]
fn capacity_type_and_zone_constraints() {
    let p = FakeCloudProvider::new();
    let nc = block_on(p.create(&claim(&[(
        labels::CAPACITY_TYPE,
        Operator::In,
        &["on-demand"],
    )])))
    .unwrap();
    assert_eq!(label(&nc, labels::CAPACITY_TYPE), Some("on-demand"));
    assert_eq!(label(&nc, labels::ZONE), Some("test-zone-1"));
    let nc =
        block_on(p.create(&claim(&[(labels::ZONE, Operator::NotIn, &["test-zone-1"])]))).unwrap();
    assert_eq!(label(&nc, labels::CAPACITY_TYPE), Some("spot"));
    assert_eq!(label(&nc, labels::ZONE), Some("test-zone-2"));
}

#[test]
fn requests_and_requirements_filter_instance_types() {
    let p = FakeCloudProvider::new();
    // Too big for small-instance-type (1.9 cpu allocatable).
    let mut c = claim(&[]);
    c.spec
        .resources
        .requests
        .insert(names::CPU, Quantity::from_units(3));
    let nc = block_on(p.create(&c)).unwrap();
    assert_eq!(
        label(&nc, labels::INSTANCE_TYPE),
        Some("default-instance-type")
    );
    // Ties keep catalog order: default-instance-type before single-pod-instance-type.

    let nc = block_on(p.create(&claim(&[(labels::ARCH, Operator::In, &["arm64"])]))).unwrap();
    assert_eq!(label(&nc, labels::INSTANCE_TYPE), Some("arm-instance-type"));
    assert_eq!(label(&nc, "size"), Some("large"));
    assert_eq!(label(&nc, "special"), Some("optional"));

    // The OS label honours the claim's requirement.
    let nc = block_on(p.create(&claim(&[(labels::OS, Operator::In, &["windows"])]))).unwrap();
    assert_eq!(label(&nc, labels::OS), Some("windows"));
    let nc = block_on(p.create(&claim(&[]))).unwrap();
    assert_eq!(label(&nc, labels::OS), Some("darwin"));

    let err =
        block_on(p.create(&claim(&[(labels::ZONE, Operator::In, &["nowhere"])]))).unwrap_err();
    assert!(err.is_insufficient_capacity(), "{err}");
}

#[test]
fn claim_labels_win() {
    let p = FakeCloudProvider::new();
    let mut c = claim(&[]);
    c.metadata
        .labels
        .insert(labels::ZONE.into(), "my-zone".into());
    c.metadata.labels.insert("team".into(), "a".into());
    let nc = block_on(p.create(&c)).unwrap();
    assert_eq!(label(&nc, labels::ZONE), Some("my-zone"));
    assert_eq!(label(&nc, "team"), Some("a"));
}

#[test]
fn get_list_delete() {
    let p = FakeCloudProvider::new();
    let a = block_on(p.create(&claim(&[]))).unwrap();
    let b = block_on(p.create(&claim(&[]))).unwrap();
    assert_eq!(b.status.provider_id.as_deref(), Some("fake://2"));
    assert_eq!(block_on(p.get("fake://1")).unwrap(), a);
    assert_eq!(block_on(p.list()).unwrap(), vec![a.clone(), b.clone()]);
    block_on(p.delete(&a)).unwrap();
    assert!(block_on(p.get("fake://1")).unwrap_err().is_not_found());
    assert!(block_on(p.delete(&a)).unwrap_err().is_not_found());
    assert!(block_on(p.get("bogus")).unwrap_err().is_not_found());
    assert!(block_on(p.delete(&claim(&[]))).unwrap_err().is_not_found());
    assert_eq!(block_on(p.list()).unwrap(), vec![b]);
}

#[test]
fn calls_are_recorded() {
    let p = FakeCloudProvider::new();
    let c = claim(&[]);
    let nc = block_on(p.create(&c)).unwrap();
    let _ = block_on(p.get("fake://1"));
    let _ = block_on(p.list());
    let _ = block_on(p.instance_types(&node_pool("default")));
    let _ = block_on(p.is_drifted(&nc));
    let _ = block_on(p.delete(&nc));
    let calls = p.calls();
    assert_eq!(
        calls,
        vec![
            Call::Create(Box::new(c.clone())),
            Call::Get("fake://1".into()),
            Call::List,
            Call::InstanceTypes("default".into()),
            Call::IsDrifted(Box::new(nc.clone())),
            Call::Delete(Box::new(nc)),
        ]
    );
    assert_eq!(p.call_count(CallKind::Create), 1);
    assert_eq!(p.create_calls(), vec![c]);
    p.clear_calls();
    assert!(p.calls().is_empty());
}

#[test]
fn calls_without_the_call_log_act_but_are_not_recorded() {
    let p = FakeCloudProvider::new();
    p.set_call_log(false);
    p.fail_next(1, || CloudProviderError::throttled("slow down"));
    // An injected failure still applies while nothing is recorded.
    assert!(block_on(p.create(&claim(&[]))).is_err());
    let nc = block_on(p.create(&claim(&[]))).unwrap();
    let _ = block_on(p.is_drifted(&nc));
    assert!(p.calls().is_empty());
    assert_eq!(p.call_count(CallKind::Create), 0);
    assert_eq!(p.instances(), vec![nc.clone()]);

    // Back on: recorded again, from then on.
    p.set_call_log(true);
    let _ = block_on(p.delete(&nc));
    assert_eq!(p.calls(), vec![Call::Delete(Box::new(nc))]);
    // A reset turns it on as well.
    p.set_call_log(false);
    p.reset();
    let _ = block_on(p.list());
    assert_eq!(p.calls(), vec![Call::List]);
}

#[test]
fn instance_types_per_node_pool() {
    let p = FakeCloudProvider::new();
    assert_eq!(
        block_on(p.instance_types(&node_pool("a"))).unwrap().len(),
        6
    );
    p.set_instance_types(instance_types(3));
    p.set_node_pool_instance_types("b", instance_types(5));
    assert_eq!(
        block_on(p.instance_types(&node_pool("a"))).unwrap().len(),
        3
    );
    assert_eq!(
        block_on(p.instance_types(&node_pool("b"))).unwrap().len(),
        5
    );

    // Create uses the claim's pool.
    let mut c = claim(&[("size", Operator::In, &["large"])]);
    assert!(
        block_on(p.create(&c))
            .unwrap_err()
            .is_insufficient_capacity()
    );
    c.metadata
        .labels
        .insert(labels::NODEPOOL.into(), "b".into());
    let nc = block_on(p.create(&c)).unwrap();
    assert_eq!(label(&nc, labels::INSTANCE_TYPE), Some("fake-it-4"));
    assert_eq!(label(&nc, labels::NODEPOOL), Some("b"));
}

#[test]
fn failed_offerings_are_skipped_then_reported() {
    let p = FakeCloudProvider::new();
    p.set_instance_types(instance_types(1));
    p.fail_offering("fake-it-0", "test-zone-1", "spot");
    let nc = block_on(p.create(&claim(&[]))).unwrap();
    assert_eq!(label(&nc, labels::ZONE), Some("test-zone-2"));
    assert_eq!(label(&nc, labels::CAPACITY_TYPE), Some("spot"));

    p.fail_offering("fake-it-0", "test-zone-2", "spot");
    let spot = claim(&[(labels::CAPACITY_TYPE, Operator::In, &["spot"])]);
    match block_on(p.create(&spot)).unwrap_err() {
        CloudProviderError::InsufficientCapacity { offerings, .. } => assert_eq!(
            offerings,
            vec![
                UnavailableOffering::new("fake-it-0", "test-zone-1", "spot"),
                UnavailableOffering::new("fake-it-0", "test-zone-2", "spot"),
            ]
        ),
        e => panic!("unexpected {e:?}"),
    }
    // On-demand is still fine.
    let nc = block_on(p.create(&claim(&[]))).unwrap();
    assert_eq!(label(&nc, labels::CAPACITY_TYPE), Some("on-demand"));
    assert_eq!(p.instances().len(), 2);
}

#[test]
fn failed_offering_moves_to_next_cheapest_type() {
    let p = FakeCloudProvider::new();
    p.set_instance_types(instance_types(2));
    for (z, ct) in [
        ("test-zone-1", "spot"),
        ("test-zone-2", "spot"),
        ("test-zone-1", "on-demand"),
        ("test-zone-2", "on-demand"),
        ("test-zone-3", "on-demand"),
    ] {
        p.fail_offering("fake-it-0", z, ct);
    }
    let nc = block_on(p.create(&claim(&[]))).unwrap();
    assert_eq!(label(&nc, labels::INSTANCE_TYPE), Some("fake-it-1"));
}

#[test]
fn fail_next_applies_to_the_next_calls() {
    let p = FakeCloudProvider::new();
    p.fail_next(2, || CloudProviderError::throttled("slow down"));
    p.fail_next(1, || {
        CloudProviderError::timeout("late").with_source(std::io::Error::other("no answer"))
    });
    let e1 = block_on(p.list()).unwrap_err();
    let e2 = block_on(p.create(&claim(&[]))).unwrap_err();
    let e3 = block_on(p.get("fake://1")).unwrap_err();
    assert!(matches!(e1, CloudProviderError::Throttled { .. }));
    assert!(matches!(e2, CloudProviderError::Throttled { .. }));
    assert!(matches!(e3, CloudProviderError::Timeout { .. }));
    assert!(e1.is_retryable() && e3.is_retryable());
    assert_eq!(
        std::error::Error::source(&e3).map(ToString::to_string),
        Some("no answer".to_string()),
        "the injected error's source is kept"
    );
    // The failed calls were recorded and launched nothing.
    assert_eq!(p.calls().len(), 3);
    assert!(p.instances().is_empty());
    let nc = block_on(p.create(&claim(&[]))).unwrap();
    assert_eq!(nc.status.provider_id.as_deref(), Some("fake://1"));
}

#[test]
fn partial_failure_after_k_creates() {
    let p = FakeCloudProvider::new();
    p.fail_creates_after(2);
    let results: Vec<_> = (0..4).map(|_| block_on(p.create(&claim(&[])))).collect();
    assert!(results[0].is_ok() && results[1].is_ok());
    for r in &results[2..] {
        assert!(matches!(r, Err(CloudProviderError::Create { .. })), "{r:?}");
    }
    assert_eq!(p.instances().len(), 2);
    assert_eq!(p.call_count(CallKind::Create), 4);
}

#[test]
fn reserved_offerings_are_preferred_and_consumed() {
    let p = FakeCloudProvider::new();
    let mut offerings = catalog_default_offerings(1.0);
    offerings.push(Offering::reserved(
        "test-zone-2",
        "r-1",
        2,
        1.5,
        RESERVATION_ID_LABEL,
    ));
    let it = new_instance_type(
        "reservable",
        InstanceTypeOptions {
            offerings,
            ..Default::default()
        },
    );
    p.set_instance_types(vec![Arc::new(it)]);
    for _ in 0..2 {
        let nc = block_on(p.create(&claim(&[]))).unwrap();
        assert_eq!(label(&nc, labels::CAPACITY_TYPE), Some("reserved"));
        assert_eq!(label(&nc, labels::ZONE), Some("test-zone-2"));
        assert_eq!(label(&nc, RESERVATION_ID_LABEL), Some("r-1"));
    }
    let types = p.instance_types_for("any");
    let reserved = &types[0].offerings[5];
    assert_eq!(reserved.reservation_capacity, 0);
    assert!(!reserved.available);
    let nc = block_on(p.create(&claim(&[]))).unwrap();
    assert_eq!(label(&nc, labels::CAPACITY_TYPE), Some("spot"));
    assert_eq!(label(&nc, RESERVATION_ID_LABEL), None);
}

fn catalog_default_offerings(price: f64) -> Vec<Offering> {
    karpenter_fake::catalog::default_offerings(price)
}

#[test]
fn drift_repair_name_reset() {
    let p = FakeCloudProvider::new();
    let nc = block_on(p.create(&claim(&[]))).unwrap();
    assert_eq!(block_on(p.is_drifted(&nc)).unwrap(), None);
    p.set_drifted("fake://1", "ImageChanged");
    assert_eq!(
        block_on(p.is_drifted(&nc)).unwrap().as_deref(),
        Some("ImageChanged")
    );
    p.clear_drifted("fake://1");
    assert_eq!(block_on(p.is_drifted(&nc)).unwrap(), None);
    assert_eq!(p.name(), "fake");
    assert_eq!(p.repair_policies().len(), 2);
    p.set_repair_policies(Vec::new());
    assert!(p.repair_policies().is_empty());

    p.fail_next(1, || CloudProviderError::other("x"));
    p.fail_offering("small-instance-type", "test-zone-1", "spot");
    p.set_instance_types(instance_types(1));
    p.reset();
    assert!(p.calls().is_empty());
    assert!(p.instances().is_empty());
    assert_eq!(p.repair_policies().len(), 2);
    let nc = block_on(p.create(&claim(&[]))).unwrap();
    assert_eq!(nc.status.provider_id.as_deref(), Some("fake://1"));
    assert_eq!(
        label(&nc, labels::INSTANCE_TYPE),
        Some("small-instance-type")
    );
    assert_eq!(label(&nc, labels::ZONE), Some("test-zone-1"));
}

#[test]
fn usable_as_trait_object() {
    let p: Arc<dyn CloudProvider> = Arc::new(FakeCloudProvider::new());
    let nc = block_on(p.create(&claim(&[]))).unwrap();
    assert_eq!(block_on(p.list()).unwrap(), vec![nc]);
}

//! Capacity reservations end to end on moto: `capacityReservationSelectorTerms` resolved
//! through DescribeCapacityReservations (the stand-in of scripts/moto/standins.py: moto 5.2.5
//! has no capacity reservations), the class's `status.capacityReservations`, reserved offerings
//! in the provider's instance types, and launches into the reservation until it is used up.

use aws_sdk_ec2::types as ec2;
use karpenter_aws::nodeclass::EC2NodeClass;
use karpenter_aws::nodeclass::reconcile::CAPACITY_RESERVATIONS_READY;
use karpenter_aws::reservation::{
    CAPACITY_RESERVATION_ID, CAPACITY_RESERVATION_INTERRUPTIBLE, CAPACITY_RESERVATION_TYPE,
};
use karpenter_aws::sdk::nodeclass::NodeClassResolver;
use karpenter_aws::sdk::provider::AwsCloudProvider;
use karpenter_core::api::{NodeClaim, NodeClaimSpec, NodeClassReference};
use karpenter_core::cloud::CloudProvider;
use karpenter_core::requirements::{NodeSelectorRequirement, Operator};

use super::env::{Cluster, clients, cluster_name};

fn claim(name: &str, instance_type: &str) -> NodeClaim {
    let mut spec = NodeClaimSpec::new(NodeClassReference::new(
        "karpenter.k8s.aws",
        "EC2NodeClass",
        "reserved",
    ));
    spec.requirements = Some(vec![
        NodeSelectorRequirement::new(
            "node.kubernetes.io/instance-type",
            Operator::In,
            [instance_type],
        ),
        NodeSelectorRequirement::new(
            "karpenter.sh/capacity-type",
            Operator::In,
            ["reserved", "on-demand"],
        ),
    ]);
    let mut c = NodeClaim::new(name, spec);
    c.metadata
        .labels
        .insert("karpenter.sh/nodepool".into(), "default".into());
    c
}

/// A reservation in the stand-in, tagged for the cluster; `extra` tags are the stand-in's
/// test-only knobs (`standin:reservation-type`, ...).
async fn reserve(
    cluster: &Cluster,
    instance_type: &str,
    zone: &str,
    count: i32,
    end: Option<jiff::Timestamp>,
    extra: &[(&str, &str)],
) -> String {
    let mut tags = ec2::TagSpecification::builder()
        .resource_type(ec2::ResourceType::CapacityReservation)
        .tags(
            ec2::Tag::builder()
                .key("karpenter.sh/discovery")
                .value(&cluster.name)
                .build(),
        );
    for (k, v) in extra {
        tags = tags.tags(ec2::Tag::builder().key(*k).value(*v).build());
    }
    let mut call = cluster
        .clients
        .ec2
        .create_capacity_reservation()
        .instance_type(instance_type)
        .instance_platform(ec2::CapacityReservationInstancePlatform::LinuxUnix)
        .availability_zone(zone)
        .instance_count(count)
        .instance_match_criteria(ec2::InstanceMatchCriteria::Targeted)
        .tag_specifications(tags.build());
    if let Some(end) = end {
        call = call
            .end_date(aws_smithy_types::DateTime::from_secs(end.as_second()))
            .end_date_type(ec2::EndDateType::Limited);
    }
    call.send()
        .await
        .unwrap()
        .capacity_reservation()
        .and_then(|r| r.capacity_reservation_id())
        .unwrap()
        .to_string()
}

/// The class resolved with the provider's reservation availability, and put in its store.
async fn resolve_into(
    cluster: &Cluster,
    provider: &AwsCloudProvider,
    class: EC2NodeClass,
) -> EC2NodeClass {
    let resolver = NodeClassResolver::new(cluster.clients.clone(), &cluster.name, "1.33")
        .with_reservation_availability(provider.reservation_availability());
    let r = resolver
        .reconcile(&class, jiff::Timestamp::now())
        .await
        .unwrap();
    let mut class = class;
    class.status = r.status;
    provider
        .node_classes()
        .write()
        .unwrap()
        .insert(class.name().to_string(), class.clone());
    class
}

/// `CapacityReservationSpecification` of every launch template of the cluster, as
/// (preference, target id).
async fn template_reservations(cluster: &Cluster) -> Vec<(String, Option<String>)> {
    let ec2c = &cluster.clients.ec2;
    let listed = ec2c
        .describe_launch_templates()
        .max_results(200)
        .send()
        .await
        .unwrap();
    let mut out = Vec::new();
    for t in listed.launch_templates() {
        let tags = karpenter_aws::sdk::convert::tags(t.tags());
        if tags.get("eks:eks-cluster-name") != Some(&cluster.name) {
            continue;
        }
        let versions = ec2c
            .describe_launch_template_versions()
            .launch_template_name(t.launch_template_name().unwrap())
            .versions("$Latest")
            .send()
            .await
            .unwrap();
        let data = versions.launch_template_versions()[0]
            .launch_template_data()
            .unwrap();
        let spec = data.capacity_reservation_specification().unwrap();
        out.push((
            spec.capacity_reservation_preference()
                .map(|p| p.as_str().to_string())
                .unwrap_or_default(),
            spec.capacity_reservation_target()
                .and_then(|t| t.capacity_reservation_id())
                .map(str::to_string),
        ));
    }
    out.sort();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs moto (scripts/moto/install.sh): scripts/test runs these with --ignored"]
async fn launches_go_into_the_selected_reservation_until_it_is_used_up() {
    let clients = clients(None).await;
    let cluster = Cluster::create(&cluster_name("reserved"), clients).await;
    let now = jiff::Timestamp::now();
    let odcr = reserve(&cluster, "m5.large", "us-east-1a", 2, None, &[]).await;
    // A capacity block 30 minutes from its end: `expiring`, so not offered.
    let block = reserve(
        &cluster,
        "c5.large",
        "us-east-1b",
        1,
        Some(now + jiff::SignedDuration::from_mins(30)),
        &[("standin:reservation-type", "capacity-block")],
    )
    .await;
    // Another cluster's reservation: not selected.
    let foreign = cluster
        .clients
        .ec2
        .create_capacity_reservation()
        .instance_type("m5.large")
        .instance_platform(ec2::CapacityReservationInstancePlatform::LinuxUnix)
        .availability_zone("us-east-1a")
        .instance_count(5)
        .send()
        .await
        .unwrap();
    let foreign = foreign
        .capacity_reservation()
        .and_then(|r| r.capacity_reservation_id())
        .unwrap()
        .to_string();

    let mut v = serde_json::to_value(cluster.node_class("reserved")).unwrap();
    v["spec"]["capacityReservationSelectorTerms"] =
        serde_json::json!([{"tags": {"karpenter.sh/discovery": cluster.name}}]);
    let class = EC2NodeClass::from_json_value(v).unwrap();
    class.validate().unwrap();
    let provider = cluster.provider(Vec::new());
    let class = resolve_into(&cluster, &provider, class).await;

    // The status lists the two selected reservations, the block expiring.
    let st: Vec<(&str, &str, Option<&str>, Option<&str>)> = class
        .status
        .capacity_reservations
        .iter()
        .map(|r| {
            (
                r.id.as_str(),
                r.instance_type.as_str(),
                r.reservation_type.as_deref(),
                r.state.as_deref(),
            )
        })
        .collect();
    let mut want = vec![
        (odcr.as_str(), "m5.large", Some("default"), Some("active")),
        (
            block.as_str(),
            "c5.large",
            Some("capacity-block"),
            Some("expiring"),
        ),
    ];
    want.sort();
    assert_eq!(st, want);
    assert!(!st.iter().any(|r| r.0 == foreign));
    assert!(
        class
            .status
            .condition(CAPACITY_RESERVATIONS_READY)
            .unwrap()
            .is_true()
    );

    // The catalog: a reserved offering per reservation, nearly free; spot and on-demand ones
    // exclude the reservation labels.
    let types = provider.instance_types_for_class(&class).await.unwrap();
    let m5 = types.iter().find(|t| t.name() == "m5.large").unwrap();
    let reserved: Vec<_> = m5.offerings.iter().filter(|o| o.is_reserved()).collect();
    assert_eq!(reserved.len(), 1, "{:?}", m5.offerings);
    let r = reserved[0];
    assert_eq!(r.reservation_id(), Some(odcr.as_str()));
    assert_eq!(r.zone(), "us-east-1a");
    assert!(r.available);
    assert_eq!(r.reservation_capacity, 2);
    let od = m5
        .offerings
        .iter()
        .find(|o| o.capacity_type() == "on-demand" && o.zone() == "us-east-1a")
        .unwrap();
    assert!(
        (r.price - od.price / 1e7).abs() < 1e-12,
        "{} {}",
        r.price,
        od.price
    );
    assert_eq!(
        od.requirements()
            .get(CAPACITY_RESERVATION_ID)
            .map(|q| q.operator()),
        Some(Operator::DoesNotExist)
    );
    let c5 = types.iter().find(|t| t.name() == "c5.large").unwrap();
    let blocked = c5.offerings.iter().find(|o| o.is_reserved()).unwrap();
    assert!(
        !blocked.available,
        "an expiring capacity block is not offered"
    );

    // Two launches go into the reservation; the third, with none left, is on-demand.
    let mut capacity_types = Vec::new();
    for n in 0..3 {
        let launched = provider
            .create(&claim(&format!("reserved-{n}"), "m5.large"))
            .await
            .unwrap();
        let l = &launched.metadata.labels;
        capacity_types.push(l["karpenter.sh/capacity-type"].clone());
        if l["karpenter.sh/capacity-type"] == "reserved" {
            assert_eq!(l[CAPACITY_RESERVATION_ID], odcr);
            assert_eq!(l[CAPACITY_RESERVATION_TYPE], "default");
            assert_eq!(l[CAPACITY_RESERVATION_INTERRUPTIBLE], "false");
            assert_eq!(l["topology.kubernetes.io/zone"], "us-east-1a");
        } else {
            assert!(!l.contains_key(CAPACITY_RESERVATION_ID), "{l:?}");
        }
    }
    assert_eq!(capacity_types, ["reserved", "reserved", "on-demand"]);
    let types = provider.instance_types_for_class(&class).await.unwrap();
    let m5 = types.iter().find(|t| t.name() == "m5.large").unwrap();
    let r = m5.offerings.iter().find(|o| o.is_reserved()).unwrap();
    assert_eq!((r.reservation_capacity, r.available), (0, false));

    // The reserved launches' template targets the reservation only; the on-demand one opts
    // out of open reservations.
    assert_eq!(
        template_reservations(&cluster).await,
        [
            ("capacity-reservations-only".to_string(), Some(odcr.clone())),
            ("none".to_string(), None),
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs moto (scripts/moto/install.sh): scripts/test runs these with --ignored"]
async fn the_scheduler_places_a_pod_selecting_a_reservation_into_it_and_capacity_errors_empty_it() {
    use karpenter_core::launch::to_node_claim;
    use karpenter_core::prelude::*;

    use super::inject::{self, Faults};

    let faults = std::sync::Arc::new(Faults::default());
    let clients = clients(Some(inject::client(std::sync::Arc::clone(&faults)))).await;
    let cluster = Cluster::create(&cluster_name("resched"), clients).await;
    let odcr = reserve(&cluster, "m5.large", "us-east-1b", 3, None, &[]).await;
    let mut v = serde_json::to_value(cluster.node_class("reserved")).unwrap();
    v["spec"]["capacityReservationSelectorTerms"] = serde_json::json!([{"id": odcr}]);
    let class = EC2NodeClass::from_json_value(v).unwrap();
    class.validate().unwrap();
    let provider = cluster.provider(Vec::new());
    resolve_into(&cluster, &provider, class).await;

    let mut spec = NodeClaimTemplateSpec::new(NodeClassReference::new(
        "karpenter.k8s.aws",
        "EC2NodeClass",
        "reserved",
    ));
    spec.requirements = Some(vec![
        NodeSelectorRequirement::new(
            "node.kubernetes.io/instance-type",
            Operator::In,
            ["m5.large", "c5.large"],
        ),
        NodeSelectorRequirement::new(
            "karpenter.sh/capacity-type",
            Operator::In,
            ["reserved", "on-demand"],
        ),
    ]);
    let pool = NodePool::new("default", NodePoolSpec::new(NodeClaimTemplate::new(spec)));
    let options = SchedulerOptions::for_provider(&*provider);
    let types = provider.instance_types(&pool).await.unwrap();
    // A pod selecting the reservation's type label can only go into a reservation.
    let pod = Pod::new("default", "train")
        .with_requests([("cpu", Quantity::from_units(1))])
        .with_node_selector([(CAPACITY_RESERVATION_TYPE, "default")]);
    let input = SchedulingInput::new()
        .with_node_pools(vec![NodePoolInput::from_nodepool(&pool, types)])
        .with_pods(vec![pod]);
    let results = solve(&input, &options);
    assert_eq!(results.new_node_claims.len(), 1, "{:?}", results.pod_errors);
    let planned = &results.new_node_claims[0];
    assert_eq!(planned.reservation_ids, std::slice::from_ref(&odcr));
    let mut nc = to_node_claim(planned, &pool, &options.label_policy);
    nc.metadata.name = Some("resched-a".into());
    let launched = provider.create(&nc).await.unwrap_or_else(|e| {
        panic!(
            "{e}: injected {} counters {:?}",
            faults.injected.lock().unwrap(),
            provider.counters().snapshot()
        )
    });
    let l = &launched.metadata.labels;
    assert_eq!(l["karpenter.sh/capacity-type"], "reserved");
    assert_eq!(l[CAPACITY_RESERVATION_ID], odcr);
    assert_eq!(l[CAPACITY_RESERVATION_TYPE], "default");
    assert_eq!(l["topology.kubernetes.io/zone"], "us-east-1b");

    // EC2 has no capacity left in it after all: the reservation offers nothing any more, and
    // the m5.large on-demand pool is not marked unavailable for it.
    faults.exhausted.lock().unwrap().insert("m5.large".into());
    let mut again = nc.clone();
    again.metadata.name = Some("resched-b".into());
    let err = provider.create(&again).await.unwrap_err();
    assert!(
        matches!(
            err,
            karpenter_core::cloud::CloudProviderError::InsufficientCapacity { .. }
        ),
        "{err:?}"
    );
    let types = provider.instance_types(&pool).await.unwrap();
    let m5 = types.iter().find(|t| t.name() == "m5.large").unwrap();
    let r = m5.offerings.iter().find(|o| o.is_reserved()).unwrap();
    assert_eq!((r.reservation_capacity, r.available), (0, false));
    assert!(!provider.is_unavailable("on-demand", "m5.large", "us-east-1b"));
    assert!(!provider.is_unavailable("reserved", "m5.large", "us-east-1b"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs moto (scripts/moto/install.sh): scripts/test runs these with --ignored"]
async fn nodeclaims_reservations_are_described_by_id_and_expiring_blocks_found() {
    use std::collections::BTreeMap;

    use karpenter_aws::nodeclass::CapacityReservationSelectorTerm;
    use karpenter_aws::reservation::{expiring_claims, status};
    use karpenter_aws::sdk::reservation::{describe, lock, shared_availability};

    let clients = clients(None).await;
    let cluster = Cluster::create(&cluster_name("resexp"), clients).await;
    let now = jiff::Timestamp::now();
    let block = reserve(
        &cluster,
        "c5.large",
        "us-east-1a",
        2,
        Some(now + jiff::SignedDuration::from_mins(20)),
        &[
            ("standin:reservation-type", "capacity-block"),
            ("standin:available", "1"),
        ],
    )
    .await;
    let odcr = reserve(&cluster, "m5.large", "us-east-1a", 2, None, &[]).await;
    // What the loop does with the NodeClaims' labels: describe each id (an id EC2 does not
    // know is skipped, as upstream), sync the counts, delete the claims of expiring blocks.
    let terms: Vec<CapacityReservationSelectorTerm> = [&block, &odcr, "cr-00000000000000000"]
        .iter()
        .map(|id| CapacityReservationSelectorTerm {
            id: Some(id.to_string()),
            ..Default::default()
        })
        .collect();
    let availability = shared_availability();
    let described = describe(&cluster.clients, &terms, &availability, now)
        .await
        .unwrap();
    let mut ids: Vec<&str> = described.iter().map(|r| r.id.as_str()).collect();
    ids.sort();
    let mut want = vec![block.as_str(), odcr.as_str()];
    want.sort();
    assert_eq!(ids, want);
    assert_eq!(lock(&availability).available(&block), 1);
    assert_eq!(lock(&availability).available(&odcr), 2);
    let st = status(&described, now);
    let labelled =
        |id: &str| BTreeMap::from([(CAPACITY_RESERVATION_ID.to_string(), id.to_string())]);
    let (in_block, in_odcr) = (labelled(&block), labelled(&odcr));
    let claims = [("gpu-a", &in_block, false), ("web-a", &in_odcr, false)];
    assert_eq!(expiring_claims(claims, &st), ["gpu-a"]);
}

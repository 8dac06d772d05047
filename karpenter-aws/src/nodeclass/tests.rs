use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::reconcile::{
    AMIS_READY, AmiObservation, INSTANCE_PROFILE_READY, Observations, READY, SUBNETS_READY,
    VALIDATION_SUCCEEDED, ValidationObservation, reconcile,
};
use super::*;
use crate::catalog::AwsCatalogOptions;
use crate::resolve::{SecurityGroupInfo, SubnetInfo};

const FIXTURES: &[(&str, &str)] = &[
    (
        "default.yaml",
        include_str!("../../tests/fixtures/ec2nodeclass/default.yaml"),
    ),
    (
        "secure-nodes.yaml",
        include_str!("../../tests/fixtures/ec2nodeclass/secure-nodes.yaml"),
    ),
    (
        "bottlerocket-userdata.yaml",
        include_str!("../../tests/fixtures/ec2nodeclass/bottlerocket-userdata.yaml"),
    ),
    (
        "pinned-ids.yaml",
        include_str!("../../tests/fixtures/ec2nodeclass/pinned-ids.yaml"),
    ),
    (
        "full.yaml",
        include_str!("../../tests/fixtures/ec2nodeclass/full.yaml"),
    ),
];

fn yaml(text: &str) -> Value {
    serde_saphyr::from_str(text).unwrap()
}

fn fixture(name: &str) -> Value {
    yaml(FIXTURES.iter().find(|(n, _)| *n == name).unwrap().1)
}

fn parse(v: Value) -> EC2NodeClass {
    EC2NodeClass::from_json_value(v).unwrap()
}

#[test]
fn every_fixture_parses_validates_and_round_trips() {
    for (name, text) in FIXTURES {
        let value = yaml(text);
        let class =
            EC2NodeClass::from_json_value(value.clone()).unwrap_or_else(|e| panic!("{name}: {e}"));
        class.validate().unwrap_or_else(|e| panic!("{name}: {e}"));
        let back = serde_json::to_value(&class).unwrap();
        assert_eq!(back, value, "{name} does not round-trip");
    }
}

#[test]
fn the_cli_examples_nodeclasses_parse_and_validate() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/manifests");
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path().join("ec2nodeclass.yaml");
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        for doc in text.split("\n---") {
            let v: Value = serde_saphyr::from_str(doc).unwrap();
            if v.get("kind") != Some(&json!("EC2NodeClass")) {
                continue;
            }
            let class = EC2NodeClass::from_json_value(v)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            class
                .validate()
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            seen += 1;
        }
    }
    assert!(seen >= 4, "found {seen} EC2NodeClasses");
}

#[test]
fn decode_errors_name_the_field() {
    let mut v = fixture("default.yaml");
    v["spec"]["kubelet"] = json!({"maxPods": "many"});
    let e = EC2NodeClass::from_json_value(v).unwrap_err();
    assert_eq!(e.path, "spec.kubelet.maxPods");
    let mut v = fixture("default.yaml");
    v["spec"]["subnetSelectorTerms"][0]["tag"] = json!({"a": "b"});
    let e = EC2NodeClass::from_json_value(v).unwrap_err();
    assert!(e.path.starts_with("spec.subnetSelectorTerms[0]"), "{e}");
    assert!(e.message.contains("unknown field `tag`"), "{e}");
}

fn set(v: &mut Value, pointer: &str, new: Value) {
    let (parent, last) = pointer.rsplit_once('/').unwrap();
    let target = if parent.is_empty() {
        &mut *v
    } else {
        v.pointer_mut(parent).unwrap()
    };
    match target {
        Value::Object(m) => {
            if new.is_null() {
                m.remove(last);
            } else {
                m.insert(last.replace("~1", "/"), new);
            }
        }
        Value::Array(a) => a[last.parse::<usize>().unwrap()] = new,
        _ => panic!("{pointer}"),
    }
}

#[test]
fn malformed_classes_name_the_field() {
    let cases: Vec<(&str, Value, &str)> = vec![
        ("/spec/role", Value::Null, "spec.role"),
        ("/spec/instanceProfile", json!("p"), "spec.role"),
        ("/spec/role", json!(""), "spec.role"),
        ("/spec/amiSelectorTerms", json!([]), "spec.amiSelectorTerms"),
        (
            "/spec/amiSelectorTerms",
            json!([{"alias": "al2023@latest"}, {"id": "ami-1"}]),
            "spec.amiSelectorTerms",
        ),
        (
            "/spec/amiSelectorTerms",
            json!([{"alias": "al2023@latest", "owner": "amazon"}]),
            "spec.amiSelectorTerms[0].alias",
        ),
        (
            "/spec/amiSelectorTerms",
            json!([{"id": "ami-1", "name": "n"}]),
            "spec.amiSelectorTerms[0].id",
        ),
        (
            "/spec/amiSelectorTerms",
            json!([{"owner": "self"}]),
            "spec.amiSelectorTerms[0]",
        ),
        (
            "/spec/amiSelectorTerms",
            json!([{"alias": "dos@latest"}]),
            "spec.amiSelectorTerms[0].alias",
        ),
        (
            "/spec/amiSelectorTerms",
            json!([{"alias": "al2023"}]),
            "spec.amiSelectorTerms[0].alias",
        ),
        (
            "/spec/amiSelectorTerms",
            json!([{"alias": "windows2022@v1"}]),
            "spec.amiSelectorTerms[0].alias",
        ),
        (
            "/spec/amiSelectorTerms",
            json!([{"alias": "al2023@v20240101-and-a-very-long-suffix"}]),
            "spec.amiSelectorTerms[0].alias",
        ),
        (
            "/spec/amiSelectorTerms",
            json!([{"id": "image-1"}]),
            "spec.amiSelectorTerms[0].id",
        ),
        (
            "/spec/amiSelectorTerms",
            json!([{"tags": {"a": ""}}]),
            "spec.amiSelectorTerms[0].tags[a]",
        ),
        (
            "/spec/amiSelectorTerms",
            json!([{"id": "ami-1"}]),
            "spec.amiFamily",
        ),
        ("/spec/amiFamily", json!("Bottlerocket"), "spec.amiFamily"),
        ("/spec/amiFamily", json!("Plan9"), "spec.amiFamily"),
        (
            "/spec/subnetSelectorTerms",
            json!([]),
            "spec.subnetSelectorTerms",
        ),
        (
            "/spec/subnetSelectorTerms",
            json!([{}]),
            "spec.subnetSelectorTerms[0]",
        ),
        (
            "/spec/subnetSelectorTerms",
            json!([{"id": "subnet-1", "tags": {"a": "b"}}]),
            "spec.subnetSelectorTerms",
        ),
        (
            "/spec/subnetSelectorTerms",
            json!([{"id": "sn-1"}]),
            "spec.subnetSelectorTerms[0].id",
        ),
        (
            "/spec/securityGroupSelectorTerms",
            json!([{"id": "sg-1", "name": "n"}]),
            "spec.securityGroupSelectorTerms",
        ),
        (
            "/spec/securityGroupSelectorTerms",
            json!([{"id": "group-1"}]),
            "spec.securityGroupSelectorTerms[0].id",
        ),
        (
            "/spec/capacityReservationSelectorTerms",
            json!([{"id": "cr-X"}]),
            "spec.capacityReservationSelectorTerms[0].id",
        ),
        (
            "/spec/capacityReservationSelectorTerms",
            json!([{"ownerID": "12"}]),
            "spec.capacityReservationSelectorTerms[0]",
        ),
        (
            "/spec/tags",
            json!({"karpenter.sh/nodepool": "x"}),
            "spec.tags[karpenter.sh/nodepool]",
        ),
        (
            "/spec/tags",
            json!({"kubernetes.io/cluster/foo": "owned"}),
            "spec.tags[kubernetes.io/cluster/foo]",
        ),
        (
            "/spec/tags",
            json!({"eks:eks-cluster-name": "c"}),
            "spec.tags[eks:eks-cluster-name]",
        ),
        ("/spec/tags", json!({"": "c"}), "spec.tags"),
        (
            "/spec/blockDeviceMappings/0/ebs/volumeSize",
            json!("100Ti"),
            "spec.blockDeviceMappings[0].ebs.volumeSize",
        ),
        (
            "/spec/blockDeviceMappings/0/ebs/volumeType",
            json!("gp9"),
            "spec.blockDeviceMappings[0].ebs.volumeType",
        ),
        (
            "/spec/blockDeviceMappings/0/ebs",
            json!({"encrypted": true}),
            "spec.blockDeviceMappings[0].ebs",
        ),
        (
            "/spec/blockDeviceMappings",
            json!([
            {"deviceName": "/dev/xvda", "rootVolume": true, "ebs": {"volumeSize": "20Gi"}},
            {"deviceName": "/dev/xvdb", "rootVolume": true, "ebs": {"volumeSize": "20Gi"}}]),
            "spec.blockDeviceMappings",
        ),
        (
            "/spec/blockDeviceMappings/0/ebs/volumeInitializationRate",
            json!(200),
            "spec.blockDeviceMappings[0].ebs.volumeInitializationRate",
        ),
        (
            "/spec/metadataOptions/httpPutResponseHopLimit",
            json!(65),
            "spec.metadataOptions.httpPutResponseHopLimit",
        ),
        (
            "/spec/metadataOptions/httpTokens",
            json!("sometimes"),
            "spec.metadataOptions.httpTokens",
        ),
        (
            "/spec/metadataOptions/httpEndpoint",
            json!("on"),
            "spec.metadataOptions.httpEndpoint",
        ),
        (
            "/spec/instanceStorePolicy",
            json!("RAID1"),
            "spec.instanceStorePolicy",
        ),
        (
            "/spec/kubelet",
            json!({"maxPods": -1}),
            "spec.kubelet.maxPods",
        ),
        (
            "/spec/kubelet",
            json!({"kubeReserved": {"gpu": "1"}}),
            "spec.kubelet.kubeReserved[gpu]",
        ),
        (
            "/spec/kubelet",
            json!({"systemReserved": {"cpu": "-1"}}),
            "spec.kubelet.systemReserved[cpu]",
        ),
        (
            "/spec/kubelet",
            json!({"evictionHard": {"memory.free": "1Gi"}}),
            "spec.kubelet.evictionHard[memory.free]",
        ),
        (
            "/spec/kubelet",
            json!({"evictionSoft": {"memory.available": "1Gi"}}),
            "spec.kubelet.evictionSoft[memory.available]",
        ),
        (
            "/spec/kubelet",
            json!({"evictionSoftGracePeriod": {"memory.available": "1m"}}),
            "spec.kubelet.evictionSoftGracePeriod[memory.available]",
        ),
        (
            "/spec/kubelet",
            json!({"imageGCHighThresholdPercent": 50, "imageGCLowThresholdPercent": 60}),
            "spec.kubelet.imageGCHighThresholdPercent",
        ),
        (
            "/spec/kubelet",
            json!({"imageGCLowThresholdPercent": 101}),
            "spec.kubelet.imageGCLowThresholdPercent",
        ),
        (
            "/spec/kubelet",
            json!({"registerWithTaints": []}),
            "spec.kubelet.registerWithTaints",
        ),
        (
            "/spec/placementGroupSelector",
            json!({"name": "a", "id": "pg-1"}),
            "spec.placementGroupSelector",
        ),
        (
            "/spec/networkInterfaces",
            json!([{"networkCardIndex": 1, "deviceIndex": 0, "interfaceType": "interface"}]),
            "spec.networkInterfaces",
        ),
        (
            "/spec/connectionTracking",
            json!({"udpTimeout": 10}),
            "spec.connectionTracking.udpTimeout",
        ),
        (
            "/spec/cpuOptions",
            json!({"nestedVirtualization": "yes"}),
            "spec.cpuOptions.nestedVirtualization",
        ),
        (
            "/apiVersion",
            json!("karpenter.k8s.aws/v1beta1"),
            "apiVersion",
        ),
        ("/metadata/name", Value::Null, "metadata.name"),
    ];
    for (pointer, new, path) in cases {
        let mut v = fixture("default.yaml");
        set(&mut v, pointer, new.clone());
        let class = parse(v);
        let errs = class
            .validate()
            .expect_err(&format!("{pointer} = {new} must be rejected"));
        assert!(
            errs.has_path(path),
            "{pointer} = {new}: expected {path}, got {errs}"
        );
    }
}

#[test]
fn kubelet_fields_outside_the_managed_set_only_on_al2023_and_custom() {
    let mut v = fixture("default.yaml");
    v["spec"]["kubelet"] =
        json!({"maxPods": 50, "serializeImagePulls": false, "clusterDNS": ["a", "b"]});
    assert!(parse(v.clone()).validate().is_ok());
    v["spec"]["amiSelectorTerms"] = json!([{"alias": "bottlerocket@latest"}]);
    let errs = parse(v).validate().unwrap_err();
    assert!(errs.has_path("spec.kubelet.serializeImagePulls"), "{errs}");
    assert!(errs.has_path("spec.kubelet.clusterDNS"), "{errs}");
}

#[test]
fn defaults_and_alias_family() {
    let mut v = fixture("default.yaml");
    set(&mut v, "/spec/metadataOptions", Value::Null);
    let class = parse(v);
    let md = class.spec.resolved_metadata_options();
    assert_eq!(md.http_tokens, "required");
    assert_eq!(md.http_put_response_hop_limit, 1);
    assert_eq!(md.http_endpoint, "enabled");
    assert_eq!(md.http_protocol_ipv6, "disabled");
    assert_eq!(class.spec.resolved_ami_family(), Some(AmiFamily::Al2023));
    let alias = Alias::parse("bottlerocket@v1.20.3");
    assert_eq!(alias.family, Some(AmiFamily::Bottlerocket));
    assert_eq!(alias.version, "v1.20.3");
    let br = parse(fixture("bottlerocket-userdata.yaml"));
    assert_eq!(br.spec.resolved_ami_family(), Some(AmiFamily::Bottlerocket));
    let secure = parse(fixture("secure-nodes.yaml"));
    assert_eq!(
        secure
            .spec
            .resolved_metadata_options()
            .http_put_response_hop_limit,
        2
    );
}

#[test]
fn catalog_options_follow_the_class() {
    let base = AwsCatalogOptions::default();
    let o = parse(fixture("default.yaml"))
        .catalog_options(&base)
        .unwrap();
    assert_eq!(o.ami_family, AmiFamily::Al2023);
    assert_eq!(o.ephemeral_storage_bytes, Some(100 << 30));
    assert_eq!(o.max_pods, None);

    let full = parse(fixture("full.yaml")).catalog_options(&base).unwrap();
    assert!(full.instance_store_raid0);
    assert_eq!(full.max_pods, Some(20));
    assert_eq!(full.pods_per_core, Some(2));
    assert_eq!(full.kube_reserved.get("cpu").unwrap().to_string(), "200m");
    assert_eq!(
        full.system_reserved.get("memory").unwrap().to_string(),
        "100Mi"
    );
    assert_eq!(full.eviction_hard["memory.available"], "5%");

    // Bottlerocket's ephemeral device is /dev/xvdb; without a mapping the family default.
    let mut v = fixture("bottlerocket-userdata.yaml");
    v["spec"]["blockDeviceMappings"] = json!([
        {"deviceName": "/dev/xvda", "ebs": {"volumeSize": "4Gi"}},
        {"deviceName": "/dev/xvdb", "ebs": {"volumeSize": "80Gi"}}
    ]);
    assert_eq!(
        parse(v)
            .catalog_options(&base)
            .unwrap()
            .ephemeral_storage_bytes,
        Some(80 << 30)
    );
    let br = parse(fixture("bottlerocket-userdata.yaml"))
        .catalog_options(&base)
        .unwrap();
    assert_eq!(br.ephemeral_storage_bytes, None);
    assert_eq!(br.ami_family, AmiFamily::Bottlerocket);

    // Custom: the last mapping.
    let mut v = fixture("pinned-ids.yaml");
    v["spec"]["amiFamily"] = json!("Custom");
    assert_eq!(
        parse(v)
            .catalog_options(&base)
            .unwrap()
            .ephemeral_storage_bytes,
        Some(500 << 30)
    );
    // AL2023 with ids: the /dev/xvda mapping.
    let ids = parse(fixture("pinned-ids.yaml"))
        .catalog_options(&base)
        .unwrap();
    assert_eq!(ids.ephemeral_storage_bytes, Some(200 << 30));
}

#[test]
fn static_hash_covers_the_launch_settings_only() {
    let base = parse(fixture("default.yaml"));
    let h = base.static_hash();
    assert_eq!(h, parse(fixture("default.yaml")).static_hash());
    assert!(h.parse::<u64>().is_ok());

    let mut moved = base.clone();
    moved.spec.subnet_selector_terms[0]
        .tags
        .insert("extra".into(), "1".into());
    moved.spec.ami_selector_terms[0].alias = Some("al2023@v20240807".into());
    assert_eq!(moved.static_hash(), h, "selector terms are not hashed");

    let mut changed = base.clone();
    changed.spec.user_data = Some("#!/bin/bash\necho hi\n".into());
    assert_ne!(changed.static_hash(), h);
    let mut tagged = base.clone();
    tagged.spec.tags.insert("cost-center".into(), "42".into());
    assert_ne!(tagged.static_hash(), h);
    let mut kubelet = base.clone();
    kubelet.spec.kubelet = Some(KubeletConfiguration {
        max_pods: Some(10),
        ..Default::default()
    });
    assert_ne!(kubelet.static_hash(), h);

    // An unset metadataOptions hashes like the CRD default.
    let mut a = base.clone();
    a.spec.metadata_options = None;
    let mut b = base.clone();
    b.spec.metadata_options = Some(MetadataOptions {
        http_put_response_hop_limit: Some(1),
        ..Default::default()
    });
    assert_eq!(a.static_hash(), b.static_hash());
}

fn observations() -> Observations {
    Observations {
        amis: AmiObservation::Resolved(vec![StatusAmi {
            id: "ami-1".into(),
            name: Some("al2023".into()),
            deprecated: false,
            requirements: vec![],
        }]),
        subnets: vec![
            SubnetInfo {
                id: "subnet-b".into(),
                zone: "us-east-1b".into(),
                zone_id: Some("use1-az2".into()),
                available_ip_address_count: 100,
                tags: BTreeMap::new(),
            },
            SubnetInfo {
                id: "subnet-a".into(),
                zone: "us-east-1a".into(),
                zone_id: Some("use1-az1".into()),
                available_ip_address_count: 500,
                tags: BTreeMap::new(),
            },
        ],
        security_groups: vec![SecurityGroupInfo {
            id: "sg-1".into(),
            name: Some("nodes".into()),
            tags: BTreeMap::new(),
        }],
        instance_profile: Ok("cluster_123".into()),
        validation: ValidationObservation::Passed,
        capacity_reservations: Ok(Vec::new()),
    }
}

fn now(s: &str) -> jiff::Timestamp {
    s.parse().unwrap()
}

#[test]
fn reconcile_resolves_everything_and_becomes_ready() {
    let mut class = parse(fixture("default.yaml"));
    class.metadata.generation = Some(4);
    let out = reconcile(&class, &observations(), now("2026-01-01T00:00:00Z"));
    let s = &out.status;
    assert_eq!(
        s.subnets.iter().map(|x| x.id.as_str()).collect::<Vec<_>>(),
        ["subnet-a", "subnet-b"]
    );
    assert_eq!(s.subnets[0].zone_id.as_deref(), Some("use1-az1"));
    assert_eq!(s.security_groups[0].id, "sg-1");
    assert_eq!(s.instance_profile.as_deref(), Some("cluster_123"));
    assert_eq!(s.amis[0].id, "ami-1");
    let ready = s.condition(READY).unwrap();
    assert!(ready.is_true());
    assert_eq!(ready.observed_generation, Some(4));
    assert_eq!(
        ready.last_transition_time.as_deref(),
        Some("2026-01-01T00:00:00Z")
    );
    assert_eq!(s.conditions.len(), 7);
    assert_eq!(out.requeue_after, std::time::Duration::from_secs(300));

    // A second pass keeps the transition times.
    class.status = out.status.clone();
    let again = reconcile(&class, &observations(), now("2026-01-01T00:05:00Z"));
    assert_eq!(
        again
            .status
            .condition(READY)
            .unwrap()
            .last_transition_time
            .as_deref(),
        Some("2026-01-01T00:00:00Z")
    );
}

#[test]
fn reconcile_reports_missing_resources_and_failed_checks() {
    let class = parse(fixture("default.yaml"));
    let mut obs = observations();
    obs.amis = AmiObservation::Resolved(vec![]);
    obs.subnets.clear();
    let out = reconcile(&class, &obs, now("2026-01-01T00:00:00Z"));
    let s = &out.status;
    assert_eq!(
        s.condition(AMIS_READY).unwrap().reason.as_deref(),
        Some("AMINotFound")
    );
    assert_eq!(
        s.condition(SUBNETS_READY).unwrap().reason.as_deref(),
        Some("SubnetsNotFound")
    );
    assert_eq!(
        s.condition(VALIDATION_SUCCEEDED).unwrap().reason.as_deref(),
        Some("DependenciesNotReady")
    );
    let ready = s.condition(READY).unwrap();
    assert_eq!(ready.status, karpenter_core::api::ConditionStatus::False);
    assert!(
        ready
            .message
            .as_deref()
            .unwrap()
            .contains("AMIsReady=False")
    );
    assert_eq!(out.requeue_after, std::time::Duration::from_secs(60));

    let mut obs = observations();
    obs.validation = ValidationObservation::Failed {
        reason: "CreateFleetAuthCheckFailed".into(),
        message: "not authorized to perform ec2:CreateFleet".into(),
    };
    obs.instance_profile = Ok("p".into());
    let s = reconcile(&class, &obs, now("2026-01-01T00:00:00Z")).status;
    assert_eq!(
        s.condition(VALIDATION_SUCCEEDED).unwrap().reason.as_deref(),
        Some("CreateFleetAuthCheckFailed")
    );
    assert!(!s.condition(READY).unwrap().is_true());

    let mut obs = observations();
    obs.instance_profile = Err("role not found".into());
    obs.amis = AmiObservation::UnsupportedAlias("AL2 is not supported".into());
    let s = reconcile(&class, &obs, now("2026-01-01T00:00:00Z")).status;
    assert_eq!(
        s.condition(AMIS_READY).unwrap().reason.as_deref(),
        Some("UnsupportedAlias")
    );
    assert_eq!(
        s.condition(INSTANCE_PROFILE_READY).unwrap().status,
        karpenter_core::api::ConditionStatus::Unknown
    );

    let mut tagged = class.clone();
    tagged
        .spec
        .tags
        .insert("karpenter.sh/nodeclaim".into(), "x".into());
    let s = reconcile(&tagged, &observations(), now("2026-01-01T00:00:00Z")).status;
    assert_eq!(
        s.condition(VALIDATION_SUCCEEDED).unwrap().reason.as_deref(),
        Some("TagValidationFailed")
    );
}

#[test]
fn reconcile_writes_the_selected_capacity_reservations() {
    use super::reconcile::CAPACITY_RESERVATIONS_READY;
    use crate::reservation::Reservation;
    let mut class = parse(fixture("default.yaml"));
    class.spec.capacity_reservation_selector_terms = vec![super::CapacityReservationSelectorTerm {
        id: Some("cr-1".into()),
        ..Default::default()
    }];
    let described = |id: &str| Reservation {
        id: id.into(),
        instance_type: "m5.large".into(),
        availability_zone: "us-east-1a".into(),
        owner_id: "111122223333".into(),
        instance_match_criteria: "targeted".into(),
        reservation_type: "default".into(),
        state: "active".into(),
        available_instance_count: 3,
        ..Default::default()
    };
    let mut obs = observations();
    // The describe answer may hold more than the terms select (an owner's other
    // reservations): only the selected ones reach the status.
    let t0 = now("2026-01-01T00:00:00Z");
    let all = [described("cr-1"), described("cr-2")];
    let terms = &class.spec.capacity_reservation_selector_terms;
    obs.capacity_reservations = Ok(crate::reservation::status(
        &crate::reservation::select(terms, &all, t0),
        t0,
    ));
    let out = reconcile(&class, &obs, t0);
    let ids: Vec<&str> = out
        .status
        .capacity_reservations
        .iter()
        .map(|r| r.id.as_str())
        .collect();
    assert_eq!(ids, ["cr-1"]);
    assert!(
        out.status
            .condition(CAPACITY_RESERVATIONS_READY)
            .unwrap()
            .is_true()
    );
    assert!(out.status.condition(READY).unwrap().is_true());

    // A failed call keeps what was known and the condition; a first failure is Unknown.
    class.status = out.status.clone();
    obs.capacity_reservations = Err("DescribeCapacityReservations: Throttling".into());
    let kept = reconcile(&class, &obs, t0);
    assert_eq!(
        kept.status.capacity_reservations,
        out.status.capacity_reservations
    );
    assert!(
        kept.status
            .condition(CAPACITY_RESERVATIONS_READY)
            .unwrap()
            .is_true()
    );
    assert_eq!(kept.requeue_after, std::time::Duration::from_secs(60));
    class.status = Default::default();
    let first = reconcile(&class, &obs, t0);
    let c = first.status.condition(CAPACITY_RESERVATIONS_READY).unwrap();
    assert_eq!(c.status, karpenter_core::api::ConditionStatus::Unknown);
    assert!(!first.status.condition(READY).unwrap().is_true());
}

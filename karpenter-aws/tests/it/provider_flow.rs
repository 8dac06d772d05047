//! One EC2NodeClass from YAML through resolution, status, launch, an insufficient-capacity
//! error, drift and an interruption message, with every AWS answer written as plain data.

use std::collections::BTreeMap;

use karpenter_aws::ami::{self, Image};
use karpenter_aws::catalog::{AwsCatalogOptions, offline_catalog};
use karpenter_aws::drift::{self, DriftReason, InstanceView};
use karpenter_aws::interruption;
use karpenter_aws::launch::{
    self, FleetError, FleetInput, LaunchOutcome, Offering, TemplateRef, UnavailableOfferings,
};
use karpenter_aws::nodeclass::EC2NodeClass;
use karpenter_aws::nodeclass::reconcile::{
    AmiObservation, Observations, READY, ValidationObservation, reconcile,
};
use karpenter_aws::resolve::{self, SecurityGroupInfo, SubnetInfo};
use karpenter_aws::userdata::{self, BootstrapOptions};
use karpenter_core::api::{NodeClaim, NodeClaimSpec, NodeClassReference};
use karpenter_core::operator::InterruptionKind;
use karpenter_core::requirements::{Operator, Requirement, Requirements};

fn t(s: &str) -> jiff::Timestamp {
    s.parse().unwrap()
}

fn class() -> EC2NodeClass {
    let text = include_str!("../fixtures/ec2nodeclass/default.yaml");
    let mut c = EC2NodeClass::from_json_value(serde_saphyr::from_str(text).unwrap()).unwrap();
    c.metadata.generation = Some(1);
    c.metadata.uid = Some("8d1e4c8b".into());
    c.validate().unwrap();
    c
}

fn subnets() -> Vec<SubnetInfo> {
    let tags: BTreeMap<String, String> = [
        (
            "karpenter.sh/discovery".to_string(),
            "my-cluster".to_string(),
        ),
        ("Type".to_string(), "private".to_string()),
    ]
    .into();
    vec![
        SubnetInfo {
            id: "subnet-a".into(),
            zone: "us-east-1a".into(),
            zone_id: Some("use1-az4".into()),
            available_ip_address_count: 4000,
            tags: tags.clone(),
        },
        SubnetInfo {
            id: "subnet-b".into(),
            zone: "us-east-1b".into(),
            zone_id: Some("use1-az6".into()),
            available_ip_address_count: 8000,
            tags,
        },
        SubnetInfo {
            id: "subnet-public".into(),
            zone: "us-east-1a".into(),
            zone_id: Some("use1-az4".into()),
            available_ip_address_count: 9000,
            tags: [("Type".to_string(), "public".to_string())].into(),
        },
    ]
}

fn amd64() -> Requirements {
    let mut r = Requirements::new();
    r.add(Requirement::new(
        "kubernetes.io/arch",
        Operator::In,
        ["amd64"],
    ));
    r.add(Requirement::does_not_exist(
        "karpenter.k8s.aws/instance-gpu-count",
    ));
    r.add(Requirement::does_not_exist(
        "karpenter.k8s.aws/instance-accelerator-count",
    ));
    r
}

#[test]
fn a_class_from_yaml_to_launch_ice_drift_and_interruption() {
    let now = t("2026-07-20T10:00:00Z");
    let mut class = class();

    // Node-class controller: selectors → filters; the APIs' answers → status.
    let sets = resolve::subnet_filter_sets(&class.spec.subnet_selector_terms);
    assert_eq!(sets.len(), 1);
    let subnets = resolve::select_subnets(&class.spec.subnet_selector_terms, &subnets());
    let groups = resolve::select_security_groups(
        &class.spec.security_group_selector_terms,
        &[SecurityGroupInfo {
            id: "sg-nodes".into(),
            name: Some("nodes".into()),
            tags: [(
                "karpenter.sh/discovery".to_string(),
                "my-cluster".to_string(),
            )]
            .into(),
        }],
    );
    let alias = class.spec.alias().unwrap();
    let params = ami::alias_parameters(&alias, "1.33").unwrap();
    let ssm: BTreeMap<String, String> = [
        (params[0].name.clone(), "ami-new".to_string()),
        (params[3].name.clone(), "ami-arm".to_string()),
    ]
    .into();
    let images = vec![
        Image {
            id: "ami-new".into(),
            architecture: "x86_64".into(),
            creation_date: "2026-07-01T00:00:00Z".into(),
            ..Default::default()
        },
        Image {
            id: "ami-arm".into(),
            architecture: "arm64".into(),
            creation_date: "2026-07-01T00:00:00Z".into(),
            ..Default::default()
        },
    ];
    let amis = ami::select_images(
        ami::alias_candidates("al2023@latest", &params, &ssm, &images).unwrap(),
        now,
    );
    let out = reconcile(
        &class,
        &Observations {
            amis: AmiObservation::Resolved(amis),
            subnets: subnets.clone(),
            security_groups: groups,
            instance_profile: Ok("my-cluster_123".into()),
            validation: ValidationObservation::Passed,
            capacity_reservations: Ok(Vec::new()),
        },
        now,
    );
    assert!(out.status.condition(READY).unwrap().is_true());
    assert_eq!(out.status.subnets[0].id, "subnet-b", "most free IPs first");
    class.status = out.status;

    // Instance types shaped by the class: the 100Gi root volume.
    let catalog = offline_catalog(
        &class
            .catalog_options(&AwsCatalogOptions::default())
            .unwrap(),
    )
    .unwrap();
    let m5 = catalog.iter().find(|it| it.name == "m5.large").unwrap();
    assert_eq!(
        m5.capacity.get_or_zero("ephemeral-storage").to_string(),
        "100Gi"
    );

    // Launch: tags, user data, template, CreateFleet.
    let tags = launch::launch_tags(&class.spec.tags, "my-cluster", "default", class.name());
    let ud = userdata::user_data(
        class.spec.resolved_ami_family().unwrap(),
        &BootstrapOptions {
            cluster_name: "my-cluster".into(),
            api_server_endpoint: "https://example".into(),
            cluster_cidr: Some("10.100.0.0/16".into()),
            custom_user_data: class.spec.user_data.clone(),
            ..Default::default()
        },
    )
    .unwrap();
    assert!(
        ud.contains("amazon-ssm-agent"),
        "the class's script is kept"
    );
    let mapped = ami::map_to_instance_types(&class.status.amis, [("m5.large", &amd64())]);
    assert_eq!(mapped["ami-new"], ["m5.large"]);
    let template = TemplateRef {
        name: launch::launch_template_name(&(&ud, "ami-new")),
        image_id: "ami-new".into(),
        instance_types: vec!["m5.large".into()],
        reservation_id: None,
    };
    let offerings = vec![
        Offering {
            instance_type: "m5.large".into(),
            zone: "us-east-1a".into(),
            capacity_type: "spot".into(),
            price: 0.03,
            reservation_id: None,
        },
        Offering {
            instance_type: "m5.large".into(),
            zone: "us-east-1b".into(),
            capacity_type: "spot".into(),
            price: 0.04,
            reservation_id: None,
        },
    ];
    let zonal: BTreeMap<String, String> = resolve::zonal_subnets(&subnets)
        .into_iter()
        .map(|(z, s)| (z, s.id))
        .collect();
    let input = FleetInput {
        capacity_type: "spot".into(),
        templates: vec![template],
        offerings: offerings.clone(),
        zonal_subnets: zonal,
        tags,
        context: None,
        price_overlay: false,
        reserved_target_capacity_type: None,
    };
    let request = launch::build_fleet_request(&input).unwrap();
    assert_eq!(request.launch_template_configs[0].overrides.len(), 2);

    // EC2: no capacity in us-east-1a.
    let mut ice = UnavailableOfferings::new();
    let decision = launch::handle_fleet_result(
        "spot",
        &[],
        &[FleetError {
            code: "InsufficientInstanceCapacity".into(),
            message: "no capacity".into(),
            instance_type: Some("m5.large".into()),
            zone: Some("us-east-1a".into()),
            subnet_id: Some("subnet-a".into()),
        }],
    );
    assert!(matches!(
        decision.outcome,
        LaunchOutcome::InsufficientCapacity(_)
    ));
    ice.apply(&decision, now);
    let retry = FleetInput {
        offerings: ice
            .available(&offerings, now)
            .into_iter()
            .cloned()
            .collect(),
        ..input
    };
    let request = launch::build_fleet_request(&retry).unwrap();
    let zones: Vec<&str> = request.launch_template_configs[0]
        .overrides
        .iter()
        .map(|o| o.availability_zone.as_str())
        .collect();
    assert_eq!(zones, ["us-east-1b"]);

    // The launched NodeClaim, stamped with the class hash.
    let mut claim = NodeClaim::new(
        "default-x1",
        NodeClaimSpec::new(NodeClassReference::new(
            "karpenter.k8s.aws",
            "EC2NodeClass",
            "default",
        )),
    );
    for (k, v) in drift::hash_annotations(&class) {
        claim.metadata.annotations.insert(k.into(), v);
    }
    claim.status.image_id = Some("ami-new".into());
    claim.status.provider_id = Some(launch::provider_id("us-east-1b", "i-0b2c3d4e5f6a7b8c9"));
    let instance = InstanceView {
        subnet_id: "subnet-b".into(),
        security_group_ids: vec!["sg-nodes".into()],
    };
    assert_eq!(
        drift::nodeclaim_drift(&class, &claim, &amd64(), Some(&instance)).unwrap(),
        None
    );
    // A new AMI release: AMI drift. A changed class: NodeClass drift first.
    let mut released = class.clone();
    for a in released
        .status
        .amis
        .iter_mut()
        .filter(|a| a.id == "ami-new")
    {
        a.id = "ami-newer".into();
    }
    assert_eq!(
        drift::nodeclaim_drift(&released, &claim, &amd64(), Some(&instance)).unwrap(),
        Some(DriftReason::AmiDrift)
    );
    released.spec.user_data = None;
    assert_eq!(
        drift::nodeclaim_drift(&released, &claim, &amd64(), Some(&instance)).unwrap(),
        Some(DriftReason::NodeClassDrift)
    );

    // A spot interruption for its instance.
    let body = include_str!("../fixtures/interruption/spot-interruption.json");
    let instance_id =
        launch::parse_provider_id(claim.status.provider_id.as_deref().unwrap()).unwrap();
    let provider_id = claim.status.provider_id.clone().unwrap();
    let event = interruption::parse_message(body).unwrap();
    let events = event.operator_events(|id| (id == instance_id).then(|| provider_id.clone()));
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].kind, InterruptionKind::SpotInterrupted);
    assert_eq!(events[0].provider_id, provider_id);
    // The operator marks the interrupted spot offering unavailable, as a launch error would.
    ice.mark_offering(
        launch::OfferingKey {
            capacity_type: "spot".into(),
            instance_type: "m5.large".into(),
            zone: "us-east-1b".into(),
        },
        now,
    );
    assert!(
        ice.available(&offerings, now).is_empty(),
        "both zones now unavailable"
    );
}

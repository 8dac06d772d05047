use super::*;

fn t(s: &str) -> jiff::Timestamp {
    s.parse().unwrap()
}

fn offering(ty: &str, zone: &str, ct: &str, price: f64) -> Offering {
    Offering {
        instance_type: ty.into(),
        zone: zone.into(),
        capacity_type: ct.into(),
        price,
        reservation_id: None,
    }
}

fn input(ct: &str) -> FleetInput {
    FleetInput {
        capacity_type: ct.into(),
        templates: vec![
            TemplateRef {
                name: "karpenter.k8s.aws/1".into(),
                image_id: "ami-amd64".into(),
                instance_types: vec!["m5.large".into(), "c5.large".into()],
                reservation_id: None,
            },
            TemplateRef {
                name: "karpenter.k8s.aws/2".into(),
                image_id: "ami-arm64".into(),
                instance_types: vec!["m7g.large".into()],
                reservation_id: None,
            },
            TemplateRef {
                name: "karpenter.k8s.aws/3".into(),
                image_id: "ami-gpu".into(),
                instance_types: vec!["g5.xlarge".into()],
                reservation_id: None,
            },
        ],
        offerings: vec![
            offering("m5.large", "us-east-1a", ct, 0.096),
            offering("m5.large", "us-east-1a", ct, 0.096),
            offering("m5.large", "us-east-1b", ct, 0.096),
            offering("c5.large", "us-east-1c", ct, 0.085),
            offering("m7g.large", "us-east-1a", ct, 0.0816),
        ],
        zonal_subnets: [
            ("us-east-1a".to_string(), "subnet-a".to_string()),
            ("us-east-1b".to_string(), "subnet-b".to_string()),
        ]
        .into(),
        tags: launch_tags(
            &[("team".to_string(), "a".to_string())].into(),
            "c1",
            "default",
            "nc",
        ),
        context: None,
        price_overlay: false,
        reserved_target_capacity_type: None,
    }
}

#[test]
fn tags_and_provider_ids() {
    let tags = launch_tags(
        &[
            ("team".to_string(), "a".to_string()),
            (NODEPOOL_TAG.to_string(), "spoof".to_string()),
        ]
        .into(),
        "c1",
        "default",
        "nc",
    );
    assert_eq!(tags["kubernetes.io/cluster/c1"], "owned");
    assert_eq!(tags[NODEPOOL_TAG], "default");
    assert_eq!(tags[CLUSTER_NAME_TAG], "c1");
    assert_eq!(tags[NODECLASS_TAG], "nc");
    assert_eq!(tags["team"], "a");
    let id = provider_id("us-east-1a", "i-0123");
    assert_eq!(id, "aws:///us-east-1a/i-0123");
    assert_eq!(parse_provider_id(&id), Some("i-0123"));
    assert_eq!(parse_provider_id("aws:///i-0123"), None);
    assert_eq!(parse_provider_id("garbage"), None);
}

#[test]
fn template_names_follow_content() {
    #[derive(serde::Serialize)]
    struct Lt<'a> {
        image: &'a str,
        user_data: &'a str,
    }
    let a = launch_template_name(&Lt {
        image: "ami-1",
        user_data: "x",
    });
    assert!(a.starts_with("karpenter.k8s.aws/"));
    assert_eq!(
        a,
        launch_template_name(&Lt {
            image: "ami-1",
            user_data: "x"
        })
    );
    assert_ne!(
        a,
        launch_template_name(&Lt {
            image: "ami-2",
            user_data: "x"
        })
    );
}

#[test]
fn fleet_request_for_spot_and_on_demand() {
    let spot = build_fleet_request(&input("spot")).unwrap();
    assert_eq!(spot.r#type, "instant");
    assert_eq!(spot.default_target_capacity_type, "spot");
    assert_eq!(spot.total_target_capacity, 1);
    assert_eq!(
        spot.spot_allocation_strategy.as_deref(),
        Some("price-capacity-optimized")
    );
    assert_eq!(spot.on_demand_allocation_strategy, None);
    assert_eq!(
        spot.tag_specifications.keys().collect::<Vec<_>>(),
        ["fleet", "instance", "volume"]
    );
    // The GPU template has no offering and c5 has no subnet in us-east-1c: dropped.
    assert_eq!(spot.launch_template_configs.len(), 2);
    let first = &spot.launch_template_configs[0];
    assert_eq!(first.version, "$Latest");
    let o: Vec<(&str, &str, &str)> = first
        .overrides
        .iter()
        .map(|o| {
            (
                o.instance_type.as_str(),
                o.availability_zone.as_str(),
                o.subnet_id.as_str(),
            )
        })
        .collect();
    assert_eq!(
        o,
        [
            ("m5.large", "us-east-1a", "subnet-a"),
            ("m5.large", "us-east-1b", "subnet-b")
        ]
    );
    assert_eq!(first.overrides[0].image_id, "ami-amd64");
    assert_eq!(first.overrides[0].priority, 0.096);

    let mut od = input("on-demand");
    od.price_overlay = true;
    od.context = Some("ctx".into());
    let od = build_fleet_request(&od).unwrap();
    assert_eq!(
        od.on_demand_allocation_strategy.as_deref(),
        Some("prioritized")
    );
    assert_eq!(od.default_target_capacity_type, "on-demand");
    assert_eq!(od.context.as_deref(), Some("ctx"));

    let mut none = input("spot");
    none.zonal_subnets.clear();
    assert_eq!(
        build_fleet_request(&none),
        Err(FleetBuildError::NoOfferings)
    );
}

#[test]
fn fleet_request_keeps_the_sixty_cheapest_types() {
    let mut i = input("on-demand");
    i.templates = vec![TemplateRef {
        name: "lt".into(),
        image_id: "ami".into(),
        instance_types: (0..80).map(|n| format!("t{n}")).collect(),
        reservation_id: None,
    }];
    i.offerings = (0..80)
        .map(|n| {
            offering(
                &format!("t{n}"),
                "us-east-1a",
                "on-demand",
                1.0 + f64::from(80 - n),
            )
        })
        .collect();
    let r = build_fleet_request(&i).unwrap();
    let types: BTreeSet<&str> = r.launch_template_configs[0]
        .overrides
        .iter()
        .map(|o| o.instance_type.as_str())
        .collect();
    assert_eq!(types.len(), MAX_INSTANCE_TYPES);
    assert!(types.contains("t79") && !types.contains("t0"));
}

fn err(code: &str, ty: &str, zone: &str) -> FleetError {
    FleetError {
        code: code.into(),
        message: format!("{code} message"),
        instance_type: Some(ty.into()),
        zone: Some(zone.into()),
        subnet_id: Some("subnet-a".into()),
    }
}

#[test]
fn capacity_errors_mark_offerings_and_give_insufficient_capacity() {
    let d = handle_fleet_result(
        "spot",
        &[],
        &[
            err("InsufficientInstanceCapacity", "m5.large", "us-east-1a"),
            err("InsufficientInstanceCapacity", "m5.large", "us-east-1a"),
            err("UnfulfillableCapacity", "c5.large", "us-east-1b"),
            err(
                "InsufficientFreeAddressesInSubnet",
                "m5.large",
                "us-east-1b",
            ),
        ],
    );
    assert!(matches!(d.outcome, LaunchOutcome::InsufficientCapacity(_)));
    assert_eq!(d.unavailable_offerings.len(), 3);
    assert_eq!(d.unavailable_offerings[0].capacity_type, "spot");
    assert_eq!(d.unavailable_subnets, ["subnet-a"]);
    assert_eq!(d.launch_failures.len(), 4);
    assert_eq!(d.launch_failures[0].2, "InsufficientCapacity");

    let slr = handle_fleet_result("spot", &[], &[err(SPOT_SLR_CODE, "m5.large", "us-east-1a")]);
    assert_eq!(slr.unavailable_capacity_types, ["spot"]);
    assert!(matches!(
        slr.outcome,
        LaunchOutcome::InsufficientCapacity(_)
    ));
}

#[test]
fn other_errors_become_create_errors_and_instances_win() {
    let d = handle_fleet_result(
        "on-demand",
        &[],
        &[
            err("InsufficientInstanceCapacity", "m5.large", "us-east-1a"),
            err("UnauthorizedOperation", "m5.large", "us-east-1b"),
        ],
    );
    match &d.outcome {
        LaunchOutcome::Create { reason, message } => {
            assert_eq!(reason, "Unauthorized");
            assert!(
                message.contains("InsufficientInstanceCapacity: ")
                    && message.contains("UnauthorizedOperation: ")
            );
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(d.unavailable_offerings.len(), 1);

    let inst = FleetInstance {
        instance_id: "i-1".into(),
        instance_type: "c5.large".into(),
        zone: "us-east-1b".into(),
        subnet_id: "subnet-b".into(),
        image_id: "ami-amd64".into(),
    };
    let d = handle_fleet_result(
        "spot",
        std::slice::from_ref(&inst),
        &[err(
            "InsufficientInstanceCapacity",
            "m5.large",
            "us-east-1a",
        )],
    );
    assert_eq!(d.outcome, LaunchOutcome::Launched(inst));
    assert_eq!(d.unavailable_offerings.len(), 1);

    assert_eq!(
        handle_api_error("InvalidLaunchTemplateName.NotFoundException", "gone"),
        LaunchOutcome::Create {
            reason: "LaunchTemplateNotFound".into(),
            message: "InvalidLaunchTemplateName.NotFoundException: gone".into()
        }
    );
    assert_eq!(error_reason("SomethingNew", ""), "LaunchFailed");
    assert_eq!(error_reason("VcpuLimitExceeded", ""), "VCPULimitExceeded");
    assert_eq!(
        error_reason(
            "InvalidParameter",
            "Security group sg-1 and subnet subnet-1 belong to different networks."
        ),
        "SecurityGroupSubnetVPCMismatch"
    );
}

#[test]
fn unavailable_offerings_expire_after_three_minutes() {
    let mut cache = UnavailableOfferings::new();
    let t0 = t("2026-01-01T00:00:00Z");
    let d = handle_fleet_result(
        "spot",
        &[],
        &[err(
            "InsufficientInstanceCapacity",
            "m5.large",
            "us-east-1a",
        )],
    );
    assert_eq!(cache.seq_num("m5.large"), (0, 0));
    cache.apply(&d, t0);
    assert_eq!(cache.seq_num("m5.large"), (1, 0));
    assert!(cache.is_unavailable("spot", "m5.large", "us-east-1a", &[], t0));
    assert!(!cache.is_unavailable("on-demand", "m5.large", "us-east-1a", &[], t0));
    assert!(!cache.is_unavailable("spot", "m5.large", "us-east-1b", &[], t0));
    assert!(cache.is_unavailable(
        "spot",
        "m5.large",
        "us-east-1a",
        &[],
        t("2026-01-01T00:02:59Z")
    ));
    assert!(!cache.is_unavailable(
        "spot",
        "m5.large",
        "us-east-1a",
        &[],
        t("2026-01-01T00:03:00Z")
    ));
    cache.expire(t("2026-01-01T00:03:00Z"));
    assert_eq!(cache.seq_num("m5.large"), (2, 0));

    cache.mark_capacity_type("spot", t0);
    assert!(cache.is_unavailable("spot", "c5.large", "us-east-1c", &[], t0));
    cache.mark_subnet("subnet-a", t0);
    let subnets = vec!["subnet-a".to_string(), "subnet-a2".to_string()];
    assert!(!cache.is_unavailable("on-demand", "c5.large", "us-east-1a", &subnets, t0));
    cache.mark_subnet("subnet-a2", t0);
    assert!(cache.is_unavailable("on-demand", "c5.large", "us-east-1a", &subnets, t0));
    assert_eq!(cache.seq_num("c5.large").1, 3);
}

#[test]
fn an_insufficient_capacity_error_moves_the_next_launch_to_another_offering() {
    let t0 = t("2026-01-01T00:00:00Z");
    let mut cache = UnavailableOfferings::new();
    let mut first = input("spot");
    first.templates.truncate(1);
    let req = build_fleet_request(&first).unwrap();
    let cheapest = &req.launch_template_configs[0].overrides[0];
    assert_eq!(
        (
            cheapest.instance_type.as_str(),
            cheapest.availability_zone.as_str()
        ),
        ("m5.large", "us-east-1a")
    );
    // EC2 answers with ICE for that override.
    let d = handle_fleet_result(
        "spot",
        &[],
        &[err(
            "InsufficientInstanceCapacity",
            "m5.large",
            "us-east-1a",
        )],
    );
    assert!(matches!(d.outcome, LaunchOutcome::InsufficientCapacity(_)));
    cache.apply(&d, t0);
    // The next round only sees the remaining offerings.
    let mut next = first.clone();
    next.offerings = cache
        .available(&first.offerings, t("2026-01-01T00:00:10Z"))
        .into_iter()
        .cloned()
        .collect();
    let req = build_fleet_request(&next).unwrap();
    let picked: Vec<(&str, &str)> = req.launch_template_configs[0]
        .overrides
        .iter()
        .map(|o| (o.instance_type.as_str(), o.availability_zone.as_str()))
        .collect();
    assert_eq!(picked, [("m5.large", "us-east-1b")]);
    // After three minutes the offering is back.
    assert_eq!(
        cache
            .available(&first.offerings, t("2026-01-01T00:03:00Z"))
            .len(),
        first.offerings.len()
    );
}

#[test]
fn a_reserved_fleet_request_has_one_template_per_reservation_and_its_target_type() {
    let reserved = |ty: &str, zone: &str, id: &str| Offering {
        reservation_id: Some(id.into()),
        ..offering(ty, zone, "reserved", 1e-8)
    };
    let template = |name: &str, ty: &str, id: &str| TemplateRef {
        name: name.into(),
        image_id: "ami-amd64".into(),
        instance_types: vec![ty.into()],
        reservation_id: Some(id.into()),
    };
    let mut i = input("reserved");
    i.templates = vec![
        template("lt-a", "m5.large", "cr-a"),
        template("lt-b", "m5.large", "cr-b"),
    ];
    i.offerings = vec![
        reserved("m5.large", "us-east-1a", "cr-a"),
        reserved("m5.large", "us-east-1b", "cr-b"),
    ];
    i.reserved_target_capacity_type = Some("capacity-block".into());
    let r = build_fleet_request(&i).unwrap();
    assert_eq!(r.default_target_capacity_type, "capacity-block");
    assert_eq!(
        r.on_demand_allocation_strategy.as_deref(),
        Some("lowest-price")
    );
    let zones: Vec<(&str, Vec<&str>)> = r
        .launch_template_configs
        .iter()
        .map(|c| {
            (
                c.launch_template_name.as_str(),
                c.overrides
                    .iter()
                    .map(|o| o.availability_zone.as_str())
                    .collect(),
            )
        })
        .collect();
    assert_eq!(
        zones,
        [("lt-a", vec!["us-east-1a"]), ("lt-b", vec!["us-east-1b"])]
    );
    i.reserved_target_capacity_type = None;
    assert_eq!(
        build_fleet_request(&i)
            .unwrap()
            .default_target_capacity_type,
        "on-demand"
    );
}

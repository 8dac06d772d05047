use super::*;
use karpenter_core::requirements::Requirement;

fn image(id: &str, arch: &str, created: &str) -> Image {
    Image {
        id: id.into(),
        name: Some(format!("name-{id}")),
        architecture: arch.into(),
        creation_date: created.into(),
        ..Default::default()
    }
}

fn now() -> jiff::Timestamp {
    "2026-06-01T00:00:00Z".parse().unwrap()
}

#[test]
fn al2023_parameters_latest_and_pinned() {
    let latest = alias_parameters(&Alias::parse("al2023@latest"), "1.33").unwrap();
    assert_eq!(latest.len(), 5);
    assert_eq!(
        latest[0].name,
        "/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/x86_64/standard/recommended/image_id"
    );
    let pinned = alias_parameters(&Alias::parse("al2023@v20240625"), "1.30").unwrap();
    assert_eq!(
        pinned[4].name,
        "/aws/service/eks/optimized-ami/1.30/amazon-linux-2023/arm64/nvidia/amazon-eks-node-al2023-arm64-nvidia-1.30-v20240625/image_id"
    );
    assert_eq!(pinned[4].variant, Variant::Nvidia);
}

#[test]
fn bottlerocket_al2_and_windows_parameters() {
    let br = alias_parameters(&Alias::parse("bottlerocket@v1.20.3"), "1.31").unwrap();
    let names: Vec<&str> = br.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "/aws/service/bottlerocket/aws-k8s-1.31/x86_64/1.20.3/image_id",
            "/aws/service/bottlerocket/aws-k8s-1.31/arm64/1.20.3/image_id",
            "/aws/service/bottlerocket/aws-k8s-1.31-nvidia/x86_64/1.20.3/image_id",
            "/aws/service/bottlerocket/aws-k8s-1.31-nvidia/arm64/1.20.3/image_id",
        ]
    );
    let al2 = alias_parameters(&Alias::parse("al2@v20240213"), "1.29").unwrap();
    assert_eq!(
        al2[1].name,
        "/aws/service/eks/optimized-ami/1.29/amazon-linux-2-arm64/amazon-eks-arm64-node-1.29-v20240213/image_id"
    );
    assert_eq!(
        al2[2].name,
        "/aws/service/eks/optimized-ami/1.29/amazon-linux-2-gpu/amazon-eks-gpu-node-1.29-v20240213/image_id"
    );
    assert!(matches!(
        alias_parameters(&Alias::parse("al2@latest"), "1.33"),
        Err(AmiError::UnsupportedAlias(_))
    ));
    let win = alias_parameters(&Alias::parse("windows2022@latest"), "1.32").unwrap();
    assert_eq!(
        win[0].name,
        "/aws/service/ami-windows-latest/Windows_Server-2022-English-Core-EKS_Optimized-1.32/image_id"
    );
    assert!(matches!(
        alias_parameters(&Alias::parse("windows2025@latest"), "1.34"),
        Err(AmiError::UnsupportedAlias(_))
    ));
    assert!(alias_parameters(&Alias::parse("windows2025@latest"), "1.35").is_ok());
    assert!(matches!(
        alias_parameters(&Alias::parse("al2023@latest"), "v1"),
        Err(AmiError::InvalidKubernetesVersion(_))
    ));
}

#[test]
fn alias_candidates_carry_variant_and_arch_requirements() {
    let params = alias_parameters(&Alias::parse("bottlerocket@latest"), "1.31").unwrap();
    let mut ssm = BTreeMap::new();
    ssm.insert(params[0].name.clone(), "ami-x86".to_string());
    ssm.insert(params[3].name.clone(), "ami-arm-nv".to_string());
    let images = vec![
        image("ami-x86", "x86_64", "2026-01-01T00:00:00Z"),
        image("ami-arm-nv", "arm64", "2026-01-02T00:00:00Z"),
    ];
    let cands = alias_candidates("bottlerocket@latest", &params, &ssm, &images).unwrap();
    // The x86_64 standard image serves standard and neuron types.
    assert_eq!(cands.len(), 3);
    let amis = select_images(cands, now());
    assert_eq!(amis.len(), 3);
    assert_eq!(amis[0].id, "ami-arm-nv");
    assert_eq!(
        amis[0].requirements,
        vec![
            NodeSelectorRequirement::new(ARCH_LABEL, Operator::In, ["arm64"]),
            NodeSelectorRequirement::new(
                INSTANCE_GPU_COUNT,
                Operator::Exists,
                Vec::<String>::new()
            ),
        ]
    );
    // Sorted by key length, then key.
    let std = amis.iter().find(|a| a.requirements.len() == 3).unwrap();
    let keys: Vec<&str> = std.requirements.iter().map(|r| r.key.as_str()).collect();
    assert_eq!(
        keys,
        [ARCH_LABEL, INSTANCE_GPU_COUNT, INSTANCE_ACCELERATOR_COUNT]
    );
    assert!(matches!(
        alias_candidates("al2023@latest", &params, &BTreeMap::new(), &images),
        Err(AmiError::NoImages(_))
    ));
}

#[test]
fn newest_first_deprecated_last() {
    let mut old = image("ami-old", "x86_64", "2026-01-01T00:00:00Z");
    let mut newer_deprecated = image("ami-newdep", "x86_64", "2026-03-01T00:00:00Z");
    newer_deprecated.deprecation_time = Some("2026-05-01T00:00:00Z".into());
    let arm = image("ami-arm", "arm64", "2026-02-01T00:00:00Z");
    let weird = image("ami-i386", "i386", "2026-04-01T00:00:00Z");
    let amis = select_images(
        term_candidates(&[old.clone(), newer_deprecated.clone(), arm, weird]),
        now(),
    );
    let ids: Vec<&str> = amis.iter().map(|a| a.id.as_str()).collect();
    assert_eq!(
        ids,
        ["ami-arm", "ami-old"],
        "deprecated loses to non-deprecated, i386 skipped"
    );
    assert!(!amis[1].deprecated);

    // Only deprecated ones: the newest deprecated wins and is flagged.
    old.deprecation_time = Some("2026-02-01T00:00:00Z".into());
    let amis = select_images(term_candidates(&[old, newer_deprecated]), now());
    assert_eq!(amis[0].id, "ami-newdep");
    assert!(amis[0].deprecated);

    // Same date: the greater name wins.
    let a = Image {
        name: Some("a".into()),
        ..image("ami-a", "x86_64", "2026-01-01T00:00:00Z")
    };
    let b = Image {
        name: Some("b".into()),
        ..image("ami-b", "x86_64", "2026-01-01T00:00:00Z")
    };
    assert_eq!(
        select_images(term_candidates(&[b, a]), now())[0].id,
        "ami-b"
    );
}

#[test]
fn image_queries_per_term() {
    let terms = vec![
        AmiSelectorTerm {
            id: Some("ami-1".into()),
            ..Default::default()
        },
        AmiSelectorTerm {
            name: Some("my-ami-*".into()),
            ..Default::default()
        },
        AmiSelectorTerm {
            name: Some("x".into()),
            owner: Some("123456789012".into()),
            tags: [("team".to_string(), "*".to_string())].into(),
            ..Default::default()
        },
        AmiSelectorTerm {
            ssm_parameter: Some("/my/ami".into()),
            ..Default::default()
        },
    ];
    let q = image_queries(&terms, &["ami-2".into(), "not-an-ami".into()]);
    assert_eq!(q.len(), 3);
    assert_eq!(q[0].owners, ["self", "amazon"]);
    assert_eq!(q[0].filters, vec![Filter::new("name", ["my-ami-*"])]);
    assert_eq!(q[1].owners, ["123456789012"]);
    assert_eq!(q[1].filters[1], Filter::new("tag-key", ["team"]));
    assert_eq!(
        q[2].filters,
        vec![Filter::new("image-id", ["ami-1", "ami-2"])]
    );
}

#[test]
fn instance_types_map_to_the_first_compatible_ami() {
    let params = alias_parameters(&Alias::parse("al2023@latest"), "1.33").unwrap();
    let ssm: BTreeMap<String, String> = params
        .iter()
        .enumerate()
        .map(|(i, p)| (p.name.clone(), format!("ami-{i}")))
        .collect();
    let images: Vec<Image> = params
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let arch = if p.name.contains("arm64") {
                "arm64"
            } else {
                "x86_64"
            };
            image(&format!("ami-{i}"), arch, "2026-01-01T00:00:00Z")
        })
        .collect();
    let amis = select_images(
        alias_candidates("al2023@latest", &params, &ssm, &images).unwrap(),
        now(),
    );
    let ty = |arch: &str, gpu: bool, acc: bool| {
        let mut r = Requirements::new();
        r.add(Requirement::new(ARCH_LABEL, Operator::In, [arch]));
        r.add(if gpu {
            Requirement::new(INSTANCE_GPU_COUNT, Operator::In, ["1"])
        } else {
            Requirement::does_not_exist(INSTANCE_GPU_COUNT)
        });
        r.add(if acc {
            Requirement::new(INSTANCE_ACCELERATOR_COUNT, Operator::In, ["1"])
        } else {
            Requirement::does_not_exist(INSTANCE_ACCELERATOR_COUNT)
        });
        r
    };
    let (m5, m7g, g5, inf2, g5g) = (
        ty("amd64", false, false),
        ty("arm64", false, false),
        ty("amd64", true, false),
        ty("amd64", false, true),
        ty("arm64", true, false),
    );
    let map = map_to_instance_types(
        &amis,
        [
            ("m5.large", &m5),
            ("m7g.large", &m7g),
            ("g5.xlarge", &g5),
            ("inf2.xlarge", &inf2),
            ("g5g.xlarge", &g5g),
        ],
    );
    assert_eq!(map["ami-0"], ["m5.large"]);
    assert_eq!(map["ami-1"], ["g5.xlarge"]);
    assert_eq!(map["ami-2"], ["inf2.xlarge"]);
    assert_eq!(map["ami-3"], ["m7g.large"]);
    assert_eq!(map["ami-4"], ["g5g.xlarge"]);
}

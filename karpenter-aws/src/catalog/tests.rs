//! Tests of the offline catalog against known instance types of the embedded data.

use std::collections::{BTreeMap, BTreeSet};

use karpenter_core::resources::{Quantity, ResourceList};
use proptest::prelude::*;

use super::convert::{
    category_and_generation, eni_limited_pods, estimate_spot_price, kube_reserved_cpu_millis,
    memory_capacity_mib,
};
use super::ec2::{NetworkCardInfo, NetworkInfo};
use super::*;

fn report(opts: &AwsCatalogOptions) -> CatalogReport {
    offline_catalog_report(opts).expect("the embedded catalog builds")
}

fn default_report() -> CatalogReport {
    report(&AwsCatalogOptions::default())
}

fn find<'a>(r: &'a CatalogReport, name: &str) -> &'a CatalogInstanceType {
    r.instance_types
        .iter()
        .find(|it| it.name == name)
        .unwrap_or_else(|| panic!("{name} is in the catalog"))
}

fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

/// Each quantity as it prints.
fn strs(list: &ResourceList) -> BTreeMap<String, String> {
    list.iter()
        .map(|(k, q)| (k.to_owned(), q.to_string()))
        .collect()
}

fn rl(pairs: &[(&str, &str)]) -> ResourceList {
    pairs
        .iter()
        .map(|(k, v)| (*k, Quantity::parse(v).expect("a valid quantity")))
        .collect()
}

fn zones(it: &CatalogInstanceType, capacity_type: &str) -> Vec<String> {
    it.offerings
        .iter()
        .filter(|o| o.capacity_type == capacity_type)
        .map(|o| o.zone.clone())
        .collect()
}

const ZONES_ABCDF: [&str; 5] = [
    "us-east-1a",
    "us-east-1b",
    "us-east-1c",
    "us-east-1d",
    "us-east-1f",
];

#[test]
fn m5_xlarge_is_computed_exactly() {
    let r = default_report();
    let it = find(&r, "m5.xlarge");
    // 16384 MiB − ceil(16384 × 0.075) = 16384 − 1229; pods 4 ENIs × (15 − 1) + 2.
    assert_eq!(
        strs(&it.capacity),
        map(&[
            ("cpu", "4"),
            ("memory", "15155Mi"),
            ("pods", "58"),
            ("ephemeral-storage", "20Gi"),
        ])
    );
    assert_eq!(
        strs(&it.overhead.kube_reserved),
        map(&[
            ("cpu", "80m"),
            ("memory", "893Mi"), // 11 × 58 + 255
            ("ephemeral-storage", "1Gi"),
        ])
    );
    assert!(it.overhead.system_reserved.is_empty());
    assert_eq!(
        strs(&it.overhead.eviction_threshold),
        map(&[("memory", "100Mi"), ("ephemeral-storage", "2Gi")])
    );
    assert_eq!(
        it.labels,
        map(&[
            ("karpenter.k8s.aws/instance-capability-flex", "false"),
            ("karpenter.k8s.aws/instance-category", "m"),
            ("karpenter.k8s.aws/instance-cpu", "4"),
            ("karpenter.k8s.aws/instance-cpu-manufacturer", "intel"),
            (
                "karpenter.k8s.aws/instance-cpu-sustained-clock-speed-mhz",
                "3100"
            ),
            ("karpenter.k8s.aws/instance-ebs-bandwidth", "4750"),
            (
                "karpenter.k8s.aws/instance-encryption-in-transit-supported",
                "false"
            ),
            ("karpenter.k8s.aws/instance-family", "m5"),
            ("karpenter.k8s.aws/instance-generation", "5"),
            ("karpenter.k8s.aws/instance-hypervisor", "nitro"),
            ("karpenter.k8s.aws/instance-memory", "16384"),
            ("karpenter.k8s.aws/instance-network-bandwidth", "1250"),
            ("karpenter.k8s.aws/instance-size", "xlarge"),
            ("karpenter.k8s.aws/nitro-sandbox", "true"),
            ("kubernetes.io/arch", "amd64"),
            ("kubernetes.io/os", "linux"),
            ("node.kubernetes.io/instance-type", "m5.xlarge"),
            ("topology.kubernetes.io/region", "us-east-1"),
        ])
    );
    assert_eq!(zones(it, "on-demand"), ZONES_ABCDF);
    assert_eq!(zones(it, "spot"), ZONES_ABCDF);
    for o in &it.offerings {
        assert!(o.available);
        let expected = if o.capacity_type == "on-demand" {
            0.192
        } else {
            0.0672 // 0.192 × 0.35
        };
        assert_eq!(o.price, expected, "{o:?}");
    }
    // Zone-major order, on-demand before spot.
    assert_eq!(
        (
            &it.offerings[0].zone,
            it.offerings[0].capacity_type.as_str()
        ),
        (&"us-east-1a".to_owned(), "on-demand")
    );
    assert_eq!(it.offerings[1].capacity_type, "spot");
}

#[test]
fn m5_large_has_29_pods() {
    let r = default_report();
    let it = find(&r, "m5.large");
    assert_eq!(it.capacity.get_or_zero("pods").to_string(), "29"); // 3 × (10 − 1) + 2
    assert_eq!(it.capacity.get_or_zero("memory").to_string(), "7577Mi"); // 8192 − 615, the spec's example
    assert_eq!(
        it.overhead.kube_reserved.get_or_zero("cpu").to_string(),
        "70m"
    );
    assert_eq!(
        it.overhead.kube_reserved.get_or_zero("memory").to_string(),
        "574Mi"
    ); // 11 × 29 + 255
}

#[test]
fn graviton_is_arm64_and_loses_64_mib_of_cma() {
    let r = default_report();
    let it = find(&r, "m6g.large");
    assert_eq!(it.labels["kubernetes.io/arch"], "arm64");
    assert_eq!(
        it.labels["karpenter.k8s.aws/instance-cpu-manufacturer"],
        "aws"
    );
    // (8192 − 64) − ceil(8128 × 0.075) = 8128 − 610
    assert_eq!(it.capacity.get_or_zero("memory").to_string(), "7518Mi");
    assert_eq!(it.labels["karpenter.k8s.aws/instance-memory"], "8192");
    assert_eq!(it.capacity.get_or_zero("pods").to_string(), "29");
}

#[test]
fn gpu_type_has_gpus_and_gpu_labels() {
    let r = default_report();
    let it = find(&r, "g4dn.xlarge");
    assert_eq!(it.capacity.get_or_zero("nvidia.com/gpu").to_string(), "1");
    assert_eq!(it.labels["karpenter.k8s.aws/instance-gpu-name"], "t4");
    assert_eq!(
        it.labels["karpenter.k8s.aws/instance-gpu-manufacturer"],
        "nvidia"
    );
    assert_eq!(it.labels["karpenter.k8s.aws/instance-gpu-count"], "1");
    assert_eq!(it.labels["karpenter.k8s.aws/instance-gpu-memory"], "16384");
    assert_eq!(it.labels["karpenter.k8s.aws/instance-local-nvme"], "125");
    assert!(
        !it.capacity.contains_key("amd.com/gpu"),
        "zeros are omitted"
    );

    let p4d = find(&r, "p4d.24xlarge");
    assert_eq!(p4d.capacity.get_or_zero("nvidia.com/gpu").to_string(), "8");
    assert_eq!(
        p4d.capacity
            .get_or_zero("vpc.amazonaws.com/efa")
            .to_string(),
        "4"
    );
    assert_eq!(p4d.labels["karpenter.k8s.aws/instance-gpu-name"], "a100");
}

#[test]
fn neuron_type_has_devices_cores_and_accelerator_labels() {
    let r = default_report();
    let it = find(&r, "inf2.xlarge");
    assert_eq!(
        it.capacity.get_or_zero("aws.amazon.com/neuron").to_string(),
        "1"
    );
    assert_eq!(
        it.capacity
            .get_or_zero("aws.amazon.com/neuroncore")
            .to_string(),
        "2"
    );
    assert_eq!(
        it.labels["karpenter.k8s.aws/instance-accelerator-name"],
        "inferentia2"
    );
    assert_eq!(
        it.labels["karpenter.k8s.aws/instance-accelerator-manufacturer"],
        "aws"
    );
    assert_eq!(
        it.labels["karpenter.k8s.aws/instance-accelerator-count"],
        "1"
    );
    assert_eq!(
        zones(it, "on-demand"),
        ["us-east-1a", "us-east-1b", "us-east-1c", "us-east-1f"]
    );
}

#[test]
fn metal_types_have_no_hypervisor() {
    let r = default_report();
    let it = find(&r, "m5.metal");
    assert_eq!(it.labels["karpenter.k8s.aws/instance-hypervisor"], "");
    assert_eq!(it.labels["karpenter.k8s.aws/instance-size"], "metal");
    assert_eq!(it.capacity.get_or_zero("cpu").to_string(), "96");
    assert_eq!(it.capacity.get_or_zero("pods").to_string(), "737"); // 15 × 49 + 2
    assert_eq!(
        it.overhead.kube_reserved.get_or_zero("cpu").to_string(),
        "310m"
    );
    assert_eq!(
        it.overhead.kube_reserved.get_or_zero("memory").to_string(),
        "8362Mi"
    );

    let big = find(&r, "r8g.metal-48xl");
    assert_eq!(big.labels["karpenter.k8s.aws/instance-size"], "metal-48xl");
    assert_eq!(big.labels["karpenter.k8s.aws/instance-family"], "r8g");
    assert_eq!(big.labels["kubernetes.io/arch"], "arm64");
}

#[test]
fn t3_micro_has_4_pods() {
    let r = default_report();
    let it = find(&r, "t3.micro");
    assert_eq!(it.capacity.get_or_zero("pods").to_string(), "4"); // 2 × (2 − 1) + 2
    assert_eq!(it.capacity.get_or_zero("memory").to_string(), "947Mi"); // 1024 − 77
    assert_eq!(
        it.overhead.kube_reserved.get_or_zero("memory").to_string(),
        "299Mi"
    );
}

#[test]
fn odd_names_get_category_generation_and_flex() {
    let r = default_report();
    let u = find(&r, "u-6tb1.112xlarge");
    assert_eq!(u.labels["karpenter.k8s.aws/instance-category"], "u");
    assert_eq!(u.labels["karpenter.k8s.aws/instance-generation"], "1");
    assert_eq!(u.labels["karpenter.k8s.aws/instance-family"], "u-6tb1");
    // on-demand is its only usage class
    assert!(zones(u, "spot").is_empty());
    assert_eq!(
        zones(u, "on-demand"),
        ["us-east-1a", "us-east-1b", "us-east-1c", "us-east-1d"]
    );

    let flex = find(&r, "c7i-flex.large");
    assert_eq!(
        flex.labels["karpenter.k8s.aws/instance-capability-flex"],
        "true"
    );
    assert_eq!(flex.labels["karpenter.k8s.aws/instance-category"], "c");
    assert_eq!(flex.labels["karpenter.k8s.aws/instance-generation"], "7");
}

#[test]
fn counts_of_converted_and_dropped_types() {
    let r = default_report();
    // 1395 types in the data: 9 Mac types fail upstream's architecture filter, 20 are offered
    // in no us-east-1 zone, 26 offered ones (r9g, r9gd, t8i) have no on-demand price, and AL2023
    // cannot boot the 6 a1 types.
    assert_eq!(r.instance_types.len() + r.dropped.len(), 1395);
    assert_eq!(r.instance_types.len(), 1334);
    let by_kind: Vec<(&str, usize)> = r.dropped_by_kind().into_iter().collect();
    assert_eq!(
        by_kind,
        [
            ("incompatible-with-ami-family", 6),
            ("no-on-demand-price", 26),
            ("not-offered", 20),
            ("unsupported-architecture", 9),
        ]
    );
    assert_eq!(r.offering_count(), 12534);
    let on_demand = r
        .instance_types
        .iter()
        .flat_map(|it| &it.offerings)
        .filter(|o| o.capacity_type == "on-demand")
        .count();
    assert_eq!(on_demand, 6288);
    assert_eq!(r.offering_count() - on_demand, 6246);

    // With AL2 the a1 types come back.
    let al2 = report(&AwsCatalogOptions {
        ami_family: AmiFamily::Al2,
        ..AwsCatalogOptions::default()
    });
    assert_eq!(al2.instance_types.len(), 1340);
}

#[test]
fn offering_zones_match_the_offerings_file() {
    let raw = gunzip(EMBEDDED_OFFERINGS, "offerings").unwrap();
    let rows: Vec<serde_json::Value> = serde_json::from_slice(&raw).unwrap();
    let mut expected: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for row in rows {
        expected
            .entry(row["InstanceType"].as_str().unwrap().to_owned())
            .or_default()
            .insert(row["Location"].as_str().unwrap().to_owned());
    }
    let r = default_report();
    for it in &r.instance_types {
        let on_demand: BTreeSet<String> = zones(it, "on-demand").into_iter().collect();
        assert_eq!(Some(&on_demand), expected.get(&it.name), "{}", it.name);
        let spot: BTreeSet<String> = zones(it, "spot").into_iter().collect();
        assert!(spot.is_empty() || spot == on_demand, "{}", it.name);
        // every offering is in its own zone once per capacity type
        let mut seen = BTreeSet::new();
        for o in &it.offerings {
            assert!(seen.insert((o.zone.clone(), o.capacity_type.clone())));
            assert!(o.price > 0.0 && o.price.is_finite());
        }
    }
    // us-east-1e is the odd zone with few types.
    let in_e = r
        .instance_types
        .iter()
        .filter(|it| it.offerings.iter().any(|o| o.zone == "us-east-1e"))
        .count();
    assert_eq!(in_e, 68);
}

#[test]
fn labels_are_valid_kubernetes_labels() {
    let r = default_report();
    for it in &r.instance_types {
        for (k, v) in &it.labels {
            karpenter_core::labels::validate_qualified_name(k).unwrap();
            karpenter_core::labels::validate_label_value(v)
                .unwrap_or_else(|e| panic!("{}: {k}={v:?}: {e}", it.name));
        }
        assert_eq!(it.labels["node.kubernetes.io/instance-type"], it.name);
        for required in ["cpu", "memory", "pods", "ephemeral-storage"] {
            assert!(it.capacity.contains_key(required), "{}", it.name);
        }
    }
}

#[test]
fn catalog_is_sorted_and_deterministic() {
    let a = default_report();
    let b = default_report();
    assert_eq!(a, b);
    assert!(a.instance_types.windows(2).all(|w| w[0].name < w[1].name));
    let json_a = serde_json::to_string(&a.instance_types).unwrap();
    let json_b = serde_json::to_string(&b.instance_types).unwrap();
    assert_eq!(json_a, json_b);
}

#[test]
fn spot_price_factor_is_a_parameter() {
    let upstream = report(&AwsCatalogOptions {
        spot_price_factor: UPSTREAM_FALLBACK_SPOT_PRICE_FACTOR,
        ..AwsCatalogOptions::default()
    });
    for it in &upstream.instance_types {
        let od = it
            .offerings
            .iter()
            .find(|o| o.capacity_type == "on-demand")
            .unwrap()
            .price;
        assert!(it.offerings.iter().all(|o| o.price == od), "{}", it.name);
    }
    let half = report(&AwsCatalogOptions {
        spot_price_factor: 0.5,
        ..AwsCatalogOptions::default()
    });
    let spot = find(&half, "m5.xlarge")
        .offerings
        .iter()
        .find(|o| o.capacity_type == "spot")
        .unwrap()
        .price;
    assert_eq!(spot, 0.096);

    for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
        let err = offline_catalog(&AwsCatalogOptions {
            spot_price_factor: bad,
            ..AwsCatalogOptions::default()
        })
        .unwrap_err();
        assert!(matches!(
            err,
            CatalogError::InvalidOption {
                option: "spot_price_factor",
                ..
            }
        ));
    }
}

#[test]
fn kubelet_pod_options() {
    // maxPods replaces the ENI formula, but AL2023's kube-reserved memory still uses it.
    let r = report(&AwsCatalogOptions {
        max_pods: Some(110),
        ..AwsCatalogOptions::default()
    });
    let it = find(&r, "m5.xlarge");
    assert_eq!(it.capacity.get_or_zero("pods").to_string(), "110");
    assert_eq!(
        it.overhead.kube_reserved.get_or_zero("memory").to_string(),
        "893Mi"
    );

    // Bottlerocket reserves memory for the resolved pod count.
    let r = report(&AwsCatalogOptions {
        max_pods: Some(110),
        ami_family: AmiFamily::Bottlerocket,
        ..AwsCatalogOptions::default()
    });
    let it = find(&r, "m5.xlarge");
    assert_eq!(
        it.overhead.kube_reserved.get_or_zero("memory").to_string(),
        "1465Mi"
    ); // 11 × 110 + 255

    // One reserved ENI: 3 × 14 + 2 pods; memory overhead still with 0 reserved ENIs.
    let r = report(&AwsCatalogOptions {
        reserved_enis: 1,
        ..AwsCatalogOptions::default()
    });
    let it = find(&r, "m5.xlarge");
    assert_eq!(it.capacity.get_or_zero("pods").to_string(), "44");
    assert_eq!(
        it.overhead.kube_reserved.get_or_zero("memory").to_string(),
        "893Mi"
    );

    // podsPerCore caps the count; Bottlerocket ignores it.
    let r = report(&AwsCatalogOptions {
        pods_per_core: Some(10),
        ..AwsCatalogOptions::default()
    });
    assert_eq!(
        find(&r, "m5.xlarge")
            .capacity
            .get_or_zero("pods")
            .to_string(),
        "40"
    );
    let r = report(&AwsCatalogOptions {
        pods_per_core: Some(10),
        ami_family: AmiFamily::Bottlerocket,
        ..AwsCatalogOptions::default()
    });
    assert_eq!(
        find(&r, "m5.xlarge")
            .capacity
            .get_or_zero("pods")
            .to_string(),
        "58"
    );
}

#[test]
fn windows_family() {
    let r = report(&AwsCatalogOptions {
        ami_family: AmiFamily::Windows2022,
        ..AwsCatalogOptions::default()
    });
    let it = find(&r, "m5.xlarge");
    assert_eq!(it.labels["kubernetes.io/os"], "windows");
    assert_eq!(it.labels["node.kubernetes.io/windows-build"], "10.0.20348");
    assert_eq!(it.capacity.get_or_zero("pods").to_string(), "110");
    assert_eq!(
        it.overhead.kube_reserved.get_or_zero("memory").to_string(),
        "1465Mi"
    );
    assert_eq!(
        it.capacity.get_or_zero("ephemeral-storage").to_string(),
        "50Gi"
    );
    assert_eq!(
        it.overhead
            .eviction_threshold
            .get_or_zero("ephemeral-storage")
            .to_string(),
        "5Gi"
    );
    assert_eq!(
        it.capacity
            .get_or_zero("vpc.amazonaws.com/PrivateIPv4Address")
            .to_string(),
        "14"
    );
    // arm64 types cannot run Windows
    assert!(
        r.instance_types
            .iter()
            .all(|it| it.labels["kubernetes.io/arch"] == "amd64")
    );
    assert!(
        r.dropped
            .iter()
            .any(|d| d.name == "m6g.large" && d.reason == DropReason::NoOperatingSystem)
    );
}

#[test]
fn storage_and_eviction_options() {
    let r = report(&AwsCatalogOptions {
        instance_store_raid0: true,
        ..AwsCatalogOptions::default()
    });
    let it = find(&r, "m5d.large");
    assert_eq!(
        it.capacity.get_or_zero("ephemeral-storage").to_string(),
        "75G"
    );
    assert_eq!(
        it.overhead
            .eviction_threshold
            .get_or_zero("ephemeral-storage")
            .to_string(),
        "7500M"
    );
    // no instance store: the volume size stays
    assert_eq!(
        find(&r, "m5.large")
            .capacity
            .get_or_zero("ephemeral-storage")
            .to_string(),
        "20Gi"
    );

    let mut eviction_hard = BTreeMap::new();
    eviction_hard.insert("memory.available".to_owned(), "5%".to_owned());
    eviction_hard.insert("nodefs.available".to_owned(), "100%".to_owned());
    let kube_reserved = rl(&[("cpu", "250m")]);
    let system_reserved = rl(&[("memory", "200Mi")]);
    let r = report(&AwsCatalogOptions {
        ephemeral_storage_bytes: Some(100 << 30),
        eviction_hard,
        kube_reserved,
        system_reserved: system_reserved.clone(),
        ..AwsCatalogOptions::default()
    });
    let it = find(&r, "m5.xlarge");
    assert_eq!(
        it.capacity.get_or_zero("ephemeral-storage").to_string(),
        "100Gi"
    );
    // ceil(15155 MiB × 5%) in bytes
    let expected = ((15155_i64 << 20) as f64 * 0.05).ceil() as i64;
    assert_eq!(
        it.overhead
            .eviction_threshold
            .get_or_zero("memory")
            .to_string(),
        quantity::bytes(expected, quantity::Suffixes::Binary).to_string()
    );
    assert_eq!(
        it.overhead
            .eviction_threshold
            .get_or_zero("ephemeral-storage")
            .to_string(),
        "0"
    );
    assert_eq!(
        it.overhead.kube_reserved.get_or_zero("cpu").to_string(),
        "250m"
    );
    assert_eq!(
        it.overhead.kube_reserved.get_or_zero("memory").to_string(),
        "893Mi"
    );
    assert_eq!(it.overhead.system_reserved, system_reserved);

    let mut bad = BTreeMap::new();
    bad.insert("memory.available".to_owned(), "abc%".to_owned());
    assert!(
        offline_catalog(&AwsCatalogOptions {
            eviction_hard: bad,
            ..AwsCatalogOptions::default()
        })
        .is_err()
    );
}

#[test]
fn invalid_options_and_regions_are_errors() {
    let err = offline_catalog(&AwsCatalogOptions {
        region: "eu-west-1".to_owned(),
        ..AwsCatalogOptions::default()
    })
    .unwrap_err();
    assert!(matches!(err, CatalogError::UnsupportedRegion { .. }));
    for opts in [
        AwsCatalogOptions {
            vm_memory_overhead_percent: 1.0,
            ..AwsCatalogOptions::default()
        },
        AwsCatalogOptions {
            vm_memory_overhead_percent: -0.1,
            ..AwsCatalogOptions::default()
        },
        AwsCatalogOptions {
            max_pods: Some(-1),
            ..AwsCatalogOptions::default()
        },
        AwsCatalogOptions {
            reserved_enis: -1,
            ..AwsCatalogOptions::default()
        },
        AwsCatalogOptions {
            ephemeral_storage_bytes: Some(0),
            ..AwsCatalogOptions::default()
        },
    ] {
        assert!(matches!(
            offline_catalog(&opts),
            Err(CatalogError::InvalidOption { .. })
        ));
    }
}

#[test]
fn bad_inputs_are_errors_not_panics() {
    assert!(matches!(
        gunzip(b"not gzip", "x"),
        Err(CatalogError::Decompress { .. })
    ));
    assert!(matches!(
        CatalogSources::from_json(b"[]", b"[]", br#"{"region":"r","prices":{}}"#),
        Err(CatalogError::Parse {
            what: "instance types",
            ..
        })
    ));
    // A type with missing data is dropped, not fatal; odd prices are skipped.
    let sources = CatalogSources::from_json(
        br#"{"x1.large": {"InstanceType": "x1.large", "SupportedVirtualizationTypes": ["hvm"],
              "ProcessorInfo": {"SupportedArchitectures": ["x86_64"]},
              "SupportedUsageClasses": ["on-demand"]}}"#,
        br#"[{"InstanceType": "x1.large", "Location": "r-a", "LocationType": "availability-zone"}]"#,
        br#"{"region": "r", "prices": {"x1.large": 1.0, "y": 0, "z": "abc"}}"#,
    )
    .unwrap();
    assert_eq!(sources.on_demand_prices.len(), 1);
    let r = build_catalog(
        &sources,
        &AwsCatalogOptions {
            region: "r".to_owned(),
            ..AwsCatalogOptions::default()
        },
    )
    .unwrap();
    assert!(r.instance_types.is_empty());
    assert_eq!(
        r.dropped,
        [DroppedInstanceType {
            name: "x1.large".to_owned(),
            reason: DropReason::MissingData("VCpuInfo.DefaultVCpus"),
        }]
    );
}

#[test]
fn catalog_file_round_trips_and_reads_the_contract_shape() {
    let r = default_report();
    let file = CatalogFile {
        instance_types: r.instance_types[..20].to_vec(),
    };
    let json = serde_json::to_string(&file).unwrap();
    assert!(json.starts_with(r#"{"instanceTypes":[{"name":"#));
    assert!(
        !json.contains("\"available\""),
        "available: true is omitted"
    );
    assert!(json.contains("\"capacityType\":\"on-demand\""));
    assert!(json.contains("\"kubeReserved\""));
    let back: CatalogFile = serde_json::from_str(&json).unwrap();
    assert_eq!(back, file);

    // The contract's example, with optional parts left out.
    let example = r#"{"instanceTypes": [{
        "name": "m5.xlarge",
        "capacity": {"cpu": "4", "memory": "16Gi", "pods": "58", "ephemeral-storage": "20Gi"},
        "overhead": {"kubeReserved": {"cpu": "80m", "memory": "893Mi"},
                     "evictionThreshold": {"memory": "100Mi"}},
        "labels": {"kubernetes.io/arch": "amd64"},
        "offerings": [
            {"zone": "us-east-1a", "capacityType": "on-demand", "price": 0.192},
            {"zone": "us-east-1a", "capacityType": "spot", "price": 0.071, "available": false}
        ]}, {"name": "tiny", "capacity": {"cpu": "1"}}]}"#;
    let parsed: CatalogFile = serde_json::from_str(example).unwrap();
    let m5 = &parsed.instance_types[0];
    assert!(m5.overhead.system_reserved.is_empty());
    assert!(m5.offerings[0].available);
    assert!(!m5.offerings[1].available);
    let tiny = &parsed.instance_types[1];
    assert_eq!(tiny.overhead, CatalogOverhead::default());
    assert!(tiny.offerings.is_empty() && tiny.labels.is_empty());
}

#[test]
fn category_and_generation_follow_upstreams_pattern() {
    assert_eq!(category_and_generation("m5.large"), Some(("m", "5")));
    assert_eq!(category_and_generation("u-6tb1.metal"), Some(("u", "1")));
    assert_eq!(
        category_and_generation("u-6tb1.112xlarge"),
        Some(("u", "1"))
    );
    assert_eq!(
        category_and_generation("u7i-12tb.224xlarge"),
        Some(("u", "7"))
    );
    assert_eq!(category_and_generation("c7i-flex.large"), Some(("c", "7")));
    assert_eq!(category_and_generation("x2iezn.2xlarge"), Some(("x", "2")));
    assert_eq!(
        category_and_generation("trn1n.32xlarge"),
        Some(("trn", "1"))
    );
    assert_eq!(category_and_generation("mac2-m2.metal"), Some(("mac", "2")));
    assert_eq!(category_and_generation("m10.large"), Some(("m", "10")));
    assert_eq!(category_and_generation("m5"), None);
    assert_eq!(category_and_generation("5m.large"), None);
    assert_eq!(category_and_generation("u-6tb.large"), None);
    assert_eq!(category_and_generation(""), None);
}

#[test]
fn kube_reserved_cpu_matches_the_specs_examples() {
    for (vcpus, millis) in [(1, 60), (2, 70), (4, 80), (8, 90), (96, 310), (448, 1190)] {
        assert_eq!(kube_reserved_cpu_millis(vcpus), millis, "{vcpus} vCPUs");
    }
}

#[cfg(not(debug_assertions))]
#[test]
fn whole_catalog_converts_within_a_second_in_release() {
    let start = std::time::Instant::now();
    let r = default_report();
    assert!(!r.instance_types.is_empty());
    assert!(start.elapsed() < std::time::Duration::from_secs(1));
}

fn network(interfaces: i64, ips: i64) -> NetworkInfo {
    NetworkInfo {
        default_network_card_index: Some(0),
        network_cards: vec![NetworkCardInfo {
            network_card_index: Some(0),
            maximum_network_interfaces: Some(interfaces),
            ..NetworkCardInfo::default()
        }],
        ipv4_addresses_per_interface: Some(ips),
        ..NetworkInfo::default()
    }
}

proptest! {
    #[test]
    fn kube_reserved_cpu_is_monotone_and_small(vcpus in 1_i64..2048) {
        let here = kube_reserved_cpu_millis(vcpus);
        let next = kube_reserved_cpu_millis(vcpus + 1);
        prop_assert!(here <= next);
        prop_assert!(next - here <= 10, "each vCPU past the first adds at most 1% of a core");
        prop_assert!(here >= 60 && here < vcpus * 1000);
    }

    #[test]
    fn memory_overhead_is_the_ceiling_of_the_percentage(
        mib in 512_i64..4_000_000,
        tenths_of_percent in 0_i64..500,
    ) {
        let pct = tenths_of_percent as f64 / 1000.0;
        let capacity = memory_capacity_mib(mib, Some("x86_64"), pct);
        let overhead = mib - capacity;
        prop_assert!(overhead >= 0);
        prop_assert!((overhead as f64) >= mib as f64 * pct - 1e-6);
        prop_assert!((overhead as f64) < mib as f64 * pct + 1.0);
        // Graviton loses exactly 64 MiB more before the percentage applies.
        let arm = memory_capacity_mib(mib, Some("arm64"), pct);
        prop_assert_eq!(arm, memory_capacity_mib(mib - 64, None, pct));
    }

    #[test]
    fn eni_pods_shrink_with_reserved_enis(
        interfaces in 1_i64..32,
        ips in 1_i64..64,
        reserved in 0_i64..40,
    ) {
        let n = network(interfaces, ips);
        let pods = eni_limited_pods(Some(&n), reserved).unwrap();
        let fewer = eni_limited_pods(Some(&n), reserved + 1).unwrap();
        prop_assert!(fewer <= pods);
        if reserved >= interfaces {
            prop_assert_eq!(pods, 0);
        } else {
            prop_assert_eq!(pods, (interfaces - reserved) * (ips - 1) + 2);
        }
    }

    #[test]
    fn spot_estimate_is_the_factor_times_on_demand(
        micro_dollars in 1_i64..100_000_000,
        factor_pct in 1_i64..200,
    ) {
        let od = micro_dollars as f64 / 1e6;
        let factor = factor_pct as f64 / 100.0;
        let spot = estimate_spot_price(od, factor);
        prop_assert!(spot > 0.0);
        prop_assert!((spot - od * factor).abs() <= 0.5e-6 + 1e-12);
    }
}

#[test]
fn every_type_converts_into_a_core_instance_type() {
    let r = default_report();
    for it in &r.instance_types {
        let core = it
            .to_instance_type()
            .unwrap_or_else(|e| panic!("{}: {e}", it.name));
        assert_eq!(core.name(), it.name);
        assert_eq!(core.offerings.len(), it.offerings.len());
        assert!(
            core.allocatable().iter().all(|(_, q)| !q.is_negative()),
            "{}",
            it.name
        );
    }
    let m5 = find(&r, "m5.xlarge").to_instance_type().unwrap();
    // 4 − 80m; 15155Mi − 893Mi − 100Mi
    assert_eq!(
        m5.allocatable().get_or_zero("cpu"),
        Quantity::parse("3920m").unwrap()
    );
    assert_eq!(
        m5.allocatable().get_or_zero("memory"),
        Quantity::parse("14162Mi").unwrap()
    );
}

#[test]
fn eviction_quantities_must_parse() {
    let mut bad = BTreeMap::new();
    bad.insert("memory.available".to_owned(), "lots".to_owned());
    assert!(matches!(
        offline_catalog(&AwsCatalogOptions {
            eviction_hard: bad,
            ..AwsCatalogOptions::default()
        }),
        Err(CatalogError::InvalidOption {
            option: "eviction_hard",
            ..
        })
    ));
    let mut good = BTreeMap::new();
    good.insert("memory.available".to_owned(), "200Mi".to_owned());
    let r = report(&AwsCatalogOptions {
        eviction_hard: good,
        ..AwsCatalogOptions::default()
    });
    assert_eq!(
        find(&r, "m5.xlarge")
            .overhead
            .eviction_threshold
            .get_or_zero("memory")
            .to_string(),
        "200Mi"
    );
}

/// The EC2NodeClass compatibility checks and EFA capacity (upstream's `compatibility.go` and
/// `efas`): what the class asks of a type leaves the types that cannot do it out.
mod node_class_compatibility {
    use super::*;

    fn names(r: &CatalogReport) -> BTreeSet<String> {
        r.instance_types.iter().map(|t| t.name.clone()).collect()
    }

    fn slot(card: i64, device: i64, efa_only: bool) -> InterfaceSlot {
        InterfaceSlot {
            network_card_index: card,
            device_index: device,
            efa_only,
        }
    }

    #[test]
    fn nested_virtualization_connection_tracking_and_placement_strategies_filter_types() {
        let all = names(&default_report());
        let nested = report(&AwsCatalogOptions {
            nested_virtualization: true,
            ..AwsCatalogOptions::default()
        });
        let n = names(&nested);
        assert!(!n.is_empty() && n.len() < all.len(), "{}", n.len());
        assert!(nested.dropped.iter().any(|d| d.reason
            == DropReason::IncompatibleWithNodeClass("cpuOptions.nestedVirtualization")));
        // Connection tracking needs Nitro: no Xen type (m4) stays, Nitro types (m5) do.
        let ct = names(&report(&AwsCatalogOptions {
            connection_tracking: true,
            ..AwsCatalogOptions::default()
        }));
        assert!(all.contains("m4.large") && !ct.contains("m4.large"));
        assert!(ct.contains("m5.large"));
        // Every type of the embedded data supports cluster groups it is offered with.
        let cluster = names(&report(&AwsCatalogOptions {
            placement_group_strategy: Some("cluster".into()),
            ..AwsCatalogOptions::default()
        }));
        assert!(cluster.contains("m5.large"));
        let unknown = names(&report(&AwsCatalogOptions {
            placement_group_strategy: Some("no-such-strategy".into()),
            ..AwsCatalogOptions::default()
        }));
        assert!(unknown.is_empty());
    }

    #[test]
    fn efa_capacity_is_the_types_maximum_or_the_classes_efa_only_interfaces() {
        let default = default_report();
        let p5 = find(&default, "p5.48xlarge");
        let max_efa = p5.capacity.get_or_zero("vpc.amazonaws.com/efa").value();
        assert!(max_efa > 1, "{max_efa}");
        let interfaces = AwsCatalogOptions {
            network_interfaces: vec![slot(0, 0, false), slot(0, 1, true), slot(1, 0, true)],
            ..AwsCatalogOptions::default()
        };
        let r = report(&interfaces);
        let p5i = find(&r, "p5.48xlarge");
        assert_eq!(p5i.capacity.get_or_zero("vpc.amazonaws.com/efa").value(), 2);
        // The efa-only interface on card 0 takes an ENI from the pod formula.
        let pods = |it: &CatalogInstanceType| it.capacity.get_or_zero("pods").value();
        assert!(pods(p5i) < pods(p5), "{} < {}", pods(p5i), pods(p5));
        // Types without EFA, or with one network card, cannot carry these interfaces.
        assert!(names(&default).contains("m5.large"));
        assert!(!names(&r).contains("m5.large"));
        assert!(
            r.dropped
                .iter()
                .any(|d| d.reason == DropReason::IncompatibleWithNodeClass("networkInterfaces"))
        );
        // A device index beyond the card's interfaces is incompatible too.
        let too_deep = report(&AwsCatalogOptions {
            network_interfaces: vec![slot(0, 0, false), slot(0, 1000, false)],
            ..AwsCatalogOptions::default()
        });
        assert!(names(&too_deep).is_empty());
    }
}

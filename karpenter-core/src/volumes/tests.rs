use super::*;
use crate::model::{NodeSelectorTerm, Timestamp};
use crate::requirements::NodeSelectorRequirement;
use crate::requirements::Operator;
use proptest::prelude::*;

fn zone_term(zones: &[&str]) -> NodeSelectorTerm {
    NodeSelectorTerm {
        match_expressions: vec![NodeSelectorRequirement::new(
            labels::ZONE,
            Operator::In,
            zones.iter().copied(),
        )],
    }
}

fn wffc(name: &str, provisioner: &str) -> StorageClass {
    let mut c = StorageClass::new(name, provisioner);
    c.volume_binding_mode = VolumeBindingMode::WaitForFirstConsumer;
    c
}

fn unbound(name: &str, class: Option<&str>) -> PersistentVolumeClaim {
    let mut c = PersistentVolumeClaim::new("ns", name);
    c.storage_class_name = class.map(str::to_string);
    c
}

fn pod_with(claims: &[&str]) -> Pod {
    let mut pod = Pod::new("ns", "p");
    for (i, c) in claims.iter().enumerate() {
        pod.volumes.push(PodVolume::claim(format!("v{i}"), *c));
    }
    pod
}

fn zones_of(reqs: &Requirements) -> Vec<String> {
    reqs.get(labels::ZONE)
        .map(|r| r.values().map(str::to_string).collect())
        .unwrap_or_default()
}

#[test]
fn in_tree_provisioners_translate_to_csi_drivers() {
    assert_eq!(
        csi_driver_for_provisioner("kubernetes.io/gce-pd"),
        "pd.csi.storage.gke.io"
    );
    assert_eq!(
        csi_driver_for_provisioner("ebs.csi.aws.com"),
        "ebs.csi.aws.com"
    );
    let pv = PersistentVolume::new("v", PersistentVolumeSource::AwsElasticBlockStore);
    assert_eq!(pv.driver(), Some(AWS_EBS_CSI_DRIVER));
    let nfs = PersistentVolume::new("v", PersistentVolumeSource::Other("nfs".into()));
    assert_eq!(nfs.driver(), None);
}

#[test]
fn the_newest_default_class_wins_ties_by_name() {
    let mut c = VolumeCatalog::default();
    assert!(c.default_storage_class().is_none());
    let mut old = StorageClass::new("old", "a");
    old.is_default = true;
    let mut newer = StorageClass::new("newer", "b");
    newer.is_default = true;
    newer.creation_timestamp = Timestamp::from_second(10).unwrap();
    let mut twin = newer.clone();
    twin.name = "a-twin".into();
    c.add_storage_class(StorageClass::new("not-default", "c"));
    c.add_storage_class(old);
    c.add_storage_class(newer);
    assert_eq!(c.default_storage_class().unwrap().name, "newer");
    c.add_storage_class(twin);
    assert_eq!(c.default_storage_class().unwrap().name, "a-twin");

    // Unset class → default; explicitly empty → none.
    assert_eq!(c.claim_storage_class(&unbound("x", None)), Some("a-twin"));
    assert_eq!(c.claim_storage_class(&unbound("x", Some(""))), None);
    assert_eq!(
        c.claim_storage_class(&unbound("x", Some("old"))),
        Some("old")
    );
}

#[test]
fn validation_follows_the_kube_scheduler_rules() {
    let mut c = VolumeCatalog::default();
    c.add_storage_class(wffc("wffc", "csi.example.com"));
    c.add_storage_class(StorageClass::new("immediate", "csi.example.com"));
    c.add_volume(PersistentVolume::csi("pv", "csi.example.com"));
    let mut deleting_pv = PersistentVolume::csi("pv-del", "csi.example.com");
    deleting_pv.deleting = true;
    c.add_volume(deleting_pv);

    let check = |c: &VolumeCatalog, claim: PersistentVolumeClaim| {
        let mut c = c.clone();
        let name = claim.name.clone();
        c.add_claim(claim);
        c.validate_pod(&pod_with(&[&name]))
    };
    assert!(check(&c, unbound("ok", Some("wffc"))).is_ok());
    assert!(check(&c, PersistentVolumeClaim::bound("ns", "b", "pv")).is_ok());
    assert!(matches!(
        c.validate_pod(&pod_with(&["missing"])),
        Err(VolumeError::ClaimNotFound { .. })
    ));
    let mut deleting = unbound("d", Some("wffc"));
    deleting.deleting = true;
    assert!(matches!(
        check(&c, deleting),
        Err(VolumeError::ClaimDeleting { .. })
    ));
    let mut lost = unbound("l", Some("wffc"));
    lost.phase = ClaimPhase::Lost;
    assert!(matches!(
        check(&c, lost),
        Err(VolumeError::ClaimLost { .. })
    ));
    assert!(matches!(
        check(&c, PersistentVolumeClaim::bound("ns", "b", "nope")),
        Err(VolumeError::VolumeNotFound { .. })
    ));
    assert!(matches!(
        check(&c, PersistentVolumeClaim::bound("ns", "b", "pv-del")),
        Err(VolumeError::VolumeDeleting { .. })
    ));
    let mut incomplete = PersistentVolumeClaim::bound("ns", "b", "pv");
    incomplete.bind_completed = false;
    let err = check(&c, incomplete).unwrap_err();
    assert!(matches!(err, VolumeError::BindNotCompleted { .. }));
    assert!(err.to_string().contains(BIND_COMPLETED_ANNOTATION), "{err}");
    assert!(matches!(
        check(&c, unbound("n", None)),
        Err(VolumeError::NoStorageClass { .. })
    ));
    assert!(matches!(
        check(&c, unbound("n", Some(""))),
        Err(VolumeError::NoStorageClass { .. })
    ));
    assert!(matches!(
        check(&c, unbound("n", Some("gone"))),
        Err(VolumeError::StorageClassNotFound { .. })
    ));
    assert!(matches!(
        check(&c, unbound("n", Some("immediate"))),
        Err(VolumeError::ImmediateBinding { .. })
    ));

    // A bound claim's class does not matter, even a missing one.
    let mut bound = PersistentVolumeClaim::bound("ns", "b", "pv");
    bound.storage_class_name = Some("gone".into());
    assert!(check(&c, bound).is_ok());

    // Provider-configured rejections.
    let mut keyed = wffc("keyed", "csi.example.com");
    keyed.allowed_topologies = vec![TopologySelectorTerm {
        match_label_expressions: vec![TopologySelectorLabelRequirement {
            key: "topology.ebs.csi.aws.com/zone".into(),
            values: vec!["a".into()],
        }],
    }];
    c.add_storage_class(keyed);
    assert!(check(&c, unbound("k", Some("keyed"))).is_ok());
    c.unsupported_topology_keys
        .insert("topology.ebs.csi.aws.com/zone".into());
    assert!(matches!(
        check(&c, unbound("k", Some("keyed"))),
        Err(VolumeError::UnsupportedTopologyKey { .. })
    ));
    c.unsupported_provisioners.insert("csi.example.com".into());
    assert!(matches!(
        check(&c, unbound("ok", Some("wffc"))),
        Err(VolumeError::UnsupportedProvisioner { .. })
    ));
    assert!(matches!(
        check(&c, PersistentVolumeClaim::bound("ns", "b", "pv")),
        Err(VolumeError::UnsupportedProvisioner { .. })
    ));
}

#[test]
fn ephemeral_volumes_use_the_pod_named_claim() {
    let mut c = VolumeCatalog::default();
    c.add_storage_class(wffc("wffc", "kubernetes.io/aws-ebs"));
    let mut pod = Pod::new("ns", "web");
    pod.volumes
        .push(PodVolume::ephemeral("scratch", Some("wffc")));
    pod.volumes.push(PodVolume {
        name: "tmp".into(),
        source: VolumeSource::Other("emptyDir".into()),
    });
    assert!(matches!(
        c.validate_pod(&pod),
        Err(VolumeError::ClaimNotFound { claim, .. }) if claim == "ns/web-scratch"
    ));
    c.add_claim(unbound("web-scratch", Some("wffc")));
    assert!(c.validate_pod(&pod).is_ok());
    let usage = c.pod_volume_usage(&pod);
    assert_eq!(usage.len(), 1);
    assert!(usage[AWS_EBS_CSI_DRIVER].contains("ns/web-scratch"));
}

#[test]
fn usage_skips_what_cannot_be_resolved() {
    let mut c = VolumeCatalog::default();
    c.add_volume(PersistentVolume::csi("csi", "d1"));
    c.add_volume(PersistentVolume::new(
        "nfs",
        PersistentVolumeSource::Other("nfs".into()),
    ));
    c.add_claim(PersistentVolumeClaim::bound("ns", "a", "csi"));
    c.add_claim(PersistentVolumeClaim::bound("ns", "b", "nfs"));
    c.add_claim(PersistentVolumeClaim::bound("ns", "c", "missing"));
    c.add_claim(unbound("d", Some("missing-class")));
    c.add_claim(unbound("e", None));
    let usage = c.pod_volume_usage(&pod_with(&["a", "a", "b", "c", "d", "e", "f"]));
    assert_eq!(usage.len(), 1);
    assert_eq!(usage["d1"].iter().collect::<Vec<_>>(), ["ns/a"]);
}

#[test]
fn local_volumes_ignore_hostname_affinity() {
    let mut c = VolumeCatalog::default();
    let host_term = NodeSelectorTerm {
        match_expressions: vec![NodeSelectorRequirement::new(
            labels::HOSTNAME,
            Operator::In,
            ["host-1"],
        )],
    };
    let mut both = zone_term(&["z1"]);
    both.match_expressions
        .push(host_term.match_expressions[0].clone());
    let mut local = PersistentVolume::new("local", PersistentVolumeSource::Local);
    local.node_affinity = vec![host_term.clone(), both.clone(), NodeSelectorTerm::default()];
    let mut csi = PersistentVolume::csi("csi", "d");
    csi.node_affinity = vec![host_term, both];
    c.add_volume(local);
    c.add_volume(csi);
    c.add_claim(PersistentVolumeClaim::bound("ns", "l", "local"));
    c.add_claim(PersistentVolumeClaim::bound("ns", "c", "csi"));

    let alts = c.topology_alternatives(&pod_with(&["l"])).unwrap();
    assert_eq!(alts.len(), 2);
    assert!(alts[0].is_empty(), "hostname-only term → unconstrained");
    assert_eq!(alts[1].keys().collect::<Vec<_>>(), [labels::ZONE]);

    let alts = c.topology_alternatives(&pod_with(&["c"])).unwrap();
    assert_eq!(alts.len(), 2);
    assert!(alts[0].has(labels::HOSTNAME));
    assert!(alts[1].has(labels::HOSTNAME) && alts[1].has(labels::ZONE));
}

#[test]
fn cross_product_prunes_disjoint_branches() {
    let mut c = VolumeCatalog::default();
    let term = |pairs: &[(&str, &str)]| TopologySelectorTerm {
        match_label_expressions: pairs
            .iter()
            .map(|(k, v)| TopologySelectorLabelRequirement {
                key: k.to_string(),
                values: vec![v.to_string()],
            })
            .collect(),
    };
    let mut a = wffc("a", "d");
    a.allowed_topologies = vec![
        term(&[("special", "required")]),
        term(&[("special", "optional")]),
    ];
    let mut b = wffc("b", "d");
    b.allowed_topologies = vec![
        term(&[(labels::ZONE, "z1"), ("special", "optional")]),
        term(&[(labels::ZONE, "z2"), ("special", "required")]),
    ];
    c.add_storage_class(a);
    c.add_storage_class(b);
    c.add_claim(unbound("a", Some("a")));
    c.add_claim(unbound("b", Some("b")));
    let alts = c.topology_alternatives(&pod_with(&["a", "b"])).unwrap();
    let got: Vec<(Vec<String>, String)> = alts
        .iter()
        .map(|r| {
            (
                zones_of(r),
                r.get("special").and_then(|s| s.any()).unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            (vec!["z2".to_string()], "required".to_string()),
            (vec!["z1".to_string()], "optional".to_string())
        ]
    );

    // Nothing compatible: every merged combination is kept (and will fail later).
    let mut z3 = wffc("z3", "d");
    z3.allowed_topologies = vec![TopologySelectorTerm::zones(["z3"])];
    c.add_storage_class(z3);
    c.add_claim(unbound("z3", Some("z3")));
    let alts = c.topology_alternatives(&pod_with(&["b", "z3"])).unwrap();
    assert_eq!(alts.len(), 2);
    assert!(alts.iter().all(|r| zones_of(r).is_empty()));

    // No constraining volume: no alternatives at all.
    c.add_volume(PersistentVolume::csi("free", "d"));
    c.add_claim(PersistentVolumeClaim::bound("ns", "free", "free"));
    assert!(
        c.topology_alternatives(&pod_with(&["free"]))
            .unwrap()
            .is_empty()
    );
    assert!(
        c.topology_alternatives(&Pod::new("ns", "p"))
            .unwrap()
            .is_empty()
    );
}

#[test]
fn ephemeral_volumes_of_bound_pods_do_not_constrain() {
    let mut c = VolumeCatalog::default();
    let mut class = wffc("wffc", "d");
    class.allowed_topologies = vec![TopologySelectorTerm::zones(["z1"])];
    c.add_storage_class(class);
    c.add_claim(unbound("p-e", Some("wffc")));
    let mut pod = Pod::new("ns", "p");
    pod.volumes.push(PodVolume::ephemeral("e", None));
    assert_eq!(c.topology_alternatives(&pod).unwrap().len(), 1);
    pod.node_name = Some("node".into());
    assert!(c.topology_alternatives(&pod).unwrap().is_empty());
}

#[test]
fn pod_volumes_serialise_like_kubernetes() {
    let v: Vec<PodVolume> = serde_json::from_value(serde_json::json!([
        {"name": "data", "persistentVolumeClaim": {"claimName": "c"}},
        {"name": "scratch", "ephemeral": {"storageClassName": "gp3"}},
        {"name": "tmp", "other": "emptyDir"},
    ]))
    .unwrap();
    assert_eq!(
        v,
        [
            PodVolume::claim("data", "c"),
            PodVolume::ephemeral("scratch", Some("gp3")),
            PodVolume {
                name: "tmp".into(),
                source: VolumeSource::Other("emptyDir".into())
            },
        ]
    );
    let back = serde_json::to_value(&v[0]).unwrap();
    assert_eq!(
        back,
        serde_json::json!({"name": "data", "persistentVolumeClaim": {"claimName": "c"}})
    );
}

const ZONES: [&str; 4] = ["a", "b", "c", "d"];

fn zone_set() -> impl Strategy<Value = Vec<&'static str>> {
    proptest::sample::subsequence(ZONES.to_vec(), 1..=ZONES.len())
}

proptest! {
    /// A zone is allowed by some alternative exactly when every volume allows it through
    /// one of its terms: the alternatives are the disjunctive form of the volumes' ANDed
    /// ORs, and pruning loses nothing.
    #[test]
    fn alternatives_are_the_and_of_ors(
        volumes in proptest::collection::vec(proptest::collection::vec(zone_set(), 1..4), 1..4)
    ) {
        let mut c = VolumeCatalog::default();
        let mut claims = Vec::new();
        for (i, terms) in volumes.iter().enumerate() {
            let mut class = wffc(&format!("c{i}"), "d");
            class.allowed_topologies =
                terms.iter().map(|t| TopologySelectorTerm::zones(t.iter().copied())).collect();
            c.add_storage_class(class);
            c.add_claim(unbound(&format!("v{i}"), Some(&format!("c{i}"))));
            claims.push(format!("v{i}"));
        }
        let names: Vec<&str> = claims.iter().map(String::as_str).collect();
        let alts = c.topology_alternatives(&pod_with(&names)).unwrap();
        prop_assert!(!alts.is_empty());
        for zone in ZONES {
            let by_alternatives = alts.iter().any(|r| zones_of(r).iter().any(|z| z == zone));
            let by_volumes = volumes.iter().all(|terms| terms.iter().any(|t| t.contains(&zone)));
            prop_assert_eq!(by_alternatives, by_volumes, "zone {}", zone);
        }
    }
}

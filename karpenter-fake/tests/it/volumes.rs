//! Upstream `suite_test.go` "VolumeUsage" (with "CSIMigration") and 7.2 "Topology with Volume
//! Requirements": volume topology and per-node volume limits (upstream `volumetopology.go` /
//! `volumeusage.go`).

use std::sync::Arc;

use karpenter_core::labels;
use karpenter_core::model::{
    InstanceType, LabelSelector, NodeSelectorTerm, Pod, PodAffinity, PodAffinityTerm,
    TopologySpreadConstraint, WhenUnsatisfiable,
};
use karpenter_core::requirements::{NodeSelectorRequirement, Operator};
use karpenter_core::resources::{Quantity, ResourceList, names};
use karpenter_core::scheduling::PodErrorKind;
use karpenter_core::volumes::{
    AWS_EBS_CSI_DRIVER, ClaimPhase, PersistentVolume, PersistentVolumeClaim,
    PersistentVolumeSource, PodVolume, StorageClass, TopologySelectorLabelRequirement,
    TopologySelectorTerm, VolumeBindingMode,
};
use karpenter_fake::catalog::{self, InstanceTypeOptions, SPECIAL_LABEL, ZONE_1, ZONE_2};
use karpenter_fake::harness::{Cluster, node_pool};

/// Upstream's `csiProvider`.
const CSI_PROVIDER: &str = "fake.csi.provider";
/// Upstream `test.PersistentVolume`'s default CSI driver.
const TEST_DRIVER: &str = "test.driver";
/// Upstream `test.StorageClass`'s default provisioner.
const TEST_PROVISIONER: &str = "test-provisioner";
/// `plugins.AWSEBSInTreePluginName`.
const AWS_EBS_IN_TREE: &str = "kubernetes.io/aws-ebs";
const NS: &str = "default";

fn key(name: &str) -> String {
    format!("{NS}/{name}")
}

/// The suite's default pool (`capacity-type In [spot, on-demand, reserved]`) over `types`,
/// without limits (VolumeUsage's BeforeEach clears them).
fn suite_cluster(types: Vec<Arc<InstanceType>>) -> Cluster {
    let mut pool = node_pool("default", types);
    pool.requirements = vec![NodeSelectorRequirement::new(
        labels::CAPACITY_TYPE,
        Operator::In,
        ["spot", "on-demand", "reserved"],
    )];
    Cluster::new().with_node_pool(pool)
}

/// VolumeUsage's catalog: one type with 1024 cpu and 1024 pods.
fn volume_usage_cluster() -> Cluster {
    let mut resources = ResourceList::new();
    resources.insert(names::CPU, Quantity::from_units(1024));
    resources.insert(names::PODS, Quantity::from_units(1024));
    let it = catalog::new_instance_type(
        "instance-type",
        InstanceTypeOptions::with_resources(resources),
    );
    suite_cluster(vec![Arc::new(it)])
}

fn pod(name: &str) -> Pod {
    Pod::new(NS, name)
}

/// A pod mounting the claims, one volume each (upstream `PodOptions.PersistentVolumeClaims`).
fn pod_with_claims(name: &str, claims: &[&str]) -> Pod {
    let mut p = pod(name);
    for (i, c) in claims.iter().enumerate() {
        p.volumes.push(PodVolume::claim(format!("vol-{i}"), *c));
    }
    p
}

/// A pod with the generic ephemeral volume `tmp-ephemeral` (its claim is `<pod>-tmp-ephemeral`).
fn pod_with_ephemeral(name: &str, class: Option<&str>) -> Pod {
    let mut p = pod(name);
    p.volumes.push(PodVolume::ephemeral("tmp-ephemeral", class));
    p
}

fn ephemeral_claim_name(pod: &str) -> String {
    format!("{pod}-tmp-ephemeral")
}

/// Upstream `test.StorageClass`: `provisioner` (default `test-provisioner`), the binding mode
/// (unset → the API default, Immediate), allowed topology from `zones` as one term.
fn storage_class(
    name: &str,
    provisioner: Option<&str>,
    mode: Option<VolumeBindingMode>,
    zones: &[&str],
) -> StorageClass {
    let mut c = StorageClass::new(name, provisioner.unwrap_or(TEST_PROVISIONER));
    c.volume_binding_mode = mode.unwrap_or_default();
    if !zones.is_empty() {
        c.allowed_topologies = vec![TopologySelectorTerm::zones(zones.iter().copied())];
    }
    c
}

fn wffc() -> Option<VolumeBindingMode> {
    Some(VolumeBindingMode::WaitForFirstConsumer)
}

fn default_class(mut c: StorageClass) -> StorageClass {
    c.is_default = true;
    c
}

/// Upstream `test.PersistentVolumeClaim`: unbound unless `volume` is given (then the
/// bind-completed annotation is set; the phase stays Pending as in envtest).
fn claim(name: &str, class: Option<&str>, volume: Option<&str>) -> PersistentVolumeClaim {
    let mut c = PersistentVolumeClaim::new(NS, name);
    c.storage_class_name = class.map(str::to_string);
    if let Some(v) = volume {
        c.volume_name = Some(v.to_string());
        c.bind_completed = true;
    }
    c
}

fn zone_terms(zones: &[&str]) -> Vec<NodeSelectorTerm> {
    vec![NodeSelectorTerm {
        match_expressions: vec![NodeSelectorRequirement::new(
            labels::ZONE,
            Operator::In,
            zones.iter().copied(),
        )],
    }]
}

/// Upstream `test.PersistentVolume`: a CSI volume of `test.driver` unless another source is
/// given, with one zone term from `zones`.
fn persistent_volume(name: &str, zones: &[&str]) -> PersistentVolume {
    let mut pv = PersistentVolume::csi(name, TEST_DRIVER);
    if !zones.is_empty() {
        pv.node_affinity = zone_terms(zones);
    }
    pv
}

fn zone_of(c: &Cluster, pod: &str) -> String {
    c.node_of(&key(pod))
        .and_then(|n| n.labels.get(labels::ZONE))
        .cloned()
        .unwrap_or_default()
}

/// Provisions an unconstrained pod and returns the name of its node.
fn initial_node(c: &mut Cluster, pod: Pod) -> String {
    let name = pod.key();
    let round = c.provision(vec![pod]);
    round
        .node_of(&name)
        .map(|n| n.name.clone())
        .expect("initial pod scheduled")
}

mod volume_usage {
    use super::*;

    #[test]
    fn should_launch_multiple_nodes_if_required_due_to_volume_limits() {
        let mut c = volume_usage_cluster();
        let node = initial_node(&mut c, pod("initial"));
        c.set_volume_limit(&node, CSI_PROVIDER, 10);
        c.volumes.add_storage_class(storage_class(
            "my-storage-class",
            Some(CSI_PROVIDER),
            wffc(),
            &[ZONE_1],
        ));
        let mut pods = Vec::new();
        for i in 0..6 {
            let (a, b) = (format!("my-claim-a-{i}"), format!("my-claim-b-{i}"));
            c.volumes
                .add_claim(claim(&a, Some("my-storage-class"), None));
            c.volumes
                .add_claim(claim(&b, Some("my-storage-class"), None));
            pods.push(pod_with_claims(&format!("p{i}"), &[&a, &b]));
        }
        let round = c.provision(pods);
        assert_eq!(round.bindings.len(), 6, "{:?}", round.results.pod_errors);
        // The existing node takes five pods (ten volumes); the sixth needs a new node.
        assert_eq!(c.pods_on(&node).len(), 6);
        assert_eq!(c.node_count(), 2);
    }

    #[test]
    fn should_launch_a_single_node_if_all_pods_use_the_same_pvc() {
        let mut c = volume_usage_cluster();
        let node = initial_node(&mut c, pod("initial"));
        c.set_volume_limit(&node, CSI_PROVIDER, 10);
        c.volumes.add_storage_class(storage_class(
            "my-storage-class",
            Some(CSI_PROVIDER),
            None,
            &[ZONE_1],
        ));
        c.volumes
            .add_volume(persistent_volume("my-volume", &[ZONE_1]));
        c.volumes.add_claim(claim(
            "my-claim",
            Some("my-storage-class"),
            Some("my-volume"),
        ));
        let pods = (0..100)
            .map(|i| pod_with_claims(&format!("p{i}"), &["my-claim"]))
            .collect();
        let round = c.provision(pods);
        assert_eq!(round.bindings.len(), 100);
        assert_eq!(c.node_count(), 1);
    }

    #[test]
    fn should_not_fail_for_nfs_volumes() {
        let mut c = volume_usage_cluster();
        initial_node(&mut c, pod("initial"));
        let mut pv =
            PersistentVolume::new("my-volume", PersistentVolumeSource::Other("nfs".into()));
        pv.node_affinity = zone_terms(&[ZONE_1]);
        c.volumes.add_volume(pv);
        c.volumes
            .add_claim(claim("my-claim", Some(""), Some("my-volume")));
        let pods = (0..5)
            .map(|i| pod_with_claims(&format!("p{i}"), &["my-claim", "my-claim"]))
            .collect();
        let round = c.provision(pods);
        assert_eq!(round.bindings.len(), 5, "{:?}", round.results.pod_errors);
        assert_eq!(c.node_count(), 1);
    }

    /// Two pods with zone anti-affinity, each mounting its own claim.
    fn anti_affine_pods(prefix: &str, app: &str, claims: [&str; 2]) -> Vec<Pod> {
        claims
            .iter()
            .enumerate()
            .map(|(i, claim)| {
                let mut p = pod_with_claims(&format!("{prefix}-{i}"), &[claim]);
                p.labels.insert("app".into(), app.into());
                p.pod_anti_affinity = Some(PodAffinity {
                    required: vec![PodAffinityTerm::new(
                        LabelSelector::from_labels([("app", app)]),
                        labels::ZONE,
                    )],
                    preferred: vec![],
                });
                p
            })
            .collect()
    }

    #[test]
    fn should_schedule_pods_using_a_pv_with_multiple_zones() {
        let mut c = volume_usage_cluster();
        for i in 0..2 {
            let mut pv = persistent_volume(&format!("multi-zone-pv-{i}"), &[]);
            pv.node_affinity = [ZONE_1, ZONE_2]
                .iter()
                .flat_map(|z| zone_terms(&[z]))
                .collect();
            c.volumes.add_volume(pv);
            c.volumes.add_claim(claim(
                &format!("multi-zone-pvc-{i}"),
                None,
                Some(&format!("multi-zone-pv-{i}")),
            ));
        }
        let pods = anti_affine_pods(
            "pod",
            "multi-zone-app",
            ["multi-zone-pvc-0", "multi-zone-pvc-1"],
        );
        c.provision(pods);
        let (z0, z1) = (zone_of(&c, "pod-0"), zone_of(&c, "pod-1"));
        assert!([ZONE_1, ZONE_2].contains(&z0.as_str()), "{z0}");
        assert!([ZONE_1, ZONE_2].contains(&z1.as_str()), "{z1}");
        assert_ne!(z0, z1);
    }

    /// A PV whose terms are `hostname=existing-host` OR `zone=invalid-zone`.
    fn hostname_or_zone_pv(source: PersistentVolumeSource) {
        let mut c = volume_usage_cluster();
        let mut pv = PersistentVolume::new("hostname-or-zone-pv", source);
        pv.node_affinity = vec![
            NodeSelectorTerm {
                match_expressions: vec![NodeSelectorRequirement::new(
                    labels::HOSTNAME,
                    Operator::In,
                    ["existing-host"],
                )],
            },
            NodeSelectorTerm {
                match_expressions: vec![NodeSelectorRequirement::new(
                    labels::ZONE,
                    Operator::In,
                    ["invalid-zone"],
                )],
            },
        ];
        c.volumes.add_volume(pv);
        c.volumes.add_claim(claim(
            "hostname-or-zone-pvc",
            None,
            Some("hostname-or-zone-pv"),
        ));
        let round = c.provision(vec![pod_with_claims(
            "hostname-or-zone-pod",
            &["hostname-or-zone-pvc"],
        )]);
        assert!(
            round.scheduled(&key("hostname-or-zone-pod")),
            "{:?}",
            round.results.pod_errors
        );
    }

    #[test]
    fn should_preserve_unconstrained_pv_alternatives_after_ignoring_hostname_affinity_for_local_volumes()
     {
        hostname_or_zone_pv(PersistentVolumeSource::Local);
    }

    #[test]
    fn should_preserve_unconstrained_pv_alternatives_after_ignoring_hostname_affinity_for_hostpath_volumes()
     {
        hostname_or_zone_pv(PersistentVolumeSource::HostPath);
    }

    #[test]
    fn should_schedule_pods_using_a_storageclass_with_multiple_zones_in_allowedtopologies() {
        let mut c = volume_usage_cluster();
        let mut sc = storage_class("multi-zone-sc", None, wffc(), &[]);
        sc.allowed_topologies = vec![
            TopologySelectorTerm::zones([ZONE_1]),
            TopologySelectorTerm::zones([ZONE_2]),
        ];
        c.volumes.add_storage_class(sc);
        for i in 0..2 {
            c.volumes.add_claim(claim(
                &format!("multi-zone-pvc-{i}"),
                Some("multi-zone-sc"),
                None,
            ));
        }
        let pods = anti_affine_pods(
            "sc-pod",
            "multi-zone-sc-app",
            ["multi-zone-pvc-0", "multi-zone-pvc-1"],
        );
        c.provision(pods);
        let (z0, z1) = (zone_of(&c, "sc-pod-0"), zone_of(&c, "sc-pod-1"));
        assert!([ZONE_1, ZONE_2].contains(&z0.as_str()), "{z0}");
        assert!([ZONE_1, ZONE_2].contains(&z1.as_str()), "{z1}");
        assert_ne!(z0, z1);
    }

    #[test]
    fn should_schedule_pods_when_a_valid_multi_volume_topology_alternative_remains_after_pruning() {
        let mut c = suite_cluster(catalog::instance_types(5));
        let term = |pairs: &[(&str, &str)]| TopologySelectorTerm {
            match_label_expressions: pairs
                .iter()
                .map(|(k, v)| TopologySelectorLabelRequirement {
                    key: k.to_string(),
                    values: vec![v.to_string()],
                })
                .collect(),
        };
        let mut a = storage_class("pruned-overlap-a", None, wffc(), &[]);
        a.allowed_topologies = vec![
            term(&[(SPECIAL_LABEL, "required")]),
            term(&[(SPECIAL_LABEL, "optional")]),
        ];
        let mut b = storage_class("pruned-overlap-b", None, wffc(), &[]);
        b.allowed_topologies = vec![
            term(&[(labels::ZONE, ZONE_1), (SPECIAL_LABEL, "optional")]),
            term(&[(labels::ZONE, ZONE_2), (SPECIAL_LABEL, "required")]),
        ];
        c.volumes.add_storage_class(a);
        c.volumes.add_storage_class(b);
        c.volumes.add_claim(claim(
            "pruned-overlap-pvc-a",
            Some("pruned-overlap-a"),
            None,
        ));
        c.volumes.add_claim(claim(
            "pruned-overlap-pvc-b",
            Some("pruned-overlap-b"),
            None,
        ));
        let round = c.provision(vec![pod_with_claims(
            "pruned-overlap-pod",
            &["pruned-overlap-pvc-a", "pruned-overlap-pvc-b"],
        )]);
        let node = round
            .node_of(&key("pruned-overlap-pod"))
            .unwrap_or_else(|| panic!("{:?}", round.results.pod_errors));
        assert_eq!(node.labels[labels::ZONE], ZONE_1);
        assert_eq!(node.labels[SPECIAL_LABEL], "optional");
    }

    /// Round 1: `initial` with an ephemeral volume; the node then gets `limit` for
    /// `CSI_PROVIDER` (and 10 for `other-provider`). Round 2: `second`, also with an ephemeral
    /// volume. Returns (first node, second pod's node).
    fn ephemeral_rounds(
        c: &mut Cluster,
        class: Option<&str>,
        claim_class: Option<&str>,
    ) -> (String, String) {
        let initial = pod_with_ephemeral("initial", class);
        c.volumes
            .add_claim(claim(&ephemeral_claim_name("initial"), claim_class, None));
        let node = initial_node(c, initial);
        c.set_volume_limit(&node, CSI_PROVIDER, 1);
        c.set_volume_limit(&node, "other-provider", 10);
        let second = pod_with_ephemeral("second", class);
        c.volumes
            .add_claim(claim(&ephemeral_claim_name("second"), claim_class, None));
        let round = c.provision(vec![second]);
        let node2 = round
            .node_of(&key("second"))
            .map(|n| n.name.clone())
            .unwrap_or_else(|| panic!("{:?}", round.results.pod_errors));
        (node, node2)
    }

    #[test]
    fn should_launch_nodes_for_pods_with_ephemeral_volume_using_the_specified_storage_class_name() {
        let mut c = volume_usage_cluster();
        c.volumes.add_storage_class(storage_class(
            "my-storage-class",
            Some(CSI_PROVIDER),
            wffc(),
            &[ZONE_1],
        ));
        // Another default class that must not be used and has no limit.
        c.volumes.add_storage_class(default_class(storage_class(
            "default-storage-class",
            Some("other-provider"),
            wffc(),
            &[ZONE_1],
        )));
        let (node, node2) =
            ephemeral_rounds(&mut c, Some("my-storage-class"), Some("my-storage-class"));
        assert_ne!(node, node2);
    }

    #[test]
    fn should_launch_nodes_for_pods_with_ephemeral_volume_using_a_default_storage_class() {
        let mut c = volume_usage_cluster();
        c.volumes.add_storage_class(default_class(storage_class(
            "default-storage-class",
            Some(CSI_PROVIDER),
            wffc(),
            &[ZONE_1],
        )));
        // Neither the template nor the claim names a class: the default one applies.
        let (node, node2) = ephemeral_rounds(&mut c, None, None);
        assert_ne!(node, node2);
    }

    #[test]
    fn should_launch_nodes_for_pods_with_ephemeral_volume_using_the_newest_storage_class() {
        let mut c = volume_usage_cluster();
        c.volumes.add_storage_class(default_class(storage_class(
            "default-storage-class",
            Some("other-provider"),
            wffc(),
            &[ZONE_1],
        )));
        let mut newer = default_class(storage_class(
            "newer-default-storage-class",
            Some(CSI_PROVIDER),
            wffc(),
            &[ZONE_1],
        ));
        newer.creation_timestamp = karpenter_core::model::Timestamp::from_second(2).expect("valid");
        c.volumes.add_storage_class(newer);
        let (node, node2) = ephemeral_rounds(&mut c, None, None);
        assert_ne!(node, node2);
    }

    /// The pod's error after a round in which it was not scheduled.
    fn not_scheduled(c: &mut Cluster, pod: Pod) -> karpenter_core::scheduling::PodError {
        let name = pod.key();
        let round = c.provision(vec![pod]);
        assert!(!round.scheduled(&name));
        assert_eq!(c.node_count(), 0);
        round.results.pod_errors[&name].clone()
    }

    #[test]
    fn should_not_launch_nodes_for_pod_with_storageclass_that_uses_an_unsupported_provisioner() {
        let mut c = volume_usage_cluster();
        c.volumes
            .unsupported_provisioners
            .insert("other-provider".into());
        // As upstream, the class has no binding mode (the API default, Immediate).
        c.volumes.add_storage_class(default_class(storage_class(
            "default-storage-class",
            Some("other-provider"),
            None,
            &[ZONE_1],
        )));
        let p = pod_with_ephemeral("p", None);
        c.volumes.add_claim(claim(
            &ephemeral_claim_name("p"),
            Some("default-storage-class"),
            None,
        ));
        let err = not_scheduled(&mut c, p.clone());
        assert_eq!(err.kind, PodErrorKind::Invalid);

        // With a binding mode that would otherwise be fine, the provisioner is what fails.
        c.volumes.add_storage_class(default_class(storage_class(
            "default-storage-class",
            Some("other-provider"),
            wffc(),
            &[ZONE_1],
        )));
        let err = not_scheduled(&mut c, p);
        assert!(
            err.message
                .contains("provisioner \"other-provider\" is not supported"),
            "{}",
            err.message
        );
    }

    #[test]
    fn should_not_launch_nodes_for_pod_with_bound_persistentvolume_that_uses_an_unsupported_provisioner()
     {
        let mut c = volume_usage_cluster();
        c.volumes
            .unsupported_provisioners
            .insert("other-provider".into());
        c.volumes
            .add_volume(PersistentVolume::csi("pv", "other-provider"));
        c.volumes
            .add_claim(claim(&ephemeral_claim_name("p"), None, Some("pv")));
        let err = not_scheduled(&mut c, pod_with_ephemeral("p", None));
        assert!(err.message.contains("is not supported"), "{}", err.message);
    }

    #[test]
    fn should_not_launch_nodes_for_pod_with_storageclass_that_uses_an_unsupported_topology_key() {
        let mut c = volume_usage_cluster();
        c.volumes
            .unsupported_topology_keys
            .insert("topology.ebs.csi.aws.com/zone".into());
        let mut sc = storage_class(
            "default-storage-class",
            Some("ebs.csi.eks.amazonaws.com"),
            wffc(),
            &[],
        );
        sc.allowed_topologies = vec![TopologySelectorTerm {
            match_label_expressions: vec![TopologySelectorLabelRequirement {
                key: "topology.ebs.csi.aws.com/zone".into(),
                values: vec!["us-west-2a".into(), "us-west-2b".into()],
            }],
        }];
        c.volumes.add_storage_class(sc);
        c.volumes
            .add_claim(claim("tmp-ephemeral", Some("default-storage-class"), None));
        let err = not_scheduled(&mut c, pod_with_claims("p", &["tmp-ephemeral"]));
        assert!(
            err.message.contains("unsupported topology key"),
            "{}",
            err.message
        );
    }

    /// A class `default-storage-class` of `other-provider` binding as `mode`, and an unbound
    /// claim `tmp-ephemeral` of it.
    fn other_provider_claim(
        c: &mut Cluster,
        mode: VolumeBindingMode,
    ) -> &mut PersistentVolumeClaim {
        c.volumes.add_storage_class(storage_class(
            "default-storage-class",
            Some("other-provider"),
            Some(mode),
            &[ZONE_1],
        ));
        c.volumes
            .add_claim(claim("tmp-ephemeral", Some("default-storage-class"), None));
        c.volumes
            .claim_mut(NS, "tmp-ephemeral")
            .expect("just added")
    }

    #[test]
    fn should_not_launch_nodes_for_pod_with_unbound_volume_for_volumebindingmode_immediate() {
        let mut c = volume_usage_cluster();
        other_provider_claim(&mut c, VolumeBindingMode::Immediate);
        let err = not_scheduled(&mut c, pod_with_claims("p", &["tmp-ephemeral"]));
        assert!(
            err.message.contains("volumeBindingMode Immediate"),
            "{}",
            err.message
        );
    }

    #[test]
    fn should_not_launch_nodes_for_pod_with_deleting_persistentvolumeclaim() {
        let mut c = volume_usage_cluster();
        other_provider_claim(&mut c, VolumeBindingMode::WaitForFirstConsumer).deleting = true;
        let err = not_scheduled(&mut c, pod_with_claims("p", &["tmp-ephemeral"]));
        assert!(err.message.contains("is being deleted"), "{}", err.message);
    }

    #[test]
    fn should_not_launch_nodes_for_pod_with_bound_persistentvolume_that_is_marked_for_deletion() {
        let mut c = volume_usage_cluster();
        let mut pv = PersistentVolume::csi("pv", "other-provider");
        pv.deleting = true;
        c.volumes.add_volume(pv);
        c.volumes
            .add_claim(claim(&ephemeral_claim_name("p"), None, Some("pv")));
        let err = not_scheduled(&mut c, pod_with_ephemeral("p", None));
        assert!(
            err.message.contains("persistentvolume pv is being deleted"),
            "{}",
            err.message
        );
    }

    #[test]
    fn should_not_launch_nodes_for_pod_with_lost_persistentvolumeclaim() {
        let mut c = volume_usage_cluster();
        other_provider_claim(&mut c, VolumeBindingMode::WaitForFirstConsumer).phase =
            ClaimPhase::Lost;
        let err = not_scheduled(&mut c, pod_with_claims("p", &["tmp-ephemeral"]));
        assert!(err.message.contains("Lost"), "{}", err.message);
    }

    /// A claim naming a CSI volume of `other-provider`, with or without the bind-completed
    /// annotation.
    fn claim_with_volume_name(bind_completed: bool) -> (Cluster, Pod) {
        let mut c = volume_usage_cluster();
        other_provider_claim(&mut c, VolumeBindingMode::WaitForFirstConsumer);
        c.volumes
            .add_volume(PersistentVolume::csi("pv", "other-provider"));
        let mut cl = claim("tmp-ephemeral", Some("default-storage-class"), Some("pv"));
        cl.bind_completed = bind_completed;
        c.volumes.add_claim(cl);
        (c, pod_with_claims("p", &["tmp-ephemeral"]))
    }

    #[test]
    fn should_handle_pods_with_pvcs_with_defined_volumename_when_bind_completed_is_missing() {
        let (mut c, p) = claim_with_volume_name(false);
        let err = not_scheduled(&mut c, p);
        assert!(
            err.message.contains("pv.kubernetes.io/bind-completed"),
            "{}",
            err.message
        );
    }

    #[test]
    fn should_handle_pods_with_pvcs_with_defined_volumename_when_bind_completed_is_present() {
        let (mut c, p) = claim_with_volume_name(true);
        let round = c.provision(vec![p]);
        assert!(round.scheduled(&key("p")), "{:?}", round.results.pod_errors);
    }

    /// The ephemeral claim is bound to `test-pv`; the template and claim name `class`.
    fn bound_ephemeral_without_class(class: &str) {
        let mut c = volume_usage_cluster();
        c.volumes.add_claim(claim(
            &ephemeral_claim_name("p"),
            Some(class),
            Some("test-pv"),
        ));
        c.volumes.add_volume(persistent_volume("test-pv", &[]));
        c.provision(vec![pod_with_ephemeral("p", Some(class))]);
        assert_eq!(c.node_count(), 1);
    }

    #[test]
    fn should_launch_nodes_for_pods_with_ephemeral_volume_without_a_storage_class_when_the_pvc_is_bound_non_existent_storage_class()
     {
        bound_ephemeral_without_class("non-existent");
    }

    #[test]
    fn should_launch_nodes_for_pods_with_ephemeral_volume_without_a_storage_class_when_the_pvc_is_bound_explicitly_disabled_storage_class()
     {
        bound_ephemeral_without_class("");
    }

    /// The ephemeral volume's claim was never created.
    fn unbound_ephemeral_without_class(class: &str) {
        let mut c = volume_usage_cluster();
        let err = not_scheduled(&mut c, pod_with_ephemeral("p", Some(class)));
        assert!(err.message.contains("not found"), "{}", err.message);
    }

    #[test]
    fn should_not_launch_nodes_for_pods_with_ephemeral_volume_without_a_storage_class_when_the_pvc_is_unbound_non_existent_storage_class()
     {
        unbound_ephemeral_without_class("non-existent");
    }

    #[test]
    fn should_not_launch_nodes_for_pods_with_ephemeral_volume_without_a_storage_class_when_the_pvc_is_unbound_explicitly_disabled_storage_class()
     {
        unbound_ephemeral_without_class("");
    }

    mod csi_migration {
        use super::*;

        /// The default in-tree EBS class.
        fn in_tree_cluster() -> Cluster {
            let mut c = volume_usage_cluster();
            c.volumes.add_storage_class(default_class(storage_class(
                "in-tree-storage-class",
                Some(AWS_EBS_IN_TREE),
                wffc(),
                &[ZONE_1],
            )));
            c
        }

        #[test]
        fn should_launch_nodes_for_pods_with_non_dynamic_pvc_using_a_migrated_pvc_pv() {
            let mut c = in_tree_cluster();
            c.volumes
                .add_claim(claim("pvc-1", Some("in-tree-storage-class"), None));
            let node = initial_node(&mut c, pod_with_claims("initial", &["pvc-1"]));
            c.set_volume_limit(&node, AWS_EBS_CSI_DRIVER, 1);
            let mut pv =
                PersistentVolume::new("my-volume", PersistentVolumeSource::AwsElasticBlockStore);
            pv.node_affinity = zone_terms(&[ZONE_1]);
            c.volumes.add_volume(pv);

            c.volumes
                .add_claim(claim("pvc-2", Some("in-tree-storage-class"), None));
            let round = c.provision(vec![pod_with_claims("second", &["pvc-2"])]);
            let node2 = round
                .node_of(&key("second"))
                .unwrap_or_else(|| panic!("{:?}", round.results.pod_errors));
            assert_ne!(node, node2.name);
        }

        #[test]
        fn should_launch_nodes_for_pods_with_ephemeral_volume_using_a_migrated_pvc_pv() {
            let mut c = in_tree_cluster();
            let initial = pod_with_ephemeral("initial", Some("in-tree-storage-class"));
            // The claims are created without a class: the default (in-tree) one applies.
            c.volumes
                .add_claim(claim(&ephemeral_claim_name("initial"), None, None));
            let node = initial_node(&mut c, initial);
            c.set_volume_limit(&node, AWS_EBS_CSI_DRIVER, 1);

            c.volumes
                .add_claim(claim(&ephemeral_claim_name("second"), None, None));
            let round = c.provision(vec![pod_with_ephemeral(
                "second",
                Some("in-tree-storage-class"),
            )]);
            let node2 = round
                .node_of(&key("second"))
                .unwrap_or_else(|| panic!("{:?}", round.results.pod_errors));
            assert_ne!(node, node2.name);
        }
    }
}

mod topology_with_volume_requirements {
    use super::*;

    #[test]
    fn should_schedule_pod_with_pvc_and_tsc_min_domains_3_when_pods_are_spread_across_3_zones() {
        let mut pool = node_pool("default", catalog::default_catalog());
        pool.requirements = vec![NodeSelectorRequirement::new(
            labels::CAPACITY_TYPE,
            Operator::In,
            ["on-demand"],
        )];
        let mut c = Cluster::new().with_node_pool(pool);
        c.volumes
            .add_volume(persistent_volume("test-pv", &[ZONE_1]));
        c.volumes
            .add_claim(claim("test-pvc", None, Some("test-pv")));

        let selector = LabelSelector::from_labels([("app", "test")]);
        let tsc = TopologySpreadConstraint::new(1, labels::ZONE, WhenUnsatisfiable::DoNotSchedule)
            .with_label_selector(selector.clone())
            .with_min_domains(3);
        let spread_pod = |name: &str| {
            let mut p = pod(name);
            p.labels.insert("app".into(), "test".into());
            p.topology_spread_constraints = vec![tsc.clone()];
            p
        };
        let initial: Vec<Pod> = (0..3)
            .map(|i| spread_pod(&format!("initial-{i}")))
            .collect();
        let round = c.provision(initial);
        assert_eq!(round.bindings.len(), 3, "{:?}", round.results.pod_errors);
        assert_eq!(c.skew(labels::ZONE, &selector), [1, 1, 1]);

        let mut with_pvc = spread_pod("with-pvc");
        with_pvc.volumes.push(PodVolume::claim("data", "test-pvc"));
        let round = c.provision(vec![with_pvc]);
        assert!(
            round.scheduled(&key("with-pvc")),
            "{:?}",
            round.results.pod_errors
        );
        // In zone-1, where the volume is; the volume's zone did not shrink the spread's domains.
        assert_eq!(zone_of(&c, "with-pvc"), ZONE_1);
        assert_eq!(c.skew(labels::ZONE, &selector), [1, 1, 2]);
    }
}

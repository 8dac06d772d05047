//! Storage objects: PersistentVolumeClaims, PersistentVolumes, StorageClasses and CSINodes into
//! [`crate::volumes`], and a pod's `spec.volumes`.

use k8s_openapi::api::core::v1 as core;
use k8s_openapi::api::storage::v1 as storage;

use crate::volumes::{
    BIND_COMPLETED_ANNOTATION, ClaimPhase, CsiNodeLimits, DEFAULT_STORAGE_CLASS_ANNOTATION,
    PersistentVolume, PersistentVolumeClaim, PersistentVolumeSource, PodVolume, StorageClass,
    TopologySelectorLabelRequirement, TopologySelectorTerm, VolumeBindingMode, VolumeSource,
};

use super::{ConvertError, Ctx, namespace_of, node_selector_term, non_empty, time};

/// A pod's volumes: `persistentVolumeClaim` and `ephemeral` sources as such, any other source
/// as [`VolumeSource::Other`] with its field name.
pub(super) fn pod_volumes(spec: &core::PodSpec) -> Vec<PodVolume> {
    spec.volumes
        .iter()
        .flatten()
        .map(|v| {
            let source = if let Some(pvc) = &v.persistent_volume_claim {
                VolumeSource::PersistentVolumeClaim {
                    claim_name: pvc.claim_name.clone(),
                }
            } else if let Some(e) = &v.ephemeral {
                VolumeSource::Ephemeral {
                    storage_class_name: e
                        .volume_claim_template
                        .as_ref()
                        .and_then(|t| t.spec.storage_class_name.clone()),
                }
            } else {
                VolumeSource::Other(other_source_name(v))
            };
            PodVolume {
                name: v.name.clone(),
                source,
            }
        })
        .collect()
}

/// The field name of a volume's source (`emptyDir`, `configMap`, …).
fn other_source_name(v: &core::Volume) -> String {
    serde_json::to_value(v)
        .ok()
        .and_then(|value| {
            value
                .as_object()
                .and_then(|o| o.keys().find(|k| k.as_str() != "name").cloned())
        })
        .unwrap_or_else(|| "unknown".to_string())
}

/// Converts a PersistentVolumeClaim.
///
/// `metadata.namespace` defaults to `default`; `metadata.name` is required. The claim is
/// deleting when `metadata.deletionTimestamp` is set and bind-completed when it carries the
/// `pv.kubernetes.io/bind-completed` annotation. An unknown `status.phase` is an error.
///
/// ```
/// use k8s_openapi::api::core::v1::{PersistentVolumeClaim, PersistentVolumeClaimSpec};
/// use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
///
/// let claim = PersistentVolumeClaim {
///     metadata: ObjectMeta { name: Some("data".into()), ..Default::default() },
///     spec: Some(PersistentVolumeClaimSpec {
///         storage_class_name: Some("gp3".into()),
///         ..Default::default()
///     }),
///     ..Default::default()
/// };
/// let claim = karpenter_core::convert::pvc_from_k8s(&claim).unwrap();
/// assert_eq!(claim.key(), "default/data");
/// assert_eq!(claim.storage_class_name.as_deref(), Some("gp3"));
/// ```
pub fn pvc_from_k8s(
    pvc: &core::PersistentVolumeClaim,
) -> Result<PersistentVolumeClaim, ConvertError> {
    let meta = &pvc.metadata;
    let namespace = namespace_of(meta);
    let name = non_empty(meta.name.as_ref()).unwrap_or("");
    let ctx = Ctx {
        kind: "PersistentVolumeClaim",
        namespace: Some(namespace),
        name,
    };
    if name.is_empty() {
        return Err(ctx.missing("metadata.name"));
    }
    let spec = pvc.spec.as_ref();
    let phase = match non_empty(pvc.status.as_ref().and_then(|s| s.phase.as_ref())) {
        None | Some("Pending") => ClaimPhase::Pending,
        Some("Bound") => ClaimPhase::Bound,
        Some("Lost") => ClaimPhase::Lost,
        Some(other) => {
            return Err(ctx.invalid("status.phase", other, "expected Pending, Bound or Lost"));
        }
    };
    Ok(PersistentVolumeClaim {
        namespace: namespace.to_string(),
        name: name.to_string(),
        storage_class_name: spec.and_then(|s| s.storage_class_name.clone()),
        volume_name: spec
            .and_then(|s| non_empty(s.volume_name.as_ref()))
            .map(str::to_string),
        phase,
        deleting: time(meta.deletion_timestamp.as_ref()).is_some(),
        bind_completed: meta
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key(BIND_COMPLETED_ANNOTATION)),
    })
}

/// Converts a PersistentVolume. The source is `csi` (with its driver), `awsElasticBlockStore`,
/// `local`, `hostPath`, or any other source by its field name; the node affinity keeps each
/// required term's `matchExpressions` (`matchFields` are ignored, as upstream does).
pub fn pv_from_k8s(pv: &core::PersistentVolume) -> Result<PersistentVolume, ConvertError> {
    let meta = &pv.metadata;
    let name = non_empty(meta.name.as_ref()).unwrap_or("");
    let ctx = Ctx {
        kind: "PersistentVolume",
        namespace: None,
        name,
    };
    if name.is_empty() {
        return Err(ctx.missing("metadata.name"));
    }
    let empty = core::PersistentVolumeSpec::default();
    let spec = pv.spec.as_ref().unwrap_or(&empty);
    let source = if let Some(csi) = &spec.csi {
        if csi.driver.is_empty() {
            return Err(ctx.missing("spec.csi.driver"));
        }
        PersistentVolumeSource::Csi {
            driver: csi.driver.clone(),
        }
    } else if spec.aws_elastic_block_store.is_some() {
        PersistentVolumeSource::AwsElasticBlockStore
    } else if spec.local.is_some() {
        PersistentVolumeSource::Local
    } else if spec.host_path.is_some() {
        PersistentVolumeSource::HostPath
    } else {
        PersistentVolumeSource::Other(other_pv_source_name(spec))
    };
    let base = "spec.nodeAffinity.required.nodeSelectorTerms";
    let node_affinity = spec
        .node_affinity
        .as_ref()
        .and_then(|a| a.required.as_ref())
        .map(|r| r.node_selector_terms.as_slice())
        .unwrap_or_default()
        .iter()
        .enumerate()
        .map(|(i, t)| node_selector_term(&ctx, t, &format!("{base}[{i}]"), false))
        .collect::<Result<_, _>>()?;
    Ok(PersistentVolume {
        name: name.to_string(),
        source,
        node_affinity,
        deleting: time(meta.deletion_timestamp.as_ref()).is_some(),
    })
}

/// The field name of a PV's source among the spec's fields (`nfs`, `iscsi`, …).
fn other_pv_source_name(spec: &core::PersistentVolumeSpec) -> String {
    const NOT_SOURCES: [&str; 9] = [
        "accessModes",
        "capacity",
        "claimRef",
        "mountOptions",
        "nodeAffinity",
        "persistentVolumeReclaimPolicy",
        "storageClassName",
        "volumeAttributesClassName",
        "volumeMode",
    ];
    serde_json::to_value(spec)
        .ok()
        .and_then(|value| {
            value.as_object().and_then(|o| {
                o.keys()
                    .find(|k| !NOT_SOURCES.contains(&k.as_str()))
                    .cloned()
            })
        })
        .unwrap_or_else(|| "unknown".to_string())
}

/// Converts a StorageClass. `volumeBindingMode` defaults to `Immediate` (the API default); the
/// class is the default one when annotated `storageclass.kubernetes.io/is-default-class: "true"`.
pub fn storage_class_from_k8s(sc: &storage::StorageClass) -> Result<StorageClass, ConvertError> {
    let meta = &sc.metadata;
    let name = non_empty(meta.name.as_ref()).unwrap_or("");
    let ctx = Ctx {
        kind: "StorageClass",
        namespace: None,
        name,
    };
    if name.is_empty() {
        return Err(ctx.missing("metadata.name"));
    }
    if sc.provisioner.is_empty() {
        return Err(ctx.missing("provisioner"));
    }
    let volume_binding_mode = match non_empty(sc.volume_binding_mode.as_ref()) {
        None | Some("Immediate") => VolumeBindingMode::Immediate,
        Some("WaitForFirstConsumer") => VolumeBindingMode::WaitForFirstConsumer,
        Some(other) => {
            return Err(ctx.invalid(
                "volumeBindingMode",
                other,
                "expected Immediate or WaitForFirstConsumer",
            ));
        }
    };
    let allowed_topologies = sc
        .allowed_topologies
        .iter()
        .flatten()
        .map(|t| TopologySelectorTerm {
            match_label_expressions: t
                .match_label_expressions
                .iter()
                .flatten()
                .map(|e| TopologySelectorLabelRequirement {
                    key: e.key.clone(),
                    values: e.values.clone(),
                })
                .collect(),
        })
        .collect();
    Ok(StorageClass {
        name: name.to_string(),
        provisioner: sc.provisioner.clone(),
        allowed_topologies,
        volume_binding_mode,
        is_default: meta
            .annotations
            .as_ref()
            .and_then(|a| a.get(DEFAULT_STORAGE_CLASS_ANNOTATION))
            .is_some_and(|v| v == "true"),
        creation_timestamp: time(meta.creation_timestamp.as_ref())
            .unwrap_or(crate::model::Timestamp::UNIX_EPOCH),
    })
}

/// Converts a CSINode into its node's name and per-driver attach limits (drivers without
/// `allocatable.count` are unlimited and left out; negative counts are an error).
pub fn csi_node_limits_from_k8s(
    node: &storage::CSINode,
) -> Result<(String, CsiNodeLimits), ConvertError> {
    let name = non_empty(node.metadata.name.as_ref()).unwrap_or("");
    let ctx = Ctx {
        kind: "CSINode",
        namespace: None,
        name,
    };
    if name.is_empty() {
        return Err(ctx.missing("metadata.name"));
    }
    let mut limits = CsiNodeLimits::new();
    for (i, d) in node.spec.drivers.iter().enumerate() {
        if let Some(count) = d.allocatable.as_ref().and_then(|a| a.count) {
            let count = u32::try_from(count).map_err(|_| {
                ctx.invalid(
                    format!("spec.drivers[{i}].allocatable.count"),
                    count.to_string(),
                    "must not be negative",
                )
            })?;
            limits.insert(d.name.clone(), count);
        }
    }
    Ok((name.to_string(), limits))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::convert::pod_from_k8s;
    use crate::volumes::AWS_EBS_CSI_DRIVER;

    fn from<T: serde::de::DeserializeOwned>(v: serde_json::Value) -> T {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn pod_volumes_keep_claims_and_ephemeral_classes() {
        let pod: core::Pod = from(json!({
            "metadata": {"name": "p"},
            "spec": {"containers": [], "volumes": [
                {"name": "data", "persistentVolumeClaim": {"claimName": "c"}},
                {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {"storageClassName": "gp3"}}}},
                {"name": "tmp", "emptyDir": {}},
            ]},
        }));
        let pod = pod_from_k8s(&pod).unwrap();
        assert_eq!(
            pod.volumes,
            [
                PodVolume::claim("data", "c"),
                PodVolume::ephemeral("scratch", Some("gp3")),
                PodVolume {
                    name: "tmp".into(),
                    source: VolumeSource::Other("emptyDir".into())
                },
            ]
        );
    }

    #[test]
    fn claims() {
        let c = pvc_from_k8s(&from(json!({
            "metadata": {"name": "c", "namespace": "ns", "deletionTimestamp": "2024-01-01T00:00:00Z",
                         "annotations": {"pv.kubernetes.io/bind-completed": "yes"}},
            "spec": {"volumeName": "pv", "storageClassName": ""},
            "status": {"phase": "Lost"},
        })))
        .unwrap();
        assert_eq!(c.key(), "ns/c");
        assert_eq!(c.volume(), Some("pv"));
        assert_eq!(c.storage_class_name.as_deref(), Some(""));
        assert_eq!(c.phase, ClaimPhase::Lost);
        assert!(c.deleting && c.bind_completed);

        let c = pvc_from_k8s(&from(
            json!({"metadata": {"name": "c"}, "spec": {"volumeName": ""}}),
        ))
        .unwrap();
        assert_eq!(c.volume_name, None);
        assert_eq!(c.storage_class_name, None);
        assert!(!c.deleting && !c.bind_completed);
        assert_eq!(c.phase, ClaimPhase::Pending);

        let err = pvc_from_k8s(&from(
            json!({"metadata": {"name": "c"}, "status": {"phase": "Odd"}}),
        ))
        .unwrap_err();
        assert_eq!(err.field(), "status.phase");
        assert!(pvc_from_k8s(&from(json!({"metadata": {}}))).is_err());
    }

    #[test]
    fn volumes() {
        let pv = pv_from_k8s(&from(json!({
            "metadata": {"name": "pv"},
            "spec": {
                "csi": {"driver": "ebs.csi.aws.com", "volumeHandle": "vol-1"},
                "nodeAffinity": {"required": {"nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["a"]}]},
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n"]}]},
                ]}},
            },
        })))
        .unwrap();
        assert_eq!(pv.driver(), Some(AWS_EBS_CSI_DRIVER));
        assert_eq!(pv.node_affinity.len(), 2);
        assert!(pv.node_affinity[1].match_expressions.is_empty());

        let kinds = [
            (
                json!({"awsElasticBlockStore": {"volumeID": "v"}}),
                PersistentVolumeSource::AwsElasticBlockStore,
            ),
            (
                json!({"local": {"path": "/mnt"}}),
                PersistentVolumeSource::Local,
            ),
            (
                json!({"hostPath": {"path": "/mnt"}}),
                PersistentVolumeSource::HostPath,
            ),
            (
                json!({"capacity": {"storage": "1Gi"}, "nfs": {"server": "s", "path": "/"}, "storageClassName": "nfs"}),
                PersistentVolumeSource::Other("nfs".into()),
            ),
        ];
        for (spec, want) in kinds {
            let pv = pv_from_k8s(&from(json!({"metadata": {"name": "pv"}, "spec": spec}))).unwrap();
            assert_eq!(pv.source, want);
        }
        let err = pv_from_k8s(&from(json!({
            "metadata": {"name": "pv"},
            "spec": {"nodeAffinity": {"required": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": "k", "operator": "Near"}]},
            ]}}},
        })))
        .unwrap_err();
        assert_eq!(
            err.field(),
            "spec.nodeAffinity.required.nodeSelectorTerms[0].matchExpressions[0].operator"
        );
    }

    #[test]
    fn storage_classes_and_csi_nodes() {
        let sc = storage_class_from_k8s(&from(json!({
            "metadata": {"name": "gp3", "creationTimestamp": "2024-01-01T00:00:00Z",
                         "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
            "provisioner": "kubernetes.io/aws-ebs",
            "volumeBindingMode": "WaitForFirstConsumer",
            "allowedTopologies": [{"matchLabelExpressions": [{"key": "topology.kubernetes.io/zone", "values": ["a", "b"]}]}],
        })))
        .unwrap();
        assert!(sc.is_default);
        assert_eq!(
            sc.volume_binding_mode,
            VolumeBindingMode::WaitForFirstConsumer
        );
        assert_eq!(
            sc.allowed_topologies[0].match_label_expressions[0].values,
            ["a", "b"]
        );
        assert_ne!(sc.creation_timestamp, crate::model::Timestamp::UNIX_EPOCH);

        let sc = storage_class_from_k8s(&from(
            json!({"metadata": {"name": "s"}, "provisioner": "p"}),
        ))
        .unwrap();
        assert!(!sc.is_default);
        assert_eq!(sc.volume_binding_mode, VolumeBindingMode::Immediate);
        assert!(
            storage_class_from_k8s(&from(
                json!({"metadata": {"name": "s"}, "provisioner": "p", "volumeBindingMode": "Later"})
            ))
            .is_err()
        );

        let (node, limits) = csi_node_limits_from_k8s(&from(json!({
            "metadata": {"name": "n1"},
            "spec": {"drivers": [
                {"name": "ebs.csi.aws.com", "nodeID": "i-1", "allocatable": {"count": 25}},
                {"name": "efs.csi.aws.com", "nodeID": "i-1"},
            ]},
        })))
        .unwrap();
        assert_eq!(node, "n1");
        assert_eq!(
            limits.into_iter().collect::<Vec<_>>(),
            [("ebs.csi.aws.com".to_string(), 25)]
        );
        assert!(
            csi_node_limits_from_k8s(&from(json!({
                "metadata": {"name": "n1"},
                "spec": {"drivers": [{"name": "d", "nodeID": "i", "allocatable": {"count": -1}}]},
            })))
            .is_err()
        );
    }
}

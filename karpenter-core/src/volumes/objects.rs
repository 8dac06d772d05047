//! The storage objects: PersistentVolumeClaims, PersistentVolumes, StorageClasses and the
//! topology terms they carry.

use super::AWS_EBS_CSI_DRIVER;
use crate::labels;
use crate::model::{NodeSelectorTerm, Timestamp};
use crate::requirements::{Operator, Requirement, Requirements};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// `status.phase` of a PersistentVolumeClaim.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub enum ClaimPhase {
    /// Not bound yet.
    #[default]
    Pending,
    /// Bound to a volume.
    Bound,
    /// Bound to a volume that no longer exists.
    Lost,
}

/// A PersistentVolumeClaim.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PersistentVolumeClaim {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// `spec.storageClassName`: `None` when unset (the cluster's default class applies to an
    /// unbound claim), `Some("")` when dynamic provisioning is explicitly disabled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_class_name: Option<String>,
    /// `spec.volumeName`: the PersistentVolume it is bound to (empty means none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_name: Option<String>,
    /// `status.phase`.
    #[serde(default)]
    pub phase: ClaimPhase,
    /// Whether the claim is being deleted (`metadata.deletionTimestamp` set).
    #[serde(default)]
    pub deleting: bool,
    /// Whether it carries the [`BIND_COMPLETED_ANNOTATION`](super::BIND_COMPLETED_ANNOTATION).
    #[serde(default)]
    pub bind_completed: bool,
}

impl PersistentVolumeClaim {
    /// An unbound, pending claim without a storage class.
    pub fn new(namespace: impl Into<String>, name: impl Into<String>) -> PersistentVolumeClaim {
        PersistentVolumeClaim {
            namespace: namespace.into(),
            name: name.into(),
            storage_class_name: None,
            volume_name: None,
            phase: ClaimPhase::Pending,
            deleting: false,
            bind_completed: false,
        }
    }

    /// A claim bound to the volume `volume` (phase Bound, bind completed).
    pub fn bound(
        namespace: impl Into<String>,
        name: impl Into<String>,
        volume: impl Into<String>,
    ) -> PersistentVolumeClaim {
        PersistentVolumeClaim {
            volume_name: Some(volume.into()),
            phase: ClaimPhase::Bound,
            bind_completed: true,
            ..PersistentVolumeClaim::new(namespace, name)
        }
    }

    /// `namespace/name`: how volume usage identifies the claim.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// The volume it names, if any (an empty name counts as none).
    pub fn volume(&self) -> Option<&str> {
        self.volume_name.as_deref().filter(|v| !v.is_empty())
    }
}

/// Where a PersistentVolume's storage lives, as far as scheduling cares.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum PersistentVolumeSource {
    /// `csi`: a CSI volume of `driver`.
    Csi {
        /// `csi.driver`.
        driver: String,
    },
    /// `awsElasticBlockStore`: an in-tree EBS volume, counted against
    /// [`AWS_EBS_CSI_DRIVER`]'s limit.
    AwsElasticBlockStore,
    /// `local`: a local disk (its hostname affinity is ignored when rescheduling).
    Local,
    /// `hostPath` (its hostname affinity is ignored when rescheduling).
    HostPath,
    /// Any other source (`nfs`, …), by its field name: not attach-limited.
    Other(String),
}

/// A PersistentVolume.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PersistentVolume {
    /// Name.
    pub name: String,
    /// The storage source.
    pub source: PersistentVolumeSource,
    /// `spec.nodeAffinity.required.nodeSelectorTerms`: ORed terms; empty means unconstrained.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub node_affinity: Vec<NodeSelectorTerm>,
    /// Whether the volume is being deleted (`metadata.deletionTimestamp` set).
    #[serde(default)]
    pub deleting: bool,
}

impl PersistentVolume {
    /// A volume with no node affinity.
    pub fn new(name: impl Into<String>, source: PersistentVolumeSource) -> PersistentVolume {
        PersistentVolume {
            name: name.into(),
            source,
            node_affinity: Vec::new(),
            deleting: false,
        }
    }

    /// A CSI volume of `driver`.
    pub fn csi(name: impl Into<String>, driver: impl Into<String>) -> PersistentVolume {
        PersistentVolume::new(
            name,
            PersistentVolumeSource::Csi {
                driver: driver.into(),
            },
        )
    }

    /// The CSI driver whose attach limit the volume counts against: the CSI driver, or
    /// [`AWS_EBS_CSI_DRIVER`] for an in-tree EBS volume; none for other sources.
    pub fn driver(&self) -> Option<&str> {
        match &self.source {
            PersistentVolumeSource::Csi { driver } if !driver.is_empty() => Some(driver),
            PersistentVolumeSource::AwsElasticBlockStore => Some(AWS_EBS_CSI_DRIVER),
            _ => None,
        }
    }

    /// Whether the volume lives on one node's disk (`local` or `hostPath`).
    pub fn is_node_local(&self) -> bool {
        matches!(
            self.source,
            PersistentVolumeSource::Local | PersistentVolumeSource::HostPath
        )
    }
}

/// `volumeBindingMode` of a StorageClass.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub enum VolumeBindingMode {
    /// Volumes are provisioned and bound as soon as the claim is created (the API default).
    #[default]
    Immediate,
    /// Provisioning waits for a pod to be scheduled.
    WaitForFirstConsumer,
}

/// One `matchLabelExpressions` entry of a StorageClass topology term: the label must have one of
/// the values.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TopologySelectorLabelRequirement {
    /// The label key.
    pub key: String,
    /// The allowed values.
    #[serde(default)]
    pub values: Vec<String>,
}

/// One term of a StorageClass's `allowedTopologies`: every expression must hold. Terms are ORed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TopologySelectorTerm {
    /// `matchLabelExpressions`, ANDed.
    #[serde(default)]
    pub match_label_expressions: Vec<TopologySelectorLabelRequirement>,
}

impl TopologySelectorTerm {
    /// A term allowing the given zones (`topology.kubernetes.io/zone`).
    pub fn zones<I, S>(zones: I) -> TopologySelectorTerm
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        TopologySelectorTerm {
            match_label_expressions: vec![TopologySelectorLabelRequirement {
                key: labels::ZONE.to_string(),
                values: zones.into_iter().map(Into::into).collect(),
            }],
        }
    }

    /// The term as node requirements (`key In values` per expression).
    pub fn requirements(&self) -> Requirements {
        self.match_label_expressions
            .iter()
            .map(|e| Requirement::new(&e.key, Operator::In, &e.values))
            .collect()
    }
}

/// A StorageClass.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StorageClass {
    /// Name.
    pub name: String,
    /// `provisioner` (possibly an in-tree name such as `kubernetes.io/aws-ebs`).
    pub provisioner: String,
    /// `allowedTopologies`: ORed terms; empty means anywhere.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allowed_topologies: Vec<TopologySelectorTerm>,
    /// `volumeBindingMode`.
    #[serde(default)]
    pub volume_binding_mode: VolumeBindingMode,
    /// Whether it carries
    /// [`DEFAULT_STORAGE_CLASS_ANNOTATION`](super::DEFAULT_STORAGE_CLASS_ANNOTATION)` = "true"`.
    #[serde(default)]
    pub is_default: bool,
    /// When it was created (the newest default class wins).
    #[serde(default = "epoch")]
    pub creation_timestamp: Timestamp,
}

fn epoch() -> Timestamp {
    Timestamp::UNIX_EPOCH
}

impl StorageClass {
    /// A non-default class with `Immediate` binding, no topology restriction, created at the
    /// Unix epoch.
    pub fn new(name: impl Into<String>, provisioner: impl Into<String>) -> StorageClass {
        StorageClass {
            name: name.into(),
            provisioner: provisioner.into(),
            allowed_topologies: Vec::new(),
            volume_binding_mode: VolumeBindingMode::Immediate,
            is_default: false,
            creation_timestamp: Timestamp::UNIX_EPOCH,
        }
    }
}

/// Per-driver attach limits of a node (its CSINode's `spec.drivers[].allocatable.count`): driver
/// name → the number of volumes the node may attach.
pub type CsiNodeLimits = BTreeMap<String, u32>;

/// Volumes per CSI driver: driver → the keys (`namespace/name`) of the distinct claims.
pub type VolumeUsage = BTreeMap<String, BTreeSet<String>>;

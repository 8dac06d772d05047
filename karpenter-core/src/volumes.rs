//! Storage as the scheduler sees it (spec `scheduler.md` 5.3): the volumes a pod mounts,
//! PersistentVolumeClaims, PersistentVolumes, StorageClasses, and the [`VolumeCatalog`] that
//! resolves a pod's volumes through them.
//!
//! Like the rest of the crate this is plain data: callers copy the cluster's storage objects into
//! a [`VolumeCatalog`] (by hand, from fixtures, or with the `convert` module's helpers) and pass
//! it in [`crate::scheduling::SchedulingInput::volumes`]. The scheduler then
//!
//! - ignores pods whose claims are not usable yet ([`VolumeCatalog::validate_pod`]);
//! - keeps new nodes within the topology the volumes allow
//!   ([`VolumeCatalog::topology_alternatives`]);
//! - keeps existing nodes within their per-driver attach limits
//!   ([`VolumeCatalog::pod_volume_usage`], limits in
//!   [`crate::scheduling::ExistingNodeInput::volume_limits`]).
//!
//! ```
//! use karpenter_core::model::Pod;
//! use karpenter_core::volumes::{
//!     PersistentVolumeClaim, PodVolume, StorageClass, VolumeBindingMode, VolumeCatalog,
//! };
//!
//! let mut catalog = VolumeCatalog::default();
//! let mut class = StorageClass::new("gp3", "kubernetes.io/aws-ebs");
//! class.volume_binding_mode = VolumeBindingMode::WaitForFirstConsumer;
//! class.allowed_topologies = vec![karpenter_core::volumes::TopologySelectorTerm::zones(["us-west-2a"])];
//! catalog.add_storage_class(class);
//! let mut claim = PersistentVolumeClaim::new("default", "data");
//! claim.storage_class_name = Some("gp3".into());
//! catalog.add_claim(claim);
//!
//! let mut pod = Pod::new("default", "db-0");
//! pod.volumes.push(PodVolume::claim("data", "data"));
//! assert!(catalog.validate_pod(&pod).is_ok());
//! // In-tree provisioners count against their CSI driver's limit.
//! let usage = catalog.pod_volume_usage(&pod);
//! assert!(usage["ebs.csi.aws.com"].contains("default/data"));
//! // One alternative: the class's allowed zone.
//! let alternatives = catalog.topology_alternatives(&pod).unwrap();
//! assert_eq!(alternatives.len(), 1);
//! ```

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::labels;
use crate::model::{NodeSelectorTerm, Pod, Timestamp};
use crate::requirements::{Operator, Requirement, Requirements};

/// Annotation the PV controller sets on a claim once its binding is complete. A claim that names
/// a volume without it is not considered bound.
pub const BIND_COMPLETED_ANNOTATION: &str = "pv.kubernetes.io/bind-completed";

/// Annotation that marks a StorageClass as the cluster default.
pub const DEFAULT_STORAGE_CLASS_ANNOTATION: &str = "storageclass.kubernetes.io/is-default-class";

/// The AWS EBS CSI driver, which in-tree `awsElasticBlockStore` volumes and the
/// `kubernetes.io/aws-ebs` provisioner migrate to.
pub const AWS_EBS_CSI_DRIVER: &str = "ebs.csi.aws.com";

/// In-tree provisioner names and the CSI drivers they migrate to (Kubernetes'
/// csi-translation-lib).
const IN_TREE_PROVISIONERS: [(&str, &str); 7] = [
    ("kubernetes.io/aws-ebs", AWS_EBS_CSI_DRIVER),
    ("kubernetes.io/gce-pd", "pd.csi.storage.gke.io"),
    ("kubernetes.io/azure-disk", "disk.csi.azure.com"),
    ("kubernetes.io/azure-file", "file.csi.azure.com"),
    ("kubernetes.io/cinder", "cinder.csi.openstack.org"),
    ("kubernetes.io/vsphere-volume", "csi.vsphere.vmware.com"),
    ("kubernetes.io/portworx-volume", "pxd.portworx.com"),
];

/// The CSI driver a StorageClass provisioner stands for: in-tree plugin names
/// (`kubernetes.io/aws-ebs`, `kubernetes.io/gce-pd`, …) are translated to the CSI driver they
/// migrated to; any other name is returned as is.
///
/// ```
/// use karpenter_core::volumes::csi_driver_for_provisioner;
/// assert_eq!(csi_driver_for_provisioner("kubernetes.io/aws-ebs"), "ebs.csi.aws.com");
/// assert_eq!(csi_driver_for_provisioner("example.com/csi"), "example.com/csi");
/// ```
pub fn csi_driver_for_provisioner(provisioner: &str) -> &str {
    IN_TREE_PROVISIONERS
        .iter()
        .find(|(in_tree, _)| *in_tree == provisioner)
        .map_or(provisioner, |(_, csi)| csi)
}

// ---------------------------------------------------------------------------------------------
// The pod side
// ---------------------------------------------------------------------------------------------

/// One entry of a pod's `spec.volumes`, as far as scheduling cares.
///
/// Serialises like Kubernetes: `{name: data, persistentVolumeClaim: {claimName: data}}`,
/// `{name: scratch, ephemeral: {storageClassName: gp3}}`, `{name: tmp, other: emptyDir}`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodVolume {
    /// The volume's name in the pod (`spec.volumes[].name`).
    pub name: String,
    /// Where the volume comes from.
    #[serde(flatten)]
    pub source: VolumeSource,
}

impl PodVolume {
    /// A volume backed by the claim `claim_name` in the pod's namespace.
    pub fn claim(name: impl Into<String>, claim_name: impl Into<String>) -> PodVolume {
        PodVolume {
            name: name.into(),
            source: VolumeSource::PersistentVolumeClaim {
                claim_name: claim_name.into(),
            },
        }
    }

    /// A generic ephemeral volume whose claim template names `storage_class_name`.
    pub fn ephemeral(name: impl Into<String>, storage_class_name: Option<&str>) -> PodVolume {
        PodVolume {
            name: name.into(),
            source: VolumeSource::Ephemeral {
                storage_class_name: storage_class_name.map(str::to_string),
            },
        }
    }

    /// The name of the claim this volume uses in `pod`'s namespace: the claim of a
    /// `persistentVolumeClaim` volume, `<pod name>-<volume name>` for a generic ephemeral volume
    /// (the name the ephemeral-volume controller gives the claim it creates), none otherwise.
    pub fn claim_name(&self, pod: &Pod) -> Option<String> {
        match &self.source {
            VolumeSource::PersistentVolumeClaim { claim_name } => Some(claim_name.clone()),
            VolumeSource::Ephemeral { .. } => Some(format!("{}-{}", pod.name, self.name)),
            VolumeSource::Other(_) => None,
        }
    }
}

/// The source of a [`PodVolume`].
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum VolumeSource {
    /// `persistentVolumeClaim`: an existing claim in the pod's namespace.
    #[serde(rename_all = "camelCase")]
    PersistentVolumeClaim {
        /// `claimName`.
        claim_name: String,
    },
    /// `ephemeral`: a generic ephemeral volume. Its claim, `<pod>-<volume>`, is created with the
    /// pod; scheduling reads that claim (the template's class is informational).
    #[serde(rename_all = "camelCase")]
    Ephemeral {
        /// `volumeClaimTemplate.spec.storageClassName`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        storage_class_name: Option<String>,
    },
    /// Any other source (`emptyDir`, `configMap`, `hostPath`, inline CSI, …), by its field name.
    /// Such volumes do not affect scheduling.
    Other(String),
}

// ---------------------------------------------------------------------------------------------
// Claims, volumes and classes
// ---------------------------------------------------------------------------------------------

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
    /// Whether it carries the [`BIND_COMPLETED_ANNOTATION`].
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
    /// Whether it carries [`DEFAULT_STORAGE_CLASS_ANNOTATION`]` = "true"`.
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

// ---------------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------------

/// Why a pod's volumes make it unschedulable for now (spec 5.3 validation). Such pods are left
/// out of the solve; they become schedulable once the storage objects change.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VolumeError {
    /// The claim a volume refers to does not exist.
    #[error("volume {volume:?}: persistentvolumeclaim {claim} not found")]
    ClaimNotFound {
        /// The pod volume.
        volume: String,
        /// `namespace/name` of the claim.
        claim: String,
    },
    /// The claim is being deleted.
    #[error("persistentvolumeclaim {claim} is being deleted")]
    ClaimDeleting {
        /// `namespace/name`.
        claim: String,
    },
    /// The claim is in phase Lost.
    #[error("persistentvolumeclaim {claim} is Lost (bound to a non-existent persistentvolume)")]
    ClaimLost {
        /// `namespace/name`.
        claim: String,
    },
    /// The volume a bound claim names does not exist.
    #[error("persistentvolumeclaim {claim}: persistentvolume {volume} not found")]
    VolumeNotFound {
        /// `namespace/name` of the claim.
        claim: String,
        /// The volume's name.
        volume: String,
    },
    /// The volume a bound claim names is being deleted.
    #[error("persistentvolumeclaim {claim}: persistentvolume {volume} is being deleted")]
    VolumeDeleting {
        /// `namespace/name` of the claim.
        claim: String,
        /// The volume's name.
        volume: String,
    },
    /// The claim names a volume but lacks the bind-completed annotation.
    #[error(
        "persistentvolumeclaim {claim} names persistentvolume {volume} but is considered unbound: it lacks annotation {BIND_COMPLETED_ANNOTATION}"
    )]
    BindNotCompleted {
        /// `namespace/name` of the claim.
        claim: String,
        /// The volume's name.
        volume: String,
    },
    /// An unbound claim has no storage class (and there is no default class).
    #[error("unbound persistentvolumeclaim {claim} must define a storage class")]
    NoStorageClass {
        /// `namespace/name`.
        claim: String,
    },
    /// The storage class of an unbound claim does not exist.
    #[error("unbound persistentvolumeclaim {claim}: storage class {class:?} not found")]
    StorageClassNotFound {
        /// `namespace/name` of the claim.
        claim: String,
        /// The class.
        class: String,
    },
    /// An unbound claim's class binds immediately: the claim must be bound before the pod can
    /// be placed.
    #[error(
        "unbound persistentvolumeclaim {claim}: storage class {class:?} has volumeBindingMode Immediate, the claim must be bound first"
    )]
    ImmediateBinding {
        /// `namespace/name` of the claim.
        claim: String,
        /// The class.
        class: String,
    },
    /// An unbound claim's class restricts topology on a key Karpenter's nodes never carry.
    #[error(
        "persistentvolumeclaim {claim}: storage class {class:?} uses unsupported topology key {key:?}"
    )]
    UnsupportedTopologyKey {
        /// `namespace/name` of the claim.
        claim: String,
        /// The class.
        class: String,
        /// The key.
        key: String,
    },
    /// The claim's driver is in [`VolumeCatalog::unsupported_provisioners`].
    #[error("persistentvolumeclaim {claim}: provisioner {driver:?} is not supported")]
    UnsupportedProvisioner {
        /// `namespace/name` of the claim.
        claim: String,
        /// The (translated) driver.
        driver: String,
    },
}

// ---------------------------------------------------------------------------------------------
// The catalog
// ---------------------------------------------------------------------------------------------

/// The cluster's claims, volumes and storage classes, plus the provider's list of unsupported
/// provisioners and topology keys. Objects are keyed by name (claims by namespace and name);
/// adding an object replaces one with the same key.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct VolumeCatalog {
    claims: BTreeMap<(String, String), PersistentVolumeClaim>,
    volumes: BTreeMap<String, PersistentVolume>,
    storage_classes: BTreeMap<String, StorageClass>,
    /// Drivers (after in-tree translation) whose claims make a pod unschedulable (upstream
    /// `UnsupportedProvisioners`, empty by default).
    pub unsupported_provisioners: BTreeSet<String>,
    /// Topology keys Karpenter's nodes never carry: unbound claims whose class restricts them
    /// make a pod unschedulable (upstream `UnsupportedTopologyKeys`, empty by default).
    pub unsupported_topology_keys: BTreeSet<String>,
}

impl VolumeCatalog {
    /// Whether the catalog holds no object.
    pub fn is_empty(&self) -> bool {
        self.claims.is_empty() && self.volumes.is_empty() && self.storage_classes.is_empty()
    }

    /// Adds (or replaces) a claim.
    pub fn add_claim(&mut self, claim: PersistentVolumeClaim) {
        self.claims
            .insert((claim.namespace.clone(), claim.name.clone()), claim);
    }

    /// Adds (or replaces) a volume.
    pub fn add_volume(&mut self, volume: PersistentVolume) {
        self.volumes.insert(volume.name.clone(), volume);
    }

    /// Adds (or replaces) a storage class.
    pub fn add_storage_class(&mut self, class: StorageClass) {
        self.storage_classes.insert(class.name.clone(), class);
    }

    /// Removes a claim; returns it if it existed.
    pub fn remove_claim(&mut self, namespace: &str, name: &str) -> Option<PersistentVolumeClaim> {
        self.claims
            .remove(&(namespace.to_string(), name.to_string()))
    }

    /// Removes a volume; returns it if it existed.
    pub fn remove_volume(&mut self, name: &str) -> Option<PersistentVolume> {
        self.volumes.remove(name)
    }

    /// Removes a storage class; returns it if it existed.
    pub fn remove_storage_class(&mut self, name: &str) -> Option<StorageClass> {
        self.storage_classes.remove(name)
    }

    /// The claim `namespace/name`.
    pub fn claim(&self, namespace: &str, name: &str) -> Option<&PersistentVolumeClaim> {
        self.claims.get(&(namespace.to_string(), name.to_string()))
    }

    /// The claim `namespace/name`, for changes.
    pub fn claim_mut(&mut self, namespace: &str, name: &str) -> Option<&mut PersistentVolumeClaim> {
        self.claims
            .get_mut(&(namespace.to_string(), name.to_string()))
    }

    /// The volume `name`.
    pub fn volume(&self, name: &str) -> Option<&PersistentVolume> {
        self.volumes.get(name)
    }

    /// The volume `name`, for changes.
    pub fn volume_mut(&mut self, name: &str) -> Option<&mut PersistentVolume> {
        self.volumes.get_mut(name)
    }

    /// The storage class `name`.
    pub fn storage_class(&self, name: &str) -> Option<&StorageClass> {
        self.storage_classes.get(name)
    }

    /// Every claim, by namespace then name.
    pub fn claims(&self) -> impl Iterator<Item = &PersistentVolumeClaim> {
        self.claims.values()
    }

    /// Every volume, by name.
    pub fn volumes(&self) -> impl Iterator<Item = &PersistentVolume> {
        self.volumes.values()
    }

    /// Every storage class, by name.
    pub fn storage_classes(&self) -> impl Iterator<Item = &StorageClass> {
        self.storage_classes.values()
    }

    /// The default storage class: among classes marked default, the newest; ties by name
    /// ascending (Kubernetes' rule since 1.26).
    pub fn default_storage_class(&self) -> Option<&StorageClass> {
        self.storage_classes
            .values()
            .filter(|c| c.is_default)
            .min_by(|a, b| {
                b.creation_timestamp
                    .cmp(&a.creation_timestamp)
                    .then_with(|| a.name.cmp(&b.name))
            })
    }

    /// The storage class an unbound claim is provisioned with: its own class; for a claim that
    /// leaves the class unset, the default class (what the API server's `DefaultStorageClass`
    /// admission, and since Kubernetes 1.28 the retroactive assignment, give it); none when the
    /// class is explicitly empty or there is no default.
    pub fn claim_storage_class<'a>(&'a self, claim: &'a PersistentVolumeClaim) -> Option<&'a str> {
        match claim.storage_class_name.as_deref() {
            Some("") => None,
            Some(name) => Some(name),
            None => self.default_storage_class().map(|c| c.name.as_str()),
        }
    }

    /// The claim behind a pod volume: `Ok(None)` for volumes without a claim, an error when the
    /// claim does not exist.
    pub fn claim_of(
        &self,
        pod: &Pod,
        volume: &PodVolume,
    ) -> Result<Option<&PersistentVolumeClaim>, VolumeError> {
        let Some(name) = volume.claim_name(pod) else {
            return Ok(None);
        };
        match self.claim(&pod.namespace, &name) {
            Some(c) => Ok(Some(c)),
            None => Err(VolumeError::ClaimNotFound {
                volume: volume.name.clone(),
                claim: format!("{}/{name}", pod.namespace),
            }),
        }
    }

    /// The CSI driver a claim's volume counts against (upstream `ResolveDriver`): for a bound
    /// claim its volume's driver ([`PersistentVolume::driver`]); for an unbound one its storage
    /// class's provisioner, translated from in-tree names ([`csi_driver_for_provisioner`]).
    /// `None` when the claim cannot be resolved (missing volume or class, no class) or the
    /// volume is not attach-limited.
    pub fn claim_driver(&self, claim: &PersistentVolumeClaim) -> Option<String> {
        if let Some(volume) = claim.volume() {
            return self.volume(volume)?.driver().map(str::to_string);
        }
        let class = self.storage_class(self.claim_storage_class(claim)?)?;
        Some(csi_driver_for_provisioner(&class.provisioner).to_string())
    }

    /// Spec 5.3 validation: whether every claim the pod uses can be scheduled against now. The
    /// first problem, in volume order, is returned:
    ///
    /// - the claim must exist, not be deleting and not be Lost;
    /// - a claim naming a volume must have that volume (not deleting) and the bind-completed
    ///   annotation;
    /// - an unbound claim needs a storage class ([`claim_storage_class`]) that exists, does not
    ///   bind immediately and uses no [unsupported topology key](Self::unsupported_topology_keys);
    /// - the claim's driver ([`claim_driver`]) must not be an
    ///   [unsupported provisioner](Self::unsupported_provisioners).
    ///
    /// [`claim_storage_class`]: Self::claim_storage_class
    /// [`claim_driver`]: Self::claim_driver
    pub fn validate_pod(&self, pod: &Pod) -> Result<(), VolumeError> {
        for volume in &pod.volumes {
            let Some(claim) = self.claim_of(pod, volume)? else {
                continue;
            };
            let key = claim.key();
            if claim.deleting {
                return Err(VolumeError::ClaimDeleting { claim: key });
            }
            if claim.phase == ClaimPhase::Lost {
                return Err(VolumeError::ClaimLost { claim: key });
            }
            if let Some(name) = claim.volume() {
                let Some(pv) = self.volume(name) else {
                    return Err(VolumeError::VolumeNotFound {
                        claim: key,
                        volume: name.to_string(),
                    });
                };
                if pv.deleting {
                    return Err(VolumeError::VolumeDeleting {
                        claim: key,
                        volume: name.to_string(),
                    });
                }
                if !claim.bind_completed {
                    return Err(VolumeError::BindNotCompleted {
                        claim: key,
                        volume: name.to_string(),
                    });
                }
            } else {
                let Some(class_name) = self.claim_storage_class(claim) else {
                    return Err(VolumeError::NoStorageClass { claim: key });
                };
                let Some(class) = self.storage_class(class_name) else {
                    return Err(VolumeError::StorageClassNotFound {
                        claim: key,
                        class: class_name.to_string(),
                    });
                };
                if class.volume_binding_mode == VolumeBindingMode::Immediate {
                    return Err(VolumeError::ImmediateBinding {
                        claim: key,
                        class: class.name.clone(),
                    });
                }
                let unsupported = class
                    .allowed_topologies
                    .iter()
                    .flat_map(|t| t.match_label_expressions.iter())
                    .find(|e| self.unsupported_topology_keys.contains(&e.key));
                if let Some(e) = unsupported {
                    return Err(VolumeError::UnsupportedTopologyKey {
                        claim: key,
                        class: class.name.clone(),
                        key: e.key.clone(),
                    });
                }
            }
            if let Some(driver) = self.claim_driver(claim)
                && self.unsupported_provisioners.contains(&driver)
            {
                return Err(VolumeError::UnsupportedProvisioner { claim: key, driver });
            }
        }
        Ok(())
    }

    /// The topology alternatives of one pod volume: `None` when the volume does not constrain
    /// the node, else the ORed requirement sets (spec 5.3):
    ///
    /// - a bound claim: one alternative per `nodeAffinity` term of its volume. For `local` and
    ///   `hostPath` volumes hostname expressions are dropped (the pod may move to a new node) and
    ///   a term that only had hostname expressions becomes an unconstrained alternative;
    /// - an unbound claim with a storage class: one alternative per `allowedTopologies` term;
    /// - a generic ephemeral volume of a pod already bound to a node: none (its claim is
    ///   recreated with the pod).
    pub fn volume_alternatives(
        &self,
        pod: &Pod,
        volume: &PodVolume,
    ) -> Result<Option<Vec<Requirements>>, VolumeError> {
        if matches!(volume.source, VolumeSource::Ephemeral { .. }) && pod.node_name.is_some() {
            return Ok(None);
        }
        let Some(claim) = self.claim_of(pod, volume)? else {
            return Ok(None);
        };
        let mut alternatives = Vec::new();
        if let Some(name) = claim.volume() {
            let Some(pv) = self.volume(name) else {
                return Err(VolumeError::VolumeNotFound {
                    claim: claim.key(),
                    volume: name.to_string(),
                });
            };
            for term in &pv.node_affinity {
                let kept: Vec<_> = term
                    .match_expressions
                    .iter()
                    .filter(|e| {
                        !(pv.is_node_local() && labels::normalize_key(&e.key) == labels::HOSTNAME)
                    })
                    .collect();
                if kept.is_empty() {
                    if !term.match_expressions.is_empty() {
                        alternatives.push(Requirements::new());
                    }
                    continue;
                }
                alternatives.push(
                    kept.into_iter()
                        .map(Requirement::from_node_selector)
                        .collect(),
                );
            }
        } else if let Some(class_name) = self.claim_storage_class(claim) {
            let Some(class) = self.storage_class(class_name) else {
                return Err(VolumeError::StorageClassNotFound {
                    claim: claim.key(),
                    class: class_name.to_string(),
                });
            };
            alternatives.extend(
                class
                    .allowed_topologies
                    .iter()
                    .filter(|t| !t.match_label_expressions.is_empty())
                    .map(TopologySelectorTerm::requirements),
            );
        }
        Ok((!alternatives.is_empty()).then_some(alternatives))
    }

    /// The pod's topology alternatives (spec 5.3): the cross product of its volumes'
    /// [alternatives](Self::volume_alternatives), in volume order, each combination merged
    /// (requirements intersected per key). After each volume, combinations whose parts do not
    /// [intersect](Requirements::intersects) are pruned — unless every one would be, in which
    /// case all are kept and scheduling fails on them later. Empty when no volume constrains the
    /// node.
    ///
    /// A node (or NodeClaim) may take the pod if it satisfies any alternative; alternatives
    /// constrain the node only, never the pod's own topology domains.
    pub fn topology_alternatives(&self, pod: &Pod) -> Result<Vec<Requirements>, VolumeError> {
        let mut alternatives = vec![Requirements::new()];
        let mut constrained = false;
        for volume in &pod.volumes {
            let Some(options) = self.volume_alternatives(pod, volume)? else {
                continue;
            };
            constrained = true;
            let merge = |a: &Requirements, b: &Requirements| a.intersection(b);
            let compatible: Vec<Requirements> = alternatives
                .iter()
                .flat_map(|a| options.iter().map(move |b| (a, b)))
                .filter(|(a, b)| a.intersects(b).is_ok())
                .map(|(a, b)| merge(a, b))
                .collect();
            alternatives = if compatible.is_empty() {
                alternatives
                    .iter()
                    .flat_map(|a| options.iter().map(move |b| merge(a, b)))
                    .collect()
            } else {
                compatible
            };
        }
        Ok(if constrained {
            alternatives
        } else {
            Vec::new()
        })
    }

    /// The attach-limited volumes the pod uses (upstream `GetVolumes`): per driver
    /// ([`claim_driver`](Self::claim_driver)), the keys of its claims. Claims that cannot be
    /// resolved, and volumes that are not attach-limited, are left out.
    pub fn pod_volume_usage(&self, pod: &Pod) -> VolumeUsage {
        let mut usage = VolumeUsage::new();
        for volume in &pod.volumes {
            let Ok(Some(claim)) = self.claim_of(pod, volume) else {
                continue;
            };
            if let Some(driver) = self.claim_driver(claim) {
                usage.entry(driver).or_default().insert(claim.key());
            }
        }
        usage
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::requirements::NodeSelectorRequirement;
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
}

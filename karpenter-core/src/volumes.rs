//! Storage as the scheduler sees it (upstream `volumetopology.go` / `volumeusage.go`): the volumes
//! a pod mounts, PersistentVolumeClaims, PersistentVolumes, StorageClasses, and the
//! [`VolumeCatalog`] that resolves a pod's volumes through them.
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

mod objects;

pub use self::objects::{
    ClaimPhase, CsiNodeLimits, PersistentVolume, PersistentVolumeClaim, PersistentVolumeSource,
    StorageClass, TopologySelectorLabelRequirement, TopologySelectorTerm, VolumeBindingMode,
    VolumeUsage,
};
pub use crate::model::{PodVolume, VolumeSource};

use std::collections::{BTreeMap, BTreeSet};

use crate::labels;
use crate::model::Pod;
use crate::requirements::{Requirement, Requirements};

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
// Errors
// ---------------------------------------------------------------------------------------------

/// Why a pod's volumes make it unschedulable for now (upstream `volumetopology.go` /
/// `volumeusage.go` validation). Such pods are left out of the solve; they become schedulable once
/// the storage objects change.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
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

    /// Upstream `volumetopology.go` / `volumeusage.go` validation: whether every claim the pod uses
    /// can be scheduled against now. The first problem, in volume order, is returned:
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
    /// the node, else the ORed requirement sets (upstream `volumetopology.go` / `volumeusage.go`):
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

    /// The pod's topology alternatives (upstream `volumetopology.go` / `volumeusage.go`): the cross
    /// product of its volumes' [alternatives](Self::volume_alternatives), in volume order, each
    /// combination merged (requirements intersected per key). After each volume, combinations whose
    /// parts do not [intersect](Requirements::intersects) are pruned — unless every one would be,
    /// in which case all are kept and scheduling fails on them later. Empty when no volume
    /// constrains the node.
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
mod tests;

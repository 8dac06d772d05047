//! The volumes of a pod's `spec.volumes`, as far as scheduling cares. Resolving them through
//! claims, volumes and StorageClasses is the [`volumes`](crate::volumes) module's job.

use serde::{Deserialize, Serialize};

use super::Pod;

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

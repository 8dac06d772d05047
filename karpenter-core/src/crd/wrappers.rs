//! The `kube::Resource` wrappers [`KubeNodePool`] and [`KubeNodeClaim`] and their conversions
//! from and to the [`api`](crate::api) types (see the [module docs](super) for why they exist).

use super::{
    GROUP, NODECLAIM_CRD_NAME, NODECLAIM_SHORT_NAMES, NODEOVERLAY_CRD_NAME,
    NODEOVERLAY_SHORT_NAMES, NODEOVERLAY_VERSION, NODEPOOL_CRD_NAME, NODEPOOL_SHORT_NAMES, VERSION,
    nodeclaim_crd, nodeoverlay_crd, nodepool_crd,
};
use crate::api::{
    self, NodeClaimSpec, NodeClaimStatus, NodeOverlaySpec, NodeOverlayStatus, NodePoolSpec,
    NodePoolStatus,
};
use k8s_openapi::ClusterResourceScope;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1 as apiext;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
use kube::core::object::{HasSpec, HasStatus};
use kube::core::{ApiResource, CustomResourceExt, Resource};
use serde::{Deserialize, Serialize};
use std::borrow::Cow;

/// Why an object cannot be converted between the [`api`] types and the `kube` wrappers.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CrdError {
    /// The metadata does not fit the other representation (for example a timestamp that is
    /// not RFC 3339, or an unknown metadata field of the wrong type).
    #[error("{kind} {name:?}: invalid metadata: {message}")]
    Metadata {
        /// `NodePool` or `NodeClaim`.
        kind: &'static str,
        /// The object's name.
        name: String,
        /// What failed.
        message: String,
    },
}

pub(super) fn convert_meta<From: Serialize, To: serde::de::DeserializeOwned>(
    from: &From,
    kind: &'static str,
    name: &str,
) -> Result<To, CrdError> {
    serde_json::to_value(from)
        .and_then(serde_json::from_value)
        .map_err(|e| CrdError::Metadata {
            kind,
            name: name.to_string(),
            message: e.to_string(),
        })
}

macro_rules! kube_wrapper {
    (
        $(#[$doc:meta])*
        $name:ident, $api:ty, $kind:expr, $plural:literal, $spec:ty, $status:ty,
        $crd:ident, $crd_name:expr, $short:expr, $version:expr, $api_version:expr
    ) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq)]
        pub struct $name {
            /// Object metadata (`k8s-openapi`'s).
            pub metadata: meta::ObjectMeta,
            /// The desired state.
            pub spec: $spec,
            /// The observed state.
            pub status: Option<$status>,
        }

        impl Resource for $name {
            type DynamicType = ();
            type Scope = ClusterResourceScope;

            fn kind(_: &()) -> Cow<'_, str> {
                $kind.into()
            }

            fn group(_: &()) -> Cow<'_, str> {
                GROUP.into()
            }

            fn version(_: &()) -> Cow<'_, str> {
                $version.into()
            }

            fn api_version(_: &()) -> Cow<'_, str> {
                $api_version.into()
            }

            fn plural(_: &()) -> Cow<'_, str> {
                $plural.into()
            }

            fn meta(&self) -> &meta::ObjectMeta {
                &self.metadata
            }

            fn meta_mut(&mut self) -> &mut meta::ObjectMeta {
                &mut self.metadata
            }
        }

        impl HasSpec for $name {
            type Spec = $spec;

            fn spec(&self) -> &$spec {
                &self.spec
            }

            fn spec_mut(&mut self) -> &mut $spec {
                &mut self.spec
            }
        }

        impl HasStatus for $name {
            type Status = $status;

            fn status(&self) -> Option<&$status> {
                self.status.as_ref()
            }

            fn status_mut(&mut self) -> &mut Option<$status> {
                &mut self.status
            }
        }

        impl CustomResourceExt for $name {
            fn crd() -> apiext::CustomResourceDefinition {
                $crd()
            }

            fn crd_name() -> &'static str {
                $crd_name
            }

            fn api_resource() -> ApiResource {
                ApiResource::erase::<$name>(&())
            }

            fn shortnames() -> &'static [&'static str] {
                $short
            }
        }

        impl CustomResourceExt for $api {
            fn crd() -> apiext::CustomResourceDefinition {
                $crd()
            }

            fn crd_name() -> &'static str {
                $crd_name
            }

            fn api_resource() -> ApiResource {
                ApiResource::erase::<$name>(&())
            }

            fn shortnames() -> &'static [&'static str] {
                $short
            }
        }

        impl Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                use serde::ser::SerializeStruct;
                let fields = if self.status.is_some() { 5 } else { 4 };
                let mut s = serializer.serialize_struct(stringify!($name), fields)?;
                s.serialize_field("apiVersion", $api_version)?;
                s.serialize_field("kind", $kind)?;
                s.serialize_field("metadata", &self.metadata)?;
                s.serialize_field("spec", &self.spec)?;
                if let Some(status) = &self.status {
                    s.serialize_field("status", status)?;
                }
                s.end()
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                #[derive(Deserialize)]
                struct Repr {
                    #[serde(default)]
                    metadata: meta::ObjectMeta,
                    spec: $spec,
                    #[serde(default)]
                    status: Option<$status>,
                }
                let r = Repr::deserialize(deserializer)?;
                Ok($name {
                    metadata: r.metadata,
                    spec: r.spec,
                    status: r.status,
                })
            }
        }
    };
}

kube_wrapper!(
    /// A NodePool with `k8s-openapi` metadata, implementing [`kube::Resource`]: use
    /// `kube::Api<KubeNodePool>` to read and write NodePools, and
    /// [`KubeNodePool::into_nodepool`] to get the [`api::NodePool`] the rest of the crate reads.
    KubeNodePool,
    api::NodePool,
    api::NODEPOOL_KIND,
    "nodepools",
    NodePoolSpec,
    NodePoolStatus,
    nodepool_crd,
    NODEPOOL_CRD_NAME,
    NODEPOOL_SHORT_NAMES,
    VERSION,
    api::API_VERSION
);

kube_wrapper!(
    /// A NodeClaim with `k8s-openapi` metadata, implementing [`kube::Resource`]: use
    /// `kube::Api<KubeNodeClaim>` to read and write NodeClaims, and
    /// [`KubeNodeClaim::into_nodeclaim`] to get the [`api::NodeClaim`].
    KubeNodeClaim,
    api::NodeClaim,
    api::NODECLAIM_KIND,
    "nodeclaims",
    NodeClaimSpec,
    NodeClaimStatus,
    nodeclaim_crd,
    NODECLAIM_CRD_NAME,
    NODECLAIM_SHORT_NAMES,
    VERSION,
    api::API_VERSION
);

kube_wrapper!(
    /// A NodeOverlay with `k8s-openapi` metadata, implementing [`kube::Resource`]: use
    /// `kube::Api<KubeNodeOverlay>` to read NodeOverlays and write their status, and
    /// [`KubeNodeOverlay::into_nodeoverlay`] to get the [`api::NodeOverlay`].
    KubeNodeOverlay,
    api::NodeOverlay,
    api::NODEOVERLAY_KIND,
    "nodeoverlays",
    NodeOverlaySpec,
    NodeOverlayStatus,
    nodeoverlay_crd,
    NODEOVERLAY_CRD_NAME,
    NODEOVERLAY_SHORT_NAMES,
    NODEOVERLAY_VERSION,
    api::NODEOVERLAY_API_VERSION
);

impl KubeNodeOverlay {
    /// The [`api::NodeOverlay`] this wrapper holds.
    pub fn into_nodeoverlay(self) -> Result<api::NodeOverlay, CrdError> {
        let name = self.metadata.name.clone().unwrap_or_default();
        let mut overlay = api::NodeOverlay::new(name.clone(), self.spec);
        overlay.metadata = convert_meta(&self.metadata, api::NODEOVERLAY_KIND, &name)?;
        overlay.status = self.status.unwrap_or_default();
        Ok(overlay)
    }
}

impl KubeNodePool {
    /// The wrapper of `pool` (metadata converted, spec and status cloned).
    pub fn from_nodepool(pool: &api::NodePool) -> Result<Self, CrdError> {
        Ok(KubeNodePool {
            metadata: convert_meta(&pool.metadata, api::NODEPOOL_KIND, pool.name())?,
            spec: pool.spec.clone(),
            status: pool.status.clone(),
        })
    }

    /// The [`api::NodePool`] this wrapper holds.
    pub fn into_nodepool(self) -> Result<api::NodePool, CrdError> {
        let name = self.metadata.name.clone().unwrap_or_default();
        let mut pool = api::NodePool::new(name.clone(), self.spec);
        pool.metadata = convert_meta(&self.metadata, api::NODEPOOL_KIND, &name)?;
        pool.status = self.status;
        Ok(pool)
    }
}

impl KubeNodeClaim {
    /// The wrapper of `claim` (metadata converted, spec and status cloned; an empty status
    /// becomes `None`).
    pub fn from_nodeclaim(claim: &api::NodeClaim) -> Result<Self, CrdError> {
        Ok(KubeNodeClaim {
            metadata: convert_meta(&claim.metadata, api::NODECLAIM_KIND, claim.name())?,
            spec: claim.spec.clone(),
            status: (!claim.status.is_empty()).then(|| claim.status.clone()),
        })
    }

    /// The [`api::NodeClaim`] this wrapper holds.
    pub fn into_nodeclaim(self) -> Result<api::NodeClaim, CrdError> {
        let name = self.metadata.name.clone().unwrap_or_default();
        let mut claim = api::NodeClaim::new(name.clone(), self.spec);
        claim.metadata = convert_meta(&self.metadata, api::NODECLAIM_KIND, &name)?;
        claim.status = self.status.unwrap_or_default();
        Ok(claim)
    }
}

impl TryFrom<&api::NodePool> for KubeNodePool {
    type Error = CrdError;

    fn try_from(pool: &api::NodePool) -> Result<Self, CrdError> {
        KubeNodePool::from_nodepool(pool)
    }
}

impl TryFrom<KubeNodePool> for api::NodePool {
    type Error = CrdError;

    fn try_from(pool: KubeNodePool) -> Result<Self, CrdError> {
        pool.into_nodepool()
    }
}

impl TryFrom<&api::NodeClaim> for KubeNodeClaim {
    type Error = CrdError;

    fn try_from(claim: &api::NodeClaim) -> Result<Self, CrdError> {
        KubeNodeClaim::from_nodeclaim(claim)
    }
}

impl TryFrom<KubeNodeClaim> for api::NodeClaim {
    type Error = CrdError;

    fn try_from(claim: KubeNodeClaim) -> Result<Self, CrdError> {
        claim.into_nodeclaim()
    }
}

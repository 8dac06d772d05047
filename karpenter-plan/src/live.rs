//! `karpenter plan --from-cluster` / `--kubeconfig`: the live cluster's objects as the same
//! documents `-f` files give, so the planner reads a cluster through the same object
//! conversion as a dump.
//!
//! Read: NodePools, NodeClaims, EC2NodeClasses (when the CRD exists), Nodes, Pods (not those
//! that finished), DaemonSets, PodDisruptionBudgets, PersistentVolumeClaims,
//! PersistentVolumes, StorageClasses and CSINodes. Workload controllers (Deployments, ...) are
//! not read: their pods are.

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::storage::v1::{CSINode, StorageClass};
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, ListParams};
use kube::{Api, Client, Resource};
use serde_json::Value;

use crate::manifests::{Document, Origin};

/// Why the cluster could not be read.
#[derive(Debug, thiserror::Error)]
pub enum LiveError {
    /// No cluster found, or the kubeconfig is invalid.
    #[error("{0}")]
    Client(String),
    /// A list call failed.
    #[error("listing {kind}: {message}")]
    List {
        /// The kind.
        kind: String,
        /// The API error.
        message: String,
    },
}

fn resource<K: Resource<DynamicType = ()>>() -> ApiResource {
    ApiResource::erase::<K>(&())
}

/// The kinds read, in the order their documents are emitted; `true` when the kind is
/// optional (a missing CRD is skipped).
fn kinds() -> Vec<(ApiResource, bool)> {
    let karpenter = |kind: &str, plural: &str| {
        ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("karpenter.sh", "v1", kind),
            plural,
        )
    };
    vec![
        (karpenter("NodePool", "nodepools"), false),
        (karpenter("NodeClaim", "nodeclaims"), false),
        (
            ApiResource::from_gvk_with_plural(
                &GroupVersionKind::gvk("karpenter.k8s.aws", "v1", "EC2NodeClass"),
                "ec2nodeclasses",
            ),
            true,
        ),
        (resource::<Node>(), false),
        (resource::<DaemonSet>(), false),
        (resource::<PodDisruptionBudget>(), false),
        (resource::<StorageClass>(), false),
        (resource::<CSINode>(), false),
        (resource::<PersistentVolume>(), false),
        (resource::<PersistentVolumeClaim>(), false),
        (resource::<Pod>(), false),
    ]
}

/// Whether a listed object is left out: pods that finished (they hold no resources).
fn skipped(value: &Value) -> bool {
    value["kind"] == "Pod"
        && matches!(
            value["status"]["phase"].as_str(),
            Some("Succeeded") | Some("Failed")
        )
}

/// Every object the planner reads, as documents named `cluster:<Kind>` (document = the
/// object's position in the list, from 1).
pub async fn read_cluster(client: &Client) -> Result<Vec<Document>, LiveError> {
    let mut docs = Vec::new();
    for (ar, optional) in kinds() {
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
        let list = match api.list(&ListParams::default()).await {
            Ok(l) => l,
            Err(kube::Error::Api(s)) if optional && s.code == 404 => continue,
            Err(e) => {
                return Err(LiveError::List {
                    kind: ar.kind.clone(),
                    message: e.to_string(),
                });
            }
        };
        let mut index = 0;
        for item in list.items {
            let mut value = serde_json::to_value(&item).map_err(|e| LiveError::List {
                kind: ar.kind.clone(),
                message: e.to_string(),
            })?;
            // List items come without apiVersion and kind.
            value["apiVersion"] = Value::String(ar.api_version.clone());
            value["kind"] = Value::String(ar.kind.clone());
            if skipped(&value) {
                continue;
            }
            index += 1;
            docs.push(Document {
                origin: Origin {
                    file: format!("cluster:{}", ar.kind),
                    document: index,
                    item: None,
                },
                value,
            });
        }
    }
    Ok(docs)
}

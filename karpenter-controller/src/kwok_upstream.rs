//! Upstream's kwok provider in controller mode (`karpenter controller --cloud-provider kwok`):
//! the provider upstream Karpenter's end-to-end suites run against, so that those suites run
//! against this controller unchanged.
//!
//! The decisions are `karpenter_fake::kwok`'s (the contract as pure data and functions: the
//! 144-type catalog, the launch choice, the Node's shape, the node class and its errors); this
//! module does their I/O with kube-rs:
//!
//! - `create` reads the `KWOKNodeClass` the claim's `nodeClassRef.name` names (none: the launch
//!   fails with insufficient capacity; `Ready=False`: node class not ready), lets
//!   [`kwok::create`] choose, and answers at once with the NodeClaim the contract returns. The
//!   Node is created by a task of its own after the class's `nodeRegistrationDelay`, retried
//!   [`kwok::NODE_CREATE_ATTEMPTS`] times with the contract's backoff; if every attempt fails,
//!   the error is logged and the NodeClaim fails registration like any instance that never
//!   joins. One [`KwokRng`] per process, seeded from the clock, draws the Node names,
//!   offerings and partitions.
//! - `get` reads the Node the provider id names (`kwok://` removed); missing or being deleted,
//!   the instance is not found. `list` lists the Nodes whose provider id starts with `kwok://`.
//! - `delete` deletes the **NodeClaim** (not the Node) and answers not found, as upstream does:
//!   Karpenter's termination has already deleted and drained the Node, so the instance is gone
//!   once its Node is; the not-found answer lets the termination remove the Node's and then the
//!   NodeClaim's finalizer.
//! - no drift of its own; the repair policies, name (`kwok`), well-known labels and restricted
//!   domain, and the supported node class (`karpenter.kwok.sh/KWOKNodeClass`) are the
//!   contract's. Instance types are the fixed catalog, whatever the NodePool.
//!
//! The controller needs, beyond `deploy/rbac.yaml`, `create` on Nodes and `get` on
//! `kwoknodeclasses.karpenter.kwok.sh` (`deploy/rbac-fake-provider.yaml`), and the
//! `KWOKNodeClass` CRD installed ([`crate::crds::kwok_nodeclass`], `karpenter crds --kwok`).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use k8s_openapi::api::core::v1 as core;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as K8sQuantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use karpenter_core::api::{NodeClaim, NodePool};
use karpenter_core::cloud::{CloudProvider, CloudProviderError, NodeClassKind, RepairPolicy};
use karpenter_core::crd::KubeNodeClaim;
use karpenter_core::labels::LabelPolicy;
use karpenter_core::model::InstanceType;
use karpenter_core::resources::{Quantity, ResourceList};
use karpenter_core::taints::Taint;
use karpenter_fake::kwok::{self, KwokNode, KwokNodeClass, KwokRng};
use kube::api::{
    ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, PostParams,
};
use kube::{Api, Client};

use crate::kwok::{k8s_taint, quantities};

/// The `ApiResource` of `KWOKNodeClass` (`karpenter.kwok.sh/v1alpha1`, `kwoknodeclasses`,
/// cluster-scoped).
pub fn nodeclass_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(kwok::GROUP, kwok::VERSION, kwok::NODECLASS_KIND),
        kwok::NODECLASS_PLURAL,
    )
}

/// A [`CloudProvider`] that is upstream's kwok provider: instances are Node objects of the
/// kwok catalog's types, launched from `KWOKNodeClass`es (see the module docs).
pub struct UpstreamKwokCloudProvider {
    nodes: Api<core::Node>,
    node_claims: Api<KubeNodeClaim>,
    node_classes: Api<DynamicObject>,
    instance_types: Vec<Arc<InstanceType>>,
    rng: Mutex<KwokRng>,
}

impl UpstreamKwokCloudProvider {
    /// The provider on `client`, its random draws seeded from the clock and the process id.
    pub fn new(client: Client) -> Self {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default();
        let seed = u64::try_from(nanos & u128::from(u64::MAX)).unwrap_or_default()
            ^ u64::from(std::process::id()).rotate_left(32);
        UpstreamKwokCloudProvider::with_rng(client, KwokRng::new(seed))
    }

    /// The provider on `client` drawing from `rng` (a fixed seed gives reproducible names).
    pub fn with_rng(client: Client, rng: KwokRng) -> Self {
        UpstreamKwokCloudProvider {
            nodes: Api::all(client.clone()),
            node_claims: Api::all(client.clone()),
            node_classes: Api::all_with(client, &nodeclass_resource()),
            instance_types: kwok::instance_types(),
            rng: Mutex::new(rng),
        }
    }

    /// The `KWOKNodeClass` named `name`; `None` when it does not exist.
    async fn node_class(&self, name: &str) -> Result<Option<KwokNodeClass>, CloudProviderError> {
        let found = self.node_classes.get_opt(name).await.map_err(|e| {
            CloudProviderError::other(format!("resolving node class from nodeclaim, {e}"))
                .with_source(e)
        })?;
        let Some(object) = found else {
            return Ok(None);
        };
        let class = serde_json::to_value(&object)
            .and_then(serde_json::from_value::<KwokNodeClass>)
            .map_err(|e| {
                CloudProviderError::other(format!(
                    "resolving node class from nodeclaim, reading {} {name:?}: {e}",
                    kwok::NODECLASS_KIND
                ))
                .with_source(e)
            })?;
        Ok(Some(class))
    }

    /// Runs `f` with the process's random generator.
    fn draw<T>(&self, f: impl FnOnce(&mut KwokRng) -> T) -> T {
        let mut rng = self.rng.lock().unwrap_or_else(PoisonError::into_inner);
        f(&mut rng)
    }
}

/// The waits between the attempts at creating a Node: [`kwok::NODE_CREATE_INITIAL_BACKOFF`],
/// each next one [`kwok::NODE_CREATE_BACKOFF_FACTOR`] times the previous, each lengthened by a
/// random fraction (drawn from `rng`) of up to [`kwok::NODE_CREATE_BACKOFF_JITTER`] of itself;
/// one fewer than [`kwok::NODE_CREATE_ATTEMPTS`].
pub fn node_create_backoff(rng: &mut KwokRng) -> Vec<Duration> {
    let mut base = kwok::NODE_CREATE_INITIAL_BACKOFF;
    let mut out = Vec::new();
    for _ in 1..kwok::NODE_CREATE_ATTEMPTS {
        // 53 random bits as a fraction in [0, 1).
        let fraction = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        out.push(base.mul_f64(1.0 + fraction * kwok::NODE_CREATE_BACKOFF_JITTER));
        base = base.mul_f64(kwok::NODE_CREATE_BACKOFF_FACTOR);
    }
    out
}

/// The Node object of a contract [`KwokNode`]: its name, labels, annotations, provider id and
/// taints, and a status of phase [`kwok::NODE_PHASE`] with its capacity and allocatable.
pub fn node_object(node: &KwokNode) -> core::Node {
    core::Node {
        metadata: ObjectMeta {
            name: Some(node.name.clone()),
            labels: Some(node.labels.clone()),
            annotations: Some(node.annotations.clone()),
            ..ObjectMeta::default()
        },
        spec: Some(core::NodeSpec {
            provider_id: Some(node.provider_id.clone()),
            taints: Some(node.taints.iter().map(k8s_taint).collect()),
            ..core::NodeSpec::default()
        }),
        status: Some(core::NodeStatus {
            capacity: Some(quantities(&node.capacity)),
            allocatable: Some(quantities(&node.allocatable)),
            phase: Some(kwok::NODE_PHASE.to_string()),
            ..core::NodeStatus::default()
        }),
    }
}

/// A Node read from the API server as the contract's [`KwokNode`] (quantities or taints that do
/// not parse are left out).
pub fn kwok_node(node: &core::Node) -> KwokNode {
    let list = |m: Option<&BTreeMap<String, K8sQuantity>>| -> ResourceList {
        m.into_iter()
            .flatten()
            .filter_map(|(k, q)| Quantity::parse(&q.0).ok().map(|q| (k.clone(), q)))
            .collect()
    };
    let spec = node.spec.as_ref();
    let status = node.status.as_ref();
    let mut out = KwokNode::default();
    out.name = node.metadata.name.clone().unwrap_or_default();
    out.provider_id = spec.and_then(|s| s.provider_id.clone()).unwrap_or_default();
    out.labels = node.metadata.labels.clone().unwrap_or_default();
    out.annotations = node.metadata.annotations.clone().unwrap_or_default();
    out.taints = spec
        .and_then(|s| s.taints.as_ref())
        .into_iter()
        .flatten()
        .filter_map(|t| {
            serde_json::to_value(t)
                .and_then(serde_json::from_value::<Taint>)
                .ok()
        })
        .collect();
    out.capacity = list(status.and_then(|s| s.capacity.as_ref()));
    out.allocatable = list(status.and_then(|s| s.allocatable.as_ref()));
    out
}

/// Creates `node` after `delay`, retrying after each wait of `backoff` on any error; logs the
/// last error when every attempt failed.
async fn create_node(
    nodes: Api<core::Node>,
    node: core::Node,
    delay: Duration,
    backoff: Vec<Duration>,
) {
    let name = node.metadata.name.clone().unwrap_or_default();
    if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
    let mut waits = backoff.into_iter();
    loop {
        match nodes.create(&PostParams::default(), &node).await {
            Ok(_) => {
                tracing::debug!(node = %name, "kwok provider: node created");
                return;
            }
            Err(e) => match waits.next() {
                Some(wait) => {
                    tracing::debug!(node = %name, error = %e, "kwok provider: creating node failed; retrying");
                    tokio::time::sleep(wait).await;
                }
                None => {
                    tracing::error!(node = %name, error = %e, "failed creating node from nodeclaim");
                    return;
                }
            },
        }
    }
}

fn is_not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}

#[async_trait]
impl CloudProvider for UpstreamKwokCloudProvider {
    async fn create(&self, node_claim: &NodeClaim) -> Result<NodeClaim, CloudProviderError> {
        let class = self
            .node_class(&node_claim.spec.node_class_ref.name)
            .await?;
        let (launch, backoff) = self.draw(|rng| {
            kwok::create(node_claim, &self.instance_types, class.as_ref(), rng)
                .map(|launch| (launch, node_create_backoff(rng)))
        })?;
        // The Node appears later, as an instance's kubelet registers after booting: `create`
        // does not wait for it.
        tokio::spawn(create_node(
            self.nodes.clone(),
            node_object(&launch.node),
            launch.registration_delay,
            backoff,
        ));
        Ok(launch.node_claim)
    }

    async fn delete(&self, node_claim: &NodeClaim) -> Result<(), CloudProviderError> {
        let name = node_claim.name();
        match self
            .node_claims
            .delete(name, &DeleteParams::default())
            .await
        {
            Ok(_) => Err(CloudProviderError::not_found(
                node_claim.status.provider_id.clone().unwrap_or_default(),
            )
            .with_source(KwokError::InstanceTerminated)),
            Err(e) if is_not_found(&e) => Err(CloudProviderError::not_found(
                node_claim.status.provider_id.clone().unwrap_or_default(),
            )
            .with_source(e)),
            Err(e) => Err(CloudProviderError::other(format!("deleting node, {e}")).with_source(e)),
        }
    }

    async fn get(&self, provider_id: &str) -> Result<NodeClaim, CloudProviderError> {
        let name = kwok::node_name_from_provider_id(provider_id);
        match self.nodes.get_opt(&name).await {
            Ok(Some(node)) if node.metadata.deletion_timestamp.is_none() => {
                Ok(kwok::node_claim_from_node(&kwok_node(&node)))
            }
            Ok(_) => Err(CloudProviderError::not_found(provider_id)),
            Err(e) => Err(CloudProviderError::other(format!("finding node, {e}")).with_source(e)),
        }
    }

    async fn list(&self) -> Result<Vec<NodeClaim>, CloudProviderError> {
        let nodes =
            self.nodes.list(&ListParams::default()).await.map_err(|e| {
                CloudProviderError::other(format!("listing nodes, {e}")).with_source(e)
            })?;
        Ok(nodes
            .items
            .iter()
            .map(kwok_node)
            .filter(|n| kwok::is_kwok_provider_id(&n.provider_id))
            .map(|n| kwok::node_claim_from_node(&n))
            .collect())
    }

    async fn instance_types(
        &self,
        _node_pool: &NodePool,
    ) -> Result<Vec<Arc<InstanceType>>, CloudProviderError> {
        Ok(self.instance_types.clone())
    }

    async fn is_drifted(
        &self,
        _node_claim: &NodeClaim,
    ) -> Result<Option<String>, CloudProviderError> {
        Ok(None)
    }

    fn repair_policies(&self) -> Vec<RepairPolicy> {
        kwok::repair_policies()
    }

    fn name(&self) -> &str {
        kwok::PROVIDER_NAME
    }

    fn label_policy(&self) -> LabelPolicy {
        kwok::label_policy()
    }

    fn supported_node_classes(&self) -> Vec<NodeClassKind> {
        vec![kwok::supported_node_class()]
    }
}

/// The provider's own errors, kept as the source of the [`CloudProviderError`] it returns.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum KwokError {
    /// `delete` deleted the NodeClaim: the instance is gone (upstream answers not found).
    #[error("instance terminated")]
    InstanceTerminated,
}

#[cfg(test)]
mod tests {
    use super::*;
    use karpenter_core::api::{NodeClaimSpec, NodeClassReference};
    use karpenter_core::requirements::{NodeSelectorRequirement, Operator};

    fn claim() -> NodeClaim {
        let mut spec = NodeClaimSpec::new(NodeClassReference::new(
            kwok::GROUP,
            kwok::NODECLASS_KIND,
            "default",
        ));
        spec.requirements = Some(vec![NodeSelectorRequirement::new(
            "node.kubernetes.io/instance-type",
            Operator::In,
            ["c-4x-amd64-linux"],
        )]);
        let mut c = NodeClaim::new("default-abcde", spec);
        c.metadata
            .labels
            .insert("karpenter.sh/nodepool".to_string(), "default".to_string());
        c
    }

    #[test]
    fn the_node_object_round_trips_to_the_contracts_node_and_claim() {
        let launch = kwok::create(
            &claim(),
            &kwok::instance_types(),
            Some(&KwokNodeClass::new("default")),
            &mut KwokRng::new(7),
        )
        .unwrap();
        let object = node_object(&launch.node);
        let status = object.status.clone().unwrap();
        assert_eq!(status.phase.as_deref(), Some("Pending"));
        assert!(status.allocatable.unwrap().contains_key("cpu"));
        let taints = object.spec.clone().unwrap().taints.unwrap();
        assert_eq!(taints.len(), 1);
        assert_eq!(
            (taints[0].key.as_str(), taints[0].effect.as_str()),
            ("karpenter.sh/unregistered", "NoExecute")
        );
        let back = kwok_node(&object);
        assert_eq!(back, launch.node);
        assert_eq!(kwok::node_claim_from_node(&back), launch.node_claim);
        assert!(
            launch
                .node_claim
                .status
                .provider_id
                .as_deref()
                .is_some_and(|p| p.starts_with("kwok://kwok-default-abcde-"))
        );
    }

    #[test]
    fn the_backoff_follows_the_contract() {
        let waits = node_create_backoff(&mut KwokRng::new(1));
        assert_eq!(waits.len(), 3);
        for (wait, base_ms) in waits.iter().zip([10.0, 50.0, 250.0]) {
            let ms = wait.as_secs_f64() * 1000.0;
            assert!(ms >= base_ms && ms <= base_ms * 1.1, "{ms} vs {base_ms}");
        }
    }

    #[test]
    fn the_nodeclass_resource_is_upstreams() {
        let ar = nodeclass_resource();
        assert_eq!(ar.api_version, "karpenter.kwok.sh/v1alpha1");
        assert_eq!(ar.plural, "kwoknodeclasses");
        assert_eq!(ar.kind, "KWOKNodeClass");
    }
}

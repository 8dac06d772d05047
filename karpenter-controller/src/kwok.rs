//! The fake provider in controller mode (`karpenter controller --cloud-provider fake`): a
//! [`CloudProvider`] whose instances are Node objects, with any catalog. Upstream's own kwok
//! provider contract (its catalog, `KWOKNodeClass` and Node shape) is
//! [`kwok_upstream`](crate::kwok_upstream) (`--cloud-provider kwok`).
//!
//! As upstream's kwok provider does, launching a NodeClaim creates a Node (named after the
//! NodeClaim, so a launch retried after a crash finds the Node it already made instead of making
//! a second) with the chosen instance type's labels, capacity and allocatable, the provider id
//! `kwok://<name>`, the claim's taints and startup taints plus `karpenter.sh/unregistered`
//! (what a kubelet configured by Karpenter registers with), and the annotation
//! `kwok.x-k8s.io/node: fake`, so kwok marks it Ready and runs its pods. Deleting the instance
//! deletes the Node; listing instances lists those Nodes. Nothing is kept in memory, so a
//! restarted controller sees exactly the instances that exist.
//!
//! Instance types come from a catalog (the embedded AWS one by default); any nodeClassRef is
//! accepted.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use k8s_openapi::api::core::v1 as core;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as K8sQuantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use karpenter_core::api::{NodeClaim, NodeClaimSpec, NodeClassReference, NodePool};
use karpenter_core::cloud::{CloudProvider, CloudProviderError, RepairPolicy};
use karpenter_core::labels;
use karpenter_core::labels::LabelPolicy;
use karpenter_core::launch::{choose_launch, drop_zeros, launch_labels};
use karpenter_core::model::InstanceType;
use karpenter_core::requirements::Requirements;
use karpenter_core::resources::{Quantity, ResourceList};
use karpenter_core::taints::{Taint, TaintEffect};
use kube::Api;
use kube::api::{DeleteParams, ListParams, PostParams};

use crate::settings::FakeInstanceNames;

/// The annotation kwok selects the Nodes it plays the kubelet of by.
pub const KWOK_ANNOTATION: &str = "kwok.x-k8s.io/node";
/// Its value.
pub const KWOK_ANNOTATION_VALUE: &str = "fake";
/// Provider ids: `kwok://<node name>`.
pub const PROVIDER_ID_PREFIX: &str = "kwok://";
/// The provider's name.
pub const PROVIDER_NAME: &str = "fake";
/// The label that keeps the instance type's name on the Node (also a well-known label).
const NODECLASS_LABEL: &str = "karpenter.kwok.sh/nodeclass";

/// A [`CloudProvider`] whose instances are kwok Node objects.
pub struct KwokCloudProvider {
    nodes: Api<core::Node>,
    instance_types: Vec<Arc<InstanceType>>,
    policy: LabelPolicy,
    names: FakeInstanceNames,
}

impl KwokCloudProvider {
    /// A provider creating Nodes through `nodes`, launching `instance_types`.
    pub fn new(
        nodes: Api<core::Node>,
        instance_types: Vec<Arc<InstanceType>>,
        policy: LabelPolicy,
    ) -> Self {
        KwokCloudProvider {
            nodes,
            instance_types,
            policy,
            names: FakeInstanceNames::Claim,
        }
    }

    /// How launched instances are named: after the NodeClaim (the default; a retried launch
    /// finds its Node) or a new name per launch, as a real cloud's instance ids are.
    pub fn with_instance_names(mut self, names: FakeInstanceNames) -> Self {
        self.names = names;
        self
    }
}

/// A name no other launch has: the NodeClaim's name, then the launch's time in nanoseconds
/// and a per-process counter (both in base 36), unique across restarts of the controller.
fn unique_instance_name(claim: &str) -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static LAUNCHES: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let n = LAUNCHES.fetch_add(1, Ordering::Relaxed);
    format!("{claim}-{}{}", base36(nanos), base36(u128::from(n)))
}

fn base36(mut v: u128) -> String {
    const DIGITS: &[u8; 36] = b"0123456789abcdefghijklmnopqrstuvwxyz";
    let mut out = Vec::new();
    loop {
        out.push(DIGITS[(v % 36) as usize]);
        v /= 36;
        if v == 0 {
            break;
        }
    }
    out.reverse();
    String::from_utf8(out).unwrap_or_default()
}

pub(crate) fn quantities(list: &ResourceList) -> BTreeMap<String, K8sQuantity> {
    list.iter()
        .map(|(k, q)| (k.to_string(), K8sQuantity(q.to_string())))
        .collect()
}

pub(crate) fn k8s_taint(t: &Taint) -> core::Taint {
    core::Taint {
        key: t.key.clone(),
        value: (!t.value.is_empty()).then(|| t.value.clone()),
        effect: t.effect.as_str().to_string(),
        time_added: None,
    }
}

/// The Node a launch of `claim` as `instance_type` (offering index `offering`) creates, named
/// after the NodeClaim.
pub fn node_for_launch(
    claim: &NodeClaim,
    instance_type: &InstanceType,
    offering: usize,
) -> Result<core::Node, CloudProviderError> {
    node_for_launch_named(claim, instance_type, offering, claim.name())
}

/// [`node_for_launch`] with the Node (and provider id) named `name`.
pub fn node_for_launch_named(
    claim: &NodeClaim,
    instance_type: &InstanceType,
    offering: usize,
    name: &str,
) -> Result<core::Node, CloudProviderError> {
    let Some(offer) = instance_type.offerings.get(offering) else {
        return Err(CloudProviderError::other(format!(
            "instance type {} has no offering {offering}",
            instance_type.name()
        )));
    };
    let name = name.to_string();
    let requirements = Requirements::from_node_selector_requirements(claim.spec.requirements());
    let mut node_labels = launch_labels(
        instance_type,
        offer,
        &requirements,
        &claim.metadata.labels,
        None,
    );
    node_labels.insert(labels::HOSTNAME.to_string(), name.clone());
    node_labels.insert(
        labels::INSTANCE_TYPE.to_string(),
        instance_type.name().to_string(),
    );
    node_labels.insert(
        NODECLASS_LABEL.to_string(),
        claim.spec.node_class_ref.name.clone(),
    );
    let mut taints: Vec<core::Taint> = claim
        .spec
        .taints
        .iter()
        .chain(claim.spec.startup_taints.iter())
        .map(k8s_taint)
        .collect();
    taints.push(k8s_taint(&Taint::new(
        labels::UNREGISTERED_TAINT_KEY,
        "",
        TaintEffect::NoExecute,
    )));
    let capacity = drop_zeros(instance_type.capacity());
    let allocatable = drop_zeros(instance_type.allocatable());
    Ok(core::Node {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            labels: Some(node_labels),
            annotations: Some(BTreeMap::from([(
                KWOK_ANNOTATION.to_string(),
                KWOK_ANNOTATION_VALUE.to_string(),
            )])),
            ..ObjectMeta::default()
        },
        spec: Some(core::NodeSpec {
            provider_id: Some(format!("{PROVIDER_ID_PREFIX}{name}")),
            taints: Some(taints),
            ..core::NodeSpec::default()
        }),
        status: Some(core::NodeStatus {
            capacity: Some(quantities(&capacity)),
            allocatable: Some(quantities(&allocatable)),
            ..core::NodeStatus::default()
        }),
    })
}

/// The instance (as the NodeClaim the provider reports) a kwok Node stands for; `None` for a
/// Node this provider did not create, and for one being deleted: deleting the Node *is* the
/// instance's termination (the Node object itself may linger until Karpenter removes its
/// termination finalizer, which it does once the instance is gone).
pub fn claim_from_node(node: &core::Node) -> Option<NodeClaim> {
    if node.metadata.deletion_timestamp.is_some() {
        return None;
    }
    let annotated = node
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(KWOK_ANNOTATION))
        .is_some_and(|v| v == KWOK_ANNOTATION_VALUE);
    let provider_id = node.spec.as_ref()?.provider_id.clone()?;
    if !annotated || !provider_id.starts_with(PROVIDER_ID_PREFIX) {
        return None;
    }
    let name = node.metadata.name.clone()?;
    let node_labels = node.metadata.labels.clone().unwrap_or_default();
    let class = node_labels
        .get(NODECLASS_LABEL)
        .cloned()
        .unwrap_or_default();
    let mut claim = NodeClaim::new(
        name.clone(),
        NodeClaimSpec::new(NodeClassReference::new("", "", class)),
    );
    claim.metadata.labels = node_labels;
    claim.status.provider_id = Some(provider_id);
    claim.status.node_name = Some(name);
    let list = |m: Option<&BTreeMap<String, K8sQuantity>>| -> ResourceList {
        m.into_iter()
            .flatten()
            .filter_map(|(k, q)| Quantity::parse(&q.0).ok().map(|q| (k.clone(), q)))
            .collect()
    };
    let status = node.status.as_ref();
    claim.status.capacity = list(status.and_then(|s| s.capacity.as_ref()));
    claim.status.allocatable = list(status.and_then(|s| s.allocatable.as_ref()));
    Some(claim)
}

fn api_error(method: &str, e: kube::Error) -> CloudProviderError {
    CloudProviderError::other(format!("kwok provider {method}: {e}"))
}

/// The name of the Node a `kwok://` provider id stands for.
pub fn node_name(provider_id: &str) -> Option<&str> {
    provider_id
        .strip_prefix(PROVIDER_ID_PREFIX)
        .filter(|n| !n.is_empty())
}

#[async_trait]
impl CloudProvider for KwokCloudProvider {
    async fn create(&self, node_claim: &NodeClaim) -> Result<NodeClaim, CloudProviderError> {
        let name = node_claim.name();
        // A launch retried (after a crash, or a lost response) finds its Node, unless every
        // launch is a new instance.
        if self.names == FakeInstanceNames::Claim
            && let Some(existing) = self
                .nodes
                .get_opt(name)
                .await
                .map_err(|e| api_error("create", e))?
            && let Some(launched) = claim_from_node(&existing)
        {
            return Ok(merge_launch(node_claim, launched));
        }
        let requirements =
            Requirements::from_node_selector_requirements(node_claim.spec.requirements());
        let Some(choice) = choose_launch(
            &self.instance_types,
            &requirements,
            &node_claim.spec.resources.requests,
            &self.policy,
            |_, _| false,
        ) else {
            return Err(CloudProviderError::insufficient_capacity(
                Vec::new(),
                format!("no instance type with an available offering satisfies nodeclaim {name}"),
            ));
        };
        let it = &self.instance_types[choice.instance_type];
        let node_name = match self.names {
            FakeInstanceNames::Claim => name.to_string(),
            FakeInstanceNames::Unique => unique_instance_name(name),
        };
        let node = node_for_launch_named(node_claim, it, choice.offering, &node_name)?;
        let created = match self.nodes.create(&PostParams::default(), &node).await {
            Ok(n) => n,
            Err(kube::Error::Api(s)) if s.code == 409 => self
                .nodes
                .get(&node_name)
                .await
                .map_err(|e| api_error("create", e))?,
            Err(e) => return Err(api_error("create", e)),
        };
        launched_claim(node_claim, &created).ok_or_else(|| {
            CloudProviderError::other(format!("node {name} exists but was not made by kwok"))
        })
    }

    async fn delete(&self, node_claim: &NodeClaim) -> Result<(), CloudProviderError> {
        let provider_id = node_claim.status.provider_id.clone().unwrap_or_default();
        let Some(name) = node_name(&provider_id) else {
            return Err(CloudProviderError::not_found(provider_id));
        };
        // Already terminated (gone, or its deletion requested): not found, as a cloud reports
        // a terminated instance.
        match self.nodes.get_opt(name).await {
            Ok(Some(node)) if claim_from_node(&node).is_some() => {}
            Ok(_) => return Err(CloudProviderError::not_found(provider_id)),
            Err(e) => return Err(api_error("delete", e)),
        }
        match self.nodes.delete(name, &DeleteParams::default()).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 404 => {
                Err(CloudProviderError::not_found(provider_id))
            }
            Err(e) => Err(api_error("delete", e)),
        }
    }

    async fn get(&self, provider_id: &str) -> Result<NodeClaim, CloudProviderError> {
        let Some(name) = node_name(provider_id) else {
            return Err(CloudProviderError::not_found(provider_id));
        };
        match self.nodes.get_opt(name).await {
            Ok(Some(node)) => {
                claim_from_node(&node).ok_or_else(|| CloudProviderError::not_found(provider_id))
            }
            Ok(None) => Err(CloudProviderError::not_found(provider_id)),
            Err(e) => Err(api_error("get", e)),
        }
    }

    async fn list(&self) -> Result<Vec<NodeClaim>, CloudProviderError> {
        let nodes = self
            .nodes
            .list(&ListParams::default())
            .await
            .map_err(|e| api_error("list", e))?;
        Ok(nodes.items.iter().filter_map(claim_from_node).collect())
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
        karpenter_fake::provider::default_repair_policies()
    }

    fn name(&self) -> &str {
        PROVIDER_NAME
    }

    fn label_policy(&self) -> LabelPolicy {
        self.policy.clone()
    }
}

/// The NodeClaim `request` as launched on the kwok Node `node` (what a provider's `create`
/// returns): the request with the Node's labels, provider id, capacity and allocatable; `None`
/// when `node` is not a kwok Node ([`claim_from_node`]).
pub fn launched_claim(request: &NodeClaim, node: &core::Node) -> Option<NodeClaim> {
    claim_from_node(node).map(|launched| merge_launch(request, launched))
}

/// The claim as launched: the request's spec and metadata, with the instance's labels, provider
/// id, capacity and allocatable.
fn merge_launch(request: &NodeClaim, launched: NodeClaim) -> NodeClaim {
    let mut out = request.clone();
    for (k, v) in launched.metadata.labels {
        out.metadata.labels.entry(k).or_insert(v);
    }
    out.status.provider_id = launched.status.provider_id;
    out.status.capacity = launched.status.capacity;
    out.status.allocatable = launched.status.allocatable;
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim() -> NodeClaim {
        let mut spec = NodeClaimSpec::new(NodeClassReference::new(
            "karpenter.k8s.aws",
            "EC2NodeClass",
            "default",
        ));
        spec.taints = vec![Taint::new("team", "a", TaintEffect::NoSchedule)];
        spec.startup_taints = vec![Taint::new("init", "", TaintEffect::NoSchedule)];
        let mut c = NodeClaim::new("default-abcde", spec);
        c.metadata
            .labels
            .insert(labels::NODEPOOL.to_string(), "default".to_string());
        c
    }

    #[test]
    fn unique_instance_names_differ_per_launch_and_name_the_provider_id() {
        let types = karpenter_fake::catalog::instance_types(5);
        let c = claim();
        let (a, b) = (
            unique_instance_name(c.name()),
            unique_instance_name(c.name()),
        );
        assert_ne!(a, b);
        assert!(a.starts_with("default-abcde-") && a.len() > "default-abcde-".len());
        let node = node_for_launch_named(&c, &types[0], 0, &a).unwrap();
        assert_eq!(node.metadata.name.as_deref(), Some(a.as_str()));
        let launched = launched_claim(&c, &node).unwrap();
        assert_eq!(
            launched.name(),
            "default-abcde",
            "the request keeps its name"
        );
        assert_eq!(
            launched.status.provider_id.as_deref(),
            Some(format!("kwok://{a}").as_str())
        );
        assert_eq!(base36(0), "0");
        assert_eq!(base36(36 * 36 + 35), "10z");
    }

    #[test]
    fn a_launch_makes_an_annotated_node_that_maps_back_to_the_instance() {
        let types = karpenter_fake::catalog::instance_types(5);
        let c = claim();
        let node = node_for_launch(&c, &types[0], 0).unwrap();
        assert_eq!(node.metadata.name.as_deref(), Some("default-abcde"));
        let ann = node.metadata.annotations.clone().unwrap();
        assert_eq!(ann.get(KWOK_ANNOTATION).map(String::as_str), Some("fake"));
        let spec = node.spec.clone().unwrap();
        assert_eq!(spec.provider_id.as_deref(), Some("kwok://default-abcde"));
        let taints: Vec<String> = spec
            .taints
            .unwrap()
            .iter()
            .map(|t| format!("{}:{}", t.key, t.effect))
            .collect();
        assert_eq!(
            taints,
            [
                "team:NoSchedule",
                "init:NoSchedule",
                "karpenter.sh/unregistered:NoExecute"
            ]
        );
        let l = node.metadata.labels.clone().unwrap();
        assert_eq!(l.get(labels::NODEPOOL).map(String::as_str), Some("default"));
        assert_eq!(
            l.get(labels::INSTANCE_TYPE),
            Some(&types[0].name().to_string()),
            "the instance type label names the launched type"
        );
        assert!(l.contains_key(labels::ZONE));
        let status = node.status.clone().unwrap();
        assert!(status.allocatable.unwrap().contains_key("cpu"));

        let back = claim_from_node(&node).unwrap();
        assert_eq!(
            back.status.provider_id.as_deref(),
            Some("kwok://default-abcde")
        );
        assert_eq!(
            back.status.allocatable.get("cpu"),
            drop_zeros(types[0].allocatable()).get("cpu")
        );
    }

    #[test]
    fn nodes_not_made_by_the_provider_are_not_instances() {
        let types = karpenter_fake::catalog::instance_types(1);
        let mut node = node_for_launch(&claim(), &types[0], 0).unwrap();
        node.metadata.annotations = None;
        assert!(claim_from_node(&node).is_none());
        let mut node = node_for_launch(&claim(), &types[0], 0).unwrap();
        node.spec.as_mut().unwrap().provider_id = Some("aws:///us-east-1a/i-123".to_string());
        assert!(claim_from_node(&node).is_none());
        let mut node = node_for_launch(&claim(), &types[0], 0).unwrap();
        node.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                "2026-01-01T00:00:00Z".parse().unwrap(),
            ));
        assert!(
            claim_from_node(&node).is_none(),
            "a Node being deleted is a terminated instance"
        );
        assert!(node_for_launch(&claim(), &types[0], 999).is_err());
    }
}

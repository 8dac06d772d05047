//! A custom cloud provider run as a full Karpenter controller. Its "cloud" launches an instance
//! by creating a Node object annotated for kwok, which plays the kubelet: replace the bodies of
//! `create`, `delete`, `get` and `list` with your cloud's API calls. Run it against a cluster
//! with the CRDs installed (`karpenter crds | kubectl apply --server-side -f -`):
//! `cargo run -p karpenter-controller --example custom_controller -- --kubeconfig PATH`.
use std::sync::Arc;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::Node;
use karpenter_controller::kwok::{claim_from_node, launched_claim, node_for_launch, node_name};
use karpenter_controller::{ControllerArgs, PlainProvider};
use karpenter_core::api::{NodeClaim, NodePool};
use karpenter_core::cloud::{CloudProvider, CloudProviderError as Error, RepairPolicy};
use karpenter_core::launch::choose_launch;
use karpenter_core::model::{InstanceType, Offering, Overhead};
use karpenter_core::requirements::Requirements;
use karpenter_core::resources::Quantity;
use kube::api::{Api, DeleteParams, ListParams, PostParams};

/// An instance type of `cpus` CPUs and 4 GiB a CPU, on demand or spot (60 % off) in one zone.
fn instance_type(name: &str, cpus: i64, price: f64) -> Arc<InstanceType> {
    let offerings = vec![
        Offering::new("tiny-zone-a", "on-demand", price),
        Offering::new("tiny-zone-a", "spot", price * 0.4),
    ];
    let capacity = [
        ("cpu", Quantity::from_units(cpus)),
        ("memory", Quantity::from_units(cpus << 32)),
        ("pods", Quantity::from_units(110)),
    ];
    let capacity = capacity.into_iter().collect();
    Arc::new(InstanceType::new(
        name,
        Requirements::new(),
        offerings,
        capacity,
        Overhead::default(),
    ))
}

struct TinyCloud {
    nodes: Api<Node>,
    types: Vec<Arc<InstanceType>>,
}

fn api(e: kube::Error) -> Error {
    Error::other(format!("tiny cloud: {e}"))
}

#[async_trait]
impl CloudProvider for TinyCloud {
    async fn create(&self, claim: &NodeClaim) -> Result<NodeClaim, Error> {
        let wanted = Requirements::from_node_selector_requirements(claim.spec.requirements());
        let requests = &claim.spec.resources.requests;
        let policy = self.label_policy();
        let choice = choose_launch(&self.types, &wanted, requests, &policy, |_, _| false)
            .ok_or_else(|| Error::insufficient_capacity(Vec::new(), "no instance type fits"))?;
        let node = node_for_launch(claim, &self.types[choice.instance_type], choice.offering)?;
        let node = match self.nodes.create(&PostParams::default(), &node).await {
            Err(kube::Error::Api(s)) if s.code == 409 => self.nodes.get(claim.name()).await,
            created => created,
        };
        launched_claim(claim, &node.map_err(api)?).ok_or_else(|| Error::other("not ours"))
    }

    async fn delete(&self, claim: &NodeClaim) -> Result<(), Error> {
        let id = claim.status.provider_id.as_deref().unwrap_or_default();
        let name = node_name(id).ok_or_else(|| Error::not_found(id))?;
        match self.nodes.delete(name, &DeleteParams::default()).await {
            Err(kube::Error::Api(s)) if s.code == 404 => Err(Error::not_found(id)),
            deleted => deleted.map(|_| ()).map_err(api),
        }
    }

    async fn get(&self, id: &str) -> Result<NodeClaim, Error> {
        let node = self.nodes.get_opt(node_name(id).unwrap_or_default()).await;
        let claim = node.map_err(api)?.as_ref().and_then(claim_from_node);
        claim.ok_or_else(|| Error::not_found(id))
    }

    async fn list(&self) -> Result<Vec<NodeClaim>, Error> {
        let nodes = self.nodes.list(&ListParams::default()).await.map_err(api)?;
        Ok(nodes.items.iter().filter_map(claim_from_node).collect())
    }

    async fn instance_types(&self, _: &NodePool) -> Result<Vec<Arc<InstanceType>>, Error> {
        Ok(self.types.clone())
    }

    async fn is_drifted(&self, _: &NodeClaim) -> Result<Option<String>, Error> {
        Ok(None)
    }

    fn repair_policies(&self) -> Vec<RepairPolicy> {
        Vec::new()
    }

    fn name(&self) -> &str {
        "tiny"
    }
}

fn main() -> Result<(), karpenter_controller::ControllerError> {
    // The flags and environment variables of `karpenter controller`.
    karpenter_controller::run_blocking(ControllerArgs::parse_env(), |client| async move {
        let types = vec![
            instance_type("tiny-2x", 2, 0.05),
            instance_type("tiny-8x", 8, 0.18),
        ];
        Ok(PlainProvider::new(Arc::new(TinyCloud {
            nodes: Api::all(client),
            types,
        })))
    })
}

//! A custom cloud provider and one provisioning round through `dyn CloudProvider`:
//! list the instance types of a NodePool, solve the pending pods, turn each planned claim into a
//! `karpenter.sh/v1` NodeClaim and create it.
//!
//! Run with `cargo run -p karpenter-core --example custom_provider`.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use karpenter_core::api::ConditionStatus;
use karpenter_core::cloud::{NodeClassKind, RepairPolicy, UnavailableOffering};
use karpenter_core::launch::consume_reservation;
use karpenter_core::prelude::*;

/// The provider's own label: the machine family of an instance type.
const FAMILY_LABEL: &str = "cloud.example.com/family";

/// An in-memory cloud: a fixed catalog, machines kept in a map.
struct ExampleCloud {
    catalog: Mutex<Vec<Arc<InstanceType>>>,
    machines: Mutex<BTreeMap<String, NodeClaim>>,
}

impl ExampleCloud {
    fn new(catalog: Vec<Arc<InstanceType>>) -> Self {
        ExampleCloud {
            catalog: Mutex::new(catalog),
            machines: Mutex::new(BTreeMap::new()),
        }
    }

    fn lock<T>(m: &Mutex<T>) -> Result<std::sync::MutexGuard<'_, T>, CloudProviderError> {
        m.lock()
            .map_err(|e| CloudProviderError::other(format!("state poisoned: {e}")))
    }
}

#[async_trait]
impl CloudProvider for ExampleCloud {
    async fn create(&self, node_claim: &NodeClaim) -> Result<NodeClaim, CloudProviderError> {
        let mut catalog = Self::lock(&self.catalog)?;
        // The shared launch rule: cheapest compatible available offering, labels resolved.
        let launch = resolve_launch(
            node_claim,
            &catalog,
            &self.label_policy(),
            self.reservation_id_label(),
            |_, _| false,
        )
        .ok_or_else(|| {
            CloudProviderError::insufficient_capacity(
                Vec::<UnavailableOffering>::new(),
                "no instance type can launch the nodeclaim",
            )
        })?;
        if let Some(slot) = catalog.get_mut(launch.choice().instance_type) {
            consume_reservation(slot, launch.choice().offering);
        }
        let mut machines = Self::lock(&self.machines)?;
        let id = format!("example://{}", machines.len() + 1);
        let launched = launch.launched(node_claim, id.clone());
        machines.insert(id, launched.clone());
        Ok(launched)
    }

    async fn delete(&self, node_claim: &NodeClaim) -> Result<(), CloudProviderError> {
        let id = node_claim.status.provider_id.clone().unwrap_or_default();
        match Self::lock(&self.machines)?.remove(&id) {
            Some(_) => Ok(()),
            None => Err(CloudProviderError::not_found(id)),
        }
    }

    async fn get(&self, provider_id: &str) -> Result<NodeClaim, CloudProviderError> {
        Self::lock(&self.machines)?
            .get(provider_id)
            .cloned()
            .ok_or_else(|| CloudProviderError::not_found(provider_id))
    }

    async fn list(&self) -> Result<Vec<NodeClaim>, CloudProviderError> {
        Ok(Self::lock(&self.machines)?.values().cloned().collect())
    }

    async fn instance_types(
        &self,
        _node_pool: &NodePool,
    ) -> Result<Vec<Arc<InstanceType>>, CloudProviderError> {
        Ok(Self::lock(&self.catalog)?.clone())
    }

    async fn is_drifted(
        &self,
        _node_claim: &NodeClaim,
    ) -> Result<Option<String>, CloudProviderError> {
        Ok(None)
    }

    fn repair_policies(&self) -> Vec<RepairPolicy> {
        vec![RepairPolicy::new(
            karpenter_core::api::condition_types::READY,
            ConditionStatus::False,
            Duration::from_secs(30 * 60),
        )]
    }

    fn name(&self) -> &str {
        "example"
    }

    fn well_known_labels(&self) -> Vec<String> {
        vec![FAMILY_LABEL.to_string()]
    }

    fn restricted_label_domains(&self) -> Vec<String> {
        vec!["cloud.example.com".to_string()]
    }

    fn supported_node_classes(&self) -> Vec<NodeClassKind> {
        vec![NodeClassKind::new("cloud.example.com", "ExampleNodeClass")]
    }
}

fn instance_type(name: &str, family: &str, cpu: i64, price: f64) -> Arc<InstanceType> {
    let mut requirements = Requirements::new();
    requirements.add(Requirement::new(FAMILY_LABEL, Operator::In, [family]));
    let capacity: ResourceList = [
        ("cpu", Quantity::from_units(cpu)),
        ("memory", Quantity::from_bytes((cpu * 2) << 30)),
        ("pods", Quantity::from_units(110)),
    ]
    .into_iter()
    .collect();
    let offerings = vec![
        Offering::new("zone-a", "on-demand", price),
        Offering::new("zone-b", "on-demand", price * 1.05),
    ];
    Arc::new(InstanceType::new(
        name,
        requirements,
        offerings,
        capacity,
        Overhead::default(),
    ))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let cloud: Arc<dyn CloudProvider> = Arc::new(ExampleCloud::new(vec![
        instance_type("general-2", "general", 2, 0.08),
        instance_type("general-8", "general", 8, 0.32),
        instance_type("compute-4", "compute", 4, 0.15),
    ]));

    let class = NodeClassReference::new("cloud.example.com", "ExampleNodeClass", "default");
    let pool = NodePool::new(
        "default",
        NodePoolSpec::new(NodeClaimTemplate::new(NodeClaimTemplateSpec::new(class))),
    );
    if !cloud.supports_node_class(&pool.spec.template.spec.node_class_ref) {
        return Err("the NodePool's node class is not the provider's".into());
    }

    // Web pods anywhere, batch pods on the compute family (a provider label).
    let mut pods: Vec<Pod> = (0..4)
        .map(|i| {
            Pod::new("default", format!("web-{i}"))
                .with_requests([("cpu", Quantity::from_milli(1500))])
        })
        .collect();
    pods.extend((0..2).map(|i| {
        Pod::new("default", format!("batch-{i}"))
            .with_requests([("cpu", Quantity::from_units(1))])
            .with_node_selector([(FAMILY_LABEL, "compute")])
    }));

    futures::executor::block_on(async {
        let instance_types = cloud.instance_types(&pool).await?;
        let input = SchedulingInput::new()
            .with_node_pools(vec![NodePoolInput::from_nodepool(&pool, instance_types)])
            .with_pods(pods);
        // The provider's labels become well-known, so the batch pods' selector schedules.
        let options = SchedulerOptions::for_provider(cloud.as_ref());
        let results = solve(&input, &options);
        for (pod, error) in &results.pod_errors {
            println!("unschedulable {pod}: {error}");
        }
        if !results.pod_errors.is_empty() {
            return Err("some pods did not schedule".into());
        }

        let mut total = 0.0;
        for (i, claim) in results.new_node_claims.iter().enumerate() {
            let mut node_claim = to_node_claim(claim, &pool, &options.label_policy);
            node_claim.metadata.name = Some(format!("{}-{i}", claim.node_pool));
            let launched = cloud.create(&node_claim).await?;
            let labels = &launched.metadata.labels;
            let price = claim.launch_price(&options.label_policy).unwrap_or(0.0);
            total += price;
            println!(
                "{}: {} in {} for {} pods at ${price:.3}/h ({})",
                launched.name(),
                labels["node.kubernetes.io/instance-type"],
                labels["topology.kubernetes.io/zone"],
                claim.pods.len(),
                launched.status.provider_id.as_deref().unwrap_or("?"),
            );
        }
        println!("{} nodes, ${total:.3}/h", cloud.list().await?.len());
        Ok(())
    })
}

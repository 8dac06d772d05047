//! The example cloud provider shared by the `custom_provider` and `provider_conformance`
//! examples: an in-memory cloud with a fixed catalog that launches through core's launch rule.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use karpenter_core::api::ConditionStatus;
use karpenter_core::cloud::{NodeClassKind, RepairPolicy, UnavailableOffering};
use karpenter_core::labels;
use karpenter_core::launch::consume_reservation;
use karpenter_core::prelude::*;

/// The provider's own label: the machine family of an instance type.
pub const FAMILY_LABEL: &str = "cloud.example.com/family";

/// An in-memory cloud: a fixed catalog, machines kept in a map, and offerings that ran out of
/// capacity.
pub struct ExampleCloud {
    catalog: Mutex<Vec<Arc<InstanceType>>>,
    machines: Mutex<BTreeMap<String, NodeClaim>>,
    out_of_capacity: Mutex<BTreeSet<UnavailableOffering>>,
    next_id: Mutex<u64>,
}

impl ExampleCloud {
    /// A cloud offering `catalog`, with no machines.
    pub fn new(catalog: Vec<Arc<InstanceType>>) -> Self {
        ExampleCloud {
            catalog: Mutex::new(catalog),
            machines: Mutex::new(BTreeMap::new()),
            out_of_capacity: Mutex::new(BTreeSet::new()),
            next_id: Mutex::new(1),
        }
    }

    /// From now on, `offering` has no capacity: launches skip it, and a claim only it could
    /// satisfy fails with insufficient capacity.
    #[allow(dead_code)] // used by the `provider_conformance` example only
    pub fn run_out_of_capacity(&self, offering: &UnavailableOffering) {
        if let Ok(mut out) = self.out_of_capacity.lock() {
            out.insert(offering.clone());
        }
    }

    /// The mutex's guard, or an error when a panic poisoned it.
    fn lock<T>(m: &Mutex<T>) -> Result<std::sync::MutexGuard<'_, T>, CloudProviderError> {
        m.lock()
            .map_err(|e| CloudProviderError::other(format!("state poisoned: {e}")))
    }
}

#[async_trait]
impl CloudProvider for ExampleCloud {
    async fn create(&self, node_claim: &NodeClaim) -> Result<NodeClaim, CloudProviderError> {
        let mut catalog = Self::lock(&self.catalog)?;
        let out = Self::lock(&self.out_of_capacity)?.clone();
        // The shared launch rule: cheapest compatible available offering, labels resolved.
        let launch = resolve_launch(
            node_claim,
            &catalog,
            &self.label_policy(),
            self.reservation_id_label(),
            |it, o| out.contains(&UnavailableOffering::of(it, o)),
        )
        .ok_or_else(|| {
            CloudProviderError::insufficient_capacity(
                out.iter().cloned().collect(),
                "no instance type with capacity can launch the nodeclaim",
            )
        })?;
        if let Some(slot) = catalog.get_mut(launch.choice().instance_type) {
            consume_reservation(slot, launch.choice().offering);
        }
        let mut machines = Self::lock(&self.machines)?;
        let mut next_id = Self::lock(&self.next_id)?;
        let id = format!("example://{next_id}");
        *next_id += 1;
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

/// An amd64 Linux instance type of `family` with `cpu` CPUs (2 GiB each), on demand in
/// `zone-a` at `price` and in `zone-b` 5 % dearer.
pub fn instance_type(name: &str, family: &str, cpu: i64, price: f64) -> Arc<InstanceType> {
    let mut requirements = Requirements::new();
    requirements.add(Requirement::new(FAMILY_LABEL, Operator::In, [family]));
    requirements.add(Requirement::new(labels::ARCH, Operator::In, ["amd64"]));
    requirements.add(Requirement::new(labels::OS, Operator::In, ["linux"]));
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

/// The example's catalog: two general-purpose sizes and one compute size.
pub fn catalog() -> Vec<Arc<InstanceType>> {
    vec![
        instance_type("general-2", "general", 2, 0.08),
        instance_type("general-8", "general", 8, 0.32),
        instance_type("compute-4", "compute", 4, 0.15),
    ]
}

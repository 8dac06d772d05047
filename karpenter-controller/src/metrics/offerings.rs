//! The instance-type and cost gauges, computed from the instance types the provider last
//! reported for each NodePool (the operator's view; with the `NodeOverlay` gate, after the
//! overlays) and the NodeClaims the operator tracks:
//!
//! - `karpenter_cloudprovider_instance_type_offering_price_estimate` and
//!   `karpenter_cloudprovider_instance_type_offering_available` {instance_type, capacity_type,
//!   zone} (upstream: karpenter-provider-aws's `cloudprovider.metrics` controller);
//! - `karpenter_cloudprovider_instance_type_cpu_cores` and `_memory_bytes` {instance_type}
//!   (upstream: karpenter-provider-aws's instance-type provider);
//! - `karpenter_nodepools_cost_total` {nodepool}: the hourly price of every launched NodeClaim
//!   of the NodePool (upstream: core's `metrics.nodepool` controller).

use std::collections::BTreeMap;

use karpenter_core::labels;
use karpenter_core::operator::Operator;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

use super::{GaugeF, Labels};

/// The instance-type and cost families (see the module documentation).
#[derive(Debug, Default)]
pub struct OfferingMetrics {
    /// `karpenter_cloudprovider_instance_type_offering_price_estimate` {instance_type,
    /// capacity_type, zone}: the hourly price the controller decides with.
    pub price_estimate: Family<Labels, GaugeF>,
    /// `karpenter_cloudprovider_instance_type_offering_available` {instance_type,
    /// capacity_type, zone}: 1 when the offering can be launched now, else 0.
    pub available: Family<Labels, GaugeF>,
    /// `karpenter_cloudprovider_instance_type_cpu_cores` {instance_type}.
    pub cpu_cores: Family<Labels, GaugeF>,
    /// `karpenter_cloudprovider_instance_type_memory_bytes` {instance_type}.
    pub memory_bytes: Family<Labels, GaugeF>,
    /// `karpenter_nodepools_cost_total` {nodepool}.
    pub nodepools_cost_total: Family<Labels, GaugeF>,
}

/// One offering's labels: instance type, capacity type, zone.
type OfferingKey = (String, String, String);

impl OfferingMetrics {
    /// Registers the families in `registry` (prefixed `karpenter_`).
    pub(super) fn register(&self, registry: &mut Registry) {
        registry.register(
            "cloudprovider_instance_type_offering_price_estimate",
            "Instance type offering estimated hourly price used when making informed decisions on node cost calculation, based on instance type, capacity type, and zone.",
            self.price_estimate.clone(),
        );
        registry.register(
            "cloudprovider_instance_type_offering_available",
            "Instance type offering availability, based on instance type, capacity type, and zone",
            self.available.clone(),
        );
        registry.register(
            "cloudprovider_instance_type_cpu_cores",
            "VCPUs cores for a given instance type.",
            self.cpu_cores.clone(),
        );
        registry.register(
            "cloudprovider_instance_type_memory_bytes",
            "Memory, in bytes, for a given instance type.",
            self.memory_bytes.clone(),
        );
        registry.register(
            "nodepools_cost_total",
            "Total cost of the nodepool from Karpenter's perspective. Units are determined by the cloud provider. Not an authoritative source for billing. Includes modifications due to NodeOverlays",
            self.nodepools_cost_total.clone(),
        );
    }

    /// Recomputes every family from `op`'s view. The NodePool cost is left out when
    /// `cluster_state_observability` is false, as upstream's `metrics.nodepool` controller is.
    pub fn refresh(&self, op: &Operator, cluster_state_observability: bool) {
        self.price_estimate.clear();
        self.available.clear();
        self.cpu_cores.clear();
        self.memory_bytes.clear();
        self.nodepools_cost_total.clear();
        let view = op.view();
        // As upstream: an offering seen in several NodePools is available when it is in any,
        // and the last NodePool's price wins; every zone of a type also reports a `reserved`
        // offering (unavailable, price 0) when it has none.
        let mut offerings: BTreeMap<OfferingKey, (bool, f64)> = BTreeMap::new();
        for types in view.instance_types().values() {
            for it in types {
                let mut zones = Vec::new();
                for o in &it.offerings {
                    let key = (
                        it.name().to_string(),
                        o.capacity_type().to_string(),
                        o.zone().to_string(),
                    );
                    let entry = offerings.entry(key).or_insert((false, 0.0));
                    entry.0 |= o.available;
                    entry.1 = o.price;
                    zones.push(o.zone().to_string());
                }
                for zone in zones {
                    let key = (
                        it.name().to_string(),
                        labels::CAPACITY_TYPE_RESERVED.to_string(),
                        zone,
                    );
                    offerings.entry(key).or_insert((false, 0.0));
                }
                let name = vec![("instance_type", it.name().to_string())];
                if let Some(cpu) = it.capacity().get("cpu") {
                    self.cpu_cores.get_or_create(&name).set(cpu.as_f64());
                }
                if let Some(memory) = it.capacity().get("memory") {
                    self.memory_bytes.get_or_create(&name).set(memory.as_f64());
                }
            }
        }
        for ((instance_type, capacity_type, zone), (available, price)) in offerings {
            let l = vec![
                ("instance_type", instance_type),
                ("capacity_type", capacity_type),
                ("zone", zone),
            ];
            self.available
                .get_or_create(&l)
                .set(if available { 1.0 } else { 0.0 });
            self.price_estimate.get_or_create(&l).set(price);
        }
        if !cluster_state_observability {
            return;
        }
        for pool in view.node_pools().keys() {
            self.nodepools_cost_total
                .get_or_create(&vec![("nodepool", pool.clone())])
                .set(nodepool_cost(op, pool));
        }
    }
}

/// The hourly price of `pool`'s NodeClaims that carry an instance type, zone and capacity type
/// (launched ones), each at its offering's price among the NodePool's instance types. A claim
/// whose offering is not among them adds nothing (upstream logs it and undercounts too).
pub fn nodepool_cost(op: &Operator, pool: &str) -> f64 {
    let view = op.view();
    let types = view
        .instance_types()
        .get(pool)
        .map(Vec::as_slice)
        .unwrap_or_default();
    view.node_claims()
        .values()
        .filter(|c| c.metadata.labels.get(labels::NODEPOOL).map(String::as_str) == Some(pool))
        .filter_map(|c| {
            let l = &c.metadata.labels;
            let (it, zone, ct) = (
                l.get(labels::INSTANCE_TYPE)?,
                l.get(labels::ZONE)?,
                l.get(labels::CAPACITY_TYPE)?,
            );
            types
                .iter()
                .find(|t| t.name() == it)?
                .offerings
                .iter()
                .find(|o| o.zone() == zone && o.capacity_type() == ct)
                .map(|o| o.price)
        })
        .sum()
}

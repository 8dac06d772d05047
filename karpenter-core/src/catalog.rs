//! The provider-neutral instance-type catalog file of the `karpenter plan` contract
//! (`docs/plan-contract.md`, "Catalog file"): what `karpenter plan --catalog PATH` reads and what
//! providers' offline catalogs (the embedded AWS catalog) produce.
//!
//! ```yaml
//! instanceTypes:
//!   - name: m5.xlarge
//!     capacity: {cpu: "4", memory: 16Gi, pods: "58", ephemeral-storage: 20Gi}
//!     overhead:
//!       kubeReserved: {cpu: 80m, memory: 893Mi}
//!       evictionThreshold: {memory: 100Mi}
//!     labels: {kubernetes.io/arch: amd64, kubernetes.io/os: linux}
//!     offerings:
//!       - {zone: us-east-1a, capacityType: on-demand, price: 0.192}
//!       - {zone: us-east-1a, capacityType: spot, price: 0.071, available: false}
//! ```
//!
//! The core has no YAML parser: decode YAML (or JSON) into these serde types, or into a
//! [`serde_json::Value`] and call [`CatalogFile::from_json_value`], which names the instance type
//! of a decoding error. [`CatalogInstanceType::to_instance_type`] turns an entry into the
//! scheduler's [`InstanceType`]:
//!
//! - requirements: `In [value]` for every label, `node.kubernetes.io/instance-type In [name]`,
//!   and the zones and capacity types of the available offerings;
//! - offerings: [`Offering::new`] per entry, with its `available` flag;
//! - allocatable: capacity − (kubeReserved + systemReserved + evictionThreshold).
//!
//! ```
//! use karpenter_core::catalog::CatalogFile;
//! use serde_json::json;
//!
//! let file = CatalogFile::from_json_value(json!({"instanceTypes": [{
//!     "name": "m5.xlarge",
//!     "capacity": {"cpu": "4", "memory": "16Gi", "pods": "58"},
//!     "overhead": {"kubeReserved": {"cpu": "80m"}},
//!     "labels": {"kubernetes.io/arch": "amd64"},
//!     "offerings": [{"zone": "us-east-1a", "capacityType": "on-demand", "price": 0.192}]
//! }]}))
//! .unwrap();
//! let types = file.to_instance_types().unwrap();
//! assert_eq!(types[0].allocatable().get_or_zero("cpu").milli_value(), 3920);
//! assert!(types[0].requirements().get("kubernetes.io/arch").unwrap().has("amd64"));
//! ```

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::labels::{self, LabelPolicy};
use crate::model::{InstanceType, Offering, Overhead};
use crate::requirements::{Operator, Requirement, Requirements};
use crate::resources::ResourceList;

/// Why a catalog (or one of its instance types) is invalid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CatalogError {
    /// A value breaks a rule of the format; `path` names the field
    /// (`instanceTypes[3].offerings[0].price`, or relative to the instance type when the error
    /// comes from [`CatalogInstanceType::to_instance_type`]).
    #[error("{path}: {message}")]
    Invalid {
        /// The field.
        path: String,
        /// What is wrong.
        message: String,
    },
    /// The document does not have the catalog's shape (wrong types, missing fields).
    #[error("{path}: cannot decode: {message}")]
    Decode {
        /// Where decoding failed (`instanceTypes[2]`, or empty for the whole document).
        path: String,
        /// The decoder's message.
        message: String,
    },
}

impl CatalogError {
    fn invalid(path: impl Into<String>, message: impl Into<String>) -> Self {
        CatalogError::Invalid {
            path: path.into(),
            message: message.into(),
        }
    }

    /// The same error with `prefix.` put before its path.
    fn prefixed(self, prefix: &str) -> Self {
        let join = |p: String| {
            if p.is_empty() {
                prefix.to_string()
            } else {
                format!("{prefix}.{p}")
            }
        };
        match self {
            CatalogError::Invalid { path, message } => CatalogError::Invalid {
                path: join(path),
                message,
            },
            CatalogError::Decode { path, message } => CatalogError::Decode {
                path: join(path),
                message,
            },
        }
    }
}

/// A whole catalog file: `instanceTypes: [...]`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CatalogFile {
    /// The instance types, in the order given.
    #[serde(default)]
    pub instance_types: Vec<CatalogInstanceType>,
}

impl CatalogFile {
    /// Decodes a catalog from a JSON value (e.g. YAML read into a [`serde_json::Value`]). A
    /// decoding error names the instance type (`instanceTypes[2]`) it occurred in.
    pub fn from_json_value(value: Value) -> Result<Self, CatalogError> {
        let Value::Object(mut map) = value else {
            return Err(CatalogError::Decode {
                path: String::new(),
                message: "a catalog is an object with an `instanceTypes` list".into(),
            });
        };
        let items = match map.remove("instanceTypes") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(items)) => items,
            Some(_) => {
                return Err(CatalogError::Decode {
                    path: "instanceTypes".into(),
                    message: "expected a list".into(),
                });
            }
        };
        let instance_types = items
            .into_iter()
            .enumerate()
            .map(|(i, item)| {
                serde_json::from_value(item).map_err(|e| CatalogError::Decode {
                    path: format!("instanceTypes[{i}]"),
                    message: e.to_string(),
                })
            })
            .collect::<Result<_, _>>()?;
        Ok(CatalogFile { instance_types })
    }

    /// Every instance type converted with [`CatalogInstanceType::to_instance_type`], in file
    /// order. Errors carry the path from the file's root; duplicate names are rejected.
    pub fn to_instance_types(&self) -> Result<Vec<InstanceType>, CatalogError> {
        let mut seen = BTreeSet::new();
        self.instance_types
            .iter()
            .enumerate()
            .map(|(i, it)| {
                let prefix = format!("instanceTypes[{i}]");
                if !seen.insert(it.name.as_str()) {
                    return Err(CatalogError::invalid(
                        format!("{prefix}.name"),
                        format!("duplicate instance type {:?}", it.name),
                    ));
                }
                it.to_instance_type().map_err(|e| e.prefixed(&prefix))
            })
            .collect()
    }

    /// The label keys the instance types carry, sorted: a consumer adds them to its
    /// [`LabelPolicy`] as well-known labels, so that pods may select them.
    pub fn label_keys(&self) -> BTreeSet<String> {
        self.instance_types
            .iter()
            .flat_map(|it| it.labels.keys().cloned())
            .collect()
    }

    /// [`LabelPolicy::core`] plus [`CatalogFile::label_keys`] as well-known labels: the policy
    /// for a catalog that comes from no known provider.
    pub fn label_policy(&self) -> LabelPolicy {
        LabelPolicy::core().with_well_known(self.label_keys())
    }
}

/// One instance type of a catalog file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CatalogInstanceType {
    /// The instance type name, e.g. `m5.xlarge` (also its `node.kubernetes.io/instance-type`
    /// label).
    pub name: String,
    /// Full capacity: `cpu`, `memory`, `pods`, `ephemeral-storage` and extended resources such
    /// as `nvidia.com/gpu`.
    pub capacity: ResourceList,
    /// What the node reserves for itself; allocatable = capacity − all three parts.
    #[serde(default)]
    pub overhead: CatalogOverhead,
    /// The type's own single-valued labels. Zone and capacity type come from the offerings.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Where and how the type can be bought, with a price per hour.
    #[serde(default)]
    pub offerings: Vec<CatalogOffering>,
}

/// The three overhead parts of an instance type (kubelet `kubeReserved`, `systemReserved` and the
/// hard eviction thresholds).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CatalogOverhead {
    /// `kubeReserved`.
    #[serde(default)]
    pub kube_reserved: ResourceList,
    /// `systemReserved`.
    #[serde(default)]
    pub system_reserved: ResourceList,
    /// Hard eviction thresholds.
    #[serde(default)]
    pub eviction_threshold: ResourceList,
}

impl From<&CatalogOverhead> for Overhead {
    fn from(o: &CatalogOverhead) -> Overhead {
        Overhead {
            kube_reserved: o.kube_reserved.clone(),
            system_reserved: o.system_reserved.clone(),
            eviction_threshold: o.eviction_threshold.clone(),
        }
    }
}

/// One offering: a zone and a capacity type with its price.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CatalogOffering {
    /// The zone (`topology.kubernetes.io/zone`), e.g. `us-east-1a`.
    pub zone: String,
    /// `on-demand` or `spot` (`karpenter.sh/capacity-type`).
    pub capacity_type: String,
    /// Price per hour.
    pub price: f64,
    /// Whether the offering can be launched now; absent means `true`.
    #[serde(default = "default_true", skip_serializing_if = "is_true")]
    pub available: bool,
}

fn default_true() -> bool {
    true
}

#[allow(clippy::trivially_copy_pass_by_ref)] // serde's skip_serializing_if passes a reference
fn is_true(value: &bool) -> bool {
    *value
}

/// Labels a catalog entry may not set: they come from the name and the offerings.
const DERIVED_LABELS: [&str; 2] = [labels::ZONE, labels::CAPACITY_TYPE];

impl CatalogInstanceType {
    /// The scheduler's view of this entry (see the [module documentation](self)). Errors name
    /// the offending field relative to the entry (`offerings[1].price`).
    pub fn to_instance_type(&self) -> Result<InstanceType, CatalogError> {
        if self.name.is_empty() {
            return Err(CatalogError::invalid("name", "must not be empty"));
        }
        labels::validate_label_value(&self.name)
            .map_err(|e| CatalogError::invalid("name", format!("{:?}: {e}", self.name)))?;
        for (field, list) in [
            ("capacity", &self.capacity),
            ("overhead.kubeReserved", &self.overhead.kube_reserved),
            ("overhead.systemReserved", &self.overhead.system_reserved),
            (
                "overhead.evictionThreshold",
                &self.overhead.eviction_threshold,
            ),
        ] {
            if let Some((name, q)) = list.iter().find(|(_, q)| q.is_negative()) {
                return Err(CatalogError::invalid(
                    format!("{field}.{name}"),
                    format!("{q} is negative"),
                ));
            }
        }

        let mut requirements = Requirements::new();
        for (key, value) in &self.labels {
            let path = format!("labels.{key}");
            labels::validate_qualified_name(key).map_err(|e| CatalogError::invalid(&path, e))?;
            labels::validate_label_value(value)
                .map_err(|e| CatalogError::invalid(&path, format!("{value:?}: {e}")))?;
            if DERIVED_LABELS.contains(&key.as_str()) {
                return Err(CatalogError::invalid(
                    path,
                    "set by the offerings, not by labels",
                ));
            }
            if key == labels::INSTANCE_TYPE && *value != self.name {
                return Err(CatalogError::invalid(
                    path,
                    format!("{value:?} differs from the name {:?}", self.name),
                ));
            }
            requirements.add(Requirement::new(key, Operator::In, [value.as_str()]));
        }

        let mut seen = BTreeSet::new();
        let mut offerings = Vec::with_capacity(self.offerings.len());
        for (i, o) in self.offerings.iter().enumerate() {
            let path = |f: &str| format!("offerings[{i}].{f}");
            if o.zone.is_empty() {
                return Err(CatalogError::invalid(path("zone"), "must not be empty"));
            }
            labels::validate_label_value(&o.zone)
                .map_err(|e| CatalogError::invalid(path("zone"), format!("{:?}: {e}", o.zone)))?;
            if o.capacity_type != labels::CAPACITY_TYPE_ON_DEMAND
                && o.capacity_type != labels::CAPACITY_TYPE_SPOT
            {
                return Err(CatalogError::invalid(
                    path("capacityType"),
                    format!(
                        "{:?}: must be \"on-demand\" or \"spot\" (reserved offerings need a reservation, which catalog files do not describe)",
                        o.capacity_type
                    ),
                ));
            }
            if !o.price.is_finite() || o.price < 0.0 {
                return Err(CatalogError::invalid(
                    path("price"),
                    format!("{} is not a finite non-negative number", o.price),
                ));
            }
            if !seen.insert((o.zone.as_str(), o.capacity_type.as_str())) {
                return Err(CatalogError::invalid(
                    path("zone"),
                    format!("duplicate offering {} {}", o.zone, o.capacity_type),
                ));
            }
            let mut offering = Offering::new(&o.zone, &o.capacity_type, o.price);
            offering.available = o.available;
            offerings.push(offering);
        }

        Ok(InstanceType::new(
            &self.name,
            requirements,
            offerings,
            self.capacity.clone(),
            Overhead::from(&self.overhead),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::Quantity;
    use serde_json::json;

    fn m5() -> Value {
        json!({
            "name": "m5.xlarge",
            "capacity": {"cpu": "4", "memory": "16Gi", "pods": "58", "ephemeral-storage": "20Gi"},
            "overhead": {
                "kubeReserved": {"cpu": "80m", "memory": "893Mi"},
                "systemReserved": {},
                "evictionThreshold": {"memory": "100Mi"}
            },
            "labels": {
                "kubernetes.io/arch": "amd64",
                "kubernetes.io/os": "linux",
                "karpenter.k8s.aws/instance-category": "m"
            },
            "offerings": [
                {"zone": "us-east-1a", "capacityType": "on-demand", "price": 0.192},
                {"zone": "us-east-1a", "capacityType": "spot", "price": 0.071, "available": false},
                {"zone": "us-east-1b", "capacityType": "spot", "price": 0.08}
            ]
        })
    }

    fn q(s: &str) -> Quantity {
        Quantity::parse(s).unwrap()
    }

    fn file(items: Vec<Value>) -> Result<Vec<InstanceType>, CatalogError> {
        CatalogFile::from_json_value(json!({ "instanceTypes": items }))?.to_instance_types()
    }

    #[test]
    fn converts_the_contract_example() {
        let types = file(vec![m5()]).unwrap();
        let it = &types[0];
        assert_eq!(it.name(), "m5.xlarge");
        let alloc = it.allocatable();
        assert_eq!(alloc.get_or_zero("cpu"), q("3920m"));
        assert_eq!(alloc.get_or_zero("memory"), q("16Gi") - q("993Mi"));
        assert_eq!(alloc.get_or_zero("pods"), q("58"));
        assert_eq!(alloc.get_or_zero("ephemeral-storage"), q("20Gi"));
        let r = it.requirements();
        assert!(r.get(labels::INSTANCE_TYPE).unwrap().has("m5.xlarge"));
        assert!(r.get(labels::ARCH).unwrap().has("amd64"));
        assert!(!r.get(labels::ARCH).unwrap().has("arm64"));
        assert!(
            r.get("karpenter.k8s.aws/instance-category")
                .unwrap()
                .has("m")
        );
        // Zones and capacity types of the *available* offerings.
        let zone = r.get(labels::ZONE).unwrap();
        assert!(zone.has("us-east-1a") && zone.has("us-east-1b"));
        let ct = r.get(labels::CAPACITY_TYPE).unwrap();
        assert!(ct.has("on-demand") && ct.has("spot"));
        assert_eq!(it.offerings.len(), 3);
        assert!(!it.offerings[1].available);
        assert_eq!(it.available_offerings().count(), 2);
        let cheapest = it
            .cheapest_offering(&Requirements::new(), &LabelPolicy::core())
            .unwrap();
        assert_eq!((cheapest.zone(), cheapest.price), ("us-east-1b", 0.08));
    }

    #[test]
    fn round_trips_through_json() {
        let parsed = CatalogFile::from_json_value(json!({"instanceTypes": [m5()]})).unwrap();
        let text = serde_json::to_string(&parsed).unwrap();
        assert!(text.contains(r#""capacityType":"spot","price":0.071,"available":false"#));
        assert!(!text.contains(r#""available":true"#));
        let back: CatalogFile = serde_json::from_str(&text).unwrap();
        assert_eq!(back, parsed);
        let empty = CatalogFile::from_json_value(json!({})).unwrap();
        assert!(empty.instance_types.is_empty());
    }

    #[test]
    fn optional_parts_default() {
        let types = file(vec![json!({"name": "tiny", "capacity": {"cpu": 1}})]).unwrap();
        let it = &types[0];
        assert_eq!(it.allocatable().get_or_zero("cpu"), q("1"));
        assert!(it.offerings.is_empty());
        // No available offering: the zone requirement allows nothing.
        assert!(it.requirements().get(labels::ZONE).unwrap().is_empty());
    }

    #[test]
    fn errors_name_the_field() {
        let cases: Vec<(Value, &str)> = vec![
            (json!({"name": "", "capacity": {}}), "instanceTypes[0].name"),
            (
                json!({"name": "a", "capacity": {"cpu": "-1"}}),
                "instanceTypes[0].capacity.cpu",
            ),
            (
                json!({"name": "a", "capacity": {}, "overhead": {"kubeReserved": {"memory": "-1Mi"}}}),
                "instanceTypes[0].overhead.kubeReserved.memory",
            ),
            (
                json!({"name": "a", "capacity": {}, "labels": {"topology.kubernetes.io/zone": "z"}}),
                "instanceTypes[0].labels.topology.kubernetes.io/zone",
            ),
            (
                json!({"name": "a", "capacity": {}, "labels": {"node.kubernetes.io/instance-type": "b"}}),
                "instanceTypes[0].labels.node.kubernetes.io/instance-type",
            ),
            (
                json!({"name": "a", "capacity": {}, "labels": {"bad key!": "x"}}),
                "instanceTypes[0].labels.bad key!",
            ),
            (
                json!({"name": "a", "capacity": {}, "offerings": [{"zone": "z", "capacityType": "reserved", "price": 1.0}]}),
                "instanceTypes[0].offerings[0].capacityType",
            ),
            (
                json!({"name": "a", "capacity": {}, "offerings": [{"zone": "z", "capacityType": "spot", "price": -1.0}]}),
                "instanceTypes[0].offerings[0].price",
            ),
            (
                json!({"name": "a", "capacity": {}, "offerings": [
                    {"zone": "z", "capacityType": "spot", "price": 1.0},
                    {"zone": "z", "capacityType": "spot", "price": 2.0}]}),
                "instanceTypes[0].offerings[1].zone",
            ),
            (
                json!({"name": "a", "capacity": {}, "offerings": [{"zone": "", "capacityType": "spot", "price": 1.0}]}),
                "instanceTypes[0].offerings[0].zone",
            ),
        ];
        for (item, path) in cases {
            let err = file(vec![item.clone()]).unwrap_err();
            match &err {
                CatalogError::Invalid { path: p, .. } => assert_eq!(p, path, "{item}"),
                other => panic!("{item}: {other:?}"),
            }
            assert!(err.to_string().starts_with(path));
        }
        let dup = file(vec![m5(), m5()]).unwrap_err();
        assert!(
            matches!(&dup, CatalogError::Invalid { path, .. } if path == "instanceTypes[1].name")
        );
    }

    #[test]
    fn decode_errors_name_the_entry() {
        let err = CatalogFile::from_json_value(json!({"instanceTypes": [m5(), {"name": "x"}]}))
            .unwrap_err();
        assert!(
            matches!(&err, CatalogError::Decode { path, message } if path == "instanceTypes[1]" && message.contains("capacity")),
            "{err:?}"
        );
        let err = CatalogFile::from_json_value(json!({"instanceTypes": [
            {"name": "x", "capacity": {"cpu": "lots"}}
        ]}))
        .unwrap_err();
        assert!(matches!(err, CatalogError::Decode { .. }));
        assert!(CatalogFile::from_json_value(json!([1])).is_err());
        assert!(CatalogFile::from_json_value(json!({"instanceTypes": 3})).is_err());
    }

    #[test]
    fn label_policy_makes_catalog_labels_well_known() {
        let parsed = CatalogFile::from_json_value(json!({"instanceTypes": [m5()]})).unwrap();
        let policy = parsed.label_policy();
        assert!(policy.is_well_known("karpenter.k8s.aws/instance-category"));
        assert!(policy.is_well_known(labels::ZONE));
        assert!(parsed.label_keys().contains("kubernetes.io/os"));
    }
}

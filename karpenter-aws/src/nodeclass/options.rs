//! How an EC2NodeClass shapes instance types: the catalog options (AMI family, ephemeral
//! storage, kubelet pods and reservations) that the catalog conversion applies, as upstream's
//! instance-type provider does.

use karpenter_core::api::{ValidationError, ValidationErrorKind, ValidationErrors};
use karpenter_core::resources::{Quantity, ResourceList};

use super::{EC2NodeClass, EC2NodeClassSpec};
use crate::catalog::{AmiFamily, AwsCatalogOptions};

/// The device whose volume holds ephemeral storage for a family (`None` for Custom).
pub fn ephemeral_device(family: AmiFamily) -> Option<&'static str> {
    match family {
        AmiFamily::Al2 | AmiFamily::Al2023 => Some("/dev/xvda"),
        AmiFamily::Bottlerocket => Some("/dev/xvdb"),
        AmiFamily::Windows2019 | AmiFamily::Windows2022 | AmiFamily::Windows2025 => {
            Some("/dev/sda1")
        }
        AmiFamily::Custom => None,
    }
}

impl EC2NodeClassSpec {
    /// The ephemeral-storage volume size in bytes, upstream's order: the `rootVolume: true`
    /// mapping if it has a size; for Custom the last mapping's size; else the mapping on the
    /// family's ephemeral device; else `None` (the family default, 20Gi; Windows 50Gi).
    /// `instanceStorePolicy: RAID0` takes precedence for types with instance store (the
    /// catalog applies it per type). Returns the path of a size that is not a quantity.
    pub fn ephemeral_storage_bytes(
        &self,
        family: AmiFamily,
    ) -> Result<Option<i64>, ValidationError> {
        let bdms = &self.block_device_mappings;
        let pick = bdms
            .iter()
            .position(|b| b.root_volume && b.ebs.as_ref().is_some_and(|e| e.volume_size.is_some()))
            .or_else(|| {
                if family == AmiFamily::Custom {
                    bdms.len().checked_sub(1)
                } else {
                    let dev = ephemeral_device(family)?;
                    bdms.iter()
                        .position(|b| b.device_name.as_deref() == Some(dev))
                }
            });
        let Some(i) = pick else { return Ok(None) };
        let Some(size) = bdms[i].ebs.as_ref().and_then(|e| e.volume_size.as_deref()) else {
            return Ok(None);
        };
        let path = format!("spec.blockDeviceMappings[{i}].ebs.volumeSize");
        match Quantity::parse(size) {
            Ok(q) if q.value() > 0 => Ok(Some(q.value())),
            Ok(q) => Err(invalid(path, format!("{q} is not positive"))),
            Err(e) => Err(invalid(path, e.to_string())),
        }
    }
}

fn invalid(path: String, message: String) -> ValidationError {
    ValidationError {
        path,
        kind: ValidationErrorKind::Invalid,
        message,
    }
}

fn resource_list(
    map: Option<&std::collections::BTreeMap<String, String>>,
    path: &str,
    errs: &mut Vec<ValidationError>,
) -> ResourceList {
    let mut list = ResourceList::new();
    for (k, v) in map.into_iter().flatten() {
        match Quantity::parse(v) {
            Ok(q) => list.insert(k.clone(), q),
            Err(e) => errs.push(invalid(format!("{path}[{k}]"), e.to_string())),
        }
    }
    list
}

impl EC2NodeClass {
    /// The catalog options of this class on top of `base` (region, VM overhead, spot price
    /// factor, reserved ENIs and the placement-group strategy are kept): AMI family, ephemeral
    /// storage ([`EC2NodeClassSpec::ephemeral_storage_bytes`]), `instanceStorePolicy`,
    /// `networkInterfaces`, `cpuOptions.nestedVirtualization`, `connectionTracking`, and kubelet
    /// `maxPods`, `podsPerCore`, `kubeReserved`, `systemReserved`, `evictionHard`.
    ///
    /// Call [`EC2NodeClass::validate`] first; this only reports what it cannot convert (an
    /// unknown AMI family, a size or reservation that is not a quantity, a bad eviction value).
    pub fn catalog_options(
        &self,
        base: &AwsCatalogOptions,
    ) -> Result<AwsCatalogOptions, ValidationErrors> {
        let spec = &self.spec;
        let mut errs = Vec::new();
        let family = match spec.resolved_ami_family() {
            Some(f) => f,
            None => {
                errs.push(ValidationError {
                    path: "spec.amiFamily".into(),
                    kind: ValidationErrorKind::Required,
                    message: "no AMI family: set amiFamily or an alias term".into(),
                });
                AmiFamily::default()
            }
        };
        let mut opts = AwsCatalogOptions {
            ami_family: family,
            ..base.clone()
        };
        match spec.ephemeral_storage_bytes(family) {
            Ok(bytes) => opts.ephemeral_storage_bytes = bytes,
            Err(e) => errs.push(e),
        }
        opts.instance_store_raid0 = spec.instance_store_policy.as_deref() == Some("RAID0");
        opts.network_interfaces = spec
            .network_interfaces
            .iter()
            .map(|n| crate::catalog::InterfaceSlot {
                network_card_index: n.network_card_index,
                device_index: n.device_index,
                efa_only: n.interface_type == "efa-only",
            })
            .collect();
        opts.nested_virtualization = spec
            .cpu_options
            .as_ref()
            .and_then(|c| c.nested_virtualization.as_deref())
            == Some("enabled");
        opts.connection_tracking = spec.connection_tracking.is_some();
        if let Some(k) = &spec.kubelet {
            opts.max_pods = k.max_pods;
            opts.pods_per_core = k.pods_per_core;
            opts.kube_reserved = resource_list(
                k.kube_reserved.as_ref(),
                "spec.kubelet.kubeReserved",
                &mut errs,
            );
            opts.system_reserved = resource_list(
                k.system_reserved.as_ref(),
                "spec.kubelet.systemReserved",
                &mut errs,
            );
            opts.eviction_hard = k.eviction_hard.clone().unwrap_or_default();
        }
        if errs.is_empty()
            && let Err(e) = opts.validate()
        {
            errs.push(invalid("spec.kubelet".into(), e.to_string()));
        }
        if errs.is_empty() {
            Ok(opts)
        } else {
            Err(ValidationErrors(errs))
        }
    }
}

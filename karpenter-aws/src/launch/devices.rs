//! The block devices of a launch template: the EC2NodeClass's `spec.blockDeviceMappings` when
//! it lists any, else its AMI family's default root volume(s), as upstream. Every default is an
//! encrypted gp3 volume; AL2 and AL2023 get `/dev/xvda` of 20Gi, Bottlerocket its OS volume
//! `/dev/xvda` of 4Gi and its data volume `/dev/xvdb` of 20Gi, the Windows families `/dev/sda1`
//! of 50Gi, and a Custom AMI none (EC2 then uses the AMI's own mappings).

use crate::catalog::AmiFamily;
use crate::nodeclass::{BlockDevice, BlockDeviceMapping, EC2NodeClass};

/// The volume type of every default volume.
pub const DEFAULT_VOLUME_TYPE: &str = "gp3";

/// One default volume: encrypted gp3 of `size` on `device`.
fn default_volume(device: &str, size: &str) -> BlockDeviceMapping {
    BlockDeviceMapping {
        device_name: Some(device.to_string()),
        ebs: Some(BlockDevice {
            encrypted: Some(true),
            volume_type: Some(DEFAULT_VOLUME_TYPE.to_string()),
            volume_size: Some(size.to_string()),
            ..BlockDevice::default()
        }),
        root_volume: false,
    }
}

/// The block devices an AMI family's launch templates get when the EC2NodeClass lists none.
pub fn default_block_device_mappings(family: AmiFamily) -> Vec<BlockDeviceMapping> {
    match family {
        AmiFamily::Al2 | AmiFamily::Al2023 => vec![default_volume("/dev/xvda", "20Gi")],
        AmiFamily::Bottlerocket => vec![
            default_volume("/dev/xvda", "4Gi"),
            default_volume("/dev/xvdb", "20Gi"),
        ],
        AmiFamily::Windows2019 | AmiFamily::Windows2022 | AmiFamily::Windows2025 => {
            vec![default_volume("/dev/sda1", "50Gi")]
        }
        AmiFamily::Custom => Vec::new(),
    }
}

/// The block devices of `class`'s launch templates: `spec.blockDeviceMappings` as written when
/// it lists any (it replaces the defaults entirely), else the defaults of its AMI family
/// (AL2023 when the class names none).
pub fn block_device_mappings(class: &EC2NodeClass) -> Vec<BlockDeviceMapping> {
    if !class.spec.block_device_mappings.is_empty() {
        return class.spec.block_device_mappings.clone();
    }
    default_block_device_mappings(class.spec.resolved_ami_family().unwrap_or_default())
}

/// A volume size quantity (`20Gi`, `100G`) in whole GiB, rounded up, as the EC2 API takes it;
/// `None` for an unparsable quantity.
pub fn volume_size_gib(size: &str) -> Option<i32> {
    let q = karpenter_core::resources::Quantity::parse(size).ok()?;
    let bytes = u64::try_from(q.value()).unwrap_or(0);
    Some(i32::try_from(bytes.div_ceil(1 << 30)).unwrap_or(i32::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class(family: Option<&str>, alias: Option<&str>) -> EC2NodeClass {
        let mut spec = serde_json::json!({
            "role": "R",
            "subnetSelectorTerms": [{"id": "subnet-1"}],
            "securityGroupSelectorTerms": [{"id": "sg-1"}],
            "amiSelectorTerms": [{"id": "ami-1"}],
        });
        if let Some(f) = family {
            spec["amiFamily"] = f.into();
        }
        if let Some(a) = alias {
            spec["amiSelectorTerms"] = serde_json::json!([{"alias": a}]);
        }
        EC2NodeClass::from_json_value(serde_json::json!({
            "apiVersion": "karpenter.k8s.aws/v1",
            "kind": "EC2NodeClass",
            "metadata": {"name": "default"},
            "spec": spec,
        }))
        .unwrap()
    }

    /// (device, size) of every volume, each checked to be an encrypted gp3 volume with nothing
    /// else set.
    fn volumes(mappings: &[BlockDeviceMapping]) -> Vec<(String, String)> {
        mappings
            .iter()
            .map(|m| {
                let ebs = m.ebs.as_ref().unwrap();
                assert_eq!(ebs.encrypted, Some(true));
                assert_eq!(ebs.volume_type.as_deref(), Some("gp3"));
                assert_eq!(
                    BlockDevice {
                        encrypted: None,
                        volume_type: None,
                        volume_size: None,
                        ..ebs.clone()
                    },
                    BlockDevice::default()
                );
                assert!(!m.root_volume);
                (
                    m.device_name.clone().unwrap(),
                    ebs.volume_size.clone().unwrap(),
                )
            })
            .collect()
    }

    fn pairs(xs: &[(&str, &str)]) -> Vec<(String, String)> {
        xs.iter()
            .map(|(d, s)| (d.to_string(), s.to_string()))
            .collect()
    }

    #[test]
    fn every_family_has_upstreams_defaults() {
        let xvda20 = pairs(&[("/dev/xvda", "20Gi")]);
        let sda50 = pairs(&[("/dev/sda1", "50Gi")]);
        let cases = [
            (AmiFamily::Al2, xvda20.clone()),
            (AmiFamily::Al2023, xvda20),
            (
                AmiFamily::Bottlerocket,
                pairs(&[("/dev/xvda", "4Gi"), ("/dev/xvdb", "20Gi")]),
            ),
            (AmiFamily::Windows2019, sda50.clone()),
            (AmiFamily::Windows2022, sda50.clone()),
            (AmiFamily::Windows2025, sda50),
            (AmiFamily::Custom, vec![]),
        ];
        for (family, want) in cases {
            let got = default_block_device_mappings(family);
            assert_eq!(volumes(&got), want, "{family:?}");
            // The class of that family gets the same.
            assert_eq!(
                block_device_mappings(&class(Some(family.name()), None)),
                got,
                "{family:?}"
            );
        }
    }

    #[test]
    fn the_family_of_an_alias_or_the_default_family_decides() {
        assert_eq!(
            volumes(&block_device_mappings(&class(
                None,
                Some("bottlerocket@latest")
            ))),
            pairs(&[("/dev/xvda", "4Gi"), ("/dev/xvdb", "20Gi")])
        );
        assert_eq!(
            volumes(&block_device_mappings(&class(
                None,
                Some("windows2022@latest")
            ))),
            pairs(&[("/dev/sda1", "50Gi")])
        );
        let mut no_family = class(None, None);
        no_family.spec.ami_family = None;
        assert_eq!(
            volumes(&block_device_mappings(&no_family)),
            pairs(&[("/dev/xvda", "20Gi")])
        );
    }

    #[test]
    fn spec_mappings_replace_the_defaults_entirely() {
        let mut c = class(Some("Bottlerocket"), None);
        c.spec.block_device_mappings = vec![BlockDeviceMapping {
            device_name: Some("/dev/xvdb".into()),
            ebs: Some(BlockDevice {
                volume_size: Some("100Gi".into()),
                volume_type: Some("gp2".into()),
                ..BlockDevice::default()
            }),
            root_volume: true,
        }];
        assert_eq!(block_device_mappings(&c), c.spec.block_device_mappings);
        let mut custom = class(Some("Custom"), None);
        custom.spec.block_device_mappings = c.spec.block_device_mappings.clone();
        assert_eq!(block_device_mappings(&custom), c.spec.block_device_mappings);
    }

    #[test]
    fn volume_sizes_round_up_to_whole_gib() {
        assert_eq!(volume_size_gib("20Gi"), Some(20));
        assert_eq!(volume_size_gib("4Gi"), Some(4));
        assert_eq!(volume_size_gib("100G"), Some(94));
        assert_eq!(volume_size_gib("1Mi"), Some(1));
        assert_eq!(volume_size_gib("1Ti"), Some(1024));
        assert_eq!(volume_size_gib("junk"), None);
    }
}

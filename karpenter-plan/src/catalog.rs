//! `--catalog aws|fake:N|PATH`: where instance types come from, with the label policy that goes
//! with them.
//!
//! - `aws` (default): the embedded us-east-1 catalog of `karpenter-aws`, built per EC2NodeClass
//!   (AMI family, root volume size, instance-store policy and kubelet settings shape capacity
//!   and overhead, as upstream). Spot prices are an estimate (`--spot-price-factor`).
//! - `fake:N`: upstream's `fake.InstanceTypes(N)` from `karpenter-fake`.
//! - `PATH`: a catalog file in the contract's format (YAML or JSON).

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Arc;

use karpenter_aws::catalog::{
    AwsCatalogOptions, CatalogSources, DEFAULT_SPOT_PRICE_FACTOR, EMBEDDED_REGION, build_catalog,
    labels as aws_labels,
};
use karpenter_core::catalog::CatalogFile;
use karpenter_core::labels::LabelPolicy;
use karpenter_core::model::InstanceType;
use serde::Serialize;
use serde_json::Value;

/// EC2NodeClass documents decoded and validated (moved to [`crate::manifests`]).
pub use crate::manifests::typed_nodeclass;
use crate::manifests::{Located, ManifestError, NodeClass, nodeclass_error};

/// What `--catalog` accepts, for messages.
pub const CATALOG_NAMES: &str = "--catalog takes aws (the embedded us-east-1 catalog), fake:N \
     (upstream's N generated test instance types) or the path of a catalog file";

/// The `--catalog` argument.
#[derive(Debug, Clone, PartialEq)]
pub enum CatalogSpec {
    /// The embedded AWS catalog.
    Aws,
    /// `fake:N`.
    Fake(usize),
    /// A catalog file.
    Path(PathBuf),
}

impl FromStr for CatalogSpec {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        if s == "aws" {
            return Ok(CatalogSpec::Aws);
        }
        if let Some(n) = s.strip_prefix("fake:") {
            return match n.parse::<usize>() {
                Ok(n) if n > 0 => Ok(CatalogSpec::Fake(n)),
                _ => Err(format!(
                    "invalid catalog {s:?}: fake:N needs a positive number of instance types"
                )),
            };
        }
        if s.is_empty() {
            return Err("empty catalog".into());
        }
        Ok(CatalogSpec::Path(PathBuf::from(s)))
    }
}

impl fmt::Display for CatalogSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CatalogSpec::Aws => f.write_str("aws"),
            CatalogSpec::Fake(n) => write!(f, "fake:{n}"),
            CatalogSpec::Path(p) => write!(f, "{}", p.display()),
        }
    }
}

/// What the output says about the catalog (`catalog` in JSON).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CatalogInfo {
    /// `aws`, `fake:N` or the file path.
    pub name: String,
    /// The region, for the AWS catalog.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    /// How spot prices were obtained, when they are not real prices.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spot_prices: Option<String>,
}

/// Why the catalog could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum CatalogLoadError {
    /// Bad user input (a catalog file, an EC2NodeClass setting, an option): exit status 2.
    #[error("{0}")]
    Input(String),
    /// The embedded data failed to load (a bug): exit status 1.
    #[error("embedded AWS catalog: {0}")]
    Internal(String),
}

impl From<ManifestError> for CatalogLoadError {
    fn from(e: ManifestError) -> Self {
        CatalogLoadError::Input(e.to_string())
    }
}

/// A loaded catalog.
pub struct Catalog {
    /// What it is.
    pub info: CatalogInfo,
    /// The label policy: core plus the provider's well-known labels and restricted domains.
    pub policy: LabelPolicy,
    source: Source,
}

enum Source {
    Fixed(Vec<Arc<InstanceType>>),
    Aws {
        sources: Box<CatalogSources>,
        spot_price_factor: f64,
        built: Vec<(AwsCatalogOptions, Vec<Arc<InstanceType>>)>,
    },
}

impl fmt::Debug for Catalog {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Catalog").field("info", &self.info).finish()
    }
}

/// The label policy of the AWS provider: core's, plus `karpenter.k8s.aws/*` instance labels as
/// well-known and `karpenter.k8s.aws` as a restricted domain.
pub fn aws_label_policy() -> LabelPolicy {
    LabelPolicy::core()
        .with_well_known(aws_labels::WELL_KNOWN)
        .with_restricted_domains([aws_labels::GROUP])
}

impl Catalog {
    /// Loads the catalog. `spot_price_factor` applies to `aws` only (an error otherwise).
    pub fn load(
        spec: &CatalogSpec,
        spot_price_factor: Option<f64>,
    ) -> Result<Catalog, CatalogLoadError> {
        if spot_price_factor.is_some() && *spec != CatalogSpec::Aws {
            return Err(CatalogLoadError::Input(format!(
                "--spot-price-factor applies to --catalog aws only, not {spec}"
            )));
        }
        match spec {
            CatalogSpec::Aws => {
                let factor = spot_price_factor.unwrap_or(DEFAULT_SPOT_PRICE_FACTOR);
                if !factor.is_finite() || factor <= 0.0 {
                    return Err(CatalogLoadError::Input(format!(
                        "--spot-price-factor {factor}: must be a finite positive number"
                    )));
                }
                let sources = CatalogSources::embedded()
                    .map_err(|e| CatalogLoadError::Internal(e.to_string()))?;
                Ok(Catalog {
                    info: CatalogInfo {
                        name: "aws".into(),
                        region: Some(EMBEDDED_REGION.into()),
                        spot_prices: Some(format!("estimate: {factor} x on-demand")),
                    },
                    policy: aws_label_policy(),
                    source: Source::Aws {
                        sources: Box::new(sources),
                        spot_price_factor: factor,
                        built: Vec::new(),
                    },
                })
            }
            CatalogSpec::Fake(n) => Ok(Catalog {
                info: CatalogInfo {
                    name: format!("fake:{n}"),
                    region: None,
                    spot_prices: None,
                },
                policy: karpenter_fake::catalog::fake_label_policy(),
                source: Source::Fixed(karpenter_fake::catalog::instance_types(*n)),
            }),
            CatalogSpec::Path(path) => {
                let name = path.display().to_string();
                let text = std::fs::read_to_string(path).map_err(|e| {
                    if e.kind() == std::io::ErrorKind::NotFound {
                        CatalogLoadError::Input(format!(
                            "--catalog {name}: not a catalog name and no such file; {CATALOG_NAMES}"
                        ))
                    } else {
                        CatalogLoadError::Input(format!("{name}: {e}"))
                    }
                })?;
                let value: Value = if path.extension().is_some_and(|e| e == "json") {
                    serde_json::from_str(&text).map_err(|e| {
                        CatalogLoadError::Input(format!("{name}: invalid JSON: {e}"))
                    })?
                } else {
                    serde_saphyr::from_str(&text).map_err(|e| {
                        CatalogLoadError::Input(format!("{name}: invalid YAML: {e}"))
                    })?
                };
                let file = CatalogFile::from_json_value(value)
                    .map_err(|e| CatalogLoadError::Input(format!("{name}: {e}")))?;
                let types = file
                    .to_instance_types()
                    .map_err(|e| CatalogLoadError::Input(format!("{name}: {e}")))?;
                Ok(Catalog {
                    info: CatalogInfo {
                        name,
                        region: None,
                        spot_prices: None,
                    },
                    policy: file.label_policy(),
                    source: Source::Fixed(types.into_iter().map(Arc::new).collect()),
                })
            }
        }
    }

    /// The instance types a NodePool of `nodeclass` can launch (the AWS catalog honours the
    /// EC2NodeClass; the others ignore it).
    pub fn instance_types_for(
        &mut self,
        nodeclass: Option<&Located<NodeClass>>,
    ) -> Result<Vec<Arc<InstanceType>>, CatalogLoadError> {
        match &mut self.source {
            Source::Fixed(types) => Ok(types.clone()),
            Source::Aws {
                sources,
                spot_price_factor,
                built,
            } => {
                let mut opts = match nodeclass {
                    Some(nc) => aws_options(&nc.origin, &nc.name, &nc.object.value)?,
                    None => AwsCatalogOptions::default(),
                };
                opts.spot_price_factor = *spot_price_factor;
                if let Some((_, types)) = built.iter().find(|(o, _)| *o == opts) {
                    return Ok(types.clone());
                }
                let report = build_catalog(sources, &opts).map_err(|e| match nodeclass {
                    Some(nc) => CatalogLoadError::Input(format!("{}: {}: {e}", nc.origin, nc.name)),
                    None => CatalogLoadError::Internal(e.to_string()),
                })?;
                let types = report
                    .instance_types
                    .iter()
                    .map(|it| {
                        it.to_instance_type()
                            .map(Arc::new)
                            .map_err(|e| CatalogLoadError::Internal(format!("{}: {e}", it.name)))
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                built.push((opts, types.clone()));
                Ok(types)
            }
        }
    }
}

/// Catalog options from an EC2NodeClass, through the typed class of `karpenter-aws`: the
/// document is decoded as an [`EC2NodeClass`](karpenter_aws::nodeclass::EC2NodeClass), checked with upstream's CRD rules
/// ([`EC2NodeClass::validate`](karpenter_aws::nodeclass::EC2NodeClass::validate)) and turned into options ([`EC2NodeClass::catalog_options`](karpenter_aws::nodeclass::EC2NodeClass::catalog_options):
/// AMI family, ephemeral storage from the block devices, `instanceStorePolicy`, kubelet
/// `maxPods`, `podsPerCore`, `kubeReserved`, `systemReserved`, `evictionHard`). Errors name the
/// first offending field; the message lists every violation.
pub fn aws_options(
    origin: &str,
    object: &str,
    value: &Value,
) -> Result<AwsCatalogOptions, ManifestError> {
    let class = typed_nodeclass(origin, object, value)?;
    class
        .catalog_options(&AwsCatalogOptions::default())
        .map_err(|errs| nodeclass_error(origin, object, errs))
}

#[cfg(test)]
mod tests {
    use super::*;
    use karpenter_aws::catalog::AmiFamily;
    use karpenter_core::resources::Quantity;
    use serde_json::json;

    fn origin() -> String {
        "c.yaml: document 1".to_string()
    }

    #[test]
    fn parses_specs() {
        assert_eq!("aws".parse::<CatalogSpec>(), Ok(CatalogSpec::Aws));
        assert_eq!(
            "fake:400".parse::<CatalogSpec>(),
            Ok(CatalogSpec::Fake(400))
        );
        assert!("fake:0".parse::<CatalogSpec>().is_err());
        assert!("fake:x".parse::<CatalogSpec>().is_err());
        assert_eq!(
            "cat.yaml".parse::<CatalogSpec>(),
            Ok(CatalogSpec::Path("cat.yaml".into()))
        );
    }

    fn class(spec: Value) -> Value {
        let mut full = json!({
            "role": "r",
            "subnetSelectorTerms": [{"id": "subnet-1"}],
            "securityGroupSelectorTerms": [{"id": "sg-1"}],
            "amiSelectorTerms": [{"alias": "al2023@latest"}],
        });
        for (k, v) in spec.as_object().unwrap() {
            full[k] = v.clone();
        }
        json!({"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass",
               "metadata": {"name": "x"}, "spec": full})
    }

    #[test]
    fn nodeclass_shapes_the_aws_options() {
        let v = class(json!({
            "amiSelectorTerms": [{"alias": "bottlerocket@latest"}],
            "blockDeviceMappings": [
                {"deviceName": "/dev/xvda", "ebs": {"volumeSize": "4Gi"}},
                {"deviceName": "/dev/xvdb", "ebs": {"volumeSize": "100Gi"}}
            ],
            "kubelet": {"maxPods": 110, "kubeReserved": {"cpu": "200m"},
                        "evictionHard": {"memory.available": "5%"}}
        }));
        let o = aws_options(&origin(), "EC2NodeClass/x", &v).unwrap();
        assert_eq!(o.ami_family, AmiFamily::Bottlerocket);
        assert_eq!(o.ephemeral_storage_bytes, Some(100 << 30));
        assert_eq!(o.max_pods, Some(110));
        assert_eq!(
            o.kube_reserved.get("cpu"),
            Some(Quantity::parse("200m").unwrap())
        );
        let root = class(json!({
            "blockDeviceMappings": [{"deviceName": "/dev/sdz", "rootVolume": true, "ebs": {"volumeSize": "50Gi"}}]}));
        let o = aws_options(&origin(), "x", &root).unwrap();
        assert_eq!(o.ephemeral_storage_bytes, Some(50 << 30));
        assert_eq!(o.ami_family, AmiFamily::Al2023);
    }

    #[test]
    fn bad_nodeclass_settings_name_the_field() {
        for (v, field) in [
            (class(json!({"amiFamily": "Plan9"})), "spec.amiFamily"),
            (
                class(json!({"amiSelectorTerms": [{"alias": "dos@1"}]})),
                "spec.amiSelectorTerms[0].alias",
            ),
            (
                class(json!({"kubelet": {"maxPods": -3}})),
                "spec.kubelet.maxPods",
            ),
            (
                class(json!({"kubelet": {"maxPods": "lots"}})),
                "spec.kubelet.maxPods",
            ),
            (
                class(json!({"kubelet": {"kubeReserved": {"cpu": "lots"}}})),
                "spec.kubelet.kubeReserved[cpu]",
            ),
            (
                class(
                    json!({"blockDeviceMappings": [{"deviceName": "/dev/xvda", "ebs": {"volumeSize": "big"}}]}),
                ),
                "spec.blockDeviceMappings[0].ebs.volumeSize",
            ),
            (
                class(json!({"tags": {"karpenter.sh/nodepool": "x"}})),
                "spec.tags[karpenter.sh/nodepool]",
            ),
            (
                class(json!({"metadataOptions": {"httpPutResponseHopLimit": 0}})),
                "spec.metadataOptions.httpPutResponseHopLimit",
            ),
        ] {
            match aws_options(&origin(), "x", &v) {
                Err(ManifestError::Invalid { field: f, .. }) => assert_eq!(f, field, "{v}"),
                other => panic!("{v}: {other:?}"),
            }
        }
    }

    #[test]
    fn spot_price_factor_only_for_aws() {
        assert!(matches!(
            Catalog::load(&CatalogSpec::Fake(3), Some(0.5)),
            Err(CatalogLoadError::Input(_))
        ));
        assert!(matches!(
            Catalog::load(&CatalogSpec::Aws, Some(0.0)),
            Err(CatalogLoadError::Input(_))
        ));
        let c = Catalog::load(&CatalogSpec::Fake(3), None).unwrap();
        assert_eq!(c.info.name, "fake:3");
    }
}

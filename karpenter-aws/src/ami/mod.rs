//! AMI resolution as pure functions: the SSM public parameters behind an alias, the
//! DescribeImages queries of the other terms, choosing one image per requirement set (newest
//! first, deprecated last), and mapping instance types to the AMIs that serve them.
//!
//! The SDK shell: [`alias_parameters`] → SSM GetParameter for each (missing ones skipped) →
//! DescribeImages with the returned ids → [`alias_candidates`]; or [`image_queries`] →
//! DescribeImages per query → [`term_candidates`]; then [`select_images`] gives
//! `status.amis`.

use std::collections::BTreeMap;

use karpenter_core::requirements::{NodeSelectorRequirement, Operator, Requirements};

use crate::catalog::AmiFamily;
use crate::catalog::labels::{INSTANCE_ACCELERATOR_COUNT, INSTANCE_GPU_COUNT};
use crate::nodeclass::{Alias, AmiSelectorTerm, StatusAmi};
use crate::resolve::{Filter, tag_filters};

/// `kubernetes.io/arch`.
pub const ARCH_LABEL: &str = "kubernetes.io/arch";
/// `kubernetes.io/os`.
pub const OS_LABEL: &str = "kubernetes.io/os";
/// `node.kubernetes.io/windows-build`.
pub const WINDOWS_BUILD_LABEL: &str = "node.kubernetes.io/windows-build";

/// Why an alias cannot be resolved.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AmiError {
    /// The alias family is unknown.
    #[error("alias family {0:?} is not supported")]
    UnknownFamily(String),
    /// The family does not support the cluster's Kubernetes version (upstream's terminal
    /// `UnsupportedAlias`).
    #[error("{0}")]
    UnsupportedAlias(String),
    /// The Kubernetes version is not `major.minor`.
    #[error("invalid Kubernetes version {0:?}: expected major.minor")]
    InvalidKubernetesVersion(String),
    /// No parameter of the alias resolved to an image.
    #[error("failed to discover any AMIs for alias {0:?}")]
    NoImages(String),
}

/// The image variant an alias parameter serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Variant {
    /// Types without GPU or accelerator.
    Standard,
    /// NVIDIA GPU types.
    Nvidia,
    /// AWS Neuron (Inferentia/Trainium) types.
    Neuron,
    /// Standard and Neuron (Bottlerocket's x86_64 AMI; AL2's GPU AMI serves NVIDIA and Neuron).
    StandardAndNeuron,
    /// NVIDIA and Neuron (AL2's GPU AMI).
    Accelerated,
    /// A Windows AMI.
    Windows(AmiFamily),
}

/// One SSM public parameter of an alias.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AliasParameter {
    /// The parameter name.
    pub name: String,
    /// The variant the image serves.
    pub variant: Variant,
}

fn parse_k8s(version: &str) -> Result<(u32, u32), AmiError> {
    let bad = || AmiError::InvalidKubernetesVersion(version.to_string());
    let (maj, min) = version.split_once('.').ok_or_else(bad)?;
    Ok((
        maj.parse().map_err(|_| bad())?,
        min.parse().map_err(|_| bad())?,
    ))
}

/// The SSM parameters behind `alias` for a cluster on Kubernetes `k8s` (`major.minor`):
///
/// - AL2: `/aws/service/eks/optimized-ami/{k8s}/amazon-linux-2{,-arm64,-gpu}/{X}/image_id`,
///   X = `recommended` or `amazon-eks{,-arm64,-gpu}-node-{k8s}-{ver}`; rejected on k8s ≥ 1.33;
/// - AL2023: `/aws/service/eks/optimized-ami/{k8s}/amazon-linux-2023/{arch}/{variant}/{X}/image_id`
///   (x86_64: standard, nvidia, neuron; arm64: standard, nvidia), X = `recommended` or
///   `amazon-eks-node-al2023-{arch}-{variant}-{k8s}-{ver}`;
/// - Bottlerocket: `/aws/service/bottlerocket/aws-k8s-{k8s}{,-nvidia}/{arch}/{ver}/image_id`,
///   ver `latest` or the version without its leading `v`;
/// - Windows: `/aws/service/ami-windows-latest/Windows_Server-{year}-English-Core-EKS_Optimized-{k8s}/image_id`
///   (Windows 2025 needs k8s ≥ 1.35).
pub fn alias_parameters(alias: &Alias, k8s: &str) -> Result<Vec<AliasParameter>, AmiError> {
    let family = alias
        .family
        .ok_or_else(|| AmiError::UnknownFamily(alias.family_name.clone()))?;
    let (maj, min) = parse_k8s(k8s)?;
    let latest = alias.is_latest();
    let ver = &alias.version;
    let p = |name: String, variant| AliasParameter { name, variant };
    Ok(match family {
        AmiFamily::Al2 => {
            if (maj, min) >= (1, 33) {
                return Err(AmiError::UnsupportedAlias(format!(
                    "AL2 is not supported on Kubernetes {k8s} (1.33 and later)"
                )));
            }
            [
                ("amazon-linux-2", "amazon-eks-node", Variant::Standard),
                ("amazon-linux-2-arm64", "amazon-eks-arm64-node", Variant::Standard),
                ("amazon-linux-2-gpu", "amazon-eks-gpu-node", Variant::Accelerated),
            ]
            .into_iter()
            .map(|(dir, prefix, v)| {
                let x = if latest {
                    "recommended".to_string()
                } else {
                    format!("{prefix}-{k8s}-{ver}")
                };
                p(format!("/aws/service/eks/optimized-ami/{k8s}/{dir}/{x}/image_id"), v)
            })
            .collect()
        }
        AmiFamily::Al2023 => [
            ("x86_64", "standard", Variant::Standard),
            ("x86_64", "nvidia", Variant::Nvidia),
            ("x86_64", "neuron", Variant::Neuron),
            ("arm64", "standard", Variant::Standard),
            ("arm64", "nvidia", Variant::Nvidia),
        ]
        .into_iter()
        .map(|(arch, variant, v)| {
            let x = if latest {
                "recommended".to_string()
            } else {
                format!("amazon-eks-node-al2023-{arch}-{variant}-{k8s}-{ver}")
            };
            p(
                format!(
                    "/aws/service/eks/optimized-ami/{k8s}/amazon-linux-2023/{arch}/{variant}/{x}/image_id"
                ),
                v,
            )
        })
        .collect(),
        AmiFamily::Bottlerocket => {
            let v = if latest {
                "latest".to_string()
            } else {
                ver.strip_prefix('v').unwrap_or(ver).to_string()
            };
            [
                ("", "x86_64", Variant::StandardAndNeuron),
                ("", "arm64", Variant::Standard),
                ("-nvidia", "x86_64", Variant::Nvidia),
                ("-nvidia", "arm64", Variant::Nvidia),
            ]
            .into_iter()
            .map(|(suffix, arch, variant)| {
                p(
                    format!("/aws/service/bottlerocket/aws-k8s-{k8s}{suffix}/{arch}/{v}/image_id"),
                    variant,
                )
            })
            .collect()
        }
        AmiFamily::Windows2019 | AmiFamily::Windows2022 | AmiFamily::Windows2025 => {
            if family == AmiFamily::Windows2025 && (maj, min) < (1, 35) {
                return Err(AmiError::UnsupportedAlias(format!(
                    "Windows2025 is not supported on Kubernetes {k8s} (needs 1.35 or later)"
                )));
            }
            let year = &family.name()["Windows".len()..];
            vec![p(
                format!(
                    "/aws/service/ami-windows-latest/Windows_Server-{year}-English-Core-EKS_Optimized-{k8s}/image_id"
                ),
                Variant::Windows(family),
            )]
        }
        AmiFamily::Custom => return Err(AmiError::UnknownFamily("custom".into())),
    })
}

/// An image as DescribeImages returns it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Image {
    /// `ImageId`.
    pub id: String,
    /// `Name`.
    pub name: Option<String>,
    /// `Architecture` (`x86_64`, `arm64`, ...).
    pub architecture: String,
    /// `CreationDate` (RFC 3339).
    pub creation_date: String,
    /// `DeprecationTime` (RFC 3339), if any.
    pub deprecation_time: Option<String>,
    /// `OwnerId`.
    pub owner_id: Option<String>,
    /// `Tags`.
    pub tags: BTreeMap<String, String>,
}

/// A DescribeImages query (`Filters` plus `Owners`; the shell adds `state=available`,
/// `IncludeDeprecated=true`, `MaxResults=1000`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageQuery {
    /// Filters.
    pub filters: Vec<Filter>,
    /// Owners.
    pub owners: Vec<String>,
}

/// The DescribeImages queries of non-alias terms: one per name/tag term (owners default to
/// `self` and `amazon` when a name is given without owner) and one `image-id` query collecting
/// every id term plus `ssm_image_ids` (values of `ssmParameter` terms that start with `ami-`).
pub fn image_queries(terms: &[AmiSelectorTerm], ssm_image_ids: &[String]) -> Vec<ImageQuery> {
    let mut ids: Vec<String> = terms.iter().filter_map(|t| t.id.clone()).collect();
    ids.extend(
        ssm_image_ids
            .iter()
            .filter(|v| v.starts_with("ami-"))
            .cloned(),
    );
    let mut out: Vec<ImageQuery> = terms
        .iter()
        .filter(|t| t.id.is_none() && t.alias.is_none() && (t.name.is_some() || !t.tags.is_empty()))
        .map(|t| {
            let mut filters = Vec::new();
            if let Some(n) = &t.name {
                filters.push(Filter::new("name", [n.clone()]));
            }
            filters.extend(tag_filters(&t.tags));
            let owners = match (&t.owner, &t.name) {
                (Some(o), _) => vec![o.clone()],
                (None, Some(_)) => vec!["self".to_string(), "amazon".to_string()],
                (None, None) => Vec::new(),
            };
            ImageQuery { filters, owners }
        })
        .collect();
    if !ids.is_empty() {
        out.push(ImageQuery {
            filters: vec![Filter::new("image-id", ids)],
            owners: Vec::new(),
        });
    }
    out
}

/// An image with the requirements of the instance types it serves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    /// The image.
    pub image: Image,
    /// Its requirements (not yet sorted).
    pub requirements: Vec<NodeSelectorRequirement>,
}

/// `amd64` / `arm64` for an image architecture; `None` for the ones Karpenter skips.
pub fn kube_arch(architecture: &str) -> Option<&'static str> {
    match architecture {
        "x86_64" => Some("amd64"),
        "arm64" => Some("arm64"),
        _ => None,
    }
}

fn variant_requirements(v: Variant) -> Vec<NodeSelectorRequirement> {
    let dne =
        |k: &str| NodeSelectorRequirement::new(k, Operator::DoesNotExist, Vec::<String>::new());
    let exists = |k: &str| NodeSelectorRequirement::new(k, Operator::Exists, Vec::<String>::new());
    match v {
        Variant::Standard => vec![dne(INSTANCE_ACCELERATOR_COUNT), dne(INSTANCE_GPU_COUNT)],
        Variant::Nvidia => vec![exists(INSTANCE_GPU_COUNT)],
        Variant::Neuron => vec![exists(INSTANCE_ACCELERATOR_COUNT)],
        // One image serving two variants yields two candidates (see `alias_candidates`).
        Variant::StandardAndNeuron | Variant::Accelerated => Vec::new(),
        Variant::Windows(f) => vec![
            NodeSelectorRequirement::new(OS_LABEL, Operator::In, ["windows"]),
            NodeSelectorRequirement::new(
                WINDOWS_BUILD_LABEL,
                Operator::In,
                f.windows_build().into_iter(),
            ),
        ],
    }
}

/// Candidates of an alias: for each parameter that resolved (`ssm_values`: parameter name →
/// image id) to an image in `images`, the image with its variant's requirements and its
/// architecture. Images of unknown architecture are skipped. Errors when nothing resolves.
pub fn alias_candidates(
    alias: &str,
    params: &[AliasParameter],
    ssm_values: &BTreeMap<String, String>,
    images: &[Image],
) -> Result<Vec<Candidate>, AmiError> {
    let mut out = Vec::new();
    for p in params {
        let Some(id) = ssm_values.get(&p.name) else {
            continue;
        };
        let Some(image) = images.iter().find(|i| i.id == *id) else {
            continue;
        };
        let Some(arch) = kube_arch(&image.architecture) else {
            continue;
        };
        let variants: &[Variant] = match p.variant {
            Variant::StandardAndNeuron => &[Variant::Standard, Variant::Neuron],
            Variant::Accelerated => &[Variant::Nvidia, Variant::Neuron],
            _ => std::slice::from_ref(&p.variant),
        };
        for v in variants {
            let mut reqs = variant_requirements(*v);
            reqs.push(NodeSelectorRequirement::new(
                ARCH_LABEL,
                Operator::In,
                [arch],
            ));
            out.push(Candidate {
                image: image.clone(),
                requirements: reqs,
            });
        }
    }
    if out.is_empty() {
        return Err(AmiError::NoImages(alias.to_string()));
    }
    Ok(out)
}

/// Candidates of non-alias terms: every image of known architecture, with only the
/// architecture requirement.
pub fn term_candidates(images: &[Image]) -> Vec<Candidate> {
    images
        .iter()
        .filter_map(|i| {
            let arch = kube_arch(&i.architecture)?;
            Some(Candidate {
                image: i.clone(),
                requirements: vec![NodeSelectorRequirement::new(
                    ARCH_LABEL,
                    Operator::In,
                    [arch],
                )],
            })
        })
        .collect()
}

fn ts(s: &str) -> Option<jiff::Timestamp> {
    s.parse().ok()
}

/// Whether an image is deprecated at `now` (its DeprecationTime has passed).
pub fn is_deprecated(image: &Image, now: jiff::Timestamp) -> bool {
    image
        .deprecation_time
        .as_deref()
        .and_then(ts)
        .is_some_and(|t| t <= now)
}

fn sort_requirements(reqs: &mut [NodeSelectorRequirement]) {
    reqs.sort_by(|a, b| {
        a.key
            .len()
            .cmp(&b.key.len())
            .then_with(|| a.key.cmp(&b.key))
    });
}

fn creation(image: &Image) -> (Option<jiff::Timestamp>, &str) {
    (ts(&image.creation_date), image.creation_date.as_str())
}

/// `status.amis` from candidates: per distinct requirement set the best image (not deprecated
/// beats deprecated, then the newest CreationDate, then the greater name), each with its
/// requirements sorted by key length then key; the list sorted by CreationDate (newest first)
/// then id.
pub fn select_images(candidates: Vec<Candidate>, now: jiff::Timestamp) -> Vec<StatusAmi> {
    let mut best: BTreeMap<String, Candidate> = BTreeMap::new();
    for mut c in candidates {
        sort_requirements(&mut c.requirements);
        let key = serde_json::to_string(&c.requirements).unwrap_or_default();
        let better = match best.get(&key) {
            None => true,
            Some(cur) => {
                let (dc, dn) = (is_deprecated(&cur.image, now), is_deprecated(&c.image, now));
                if dc != dn {
                    dc && !dn
                } else {
                    let (a, b) = (creation(&c.image), creation(&cur.image));
                    match a.cmp(&b) {
                        std::cmp::Ordering::Equal => c.image.name > cur.image.name,
                        o => o == std::cmp::Ordering::Greater,
                    }
                }
            }
        };
        if better {
            best.insert(key, c);
        }
    }
    let mut chosen: Vec<Candidate> = best.into_values().collect();
    chosen.sort_by(|a, b| {
        creation(&b.image)
            .cmp(&creation(&a.image))
            .then_with(|| a.image.id.cmp(&b.image.id))
    });
    chosen
        .into_iter()
        .map(|c| StatusAmi {
            deprecated: is_deprecated(&c.image, now),
            id: c.image.id,
            name: c.image.name,
            requirements: c.requirements,
        })
        .collect()
}

/// The first AMI (in status order) whose requirements are compatible with an instance type's
/// requirements (strict: the type must define the labels the AMI requires to exist; types
/// carry `DoesNotExist` for absent labels, as upstream's do).
pub fn ami_for<'a>(
    amis: &'a [StatusAmi],
    type_requirements: &Requirements,
) -> Option<&'a StatusAmi> {
    amis.iter().find(|ami| {
        let r = Requirements::from_node_selector_requirements(&ami.requirements);
        type_requirements.is_compatible(&r, None)
    })
}

/// Upstream's `MapToInstanceTypes`: AMI id → the names of the types it serves (types no AMI
/// serves are left out; none at all means nothing can launch).
pub fn map_to_instance_types<'a>(
    amis: &[StatusAmi],
    types: impl IntoIterator<Item = (&'a str, &'a Requirements)>,
) -> BTreeMap<String, Vec<String>> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (name, reqs) in types {
        if let Some(ami) = ami_for(amis, reqs) {
            out.entry(ami.id.clone())
                .or_default()
                .push(name.to_string());
        }
    }
    out
}

#[cfg(test)]
mod tests;

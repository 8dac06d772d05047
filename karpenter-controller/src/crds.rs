//! `karpenter crds`: the CustomResourceDefinitions the controller needs, as multi-document YAML
//! (`karpenter crds | kubectl apply --server-side -f -`).
//!
//! The CRDs are generated from our API types (`karpenter_core::crd`); printing them is all this
//! module does.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

/// Why the CRDs could not be rendered.
#[derive(Debug, thiserror::Error)]
#[error("rendering CRD {name} as YAML: {message}")]
pub struct CrdsError {
    /// The CRD's name.
    pub name: String,
    /// What the YAML writer said.
    pub message: String,
}

/// Every CRD `karpenter controller` reads or writes, in apply order: NodePool, NodeClaim,
/// EC2NodeClass.
pub fn all() -> Vec<CustomResourceDefinition> {
    vec![
        karpenter_core::crd::nodepool_crd(),
        karpenter_core::crd::nodeclaim_crd(),
        karpenter_aws::crd::ec2nodeclass_crd(),
    ]
}

/// The CRDs as one multi-document YAML text, each document starting with `---`.
pub fn to_yaml(crds: &[CustomResourceDefinition]) -> Result<String, CrdsError> {
    let mut out = String::new();
    for crd in crds {
        let name = crd.metadata.name.clone().unwrap_or_default();
        let text = serde_saphyr::to_string(crd).map_err(|e| CrdsError {
            name: name.clone(),
            message: e.to_string(),
        })?;
        out.push_str("---\n");
        out.push_str(&text);
        if !text.ends_with('\n') {
            out.push('\n');
        }
    }
    Ok(out)
}

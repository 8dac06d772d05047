//! `karpenter crds`: the CustomResourceDefinitions the controller needs, as multi-document YAML
//! (`karpenter crds | kubectl apply --server-side -f -`).
//!
//! The CRDs are generated from our API types (`karpenter_core::crd`, and `karpenter_fake::kwok`
//! for the kwok mode's `KWOKNodeClass`); printing them is all this module does.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

/// Why the CRDs could not be rendered.
#[derive(Debug, thiserror::Error)]
#[error("rendering CRD {name}: {message}")]
pub struct CrdsError {
    /// The CRD's name.
    pub name: String,
    /// What the YAML writer said.
    pub message: String,
}

/// Every CRD of the API, in apply order: NodePool, NodeClaim, NodeOverlay (`v1alpha1`, read by
/// `karpenter plan`; installed as upstream installs it), EC2NodeClass.
pub fn all() -> Vec<CustomResourceDefinition> {
    vec![
        karpenter_core::crd::nodepool_crd(),
        karpenter_core::crd::nodeclaim_crd(),
        karpenter_core::crd::nodeoverlay_crd(),
        karpenter_aws::crd::ec2nodeclass_crd(),
    ]
}

/// The `KWOKNodeClass` CRD (`kwoknodeclasses.karpenter.kwok.sh`), the node class of
/// `karpenter controller --cloud-provider kwok` (upstream's kwok provider). Not in [`all`]:
/// only a cluster that runs the kwok mode (upstream's end-to-end suites) installs it.
pub fn kwok_nodeclass() -> Result<CustomResourceDefinition, CrdsError> {
    let crd = karpenter_fake::kwok::nodeclass_crd();
    let name = crd["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    serde_json::from_value(crd).map_err(|e| CrdsError {
        name,
        message: e.to_string(),
    })
}

/// [`all`] and, when `kwok`, [`kwok_nodeclass`] after them (`karpenter crds --kwok`).
pub fn with_kwok(kwok: bool) -> Result<Vec<CustomResourceDefinition>, CrdsError> {
    let mut crds = all();
    if kwok {
        crds.push(kwok_nodeclass()?);
    }
    Ok(crds)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kwok_nodeclass_crd_converts_and_comes_last_only_when_asked() {
        let crd = kwok_nodeclass().expect("the KWOKNodeClass CRD converts");
        assert_eq!(
            crd.metadata.name.as_deref(),
            Some("kwoknodeclasses.karpenter.kwok.sh")
        );
        assert_eq!(crd.spec.scope, "Cluster");
        assert_eq!(with_kwok(false).unwrap().len(), all().len());
        let crds = with_kwok(true).unwrap();
        assert_eq!(crds.len(), all().len() + 1);
        assert_eq!(crds.last(), Some(&crd));
        let text = to_yaml(&crds).unwrap();
        assert_eq!(text.matches("---\n").count(), crds.len());
        assert!(text.contains("nodeRegistrationDelay"));
    }
}

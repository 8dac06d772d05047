//! Tags written on an instance once its node has registered (upstream's `nodeclaim.tagging`
//! controller): `Name` = the node's name, `karpenter.sh/nodeclaim` = the NodeClaim's name and
//! `eks:eks-cluster-name` = the cluster, each only when the instance does not carry the key
//! already (a `Name` in the class's `spec.tags` stays). The NodeClaim is then annotated
//! `karpenter.k8s.aws/tagged: "true"` (and upstream's compatibility annotation), so an instance
//! is tagged once.

use std::collections::BTreeMap;

use super::{CLUSTER_NAME_TAG, NODECLAIM_TAG};

/// `Name`.
pub const NAME_TAG: &str = "Name";
/// The NodeClaim annotation that says its instance is tagged.
pub const TAGGED_ANNOTATION: &str = "karpenter.k8s.aws/tagged";
/// Upstream's annotation that says the `eks:eks-cluster-name` tag is on the instance.
pub const CLUSTER_NAME_TAGGED_ANNOTATION: &str =
    "compatibility.karpenter.k8s.aws/cluster-name-tagged";

/// What the tagging step reads of a NodeClaim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaggableClaim<'a> {
    /// `metadata.name`.
    pub name: &'a str,
    /// `metadata.annotations`.
    pub annotations: &'a BTreeMap<String, String>,
    /// `status.nodeName` (set once the node registered).
    pub node_name: Option<&'a str>,
    /// `status.providerID`.
    pub provider_id: Option<&'a str>,
    /// Whether it has a deletion timestamp.
    pub deleting: bool,
}

/// The instance id to tag for `claim`, or `None` when there is nothing to do: already tagged
/// (both annotations `"true"`), no node registered yet, being deleted, or no valid provider id
/// (upstream waits for one without an error).
pub fn instance_to_tag(claim: &TaggableClaim<'_>) -> Option<String> {
    let yes = |k: &str| claim.annotations.get(k).is_some_and(|v| v == "true");
    if yes(TAGGED_ANNOTATION) && yes(CLUSTER_NAME_TAGGED_ANNOTATION) {
        return None;
    }
    if claim.deleting || claim.node_name.is_none_or(str::is_empty) {
        return None;
    }
    super::parse_provider_id(claim.provider_id?).map(str::to_string)
}

/// The tags to write on the instance of `claim` (named `node_name`) in `cluster`, given the
/// tags it carries: only the keys it lacks.
pub fn registration_tags(
    claim: &str,
    node_name: &str,
    cluster: &str,
    existing: &BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    [
        (NAME_TAG, node_name),
        (NODECLAIM_TAG, claim),
        (CLUSTER_NAME_TAG, cluster),
    ]
    .into_iter()
    .filter(|(k, _)| !existing.contains_key(*k))
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

/// The annotations that mark `claim` tagged (a merge into `metadata.annotations`).
pub fn tagged_annotations() -> BTreeMap<String, String> {
    [TAGGED_ANNOTATION, CLUSTER_NAME_TAGGED_ANNOTATION]
        .into_iter()
        .map(|k| (k.to_string(), "true".to_string()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim<'a>(
        annotations: &'a BTreeMap<String, String>,
        node: Option<&'a str>,
        deleting: bool,
    ) -> TaggableClaim<'a> {
        TaggableClaim {
            name: "default-abcde",
            annotations,
            node_name: node,
            provider_id: Some("aws:///us-east-1a/i-0abc"),
            deleting,
        }
    }

    #[test]
    fn only_registered_live_untagged_claims_are_tagged() {
        let none = BTreeMap::new();
        assert_eq!(
            instance_to_tag(&claim(&none, Some("ip-10-0-0-1.ec2.internal"), false)).as_deref(),
            Some("i-0abc")
        );
        assert_eq!(instance_to_tag(&claim(&none, None, false)), None);
        assert_eq!(instance_to_tag(&claim(&none, Some(""), false)), None);
        assert_eq!(instance_to_tag(&claim(&none, Some("n"), true)), None);
        let tagged = tagged_annotations();
        assert_eq!(instance_to_tag(&claim(&tagged, Some("n"), false)), None);
        // Tagged before the cluster-name tag existed: tagged again (for that tag).
        let old: BTreeMap<String, String> =
            [(TAGGED_ANNOTATION.to_string(), "true".to_string())].into();
        assert!(instance_to_tag(&claim(&old, Some("n"), false)).is_some());
        let bad = TaggableClaim {
            provider_id: Some("not-a-provider-id"),
            ..claim(&none, Some("n"), false)
        };
        assert_eq!(instance_to_tag(&bad), None);
    }

    #[test]
    fn existing_keys_are_kept() {
        let existing: BTreeMap<String, String> = [
            ("Name".to_string(), "custom-name".to_string()),
            (CLUSTER_NAME_TAG.to_string(), "prod".to_string()),
        ]
        .into();
        let tags = registration_tags("default-abcde", "node-1", "prod", &existing);
        assert_eq!(
            tags,
            BTreeMap::from([(NODECLAIM_TAG.to_string(), "default-abcde".to_string())])
        );
        let all = registration_tags("default-abcde", "node-1", "prod", &BTreeMap::new());
        assert_eq!(all.get("Name").map(String::as_str), Some("node-1"));
        assert_eq!(all.len(), 3);
    }
}

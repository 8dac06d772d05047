//! EC2NodeClass drift as pure functions, in upstream's order: `NodeClassDrift` (the static
//! hash), `AMIDrift`, `SecurityGroupDrift`, `SubnetDrift`.
//!
//! [`nodeclaim_drift`] is what a controller (or an offline snapshot step) calls per NodeClaim:
//! it needs the class (with its resolved status), the NodeClaim (annotations and
//! `status.imageID`), the requirements of the NodeClaim's instance type, and, for the security
//! group and subnet checks, what DescribeInstances says about the instance (`None` skips them,
//! as an offline planner must).

use std::collections::BTreeSet;

use karpenter_core::api::NodeClaim;
use karpenter_core::requirements::Requirements;

use crate::ami::map_to_instance_types;
use crate::nodeclass::EC2NodeClass;
use crate::nodeclass::hash::{HASH_ANNOTATION, HASH_VERSION, HASH_VERSION_ANNOTATION};

/// Why a NodeClaim drifted from its EC2NodeClass.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum DriftReason {
    /// The class's static settings changed since launch.
    NodeClassDrift,
    /// The instance's AMI is no longer the one the class selects for its type.
    AmiDrift,
    /// The instance's security groups differ from the class's.
    SecurityGroupDrift,
    /// The instance's subnet is no longer selected.
    SubnetDrift,
}

impl DriftReason {
    /// Upstream's spelling (`NodeClassDrift`, `AMIDrift`, `SecurityGroupDrift`, `SubnetDrift`).
    pub fn as_str(self) -> &'static str {
        match self {
            DriftReason::NodeClassDrift => "NodeClassDrift",
            DriftReason::AmiDrift => "AMIDrift",
            DriftReason::SecurityGroupDrift => "SecurityGroupDrift",
            DriftReason::SubnetDrift => "SubnetDrift",
        }
    }
}

/// Why drift cannot be evaluated (the class is not resolved yet).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DriftError {
    /// `status.amis` is empty.
    #[error("EC2NodeClass {0:?} has no resolved AMIs")]
    NoAmis(String),
    /// `status.subnets` is empty.
    #[error("EC2NodeClass {0:?} has no resolved subnets")]
    NoSubnets(String),
    /// `status.securityGroups` is empty.
    #[error("EC2NodeClass {0:?} has no resolved security groups")]
    NoSecurityGroups(String),
}

/// What DescribeInstances reports about a NodeClaim's instance.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InstanceView {
    /// `SubnetId`.
    pub subnet_id: String,
    /// `SecurityGroups[].GroupId`.
    pub security_group_ids: Vec<String>,
}

/// Static-hash drift: the NodeClaim was stamped with this crate's hash version and a hash that
/// differs from the class's current one. NodeClaims without the annotations, or stamped with
/// another version (upstream's `v6`), never drift by hash.
pub fn hash_drifted(class: &EC2NodeClass, claim: &NodeClaim) -> bool {
    let a = &claim.metadata.annotations;
    match (a.get(HASH_VERSION_ANNOTATION), a.get(HASH_ANNOTATION)) {
        (Some(v), Some(h)) if v == HASH_VERSION => *h != class.static_hash(),
        _ => false,
    }
}

/// AMI drift: the AMI the class's status selects for the NodeClaim's instance type (first
/// compatible, newest first) is not the NodeClaim's `status.imageID`. A NodeClaim without an
/// image id (not launched) never drifts.
pub fn ami_drifted(
    class: &EC2NodeClass,
    claim: &NodeClaim,
    type_requirements: &Requirements,
) -> Result<bool, DriftError> {
    if class.status.amis.is_empty() {
        return Err(DriftError::NoAmis(class.name().to_string()));
    }
    let Some(image) = claim.status.image_id.as_deref() else {
        return Ok(false);
    };
    let mapped = map_to_instance_types(&class.status.amis, [("type", type_requirements)]);
    Ok(!mapped.contains_key(image))
}

/// Security-group drift: the instance's set of groups differs from the status's.
pub fn security_groups_drifted(
    class: &EC2NodeClass,
    instance: &InstanceView,
) -> Result<bool, DriftError> {
    if class.status.security_groups.is_empty() {
        return Err(DriftError::NoSecurityGroups(class.name().to_string()));
    }
    let want: BTreeSet<&str> = class
        .status
        .security_groups
        .iter()
        .map(|g| g.id.as_str())
        .collect();
    let have: BTreeSet<&str> = instance
        .security_group_ids
        .iter()
        .map(String::as_str)
        .collect();
    Ok(want != have)
}

/// Subnet drift: the instance's subnet is not among the status's.
pub fn subnet_drifted(class: &EC2NodeClass, instance: &InstanceView) -> Result<bool, DriftError> {
    if class.status.subnets.is_empty() {
        return Err(DriftError::NoSubnets(class.name().to_string()));
    }
    Ok(!class
        .status
        .subnets
        .iter()
        .any(|s| s.id == instance.subnet_id))
}

/// The first drift reason of a NodeClaim, in upstream's order, or `None`.
pub fn nodeclaim_drift(
    class: &EC2NodeClass,
    claim: &NodeClaim,
    type_requirements: &Requirements,
    instance: Option<&InstanceView>,
) -> Result<Option<DriftReason>, DriftError> {
    if hash_drifted(class, claim) {
        return Ok(Some(DriftReason::NodeClassDrift));
    }
    if ami_drifted(class, claim, type_requirements)? {
        return Ok(Some(DriftReason::AmiDrift));
    }
    if let Some(instance) = instance {
        if security_groups_drifted(class, instance)? {
            return Ok(Some(DriftReason::SecurityGroupDrift));
        }
        if subnet_drifted(class, instance)? {
            return Ok(Some(DriftReason::SubnetDrift));
        }
    }
    Ok(None)
}

/// The drift reason per NodeClaim name for a snapshot, as a disruption planner's
/// "cloud provider drift" input (karpenter-core's snapshot drift step takes such a map): for
/// every NodeClaim whose `nodeClassRef` names an EC2NodeClass in `classes`, its
/// [`DriftReason`] (as upstream spells it) when it has one. Without an instance view (offline),
/// only `NodeClassDrift` and `AMIDrift` are evaluated; a class without resolved AMIs in its
/// status, or a claim whose instance type `type_requirements` does not know, skips the AMI
/// check. `type_requirements` maps an instance-type name to its requirements.
pub fn cloud_drift<'a>(
    classes: &[EC2NodeClass],
    claims: &[NodeClaim],
    type_requirements: impl Fn(&str) -> Option<&'a Requirements>,
) -> std::collections::BTreeMap<String, String> {
    let mut out = std::collections::BTreeMap::new();
    for claim in claims {
        let r = &claim.spec.node_class_ref;
        if r.group != crate::nodeclass::GROUP || r.kind != crate::nodeclass::KIND {
            continue;
        }
        let Some(class) = classes.iter().find(|c| c.name() == r.name) else {
            continue;
        };
        let reason = if hash_drifted(class, claim) {
            Some(DriftReason::NodeClassDrift)
        } else {
            claim
                .metadata
                .labels
                .get("node.kubernetes.io/instance-type")
                .and_then(|t| type_requirements(t))
                .filter(|_| !class.status.amis.is_empty())
                .and_then(|reqs| ami_drifted(class, claim, reqs).ok())
                .and_then(|d| d.then_some(DriftReason::AmiDrift))
        };
        if let Some(reason) = reason {
            out.insert(claim.name().to_string(), reason.as_str().to_string());
        }
    }
    out
}

/// The annotations to stamp on a NodeClaim launched from `class` (and on the class itself).
pub fn hash_annotations(class: &EC2NodeClass) -> [(&'static str, String); 2] {
    [
        (HASH_ANNOTATION, class.static_hash()),
        (HASH_VERSION_ANNOTATION, HASH_VERSION.to_string()),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ami::ARCH_LABEL;
    use crate::catalog::labels::{INSTANCE_ACCELERATOR_COUNT, INSTANCE_GPU_COUNT};
    use crate::nodeclass::{StatusAmi, StatusSecurityGroup, StatusSubnet};
    use karpenter_core::api::{NodeClaimSpec, NodeClassReference};
    use karpenter_core::requirements::{NodeSelectorRequirement, Operator, Requirement};

    fn class() -> EC2NodeClass {
        let text = include_str!("../tests/fixtures/ec2nodeclass/default.yaml");
        let mut c: EC2NodeClass =
            EC2NodeClass::from_json_value(serde_saphyr::from_str(text).unwrap()).unwrap();
        let std_reqs = |arch: &str| {
            vec![
                NodeSelectorRequirement::new(ARCH_LABEL, Operator::In, [arch]),
                NodeSelectorRequirement::new(
                    INSTANCE_GPU_COUNT,
                    Operator::DoesNotExist,
                    Vec::<String>::new(),
                ),
                NodeSelectorRequirement::new(
                    INSTANCE_ACCELERATOR_COUNT,
                    Operator::DoesNotExist,
                    Vec::<String>::new(),
                ),
            ]
        };
        c.status.amis = vec![
            StatusAmi {
                id: "ami-new-amd64".into(),
                name: None,
                deprecated: false,
                requirements: std_reqs("amd64"),
            },
            StatusAmi {
                id: "ami-new-arm64".into(),
                name: None,
                deprecated: false,
                requirements: std_reqs("arm64"),
            },
        ];
        c.status.subnets = vec![StatusSubnet {
            id: "subnet-1".into(),
            zone: "us-east-1a".into(),
            zone_id: None,
        }];
        c.status.security_groups = vec![StatusSecurityGroup {
            id: "sg-1".into(),
            name: None,
        }];
        c
    }

    fn claim(image: &str, class: &EC2NodeClass) -> NodeClaim {
        let r = NodeClassReference::new("karpenter.k8s.aws", "EC2NodeClass", "default");
        let mut c = NodeClaim::new("default-x", NodeClaimSpec::new(r));
        c.status.image_id = Some(image.into());
        for (k, v) in hash_annotations(class) {
            c.metadata.annotations.insert(k.into(), v);
        }
        c
    }

    fn m5() -> Requirements {
        let mut r = Requirements::new();
        r.add(Requirement::new(ARCH_LABEL, Operator::In, ["amd64"]));
        r.add(Requirement::does_not_exist(INSTANCE_GPU_COUNT));
        r.add(Requirement::does_not_exist(INSTANCE_ACCELERATOR_COUNT));
        r
    }

    #[test]
    fn an_up_to_date_claim_has_no_drift() {
        let c = class();
        let nc = claim("ami-new-amd64", &c);
        let inst = InstanceView {
            subnet_id: "subnet-1".into(),
            security_group_ids: vec!["sg-1".into()],
        };
        assert_eq!(nodeclaim_drift(&c, &nc, &m5(), Some(&inst)).unwrap(), None);
    }

    #[test]
    fn reasons_in_upstream_order() {
        let c = class();
        let mut changed = c.clone();
        changed.spec.user_data = Some("echo changed".into());
        let nc = claim("ami-old", &c);
        assert_eq!(
            nodeclaim_drift(&changed, &nc, &m5(), None).unwrap(),
            Some(DriftReason::NodeClassDrift)
        );
        assert_eq!(
            nodeclaim_drift(&c, &nc, &m5(), None).unwrap(),
            Some(DriftReason::AmiDrift)
        );
        let ok = claim("ami-new-amd64", &c);
        let sg = InstanceView {
            subnet_id: "subnet-1".into(),
            security_group_ids: vec!["sg-1".into(), "sg-2".into()],
        };
        assert_eq!(
            nodeclaim_drift(&c, &ok, &m5(), Some(&sg)).unwrap(),
            Some(DriftReason::SecurityGroupDrift)
        );
        let sn = InstanceView {
            subnet_id: "subnet-9".into(),
            security_group_ids: vec!["sg-1".into()],
        };
        assert_eq!(
            nodeclaim_drift(&c, &ok, &m5(), Some(&sn)).unwrap(),
            Some(DriftReason::SubnetDrift)
        );
    }

    #[test]
    fn cloud_drift_map_for_a_snapshot() {
        let c = class();
        let mut changed = c.clone();
        changed.spec.tags.insert("a".into(), "b".into());
        let mut hashed = claim("ami-new-amd64", &c);
        hashed.metadata.name = Some("hashed".into());
        let mut old_ami = claim("ami-old", &changed);
        old_ami.metadata.name = Some("old-ami".into());
        old_ami
            .metadata
            .labels
            .insert("node.kubernetes.io/instance-type".into(), "m5.large".into());
        let mut unknown_type = claim("ami-old", &changed);
        unknown_type.metadata.name = Some("unknown-type".into());
        let mut other_class = claim("ami-old", &c);
        other_class.metadata.name = Some("other".into());
        other_class.spec.node_class_ref =
            NodeClassReference::new("karpenter.k8s.aws", "EC2NodeClass", "missing");
        let m5 = m5();
        let map = cloud_drift(
            &[changed],
            &[hashed, old_ami, unknown_type, other_class],
            |t| (t == "m5.large").then_some(&m5),
        );
        assert_eq!(map.len(), 2, "{map:?}");
        assert_eq!(map["hashed"], "NodeClassDrift");
        assert_eq!(map["old-ami"], "AMIDrift");
    }

    #[test]
    fn foreign_hash_versions_and_arm_images() {
        let c = class();
        let mut changed = c.clone();
        changed.spec.tags.insert("a".into(), "b".into());
        let mut nc = claim("ami-new-amd64", &c);
        nc.metadata
            .annotations
            .insert(HASH_VERSION_ANNOTATION.into(), "v6".into());
        assert!(!hash_drifted(&changed, &nc));
        // An amd64 type launched with the arm64 image drifts.
        let wrong = claim("ami-new-arm64", &c);
        assert!(ami_drifted(&c, &wrong, &m5()).unwrap());
        let mut empty = c.clone();
        empty.status.amis.clear();
        assert!(matches!(
            ami_drifted(&empty, &wrong, &m5()),
            Err(DriftError::NoAmis(_))
        ));
    }
}

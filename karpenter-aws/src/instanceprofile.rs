//! Instance profiles and permission checks: the profile Karpenter manages for `spec.role`
//! (name, IAM path, tags, what to do given what IAM returned, which profiles to garbage-collect)
//! and the meaning of the dry-run permission checks behind `ValidationSucceeded`.

use std::collections::{BTreeMap, BTreeSet};

use crate::nodeclass::EC2NodeClass;
use crate::nodeclass::hash::fnv1a64;
use crate::nodeclass::reconcile::ValidationObservation;

/// The IAM path prefix of every profile managed in `region` for `cluster`.
pub fn cluster_path(region: &str, cluster: &str) -> String {
    format!("/karpenter/{region}/{cluster}/")
}

/// The IAM path of the profiles managed for one EC2NodeClass.
pub fn profile_path(region: &str, cluster: &str, nodeclass_uid: &str) -> String {
    format!("/karpenter/{region}/{cluster}/{nodeclass_uid}/")
}

/// The name of a managed profile: `{cluster}_{hash(region, class name, nonce)}` (the nonce
/// makes a replacement profile's name differ from the one it replaces).
pub fn profile_name(cluster: &str, region: &str, nodeclass: &str, nonce: &str) -> String {
    let h = fnv1a64(format!("{region}\u{0}{nodeclass}\u{0}{nonce}").as_bytes());
    format!("{cluster}_{h}")
}

/// The tags of a managed profile: the class's tags plus `kubernetes.io/cluster/{cluster}=owned`,
/// `eks:eks-cluster-name`, `karpenter.k8s.aws/ec2nodeclass` and `topology.kubernetes.io/region`.
pub fn profile_tags(class: &EC2NodeClass, cluster: &str, region: &str) -> BTreeMap<String, String> {
    let mut t = class.spec.tags.clone();
    t.insert(format!("kubernetes.io/cluster/{cluster}"), "owned".into());
    t.insert("eks:eks-cluster-name".into(), cluster.into());
    t.insert("karpenter.k8s.aws/ec2nodeclass".into(), class.name().into());
    t.insert("topology.kubernetes.io/region".into(), region.into());
    t
}

/// The role name IAM expects: the last segment of a path-qualified role.
pub fn role_name(role: &str) -> &str {
    role.rsplit('/').next().unwrap_or(role)
}

/// An instance profile as GetInstanceProfile returns it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProfileInfo {
    /// The profile name.
    pub name: String,
    /// The IAM path.
    pub path: String,
    /// The role names in it.
    pub roles: Vec<String>,
}

/// What the instance-profile step does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProfileAction {
    /// Use this profile as is (`spec.instanceProfile`, or a managed profile with the right role).
    Use(String),
    /// Create a profile (CreateInstanceProfile with path and tags, then AddRoleToInstanceProfile).
    Create {
        /// The name.
        name: String,
        /// The IAM path.
        path: String,
        /// The tags.
        tags: BTreeMap<String, String>,
        /// The role to add.
        role: String,
    },
    /// Swap the role of an existing managed profile (RemoveRoleFromInstanceProfile of `remove`,
    /// then AddRoleToInstanceProfile of `add`).
    ReplaceRole {
        /// The profile.
        name: String,
        /// Roles to remove.
        remove: Vec<String>,
        /// The role to add.
        add: String,
    },
}

/// Decides the instance-profile step: `spec.instanceProfile` is used as is; with `spec.role`,
/// the profile in `status.instanceProfile` is kept when IAM (`current`) shows it holds the
/// role, gets the role when it is empty or holds another one, and a new profile is created
/// when there is none (`nonce` names it).
pub fn decide_profile(
    class: &EC2NodeClass,
    current: Option<&ProfileInfo>,
    cluster: &str,
    region: &str,
    nonce: &str,
) -> ProfileAction {
    if let Some(p) = &class.spec.instance_profile {
        return ProfileAction::Use(p.clone());
    }
    let role = role_name(class.spec.role.as_deref().unwrap_or("")).to_string();
    match current {
        Some(p) if p.roles.len() == 1 && p.roles[0] == role => ProfileAction::Use(p.name.clone()),
        Some(p) => ProfileAction::ReplaceRole {
            name: p.name.clone(),
            remove: p.roles.iter().filter(|r| **r != role).cloned().collect(),
            add: role,
        },
        None => ProfileAction::Create {
            name: profile_name(cluster, region, class.name(), nonce),
            path: profile_path(
                region,
                cluster,
                class.metadata.uid.as_deref().unwrap_or(class.name()),
            ),
            tags: profile_tags(class, cluster, region),
            role,
        },
    }
}

/// Managed profiles to delete: under the cluster's path (filtered here, since not every IAM
/// implementation honours `PathPrefix`), referenced by no EC2NodeClass status, not protected
/// (recently replaced) and not used by a live NodeClaim.
pub fn garbage_profiles(
    listed: &[ProfileInfo],
    region: &str,
    cluster: &str,
    referenced: &BTreeSet<String>,
    protected: &BTreeSet<String>,
    in_use: &BTreeSet<String>,
) -> Vec<String> {
    let prefix = cluster_path(region, cluster);
    listed
        .iter()
        .filter(|p| p.path.starts_with(&prefix))
        .filter(|p| {
            !referenced.contains(&p.name)
                && !protected.contains(&p.name)
                && !in_use.contains(&p.name)
        })
        .map(|p| p.name.clone())
        .collect()
}

/// A dry-run permission check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthCheck {
    /// CreateLaunchTemplate with `DryRun=true`.
    CreateLaunchTemplate,
    /// CreateFleet with `DryRun=true`.
    CreateFleet,
    /// RunInstances with `DryRun=true`.
    RunInstances,
}

impl AuthCheck {
    /// The `ValidationSucceeded` reason when the check is unauthorized.
    pub fn failure_reason(self) -> &'static str {
        match self {
            AuthCheck::CreateLaunchTemplate => "CreateLaunchTemplateAuthCheckFailed",
            AuthCheck::CreateFleet => "CreateFleetAuthCheckFailed",
            AuthCheck::RunInstances => "RunInstancesAuthCheckFailed",
        }
    }
}

/// What a dry run's answer means.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DryRunOutcome {
    /// Permitted (`DryRunOperation`, success, or an error that says nothing about permissions).
    Passed,
    /// `UnauthorizedOperation`: the reason and message for `ValidationSucceeded`.
    Unauthorized {
        /// The reason.
        reason: &'static str,
        /// The message.
        message: String,
    },
    /// Throttled or a server error: try again later.
    Retry,
}

/// Interprets a dry run's error code (`None` = the call succeeded).
pub fn dry_run_outcome(check: AuthCheck, error_code: Option<&str>, message: &str) -> DryRunOutcome {
    match error_code {
        None | Some("DryRunOperation") => DryRunOutcome::Passed,
        Some("UnauthorizedOperation") => DryRunOutcome::Unauthorized {
            reason: check.failure_reason(),
            message: message.to_string(),
        },
        Some(
            "RequestLimitExceeded"
            | "Throttling"
            | "InternalError"
            | "InternalFailure"
            | "ServiceUnavailable"
            | "Unavailable",
        ) => DryRunOutcome::Retry,
        Some(_) => DryRunOutcome::Passed,
    }
}

/// The `ValidationSucceeded` observation of a set of dry runs (the first unauthorized check
/// wins); `None` when one must be retried.
pub fn validation_observation(outcomes: &[DryRunOutcome]) -> Option<ValidationObservation> {
    if outcomes.contains(&DryRunOutcome::Retry) {
        return None;
    }
    Some(
        outcomes
            .iter()
            .find_map(|o| match o {
                DryRunOutcome::Unauthorized { reason, message } => {
                    Some(ValidationObservation::Failed {
                        reason: reason.to_string(),
                        message: message.clone(),
                    })
                }
                _ => None,
            })
            .unwrap_or(ValidationObservation::Passed),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class(role: Option<&str>, profile: Option<&str>) -> EC2NodeClass {
        let mut c = EC2NodeClass::new("default", Default::default());
        c.spec.role = role.map(str::to_string);
        c.spec.instance_profile = profile.map(str::to_string);
        c.spec.tags.insert("team".into(), "a".into());
        c.metadata.uid = Some("uid-1".into());
        c
    }

    #[test]
    fn explicit_profiles_are_used_as_is() {
        let c = class(None, Some("MyProfile"));
        assert_eq!(
            decide_profile(&c, None, "c1", "us-east-1", "n"),
            ProfileAction::Use("MyProfile".into())
        );
    }

    #[test]
    fn managed_profiles_are_created_kept_and_repaired() {
        let c = class(Some("path/to/KarpenterNodeRole"), None);
        let created = decide_profile(&c, None, "c1", "us-east-1", "n1");
        let ProfileAction::Create {
            name,
            path,
            tags,
            role,
        } = created
        else {
            panic!()
        };
        assert!(name.starts_with("c1_"));
        assert_ne!(name, profile_name("c1", "us-east-1", "default", "n2"));
        assert_eq!(path, "/karpenter/us-east-1/c1/uid-1/");
        assert_eq!(role, "KarpenterNodeRole");
        assert_eq!(tags["kubernetes.io/cluster/c1"], "owned");
        assert_eq!(tags["topology.kubernetes.io/region"], "us-east-1");
        assert_eq!(tags["karpenter.k8s.aws/ec2nodeclass"], "default");
        assert_eq!(tags["team"], "a");

        let good = ProfileInfo {
            name: "c1_1".into(),
            path: path.clone(),
            roles: vec!["KarpenterNodeRole".into()],
        };
        assert_eq!(
            decide_profile(&c, Some(&good), "c1", "us-east-1", "n"),
            ProfileAction::Use("c1_1".into())
        );
        let stale = ProfileInfo {
            roles: vec!["OldRole".into()],
            ..good.clone()
        };
        assert_eq!(
            decide_profile(&c, Some(&stale), "c1", "us-east-1", "n"),
            ProfileAction::ReplaceRole {
                name: "c1_1".into(),
                remove: vec!["OldRole".into()],
                add: "KarpenterNodeRole".into()
            }
        );
        let empty = ProfileInfo {
            roles: vec![],
            ..good
        };
        assert!(
            matches!(decide_profile(&c, Some(&empty), "c1", "us-east-1", "n"), ProfileAction::ReplaceRole { ref remove, .. } if remove.is_empty())
        );
    }

    #[test]
    fn garbage_collection_keeps_referenced_protected_in_use_and_foreign_profiles() {
        let p = |name: &str, path: &str| ProfileInfo {
            name: name.into(),
            path: path.into(),
            roles: vec![],
        };
        let listed = vec![
            p("a", "/karpenter/us-east-1/c1/u1/"),
            p("b", "/karpenter/us-east-1/c1/u2/"),
            p("c", "/karpenter/us-east-1/c1/u3/"),
            p("d", "/karpenter/us-east-1/c1/u4/"),
            p("e", "/karpenter/us-east-1/c1/u5/"),
            p("foreign", "/"),
            p("other-cluster", "/karpenter/us-east-1/c2/u1/"),
        ];
        let set = |xs: &[&str]| xs.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
        let gc = garbage_profiles(
            &listed,
            "us-east-1",
            "c1",
            &set(&["a"]),
            &set(&["b"]),
            &set(&["c"]),
        );
        assert_eq!(gc, ["d", "e"]);
    }

    #[test]
    fn dry_runs() {
        assert_eq!(
            dry_run_outcome(AuthCheck::CreateFleet, Some("DryRunOperation"), ""),
            DryRunOutcome::Passed
        );
        assert_eq!(
            dry_run_outcome(AuthCheck::CreateFleet, Some("RequestLimitExceeded"), ""),
            DryRunOutcome::Retry
        );
        let denied = dry_run_outcome(AuthCheck::RunInstances, Some("UnauthorizedOperation"), "no");
        assert_eq!(
            denied,
            DryRunOutcome::Unauthorized {
                reason: "RunInstancesAuthCheckFailed",
                message: "no".into()
            }
        );
        assert_eq!(
            validation_observation(&[DryRunOutcome::Passed, DryRunOutcome::Passed]),
            Some(ValidationObservation::Passed)
        );
        assert_eq!(
            validation_observation(&[DryRunOutcome::Passed, denied]),
            Some(ValidationObservation::Failed {
                reason: "RunInstancesAuthCheckFailed".into(),
                message: "no".into()
            })
        );
        assert_eq!(validation_observation(&[DryRunOutcome::Retry]), None);
    }
}

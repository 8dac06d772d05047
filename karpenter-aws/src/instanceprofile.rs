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

/// The name of a managed profile: `{cluster}_{hash(region, class name, class UID, role)}`.
///
/// Upstream names a new profile with a random suffix each time the role changes (and keeps a
/// short-lived cache against recreating it when the status write fails); here the name is a
/// function of its inputs, so a reconcile whose status was never written back finds the
/// profile an earlier one created instead of creating another. A role change still gets a new
/// profile (another name); changing back to an earlier role reuses that role's profile if it
/// still exists.
pub fn profile_name(
    cluster: &str,
    region: &str,
    nodeclass: &str,
    nodeclass_uid: &str,
    role: &str,
) -> String {
    let h = fnv1a64(format!("{region}\u{0}{nodeclass}\u{0}{nodeclass_uid}\u{0}{role}").as_bytes());
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

/// A managed profile to make sure of: found by name (GetInstanceProfile) or created
/// (CreateInstanceProfile with path and tags; `EntityAlreadyExists` means a concurrent or
/// earlier attempt created it), then given the role ([`role_steps`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManagedProfile {
    /// The name ([`profile_name`]).
    pub name: String,
    /// The IAM path ([`profile_path`]).
    pub path: String,
    /// The tags ([`profile_tags`]).
    pub tags: BTreeMap<String, String>,
    /// The role it must hold (without its IAM path).
    pub role: String,
}

/// What the instance-profile step does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProfileAction {
    /// Use this profile as is (`spec.instanceProfile`, or the status's managed profile, which
    /// holds the role).
    Use(String),
    /// Find or create the managed profile for the class's role and make sure it holds it.
    Ensure(ManagedProfile),
}

/// Decides the instance-profile step, as upstream: `spec.instanceProfile` is used as is; with
/// `spec.role`, the profile in `status.instanceProfile` is kept when IAM (`current`) shows it
/// holds the role; otherwise (no profile yet, the profile is gone, holds no role or another
/// one) the profile named for the class and its role is ensured.
pub fn decide_profile(
    class: &EC2NodeClass,
    current: Option<&ProfileInfo>,
    cluster: &str,
    region: &str,
) -> ProfileAction {
    if let Some(p) = &class.spec.instance_profile {
        return ProfileAction::Use(p.clone());
    }
    let spec_role = class.spec.role.as_deref().unwrap_or("");
    let role = role_name(spec_role).to_string();
    match current {
        Some(p) if p.roles.len() == 1 && p.roles[0] == role => ProfileAction::Use(p.name.clone()),
        _ => {
            let uid = class.metadata.uid.as_deref().unwrap_or(class.name());
            ProfileAction::Ensure(ManagedProfile {
                name: profile_name(cluster, region, class.name(), uid, spec_role),
                path: profile_path(region, cluster, uid),
                tags: profile_tags(class, cluster, region),
                role,
            })
        }
    }
}

/// What to change on a managed profile so that it holds exactly `role` (an instance profile
/// holds at most one role).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RoleSteps {
    /// Roles to remove (RemoveRoleFromInstanceProfile), before the add.
    pub remove: Vec<String>,
    /// Whether to add `role` (AddRoleToInstanceProfile).
    pub add: bool,
}

/// The role changes `profile` needs to hold exactly `role`.
pub fn role_steps(profile: &ProfileInfo, role: &str) -> RoleSteps {
    let has = profile.roles.iter().any(|r| r == role);
    RoleSteps {
        remove: profile
            .roles
            .iter()
            .filter(|r| *r != role)
            .cloned()
            .collect(),
        add: !has,
    }
}

/// The managed profiles of one EC2NodeClass among `listed`: those under its path (upstream's
/// finalizer deletes them all), filtered here since not every IAM implementation honours
/// `PathPrefix`.
pub fn class_profiles<'a>(
    listed: &'a [ProfileInfo],
    region: &str,
    cluster: &str,
    nodeclass_uid: &str,
) -> Vec<&'a ProfileInfo> {
    let path = profile_path(region, cluster, nodeclass_uid);
    listed.iter().filter(|p| p.path == path).collect()
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
            decide_profile(&c, None, "c1", "us-east-1"),
            ProfileAction::Use("MyProfile".into())
        );
    }

    fn ensured(action: ProfileAction) -> ManagedProfile {
        match action {
            ProfileAction::Ensure(p) => p,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn managed_profiles_are_named_from_their_inputs() {
        let c = class(Some("path/to/KarpenterNodeRole"), None);
        let p = ensured(decide_profile(&c, None, "c1", "us-east-1"));
        assert!(p.name.starts_with("c1_"));
        assert_eq!(p.path, "/karpenter/us-east-1/c1/uid-1/");
        assert_eq!(p.role, "KarpenterNodeRole");
        assert_eq!(p.tags["kubernetes.io/cluster/c1"], "owned");
        assert_eq!(p.tags["eks:eks-cluster-name"], "c1");
        assert_eq!(p.tags["topology.kubernetes.io/region"], "us-east-1");
        assert_eq!(p.tags["karpenter.k8s.aws/ec2nodeclass"], "default");
        assert_eq!(p.tags["team"], "a");
        // The same inputs, the same name: a retry whose status was never written finds it.
        assert_eq!(ensured(decide_profile(&c, None, "c1", "us-east-1")), p);
        // Every input changes it.
        let other_role = class(Some("OtherRole"), None);
        let mut other_uid = c.clone();
        other_uid.metadata.uid = Some("uid-2".into());
        let names = [
            ensured(decide_profile(&other_role, None, "c1", "us-east-1")).name,
            ensured(decide_profile(&other_uid, None, "c1", "us-east-1")).name,
            ensured(decide_profile(&c, None, "c1", "eu-west-1")).name,
            profile_name(
                "c1",
                "us-east-1",
                "other",
                "uid-1",
                "path/to/KarpenterNodeRole",
            ),
        ];
        for n in &names {
            assert_ne!(*n, p.name);
        }
        assert!(
            ensured(decide_profile(&c, None, "c2", "us-east-1"))
                .name
                .starts_with("c2_")
        );
        // IAM's limits: at most 128 characters of [\w+=,.@-].
        assert!(p.name.len() <= 128);
        assert!(
            p.name
                .chars()
                .all(|ch| ch.is_ascii_alphanumeric() || "_+=,.@-".contains(ch))
        );
    }

    #[test]
    fn the_status_profile_is_kept_while_it_holds_the_role() {
        let c = class(Some("path/to/KarpenterNodeRole"), None);
        let want = ensured(decide_profile(&c, None, "c1", "us-east-1"));
        let good = ProfileInfo {
            name: "c1_1".into(),
            path: want.path.clone(),
            roles: vec!["KarpenterNodeRole".into()],
        };
        assert_eq!(
            decide_profile(&c, Some(&good), "c1", "us-east-1"),
            ProfileAction::Use("c1_1".into())
        );
        // Another role (spec.role changed) or none: the profile named for the role, as
        // upstream creates a new profile rather than editing the one nodes use.
        for roles in [vec!["OldRole".to_string()], vec![]] {
            let stale = ProfileInfo {
                roles,
                ..good.clone()
            };
            assert_eq!(
                decide_profile(&c, Some(&stale), "c1", "us-east-1"),
                ProfileAction::Ensure(want.clone())
            );
        }
    }

    #[test]
    fn role_steps_leave_exactly_the_role() {
        let p = |roles: &[&str]| ProfileInfo {
            name: "p".into(),
            path: "/".into(),
            roles: roles.iter().map(|r| r.to_string()).collect(),
        };
        assert_eq!(role_steps(&p(&["R"]), "R"), RoleSteps::default());
        assert_eq!(
            role_steps(&p(&[]), "R"),
            RoleSteps {
                remove: vec![],
                add: true
            }
        );
        assert_eq!(
            role_steps(&p(&["Old"]), "R"),
            RoleSteps {
                remove: vec!["Old".into()],
                add: true
            }
        );
    }

    #[test]
    fn class_profiles_are_those_under_its_path() {
        let p = |name: &str, path: &str| ProfileInfo {
            name: name.into(),
            path: path.into(),
            roles: vec![],
        };
        let listed = vec![
            p("a", "/karpenter/us-east-1/c1/u1/"),
            p("b", "/karpenter/us-east-1/c1/u1/"),
            p("c", "/karpenter/us-east-1/c1/u2/"),
            p("d", "/karpenter/us-east-1/c2/u1/"),
            p("e", "/"),
        ];
        let names: Vec<&str> = class_profiles(&listed, "us-east-1", "c1", "u1")
            .iter()
            .map(|p| p.name.as_str())
            .collect();
        assert_eq!(names, ["a", "b"]);
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

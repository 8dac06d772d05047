//! The node-class reconcile step as a plain function of (class, what the AWS APIs returned,
//! now): resolved subnets, security groups, AMIs and instance profile, and upstream's
//! conditions with their reasons and requeue intervals.
//!
//! The SDK shell gathers [`Observations`] (DescribeSubnets, DescribeSecurityGroups, the AMI
//! resolution of [`crate::ami`], the instance-profile step, the dry-run permission checks) and
//! calls [`reconcile`]; it writes the returned status and requeues after
//! [`Reconciled::requeue_after`].

use std::time::Duration;

use karpenter_core::api::{Condition, ConditionStatus};

use super::{EC2NodeClass, EC2NodeClassStatus, StatusAmi, StatusSecurityGroup, StatusSubnet};
use crate::network::{SecurityGroupInfo, SubnetInfo, sort_security_groups, sort_subnets};

/// `Ready`: the root condition.
pub const READY: &str = "Ready";
/// `AMIsReady`.
pub const AMIS_READY: &str = "AMIsReady";
/// `SubnetsReady`.
pub const SUBNETS_READY: &str = "SubnetsReady";
/// `SecurityGroupsReady`.
pub const SECURITY_GROUPS_READY: &str = "SecurityGroupsReady";
/// `InstanceProfileReady`.
pub const INSTANCE_PROFILE_READY: &str = "InstanceProfileReady";
/// `ValidationSucceeded`.
pub const VALIDATION_SUCCEEDED: &str = "ValidationSucceeded";
/// `CapacityReservationsReady` (upstream's, with its `ReservedCapacity` gate on: the default,
/// and the only setting this build accepts).
pub const CAPACITY_RESERVATIONS_READY: &str = "CapacityReservationsReady";
/// The conditions `Ready` depends on, in upstream's order.
pub const DEPENDENTS: &[&str] = &[
    AMIS_READY,
    SUBNETS_READY,
    SECURITY_GROUPS_READY,
    INSTANCE_PROFILE_READY,
    VALIDATION_SUCCEEDED,
    CAPACITY_RESERVATIONS_READY,
];

/// What AMI resolution produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AmiObservation {
    /// The selected AMIs (already ordered, see [`crate::ami::select_images`]).
    Resolved(Vec<StatusAmi>),
    /// The alias is not supported for the cluster's Kubernetes version (terminal).
    UnsupportedAlias(String),
}

/// What the dry-run permission checks (CreateLaunchTemplate, CreateFleet, RunInstances) and
/// the other runtime validations found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ValidationObservation {
    /// Every check passed (or dry runs are disabled).
    Passed,
    /// A check failed: upstream's reason (`CreateFleetAuthCheckFailed`,
    /// `ClusterCIDRResolutionFailed`, `UserDataSizeLimitExceeded`, ...) and a message.
    Failed {
        /// The reason.
        reason: String,
        /// The message.
        message: String,
    },
}

/// What the AWS APIs returned for one class.
#[derive(Debug, Clone, PartialEq)]
pub struct Observations {
    /// AMI resolution.
    pub amis: AmiObservation,
    /// DescribeSubnets results for the class's selector terms (any order).
    pub subnets: Vec<SubnetInfo>,
    /// DescribeSecurityGroups results (any order).
    pub security_groups: Vec<SecurityGroupInfo>,
    /// The instance profile: its name, or why it could not be ensured.
    pub instance_profile: Result<String, String>,
    /// The runtime validation.
    pub validation: ValidationObservation,
    /// The reservations the class's `capacityReservationSelectorTerms` select, as status
    /// entries (`crate::reservation::select` and `crate::reservation::status` of what
    /// DescribeCapacityReservations returned; empty without terms), or why the call failed.
    pub capacity_reservations: Result<Vec<super::StatusCapacityReservation>, String>,
}

/// The outcome of [`reconcile`].
#[derive(Debug, Clone, PartialEq)]
pub struct Reconciled {
    /// The new status.
    pub status: EC2NodeClassStatus,
    /// When to reconcile again.
    pub requeue_after: Duration,
}

const MINUTE: Duration = Duration::from_secs(60);

/// Builds a condition through its serde form (robust to new optional fields in core).
fn condition(
    type_: &str,
    status: ConditionStatus,
    reason: &str,
    message: &str,
    last_transition_time: &str,
    observed_generation: Option<i64>,
) -> Condition {
    let mut v = serde_json::json!({
        "type": type_,
        "status": status.as_str(),
        "reason": reason,
        "lastTransitionTime": last_transition_time,
    });
    if !message.is_empty() {
        v["message"] = message.into();
    }
    if let Some(g) = observed_generation {
        v["observedGeneration"] = g.into();
    }
    serde_json::from_value(v).expect("a well-formed condition")
}

/// Computes the class's status from `obs` at `now`.
///
/// Conditions keep their `lastTransitionTime` while their status does not change, carry the
/// class's generation as `observedGeneration`, and follow upstream: `AMIsReady` False
/// `AMINotFound` / `UnsupportedAlias`; `SubnetsReady` False `SubnetsNotFound`;
/// `SecurityGroupsReady` False `SecurityGroupsNotFound`; `InstanceProfileReady` Unknown while
/// the profile cannot be ensured; `ValidationSucceeded` False `TagValidationFailed` for
/// restricted tags, `DependenciesNotReady` while another condition is not True, else the
/// observed validation; `CapacityReservationsReady` True once the class's reservations were
/// described (`status.capacityReservations` as observed); `Ready` True iff all six are True. Requeue: 1 min when AMIs, subnets
/// or security groups are missing, else 5 min.
pub fn reconcile(class: &EC2NodeClass, obs: &Observations, now: jiff::Timestamp) -> Reconciled {
    let previous = &class.status;
    let generation = class.metadata.generation;
    let mut status = EC2NodeClassStatus::default();
    let mut set = Vec::new();
    let mut requeue = 5 * MINUTE;

    match &obs.amis {
        AmiObservation::Resolved(amis) if amis.is_empty() => {
            requeue = requeue.min(MINUTE);
            set.push((
                AMIS_READY,
                ConditionStatus::False,
                "AMINotFound",
                "AMISelector did not match any AMIs".to_string(),
            ));
        }
        AmiObservation::Resolved(amis) => {
            status.amis = amis.clone();
            set.push((AMIS_READY, ConditionStatus::True, AMIS_READY, String::new()));
        }
        AmiObservation::UnsupportedAlias(msg) => set.push((
            AMIS_READY,
            ConditionStatus::False,
            "UnsupportedAlias",
            msg.clone(),
        )),
    }

    let subnets = sort_subnets(obs.subnets.clone());
    if subnets.is_empty() {
        requeue = requeue.min(MINUTE);
        set.push((
            SUBNETS_READY,
            ConditionStatus::False,
            "SubnetsNotFound",
            "SubnetSelector did not match any Subnets".into(),
        ));
    } else {
        status.subnets = subnets
            .iter()
            .map(|s| StatusSubnet {
                id: s.id.clone(),
                zone: s.zone.clone(),
                zone_id: s.zone_id.clone(),
            })
            .collect();
        set.push((
            SUBNETS_READY,
            ConditionStatus::True,
            SUBNETS_READY,
            String::new(),
        ));
    }

    let groups = sort_security_groups(obs.security_groups.clone());
    if groups.is_empty() {
        requeue = requeue.min(MINUTE);
        set.push((
            SECURITY_GROUPS_READY,
            ConditionStatus::False,
            "SecurityGroupsNotFound",
            "SecurityGroupSelector did not match any SecurityGroups".into(),
        ));
    } else {
        status.security_groups = groups
            .iter()
            .map(|g| StatusSecurityGroup {
                id: g.id.clone(),
                name: g.name.clone(),
            })
            .collect();
        set.push((
            SECURITY_GROUPS_READY,
            ConditionStatus::True,
            SECURITY_GROUPS_READY,
            String::new(),
        ));
    }

    match &obs.instance_profile {
        Ok(name) => {
            status.instance_profile = Some(name.clone());
            set.push((
                INSTANCE_PROFILE_READY,
                ConditionStatus::True,
                INSTANCE_PROFILE_READY,
                String::new(),
            ));
        }
        Err(msg) => {
            requeue = requeue.min(MINUTE);
            set.push((
                INSTANCE_PROFILE_READY,
                ConditionStatus::Unknown,
                "InstanceProfileNotReady",
                msg.clone(),
            ))
        }
    }

    // Capacity reservations (upstream's reconciler): the selected ones, capacity blocks
    // `expiring` 40 minutes before their end. A failed call keeps the previous list and
    // condition (the condition starts Unknown) and retries within a minute.
    let reservations_condition = match &obs.capacity_reservations {
        Ok(selected) => {
            status.capacity_reservations = selected.clone();
            (
                ConditionStatus::True,
                CAPACITY_RESERVATIONS_READY.to_string(),
                String::new(),
            )
        }
        Err(message) => {
            requeue = requeue.min(MINUTE);
            status.capacity_reservations = previous.capacity_reservations.clone();
            match previous.condition(CAPACITY_RESERVATIONS_READY) {
                Some(c) => (
                    c.status,
                    c.reason.clone().unwrap_or_default(),
                    c.message.clone().unwrap_or_default(),
                ),
                None => (
                    ConditionStatus::Unknown,
                    "CapacityReservationsNotReady".to_string(),
                    message.clone(),
                ),
            }
        }
    };

    let restricted = class.spec.tags.keys().find(|k| {
        super::validation::RESTRICTED_TAG_KEYS.contains(&k.as_str())
            || k.starts_with(super::validation::RESTRICTED_TAG_PREFIX)
    });
    let others_true = set.iter().all(|(_, s, _, _)| *s == ConditionStatus::True);
    let validation = if let Some(k) = restricted {
        (
            ConditionStatus::False,
            "TagValidationFailed".to_string(),
            format!("tag contains a restricted tag matching {k:?}"),
        )
    } else if !others_true {
        (
            ConditionStatus::Unknown,
            "DependenciesNotReady".to_string(),
            "waiting for the other conditions to become true".to_string(),
        )
    } else {
        match &obs.validation {
            ValidationObservation::Passed => (
                ConditionStatus::True,
                VALIDATION_SUCCEEDED.to_string(),
                String::new(),
            ),
            ValidationObservation::Failed { reason, message } => {
                requeue = requeue.min(10 * MINUTE);
                (ConditionStatus::False, reason.clone(), message.clone())
            }
        }
    };

    let mut conditions: Vec<(String, ConditionStatus, String, String)> = set
        .into_iter()
        .map(|(t, s, r, m)| (t.to_string(), s, r.to_string(), m))
        .collect();
    conditions.push((
        VALIDATION_SUCCEEDED.into(),
        validation.0,
        validation.1,
        validation.2,
    ));
    conditions.push((
        CAPACITY_RESERVATIONS_READY.into(),
        reservations_condition.0,
        reservations_condition.1,
        reservations_condition.2,
    ));
    let ready = if conditions.iter().all(|c| c.1 == ConditionStatus::True) {
        (ConditionStatus::True, READY.to_string(), String::new())
    } else {
        let bad: Vec<String> = conditions
            .iter()
            .filter(|c| c.1 != ConditionStatus::True)
            .map(|c| format!("{}={}", c.0, c.1.as_str()))
            .collect();
        let any_false = conditions.iter().any(|c| c.1 == ConditionStatus::False);
        (
            if any_false {
                ConditionStatus::False
            } else {
                ConditionStatus::Unknown
            },
            "UnhealthyDependents".to_string(),
            bad.join(", "),
        )
    };
    conditions.push((READY.into(), ready.0, ready.1, ready.2));

    let stamp = now.to_string();
    status.conditions = conditions
        .into_iter()
        .map(|(type_, s, reason, message)| {
            let last = previous
                .condition(&type_)
                .filter(|c| c.status == s)
                .and_then(|c| c.last_transition_time.clone())
                .unwrap_or_else(|| stamp.clone());
            condition(&type_, s, &reason, &message, &last, generation)
        })
        .collect();
    Reconciled {
        status,
        requeue_after: requeue,
    }
}

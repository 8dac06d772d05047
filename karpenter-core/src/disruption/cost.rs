//! Cost formulas of the disruption planner (upstream `utils/disruption/disruption.go`): how costly
//! evicting a pod is, how much of a NodeClaim's lifetime remains, when it expires, and whether a
//! NodeClaim is still inside its pool's `consolidateAfter` window.
//!
//! ```
//! use karpenter_core::disruption::cost::{POD_DELETION_COST_ANNOTATION, eviction_cost};
//! use karpenter_core::model::Pod;
//!
//! let mut pod = Pod::new("default", "web");
//! assert_eq!(eviction_cost(&pod), 1.0);
//! pod.annotations.insert(POD_DELETION_COST_ANNOTATION.into(), "134217728".into()); // 2^27
//! assert_eq!(eviction_cost(&pod), 2.0);
//! pod.priority = Some(1_000_000_000);
//! assert_eq!(eviction_cost(&pod), 10.0); // clamped
//! ```

use crate::api::{NodeClaim, NodePool, find_condition};
use crate::model::{Pod, Timestamp};

/// Annotation `controller.kubernetes.io/pod-deletion-cost`: a ReplicaSet's preference for which
/// pods to remove first; Karpenter reads it as part of a pod's eviction cost.
pub const POD_DELETION_COST_ANNOTATION: &str = "controller.kubernetes.io/pod-deletion-cost";

/// What every pod's eviction cost starts from, and the base cost of disrupting a node
/// (upstream's `PerNodeBaseDisruptionCost`).
pub const BASE_COST: f64 = 1.0;

/// Eviction costs are clamped to `[-MAX_EVICTION_COST, MAX_EVICTION_COST]`.
pub const MAX_EVICTION_COST: f64 = 10.0;

/// The pod-deletion-cost annotation is divided by this (2^27) before it is added.
const DELETION_COST_SCALE: f64 = 134_217_728.0;
/// `spec.priority` is divided by this (2^25) before it is added.
const PRIORITY_SCALE: f64 = 33_554_432.0;

/// How costly it is to evict `pod` (upstream's `EvictionCost`): `1.0`, plus the
/// `controller.kubernetes.io/pod-deletion-cost` annotation divided by 2^27 when it parses as a
/// number, plus `spec.priority` divided by 2^25 when set, clamped to `[-10, 10]`.
///
/// An annotation that does not parse as Go's `strconv.ParseFloat` would (surrounding whitespace,
/// a finite value out of range) is ignored (upstream logs it). Deviation: upstream's
/// `ParseFloat` accepts `NaN`, which would make the cost `NaN`; a value that parses to `NaN` is
/// ignored here like any other unparsable value, so costs are always finite and comparable.
/// (`±Inf` parse and clamp to `±10`, as upstream.)
pub fn eviction_cost(pod: &Pod) -> f64 {
    let mut cost = BASE_COST;
    if let Some(deletion_cost) = pod
        .annotations
        .get(POD_DELETION_COST_ANNOTATION)
        .and_then(|v| parse_deletion_cost(v))
    {
        cost += deletion_cost / DELETION_COST_SCALE;
    }
    if let Some(priority) = pod.priority {
        cost += f64::from(priority) / PRIORITY_SCALE;
    }
    cost.clamp(-MAX_EVICTION_COST, MAX_EVICTION_COST)
}

/// The pod-deletion-cost annotation as Go's `strconv.ParseFloat` reads it: no surrounding
/// whitespace, and a finite literal beyond `f64`'s range is an error (`ErrRange`), not an
/// infinity; only an explicit `Inf`/`Infinity` (any case, optional sign) is infinite. `NaN` is
/// rejected too (see [`eviction_cost`]).
fn parse_deletion_cost(text: &str) -> Option<f64> {
    let value: f64 = text.parse().ok().filter(|v: &f64| !v.is_nan())?;
    if value.is_infinite() {
        let unsigned = text.trim_start_matches(['+', '-']).to_ascii_lowercase();
        if unsigned != "inf" && unsigned != "infinity" {
            return None;
        }
    }
    Some(value)
}

/// The summed [`eviction_cost`] of `pods` (upstream's `ReschedulingCost`); negative costs count.
pub fn rescheduling_cost<'a>(pods: impl IntoIterator<Item = &'a Pod>) -> f64 {
    pods.into_iter().map(eviction_cost).sum()
}

/// The cost of disrupting a node whose reschedulable pods are `pods`: [`BASE_COST`] plus the sum of
/// the *positive* eviction costs (the candidate's `RescheduleDisruptionCost`, upstream
/// `disruption/types.go` `Candidate`).
pub fn reschedule_disruption_cost<'a>(pods: impl IntoIterator<Item = &'a Pod>) -> f64 {
    BASE_COST
        + pods
            .into_iter()
            .map(|p| eviction_cost(p).max(0.0))
            .sum::<f64>()
}

/// Parses an RFC 3339 timestamp as the API objects carry them.
pub(crate) fn parse_time(text: Option<&str>) -> Option<Timestamp> {
    text.and_then(|t| t.trim().parse::<Timestamp>().ok())
}

/// The instant the NodeClaim expires: `metadata.creationTimestamp + expireAfter`
/// (`expireAfter` defaults to `720h`, as the CRD does), saturating at the ends of the
/// representable range. `None` when `expireAfter` is `Never` or the creation timestamp is
/// missing or not RFC 3339.
pub fn expires_at(node_claim: &NodeClaim) -> Option<Timestamp> {
    let expire_after = node_claim.spec.effective_expire_after();
    let d = expire_after.duration()?.as_signed_duration();
    let created: Timestamp = node_claim
        .metadata
        .creation_timestamp
        .as_deref()?
        .parse()
        .ok()?;
    Some(created.checked_add(d).unwrap_or(if d.is_negative() {
        Timestamp::MIN
    } else {
        Timestamp::MAX
    }))
}

/// Whether the NodeClaim has expired at `now` (upstream's expiration controller would delete
/// it): not being deleted, and `now` is at or past [`expires_at`].
pub fn is_expired(node_claim: &NodeClaim, now: Timestamp) -> bool {
    node_claim.metadata.deletion_timestamp.is_none()
        && expires_at(node_claim).is_some_and(|at| now >= at)
}

/// The fraction of the NodeClaim's lifetime that remains at `now` (upstream's
/// `LifetimeRemaining`): `1.0` when `expireAfter` is `Never`, otherwise
/// `(expireAfter − age) / expireAfter` clamped to `[0, 1]`. `expireAfter` defaults to `720h` as
/// in the CRD.
///
/// As upstream, a NodeClaim without a (parsable) creation timestamp is infinitely old (Go's zero
/// time), so its remaining lifetime is `0`. A non-positive `expireAfter` also gives `0`
/// (upstream would divide by zero).
pub fn lifetime_remaining(node_claim: &NodeClaim, now: Timestamp) -> f64 {
    let expire_after = node_claim.spec.effective_expire_after();
    let Some(total) = expire_after.duration() else {
        return 1.0;
    };
    let total_secs = total.as_signed_duration().as_secs_f64();
    if total_secs <= 0.0 {
        return 0.0;
    }
    let Some(created) = parse_time(node_claim.metadata.creation_timestamp.as_deref()) else {
        return 0.0;
    };
    let age_secs = now.duration_since(created).as_secs_f64();
    ((total_secs - age_secs) / total_secs).clamp(0.0, 1.0)
}

/// Whether the NodeClaim is still inside its NodePool's `consolidateAfter` window at `now`
/// (upstream's `IsUnderConsolidateAfter`).
///
/// `false` when `consolidateAfter` is `Never` or zero, or when the NodeClaim's `Initialized`
/// condition is not true. Otherwise the reference time is `status.lastPodEventTime` if set, else
/// the `Initialized` condition's `lastTransitionTime`, and the answer is
/// `now − reference < consolidateAfter`. A reference time that is missing or does not parse
/// counts as Go's zero time (long ago), so the window has passed.
pub fn is_under_consolidate_after(
    node_pool: &NodePool,
    node_claim: &NodeClaim,
    now: Timestamp,
) -> bool {
    let consolidate_after = node_pool.spec.disruption.effective_consolidate_after();
    let Some(window) = consolidate_after.duration() else {
        return false;
    };
    if window.as_nanos() == 0 {
        return false;
    }
    let Some(initialized) =
        find_condition(&node_claim.status.conditions, "Initialized").filter(|c| c.is_true())
    else {
        return false;
    };
    let reference = parse_time(node_claim.status.last_pod_event_time.as_deref())
        .or_else(|| parse_time(initialized.last_transition_time.as_deref()));
    match reference {
        Some(reference) => now.duration_since(reference) < window.as_signed_duration(),
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{
        Condition, ConditionStatus, NillableDuration, NodeClaimSpec, NodeClaimTemplate,
        NodeClaimTemplateSpec, NodeClassReference, NodePoolSpec,
    };

    fn ts(s: &str) -> Timestamp {
        s.parse().expect("valid timestamp")
    }

    fn pod_with(deletion_cost: Option<&str>, priority: Option<i32>) -> Pod {
        let mut p = Pod::new("default", "p");
        if let Some(c) = deletion_cost {
            p.annotations
                .insert(POD_DELETION_COST_ANNOTATION.to_string(), c.to_string());
        }
        p.priority = priority;
        p
    }

    // Upstream `disruption/suite_test.go` "Pod Eviction Cost".

    #[test]
    fn should_have_a_standard_disruption_cost_for_a_pod_with_no_priority_or_disruption_cost_specified()
     {
        assert_eq!(eviction_cost(&pod_with(None, None)), 1.0);
    }

    #[test]
    fn should_have_a_higher_disruption_cost_for_a_pod_with_a_positive_deletion_disruption_cost() {
        assert!(eviction_cost(&pod_with(Some("100"), None)) > 1.0);
    }

    #[test]
    fn should_have_a_lower_disruption_cost_for_a_pod_with_a_positive_deletion_disruption_cost() {
        // Upstream's title says "positive"; the pod has a negative deletion cost.
        assert!(eviction_cost(&pod_with(Some("-100"), None)) < 1.0);
    }

    #[test]
    fn should_have_higher_costs_for_higher_deletion_costs() {
        let a = eviction_cost(&pod_with(Some("101"), None));
        let b = eviction_cost(&pod_with(Some("100"), None));
        let c = eviction_cost(&pod_with(Some("99"), None));
        assert!(a > b && b > c, "{a} {b} {c}");
    }

    #[test]
    fn should_have_a_higher_disruption_cost_for_a_pod_with_a_higher_priority() {
        assert!(eviction_cost(&pod_with(None, Some(1))) > 1.0);
    }

    #[test]
    fn should_have_a_lower_disruption_cost_for_a_pod_with_a_lower_priority() {
        assert!(eviction_cost(&pod_with(None, Some(-1))) < 1.0);
    }

    #[test]
    fn eviction_cost_scales_and_clamps() {
        assert_eq!(eviction_cost(&pod_with(Some("134217728"), None)), 2.0);
        assert_eq!(eviction_cost(&pod_with(None, Some(33_554_432))), 2.0);
        assert_eq!(eviction_cost(&pod_with(Some("2147483647"), None)), 10.0);
        assert_eq!(eviction_cost(&pod_with(Some("-2147483647"), None)), -10.0);
        assert_eq!(eviction_cost(&pod_with(None, Some(i32::MIN))), -10.0);
        assert_eq!(eviction_cost(&pod_with(Some("Inf"), None)), 10.0);
        // Unparsable (and NaN) annotations are ignored.
        assert_eq!(eviction_cost(&pod_with(Some("lots"), None)), 1.0);
        assert_eq!(eviction_cost(&pod_with(Some("NaN"), None)), 1.0);
        // As Go's ParseFloat (upstream `utils/disruption/disruption.go`): surrounding whitespace is
        // a parse error, and so is a finite literal out of range (ErrRange), while an explicit
        // infinity clamps.
        assert_eq!(eviction_cost(&pod_with(Some(" 134217728"), None)), 1.0);
        assert_eq!(eviction_cost(&pod_with(Some("134217728\n"), None)), 1.0);
        assert_eq!(eviction_cost(&pod_with(Some("1e400"), None)), 1.0);
        assert_eq!(eviction_cost(&pod_with(Some("-1e400"), None)), 1.0);
        assert_eq!(eviction_cost(&pod_with(Some("-infinity"), None)), -10.0);
        assert_eq!(eviction_cost(&pod_with(Some("+Inf"), None)), 10.0);
        assert_eq!(
            eviction_cost(&pod_with(Some("1.5e8"), None)),
            1.0 + 1.5e8 / 2f64.powi(27)
        );
    }

    #[test]
    fn rescheduling_costs_sum() {
        let pods = [
            pod_with(None, None),
            pod_with(Some("-2147483647"), None),
            pod_with(Some("134217728"), None),
        ];
        assert_eq!(rescheduling_cost(&pods), 1.0 - 10.0 + 2.0);
        assert_eq!(reschedule_disruption_cost(&pods), 1.0 + 1.0 + 2.0);
        assert_eq!(reschedule_disruption_cost(&[]), 1.0);
    }

    fn node_claim(created: Option<&str>, expire_after: Option<&str>) -> NodeClaim {
        let mut spec = NodeClaimSpec::new(NodeClassReference::new("g", "K", "n"));
        spec.expire_after = expire_after.map(|e| NillableDuration::parse(e).expect("valid"));
        let mut nc = NodeClaim::new("nc", spec);
        nc.metadata.creation_timestamp = created.map(str::to_string);
        nc
    }

    #[test]
    fn lifetime_remaining_is_the_clamped_fraction_left() {
        let now = ts("2024-01-02T00:00:00Z");
        let nc = node_claim(Some("2024-01-01T00:00:00Z"), Some("48h"));
        assert_eq!(lifetime_remaining(&nc, now), 0.5);
        let nc = node_claim(Some("2024-01-01T00:00:00Z"), Some("12h"));
        assert_eq!(lifetime_remaining(&nc, now), 0.0);
        let nc = node_claim(Some("2024-01-01T00:00:00Z"), Some("Never"));
        assert_eq!(lifetime_remaining(&nc, now), 1.0);
        // Default expireAfter is 720h.
        let nc = node_claim(Some("2024-01-01T00:00:00Z"), None);
        assert!((lifetime_remaining(&nc, now) - (1.0 - 24.0 / 720.0)).abs() < 1e-12);
        // Created in the future: clamped to 1.
        let nc = node_claim(Some("2024-01-03T00:00:00Z"), Some("48h"));
        assert_eq!(lifetime_remaining(&nc, now), 1.0);
        // No creation timestamp: Go's zero time.
        assert_eq!(lifetime_remaining(&node_claim(None, Some("48h")), now), 0.0);
        assert_eq!(lifetime_remaining(&node_claim(None, Some("0s")), now), 0.0);
    }

    fn pool(consolidate_after: Option<&str>) -> NodePool {
        let mut spec = NodePoolSpec::new(NodeClaimTemplate {
            metadata: Default::default(),
            spec: NodeClaimTemplateSpec::new(NodeClassReference::new("g", "K", "n")),
        });
        spec.disruption.consolidate_after =
            consolidate_after.map(|c| NillableDuration::parse(c).expect("valid"));
        NodePool::new("default", spec)
    }

    fn initialized(nc: &mut NodeClaim, status: ConditionStatus, at: &str) {
        nc.status.conditions.push(Condition {
            type_: "Initialized".into(),
            status,
            reason: None,
            message: None,
            last_transition_time: Some(at.into()),
            observed_generation: None,
        });
    }

    #[test]
    fn consolidate_after_window() {
        let now = ts("2024-01-01T01:00:00Z");
        let mut nc = node_claim(Some("2024-01-01T00:00:00Z"), None);
        // Not initialized.
        assert!(!is_under_consolidate_after(&pool(Some("2h")), &nc, now));
        initialized(&mut nc, ConditionStatus::True, "2024-01-01T00:30:00Z");
        assert!(is_under_consolidate_after(&pool(Some("2h")), &nc, now));
        assert!(!is_under_consolidate_after(&pool(Some("30m")), &nc, now));
        assert!(!is_under_consolidate_after(&pool(Some("Never")), &nc, now));
        assert!(!is_under_consolidate_after(&pool(Some("0s")), &nc, now));
        // Default consolidateAfter is 0s.
        assert!(!is_under_consolidate_after(&pool(None), &nc, now));
        // lastPodEventTime takes precedence.
        nc.status.last_pod_event_time = Some("2024-01-01T00:45:00Z".into());
        assert!(is_under_consolidate_after(&pool(Some("20m")), &nc, now));
        assert!(!is_under_consolidate_after(&pool(Some("15m")), &nc, now));
        // Exactly at the boundary the window has passed.
        nc.status.last_pod_event_time = Some("2024-01-01T00:40:00Z".into());
        assert!(!is_under_consolidate_after(&pool(Some("20m")), &nc, now));
    }

    #[test]
    fn consolidate_after_needs_a_true_initialized_condition() {
        let now = ts("2024-01-01T01:00:00Z");
        let mut nc = node_claim(Some("2024-01-01T00:00:00Z"), None);
        initialized(&mut nc, ConditionStatus::False, "2024-01-01T00:59:00Z");
        assert!(!is_under_consolidate_after(&pool(Some("2h")), &nc, now));
    }

    #[test]
    fn expires_at_adds_expire_after_to_the_creation_time() {
        let nc = node_claim(Some("2024-01-01T00:00:00Z"), Some("1h"));
        assert_eq!(expires_at(&nc), Some(ts("2024-01-01T01:00:00Z")));
        assert!(!is_expired(&nc, ts("2024-01-01T00:59:59Z")));
        assert!(is_expired(&nc, ts("2024-01-01T01:00:00Z")));
        // Default 720h.
        let nc = node_claim(Some("2024-01-01T00:00:00Z"), None);
        assert_eq!(expires_at(&nc), Some(ts("2024-01-31T00:00:00Z")));
    }

    #[test]
    fn never_unparsable_or_deleting_claims_do_not_expire() {
        let now = ts("2030-01-01T00:00:00Z");
        assert_eq!(
            expires_at(&node_claim(Some("2024-01-01T00:00:00Z"), Some("Never"))),
            None
        );
        assert_eq!(expires_at(&node_claim(None, Some("1h"))), None);
        assert_eq!(expires_at(&node_claim(Some("yesterday"), Some("1h"))), None);
        let mut deleting = node_claim(Some("2024-01-01T00:00:00Z"), Some("1h"));
        assert!(is_expired(&deleting, now));
        deleting.metadata.deletion_timestamp = Some("2024-01-01T00:30:00Z".into());
        assert!(!is_expired(&deleting, now));
    }
}

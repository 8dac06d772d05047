//! Expiration (upstream `nodeclaim/expiration`): a NodeClaim older than its `expireAfter` is
//! deleted outright — budgets, PDB pre-checks, node do-not-disrupt and nominations are all ignored,
//! and no replacement is launched first (its pods become pending and are provisioned again). Drain
//! then follows upstream `node/termination`, bounded by the claim's `terminationGracePeriod` if
//! set.

use crate::api::NodeClaim;
use crate::model::Timestamp;

use super::{Metric, claim_is_deleting, disrupted_metrics, metric_reasons};
use crate::disruption::cost::expires_at;

/// What the expiration controller does with a NodeClaim.
#[derive(Debug, Clone, PartialEq)]
pub enum ExpirationDecision {
    /// Nothing: the claim is deleting, has `expireAfter: Never`, or no valid creation time.
    Skip,
    /// Not expired yet: look again at this instant (the expiry).
    RequeueAt(Timestamp),
    /// Expired: delete the claim and update the metrics (reason `expired`).
    Expire {
        /// `nodeclaims_disrupted_total{reason="expired"}` and, when the node has
        /// reschedulable pods, `pods_disruption_initiated_total`.
        metrics: Vec<Metric>,
    },
}

/// Decides expiration of a managed NodeClaim: expired when `now ≥ creationTimestamp +
/// expireAfter` (`expireAfter` defaults to `720h`, as the CRD does). The metrics count no
/// reschedulable pods; see [`expiration_decision_with_pods`].
pub fn expiration_decision(claim: &NodeClaim, now: Timestamp) -> ExpirationDecision {
    expiration_decision_with_pods(claim, 0, now)
}

/// [`expiration_decision`], counting the node's `reschedulable_pods` in
/// `pods_disruption_initiated_total{reason="expired"}` (upstream `nodeclaim/expiration`).
pub fn expiration_decision_with_pods(
    claim: &NodeClaim,
    reschedulable_pods: usize,
    now: Timestamp,
) -> ExpirationDecision {
    if claim_is_deleting(claim) {
        return ExpirationDecision::Skip;
    }
    let Some(expires_at) = expires_at(claim) else {
        return ExpirationDecision::Skip;
    };
    if now >= expires_at {
        ExpirationDecision::Expire {
            metrics: disrupted_metrics(claim, metric_reasons::EXPIRED, "", reschedulable_pods),
        }
    } else {
        ExpirationDecision::RequeueAt(expires_at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{NillableDuration, NodeClaimSpec, NodeClassReference};

    fn claim(expire_after: Option<&str>) -> NodeClaim {
        let mut c = NodeClaim::new(
            "nc",
            NodeClaimSpec::new(NodeClassReference::new("g", "K", "n")),
        );
        c.spec.expire_after = expire_after.map(|e| NillableDuration::parse(e).unwrap());
        c.metadata.creation_timestamp = Some("2024-01-01T00:00:00Z".into());
        c
    }

    fn t(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    #[test]
    fn requeues_until_expiry_then_expires() {
        let c = claim(Some("1h"));
        assert_eq!(
            expiration_decision(&c, t("2024-01-01T00:30:00Z")),
            ExpirationDecision::RequeueAt(t("2024-01-01T01:00:00Z"))
        );
        let ExpirationDecision::Expire { metrics } =
            expiration_decision(&c, t("2024-01-01T01:00:00Z"))
        else {
            panic!("should expire");
        };
        assert_eq!(metrics[0].labels["reason"], "expired");
        assert_eq!(metrics[0].labels["consolidation_policy"], "");
    }

    #[test]
    fn default_is_720h_and_never_skips() {
        assert_eq!(
            expiration_decision(&claim(None), t("2024-01-01T00:00:00Z")),
            ExpirationDecision::RequeueAt(t("2024-01-31T00:00:00Z"))
        );
        assert_eq!(
            expiration_decision(&claim(Some("Never")), t("2030-01-01T00:00:00Z")),
            ExpirationDecision::Skip
        );
    }

    #[test]
    fn deleting_claims_are_skipped() {
        let mut c = claim(Some("1h"));
        c.metadata.deletion_timestamp = Some("2024-01-01T00:10:00Z".into());
        assert_eq!(
            expiration_decision(&c, t("2024-01-02T00:00:00Z")),
            ExpirationDecision::Skip
        );
    }
}

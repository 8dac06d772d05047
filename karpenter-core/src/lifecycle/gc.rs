//! Garbage collection (upstream `nodeclaim/garbagecollection`, every 2 minutes): NodeClaims whose
//! instance vanished.
//!
//! For each registered, non-deleting NodeClaim whose provider id is missing from the cloud
//! provider's `List()` (instances being deleted excluded by the caller): if its Node exists and
//! is `Ready=True` it is left alone, otherwise the NodeClaim is deleted (metric reason
//! `garbage_collected`). Unregistered NodeClaims are left to the 15-minute registration
//! timeout. Leaked instances without a NodeClaim are the cloud provider's business.

use std::collections::BTreeSet;

use crate::api::NodeClaim;

use super::conditions::{self, REGISTERED};
use super::{Metric, Node, claim_is_deleting, disrupted_metrics, metric_reasons};

/// The period of the garbage-collection controller.
pub const GC_PERIOD: jiff::SignedDuration = jiff::SignedDuration::from_mins(2);

/// A NodeClaim to delete because its instance is gone.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct GcDeletion {
    /// The NodeClaim's name.
    pub claim_name: String,
    /// Its provider id.
    pub provider_id: String,
    /// `nodeclaims_disrupted_total{reason="garbage_collected"}`.
    pub metrics: Vec<Metric>,
}

/// The NodeClaims to garbage-collect, in input order. `claims` are the managed NodeClaims,
/// `cloud_provider_ids` the provider ids of the instances the cloud provider lists (without
/// those being deleted), `nodes` the cluster's Nodes. Everything is borrowed: the operator
/// passes its view's objects as they are.
pub fn garbage_collect<'a, S: std::borrow::Borrow<str> + Ord>(
    claims: impl IntoIterator<Item = &'a NodeClaim>,
    cloud_provider_ids: &BTreeSet<S>,
    nodes: impl IntoIterator<Item = &'a Node>,
) -> Vec<GcDeletion> {
    let mut ready: Option<BTreeSet<&str>> = None;
    let mut nodes = Some(nodes);
    let mut out = Vec::new();
    for c in claims {
        if !conditions::is_true(&c.status.conditions, REGISTERED) || claim_is_deleting(c) {
            continue;
        }
        let Some(provider_id) = c.status.provider_id.as_deref().filter(|p| !p.is_empty()) else {
            continue;
        };
        if cloud_provider_ids.contains(provider_id) {
            continue;
        }
        // The ready Nodes' provider ids, gathered once and only when some instance is gone.
        let ready = ready.get_or_insert_with(|| {
            nodes
                .take()
                .into_iter()
                .flatten()
                .filter(|n| n.is_ready())
                .map(|n| n.provider_id.as_str())
                .collect()
        });
        if ready.contains(provider_id) {
            continue;
        }
        out.push(GcDeletion {
            claim_name: c.name().to_string(),
            provider_id: provider_id.to_string(),
            metrics: disrupted_metrics(c, metric_reasons::GARBAGE_COLLECTED, "", 0),
        });
    }
    out
}

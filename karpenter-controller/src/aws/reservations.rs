//! The capacity-reservation loop (leader only, every minute), upstream's
//! `capacityreservation.expiration` and `capacityreservation.capacitytype` controllers on the
//! decisions of `karpenter_aws::reservation`:
//!
//! - the reservations of the NodeClaims labelled `karpenter.k8s.aws/capacity-reservation-id`
//!   are described by id (their instance counts synced into the provider's availability);
//! - a NodeClaim in a capacity block that is `expiring` (40 minutes before its end, 10 minutes
//!   before EC2 reclaims the instances) is deleted, so it drains as any deleted NodeClaim;
//! - a NodeClaim labelled `reserved` whose instance EC2 reports `on-demand` and whose
//!   reservation is no longer active (it ended) becomes `on-demand`, its reservation labels
//!   removed; so does its registered Node.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::Node;
use karpenter_aws::nodeclass::CapacityReservationSelectorTerm;
use karpenter_aws::reservation::{CAPACITY_RESERVATION_ID, demotion_patch, expiring_claims};
use kube::api::DeleteParams;

use super::*;

/// How often the reservations of live NodeClaims are looked at (upstream: a minute).
pub const RESERVATION_INTERVAL: Duration = Duration::from_secs(60);

pub(super) async fn reservations(rt: Arc<AwsProvider>, ctx: ProviderContext) {
    let ProviderContext {
        caches,
        client,
        mut leading,
        mut shutdown,
        leadership,
        ..
    } = ctx;
    let claims: Api<KubeNodeClaim> = Api::all(client.clone());
    let nodes: Api<Node> = Api::all(client);
    loop {
        if !until_leading(&mut leading, &mut shutdown).await {
            return;
        }
        if leadership.is_leading()
            && let Err(e) = pass(&rt, &caches, &claims, &nodes, &leadership).await
        {
            tracing::warn!(error = %e, "capacity reservations of NodeClaims");
        }
        if !pause(RESERVATION_INTERVAL, &mut shutdown).await {
            return;
        }
    }
}

async fn pass(
    rt: &AwsProvider,
    caches: &Caches,
    claims_api: &Api<KubeNodeClaim>,
    nodes_api: &Api<Node>,
    leadership: &crate::leader::Leadership,
) -> Result<(), String> {
    let claims = objects(&caches.nodeclaims);
    let empty = BTreeMap::new();
    let labels = |c: &KubeNodeClaim| c.metadata.labels.as_ref().unwrap_or(&empty).clone();
    let ids: BTreeSet<String> = claims
        .iter()
        .filter_map(|c| labels(c).get(CAPACITY_RESERVATION_ID).cloned())
        .collect();
    if ids.is_empty() {
        return Ok(());
    }
    let terms: Vec<CapacityReservationSelectorTerm> = ids
        .iter()
        .map(|id| CapacityReservationSelectorTerm {
            id: Some(id.clone()),
            ..Default::default()
        })
        .collect();
    let now = jiff::Timestamp::now();
    let described = karpenter_aws::sdk::reservation::describe(
        &rt.clients,
        &terms,
        &rt.provider.reservation_availability(),
        now,
    )
    .await?;
    let statuses = karpenter_aws::reservation::status(&described, now);
    let active: BTreeSet<String> = described
        .iter()
        .filter(|r| r.end_date.is_none_or(|end| end > now))
        .map(|r| r.id.clone())
        .collect();

    // Capacity blocks about to end: their NodeClaims go.
    let rows: Vec<(String, BTreeMap<String, String>, bool)> = claims
        .iter()
        .map(|c| {
            (
                c.metadata.name.clone().unwrap_or_default(),
                labels(c),
                c.metadata.deletion_timestamp.is_some(),
            )
        })
        .collect();
    let expiring = expiring_claims(rows.iter().map(|(n, l, d)| (n.as_str(), l, *d)), &statuses);
    for name in &expiring {
        if !leadership.is_leading() {
            return Ok(());
        }
        match claims_api.delete(name, &DeleteParams::default()).await {
            Ok(_) => {
                tracing::info!(nodeclaim = %name, "initiating delete for capacity block expiration")
            }
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => {
                tracing::warn!(nodeclaim = %name, error = %e, "deleting a NodeClaim of an expiring capacity block")
            }
        }
    }

    // Ended reservations: reserved NodeClaims (and Nodes) EC2 reports on-demand.
    let reserved: Vec<&KubeNodeClaim> = claims
        .iter()
        .map(|c| &**c)
        .filter(|c| {
            c.metadata.deletion_timestamp.is_none()
                && labels(c)
                    .get(karpenter_core::labels::CAPACITY_TYPE)
                    .map(String::as_str)
                    == Some(karpenter_core::labels::CAPACITY_TYPE_RESERVED)
        })
        .collect();
    if reserved.is_empty() {
        return Ok(());
    }
    let instances: BTreeMap<String, String> = rt
        .provider
        .list()
        .await
        .map_err(|e| e.to_string())?
        .into_iter()
        .filter_map(|c| {
            let ct = c
                .metadata
                .labels
                .get(karpenter_core::labels::CAPACITY_TYPE)?;
            Some((c.status.provider_id.clone()?, ct.clone()))
        })
        .collect();
    for c in reserved {
        let name = c.metadata.name.clone().unwrap_or_default();
        let Some(pid) = c.status.as_ref().and_then(|s| s.provider_id.clone()) else {
            continue;
        };
        let Some(cloud) = instances.get(&pid) else {
            continue;
        };
        let Some(patch) = demotion_patch(&labels(c), cloud, &active) else {
            continue;
        };
        if !leadership.is_leading() {
            return Ok(());
        }
        let params = PatchParams::default();
        match claims_api
            .patch(&name, &params, &Patch::Merge(&patch))
            .await
        {
            Ok(_) => {
                tracing::info!(nodeclaim = %name, "capacity reservation ended: the NodeClaim is on-demand now")
            }
            Err(kube::Error::Api(s)) if s.code == 404 => continue,
            Err(e) => {
                tracing::warn!(nodeclaim = %name, error = %e, "demoting a NodeClaim to on-demand");
                continue;
            }
        }
        // Its registered Nodes (a Node not registered yet gets its labels from the claim).
        for n in objects(&caches.nodes) {
            let node_labels = n.metadata.labels.clone().unwrap_or_default();
            let ours = n.spec.as_ref().and_then(|s| s.provider_id.as_deref()) == Some(&pid);
            let registered = node_labels
                .get(karpenter_core::labels::REGISTERED)
                .map(String::as_str)
                == Some("true");
            if !ours || !registered || n.metadata.deletion_timestamp.is_some() {
                continue;
            }
            let Some(patch) = demotion_patch(&node_labels, cloud, &active) else {
                continue;
            };
            let node = n.metadata.name.clone().unwrap_or_default();
            if let Err(e) = nodes_api.patch(&node, &params, &Patch::Merge(&patch)).await
                && !matches!(&e, kube::Error::Api(s) if s.code == 404)
            {
                tracing::warn!(node = %node, error = %e, "demoting a Node to on-demand");
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use karpenter_aws::reservation::Reservation;
    use karpenter_aws::sdk::interruption::Received;
    use karpenter_core::operator::{InterruptionEvent, InterruptionKind};
    use kube::runtime::watcher;

    use super::*;

    #[tokio::test]
    async fn a_reservation_interruption_leaves_the_reservation_nothing_to_offer() {
        let claim: KubeNodeClaim = serde_json::from_value(serde_json::json!({
            "apiVersion": "karpenter.sh/v1",
            "kind": "NodeClaim",
            "metadata": {"name": "a", "labels": {CAPACITY_RESERVATION_ID: "cr-a"},
                "deletionTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}, "requirements": []},
            "status": {"providerID": "aws:///us-east-1a/i-a"}
        }))
        .unwrap();
        let (reader, mut writer) = kube::runtime::reflector::store::<KubeNodeClaim>();
        writer.apply_watcher_event(&watcher::Event::Apply(claim));
        let availability = karpenter_aws::sdk::reservation::shared_availability();
        let described = Reservation {
            id: "cr-a".into(),
            available_instance_count: 3,
            ..Default::default()
        };
        karpenter_aws::sdk::reservation::lock(&availability)
            .sync(&[described], jiff::Timestamp::UNIX_EPOCH);
        let (tx, mut rx) = tokio::sync::mpsc::channel(4);
        let handoff = OperatorHandoff::new(reader, tx, crate::leader::Leadership::always())
            .with_reservations(availability.clone());
        let message = Received {
            message_id: "m".into(),
            receipt_handle: "r".into(),
            body: String::new(),
        };
        let event = InterruptionEvent::new(
            InterruptionKind::CapacityReservationInterrupted,
            "aws:///us-east-1a/i-a",
        );
        handoff.act(&message, vec![event]).await.unwrap();
        assert!(matches!(rx.recv().await, Some(Change::Interruption(_))));
        assert_eq!(
            karpenter_aws::sdk::reservation::lock(&availability).available("cr-a"),
            0
        );
    }
}

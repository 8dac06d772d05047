//! DescribeInstances and instances as NodeClaims.

use super::*;

/// The error code of an instance id EC2 does not know (or no longer lists as live).
pub(super) const INSTANCE_NOT_FOUND: &str = "InvalidInstanceID.NotFound";

/// The batch key of Get's DescribeInstances (its filters; every Get uses the same).
const LIVE_KEY: &str = "instance-state-name=live";

/// One DescribeInstances call for `ids` with the live-state filter.
async fn describe_call(
    ec2c: &aws_sdk_ec2::Client,
    counters: &ApiCounters,
    ids: &[String],
) -> Result<Vec<ec2::Instance>, (String, String)> {
    counters.describe_instances.fetch_add(1, Ordering::Relaxed);
    let out = ec2c
        .describe_instances()
        .set_instance_ids(Some(ids.to_vec()))
        .filters(
            ec2::Filter::builder()
                .name("instance-state-name")
                .set_values(Some(LIVE_STATES.iter().map(|s| s.to_string()).collect()))
                .build(),
        )
        .send()
        .await
        .map_err(|e| error_code(&e))?;
    Ok(out
        .reservations()
        .iter()
        .flat_map(|r| r.instances())
        .cloned()
        .collect())
}

/// The instance ids an `InvalidInstanceID.NotFound` message names ("The instance ID
/// 'i-0abc' does not exist", "The instance IDs 'i-1, i-2' do not exist").
pub(super) fn ids_in_message(message: &str) -> Vec<String> {
    message
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
        .filter(|w| {
            w.strip_prefix("i-")
                .is_some_and(|h| !h.is_empty() && h.chars().all(|c| c.is_ascii_hexdigit()))
        })
        .map(str::to_string)
        .collect()
}

/// The batched DescribeInstances: one call with every id (with the live-state filter, so an
/// id it does not return is not live: not-found). EC2 fails the whole call when one id is
/// unknown; the ids its message names are not-found and the rest is described again in one
/// call. Upstream describes each id on its own after a failed batch; naming them from the
/// message keeps a batch with one stale id at two calls instead of N + 1. A failure that names
/// no id of the batch falls back to one call per id, in parallel.
async fn describe_batch(
    ec2c: aws_sdk_ec2::Client,
    counters: Arc<ApiCounters>,
    ids: Vec<String>,
) -> BTreeMap<String, batch::IdResult<ec2::Instance>> {
    let mut out = BTreeMap::new();
    let mut pending = ids;
    let not_found = |id: &str| Err((INSTANCE_NOT_FOUND.to_string(), id.to_string()));
    while !pending.is_empty() {
        match describe_call(&ec2c, &counters, &pending).await {
            Ok(found) => {
                for i in found {
                    if let Some(id) = i.instance_id().map(str::to_string)
                        && pending.contains(&id)
                    {
                        out.insert(id, Ok(i));
                    }
                }
                for id in pending.drain(..) {
                    out.entry(id.clone()).or_insert_with(|| not_found(&id));
                }
            }
            Err((code, message)) => {
                let named: Vec<String> = if code == INSTANCE_NOT_FOUND {
                    ids_in_message(&message)
                        .into_iter()
                        .filter(|id| pending.contains(id))
                        .collect()
                } else {
                    Vec::new()
                };
                if pending.len() == 1 {
                    let id = pending.remove(0);
                    let r = if code == INSTANCE_NOT_FOUND {
                        not_found(&id)
                    } else {
                        Err((code, message))
                    };
                    out.insert(id, r);
                } else if named.is_empty() {
                    let retries: Vec<_> = pending
                        .drain(..)
                        .map(|id| {
                            let (e, c) = (ec2c.clone(), Arc::clone(&counters));
                            let one = vec![id.clone()];
                            let h = tokio::spawn(async move { describe_call(&e, &c, &one).await });
                            (id, h)
                        })
                        .collect();
                    for (id, h) in retries {
                        let r = match h.await {
                            Ok(Ok(found)) => found
                                .into_iter()
                                .find(|i| i.instance_id() == Some(id.as_str()))
                                .ok_or_else(|| (INSTANCE_NOT_FOUND.to_string(), id.clone())),
                            Ok(Err((c, _))) if c == INSTANCE_NOT_FOUND => not_found(&id),
                            Ok(Err(e)) => Err(e),
                            Err(e) => Err((String::new(), format!("DescribeInstances task: {e}"))),
                        };
                        out.insert(id, r);
                    }
                } else {
                    for id in &named {
                        out.insert(id.clone(), not_found(id));
                    }
                    pending.retain(|id| !named.contains(id));
                }
            }
        }
    }
    out
}

/// One TerminateInstances call for `ids`: the ids EC2 reports shutting down or terminated.
async fn terminate_call(
    ec2c: &aws_sdk_ec2::Client,
    counters: &ApiCounters,
    ids: &[String],
) -> Result<BTreeSet<String>, (String, String)> {
    counters.terminate_instances.fetch_add(1, Ordering::Relaxed);
    let out = ec2c
        .terminate_instances()
        .set_instance_ids(Some(ids.to_vec()))
        .send()
        .await
        .map_err(|e| error_code(&e))?;
    Ok(out
        .terminating_instances()
        .iter()
        .filter(|c| {
            matches!(
                c.current_state().and_then(|s| s.name()),
                Some(ec2::InstanceStateName::ShuttingDown | ec2::InstanceStateName::Terminated)
            )
        })
        .filter_map(|c| c.instance_id().map(str::to_string))
        .collect())
}

/// The batched TerminateInstances: one call with every id; ids not reported shutting down or
/// terminated (or all, when the call failed) are terminated one by one, in parallel, as
/// upstream.
async fn terminate_batch(
    ec2c: aws_sdk_ec2::Client,
    counters: Arc<ApiCounters>,
    ids: Vec<String>,
) -> BTreeMap<String, batch::IdResult<()>> {
    let mut out = BTreeMap::new();
    let all = terminate_call(&ec2c, &counters, &ids).await;
    if ids.len() == 1 {
        let id = ids.into_iter().next().unwrap_or_default();
        out.insert(id, all.map(|_| ()));
        return out;
    }
    if let Ok(done) = all {
        for id in &ids {
            if done.contains(id) {
                out.insert(id.clone(), Ok(()));
            }
        }
    }
    let retries: Vec<(String, tokio::task::JoinHandle<batch::IdResult<()>>)> = ids
        .into_iter()
        .filter(|id| !out.contains_key(id))
        .map(|id| {
            let (ec2c, counters) = (ec2c.clone(), Arc::clone(&counters));
            let one = id.clone();
            let h = tokio::spawn(async move {
                terminate_call(&ec2c, &counters, std::slice::from_ref(&one))
                    .await
                    .map(|_| ())
            });
            (id, h)
        })
        .collect();
    for (id, h) in retries {
        let r = h
            .await
            .unwrap_or_else(|e| Err((String::new(), format!("TerminateInstances task: {e}"))));
        out.insert(id, r);
    }
    out
}

impl AwsCloudProvider {
    /// The live instance `instance_id`, through the DescribeInstances batcher.
    pub(super) async fn describe_instance(
        &self,
        instance_id: &str,
    ) -> Result<ec2::Instance, CloudProviderError> {
        let ec2c = self.clients.ec2.clone();
        let counters = Arc::clone(&self.counters);
        let execute =
            batch::execute(move |ids| describe_batch(ec2c.clone(), Arc::clone(&counters), ids));
        match self
            .describe_batcher
            .submit(LIVE_KEY, instance_id, execute)
            .await
        {
            Ok(i) => Ok(i),
            Err((code, _)) if code == INSTANCE_NOT_FOUND => {
                Err(CloudProviderError::not_found(instance_id))
            }
            Err((code, message)) => Err(other("DescribeInstances", &code, &message)),
        }
    }

    /// Terminates `instance_id` through the TerminateInstances batcher.
    pub(super) async fn terminate_instance(
        &self,
        instance_id: &str,
    ) -> Result<(), CloudProviderError> {
        let ec2c = self.clients.ec2.clone();
        let counters = Arc::clone(&self.counters);
        let execute =
            batch::execute(move |ids| terminate_batch(ec2c.clone(), Arc::clone(&counters), ids));
        match self
            .terminate_batcher
            .submit("terminate", instance_id, execute)
            .await
        {
            Ok(()) => Ok(()),
            Err((code, _)) if code == INSTANCE_NOT_FOUND => {
                Err(CloudProviderError::not_found(instance_id))
            }
            Err((code, message)) => Err(other("TerminateInstances", &code, &message)),
        }
    }

    /// An EC2 instance as a NodeClaim: name from the `karpenter.sh/nodeclaim` tag, labels from
    /// the instance type (when the class's types are known), zone, capacity type and nodepool.
    pub(super) async fn instance_to_claim(&self, i: &ec2::Instance) -> NodeClaim {
        let tags = convert::tags(i.tags());
        let class_name = tags.get(launch::NODECLASS_TAG).cloned().unwrap_or_default();
        let reference = NodeClassReference::new(GROUP, KIND, class_name.clone());
        let mut claim = NodeClaim::new(
            tags.get(launch::NODECLAIM_TAG).cloned().unwrap_or_default(),
            NodeClaimSpec::new(reference),
        );
        let zone = i
            .placement()
            .and_then(|p| p.availability_zone())
            .unwrap_or_default()
            .to_string();
        let type_name = i
            .instance_type()
            .map(|t| t.as_str().to_string())
            .unwrap_or_default();
        let spot = i.instance_lifecycle() == Some(&ec2::InstanceLifecycleType::Spot)
            || i.spot_instance_request_id().is_some();
        // An instance in a reservation it was targeted at (`capacity-reservations-only`) is
        // reserved (upstream); one that ran into an open reservation by itself is on-demand.
        let reservation = i.capacity_reservation_id().filter(|_| {
            i.capacity_reservation_specification()
                .and_then(|s| s.capacity_reservation_preference())
                == Some(&ec2::CapacityReservationPreference::CapacityReservationsOnly)
        });
        let capacity_type = if spot {
            "spot"
        } else if reservation.is_some() {
            "reserved"
        } else {
            "on-demand"
        };
        let instance_id = i.instance_id().unwrap_or_default();
        let mut labels = BTreeMap::new();
        let class = self.class(&class_name);
        if let Some(class) = &class
            && let Ok(types) = self.instance_types_for_class(class).await
            && let Some(it) = types.iter().find(|t| t.name() == type_name)
        {
            if let Some(o) = it.offerings.iter().find(|o| {
                o.zone() == zone
                    && o.capacity_type() == capacity_type
                    && o.reservation_id() == reservation
            }) {
                labels = launch_labels(it, o, &Requirements::new(), &BTreeMap::new(), None);
            }
            claim.status.capacity = drop_zeros(it.capacity());
            claim.status.allocatable = drop_zeros(it.allocatable());
        }
        labels.insert(karpenter_core::labels::INSTANCE_TYPE.into(), type_name);
        labels.insert(karpenter_core::labels::ZONE.into(), zone.clone());
        // The zone id from the instance, else from the class's subnet in that zone.
        let zone_id = i
            .placement()
            .and_then(|p| p.availability_zone_id())
            .map(str::to_string)
            .or_else(|| {
                class
                    .as_ref()
                    .and_then(|c| types::zone_ids(c).remove(&zone))
            });
        match zone_id {
            Some(id) => labels.insert(ZONE_ID.into(), id),
            None => labels.remove(ZONE_ID),
        };
        labels.insert(
            karpenter_core::labels::CAPACITY_TYPE.into(),
            capacity_type.into(),
        );
        if let Some(id) = reservation {
            let lifecycle = i.instance_lifecycle();
            let kind = if lifecycle == Some(&ec2::InstanceLifecycleType::CapacityBlock) {
                "capacity-block"
            } else {
                "default"
            };
            let interruptible =
                lifecycle == Some(&ec2::InstanceLifecycleType::InterruptibleCapacityReservation);
            labels.insert(
                crate::reservation::CAPACITY_RESERVATION_ID.into(),
                id.into(),
            );
            labels.insert(
                crate::reservation::CAPACITY_RESERVATION_TYPE.into(),
                kind.into(),
            );
            labels.insert(
                crate::reservation::CAPACITY_RESERVATION_INTERRUPTIBLE.into(),
                interruptible.to_string(),
            );
        }
        if let Some(pool) = tags.get(launch::NODEPOOL_TAG) {
            labels.insert(karpenter_core::labels::NODEPOOL.into(), pool.clone());
        }
        claim.metadata.labels = labels;
        claim.metadata.creation_timestamp = i
            .launch_time()
            .and_then(|t| t.fmt(aws_smithy_types::date_time::Format::DateTime).ok());
        let state = i.state().and_then(|s| s.name());
        if matches!(
            state,
            Some(ec2::InstanceStateName::ShuttingDown | ec2::InstanceStateName::Terminated)
        ) {
            claim.metadata.deletion_timestamp = claim.metadata.creation_timestamp.clone();
        }
        claim.status.provider_id = Some(launch::provider_id(&zone, instance_id));
        claim.status.image_id = i.image_id().map(str::to_string);
        claim
    }
}

impl AwsCloudProvider {
    /// Tags the instance of a registered NodeClaim as upstream's tagging controller does
    /// ([`launch::registered`]): `Name` = `node_name`, `karpenter.sh/nodeclaim` = `claim` and
    /// `eks:eks-cluster-name`, each only when the instance lacks the key. Returns the tags
    /// written (empty when it had them all). An instance EC2 no longer lists is
    /// `CloudProviderError::NodeClaimNotFound`.
    pub async fn tag_registered_instance(
        &self,
        instance_id: &str,
        claim: &str,
        node_name: &str,
    ) -> Result<BTreeMap<String, String>, CloudProviderError> {
        let instance = self.describe_instance(instance_id).await?;
        let existing = convert::tags(instance.tags());
        let tags = launch::registered::registration_tags(
            claim,
            node_name,
            &self.options.cluster_name,
            &existing,
        );
        if tags.is_empty() {
            return Ok(tags);
        }
        self.clients
            .ec2
            .create_tags()
            .resources(instance_id)
            .set_tags(Some(
                tags.iter()
                    .map(|(k, v)| ec2::Tag::builder().key(k).value(v).build())
                    .collect(),
            ))
            .send()
            .await
            .map_err(|e| {
                let (code, message) = error_code(&e);
                if code == INSTANCE_NOT_FOUND {
                    CloudProviderError::not_found(instance_id)
                } else {
                    other("CreateTags", &code, &message)
                }
            })?;
        Ok(tags)
    }
}

#[cfg(test)]
mod tests {
    use super::ids_in_message;

    #[test]
    fn not_found_messages_name_their_ids() {
        assert_eq!(
            ids_in_message("The instance ID 'i-0123456789abcdef0' does not exist"),
            ["i-0123456789abcdef0"]
        );
        assert_eq!(
            ids_in_message("The instance IDs 'i-0a1, i-0b2' do not exist"),
            ["i-0a1", "i-0b2"]
        );
        assert!(ids_in_message("Invalid id: \"i-xyz\"").is_empty());
    }
}

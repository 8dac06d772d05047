//! DescribeInstances and instances as NodeClaims.

use super::*;

impl AwsCloudProvider {
    pub(super) async fn describe_instance(
        &self,
        instance_id: &str,
    ) -> Result<ec2::Instance, CloudProviderError> {
        self.counters
            .describe_instances
            .fetch_add(1, Ordering::Relaxed);
        let out = self
            .clients
            .ec2
            .describe_instances()
            .instance_ids(instance_id)
            .filters(
                ec2::Filter::builder()
                    .name("instance-state-name")
                    .set_values(Some(LIVE_STATES.iter().map(|s| s.to_string()).collect()))
                    .build(),
            )
            .send()
            .await;
        let out = match out {
            Ok(o) => o,
            Err(e) => {
                let (code, message) = error_code(&e);
                if code == "InvalidInstanceID.NotFound" {
                    return Err(CloudProviderError::not_found(instance_id));
                }
                return Err(other("DescribeInstances", &code, &message));
            }
        };
        out.reservations()
            .iter()
            .flat_map(|r| r.instances())
            .find(|i| i.instance_id() == Some(instance_id))
            .cloned()
            .ok_or_else(|| CloudProviderError::not_found(instance_id))
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
        let capacity_type = if spot { "spot" } else { "on-demand" };
        let instance_id = i.instance_id().unwrap_or_default();
        let mut labels = BTreeMap::new();
        if let Some(class) = self.class(&class_name)
            && let Ok(types) = self.instance_types_for_class(&class).await
            && let Some(it) = types.iter().find(|t| t.name() == type_name)
        {
            if let Some(o) = it
                .offerings
                .iter()
                .find(|o| o.zone() == zone && o.capacity_type() == capacity_type)
            {
                labels = launch_labels(it, o, &Requirements::new(), &BTreeMap::new(), None);
            }
            claim.status.capacity = drop_zeros(it.capacity());
            claim.status.allocatable = drop_zeros(it.allocatable());
        }
        labels.insert(karpenter_core::labels::INSTANCE_TYPE.into(), type_name);
        labels.insert(karpenter_core::labels::ZONE.into(), zone.clone());
        labels.insert(
            karpenter_core::labels::CAPACITY_TYPE.into(),
            capacity_type.into(),
        );
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

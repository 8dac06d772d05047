//! `placementGroupSelector`: DescribePlacementGroups by id or name (state `available`), cached
//! for a minute as upstream.

use super::*;
use crate::placement::PlacementGroup;

/// How long a resolved placement group is reused (upstream's placement-group cache).
pub const PLACEMENT_GROUP_TTL: Duration = Duration::from_secs(60);

impl AwsCloudProvider {
    /// The placement group `class` selects: `None` without a selector; an error when EC2 has
    /// no available group matching it (the class cannot launch, as upstream's
    /// `PlacementGroupReady` False).
    pub async fn placement_group(
        &self,
        class: &EC2NodeClass,
    ) -> Result<Option<PlacementGroup>, CloudProviderError> {
        let Some(selector) = &class.spec.placement_group_selector else {
            return Ok(None);
        };
        let key = format!("{:?}|{:?}", selector.id, selector.name);
        if let Some((at, pg)) = lock(&self.placement_groups).get(&key)
            && at.elapsed() < PLACEMENT_GROUP_TTL
        {
            return Ok(Some(pg.clone()));
        }
        let mut req = self.clients.ec2.describe_placement_groups().filters(
            ec2::Filter::builder()
                .name("state")
                .values("available")
                .build(),
        );
        if let Some(id) = &selector.id {
            req = req.group_ids(id);
        } else if let Some(name) = &selector.name {
            req = req.group_names(name);
        }
        let out = req
            .send()
            .await
            .map_err(api_error("DescribePlacementGroups"))?;
        let Some(g) = out.placement_groups().first() else {
            return Err(CloudProviderError::node_class_not_ready(format!(
                "EC2NodeClass {:?}: spec.placementGroupSelector {} matches no available placement group",
                class.name(),
                selector
                    .id
                    .as_deref()
                    .map(|id| format!("id {id}"))
                    .or_else(|| selector.name.as_deref().map(|n| format!("name {n}")))
                    .unwrap_or_default()
            )));
        };
        let pg = PlacementGroup {
            id: g.group_id().unwrap_or_default().to_string(),
            name: g.group_name().unwrap_or_default().to_string(),
            strategy: g
                .strategy()
                .map(|s| s.as_str().to_string())
                .unwrap_or_default(),
            partition_count: g.partition_count().unwrap_or(0),
        };
        lock(&self.placement_groups).insert(key, (Instant::now(), pg.clone()));
        Ok(Some(pg))
    }
}

//! Placement groups: what `placementGroupSelector` resolves to (DescribePlacementGroups by id
//! or name, state `available`) and what it means for instance types and launches, as upstream:
//!
//! - every instance type of the class requires `karpenter.k8s.aws/placement-group-id` = the
//!   group's id and, for a `partition` group, `karpenter.k8s.aws/placement-group-partition` In
//!   `1..=PartitionCount`; types that do not support the group's strategy are left out (the
//!   catalog's compatibility check);
//! - the launch template's `Placement` names the group, and for a partition group the lowest
//!   partition the NodeClaim allows when it narrows them (EC2 picks one otherwise);
//! - the launched NodeClaim carries the group id (and the partition when one was pinned).

use karpenter_core::requirements::{Operator, Requirement, Requirements};

/// `karpenter.k8s.aws/placement-group-id`.
pub const PLACEMENT_GROUP_ID: &str = "karpenter.k8s.aws/placement-group-id";
/// `karpenter.k8s.aws/placement-group-partition`.
pub const PLACEMENT_GROUP_PARTITION: &str = "karpenter.k8s.aws/placement-group-partition";

/// A resolved placement group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlacementGroup {
    /// `GroupId` (`pg-...`).
    pub id: String,
    /// `GroupName`.
    pub name: String,
    /// `cluster`, `partition` or `spread`.
    pub strategy: String,
    /// `PartitionCount` (partition groups).
    pub partition_count: i32,
}

impl PlacementGroup {
    /// Whether this is a partition group with partitions.
    pub fn is_partitioned(&self) -> bool {
        self.strategy == "partition" && self.partition_count > 0
    }

    /// The requirements every instance type of the class gets.
    pub fn requirements(&self) -> Vec<Requirement> {
        let mut out = vec![Requirement::new(
            PLACEMENT_GROUP_ID,
            Operator::In,
            [self.id.as_str()],
        )];
        if self.is_partitioned() {
            let partitions: Vec<String> =
                (1..=self.partition_count).map(|p| p.to_string()).collect();
            out.push(Requirement::new(
                PLACEMENT_GROUP_PARTITION,
                Operator::In,
                partitions.iter().map(String::as_str),
            ));
        }
        out
    }

    /// The partition a launch pins: for a partition group whose NodeClaim narrows the
    /// partitions (an `In` requirement), the lowest allowed one; else `None`.
    pub fn partition_for(&self, requirements: &Requirements) -> Option<i32> {
        if !self.is_partitioned() {
            return None;
        }
        let r = requirements.get(PLACEMENT_GROUP_PARTITION)?;
        // A complement (`NotIn`, `Exists`) does not narrow to a set: EC2 chooses.
        if r.len() > u64::from(u32::MAX) {
            return None;
        }
        (1..=self.partition_count).find(|p| r.has(&p.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group(strategy: &str, partitions: i32) -> PlacementGroup {
        PlacementGroup {
            id: "pg-0abc".into(),
            name: "training".into(),
            strategy: strategy.into(),
            partition_count: partitions,
        }
    }

    #[test]
    fn a_cluster_group_is_required_by_id_only() {
        let r = group("cluster", 0).requirements();
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].key(), PLACEMENT_GROUP_ID);
        assert!(r[0].has("pg-0abc"));
        assert!(!r[0].has("pg-other"));
    }

    #[test]
    fn a_partition_group_offers_every_partition_and_pins_the_lowest_the_claim_allows() {
        let g = group("partition", 3);
        let r = g.requirements();
        assert_eq!(r.len(), 2);
        assert_eq!(r[1].values().collect::<Vec<_>>(), ["1", "2", "3"]);
        // No partition requirement: EC2 chooses.
        assert_eq!(g.partition_for(&Requirements::new()), None);
        let mut narrowed = Requirements::new();
        narrowed.add(Requirement::new(
            PLACEMENT_GROUP_PARTITION,
            Operator::In,
            ["3", "2"],
        ));
        assert_eq!(g.partition_for(&narrowed), Some(2));
        // A complement (NotIn) does not pin one: EC2 chooses among the rest.
        let mut not_in = Requirements::new();
        not_in.add(Requirement::new(
            PLACEMENT_GROUP_PARTITION,
            Operator::NotIn,
            ["1"],
        ));
        assert_eq!(g.partition_for(&not_in), None);
        // A cluster group never pins a partition.
        assert_eq!(group("cluster", 0).partition_for(&narrowed), None);
    }
}

//! Subnets and security groups as the EC2 Describe* calls return them (the fields Karpenter
//! reads), and their order in an `EC2NodeClass` status: what [`crate::resolve`] matches and the
//! node-class reconcile step ([`crate::nodeclass::reconcile`]) writes, below both. Public as
//! `resolve::*`.

use std::collections::{BTreeMap, BTreeSet};

/// A subnet as DescribeSubnets returns it (the fields Karpenter reads).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SubnetInfo {
    /// `SubnetId`.
    pub id: String,
    /// `AvailabilityZone`.
    pub zone: String,
    /// `AvailabilityZoneId`.
    pub zone_id: Option<String>,
    /// `AvailableIpAddressCount`.
    pub available_ip_address_count: i64,
    /// `Tags`.
    pub tags: BTreeMap<String, String>,
}

/// A security group as DescribeSecurityGroups returns it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SecurityGroupInfo {
    /// `GroupId`.
    pub id: String,
    /// `GroupName`.
    pub name: Option<String>,
    /// `Tags`.
    pub tags: BTreeMap<String, String>,
}

/// Status order of subnets: most available IPs first, then by id; duplicates dropped.
pub fn sort_subnets(mut subnets: Vec<SubnetInfo>) -> Vec<SubnetInfo> {
    subnets.sort_by(|a, b| {
        b.available_ip_address_count
            .cmp(&a.available_ip_address_count)
            .then_with(|| a.id.cmp(&b.id))
    });
    let mut seen = BTreeSet::new();
    subnets.retain(|s| seen.insert(s.id.clone()));
    subnets
}

/// Status order of security groups: by id; duplicates dropped.
pub fn sort_security_groups(mut groups: Vec<SecurityGroupInfo>) -> Vec<SecurityGroupInfo> {
    groups.sort_by(|a, b| a.id.cmp(&b.id));
    groups.dedup_by(|a, b| a.id == b.id);
    groups
}

//! Subnet and security-group resolution over API responses modelled as plain structs: the
//! Describe* filter sets upstream sends for the selector terms, matching (for in-memory fakes
//! and tests), and the status ordering.

use std::collections::{BTreeMap, BTreeSet};

pub use crate::network::{SecurityGroupInfo, SubnetInfo, sort_security_groups, sort_subnets};
use crate::nodeclass::{SecurityGroupSelectorTerm, SubnetSelectorTerm};

/// An EC2 API filter (`Name`, `Values`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Filter {
    /// The filter name (`tag:Name`, `tag-key`, `subnet-id`, ...).
    pub name: String,
    /// The values (ORed).
    pub values: Vec<String>,
}

impl Filter {
    /// A filter.
    pub fn new(
        name: impl Into<String>,
        values: impl IntoIterator<Item = impl Into<String>>,
    ) -> Self {
        Filter {
            name: name.into(),
            values: values.into_iter().map(Into::into).collect(),
        }
    }
}

/// Tag filters of a term: `tag:K = [V]`, or `tag-key = [K]` for the value `*`.
pub fn tag_filters(tags: &BTreeMap<String, String>) -> Vec<Filter> {
    tags.iter()
        .map(|(k, v)| {
            if v == "*" {
                Filter::new("tag-key", [k.clone()])
            } else {
                Filter::new(format!("tag:{k}"), [v.clone()])
            }
        })
        .collect()
}

/// The DescribeSubnets filter sets (one call each, `MaxResults=500`): one per tag term, and one
/// `subnet-id` set collecting every id term.
pub fn subnet_filter_sets(terms: &[SubnetSelectorTerm]) -> Vec<Vec<Filter>> {
    let ids: Vec<String> = terms.iter().filter_map(|t| t.id.clone()).collect();
    let mut sets: Vec<Vec<Filter>> = terms
        .iter()
        .filter(|t| t.id.is_none())
        .map(|t| tag_filters(&t.tags))
        .collect();
    if !ids.is_empty() {
        sets.push(vec![Filter::new("subnet-id", ids)]);
    }
    sets
}

/// The DescribeSecurityGroups filter sets: one per tag term, one `group-id` set for every id
/// term and one `group-name` set for every name term.
pub fn security_group_filter_sets(terms: &[SecurityGroupSelectorTerm]) -> Vec<Vec<Filter>> {
    let ids: Vec<String> = terms.iter().filter_map(|t| t.id.clone()).collect();
    let names: Vec<String> = terms.iter().filter_map(|t| t.name.clone()).collect();
    let mut sets: Vec<Vec<Filter>> = terms
        .iter()
        .filter(|t| t.id.is_none() && t.name.is_none())
        .map(|t| tag_filters(&t.tags))
        .collect();
    if !ids.is_empty() {
        sets.push(vec![Filter::new("group-id", ids)]);
    }
    if !names.is_empty() {
        sets.push(vec![Filter::new("group-name", names)]);
    }
    sets
}

/// Whether `tags` satisfy a term's tag map (`*` = any value).
pub fn tags_match(selector: &BTreeMap<String, String>, tags: &BTreeMap<String, String>) -> bool {
    selector
        .iter()
        .all(|(k, v)| tags.get(k).is_some_and(|t| v == "*" || t == v))
}

/// The subnets some term selects (terms ORed, fields ANDed), de-duplicated by id.
pub fn select_subnets(terms: &[SubnetSelectorTerm], subnets: &[SubnetInfo]) -> Vec<SubnetInfo> {
    let mut seen = BTreeSet::new();
    subnets
        .iter()
        .filter(|s| {
            terms
                .iter()
                .any(|t| t.id.as_ref().is_none_or(|id| *id == s.id) && tags_match(&t.tags, &s.tags))
        })
        .filter(|s| seen.insert(s.id.clone()))
        .cloned()
        .collect()
}

/// The security groups some term selects, de-duplicated by id.
pub fn select_security_groups(
    terms: &[SecurityGroupSelectorTerm],
    groups: &[SecurityGroupInfo],
) -> Vec<SecurityGroupInfo> {
    let mut seen = BTreeSet::new();
    groups
        .iter()
        .filter(|g| {
            terms.iter().any(|t| {
                t.id.as_ref().is_none_or(|id| *id == g.id)
                    && t.name.as_ref().is_none_or(|n| Some(n) == g.name.as_ref())
                    && tags_match(&t.tags, &g.tags)
            })
        })
        .filter(|g| seen.insert(g.id.clone()))
        .cloned()
        .collect()
}

/// For each zone, the subnet with the most available IPs (upstream's `ZonalSubnetsForLaunch`
/// without in-flight tracking); ties go to the smaller id.
pub fn zonal_subnets(subnets: &[SubnetInfo]) -> BTreeMap<String, SubnetInfo> {
    let mut out: BTreeMap<String, SubnetInfo> = BTreeMap::new();
    for s in sort_subnets(subnets.to_vec()) {
        out.entry(s.zone.clone()).or_insert(s);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn subnet(id: &str, zone: &str, ips: i64, tags: &[(&str, &str)]) -> SubnetInfo {
        SubnetInfo {
            id: id.into(),
            zone: zone.into(),
            zone_id: Some(format!("use1-{zone}")),
            available_ip_address_count: ips,
            tags: tags
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        }
    }

    #[test]
    fn subnet_filters_collapse_ids_and_map_wildcards() {
        let terms = vec![
            SubnetSelectorTerm {
                tags: [
                    ("karpenter.sh/discovery".to_string(), "c".to_string()),
                    ("Type".into(), "*".into()),
                ]
                .into(),
                id: None,
            },
            SubnetSelectorTerm {
                tags: BTreeMap::new(),
                id: Some("subnet-1".into()),
            },
            SubnetSelectorTerm {
                tags: BTreeMap::new(),
                id: Some("subnet-2".into()),
            },
        ];
        let sets = subnet_filter_sets(&terms);
        assert_eq!(
            sets,
            vec![
                vec![
                    Filter::new("tag-key", ["Type"]),
                    Filter::new("tag:karpenter.sh/discovery", ["c"])
                ],
                vec![Filter::new("subnet-id", ["subnet-1", "subnet-2"])],
            ]
        );
    }

    #[test]
    fn selects_orders_and_picks_zonal_subnets() {
        let all = vec![
            subnet("subnet-b", "us-east-1a", 10, &[("k", "v")]),
            subnet("subnet-a", "us-east-1a", 10, &[("k", "v")]),
            subnet("subnet-c", "us-east-1b", 50, &[("k", "w")]),
            subnet("subnet-d", "us-east-1b", 99, &[]),
        ];
        let terms = vec![SubnetSelectorTerm {
            tags: [("k".to_string(), "*".to_string())].into(),
            id: None,
        }];
        let picked = sort_subnets(select_subnets(&terms, &all));
        let ids: Vec<&str> = picked.iter().map(|s| s.id.as_str()).collect();
        assert_eq!(ids, ["subnet-c", "subnet-a", "subnet-b"]);
        let zonal = zonal_subnets(&picked);
        assert_eq!(zonal["us-east-1a"].id, "subnet-a");
        assert_eq!(zonal["us-east-1b"].id, "subnet-c");
    }

    #[test]
    fn security_groups_by_name_id_and_tags() {
        let groups = vec![
            SecurityGroupInfo {
                id: "sg-2".into(),
                name: Some("nodes".into()),
                tags: BTreeMap::new(),
            },
            SecurityGroupInfo {
                id: "sg-1".into(),
                name: Some("other".into()),
                tags: [("a".to_string(), "b".to_string())].into(),
            },
            SecurityGroupInfo {
                id: "sg-3".into(),
                name: None,
                tags: BTreeMap::new(),
            },
        ];
        let terms = vec![
            SecurityGroupSelectorTerm {
                name: Some("nodes".into()),
                ..Default::default()
            },
            SecurityGroupSelectorTerm {
                tags: [("a".to_string(), "b".to_string())].into(),
                ..Default::default()
            },
        ];
        let got = sort_security_groups(select_security_groups(&terms, &groups));
        assert_eq!(
            got.iter().map(|g| g.id.as_str()).collect::<Vec<_>>(),
            ["sg-1", "sg-2"]
        );
        let sets = security_group_filter_sets(&terms);
        assert_eq!(sets[0], vec![Filter::new("tag:a", ["b"])]);
        assert_eq!(sets[1], vec![Filter::new("group-name", ["nodes"])]);
    }
}

//! Operator advice: the warnings the seed guide and the install notes give about NodePools and
//! where the controller runs. Each warning has a stable `rule` id that `--allow RULE` silences,
//! and names the object and the field it is about.
//!
//! | rule | when |
//! | --- | --- |
//! | `nodepool-without-limits` | `spec.limits` is absent, empty or has no `cpu` |
//! | `spot-without-on-demand-fallback` | a NodePool allows only spot and no NodePool allows on-demand |
//! | `spot-instance-type-flexibility` | a NodePool that allows spot can launch fewer than 15 instance types as spot |
//! | `consolidate-after-too-short` | the effective `consolidateAfter` is shorter than 5m |
//! | `disrupt-all-at-once` | budgets that allow every node at once (an empty list, only 100% or only scheduled budgets), or an explicit `expireAfter` (expiry ignores budgets) |
//! | `controller-on-managed-nodes` | a Karpenter controller Deployment or pod lands on a Karpenter node |
//! | `nodeclass-not-found` | the NodePool's EC2NodeClass is not in the input |

use std::sync::Arc;

use karpenter_core::api::{DisruptionReason, NodePool};
use karpenter_core::labels::{self, LabelPolicy};
use karpenter_core::model::InstanceType;
use karpenter_core::requirements::{Operator, Requirement, Requirements};
use karpenter_core::resources::names;
use serde::Serialize;

/// Every rule id with a one-line description, in the order warnings are produced.
pub const RULES: [(&str, &str); 7] = [
    (
        NODEPOOL_WITHOUT_LIMITS,
        "a NodePool without spec.limits (or without a cpu limit)",
    ),
    (
        SPOT_WITHOUT_ON_DEMAND_FALLBACK,
        "spot-only NodePools and no NodePool that allows on-demand",
    ),
    (
        SPOT_INSTANCE_TYPE_FLEXIBILITY,
        "a NodePool that allows spot with fewer than 15 instance types",
    ),
    (
        CONSOLIDATE_AFTER_TOO_SHORT,
        "consolidateAfter shorter than 5m",
    ),
    (
        DISRUPT_ALL_AT_ONCE,
        "budgets that let every node be disrupted at once, or expireAfter (which ignores budgets)",
    ),
    (
        CONTROLLER_ON_MANAGED_NODES,
        "the Karpenter controller running on nodes Karpenter manages",
    ),
    (
        NODECLASS_NOT_FOUND,
        "a NodePool whose EC2NodeClass is not in the input",
    ),
];

/// `nodepool-without-limits`.
pub const NODEPOOL_WITHOUT_LIMITS: &str = "nodepool-without-limits";
/// `spot-without-on-demand-fallback`.
pub const SPOT_WITHOUT_ON_DEMAND_FALLBACK: &str = "spot-without-on-demand-fallback";
/// `spot-instance-type-flexibility`.
pub const SPOT_INSTANCE_TYPE_FLEXIBILITY: &str = "spot-instance-type-flexibility";
/// `consolidate-after-too-short`.
pub const CONSOLIDATE_AFTER_TOO_SHORT: &str = "consolidate-after-too-short";
/// `disrupt-all-at-once`.
pub const DISRUPT_ALL_AT_ONCE: &str = "disrupt-all-at-once";
/// `controller-on-managed-nodes`.
pub const CONTROLLER_ON_MANAGED_NODES: &str = "controller-on-managed-nodes";
/// `nodeclass-not-found`.
pub const NODECLASS_NOT_FOUND: &str = "nodeclass-not-found";

/// The smallest number of spot instance types the guide recommends.
pub const MIN_SPOT_INSTANCE_TYPES: usize = 15;
/// The shortest `consolidateAfter` the install notes recommend for production, in seconds.
pub const MIN_CONSOLIDATE_AFTER_SECS: i64 = 300;

/// Whether `rule` is a known rule id.
pub fn is_rule(rule: &str) -> bool {
    RULES.iter().any(|(r, _)| *r == rule)
}

/// One piece of advice (`warnings[]` in JSON).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Warning {
    /// The stable rule id.
    pub rule: String,
    /// `Kind/name` or `Kind/namespace/name`.
    pub object: String,
    /// The field the advice is about.
    pub field: String,
    /// What is wrong and what to do.
    pub message: String,
}

impl Warning {
    /// A warning.
    pub fn new(rule: &str, object: &str, field: &str, message: impl Into<String>) -> Self {
        Warning {
            rule: rule.to_string(),
            object: object.to_string(),
            field: field.to_string(),
            message: message.into(),
        }
    }
}

/// A NodePool with the instance types it may launch.
#[derive(Debug, Clone)]
pub struct PoolContext<'a> {
    /// The NodePool (valid, not static).
    pub pool: &'a NodePool,
    /// Its instance types.
    pub instance_types: &'a [Arc<InstanceType>],
}

/// The pool's template requirements (requirements plus template labels).
fn pool_requirements(pool: &NodePool) -> Requirements {
    let template = &pool.spec.template;
    let mut reqs = Requirements::from_node_selector_requirements(template.spec.requirements());
    for (k, v) in &template.metadata.labels {
        reqs.add(Requirement::new(k, Operator::In, [v.as_str()]));
    }
    reqs
}

fn capacity_type_field(pool: &NodePool) -> String {
    pool.spec
        .template
        .spec
        .requirements()
        .iter()
        .position(|r| r.key == labels::CAPACITY_TYPE)
        .map_or_else(
            || "spec.template.spec.requirements".to_string(),
            |i| format!("spec.template.spec.requirements[{i}]"),
        )
}

/// Whether the pool may launch capacity type `ct`.
fn allows(reqs: &Requirements, ct: &str) -> bool {
    reqs.get_or_exists(labels::CAPACITY_TYPE).has(ct)
}

/// Advice about NodePools, in pool order, rules in [`RULES`] order.
pub fn nodepool_warnings(pools: &[PoolContext<'_>], policy: &LabelPolicy) -> Vec<Warning> {
    let mut out = Vec::new();
    let any_on_demand = pools
        .iter()
        .any(|p| allows(&pool_requirements(p.pool), labels::CAPACITY_TYPE_ON_DEMAND));
    for ctx in pools {
        let pool = ctx.pool;
        let object = format!("NodePool/{}", pool.name());
        let reqs = pool_requirements(pool);

        match &pool.spec.limits {
            Some(l) if l.contains_key(names::CPU) => {}
            Some(l) if !l.is_empty() => out.push(Warning::new(
                NODEPOOL_WITHOUT_LIMITS,
                &object,
                "spec.limits.cpu",
                "no cpu limit: a runaway workload can launch nodes without bound",
            )),
            _ => out.push(Warning::new(
                NODEPOOL_WITHOUT_LIMITS,
                &object,
                "spec.limits",
                "no limits: a runaway workload can launch nodes without bound; set at least a cpu limit",
            )),
        }

        let spot = allows(&reqs, labels::CAPACITY_TYPE_SPOT);
        if spot && !allows(&reqs, labels::CAPACITY_TYPE_ON_DEMAND) && !any_on_demand {
            out.push(Warning::new(
                SPOT_WITHOUT_ON_DEMAND_FALLBACK,
                &object,
                &capacity_type_field(pool),
                "only spot capacity and no NodePool allows on-demand: when spot capacity is short or interrupted, pods stay pending; add an on-demand NodePool with a lower weight",
            ));
        }
        if spot {
            let spot_types = ctx
                .instance_types
                .iter()
                .filter(|it| {
                    it.requirements().intersects(&reqs).is_ok()
                        && it.available_offerings().any(|o| {
                            o.capacity_type() == labels::CAPACITY_TYPE_SPOT
                                && reqs.is_compatible(o.requirements(), Some(policy))
                        })
                })
                .count();
            if spot_types < MIN_SPOT_INSTANCE_TYPES {
                out.push(Warning::new(
                    SPOT_INSTANCE_TYPE_FLEXIBILITY,
                    &object,
                    "spec.template.spec.requirements",
                    format!(
                        "only {spot_types} instance types can launch as spot: allow at least {MIN_SPOT_INSTANCE_TYPES} (more families, sizes and generations) so spot capacity can be found and interruptions replaced"
                    ),
                ));
            }
        }

        let disruption = &pool.spec.disruption;
        let after = disruption.effective_consolidate_after();
        if let Some(d) = after.duration()
            && d.as_secs() < MIN_CONSOLIDATE_AFTER_SECS
        {
            let default = if disruption.consolidate_after.is_none() {
                " (the default)"
            } else {
                ""
            };
            out.push(Warning::new(
                CONSOLIDATE_AFTER_TOO_SHORT,
                &object,
                "spec.disruption.consolidateAfter",
                format!(
                    "consolidateAfter {}{default} is shorter than 5m: nodes are launched and removed back and forth and pods keep moving; start with 5m-10m in production",
                    d.as_str()
                ),
            ));
        }

        out.extend(budget_warning(pool, &object));
        if let Some(expire) = &pool.spec.template.spec.expire_after
            && !expire.is_never()
        {
            out.push(Warning::new(
                DISRUPT_ALL_AT_ONCE,
                &object,
                "spec.template.spec.expireAfter",
                format!(
                    "nodes expire after {} regardless of disruption budgets: nodes launched together are replaced together; protect workloads with PodDisruptionBudgets and terminationGracePeriod",
                    expire.as_str()
                ),
            ));
        }
    }
    out
}

/// Whether a budget's `nodes` allows every node (`100%` or more).
fn allows_all(nodes: &str) -> bool {
    nodes
        .strip_suffix('%')
        .and_then(|p| p.trim().parse::<i64>().ok())
        .is_some_and(|p| p >= 100)
}

fn budget_warning(pool: &NodePool, object: &str) -> Option<Warning> {
    let disruption = &pool.spec.disruption;
    if let Some(b) = &disruption.budgets
        && b.is_empty()
    {
        return Some(Warning::new(
            DISRUPT_ALL_AT_ONCE,
            object,
            "spec.disruption.budgets",
            "an empty budget list lets every node be disrupted at once; keep a budget such as nodes: \"10%\"",
        ));
    }
    let budgets = disruption.effective_budgets();
    let unbounded: Vec<&str> = DisruptionReason::ALL
        .iter()
        .filter(|reason| {
            !budgets
                .iter()
                .any(|b| b.schedule.is_none() && b.applies_to(**reason) && !allows_all(&b.nodes))
        })
        .map(|r| r.as_str())
        .collect();
    if unbounded.is_empty() {
        return None;
    }
    Some(Warning::new(
        DISRUPT_ALL_AT_ONCE,
        object,
        "spec.disruption.budgets",
        format!(
            "no always-active budget below 100% for {}: every node can be disrupted at once (outside scheduled budgets); add a budget such as nodes: \"10%\"",
            unbounded.join(", ")
        ),
    ))
}

/// The advice for a Karpenter controller (named `karpenter` or labelled
/// `app.kubernetes.io/name: karpenter`) whose pods land on Karpenter nodes.
pub fn controller_warning(object: &str, nodes: &[String]) -> Warning {
    let field = if object.starts_with("Pod/") {
        "spec.affinity"
    } else {
        "spec.template.spec.affinity"
    };
    Warning::new(
        CONTROLLER_ON_MANAGED_NODES,
        object,
        field,
        format!(
            "the Karpenter controller would run on nodes Karpenter manages ({}): if consolidation removes that node, it removes itself; pin it to a node group outside Karpenter with a required node affinity (e.g. karpenter.sh/nodepool DoesNotExist)",
            nodes.join(", ")
        ),
    )
}

/// Whether labels or a name mark a Karpenter controller.
pub fn is_karpenter_controller<'a>(
    name: &str,
    labels: impl IntoIterator<Item = (&'a String, &'a String)>,
) -> bool {
    name == "karpenter"
        || labels
            .into_iter()
            .any(|(k, v)| k == "app.kubernetes.io/name" && v == "karpenter")
}

/// The advice for a NodePool whose EC2NodeClass is missing from the input.
pub fn nodeclass_warning(pool: &NodePool) -> Warning {
    let class = &pool.spec.template.spec.node_class_ref;
    Warning::new(
        NODECLASS_NOT_FOUND,
        &format!("NodePool/{}", pool.name()),
        "spec.template.spec.nodeClassRef",
        format!(
            "{} {} is not in the input: instance types use the default AL2023 settings (upstream would not launch until it exists)",
            class.kind, class.name
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use karpenter_core::api;

    fn pool(yaml: &str) -> NodePool {
        let v: serde_json::Value = serde_saphyr::from_str(yaml).unwrap();
        api::nodepool_from_value(v).unwrap().object
    }

    const BASE: &str = r#"
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: p}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
        - {key: karpenter.sh/capacity-type, operator: In, values: [spot]}
  limits: {cpu: "100"}
  disruption:
    consolidateAfter: 10m
"#;

    fn rules(ws: &[Warning]) -> Vec<(&str, &str)> {
        ws.iter()
            .map(|w| (w.rule.as_str(), w.field.as_str()))
            .collect()
    }

    #[test]
    fn spot_only_pool_without_fallback() {
        let p = pool(BASE);
        let ws = nodepool_warnings(
            &[PoolContext {
                pool: &p,
                instance_types: &[],
            }],
            &LabelPolicy::core(),
        );
        assert_eq!(
            rules(&ws),
            [
                (
                    SPOT_WITHOUT_ON_DEMAND_FALLBACK,
                    "spec.template.spec.requirements[0]"
                ),
                (
                    SPOT_INSTANCE_TYPE_FLEXIBILITY,
                    "spec.template.spec.requirements"
                ),
            ]
        );
        assert!(ws[1].message.contains("only 0 instance types"));
    }

    #[test]
    fn limits_budgets_consolidation_and_expiry() {
        let p = pool(
            &BASE
                .replace("  limits: {cpu: \"100\"}\n", "")
                .replace(
                    "consolidateAfter: 10m",
                    "consolidateAfter: 30s\n    budgets: []",
                )
                .replace("[spot]", "[on-demand]")
                .replace(
                    "      requirements:",
                    "      expireAfter: 24h\n      requirements:",
                ),
        );
        let ws = nodepool_warnings(
            &[PoolContext {
                pool: &p,
                instance_types: &[],
            }],
            &LabelPolicy::core(),
        );
        assert_eq!(
            rules(&ws),
            [
                (NODEPOOL_WITHOUT_LIMITS, "spec.limits"),
                (
                    CONSOLIDATE_AFTER_TOO_SHORT,
                    "spec.disruption.consolidateAfter"
                ),
                (DISRUPT_ALL_AT_ONCE, "spec.disruption.budgets"),
                (DISRUPT_ALL_AT_ONCE, "spec.template.spec.expireAfter"),
            ]
        );
    }

    #[test]
    fn budgets_at_100_percent_or_only_scheduled() {
        for budgets in [
            "[{nodes: \"100%\"}]",
            "[{nodes: \"0\", schedule: \"0 9 * * 1-5\", duration: 8h}]",
            "[{nodes: \"10%\", reasons: [Drifted]}]",
        ] {
            let p = pool(&BASE.replace("[spot]", "[on-demand]").replace(
                "consolidateAfter: 10m",
                &format!("consolidateAfter: 10m\n    budgets: {budgets}"),
            ));
            let ws = nodepool_warnings(
                &[PoolContext {
                    pool: &p,
                    instance_types: &[],
                }],
                &LabelPolicy::core(),
            );
            assert_eq!(
                rules(&ws),
                [(DISRUPT_ALL_AT_ONCE, "spec.disruption.budgets")],
                "{budgets}"
            );
        }
        // The default budget (10%) and the guide's budgets are fine.
        let p = pool(&BASE.replace("[spot]", "[on-demand]"));
        let ws = nodepool_warnings(
            &[PoolContext {
                pool: &p,
                instance_types: &[],
            }],
            &LabelPolicy::core(),
        );
        assert!(ws.is_empty(), "{ws:?}");
    }

    #[test]
    fn controller_detection() {
        let l = std::collections::BTreeMap::from([(
            "app.kubernetes.io/name".to_string(),
            "karpenter".to_string(),
        )]);
        assert!(is_karpenter_controller("x", &l));
        assert!(is_karpenter_controller(
            "karpenter",
            &std::collections::BTreeMap::new()
        ));
        assert!(!is_karpenter_controller(
            "web",
            &std::collections::BTreeMap::new()
        ));
        assert!(RULES.iter().all(|(r, _)| is_rule(r)));
    }
}

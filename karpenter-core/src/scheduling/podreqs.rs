//! A pod's node requirements (upstream `NewPodRequirements`), its validation before scheduling
//! (upstream `apis/v1/labels.go`) and the preference relaxation ladder (upstream `preferences.go`).

use crate::labels::{self, LabelPolicy};
use crate::model::{NodeSelectorTerm, Pod, WhenUnsatisfiable};
use crate::requirements::{Operator, Requirement, Requirements};

use super::PreferencePolicy;

/// The requirements a pod puts on its node.
#[derive(Debug, Clone)]
pub(crate) struct PodRequirements {
    /// nodeSelector ∧ first required term ∧ (under Respect) the heaviest preferred term: what a
    /// node or NodeClaim must be compatible with.
    pub(crate) requirements: Requirements,
    /// nodeSelector ∧ first required term: the pod's own topology domains.
    pub(crate) strict: Requirements,
}

fn add_term(reqs: &mut Requirements, term: &NodeSelectorTerm) {
    for e in &term.match_expressions {
        reqs.add(Requirement::from_node_selector(e));
    }
}

/// Computes the pod's requirements (upstream `NewPodRequirements`). Among preferred terms of equal
/// weight the first listed is the heaviest (upstream's unstable sort is nondeterministic there).
pub(crate) fn pod_requirements(pod: &Pod, policy: PreferencePolicy) -> PodRequirements {
    let mut strict = Requirements::from_labels(
        pod.node_selector
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str())),
    );
    if let Some(term) = pod.node_affinity.as_ref().and_then(|a| a.required.first()) {
        add_term(&mut strict, term);
    }
    let mut requirements = strict.clone();
    if policy == PreferencePolicy::Respect
        && let Some(pref) = heaviest(
            pod.node_affinity
                .iter()
                .flat_map(|a| a.preferred.iter())
                .map(|p| (p.weight, p)),
        )
    {
        // Heaviest preferred term first, then the strict requirements (intersection is
        // commutative, so the order only matters for readability).
        let mut with_pref = Requirements::new();
        add_term(&mut with_pref, &pref.preference);
        with_pref.add_all(&strict);
        requirements = with_pref;
    }
    PodRequirements {
        requirements,
        strict,
    }
}

/// The first item with the greatest weight.
fn heaviest<'a, T>(items: impl Iterator<Item = (i32, &'a T)>) -> Option<&'a T> {
    let mut best: Option<(i32, &'a T)> = None;
    for (w, item) in items {
        if best.is_none_or(|(bw, _)| w > bw) {
            best = Some((w, item));
        }
    }
    best.map(|(_, t)| t)
}

/// Operators a pod's node selector terms may use.
fn pod_operator_supported(op: Operator) -> bool {
    matches!(
        op,
        Operator::In
            | Operator::NotIn
            | Operator::Exists
            | Operator::DoesNotExist
            | Operator::Gt
            | Operator::Lt
    )
}

/// Validates a pod before scheduling (upstream `apis/v1/labels.go`): its nodeSelector and
/// *required* node-affinity terms may not use restricted label keys, unsupported operators or
/// invalid values. Preferred terms are not validated. Returns a description of the first problem.
pub(crate) fn validate_pod(pod: &Pod, policy: &LabelPolicy) -> Result<(), String> {
    for (key, value) in &pod.node_selector {
        let key = labels::normalize_key(key);
        if policy.is_restricted(key) {
            return Err(format!(
                "nodeSelector uses restricted label {key:?}; Karpenter cannot create nodes with it"
            ));
        }
        labels::validate_qualified_name(key)
            .map_err(|e| format!("nodeSelector key {key:?} is invalid: {e}"))?;
        labels::validate_label_value(value)
            .map_err(|e| format!("nodeSelector value {value:?} of {key:?} is invalid: {e}"))?;
    }
    let terms = pod.node_affinity.iter().flat_map(|a| a.required.iter());
    for (ti, term) in terms.enumerate() {
        for e in &term.match_expressions {
            let key = labels::normalize_key(&e.key);
            let at = format!("required node affinity term {ti}, key {key:?}");
            if policy.is_restricted(key) {
                return Err(format!(
                    "{at}: restricted label; Karpenter cannot create nodes with it"
                ));
            }
            labels::validate_qualified_name(key).map_err(|m| format!("{at}: {m}"))?;
            if !pod_operator_supported(e.operator) {
                return Err(format!("{at}: unsupported operator {}", e.operator));
            }
            match e.operator {
                Operator::In | Operator::NotIn if e.values.is_empty() => {
                    return Err(format!("{at}: operator {} needs values", e.operator));
                }
                Operator::Exists | Operator::DoesNotExist if !e.values.is_empty() => {
                    return Err(format!("{at}: operator {} takes no values", e.operator));
                }
                Operator::Gt | Operator::Lt
                    if e.values.len() != 1 || e.values[0].parse::<i64>().is_err() =>
                {
                    return Err(format!(
                        "{at}: operator {} needs exactly one integer value",
                        e.operator
                    ));
                }
                _ => {}
            }
            for v in &e.values {
                labels::validate_label_value(v).map_err(|m| format!("{at}: value {v:?} {m}"))?;
            }
        }
    }
    Ok(())
}

/// Whether the pod's requirements say `karpenter.sh/nodepool DoesNotExist`: it does not want
/// Karpenter capacity.
pub(crate) fn rejects_karpenter(reqs: &PodRequirements) -> bool {
    reqs.requirements
        .get(labels::NODEPOOL)
        .is_some_and(|r| r.operator() == Operator::DoesNotExist)
}

/// Applies one relaxation step (upstream `preferences.go`) to `pod` in place. Returns false when
/// nothing is left to relax.
///
/// Under [`PreferencePolicy::Ignore`] the steps that drop preferences are skipped: the
/// preferences never constrained the pod, so dropping them would only cost an extra attempt
/// with the same outcome.
pub(crate) fn relax(
    pod: &mut Pod,
    policy: PreferencePolicy,
    tolerate_prefer_no_schedule: bool,
) -> bool {
    // 1. Required node affinity: drop the first of several OR-ed terms.
    if let Some(aff) = pod.node_affinity.as_mut()
        && aff.required.len() >= 2
    {
        aff.required.remove(0);
        return true;
    }
    if policy == PreferencePolicy::Respect {
        // 2. Preferred pod affinity, heaviest first.
        if let Some(aff) = pod.pod_affinity.as_mut()
            && !aff.preferred.is_empty()
        {
            aff.preferred.sort_by_key(|t| std::cmp::Reverse(t.weight));
            aff.preferred.remove(0);
            return true;
        }
        // 3. Preferred pod anti-affinity, heaviest first.
        if let Some(aff) = pod.pod_anti_affinity.as_mut()
            && !aff.preferred.is_empty()
        {
            aff.preferred.sort_by_key(|t| std::cmp::Reverse(t.weight));
            aff.preferred.remove(0);
            return true;
        }
        // 4. Preferred node affinity, heaviest first.
        if let Some(aff) = pod.node_affinity.as_mut()
            && !aff.preferred.is_empty()
        {
            aff.preferred.sort_by_key(|t| std::cmp::Reverse(t.weight));
            aff.preferred.remove(0);
            return true;
        }
        // 5. The first ScheduleAnyway spread, swapping in the last constraint as upstream does.
        if let Some(i) = pod
            .topology_spread_constraints
            .iter()
            .position(|c| c.when_unsatisfiable == WhenUnsatisfiable::ScheduleAnyway)
        {
            pod.topology_spread_constraints.swap_remove(i);
            return true;
        }
    }
    // 6. Tolerate PreferNoSchedule taints, if any NodePool has one.
    if tolerate_prefer_no_schedule {
        let wildcard = crate::taints::prefer_no_schedule_wildcard();
        if !pod.tolerations.contains(&wildcard) {
            pod.tolerations.push(wildcard);
            return true;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{NodeAffinity, PreferredSchedulingTerm};
    use crate::requirements::NodeSelectorRequirement;

    fn term(key: &str, op: Operator, values: &[&str]) -> NodeSelectorTerm {
        NodeSelectorTerm {
            match_expressions: vec![NodeSelectorRequirement::new(
                key,
                op,
                values.iter().copied(),
            )],
        }
    }

    #[test]
    fn requirements_use_first_required_and_heaviest_preferred() {
        let mut pod = Pod::new("default", "p");
        pod.node_selector
            .insert(labels::ARCH.to_string(), "amd64".to_string());
        pod.node_affinity = Some(NodeAffinity {
            required: vec![
                term(labels::ZONE, Operator::In, &["a", "b"]),
                term(labels::ZONE, Operator::In, &["c"]),
            ],
            preferred: vec![
                PreferredSchedulingTerm {
                    weight: 1,
                    preference: term(labels::ZONE, Operator::In, &["b"]),
                },
                PreferredSchedulingTerm {
                    weight: 50,
                    preference: term(labels::ZONE, Operator::In, &["a"]),
                },
                PreferredSchedulingTerm {
                    weight: 50,
                    preference: term(labels::ZONE, Operator::In, &["x"]),
                },
            ],
        });
        let r = pod_requirements(&pod, PreferencePolicy::Respect);
        assert_eq!(
            r.requirements.get(labels::ZONE).unwrap().single_value(),
            Some("a")
        );
        assert!(r.strict.get(labels::ZONE).unwrap().has("b"));
        assert!(r.strict.has(labels::ARCH));
        let ignore = pod_requirements(&pod, PreferencePolicy::Ignore);
        assert_eq!(ignore.requirements, ignore.strict);
    }

    #[test]
    fn relaxation_order() {
        let mut pod = Pod::new("default", "p");
        pod.node_affinity = Some(NodeAffinity {
            required: vec![
                term(labels::ZONE, Operator::In, &["a"]),
                term(labels::ZONE, Operator::In, &["b"]),
            ],
            preferred: vec![PreferredSchedulingTerm {
                weight: 1,
                preference: term(labels::ZONE, Operator::In, &["b"]),
            }],
        });
        assert!(relax(&mut pod, PreferencePolicy::Respect, true));
        assert_eq!(pod.node_affinity.as_ref().unwrap().required.len(), 1);
        assert!(relax(&mut pod, PreferencePolicy::Respect, true));
        assert!(pod.node_affinity.as_ref().unwrap().preferred.is_empty());
        assert!(relax(&mut pod, PreferencePolicy::Respect, true));
        assert_eq!(pod.tolerations.len(), 1);
        assert!(!relax(&mut pod, PreferencePolicy::Respect, true));
        assert!(
            !relax(&mut pod, PreferencePolicy::Respect, false),
            "the last required term is never dropped"
        );
    }

    #[test]
    fn validation_rejects_restricted_and_bad_operators() {
        let policy = LabelPolicy::core();
        let mut pod = Pod::new("default", "p");
        pod.node_selector
            .insert(labels::HOSTNAME.to_string(), "h".to_string());
        assert!(validate_pod(&pod, &policy).is_err());
        let mut pod = Pod::new("default", "p");
        pod.node_affinity = Some(NodeAffinity {
            required: vec![term("karpenter.sh/test", Operator::In, &["x"])],
            preferred: vec![],
        });
        assert!(validate_pod(&pod, &policy).is_err());
        let mut pod = Pod::new("default", "p");
        pod.node_affinity = Some(NodeAffinity {
            required: vec![term("integer", Operator::Gte, &["3"])],
            preferred: vec![],
        });
        assert!(validate_pod(&pod, &policy).is_err());
        let mut pod = Pod::new("default", "p");
        pod.node_selector
            .insert("kubernetes.io/test".to_string(), "v".to_string());
        assert!(validate_pod(&pod, &policy).is_ok());
    }
}

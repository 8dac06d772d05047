//! Pods: a Pod as the scheduler sees it, with its affinity, tolerations and topology spread.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1 as core;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;

use crate::hostports::HostPort;
use crate::model::{
    self, LabelSelectorRequirement, NodeInclusionPolicy, OwnerReference, PodPhase,
    SelectorOperator, Timestamp, WhenUnsatisfiable,
};
use crate::taints::{TaintEffect, Toleration, TolerationOperator};

use super::{ConvertError, Ctx, namespace_of, node_selector_term, non_empty, time};

// ---------------------------------------------------------------------------------------------
// Pods
// ---------------------------------------------------------------------------------------------

/// Converts a Pod.
///
/// - `metadata.namespace` defaults to `default`, `metadata.uid` to `<namespace>/<name>`,
///   `metadata.creationTimestamp` to the Unix epoch; `metadata.name` is required.
/// - The owner is the owner reference marked `controller: true`, if any; the others are kept
///   as [`Pod::other_owners`](model::Pod::other_owners).
/// - Node affinity: required terms (ORed) and preferred terms. `matchFields` in a required
///   term is an error ([`ConvertError::MatchFields`]); in a preferred term it is ignored. A
///   DaemonSet's pod is the exception: the DaemonSet controller's pin (`matchFields` on
///   `metadata.name`) is left out, with the required terms it leaves empty.
/// - Pod (anti-)affinity terms keep their label selector, namespaces and namespace selector.
///   Their `matchLabelKeys` / `mismatchLabelKeys` are merged into the label selector as
///   `key In [value]` / `key NotIn [value]` for the pod's own label values, as the API server
///   does when it admits the pod (expressions already present are not repeated).
/// - Requests are the pod's effective requests ([`effective_requests`](super::effective_requests)).
/// - Host ports: every `hostPort` of a regular container (IP `0.0.0.0`, protocol `TCP` when
///   empty).
/// - `ready` is false only when the `Ready` condition is `False`.
/// - Volumes: `persistentVolumeClaim` and generic `ephemeral` volumes keep their claim (resp.
///   template storage class); other sources are kept by their field name.
pub fn pod_from_k8s(pod: &core::Pod) -> Result<model::Pod, ConvertError> {
    let meta = &pod.metadata;
    let namespace = namespace_of(meta);
    let name = non_empty(meta.name.as_ref()).unwrap_or("");
    let ctx = Ctx {
        kind: "Pod",
        namespace: Some(namespace),
        name,
    };
    if name.is_empty() {
        return Err(ctx.missing("metadata.name"));
    }
    let empty_spec = core::PodSpec::default();
    let spec = pod.spec.as_ref().unwrap_or(&empty_spec);
    let status = pod.status.as_ref();
    let labels = meta.labels.clone().unwrap_or_default();

    let mut out = model::Pod::new(namespace, name);
    if let Some(uid) = non_empty(meta.uid.as_ref()) {
        out.uid = uid.to_string();
    }
    out.annotations = meta.annotations.clone().unwrap_or_default();
    out.creation_timestamp =
        time(meta.creation_timestamp.as_ref()).unwrap_or(Timestamp::UNIX_EPOCH);
    out.deletion_timestamp = time(meta.deletion_timestamp.as_ref());
    out.phase = phase(&ctx, status.and_then(|s| s.phase.as_ref()))?;
    out.node_name = non_empty(spec.node_name.as_ref()).map(str::to_string);
    out.owner = controller_owner(meta.owner_references.as_deref());
    out.other_owners = meta
        .owner_references
        .iter()
        .flatten()
        .filter(|r| r.controller != Some(true))
        .map(|r| OwnerReference {
            api_version: r.api_version.clone(),
            kind: r.kind.clone(),
            name: r.name.clone(),
            controller: false,
        })
        .collect();
    out.node_selector = spec.node_selector.clone().unwrap_or_default();
    if let Some(affinity) = &spec.affinity {
        let base = "spec.affinity";
        out.node_affinity = affinity
            .node_affinity
            .as_ref()
            .map(|a| {
                let pinned = out.owner.as_ref().is_some_and(|o| o.kind == "DaemonSet");
                node_affinity(&ctx, a, &format!("{base}.nodeAffinity"), pinned)
            })
            .transpose()?;
        out.pod_affinity = affinity
            .pod_affinity
            .as_ref()
            .map(|a| {
                pod_affinity(
                    &ctx,
                    &labels,
                    a.required_during_scheduling_ignored_during_execution
                        .as_deref(),
                    a.preferred_during_scheduling_ignored_during_execution
                        .as_deref(),
                    &format!("{base}.podAffinity"),
                )
            })
            .transpose()?;
        out.pod_anti_affinity = affinity
            .pod_anti_affinity
            .as_ref()
            .map(|a| {
                pod_affinity(
                    &ctx,
                    &labels,
                    a.required_during_scheduling_ignored_during_execution
                        .as_deref(),
                    a.preferred_during_scheduling_ignored_during_execution
                        .as_deref(),
                    &format!("{base}.podAntiAffinity"),
                )
            })
            .transpose()?;
    }
    out.tolerations = spec
        .tolerations
        .iter()
        .flatten()
        .enumerate()
        .map(|(i, t)| toleration(&ctx, t, &format!("spec.tolerations[{i}]")))
        .collect::<Result<_, _>>()?;
    out.topology_spread_constraints = spec
        .topology_spread_constraints
        .iter()
        .flatten()
        .enumerate()
        .map(|(i, c)| topology_spread(&ctx, c, &format!("spec.topologySpreadConstraints[{i}]")))
        .collect::<Result<_, _>>()?;
    out.requests = super::requests::pod_requests(&ctx, spec, status)?;
    out.limits = super::requests::pod_limits(&ctx, spec)?;
    out.host_ports = spec
        .containers
        .iter()
        .flat_map(|c| c.ports.iter().flatten())
        .filter(|p| p.host_port.is_some_and(|hp| hp != 0))
        .map(|p| {
            HostPort::new(
                p.host_ip.as_deref().unwrap_or(""),
                p.host_port.unwrap_or(0),
                p.protocol.as_deref().unwrap_or(""),
            )
        })
        .collect();
    out.has_resource_claims = has_resource_claims(spec);
    out.priority = spec.priority;
    out.termination_grace_period_seconds = spec.termination_grace_period_seconds;
    out.ready = !status
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .any(|c| c.type_ == crate::api::condition_types::READY && c.status == "False");
    out.start_time = time(status.and_then(|s| s.start_time.as_ref()));
    let true_since = |kind: &str| {
        status
            .and_then(|s| s.conditions.as_ref())
            .into_iter()
            .flatten()
            .find(|c| c.type_ == kind && c.status == "True")
            .map(|c| time(c.last_transition_time.as_ref()).unwrap_or(out.creation_timestamp))
    };
    out.scheduled_at = true_since("PodScheduled");
    out.ready_at = true_since(crate::api::condition_types::READY);
    out.priority_class_name = non_empty(spec.priority_class_name.as_ref()).map(str::to_string);
    out.volumes = super::volumes::pod_volumes(spec);
    out.labels = labels;
    Ok(out)
}

fn phase(ctx: &Ctx<'_>, phase: Option<&String>) -> Result<PodPhase, ConvertError> {
    Ok(match non_empty(phase) {
        None | Some("Pending") => PodPhase::Pending,
        Some("Running") => PodPhase::Running,
        Some("Succeeded") => PodPhase::Succeeded,
        Some("Failed") => PodPhase::Failed,
        Some("Unknown") => PodPhase::Unknown,
        Some(other) => {
            return Err(ctx.invalid(
                "status.phase",
                other,
                "expected Pending, Running, Succeeded, Failed or Unknown",
            ));
        }
    })
}

fn controller_owner(refs: Option<&[meta::OwnerReference]>) -> Option<OwnerReference> {
    refs?
        .iter()
        .find(|r| r.controller == Some(true))
        .map(|r| OwnerReference {
            api_version: r.api_version.clone(),
            kind: r.kind.clone(),
            name: r.name.clone(),
            controller: true,
        })
}

fn has_resource_claims(spec: &core::PodSpec) -> bool {
    let claims = |r: Option<&core::ResourceRequirements>| {
        r.and_then(|r| r.claims.as_ref())
            .is_some_and(|c| !c.is_empty())
    };
    spec.resource_claims.as_ref().is_some_and(|c| !c.is_empty())
        || claims(spec.resources.as_ref())
        || spec
            .containers
            .iter()
            .chain(spec.init_containers.iter().flatten())
            .any(|c| claims(c.resources.as_ref()))
}

/// `daemonset_pinned`: the pod is a DaemonSet's, whose controller pins each pod to its node
/// with a required `matchFields` term on `metadata.name`; that pin is left out (with the terms
/// it leaves empty), as no scheduler of ours places a DaemonSet's pods (their overhead comes
/// from the DaemonSet), so that its bound pods stay readable.
fn node_affinity(
    ctx: &Ctx<'_>,
    a: &core::NodeAffinity,
    base: &str,
    daemonset_pinned: bool,
) -> Result<model::NodeAffinity, ConvertError> {
    let required_base = format!("{base}.requiredDuringSchedulingIgnoredDuringExecution");
    let mut required = Vec::new();
    let terms = a
        .required_during_scheduling_ignored_during_execution
        .iter()
        .flat_map(|s| s.node_selector_terms.iter())
        .enumerate();
    for (i, t) in terms {
        let field = format!("{required_base}.nodeSelectorTerms[{i}]");
        let fields = t.match_fields.iter().flatten();
        let pin_only = fields.clone().all(|f| f.key == "metadata.name");
        if daemonset_pinned && pin_only && fields.clone().next().is_some() {
            let term = node_selector_term(ctx, t, &field, false)?;
            if !term.match_expressions.is_empty() {
                required.push(term);
            }
        } else {
            required.push(node_selector_term(ctx, t, &field, true)?);
        }
    }
    let preferred = preferred_terms(
        a.preferred_during_scheduling_ignored_during_execution
            .iter()
            .flatten(),
        base,
        |p, field| {
            Ok(model::PreferredSchedulingTerm {
                weight: p.weight,
                preference: node_selector_term(
                    ctx,
                    &p.preference,
                    &format!("{field}.preference"),
                    false,
                )?,
            })
        },
    )?;
    Ok(model::NodeAffinity {
        required,
        preferred,
    })
}

/// Converts a label selector; `field` is the selector's path.
pub(super) fn label_selector(
    ctx: &Ctx<'_>,
    s: &meta::LabelSelector,
    field: &str,
) -> Result<model::LabelSelector, ConvertError> {
    let match_expressions = s
        .match_expressions
        .iter()
        .flatten()
        .enumerate()
        .map(|(i, e)| {
            let operator = match e.operator.as_str() {
                "In" => SelectorOperator::In,
                "NotIn" => SelectorOperator::NotIn,
                "Exists" => SelectorOperator::Exists,
                "DoesNotExist" => SelectorOperator::DoesNotExist,
                other => {
                    return Err(ctx.invalid(
                        format!("{field}.matchExpressions[{i}].operator"),
                        other,
                        "expected In, NotIn, Exists or DoesNotExist",
                    ));
                }
            };
            Ok(LabelSelectorRequirement {
                key: e.key.clone(),
                operator,
                values: e.values.clone().unwrap_or_default(),
            })
        })
        .collect::<Result<_, _>>()?;
    Ok(model::LabelSelector {
        match_labels: s.match_labels.clone().unwrap_or_default(),
        match_expressions,
    })
}

fn pod_affinity_term(
    ctx: &Ctx<'_>,
    pod_labels: &BTreeMap<String, String>,
    t: &core::PodAffinityTerm,
    field: &str,
) -> Result<model::PodAffinityTerm, ConvertError> {
    let mut selector = t
        .label_selector
        .as_ref()
        .map(|s| label_selector(ctx, s, &format!("{field}.labelSelector")))
        .transpose()?;
    if let Some(selector) = &mut selector {
        let merged = t
            .match_label_keys
            .iter()
            .flatten()
            .map(|k| (k, SelectorOperator::In))
            .chain(
                t.mismatch_label_keys
                    .iter()
                    .flatten()
                    .map(|k| (k, SelectorOperator::NotIn)),
            );
        for (key, operator) in merged {
            let Some(value) = pod_labels.get(key) else {
                continue;
            };
            let expression = LabelSelectorRequirement {
                key: key.clone(),
                operator,
                values: vec![value.clone()],
            };
            if !selector.match_expressions.contains(&expression) {
                selector.match_expressions.push(expression);
            }
        }
    }
    Ok(model::PodAffinityTerm {
        label_selector: selector,
        namespaces: t.namespaces.clone().unwrap_or_default(),
        namespace_selector: t
            .namespace_selector
            .as_ref()
            .map(|s| label_selector(ctx, s, &format!("{field}.namespaceSelector")))
            .transpose()?,
        topology_key: t.topology_key.clone(),
    })
}

fn pod_affinity(
    ctx: &Ctx<'_>,
    pod_labels: &BTreeMap<String, String>,
    required: Option<&[core::PodAffinityTerm]>,
    preferred: Option<&[core::WeightedPodAffinityTerm]>,
    base: &str,
) -> Result<model::PodAffinity, ConvertError> {
    let required = required
        .into_iter()
        .flatten()
        .enumerate()
        .map(|(i, t)| {
            let field = format!("{base}.requiredDuringSchedulingIgnoredDuringExecution[{i}]");
            pod_affinity_term(ctx, pod_labels, t, &field)
        })
        .collect::<Result<_, _>>()?;
    let preferred = preferred_terms(preferred.into_iter().flatten(), base, |w, field| {
        Ok(model::WeightedPodAffinityTerm {
            weight: w.weight,
            pod_affinity_term: pod_affinity_term(
                ctx,
                pod_labels,
                &w.pod_affinity_term,
                &format!("{field}.podAffinityTerm"),
            )?,
        })
    })?;
    Ok(model::PodAffinity {
        required,
        preferred,
    })
}

/// Converts the weighted terms of a `preferredDuringSchedulingIgnoredDuringExecution` list in
/// order (node and pod affinity share the shape); `convert` gets each item and its path,
/// `{base}.preferredDuringSchedulingIgnoredDuringExecution[i]`.
fn preferred_terms<'a, T: 'a, U>(
    items: impl Iterator<Item = &'a T>,
    base: &str,
    mut convert: impl FnMut(&'a T, &str) -> Result<U, ConvertError>,
) -> Result<Vec<U>, ConvertError> {
    items
        .enumerate()
        .map(|(i, item)| {
            convert(
                item,
                &format!("{base}.preferredDuringSchedulingIgnoredDuringExecution[{i}]"),
            )
        })
        .collect()
}

pub(super) fn taint_effect(
    ctx: &Ctx<'_>,
    effect: &str,
    field: &str,
) -> Result<TaintEffect, ConvertError> {
    Ok(match effect {
        "NoSchedule" => TaintEffect::NoSchedule,
        "PreferNoSchedule" => TaintEffect::PreferNoSchedule,
        "NoExecute" => TaintEffect::NoExecute,
        other => {
            return Err(ctx.invalid(
                field,
                other,
                "expected NoSchedule, PreferNoSchedule or NoExecute",
            ));
        }
    })
}

fn toleration(
    ctx: &Ctx<'_>,
    t: &core::Toleration,
    field: &str,
) -> Result<Toleration, ConvertError> {
    let operator = match non_empty(t.operator.as_ref()) {
        None => None,
        Some("Equal") => Some(TolerationOperator::Equal),
        Some("Exists") => Some(TolerationOperator::Exists),
        Some("Gt") => Some(TolerationOperator::Gt),
        Some("Lt") => Some(TolerationOperator::Lt),
        Some(other) => {
            return Err(ctx.invalid(
                format!("{field}.operator"),
                other,
                "expected Equal, Exists, Gt or Lt",
            ));
        }
    };
    let effect = non_empty(t.effect.as_ref())
        .map(|e| taint_effect(ctx, e, &format!("{field}.effect")))
        .transpose()?;
    Ok(Toleration {
        key: t.key.clone().unwrap_or_default(),
        operator,
        value: t.value.clone().unwrap_or_default(),
        effect,
        toleration_seconds: t.toleration_seconds,
    })
}

fn inclusion_policy(
    ctx: &Ctx<'_>,
    policy: Option<&String>,
    field: &str,
) -> Result<Option<NodeInclusionPolicy>, ConvertError> {
    Ok(match non_empty(policy) {
        None => None,
        Some("Honor") => Some(NodeInclusionPolicy::Honor),
        Some("Ignore") => Some(NodeInclusionPolicy::Ignore),
        Some(other) => return Err(ctx.invalid(field, other, "expected Honor or Ignore")),
    })
}

fn topology_spread(
    ctx: &Ctx<'_>,
    c: &core::TopologySpreadConstraint,
    field: &str,
) -> Result<model::TopologySpreadConstraint, ConvertError> {
    let when_unsatisfiable = match c.when_unsatisfiable.as_str() {
        "DoNotSchedule" => WhenUnsatisfiable::DoNotSchedule,
        "ScheduleAnyway" => WhenUnsatisfiable::ScheduleAnyway,
        "" => return Err(ctx.missing(format!("{field}.whenUnsatisfiable"))),
        other => {
            return Err(ctx.invalid(
                format!("{field}.whenUnsatisfiable"),
                other,
                "expected DoNotSchedule or ScheduleAnyway",
            ));
        }
    };
    if c.topology_key.is_empty() {
        return Err(ctx.missing(format!("{field}.topologyKey")));
    }
    Ok(model::TopologySpreadConstraint {
        max_skew: c.max_skew,
        topology_key: c.topology_key.clone(),
        when_unsatisfiable,
        label_selector: c
            .label_selector
            .as_ref()
            .map(|s| label_selector(ctx, s, &format!("{field}.labelSelector")))
            .transpose()?,
        min_domains: c.min_domains,
        node_affinity_policy: inclusion_policy(
            ctx,
            c.node_affinity_policy.as_ref(),
            &format!("{field}.nodeAffinityPolicy"),
        )?,
        node_taints_policy: inclusion_policy(
            ctx,
            c.node_taints_policy.as_ref(),
            &format!("{field}.nodeTaintsPolicy"),
        )?,
        match_label_keys: c.match_label_keys.clone().unwrap_or_default(),
    })
}

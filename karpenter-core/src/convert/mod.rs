//! Conversion of Kubernetes objects (the `k8s-openapi` crate's types) into the core model,
//! [`crate::model`] (feature `k8s-openapi`).
//!
//! - [`pod_from_k8s`]: a Pod as the scheduler sees it, with its *effective* resource requests
//!   (see [`effective_requests`]);
//! - [`node_from_k8s`]: a Node;
//! - [`daemonset_from_k8s`] / [`daemonset_from_k8s_with_pod`]: a DaemonSet and the pod it
//!   would run on every eligible node (scheduler spec 3.0 step 8), the latter with the
//!   DaemonSet's newest live pod ([`newest_daemonset_pod`]) when there is one;
//! - [`pdb_from_k8s`]: a PodDisruptionBudget;
//! - [`pvc_from_k8s`], [`pv_from_k8s`], [`storage_class_from_k8s`],
//!   [`csi_node_limits_from_k8s`]: storage objects for the scheduler's
//!   [`VolumeCatalog`](crate::volumes::VolumeCatalog) and nodes' volume limits.
//!
//! Every error names the object (`Pod default/web-0`) and the field
//! (`spec.containers[0].resources.requests[cpu]`) at fault.
//!
//! This crate picks no Kubernetes version: the final binary enables one of `k8s-openapi`'s
//! `v1_*` features. Only fields present in every supported version are read.
//!
//! ```
//! use k8s_openapi::api::core::v1::{Container, Pod, PodSpec, ResourceRequirements};
//! use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
//! use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
//!
//! let pod = Pod {
//!     metadata: ObjectMeta { name: Some("web".into()), ..Default::default() },
//!     spec: Some(PodSpec {
//!         containers: vec![Container {
//!             name: "app".into(),
//!             resources: Some(ResourceRequirements {
//!                 // Only limits: the API server copies them into the requests.
//!                 limits: Some([("cpu".to_string(), Quantity("500m".into()))].into()),
//!                 ..Default::default()
//!             }),
//!             ..Default::default()
//!         }],
//!         ..Default::default()
//!     }),
//!     ..Default::default()
//! };
//! let pod = karpenter_core::convert::pod_from_k8s(&pod).unwrap();
//! assert_eq!(pod.key(), "default/web");
//! assert_eq!(pod.requests.get("cpu").map(|q| q.milli_value()), Some(500));
//! ```

mod pod;
mod requests;
mod volumes;

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1 as apps;
use k8s_openapi::api::core::v1 as core;
use k8s_openapi::api::policy::v1 as policy;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::labels;
use crate::model::{self, IntOrPercent, Timestamp};
use crate::requirements::{NodeSelectorRequirement, Operator};
use crate::resources::{Quantity, QuantityError, ResourceList};
use crate::taints::Taint;

pub use pod::pod_from_k8s;
use pod::{label_selector, taint_effect};
pub use requests::effective_requests;
pub use volumes::{csi_node_limits_from_k8s, pv_from_k8s, pvc_from_k8s, storage_class_from_k8s};

/// Why a Kubernetes object cannot be converted. Every variant names the object
/// (`Pod default/web-0`) and the field (a JSON path such as
/// `spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchFields`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConvertError {
    /// A required field is absent or empty.
    #[error("{object}: {field}: required value")]
    Missing {
        /// The object, as `Kind namespace/name`.
        object: String,
        /// The path of the missing field.
        field: String,
    },
    /// A field has a value the model does not accept (an unknown operator, effect, phase,
    /// policy, or a string that should be a percentage).
    #[error("{object}: {field}: unsupported value {value:?}: {reason}")]
    Invalid {
        /// The object, as `Kind namespace/name`.
        object: String,
        /// The path of the field.
        field: String,
        /// The value found.
        value: String,
        /// What is accepted.
        reason: String,
    },
    /// A resource quantity does not parse.
    #[error("{object}: {field}[{resource}]{}: {source}", container_suffix(.container))]
    Quantity {
        /// The object, as `Kind namespace/name`.
        object: String,
        /// The path of the resource list (`spec.containers[0].resources.requests`).
        field: String,
        /// The container whose resources these are, if any.
        container: Option<String>,
        /// The resource name (`cpu`).
        resource: String,
        /// Why the quantity was rejected.
        #[source]
        source: Box<QuantityError>,
    },
    /// A *required* node-affinity term uses `matchFields`, which the scheduler does not
    /// support (upstream Karpenter rejects such pods; in preferred terms they are ignored).
    #[error(
        "{object}: {field}: matchFields is not supported in required node affinity terms (key {key:?})"
    )]
    MatchFields {
        /// The object, as `Kind namespace/name`.
        object: String,
        /// The path of the `matchFields` list.
        field: String,
        /// The first field key used (`metadata.name`).
        key: String,
    },
}

fn container_suffix(container: &Option<String>) -> String {
    container
        .as_ref()
        .map(|c| format!(" (container {c:?})"))
        .unwrap_or_default()
}

impl ConvertError {
    /// The object the error is about (`Pod default/web-0`).
    pub fn object(&self) -> &str {
        match self {
            ConvertError::Missing { object, .. }
            | ConvertError::Invalid { object, .. }
            | ConvertError::Quantity { object, .. }
            | ConvertError::MatchFields { object, .. } => object,
        }
    }

    /// The path of the field at fault. For quantities it is the resource list's path followed
    /// by `[resource]`.
    pub fn field(&self) -> String {
        match self {
            ConvertError::Missing { field, .. }
            | ConvertError::Invalid { field, .. }
            | ConvertError::MatchFields { field, .. } => field.clone(),
            ConvertError::Quantity {
                field, resource, ..
            } => format!("{field}[{resource}]"),
        }
    }
}

/// The object being converted, for error messages.
#[derive(Clone, Copy)]
pub(crate) struct Ctx<'a> {
    kind: &'static str,
    namespace: Option<&'a str>,
    name: &'a str,
}

impl Ctx<'_> {
    fn object(&self) -> String {
        match self.namespace {
            Some(ns) => format!("{} {ns}/{}", self.kind, self.name),
            None => format!("{} {}", self.kind, self.name),
        }
    }

    fn missing(&self, field: impl Into<String>) -> ConvertError {
        ConvertError::Missing {
            object: self.object(),
            field: field.into(),
        }
    }

    fn invalid(
        &self,
        field: impl Into<String>,
        value: impl Into<String>,
        reason: impl Into<String>,
    ) -> ConvertError {
        ConvertError::Invalid {
            object: self.object(),
            field: field.into(),
            value: value.into(),
            reason: reason.into(),
        }
    }

    /// Parses a Kubernetes resource list; `field` is the list's path.
    pub(crate) fn resource_list(
        &self,
        list: Option<&BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>>,
        field: &str,
        container: Option<&str>,
    ) -> Result<ResourceList, ConvertError> {
        let mut out = ResourceList::new();
        for (name, q) in list.into_iter().flatten() {
            let parsed = Quantity::parse(&q.0).map_err(|source| ConvertError::Quantity {
                object: self.object(),
                field: field.to_string(),
                container: container.map(str::to_string),
                resource: name.clone(),
                source: Box::new(source),
            })?;
            out.insert(name.as_str(), parsed);
        }
        Ok(out)
    }
}

/// A field that is optional in some Kubernetes versions and required in others
/// (`DaemonSet.spec`, `PodDisruptionBudgetStatus.disruptionsAllowed`): read it either way.
trait MaybeField<T> {
    fn field(&self) -> Option<&T>;
}

impl<T> MaybeField<T> for Option<T> {
    fn field(&self) -> Option<&T> {
        self.as_ref()
    }
}

impl MaybeField<apps::DaemonSetSpec> for apps::DaemonSetSpec {
    fn field(&self) -> Option<&apps::DaemonSetSpec> {
        Some(self)
    }
}

impl MaybeField<i32> for i32 {
    fn field(&self) -> Option<&i32> {
        Some(self)
    }
}

fn time(t: Option<&meta::Time>) -> Option<Timestamp> {
    t.map(|t| t.0)
}

fn non_empty(s: Option<&String>) -> Option<&str> {
    s.map(String::as_str).filter(|s| !s.is_empty())
}

/// The namespace of an object: `metadata.namespace`, or `default` when absent or empty.
fn namespace_of(meta: &meta::ObjectMeta) -> &str {
    non_empty(meta.namespace.as_ref()).unwrap_or("default")
}

// ---------------------------------------------------------------------------------------------
// Node selector terms (pods' node affinity, PersistentVolumes' node affinity)
// ---------------------------------------------------------------------------------------------

fn node_operator(ctx: &Ctx<'_>, op: &str, field: &str) -> Result<Operator, ConvertError> {
    Ok(match op {
        "In" => Operator::In,
        "NotIn" => Operator::NotIn,
        "Exists" => Operator::Exists,
        "DoesNotExist" => Operator::DoesNotExist,
        "Gt" => Operator::Gt,
        "Lt" => Operator::Lt,
        other => {
            return Err(ctx.invalid(
                field,
                other,
                "expected In, NotIn, Exists, DoesNotExist, Gt or Lt",
            ));
        }
    })
}

fn node_selector_term(
    ctx: &Ctx<'_>,
    term: &core::NodeSelectorTerm,
    field: &str,
    required: bool,
) -> Result<model::NodeSelectorTerm, ConvertError> {
    if required && let Some(first) = term.match_fields.iter().flatten().next() {
        return Err(ConvertError::MatchFields {
            object: ctx.object(),
            field: format!("{field}.matchFields"),
            key: first.key.clone(),
        });
    }
    let match_expressions = term
        .match_expressions
        .iter()
        .flatten()
        .enumerate()
        .map(|(i, e)| {
            let path = format!("{field}.matchExpressions[{i}].operator");
            Ok(NodeSelectorRequirement {
                key: e.key.clone(),
                operator: node_operator(ctx, &e.operator, &path)?,
                values: e.values.clone().unwrap_or_default(),
                min_values: None,
            })
        })
        .collect::<Result<_, ConvertError>>()?;
    Ok(model::NodeSelectorTerm { match_expressions })
}

// ---------------------------------------------------------------------------------------------
// Nodes
// ---------------------------------------------------------------------------------------------

/// Converts a Node.
///
/// `managed` is whether it carries the `karpenter.sh/nodepool` label; a managed node is
/// `initialized` when its `karpenter.sh/initialized` label is `"true"`, an unmanaged node always
/// is. `marked_for_deletion` is whether `metadata.deletionTimestamp` is set. Without
/// `status.allocatable`, allocatable equals capacity (as the API server defaults it). Startup
/// taints belong to the NodeClaim and are left empty.
pub fn node_from_k8s(node: &core::Node) -> Result<model::ClusterNode, ConvertError> {
    let meta = &node.metadata;
    let name = non_empty(meta.name.as_ref()).unwrap_or("");
    let ctx = Ctx {
        kind: "Node",
        namespace: None,
        name,
    };
    if name.is_empty() {
        return Err(ctx.missing("metadata.name"));
    }
    let mut out = model::ClusterNode::new(name);
    out.labels = meta.labels.clone().unwrap_or_default();
    out.taints = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .into_iter()
        .flatten()
        .enumerate()
        .map(|(i, t)| {
            let field = format!("spec.taints[{i}]");
            if t.key.is_empty() {
                return Err(ctx.missing(format!("{field}.key")));
            }
            Ok(Taint {
                key: t.key.clone(),
                value: t.value.clone().unwrap_or_default(),
                effect: taint_effect(&ctx, &t.effect, &format!("{field}.effect"))?,
                time_added: t.time_added.as_ref().map(|t| t.0.to_string()),
            })
        })
        .collect::<Result<_, _>>()?;
    let status = node.status.as_ref();
    out.capacity = ctx.resource_list(
        status.and_then(|s| s.capacity.as_ref()),
        "status.capacity",
        None,
    )?;
    out.allocatable = match status.and_then(|s| s.allocatable.as_ref()) {
        Some(a) => ctx.resource_list(Some(a), "status.allocatable", None)?,
        None => out.capacity.clone(),
    };
    out.managed = out.labels.contains_key(labels::NODEPOOL);
    out.initialized =
        !out.managed || out.labels.get(labels::INITIALIZED).map(String::as_str) == Some("true");
    out.marked_for_deletion = meta.deletion_timestamp.is_some();
    out.creation_timestamp =
        time(meta.creation_timestamp.as_ref()).unwrap_or(Timestamp::UNIX_EPOCH);
    Ok(out)
}

/// Converts a Node into the lifecycle's (and the operator's) view of it: what
/// [`node_from_k8s`] reads plus `spec.providerID`, annotations, `status.conditions` (a condition
/// without `lastTransitionTime` reads as changed at the epoch; an unknown status as `Unknown`),
/// finalizers, owner references and the deletion timestamp.
pub fn lifecycle_node_from_k8s(node: &core::Node) -> Result<crate::lifecycle::Node, ConvertError> {
    use crate::api::ConditionStatus;
    let m = node_from_k8s(node)?;
    let meta = &node.metadata;
    let mut out = crate::lifecycle::Node::new(
        m.name.clone(),
        node.spec
            .as_ref()
            .and_then(|s| s.provider_id.clone())
            .unwrap_or_default(),
    );
    out.labels = m.labels;
    out.annotations = meta.annotations.clone().unwrap_or_default();
    out.taints = m.taints;
    out.capacity = m.capacity;
    out.allocatable = m.allocatable;
    out.creation_timestamp = m.creation_timestamp;
    out.conditions = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .map(|c| {
            let status = match c.status.as_str() {
                "True" => ConditionStatus::True,
                "False" => ConditionStatus::False,
                _ => ConditionStatus::Unknown,
            };
            let mut nc = crate::lifecycle::NodeCondition::new(
                c.type_.clone(),
                status,
                time(c.last_transition_time.as_ref()).unwrap_or(Timestamp::UNIX_EPOCH),
            );
            nc.reason = c.reason.clone();
            nc.message = c.message.clone();
            nc
        })
        .collect();
    out.finalizers = meta.finalizers.clone().unwrap_or_default();
    out.owner_references = meta
        .owner_references
        .iter()
        .flatten()
        .map(|o| crate::api::OwnerReference {
            api_version: o.api_version.clone(),
            kind: o.kind.clone(),
            name: o.name.clone(),
            uid: o.uid.clone(),
            controller: o.controller,
            block_owner_deletion: o.block_owner_deletion,
        })
        .collect();
    out.deletion_timestamp = time(meta.deletion_timestamp.as_ref());
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// DaemonSets
// ---------------------------------------------------------------------------------------------

/// Converts a DaemonSet into the pod it would run, synthesised from `spec.template`
/// (scheduler spec 3.0 step 8): namespace and name of the DaemonSet, the template's labels,
/// owner = the DaemonSet (controller), limits copied into missing requests. Errors name the
/// DaemonSet and the template field (`spec.template.spec.containers[0]...`).
pub fn daemonset_from_k8s(ds: &apps::DaemonSet) -> Result<model::DaemonSet, ConvertError> {
    daemonset_from_k8s_with_pod(ds, None)
}

/// The pod upstream takes as a DaemonSet's template when one exists: the newest pod (latest
/// `metadata.creationTimestamp`) the DaemonSet controls, among `pods` (scheduler spec 5.1,
/// upstream's cluster state keeps exactly that pod per DaemonSet). Pass the result to
/// [`daemonset_from_k8s_with_pod`]; `None` means the DaemonSet's own template is used.
///
/// A pod is controlled by the DaemonSet when it is in the DaemonSet's namespace and its
/// controller owner reference names it: by UID when the DaemonSet has one (upstream's
/// `IsControlledBy`), else (offline manifests often carry no UIDs) by kind `DaemonSet` and
/// name. Among pods created at the same time the first in `pods` wins; a pod without a
/// creation time is older than any pod with one.
pub fn newest_daemonset_pod<'a>(
    ds: &apps::DaemonSet,
    pods: impl IntoIterator<Item = &'a core::Pod>,
) -> Option<&'a core::Pod> {
    let namespace = namespace_of(&ds.metadata);
    let name = non_empty(ds.metadata.name.as_ref())?;
    let uid = non_empty(ds.metadata.uid.as_ref());
    let controlled = |p: &core::Pod| {
        namespace_of(&p.metadata) == namespace
            && p.metadata
                .owner_references
                .iter()
                .flatten()
                .find(|o| o.controller == Some(true))
                .is_some_and(|o| match uid {
                    Some(uid) => o.uid == uid,
                    None => o.kind == "DaemonSet" && o.name == name,
                })
    };
    let mut newest: Option<&core::Pod> = None;
    for p in pods {
        if !controlled(p) {
            continue;
        }
        let created = time(p.metadata.creation_timestamp.as_ref());
        if newest.is_none_or(|n| created > time(n.metadata.creation_timestamp.as_ref())) {
            newest = Some(p);
        }
    }
    newest
}

/// Converts a DaemonSet, using `existing` (one of its pods from the cluster) as its pod when
/// given, else a pod synthesised from the template (see [`daemonset_from_k8s`]).
///
/// Either way the template's *required* node affinity replaces the pod's: the DaemonSet
/// controller pins each of its pods to one node with a `matchFields` term, which says nothing
/// about where the DaemonSet can run (and which the scheduler rejects).
pub fn daemonset_from_k8s_with_pod(
    ds: &apps::DaemonSet,
    existing: Option<&core::Pod>,
) -> Result<model::DaemonSet, ConvertError> {
    let meta = &ds.metadata;
    let namespace = namespace_of(meta);
    let name = non_empty(meta.name.as_ref()).unwrap_or("");
    let ctx = Ctx {
        kind: "DaemonSet",
        namespace: Some(namespace),
        name,
    };
    if name.is_empty() {
        return Err(ctx.missing("metadata.name"));
    }
    let template = MaybeField::<apps::DaemonSetSpec>::field(&ds.spec).map(|s| &s.template);
    let template_spec = template.and_then(|t| t.spec.as_ref());
    let template_required = template_spec
        .and_then(|s| s.affinity.as_ref())
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|a| {
            a.required_during_scheduling_ignored_during_execution
                .clone()
        });

    let (mut pod, prefix) = match existing {
        Some(p) => (p.clone(), None),
        None => {
            let template_meta = template.and_then(|t| t.metadata.as_ref());
            let pod_meta = meta::ObjectMeta {
                namespace: Some(namespace.to_string()),
                name: Some(name.to_string()),
                labels: template_meta.and_then(|m| m.labels.clone()),
                annotations: template_meta.and_then(|m| m.annotations.clone()),
                owner_references: Some(vec![meta::OwnerReference {
                    api_version: "apps/v1".to_string(),
                    kind: "DaemonSet".to_string(),
                    name: name.to_string(),
                    uid: meta.uid.clone().unwrap_or_default(),
                    controller: Some(true),
                    ..Default::default()
                }]),
                ..Default::default()
            };
            let pod = core::Pod {
                metadata: pod_meta,
                spec: Some(template_spec.cloned().unwrap_or_default()),
                ..Default::default()
            };
            (pod, Some("spec.template."))
        }
    };
    // The template's required node affinity replaces the pod's.
    let spec = pod.spec.get_or_insert_with(Default::default);
    match template_required {
        Some(required) => {
            spec.affinity
                .get_or_insert_with(Default::default)
                .node_affinity
                .get_or_insert_with(Default::default)
                .required_during_scheduling_ignored_during_execution = Some(required);
        }
        None => {
            if let Some(a) = spec
                .affinity
                .as_mut()
                .and_then(|a| a.node_affinity.as_mut())
            {
                a.required_during_scheduling_ignored_during_execution = None;
            }
        }
    }

    let pod = pod_from_k8s(&pod).map_err(|e| match prefix {
        // Report errors against the DaemonSet and its template's fields.
        Some(prefix) => reattribute(e, &ctx.object(), prefix),
        None => e,
    })?;
    Ok(model::DaemonSet {
        namespace: namespace.to_string(),
        name: name.to_string(),
        pod,
    })
}

fn reattribute(e: ConvertError, object: &str, prefix: &str) -> ConvertError {
    let fix = |field: String| format!("{prefix}{field}");
    match e {
        ConvertError::Missing { field, .. } => ConvertError::Missing {
            object: object.to_string(),
            field: fix(field),
        },
        ConvertError::Invalid {
            field,
            value,
            reason,
            ..
        } => ConvertError::Invalid {
            object: object.to_string(),
            field: fix(field),
            value,
            reason,
        },
        ConvertError::Quantity {
            field,
            container,
            resource,
            source,
            ..
        } => ConvertError::Quantity {
            object: object.to_string(),
            field: fix(field),
            container,
            resource,
            source,
        },
        ConvertError::MatchFields { field, key, .. } => ConvertError::MatchFields {
            object: object.to_string(),
            field: fix(field),
            key,
        },
    }
}

// ---------------------------------------------------------------------------------------------
// PodDisruptionBudgets
// ---------------------------------------------------------------------------------------------

/// Converts a `policy/v1` PodDisruptionBudget. `minAvailable` / `maxUnavailable` strings must
/// be percentages (`"50%"`); `status.disruptionsAllowed` is 0 without a status.
pub fn pdb_from_k8s(
    pdb: &policy::PodDisruptionBudget,
) -> Result<model::PodDisruptionBudget, ConvertError> {
    let meta = &pdb.metadata;
    let namespace = namespace_of(meta);
    let name = non_empty(meta.name.as_ref()).unwrap_or("");
    let ctx = Ctx {
        kind: "PodDisruptionBudget",
        namespace: Some(namespace),
        name,
    };
    if name.is_empty() {
        return Err(ctx.missing("metadata.name"));
    }
    let spec = pdb.spec.as_ref();
    let int_or_percent = |v: Option<&IntOrString>, field: &str| match v {
        None => Ok(None),
        Some(IntOrString::Int(n)) => Ok(Some(IntOrPercent::Int(*n))),
        Some(IntOrString::String(s)) => IntOrPercent::parse_percent(s)
            .map(Some)
            .ok_or_else(|| ctx.invalid(field, s, "expected an integer or a percentage")),
    };
    Ok(model::PodDisruptionBudget {
        namespace: namespace.to_string(),
        name: name.to_string(),
        selector: spec
            .and_then(|s| s.selector.as_ref())
            .map(|s| label_selector(&ctx, s, "spec.selector"))
            .transpose()?,
        min_available: int_or_percent(
            spec.and_then(|s| s.min_available.as_ref()),
            "spec.minAvailable",
        )?,
        max_unavailable: int_or_percent(
            spec.and_then(|s| s.max_unavailable.as_ref()),
            "spec.maxUnavailable",
        )?,
        disruptions_allowed: pdb
            .status
            .as_ref()
            .and_then(|s| MaybeField::<i32>::field(&s.disruptions_allowed).copied())
            .unwrap_or(0),
        unhealthy_pod_eviction_policy_always_allow: spec
            .and_then(|s| s.unhealthy_pod_eviction_policy.as_deref())
            == Some("AlwaysAllow"),
    })
}

#[cfg(test)]
mod tests;

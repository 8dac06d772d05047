//! Workloads into pending pods: only the replicas that have no pod in the input (the rule of
//! the module documentation).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Pod as K8sPod, PodSpec, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use crate::convert::pod_from_k8s;

use super::{Located, PodSource, SourcedPod, Workload, WorkloadSource, WorldError};

/// The most pods one workload may expand into.
pub const MAX_REPLICAS: i32 = 1_000_000;

/// The label the Deployment controller puts on a ReplicaSet's pods; the ReplicaSet is named
/// `<deployment>-<hash>`.
const POD_TEMPLATE_HASH: &str = "pod-template-hash";

fn namespace_of(meta: &ObjectMeta) -> &str {
    meta.namespace
        .as_deref()
        .filter(|n| !n.is_empty())
        .unwrap_or("default")
}

/// An owner as the input's ownerReferences name it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct OwnerKey<'a> {
    namespace: &'a str,
    kind: &'a str,
    name: &'a str,
}

/// Whether an ownerReference's uid agrees with the owner's (either may be absent in
/// hand-written manifests).
fn same_uid(reference: &OwnerReference, owner: &ObjectMeta) -> bool {
    let uid = owner.uid.as_deref().unwrap_or("");
    reference.uid.is_empty() || uid.is_empty() || reference.uid == uid
}

/// The input pods by the owners their ownerReferences name (finished pods left out).
struct Owned<'a> {
    pods: BTreeMap<OwnerKey<'a>, Vec<(&'a OwnerReference, &'a K8sPod)>>,
}

/// Whether a pod counts against its owner's replicas: not finished, not being deleted.
fn is_active(pod: &K8sPod) -> bool {
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    !matches!(phase, Some("Succeeded" | "Failed")) && pod.metadata.deletion_timestamp.is_none()
}

impl<'a> Owned<'a> {
    fn new(pods: &'a [Located<K8sPod>]) -> Self {
        let mut out: BTreeMap<OwnerKey<'a>, Vec<_>> = BTreeMap::new();
        for p in pods {
            let meta = &p.object.metadata;
            for r in meta.owner_references.iter().flatten() {
                out.entry(OwnerKey {
                    namespace: namespace_of(meta),
                    kind: &r.kind,
                    name: &r.name,
                })
                .or_default()
                .push((r, &p.object));
            }
        }
        Owned { pods: out }
    }

    /// The active pods owned by the `kind` object `owner`.
    fn active(&self, kind: &str, owner: &ObjectMeta) -> Vec<&'a K8sPod> {
        let key = OwnerKey {
            namespace: namespace_of(owner),
            kind,
            name: owner.name.as_deref().unwrap_or(""),
        };
        self.pods
            .get(&key)
            .into_iter()
            .flatten()
            .filter(|(r, p)| same_uid(r, owner) && is_active(p))
            .map(|(_, p)| *p)
            .collect()
    }

    /// The active pods of a Deployment whose ReplicaSets are not in the input: pods owned by a
    /// ReplicaSet named `<deployment>-<their pod-template-hash>`.
    fn active_of_missing_replicasets(&self, deployment: &ObjectMeta) -> usize {
        let namespace = namespace_of(deployment);
        let name = deployment.name.as_deref().unwrap_or("");
        let prefix = format!("{name}-");
        let start = OwnerKey {
            namespace,
            kind: "ReplicaSet",
            name: &prefix,
        };
        self.pods
            .range(start..)
            .take_while(|(k, _)| {
                k.namespace == namespace && k.kind == "ReplicaSet" && k.name.starts_with(&prefix)
            })
            .flat_map(|(k, pods)| pods.iter().map(move |(_, p)| (k.name, *p)))
            .filter(|(rs, p)| {
                is_active(p)
                    && p.metadata
                        .labels
                        .as_ref()
                        .and_then(|l| l.get(POD_TEMPLATE_HASH))
                        .is_some_and(|h| rs.strip_prefix(&prefix) == Some(h.as_str()))
            })
            .count()
    }
}

/// What a workload asks for.
struct Plan<'w> {
    meta: &'w ObjectMeta,
    template: &'w PodTemplateSpec,
    spec: &'w PodSpec,
    /// The kind and apiVersion the generated pods' ownerReference names.
    owner_kind: &'static str,
    owner_api_version: &'static str,
    /// The names (`<name>-<i>`) to create.
    indices: Vec<i32>,
}

/// The pending pods of the workloads: for each, the replicas no pod of `pods` stands for.
pub(super) fn expand(
    workloads: &[Located<Workload>],
    pods: &[Located<K8sPod>],
) -> Result<Vec<SourcedPod>, WorldError> {
    let owned = Owned::new(pods);
    // The Deployments the input's ReplicaSets name as owners: (namespace, name) -> references.
    let mut replicasets_of: BTreeMap<(&str, &str), Vec<&OwnerReference>> = BTreeMap::new();
    for w in workloads {
        if let Workload::ReplicaSet(rs) = &w.object {
            for r in rs.metadata.owner_references.iter().flatten() {
                if r.kind == "Deployment" {
                    replicasets_of
                        .entry((namespace_of(&rs.metadata), r.name.as_str()))
                        .or_default()
                        .push(r);
                }
            }
        }
    }
    let owns_replicaset = |d: &ObjectMeta| {
        let key = (namespace_of(d), d.name.as_deref().unwrap_or(""));
        replicasets_of
            .get(&key)
            .is_some_and(|refs| refs.iter().any(|r| same_uid(r, d)))
    };

    let mut out = Vec::new();
    for w in workloads {
        let Some(plan) = plan(w, &owned, &owns_replicaset)? else {
            continue;
        };
        let source = Arc::new(PodSource {
            origin: w.origin.clone(),
            object: w.name.clone(),
            workload: Some(WorkloadSource {
                name: plan.meta.name.clone().unwrap_or_default(),
                labels: template_labels(&plan),
            }),
        });
        for k in generate(&plan) {
            let pod = pod_from_k8s(&k).map_err(|e| WorldError::convert(w, "spec.template.", &e))?;
            out.push(SourcedPod {
                pod,
                source: source.clone(),
            });
        }
    }
    Ok(out)
}

/// The pod-template labels, then the workload's own.
fn template_labels(plan: &Plan<'_>) -> BTreeMap<String, String> {
    let mut out = plan
        .template
        .metadata
        .as_ref()
        .and_then(|m| m.labels.clone())
        .unwrap_or_default();
    out.extend(plan.meta.labels.clone().unwrap_or_default());
    out
}

/// The pods a workload still needs, or `None` for a Deployment whose ReplicaSet is in the input.
fn plan<'w>(
    w: &'w Located<Workload>,
    owned: &Owned<'_>,
    owns_replicaset: &dyn Fn(&ObjectMeta) -> bool,
) -> Result<Option<Plan<'w>>, WorldError> {
    let missing = |field: &str| {
        WorldError::invalid(w.origin.clone(), w.name.clone(), field, "Required value")
    };
    let check = |count: i32, field: &str| {
        if (0..=MAX_REPLICAS).contains(&count) {
            Ok(count)
        } else {
            Err(WorldError::invalid(
                w.origin.clone(),
                w.name.clone(),
                field,
                format!("Invalid value: {count}: must be between 0 and {MAX_REPLICAS}"),
            ))
        }
    };
    // (meta, template, kind of the generated pods' owner, desired count, active owned pods,
    // StatefulSet ordinals).
    let (meta, template, owner_kind, desired, active, stateful) = match &w.object {
        Workload::Deployment(d) => {
            let spec = d.spec.as_ref().ok_or_else(|| missing("spec"))?;
            let desired = check(spec.replicas.unwrap_or(1), "spec.replicas")?;
            if owns_replicaset(&d.metadata) {
                return Ok(None);
            }
            let active = owned.active("Deployment", &d.metadata).len()
                + owned.active_of_missing_replicasets(&d.metadata);
            (
                &d.metadata,
                Some(&spec.template),
                "ReplicaSet",
                desired,
                active,
                false,
            )
        }
        Workload::ReplicaSet(r) => {
            let spec = r.spec.as_ref().ok_or_else(|| missing("spec"))?;
            let desired = check(spec.replicas.unwrap_or(1), "spec.replicas")?;
            let active = owned.active("ReplicaSet", &r.metadata).len();
            (
                &r.metadata,
                spec.template.as_ref(),
                "ReplicaSet",
                desired,
                active,
                false,
            )
        }
        Workload::StatefulSet(s) => {
            let spec = s.spec.as_ref().ok_or_else(|| missing("spec"))?;
            let desired = check(spec.replicas.unwrap_or(1), "spec.replicas")?;
            (
                &s.metadata,
                Some(&spec.template),
                "StatefulSet",
                desired,
                0,
                true,
            )
        }
        Workload::Job(j) => {
            let spec = j.spec.as_ref().ok_or_else(|| missing("spec"))?;
            let parallelism = check(spec.parallelism.unwrap_or(1), "spec.parallelism")?;
            let status = j.status.as_ref();
            let finished = status.and_then(|s| s.conditions.as_ref()).is_some_and(|c| {
                c.iter().any(|c| {
                    matches!(c.type_.as_str(), "Complete" | "Failed") && c.status == "True"
                })
            });
            let owned_pods = owned.active("Job", &j.metadata);
            let succeeded = status.and_then(|s| s.succeeded).unwrap_or(0);
            let desired = if spec.suspend == Some(true) || finished {
                0
            } else {
                match spec.completions {
                    Some(c) => parallelism.min(c.saturating_sub(succeeded).max(0)),
                    None => parallelism,
                }
            };
            (
                &j.metadata,
                Some(&spec.template),
                "Job",
                desired,
                owned_pods.len(),
                false,
            )
        }
    };
    let name = meta
        .name
        .as_deref()
        .filter(|n| !n.is_empty())
        .ok_or_else(|| missing("metadata.name"))?;
    let template = template.ok_or_else(|| missing("spec.template"))?;
    let spec = template
        .spec
        .as_ref()
        .ok_or_else(|| missing("spec.template.spec"))?;
    let owner_api_version = if owner_kind == "Job" {
        "batch/v1"
    } else {
        "apps/v1"
    };
    let indices = if stateful {
        // The ordinals without an active pod.
        let present: BTreeSet<String> = owned
            .active("StatefulSet", meta)
            .iter()
            .filter_map(|p| p.metadata.name.clone())
            .collect();
        (0..desired)
            .filter(|i| !present.contains(&format!("{name}-{i}")))
            .collect()
    } else {
        // The first free `<name>-<i>`: pods the workload owns may already use the scheme.
        let taken: BTreeSet<String> = owned
            .active(owner_kind_of(&w.object), meta)
            .iter()
            .filter_map(|p| p.metadata.name.clone())
            .collect();
        let wanted = usize::try_from(desired).unwrap_or(0).saturating_sub(active);
        (0..)
            .filter(|i| !taken.contains(&format!("{name}-{i}")))
            .take(wanted)
            .collect()
    };
    Ok(Some(Plan {
        meta,
        template,
        spec,
        owner_kind,
        owner_api_version,
        indices,
    }))
}

/// The kind whose ownerReferences point at the workload itself.
fn owner_kind_of(w: &Workload) -> &'static str {
    match w {
        Workload::Deployment(_) => "Deployment",
        Workload::ReplicaSet(_) => "ReplicaSet",
        Workload::StatefulSet(_) => "StatefulSet",
        Workload::Job(_) => "Job",
    }
}

/// The synthetic UID of a workload's `i`-th replica: `<namespace>/<name>-<i>`, the index
/// zero-padded to 7 digits so that equal replicas queue by index (`web-2` before `web-10`).
/// Real replicas queue by creation time (one-second resolution), then by their random UIDs;
/// the index stands in for the order a controller creates them in.
fn replica_uid(namespace: &str, name: &str, i: i32) -> String {
    format!("{namespace}/{name}-{i:07}")
}

/// The pods `<name>-<i>` of a plan, as the workload's controller would create them.
fn generate(plan: &Plan<'_>) -> Vec<K8sPod> {
    let meta = plan.meta;
    let name = meta.name.as_deref().unwrap_or("");
    let namespace = namespace_of(meta).to_string();
    let tmeta = plan.template.metadata.clone().unwrap_or_default();
    plan.indices
        .iter()
        .map(|i| {
            let pod_name = format!("{name}-{i}");
            K8sPod {
                metadata: ObjectMeta {
                    uid: Some(replica_uid(&namespace, name, *i)),
                    name: Some(pod_name),
                    namespace: Some(namespace.clone()),
                    labels: tmeta.labels.clone(),
                    annotations: tmeta.annotations.clone(),
                    creation_timestamp: meta.creation_timestamp.clone(),
                    owner_references: Some(vec![OwnerReference {
                        api_version: plan.owner_api_version.to_string(),
                        kind: plan.owner_kind.to_string(),
                        name: name.to_string(),
                        uid: meta.uid.clone().unwrap_or_default(),
                        controller: Some(true),
                        block_owner_deletion: Some(true),
                    }]),
                    ..ObjectMeta::default()
                },
                spec: Some(plan.spec.clone()),
                status: None,
            }
        })
        .collect()
}

//! A pod's effective resource requests, as Kubernetes computes them for scheduling
//! (`PodRequests` of `k8s.io/component-helpers/resource`, scheduler spec 1.6).

use k8s_openapi::api::core::v1 as core;

use super::{ConvertError, Ctx, namespace_of, non_empty};
use crate::resources::{ResourceList, names};

/// A pod's effective resource requests (without the scheduler's implicit `pods: 1`):
///
/// 1. each container's requests, with its limits copied into the requests it does not set (the
///    API server's defaulting, so pods read from manifests count like admitted ones);
/// 2. summed over the regular containers and the restartable init containers (sidecars,
///    `restartPolicy: Always`), which keep running;
/// 3. raised, per resource, to the peak of the init phase: while init container *i* runs, the
///    sidecars started before it run too, so regular init container *i* needs its own requests
///    plus those sidecars', and sidecar *i* needs all sidecars up to and including itself;
/// 4. with in-place resize, each of the sums above is computed three times, from the spec, from
///    the containers' allocated resources and from their actuated resources
///    (`status.containerStatuses[].allocatedResources` / `.resources.requests`), and the largest
///    is taken per resource; if the resize is infeasible (condition `PodResizePending` with
///    reason `Infeasible`) the spec is left out;
/// 5. pod-level `spec.resources.requests`, when set, replace the result for the resources they
///    support (`cpu`, `memory`, `hugepages-*`); pod-level limits default missing pod-level
///    requests as the API server does (from the containers' sum for `cpu` and `memory` when any
///    container requests them, else from the limit);
/// 6. plus `spec.overhead` (RuntimeClass overhead).
///
/// Errors name the pod, the container and the resource whose quantity does not parse.
pub fn effective_requests(pod: &core::Pod) -> Result<ResourceList, ConvertError> {
    let meta = &pod.metadata;
    let ctx = Ctx {
        kind: "Pod",
        namespace: Some(namespace_of(meta)),
        name: non_empty(meta.name.as_ref()).unwrap_or(""),
    };
    let empty = core::PodSpec::default();
    pod_requests(
        &ctx,
        pod.spec.as_ref().unwrap_or(&empty),
        pod.status.as_ref(),
    )
}

/// What a container is, for the aggregation.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// A regular container (`spec.containers`).
    Regular,
    /// A regular init container: runs alone (with the sidecars started before it).
    Init,
    /// A restartable init container (`restartPolicy: Always`): keeps running.
    Sidecar,
}

/// One container's contribution, from the three sources of step 4.
struct ContainerRequests {
    /// Spec requests with limits defaulted in.
    spec: ResourceList,
    /// Allocated resources (falling back as Kubernetes does).
    allocated: ResourceList,
    /// Actuated resources (falling back as Kubernetes does).
    actuated: ResourceList,
    /// What the container is.
    kind: Kind,
}

/// Whether pod-level resources may set `name`.
fn pod_level_supported(name: &str) -> bool {
    name == names::CPU || name == names::MEMORY || name.starts_with("hugepages-")
}

/// Whether `name` may be overcommitted (native and not huge pages); among the pod-level
/// resources that is `cpu` and `memory`.
fn overcommittable(name: &str) -> bool {
    name == names::CPU || name == names::MEMORY
}

pub(crate) fn pod_requests(
    ctx: &Ctx<'_>,
    spec: &core::PodSpec,
    status: Option<&core::PodStatus>,
) -> Result<ResourceList, ConvertError> {
    let infeasible = status
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "PodResizePending"))
        .is_some_and(|c| c.reason.as_deref() == Some("Infeasible"));

    let mut containers = Vec::new();
    for (i, c) in spec.containers.iter().enumerate() {
        let path = format!("spec.containers[{i}]");
        containers.push(container_requests(
            ctx,
            c,
            &path,
            status,
            infeasible,
            Kind::Regular,
        )?);
    }
    for (i, c) in spec.init_containers.iter().flatten().enumerate() {
        let kind = if c.restart_policy.as_deref() == Some("Always") {
            Kind::Sidecar
        } else {
            Kind::Init
        };
        let path = format!("spec.initContainers[{i}]");
        containers.push(container_requests(ctx, c, &path, status, infeasible, kind)?);
    }
    let spec_sum = aggregate(&containers, |c| &c.spec);
    let allocated_sum = aggregate(&containers, |c| &c.allocated);
    let actuated_sum = aggregate(&containers, |c| &c.actuated);
    let mut requests = if infeasible {
        ResourceList::max_per_key([&actuated_sum, &allocated_sum])
    } else {
        ResourceList::max_per_key([&spec_sum, &actuated_sum, &allocated_sum])
    };

    // Pod-level resources, after the API server's defaulting of pod-level requests.
    let pod_resources = spec.resources.as_ref();
    let mut pod_level = ctx.resource_list(
        pod_resources.and_then(|r| r.requests.as_ref()),
        "spec.resources.requests",
        None,
    )?;
    let pod_limits = ctx.resource_list(
        pod_resources.and_then(|r| r.limits.as_ref()),
        "spec.resources.limits",
        None,
    )?;
    if !pod_limits.is_empty() {
        for (name, q) in spec_sum.iter() {
            if !pod_level.contains_key(name) && overcommittable(name) {
                pod_level.insert(name, q);
            }
        }
        for (name, q) in pod_limits.iter() {
            if !pod_level.contains_key(name) && pod_level_supported(name) {
                pod_level.insert(name, q);
            }
        }
    }
    for (name, q) in pod_level.iter() {
        if pod_level_supported(name) {
            requests.insert(name, q);
        }
    }

    let overhead = ctx.resource_list(spec.overhead.as_ref(), "spec.overhead", None)?;
    requests.add_assign(&overhead);
    Ok(requests)
}

/// A pod's effective resource limits, as Kubernetes computes them (`PodLimits` of
/// `k8s.io/component-helpers/resource`): the limits of the regular containers and sidecars summed
/// and raised to the init phase's peak (as [`effective_requests`] does for requests, without
/// defaulting from requests or reading the status), the pod-level `spec.resources.limits` of the
/// supported resources replacing the result, then `spec.overhead` added to the limits that are
/// set. Errors name the pod, the container and the resource whose quantity does not parse.
pub(crate) fn pod_limits(
    ctx: &Ctx<'_>,
    spec: &core::PodSpec,
) -> Result<ResourceList, ConvertError> {
    let mut containers = Vec::new();
    let regular = spec
        .containers
        .iter()
        .map(|c| (c, Kind::Regular, "containers"));
    let init = spec.init_containers.iter().flatten().map(|c| {
        let kind = if c.restart_policy.as_deref() == Some("Always") {
            Kind::Sidecar
        } else {
            Kind::Init
        };
        (c, kind, "initContainers")
    });
    let mut index: std::collections::BTreeMap<&str, usize> = std::collections::BTreeMap::new();
    for (c, kind, field) in regular.chain(init) {
        let i = index.entry(field).or_default();
        let path = format!("spec.{field}[{i}].resources.limits");
        *i += 1;
        let limits = ctx.resource_list(
            c.resources.as_ref().and_then(|r| r.limits.as_ref()),
            &path,
            Some(c.name.as_str()),
        )?;
        containers.push(ContainerRequests {
            spec: limits,
            allocated: ResourceList::new(),
            actuated: ResourceList::new(),
            kind,
        });
    }
    let mut limits = aggregate(&containers, |c| &c.spec);
    let pod_level = ctx.resource_list(
        spec.resources.as_ref().and_then(|r| r.limits.as_ref()),
        "spec.resources.limits",
        None,
    )?;
    for (name, q) in pod_level.iter() {
        if pod_level_supported(name) {
            limits.insert(name, q);
        }
    }
    let overhead = ctx.resource_list(spec.overhead.as_ref(), "spec.overhead", None)?;
    for (name, q) in overhead.iter() {
        if let Some(set) = limits.get(name) {
            limits.insert(name, set.saturating_add(q));
        }
    }
    Ok(limits)
}

/// Steps 2 and 3 over the lists `pick` selects; `containers` holds the regular containers,
/// then the init containers in order.
fn aggregate(
    containers: &[ContainerRequests],
    pick: impl Fn(&ContainerRequests) -> &ResourceList,
) -> ResourceList {
    let mut total = ResourceList::new();
    let mut sidecars = ResourceList::new();
    let mut init_peak = ResourceList::new();
    for c in containers {
        let r = pick(c);
        match c.kind {
            Kind::Regular => total.add_assign(r),
            Kind::Sidecar => {
                total.add_assign(r);
                sidecars.add_assign(r);
                init_peak = ResourceList::max_per_key([&init_peak, &sidecars]);
            }
            Kind::Init => {
                let running = r.add(&sidecars);
                init_peak = ResourceList::max_per_key([&init_peak, &running]);
            }
        }
    }
    ResourceList::max_per_key([&total, &init_peak])
}

/// The status of the container named `name` (searched among the regular containers' statuses,
/// then the init containers'), with its path.
fn container_status<'a>(
    status: Option<&'a core::PodStatus>,
    name: &str,
) -> Option<(&'a core::ContainerStatus, String)> {
    let status = status?;
    let find = |list: Option<&'a Vec<core::ContainerStatus>>, field: &str| {
        list.into_iter()
            .flatten()
            .enumerate()
            .find(|(_, cs)| cs.name == name)
            .map(|(i, cs)| (cs, format!("status.{field}[{i}]")))
    };
    find(status.container_statuses.as_ref(), "containerStatuses").or_else(|| {
        find(
            status.init_container_statuses.as_ref(),
            "initContainerStatuses",
        )
    })
}

fn container_requests(
    ctx: &Ctx<'_>,
    c: &core::Container,
    path: &str,
    status: Option<&core::PodStatus>,
    infeasible: bool,
    kind: Kind,
) -> Result<ContainerRequests, ConvertError> {
    let name = Some(c.name.as_str());
    let resources = c.resources.as_ref();
    let mut spec = ctx.resource_list(
        resources.and_then(|r| r.requests.as_ref()),
        &format!("{path}.resources.requests"),
        name,
    )?;
    let limits = ctx.resource_list(
        resources.and_then(|r| r.limits.as_ref()),
        &format!("{path}.resources.limits"),
        name,
    )?;
    for (resource, q) in limits.iter() {
        if !spec.contains_key(resource) {
            spec.insert(resource, q);
        }
    }

    let (allocated, actuated) = match container_status(status, &c.name) {
        None if infeasible => (ResourceList::new(), ResourceList::new()),
        None => (spec.clone(), spec.clone()),
        Some((cs, cs_path)) => {
            let allocated = cs
                .allocated_resources
                .as_ref()
                .map(|a| ctx.resource_list(Some(a), &format!("{cs_path}.allocatedResources"), name))
                .transpose()?;
            let actual = cs
                .resources
                .as_ref()
                .and_then(|r| r.requests.as_ref())
                .map(|a| ctx.resource_list(Some(a), &format!("{cs_path}.resources.requests"), name))
                .transpose()?;
            let fallback = if infeasible {
                ResourceList::new()
            } else {
                spec.clone()
            };
            let actuated = actual
                .or_else(|| allocated.clone())
                .unwrap_or_else(|| fallback.clone());
            (allocated.unwrap_or(fallback), actuated)
        }
    };
    Ok(ContainerRequests {
        spec,
        allocated,
        actuated,
        kind,
    })
}

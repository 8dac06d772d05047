//! Why pods were left out, in words an operator can act on: `--explain` solves each NodePool
//! alone for the pod and, when no instance type fits, names the requirement or the resource
//! that ruled every one out; [`tidy_reason`] drops the scheduler's empty details.

use std::collections::BTreeMap;
use std::sync::Arc;

use karpenter_core::model::{DaemonSet, InstanceType, Pod};
use karpenter_core::requirements::Requirements;
use karpenter_core::resources::ResourceList;
use karpenter_core::scheduling::{NodePoolInput, SchedulerOptions, SchedulingInput, solve};
use karpenter_core::taints;

use crate::error::PlanError;
use crate::output::PoolExplanation;
use karpenter_core::scheduling::bound::{
    pod_terms, template_requirements, with_prefer_no_schedule,
};

/// A scheduler reason without its empty parts (`daemonset overhead={}`), and with the absence
/// of any usable NodePool said plainly.
pub fn tidy_reason(reason: &str, node_pools: usize) -> String {
    if node_pools == 0 {
        return "no usable NodePool in the input (static NodePools and NodePools being deleted \
                do not provision), and no existing node could take the pod"
            .to_string();
    }
    reason.replace(", daemonset overhead={}", "")
}

/// `--explain`: for a left-out pod, every NodePool alone and why it could not take the pod.
/// `cache` keeps the answer per (pod signature, NodePool), so replicas are explained once.
pub fn explain(
    pod: &Pod,
    overall: &str,
    input: &SchedulingInput,
    options: &SchedulerOptions,
    cache: &mut BTreeMap<(String, usize), String>,
) -> Result<Vec<PoolExplanation>, PlanError> {
    let mut order: Vec<usize> = (0..input.node_pools.len()).collect();
    order.sort_by(|&a, &b| {
        let (pa, pb) = (&input.node_pools[a], &input.node_pools[b]);
        pb.weight
            .cmp(&pa.weight)
            .then_with(|| pa.name.cmp(&pb.name))
    });
    let mut anonymous = pod.clone();
    anonymous.name = String::new();
    anonymous.uid = String::new();
    let signature =
        serde_json::to_string(&anonymous).map_err(|e| PlanError::Internal(e.to_string()))?;
    let mut out = Vec::new();
    for i in order {
        let np = &input.node_pools[i];
        let key = (signature.clone(), i);
        let reason = match cache.get(&key) {
            Some(r) => r.clone(),
            None => {
                let alone = SchedulingInput::new()
                    .with_node_pools(vec![np.clone()])
                    .with_daemonsets(input.daemonsets.clone())
                    .with_pods(vec![pod.clone()])
                    .with_namespace_labels(input.namespace_labels.clone())
                    .with_volumes(input.volumes.clone());
                let r = solve(&alone, options);
                let reason = match r.pod_errors.get(&pod.key()) {
                    Some(e) => {
                        let scheduler = tidy_reason(&e.message, 1);
                        let filtered = scheduler.contains("no instance type")
                            || scheduler.contains("filtered out all available instance types");
                        match ruled_out_by(pod, np, &input.daemonsets) {
                            Some(why) if filtered => why,
                            _ => scheduler,
                        }
                    }
                    None => format!(
                        "the pod alone fits a new node of this NodePool; in the full plan: {}",
                        tidy_reason(overall, input.node_pools.len())
                    ),
                };
                cache.insert(key, reason.clone());
                reason
            }
        };
        out.push(PoolExplanation {
            node_pool: np.name.clone(),
            reason,
        });
    }
    Ok(out)
}

/// Whether an instance type may launch under `reqs`: its labels and one of its available
/// offerings (zone, capacity type) agree with them.
fn launchable(it: &InstanceType, reqs: &Requirements) -> bool {
    it.requirements().intersects(reqs).is_ok()
        && it
            .available_offerings()
            .any(|o| o.requirements().intersects(reqs).is_ok())
}

fn one(r: &karpenter_core::requirements::Requirement) -> Requirements {
    let mut reqs = Requirements::new();
    reqs.add(r.clone());
    reqs
}

/// The requirement or resource that rules out every instance type of `np` for `pod`, if one
/// does on its own: a requirement of the NodePool, then one of the pod, then a resource the
/// pod (with the DaemonSets that run on every node of the pool) requests more of than any
/// remaining instance type has allocatable.
fn ruled_out_by(pod: &Pod, np: &NodePoolInput, daemonsets: &[DaemonSet]) -> Option<String> {
    let all = &np.instance_types;
    let count = all.len();
    if count == 0 {
        return Some("the NodePool has no instance types in the catalog".to_string());
    }
    let pool = template_requirements(np);
    for r in pool.iter() {
        if !all.iter().any(|it| launchable(it, &one(r))) {
            return Some(format!(
                "the NodePool's requirement {r} matches none of the catalog's {count} instance types"
            ));
        }
    }
    let of_pool: Vec<&Arc<InstanceType>> = all.iter().filter(|it| launchable(it, &pool)).collect();
    if of_pool.is_empty() {
        return Some(format!(
            "the NodePool's requirements together match none of the catalog's {count} instance types"
        ));
    }
    // The pod's node selector and required node affinity (any one term may hold).
    let terms = pod_terms(pod);
    let mut compatible: Vec<&Arc<InstanceType>> = Vec::new();
    let mut pod_rule = None;
    for term in &terms {
        let both = term.intersection(&pool);
        let fits: Vec<&Arc<InstanceType>> = of_pool
            .iter()
            .copied()
            .filter(|it| launchable(it, &both))
            .collect();
        if fits.is_empty() && pod_rule.is_none() {
            pod_rule = term
                .iter()
                .find(|r| !of_pool.iter().any(|it| launchable(it, &one(r))))
                .map(|r| {
                    format!(
                        "the pod's requirement {r} rules out all {} instance types of the NodePool",
                        of_pool.len()
                    )
                });
        }
        compatible.extend(fits);
    }
    if compatible.is_empty() {
        return Some(pod_rule.unwrap_or_else(|| {
            format!(
                "the pod's node selector and affinity together with the NodePool's requirements \
                 rule out all {} instance types of the NodePool",
                of_pool.len()
            )
        }));
    }
    // Resources: the pod's requests plus the DaemonSets sure to run on every node of the pool.
    let mut requests = pod.scheduling_requests();
    for d in daemonsets {
        let p = &d.pod;
        let everywhere = p.node_selector.is_empty()
            && p.node_affinity
                .as_ref()
                .is_none_or(|a| a.required.is_empty())
            && taints::tolerates_all(&with_prefer_no_schedule(&p.tolerations), &np.taints).is_ok();
        if everywhere {
            requests.add_assign(&p.scheduling_requests());
        }
    }
    for (name, wanted) in requests.iter() {
        let most = compatible
            .iter()
            .map(|it| it.allocatable().get_or_zero(name))
            .max()
            .unwrap_or_default();
        if wanted > most {
            return Some(format!(
                "resource {name}: the pod needs {wanted} (with DaemonSet overhead) but the largest \
                 allocatable {name} among the {} instance types that meet the requirements is {most}",
                compatible.len()
            ));
        }
    }
    if !compatible
        .iter()
        .any(|it| ResourceList::fits(&requests, it.allocatable()))
    {
        return Some(format!(
            "resources: no instance type that meets the requirements has room for all of \
             {requests} at once"
        ));
    }
    None
}

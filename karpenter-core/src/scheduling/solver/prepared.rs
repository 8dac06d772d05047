//! Preparing the cluster side of a solve once, and running solves on it.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use crate::hostports::HostPortUsage;
use crate::labels::{self};
use crate::model::{DaemonSet, InstanceType, Pod};
use crate::requirements::{Operator, Requirement, Requirements};
use crate::resources::{ResourceList, names};
use crate::taints::{self, TaintEffect};

use crate::scheduling::dense::ResourceIndex;
use crate::scheduling::topology::{DomainUniverse, TopologyBase, TopologyTemplate, UniversePool};
use crate::scheduling::volumes::NodeVolumes;
use crate::scheduling::{
    ExistingNodeRef, MinValuesPolicy, Results, SchedulerOptions, SchedulingInput,
};

use super::existing::{ExistingKey, ExistingMemo};
use super::typeset::{FitTable, TypeSet};
use super::{
    AllocGroup, DaemonGroup, Prepared, SolveRequest, Solver, Template, build_existing,
    daemon_compatible, has_usable_group,
};

impl<'a> Prepared<'a> {
    /// Prepares `nodes` (every existing node and in-flight NodeClaim, with their pods) and the
    /// NodePools and DaemonSets of `input`. `pods` are registered in the resource index:
    /// solves of pods with resources registered nowhere fall back to a one-off preparation.
    pub(crate) fn new(
        input: &'a SchedulingInput,
        nodes: Vec<ExistingNodeRef<'a>>,
        options: &'a SchedulerOptions,
        pods: &[&Pod],
    ) -> Prepared<'a> {
        Prepared::new_with_memo(input, nodes, options, pods, None)
    }

    /// [`Prepared::new`] reusing the existing nodes `memo` kept from the last preparation: per
    /// position in `nodes`, `keys` names the node (see [`ExistingKey`]; a node without a key is
    /// built afresh and not kept).
    pub(crate) fn new_with_memo(
        input: &'a SchedulingInput,
        nodes: Vec<ExistingNodeRef<'a>>,
        options: &'a SchedulerOptions,
        pods: &[&Pod],
        mut memo: Option<(&mut ExistingMemo, &[Option<ExistingKey>])>,
    ) -> Prepared<'a> {
        let policy = &options.label_policy;
        let mut index = ResourceIndex::default();
        for base in [names::CPU, names::MEMORY, names::PODS] {
            let mut l = ResourceList::new();
            l.insert(base, crate::resources::Quantity::ZERO);
            index.register(&l);
        }
        for p in pods {
            index.register(&p.requests);
        }
        for d in &input.daemonsets {
            index.register(&d.pod.requests);
        }
        for np in &input.node_pools {
            index.register(&np.limits);
            for it in &np.instance_types {
                index.register(it.capacity());
                index.register(it.allocatable());
                for o in &it.offerings {
                    if let Some(c) = &o.capacity_override {
                        index.register(c);
                    }
                }
            }
        }
        for n in &nodes {
            index.register(&n.node.allocatable);
            for p in n.pods {
                index.register(&p.requests);
            }
        }

        let tolerate_prefer_no_schedule = input.node_pools.iter().any(|np| {
            np.taints
                .iter()
                .any(|t| t.effect == TaintEffect::PreferNoSchedule)
        });

        let mut pools: Vec<&crate::scheduling::NodePoolInput> = input.node_pools.iter().collect();
        pools.sort_by(|a, b| b.weight.cmp(&a.weight).then_with(|| b.name.cmp(&a.name)));

        let daemons: Vec<&DaemonSet> = input
            .daemonsets
            .iter()
            .filter(|d| !(options.ignore_dra_requests && d.pod.has_resource_claims))
            .collect();

        let mut templates = Vec::new();
        let mut pool_nodes_of = Vec::new();
        let mut pool_reqs = Vec::new();
        for np in pools {
            let mut reqs = Requirements::from_node_selector_requirements(&np.requirements);
            // The topology domain universe sees the pool's requirements and its own template
            // labels only (spec 4.2), not the nodepool / node-class labels added below.
            let mut universe_reqs = reqs.clone();
            for (k, v) in &np.labels {
                universe_reqs.add(Requirement::new(k, Operator::In, [v.as_str()]));
            }
            let mut tlabels = np.labels.clone();
            tlabels.insert(labels::NODEPOOL.to_string(), np.name.clone());
            if let Some((k, v)) = &np.node_class_label {
                tlabels.insert(k.clone(), v.clone());
            }
            for (k, v) in &tlabels {
                reqs.add(Requirement::new(k, Operator::In, [v.as_str()]));
            }
            reqs.add(Requirement::new(labels::REGISTERED, Operator::In, ["true"]));
            reqs.add(Requirement::new(
                labels::INITIALIZED,
                Operator::In,
                ["true"],
            ));

            // Pre-filter (spec 3.1): requirements, an available compatible offering,
            // non-negative allocatable, minValues.
            let mut its: Vec<Arc<InstanceType>> = np
                .instance_types
                .iter()
                .filter(|it| {
                    it.requirements().intersects(&reqs).is_ok()
                        && has_usable_group(it, &reqs, policy)
                })
                .cloned()
                .collect();
            if reqs.has_min_values() {
                let ok = reqs
                    .satisfies_min_values(its.iter().map(|it| it.requirements()))
                    .is_ok();
                if !ok && options.min_values_policy == MinValuesPolicy::Strict {
                    its.clear();
                }
            }
            pool_reqs.push((universe_reqs, np.taints.clone(), np.instance_types.clone()));
            if its.is_empty() {
                continue;
            }

            // Daemon groups keyed by the set of compatible daemons.
            let mut group_index: BTreeMap<Vec<usize>, usize> = BTreeMap::new();
            let mut groups = Vec::new();
            let mut group_of = Vec::with_capacity(its.len());
            for it in &its {
                let set: Vec<usize> = daemons
                    .iter()
                    .enumerate()
                    .filter(|(_, d)| {
                        let mut tol = d.pod.tolerations.clone();
                        tol.push(taints::prefer_no_schedule_wildcard());
                        taints::tolerates_all(&tol, &np.taints).is_ok()
                            && daemon_compatible(&d.pod, &reqs, Some(it), Some(policy))
                    })
                    .map(|(i, _)| i)
                    .collect();
                let gi = *group_index.entry(set.clone()).or_insert_with(|| {
                    let mut overhead_list = ResourceList::new();
                    let mut host_ports = HostPortUsage::default();
                    for &i in &set {
                        overhead_list.add_assign(&daemons[i].pod.scheduling_requests());
                        host_ports.add(&daemons[i].pod.key(), &daemons[i].pod.host_ports);
                    }
                    groups.push(DaemonGroup {
                        overhead: index.dense(&overhead_list),
                        overhead_list,
                        host_ports,
                    });
                    groups.len() - 1
                });
                group_of.push(gi);
            }

            // Limits minus existing nodes of this pool (spec 3.10); a solve that leaves nodes
            // out adds theirs back.
            let mut limits = Vec::new();
            let mut nodes_limit = None;
            let pool_nodes: Vec<usize> = nodes
                .iter()
                .enumerate()
                .filter(|(_, n)| n.node.nodepool() == Some(np.name.as_str()))
                .map(|(i, _)| i)
                .collect();
            for (name, q) in np.limits.iter() {
                if name == names::NODES {
                    nodes_limit = Some(q.value() - pool_nodes.len() as i64);
                    continue;
                }
                let used: i64 = pool_nodes
                    .iter()
                    .map(|&i| nodes[i].node.capacity.get_or_zero(name).milli_value())
                    .sum();
                if let Some(i) = index.position(name) {
                    limits.push((i, q.milli_value() - used));
                }
            }
            let allocatable: Vec<_> = its.iter().map(|it| index.dense(it.allocatable())).collect();
            let fit = FitTable::new(&allocatable);
            let group_members = if groups.len() > 1 {
                (0..groups.len())
                    .map(|g| {
                        let mut members = TypeSet::empty(its.len());
                        for (i, &of) in group_of.iter().enumerate() {
                            if of == g {
                                members.insert(i as u32);
                            }
                        }
                        members
                    })
                    .collect()
            } else {
                Vec::new()
            };
            let alloc_groups: Vec<Vec<AllocGroup>> = its
                .iter()
                .map(|it| {
                    if !it.has_offering_overrides() {
                        return Vec::new();
                    }
                    it.allocatable_groups()
                        .into_iter()
                        .map(|g| AllocGroup {
                            allocatable: index.dense(&g.allocatable),
                            offerings: g.offerings,
                        })
                        .collect()
                })
                .collect();
            let has_overrides = alloc_groups.iter().any(|g| !g.is_empty());
            let capacity = its.iter().map(|it| index.dense(it.capacity())).collect();
            let offering_keys: BTreeSet<String> = its
                .iter()
                .flat_map(|it| it.offerings.iter())
                .flat_map(|o| o.requirements().keys().map(str::to_string))
                .collect();
            let mut offering_requirements: Vec<Requirements> = Vec::new();
            let mut offering_ids: rustc_hash::FxHashMap<&Requirements, u32> =
                rustc_hash::FxHashMap::default();
            let offerings = its
                .iter()
                .map(|it| {
                    it.available_offerings()
                        .map(|o| {
                            let r = o.requirements();
                            let id = *offering_ids.entry(r).or_insert_with(|| {
                                offering_requirements.push(r.clone());
                                offering_requirements.len() as u32 - 1
                            });
                            (o.price, id)
                        })
                        .collect()
                })
                .collect();
            let has_reserved = its
                .iter()
                .any(|it| it.offerings.iter().any(|o| o.is_reserved()));
            pool_nodes_of.push(pool_nodes);
            templates.push(Template {
                has_reserved,
                offering_keys: offering_keys.into_iter().collect(),
                offering_requirements,
                offerings,
                pool: np.name.clone(),
                requirements: reqs,
                labels: tlabels,
                taints: np.taints.clone(),
                startup_taints: np.startup_taints.clone(),
                instance_types: its,
                allocatable,
                alloc_groups,
                has_overrides,
                group_of,
                groups,
                group_members,
                fit,
                limits,
                nodes_limit,
                capacity,
            });
        }

        // Reservations: the minimum capacity seen per id across pools.
        let mut reservation_capacity: BTreeMap<String, i64> = BTreeMap::new();
        for t in &templates {
            for it in &t.instance_types {
                for o in it.offerings.iter().filter(|o| o.is_reserved()) {
                    if let Some(id) = o.reservation_id() {
                        let c = i64::from(o.reservation_capacity);
                        reservation_capacity
                            .entry(id.to_string())
                            .and_modify(|v| *v = (*v).min(c))
                            .or_insert(c);
                    }
                }
            }
        }

        // Existing nodes: not marked for deletion; initialized first, then by name.
        let mut order: Vec<usize> = (0..nodes.len())
            .filter(|&i| !nodes[i].node.marked_for_deletion)
            .collect();
        order.sort_by(|&a, &b| {
            let (a, b) = (nodes[a].node, nodes[b].node);
            b.initialized
                .cmp(&a.initialized)
                .then_with(|| a.name.cmp(&b.name))
        });
        let mut interner = crate::requirements::LabelInterner::default();
        let mut build = |i: usize| {
            let mut node = build_existing(&nodes[i], &daemons, &index, &mut interner);
            node.volumes = NodeVolumes::new(&input.volumes, &nodes[i]);
            node
        };
        let mut existing = Vec::with_capacity(order.len());
        match memo.as_mut() {
            Some((memo, keys)) => {
                memo.begin(&daemons, &index, &input.volumes);
                for i in order {
                    let node = match keys.get(i).and_then(Option::as_ref) {
                        Some(key) => memo.node(key, || build(i)),
                        None => Arc::new(build(i)),
                    };
                    existing.push((i, node));
                }
                memo.end();
            }
            None => existing.extend(order.into_iter().map(|i| (i, Arc::new(build(i))))),
        }

        let universe_pools: Vec<UniversePool<'_>> = pool_reqs
            .iter()
            .map(|(r, t, its)| UniversePool {
                requirements: r,
                taints: t,
                instance_types: its,
            })
            .collect();
        let universe = Arc::new(DomainUniverse::build(&universe_pools));
        Prepared {
            options,
            input,
            topology: Arc::new(TopologyBase::new(nodes, &input.namespace_labels, pods)),
            index,
            templates,
            pool_nodes: pool_nodes_of,
            universe,
            reservation_capacity,
            tolerate_prefer_no_schedule,
            existing,
            topology_template: std::sync::OnceLock::new(),
        }
    }

    /// The topology template over the prepared nodes, built on first use.
    pub(crate) fn topology_template(&self) -> &TopologyTemplate<'a> {
        self.topology_template.get_or_init(|| {
            TopologyTemplate::new(
                self.options.preference_policy,
                self.universe.clone(),
                self.topology.clone(),
            )
        })
    }

    /// Runs one solve. The result is exactly that of a solve over the same input without the
    /// removed nodes and with `request.pods` as its pods; `None` when the solve stopped at
    /// `request.new_claim_limit` (never without a limit).
    pub(crate) fn solve(&self, request: &SolveRequest<'_>) -> Option<Results> {
        let registered = match request.hints.filter(|h| h.len() == request.pods.len()) {
            Some(hints) => hints.iter().all(|h| h.registered),
            None => request.pods.iter().all(|p| {
                p.requests
                    .keys()
                    .all(|name| self.index.position(name).is_some())
            }),
        };
        if !registered {
            // Resources nothing prepared has seen: prepare again with them.
            let nodes: Vec<ExistingNodeRef<'_>> = self
                .topology
                .nodes()
                .iter()
                .enumerate()
                .filter(|(i, _)| !request.removed.get(*i).copied().unwrap_or(false))
                .map(|(_, n)| *n)
                .collect();
            let prepared = Prepared::new(self.input, nodes, self.options, request.pods);
            return prepared.solve(&SolveRequest {
                removed: &[],
                // The hints hold requests in this preparation's resource index.
                hints: None,
                ..*request
            });
        }
        Solver::new(self, request).run()
    }
}

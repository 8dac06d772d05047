//! A prepared cluster with nodes left out solves exactly as a fresh solve over the cluster
//! without them (the consolidation simulation's contract).

use std::collections::BTreeSet;
use std::sync::Arc;

use proptest::prelude::*;

use crate::labels;
use crate::model::{
    ClusterNode, LabelSelector, Pod, PodAffinity, PodAffinityTerm, PodPhase,
    TopologySpreadConstraint, WhenUnsatisfiable,
};
use crate::resources::{Quantity, ResourceList, names};

use super::solver::{ExistingKey, ExistingMemo, PodHint, Prepared, SolveRequest};
use super::tests::{catalog, pool};
use super::*;

/// One existing node: (instance type index, zone index, marked for deletion, its pods' kinds).
type NodeSpec = (usize, usize, bool, Vec<(u8, u8, i64)>);

fn node_spec() -> impl Strategy<Value = NodeSpec> {
    (
        0usize..3,
        0usize..2,
        prop::bool::weighted(0.1),
        prop::collection::vec((0u8..7, 0u8..3, 1i64..4), 0..4),
    )
}

fn make_pod(name: &str, kind: u8, app: u8, cpu_quarters: i64, zone: &str) -> Pod {
    let mut p = Pod::new("default", name);
    p.uid = name.to_string();
    let app = format!("app-{app}");
    p.labels.insert("app".into(), app.clone());
    let mut requests = ResourceList::new();
    requests.insert(names::CPU, Quantity::from_milli(cpu_quarters * 250));
    requests.insert(
        names::MEMORY,
        Quantity::from_bytes(cpu_quarters * 256 * 1024 * 1024),
    );
    p.requests = requests;
    let selector = LabelSelector::from_labels([("app", app.as_str())]);
    match kind {
        1 => {
            p.topology_spread_constraints = vec![TopologySpreadConstraint {
                max_skew: 1,
                topology_key: labels::ZONE.to_string(),
                when_unsatisfiable: WhenUnsatisfiable::DoNotSchedule,
                label_selector: Some(selector),
                min_domains: None,
                node_affinity_policy: None,
                node_taints_policy: None,
                match_label_keys: Vec::new(),
            }];
        }
        2 => {
            p.pod_anti_affinity = Some(PodAffinity {
                required: vec![PodAffinityTerm {
                    label_selector: Some(selector),
                    topology_key: labels::HOSTNAME.to_string(),
                    ..PodAffinityTerm::default()
                }],
                preferred: Vec::new(),
            });
        }
        3 => {
            p.node_selector
                .insert(labels::ZONE.to_string(), zone.to_string());
        }
        5 => {
            p.pod_anti_affinity = Some(PodAffinity {
                required: vec![PodAffinityTerm {
                    label_selector: Some(selector),
                    topology_key: labels::ZONE.to_string(),
                    ..PodAffinityTerm::default()
                }],
                preferred: Vec::new(),
            });
        }
        4 => {
            p.pod_affinity = Some(PodAffinity {
                required: vec![PodAffinityTerm {
                    label_selector: Some(selector),
                    topology_key: labels::ZONE.to_string(),
                    ..PodAffinityTerm::default()
                }],
                preferred: Vec::new(),
            });
        }
        _ => {}
    }
    p
}

fn cluster(specs: &[NodeSpec]) -> Vec<ExistingNodeInput> {
    let types = catalog();
    specs
        .iter()
        .enumerate()
        .map(|(n, (t, z, deleting, pods))| {
            let it = &types[*t];
            let zone = ["zone-a", "zone-b"][*z];
            let name = format!("node-{n}");
            let mut node = ClusterNode::new(name.clone());
            for (k, v) in [
                (labels::NODEPOOL, "default"),
                (labels::INSTANCE_TYPE, it.name()),
                (labels::ZONE, zone),
                (labels::CAPACITY_TYPE, labels::CAPACITY_TYPE_ON_DEMAND),
                (labels::ARCH, if *t == 3 { "arm64" } else { "amd64" }),
                (labels::OS, "linux"),
                (labels::HOSTNAME, name.as_str()),
            ] {
                node.labels.insert(k.to_string(), v.to_string());
            }
            node.capacity = it.capacity().clone();
            node.allocatable = it.allocatable().clone();
            node.managed = true;
            node.initialized = true;
            node.marked_for_deletion = *deleting;
            let pods = pods
                .iter()
                .enumerate()
                .map(|(i, (kind, app, cpu))| {
                    let suffix = if *cpu == 3 { "-stays" } else { "" };
                    let mut p = make_pod(&format!("{name}-p{i}{suffix}"), *kind, *app, *cpu, zone);
                    p.node_name = Some(name.clone());
                    p.phase = PodPhase::Running;
                    p
                })
                .collect();
            ExistingNodeInput {
                node,
                pods,
                volume_limits: Default::default(),
            }
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn leaving_nodes_out_equals_a_fresh_solve_without_them(
        specs in prop::collection::vec(node_spec(), 1..9),
        removed_bits in prop::collection::vec(any::<bool>(), 9),
        warm_bits in prop::collection::vec(any::<bool>(), 9),
        refusing_bits in prop::collection::vec(prop::bool::weighted(0.3), 9),
        pending in prop::collection::vec((0u8..6, 0u8..3, 1i64..8), 0..3),
        node_limit in prop::option::of(1i64..6),
    ) {
        let nodes = cluster(&specs);
        let removed: Vec<bool> = (0..nodes.len()).map(|i| removed_bits[i]).collect();
        let pending: Vec<Pod> = pending
            .iter()
            .enumerate()
            .map(|(i, (kind, app, cpu))| make_pod(&format!("pending-{i}"), *kind, *app, *cpu, "zone-a"))
            .collect();
        let mut default_pool = pool("default");
        if let Some(n) = node_limit {
            default_pool.limits.insert(names::NODES, Quantity::from_milli(n * 1000));
            default_pool.limits.insert(names::CPU, Quantity::from_milli(n * 8000));
        }
        let prepared_input = SchedulingInput {
            node_pools: vec![default_pool],
            pods: pending.clone(),
            ..SchedulingInput::default()
        };
        let mut batch = pending.clone();
        let mut displaced = BTreeSet::new();
        for (n, node) in nodes.iter().enumerate() {
            if removed[n] {
                // Pods named `…-stays` are not rescheduled (DaemonSet pods of a candidate).
                for p in node.pods.iter().filter(|p| !p.name.ends_with("-stays")) {
                    displaced.insert(p.key());
                    batch.push(p.clone());
                }
            }
        }
        let refusing: BTreeSet<String> = nodes
            .iter()
            .enumerate()
            .filter(|(n, _)| refusing_bits[*n])
            .map(|(_, node)| node.node.name.clone())
            .collect();
        let options = SchedulerOptions::default();

        let refs: Vec<ExistingNodeRef<'_>> = nodes.iter().map(ExistingNodeRef::from).collect();
        let pending_refs: Vec<&Pod> = pending.iter().collect();
        let prepared = Prepared::new(&prepared_input, refs, &options, &pending_refs);
        // An earlier solve over other nodes left out fills what forks of the prepared topology
        // share (the existing pods new groups count): the next solve must not see its traces.
        let warm_removed: Vec<bool> = (0..nodes.len()).map(|i| warm_bits[i]).collect();
        let warm_batch: Vec<Pod> = nodes
            .iter()
            .enumerate()
            .filter(|(n, _)| warm_removed[*n])
            .flat_map(|(_, node)| node.pods.iter().cloned())
            .collect();
        let warm_refs: Vec<&Pod> = warm_batch.iter().collect();
        let _ = prepared.solve(&SolveRequest {
            pods: &warm_refs,
            removed: &warm_removed,
            refusing: None,
            displaced: None,
            hints: None,
            new_claim_limit: None,
        });
        let batch_refs: Vec<&Pod> = batch.iter().collect();
        let Some(ours) = prepared.solve(&SolveRequest {
            pods: &batch_refs,
            removed: &removed,
            refusing: Some(&refusing),
            displaced: Some(&displaced),
            hints: None,
            new_claim_limit: None,
        }) else {
            panic!("a solve without a limit stopped");
        };
        // With a limit of `limit` new NodeClaims, the solve stops exactly when the full one
        // creates more, and otherwise gives the same results.
        for limit in 0..3 {
            let limited = prepared.solve(&SolveRequest {
                pods: &batch_refs,
                removed: &removed,
                refusing: Some(&refusing),
                displaced: Some(&displaced),
                hints: None,
                new_claim_limit: Some(limit),
            });
            match limited {
                None => prop_assert!(ours.new_node_claims.len() > limit),
                Some(l) => {
                    prop_assert!(ours.new_node_claims.len() <= limit);
                    prop_assert_eq!(format!("{:#?}", l.new_node_claims), format!("{:#?}", ours.new_node_claims));
                    prop_assert_eq!(&l.pod_errors, &ours.pod_errors);
                }
            }
        }
        // The same solve with hints computed once over more pods, in another order.
        let hinted_pods: Vec<&Pod> = batch_refs.iter().rev().chain(&warm_refs).copied().collect();
        let hints = prepared.pod_hints(&hinted_pods);
        let batch_hints: Vec<&PodHint> = hints[..batch_refs.len()].iter().rev().collect();
        let Some(hinted) = prepared.solve(&SolveRequest {
            pods: &batch_refs,
            removed: &removed,
            refusing: Some(&refusing),
            displaced: Some(&displaced),
            hints: Some(&batch_hints),
            new_claim_limit: None,
        }) else {
            panic!("a solve without a limit stopped");
        };

        let fresh_input = SchedulingInput {
            node_pools: prepared_input.node_pools.clone(),
            existing_nodes: nodes
                .iter()
                .enumerate()
                .filter(|(n, _)| !removed[*n])
                .map(|(_, node)| node.clone())
                .collect(),
            pods: batch.clone(),
            consolidation: Some(ConsolidationSimulation {
                nodes_refusing_displaced_pods: refusing.clone(),
                displaced_pods: displaced.clone(),
            }),
            ..SchedulingInput::default()
        };
        let fresh = solve(&fresh_input, &options);
        prop_assert_eq!(format!("{:#?}", ours.new_node_claims), format!("{:#?}", fresh.new_node_claims));
        prop_assert_eq!(&ours.existing_nodes, &fresh.existing_nodes);
        prop_assert_eq!(&ours.pod_errors, &fresh.pod_errors);
        prop_assert_eq!(format!("{:?}", ours.metrics), format!("{:?}", fresh.metrics));
        prop_assert_eq!(format!("{:#?}", hinted.new_node_claims), format!("{:#?}", fresh.new_node_claims));
        prop_assert_eq!(&hinted.existing_nodes, &fresh.existing_nodes);
        prop_assert_eq!(&hinted.pod_errors, &fresh.pod_errors);
        prop_assert_eq!(format!("{:?}", hinted.metrics), format!("{:?}", fresh.metrics));
    }
}

/// What changes between two rounds of [`a_memo_of_prepared_nodes_changes_no_solve`].
#[derive(Debug, Clone)]
enum RoundChange {
    /// Nothing besides the nodes chosen.
    Nodes,
    /// A DaemonSet is added.
    DaemonSet,
    /// A pending pod requests a resource no earlier round saw.
    NewResource,
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Solves that reuse the nodes an earlier solve prepared, across rounds where some nodes
    /// change (a new key), DaemonSets are added or a new resource appears, give exactly the
    /// results of solves preparing every node afresh, and reuse exactly the unchanged nodes
    /// while nothing else changed.
    #[test]
    fn a_memo_of_prepared_nodes_changes_no_solve(
        specs in prop::collection::vec(node_spec(), 1..9),
        rounds in prop::collection::vec(
            (
                prop::collection::vec(prop::bool::weighted(0.3), 9),
                prop_oneof![
                    3 => Just(RoundChange::Nodes),
                    1 => Just(RoundChange::DaemonSet),
                    1 => Just(RoundChange::NewResource),
                ],
                prop::collection::vec((0u8..6, 0u8..3, 1i64..8), 0..3),
            ),
            1..5,
        ),
    ) {
        let options = SchedulerOptions::default();
        let mut nodes: Vec<Arc<ExistingNodeInput>> =
            cluster(&specs).into_iter().map(Arc::new).collect();
        let mut daemonsets = Vec::new();
        let mut resources = 0;
        let mut memo = ExistingMemo::default();
        for (round, (changed, change, pending)) in rounds.iter().enumerate() {
            let mut unchanged = 0;
            for (n, node) in nodes.iter_mut().enumerate() {
                if round > 0 && changed[n] {
                    // A pod leaves the node (or a pod arrives on an empty one).
                    let mut next = (**node).clone();
                    if next.pods.pop().is_none() {
                        let mut p = make_pod(&format!("{}-new{round}", next.node.name), 0, 0, 1, "zone-a");
                        p.node_name = Some(next.node.name.clone());
                        p.phase = PodPhase::Running;
                        next.pods.push(p);
                    }
                    *node = Arc::new(next);
                } else if round > 0 && !node.node.marked_for_deletion {
                    unchanged += 1;
                }
            }
            let mut pending: Vec<Pod> = pending
                .iter()
                .enumerate()
                .map(|(i, (kind, app, cpu))| {
                    make_pod(&format!("pending-{round}-{i}"), *kind, *app, *cpu, "zone-a")
                })
                .collect();
            // A round's resources are those its pods request: the round after a new resource
            // has a resource index without it.
            let after_new_resource = round > 0
                && matches!(rounds[round - 1].1, RoundChange::NewResource);
            let same_context = match change {
                RoundChange::Nodes => !after_new_resource,
                RoundChange::DaemonSet => {
                    let mut pod = make_pod(&format!("daemon-{round}"), 0, 0, 1, "zone-a");
                    pod.requests.insert(names::CPU, Quantity::from_milli(100));
                    daemonsets.push(DaemonSet::new("kube-system", format!("ds-{round}"), pod));
                    false
                }
                RoundChange::NewResource => {
                    resources += 1;
                    let mut pod = make_pod(&format!("extended-{round}"), 0, 0, 1, "zone-a");
                    pod.requests.insert(format!("example.com/r{resources}"), Quantity::from_milli(1000));
                    pending.push(pod);
                    false
                }
            };
            let input = SchedulingInput {
                node_pools: vec![pool("default")],
                daemonsets: daemonsets.clone(),
                pods: pending,
                ..SchedulingInput::default()
            };
            let refs: Vec<ExistingNodeRef<'_>> =
                nodes.iter().map(|n| ExistingNodeRef::from(&**n)).collect();
            let keys: Vec<ExistingKey> =
                nodes.iter().map(|n| Arc::clone(n) as ExistingKey).collect();
            let ours = solve_with_existing_memo(&input, &refs, &options, Some((&mut memo, &keys)));
            let fresh = solve_with_existing(&input, &refs, &options);
            prop_assert_eq!(format!("{:#?}", ours.new_node_claims), format!("{:#?}", fresh.new_node_claims));
            prop_assert_eq!(&ours.existing_nodes, &fresh.existing_nodes);
            prop_assert_eq!(&ours.pod_errors, &fresh.pod_errors);
            prop_assert_eq!(format!("{:?}", ours.metrics), format!("{:?}", fresh.metrics));
            let expected = if same_context { unchanged } else { 0 };
            prop_assert_eq!(memo.reused(), expected, "round {}", round);
            let live = nodes.iter().filter(|n| !n.node.marked_for_deletion).count();
            prop_assert_eq!(memo.len(), live);
        }
        // The memo keeps no node alive: once the caller drops them, they are gone.
        let weak: Vec<_> = nodes.iter().map(Arc::downgrade).collect();
        drop(nodes);
        prop_assert!(weak.iter().all(|w| w.upgrade().is_none()));
        prop_assert!(memo.len() > 0 || specs.iter().all(|s| s.2));
    }
}

/// A solve of pods with a resource nothing prepared has seen falls back to preparing again with
/// it, and agrees with a fresh solve.
#[test]
fn unregistered_resources_fall_back_to_a_fresh_preparation() {
    let nodes = cluster(&[(1, 0, false, vec![(0, 0, 1)])]);
    let input = SchedulingInput {
        node_pools: vec![pool("default")],
        ..SchedulingInput::default()
    };
    let mut gpu_pod = make_pod("gpu", 0, 0, 1, "zone-a");
    gpu_pod
        .requests
        .insert("example.com/gpu", Quantity::from_milli(1000));
    let batch = vec![gpu_pod, make_pod("plain", 0, 1, 1, "zone-a")];
    let options = SchedulerOptions::default();
    let refs: Vec<ExistingNodeRef<'_>> = nodes.iter().map(ExistingNodeRef::from).collect();
    let prepared = Prepared::new(&input, refs, &options, &[]);
    let batch_refs: Vec<&Pod> = batch.iter().collect();
    let Some(ours) = prepared.solve(&SolveRequest {
        pods: &batch_refs,
        removed: &[],
        refusing: None,
        displaced: None,
        hints: None,
        new_claim_limit: None,
    }) else {
        panic!("a solve without a limit stopped");
    };
    let fresh = solve(
        &SchedulingInput {
            existing_nodes: nodes.clone(),
            pods: batch.clone(),
            ..input.clone()
        },
        &options,
    );
    // No instance type offers the resource: the pod fails, the same way in both.
    assert!(
        ours.pod_errors.contains_key("default/gpu"),
        "{:?}",
        ours.pod_errors
    );
    assert_eq!(ours.pod_errors, fresh.pod_errors);
    assert_eq!(ours.existing_nodes, fresh.existing_nodes);
    assert_eq!(
        format!("{:?}", ours.new_node_claims),
        format!("{:?}", fresh.new_node_claims)
    );
}

//! Rule-by-rule audit of candidates, methods and budgets against upstream (`GetCandidates` /
//! `NewCandidate`, `controllers/disruption`, `nodepool.go`; see `docs/disruption-audit-1-3.md`):
//! one focused test per discrepancy found between upstream's behaviour and the planner.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::disruption_scenarios::{CREATED, now, snapshot};
use karpenter_core::api::{
    Budget, Condition, ConditionStatus, ConsolidationPolicy, NillableDuration, NodeClaim,
    NodeClaimSpec, NodeClaimTemplate, NodeClaimTemplateSpec, NodeClassReference, NodePool,
    NodePoolSpec,
};
use karpenter_core::disruption::{DisruptionOptions, Method, run_pass};
use karpenter_core::labels;
use karpenter_core::model::{
    ClusterNode, InstanceType, Offering, Overhead, OwnerReference, Pod, PodPhase,
};
use karpenter_core::requirements::{Operator, Requirement, Requirements};
use karpenter_core::resources::{Quantity, ResourceList};
use karpenter_core::state::{NodePoolState, StateNode};

const ZONE: &str = "us-east-1a";

fn rl(pairs: &[(&str, &str)]) -> ResourceList {
    pairs
        .iter()
        .map(|(k, v)| (*k, Quantity::parse(v).expect("valid quantity")))
        .collect()
}

/// An instance type with `cpu` vCPU (4 GiB each) and the given offerings `(capacity type, price)`
/// in [`ZONE`].
fn instance_type(name: &str, cpu: u32, offerings: &[(&str, f64)]) -> Arc<InstanceType> {
    let mut reqs = Requirements::new();
    reqs.add(Requirement::new(labels::ARCH, Operator::In, ["amd64"]));
    reqs.add(Requirement::new(labels::OS, Operator::In, ["linux"]));
    Arc::new(InstanceType::new(
        name,
        reqs,
        offerings
            .iter()
            .map(|(ct, price)| Offering::new(ZONE, *ct, *price))
            .collect(),
        rl(&[
            ("cpu", &cpu.to_string()),
            ("memory", &format!("{}Gi", cpu * 4)),
            ("pods", "58"),
        ]),
        Overhead::default(),
    ))
}

fn node_pool(
    name: &str,
    policy: ConsolidationPolicy,
    instance_types: Vec<Arc<InstanceType>>,
) -> NodePoolState {
    let class = NodeClassReference::new("karpenter.k8s.aws", "EC2NodeClass", "default");
    let mut spec = NodePoolSpec::new(NodeClaimTemplate {
        metadata: Default::default(),
        spec: NodeClaimTemplateSpec::new(class),
    });
    spec.disruption.consolidation_policy = Some(policy);
    spec.disruption.consolidate_after = Some(NillableDuration::parse("0s").expect("duration"));
    spec.disruption.budgets = Some(vec![Budget {
        nodes: "100%".to_string(),
        schedule: None,
        duration: None,
        reasons: None,
    }]);
    NodePoolState::new(NodePool::new(name, spec), instance_types)
}

fn condition(type_: &str) -> Condition {
    Condition {
        type_: type_.to_string(),
        status: ConditionStatus::True,
        reason: None,
        message: None,
        last_transition_time: Some(CREATED.to_string()),
        observed_generation: None,
    }
}

/// An initialized, consolidatable node of `it` (capacity type `ct`) in pool `pool`, holding
/// `pods` ReplicaSet pods of `cpu` each.
fn node(name: &str, pool: &str, it: &InstanceType, ct: &str, pods: usize, cpu: &str) -> StateNode {
    let mut node_labels = BTreeMap::new();
    for (k, v) in [
        (labels::NODEPOOL, pool),
        (labels::INSTANCE_TYPE, it.name()),
        (labels::ZONE, ZONE),
        (labels::CAPACITY_TYPE, ct),
        (labels::ARCH, "amd64"),
        (labels::OS, "linux"),
        (labels::HOSTNAME, name),
        (labels::INITIALIZED, "true"),
        (labels::REGISTERED, "true"),
    ] {
        node_labels.insert(k.to_string(), v.to_string());
    }
    let mut n = ClusterNode::new(name);
    n.labels = node_labels.clone();
    n.capacity = it.capacity().clone();
    n.allocatable = it.allocatable().clone();
    n.managed = true;
    let class = NodeClassReference::new("karpenter.k8s.aws", "EC2NodeClass", "default");
    let mut claim = NodeClaim::new(name, NodeClaimSpec::new(class));
    claim.metadata.labels = node_labels;
    claim.metadata.creation_timestamp = Some(CREATED.to_string());
    claim.status.provider_id = Some(format!("aws:///{ZONE}/{name}"));
    claim.status.node_name = Some(name.to_string());
    claim.status.conditions = vec![condition("Initialized"), condition("Consolidatable")];
    let pods = (0..pods)
        .map(|i| {
            let mut p = Pod::new("default", format!("{name}-pod-{i}"));
            p.requests = rl(&[("cpu", cpu), ("memory", "512Mi")]);
            p.node_name = Some(name.to_string());
            p.phase = PodPhase::Running;
            p.owner =
                Some(OwnerReference::new("apps/v1", "ReplicaSet", "web").with_controller(true));
            p
        })
        .collect();
    StateNode::new(Some(n), Some(claim), pods)
}

fn do_not_disrupt(mut n: StateNode) -> StateNode {
    if let Some(node) = n.node.as_mut() {
        node.annotations.insert(
            labels::DO_NOT_DISRUPT_ANNOTATION.to_string(),
            "true".to_string(),
        );
    }
    n
}

/// upstream `disruption/consolidation.go`: the replacement's capacity-type requirement is read with
/// upstream's `Requirements.Get`, which for a key without a requirement returns `Exists` — it
/// admits both spot and on-demand, so the requirement is narrowed to spot. With types that offer
/// spot, the replacement is the cheapest type, narrowed to spot.
#[test]
fn step_9_narrows_a_replacement_without_capacity_type_requirement_to_spot() {
    let types = vec![od_and_spot("small", 2, 0.1), od_and_spot("big", 8, 0.4)];
    let big = types[1].clone();
    let s = snapshot(
        vec![node_pool(
            "default",
            ConsolidationPolicy::WhenEmptyOrUnderutilized,
            types,
        )],
        vec![node(
            "node-a",
            "default",
            &big,
            labels::CAPACITY_TYPE_ON_DEMAND,
            1,
            "500m",
        )],
    );
    let pass = run_pass(&s, now(), &DisruptionOptions::default(), &|_| false);
    assert_eq!(pass.commands.len(), 1, "{:?}", pass.blocked);
    let cmd = &pass.commands[0];
    assert_eq!(cmd.method, Method::SingleNode);
    assert_eq!(cmd.replacements.len(), 1);
    let r = &cmd.replacements[0];
    assert_eq!(r.instance_types[0].name(), "small");
    let ct = r
        .requirements
        .get(labels::CAPACITY_TYPE)
        .expect("capacity-type requirement added");
    assert_eq!(ct.single_value(), Some(labels::CAPACITY_TYPE_SPOT));
}

/// upstream `disruption/consolidation.go` with types that offer only on-demand: upstream narrows to
/// spot all the same, launches, fails and leaves the node alone. We skip the doomed attempt (a
/// documented difference): no command, and the node is reported blocked with the reason.
#[test]
fn step_9_narrowing_to_spot_without_spot_offerings_issues_nothing() {
    let od_only = |name: &str, cpu: u32, price: f64| {
        instance_type(name, cpu, &[(labels::CAPACITY_TYPE_ON_DEMAND, price)])
    };
    let types = vec![od_only("small", 2, 0.1), od_only("big", 8, 0.4)];
    let big = types[1].clone();
    let s = snapshot(
        vec![node_pool(
            "default",
            ConsolidationPolicy::WhenEmptyOrUnderutilized,
            types,
        )],
        vec![node(
            "node-a",
            "default",
            &big,
            labels::CAPACITY_TYPE_ON_DEMAND,
            1,
            "500m",
        )],
    );
    let pass = run_pass(&s, now(), &DisruptionOptions::default(), &|_| false);
    assert!(pass.commands.is_empty(), "{:?}", pass.commands);
    assert!(
        pass.blocked
            .iter()
            .any(|(n, why)| n == "node-a" && why.contains("would not launch")),
        "{:?}",
        pass.blocked
    );
}

/// upstream's Balanced consolidation policy: a Balanced pool's `TotalCost` is ClusterCost's tracked
/// cost of the pool — every NodeClaim of the pool priced at its offering — and only falls back to
/// the candidates' prices when that is 0. Here two of the pool's three nodes are not candidates
/// (do-not-disrupt nodes): deleting A saves 0.1 of 0.9 (11 %) for 2 of 6 disruption units (33 %),
/// score 0.33 < 0.5, so nothing is done. Counting only the candidates' prices (0.1) would approve
/// it.
#[test]
fn balanced_total_cost_counts_every_node_claim_of_the_pool() {
    let types = vec![
        instance_type("small", 2, &[(labels::CAPACITY_TYPE_ON_DEMAND, 0.1)]),
        instance_type("big", 8, &[(labels::CAPACITY_TYPE_ON_DEMAND, 0.4)]),
    ];
    let (small, big) = (types[0].clone(), types[1].clone());
    let od = labels::CAPACITY_TYPE_ON_DEMAND;
    let s = snapshot(
        vec![node_pool("bal", ConsolidationPolicy::Balanced, types)],
        vec![
            node("node-a", "bal", &small, od, 1, "500m"),
            do_not_disrupt(node("node-b", "bal", &big, od, 1, "500m")),
            do_not_disrupt(node("node-c", "bal", &big, od, 1, "500m")),
        ],
    );
    let pass = run_pass(&s, now(), &DisruptionOptions::default(), &|_| false);
    assert!(
        pass.commands.is_empty(),
        "score 0.33 < 0.5 must be rejected: {:?}",
        pass.commands
            .iter()
            .map(|c| (c.method, c.candidates.len()))
            .collect::<Vec<_>>()
    );
}

/// upstream's Balanced consolidation policy, the approving side of the same totals: with every node
/// a candidate, deleting the two big nodes (their pods fit on the small one) saves 0.8 of 0.9 for 4
/// of 6 disruption units, score 1.33 ≥ 0.5.
#[test]
fn balanced_approves_a_move_whose_score_reaches_the_threshold() {
    let types = vec![
        instance_type("small", 2, &[(labels::CAPACITY_TYPE_ON_DEMAND, 0.1)]),
        instance_type("big", 8, &[(labels::CAPACITY_TYPE_ON_DEMAND, 0.4)]),
    ];
    let (small, big) = (types[0].clone(), types[1].clone());
    let od = labels::CAPACITY_TYPE_ON_DEMAND;
    let s = snapshot(
        vec![node_pool("bal", ConsolidationPolicy::Balanced, types)],
        vec![
            node("node-a", "bal", &small, od, 1, "500m"),
            node("node-b", "bal", &big, od, 1, "500m"),
            node("node-c", "bal", &big, od, 1, "500m"),
        ],
    );
    let pass = run_pass(&s, now(), &DisruptionOptions::default(), &|_| false);
    assert_eq!(pass.commands.len(), 1);
    let cmd = &pass.commands[0];
    assert_eq!(cmd.method, Method::MultiNode);
    let names: Vec<&str> = cmd.candidates.iter().map(|c| c.name()).collect();
    assert_eq!(names, ["node-b", "node-c"]);
    assert!(cmd.replacements.is_empty());
}

/// Both capacity types, on-demand at `price`, spot at 40 %.
fn od_and_spot(name: &str, cpu: u32, price: f64) -> Arc<InstanceType> {
    instance_type(
        name,
        cpu,
        &[
            (labels::CAPACITY_TYPE_ON_DEMAND, price),
            (labels::CAPACITY_TYPE_SPOT, price * 0.4),
        ],
    )
}

fn multi_node_summary(
    pass: &karpenter_core::disruption::PassOutcome,
) -> Vec<(Method, Vec<&str>, usize)> {
    pass.commands
        .iter()
        .map(|c| {
            (
                c.method,
                c.candidates.iter().map(|c| c.name()).collect(),
                c.replacements.len(),
            )
        })
        .collect()
}

/// upstream `disruption/multinodeconsolidation.go` `filterOutSameInstanceType`: a candidate whose
/// instance type is among the replacement's options but has no offering compatible with the node's
/// labels (here its zone is not offered any more) prices that type at 0 — upstream's missing map
/// entry — so every option is dropped and the trial is invalid. Multi-node consolidation then keeps
/// the largest valid prefix: deleting A and B onto C, not replacing all three with a `small` node.
#[test]
fn same_instance_type_without_a_compatible_offering_invalidates_the_trial() {
    let types = vec![od_and_spot("small", 2, 0.1), od_and_spot("big", 8, 0.4)];
    let (small, big) = (types[0].clone(), types[1].clone());
    let od = labels::CAPACITY_TYPE_ON_DEMAND;
    let mut c = node("node-c", "p", &small, od, 1, "500m");
    for labels_of in [
        c.node.as_mut().map(|n| &mut n.labels),
        c.node_claim.as_mut().map(|nc| &mut nc.metadata.labels),
    ]
    .into_iter()
    .flatten()
    {
        labels_of.insert(labels::ZONE.to_string(), "us-east-1b".to_string());
    }
    let s = snapshot(
        vec![node_pool(
            "p",
            ConsolidationPolicy::WhenEmptyOrUnderutilized,
            types,
        )],
        vec![
            node("node-a", "p", &big, od, 1, "500m"),
            node("node-b", "p", &big, od, 1, "500m"),
            c,
        ],
    );
    let pass = run_pass(&s, now(), &DisruptionOptions::default(), &|_| false);
    assert_eq!(
        multi_node_summary(&pass),
        [(Method::MultiNode, vec!["node-a", "node-b"], 0)]
    );
}

/// upstream `disruption/multinodeconsolidation.go` `filterOutSameInstanceType` always re-filters
/// the replacement's options by price, with no limit when no candidate shares a type: an option
/// without any offering compatible with the replacement's (spot-narrowed, upstream
/// `disruption/consolidation.go`) requirements has no launch price and is dropped. With
/// on-demand-only types and no capacity-type requirement, replacing A and B by one `small` is
/// therefore not a valid multi-node move; single-node consolidation deletes A onto B instead. (The
/// candidates' own type, `big`, is no longer available, so it is not an option and no candidate
/// shares a type with the replacement.)
#[test]
fn multi_node_drops_options_without_a_launch_price_under_the_narrowed_requirements() {
    let small = instance_type("small", 2, &[(labels::CAPACITY_TYPE_ON_DEMAND, 0.1)]);
    let mut big = (*instance_type("big", 8, &[(labels::CAPACITY_TYPE_ON_DEMAND, 0.4)])).clone();
    for o in &mut big.offerings {
        o.available = false;
    }
    let big = Arc::new(big);
    let types = vec![small, big.clone()];
    let od = labels::CAPACITY_TYPE_ON_DEMAND;
    let s = snapshot(
        vec![node_pool(
            "p",
            ConsolidationPolicy::WhenEmptyOrUnderutilized,
            types,
        )],
        vec![
            node("node-a", "p", &big, od, 1, "500m"),
            node("node-b", "p", &big, od, 1, "500m"),
        ],
    );
    let pass = run_pass(&s, now(), &DisruptionOptions::default(), &|_| false);
    assert_eq!(
        multi_node_summary(&pass),
        [(Method::SingleNode, vec!["node-a"], 0)]
    );
}

/// upstream's Balanced consolidation policy: the disruption cost upstream tracks for a node that is
/// not a candidate counts the pods cluster state tracks on it — not terminal (`Succeeded`/`Failed`)
/// pods, which it drops. Here B (not a candidate) has one running pod and four completed ones: the
/// pool's total is 2 + 2 = 4, so deleting A (0.1 of 0.5 saved, 2 of 4 disruption) scores 0.4 < 0.5
/// and nothing is done. Counting the completed pods would give a total of 8 and approve it.
#[test]
fn balanced_total_disruption_ignores_terminal_pods_of_non_candidates() {
    let types = vec![
        instance_type("small", 2, &[(labels::CAPACITY_TYPE_ON_DEMAND, 0.1)]),
        instance_type("big", 8, &[(labels::CAPACITY_TYPE_ON_DEMAND, 0.4)]),
    ];
    let (small, big) = (types[0].clone(), types[1].clone());
    let od = labels::CAPACITY_TYPE_ON_DEMAND;
    let mut b = do_not_disrupt(node("node-b", "bal", &big, od, 1, "500m"));
    for i in 0..4 {
        let mut done = Pod::new("default", format!("job-{i}"));
        done.node_name = Some("node-b".to_string());
        done.phase = PodPhase::Succeeded;
        b.pods.push(done);
    }
    let s = snapshot(
        vec![node_pool("bal", ConsolidationPolicy::Balanced, types)],
        vec![node("node-a", "bal", &small, od, 1, "500m"), b],
    );
    let pass = run_pass(&s, now(), &DisruptionOptions::default(), &|_| false);
    assert_eq!(multi_node_summary(&pass), []);
}

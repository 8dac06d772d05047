//! `karpenter_core::disruption::{run_pass, plan}`: the methods in production order (emptiness,
//! drift, multi-node, single-node), budgets, and the seed guide's consolidation example.

use std::collections::BTreeMap;
use std::sync::Arc;

use karpenter_core::api::{
    Budget, Condition, ConditionStatus, ConsolidationPolicy, NillableDuration, NodeClaim,
    NodeClaimSpec, NodeClaimTemplate, NodeClaimTemplateSpec, NodeClassReference, NodePool,
    NodePoolSpec,
};
use karpenter_core::disruption::{DisruptionOptions, Method, Reason, plan, run_pass};
use karpenter_core::labels;
use karpenter_core::model::{ClusterNode, InstanceType, Offering, Overhead, Pod, Timestamp};
use karpenter_core::requirements::{Operator, Requirement, Requirements};
use karpenter_core::resources::{Quantity, ResourceList};
use karpenter_core::state::{ClusterSnapshot, NodePoolState, StateNode};

const NOW: &str = "2024-06-15T12:00:00Z";
const CREATED: &str = "2024-06-01T00:00:00Z";
const ZONE: &str = "us-east-1a";

fn now() -> Timestamp {
    NOW.parse().expect("valid timestamp")
}

fn q(s: &str) -> Quantity {
    Quantity::parse(s).expect("valid quantity")
}

fn rl(pairs: &[(&str, &str)]) -> ResourceList {
    pairs.iter().map(|(k, v)| (*k, q(v))).collect()
}

/// An m5-like instance type: `cpu` vCPU, 4 GiB per vCPU, on-demand at `price` and spot at 40%.
fn m5(name: &str, cpu: u32, price: f64) -> Arc<InstanceType> {
    let mut reqs = Requirements::new();
    reqs.add(Requirement::new(labels::ARCH, Operator::In, ["amd64"]));
    reqs.add(Requirement::new(labels::OS, Operator::In, ["linux"]));
    // Upstream's kube-reserved CPU: 6% of the first core, 1% of the second, 0.5% of the next
    // two, 0.25% of the rest.
    let reserved_milli =
        60 + 10 + 5 * (cpu.min(4).saturating_sub(2)) + (cpu.saturating_sub(4) * 5) / 2;
    Arc::new(InstanceType::new(
        name,
        reqs,
        vec![
            Offering::new(ZONE, labels::CAPACITY_TYPE_ON_DEMAND, price),
            Offering::new(ZONE, labels::CAPACITY_TYPE_SPOT, price * 0.4),
        ],
        rl(&[
            ("cpu", &cpu.to_string()),
            ("memory", &format!("{}Gi", cpu * 4)),
            ("pods", "58"),
        ]),
        Overhead {
            kube_reserved: rl(&[("cpu", &format!("{reserved_milli}m")), ("memory", "893Mi")]),
            eviction_threshold: rl(&[("memory", "100Mi")]),
            ..Overhead::default()
        },
    ))
}

fn catalog() -> Vec<Arc<InstanceType>> {
    vec![
        m5("m5.large", 2, 0.096),
        m5("m5.xlarge", 4, 0.192),
        m5("m5.2xlarge", 8, 0.384),
    ]
}

fn node_pool(name: &str, policy: ConsolidationPolicy, budget: &str) -> NodePoolState {
    let class = NodeClassReference::new("karpenter.k8s.aws", "EC2NodeClass", "default");
    let mut spec = NodePoolSpec::new(NodeClaimTemplate {
        metadata: Default::default(),
        spec: NodeClaimTemplateSpec::new(class),
    });
    spec.disruption.consolidation_policy = Some(policy);
    spec.disruption.consolidate_after = Some(NillableDuration::parse("0s").expect("duration"));
    spec.disruption.budgets = Some(vec![Budget {
        nodes: budget.to_string(),
        schedule: None,
        duration: None,
        reasons: None,
    }]);
    NodePoolState::new(NodePool::new(name, spec), catalog())
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

/// An initialized, consolidatable on-demand node of `it` in pool `pool`, holding `pods` pods of
/// `cpu` each.
fn node(name: &str, pool: &str, it: &InstanceType, pods: usize, cpu: &str) -> StateNode {
    let mut node_labels = BTreeMap::new();
    node_labels.insert(labels::NODEPOOL.to_string(), pool.to_string());
    node_labels.insert(labels::INSTANCE_TYPE.to_string(), it.name().to_string());
    node_labels.insert(labels::ZONE.to_string(), ZONE.to_string());
    node_labels.insert(
        labels::CAPACITY_TYPE.to_string(),
        labels::CAPACITY_TYPE_ON_DEMAND.to_string(),
    );
    node_labels.insert(labels::ARCH.to_string(), "amd64".to_string());
    node_labels.insert(labels::OS.to_string(), "linux".to_string());
    node_labels.insert(labels::HOSTNAME.to_string(), name.to_string());
    node_labels.insert(labels::INITIALIZED.to_string(), "true".to_string());
    node_labels.insert(labels::REGISTERED.to_string(), "true".to_string());
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
            p.phase = karpenter_core::model::PodPhase::Running;
            p.owner = Some(
                karpenter_core::model::OwnerReference::new("apps/v1", "ReplicaSet", "web")
                    .with_controller(true),
            );
            p
        })
        .collect();
    StateNode::new(Some(n), Some(claim), pods)
}

fn snapshot(pools: Vec<NodePoolState>, nodes: Vec<StateNode>) -> ClusterSnapshot {
    ClusterSnapshot::new(pools, nodes)
}

fn it(name: &str) -> Arc<InstanceType> {
    catalog()
        .into_iter()
        .find(|t| t.name() == name)
        .expect("known type")
}

/// The seed guide's example: A (m5.2xlarge, 20 % of CPU requested), B (m5.2xlarge, 30 %),
/// C (m5.xlarge, 90 %).
fn guide_cluster(budget: &str) -> ClusterSnapshot {
    let big = it("m5.2xlarge");
    let small = it("m5.xlarge");
    snapshot(
        vec![node_pool(
            "default",
            ConsolidationPolicy::WhenEmptyOrUnderutilized,
            budget,
        )],
        vec![
            node("node-a", "default", &big, 2, "800m"),
            node("node-b", "default", &big, 3, "800m"),
            node("node-c", "default", &small, 3, "1200m"),
        ],
    )
}

fn names(cmd: &karpenter_core::disruption::Command) -> Vec<&str> {
    cmd.candidates.iter().map(|c| c.name()).collect()
}

/// With the default 10% budget (one node of three, rounded up), multi-node consolidation needs
/// two candidates and cannot act; single-node consolidation takes the node with the best
/// price-per-disruption ratio, A ($0.384 over 2 pods), and deletes it: its 1.6 CPU fit in B's free
/// capacity. This is the guide's narrative.
#[test]
fn seed_guide_example_with_default_budget_deletes_node_a() {
    let pass = run_pass(
        &guide_cluster("10%"),
        now(),
        &DisruptionOptions::default(),
        &|_| false,
    );
    assert_eq!(pass.commands.len(), 1);
    let cmd = &pass.commands[0];
    assert_eq!(cmd.method, Method::SingleNode);
    assert_eq!(cmd.reason, Reason::Underutilized);
    assert_eq!(names(cmd), ["node-a"]);
    assert!(cmd.replacements.is_empty(), "A's pods fit on B");
    assert!((cmd.savings_per_hour - 0.384).abs() < 1e-9);
    let sim = cmd.simulation.as_ref().expect("simulated");
    assert_eq!(sim.existing_nodes.len(), 1);
    assert_eq!(sim.existing_nodes[0].name, "node-b");
}

/// With a budget that allows all three nodes, upstream's multi-node method finds a cheaper move
/// than the guide's: all 7.6 CPU fit one 8-vCPU node (7.91 CPU allocatable), so the three nodes
/// ($0.96/h on demand) are replaced by one m5.2xlarge — and, since both capacity types remain
/// possible, the replacement is narrowed to spot (upstream `disruption/consolidation.go`):
/// $0.1536/h.
#[test]
fn seed_guide_example_with_full_budget_replaces_all_three_with_one_node() {
    let pass = run_pass(
        &guide_cluster("100%"),
        now(),
        &DisruptionOptions::default(),
        &|_| false,
    );
    assert_eq!(pass.commands.len(), 1);
    let cmd = &pass.commands[0];
    assert_eq!(cmd.method, Method::MultiNode);
    assert_eq!(names(cmd), ["node-a", "node-b", "node-c"]);
    assert_eq!(cmd.replacements.len(), 1);
    let r = &cmd.replacements[0];
    assert_eq!(r.instance_types[0].name(), "m5.2xlarge");
    assert_eq!(
        r.requirements
            .get(labels::CAPACITY_TYPE)
            .and_then(|c| c.single_value()),
        Some(labels::CAPACITY_TYPE_SPOT)
    );
    assert!((cmd.savings_per_hour - (0.96 - 0.384 * 0.4)).abs() < 1e-9);
}

#[test]
fn emptiness_deletes_empty_nodes_within_budget() {
    let big = it("m5.2xlarge");
    let nodes = (0..10)
        .map(|i| node(&format!("empty-{i}"), "default", &big, 0, "1"))
        .collect();
    let s = snapshot(
        vec![node_pool("default", ConsolidationPolicy::WhenEmpty, "30%")],
        nodes,
    );
    let pass = run_pass(&s, now(), &DisruptionOptions::default(), &|_| false);
    assert_eq!(pass.commands.len(), 1);
    assert_eq!(pass.commands[0].method, Method::Emptiness);
    assert_eq!(pass.commands[0].reason, Reason::Empty);
    assert_eq!(pass.commands[0].candidates.len(), 3, "30% of 10");
}

#[test]
fn zero_budget_blocks_every_method() {
    let s = guide_cluster("0%");
    let pass = run_pass(&s, now(), &DisruptionOptions::default(), &|_| false);
    assert!(pass.commands.is_empty());
}

#[test]
fn when_empty_policy_does_not_consolidate_underutilized_nodes() {
    let mut s = guide_cluster("100%");
    s.node_pools = vec![node_pool("default", ConsolidationPolicy::WhenEmpty, "100%")];
    let pass = run_pass(&s, now(), &DisruptionOptions::default(), &|_| false);
    assert!(pass.commands.is_empty());
}

#[test]
fn drifted_node_is_replaced_before_consolidation() {
    let mut s = guide_cluster("100%");
    let mut c = (*s.nodes[2]).clone();
    if let Some(claim) = c.node_claim.as_mut() {
        claim.status.conditions.push(condition("Drifted"));
    }
    s.nodes[2] = Arc::new(c);
    let pass = run_pass(&s, now(), &DisruptionOptions::default(), &|_| false);
    assert_eq!(pass.commands.len(), 1);
    assert_eq!(pass.commands[0].method, Method::Drift);
    assert_eq!(names(&pass.commands[0]), ["node-c"]);
}

#[test]
fn do_not_disrupt_pod_blocks_consolidation_of_its_node() {
    let mut s = guide_cluster("10%");
    let mut a = (*s.nodes[0]).clone();
    a.pods[0].annotations.insert(
        labels::DO_NOT_DISRUPT_ANNOTATION.to_string(),
        "true".to_string(),
    );
    s.nodes[0] = Arc::new(a);
    let pass = run_pass(&s, now(), &DisruptionOptions::default(), &|_| false);
    assert!(
        pass.commands.iter().all(|c| names(c) != ["node-a"]),
        "node-a is blocked by its pod"
    );
    assert!(
        pass.blocked
            .iter()
            .any(|(n, r)| n == "node-a" && r.contains("do-not-disrupt"))
    );
    // Without recorded reasons: the same commands, nothing in `blocked`.
    let quiet = run_pass(
        &s,
        now(),
        &DisruptionOptions::default().with_record_blocked(false),
        &|_| false,
    );
    assert!(quiet.blocked.is_empty());
    assert_eq!(
        quiet.commands.iter().map(names).collect::<Vec<_>>(),
        pass.commands.iter().map(names).collect::<Vec<_>>()
    );
}

/// Playing passes forward reaches a fixed point and never disrupts a node twice.
#[test]
fn plan_plays_passes_forward_to_a_fixed_point() {
    let p = plan(&guide_cluster("10%"), now(), &DisruptionOptions::default());
    assert!(!p.commands.is_empty());
    let mut seen = std::collections::BTreeSet::new();
    for cmd in &p.commands {
        for c in &cmd.candidates {
            assert!(
                seen.insert(c.name().to_string()),
                "{} disrupted twice",
                c.name()
            );
        }
        assert!(cmd.savings_per_hour > 0.0);
    }
    let again = plan(&guide_cluster("10%"), now(), &DisruptionOptions::default());
    assert_eq!(
        p.commands
            .iter()
            .map(|c| names(c).join(","))
            .collect::<Vec<_>>(),
        again
            .commands
            .iter()
            .map(|c| names(c).join(","))
            .collect::<Vec<_>>(),
        "deterministic"
    );
}

/// Expired NodeClaims are disrupted regardless of budgets.
#[test]
fn expired_nodes_come_first_regardless_of_budgets() {
    let mut s = guide_cluster("0%");
    let mut a = (*s.nodes[0]).clone();
    if let Some(claim) = a.node_claim.as_mut() {
        claim.spec.expire_after = Some(NillableDuration::parse("24h").expect("duration"));
    }
    s.nodes[0] = Arc::new(a);
    let p = plan(&s, now(), &DisruptionOptions::default());
    assert_eq!(p.commands[0].method, Method::Expiration);
    assert_eq!(p.commands[0].reason, Reason::Expired);
    assert_eq!(names(&p.commands[0]), ["node-a"]);
}

/// Re-validation (upstream `disruption/validation.go`): a consolidation command stays valid against
/// the same snapshot, and is rejected as churn once a candidate gains a do-not-disrupt pod.
#[test]
fn consolidation_commands_are_revalidated_against_a_newer_snapshot() {
    use karpenter_core::disruption::validation::{RevalidationError, validate};
    let s = guide_cluster("10%");
    let options = DisruptionOptions::default();
    let pass = run_pass(&s, now(), &options, &|_| false);
    let cmd = &pass.commands[0];
    assert!(validate(cmd, &s, now(), &options).is_ok());
    let mut changed = s.clone();
    let mut a = (*changed.nodes[0]).clone();
    a.pods[0].annotations.insert(
        labels::DO_NOT_DISRUPT_ANNOTATION.to_string(),
        "true".to_string(),
    );
    changed.nodes[0] = Arc::new(a);
    let err =
        validate(cmd, &changed, now(), &options).expect_err("node-a is no longer a candidate");
    assert!(matches!(err, RevalidationError::Churn { .. }));
    assert_eq!(err.reason(), "churn");
}

/// A budget that drops to zero during the wait rejects the command.
#[test]
fn consolidation_commands_are_rejected_when_the_budget_closes() {
    use karpenter_core::disruption::validation::validate;
    let s = guide_cluster("10%");
    let options = DisruptionOptions::default();
    let cmd = run_pass(&s, now(), &options, &|_| false).commands.remove(0);
    let closed = guide_cluster("0%");
    let err = validate(&cmd, &closed, now(), &options).expect_err("budget closed");
    assert_eq!(err.reason(), "budget");
}

/// A static NodePool (`spec.replicas`) of three nodes, one drifted.
fn static_cluster(replicas: i64, budget: &str, node_limit: Option<&str>) -> ClusterSnapshot {
    let mut pool = node_pool(
        "static",
        ConsolidationPolicy::WhenEmptyOrUnderutilized,
        budget,
    );
    pool.node_pool.spec.replicas = Some(replicas);
    if let Some(limit) = node_limit {
        pool.node_pool.spec.limits = Some(rl(&[("nodes", limit)]));
    }
    let big = it("m5.2xlarge");
    let mut drifted = node("static-0", "static", &big, 2, "1");
    if let Some(claim) = drifted.node_claim.as_mut() {
        claim.status.conditions.push(condition("Drifted"));
    }
    snapshot(
        vec![pool],
        vec![
            drifted,
            node("static-1", "static", &big, 2, "1"),
            node("static-2", "static", &big, 2, "1"),
        ],
    )
}

/// StaticDrift (upstream `disruption/staticdrift.go`): each drifted node of a static NodePool is
/// replaced one for one from the template, without a scheduling simulation; consolidation never
/// touches static pools.
#[test]
fn static_drift_replaces_drifted_nodes_of_static_pools_one_for_one() {
    let pass = run_pass(
        &static_cluster(3, "100%", None),
        now(),
        &DisruptionOptions::default(),
        &|_| false,
    );
    assert_eq!(pass.commands.len(), 1);
    let cmd = &pass.commands[0];
    assert_eq!(cmd.method, Method::StaticDrift);
    assert_eq!(cmd.reason, Reason::Drifted);
    assert_eq!(names(cmd), ["static-0"]);
    assert_eq!(cmd.replacements.len(), 1);
    assert!(cmd.simulation.is_none());
    assert_eq!(cmd.replacements[0].node_pool, "static");
    assert_eq!(
        cmd.replacements[0].instance_types[0].name(),
        "m5.large",
        "cheapest first"
    );
}

#[test]
fn static_drift_waits_for_scale_down_budgets_and_node_limits() {
    let opts = DisruptionOptions::default();
    // More nodes running than replicas: wait until scale-down finishes.
    assert!(
        run_pass(&static_cluster(2, "100%", None), now(), &opts, &|_| false)
            .commands
            .is_empty()
    );
    // A closed budget.
    assert!(
        run_pass(&static_cluster(3, "0%", None), now(), &opts, &|_| false)
            .commands
            .is_empty()
    );
    // The node limit leaves no room for a replacement.
    assert!(
        run_pass(&static_cluster(3, "100%", Some("3")), now(), &opts, &|_| {
            false
        })
        .commands
        .is_empty()
    );
    // One spare node of limit: one replacement.
    let pass = run_pass(&static_cluster(3, "100%", Some("4")), now(), &opts, &|_| {
        false
    });
    assert_eq!(pass.commands.len(), 1);
}

/// A simulator prepared over one snapshot refuses candidates of another (their node is not in
/// it): the simulation would otherwise move their pods while keeping the node. With candidates
/// of its own snapshot, the same simulator runs.
#[test]
fn simulator_rejects_candidates_from_another_snapshot() {
    use karpenter_core::disruption::consolidation_candidates_of;
    use karpenter_core::disruption::simulate::{SimulationContext, SimulationError};

    let guide = guide_cluster("100%");
    let candidates = consolidation_candidates_of(&guide, now());
    let first = candidates
        .first()
        .expect("the guide's nodes are candidates");
    let other = snapshot(
        vec![node_pool(
            "default",
            ConsolidationPolicy::WhenEmptyOrUnderutilized,
            "100%",
        )],
        Vec::new(),
    );
    let options = DisruptionOptions::default();
    let context = SimulationContext::new(&other, &options.scheduler, now());
    let err = context
        .simulator()
        .simulate(&[first], true)
        .expect_err("not a node of this snapshot");
    assert_eq!(
        err,
        SimulationError::UnknownCandidate(first.name().to_string())
    );

    let context = SimulationContext::new(&guide, &options.scheduler, now());
    let sim = context
        .simulator()
        .simulate(&[first], true)
        .expect("a node of this snapshot");
    assert!(
        sim.all_non_pending_scheduled(),
        "{:?}",
        sim.displaced_errors
    );
}

/// Repeated simulations (the multi-node search's, sharing per-pod work) give what single ones
/// give, for every prefix of the candidates, also when the candidates are copies from another
/// snapshot of the same cluster (their pods are then not the snapshot's).
#[test]
fn repeated_simulations_equal_single_ones() {
    use karpenter_core::disruption::consolidation_candidates_of;
    use karpenter_core::disruption::simulate::{SimulationContext, SimulationError};

    let guide = guide_cluster("100%");
    let candidates = consolidation_candidates_of(&guide, now());
    assert!(candidates.len() >= 2, "the guide has several candidates");
    let copy = guide_cluster("100%");
    let copied = consolidation_candidates_of(&copy, now());
    let options = DisruptionOptions::default();
    let context = SimulationContext::new(&guide, &options.scheduler, now());
    let simulator = context.simulator();
    for set in [&candidates, &copied] {
        for n in 1..=set.len() {
            let refs: Vec<_> = set[..n].iter().collect();
            let single = simulator
                .simulate(&refs, true)
                .expect("candidates of the cluster");
            let repeated = simulator
                .simulate_repeated(&refs, true, None)
                .expect("candidates of the cluster");
            assert_eq!(
                format!("{:?}", repeated.results),
                format!("{:?}", single.results)
            );
            assert_eq!(repeated.displaced_errors, single.displaced_errors);
            // With a limit on new NodeClaims: stopped exactly when the full simulation needs
            // more, the same simulation otherwise.
            for limit in 0..2 {
                match simulator.simulate_repeated(&refs, true, Some(limit)) {
                    Err(e) => {
                        assert_eq!(e, SimulationError::TooManyNewNodeClaims(limit));
                        assert!(single.results.new_node_claims.len() > limit);
                    }
                    Ok(limited) => {
                        assert!(single.results.new_node_claims.len() <= limit);
                        assert_eq!(
                            format!("{:?}", limited.results),
                            format!("{:?}", single.results)
                        );
                    }
                }
            }
        }
    }
}

/// `m5.large` offered on demand only: nothing launches cheaper than one of its nodes.
fn on_demand_only_large() -> Arc<InstanceType> {
    let mut reqs = Requirements::new();
    reqs.add(Requirement::new(labels::ARCH, Operator::In, ["amd64"]));
    reqs.add(Requirement::new(labels::OS, Operator::In, ["linux"]));
    let offerings = vec![Offering::new(ZONE, labels::CAPACITY_TYPE_ON_DEMAND, 0.096)];
    Arc::new(InstanceType::new(
        "m5.large",
        reqs,
        offerings,
        rl(&[("cpu", "2"), ("memory", "8Gi"), ("pods", "58")]),
        Overhead {
            kube_reserved: rl(&[("cpu", "70m"), ("memory", "893Mi")]),
            eviction_threshold: rl(&[("memory", "100Mi")]),
            ..Overhead::default()
        },
    ))
}

/// What a pass decided: each command's method, candidates, replacements and savings; the
/// eligible counts; the methods that found the cluster consolidated.
fn decisions(pass: &karpenter_core::disruption::PassOutcome) -> String {
    let commands: Vec<_> = pass
        .commands
        .iter()
        .map(|c| {
            (
                c.method,
                names(c),
                c.replacements.len(),
                format!("{:.6}", c.savings_per_hour),
            )
        })
        .collect();
    format!(
        "{commands:?} {:?} {:?}",
        pass.eligible_nodes, pass.consolidated
    )
}

/// The single-node pre-check skips only simulations that cannot succeed: with it on, a pass
/// decides exactly as without it, and it recognises the nodes whose pod fits nowhere else when
/// nothing launches cheaper.
#[test]
fn single_node_precheck_changes_no_decision() {
    let large = on_demand_only_large();
    let mut pool = node_pool(
        "default",
        ConsolidationPolicy::WhenEmptyOrUnderutilized,
        "100%",
    );
    pool.instance_types = vec![Arc::clone(&large)];
    let full: Vec<StateNode> = (0..3)
        .map(|i| node(&format!("full-{i}"), "default", &large, 1, "1500m"))
        .collect();
    let on = DisruptionOptions::default().with_single_node_precheck(true);
    let off = DisruptionOptions::default();

    // Every pod fits only where it is: no decision, and the pre-check saw why.
    let hopeless = snapshot(vec![pool.clone()], full.clone());
    let with = run_pass(&hopeless, now(), &on, &|_| false);
    let without = run_pass(&hopeless, now(), &off, &|_| false);
    assert_eq!(decisions(&with), decisions(&without));
    assert!(with.commands.is_empty());
    let prechecked: Vec<&str> = with
        .blocked
        .iter()
        .filter(|(_, r)| r.contains("fits on no other node"))
        .map(|(n, _)| n.as_str())
        .collect();
    assert_eq!(prechecked, ["full-0", "full-1", "full-2"]);
    assert!(
        without
            .blocked
            .iter()
            .all(|(_, r)| !r.contains("fits on no other node"))
    );

    // Room on a node that has not initialized yet does not count: a displaced pod placed there
    // fails the simulation.
    let mut waiting = node("waiting", "default", &large, 0, "1");
    if let Some(n) = waiting.node.as_mut() {
        n.labels.remove(labels::INITIALIZED);
    }
    let mut nodes = full.clone();
    nodes.push(waiting);
    let uninitialized = snapshot(vec![pool.clone()], nodes);
    let with = run_pass(&uninitialized, now(), &on, &|_| false);
    let without = run_pass(&uninitialized, now(), &off, &|_| false);
    assert_eq!(decisions(&with), decisions(&without));
    let prechecked = with
        .blocked
        .iter()
        .filter(|(_, r)| r.contains("fits on no other node"))
        .count();
    assert_eq!(prechecked, 3);

    // A node with room: its neighbours' pods may move there, so the simulations run, and the
    // decision is the same with the pre-check on.
    let mut nodes = full;
    nodes.push(node("roomy", "default", &large, 1, "100m"));
    let room = snapshot(vec![pool.clone()], nodes);
    let with = run_pass(&room, now(), &on, &|_| false);
    let without = run_pass(&room, now(), &off, &|_| false);
    assert_eq!(decisions(&with), decisions(&without));
    assert!(!with.commands.is_empty());

    // Spot offered at 40 %: a cheaper replacement is possible, so the pre-check never decides.
    let mut cheaper = pool;
    cheaper.instance_types = vec![m5("m5.large", 2, 0.096)];
    let spot = snapshot(
        vec![cheaper],
        (0..3)
            .map(|i| node(&format!("full-{i}"), "default", &large, 1, "1500m"))
            .collect(),
    );
    let with = run_pass(&spot, now(), &on, &|_| false);
    let without = run_pass(&spot, now(), &off, &|_| false);
    assert_eq!(decisions(&with), decisions(&without));
    assert!(
        with.blocked
            .iter()
            .all(|(_, r)| !r.contains("fits on no other node"))
    );
}

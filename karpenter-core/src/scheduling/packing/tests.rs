use std::collections::BTreeMap;
use std::sync::Arc;

use super::*;
use crate::model::{DaemonSet, InstanceType, LabelSelector, Offering, Overhead, Pod};
use crate::model::{TopologySpreadConstraint, WhenUnsatisfiable};
use crate::requirements::{Operator, Requirement, Requirements};
use crate::resources::{Quantity, ResourceList};
use crate::scheduling::{NodePoolInput, SchedulerOptions, SchedulingInput, solve};

fn q(s: &str) -> Quantity {
    Quantity::parse(s).expect("valid quantity")
}

fn rl(pairs: &[(&str, &str)]) -> ResourceList {
    pairs.iter().map(|(k, v)| (*k, q(v))).collect()
}

/// An on-demand instance type offered in `zones`.
fn it(name: &str, cpu: &str, mem: &str, price: f64, zones: &[&str]) -> Arc<InstanceType> {
    let mut reqs = Requirements::new();
    reqs.add(Requirement::new(labels::ARCH, Operator::In, ["amd64"]));
    reqs.add(Requirement::new(labels::OS, Operator::In, ["linux"]));
    let offerings = zones
        .iter()
        .map(|z| Offering::new(*z, labels::CAPACITY_TYPE_ON_DEMAND, price))
        .collect();
    Arc::new(InstanceType::new(
        name,
        reqs,
        offerings,
        rl(&[("cpu", cpu), ("memory", mem), ("pods", "110")]),
        Overhead::default(),
    ))
}

/// Linear prices up to 8 CPU; the 16-CPU type costs a premium, so packing everything on it
/// (upstream) is dearer than two 8-CPU nodes.
fn catalog() -> Vec<Arc<InstanceType>> {
    let z = ["zone-a", "zone-b"];
    vec![
        it("c2", "2", "4Gi", 0.1, &z),
        it("c4", "4", "8Gi", 0.2, &z),
        it("c8", "8", "16Gi", 0.4, &z),
        it("c16", "16", "32Gi", 1.2, &z),
    ]
}

fn pods(n: usize, cpu: &str) -> Vec<Pod> {
    (0..n)
        .map(|i| {
            Pod::new("default", format!("p-{i}"))
                .with_requests([("cpu", q(cpu)), ("memory", q("1Gi"))])
        })
        .collect()
}

fn input(pool: NodePoolInput, pods: Vec<Pod>) -> SchedulingInput {
    SchedulingInput::new()
        .with_node_pools(vec![pool])
        .with_pods(pods)
}

fn cost_options() -> SchedulerOptions {
    SchedulerOptions::default()
        .with_packing(PackingOptions::default().with_policy(Some(PackingPolicy::Cost)))
}

fn shape(r: &Results) -> Vec<(String, Vec<String>, Vec<String>)> {
    r.new_node_claims
        .iter()
        .map(|c| {
            (
                c.node_pool.clone(),
                c.pods.clone(),
                c.instance_types
                    .iter()
                    .map(|t| t.name().to_string())
                    .collect(),
            )
        })
        .collect()
}

#[test]
fn the_annotation_parses_cost_and_upstream_and_rejects_anything_else() {
    let mut a = BTreeMap::new();
    assert_eq!(PackingPolicy::from_annotations(&a), Ok(None));
    a.insert(PACKING_ANNOTATION.to_string(), "cost".to_string());
    assert_eq!(
        PackingPolicy::from_annotations(&a),
        Ok(Some(PackingPolicy::Cost))
    );
    a.insert(PACKING_ANNOTATION.to_string(), "upstream".to_string());
    assert_eq!(
        PackingPolicy::from_annotations(&a),
        Ok(Some(PackingPolicy::Upstream))
    );
    a.insert(PACKING_ANNOTATION.to_string(), "cheap".to_string());
    let err = PackingPolicy::from_annotations(&a).unwrap_err();
    assert!(err.to_string().contains("\"cheap\""), "{err}");
    assert!(!PACKING_ANNOTATION.starts_with("karpenter.sh/"));
}

#[test]
fn without_a_cost_pool_the_result_is_the_faithful_solve() {
    let i = input(NodePoolInput::new("default", catalog()), pods(10, "1500m"));
    let faithful = solve(&i, &SchedulerOptions::default());
    let outcome = solve_packed(&i, &SchedulerOptions::default());
    assert!(!outcome.searched && !outcome.improved);
    assert_eq!(outcome.candidate_solves, 0);
    assert_eq!(shape(&outcome.results), shape(&faithful));
    // Upstream packs all ten pods on the 16-CPU type.
    assert_eq!(faithful.new_node_claims.len(), 1);
    assert!((outcome.cost - 1.2).abs() < 1e-9, "{}", outcome.cost);
}

#[test]
fn the_cost_policy_finds_the_cheaper_plan_and_schedules_every_pod() {
    let pool = NodePoolInput::new("default", catalog()).with_packing(Some(PackingPolicy::Cost));
    let i = input(pool, pods(10, "1500m"));
    let outcome = solve_packed(&i, &SchedulerOptions::default());
    assert!(outcome.searched && outcome.improved);
    assert!(outcome.results.pod_errors.is_empty());
    assert!((outcome.faithful_cost - 1.2).abs() < 1e-9);
    assert!((outcome.cost - 0.8).abs() < 1e-9, "{}", outcome.cost);
    let placed: usize = outcome
        .results
        .new_node_claims
        .iter()
        .map(|c| c.pods.len())
        .sum();
    assert_eq!(placed, 10);
    assert!(outcome.faithful.is_some());
}

#[test]
fn the_global_option_overrides_the_annotation() {
    let pool = NodePoolInput::new("default", catalog()).with_packing(Some(PackingPolicy::Cost));
    let i = input(pool, pods(10, "1500m"));
    let upstream = SchedulerOptions::default()
        .with_packing(PackingOptions::default().with_policy(Some(PackingPolicy::Upstream)));
    let outcome = solve_packed(&i, &upstream);
    assert!(!outcome.searched);
    assert_eq!(shape(&outcome.results), shape(&solve(&i, &upstream)));
    let i = input(NodePoolInput::new("default", catalog()), pods(10, "1500m"));
    assert!(solve_packed(&i, &cost_options()).improved);
}

#[test]
fn the_cost_policy_never_returns_a_dearer_plan() {
    // One small pod: the faithful plan is already the cheapest node.
    let i = input(NodePoolInput::new("default", catalog()), pods(1, "500m"));
    let faithful = solve(&i, &SchedulerOptions::default());
    let outcome = solve_packed(&i, &cost_options());
    assert!(!outcome.improved);
    assert_eq!(shape(&outcome.results), shape(&faithful));
    assert!(outcome.cost <= outcome.faithful_cost);
}

#[test]
fn the_node_count_guard_rail_keeps_the_faithful_plan() {
    let i = input(NodePoolInput::new("default", catalog()), pods(10, "1500m"));
    let options = SchedulerOptions::default().with_packing(
        PackingOptions::default()
            .with_policy(Some(PackingPolicy::Cost))
            .with_max_new_nodes(1),
    );
    let outcome = solve_packed(&i, &options);
    assert!(!outcome.improved);
    assert_eq!(outcome.results.new_node_claims.len(), 1);
}

#[test]
fn the_minimum_node_size_guard_rail_keeps_small_types_out() {
    // Twelve 500m pods: without a floor the search could use 2-CPU nodes; with a 4-CPU floor
    // every cost-aware node has at least 4 CPU.
    let i = input(NodePoolInput::new("default", catalog()), pods(24, "700m"));
    let options = SchedulerOptions::default().with_packing(
        PackingOptions::default()
            .with_policy(Some(PackingPolicy::Cost))
            .with_min_node_cpu_millis(4000),
    );
    let outcome = solve_packed(&i, &options);
    assert!(outcome.improved);
    for c in &outcome.results.new_node_claims {
        assert!(
            c.instance_types.iter().all(|t| cpu_millis(t) >= 4000),
            "{:?}",
            c.instance_types
                .iter()
                .map(|t| t.name())
                .collect::<Vec<_>>()
        );
    }
}

#[test]
fn daemonset_overhead_and_limits_hold_under_the_cost_policy() {
    let ds = DaemonSet::new(
        "kube-system",
        "agent",
        Pod::new("kube-system", "agent").with_requests([("cpu", q("1")), ("memory", q("1Gi"))]),
    );
    let pool = NodePoolInput::new("default", catalog()).with_limits(rl(&[("cpu", "24")]));
    let i = input(pool, pods(10, "1500m")).with_daemonsets(vec![ds]);
    let outcome = solve_packed(&i, &cost_options());
    assert!(outcome.results.pod_errors.is_empty());
    assert!(outcome.cost <= outcome.faithful_cost);
    let policy = LabelPolicy::core();
    let mut limit_used = 0;
    for c in &outcome.results.new_node_claims {
        // The claim's requests include the DaemonSet and fit the type it launches as.
        assert!(c.requests.get_or_zero("cpu") >= q("1") + q("1500m"));
        let launch = c
            .instance_types
            .iter()
            .find(|t| t.cheapest_offering(&c.requirements, &policy).is_some())
            .expect("a launchable type");
        assert!(ResourceList::fits(&c.requests, launch.allocatable()));
        limit_used += c
            .instance_types
            .iter()
            .map(|t| cpu_millis(t))
            .max()
            .unwrap_or(0);
    }
    assert!(limit_used <= 24_000, "{limit_used}");
}

#[test]
fn a_cap_that_would_hide_a_zone_from_a_spread_constraint_is_not_tried() {
    // The 2-CPU type exists in zone-a only: capping at 2 CPU would hide zone-b from the
    // pods' zone spread.
    let types = vec![
        it("c2", "2", "4Gi", 0.1, &["zone-a"]),
        it("c8", "8", "16Gi", 0.4, &["zone-a", "zone-b"]),
    ];
    let spread = TopologySpreadConstraint {
        max_skew: 1,
        topology_key: labels::ZONE.to_string(),
        when_unsatisfiable: WhenUnsatisfiable::DoNotSchedule,
        label_selector: Some(LabelSelector {
            match_labels: BTreeMap::from([("app".to_string(), "web".to_string())]),
            match_expressions: Vec::new(),
        }),
        min_domains: None,
        node_affinity_policy: None,
        node_taints_policy: None,
        match_label_keys: Vec::new(),
    };
    let spread_pods: Vec<Pod> = pods(4, "500m")
        .into_iter()
        .map(|mut p| {
            p.labels.insert("app".into(), "web".into());
            p.topology_spread_constraints = vec![spread.clone()];
            p
        })
        .collect();
    let i = input(NodePoolInput::new("default", types), spread_pods);
    let options = cost_options();
    let faithful = solve(&i, &options);
    let policies = pool_policies(&i, &options);
    let search = Search::new(&i, &options, &policies, &faithful);
    assert!(search.capped_pools(2000).is_none());
    let outcome = solve_packed(&i, &options);
    assert!(outcome.results.pod_errors.is_empty());
    let zones: std::collections::BTreeSet<String> = outcome
        .results
        .new_node_claims
        .iter()
        .flat_map(|c| c.requirements.get(labels::ZONE).into_iter())
        .flat_map(|r| r.values().map(str::to_string).collect::<Vec<_>>())
        .collect();
    assert!(zones.contains("zone-b"), "{zones:?}");
}

/// A spot and on-demand instance type in zones a and b.
fn spot_it(name: &str, cpu: i64, price: f64) -> Arc<InstanceType> {
    let offerings = ["zone-a", "zone-b"]
        .iter()
        .flat_map(|z| {
            [
                Offering::new(*z, labels::CAPACITY_TYPE_SPOT, price),
                Offering::new(*z, labels::CAPACITY_TYPE_ON_DEMAND, price),
            ]
        })
        .collect();
    let mut reqs = Requirements::new();
    reqs.add(Requirement::new(labels::ARCH, Operator::In, ["amd64"]));
    reqs.add(Requirement::new(labels::OS, Operator::In, ["linux"]));
    Arc::new(InstanceType::new(
        name,
        reqs,
        offerings,
        rl(&[
            ("cpu", &cpu.to_string()),
            ("memory", &format!("{}Gi", 4 * cpu)),
            ("pods", "110"),
        ]),
        Overhead::default(),
    ))
}

/// 2-8 CPU at 0.05 per CPU, 9-16 CPU at a premium (0.1 per CPU).
fn premium_catalog() -> Vec<Arc<InstanceType>> {
    (2..=16)
        .map(|k| {
            spot_it(
                &format!("c{k}"),
                k,
                if k <= 8 { 0.05 } else { 0.1 } * k as f64,
            )
        })
        .collect()
}

/// `n` pods of `cpu` spread over zones (maxSkew 1).
fn spread_pods(n: usize, cpu: &str) -> Vec<Pod> {
    let spread = TopologySpreadConstraint {
        max_skew: 1,
        topology_key: labels::ZONE.to_string(),
        when_unsatisfiable: WhenUnsatisfiable::DoNotSchedule,
        label_selector: Some(LabelSelector {
            match_labels: BTreeMap::from([("app".to_string(), "web".to_string())]),
            match_expressions: Vec::new(),
        }),
        min_domains: None,
        node_affinity_policy: None,
        node_taints_policy: None,
        match_label_keys: Vec::new(),
    };
    pods(n, cpu)
        .into_iter()
        .map(|mut p| {
            p.labels.insert("app".into(), "web".into());
            p.topology_spread_constraints = vec![spread.clone()];
            p
        })
        .collect()
}

fn packing(r: &Results) -> Vec<Vec<String>> {
    r.new_node_claims.iter().map(|c| c.pods.clone()).collect()
}

#[test]
fn caps_at_or_above_the_repeat_cap_repeat_the_faithful_packing() {
    let i = input(
        NodePoolInput::new("default", premium_catalog()),
        spread_pods(20, "1500m"),
    );
    let options = cost_options();
    let faithful = solve(&i, &options);
    let policies = pool_policies(&i, &options);
    let search = Search::new(&i, &options, &policies, &faithful);
    // Each zone's claim holds 10 pods (15 CPU): only the 15- and 16-CPU types hold it.
    assert_eq!(search.repeat_cap, Some(15_000));
    for cap in [15_000, 16_000] {
        let mut work = i.clone();
        for (p, kept) in search.capped_pools(cap).expect("same domains") {
            work.node_pools[p].instance_types = kept;
        }
        assert_eq!(
            packing(&solve(&work, &options)),
            packing(&faithful),
            "cap {cap}"
        );
    }
    // So the sweep only tries caps below it, and above the floor (a 1.5-CPU pod needs 2).
    let caps = search.caps();
    assert!(!caps.is_empty());
    assert!(
        caps.iter().all(|&c| (2_000..15_000).contains(&c)),
        "{caps:?}"
    );
    assert!(caps.windows(2).all(|w| w[0] < w[1]), "{caps:?}");
}

#[test]
fn a_reserved_offering_voids_the_repeat_cap() {
    let mut types = premium_catalog();
    let mut reserved = (*types[0]).clone();
    reserved.offerings.push(Offering::reserved(
        "zone-a",
        "r-1",
        1,
        0.01,
        "example.com/reservation-id",
    ));
    types[0] = Arc::new(reserved);
    let i = input(
        NodePoolInput::new("default", types),
        spread_pods(20, "1500m"),
    );
    let options = cost_options();
    let faithful = solve(&i, &options);
    let search = Search::new(&i, &options, &pool_policies(&i, &options), &faithful);
    assert_eq!(search.repeat_cap, None);
}

#[test]
fn widening_restores_spot_flexibility_with_types_that_hold_the_claim() {
    let i = input(
        NodePoolInput::new("default", premium_catalog()),
        spread_pods(20, "1500m"),
    );
    let options = SchedulerOptions::default().with_packing(
        PackingOptions::default()
            .with_policy(Some(PackingPolicy::Cost))
            .with_spot_min_instance_types(2),
    );
    let faithful = solve(&i, &options);
    let search = Search::new(&i, &options, &pool_policies(&i, &options), &faithful);
    assert_eq!(search.guard.spot_min_types, 2);
    let mut work = i.clone();
    for (p, kept) in search.capped_pools(3_000).expect("same domains") {
        work.node_pools[p].instance_types = kept;
    }
    let capped = solve(&work, &options);
    // Two 1.5-CPU pods fill a 3-CPU claim: the cap leaves it one instance type.
    assert!(
        capped
            .new_node_claims
            .iter()
            .any(|c| c.instance_types.len() < 2)
    );
    assert!(!search.guard.accepts(&capped));
    let widened = search.widen(capped.clone());
    assert_eq!(packing(&widened), packing(&capped));
    assert!(search.guard.accepts(&widened));
    let policy = LabelPolicy::core();
    for c in &widened.new_node_claims {
        assert!(c.instance_types.len() >= 2);
        let prices: Vec<f64> = c
            .instance_types
            .iter()
            .map(|t| {
                t.cheapest_offering(&c.requirements, &policy)
                    .expect("offering")
                    .price
            })
            .collect();
        assert!(prices.windows(2).all(|w| w[0] <= w[1]), "{prices:?}");
        for t in &c.instance_types {
            assert!(ResourceList::fits(&c.requests, t.allocatable()));
        }
    }
}

#[test]
fn the_cap_sweep_beats_a_premium_type_under_a_spread_constraint() {
    let i = input(
        NodePoolInput::new("default", premium_catalog()),
        spread_pods(20, "1500m"),
    );
    let options = cost_options();
    let outcome = solve_packed(&i, &options);
    assert!(
        outcome.improved,
        "{} vs {}",
        outcome.cost, outcome.faithful_cost
    );
    assert!(outcome.results.pod_errors.is_empty());
    assert!(outcome.cost < outcome.faithful_cost);
    // The spread holds: ten pods per zone.
    let mut per_zone: BTreeMap<String, usize> = BTreeMap::new();
    for c in &outcome.results.new_node_claims {
        let zone = c
            .requirements
            .get(labels::ZONE)
            .and_then(|r| r.values().next().map(str::to_string))
            .expect("a zone");
        *per_zone.entry(zone).or_default() += c.pods.len();
    }
    assert_eq!(per_zone.values().copied().collect::<Vec<_>>(), vec![10, 10]);
}

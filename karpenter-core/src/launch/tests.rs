use std::sync::{Arc, Mutex};

use async_trait::async_trait;

use super::*;
use crate::api::{NodeClaimTemplate, NodeClaimTemplateSpec, NodeClassReference, NodePoolSpec};
use crate::cloud::{CloudProvider, CloudProviderError, NodeClassKind, RepairPolicy};
use crate::model::{Overhead, Pod};
use crate::requirements::{NodeSelectorRequirement, Requirement};
use crate::resources::Quantity;
use crate::scheduling::{NodePoolInput, SchedulerOptions, SchedulingInput, solve};
use crate::taints::{Taint, TaintEffect};

fn resources(cpu: i64) -> ResourceList {
    [
        ("cpu", Quantity::from_units(cpu)),
        ("pods", Quantity::from_units(10)),
    ]
    .into_iter()
    .collect()
}

fn instance_type(name: &str, cpu: i64, offerings: Vec<Offering>) -> Arc<InstanceType> {
    Arc::new(InstanceType::new(
        name,
        Requirements::new(),
        offerings,
        resources(cpu),
        Overhead::default(),
    ))
}

fn pool() -> NodePool {
    let class = NodeClassReference::new("example.com", "ExampleNodeClass", "default");
    let mut spec = NodeClaimTemplateSpec::new(class);
    spec.requirements = Some(vec![
        NodeSelectorRequirement::new(
            labels::INSTANCE_TYPE,
            Operator::Exists,
            Vec::<String>::new(),
        )
        .with_min_values(Some(1)),
    ]);
    spec.taints = vec![Taint::new("dedicated", "web", TaintEffect::NoSchedule)];
    spec.startup_taints = vec![Taint::new("startup", "", TaintEffect::NoSchedule)];
    let mut template = NodeClaimTemplate::new(spec);
    template
        .metadata
        .labels
        .insert("team".to_string(), "web".to_string());
    template
        .metadata
        .annotations
        .insert("example.com/owner".to_string(), "web".to_string());
    let mut pool = NodePool::new("web", NodePoolSpec::new(template));
    pool.metadata.uid = Some("uid-1".to_string());
    pool
}

fn solved(pool: &NodePool, types: Vec<Arc<InstanceType>>) -> NewNodeClaim {
    let mut pod = Pod::new("default", "p").with_requests([("cpu", Quantity::from_units(1))]);
    pod.tolerations = vec![crate::taints::Toleration::exists("dedicated")];
    let input = SchedulingInput {
        node_pools: vec![NodePoolInput::from_nodepool(pool, types)],
        pods: vec![pod],
        ..SchedulingInput::default()
    };
    let results = solve(&input, &SchedulerOptions::default());
    assert!(results.pod_errors.is_empty(), "{:?}", results.pod_errors);
    results.new_node_claims.into_iter().next().unwrap()
}

#[test]
fn to_node_claim_carries_the_template_and_the_pinned_requirements() {
    let pool = pool();
    let types = vec![
        instance_type("b", 4, vec![Offering::new("z1", "spot", 0.2)]),
        instance_type("a", 2, vec![Offering::new("z1", "on-demand", 0.1)]),
    ];
    let claim = solved(&pool, types);
    let policy = LabelPolicy::core();
    let nc = to_node_claim(&claim, &pool, &policy);

    assert_eq!(nc.name(), "");
    assert_eq!(nc.metadata.extra[GENERATE_NAME], "web-");
    assert_eq!(nc.metadata.labels[labels::NODEPOOL], "web");
    assert_eq!(nc.metadata.labels["team"], "web");
    assert_eq!(nc.metadata.annotations["example.com/owner"], "web");
    assert_eq!(
        nc.metadata.annotations[labels::NODEPOOL_HASH_ANNOTATION],
        crate::lifecycle::nodepool_hash(&pool)
    );
    assert!(
        nc.metadata
            .annotations
            .contains_key(labels::NODEPOOL_HASH_VERSION_ANNOTATION)
    );
    assert_eq!(
        nc.metadata.annotations[labels::MIN_VALUES_RELAXED_ANNOTATION],
        "false"
    );
    let owner = &nc.metadata.owner_references[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str(), owner.uid.as_str()),
        ("NodePool", "web", "uid-1")
    );
    assert_eq!(owner.block_owner_deletion, Some(true));

    assert_eq!(
        nc.spec.node_class_ref,
        pool.spec.template.spec.node_class_ref
    );
    assert_eq!(nc.spec.taints, pool.spec.template.spec.taints);
    assert_eq!(
        nc.spec.startup_taints,
        pool.spec.template.spec.startup_taints
    );
    assert_eq!(
        nc.spec.resources.requests.get("cpu"),
        Some(Quantity::from_units(1))
    );
    let reqs = Requirements::from_node_selector_requirements(nc.spec.requirements());
    let it = reqs.get(labels::INSTANCE_TYPE).unwrap();
    assert_eq!(it.values().collect::<Vec<_>>(), ["a", "b"]);
    assert_eq!(it.min_values(), Some(1), "minValues is kept");
    let ct = reqs.get(labels::CAPACITY_TYPE).unwrap();
    assert_eq!(ct.values().collect::<Vec<_>>(), ["on-demand", "spot"]);
    // The claim resolves back to the cheapest offering.
    let launch = resolve_launch(&nc, &claim.instance_types, &policy, None, |_, _| false).unwrap();
    assert_eq!(launch.instance_type().name(), "a");
    assert_eq!(claim.launch_price(&policy), Some(0.1));
}

#[test]
fn without_min_values_no_relaxed_annotation() {
    let mut pool = pool();
    pool.spec.template.spec.requirements = Some(Vec::new());
    let claim = solved(
        &pool,
        vec![instance_type(
            "a",
            2,
            vec![Offering::new("z1", "spot", 0.1)],
        )],
    );
    let nc = to_node_claim(&claim, &pool, &LabelPolicy::core());
    assert!(
        !nc.metadata
            .annotations
            .contains_key(labels::MIN_VALUES_RELAXED_ANNOTATION)
    );
}

#[test]
fn choose_launch_takes_the_cheapest_fitting_type_and_prefers_reserved() {
    let policy = LabelPolicy::core().with_well_known(["example.com/reservation"]);
    let mut unavailable = Offering::new("z1", "spot", 0.01);
    unavailable.available = false;
    let types = vec![
        instance_type("small", 1, vec![Offering::new("z1", "spot", 0.05)]),
        instance_type(
            "big",
            8,
            vec![
                unavailable,
                Offering::new("z2", "on-demand", 0.3),
                Offering::new("z1", "spot", 0.2),
                Offering::reserved("z3", "r-1", 1, 0.25, "example.com/reservation"),
            ],
        ),
    ];
    let requests = resources(2);
    let choice = choose_launch(&types, &Requirements::new(), &requests, &policy, |_, _| {
        false
    })
    .unwrap();
    assert_eq!(
        choice,
        LaunchChoice {
            instance_type: 1,
            offering: 3
        },
        "small does not fit; big's reserved offering wins over its cheaper spot one"
    );
    // Excluding the reservation: the cheapest usable offering.
    let choice = choose_launch(&types, &Requirements::new(), &requests, &policy, |_, o| {
        o.is_reserved()
    })
    .unwrap();
    assert_eq!(choice.offering, 2);
    // Excluding spot too: on-demand.
    let choice = choose_launch(&types, &Requirements::new(), &requests, &policy, |_, o| {
        o.is_reserved() || o.capacity_type() == "spot"
    })
    .unwrap();
    assert_eq!(choice.offering, 1);
    // A zone requirement narrows the offerings.
    let mut zone = Requirements::new();
    zone.add(Requirement::new(labels::ZONE, Operator::In, ["z2"]));
    let choice = choose_launch(&types, &zone, &requests, &policy, |_, _| false).unwrap();
    assert_eq!(choice.offering, 1);
    // Nothing fits 100 CPUs.
    assert_eq!(
        choose_launch(&types, &zone, &resources(100), &policy, |_, _| false),
        None
    );
}

#[test]
fn launch_labels_resolve_values_and_the_reservation() {
    let mut reqs = Requirements::new();
    reqs.add(Requirement::new(
        labels::OS,
        Operator::In,
        ["darwin", "linux"],
    ));
    let it = InstanceType::new(
        "t",
        reqs,
        vec![Offering::reserved("z1", "r-9", 2, 0.1, "example.com/res")],
        resources(1),
        Overhead::default(),
    );
    let offering = &it.offerings[0];
    let mut claim_reqs = Requirements::new();
    claim_reqs.add(Requirement::new(labels::OS, Operator::In, ["linux"]));
    let claim_labels = [("team".to_string(), "web".to_string())].into();
    let out = launch_labels(
        &it,
        offering,
        &claim_reqs,
        &claim_labels,
        Some("example.com/res"),
    );
    assert_eq!(out[labels::OS], "linux");
    assert_eq!(out[labels::ZONE], "z1");
    assert_eq!(out[labels::CAPACITY_TYPE], "reserved");
    assert_eq!(out[labels::INSTANCE_TYPE], "t");
    assert_eq!(out["example.com/res"], "r-9");
    assert_eq!(out["team"], "web");
    let out = launch_labels(&it, offering, &claim_reqs, &claim_labels, None);
    assert!(!out.contains_key("example.com/res"));
}

#[test]
fn launch_labels_carry_the_offerings_own_labels() {
    let it = InstanceType::new(
        "t",
        Requirements::new(),
        vec![
            Offering::reserved("z1", "r-9", 2, 0.1, "example.com/res")
                .with_label("example.com/res-type", Some("default"))
                .with_label("example.com/absent", None),
        ],
        resources(1),
        Overhead::default(),
    );
    let claim_labels = [("example.com/res-type".to_string(), "mine".to_string())].into();
    let out = launch_labels(
        &it,
        &it.offerings[0],
        &Requirements::new(),
        &BTreeMap::new(),
        None,
    );
    assert_eq!(out["example.com/res-type"], "default");
    assert!(!out.contains_key("example.com/absent"));
    // The claim's own labels still win.
    let out = launch_labels(
        &it,
        &it.offerings[0],
        &Requirements::new(),
        &claim_labels,
        None,
    );
    assert_eq!(out["example.com/res-type"], "mine");
}

#[test]
fn launched_fills_status_from_the_offering() {
    let mut over = Offering::new("z1", "spot", 0.1);
    over.capacity_override = Some(
        [("example.com/gpu", Quantity::from_units(1))]
            .into_iter()
            .collect(),
    );
    let types = vec![instance_type("g", 2, vec![over])];
    let mut nc = NodeClaim::new("n", NodeClaimSpec::new(NodeClassReference::default()));
    nc.metadata.finalizers = vec!["karpenter.sh/termination".into()];
    nc.metadata.annotations.insert("team".into(), "web".into());
    nc.metadata.creation_timestamp = Some("2024-01-01T00:00:00Z".into());
    nc.status.conditions = vec![crate::api::Condition {
        type_: "Launched".into(),
        status: crate::api::ConditionStatus::Unknown,
        ..Default::default()
    }];
    let launch = resolve_launch(&nc, &types, &LabelPolicy::core(), None, |_, _| false).unwrap();
    assert_eq!(launch.price(), 0.1);
    let launched = launch.launched(&nc, "x://1");
    // An instance holds the claim's name, annotations and spec, not its finalizers, times or
    // conditions (as upstream's fake provider builds it).
    assert_eq!(launched.name(), "n");
    assert_eq!(launched.spec, nc.spec);
    assert_eq!(launched.metadata.annotations["team"], "web");
    assert!(launched.metadata.finalizers.is_empty());
    assert!(launched.metadata.creation_timestamp.is_none());
    assert!(launched.status.conditions.is_empty());
    assert_eq!(launched.status.provider_id.as_deref(), Some("x://1"));
    assert_eq!(
        launched.status.capacity.get("example.com/gpu"),
        Some(Quantity::from_units(1))
    );
    assert_eq!(
        launched.status.allocatable.get("cpu"),
        Some(Quantity::from_units(2))
    );
    assert_eq!(launched.metadata.labels[labels::INSTANCE_TYPE], "g");
}

#[test]
fn consume_reservation_runs_out() {
    let mut it = instance_type(
        "r",
        1,
        vec![
            Offering::new("z1", "spot", 0.1),
            Offering::reserved("z1", "r-1", 1, 0.1, "example.com/res"),
        ],
    );
    let shared = Arc::clone(&it);
    consume_reservation(&mut it, 0);
    assert!(
        Arc::ptr_eq(&it, &shared),
        "non-reserved offerings are left alone"
    );
    consume_reservation(&mut it, 1);
    assert!(!it.offerings[1].available);
    assert_eq!(it.offerings[1].reservation_capacity, 0);
    assert!(
        shared.offerings[1].available,
        "a shared type is copied first"
    );
}

/// A provider whose instance types carry a provider label, `example.com/family`.
struct Family {
    types: Vec<Arc<InstanceType>>,
    launched: Mutex<Vec<NodeClaim>>,
}

#[async_trait]
impl CloudProvider for Family {
    async fn create(&self, node_claim: &NodeClaim) -> Result<NodeClaim, CloudProviderError> {
        let launch = resolve_launch(
            node_claim,
            &self.types,
            &self.label_policy(),
            None,
            |_, _| false,
        )
        .ok_or_else(|| CloudProviderError::other("no capacity"))?;
        let mut launched = self.launched.lock().unwrap();
        let claim = launch.launched(node_claim, format!("family://{}", launched.len()));
        launched.push(claim.clone());
        Ok(claim)
    }
    async fn delete(&self, _: &NodeClaim) -> Result<(), CloudProviderError> {
        Ok(())
    }
    async fn get(&self, id: &str) -> Result<NodeClaim, CloudProviderError> {
        Err(CloudProviderError::not_found(id))
    }
    async fn list(&self) -> Result<Vec<NodeClaim>, CloudProviderError> {
        Ok(self.launched.lock().unwrap().clone())
    }
    async fn instance_types(
        &self,
        _: &NodePool,
    ) -> Result<Vec<Arc<InstanceType>>, CloudProviderError> {
        Ok(self.types.clone())
    }
    async fn is_drifted(&self, _: &NodeClaim) -> Result<Option<String>, CloudProviderError> {
        Ok(None)
    }
    fn repair_policies(&self) -> Vec<RepairPolicy> {
        Vec::new()
    }
    fn name(&self) -> &str {
        "family"
    }
    fn well_known_labels(&self) -> Vec<String> {
        vec!["example.com/family".to_string()]
    }
    fn restricted_label_domains(&self) -> Vec<String> {
        vec!["example.com".to_string()]
    }
    fn supported_node_classes(&self) -> Vec<NodeClassKind> {
        vec![NodeClassKind::new("example.com", "ExampleNodeClass")]
    }
}

fn family_type(name: &str, family: &str, price: f64) -> Arc<InstanceType> {
    let mut reqs = Requirements::new();
    reqs.add(Requirement::new(
        "example.com/family",
        Operator::In,
        [family],
    ));
    Arc::new(InstanceType::new(
        name,
        reqs,
        vec![Offering::new("z1", "on-demand", price)],
        resources(4),
        Overhead::default(),
    ))
}

#[test]
fn a_pod_selecting_a_provider_label_schedules_with_the_providers_options() {
    let provider = Family {
        types: vec![family_type("c1", "c", 0.1), family_type("m1", "m", 0.2)],
        launched: Mutex::new(Vec::new()),
    };
    let dyn_provider: &dyn CloudProvider = &provider;
    let mut pool = pool();
    pool.spec.template.spec.requirements = Some(Vec::new());
    pool.spec.template.spec.taints.clear();
    let pod = Pod::new("default", "p").with_node_selector([("example.com/family", "m")]);
    let input = SchedulingInput {
        node_pools: vec![NodePoolInput::from_nodepool(&pool, provider.types.clone())],
        pods: vec![pod],
        ..SchedulingInput::default()
    };
    // Core's policy alone: the provider's domain is not restricted, the key is not well
    // known, so the pool (which does not define it) cannot satisfy the pod.
    let core = solve(&input, &SchedulerOptions::default());
    assert_eq!(core.pod_errors.len(), 1);

    let options = SchedulerOptions::for_provider(dyn_provider);
    assert!(options.label_policy.is_well_known("example.com/family"));
    assert!(options.label_policy.is_restricted("example.com/other"));
    let results = solve(&input, &options);
    assert!(results.pod_errors.is_empty(), "{:?}", results.pod_errors);
    let claim = &results.new_node_claims[0];
    let nc = to_node_claim(claim, &pool, &options.label_policy);
    let launched = futures::executor::block_on(dyn_provider.create(&nc)).unwrap();
    assert_eq!(launched.metadata.labels[labels::INSTANCE_TYPE], "m1");
    assert_eq!(launched.metadata.labels["example.com/family"], "m");

    assert!(dyn_provider.supports_node_class(&pool.spec.template.spec.node_class_ref));
    assert!(!dyn_provider.supports_node_class(&NodeClassReference::new(
        "karpenter.k8s.aws",
        "EC2NodeClass",
        "default"
    )));
    assert_eq!(dyn_provider.reservation_id_label(), None);
}

//! `karpenter_core::lifecycle`: NodeClaim lifecycle timeouts and reasons, drain tiers and
//! forced deletion, expiration, garbage collection, drift precedence and the NodePool hash,
//! node repair, and the disruption command queue (upstream `orchestration/queue_test.go`).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use jiff::{SignedDuration, Timestamp};
use karpenter_core::api::{
    Budget, ConditionStatus, DisruptionReason, Duration, NillableDuration, NodeClaim,
    NodeClaimSpec, NodeClaimTemplate, NodeClaimTemplateSpec, NodeClassReference, NodePool,
    NodePoolSpec, find_condition,
};
use karpenter_core::labels;
use karpenter_core::lifecycle::conditions::{
    self, ConditionSet, DRAINED, DRIFTED, INITIALIZED, LAUNCHED, READY, REGISTERED,
};
use karpenter_core::lifecycle::drift::{
    self, DriftCheck, DriftOptions, DriftReason, HASH_VERSION, drift_condition_update,
    drift_reason, hash_reconcile, nodepool_hash,
};
use karpenter_core::lifecycle::expiration::{ExpirationDecision, expiration_decision};
use karpenter_core::lifecycle::gc::garbage_collect;
use karpenter_core::lifecycle::nodeclaim::{
    CreateOutcome, HealthStatus, HookStatus, LifecycleInputs, RegistrationHealth, RegistrationHook,
    initialization_decision, launch_decision, liveness_decision, reasons, reconcile_lifecycle,
    registration_decision,
};
use karpenter_core::lifecycle::queue::{
    self, CommandCandidate, CommandQueue, QueueError, QueueOutcome, QueuedCommand,
    ReplacementState, Step, retry_duration,
};
use karpenter_core::lifecycle::repair::{
    RepairDecision, RepairPolicy, RepairScope, is_unhealthy, repair_actions, repair_decision,
};
use karpenter_core::lifecycle::termination::{
    DrainedDecision, FinalizeStep, VolumeDecision, drain_plan, drained_decision, finalize_claim,
    termination_timestamp, termination_timestamp_annotation, volume_detachment_decision,
};
use karpenter_core::lifecycle::{
    Node, NodeCondition, TERMINATION_FINALIZER, TERMINATION_TIMESTAMP_ANNOTATION, format_time,
};
use karpenter_core::model::{InstanceType, Offering, Overhead, OwnerReference, Pod, PodPhase};
use karpenter_core::requirements::{NodeSelectorRequirement, Operator, Requirements};
use karpenter_core::resources::{Quantity, ResourceList};
use karpenter_core::taints::{Taint, TaintEffect, Toleration, TolerationOperator};
use proptest::prelude::*;

// ---------------------------------------------------------------------------------------------
// Helpers

fn t(s: &str) -> Timestamp {
    s.parse().unwrap()
}

fn t0() -> Timestamp {
    t("2024-01-01T00:00:00Z")
}

fn after(d: SignedDuration) -> Timestamp {
    t0() + d
}

fn mins(n: i64) -> SignedDuration {
    SignedDuration::from_mins(n)
}

fn secs(n: i64) -> SignedDuration {
    SignedDuration::from_secs(n)
}

fn class_ref() -> NodeClassReference {
    NodeClassReference::new("karpenter.test", "TestNodeClass", "default")
}

/// A new NodeClaim of pool `default`, created at t0.
fn claim(name: &str) -> NodeClaim {
    let mut c = NodeClaim::new(name, NodeClaimSpec::new(class_ref()));
    c.metadata.uid = Some(format!("uid-{name}"));
    c.metadata.creation_timestamp = Some(format_time(t0()));
    c.metadata
        .labels
        .insert(labels::NODEPOOL.into(), "default".into());
    c.metadata
        .labels
        .insert(labels::CAPACITY_TYPE.into(), "on-demand".into());
    c.metadata.finalizers.push(TERMINATION_FINALIZER.into());
    c
}

fn provider_launch(c: &NodeClaim) -> CreateOutcome {
    let mut launched = c.clone();
    launched.status.provider_id = Some(format!("test:///{}", c.name()));
    launched.status.image_id = Some("img-1".into());
    launched
        .metadata
        .labels
        .insert(labels::INSTANCE_TYPE.into(), "m.large".into());
    launched
        .metadata
        .labels
        .insert(labels::ZONE.into(), "zone-a".into());
    launched
        .metadata
        .labels
        .insert(labels::CAPACITY_TYPE.into(), "spot".into());
    launched
        .metadata
        .annotations
        .insert("provider/annotation".into(), "p".into());
    let mut cap = ResourceList::new();
    cap.insert("cpu", Quantity::from_units(4));
    launched.status.capacity = cap.clone();
    launched.status.allocatable = cap;
    CreateOutcome::Created(Box::new(launched))
}

/// A claim launched at t0.
fn launched(name: &str) -> NodeClaim {
    let c = claim(name);
    launch_decision(&c, &provider_launch(&c), t0()).claim
}

fn ready_node(name: &str, provider_id: &str) -> Node {
    let mut n = Node::new(name, provider_id);
    n.conditions
        .push(NodeCondition::new("Ready", ConditionStatus::True, t0()));
    n
}

/// A claim launched and registered at t0 with its node `node-<name>`.
fn registered(name: &str) -> (NodeClaim, Node) {
    let c = launched(name);
    let pid = c.status.provider_id.clone().unwrap();
    let mut node = ready_node(&format!("node-{name}"), &pid);
    node.taints
        .push(karpenter_core::lifecycle::unregistered_taint());
    let step = registration_decision(&c, std::slice::from_ref(&node), &[], t0());
    step.node_update.unwrap().apply(&mut node);
    (step.claim, node)
}

fn cond<'a>(c: &'a NodeClaim, type_: &str) -> &'a karpenter_core::api::Condition {
    find_condition(&c.status.conditions, type_).unwrap_or_else(|| panic!("no {type_}"))
}

fn status(c: &NodeClaim, type_: &str) -> ConditionStatus {
    cond(c, type_).status
}

fn reason(c: &NodeClaim, type_: &str) -> String {
    cond(c, type_).reason.clone().unwrap_or_default()
}

// ---------------------------------------------------------------------------------------------
// Launch

#[test]
fn launch_success_copies_provider_details() {
    let mut c = claim("a");
    c.metadata
        .annotations
        .insert("provider/annotation".into(), "mine".into());
    let step = launch_decision(&c, &provider_launch(&c), t0());
    assert!(step.claim_changed && step.delete.is_none() && step.error.is_none());
    let l = &step.claim;
    assert_eq!(status(l, LAUNCHED), ConditionStatus::True);
    assert_eq!(status(l, REGISTERED), ConditionStatus::Unknown);
    assert_eq!(status(l, READY), ConditionStatus::Unknown);
    assert_eq!(l.status.provider_id.as_deref(), Some("test:///a"));
    assert_eq!(l.status.image_id.as_deref(), Some("img-1"));
    assert_eq!(l.status.capacity.get("cpu"), Some(Quantity::from_units(4)));
    // The claim's own labels win; new provider labels are added.
    assert_eq!(l.metadata.labels[labels::CAPACITY_TYPE], "on-demand");
    assert_eq!(l.metadata.labels[labels::INSTANCE_TYPE], "m.large");
    // The provider's annotations win.
    assert_eq!(l.metadata.annotations["provider/annotation"], "p");
    // Launch does nothing once Launched is known.
    let again = launch_decision(
        l,
        &CreateOutcome::Failed {
            message: "x".into(),
        },
        after(mins(1)),
    );
    assert!(!again.claim_changed);
    assert_eq!(&again.claim, l);
}

#[test]
fn launch_insufficient_capacity_and_nodeclass_not_ready_delete() {
    let c = claim("a");
    let ice = launch_decision(
        &c,
        &CreateOutcome::InsufficientCapacity {
            message: "no capacity".into(),
        },
        t0(),
    );
    assert_eq!(ice.delete.map(|d| d.reason), Some("insufficient_capacity"));
    assert_eq!(ice.events[0].reason, "InsufficientCapacityError");
    assert_eq!(ice.metrics[0].labels["reason"], "insufficient_capacity");
    assert_eq!(ice.metrics[0].labels["nodepool"], "default");
    let ncnr = launch_decision(
        &c,
        &CreateOutcome::NodeClassNotReady {
            message: "x".into(),
        },
        t0(),
    );
    assert_eq!(ncnr.delete.map(|d| d.reason), Some("nodeclass_not_ready"));
}

#[test]
fn launch_errors_keep_launched_unknown_and_retry() {
    let c = claim("a");
    let ce = launch_decision(
        &c,
        &CreateOutcome::CreateError {
            reason: "SubnetsExhausted".into(),
            message: "no IPs".into(),
        },
        t0(),
    );
    assert_eq!(status(&ce.claim, LAUNCHED), ConditionStatus::Unknown);
    assert_eq!(reason(&ce.claim, LAUNCHED), "SubnetsExhausted");
    assert_eq!(cond(&ce.claim, LAUNCHED).message.as_deref(), Some("no IPs"));
    assert!(ce.error.is_some() && ce.delete.is_none());

    let long = "x".repeat(1000);
    let f = launch_decision(&c, &CreateOutcome::Failed { message: long }, t0());
    assert_eq!(reason(&f.claim, LAUNCHED), reasons::LAUNCH_FAILED);
    assert_eq!(
        cond(&f.claim, LAUNCHED).message.as_ref().unwrap().len(),
        300
    );
}

// ---------------------------------------------------------------------------------------------
// Registration

#[test]
fn registration_node_not_found_and_multiple_nodes() {
    let c = launched("a");
    let none = registration_decision(&c, &[], &[], t0());
    assert_eq!(status(&none.claim, REGISTERED), ConditionStatus::Unknown);
    assert_eq!(reason(&none.claim, REGISTERED), "NodeNotFound");
    let pid = c.status.provider_id.clone().unwrap();
    let two = [ready_node("n1", &pid), ready_node("n2", &pid)];
    let multi = registration_decision(&c, &two, &[], t0());
    assert_eq!(status(&multi.claim, REGISTERED), ConditionStatus::False);
    assert_eq!(reason(&multi.claim, REGISTERED), "MultipleNodesFound");
    assert_eq!(status(&multi.claim, READY), ConditionStatus::False);
}

#[test]
fn registration_syncs_the_node() {
    let mut c = launched("a");
    c.spec
        .taints
        .push(Taint::new("team", "a", TaintEffect::NoSchedule));
    c.spec
        .startup_taints
        .push(Taint::new("startup", "", TaintEffect::NoSchedule));
    c.metadata.annotations.insert("note".into(), "x".into());
    let pid = c.status.provider_id.clone().unwrap();
    let mut node = ready_node("n1", &pid);
    node.taints
        .push(karpenter_core::lifecycle::unregistered_taint());
    node.labels.insert("existing".into(), "1".into());
    // A same key+effect taint already on the node is not duplicated.
    node.taints
        .push(Taint::new("team", "b", TaintEffect::NoSchedule));
    let step = registration_decision(&c, std::slice::from_ref(&node), &[], t0());
    assert!(step.events.is_empty());
    assert_eq!(status(&step.claim, REGISTERED), ConditionStatus::True);
    assert_eq!(step.claim.status.node_name.as_deref(), Some("n1"));
    assert_eq!(step.health.as_ref().map(|h| h.success), Some(true));
    assert_eq!(step.metrics[0].name, "karpenter_nodes_created_total");
    assert_eq!(step.metrics[0].labels["zone"], "zone-a");
    let mut synced = node.clone();
    step.node_update.unwrap().apply(&mut synced);
    assert_eq!(synced.finalizers, [TERMINATION_FINALIZER]);
    assert_eq!(synced.owner_references.len(), 1);
    assert_eq!(synced.owner_references[0].kind, "NodeClaim");
    assert_eq!(synced.owner_references[0].uid, "uid-a");
    assert_eq!(synced.labels["existing"], "1");
    assert_eq!(synced.labels[labels::NODEPOOL], "default");
    assert_eq!(synced.labels[labels::REGISTERED], "true");
    assert_eq!(synced.annotations["note"], "x");
    let taints: Vec<String> = synced.taints.iter().map(ToString::to_string).collect();
    assert_eq!(taints, ["team=b:NoSchedule", "startup:NoSchedule"]);
}

/// A claim recorded `Registered=True` but its Node's registration patch was lost (a controller
/// that died between the two writes): the Node is synced again, without a second
/// `nodes_created_total`; a registered claim whose Node is clean is left alone.
#[test]
fn a_registered_claim_whose_node_kept_the_unregistered_taint_is_synced_again() {
    let (c, clean) = registered("a");
    assert_eq!(status(&c, REGISTERED), ConditionStatus::True);
    let again = registration_decision(&c, std::slice::from_ref(&clean), &[], t0());
    assert!(again.node_update.is_none() && !again.claim_changed);
    let mut lost = ready_node(&clean.name, &clean.provider_id);
    lost.taints
        .push(karpenter_core::lifecycle::unregistered_taint());
    let step = registration_decision(&c, std::slice::from_ref(&lost), &[], t0());
    assert!(step.metrics.is_empty() && step.events.is_empty() && step.health.is_none());
    assert_eq!(step.claim, c);
    let mut synced = lost.clone();
    step.node_update
        .expect("the node is synced")
        .apply(&mut synced);
    assert!(synced.taints.is_empty(), "{:?}", synced.taints);
    assert_eq!(synced.finalizers, [TERMINATION_FINALIZER]);
    assert_eq!(synced.labels[labels::REGISTERED], "true");
    assert_eq!(synced.labels[labels::NODEPOOL], "default");
    assert_eq!(synced.owner_references.len(), 1);
}

#[test]
fn registration_respects_do_not_sync_taints_and_warns_on_missing_taint() {
    let mut c = launched("a");
    c.spec
        .taints
        .push(Taint::new("team", "a", TaintEffect::NoSchedule));
    let pid = c.status.provider_id.clone().unwrap();
    let mut node = ready_node("n1", &pid);
    node.labels
        .insert(labels::DO_NOT_SYNC_TAINTS.into(), "true".into());
    let step = registration_decision(&c, std::slice::from_ref(&node), &[], t0());
    assert_eq!(step.events.len(), 1);
    assert_eq!(step.events[0].reason, "UnregisteredTaintMissing");
    let update = step.node_update.unwrap();
    assert_eq!(update.taints, None, "taints are not synced");
}

#[test]
fn registration_waits_for_hooks() {
    let c = launched("a");
    let pid = c.status.provider_id.clone().unwrap();
    let mut node = ready_node("n1", &pid);
    node.taints
        .push(karpenter_core::lifecycle::unregistered_taint());
    let hooks = [
        RegistrationHook {
            name: "slow".into(),
            status: HookStatus::Pending {
                requeue_after: secs(30),
            },
        },
        RegistrationHook {
            name: "fast".into(),
            status: HookStatus::Pending {
                requeue_after: secs(10),
            },
        },
        RegistrationHook {
            name: "ok".into(),
            status: HookStatus::Passed,
        },
    ];
    let step = registration_decision(&c, std::slice::from_ref(&node), &hooks, t0());
    assert_eq!(status(&step.claim, REGISTERED), ConditionStatus::Unknown);
    assert_eq!(reason(&step.claim, REGISTERED), "RegistrationHookPending");
    assert!(
        cond(&step.claim, REGISTERED)
            .message
            .as_ref()
            .unwrap()
            .contains("slow, fast")
    );
    assert_eq!(step.requeue_after, Some(secs(10)));
    assert!(step.health.is_none());
    let mut synced = node.clone();
    step.node_update.unwrap().apply(&mut synced);
    assert!(
        synced
            .taints
            .iter()
            .any(|t| t.key == labels::UNREGISTERED_TAINT_KEY)
    );
    assert!(!synced.labels.contains_key(labels::REGISTERED));
}

// ---------------------------------------------------------------------------------------------
// Initialization

#[test]
fn initialization_reasons_in_order() {
    let (mut c, mut node) = registered("a");
    c.spec
        .startup_taints
        .push(Taint::new("startup", "", TaintEffect::NoSchedule));
    c.spec
        .resources
        .requests
        .insert("example.com/gpu", Quantity::from_units(1));
    c.metadata.annotations.insert(
        karpenter_core::lifecycle::REQUESTED_DRA_DRIVERS_ANNOTATION.into(),
        "gpu.example.com".into(),
    );
    let check = |c: &NodeClaim, nodes: &[Node], dra: Option<&BTreeSet<String>>| {
        let step = initialization_decision(c, nodes, dra, t0());
        (
            status(&step.claim, INITIALIZED),
            reason(&step.claim, INITIALIZED),
            cond(&step.claim, INITIALIZED)
                .message
                .clone()
                .unwrap_or_default(),
            step,
        )
    };
    let (s, r, _, _) = check(&c, &[], None);
    assert_eq!((s, r.as_str()), (ConditionStatus::Unknown, "NodeNotFound"));

    node.conditions[0].status = ConditionStatus::False;
    let (_, r, m, _) = check(&c, std::slice::from_ref(&node), None);
    assert_eq!(
        (r.as_str(), m.as_str()),
        ("NodeNotReady", "Node status is NotReady")
    );

    node.conditions[0].status = ConditionStatus::True;
    node.taints
        .push(Taint::new("startup", "v", TaintEffect::NoSchedule));
    node.taints.push(Taint::new(
        "node.kubernetes.io/not-ready",
        "",
        TaintEffect::NoExecute,
    ));
    let (_, r, m, _) = check(&c, std::slice::from_ref(&node), None);
    assert_eq!(r, "StartupTaintsExist");
    assert_eq!(m, r#"StartupTaint "startup=v:NoSchedule" still exists"#);

    node.taints.retain(|t| t.key != "startup");
    let (_, r, m, _) = check(&c, std::slice::from_ref(&node), None);
    assert_eq!(r, "KnownEphemeralTaintsExist");
    assert_eq!(
        m,
        r#"KnownEphemeralTaint "node.kubernetes.io/not-ready:NoExecute" still exists"#
    );
    node.taints.clear();
    node.taints.push(Taint::new(
        "readiness.k8s.io/network",
        "",
        TaintEffect::NoSchedule,
    ));
    let (_, r, _, _) = check(&c, std::slice::from_ref(&node), None);
    assert_eq!(r, "KnownEphemeralTaintsExist");

    node.taints.clear();
    let (_, r, m, _) = check(&c, std::slice::from_ref(&node), None);
    assert_eq!(r, "ResourceNotRegistered");
    assert_eq!(
        m,
        r#"Resource "example.com/gpu" was requested but not registered"#
    );

    node.allocatable
        .insert("example.com/gpu", Quantity::from_units(8));
    // DRA support off: the annotation is not checked.
    let (s, _, _, step) = check(&c, std::slice::from_ref(&node), None);
    assert_eq!(s, ConditionStatus::True);
    let update = step.node_update.unwrap();
    assert_eq!(update.labels.unwrap()[labels::INITIALIZED], "true");
    assert_eq!(status(&step.claim, READY), ConditionStatus::True);

    let published = BTreeSet::new();
    let (_, r, _, _) = check(&c, std::slice::from_ref(&node), Some(&published));
    assert_eq!(r, "DRADriverPoolsNotPublished");
    let published = BTreeSet::from(["gpu.example.com".to_string()]);
    let (s, _, _, _) = check(&c, std::slice::from_ref(&node), Some(&published));
    assert_eq!(s, ConditionStatus::True);
}

#[test]
fn initialization_waits_for_registration_and_has_no_timeout() {
    let c = launched("a");
    let pid = c.status.provider_id.clone().unwrap();
    let step = initialization_decision(&c, &[ready_node("n", &pid)], None, t0());
    assert!(!step.claim_changed);
    // Registered but never initialized: liveness never deletes it.
    let (mut c, mut node) = registered("b");
    node.conditions[0].status = ConditionStatus::False;
    c = initialization_decision(&c, &[node], None, t0()).claim;
    let later = liveness_decision(&c, after(SignedDuration::from_hours(240)));
    assert!(later.delete.is_none());
}

// ---------------------------------------------------------------------------------------------
// Liveness

#[test]
fn launch_timeout_after_five_minutes() {
    let c = claim("a");
    let failed = launch_decision(
        &c,
        &CreateOutcome::Failed {
            message: "boom".into(),
        },
        t0(),
    )
    .claim;
    let early = liveness_decision(&failed, after(mins(5) - secs(1)));
    assert!(early.delete.is_none());
    assert_eq!(early.requeue_after, Some(secs(1)));
    let late = liveness_decision(&failed, after(mins(5)));
    assert_eq!(late.delete.map(|d| d.reason), Some("launch_timeout"));
    assert_eq!(late.metrics[0].labels["reason"], "launch_timeout");
    let health = late.health.unwrap();
    assert!(!health.success);
    assert_eq!(health.reason, "LaunchFailed");
}

#[test]
fn registration_timeout_after_fifteen_minutes() {
    let c = launched("a");
    let c = registration_decision(&c, &[], &[], t0()).claim;
    let early = liveness_decision(&c, after(mins(14)));
    assert!(early.delete.is_none());
    assert_eq!(early.requeue_after, Some(mins(1)));
    let late = liveness_decision(&c, after(mins(15)));
    assert_eq!(late.delete.map(|d| d.reason), Some("registration_timeout"));
    assert_eq!(late.health.unwrap().reason, "RegistrationFailed");
    // Registered claims are never timed out.
    let (r, _) = registered("b");
    assert!(liveness_decision(&r, after(mins(60))).delete.is_none());
}

#[test]
fn registration_health_sets_nodepool_condition() {
    let c = launched("a");
    let c = registration_decision(&c, &[], &[], t0()).claim;
    let failure = liveness_decision(&c, after(mins(15))).health.unwrap();
    let mut health = RegistrationHealth::new();
    assert_eq!(health.apply(&failure), None, "1 of 4 is still healthy");
    let cond = health.apply(&failure).unwrap();
    assert_eq!(cond.status, ConditionStatus::False);
    assert_eq!(cond.reason, "RegistrationFailed");
    assert_eq!(health.status(), HealthStatus::Unhealthy);
    let (r, node) = registered("b");
    let _ = (r, node);
    let success = karpenter_core::lifecycle::nodeclaim::HealthRecord {
        success: true,
        reason: String::new(),
        message: String::new(),
    };
    assert_eq!(health.apply(&success), None, "still 2 of 4 failures");
    assert_eq!(health.apply(&success), None);
    let healthy = health.apply(&success).unwrap();
    assert_eq!(healthy.status, ConditionStatus::True);
}

#[test]
fn full_lifecycle_pass() {
    let c = NodeClaim::new("a", NodeClaimSpec::new(class_ref()));
    let created = provider_launch(&c);
    let mut node = ready_node("n1", "test:///a");
    node.taints
        .push(karpenter_core::lifecycle::unregistered_taint());
    let step = reconcile_lifecycle(
        &c,
        LifecycleInputs {
            create: Some(&created),
            nodes: std::slice::from_ref(&node),
            ..LifecycleInputs::default()
        },
        t0(),
    );
    assert!(step.claim_changed);
    assert_eq!(step.claim.metadata.finalizers, [TERMINATION_FINALIZER]);
    for t in [LAUNCHED, REGISTERED, INITIALIZED, READY] {
        assert_eq!(status(&step.claim, t), ConditionStatus::True, "{t}");
    }
    let update = step.node_update.unwrap();
    let labels_after = update.labels.unwrap();
    assert_eq!(labels_after[labels::REGISTERED], "true");
    assert_eq!(labels_after[labels::INITIALIZED], "true");
    assert_eq!(update.taints, Some(vec![]));
    // A second pass changes nothing.
    let mut node2 = node.clone();
    node2.labels = labels_after;
    node2.taints.clear();
    node2.finalizers = update.finalizers.unwrap();
    node2.owner_references = update.owner_references.unwrap();
    let again = reconcile_lifecycle(
        &step.claim,
        LifecycleInputs {
            nodes: std::slice::from_ref(&node2),
            ..LifecycleInputs::default()
        },
        after(mins(1)),
    );
    assert!(!again.claim_changed);
    assert!(again.node_update.is_none());
}

// ---------------------------------------------------------------------------------------------
// Termination

fn deleting(mut c: NodeClaim, tgp: Option<&str>) -> NodeClaim {
    c.metadata.deletion_timestamp = Some(format_time(after(mins(10))));
    c.spec.termination_grace_period = tgp.map(|d| Duration::parse(d).unwrap());
    c
}

#[test]
fn termination_timestamp_from_tgp_or_annotation() {
    let c = deleting(claim("a"), Some("1h"));
    assert_eq!(termination_timestamp(&c), Some(after(mins(70))));
    let (value, event) = termination_timestamp_annotation(&c).unwrap();
    assert_eq!(value, "2024-01-01T01:10:00Z");
    assert_eq!(event.reason, "TerminationGracePeriodExpiring");
    let mut annotated = c.clone();
    annotated
        .metadata
        .annotations
        .insert(TERMINATION_TIMESTAMP_ANNOTATION.into(), format_time(t0()));
    assert_eq!(termination_timestamp(&annotated), Some(t0()));
    assert_eq!(termination_timestamp_annotation(&annotated), None);
    assert_eq!(termination_timestamp(&deleting(claim("b"), None)), None);
}

#[test]
fn finalization_sequence() {
    let (c, node) = registered("a");
    let mut c = deleting(c, Some("1h"));
    let FinalizeStep::WriteTerminationTimestamp { value, .. } =
        finalize_claim(&c, std::slice::from_ref(&node), false, t0())
    else {
        panic!("timestamp first");
    };
    c.metadata
        .annotations
        .insert(TERMINATION_TIMESTAMP_ANNOTATION.into(), value);
    assert_eq!(
        finalize_claim(&c, std::slice::from_ref(&node), false, t0()),
        FinalizeStep::DeleteNodes {
            node_names: vec!["node-a".into()]
        }
    );
    let mut gone = node.clone();
    gone.deletion_timestamp = Some(t0());
    assert!(matches!(
        finalize_claim(&c, &[gone], false, t0()),
        FinalizeStep::AwaitNodes { .. }
    ));
    let FinalizeStep::DeleteInstance {
        claim: terminating,
        requeue_after,
    } = finalize_claim(&c, &[], false, t0())
    else {
        panic!("instance next");
    };
    assert_eq!(requeue_after, secs(5));
    assert_eq!(
        status(&terminating, conditions::INSTANCE_TERMINATING),
        ConditionStatus::True
    );
    let FinalizeStep::RemoveFinalizer { metrics } = finalize_claim(&c, &[], true, t0()) else {
        panic!("finalizer last");
    };
    assert_eq!(metrics[0].name, "karpenter_nodeclaims_terminated_total");
    c.metadata.finalizers.clear();
    assert_eq!(finalize_claim(&c, &[], true, t0()), FinalizeStep::Done);
    // An unlaunched claim skips the cloud delete.
    let mut unlaunched = deleting(claim("b"), None);
    unlaunched.status.provider_id = None;
    assert!(matches!(
        finalize_claim(&unlaunched, &[], false, t0()),
        FinalizeStep::RemoveFinalizer { .. }
    ));
}

fn pod(name: &str) -> Pod {
    let mut p = Pod::new("default", name);
    p.node_name = Some("n1".into());
    p.phase = PodPhase::Running;
    p
}

fn daemon(mut p: Pod) -> Pod {
    p.owner = Some(OwnerReference::new("apps/v1", "DaemonSet", "ds").with_controller(true));
    p
}

fn critical(mut p: Pod) -> Pod {
    p.priority_class_name = Some("system-node-critical".into());
    p
}

#[test]
fn drain_evicts_one_tier_at_a_time() {
    let mut pods = vec![
        critical(daemon(pod("crit-ds"))),
        critical(pod("crit")),
        daemon(pod("ds")),
        pod("app"),
        pod("app2"),
    ];
    let mut order = Vec::new();
    loop {
        let plan = drain_plan("n1", &pods, None, t0());
        if plan.complete {
            break;
        }
        assert!(plan.force_delete.is_empty());
        order.push(plan.evict.clone());
        pods.retain(|p| !plan.evict.contains(&p.key()));
    }
    assert_eq!(
        order,
        [
            vec!["default/app".to_string(), "default/app2".to_string()],
            vec!["default/ds".to_string()],
            vec!["default/crit".to_string()],
            vec!["default/crit-ds".to_string()],
        ]
    );
}

/// A tier waits until the pods of the tier before it are gone, not only evicted: a pod that is
/// terminating (a slow preStop hook) holds back the next tier (upstream's terminator groups the
/// pods still waiting for eviction, terminating ones included; upstream e2e "should drain pods
/// on a node in order").
#[test]
fn drain_waits_for_a_terminating_tier_before_the_next() {
    let mut app = pod("app");
    app.deletion_timestamp = Some(t0() - secs(5));
    let pods = vec![app, daemon(pod("ds")), critical(pod("crit"))];
    let plan = drain_plan("n1", &pods, None, t0());
    assert!(plan.evict.is_empty(), "{:?}", plan.evict);
    assert!(!plan.complete);
    let plan = drain_plan("n1", &pods[1..], None, t0());
    assert_eq!(plan.evict, ["default/ds"]);
}

#[test]
fn drain_skips_pods_it_does_not_wait_for() {
    let mut tolerating = pod("tolerating");
    tolerating.tolerations.push(Toleration {
        key: labels::DISRUPTED_TAINT_KEY.into(),
        operator: Some(TolerationOperator::Exists),
        ..Toleration::default()
    });
    let mut mirror = pod("mirror");
    mirror.owner = Some(OwnerReference::new("v1", "Node", "n1").with_controller(true));
    let mut done = pod("done");
    done.phase = PodPhase::Succeeded;
    let mut stuck = pod("stuck");
    stuck.deletion_timestamp = Some(t0() - mins(1) - secs(1));
    let mut elsewhere = pod("elsewhere");
    elsewhere.node_name = Some("n2".into());
    let mut terminating = pod("terminating");
    terminating.deletion_timestamp = Some(t0() - secs(30));
    let plan = drain_plan(
        "n1",
        &[tolerating, mirror, done, stuck, elsewhere, terminating],
        None,
        t0(),
    );
    assert_eq!(plan.waiting, ["default/terminating"]);
    assert!(
        plan.evict.is_empty(),
        "terminating pods are waited for, not evicted"
    );
    assert!(!plan.complete);
}

#[test]
fn do_not_disrupt_pods_block_drain_until_forced() {
    let mut dnd = pod("dnd");
    dnd.annotations
        .insert(labels::DO_NOT_DISRUPT_ANNOTATION.into(), "true".into());
    let pods = [dnd, daemon(pod("ds"))];
    let plan = drain_plan("n1", &pods, None, t0());
    assert!(
        plan.evict.is_empty(),
        "the DND pod holds tier 1; tier 2 waits"
    );
    assert_eq!(plan.waiting.len(), 2);
    // With a termination time the DND pod is force-deleted once its grace would cross it.
    let deadline = after(mins(10));
    let plan = drain_plan("n1", &pods, Some(deadline), deadline - secs(29));
    assert_eq!(
        plan.force_delete,
        [
            ("default/dnd".to_string(), 29),
            ("default/ds".to_string(), 29)
        ]
    );
}

#[test]
fn forced_deletion_rule() {
    let deadline = after(mins(10));
    let mut p = pod("p");
    p.termination_grace_period_seconds = Some(60);
    let pods = [p.clone()];
    // now = deadline - 61 s: grace still fits.
    let plan = drain_plan("n1", &pods, Some(deadline), deadline - secs(61));
    assert!(plan.force_delete.is_empty());
    assert_eq!(plan.evict, ["default/p"]);
    // now = deadline - 59 s: force-delete with the remaining 59 s.
    let plan = drain_plan("n1", &pods, Some(deadline), deadline - secs(59));
    assert_eq!(plan.force_delete, [("default/p".to_string(), 59)]);
    assert!(plan.evict.is_empty());
    // Past the deadline: grace 1.
    let plan = drain_plan("n1", &pods, Some(deadline), deadline + secs(5));
    assert_eq!(plan.force_delete, [("default/p".to_string(), 1)]);
    // A terminating pod whose deletion ends after the deadline.
    let mut term = pod("term");
    term.deletion_timestamp = Some(deadline + secs(10));
    let plan = drain_plan("n1", &[term.clone()], Some(deadline), deadline - secs(20));
    assert_eq!(plan.force_delete, [("default/term".to_string(), 20)]);
    term.deletion_timestamp = Some(deadline - secs(1));
    let plan = drain_plan("n1", &[term], Some(deadline), deadline - secs(20));
    assert!(plan.force_delete.is_empty());
    // Default pod grace is 30 s.
    let plan = drain_plan("n1", &[pod("d")], Some(deadline), deadline - secs(29));
    assert_eq!(plan.force_delete.len(), 1);
}

#[test]
fn drained_waits_min_drain_time() {
    let done = drain_plan("n1", &[], None, t0());
    assert!(done.complete);
    let busy = drain_plan("n1", &[pod("a")], None, t0());
    assert!(matches!(
        drained_decision("n1", &busy, None, "default", t0()),
        DrainedDecision::Draining { .. }
    ));
    assert!(matches!(
        drained_decision("n1", &done, None, "default", t0()),
        DrainedDecision::WaitMinDrainTime { .. }
    ));
    let mut c = claim("a");
    ConditionSet::for_nodeclaim(&mut c, t0()).set_unknown_with_reason(DRAINED, "Draining", "");
    let drained = find_condition(&c.status.conditions, DRAINED);
    assert!(matches!(
        drained_decision("n1", &done, drained, "default", t0() + secs(4)),
        DrainedDecision::WaitMinDrainTime { .. }
    ));
    assert!(matches!(
        drained_decision("n1", &done, drained, "default", t0() + secs(5)),
        DrainedDecision::Drained { .. }
    ));
}

#[test]
fn volume_detachment() {
    assert_eq!(
        volume_detachment_decision(0, None, t0()),
        VolumeDecision::Detached
    );
    assert_eq!(
        volume_detachment_decision(2, None, t0()),
        VolumeDecision::Waiting
    );
    assert_eq!(
        volume_detachment_decision(2, Some(t0()), t0() + secs(1)),
        VolumeDecision::GracePeriodElapsed
    );
}

// ---------------------------------------------------------------------------------------------
// Expiration and garbage collection

#[test]
fn expiration_ignores_everything_but_age() {
    let mut c = registered("a").0;
    c.spec.expire_after = Some(NillableDuration::parse("2h").unwrap());
    c.metadata
        .annotations
        .insert(labels::DO_NOT_DISRUPT_ANNOTATION.into(), "true".into());
    assert_eq!(
        expiration_decision(&c, after(mins(119))),
        ExpirationDecision::RequeueAt(after(mins(120)))
    );
    assert!(matches!(
        expiration_decision(&c, after(mins(120))),
        ExpirationDecision::Expire { .. }
    ));
}

#[test]
fn garbage_collection() {
    let (gone, _) = registered("gone");
    let (ready_gone, ready_node_) = registered("ready-gone");
    let (alive, _) = registered("alive");
    let unregistered = launched("unregistered");
    let mut deleting_claim = registered("deleting").0;
    deleting_claim.metadata.deletion_timestamp = Some(format_time(t0()));
    let mut not_ready = ready_node("nr", gone.status.provider_id.as_deref().unwrap());
    not_ready.conditions[0].status = ConditionStatus::False;
    let cloud = BTreeSet::from([alive.status.provider_id.clone().unwrap()]);
    let out = garbage_collect(
        &[gone, ready_gone, alive, unregistered, deleting_claim],
        &cloud,
        &[not_ready, ready_node_],
    );
    let names: Vec<_> = out.iter().map(|d| d.claim_name.as_str()).collect();
    assert_eq!(names, ["gone"]);
    assert_eq!(out[0].metrics[0].labels["reason"], "garbage_collected");
}

// ---------------------------------------------------------------------------------------------
// Drift

fn pool() -> NodePool {
    let mut spec = NodeClaimTemplateSpec::new(class_ref());
    spec.taints = vec![
        Taint::new("a", "1", TaintEffect::NoSchedule),
        Taint::new("b", "", TaintEffect::NoExecute),
    ];
    spec.startup_taints = vec![Taint::new("s", "", TaintEffect::NoSchedule)];
    spec.requirements = Some(vec![NodeSelectorRequirement::new(
        labels::CAPACITY_TYPE,
        Operator::In,
        ["on-demand", "spot"],
    )]);
    let mut template = NodeClaimTemplate {
        metadata: Default::default(),
        spec,
    };
    template.metadata.labels.insert("team".into(), "a".into());
    template
        .metadata
        .annotations
        .insert("note".into(), "x".into());
    let mut np = NodePool::new("default", NodePoolSpec::new(template));
    let annotations = drift::claim_hash_annotations(&np);
    np.metadata.annotations = annotations;
    np
}

#[test]
fn hash_ignores_order_and_unhashed_fields() {
    let base = pool();
    let h = nodepool_hash(&base);
    let mut reordered = base.clone();
    reordered.spec.template.spec.taints.reverse();
    assert_eq!(nodepool_hash(&reordered), h);
    let mut duplicated = base.clone();
    let first = duplicated.spec.template.spec.taints[0].clone();
    duplicated.spec.template.spec.taints.push(first);
    assert_eq!(nodepool_hash(&duplicated), h, "slices are sets");

    let mut unhashed = base.clone();
    unhashed.spec.template.spec.requirements = Some(vec![]);
    unhashed.spec.disruption.budgets = Some(vec![Budget::nodes("0")]);
    unhashed.spec.disruption.consolidate_after = Some(NillableDuration::parse("1h").unwrap());
    unhashed.spec.weight = Some(50);
    unhashed.spec.replicas = Some(3);
    let mut limits = ResourceList::new();
    limits.insert("cpu", Quantity::from_units(10));
    unhashed.spec.limits = Some(limits);
    unhashed
        .metadata
        .labels
        .insert("np-label".into(), "x".into());
    assert_eq!(nodepool_hash(&unhashed), h);

    // Durations hash by length; the default expireAfter equals an explicit 720h.
    let mut explicit = base.clone();
    explicit.spec.template.spec.expire_after = Some(NillableDuration::parse("720h").unwrap());
    assert_eq!(nodepool_hash(&explicit), h);
    let mut minutes = explicit.clone();
    minutes.spec.template.spec.expire_after = Some(NillableDuration::parse("43200m").unwrap());
    assert_eq!(nodepool_hash(&minutes), h);
}

#[test]
fn hash_changes_with_every_hashed_field() {
    let base = pool();
    let h = nodepool_hash(&base);
    let mut variants: Vec<(&str, NodePool)> = Vec::new();
    let mut v = base.clone();
    v.spec
        .template
        .metadata
        .labels
        .insert("team".into(), "b".into());
    variants.push(("label", v));
    let mut v = base.clone();
    v.spec.template.metadata.annotations.clear();
    variants.push(("annotations", v));
    let mut v = base.clone();
    v.spec.template.spec.taints[0].value = "2".into();
    variants.push(("taint value", v));
    let mut v = base.clone();
    v.spec.template.spec.taints[1].effect = TaintEffect::NoSchedule;
    variants.push(("taint effect", v));
    let mut v = base.clone();
    v.spec.template.spec.startup_taints.clear();
    variants.push(("startup taints", v));
    let mut v = base.clone();
    v.spec.template.spec.node_class_ref.name = "other".into();
    variants.push(("nodeClassRef", v));
    let mut v = base.clone();
    v.spec.template.spec.termination_grace_period = Some(Duration::parse("1h").unwrap());
    variants.push(("terminationGracePeriod", v));
    let mut v = base.clone();
    v.spec.template.spec.expire_after = Some(NillableDuration::parse("24h").unwrap());
    variants.push(("expireAfter", v));
    let mut v = base.clone();
    v.spec.template.spec.expire_after = Some(NillableDuration::Never);
    variants.push(("expireAfter Never", v));
    // Moving a taint between taints and startupTaints changes the hash.
    let mut v = base.clone();
    let moved = v.spec.template.spec.startup_taints.remove(0);
    v.spec.template.spec.taints.push(moved);
    variants.push(("taint moved", v));
    let mut seen = BTreeSet::from([h.clone()]);
    for (name, v) in variants {
        let hv = nodepool_hash(&v);
        assert_ne!(hv, h, "{name}");
        assert!(seen.insert(hv), "{name} collides with another variant");
    }
}

fn arb_taint() -> impl Strategy<Value = Taint> {
    (
        "[a-c]{1,2}",
        "[x-z]{0,1}",
        prop_oneof![
            Just(TaintEffect::NoSchedule),
            Just(TaintEffect::NoExecute),
            Just(TaintEffect::PreferNoSchedule)
        ],
    )
        .prop_map(|(k, v, e)| Taint::new(k, v, e))
}

proptest! {
    #[test]
    fn hash_is_order_independent(
        taints in proptest::collection::vec(arb_taint(), 0..6),
        labels_ in proptest::collection::btree_map("[a-d]{1,3}", "[a-d]{0,2}", 0..5),
        seed in any::<u64>(),
    ) {
        let mut a = pool();
        a.spec.template.spec.taints = taints.clone();
        a.spec.template.metadata.labels = labels_;
        let mut b = a.clone();
        let mut shuffled = taints;
        // A deterministic permutation from the seed.
        let n = shuffled.len();
        if n > 1 {
            for i in 0..n {
                let j = (seed.wrapping_mul(i as u64 + 1) % n as u64) as usize;
                shuffled.swap(i, j);
            }
        }
        b.spec.template.spec.taints = shuffled;
        prop_assert_eq!(nodepool_hash(&a), nodepool_hash(&b));
    }

    #[test]
    fn hash_distinguishes_taint_sets(
        taints in proptest::collection::btree_set(arb_taint(), 0..5),
        extra in arb_taint(),
    ) {
        prop_assume!(!taints.contains(&extra));
        let mut a = pool();
        a.spec.template.spec.taints = taints.iter().cloned().collect();
        let mut b = a.clone();
        b.spec.template.spec.taints.push(extra);
        prop_assert_ne!(nodepool_hash(&a), nodepool_hash(&b));
    }
}

fn pool_claim(np: &NodePool, name: &str) -> NodeClaim {
    let mut c = launched(name);
    c.metadata
        .annotations
        .extend(drift::claim_hash_annotations(np));
    c
}

fn instance_types() -> Vec<Arc<InstanceType>> {
    vec![Arc::new(InstanceType::new(
        "m.large",
        Requirements::new(),
        vec![
            Offering::new("zone-a", "on-demand", 1.0),
            Offering::new("zone-a", "spot", 0.3),
        ],
        ResourceList::new(),
        Overhead::default(),
    ))]
}

#[test]
fn drift_precedence() {
    let np = pool();
    let its = instance_types();
    let opts = DriftOptions::default();
    let old = after(SignedDuration::from_hours(2));
    let c = pool_claim(&np, "a");
    let check = drift_reason(&c, &np, &its, None, old, None, &opts);
    assert_eq!(
        check,
        DriftCheck {
            reason: None,
            instance_type_check_passed: true
        }
    );

    // Provider reason is last.
    let check = drift_reason(&c, &np, &its, Some("AMIDrift"), old, None, &opts);
    assert_eq!(check.reason, Some(DriftReason::Provider("AMIDrift".into())));

    // Instance type gone: only checked after 1 h and when not cached for 30 min.
    let no_types: Vec<Arc<InstanceType>> = Vec::new();
    let young = after(mins(59));
    assert_eq!(
        drift_reason(&c, &np, &no_types, Some("AMIDrift"), young, None, &opts).reason,
        Some(DriftReason::Provider("AMIDrift".into()))
    );
    assert_eq!(
        drift_reason(
            &c,
            &np,
            &no_types,
            Some("AMIDrift"),
            old,
            Some(old - mins(29)),
            &opts
        )
        .reason,
        Some(DriftReason::Provider("AMIDrift".into()))
    );
    assert_eq!(
        drift_reason(
            &c,
            &np,
            &no_types,
            Some("AMIDrift"),
            old,
            Some(old - mins(30)),
            &opts
        )
        .reason,
        Some(DriftReason::InstanceTypeNotFound)
    );
    // No compatible offering (zone not offered).
    let mut elsewhere = c.clone();
    elsewhere
        .metadata
        .labels
        .insert(labels::ZONE.into(), "zone-z".into());
    assert_eq!(
        drift_reason(&elsewhere, &np, &its, None, old, None, &opts).reason,
        Some(DriftReason::InstanceTypeNotFound)
    );
    // Reserved claims match on-demand offerings.
    let mut reserved = c.clone();
    reserved
        .metadata
        .labels
        .insert(labels::CAPACITY_TYPE.into(), "reserved".into());
    let mut np_reserved = np.clone();
    np_reserved.spec.template.spec.requirements = Some(vec![]);
    assert_eq!(
        drift_reason(&reserved, &np_reserved, &its, None, old, None, &opts).reason,
        None
    );

    // Requirements drift beats instance-type and provider drift.
    let mut np_req = np.clone();
    np_req.spec.template.spec.requirements = Some(vec![NodeSelectorRequirement::new(
        labels::CAPACITY_TYPE,
        Operator::In,
        ["spot"],
    )]);
    assert_eq!(
        drift_reason(&c, &np_req, &no_types, Some("AMIDrift"), old, None, &opts).reason,
        Some(DriftReason::RequirementsDrifted)
    );

    // Static drift beats everything.
    let mut np_static = np_req.clone();
    np_static
        .spec
        .template
        .metadata
        .labels
        .insert("team".into(), "b".into());
    np_static.metadata.annotations = drift::claim_hash_annotations(&np_static);
    assert_eq!(
        drift_reason(
            &c,
            &np_static,
            &no_types,
            Some("AMIDrift"),
            old,
            None,
            &opts
        )
        .reason,
        Some(DriftReason::NodePoolDrifted)
    );
    // ... but only when the versions agree.
    let mut other_version = c.clone();
    other_version
        .metadata
        .annotations
        .insert(labels::NODEPOOL_HASH_VERSION_ANNOTATION.into(), "v3".into());
    assert_eq!(
        drift_reason(&other_version, &np_static, &its, None, old, None, &opts).reason,
        Some(DriftReason::RequirementsDrifted)
    );
}

#[test]
fn drift_condition_updates() {
    let np = pool();
    let c = pool_claim(&np, "a");
    let drifted = DriftCheck {
        reason: Some(DriftReason::NodePoolDrifted),
        instance_type_check_passed: false,
    };
    let up = drift_condition_update(&c, &drifted, t0());
    assert!(up.changed);
    assert_eq!(up.requeue_after, Some(mins(5)));
    assert_eq!(status(&up.claim, DRIFTED), ConditionStatus::True);
    assert_eq!(reason(&up.claim, DRIFTED), "NodePoolDrifted");
    assert_eq!(
        cond(&up.claim, DRIFTED).message.as_deref(),
        Some("NodePoolDrifted")
    );
    let clean = DriftCheck {
        reason: None,
        instance_type_check_passed: false,
    };
    let cleared = drift_condition_update(&up.claim, &clean, t0());
    assert!(cleared.changed);
    assert!(find_condition(&cleared.claim.status.conditions, DRIFTED).is_none());
    // Not launched: cleared, no requeue.
    let mut unlaunched = up.claim.clone();
    ConditionSet::for_nodeclaim(&mut unlaunched, t0()).set_unknown(LAUNCHED);
    let u = drift_condition_update(&unlaunched, &drifted, t0());
    assert_eq!(u.requeue_after, None);
    assert!(find_condition(&u.claim.status.conditions, DRIFTED).is_none());
}

#[test]
fn hash_version_bump_from_upstream() {
    // A cluster coming from upstream: NodePool and NodeClaims carry upstream's v3 hash.
    let mut np = pool();
    np.metadata.annotations = BTreeMap::from([
        (labels::NODEPOOL_HASH_ANNOTATION.into(), "1234567890".into()),
        (labels::NODEPOOL_HASH_VERSION_ANNOTATION.into(), "v3".into()),
    ]);
    let upstream = |name: &str| {
        let mut c = launched(name);
        c.metadata
            .annotations
            .insert(labels::NODEPOOL_HASH_ANNOTATION.into(), "1234567890".into());
        c.metadata
            .annotations
            .insert(labels::NODEPOOL_HASH_VERSION_ANNOTATION.into(), "v3".into());
        c
    };
    let fresh = upstream("fresh");
    let mut already = upstream("already");
    ConditionSet::for_nodeclaim(&mut already, t0()).set_true_with_reason(
        DRIFTED,
        "NodePoolDrifted",
        "NodePoolDrifted",
    );
    let mut other_pool = upstream("other");
    other_pool
        .metadata
        .labels
        .insert(labels::NODEPOOL.into(), "other".into());
    let out = hash_reconcile(&np, &[fresh.clone(), already.clone(), other_pool]);
    let hash = nodepool_hash(&np);
    assert_eq!(
        out.nodepool_annotations,
        Some(BTreeMap::from([
            (labels::NODEPOOL_HASH_ANNOTATION.to_string(), hash.clone()),
            (
                labels::NODEPOOL_HASH_VERSION_ANNOTATION.to_string(),
                HASH_VERSION.to_string()
            ),
        ]))
    );
    assert_eq!(out.claim_updates.len(), 2);
    assert_eq!(out.claim_updates[0].claim_name, "fresh");
    assert_eq!(
        out.claim_updates[0].annotations[labels::NODEPOOL_HASH_ANNOTATION],
        hash
    );
    assert_eq!(out.claim_updates[1].claim_name, "already");
    assert!(
        !out.claim_updates[1]
            .annotations
            .contains_key(labels::NODEPOOL_HASH_ANNOTATION)
    );

    // After applying, the fresh claim is not drifted.
    let mut np2 = np.clone();
    np2.metadata
        .annotations
        .extend(out.nodepool_annotations.unwrap());
    let mut fresh2 = fresh;
    fresh2
        .metadata
        .annotations
        .extend(out.claim_updates[0].annotations.clone());
    assert!(!drift::is_static_drifted(&np2, &fresh2));
    let mut already2 = already;
    already2
        .metadata
        .annotations
        .extend(out.claim_updates[1].annotations.clone());
    assert!(drift::is_static_drifted(&np2, &already2));
    // Converged: nothing more to write.
    assert_eq!(hash_reconcile(&np2, &[fresh2]), Default::default());
}

// ---------------------------------------------------------------------------------------------
// Repair

fn ready_false_10m() -> Vec<RepairPolicy> {
    vec![
        RepairPolicy::new(
            "Ready",
            ConditionStatus::False,
            std::time::Duration::from_secs(600),
        ),
        RepairPolicy::new(
            "Ready",
            ConditionStatus::Unknown,
            std::time::Duration::from_secs(600),
        ),
        RepairPolicy::new(
            "DiskBroken",
            ConditionStatus::True,
            std::time::Duration::from_secs(60),
        ),
    ]
}

#[test]
fn repair_waits_for_toleration_then_repairs() {
    let policies = ready_false_10m();
    let conds = [NodeCondition::new("Ready", ConditionStatus::False, t0())];
    assert!(is_unhealthy(&conds, &policies));
    assert_eq!(
        repair_decision(
            "n",
            &conds,
            &policies,
            1,
            10,
            RepairScope::NodePool,
            after(mins(9))
        ),
        RepairDecision::RequeueAt(after(mins(10)))
    );
    assert_eq!(
        repair_decision(
            "n",
            &conds,
            &policies,
            1,
            10,
            RepairScope::NodePool,
            after(mins(10))
        ),
        RepairDecision::Repair {
            condition_type: "Ready".into(),
            condition_status: ConditionStatus::False
        }
    );
    let healthy = [NodeCondition::new("Ready", ConditionStatus::True, t0())];
    assert!(!is_unhealthy(&healthy, &policies));
    assert_eq!(
        repair_decision(
            "n",
            &healthy,
            &policies,
            0,
            10,
            RepairScope::NodePool,
            after(mins(60))
        ),
        RepairDecision::Healthy
    );
}

#[test]
fn repair_picks_the_earliest_termination_time() {
    let policies = ready_false_10m();
    let conds = [
        NodeCondition::new("Ready", ConditionStatus::Unknown, t0()),
        NodeCondition::new("DiskBroken", ConditionStatus::True, after(mins(5))),
    ];
    assert_eq!(
        repair_decision(
            "n",
            &conds,
            &policies,
            1,
            10,
            RepairScope::NodePool,
            after(mins(1))
        ),
        RepairDecision::RequeueAt(after(mins(6)))
    );
    assert_eq!(
        repair_decision(
            "n",
            &conds,
            &policies,
            1,
            10,
            RepairScope::NodePool,
            after(mins(6))
        ),
        RepairDecision::Repair {
            condition_type: "DiskBroken".into(),
            condition_status: ConditionStatus::True
        }
    );
}

#[test]
fn repair_threshold_is_twenty_percent_rounded_up() {
    let policies = ready_false_10m();
    let conds = [NodeCondition::new("Ready", ConditionStatus::False, t0())];
    let now = after(mins(30));
    // 10 nodes: 2 allowed.
    assert!(matches!(
        repair_decision("n", &conds, &policies, 2, 10, RepairScope::NodePool, now),
        RepairDecision::Repair { .. }
    ));
    let RepairDecision::Blocked {
        event,
        requeue_after,
    } = repair_decision("n", &conds, &policies, 3, 10, RepairScope::NodePool, now)
    else {
        panic!("3 of 10 blocks");
    };
    assert_eq!(event.reason, "NodeRepairBlocked");
    assert_eq!(
        event.message,
        "more than 20% nodes are unhealthy in the nodepool"
    );
    assert_eq!(requeue_after, mins(5));
    // 11 nodes: ceil(2.2) = 3 allowed.
    assert!(matches!(
        repair_decision("n", &conds, &policies, 3, 11, RepairScope::Cluster, now),
        RepairDecision::Repair { .. }
    ));
    let RepairDecision::Blocked { event, .. } =
        repair_decision("n", &conds, &policies, 2, 4, RepairScope::Cluster, now)
    else {
        panic!("2 of 4 blocks");
    };
    assert!(event.message.ends_with("in the cluster"));
    // A single node may always be repaired.
    assert!(matches!(
        repair_decision("n", &conds, &policies, 1, 1, RepairScope::NodePool, now),
        RepairDecision::Repair { .. }
    ));
}

#[test]
fn repair_actions_force_termination_now() {
    let (c, _) = registered("a");
    let now = after(mins(30));
    let actions = repair_actions(&c, "Ready", now);
    assert_eq!(actions.termination_timestamp, Some(format_time(now)));
    assert!(actions.delete_claim);
    assert_eq!(actions.metrics[0].labels["reason"], "unhealthy");
    assert_eq!(actions.metrics[1].labels["condition"], "ready");
    assert_eq!(actions.metrics[1].labels["image_id"], "img-1");
    let mut past = c.clone();
    past.metadata
        .annotations
        .insert(TERMINATION_TIMESTAMP_ANNOTATION.into(), format_time(t0()));
    past.metadata.deletion_timestamp = Some(format_time(t0()));
    let actions = repair_actions(&past, "Ready", now);
    assert_eq!(actions.termination_timestamp, None);
    assert!(!actions.delete_claim);
}

// ---------------------------------------------------------------------------------------------
// Command queue (upstream `Queue.StartCommand`, `Queue.Reconcile`, `orchestration/queue_test.go`)

fn command(
    id: &str,
    candidates: &[&str],
    replacements: &[&str],
    created_at: Timestamp,
) -> QueuedCommand {
    QueuedCommand {
        id: id.into(),
        method: "single".into(),
        reason: DisruptionReason::Underutilized,
        consolidation_policy: "when_empty_or_underutilized".into(),
        candidates: candidates
            .iter()
            .map(|c| {
                let mut cc = CommandCandidate::new(format!("test:///{c}"), format!("node-{c}"), *c);
                cc.nodepool = "default".into();
                cc.reschedulable_pods = 3;
                cc
            })
            .collect(),
        replacements: replacements.iter().map(|r| r.to_string()).collect(),
        nominated_nodes: vec!["node-x".into()],
        created_at,
        initialized: BTreeSet::new(),
    }
}

fn removes_taint(outcome: &QueueOutcome, node: &str) -> bool {
    matches!(outcome, QueueOutcome::Unrecoverable { rollback, .. }
        if rollback.contains(&Step::RemoveTaint { node_name: node.into() }))
}

#[test]
fn start_steps_order() {
    let cmd = command("c1", &["a", "b"], &["r1"], t0());
    let steps = queue::start_steps(&cmd);
    let kinds: Vec<&str> = steps
        .iter()
        .map(|s| match s {
            Step::TaintNode { .. } => "taint",
            Step::SetDisruptionReason { .. } => "reason",
            Step::CreateReplacements { .. } => "create",
            Step::MarkForDeletion { .. } => "mark",
            Step::Nominate { .. } => "nominate",
            Step::Enqueue { .. } => "enqueue",
            _ => "other",
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "taint", "reason", "taint", "reason", "create", "mark", "nominate", "enqueue"
        ]
    );
    assert_eq!(
        steps[0],
        Step::TaintNode {
            node_name: "node-a".into(),
            taint: Taint::new(labels::DISRUPTED_TAINT_KEY, "", TaintEffect::NoSchedule)
        }
    );
    assert_eq!(
        steps[1],
        Step::SetDisruptionReason {
            claim_name: "a".into(),
            reason: "Underutilized".into()
        }
    );
    assert!(
        matches!(&steps[4], Step::CreateReplacements { created_reason, .. } if created_reason == "underutilized")
    );
    assert_eq!(
        steps[7],
        Step::Enqueue {
            command_id: "c1".into(),
            claim_name: "a".into()
        }
    );
}

#[test]
fn start_rejects_queued_candidates_and_partial_marking() {
    let mut q = CommandQueue::new();
    q.start(command("c1", &["a"], &[], t0())).unwrap();
    assert_eq!(
        q.start(command("c2", &["b", "a"], &[], t0())),
        Err(QueueError::AlreadyDisrupting {
            provider_id: "test:///a".into()
        })
    );
    let marked = BTreeSet::from(["test:///a".to_string()]);
    // Replace command: any marking failure aborts.
    assert!(matches!(
        queue::after_marking(&command("c", &["a", "b"], &["r"], t0()), &marked),
        Err(QueueError::MarkingFailed {
            failed: 1,
            total: 2
        })
    ));
    // Delete-only command proceeds with the marked subset.
    let kept = queue::after_marking(&command("c", &["a", "b"], &[], t0()), &marked).unwrap();
    assert_eq!(kept.candidates.len(), 1);
    // Nothing marked: abort.
    assert!(queue::after_marking(&command("c", &["a"], &[], t0()), &BTreeSet::new()).is_err());
}

#[test]
fn keeps_nodes_tainted_while_replacements_initialize() {
    let cmd = command("c1", &["a"], &["r1", "r2"], t0());
    let out = queue::reconcile(
        &cmd,
        &[ReplacementState::Launching, ReplacementState::Launching],
        after(mins(1)),
        1,
    );
    let QueueOutcome::Wait {
        requeue_after,
        events,
        ..
    } = out
    else {
        panic!("should wait");
    };
    assert_eq!(requeue_after, secs(1));
    let reasons: Vec<&str> = events.iter().map(|e| e.reason.as_str()).collect();
    assert_eq!(
        reasons,
        [
            "DisruptionLaunching",
            "DisruptionWaitingReadiness",
            "DisruptionLaunching",
            "DisruptionWaitingReadiness"
        ]
    );
}

#[test]
fn waits_when_replacement_is_missing_but_in_cluster_state() {
    let cmd = command("c1", &["a"], &["r1"], t0());
    for state in [
        ReplacementState::NotFound { in_state: true },
        ReplacementState::LookupFailed,
    ] {
        assert!(matches!(
            queue::reconcile(&cmd, &[state], after(mins(1)), 1),
            QueueOutcome::Wait { .. }
        ));
    }
    // Missing state entries count as failed lookups.
    assert!(matches!(
        queue::reconcile(&cmd, &[], after(mins(1)), 1),
        QueueOutcome::Wait { .. }
    ));
}

#[test]
fn replacement_ice_untaints_candidates() {
    let cmd = command("c1", &["a"], &["r1"], t0());
    let out = queue::reconcile(
        &cmd,
        &[ReplacementState::NotFound { in_state: false }],
        after(mins(1)),
        1,
    );
    assert!(removes_taint(&out, "node-a"));
    let QueueOutcome::Unrecoverable {
        reason,
        rollback,
        delete_candidates,
        metrics,
        ..
    } = out
    else {
        unreachable!()
    };
    assert_eq!(reason, "replacement was deleted");
    assert!(delete_candidates.is_empty());
    assert!(rollback.contains(&Step::ClearDisruptionReason {
        claim_name: "a".into()
    }));
    assert!(rollback.contains(&Step::UnmarkForDeletion {
        provider_ids: vec!["test:///a".into()]
    }));
    assert_eq!(
        metrics[0].name,
        "karpenter_voluntary_disruption_queue_failures_total"
    );
    assert_eq!(metrics[0].labels["consolidation_type"], "replace");
    assert_eq!(metrics[0].op, karpenter_core::lifecycle::MetricOp::Add(1.0));
}

#[test]
fn untaints_nodes_when_a_command_times_out() {
    let cmd = command("c1", &["a"], &["r1"], t0());
    // Before the timeout: still queued.
    assert!(matches!(
        queue::reconcile(&cmd, &[ReplacementState::Launching], after(mins(9)), 1),
        QueueOutcome::Wait { .. }
    ));
    let out = queue::reconcile(&cmd, &[ReplacementState::Launching], after(mins(11)), 1);
    assert!(removes_taint(&out, "node-a"));
    // Through the queue: the command leaves it and its provider ids are freed.
    let mut q = CommandQueue::new();
    q.start(cmd).unwrap();
    assert!(q.contains("test:///a"));
    let out = q
        .reconcile("c1", &[ReplacementState::Launching], after(mins(11)))
        .unwrap();
    assert!(removes_taint(&out, "node-a"));
    assert_eq!(q.entries(), 0);
}

/// A failed command deletes its replacements that never initialized and still exist (the
/// chaos suite's seed 0 at 10,000 steps: a replacement whose node never registered outlived
/// its command's timeout and kept its NodePool over its limits once the candidate counted
/// again); initialized replacements stay, and a vanished one is not deleted again.
#[test]
fn a_failed_command_deletes_its_replacements_that_never_initialized() {
    let cmd = command("c1", &["a"], &["r1"], t0());
    let out = queue::reconcile(&cmd, &[ReplacementState::Launching], after(mins(11)), 1);
    let QueueOutcome::Unrecoverable {
        delete_replacements,
        ..
    } = out
    else {
        panic!("timed out: {out:?}");
    };
    assert_eq!(delete_replacements, ["r1"]);

    let cmd = command("c2", &["a"], &["r1", "r2", "r3"], t0());
    let out = queue::reconcile(
        &cmd,
        &[
            ReplacementState::Initialized,
            ReplacementState::NotFound { in_state: false },
            ReplacementState::Launching,
        ],
        after(mins(1)),
        1,
    );
    let QueueOutcome::Unrecoverable {
        delete_replacements,
        ..
    } = out
    else {
        panic!("a replacement vanished: {out:?}");
    };
    // r1 initialized (kept), r2 is gone; r3 is still launching.
    assert_eq!(delete_replacements, ["r3"]);

    // The late-success quirk: every replacement initialized, none deleted.
    let cmd = command("c3", &["a"], &["r1"], t0());
    let out = queue::reconcile(&cmd, &[ReplacementState::Initialized], after(mins(11)), 1);
    assert!(
        matches!(&out, QueueOutcome::Unrecoverable { delete_replacements, .. } if delete_replacements.is_empty()),
        "{out:?}"
    );
}

#[test]
fn late_success_is_still_a_failure() {
    let cmd = command("c1", &["a"], &["r1"], t0());
    let out = queue::reconcile(&cmd, &[ReplacementState::Initialized], after(mins(11)), 1);
    let QueueOutcome::Unrecoverable {
        delete_candidates,
        rollback,
        metrics,
        ..
    } = out
    else {
        panic!("timed out");
    };
    assert_eq!(delete_candidates, ["a"]);
    assert!(!rollback.is_empty());
    assert!(
        metrics
            .iter()
            .all(|m| m.name != "karpenter_voluntary_disruption_queue_failures_total")
    );
}

#[test]
fn fully_handles_a_command_when_replacements_initialize() {
    let mut q = CommandQueue::new();
    q.start(command("c1", &["a"], &["r1"], t0())).unwrap();
    let QueueOutcome::Wait { events, .. } = q
        .reconcile("c1", &[ReplacementState::Launching], after(secs(10)))
        .unwrap()
    else {
        panic!("wait");
    };
    assert_eq!(events[0].reason, "DisruptionLaunching");
    assert_eq!(events[1].reason, "DisruptionWaitingReadiness");
    let QueueOutcome::DeleteCandidates {
        claim_names,
        events,
        metrics,
    } = q
        .reconcile("c1", &[ReplacementState::Initialized], after(secs(20)))
        .unwrap()
    else {
        panic!("delete");
    };
    assert_eq!(claim_names, ["a"]);
    let terminating: Vec<_> = events
        .iter()
        .filter(|e| e.reason == "DisruptionTerminating")
        .map(|e| e.kind)
        .collect();
    assert_eq!(
        terminating,
        [
            karpenter_core::lifecycle::ObjectKind::Node,
            karpenter_core::lifecycle::ObjectKind::NodeClaim
        ]
    );
    assert_eq!(metrics[0].labels["reason"], "underutilized");
    assert_eq!(
        metrics[0].labels["consolidation_policy"],
        "when_empty_or_underutilized"
    );
    assert_eq!(metrics[0].labels["termination_mode"], "graceful");
    assert_eq!(metrics[1].op, karpenter_core::lifecycle::MetricOp::Add(3.0));
    assert_eq!(q.entries(), 0);
}

#[test]
fn only_finishes_when_all_replacements_initialize() {
    let mut q = CommandQueue::new();
    q.start(command("c1", &["a"], &["r1", "r2"], t0())).unwrap();
    let out = q
        .reconcile(
            "c1",
            &[ReplacementState::Initialized, ReplacementState::Launching],
            after(secs(10)),
        )
        .unwrap();
    assert!(matches!(out, QueueOutcome::Wait { .. }));
    assert!(q.get("c1").unwrap().initialized.contains("r1"));
    // r1 is remembered: a stale state for it is not looked at again.
    let out = q
        .reconcile(
            "c1",
            &[
                ReplacementState::LookupFailed,
                ReplacementState::Initialized,
            ],
            after(secs(20)),
        )
        .unwrap();
    assert!(matches!(out, QueueOutcome::DeleteCandidates { .. }));
}

#[test]
fn does_not_wait_when_no_replacements_are_needed() {
    let cmd = command("c1", &["a", "b"], &[], t0());
    let QueueOutcome::DeleteCandidates { claim_names, .. } =
        queue::reconcile(&cmd, &[], after(secs(1)), 2)
    else {
        panic!("delete");
    };
    assert_eq!(claim_names, ["a", "b"]);
    assert_eq!(cmd.decision(), "delete");
}

#[test]
fn finishes_two_commands_in_order() {
    let mut q = CommandQueue::new();
    q.start(command("c1", &["a"], &["r1"], t0())).unwrap();
    q.start(command("c2", &["b"], &["r2"], t0())).unwrap();
    assert_eq!(q.entries(), 2);
    let ids: Vec<_> = q.commands().map(|c| c.id.as_str()).collect();
    assert_eq!(ids, ["c1", "c2"]);
    for id in ["c1", "c2"] {
        assert!(matches!(
            q.reconcile(id, &[ReplacementState::Launching], after(secs(5))),
            Some(QueueOutcome::Wait { .. })
        ));
    }
    assert!(matches!(
        q.reconcile("c1", &[ReplacementState::Initialized], after(secs(10))),
        Some(QueueOutcome::DeleteCandidates { .. })
    ));
    assert!(matches!(
        q.reconcile("c2", &[ReplacementState::Launching], after(secs(10))),
        Some(QueueOutcome::Wait { .. })
    ));
    assert!(!q.contains("test:///a") && q.contains("test:///b"));
    assert!(matches!(
        q.reconcile("c2", &[ReplacementState::Initialized], after(secs(20))),
        Some(QueueOutcome::DeleteCandidates { .. })
    ));
    assert_eq!(q.entries(), 0);
    assert!(q.reconcile("c2", &[], after(secs(30))).is_none());
}

#[test]
fn queue_backoff_grows_per_command() {
    let mut q = CommandQueue::new();
    q.start(command("c1", &["a"], &["r1"], t0())).unwrap();
    let delays: Vec<i64> = (0..6)
        .map(
            |i| match q.reconcile("c1", &[ReplacementState::Launching], after(secs(i))) {
                Some(QueueOutcome::Wait { requeue_after, .. }) => requeue_after.as_secs(),
                other => panic!("{other:?}"),
            },
        )
        .collect();
    assert_eq!(delays, [1, 2, 4, 8, 10, 10]);
}

#[test]
fn calculate_retry_duration_table() {
    let cases = [
        (100, mins(10)),
        (4_000, mins(10)),
        (10_000, mins(13) + secs(20)),
        (40_000, mins(53) + secs(20)),
        (80_000, mins(60)),
        (100_000, mins(60)),
    ];
    for (entries, want) in cases {
        assert_eq!(retry_duration(entries), want, "{entries}");
    }
}

#[test]
fn timeout_scales_with_queue_size() {
    // With 10 000 entries the command lives 13 min 20 s.
    let cmd = command("c1", &["a"], &["r1"], t0());
    assert!(matches!(
        queue::reconcile(
            &cmd,
            &[ReplacementState::Launching],
            after(mins(13)),
            10_000
        ),
        QueueOutcome::Wait { .. }
    ));
    assert!(matches!(
        queue::reconcile(
            &cmd,
            &[ReplacementState::Launching],
            after(mins(14)),
            10_000
        ),
        QueueOutcome::Unrecoverable { .. }
    ));
}

#[test]
fn condition_ready_tracks_dependents_through_lifecycle() {
    let (c, _) = registered("a");
    assert_eq!(status(&c, READY), ConditionStatus::Unknown);
    assert_eq!(reason(&c, READY), "ReconcilingDependents");
    assert_eq!(
        cond(&c, READY).message.as_deref(),
        Some("Initialized=Unknown")
    );
    assert!(conditions::is_unknown(&c.status.conditions, INITIALIZED));
}

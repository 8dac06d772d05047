//! Tests of the operator shell.
use super::*;
use k8s_openapi::api::apps::v1::DaemonSet;
use karpenter_core::scheduling::{MinValuesPolicy, PreferencePolicy};

#[test]
fn map_patches_null_removed_keys() {
    let old = BTreeMap::from([
        ("a".to_string(), "1".to_string()),
        ("b".to_string(), "2".to_string()),
    ]);
    let new = BTreeMap::from([
        ("b".to_string(), "3".to_string()),
        ("c".to_string(), "4".to_string()),
    ]);
    assert_eq!(
        map_patch(Some(&old), &new),
        json!({"a": null, "b": "3", "c": "4"})
    );
    assert_eq!(map_patch(None, &new), json!({"b": "3", "c": "4"}));
}

#[test]
fn the_node_repair_gate_brings_the_providers_repair_policies() {
    use clap::Parser;
    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: ControllerArgs,
    }
    let provider = karpenter_fake::FakeCloudProvider::new();
    let off = Cli::parse_from(["karpenter", "--cloud-provider", "fake"]).args;
    let config = operator_config(&off, &provider);
    assert!(!config.node_repair && config.repair_policies.is_empty());
    let on = Cli::parse_from([
        "karpenter",
        "--cloud-provider",
        "fake",
        "--feature-gates",
        "NodeRepair=true",
    ])
    .args;
    let config = operator_config(&on, &provider);
    assert!(config.node_repair);
    assert_eq!(config.repair_policies, provider.repair_policies());
    assert!(!config.repair_policies.is_empty());
}

/// The scheduler reads the provider's well-known labels (a pod selecting one schedules)
/// and the preference and minValues policies of the settings.
#[test]
fn the_operator_schedules_with_the_providers_labels_and_the_policies() {
    use clap::Parser;
    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: ControllerArgs,
    }
    let policy =
        karpenter_core::labels::LabelPolicy::core().with_well_known(["example.com/family"]);
    let provider = karpenter_fake::FakeCloudProvider::new().with_label_policy(policy);
    let defaults = Cli::parse_from(["karpenter"]).args;
    let config = operator_config(&defaults, &provider);
    assert!(
        config
            .scheduler
            .label_policy
            .is_well_known("example.com/family")
    );
    assert_eq!(
        config.scheduler.preference_policy,
        PreferencePolicy::Respect
    );
    assert_eq!(config.scheduler.min_values_policy, MinValuesPolicy::Strict);
    let set = Cli::parse_from([
        "karpenter",
        "--preference-policy",
        "Ignore",
        "--min-values-policy",
        "BestEffort",
    ])
    .args;
    let config = operator_config(&set, &provider);
    assert_eq!(config.scheduler.preference_policy, PreferencePolicy::Ignore);
    assert_eq!(
        config.scheduler.min_values_policy,
        MinValuesPolicy::BestEffort
    );
}

/// A bound pod that cannot be converted is not dropped: a stand-in on its node, annotated
/// do-not-disrupt, keeps the node occupied and protected; it is reported once. A pending
/// one is left out (nothing to protect).
#[test]
fn an_unreadable_bound_pod_protects_its_node_and_is_reported_once() {
    let pod = |node: Option<&str>| -> core::Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "db-0", "namespace": "prod", "uid": "u1"},
            "spec": {"nodeName": node,
                     "containers": [{"name": "a", "image": "a",
                                     "resources": {"requests": {"cpu": "lots"}}}]},
            "status": {"phase": "Running"}
        }))
        .unwrap()
    };
    assert!(karpenter_core::convert::pod_from_k8s(&pod(Some("n1"))).is_err());
    let mut feeder = Feeder::default();
    let inputs = feeder.inputs(Change::Pod(Arc::new(pod(Some("n1")))));
    let [Input::PodApplied(p)] = inputs.as_slice() else {
        panic!("one pod input: {inputs:?}");
    };
    assert_eq!(p.node_name.as_deref(), Some("n1"));
    assert_eq!(
        (p.namespace.as_str(), p.name.as_str(), p.uid.as_str()),
        ("prod", "db-0", "u1")
    );
    assert_eq!(
        p.annotations
            .get(karpenter_core::labels::DO_NOT_DISRUPT_ANNOTATION)
            .map(String::as_str),
        Some("true")
    );
    let reported = feeder.take_unreadable();
    assert_eq!(reported.len(), 1);
    assert_eq!(reported[0].0, "prod/db-0");
    feeder.inputs(Change::Pod(Arc::new(pod(Some("n1")))));
    assert!(feeder.take_unreadable().is_empty(), "reported once");
    let mut fresh = Feeder::default();
    assert!(fresh.inputs(Change::Pod(Arc::new(pod(None)))).is_empty());
    assert!(fresh.take_unreadable().is_empty());
}

#[test]
fn a_kwok_node_converts_with_taints_conditions_and_allocatable() {
    let node: core::Node = serde_json::from_value(json!({
        "metadata": {"name": "n1", "labels": {"karpenter.sh/nodepool": "default"},
                     "finalizers": ["karpenter.sh/termination"]},
        "spec": {"providerID": "kwok://n1",
                 "taints": [{"key": "karpenter.sh/unregistered", "effect": "NoExecute"}]},
        "status": {"allocatable": {"cpu": "4", "memory": "16Gi"},
                   "conditions": [{"type": "Ready", "status": "True",
                                   "lastTransitionTime": "2026-01-01T00:00:00Z"}]}
    }))
    .unwrap();
    let Some(Input::NodeApplied(n)) = input_for(Change::Node(Arc::new(node))) else {
        panic!("a Node input");
    };
    assert_eq!(n.name, "n1");
    assert_eq!(n.provider_id, "kwok://n1");
    assert!(n.is_ready());
    assert_eq!(n.taints.len(), 1);
    assert_eq!(n.taints[0].key, "karpenter.sh/unregistered");
    assert_eq!(n.finalizers, ["karpenter.sh/termination"]);
    assert_eq!(
        n.allocatable.get("cpu").map(|q| q.milli_value()),
        Some(4000)
    );
}

/// Pods are not kept by the shell, but a DaemonSet is converted again with its first pod,
/// whose resolved requests describe it best; the feeder is synced once every kind listed.
#[test]
fn the_feeder_converts_a_daemonset_with_its_first_pod_and_counts_the_lists() {
    let ds: DaemonSet = serde_json::from_value(json!({
        "metadata": {"name": "agent", "namespace": "kube-system", "uid": "ds-uid"},
        "spec": {"selector": {"matchLabels": {"app": "agent"}},
                 "template": {"metadata": {"labels": {"app": "agent"}},
                              "spec": {"containers": [{"name": "a", "image": "a",
                                       "resources": {"requests": {"cpu": "100m"}}}]}}}
    }))
    .unwrap();
    let pod: core::Pod = serde_json::from_value(json!({
        "metadata": {"name": "agent-x", "namespace": "kube-system", "uid": "p1",
                     "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet",
                                          "name": "agent", "uid": "ds-uid", "controller": true}]},
        "spec": {"nodeName": "n1",
                 "containers": [{"name": "a", "image": "a",
                                 "resources": {"requests": {"cpu": "300m"}}}]}
    }))
    .unwrap();
    let cpu = |inputs: &[Input]| -> Vec<i64> {
        inputs
            .iter()
            .filter_map(|i| match i {
                Input::DaemonSetApplied(d) => Some(
                    d.pod
                        .requests
                        .get("cpu")
                        .map(|q| q.milli_value())
                        .unwrap_or_default(),
                ),
                _ => None,
            })
            .collect()
    };
    let mut feeder = Feeder::default();
    let first = feeder.inputs(Change::DaemonSet(Arc::new(ds.clone())));
    assert_eq!(cpu(&first), [100], "from the template while no pod runs");
    let with_pod = feeder.inputs(Change::Pod(Arc::new(pod.clone())));
    assert_eq!(cpu(&with_pod), [300], "again, from the pod");
    assert!(matches!(with_pod.last(), Some(Input::PodApplied(_))));
    let again = feeder.inputs(Change::Pod(Arc::new(pod.clone())));
    assert!(
        cpu(&again).is_empty(),
        "only the first pod converts it again"
    );
    assert_eq!(
        cpu(&feeder.inputs(Change::DaemonSet(Arc::new(ds)))),
        [300],
        "a changed DaemonSet keeps its pod's requests"
    );
    assert!(!feeder.synced());
    for kind in [
        "Pod",
        "Node",
        "NodeClaim",
        "NodePool",
        "DaemonSet",
        "PodDisruptionBudget",
        "PersistentVolumeClaim",
        "PersistentVolume",
        "StorageClass",
        "VolumeAttachment",
    ] {
        assert!(feeder.inputs(Change::Synced(kind)).is_empty());
    }
    assert!(!feeder.synced(), "one kind has not listed yet");
    feeder.inputs(Change::Synced("CSINode"));
    assert!(feeder.synced());
}

/// Upstream's e2e spec "Integration Utilization should provision one pod per node" (100 Nodes
/// drained at once): one step per change let the watch's changes queue up behind each step's
/// writes, so the operator kept deciding on deleted pods and stale NodeClaims (409 after 409).
/// Every change and result already waiting joins the step.
#[test]
fn a_step_takes_every_change_and_result_already_waiting() {
    let (changes_tx, mut changes) = mpsc::channel::<Change>(16);
    let (results_tx, mut results) = mpsc::channel::<Input>(16);
    let pod = |name: &str| -> core::Pod {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "default", "uid": name},
            "spec": {"containers": [{"name": "a", "image": "a"}]},
            "status": {"phase": "Pending"}
        }))
        .unwrap()
    };
    for name in ["a", "b", "c"] {
        changes_tx
            .try_send(Change::Pod(Arc::new(pod(name))))
            .unwrap();
    }
    results_tx
        .try_send(Input::WriteFailed {
            kind: ObjectKind::NodeClaim,
            name: "n".into(),
            message: "409".into(),
        })
        .unwrap();
    let mut feeder = Feeder::default();
    let inputs = ready_inputs(&mut feeder, &mut changes, &mut results);
    let names: Vec<String> = inputs
        .iter()
        .map(|i| match i {
            Input::PodApplied(p) => p.name.clone(),
            Input::WriteFailed { name, .. } => format!("failed {name}"),
            other => panic!("unexpected input {other:?}"),
        })
        .collect();
    assert_eq!(names, ["a", "b", "c", "failed n"]);
    // Nothing left: the next call does not wait, it returns nothing.
    assert!(ready_inputs(&mut feeder, &mut changes, &mut results).is_empty());
}

/// VolumeAttachments reach the operator by name and node, and their deletions by name.
#[test]
fn volume_attachments_become_operator_inputs() {
    use k8s_openapi::api::storage::v1::VolumeAttachment;
    let attachment: VolumeAttachment = serde_json::from_value(json!({
        "metadata": {"name": "csi-1"},
        "spec": {"attacher": "ebs.csi.aws.com", "nodeName": "n1",
                 "source": {"persistentVolumeName": "pv-1"}}
    }))
    .unwrap();
    let attachment = Arc::new(attachment);
    match input_for(Change::VolumeAttachment(attachment.clone())) {
        Some(Input::VolumeAttachmentApplied { name, node_name }) => {
            assert_eq!((name.as_str(), node_name.as_str()), ("csi-1", "n1"));
        }
        other => panic!("{other:?}"),
    }
    match input_for(Change::VolumeAttachmentDeleted(attachment)) {
        Some(Input::VolumeAttachmentDeleted(name)) => assert_eq!(name, "csi-1"),
        other => panic!("{other:?}"),
    }
}

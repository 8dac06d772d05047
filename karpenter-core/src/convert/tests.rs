use k8s_openapi::api::apps::v1 as apps;
use k8s_openapi::api::core::v1 as core;
use k8s_openapi::api::policy::v1 as policy;
use proptest::prelude::*;
use serde_json::{Value, json};

use super::*;
use crate::hostports::HostPort;
use crate::model::{
    LabelSelectorRequirement, NodeInclusionPolicy, PodPhase, SelectorOperator, WhenUnsatisfiable,
};
use crate::requirements::{NodeSelectorRequirement, Operator};
use crate::taints::{TaintEffect, TolerationOperator};

fn pod(v: Value) -> core::Pod {
    serde_json::from_value(v).unwrap()
}

/// A pod named `p` with the given spec.
fn pod_spec(spec: Value) -> core::Pod {
    pod(json!({"metadata": {"name": "p", "namespace": "ns"}, "spec": spec}))
}

fn container(name: &str, requests: Value, limits: Value) -> Value {
    let mut resources = serde_json::Map::new();
    if !requests.is_null() {
        resources.insert("requests".into(), requests);
    }
    if !limits.is_null() {
        resources.insert("limits".into(), limits);
    }
    json!({"name": name, "resources": resources})
}

fn sidecar(name: &str, requests: Value) -> Value {
    let mut c = container(name, requests, Value::Null);
    c["restartPolicy"] = json!("Always");
    c
}

fn milli(r: &ResourceList, name: &str) -> Option<i64> {
    r.get(name).map(|q| q.milli_value())
}

fn bytes(r: &ResourceList, name: &str) -> Option<i64> {
    r.get(name).map(|q| q.value())
}

const GI: i64 = 1 << 30;
const MI: i64 = 1 << 20;

// ---------------------------------------------------------------------------------------------
// Effective requests

#[test]
fn containers_sum_and_limits_default_missing_requests() {
    let p = pod_spec(json!({"containers": [
        container("a", json!({"cpu": "250m"}), json!({"cpu": "1", "memory": "1Gi"})),
        container("b", Value::Null, json!({"cpu": "500m", "nvidia.com/gpu": "1"})),
        container("c", json!({"memory": "256Mi"}), Value::Null),
    ]}));
    let r = effective_requests(&p).unwrap();
    // a: cpu request kept (not raised to its limit), memory from its limit.
    assert_eq!(milli(&r, "cpu"), Some(750));
    assert_eq!(bytes(&r, "memory"), Some(GI + 256 * MI));
    assert_eq!(bytes(&r, "nvidia.com/gpu"), Some(1));
    assert_eq!(r.len(), 3);
    assert_eq!(pod_from_k8s(&p).unwrap().requests, r);
}

#[test]
fn regular_init_containers_take_the_maximum() {
    let p = pod_spec(json!({
        "containers": [container("app", json!({"cpu": "1", "memory": "1Gi"}), Value::Null)],
        "initContainers": [
            container("big-cpu", json!({"cpu": "3"}), Value::Null),
            container("big-mem", Value::Null, json!({"memory": "2Gi"})),
        ],
    }));
    let r = effective_requests(&p).unwrap();
    assert_eq!(milli(&r, "cpu"), Some(3000));
    assert_eq!(bytes(&r, "memory"), Some(2 * GI));
}

#[test]
fn sidecars_accumulate_and_run_during_later_init_containers() {
    let p = pod_spec(json!({
        "containers": [container("app", json!({"cpu": "1", "memory": "100Mi"}), Value::Null)],
        "initContainers": [
            sidecar("proxy", json!({"cpu": "200m", "memory": "50Mi"})),
            container("migrate", json!({"cpu": "2", "memory": "10Mi"}), Value::Null),
            sidecar("logs", json!({"cpu": "300m", "memory": "500Mi"})),
            container("warm", json!({"cpu": "1", "memory": "100Mi"}), Value::Null),
        ],
    }));
    let r = effective_requests(&p).unwrap();
    // Running: app + proxy + logs = 1.5 CPU, 650Mi.
    // Init peaks: migrate 2 + proxy 0.2 = 2.2 CPU; warm 100Mi + proxy 50Mi + logs 500Mi = 650Mi.
    assert_eq!(milli(&r, "cpu"), Some(2200));
    assert_eq!(bytes(&r, "memory"), Some(650 * MI));

    // Sidecars started after an init container do not count during it.
    let p = pod_spec(json!({
        "containers": [container("app", json!({"cpu": "100m"}), Value::Null)],
        "initContainers": [
            container("first", json!({"cpu": "1"}), Value::Null),
            sidecar("late", json!({"cpu": "950m"})),
        ],
    }));
    assert_eq!(milli(&effective_requests(&p).unwrap(), "cpu"), Some(1050));
}

#[test]
fn overhead_is_added_last() {
    let p = pod_spec(json!({
        "containers": [container("app", json!({"cpu": "1"}), Value::Null)],
        "initContainers": [container("init", json!({"cpu": "2"}), Value::Null)],
        "overhead": {"cpu": "250m", "memory": "120Mi"},
    }));
    let r = effective_requests(&p).unwrap();
    assert_eq!(milli(&r, "cpu"), Some(2250));
    assert_eq!(bytes(&r, "memory"), Some(120 * MI));
}

#[test]
fn pod_level_requests_replace_supported_resources() {
    let p = pod_spec(json!({
        "containers": [
            container("a", json!({"cpu": "2", "memory": "1Gi", "ephemeral-storage": "1Gi"}), Value::Null),
            container("b", json!({"cpu": "1"}), Value::Null),
        ],
        "resources": {"requests": {"cpu": "1500m", "ephemeral-storage": "9Gi"}},
        "overhead": {"cpu": "100m"},
    }));
    let r = effective_requests(&p).unwrap();
    // cpu from the pod level (plus overhead); memory from the containers; ephemeral-storage is
    // not a pod-level resource, so the containers' value stays.
    assert_eq!(milli(&r, "cpu"), Some(1600));
    assert_eq!(bytes(&r, "memory"), Some(GI));
    assert_eq!(bytes(&r, "ephemeral-storage"), Some(GI));
}

#[test]
fn pod_level_limits_default_pod_level_requests() {
    let p = pod_spec(json!({
        "containers": [container("a", json!({"cpu": "1"}), Value::Null)],
        "resources": {"limits": {"cpu": "4", "memory": "8Gi", "hugepages-2Mi": "64Mi"}},
    }));
    let r = effective_requests(&p).unwrap();
    // cpu: the containers request it, so the pod-level request defaults to their sum.
    assert_eq!(milli(&r, "cpu"), Some(1000));
    // memory and huge pages: nobody requests them, so the pod-level limits apply.
    assert_eq!(bytes(&r, "memory"), Some(8 * GI));
    assert_eq!(bytes(&r, "hugepages-2Mi"), Some(64 * MI));
}

#[test]
fn in_place_resize_takes_the_larger_of_spec_and_status() {
    let spec = json!({"containers": [
        container("a", json!({"cpu": "1", "memory": "1Gi"}), Value::Null),
        container("b", json!({"cpu": "1"}), Value::Null),
    ]});
    // Scaled down in the spec, not yet actuated: the allocated/actuated values count.
    let p = pod(json!({
        "metadata": {"name": "p"},
        "spec": spec,
        "status": {"containerStatuses": [{
            "name": "a", "image": "", "imageID": "", "ready": true, "restartCount": 0,
            "allocatedResources": {"cpu": "2"},
            "resources": {"requests": {"cpu": "3", "memory": "512Mi"}},
        }]},
    }));
    let r = effective_requests(&p).unwrap();
    assert_eq!(milli(&r, "cpu"), Some(4000));
    assert_eq!(bytes(&r, "memory"), Some(GI));

    // An infeasible resize leaves the spec out.
    let mut p = p;
    p.status.as_mut().unwrap().conditions = Some(vec![core::PodCondition {
        type_: "PodResizePending".into(),
        status: "True".into(),
        reason: Some("Infeasible".into()),
        ..Default::default()
    }]);
    p.spec.as_mut().unwrap().containers[0].resources = Some(core::ResourceRequirements {
        requests: Some([("cpu".to_string(), Quantity("8".into()))].into()),
        ..Default::default()
    });
    let r = effective_requests(&p).unwrap();
    // a: actuated 3 (spec 8 ignored); b: no status, so nothing.
    assert_eq!(milli(&r, "cpu"), Some(3000));
}

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

#[test]
fn bad_quantity_names_container_and_resource() {
    let p = pod_spec(json!({
        "containers": [container("ok", json!({"cpu": "1"}), Value::Null)],
        "initContainers": [container("setup", Value::Null, json!({"memory": "lots"}))],
    }));
    let err = pod_from_k8s(&p).unwrap_err();
    match &err {
        ConvertError::Quantity {
            object,
            field,
            container,
            resource,
            ..
        } => {
            assert_eq!(object, "Pod ns/p");
            assert_eq!(field, "spec.initContainers[0].resources.limits");
            assert_eq!(container.as_deref(), Some("setup"));
            assert_eq!(resource, "memory");
        }
        other => panic!("{other:?}"),
    }
    let text = err.to_string();
    assert!(text.contains("setup") && text.contains("memory") && text.contains("lots"));
    assert_eq!(
        err.field(),
        "spec.initContainers[0].resources.limits[memory]"
    );

    let p = pod_spec(json!({"containers": [], "overhead": {"cpu": "x"}}));
    assert_eq!(pod_from_k8s(&p).unwrap_err().field(), "spec.overhead[cpu]");
}

fn container_cpu() -> impl Strategy<Value = i64> {
    0i64..4000
}

proptest! {
    /// Lower bounds, order independence of regular containers, and overhead additivity.
    #[test]
    fn effective_requests_properties(
        regular in prop::collection::vec(container_cpu(), 0..5),
        init in prop::collection::vec((container_cpu(), any::<bool>()), 0..5),
        overhead in 0i64..1000,
    ) {
        let to_container = |i: usize, m: i64| container(
            &format!("c{i}"), json!({"cpu": format!("{m}m")}), Value::Null);
        let build = |regular: &[i64], with_overhead: bool| {
            let inits: Vec<Value> = init.iter().enumerate().map(|(i, (m, is_sidecar))| {
                let mut c = to_container(100 + i, *m);
                if *is_sidecar { c["restartPolicy"] = json!("Always"); }
                c
            }).collect();
            let mut spec = json!({
                "containers": regular.iter().enumerate()
                    .map(|(i, m)| to_container(i, *m)).collect::<Vec<_>>(),
                "initContainers": inits,
            });
            if with_overhead {
                spec["overhead"] = json!({"cpu": format!("{overhead}m")});
            }
            pod_spec(spec)
        };
        let cpu = |p: &core::Pod| milli(&effective_requests(p).unwrap(), "cpu").unwrap_or(0);
        let base = cpu(&build(&regular, false));
        let sidecar_sum: i64 = init.iter().filter(|(_, s)| *s).map(|(m, _)| m).sum();
        // At least every running container together.
        prop_assert!(base >= regular.iter().sum::<i64>() + sidecar_sum);
        // At least every init container on its own.
        for (m, _) in &init {
            prop_assert!(base >= *m);
        }
        // At most everything at once.
        prop_assert!(base <= regular.iter().sum::<i64>() + init.iter().map(|(m, _)| m).sum::<i64>());
        // The order of regular containers does not matter.
        let mut reversed = regular.clone();
        reversed.reverse();
        prop_assert_eq!(cpu(&build(&reversed, false)), base);
        // Overhead adds exactly.
        prop_assert_eq!(cpu(&build(&regular, true)), base + overhead);
    }
}

// ---------------------------------------------------------------------------------------------
// Pods

#[test]
fn pod_metadata_status_and_defaults() {
    let p = pod(json!({
        "metadata": {"name": "web-0"},
        "spec": {"containers": []},
    }));
    let m = pod_from_k8s(&p).unwrap();
    assert_eq!(m.namespace, "default");
    assert_eq!(m.uid, "default/web-0");
    assert_eq!(m.creation_timestamp, Timestamp::UNIX_EPOCH);
    assert_eq!(m.phase, PodPhase::Pending);
    assert!(m.ready);
    assert!(m.requests.is_empty());
    assert!(m.owner.is_none() && m.node_affinity.is_none() && !m.has_resource_claims);

    let p = pod(json!({
        "metadata": {
            "name": "web-1", "namespace": "shop", "uid": "abc",
            "labels": {"app": "web"}, "annotations": {"karpenter.sh/do-not-disrupt": "true"},
            "creationTimestamp": "2024-01-02T03:04:05Z",
            "deletionTimestamp": "2024-01-03T00:00:00Z",
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "ConfigMap", "name": "x", "uid": "1"},
                {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-7d", "uid": "2", "controller": true},
            ],
        },
        "spec": {
            "nodeName": "node-a",
            "nodeSelector": {"kubernetes.io/os": "linux"},
            "priority": 1000,
            "priorityClassName": "high",
            "terminationGracePeriodSeconds": 45,
            "containers": [{
                "name": "app",
                "ports": [
                    {"containerPort": 80, "hostPort": 8080},
                    {"containerPort": 53, "hostPort": 53, "hostIP": "10.0.0.1", "protocol": "UDP"},
                    {"containerPort": 9090},
                ],
                "resources": {"claims": [{"name": "gpu"}]},
            }],
            "initContainers": [{"name": "init", "ports": [{"containerPort": 1, "hostPort": 1}]}],
        },
        "status": {
            "phase": "Running",
            "startTime": "2024-01-02T03:05:00Z",
            "conditions": [{"type": "Ready", "status": "False"}],
        },
    }));
    let m = pod_from_k8s(&p).unwrap();
    assert_eq!(m.key(), "shop/web-1");
    assert_eq!(m.uid, "abc");
    assert_eq!(m.labels.get("app").map(String::as_str), Some("web"));
    assert_eq!(m.annotations.len(), 1);
    assert_eq!(m.creation_timestamp.to_string(), "2024-01-02T03:04:05Z");
    assert!(m.is_terminating());
    assert_eq!(m.phase, PodPhase::Running);
    assert_eq!(m.node_name.as_deref(), Some("node-a"));
    let owner = m.owner.as_ref().unwrap();
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str(), owner.controller),
        ("ReplicaSet", "web-7d", true)
    );
    let others: Vec<(&str, &str, &str, bool)> = m
        .other_owners
        .iter()
        .map(|o| {
            (
                o.api_version.as_str(),
                o.kind.as_str(),
                o.name.as_str(),
                o.controller,
            )
        })
        .collect();
    assert_eq!(others, [("v1", "ConfigMap", "x", false)]);
    assert_eq!(
        m.node_selector.get("kubernetes.io/os").map(String::as_str),
        Some("linux")
    );
    assert_eq!(m.priority, Some(1000));
    assert_eq!(m.priority_class_name.as_deref(), Some("high"));
    assert_eq!(m.termination_grace_period_seconds, Some(45));
    assert_eq!(
        m.host_ports,
        vec![
            HostPort::new("0.0.0.0", 8080, "TCP"),
            HostPort::new("10.0.0.1", 53, "UDP"),
        ]
    );
    assert!(m.has_resource_claims);
    assert!(!m.ready);
    assert_eq!(
        m.start_time.map(|t| t.to_string()).as_deref(),
        Some("2024-01-02T03:05:00Z")
    );

    // Pod-level resource claims count too; Ready Unknown is not unhealthy.
    let p = pod(json!({
        "metadata": {"name": "dra"},
        "spec": {"containers": [], "resourceClaims": [{"name": "gpu", "resourceClaimName": "gpu-claim"}]},
        "status": {"conditions": [{"type": "Ready", "status": "Unknown"}]},
    }));
    let m = pod_from_k8s(&p).unwrap();
    assert!(m.has_resource_claims);
    assert!(m.ready);
}

#[test]
fn pod_requires_a_name_and_a_known_phase() {
    let err = pod_from_k8s(&pod(json!({"metadata": {"namespace": "x"}}))).unwrap_err();
    assert_eq!(
        err,
        ConvertError::Missing {
            object: "Pod x/".into(),
            field: "metadata.name".into()
        }
    );
    let err = pod_from_k8s(&pod(json!({
        "metadata": {"name": "p"}, "status": {"phase": "Sleeping"}
    })))
    .unwrap_err();
    assert_eq!(err.field(), "status.phase");
    assert_eq!(err.object(), "Pod default/p");
}

#[test]
fn node_affinity_required_and_preferred() {
    let p = pod_spec(json!({"containers": [], "affinity": {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [
                {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["a", "b"]},
                {"key": "karpenter.k8s.aws/instance-cpu", "operator": "Gt", "values": ["4"]},
            ]},
            {"matchExpressions": [{"key": "gpu", "operator": "Exists"}], "matchFields": []},
        ]},
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 50, "preference": {
                "matchExpressions": [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]}],
                "matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}],
            }},
        ],
    }}}));
    let m = pod_from_k8s(&p).unwrap();
    let a = m.node_affinity.unwrap();
    assert_eq!(a.required.len(), 2);
    assert_eq!(
        a.required[0].match_expressions[0],
        NodeSelectorRequirement::new("topology.kubernetes.io/zone", Operator::In, ["a", "b"])
    );
    assert_eq!(a.required[0].match_expressions[1].operator, Operator::Gt);
    assert_eq!(
        a.required[1].match_expressions[0].operator,
        Operator::Exists
    );
    assert!(a.required[1].match_expressions[0].values.is_empty());
    assert_eq!(a.preferred.len(), 1);
    assert_eq!(a.preferred[0].weight, 50);
    // matchFields in a preferred term are ignored.
    assert_eq!(a.preferred[0].preference.match_expressions.len(), 1);
}

#[test]
fn required_match_fields_are_rejected_naming_the_field() {
    let p = pod_spec(json!({"containers": [], "affinity": {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "a", "operator": "Exists"}]},
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-1"]}]},
        ]},
    }}}));
    let err = pod_from_k8s(&p).unwrap_err();
    assert_eq!(
        err,
        ConvertError::MatchFields {
            object: "Pod ns/p".into(),
            field: "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[1].matchFields".into(),
            key: "metadata.name".into(),
        }
    );
    assert!(err.to_string().contains("nodeSelectorTerms[1].matchFields"));
}

/// Upstream's e2e spec "Termination should drain pods on a node in order": every pod of a
/// DaemonSet carries the DaemonSet controller's pin to its node (a required `matchFields` term
/// on `metadata.name`); it must convert, keep its DaemonSet owner (its drain tier) and not
/// become an unreadable pod that protects its node. Other `matchFields` stay an error.
#[test]
fn a_daemonset_pods_node_pin_is_left_out() {
    let ds_pod = |fields: Value, expressions: Value| {
        pod(json!({
            "metadata": {"name": "ds-abc", "namespace": "ns", "ownerReferences": [
                {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "ds", "uid": "u",
                 "controller": true},
            ]},
            "spec": {"nodeName": "node-1", "containers": [], "affinity": {"nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                    {"matchFields": fields, "matchExpressions": expressions},
                ]},
            }}},
        }))
    };
    let pin = json!([{"key": "metadata.name", "operator": "In", "values": ["node-1"]}]);
    let m = pod_from_k8s(&ds_pod(pin.clone(), json!([]))).unwrap();
    assert!(m.is_daemonset_pod());
    assert!(m.node_affinity.unwrap().required.is_empty());
    // The template's own expressions in the pinned term are kept.
    let arch = json!([{"key": "kubernetes.io/arch", "operator": "In", "values": ["arm64"]}]);
    let m = pod_from_k8s(&ds_pod(pin, arch)).unwrap();
    let required = m.node_affinity.unwrap().required;
    assert_eq!(required.len(), 1);
    assert_eq!(
        required[0].match_expressions,
        vec![NodeSelectorRequirement::new(
            "kubernetes.io/arch",
            Operator::In,
            ["arm64"]
        )]
    );
    // Another field is not the DaemonSet controller's pin.
    let other = json!([{"key": "metadata.uid", "operator": "In", "values": ["x"]}]);
    let err = pod_from_k8s(&ds_pod(other, json!([]))).unwrap_err();
    assert!(matches!(err, ConvertError::MatchFields { ref key, .. } if key == "metadata.uid"));
}

#[test]
fn unknown_node_operator_is_rejected() {
    let p = pod_spec(json!({"containers": [], "affinity": {"nodeAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 1, "preference": {"matchExpressions": [{"key": "a", "operator": "Gte", "values": ["1"]}]}},
        ],
    }}}));
    let err = pod_from_k8s(&p).unwrap_err();
    assert_eq!(
        err.field(),
        "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].preference.matchExpressions[0].operator"
    );
}

#[test]
fn pod_affinity_and_anti_affinity() {
    let p = pod(json!({
        "metadata": {"name": "p", "namespace": "ns", "labels": {"app": "web", "version": "v2"}},
        "spec": {"containers": [], "affinity": {
            "podAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [{
                    "labelSelector": {"matchLabels": {"app": "db"}},
                    "namespaces": ["data"],
                    "topologyKey": "topology.kubernetes.io/zone",
                }],
                "preferredDuringSchedulingIgnoredDuringExecution": [{
                    "weight": 10,
                    "podAffinityTerm": {
                        "labelSelector": {"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["batch"]}]},
                        "namespaceSelector": {},
                        "topologyKey": "kubernetes.io/hostname",
                    },
                }],
            },
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [{
                    "labelSelector": {"matchLabels": {"app": "web"}},
                    "matchLabelKeys": ["version", "absent"],
                    "mismatchLabelKeys": ["app"],
                    "namespaceSelector": {"matchLabels": {"team": "a"}},
                    "topologyKey": "kubernetes.io/hostname",
                }],
            },
        }},
    }));
    let m = pod_from_k8s(&p).unwrap();
    let aff = m.pod_affinity.unwrap();
    assert_eq!(aff.required.len(), 1);
    let t = &aff.required[0];
    assert_eq!(t.namespaces, ["data"]);
    assert!(t.namespace_selector.is_none());
    assert_eq!(t.topology_key, "topology.kubernetes.io/zone");
    assert_eq!(
        t.label_selector,
        Some(model::LabelSelector::from_labels([("app", "db")]))
    );
    let w = &aff.preferred[0];
    assert_eq!(w.weight, 10);
    assert_eq!(
        w.pod_affinity_term.namespace_selector,
        Some(model::LabelSelector::default())
    );
    let e = &w
        .pod_affinity_term
        .label_selector
        .as_ref()
        .unwrap()
        .match_expressions[0];
    assert_eq!(
        (e.key.as_str(), e.operator),
        ("tier", SelectorOperator::NotIn)
    );

    let anti = m.pod_anti_affinity.unwrap();
    let t = &anti.required[0];
    let sel = t.label_selector.as_ref().unwrap();
    // matchLabelKeys / mismatchLabelKeys merged with the pod's own values; absent labels skipped.
    assert_eq!(
        sel.match_expressions,
        vec![
            LabelSelectorRequirement {
                key: "version".into(),
                operator: SelectorOperator::In,
                values: vec!["v2".into()],
            },
            LabelSelectorRequirement {
                key: "app".into(),
                operator: SelectorOperator::NotIn,
                values: vec!["web".into()],
            },
        ]
    );
    assert_eq!(
        t.namespace_selector,
        Some(model::LabelSelector::from_labels([("team", "a")]))
    );

    // Merging is idempotent: an API server that already merged the keys changes nothing.
    let mut again = p.clone();
    let term = &mut again
        .spec
        .as_mut()
        .unwrap()
        .affinity
        .as_mut()
        .unwrap()
        .pod_anti_affinity
        .as_mut()
        .unwrap()
        .required_during_scheduling_ignored_during_execution
        .as_mut()
        .unwrap()[0];
    term.label_selector = Some(
        serde_json::from_value(json!({
            "matchLabels": {"app": "web"},
            "matchExpressions": [{"key": "version", "operator": "In", "values": ["v2"]}],
        }))
        .unwrap(),
    );
    let m2 = pod_from_k8s(&again).unwrap();
    assert_eq!(
        m2.pod_anti_affinity.unwrap().required[0]
            .label_selector
            .as_ref(),
        Some(sel)
    );
}

#[test]
fn bad_label_selector_operator_names_the_field() {
    let p = pod_spec(json!({"containers": [], "affinity": {"podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [{
            "labelSelector": {"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]},
            "topologyKey": "kubernetes.io/hostname",
        }],
    }}}));
    let err = pod_from_k8s(&p).unwrap_err();
    assert_eq!(
        err.field(),
        "spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].labelSelector.matchExpressions[0].operator"
    );
}

#[test]
fn tolerations() {
    let p = pod_spec(json!({"containers": [], "tolerations": [
        {"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"},
        {"operator": "Exists"},
        {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
        {"key": "k", "value": "v", "effect": "PreferNoSchedule"},
        {"key": "level", "operator": "Gt", "value": "3"},
    ]}));
    let t = pod_from_k8s(&p).unwrap().tolerations;
    assert_eq!(t.len(), 5);
    assert_eq!(t[0].operator, Some(TolerationOperator::Equal));
    assert_eq!(t[0].effect, Some(TaintEffect::NoSchedule));
    assert_eq!(t[1].key, "");
    assert_eq!(t[1].operator, Some(TolerationOperator::Exists));
    assert_eq!(t[1].effect, None);
    assert_eq!(t[2].toleration_seconds, Some(300));
    assert_eq!(t[3].operator, None);
    assert_eq!(t[3].effect, Some(TaintEffect::PreferNoSchedule));
    assert_eq!(t[4].operator, Some(TolerationOperator::Gt));
    assert!(t[1].tolerates(&Taint::new("anything", "x", TaintEffect::NoExecute)));

    let p = pod_spec(json!({"containers": [], "tolerations": [
        {"key": "a", "operator": "Exists"}, {"key": "b", "operator": "Matches"},
    ]}));
    let err = pod_from_k8s(&p).unwrap_err();
    assert!(matches!(&err, ConvertError::Invalid { field, value, .. }
        if field == "spec.tolerations[1].operator" && value == "Matches"));
    let p = pod_spec(json!({"containers": [], "tolerations": [{"key": "a", "effect": "Evict"}]}));
    assert_eq!(
        pod_from_k8s(&p).unwrap_err().field(),
        "spec.tolerations[0].effect"
    );
}

#[test]
fn topology_spread_constraints() {
    let p = pod_spec(json!({"containers": [], "topologySpreadConstraints": [
        {
            "maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "web"}},
            "minDomains": 3,
            "nodeAffinityPolicy": "Ignore",
            "nodeTaintsPolicy": "Honor",
            "matchLabelKeys": ["pod-template-hash"],
        },
        {"maxSkew": 2, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "ScheduleAnyway"},
    ]}));
    let c = pod_from_k8s(&p).unwrap().topology_spread_constraints;
    assert_eq!(
        c[0],
        model::TopologySpreadConstraint {
            max_skew: 1,
            topology_key: "topology.kubernetes.io/zone".into(),
            when_unsatisfiable: WhenUnsatisfiable::DoNotSchedule,
            label_selector: Some(model::LabelSelector::from_labels([("app", "web")])),
            min_domains: Some(3),
            node_affinity_policy: Some(NodeInclusionPolicy::Ignore),
            node_taints_policy: Some(NodeInclusionPolicy::Honor),
            match_label_keys: vec!["pod-template-hash".into()],
        }
    );
    assert_eq!(c[1].when_unsatisfiable, WhenUnsatisfiable::ScheduleAnyway);
    assert_eq!(c[1].label_selector, None);
    assert_eq!(c[1].node_affinity_policy, None);

    for (patch, field) in [
        (
            json!({"whenUnsatisfiable": "Maybe"}),
            "spec.topologySpreadConstraints[0].whenUnsatisfiable",
        ),
        (
            json!({"nodeTaintsPolicy": "Sometimes"}),
            "spec.topologySpreadConstraints[0].nodeTaintsPolicy",
        ),
        (
            json!({"topologyKey": ""}),
            "spec.topologySpreadConstraints[0].topologyKey",
        ),
    ] {
        let mut tsc =
            json!({"maxSkew": 1, "topologyKey": "k", "whenUnsatisfiable": "DoNotSchedule"});
        for (k, v) in patch.as_object().unwrap() {
            tsc[k] = v.clone();
        }
        let p = pod_spec(json!({"containers": [], "topologySpreadConstraints": [tsc]}));
        assert_eq!(pod_from_k8s(&p).unwrap_err().field(), field);
    }
}

// ---------------------------------------------------------------------------------------------
// Nodes

fn node(v: Value) -> core::Node {
    serde_json::from_value(v).unwrap()
}

#[test]
fn lifecycle_nodes() {
    let n = node(json!({
        "metadata": {
            "name": "ip-10-0-0-2",
            "labels": {"karpenter.sh/nodepool": "default"},
            "annotations": {"a": "b"},
            "finalizers": ["karpenter.sh/termination"],
            "creationTimestamp": "2024-06-01T00:00:00Z",
            "deletionTimestamp": "2024-06-03T00:00:00Z",
        },
        "spec": {"providerID": "aws:///us-east-1a/i-1"},
        "status": {
            "capacity": {"cpu": "4"},
            "conditions": [
                {"type": "Ready", "status": "True", "lastTransitionTime": "2024-06-01T00:01:00Z"},
                {"type": "DiskPressure", "status": "Bogus"},
            ],
        },
    }));
    let l = lifecycle_node_from_k8s(&n).unwrap();
    assert_eq!(l.provider_id, "aws:///us-east-1a/i-1");
    assert!(l.is_ready() && l.is_deleting());
    assert_eq!(l.finalizers, ["karpenter.sh/termination"]);
    assert_eq!(l.annotations["a"], "b");
    assert_eq!(l.allocatable, l.capacity);
    assert_eq!(
        l.condition("DiskPressure").map(|c| c.status),
        Some(crate::api::ConditionStatus::Unknown)
    );
    assert!(lifecycle_node_from_k8s(&node(json!({"metadata": {}}))).is_err());
}

#[test]
fn nodes() {
    let n = node(json!({
        "metadata": {
            "name": "ip-10-0-0-1",
            "labels": {"karpenter.sh/nodepool": "default", "karpenter.sh/initialized": "true"},
            "creationTimestamp": "2024-06-01T00:00:00Z",
        },
        "spec": {"taints": [
            {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"},
            {"key": "karpenter.sh/disrupted", "effect": "NoSchedule", "timeAdded": "2024-06-02T00:00:00Z"},
        ]},
        "status": {
            "capacity": {"cpu": "4", "memory": "16Gi", "pods": "110"},
            "allocatable": {"cpu": "3920m", "memory": "15Gi", "pods": "110"},
        },
    }));
    let m = node_from_k8s(&n).unwrap();
    assert_eq!(m.name, "ip-10-0-0-1");
    assert!(m.managed && m.initialized && !m.marked_for_deletion);
    assert_eq!(m.nodepool(), Some("default"));
    assert_eq!(
        m.taints[0],
        Taint::new("dedicated", "gpu", TaintEffect::NoSchedule)
    );
    assert_eq!(
        m.taints[1].time_added.as_deref(),
        Some("2024-06-02T00:00:00Z")
    );
    assert_eq!(milli(&m.capacity, "cpu"), Some(4000));
    assert_eq!(milli(&m.allocatable, "cpu"), Some(3920));
    assert_eq!(bytes(&m.allocatable, "pods"), Some(110));
    assert_eq!(m.creation_timestamp.to_string(), "2024-06-01T00:00:00Z");
    assert!(m.startup_taints.is_empty());

    // Managed but not yet initialized; being deleted; allocatable defaults to capacity.
    let n = node(json!({
        "metadata": {
            "name": "n2", "labels": {"karpenter.sh/nodepool": "default"},
            "deletionTimestamp": "2024-06-01T00:00:00Z",
        },
        "status": {"capacity": {"cpu": "2"}},
    }));
    let m = node_from_k8s(&n).unwrap();
    assert!(m.managed && !m.initialized && m.marked_for_deletion);
    assert_eq!(m.allocatable, m.capacity);

    // Unmanaged nodes count as initialized.
    let m = node_from_k8s(&node(json!({"metadata": {"name": "n3"}}))).unwrap();
    assert!(!m.managed && m.initialized);

    let err = node_from_k8s(&node(json!({
        "metadata": {"name": "n4"}, "status": {"allocatable": {"memory": "16 Gi"}},
    })))
    .unwrap_err();
    assert_eq!(err.object(), "Node n4");
    assert_eq!(err.field(), "status.allocatable[memory]");
    let err = node_from_k8s(&node(json!({
        "metadata": {"name": "n5"}, "spec": {"taints": [{"key": "a", "effect": "Sometimes"}]},
    })))
    .unwrap_err();
    assert_eq!(err.field(), "spec.taints[0].effect");
}

// ---------------------------------------------------------------------------------------------
// DaemonSets

fn daemonset() -> apps::DaemonSet {
    serde_json::from_value(json!({
        "metadata": {"name": "agent", "namespace": "kube-system", "uid": "ds-uid"},
        "spec": {
            "selector": {"matchLabels": {"app": "agent"}},
            "template": {
                "metadata": {"labels": {"app": "agent"}},
                "spec": {
                    "containers": [container("agent", json!({"cpu": "100m"}), json!({"cpu": "200m", "memory": "128Mi"}))],
                    "tolerations": [{"operator": "Exists"}],
                    "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [{"matchExpressions": [
                            {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]},
                        ]}],
                    }}},
                },
            },
        },
    }))
    .unwrap()
}

#[test]
fn daemonset_pod_from_template() {
    let ds = daemonset_from_k8s(&daemonset()).unwrap();
    assert_eq!(
        (ds.namespace.as_str(), ds.name.as_str()),
        ("kube-system", "agent")
    );
    let p = &ds.pod;
    assert_eq!(p.key(), "kube-system/agent");
    assert!(p.is_daemonset_pod());
    let owner = p.owner.as_ref().unwrap();
    assert_eq!(
        (owner.api_version.as_str(), owner.name.as_str()),
        ("apps/v1", "agent")
    );
    assert_eq!(p.labels.get("app").map(String::as_str), Some("agent"));
    // Limits copied into missing requests only.
    assert_eq!(milli(&p.requests, "cpu"), Some(100));
    assert_eq!(bytes(&p.requests, "memory"), Some(128 * MI));
    assert_eq!(p.tolerations.len(), 1);
    let required = &p.node_affinity.as_ref().unwrap().required;
    assert_eq!(required.len(), 1);
    assert_eq!(required[0].match_expressions[0].key, "kubernetes.io/os");
}

#[test]
fn daemonset_existing_pod_gets_the_template_required_affinity() {
    // The DaemonSet controller pins its pods with matchFields; the template's affinity replaces
    // that, while the pod's own (e.g. resized) requests are kept.
    let existing = pod(json!({
        "metadata": {
            "name": "agent-x7k2p", "namespace": "kube-system",
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent", "uid": "ds-uid", "controller": true}],
        },
        "spec": {
            "nodeName": "node-1",
            "containers": [container("agent", json!({"cpu": "150m"}), Value::Null)],
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{
                    "matchExpressions": [{"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]}],
                    "matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-1"]}],
                }],
            }}},
        },
    }));
    // The pod alone converts without its pin (see a_daemonset_pods_node_pin_is_left_out).
    let alone = pod_from_k8s(&existing).unwrap();
    assert_eq!(
        alone.node_affinity.unwrap().required[0]
            .match_expressions
            .len(),
        1
    );
    let ds = daemonset_from_k8s_with_pod(&daemonset(), Some(&existing)).unwrap();
    assert_eq!(ds.pod.name, "agent-x7k2p");
    assert_eq!(milli(&ds.pod.requests, "cpu"), Some(150));
    let required = &ds.pod.node_affinity.as_ref().unwrap().required;
    assert_eq!(required.len(), 1);
    assert_eq!(required[0].match_expressions.len(), 1);

    // Without a required affinity in the template, the pod's pinning term is dropped.
    let mut ds_obj = daemonset();
    ds_obj
        .spec
        .as_mut()
        .unwrap()
        .template
        .spec
        .as_mut()
        .unwrap()
        .affinity = None;
    let ds = daemonset_from_k8s_with_pod(&ds_obj, Some(&existing)).unwrap();
    assert!(ds.pod.node_affinity.as_ref().unwrap().required.is_empty());
    let ds = daemonset_from_k8s(&ds_obj).unwrap();
    assert!(ds.pod.node_affinity.is_none());
}

/// A pod of the `agent` DaemonSet (see [`daemonset`]) created at `created`, with `selector` as
/// its node selector and `owner_uid` in its controller reference.
fn agent_pod(name: &str, created: &str, owner_uid: &str, selector: Value) -> core::Pod {
    pod(json!({
        "metadata": {
            "name": name, "namespace": "kube-system", "creationTimestamp": created,
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent", "uid": owner_uid, "controller": true}],
        },
        "spec": {
            "nodeSelector": selector,
            "containers": [container("agent", json!({"cpu": "100m"}), Value::Null)],
        },
    }))
}

#[test]
fn newest_controlled_pod_is_the_daemonset_template() {
    let old = agent_pod("agent-old", "2024-01-01T00:00:00Z", "ds-uid", json!({}));
    let new = agent_pod("agent-new", "2024-02-01T00:00:00Z", "ds-uid", json!({}));
    let same_time = agent_pod("agent-same", "2024-02-01T00:00:00Z", "ds-uid", json!({}));
    // Newer, but controlled by another object with the same name (another UID).
    let stranger = agent_pod("agent-z", "2024-03-01T00:00:00Z", "other-uid", json!({}));
    let mut elsewhere = agent_pod("agent-ns", "2024-03-01T00:00:00Z", "ds-uid", json!({}));
    elsewhere.metadata.namespace = Some("default".into());
    let pods = [old.clone(), new, same_time, stranger.clone(), elsewhere];
    let chosen = newest_daemonset_pod(&daemonset(), &pods).and_then(|p| p.metadata.name.clone());
    assert_eq!(chosen.as_deref(), Some("agent-new"));
    // No controlled pod: the template.
    assert!(newest_daemonset_pod(&daemonset(), [&stranger]).is_none());
    // A DaemonSet without a UID (offline manifests) matches by kind and name.
    let mut no_uid = daemonset();
    no_uid.metadata.uid = None;
    let chosen =
        newest_daemonset_pod(&no_uid, [&old, &stranger]).and_then(|p| p.metadata.name.clone());
    assert_eq!(chosen.as_deref(), Some("agent-z"));
}

#[test]
fn daemonset_running_only_on_amd64_adds_no_overhead_to_an_arm64_claim() {
    use crate::labels;
    use crate::model::{InstanceType, Offering, Overhead, Pod};
    use crate::requirements::{Operator, Requirement, Requirements};
    use crate::scheduling::{NodePoolInput, SchedulerOptions, SchedulingInput, solve};
    use std::sync::Arc;

    // The template runs anywhere; its live pods carry an amd64 node selector (say, added by a
    // webhook), so upstream counts the DaemonSet only where amd64 nodes are.
    let mut ds_obj = daemonset();
    ds_obj
        .spec
        .as_mut()
        .unwrap()
        .template
        .spec
        .as_mut()
        .unwrap()
        .affinity = None;
    let live = agent_pod(
        "agent-x",
        "2024-01-01T00:00:00Z",
        "ds-uid",
        json!({"kubernetes.io/arch": "amd64"}),
    );
    let from_live =
        daemonset_from_k8s_with_pod(&ds_obj, newest_daemonset_pod(&ds_obj, [&live])).unwrap();
    let from_template = daemonset_from_k8s(&ds_obj).unwrap();

    let it = |name: &str, arch: &str| {
        let mut reqs = Requirements::new();
        reqs.add(Requirement::new(labels::ARCH, Operator::In, [arch]));
        reqs.add(Requirement::new(labels::OS, Operator::In, ["linux"]));
        let capacity = [
            ("cpu", crate::resources::Quantity::from_milli(4000)),
            ("memory", crate::resources::Quantity::parse("8Gi").unwrap()),
            ("pods", crate::resources::Quantity::from_milli(20_000)),
        ]
        .into_iter()
        .collect();
        Arc::new(InstanceType::new(
            name,
            reqs,
            vec![Offering::new(
                "zone-a",
                labels::CAPACITY_TYPE_ON_DEMAND,
                0.1,
            )],
            capacity,
            Overhead::default(),
        ))
    };
    let mut arm_pod = Pod::new("default", "web");
    arm_pod.requests = [("cpu", crate::resources::Quantity::from_milli(1000))]
        .into_iter()
        .collect();
    arm_pod
        .node_selector
        .insert(labels::ARCH.to_string(), "arm64".to_string());
    let claim_cpu = |ds: &crate::model::DaemonSet| {
        let input = SchedulingInput {
            node_pools: vec![NodePoolInput {
                name: "default".into(),
                weight: 0,
                requirements: vec![],
                labels: BTreeMap::new(),
                taints: vec![],
                startup_taints: vec![],
                node_class_label: None,
                limits: ResourceList::new(),
                instance_types: vec![it("x86", "amd64"), it("arm", "arm64")],
                packing: None,
            }],
            pods: vec![arm_pod.clone()],
            daemonsets: vec![ds.clone()],
            ..SchedulingInput::default()
        };
        let r = solve(&input, &SchedulerOptions::default());
        assert!(r.pod_errors.is_empty(), "{:?}", r.pod_errors);
        r.new_node_claims[0]
            .requests
            .get_or_zero("cpu")
            .milli_value()
    };
    // From the live pod: the arm64 claim carries the pod alone.
    assert_eq!(claim_cpu(&from_live), 1000);
    // From the template: the DaemonSet's 100m counts on the arm64 claim too.
    assert_eq!(claim_cpu(&from_template), 1100);
}

#[test]
fn daemonset_errors_name_the_daemonset_and_template_field() {
    let mut ds = daemonset();
    let spec = ds.spec.as_mut().unwrap().template.spec.as_mut().unwrap();
    spec.containers[0].resources = Some(core::ResourceRequirements {
        requests: Some([("cpu".to_string(), Quantity("one".into()))].into()),
        ..Default::default()
    });
    let err = daemonset_from_k8s(&ds).unwrap_err();
    assert_eq!(err.object(), "DaemonSet kube-system/agent");
    assert_eq!(
        err.field(),
        "spec.template.spec.containers[0].resources.requests[cpu]"
    );
    assert!(err.to_string().contains("\"agent\""));
}

// ---------------------------------------------------------------------------------------------
// PodDisruptionBudgets

fn pdb(v: Value) -> policy::PodDisruptionBudget {
    serde_json::from_value(v).unwrap()
}

#[test]
fn pdbs() {
    let b = pdb_from_k8s(&pdb(json!({
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": {
            "maxUnavailable": "0%",
            "selector": {"matchLabels": {"app": "web"}},
            "unhealthyPodEvictionPolicy": "AlwaysAllow",
        },
        "status": {"disruptionsAllowed": 0, "currentHealthy": 3, "desiredHealthy": 3, "expectedPods": 3},
    })))
    .unwrap();
    assert_eq!((b.namespace.as_str(), b.name.as_str()), ("shop", "web"));
    assert_eq!(b.max_unavailable, Some(IntOrPercent::Percent(0)));
    assert_eq!(b.min_available, None);
    assert!(b.unhealthy_pod_eviction_policy_always_allow);
    assert!(b.is_fully_blocking());
    let mut web = model::Pod::new("shop", "web-1");
    web.labels.insert("app".into(), "web".into());
    assert!(b.selects(&web));
    let mut elsewhere = web.clone();
    elsewhere.namespace = "other".into();
    assert!(!b.selects(&elsewhere));

    let b = pdb_from_k8s(&pdb(json!({
        "metadata": {"name": "db"},
        "spec": {"minAvailable": 2},
        "status": {"disruptionsAllowed": 1, "currentHealthy": 3, "desiredHealthy": 2, "expectedPods": 3},
    })))
    .unwrap();
    assert_eq!(b.namespace, "default");
    assert_eq!(b.min_available, Some(IntOrPercent::Int(2)));
    assert_eq!(b.disruptions_allowed, 1);
    assert!(!b.unhealthy_pod_eviction_policy_always_allow);
    assert!(!b.is_fully_blocking());
    // No selector: selects nothing.
    assert!(!b.selects(&model::Pod::new("default", "x")));

    let b = pdb_from_k8s(&pdb(json!({
        "metadata": {"name": "all"},
        "spec": {"minAvailable": "100%", "selector": {}},
    })))
    .unwrap();
    assert!(b.is_fully_blocking());
    assert_eq!(b.disruptions_allowed, 0);
    assert!(b.selects(&model::Pod::new("default", "anything")));

    let err = pdb_from_k8s(&pdb(json!({
        "metadata": {"name": "bad", "namespace": "x"}, "spec": {"maxUnavailable": "half"},
    })))
    .unwrap_err();
    assert_eq!(err.object(), "PodDisruptionBudget x/bad");
    assert_eq!(err.field(), "spec.maxUnavailable");
    let err = pdb_from_k8s(&pdb(json!({
        "metadata": {"name": "bad"},
        "spec": {"selector": {"matchExpressions": [{"key": "a", "operator": "Lt", "values": ["1"]}]}},
    })))
    .unwrap_err();
    assert_eq!(err.field(), "spec.selector.matchExpressions[0].operator");
}

// ---------------------------------------------------------------------------------------------
// Effective limits and condition times

#[test]
fn limits_aggregate_as_kubernetes_pod_limits() {
    let mut sc = sidecar("proxy", Value::Null);
    sc["resources"] = json!({"limits": {"cpu": "500m"}});
    let p = pod_spec(json!({
        "containers": [
            container("a", json!({"cpu": "250m"}), json!({"cpu": "1", "memory": "1Gi"})),
            // Requests are not copied into limits.
            container("b", json!({"cpu": "2", "memory": "2Gi"}), Value::Null),
        ],
        "initContainers": [
            sc,
            container("init", Value::Null, json!({"cpu": "3"})),
        ],
        "overhead": {"cpu": "100m", "ephemeral-storage": "1Gi"},
    }));
    let limits = pod_from_k8s(&p).unwrap().limits;
    // Running: a 1 + proxy 0.5 = 1.5; init peak: init 3 + proxy 0.5 = 3.5; + overhead 0.1.
    assert_eq!(milli(&limits, "cpu"), Some(3600));
    assert_eq!(bytes(&limits, "memory"), Some(GI));
    assert_eq!(
        limits.get("ephemeral-storage"),
        None,
        "overhead is added only to limits that are set"
    );
    // Pod-level limits replace the supported resources.
    let p = pod_spec(json!({
        "containers": [container("a", Value::Null, json!({"cpu": "1", "nvidia.com/gpu": "1"}))],
        "resources": {"limits": {"cpu": "4"}},
    }));
    let limits = pod_from_k8s(&p).unwrap().limits;
    assert_eq!(milli(&limits, "cpu"), Some(4000));
    assert_eq!(bytes(&limits, "nvidia.com/gpu"), Some(1));
    // No limits at all: empty.
    let p = pod_spec(json!({"containers": [container("a", json!({"cpu": "1"}), Value::Null)]}));
    assert!(pod_from_k8s(&p).unwrap().limits.is_empty());
    // A bad limit names its container.
    let p = pod_spec(
        json!({"initContainers": [container("x", Value::Null, json!({"cpu": "lots"}))],
                            "containers": []}),
    );
    let e = pod_from_k8s(&p).unwrap_err().to_string();
    assert!(e.contains("spec.initContainers[0].resources"), "{e}");
}

#[test]
fn scheduled_and_ready_times_are_read_only_from_true_conditions() {
    let p = pod(json!({
        "metadata": {"name": "p", "namespace": "ns", "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"containers": []},
        "status": {"phase": "Running", "conditions": [
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-01-01T00:00:03Z"},
            {"type": "Ready", "status": "False", "lastTransitionTime": "2026-01-01T00:00:09Z"},
        ]}
    }));
    let m = pod_from_k8s(&p).unwrap();
    assert_eq!(
        m.scheduled_at,
        Some("2026-01-01T00:00:03Z".parse().unwrap())
    );
    assert_eq!(m.ready_at, None);
    let p = pod(json!({
        "metadata": {"name": "p", "namespace": "ns"},
        "spec": {"containers": []},
        "status": {"conditions": [
            {"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:09Z"},
        ]}
    }));
    let m = pod_from_k8s(&p).unwrap();
    assert_eq!(m.ready_at, Some("2026-01-01T00:00:09Z".parse().unwrap()));
    assert_eq!(m.scheduled_at, None);
}

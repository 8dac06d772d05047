//! The workload rule on kubectl-dump shapes, and the world's nodes and errors.

use k8s_openapi::api::apps::v1::{
    Deployment, DeploymentSpec, ReplicaSet, ReplicaSetSpec, StatefulSet, StatefulSetSpec,
};
use k8s_openapi::api::batch::v1::{Job, JobSpec, JobStatus};
use k8s_openapi::api::core::v1::{
    Container, Node, NodeSpec, Pod, PodSpec, PodStatus, PodTemplateSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};

use super::*;

fn template() -> PodTemplateSpec {
    PodTemplateSpec {
        metadata: Some(ObjectMeta {
            labels: Some([("app".to_string(), "web".to_string())].into()),
            ..ObjectMeta::default()
        }),
        spec: Some(PodSpec {
            containers: vec![Container {
                name: "c".into(),
                ..Container::default()
            }],
            ..PodSpec::default()
        }),
    }
}

fn meta(name: &str, uid: &str, owner: Option<(&str, &str, &str)>) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.into()),
        namespace: Some("default".into()),
        uid: (!uid.is_empty()).then(|| uid.to_string()),
        owner_references: owner.map(|(kind, name, uid)| {
            vec![OwnerReference {
                api_version: if kind == "Job" { "batch/v1" } else { "apps/v1" }.into(),
                kind: kind.into(),
                name: name.into(),
                uid: uid.into(),
                controller: Some(true),
                ..OwnerReference::default()
            }]
        }),
        ..ObjectMeta::default()
    }
}

fn deployment(name: &str, uid: &str, replicas: i32) -> Located<Workload> {
    Located::new(
        "dump.yaml",
        format!("Deployment/default/{name}"),
        Workload::Deployment(Box::new(Deployment {
            metadata: meta(name, uid, None),
            spec: Some(DeploymentSpec {
                replicas: Some(replicas),
                template: template(),
                ..DeploymentSpec::default()
            }),
            status: None,
        })),
    )
}

fn replicaset(
    name: &str,
    uid: &str,
    replicas: i32,
    owner: Option<(&str, &str, &str)>,
) -> Located<Workload> {
    Located::new(
        "dump.yaml",
        format!("ReplicaSet/default/{name}"),
        Workload::ReplicaSet(Box::new(ReplicaSet {
            metadata: meta(name, uid, owner),
            spec: Some(ReplicaSetSpec {
                replicas: Some(replicas),
                template: Some(template()),
                ..ReplicaSetSpec::default()
            }),
            status: None,
        })),
    )
}

fn statefulset(name: &str, uid: &str, replicas: i32) -> Located<Workload> {
    Located::new(
        "dump.yaml",
        format!("StatefulSet/default/{name}"),
        Workload::StatefulSet(Box::new(StatefulSet {
            metadata: meta(name, uid, None),
            spec: Some(StatefulSetSpec {
                replicas: Some(replicas),
                template: template(),
                ..StatefulSetSpec::default()
            }),
            status: None,
        })),
    )
}

fn job(name: &str, uid: &str, spec: JobSpec, status: Option<JobStatus>) -> Located<Workload> {
    Located::new(
        "dump.yaml",
        format!("Job/default/{name}"),
        Workload::Job(Box::new(Job {
            metadata: meta(name, uid, None),
            spec: Some(JobSpec {
                template: template(),
                ..spec
            }),
            status,
        })),
    )
}

/// A pod of `owner`, bound to `node` (if any), in `phase`.
fn pod(
    name: &str,
    owner: Option<(&str, &str, &str)>,
    node: Option<&str>,
    phase: &str,
) -> Located<Pod> {
    let mut m = meta(name, &format!("uid-{name}"), owner);
    m.labels = Some([("app".to_string(), "web".to_string())].into());
    Located::new(
        "dump.yaml",
        format!("Pod/default/{name}"),
        Pod {
            metadata: m,
            spec: Some(PodSpec {
                node_name: node.map(str::to_string),
                ..template().spec.unwrap_or_default()
            }),
            status: Some(PodStatus {
                phase: Some(phase.into()),
                ..PodStatus::default()
            }),
        },
    )
}

fn node(name: &str) -> Located<Node> {
    Located::new(
        "dump.yaml",
        format!("Node/{name}"),
        Node {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..ObjectMeta::default()
            },
            spec: Some(NodeSpec::default()),
            status: None,
        },
    )
}

fn pending(workloads: &[Located<Workload>], pods: &[Located<Pod>]) -> Vec<String> {
    let nodes = [node("node-a"), node("node-b")];
    let objects = Objects {
        workloads,
        pods,
        nodes: &nodes,
        ..Objects::default()
    };
    build(&objects)
        .unwrap()
        .pending
        .iter()
        .map(|p| p.pod.key())
        .collect()
}

const RS: Option<(&str, &str, &str)> = Some(("ReplicaSet", "web-5d8f", "rs-1"));

#[test]
fn a_dump_of_a_deployment_counts_each_pod_once() {
    // Deployment (3) + its ReplicaSet (3) + 2 bound pods + 1 pending pod + 1 finished pod.
    let workloads = [
        deployment("web", "d-1", 3),
        replicaset("web-5d8f", "rs-1", 3, Some(("Deployment", "web", "d-1"))),
    ];
    let pods = [
        pod("web-5d8f-aaaaa", RS, Some("node-a"), "Running"),
        pod("web-5d8f-bbbbb", RS, Some("node-b"), "Running"),
        pod("web-5d8f-ccccc", RS, None, "Pending"),
        pod("web-5d8f-ddddd", RS, Some("node-a"), "Succeeded"),
    ];
    assert_eq!(pending(&workloads, &pods), ["default/web-5d8f-ccccc"]);
    let objects = Objects {
        workloads: &workloads,
        pods: &pods,
        nodes: &[node("node-a"), node("node-b")],
        ..Objects::default()
    };
    let world = build(&objects).unwrap();
    assert_eq!(world.bound.len(), 2);
    assert_eq!(
        world.nodes["node-a"].pods.len(),
        1,
        "the finished pod is not bound"
    );
}

#[test]
fn a_finished_pod_is_not_an_active_replica() {
    let workloads = [replicaset("web-5d8f", "rs-1", 3, None)];
    let pods = [
        pod("web-5d8f-aaaaa", RS, Some("node-a"), "Running"),
        pod("web-5d8f-ddddd", RS, Some("node-a"), "Failed"),
    ];
    assert_eq!(
        pending(&workloads, &pods),
        ["default/web-5d8f-0", "default/web-5d8f-1"]
    );
}

#[test]
fn a_terminating_pod_is_replaced() {
    let workloads = [replicaset("web-5d8f", "rs-1", 1, None)];
    let mut p = pod("web-5d8f-aaaaa", RS, Some("node-a"), "Running");
    p.object.metadata.deletion_timestamp = Some(Time(jiff::Timestamp::UNIX_EPOCH));
    assert_eq!(pending(&workloads, &[p]), ["default/web-5d8f-0"]);
}

#[test]
fn old_replicasets_scaled_to_zero_add_nothing() {
    let workloads = [
        deployment("web", "d-1", 2),
        replicaset("web-5d8f", "rs-1", 2, Some(("Deployment", "web", "d-1"))),
        replicaset("web-77aa", "rs-0", 0, Some(("Deployment", "web", "d-1"))),
    ];
    let pods = [pod("web-5d8f-aaaaa", RS, Some("node-a"), "Running")];
    assert_eq!(pending(&workloads, &pods), ["default/web-5d8f-0"]);
}

#[test]
fn a_deployment_whose_replicaset_is_missing_counts_the_replicasets_pods() {
    // The dump has the Deployment and its pods but not the ReplicaSet: pods owned by
    // `web-<pod-template-hash>` are the Deployment's.
    let workloads = [deployment("web", "d-1", 3)];
    let mut a = pod("web-5d8f-aaaaa", RS, Some("node-a"), "Running");
    let mut b = pod("web-5d8f-bbbbb", RS, None, "Pending");
    for p in [&mut a, &mut b] {
        if let Some(l) = p.object.metadata.labels.as_mut() {
            l.insert("pod-template-hash".into(), "5d8f".into());
        }
    }
    // A pod of another Deployment whose name starts the same is not counted.
    let mut other = pod(
        "web-api-1111-x",
        Some(("ReplicaSet", "web-api-1111", "rs-9")),
        None,
        "Pending",
    );
    if let Some(l) = other.object.metadata.labels.as_mut() {
        l.insert("pod-template-hash".into(), "1111".into());
    }
    assert_eq!(
        pending(&workloads, &[a, b, other]),
        [
            "default/web-5d8f-bbbbb",
            "default/web-api-1111-x",
            "default/web-0"
        ]
    );
}

#[test]
fn a_replicaset_owned_by_another_deployment_does_not_stop_expansion() {
    // Same name, other uid: the ReplicaSet belongs to a Deployment no longer in the input.
    let workloads = [
        deployment("web", "d-2", 1),
        replicaset("web-5d8f", "rs-1", 0, Some(("Deployment", "web", "d-1"))),
    ];
    assert_eq!(pending(&workloads, &[]), ["default/web-0"]);
}

#[test]
fn pods_whose_owner_is_missing_are_planned_once() {
    // The pod's ReplicaSet is not in the input: the pod stands alone.
    let pods = [pod("web-5d8f-ccccc", RS, None, "Pending")];
    assert_eq!(pending(&[], &pods), ["default/web-5d8f-ccccc"]);
}

#[test]
fn a_plain_manifest_directory_expands_every_replica() {
    let workloads = [deployment("web", "", 2), statefulset("db", "", 2)];
    assert_eq!(
        pending(&workloads, &[]),
        [
            "default/web-0",
            "default/web-1",
            "default/db-0",
            "default/db-1"
        ]
    );
}

#[test]
fn a_statefulset_with_its_pods_gets_its_missing_ordinals() {
    let sts = Some(("StatefulSet", "db", "s-1"));
    let workloads = [statefulset("db", "s-1", 4)];
    let pods = [
        pod("db-0", sts, Some("node-a"), "Running"),
        pod("db-2", sts, None, "Pending"),
        // A finished ordinal is created again (the finished pod is not planned).
        pod("db-3", sts, Some("node-b"), "Failed"),
    ];
    assert_eq!(
        pending(&workloads, &pods),
        ["default/db-2", "default/db-1", "default/db-3"]
    );
}

#[test]
fn a_pod_that_only_shares_a_generated_name_is_a_duplicate() {
    let workloads = [deployment("web", "", 2)];
    let pods = [pod("web-1", None, None, "Pending")];
    let objects = Objects {
        workloads: &workloads,
        pods: &pods,
        ..Objects::default()
    };
    let err = build(&objects).unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("Duplicate value: pod default/web-1"),
        "{text}"
    );
    assert!(text.contains("Pod/default/web-1"), "{text}");
}

#[test]
fn jobs_count_completions_and_their_active_pods() {
    let owner = Some(("Job", "train", "j-1"));
    let spec = JobSpec {
        parallelism: Some(4),
        completions: Some(5),
        ..JobSpec::default()
    };
    let status = JobStatus {
        succeeded: Some(3),
        ..JobStatus::default()
    };
    let workloads = [job("train", "j-1", spec.clone(), Some(status))];
    // 5 completions, 3 done: 2 to run, one of which is running.
    let pods = [pod("train-x", owner, Some("node-a"), "Running")];
    assert_eq!(pending(&workloads, &pods), ["default/train-0"]);

    let done = JobStatus {
        conditions: Some(vec![k8s_openapi::api::batch::v1::JobCondition {
            type_: "Complete".into(),
            status: "True".into(),
            ..Default::default()
        }]),
        ..JobStatus::default()
    };
    assert!(pending(&[job("train", "j-1", spec.clone(), Some(done))], &[]).is_empty());
    let suspended = JobSpec {
        suspend: Some(true),
        ..spec
    };
    assert!(pending(&[job("train", "j-1", suspended, None)], &[]).is_empty());
}

#[test]
fn replica_counts_out_of_range_name_the_field() {
    let err = build(&Objects {
        workloads: &[deployment("web", "", -1)],
        ..Objects::default()
    })
    .unwrap_err();
    assert_eq!(
        err,
        WorldError::invalid(
            "dump.yaml",
            "Deployment/default/web",
            "spec.replicas",
            format!("Invalid value: -1: must be between 0 and {MAX_REPLICAS}")
        )
    );
}

#[test]
fn sources_name_the_workload() {
    let objects = Objects {
        workloads: &[deployment("web", "", 1)],
        ..Objects::default()
    };
    let world = build(&objects).unwrap();
    let source = &world.pending[0].source;
    assert_eq!(source.object, "Deployment/default/web");
    let workload = source.workload.as_ref().unwrap();
    assert_eq!(workload.name, "web");
    assert_eq!(workload.labels.get("app").map(String::as_str), Some("web"));
    let input = world.scheduling_input();
    assert_eq!(input.pods.len(), 1);
}

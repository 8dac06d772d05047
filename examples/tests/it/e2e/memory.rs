//! The at-rest memory measurement of docs/performance.md: the controller with 1,000 Nodes (and
//! their NodeClaims) and 20,000 pods in its caches. Ignored by default (it
//! takes minutes); `scripts/e2e-perf.sh` starts a control plane and runs it.
//!
//! The cluster is built directly through the API, as a controller would have left it: 1,000
//! NodeClaims launched, registered and initialized (status written), their kwok Nodes (the
//! `kwok.x-k8s.io/node` annotation, the provider id `kwok://<name>`, the termination finalizer),
//! and 20 pods bound to each Node (`spec.nodeName` set, so kube-scheduler is not involved;
//! kwok runs them). The NodePool's budget is `nodes: "0"`, so the controller disrupts nothing
//! and the figure is the resting one. The controller starts once everything exists (its
//! initial lists carry the whole cluster), and its resident memory is sampled after its caches
//! synced and its first passes ran.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Pod};
use karpenter_core::crd::KubeNodeClaim;
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

use super::harness::*;

const NODES: usize = 1_000;
const PODS_PER_NODE: usize = 20;
const POOL: &str = "e2e-mem";
const INSTANCE_TYPE: &str = "m5.4xlarge";

fn node_name(i: usize) -> String {
    format!("{POOL}-{i:04}")
}

fn claim_labels(name: &str) -> serde_json::Value {
    json!({
        "karpenter.sh/nodepool": POOL,
        "karpenter.sh/capacity-type": "on-demand",
        "karpenter.sh/registered": "true",
        "karpenter.sh/initialized": "true",
        "node.kubernetes.io/instance-type": INSTANCE_TYPE,
        "karpenter.k8s.aws/instance-category": "m",
        "karpenter.k8s.aws/instance-family": "m5",
        "karpenter.k8s.aws/instance-generation": "5",
        "karpenter.k8s.aws/instance-size": "4xlarge",
        "kubernetes.io/arch": "amd64",
        "kubernetes.io/os": "linux",
        "kubernetes.io/hostname": name,
        "topology.kubernetes.io/region": "us-east-1",
        "topology.kubernetes.io/zone": "us-east-1a",
    })
}

fn resources() -> serde_json::Value {
    json!({"cpu": "16", "memory": "64Gi", "pods": "234", "ephemeral-storage": "20Gi"})
}

async fn create_node_and_claim(admin: &kube::Client, i: usize) {
    let name = node_name(i);
    let claims: Api<KubeNodeClaim> = Api::all(admin.clone());
    let claim: KubeNodeClaim = serde_json::from_value(json!({
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {
            "name": name,
            "labels": claim_labels(&name),
            "finalizers": ["karpenter.sh/termination"],
        },
        "spec": {
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
            "requirements": [
                {"key": "karpenter.sh/nodepool", "operator": "In", "values": [POOL]},
                {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": [INSTANCE_TYPE]}
            ],
            "expireAfter": "Never"
        }
    }))
    .expect("a NodeClaim");
    claims
        .create(&PostParams::default(), &claim)
        .await
        .unwrap_or_else(|e| panic!("create NodeClaim {name}: {e}"));
    let now = jiff::Timestamp::now().to_string();
    let condition = |t: &str| {
        json!({"type": t, "status": "True", "reason": t, "message": "",
               "lastTransitionTime": now, "observedGeneration": 1})
    };
    let status = json!({"status": {
        "providerID": format!("kwok://{name}"),
        "nodeName": name,
        "capacity": resources(),
        "allocatable": resources(),
        "conditions": [condition("Launched"), condition("Registered"),
                       condition("Initialized"), condition("Ready")],
    }});
    claims
        .patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap_or_else(|e| panic!("NodeClaim {name} status: {e}"));
    let nodes: Api<Node> = Api::all(admin.clone());
    let node: Node = serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": claim_labels(&name),
            "annotations": {"kwok.x-k8s.io/node": "fake"},
            "finalizers": ["karpenter.sh/termination"],
        },
        "spec": {"providerID": format!("kwok://{name}")},
        "status": {"capacity": resources(), "allocatable": resources()}
    }))
    .expect("a Node");
    nodes
        .create(&PostParams::default(), &node)
        .await
        .unwrap_or_else(|e| panic!("create Node {name}: {e}"));
}

async fn create_bound_pod(admin: &kube::Client, i: usize) {
    let node = node_name(i / PODS_PER_NODE);
    let mut p = pod(
        "mem",
        &format!("mem-{i:05}"),
        "100m",
        "256Mi",
        Default::default(),
    );
    if let Some(spec) = p.spec.as_mut() {
        spec.node_name = Some(node);
    }
    let api: Api<Pod> = Api::namespaced(admin.clone(), "default");
    let mut tries = 0;
    loop {
        match api.create(&PostParams::default(), &p).await {
            Ok(_) => return,
            Err(e) if tries < 5 => {
                tries += 1;
                eprintln!("create pod mem-{i}: {e}; retrying");
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            Err(e) => panic!("create pod mem-{i}: {e}"),
        }
    }
}

/// The binaries to measure, one after the other on the same cluster: the paths in
/// `KARPENTER_E2E_MEM_BINS` (comma-separated; to compare two builds interleaved), else the
/// harness's binary.
fn binaries() -> Vec<PathBuf> {
    match std::env::var("KARPENTER_E2E_MEM_BINS") {
        Ok(list) if !list.trim().is_empty() => list
            .split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(PathBuf::from)
            .collect(),
        _ => vec![karpenter_bin()],
    }
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

#[test]
#[ignore = "a measurement of minutes on the loopback control plane: scripts/e2e-perf.sh runs it"]
fn perf_memory_at_rest_with_1000_nodes_and_20000_pods() {
    let test = "mem";
    let env = perf_env(test);
    env.rt.block_on(async {
        let admin = ready_cluster(&env, test).await;
        apply_value(
            &admin,
            json!({
                "apiVersion": "karpenter.sh/v1",
                "kind": "NodePool",
                "metadata": {"name": POOL},
                "spec": {
                    "template": {"spec": {
                        "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                        "requirements": [
                            {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": [INSTANCE_TYPE]}
                        ],
                        "expireAfter": "Never"
                    }},
                    "disruption": {"consolidationPolicy": "WhenEmptyOrUnderutilized",
                                   "consolidateAfter": "0s", "budgets": [{"nodes": "0"}]}
                }
            }),
        )
        .await;
        let t0 = Instant::now();
        futures::stream::iter(0..NODES)
            .map(|i| create_node_and_claim(&admin, i))
            .buffer_unordered(16)
            .collect::<Vec<()>>()
            .await;
        eprintln!(
            "MEM: {NODES} NodeClaims and Nodes created in {:.1} s",
            t0.elapsed().as_secs_f64()
        );
        let t1 = Instant::now();
        futures::stream::iter(0..NODES * PODS_PER_NODE)
            .map(|i| create_bound_pod(&admin, i))
            .buffer_unordered(32)
            .collect::<Vec<()>>()
            .await;
        eprintln!(
            "MEM: {} pods created in {:.1} s",
            NODES * PODS_PER_NODE,
            t1.elapsed().as_secs_f64()
        );
        // kwok marks them Running; wait for that, so the controller starts on a cluster at rest.
        let pods: Api<Pod> = Api::namespaced(admin.clone(), "default");
        wait_for("kwok runs every pod", Duration::from_secs(900), || async {
            let lp = ListParams::default()
                .labels(&format!("{E2E_LABEL}={test}"))
                .fields("status.phase!=Running")
                .limit(1);
            let left = pods.list(&lp).await.ok()?;
            left.items.is_empty().then_some(())
        })
        .await;
        eprintln!("MEM: all pods Running after {:.1} s", t1.elapsed().as_secs_f64());
        for (run, bin) in binaries().iter().enumerate() {
            let ctl = Controller::start_bin(&env, bin, &format!("mem-{run}"), &[]);
            let started = Instant::now();
            ctl.wait_ready(Duration::from_secs(300)).await;
            let synced = started.elapsed();
            let pid = ctl.pid();
            // Let the first passes (provisioning, disruption, NodePool status, GC) run, and
            // scrape the metrics until the gauges, computed from the operator's view, hold
            // every pod (a scrape serves the last values when the operator is busy).
            tokio::time::sleep(Duration::from_secs(45)).await;
            let scraped = wait_for("every pod in pods_state", Duration::from_secs(300), || async {
                let (_, body) = ctl.get(ctl.metrics_port, "/metrics").await?;
                let n = body
                    .lines()
                    .filter(|l| l.starts_with("karpenter_pods_state{"))
                    .count();
                (n == NODES * PODS_PER_NODE).then_some(n)
            })
            .await;
            tokio::time::sleep(Duration::from_secs(15)).await;
            let mut samples = Vec::new();
            for _ in 0..6 {
                samples.push(proc_status_kib(pid, "VmRSS:"));
                tokio::time::sleep(Duration::from_secs(5)).await;
            }
            let hwm = proc_status_kib(pid, "VmHWM:");
            let rss = samples.iter().copied().max().unwrap_or(0);
            let claims = nodeclaims(&admin).await.len();
            eprintln!(
                "MEM: {} (MALLOC_ARENA_MAX={}): caches synced {:.1} s after start; at rest with \
                 {claims} NodeClaims, {NODES} Nodes, {} pods ({scraped} pods_state series): RSS \
                 {} MiB (max of 6 samples over 30 s; samples {:?} KiB), peak RSS {} MiB; load \
                 average {}",
                bin.display(),
                std::env::var("MALLOC_ARENA_MAX").unwrap_or_else(|_| "unset".to_string()),
                synced.as_secs_f64(),
                NODES * PODS_PER_NODE,
                rss / 1024,
                samples,
                hwm / 1024,
                load_average()
            );
            assert_eq!(claims, NODES, "the controller disrupted nothing");
            assert_eq!(scraped, NODES * PODS_PER_NODE, "every pod has its pods_state series");
            drop(ctl);
        }
        cleanup(&admin, test).await;
    });
}

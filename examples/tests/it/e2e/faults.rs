//! Faults on the real control plane: another writer on Karpenter's Nodes, volume attachments
//! that hold a Node's termination.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::json;
use tokio::sync::Mutex;

use super::harness::*;
use super::scenarios::all_running;

/// The second writer's finalizer and taint key.
const THEIRS: &str = "e2e.karpenter-rs/second-writer";
/// Karpenter's termination finalizer.
const TERMINATION: &str = "karpenter.sh/termination";

/// What the second writer saw.
#[derive(Default, Debug)]
struct SecondWriter {
    /// The finalizers and taint keys it added, by Node.
    added: BTreeMap<String, (Vec<String>, Vec<String>)>,
    /// Nodes that lost one of its entries while it still meant them to be there (node: what).
    lost: BTreeMap<String, String>,
    /// Nodes it let go (removed its finalizers once Karpenter's was gone).
    released: BTreeSet<String>,
    /// Its writes answered 409 (it writes with resourceVersion too).
    conflicts: usize,
    /// Its writes that were accepted.
    writes: usize,
}

fn finalizers(n: &Node) -> Vec<String> {
    n.metadata.finalizers.clone().unwrap_or_default()
}

fn taints(n: &Node) -> Vec<serde_json::Value> {
    n.spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default()
        .into_iter()
        .map(|t| serde_json::to_value(t).unwrap())
        .collect()
}

/// One pass of the second writer over the Karpenter Nodes. On each Node it adds one more
/// finalizer and one more `PreferNoSchedule` taint of its own per pass, up to `cap` of each
/// (only taints on a Node being deleted, which takes no new finalizer), so that its writes
/// keep racing the controller's: registration, initialization, the disruption taint, the
/// drain, the removal of the termination finalizer. It writes as a careful controller does
/// (a compare-and-swap on resourceVersion). It checks that every entry it added is still
/// there, and removes its finalizers from a Node being deleted once Karpenter's termination
/// finalizer is gone.
async fn second_writer_pass(
    nodes: &Api<Node>,
    admin: &kube::Client,
    seen: &Mutex<SecondWriter>,
    cap: usize,
) {
    for n in kwok_nodes(admin).await {
        let name = n.metadata.name.clone().unwrap_or_default();
        let rv = n.metadata.resource_version.clone();
        let fins = finalizers(&n);
        let ts = taints(&n);
        let deleting = n.metadata.deletion_timestamp.is_some();
        let mut guard = seen.lock().await;
        let seen = &mut *guard;
        if seen.released.contains(&name) {
            continue;
        }
        let (my_fins, my_taints) = seen.added.entry(name.clone()).or_default().clone();
        let missing_fin = my_fins.iter().find(|f| !fins.contains(f));
        let missing_taint = my_taints
            .iter()
            .find(|k| !ts.iter().any(|t| t["key"] == **k));
        let lost = missing_fin.is_some() || missing_taint.is_some();
        if lost {
            seen.lost.entry(name.clone()).or_insert_with(|| {
                format!("finalizer lost: {missing_fin:?}, taint lost: {missing_taint:?}")
            });
        }
        let (patch, what) = if deleting && !fins.iter().any(|f| f == TERMINATION) {
            if my_fins.is_empty() {
                seen.released.insert(name);
                continue;
            }
            let rest: Vec<&String> = fins.iter().filter(|f| !my_fins.contains(f)).collect();
            (
                json!({"metadata": {"resourceVersion": rv, "finalizers": rest}}),
                "release",
            )
        } else if my_taints.len() < cap && !lost {
            let entry = format!("{THEIRS}-{}", my_taints.len());
            let mut new_taints = ts.clone();
            new_taints.push(json!({"key": entry, "value": "x", "effect": "PreferNoSchedule"}));
            let mut patch = json!({
                "metadata": {"resourceVersion": rv},
                "spec": {"taints": new_taints}
            });
            if !deleting {
                let mut new_fins = fins.clone();
                new_fins.push(entry);
                patch["metadata"]["finalizers"] = json!(new_fins);
            }
            (patch, "mark")
        } else {
            continue;
        };
        match nodes
            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => {
                seen.writes += 1;
                if what == "release" {
                    seen.released.insert(name);
                } else {
                    let entry = format!("{THEIRS}-{}", my_taints.len());
                    let mine = seen.added.get_mut(&name).expect("entry");
                    if !deleting {
                        mine.0.push(entry.clone());
                    }
                    mine.1.push(entry);
                }
            }
            Err(kube::Error::Api(s)) if s.code == 409 => seen.conflicts += 1,
            Err(kube::Error::Api(s)) if s.code == 404 => {
                seen.released.insert(name);
            }
            Err(e) => panic!("second writer: {what} {name}: {e}"),
        }
    }
}

/// The fault "a second writer": while the controller launches, registers, initializes,
/// taints, drains and removes a dozen Nodes, another writer adds its own finalizer and taint to
/// each as soon as it appears. Neither is ever lost: every Node keeps both until Karpenter's
/// termination finalizer is gone, and every Node still goes in the end.
#[test]
#[ignore = "needs the loopback control plane: scripts/test starts it and runs these with --ignored"]
fn a_second_writers_finalizer_and_taint_survive_the_whole_node_lifecycle() {
    let test = "secondwriter";
    let env = env(test);
    env.rt.block_on(async {
        let admin = client(&env.admin).await;
        install(&admin).await;
        cleanup(&admin, test).await;
        apply_value(
            &admin,
            json!({
                "apiVersion": "karpenter.sh/v1",
                "kind": "NodePool",
                "metadata": {"name": "e2e-secondwriter"},
                "spec": {
                    "template": {"spec": {
                        "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                        "requirements": [
                            {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
                            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
                            {"key": "karpenter.k8s.aws/instance-category", "operator": "In", "values": ["c", "m"]}
                        ],
                        "expireAfter": "Never"
                    }},
                    "disruption": {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "0s",
                                   "budgets": [{"nodes": "100%"}]}
                }
            }),
        )
        .await;
        let stop = Arc::new(AtomicBool::new(false));
        let cap = Arc::new(AtomicUsize::new(15));
        let seen = Arc::new(Mutex::new(SecondWriter::default()));
        let writer = {
            let (admin, stop, seen, cap) = (admin.clone(), stop.clone(), seen.clone(), cap.clone());
            tokio::spawn(async move {
                let nodes: Api<Node> = Api::all(admin.clone());
                let started = Instant::now();
                // Bounded: the test's own timeouts end well before.
                while !stop.load(Ordering::Relaxed) && started.elapsed() < Duration::from_secs(900)
                {
                    second_writer_pass(&nodes, &admin, &seen, cap.load(Ordering::Relaxed)).await;
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            })
        };
        let mut ctl = Controller::start(&env, test, &[]);
        // One pod a node (hostname anti-affinity): a dozen Nodes, each registered, initialized,
        // later tainted, drained and removed by the controller.
        let n = 12;
        let mut pods: Vec<_> = (0..n)
            .map(|i| pod(test, &format!("{test}-{i}"), "1", "1Gi", BTreeMap::new()))
            .collect();
        for p in &mut pods {
            p.spec.as_mut().unwrap().affinity = Some(
                serde_json::from_value(json!({
                    "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
                        "topologyKey": "kubernetes.io/hostname",
                        "labelSelector": {"matchLabels": {"app": test}}
                    }]}
                }))
                .unwrap(),
            );
        }
        create_pods(&admin, &pods).await;
        wait_for(
            &format!("{n} pods bound and Running"),
            Duration::from_secs(180),
            || async {
                let pods = pods_of(&admin, test).await;
                let running = pods
                    .iter()
                    .filter(|p| {
                        p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
                    })
                    .count();
                (running == n).then_some(())
            },
        )
        .await;
        // Registered and initialized with the second writer's entries on.
        wait_for(
            "every node registered and initialized",
            Duration::from_secs(60),
            || async {
                let nodes = kwok_nodes(&admin).await;
                let done = nodes.iter().all(|node| {
                    let labels = node.metadata.labels.clone().unwrap_or_default();
                    labels.get("karpenter.sh/initialized").is_some_and(|v| v == "true")
                        && finalizers(node).iter().any(|f| f == TERMINATION)
                        && taints(node)
                            .iter()
                            .all(|t| t["key"] != "karpenter.sh/unregistered")
                });
                (nodes.len() >= n && done).then_some(nodes.len())
            },
        )
        .await;
        // Empty them: every Node is tainted, drained and removed by consolidation, while the
        // second writer adds more entries.
        cap.store(40, Ordering::Relaxed);
        let api: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(admin.clone(), "default");
        api.delete_collection(
            &kube::api::DeleteParams::default().grace_period(0),
            &kube::api::ListParams::default().labels(&format!("{E2E_LABEL}={test}")),
        )
        .await
        .expect("delete pods");
        wait_for("every node removed", Duration::from_secs(240), || async {
            let lost = !seen.lock().await.lost.is_empty();
            (lost || kwok_nodes(&admin).await.is_empty()).then_some(())
        })
        .await;
        stop.store(true, Ordering::Relaxed);
        writer.await.expect("second writer");
        let seen = seen.lock().await;
        let entries: usize = seen.added.values().map(|(f, t)| f.len() + t.len()).sum();
        eprintln!(
            "{test}: {} nodes, {entries} entries added by the second writer in {} writes ({} answered 409), {} nodes lost an entry, {} released",
            seen.added.len(),
            seen.writes,
            seen.conflicts,
            seen.lost.len(),
            seen.released.len(),
        );
        assert!(seen.added.len() >= n, "{seen:?}");
        assert!(seen.lost.is_empty(), "entries lost: {:?}", seen.lost);
        let nodes: BTreeSet<String> = seen.added.keys().cloned().collect();
        assert_eq!(seen.released, nodes, "every node went through termination");
        ctl.terminate();
        cleanup(&admin, test).await;
    });
}

/// Upstream's termination waits for a draining Node's VolumeAttachments to go before the
/// instance is terminated: a Node with a VolumeAttachment (made here directly, as an
/// attach-detach controller would) keeps its termination finalizer, and its NodeClaim says
/// `VolumesDetached=Unknown`, until the attachment is deleted; then the Node goes.
#[test]
#[ignore = "needs the loopback control plane: scripts/test starts it and runs these with --ignored"]
fn a_node_is_not_terminated_before_its_volumes_detach() {
    use k8s_openapi::api::storage::v1::VolumeAttachment;
    let test = "volumedetach";
    let env = env(test);
    env.rt.block_on(async {
        let admin = client(&env.admin).await;
        install(&admin).await;
        cleanup(&admin, test).await;
        let attachments: Api<VolumeAttachment> = Api::all(admin.clone());
        let _ = attachments
            .delete("e2e-volumedetach", &kube::api::DeleteParams::default())
            .await;
        apply_value(
            &admin,
            json!({
                "apiVersion": "karpenter.sh/v1",
                "kind": "NodePool",
                "metadata": {"name": "e2e-volumedetach"},
                "spec": {
                    "template": {"spec": {
                        "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                        "requirements": [
                            {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
                            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
                            {"key": "karpenter.k8s.aws/instance-category", "operator": "In", "values": ["c", "m"]}
                        ],
                        "expireAfter": "Never"
                    }},
                    "disruption": {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "0s",
                                   "budgets": [{"nodes": "100%"}]}
                }
            }),
        )
        .await;
        let mut ctl = Controller::start(&env, test, &[]);
        create_pods(&admin, &[pod(test, "volumedetach-0", "1", "1Gi", BTreeMap::new())]).await;
        let node = wait_for("the pod bound", Duration::from_secs(120), || async {
            pods_of(&admin, test)
                .await
                .first()
                .and_then(|p| p.spec.as_ref()?.node_name.clone())
        })
        .await;
        let attachment: VolumeAttachment = serde_json::from_value(json!({
            "metadata": {"name": "e2e-volumedetach"},
            "spec": {"attacher": "e2e.csi.karpenter-rs", "nodeName": node,
                     "source": {"persistentVolumeName": "e2e-volumedetach"}}
        }))
        .unwrap();
        attachments
            .create(&kube::api::PostParams::default(), &attachment)
            .await
            .expect("create the VolumeAttachment");
        // Empty the node: consolidation deletes it, and termination waits for the attachment.
        let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(admin.clone(), "default");
        pods.delete("volumedetach-0", &kube::api::DeleteParams::default().grace_period(0))
            .await
            .expect("delete the pod");
        let nodes: Api<Node> = Api::all(admin.clone());
        wait_for("the node being deleted", Duration::from_secs(120), || async {
            let n = nodes.get_opt(&node).await.ok()??;
            n.metadata.deletion_timestamp.is_some().then_some(())
        })
        .await;
        let awaiting = wait_for(
            "the NodeClaim awaiting volume detachment",
            Duration::from_secs(60),
            || async {
                nodeclaims(&admin).await.into_iter().find(|c| {
                    let c = serde_json::to_value(c).unwrap();
                    c["status"]["conditions"].as_array().into_iter().flatten().any(|cond| {
                        cond["type"] == "VolumesDetached"
                            && cond["status"] == "Unknown"
                            && cond["reason"] == "AwaitingVolumeDetachment"
                    })
                })
            },
        )
        .await;
        let held = Instant::now();
        // Several termination passes (each requeued after a second) go by: the Node stays.
        tokio::time::sleep(Duration::from_secs(15)).await;
        let n = nodes.get_opt(&node).await.expect("get node").expect("the node is still there");
        assert!(
            finalizers(&n).iter().any(|f| f == TERMINATION),
            "the termination finalizer is kept while the volume is attached"
        );
        attachments
            .delete("e2e-volumedetach", &kube::api::DeleteParams::default())
            .await
            .expect("delete the VolumeAttachment");
        let detached = Instant::now();
        wait_for("the node gone", Duration::from_secs(60), || async {
            nodes.get_opt(&node).await.ok()?.is_none().then_some(())
        })
        .await;
        eprintln!(
            "{test}: NodeClaim {} held {:?} with its volume attached; node gone {:?} after the detach",
            awaiting.metadata.name.unwrap_or_default(),
            held.elapsed() - detached.elapsed(),
            detached.elapsed()
        );
        ctl.terminate();
        cleanup(&admin, test).await;
    });
}

/// A number from the environment, or `default`.
fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The controller SIGKILLed at random points of a scale-up, again and again, with a provider
/// whose every launch is a new instance (`--fake-instance-names unique`: a launch retried after
/// a crash makes a second instance, as a real cloud's would). After the last restart every pod
/// is bound, and once garbage collection has run, every instance belongs to exactly one
/// NodeClaim and every NodeClaim has its instance: duplicates and leaks are cleaned up, never
/// kept. `KARPENTER_E2E_KILLS` (default 3) and `KARPENTER_E2E_KILL_PODS` (default 40) size it;
/// the full run is 20 kills of a 200-pod scale-up.
#[test]
#[ignore = "needs the loopback control plane: scripts/test starts it and runs these with --ignored"]
fn the_controller_killed_at_random_points_of_a_scale_up_leaks_no_instance() {
    let test = "kills";
    let kills = env_usize("KARPENTER_E2E_KILLS", 3);
    let n = env_usize("KARPENTER_E2E_KILL_PODS", 40);
    let seed = env_usize("KARPENTER_E2E_KILL_SEED", 1) as u64;
    let env = env(test);
    env.rt.block_on(async {
        let admin = client(&env.admin).await;
        install(&admin).await;
        cleanup(&admin, test).await;
        apply_value(
            &admin,
            json!({
                "apiVersion": "karpenter.sh/v1",
                "kind": "NodePool",
                "metadata": {"name": "e2e-kills"},
                "spec": {
                    "template": {"spec": {
                        "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                        "requirements": [
                            {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
                            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
                            {"key": "karpenter.k8s.aws/instance-category", "operator": "In", "values": ["c", "m"]},
                            {"key": "karpenter.k8s.aws/instance-cpu", "operator": "In", "values": ["2", "4"]}
                        ],
                        "expireAfter": "Never"
                    }},
                    "disruption": {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "Never"}
                }
            }),
        )
        .await;
        // Every instance that ever existed, seen by polling the Nodes.
        let stop = Arc::new(AtomicBool::new(false));
        let seen: Arc<Mutex<BTreeSet<String>>> = Arc::default();
        let watcher = {
            let (admin, stop, seen) = (admin.clone(), stop.clone(), seen.clone());
            tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    let names = kwok_nodes(&admin)
                        .await
                        .into_iter()
                        .filter_map(|n| n.metadata.name);
                    seen.lock().await.extend(names);
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            })
        };
        let flags = ["--fake-instance-names", "unique"];
        // A restarted pod keeps its name, so the Lease identity is the same each time.
        let mut ctl = Controller::start(&env, test, &flags);
        let pods: Vec<_> = (0..n)
            .map(|i| pod(test, &format!("{test}-{i}"), "700m", "1Gi", BTreeMap::new()))
            .collect();
        create_pods(&admin, &pods).await;
        // Kill points: 0.3 to 4 s into each run (an xorshift over the seed), which falls
        // before, during and after the launches and registrations of the first batch.
        let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        let mut waits = Vec::new();
        for _ in 0..kills {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let wait = Duration::from_millis(300 + state % 3_700);
            waits.push(wait);
            tokio::time::sleep(wait).await;
            ctl.kill();
            ctl = Controller::start(&env, test, &flags);
        }
        all_running(&admin, test, n, Duration::from_secs(300)).await;
        // Garbage collection lists the instances every 2 minutes and terminates one that no
        // NodeClaim has referred to for 30 s: within two passes of the last restart.
        let settled = wait_for(
            "every instance belongs to one NodeClaim",
            Duration::from_secs(330),
            || async {
                let claims = nodeclaims(&admin).await;
                let nodes: Vec<Node> = kwok_nodes(&admin)
                    .await
                    .into_iter()
                    .filter(|n| n.metadata.deletion_timestamp.is_none())
                    .collect();
                let claim_ids: BTreeSet<String> = claims
                    .iter()
                    .filter_map(|c| c.status.as_ref()?.provider_id.clone())
                    .collect();
                let node_ids: BTreeSet<String> = nodes
                    .iter()
                    .filter_map(|n| n.spec.as_ref()?.provider_id.clone())
                    .collect();
                (claim_ids == node_ids
                    && claim_ids.len() == claims.len()
                    && nodes.len() == node_ids.len())
                .then_some((claims.len(), nodes.len()))
            },
        )
        .await;
        // Still one to one a GC pass later (nothing was deleted that was in use, nothing
        // launched again), with every pod still bound.
        tokio::time::sleep(Duration::from_secs(5)).await;
        all_running(&admin, test, n, Duration::from_secs(30)).await;
        stop.store(true, Ordering::Relaxed);
        let _ = watcher.await;
        let launched = seen.lock().await.len();
        eprintln!(
            "{kills} kills at {waits:?}: {} NodeClaims, {launched} instances launched in all, \
             {} duplicates or orphans terminated by garbage collection",
            settled.0,
            launched.saturating_sub(settled.1)
        );
        ctl.terminate();
        cleanup(&admin, test).await;
    });
}

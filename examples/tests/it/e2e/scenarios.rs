//! The scenarios.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use karpenter_core::crd::KubeNodePool;
use kube::Api;
use serde_json::json;

use super::harness::*;

fn fixture(name: &str) -> String {
    let path = repo_root().join("examples/tests/fixtures/e2e").join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A NodePool for the scenarios: the fake provider's embedded AWS catalog, general purpose
/// types, with the given disruption settings.
fn nodepool(
    name: &str,
    labels: serde_json::Value,
    disruption: serde_json::Value,
) -> serde_json::Value {
    json!({
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": name},
        "spec": {
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                    "requirements": [
                        {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
                        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
                        {"key": "karpenter.k8s.aws/instance-category", "operator": "In", "values": ["c", "m", "r"]},
                        {"key": "karpenter.k8s.aws/instance-generation", "operator": "Gt", "values": ["4"]}
                    ],
                    "expireAfter": "Never"
                }
            },
            "limits": {"cpu": "1000"},
            "disruption": disruption
        }
    })
}

// ---------------------------------------------------------------------------------------------
// Without the operator loops: the API, the shell's operations
// ---------------------------------------------------------------------------------------------

#[test]
#[ignore = "needs the loopback control plane: scripts/test starts it and runs these with --ignored"]
fn crds_are_accepted_and_an_upstream_nodepool_applies_unchanged() {
    let env = env("crds_are_accepted_and_an_upstream_nodepool_applies_unchanged");
    env.rt.block_on(async {
        let admin = client(&env.admin).await;
        install(&admin).await;
        let text = fixture("nodepool-general-purpose.yaml");
        let applied = apply_yaml(&admin, &text).await;
        assert_eq!(applied.len(), 1);
        // As stored: the API server's defaults are there, the upstream fields survived.
        let value = serde_json::to_value(&applied[0]).expect("serialises");
        // And our own type reads it.
        let pools: Api<KubeNodePool> = Api::all(admin.clone());
        let pool = pools.get("general-purpose").await.expect("NodePool stored");
        assert_eq!(pool.spec.weight, Some(50));
        assert_eq!(value["spec"]["weight"], json!(50));
        assert_eq!(value["spec"]["limits"]["cpu"], json!("1000"));
        assert_eq!(value["spec"]["disruption"]["consolidateAfter"], json!("1m"));
        assert_eq!(
            value["spec"]["template"]["spec"]["requirements"][3]["operator"],
            json!("Gt")
        );
        // CRD defaults applied by the API server (upstream's schema): budgets and expireAfter.
        assert_eq!(
            value["spec"]["disruption"]["budgets"],
            json!([{"nodes": "10%"}])
        );
        assert_eq!(
            value["spec"]["template"]["spec"]["expireAfter"],
            json!("720h")
        );
        // The schema's validation runs in the API server: a bad operator is rejected.
        let mut bad = serde_saphyr::from_str::<serde_json::Value>(&text).unwrap();
        bad["metadata"]["name"] = json!("bad-operator");
        bad["spec"]["template"]["spec"]["requirements"][0]["operator"] = json!("Maybe");
        let dynamic: kube::api::DynamicObject = serde_json::from_value(bad.clone()).unwrap();
        let ar = kube::api::ApiResource::from_gvk_with_plural(
            &kube::api::GroupVersionKind::gvk("karpenter.sh", "v1", "NodePool"),
            "nodepools",
        );
        let api: Api<kube::api::DynamicObject> = Api::all_with(admin.clone(), &ar);
        let err = api
            .create(&kube::api::PostParams::default(), &dynamic)
            .await
            .expect_err("an unknown operator is rejected");
        assert!(err.to_string().contains("Maybe"), "{err}");
        // An upstream EC2NodeClass applies unchanged too.
        let classes = apply_yaml(&admin, &fixture("ec2nodeclass-default.yaml")).await;
        assert_eq!(classes.len(), 1);
        let class = serde_json::to_value(&classes[0]).expect("serialises");
        assert_eq!(
            class["spec"]["metadataOptions"]["httpTokens"],
            json!("required"),
            "CRD default"
        );
        let ar = kube::api::ApiResource::from_gvk_with_plural(
            &kube::api::GroupVersionKind::gvk("karpenter.k8s.aws", "v1", "EC2NodeClass"),
            "ec2nodeclasses",
        );
        let api: Api<kube::api::DynamicObject> = Api::all_with(admin.clone(), &ar);
        for c in classes {
            let _ = api
                .delete(
                    c.metadata.name.as_deref().unwrap_or_default(),
                    &Default::default(),
                )
                .await;
        }
        cleanup(&admin, "crds").await;
    });
}

#[test]
#[ignore = "needs the loopback control plane: scripts/test starts it and runs these with --ignored"]
fn two_replicas_elect_one_leader_and_serve_probes_and_metrics() {
    let env = env("two_replicas_elect_one_leader_and_serve_probes_and_metrics");
    env.rt.block_on(async {
        let admin = client(&env.admin).await;
        install(&admin).await;
        cleanup(&admin, "leader").await;
        let lease_args = [
            "--lease-duration",
            "6s",
            "--lease-renew-deadline",
            "4s",
            "--lease-renew-period",
            "1s",
        ];
        let mut a = Controller::start(&env, "replica-a", &lease_args);
        let mut b = Controller::start(&env, "replica-b", &lease_args);
        let leases: Api<Lease> = Api::namespaced(admin.clone(), "karpenter");
        let holder = wait_for("a leader", Duration::from_secs(60), || async {
            let l = leases.get_opt("karpenter-leader-election").await.ok()??;
            l.spec?.holder_identity.filter(|h| !h.is_empty())
        })
        .await;
        assert!(holder == "replica-a" || holder == "replica-b", "{holder}");
        // Both replicas become ready (their caches sync) and serve metrics; exactly one leads.
        for c in [&a, &b] {
            let (status, _) = wait_for("readyz", Duration::from_secs(60), || async {
                c.get(c.probe_port, "/readyz")
                    .await
                    .filter(|(s, _)| *s == 200)
            })
            .await;
            assert_eq!(status, 200);
            let (status, body) = c.get(c.probe_port, "/healthz").await.expect("healthz");
            assert_eq!((status, body.as_str()), (200, "ok"));
            let (status, metrics) = c.get(c.metrics_port, "/metrics").await.expect("metrics");
            assert_eq!(status, 200);
            assert!(
                metrics.contains("karpenter_cluster_state_synced 1"),
                "{metrics}"
            );
            assert!(
                metrics.contains("karpenter_cluster_state_node_count "),
                "{metrics}"
            );
        }
        tokio::time::sleep(Duration::from_secs(3)).await;
        let leading = |c: &Controller| c.log_text().contains("became the leader");
        assert!(
            leading(&a) ^ leading(&b),
            "exactly one replica leads\nA:\n{}\nB:\n{}",
            a.log_text(),
            b.log_text()
        );
        // The leader stops gracefully: it releases the Lease and the other takes over.
        let (leader, follower) = if leading(&a) {
            (&mut a, &mut b)
        } else {
            (&mut b, &mut a)
        };
        let started = Instant::now();
        assert_eq!(leader.terminate(), Some(0), "graceful shutdown exits 0");
        let next = wait_for(
            "the follower to take over",
            Duration::from_secs(30),
            || async {
                let l = leases.get_opt("karpenter-leader-election").await.ok()??;
                l.spec?.holder_identity.filter(|h| *h == follower.identity)
            },
        )
        .await;
        assert_eq!(next, follower.identity);
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "a released Lease is taken over at once, not after the lease duration ({:?})",
            started.elapsed()
        );
        assert!(follower.running());
        follower.terminate();
        cleanup(&admin, "leader").await;
    });
}

/// `--cloud-provider aws` without its settings (built with the `aws` feature) or in a build
/// without that feature exits 2 with an error that says what is missing.
#[test]
#[ignore = "needs the loopback control plane: scripts/test starts it and runs these with --ignored"]
fn the_aws_provider_refuses_to_start_with_a_clear_error() {
    let env = env("the_aws_provider_refuses_to_start_with_a_clear_error");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_karpenter"))
        .args(["controller", "--cloud-provider", "aws", "--kubeconfig"])
        .arg(&env.controller)
        .env_remove("CLUSTER_NAME")
        .env_remove("CLUSTER_ENDPOINT")
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let expected = if cfg!(feature = "aws") {
        "CLUSTER_NAME (--cluster-name) is required with --cloud-provider aws"
    } else {
        "--features aws"
    };
    assert!(stderr.contains(expected), "{stderr}");
}

/// A Lease that can never be taken (its namespace does not exist) stops the controller at
/// start with an error that names the setting, as upstream's does, instead of retrying forever.
#[test]
#[ignore = "needs the loopback control plane: scripts/test starts it and runs these with --ignored"]
fn a_missing_lease_namespace_is_a_clear_error_at_start() {
    let env = env("a_missing_lease_namespace_is_a_clear_error_at_start");
    let started = Instant::now();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_karpenter"))
        .args(["controller", "--cloud-provider", "fake", "--kubeconfig"])
        .arg(&env.controller)
        .args(["--bind-address", "127.0.0.1"])
        .args(["--metrics-port", &free_port().to_string()])
        .args(["--health-probe-port", &free_port().to_string()])
        .args(["--leader-election-namespace", "no-such-namespace"])
        .env_remove("KUBECONFIG")
        .output()
        .expect("runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("no-such-namespace") && stderr.contains("LEADER_ELECTION_NAMESPACE"),
        "{stderr}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "refused at start, not after retries: {:?}",
        started.elapsed()
    );
}

// ---------------------------------------------------------------------------------------------
// With the operator loops
// ---------------------------------------------------------------------------------------------

/// Waits until every pod of `test` is bound (by kube-scheduler) and Running (by kwok).
pub(super) async fn all_running(client: &kube::Client, test: &str, n: usize, timeout: Duration) {
    wait_for(
        &format!("{n} pods of {test} bound and Running"),
        timeout,
        || async {
            let pods = pods_of(client, test).await;
            let running = pods
                .iter()
                .filter(|p| {
                    p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some()
                        && p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
                })
                .count();
            (pods.len() == n && running == n).then_some(())
        },
    )
    .await;
}

/// Nodes of NodeClaims, NodeClaims of nodes: one to one (no leaked instance, no claim
/// without its instance).
async fn claims_match_nodes(client: &kube::Client) -> (usize, usize) {
    let claims = nodeclaims(client).await;
    let nodes = kwok_nodes(client).await;
    let claim_ids: BTreeSet<String> = claims
        .iter()
        .filter_map(|c| c.status.as_ref()?.provider_id.clone())
        .collect();
    let node_ids: BTreeSet<String> = nodes
        .iter()
        .filter_map(|n| n.spec.as_ref()?.provider_id.clone())
        .collect();
    assert_eq!(
        claim_ids, node_ids,
        "every instance has one NodeClaim and back"
    );
    assert_eq!(
        claim_ids.len(),
        claims.len(),
        "no NodeClaim without an instance"
    );
    (claims.len(), nodes.len())
}

#[test]
#[ignore = "needs the loopback control plane: scripts/test starts it and runs these with --ignored"]
fn pending_pods_get_nodeclaims_nodes_and_are_bound_by_kube_scheduler() {
    let test = "scaleup";
    let env = env(test);
    env.rt.block_on(async {
        let admin = client(&env.admin).await;
        install(&admin).await;
        cleanup(&admin, test).await;
        apply_value(
            &admin,
            nodepool(
                "e2e-scaleup",
                json!({"e2e": "scaleup"}),
                json!({"consolidationPolicy": "WhenEmpty", "consolidateAfter": "Never"}),
            ),
        )
        .await;
        let mut ctl = Controller::start(&env, "scaleup", &[]);
        let pods: Vec<_> = (0..12)
            .map(|i| pod(test, &format!("scaleup-{i}"), "1", "1Gi", BTreeMap::new()))
            .collect();
        let started = Instant::now();
        create_pods(&admin, &pods).await;
        all_running(&admin, test, 12, Duration::from_secs(120)).await;
        eprintln!(
            "scaleup: 12 pods bound and Running after {:?}",
            started.elapsed()
        );
        let (claims, nodes) = claims_match_nodes(&admin).await;
        assert!(claims >= 1 && nodes >= 1);
        for n in kwok_nodes(&admin).await {
            let labels = n.metadata.labels.clone().unwrap_or_default();
            assert_eq!(
                labels.get("karpenter.sh/nodepool").map(String::as_str),
                Some("e2e-scaleup")
            );
            assert_eq!(labels.get("e2e").map(String::as_str), Some("scaleup"));
            assert_eq!(
                labels.get("karpenter.sh/registered").map(String::as_str),
                Some("true")
            );
            let taints = n.spec.clone().and_then(|s| s.taints).unwrap_or_default();
            assert!(
                taints.iter().all(|t| t.key != "karpenter.sh/unregistered"),
                "registration removed the unregistered taint"
            );
        }
        // The controller learns of the bindings from its watch, a moment after kube-scheduler
        // made them: the pods were seen pending, then bound, so their bound durations are
        // observed once its view has caught up.
        let seen = Instant::now();
        let metrics = wait_for(
            "karpenter_pods_bound_duration_seconds_count >= 1",
            Duration::from_secs(60),
            || async {
                let (_, metrics) = ctl.get(ctl.metrics_port, "/metrics").await?;
                let bound: f64 = metrics
                    .lines()
                    .find(|l| l.starts_with("karpenter_pods_bound_duration_seconds_count"))
                    .and_then(|l| l.rsplit(' ').next()?.parse().ok())
                    .unwrap_or_default();
                (bound >= 1.0).then_some(metrics)
            },
        )
        .await;
        eprintln!(
            "scaleup: bound durations observed {:?} after Running",
            seen.elapsed()
        );
        assert!(
            metrics.contains("karpenter_nodeclaims_created_total{"),
            "{metrics}"
        );
        assert!(
            metrics.contains("karpenter_nodes_total_pod_requests{"),
            "{metrics}"
        );
        assert!(metrics.contains("karpenter_pods_state{"), "{metrics}");
        // The families added for dashboards and alerts built on upstream's.
        for family in [
            "karpenter_nodes_total_pod_limits{",
            "karpenter_nodepools_allowed_disruptions{nodepool=\"e2e-scaleup\"",
            "controller_runtime_reconcile_total{controller=\"nodeclaim.lifecycle\"",
            "controller_runtime_reconcile_time_seconds_count{controller=\"nodeclaim.lifecycle\"}",
            "workqueue_depth{controller=\"nodeclaim.lifecycle\"",
            "# TYPE karpenter_pods_startup_duration_seconds summary",
        ] {
            assert!(metrics.contains(family), "{family}: {metrics}");
        }
        // Every metric of docs/controller.md's table of the guide's names has samples, but
        // for the counters of scale-downs and failures, which this test does not cause (the
        // unit scrape of karpenter-controller's metrics covers them).
        for name in karpenter_controller::metrics::guide::exported_names() {
            if [
                "karpenter_nodeclaims_terminated_total",
                "karpenter_voluntary_disruption_decisions_total",
                "karpenter_cloudprovider_errors_total",
            ]
            .contains(&name)
            {
                continue;
            }
            assert!(
                metrics.lines().any(|l| l.starts_with(&format!("{name}{{"))
                    || l.starts_with(&format!("{name}_bucket{{"))),
                "{name} is not served: {metrics}"
            );
        }
        // The guide's provisioning log filter with upstream's current key (its
        // `.logger == "controller.provisioner"` is pre-v0.37: docs/controller.md).
        let log: String = ctl
            .log_text()
            .lines()
            .filter(|l| l.starts_with('{'))
            .map(|l| format!("{l}\n"))
            .collect();
        let created = crate::logs::jq(
            r#"select(.controller == "provisioner") | select(.message == "created nodeclaim")"#,
            &log,
        );
        assert!(!created.is_empty(), "{log}");
        for line in &created {
            assert_eq!(line["logger"], "controller", "{line}");
            assert_eq!(line["NodePool"]["name"], "e2e-scaleup", "{line}");
            assert!(line["NodeClaim"]["name"].is_string(), "{line}");
        }
        ctl.terminate();
        cleanup(&admin, test).await;
    });
}

/// karpenter-controller's `custom_controller` example, a CloudProvider written outside the
/// project's providers, runs as a full controller: its NodePool's pods get NodeClaims and kwok
/// Nodes of its own instance types, and are bound.
#[test]
#[ignore = "needs the loopback control plane: scripts/test starts it and runs these with --ignored"]
fn a_custom_provider_runs_as_a_full_controller() {
    let test = "custom";
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
                "metadata": {"name": "e2e-custom"},
                "spec": {
                    "template": {
                        "metadata": {"labels": {"e2e": "custom"}},
                        "spec": {
                            "nodeClassRef": {"group": "tiny.example.com", "kind": "TinyClass", "name": "default"},
                            "requirements": [
                                {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}
                            ],
                            "expireAfter": "Never"
                        }
                    },
                    "disruption": {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "Never"}
                }
            }),
        )
        .await;
        let mut ctl =
            Controller::start_command(&env, &custom_controller_example(), &[], "custom", &[]);
        let pods: Vec<_> = (0..3)
            .map(|i| pod(test, &format!("custom-{i}"), "1500m", "1Gi", BTreeMap::new()))
            .collect();
        create_pods(&admin, &pods).await;
        all_running(&admin, test, 3, Duration::from_secs(120)).await;
        let (claims, nodes) = claims_match_nodes(&admin).await;
        assert!(claims >= 1 && nodes >= 1, "{claims} claims, {nodes} nodes");
        for n in kwok_nodes(&admin).await {
            let labels = n.metadata.labels.clone().unwrap_or_default();
            let instance_type = labels
                .get("node.kubernetes.io/instance-type")
                .cloned()
                .unwrap_or_default();
            assert!(instance_type.starts_with("tiny-"), "{instance_type}");
            assert_eq!(labels.get("e2e").map(String::as_str), Some("custom"));
            assert_eq!(
                labels.get("karpenter.sh/capacity-type").map(String::as_str),
                Some("on-demand")
            );
        }
        assert_eq!(ctl.terminate(), Some(0), "{}", ctl.log_text());
        cleanup(&admin, test).await;
    });
}

/// `--cloud-provider kwok` is upstream's kwok provider: a NodePool referencing a
/// `KWOKNodeClass` gets NodeClaims and Nodes of upstream's shape (kwok catalog types, `kwok://`
/// provider ids, the contract's names and labels), the pods are bound, a NodeClaim whose class
/// does not exist fails with insufficient capacity, and once the pods are gone consolidation
/// removes every Node and NodeClaim.
#[test]
#[ignore = "needs the loopback control plane: scripts/test starts it and runs these with --ignored"]
fn the_kwok_mode_launches_upstreams_kwok_nodes_and_consolidates_them() {
    let test = "kwokmode";
    let env = env(test);
    env.rt.block_on(async {
        let admin = ready_cluster(&env, test).await;
        apply_value(
            &admin,
            json!({
                "apiVersion": "karpenter.kwok.sh/v1alpha1",
                "kind": "KWOKNodeClass",
                "metadata": {"name": "e2e-kwok"},
                "spec": {"nodeRegistrationDelay": "2s"}
            }),
        )
        .await;
        apply_value(
            &admin,
            json!({
                "apiVersion": "karpenter.sh/v1",
                "kind": "NodePool",
                "metadata": {"name": "e2e-kwok"},
                "spec": {
                    "template": {
                        "metadata": {"labels": {"e2e": test}},
                        "spec": {
                            "nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "e2e-kwok"},
                            "requirements": [
                                {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]},
                                {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
                                {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
                                {"key": "karpenter.kwok.sh/instance-size", "operator": "Lt", "values": ["32"]}
                            ],
                            "expireAfter": "Never"
                        }
                    },
                    "disruption": {
                        "consolidationPolicy": "WhenEmpty", "consolidateAfter": "5s",
                        "budgets": [{"nodes": "100%"}]
                    }
                }
            }),
        )
        .await;
        let mut ctl = Controller::start_kwok(&env, test, &[]);
        // One pod per node: three nodes, each the cheapest kwok type that holds 1 CPU.
        let mut pods = Vec::new();
        for i in 0..3 {
            let mut p = pod(test, &format!("kwokmode-{i}"), "1", "1Gi", BTreeMap::new());
            p.spec.as_mut().unwrap().affinity = Some(
                serde_json::from_value(json!({
                    "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
                        "topologyKey": "kubernetes.io/hostname",
                        "labelSelector": {"matchLabels": {"app": test}}
                    }]}
                }))
                .unwrap(),
            );
            pods.push(p);
        }
        let started = Instant::now();
        create_pods(&admin, &pods).await;
        all_running(&admin, test, 3, Duration::from_secs(120)).await;
        eprintln!(
            "kwokmode: 3 pods bound and Running on kwok-mode nodes after {:?}",
            started.elapsed()
        );
        assert_eq!(claims_match_nodes(&admin).await, (3, 3));
        let claims = nodeclaims(&admin).await;
        let nodes = kwok_nodes(&admin).await;
        for claim in &claims {
            let claim_name = claim.metadata.name.clone().unwrap_or_default();
            let status = claim.status.clone().unwrap_or_default();
            let node_name = status.node_name.clone().unwrap_or_default();
            let node = nodes
                .iter()
                .find(|n| n.metadata.name.as_deref() == Some(node_name.as_str()))
                .unwrap_or_else(|| panic!("claim {claim_name}: no node {node_name:?}"));
            // The contract's names: kwok-<claim>-<random words>-<n>-<10 characters>-<number>.
            assert!(
                node_name.starts_with(&format!("kwok-{claim_name}-")),
                "{node_name} is not named after {claim_name}"
            );
            let provider_id = format!("kwok://{node_name}");
            assert_eq!(status.provider_id.as_deref(), Some(provider_id.as_str()));
            assert_eq!(
                node.spec.as_ref().and_then(|s| s.provider_id.as_deref()),
                Some(provider_id.as_str())
            );
            let labels = node.metadata.labels.clone().unwrap_or_default();
            let label = |k: &str| labels.get(k).map(String::as_str);
            for (key, value) in [
                ("node.kubernetes.io/instance-type", "c-2x-amd64-linux"),
                ("karpenter.kwok.sh/instance-family", "c"),
                ("karpenter.kwok.sh/instance-cpu", "2"),
                ("karpenter.kwok.sh/instance-size", "2"),
                ("karpenter.kwok.sh/instance-memory", "4Gi"),
                ("karpenter.sh/capacity-type", "on-demand"),
                ("kubernetes.io/arch", "amd64"),
                ("kubernetes.io/os", "linux"),
                ("eks-node-viewer/instance-price", "0.054295"),
                ("kwok-partition", "a"),
                ("kwok.x-k8s.io/node", "fake"),
                ("kubernetes.io/hostname", claim_name.as_str()),
                ("karpenter.sh/nodepool", "e2e-kwok"),
                ("karpenter.sh/registered", "true"),
                ("e2e", test),
            ] {
                assert_eq!(label(key), Some(value), "node {node_name}: label {key}");
            }
            assert!(
                label("topology.kubernetes.io/zone").is_some_and(|z| z.starts_with("test-zone-")),
                "{labels:?}"
            );
            let annotations = node.metadata.annotations.clone().unwrap_or_default();
            assert_eq!(
                annotations.get("kwok.x-k8s.io/node").map(String::as_str),
                Some("fake")
            );
            let taints = node.spec.clone().and_then(|s| s.taints).unwrap_or_default();
            assert!(
                taints.iter().all(|t| t.key != "karpenter.sh/unregistered"),
                "registration removed the unregistered taint"
            );
        }

        // A NodeClaim whose KWOKNodeClass does not exist: insufficient capacity, so the claim
        // is deleted with an InsufficientCapacityError event, and no Node is made for it.
        let missing = format!(
            "e2e-kwok-missing-{}",
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs() % 1_000_000)
                .unwrap_or_default()
        );
        apply_value(
            &admin,
            json!({
                "apiVersion": "karpenter.sh/v1",
                "kind": "NodeClaim",
                "metadata": {"name": missing, "labels": {"karpenter.sh/nodepool": "e2e-kwok"}},
                "spec": {
                    "nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "e2e-kwok-missing"},
                    "requirements": [
                        {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["c-1x-amd64-linux"]}
                    ]
                }
            }),
        )
        .await;
        let events: Api<k8s_openapi::api::core::v1::Event> =
            Api::namespaced(admin.clone(), "default");
        let message = wait_for(
            "the NodeClaim of a missing class deleted with an InsufficientCapacityError event",
            Duration::from_secs(60),
            || async {
                let gone = !nodeclaims(&admin)
                    .await
                    .iter()
                    .any(|c| c.metadata.name.as_deref() == Some(missing.as_str()));
                let lp = kube::api::ListParams::default()
                    .fields(&format!("involvedObject.name={missing}"));
                let event = events.list(&lp).await.ok()?.items.into_iter().find(|e| {
                    e.reason.as_deref() == Some("InsufficientCapacityError")
                })?;
                gone.then(|| event.message.unwrap_or_default())
            },
        )
        .await;
        assert!(
            message.contains("kwoknodeclasses.karpenter.kwok.sh \"e2e-kwok-missing\" not found"),
            "{message}"
        );
        assert!(
            !kwok_nodes(&admin).await.iter().any(|n| {
                n.metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get("kubernetes.io/hostname"))
                    == Some(&missing)
            }),
            "no node was made for the claim of a missing class"
        );
        assert_eq!(claims_match_nodes(&admin).await, (3, 3));

        // Without pods the nodes are empty: consolidation deletes them, the termination
        // deletes the Nodes and (upstream's delete answering not found) the NodeClaims.
        let api: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(admin.clone(), "default");
        for i in 0..3 {
            api.delete(
                &format!("kwokmode-{i}"),
                &kube::api::DeleteParams::default().grace_period(0),
            )
            .await
            .expect("delete pod");
        }
        let started = Instant::now();
        wait_for(
            "every kwok Node and NodeClaim gone",
            Duration::from_secs(180),
            || async {
                (kwok_nodes(&admin).await.is_empty() && nodeclaims(&admin).await.is_empty())
                    .then_some(())
            },
        )
        .await;
        eprintln!(
            "kwokmode: 3 empty nodes consolidated away (Nodes and NodeClaims gone) in {:?}",
            started.elapsed()
        );
        let log = ctl.log_text();
        assert!(
            !log.contains("failed creating node from nodeclaim"),
            "a Node creation failed: {log}"
        );
        assert!(
            log.contains("\"provider\":\"kwok\"") || log.contains("kwok cloud provider"),
            "{log}"
        );
        assert_eq!(ctl.terminate(), Some(0), "{}", ctl.log_text());
        cleanup(&admin, test).await;
    });
}

#[test]
#[ignore = "needs the loopback control plane: scripts/test starts it and runs these with --ignored"]
fn scale_down_consolidates_within_the_budget() {
    let test = "scaledown";
    let env = env(test);
    env.rt.block_on(async {
        let admin = client(&env.admin).await;
        install(&admin).await;
        cleanup(&admin, test).await;
        // Spread: one pod per node, so scaling down empties nodes.
        apply_value(
            &admin,
            nodepool(
                "e2e-scaledown",
                json!({}),
                json!({
                    "consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "0s",
                    "budgets": [{"nodes": "1"}]
                }),
            ),
        )
        .await;
        let mut ctl = Controller::start(&env, "scaledown", &[]);
        let mut pods = Vec::new();
        for i in 0..4 {
            let mut p = pod(
                test,
                &format!("scaledown-{i}"),
                "500m",
                "512Mi",
                BTreeMap::new(),
            );
            p.spec.as_mut().unwrap().affinity = Some(
                serde_json::from_value(json!({
                    "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
                        "topologyKey": "kubernetes.io/hostname",
                        "labelSelector": {"matchLabels": {"app": test}}
                    }]}
                }))
                .unwrap(),
            );
            pods.push(p);
        }
        create_pods(&admin, &pods).await;
        all_running(&admin, test, 4, Duration::from_secs(120)).await;
        assert_eq!(claims_match_nodes(&admin).await.0, 4);
        // Scale down to one pod.
        let api: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(admin.clone(), "default");
        for i in 1..4 {
            api.delete(
                &format!("scaledown-{i}"),
                &kube::api::DeleteParams::default().grace_period(0),
            )
            .await
            .expect("delete pod");
        }
        // Watch the NodeClaims being deleted: never more than the budget (1) at once.
        let mut max_deleting = 0;
        let start = Instant::now();
        loop {
            let claims = nodeclaims(&admin).await;
            let deleting = claims
                .iter()
                .filter(|c| c.metadata.deletion_timestamp.is_some())
                .count();
            max_deleting = max_deleting.max(deleting);
            if claims.len() == 1 && deleting == 0 {
                break;
            }
            assert!(
                start.elapsed() < Duration::from_secs(300),
                "consolidation did not finish: {} claims",
                claims.len()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        assert!(
            max_deleting <= 1,
            "budget of 1 node exceeded: {max_deleting} deleting at once"
        );
        eprintln!("scaledown: 4 -> 1 nodes in {:?}", start.elapsed());
        all_running(&admin, test, 1, Duration::from_secs(30)).await;
        claims_match_nodes(&admin).await;
        ctl.terminate();
        cleanup(&admin, test).await;
    });
}

#[test]
#[ignore = "needs the loopback control plane: scripts/test starts it and runs these with --ignored"]
fn a_changed_nodepool_drifts_its_nodes_and_they_are_replaced() {
    let test = "drift";
    let env = env(test);
    env.rt.block_on(async {
        let admin = client(&env.admin).await;
        install(&admin).await;
        cleanup(&admin, test).await;
        let disruption = json!({"consolidationPolicy": "WhenEmpty", "consolidateAfter": "Never", "budgets": [{"nodes": "100%"}]});
        apply_value(&admin, nodepool("e2e-drift", json!({"generation": "one"}), disruption.clone())).await;
        let mut ctl = Controller::start(&env, "drift", &[]);
        let pods: Vec<_> = (0..2).map(|i| pod(test, &format!("drift-{i}"), "1", "1Gi", BTreeMap::new())).collect();
        create_pods(&admin, &pods).await;
        all_running(&admin, test, 2, Duration::from_secs(120)).await;
        let before: BTreeSet<String> = nodeclaims(&admin).await.iter().filter_map(|c| c.metadata.name.clone()).collect();
        assert!(!before.is_empty());
        // Change the template: the NodePool hash changes and every NodeClaim drifts.
        apply_value(&admin, nodepool("e2e-drift", json!({"generation": "two"}), disruption)).await;
        wait_for("drifted NodeClaims replaced", Duration::from_secs(240), || async {
            let claims = nodeclaims(&admin).await;
            let old_left = claims.iter().any(|c| before.contains(c.metadata.name.as_deref().unwrap_or_default()));
            let new_ready = claims.iter().any(|c| {
                c.metadata.labels.as_ref().and_then(|l| l.get("generation")).is_some_and(|g| g == "two")
            });
            (!old_left && new_ready).then_some(())
        }).await;
        for n in kwok_nodes(&admin).await {
            let g = n.metadata.labels.clone().unwrap_or_default().get("generation").cloned();
            assert_eq!(g.as_deref(), Some("two"), "only replacement nodes remain");
        }
        claims_match_nodes(&admin).await;
        ctl.terminate();
        cleanup(&admin, test).await;
    });
}

#[test]
#[ignore = "needs the loopback control plane: scripts/test starts it and runs these with --ignored"]
fn a_do_not_disrupt_pod_holds_its_node() {
    let test = "dnd";
    let env = env(test);
    env.rt.block_on(async {
        let admin = client(&env.admin).await;
        install(&admin).await;
        cleanup(&admin, test).await;
        apply_value(
            &admin,
            nodepool(
                "e2e-dnd",
                json!({}),
                json!({
                    "consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "0s",
                    "budgets": [{"nodes": "100%"}]
                }),
            ),
        )
        .await;
        let mut ctl = Controller::start(&env, "dnd", &[]);
        let held = pod(
            test,
            "dnd-held",
            "3",
            "4Gi",
            BTreeMap::from([(
                "karpenter.sh/do-not-disrupt".to_string(),
                "true".to_string(),
            )]),
        );
        let free = pod(test, "dnd-free", "3", "4Gi", BTreeMap::new());
        let mut pods = vec![held, free];
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
        all_running(&admin, test, 2, Duration::from_secs(120)).await;
        let pods_now = pods_of(&admin, test).await;
        let node_of = |name: &str| {
            pods_now
                .iter()
                .find(|p| p.metadata.name.as_deref() == Some(name))
                .and_then(|p| p.spec.as_ref()?.node_name.clone())
                .expect("bound")
        };
        let held_node = node_of("dnd-held");
        // Shrink the held pod's neighbourhood: delete the other pod; its node empties and goes.
        let api: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(admin.clone(), "default");
        api.delete(
            "dnd-free",
            &kube::api::DeleteParams::default().grace_period(0),
        )
        .await
        .expect("delete");
        wait_for(
            "the empty node removed",
            Duration::from_secs(180),
            || async { (kwok_nodes(&admin).await.len() == 1).then_some(()) },
        )
        .await;
        // The held node (underutilised: 3 CPU on a larger type may be replaceable) stays for
        // several disruption passes.
        tokio::time::sleep(Duration::from_secs(45)).await;
        let nodes = kwok_nodes(&admin).await;
        assert_eq!(nodes.len(), 1);
        assert_eq!(nodes[0].metadata.name.as_deref(), Some(held_node.as_str()));
        assert!(nodes[0].metadata.deletion_timestamp.is_none());
        let taints = nodes[0]
            .spec
            .clone()
            .and_then(|s| s.taints)
            .unwrap_or_default();
        assert!(
            taints.iter().all(|t| t.key != "karpenter.sh/disrupted"),
            "the held node was never tainted for disruption"
        );
        ctl.terminate();
        cleanup(&admin, test).await;
    });
}

/// A controller killed once mid-launch and restarted under another identity (after the
/// Lease expires) finishes the scale-up. The fake provider names instances after their
/// NodeClaims here, so a retried launch finds its instance; with a provider whose every launch
/// is a new instance, duplicates and leaks are the subject of
/// `faults::the_controller_killed_at_random_points_of_a_scale_up_leaks_no_instance`.
#[test]
#[ignore = "needs the loopback control plane: scripts/test starts it and runs these with --ignored"]
fn a_controller_killed_mid_launch_restarts_without_duplicates_or_leaks() {
    let test = "crash";
    let env = env(test);
    env.rt.block_on(async {
        let admin = client(&env.admin).await;
        install(&admin).await;
        cleanup(&admin, test).await;
        apply_value(
            &admin,
            nodepool(
                "e2e-crash",
                json!({}),
                json!({"consolidationPolicy": "WhenEmpty", "consolidateAfter": "Never"}),
            ),
        )
        .await;
        let mut first = Controller::start(&env, "crash-1", &[]);
        let pods: Vec<_> = (0..6)
            .map(|i| pod(test, &format!("crash-{i}"), "1500m", "2Gi", BTreeMap::new()))
            .collect();
        create_pods(&admin, &pods).await;
        // Kill it as soon as the first NodeClaim exists: mid-launch.
        wait_for("a NodeClaim", Duration::from_secs(60), || async {
            (!nodeclaims(&admin).await.is_empty()).then_some(())
        })
        .await;
        first.kill();
        let claims_at_crash = nodeclaims(&admin).await.len();
        let mut second = Controller::start(&env, "crash-2", &[]);
        all_running(&admin, test, 6, Duration::from_secs(180)).await;
        // Give the restarted controller time to (wrongly) launch more.
        tokio::time::sleep(Duration::from_secs(15)).await;
        let (claims, nodes) = claims_match_nodes(&admin).await;
        assert!(claims >= claims_at_crash);
        // No duplicate: every node carries at least one of the pods.
        let bound: BTreeSet<String> = pods_of(&admin, test)
            .await
            .iter()
            .filter_map(|p| p.spec.as_ref()?.node_name.clone())
            .collect();
        assert_eq!(
            bound.len(),
            nodes,
            "every node runs pods: no duplicate NodeClaim launched an idle node"
        );
        second.terminate();
        cleanup(&admin, test).await;
    });
}

#[test]
#[ignore = "needs the loopback control plane: scripts/test starts it and runs these with --ignored"]
fn plan_from_cluster_reads_the_live_cluster() {
    let test = "plan";
    let env = env(test);
    env.rt.block_on(async {
        let admin = client(&env.admin).await;
        install(&admin).await;
        cleanup(&admin, test).await;
        apply_yaml(&admin, &fixture("nodepool-general-purpose.yaml")).await;
        let pods: Vec<_> = (0..4)
            .map(|i| pod(test, &format!("plan-{i}"), "1", "2Gi", BTreeMap::new()))
            .collect();
        create_pods(&admin, &pods).await;
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_karpenter"))
            .args(["plan", "--kubeconfig"])
            .arg(&env.admin)
            .args(["-o", "json"])
            .output()
            .expect("runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{stderr}");
        let plan: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON plan");
        let text = plan.to_string();
        assert!(
            text.contains("general-purpose"),
            "the live NodePool is planned with: {text}"
        );
        for i in 0..4 {
            assert!(
                text.contains(&format!("plan-{i}")),
                "pod plan-{i} is in the plan: {text}"
            );
        }
        cleanup(&admin, test).await;
    });
}

/// The measurement of docs/performance.md: 1,000 pending pods to all bound on kwok nodes, the
/// controller's CPU and peak memory meanwhile, and its API requests per node. Ignored by
/// default (it takes minutes): scripts/e2e-perf.sh runs it.
#[test]
#[ignore = "a measurement of minutes on the loopback control plane: scripts/e2e-perf.sh runs it"]
fn perf_a_thousand_pending_pods_to_all_bound() {
    let test = "perf";
    let env = perf_env(test);
    env.rt.block_on(async {
        let admin = ready_cluster(&env, test).await;
        apply_value(&admin, nodepool("e2e-perf", json!({}), json!({"consolidationPolicy": "WhenEmpty", "consolidateAfter": "Never"}))).await;
        let ctl = Controller::start(&env, "perf", &[]);
        ctl.wait_ready(Duration::from_secs(60)).await;
        let pid = ctl.pid();
        let cpu0 = cpu_seconds(pid);
        let requests0 = ctl.log_text().matches("\"message\":\"requesting\"").count();
        let sizes = ["250m", "500m", "1", "2"];
        let pods: Vec<_> = (0..1000)
            .map(|i| pod(test, &format!("perf-{i}"), sizes[i % 4], "512Mi", BTreeMap::new()))
            .collect();
        let started = Instant::now();
        create_pods(&admin, &pods).await;
        let created = started.elapsed();
        wait_for("1000 pods bound", Duration::from_secs(900), || async {
            let bound = pods_of(&admin, test)
                .await
                .iter()
                .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some())
                .count();
            (bound == 1000).then_some(())
        })
        .await;
        let bound = started.elapsed();
        let cpu = cpu_seconds(pid) - cpu0;
        let hwm = proc_status_kib(pid, "VmHWM:") / 1024;
        let requests = ctl.log_text().matches("\"message\":\"requesting\"").count() - requests0;
        let nodes = kwok_nodes(&admin).await.len();
        eprintln!(
            "PERF: 1000 pods created in {:.1} s, all bound after {:.1} s; {nodes} nodes; controller CPU {cpu:.1} s, peak RSS {hwm} MiB; {requests} API requests ({:.1} per node)",
            created.as_secs_f64(),
            bound.as_secs_f64(),
            requests as f64 / nodes.max(1) as f64
        );
        drop(ctl);
        cleanup(&admin, test).await;
    });
}

/// `FEATURE_GATES=NodeOverlay=true`: the controller watches NodeOverlays, applies them to its
/// NodePools' instance types (an overlay's extended resource makes a pod that requests it
/// schedulable) and writes their `ValidationSucceeded` condition: `True`, or `False` with
/// reason `Conflict` for the loser of two overlays of equal weight.
#[test]
#[ignore = "needs the loopback control plane: scripts/test starts it and runs these with --ignored"]
fn node_overlays_apply_behind_their_gate_and_get_their_status() {
    let test = "overlay";
    let env = env(test);
    env.rt.block_on(async {
        let admin = client(&env.admin).await;
        install(&admin).await;
        cleanup(&admin, test).await;
        let overlays: Api<karpenter_core::crd::KubeNodeOverlay> = Api::all(admin.clone());
        let _ = overlays
            .delete_collection(&Default::default(), &Default::default())
            .await;
        apply_value(
            &admin,
            nodepool(
                "e2e-overlay",
                json!({"e2e": "overlay"}),
                json!({"consolidationPolicy": "WhenEmpty", "consolidateAfter": "Never"}),
            ),
        )
        .await;
        for (name, fuse) in [("fuse-a", "4"), ("fuse-b", "8")] {
            apply_value(
                &admin,
                json!({
                    "apiVersion": "karpenter.sh/v1alpha1",
                    "kind": "NodeOverlay",
                    "metadata": {"name": name},
                    "spec": {
                        "requirements": [{"key": "karpenter.sh/nodepool", "operator": "In", "values": ["e2e-overlay"]}],
                        "capacity": {"example.com/fuse": fuse},
                        "weight": 10
                    }
                }),
            )
            .await;
        }
        let mut ctl = Controller::start(&env, "overlay", &["--feature-gates", "NodeOverlay=true"]);
        let mut p = pod(test, "overlay-0", "1", "1Gi", BTreeMap::new());
        if let Some(spec) = p.spec.as_mut() {
            let resources = spec.containers[0].resources.get_or_insert_with(Default::default);
            let fuse = k8s_openapi::apimachinery::pkg::api::resource::Quantity("1".into());
            resources
                .requests
                .get_or_insert_with(Default::default)
                .insert("example.com/fuse".into(), fuse.clone());
            resources
                .limits
                .get_or_insert_with(Default::default)
                .insert("example.com/fuse".into(), fuse);
        }
        create_pods(&admin, &[p]).await;
        // Only an overlaid instance type has the resource: a NodeClaim proves the overlay
        // reached the scheduler.
        wait_for("a NodeClaim for the fuse pod", Duration::from_secs(120), || async {
            nodeclaims(&admin)
                .await
                .into_iter()
                .find(|c| {
                    c.metadata.labels.as_ref().and_then(|l| l.get("karpenter.sh/nodepool"))
                        == Some(&"e2e-overlay".to_string())
                })
        })
        .await;
        let condition = |o: &karpenter_core::crd::KubeNodeOverlay| {
            o.status.as_ref().and_then(|s| {
                s.conditions
                    .iter()
                    .find(|c| c.type_ == "ValidationSucceeded")
                    .map(|c| (format!("{:?}", c.status), c.reason.clone().unwrap_or_default()))
            })
        };
        let statuses = wait_for("both overlays' conditions", Duration::from_secs(60), || async {
            let a = condition(&overlays.get("fuse-a").await.ok()?)?;
            let b = condition(&overlays.get("fuse-b").await.ok()?)?;
            Some((a, b))
        })
        .await;
        // Equal weights: "fuse-b" (later in the alphabet) goes first; "fuse-a" conflicts.
        assert_eq!(statuses.1, ("True".to_string(), "ValidationSucceeded".to_string()));
        assert_eq!(statuses.0, ("False".to_string(), "Conflict".to_string()));
        ctl.terminate();
        let _ = overlays
            .delete_collection(&Default::default(), &Default::default())
            .await;
        cleanup(&admin, test).await;
    });
}

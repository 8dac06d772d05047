//! The scenarios, each asserting on moto's state and the API server's.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::{Pod, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use karpenter_aws::sdk::aws_sdk_ec2::types as ec2;
use karpenter_core::crd::KubeNodeClaim;
use kube::api::{ApiResource, DeleteParams, DynamicObject, GroupVersionKind};
use kube::{Api, Client};
use serde_json::json;

use super::kubelet::Kubelet;
use super::world::*;
use crate::e2e::harness::{
    Controller, Env, apply_value, cleanup, client, create_pods, env, install, nodeclaims, pod,
    pods_of, wait_for,
};

/// Flags that make a lost leader's Lease expire within seconds (as the fake-mode e2e).
const FAST_LEASE: [&str; 6] = [
    "--lease-duration",
    "6s",
    "--lease-renew-deadline",
    "4s",
    "--lease-renew-period",
    "1s",
];

/// A test's running parts.
struct Suite {
    test: &'static str,
    admin: Client,
    world: World,
    controllers: Vec<Controller>,
    kubelet: Kubelet,
}

/// The cluster made ready (CRDs, the chart's RBAC only, no objects of earlier tests), the
/// test's AWS resources in moto, the two replicas started and one of them leading, and the
/// kubelet stand-in running.
async fn start(env: &Env, test: &'static str) -> Suite {
    let chart = rendered_chart(test);
    let admin = client(&env.admin).await;
    install(&admin).await;
    delete_deployments(&admin).await;
    cleanup(&admin, test).await;
    delete_node_classes(&admin).await;
    install_chart_rbac(&admin, &chart).await;
    let world = World::create(test, &admin).await;
    let controllers = start_replicas(env, &chart, &world, &FAST_LEASE);
    for c in &controllers {
        c.wait_ready(Duration::from_secs(120)).await;
    }
    let ids: BTreeSet<String> = controllers.iter().map(|c| c.identity.clone()).collect();
    wait_for("a replica leads", Duration::from_secs(60), || async {
        leader(&admin).await.filter(|l| ids.contains(l))
    })
    .await;
    let kubelet = Kubelet::start(admin.clone(), &world);
    Suite {
        test,
        admin,
        world,
        controllers,
        kubelet,
    }
}

impl Suite {
    /// The install guide's EC2NodeClass `default` and a NodePool `name` of the capacity
    /// types, c5.large and m5.large only (two vCPUs: a pod of 1200m takes a node).
    async fn apply_pool(&self, name: &str, capacity: &[&str], consolidate_after: &str) {
        apply_value(&self.admin, self.world.node_class("default")).await;
        apply_value(
            &self.admin,
            json!({
                "apiVersion": "karpenter.sh/v1",
                "kind": "NodePool",
                "metadata": {"name": name},
                "spec": {
                    "template": {
                        "spec": {
                            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                            "requirements": [
                                {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
                                {"key": "karpenter.sh/capacity-type", "operator": "In", "values": capacity},
                                {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["c5.large", "m5.large"]}
                            ],
                            "expireAfter": "Never"
                        }
                    },
                    "disruption": {
                        "consolidationPolicy": "WhenEmptyOrUnderutilized",
                        "consolidateAfter": consolidate_after,
                        "budgets": [{"nodes": "100%"}]
                    }
                }
            }),
        )
        .await;
    }

    /// A pod of 1200m (one per node) with what a cluster's DefaultTolerationSeconds
    /// admission gives every pod (a node not Ready yet does not evict it at once).
    fn pod(&self, name: &str) -> Pod {
        let mut p = pod(self.test, name, "1200m", "256Mi", BTreeMap::new());
        if let Some(spec) = p.spec.as_mut() {
            spec.tolerations = Some(
                [
                    "node.kubernetes.io/not-ready",
                    "node.kubernetes.io/unreachable",
                ]
                .into_iter()
                .map(|key| k8s_openapi::api::core::v1::Toleration {
                    key: Some(key.to_string()),
                    operator: Some("Exists".into()),
                    effect: Some("NoExecute".into()),
                    toleration_seconds: Some(300),
                    ..Default::default()
                })
                .collect(),
            );
        }
        p
    }

    /// Creates `n` pods named `<prefix>-<i>`.
    async fn pods(&self, prefix: &str, n: usize) {
        let pods: Vec<Pod> = (0..n).map(|i| self.pod(&format!("{prefix}-{i}"))).collect();
        create_pods(&self.admin, &pods).await;
    }

    /// Creates a Deployment of `n` such pods (their replacements come back after a drain).
    async fn deployment(&self, name: &str, n: i32) {
        let template = self.pod(name);
        let labels = template.metadata.labels.clone();
        let d = Deployment {
            metadata: kube::api::ObjectMeta {
                name: Some(name.to_string()),
                namespace: Some("default".into()),
                labels: labels.clone(),
                ..Default::default()
            },
            spec: Some(DeploymentSpec {
                replicas: Some(n),
                selector: LabelSelector {
                    match_labels: labels.clone(),
                    ..Default::default()
                },
                template: PodTemplateSpec {
                    metadata: Some(kube::api::ObjectMeta {
                        labels,
                        ..Default::default()
                    }),
                    spec: template.spec,
                },
                ..Default::default()
            }),
            ..Default::default()
        };
        Api::<Deployment>::namespaced(self.admin.clone(), "default")
            .create(&Default::default(), &d)
            .await
            .expect("create the Deployment");
    }

    /// Waits until `n` of the test's pods run.
    async fn running(&self, n: usize, timeout: Duration) {
        wait_for(&format!("{n} pods running"), timeout, || async {
            let pods = pods_of(&self.admin, self.test).await;
            let running = pods
                .iter()
                .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
                .count();
            (running == n && pods.len() == n).then_some(())
        })
        .await;
    }

    /// The live instances when they are exactly one per NodeClaim (each NodeClaim's
    /// providerID is a live instance, and no live instance lacks a NodeClaim).
    async fn matched(&self) -> Option<Vec<ec2::Instance>> {
        let claims: BTreeSet<String> = nodeclaims(&self.admin)
            .await
            .iter()
            .filter_map(|c| c.status.as_ref()?.provider_id.clone())
            .collect();
        let live = self.world.live_instances().await;
        let ids: BTreeSet<String> = live.iter().map(provider_id).collect();
        (ids == claims).then_some(live)
    }

    /// Waits until [`Suite::matched`]; returns the instances.
    async fn one_instance_per_claim(&self, timeout: Duration) -> Vec<ec2::Instance> {
        wait_for(
            "one live instance per NodeClaim, none other",
            timeout,
            || self.matched(),
        )
        .await
    }

    /// Checks the logs and stops everything.
    async fn finish(mut self) {
        assert_no_403(&self.controllers);
        drop(self.kubelet);
        for c in &mut self.controllers {
            c.kill();
        }
        delete_deployments(&self.admin).await;
        cleanup(&self.admin, self.test).await;
        delete_node_classes(&self.admin).await;
    }
}

/// Deletes the e2e tests' Deployments (before their pods).
async fn delete_deployments(admin: &Client) {
    let _ = Api::<Deployment>::namespaced(admin.clone(), "default")
        .delete_collection(
            &DeleteParams::default(),
            &kube::api::ListParams::default().labels(crate::e2e::harness::E2E_LABEL),
        )
        .await;
}

fn provider_id(i: &ec2::Instance) -> String {
    format!(
        "aws:///{}/{}",
        i.placement()
            .and_then(|p| p.availability_zone())
            .unwrap_or_default(),
        i.instance_id().unwrap_or_default()
    )
}

fn ec2nodeclasses(admin: &Client) -> Api<DynamicObject> {
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("karpenter.k8s.aws", "v1", "EC2NodeClass"),
        "ec2nodeclasses",
    );
    Api::all_with(admin.clone(), &ar)
}

fn claim_condition(c: &KubeNodeClaim, type_: &str) -> bool {
    serde_json::to_value(c).ok().is_some_and(|v| {
        v["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["type"] == type_ && c["status"] == "True")
    })
}

fn spot_warning(instance: &str) -> String {
    json!({
        "version": "0",
        "id": format!("e2e-{instance}"),
        "source": "aws.ec2",
        "detail-type": "EC2 Spot Instance Interruption Warning",
        "account": "123456789012",
        "time": "2026-01-01T00:00:00Z",
        "region": REGION,
        "resources": [format!("arn:aws:ec2:{REGION}:123456789012:instance/{instance}")],
        "detail": {"instance-id": instance, "instance-action": "terminate"}
    })
    .to_string()
}

#[test]
#[ignore = "needs the control plane, moto and the rendered chart: scripts/test runs these with --ignored"]
fn scale_up_launches_tagged_instances_from_the_selected_network() {
    let env = env("aws_e2e::scale_up");
    env.rt.block_on(async {
        let s = start(&env, "aws-scale-up").await;
        s.apply_pool("general", &["on-demand"], "Never").await;
        s.pods("web", 3).await;
        s.running(3, Duration::from_secs(240)).await;
        let live = s.one_instance_per_claim(Duration::from_secs(60)).await;
        assert_eq!(live.len(), 3);
        assert_eq!(s.kubelet.count(), 3, "instances registered as Nodes");
        let w = &s.world;

        // The NodeClaims: launched, registered and initialized, each its own instance.
        let claims = nodeclaims(&s.admin).await;
        assert_eq!(claims.len(), 3);
        for c in &claims {
            for cond in ["Launched", "Registered", "Initialized"] {
                assert!(claim_condition(c, cond), "{:?} not {cond}", c.metadata.name);
            }
        }
        let by_pid: BTreeMap<String, String> = claims
            .iter()
            .filter_map(|c| {
                Some((
                    c.status.as_ref()?.provider_id.clone()?,
                    c.metadata.name.clone()?,
                ))
            })
            .collect();

        // The instances: the launch tags at once, the registration tags soon after.
        let selected: BTreeSet<&str> = w.subnets.iter().map(|(s, _)| s.as_str()).collect();
        for i in &live {
            let id = i.instance_id().unwrap_or_default();
            let owned = format!("kubernetes.io/cluster/{}", w.name);
            assert_eq!(instance_tag(i, &owned), Some("owned"), "{id}");
            assert_eq!(
                instance_tag(i, "karpenter.sh/nodepool"),
                Some("general"),
                "{id}"
            );
            assert_eq!(
                instance_tag(i, "karpenter.k8s.aws/ec2nodeclass"),
                Some("default"),
                "{id}"
            );
            assert_eq!(
                instance_tag(i, "eks:eks-cluster-name"),
                Some(w.name.as_str()),
                "{id}"
            );
            let subnet = i.subnet_id().unwrap_or_default();
            assert!(
                selected.contains(subnet),
                "{id} in {subnet}, not a selected subnet"
            );
            assert_ne!(subnet, w.decoy_subnet);
            let groups: Vec<&str> = i
                .security_groups()
                .iter()
                .filter_map(|g| g.group_id())
                .collect();
            assert_eq!(
                groups,
                [w.security_group.as_str()],
                "{id}'s security groups"
            );
            assert!(!groups.contains(&w.decoy_group.as_str()));
            assert_eq!(i.image_id(), Some(w.amis[0].as_str()), "{id}'s AMI");
        }
        wait_for(
            "Name and karpenter.sh/nodeclaim tags on every instance",
            Duration::from_secs(60),
            || async {
                let live = w.live_instances().await;
                live.iter()
                    .all(|i| {
                        let claim = by_pid.get(&provider_id(i)).map(String::as_str);
                        claim.is_some()
                            && instance_tag(i, "karpenter.sh/nodeclaim") == claim
                            && instance_tag(i, "Name").is_some_and(|n| !n.is_empty())
                    })
                    .then_some(())
            },
        )
        .await;

        // The launch templates: IMDSv2 required with hop limit 1, an encrypted gp3 root volume.
        let templates = w.launch_templates().await;
        assert!(!templates.is_empty(), "no launch template of the cluster");
        for t in &templates {
            let id = t.launch_template_id().unwrap_or_default();
            let versions = w
                .clients
                .ec2
                .describe_launch_template_versions()
                .launch_template_id(id)
                .versions("$Latest")
                .send()
                .await
                .expect("DescribeLaunchTemplateVersions");
            let data = versions.launch_template_versions()[0]
                .launch_template_data()
                .expect("launch template data");
            let md = data.metadata_options().expect("metadata options");
            assert_eq!(
                md.http_tokens().map(|t| t.as_str()),
                Some("required"),
                "{id}"
            );
            assert_eq!(md.http_put_response_hop_limit(), Some(1), "{id}");
            let root = data
                .block_device_mappings()
                .iter()
                .find(|b| b.device_name() == Some("/dev/xvda"))
                .unwrap_or_else(|| panic!("{id}: no /dev/xvda mapping"));
            let ebs = root.ebs().expect("an EBS root volume");
            assert_eq!(
                ebs.encrypted(),
                Some(true),
                "{id}: the root volume is not encrypted"
            );
            assert_eq!(ebs.volume_type().map(|v| v.as_str()), Some("gp3"), "{id}");
            assert_eq!(data.image_id(), Some(w.amis[0].as_str()), "{id}");
        }

        // The EC2NodeClass: its status written (by the leader, under the chart's RBAC), its
        // instance profile in IAM.
        let class = ec2nodeclasses(&s.admin)
            .get("default")
            .await
            .expect("the class");
        let status = serde_json::to_value(&class).unwrap()["status"].clone();
        let profile = status["instanceProfile"]
            .as_str()
            .expect("status.instanceProfile");
        assert_eq!(w.instance_profiles().await, [profile.to_string()]);
        assert_eq!(status["amis"][0]["id"], json!(w.amis[0]));
        s.finish().await;
    });
}

#[test]
#[ignore = "needs the control plane, moto and the rendered chart: scripts/test runs these with --ignored"]
fn spot_interruptions_are_each_handled_once_by_two_replicas() {
    const N: usize = 50;
    let env = env("aws_e2e::spot_interruption");
    env.rt.block_on(async {
        let s = start(&env, "aws-interruption").await;
        s.apply_pool("spot", &["spot", "on-demand"], "Never").await;
        s.deployment("batch", N as i32).await;
        s.running(N, Duration::from_secs(420)).await;
        // A CreateFleet retried after a lost answer leaves instances no NodeClaim names (moto
        // takes no ClientToken); the garbage collection (every 2 minutes, 30 s grace)
        // terminates them.
        let live = s.one_instance_per_claim(Duration::from_secs(240)).await;
        assert_eq!(live.len(), N);
        let before: BTreeSet<String> = nodeclaims(&s.admin)
            .await
            .iter()
            .filter_map(|c| c.metadata.name.clone())
            .collect();
        let old: BTreeSet<String> = live
            .iter()
            .filter_map(|i| i.instance_id().map(str::to_string))
            .collect();

        // One warning per instance.
        for id in &old {
            s.world.send_message(&spot_warning(id)).await;
        }
        // Each message: one action (its NodeClaim deleted), one delete, and only once: the
        // counters summed over both replicas (a follower consumes nothing).
        let start = Instant::now();
        wait_for(
            &format!("{N} messages handled and deleted"),
            Duration::from_secs(240),
            || async {
                let deleted = metric_sum(
                    &s.controllers,
                    "karpenter_interruption_deleted_messages_total",
                    &[],
                )
                .await;
                let gone = nodeclaims(&s.admin)
                    .await
                    .iter()
                    .filter(|c| {
                        before.contains(c.metadata.name.as_deref().unwrap_or_default())
                            && c.metadata.deletion_timestamp.is_none()
                    })
                    .count()
                    == 0;
                (deleted >= N as f64 && gone && s.world.queued_messages().await == 0).then_some(())
            },
        )
        .await;
        eprintln!("{N} interruptions handled in {:?}", start.elapsed());
        let received = metric_sum(
            &s.controllers,
            "karpenter_interruption_received_messages_total",
            &["message_type=\"spot_interrupted\""],
        )
        .await;
        let actions = metric_sum(
            &s.controllers,
            "karpenter_nodeclaims_disrupted_total",
            &["reason=\"spot_interrupted\""],
        )
        .await;
        let deleted = metric_sum(
            &s.controllers,
            "karpenter_interruption_deleted_messages_total",
            &[],
        )
        .await;
        assert_eq!(
            (received, actions, deleted),
            (N as f64, N as f64, N as f64),
            "(events received, NodeClaims deleted, messages deleted)"
        );
        // The replacements: N new NodeClaims, each on a new instance; the old ones terminated.
        s.running(N, Duration::from_secs(420)).await;
        let live = s.one_instance_per_claim(Duration::from_secs(240)).await;
        assert_eq!(live.len(), N);
        let after: BTreeSet<String> = nodeclaims(&s.admin)
            .await
            .iter()
            .filter_map(|c| c.metadata.name.clone())
            .collect();
        assert!(
            after.is_disjoint(&before),
            "a NodeClaim survived its interruption"
        );
        assert!(
            live.iter()
                .all(|i| !old.contains(i.instance_id().unwrap_or_default())),
            "an interrupted instance still runs"
        );
        s.finish().await;
    });
}

#[test]
#[ignore = "needs the control plane, moto and the rendered chart: scripts/test runs these with --ignored"]
fn a_new_ami_release_replaces_the_node() {
    let env = env("aws_e2e::ami_drift");
    env.rt.block_on(async {
        let s = start(&env, "aws-drift").await;
        s.apply_pool("general", &["on-demand"], "Never").await;
        s.deployment("app", 1).await;
        s.running(1, Duration::from_secs(240)).await;
        let first = s.one_instance_per_claim(Duration::from_secs(60)).await;
        assert_eq!(first[0].image_id(), Some(s.world.amis[0].as_str()));
        let old_claim = nodeclaims(&s.admin).await[0].metadata.name.clone();

        // The AMI release: the alias's SSM parameter names the next image.
        s.world.publish_ami(&s.world.amis[1]).await;
        let w = &s.world;
        let replaced = wait_for(
            "the node replaced by one on the new AMI",
            Duration::from_secs(300),
            || async {
                let live = w.live_instances().await;
                let claims = nodeclaims(&s.admin).await;
                (live.len() == 1
                    && live[0].image_id() == Some(w.amis[1].as_str())
                    && claims.len() == 1
                    && claims[0].metadata.name != old_claim)
                    .then_some(live)
            },
        )
        .await;
        assert_ne!(replaced[0].instance_id(), first[0].instance_id());
        s.running(1, Duration::from_secs(120)).await;
        let class = ec2nodeclasses(&s.admin)
            .get("default")
            .await
            .expect("the class");
        assert_eq!(
            serde_json::to_value(&class).unwrap()["status"]["amis"][0]["id"],
            json!(w.amis[1])
        );
        s.finish().await;
    });
}

#[test]
#[ignore = "needs the control plane, moto and the rendered chart: scripts/test runs these with --ignored"]
fn consolidation_scales_down_and_terminates_the_instances() {
    let env = env("aws_e2e::consolidation");
    env.rt.block_on(async {
        let s = start(&env, "aws-consolidation").await;
        s.apply_pool("general", &["on-demand"], "5s").await;
        s.pods("web", 4).await;
        s.running(4, Duration::from_secs(240)).await;
        let before = s.one_instance_per_claim(Duration::from_secs(60)).await;
        assert_eq!(before.len(), 4);
        let pods: Api<Pod> = Api::namespaced(s.admin.clone(), "default");
        for i in 1..4 {
            pods.delete(
                &format!("web-{i}"),
                &DeleteParams::default().grace_period(0),
            )
            .await
            .expect("delete a pod");
        }
        let after = wait_for(
            "three nodes consolidated away",
            Duration::from_secs(240),
            || async { s.matched().await.filter(|live| live.len() == 1) },
        )
        .await;
        // Three (or, with the survivor replaced by a cheaper type, four) terminated.
        let terminated = s.world.instances(&["shutting-down", "terminated"]).await;
        assert!(
            terminated.len() >= 3,
            "{} instances terminated",
            terminated.len()
        );
        let ids: BTreeSet<&str> = before.iter().filter_map(|i| i.instance_id()).collect();
        assert!(
            terminated
                .iter()
                .all(|i| ids.contains(i.instance_id().unwrap_or_default())),
            "only the scale-up's instances are terminated"
        );
        assert_eq!(after.len(), 1);
        s.running(1, Duration::from_secs(60)).await;
        s.finish().await;
    });
}

#[test]
#[ignore = "needs the control plane, moto and the rendered chart: scripts/test runs these with --ignored"]
fn a_leader_killed_mid_launch_leaves_one_instance_per_nodeclaim() {
    const N: usize = 4;
    let env = env("aws_e2e::leader_killed");
    env.rt.block_on(async {
        let mut s = start(&env, "aws-leader-kill").await;
        s.apply_pool("general", &["on-demand"], "Never").await;
        s.pods("app", N).await;
        // Kill the leader as soon as it creates a NodeClaim: its launch is in flight.
        let first = wait_for("a NodeClaim", Duration::from_secs(120), || async {
            nodeclaims(&s.admin).await.into_iter().next()
        })
        .await;
        let leading = leader(&s.admin).await.expect("a leader");
        let dead = s
            .controllers
            .iter_mut()
            .find(|c| c.identity == leading)
            .expect("the leader is a replica");
        dead.kill();
        eprintln!(
            "killed {leading} with NodeClaim {:?} launched: {}",
            first.metadata.name,
            first
                .status
                .as_ref()
                .and_then(|st| st.provider_id.clone())
                .is_some()
        );
        let survivor = s
            .controllers
            .iter()
            .find(|c| c.identity != leading)
            .expect("two replicas")
            .identity
            .clone();
        wait_for(
            "the other replica leads",
            Duration::from_secs(60),
            || async { leader(&s.admin).await.filter(|l| *l == survivor) },
        )
        .await;
        s.running(N, Duration::from_secs(300)).await;
        // After the garbage collection (30 s grace): one instance per NodeClaim, and no
        // instance that no NodeClaim names.
        let live = s.one_instance_per_claim(Duration::from_secs(180)).await;
        let claims = nodeclaims(&s.admin).await;
        assert_eq!(live.len(), claims.len());
        let mut per_claim: BTreeMap<String, usize> = BTreeMap::new();
        for i in &live {
            if let Some(c) = instance_tag(i, "karpenter.sh/nodeclaim") {
                *per_claim.entry(c.to_string()).or_default() += 1;
            }
        }
        assert!(per_claim.values().all(|n| *n == 1), "{per_claim:?}");
        s.finish().await;
    });
}

#[test]
#[ignore = "needs the control plane, moto and the rendered chart: scripts/test runs these with --ignored"]
fn a_deleted_node_class_takes_its_instance_profile_and_launch_templates() {
    let env = env("aws_e2e::deleted_nodeclass");
    env.rt.block_on(async {
        let s = start(&env, "aws-class-delete").await;
        s.apply_pool("general", &["on-demand"], "Never").await;
        s.pods("app", 1).await;
        s.running(1, Duration::from_secs(240)).await;
        let w = &s.world;
        assert_eq!(w.instance_profiles().await.len(), 1);
        assert!(!w.launch_templates().await.is_empty());
        // Scale to zero, then delete the NodePool and the class.
        let pods: Api<Pod> = Api::namespaced(s.admin.clone(), "default");
        pods.delete("app-0", &DeleteParams::default().grace_period(0))
            .await
            .expect("delete the pod");
        let claims: Api<KubeNodeClaim> = Api::all(s.admin.clone());
        for c in nodeclaims(&s.admin).await {
            claims
                .delete(
                    c.metadata.name.as_deref().unwrap_or_default(),
                    &DeleteParams::default(),
                )
                .await
                .expect("delete a NodeClaim");
        }
        wait_for(
            "no NodeClaim, no instance",
            Duration::from_secs(120),
            || async {
                (nodeclaims(&s.admin).await.is_empty() && w.live_instances().await.is_empty())
                    .then_some(())
            },
        )
        .await;
        let pools: Api<karpenter_core::crd::KubeNodePool> = Api::all(s.admin.clone());
        pools
            .delete("general", &DeleteParams::default())
            .await
            .expect("delete the NodePool");
        ec2nodeclasses(&s.admin)
            .delete("default", &DeleteParams::default())
            .await
            .expect("delete the EC2NodeClass");
        // The next node-class pass (every minute) cleans up after it.
        wait_for(
            "the class's instance profile and launch templates deleted",
            Duration::from_secs(150),
            || async {
                (w.instance_profiles().await.is_empty() && w.launch_templates().await.is_empty())
                    .then_some(())
            },
        )
        .await;
        s.finish().await;
    });
}

//! The kubelet stand-in, the one simulated piece of the AWS-mode e2e: moto's instances boot
//! nothing, so nothing would ever register them. Every second this registers each running
//! instance of the cluster, once, as the kubelet of an EKS node does at boot:
//!
//! - the Node is named after the instance's private DNS name and has providerID
//!   `aws:///<zone>/<instance-id>`;
//! - its labels are the kubelet's own (hostname, os, arch, instance type, zone, region) and the
//!   ones Karpenter's user data passes with `--node-labels` (the NodeClaim's labels), its taints
//!   the user data's `--register-with-taints` (the NodeClaim's taints and startup taints, and
//!   `karpenter.sh/unregistered:NoExecute`);
//! - its capacity and allocatable are the NodeClaim's (what the kubelet reports of the
//!   instance type; Karpenter computed them from the same DescribeInstanceTypes). An instance
//!   no NodeClaim names after 10 s (one whose launch a killed leader never recorded) registers
//!   all the same, with its instance type's vCPUs and memory: a real kubelet would too;
//! - it is annotated `kwok.x-k8s.io/node=fake`: kwok then plays the kubelet's status updates
//!   (Ready, the Lease) and runs the Node's pods.
//!
//! Each instance registers once: the stand-in does not re-create a Node that Karpenter deleted
//! while its instance was still shutting down.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Node;
use karpenter_aws::sdk::aws_sdk_ec2::types as ec2;
use karpenter_core::crd::KubeNodeClaim;
use kube::api::{ListParams, PostParams};
use kube::{Api, Client};
use serde_json::{Value, json};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::world::{REGION, World};

/// How long an instance no NodeClaim names waits before it registers anyway.
const ORPHAN_WAIT: Duration = Duration::from_secs(10);

/// The running stand-in; stops on drop.
pub struct Kubelet {
    stop: watch::Sender<bool>,
    task: Option<JoinHandle<()>>,
    /// Instance ids registered so far.
    registered: Arc<Mutex<BTreeSet<String>>>,
}

impl Kubelet {
    /// Starts registering the instances of `world`'s cluster (call inside the runtime).
    pub fn start(admin: Client, world: &World) -> Kubelet {
        let (stop, mut stopped) = watch::channel(false);
        let registered = Arc::new(Mutex::new(BTreeSet::new()));
        let reg = Arc::clone(&registered);
        let ec2 = world.clients.ec2.clone();
        let cluster = world.name.clone();
        let task = tokio::spawn(async move {
            let mut first_seen: BTreeMap<String, Instant> = BTreeMap::new();
            let mut types: BTreeMap<String, (i32, i64)> = BTreeMap::new();
            loop {
                if let Err(e) =
                    register(&admin, &ec2, &cluster, &reg, &mut first_seen, &mut types).await
                {
                    eprintln!("kubelet stand-in: {e}");
                }
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                    _ = stopped.changed() => return,
                }
            }
        });
        Kubelet {
            stop,
            task: Some(task),
            registered,
        }
    }

    /// How many instances registered.
    pub fn count(&self) -> usize {
        self.registered
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .len()
    }
}

impl Drop for Kubelet {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
        if let Some(t) = self.task.take() {
            t.abort();
        }
    }
}

async fn register(
    admin: &Client,
    ec2: &karpenter_aws::sdk::aws_sdk_ec2::Client,
    cluster: &str,
    registered: &Mutex<BTreeSet<String>>,
    first_seen: &mut BTreeMap<String, Instant>,
    types: &mut BTreeMap<String, (i32, i64)>,
) -> Result<(), String> {
    let out = ec2
        .describe_instances()
        .filters(
            ec2::Filter::builder()
                .name("tag-key")
                .values(format!("kubernetes.io/cluster/{cluster}"))
                .build(),
        )
        .filters(
            ec2::Filter::builder()
                .name("instance-state-name")
                .values("running")
                .build(),
        )
        .send()
        .await
        .map_err(|e| format!("DescribeInstances: {e}"))?;
    let instances: Vec<ec2::Instance> = out
        .reservations()
        .iter()
        .flat_map(|r| r.instances().iter().cloned())
        .collect();
    let fresh: Vec<&ec2::Instance> = {
        let done = registered.lock().unwrap_or_else(|e| e.into_inner());
        instances
            .iter()
            .filter(|i| i.instance_id().is_some_and(|id| !done.contains(id)))
            .collect()
    };
    if fresh.is_empty() {
        return Ok(());
    }
    let claims: Vec<KubeNodeClaim> = Api::<KubeNodeClaim>::all(admin.clone())
        .list(&ListParams::default())
        .await
        .map_err(|e| format!("list NodeClaims: {e}"))?
        .items;
    let nodes: Api<Node> = Api::all(admin.clone());
    for i in fresh {
        let id = i.instance_id().unwrap_or_default().to_string();
        let zone = i
            .placement()
            .and_then(|p| p.availability_zone())
            .unwrap_or_default()
            .to_string();
        let provider_id = format!("aws:///{zone}/{id}");
        let claim = claims.iter().find(|c| {
            c.status.as_ref().and_then(|s| s.provider_id.as_deref()) == Some(provider_id.as_str())
        });
        let seen = *first_seen.entry(id.clone()).or_insert_with(Instant::now);
        if claim.is_none() && seen.elapsed() < ORPHAN_WAIT {
            continue;
        }
        let instance_type = i
            .instance_type()
            .map(|t| t.as_str().to_string())
            .unwrap_or_default();
        let fallback = match claim {
            Some(_) => None,
            None => Some(type_capacity(ec2, &instance_type, types).await?),
        };
        let node = node_for(i, &provider_id, &zone, &instance_type, claim, fallback);
        let node: Node = serde_json::from_value(node).map_err(|e| format!("a Node: {e}"))?;
        match nodes.create(&PostParams::default(), &node).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(e) => return Err(format!("create Node for {id}: {e}")),
        }
        registered
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id);
    }
    Ok(())
}

/// vCPUs and memory (MiB) of an instance type (DescribeInstanceTypes, cached).
async fn type_capacity(
    ec2: &karpenter_aws::sdk::aws_sdk_ec2::Client,
    instance_type: &str,
    cache: &mut BTreeMap<String, (i32, i64)>,
) -> Result<(i32, i64), String> {
    if let Some(c) = cache.get(instance_type) {
        return Ok(*c);
    }
    let out = ec2
        .describe_instance_types()
        .instance_types(ec2::InstanceType::from(instance_type))
        .send()
        .await
        .map_err(|e| format!("DescribeInstanceTypes {instance_type}: {e}"))?;
    let t = out
        .instance_types()
        .first()
        .ok_or_else(|| format!("no instance type {instance_type}"))?;
    let c = (
        t.v_cpu_info().and_then(|v| v.default_v_cpus()).unwrap_or(2),
        t.memory_info()
            .and_then(|m| m.size_in_mib())
            .unwrap_or(4096),
    );
    cache.insert(instance_type.to_string(), c);
    Ok(c)
}

/// The Node the kubelet of instance `i` registers.
fn node_for(
    i: &ec2::Instance,
    provider_id: &str,
    zone: &str,
    instance_type: &str,
    claim: Option<&KubeNodeClaim>,
    fallback: Option<(i32, i64)>,
) -> Value {
    let name = i
        .private_dns_name()
        .filter(|n| !n.is_empty())
        .map(str::to_string)
        .unwrap_or_else(|| i.instance_id().unwrap_or_default().to_string());
    let arch = match i.architecture().map(|a| a.as_str()) {
        Some("arm64") => "arm64",
        _ => "amd64",
    };
    let claim: Option<Value> = claim.and_then(|c| serde_json::to_value(c).ok());
    let mut labels: BTreeMap<String, Value> = BTreeMap::new();
    if let Some(c) = &claim {
        if let Some(m) = c["metadata"]["labels"].as_object() {
            labels.extend(m.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
    } else if let Some(pool) = i
        .tags()
        .iter()
        .find(|t| t.key() == Some("karpenter.sh/nodepool"))
        .and_then(|t| t.value())
    {
        labels.insert("karpenter.sh/nodepool".into(), json!(pool));
    }
    for (k, v) in [
        ("kubernetes.io/hostname", name.as_str()),
        ("kubernetes.io/os", "linux"),
        ("kubernetes.io/arch", arch),
        ("node.kubernetes.io/instance-type", instance_type),
        ("topology.kubernetes.io/zone", zone),
        ("topology.kubernetes.io/region", REGION),
    ] {
        labels.insert(k.to_string(), json!(v));
    }
    let mut taints: Vec<Value> = Vec::new();
    let (capacity, allocatable) = match &claim {
        Some(c) => {
            for key in ["taints", "startupTaints"] {
                taints.extend(c["spec"][key].as_array().cloned().unwrap_or_default());
            }
            (
                c["status"]["capacity"].clone(),
                c["status"]["allocatable"].clone(),
            )
        }
        None => {
            let (cpu, mib) = fallback.unwrap_or((2, 4096));
            let r = json!({"cpu": cpu.to_string(), "memory": format!("{mib}Mi"), "pods": "29"});
            (r.clone(), r)
        }
    };
    taints.push(json!({"key": "karpenter.sh/unregistered", "effect": "NoExecute"}));
    json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": labels,
            "annotations": {"kwok.x-k8s.io/node": "fake"}
        },
        "spec": {"providerID": provider_id, "taints": taints},
        "status": {"capacity": capacity, "allocatable": allocatable}
    })
}

//! The AWS side of a test (moto: the cluster's VPC, subnets, security groups, AMIs, node role,
//! EKS cluster, interruption queue and AMI parameter) and the controller replicas as the chart
//! runs them.

use std::io::BufRead;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, OnceLock};

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::rbac::v1::{ClusterRoleBinding, RoleBinding};
use karpenter_aws::sdk::AwsClients;
use karpenter_aws::sdk::aws_credential_types::Credentials;
use karpenter_aws::sdk::aws_sdk_ec2::types as ec2;
use kube::api::{DeleteParams, DynamicObject, ListParams};
use kube::{Api, Client};
use serde_json::{Value, json};

use crate::e2e::harness::{Controller, Env, apply_value, karpenter_bin, repo_root};

/// The region of the tests.
pub const REGION: &str = "us-east-1";
/// The zones of the selected subnets.
pub const ZONES: [&str; 2] = ["us-east-1a", "us-east-1b"];
/// The namespace of the controller's ServiceAccount token (scripts/control-plane/up.sh).
const CONTROLLER_NAMESPACE: &str = "karpenter";

struct Moto {
    endpoint: String,
    _child: Option<Child>,
}

static MOTO: OnceLock<Option<Mutex<Moto>>> = OnceLock::new();

fn start_moto() -> Option<Mutex<Moto>> {
    if let Some(ep) = std::env::var("KARPENTER_MOTO_ENDPOINT")
        .ok()
        .filter(|e| !e.is_empty())
    {
        return Some(Mutex::new(Moto {
            endpoint: ep,
            _child: None,
        }));
    }
    let python = std::env::var("KARPENTER_MOTO_PYTHON").unwrap_or_else(|_| {
        let home = std::env::var("HOME").unwrap_or_default();
        format!("{home}/.cache/karpenter-rs/moto/bin/python")
    });
    let mut child = Command::new(&python)
        .arg(repo_root().join("scripts/moto/server.py"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take()?)
        .read_line(&mut line)
        .ok()?;
    let endpoint = line.trim().to_string();
    endpoint.starts_with("http://127.0.0.1:").then(|| {
        Mutex::new(Moto {
            endpoint,
            _child: Some(child),
        })
    })
}

/// The moto endpoint; panics naming what is missing.
pub fn moto_endpoint(test: &str) -> String {
    MOTO.get_or_init(start_moto)
        .as_ref()
        .map(|m| m.lock().unwrap_or_else(|e| e.into_inner()).endpoint.clone())
        .unwrap_or_else(|| {
            panic!(
                "{test}: no moto: set KARPENTER_MOTO_ENDPOINT or run scripts/moto/install.sh \
                 (scripts/test does both)"
            )
        })
}

/// The chart as scripts/helm-check.sh rendered it with the install notes' values.
pub fn rendered_chart(test: &str) -> Vec<Value> {
    let dir = std::env::var_os("KARPENTER_CHART_RENDERED")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            panic!(
                "{test}: KARPENTER_CHART_RENDERED is unset (scripts/test runs \
                 scripts/helm-check.sh and sets it)"
            )
        });
    let path = dir.join("install-notes.yaml");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{test}: {}: {e}", path.display()));
    serde_saphyr::from_multiple::<Value>(&text)
        .unwrap_or_else(|e| panic!("{test}: {}: {e}", path.display()))
        .into_iter()
        .filter(|d| !d.is_null())
        .collect()
}

/// One cluster in moto.
pub struct World {
    /// The cluster's name (EKS, discovery tags).
    pub name: String,
    /// SDK clients on moto.
    pub clients: AwsClients,
    /// The moto endpoint.
    pub endpoint: String,
    /// The selected subnets (id, zone).
    pub subnets: Vec<(String, String)>,
    /// A subnet of the VPC without the discovery tag.
    pub decoy_subnet: String,
    /// The selected security group.
    pub security_group: String,
    /// A security group without the discovery tag.
    pub decoy_group: String,
    /// Two x86_64 AMIs: the one published first, and the next "release".
    pub amis: [String; 2],
    /// The node role.
    pub role: String,
    /// The interruption queue's name and URL.
    pub queue: String,
    /// Its URL.
    pub queue_url: String,
    /// The API server's Kubernetes version (`major.minor`): the AMI parameter's.
    pub k8s: String,
}

fn tag(key: &str, value: &str) -> ec2::Tag {
    ec2::Tag::builder().key(key).value(value).build()
}

impl World {
    /// Creates the cluster's AWS resources; the AMI parameter names `amis[0]`.
    pub async fn create(test: &str, admin: &Client) -> World {
        let endpoint = moto_endpoint(test);
        let creds = Credentials::new("testing", "testing", None, None, "moto");
        let clients = AwsClients::with_endpoint(&endpoint, REGION, creds, None)
            .await
            .expect("SDK clients on moto");
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .subsec_nanos();
        let name = format!("{test}-{nanos}").replace('_', "-");
        // A VPC range of its own: the nodes' names (private DNS names) differ from the last
        // test's, whose Nodes the control plane may still be forgetting.
        let net = 1 + nanos % 250;
        let e = &clients.ec2;
        let vpc = e
            .create_vpc()
            .cidr_block(format!("10.{net}.0.0/16"))
            .send()
            .await
            .expect("CreateVpc")
            .vpc()
            .and_then(|v| v.vpc_id())
            .expect("a VPC id")
            .to_string();
        let mut subnets = Vec::new();
        for (i, zone) in ZONES.iter().enumerate() {
            let s = e
                .create_subnet()
                .vpc_id(&vpc)
                .cidr_block(format!("10.{net}.{i}.0/24"))
                .availability_zone(*zone)
                .send()
                .await
                .expect("CreateSubnet");
            let id = s.subnet().and_then(|s| s.subnet_id()).expect("a subnet id");
            subnets.push((id.to_string(), zone.to_string()));
        }
        let decoy_subnet = e
            .create_subnet()
            .vpc_id(&vpc)
            .cidr_block(format!("10.{net}.9.0/24"))
            .availability_zone(ZONES[0])
            .send()
            .await
            .expect("CreateSubnet")
            .subnet()
            .and_then(|s| s.subnet_id())
            .expect("a subnet id")
            .to_string();
        let group = |suffix: &'static str| {
            let vpc = vpc.clone();
            let name = name.clone();
            async move {
                e.create_security_group()
                    .group_name(format!("{name}-{suffix}"))
                    .description(suffix)
                    .vpc_id(vpc)
                    .send()
                    .await
                    .expect("CreateSecurityGroup")
                    .group_id()
                    .expect("a group id")
                    .to_string()
            }
        };
        let security_group = group("nodes").await;
        let decoy_group = group("other").await;
        let mut tagged: Vec<String> = subnets.iter().map(|(id, _)| id.clone()).collect();
        tagged.push(security_group.clone());
        e.create_tags()
            .set_resources(Some(tagged))
            .tags(tag("karpenter.sh/discovery", &name))
            .send()
            .await
            .expect("CreateTags");
        let images = e
            .describe_images()
            .owners("amazon")
            .filters(
                ec2::Filter::builder()
                    .name("architecture")
                    .values("x86_64")
                    .build(),
            )
            .send()
            .await
            .expect("DescribeImages");
        let mut ids: Vec<String> = images
            .images()
            .iter()
            .filter(|i| i.architecture() == Some(&ec2::ArchitectureValues::X8664))
            .filter_map(|i| i.image_id().map(str::to_string))
            .collect();
        ids.sort();
        assert!(ids.len() >= 2, "moto preloads x86_64 images: {ids:?}");
        let amis = [ids[0].clone(), ids[1].clone()];
        let role = format!("KarpenterNodeRole-{name}");
        clients
            .iam
            .create_role()
            .role_name(&role)
            .assume_role_policy_document(
                r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"ec2.amazonaws.com"},"Action":"sts:AssumeRole"}]}"#,
            )
            .send()
            .await
            .expect("CreateRole");
        clients
            .eks
            .create_cluster()
            .name(&name)
            .role_arn("arn:aws:iam::123456789012:role/eks-cluster")
            .resources_vpc_config(
                karpenter_aws::sdk::aws_sdk_eks::types::VpcConfigRequest::builder()
                    .set_subnet_ids(Some(subnets.iter().map(|(s, _)| s.clone()).collect()))
                    .build(),
            )
            .send()
            .await
            .expect("eks:CreateCluster");
        let queue = name.clone();
        let queue_url = clients
            .sqs
            .create_queue()
            .queue_name(&queue)
            .send()
            .await
            .expect("sqs:CreateQueue")
            .queue_url()
            .expect("a queue URL")
            .to_string();
        let version = admin.apiserver_version().await.expect("API server version");
        let k8s = format!(
            "{}.{}",
            version.major,
            version
                .minor
                .trim_end_matches(|c: char| !c.is_ascii_digit())
        );
        let world = World {
            name,
            clients,
            endpoint,
            subnets,
            decoy_subnet,
            security_group,
            decoy_group,
            amis,
            role,
            queue,
            queue_url,
            k8s,
        };
        world.publish_ami(&world.amis[0]).await;
        world
    }

    /// The SSM parameter `alias: al2023@latest` resolves through for amd64.
    pub fn ami_parameter(&self) -> String {
        format!(
            "/aws/service/eks/optimized-ami/{}/amazon-linux-2023/x86_64/standard/recommended/image_id",
            self.k8s
        )
    }

    /// Publishes `ami` as the latest AL2023 image, as an AMI release does.
    pub async fn publish_ami(&self, ami: &str) {
        self.clients
            .ssm
            .put_parameter()
            .name(self.ami_parameter())
            .value(ami)
            .r#type(karpenter_aws::sdk::aws_sdk_ssm::types::ParameterType::String)
            .overwrite(true)
            .send()
            .await
            .expect("ssm:PutParameter (scripts/moto/server.py's stand-in)");
    }

    /// The cluster's instances in any of `states` (pending, running, ...).
    pub async fn instances(&self, states: &[&str]) -> Vec<ec2::Instance> {
        let mut out = Vec::new();
        let mut token = None;
        loop {
            let page = self
                .clients
                .ec2
                .describe_instances()
                .filters(
                    ec2::Filter::builder()
                        .name("tag-key")
                        .values(format!("kubernetes.io/cluster/{}", self.name))
                        .build(),
                )
                .filters(
                    ec2::Filter::builder()
                        .name("instance-state-name")
                        .set_values(Some(states.iter().map(|s| s.to_string()).collect()))
                        .build(),
                )
                .set_next_token(token)
                .send()
                .await
                .expect("DescribeInstances");
            for r in page.reservations() {
                out.extend(r.instances().iter().cloned());
            }
            token = page.next_token().map(str::to_string);
            if token.is_none() {
                break;
            }
        }
        out
    }

    /// The cluster's pending and running instances.
    pub async fn live_instances(&self) -> Vec<ec2::Instance> {
        self.instances(&["pending", "running"]).await
    }

    /// The cluster's launch templates (tagged `kubernetes.io/cluster/<name>`).
    pub async fn launch_templates(&self) -> Vec<ec2::LaunchTemplate> {
        self.clients
            .ec2
            .describe_launch_templates()
            .filters(
                ec2::Filter::builder()
                    .name("tag-key")
                    .values(format!("kubernetes.io/cluster/{}", self.name))
                    .build(),
            )
            .send()
            .await
            .expect("DescribeLaunchTemplates")
            .launch_templates()
            .to_vec()
    }

    /// The instance profiles the controller manages for this cluster (IAM path
    /// `/karpenter/<region>/<cluster>/`).
    pub async fn instance_profiles(&self) -> Vec<String> {
        // moto ignores PathPrefix: the path is checked here.
        let prefix = format!("/karpenter/{REGION}/{}/", self.name);
        self.clients
            .iam
            .list_instance_profiles()
            .path_prefix(&prefix)
            .send()
            .await
            .expect("ListInstanceProfiles")
            .instance_profiles()
            .iter()
            .filter(|p| p.path().starts_with(&prefix))
            .map(|p| p.instance_profile_name().to_string())
            .collect()
    }

    /// Sends `body` to the interruption queue.
    pub async fn send_message(&self, body: &str) {
        self.clients
            .sqs
            .send_message()
            .queue_url(&self.queue_url)
            .message_body(body)
            .send()
            .await
            .expect("sqs:SendMessage");
    }

    /// Messages in the queue, visible or not.
    pub async fn queued_messages(&self) -> usize {
        use karpenter_aws::sdk::aws_sdk_sqs::types::QueueAttributeName as A;
        let out = self
            .clients
            .sqs
            .get_queue_attributes()
            .queue_url(&self.queue_url)
            .attribute_names(A::ApproximateNumberOfMessages)
            .attribute_names(A::ApproximateNumberOfMessagesNotVisible)
            .send()
            .await
            .expect("sqs:GetQueueAttributes");
        out.attributes()
            .map(|a| {
                a.values()
                    .filter_map(|v| v.parse::<usize>().ok())
                    .sum::<usize>()
            })
            .unwrap_or(0)
    }

    /// The EC2NodeClass of the install guide for this cluster: AL2023's latest AMI, the
    /// subnets and security groups tagged `karpenter.sh/discovery=<cluster>`, the node role.
    pub fn node_class(&self, name: &str) -> Value {
        json!({
            "apiVersion": "karpenter.k8s.aws/v1",
            "kind": "EC2NodeClass",
            "metadata": {"name": name},
            "spec": {
                "role": self.role,
                "amiSelectorTerms": [{"alias": "al2023@latest"}],
                "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": self.name}}],
                "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": self.name}}]
            }
        })
    }
}

/// The value of an instance's tag.
pub fn instance_tag<'a>(i: &'a ec2::Instance, key: &str) -> Option<&'a str> {
    i.tags()
        .iter()
        .find(|t| t.key() == Some(key))
        .and_then(|t| t.value())
}

/// Applies the chart's ClusterRole, Role and their bindings, for the controller's
/// ServiceAccount (namespace `karpenter`, where the control plane's token is), and deletes every
/// other binding of that ServiceAccount (deploy/'s, the fake provider's): the controller runs
/// under the chart's RBAC only. The fake-mode tests apply deploy/'s again when they start.
pub async fn install_chart_rbac(admin: &Client, chart: &[Value]) {
    let mut names = (Vec::new(), Vec::new());
    for doc in chart {
        let kind = doc["kind"].as_str().unwrap_or_default();
        if !matches!(
            kind,
            "ClusterRole" | "Role" | "ClusterRoleBinding" | "RoleBinding"
        ) {
            continue;
        }
        let mut doc = doc.clone();
        if doc["metadata"].get("namespace").is_some() {
            doc["metadata"]["namespace"] = json!(CONTROLLER_NAMESPACE);
        }
        if let Some(subjects) = doc.get_mut("subjects").and_then(Value::as_array_mut) {
            for s in subjects {
                if s["kind"] == "ServiceAccount" {
                    assert_eq!(s["name"], "karpenter", "the chart's ServiceAccount");
                    s["namespace"] = json!(CONTROLLER_NAMESPACE);
                }
            }
        }
        let name = doc["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        match kind {
            "ClusterRoleBinding" => names.0.push(name),
            "RoleBinding" => names.1.push(name),
            _ => {}
        }
        let _: DynamicObject = apply_value(admin, doc).await;
    }
    assert!(
        !names.0.is_empty() && !names.1.is_empty(),
        "the rendered chart has a ClusterRoleBinding and a RoleBinding"
    );
    let is_controller = |subjects: Option<&Vec<k8s_openapi::api::rbac::v1::Subject>>| {
        subjects.into_iter().flatten().any(|s| {
            s.kind == "ServiceAccount"
                && s.name == "karpenter"
                && s.namespace.as_deref() == Some(CONTROLLER_NAMESPACE)
        })
    };
    let crbs: Api<ClusterRoleBinding> = Api::all(admin.clone());
    for b in crbs.list(&ListParams::default()).await.expect("list").items {
        let name = b.metadata.name.clone().unwrap_or_default();
        if is_controller(b.subjects.as_ref()) && !names.0.contains(&name) {
            crbs.delete(&name, &DeleteParams::default())
                .await
                .expect("delete a ClusterRoleBinding");
        }
    }
    let rbs: Api<RoleBinding> = Api::all(admin.clone());
    for b in rbs.list(&ListParams::default()).await.expect("list").items {
        let name = b.metadata.name.clone().unwrap_or_default();
        let ns = b.metadata.namespace.clone().unwrap_or_default();
        if is_controller(b.subjects.as_ref()) && !names.1.contains(&name) {
            Api::<RoleBinding>::namespaced(admin.clone(), &ns)
                .delete(&name, &DeleteParams::default())
                .await
                .expect("delete a RoleBinding");
        }
    }
}

/// The controller container's environment of the chart's Deployment, as the pod would get
/// it, with the install notes' sample cluster name and queue replaced by the test's; plus
/// what IRSA and the region give on EKS (here moto's credentials and endpoint).
pub fn controller_env(chart: &[Value], world: &World, identity: &str) -> Vec<(String, String)> {
    let deployment = chart
        .iter()
        .find(|d| d["kind"] == "Deployment")
        .expect("the chart renders a Deployment");
    let container = &deployment["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(container["args"], json!(["controller"]), "the chart's args");
    let mut out = Vec::new();
    for e in container["env"].as_array().expect("the container's env") {
        let name = e["name"].as_str().expect("an env name").to_string();
        let value = if let Some(v) = e["value"].as_str() {
            match name.as_str() {
                "CLUSTER_NAME" => {
                    assert_eq!(v, "my-cluster", "the install notes' cluster name");
                    world.name.clone()
                }
                "INTERRUPTION_QUEUE" => {
                    assert_eq!(v, "my-cluster", "the install notes' queue");
                    world.queue.clone()
                }
                "CLUSTER_ENDPOINT" => {
                    assert_eq!(v, "", "the install notes give no endpoint");
                    v.to_string()
                }
                _ => v.to_string(),
            }
        } else {
            match e["valueFrom"]["fieldRef"]["fieldPath"].as_str() {
                Some("metadata.namespace") => CONTROLLER_NAMESPACE.to_string(),
                Some("metadata.name") => identity.to_string(),
                other => panic!("the chart's env {name}: no value for {other:?}"),
            }
        };
        out.push((name, value));
    }
    let aws = [
        ("AWS_REGION", REGION),
        ("AWS_ENDPOINT_URL", world.endpoint.as_str()),
        ("AWS_ACCESS_KEY_ID", "testing"),
        ("AWS_SECRET_ACCESS_KEY", "testing"),
    ];
    out.extend(aws.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    out
}

/// Starts the chart's two replicas (`karpenter controller` with the Deployment's environment)
/// with the harness's flags and `extra`.
pub fn start_replicas(
    env: &Env,
    chart: &[Value],
    world: &World,
    extra: &[&str],
) -> Vec<Controller> {
    let deployment = chart
        .iter()
        .find(|d| d["kind"] == "Deployment")
        .expect("the chart renders a Deployment");
    let replicas = deployment["spec"]["replicas"].as_u64().unwrap_or(1);
    assert_eq!(replicas, 2, "the chart runs two replicas");
    (0..replicas)
        .map(|i| {
            let identity = format!("{}-{i}", world.name);
            let vars = controller_env(chart, world, &identity);
            Controller::start_command_env(
                env,
                &karpenter_bin(),
                &["controller"],
                &identity,
                extra,
                &vars,
            )
        })
        .collect()
}

/// The identity holding the leader Lease.
pub async fn leader(admin: &Client) -> Option<String> {
    Api::<Lease>::namespaced(admin.clone(), CONTROLLER_NAMESPACE)
        .get("karpenter-leader-election")
        .await
        .ok()?
        .spec?
        .holder_identity
}

/// The lines of a controller log that show a 403 from the API server.
pub fn forbidden_lines(log: &str) -> Vec<String> {
    log.lines()
        .filter(|l| {
            let lower = l.to_ascii_lowercase();
            lower.contains("forbidden") || lower.contains("code: 403") || l.contains("\"code\":403")
        })
        .map(str::to_string)
        .collect()
}

/// Fails when either replica's log shows a 403.
pub fn assert_no_403(controllers: &[Controller]) {
    for c in controllers {
        let bad = forbidden_lines(&c.log_text());
        assert!(
            bad.is_empty(),
            "{} ({}): {} lines with a 403:\n{}",
            c.identity,
            c.log.display(),
            bad.len(),
            bad.iter().take(5).cloned().collect::<Vec<_>>().join("\n")
        );
    }
}

/// The sum of a counter over the replicas' `/metrics`, for the series whose labels include
/// every `key="value"` of `labels`.
pub async fn metric_sum(controllers: &[Controller], name: &str, labels: &[&str]) -> f64 {
    let mut total = 0.0;
    for c in controllers {
        let Some((200, body)) = c.get(c.metrics_port, "/metrics").await else {
            continue;
        };
        for line in body.lines() {
            let Some(rest) = line.strip_prefix(name) else {
                continue;
            };
            if !(rest.starts_with('{') || rest.starts_with(' ')) {
                continue;
            }
            if !labels.iter().all(|l| rest.contains(l)) {
                continue;
            }
            total += rest
                .rsplit(' ')
                .next()
                .and_then(|v| v.parse::<f64>().ok())
                .unwrap_or(0.0);
        }
    }
    total
}

/// Deletes every EC2NodeClass (the fake-mode cleanup leaves them).
pub async fn delete_node_classes(admin: &Client) {
    let ar = kube::api::ApiResource::from_gvk_with_plural(
        &kube::api::GroupVersionKind::gvk("karpenter.k8s.aws", "v1", "EC2NodeClass"),
        "ec2nodeclasses",
    );
    let api: Api<DynamicObject> = Api::all_with(admin.clone(), &ar);
    let _ = api
        .delete_collection(&DeleteParams::default(), &ListParams::default())
        .await;
}

//! The moto server and a per-test cluster in it (VPC, subnets, security group, AMI, role).

use std::collections::BTreeMap;
use std::io::BufRead;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, OnceLock, RwLock};

use aws_credential_types::Credentials;
use aws_sdk_ec2::types as ec2;
use aws_smithy_runtime_api::client::http::SharedHttpClient;
use karpenter_aws::nodeclass::EC2NodeClass;
use karpenter_aws::sdk::AwsClients;
use karpenter_aws::sdk::nodeclass::NodeClassResolver;
use karpenter_aws::sdk::provider::{AwsCloudProvider, NodeClassStore, ProviderOptions};

/// The region of the tests (moto has offerings for it; the embedded prices are for it).
pub const REGION: &str = "us-east-1";

struct Server {
    endpoint: String,
    _child: Option<Child>,
}

static SERVER: OnceLock<Option<Mutex<Server>>> = OnceLock::new();

fn start() -> Option<Mutex<Server>> {
    if let Ok(ep) = std::env::var("KARPENTER_MOTO_ENDPOINT")
        && !ep.is_empty()
    {
        return Some(Mutex::new(Server {
            endpoint: ep,
            _child: None,
        }));
    }
    let python = std::env::var("KARPENTER_MOTO_PYTHON").unwrap_or_else(|_| {
        let home = std::env::var("HOME").unwrap_or_default();
        format!("{home}/.cache/karpenter-rs/moto/bin/python")
    });
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/moto/server.py");
    let spawned = Command::new(&python)
        .arg(script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn();
    let mut child = match spawned {
        Ok(c) => c,
        Err(e) => {
            let msg = format!(
                "moto is not available ({python}: {e}); run scripts/moto/install.sh or set KARPENTER_MOTO_ENDPOINT"
            );
            eprintln!("{msg}");
            return None;
        }
    };
    let stdout = child.stdout.take()?;
    let mut line = String::new();
    std::io::BufReader::new(stdout).read_line(&mut line).ok()?;
    let endpoint = line.trim().to_string();
    assert!(
        endpoint.starts_with("http://127.0.0.1:"),
        "moto did not start: {endpoint:?}"
    );
    Some(Mutex::new(Server {
        endpoint,
        _child: Some(child),
    }))
}

/// The endpoint of the moto server, or `None` when moto is not available.
pub fn endpoint() -> Option<String> {
    SERVER
        .get_or_init(start)
        .as_ref()
        .map(|s| s.lock().unwrap().endpoint.clone())
}

/// SDK clients on the moto server, optionally through `http`. The tests that take them are
/// `#[ignore]`d, so a plain `cargo test` reports them as ignored; run with `--ignored` (as
/// scripts/test does) and without moto, they fail: none passes without its real component.
pub async fn clients(http: Option<SharedHttpClient>) -> AwsClients {
    let ep = endpoint().expect(
        "moto is not available: run scripts/moto/install.sh, or set KARPENTER_MOTO_ENDPOINT",
    );
    let creds = Credentials::new("testing", "testing", None, None, "moto");
    AwsClients::with_endpoint(&ep, REGION, creds, http)
        .await
        .unwrap()
}

/// One cluster's AWS resources in moto.
pub struct Cluster {
    pub name: String,
    pub clients: AwsClients,
    pub vpc: String,
    pub subnets: Vec<(String, String)>,
    pub security_group: String,
    pub ami: String,
    pub role: String,
}

/// A unique cluster name for a test.
pub fn cluster_name(test: &str) -> String {
    let n = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    format!("{test}-{n}")
}

impl Cluster {
    /// A VPC with one subnet in each of us-east-1a and us-east-1b, a security group, all
    /// tagged `karpenter.sh/discovery=<name>`, an x86_64 AMI from moto's preloaded images, and
    /// an IAM role for the nodes.
    pub async fn create(name: &str, clients: AwsClients) -> Cluster {
        let e = &clients.ec2;
        let discovery = ec2::Tag::builder()
            .key("karpenter.sh/discovery")
            .value(name)
            .build();
        let vpc = e
            .create_vpc()
            .cidr_block("10.0.0.0/16")
            .send()
            .await
            .unwrap()
            .vpc()
            .unwrap()
            .vpc_id()
            .unwrap()
            .to_string();
        let mut subnets = Vec::new();
        for (i, zone) in ["us-east-1a", "us-east-1b"].into_iter().enumerate() {
            let s = e
                .create_subnet()
                .vpc_id(&vpc)
                .cidr_block(format!("10.0.{i}.0/24"))
                .availability_zone(zone)
                .send()
                .await
                .unwrap();
            let id = s.subnet().unwrap().subnet_id().unwrap().to_string();
            subnets.push((id, zone.to_string()));
        }
        let sg = e
            .create_security_group()
            .group_name(format!("{name}-nodes"))
            .description("nodes")
            .vpc_id(&vpc)
            .send()
            .await
            .unwrap()
            .group_id()
            .unwrap()
            .to_string();
        let mut resources: Vec<String> = subnets.iter().map(|(id, _)| id.clone()).collect();
        resources.push(sg.clone());
        e.create_tags()
            .set_resources(Some(resources))
            .tags(discovery)
            .send()
            .await
            .unwrap();
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
            .unwrap();
        let mut ids: Vec<String> = images
            .images()
            .iter()
            .filter(|i| i.architecture() == Some(&ec2::ArchitectureValues::X8664))
            .filter_map(|i| i.image_id().map(str::to_string))
            .collect();
        ids.sort();
        let ami = ids.first().expect("moto preloads amazon images").clone();
        let role = format!("{name}-node");
        clients
            .iam
            .create_role()
            .role_name(&role)
            .assume_role_policy_document(
                r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"ec2.amazonaws.com"},"Action":"sts:AssumeRole"}]}"#,
            )
            .send()
            .await
            .unwrap();
        Cluster {
            name: name.to_string(),
            clients,
            vpc,
            subnets,
            security_group: sg,
            ami,
            role,
        }
    }

    /// An EC2NodeClass selecting this cluster's subnets and security group by tag, its AMI by
    /// id (AL2023 user data) and its role.
    pub fn node_class(&self, class_name: &str) -> EC2NodeClass {
        let v = serde_json::json!({
            "apiVersion": "karpenter.k8s.aws/v1",
            "kind": "EC2NodeClass",
            "metadata": {"name": class_name, "uid": format!("uid-{}", self.name), "generation": 1},
            "spec": {
                "amiFamily": "AL2023",
                "amiSelectorTerms": [{"id": self.ami}],
                "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": self.name}}],
                "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": self.name}}],
                "role": self.role,
                "tags": {"team": "platform"}
            }
        });
        let c = EC2NodeClass::from_json_value(v).unwrap();
        c.validate().unwrap();
        c
    }

    /// The class resolved through the APIs (status written).
    pub async fn resolved(&self, class: EC2NodeClass) -> EC2NodeClass {
        let resolver = NodeClassResolver::new(self.clients.clone(), &self.name, "1.33");
        let r = resolver
            .reconcile(&class, jiff::Timestamp::now())
            .await
            .unwrap();
        let mut class = class;
        class.status = r.status;
        class
    }

    /// A provider for this cluster launching from `classes`.
    pub fn provider(&self, classes: Vec<EC2NodeClass>) -> Arc<AwsCloudProvider> {
        let store: NodeClassStore = Arc::new(RwLock::new(
            classes
                .into_iter()
                .map(|c| (c.name().to_string(), c))
                .collect::<BTreeMap<_, _>>(),
        ));
        let mut options = ProviderOptions::new(&self.name, "https://api.example.test");
        // A wider batching window than upstream's 35 ms: a debug build on a loaded machine
        // may take longer than that between two launches of one round.
        options.fleet_batch_idle = std::time::Duration::from_millis(250);
        options.instance_batch_idle = std::time::Duration::from_millis(250);
        Arc::new(AwsCloudProvider::new(self.clients.clone(), options, store).unwrap())
    }
}

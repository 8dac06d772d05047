//! AwsCloudProvider against moto: node-class resolution, instance types, create, get, list,
//! drift, delete, insufficient capacity and batching.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use karpenter_aws::nodeclass::reconcile::READY;
use karpenter_core::api::{
    ConditionStatus, NodeClaim, NodeClaimSpec, NodeClassReference, NodePool,
};
use karpenter_core::cloud::CloudProvider;
use karpenter_core::requirements::{NodeSelectorRequirement, Operator};

use super::env::{Cluster, clients, cluster_name};
use super::inject::{self, Faults};

fn claim(name: &str, class: &str, types: &[&str]) -> NodeClaim {
    let mut spec = NodeClaimSpec::new(NodeClassReference::new(
        "karpenter.k8s.aws",
        "EC2NodeClass",
        class,
    ));
    spec.requirements = Some(vec![
        NodeSelectorRequirement::new(
            "node.kubernetes.io/instance-type",
            Operator::In,
            types.iter().copied(),
        ),
        NodeSelectorRequirement::new("karpenter.sh/capacity-type", Operator::In, ["on-demand"]),
    ]);
    let mut c = NodeClaim::new(name, spec);
    c.metadata
        .labels
        .insert("karpenter.sh/nodepool".into(), "default".into());
    c
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs moto (scripts/moto/install.sh): scripts/test runs these with --ignored"]
async fn node_class_resolves_through_the_apis() {
    let clients = clients(None).await;
    let cluster = Cluster::create(&cluster_name("resolve"), clients).await;
    let class = cluster.resolved(cluster.node_class("default")).await;
    let s = &class.status;
    let ready = s.condition(READY).expect("Ready condition");
    assert_eq!(ready.status, ConditionStatus::True, "{:?}", s.conditions);
    let mut subnet_ids: Vec<&str> = s.subnets.iter().map(|x| x.id.as_str()).collect();
    subnet_ids.sort();
    let mut want: Vec<&str> = cluster.subnets.iter().map(|(id, _)| id.as_str()).collect();
    want.sort();
    assert_eq!(subnet_ids, want);
    assert_eq!(s.security_groups.len(), 1);
    assert_eq!(s.security_groups[0].id, cluster.security_group);
    assert_eq!(s.amis.len(), 1);
    assert_eq!(s.amis[0].id, cluster.ami);
    let profile = s.instance_profile.clone().expect("instance profile");
    assert!(
        profile.starts_with(&format!("{}_", cluster.name)),
        "{profile}"
    );
    // The profile exists in IAM with the role, under the cluster's path.
    let p = cluster
        .clients
        .iam
        .get_instance_profile()
        .instance_profile_name(&profile)
        .send()
        .await
        .unwrap();
    let p = p.instance_profile().unwrap();
    assert_eq!(p.roles()[0].role_name(), cluster.role);
    assert!(
        p.path()
            .starts_with(&format!("/karpenter/us-east-1/{}/", cluster.name))
    );
    // Resolving again keeps the profile; deleting the class's profile removes it.
    let again = cluster.resolved(class.clone()).await;
    assert_eq!(
        again.status.instance_profile.as_deref(),
        Some(profile.as_str())
    );
    let resolver = karpenter_aws::sdk::nodeclass::NodeClassResolver::new(
        cluster.clients.clone(),
        &cluster.name,
        "1.33",
    );
    resolver.delete_instance_profile(&again).await.unwrap();
    let gone = cluster
        .clients
        .iam
        .get_instance_profile()
        .instance_profile_name(&profile)
        .send()
        .await;
    assert!(gone.is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs moto (scripts/moto/install.sh): scripts/test runs these with --ignored"]
async fn instance_types_come_from_describe_instance_types() {
    let clients = clients(None).await;
    let cluster = Cluster::create(&cluster_name("types"), clients).await;
    let class = cluster.resolved(cluster.node_class("default")).await;
    let provider = cluster.provider(vec![class.clone()]);
    let types = provider.instance_types_for_class(&class).await.unwrap();
    assert!(types.len() > 500, "{} types", types.len());
    let m5 = types.iter().find(|t| t.name() == "m5.large").unwrap();
    // The same conversion as the embedded catalog: 8192 MiB − 7.5% = 7577Mi, 29 pods.
    assert_eq!(m5.capacity().get_or_zero("memory").to_string(), "7577Mi");
    assert_eq!(m5.capacity().get_or_zero("pods").to_string(), "29");
    // Offerings only in the zones of the class's subnets.
    let zones: std::collections::BTreeSet<&str> = m5.offerings.iter().map(|o| o.zone()).collect();
    assert_eq!(zones, ["us-east-1a", "us-east-1b"].into_iter().collect());
    // The zone ids of those zones (from the subnets) are the type's zone-id requirement.
    let ids: std::collections::BTreeSet<String> = class
        .status
        .subnets
        .iter()
        .filter_map(|s| s.zone_id.clone())
        .collect();
    assert_eq!(ids.len(), 2);
    let req = m5.requirements().get("topology.k8s.aws/zone-id").unwrap();
    assert!(ids.iter().all(|id| req.has(id)), "{req:?}");
    // On-demand at the snapshot price, spot at moto's spot price history.
    let od = m5
        .offerings
        .iter()
        .find(|o| o.capacity_type() == "on-demand")
        .unwrap();
    assert!((od.price - 0.096).abs() < 1e-9, "{}", od.price);
    let spot = m5
        .offerings
        .iter()
        .find(|o| o.capacity_type() == "spot")
        .unwrap();
    assert!(spot.price < 0.001, "{}", spot.price);
    // The NodePool path finds the same list.
    let pool: NodePool = serde_json::from_value(serde_json::json!({
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": "default"},
        "spec": {"template": {"spec": {
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
            "requirements": []
        }}}
    }))
    .unwrap();
    assert_eq!(
        provider.instance_types(&pool).await.unwrap().len(),
        types.len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs moto (scripts/moto/install.sh): scripts/test runs these with --ignored"]
async fn create_get_list_drift_delete() {
    let clients = clients(None).await;
    let cluster = Cluster::create(&cluster_name("lifecycle"), clients).await;
    let class = cluster.resolved(cluster.node_class("default")).await;
    let provider = cluster.provider(vec![class.clone()]);
    let launched = provider
        .create(&claim("a", "default", &["m5.large", "m5.xlarge"]))
        .await
        .unwrap();
    let pid = launched.status.provider_id.clone().unwrap();
    assert!(pid.starts_with("aws:///us-east-1"), "{pid}");
    let labels = &launched.metadata.labels;
    assert_eq!(labels["node.kubernetes.io/instance-type"], "m5.large");
    assert_eq!(labels["karpenter.sh/capacity-type"], "on-demand");
    assert_eq!(labels["karpenter.k8s.aws/instance-family"], "m5");
    // topology.k8s.aws/zone-id: the id of the launched zone, from the class's subnets.
    let zone = &labels["topology.kubernetes.io/zone"];
    let subnet = class
        .status
        .subnets
        .iter()
        .find(|s| &s.zone == zone)
        .unwrap();
    let zone_id = subnet.zone_id.clone().expect("moto reports zone ids");
    assert_eq!(labels["topology.k8s.aws/zone-id"], zone_id);
    assert_eq!(
        launched.status.image_id.as_deref(),
        Some(cluster.ami.as_str())
    );
    assert_eq!(
        launched.status.capacity.get_or_zero("memory").to_string(),
        "7577Mi"
    );
    assert_eq!(
        launched.metadata.annotations["karpenter.k8s.aws/ec2nodeclass-hash"],
        class.static_hash()
    );
    assert_eq!(
        provider
            .counters()
            .create_launch_template
            .load(Ordering::Relaxed),
        1
    );

    // The instance carries the launch tags.
    let id = karpenter_aws::launch::parse_provider_id(&pid)
        .unwrap()
        .to_string();
    let d = cluster
        .clients
        .ec2
        .describe_instances()
        .instance_ids(&id)
        .send()
        .await
        .unwrap();
    let inst = &d.reservations()[0].instances()[0];
    let tags = karpenter_aws::sdk::convert::tags(inst.tags());
    assert_eq!(tags["karpenter.sh/nodepool"], "default");
    assert_eq!(tags["eks:eks-cluster-name"], cluster.name);
    assert_eq!(
        tags[&format!("kubernetes.io/cluster/{}", cluster.name)],
        "owned"
    );
    assert_eq!(tags["karpenter.k8s.aws/ec2nodeclass"], "default");
    assert_eq!(tags["team"], "platform");

    let got = provider.get(&pid).await.unwrap();
    assert_eq!(got.status.provider_id.as_deref(), Some(pid.as_str()));
    assert_eq!(
        got.metadata.labels["node.kubernetes.io/instance-type"],
        "m5.large"
    );
    assert_eq!(got.metadata.labels["karpenter.sh/nodepool"], "default");
    assert_eq!(
        got.metadata.labels["karpenter.k8s.aws/instance-family"],
        "m5"
    );
    assert_eq!(got.metadata.labels["topology.k8s.aws/zone-id"], zone_id);

    // A second launch of the same shape reuses the launch template.
    let b = provider
        .create(&claim("b", "default", &["m5.large"]))
        .await
        .unwrap();
    assert_eq!(
        provider
            .counters()
            .create_launch_template
            .load(Ordering::Relaxed),
        1
    );
    let listed = provider.list().await.unwrap();
    let mut ids: Vec<String> = listed
        .iter()
        .filter_map(|c| c.status.provider_id.clone())
        .collect();
    ids.sort();
    let mut want = vec![pid.clone(), b.status.provider_id.clone().unwrap()];
    want.sort();
    assert_eq!(ids, want);

    // Drift. The instance runs in the launch template's security groups, the class's
    // (scripts/moto/server.py gives a fleet instance its template's network-interface groups,
    // as EC2 does): no drift; a status listing other groups → SecurityGroupDrift.
    let mut actual: Vec<String> = inst
        .network_interfaces()
        .iter()
        .flat_map(|n| n.groups())
        .chain(inst.security_groups())
        .filter_map(|g| g.group_id().map(str::to_string))
        .collect();
    actual.sort();
    actual.dedup();
    assert_eq!(actual, std::slice::from_ref(&cluster.security_group));
    assert_eq!(provider.is_drifted(&launched).await.unwrap(), None);
    let mut other = class.clone();
    other.status.security_groups = vec![karpenter_aws::nodeclass::StatusSecurityGroup {
        id: "sg-0123456789abcdef0".into(),
        name: None,
    }];
    provider
        .node_classes()
        .write()
        .unwrap()
        .insert("default".into(), other);
    assert_eq!(
        provider.is_drifted(&launched).await.unwrap().as_deref(),
        Some("SecurityGroupDrift")
    );
    // A changed static field → NodeClassDrift; an AMI the status no longer lists → AMIDrift.
    provider
        .node_classes()
        .write()
        .unwrap()
        .insert("default".into(), class.clone());
    assert_eq!(provider.is_drifted(&launched).await.unwrap(), None);
    let mut changed = class.clone();
    changed.spec.tags.insert("team".into(), "data".into());
    provider
        .node_classes()
        .write()
        .unwrap()
        .insert("default".into(), changed);
    assert_eq!(
        provider.is_drifted(&launched).await.unwrap().as_deref(),
        Some("NodeClassDrift")
    );
    let mut new_ami = class.clone();
    new_ami.status.amis[0].id = "ami-0123456789abcdef0".into();
    provider
        .node_classes()
        .write()
        .unwrap()
        .insert("default".into(), new_ami);
    assert_eq!(
        provider.is_drifted(&launched).await.unwrap().as_deref(),
        Some("AMIDrift")
    );
    provider
        .node_classes()
        .write()
        .unwrap()
        .insert("default".into(), class.clone());

    // Delete, then the instance is gone: Get says not found, delete again says not found.
    provider.delete(&launched).await.unwrap();
    assert!(provider.get(&pid).await.unwrap_err().is_not_found());
    assert!(provider.delete(&launched).await.unwrap_err().is_not_found());
    assert_eq!(provider.list().await.unwrap().len(), 1);
    assert!(
        provider
            .get("aws:///us-east-1a/i-00000000000000000")
            .await
            .unwrap_err()
            .is_not_found()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs moto (scripts/moto/install.sh): scripts/test runs these with --ignored"]
async fn insufficient_capacity_marks_the_offering_and_the_next_round_picks_another() {
    let faults = Arc::new(Faults::default());
    let clients = clients(Some(inject::client(Arc::clone(&faults)))).await;
    let cluster = Cluster::create(&cluster_name("ice"), clients).await;
    let class = cluster.resolved(cluster.node_class("default")).await;
    let provider = cluster.provider(vec![class.clone()]);
    faults.exhausted.lock().unwrap().insert("m5.large".into());

    let c = claim("a", "default", &["m5.large", "m5.xlarge"]);
    let err = provider.create(&c).await.unwrap_err();
    assert!(
        matches!(
            err,
            karpenter_core::cloud::CloudProviderError::InsufficientCapacity { .. }
        ),
        "{err}"
    );
    if let karpenter_core::cloud::CloudProviderError::InsufficientCapacity { offerings, .. } = &err
    {
        let mut got: Vec<String> = offerings.iter().map(|o| o.to_string()).collect();
        got.sort();
        assert_eq!(
            got,
            [
                "m5.large/us-east-1a/on-demand",
                "m5.large/us-east-1b/on-demand"
            ]
        );
    }
    assert_eq!(*faults.injected.lock().unwrap(), 1);
    assert!(provider.is_unavailable("on-demand", "m5.large", "us-east-1a"));
    assert!(!provider.is_unavailable("on-demand", "m5.xlarge", "us-east-1a"));
    // The instance types show it: m5.large on-demand unavailable, spot untouched.
    let types = provider.instance_types_for_class(&class).await.unwrap();
    let m5 = types.iter().find(|t| t.name() == "m5.large").unwrap();
    assert!(
        m5.offerings
            .iter()
            .filter(|o| o.capacity_type() == "on-demand")
            .all(|o| !o.available)
    );
    assert!(
        m5.offerings
            .iter()
            .filter(|o| o.capacity_type() == "spot")
            .all(|o| o.available)
    );

    // A claim pinned to a zone id launches only in that id's zone.
    let b = class
        .status
        .subnets
        .iter()
        .find(|s| s.zone == "us-east-1b")
        .unwrap();
    let b_id = b.zone_id.clone().unwrap();
    let mut pinned = claim("z", "default", &["m5.xlarge"]);
    pinned
        .spec
        .requirements
        .as_mut()
        .unwrap()
        .push(NodeSelectorRequirement::new(
            "topology.k8s.aws/zone-id",
            Operator::In,
            [b_id.as_str()],
        ));
    let z = provider.create(&pinned).await.unwrap();
    assert_eq!(
        z.metadata.labels["topology.kubernetes.io/zone"],
        "us-east-1b"
    );
    assert_eq!(z.metadata.labels["topology.k8s.aws/zone-id"], b_id);

    // The next round: the exhausted type is left out of the request, moto launches the other.
    let launched = provider.create(&c).await.unwrap();
    assert_eq!(
        launched.metadata.labels["node.kubernetes.io/instance-type"],
        "m5.xlarge"
    );
    assert_eq!(*faults.injected.lock().unwrap(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs moto (scripts/moto/install.sh): scripts/test runs these with --ignored"]
async fn identical_launches_share_one_create_fleet() {
    let clients = clients(None).await;
    let cluster = Cluster::create(&cluster_name("batch"), clients).await;
    let class = cluster.resolved(cluster.node_class("default")).await;
    let provider = cluster.provider(vec![class]);
    let _ = &cluster.vpc;
    // Warm the instance types and the launch template so the launches start together.
    provider
        .create(&claim("warm", "default", &["m5.large"]))
        .await
        .unwrap();
    let before = provider.counters().create_fleet.load(Ordering::Relaxed);
    let claims: Vec<NodeClaim> = (0..10)
        .map(|i| claim(&format!("n{i}"), "default", &["m5.large"]))
        .collect();
    let results = futures::future::join_all(claims.iter().map(|c| provider.create(c))).await;
    let mut ids = std::collections::BTreeSet::new();
    for r in results {
        ids.insert(r.unwrap().status.provider_id.unwrap());
    }
    assert_eq!(ids.len(), 10);
    assert_eq!(
        provider.counters().create_fleet.load(Ordering::Relaxed) - before,
        1
    );
    assert_eq!(
        provider
            .counters()
            .create_launch_template
            .load(Ordering::Relaxed),
        1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs moto (scripts/moto/install.sh): scripts/test runs these with --ignored"]
async fn a_class_that_is_not_ready_or_missing_does_not_launch() {
    let clients = clients(None).await;
    let cluster = Cluster::create(&cluster_name("notready"), clients).await;
    let unresolved = cluster.node_class("default");
    let provider = cluster.provider(vec![unresolved]);
    let err = provider
        .create(&claim("a", "default", &["m5.large"]))
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            karpenter_core::cloud::CloudProviderError::NodeClassNotReady { .. }
        ),
        "{err}"
    );
    let err = provider
        .create(&claim("a", "missing", &["m5.large"]))
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            karpenter_core::cloud::CloudProviderError::InsufficientCapacity { .. }
        ),
        "{err}"
    );
}

/// One provisioning round of 100 NodeClaims in four launch shapes: one CreateFleet per shape,
/// one launch template, no DescribeInstances on the launch path; then Get of all 100 at once is
/// one DescribeInstances, and deleting all 100 at once is one DescribeInstances and one
/// TerminateInstances. Prints the wall times (the numbers recorded in docs/performance.md; not
/// asserted).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs moto (scripts/moto/install.sh): scripts/test runs these with --ignored"]
async fn a_round_of_100_claims_makes_one_create_fleet_per_shape() {
    let clients = clients(None).await;
    let cluster = Cluster::create(&cluster_name("round"), clients).await;
    let class = cluster.resolved(cluster.node_class("default")).await;
    let provider = cluster.provider(vec![class.clone()]);
    // Instance types are described once per provider (the warm-up a running controller has
    // done long before a round).
    provider.instance_types_for_class(&class).await.unwrap();
    let shapes: [&[&str]; 4] = [
        &["m5.large", "m5a.large"],
        &["c5.xlarge", "c5a.xlarge"],
        &["r5.large"],
        &["m5.2xlarge", "m6i.2xlarge"],
    ];
    let claims: Vec<NodeClaim> = (0..100)
        .map(|i| claim(&format!("c{i}"), "default", shapes[i % 4]))
        .collect();
    let started = std::time::Instant::now();
    let results = futures::future::join_all(claims.iter().map(|c| provider.create(c))).await;
    let wall = started.elapsed();
    let launched: Vec<NodeClaim> = results.into_iter().map(Result::unwrap).collect();
    let ids: std::collections::BTreeSet<String> = launched
        .iter()
        .map(|c| c.status.provider_id.clone().unwrap())
        .collect();
    assert_eq!(ids.len(), 100);
    let calls = provider.counters().snapshot();
    eprintln!("100 NodeClaims, 4 shapes, against moto: {wall:?}, calls {calls:?}");
    assert_eq!(calls["CreateFleet"], 4);
    assert_eq!(calls["CreateLaunchTemplate"], 1);
    assert_eq!(calls["DescribeInstances"], 0);
    assert_eq!(provider.list().await.unwrap().len(), 100);

    // Get of every claim at once: one batched DescribeInstances.
    let before = provider.counters().snapshot();
    let started = std::time::Instant::now();
    let got = futures::future::join_all(ids.iter().map(|id| provider.get(id))).await;
    let get_wall = started.elapsed();
    for (id, g) in ids.iter().zip(got) {
        assert_eq!(g.unwrap().status.provider_id.as_deref(), Some(id.as_str()));
    }
    let after = provider.counters().snapshot();
    let describes = after["DescribeInstances"] - before["DescribeInstances"];
    eprintln!("Get of 100 NodeClaims: {get_wall:?}, {describes} DescribeInstances");
    assert_eq!(describes, 1);

    // Delete of every claim at once, plus one id EC2 never issued: one DescribeInstances that
    // fails naming the unknown id, one for the other 100, and one TerminateInstances for them.
    let mut unknown = launched[0].clone();
    unknown.status.provider_id = Some("aws:///us-east-1a/i-0123456789abcdef0".into());
    let before = provider.counters().snapshot();
    let started = std::time::Instant::now();
    let deleted = futures::future::join_all(
        launched
            .iter()
            .chain(std::iter::once(&unknown))
            .map(|c| provider.delete(c)),
    )
    .await;
    let delete_wall = started.elapsed();
    let (unknown_result, known) = deleted.split_last().unwrap();
    assert!(unknown_result.as_ref().unwrap_err().is_not_found());
    assert!(known.iter().all(Result::is_ok), "{known:?}");
    let after = provider.counters().snapshot();
    let describes = after["DescribeInstances"] - before["DescribeInstances"];
    let terminates = after["TerminateInstances"] - before["TerminateInstances"];
    eprintln!(
        "Delete of 100 NodeClaims (+1 unknown): {delete_wall:?}, {describes} DescribeInstances, \
         {terminates} TerminateInstances"
    );
    assert_eq!(describes, 2);
    assert_eq!(terminates, 1);
    assert!(provider.list().await.unwrap().is_empty());

    // Deleting all 100 again: the batched DescribeInstances finds none live, so each answers
    // not-found; nothing is terminated.
    let before = provider.counters().snapshot();
    let again = futures::future::join_all(launched.iter().map(|c| provider.delete(c))).await;
    assert!(again.iter().all(|r| r.as_ref().unwrap_err().is_not_found()));
    let after = provider.counters().snapshot();
    assert_eq!(after["DescribeInstances"] - before["DescribeInstances"], 1);
    assert_eq!(after["TerminateInstances"], before["TerminateInstances"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs moto (scripts/moto/install.sh): scripts/test runs these with --ignored"]
async fn dry_run_permission_checks_set_validation_succeeded() {
    let faults = Arc::new(Faults::default());
    let clients = clients(Some(inject::client(Arc::clone(&faults)))).await;
    let cluster = Cluster::create(&cluster_name("dryrun"), clients).await;
    // moto answers every dry run DryRunOperation: validation passes, the class is ready.
    let class = cluster.resolved(cluster.node_class("default")).await;
    let condition = |c: &karpenter_aws::nodeclass::EC2NodeClass, t: &str| {
        c.status.condition(t).cloned().unwrap()
    };
    assert_eq!(
        condition(&class, "ValidationSucceeded").status,
        ConditionStatus::True
    );
    assert_eq!(
        *faults.dry_runs.lock().unwrap(),
        ["CreateFleet", "CreateLaunchTemplate", "RunInstances"]
    );
    // Nothing was created by the checks.
    assert!(
        cluster
            .clients
            .ec2
            .describe_instances()
            .filters(
                aws_sdk_ec2::types::Filter::builder()
                    .name("subnet-id")
                    .values(&cluster.subnets[0].0)
                    .build()
            )
            .send()
            .await
            .unwrap()
            .reservations()
            .is_empty()
    );

    // An unauthorized RunInstances: ValidationSucceeded False with upstream's reason, the
    // class not ready. A new resolver (the result is cached 30 minutes per resolver).
    faults
        .unauthorized
        .lock()
        .unwrap()
        .insert("RunInstances".into());
    faults.dry_runs.lock().unwrap().clear();
    let denied = cluster.resolved(cluster.node_class("default")).await;
    let v = condition(&denied, "ValidationSucceeded");
    assert_eq!(v.status, ConditionStatus::False);
    assert_eq!(v.reason.as_deref(), Some("RunInstancesAuthCheckFailed"));
    assert_eq!(condition(&denied, READY).status, ConditionStatus::False);
    assert_eq!(faults.dry_runs.lock().unwrap().len(), 3);

    // With dry runs disabled (upstream's DISABLE_DRY_RUN) nothing is sent and the condition
    // is True.
    faults.dry_runs.lock().unwrap().clear();
    let resolver = karpenter_aws::sdk::nodeclass::NodeClassResolver::new(
        cluster.clients.clone(),
        &cluster.name,
        "1.33",
    )
    .with_dry_run(false);
    let r = resolver
        .reconcile(&cluster.node_class("default"), jiff::Timestamp::now())
        .await
        .unwrap();
    assert!(faults.dry_runs.lock().unwrap().is_empty());
    let mut c = cluster.node_class("default");
    c.status = r.status;
    assert_eq!(condition(&c, READY).status, ConditionStatus::True);
}

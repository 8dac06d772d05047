//! The instance profile managed for `spec.role` against moto: named from the class and its
//! role, so a reconcile whose status was never written back finds the profile it created.

use karpenter_aws::instanceprofile::ProfileInfo;
use karpenter_aws::sdk::nodeclass::NodeClassResolver;

use super::env::{Cluster, clients, cluster_name};

/// The profiles under the class's IAM path (moto ignores `PathPrefix`: filtered here).
async fn class_profiles(cluster: &Cluster, uid: &str) -> Vec<ProfileInfo> {
    let path = format!("/karpenter/us-east-1/{}/{uid}/", cluster.name);
    let mut out = Vec::new();
    let mut marker = None;
    loop {
        let page = cluster
            .clients
            .iam
            .list_instance_profiles()
            .path_prefix(&path)
            .set_marker(marker)
            .send()
            .await
            .unwrap();
        for p in page.instance_profiles() {
            if p.path() == path {
                out.push(ProfileInfo {
                    name: p.instance_profile_name().to_string(),
                    path: p.path().to_string(),
                    roles: p
                        .roles()
                        .iter()
                        .map(|r| r.role_name().to_string())
                        .collect(),
                });
            }
        }
        marker = page
            .marker()
            .filter(|m| page.is_truncated() && !m.is_empty())
            .map(str::to_string);
        if marker.is_none() {
            break;
        }
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

async fn create_role(cluster: &Cluster, role: &str) {
    cluster
        .clients
        .iam
        .create_role()
        .role_name(role)
        .assume_role_policy_document(
            r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"ec2.amazonaws.com"},"Action":"sts:AssumeRole"}]}"#,
        )
        .send()
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs moto (scripts/moto/install.sh): scripts/test runs these with --ignored"]
async fn reconciling_without_writing_the_status_back_creates_no_second_profile() {
    let clients = clients(None).await;
    let cluster = Cluster::create(&cluster_name("ipname"), clients).await;
    let class = cluster.node_class("default");
    let uid = class.metadata.uid.clone().unwrap();
    let resolver = NodeClassResolver::new(cluster.clients.clone(), &cluster.name, "1.33");
    let now = jiff::Timestamp::now;

    // Three reconciles of the class as stored, its status never written (a 403 on the status
    // subresource), the last by a fresh resolver (a restarted controller): one profile.
    let first = resolver.reconcile(&class, now()).await.unwrap().status;
    let profile = first.instance_profile.clone().expect("a profile");
    for r in [
        &resolver,
        &NodeClassResolver::new(cluster.clients.clone(), &cluster.name, "1.33"),
    ] {
        let again = r.reconcile(&class, now()).await.unwrap().status;
        assert_eq!(again.instance_profile.as_deref(), Some(profile.as_str()));
    }
    let listed = class_profiles(&cluster, &uid).await;
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0].name, profile);
    assert_eq!(listed[0].roles, std::slice::from_ref(&cluster.role));

    // A role change gets a profile of its own (as upstream), also only once, whether or not
    // the status of the first reconcile is written back.
    let role2 = format!("{}-node2", cluster.name);
    create_role(&cluster, &role2).await;
    let mut changed = class.clone();
    changed.spec.role = Some(role2.clone());
    changed.status = first.clone();
    let swapped = resolver.reconcile(&changed, now()).await.unwrap().status;
    let profile2 = swapped.instance_profile.clone().unwrap();
    assert_ne!(profile2, profile);
    let again = resolver.reconcile(&changed, now()).await.unwrap().status;
    assert_eq!(again.instance_profile.as_deref(), Some(profile2.as_str()));
    let mut written = changed.clone();
    written.status = swapped;
    let kept = resolver.reconcile(&written, now()).await.unwrap().status;
    assert_eq!(kept.instance_profile.as_deref(), Some(profile2.as_str()));
    let listed = class_profiles(&cluster, &uid).await;
    assert_eq!(listed.len(), 2, "{listed:?}");
    let p2 = listed.iter().find(|p| p.name == profile2).unwrap();
    assert_eq!(p2.roles, std::slice::from_ref(&role2));
    // The first profile is untouched: nodes launched with it keep their role.
    let p1 = listed.iter().find(|p| p.name == profile).unwrap();
    assert_eq!(p1.roles, std::slice::from_ref(&cluster.role));

    // Back to the first role: its profile is found again, no third one.
    let mut back = written.clone();
    back.spec.role = Some(cluster.role.clone());
    let back_status = resolver.reconcile(&back, now()).await.unwrap().status;
    assert_eq!(
        back_status.instance_profile.as_deref(),
        Some(profile.as_str())
    );
    assert_eq!(class_profiles(&cluster, &uid).await.len(), 2);

    // A profile found by name without its role (a step that failed half-way) gets the role.
    cluster
        .clients
        .iam
        .remove_role_from_instance_profile()
        .instance_profile_name(&profile2)
        .role_name(&role2)
        .send()
        .await
        .unwrap();
    let repaired = resolver.reconcile(&changed, now()).await.unwrap().status;
    assert_eq!(
        repaired.instance_profile.as_deref(),
        Some(profile2.as_str())
    );
    let listed = class_profiles(&cluster, &uid).await;
    assert_eq!(listed.len(), 2, "{listed:?}");
    assert_eq!(
        listed.iter().find(|p| p.name == profile2).unwrap().roles,
        [role2]
    );

    // The finalizer removes every profile of the class, even with no status written.
    resolver.delete_instance_profile(&class).await.unwrap();
    assert!(class_profiles(&cluster, &uid).await.is_empty());
}

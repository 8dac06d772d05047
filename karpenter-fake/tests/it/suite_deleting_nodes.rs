//! `suite_test.go` › Deleting Nodes (upstream `suite_test.go`, `provisioner.go`; upstream
//! `pod.IsReschedulable`): a node is marked for deletion, then a provisioning round runs with no
//! new pods; the pods of the deleting node that are currently reschedulable are the round's pending
//! pods ([`provision_deleting_round`]).

use karpenter_core::labels;
use karpenter_core::model::{IntOrPercent, LabelSelector, Pod, PodDisruptionBudget, Timestamp};
use karpenter_core::resources::names;
use karpenter_fake::harness::Cluster;

use crate::suite_kit::*;

/// Provisions `p` (100M of memory) and returns its node's name; the node is a small one.
fn provision_small(c: &mut Cluster, p: Pod) -> String {
    let k = p.key();
    let round = c.provision(vec![p]);
    let node = node_of(&round, &k);
    assert_eq!(instance_type(&node), "small-instance-type");
    node.name
}

fn memory_pod(name: &str) -> Pod {
    pod(name).memory("100M")
}

/// Upstream's `ExpectEvicted`: the pod gets a deletion timestamp but stays bound.
fn evict(c: &mut Cluster, pod_key: &str, node: &str) {
    let mut p = c
        .pods_on(node)
        .iter()
        .find(|p| p.key() == pod_key)
        .cloned()
        .unwrap_or_else(|| panic!("{pod_key} is not on {node}"));
    p.deletion_timestamp = Some(Timestamp::UNIX_EPOCH);
    assert!(c.bind(p, node));
}

fn instance_types(c: &Cluster) -> Vec<String> {
    c.nodes().map(|n| instance_type(n).to_string()).collect()
}

#[test]
fn should_re_schedule_pods_from_a_deleting_node_when_pods_are_active() {
    let mut c = suite_cluster();
    let n1 = provision_small(&mut c, memory_pod("a"));
    mark_for_deletion(&mut c, &n1);
    provision_deleting_round(&mut c, &[]);
    // A replacement of the same size.
    assert_eq!(c.node_count(), 2);
    assert_eq!(instance_types(&c), ["small-instance-type"; 2]);
}

#[test]
fn should_not_re_schedule_pods_from_a_deleting_node_when_pods_are_not_active() {
    let mut c = suite_cluster();
    let n1 = provision_small(&mut c, memory_pod("a"));
    mark_for_deletion(&mut c, &n1);
    evict(&mut c, &key("a"), &n1);
    provision_deleting_round(&mut c, &[]);
    assert_eq!(c.node_count(), 1);
}

#[test]
fn should_not_re_schedule_pods_from_a_deleting_node_when_pods_are_owned_by_a_daemonset() {
    let mut c = suite_cluster();
    c.add_daemonset(daemonset("ds", pod("ds-template")));
    // A NodeClaim and Node created by hand, with the DaemonSet's pod bound.
    let mut node = existing_node("manual", &[(names::CPU, "32")]);
    node.managed = true;
    for (k, v) in [
        (labels::NODEPOOL, "default"),
        (labels::INSTANCE_TYPE, "small-instance-type"),
        (labels::CAPACITY_TYPE, "on-demand"),
        (labels::ZONE, "test-zone-1a"),
    ] {
        node.labels.insert(k.into(), v.into());
    }
    c.add_node_with_pods(node, vec![memory_pod("ds-pod").owned_by("DaemonSet", "ds")]);
    mark_for_deletion(&mut c, "manual");
    evict(&mut c, &key("ds-pod"), "manual");
    provision_deleting_round(&mut c, &[]);
    assert_eq!(c.node_count(), 1);
}

#[test]
fn should_not_reschedule_pods_from_a_deleting_node_when_pods_are_not_active_and_they_are_owned_by_a_replicaset()
 {
    let mut c = suite_cluster();
    let n1 = provision_small(&mut c, memory_pod("a").owned_by("ReplicaSet", "rs"));
    mark_for_deletion(&mut c, &n1);
    evict(&mut c, &key("a"), &n1);
    provision_deleting_round(&mut c, &[]);
    assert_eq!(c.node_count(), 1);
}

#[test]
fn should_reschedule_pods_from_a_deleting_node_when_pods_are_not_active_and_they_are_owned_by_a_statefulset()
 {
    let mut c = suite_cluster();
    let n1 = provision_small(&mut c, memory_pod("a").owned_by("StatefulSet", "ss"));
    mark_for_deletion(&mut c, &n1);
    evict(&mut c, &key("a"), &n1);
    provision_deleting_round(&mut c, &[]);
    assert_eq!(c.node_count(), 2);
    assert_eq!(instance_types(&c), ["small-instance-type"; 2]);
}

/// "should not reschedule pods from a deleting node when pods are blocked due to fully blocking
/// PDBs" (a DescribeTable): one test per Entry.
mod fully_blocking_pdbs {
    use super::*;

    const POD_LABELS: [(&str, &str); 1] = [("app", "pdb-test")];

    fn pdb(
        name: &str,
        min: Option<IntOrPercent>,
        max: Option<IntOrPercent>,
    ) -> PodDisruptionBudget {
        let mut pdb = PodDisruptionBudget::new("default", name)
            .with_selector(LabelSelector::from_labels(POD_LABELS));
        pdb.min_available = min;
        pdb.max_unavailable = max;
        pdb
    }

    fn not_rescheduled_with(pdbs: &[PodDisruptionBudget]) {
        let mut c = suite_cluster();
        let p = memory_pod("a").label(POD_LABELS[0].0, POD_LABELS[0].1);
        let n1 = provision_small(&mut c, p);
        mark_for_deletion(&mut c, &n1);
        provision_deleting_round(&mut c, pdbs);
        // The pod's eviction is blocked: no replacement node.
        assert_eq!(c.node_count(), 1);
    }

    #[test]
    fn zero_max_unavailable() {
        not_rescheduled_with(&[pdb("pdb", None, Some(IntOrPercent::Int(0)))]);
    }

    #[test]
    fn zero_percent_max_unavailable() {
        not_rescheduled_with(&[pdb("pdb", None, Some(IntOrPercent::Percent(0)))]);
    }

    #[test]
    fn one_hundred_percent_min_available() {
        not_rescheduled_with(&[pdb("pdb", Some(IntOrPercent::Percent(100)), None)]);
    }

    #[test]
    fn multiple_pdbs_on_the_same_pod() {
        not_rescheduled_with(&[
            pdb("pdb-1", Some(IntOrPercent::Percent(100)), None),
            pdb("pdb-2", Some(IntOrPercent::Percent(100)), None),
        ]);
    }
}

//! `suite_test.go` › Dynamic Resource Allocation (DRA) (upstream `suite_test.go`, upstream's DRA
//! handling in `scheduler.go`). The model records whether a pod references resource claims (from
//! its containers or init containers) as one flag; requests are the effective ones.

use karpenter_core::model::Pod;
use karpenter_core::resources::{Quantity, names};
use karpenter_core::scheduling::{PodErrorKind, solve};
use karpenter_fake::catalog::default_catalog;
use karpenter_fake::harness::{Cluster, node_pool};

use crate::suite_kit::*;

/// A fresh default NodePool (no requirements).
fn cluster() -> Cluster {
    Cluster::new().with_node_pool(node_pool("default", default_catalog()))
}

/// "should handle DRA pods correctly" (a DescribeTable): one test per Entry.
mod should_handle_dra_pods_correctly {
    use super::*;

    fn claims(mut p: Pod) -> Pod {
        p.has_resource_claims = true;
        p
    }

    fn expect_dra_error(p: Pod) {
        let k = p.key();
        let c = cluster();
        let results = solve(&c.scheduling_input_with(p), &c.options);
        assert!(results.new_node_claims.is_empty());
        let dra: Vec<_> = results
            .pod_errors
            .iter()
            .filter(|(_, e)| e.kind == PodErrorKind::Dra)
            .collect();
        assert_eq!(dra.len(), 1, "{:?}", results.pod_errors);
        assert_eq!(dra[0].0, &k);
    }

    #[test]
    fn container_with_resource_claims() {
        expect_dra_error(claims(pod("dra-container-pod").cpu("1").memory("1Gi")));
    }

    #[test]
    fn init_container_with_resource_claims() {
        // Container 1 cpu / 1Gi, init container 500m / 512Mi: effective 1 cpu / 1Gi.
        expect_dra_error(claims(pod("dra-init-container-pod").cpu("1").memory("1Gi")));
    }

    #[test]
    fn pod_with_both_container_and_init_container_resource_claims() {
        // Container 1 cpu / 1Gi, init container 250m / 256Mi: effective 1 cpu / 1Gi.
        expect_dra_error(claims(pod("dra-both-pod").cpu("1").memory("1Gi")));
    }

    #[test]
    fn non_dra_pod_without_resource_claims() {
        let p = pod("non-dra-pod").cpu("1").memory("1Gi");
        let c = cluster();
        let results = solve(&c.scheduling_input_with(p), &c.options);
        assert_eq!(results.new_node_claims.len(), 1);
        assert!(results.pod_errors.is_empty(), "{:?}", results.pod_errors);
    }
}

/// The scheduling input of `cluster` with `pod` pending.
trait WithPod {
    fn scheduling_input_with(&self, pod: Pod) -> karpenter_core::scheduling::SchedulingInput;
}

impl WithPod for Cluster {
    fn scheduling_input_with(&self, pod: Pod) -> karpenter_core::scheduling::SchedulingInput {
        let mut input = self.scheduling_input();
        input.pods = vec![pod];
        input
    }
}

#[test]
fn should_handle_daemonset_pods_with_dra_requirements_based_on_ignoredrarequests_flag_value() {
    let mut c = cluster();
    let mut ds_pod = pod("dra-daemon-pod").cpu("3");
    ds_pod.has_resource_claims = true;
    c.add_daemonset(daemonset("dra-daemon", ds_pod));
    let app = pod("app").cpu("1");
    let first_option_cpu = |ignore: bool| -> Quantity {
        let mut options = c.options.clone();
        options.ignore_dra_requests = ignore;
        let results = solve(&c.scheduling_input_with(app.clone()), &options);
        assert_eq!(results.new_node_claims.len(), 1, "{:?}", results.pod_errors);
        results.new_node_claims[0].instance_types[0]
            .capacity
            .get_or_zero(names::CPU)
    };
    // Ignored DRA daemon: 1 cpu of pods; counted: 3 + 1 cpu. A smaller first option when ignored.
    assert!(first_option_cpu(true) < first_option_cpu(false));
}

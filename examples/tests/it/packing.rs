//! `karpenter plan --packing`: the issue's 200-pod generic mix on the embedded AWS catalog.

use std::fmt::Write as _;

use karpenter_core::scheduling::packing::PackingPolicy;
use karpenter_plan::manifests::documents_from_str;
use karpenter_plan::output::Summary;
use karpenter_plan::plan::{PlanOptions, plan};

/// SplitMix64, as the benchmark reporter's `cost:N` rows draw their pods.
fn next(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The generic mix: one NodePool (c, m, r; generation > 2; on-demand) and `n` pods of CPU
/// uniform in 100m-4 and memory uniform in 128Mi-8Gi.
fn mix(n: usize, seed: u64, annotation: Option<&str>) -> String {
    let annotations = annotation
        .map(|a| format!("\n  annotations: {{karpenter-rs.io/packing: {a}}}"))
        .unwrap_or_default();
    let mut s = format!(
        "apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: default{annotations}
spec:
  template:
    spec:
      nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}
      requirements:
      - {{key: karpenter.k8s.aws/instance-category, operator: In, values: [c, m, r]}}
      - {{key: karpenter.k8s.aws/instance-generation, operator: Gt, values: [\"2\"]}}
      - {{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}}
"
    );
    let mut state = seed;
    for i in 0..n {
        let cpu = 100 + next(&mut state) % 3901;
        let mem = 128 + next(&mut state) % 8065;
        let _ = write!(
            s,
            "---
apiVersion: v1
kind: Pod
metadata: {{name: mix-{i}, namespace: default}}
spec: {{containers: [{{name: c, image: x, resources: {{requests: {{cpu: {cpu}m, memory: {mem}Mi}}}}}}]}}
"
        );
    }
    s
}

fn summary(text: &str, packing: Option<PackingPolicy>) -> Summary {
    let docs = documents_from_str("mix.yaml", text, false).expect("valid YAML");
    let opts = PlanOptions {
        packing,
        ..PlanOptions::new(jiff::Timestamp::UNIX_EPOCH)
    };
    plan(&docs, &opts, &mut |_| {})
        .expect("plans")
        .output
        .summary
}

#[test]
fn the_issue_200_pod_example_plans_within_1_10_of_its_bound_under_cost() {
    let s = summary(&mix(200, 1, None), Some(PackingPolicy::Cost));
    assert_eq!(s.scheduled, 200);
    assert_eq!(s.packing.as_deref(), Some("cost"));
    let upstream = s.upstream_cost_per_hour.expect("upstream cost");
    let cost_aware = s.cost_aware_cost_per_hour.expect("cost-aware cost");
    assert_eq!(cost_aware, s.cost_per_hour);
    assert!(cost_aware < upstream, "{cost_aware} vs {upstream}");
    assert!(
        s.cost_per_hour <= 1.10 * s.lower_bound_per_hour,
        "{} vs bound {}",
        s.cost_per_hour,
        s.lower_bound_per_hour
    );
}

#[test]
fn upstream_packing_plans_the_faithful_plan_and_prices_the_alternative() {
    let text = mix(200, 1, None);
    let plain = summary(&text, None);
    // Without the flag or an annotation: nothing new in the summary.
    assert_eq!(plain.packing, None);
    assert_eq!(plain.upstream_cost_per_hour, None);
    let upstream = summary(&text, Some(PackingPolicy::Upstream));
    assert_eq!(upstream.cost_per_hour, plain.cost_per_hour);
    assert_eq!(upstream.new_node_claims, plain.new_node_claims);
    assert_eq!(upstream.packing.as_deref(), Some("upstream"));
    assert_eq!(upstream.upstream_cost_per_hour, Some(plain.cost_per_hour));
    let cost = summary(&text, Some(PackingPolicy::Cost));
    assert_eq!(upstream.cost_aware_cost_per_hour, Some(cost.cost_per_hour));
}

#[test]
fn the_annotation_chooses_the_policy_and_the_flag_overrides_it() {
    let annotated = mix(50, 2, Some("cost"));
    let s = summary(&annotated, None);
    assert_eq!(s.packing.as_deref(), Some("cost"));
    assert!(s.cost_per_hour < s.upstream_cost_per_hour.expect("upstream cost"));
    let forced = summary(&annotated, Some(PackingPolicy::Upstream));
    assert_eq!(forced.packing.as_deref(), Some("upstream"));
    assert_eq!(Some(forced.cost_per_hour), s.upstream_cost_per_hour);
}

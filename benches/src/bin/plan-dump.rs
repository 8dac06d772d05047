//! Writes upstream's scheduling benchmark (`makeDiversePods(N)`, seed 42, the NodePool of
//! `TestSchedulingProfile`) as a `kubectl get -o yaml`-style dump for `karpenter plan`, so the
//! planner's whole-process time can be measured on the same pods as the scheduler benchmark:
//!
//! ```text
//! cargo run --release -p karpenter-bench --bin plan-dump -- 20000 > /tmp/dump.yaml
//! cargo run --release -p karpenter-bench --bin plan-dump -- 20000 --owned > /tmp/owned.yaml
//! /usr/bin/time -v karpenter plan -f /tmp/dump.yaml --catalog fake:400 -o json > /dev/null
//! ```
//!
//! By default every pod is a bare pending Pod, as upstream's benchmark creates them. With
//! `--owned` the pods come as a real dump has them: each run of ten pods is owned (through
//! `ownerReferences`) by a ReplicaSet of ten replicas, itself owned by a Deployment, and the
//! Deployments and ReplicaSets are in the dump too; the plan must still count each pod once.

use std::fmt::Write as _;

use karpenter_bench::scenario::CLUSTER_LABEL;
use karpenter_bench::workload::{
    AFFINITY_LABEL_KEY, APP_LABEL_KEY, APP_LABEL_VALUE, HOSTNAME_KEY, LABEL_KEY, PREFERRED_ZONE,
    PodDraw, PodKind, Workload, ZONE_KEY,
};

/// Pods per ReplicaSet with `--owned`.
const GROUP: usize = 10;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let count = match args.first().map(|a| a.parse::<usize>()) {
        Some(Ok(n)) => n,
        _ => {
            eprintln!("usage: plan-dump PODS [--owned]");
            std::process::exit(2);
        }
    };
    let owned = args.iter().any(|a| a == "--owned");
    let draws = Workload::new().diverse_pods(count);
    print!("{}", dump(&draws, owned));
}

fn dump(draws: &[PodDraw], owned: bool) -> String {
    let (ck, cv) = CLUSTER_LABEL;
    let mut s = format!(
        "apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {{name: default}}
spec:
  template:
    metadata: {{labels: {{{ck}: {cv}}}}}
    spec:
      nodeClassRef: {{group: karpenter.test.sh, kind: TestNodeClass, name: default}}
      requirements: []
  limits: {{cpu: \"10000000\", memory: 10000000Gi}}
---
apiVersion: v1
kind: List
items:
"
    );
    if owned {
        for g in 0..draws.len().div_ceil(GROUP) {
            let replicas = GROUP.min(draws.len() - g * GROUP);
            let _ = write!(
                s,
                "- apiVersion: apps/v1
  kind: Deployment
  metadata: {{name: app-{g}, namespace: default, uid: deploy-{g}}}
  spec:
    replicas: {replicas}
    selector: {{matchLabels: {{group: g{g}}}}}
    template:
      metadata: {{labels: {{group: g{g}}}}}
      spec: {{containers: [{{name: c, image: x}}]}}
- apiVersion: apps/v1
  kind: ReplicaSet
  metadata:
    name: app-{g}-5d8f
    namespace: default
    uid: rs-{g}
    ownerReferences: [{{apiVersion: apps/v1, kind: Deployment, name: app-{g}, uid: deploy-{g}, controller: true}}]
  spec:
    replicas: {replicas}
    selector: {{matchLabels: {{group: g{g}}}}}
    template:
      metadata: {{labels: {{group: g{g}}}}}
      spec: {{containers: [{{name: c, image: x}}]}}
"
            );
        }
    }
    for (i, d) in draws.iter().enumerate() {
        pod(&mut s, i, d, owned);
    }
    s
}

fn pod(s: &mut String, i: usize, d: &PodDraw, owned: bool) {
    let (ck, cv) = CLUSTER_LABEL;
    let mut labels = format!("{ck}: {cv}");
    for (k, v) in &d.labels {
        let _ = write!(labels, ", {k}: {v}");
    }
    let _ = write!(
        s,
        "- apiVersion: v1
  kind: Pod
  metadata:
    name: pod-{i:06}
    namespace: default
    uid: uid-{i:06}
    creationTimestamp: \"2026-01-01T00:{:02}:{:02}Z\"
    labels: {{{labels}}}
",
        (i / 60) % 60,
        i % 60
    );
    if owned {
        let g = i / GROUP;
        let _ = writeln!(
            s,
            "    ownerReferences: [{{apiVersion: apps/v1, kind: ReplicaSet, name: app-{g}-5d8f, uid: rs-{g}, controller: true}}]"
        );
    }
    let _ = write!(
        s,
        "  spec:
    containers:
    - name: c
      image: x
      resources: {{requests: {{cpu: {}m, memory: {}Mi}}}}
",
        d.cpu_milli, d.memory_mi
    );
    let spread = |key: &str| {
        format!(
            "    topologySpreadConstraints:
    - {{maxSkew: 1, topologyKey: {key}, whenUnsatisfiable: DoNotSchedule, labelSelector: {{matchLabels: {{{LABEL_KEY}: {}}}}}}}
",
            d.spread_selector_value.as_deref().unwrap_or_default()
        )
    };
    let term = |key: &str, value: &str, topology: &str| {
        format!("{{topologyKey: {topology}, labelSelector: {{matchLabels: {{{key}: {value}}}}}}}")
    };
    match d.kind {
        PodKind::Generic => {}
        PodKind::ZonalSpread => s.push_str(&spread(ZONE_KEY)),
        PodKind::HostnameSpread => s.push_str(&spread(HOSTNAME_KEY)),
        PodKind::ZonalSelfAffinity => {
            let value = d
                .labels
                .iter()
                .find(|(k, _)| k == AFFINITY_LABEL_KEY)
                .map(|(_, v)| v.as_str())
                .unwrap_or_default();
            let _ = writeln!(
                s,
                "    affinity: {{podAffinity: {{requiredDuringSchedulingIgnoredDuringExecution: [{}]}}}}",
                term(AFFINITY_LABEL_KEY, value, ZONE_KEY)
            );
        }
        PodKind::HostnameAntiAffinity => {
            let _ = writeln!(
                s,
                "    affinity: {{podAntiAffinity: {{requiredDuringSchedulingIgnoredDuringExecution: [{}]}}}}",
                term(APP_LABEL_KEY, APP_LABEL_VALUE, HOSTNAME_KEY)
            );
        }
        PodKind::Preference => {
            let _ = writeln!(
                s,
                "    affinity: {{nodeAffinity: {{preferredDuringSchedulingIgnoredDuringExecution: [{{weight: 1, preference: {{matchExpressions: [{{key: {ZONE_KEY}, operator: In, values: [{PREFERRED_ZONE}]}}]}}}}]}}, podAntiAffinity: {{preferredDuringSchedulingIgnoredDuringExecution: [{{weight: 10, podAffinityTerm: {}}}, {{weight: 1, podAffinityTerm: {}}}]}}}}",
                term(APP_LABEL_KEY, APP_LABEL_VALUE, ZONE_KEY),
                term(APP_LABEL_KEY, APP_LABEL_VALUE, HOSTNAME_KEY)
            );
        }
    }
}

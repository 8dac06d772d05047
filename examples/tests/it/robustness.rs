//! No panic on any input: arbitrary text and mutated manifests either plan or fail with an
//! input error.

use karpenter_plan::catalog::CatalogSpec;
use karpenter_plan::manifests::documents_from_str;
use karpenter_plan::plan::{PlanError, PlanOptions, plan};
use proptest::prelude::*;

const VALID: &str = "apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    metadata: {labels: {team: a}}
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand, spot]}
        - {key: size, operator: In, values: [small, large], minValues: 1}
      taints: [{key: dedicated, value: a, effect: NoSchedule}]
  limits: {cpu: \"100\", memory: 100Gi}
  disruption:
    consolidateAfter: 1m
    budgets: [{nodes: \"10%\"}, {nodes: \"0\", schedule: \"0 9 * * 1-5\", duration: 8h}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop}
spec:
  replicas: 3
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      tolerations: [{key: dedicated, operator: Equal, value: a, effect: NoSchedule}]
      topologySpreadConstraints:
        - {maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: DoNotSchedule, labelSelector: {matchLabels: {app: web}}}
      affinity:
        podAntiAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
            - {topologyKey: kubernetes.io/hostname, labelSelector: {matchLabels: {app: web}}}
      containers:
        - name: c
          resources: {requests: {cpu: 500m, memory: 1Gi}, limits: {cpu: \"1\"}}
          ports: [{containerPort: 80, hostPort: 8080}]
---
apiVersion: v1
kind: Node
metadata: {name: n1, labels: {karpenter.sh/nodepool: default, team: a}}
status: {capacity: {cpu: \"2\", memory: 4Gi, pods: \"10\"}}
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent}
spec:
  selector: {}
  template: {spec: {containers: [{name: a, resources: {requests: {cpu: 50m}}}]}}
";

fn plan_text(text: &str) -> Result<(), PlanError> {
    let docs = documents_from_str("fuzz.yaml", text, false)?;
    let opts = PlanOptions {
        catalog: CatalogSpec::Fake(4),
        explain: true,
        disruption: true,
        ..PlanOptions::new(jiff::Timestamp::UNIX_EPOCH)
    };
    let r = plan(&docs, &opts, &mut |_| {})?;
    karpenter_plan::output::to_json(&r.output).expect("serialises");
    karpenter_plan::output::to_yaml(&r.output).expect("serialises");
    karpenter_plan::output::to_table(&r.output);
    Ok(())
}

#[test]
fn the_valid_manifest_plans() {
    plan_text(VALID).expect("plans");
}

proptest! {
    #[test]
    fn arbitrary_text_never_panics(text in "\\PC{0,200}") {
        match plan_text(&text) {
            Ok(()) | Err(PlanError::Input(_)) => {}
            Err(e) => prop_assert!(false, "{e}"),
        }
    }

    #[test]
    fn mutated_manifests_never_panic(
        edits in prop::collection::vec((any::<prop::sample::Index>(), "[-a-z0-9:{}\\[\\] \"\n.%*]{0,8}", 0usize..6), 1..4)
    ) {
        let mut text = VALID.to_string();
        for (at, insert, remove) in edits {
            let mut pos = at.index(text.len() + 1);
            while !text.is_char_boundary(pos) {
                pos -= 1;
            }
            let mut end = (pos + remove).min(text.len());
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            text.replace_range(pos..end, &insert);
        }
        match plan_text(&text) {
            Ok(()) | Err(PlanError::Input(_)) => {}
            Err(e) => prop_assert!(false, "{e}\n{text}"),
        }
    }
}

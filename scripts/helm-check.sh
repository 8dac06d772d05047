#!/usr/bin/env bash
# helm-check.sh — check the Helm chart (charts/karpenter) with the pinned helm:
#   1. helm lint, with an EKS install's values (ci/install-notes-values.yaml), with an
#      upstream-style values file (ci/upstream-values.yaml) and with every key of upstream's
#      chart values at upstream's default (ci/upstream-chart-defaults.yaml);
#   2. helm template with each (namespace kube-system, CRDs included), into
#      OUT_DIR/install-notes.yaml, OUT_DIR/upstream-values.yaml and
#      OUT_DIR/upstream-chart-defaults.yaml; and with the seed guide's 19.1 `--set` flags into
#      OUT_DIR/guide-19-1.yaml;
#   3. the controller's required node affinity keeps it off Karpenter-managed nodes
#      (karpenter.sh/nodepool DoesNotExist);
#   4. bad values fail `helm template` with a message naming the value, and so does every
#      upstream value this controller has no feature for, set away from upstream's default;
#   5. optional parts render (ServiceMonitor, the fake provider's RBAC, the PrometheusRule and
#      the Grafana dashboards' ConfigMaps, into OUT_DIR/monitoring.yaml), and none by default.
# The rendered manifests are then checked structurally and applied to the real kube-apiserver
# (server-side, dryRun=All) by the Rust tests in examples/tests/it/chart.rs, which read
# KARPENTER_CHART_RENDERED=OUT_DIR and KARPENTER_E2E_KUBECONFIG; scripts/test sets both. With
# --run-tests this script runs those tests itself (the control plane's kubeconfig must then be
# in KARPENTER_E2E_KUBECONFIG).
#
#   bash scripts/helm-check.sh [--run-tests] [OUT_DIR]     # OUT_DIR is the last line of stdout
set -euo pipefail
cd "$(dirname "$0")/.."

RUN_TESTS=0
if [ "${1:-}" = --run-tests ]; then RUN_TESTS=1; shift; fi
OUT="${1:-${TMPDIR:-/tmp}/karpenter-rs-chart}"
CHART=charts/karpenter
log() { printf '[helm-check] %s\n' "$*" >&2; }
die() { log "FAILED: $*"; exit 1; }

HELM="$(bash scripts/helm-install.sh)"
log "$("$HELM" version --short 2>/dev/null || echo "$HELM")"
mkdir -p "$OUT"

# 1. lint
for values in install-notes-values.yaml upstream-values.yaml upstream-chart-defaults.yaml; do
  "$HELM" lint --strict "$CHART" --namespace kube-system -f "$CHART/ci/$values" >&2 \
    || die "helm lint with ci/$values"
done

# 2. render
render() { # name values-file
  "$HELM" template karpenter "$CHART" --namespace kube-system --include-crds -f "$CHART/ci/$2" \
    > "$OUT/$1.yaml" || die "helm template with ci/$2"
  log "rendered $OUT/$1.yaml ($(grep -c '^kind:' "$OUT/$1.yaml") objects)"
}
render install-notes install-notes-values.yaml
render upstream-values upstream-values.yaml
render upstream-chart-defaults upstream-chart-defaults.yaml
# The seed guide's 19.1 install (`helm upgrade --install ... --set ... --wait` renders the same).
"$HELM" template karpenter "$CHART" --namespace kube-system --include-crds \
  --set "settings.clusterName=my-cluster" --set "settings.interruptionQueue=my-cluster-karpenter" \
  --set replicas=2 > "$OUT/guide-19-1.yaml" || die "helm template with the guide's 19.1 flags"
log "rendered $OUT/guide-19-1.yaml ($(grep -c '^kind:' "$OUT/guide-19-1.yaml") objects)"

# 3. the controller never runs on a node Karpenter manages (the Rust tests check every term)
for f in install-notes upstream-values upstream-chart-defaults guide-19-1; do
  awk '/^kind: Deployment/{d=1} d && /key: karpenter.sh\/nodepool/{k=1; next}
       d && k && /operator: DoesNotExist/{ok=1} {k=0} END{exit !ok}' "$OUT/$f.yaml" \
    || die "$f: the Deployment's affinity does not exclude karpenter.sh/nodepool nodes"
done
grep -q 'key: eks.amazonaws.com/nodegroup' "$OUT/install-notes.yaml" \
  || die "install-notes: the controller is not pinned to the node group"

# 4. bad values fail with a message naming the value
expect_failure() { # expected-text args...
  local want="$1" msg; shift
  if msg="$("$HELM" template karpenter "$CHART" "$@" 2>&1 >/dev/null)"; then
    die "helm template $* succeeded; it must fail"
  fi
  grep -qF -- "$want" <<<"$msg" || die "helm template $*: the error does not name '$want':"$'\n'"$msg"
  log "rejected as expected ($*): $(grep -F -- "$want" <<<"$msg" | head -1 | sed 's/^[[:space:]-]*//')"
}
base=(--set settings.clusterName=c)
expect_failure "logLevel" "${base[@]}" --set logLevel=verbose
expect_failure "clusterNmae" "${base[@]}" --set settings.clusterNmae=typo
expect_failure "replicas" "${base[@]}" --set replicas=two
expect_failure "batchIdleDuration" "${base[@]}" --set settings.batchIdleDuration=3d
expect_failure "spotToSpot" "${base[@]}" --set settings.featureGates.spotToSpot=true
expect_failure "settings.clusterName is required"
# upstream's values without a feature here: accepted at upstream's default only
expect_failure "settings.eksControlPlane=true is not supported" "${base[@]}" --set settings.eksControlPlane=true
expect_failure "settings.enableZonalShift=true is not supported" "${base[@]}" --set settings.enableZonalShift=true
expect_failure "settings.ignoreDRARequests=false is not supported" "${base[@]}" --set settings.ignoreDRARequests=false
expect_failure "settings.amiRefreshInterval=5m is not supported" "${base[@]}" --set settings.amiRefreshInterval=5m
expect_failure "settings.subnetRefreshInterval=5m is not supported" "${base[@]}" --set settings.subnetRefreshInterval=5m
expect_failure "settings.featureGates.capacityBuffer=true is not supported" "${base[@]}" --set settings.featureGates.capacityBuffer=true
expect_failure "logOutputPaths=" "${base[@]}" --set "logOutputPaths[0]=/var/log/karpenter.log"
expect_failure "logErrorOutputPaths=" "${base[@]}" --set "logErrorOutputPaths[0]=stdout"
expect_failure "webhook.enabled=true is not supported" "${base[@]}" --set webhook.enabled=true
expect_failure "reservedENIs" "${base[@]}" --set settings.reservedENIs=two

# 5. optional parts
"$HELM" template karpenter "$CHART" "${base[@]}" --set serviceMonitor.enabled=true \
  | grep -q '^kind: ServiceMonitor' || die "serviceMonitor.enabled=true renders no ServiceMonitor"
"$HELM" template karpenter "$CHART" --set settings.cloudProvider=fake \
  | grep -q 'name: karpenter-fake-provider' || die "cloudProvider=fake renders no fake-provider RBAC"
"$HELM" template karpenter "$CHART" --set settings.cloudProvider=kwok \
  | grep -q 'name: karpenter-fake-provider' || die "cloudProvider=kwok renders no fake-provider RBAC"
"$HELM" template karpenter "$CHART" "${base[@]}" \
  | grep -q '^kind: ServiceMonitor' && die "a ServiceMonitor renders by default"
"$HELM" template karpenter "$CHART" --namespace kube-system "${base[@]}" \
  --set prometheusRule.enabled=true --set dashboards.enabled=true \
  --set prometheusRule.additionalLabels.release=prometheus > "$OUT/monitoring.yaml" \
  || die "helm template with prometheusRule.enabled and dashboards.enabled"
[ "$(grep -c '^kind: PrometheusRule' "$OUT/monitoring.yaml")" = 1 ] \
  || die "prometheusRule.enabled=true renders no PrometheusRule"
[ "$(grep -c 'grafana_dashboard: "1"' "$OUT/monitoring.yaml")" = 4 ] \
  || die "dashboards.enabled=true does not render the four dashboard ConfigMaps"
log "rendered $OUT/monitoring.yaml ($(grep -c '^kind:' "$OUT/monitoring.yaml") objects)"
"$HELM" template karpenter "$CHART" "${base[@]}" \
  | grep -Eq '^kind: PrometheusRule|grafana_dashboard' && die "monitoring objects render by default"
expect_failure "prometheusRule" "${base[@]}" --set prometheusRule.enabeld=true

if [ "$RUN_TESTS" = 1 ]; then
  KARPENTER_CHART_RENDERED="$OUT" cargo test -p karpenter-cli --all-features --test it chart:: >&2 \
    || die "the chart tests"
fi
log "ok"
echo "$OUT"

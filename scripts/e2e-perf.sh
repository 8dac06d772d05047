#!/usr/bin/env bash
# e2e-perf.sh — the controller measurements of docs/performance.md on a real control plane
# (kube-apiserver, kube-scheduler and kwok on loopback; see scripts/control-plane/up.sh), outside
# the normal test run because they take minutes:
#
#   perf_a_thousand_pending_pods_to_all_bound           1,000 pending pods -> all bound
#   perf_memory_at_rest_with_1000_nodes_and_20000_pods  controller RSS at rest
#
#   bash scripts/e2e-perf.sh            # both
#   bash scripts/e2e-perf.sh perf_memory   # one (a cargo test name filter)
#
# Figures are printed on lines starting with "PERF:" and "MEM:". The control plane is started
# in a run directory of its own and stopped at the end.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
filter="${1:-perf_}"
CP=scripts/control-plane
export KCP_RUN="${TMPDIR:-/tmp}/karpenter-rs-cp-perf.$$"
trap 'KCP_RUN="$KCP_RUN" bash "$CP/down.sh" || true' EXIT
KC="$(bash "$CP/up.sh")"
export KARPENTER_E2E_KUBECONFIG="$KC"
export KARPENTER_E2E_CONTROLLER_KUBECONFIG="$KCP_RUN/karpenter.kubeconfig"

cargo test -p karpenter-cli --test it "$filter" -- --ignored --nocapture --test-threads 1 2>&1 \
  | grep -E '^(PERF|MEM):|^test |test result|panicked'

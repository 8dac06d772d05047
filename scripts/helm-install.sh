#!/usr/bin/env bash
# helm-install.sh — build the pinned helm (once, cached) from its Go module and print its path.
#
#   HELM=$(bash scripts/helm-install.sh)
#
# helm is built with `go install helm.sh/helm/v3/cmd/helm@$HELM_VERSION` (GOTOOLCHAIN=local,
# CGO off) into $HELM_HOME/$HELM_VERSION-<flags hash>/helm, outside the clone, like the control-plane
# binaries; later runs only check that the binary is there. The first build takes a few minutes
# on a small machine (module download and compile).
#
# Knobs (environment):
#   HELM_VERSION  (default: v3.19.5; change it here, nowhere else)
#   HELM_HOME     binary cache (default: ${XDG_CACHE_HOME:-$HOME/.cache}/karpenter-rs/helm)
#   HELM_NICE     prefix for the build (default: "nice -n 19")
set -euo pipefail

HELM_VERSION="${HELM_VERSION:-v3.19.5}"
HELM_HOME="${HELM_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/karpenter-rs/helm}"
HELM_NICE="${HELM_NICE:-nice -n 19}"
# As helm's own release build: its version, and the Kubernetes version `helm template` and
# `helm lint` assume (.Capabilities.KubeVersion, checked against a chart's kubeVersion; without
# these flags it is 1.20). The Kubernetes minor is that of the client-go helm $HELM_VERSION
# requires (v0.34 for v3.19).
HELM_K8S_MINOR="${HELM_K8S_MINOR:-34}"
LDFLAGS="-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION"
for pkg in helm.sh/helm/v3/pkg/chartutil helm.sh/helm/v3/pkg/lint/rules; do
  LDFLAGS="$LDFLAGS -X $pkg.k8sVersionMajor=1 -X $pkg.k8sVersionMinor=$HELM_K8S_MINOR"
done
# The cache is keyed by the version and the build flags.
DIR="$HELM_HOME/$HELM_VERSION-$(printf '%s' "$LDFLAGS" | sha256sum | cut -c1-8)"

log() { printf '[helm-install %s] %s\n' "$(date -u +%T)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

if [ ! -x "$DIR/helm" ]; then
  command -v go >/dev/null || die "go not found (needed once to build helm $HELM_VERSION)"
  mkdir -p "$DIR"
  t0=$(date +%s)
  log "go install helm.sh/helm/v3/cmd/helm@$HELM_VERSION (first time only; log in $DIR/build.log)"
  # A throwaway GOBIN so a failed or interrupted build never leaves a half-written helm.
  gobin="$(mktemp -d "$DIR/.gobin.XXXXXX")"
  (cd "$DIR" && GOTOOLCHAIN=local CGO_ENABLED=0 GOBIN="$gobin" $HELM_NICE go install -trimpath \
      -ldflags "$LDFLAGS" \
      "helm.sh/helm/v3/cmd/helm@$HELM_VERSION" >>"$DIR/build.log" 2>&1) \
    || { tail -20 "$DIR/build.log" >&2; rm -rf "$gobin"; die "go install helm@$HELM_VERSION failed"; }
  mv "$gobin/helm" "$DIR/helm"
  rm -rf "$gobin"
  log "built helm $HELM_VERSION in $(( $(date +%s) - t0 )) s"
fi
echo "$DIR/helm"

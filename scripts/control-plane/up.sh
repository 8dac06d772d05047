#!/usr/bin/env bash
# up.sh — build (once, cached) and start a loopback-only Kubernetes control plane for the e2e
# tests: etcd + kube-apiserver + kube-scheduler + kube-controller-manager + kwok (the kubelet of
# fake Nodes). No kubelet, no containers; everything listens on 127.0.0.1.
#
#   KC=$(bash scripts/control-plane/up.sh)      # kubeconfig path is the last line of stdout
#   source "$KCP_RUN/env"                        # KUBECONFIG, KCP_API_URL, KCP_ADMIN_TOKEN, ...
#   bash scripts/control-plane/down.sh
#
# Binaries: kube-apiserver, kube-scheduler and kube-controller-manager are built from the
# k8s.io/kubernetes Go module (one `go build` cache for the three) through the pinned wrapper
# module in kube-bin/ (go.mod + go.sum; the Kubernetes version is the one that go.mod
# requires), kwok with `go install sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION`, and
# etcd is the upstream release binary shipped in the crates.io package
# etcd-bin-vendored-linux-amd64. They are cached under $KCP_HOME in a directory keyed by the
# wrapper's go.sum hash and the kwok/etcd versions, so only the first run builds (15-30 min on a
# busy 2-core machine; kube-controller-manager adds about 3 min); later runs start in about 8 s
# (4 s without kube-controller-manager).
#
# Knobs (environment):
#   KCP_HOME      binary cache             (default: ${XDG_CACHE_HOME:-$HOME/.cache}/karpenter-rs/control-plane)
#   KCP_RUN       run dir: certs, etcd data, logs, pids   (default: ${TMPDIR:-/tmp}/karpenter-rs-cp)
#   KWOK_VERSION  (default: v0.8.0)     ETCD_CRATE_VERSION (default: 3.6.15)
#   KCP_BUILD_ONLY=1     build/fetch the binaries, print their directory, start nothing
#   KCP_BUILD_KUBECTL=1  also build kubectl from the same module graph (about 1.5 min warm)
#   KCP_NICE      prefix for the heavy builds (default: "nice -n 19")
#   KCP_READY_TIMEOUT    seconds to wait for the apiserver's /readyz (default: 180)
#   KCP_CONTROLLER_MANAGER=0   neither build nor start kube-controller-manager (default: 1)
#   KCP_KCM_CONTROLLERS  its --controllers list (default: $KCM_CONTROLLERS_DEFAULT below)
#
# kube-controller-manager runs as system:kube-controller-manager (a static token; the
# apiserver's bootstrap RBAC covers that user) with --use-service-account-credentials, so each
# controller acts as its own kube-system ServiceAccount under the bootstrap controller roles, as
# in a kubeadm cluster. With it, the ServiceAccount and TaintNodesByCondition admission plugins
# are on (as in any cluster): up.sh waits for the default ServiceAccount of namespace default,
# and a new Node carries node.kubernetes.io/not-ready:NoSchedule until kwok reports it Ready and
# the node-lifecycle controller lifts the taint (within a second). kwok renews each Node's Lease
# every 10 s, so node-lifecycle (grace period 50 s) leaves kwok Nodes Ready; a Node that no kwok
# plays (not annotated kwok.x-k8s.io/node=fake) turns Unknown after 60 s (the startup grace
# period) and is tainted node.kubernetes.io/unreachable, and its pods never finish terminating.
#
# To move to another Kubernetes version, regenerate kube-bin/ (see kube-bin/README.md).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
WRAP_SRC="$HERE/kube-bin"
KWOK_VERSION="${KWOK_VERSION:-v0.8.0}"
ETCD_CRATE_VERSION="${ETCD_CRATE_VERSION:-3.6.15}"
KCP_HOME="${KCP_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/karpenter-rs/control-plane}"
KCP_RUN="${KCP_RUN:-${TMPDIR:-/tmp}/karpenter-rs-cp}"
KCP_NICE="${KCP_NICE:-nice -n 19}"
KCP_READY_TIMEOUT="${KCP_READY_TIMEOUT:-180}"
KCP_CONTROLLER_MANAGER="${KCP_CONTROLLER_MANAGER:-1}"
# Everything a workload e2e suite touches, nothing that needs a cloud, a CSR signer, node CIDR
# allocation or a metrics API (node-ipam, csr signing/approving, HPA, attach-detach, ...).
KCM_CONTROLLERS_DEFAULT="serviceaccount-token-controller,serviceaccount-controller,\
root-ca-certificate-publisher-controller,garbage-collector-controller,namespace-controller,\
deployment-controller,replicaset-controller,replicationcontroller-controller,\
statefulset-controller,daemonset-controller,job-controller,cronjob-controller,\
ttl-after-finished-controller,disruption-controller,endpoints-controller,\
endpointslice-controller,endpointslice-mirroring-controller,node-lifecycle-controller,\
taint-eviction-controller,pod-garbage-collector-controller,resourcequota-controller,\
persistentvolume-binder-controller,persistentvolume-protection-controller,\
persistentvolumeclaim-protection-controller,ephemeral-volume-controller,\
clusterrole-aggregation-controller"
KCP_KCM_CONTROLLERS="${KCP_KCM_CONTROLLERS:-$KCM_CONTROLLERS_DEFAULT}"

log() { printf '[up %s] %s\n' "$(date -u +%T)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }
now_ms() { date +%s%3N; }

K8S_VERSION="$(sed -n 's#^[[:space:]]*k8s\.io/kubernetes v\([0-9.]*\).*#\1#p' "$WRAP_SRC/go.mod" | head -1)"
[ -n "$K8S_VERSION" ] || die "kube-bin/go.mod does not require k8s.io/kubernetes"
SUM_HASH="$(sha256sum "$WRAP_SRC/go.sum" | cut -c1-16)"
BIN="$KCP_HOME/bin-k8s$K8S_VERSION-$SUM_HASH-kwok$KWOK_VERSION-etcd$ETCD_CRATE_VERSION"

export GOTOOLCHAIN="${GOTOOLCHAIN:-local}" CGO_ENABLED=0

# ---------------------------------------------------------------- build (cached)
build_kube() {
  local cmds="kube-apiserver kube-scheduler" c need=0
  [ "$KCP_CONTROLLER_MANAGER" = 1 ] && cmds="$cmds kube-controller-manager"
  [ "${KCP_BUILD_KUBECTL:-0}" = 1 ] && cmds="$cmds kubectl"
  for c in $cmds; do [ -x "$BIN/$c" ] || need=1; done
  [ "$need" = 1 ] || return 0
  command -v go >/dev/null || die "go not found (needed once to build $cmds)"
  # Build in a copy of the wrapper so the clone is never written to (-mod=readonly anyway).
  local wrap="$KCP_HOME/wrap-$SUM_HASH" minor t0
  minor="$(echo "$K8S_VERSION" | cut -d. -f2)"
  mkdir -p "$wrap" "$BIN"
  cp "$WRAP_SRC/go.mod" "$WRAP_SRC/go.sum" "$wrap/"
  local ld="-s -w -X k8s.io/component-base/version.gitVersion=v$K8S_VERSION \
-X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor \
-X k8s.io/component-base/version.gitTreeState=clean \
-X k8s.io/client-go/pkg/version.gitVersion=v$K8S_VERSION \
-X k8s.io/client-go/pkg/version.gitMajor=1 -X k8s.io/client-go/pkg/version.gitMinor=$minor"
  for c in $cmds; do
    [ -x "$BIN/$c" ] && continue
    t0=$(now_ms); log "go build $c v$K8S_VERSION (cold: minutes; log in $KCP_HOME/build.log)"
    (cd "$wrap" && $KCP_NICE go build -mod=readonly -trimpath -ldflags "$ld" -o "$BIN/$c.tmp" \
      "k8s.io/kubernetes/cmd/$c" >>"$KCP_HOME/build.log" 2>&1) \
      || { tail -20 "$KCP_HOME/build.log" >&2; die "go build $c failed"; }
    mv "$BIN/$c.tmp" "$BIN/$c"
    log "built $c in $(( ($(now_ms)-t0)/1000 )) s"
  done
}

build_kwok() {
  [ -x "$BIN/kwok" ] && return 0
  command -v go >/dev/null || die "go not found (needed once to build kwok)"
  local t0; t0=$(now_ms); log "go install sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION"
  mkdir -p "$BIN/.gobin"
  (cd "$BIN" && GOBIN="$BIN/.gobin" $KCP_NICE go install -trimpath -ldflags "-s -w" \
    "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION" >>"$KCP_HOME/build.log" 2>&1) \
    || { tail -20 "$KCP_HOME/build.log" >&2; die "go install kwok failed"; }
  mv "$BIN/.gobin/kwok" "$BIN/kwok"; rmdir "$BIN/.gobin"
  log "built kwok in $(( ($(now_ms)-t0)/1000 )) s"
}

get_etcd_crate() {
  [ -x "$BIN/etcd" ] && return 0
  command -v cargo >/dev/null || die "cargo not found (needed once to fetch the etcd crate)"
  local d="$KCP_HOME/etcd-crate-$ETCD_CRATE_VERSION"
  mkdir -p "$d/src"
  cat > "$d/Cargo.toml" <<TOML
[package]
name = "etcd-fetch"
version = "0.0.0"
edition = "2021"
publish = false
[workspace]
[dependencies]
etcd-bin-vendored-linux-amd64 = "=$ETCD_CRATE_VERSION"
TOML
  echo 'fn main() {}' > "$d/src/main.rs"
  log "cargo fetch etcd-bin-vendored-linux-amd64 =$ETCD_CRATE_VERSION"
  (cd "$d" && cargo fetch --quiet >&2) || die "cargo fetch of the etcd crate failed"
  local p
  p="$(cd "$d" && cargo metadata --format-version 1 2>/dev/null \
       | python3 -c 'import json,sys; m=json.load(sys.stdin); print([p["manifest_path"] for p in m["packages"] if p["name"]=="etcd-bin-vendored-linux-amd64"][0])' 2>/dev/null || true)"
  [ -n "$p" ] && p="$(dirname "$p")/bin/etcd"
  [ -x "$p" ] || die "etcd binary not found in the crate ($p)"
  cp "$p" "$BIN/etcd.tmp" && mv "$BIN/etcd.tmp" "$BIN/etcd"
}

T_BUILD0=$(now_ms)
mkdir -p "$KCP_HOME" "$BIN"
build_kube
build_kwok
get_etcd_crate
log "binaries ready in $BIN ($(( ($(now_ms)-T_BUILD0)/1000 )) s)"
[ "${KCP_BUILD_ONLY:-0}" = 1 ] && { echo "$BIN"; exit 0; }

# ---------------------------------------------------------------- start
command -v openssl >/dev/null || die "openssl not found"
command -v curl >/dev/null || die "curl not found"

if compgen -G "$KCP_RUN/pids/*" >/dev/null; then
  log "stale run dir $KCP_RUN: calling down.sh first"
  KCP_RUN="$KCP_RUN" bash "$HERE/down.sh" >&2 || true
fi
rm -rf "$KCP_RUN"; mkdir -p "$KCP_RUN"/{pki,logs,pids,etcd}
R="$KCP_RUN"

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}
ETCD_PORT="$(free_port)"; ETCD_PEER_PORT="$(free_port)"
API_PORT="$(free_port)"; SCHED_PORT="$(free_port)"; KCM_PORT="$(free_port)"; KWOK_PORT="$(free_port)"

# PKI: CA, serving cert (SAN 127.0.0.1), service-account key pair, static tokens.
P="$R/pki"
openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=karpenter-rs-e2e-ca" \
  -keyout "$P/ca.key" -out "$P/ca.crt" \
  -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
openssl req -newkey rsa:2048 -nodes -subj "/CN=kube-apiserver" -keyout "$P/apiserver.key" -out "$P/apiserver.csr" 2>/dev/null
printf 'subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc\nbasicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n' > "$P/ext"
openssl x509 -req -in "$P/apiserver.csr" -CA "$P/ca.crt" -CAkey "$P/ca.key" -CAcreateserial -days 3650 \
  -extfile "$P/ext" -out "$P/apiserver.crt" 2>/dev/null
openssl genrsa -out "$P/sa.key" 2048 2>/dev/null
openssl rsa -in "$P/sa.key" -pubout -out "$P/sa.pub" 2>/dev/null
ADMIN_TOKEN="$(openssl rand -hex 24)"; CTRL_TOKEN="$(openssl rand -hex 24)"; KCM_TOKEN="$(openssl rand -hex 24)"
# The controller's token is the karpenter ServiceAccount's identity: it can do only what the
# RBAC manifests grant (the e2e tests apply them), exactly as in a cluster.
cat > "$P/tokens.csv" <<CSV
$ADMIN_TOKEN,e2e-admin,e2e-admin-uid,"system:masters"
$CTRL_TOKEN,system:serviceaccount:karpenter:karpenter,karpenter-uid,"system:serviceaccounts,system:serviceaccounts:karpenter"
$KCM_TOKEN,system:kube-controller-manager,kube-controller-manager-uid
CSV
chmod 600 "$P"/*.key "$P/tokens.csv"

write_kubeconfig() { # file token user
  cat > "$1" <<KC
apiVersion: v1
kind: Config
clusters:
- name: karpenter-rs-e2e
  cluster:
    server: https://127.0.0.1:$API_PORT
    certificate-authority: $P/ca.crt
users:
- name: $3
  user:
    token: $2
contexts:
- name: karpenter-rs-e2e
  context: {cluster: karpenter-rs-e2e, user: $3}
current-context: karpenter-rs-e2e
KC
  chmod 600 "$1"
}
write_kubeconfig "$R/admin.kubeconfig" "$ADMIN_TOKEN" admin
write_kubeconfig "$R/karpenter.kubeconfig" "$CTRL_TOKEN" karpenter
write_kubeconfig "$R/kube-controller-manager.kubeconfig" "$KCM_TOKEN" kube-controller-manager

start() { # name cmd... ; logs to $R/logs/name.log, pid file $R/pids/name holds "PID EXE"
  local name="$1"; shift
  "$@" >"$R/logs/$name.log" 2>&1 &
  echo "$! $(readlink -f "$1")" > "$R/pids/$name"
}
fail() { log "$1 failed to become ready; last log lines:"; tail -30 "$R/logs/$1.log" >&2 || true
         KCP_RUN="$R" bash "$HERE/down.sh" >&2 || true; exit 1; }
wait_for() { # name timeout_s cmd...
  local name="$1" to="$2"; shift 2
  local end=$(( $(date +%s) + to )) pid; pid="$(cut -d' ' -f1 "$R/pids/$name")"
  until "$@" >/dev/null 2>&1; do
    kill -0 "$pid" 2>/dev/null || fail "$name"
    [ "$(date +%s)" -lt "$end" ] || fail "$name"
    sleep 0.2
  done
}

T0=$(now_ms)
start etcd "$BIN/etcd" --name=karpenter-rs-e2e --data-dir="$R/etcd" \
  --listen-client-urls="http://127.0.0.1:$ETCD_PORT" --advertise-client-urls="http://127.0.0.1:$ETCD_PORT" \
  --listen-peer-urls="http://127.0.0.1:$ETCD_PEER_PORT" --initial-advertise-peer-urls="http://127.0.0.1:$ETCD_PEER_PORT" \
  --initial-cluster="karpenter-rs-e2e=http://127.0.0.1:$ETCD_PEER_PORT" \
  --unsafe-no-fsync=true --quota-backend-bytes=2147483648 --log-level=warn
wait_for etcd 30 curl -sf "http://127.0.0.1:$ETCD_PORT/health"
T_ETCD=$(now_ms)

# Without kube-controller-manager, TaintNodesByCondition stays off (nothing would remove
# node.kubernetes.io/not-ready) and so does ServiceAccount admission (no default ServiceAccounts).
ADMISSION_OFF=""
[ "$KCP_CONTROLLER_MANAGER" = 1 ] || ADMISSION_OFF="--disable-admission-plugins=ServiceAccount,TaintNodesByCondition"
start kube-apiserver "$BIN/kube-apiserver" \
  --etcd-servers="http://127.0.0.1:$ETCD_PORT" \
  --bind-address=127.0.0.1 --advertise-address=127.0.0.1 --secure-port="$API_PORT" \
  --tls-cert-file="$P/apiserver.crt" --tls-private-key-file="$P/apiserver.key" \
  --client-ca-file="$P/ca.crt" \
  --token-auth-file="$P/tokens.csv" \
  --authorization-mode=RBAC \
  --service-account-issuer=https://kubernetes.default.svc.cluster.local \
  --service-account-key-file="$P/sa.pub" --service-account-signing-key-file="$P/sa.key" \
  --service-cluster-ip-range=10.96.0.0/16 \
  --endpoint-reconciler-type=none \
  --allow-privileged=true \
  ${ADMISSION_OFF:+"$ADMISSION_OFF"} \
  --enable-priority-and-fairness=false --profiling=false --v=1
wait_for kube-apiserver "$KCP_READY_TIMEOUT" \
  curl -sf --cacert "$P/ca.crt" -H "Authorization: Bearer $ADMIN_TOKEN" "https://127.0.0.1:$API_PORT/readyz"
T_API=$(now_ms)

start kube-scheduler "$BIN/kube-scheduler" --kubeconfig="$R/admin.kubeconfig" \
  --authentication-kubeconfig="$R/admin.kubeconfig" --authorization-kubeconfig="$R/admin.kubeconfig" \
  --leader-elect=false --bind-address=127.0.0.1 --secure-port="$SCHED_PORT" --v=1
if [ "$KCP_CONTROLLER_MANAGER" = 1 ]; then
  KCM_KC="$R/kube-controller-manager.kubeconfig"
  start kube-controller-manager "$BIN/kube-controller-manager" --kubeconfig="$KCM_KC" \
    --authentication-kubeconfig="$KCM_KC" --authorization-kubeconfig="$KCM_KC" \
    --leader-elect=false --bind-address=127.0.0.1 --secure-port="$KCM_PORT" \
    --use-service-account-credentials=true \
    --service-account-private-key-file="$P/sa.key" --root-ca-file="$P/ca.crt" \
    --controllers="$KCP_KCM_CONTROLLERS" --profiling=false --v=1
fi
wait_for kube-scheduler 60 curl -sfk "https://127.0.0.1:$SCHED_PORT/readyz"
T_SCHED=$(now_ms)
T_KCM=$T_SCHED
if [ "$KCP_CONTROLLER_MANAGER" = 1 ]; then
  wait_for kube-controller-manager 60 curl -sfk "https://127.0.0.1:$KCM_PORT/healthz"
  # Pods need their namespace's default ServiceAccount (ServiceAccount admission is on).
  wait_for kube-controller-manager 60 curl -sf --cacert "$P/ca.crt" -H "Authorization: Bearer $ADMIN_TOKEN" \
    "https://127.0.0.1:$API_PORT/api/v1/namespaces/default/serviceaccounts/default"
  T_KCM=$(now_ms)
fi

# kwok only manages Nodes annotated kwok.x-k8s.io/node=fake (what the fake provider creates).
# HOME points into the run dir so a ~/.kwok/kwok.yaml on the machine cannot change its stages.
HOME="$R" start kwok "$BIN/kwok" --kubeconfig="$R/admin.kubeconfig" --config="$HERE/kwok-stages.yaml" \
  --manage-all-nodes=false --manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake \
  --node-ip=127.0.0.1 --cidr=10.244.0.0/16 --node-lease-duration-seconds=40 \
  --server-address="127.0.0.1:$KWOK_PORT"
wait_for kwok 60 curl -sf "http://127.0.0.1:$KWOK_PORT/healthz"
T_KWOK=$(now_ms)

cat > "$R/env" <<ENV
export KUBECONFIG=$R/admin.kubeconfig
export KCP_RUN=$R
export KCP_BIN=$BIN
export KCP_API_URL=https://127.0.0.1:$API_PORT
export KCP_ADMIN_TOKEN=$ADMIN_TOKEN
export KCP_KARPENTER_KUBECONFIG=$R/karpenter.kubeconfig
export KCP_CONTROLLER_MANAGER=$KCP_CONTROLLER_MANAGER
ENV
log "etcd ready in $(( T_ETCD-T0 )) ms; kube-apiserver /readyz in $(( T_API-T_ETCD )) ms;" \
    "kube-scheduler in $(( T_SCHED-T_API )) ms; kube-controller-manager $(( T_KCM-T_SCHED )) ms later;" \
    "kwok in $(( T_KWOK-T_KCM )) ms; total $(( T_KWOK-T0 )) ms"
log "apiserver https://127.0.0.1:$API_PORT  (source $R/env; stop with down.sh)"
echo "$R/admin.kubeconfig"

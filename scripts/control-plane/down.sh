#!/usr/bin/env bash
# down.sh — stop what up.sh started, by PID from $KCP_RUN/pids (each file holds "PID EXE"; a PID
# is signalled only while /proc/PID/exe still is that binary), in reverse order: kwok,
# kube-scheduler and kube-controller-manager, then kube-apiserver, then etcd. Removes $KCP_RUN
# unless KCP_KEEP=1.
set -uo pipefail
KCP_RUN="${KCP_RUN:-${TMPDIR:-/tmp}/karpenter-rs-cp}"
[ -d "$KCP_RUN/pids" ] || { echo "[down] nothing to stop in $KCP_RUN" >&2; exit 0; }

stop_group() { # names...
  local name pid exe pids=()
  for name in "$@"; do
    local f="$KCP_RUN/pids/$name"; [ -f "$f" ] || continue
    read -r pid exe < "$f"
    if [ -n "${pid:-}" ] && [ "$(readlink -f "/proc/$pid/exe" 2>/dev/null)" = "$exe" ]; then
      kill -TERM "$pid" 2>/dev/null && pids+=("$pid:$name")
    else
      echo "[down] $name: pid ${pid:-?} not running (or not $exe); skipped" >&2
    fi
    rm -f "$f"
  done
  local p
  for p in "${pids[@]}"; do
    pid="${p%%:*}"; name="${p#*:}"
    for _ in $(seq 1 75); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    if kill -0 "$pid" 2>/dev/null; then echo "[down] $name ($pid) alive after 15 s: SIGKILL" >&2; kill -KILL "$pid" 2>/dev/null; fi
    echo "[down] stopped $name ($pid)" >&2
  done
}
stop_group kwok kube-scheduler kube-controller-manager
stop_group kube-apiserver
stop_group etcd
if [ "${KCP_KEEP:-0}" != 1 ]; then rm -rf "$KCP_RUN"; else echo "[down] kept $KCP_RUN (logs in $KCP_RUN/logs)" >&2; fi

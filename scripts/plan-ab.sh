#!/usr/bin/env bash
# Interleaved whole-process timing of two `karpenter plan` binaries on one dump (old, new, old,
# new, ...), so both see the same machine load. Prints one tab-separated row per run: wall and
# user seconds and peak RSS (GNU time -v), the 1-minute load average when the run started, and
# the number of NodeClaims planned (both binaries must agree).
#
#   scripts/plan-ab.sh OLD_KARPENTER NEW_KARPENTER DUMP.yaml [ROUNDS=5] [CATALOG=fake:400]
#
# The dump: `plan-dump 20000 > dump.yaml` (benches/src/bin/plan-dump.rs). docs/performance.md
# records the results.
set -euo pipefail
old=$1 new=$2 dump=$3 rounds=${4:-5} catalog=${5:-fake:400}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
printf 'round\tbuild\twall_s\tuser_s\tmaxrss_kb\tload1\tclaims\n'
for r in $(seq 1 "$rounds"); do
  for which in old new; do
    bin=$old
    [ "$which" = new ] && bin=$new
    load=$(cut -d' ' -f1 /proc/loadavg)
    /usr/bin/time -v "$bin" plan -f "$dump" --catalog "$catalog" -o json \
      >"$out/plan.json" 2>"$out/time.txt"
    wall=$(awk -F': ' '/Elapsed \(wall/ {print $2}' "$out/time.txt")
    user=$(awk -F': ' '/User time/ {print $2}' "$out/time.txt")
    rss=$(awk -F': ' '/Maximum resident/ {print $2}' "$out/time.txt")
    claims=$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["nodeClaims"]))' "$out/plan.json")
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$r" "$which" "$wall" "$user" "$rss" "$load" "$claims"
  done
done

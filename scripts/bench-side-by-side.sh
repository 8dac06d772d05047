#!/usr/bin/env bash
# Side-by-side scheduling benchmark: upstream Karpenter's own `BenchmarkScheduling*` test binary
# and our reporter, run alternately on the same machine in one script run, so that both see the
# same load. It never builds upstream: pass the path of an already-built upstream test binary
# (`go test -tags=test_performance -c ./pkg/controllers/provisioning/scheduling` in a checkout
# of kubernetes-sigs/karpenter at the version you compare against).
#
#   scripts/bench-side-by-side.sh --upstream PATH [--rounds R] [--rows 1000,5000,...]
#   UPSTREAM_SCHED_TEST=PATH scripts/bench-side-by-side.sh
#
# Rows: pod counts of upstream's BenchmarkScheduling<N> (diverse pods), plus `respect` and
# `ignore` (upstream's BenchmarkRespectPreferences / BenchmarkIgnorePreferences, 4,000 pods).
#
# Method (chosen so that it cannot flatter us):
# - every measurement is its own process, on both sides: upstream runs one benchmark with
#   `-test.benchtime=1x` (one Solve, timed after its scheduler and topology are set up); ours
#   runs the reporter with `--once` (the first solve of a fresh process, timed from the input to
#   the results: topology and every cache built inside the timed region);
# - within a round, each row runs upstream then ours, and the order flips every other round;
# - each round prints both figures with the 1-minute load average read just before each run;
# - the summary gives, per row, the median pods/s of each side over the rounds, the median of
#   the per-round ratios, and our peak RSS.
#
# Our reporter is built (release) by this script unless REPORTER points at a built one.
set -euo pipefail
cd "$(dirname "$0")/.."

upstream="${UPSTREAM_SCHED_TEST:-}"
rounds=3
rows="1000,5000,10000,20000"
usage() { sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
    case "$1" in
        --upstream) upstream="${2:?--upstream needs a path}"; shift 2 ;;
        --rounds) rounds="${2:?--rounds needs a number}"; shift 2 ;;
        --rows) rows="${2:?--rows needs a list}"; shift 2 ;;
        -h|--help) usage; exit 0 ;;
        *) echo "unknown argument: $1 (see --help)" >&2; exit 2 ;;
    esac
done
if [ -z "$upstream" ] || [ ! -x "$upstream" ]; then
    echo "need an executable upstream scheduling test binary: --upstream PATH or UPSTREAM_SCHED_TEST" >&2
    exit 2
fi
case "$rounds" in ''|*[!0-9]*|0) echo "--rounds must be a positive integer" >&2; exit 2 ;; esac

reporter="${REPORTER:-}"
if [ -z "$reporter" ]; then
    cargo build --release -q -p karpenter-bench --bin reporter
    reporter="${CARGO_TARGET_DIR:-target}/release/reporter"
fi
[ -x "$reporter" ] || { echo "reporter not found at $reporter" >&2; exit 2; }

load() { cut -d' ' -f1 /proc/loadavg; }

# upstream_row ROW -> pods/s of one upstream benchmark run
upstream_row() {
    local bench
    case "$1" in
        respect) bench=BenchmarkRespectPreferences ;;
        ignore) bench=BenchmarkIgnorePreferences ;;
        *) bench="BenchmarkScheduling$1" ;;
    esac
    local out
    out=$("$upstream" -test.run='^$' -test.bench="^${bench}\$" -test.benchtime=1x 2>&1) || {
        echo "upstream $bench failed:" >&2; echo "$out" >&2; return 1; }
    echo "$out" | awk '/^Benchmark/ { for (i = 2; i <= NF; i++) if ($i == "pods/sec") print $(i-1) }'
}

# ours_row ROW -> "pods/s peak_MB" of one reporter run
ours_row() {
    local row
    case "$1" in
        respect) row=respect:4000 ;;
        ignore) row=ignore:4000 ;;
        *) row="diverse:$1" ;;
    esac
    "$reporter" --once --raw --rows "$row" |
        awk '{ printf "%.1f %.1f\n", $2 / ($6 / 1e9), $7 / 1024 }'
}

tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
echo "upstream: $upstream"
echo "ours:     $reporter --once --raw --rows ROW"
echo "machine:  $(nproc) cpus, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'); $(date -u '+%Y-%m-%d %H:%M UTC')"
echo
printf '%-6s %-7s %12s %6s %12s %6s %9s %8s\n' round row "upstream/s" load "ours/s" load ratio "RSS MB"
IFS=, read -r -a row_list <<<"$rows"
for ((r = 1; r <= rounds; r++)); do
    for row in "${row_list[@]}"; do
        if (( r % 2 == 1 )); then
            lu=$(load); up=$(upstream_row "$row")
            lo=$(load); read -r us rss < <(ours_row "$row")
        else
            lo=$(load); read -r us rss < <(ours_row "$row")
            lu=$(load); up=$(upstream_row "$row")
        fi
        ratio=$(awk -v a="$us" -v b="$up" 'BEGIN { printf "%.1f", a / b }')
        printf '%-6s %-7s %12s %6s %12s %6s %8sx %8s\n' "$r" "$row" "$up" "$lu" "$us" "$lo" "$ratio" "$rss"
        echo "$row $up $lu $us $lo $ratio $rss" >>"$tmp"
    done
done

echo
echo "median of $rounds rounds"
printf '| %s | %s | %s | %s | %s | %s | %s |\n' row "upstream pods/s" "ours pods/s" "ours µs/pod" "ratio (median of rounds)" "load (min-max)" "our peak RSS"
printf '| --- | ---: | ---: | ---: | ---: | --- | ---: |\n'
for row in "${row_list[@]}"; do
    awk -v row="$row" '
        function median(a, n,   i, j, t) {
            for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
            return (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
        }
        $1 == row {
            n++; up[n] = $2; us[n] = $4; ra[n] = $6; rss[n] = $7
            if (lmin == "" || $3 < lmin) lmin = $3; if ($3 > lmax) lmax = $3
            if ($5 < lmin) lmin = $5; if ($5 > lmax) lmax = $5
        }
        END {
            if (n == 0) exit
            m = median(us, n)
            printf "| %s | %.1f | %.0f | %.1f | %.0fx | %s-%s | %.1f MB |\n", row, median(up, n), m, 1e6 / m, median(ra, n), lmin, lmax, median(rss, n)
        }' "$tmp"
done

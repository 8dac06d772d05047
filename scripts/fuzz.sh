#!/usr/bin/env bash
# Runs every cargo-fuzz target of fuzz/ briefly (libFuzzer, nightly toolchain). scripts/test
# calls it after the tests; run it alone for longer sessions:
#
#   scripts/fuzz.sh                                # every target, 20 s each
#   KARPENTER_FUZZ_SECONDS=600 scripts/fuzz.sh cron   # one target, 10 minutes
#
# Installs cargo-fuzz from crates.io (`cargo +nightly install cargo-fuzz --locked`) into a cache
# outside the clone when it is missing. Builds and corpora also live outside the clone:
#
#   KARPENTER_FUZZ_SECONDS     time budget per target, in seconds (default 20)
#   KARPENTER_FUZZ_TOOLS       where cargo-fuzz is installed (default /var/tmp/karpenter-rs-fuzz-tools)
#   KARPENTER_FUZZ_TARGET_DIR  the nightly build's target directory (default /var/tmp/karpenter-rs-fuzz-target)
#   KARPENTER_FUZZ_WORK        working corpora and crash artifacts (default /var/tmp/karpenter-rs-fuzz-work)
#
# Each target starts from its seed corpus (fuzz/corpus/<target>, read only) plus the working
# corpus of earlier runs; new inputs go to the working corpus, never into the clone. A crash
# prints the input's path: copy it to fuzz/regressions/<target>/ (the stable `fuzz` test of
# karpenter-cli runs every file there), fix the product, add a named test.
#
# A crash always fails the run. With CI=true, a fuzzer that cannot be installed or built fails
# it too; without CI, that is a warning and the fuzzers are skipped.
set -euo pipefail
cd "$(dirname "$0")/.."

SECONDS_PER_TARGET="${KARPENTER_FUZZ_SECONDS:-20}"
TOOLS="${KARPENTER_FUZZ_TOOLS:-/var/tmp/karpenter-rs-fuzz-tools}"
TARGET_DIR="${KARPENTER_FUZZ_TARGET_DIR:-/var/tmp/karpenter-rs-fuzz-target}"
WORK="${KARPENTER_FUZZ_WORK:-/var/tmp/karpenter-rs-fuzz-work}"
export PATH="$TOOLS/bin:$PATH"
# Debug assertions and overflow checks on (an overflow is a bug, even where release wraps); no
# sanitizer: the crates forbid unsafe code, and without ASan the cold build is much faster.
BUILD_FLAGS=(--release --debug-assertions --sanitizer none --target-dir "$TARGET_DIR")

unavailable() {
  if [ "${CI:-}" = true ]; then
    echo "error: $1 (CI=true)" >&2
    exit 1
  fi
  echo "warning: $1; the fuzz targets are skipped" >&2
  exit 0
}

t0=$(date +%s)
if ! rustup run nightly rustc --version >/dev/null 2>&1; then
  rustup toolchain install nightly --profile minimal >/dev/null 2>&1 \
    || unavailable "no nightly toolchain and it could not be installed"
fi
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
  echo "installing cargo-fuzz into $TOOLS"
  cargo +nightly install cargo-fuzz --locked --root "$TOOLS" \
    || unavailable "cargo-fuzz could not be installed"
fi

targets=("$@")
if [ "${#targets[@]}" -eq 0 ]; then
  mapfile -t targets < <(cargo +nightly fuzz list)
fi

echo "building ${#targets[@]} fuzz targets"
cargo +nightly fuzz build "${BUILD_FLAGS[@]}" || unavailable "the fuzz targets do not build"
echo "   ($(( $(date +%s) - t0 )) s)"

failed=()
for t in "${targets[@]}"; do
  mkdir -p "$WORK/corpus/$t" "$WORK/artifacts/$t"
  echo "fuzzing $t for ${SECONDS_PER_TARGET} s"
  log="$WORK/$t.log"
  # -timeout: one input running longer than this is reported as a failure (a hang).
  if cargo +nightly fuzz run "${BUILD_FLAGS[@]}" "$t" "$WORK/corpus/$t" "fuzz/corpus/$t" -- \
      -max_total_time="$SECONDS_PER_TARGET" -timeout=60 -rss_limit_mb=4096 \
      -artifact_prefix="$WORK/artifacts/$t/" -print_final_stats=1 >"$log" 2>&1; then
    grep -E '^stat::number_of_executed_units|^Done [0-9]+ runs' "$log" | tail -1 | sed 's/^/   /'
  else
    echo "error: fuzz target $t failed; its log: $log" >&2
    grep -E 'panicked|SUMMARY|Test unit written|ERROR' "$log" | head -5 >&2 || true
    failed+=("$t")
  fi
done
echo "fuzzing done in $(( $(date +%s) - t0 )) s"
if [ "${#failed[@]}" -gt 0 ]; then
  echo "error: failing fuzz targets: ${failed[*]} (crash inputs under $WORK/artifacts/)" >&2
  exit 1
fi

#!/usr/bin/env bash
# Installs dependencies, builds Kiln and runs the whole test suite with ctest; then a second phase
# builds the unit and small end-to-end tests with ASan + UBSan and bounds-checked kernels and runs
# them (scripts/sanitize.sh, build-asan/; KILN_SKIP_SANITIZE=1 skips it).
# Usage: scripts/test.sh [--fast]   (--fast skips tests labelled "slow"; three of the four shards
# of the torchvision zoo check, label "zoo", run only with KILN_TEST_ZOO=1)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
scripts/build.sh
# The benchmarks are not part of the default build (nobody runs them in CI), but they must keep
# compiling: a benchmark that no longer builds is found here, not when someone needs its figures.
cmake --build build --target bench_kernels tuner_quality
args=(--test-dir build --output-on-failure --timeout 1200 -j "${KILN_TEST_JOBS:-2}")
if [ "${1:-}" = "--fast" ]; then args+=(-LE slow)
else
  # e2e_bad_input_full (slow) tries every bad input in every entry point: a superset of
  # e2e_bad_input, which --fast runs instead.
  args+=(-E '^e2e_bad_input$')
  if [ "${KILN_TEST_ZOO:-0}" != 1 ]; then args+=(-LE zoo); fi
fi
ctest "${args[@]}"
if [ "${KILN_SKIP_SANITIZE:-0}" != 1 ]; then
  scripts/sanitize.sh
fi

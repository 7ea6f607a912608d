#!/usr/bin/env bash
# Installs dependencies, builds Kiln and runs the whole test suite with ctest.
# Usage: scripts/test.sh [--fast]   (--fast skips tests labelled "slow")
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
scripts/build.sh
args=(--test-dir build --output-on-failure --timeout 1200 -j "${KILN_TEST_JOBS:-2}")
if [ "${1:-}" = "--fast" ]; then args+=(-LE slow); fi
ctest "${args[@]}"

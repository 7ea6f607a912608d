#!/usr/bin/env bash
# The fairness check of `kiln compare` (a benchmark, not a test): every backend timed alone in a
# fresh process and inside the comparison, on the sample CNNs at 2 threads, in interleaved
# rounds; prints the ratio per backend and model (target 0.9-1.1) and Kiln's spread across 5
# fresh processes (target max/min <= 1.10). Builds first. Arguments go to scripts/bench_fairness.py
# (--models a,b --rounds N --threads N --repeat N --json FILE). Run it on a quiet machine.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
scripts/build.sh >/dev/null
exec /usr/bin/python3 scripts/bench_fairness.py "$@"

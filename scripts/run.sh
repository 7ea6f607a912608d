#!/usr/bin/env bash
# The main job: installs dependencies, builds Kiln, exports the sample models, then compiles
# MobileNetV2 at -O3 and compares its outputs and latency with PyTorch (eager and compiled).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
scripts/build.sh
model=build/models/mobilenet_v2.pt
echo
echo "== kiln compare $model -O3 =="
build/app/kiln compare "$model" -O3 --json build/mobilenet_v2_compare.json "$@"
echo "(JSON written to build/mobilenet_v2_compare.json)"

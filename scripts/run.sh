#!/usr/bin/env bash
# The main job: installs dependencies, builds Kiln, exports the sample models, then opens
# MobileNetV2 in Kiln Workbench (the desktop GUI). Without a display it falls back to the command
# line: compile MobileNetV2 at -O3 and compare its outputs and latency with PyTorch (eager and
# compiled).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
scripts/build.sh
model=build/models/mobilenet_v2.pt
if [ -n "${DISPLAY:-}" ] || [ -n "${WAYLAND_DISPLAY:-}" ]; then
  echo
  echo "== kiln-workbench $model =="
  exec build/app/gui/kiln-workbench "$model"
fi
echo
echo "run: no display (\$DISPLAY and \$WAYLAND_DISPLAY unset), so running the command-line job instead of Kiln Workbench"
echo "== kiln compare $model -O3 =="
build/app/kiln compare "$model" -O3 --json build/mobilenet_v2_compare.json "$@"
echo "(JSON written to build/mobilenet_v2_compare.json)"

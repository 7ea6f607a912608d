#!/usr/bin/env bash
# Evidence for a person to look at: starts kiln-workbench under Xvfb, lets it open MobileNetV2,
# profile it at -O2 and -O3, compare with PyTorch, sweep a few small batches, tune briefly, diff
# the two builds and open a corrupt file, and saves a PNG of every view into build/screenshots/.
# Builds nothing: run scripts/build.sh (or ninja kiln-workbench) first.
# Usage: scripts/screenshots.sh [BUILD_DIR] [MODEL]   (defaults: build, build/models/mobilenet_v2.pt)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
build=${1:-build}
workbench=$build/app/gui/kiln-workbench
if [ ! -x "$workbench" ]; then
  echo "screenshots: $workbench not found; build it first (scripts/build.sh)" >&2
  exit 1
fi
models=$(sed -n 's/^KILN_MODELS_DIR:PATH=//p' "$build/CMakeCache.txt" 2>/dev/null || true)
models=${models:-build/models}
model=${2:-$models/mobilenet_v2.pt}
out=build/screenshots
rm -rf "$out"
mkdir -p "$out"
# A fixed screen larger than the 1280×800 window, so nothing is clipped by the screen edge.
xvfb-run -a -s "-screen 0 1400x900x24" "$workbench" --models-dir "$models" --screenshots "$out" "$model"
echo "screenshots: $(ls "$out"/*.png | wc -l) PNGs in $out/"

#!/usr/bin/env bash
# The torchvision zoo breadth check (scripts/zoo.py) with Kiln's Python environment and this
# checkout's build (build/python, build/app/kiln). Arguments go to zoo.py, e.g.
#   scripts/zoo.sh --models resnet18,vit_b_16 --json zoo.json
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
py="$("$root/scripts/pyenv.sh")/bin/python"
[ -x "$py" ] || { echo "error: Kiln's Python environment is missing: run scripts/install-deps.sh" >&2; exit 6; }
export PYTHONPATH="$root/build/python${PYTHONPATH:+:$PYTHONPATH}"
export KILN_CLI="${KILN_CLI:-$root/build/app/kiln}"
exec "$py" "$root/scripts/zoo.py" "$@"

#!/usr/bin/env bash
# Configures and builds Kiln (Release, Ninja, ccache) into build/ and exports the sample models.
# Usage: scripts/build.sh [extra cmake args...]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
scripts/install-deps.sh
jobs=${KILN_BUILD_JOBS:-$(nproc)}
export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/ccache}
export CCACHE_MAXSIZE=${CCACHE_MAXSIZE:-5G}
# Paths under the checkout are hashed relative to it, so another clone (CI) reuses the cache.
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$root}
cmake --preset release "$@" >/dev/null
cmake --build --preset release -j "$jobs"

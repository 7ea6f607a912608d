#!/usr/bin/env bash
# Prints the folder of Kiln's cached Python environment (created by scripts/install-deps.sh):
# $KILN_PYENV when set, else $XDG_CACHE_HOME/kiln/pyenv (~/.cache/kiln/pyenv). Outside the
# checkout, so every clone on the machine (CI's too) shares it.
set -euo pipefail
echo "${KILN_PYENV:-${XDG_CACHE_HOME:-$HOME/.cache}/kiln/pyenv}"

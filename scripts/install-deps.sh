#!/usr/bin/env bash
# Installs every Debian 12 package Kiln needs to build, test and run, then Kiln's Python
# environment (scripts/python-requirements.txt: today's torch, ONNX Runtime, OpenVINO, pytest) from
# PyPI into a venv of Debian's /usr/bin/python3 cached outside the checkout (scripts/pyenv.sh).
# Idempotent: packages that are already present are skipped, `apt-get update` runs at most once
# per invocation, and the environment is rebuilt only when the pins change or it is broken.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)

# llvm-19-tools also brings FileCheck and lit, which run tests/filecheck/.
packages=(
  build-essential cmake ninja-build ccache pkg-config
  llvm-19-dev llvm-19-tools libzstd-dev zlib1g-dev libedit-dev libxml2-dev libffi-dev
  libtorch-dev python3-torch python3-torchvision python3-numpy
  qt6-base-dev qt6-charts-dev libqt6opengl6-dev libgl-dev
  libsqlite3-dev libbenchmark-dev libgtest-dev libgmock-dev nlohmann-json3-dev
  libcli11-dev libfmt-dev python3-venv pybind11-dev
  libxgboost-dev libgraphviz-dev librsvg2-bin
  libopenblas0-openmp xvfb xauth
  libonnx-dev python3-onnx libprotobuf-dev
  qemu-user gcc-aarch64-linux-gnu g++-aarch64-linux-gnu libc6-dev-arm64-cross
  nodejs lld-19 wasi-libc chromium
  slurm-wlm munge
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
else
  echo "install-deps: installing ${#missing[@]} packages: ${missing[*]}"
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  echo "install-deps: packages done"
fi

# npm's onnxruntime-web (the compare row onnxruntime-web runs its WASM backend in Node), pinned,
# into a cache outside the checkout like the Python environment ($KILN_NPM_DIR overrides it).
ort_web_version=1.30.0
npm_dir=${KILN_NPM_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/kiln/npm}
ort_web_json="$npm_dir/node_modules/onnxruntime-web/package.json"
if [ -f "$ort_web_json" ] && grep -q "\"version\": \"$ort_web_version\"" "$ort_web_json"; then
  echo "install-deps: onnxruntime-web $ort_web_version present in $npm_dir"
else
  echo "install-deps: installing npm onnxruntime-web $ort_web_version into $npm_dir"
  if ! command -v npm >/dev/null; then
    # Debian's nodejs comes without npm (NodeSource's carries its own: then this is skipped).
    SUDO=""
    if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends npm >/dev/null
  fi
  mkdir -p "$npm_dir"
  npm install --silent --no-audit --no-fund --prefix "$npm_dir" "onnxruntime-web@$ort_web_version" >/dev/null
fi

# The Python environment. A stamp holds the hash of the pins it was built from.
pyenv=$("$root/scripts/pyenv.sh")
requirements="$root/scripts/python-requirements.txt"
want=$(sha256sum "$requirements" | cut -d' ' -f1)
if [ -f "$pyenv/kiln-requirements.sha256" ] && [ "$(cat "$pyenv/kiln-requirements.sha256")" = "$want" ] &&
   "$pyenv/bin/python" -c 'import torch, torchvision, onnxruntime, openvino, onnx, pytest' 2>/dev/null; then
  echo "install-deps: python environment $pyenv up to date"
  exit 0
fi
echo "install-deps: creating the python environment $pyenv (PyPI, about 3 GB)"
rm -rf "$pyenv"
mkdir -p "$(dirname "$pyenv")"
/usr/bin/python3 -m venv "$pyenv"
"$pyenv/bin/python" -m pip install -q --disable-pip-version-check --upgrade pip
"$pyenv/bin/python" -m pip install -q --disable-pip-version-check -r "$requirements"
"$pyenv/bin/python" -c 'import torch, torchvision, onnxruntime, openvino, onnx, pytest'
echo "$want" > "$pyenv/kiln-requirements.sha256"
echo "install-deps: python environment done"

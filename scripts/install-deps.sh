#!/usr/bin/env bash
# Installs every Debian 12 package Kiln needs to build, test and run. Idempotent: packages that
# are already present are skipped, and `apt-get update` runs at most once per invocation.
set -euo pipefail

packages=(
  build-essential cmake ninja-build ccache pkg-config
  llvm-19-dev llvm-19-tools libzstd-dev zlib1g-dev libedit-dev libxml2-dev libffi-dev
  libtorch-dev python3-torch python3-torchvision python3-numpy
  qt6-base-dev qt6-charts-dev libqt6opengl6-dev libgl-dev
  libsqlite3-dev libbenchmark-dev libgtest-dev libgmock-dev nlohmann-json3-dev
  libcli11-dev libfmt-dev
  libxgboost-dev libgraphviz-dev librsvg2-bin
  libopenblas0-openmp xvfb xauth
  libonnx-dev python3-onnx libprotobuf-dev
  qemu-user gcc-aarch64-linux-gnu g++-aarch64-linux-gnu libc6-dev-arm64-cross
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

echo "install-deps: installing ${#missing[@]} packages: ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "install-deps: done"

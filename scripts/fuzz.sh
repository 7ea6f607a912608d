#!/usr/bin/env bash
# Builds Kiln's libFuzzer targets (tests/fuzz, clang-19, build-fuzz/) and runs each for a bounded
# time, printing the executions per target from libFuzzer's final stats. Not part of CI.
# New crashing inputs are saved to build-fuzz/crashes/<target>/; after fixing the bug, copy each
# into tests/fuzz/regressions/<target>/ so that the fuzz-regress ctest keeps checking it.
# Seeds: tests/fuzz/corpus/<target> plus, for the TorchScript importer, the sample models in
# build/models (zip archives; run scripts/build.sh first to have them).
# Usage: scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]   (default 120 s, all targets)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
seconds=${1:-120}
shift || true
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then targets=(graph_parser npy records torchscript); fi

missing=()
for p in clang-19 libclang-rt-19-dev; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  echo "fuzz: installing ${missing[*]}"
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

build=build-fuzz
export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/ccache}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER=clang-19 -DCMAKE_CXX_COMPILER=clang++-19 \
  -DKILN_FUZZ=ON -DKILN_BUILD_GUI=OFF -DKILN_MODELS_DIR="$root/build/models" >/dev/null
# A target that does not build is skipped with a note. (kiln_importers and fuzz_torchscript.cpp are
# compiled as C++17 in this tree: clang-19 cannot compile Debian's libtorch headers as C++20.)
built=()
for t in "${targets[@]}"; do
  if cmake --build "$build" -j "${KILN_BUILD_JOBS:-$(nproc)}" --target "fuzz_$t" >"$build/build_$t.log" 2>&1; then
    built+=("$t")
  else
    echo "fuzz: fuzz_$t does not build, skipped (see $build/build_$t.log)"
  fi
done
targets=("${built[@]}")

# Leaks of libtorch's and LLVM's static state are not what these targets look for.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:allocator_may_return_null=1}
summary=()
for t in "${targets[@]}"; do
  corpus=$build/corpus/$t
  crashes=$build/crashes/$t
  mkdir -p "$corpus" "$crashes"
  seeds=(tests/fuzz/corpus/$t tests/fuzz/regressions/$t)
  extra=()
  if [ "$t" = torchscript ]; then
    # Small sample models only: libFuzzer mutates at most -max_len bytes of each.
    mkdir -p "$build/seeds/torchscript"
    find build/models -name '*.pt' -size -64k -exec cp {} "$build/seeds/torchscript/" \; 2>/dev/null || true
    seeds+=("$build/seeds/torchscript")
    extra+=(-max_len=65536)
  fi
  if [ "$t" = graph_parser ]; then extra+=(-dict=tests/fuzz/graph_parser.dict); fi
  log=$build/fuzz_$t.log
  echo "fuzz: $t for ${seconds} s (log: $log)"
  set +e
  # Fork mode keeps fuzzing after a crash (each one is saved); -jobs stays 1 (2-core machines).
  "$build/tests/fuzz/fuzz_$t" -fork=1 -ignore_crashes=1 -ignore_ooms=1 -ignore_timeouts=1 \
    -max_total_time="$seconds" -timeout=30 -rss_limit_mb=4096 -artifact_prefix="$crashes/" \
    "${extra[@]}" "$corpus" "${seeds[@]}" >"$log" 2>&1
  status=$?
  set -e
  # The fork-mode parent's progress lines: "#RUNS: cov: ... time: Ns job: K ...".
  runs=$(grep -oE '^#[0-9]+:' "$log" | tr -d '#:' | tail -1)
  found=$(find "$crashes" -type f | wc -l)
  line="$t: ${runs:-?} executions in ${seconds} s, exit $status, $found crashing inputs in $crashes"
  echo "fuzz: $line"
  summary+=("$line")
done
echo "fuzz: summary"
printf '  %s\n' "${summary[@]}"

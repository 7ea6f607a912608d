// Schedule knobs (heuristic defaults) and vector-code helpers; see schedule.h.
#include "core/lower/schedule.h"

#include <algorithm>

#include "core/lower/lower_internal.h"
#include "core/lower/schedule_config.h"
#include "runtime/error.h"
#include "runtime/thread_pool.h"

namespace kiln::core::lower {

using namespace tir;

namespace {

/// "aarch64-unknown-linux-gnu" and Apple's "arm64-apple-macosx" are AArch64.
bool isAArch64(const std::string& triple) {
  return triple.rfind("aarch64", 0) == 0 || triple.rfind("arm64", 0) == 0;
}

}  // namespace

LowerOptions lowerOptionsFor(const std::string& triple, const std::string& cpu, const std::string& features) {
  LowerOptions options;
  if (isAArch64(triple)) {
    options.vectorLanes = 4;  // 128-bit NEON vectors, v0-v31
    options.vectorRegisters = vectorRegistersForLanes(4);
    return options;
  }
  if (triple.rfind("wasm", 0) == 0) {
    // SIMD128: 128-bit v128 values, 4 f32 lanes (without +simd128 LLVM splits the same IR into
    // scalars). Register tiles as for the other 4-lane targets: the engine's register allocator
    // (16 xmm on an x86-64 host) spills what does not fit.
    options.vectorLanes = 4;
    options.vectorRegisters = vectorRegistersForLanes(4);
    return options;
  }
  // The CPU's own features, then the feature list in order (a later "-avx512f" wins).
  bool avx512 = false;
  for (const char* name : {"skylake-avx512", "cascadelake", "cooperlake", "cannonlake", "icelake", "tigerlake",
                           "rocketlake", "sapphirerapids", "emeraldrapids", "graniterapids", "znver4", "znver5",
                           "x86-64-v4"})
    avx512 |= cpu.rfind(name, 0) == 0;
  size_t start = 0;
  while (start <= features.size()) {
    size_t end = features.find(',', start);
    if (end == std::string::npos) end = features.size();
    std::string flag = features.substr(start, end - start);
    if (flag == "+avx512f") avx512 = true;
    if (flag == "-avx512f") avx512 = false;
    start = end + 1;
  }
  options.vectorLanes = avx512 ? 16 : 8;
  options.vectorRegisters = vectorRegistersForLanes(options.vectorLanes);
  return options;
}

LowerOptions lowerOptionsFor(const std::string& cpu, const std::string& features) {
#if defined(__aarch64__)
  return lowerOptionsFor("aarch64", cpu, features);
#else
  return lowerOptionsFor("x86_64", cpu, features);
#endif
}

int vectorRegistersForLanes(int lanes) { return lanes == 8 ? 16 : 32; }

int accumulatorBudget(const LowerOptions& options) {
  // Keep a few registers for the weight vectors and the broadcast input.
  return std::max(4, options.vectorRegisters - (options.vectorRegisters >= 32 ? 4 : 3));
}

int64_t channelBlock(int64_t channels, const LowerOptions& options) {
  int64_t block = std::max(1, options.vectorLanes);
  while (block > 1 && channels % block != 0) block /= 2;
  return block;
}

int packedConvOcVecs(int64_t outChannels, int64_t block, int64_t rowWidth, bool depthwise,
                     const LowerOptions& options) {
  if (depthwise || block <= 0) return 1;
  int64_t blocks = outChannels / block;
  int budget = accumulatorBudget(options);
  // Narrow rows leave accumulators unused: cover more channels instead.
  if (rowWidth * 2 <= budget / 2 && blocks % 4 == 0) return 4;
  if (blocks % 2 == 0) return 2;
  if (blocks % 3 == 0 && budget >= 24) return 3;
  return 1;
}

bool packedConvFlattens(int64_t kh, int64_t kw, const std::vector<int64_t>& stride, const std::vector<int64_t>& pad,
                        int64_t outWidth, const LowerOptions& options) {
  bool pointwise = kh == 1 && kw == 1 && stride[0] == 1 && stride[1] == 1 && pad[0] == 0 && pad[1] == 0;
  return pointwise && outWidth < accumulatorBudget(options) / 2;
}

bool packedConvTileFits(int64_t ocVecs, int64_t owBlock, const LowerOptions& options) {
  // The weight vectors are loaded one at a time between FMAs, so a full budget of accumulators
  // does not spill (4 × 7 runs at the FMA peak with 32 registers).
  return ocVecs >= 1 && owBlock >= 1 && ocVecs * owBlock <= accumulatorBudget(options);
}

bool convChannelsOuter(int64_t weightElems, int64_t activationElems) { return weightElems >= activationElems; }

const std::vector<int64_t>& parallelChunkChoices() {
  static const std::vector<int64_t> choices{1, runtime::kDefaultChunksPerThread, 16};
  return choices;
}

int64_t defaultParallelChunks() { return runtime::kDefaultChunksPerThread; }

int64_t parallelChunksOf(const Knobs* tuned) {
  int64_t chunks = tuned ? knob(*tuned, "par_chunks", defaultParallelChunks()) : defaultParallelChunks();
  const auto& choices = parallelChunkChoices();
  return std::find(choices.begin(), choices.end(), chunks) != choices.end() ? chunks : defaultParallelChunks();
}

void recordSchedule(tir::PrimFunc& func, const std::string& schedule) {
  if (schedule.empty()) return;
  func.attrs["schedule"] = schedule;
  int64_t chunks = knob(parseKnobs(schedule), "par_chunks", defaultParallelChunks());
  if (chunks != defaultParallelChunks()) func.attrs["parallel_chunks"] = std::to_string(chunks);
}

// ---- window geometry ------------------------------------------------------------------------

std::pair<int64_t, int64_t> WindowAxis::interior() const {
  int64_t lo = (pad + stride - 1) / stride;
  int64_t last = in - 1 + pad - (kernel - 1) * dilation;  // largest o·stride whose window fits
  int64_t hi = last < 0 ? 0 : last / stride + 1;
  lo = std::min(lo, out);
  hi = std::clamp(hi, lo, out);
  return {lo, hi};
}

Expr WindowAxis::inputIndex(const Expr& o, const Expr& k) const {
  Expr i = stride == 1 ? o : o * stride;
  if (pad != 0) i = i - pad;
  return i + (dilation == 1 ? k : k * dilation);
}

std::pair<Expr, Expr> WindowAxis::tapRange(const Expr& o) const {
  auto [lo, hi] = interior();
  if (lo == 0 && hi == out) return {i64(0), i64(kernel)};
  // First tap: k·d ≥ pad − o·s; one past the last: k·d < in + pad − o·s.
  Expr start = pad - (stride == 1 ? o : o * stride);
  Expr end = in + pad - (stride == 1 ? o : o * stride);
  Expr first = dilation == 1 ? max(start, 0) : (max(start, 0) + (dilation - 1)) / dilation;
  Expr last = dilation == 1 ? end : (end + (dilation - 1)) / dilation;
  first = min(first, kernel);
  last = min(last, kernel);
  return {first, max(last - first, 0)};
}

// ---- vector expressions -----------------------------------------------------------------------

Expr vramp(const Expr& base, int lanes) { return lanes == 1 ? base : Ramp::make(base, i64(1), lanes); }

Expr vload(const Buffer& buffer, const Expr& base, int lanes) { return Load::make(buffer, vramp(base, lanes)); }

Stmt vstore(const Buffer& buffer, const Expr& base, Expr value) {
  int lanes = value.type().lanes;
  return Store::make(buffer, vramp(base, lanes), std::move(value));
}

Expr splat(const Expr& v, int lanes) { return lanes == 1 ? v : Broadcast::make(v, lanes); }

RegisterTile::RegisterTile(const std::string& name, Type elem, int count, int lanes)
    : m_buffer(makeBuffer(name, elem.element(), {int64_t{count} * lanes})), m_lanes(lanes) {}

Expr RegisterTile::get(int i) const { return vload(m_buffer, i64(int64_t{i} * m_lanes), m_lanes); }

Stmt RegisterTile::set(int i, Expr value) const {
  KILN_ASSERT(value.type().lanes == m_lanes, "RegisterTile::set: lane count differs");
  return vstore(m_buffer, i64(int64_t{i} * m_lanes), std::move(value));
}

Stmt RegisterTile::fma(int i, const Expr& a, const Expr& b) const { return set(i, get(i) + a * b); }

}  // namespace kiln::core::lower

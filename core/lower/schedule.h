// Target facts and shared choices of the lowerings' schedules: the vector lanes and registers of
// a target (LowerOptions), the accumulator budget a register tile may use, the channel block
// alter-layout packs by, the packed convolution's untuned choices that alter-layout must agree on
// (weight packing, Winograd or direct), parallel launch granularities, Winograd's matrices, the
// geometry of a window along one axis, and vector-expression helpers.
//
// The schedules themselves are traces of core/tir/schedule.h primitives applied to plain loop
// nests by the sketches (conv_search.h, winograd_search.h, gemm_search.h, nest_search.h), whose
// annotations the tuner searches; a lowering records the annotation it used in
// PrimFunc::attrs["schedule"] ("name=value,...") and the trace in attrs["trace"]. A register tile
// is a local buffer indexed only by constants once its loops are unrolled; LLVM's SROA promotes
// it to registers (one vector register per accumulator).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/lower/lower.h"
#include "core/lower/schedule_config.h"
#include "core/tir/stmt.h"

namespace kiln::core::lower {

/// LowerOptions for a target: its LLVM triple, CPU name and feature string ("+avx2,+avx512f,...").
/// AArch64 (NEON, 128-bit vectors): 4 f32 lanes and 32 registers, whatever the CPU (SVE CPUs too:
/// Kiln emits fixed-width vectors). WebAssembly (wasm32/wasm64, SIMD128): 4 f32 lanes too. x86: 16 lanes and 32 registers with AVX-512F, else 8 lanes and
/// 16 registers; named CPUs without an explicit feature list count as AVX-512 when LLVM knows
/// them as such (skylake-avx512, znver4, ...).
LowerOptions lowerOptionsFor(const std::string& triple, const std::string& cpu, const std::string& features);
/// The same for a target of this machine's architecture (a host CPU name, a tuning candidate).
LowerOptions lowerOptionsFor(const std::string& cpu, const std::string& features);

/// The vector registers of the targets whose f32 vectors have `lanes` lanes: 32 for 4 (NEON) and
/// 16 (AVX-512), 16 for 8 (AVX2). What a pass that knows only the lane count (alter-layout) plans
/// register tiles with, so it packs weights for the tiles lowering picks.
int vectorRegistersForLanes(int lanes);

// ---- knobs ----------------------------------------------------------------------------------

/// Vector registers that hold accumulators (the rest hold weights and broadcast inputs).
int accumulatorBudget(const LowerOptions& options);

/// The channel block used for `channels` channels: the largest power of two ≤ the target's lanes
/// that divides it (1 for odd counts). Every tensor with that many channels uses this block, so
/// producers and consumers agree without transforms.
int64_t channelBlock(int64_t channels, const LowerOptions& options);

/// How many `block`-wide output-channel vectors one packed-conv tile covers (this fixes the
/// weight packing [O/(v·block), I/x, KH, KW, x, v·block], so alter-layout asks it). `rowWidth` is
/// what a tile's columns run along: output columns, a flattened pointwise conv's pixels, or a
/// Winograd convolution's output tiles.
int packedConvOcVecs(int64_t outChannels, int64_t block, int64_t rowWidth, bool depthwise,
                     const LowerOptions& options);

/// The row a packed conv tiles: a pointwise convolution (1×1, stride 1, no padding) whose output
/// rows are narrower than a two-vector tile reads and writes its spatial axes as one contiguous
/// row of OH·OW columns (a plain GEMM), so its tiles stay full; otherwise a row of OW.
bool packedConvFlattens(int64_t kh, int64_t kw, const std::vector<int64_t>& stride, const std::vector<int64_t>& pad,
                        int64_t outWidth, const LowerOptions& options);

/// Whether a packed-conv register tile of `ocVecs` × `owBlock` accumulators fits the vector
/// registers (accumulatorBudget; larger tiles would spill).
bool packedConvTileFits(int64_t ocVecs, int64_t owBlock, const LowerOptions& options);

/// The untuned order of a packed or Winograd convolution's parallel loop (knob oc_outer): output
/// channel groups outside rows when the layer's weights are at least as large as the activation
/// it reads, so each thread streams half of them; rows (tiles) outside otherwise, so that thread i
/// writes the same rows that it reads, the rows the previous layer's thread i wrote (the runtime
/// gives thread i the same share of every launch). Measured back to back at 2 threads, with the
/// two CPUs on cores that share no cache: 3–16 % faster on the five sample CNNs; with them on
/// one complex within ±2 %.
bool convChannelsOuter(int64_t weightElems, int64_t activationElems);

/// Parallel granularity of the packed convolutions (knob `par_chunks`): how many chunks per
/// thread their parallel loops are cut into (runtime/thread_pool.h). Fewer, larger chunks keep a
/// thread on neighbouring data; more, smaller ones let the other threads take over the work of
/// one the OS deschedules. The heuristic keeps the runtime's default.
const std::vector<int64_t>& parallelChunkChoices();
int64_t defaultParallelChunks();
/// The `par_chunks` of a record when it is one of the choices, else the default.
int64_t parallelChunksOf(const Knobs* tuned);

/// Records a lowering's knobs on its kernel: attrs["schedule"] and, when the knobs ask for a
/// parallel granularity other than the runtime's default, attrs["parallel_chunks"] (codegen then
/// launches the kernel's parallel loops with that many chunks per thread).
void recordSchedule(tir::PrimFunc& func, const std::string& schedule);

// ---- Winograd convolution (ops_conv_winograd.cpp) -------------------------------------------

/// Whether a convolution can run as Winograd F(m×m, 3×3): 3×3, stride 1, dilation 1, groups 1,
/// padding ≤ 2 (so every output tile reads at least one input row and column).
bool winogradEligible(const ConvGeometry& g);

/// The algorithm (knob `algo`) alter-layout picks for a packed convolution without a tuning
/// record: 0 (direct) or an output tile size m of Winograd F(m×m, 3×3) (2 or 4).
int packedConvAlgo(const ConvGeometry& g, const LowerOptions& options);

/// The transforms of Winograd F(m×m, 3×3) (m = 2 or 4; α = m + 2 input tile), built by
/// Toom-Cook from the interpolation points 0, ±1 (m = 2) and 0, ±1, 1/2, −2 (m = 4), plus ∞:
///   Y = Aᵀ [(G g Gᵀ) ⊙ (Bᵀ d B)] A  for a 3×3 filter g and an α×α input tile d.
/// Aᵀ and Bᵀ hold only dyadic rationals (exact in f32); the 1/Π(pᵢ − pⱼ) scalings sit in G,
/// which is applied at compile time in double precision. Row-major.
struct WinogradMatrices {
  int m = 0, alpha = 0;
  std::vector<double> at;  // Aᵀ: m × α
  std::vector<double> g;   // G: α × 3
  std::vector<double> bt;  // Bᵀ: α × α
};
const WinogradMatrices& winogradMatrices(int m);

// ---- windows --------------------------------------------------------------------------------

/// One axis of a pooling or convolution window: the input extent, the outputs, and the window's
/// geometry along the axis.
struct WindowAxis {
  int64_t in = 0, out = 0, kernel = 1, stride = 1, pad = 0, dilation = 1;
  /// Output positions [lo, hi) whose whole window lies inside [0, in).
  std::pair<int64_t, int64_t> interior() const;
  /// Input position of tap `k` at output `o`.
  tir::Expr inputIndex(const tir::Expr& o, const tir::Expr& k) const;
  /// The taps [lo, lo + extent) of output `o` that read inside the input, as expressions of `o`
  /// (constants when every window is interior).
  std::pair<tir::Expr, tir::Expr> tapRange(const tir::Expr& o) const;
};

// ---- vector expressions -----------------------------------------------------------------------

/// Ramp(base, 1, lanes), or `base` when lanes == 1.
tir::Expr vramp(const tir::Expr& base, int lanes);
/// A contiguous load of `lanes` elements at `base` (a scalar load when lanes == 1).
tir::Expr vload(const tir::Buffer& buffer, const tir::Expr& base, int lanes);
tir::Stmt vstore(const tir::Buffer& buffer, const tir::Expr& base, tir::Expr value);
/// Broadcast(v, lanes), or `v` when lanes == 1.
tir::Expr splat(const tir::Expr& v, int lanes);

/// A tile of `count` accumulators of `lanes` lanes in one local buffer.
class RegisterTile {
 public:
  RegisterTile(const std::string& name, tir::Type elem, int count, int lanes);
  const tir::Buffer& buffer() const { return m_buffer; }
  int lanes() const { return m_lanes; }
  tir::Expr get(int i) const;
  tir::Stmt set(int i, tir::Expr value) const;
  /// acc[i] = acc[i] + a * b (contracted to an FMA by code generation).
  tir::Stmt fma(int i, const tir::Expr& a, const tir::Expr& b) const;

 private:
  tir::Buffer m_buffer;
  int m_lanes;
};

}  // namespace kiln::core::lower

// alter-layout (O3): rewrites convolutions with constant weights to the packed NCHW[x]c layout
// (activations [N, C/x, H, W, x], weights pre-packed at compile time to [O/y, I/x, KH, KW, x, y]),
// keeps elementwise/broadcast ops that follow in the packed layout, and inserts layout
// transforms only where a packed tensor meets an op that needs plain NCHW (graph edges, dense,
// reshape). Lanes come from the target's vector width (8 for AVX2 f32, 16 for AVX-512).
//
// Which ops stay packed (the rest are barriers that read plain NCHW):
// - conv2d with a constant weight, groups 1 or depthwise (groups = C = O) → conv2d_nchwc, or
//   conv2d_winograd_nchwc for a 3×3 stride-1 conv whose tuning record (or the heuristic,
//   core/lower/schedule.h packedConvAlgo) asks for Winograd, up to the output tile the option
//   `winograd` allows (4: F(4×4, 3×3); 2: F(2×2, 3×3) where F(4×4) would run; 0: none);
// - elementwise unary ops and copies of a packed value;
// - broadcasting binary ops whose operands are packed, per-channel or channel-free constants
//   (repacked at compile time), or rank-4 values (transformed or reshaped to the packed form);
// - max/avg/adaptive-avg pooling (their lowerings accept rank 5);
// - concat along channels when every input and the result use the same channel block.
// Channel blocks depend only on the channel count (core/lower/schedule.h channelBlock), so a
// producer and all its consumers agree; odd counts use block 1 (same memory order as NCHW).
#pragma once

#include "core/ir/graph.h"
#include <memory>

#include "core/passes/pass_registry.h"

namespace kiln::core::passes {

struct AlterLayoutOptions {
  int lanes = 8;  // x: the channel block, normally the f32 vector width of the target
  /// Tuned knobs: a record's oc_vecs decides how many output blocks a conv's packed weight
  /// interleaves and its algo whether a 3×3 conv becomes conv2d_winograd_nchwc with a
  /// Winograd-transformed weight (core/lower/schedule_config.h); other convs use the heuristic.
  std::shared_ptr<const lower::ScheduleConfigs> schedules;
  /// The largest Winograd output tile m allowed (4, 2 or 0), for the heuristic and records alike:
  /// F(4×4, 3×3) rounds more than F(2×2) (about 2× the error of direct convolutions on 100-layer
  /// ResNets, README "Winograd and accuracy"); 2 or 0 trade speed for it.
  int winograd = 4;
};

/// Returns true when the graph changed. The graph computes the same values (up to float
/// reassociation) at its outputs, in the same layouts. Counters: "convs" (convolutions packed),
/// "packed-ops" (other ops kept packed), "transforms" (layout_transform nodes inserted).
bool alterLayout(Graph& graph, const AlterLayoutOptions& options = {}, PassCounters* counters = nullptr);

// ---- compile-time repacking (also used by tests and benchmarks) ----------------------------

/// [N, C, H, W] → [N, C/block, H, W, block]; C must be a multiple of block.
runtime::Tensor packChannels(const runtime::Tensor& nchw, int64_t block);
/// [N, C/x, H, W, x] → [N, C, H, W].
runtime::Tensor unpackChannels(const runtime::Tensor& packed);
/// OIHW → [O/outBlock, I/inBlock, KH, KW, inBlock, outBlock]; depthwise [O, 1, KH, KW] →
/// [O/outBlock, 1, KH, KW, 1, outBlock].
runtime::Tensor packConvWeight(const runtime::Tensor& oihw, int64_t inBlock, int64_t outBlock, bool depthwise);
/// OIHW 3×3 → the Winograd F(m×m, 3×3) filter [O/outBlock, α, α, I, outBlock] (α = m + 2):
/// u[o/ob, ξ, ν, i, o%ob] = (G g Gᵀ)[ξ, ν] of g = w[o, i], computed in double precision.
runtime::Tensor winogradConvWeight(const runtime::Tensor& oihw, int m, int64_t outBlock);

}  // namespace kiln::core::passes

// Template-free schedules for matmul: a plain loop nest the schedule primitives (core/tir/
// schedule.h) transform, and the sketch rule whose annotations the tuner searches.
//
// The plain nest of y[..., M, N] = a[..., M, K] · b[..., K, N] (numpy broadcasting over the
// batch axes, flattened into one batch loop; both operands of rank ≥ 2):
//
//   for zb, zi, zj:        y[zb, zi, zj] = 0
//   for b, i, j, k:        y[b, i, j] = y[b, i, j] + a[b', i, k] · b[b'', k, j]
//
// A fused epilogue is not part of it: the fused lowering (fused.cpp) applies it in place after
// an anchor that never called it, so a trace recorded on a standalone task replays unchanged on
// every kernel with the key.
//
// The sketch (multi-level tiling of the reduction nest, TVM Ansor's "SSRSRS" cut down to what a
// CPU register tile needs), as primitives on that nest:
//
//   split(i; mi, 1)                  row tile, a tail loop for the M mod mi last rows
//   reorder(j, i_i)                  rows of the tile inside the column loop
//   split(j; nv·L, 1)                column tile of nv vectors of L lanes, tail loop for the rest
//   split(k; kt, 0)                  (kt > 0) cache block of the reduction
//   reorder(j_o, k, i_i, j_i)        (with kt: k_o, j_o, k_i, i_i, j_i) the tile innermost
//   split(j_i; L, 0)  unroll(j_i_o)  unroll(i_i)        the mi × nv register tile
//   parallel(i_o | b | fuse(b, i_o))                    the outer data-parallel loop
//   vectorize(j_i_i)                 contiguous along j in y and b, a broadcast of a[.., i, k]
//   init nest: split(zj; L, 1) vectorize(zj_i), parallel of its outer loop
//
// Its annotation (the knobs the tuner searches: mi, nv, kt, par) fills the split factors and the
// parallel choice; factors that do not divide M or N leave tail loops. A configuration without
// "mi" (the heuristic's rows/cols) keeps the hand-written lowering in ops_gemm.cpp, which stays
// the default: the search only replaces it where a record says a trace is faster.
#pragma once

#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "core/ir/graph.h"
#include "core/lower/lower.h"
#include "core/lower/schedule_config.h"
#include "core/tir/schedule.h"

namespace kiln::core::lower {

/// A numpy matmul of two operands of rank ≥ 2.
struct MatmulShape {
  Shape a, b;      // the operands' full shapes
  Shape batch;     // the output's batch axes (broadcast of both operands' leading axes)
  int64_t m = 1, k = 1, n = 1, batches = 1;
  double flops() const { return 2.0 * static_cast<double>(batches * m * n) * static_cast<double>(k); }
};

/// The shape of matmul(a, b); nullopt when an operand has rank < 2 or the batch axes do not
/// broadcast.
std::optional<MatmulShape> matmulShape(const Shape& a, const Shape& b);
/// "matmul:ra=3,a0=12,a1=128,a2=64,rb=3,b0=12,b1=64,b2=128:f32" (both shapes, rank first).
std::string matmulTuneKey(const MatmulShape& s, DType dtype);
/// The shape a matmul key's parameters describe; throws kiln::Error (InvalidInput) when they do
/// not describe one.
MatmulShape matmulShapeOfKey(const Knobs& params, const std::string& key);

/// The plain loop nest over operands `a`, `b` and output `y` (see the file comment).
tir::Stmt matmulPlainNest(const MatmulShape& s, const tir::Buffer& a, const tir::Buffer& b, const tir::Buffer& y);
/// A standalone function over buffers a, b, y of the key's shapes holding the plain nest: what
/// traces of a matmul key are recorded on and checked against.
tir::PrimFunc matmulPlainFunc(const std::string& key);

/// The hand-written lowering's configuration (rows, cols), as it records it in attrs["schedule"]:
/// the default point of a matmul key's space.
Knobs matmulHandKnobs(const MatmulShape& s, const LowerOptions& options);
/// Its row tile (the largest of 4, 3, 2, 1 dividing M) and column vectors per tile.
int matmulHandRows(int64_t m);
int matmulHandVectors(int rows, int budget);

/// The most multiply-adds the fused parallel loop (par 3) may hold: its legality check replays them.
inline constexpr int64_t kMatmulCheckedIterations = int64_t{1} << 20;

/// Whether annotation `knobs` is one the sketch takes for this shape on `lanes`-wide vectors
/// (mi ≤ M, nv·lanes ≤ N, kt a proper divisor of K or 0, the parallel choice available: par 1
/// parallel row tiles (≥ 2 of them), 2 the batch loop (≥ 2 batches; with two batch axes longer
/// than 1 the whole product within kMatmulCheckedIterations), 3 the fused batch × row-tile loop
/// (M divisible by mi, the whole product within that limit)).
bool matmulAnnotationFits(const MatmulShape& s, const Knobs& knobs, int lanes);
/// Every annotation that fits, in a fixed order.
std::vector<Knobs> matmulAnnotations(const MatmulShape& s, int lanes);
/// Applies the sketch with annotation `knobs` to a Schedule over the plain nest; throws
/// kiln::Error when a primitive refuses it.
void applyMatmulSketch(tir::Schedule& sched, const MatmulShape& s, const Knobs& knobs, int lanes);
/// The sketch's trace for a key and annotation (recorded on matmulPlainFunc(key)).
tir::Trace matmulTrace(const std::string& key, const Knobs& knobs, int lanes);

}  // namespace kiln::core::lower

// Template-free schedules for the three GEMM kernels, matmul, dense and dense_packed: for each, a plain
// loop nest the schedule primitives (core/tir/schedule.h) transform, and the sketch rule whose
// annotations the tuner searches. A configuration with "mi" is a sketch annotation; a record
// stores the trace it makes beside it.
//
// ## matmul
//
// The plain nest of y[..., M, N] = a[..., M, K] · b[..., K, N] (numpy broadcasting over the
// batch axes, flattened into one batch loop; both operands of rank ≥ 2):
//
//   for b, i, j, k:        y[b, i, j] = select(k == 0, 0, y[b, i, j]) + a[b', i, k] · b[b'', k, j]
//
// a reduction that starts from 0 at its first step, with no pass of its own. A fused epilogue
// is not part of it: it is applied where the tile is written back (the scheduled nest never
// reads y, so each element's last store is its result), so a trace recorded on a standalone
// task replays unchanged on every kernel with the key.
//
// The sketch (multi-level tiling of the reduction nest, TVM Ansor's "SSRSRS" cut down to what a
// CPU register tile needs), as primitives on that nest, with L lanes (the target's, halved while
// wider than N):
//
//   split(i; mi, 1)                  row tile, a tail loop for the M mod mi last rows
//   for the row tile (rows i_i) and then the tail rows (i_t, with its loops j_t, k_t):
//     reorder(j, i_i)                rows of the tile inside the column loop
//     split(j; nv·L, 1)              column tile of nv vectors, a tail loop for the rest
//     split(k; kt, 0)                (kt > 0, row tile only) cache block of the reduction
//     reorder(j_o, k, i_i, j_i)      (with kt: k_o, j_o, k_i, i_i, j_i) the tile innermost
//     split(j_i; L, 0)  unroll(j_i_o)  unroll(i_i)          the mi × nv register tile
//     cache_write(k | k_i)           accumulated in a local buffer (registers) over the reduction,
//                                    starting from 0 (no read of y; with kt, from y after the
//                                    first block)
//     the column tail (N mod nv·L columns): reorder(k, rows, j) unroll(rows) cache_write(k), one
//                                    narrower tile in vectors of halving widths
//   parallel(i_o | b | fuse(b, i_o))                        the outer data-parallel loop; with
//                                    tail rows and par 3, fission(b) first: the row tiles of all
//                                    batches in one parallel loop, the tail rows' tiles in others
//   vectorize every tile's column loop and its copies (_r, _w): contiguous along j in y and b,
//                                    a broadcast of a[.., i, k]
//
// Its annotation (the knobs the tuner searches: mi, nv, kt, par) fills the split factors and the
// parallel choice. Every matmul of N ≥ 2 columns is this sketch (a vector first operand is one
// row): untuned, with matmulDefaultKnobs.
//
// One output column (N = 1: b a vector or one column, so contiguous along k like a row of dense's
// w) takes the dot-product form instead, on the same plain nest (its j loop of one iteration):
//   split(i; mi, 1)                  row tiles, a tail loop for the M mod mi last rows
//   per tile (then the tail): reorder(k, rows, j)  cache_write(k)  and dense's dot-product tile
//                                    over k (split(k; L, 1), rfactor(k_i), vectors of partial
//                                    sums folded as a tree; L the lanes, halved while wider than K)
//   parallel(i_o | b | fuse(b, i_o))  par 1, 2, 3 (3 only without tail rows)
// Its annotation is mi (at most 8) and par, no nv: untuned, matmulDefaultRows and the first
// parallel choice of 3, 2, 1 that fits where the product is worth threads.
//
// Records of the hand-written schedule this replaced (knobs rows,
// cols) are read as the annotation mi = rows, nv = cols; traces recorded on the older plain nest,
// which set y to 0 in loops zb, zi, zj first, are rebuilt from their record's annotation.
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

/// The default row tile: the largest of 4, 3, 2, 1 dividing M; 4 with a tail loop when neither 4
/// nor 3 divides an M of 8 or more.
int matmulDefaultRows(int64_t m);
/// Whether M rows take 4-row tiles and a tail loop by default (dense_packed and matmul): when
/// neither 4 nor 3 divides an M of 8 or more, as 37 or 197 tokens (a 1- or 2-row tile reloads
/// the weights for every row or two).
bool fourRowsWithATail(int64_t m);
/// The default column vectors of a `rows`-row tile within an accumulator budget (at most 4).
int matmulDefaultVectors(int rows, int budget);

/// The most multiply-adds a parallel batch or fused loop may hold with a cache block of the
/// reduction (kt > 0): its legality check replays them (otherwise it is proven statically).
inline constexpr int64_t kMatmulCheckedIterations = int64_t{1} << 20;

/// The vector width the sketch uses for the target's `lanes`: halved while wider than N (at least 2).
int matmulLanes(const MatmulShape& s, int lanes);
/// The untuned kernel's annotation: the hand-written tile it replaced (matmulDefaultRows rows,
/// matmulDefaultVectors vectors of an accumulator `budget`; for N = 1 the one-column form's rows),
/// kt 0, and the first parallel loop of 3, 2, 1 that fits where wantParallel says the product is
/// worth threads (else par 0).
Knobs matmulDefaultKnobs(const MatmulShape& s, int lanes, int budget);
/// A record's configuration as an annotation: itself with "mi", the annotation mi = rows,
/// nv = cols (kt 0, the default's par) for the hand-written schedule's knobs; nullopt otherwise.
std::optional<Knobs> matmulAnnotationOf(const MatmulShape& s, const Knobs& knobs, int lanes, int budget);
/// Whether a recorded trace was made on the older plain nest (it names the zero-fill loops).
bool matmulTraceIsStale(const tir::Trace& trace);
/// Whether annotation `knobs` is one the sketch takes for this shape on `lanes`-wide vectors (for
/// N = 1, the one-column form's: mi ≤ min(8, M), no nv or kt, par as below with par 3 only when
/// mi divides M)
/// (mi ≤ M, nv·lanes ≤ N, kt a proper divisor of K or 0, the parallel choice available: par 1
/// parallel row tiles (≥ 2 of them), 2 the batch loop (≥ 2 batches), 3 the fused batch × row-tile
/// loop (≥ 2 of each); par 2 and 3 with kt > 0 only while the whole product is within
/// kMatmulCheckedIterations).
bool matmulAnnotationFits(const MatmulShape& s, const Knobs& knobs, int lanes);
/// Every annotation that fits, in a fixed order.
std::vector<Knobs> matmulAnnotations(const MatmulShape& s, int lanes);
/// Applies the sketch with annotation `knobs` to a Schedule over the plain nest; throws
/// kiln::Error when a primitive refuses it.
void applyMatmulSketch(tir::Schedule& sched, const MatmulShape& s, const Knobs& knobs, int lanes);
/// The sketch's trace for a key and annotation (recorded on matmulPlainFunc(key)).
tir::Trace matmulTrace(const std::string& key, const Knobs& knobs, int lanes);

// ## dense_packed
//
// A dense layer on weights pack-dense packed into panels [N/P, K, P] (core/passes/pack_dense.h),
// over M rows (the product of x's leading axes), with a bias b[N] when the node has one:
//
//   for i, p, j, k:    y[i, p·P + j] = select(k == 0, b[p·P + j], y[i, p·P + j]) + x[i, k] · w[p, k, j]
//
// (0 for b without a bias): a reduction that starts from the bias, with no pass of its own.
//
// The sketch, annotation mi (rows per register tile), nv (vectors per register tile, nv·L
// dividing P) and po (1: panels outermost, so consecutive row tiles reuse one panel in cache;
// 0: row tiles outermost, so consecutive panels reuse one block of x):
//
//   reorder(p, i)                         (po 1) panels outermost
//   split(i; mi, 1)  split(j; nv·L, 0)  a tail loop for the M mod mi last rows
//   reorder(i_o, j_o, k, i_i, j_i)        (po 0: reorder(i_o, p, j_o, k, i_i, j_i))
//   split(j_i; L, 0)  unroll(j_i_o)  unroll(i_i)                        the mi × nv register tile
//   cache_write(k)                        accumulated in a local buffer (registers) over k,
//                                         starting from the bias (no read of y)
//   parallel(fuse(p, i_o))                (po 1, M divisible by mi) panels × row tiles, else
//                                         parallel(the outermost loop) when it has 2 iterations or more
//   vectorize(j_i_i)  vectorize(j_i_i_r)  vectorize(j_i_i_w)
//   (the reorders keep each element's k order: schedule.h accepts them without a replay)
//   tail rows (M mod mi > 0: the loop i_t, inside p with po 1, its inner loops renamed j_t, k_t
//     and p_t): split(j_t; L, 0) reorder(k_t, j_t_o, j_t_i) (po 0: reorder(p_t, i_t, k_t, j_t_o,
//     j_t_i) and parallel(p_t)) unroll(j_t_o) cache_write(k_t), vectorized: one row by a whole
//     panel; with po 1 in the same parallel loop as the row tiles
//
// A fused epilogue is applied where the tile is written back
// (the nest never reads y, so each element's last store is its result: ops_gemm.cpp). Every
// dense_packed kernel is this sketch: untuned, with densePackedDefaultKnobs (mi = the largest of
// 4, 3, 2, 1 dividing M, or 4 with a tail when neither 4 nor 3 divides an M of 8 or more; the
// panel's vectors, panels outermost). Parallel loops only where wantParallel(M·N, K) (lower_internal.h) says the
// product is worth threads; scalar panels (lanes 1) unroll their columns instead of vectorizing.

struct DensePackedShape {
  int64_t m = 1, k = 1, n = 1;  // rows, reduction, columns (N = panels · P)
  int64_t panel = 1;            // P
  bool bias = false;
  double flops() const { return 2.0 * static_cast<double>(m * n) * static_cast<double>(k); }
};

/// "dense_packed:m=128,k=256,n=1024,p=64,b=1:f32".
std::string densePackedTuneKey(const DensePackedShape& s, DType dtype);
/// The shape a dense_packed key's parameters describe; throws kiln::Error (InvalidInput) when they
/// do not describe one.
DensePackedShape densePackedShapeOfKey(const Knobs& params, const std::string& key);
/// The plain nest over x, w, the bias (null without one) and y.
tir::Stmt densePackedPlainNest(const DensePackedShape& s, const tir::Buffer& x, const tir::Buffer& w,
                               const tir::Buffer& bias, const tir::Buffer& y);
/// A standalone function over buffers x, w, (b,) y of the key's shapes holding the plain nest.
tir::PrimFunc densePackedPlainFunc(const std::string& key);
/// The widest vectors of at most `lanes` lanes that divide the panel (pack-dense makes panels of
/// whole target vectors; a hand-written pipeline may pack narrower ones, pack-dense{lanes=2}).
int densePackedLanes(const DensePackedShape& s, int lanes);
/// The default annotation, the first point of the space: panels outermost, the most rows of
/// {4, 3, 2, 1} dividing M (no tail loop), the most of the panel's vectors that fit `registers`
/// (the whole panel on every x86 target: pack-dense sizes panels for its register file).
/// `lanes` as densePackedLanes gives them.
Knobs densePackedDefaultKnobs(const DensePackedShape& s, int lanes, int registers);
/// Whether annotation `knobs` fits the shape: 1 ≤ mi ≤ M, nv·lanes dividing P, po 0 or 1, and the
/// register tile (mi·nv accumulators, nv panel vectors and one broadcast) within `registers`.
bool densePackedAnnotationFits(const DensePackedShape& s, const Knobs& knobs, int lanes, int registers);
/// Every annotation that fits, in a fixed order.
std::vector<Knobs> densePackedAnnotations(const DensePackedShape& s, int lanes, int registers);
/// Applies the sketch with annotation `knobs` (checked with densePackedAnnotationFits).
void applyDensePackedSketch(tir::Schedule& sched, const DensePackedShape& s, const Knobs& knobs, int lanes,
                            int registers);

// ## dense
//
// A dense layer over the weights as the graph holds them, w [N, K] (a layer over fewer rows than
// pack-dense packs: a classifier, a pooler), x [M, K] (the product of x's leading axes), with a
// bias b[N] when the node has one:
//
//   for i, j, k:       y[i, j] = select(k == 0, b[j], y[i, j]) + x[i, k] · w[j, k]
//
// Both operands are contiguous along K, so the sketch vectorizes the reduction: a tile of mi rows
// of x × nc rows of w, each of its elements a vector of L partial sums over K (at one row, a
// stream over the weights with nc rows' loads in flight). Annotation mi (dividing M), nc, par:
//
//   split(i; mi, 1) (mi < M)  reorder(j, i_i)  split(j; nc, 1)   a tail j_t for the N mod nc last rows of w
//   per tile (j_o: rows i_i, columns j_i; then the tail j_t, i_i_t, k_t):
//     reorder(k, rows, cols)  cache_write(k)             the tile's sums in registers, from the bias
//     split(k; L, 1)  reorder(k_o, rows, cols, k_i)       vectors of L lanes, a scalar tail loop for K mod L
//     rfactor(k_i)                                        one vector of partial sums per element of the tile
//     vectorize(k_i, k_i_init)  unroll(rows, cols and their _init, _fold copies)
//     the partial sums folded as a tree (foldPartialsAsTree, nest_search.h)
//   parallel(fuse(i_o, j_o))                              (par 1, no column tail) else parallel(i_o) or
//                                                         parallel(j_o), whichever has 2 iterations or more
//
// L is the target's f32 lanes, halved while wider than K. The untuned kernel is the hand-written
// tile this replaced: the most accumulators that fit (mi + mi·nc + 1 vector registers, mi of 4,
// 3, 2, 1 dividing M, nc ≤ 8, preferring an nc that divides N), par where wantParallel says.
// Records of that tile's knobs (rows, cols) are read as mi = rows, nc = cols.

struct DenseShape {
  int64_t m = 1, k = 1, n = 1;  // rows of x, reduction, rows of w
  bool bias = true;
  /// The quantized form (qnn.dense, a u8 key; K a multiple of 4): u8 x, i8 w, no bias, exact
  /// i32 sums of x·w that lowering requantizes where they are stored, the input zero point's
  /// share zx·Σw[j] taken off there (ops_quant.cpp). The sketch sums four products per step
  /// (tir dot4: one lane of vpdpbusd), so each vector of L partial sums spans 4L steps of K.
  bool quantized = false;
  double flops() const { return 2.0 * static_cast<double>(m * n) * static_cast<double>(k); }
};

/// The shape a dense key's parameters ("dense:m=1,k=768,n=768:f32") describe, with a bias (keys
/// do not say; a trace replays on the kernel without one), quantized for a u8 key; throws
/// kiln::Error (InvalidInput) when they do not describe one.
DenseShape denseShapeOfKey(const Knobs& params, const std::string& key);
/// The plain nest over x, w, the bias (null without one) and y (i32 when quantized).
tir::Stmt densePlainNest(const DenseShape& s, const tir::Buffer& x, const tir::Buffer& w,
                         const tir::Buffer& bias, const tir::Buffer& y);
/// A standalone function over buffers x, w, b, y of the key's shapes holding the plain nest.
tir::PrimFunc densePlainFunc(const std::string& key);
/// The vector width of the reduction: `lanes`, halved while it spans more than K (L steps of K,
/// 4L quantized; at least 1).
int denseLanes(const DenseShape& s, int lanes);
/// The default annotation (see above) for `registers` vector registers.
Knobs denseDefaultKnobs(const DenseShape& s, int registers);
/// Whether annotation `knobs` fits: mi dividing M, 1 ≤ nc ≤ min(N, 16), par 0 or 1, and the tile
/// (mi·nc accumulators, mi vectors of x, one of w) within `registers`.
bool denseAnnotationFits(const DenseShape& s, const Knobs& knobs, int registers);
/// Every annotation that fits, in a fixed order.
std::vector<Knobs> denseAnnotations(const DenseShape& s, int registers);
/// A record of the hand-written tile's knobs (rows, cols) as the annotation it stands for (the
/// default's par); nullopt when it does not fit.
std::optional<Knobs> denseAnnotationOf(const DenseShape& s, const Knobs& knobs, int registers);
/// Applies the sketch with annotation `knobs` (checked with denseAnnotationFits) on vectors of
/// `lanes` (as denseLanes gives them).
void applyDenseSketch(tir::Schedule& sched, const DenseShape& s, const Knobs& knobs, int lanes,
                      int registers);

/// The sketch trace of a tuning key's annotation: a matmul, dense, dense_packed, conv2d_nchwc or
/// pool key's recorded on its plain function (a convolution's direct or Winograd form by its
/// "algo": conv_search.h, winograd_search.h; a pool's window nest: conv_search.h), a nest or row
/// nest key's on its task graph's kernel (nest_search.h); throws kiln::Error for another kind of
/// key or an annotation that does not fit.
tir::Trace sketchTrace(const std::string& key, const Knobs& knobs, int lanes, int registers);

}  // namespace kiln::core::lower

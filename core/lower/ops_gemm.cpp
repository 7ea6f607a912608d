// Lowerings of dense (x · wᵀ + b), dense_packed and matmul (numpy batched matrix product): each is
// a plain loop nest scheduled by its sketch of schedule primitives (gemm_search.h), with a tuned
// record's trace or annotation, else the default annotation. None has a hand-written builder.
//
// dense, x [M, K] (leading axes flattened), w [N, K] in the graph's own layout (a layer over fewer
// rows than pack-dense packs): both operands are contiguous along K, so the sketch vectorizes the
// reduction, a tile of mi rows of x × nc rows of w:
//
//   parallel (m-tile, n-tile)
//     acc[r][c] = b[n0 + c]; part[r][c] = 0 (vectors of L lanes)
//     for k in [0, K/L): part[r][c] += x[m0 + r, k·L : +L] · w[n0 + c, k·L : +L]
//     acc[r][c] += Σ lanes of part[r][c] (a tree of halving vectors) + Σ_{k ≥ K/L·L} x·w (scalar)
//     y[m0 + r, n0 + c] = epilogue(acc[r][c])
//
// At batch 1 this is a stream over the weight matrix (memory bound): nc independent rows keep
// enough loads in flight. Lane sums change the summation order (within float reassociation).
//
// dense_packed, the same product with w packed at compile time (passes/pack_dense.h) into column
// panels [N/P, K, P], P = nv·L: an outer-product tile on a panel that is one contiguous stream
// (no lane sums, no 4 KiB-strided rows sharing L1 sets):
//
//   parallel (panel, m-tile)                   panel outer: consecutive row tiles reuse one panel
//     acc[r][v] = b[...];  for k: acc[r][v] += broadcast(x[m0 + r, k]) · w[panel, k, v·L : +L]
//     y[m0 + r, panel·P + v·L : +L] = epilogue(acc[r][v])
//
// matmul, a [..., M, K] · b [..., K, N] (a vector first operand as one row, a vector second one
// as one column): R rows × nv vectors of output columns in registers, acc[r][v] +=
// broadcast(a[m0 + r, k]) · b[k, n0 + v·L : +L], tail loops for the last rows and columns, the
// epilogue applied where the tile is written back. A product with one output column (b a vector
// or one column, contiguous along K) is dense's dot-product tile instead: R rows at a time, each
// a vector of partial sums over K, the last M mod R rows in a tail loop.
#include <algorithm>
#include <optional>

#include "core/lower/lower_internal.h"
#include "core/lower/gemm_search.h"
#include "core/lower/schedule.h"
#include "core/lower/schedule_config.h"
#include "core/tir/functor.h"
#include "runtime/error.h"

namespace kiln::core::lower {

using namespace tir;

namespace {

int laneCount(const OpContext& ctx) {
  return ctx.out[0]->elemType.bits == 64 ? std::max(1, ctx.options.vectorLanes / 2) : ctx.options.vectorLanes;
}

/// A matmul: the sketch of gemm_search.h on its plain nest, with a record's trace or annotation,
/// else the default annotation. The output is [leading..., last] for the epilogue.
Stmt sketchedMatmul(const OpContext& ctx, const MatmulShape& s, const Shape& leading, int64_t last) {
  PrimFunc plain = plainFunc("matmul", ctx.in[0], ctx.in[1], nullptr, ctx.out[0],
                             matmulPlainNest(s, ctx.in[0], ctx.in[1], ctx.out[0]));
  const int lanes = laneCount(ctx), budget = accumulatorBudget(ctx.options);
  auto sketch = [&](Schedule& sched, const Knobs& k) { applyMatmulSketch(sched, s, k, lanes); };
  Stmt nest;
  if (!ctx.tuneKey.empty()) {
    nest = tunedBySketch(
        ctx, plain, [&](const Knobs& k) { return matmulAnnotationFits(s, k, lanes); }, sketch,
        matmulTraceIsStale);
    // A record of the hand-written schedule this sketch replaced (rows, cols): its annotation.
    const Knobs* tuned = ctx.tunedKnobs(ctx.tuneKey);
    if (!nest.defined() && tuned && !tuned->count("mi"))
      if (std::optional<Knobs> k = matmulAnnotationOf(s, *tuned, lanes, budget))
        nest = defaultSketch(ctx, plain, *k, sketch);
  }
  if (!nest.defined())
    nest = defaultSketch(ctx, std::move(plain), matmulDefaultKnobs(s, lanes, budget), sketch);
  return ctx.epilogue ? epilogueAtStores(ctx, nest, leading, last) : nest;
}

}  // namespace

// dense on the graph's own weights; see the file comment.
Stmt lowerDense(const OpContext& ctx) {
  ctx.requireFloat();
  const Shape& xs = ctx.inTypes[0].shape;
  Shape leading(xs.begin(), xs.end() - 1);
  DenseShape s{1, xs.back(), ctx.inTypes[1].shape[0], ctx.in.size() == 3};
  for (int64_t d : leading) s.m *= d;
  const int lanes = denseLanes(s, laneCount(ctx)), registers = ctx.options.vectorRegisters;
  const Buffer b = s.bias ? ctx.in[2] : nullptr;
  PrimFunc plain = plainFunc("dense", ctx.in[0], ctx.in[1], b, ctx.out[0],
                             densePlainNest(s, ctx.in[0], ctx.in[1], b, ctx.out[0]));
  ctx.tuneKey = tuneKeyOf(ctx.op, ctx.attrs, ctx.inTypes, ctx.outTypes);
  Stmt nest = kernelBySketch(
      ctx, std::move(plain), ctx.tunedKnobs(ctx.tuneKey),
      [&](const Knobs& k) { return denseAnnotationFits(s, k, registers); },
      [&](Schedule& sched, const Knobs& k) { applyDenseSketch(sched, s, k, lanes, registers); },
      [&](const Knobs& k) { return denseAnnotationOf(s, k, registers); }, denseDefaultKnobs(s, registers));
  return ctx.epilogue ? epilogueAtStores(ctx, nest, leading, s.n) : nest;
}

// dense over packed weight panels; see the file comment.
Stmt lowerDensePacked(const OpContext& ctx) {
  ctx.requireFloat();
  const Shape& xs = ctx.inTypes[0].shape;
  const Shape& ws = ctx.inTypes[1].shape;  // [N/P, K, P]
  Shape leading(xs.begin(), xs.end() - 1);
  DensePackedShape s{1, ws[1], ws[0] * ws[2], ws[2], ctx.in.size() == 3};
  for (int64_t d : leading) s.m *= d;
  const int lanes = densePackedLanes(s, laneCount(ctx));
  const int registers = ctx.options.vectorRegisters;
  const Buffer b = s.bias ? ctx.in[2] : nullptr;
  PrimFunc plain = plainFunc("dense_packed", ctx.in[0], ctx.in[1], b, ctx.out[0],
                             densePackedPlainNest(s, ctx.in[0], ctx.in[1], b, ctx.out[0]));
  auto sketch = [&](Schedule& sched, const Knobs& kn) { applyDensePackedSketch(sched, s, kn, lanes, registers); };
  ctx.tuneKey = tuneKeyOf(ctx.op, ctx.attrs, ctx.inTypes, ctx.outTypes);
  Stmt nest;
  if (!ctx.tuneKey.empty())
    nest = tunedBySketch(
        ctx, plain, [&](const Knobs& kn) { return densePackedAnnotationFits(s, kn, lanes, registers); }, sketch);
  // Untuned (or an f64 product, which has no key): the sketch with its default annotation.
  if (!nest.defined()) nest = defaultSketch(ctx, std::move(plain), densePackedDefaultKnobs(s, lanes, registers), sketch);
  return ctx.epilogue ? epilogueAtStores(ctx, nest, leading, s.n) : nest;
}

// Numpy matmul with broadcast batch axes; see the file comment.
Stmt lowerMatmul(const OpContext& ctx) {
  ctx.requireFloat();
  const Shape &as = ctx.inTypes[0].shape, &bs = ctx.inTypes[1].shape, &ys = ctx.outTypes[0].shape;
  const bool aVec = as.size() == 1, bVec = bs.size() == 1;
  ctx.tuneKey = tuneKeyOf(ctx.op, ctx.attrs, ctx.inTypes, ctx.outTypes);
  const int64_t k = as.back();
  // A vector first operand is one row, a vector second one is one column: y [..., N] is laid out
  // as [..., 1, N], y [..., M] as [..., M, 1].
  std::optional<MatmulShape> s = matmulShape(aVec ? Shape{1, k} : as, bVec ? Shape{k, 1} : bs);
  KILN_ASSERT(s.has_value(), "matmul: the operand shapes do not multiply");
  // The epilogue's index: the output as [leading..., last axis] (none for a scalar).
  const Shape leading = ys.empty() ? Shape{} : Shape(ys.begin(), ys.end() - 1);
  return sketchedMatmul(ctx, *s, leading, ys.empty() ? 1 : ys.back());
}

}  // namespace kiln::core::lower

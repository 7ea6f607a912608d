// Lowerings of dense (x · wᵀ + b) and matmul (numpy batched matrix product) with register-tiled,
// explicitly vectorized schedules.
//
// dense, x [M, K] (leading axes flattened), w [N, K] in the graph's own layout (no repacking
// needed): both operands are contiguous along K, so the tile vectorizes the reduction:
//
//   parallel (m-tile, n-tile)                  R rows of x × C rows of w
//     acc[r][c] = 0 (vectors of L lanes)
//     for k in [0, K/L): xv_r = x[m0 + r, k·L : +L]; for c: acc[r][c] += xv_r · w[n0 + c, k·L : +L]
//     s = Σ lanes of acc[r][c] (pairwise halving) + Σ_{k ≥ K/L·L} x·w (scalar tail)
//     y[m0 + r, n0 + c] = epilogue(s + b[n0 + c])
//
// At batch 1 this is a stream over the weight matrix (memory bound): C independent rows keep
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
// It has no hand-written builder: every dense_packed kernel is the sketch of gemm_search.h applied
// to its plain nest by schedule primitives, with a tuned configuration's annotation or trace, else
// the default annotation (that tile).
//
// matmul, a [..., M, K] · b [..., K, N]: every product of N ≥ 2 columns is the sketch of
// gemm_search.h on its plain nest (a vector first operand as one row), with a tuned record's
// trace or annotation, else the default annotation: R rows × nv vectors of output columns in
// registers, acc[r][v] += broadcast(a[m0 + r, k]) · b[k, n0 + v·L : +L], tail loops for the last
// rows and columns, the epilogue applied where the tile is written back. A product with one
// output column (b a vector or one column) uses dense's K-vectorized dot product instead, R rows
// at a time (matmulDefaultRows), the last M mod R rows in a loop of their own.
#include <algorithm>
#include <functional>

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

/// Σ_k a[aBase(r) + k] · b[bBase(c) + k] for an R × C tile, K-vectorized (dense and 1-column
/// matmul). `finish(r, c, sum)` makes the store of one result.
struct DotTile {
  const OpContext& ctx;
  Buffer a, b;
  int64_t k = 0;
  int lanes = 8;

  Stmt build(const std::vector<Expr>& aBase, const std::vector<Expr>& bBase,
             const std::function<Stmt(int, int, Expr)>& finish) const {
    Type elem = ctx.out[0]->elemType;
    int rows = static_cast<int>(aBase.size()), cols = static_cast<int>(bBase.size());
    int64_t kv = k / lanes, tail = k % lanes;
    int vl = kv > 0 ? lanes : 1;
    RegisterTile acc("acc", elem, rows * cols, vl);
    Buffer scratch = makeBuffer("lanes", elem, {std::max(vl, 1)});
    Buffer sums = makeBuffer("sums", elem, {int64_t{rows} * cols});
    std::vector<Stmt> body;
    if (kv > 0) {
      for (int i = 0; i < rows * cols; ++i) body.push_back(acc.set(i, splat(literal(elem, 0), vl)));
      Expr kb = Var::make("kb");
      std::vector<Expr> xv;
      std::vector<Stmt> fmas;
      for (int r = 0; r < rows; ++r) xv.push_back(Var::make("a" + std::to_string(r), elem.withLanes(static_cast<uint16_t>(vl))));
      for (int c = 0; c < cols; ++c) {
        Expr wv = vload(b, bBase[c] + kb * lanes, vl);
        Expr wVar = Var::make("b" + std::to_string(c), wv.type());
        std::vector<Stmt> per;
        for (int r = 0; r < rows; ++r) per.push_back(acc.fma(r * cols + c, xv[r], wVar));
        fmas.push_back(LetStmt::make(wVar, wv, Seq::make(std::move(per))));
      }
      Stmt step = Seq::make(std::move(fmas));
      for (int r = rows; r-- > 0;) step = LetStmt::make(xv[r], vload(a, aBase[r] + kb * lanes, vl), step);
      body.push_back(serialFor(kb, 0, kv, step));
      for (int i = 0; i < rows * cols; ++i) {
        auto [reduce, sum] = horizontalSum(acc.get(i), scratch);
        if (reduce.defined()) body.push_back(reduce);
        body.push_back(Store::make(sums, i64(i), sum));
      }
    } else {
      for (int i = 0; i < rows * cols; ++i) body.push_back(Store::make(sums, i64(i), literal(elem, 0)));
    }
    if (tail > 0) {
      Expr kt = Var::make("kt");
      std::vector<Stmt> per;
      for (int r = 0; r < rows; ++r)
        for (int c = 0; c < cols; ++c) {
          int i = r * cols + c;
          Expr product = Load::make(a, aBase[r] + kt) * Load::make(b, bBase[c] + kt);
          per.push_back(Store::make(sums, i64(i), Load::make(sums, i64(i)) + product));
        }
      body.push_back(serialFor(kt, kv * lanes, tail, Seq::make(std::move(per))));
    }
    for (int r = 0; r < rows; ++r)
      for (int c = 0; c < cols; ++c) body.push_back(finish(r, c, Load::make(sums, i64(r * cols + c))));
    Stmt s = Seq::make(std::move(body));
    s = Allocate::make(sums, s);
    if (kv > 0) s = Allocate::make(scratch, Allocate::make(acc.buffer(), s));
    return s;
  }
};

/// A matmul of N ≥ 2 columns: the sketch of gemm_search.h on its plain nest (a vector first
/// operand as one row), with a record's trace or annotation, else the default annotation.
Stmt sketchedMatmul(const OpContext& ctx, const MatmulShape& s, const Shape& leading) {
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
  return ctx.epilogue ? epilogueAtStores(ctx, nest, leading, s.n) : nest;
}

}  // namespace

Stmt lowerDense(const OpContext& ctx) {
  ctx.requireFloat();
  const Shape& xs = ctx.inTypes[0].shape;
  int64_t k = xs.back(), n = ctx.inTypes[1].shape[0];
  int64_t m = 1;
  Shape leading(xs.begin(), xs.end() - 1);
  for (int64_t d : leading) m *= d;
  int lanes = laneCount(ctx);
  int budget = accumulatorBudget(ctx.options);

  GemmKnobs knobs;
  // The tile with the most accumulators that fits: R·C accumulators + R x vectors + one w
  // vector in the registers, R dividing M, at most 8 weight rows.
  int maxCols = 1, registers = budget + (ctx.options.vectorRegisters >= 32 ? 2 : 1);
  for (int rows : {4, 3, 2, 1}) {
    if (m % rows != 0) continue;
    int cols = std::max(1, std::min(8, (registers - 1 - rows) / rows));
    if (rows * cols > knobs.rows * maxCols) knobs.rows = rows, maxCols = cols;
  }
  knobs.cols = maxCols;
  for (int c = maxCols; c * 2 > maxCols; --c)
    if (n % c == 0) {
      knobs.cols = c;
      break;
    }
  ctx.tuneKey = tuneKeyOf(ctx.op, ctx.attrs, ctx.inTypes, ctx.outTypes);
  if (const Knobs* tuned = ctx.tunedKnobs(ctx.tuneKey)) {
    int64_t rows = knob(*tuned, "rows", knobs.rows), cols = knob(*tuned, "cols", knobs.cols);
    if (denseTileFits(rows, cols, m, n, ctx.options)) knobs.rows = static_cast<int>(rows), knobs.cols = static_cast<int>(cols);
  }
  ctx.schedule = knobs.str();
  int64_t rowTiles = m / knobs.rows, colTiles = n / knobs.cols, colTail = n % knobs.cols;

  DotTile dot{ctx, ctx.in[0], ctx.in[1], k, lanes};
  // The tiles of rows [m0, m0 + rows) × weight rows starting at n0.
  auto tile = [&](const Expr& m0, const Expr& n0, int cols) {
    std::vector<Expr> aBase, bBase;
    for (int r = 0; r < knobs.rows; ++r) aBase.push_back((m0 + r) * k);
    for (int c = 0; c < cols; ++c) bBase.push_back((n0 + c) * k);
    return dot.build(aBase, bBase, [&](int r, int c, Expr sum) {
      Expr row = m0 + r, col = n0 + c;
      if (ctx.in.size() == 3) sum = sum + Load::make(ctx.in[2], col);
      std::vector<Expr> index = rowIndex(row, leading);
      index.push_back(col);
      return Store::make(ctx.out[0], row * n + col, ctx.applyEpilogue(sum, index));
    });
  };

  bool parallel = wantParallel(ctx.outTypes[0].numel(), k);
  std::vector<Stmt> parts;
  if (colTiles > 0) {
    Expr f = Var::make("m_n");
    Expr mt = colTiles == 1 ? f : f / colTiles, nt = colTiles == 1 ? Expr(i64(0)) : f % colTiles;
    Stmt body = tile(mt * knobs.rows, nt * knobs.cols, knobs.cols);
    parts.push_back(For::make(f, i64(0), i64(rowTiles * colTiles), parallel ? ForKind::Parallel : ForKind::Serial, body));
  }
  if (colTail > 0) {
    Expr mt = Var::make("mt");
    parts.push_back(serialFor(mt, 0, rowTiles, tile(mt * knobs.rows, i64(colTiles * knobs.cols), static_cast<int>(colTail))));
  }
  return Seq::make(std::move(parts));
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
  bool aVec = as.size() == 1, bVec = bs.size() == 1;
  ctx.tuneKey = tuneKeyOf(ctx.op, ctx.attrs, ctx.inTypes, ctx.outTypes);
  const int64_t k = as.back(), n = bVec ? 1 : bs.back();
  if (n >= 2) {
    // A vector first operand is one row: y [..., N] is laid out as [..., 1, N].
    std::optional<MatmulShape> s = matmulShape(aVec ? Shape{1, k} : as, bs);
    KILN_ASSERT(s.has_value(), "matmul: the operand shapes do not multiply");
    return sketchedMatmul(ctx, *s, Shape(ys.begin(), ys.end() - 1));
  }
  // One output column: rows of dot products, K-vectorized.
  int64_t mRows = aVec ? 1 : as[as.size() - 2];
  size_t batchRank = ys.size() - (aVec ? 0 : 1) - (bVec ? 0 : 1);
  Shape batch(ys.begin(), ys.begin() + static_cast<std::ptrdiff_t>(batchRank));
  int64_t batches = 1;
  for (int64_t d : batch) batches *= d;

  // Element strides of each operand's matrix along the output's batch axes (0 = broadcast).
  auto batchStrides = [&](const Shape& shape, bool vec) {
    std::vector<int64_t> full = contiguousStrides(shape), out(batchRank, 0);
    size_t opBatch = vec ? 0 : shape.size() - 2;
    size_t lead = batchRank - opBatch;
    for (size_t d = lead; d < batchRank; ++d) out[d] = shape[d - lead] == 1 ? 0 : full[d - lead];
    return out;
  };
  std::vector<int64_t> aStrides = batchStrides(as, aVec), bStrides = batchStrides(bs, bVec);
  const bool parallel = wantParallel(ctx.outTypes[0].numel(), k);

  // The fused loop over (batch, m-tile) of R-row tiles, then (when R does not divide M) a loop
  // over the batches for the last M mod R rows.
  GemmKnobs knobs;
  knobs.rows = matmulDefaultRows(mRows);
  knobs.cols = 1;
  const int64_t rowTiles = mRows / knobs.rows;
  const int tailRows = static_cast<int>(mRows % knobs.rows);
  // The dot products of `rows` rows from m0 in the batch of flat index bIndex.
  auto rowBlock = [&](int rows, const Expr& bIndex, const Expr& m0) -> Stmt {
    std::vector<Expr> bIdx = rowIndex(bIndex, batch.empty() ? Shape{1} : batch);
    Expr aBatch = i64(0), bBatch = i64(0);
    for (size_t d = 0; d < batchRank; ++d) {
      if (aStrides[d]) aBatch = aBatch + bIdx[d] * aStrides[d];
      if (bStrides[d]) bBatch = bBatch + bIdx[d] * bStrides[d];
    }
    Expr yBatch = bIndex * mRows;
    DotTile dot{ctx, ctx.in[0], ctx.in[1], k, laneCount(ctx)};
    std::vector<Expr> aBase;
    for (int r = 0; r < rows; ++r) aBase.push_back(aBatch + (m0 + r) * k);
    return dot.build(aBase, {bBatch}, [&](int r, int, Expr sum) {
      Expr row = m0 + r;
      std::vector<Expr> idx = batch.empty() ? std::vector<Expr>{} : bIdx;
      if (!aVec) idx.push_back(row);
      if (!bVec) idx.push_back(i64(0));
      return Store::make(ctx.out[0], yBatch + row, ctx.applyEpilogue(sum, idx));
    });
  };
  ctx.schedule = knobs.str();
  const ForKind kind = parallel ? ForKind::Parallel : ForKind::Serial;
  Expr f = Var::make("b_m");
  Expr bIndex = rowTiles == 1 ? f : f / rowTiles, m0 = (rowTiles == 1 ? Expr(i64(0)) : f % rowTiles) * knobs.rows;
  Stmt tiles = For::make(f, i64(0), i64(batches * rowTiles), kind, rowBlock(knobs.rows, bIndex, m0));
  if (tailRows == 0) return tiles;
  Expr t = Var::make("b_tail");
  return Seq::make({tiles, For::make(t, i64(0), i64(batches), batches > 1 ? kind : ForKind::Serial,
                                     rowBlock(tailRows, t, i64(rowTiles * knobs.rows)))});
}

}  // namespace kiln::core::lower

// Lowerings of selecting reductions: argmax / argmin along an axis, topk (max / min over axes are
// reductions like sum: ops_reduce.cpp).
//
// argmax / argmin keep
// the best value and its index; a later element replaces it only when strictly better, so the
// first extreme wins (PyTorch's CPU result). topk selects k times per row: each pass finds the
// best element not yet taken (strictly better, so ties resolve to the lower index) and marks it
// in a per-row flag buffer — O(k·n), meant for the small k of classifier heads and beam search.
#include <limits>
#include <set>

#include "core/lower/lower_internal.h"
#include "runtime/error.h"

namespace kiln::core::lower {

using namespace tir;

namespace {

/// The rows of an axis: extents outer × len × inner around `axis`.
struct AxisView {
  int64_t outer = 1, len = 1, inner = 1;
};

AxisView viewAround(const Shape& shape, int64_t axis) {
  AxisView v;
  for (int64_t d = 0; d < axis; ++d) v.outer *= shape[d];
  v.len = shape.empty() ? 1 : shape[axis];
  for (size_t d = axis + 1; d < shape.size(); ++d) v.inner *= shape[d];
  return v;
}

}  // namespace

Stmt lowerArgMinMax(const OpContext& ctx) {
  if (ctx.inTypes[0].dtype == DType::Bool) ctx.unsupported("dtype bool");
  bool isMax = ctx.op == "argmax";
  const Shape& xs = ctx.inTypes[0].shape;
  int64_t axis = normalizeAxis(ctx.attrs.getInt("axis"), static_cast<int64_t>(xs.size()));
  AxisView v = viewAround(xs, axis);
  if (v.len == 0) ctx.unsupported("an empty axis");
  Type t = ctx.in[0]->elemType;
  LoopNest nest({v.outer, v.inner}, {"o", "i"}, wantParallel(v.outer * v.inner, v.len));
  Expr base = nest.offset({v.len * v.inner, 1});
  Buffer best = makeLocal("best", t), bestIndex = makeLocal("best_index", Type::i64());
  Expr l = Var::make("l"), x = Var::make("x", t);
  Expr better = isMax ? x > loadLocal(best) : x < loadLocal(best);
  Stmt step = LetStmt::make(
      x, Load::make(ctx.in[0], base + l * v.inner),
      IfThenElse::make(better, Seq::make({storeLocal(best, x), storeLocal(bestIndex, l)})));
  Stmt body = Seq::make({storeLocal(best, Load::make(ctx.in[0], base)), storeLocal(bestIndex, i64(0)),
                         serialFor(l, 1, v.len - 1, step),
                         Store::make(ctx.out[0], nest.offset({v.inner, 1}), loadLocal(bestIndex))});
  return nest.wrap(body, {best, bestIndex});
}

Stmt lowerTopk(const OpContext& ctx) {
  if (ctx.inTypes[0].dtype == DType::Bool) ctx.unsupported("dtype bool");
  const Shape& xs = ctx.inTypes[0].shape;
  int64_t axis = normalizeAxis(ctx.attrs.getInt("axis"), static_cast<int64_t>(xs.size()));
  int64_t k = ctx.attrs.getInt("k");
  bool largest = ctx.attrs.getInt("largest", 1) != 0;
  AxisView v = viewAround(xs, axis);
  if (k == 0 || v.outer * v.inner == 0) return Evaluate::make(i64(0));
  Type t = ctx.in[0]->elemType;
  LoopNest nest({v.outer, v.inner}, {"o", "i"}, wantParallel(v.outer * v.inner, v.len * k));
  Expr xBase = nest.offset({v.len * v.inner, 1}), yBase = nest.offset({k * v.inner, 1});
  Buffer taken = makeBuffer("taken", Type::u8(), {v.len});
  Buffer best = makeLocal("best", t), bestIndex = makeLocal("best_index", Type::i64());
  Expr l0 = Var::make("l"), l1 = Var::make("l"), j = Var::make("j"), x = Var::make("x", t);
  Expr better = largest ? x > loadLocal(best) : x < loadLocal(best);
  // The first untaken element always wins (best_index < 0), so infinities are selected too.
  Expr wins = eq(Load::make(taken, l1), 0) && (loadLocal(bestIndex) < 0 || better);
  Stmt scan = serialFor(
      l1, 0, v.len,
      LetStmt::make(x, Load::make(ctx.in[0], xBase + l1 * v.inner),
                    IfThenElse::make(wins, Seq::make({storeLocal(best, x), storeLocal(bestIndex, l1)}))));
  Stmt pick = Seq::make({storeLocal(best, literal(t, 0)), storeLocal(bestIndex, i64(-1)), scan,
                         Store::make(ctx.out[0], yBase + j * v.inner, loadLocal(best)),
                         Store::make(ctx.out[1], yBase + j * v.inner, loadLocal(bestIndex)),
                         Store::make(taken, loadLocal(bestIndex), IntImm::make(Type::u8(), 1))});
  Stmt body = Seq::make({serialFor(l0, 0, v.len, Store::make(taken, l0, IntImm::make(Type::u8(), 0))),
                         serialFor(j, 0, k, pick)});
  return nest.wrap(body, {taken, best, bestIndex});
}

}  // namespace kiln::core::lower

// Lowerings of reductions: mean and sum over axes (keepdims or not), and softmax along an axis.
//
// Reductions loop over the kept axes outside (in the output's memory order, parallel when large)
// and over the reduced axes inside, accumulating into a local buffer. The output has the same
// flat layout with or without keepdims, so the loop nest runs over the keepdims shape.
//
// softmax is numerically stable: m = max_l x[l]; e[l] = exp(x[l] − m) written to the output
// while summing s; then y[l] = e[l] / s.
#include <set>

#include "core/lower/lower_internal.h"
#include "runtime/error.h"

namespace kiln::core::lower {

using namespace tir;

Stmt lowerReduce(const OpContext& ctx) {
  bool isMean = ctx.op == "mean";
  DType dtype = ctx.inTypes[0].dtype;
  if (dtype == DType::Bool) ctx.unsupported("dtype bool");
  if (isMean) ctx.requireFloat();
  const Shape& xs = ctx.inTypes[0].shape;
  int64_t rank = static_cast<int64_t>(xs.size());
  std::set<int64_t> axes;
  for (int64_t a : ctx.attrs.getInts("axes")) axes.insert(normalizeAxis(a, rank));

  Shape keptShape = xs;
  std::vector<int64_t> xStrides = contiguousStrides(xs);
  std::vector<Expr> reduceVars;
  Expr reduceOffset = i64(0);
  int64_t count = 1;
  for (int64_t d : axes) {
    keptShape[d] = 1;
    Expr v = Var::make("r" + std::to_string(d));
    reduceVars.push_back(v);
    reduceOffset = reduceOffset + v * xStrides[d];
    count *= xs[d];
  }

  Type t = ctx.out[0]->elemType;
  LoopNest nest(keptShape, {}, wantParallel(ctx.outTypes[0].numel(), count));
  Buffer acc = makeLocal("acc", t);
  Stmt reduce = storeLocal(acc, loadLocal(acc) + Load::make(ctx.in[0], nest.offset(xStrides) + reduceOffset));
  size_t k = reduceVars.size();
  for (auto it = axes.rbegin(); it != axes.rend(); ++it) reduce = serialFor(reduceVars[--k], 0, xs[*it], reduce);
  Expr result = isMean ? loadLocal(acc) / countLiteral(t, count) : loadLocal(acc);
  Stmt body = Seq::make({storeLocal(acc, literal(t, 0)), reduce,
                         Store::make(ctx.out[0], nest.offset(contiguousStrides(keptShape)), result)});
  return nest.wrap(body, {acc});
}

Stmt lowerSoftmax(const OpContext& ctx) {
  ctx.requireFloat();
  const Shape& xs = ctx.inTypes[0].shape;
  int64_t rank = static_cast<int64_t>(xs.size());
  int64_t axis = normalizeAxis(ctx.attrs.getInt("axis"), rank);
  int64_t outer = 1, inner = 1, len = rank == 0 ? 1 : xs[axis];  // a scalar is a length-1 axis
  for (int64_t d = 0; d < axis; ++d) outer *= xs[d];
  for (int64_t d = axis + 1; d < rank; ++d) inner *= xs[d];

  const Buffer &x = ctx.in[0], &y = ctx.out[0];
  Type t = y->elemType;
  LoopNest nest({outer, inner}, {"o", "i"}, wantParallel(ctx.outTypes[0].numel()));
  Expr base = nest.offset({len * inner, 1});
  Buffer maxBuf = makeLocal("row_max", t), sumBuf = makeLocal("row_sum", t);

  Expr l0 = Var::make("l"), l1 = Var::make("l"), l2 = Var::make("l");
  Expr e = Var::make("e", t);
  Stmt findMax = serialFor(l0, 0, len, storeLocal(maxBuf, max(loadLocal(maxBuf), Load::make(x, base + l0 * inner))));
  Expr expValue = call("exp", {Load::make(x, base + l1 * inner) - loadLocal(maxBuf)});
  Stmt expSum = serialFor(l1, 0, len,
                          LetStmt::make(e, expValue,
                                        Seq::make({Store::make(y, base + l1 * inner, e),
                                                   storeLocal(sumBuf, loadLocal(sumBuf) + e)})));
  Stmt normalize = serialFor(l2, 0, len, Store::make(y, base + l2 * inner, Load::make(y, base + l2 * inner) / loadLocal(sumBuf)));
  Stmt body = Seq::make({storeLocal(maxBuf, lowestValue(t)), findMax, storeLocal(sumBuf, literal(t, 0)), expSum, normalize});
  return nest.wrap(body, {maxBuf, sumBuf});
}

}  // namespace kiln::core::lower

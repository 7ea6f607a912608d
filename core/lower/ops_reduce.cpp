// Lowerings of reductions: mean, sum, max and min over axes (keepdims or not), and softmax along
// an axis.
//
// Row nests. A reduction over the trailing axes (a contiguous span per output: mean over H, W of
// NCHW, the last axis of a sequence, a whole tensor reduced to one value) and a softmax along the
// last axis are built as plain row nests and scheduled by their sketch (nest_search.h: vector
// accumulators kept apart by rfactor, folded at the end; the loop over rows parallel), under the
// record of their tuning key when the fused lowering gave them one (OpContext::nestWorkload):
//   for (o, 0, rows) { y[o] = identity; for (k, 0, n) y[o] = y[o] op x[o·n + k]; mean: y[o] /= n }
// The identity is 0, or −inf / +inf for a float max / min (the type's extremes for integers).
// Vectors reassociate a sum (within float rounding; max / min are exact).
//
// Other reductions loop over the kept axes outside (in the output's memory order, parallel when
// large) and over the reduced axes inside, accumulating into a local scalar. The output has the
// same flat layout with or without keepdims, so the loop nest runs over the keepdims shape.
//
// In a fused group (fuse-ops, O2) a reduction root reads its input through OpContext::inputAt:
// the element ops producing it (relu(add(x, y)), exp(x), abs(x), ...) are evaluated at each
// position the reduction reads, so the input never reaches memory. A row nest then needs the
// position per axis: it is one when the prologue is flat (no broadcasting in the group), when
// only the last axis is reduced, or when every value in the group is of the input's shape or
// constant along the reduced axes (a per-channel scale and shift before a global mean: read at
// the row's flat offset, or per row); other fused reductions take the scalar form.
//
// softmax is numerically stable: m = max_l x[l]; y[l] = exp(x[l] − m); s = Σ_l y[l];
// y[l] = y[l] / s, four passes over the row (the sum reads back what the exponentials wrote, from
// the cache). Along another axis than the last it is one scalar nest over the outer and inner
// positions with the same passes.
#include <functional>
#include <set>

#include "core/lower/lower_internal.h"
#include "core/lower/nest_search.h"
#include "core/lower/schedule.h"
#include "core/tir/schedule.h"
#include "runtime/error.h"

namespace kiln::core::lower {

using namespace tir;

namespace {

int lanesFor(const OpContext& ctx) {
  Type t = ctx.out[0]->elemType;
  return std::max(1, ctx.options.vectorLanes * 32 / std::max<int>(32, t.bits));
}

/// How a reduction combines: its identity and its pairwise combination (scalars or vectors).
struct Reducer {
  Expr identity;
  std::function<Expr(const Expr&, const Expr&)> combine;
};

Reducer reducerFor(const std::string& op, Type t) {
  if (op == "max") return {lowestValue(t), [](const Expr& a, const Expr& b) { return max(a, b); }};
  if (op == "min") return {highestValue(t), [](const Expr& a, const Expr& b) { return min(a, b); }};
  return {literal(t, 0), [](const Expr& a, const Expr& b) { return a + b; }};  // sum, mean
}

/// `plain` (the kernel's parameters around a row nest) scheduled by the row nest's sketch, under
/// the record of its tuning key when it has one (OpContext::nestWorkload).
Stmt scheduledRowNest(const OpContext& ctx, Stmt plain, const RowNestShape& shape) {
  PrimFunc f;
  f.name = ctx.op;
  f.params = ctx.in;
  f.params.insert(f.params.end(), ctx.out.begin(), ctx.out.end());
  f.numOutputs = static_cast<int>(ctx.out.size());
  f.body = std::move(plain);
  Knobs knobs = rowNestDefaultKnobs(shape, lanesFor(ctx));
  if (!ctx.nestWorkload.empty()) {
    ctx.tuneKey = rowNestTuneKey(ctx.nestWorkload);
    knobs = rowNestKnobsOf(ctx.tunedKnobs(ctx.tuneKey), shape, ctx.options);
  }
  return defaultSketch(ctx, std::move(f), knobs, applyRowNestSketch);
}

}  // namespace

Expr OpContext::inputAt(const std::vector<Expr>& index, const Expr& offset) const {
  return prologue ? prologue(index, offset) : Load::make(in[0], offset);
}

Stmt lowerReduce(const OpContext& ctx) {
  bool isMean = ctx.op == "mean";
  DType dtype = ctx.inTypes[0].dtype;
  if (dtype == DType::Bool) ctx.unsupported("dtype bool");
  if (isMean) ctx.requireFloat();
  if ((ctx.op == "max" || ctx.op == "min") && ctx.inTypes[0].numel() == 0) ctx.unsupported("reducing an empty tensor");
  const Shape& xs = ctx.inTypes[0].shape;
  int64_t rank = static_cast<int64_t>(xs.size());
  ReductionAxes r = reductionAxes(ctx);
  const std::set<int64_t>& axes = r.axes;
  const Shape& keptShape = r.keptShape;
  const std::vector<int64_t>& xStrides = r.inputStrides;
  int64_t count = r.count;

  Type t = ctx.out[0]->elemType;
  Reducer reducer = reducerFor(ctx.op, t);
  bool trailing = !axes.empty() && *axes.begin() + static_cast<int64_t>(axes.size()) == rank;
  // A fused input is read in vectors when its prologue is flat or rowwise (see the file comment),
  // or along the last axis when only that axis is reduced; otherwise per axis, in scalars.
  bool vectorReadable = !ctx.prologue || ctx.prologueFlat || ctx.prologueRowwise || axes.size() == 1;
  if (trailing && vectorReadable) {
    const int64_t kept = runtime::numElements(keptShape);
    Expr o = Var::make("o"), k = Var::make("k");
    // The kept axes' indices, split from the row (a fused prologue's per-axis index; unused
    // otherwise).
    std::vector<Expr> index;
    if (ctx.prologue && !ctx.prologueFlat) {
      std::vector<int64_t> keptStrides = contiguousStrides(keptShape);
      const int64_t first = *axes.begin();
      for (int64_t d = 0; d < first; ++d)
        index.push_back(xs[d] == 1 ? i64(0) : o / i64(keptStrides[d]) % i64(xs[d]));
      // One reduced axis: k itself. Several (a rowwise prologue): never read, so 0.
      for (int64_t d = first; d < rank; ++d) index.push_back(axes.size() == 1 ? k : i64(0));
    }
    const Buffer& y = ctx.out[0];
    std::vector<Stmt> row{
        Store::make(y, o, reducer.identity),
        serialFor(k, 0, count,
                  Store::make(y, o, reducer.combine(Load::make(y, o), ctx.inputAt(index, o * count + k))))};
    if (isMean) row.push_back(Store::make(y, o, Load::make(y, o) / countLiteral(t, count)));
    return scheduledRowNest(ctx, serialFor(o, 0, kept, Seq::make(std::move(row))), {kept, count});
  }

  LoopNest nest(keptShape, {}, wantParallel(ctx.outTypes[0].numel(), count));
  Buffer acc = makeLocal("acc", t);
  std::vector<Expr> index;
  for (int64_t d = 0, k = 0; d < rank; ++d) index.push_back(axes.count(d) ? r.vars[static_cast<size_t>(k++)] : nest[d]);
  Stmt reduce = r.wrap(
      storeLocal(acc, reducer.combine(loadLocal(acc), ctx.inputAt(index, nest.offset(xStrides) + r.offset))));
  Expr result = isMean ? loadLocal(acc) / countLiteral(t, count) : loadLocal(acc);
  Stmt body = Seq::make({storeLocal(acc, reducer.identity), reduce,
                         Store::make(ctx.out[0], nest.offset(contiguousStrides(keptShape)), result)});
  return nest.wrap(body, {acc});
}

Stmt lowerSoftmax(const OpContext& ctx) {
  ctx.requireFloat();
  const Shape& xs = ctx.inTypes[0].shape;
  int64_t rank = static_cast<int64_t>(xs.size());
  int64_t axis = rank == 0 ? 0 : normalizeAxis(ctx.attrs.getInt("axis"), rank);
  int64_t outer = 1, inner = 1, len = rank == 0 ? 1 : xs[axis];  // a scalar is a length-1 axis
  for (int64_t d = 0; d < axis; ++d) outer *= xs[d];
  for (int64_t d = axis + 1; d < rank; ++d) inner *= xs[d];

  const Buffer &x = ctx.in[0], &y = ctx.out[0];
  Type t = y->elemType;
  Buffer maxBuf = makeLocal("row_max", t), sumBuf = makeLocal("row_sum", t);
  // The four passes over the row starting at `base`, its elements `inner` apart.
  auto passes = [&](const Expr& base) {
    Expr l0 = Var::make("l"), l1 = Var::make("l"), l2 = Var::make("l"), l3 = Var::make("l");
    auto at = [&](const Expr& l) { return base + l * inner; };
    return Seq::make(
        {storeLocal(maxBuf, lowestValue(t)),
         serialFor(l0, 0, len, storeLocal(maxBuf, max(loadLocal(maxBuf), Load::make(x, at(l0))))),
         serialFor(l1, 0, len,
                   Store::make(y, at(l1), call("exp", {Load::make(x, at(l1)) - loadLocal(maxBuf)}))),
         storeLocal(sumBuf, literal(t, 0)),
         serialFor(l2, 0, len, storeLocal(sumBuf, loadLocal(sumBuf) + Load::make(y, at(l2)))),
         serialFor(l3, 0, len, Store::make(y, at(l3), Load::make(y, at(l3)) / loadLocal(sumBuf)))});
  };
  if (inner == 1) {
    Expr o = Var::make("o");
    Stmt row = Allocate::make(maxBuf, Allocate::make(sumBuf, passes(o * len)));
    return scheduledRowNest(ctx, serialFor(o, 0, outer, row), {outer, len, 4});
  }
  LoopNest nest({outer, inner}, {"o", "i"}, wantParallel(ctx.outTypes[0].numel()));
  return nest.wrap(passes(nest.offset({len * inner, 1})), {maxBuf, sumBuf});
}

}  // namespace kiln::core::lower

// Lowerings of reductions: mean, sum, max and min over axes (keepdims or not), and softmax along
// an axis.
//
// Reductions loop over the kept axes outside (in the output's memory order, parallel when large)
// and over the reduced axes inside, accumulating into a local buffer started at the identity
// (0; −inf / +inf for a float max / min, the type's extremes for integers). The output has the
// same flat layout with or without keepdims, so the loop nest runs over the keepdims shape. When
// the reduced axes are the trailing ones (a contiguous span per output: mean over H, W of NCHW,
// the last axis of a sequence, a whole tensor reduced to one value) the span is combined in
// vectors — a few independent vector accumulators, combined and reduced across lanes at the end,
// then the scalar tail — which reassociates a sum (within float rounding; max / min are exact).
//
// In a fused group (fuse-ops, O2) a reduction root reads its input through OpContext::inputAt:
// the element ops producing it (relu(add(x, y)), exp(x), abs(x), ...) are evaluated at each
// position the reduction reads, so the input never reaches memory. The vector path then needs the
// position per axis: it stays in use when the prologue is flat (no broadcasting in the group) or
// only the last axis is reduced; other fused reductions accumulate in scalars.
//
// softmax is numerically stable: m = max_l x[l]; e[l] = exp(x[l] − m) written to the output
// while summing s; then y[l] = e[l] / s. Along a contiguous axis (the last) each pass runs in
// vectors of the target's width with lane reductions for the max and the sum.
#include <functional>
#include <set>

#include "core/lower/lower_internal.h"
#include "core/lower/schedule.h"
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
  Combine combine;
};

Reducer reducerFor(const std::string& op, Type t) {
  if (op == "max") return {lowestValue(t), [](const Expr& a, const Expr& b) { return max(a, b); }};
  if (op == "min") return {highestValue(t), [](const Expr& a, const Expr& b) { return min(a, b); }};
  return {literal(t, 0), [](const Expr& a, const Expr& b) { return a + b; }};  // sum, mean
}

/// x[0] ⊕ ... ⊕ x[span − 1], vectorized (see the file comment); `load(k, lanes)` reads x[k]
/// (a vector of x[k .. k + lanes) when lanes > 1). Returns the statements and the scalar result,
/// readable after them; `locals` receives the local buffers to allocate.
std::pair<Stmt, Expr> vectorReduce(const std::function<Expr(const Expr&, int)>& load, int64_t span, int lanes, Type t,
                                   const Reducer& reducer, std::vector<Buffer>& locals) {
  const Combine& combine = reducer.combine;
  int64_t vecs = span / lanes;
  int accs = static_cast<int>(std::clamp<int64_t>(vecs, 1, 4));
  RegisterTile acc("acc", t, accs, lanes);
  Buffer scratch = makeBuffer("lanes", t, {lanes}), result = makeLocal("result", t);
  locals.insert(locals.end(), {acc.buffer(), scratch, result});
  std::vector<Stmt> body;
  for (int a = 0; a < accs; ++a) body.push_back(acc.set(a, splat(reducer.identity, lanes)));
  int64_t rounds = vecs / accs;
  Expr r = Var::make("r");
  std::vector<Stmt> step;
  for (int a = 0; a < accs; ++a)
    step.push_back(acc.set(a, combine(acc.get(a), load((r * accs + a) * lanes, lanes))));
  body.push_back(serialFor(r, 0, rounds, Seq::make(std::move(step))));
  for (int64_t v = rounds * accs; v < vecs; ++v) {
    int a = static_cast<int>(v % accs);
    body.push_back(acc.set(a, combine(acc.get(a), load(i64(v * lanes), lanes))));
  }
  Expr total = acc.get(0);
  for (int a = 1; a < accs; ++a) total = combine(total, acc.get(a));
  auto [reduce, lanesResult] = horizontalReduce(total, scratch, combine);
  body.push_back(reduce);
  body.push_back(storeLocal(result, lanesResult));
  Expr k = Var::make("k");
  body.push_back(
      serialFor(k, vecs * lanes, span - vecs * lanes, storeLocal(result, combine(loadLocal(result), load(k, 1)))));
  return {Seq::make(std::move(body)), loadLocal(result)};
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
  int lanes = lanesFor(ctx);
  bool trailing = !axes.empty() && *axes.begin() + static_cast<int64_t>(axes.size()) == rank;
  // A fused input is read per axis unless its prologue is flat: a vector then runs along the
  // last axis only.
  bool vectorReadable = !ctx.prologue || ctx.prologueFlat || axes.size() == 1;
  if (trailing && count >= lanes && lanes > 1 && vectorReadable) {
    int64_t kept = runtime::numElements(keptShape);
    LoopNest nest({kept}, {"o"}, wantParallel(kept, count));
    Expr base = nest[0] * count;
    // The kept axes' indices, split from the flat output index (a fused prologue's per-axis
    // index; unused otherwise).
    std::vector<Expr> keptIndex;
    if (ctx.prologue && !ctx.prologueFlat) {
      std::vector<int64_t> keptStrides = contiguousStrides(keptShape);
      for (int64_t d = 0; d + 1 < rank; ++d)
        keptIndex.push_back(xs[d] == 1 ? i64(0) : nest[0] / i64(keptStrides[d]) % i64(xs[d]));
    }
    auto load = [&](const Expr& k, int n) {
      Expr offset = n > 1 ? vramp(base + k, n) : base + k;
      std::vector<Expr> index;
      if (!keptIndex.empty()) {
        index = keptIndex;
        index.push_back(n > 1 ? vramp(k, n) : k);
      }
      return ctx.inputAt(index, offset);
    };
    std::vector<Buffer> locals;
    auto [reduceCode, value] = vectorReduce(load, count, lanes, t, reducer, locals);
    Expr result = isMean ? value / countLiteral(t, count) : value;
    return nest.wrap(Seq::make({reduceCode, Store::make(ctx.out[0], nest[0], result)}), locals);
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
  int64_t axis = normalizeAxis(ctx.attrs.getInt("axis"), rank);
  int64_t outer = 1, inner = 1, len = rank == 0 ? 1 : xs[axis];  // a scalar is a length-1 axis
  for (int64_t d = 0; d < axis; ++d) outer *= xs[d];
  for (int64_t d = axis + 1; d < rank; ++d) inner *= xs[d];

  const Buffer &x = ctx.in[0], &y = ctx.out[0];
  Type t = y->elemType;
  int lanes = lanesFor(ctx);
  LoopNest nest({outer, inner}, {"o", "i"}, wantParallel(ctx.outTypes[0].numel()));
  Expr base = nest.offset({len * inner, 1});
  Buffer maxBuf = makeLocal("row_max", t), sumBuf = makeLocal("row_sum", t);
  int64_t vecs = inner == 1 && lanes > 1 ? len / lanes : 0;

  // Scalar passes over [from, len) (the whole row, or the tail after the vectors).
  auto scalarPasses = [&](int64_t from, std::vector<Stmt>& maxPart, std::vector<Stmt>& expPart,
                          std::vector<Stmt>& normPart) {
    Expr l0 = Var::make("l"), l1 = Var::make("l"), l2 = Var::make("l");
    Expr e = Var::make("e", t);
    maxPart.push_back(serialFor(l0, from, len - from,
                                storeLocal(maxBuf, max(loadLocal(maxBuf), Load::make(x, base + l0 * inner)))));
    Expr expValue = call("exp", {Load::make(x, base + l1 * inner) - loadLocal(maxBuf)});
    expPart.push_back(serialFor(
        l1, from, len - from,
        LetStmt::make(e, expValue, Seq::make({Store::make(y, base + l1 * inner, e), storeLocal(sumBuf, loadLocal(sumBuf) + e)}))));
    normPart.push_back(serialFor(l2, from, len - from,
                                 Store::make(y, base + l2 * inner, Load::make(y, base + l2 * inner) / loadLocal(sumBuf))));
  };

  std::vector<Stmt> maxPart = {storeLocal(maxBuf, lowestValue(t))}, expPart = {storeLocal(sumBuf, literal(t, 0))},
                    normPart;
  std::vector<Buffer> locals = {maxBuf, sumBuf};
  if (vecs > 0) {
    RegisterTile acc("acc", t, 1, lanes);
    Buffer scratch = makeBuffer("lanes", t, {lanes});
    locals.insert(locals.end(), {acc.buffer(), scratch});
    Expr v0 = Var::make("v"), v1 = Var::make("v"), v2 = Var::make("v");
    maxPart.push_back(acc.set(0, splat(lowestValue(t), lanes)));
    maxPart.push_back(serialFor(v0, 0, vecs, acc.set(0, max(acc.get(0), vload(x, base + v0 * lanes, lanes)))));
    auto [maxCode, maxValue] = horizontalReduce(acc.get(0), scratch, [](const Expr& a, const Expr& b) { return max(a, b); });
    maxPart.push_back(maxCode);
    maxPart.push_back(storeLocal(maxBuf, maxValue));
    Expr e = Var::make("e", t.withLanes(static_cast<uint16_t>(lanes)));
    expPart.push_back(acc.set(0, splat(literal(t, 0), lanes)));
    Expr expValue = call("exp", {vload(x, base + v1 * lanes, lanes) - splat(loadLocal(maxBuf), lanes)});
    expPart.push_back(serialFor(v1, 0, vecs,
                                LetStmt::make(e, expValue, Seq::make({vstore(y, base + v1 * lanes, e), acc.set(0, acc.get(0) + e)}))));
    auto [sumCode, sumValue] = horizontalSum(acc.get(0), scratch);
    expPart.push_back(sumCode);
    expPart.push_back(storeLocal(sumBuf, sumValue));
    normPart.push_back(serialFor(v2, 0, vecs,
                                 vstore(y, base + v2 * lanes, vload(y, base + v2 * lanes, lanes) / splat(loadLocal(sumBuf), lanes))));
  }
  // The tail's max must be folded in before any exp: reorder as max(vec), max(tail), exp(vec),
  // exp(tail), norm(vec), norm(tail).
  scalarPasses(vecs * lanes, maxPart, expPart, normPart);
  Stmt body = Seq::make({Seq::make(std::move(maxPart)), Seq::make(std::move(expPart)), Seq::make(std::move(normPart))});
  return nest.wrap(body, locals);
}

}  // namespace kiln::core::lower

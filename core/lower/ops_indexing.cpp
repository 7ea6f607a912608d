// Lowerings of indexing and selection operators: strided_slice, take (gather by indices),
// broadcast_to, where, the comparisons and cast.
//
// Each runs one loop nest over its output in memory order (parallel when large) and reads its
// inputs through per-axis strides, so the innermost loop is affine wherever the op allows it and
// vectorize.h turns it into vector code (slices with stride 1, broadcasts, where, comparisons,
// casts). take reads its index once per gathered row: the loops over the trailing data axes stay
// affine (an embedding row is a contiguous copy).
//
// Bool tensors are stored one byte per element (0 or 1): conditions are loaded as `byte != 0`
// and results stored as the zero-extended bool.
//
// The per-element expressions (compareExpr, castExpr, takeIndex) are shared with fused-group
// lowering (core/lower/fused.cpp), where these ops are members of element nests; these
// lowerings serve single ops (lower.h lowerNode: constant folding).
#include "core/lower/lower_internal.h"
#include "runtime/error.h"

namespace kiln::core::lower {

using namespace tir;

namespace {

Expr loadBool(const Buffer& b, const Expr& index) { return boolCondition(Load::make(b, index)); }

}  // namespace

bool isComparison(std::string_view op) {
  return op == "equal" || op == "not_equal" || op == "less" || op == "less_equal" || op == "greater" ||
         op == "greater_equal";
}

Expr boolCondition(const Expr& stored) { return ne(stored, 0); }

Expr storedBool(const Expr& cond) { return cast(Type::u8(cond.type().lanes), cond); }

Expr compareExpr(const std::string& op, const Expr& a, const Expr& b) {
  Expr c;
  if (op == "equal")
    c = eq(a, b);
  else if (op == "not_equal")
    c = ne(a, b);
  else if (op == "less")
    c = a < b;
  else if (op == "less_equal")
    c = a <= b;
  else if (op == "greater")
    c = a > b;
  else if (op == "greater_equal")
    c = a >= b;
  KILN_ASSERT(c.defined(), "compareExpr called for '" + op + "'");
  return storedBool(c);
}

Expr castExpr(DType to, const Expr& x) {
  if (to == DType::Bool) return storedBool(ne(x, 0));
  return cast(Type::fromDType(to).withLanes(x.type().lanes), x);
}

Expr takeIndex(Expr raw, int64_t extent) {
  if (raw.type() != Type::i64()) raw = cast(Type::i64(), raw);
  return max(min(select(raw < 0, raw + extent, raw), extent - 1), 0);
}

// y[o] = x[begin + o * strides] along every axis.
Stmt lowerStridedSlice(const OpContext& ctx) {
  const Shape &xs = ctx.inTypes[0].shape, &ys = ctx.outTypes[0].shape;
  const auto &begin = ctx.attrs.getInts("begin"), &steps = ctx.attrs.getInts("strides");
  std::vector<int64_t> xStrides = contiguousStrides(xs), readStrides;
  int64_t base = 0;
  for (size_t d = 0; d < xs.size(); ++d) {
    base += begin[d] * xStrides[d];
    readStrides.push_back(steps[d] * xStrides[d]);
  }
  if (ctx.outTypes[0].numel() == 0) return Evaluate::make(i64(0));
  LoopNest nest(ys, {}, wantParallel(ctx.outTypes[0].numel()));
  Expr value = Load::make(ctx.in[0], nest.offset(readStrides) + base);
  return nest.wrap(Store::make(ctx.out[0], nest.offset(contiguousStrides(ys)), value));
}

// out[pre, idx..., post] = data[pre, indices[idx...], post]; a negative index counts from the
// end, and indices are clamped into the axis so a bad index cannot read outside the buffer.
Stmt lowerTake(const OpContext& ctx) {
  const Shape &ds = ctx.inTypes[0].shape, &is = ctx.inTypes[1].shape, &ys = ctx.outTypes[0].shape;
  int64_t axis = normalizeAxis(ctx.attrs.getInt("axis", 0), static_cast<int64_t>(ds.size()));
  auto rankIdx = static_cast<int64_t>(is.size());
  if (ctx.outTypes[0].numel() == 0) return Evaluate::make(i64(0));
  std::vector<int64_t> dStrides = contiguousStrides(ds), iStrides = contiguousStrides(is);
  // Output axes: [0, axis) data, [axis, axis + rankIdx) indices, the rest data after `axis`.
  std::vector<int64_t> dataRead(ys.size(), 0), indexRead(ys.size(), 0);
  for (int64_t d = 0; d < axis; ++d) dataRead[d] = dStrides[d];
  for (int64_t d = 0; d < rankIdx; ++d) indexRead[axis + d] = iStrides[d];
  for (size_t d = axis + 1; d < ds.size(); ++d) dataRead[d - 1 + rankIdx] = dStrides[d];
  LoopNest nest(ys, {}, wantParallel(ctx.outTypes[0].numel()));
  Expr idx = Var::make("idx");
  Expr normalized = takeIndex(Load::make(ctx.in[1], nest.offset(indexRead)), ds[axis]);
  Expr value = Load::make(ctx.in[0], nest.offset(dataRead) + idx * dStrides[axis]);
  Stmt store = Store::make(ctx.out[0], nest.offset(contiguousStrides(ys)), value);
  return nest.wrap(LetStmt::make(idx, normalized, store));
}

Stmt lowerBroadcastTo(const OpContext& ctx) {
  const Shape& ys = ctx.outTypes[0].shape;
  if (ctx.outTypes[0].numel() == 0) return Evaluate::make(i64(0));
  LoopNest nest(ys, {}, wantParallel(ctx.outTypes[0].numel()));
  Expr value = Load::make(ctx.in[0], nest.offset(broadcastStrides(ctx.inTypes[0].shape, ys)));
  return nest.wrap(Store::make(ctx.out[0], nest.offset(contiguousStrides(ys)), value));
}

Stmt lowerWhere(const OpContext& ctx) {
  const Shape& ys = ctx.outTypes[0].shape;
  if (ctx.outTypes[0].numel() == 0) return Evaluate::make(i64(0));
  LoopNest nest(ys, {}, wantParallel(ctx.outTypes[0].numel()));
  auto read = [&](size_t i) { return nest.offset(broadcastStrides(ctx.inTypes[i].shape, ys)); };
  Expr value = select(loadBool(ctx.in[0], read(0)), Load::make(ctx.in[1], read(1)), Load::make(ctx.in[2], read(2)));
  return nest.wrap(Store::make(ctx.out[0], nest.offset(contiguousStrides(ys)), value));
}

void checkComparison(const OpContext& ctx) {
  if (ctx.inTypes[0].dtype == DType::Bool) ctx.unsupported("comparing bool tensors");
}

Stmt lowerCompare(const OpContext& ctx) {
  checkComparison(ctx);
  const Shape& ys = ctx.outTypes[0].shape;
  if (ctx.outTypes[0].numel() == 0) return Evaluate::make(i64(0));
  LoopNest nest(ys, {}, wantParallel(ctx.outTypes[0].numel()));
  Expr a = Load::make(ctx.in[0], nest.offset(broadcastStrides(ctx.inTypes[0].shape, ys)));
  Expr b = Load::make(ctx.in[1], nest.offset(broadcastStrides(ctx.inTypes[1].shape, ys)));
  return nest.wrap(Store::make(ctx.out[0], nest.offset(contiguousStrides(ys)), compareExpr(ctx.op, a, b)));
}

// C conversions: float → int truncates toward zero (PyTorch's .long()), anything → bool is
// "non-zero", bool → number is 0 or 1.
Stmt lowerCast(const OpContext& ctx) {
  int64_t numel = ctx.outTypes[0].numel();
  if (numel == 0) return Evaluate::make(i64(0));
  LoopNest nest({numel}, {"i"}, wantParallel(numel));
  Expr x = Load::make(ctx.in[0], nest.offset({1}));
  return nest.wrap(Store::make(ctx.out[0], nest.offset({1}), castExpr(ctx.outTypes[0].dtype, x)));
}

}  // namespace kiln::core::lower

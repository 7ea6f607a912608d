// Lowering of pad (core/ir/op_registry.h): constant, reflect, replicate and circular padding of
// any axes, negative pads cropping.
//
// Along axis d with b = pads[d] (before) and n = the input's size, output index o reads input
// index i = o − b, mapped by the mode:
// - constant: i itself where 0 ≤ i < n, else the value. Lowered as two nests without per-element
//   conditions: one fills the output with the value (skipped when nothing is padded, only
//   cropped), one copies the input's kept block into it. Both keep the innermost axis contiguous,
//   so they vectorize.
// - reflect: the mirror without the edge, |i| and then 2(n − 1) − i past the end (PyTorch's
//   reflection_pad, ONNX's reflect); pads < n keep it inside the axis.
// - replicate: clamp(i, 0, n − 1) (ONNX's edge).
// - circular: i mod n, taken as (i + k·n) mod n with k large enough that the operand is never
//   negative (ONNX's wrap; PyTorch's circular allows pads ≤ n, this wraps any number of times).
// The last three run one nest over the output; unpadded axes keep affine indices, so a row whose
// axis is not padded (e.g. the channel axis) still vectorizes.
#include <algorithm>

#include "core/lower/lower_internal.h"
#include "runtime/error.h"

namespace kiln::core::lower {

using namespace tir;

namespace {

/// Input index along one padded axis for output index `o` (see the file comment).
Expr sourceIndex(const std::string& mode, const Expr& o, int64_t before, int64_t n) {
  Expr i = o - before;
  if (mode == "replicate") return max(min(i, i64(n - 1)), i64(0));
  if (mode == "circular") {
    int64_t wraps = before > 0 ? (before + n - 1) / n : 0;
    return (i + wraps * n) % i64(n);
  }
  KILN_ASSERT(mode == "reflect", "pad: unknown mode '" + mode + "'");
  Expr mirrored = select(i < 0, i64(0) - i, i);
  return select(mirrored >= n, i64(2 * (n - 1)) - mirrored, mirrored);
}

Stmt lowerConstantPad(const OpContext& ctx, const std::vector<int64_t>& pads) {
  const Shape &xs = ctx.inTypes[0].shape, &ys = ctx.outTypes[0].shape;
  size_t rank = xs.size();
  Type t = ctx.out[0]->elemType;
  std::vector<int64_t> xStrides = contiguousStrides(xs), yStrides = contiguousStrides(ys);
  // The input's kept block: extent[d] elements from inStart[d], written from outStart[d].
  std::vector<int64_t> extent(rank);
  int64_t inBase = 0, outBase = 0, kept = 1;
  bool grows = false;
  for (size_t d = 0; d < rank; ++d) {
    int64_t before = pads[d], after = pads[rank + d];
    grows = grows || before > 0 || after > 0;
    extent[d] = xs[d] - std::max<int64_t>(-before, 0) - std::max<int64_t>(-after, 0);
    inBase += std::max<int64_t>(-before, 0) * xStrides[d];
    outBase += std::max<int64_t>(before, 0) * yStrides[d];
    kept *= std::max<int64_t>(extent[d], 0);
  }
  std::vector<Stmt> parts;
  int64_t numel = ctx.outTypes[0].numel();
  if (grows) {
    LoopNest fill({numel}, {"i"}, wantParallel(numel));
    parts.push_back(fill.wrap(Store::make(ctx.out[0], fill.offset({1}), literal(t, ctx.attrs.getFloat("value", 0.0)))));
  }
  if (kept > 0) {
    LoopNest copy(extent, {}, wantParallel(kept));
    Expr value = Load::make(ctx.in[0], copy.offset(xStrides) + inBase);
    parts.push_back(copy.wrap(Store::make(ctx.out[0], copy.offset(yStrides) + outBase, value)));
  }
  if (parts.empty()) return Evaluate::make(i64(0));
  return Seq::make(std::move(parts));
}

}  // namespace

Stmt lowerPad(const OpContext& ctx) {
  const Shape &xs = ctx.inTypes[0].shape, &ys = ctx.outTypes[0].shape;
  const auto& pads = ctx.attrs.getInts("pads");
  const std::string& mode = ctx.attrs.getString("mode");
  if (ctx.outTypes[0].numel() == 0) return Evaluate::make(i64(0));
  if (xs.empty()) return lowerCopy(ctx);  // a scalar has no axis to pad
  if (mode == "constant") return lowerConstantPad(ctx, pads);
  size_t rank = xs.size();
  std::vector<int64_t> xStrides = contiguousStrides(xs), affineStrides = xStrides;
  LoopNest nest(ys, {}, wantParallel(ctx.outTypes[0].numel()));
  Expr padded = i64(0);
  for (size_t d = 0; d < rank; ++d) {
    int64_t before = pads[d], after = pads[rank + d];
    if (before == 0 && after == 0) continue;
    affineStrides[d] = 0;
    padded = padded + sourceIndex(mode, nest[d], before, xs[d]) * xStrides[d];
  }
  Expr value = Load::make(ctx.in[0], nest.offset(affineStrides) + padded);
  return nest.wrap(Store::make(ctx.out[0], nest.offset(contiguousStrides(ys)), value));
}

}  // namespace kiln::core::lower

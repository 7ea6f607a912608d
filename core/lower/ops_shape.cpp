// Lowerings of data-movement operators: copy and reshape (a flat copy: tensors are dense and
// row-major, so a reshape keeps the element order), transpose and concat.
#include "core/lower/lower_internal.h"
#include "runtime/error.h"

namespace kiln::core::lower {

using namespace tir;

Stmt lowerCopy(const OpContext& ctx) {
  int64_t numel = ctx.outTypes[0].numel();
  LoopNest nest({numel}, {"i"}, wantParallel(numel));
  return nest.wrap(Store::make(ctx.out[0], nest.offset({1}), Load::make(ctx.in[0], nest.offset({1}))));
}

// y[i0, ..., ir] = x[j] with j_perm[d] = i_d: loops in the output's memory order, reading the
// input through permuted strides.
Stmt lowerTranspose(const OpContext& ctx) {
  const Shape &xs = ctx.inTypes[0].shape, &ys = ctx.outTypes[0].shape;
  const auto& perm = ctx.attrs.getInts("perm");
  std::vector<int64_t> xStrides = contiguousStrides(xs), readStrides;
  for (int64_t p : perm) readStrides.push_back(xStrides[normalizeAxis(p, static_cast<int64_t>(xs.size()))]);
  LoopNest nest(ys, {}, wantParallel(ctx.outTypes[0].numel()));
  Expr value = Load::make(ctx.in[0], nest.offset(readStrides));
  return nest.wrap(Store::make(ctx.out[0], nest.offset(contiguousStrides(ys)), value));
}

// One copy loop nest per input: viewing every tensor as [outer, inner] around the axis, input j
// fills columns [offset_j, offset_j + inner_j) of the output's rows.
Stmt lowerConcat(const OpContext& ctx) {
  const Shape& ys = ctx.outTypes[0].shape;
  int64_t axis = normalizeAxis(ctx.attrs.getInt("axis"), static_cast<int64_t>(ys.size()));
  // Products of the axes before `axis` (outer) and from `axis` on (inner).
  auto product = [](const Shape& s, size_t begin, size_t end) {
    int64_t p = 1;
    for (size_t d = begin; d < end; ++d) p *= s[d];
    return p;
  };
  size_t a = static_cast<size_t>(axis);
  int64_t outer = product(ys, 0, a), outInner = product(ys, a, ys.size());
  std::vector<Stmt> copies;
  int64_t columnOffset = 0;
  for (size_t j = 0; j < ctx.in.size(); ++j) {
    int64_t inner = product(ctx.inTypes[j].shape, a, ys.size());
    LoopNest nest({outer, inner}, {"o", "i"}, wantParallel(outer * inner));
    Expr value = Load::make(ctx.in[j], nest.offset({inner, 1}));
    copies.push_back(nest.wrap(Store::make(ctx.out[0], nest.offset({outInner, 1}) + columnOffset, value)));
    columnOffset += inner;
  }
  return Seq::make(std::move(copies));
}

}  // namespace kiln::core::lower

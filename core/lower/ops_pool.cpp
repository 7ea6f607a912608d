// Lowerings of 2-D pooling: max_pool2d, avg_pool2d and adaptive_avg_pool2d (NCHW).
//
// Window semantics follow PyTorch exactly:
// - max_pool2d ignores padded positions (they act as -inf).
// - avg_pool2d sums the window positions inside the input. Its divisor, with window start
//   hs = oh·sh − ph and he = min(hs + kh, H + ph), is (he − hs)·(we − ws) when count_include_pad
//   (so with ceil_mode a window hanging past the right padding counts only the positions inside
//   input + padding), otherwise the number of positions inside the input. PyTorch's avg_pool2d has
//   no dilation, so dilation ≠ 1 is unsupported there.
// - adaptive_avg_pool2d averages rows [floor(i·H/OH), ceil((i+1)·H/OH)) (same for columns); its
//   loops have bounds computed from the output position.
#include "core/lower/lower_internal.h"
#include "runtime/error.h"

namespace kiln::core::lower {

using namespace tir;

Stmt lowerPool2d(const OpContext& ctx) {
  bool isMax = ctx.op == "max_pool2d";
  if (!isMax) ctx.requireFloat();
  if (ctx.inTypes[0].dtype == DType::Bool) ctx.unsupported("dtype bool");
  std::vector<int64_t> kernel = ctx.pairAttr("kernel", 1);
  std::vector<int64_t> stride = ctx.attrs.has("stride") ? ctx.pairAttr("stride", 1) : kernel;
  std::vector<int64_t> pad = ctx.pairAttr("padding", 0);
  std::vector<int64_t> dil = ctx.pairAttr("dilation", 1);
  bool includePad = ctx.attrs.getInt("count_include_pad", 1) != 0;
  if (!isMax && (dil[0] != 1 || dil[1] != 1)) ctx.unsupported("dilation other than 1");

  const Shape &xs = ctx.inTypes[0].shape, &ys = ctx.outTypes[0].shape;
  int64_t h = xs[2], w = xs[3];
  const Buffer &x = ctx.in[0], &y = ctx.out[0];
  Type t = y->elemType;

  LoopNest nest(ys, {"n", "c", "oh", "ow"}, wantParallel(ctx.outTypes[0].numel(), kernel[0] * kernel[1]));
  Expr oh = nest[2], ow = nest[3];
  Buffer acc = makeLocal("acc", t);
  Expr kh = Var::make("kh"), kw = Var::make("kw");
  Expr hs = oh * stride[0] - pad[0], ws = ow * stride[1] - pad[1];
  Expr ih = hs + kh * dil[0], iw = ws + kw * dil[1];
  Expr xIndex = nest.offset({xs[1] * h * w, h * w, 0, 0}) + ih * w + iw;
  Expr xv = Load::make(x, xIndex);
  Stmt update = storeLocal(acc, isMax ? max(loadLocal(acc), xv) : loadLocal(acc) + xv);
  Stmt kwLoop = serialFor(kw, 0, kernel[1], IfThenElse::make(iw >= 0 && iw < w, update));
  Stmt window = serialFor(kh, 0, kernel[0], IfThenElse::make(ih >= 0 && ih < h, kwLoop));

  Expr result = loadLocal(acc);
  if (!isMax) {
    Expr he = min(hs + kernel[0], h + pad[0]), we = min(ws + kernel[1], w + pad[1]);
    Expr count = includePad ? (he - hs) * (we - ws)
                            : max((min(he, h) - max(hs, 0)) * (min(we, w) - max(ws, 0)), 1);
    result = result / cast(t, count);
  }
  Expr yIndex = nest.offset(contiguousStrides(ys));
  Stmt body = Seq::make({storeLocal(acc, isMax ? lowestValue(t) : literal(t, 0)), window, Store::make(y, yIndex, result)});
  return nest.wrap(body, {acc});
}

Stmt lowerAdaptiveAvgPool2d(const OpContext& ctx) {
  ctx.requireFloat();
  const Shape &xs = ctx.inTypes[0].shape, &ys = ctx.outTypes[0].shape;
  int64_t h = xs[2], w = xs[3], oh = ys[2], ow = ys[3];
  const Buffer &x = ctx.in[0], &y = ctx.out[0];
  Type t = y->elemType;

  int64_t maxWindow = ((h + oh - 1) / oh + 1) * ((w + ow - 1) / ow + 1);  // an upper bound
  LoopNest nest(ys, {"n", "c", "oh", "ow"}, wantParallel(ctx.outTypes[0].numel(), maxWindow));
  Buffer acc = makeLocal("acc", t);
  Expr hs = nest[2] * h / oh, he = ((nest[2] + 1) * h + oh - 1) / oh;
  Expr ws = nest[3] * w / ow, we = ((nest[3] + 1) * w + ow - 1) / ow;
  Expr ih = Var::make("ih"), iw = Var::make("iw");
  Expr xIndex = nest.offset({xs[1] * h * w, h * w, 0, 0}) + ih * w + iw;
  Stmt update = storeLocal(acc, loadLocal(acc) + Load::make(x, xIndex));
  Stmt window = For::make(ih, hs, he - hs, ForKind::Serial, For::make(iw, ws, we - ws, ForKind::Serial, update));
  Expr result = loadLocal(acc) / cast(t, (he - hs) * (we - ws));
  Stmt body = Seq::make({storeLocal(acc, literal(t, 0)), window,
                         Store::make(y, nest.offset(contiguousStrides(ys)), result)});
  return nest.wrap(body, {acc});
}

}  // namespace kiln::core::lower

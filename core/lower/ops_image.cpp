// Lowerings of image operators: conv_transpose2d and resize2d (nearest, bilinear).
//
// conv_transpose2d is written as a gather per output element (the adjoint of conv2d's gather):
//   y[n, o, oh, ow] = b[o] + Σ_{c in o's group, kh, kw} x[n, c, ih, iw] · w[c, o mod O/g, kh, kw]
// where oh + pad − kh·dil = ih·stride, and likewise for ow; taps whose position is not a multiple
// of the stride or falls outside the input contribute nothing. Correct for every stride,
// padding, output padding, dilation and group count; not register-tiled.
//
// resize2d follows PyTorch's CPU kernels index for index, in the buffer's float type:
// - nearest: ih = min(floor(oh · scale), H − 1);
// - bilinear: src = scale · (oh + 0.5) − 0.5 clamped at 0 (align_corners: scale · oh), h0 = ⌊src⌋,
//   h1 = h0 + (h0 < H − 1), λ1 = src − h0, and y = λh0·(λw0·x00 + λw1·x01) + λh1·(λw0·x10 + λw1·x11);
// with scale = the attribute scale_h (1 / scale_factor) when given, else H / OH (align_corners:
// (H − 1) / (OH − 1)).
#include "core/lower/lower_internal.h"
#include "runtime/error.h"

namespace kiln::core::lower {

using namespace tir;

Stmt lowerConvTranspose2d(const OpContext& ctx) {
  ctx.requireFloat();
  const Shape &xs = ctx.inTypes[0].shape, &ws = ctx.inTypes[1].shape, &ys = ctx.outTypes[0].shape;
  auto stride = ctx.attrs.getPair("stride", 1), pad = ctx.attrs.getPair("padding", 0),
       dil = ctx.attrs.getPair("dilation", 1);
  int64_t groups = ctx.attrs.getInt("groups", 1);
  int64_t cin = xs[1], h = xs[2], w = xs[3], kh = ws[2], kw = ws[3];
  int64_t opg = ws[1], cpg = cin / groups;  // output / input channels per group
  Type t = ctx.out[0]->elemType;
  const Buffer &x = ctx.in[0], &wt = ctx.in[1];
  bool hasBias = ctx.in.size() == 3;

  LoopNest nest(ys, {"n", "o", "oh", "ow"}, wantParallel(ctx.outTypes[0].numel(), cpg * kh * kw));
  Expr n = nest[0], o = nest[1], oh = nest[2], ow = nest[3];
  Buffer acc = makeLocal("acc", t);
  Expr c = Var::make("c"), r = Var::make("kh"), s = Var::make("kw");
  Expr th = oh + pad[0] - r * dil[0], tw = ow + pad[1] - s * dil[1];
  Expr ih = th / stride[0], iw = tw / stride[1];
  Expr inside = th >= 0 && tw >= 0 && eq(th % stride[0], 0) && eq(tw % stride[1], 0) && ih < h && iw < w;
  Expr group = o / opg, ci = group * cpg + c;
  Expr xv = Load::make(x, ((n * cin + ci) * h + ih) * w + iw);
  Expr wv = Load::make(wt, ((ci * opg + o % opg) * kh + r) * kw + s);
  Stmt tap = IfThenElse::make(inside, storeLocal(acc, loadLocal(acc) + xv * wv));
  Stmt loops = serialFor(c, 0, cpg, serialFor(r, 0, kh, serialFor(s, 0, kw, tap)));
  Expr init = hasBias ? Load::make(ctx.in[2], o) : literal(t, 0);
  Stmt body = Seq::make({storeLocal(acc, init), loops,
                         Store::make(ctx.out[0], nest.offset(contiguousStrides(ys)), loadLocal(acc))});
  return nest.wrap(body, {acc});
}

namespace {

/// The scale PyTorch uses for one axis (see the file comment).
double resizeScale(const OpContext& ctx, const char* attr, int64_t in, int64_t out, bool alignCorners) {
  if (alignCorners) return out > 1 ? static_cast<double>(in - 1) / static_cast<double>(out - 1) : 0.0;
  if (ctx.attrs.has(attr) && ctx.attrs.getFloat(attr) > 0) return ctx.attrs.getFloat(attr);
  return static_cast<double>(in) / static_cast<double>(out);
}

/// Bilinear source coordinate of output index `dst` along one axis: (i0, i1, λ1).
struct Linear {
  Expr i0, i1, lambda1;
};

Linear linearSource(const Expr& dst, Type t, double scale, int64_t in, bool alignCorners) {
  Expr d = cast(t, dst);
  Expr src = alignCorners ? d * literal(t, scale)
                          : max(literal(t, scale) * (d + literal(t, 0.5)) - literal(t, 0.5), literal(t, 0));
  Expr i0 = cast(Type::i64(), src);  // src ≥ 0: truncation is floor
  Expr i1 = i0 + select(i0 < in - 1, i64(1), i64(0));
  return {i0, i1, src - cast(t, i0)};
}

}  // namespace

Stmt lowerResize2d(const OpContext& ctx) {
  ctx.requireFloat();
  const Shape &xs = ctx.inTypes[0].shape, &ys = ctx.outTypes[0].shape;
  const std::string& mode = ctx.attrs.getString("mode");
  bool align = ctx.attrs.getInt("align_corners", 0) != 0;
  int64_t h = xs[2], w = xs[3];
  Type t = ctx.out[0]->elemType;
  double sh = resizeScale(ctx, "scale_h", h, ys[2], align && mode == "bilinear");
  double sw = resizeScale(ctx, "scale_w", w, ys[3], align && mode == "bilinear");
  LoopNest nest(ys, {"n", "c", "oh", "ow"}, wantParallel(ctx.outTypes[0].numel()));
  Expr plane = (nest[0] * xs[1] + nest[1]) * (h * w);
  const Buffer& x = ctx.in[0];
  Expr value;
  if (mode == "nearest") {
    // PyTorch copies rows 1:1 when the size is unchanged and halves the index for an exact 2×.
    auto source = [&](const Expr& dst, double scale, int64_t in, int64_t out) -> Expr {
      if (in == out) return dst;
      if (out == 2 * in) return dst / 2;
      Expr f = call("floor", {cast(Type::f32(), dst) * literal(Type::f32(), scale)});
      return min(cast(Type::i64(), f), in - 1);
    };
    Expr ih = source(nest[2], sh, h, ys[2]), iw = source(nest[3], sw, w, ys[3]);
    value = Load::make(x, plane + ih * w + iw);
  } else {
    Linear lh = linearSource(nest[2], t, sh, h, align), lw = linearSource(nest[3], t, sw, w, align);
    Expr one = literal(t, 1);
    Expr h0l = one - lh.lambda1, w0l = one - lw.lambda1;
    auto at = [&](const Expr& ih, const Expr& iw) { return Load::make(x, plane + ih * w + iw); };
    value = h0l * (w0l * at(lh.i0, lw.i0) + lw.lambda1 * at(lh.i0, lw.i1)) +
            lh.lambda1 * (w0l * at(lh.i1, lw.i0) + lw.lambda1 * at(lh.i1, lw.i1));
  }
  return nest.wrap(Store::make(ctx.out[0], nest.offset(contiguousStrides(ys)), value));
}

}  // namespace kiln::core::lower

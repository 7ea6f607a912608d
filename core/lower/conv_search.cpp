// The plain nest of pointwise packed convolutions and its sketch rule; see conv_search.h.
#include "core/lower/conv_search.h"

#include "core/lower/lower_internal.h"
#include "core/lower/schedule.h"
#include "runtime/error.h"

namespace kiln::core::lower {

using namespace tir;

std::optional<PointwiseConvShape> pointwiseConvShape(const Shape& xs, const Shape& ws, const Shape& ys,
                                                     const std::vector<int64_t>& stride,
                                                     const std::vector<int64_t>& padding, int64_t groups, bool bias) {
  if (xs.size() != 5 || ws.size() != 6 || ys.size() != 5 || groups != 1 || stride.size() != 2) return std::nullopt;
  if (stride[0] < 1 || stride[1] < 1 || padding != std::vector<int64_t>{0, 0}) return std::nullopt;
  if (ws[2] != 1 || ws[3] != 1 || ws[1] != xs[1] || ws[4] != xs[4]) return std::nullopt;
  if (ys[2] != (xs[2] - 1) / stride[0] + 1 || ys[3] != (xs[3] - 1) / stride[1] + 1) return std::nullopt;
  PointwiseConvShape s;
  s.n = xs[0], s.cb = xs[1], s.ib = xs[4];
  s.lanes = ys[4], s.groups = ws[0];
  if (s.lanes < 1 || ws[5] % s.lanes != 0) return std::nullopt;
  s.vectors = ws[5] / s.lanes;
  if (ys[0] != s.n || ys[1] != s.groups * s.vectors) return std::nullopt;
  s.strideH = stride[0], s.strideW = stride[1];
  s.inHeight = xs[2], s.inWidth = xs[3];
  if (s.rowed()) {
    s.rows = ys[2], s.pixels = ys[3];
  } else {
    s.rows = 1, s.pixels = xs[2] * xs[3];
  }
  s.bias = bias;
  return s;
}

Stmt pointwiseConvPlainNest(const PointwiseConvShape& s, const Buffer& x, const Buffer& w, const Buffer& b,
                            const Buffer& y) {
  Type elem = y->elemType;
  Expr n = Var::make("n"), g = Var::make("g"), v = Var::make("v"), r = Var::make("r"), p = Var::make("p");
  Expr l = Var::make("l"), c = Var::make("c"), i = Var::make("i");
  const bool rowed = s.rowed();
  Expr block = g * s.vectors + v;
  // The output pixel and the input pixel it reads: flat (stride 1: one row of H·W), or row r,
  // column p of a strided one.
  Expr out = rowed ? r * s.pixels + p : p;
  Expr in = rowed ? (r * s.strideH) * s.inWidth + p * s.strideW : p;
  const int64_t outPixels = s.rows * s.pixels, inPixels = rowed ? s.inHeight * s.inWidth : s.pixels;
  Expr yOff = ((n * (s.groups * s.vectors) + block) * outPixels + out) * s.lanes + l;
  Expr xOff = ((n * s.cb + c) * inPixels + in) * s.ib + i;
  Expr wOff = ((g * s.cb + c) * s.ib + i) * (s.vectors * s.lanes) + v * s.lanes + l;
  Expr start = b ? Load::make(b, block * s.lanes + l) : literal(elem, 0);
  Expr first = EQ::make(c, i64(0)) && EQ::make(i, i64(0));
  Stmt update = Store::make(y, yOff, Select::make(first, start, Load::make(y, yOff)) + Load::make(x, xOff) * Load::make(w, wOff));
  Stmt nest = serialFor(c, 0, s.cb, serialFor(i, 0, s.ib, update));
  nest = serialFor(p, 0, s.pixels, serialFor(l, 0, s.lanes, nest));
  if (rowed) nest = serialFor(r, 0, s.rows, nest);
  return serialFor(n, 0, s.n, serialFor(g, 0, s.groups, serialFor(v, 0, s.vectors, nest)));
}

PrimFunc pointwiseConvPlainFunc(const PointwiseConvShape& s) {
  Type elem = Type::f32();
  const int64_t inPixels = s.rowed() ? s.inHeight * s.inWidth : s.pixels;
  Buffer x = makeBuffer("x", elem, {s.n, s.cb, inPixels, s.ib});
  Buffer w = makeBuffer("w", elem, {s.groups, s.cb, s.ib, s.vectors * s.lanes});
  Buffer b = s.bias ? makeBuffer("b", elem, {s.groups * s.vectors * s.lanes}) : nullptr;
  Buffer y = makeBuffer("y", elem, {s.n, s.groups * s.vectors, s.rows * s.pixels, s.lanes});
  return plainFunc("conv2d_nchwc", x, w, b, y, pointwiseConvPlainNest(s, x, w, b, y));
}

bool pointwiseConvAnnotationFits(const PointwiseConvShape& s, const Knobs& knobs, int registers) {
  int64_t mi = knob(knobs, "mi", 0), po = knob(knobs, "po", -1), v = knob(knobs, "oc_vecs", s.vectors);
  if (v != s.vectors || mi < 1 || mi > s.pixels || s.lanes < 1) return false;
  return (po == 0 || po == 1) && mi * s.vectors + s.vectors + 1 <= registers;
}

Knobs pointwiseConvDefaultKnobs(const PointwiseConvShape& s, int registers) {
  int64_t tallest = 1;
  while (tallest < 16 && tallest < s.pixels && (tallest + 1) * s.vectors + s.vectors + 1 <= registers) ++tallest;
  int64_t mi = tallest;
  while (mi > 1 && s.pixels % mi != 0) --mi;
  if (mi == 1) mi = tallest;  // no divisor: the tallest tile and a tail loop
  return {{"mi", mi}, {"po", 1}, {"oc_vecs", s.vectors}};
}

std::vector<Knobs> pointwiseConvAnnotations(const PointwiseConvShape& s, int registers) {
  std::vector<Knobs> out;
  for (int64_t po : {0, 1})
    for (int64_t mi = 1; mi <= 16; ++mi) {
      Knobs k{{"mi", mi}, {"po", po}, {"oc_vecs", s.vectors}};
      if (pointwiseConvAnnotationFits(s, k, registers)) out.push_back(std::move(k));
    }
  return out;
}

void applyPointwiseConvSketch(Schedule& sched, const PointwiseConvShape& s, const Knobs& knobs, int registers) {
  if (!pointwiseConvAnnotationFits(s, knobs, registers))
    throw Error("conv2d_nchwc sketch: annotation '" + knobsText(knobs) + "' does not fit the shape",
                ErrorKind::InvalidInput);
  const int64_t mi = knobs.at("mi"), po = knobs.at("po");
  const bool vectors = s.lanes > 1, tail = s.pixels % mi != 0, rowed = s.rowed();
  if (po == 1)
    sched.reorder(rowed ? std::vector<std::string>{"g", "r", "p", "v"} : std::vector<std::string>{"g", "p", "v"});
  else
    sched.reorder(rowed ? std::vector<std::string>{"r", "p", "g", "v"} : std::vector<std::string>{"p", "g", "v"});
  auto [po_, pi] = sched.split("p", mi, TailStrategy::Loop);
  if (po == 1)
    sched.reorder({po_, "c", "i", pi, "v", "l"});
  else
    sched.reorder({po_, "g", "c", "i", pi, "v", "l"});
  if (mi > 1) sched.unroll(pi);
  if (s.vectors > 1) sched.unroll("v");
  if (!vectors) sched.unroll("l");
  sched.cacheWrite("c");
  const bool parallel =
      wantParallel(s.n * s.rows * s.pixels * s.groups * s.vectors * s.lanes, s.cb * s.ib);
  const int64_t pixelTiles = s.pixels / mi;
  if (rowed) {
    // Strided: weight groups × output rows (po = 1) or the rows (po = 0) run in parallel.
    if (parallel && po == 1 && s.groups * s.rows >= 2)
      sched.parallel(sched.fuse("g", "r"));
    else if (parallel && po == 0 && s.rows >= 2)
      sched.parallel("r");
  } else if (parallel && po == 1 && !tail && pixelTiles >= 2) {
    sched.parallel(sched.fuse("g", po_));
  } else if (parallel && po == 1 && s.groups >= 2) {
    sched.parallel("g");
  } else if (parallel && po == 0 && pixelTiles >= 2) {
    sched.parallel(po_);
  }
  if (vectors) {
    sched.vectorize("l");
    sched.vectorize("l_r");
    sched.vectorize("l_w");
  }
  if (!tail) return;
  // The P mod mi last pixels (loop p_t; its inner loops renamed g_t (po = 0), v_t, l_t, c_t, i_t):
  // one pixel by a whole weight block in registers.
  if (po == 1)
    sched.reorder({"c_t", "i_t", "v_t", "l_t"});
  else
    sched.reorder({"g_t", "c_t", "i_t", "v_t", "l_t"});
  if (s.vectors > 1) sched.unroll("v_t");
  if (!vectors) sched.unroll("l_t");
  sched.cacheWrite("c_t");
  if (parallel && po == 0 && !rowed && s.groups >= 2) sched.parallel("g_t");
  if (vectors) {
    sched.vectorize("l_t");
    sched.vectorize("l_t_r");
    sched.vectorize("l_t_w");
  }
}

std::optional<PointwiseConvShape> pointwiseConvShapeOfKey(const std::string& key, int64_t ocVecs, int lanes) {
  TuneKeyParts parts = parseTuneKey(key);
  if (parts.kind != "conv2d_nchwc") throw Error("tuning key '" + key + "' is not a conv2d_nchwc key", ErrorKind::InvalidInput);
  const Knobs& p = parts.params;
  if (knob(p, "kh", 1) != 1 || knob(p, "kw", 1) != 1 || knob(p, "ph", 0) != 0 || knob(p, "pw", 0) != 0 ||
      knob(p, "g", 1) != 1)
    return std::nullopt;
  LowerOptions options;
  options.vectorLanes = lanes;
  const int64_t c = knob(p, "c", 1), o = knob(p, "o", 1), h = knob(p, "h", 1), w = knob(p, "w", 1);
  const int64_t sh = knob(p, "sh", 1), sw = knob(p, "sw", 1);
  const int64_t ib = channelBlock(c, options), block = channelBlock(o, options);
  if (ocVecs < 1 || sh < 1 || sw < 1 || (o / block) % ocVecs != 0) return std::nullopt;
  const int64_t n = knob(p, "n", 1);
  // The buffers alter-layout gives the kernel, and the bias that batch-norm folding leaves.
  return pointwiseConvShape({n, c / ib, h, w, ib}, {o / (block * ocVecs), c / ib, 1, 1, ib, block * ocVecs},
                            {n, o / block, (h - 1) / sh + 1, (w - 1) / sw + 1, block}, {sh, sw}, {0, 0}, 1, true);
}

Trace pointwiseConvTrace(const std::string& key, const Knobs& knobs, int lanes, int registers) {
  std::optional<PointwiseConvShape> s = pointwiseConvShapeOfKey(key, knob(knobs, "oc_vecs", 1), lanes);
  if (!s) throw Error("tuning key '" + key + "' has no sketch for '" + knobsText(knobs) + "'", ErrorKind::InvalidInput);
  Schedule sched(pointwiseConvPlainFunc(*s));
  applyPointwiseConvSketch(sched, *s, knobs, registers);
  return sched.trace();
}

}  // namespace kiln::core::lower

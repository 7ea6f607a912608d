// The plain nest of direct packed convolutions and its sketch rule; see conv_search.h.
#include "core/lower/conv_search.h"

#include "core/lower/lower_internal.h"
#include "core/lower/schedule.h"
#include "runtime/error.h"

namespace kiln::core::lower {

using namespace tir;

std::optional<ConvSketchShape> convSketchShape(const Shape& xs, const Shape& ws, const Shape& ys,
                                               const std::vector<int64_t>& stride, const std::vector<int64_t>& padding,
                                               const std::vector<int64_t>& dilation, int64_t groups, bool bias) {
  if (xs.size() != 5 || ws.size() != 6 || ys.size() != 5 || groups != 1) return std::nullopt;
  if (stride.size() != 2 || padding.size() != 2 || dilation.size() != 2) return std::nullopt;
  if (stride[0] < 1 || stride[1] < 1 || padding[0] < 0 || padding[1] < 0 || dilation[0] < 1 || dilation[1] < 1)
    return std::nullopt;
  if (ws[2] < 1 || ws[3] < 1 || ws[1] != xs[1] || ws[4] != xs[4]) return std::nullopt;
  auto outExtent = [](int64_t in, int64_t k, int64_t st, int64_t pad, int64_t dil) {
    return (in + 2 * pad - dil * (k - 1) - 1) / st + 1;
  };
  if (ys[2] < 1 || ys[3] < 1 || ys[2] != outExtent(xs[2], ws[2], stride[0], padding[0], dilation[0]) ||
      ys[3] != outExtent(xs[3], ws[3], stride[1], padding[1], dilation[1]))
    return std::nullopt;
  ConvSketchShape s;
  s.n = xs[0], s.cb = xs[1], s.ib = xs[4];
  s.lanes = ys[4], s.groups = ws[0];
  if (s.lanes < 1 || ws[5] % s.lanes != 0) return std::nullopt;
  s.vectors = ws[5] / s.lanes;
  if (ys[0] != s.n || ys[1] != s.groups * s.vectors) return std::nullopt;
  s.strideH = stride[0], s.strideW = stride[1];
  s.inHeight = xs[2], s.inWidth = xs[3];
  s.kh = ws[2], s.kw = ws[3];
  s.padH = padding[0], s.padW = padding[1];
  s.dilH = dilation[0], s.dilW = dilation[1];
  if (s.rowed()) {
    s.rows = ys[2], s.pixels = ys[3];
  } else {
    s.rows = 1, s.pixels = xs[2] * xs[3];
  }
  s.bias = bias;
  return s;
}

namespace {

/// Accumulator vectors a tile may hold: the builder's budget (schedule.h accumulatorBudget), the
/// weight vectors loaded one at a time between FMAs and the input broadcast from memory.
int64_t tileBudget(int registers) {
  LowerOptions options;
  options.vectorRegisters = registers;
  return accumulatorBudget(options);
}

/// xp = x zero-padded to the rows and columns the windows reach (see the file comment).
Stmt paddedCopy(const ConvSketchShape& s, const Buffer& x, const Buffer& xp) {
  Expr n = Var::make("xn"), c = Var::make("xc"), h = Var::make("xh"), w = Var::make("xw"), i = Var::make("xi");
  const int64_t ph = s.paddedHeight(), pw = s.paddedWidth();
  Expr row = h - s.padH, col = w - s.padW;
  Expr inside = row >= i64(0) && row < i64(s.inHeight) && col >= i64(0) && col < i64(s.inWidth);
  // The index is clamped into the image so the load is safe wherever the select discards it.
  Expr r = max(min(row, i64(s.inHeight - 1)), i64(0)), q = max(min(col, i64(s.inWidth - 1)), i64(0));
  Expr from = (((n * s.cb + c) * s.inHeight + r) * s.inWidth + q) * s.ib + i;
  Expr to = (((n * s.cb + c) * ph + h) * pw + w) * s.ib + i;
  Stmt copy = Store::make(xp, to, Select::make(inside, Load::make(x, from), literal(x->elemType, 0)));
  return serialFor(n, 0, s.n,
                   serialFor(c, 0, s.cb, serialFor(h, 0, ph, serialFor(w, 0, pw, serialFor(i, 0, s.ib, copy)))));
}

}  // namespace

Stmt convSketchPlainNest(const ConvSketchShape& s, const Buffer& x, const Buffer& w, const Buffer& b,
                         const Buffer& y) {
  Type elem = y->elemType;
  Expr n = Var::make("n"), g = Var::make("g"), v = Var::make("v"), r = Var::make("r"), p = Var::make("p");
  Expr l = Var::make("l"), c = Var::make("c"), i = Var::make("i"), kh = Var::make("kh"), kw = Var::make("kw");
  const bool rowed = s.rowed(), windowed = s.windowed();
  // A padded convolution reads the padded copy, whose rows and columns start at the padding.
  Buffer src = s.padded() ? makeBuffer("xp", x->elemType, {s.n, s.cb, s.paddedHeight(), s.paddedWidth(), s.ib}) : x;
  const int64_t srcH = s.padded() ? s.paddedHeight() : s.inHeight, srcW = s.padded() ? s.paddedWidth() : s.inWidth;
  Expr block = g * s.vectors + v;
  // The output pixel and the input pixel it reads: flat (pointwise at stride 1: one row of H·W),
  // or row r, column p and the window's tap kh, kw.
  Expr out = rowed ? r * s.pixels + p : p;
  Expr inRow = r * s.strideH, inCol = p * s.strideW;
  if (windowed) inRow = inRow + kh * s.dilH, inCol = inCol + kw * s.dilW;
  Expr in = rowed ? inRow * srcW + inCol : p;
  const int64_t outPixels = s.rows * s.pixels, inPixels = rowed ? srcH * srcW : s.pixels;
  Expr yOff = ((n * (s.groups * s.vectors) + block) * outPixels + out) * s.lanes + l;
  Expr xOff = ((n * s.cb + c) * inPixels + in) * s.ib + i;
  Expr tap = windowed ? (c * s.kh + kh) * s.kw + kw : c;
  Expr wOff = ((g * (s.cb * s.kh * s.kw) + tap) * s.ib + i) * (s.vectors * s.lanes) + v * s.lanes + l;
  Expr start = b ? Load::make(b, block * s.lanes + l) : literal(elem, 0);
  Expr first = EQ::make(c, i64(0)) && EQ::make(i, i64(0));
  if (windowed) first = EQ::make(c, i64(0)) && EQ::make(kh, i64(0)) && EQ::make(kw, i64(0)) && EQ::make(i, i64(0));
  Stmt update = Store::make(y, yOff, Select::make(first, start, Load::make(y, yOff)) + Load::make(src, xOff) * Load::make(w, wOff));
  Stmt reduce = serialFor(i, 0, s.ib, update);
  if (windowed) reduce = serialFor(kh, 0, s.kh, serialFor(kw, 0, s.kw, reduce));
  Stmt nest = serialFor(c, 0, s.cb, reduce);
  nest = serialFor(p, 0, s.pixels, serialFor(l, 0, s.lanes, nest));
  if (rowed) nest = serialFor(r, 0, s.rows, nest);
  nest = serialFor(n, 0, s.n, serialFor(g, 0, s.groups, serialFor(v, 0, s.vectors, nest)));
  if (!s.padded()) return nest;
  return Allocate::make(src, Seq::make({paddedCopy(s, x, src), nest}));
}

PrimFunc convSketchPlainFunc(const ConvSketchShape& s) {
  Type elem = Type::f32();
  const int64_t inPixels = s.rowed() ? s.inHeight * s.inWidth : s.pixels;
  Buffer x = makeBuffer("x", elem, {s.n, s.cb, inPixels, s.ib});
  Buffer w = makeBuffer("w", elem, {s.groups, s.cb * s.kh * s.kw, s.ib, s.vectors * s.lanes});
  Buffer b = s.bias ? makeBuffer("b", elem, {s.groups * s.vectors * s.lanes}) : nullptr;
  Buffer y = makeBuffer("y", elem, {s.n, s.groups * s.vectors, s.rows * s.pixels, s.lanes});
  return plainFunc("conv2d_nchwc", x, w, b, y, convSketchPlainNest(s, x, w, b, y));
}

bool convSketchAnnotationFits(const ConvSketchShape& s, const Knobs& knobs, int registers) {
  int64_t mi = knob(knobs, "mi", 0), po = knob(knobs, "po", -1), v = knob(knobs, "oc_vecs", s.vectors);
  if (v != s.vectors || mi < 1 || mi > s.pixels || s.lanes < 1) return false;
  return (po == 0 || po == 1) && mi * s.vectors <= tileBudget(registers);
}

Knobs convSketchDefaultKnobs(const ConvSketchShape& s, int registers) {
  int64_t tallest = 1;
  while (tallest < 16 && tallest < s.pixels && (tallest + 1) * s.vectors <= tileBudget(registers)) ++tallest;
  int64_t mi = tallest;
  while (mi > 1 && s.pixels % mi != 0) --mi;
  if (mi == 1) mi = tallest;  // no divisor: the tallest tile and a tail loop
  return {{"mi", mi}, {"po", 1}, {"oc_vecs", s.vectors}};
}

std::vector<Knobs> convSketchAnnotations(const ConvSketchShape& s, int registers) {
  std::vector<Knobs> out;
  for (int64_t po : {0, 1})
    for (int64_t mi = 1; mi <= 16; ++mi) {
      Knobs k{{"mi", mi}, {"po", po}, {"oc_vecs", s.vectors}};
      if (convSketchAnnotationFits(s, k, registers)) out.push_back(std::move(k));
    }
  return out;
}

void applyConvSketch(Schedule& sched, const ConvSketchShape& s, const Knobs& knobs, int registers) {
  if (!convSketchAnnotationFits(s, knobs, registers))
    throw Error("conv2d_nchwc sketch: annotation '" + knobsText(knobs) + "' does not fit the shape",
                ErrorKind::InvalidInput);
  const int64_t mi = knobs.at("mi"), po = knobs.at("po");
  const bool vectors = s.lanes > 1, tail = s.pixels % mi != 0, rowed = s.rowed();
  if (po == 1)
    sched.reorder(rowed ? std::vector<std::string>{"g", "r", "p", "v"} : std::vector<std::string>{"g", "p", "v"});
  else
    sched.reorder(rowed ? std::vector<std::string>{"r", "p", "g", "v"} : std::vector<std::string>{"p", "g", "v"});
  auto [po_, pi] = sched.split("p", mi, TailStrategy::Loop);
  // The reduction (c, the window's taps, i) outside the register tile.
  const std::vector<std::string> reduction =
      s.windowed() ? std::vector<std::string>{"c", "kh", "kw", "i"} : std::vector<std::string>{"c", "i"};
  auto tileOrder = [&](const std::string& suffix, std::vector<std::string> order) {
    for (const std::string& loop : reduction) order.push_back(loop + suffix);
    for (const char* loop : {"v", "l"}) order.push_back(loop + suffix);
    return order;
  };
  std::vector<std::string> order = tileOrder("", po == 1 ? std::vector<std::string>{po_} : std::vector<std::string>{po_, "g"});
  order.insert(order.end() - 2, pi);
  sched.reorder(order);
  if (mi > 1) sched.unroll(pi);
  if (s.vectors > 1) sched.unroll("v");
  if (!vectors) sched.unroll("l");
  sched.cacheWrite("c");
  const bool parallel =
      wantParallel(s.n * s.rows * s.pixels * s.groups * s.vectors * s.lanes, s.cb * s.ib * s.kh * s.kw);
  const int64_t pixelTiles = s.pixels / mi;
  if (rowed) {
    // Rows: weight groups × output rows (po = 1) or the rows (po = 0) run in parallel. With a
    // tail loop the fused loop's iterations write y at two indices, which parallel's exact
    // check would replay step by step (too many on large windows): the rows alone then.
    if (parallel && po == 1 && !tail && s.groups * s.rows >= 2)
      sched.parallel(sched.fuse("g", "r"));
    else if (parallel && po == 1 && s.rows >= 2)
      sched.parallel("r");
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
  if (tail) {
    // The P mod mi last pixels (loop p_t; its inner loops renamed g_t (po = 0), v_t, l_t, c_t,
    // kh_t, kw_t, i_t): one pixel by a whole weight block in registers.
    sched.reorder(tileOrder("_t", po == 1 ? std::vector<std::string>{} : std::vector<std::string>{"g_t"}));
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
  if (!s.padded()) return;
  // The padded copy: its rows in parallel, the channel block in vectors.
  const int64_t copied = s.n * s.cb * s.paddedHeight() * s.paddedWidth() * s.ib;
  if (wantParallel(copied) && s.n * s.cb * s.paddedHeight() >= 2) sched.parallel(sched.fuse(sched.fuse("xn", "xc"), "xh"));
  if (s.ib > 1) sched.vectorize("xi");
}

std::optional<ConvSketchShape> convSketchShapeOfKey(const std::string& key, int64_t ocVecs, int lanes) {
  TuneKeyParts parts = parseTuneKey(key);
  if (parts.kind != "conv2d_nchwc") throw Error("tuning key '" + key + "' is not a conv2d_nchwc key", ErrorKind::InvalidInput);
  const Knobs& p = parts.params;
  if (knob(p, "g", 1) != 1) return std::nullopt;
  LowerOptions options;
  options.vectorLanes = lanes;
  const int64_t c = knob(p, "c", 1), o = knob(p, "o", 1), h = knob(p, "h", 1), w = knob(p, "w", 1);
  const int64_t kh = knob(p, "kh", 1), kw = knob(p, "kw", 1), sh = knob(p, "sh", 1), sw = knob(p, "sw", 1);
  const int64_t ph = knob(p, "ph", 0), pw = knob(p, "pw", 0), dh = knob(p, "dh", 1), dw = knob(p, "dw", 1);
  const int64_t ib = channelBlock(c, options), block = channelBlock(o, options);
  if (ocVecs < 1 || sh < 1 || sw < 1 || dh < 1 || dw < 1 || (o / block) % ocVecs != 0) return std::nullopt;
  const int64_t n = knob(p, "n", 1);
  const int64_t oh = (h + 2 * ph - dh * (kh - 1) - 1) / sh + 1, ow = (w + 2 * pw - dw * (kw - 1) - 1) / sw + 1;
  // The buffers alter-layout gives the kernel, and the bias that batch-norm folding leaves.
  return convSketchShape({n, c / ib, h, w, ib}, {o / (block * ocVecs), c / ib, kh, kw, ib, block * ocVecs},
                         {n, o / block, oh, ow, block}, {sh, sw}, {ph, pw}, {dh, dw}, 1, true);
}

Trace convSketchTrace(const std::string& key, const Knobs& knobs, int lanes, int registers) {
  std::optional<ConvSketchShape> s = convSketchShapeOfKey(key, knob(knobs, "oc_vecs", 1), lanes);
  if (!s) throw Error("tuning key '" + key + "' has no sketch for '" + knobsText(knobs) + "'", ErrorKind::InvalidInput);
  Schedule sched(convSketchPlainFunc(*s));
  applyConvSketch(sched, *s, knobs, registers);
  return sched.trace();
}

}  // namespace kiln::core::lower

// The plain nest of direct packed convolutions and its sketch rule; see conv_search.h.
#include "core/lower/conv_search.h"

#include "core/lower/lower_internal.h"
#include "core/lower/schedule.h"
#include "runtime/error.h"

namespace kiln::core::lower {

using namespace tir;

namespace {

/// Whether a convolution's attributes are valid (stride, dilation ≥ 1, padding ≥ 0) and its
/// window (`ws` dims 2, 3 ≥ 1) over the input's height and width (`xs` dims 2, 3) gives the
/// output's (`ys` dims 2, 3).
bool windowAgrees(const Shape& xs, const Shape& ws, const Shape& ys, const std::vector<int64_t>& stride,
                  const std::vector<int64_t>& padding, const std::vector<int64_t>& dilation) {
  if (stride.size() != 2 || padding.size() != 2 || dilation.size() != 2) return false;
  for (size_t d = 0; d < 2; ++d) {
    if (stride[d] < 1 || padding[d] < 0 || dilation[d] < 1 || ws[d + 2] < 1 || ys[d + 2] < 1) return false;
    if (ys[d + 2] != (xs[d + 2] + 2 * padding[d] - dilation[d] * (ws[d + 2] - 1) - 1) / stride[d] + 1)
      return false;
  }
  return true;
}

/// `s`'s window: stride, padding, dilation, the input's height and width (`xs` dims 2, 3), the
/// window (kh, kw) and the output's rows and columns (`ys` dims 2, 3).
void setWindow(ConvSketchShape& s, const Shape& xs, int64_t kh, int64_t kw, const Shape& ys,
               const std::vector<int64_t>& stride, const std::vector<int64_t>& padding,
               const std::vector<int64_t>& dilation) {
  s.strideH = stride[0], s.strideW = stride[1];
  s.inHeight = xs[2], s.inWidth = xs[3];
  s.kh = kh, s.kw = kw;
  s.padH = padding[0], s.padW = padding[1];
  s.dilH = dilation[0], s.dilW = dilation[1];
  s.rows = ys[2], s.pixels = ys[3];
}

}  // namespace

std::optional<ConvSketchShape> convSketchShape(const Shape& xs, const Shape& ws, const Shape& ys,
                                               const std::vector<int64_t>& stride,
                                               const std::vector<int64_t>& padding,
                                               const std::vector<int64_t>& dilation, int64_t groups,
                                               bool bias) {
  if (xs.size() != 5 || ws.size() != 6 || ys.size() != 5) return std::nullopt;
  if (!windowAgrees(xs, ws, ys, stride, padding, dilation)) return std::nullopt;
  // Depthwise: one channel block per weight block, its taps for each lane.
  const bool depthwise = groups != 1;
  if (depthwise && (groups != xs[1] * xs[4] || ws[0] != xs[1] || ws[1] != 1 || ws[4] != 1 || ws[5] != xs[4] ||
                    ys[1] != xs[1] || ys[4] != xs[4]))
    return std::nullopt;
  if (!depthwise && (ws[1] != xs[1] || ws[4] != xs[4])) return std::nullopt;
  ConvSketchShape s;
  s.n = xs[0], s.cb = xs[1], s.ib = xs[4];
  s.lanes = ys[4], s.groups = ws[0];
  if (s.lanes < 1 || ws[5] % s.lanes != 0) return std::nullopt;
  s.vectors = ws[5] / s.lanes;
  if (ys[0] != s.n || ys[1] != s.groups * s.vectors) return std::nullopt;
  setWindow(s, xs, ws[2], ws[3], ys, stride, padding, dilation);
  if (depthwise) s.depthwise = true, s.cb = 1, s.ib = 1;
  if (!s.rowed()) s.rows = 1, s.pixels = xs[2] * xs[3];
  s.bias = bias;
  return s;
}

std::optional<ConvSketchShape> planarConvSketchShape(const Shape& xs, const Shape& ws, const Shape& ys,
                                                     const std::vector<int64_t>& stride,
                                                     const std::vector<int64_t>& padding,
                                                     const std::vector<int64_t>& dilation, int64_t groups,
                                                     bool bias, int64_t vectors, int lanes) {
  if (xs.size() != 4 || ws.size() != 4 || ys.size() != 4 || groups < 1 || vectors < 1 || lanes < 1)
    return std::nullopt;
  if (!windowAgrees(xs, ws, ys, stride, padding, dilation)) return std::nullopt;
  if (xs[1] % groups != 0 || ws[0] % groups != 0 || ws[1] != xs[1] / groups || ys[0] != xs[0] ||
      ys[1] != ws[0])
    return std::nullopt;
  const int64_t perGroup = ws[0] / groups;
  if (perGroup % vectors != 0 && vectors != 1) return std::nullopt;
  ConvSketchShape s;
  s.planar = true;
  s.n = xs[0], s.cb = ws[1], s.ib = 1;
  s.groups = ws[0] / vectors, s.vectors = vectors, s.lanes = 1;
  s.convGroups = groups, s.columnLanes = lanes;
  setWindow(s, xs, ws[2], ws[3], ys, stride, padding, dilation);
  s.bias = bias;
  return s;
}

ConvSketchShape planarShapeOfRecord(const std::function<std::optional<ConvSketchShape>(int64_t)>& shapeFor,
                                    const Knobs* tuned, const Knobs& defaults, int registers) {
  if (tuned && tuned->count("oc_vecs"))
    if (std::optional<ConvSketchShape> s = shapeFor(tuned->at("oc_vecs"));
        s && convSketchAnnotationFits(*s, *tuned, registers))
      return *s;
  return *shapeFor(defaults.at("oc_vecs"));
}

std::optional<ConvSketchShape> quantizedPlanarConvSketchShape(
    const Shape& xs, const Shape& ws, const Shape& ys, const std::vector<int64_t>& stride,
    const std::vector<int64_t>& padding, const std::vector<int64_t>& dilation, int64_t groups,
    int64_t zeroPoint, int64_t vectors, int lanes) {
  std::optional<ConvSketchShape> s =
      planarConvSketchShape(xs, ws, ys, stride, padding, dilation, groups, false, vectors, lanes);
  if (s) s->bytes = true, s->zeroPoint = zeroPoint;
  return s;
}

std::optional<ConvSketchShape> quantizedConvSketchShape(const Shape& xs, const Shape& ws, const Shape& ys,
                                                        const std::vector<int64_t>& stride,
                                                        const std::vector<int64_t>& padding,
                                                        const std::vector<int64_t>& dilation, int64_t groups,
                                                        int64_t vectors) {
  if (xs.size() != 5 || ws.size() != 6 || ys.size() != 5 || vectors < 1 || ws[0] % vectors != 0)
    return std::nullopt;
  if (groups != 1 && vectors != 1) return std::nullopt;
  // The f32 packing of the same weight, which convSketchShape checks against the other buffers:
  // depthwise [C/L, 1, KH, KW, 1, L] (the same order); groups 1 [O/L, C/ib, KH, KW, ib, L] (the
  // same count, the words of four channels ordered otherwise).
  Shape asF32;
  if (groups != 1) {
    if (ws[1] != 1 || ws[5] != 1) return std::nullopt;
    asF32 = {ws[0], 1, ws[2], ws[3], 1, ws[4]};
  } else {
    if (ws[5] != 4 || xs[4] % 4 != 0 || ws[1] * 4 != xs[1] * xs[4]) return std::nullopt;
    asF32 = {ws[0], xs[1], ws[2], ws[3], xs[4], ws[4]};
  }
  std::optional<ConvSketchShape> s = convSketchShape(xs, asF32, ys, stride, padding, dilation, groups, true);
  if (!s || s->vectors != 1) return std::nullopt;
  s->bytes = true;
  s->groups /= vectors, s->vectors = vectors;
  return s;
}

int64_t quantizedConvDefaultVectors(const ConvSketchShape& s) {
  return !s.depthwise && (s.groups * s.vectors) % 2 == 0 ? 2 : 1;
}

std::vector<int32_t> quantizedConvShares(const int8_t* w, const Shape& ws, int64_t zx,
                                         const std::vector<int64_t>& in, const std::vector<int64_t>& stride,
                                         const std::vector<int64_t>& padding,
                                         const std::vector<int64_t>& dilation) {
  const int64_t outs = ws[0], channels = ws[1], kh = ws[2], kw = ws[3];
  auto runs = [&](size_t d, int64_t k) {
    const int64_t outputs = (in[d] + 2 * padding[d] - dilation[d] * (k - 1) - 1) / stride[d] + 1;
    return tapRuns(outputs, in[d], k, stride[d], padding[d], dilation[d]);
  };
  const std::vector<TapRun> rows = runs(0, kh), cols = runs(1, kw);
  std::vector<int32_t> shares;
  shares.reserve(rows.size() * cols.size() * static_cast<size_t>(outs));
  for (const TapRun& r : rows)
    for (const TapRun& q : cols)
      for (int64_t o = 0; o < outs; ++o) {
        int64_t sum = 0;
        for (int64_t c = 0; c < channels; ++c)
          for (int64_t th = r.lo; th < r.hi; ++th)
            for (int64_t tw = q.lo; tw < q.hi; ++tw) sum += w[((o * channels + c) * kh + th) * kw + tw];
        shares.push_back(static_cast<int32_t>(zx * sum));
      }
  return shares;
}

std::optional<ConvSketchShape> poolSketchShape(const Shape& xs, const Shape& ys, bool max,
                                               const std::vector<int64_t>& kernel,
                                               const std::vector<int64_t>& stride,
                                               const std::vector<int64_t>& padding,
                                               const std::vector<int64_t>& dilation) {
  if (xs.size() != 5 || ys.size() != 5 || kernel.size() != 2 || stride.size() != 2 || padding.size() != 2 ||
      dilation.size() != 2)
    return std::nullopt;
  if (ys[0] != xs[0] || ys[1] != xs[1] || ys[4] != xs[4] || xs[4] < 1 || ys[2] < 1 || ys[3] < 1)
    return std::nullopt;
  for (size_t d = 0; d < 2; ++d)
    if (kernel[d] < 1 || stride[d] < 1 || padding[d] < 0 || dilation[d] < 1) return std::nullopt;
  ConvSketchShape s;
  s.pool = max ? ConvSketchShape::Pool::Max : ConvSketchShape::Pool::Sum;
  s.depthwise = true;
  s.n = xs[0], s.cb = 1, s.ib = 1;
  s.groups = xs[1], s.vectors = 1, s.lanes = xs[4];
  setWindow(s, xs, kernel[0], kernel[1], ys, stride, padding, dilation);
  return s;
}

std::vector<TapRun> tapRuns(int64_t outputs, int64_t in, int64_t k, int64_t stride, int64_t pad, int64_t dil) {
  auto floorDiv = [](int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); };
  std::vector<TapRun> runs;
  for (int64_t o = 0; o < outputs; ++o) {
    // Taps t with 0 <= o·stride + t·dil − pad <= in − 1.
    const int64_t at = o * stride - pad;
    const int64_t lo = std::max<int64_t>(0, -floorDiv(at, dil)), hi = std::min(k, floorDiv(in - 1 - at, dil) + 1);
    if (!runs.empty() && runs.back().lo == lo && runs.back().hi == hi)
      ++runs.back().count;
    else
      runs.push_back({o, 1, lo, hi});
  }
  return runs;
}

std::vector<TapRun> ConvSketchShape::rowRuns() const {
  if (!regioned()) return {{0, rows, 0, 1}};
  return tapRuns(rows, inHeight, kh, strideH, padH, dilH);
}

std::vector<TapRun> ConvSketchShape::columnRuns() const {
  if (!regioned()) return {{0, pixels, 0, 1}};
  return tapRuns(pixels, inWidth, kw, strideW, padW, dilW);
}

bool ConvSketchShape::beyondReach() const {
  for (const std::vector<TapRun>& runs : {rowRuns(), columnRuns()})
    for (const TapRun& run : runs)
      if (run.noTaps()) return true;
  return false;
}

namespace {

/// Accumulator vectors a tile may hold: schedule.h accumulatorBudget, which leaves room for the
/// weight vectors loaded one at a time between FMAs and the input broadcast from memory.
int64_t tileBudget(int registers) {
  LowerOptions options;
  options.vectorRegisters = registers;
  return accumulatorBudget(options);
}

/// Where the reduction of output channel `channel` in region `region` starts: the bias (int8:
/// minus the zero point's share of the region), else zero.
Expr reductionStart(const ConvSketchShape& s, const Buffer& b, const Buffer& y, const Expr& channel,
                    int64_t region) {
  if (!b) return literal(y->elemType, 0);
  if (!s.bytes) return Load::make(b, channel);
  return literal(Type::i32(), 0) - Load::make(b, channel + region * (s.groups * s.vectors * s.lanes));
}

/// x·w, of int8 elements widened to i32.
Expr product(const ConvSketchShape& s, Expr x, Expr w) {
  if (s.bytes) x = cast(Type::i32(), x), w = cast(Type::i32(), w);
  return x * w;
}

/// A loop of the region of run A of rows and run B of columns: "p" → "p_1_2" (an axis of one run
/// adds no index).
struct RunNames {
  bool rowSuffix = false, columnSuffix = false;
  std::string region(const std::string& base, size_t a, size_t b) const {
    return base + (rowSuffix ? "_" + std::to_string(a) : "") + (columnSuffix ? "_" + std::to_string(b) : "");
  }
};

/// The regioned nest (see the file comment): per weight group, a nest per region.
Stmt regionedNest(const ConvSketchShape& s, const Buffer& x, const Buffer& w, const Buffer& b, const Buffer& y) {
  const std::vector<TapRun> rowRuns = s.rowRuns(), columnRuns = s.columnRuns();
  const RunNames names{rowRuns.size() > 1, columnRuns.size() > 1};
  Expr n = Var::make("n"), g = Var::make("g");
  std::vector<Stmt> regions;
  for (size_t a = 0; a < rowRuns.size(); ++a)
    for (size_t bi = 0; bi < columnRuns.size(); ++bi) {
      const TapRun &rows = rowRuns[a], &cols = columnRuns[bi];
      const int64_t region = static_cast<int64_t>(a * columnRuns.size() + bi);
      auto var = [&](const char* base) { return Var::make(names.region(base, a, bi)); };
      Expr r = var("r"), p = var("p"), l = var("l"), kh = var("kh"), kw = var("kw");
      Expr row = r + rows.first, col = p + cols.first, th = kh + rows.lo, tw = kw + cols.lo;
      Expr inRow = row * s.strideH + th * s.dilH - s.padH, inCol = col * s.strideW + tw * s.dilW - s.padW;
      const Expr yRow = row * s.pixels + col;
      // A region whose windows lie wholly in the padding (no taps) is the bias alone.
      const bool bare = rows.noTaps() || cols.noTaps();
      Stmt nest;
      const bool max = s.pool == ConvSketchShape::Pool::Max;
      if (s.planar) {
        // NCHW (see "NCHW"): o = g·V + v reads its convolution group's input channels.
        Expr v = var("v"), c = var("c"), o = g * s.vectors + v;
        const int64_t outs = s.groups * s.vectors, perGroup = outs / s.convGroups;
        Expr group = s.convGroups == 1 ? Expr(i64(0))
                     : perGroup == 1   ? o
                     : s.vectors == 1  ? o / perGroup
                                       : g / (perGroup / s.vectors);
        Expr yOff = (n * outs + o) * (s.rows * s.pixels) + yRow;
        Expr start = reductionStart(s, b, y, o, region);
        if (bare) {
          nest = serialFor(v, 0, s.vectors, Store::make(y, yOff, start));
        } else {
          Expr xOff =
              ((n * (s.convGroups * s.cb) + group * s.cb + c) * s.inHeight + inRow) * s.inWidth + inCol;
          Expr wOff = ((o * s.cb + c) * s.kh + th) * s.kw + tw;
          Expr first = EQ::make(c, i64(0)) && EQ::make(kh, i64(0)) && EQ::make(kw, i64(0));
          Expr xv = Load::make(x, xOff), wv = Load::make(w, wOff);
          Expr term = s.bytes ? (cast(Type::i32(), xv) - IntImm::make(Type::i32(), s.zeroPoint)) *
                                    cast(Type::i32(), wv)
                              : xv * wv;
          Stmt update = Store::make(y, yOff, Select::make(first, start, Load::make(y, yOff)) + term);
          nest = serialFor(kh, 0, rows.hi - rows.lo, serialFor(kw, 0, cols.hi - cols.lo, update));
          nest = serialFor(v, 0, s.vectors, serialFor(c, 0, s.cb, nest));
        }
      } else if (s.depthwise && bare) {
        Expr yOff = ((n * s.groups + g) * (s.rows * s.pixels) + yRow) * s.lanes + l;
        Expr start = max ? lowestValue(y->elemType) : reductionStart(s, b, y, g * s.lanes + l, region);
        nest = serialFor(l, 0, s.lanes, Store::make(y, yOff, start));
      } else if (bare) {
        Expr v = var("v"), block = g * s.vectors + v;
        Expr yOff = ((n * (s.groups * s.vectors) + block) * (s.rows * s.pixels) + yRow) * s.lanes + l;
        Expr start = reductionStart(s, b, y, block * s.lanes + l, region);
        nest = serialFor(v, 0, s.vectors, serialFor(l, 0, s.lanes, Store::make(y, yOff, start)));
      } else if (s.depthwise) {
        // One channel block g: y[n, g, row, col, l] over the taps of lane l only.
        Expr yOff = ((n * s.groups + g) * (s.rows * s.pixels) + yRow) * s.lanes + l;
        Expr xOff = (((n * s.groups + g) * s.inHeight + inRow) * s.inWidth + inCol) * s.lanes + l;
        Expr wOff = ((g * s.kh + th) * s.kw + tw) * s.lanes + l;
        Expr start = reductionStart(s, b, y, g * s.lanes + l, region);
        Expr first = EQ::make(kh, i64(0)) && EQ::make(kw, i64(0));
        Stmt update;
        if (s.pool == ConvSketchShape::Pool::None)
          update = Store::make(y, yOff,
                               Select::make(first, start, Load::make(y, yOff)) +
                                   product(s, Load::make(x, xOff), Load::make(w, wOff)));
        else if (max)
          update = Store::make(y, yOff,
                               Max::make(Select::make(first, lowestValue(y->elemType), Load::make(y, yOff)),
                                         Load::make(x, xOff)));
        else
          update =
              Store::make(y, yOff, Select::make(first, start, Load::make(y, yOff)) + Load::make(x, xOff));
        nest = serialFor(kw, 0, cols.hi - cols.lo, update);
        nest = serialFor(l, 0, s.lanes, serialFor(kh, 0, rows.hi - rows.lo, nest));
      } else {
        // Int8: i counts the block's words of four channels, j a word's bytes (see "Int8").
        Expr v = var("v"), c = var("c"), i = var("i"), j = var("j");
        Expr block = g * s.vectors + v;
        Expr yOff = ((n * (s.groups * s.vectors) + block) * (s.rows * s.pixels) + yRow) * s.lanes + l;
        Expr xOff =
            (((n * s.cb + c) * s.inHeight + inRow) * s.inWidth + inCol) * s.ib + (s.bytes ? i * 4 + j : i);
        Expr wOff =
            s.bytes
                ? (((((block * (s.cb * s.ib / 4) + c * (s.ib / 4) + i) * s.kh + th) * s.kw + tw) * s.lanes +
                    l) *
                       4 +
                   j)
                : ((g * (s.cb * s.kh * s.kw) + (c * s.kh + th) * s.kw + tw) * s.ib + i) *
                          (s.vectors * s.lanes) +
                      v * s.lanes + l;
        Expr start = reductionStart(s, b, y, block * s.lanes + l, region);
        Expr first = EQ::make(c, i64(0)) && EQ::make(kh, i64(0)) && EQ::make(kw, i64(0)) && EQ::make(i, i64(0));
        if (s.bytes) first = first && EQ::make(j, i64(0));
        Stmt update = Store::make(y, yOff,
                                  Select::make(first, start, Load::make(y, yOff)) +
                                      product(s, Load::make(x, xOff), Load::make(w, wOff)));
        Stmt words =
            s.bytes ? serialFor(i, 0, s.ib / 4, serialFor(j, 0, 4, update)) : serialFor(i, 0, s.ib, update);
        nest = serialFor(kw, 0, cols.hi - cols.lo, words);
        nest = serialFor(kh, 0, rows.hi - rows.lo, nest);
        nest = serialFor(v, 0, s.vectors, serialFor(l, 0, s.lanes, serialFor(c, 0, s.cb, nest)));
      }
      regions.push_back(serialFor(r, 0, rows.count, serialFor(p, 0, cols.count, nest)));
    }
  return serialFor(n, 0, s.n, serialFor(g, 0, s.groups, Seq::make(std::move(regions))));
}

}  // namespace

Stmt convSketchPlainNest(const ConvSketchShape& s, const Buffer& x, const Buffer& w, const Buffer& b,
                         const Buffer& y) {
  if (s.regioned()) return regionedNest(s, x, w, b, y);
  Expr n = Var::make("n"), g = Var::make("g"), v = Var::make("v"), r = Var::make("r"), p = Var::make("p");
  Expr l = Var::make("l"), c = Var::make("c"), i = Var::make("i"), j = Var::make("j");
  const bool rowed = s.rowed();
  Expr block = g * s.vectors + v;
  // The output pixel and the input pixel it reads: flat (stride 1: one row of H·W), or row r,
  // column p of a strided one.
  Expr out = rowed ? r * s.pixels + p : p;
  Expr in = rowed ? (r * s.strideH) * s.inWidth + p * s.strideW : p;
  const int64_t outPixels = s.rows * s.pixels, inPixels = rowed ? s.inHeight * s.inWidth : s.pixels;
  // Own weights (Winograd's GEMM): the output pixel-major, y[p, n, block, l], so the products of
  // a block of pixels are contiguous.
  Expr yOff = s.ownWeights ? ((out * s.n + n) * (s.groups * s.vectors) + block) * s.lanes + l
                           : ((n * (s.groups * s.vectors) + block) * outPixels + out) * s.lanes + l;
  // Int8: i counts the block's words of four channels, j a word's bytes (see "Int8").
  Expr xOff = ((n * s.cb + c) * inPixels + in) * s.ib + (s.bytes ? i * 4 + j : i);
  Expr wGroup = s.ownWeights ? g * s.n + n : g;
  Expr wOff = s.bytes ? ((((block * s.cb + c) * (s.ib / 4) + i) * s.lanes + l) * 4 + j)
                      : ((wGroup * s.cb + c) * s.ib + i) * (s.vectors * s.lanes) + v * s.lanes + l;
  Expr start = reductionStart(s, b, y, block * s.lanes + l, 0);
  Expr first = EQ::make(c, i64(0)) && EQ::make(i, i64(0));
  if (s.bytes) first = first && EQ::make(j, i64(0));
  Stmt update = Store::make(
      y, yOff,
      Select::make(first, start, Load::make(y, yOff)) + product(s, Load::make(x, xOff), Load::make(w, wOff)));
  Stmt words =
      s.bytes ? serialFor(i, 0, s.ib / 4, serialFor(j, 0, 4, update)) : serialFor(i, 0, s.ib, update);
  Stmt nest = serialFor(c, 0, s.cb, words);
  nest = serialFor(p, 0, s.pixels, serialFor(l, 0, s.lanes, nest));
  if (rowed) nest = serialFor(r, 0, s.rows, nest);
  return serialFor(n, 0, s.n, serialFor(g, 0, s.groups, serialFor(v, 0, s.vectors, nest)));
}

PrimFunc convSketchPlainFunc(const ConvSketchShape& s) {
  if (s.bytes && s.planar) {
    Buffer x = makeBuffer("x", Type::u8(), {s.inputElements()}),
           w = makeBuffer("w", Type::i8(), {s.weightElements()});
    Buffer y = makeBuffer("y", Type::i32(), {s.n, s.groups * s.vectors, s.rows, s.pixels});
    return plainFunc("qnn.conv2d", x, w, nullptr, y, convSketchPlainNest(s, x, w, nullptr, y));
  }
  if (s.bytes) {
    Buffer x = makeBuffer("x", Type::u8(), {s.inputElements()}),
           w = makeBuffer("w", Type::i8(), {s.weightElements()});
    Buffer b = makeBuffer("b", Type::i32(), {s.regions() * s.groups * s.vectors * s.lanes});
    Buffer y = makeBuffer("y", Type::i32(), {s.n, s.groups * s.vectors, s.rows * s.pixels, s.lanes});
    return plainFunc("qnn.conv2d_nchwc", x, w, b, y, convSketchPlainNest(s, x, w, b, y));
  }
  Type elem = Type::f32();
  Buffer x = makeBuffer("x", elem, {s.inputElements()});
  Buffer b = s.bias ? makeBuffer("b", elem, {s.groups * s.vectors * s.lanes}) : nullptr;
  if (s.planar) {
    Buffer w = makeBuffer("w", elem, {s.weightElements()});
    Buffer y = makeBuffer("y", elem, {s.n, s.groups * s.vectors, s.rows, s.pixels});
    return plainFunc("conv2d", x, w, b, y, convSketchPlainNest(s, x, w, b, y));
  }
  if (s.pool != ConvSketchShape::Pool::None) {
    Buffer y = makeBuffer("y", elem, {s.n, s.groups, s.rows * s.pixels, s.lanes});
    PrimFunc f;
    f.name = s.pool == ConvSketchShape::Pool::Max ? "max_pool2d" : "sum_pool2d";
    f.params = {x, y};
    f.numOutputs = 1;
    f.body = convSketchPlainNest(s, x, nullptr, nullptr, y);
    return f;
  }
  Buffer w = makeBuffer("w", elem, {s.weightElements()});
  Buffer y = s.ownWeights ? makeBuffer("y", elem, {s.pixels, s.n, s.groups * s.vectors, s.lanes})
                          : makeBuffer("y", elem, {s.n, s.groups * s.vectors, s.rows * s.pixels, s.lanes});
  return plainFunc("conv2d_nchwc", x, w, b, y, convSketchPlainNest(s, x, w, b, y));
}

namespace {

/// The widest run of output columns whose windows reach some tap (the interior, for a window).
int64_t widestColumnRun(const ConvSketchShape& s) {
  int64_t widest = 1;
  for (const TapRun& run : s.columnRuns())
    if (!run.noTaps()) widest = std::max(widest, run.count);
  return widest;
}

/// The lanes of an NCHW annotation's vectors: vl, or the target's.
int64_t planarLanes(const ConvSketchShape& s, const Knobs& knobs) { return knob(knobs, "vl", s.columnLanes); }

/// An NCHW annotation (see "NCHW"): mi vectors of vl columns (vl the target's lanes or a half or
/// quarter of them, at least 4; at most 64 columns: the tail loop's vectorize takes up to 64), V
/// the nest's, at most mi·V accumulator vectors.
bool planarAnnotationFits(const ConvSketchShape& s, const Knobs& knobs, int registers) {
  const int64_t mi = knob(knobs, "mi", 0), v = knob(knobs, "oc_vecs", 0), vl = planarLanes(s, knobs);
  if (knobs.count("po") || knob(knobs, "algo", 0) != 0) return false;
  if (knobs.count("par_chunks") && parallelChunksOf(&knobs) != knobs.at("par_chunks")) return false;
  const bool lanes = vl == s.columnLanes || ((vl == s.columnLanes / 2 || vl == s.columnLanes / 4) && vl >= 4);
  return lanes && v == s.vectors && mi >= 1 && mi * vl <= 64 && mi * v <= tileBudget(registers);
}

/// The NCHW default: enough vectors to cover a narrow row, else 3 (2 with 16 registers), of the
/// target's lanes; a window's row narrower than a vector of odd width as vectors of 4 lanes and a
/// last column of its own (ResNet-18 at -O2: its 3×3 layers' 13-column rows as 4 + 4 + 4 and 1
/// are 1.2× faster than as one tile of 8 + 4 + 1 lanes, and 5-column rows as 4 and 1 1.1×, while
/// 12 as 8 + 4 is faster than as 4 + 4 + 4, and MobileNetV2's 1×1 layers at 7×7 are 1.13× faster
/// as one tile of 4 + 2 + 1); then the most output channels (8, 6, 4, 3, 2, 1) that divide the
/// group's and whose mi·V vectors fit the registers. A depthwise convolution tiles columns only.
Knobs planarDefaultKnobs(const ConvSketchShape& s, int registers) {
  const int64_t budget = tileBudget(registers), widest = widestColumnRun(s);
  const int64_t perGroup = s.groups * s.vectors / s.convGroups;
  const bool quarter = widest < s.columnLanes && widest % 2 == 1 && widest > 4 && s.columnLanes >= 8 &&
                       s.windowed() && perGroup > 1;
  const int64_t lanes = quarter ? 4 : s.columnLanes;
  int64_t vecs = quarter ? std::min<int64_t>(3, widest / 4)
                         : std::clamp<int64_t>((widest + lanes - 1) / lanes, 1, budget >= 24 ? 3 : 2);
  int64_t block = 1;
  if (perGroup == 1) {
    vecs = std::clamp<int64_t>(budget / 3, 1, 64 / lanes);
  } else {
    // A narrow row's pieces are not counted: ResNet-18's 27-column rows at -O2 as one tile of 16
    // + 8 + 2 + 1 lanes by 8 channels (32 accumulators) are 1.19× faster than by 4 channels.
    for (int64_t b : {8, 6, 4, 3, 2, 1})
      if (b * vecs <= budget && perGroup % b == 0) {
        block = b;
        break;
      }
  }
  Knobs k{{"mi", std::max<int64_t>(1, std::min(vecs, 64 / lanes))}, {"oc_vecs", block}};
  if (quarter) k["vl"] = lanes;
  return k;
}

}  // namespace

bool convSketchAnnotationFits(const ConvSketchShape& s, const Knobs& knobs, int registers) {
  if (s.planar) return planarAnnotationFits(s, knobs, registers);
  int64_t mi = knob(knobs, "mi", 0), po = knob(knobs, "po", -1), v = knob(knobs, "oc_vecs", s.vectors);
  if (knob(knobs, "algo", 0) != 0) return false;  // a Winograd annotation (winograd_search.h)
  if (v != s.vectors || mi < 1 || mi > s.pixels || s.lanes < 1) return false;
  if (knobs.count("par_chunks") && parallelChunksOf(&knobs) != knobs.at("par_chunks")) return false;
  return (po == 0 || po == 1) && mi * s.vectors <= tileBudget(registers);
}

Knobs convSketchDefaultKnobs(const ConvSketchShape& s, int registers) {
  if (s.planar) return planarDefaultKnobs(s, registers);
  // A pool's tile is at most 8 columns, the hand-written kernel's it replaced (ResNet-50's stem
  // max pool in the model, fastest of eight runs: 8 at parity with it, 14 about 2 % slower).
  const int64_t cap = s.pool == ConvSketchShape::Pool::None ? 16 : 8;
  int64_t tallest = 1;
  while (tallest < cap && tallest < s.pixels && (tallest + 1) * s.vectors <= tileBudget(registers)) ++tallest;
  int64_t mi = tallest;
  while (mi > 1 && s.pixels % mi != 0) --mi;
  if (mi == 1) mi = tallest;  // no divisor: the tallest tile and a tail loop
  // Unregioned (pointwise) nests take the order of schedule.h convChannelsOuter: pixel
  // tiles outermost when the input is the larger operand, so each thread writes the rows it read.
  // A regioned nest runs the weight groups in parallel: its alternative, each region's outer loop
  // in parallel, is one launch per region (measured slower on ResNet-50's stem and 3×3 stride 2).
  // An int8 nest too (quantized_mobilenet_v2's 16 → 96 pointwise at 112×112: po = 1 112 µs, po = 0
  // 162 µs, each thread then writing one output plane rather than every block's).
  const bool groupsOuter =
      s.bytes || s.regioned() || convChannelsOuter(s.weightElements(), s.inputElements());
  Knobs k{{"mi", mi}, {"po", groupsOuter ? 1 : 0}, {"oc_vecs", s.vectors}};
  if (s.pool != ConvSketchShape::Pool::None) k.erase("oc_vecs");  // a pool has no weight packing
  return k;
}

std::vector<Knobs> convSketchAnnotations(const ConvSketchShape& s, int registers) {
  std::vector<Knobs> out;
  if (s.planar) {
    // Tiles wider than the widest run of columns compute the same code as the run's width.
    for (int64_t vl : {s.columnLanes, s.columnLanes / 2, s.columnLanes / 4}) {
      const int64_t useful = (widestColumnRun(s) + vl - 1) / std::max<int64_t>(1, vl);
      for (int64_t mi = 1; mi <= std::min<int64_t>(16, useful); ++mi) {
        Knobs k{{"mi", mi}, {"oc_vecs", s.vectors}};
        if (vl != s.columnLanes) k["vl"] = vl;
        if (planarAnnotationFits(s, k, registers)) out.push_back(std::move(k));
      }
    }
    return out;
  }
  for (int64_t po : {0, 1})
    for (int64_t mi = 1; mi <= 16; ++mi) {
      Knobs k{{"mi", mi}, {"po", po}, {"oc_vecs", s.vectors}};
      if (s.pool != ConvSketchShape::Pool::None) k.erase("oc_vecs");
      if (convSketchAnnotationFits(s, k, registers)) out.push_back(std::move(k));
    }
  return out;
}

std::optional<Knobs> convAnnotationOf(const ConvSketchShape& s, const Knobs& knobs, int registers) {
  if (knobs.count("mi")) return knobs;
  if (s.planar) return std::nullopt;  // the NCHW builder had no tuning key, so no records
  if (!knobs.count("ow_block") || knob(knobs, "oc_vecs", s.vectors) != s.vectors) return std::nullopt;
  // The builder ran one parallel loop over rows and weight groups in either order. A regioned
  // nest's po = 0 is a parallel loop per region and weight group instead (on ResNet-50's 7×7
  // layers, 32 groups × 9 regions: twice the builder's time), so there its order is po = 1.
  const Knobs byDefault = convSketchDefaultKnobs(s, registers);
  Knobs k{{"mi", std::min(knobs.at("ow_block"), s.pixels)},
          {"po", s.regioned() ? 1 : knob(knobs, "oc_outer", byDefault.at("po"))},
          {"oc_vecs", s.vectors}};
  if (const int64_t chunks = parallelChunksOf(&knobs); chunks != defaultParallelChunks())
    k["par_chunks"] = chunks;
  while (k["mi"] > 1 && !convSketchAnnotationFits(s, k, registers)) --k["mi"];
  if (!convSketchAnnotationFits(s, k, registers)) return std::nullopt;
  return k;
}

namespace {

/// The sketch in every region of a regioned nest (see the file comment).
void applyRegionedSketch(Schedule& sched, const ConvSketchShape& s, int64_t mi, int64_t po) {
  const std::vector<TapRun> rowRuns = s.rowRuns(), columnRuns = s.columnRuns();
  const RunNames names{rowRuns.size() > 1, columnRuns.size() > 1};
  const bool vectors = s.lanes > 1;
  const bool words = s.bytes && !s.depthwise;  // int8 words: dot4 steps (see "Int8")
  const bool parallel =
      wantParallel(s.n * s.rows * s.pixels * s.groups * s.vectors * s.lanes, s.cb * s.ib * s.kh * s.kw);
  const bool byGroups = parallel && po == 1 && s.groups >= 2;
  // A depthwise region reduces over the taps alone and has no output vectors beyond the lanes.
  const std::vector<const char*> reduction =
      s.depthwise ? std::vector<const char*>{"kh", "kw"} : std::vector<const char*>{"c", "kh", "kw", "i"};
  const std::vector<const char*> tileLoops =
      s.depthwise ? std::vector<const char*>{"l"} : std::vector<const char*>{"v", "l"};
  std::vector<std::string> outerLoops, vectorLoops;
  for (size_t a = 0; a < rowRuns.size(); ++a)
    for (size_t b = 0; b < columnRuns.size(); ++b) {
      auto loop = [&](const char* base, const char* suffix = "") { return names.region(base, a, b) + suffix; };
      const int64_t rows = rowRuns[a].count, cols = columnRuns[b].count;
      if (rowRuns[a].noTaps() || columnRuns[b].noTaps()) {
        // No taps: the bias stored in vectors, serially (a border strip is too little work for a
        // parallel launch of its own).
        if (s.vectors > 1 && !s.depthwise) sched.unroll(loop("v"));
        if (!vectors) sched.unroll(loop("l"));
        vectorLoops.push_back(loop("l"));
        continue;
      }
      // The tile runs along the region's longer axis: the rows of a border column.
      const bool alongRows = rows > cols;
      const int64_t extent = alongRows ? rows : cols, tile = std::min(mi, extent), rest = extent % tile;
      auto [to, ti] = sched.split(loop(alongRows ? "r" : "p"), tile, TailStrategy::Loop);
      // Outer pixels, the reduction, the tile (pixels × vectors × lanes) innermost.
      auto tileOrder = [&](const char* suffix, std::vector<std::string> order, const std::string& pixels) {
        for (const char* base : reduction) order.push_back(loop(base, suffix));
        order.push_back(pixels);
        for (const char* base : tileLoops) order.push_back(loop(base, suffix));
        return order;
      };
      using Names = std::vector<std::string>;
      sched.reorder(tileOrder("", alongRows ? Names{to, loop("p")} : Names{to}, ti));
      if (tile > 1) sched.unroll(ti);
      if (s.vectors > 1) sched.unroll(loop("v"));
      if (!vectors) sched.unroll(loop("l"));
      sched.cacheWrite(loop(reduction.front()));
      if (words) sched.dot4(loop("j"));
      if ((alongRows ? extent / tile : rows) >= 2) outerLoops.push_back(alongRows ? to : loop("r"));
      for (const char* suffix : {"", "_r", "_w"}) vectorLoops.push_back(loop("l", suffix));
      if (rest == 0) continue;
      // The rest of the axis (the split's tail loop) as a tile of its own.
      const std::string tail = loop(alongRows ? "r" : "p", "_t");
      sched.reorder(tileOrder("_t", alongRows ? Names{loop("p", "_t")} : Names{}, tail));
      if (rest > 1) sched.unroll(tail);
      if (s.vectors > 1) sched.unroll(loop("v", "_t"));
      if (!vectors) sched.unroll(loop("l", "_t"));
      sched.cacheWrite(loop(reduction.front(), "_t"));
      if (words) sched.dot4(loop("j", "_t"));
      for (const char* suffix : {"_t", "_t_r", "_t_w"}) vectorLoops.push_back(loop("l", suffix));
    }
  // Weight groups in parallel (po = 1: each worker keeps its groups' weights in cache), or each
  // region's outer loop (its rows, or its row tiles).
  if (byGroups) sched.parallel("g");
  else if (parallel)
    for (const std::string& outer : outerLoops) sched.parallel(outer);
  if (vectors)
    for (const std::string& loop : vectorLoops) sched.vectorize(loop);
}

/// The NCHW sketch in every region (see "NCHW").
void applyPlanarSketch(Schedule& sched, const ConvSketchShape& s, int64_t mi, int64_t lanes, int registers) {
  const std::vector<TapRun> rowRuns = s.rowRuns(), columnRuns = s.columnRuns();
  const RunNames names{rowRuns.size() > 1, columnRuns.size() > 1};
  const int64_t width = mi * lanes;
  const bool parallel = wantParallel(s.n * s.rows * s.pixels * s.groups * s.vectors, s.cb * s.kh * s.kw);
  // A border column's scalar tile: up to 8 rows of V channels in registers.
  const int64_t tallest = std::clamp<int64_t>(tileBudget(registers) / s.vectors, 1, 8);
  std::vector<std::string> outerLoops, vectorLoops;
  for (size_t a = 0; a < rowRuns.size(); ++a)
    for (size_t b = 0; b < columnRuns.size(); ++b) {
      auto loop = [&](const char* base, const char* suffix = "") {
        return names.region(base, a, b) + suffix;
      };
      const int64_t rows = rowRuns[a].count, cols = columnRuns[b].count;
      if (rowRuns[a].noTaps() || columnRuns[b].noTaps()) continue;  // the bias alone, serially
      // Loops outside the reduction, the reduction, then the register tile.
      // `inner` unrolled, but for a last loop that is vectorized.
      auto tile = [&](const char* suffix, std::vector<std::string> order,
                      const std::vector<std::string>& inner, bool vectorLast) {
        for (const char* base : {"c", "kh", "kw"}) order.push_back(loop(base, suffix));
        order.push_back(loop("v", suffix));
        order.insert(order.end(), inner.begin(), inner.end());
        sched.reorder(order);
        if (s.vectors > 1) sched.unroll(loop("v", suffix));
        for (size_t i = 0; i + (vectorLast ? 1 : 0) < inner.size(); ++i) sched.unroll(inner[i]);
        sched.cacheWrite(loop("c", suffix));
      };
      auto vectorized = [&](const std::string& l, int64_t extent) {
        if (extent < 2) return;
        for (const char* suffix : {"", "_r", "_w"}) vectorLoops.push_back(l + suffix);
      };
      if (cols == 1 && rows > 1) {
        // A border column: a scalar tile along its rows, the rest of them a tile of their own.
        const int64_t height = std::min(tallest, rows);
        auto [ro, ri] = sched.split(loop("r"), height, TailStrategy::Loop);
        tile("", {ro, loop("p")}, {ri}, false);
        if (rows / height >= 2) outerLoops.push_back(ro);
        if (rows % height != 0) tile("_t", {loop("p", "_t")}, {loop("r", "_t")}, false);
        continue;
      }
      if (rows >= 2) outerLoops.push_back(loop("r"));
      if (cols < width) {
        tile("", {}, {loop("p")}, cols >= 2);
        vectorized(loop("p"), cols);
        continue;
      }
      auto [po, pi] = sched.split(loop("p"), width, TailStrategy::Loop);
      auto [pio, pii] = sched.split(pi, lanes);
      tile("", {po}, {pio, pii}, true);
      vectorized(pii, lanes);
      if (const int64_t rest = cols % width; rest != 0) {
        tile("_t", {}, {loop("p", "_t")}, rest >= 2);
        vectorized(loop("p", "_t"), rest);
      }
    }
  // Weight groups (with the images) in parallel, else each region's rows.
  if (parallel && s.n * s.groups >= 2)
    sched.parallel(s.n == 1 ? std::string("g") : s.groups == 1 ? std::string("n") : sched.fuse("n", "g"));
  else if (parallel)
    for (const std::string& outer : outerLoops) sched.parallel(outer);
  for (const std::string& l : vectorLoops) sched.vectorize(l);
}

}  // namespace

void applyConvSketch(Schedule& sched, const ConvSketchShape& s, const Knobs& knobs, int registers) {
  if (!convSketchAnnotationFits(s, knobs, registers))
    throw Error("conv2d_nchwc sketch: annotation '" + knobsText(knobs) + "' does not fit the shape",
                ErrorKind::InvalidInput);
  if (s.planar) return applyPlanarSketch(sched, s, knobs.at("mi"), planarLanes(s, knobs), registers);
  const int64_t mi = knobs.at("mi"), po = knobs.at("po");
  if (s.regioned()) return applyRegionedSketch(sched, s, mi, po);
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
  if (s.bytes) sched.dot4("j");
  const bool parallel = wantParallel(s.n * s.rows * s.pixels * s.groups * s.vectors * s.lanes, s.cb * s.ib);
  const int64_t pixelTiles = s.pixels / mi;
  if (s.ownWeights) {
    // Every image writes its own output with its own weights: the images in parallel (a fused
    // loop's divisions would leave its dependence check to a replay far beyond its budget).
    if (parallel && s.n >= 2) sched.parallel("n");
  } else if (rowed) {
    // Strided: weight groups × output rows (po = 1) or the rows (po = 0) run in parallel. With a
    // tail loop the fused loop's iterations write y at two indices, which parallel's exact
    // check replays step by step (too many on large layers): the rows alone then.
    if (parallel && po == 1 && !tail && s.groups * s.rows >= 2)
      sched.parallel(sched.fuse("g", "r"));
    else if (parallel && s.rows >= 2)
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
  if (s.bytes) sched.dot4("j_t");
  if (parallel && po == 0 && !rowed && !s.ownWeights && s.groups >= 2) sched.parallel("g_t");
  if (vectors) {
    sched.vectorize("l_t");
    sched.vectorize("l_t_r");
    sched.vectorize("l_t_w");
  }
}

std::optional<ConvSketchShape> convSketchShapeOfKey(const std::string& key, int64_t ocVecs, int lanes) {
  TuneKeyParts parts = parseTuneKey(key);
  if (parts.kind != "conv2d_nchwc" && parts.kind != "conv2d")
    throw Error("tuning key '" + key + "' is not a convolution's key", ErrorKind::InvalidInput);
  const ConvGeometry g = convGeometryOfKey(parts.params);
  if (parts.kind == "conv2d") {
    if (g.groups < 1 || g.c % g.groups != 0) return std::nullopt;
    // An int8 key's traces do not depend on the zero point.
    if (parts.dtype == "u8")
      return quantizedPlanarConvSketchShape({g.n, g.c, g.h, g.w}, {g.o, g.c / g.groups, g.kh, g.kw},
                                            {g.n, g.o, g.outHeight(), g.outWidth()}, {g.sh, g.sw},
                                            {g.ph, g.pw}, {g.dh, g.dw}, g.groups, 0, ocVecs, lanes);
    return planarConvSketchShape({g.n, g.c, g.h, g.w}, {g.o, g.c / g.groups, g.kh, g.kw},
                                 {g.n, g.o, g.outHeight(), g.outWidth()}, {g.sh, g.sw}, {g.ph, g.pw},
                                 {g.dh, g.dw}, g.groups, true, ocVecs, lanes);
  }
  if (parts.dtype == "u8") {
    // qnn.conv2d_nchwc: the blocks are the key's; a weight group is ocVecs output blocks.
    const int64_t ib = knob(parts.params, "ib", 0), ob = knob(parts.params, "ob", 0);
    const bool depthwise = g.groups != 1;
    if (ib < 1 || ob < 1 || g.c % ib != 0 || g.o % ob != 0 || g.c % 4 != 0) return std::nullopt;
    if (depthwise && (g.groups != g.c || g.o != g.c || ib != ob)) return std::nullopt;
    const Shape ws =
        depthwise ? Shape{g.c / ob, 1, g.kh, g.kw, ob, 1} : Shape{g.o / ob, g.c / 4, g.kh, g.kw, ob, 4};
    return quantizedConvSketchShape({g.n, g.c / ib, g.h, g.w, ib}, ws,
                                    {g.n, g.o / ob, g.outHeight(), g.outWidth(), ob}, {g.sh, g.sw},
                                    {g.ph, g.pw}, {g.dh, g.dw}, g.groups, ocVecs);
  }
  LowerOptions options;
  options.vectorLanes = lanes;
  const bool depthwise = g.groups != 1;
  if (depthwise && (g.groups != g.c || g.o != g.c)) return std::nullopt;  // grouped: not packed
  const int64_t block = channelBlock(g.o, options), ib = depthwise ? block : channelBlock(g.c, options);
  if (ocVecs < 1 || g.sh < 1 || g.sw < 1 || g.dh < 1 || g.dw < 1 || (g.o / block) % ocVecs != 0) return std::nullopt;
  if (depthwise && ocVecs != 1) return std::nullopt;
  // The buffers alter-layout gives the kernel, and the bias that batch-norm folding leaves.
  const Shape ws = depthwise ? Shape{g.c / block, 1, g.kh, g.kw, 1, block}
                             : Shape{g.o / (block * ocVecs), g.c / ib, g.kh, g.kw, ib, block * ocVecs};
  return convSketchShape({g.n, g.c / ib, g.h, g.w, ib}, ws, {g.n, g.o / block, g.outHeight(), g.outWidth(), block},
                         {g.sh, g.sw}, {g.ph, g.pw}, {g.dh, g.dw}, g.groups, true);
}

Trace convSketchTrace(const std::string& key, const Knobs& knobs, int lanes, int registers) {
  std::optional<ConvSketchShape> s = convSketchShapeOfKey(key, knob(knobs, "oc_vecs", 1), lanes);
  if (!s) throw Error("tuning key '" + key + "' has no sketch for '" + knobsText(knobs) + "'", ErrorKind::InvalidInput);
  Schedule sched(convSketchPlainFunc(*s));
  applyConvSketch(sched, *s, knobs, registers);
  return sched.trace();
}

}  // namespace kiln::core::lower

// Lowerings of 2-D pooling: max_pool2d, avg_pool2d and adaptive_avg_pool2d, on NCHW inputs and on
// packed NCHW[x]c inputs (rank 5, from alter-layout).
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
//
// Schedules. Packed f32 pooling and packed integer max pooling are conv_search.h's window nest (a
// depthwise convolution's regions, max or sum for the multiply-add, no weight) scheduled by its
// sketch: untuned the default annotation, else the record of its tuning key ("pool:" + its
// group's workload key). An average divides where the tile is written back, before a fused
// epilogue. Other pooling (NCHW inputs, adaptive windows of uneven sizes) keeps the hand-written
// kernels below. Window taps never read padding: the taps of a row come as loop bounds computed from
// oh (schedule.h WindowAxis::tapRange), those of a column likewise from ow. Packed inputs are
// vectorized over the channel block: a tile of B output columns keeps B vector accumulators,
// with the window loops outside the columns (interior tiles in a loop, border tiles unrolled
// with padding taps dropped). A global average over a contiguous NCHW plane is a vectorized sum
// with a lane reduction (at O0 only: from O1 on, passes/pool_to_mean.h makes it a mean, a row
// nest).
#include <algorithm>

#include "core/lower/conv_search.h"
#include "core/lower/lower_internal.h"
#include "core/lower/nest_search.h"
#include "core/lower/schedule.h"
#include "runtime/error.h"

namespace kiln::core::lower {

using namespace tir;

namespace {

struct PoolSpec {
  bool isMax = true;
  bool includePad = true;
  WindowAxis rows, cols;
};

/// The avg-pool divisor at output (oh, ow) as an expression (see the file comment).
Expr avgDivisor(const PoolSpec& p, const Expr& oh, const Expr& ow) {
  const WindowAxis &r = p.rows, &c = p.cols;
  Expr hs = oh * r.stride - r.pad, ws = ow * c.stride - c.pad;
  Expr he = min(hs + r.kernel, r.in + r.pad), we = min(ws + c.kernel, c.in + c.pad);
  if (p.includePad) return (he - hs) * (we - ws);
  return max((min(he, r.in) - max(hs, 0)) * (min(we, c.in) - max(ws, 0)), 1);
}

/// Packed pooling: x [N, Cb, H, W, L] → y [N, Cb, OH, OW, L], vectorized over L.
Stmt packedPool(const OpContext& ctx, const PoolSpec& p) {
  const Shape &xs = ctx.inTypes[0].shape, &ys = ctx.outTypes[0].shape;
  int64_t n = xs[0], cb = xs[1], h = xs[2], w = xs[3];
  int lanes = static_cast<int>(xs[4]);
  const Buffer &x = ctx.in[0], &y = ctx.out[0];
  Type elem = y->elemType;
  int64_t oh = ys[2], ow = ys[3];
  int64_t tileWidth = std::min<int64_t>(8, accumulatorBudget(ctx.options) / 2);

  Expr f = Var::make("n_c_oh");
  Expr ohE = f % oh, ncb = f / oh;  // ncb = n·Cb + cb
  RegisterTile acc("acc", elem, static_cast<int>(tileWidth), lanes);
  Expr init = splat(p.isMax ? lowestValue(elem) : literal(elem, 0), lanes);
  auto [khFirst, khExtent] = p.rows.tapRange(ohE);

  auto tile = [&](const Expr& ow0, int64_t width, bool interior) {
    std::vector<Stmt> body;
    for (int64_t b = 0; b < width; ++b) body.push_back(acc.set(static_cast<int>(b), init));
    Expr kh = Var::make("kh");
    Expr xRow = (ncb * h + p.rows.inputIndex(ohE, kh)) * w;
    auto tap = [&](const Expr& kw, int64_t b) {
      Expr xv = vload(x, (xRow + p.cols.inputIndex(ow0 + b, kw)) * lanes, lanes);
      Expr cur = acc.get(static_cast<int>(b));
      return acc.set(static_cast<int>(b), p.isMax ? max(cur, xv) : cur + xv);
    };
    Stmt taps;
    if (interior) {
      Expr kw = Var::make("kw");
      std::vector<Stmt> cols;
      for (int64_t b = 0; b < width; ++b) cols.push_back(tap(kw, b));
      taps = serialFor(kw, 0, p.cols.kernel, Seq::make(std::move(cols)));
    } else {
      std::vector<Stmt> all;
      int64_t start = *asConstInt(ow0);
      for (int64_t k = 0; k < p.cols.kernel; ++k)
        for (int64_t b = 0; b < width; ++b)
          if (p.cols.tapInside(start + b, k)) all.push_back(tap(i64(k), b));
      taps = all.empty() ? Stmt() : Seq::make(std::move(all));
    }
    if (taps.defined()) body.push_back(For::make(kh, khFirst, khExtent, ForKind::Serial, taps));
    Expr lane = lanes == 1 ? Expr(i64(0)) : Ramp::make(i64(0), i64(1), lanes);
    for (int64_t b = 0; b < width; ++b) {
      Expr col = ow0 + b;
      Expr value = acc.get(static_cast<int>(b));
      if (!p.isMax) value = value / splat(cast(elem, avgDivisor(p, ohE, col)), lanes);
      Expr nIndex = ncb / cb, cIndex = ncb % cb;
      value = ctx.applyEpilogue(value, {nIndex, cIndex, ohE, col, lane});
      body.push_back(vstore(y, ((ncb * oh + ohE) * ow + col) * lanes, value));
    }
    return Seq::make(std::move(body));
  };

  std::vector<Stmt> runs;
  for (const ColumnRun& run : planColumns(p.cols, tileWidth)) {
    if (run.count == 1) {
      runs.push_back(tile(i64(run.start), run.width, run.interior));
      continue;
    }
    Expr blk = Var::make("owb");
    runs.push_back(serialFor(blk, 0, run.count, tile(blk * run.width + run.start, run.width, true)));
  }
  bool parallel = wantParallel(ctx.outTypes[0].numel(), p.rows.kernel * p.cols.kernel);
  Stmt body = Allocate::make(acc.buffer(), Seq::make(std::move(runs)));
  return For::make(f, i64(0), i64(n * cb * oh), parallel ? ForKind::Parallel : ForKind::Serial, body);
}

/// Packed pooling (f32, or an integer max) as conv_search.h's window nest `s` under its sketch; an undefined
/// Stmt when a record's trace leaves the output read back (the division and the epilogue then have no stores
/// to go to: the hand-written kernel takes over).
Stmt sketchedPool(const OpContext& ctx, const PoolSpec& p, const ConvSketchShape& s) {
  const Shape& ys = ctx.outTypes[0].shape;
  if (!ctx.nestWorkload.empty()) ctx.tuneKey = poolTuneKey(ctx.nestWorkload);
  const Knobs* tuned = ctx.tuneKey.empty() ? nullptr : ctx.tunedKnobs(ctx.tuneKey);
  const int registers = ctx.options.vectorRegisters;
  PrimFunc plain;
  plain.name = ctx.op;
  plain.params = {ctx.in[0], ctx.out[0]};
  plain.numOutputs = 1;
  plain.body = convSketchPlainNest(s, ctx.in[0], nullptr, nullptr, ctx.out[0]);
  Stmt nest = kernelBySketch(
      ctx, std::move(plain), tuned, [&](const Knobs& k) { return convSketchAnnotationFits(s, k, registers); },
      [&](Schedule& sched, const Knobs& k) { applyConvSketch(sched, s, k, registers); },
      [](const Knobs&) { return std::optional<Knobs>(); }, convSketchDefaultKnobs(s, registers));
  const Shape leading(ys.begin(), ys.end() - 1);
  if (p.isMax) return ctx.epilogue ? epilogueAtStores(ctx, nest, leading, ys.back()) : nest;
  // The average: the window's sum divided by its divisor where it is stored.
  OpContext divide = ctx;
  divide.flatEpilogue = nullptr;
  int stores = 0;
  divide.epilogue = [&](Expr value, const std::vector<Expr>& index) {
    ++stores;
    const int lanes = value.type().lanes;
    Expr d = cast(value.type().element(), avgDivisor(p, index[2], index[3]));
    return ctx.applyEpilogue(value / (lanes > 1 ? splat(d, lanes) : d), index);
  };
  nest = epilogueAtStores(divide, nest, leading, ys.back());
  if (stores > 0) return nest;
  ctx.schedule.clear();
  ctx.trace.clear();
  return Stmt();
}

/// NCHW pooling: one scalar accumulator per output, window taps bounded by loop limits.
Stmt plainPool(const OpContext& ctx, const PoolSpec& p) {
  const Shape &xs = ctx.inTypes[0].shape, &ys = ctx.outTypes[0].shape;
  int64_t h = xs[2], w = xs[3];
  const Buffer &x = ctx.in[0], &y = ctx.out[0];
  Type t = y->elemType;
  LoopNest nest(ys, {"n", "c", "oh", "ow"}, wantParallel(ctx.outTypes[0].numel(), p.rows.kernel * p.cols.kernel));
  Expr oh = nest[2], ow = nest[3];
  Buffer acc = makeLocal("acc", t);
  Expr kh = Var::make("kh"), kw = Var::make("kw");
  auto [khFirst, khExtent] = p.rows.tapRange(oh);
  auto [kwFirst, kwExtent] = p.cols.tapRange(ow);
  Expr xIndex = nest.offset({xs[1] * h * w, h * w, 0, 0}) + p.rows.inputIndex(oh, kh) * w + p.cols.inputIndex(ow, kw);
  Expr xv = Load::make(x, xIndex);
  Stmt update = storeLocal(acc, p.isMax ? max(loadLocal(acc), xv) : loadLocal(acc) + xv);
  Stmt window = For::make(kh, khFirst, khExtent, ForKind::Serial, For::make(kw, kwFirst, kwExtent, ForKind::Serial, update));
  Expr result = loadLocal(acc);
  if (!p.isMax) result = result / cast(t, avgDivisor(p, oh, ow));
  result = ctx.applyEpilogue(result, {nest[0], nest[1], oh, ow});
  Stmt body = Seq::make({storeLocal(acc, p.isMax ? lowestValue(t) : literal(t, 0)), window,
                         Store::make(y, nest.offset(contiguousStrides(ys)), result)});
  return nest.wrap(body, {acc});
}

}  // namespace

Stmt lowerPool2d(const OpContext& ctx) {
  bool isMax = ctx.op == "max_pool2d";
  if (!isMax) ctx.requireFloat();
  if (ctx.inTypes[0].dtype == DType::Bool) ctx.unsupported("dtype bool");
  std::vector<int64_t> kernel = ctx.attrs.getPair("kernel", 1);
  std::vector<int64_t> stride = ctx.attrs.has("stride") ? ctx.attrs.getPair("stride", 1) : kernel;
  std::vector<int64_t> pad = ctx.attrs.getPair("padding", 0);
  std::vector<int64_t> dil = ctx.attrs.getPair("dilation", 1);
  if (!isMax && (dil[0] != 1 || dil[1] != 1)) ctx.unsupported("dilation other than 1");
  const Shape &xs = ctx.inTypes[0].shape, &ys = ctx.outTypes[0].shape;
  PoolSpec p;
  p.isMax = isMax;
  p.includePad = ctx.attrs.getInt("count_include_pad", 1) != 0;
  p.rows = WindowAxis{xs[2], ys[2], kernel[0], stride[0], pad[0], dil[0]};
  p.cols = WindowAxis{xs[3], ys[3], kernel[1], stride[1], pad[1], dil[1]};
  // The window nest: f32, or a max of integers (a quantized model's u8 max pool).
  if (std::optional<ConvSketchShape> s = poolSketchShapeOf(ctx.op, ctx.attrs, xs, ys);
      s && (ctx.inTypes[0].dtype == DType::Float32 || isMax))
    if (Stmt nest = sketchedPool(ctx, p, *s); nest.defined()) return nest;
  return xs.size() == 5 ? packedPool(ctx, p) : plainPool(ctx, p);
}

Stmt lowerAdaptiveAvgPool2d(const OpContext& ctx) {
  ctx.requireFloat();
  const Shape &xs = ctx.inTypes[0].shape, &ys = ctx.outTypes[0].shape;
  bool packed = xs.size() == 5;
  int64_t h = xs[2], w = xs[3], oh = ys[2], ow = ys[3];
  int lanes = packed ? static_cast<int>(xs[4]) : 1;
  const Buffer &x = ctx.in[0], &y = ctx.out[0];
  Type t = y->elemType;

  // Uniform windows over a packed input: an avg_pool2d's window nest.
  if (std::optional<ConvSketchShape> s = poolSketchShapeOf(ctx.op, ctx.attrs, xs, ys);
      s && ctx.inTypes[0].dtype == DType::Float32) {
    PoolSpec p;
    p.isMax = false;
    p.rows = WindowAxis{h, oh, s->kh, s->strideH, 0, 1};
    p.cols = WindowAxis{w, ow, s->kw, s->strideW, 0, 1};
    if (Stmt nest = sketchedPool(ctx, p, *s); nest.defined()) return nest;
  }

  // Global average of a contiguous NCHW plane: a vectorized sum with a lane reduction.
  int vl = t.bits == 64 ? std::max(1, ctx.options.vectorLanes / 2) : ctx.options.vectorLanes;
  if (!packed && oh == 1 && ow == 1 && h * w >= vl) {
    int64_t plane = h * w, vecs = plane / vl;
    LoopNest nest({xs[0], xs[1]}, {"n", "c"}, wantParallel(xs[0] * xs[1], plane), ParallelPolicy::FuseAll);
    Expr base = nest.offset({xs[1] * plane, plane});
    RegisterTile acc("acc", t, 1, vl);
    Buffer scratch = makeBuffer("lanes", t, {vl}), sum = makeLocal("sum", t);
    Expr i = Var::make("i"), r = Var::make("r");
    auto [reduce, lanesSum] = horizontalSum(acc.get(0), scratch);
    Stmt body = Seq::make({acc.set(0, splat(literal(t, 0), vl)),
                           serialFor(i, 0, vecs, acc.set(0, acc.get(0) + vload(x, base + i * vl, vl))), reduce,
                           storeLocal(sum, lanesSum),
                           serialFor(r, vecs * vl, plane - vecs * vl, storeLocal(sum, loadLocal(sum) + Load::make(x, base + r))),
                           Store::make(y, nest.offset({xs[1], 1}),
                                       ctx.applyEpilogue(loadLocal(sum) / countLiteral(t, plane), {nest[0], nest[1], i64(0), i64(0)}))});
    return nest.wrap(body, {acc.buffer(), scratch, sum});
  }

  int64_t maxWindow = ((h + oh - 1) / oh + 1) * ((w + ow - 1) / ow + 1);  // an upper bound
  Shape nestShape(ys.begin(), ys.begin() + 4);
  LoopNest nest(nestShape, {"n", "c", "oh", "ow"}, wantParallel(ctx.outTypes[0].numel(), maxWindow),
                packed ? ParallelPolicy::FuseAll : ParallelPolicy::KeepInnermost);
  Buffer acc = makeBuffer("acc", t, {lanes});
  Expr hs = nest[2] * h / oh, he = ((nest[2] + 1) * h + oh - 1) / oh;
  Expr ws = nest[3] * w / ow, we = ((nest[3] + 1) * w + ow - 1) / ow;
  Expr ih = Var::make("ih"), iw = Var::make("iw");
  Expr xIndex = (nest.offset({xs[1] * h * w, h * w, 0, 0}) + ih * w + iw) * lanes;
  Stmt update = vstore(acc, i64(0), vload(acc, i64(0), lanes) + vload(x, xIndex, lanes));
  Stmt window = For::make(ih, hs, he - hs, ForKind::Serial, For::make(iw, ws, we - ws, ForKind::Serial, update));
  Expr result = vload(acc, i64(0), lanes) / splat(cast(t, (he - hs) * (we - ws)), lanes);
  std::vector<Expr> index = {nest[0], nest[1], nest[2], nest[3]};
  if (packed) index.push_back(lanes == 1 ? Expr(i64(0)) : Ramp::make(i64(0), i64(1), lanes));
  Expr yIndex = nest.offset(contiguousStrides(nestShape)) * lanes;
  Stmt body = Seq::make({vstore(acc, i64(0), splat(literal(t, 0), lanes)), window,
                         vstore(y, yIndex, ctx.applyEpilogue(result, index))});
  return nest.wrap(body, {acc});
}

namespace {


}  // namespace

bool isWindowPool(const std::string& op) {
  return op == "max_pool2d" || op == "avg_pool2d" || op == "adaptive_avg_pool2d";
}

std::optional<ConvSketchShape> poolSketchShapeOf(const std::string& op, const Attrs& attrs, const Shape& xs,
                                                 const Shape& ys) {
  if (xs.size() != 5 || ys.size() != 5) return std::nullopt;
  if (op == "adaptive_avg_pool2d") {
    if (xs[2] % ys[2] != 0 || xs[3] % ys[3] != 0) return std::nullopt;
    const std::vector<int64_t> k{xs[2] / ys[2], xs[3] / ys[3]};
    return poolSketchShape(xs, ys, false, k, k, {0, 0}, {1, 1});
  }
  if (!isWindowPool(op)) return std::nullopt;
  const std::vector<int64_t> kernel = attrs.getPair("kernel", 1);
  return poolSketchShape(xs, ys, op == "max_pool2d", kernel,
                         attrs.has("stride") ? attrs.getPair("stride", 1) : kernel,
                         attrs.getPair("padding", 0), attrs.getPair("dilation", 1));
}

std::string poolTuneKey(const std::string& workloadKey) { return "pool:" + workloadKey; }

ConvSketchShape poolSketchShapeOfKey(const std::string& key) {
  if (parseTuneKey(key).kind != "pool")
    throw Error("tuning key '" + key + "' is not a pool key", ErrorKind::InvalidInput);
  Graph g = nestTaskGraph(key);
  for (const Node& node : g.nodes())
    if (isWindowPool(node.op)) {
      std::optional<ConvSketchShape> s =
          poolSketchShapeOf(node.op, node.attrs, g.type(node.inputs[0]).shape, g.type(node.outputs[0]).shape);
      if (!s) break;
      return *s;
    }
  throw Error("tuning key '" + key + "': its pooling has no window nest", ErrorKind::InvalidInput);
}

Trace poolSketchTrace(const std::string& key, const Knobs& knobs, int registers) {
  const ConvSketchShape s = poolSketchShapeOfKey(key);
  if (!convSketchAnnotationFits(s, knobs, registers))
    throw Error("tuning key '" + key + "' has no sketch for '" + knobsText(knobs) + "'",
                ErrorKind::InvalidInput);
  Schedule sched(convSketchPlainFunc(s));
  applyConvSketch(sched, s, knobs, registers);
  return sched.trace();
}

}  // namespace kiln::core::lower

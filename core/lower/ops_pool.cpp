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
// Schedules. Packed f32 pooling and packed integer max pooling are conv_search.h's regioned
// window nest (a depthwise convolution's regions, max or sum for the multiply-add, no weight)
// scheduled by its sketch: untuned the default annotation, else the record of its tuning key
// ("pool:" + its group's workload key). An average divides where the tile is written back, before
// a fused epilogue. Other pooling (NCHW inputs, adaptive windows of uneven sizes, or a record's
// trace that leaves the sum in the output) is nest_search.h's plain window nest: per output one
// accumulator over the taps inside the image, the taps of a row as loop bounds computed from oh
// (schedule.h WindowAxis::tapRange, an adaptive window's from its start and end), those of a
// column likewise from ow; scheduled by its sketch under the key "window:" + the workload.
// A global average over an NCHW plane takes that nest at O0 only: from O1 on,
// passes/pool_to_mean.h makes it a mean, a row nest.

#include <algorithm>
#include <functional>

#include "core/lower/conv_search.h"
#include "core/lower/lower_internal.h"
#include "core/lower/nest_search.h"
#include "core/lower/schedule.h"
#include "core/tir/schedule.h"
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

/// One axis of a window at output position o: the taps [first, first + extent) it reads inside the
/// image, and the input position of tap k.
struct AxisTaps {
  std::function<std::pair<Expr, Expr>(const Expr& o)> range;
  std::function<Expr(const Expr& o, const Expr& k)> input;
};

AxisTaps taps(const WindowAxis& axis) {
  return {[axis](const Expr& o) { return axis.tapRange(o); },
          [axis](const Expr& o, const Expr& k) { return axis.inputIndex(o, k); }};
}

/// An adaptive average's window along an axis of `in` inputs and `out` outputs: the inputs
/// [⌊o·in/out⌋, ⌈(o+1)·in/out⌉), tap k the input k itself.
AxisTaps adaptiveTaps(int64_t in, int64_t out) {
  return {[in, out](const Expr& o) {
            Expr first = o * in / out, end = ((o + 1) * in + (out - 1)) / out;
            return std::pair<Expr, Expr>{first, end - first};
          },
          [](const Expr&, const Expr& k) { return k; }};
}

/// The plain window nest (nest_search.h) of a pooling of x [N, C, H, W] or x [N, Cb, H, W, L] into
/// y: a max when `divisor` is empty, else a sum divided by divisor(oh, ow). Scheduled by its sketch
/// under the record of its tuning key ("window:" + the group's workload) when it has one.
Stmt windowNest(const OpContext& ctx, const AxisTaps& rows, const AxisTaps& cols,
                const std::function<Expr(const Expr&, const Expr&)>& divisor) {
  const Shape &xs = ctx.inTypes[0].shape, &ys = ctx.outTypes[0].shape;
  const bool packed = xs.size() == 5;
  const int64_t lanes = packed ? xs[4] : 1;
  const Buffer &x = ctx.in[0], &y = ctx.out[0];
  const Type t = y->elemType;
  const bool isMax = !divisor;
  Expr n = Var::make("n"), c = Var::make("c"), oh = Var::make("oh"), ow = Var::make("ow");
  Expr kh = Var::make("kh"), kw = Var::make("kw");
  Buffer acc = makeBuffer("acc", t, {lanes});
  // A statement per lane: a loop over the block's lanes, or lane 0 alone on an NCHW input.
  auto overLanes = [&](const char* name, const std::function<Stmt(const Expr&)>& body) {
    if (!packed) return body(i64(0));
    Expr lane = Var::make(name);
    return serialFor(lane, 0, lanes, body(lane));
  };
  Stmt init = overLanes(
      "l", [&](const Expr& l) { return Store::make(acc, l, isMax ? lowestValue(t) : literal(t, 0)); });
  auto [khFirst, khExtent] = rows.range(oh);
  auto [kwFirst, kwExtent] = cols.range(ow);
  Expr pixel = ((n * xs[1] + c) * xs[2] + rows.input(oh, kh)) * xs[3] + cols.input(ow, kw);
  Stmt update = overLanes("l_t", [&](const Expr& l) {
    Expr v = Load::make(x, pixel * lanes + l), cur = Load::make(acc, l);
    return Store::make(acc, l, isMax ? max(cur, v) : cur + v);
  });
  Stmt window = For::make(kh, khFirst, khExtent, ForKind::Serial,
                          For::make(kw, kwFirst, kwExtent, ForKind::Serial, update));
  Stmt store = overLanes("l_w", [&](const Expr& l) {
    Expr value = Load::make(acc, l);
    if (!isMax) value = value / cast(t, divisor(oh, ow));
    std::vector<Expr> index{n, c, oh, ow};
    if (packed) index.push_back(l);
    return Store::make(y, (((n * ys[1] + c) * ys[2] + oh) * ys[3] + ow) * lanes + l,
                       ctx.applyEpilogue(value, index));
  });
  Stmt body = Allocate::make(acc, Seq::make({init, window, store}));
  const std::pair<Expr, int64_t> loops[] = {{ow, ys[3]}, {oh, ys[2]}, {c, ys[1]}, {n, ys[0]}};
  for (const auto& [var, extent] : loops) body = serialFor(var, 0, extent, body);
  PrimFunc plain;
  plain.name = ctx.op;
  plain.params = {x, y};
  plain.numOutputs = 1;
  plain.body = body;
  const WindowNestShape shape = windowNestShapeOf(ctx.op, ctx.attrs, xs, ys);
  Knobs knobs = windowNestDefaultKnobs(shape);
  if (!ctx.nestWorkload.empty()) {
    ctx.tuneKey = windowNestTuneKey(ctx.nestWorkload);
    knobs = windowNestKnobsOf(ctx.tunedKnobs(ctx.tuneKey), shape);
  }
  // Indices as sums of loop variables times constants: the input's row and column offsets then
  // step by a constant per tap (on an uneven adaptive average the nested products cost 18 %).
  return distributedIndices(defaultSketch(ctx, std::move(plain), knobs, applyWindowNestSketch));
}

/// Packed pooling (f32, or an integer max) as conv_search.h's window nest `s` under its sketch; an undefined
/// Stmt when a record's trace leaves the output read back (the division and the epilogue then have no stores
/// to go to: the plain window nest takes over).
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
  // The regioned window nest: f32, or a max of integers (a quantized model's u8 max pool).
  if (std::optional<ConvSketchShape> s = poolSketchShapeOf(ctx.op, ctx.attrs, xs, ys);
      s && (ctx.inTypes[0].dtype == DType::Float32 || isMax))
    if (Stmt nest = sketchedPool(ctx, p, *s); nest.defined()) return nest;
  std::function<Expr(const Expr&, const Expr&)> divisor;
  if (!isMax) divisor = [p](const Expr& oh, const Expr& ow) { return avgDivisor(p, oh, ow); };
  return windowNest(ctx, taps(p.rows), taps(p.cols), divisor);
}

Stmt lowerAdaptiveAvgPool2d(const OpContext& ctx) {
  ctx.requireFloat();
  const Shape &xs = ctx.inTypes[0].shape, &ys = ctx.outTypes[0].shape;
  const int64_t h = xs[2], w = xs[3], oh = ys[2], ow = ys[3];
  // Uniform windows over a packed input: an avg_pool2d's regioned window nest.
  if (std::optional<ConvSketchShape> s = poolSketchShapeOf(ctx.op, ctx.attrs, xs, ys);
      s && ctx.inTypes[0].dtype == DType::Float32) {
    PoolSpec p;
    p.isMax = false;
    p.rows = WindowAxis{h, oh, s->kh, s->strideH, 0, 1};
    p.cols = WindowAxis{w, ow, s->kw, s->strideW, 0, 1};
    if (Stmt nest = sketchedPool(ctx, p, *s); nest.defined()) return nest;
  }
  const AxisTaps rows = adaptiveTaps(h, oh), cols = adaptiveTaps(w, ow);
  return windowNest(ctx, rows, cols, [rows, cols](const Expr& i, const Expr& j) {
    return rows.range(i).second * cols.range(j).second;
  });
}

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

// Lowerings of the quantized dialect (qnn.*, core/ir/op_registry.h): u8 activations, i8 weights,
// i32 accumulation, requantization fused into every kernel's epilogue.
//
// Requantization follows PyTorch's x86 kernels (oneDNN / fbgemm): the i32 accumulator goes to f32,
// is scaled per output channel and offset by the bias, rounded to nearest with ties to even,
// shifted by the output zero point and clamped to [0, 255] (to [zero point, 255] with a fused
// relu). Quantize multiplies by the f32 reciprocal of the scale (PyTorch's vectorized path).
//
// qnn.conv2d here is the plain, layout-free form (every opt level; the reference); qnn.dense is
// the dense sketch with dot4 steps where it can be (see lowerQnnDense), else plain too.
// The packed qnn.conv2d_nchwc (qnn-alter-layout, O3) is the fast one: activations NCHW[x]c with
// x % 4 == 0, so four consecutive input channels of a pixel are one 32-bit word, and weights
// packed [O/ob, C/4, KH, KW, ob, 4]. Its inner step is `dot4_u8i8` (core/tir/expr.h): for every
// output channel of a vector, acc += Σ_k x[4 channels] · w[4 channels] — one AVX-512 VNNI
// vpdpbusd per 16 channels and 4 input channels (vpmaddubsw-free, so no i16 saturation); code
// generation expands it exactly (widening multiplies and adds) on targets without VNNI.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <functional>

#include "core/lower/gemm_search.h"
#include "core/lower/lower_internal.h"
#include "core/lower/schedule.h"
#include "core/lower/schedule_config.h"
#include "runtime/error.h"

namespace kiln::core::lower {

using namespace tir;

namespace {

Expr toF32(const Expr& v) { return cast(Type::f32(v.type().lanes), v); }
Expr toI32(const Expr& v) { return cast(Type::i32(v.type().lanes), v); }
Expr fImm(double v) { return FloatImm::make(Type::f32(), v); }

/// u8(clamp(roundeven(v) + zeroPoint, lo, 255)) for an f32 value (scalar or vector).
Expr requantize(const Expr& v, int64_t zeroPoint, int64_t lo) {
  Expr r = call("roundeven", {v}) + fImm(static_cast<double>(zeroPoint));
  r = min(max(r, fImm(static_cast<double>(lo))), fImm(255.0));
  return cast(Type::u8(v.type().lanes), r);
}

/// The convolution / dense epilogue: u8(clamp(roundeven((f32(acc) + offset)·multiplier +
/// zeroPoint), lo, 255)) — the zero point is added before rounding, as oneDNN does, to the
/// rounded product: the max with -FLT_MAX (a no-op on finite values) keeps code generation from
/// contracting `·multiplier + zeroPoint` into an FMA, whose single rounding flips ties
/// (x.49999 instead of x.5) against libtorch.
Expr requantizeAcc(const Expr& acc, const Expr& multiplier, const Expr& offset, int64_t zeroPoint, int64_t lo) {
  Expr product = max((toF32(acc) + offset) * multiplier, fImm(-static_cast<double>(FLT_MAX)));
  Expr v = product + fImm(static_cast<double>(zeroPoint));
  Expr r = min(max(call("roundeven", {v}), fImm(static_cast<double>(lo))), fImm(255.0));
  return cast(Type::u8(acc.type().lanes), r);
}

int64_t lowerBound(const Attrs& attrs) {
  return attrs.getInt("relu", 0) != 0 ? attrs.getInt("output_zero_point") : 0;
}
int64_t lowerBound(const OpContext& ctx) { return lowerBound(ctx.attrs); }

/// x·scale − zeroPoint·scale in f32: the one dequantizing formula (dequantize, qnn.add's operands).
Expr dequantized(const Expr& x, double scale, int64_t zeroPoint) {
  float s = static_cast<float>(scale);
  return toF32(x) * fImm(s) + fImm(-static_cast<float>(zeroPoint) * s);
}

}  // namespace

Expr qnnQuantizeExpr(const Attrs& attrs, const Expr& x) {
  float inv = 1.0f / static_cast<float>(attrs.getFloat("output_scale"));
  return requantize(x * fImm(inv), attrs.getInt("output_zero_point"), 0);
}

Expr qnnQuantizePacked(const Attrs& attrs, const Shape& xs, int64_t block, const std::vector<Expr>& index,
                       const std::function<Expr(const std::vector<Expr>&)>& inputAt) {
  const int64_t channels = xs[1];
  Expr c = index[1] * block + index[4];
  Expr x = inputAt({index[0], min(c, i64(channels - 1)), index[2], index[3]});
  return select(c < channels, qnnQuantizeExpr(attrs, x),
                IntImm::make(Type::u8(), attrs.getInt("output_zero_point")));
}

Expr qnnDequantizeExpr(const Attrs& attrs, const Expr& x) {
  return dequantized(x, attrs.getFloat("scale"), attrs.getInt("zero_point"));
}

// PyTorch's quantized add: both operands dequantized, added, quantized with the reciprocal output
// scale.
Expr qnnAddExpr(const Attrs& attrs, const Expr& a, const Expr& b) {
  float inv = 1.0f / static_cast<float>(attrs.getFloat("output_scale"));
  Expr sum = dequantized(a, attrs.getFloat("a_scale"), attrs.getInt("a_zero_point")) +
             dequantized(b, attrs.getFloat("b_scale"), attrs.getInt("b_zero_point"));
  return requantize(sum * fImm(inv), attrs.getInt("output_zero_point"), lowerBound(attrs));
}

namespace {

// ---- quantize / dequantize / add ----------------------------------------------------------------

Stmt lowerQnnQuantize(const OpContext& ctx) {
  const Shape &xs = ctx.inTypes[0].shape, &ys = ctx.outTypes[0].shape;
  int64_t numel = ctx.outTypes[0].numel();
  if (ys.size() == xs.size()) {
    LoopNest nest({numel}, {"i"}, wantParallel(numel));
    Expr y = qnnQuantizeExpr(ctx.attrs, Load::make(ctx.in[0], nest.offset({1})));
    return nest.wrap(Store::make(ctx.out[0], nest.offset({1}), y));
  }
  LoopNest nest(ys, {"n", "cb", "h", "w", "c"}, wantParallel(numel));
  std::vector<Expr> index{nest[0], nest[1], nest[2], nest[3], nest[4]};
  Expr value = qnnQuantizePacked(ctx.attrs, xs, ys[4], index, [&](const std::vector<Expr>& at) {
    return Load::make(ctx.in[0], ((at[0] * xs[1] + at[1]) * xs[2] + at[2]) * xs[3] + at[3]);
  });
  return nest.wrap(Store::make(ctx.out[0], nest.offset(contiguousStrides(ys)), value));
}

Stmt lowerQnnDequantize(const OpContext& ctx) {
  int64_t numel = ctx.outTypes[0].numel();
  LoopNest nest({numel}, {"i"}, wantParallel(numel));
  Expr y = qnnDequantizeExpr(ctx.attrs, Load::make(ctx.in[0], nest.offset({1})));
  return nest.wrap(Store::make(ctx.out[0], nest.offset({1}), y));
}

Stmt lowerQnnAdd(const OpContext& ctx) {
  int64_t numel = ctx.outTypes[0].numel();
  LoopNest nest({numel}, {"i"}, wantParallel(numel));
  Expr i = nest.offset({1});
  Expr y = qnnAddExpr(ctx.attrs, Load::make(ctx.in[0], i), Load::make(ctx.in[1], i));
  return nest.wrap(Store::make(ctx.out[0], i, y));
}

// ---- plain convolution and dense (reference forms) -----------------------------------------------

Stmt lowerQnnConv2d(const OpContext& ctx) {
  const Shape &xs = ctx.inTypes[0].shape, &ws = ctx.inTypes[1].shape, &ys = ctx.outTypes[0].shape;
  auto stride = ctx.attrs.getPair("stride", 1), pad = ctx.attrs.getPair("padding", 0),
       dil = ctx.attrs.getPair("dilation", 1);
  int64_t groups = ctx.attrs.getInt("groups", 1);
  int64_t cg = ws[1], og = ys[1] / groups, h = xs[2], w = xs[3];
  const Buffer &x = ctx.in[0], &wt = ctx.in[1], &mult = ctx.in[2], &offset = ctx.in[3];
  LoopNest nest(ys, {"n", "oc", "oh", "ow"}, wantParallel(ctx.outTypes[0].numel(), cg * ws[2] * ws[3]));
  Expr n = nest[0], oc = nest[1], oh = nest[2], ow = nest[3];
  Buffer acc = makeLocal("acc", Type::i32());
  Expr ic = Var::make("ic"), kh = Var::make("kh"), kw = Var::make("kw");
  Expr ih = oh * stride[0] - pad[0] + kh * dil[0], iw = ow * stride[1] - pad[1] + kw * dil[1];
  Expr channel = (oc / og) * cg + ic;
  Expr xv = toI32(Load::make(x, ((n * xs[1] + channel) * h + ih) * w + iw)) -
            IntImm::make(Type::i32(), ctx.attrs.getInt("input_zero_point"));
  Expr wv = toI32(Load::make(wt, ((oc * cg + ic) * ws[2] + kh) * ws[3] + kw));
  Stmt update = IfThenElse::make(ih >= 0 && ih < h && iw >= 0 && iw < w, storeLocal(acc, loadLocal(acc) + xv * wv));
  Stmt loops = serialFor(ic, 0, cg, serialFor(kh, 0, ws[2], serialFor(kw, 0, ws[3], update)));
  Expr y = requantizeAcc(loadLocal(acc), Load::make(mult, oc), Load::make(offset, oc),
                         ctx.attrs.getInt("output_zero_point"), lowerBound(ctx));
  Stmt body = Seq::make({storeLocal(acc, IntImm::make(Type::i32(), 0)), loops,
                         Store::make(ctx.out[0], nest.offset(contiguousStrides(ys)), y)});
  return nest.wrap(body, {acc});
}

// qnn.dense sums x·w in i32 and takes off the input zero point's share zx·Σw[j]: the fifth
// input (qnn-alter-layout computes it from constant weights), nothing when zx = 0, else the sums
// are of (x − zx)·w. With K a multiple of 4 and no zero point left in the products, the kernel is
// the dense sketch of gemm_search.h on the quantized plain nest (four products per dot4 step,
// tuned under a u8 dense key); the sums are requantized where the scheduled kernel stores them.
// Otherwise one plain loop per output (no tuning key).
Stmt lowerQnnDense(const OpContext& ctx) {
  const Shape& xs = ctx.inTypes[0].shape;
  Shape leading(xs.begin(), xs.end() - 1);
  DenseShape s{1, xs.back(), ctx.inTypes[1].shape[0], false, true};
  for (int64_t d : leading) s.m *= d;
  const Buffer &x = ctx.in[0], &wt = ctx.in[1], &mult = ctx.in[2], &offset = ctx.in[3];
  const bool compensated = ctx.in.size() == 5;
  const int64_t zx = compensated ? 0 : ctx.attrs.getInt("input_zero_point");
  const int64_t zy = ctx.attrs.getInt("output_zero_point"), lo = lowerBound(ctx);
  auto requantized = [&](Expr sum, const Expr& j) {
    if (compensated) sum = sum - Load::make(ctx.in[4], j);
    return requantizeAcc(sum, Load::make(mult, j), Load::make(offset, j), zy, lo);
  };
  if (zx == 0 && s.k % 4 == 0) {
    const int lanes = denseLanes(s, ctx.options.vectorLanes), registers = ctx.options.vectorRegisters;
    Buffer sums = makeBuffer("sums", Type::i32(), {s.m, s.n});
    PrimFunc plain = plainFunc("qnn.dense", x, wt, nullptr, sums, densePlainNest(s, x, wt, nullptr, sums));
    ctx.tuneKey = tuneKeyOf(ctx.op, ctx.attrs, ctx.inTypes, ctx.outTypes);
    Stmt nest = kernelBySketch(
        ctx, std::move(plain), ctx.tunedKnobs(ctx.tuneKey),
        [&](const Knobs& k) { return denseAnnotationFits(s, k, registers); },
        [&](Schedule& sched, const Knobs& k) { applyDenseSketch(sched, s, k, lanes, registers); },
        [](const Knobs&) { return std::optional<Knobs>(); }, denseDefaultKnobs(s, registers));
    return storesInto(nest, sums, ctx.out[0], leading, s.n, [&](Expr sum, const std::vector<Expr>& index) {
      return requantized(std::move(sum), index.back());
    });
  }
  LoopNest nest({s.m, s.n}, {"m", "j"}, wantParallel(s.m * s.n, s.k));
  Buffer acc = makeLocal("acc", Type::i32());
  Expr r = Var::make("k");
  Expr xv = toI32(Load::make(x, nest[0] * s.k + r)) - IntImm::make(Type::i32(), zx);
  Stmt loop =
      serialFor(r, 0, s.k, storeLocal(acc, loadLocal(acc) + xv * toI32(Load::make(wt, nest[1] * s.k + r))));
  Stmt body =
      Seq::make({storeLocal(acc, IntImm::make(Type::i32(), 0)), loop,
                 Store::make(ctx.out[0], nest.offset({s.n, 1}), requantized(loadLocal(acc), nest[1]))});
  return nest.wrap(body, {acc});
}

// ---- packed convolution (qnn.conv2d_nchwc, from qnn-alter-layout) -----------------------------
//
// Output rows (n, ocb, oh) are the parallel loop; each row is cut into register tiles of `width`
// columns × `ocVecs` output-channel vectors (planColumns: interior tiles loop, border tiles sit at
// constant columns). For every tap the tile reads one weight vector per channel vector and one
// 4-byte group of input channels per column (broadcast), and accumulates with dot4_u8i8. Taps in
// the padding read the input zero point instead; its share zx·Σw[o] (input 4, i32) is subtracted
// before requantization, exactly: border columns know it when the IR is built, rows test it per
// kh.

struct PackedConv {
  int64_t n = 0, icb = 0, h = 0, w = 0, ib = 0;   // input [N, ICB, H, W, ib]
  int64_t ocb = 0, oh = 0, ow = 0, ob = 0;        // output [N, OCB, OH, OW, ob]
  int64_t kh = 0, kw = 0;
  bool depthwise = false;
  WindowAxis rows, cols;
};

Stmt lowerQnnConv2dNchwc(const OpContext& ctx) {
  const Shape &xs = ctx.inTypes[0].shape, &ws = ctx.inTypes[1].shape, &ys = ctx.outTypes[0].shape;
  auto stride = ctx.attrs.getPair("stride", 1), pad = ctx.attrs.getPair("padding", 0),
       dil = ctx.attrs.getPair("dilation", 1);
  PackedConv g;
  g.n = xs[0], g.icb = xs[1], g.h = xs[2], g.w = xs[3], g.ib = xs[4];
  g.ocb = ys[1], g.oh = ys[2], g.ow = ys[3], g.ob = ys[4];
  g.kh = ws[2], g.kw = ws[3];
  g.depthwise = ctx.attrs.getInt("groups", 1) != 1;
  g.rows = WindowAxis{g.h, g.oh, g.kh, stride[0], pad[0], dil[0]};
  g.cols = WindowAxis{g.w, g.ow, g.kw, stride[1], pad[1], dil[1]};
  const Buffer &x = ctx.in[0], &wt = ctx.in[1], &mult = ctx.in[2], &offset = ctx.in[3], &comp = ctx.in[4];
  const Buffer& y = ctx.out[0];
  const int lanes = static_cast<int>(g.ob);
  const int64_t zx = ctx.attrs.getInt("input_zero_point");

  int ocVecs = !g.depthwise && g.ocb % 2 == 0 ? 2 : 1;
  int budget = accumulatorBudget(ctx.options) * std::max(1, ctx.options.vectorLanes / lanes);
  int64_t maxWidth = std::clamp<int64_t>(budget / ocVecs, 1, 14);
  ctx.schedule = "oc_vecs=" + std::to_string(ocVecs) + ",ow_block=" + std::to_string(maxWidth);

  int64_t work = g.depthwise ? g.kh * g.kw : g.icb * g.ib * g.kh * g.kw;
  LoopNest nest({g.n, g.ocb / ocVecs, g.oh}, {"n", "ocv", "oh"},
                wantParallel(ctx.outTypes[0].numel(), work), ParallelPolicy::FuseAll);
  Expr n = nest[0], oc0 = nest[1] * ocVecs, oh = nest[2];
  int tileCount = static_cast<int>(maxWidth) * ocVecs;
  RegisterTile acc("acc", Type::i32(), tileCount, lanes);
  Expr zxWord = Broadcast::make(IntImm::make(Type::u8(), zx), 4);
  Expr zxVec = splat(IntImm::make(Type::i32(), zx), lanes);

  // One tap (kh, kw) for a tile at columns ow0 + [0, width): `inside(t)` says whether column t's
  // tap reads the input (nullopt: unknown, i.e. inside by construction).
  auto tapStmts = [&](const Expr& ih, const Expr& kh, const Expr& kw, const Expr& ow0, int64_t width,
                      const std::function<bool(int64_t)>& inside, bool rowInside) {
    std::vector<Stmt> body;
    if (g.depthwise) {
      std::vector<Expr> wv;
      Expr wBase = ((oc0 * g.kh + kh) * g.kw + kw) * g.ob;
      Expr wvec = toI32(vload(wt, wBase, lanes));
      for (int64_t t = 0; t < width; ++t) {
        Expr iw = g.cols.inputIndex(ow0 + t, kw);
        Expr xv = rowInside && inside(t) ? toI32(vload(x, (((n * g.icb + oc0) * g.h + ih) * g.w + iw) * g.ib, lanes))
                                         : zxVec;
        int i = static_cast<int>(t);
        body.push_back(acc.set(i, acc.get(i) + xv * wvec));
      }
      return Seq::make(std::move(body));
    }
    // groups = 1: loop over input channel blocks and the 4-channel words inside them.
    Expr cb = Var::make("cb"), c4 = Var::make("c4");
    int64_t words = g.ib / 4, groups4 = g.icb * words;
    std::vector<Expr> wvec;
    for (int v = 0; v < ocVecs; ++v) {
      Expr wBase = ((((oc0 + v) * groups4 + cb * words + c4) * g.kh + kh) * g.kw + kw) * (g.ob * 4);
      wvec.push_back(vload(wt, wBase, lanes * 4));
    }
    for (int64_t t = 0; t < width; ++t) {
      Expr xv = zxWord;
      if (rowInside && inside(t)) {
        Expr iw = g.cols.inputIndex(ow0 + t, kw);
        xv = vload(x, (((n * g.icb + cb) * g.h + ih) * g.w + iw) * g.ib + c4 * 4, 4);
      }
      for (int v = 0; v < ocVecs; ++v) {
        int i = static_cast<int>(t) * ocVecs + v;
        body.push_back(acc.set(i, call("dot4_u8i8", {acc.get(i), xv, wvec[v]})));
      }
    }
    return serialFor(cb, 0, g.icb, serialFor(c4, 0, words, Seq::make(std::move(body))));
  };

  bool rowsInside = g.rows.pad == 0 && (g.oh - 1) * g.rows.stride + (g.kh - 1) * g.rows.dilation < g.h;
  auto tile = [&](const Expr& ow0, int64_t width, bool interior, int64_t constStart) {
    std::vector<Stmt> body;
    for (int i = 0; i < static_cast<int>(width) * ocVecs; ++i) body.push_back(acc.set(i, splat(IntImm::make(Type::i32(), 0), lanes)));
    Expr kh = Var::make("kh");
    Expr ih = g.rows.inputIndex(oh, kh);
    auto columnTaps = [&](bool rowInside) {
      if (interior) {
        Expr kw = Var::make("kw");
        return serialFor(kw, 0, g.kw, tapStmts(ih, kh, kw, ow0, width, [](int64_t) { return true; }, rowInside));
      }
      std::vector<Stmt> taps;
      for (int64_t k = 0; k < g.kw; ++k) {
        auto inside = [&](int64_t t) { return g.cols.tapInside(constStart + t, k); };
        bool any = false;
        for (int64_t t = 0; t < width; ++t) any = any || inside(t);
        taps.push_back(tapStmts(ih, kh, i64(k), ow0, width, inside, rowInside && any));
      }
      return Seq::make(std::move(taps));
    };
    Stmt perRow = rowsInside ? columnTaps(true)
                             : IfThenElse::make(ih >= 0 && ih < g.h, columnTaps(true), columnTaps(false));
    body.push_back(serialFor(kh, 0, g.kh, perRow));
    int64_t zy = ctx.attrs.getInt("output_zero_point"), lo = lowerBound(ctx);
    for (int64_t t = 0; t < width; ++t) {
      for (int v = 0; v < ocVecs; ++v) {
        Expr oc = (oc0 + v) * g.ob;
        Expr sum = acc.get(static_cast<int>(t) * ocVecs + v) - vload(comp, oc, lanes);
        Expr at = (((n * g.ocb + oc0 + v) * g.oh + oh) * g.ow + ow0 + t) * g.ob;
        body.push_back(vstore(y, at, requantizeAcc(sum, vload(mult, oc, lanes), vload(offset, oc, lanes), zy, lo)));
      }
    }
    return Seq::make(std::move(body));
  };

  std::vector<Stmt> runs;
  for (const ColumnRun& run : planColumns(g.cols, maxWidth)) {
    if (run.count > 1) {
      Expr i = Var::make("tile");
      runs.push_back(serialFor(i, 0, run.count, tile(run.start + i * run.width, run.width, run.interior, -1)));
    } else {
      runs.push_back(tile(i64(run.start), run.width, run.interior, run.start));
    }
  }
  return nest.wrap(Seq::make(std::move(runs)), {acc.buffer()});
}

}  // namespace

void addQuantLowerings(std::map<std::string, OpLowering, std::less<>>& table) {
  table["qnn.quantize"] = lowerQnnQuantize;
  table["qnn.dequantize"] = lowerQnnDequantize;
  table["qnn.add"] = lowerQnnAdd;
  table["qnn.conv2d"] = lowerQnnConv2d;
  table["qnn.dense"] = lowerQnnDense;
  table["qnn.conv2d_nchwc"] = lowerQnnConv2dNchwc;
}

}  // namespace kiln::core::lower

// Lowerings of the quantized dialect (qnn.*, core/ir/op_registry.h): u8 activations, i8 weights,
// i32 accumulation, requantization fused into every kernel's epilogue.
//
// Requantization follows PyTorch's x86 kernels (oneDNN / fbgemm): the i32 accumulator goes to f32,
// is scaled per output channel and offset by the bias, rounded to nearest with ties to even,
// shifted by the output zero point and clamped to [0, 255] (to [zero point, 255] with a fused
// relu). Quantize multiplies by the f32 reciprocal of the scale (PyTorch's vectorized path).
//
// qnn.conv2d here is the NCHW form (every opt level): the planar int8 nest of conv_search.h under
// its sketch; qnn.dense is the dense sketch with dot4 steps where it can be (see lowerQnnDense),
// else plain.
// The packed qnn.conv2d_nchwc (qnn-alter-layout, O3) is the fast one: activations NCHW[x]c with
// x % 4 == 0, so four consecutive input channels of a pixel are one 32-bit word, and weights
// packed [O/ob, C/4, KH, KW, ob, 4]; it is the convolution sketch of conv_search.h on its int8
// nest. It and the dense sketch step with `dot4_u8i8` (core/tir/expr.h, the dot4 schedule primitive):
// for every output channel of a vector, acc += Σ x[4 channels] · w[4 channels], one AVX-512 VNNI
// vpdpbusd per 16 channels and 4 input channels (vpmaddubsw-free, so no i16 saturation); code
// generation expands it exactly (widening multiplies and adds) on targets without VNNI.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <functional>

#include "core/lower/conv_search.h"
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

// qnn.conv2d (NCHW, any groups; every opt level, O3 where qnn-alter-layout does not pack it) is
// conv_search.h's planar int8 nest ("NCHW"): exact i32 sums of (x − zx)·w over the taps inside the
// image, scheduled by its sketch under a u8 conv2d key (the f32 NCHW convolution's tile and
// annotations), requantized where the scheduled kernel stores them.
Stmt lowerQnnConv2d(const OpContext& ctx) {
  const Shape &xs = ctx.inTypes[0].shape, &ws = ctx.inTypes[1].shape, &ys = ctx.outTypes[0].shape;
  const std::vector<int64_t> stride = ctx.attrs.getPair("stride", 1),
                             padding = ctx.attrs.getPair("padding", 0),
                             dilation = ctx.attrs.getPair("dilation", 1);
  const int64_t groups = ctx.attrs.getInt("groups", 1), zx = ctx.attrs.getInt("input_zero_point");
  const int lanes = ctx.options.vectorLanes, registers = ctx.options.vectorRegisters;
  auto shapeFor = [&](int64_t vectors) {
    return quantizedPlanarConvSketchShape(xs, ws, ys, stride, padding, dilation, groups, zx, vectors, lanes);
  };
  std::optional<ConvSketchShape> shape = shapeFor(1);
  if (!shape) ctx.unsupported("convolution whose buffers disagree with its attributes");
  const Knobs defaults = convSketchDefaultKnobs(*shape, registers);
  ctx.tuneKey = tuneKeyOf(ctx.op, ctx.attrs, ctx.inTypes, ctx.outTypes);
  const Knobs* tuned = ctx.tunedKnobs(ctx.tuneKey);
  const ConvSketchShape s = planarShapeOfRecord(shapeFor, tuned, defaults, registers);
  const Buffer &x = ctx.in[0], &wt = ctx.in[1], &mult = ctx.in[2], &offset = ctx.in[3];
  Buffer sums = makeBuffer("sums", Type::i32(), {ys[0], ys[1], ys[2], ys[3]});
  PrimFunc plain =
      plainFunc("qnn.conv2d", x, wt, nullptr, sums, convSketchPlainNest(s, x, wt, nullptr, sums));
  Stmt nest = kernelBySketch(
      ctx, std::move(plain), tuned, [&](const Knobs& k) { return convSketchAnnotationFits(s, k, registers); },
      [&](Schedule& sched, const Knobs& k) { applyConvSketch(sched, s, k, registers); },
      [](const Knobs&) { return std::optional<Knobs>(); }, defaults);
  const int64_t zy = ctx.attrs.getInt("output_zero_point"), lo = lowerBound(ctx);
  return storesInto(nest, sums, ctx.out[0], Shape(ys.begin(), ys.end() - 1), ys.back(),
                    [&](Expr sum, const std::vector<Expr>& index) {
                      const Expr& oc = index[1];
                      const int width = sum.type().lanes;
                      Expr m = Load::make(mult, oc), b = Load::make(offset, oc);
                      if (width > 1) m = splat(m, width), b = splat(b, width);
                      return requantizeAcc(std::move(sum), m, b, zy, lo);
                    });
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
// The int8 nest of conv_search.h ("Int8") scheduled by its sketch, under a u8 conv2d_nchwc key:
// exact i32 sums of x·w from minus the zero point's share of each region (input 4, i32 [regions,
// O], computed by qnn-alter-layout), requantized where the scheduled kernel stores them.
Stmt lowerQnnConv2dNchwc(const OpContext& ctx) {
  const Shape &xs = ctx.inTypes[0].shape, &ws = ctx.inTypes[1].shape, &ys = ctx.outTypes[0].shape;
  auto shapeWith = [&](int64_t vectors) {
    return quantizedConvSketchShape(xs, ws, ys, ctx.attrs.getPair("stride", 1),
                                    ctx.attrs.getPair("padding", 0), ctx.attrs.getPair("dilation", 1),
                                    ctx.attrs.getInt("groups", 1), vectors);
  };
  // The weight group (V output blocks): a record's, else the default for the shape.
  std::optional<ConvSketchShape> shape = shapeWith(1);
  if (!shape) ctx.unsupported("convolution whose packed buffers disagree with its attributes");
  ctx.tuneKey = tuneKeyOf(ctx.op, ctx.attrs, ctx.inTypes, ctx.outTypes);
  const Knobs* tuned = ctx.tunedKnobs(ctx.tuneKey);
  std::optional<ConvSketchShape> grouped = shapeWith(
      tuned && tuned->count("oc_vecs") ? tuned->at("oc_vecs") : quantizedConvDefaultVectors(*shape));
  const ConvSketchShape& s = grouped ? *grouped : *shape;
  const int64_t channels = ys[1] * ys[4];
  if (ctx.inTypes[4].numel() != s.regions() * channels)
    throw Error("qnn.conv2d_nchwc: the zero-point shares " + ctx.inTypes[4].str() + " are not i32[" +
                    std::to_string(s.regions()) + "," + std::to_string(channels) +
                    "] (one row per region of the output)" + ctx.where,
                ErrorKind::InvalidModel);
  const Buffer &x = ctx.in[0], &wt = ctx.in[1], &mult = ctx.in[2], &offset = ctx.in[3], &shares = ctx.in[4];
  const int registers = ctx.options.vectorRegisters;
  const Shape leading{s.n, s.groups * s.vectors, s.rows * s.pixels};
  Buffer sums = makeBuffer("sums", Type::i32(), {leading[0], leading[1], leading[2], s.lanes});
  PrimFunc plain =
      plainFunc("qnn.conv2d_nchwc", x, wt, shares, sums, convSketchPlainNest(s, x, wt, shares, sums));
  Stmt nest = kernelBySketch(
      ctx, std::move(plain), tuned, [&](const Knobs& k) { return convSketchAnnotationFits(s, k, registers); },
      [&](Schedule& sched, const Knobs& k) { applyConvSketch(sched, s, k, registers); },
      [](const Knobs&) { return std::optional<Knobs>(); }, convSketchDefaultKnobs(s, registers));
  const int64_t zy = ctx.attrs.getInt("output_zero_point"), lo = lowerBound(ctx);
  return storesInto(
      distributedIndices(nest), sums, ctx.out[0], leading, s.lanes,
      [&](Expr sum, const std::vector<Expr>& index) {
        // Output channel block · L + lane (a vector store's lanes a ramp).
        Expr block = index[1] * s.lanes;
        const auto* lanes = index[3].as<Ramp>();
        Expr channel =
            lanes ? Ramp::make(block + lanes->base, lanes->stride, lanes->lanes) : block + index[3];
        return requantizeAcc(std::move(sum), Load::make(mult, channel), Load::make(offset, channel), zy, lo);
      });
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

// The template-free schedule of direct packed convolutions (core/lower/conv_search.h): every
// annotation the sketch offers applies, verifies, replays from its trace and computes the
// convolution (pointwise, windowed and depthwise, strided, padded and dilated; tail pixels, several weight
// blocks, scalar and vector lanes, with and without a bias; plain NCHW ones, grouped and
// depthwise); a record selects it in the model's lowering, with the fused epilogue at the tile's
// stores, in the interpreter and as JIT code.
#include "core/lower/conv_search.h"

#include <gtest/gtest.h>

#include <random>

#include "core/ir/parser.h"
#include "core/lower/gemm_search.h"
#include "core/lower/interpreter.h"
#include "core/lower/lower.h"
#include "core/tir/functor.h"
#include "core/tir/printer.h"
#include "core/tir/schedule_analysis.h"
#include "core/tir/trace.h"
#include "core/tir/verify.h"
#include "runtime/error.h"
#include "tests/unit/core/kernels_test_util.h"
#include "tests/unit/core/lower_test_util.h"

namespace kiln::core::lower {
namespace {

using namespace testing;
using tir::PrimFunc;
using tir::Schedule;
using tir::Trace;

/// y[n, g·V + v, r, q, l] = b[…] + Σ x[n, c, r·sh + kh·dh − ph, q·sw + kw·dw − pw, i] ·
/// w[g, c, kh, kw, i, v·L + l] in double precision, reads outside the image being 0 (a flat
/// pointwise shape is one row of its pixels).
std::vector<float> reference(const ConvSketchShape& s, const std::vector<float>& x, const std::vector<float>& w,
                             const std::vector<float>* b) {
  if (s.planar) {
    // NCHW: y[n, o, r, q] = b[o] + Σ x[n, group(o)·C/G + c, …] · w[o, c, kh, kw].
    const int64_t outs = s.groups * s.vectors, perGroup = outs / s.convGroups;
    std::vector<float> y(static_cast<size_t>(s.n * outs * s.rows * s.pixels));
    for (int64_t n = 0; n < s.n; ++n)
      for (int64_t o = 0; o < outs; ++o)
        for (int64_t r = 0; r < s.rows; ++r)
          for (int64_t q = 0; q < s.pixels; ++q) {
            double acc = b ? (*b)[static_cast<size_t>(o)] : 0.0;
            for (int64_t c = 0; c < s.cb; ++c)
              for (int64_t kh = 0; kh < s.kh; ++kh)
                for (int64_t kw = 0; kw < s.kw; ++kw) {
                  int64_t row = r * s.strideH + kh * s.dilH - s.padH,
                          col = q * s.strideW + kw * s.dilW - s.padW;
                  if (row < 0 || row >= s.inHeight || col < 0 || col >= s.inWidth) continue;
                  const int64_t channel = (n * s.convGroups + o / perGroup) * s.cb + c;
                  acc += double(x[static_cast<size_t>((channel * s.inHeight + row) * s.inWidth + col)]) *
                         w[static_cast<size_t>(((o * s.cb + c) * s.kh + kh) * s.kw + kw)];
                }
            y[static_cast<size_t>(((n * outs + o) * s.rows + r) * s.pixels + q)] = static_cast<float>(acc);
          }
    return y;
  }
  const int64_t blocks = s.groups * s.vectors, ob = s.vectors * s.lanes, outPixels = s.rows * s.pixels;
  const int64_t height = s.rowed() ? s.inHeight : 1, width = s.rowed() ? s.inWidth : s.pixels;
  std::vector<float> y(static_cast<size_t>(s.n * blocks * outPixels * s.lanes));
  if (s.depthwise) {
    // y[n, g, r, q, l] = b[g·L + l] + Σ x[n, g, r·sh + kh·dh − ph, q·sw + kw·dw − pw, l] · w[g, kh, kw, l].
    for (int64_t n = 0; n < s.n; ++n)
      for (int64_t g = 0; g < s.groups; ++g)
        for (int64_t r = 0; r < s.rows; ++r)
          for (int64_t q = 0; q < s.pixels; ++q)
            for (int64_t l = 0; l < s.lanes; ++l) {
              double acc = b ? (*b)[static_cast<size_t>(g * s.lanes + l)] : 0.0;
              for (int64_t kh = 0; kh < s.kh; ++kh)
                for (int64_t kw = 0; kw < s.kw; ++kw) {
                  int64_t row = r * s.strideH + kh * s.dilH - s.padH, col = q * s.strideW + kw * s.dilW - s.padW;
                  if (row < 0 || row >= height || col < 0 || col >= width) continue;
                  acc += double(x[static_cast<size_t>((((n * s.groups + g) * height + row) * width + col) * s.lanes + l)]) *
                         w[static_cast<size_t>(((g * s.kh + kh) * s.kw + kw) * s.lanes + l)];
                }
              y[static_cast<size_t>(((n * s.groups + g) * outPixels + r * s.pixels + q) * s.lanes + l)] =
                  static_cast<float>(acc);
            }
    return y;
  }
  for (int64_t n = 0; n < s.n; ++n)
    for (int64_t g = 0; g < s.groups; ++g)
      for (int64_t v = 0; v < s.vectors; ++v)
        for (int64_t r = 0; r < s.rows; ++r)
          for (int64_t q = 0; q < s.pixels; ++q)
            for (int64_t l = 0; l < s.lanes; ++l) {
              int64_t block = g * s.vectors + v;
              double acc = b ? (*b)[static_cast<size_t>(block * s.lanes + l)] : 0.0;
              for (int64_t c = 0; c < s.cb; ++c)
                for (int64_t kh = 0; kh < s.kh; ++kh)
                  for (int64_t kw = 0; kw < s.kw; ++kw) {
                    int64_t row = r * s.strideH + kh * s.dilH - s.padH, col = q * s.strideW + kw * s.dilW - s.padW;
                    if (row < 0 || row >= height || col < 0 || col >= width) continue;
                    for (int64_t i = 0; i < s.ib; ++i)
                      acc += double(x[static_cast<size_t>((((n * s.cb + c) * height + row) * width + col) * s.ib + i)]) *
                             w[static_cast<size_t>(((((g * s.cb + c) * s.kh + kh) * s.kw + kw) * s.ib + i) * ob +
                                                   v * s.lanes + l)];
                  }
              y[static_cast<size_t>(((n * blocks + block) * outPixels + r * s.pixels + q) * s.lanes + l)] =
                  static_cast<float>(acc);
            }
  return y;
}

/// Every annotation of `s` (with `registers` vector registers) applies, verifies, replays from
/// its trace and computes the convolution in the interpreter; returns how many were checked.
int checkEveryAnnotation(const ConvSketchShape& s, int registers, uint32_t seed) {
  PrimFunc plain = convSketchPlainFunc(s);
  std::vector<float> x = randomData(s.inputElements(), seed);
  std::vector<float> w = randomData(s.weightElements(), seed + 1);
  std::vector<float> b = randomData(s.groups * s.vectors * s.lanes, seed + 2);
  std::vector<float> want = reference(s, x, w, s.bias ? &b : nullptr);
  std::vector<Knobs> all = convSketchAnnotations(s, registers);
  EXPECT_FALSE(all.empty());
  int checked = 0;
  for (const Knobs& knobs : all) {
    SCOPED_TRACE(knobsText(knobs));
    Schedule sched(plain);
    applyConvSketch(sched, s, knobs, registers);
    const PrimFunc& scheduled = sched.func();
    EXPECT_EQ(tir::verifyPrimFunc(scheduled), std::vector<std::string>{});
    Trace trace = Trace::parse(sched.trace().str());
    EXPECT_EQ(tir::print(trace.apply(plain)), tir::print(scheduled));
    std::string text = tir::print(scheduled);
    EXPECT_NE(text.find("y_local"), std::string::npos) << text;
    // The static dependence proofs decide as the replay does.
    tir::schedule_detail::setStaticProofs(false);
    Schedule replayed(plain);
    EXPECT_NO_THROW(applyConvSketch(replayed, s, knobs, registers));
    tir::schedule_detail::setStaticProofs(true);
    EXPECT_EQ(tir::print(replayed.func()), text);
    std::vector<float> y(want.size(), std::nanf(""));
    std::vector<void*> args = {x.data(), w.data()};
    if (s.bias) args.push_back(b.data());
    args.push_back(y.data());
    interpret(scheduled, args);
    EXPECT_TRUE(close(y, want)) << text;
    if (::testing::Test::HasFailure()) return checked;
    ++checked;
  }
  return checked;
}

/// A graph of one conv2d_nchwc with a bias of 16: input, packed weight and output types (f32
/// shapes in the text form, "1,2,5,7,8") and its attributes.
Graph oneConv(const std::string& x, const std::string& w, const std::string& y, const std::string& attrs) {
  return parseGraph("graph(%x: f32[" + x + "], %w: f32[" + w + "], %b: f32[16]) {\n  %y = conv2d_nchwc(%x, %w, %b) {" +
                    attrs + "} : f32[" + y + "]\n  return %y\n}\n");
}

/// A one-convolution graph's inputs (x, w, b at random) and the reference output of `s`.
struct SketchCase {
  std::vector<runtime::Tensor> inputs;
  std::vector<float> want;
};
SketchCase sketchCase(const ConvSketchShape& s, const Shape& xs, const Shape& ws, uint64_t seed) {
  runtime::Tensor x = randomTensor(xs, seed), w = randomTensor(ws, seed + 1),
                  b = randomTensor({s.groups * s.vectors * s.lanes}, seed + 2);
  std::vector<float> bias = toVector(b);
  return {{x, w, b}, reference(s, toVector(x), toVector(w), &bias)};
}

/// `g`'s kernel lowered with `knobs` as the record of `key`: it computes `c.want` in the
/// interpreter and as JIT code; returns its trace.
std::string expectRecordRuns(const Graph& g, LowerOptions options, const std::string& key, const Knobs& knobs,
                             const SketchCase& c) {
  auto configs = std::make_shared<ScheduleConfigs>();
  configs->byKey[key] = knobs;
  options.schedules = configs;
  LoweredModule module = lowerGraph(g, options);
  for (Engine e : {Engine::Interpreter, Engine::Jit})
    EXPECT_TRUE(allClose(evalModule(module, c.inputs, e)[0], c.want)) << (e == Engine::Jit ? "jit" : "interp");
  return module.funcs[0].attrs.at("trace");
}

/// `g`'s kernel with each of `annotations` as its record (8 lanes, 16 registers) computes `c.want`
/// (expectRecordRuns), and its trace is the one the tuner builds from the key; returns the key.
std::string expectKeyedSketches(const Graph& g, const SketchCase& c, const std::vector<Knobs>& annotations) {
  LowerOptions options;
  const std::string key = lowerGraph(g, options).funcs[0].attrs.at("tune_key");
  for (const Knobs& knobs : annotations) {
    SCOPED_TRACE(knobsText(knobs));
    EXPECT_EQ(expectRecordRuns(g, options, key, knobs, c), sketchTrace(key, knobs, 8, 16).str());
  }
  return key;
}

TEST(PointwiseConvSearch, ShapesAreReadFromUngroupedAndDepthwiseKernels) {
  Shape xs{2, 3, 4, 5, 8}, ws{2, 3, 1, 1, 8, 16}, ys{2, 4, 4, 5, 8};
  auto s = convSketchShape(xs, ws, ys, {1, 1}, {0, 0}, {1, 1}, 1, true);
  ASSERT_TRUE(s.has_value());
  EXPECT_FALSE(s->rowed());  // one row of H·W pixels
  EXPECT_EQ(s->pixels, 20);
  EXPECT_EQ(s->vectors, 2);
  EXPECT_EQ(s->groups, 2);
  EXPECT_DOUBLE_EQ(s->flops(), 2.0 * 2 * 20 * 24 * 32);
  auto strided = convSketchShape(xs, ws, {2, 4, 2, 3, 8}, {2, 2}, {0, 0}, {1, 1}, 1, true);  // rows × columns
  ASSERT_TRUE(strided.has_value());
  EXPECT_TRUE(strided->rowed());
  EXPECT_EQ(strided->rows, 2);
  EXPECT_EQ(strided->pixels, 3);
  // A padded 3×3 window keeps its rows, in runs: the first row (taps 1, 2), the interior, the last
  // (taps 0, 1); likewise the columns.
  auto window = convSketchShape(xs, {2, 3, 3, 3, 8, 16}, ys, {1, 1}, {1, 1}, {1, 1}, 1, true);
  ASSERT_TRUE(window.has_value());
  EXPECT_TRUE(window->rowed() && window->regioned());
  EXPECT_EQ(window->rowRuns(), (std::vector<TapRun>{{0, 1, 1, 3}, {1, 2, 0, 3}, {3, 1, 0, 2}}));
  EXPECT_EQ(window->columnRuns(), (std::vector<TapRun>{{0, 1, 1, 3}, {1, 3, 0, 3}, {4, 1, 0, 2}}));
  EXPECT_DOUBLE_EQ(window->flops(), 2.0 * 2 * 20 * 24 * 9 * 32);
  EXPECT_EQ(s->rowRuns(), (std::vector<TapRun>{{0, 1, 0, 1}}));  // one run without a window
  // Stride 2, dilation 2, padding 3 over 7 inputs: taps t with 0 <= 2o + 2t − 3 <= 6.
  EXPECT_EQ(tapRuns(4, 7, 3, 2, 3, 2), (std::vector<TapRun>{{0, 1, 2, 3}, {1, 1, 1, 3}, {2, 1, 0, 3}, {3, 1, 0, 2}}));
  EXPECT_FALSE(convSketchShape(xs, ws, ys, {2, 2}, {0, 0}, {1, 1}, 1, true));  // the output of another stride
  EXPECT_FALSE(convSketchShape(xs, ws, ys, {1, 1}, {1, 1}, {1, 1}, 1, true));  // padded 1×1: a larger output
  // A padded 1×1 whose border outputs see only padding (the bias alone): runs without taps.
  auto bare = convSketchShape(xs, ws, {2, 4, 6, 7, 8}, {1, 1}, {1, 1}, {1, 1}, 1, true);
  ASSERT_TRUE(bare.has_value());
  EXPECT_EQ(bare->rowRuns(), (std::vector<TapRun>{{0, 1, 1, 1}, {1, 4, 0, 1}, {5, 1, 0, 0}}));
  EXPECT_TRUE(bare->beyondReach());
  EXPECT_FALSE(window->beyondReach());
  EXPECT_FALSE(convSketchShape(xs, {2, 3, 3, 3, 8, 16}, ys, {1, 1}, {1, 1}, {2, 2}, 1, true));  // dilated: smaller
  EXPECT_FALSE(convSketchShape(xs, ws, ys, {1, 1}, {0, 0}, {1, 1}, 3, true));  // grouped
  auto depthwise = convSketchShape({1, 3, 4, 5, 8}, {3, 1, 3, 3, 1, 8}, {1, 3, 4, 5, 8}, {1, 1}, {1, 1}, {1, 1}, 24, true);
  ASSERT_TRUE(depthwise.has_value());
  EXPECT_TRUE(depthwise->depthwise && depthwise->regioned());
  EXPECT_EQ(depthwise->groups, 3);
  EXPECT_EQ(depthwise->vectors, 1);
  EXPECT_DOUBLE_EQ(depthwise->flops(), 2.0 * 20 * 9 * 24);
  EXPECT_FALSE(convSketchShape({1, 3, 4, 5, 8}, {3, 1, 3, 3, 1, 8}, {1, 3, 4, 5, 8}, {1, 1}, {1, 1}, {1, 1}, 12, true));
  EXPECT_FALSE(convSketchShape(xs, ws, {2, 4, 4, 5, 6}, {1, 1}, {0, 0}, {1, 1}, 1, true));  // 6 lanes into 16
}

TEST(PointwiseConvSearch, DefaultTilesDivideThePixelsOrTakeATail) {
  auto mi = [](int64_t pixels, int64_t vectors, int registers) {
    ConvSketchShape s{1, 4, 16, pixels, 2, vectors, 16, true};
    Knobs k = convSketchDefaultKnobs(s, registers);
    EXPECT_TRUE(convSketchAnnotationFits(s, k, registers)) << knobsText(k);
    // Weight groups outermost when the weights are at least as large as the input (the
    // builder's order), pixel tiles otherwise.
    EXPECT_EQ(k.at("po"), s.weightElements() >= s.inputElements() ? 1 : 0) << pixels;
    return k.at("mi");
  };
  // 2 groups × 64 channels × 32 outputs (4096 weights) against 64 channels of 3136 or 49 pixels.
  EXPECT_EQ(convSketchDefaultKnobs(ConvSketchShape{1, 4, 16, 56 * 56, 2, 2, 16, true}, 32).at("po"), 0);
  EXPECT_EQ(convSketchDefaultKnobs(ConvSketchShape{1, 4, 16, 7 * 7, 2, 2, 16, true}, 32).at("po"), 1);
  EXPECT_EQ(mi(56 * 56, 2, 32), 14);
  EXPECT_EQ(mi(7 * 7, 2, 32), 7);
  EXPECT_EQ(mi(7 * 7, 4, 32), 7);   // 28 accumulators: the whole budget, as the builder's 4 × 7
  EXPECT_EQ(mi(7 * 7, 4, 16), 3);   // 12 of 13
  EXPECT_EQ(mi(23, 1, 16), 13);     // a prime: the tallest tile (13 accumulators) and a tail
  EXPECT_EQ(mi(3, 2, 32), 3);       // no taller than the row
}

TEST(PointwiseConvSearch, SketchTracesReplayVerifyAndAgree) {
  std::mt19937 rng(23);
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  int checked = 0;
  for (int t = 0; t < 16; ++t) {
    const int64_t lanes = t % 3 == 0 ? 1 : (t % 3 == 1 ? 4 : 8), cb = pick(1, 3), ib = pick(0, 1) ? lanes : 4;
    const int64_t n = pick(1, 2), groups = pick(1, 3), vectors = pick(1, 3), height = pick(1, 7), width = pick(1, 9);
    // Every other shape strided (1×2, 2×1 or 2×2).
    const int64_t sh = t % 2 ? pick(1, 2) : 1, sw = t % 2 && sh == 1 ? 2 : (t % 2 ? pick(1, 2) : 1);
    std::optional<ConvSketchShape> shape =
        convSketchShape({n, cb, height, width, ib}, {groups, cb, 1, 1, ib, vectors * lanes},
                        {n, groups * vectors, (height - 1) / sh + 1, (width - 1) / sw + 1, lanes}, {sh, sw}, {0, 0},
                        {1, 1}, 1, pick(0, 1) != 0);
    ASSERT_TRUE(shape.has_value());
    EXPECT_EQ(shape->rowed(), t % 2 == 1);
    SCOPED_TRACE("shape " + std::to_string(t));
    checked += checkEveryAnnotation(*shape, 16, static_cast<uint32_t>(10 + 3 * t));
    if (HasFailure()) return;
  }
  EXPECT_GE(checked, 100);
  // Annotations that do not fit: a tile over the register budget, another packing, no order.
  ConvSketchShape s{1, 4, 8, 49, 2, 2, 8, true};
  EXPECT_FALSE(convSketchAnnotationFits(s, {{"mi", 7}, {"po", 1}, {"oc_vecs", 2}}, 16));  // 7·2 > 13
  EXPECT_TRUE(convSketchAnnotationFits(s, {{"mi", 7}, {"po", 1}, {"oc_vecs", 2}}, 32));
  EXPECT_FALSE(convSketchAnnotationFits(s, {{"mi", 4}, {"po", 1}, {"oc_vecs", 1}}, 32));
  EXPECT_FALSE(convSketchAnnotationFits(s, {{"mi", 4}, {"oc_vecs", 2}}, 32));
  Schedule sched(convSketchPlainFunc(s));
  EXPECT_THROW(applyConvSketch(sched, s, {{"mi", 7}, {"po", 1}}, 16), Error);
}

// The reduction starts where both of its loops (c, i) are at their first iteration. Staged at
// the inner loop alone, that condition depends on the outer one: the copy-in reads the output
// and the select stays, so the result is still the convolution.
TEST(PointwiseConvSearch, AReductionOverTwoLoopsStagedInsideOneOfThem) {
  ConvSketchShape s{1, 3, 4, 5, 2, 1, 4, true};
  std::vector<float> x = randomData(s.cb * s.pixels * s.ib, 1), w = randomData(s.groups * s.cb * s.ib * s.lanes, 2),
                     b = randomData(s.groups * s.lanes, 3);
  std::vector<float> want = reference(s, x, w, &b);
  for (const char* loop : {"c", "i"}) {
    SCOPED_TRACE(loop);
    Schedule sched(convSketchPlainFunc(s));
    sched.cacheWrite(loop);
    std::string text = tir::print(sched.func());
    // Staged at c (both loops inside) the select is gone; at i it stays.
    EXPECT_EQ(text.find("select") == std::string::npos, std::string(loop) == "c") << text;
    std::vector<float> y(want.size(), 0.0f);
    interpret(sched.func(), {x.data(), w.data(), b.data(), y.data()});
    EXPECT_TRUE(close(y, want)) << text;
  }
}

// A record with a sketch annotation makes the model's pointwise convolution the sketch, a fused
// relu applied where the tile is written back; its trace alone rebuilds the same kernel; a record
// for another packing is ignored (the untuned kernel: the sketch's default annotation).
TEST(PointwiseConvSearch, TunedLoweringRunsWithAnEpilogue) {
  Graph fused = parseGraph(
      "graph(%x: f32[1,3,5,7,4], %w: f32[2,3,1,1,4,8], %b: f32[16]) {\n"
      "  %y = conv2d_nchwc(%x, %w, %b) {groups=1, out_layout=\"NCHW4c\"} : f32[1,4,5,7,4]\n"
      "  %z = relu(%y) : f32[1,4,5,7,4]\n"
      "  return %z\n"
      "}\n");
  fused.addGroup("g", 0, 2);
  ConvSketchShape s{1, 3, 4, 35, 2, 2, 4, true};
  runtime::Tensor xt = randomTensor({1, 3, 5, 7, 4}, 1), wt = randomTensor({2, 3, 1, 1, 4, 8}, 2),
                  bt = randomTensor({16}, 3);
  std::vector<float> b = toVector(bt);
  std::vector<float> want = reference(s, toVector(xt), toVector(wt), &b);
  for (float& v : want) v = std::max(0.0f, v);
  LowerOptions options;  // 8 lanes, 16 registers
  const std::string key = lowerGraph(fused, options).funcs[0].attrs.at("tune_key");
  EXPECT_EQ(key.rfind("conv2d_nchwc:", 0), 0u) << key;
  for (const Knobs& knobs : {Knobs{{"mi", 5}, {"po", 1}, {"oc_vecs", 2}}, Knobs{{"mi", 4}, {"po", 0}, {"oc_vecs", 2}},
                             Knobs{{"mi", 6}, {"po", 1}, {"oc_vecs", 2}}}) {
    SCOPED_TRACE(knobsText(knobs));
    expectSketchKernel(fused, options, key, knobs, "c", {xt, wt, bt}, want);
  }
  auto configs = std::make_shared<ScheduleConfigs>();
  configs->byKey[key] = Knobs{{"mi", 4}, {"po", 1}, {"oc_vecs", 1}};  // packed for one vector per block
  options.schedules = configs;
  PrimFunc untuned = lowerGraph(fused, options).funcs[0];
  EXPECT_EQ(untuned.attrs.at("schedule"), knobsText(convSketchDefaultKnobs(s, options.vectorRegisters)));
  EXPECT_EQ(untuned.attrs.count("trace"), 1u);
  // A record of the retired builder's knobs builds the annotation it stands for, with its trace.
  configs->byKey[key] = Knobs{{"ow_block", 5}, {"oc_vecs", 2}};
  PrimFunc builder = lowerGraph(fused, options).funcs[0];
  EXPECT_EQ(builder.attrs.at("schedule"),
            "mi=5,oc_vecs=2,po=" + std::to_string(convSketchDefaultKnobs(s, 16).at("po")));
  EXPECT_EQ(builder.attrs.count("trace"), 1u);
}

// A residual add and relu fused after the untuned sketch read the residual at the offset of the
// store they feed (OpContext::flatEpilogue): no index rebuilt by division; a per-channel operand
// keeps the per-axis index. Both compute the reference in the interpreter and as JIT code.
TEST(PointwiseConvSearch, ResidualEpilogueReadsAtTheStoreOffset) {
  ConvSketchShape s{1, 3, 4, 35, 2, 2, 4, true};
  runtime::Tensor xt = randomTensor({1, 3, 5, 7, 4}, 1), wt = randomTensor({2, 3, 1, 1, 4, 8}, 2),
                  bt = randomTensor({16}, 3), rt = randomTensor({1, 4, 5, 7, 4}, 4),
                  ct = randomTensor({1, 4, 1, 1, 4}, 5);
  std::vector<float> b = toVector(bt), r = toVector(rt), c = toVector(ct);
  std::vector<float> conv = reference(s, toVector(xt), toVector(wt), &b);
  for (bool perChannel : {false, true}) {
    SCOPED_TRACE(perChannel ? "with a per-channel add" : "residual only");
    Graph fused = parseGraph(
        "graph(%x: f32[1,3,5,7,4], %w: f32[2,3,1,1,4,8], %b: f32[16], %r: f32[1,4,5,7,4], %c: f32[1,4,1,1,4]) {\n"
        "  %y = conv2d_nchwc(%x, %w, %b) {groups=1, out_layout=\"NCHW4c\"} : f32[1,4,5,7,4]\n"
        "  %s = add(%y, %r) : f32[1,4,5,7,4]\n"
        "  %t = add(%s, %c) : f32[1,4,5,7,4]\n"
        "  %z = relu(%t) : f32[1,4,5,7,4]\n"
        "  return %z\n"
        "}\n");
    if (!perChannel) fused = parseGraph(
        "graph(%x: f32[1,3,5,7,4], %w: f32[2,3,1,1,4,8], %b: f32[16], %r: f32[1,4,5,7,4]) {\n"
        "  %y = conv2d_nchwc(%x, %w, %b) {groups=1, out_layout=\"NCHW4c\"} : f32[1,4,5,7,4]\n"
        "  %s = add(%y, %r) : f32[1,4,5,7,4]\n"
        "  %z = relu(%s) : f32[1,4,5,7,4]\n"
        "  return %z\n"
        "}\n");
    fused.addGroup("g", 0, perChannel ? 4 : 3);
    LowerOptions options;  // 8 lanes, 16 registers
    LoweredModule module = lowerGraph(fused, options);
    ASSERT_EQ(module.funcs.size(), 1u);
    const PrimFunc& f = module.funcs[0];
    EXPECT_EQ(f.attrs.at("schedule"), knobsText(convSketchDefaultKnobs(s, options.vectorRegisters)));
    // Every load of the residual: its index free of division and remainder.
    struct ResidualLoads : tir::IRVisitor {
      int loads = 0, divided = 0;
      bool inResidual = false;
      using tir::IRVisitor::visit;
      void visit(const tir::Load* op) override {
        if (op->buffer->name != "r") return tir::IRVisitor::visit(op);
        ++loads;
        inResidual = true;
        tir::IRVisitor::visit(op);
        inResidual = false;
      }
      void visit(const tir::Div* op) override {
        divided += inResidual;
        tir::IRVisitor::visit(op);
      }
      void visit(const tir::Mod* op) override {
        divided += inResidual;
        tir::IRVisitor::visit(op);
      }
    } residual;
    residual.visitStmt(f.body);
    EXPECT_GT(residual.loads, 0);
    if (!perChannel) {
      EXPECT_EQ(residual.divided, 0) << tir::print(f);
    }
    std::vector<float> want = conv;
    for (size_t i = 0; i < want.size(); ++i) {
      float v = want[i] + r[i] + (perChannel ? c[(i / 140) * 4 + i % 4] : 0.0f);
      want[i] = std::max(0.0f, v);
    }
    std::vector<runtime::Tensor> inputs{xt, wt, bt, rt};
    if (perChannel) inputs.push_back(ct);
    for (Engine e : {Engine::Interpreter, Engine::Jit})
      EXPECT_TRUE(allClose(evalModule(module, inputs, e)[0], want)) << (e == Engine::Jit ? "jit" : "interp");
  }
}

// A strided 1×1 convolution (ResNet's downsampling) keeps its rows; a record selects the sketch,
// whose kernel computes the convolution in the interpreter and as JIT code and whose trace is the
// one the tuner builds from the key.
TEST(PointwiseConvSearch, StridedConvolutionsKeepTheirRows) {
  Graph g = oneConv("1,2,5,7,8", "1,2,1,1,8,16", "1,2,3,4,8", "groups=1, stride=[2,2], out_layout=\"NCHW8c\"");
  auto s = convSketchShape({1, 2, 5, 7, 8}, {1, 2, 1, 1, 8, 16}, {1, 2, 3, 4, 8}, {2, 2}, {0, 0}, {1, 1}, 1, true);
  ASSERT_TRUE(s.has_value());
  const std::string key = expectKeyedSketches(g, sketchCase(*s, {1, 2, 5, 7, 8}, {1, 2, 1, 1, 8, 16}, 4),
                                              {{{"mi", 4}, {"po", 1}, {"oc_vecs", 2}}, {{"mi", 3}, {"po", 0}, {"oc_vecs", 2}}});
  EXPECT_NE(key.find("sh=2,sw=2"), std::string::npos) << key;
}

// The tuner records the trace it builds from the key alone (sketchTrace, on alter-layout's
// packing for the target); it is the trace the model's kernel replays.
TEST(PointwiseConvSearch, TheKeysTraceIsTheKernels) {
  Graph g = parseGraph(
      "graph(%x: f32[1,2,5,7,8], %w: f32[1,2,1,1,8,16], %b: f32[16]) {\n"
      "  %y = conv2d_nchwc(%x, %w, %b) {groups=1, out_layout=\"NCHW8c\"} : f32[1,2,5,7,8]\n"
      "  return %y\n"
      "}\n");
  LowerOptions options;  // 8 lanes, 16 registers
  const std::string key = lowerGraph(g, options).funcs[0].attrs.at("tune_key");
  for (const Knobs& knobs : {Knobs{{"mi", 5}, {"po", 1}, {"oc_vecs", 2}}, Knobs{{"mi", 4}, {"po", 0}, {"oc_vecs", 2}}}) {
    auto configs = std::make_shared<ScheduleConfigs>();
    configs->byKey[key] = knobs;
    options.schedules = configs;
    EXPECT_EQ(lowerGraph(g, options).funcs[0].attrs.at("trace"), sketchTrace(key, knobs, 8, 16).str()) << knobsText(knobs);
  }
  EXPECT_FALSE(convSketchShapeOfKey(key, 3, 8).has_value());  // 3 vectors do not divide 2 blocks
  EXPECT_THROW(sketchTrace(key, {{"mi", 5}, {"po", 1}, {"oc_vecs", 3}}, 8, 16), Error);
  EXPECT_THROW(sketchTrace("conv2d_nchwc:n=1,c=16,h=5,w=7,o=16,kh=3,kw=3,sh=1,sw=1,ph=1,pw=1,dh=1,dw=1,g=2:f32",
                           {{"mi", 5}, {"po", 1}, {"oc_vecs", 2}}, 8, 16),
               Error);  // grouped
}

// Windows (3×3, 7×7, 2×3, dilated), strides and padding on random shapes: every annotation's
// kernel verifies, replays from its trace and computes the convolution, region by region.
TEST(WindowConvSearch, SketchTracesReplayVerifyAndAgree) {
  std::mt19937 rng(29);
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  int checked = 0, padded = 0, bare = 0;
  for (int t = 0; t < 12; ++t) {
    const int64_t lanes = t % 3 == 0 ? 1 : (t % 3 == 1 ? 4 : 8), cb = pick(1, 2), ib = t % 4 == 3 ? 3 : lanes;
    const int64_t kh = t == 5 ? 7 : pick(1, 3), kw = t == 5 ? 7 : (kh == 1 ? pick(2, 3) : pick(1, 3));
    const int64_t sh = pick(1, 2), sw = pick(1, 2), dh = t % 4 == 1 ? 2 : 1, dw = t % 4 == 1 ? pick(1, 2) : 1;
    // Shape 7 pads beyond the window's reach: its border outputs see only padding (no taps).
    const int64_t ph = t == 7 ? (kh - 1) * dh + 1 : pick(0, kh / 2 + (t == 5 ? 1 : 0));
    const int64_t pw = t == 7 ? (kw - 1) * dw + 1 : pick(0, kw / 2);
    const int64_t n = pick(1, 2), groups = pick(1, 2), vectors = pick(1, 3);
    const int64_t height = (kh - 1) * dh + 1 + pick(0, 3), width = (kw - 1) * dw + 1 + pick(0, 5);
    const int64_t oh = (height + 2 * ph - dh * (kh - 1) - 1) / sh + 1, ow = (width + 2 * pw - dw * (kw - 1) - 1) / sw + 1;
    std::optional<ConvSketchShape> shape =
        convSketchShape({n, cb, height, width, ib}, {groups, cb, kh, kw, ib, vectors * lanes},
                        {n, groups * vectors, oh, ow, lanes}, {sh, sw}, {ph, pw}, {dh, dw}, 1, pick(0, 1) != 0);
    ASSERT_TRUE(shape.has_value());
    ASSERT_TRUE(shape->rowed());
    padded += shape->padded();
    for (const std::vector<TapRun>& runs : {shape->rowRuns(), shape->columnRuns()})
      for (const TapRun& run : runs) bare += run.noTaps();
    SCOPED_TRACE("shape " + std::to_string(t) + ": " + std::to_string(kh) + "x" + std::to_string(kw) + " stride " +
                 std::to_string(sh) + "," + std::to_string(sw) + " pad " + std::to_string(ph) + "," + std::to_string(pw));
    checked += checkEveryAnnotation(*shape, 16, static_cast<uint32_t>(50 + 3 * t));
    if (HasFailure()) return;
  }
  EXPECT_GE(checked, 60);
  EXPECT_GE(padded, 6);
  EXPECT_GE(bare, 2);  // shape 7's first row and first column at least
  // Depthwise (groups = channels): the same regions over the taps of each lane.
  int depthwise = 0;
  for (int t = 0; t < 6; ++t) {
    const int64_t lanes = t % 3 == 0 ? 1 : (t % 3 == 1 ? 4 : 8), blocks = pick(2, 3);  // groups > 1
    const int64_t k = t == 5 ? 5 : 3, stride = pick(1, 2), dil = t == 4 ? 2 : 1;
    const int64_t pad = t == 3 ? (k - 1) * dil + 1 : pick(0, k / 2 * dil);  // 3: border outputs without taps
    const int64_t n = pick(1, 2), height = (k - 1) * dil + 1 + pick(0, 4), width = (k - 1) * dil + 1 + pick(0, 6);
    const int64_t oh = (height + 2 * pad - dil * (k - 1) - 1) / stride + 1;
    const int64_t ow = (width + 2 * pad - dil * (k - 1) - 1) / stride + 1;
    std::optional<ConvSketchShape> shape =
        convSketchShape({n, blocks, height, width, lanes}, {blocks, 1, k, k, 1, lanes}, {n, blocks, oh, ow, lanes},
                        {stride, stride}, {pad, pad}, {dil, dil}, blocks * lanes, pick(0, 1) != 0);
    ASSERT_TRUE(shape.has_value());
    ASSERT_TRUE(shape->depthwise);
    SCOPED_TRACE("depthwise shape " + std::to_string(t));
    depthwise += checkEveryAnnotation(*shape, 16, static_cast<uint32_t>(90 + 3 * t));
    if (HasFailure()) return;
  }
  EXPECT_GE(depthwise, 40);
}

// A padded 3×3 convolution with a fused relu and a 7×7 stem at stride 2 on three input
// channels: a record makes each the sketch, in the interpreter and as JIT code; its regions read
// no padding (no select is left), and the trace is the one the tuner builds from the key.
TEST(WindowConvSearch, TunedLoweringOfPaddedWindows) {
  Graph fused = parseGraph(
      "graph(%x: f32[1,2,6,9,8], %w: f32[2,2,3,3,8,8], %b: f32[16]) {\n"
      "  %y = conv2d_nchwc(%x, %w, %b) {groups=1, padding=[1,1], out_layout=\"NCHW8c\"} : f32[1,2,6,9,8]\n"
      "  %z = relu(%y) : f32[1,2,6,9,8]\n"
      "  return %z\n"
      "}\n");
  fused.addGroup("g", 0, 2);
  auto s = convSketchShape({1, 2, 6, 9, 8}, {2, 2, 3, 3, 8, 8}, {1, 2, 6, 9, 8}, {1, 1}, {1, 1}, {1, 1}, 1, true);
  ASSERT_TRUE(s.has_value());
  runtime::Tensor xt = randomTensor({1, 2, 6, 9, 8}, 7), wt = randomTensor({2, 2, 3, 3, 8, 8}, 8), bt = randomTensor({16}, 9);
  std::vector<float> b = toVector(bt);
  std::vector<float> want = reference(*s, toVector(xt), toVector(wt), &b);
  for (float& v : want) v = std::max(0.0f, v);
  LowerOptions options;  // 8 lanes, 16 registers
  const std::string key = lowerGraph(fused, options).funcs[0].attrs.at("tune_key");
  for (const Knobs& knobs : {Knobs{{"mi", 9}, {"po", 1}, {"oc_vecs", 1}}, Knobs{{"mi", 4}, {"po", 0}, {"oc_vecs", 1}}}) {
    SCOPED_TRACE(knobsText(knobs));
    expectSketchKernel(fused, options, key, knobs, "c_1_1", {xt, wt, bt}, want);
    auto configs = std::make_shared<ScheduleConfigs>();
    configs->byKey[key] = knobs;
    LowerOptions tuned = options;
    tuned.schedules = configs;
    const PrimFunc f = lowerGraph(fused, tuned).funcs[0];
    EXPECT_EQ(f.attrs.at("trace"), sketchTrace(key, knobs, 8, 16).str());
    EXPECT_EQ(tir::print(f).find("select"), std::string::npos) << tir::print(f);
  }

  Graph stem = oneConv("1,1,15,13,3", "1,1,7,7,3,16", "1,2,8,7,8",
                       "groups=1, stride=[2,2], padding=[3,3], out_layout=\"NCHW8c\"");
  auto t = convSketchShape({1, 1, 15, 13, 3}, {1, 1, 7, 7, 3, 16}, {1, 2, 8, 7, 8}, {2, 2}, {3, 3}, {1, 1}, 1, true);
  ASSERT_TRUE(t.has_value());
  const SketchCase c = sketchCase(*t, {1, 1, 15, 13, 3}, {1, 1, 7, 7, 3, 16}, 10);
  const std::string stemKey = lowerGraph(stem, options).funcs[0].attrs.at("tune_key");
  for (const Knobs& knobs : {Knobs{{"mi", 4}, {"po", 1}, {"oc_vecs", 2}}, Knobs{{"mi", 3}, {"po", 0}, {"oc_vecs", 2}}}) {
    SCOPED_TRACE(knobsText(knobs));
    EXPECT_NE(expectRecordRuns(stem, options, stemKey, knobs, c).find("kw_2_2"), std::string::npos);  // the interior
  }
}

// Outputs whose window lies wholly in the padding (a padded 1×1's border, a 3×3 padded by 3) are
// regions of their own that store the bias: with records the sketch computes them, in the
// interpreter and as JIT code, and untuned with the sketch's default annotation (a padded 1×1: 3 × 3
// regions; a 3×3 padded by 3: 7 × 7).
TEST(WindowConvSearch, OutputsBeyondThePaddingsReachStoreTheBias) {
  struct Case {
    Shape xs, ws, ys;
    int64_t pad;
  };
  for (const Case& k : {Case{{1, 2, 5, 6, 8}, {2, 2, 1, 1, 8, 8}, {1, 2, 7, 8, 8}, 1},
                        Case{{1, 2, 4, 5, 8}, {2, 2, 3, 3, 8, 8}, {1, 2, 8, 9, 8}, 3}}) {
    auto text = [](const Shape& sh) {
      std::string out;
      for (int64_t d : sh) out += (out.empty() ? "" : ",") + std::to_string(d);
      return out;
    };
    const std::string pad = std::to_string(k.pad);
    Graph g = oneConv(text(k.xs), text(k.ws), text(k.ys),
                      "groups=1, padding=[" + pad + "," + pad + "], out_layout=\"NCHW8c\"");
    auto s = convSketchShape(k.xs, k.ws, k.ys, {1, 1}, {k.pad, k.pad}, {1, 1}, 1, true);
    ASSERT_TRUE(s.has_value());
    SCOPED_TRACE(std::to_string(s->rowRuns().size()) + " x " + std::to_string(s->columnRuns().size()) +
                 " regions");
    const SketchCase c = sketchCase(*s, k.xs, k.ws, 40);
    const std::vector<Knobs> all = convSketchAnnotations(*s, 16);
    ASSERT_FALSE(all.empty());
    expectKeyedSketches(g, c, {all.front(), all[all.size() / 2], all.back()});
    LowerOptions options;
    LoweredModule untuned = lowerGraph(g, options);
    EXPECT_EQ(untuned.funcs[0].attrs.at("schedule"), knobsText(convSketchDefaultKnobs(*s, 16)));
    EXPECT_TRUE(allClose(evalModule(untuned, c.inputs, Engine::Jit)[0], c.want));
  }
}

// A depthwise 3×3 at stride 2 (MobileNet's downsampling): a record makes it the sketch, its regions
// over each lane's taps, in the interpreter and as JIT code; its trace is the one the tuner builds
// from the key. Untuned it is the sketch's default annotation, as with a record for a packing of
// two vectors (which does not fit it); a record of builder knobs builds its annotation.
TEST(WindowConvSearch, DepthwiseConvolutionsTakeTheSketch) {
  Graph g = oneConv("1,2,7,9,8", "2,1,3,3,1,8", "1,2,4,5,8", "groups=16, stride=[2,2], padding=[1,1], out_layout=\"NCHW8c\"");
  auto s = convSketchShape({1, 2, 7, 9, 8}, {2, 1, 3, 3, 1, 8}, {1, 2, 4, 5, 8}, {2, 2}, {1, 1}, {1, 1}, 16, true);
  ASSERT_TRUE(s.has_value());
  const Knobs tile{{"mi", 5}, {"po", 1}, {"oc_vecs", 1}};
  const std::string key =
      expectKeyedSketches(g, sketchCase(*s, {1, 2, 7, 9, 8}, {2, 1, 3, 3, 1, 8}, 20), {tile, {{"mi", 2}, {"po", 0}, {"oc_vecs", 1}}});
  EXPECT_NE(key.find(",g=16:"), std::string::npos) << key;
  // The interior's reduction is the taps alone.
  EXPECT_NE(sketchTrace(key, tile, 8, 16).str().find("cache_write(kh_1_1)"), std::string::npos);
  // Untuned, and with a record for a packing of two vectors (which does not fit), the kernel is
  // the sketch's default annotation; a record of the retired builder's knobs builds the
  // annotation it stands for.
  const Knobs defaults = convSketchDefaultKnobs(*s, 16);
  for (const Knobs& record : {Knobs{}, Knobs{{"mi", 4}, {"po", 1}, {"oc_vecs", 2}}}) {
    auto configs = std::make_shared<ScheduleConfigs>();
    if (!record.empty()) configs->byKey[key] = record;
    LowerOptions options;
    options.schedules = configs;
    const PrimFunc f = lowerGraph(g, options).funcs[0];
    EXPECT_EQ(f.attrs.at("schedule"), knobsText(defaults));
    EXPECT_EQ(f.attrs.at("trace"), sketchTrace(key, defaults, 8, 16).str());
  }
  auto configs = std::make_shared<ScheduleConfigs>();
  configs->byKey[key] = Knobs{{"oc_vecs", 1}, {"ow_block", 4}, {"oc_outer", 1}, {"unroll", 1}, {"flatten", 0}};
  LowerOptions options;
  options.schedules = configs;
  const Knobs itsTile{{"mi", 4}, {"po", 1}, {"oc_vecs", 1}};
  EXPECT_EQ(lowerGraph(g, options).funcs[0].attrs.at("trace"), sketchTrace(key, itsTile, 8, 16).str());
}

// Plain NCHW convolutions (conv_search.h "NCHW"; O0–O2): random shapes, grouped (a channel
// multiplier too) and depthwise, strided, dilated, padded and padded beyond the window's reach,
// on 4 and 8 lanes: every annotation of every weight group applies, verifies, replays from its
// trace and computes the convolution.
TEST(NchwConvSearch, SketchTracesReplayVerifyAndAgree) {
  std::mt19937 rng(31);
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  int checked = 0, grouped = 0, bare = 0, tails = 0;
  for (int t = 0; t < 14; ++t) {
    const int lanes = t % 2 == 0 ? 4 : 8;
    const int64_t groups = t % 5 == 2 ? 2 : (t % 5 == 4 ? 3 : 1), perGroup = t % 5 == 4 ? 1 : pick(1, 3) * 2;
    const int64_t cg = t % 5 == 4 ? 1 : pick(1, 3);
    const int64_t kh = t == 6 ? 7 : pick(1, 3), kw = t == 6 ? 7 : pick(1, 3);
    const int64_t sh = pick(1, 2), sw = pick(1, 2), dil = t % 4 == 1 ? 2 : 1;
    const int64_t ph = t == 9 ? (kh - 1) * dil + 1 : pick(0, kh / 2 + 1),
                  pw = t == 9 ? (kw - 1) * dil + 1 : pick(0, kw / 2);
    const int64_t n = pick(1, 2), height = (kh - 1) * dil + 1 + pick(0, 4),
                  width = (kw - 1) * dil + 1 + pick(3, 30);
    const int64_t oh = (height + 2 * ph - dil * (kh - 1) - 1) / sh + 1,
                  ow = (width + 2 * pw - dil * (kw - 1) - 1) / sw + 1;
    const Shape xs{n, groups * cg, height, width}, ws{groups * perGroup, cg, kh, kw},
        ys{n, groups * perGroup, oh, ow};
    grouped += groups > 1;
    for (int64_t v : {1, 2, 3}) {
      std::optional<ConvSketchShape> shape = planarConvSketchShape(xs, ws, ys, {sh, sw}, {ph, pw}, {dil, dil},
                                                                   groups, pick(0, 1) != 0, v, lanes);
      if (perGroup % v != 0 && v != 1) {
        EXPECT_FALSE(shape.has_value());
        continue;
      }
      ASSERT_TRUE(shape.has_value());
      ASSERT_TRUE(shape->regioned());
      for (const std::vector<TapRun>& runs : {shape->rowRuns(), shape->columnRuns()})
        for (const TapRun& run : runs) bare += run.noTaps();
      for (const TapRun& run : shape->columnRuns()) tails += run.count % lanes != 0 && run.count > lanes;
      SCOPED_TRACE("shape " + std::to_string(t) + " V=" + std::to_string(v) + ": " + std::to_string(kh) +
                   "x" + std::to_string(kw) + " stride " + std::to_string(sh) + "," + std::to_string(sw) +
                   " pad " + std::to_string(ph) + "," + std::to_string(pw) + " groups " +
                   std::to_string(groups));
      checked += checkEveryAnnotation(*shape, 16, static_cast<uint32_t>(130 + 5 * t + static_cast<int>(v)));
      if (HasFailure()) return;
    }
  }
  EXPECT_GE(checked, 40);
  EXPECT_GE(grouped, 4);
  EXPECT_GE(bare, 2);  // shape 9's first row and first column at least
  EXPECT_GE(tails, 5);
}

// A padded 3×3 NCHW convolution with a fused relu, grouped and not: its key names it, a record
// of each annotation makes it the sketch in the interpreter and as JIT code with the trace the
// tuner builds from the key; untuned (and with a record of a weight group that does not divide its
// channels) it is the default annotation, no region reading padding.
TEST(NchwConvSearch, RecordsSelectTheSketchAndTheDefaultIsUntuned) {
  for (int64_t groups : {1, 2}) {
    SCOPED_TRACE("groups " + std::to_string(groups));
    const std::string gs = std::to_string(groups);
    Graph g = parseGraph("graph(%x: f32[1,4,9,21], %w: f32[12," + std::to_string(4 / groups) +
                         ",3,3], %b: f32[12]) {\n"
                         "  %y = conv2d(%x, %w, %b) {groups=" +
                         gs +
                         ", padding=[1,1]} : f32[1,12,9,21]\n"
                         "  %z = relu(%y) : f32[1,12,9,21]\n"
                         "  return %z\n"
                         "}\n");
    g.addGroup("g", 0, 2);
    const Shape xs{1, 4, 9, 21}, ws{12, 4 / groups, 3, 3}, ys{1, 12, 9, 21};
    auto s = planarConvSketchShape(xs, ws, ys, {1, 1}, {1, 1}, {1, 1}, groups, true, 1, 8);
    ASSERT_TRUE(s.has_value());
    runtime::Tensor xt = randomTensor(xs, 7), wt = randomTensor(ws, 8), bt = randomTensor({12}, 9);
    std::vector<float> b = toVector(bt);
    std::vector<float> want = reference(*s, toVector(xt), toVector(wt), &b);
    for (float& v : want) v = std::max(0.0f, v);
    const SketchCase c{{xt, wt, bt}, want};
    LowerOptions options;  // 8 lanes, 16 registers
    const LoweredModule untuned = lowerGraph(g, options);
    const std::string key = untuned.funcs[0].attrs.at("tune_key");
    EXPECT_EQ(key, "conv2d:n=1,c=4,h=9,w=21,o=12,kh=3,kw=3,sh=1,sw=1,ph=1,pw=1,dh=1,dw=1,g=" + gs + ":f32");
    const Knobs defaults = convSketchDefaultKnobs(*s, 16);
    EXPECT_EQ(untuned.funcs[0].attrs.at("schedule"), knobsText(defaults));
    EXPECT_EQ(untuned.funcs[0].attrs.at("trace"), sketchTrace(key, defaults, 8, 16).str());
    EXPECT_EQ(tir::print(untuned.funcs[0]).find("select"), std::string::npos) << tir::print(untuned.funcs[0]);
    for (Engine e : {Engine::Interpreter, Engine::Jit})
      EXPECT_TRUE(allClose(evalModule(untuned, c.inputs, e)[0], c.want));
    std::vector<Knobs> records;
    for (int64_t v : {1, 2, 3, 6}) {
      auto sv = planarConvSketchShape(xs, ws, ys, {1, 1}, {1, 1}, {1, 1}, groups, true, v, 8);
      ASSERT_TRUE(sv.has_value());
      const std::vector<Knobs> all = convSketchAnnotations(*sv, 16);
      ASSERT_FALSE(all.empty());
      records.push_back(all.front());
      records.push_back(all.back());
    }
    expectKeyedSketches(g, c, records);
    // Five output channels per weight group divide neither a convolution group's 12 nor its 6.
    auto configs = std::make_shared<ScheduleConfigs>();
    configs->byKey[key] = Knobs{{"mi", 1}, {"oc_vecs", 5}};
    options.schedules = configs;
    EXPECT_EQ(lowerGraph(g, options).funcs[0].attrs.at("schedule"), knobsText(defaults));
  }
}

// An int8 convolution's zero-point shares must have one row per region of its output: a 1×1
// convolution without padding has one region, so i32[2,4] is refused by the lowering with one
// line (InvalidModel), and a rank-1 constant by the op's type check.
TEST(QuantizedConvSketch, SharesOfTheWrongShapeAreRefusedInOneLine) {
  auto graphWith = [](const std::string& shares) {
    return "graph(%q: u8[1,1,4,4,4]) {\n"
           "  %m = constant f32[4] [0.5, 0.5, 0.25, 1]\n"
           "  %o = constant f32[4] [0, 1, 2, 3]\n"
           "  %w = constant i8[1,1,1,1,4,4] [1, 2, 3, 4, -1, -1, -1, -1, 0, 0, 0, 5, 1, 1, 1, 1]\n"
           "  %s = constant " +
           shares +
           "\n"
           "  %c = qnn.conv2d_nchwc(%q, %w, %m, %o, %s) {dilation=[1,1], groups=1, in_channels=4, "
           "input_scale=0.5, input_zero_point=10, out_layout=\"NCHW4c\", output_scale=0.25, "
           "output_zero_point=3, padding=[0,0], relu=0, stride=[1,1]} : u8[1,1,4,4,4]\n"
           "  return %c\n}\n";
  };
  try {
    lowerGraph(parseGraph(graphWith("i32[2,4] [0, 0, 0, 0, 0, 0, 0, 0]")), LowerOptions{});
    ADD_FAILURE() << "two rows accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::InvalidModel);
    EXPECT_NE(std::string(e.what()).find("are not i32[1,4]"), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
  }
  EXPECT_THROW(parseGraph(graphWith("i32[4] [0, 0, 0, 0]")), Error);
  // The right shape lowers.
  EXPECT_NO_THROW(lowerGraph(parseGraph(graphWith("i32[1,4] [0, 0, 0, 0]")), LowerOptions{}));
}

}  // namespace
}  // namespace kiln::core::lower

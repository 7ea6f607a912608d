// conv2d_winograd_nchwc (Winograd F(2×2, 3×3) and F(4×4, 3×3) in the packed layout): the
// transform matrices, interpreter and JIT against a plain double-precision convolution on
// shapes whose outputs do not divide the tile (partial tiles), odd channel counts, padding 0-2,
// batches, records of the former builder's register-tile knobs; the sketch of winograd_search.h
// (every annotation, its trace, records of other forms refused); and the rounding error on
// ResNet-18's 3×3 layer shapes.
#include <cstdio>
#include <random>

#include "core/lower/gemm_search.h"
#include "core/lower/interpreter.h"
#include "core/lower/schedule.h"
#include "core/lower/schedule_config.h"
#include "core/lower/winograd_search.h"
#include "core/passes/alter_layout.h"
#include "core/tir/printer.h"
#include "core/tir/schedule_analysis.h"
#include "core/tir/trace.h"
#include "core/tir/verify.h"
#include "runtime/error.h"
#include "tests/unit/core/kernels_test_util.h"

namespace kiln::core::lower {
namespace {

using namespace testing;

LowerOptions optionsFor(int lanes) {
  LowerOptions o;
  o.vectorLanes = lanes;
  o.vectorRegisters = kiln::core::lower::vectorRegistersForLanes(lanes);
  return o;
}

/// 1-D F(m, 3) on one tile from the matrices must equal the direct correlation.
TEST(Winograd, MatricesComputeTheCorrelation) {
  for (int m : {2, 4}) {
    const WinogradMatrices& w = winogradMatrices(m);
    ASSERT_EQ(w.alpha, m + 2);
    std::mt19937 rng(5);
    std::uniform_real_distribution<double> dist(-1, 1);
    std::vector<double> d(static_cast<size_t>(w.alpha)), g(3);
    for (double& v : d) v = dist(rng);
    for (double& v : g) v = dist(rng);
    for (int i = 0; i < m; ++i) {
      double y = 0;
      for (int j = 0; j < w.alpha; ++j) {
        double gj = 0, dj = 0;
        for (int k = 0; k < 3; ++k) gj += w.g[static_cast<size_t>(j * 3 + k)] * g[static_cast<size_t>(k)];
        for (int k = 0; k < w.alpha; ++k)
          dj += w.bt[static_cast<size_t>(j * w.alpha + k)] * d[static_cast<size_t>(k)];
        y += w.at[static_cast<size_t>(i * w.alpha + j)] * gj * dj;
      }
      double direct = d[static_cast<size_t>(i)] * g[0] + d[static_cast<size_t>(i + 1)] * g[1] +
                      d[static_cast<size_t>(i + 2)] * g[2];
      EXPECT_NEAR(y, direct, 1e-12) << "m=" << m << " i=" << i;
    }
    // Aᵀ and Bᵀ are dyadic: exact in f32.
    for (double v : w.at) EXPECT_EQ(static_cast<double>(static_cast<float>(v)), v);
    for (double v : w.bt) EXPECT_EQ(static_cast<double>(static_cast<float>(v)), v);
  }
}

struct WinoGraph {
  Graph graph;
  runtime::Tensor x, w, b;
  int64_t inBlock = 1, outBlock = 1;
};

/// conv2d_winograd_nchwc on a packed input, as alter-layout emits it, with `ocVecs` output
/// vectors per weight block.
WinoGraph makeWinograd(const ConvCase& p, int m, int ocVecs, const LowerOptions& options, uint32_t seed,
                       float scale = 1.0f) {
  WinoGraph g;
  g.x = randomTensor({p.n, p.c, p.h, p.w}, seed);
  g.w = randomTensor({p.oc, p.c, 3, 3}, seed + 1, -scale, scale);
  g.b = randomTensor({p.oc}, seed + 2);
  g.outBlock = channelBlock(p.oc, options);
  g.inBlock = channelBlock(p.c, options);
  ValueId x = g.graph.addInput("x", TensorType{DType::Float32, {p.n, p.c / g.inBlock, p.h, p.w, g.inBlock}});
  ValueId u = g.graph.addConstant("u", passes::winogradConvWeight(g.w, m, g.outBlock * ocVecs));
  std::vector<ValueId> inputs = {x, u};
  if (p.bias) inputs.push_back(g.graph.addConstant("b", g.b));
  Attrs attrs{{"padding", std::vector<int64_t>{p.ph, p.pw}},
              {"tile", int64_t{m}},
              {"out_layout", "NCHW" + std::to_string(g.outBlock) + "c"}};
  g.graph.setOutputs({g.graph.add("conv2d_winograd_nchwc", inputs, attrs)});
  return g;
}

ConvCase case3x3(int64_t n, int64_t c, int64_t h, int64_t w, int64_t oc, int64_t pad, bool bias) {
  ConvCase p;
  p.n = n, p.c = c, p.h = h, p.w = w, p.oc = oc, p.kh = 3, p.kw = 3, p.ph = pad, p.pw = pad, p.bias = bias;
  return p;
}

/// Runs the Winograd kernel (with `knobs` as its tuning record when given) and compares.
void checkWinograd(const ConvCase& p, int m, int lanes, bool interpreter, int ocVecs = 1,
                   const Knobs& knobs = {}, uint32_t seed = 7) {
  SCOPED_TRACE(p.str() + " m=" + std::to_string(m) + " lanes=" + std::to_string(lanes) + " " +
               knobsText(knobs));
  LowerOptions options = optionsFor(lanes);
  WinoGraph g = makeWinograd(p, m, ocVecs, options, seed);
  if (!knobs.empty()) {
    auto configs = std::make_shared<ScheduleConfigs>();
    configs->byKey[tuneKeyOf(
        "conv2d_winograd_nchwc", g.graph.node(0).attrs,
        {g.graph.type(g.graph.node(0).inputs[0]), g.graph.type(g.graph.node(0).inputs[1])}, {})] = knobs;
    options.schedules = configs;
    // A record of the former builder's knobs is read as the sketch annotation of its loop order
    // (the tiles here fit with either order) and the nearest tile that merges; a sketch's record is
    // its annotation.
    Knobs used = knobs;
    if (!knobs.count("mi")) {
      const Node& node = g.graph.node(0);
      std::optional<WinogradShape> shape =
          winogradShape(g.graph.type(node.inputs[0]).shape, g.graph.type(node.inputs[1]).shape,
                        g.graph.type(node.outputs[0]).shape, m, {p.ph, p.pw}, p.bias);
      ASSERT_TRUE(shape.has_value());
      std::optional<Knobs> annotation = winogradAnnotationOf(*shape, knobs, options.vectorRegisters);
      ASSERT_TRUE(annotation.has_value());
      used = *annotation;
      EXPECT_EQ(used.at("po"), knobs.at("oc_outer"));
      EXPECT_TRUE(winogradSketchMerges(*shape, used)) << knobsText(used);
    }
    tir::PrimFunc f = lowerNode(g.graph, 0, "wino", options);
    EXPECT_EQ(f.attrs["schedule"], knobsText(used));
    EXPECT_EQ(f.attrs.count("trace"), 1u);
  }
  std::vector<float> expected = referenceConv(p, g.x, g.w, p.bias ? &g.b : nullptr);
  runtime::Tensor xp = passes::packChannels(g.x, g.inBlock);
  for (Engine e : {Engine::Interpreter, Engine::Jit}) {
    if (e == Engine::Interpreter && !interpreter) continue;
    auto out = evalGraph(g.graph, {xp}, e, options);
    ASSERT_EQ(out.size(), 1u);
    EXPECT_TRUE(allClose(passes::unpackChannels(out[0]), expected, 2e-4))
        << (e == Engine::Jit ? "jit" : "interpreter");
  }
}

TEST(KernelsWinograd, DivisibleAndPartialTiles) {
  for (int m : {2, 4}) {
    checkWinograd(case3x3(1, 16, 8, 8, 32, 1, true), m, 16, true);       // tiles divide the output
    checkWinograd(case3x3(1, 8, 9, 11, 16, 1, true), m, 8, true);        // partial bottom and right tiles
    checkWinograd(case3x3(2, 8, 7, 6, 8, 1, false), m, 8, false);        // batch 2, tiles span images
    checkWinograd(case3x3(1, 16, 13, 5, 32, 0, true), m, 16, false, 2);  // no padding, two vectors
    checkWinograd(case3x3(1, 4, 6, 9, 8, 2, true), m, 4, true);          // padding 2
  }
}

TEST(KernelsWinograd, OddChannelCounts) {
  // 3 and 5 input channels (block 1), 12 outputs (block 4 with 16 lanes), 7 outputs (block 1).
  checkWinograd(case3x3(1, 3, 10, 10, 12, 1, true), 4, 16, true);
  checkWinograd(case3x3(1, 5, 7, 9, 7, 1, true), 2, 8, true);
  checkWinograd(case3x3(2, 5, 5, 5, 12, 1, false), 4, 8, false, 3);
}

// Records of the hand-written builder that the sketch replaced (ow_block, oc_outer, unroll) build
// the sketch with the record's tile and order, and still compute the convolution.
TEST(KernelsWinograd, RecordsOfTheFormerBuilderBuildTheirTileAsASketch) {
  ConvCase p = case3x3(1, 16, 11, 10, 32, 1, true);
  for (int m : {2, 4}) {
    for (Knobs k : {Knobs{{"oc_vecs", 2}, {"ow_block", 5}, {"oc_outer", 1}, {"unroll", 4}},
                    Knobs{{"oc_vecs", 2}, {"ow_block", 3}, {"oc_outer", 0}, {"unroll", 2}},
                    Knobs{{"oc_vecs", 1}, {"ow_block", 1}, {"oc_outer", 0}, {"unroll", 1}},
                    Knobs{{"oc_vecs", 4}, {"ow_block", 2}, {"oc_outer", 1}, {"unroll", 1}}}) {
      k["algo"] = m;
      k["flatten"] = 0;
      checkWinograd(p, m, 8, k.at("ow_block") == 3, static_cast<int>(k.at("oc_vecs")), k);
    }
  }
  // The builder ran a narrower last block; the sketch merges each block's output transform only
  // when its tile divides the tiles, so a record's tile becomes the nearest that does (the
  // narrower first): 9 tiles of F(4×4) on this 11×10 output take 5 as 3, 2 as 1; the 30 of
  // F(2×2) take 5, 3 and 2 as they are, 4 as 3.
  LowerOptions options = optionsFor(8);
  WinoGraph g4 = makeWinograd(p, 4, 1, options, 7), g2 = makeWinograd(p, 2, 1, options, 7);
  auto shapeOf = [&](const WinoGraph& g, int m) {
    const Node& node = g.graph.node(0);
    return *winogradShape(g.graph.type(node.inputs[0]).shape, g.graph.type(node.inputs[1]).shape,
                          g.graph.type(node.outputs[0]).shape, m, {p.ph, p.pw}, p.bias);
  };
  auto tileOf = [&](const WinogradShape& s, int64_t block) {
    Knobs record{{"algo", s.m}, {"oc_vecs", 1}, {"ow_block", block}, {"oc_outer", 0}};
    return winogradAnnotationOf(s, record, options.vectorRegisters)->at("mi");
  };
  const WinogradShape s4 = shapeOf(g4, 4), s2 = shapeOf(g2, 2);
  ASSERT_EQ(s4.tiles, 9);
  ASSERT_EQ(s2.tiles, 30);
  EXPECT_EQ(tileOf(s4, 5), 3);
  EXPECT_EQ(tileOf(s4, 2), 1);
  EXPECT_EQ(tileOf(s4, 3), 3);
  EXPECT_EQ(tileOf(s2, 5), 5);
  EXPECT_EQ(tileOf(s2, 4), 3);
  EXPECT_EQ(tileOf(s2, 2), 2);
}

TEST(KernelsWinograd, RandomShapesMatchReference) {
  std::mt19937 rng(77);
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  for (int i = 0; i < 16; ++i) {
    ConvCase p =
        case3x3(pick(1, 2), pick(1, 24), pick(1, 14), pick(1, 14), pick(1, 40), pick(0, 2), pick(0, 1) == 1);
    while (p.oh() <= 0) ++p.h;
    while (p.ow() <= 0) ++p.w;
    int lanes = std::vector<int>{4, 8, 16}[i % 3];
    checkWinograd(p, i % 2 == 0 ? 4 : 2, lanes, i % 4 == 0, 1, {}, 300 + static_cast<uint32_t>(i));
  }
}

// The sketch of winograd_search.h: annotations of both tiles, every register tile and order, a
// tail loop, partial tiles, batches, padding 0–2, several weight blocks and lane counts compute
// the convolution in the interpreter and as JIT code, and the kernel's trace is the tuner's.
TEST(WinogradSearch, SketchAnnotationsMatchReference) {
  struct Case {
    ConvCase p;
    int lanes, ocVecs;
  };
  int mergedDefaults = 0;
  for (const Case& c : {Case{case3x3(1, 16, 8, 8, 32, 1, true), 16, 1}, Case{case3x3(1, 8, 9, 11, 16, 1, true), 8, 2},
                        Case{case3x3(2, 8, 7, 6, 8, 1, false), 8, 1}, Case{case3x3(1, 4, 6, 9, 8, 2, true), 4, 2},
                        Case{case3x3(1, 5, 7, 9, 12, 0, true), 4, 3},
                        Case{case3x3(1, 32, 14, 14, 32, 1, true), 8, 2}}) {  // parallel loops
    for (int m : {2, 4}) {
      LowerOptions options = optionsFor(c.lanes);
      WinoGraph g = makeWinograd(c.p, m, c.ocVecs, options, 5);
      const Shape& xs = g.graph.type(g.graph.node(0).inputs[0]).shape;
      auto s = winogradShape(xs, g.graph.type(g.graph.node(0).inputs[1]).shape,
                             g.graph.type(g.graph.node(0).outputs[0]).shape, m, {c.p.ph, c.p.pw}, c.p.bias);
      ASSERT_TRUE(s.has_value());
      std::vector<Knobs> all = winogradSketchAnnotations(*s, options.vectorRegisters);
      ASSERT_FALSE(all.empty());
      // The smallest and the largest tile of each order, and the default.
      std::vector<Knobs> picked = {all.front(), all.back(), all[all.size() / 2 - 1], all[all.size() / 2],
                                   winogradSketchDefaultKnobs(*s, options.vectorRegisters)};
      for (const Knobs& knobs : picked) checkWinograd(c.p, m, c.lanes, true, c.ocVecs, knobs, 5);
      // The kernel's trace is the one the tuner builds from the key.
      const std::string key = packedConvTuneKey(convGeometry("conv2d", Attrs{{"padding", std::vector<int64_t>{c.p.ph, c.p.pw}}},
                                                             {TensorType{DType::Float32, {c.p.n, c.p.c, c.p.h, c.p.w}},
                                                              TensorType{DType::Float32, {c.p.oc, c.p.c, 3, 3}}}),
                                                DType::Float32);
      auto configs = std::make_shared<ScheduleConfigs>();
      configs->byKey[key] = picked.back();
      LowerOptions tuned = options;
      tuned.schedules = configs;
      const std::string trace = lowerNode(g.graph, 0, "wino", tuned).attrs["trace"];
      EXPECT_EQ(trace, sketchTrace(key, picked.back(), c.lanes, options.vectorRegisters).str()) << key;
      // Where a tile of at least half the registers' tallest divides the tiles, the default merges
      // the output transform into the tile blocks, which run in parallel when the kernel is large.
      if (winogradSketchMerges(*s, picked.back())) {
        EXPECT_NE(trace.find("merge("), std::string::npos) << trace;
        if (c.p.c == 32) {
          EXPECT_TRUE(trace.find("parallel(p_o)") != std::string::npos ||
                      trace.find("parallel(g_p_o_fused)") != std::string::npos)
              << trace;
        }
        ++mergedDefaults;
      }
    }
  }
  EXPECT_GE(mergedDefaults, 8);  // of 12
}

// Every annotation of one shape applies, verifies, replays from its trace and computes the
// convolution in the interpreter; a record of the other tile, another packing or the direct
// sketch is ignored (the untuned kernel: the sketch's default annotation), and a record of
// builder knobs selects the hand-written builder.
TEST(WinogradSearch, EveryAnnotationReplaysAndForeignRecordsAreIgnored) {
  ConvCase p = case3x3(1, 8, 6, 7, 16, 1, true);
  LowerOptions options = optionsFor(8);
  WinoGraph g = makeWinograd(p, 2, 1, options, 9);
  auto s = winogradShape({1, 1, 6, 7, 8}, {2, 4, 4, 8, 8}, {1, 2, 6, 7, 8}, 2, {1, 1}, true);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->tiles, 12);
  const tir::PrimFunc plain = winogradPlainFunc(*s);
  runtime::Tensor x = passes::packChannels(g.x, 8), b = g.b;
  runtime::Tensor u = *g.graph.value(g.graph.node(0).inputs[1]).constant;
  std::vector<float> want = referenceConv(p, g.x, g.w, &g.b);
  int checked = 0, merged = 0;
  for (const Knobs& knobs : winogradSketchAnnotations(*s, options.vectorRegisters)) {
    SCOPED_TRACE(knobsText(knobs));
    merged += winogradSketchMerges(*s, knobs);
    tir::Schedule sched(plain);
    applyWinogradSketch(sched, *s, knobs, options.vectorRegisters);
    EXPECT_EQ(tir::verifyPrimFunc(sched.func()), std::vector<std::string>{});
    EXPECT_EQ(tir::print(tir::Trace::parse(sched.trace().str()).apply(plain)), tir::print(sched.func()));
    // The static dependence proofs decide as the replay does: the same function without them.
    tir::schedule_detail::setStaticProofs(false);
    tir::Schedule replayed(plain);
    std::string replayError;
    try {
      applyWinogradSketch(replayed, *s, knobs, options.vectorRegisters);
    } catch (const Error& e) {
      replayError = e.what();
    }
    tir::schedule_detail::setStaticProofs(true);
    EXPECT_EQ(replayError, "");
    EXPECT_EQ(tir::print(replayed.func()), tir::print(sched.func()));
    runtime::Tensor y = runtime::Tensor::zeros(DType::Float32, {1, 2, 6, 7, 8});
    interpret(sched.func(), {x.data<float>(), u.data<float>(), b.data<float>(), y.data<float>()});
    EXPECT_TRUE(allClose(passes::unpackChannels(y), want, 2e-4));
    if (HasFailure()) return;
    ++checked;
  }
  EXPECT_GE(checked, 2 * 12);
  EXPECT_GT(merged, 0);  // mi dividing the 12 tiles
  EXPECT_LT(merged, checked);

  // Untuned: the sketch's default annotation. Records that are not this kernel's sketch leave it so.
  const tir::PrimFunc untuned = lowerNode(g.graph, 0, "wino", options);
  EXPECT_EQ(untuned.attrs.at("schedule"), knobsText(winogradSketchDefaultKnobs(*s, options.vectorRegisters)));
  EXPECT_EQ(untuned.attrs.count("trace"), 1u);
  auto withRecord = [&](const Knobs& knobs) {
    auto configs = std::make_shared<ScheduleConfigs>();
    configs->byKey[untuned.attrs.at("tune_key")] = knobs;
    LowerOptions tuned = options;
    tuned.schedules = configs;
    return lowerNode(g.graph, 0, "wino", tuned);
  };
  for (const Knobs& foreign : {Knobs{{"algo", 4}, {"mi", 3}, {"po", 1}, {"oc_vecs", 1}},
                               Knobs{{"algo", 2}, {"mi", 3}, {"po", 1}, {"oc_vecs", 2}},
                               Knobs{{"mi", 3}, {"po", 1}, {"oc_vecs", 1}}}) {
    SCOPED_TRACE(knobsText(foreign));
    EXPECT_EQ(withRecord(foreign).attrs.at("schedule"), untuned.attrs.at("schedule"));
  }
  // Knobs of the former builder for this tile and packing: the sketch with the record's tile (and
  // the default's order when the record has none); a tile that does not fit: the default.
  const int64_t po = winogradSketchDefaultKnobs(*s, options.vectorRegisters).at("po");
  const tir::PrimFunc builder = withRecord({{"algo", 2}, {"oc_vecs", 1}, {"ow_block", 3}});
  EXPECT_EQ(builder.attrs.at("schedule"), knobsText({{"algo", 2}, {"mi", 3}, {"po", po}, {"oc_vecs", 1}}));
  EXPECT_EQ(builder.attrs.count("trace"), 1u);
  EXPECT_EQ(withRecord({{"algo", 2}, {"oc_vecs", 1}, {"ow_block", 99}, {"oc_outer", 1}}).attrs.at("schedule"),
            untuned.attrs.at("schedule"));
}

// ResNet's 3×3 layers and VGG's 224×224 one (AVX-512: 16 lanes, 32 registers) schedule with both
// loop orders within the replay budget: the dependence checks of reorder, merge, store_at and
// parallel prove most steps statically (the replay of the merge alone would exceed the budget
// on the 224×224 layer), and replay only the loops that touch written buffers.
TEST(WinogradSearch, ResNetLayersScheduleWithinTheReplayBudget) {
  const std::string keys[] = {"n=1,c=64,h=56,w=56,o=64", "n=1,c=128,h=28,w=28,o=128", "n=1,c=256,h=14,w=14,o=256",
                              "n=1,c=512,h=7,w=7,o=512", "n=1,c=64,h=224,w=224,o=64"};
  for (const std::string& k : keys) {
    const std::string key = "conv2d_nchwc:" + k + ",kh=3,kw=3,sh=1,sw=1,ph=1,pw=1,dh=1,dw=1,g=1:f32";
    for (int m : {2, 4}) {
      auto s = winogradShapeOfKey(key, m, 2, 16);
      ASSERT_TRUE(s.has_value()) << key;
      Knobs knobs = winogradSketchDefaultKnobs(*s, 32);
      for (int64_t po : {0, 1}) {
        knobs["po"] = po;
        SCOPED_TRACE(key + " " + knobsText(knobs));
        tir::Schedule sched(winogradPlainFunc(*s));
        EXPECT_NO_THROW(applyWinogradSketch(sched, *s, knobs, 32));
      }
    }
  }
}

// The rounding error on ResNet-18's 3×3 stride-1 layers, inputs U(−1, 1) and weights scaled by
// 1/√(fan-in) so outputs are O(1) (|y| ≤ 3.3), against a double-precision reference. Printed for
// the record. F(2×2) stays below 2e-6; F(4×4) with the points 1/2, −2 below 1.4e-5, where ±1/2
// gave 1.5e-5 to 3.2e-5: the bound 2e-5 keeps the better points (stacked layers add their
// errors, and the deepest ResNets exceeded 1e-3 with ±1/2).
TEST(KernelsWinograd, AccuracyOnResNet18Shapes) {
  LowerOptions options = optionsFor(16);
  struct Layer {
    int64_t c, hw;
  };
  for (Layer layer : {Layer{64, 56}, Layer{128, 28}, Layer{256, 14}, Layer{512, 7}}) {
    ConvCase p = case3x3(1, layer.c, layer.hw, layer.hw, layer.c, 1, true);
    float scale = 1.0f / std::sqrt(static_cast<float>(layer.c * 9)) * std::sqrt(3.0f);
    for (int m : {2, 4}) {
      WinoGraph g = makeWinograd(p, m, 2, options, 11, scale);
      std::vector<float> expected = referenceConv(p, g.x, g.w, &g.b);
      runtime::Tensor out = passes::unpackChannels(
          evalGraph(g.graph, {passes::packChannels(g.x, g.inBlock)}, Engine::Jit, options)[0]);
      double maxAbs = 0, maxRel = 0, maxRef = 0;
      for (size_t i = 0; i < expected.size(); ++i) {
        double e = expected[i], d = std::fabs(out.data<float>()[i] - e);
        maxAbs = std::max(maxAbs, d);
        maxRel = std::max(maxRel, d / std::max(1.0, std::fabs(e)));
        maxRef = std::max(maxRef, std::fabs(e));
      }
      std::printf(
          "[ accuracy ] F(%dx%d,3x3) c=o=%ld %ldx%ld: max|y|=%.2f max abs err=%.2e max rel err=%.2e\n", m, m,
          static_cast<long>(layer.c), static_cast<long>(layer.hw), static_cast<long>(layer.hw), maxRef,
          maxAbs, maxRel);
      EXPECT_LT(maxAbs, m == 2 ? 5e-6 : 2e-5) << "m=" << m << " c=" << layer.c;
    }
  }
}

}  // namespace
}  // namespace kiln::core::lower

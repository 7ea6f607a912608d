// alter-layout (O3): which ops move to the packed layout, where transforms go, and that the
// rewritten graph computes the same outputs as the original (interpreter and JIT), on
// ResNet-like, MobileNet-like and EfficientNet-like (squeeze-excitation) blocks and on random
// conv chains with channel counts that are not multiples of the block.
#include <random>

#include "core/ir/printer.h"
#include "core/lower/schedule.h"
#include "core/lower/schedule_config.h"
#include "core/passes/alter_layout.h"
#include "core/passes/pass_manager.h"
#include "runtime/error.h"
#include "tests/unit/core/kernels_test_util.h"

namespace kiln::core::passes {
namespace {

using namespace lower::testing;
using lower::LowerOptions;

Attrs conv(int64_t stride, int64_t pad, int64_t groups = 1) {
  return Attrs{{"stride", std::vector<int64_t>{stride, stride}},
               {"padding", std::vector<int64_t>{pad, pad}},
               {"groups", groups}};
}

int countOps(const Graph& g, const std::string& op) {
  int n = 0;
  for (const Node& node : g.nodes()) n += node.op == op;
  return n;
}

LowerOptions optionsFor(int lanes) {
  LowerOptions o;
  o.vectorLanes = lanes;
  o.vectorRegisters = kiln::core::lower::vectorRegistersForLanes(lanes);
  return o;
}

/// Runs `g` before and after alterLayout(lanes) on random inputs and compares.
void expectSameOutputs(const Graph& original, int lanes, bool interpreter = true) {
  Graph altered = original;
  ASSERT_TRUE(alterLayout(altered, AlterLayoutOptions{lanes, nullptr}));
  std::vector<runtime::Tensor> inputs;
  uint32_t seed = 40;
  for (ValueId v : original.inputs()) inputs.push_back(randomTensor(original.type(v).shape, seed++));
  auto expected = evalGraph(original, inputs, Engine::Jit, optionsFor(lanes));
  for (Engine e : {Engine::Interpreter, Engine::Jit}) {
    if (e == Engine::Interpreter && !interpreter) continue;
    auto actual = evalGraph(altered, inputs, e, optionsFor(lanes));
    ASSERT_EQ(actual.size(), expected.size());
    for (size_t i = 0; i < actual.size(); ++i) {
      EXPECT_EQ(actual[i].shape(), expected[i].shape());
      EXPECT_TRUE(allClose(actual[i], toVector(expected[i]), 1e-4)) << "output " << i << "\n" << printGraph(altered);
    }
  }
}

/// conv-bias-relu ×2 with a residual add, global pool, flatten, classifier.
Graph resnetBlock(int64_t c) {
  Graph g;
  ValueId x = g.addInput("x", TensorType{DType::Float32, {1, c, 10, 10}});
  ValueId w1 = g.addConstant("w1", randomTensor({c, c, 3, 3}, 1));
  ValueId b1 = g.addConstant("b1", randomTensor({c, 1, 1}, 2));
  ValueId w2 = g.addConstant("w2", randomTensor({c, c, 3, 3}, 3));
  ValueId y = g.add("relu", {g.add("add", {g.add("conv2d", {x, w1}, conv(1, 1)), b1})});
  y = g.add("conv2d", {y, w2, g.addConstant("b2", randomTensor({c}, 4))}, conv(1, 1));
  y = g.add("relu", {g.add("add", {y, x})});  // residual: the plain input joins a packed value
  y = g.add("adaptive_avg_pool2d", {y}, Attrs{{"output_size", std::vector<int64_t>{1, 1}}});
  y = g.add("reshape", {y}, Attrs{{"shape", std::vector<int64_t>{1, c}}});
  y = g.add("dense", {y, g.addConstant("fc", randomTensor({10, c}, 5))});
  g.setOutputs({y});
  return g;
}

TEST(AlterLayout, ResNetBlockStaysPackedUntilFlatten) {
  Graph g = resnetBlock(32);
  Graph altered = g;
  PassCounters counters;
  ASSERT_TRUE(alterLayout(altered, AlterLayoutOptions{16, nullptr}, &counters));
  EXPECT_EQ(countOps(altered, "conv2d_nchwc"), 2);
  EXPECT_EQ(countOps(altered, "conv2d"), 0);
  // One transform in (x, shared by the conv and the residual add), one out (before reshape).
  EXPECT_EQ(countOps(altered, "layout_transform"), 2) << printGraph(altered);
  EXPECT_EQ(counters["convs"], 2);
  EXPECT_EQ(counters["transforms"], 2);
  std::string text = printGraph(altered);
  EXPECT_NE(text.find("out_layout=\"NCHW16c\""), std::string::npos) << text;
  EXPECT_NE(text.find("{output_size=[1,1]} : f32[1,2,1,1,16]"), std::string::npos) << text;
  expectSameOutputs(g, 16);
  expectSameOutputs(g, 8);
}

TEST(AlterLayout, NothingToDoWithoutConstantWeights) {
  Graph g;
  ValueId x = g.addInput("x", TensorType{DType::Float32, {1, 8, 6, 6}});
  ValueId w = g.addInput("w", TensorType{DType::Float32, {8, 8, 3, 3}});
  g.setOutputs({g.add("relu", {g.add("conv2d", {x, w}, conv(1, 1))})});
  Graph altered = g;
  EXPECT_FALSE(alterLayout(altered, AlterLayoutOptions{16, nullptr}));
  EXPECT_TRUE(altered == g);
}

TEST(AlterLayout, MobileNetInvertedResidual) {
  // expand 1×1 (24 → 144, block 8 vs 16), depthwise 3×3 stride 1, project 1×1, residual, relu6.
  Graph g;
  ValueId x = g.addInput("x", TensorType{DType::Float32, {1, 24, 9, 9}});
  ValueId y = g.add("conv2d", {x, g.addConstant("we", randomTensor({144, 24, 1, 1}, 1)),
                               g.addConstant("be", randomTensor({144}, 2))}, conv(1, 0));
  y = g.add("clamp", {y}, Attrs{{"min", 0.0}, {"max", 6.0}});
  y = g.add("conv2d", {y, g.addConstant("wd", randomTensor({144, 1, 3, 3}, 3))}, conv(1, 1, 144));
  y = g.add("clamp", {y}, Attrs{{"min", 0.0}, {"max", 6.0}});
  y = g.add("conv2d", {y, g.addConstant("wp", randomTensor({24, 144, 1, 1}, 4))}, conv(1, 0));
  y = g.add("add", {y, x});
  g.setOutputs({y});
  Graph altered = g;
  ASSERT_TRUE(alterLayout(altered, AlterLayoutOptions{16, nullptr}));
  EXPECT_EQ(countOps(altered, "conv2d_nchwc"), 3);
  expectSameOutputs(g, 16);
}

TEST(AlterLayout, SqueezeExcitationAndConcat) {
  // EfficientNet's SE: pool → 1×1 (40 → 10) → silu → 1×1 (10 → 40) → sigmoid → mul; then a
  // channel concat of two packed branches (blocks 8 and 8 → 80 channels, block 16).
  Graph g;
  ValueId x = g.addInput("x", TensorType{DType::Float32, {1, 40, 7, 7}});
  ValueId f = g.add("silu", {g.add("conv2d", {x, g.addConstant("w0", randomTensor({40, 40, 1, 1}, 1))}, conv(1, 0))});
  ValueId s = g.add("adaptive_avg_pool2d", {f}, Attrs{{"output_size", std::vector<int64_t>{1, 1}}});
  s = g.add("silu", {g.add("conv2d", {s, g.addConstant("w1", randomTensor({10, 40, 1, 1}, 2)),
                                      g.addConstant("b1", randomTensor({10}, 3))}, conv(1, 0))});
  s = g.add("sigmoid", {g.add("conv2d", {s, g.addConstant("w2", randomTensor({40, 10, 1, 1}, 4))}, conv(1, 0))});
  ValueId m = g.add("mul", {f, s});
  ValueId c = g.add("concat", {m, f}, Attrs{{"axis", int64_t{1}}});
  g.setOutputs({c, m});
  Graph altered = g;
  ASSERT_TRUE(alterLayout(altered, AlterLayoutOptions{16, nullptr}));
  EXPECT_EQ(countOps(altered, "mul"), 1);
  expectSameOutputs(g, 16);
  expectSameOutputs(g, 4, false);
}

TEST(AlterLayout, RandomConvChainsMatchOriginal) {
  std::mt19937 rng(5);
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  for (int t = 0; t < 8; ++t) {
    Graph g;
    int64_t c = pick(1, 40), h = pick(3, 13), w = pick(3, 13);
    ValueId y = g.addInput("x", TensorType{DType::Float32, {pick(1, 2), c, h, w}});
    for (int layer = 0; layer < 3; ++layer) {
      bool depthwise = pick(0, 3) == 0;
      int64_t oc = depthwise ? c : pick(1, 40), k = std::vector<int64_t>{1, 3, 5}[pick(0, 2)];
      int64_t stride = pick(1, 2), pad = pick(0, k / 2);
      if (h + 2 * pad < k || w + 2 * pad < k) k = 1, pad = 0;
      ValueId wt = g.addConstant("w", randomTensor({oc, depthwise ? 1 : c, k, k}, pick(1, 1000)));
      y = g.add("conv2d", {y, wt, g.addConstant("b", randomTensor({oc}, 7))}, conv(stride, pad, depthwise ? c : 1));
      if (pick(0, 1)) y = g.add("mul", {y, g.addConstant("s", randomTensor({oc, 1, 1}, 8))});
      y = g.add(pick(0, 1) ? "relu" : "sigmoid", {y});
      if (pick(0, 2) == 0) y = g.add("max_pool2d", {y}, Attrs{{"kernel", std::vector<int64_t>{2, 2}}});
      c = oc;
      h = g.type(y).shape[2], w = g.type(y).shape[3];
      if (h < 2 || w < 2) break;
    }
    g.setOutputs({y});
    SCOPED_TRACE(printGraph(g));
    expectSameOutputs(g, std::vector<int>{4, 8, 16}[t % 3], t % 3 == 0);
  }
}

TEST(AlterLayout, PackingHelpersRoundTrip) {
  runtime::Tensor x = randomTensor({2, 24, 3, 5}, 1);
  runtime::Tensor back = unpackChannels(packChannels(x, 8));
  EXPECT_TRUE(allClose(back, toVector(x), 0));
  runtime::Tensor w = randomTensor({32, 16, 3, 3}, 2);
  runtime::Tensor p = packConvWeight(w, 8, 16, false);
  EXPECT_EQ(p.shape(), (Shape{2, 2, 3, 3, 8, 16}));
  // w[o=17, i=9, kh=1, kw=2] → p[1, 1, 1, 2, 1, 1]
  EXPECT_EQ(p.data<float>()[((((1 * 2 + 1) * 3 + 1) * 3 + 2) * 8 + 1) * 16 + 1],
            w.data<float>()[((17 * 16 + 9) * 3 + 1) * 3 + 2]);
}

TEST(AlterLayout, WinogradWeightIsGgGtPerChannelPairInGemmOrder) {
  runtime::Tensor w = randomTensor({32, 5, 3, 3}, 3);
  for (int m : {2, 4}) {
    const lower::WinogradMatrices& mat = lower::winogradMatrices(m);
    int64_t a = m + 2;
    runtime::Tensor u = winogradConvWeight(w, m, 16);
    ASSERT_EQ(u.shape(), (Shape{2, a, a, 5, 16}));
    for (int64_t o : {0, 17, 31})
      for (int64_t i : {0, 4})
        for (int64_t x = 0; x < a; ++x)
          for (int64_t y = 0; y < a; ++y) {
            double expected = 0;
            for (int k = 0; k < 3; ++k)
              for (int l = 0; l < 3; ++l)
                expected += mat.g[static_cast<size_t>(x * 3 + k)] * w.data<float>()[((o * 5 + i) * 3 + k) * 3 + l] *
                            mat.g[static_cast<size_t>(y * 3 + l)];
            float got = u.data<float>()[((((o / 16) * a + x) * a + y) * 5 + i) * 16 + o % 16];
            EXPECT_NEAR(got, expected, 1e-6) << "m=" << m << " o=" << o << " i=" << i << " at " << x << "," << y;
          }
  }
}

// A tuning record with algo=2|4 makes alter-layout emit conv2d_winograd_nchwc with the
// transformed weight; through fusion its epilogue (bias, residual add, relu) is the direct
// conv's, and the outputs match the original graph. Non-eligible convs ignore the knob.
TEST(AlterLayout, WinogradRecordRewritesEligibleConvsOnly) {
  for (int m : {2, 4}) {
    Graph g = resnetBlock(16);
    Graph strided = g;
    auto configs = std::make_shared<lower::ScheduleConfigs>();
    for (const Node& node : g.nodes()) {
      if (node.op != "conv2d") continue;
      std::vector<TensorType> in = {g.type(node.inputs[0]), g.type(node.inputs[1])};
      std::string key = lower::packedConvTuneKey(lower::convGeometry("conv2d", node.attrs, in), DType::Float32);
      configs->byKey[key] = {{"algo", m}, {"oc_vecs", 1}, {"ow_block", 4}, {"flatten", 0}, {"oc_outer", 0}, {"unroll", 2}};
    }
    AlterLayoutOptions options{8, configs};
    Graph altered = g;
    ASSERT_TRUE(alterLayout(altered, options));
    EXPECT_EQ(countOps(altered, "conv2d_winograd_nchwc"), 2) << printGraph(altered);
    EXPECT_EQ(countOps(altered, "conv2d_nchwc"), 0);

    // Fused (conv + bias + add + relu groups) and lowered with the same records.
    passes::PassManagerOptions pm;
    pm.schedules = configs;
    Graph fused = g;
    PassManager(parsePipeline("alter-layout{lanes=8},fuse-ops"), pm).run(fused);
    LowerOptions lowerOpts = optionsFor(8);
    lowerOpts.schedules = configs;
    std::vector<runtime::Tensor> inputs = {randomTensor(g.type(g.inputs()[0]).shape, 9)};
    auto expected = evalGraph(g, inputs, Engine::Jit, optionsFor(8));
    lower::LoweredModule module = lower::lowerGraph(fused, lowerOpts);
    int winograd = 0;
    for (const auto& f : module.funcs) {
      auto it = f.attrs.find("schedule");
      if (it != f.attrs.end() && it->second.find("algo=" + std::to_string(m)) != std::string::npos) ++winograd;
    }
    EXPECT_EQ(winograd, 2);
    for (Engine e : {Engine::Interpreter, Engine::Jit}) {
      auto actual = evalGraph(fused, inputs, e, lowerOpts);
      EXPECT_TRUE(allClose(actual[0], toVector(expected[0]), 2e-4)) << "m=" << m;
    }
  }
  // A stride-2 3×3 conv is not eligible: the record's algo is ignored, the conv stays direct.
  Graph g;
  ValueId x = g.addInput("x", TensorType{DType::Float32, {1, 8, 9, 9}});
  ValueId w = g.addConstant("w", randomTensor({16, 8, 3, 3}, 1));
  g.setOutputs({g.add("conv2d", {x, w}, conv(2, 1))});
  auto configs = std::make_shared<lower::ScheduleConfigs>();
  configs->byKey[lower::packedConvTuneKey(lower::convGeometry("conv2d", g.node(0).attrs, {g.type(x), g.type(w)}),
                                          DType::Float32)] = {{"algo", 4}, {"oc_vecs", 1}};
  AlterLayoutOptions options{8, configs};
  ASSERT_TRUE(alterLayout(g, options));
  EXPECT_EQ(countOps(g, "conv2d_nchwc"), 1);
  EXPECT_EQ(countOps(g, "conv2d_winograd_nchwc"), 0);
}

/// One 3×3 convolution (stride 1, padding 1) of `channels` to `channels` on a `size`×`size` image,
/// with random weights.
Graph conv3x3(int64_t channels, int64_t size, uint32_t seed) {
  Graph g;
  ValueId x = g.addInput("x", TensorType{DType::Float32, {1, channels, size, size}});
  ValueId w = g.addConstant("w", randomTensor({channels, channels, 3, 3}, seed));
  g.setOutputs({g.add("conv2d", {x, w}, conv(1, 1))});
  return g;
}

// The option `winograd` caps the tile for the heuristic and for records alike: ResNet's 56×56×64
// 3×3 conv runs as F(4×4) by default, F(2×2) under winograd=2, direct under 0; other values are
// refused with one line.
TEST(AlterLayout, WinogradOptionCapsTheTile) {
  auto build = [] { return conv3x3(64, 56, 3); };
  auto tileOf = [](const Graph& g) -> int64_t {
    for (const Node& n : g.nodes())
      if (n.op == "conv2d_winograd_nchwc") return n.attrs.getInt("tile");
    return 0;
  };
  for (auto [cap, expected] : std::vector<std::pair<int, int>>{{4, 4}, {2, 2}, {0, 0}}) {
    Graph g = build();
    ASSERT_TRUE(alterLayout(g, AlterLayoutOptions{8, nullptr, cap}));
    EXPECT_EQ(tileOf(g), expected) << "winograd=" << cap;
    EXPECT_EQ(countOps(g, "conv2d_nchwc"), expected == 0 ? 1 : 0);
    // Through the pipeline text, as --winograd writes it.
    Graph viaText = build();
    PassManager(parsePipeline("alter-layout{lanes=8,winograd=" + std::to_string(cap) + "}")).run(viaText);
    EXPECT_EQ(tileOf(viaText), expected) << "winograd=" << cap;
  }
  // A record asking for F(4×4) is capped too.
  Graph g = build();
  auto configs = std::make_shared<lower::ScheduleConfigs>();
  configs->byKey[lower::packedConvTuneKey(lower::convGeometry("conv2d", g.node(0).attrs, {g.type(g.inputs()[0]), g.type(g.node(0).inputs[1])}),
                                          DType::Float32)] = {{"algo", 4}, {"oc_vecs", 1}};
  ASSERT_TRUE(alterLayout(g, AlterLayoutOptions{8, configs, 2}));
  EXPECT_EQ(tileOf(g), 2);
  Graph bad = build();
  EXPECT_THROW(PassManager(parsePipeline("alter-layout{winograd=3}")).run(bad), kiln::Error);
}

// A Winograd convolution's register tile runs along its list of output tiles, so they decide the
// weight packing: ResNet's 7×7×512 3×3 conv at F(2×2) has 16 tiles, which fill a tile of 2
// vectors × 8 tiles (measured: 11–13 % less time than 4 × 6 in ResNet-18 and -50); run direct,
// its 7 columns leave accumulators for 4 vectors.
TEST(AlterLayout, WinogradTilesDecideTheWeightPacking) {
  auto build = [] { return conv3x3(512, 7, 5); };
  auto packedChannels = [](const Graph& g, const std::string& op) -> int64_t {
    for (const Node& n : g.nodes())
      if (n.op == op) return g.type(n.inputs[1]).shape.back();
    return 0;
  };
  Graph winograd = build();
  ASSERT_TRUE(alterLayout(winograd, AlterLayoutOptions{16, nullptr, 4}));
  EXPECT_EQ(packedChannels(winograd, "conv2d_winograd_nchwc"), 2 * 16) << printGraph(winograd);
  Graph direct = build();
  ASSERT_TRUE(alterLayout(direct, AlterLayoutOptions{16, nullptr, 0}));
  EXPECT_EQ(packedChannels(direct, "conv2d_nchwc"), 4 * 16) << printGraph(direct);
}

}  // namespace
}  // namespace kiln::core::passes

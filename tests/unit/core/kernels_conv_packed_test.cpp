// conv2d_nchwc (packed layout, its sketch's schedule): interpreter and JIT against a plain C++
// convolution, on fixed shapes (ResNet/MobileNet-like) and random ones that do not divide the tile
// sizes (odd H/W, channel counts that are not multiples of the block, stride 2, dilation,
// depthwise).
#include <random>

#include "core/lower/schedule.h"
#include "core/lower/schedule_config.h"
#include "core/passes/alter_layout.h"
#include "core/passes/fuse_ops.h"
#include "runtime/thread_pool.h"
#include "tests/unit/core/kernels_test_util.h"

namespace kiln::core::lower {
namespace {

using namespace testing;

/// A graph computing conv2d_nchwc directly on a packed input (as alter-layout would emit it).
struct PackedConvGraph {
  Graph graph;
  runtime::Tensor x, w, b;  // unpacked NCHW input, OIHW weight, bias
  int64_t inBlock = 1, outBlock = 1;
};

PackedConvGraph makePackedConv(const ConvCase& p, const LowerOptions& options, uint32_t seed) {
  PackedConvGraph g;
  bool depthwise = p.groups > 1;
  g.x = randomTensor({p.n, p.c, p.h, p.w}, seed);
  g.w = randomTensor({p.oc, p.c / p.groups, p.kh, p.kw}, seed + 1);
  g.b = randomTensor({p.oc}, seed + 2);
  g.outBlock = channelBlock(p.oc, options);
  g.inBlock = depthwise ? g.outBlock : channelBlock(p.c, options);
  bool flat = packedConvFlattens(p.kh, p.kw, {p.sh, p.sw}, {p.ph, p.pw}, p.ow(), options);
  int ocVecs = packedConvOcVecs(p.oc, g.outBlock, flat ? p.oh() * p.ow() : p.ow(), depthwise, options);
  Shape xs = {p.n, p.c / g.inBlock, p.h, p.w, g.inBlock};
  ValueId x = g.graph.addInput("x", TensorType{DType::Float32, xs});
  ValueId w = g.graph.addConstant("w", passes::packConvWeight(g.w, g.inBlock, g.outBlock * ocVecs, depthwise));
  std::vector<ValueId> inputs = {x, w};
  if (p.bias) inputs.push_back(g.graph.addConstant("b", g.b));
  Attrs attrs = convAttrs(p);
  attrs.set("out_layout", "NCHW" + std::to_string(g.outBlock) + "c");
  ValueId y = g.graph.add("conv2d_nchwc", inputs, attrs);
  g.graph.setOutputs({y});
  return g;
}

LowerOptions lanesOptions(int lanes) {
  LowerOptions options;
  options.vectorLanes = lanes;
  options.vectorRegisters = kiln::core::lower::vectorRegistersForLanes(lanes);
  return options;
}

/// `options` with `knobs` as the tuning record of the graph's convolution (node `conv`).
LowerOptions withRecord(const Graph& graph, NodeId conv, LowerOptions options, const Knobs& knobs) {
  const Node& node = graph.node(conv);
  std::vector<TensorType> in;
  for (ValueId v : node.inputs) in.push_back(graph.type(v));
  auto configs = std::make_shared<ScheduleConfigs>();
  configs->byKey[tuneKeyOf(node.op, node.attrs, in, {graph.type(node.outputs[0])})] = knobs;
  options.schedules = configs;
  return options;
}

/// The convolution untuned (the sketch's default annotation) and with a record of the retired
/// builder's knobs (read as the annotation they stand for: a tile of 3 pixels, pixel tiles
/// outermost, one chunk per thread), in the interpreter (when asked) and as JIT code, against the
/// reference.
void checkPackedConv(const ConvCase& p, int lanes, bool interpreter, uint32_t seed = 7) {
  SCOPED_TRACE(p.str() + " lanes=" + std::to_string(lanes));
  PackedConvGraph g = makePackedConv(p, lanesOptions(lanes), seed);
  std::vector<float> expected = referenceConv(p, g.x, g.w, p.bias ? &g.b : nullptr);
  runtime::Tensor xp = passes::packChannels(g.x, g.inBlock);
  for (bool record : {false, true}) {
    LowerOptions options =
        record ? withRecord(g.graph, 0, lanesOptions(lanes),
                            {{"ow_block", 3}, {"oc_outer", 0}, {"unroll", 2}, {"par_chunks", 1}})
               : lanesOptions(lanes);
    for (Engine e : {Engine::Interpreter, Engine::Jit}) {
      if (e == Engine::Interpreter && !interpreter) continue;
      auto out = evalGraph(g.graph, {xp}, e, options);
      ASSERT_EQ(out.size(), 1u);
      EXPECT_TRUE(allClose(passes::unpackChannels(out[0]), expected))
          << (e == Engine::Jit ? "jit" : "interpreter") << (record ? ", builder record" : ", untuned");
    }
  }
}

TEST(KernelsConvPacked, ResNetLike3x3) {
  checkPackedConv({1, 32, 14, 14, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1, true}, 16, true);
  checkPackedConv({1, 16, 9, 9, 32, 3, 3, 2, 2, 1, 1, 1, 1, 1, false}, 8, true);
}

TEST(KernelsConvPacked, Pointwise) {
  checkPackedConv({1, 64, 7, 7, 32, 1, 1, 1, 1, 0, 0, 1, 1, 1, true}, 16, true);
  checkPackedConv({2, 24, 5, 6, 40, 1, 1, 2, 2, 0, 0, 1, 1, 1, true}, 8, true);
}

TEST(KernelsConvPacked, DepthwiseStrideAndPadding) {
  checkPackedConv({1, 32, 11, 13, 32, 3, 3, 1, 1, 1, 1, 1, 1, 32, true}, 16, true);
  checkPackedConv({1, 24, 10, 9, 24, 5, 5, 2, 2, 2, 2, 1, 1, 24, false}, 8, true);
}

TEST(KernelsConvPacked, FirstLayerThreeChannels) {
  checkPackedConv({1, 3, 17, 15, 16, 7, 7, 2, 2, 3, 3, 1, 1, 1, true}, 16, true);
}

TEST(KernelsConvPacked, WideRowsSplitIntoInteriorLoops) {
  // 58 columns: border tiles at both ends, interior tiles in a loop (and a narrower tail).
  checkPackedConv({1, 16, 4, 58, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1, true}, 16, false);
  checkPackedConv({1, 8, 3, 61, 16, 3, 3, 1, 1, 1, 1, 2, 2, 1, true}, 8, true);
}

TEST(KernelsConvPacked, PointwiseOnNarrowRowsIsOneFlatRow) {
  // 7×7 pointwise: 49 columns in full tiles; the epilogue still sees (oh, ow).
  checkPackedConv({1, 32, 7, 7, 64, 1, 1, 1, 1, 0, 0, 1, 1, 1, true}, 16, true);
  checkPackedConv({2, 16, 5, 3, 24, 1, 1, 1, 1, 0, 0, 1, 1, 1, false}, 8, true);
  LowerOptions options;
  options.vectorLanes = 16;
  options.vectorRegisters = 32;
  PackedConvGraph g = makePackedConv({1, 512, 7, 7, 2048, 1, 1, 1, 1, 0, 0, 1, 1, 1, true}, options, 1);
  // Untuned: the sketch's tiles of 7 pixels over the flat row; a record of the builder's tiles of
  // 13 columns of that row: tiles of 13 pixels.
  EXPECT_EQ(lowerNode(g.graph, 0, "conv", options).attrs["schedule"], "mi=7,oc_vecs=2,po=1");
  EXPECT_EQ(lowerNode(g.graph, 0, "conv",
                      withRecord(g.graph, 0, options, {{"flatten", 1}, {"ow_block", 13}, {"oc_outer", 1}}))
                .attrs["schedule"],
            "mi=13,oc_vecs=2,po=1");
}

TEST(KernelsConvPacked, RecordsScheduleKnobs) {
  LowerOptions options;
  options.vectorLanes = 16;
  options.vectorRegisters = 32;
  PackedConvGraph g = makePackedConv({1, 64, 56, 56, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1, true}, options, 1);
  // Untuned: the sketch's default annotation (a windowed nest runs its weight groups in parallel).
  tir::PrimFunc untuned = lowerNode(g.graph, 0, "conv", options);
  EXPECT_EQ(untuned.attrs["schedule"], "mi=14,oc_vecs=2,po=1");
  EXPECT_EQ(untuned.attrs.count("parallel_chunks"), 0u);
  // A record of the builder's knobs: its tile and launch granularity; its unroll and vector width
  // have no counterpart, and its loop order (oc_outer=0: rows outside weight groups, one parallel
  // loop) is po = 1 in a regioned nest, whose po = 0 runs a parallel loop per region.
  tir::PrimFunc f = lowerNode(g.graph, 0, "conv",
                              withRecord(g.graph, 0, options,
                                         {{"algo", 0},
                                          {"flatten", 0},
                                          {"oc_outer", 0},
                                          {"oc_vecs", 2},
                                          {"ow_block", 8},
                                          {"par_chunks", 1},
                                          {"unroll", 4},
                                          {"vec_lanes", 8}}));
  EXPECT_EQ(f.attrs["schedule"], "mi=8,oc_vecs=2,par_chunks=1,po=1");
  EXPECT_EQ(f.attrs["parallel_chunks"], "1");
  EXPECT_NE(f.attrs["trace"].find("split(p_1_1; 8, 1)"), std::string::npos) << f.attrs["trace"];
  // A tile wider than the registers hold (2 vectors × 16 > 28 accumulators): the widest that fits.
  EXPECT_EQ(
      lowerNode(g.graph, 0, "conv", withRecord(g.graph, 0, options, {{"ow_block", 16}})).attrs["schedule"],
      "mi=14,oc_vecs=2,po=1");
  // A sketch annotation with a launch granularity keeps it; one outside the choices, or a record
  // made for another packing or for Winograd, does not fit: the default annotation.
  tir::PrimFunc chunked =
      lowerNode(g.graph, 0, "conv",
                withRecord(g.graph, 0, options, {{"mi", 7}, {"po", 0}, {"oc_vecs", 2}, {"par_chunks", 16}}));
  EXPECT_EQ(chunked.attrs["schedule"], "mi=7,oc_vecs=2,par_chunks=16,po=0");
  EXPECT_EQ(chunked.attrs["parallel_chunks"], "16");
  for (const Knobs& stale : {Knobs{{"mi", 7}, {"po", 0}, {"oc_vecs", 2}, {"par_chunks", 3}},
                             Knobs{{"ow_block", 7}, {"oc_outer", 0}, {"oc_vecs", 4}},
                             Knobs{{"algo", 4}, {"ow_block", 7}, {"oc_outer", 0}}, Knobs{{"unroll", 2}}})
    EXPECT_EQ(lowerNode(g.graph, 0, "conv", withRecord(g.graph, 0, options, stale)).attrs["schedule"],
              "mi=14,oc_vecs=2,po=1")
        << knobsText(stale);
}

TEST(KernelsConvPacked, RandomShapesMatchReference) {
  std::mt19937 rng(2024);
  for (int i = 0; i < 24; ++i) {
    ConvCase p = randomConvCase(rng, i % 3 == 2);
    int lanes = std::vector<int>{4, 8, 16}[i % 3];
    checkPackedConv(p, lanes, i % 4 == 0, 100 + i);
  }
}

/// Runs `graph` with the JIT at 1 and 2 threads (and the interpreter when asked) and compares
/// each result with `expected` (NCHW).
void expectMatches(const Graph& graph, const std::vector<runtime::Tensor>& inputs,
                   const std::vector<float>& expected, const LowerOptions& options, bool interpreter) {
  if (interpreter) {
    auto out = evalGraph(graph, inputs, Engine::Interpreter, options);
    ASSERT_EQ(out.size(), 1u);
    EXPECT_TRUE(allClose(passes::unpackChannels(out[0]), expected)) << "interpreter";
  }
  for (int threads : {1, 2}) {
    runtime::setNumThreads(threads);
    auto out = evalGraph(graph, inputs, Engine::Jit, options);
    ASSERT_EQ(out.size(), 1u);
    EXPECT_TRUE(allClose(passes::unpackChannels(out[0]), expected)) << "jit, " << threads << " threads";
  }
  runtime::setNumThreads(0);
}

// Bias add, relu and a residual add fused into the convolution's epilogue, under a record of the
// builder's knobs and under a sketch annotation with its own launch granularity, at 1 and 2
// threads.
TEST(KernelsConvPacked, TunedRecordsWithFusedEpilogue) {
  for (bool depthwise : {false, true})
    for (const Knobs& record : {Knobs{{"ow_block", 3}, {"oc_outer", 0}, {"par_chunks", 16}},
                                Knobs{{"mi", 5}, {"po", 1}, {"par_chunks", 1}}}) {
      ConvCase p{1, 32, 13, 11, 32, 3, 3, 2, 2, 1, 1, 1, 1, depthwise ? 32 : 1, false};
      SCOPED_TRACE(p.str() + " record " + knobsText(record));
      LowerOptions base = lanesOptions(16);
      PackedConvGraph g = makePackedConv(p, base, 5);
      runtime::Tensor bias = randomTensor({1, p.oc, 1, 1}, 9),
                      residual = randomTensor({p.n, p.oc, p.oh(), p.ow()}, 10);
      ValueId y = g.graph.outputs()[0];
      y = g.graph.add("add", {y, g.graph.addConstant("bias", passes::packChannels(bias, g.outBlock))});
      y = g.graph.add("relu", {y});
      ValueId r = g.graph.addInput("r", g.graph.type(y));
      y = g.graph.add("add", {y, r});
      g.graph.setOutputs({y});
      ASSERT_TRUE(passes::fuseOps(g.graph));
      NodeId conv = 0;
      while (g.graph.node(conv).op != "conv2d_nchwc") ++conv;
      Knobs knobs = record;  // a sketch annotation for this kernel's packing
      if (knobs.count("mi"))
        knobs["oc_vecs"] = g.graph.type(g.graph.node(conv).inputs[1]).shape[5] / g.outBlock;
      LowerOptions options = withRecord(g.graph, conv, base, knobs);
      LoweredModule module = lowerGraph(g.graph, options);
      ASSERT_EQ(module.funcs.size(), 1u);
      EXPECT_EQ(module.funcs[0].attrs["ops"], "conv2d_nchwc,add,relu,add");
      EXPECT_EQ(module.funcs[0].attrs["parallel_chunks"], std::to_string(record.at("par_chunks")));
      std::vector<float> expected = referenceConv(p, g.x, g.w, nullptr);
      int64_t plane = p.oh() * p.ow();
      for (size_t i = 0; i < expected.size(); ++i) {
        int64_t c = static_cast<int64_t>(i) / plane % p.oc;
        expected[i] = std::max(0.0f, expected[i] + bias.data<float>()[c]) + residual.data<float>()[i];
      }
      expectMatches(g.graph,
                    {passes::packChannels(g.x, g.inBlock), passes::packChannels(residual, g.outBlock)},
                    expected, options, true);
    }
}

size_t countOf(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size())) ++n;
  return n;
}

// ---- NEON (aarch64): 128-bit vectors, 32 registers ---------------------------------------------

TEST(KernelsConvPacked, NeonTargetsTileFourLanesInThirtyTwoRegisters) {
  const LowerOptions neon = lowerOptionsFor("aarch64-unknown-linux-gnu", "neoverse-n1", "");
  EXPECT_EQ(neon.vectorLanes, 4);
  EXPECT_EQ(neon.vectorRegisters, 32);
  EXPECT_EQ(lowerOptionsFor("aarch64-unknown-linux-gnu", "generic", "+neon").vectorLanes, 4);
  EXPECT_EQ(lowerOptionsFor("x86_64-pc-linux-gnu", "haswell", "").vectorLanes, 8);
  EXPECT_EQ(lowerOptionsFor("x86_64-pc-linux-gnu", "haswell", "").vectorRegisters, 16);
  EXPECT_EQ(lowerOptionsFor("x86_64-pc-linux-gnu", "skylake-avx512", "").vectorLanes, 16);
  EXPECT_EQ(vectorRegistersForLanes(neon.vectorLanes), neon.vectorRegisters);  // alter-layout agrees

  // The NEON-shaped schedules compute the same (run here on 4-lane x86 vectors).
  checkPackedConv({1, 32, 14, 14, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1, true}, 4, true);
  checkPackedConv({1, 64, 7, 7, 32, 1, 1, 1, 1, 0, 0, 1, 1, 1, true}, 4, false);
  checkPackedConv({1, 24, 10, 9, 24, 5, 5, 2, 2, 2, 2, 1, 1, 24, false}, 4, false);

  // 32 registers hold a larger tile than AVX2's 16, and the code is NEON's 4 × f32 FMA.
  PackedConvGraph g = makePackedConv({1, 64, 28, 28, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1, true}, neon, 1);
  tir::PrimFunc f = lowerNode(g.graph, 0, "conv_neon", neon);
  EXPECT_NE(f.attrs["schedule"].find("oc_vecs="), std::string::npos) << f.attrs["schedule"];
  std::string text = codegen::emitAssembly({f}, codegen::Target::parse("llvm -mtriple=aarch64-linux-gnu -mcpu=neoverse-n1"));
  EXPECT_GE(countOf(text, "fmla\tv"), 16u) << text.substr(0, 4000);
  EXPECT_EQ(countOf(text, ".8s"), 0u);
}

}  // namespace
}  // namespace kiln::core::lower

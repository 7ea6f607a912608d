// conv2d_nchwc (packed layout, register-tiled schedule): interpreter and JIT against a plain C++
// convolution, on fixed shapes (ResNet/MobileNet-like) and random ones that do not divide the tile
// sizes (odd H/W, channel counts that are not multiples of the block, stride 2, dilation,
// depthwise).
#include <random>
#include <set>

#include "core/lower/schedule.h"
#include "core/lower/schedule_config.h"
#include "core/passes/alter_layout.h"
#include "core/passes/fuse_ops.h"
#include "core/tir/functor.h"
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

/// The convolution untuned (the sketch's default annotation where the sketch applies) and with a
/// record of builder knobs (the hand-written builder, its other knobs from its heuristic), in the
/// interpreter (when asked) and as JIT code, against the reference.
void checkPackedConv(const ConvCase& p, int lanes, bool interpreter, uint32_t seed = 7) {
  SCOPED_TRACE(p.str() + " lanes=" + std::to_string(lanes));
  PackedConvGraph g = makePackedConv(p, lanesOptions(lanes), seed);
  std::vector<float> expected = referenceConv(p, g.x, g.w, p.bias ? &g.b : nullptr);
  runtime::Tensor xp = passes::packChannels(g.x, g.inBlock);
  for (bool builder : {false, true}) {
    LowerOptions options =
        builder ? withRecord(g.graph, 0, lanesOptions(lanes), {{"unroll", 1}}) : lanesOptions(lanes);
    for (Engine e : {Engine::Interpreter, Engine::Jit}) {
      if (e == Engine::Interpreter && !interpreter) continue;
      auto out = evalGraph(g.graph, {xp}, e, options);
      ASSERT_EQ(out.size(), 1u);
      EXPECT_TRUE(allClose(passes::unpackChannels(out[0]), expected))
          << (e == Engine::Jit ? "jit" : "interpreter") << (builder ? ", builder" : ", untuned");
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
  // Untuned: the sketch's tiles of 7 pixels over the flat row; the builder's heuristic (a record
  // of builder knobs): one flat row in tiles of 13.
  EXPECT_EQ(lowerNode(g.graph, 0, "conv", options).attrs["schedule"], "mi=7,oc_vecs=2,po=1");
  EXPECT_EQ(lowerNode(g.graph, 0, "conv", withRecord(g.graph, 0, options, {{"unroll", 1}})).attrs["schedule"],
            "flatten=1,oc_outer=1,oc_vecs=2,ow_block=13,par_chunks=4,unroll=1");
}

TEST(KernelsConvPacked, RecordsScheduleKnobs) {
  LowerOptions options;
  options.vectorLanes = 16;
  options.vectorRegisters = 32;
  PackedConvGraph g = makePackedConv({1, 64, 56, 56, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1, true}, options, 1);
  // Untuned: the sketch's default annotation (a windowed nest runs its weight groups in parallel).
  EXPECT_EQ(lowerNode(g.graph, 0, "conv", options).attrs["schedule"], "mi=14,oc_vecs=2,po=1");
  // The builder (a record of its knobs, the rest from its heuristic): 37 K weights against a
  // 200 K input: rows outside channel groups (convChannelsOuter), so each thread reads back the
  // rows it wrote in the previous layer.
  tir::PrimFunc f = lowerNode(g.graph, 0, "conv", withRecord(g.graph, 0, options, {{"unroll", 1}}));
  EXPECT_EQ(f.attrs["schedule"], "algo=0,flatten=0,oc_outer=0,oc_vecs=2,ow_block=14,par_chunks=4,unroll=1");
  // With 16 times the channels the weights outweigh the input: channel groups outside.
  PackedConvGraph wide = makePackedConv({1, 256, 14, 14, 256, 3, 3, 1, 1, 1, 1, 1, 1, 1, true}, options, 1);
  LowerOptions wideBuilder = withRecord(wide.graph, 0, options, {{"unroll", 1}});
  EXPECT_EQ(lowerNode(wide.graph, 0, "conv", wideBuilder).attrs["schedule"],
            "algo=0,flatten=0,oc_outer=1,oc_vecs=2,ow_block=14,par_chunks=4,unroll=1");
}

TEST(KernelsConvPacked, RandomShapesMatchReference) {
  std::mt19937 rng(2024);
  for (int i = 0; i < 24; ++i) {
    ConvCase p = randomConvCase(rng, i % 3 == 2);
    int lanes = std::vector<int>{4, 8, 16}[i % 3];
    checkPackedConv(p, lanes, i % 4 == 0, 100 + i);
  }
}

// ---- vec_lanes: narrower vectors than the output block ---------------------------------------

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

/// The packed convolution with a record asking for `knobs` (vec_lanes among them): the schedule
/// it records has vec_lanes = `expectLanes` (absent when that is the block), and it computes the
/// reference convolution.
void checkVecLanes(const ConvCase& p, int lanes, const Knobs& knobs, int64_t expectLanes, bool interpreter,
                   uint32_t seed = 7) {
  SCOPED_TRACE(p.str() + " lanes=" + std::to_string(lanes) + " record " + knobsText(knobs));
  PackedConvGraph g = makePackedConv(p, lanesOptions(lanes), seed);
  LowerOptions options = withRecord(g.graph, 0, lanesOptions(lanes), knobs);
  Knobs used = parseKnobs(lowerNode(g.graph, 0, "conv", options).attrs["schedule"]);
  EXPECT_EQ(knob(used, "vec_lanes", g.outBlock), expectLanes) << knobsText(used);
  if (expectLanes == g.outBlock) {
    EXPECT_EQ(used.count("vec_lanes"), 0u) << knobsText(used);
  }
  // Every accumulator is a register: oc_vecs · (L / vec_lanes) · ow_block within the budget.
  EXPECT_TRUE(packedConvTileFits(used.at("oc_vecs"), used.at("ow_block"), options, g.outBlock / expectLanes))
      << knobsText(used);
  std::vector<float> expected = referenceConv(p, g.x, g.w, p.bias ? &g.b : nullptr);
  expectMatches(g.graph, {passes::packChannels(g.x, g.inBlock)}, expected, options, interpreter);
}

TEST(KernelsConvPacked, HalfWidthVectors3x3) {
  // 16-lane blocks as 8-lane vectors (256-bit on AVX-512): stride 1 and 2, padding, odd sizes,
  // border tiles, tuned tile widths and loop orders.
  checkVecLanes({1, 32, 14, 14, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1, true}, 16, {{"vec_lanes", 8}}, 8, true);
  checkVecLanes({1, 32, 15, 13, 64, 3, 3, 2, 2, 1, 1, 1, 1, 1, true}, 16,
                {{"vec_lanes", 8}, {"ow_block", 4}, {"oc_outer", 0}, {"unroll", 4}}, 8, true);
  checkVecLanes({2, 16, 9, 30, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1, false}, 16, {{"vec_lanes", 8}, {"ow_block", 7}},
                8, false);
  checkVecLanes({1, 16, 12, 11, 48, 3, 3, 2, 2, 1, 1, 1, 1, 1, true}, 16,
                {{"vec_lanes", 8}, {"par_chunks", 1}}, 8, false);
  // 8-lane blocks as 4-lane vectors (AVX2 targets; 24 channels have block 8 on AVX-512 too).
  checkVecLanes({1, 16, 9, 9, 32, 3, 3, 2, 2, 1, 1, 1, 1, 1, false}, 8, {{"vec_lanes", 4}}, 4, true);
  checkVecLanes({1, 24, 10, 9, 24, 3, 3, 1, 1, 1, 1, 1, 1, 1, true}, 16, {{"vec_lanes", 4}}, 4, true);
}

TEST(KernelsConvPacked, HalfWidthVectorsPointwiseAndFirstLayer) {
  // 7×7 pointwise (one flat row), a strided 1×1 (ResNet's downsample), the 3-channel 7×7 stem.
  checkVecLanes({1, 64, 7, 7, 32, 1, 1, 1, 1, 0, 0, 1, 1, 1, true}, 16, {{"vec_lanes", 8}}, 8, true);
  checkVecLanes({1, 64, 7, 7, 64, 1, 1, 1, 1, 0, 0, 1, 1, 1, true}, 16,
                {{"vec_lanes", 8}, {"flatten", 1}, {"ow_block", 7}}, 8, false);
  checkVecLanes({1, 32, 14, 14, 64, 1, 1, 2, 2, 0, 0, 1, 1, 1, false}, 16, {{"vec_lanes", 8}}, 8, true);
  checkVecLanes({1, 3, 17, 15, 16, 7, 7, 2, 2, 3, 3, 1, 1, 1, true}, 16, {{"vec_lanes", 8}}, 8, true);
}

TEST(KernelsConvPacked, HalfWidthVectorsDepthwise) {
  checkVecLanes({1, 32, 11, 13, 32, 3, 3, 1, 1, 1, 1, 1, 1, 32, true}, 16, {{"vec_lanes", 8}}, 8, true);
  checkVecLanes({1, 48, 10, 9, 48, 5, 5, 2, 2, 2, 2, 1, 1, 48, false}, 16,
                {{"vec_lanes", 8}, {"ow_block", 3}}, 8, true);
  checkVecLanes({2, 16, 9, 10, 16, 3, 3, 2, 2, 1, 1, 1, 1, 16, true}, 8, {{"vec_lanes", 4}}, 4, false);
}

TEST(KernelsConvPacked, InvalidVectorWidthsFallBackToTheBlock) {
  ConvCase p{1, 32, 9, 9, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1, true};
  for (int64_t bad : {4, 12, 32, 0, -8}) checkVecLanes(p, 16, {{"vec_lanes", bad}}, 16, false);
  // The block itself is accepted and leaves the schedule as the heuristic's.
  checkVecLanes(p, 16, {{"vec_lanes", 16}}, 16, false);
  // Blocks of 4 lanes have no narrower width (2 lanes would be below 4).
  checkVecLanes({1, 4, 7, 7, 12, 3, 3, 1, 1, 1, 1, 1, 1, 1, true}, 16, {{"vec_lanes", 2}}, 4, true);
  // A tuned tile too wide for split vectors falls back to the widest tile that fits
  // (2 vectors × 2 halves × 7 columns = 28 accumulators), not to full-width vectors.
  PackedConvGraph g =
      makePackedConv({1, 32, 14, 14, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1, true}, lanesOptions(16), 1);
  LowerOptions options = withRecord(g.graph, 0, lanesOptions(16), {{"vec_lanes", 8}, {"ow_block", 14}});
  EXPECT_EQ(lowerNode(g.graph, 0, "conv", options).attrs["schedule"],
            "algo=0,flatten=0,oc_outer=1,oc_vecs=2,ow_block=7,par_chunks=4,unroll=1,vec_lanes=8");
  // Without a record: the sketch's default annotation, full-width vectors.
  EXPECT_EQ(lowerNode(g.graph, 0, "conv", lanesOptions(16)).attrs["schedule"], "mi=14,oc_vecs=2,po=1");
}

// Bias add, relu and a residual add fused into the convolution's epilogue read their per-channel
// and per-element operands at the sub-vector's lanes.
TEST(KernelsConvPacked, HalfWidthVectorsWithFusedEpilogue) {
  for (bool depthwise : {false, true}) {
    ConvCase p{1, 32, 13, 11, 32, 3, 3, 2, 2, 1, 1, 1, 1, depthwise ? 32 : 1, false};
    SCOPED_TRACE(p.str());
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
    LowerOptions options = withRecord(g.graph, conv, base, {{"vec_lanes", 8}, {"ow_block", 3}});
    LoweredModule module = lowerGraph(g.graph, options);
    ASSERT_EQ(module.funcs.size(), 1u);
    EXPECT_EQ(module.funcs[0].attrs["ops"], "conv2d_nchwc,add,relu,add");
    EXPECT_NE(module.funcs[0].attrs["schedule"].find("vec_lanes=8"), std::string::npos)
        << module.funcs[0].attrs["schedule"];
    std::vector<float> expected = referenceConv(p, g.x, g.w, nullptr);
    int64_t plane = p.oh() * p.ow();
    for (size_t i = 0; i < expected.size(); ++i) {
      int64_t c = static_cast<int64_t>(i) / plane % p.oc;
      expected[i] = std::max(0.0f, expected[i] + bias.data<float>()[c]) + residual.data<float>()[i];
    }
    expectMatches(g.graph, {passes::packChannels(g.x, g.inBlock), passes::packChannels(residual, g.outBlock)},
                  expected, options, true);
  }
}

/// The lane counts of the f32 vector loads, stores and multiplies of a kernel.
struct VectorWidths : tir::IRVisitor {
  std::set<int> loads, stores, muls;
  void visit(const tir::Load* op) override {
    if (op->type.lanes > 1) loads.insert(op->type.lanes);
    tir::IRVisitor::visit(op);
  }
  void visit(const tir::Store* op) override {
    if (op->value.type().lanes > 1) stores.insert(op->value.type().lanes);
    tir::IRVisitor::visit(op);
  }
  void visit(const tir::Mul* op) override {
    if (op->type.lanes > 1) muls.insert(op->type.lanes);
    tir::IRVisitor::visit(op);
  }
};

size_t countOf(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size())) ++n;
  return n;
}

// The tuned vec_lanes=8 really produces 8-lane code: in the loop IR every vector load, store
// and multiply has 8 lanes; in LLVM's optimized IR the FMAs are <8 x float> and none is
// <16 x float>; on an AVX-512 host the assembly's FMAs are ymm FMAs and no zmm register is used.
TEST(KernelsConvPacked, HalfWidthVectorsAreEightLaneCode) {
  PackedConvGraph g =
      makePackedConv({1, 64, 14, 14, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1, true}, lanesOptions(16), 3);
  LowerOptions options = withRecord(g.graph, 0, lanesOptions(16), {{"vec_lanes", 8}});
  tir::PrimFunc narrow = lowerNode(g.graph, 0, "conv_w8", options);
  tir::PrimFunc wide = lowerNode(g.graph, 0, "conv_w16", lanesOptions(16));
  VectorWidths n, w;
  n.visitStmt(narrow.body);
  w.visitStmt(wide.body);
  EXPECT_EQ(n.loads, std::set<int>{8});
  EXPECT_EQ(n.stores, std::set<int>{8});
  EXPECT_EQ(n.muls, std::set<int>{8});
  EXPECT_EQ(w.muls, std::set<int>{16});  // the default kernel keeps full-width vectors
  std::string ir = codegen::emitLLVMIR({narrow}, hostTarget());
  size_t fma8 = countOf(ir, "@llvm.fma.v8f32(") + countOf(ir, "@llvm.fmuladd.v8f32(") +
                countOf(ir, "fadd contract <8 x float>") + countOf(ir, "fadd fast <8 x float>");
  EXPECT_GT(fma8, 0u) << ir.substr(0, 4000);
  EXPECT_EQ(countOf(ir, "<16 x float>"), 0u);
  const codegen::Target& host = hostTarget();
  if (lowerOptionsFor(host.cpu, host.features).vectorLanes == 16) {
    std::string asm8 = codegen::emitAssembly({narrow}, host), asm16 = codegen::emitAssembly({wide}, host);
    // Each broadcast input feeds oc_vecs·2 FMAs, so LLVM broadcasts it once into a register
    // (vbroadcastss) rather than folding it into every FMA ({1to8}).
    EXPECT_GE(countOf(asm8, "vfmadd231ps\t%ymm") + countOf(asm8, "{1to8}, %ymm"), 64u)
        << asm8.substr(0, 4000);
    EXPECT_EQ(countOf(asm8, "%zmm"), 0u);
    EXPECT_GE(countOf(asm16, "vfmadd231ps\t%zmm") + countOf(asm16, "{1to16}, %zmm"), 32u);
  }
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

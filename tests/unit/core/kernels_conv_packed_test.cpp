// conv2d_nchwc (packed layout, register-tiled schedule): interpreter and JIT against a plain C++
// convolution, on fixed shapes (ResNet/MobileNet-like) and random ones that do not divide the tile
// sizes (odd H/W, channel counts that are not multiples of the block, stride 2, dilation,
// depthwise).
#include <random>

#include "core/lower/schedule.h"
#include "core/passes/alter_layout.h"
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

void checkPackedConv(const ConvCase& p, int lanes, bool interpreter, uint32_t seed = 7) {
  SCOPED_TRACE(p.str() + " lanes=" + std::to_string(lanes));
  LowerOptions options;
  options.vectorLanes = lanes;
  options.vectorRegisters = lanes >= 16 ? 32 : 16;
  PackedConvGraph g = makePackedConv(p, options, seed);
  std::vector<float> expected = referenceConv(p, g.x, g.w, p.bias ? &g.b : nullptr);
  runtime::Tensor xp = passes::packChannels(g.x, g.inBlock);
  for (Engine e : {Engine::Interpreter, Engine::Jit}) {
    if (e == Engine::Interpreter && !interpreter) continue;
    auto out = evalGraph(g.graph, {xp}, e, options);
    ASSERT_EQ(out.size(), 1u);
    EXPECT_TRUE(allClose(passes::unpackChannels(out[0]), expected))
        << (e == Engine::Jit ? "jit" : "interpreter");
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
  EXPECT_EQ(lowerNode(g.graph, 0, "conv", options).attrs["schedule"], "flatten=1,oc_outer=1,oc_vecs=2,ow_block=13,par_chunks=4,unroll=1");
}

TEST(KernelsConvPacked, RecordsScheduleKnobs) {
  LowerOptions options;
  options.vectorLanes = 16;
  options.vectorRegisters = 32;
  PackedConvGraph g = makePackedConv({1, 64, 56, 56, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1, true}, options, 1);
  tir::PrimFunc f = lowerNode(g.graph, 0, "conv", options);
  EXPECT_EQ(f.attrs["schedule"], "algo=0,flatten=0,oc_outer=1,oc_vecs=2,ow_block=14,par_chunks=4,unroll=1");
}

TEST(KernelsConvPacked, RandomShapesMatchReference) {
  std::mt19937 rng(2024);
  for (int i = 0; i < 24; ++i) {
    ConvCase p = randomConvCase(rng, i % 3 == 2);
    int lanes = std::vector<int>{4, 8, 16}[i % 3];
    checkPackedConv(p, lanes, i % 4 == 0, 100 + i);
  }
}

}  // namespace
}  // namespace kiln::core::lower

// The rewriting passes (simplify-inference, fold-constants, eliminate-dead-code,
// eliminate-common-subexpressions, fold-scale-axis, fold-pad-into-conv, pack-dense and pool-to-mean) beyond
// their text-in, text-out tests, which are FileCheck tests in tests/filecheck/: numerics (the rewritten graph
// computes the same values through lowering and the TIR interpreter), pass counters, and a
// golden text where a pass's result also needs numerics.
#include <gtest/gtest.h>

#include "core/passes/fold_constants.h"
#include "core/passes/fold_pad_into_conv.h"
#include "core/passes/fold_scale_axis.h"
#include "core/passes/pack_dense.h"
#include "core/passes/pipeline.h"
#include "core/passes/pool_to_mean.h"
#include "tests/unit/core/passes_test_util.h"

namespace kiln::core::passes {
namespace {

using testing::afterPass;
using testing::expectSameNumerics;

// ---- simplify-inference --------------------------------------------------------------------

const char* kBatchNorm = R"(graph(%x: f32[1,2,3,3]) {
  %g = constant f32[2] [1, 2]
  %b = constant f32[2] [0.5, -0.5]
  %m = constant f32[2] [0.25, 1]
  %v = constant f32[2] [4, 0.25]
  %bn = batch_norm(%x, %g, %b, %m, %v) {epsilon=0.0} : f32[1,2,3,3]
  return %bn
})";

TEST(SimplifyInference, SquareIsExactlyPowByTwo) {
  const char* text = R"(graph(%x: f32[4,5]) {
  %two = constant f32[] [2]
  %y = pow(%x, %two) : f32[4,5]
  return %y
})";
  expectSameNumerics(text, "simplify-inference", 0.0);
}

TEST(SimplifyInference, BatchNormThenFoldComputesTheSame) {
  expectSameNumerics(kBatchNorm, "simplify-inference,fold-constants,eliminate-dead-code");
}

// ---- fold-constants ------------------------------------------------------------------------

TEST(FoldConstants, FoldsWhatDoesNotOutgrowItsInputs) {
  const char* text = R"(graph(%x: f32[64,64]) {
  %one = constant f32[] [1]
  %big = constant f32[64,64] elided
  %b = add(%big, %one) : f32[64,64]
  %r = reshape(%b) {shape=[4096]} : f32[4096]
  %y = reshape(%x) {shape=[4096]} : f32[4096]
  %z = add(%y, %r) : f32[4096]
  return %z
})";
  // With max-elements=16, add(big, one) still folds (not larger than its inputs), and so does the
  // reshape. A broadcast that outgrows its inputs does not: tests/filecheck/fold_constants_keeps.kir.
  PassCounters counters;
  Graph g = parseGraph(text);
  EXPECT_TRUE(foldConstants(g, {16}, &counters));
  EXPECT_EQ(counters["folded"], 2);
}

TEST(FoldConstants, LeavesNodesWithoutLoweringAlone) {
  // Integer division has no lowering: the node stays for the real lowering to report.
  const char* text = R"(graph(%x: i64[2]) {
  %a = constant i64[2] [6, 8]
  %b = constant i64[2] [2, 4]
  %d = div(%a, %b) : i64[2]
  %y = add(%x, %d) : i64[2]
  return %y
})";
  PassCounters counters;
  Graph g = parseGraph(text);
  EXPECT_FALSE(foldConstants(g, {}, &counters));
  EXPECT_EQ(counters["skipped-unsupported"], 1);
}

// eliminate-dead-code, eliminate-common-subexpressions: tests/filecheck/ only.

// ---- fold-scale-axis -----------------------------------------------------------------------

const char* kConvScale = R"(graph(%x: f32[1,2,4,4]) {
  %w = constant f32[2,2,1,1] [1, 2, 3, 4]
  %b = constant f32[2] [1, -1]
  %conv = conv2d(%x, %w, %b) {groups=1} : f32[1,2,4,4]
  %s = constant f32[2,1,1] [2, 0.5]
  %mul = mul(%conv, %s) : f32[1,2,4,4]
  %t = constant f32[1,2,1,1] [10, 20]
  %add = add(%t, %mul) : f32[1,2,4,4]
  %k = constant f32[] [4]
  %div = div(%add, %k) : f32[1,2,4,4]
  %y = relu(%div) : f32[1,2,4,4]
  return %y
})";

TEST(FoldScaleAxis, FoldedConvComputesTheSame) { expectSameNumerics(kConvScale, "fold-scale-axis"); }

TEST(FoldScaleAxis, FoldedDenseWithReversedSubComputesTheSame) {
  const char* text = R"(graph(%x: f32[3,2]) {
  %w = constant f32[2,2] [1, 2, 3, 4]
  %d = dense(%x, %w) : f32[3,2]
  %s = constant f32[2] [2, 3]
  %m = mul(%d, %s) : f32[3,2]
  %one = constant f32[] [1]
  %y = sub(%one, %m) : f32[3,2]
  return %y
})";
  expectSameNumerics(text, "fold-scale-axis");
}

TEST(FoldScaleAxis, BatchNormFoldedIntoTheConvolutionComputesTheSame) {
  const char* text = R"(graph(%x: f32[1,2,5,5]) {
  %w = constant f32[3,2,3,3] [0.1, -0.2, 0.3, 0.4, -0.5, 0.6, 0.7, -0.8, 0.9, 1, -1.1, 1.2, 0.1, 0.2, 0.3, -0.4, 0.5, 0.6, -0.7, 0.8, 0.9, 1, 1.1, -1.2, 0.1, 0.2, -0.3, 0.4, 0.5, 0.6, 0.7, 0.8, -0.9, 1, 1.1, 1.2, -0.1, 0.2, 0.3, 0.4, -0.5, 0.6, 0.7, 0.8, 0.9, -1, 1.1, 1.2, 0.1, -0.2, 0.3, 0.4, 0.5, -0.6]
  %conv = conv2d(%x, %w) {groups=1, padding=[1,1]} : f32[1,3,5,5]
  %g = constant f32[3] [1, 2, 0.5]
  %b = constant f32[3] [0.5, -0.5, 0]
  %m = constant f32[3] [0.25, 1, -1]
  %v = constant f32[3] [4, 0.25, 1]
  %bn = batch_norm(%conv, %g, %b, %m, %v) {epsilon=1.0000000000000001e-05} : f32[1,3,5,5]
  %y = relu(%bn) : f32[1,3,5,5]
  return %y
})";
  expectSameNumerics(text,
                     "simplify-inference,fold-constants,eliminate-common-subexpressions,eliminate-dead-code,"
                     "fold-scale-axis,fuse-ops");
}

// ---- pack-dense ----------------------------------------------------------------------------

// A transformer's feed-forward in small: 2 × 17 tokens (M = 34: row tiles of 2) through a GELU,
// panels of 3 vectors (48 columns) and of 2 (N = 32, which 48 does not divide); -O3 fuses the
// GELU into the first packed kernel.
const char* kFeedForward = R"(graph(%x: f32[2,17,24]) {
  %w1 = constant f32[48,24] elided
  %b1 = constant f32[48] elided
  %h = dense(%x, %w1, %b1) : f32[2,17,48]
  %g = gelu(%h) : f32[2,17,48]
  %w2 = constant f32[32,48] elided
  %y = dense(%g, %w2) : f32[2,17,32]
  return %y
})";

TEST(PackDense, PackedLayersComputeTheSame) {
  expectSameNumerics(kFeedForward, "pack-dense{lanes=16}", 1e-5);
  lower::LoweredModule fused = expectSameNumerics(kFeedForward, "pack-dense{lanes=16},fuse-ops", 1e-5);
  std::vector<std::string> names;
  for (const auto& f : fused.funcs) names.push_back(f.name);
  EXPECT_EQ(names, (std::vector<std::string>{"fused_dense_packed_gelu_0", "dense_packed_0"}));
  // 8-lane vectors (AVX2): panels of 3 vectors (24 columns) and of 2 (16), which divide 48 and 32.
  expectSameNumerics(kFeedForward, "pack-dense", 1e-5);
  // Panels narrower than the lowering's vectors (6 and 4 columns, a hand-written pipeline).
  expectSameNumerics(kFeedForward, "pack-dense{lanes=2}", 1e-5);
}

// An ONNX-style feed-forward: MatMul by constant matrices, the bias an Add.
TEST(PackDense, MatmulByAConstantMatrixComputesTheSame) {
  const char* text = R"(graph(%x: f32[1,20,24]) {
  %w = constant f32[24,48] elided
  %b = constant f32[48] elided
  %h = matmul(%x, %w) : f32[1,20,48]
  %y = add(%h, %b) : f32[1,20,48]
  return %y
})";
  lower::LoweredModule fused = expectSameNumerics(text, "pack-dense{lanes=16},fuse-ops", 1e-5);
  ASSERT_EQ(fused.funcs.size(), 1u);
  EXPECT_EQ(fused.funcs[0].name, "fused_dense_packed_add_0");
  Graph g = parseGraph(text);
  PassCounters counters;
  EXPECT_TRUE(packDense(g, {16, 3, 16}, &counters));
  EXPECT_EQ(counters["matmul"], 1);
}

TEST(PackDense, PacksPanelsAndLeavesFewRowsAndRuntimeWeights) {
  runtime::Tensor w = runtime::Tensor::zeros(DType::Float32, {4, 3});
  for (int i = 0; i < 12; ++i) w.data<float>()[i] = static_cast<float>(i);  // w[n, k] = 3n + k
  runtime::Tensor p = packDenseWeight(w, 2);
  ASSERT_EQ(p.shape(), (Shape{2, 3, 2}));
  // p[panel, k, j] = w[2·panel + j, k]
  EXPECT_EQ(std::vector<float>(p.data<float>(), p.data<float>() + 12),
            (std::vector<float>{0, 3, 1, 4, 2, 5, 6, 9, 7, 10, 8, 11}));

  Graph g = parseGraph(kFeedForward);
  PassCounters counters;
  EXPECT_TRUE(packDense(g, {16, 3, 16}, &counters));
  EXPECT_EQ(counters["dense"], 2);
  Graph few = parseGraph(kFeedForward);
  EXPECT_FALSE(packDense(few, {16, 3, 35}));  // 34 rows
  Graph narrow = parseGraph(kFeedForward);
  EXPECT_FALSE(packDense(narrow, {64, 4, 16}));  // no panel of 64 lanes divides 48 or 32
  const char* runtimeWeights = R"(graph(%x: f32[32,8], %w: f32[16,8]) {
  %y = dense(%x, %w) : f32[32,16]
  return %y
})";
  Graph r = parseGraph(runtimeWeights);
  EXPECT_FALSE(packDense(r));
}

// ---- fold-pad-into-conv --------------------------------------------------------------------

const char* kPadConv = R"(graph(%x: f32[1,2,5,6]) {
  %w = constant f32[3,2,3,3] elided
  %b = constant f32[3] [1, -1, 0.5]
  %p = pad(%x) {mode="constant", pads=[0,0,2,1,0,0,2,1], value=0.0} : f32[1,2,9,8]
  %y = conv2d(%p, %w, %b) {groups=1, padding=[1,0], stride=[2,1]} : f32[1,3,5,6]
  return %y
})";

TEST(FoldPadIntoConv, FoldedPadComputesTheSame) { expectSameNumerics(kPadConv, "fold-pad-into-conv", 1e-6); }

TEST(FoldPadIntoConv, APadWithOtherUsersStays) {
  const char* text = R"(graph(%x: f32[1,2,4,4]) {
  %w = constant f32[2,2,3,3] elided
  %p = pad(%x) {mode="constant", pads=[0,0,1,1,0,0,1,1], value=0.0} : f32[1,2,6,6]
  %c1 = conv2d(%p, %w) {groups=1} : f32[1,2,4,4]
  %c2 = conv2d(%p, %w) {groups=1, padding=[1,1]} : f32[1,2,6,6]
  %r = relu(%p) : f32[1,2,6,6]
  return %c1, %c2, %r
})";
  EXPECT_EQ(afterPass(text, [](Graph& g) { return foldPadIntoConv(g); }), R"(graph(%x: f32[1,2,4,4]) {
  %p = pad(%x) {mode="constant", pads=[0,0,1,1,0,0,1,1], value=0.0} : f32[1,2,6,6]
  %w = constant f32[2,2,3,3] elided
  %c1 = conv2d(%x, %w) {groups=1, padding=[1,1]} : f32[1,2,4,4]
  %c2 = conv2d(%x, %w) {groups=1, padding=[2,2]} : f32[1,2,6,6]
  %r = relu(%p) : f32[1,2,6,6]
  return %c1, %c2, %r
}
)");
  expectSameNumerics(text, "fold-pad-into-conv", 1e-6);
}

// ---- pool-to-mean --------------------------------------------------------------------------

// A relu before each pool: after fuse-ops (O2) it joins the mean's row nest as its prologue.
const char* kGlobalPools = R"(graph(%x: f32[2,3,5,7]) {
  %r = relu(%x) : f32[2,3,5,7]
  %a = adaptive_avg_pool2d(%r) {output_size=[1,1]} : f32[2,3,1,1]
  %p = avg_pool2d(%x) {kernel=[5,7], padding=[0,0], stride=[5,7]} : f32[2,3,1,1]
  %s = add(%a, %p) : f32[2,3,1,1]
  return %s
})";

TEST(PoolToMean, GlobalPoolsBecomeMeansThatComputeTheSame) {
  Graph g = parseGraph(kGlobalPools);
  PassCounters counters;
  EXPECT_TRUE(poolToMean(g, &counters));
  EXPECT_EQ(counters["pools"], 2);
  int means = 0;
  for (const Node& n : g.nodes()) means += n.op == "mean";
  EXPECT_EQ(means, 2);
  expectSameNumerics(kGlobalPools, "pool-to-mean", 1e-6);
  // With fusion the relu is evaluated inside the mean's kernel: one kernel per pool, and the add.
  lower::LoweredModule m = expectSameNumerics(kGlobalPools, "pool-to-mean,fuse-ops", 1e-6);
  EXPECT_EQ(m.funcs.size(), 3u);
}

}  // namespace
}  // namespace kiln::core::passes

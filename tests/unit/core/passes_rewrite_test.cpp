// Golden text tests of the rewriting passes: simplify-inference, fold-constants,
// eliminate-dead-code, eliminate-common-subexpressions, fold-scale-axis and fold-pad-into-conv. Each parses a graph,
// runs one pass and compares the printed result; numerics tests check the rewrites compute the
// same values through lowering and the TIR interpreter.
#include <gtest/gtest.h>

#include "core/passes/eliminate_common_subexpressions.h"
#include "core/passes/eliminate_dead_code.h"
#include "core/passes/fold_constants.h"
#include "core/passes/fold_pad_into_conv.h"
#include "core/passes/fold_scale_axis.h"
#include "core/passes/pipeline.h"
#include "core/passes/simplify_inference.h"
#include "tests/unit/core/passes_test_util.h"

namespace kiln::core::passes {
namespace {

using testing::afterPass;
using testing::afterPipeline;
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

TEST(SimplifyInference, BatchNormBecomesScaleAndShift) {
  EXPECT_EQ(afterPass(kBatchNorm, [](Graph& g) { return simplifyInference(g); }), R"(graph(%x: f32[1,2,3,3]) {
  %g = constant f32[2] [1, 2]
  %b = constant f32[2] [0.5, -0.5]
  %m = constant f32[2] [0.25, 1]
  %v = constant f32[2] [4, 0.25]
  %bn_eps = constant f32[] [0]
  %bn_var_eps = add(%v, %bn_eps) : f32[2]
  %bn_std = sqrt(%bn_var_eps) : f32[2]
  %bn_scale = div(%g, %bn_std) : f32[2]
  %bn_mean_scaled = mul(%m, %bn_scale) : f32[2]
  %bn_shift = sub(%b, %bn_mean_scaled) : f32[2]
  %bn_scale_c = reshape(%bn_scale) {shape=[2,1,1]} : f32[2,1,1]
  %bn_shift_c = reshape(%bn_shift) {shape=[2,1,1]} : f32[2,1,1]
  %bn_scaled = mul(%x, %bn_scale_c) : f32[1,2,3,3]
  %bn = add(%bn_scaled, %bn_shift_c) : f32[1,2,3,3]
  return %bn
}
)");
}

TEST(SimplifyInference, BatchNormThenFoldGivesTwoConstants) {
  EXPECT_EQ(afterPipeline(kBatchNorm, "simplify-inference,fold-constants,eliminate-dead-code"),
            R"(graph(%x: f32[1,2,3,3]) {
  %bn_scale_c = constant f32[2,1,1] [0.5, 4]
  %bn_scaled = mul(%x, %bn_scale_c) : f32[1,2,3,3]
  %bn_shift_c = constant f32[2,1,1] [0.375, -4.5]
  %bn = add(%bn_scaled, %bn_shift_c) : f32[1,2,3,3]
  return %bn
}
)");
  expectSameNumerics(kBatchNorm, "simplify-inference,fold-constants,eliminate-dead-code");
}

TEST(SimplifyInference, RankTwoBatchNormNeedsNoReshape) {
  const char* text = R"(graph(%x: f32[4,2], %g: f32[2], %b: f32[2], %m: f32[2], %v: f32[2]) {
  %bn = batch_norm(%x, %g, %b, %m, %v) {epsilon=1.0000000000000001e-05} : f32[4,2]
  return %bn
})";
  EXPECT_EQ(afterPass(text, [](Graph& g) { return simplifyInference(g); }),
            R"(graph(%x: f32[4,2], %g: f32[2], %b: f32[2], %m: f32[2], %v: f32[2]) {
  %bn_eps = constant f32[] [9.99999975e-06]
  %bn_var_eps = add(%v, %bn_eps) : f32[2]
  %bn_std = sqrt(%bn_var_eps) : f32[2]
  %bn_scale = div(%g, %bn_std) : f32[2]
  %bn_mean_scaled = mul(%m, %bn_scale) : f32[2]
  %bn_shift = sub(%b, %bn_mean_scaled) : f32[2]
  %bn_scaled = mul(%x, %bn_scale) : f32[4,2]
  %bn = add(%bn_scaled, %bn_shift) : f32[4,2]
  return %bn
}
)");
}

TEST(SimplifyInference, DropsIdentitiesAndMergesReshapes) {
  const char* text = R"(graph(%x: f32[2,3,4]) {
  %c = copy(%x) : f32[2,3,4]
  %same = reshape(%c) {shape=[2,3,4]} : f32[2,3,4]
  %t = transpose(%same) {perm=[0,1,2]} : f32[2,3,4]
  %r1 = reshape(%t) {shape=[6,4]} : f32[6,4]
  %r2 = reshape(%r1) {shape=[24]} : f32[24]
  %y = relu(%r2) : f32[24]
  return %y
})";
  EXPECT_EQ(afterPass(text, [](Graph& g) { return simplifyInference(g); }), R"(graph(%x: f32[2,3,4]) {
  %r1 = reshape(%x) {shape=[6,4]} : f32[6,4]
  %r2 = reshape(%x) {shape=[24]} : f32[24]
  %y = relu(%r2) : f32[24]
  return %y
}
)");
  EXPECT_EQ(afterPipeline(text, "simplify-inference,eliminate-dead-code"), R"(graph(%x: f32[2,3,4]) {
  %r2 = reshape(%x) {shape=[24]} : f32[24]
  %y = relu(%r2) : f32[24]
  return %y
}
)");
}

TEST(SimplifyInference, LeavesOtherGraphsAlone) {
  const char* text = "graph(%x: f32[2]) {\n  %y = relu(%x) : f32[2]\n  return %y\n}";
  EXPECT_EQ(afterPass(text, [](Graph& g) { return simplifyInference(g); }),
            "graph(%x: f32[2]) {\n  %y = relu(%x) : f32[2]\n  return %y\n}\n");
}

// ---- fold-constants ------------------------------------------------------------------------

TEST(FoldConstants, EvaluatesChainsOfConstantNodes) {
  const char* text = R"(graph(%x: f32[2,2]) {
  %a = constant f32[2,2] [1, -2, 3, -4]
  %b = constant f32[2] [10, 20]
  %r = relu(%a) : f32[2,2]
  %s = add(%r, %b) : f32[2,2]
  %t = transpose(%s) {perm=[1,0]} : f32[2,2]
  %y = mul(%x, %t) : f32[2,2]
  return %y
})";
  EXPECT_EQ(afterPass(text, [](Graph& g) { return foldConstants(g); }), R"(graph(%x: f32[2,2]) {
  %a = constant f32[2,2] [1, -2, 3, -4]
  %r = constant f32[2,2] [1, 0, 3, 0]
  %b = constant f32[2] [10, 20]
  %s = constant f32[2,2] [11, 20, 13, 20]
  %t = constant f32[2,2] [11, 13, 20, 20]
  %y = mul(%x, %t) : f32[2,2]
  return %y
}
)");
}

TEST(FoldConstants, SkipsLargeBroadcasts) {
  const char* text = R"(graph(%x: f32[64,64]) {
  %one = constant f32[] [1]
  %big = constant f32[64,64] elided
  %b = add(%big, %one) : f32[64,64]
  %r = reshape(%b) {shape=[4096]} : f32[4096]
  %y = reshape(%x) {shape=[4096]} : f32[4096]
  %z = add(%y, %r) : f32[4096]
  return %z
})";
  // Without a limit both fold; with max-elements=16, add(big, one) still folds (not larger than
  // its inputs), and so does the reshape.
  PassCounters counters;
  Graph g = parseGraph(text);
  EXPECT_TRUE(foldConstants(g, {16}, &counters));
  EXPECT_EQ(counters["folded"], 2);
  const char* broadcast = R"(graph(%x: f32[64,64]) {
  %one = constant f32[] [1]
  %row = constant f32[64] elided
  %b = add(%row, %one) : f32[64]
  %big = add(%b, %x) : f32[64,64]
  %col = constant f32[64,1] elided
  %outer = mul(%col, %row) : f32[64,64]
  %z = add(%big, %outer) : f32[64,64]
  return %z
})";
  counters.clear();
  g = parseGraph(broadcast);
  EXPECT_TRUE(foldConstants(g, {16}, &counters));
  EXPECT_EQ(counters["folded"], 1);        // add(row, one): 64 elements from 65
  EXPECT_EQ(counters["skipped-size"], 1);  // the 64×64 outer product of two vectors
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

// ---- eliminate-dead-code -------------------------------------------------------------------

TEST(EliminateDeadCode, RemovesUnusedNodesAndConstants) {
  const char* text = R"(graph(%x: f32[2], %unused: f32[2]) {
  %c = constant f32[2] [1, 2]
  %d = constant f32[2] [3, 4]
  %a = add(%x, %c) : f32[2]
  %dead1 = mul(%a, %d) : f32[2]
  %dead2 = relu(%dead1) : f32[2]
  %y = neg(%a) : f32[2]
  return %y
})";
  EXPECT_EQ(afterPass(text, [](Graph& g) { return eliminateDeadCode(g); }),
            R"(graph(%x: f32[2], %unused: f32[2]) {
  %c = constant f32[2] [1, 2]
  %a = add(%x, %c) : f32[2]
  %y = neg(%a) : f32[2]
  return %y
}
)");
}

// ---- eliminate-common-subexpressions ------------------------------------------------------

TEST(EliminateCommonSubexpressions, MergesEqualNodesAndConstants) {
  const char* text = R"(graph(%x: f32[2]) {
  %c1 = constant f32[2] [1, 2]
  %c2 = constant f32[2] [1, 2]
  %a = add(%x, %c1) : f32[2]
  %b = add(%x, %c2) : f32[2]
  %ra = relu(%a) : f32[2]
  %rb = relu(%b) : f32[2]
  %l1 = leaky_relu(%ra) {alpha=0.5} : f32[2]
  %l2 = leaky_relu(%rb) {alpha=0.25} : f32[2]
  %s = add(%l1, %l2) : f32[2]
  %t = add(%ra, %rb) : f32[2]
  return %s, %t
})";
  EXPECT_EQ(afterPass(text, [](Graph& g) { return eliminateCommonSubexpressions(g); }), R"(graph(%x: f32[2]) {
  %c1 = constant f32[2] [1, 2]
  %a = add(%x, %c1) : f32[2]
  %ra = relu(%a) : f32[2]
  %l1 = leaky_relu(%ra) {alpha=0.5} : f32[2]
  %l2 = leaky_relu(%ra) {alpha=0.25} : f32[2]
  %s = add(%l1, %l2) : f32[2]
  %t = add(%ra, %ra) : f32[2]
  return %s, %t
}
)");
}

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

TEST(FoldScaleAxis, FoldsAffineChainsIntoConvWeightsAndBias) {
  EXPECT_EQ(afterPass(kConvScale, [](Graph& g) { return foldScaleAxis(g); }), R"(graph(%x: f32[1,2,4,4]) {
  %w_folded = constant f32[2,2,1,1] [0.5, 1, 0.375, 0.5]
  %w_bias_folded = constant f32[2] [3, 4.875]
  %div = conv2d(%x, %w_folded, %w_bias_folded) {groups=1} : f32[1,2,4,4]
  %y = relu(%div) : f32[1,2,4,4]
  return %y
}
)");
  expectSameNumerics(kConvScale, "fold-scale-axis");
}

TEST(FoldScaleAxis, FoldsIntoDenseAndHandlesReversedSub) {
  const char* text = R"(graph(%x: f32[3,2]) {
  %w = constant f32[2,2] [1, 2, 3, 4]
  %d = dense(%x, %w) : f32[3,2]
  %s = constant f32[2] [2, 3]
  %m = mul(%d, %s) : f32[3,2]
  %one = constant f32[] [1]
  %y = sub(%one, %m) : f32[3,2]
  return %y
})";
  EXPECT_EQ(afterPass(text, [](Graph& g) { return foldScaleAxis(g); }), R"(graph(%x: f32[3,2]) {
  %w_folded = constant f32[2,2] [-2, -4, -9, -12]
  %w_bias_folded = constant f32[2] [1, 1]
  %y = dense(%x, %w_folded, %w_bias_folded) : f32[3,2]
  return %y
}
)");
  expectSameNumerics(text, "fold-scale-axis");
}

TEST(FoldScaleAxis, StopsAtSharedValuesOutputsAndNonChannelConstants) {
  const char* text = R"(graph(%x: f32[1,2,2,2]) {
  %w = constant f32[2,2,1,1] [1, 2, 3, 4]
  %c1 = conv2d(%x, %w) {groups=1} : f32[1,2,2,2]
  %s = constant f32[2,1,1] [2, 3]
  %m1 = mul(%c1, %s) : f32[1,2,2,2]
  %r1 = relu(%c1) : f32[1,2,2,2]
  %c2 = conv2d(%x, %w) {groups=1} : f32[1,2,2,2]
  %sw = constant f32[1,1,1,2] [2, 3]
  %m2 = mul(%c2, %sw) : f32[1,2,2,2]
  %c3 = conv2d(%x, %w) {groups=1} : f32[1,2,2,2]
  return %m1, %r1, %m2, %c3
})";
  EXPECT_EQ(afterPass(text, [](Graph& g) { return foldScaleAxis(g); }),
            printGraph(parseGraph(text), {.locations = false}));
}

TEST(FoldScaleAxis, BatchNormDisappearsIntoTheConvolutionAtO3) {
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
  std::string o3 =
      "simplify-inference,fold-constants,eliminate-common-subexpressions,eliminate-dead-code,fold-scale-axis";
  std::string optimized = afterPipeline(text, o3);
  EXPECT_EQ(optimized.find("batch_norm"), std::string::npos);
  EXPECT_EQ(optimized.find("mul("), std::string::npos);
  EXPECT_NE(optimized.find("conv2d(%x, %w_folded, %w_bias_folded)"), std::string::npos) << optimized;
  expectSameNumerics(text, o3 + ",fuse-ops");
}

// ---- fold-pad-into-conv --------------------------------------------------------------------

const char* kPadConv = R"(graph(%x: f32[1,2,5,6]) {
  %w = constant f32[3,2,3,3] elided
  %b = constant f32[3] [1, -1, 0.5]
  %p = pad(%x) {mode="constant", pads=[0,0,2,1,0,0,2,1], value=0.0} : f32[1,2,9,8]
  %y = conv2d(%p, %w, %b) {groups=1, padding=[1,0], stride=[2,1]} : f32[1,3,5,6]
  return %y
})";

TEST(FoldPadIntoConv, SymmetricZeroPadBecomesTheConvolutionsPadding) {
  EXPECT_EQ(afterPass(kPadConv, [](Graph& g) { return foldPadIntoConv(g); }), R"(graph(%x: f32[1,2,5,6]) {
  %w = constant f32[3,2,3,3] elided
  %b = constant f32[3] [1, -1, 0.5]
  %y = conv2d(%x, %w, %b) {groups=1, padding=[3,1], stride=[2,1]} : f32[1,3,5,6]
  return %y
}
)");
  expectSameNumerics(kPadConv, "fold-pad-into-conv", 1e-6);
  // The default -O2 pipeline runs it.
  EXPECT_EQ(afterPipeline(kPadConv, optLevelPipelineText(2)).find("pad("), std::string::npos);
}

TEST(FoldPadIntoConv, KeepsPadsConv2dCannotExpress) {
  // Asymmetric, non-zero value, reflect, batch/channel axes, cropping: nothing folds.
  const char* text = R"(graph(%x: f32[1,2,5,6]) {
  %w = constant f32[3,2,3,3] elided
  %w4 = constant f32[3,4,3,3] elided
  %a = pad(%x) {mode="constant", pads=[0,0,1,1,0,0,2,1], value=0.0} : f32[1,2,8,8]
  %ca = conv2d(%a, %w) {groups=1} : f32[1,3,6,6]
  %b = pad(%x) {mode="constant", pads=[0,0,1,1,0,0,1,1], value=0.5} : f32[1,2,7,8]
  %cb = conv2d(%b, %w) {groups=1} : f32[1,3,5,6]
  %c = pad(%x) {mode="reflect", pads=[0,0,1,1,0,0,1,1]} : f32[1,2,7,8]
  %cc = conv2d(%c, %w) {groups=1} : f32[1,3,5,6]
  %d = pad(%x) {mode="constant", pads=[0,1,1,1,0,1,1,1], value=0.0} : f32[1,4,7,8]
  %cd = conv2d(%d, %w4) {groups=1} : f32[1,3,5,6]
  %e = pad(%x) {mode="constant", pads=[0,0,-1,0,0,0,-1,0], value=0.0} : f32[1,2,3,6]
  %ce = conv2d(%e, %w) {groups=1} : f32[1,3,1,4]
  return %ca, %cb, %cc, %cd, %ce
})";
  EXPECT_EQ(afterPass(text, [](Graph& g) { return foldPadIntoConv(g); }),
            printGraph(parseGraph(text), {.locations = false}));
}

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

}  // namespace
}  // namespace kiln::core::passes

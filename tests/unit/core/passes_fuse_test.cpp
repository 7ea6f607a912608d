// Golden text tests of fuse-ops (which groups form, their names and order; more as FileCheck
// tests in tests/filecheck/fuse_ops*.kir) and numerics of the fused kernels (core/lower/fused.cpp):
// every fused graph is lowered and interpreted and must match the same graph lowered node by node.
#include <gtest/gtest.h>

#include "core/passes/fuse_ops.h"
#include "core/tir/printer.h"
#include "tests/unit/core/passes_test_util.h"

namespace kiln::core::passes {
namespace {

using testing::afterPass;
using testing::expectSameNumerics;

std::string fused(const std::string& text, int64_t maxDepth = 256) {
  return afterPass(text, [maxDepth](Graph& g) { return fuseOps(g, FuseOpsOptions{maxDepth}); },
                   {.inlineLimit = 0, .locations = false});
}

// conv2d absorbs its bias add, relu and the residual add as an epilogue; the pooling anchor
// takes the clamp; the 1×1 conv feeding two consumers ends its group.
const char* kConvChain = R"(graph(%x: f32[1,4,6,6]) {
  %w = constant f32[4,4,3,3] elided
  %b = constant f32[4,1,1] elided
  %c1 = conv2d(%x, %w) {groups=1, padding=[1,1]} : f32[1,4,6,6]
  %a1 = add(%c1, %b) : f32[1,4,6,6]
  %r1 = relu(%a1) : f32[1,4,6,6]
  %c2 = conv2d(%r1, %w) {groups=1, padding=[1,1]} : f32[1,4,6,6]
  %a2 = add(%c2, %x) : f32[1,4,6,6]
  %r2 = relu(%a2) : f32[1,4,6,6]
  %p = max_pool2d(%r2) {kernel=[2,2], stride=[2,2]} : f32[1,4,3,3]
  %k = clamp(%p) {max=6.0, min=0.0} : f32[1,4,3,3]
  %w1 = constant f32[4,4,1,1] elided
  %c3 = conv2d(%k, %w1) {groups=1} : f32[1,4,3,3]
  %s = sigmoid(%c3) : f32[1,4,3,3]
  %t = tanh(%c3) : f32[1,4,3,3]
  return %s, %t
})";

// The groups themselves: tests/filecheck/fuse_ops.kir.
TEST(FuseOps, AnchorsWithEpiloguesComputeTheSame) { expectSameNumerics(kConvChain, "fuse-ops", 1e-4); }

// x feeds two branches that meet again: everything from the exp to the add is one group (the
// add post-dominates the exp); the mul's second operand is computed outside and read from memory.
const char* kDiamond = R"(graph(%x: f32[2,8], %y: f32[2,8]) {
  %n = neg(%y) : f32[2,8]
  %e = exp(%x) : f32[2,8]
  %a = relu(%e) : f32[2,8]
  %s = sigmoid(%e) : f32[2,8]
  %sum = add(%a, %s) : f32[2,8]
  %m = mul(%sum, %n) : f32[2,8]
  %o = exp(%n) : f32[2,8]
  return %m, %o
})";

// The group: tests/filecheck/fuse_ops_diamond.kir.
TEST(FuseOps, FusedDiamondComputesTheSame) { expectSameNumerics(kDiamond, "fuse-ops"); }

// A small value (per channel) is never broadcast inside a group: the sigmoid on [1,4,1,1] stays
// with its producer, and the mul by the big tensor starts a new group.
const char* kSqueezeExcite = R"(graph(%x: f32[1,4,5,5]) {
  %p = adaptive_avg_pool2d(%x) {output_size=[1,1]} : f32[1,4,1,1]
  %w = constant f32[4,4,1,1] elided
  %c = conv2d(%p, %w) {groups=1} : f32[1,4,1,1]
  %s = sigmoid(%c) : f32[1,4,1,1]
  %m = mul(%x, %s) : f32[1,4,5,5]
  %r = relu(%m) : f32[1,4,5,5]
  return %r
})";

TEST(FuseOps, NeverBroadcastsAValueComputedInTheGroup) {
  EXPECT_EQ(fused(kSqueezeExcite), R"(graph(%x: f32[1,4,5,5]) {
  %p = adaptive_avg_pool2d(%x) {output_size=[1,1]} : f32[1,4,1,1]
  %w = constant f32[4,4,1,1] elided
  group @fused_conv2d_sigmoid_0 {
    %c = conv2d(%p, %w) {groups=1} : f32[1,4,1,1]
    %s = sigmoid(%c) : f32[1,4,1,1]
  }
  group @fused_mul_relu_0 {
    %m = mul(%x, %s) : f32[1,4,5,5]
    %r = relu(%m) : f32[1,4,5,5]
  }
  return %r
}
)");
  expectSameNumerics(kSqueezeExcite, "fuse-ops", 1e-4);
}

// Injective ops join element chains (transposes remap the index, reshapes go through the flat
// index) but not anchor epilogues; reductions and softmax stay alone.
const char* kInjective = R"(graph(%x: f32[2,3,4], %b: f32[4,3]) {
  %t = transpose(%x) {perm=[0,2,1]} : f32[2,4,3]
  %a = add(%t, %b) : f32[2,4,3]
  %e = exp(%a) : f32[2,4,3]
  %r = reshape(%e) {shape=[8,3]} : f32[8,3]
  %w = constant f32[5,3] elided
  %d = dense(%r, %w) : f32[8,5]
  %f = reshape(%d) {shape=[40]} : f32[40]
  %g = relu(%f) : f32[40]
  %s = sum(%g) {axes=[0], keepdims=0} : f32[]
  %sm = softmax(%d) {axis=1} : f32[8,5]
  %h = neg(%sm) : f32[8,5]
  return %s, %h
})";

TEST(FuseOps, InjectiveOpsJoinElementChainsOnly) {
  EXPECT_EQ(fused(kInjective), R"(graph(%x: f32[2,3,4], %b: f32[4,3]) {
  group @fused_transpose_add_exp_reshape_0 {
    %t = transpose(%x) {perm=[0,2,1]} : f32[2,4,3]
    %a = add(%t, %b) : f32[2,4,3]
    %e = exp(%a) : f32[2,4,3]
    %r = reshape(%e) {shape=[8,3]} : f32[8,3]
  }
  %w = constant f32[5,3] elided
  %d = dense(%r, %w) : f32[8,5]
  group @fused_reshape_relu_0 {
    %f = reshape(%d) {shape=[40]} : f32[40]
    %g = relu(%f) : f32[40]
  }
  %s = sum(%g) {axes=[0], keepdims=0} : f32[]
  %sm = softmax(%d) {axis=1} : f32[8,5]
  %h = neg(%sm) : f32[8,5]
  return %s, %h
}
)");
  expectSameNumerics(kInjective, "fuse-ops", 1e-4);
}

// concat ends a group: each of its inputs is computed by its own loop nest.
const char* kConcat = R"(graph(%x: f32[2,3,4], %y: f32[2,5,4]) {
  %a = relu(%x) : f32[2,3,4]
  %s = sigmoid(%y) : f32[2,5,4]
  %k = constant f32[4] [1, 2, 3, 4]
  %m = mul(%s, %k) : f32[2,5,4]
  %c = concat(%a, %m, %x) {axis=1} : f32[2,11,4]
  %t = tanh(%c) : f32[2,11,4]
  return %t
})";

TEST(FuseOps, ConcatEndsAGroup) {
  EXPECT_EQ(fused(kConcat), R"(graph(%x: f32[2,3,4], %y: f32[2,5,4]) {
  %k = constant f32[4] elided
  group @fused_relu_sigmoid_mul_concat_0 {
    %a = relu(%x) : f32[2,3,4]
    %s = sigmoid(%y) : f32[2,5,4]
    %m = mul(%s, %k) : f32[2,5,4]
    %c = concat(%a, %m, %x) {axis=1} : f32[2,11,4]
  }
  %t = tanh(%c) : f32[2,11,4]
  return %t
}
)");
  expectSameNumerics(kConcat, "fuse-ops");
}

// take joins a chain with its table, but its indices come from outside the group: an index
// computed in the group would be recomputed for every gathered element.
TEST(FuseOps, AGatherReadsItsIndicesFromOutsideItsGroup) {
  EXPECT_EQ(fused(R"(graph(%t: f32[10,4], %x: i64[3]) {
  %one = constant i64[] [1]
  %i = add(%x, %one) : i64[3]
  %s = sigmoid(%t) : f32[10,4]
  %g = take(%s, %i) {axis=0} : f32[3,4]
  %r = relu(%g) : f32[3,4]
  return %r
})"),
            R"(graph(%t: f32[10,4], %x: i64[3]) {
  %one = constant i64[] elided
  %i = add(%x, %one) : i64[3]
  group @fused_sigmoid_take_relu_0 {
    %s = sigmoid(%t) : f32[10,4]
    %g = take(%s, %i) {axis=0} : f32[3,4]
    %r = relu(%g) : f32[3,4]
  }
  return %r
}
)");
}

const char* kLongChain = R"(graph(%x: f32[16]) {
  %a = relu(%x) : f32[16]
  %b = neg(%a) : f32[16]
  %c = exp(%b) : f32[16]
  %d = sigmoid(%c) : f32[16]
  %e = tanh(%d) : f32[16]
  return %e
})";

// The groups with and without the bound: tests/filecheck/fuse_ops_max_depth.kir.
TEST(FuseOps, DepthBoundedGroupsComputeTheSame) { expectSameNumerics(kLongChain, "fuse-ops{max-depth=2}"); }

TEST(FuseOps, BatchNormFusesAsAnElementOp) {
  const char* text = R"(graph(%x: f32[2,3,4,4]) {
  %w = constant f32[3,3,1,1] elided
  %c = conv2d(%x, %w) {groups=1} : f32[2,3,4,4]
  %g = constant f32[3] [1, 2, 0.5]
  %b = constant f32[3] [0.5, -0.5, 0]
  %m = constant f32[3] [0.25, 1, -1]
  %v = constant f32[3] [4, 0.25, 1]
  %bn = batch_norm(%c, %g, %b, %m, %v) {epsilon=1.0000000000000001e-05} : f32[2,3,4,4]
  %y = hardswish(%bn) : f32[2,3,4,4]
  return %y
})";
  Graph g = parseGraph(text);
  EXPECT_TRUE(fuseOps(g));
  ASSERT_EQ(g.groups().size(), 1u);
  EXPECT_EQ(g.groups()[0].name, "fused_conv2d_batch_norm_hardswish_0");
  expectSameNumerics(text, "fuse-ops", 1e-4);
}

TEST(FuseOps, EqualGroupsShareOneKernel) {
  const char* text = R"(graph(%x: f32[1,4,6,6]) {
  %w = constant f32[4,4,3,3] elided
  %b = constant f32[4] elided
  %c1 = conv2d(%x, %w, %b) {groups=1, padding=[1,1]} : f32[1,4,6,6]
  %r1 = relu(%c1) : f32[1,4,6,6]
  %w2 = constant f32[4,4,3,3] elided
  %c2 = conv2d(%r1, %w2, %b) {groups=1, padding=[1,1]} : f32[1,4,6,6]
  %r2 = relu(%c2) : f32[1,4,6,6]
  %c3 = conv2d(%r2, %w2, %b) {groups=1, padding=[1,1]} : f32[1,4,6,6]
  %r3 = clamp(%c3) {max=6.0, min=0.0} : f32[1,4,6,6]
  return %r3
})";
  Graph g = parseGraph(text);
  ASSERT_TRUE(fuseOps(g));
  ASSERT_EQ(g.groups().size(), 3u);
  EXPECT_EQ(g.groups()[0].name, "fused_conv2d_relu_0");
  EXPECT_EQ(g.groups()[1].name, "fused_conv2d_relu_1");
  EXPECT_EQ(g.groups()[2].name, "fused_conv2d_clamp_0");
  EXPECT_EQ(lower::groupWorkloadKey(g, 0), lower::groupWorkloadKey(g, 1));
  EXPECT_NE(lower::groupWorkloadKey(g, 0), lower::groupWorkloadKey(g, 2));
  EXPECT_EQ(lower::groupWorkloadKey(g, 0),
            "fused[conv2d{groups=1,padding=[1,1]}($0:f32[1,4,6,6],$1:f32[4,4,3,3],$2:f32[4])->f32[1,4,6,6]; "
            "relu(%0)->f32[1,4,6,6]]");
  lower::LoweredModule m = lower::lowerGraph(g);
  ASSERT_EQ(m.funcs.size(), 2u);
  EXPECT_EQ(m.funcs[0].name, "fused_conv2d_relu_0");
  EXPECT_EQ(m.funcs[0].attrs.at("op"), "fused");
  EXPECT_EQ(m.funcs[0].attrs.at("ops"), "conv2d,relu");
  EXPECT_EQ(m.funcs[1].name, "fused_conv2d_clamp_0");
  ASSERT_EQ(m.plan.calls.size(), 3u);
  EXPECT_EQ(m.plan.calls[1].kernel, "fused_conv2d_relu_0");
  EXPECT_EQ(m.plan.calls[1].node, "%r2 = @fused_conv2d_relu_1");
  EXPECT_EQ(m.plan.calls[1].args.size(), 4u);  // r1, w2, b, r2
  for (const auto& slot : m.plan.slots) EXPECT_NE(slot.name, "c1") << "group intermediates need no memory";
  expectSameNumerics(text, "fuse-ops", 1e-4);
}

TEST(FuseOps, RunsOnceAndLeavesUnfusableGraphsAlone) {
  Graph g = parseGraph(kConvChain);
  EXPECT_TRUE(fuseOps(g));
  Graph again = g;
  EXPECT_FALSE(fuseOps(again));
  EXPECT_TRUE(again == g);
  EXPECT_EQ(fused("graph(%x: f32[2]) {\n  %y = relu(%x) : f32[2]\n  return %y\n}"),
            "graph(%x: f32[2]) {\n  %y = relu(%x) : f32[2]\n  return %y\n}\n");
}

TEST(FusedLowering, LayoutTransformsRemapTheIndex) {
  const char* text = R"(graph(%x: f32[2,8,3,3], %y: f32[2,2,3,3,4]) {
  %p = layout_transform(%x) {dst="NCHW4c", src="NCHW"} : f32[2,2,3,3,4]
  %a = add(%p, %y) : f32[2,2,3,3,4]
  %q = layout_transform(%a) {dst="NCHW2c", src="NCHW4c"} : f32[2,4,3,3,2]
  %r = relu(%q) : f32[2,4,3,3,2]
  %u = layout_transform(%r) {dst="NCHW", src="NCHW2c"} : f32[2,8,3,3]
  %f = reshape(%u) {shape=[2,72]} : f32[2,72]
  return %f
})";
  Graph g = parseGraph(text);
  ASSERT_TRUE(fuseOps(g));
  ASSERT_EQ(g.groups().size(), 1u);
  EXPECT_EQ(g.groups()[0].size(), 6);
  expectSameNumerics(text, "fuse-ops");
}

// The conv2d and dense lowerings store vectors: the epilogue then gets a Ramp innermost index.
// The residual is read with vector loads along it, the per-channel bias (constant along the
// vector) with a scalar load broadcast to the lanes.
TEST(FusedLowering, VectorEpiloguesLoadAlongTheRamp) {
  const char* conv = R"(graph(%x: f32[1,16,6,32], %res: f32[1,16,6,32]) {
  %w = constant f32[16,16,3,3] elided
  %b = constant f32[16,1,1] elided
  %c = conv2d(%x, %w) {groups=1, padding=[1,1]} : f32[1,16,6,32]
  %a = add(%c, %b) : f32[1,16,6,32]
  %s = add(%a, %res) : f32[1,16,6,32]
  %r = relu(%s) : f32[1,16,6,32]
  return %r
})";
  Graph g = parseGraph(conv);
  ASSERT_TRUE(fuseOps(g));
  std::string tir = tir::print(lower::lowerGroup(g, 0, "f"));
  EXPECT_NE(tir.find("res[ramp("), std::string::npos) << tir;
  EXPECT_NE(tir.find("x8(b["), std::string::npos) << tir;  // x8(...): a broadcast
  expectSameNumerics(conv, "fuse-ops", 1e-4);

  const char* dense = R"(graph(%x: f32[5,24], %res: f32[5,40]) {
  %w = constant f32[40,24] elided
  %b = constant f32[40] elided
  %d = dense(%x, %w, %b) : f32[5,40]
  %s = sub(%d, %res) : f32[5,40]
  %r = hardswish(%s) : f32[5,40]
  return %r
})";
  expectSameNumerics(dense, "fuse-ops", 1e-4);
}

// A chain without broadcasts or transposes is one flat loop, which its sketch (nest_search.h)
// cuts into vectors of the target's lanes (8 by default).
TEST(FusedLowering, FlatChainIsOneLoop) {
  const char* text = R"(graph(%x: f32[4,64], %y: f32[256]) {
  %r = reshape(%x) {shape=[256]} : f32[256]
  %a = add(%r, %y) : f32[256]
  %e = sigmoid(%a) : f32[256]
  return %e
})";
  Graph g = parseGraph(text);
  ASSERT_TRUE(fuseOps(g));
  tir::PrimFunc f = lower::lowerGroup(g, 0, "f");
  EXPECT_EQ(tir::print(f), R"(func f(x: f32[4,64], y: f32[256], e: f32[256]) {
  for (i_o, 0, 32) {
    e[ramp((i_o * 8), 1, 8)] = sigmoid((x[ramp((i_o * 8), 1, 8)] + y[ramp((i_o * 8), 1, 8)]))
  }
}
)");
  EXPECT_EQ(f.attrs.at("trace"), "split(i; 8, 1)\nvectorize(i_i)\n");
  expectSameNumerics(text, "fuse-ops");
}

TEST(FusedLowering, EpilogueLoadsBiasAndResidualPerElement) {
  const char* text = R"(graph(%x: f32[1,3,2,2], %res: f32[1,3,2,2]) {
  %w = constant f32[3,3] elided
  %p = adaptive_avg_pool2d(%x) {output_size=[2,2]} : f32[1,3,2,2]
  %b = constant f32[3,1,1] [1, 2, 3]
  %a = add(%p, %b) : f32[1,3,2,2]
  %s = add(%a, %res) : f32[1,3,2,2]
  return %s
})";
  Graph g = parseGraph(text);
  ASSERT_TRUE(fuseOps(g));
  tir::PrimFunc f = lower::lowerGroup(g, 0, "f");
  // The pool's plain window nest (nest_search.h): one accumulator per output, the epilogue where
  // it is stored.
  EXPECT_EQ(tir::print(f), R"(func f(x: f32[1,3,2,2], b: f32[3,1,1], res: f32[1,3,2,2], s: f32[1,3,2,2]) {
  for (c, 0, 3) {
    for (oh, 0, 2) {
      for (ow, 0, 2) {
        allocate acc: f32[1]
        acc[0] = 0.0f
        for (kh, oh, ((oh + 1) - oh)) {
          for (kw, ow, ((ow + 1) - ow)) {
            acc[0] = (acc[0] + x[(((c * 4) + (kh * 2)) + kw)])
          }
        }
        s[(((c * 4) + (oh * 2)) + ow)] = (((acc[0] / f32((((oh + 1) - oh) * ((ow + 1) - ow)))) + b[c]) + res[(((c * 4) + (oh * 2)) + ow)])
      }
    }
  }
}
)");
  expectSameNumerics(text, "fuse-ops");
}

// ---- reductions fused with the element ops producing their input ------------------------------

// mean(relu(add(x, y))) is one group with the mean as its root; the sum of exp(x) takes the exp;
// the following div (a different shape) stays out. Odd shapes throughout.
const char* kReduceChains = R"(graph(%x: f32[3,5,7], %y: f32[3,5,7], %z: f32[4,19]) {
  %a = add(%x, %y) : f32[3,5,7]
  %r = relu(%a) : f32[3,5,7]
  %m = mean(%r) {axes=[2], keepdims=0} : f32[3,5]
  %e = exp(%z) : f32[4,19]
  %s = sum(%e) {axes=[1], keepdims=1} : f32[4,1]
  %two = constant f32[] [2]
  %d = div(%s, %two) : f32[4,1]
  return %m, %d
})";

TEST(FuseReductions, ReductionTakesItsElementwiseProducers) {
  EXPECT_EQ(fused(kReduceChains), R"(graph(%x: f32[3,5,7], %y: f32[3,5,7], %z: f32[4,19]) {
  group @fused_add_relu_mean_0 {
    %a = add(%x, %y) : f32[3,5,7]
    %r = relu(%a) : f32[3,5,7]
    %m = mean(%r) {axes=[2], keepdims=0} : f32[3,5]
  }
  group @fused_exp_sum_0 {
    %e = exp(%z) : f32[4,19]
    %s = sum(%e) {axes=[1], keepdims=1} : f32[4,1]
  }
  %two = constant f32[] elided
  %d = div(%s, %two) : f32[4,1]
  return %m, %d
}
)");
  lower::LoweredModule m = expectSameNumerics(kReduceChains, "fuse-ops", 1e-5);
  for (const auto& slot : m.plan.slots) {
    EXPECT_NE(slot.name, "r") << "the reduction's input never reaches memory";
    EXPECT_NE(slot.name, "e") << "the reduction's input never reaches memory";
  }
}

// exp(x) feeds both the sum and the div after it (a hand-written softmax): its post-dominator is
// the div, which cannot join a reduction group, so the sum reads exp(x) from memory.
const char* kSharedProducer = R"(graph(%x: f32[2,9]) {
  %e = exp(%x) : f32[2,9]
  %s = sum(%e) {axes=[1], keepdims=1} : f32[2,1]
  %d = div(%e, %s) : f32[2,9]
  return %d
})";

TEST(FuseReductions, AProducerUsedAfterTheReductionStaysOut) {
  EXPECT_EQ(fused(kSharedProducer), R"(graph(%x: f32[2,9]) {
  %e = exp(%x) : f32[2,9]
  %s = sum(%e) {axes=[1], keepdims=1} : f32[2,1]
  %d = div(%e, %s) : f32[2,9]
  return %d
}
)");
}

// Broadcast operands (a per-channel scale, a row bias) are read per axis inside the reduction;
// a reduction never follows an anchor in one group, nor another reduction.
const char* kReduceBroadcast = R"(graph(%x: f32[2,3,5,9], %v: f32[3,37]) {
  %g = constant f32[3,1,1] elided
  %b = constant f32[37] elided
  %s = mul(%x, %g) : f32[2,3,5,9]
  %t = tanh(%s) : f32[2,3,5,9]
  %m = mean(%t) {axes=[2,3], keepdims=1} : f32[2,3,1,1]
  %w = constant f32[4,37] elided
  %d = dense(%v, %w) : f32[3,4]
  %q = sum(%d) {axes=[1], keepdims=0} : f32[3]
  %u = add(%v, %b) : f32[3,37]
  %k = sigmoid(%u) : f32[3,37]
  %n = sum(%k) {axes=[1], keepdims=0} : f32[3]
  %o = sum(%n) {axes=[0], keepdims=0} : f32[]
  return %m, %q, %o
})";

TEST(FuseReductions, BroadcastOperandsAndGroupBoundaries) {
  EXPECT_EQ(fused(kReduceBroadcast), R"(graph(%x: f32[2,3,5,9], %v: f32[3,37]) {
  %g = constant f32[3,1,1] elided
  group @fused_mul_tanh_mean_0 {
    %s = mul(%x, %g) : f32[2,3,5,9]
    %t = tanh(%s) : f32[2,3,5,9]
    %m = mean(%t) {axes=[2,3], keepdims=1} : f32[2,3,1,1]
  }
  %w = constant f32[4,37] elided
  %d = dense(%v, %w) : f32[3,4]
  %q = sum(%d) {axes=[1], keepdims=0} : f32[3]
  %b = constant f32[37] elided
  group @fused_add_sigmoid_sum_0 {
    %u = add(%v, %b) : f32[3,37]
    %k = sigmoid(%u) : f32[3,37]
    %n = sum(%k) {axes=[1], keepdims=0} : f32[3]
  }
  %o = sum(%n) {axes=[0], keepdims=0} : f32[]
  return %m, %q, %o
}
)");
  expectSameNumerics(kReduceBroadcast, "fuse-ops", 1e-5);
}

// The vector path of a fused reduction: a flat prologue loads along the reduced span (one Ramp
// per accumulator); a broadcast operand along the last axis is read per axis.
TEST(FuseReductions, FusedReductionsReadTheirInputInVectors) {
  Graph g = parseGraph(kReduceChains);
  ASSERT_TRUE(fuseOps(g));
  std::string flat = tir::print(lower::lowerGroup(g, 1, "f"));
  EXPECT_NE(flat.find("exp(z[ramp("), std::string::npos) << flat;
  Graph b = parseGraph(kReduceBroadcast);
  ASSERT_TRUE(fuseOps(b));
  std::string perAxis = tir::print(lower::lowerGroup(b, 1, "f"));
  EXPECT_NE(perAxis.find("b[ramp("), std::string::npos) << perAxis;
  EXPECT_NE(perAxis.find("v[ramp("), std::string::npos) << perAxis;
}

// A global mean over H and W (pool-to-mean's) after a per-channel scale and shift, and after a
// scalar scale: every value is of the input's shape or constant along H and W, so the input is
// still read in vectors along the reduced span. A bias that varies along H and W would make it
// scalar, so it stays out (rule 3c). All three compute the same as unfused.
const char* kPlaneMeans = R"(graph(%x: f32[2,3,5,9]) {
  %g = constant f32[3,1,1] elided
  %sh = constant f32[1,3,1,1] elided
  %p = constant f32[5,9] elided
  %half = constant f32[] [0.5]
  %s = mul(%x, %g) : f32[2,3,5,9]
  %t = add(%s, %sh) : f32[2,3,5,9]
  %r = relu(%t) : f32[2,3,5,9]
  %m = mean(%r) {axes=[2,3], keepdims=1} : f32[2,3,1,1]
  %h = mul(%x, %half) : f32[2,3,5,9]
  %m2 = mean(%h) {axes=[2,3], keepdims=1} : f32[2,3,1,1]
  %q = add(%x, %p) : f32[2,3,5,9]
  %m3 = mean(%q) {axes=[2,3], keepdims=1} : f32[2,3,1,1]
  return %m, %m2, %m3
})";

TEST(FuseReductions, PerChannelAndScalarOperandsKeepTheVectorPath) {
  Graph g = parseGraph(kPlaneMeans);
  ASSERT_TRUE(fuseOps(g));
  std::map<std::string, std::string> code;
  for (int i = 0; i < static_cast<int>(g.groups().size()); ++i)
    code[g.groups()[i].name] = tir::print(lower::lowerGroup(g, i, "f"));
  ASSERT_EQ(code.size(), 2u);
  EXPECT_NE(code["fused_mul_add_relu_mean_0"].find("x[ramp("), std::string::npos)
      << code["fused_mul_add_relu_mean_0"];
  EXPECT_NE(code["fused_mul_mean_0"].find("x[ramp("), std::string::npos) << code["fused_mul_mean_0"];
  EXPECT_EQ(code.count("fused_add_mean_0"), 0u);
  expectSameNumerics(kPlaneMeans, "fuse-ops", 1e-5);
}

}  // namespace
}  // namespace kiln::core::passes

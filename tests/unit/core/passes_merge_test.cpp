// Golden text tests of merge-parallel (which siblings merge, the wide op and its slices; more as
// FileCheck tests in tests/filecheck/merge_parallel*.kir) and numerics of merged graphs against
// the same graph unmerged (lowered and interpreted), alone and followed by fuse-ops, which fuses
// the slices with the ops after them.
#include <gtest/gtest.h>

#include "core/passes/merge_parallel.h"
#include "tests/unit/core/passes_test_util.h"

namespace kiln::core::passes {
namespace {

using testing::afterPass;
using testing::expectSameNumerics;

std::string merged(const std::string& text, PassCounters* counters = nullptr) {
  return afterPass(text, [counters](Graph& g) { return mergeParallel(g, counters); },
                   {.inlineLimit = 0, .locations = false});
}

// An Inception-like block: three 1×1 convolutions of one input (one without a bias), each with
// its relu, concatenated. A 3×3 convolution of the same input and a 1×1 with stride 2 differ in
// kernel size and attributes and stay alone.
const char* kInception = R"(graph(%x: f32[1,6,7,7]) {
  %w1 = constant f32[5,6,1,1] elided
  %b1 = constant f32[5] elided
  %w2 = constant f32[3,6,1,1] elided
  %w3 = constant f32[4,6,1,1] elided
  %b3 = constant f32[4] elided
  %w4 = constant f32[2,6,3,3] elided
  %c1 = conv2d(%x, %w1, %b1) {groups=1} : f32[1,5,7,7]
  %c2 = conv2d(%x, %w2) {groups=1} : f32[1,3,7,7]
  %c3 = conv2d(%x, %w3, %b3) {groups=1} : f32[1,4,7,7]
  %c4 = conv2d(%x, %w4) {groups=1, padding=[1,1]} : f32[1,2,7,7]
  %c5 = conv2d(%x, %w3) {groups=1, stride=[2,2]} : f32[1,4,4,4]
  %r1 = relu(%c1) : f32[1,5,7,7]
  %r2 = relu(%c2) : f32[1,3,7,7]
  %r3 = relu(%c3) : f32[1,4,7,7]
  %cat = concat(%r1, %r2, %r3, %c4) {axis=1} : f32[1,14,7,7]
  return %cat, %c5
})";

// The wide op, its slices and the pass's counters: tests/filecheck/merge_parallel.kir.
TEST(MergeParallel, WideConvolutionComputesTheSame) {
  expectSameNumerics(kInception, "merge-parallel", 1e-5);
  // Fused afterwards, the slices, relus and the concat are one kernel.
  lower::LoweredModule m = expectSameNumerics(kInception, "merge-parallel,fuse-ops", 1e-5);
  EXPECT_EQ(m.plan.calls.size(), 4u);  // wide conv, 3×3 conv, stride-2 conv, slices+relus+concat
}

// Two dense heads on one sequence (one with a bias, one without: it gets zeros), and a third
// with a different input width that cannot join. Biases are concatenated in member order.
const char* kHeads = R"(graph(%x: f32[2,3,2], %y: f32[2,5]) {
  %wa = constant f32[2,2] [1, 2, 3, 4]
  %ba = constant f32[2] [10, 20]
  %wb = constant f32[3,2] [1, 0, 0, 1, 1, 1]
  %wc = constant f32[2,5] elided
  %a = dense(%x, %wa, %ba) : f32[2,3,2]
  %b = dense(%x, %wb) : f32[2,3,3]
  %c = dense(%y, %wc) : f32[2,2]
  %s = sigmoid(%b) : f32[2,3,3]
  return %a, %s, %c
})";

// The merged heads: tests/filecheck/merge_parallel_dense.kir.
TEST(MergeParallel, MergedDenseHeadsComputeTheSame) {
  expectSameNumerics(kHeads, "merge-parallel", 1e-5);
  expectSameNumerics(kHeads, "merge-parallel,fuse-ops", 1e-5);
}

// Packed convolutions (after alter-layout) merge in their layout: weights concatenate along the
// output-block axis and the slices count channel blocks.
const char* kPacked = R"(graph(%x: f32[1,2,5,5,4]) {
  %w1 = constant f32[1,2,1,1,4,4] elided
  %b1 = constant f32[4] elided
  %w2 = constant f32[2,2,1,1,4,4] elided
  %b2 = constant f32[8] elided
  %c1 = conv2d_nchwc(%x, %w1, %b1) {groups=1, out_layout="NCHW4c"} : f32[1,1,5,5,4]
  %c2 = conv2d_nchwc(%x, %w2, %b2) {groups=1, out_layout="NCHW4c"} : f32[1,2,5,5,4]
  %r = relu(%c1) : f32[1,1,5,5,4]
  %t = tanh(%c2) : f32[1,2,5,5,4]
  return %r, %t
})";

TEST(MergeParallel, PackedConvolutionsMergeByChannelBlocks) {
  EXPECT_EQ(merged(kPacked), R"(graph(%x: f32[1,2,5,5,4]) {
  %c1_merged_weight = constant f32[3,2,1,1,4,4] elided
  %c1_merged_bias = constant f32[12] elided
  %c1_merged = conv2d_nchwc(%x, %c1_merged_weight, %c1_merged_bias) {groups=1, out_layout="NCHW4c"} : f32[1,3,5,5,4]
  %c1 = strided_slice(%c1_merged) {begin=[0,0,0,0,0], end=[1,1,5,5,4], strides=[1,1,1,1,1]} : f32[1,1,5,5,4]
  %c2 = strided_slice(%c1_merged) {begin=[0,1,0,0,0], end=[1,3,5,5,4], strides=[1,1,1,1,1]} : f32[1,2,5,5,4]
  %r = relu(%c1) : f32[1,1,5,5,4]
  %t = tanh(%c2) : f32[1,2,5,5,4]
  return %r, %t
}
)");
  expectSameNumerics(kPacked, "merge-parallel", 1e-5);
  expectSameNumerics(kPacked, "merge-parallel,fuse-ops", 1e-5);
}

// Nothing merges (different inputs, grouped convolutions, computed weights):
// tests/filecheck/merge_parallel_keeps.kir.

}  // namespace
}  // namespace kiln::core::passes

// Numerics of reductions fused with the element ops producing their input (fuse-ops, O2; the
// prologue of core/lower/ops_reduce.cpp): each graph runs fused, in the TIR interpreter and as
// JIT-compiled code, and must match the same graph lowered node by node. Shapes are odd on
// purpose (reduced spans that leave a vector tail, spans shorter than a vector, one element), and
// cover every path: flat prologues and per-axis ones (broadcast operands), trailing and leading
// reduced axes, keepdims, a reduction of everything; sums and means, maxima and minima.
#include <gtest/gtest.h>

#include "core/ir/parser.h"
#include "core/passes/fuse_ops.h"
#include "core/tir/printer.h"
#include "tests/unit/core/kernels_test_util.h"

namespace kiln::core::lower {
namespace {

using testing::allClose;
using testing::Engine;
using testing::evalGraph;
using testing::randomTensor;
using testing::toVector;

struct ReduceCase {
  const char* name;
  const char* text;
  size_t groups;  // fused groups expected, each with a reduction root
};

/// gtest prints a parameter with this (test names listed by ctest stay short and stable).
void PrintTo(const ReduceCase& c, std::ostream* os) { *os << c.name; }

const ReduceCase kCases[] = {
    {"flat_trailing_tail", R"(graph(%x: f32[3,5,37], %y: f32[3,5,37]) {
  %a = add(%x, %y) : f32[3,5,37]
  %r = relu(%a) : f32[3,5,37]
  %m = mean(%r) {axes=[2], keepdims=0} : f32[3,5]
  return %m
})",
     1},
    {"flat_two_trailing_axes", R"(graph(%x: f32[2,3,5,7]) {
  %e = exp(%x) : f32[2,3,5,7]
  %s = sum(%e) {axes=[2,3], keepdims=1} : f32[2,3,1,1]
  return %s
})",
     1},
    {"flat_short_span", R"(graph(%x: f32[4,3]) {
  %t = tanh(%x) : f32[4,3]
  %s = sum(%t) {axes=[1], keepdims=0} : f32[4]
  return %s
})",
     1},
    {"per_axis_row_bias", R"(graph(%v: f32[3,37], %b: f32[37]) {
  %u = add(%v, %b) : f32[3,37]
  %k = sigmoid(%u) : f32[3,37]
  %n = sum(%k) {axes=[1], keepdims=0} : f32[3]
  return %n
})",
     1},
    {"per_axis_channel_scale_two_axes", R"(graph(%x: f32[2,3,5,9], %g: f32[3,1,1]) {
  %s = mul(%x, %g) : f32[2,3,5,9]
  %t = gelu(%s) {approximate="none"} : f32[2,3,5,9]
  %m = mean(%t) {axes=[2,3], keepdims=1} : f32[2,3,1,1]
  return %m
})",
     1},
    {"leading_axis", R"(graph(%x: f32[7,5,3], %y: f32[5,3]) {
  %d = sub(%x, %y) : f32[7,5,3]
  %q = mul(%d, %d) : f32[7,5,3]
  %m = mean(%q) {axes=[0], keepdims=0} : f32[5,3]
  return %m
})",
     1},
    {"middle_axis_per_axis", R"(graph(%x: f32[2,11,9], %c: f32[11,1]) {
  %a = add(%x, %c) : f32[2,11,9]
  %h = hardswish(%a) : f32[2,11,9]
  %s = sum(%h) {axes=[1], keepdims=1} : f32[2,1,9]
  return %s
})",
     1},
    {"everything_to_a_scalar", R"(graph(%x: f32[5,13], %y: f32[]) {
  %a = maximum(%x, %y) : f32[5,13]
  %e = exp(%a) : f32[5,13]
  %s = sum(%e) {axes=[0,1], keepdims=0} : f32[]
  return %s
})",
     1},
    {"abs_max_to_a_scalar", R"(graph(%x: f32[61,67], %y: f32[61,67]) {
  %d = sub(%x, %y) : f32[61,67]
  %a = abs(%d) : f32[61,67]
  %m = max(%a) {axes=[0,1], keepdims=0} : f32[]
  return %m
})",
     1},
    {"min_trailing_axis_per_axis", R"(graph(%x: f32[3,4,45], %b: f32[45]) {
  %u = add(%x, %b) : f32[3,4,45]
  %n = neg(%u) : f32[3,4,45]
  %m = min(%n) {axes=[2], keepdims=1} : f32[3,4,1]
  return %m
})",
     1},
    {"max_leading_axis", R"(graph(%x: f32[9,5,3]) {
  %t = tanh(%x) : f32[9,5,3]
  %m = max(%t) {axes=[0], keepdims=0} : f32[5,3]
  return %m
})",
     1},
    {"batch_norm_then_mean", R"(graph(%x: f32[2,4,3,19]) {
  %g = constant f32[4] [1, 0.5, 2, 1.5]
  %b = constant f32[4] [0, 0.1, -0.2, 0.3]
  %mu = constant f32[4] [0.1, 0, -0.1, 0.2]
  %var = constant f32[4] [1, 2, 0.5, 1]
  %n = batch_norm(%x, %g, %b, %mu, %var) {epsilon=0.00001} : f32[2,4,3,19]
  %r = relu(%n) : f32[2,4,3,19]
  %m = mean(%r) {axes=[3], keepdims=0} : f32[2,4,3]
  return %m
})",
     1},
};

class FusedReduce : public ::testing::TestWithParam<ReduceCase> {};

TEST_P(FusedReduce, MatchesUnfusedInInterpreterAndJit) {
  const ReduceCase& c = GetParam();
  Graph plain = parseGraph(c.text);
  Graph fused = plain;
  ASSERT_TRUE(passes::fuseOps(fused));
  ASSERT_EQ(fused.groups().size(), c.groups);
  for (const FusedGroup& g : fused.groups()) {
    const std::string& op = fused.node(g.root()).op;
    EXPECT_TRUE(op == "mean" || op == "sum" || op == "max" || op == "min") << g.name;
  }
  std::vector<runtime::Tensor> inputs;
  for (size_t i = 0; i < plain.inputs().size(); ++i)
    inputs.push_back(
        randomTensor(plain.type(plain.inputs()[i]).shape, 100 + static_cast<uint32_t>(i), -2.0f, 2.0f));
  std::vector<float> expected = toVector(evalGraph(plain, inputs, Engine::Interpreter)[0]);
  for (int lanes : {8, 16}) {
    LowerOptions options;
    options.vectorLanes = lanes;
    EXPECT_TRUE(allClose(evalGraph(fused, inputs, Engine::Interpreter, options)[0], expected, 1e-5))
        << c.name << " interpreter, " << lanes << " lanes";
    if (lanes == 8) {  // the host JIT: AVX2 vectors
      EXPECT_TRUE(allClose(evalGraph(fused, inputs, Engine::Jit, options)[0], expected, 1e-5))
          << c.name << " JIT";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Graphs, FusedReduce, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<ReduceCase>& info) {
                           return std::string(info.param.name);
                         });

}  // namespace
}  // namespace kiln::core::lower

// Vectorized reductions and softmax (ops_reduce.cpp): mean/sum over trailing axes (vector
// accumulators and a lane reduction) and over other axes (scalar), softmax along the last axis
// (vector passes with a scalar tail) and along others — interpreter and JIT against plain C++.
#include <cmath>

#include "tests/unit/core/kernels_test_util.h"

namespace kiln::core::lower {
namespace {

using namespace testing;

LowerOptions lanesOf(int lanes) {
  LowerOptions o;
  o.vectorLanes = lanes;
  return o;
}

void checkReduce(const std::string& op, const Shape& xs, std::vector<int64_t> axes, int lanes) {
  SCOPED_TRACE(op + " x" + runtime::shapeString(xs) + " lanes=" + std::to_string(lanes));
  runtime::Tensor x = randomTensor(xs, 3);
  Graph g;
  g.setOutputs({g.add(op, {g.addInput("x", TensorType{DType::Float32, xs})},
                      Attrs{{"axes", axes}, {"keepdims", int64_t{0}}})});
  // Reference: accumulate every element into its output (the kept axes' flat index).
  int64_t rank = static_cast<int64_t>(xs.size());
  std::vector<bool> reduced(xs.size(), false);
  int64_t count = 1;
  for (int64_t a : axes) {
    reduced[static_cast<size_t>(a < 0 ? a + rank : a)] = true;
    count *= xs[static_cast<size_t>(a < 0 ? a + rank : a)];
  }
  std::vector<double> acc(static_cast<size_t>(x.numel() / count), 0.0);
  std::vector<int64_t> idx(xs.size(), 0);
  for (int64_t flat = 0; flat < x.numel(); ++flat) {
    int64_t rest = flat, out = 0;
    for (size_t d = xs.size(); d-- > 0;) {
      idx[d] = rest % xs[d];
      rest /= xs[d];
    }
    for (size_t d = 0; d < xs.size(); ++d)
      if (!reduced[d]) out = out * xs[d] + idx[d];
    acc[static_cast<size_t>(out)] += x.data<float>()[flat];
  }
  std::vector<float> expected;
  for (double v : acc) expected.push_back(static_cast<float>(op == "mean" ? v / double(count) : v));
  for (Engine e : {Engine::Interpreter, Engine::Jit})
    EXPECT_TRUE(allClose(evalGraph(g, {x}, e, lanesOf(lanes))[0], expected, 1e-5)) << (e == Engine::Jit ? "jit" : "interp");
}

TEST(KernelsReduce, TrailingAndOtherAxes) {
  checkReduce("mean", {2, 8, 7, 7}, {2, 3}, 16);   // SE-style spatial mean: 49 = 3·16 + 1
  checkReduce("sum", {3, 100}, {-1}, 8);           // 100 = 12·8 + 4
  checkReduce("mean", {4, 5, 6}, {1, 2}, 16);      // span 30 < 2 vectors
  checkReduce("sum", {4, 3}, {1}, 16);             // span shorter than a vector: scalar
  checkReduce("mean", {6, 20, 3}, {0, 2}, 8);      // not trailing: scalar
  checkReduce("sum", {2, 300}, {1}, 16);           // several rounds of 4 accumulators
}

void checkSoftmax(const Shape& xs, int64_t axis, int lanes) {
  SCOPED_TRACE("softmax x" + runtime::shapeString(xs) + " axis=" + std::to_string(axis) + " lanes=" + std::to_string(lanes));
  runtime::Tensor x = randomTensor(xs, 9, -6.0f, 6.0f);
  Graph g;
  g.setOutputs({g.add("softmax", {g.addInput("x", TensorType{DType::Float32, xs})}, Attrs{{"axis", axis}})});
  int64_t rank = static_cast<int64_t>(xs.size()), a = axis < 0 ? axis + rank : axis;
  int64_t outer = 1, inner = 1, len = xs[static_cast<size_t>(a)];
  for (int64_t d = 0; d < a; ++d) outer *= xs[static_cast<size_t>(d)];
  for (int64_t d = a + 1; d < rank; ++d) inner *= xs[static_cast<size_t>(d)];
  std::vector<float> expected(static_cast<size_t>(x.numel()));
  const float* p = x.data<float>();
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      double m = -INFINITY, s = 0;
      for (int64_t l = 0; l < len; ++l) m = std::max(m, double(p[(o * len + l) * inner + i]));
      for (int64_t l = 0; l < len; ++l) s += std::exp(double(p[(o * len + l) * inner + i]) - m);
      for (int64_t l = 0; l < len; ++l)
        expected[static_cast<size_t>((o * len + l) * inner + i)] = static_cast<float>(std::exp(double(p[(o * len + l) * inner + i]) - m) / s);
    }
  for (Engine e : {Engine::Interpreter, Engine::Jit})
    EXPECT_TRUE(allClose(evalGraph(g, {x}, e, lanesOf(lanes))[0], expected, 1e-5)) << (e == Engine::Jit ? "jit" : "interp");
}

TEST(KernelsSoftmax, LastAxisVectorizedWithTail) {
  checkSoftmax({1, 1000}, -1, 16);
  checkSoftmax({3, 37}, 1, 8);
  checkSoftmax({2, 5}, 1, 16);      // shorter than a vector
  checkSoftmax({2, 6, 4}, 1, 16);   // not the last axis: strided, scalar
}

}  // namespace
}  // namespace kiln::core::lower

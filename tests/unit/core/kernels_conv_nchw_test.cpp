// conv2d in plain NCHW (the register-tiled, column-vectorized schedule of ops_nn.cpp):
// interpreter and JIT against a plain C++ convolution on random shapes — odd sizes, stride 2,
// dilation, padding wider than the kernel's half, grouped and depthwise — at several vector
// widths.
#include <random>

#include "core/lower/schedule.h"
#include "tests/unit/core/kernels_test_util.h"

namespace kiln::core::lower {
namespace {

using namespace testing;

void checkNchwConv(const ConvCase& p, int lanes, bool interpreter, uint32_t seed = 3) {
  SCOPED_TRACE(p.str() + " lanes=" + std::to_string(lanes));
  LowerOptions options;
  options.vectorLanes = lanes;
  options.vectorRegisters = kiln::core::lower::vectorRegistersForLanes(lanes);
  Graph g;
  runtime::Tensor x = randomTensor({p.n, p.c, p.h, p.w}, seed);
  runtime::Tensor w = randomTensor({p.oc, p.c / p.groups, p.kh, p.kw}, seed + 1);
  runtime::Tensor b = randomTensor({p.oc}, seed + 2);
  ValueId xv = g.addInput("x", TensorType{DType::Float32, x.shape()});
  std::vector<ValueId> inputs = {xv, g.addConstant("w", w)};
  if (p.bias) inputs.push_back(g.addConstant("b", b));
  g.setOutputs({g.add("conv2d", inputs, convAttrs(p))});
  std::vector<float> expected = referenceConv(p, x, w, p.bias ? &b : nullptr);
  for (Engine e : {Engine::Interpreter, Engine::Jit}) {
    if (e == Engine::Interpreter && !interpreter) continue;
    auto out = evalGraph(g, {x}, e, options);
    EXPECT_TRUE(allClose(out[0], expected)) << (e == Engine::Jit ? "jit" : "interpreter");
  }
}

TEST(KernelsConvNchw, ResNetAndMobileNetShapes) {
  checkNchwConv({1, 16, 14, 14, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1, true}, 16, true);
  checkNchwConv({1, 8, 15, 15, 16, 3, 3, 2, 2, 1, 1, 1, 1, 1, false}, 8, true);
  checkNchwConv({1, 32, 7, 7, 32, 3, 3, 1, 1, 1, 1, 1, 1, 32, true}, 16, true);  // depthwise
  checkNchwConv({1, 3, 23, 23, 8, 7, 7, 2, 2, 3, 3, 1, 1, 1, true}, 16, false);
  checkNchwConv({2, 12, 9, 40, 6, 1, 1, 1, 1, 0, 0, 1, 1, 1, true}, 8, true);    // pointwise
}

TEST(KernelsConvNchw, GroupedWithChannelMultiplier) {
  checkNchwConv({1, 6, 8, 11, 12, 3, 3, 1, 1, 1, 1, 1, 1, 3, true}, 8, true);
  checkNchwConv({1, 4, 9, 9, 8, 3, 3, 1, 1, 1, 1, 1, 1, 4, false}, 16, true);  // depthwise × 2
}

TEST(KernelsConvNchw, RandomShapesMatchReference) {
  std::mt19937 rng(77);
  for (int i = 0; i < 30; ++i) {
    ConvCase p = randomConvCase(rng, i % 4 == 3);
    if (i % 5 == 1 && p.c % 2 == 0 && p.oc % 2 == 0) p.groups = 2;
    int lanes = std::vector<int>{4, 8, 16}[i % 3];
    checkNchwConv(p, lanes, i % 5 == 0, 500 + i);
  }
}

}  // namespace
}  // namespace kiln::core::lower

namespace kiln::core::lower {
namespace {

using namespace testing;

/// f64 convolution and dense: vectors of half the f32 lanes.
TEST(KernelsConvNchw, Float64ConvAndDense) {
  ConvCase p{1, 3, 9, 11, 5, 3, 3, 1, 2, 1, 1, 1, 1, 1, true};
  auto f64Of = [](const runtime::Tensor& t) {
    runtime::Tensor d = runtime::Tensor::zeros(DType::Float64, t.shape());
    for (int64_t i = 0; i < t.numel(); ++i) d.data<double>()[i] = t.data<float>()[i];
    return d;
  };
  runtime::Tensor x = randomTensor({p.n, p.c, p.h, p.w}, 1), w = randomTensor({p.oc, p.c, p.kh, p.kw}, 2),
                  b = randomTensor({p.oc}, 3), fc = randomTensor({4, p.oc * p.oh() * p.ow()}, 4);
  std::vector<float> conv = referenceConv(p, x, w, &b);
  std::vector<double> expected(4, 0.0);
  for (int64_t j = 0; j < 4; ++j)
    for (size_t k = 0; k < conv.size(); ++k) expected[j] += double(conv[k]) * fc.data<float>()[j * conv.size() + k];
  Graph g;
  ValueId y = g.add("conv2d", {g.addInput("x", TensorType{DType::Float64, x.shape()}), g.addConstant("w", f64Of(w)),
                               g.addConstant("b", f64Of(b))},
                    convAttrs(p));
  y = g.add("reshape", {y}, Attrs{{"shape", std::vector<int64_t>{1, -1}}});
  g.setOutputs({g.add("dense", {y, g.addConstant("fc", f64Of(fc))})});
  LowerOptions o;
  o.vectorLanes = 16;
  o.vectorRegisters = 32;
  for (Engine e : {Engine::Interpreter, Engine::Jit}) {
    runtime::Tensor out = evalGraph(g, {f64Of(x)}, e, o)[0];
    for (int64_t j = 0; j < 4; ++j) EXPECT_NEAR(out.data<double>()[j], expected[j], 1e-3 * (1 + std::fabs(expected[j])));
  }
}

}  // namespace
}  // namespace kiln::core::lower

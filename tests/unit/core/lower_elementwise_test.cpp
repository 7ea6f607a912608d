// Numerical tests of unary, broadcasting binary and batch_norm lowerings.
#include <functional>

#include "tests/unit/core/lower_test_util.h"

namespace kiln::core::lower {
namespace {

using testing::expectClose;
using testing::runFirstNode;

struct UnaryCase {
  std::string op, attrs;
  std::function<double(double)> ref;
  float lo = -3.0f, hi = 3.0f;
};

TEST(LowerUnary, EveryOpMatchesReference) {
  auto sigmoid = [](double x) { return 1.0 / (1.0 + std::exp(-x)); };
  auto relu6 = [](double x) { return std::min(std::max(x + 3.0, 0.0), 6.0); };
  std::vector<UnaryCase> cases = {
      {"relu", "", [](double x) { return std::max(x, 0.0); }},
      {"sigmoid", "", sigmoid},
      {"tanh", "", [](double x) { return std::tanh(x); }},
      {"silu", "", [&](double x) { return x * sigmoid(x); }},
      {"hardswish", "", [&](double x) { return x * relu6(x) / 6.0; }, -5, 5},
      {"hardsigmoid", "", [&](double x) { return relu6(x) / 6.0; }, -5, 5},
      {"exp", "", [](double x) { return std::exp(x); }},
      {"log", "", [](double x) { return std::log(x); }, 0.01f, 5},
      {"sqrt", "", [](double x) { return std::sqrt(x); }, 0, 5},
      {"rsqrt", "", [](double x) { return 1.0 / std::sqrt(x); }, 0.05f, 5},
      {"neg", "", [](double x) { return -x; }},
      {"abs", "", [](double x) { return std::fabs(x); }},
      {"erf", "", [](double x) { return std::erf(x); }},
      {"gelu", "", [](double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }},
      {"gelu", "{approximate=\"none\"}", [](double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }},
      {"gelu", "{approximate=\"tanh\"}",
       [](double x) { return 0.5 * x * (1 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x))); }},
      {"leaky_relu", "{alpha=0.2}", [](double x) { return x > 0 ? x : 0.2 * x; }},
      {"leaky_relu", "", [](double x) { return x > 0 ? x : 0.01 * x; }},
      {"clamp", "{max=1.5, min=-0.5}", [](double x) { return std::min(std::max(x, -0.5), 1.5); }},
      {"clamp", "{min=0}", [](double x) { return std::max(x, 0.0); }},
      {"copy", "", [](double x) { return x; }},
  };
  for (const UnaryCase& c : cases) {
    std::string text = "graph(%x: f32[2,3,5,7]) {\n  %y = " + c.op + "(%x) " + c.attrs +
                       " : f32[2,3,5,7]\n  return %y\n}\n";
    SCOPED_TRACE(text);
    auto r = runFirstNode(text, 3, c.lo, c.hi);
    std::vector<float> expected;
    for (float x : r.inputs[0]) expected.push_back(static_cast<float>(c.ref(x)));
    expectClose(r.output, expected);
    EXPECT_EQ(r.func.attrs.at("op"), c.op);
  }
}

TEST(LowerUnary, LargeTensorIsOneParallelLoop) {
  auto r = runFirstNode(R"(graph(%x: f32[1,8,32,32]) {
    %y = relu(%x) : f32[1,8,32,32]
    return %y
  })");
  EXPECT_EQ(testing::countLoops(r.func, tir::ForKind::Parallel), 1);
  EXPECT_EQ(testing::countLoops(r.func, tir::ForKind::Serial), 0);
  for (size_t i = 0; i < r.output.size(); ++i) ASSERT_EQ(r.output[i], std::max(r.inputs[0][i], 0.0f));
}

TEST(LowerUnary, RankZero) {
  auto r = runFirstNode(R"(graph(%x: f32[]) {
    %y = neg(%x) : f32[]
    return %y
  })");
  ASSERT_EQ(r.output.size(), 1u);
  EXPECT_EQ(r.output[0], -r.inputs[0][0]);
}

/// Reference broadcasting binary operation.
std::vector<float> referenceBinary(const std::vector<int64_t>& as, const std::vector<int64_t>& bs,
                                   const std::vector<int64_t>& out, const std::vector<float>& a,
                                   const std::vector<float>& b, const std::function<double(double, double)>& f) {
  int64_t numel = 1;
  for (int64_t d : out) numel *= d;
  std::vector<float> y(static_cast<size_t>(numel));
  std::vector<int64_t> idx(out.size());
  auto offset = [&](const std::vector<int64_t>& shape) {
    int64_t off = 0;
    size_t lead = out.size() - shape.size();
    for (size_t d = 0; d < shape.size(); ++d) off = off * shape[d] + (shape[d] == 1 ? 0 : idx[lead + d]);
    return off;
  };
  for (int64_t i = 0; i < numel; ++i) {
    int64_t rem = i;
    for (size_t d = out.size(); d-- > 0;) {
      idx[d] = rem % out[d];
      rem /= out[d];
    }
    y[i] = static_cast<float>(f(a[offset(as)], b[offset(bs)]));
  }
  return y;
}

std::string shapeText(const std::vector<int64_t>& s) {
  std::string t = "[";
  for (size_t i = 0; i < s.size(); ++i) t += (i ? "," : "") + std::to_string(s[i]);
  return t + "]";
}

void checkBinary(const std::string& op, std::vector<int64_t> as, std::vector<int64_t> bs, std::vector<int64_t> out,
                 std::function<double(double, double)> f, float lo = -2.0f, float hi = 2.0f) {
  std::string text = "graph(%a: f32" + shapeText(as) + ", %b: f32" + shapeText(bs) + ") {\n  %y = " + op +
                     "(%a, %b) : f32" + shapeText(out) + "\n  return %y\n}\n";
  SCOPED_TRACE(text);
  auto r = runFirstNode(text, 9, lo, hi);
  expectClose(r.output, referenceBinary(as, bs, out, r.inputs[0], r.inputs[1], f));
}

TEST(LowerBinary, EveryOpWithBroadcasting) {
  std::vector<std::pair<std::string, std::function<double(double, double)>>> ops = {
      {"add", [](double a, double b) { return float(a) + float(b); }},
      {"sub", [](double a, double b) { return float(a) - float(b); }},
      {"mul", [](double a, double b) { return float(a) * float(b); }},
      {"div", [](double a, double b) { return float(a) / float(b); }},
      {"maximum", [](double a, double b) { return std::max(a, b); }},
      {"minimum", [](double a, double b) { return std::min(a, b); }},
  };
  for (const auto& [op, f] : ops) {
    checkBinary(op, {2, 3, 4, 5}, {3, 1, 5}, {2, 3, 4, 5}, f);
    checkBinary(op, {}, {4, 5}, {4, 5}, f);
    checkBinary(op, {4, 1}, {1, 6}, {4, 6}, f);
    checkBinary(op, {3, 7}, {3, 7}, {3, 7}, f);
    checkBinary(op, {}, {}, {}, f);
  }
  checkBinary("pow", {2, 3, 4}, {4}, {2, 3, 4}, [](double a, double b) { return std::pow(a, b); }, 0.1f, 2.0f);
}

TEST(LowerBinary, BroadcastBiasIsParallel) {
  auto r = runFirstNode(R"(graph(%x: f32[1,16,20,20], %b: f32[16,1,1]) {
    %y = add(%x, %b) : f32[1,16,20,20]
    return %y
  })");
  EXPECT_EQ(testing::countLoops(r.func, tir::ForKind::Parallel), 1);
  expectClose(r.output, referenceBinary({1, 16, 20, 20}, {16, 1, 1}, {1, 16, 20, 20}, r.inputs[0], r.inputs[1],
                                        [](double a, double b) { return float(a) + float(b); }));
}

TEST(LowerBinary, IntegerDivIsUnsupported) {
  Graph g = parseGraph(R"(graph(%a: i64[3], %b: i64[3]) {
    %y = div(%a, %b) : i64[3]
    return %y
  })");
  try {
    lowerNode(g, 0, "f");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Unsupported);
    EXPECT_NE(std::string(e.what()).find("%y"), std::string::npos) << e.what();
  }
}

TEST(LowerBinary, IntegerAdd) {
  Graph g = parseGraph(R"(graph(%a: i64[2,3], %b: i64[3]) {
    %y = add(%a, %b) : i64[2,3]
    return %y
  })");
  tir::PrimFunc f = lowerNode(g, 0, "f");
  std::vector<int64_t> a = {1, 2, 3, 4, 5, 6}, b = {10, -20, 30}, y(6, 0);
  interpret(f, {a.data(), b.data(), y.data()});
  EXPECT_EQ(y, (std::vector<int64_t>{11, -18, 33, 14, -15, 36}));
}

void checkBatchNorm(const std::vector<int64_t>& shape) {
  int64_t c = shape[1];
  std::string cs = "[" + std::to_string(c) + "]";
  std::string text = "graph(%x: f32" + shapeText(shape) + ", %g: f32" + cs + ", %b: f32" + cs + ", %m: f32" + cs +
                     ", %v: f32" + cs + ") {\n  %y = batch_norm(%x, %g, %b, %m, %v) {epsilon=0.001} : f32" +
                     shapeText(shape) + "\n  return %y\n}\n";
  SCOPED_TRACE(text);
  auto r = runFirstNode(text, 21, 0.1f, 2.0f);  // positive variances
  int64_t inner = 1;
  for (size_t d = 2; d < shape.size(); ++d) inner *= shape[d];
  std::vector<float> expected(r.inputs[0].size());
  for (size_t i = 0; i < expected.size(); ++i) {
    int64_t ch = static_cast<int64_t>(i) / inner % c;
    double x = r.inputs[0][i], g = r.inputs[1][ch], b = r.inputs[2][ch], m = r.inputs[3][ch], v = r.inputs[4][ch];
    expected[i] = static_cast<float>((x - m) / std::sqrt(v + 0.001) * g + b);
  }
  expectClose(r.output, expected);
}

TEST(LowerBatchNorm, Rank4Rank2Rank3) {
  checkBatchNorm({2, 3, 4, 5});
  checkBatchNorm({4, 3});
  checkBatchNorm({3, 5, 7});
  checkBatchNorm({2, 16, 13, 11});  // parallel
}

}  // namespace
}  // namespace kiln::core::lower

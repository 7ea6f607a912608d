// Vector exp / tanh / erf / sigmoid (codegen/llvm/vector_math.h) against libm over their whole
// range: a dense sweep measured in ulps (erf: absolute error, the bound vector_math.h states),
// the overflow and underflow edges (denormal results), and special values (±0, ±inf, NaN).
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>

#include "codegen/llvm/jit.h"

#include "tests/unit/codegen/codegen_test_util.h"

namespace kiln::codegen::testing {
namespace {

using namespace core::tir;

/// out[i] = name(x[i]) with vectors of 16 lanes; the kernel is "<name>_<n>".
PrimFunc vectorKernel(const std::string& name, int64_t n) {
  Buffer x = makeBuffer("x", Type::f32(), {n}), out = makeBuffer("out", Type::f32(), {n});
  Expr i = Var::make("i");
  Expr index = Ramp::make(i * 16, i64(1), 16);
  Stmt body = For::make(i, i64(0), i64(n / 16), ForKind::Serial, Store::make(out, index, call(name, {Load::make(x, index)})));
  return makeFunc(name + "_" + std::to_string(n), {x, out}, body);
}

/// Distance in units in the last place between two floats of the same sign.
int64_t ulps(float a, float b) {
  if (a == b) return 0;
  int32_t ia, ib;
  std::memcpy(&ia, &a, 4);
  std::memcpy(&ib, &b, 4);
  if ((ia < 0) != (ib < 0)) return std::numeric_limits<int32_t>::max();
  return std::llabs(int64_t{ia} - int64_t{ib});
}

/// Runs kernel "<name>_<n>" on x (padded with zeros to n elements).
std::vector<float> run(JitLibrary& lib, const std::string& name, int64_t n, std::vector<float> x) {
  x.resize(static_cast<size_t>(n), 0.0f);
  std::vector<float> out(x.size());
  runKernel(lib, name + "_" + std::to_string(n), {x.data(), out.data()});
  return out;
}

TEST(VectorMath, ExpWithinThreeUlpsEverywhere) {
  auto lib = jit({vectorKernel("exp", 1 << 16)});
  std::vector<float> x;
  for (int i = 0; i < (1 << 16); ++i) x.push_back(-103.9f + 192.6f * float(i) / float(1 << 16));
  std::vector<float> out = run(*lib, "exp", 1 << 16, x);
  int64_t worst = 0;
  float worstAt = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    float ref = std::exp(x[i]);
    // Denormal results carry fewer significant bits: compare them absolutely.
    int64_t d = ref < std::numeric_limits<float>::min() ? (std::fabs(ref - out[i]) <= 2e-45f ? 0 : 99) : ulps(ref, out[i]);
    if (d > worst) worst = d, worstAt = x[i];
  }
  EXPECT_LE(worst, 3) << "at x = " << worstAt;
}

TEST(VectorMath, ExpEdgesAndSpecialValues) {
  auto lib = jit({vectorKernel("exp", 16)});
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> x = {0.0f, -0.0f, 1.0f, 88.72f, 88.73f, 100.0f, inf, -inf, nan, -87.3f, -100.0f, -103.5f, -200.0f,
                          1e-8f, -1e-8f, 0.5f};
  std::vector<float> out = run(*lib, "exp", 16, x);
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_EQ(out[1], 1.0f);
  EXPECT_LE(ulps(out[2], std::exp(1.0f)), 1);
  EXPECT_LE(ulps(out[3], std::exp(88.72f)), 3);
  EXPECT_EQ(out[4], inf);
  EXPECT_EQ(out[5], inf);
  EXPECT_EQ(out[6], inf);
  EXPECT_EQ(out[7], 0.0f);
  EXPECT_TRUE(std::isnan(out[8]));
  EXPECT_LE(ulps(out[9], std::exp(-87.3f)), 3);
  EXPECT_NEAR(out[10], std::exp(-100.0f), 2e-45f);  // a denormal
  EXPECT_NEAR(out[11], std::exp(-103.5f), 2e-45f);
  EXPECT_EQ(out[12], 0.0f);
  EXPECT_EQ(out[13], 1.0f);
  EXPECT_EQ(out[14], 1.0f);
}

TEST(VectorMath, TanhAndSigmoidMatchLibm) {
  auto lib = jit({vectorKernel("tanh", 1 << 14), vectorKernel("sigmoid", 1 << 14), vectorKernel("tanh", 16)});
  std::vector<float> x;
  for (int i = 0; i < (1 << 14); ++i) x.push_back(-30.0f + 60.0f * float(i) / float(1 << 14));
  x[0] = 1e-20f, x[1] = -3e-5f, x[2] = 0.6249f, x[3] = 0.6251f;
  std::vector<float> t = run(*lib, "tanh", 1 << 14, x), s = run(*lib, "sigmoid", 1 << 14, x);
  for (size_t i = 0; i < x.size(); ++i) {
    ASSERT_LE(ulps(t[i], std::tanh(x[i])), 4) << "tanh(" << x[i] << ") = " << t[i];
    float ref = 1.0f / (1.0f + std::exp(-x[i]));
    ASSERT_LE(std::fabs(s[i] - ref), 4e-7f * std::fabs(ref) + 1e-37f) << "sigmoid(" << x[i] << ")";
  }
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> special = run(*lib, "tanh", 16, {nan, std::numeric_limits<float>::infinity(), -1e30f});
  EXPECT_TRUE(std::isnan(special[0]));
  EXPECT_EQ(special[1], 1.0f);
  EXPECT_EQ(special[2], -1.0f);
}

// vector_math.h's bound for erf: |error| ≤ 1.5e-7 everywhere (1.19e-7 measured, just below
// x = 1), within 3 ulps below 0.85 in magnitude (the x·P(x²) branch, relative accuracy down to
// denormals).
constexpr float kErfMaxAbsError = 1.5e-7f;

TEST(VectorMath, ErfWithinItsAbsoluteBoundEverywhere) {
  constexpr int64_t n = 1 << 18;
  auto lib = jit({vectorKernel("erf", n)});
  std::vector<float> x;
  for (int64_t i = 0; i < n; ++i) x.push_back(-5.0f + 10.0f * float(i) / float(n));
  // Around the branch point and the clamp, and small magnitudes down to denormals.
  size_t at = 0;
  for (float edge : {1.0f, 4.0f, 3.9f, -1.0f})
    for (int k = -64; k < 64; ++k) x[at++] = edge + float(k) * 1e-7f * edge;
  for (int k = 0; k < 64; ++k) x[at++] = std::ldexp(1.3f, -k * 2);
  x[at++] = 1e-40f, x[at++] = -3e-42f, x[at++] = std::numeric_limits<float>::denorm_min();
  std::vector<float> out = run(*lib, "erf", n, x);
  double worstAbs = 0;
  int64_t worstUlps = 0;
  float worstAbsAt = 0, worstUlpsAt = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    float ref = std::erf(x[i]);
    double err = std::fabs(double(out[i]) - double(ref));
    if (err > worstAbs) worstAbs = err, worstAbsAt = x[i];
    bool denormal = std::fabs(ref) < std::numeric_limits<float>::min();
    if (std::fabs(ref) < 0.85f && !denormal) {
      int64_t d = ulps(ref, out[i]);
      if (d > worstUlps) worstUlps = d, worstUlpsAt = x[i];
    }
    if (denormal) {
      ASSERT_LE(err, 3e-45) << "erf(" << x[i] << ")";
    }
  }
  EXPECT_LE(worstAbs, kErfMaxAbsError) << "at x = " << worstAbsAt;
  EXPECT_LE(worstUlps, 3) << "at x = " << worstUlpsAt;
  std::printf("vector erf: max |error| %.3g at x = %.9g, max %lld ulps below 0.85 at x = %.9g\n", worstAbs,
              double(worstAbsAt), static_cast<long long>(worstUlps), double(worstUlpsAt));
}

TEST(VectorMath, ErfSpecialValues) {
  auto lib = jit({vectorKernel("erf", 16)});
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> x = {0.0f, -0.0f, inf, -inf, nan, 1e30f, -1e30f, 3.92f, -4.0f, 4.5f, 1.0f, -1.0f, 1e-30f,
                          -1e-38f, 0.5f, 2.0f};
  std::vector<float> out = run(*lib, "erf", 16, x);
  EXPECT_EQ(out[0], 0.0f);
  EXPECT_FALSE(std::signbit(out[0]));
  EXPECT_EQ(out[1], 0.0f);
  EXPECT_TRUE(std::signbit(out[1]));
  EXPECT_EQ(out[2], 1.0f);
  EXPECT_EQ(out[3], -1.0f);
  EXPECT_TRUE(std::isnan(out[4]));
  EXPECT_EQ(out[5], 1.0f);
  EXPECT_EQ(out[6], -1.0f);
  for (size_t i = 7; i < x.size(); ++i) EXPECT_NEAR(out[i], std::erf(x[i]), kErfMaxAbsError) << "erf(" << x[i] << ")";
  EXPECT_LE(ulps(out[12], std::erf(1e-30f)), 1);
  EXPECT_LE(ulps(out[13], std::erf(-1e-38f)), 1);
}

// Vector erf, tanh and sigmoid (and so exact and tanh gelu, silu) compile to vector code without
// a libm call per lane, also under O4's fast-math flags.
TEST(VectorMath, TranscendentalsStayVectorCode) {
  for (const char* name : {"erf", "tanh", "sigmoid", "exp"}) {
    PrimFunc f = vectorKernel(name, 64);
    f.attrs["fast_math"] = "reassoc,nsz,contract,afn";
    std::string ir = emitLLVMIR({f}, hostTarget());
    EXPECT_EQ(ir.find("@erff"), std::string::npos) << name;
    EXPECT_EQ(ir.find("@expf"), std::string::npos) << name;
    EXPECT_EQ(ir.find("@tanhf"), std::string::npos) << name;
    EXPECT_EQ(ir.find("llvm.exp."), std::string::npos) << name;
  }
}

}  // namespace
}  // namespace kiln::codegen::testing

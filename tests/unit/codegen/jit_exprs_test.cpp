// Expression kinds: math intrinsics against std::, integer and bool ops, casts, Let bindings.
#include <cstdint>
#include <functional>

#include "codegen/llvm/jit.h"
#include "runtime/error.h"
#include "tests/unit/codegen/codegen_test_util.h"

namespace kiln::codegen::testing {
namespace {

using namespace core::tir;

/// out[i] = f(x[i], y[i]) over n elements; `lanes` > 1 uses explicit vectors of that width.
PrimFunc mapKernel(const std::string& name, Type elem, int64_t n, int lanes,
                   const std::function<Expr(Expr, Expr)>& f, Type outElem) {
  Buffer x = makeBuffer("x", elem, {n});
  Buffer y = makeBuffer("y", elem, {n});
  Buffer out = makeBuffer("out", outElem, {n});
  Expr i = Var::make("i");
  Stmt body;
  if (lanes == 1) {
    body = For::make(i, i64(0), i64(n), ForKind::Serial,
                     Store::make(out, i, f(Load::make(x, i), Load::make(y, i))));
  } else {
    Expr idx = Ramp::make(i * lanes, i64(1), lanes);
    body = For::make(i, i64(0), i64(n / lanes), ForKind::Serial,
                     Store::make(out, idx, f(Load::make(x, idx), Load::make(y, idx))));
  }
  return makeFunc(name, {x, y, out}, body);
}

struct Intrinsic {
  std::string name;
  std::function<double(double, double)> ref;
  float lo, hi;
};

std::vector<Intrinsic> intrinsics() {
  return {
      {"exp", [](double x, double) { return std::exp(float(x)); }, -10, 10},
      {"log", [](double x, double) { return std::log(float(x)); }, 0.01f, 100},
      {"sqrt", [](double x, double) { return std::sqrt(float(x)); }, 0, 100},
      {"tanh", [](double x, double) { return std::tanh(float(x)); }, -5, 5},
      {"erf", [](double x, double) { return std::erf(float(x)); }, -3, 3},
      {"sigmoid", [](double x, double) { return 1.0f / (1.0f + std::exp(-float(x))); }, -20, 20},
      {"fabs", [](double x, double) { return std::fabs(float(x)); }, -5, 5},
      {"floor", [](double x, double) { return std::floor(float(x)); }, -5, 5},
      {"ceil", [](double x, double) { return std::ceil(float(x)); }, -5, 5},
      {"round", [](double x, double) { return std::round(float(x)); }, -5, 5},
      {"pow", [](double x, double y) { return std::pow(float(x), float(y)); }, 0.1f, 3},
  };
}

Expr applyIntrinsic(const std::string& name, Expr x, Expr y) {
  if (name == "pow") return call(name, {x, y});
  return call(name, {x});
}

TEST(JitExprs, EveryIntrinsicScalarAndVectorMatchesStd) {
  const int64_t n = 64;
  std::vector<PrimFunc> funcs;
  for (const Intrinsic& in : intrinsics()) {
    auto f = [&](Expr x, Expr y) { return applyIntrinsic(in.name, x, y); };
    funcs.push_back(mapKernel(in.name + "_s", Type::f32(), n, 1, f, Type::f32()));
    funcs.push_back(mapKernel(in.name + "_v8", Type::f32(), n, 8, f, Type::f32()));
  }
  auto lib = jit(funcs);
  for (const Intrinsic& in : intrinsics()) {
    std::vector<float> x = randomFloats(n, in.lo, in.hi, 11), y = randomFloats(n, -2, 2, 12);
    if (in.name == "round") {  // exact ties go away from zero (C round, as the interpreter does)
      for (int k = 0; k < 8; ++k) x[k] = -2.5f + float(k) * 0.5f;
    }
    for (const char* suffix : {"_s", "_v8"}) {
      std::vector<float> out(n);
      runKernel(*lib, in.name + suffix, {x.data(), y.data(), out.data()});
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_TRUE(closeRel(in.ref(x[i], y[i]), out[i], 1e-6))
            << in.name << suffix << "(" << x[i] << ", " << y[i] << ")";
      }
    }
  }
}

TEST(JitExprs, DoubleIntrinsics) {
  const int64_t n = 16;
  auto lib = jit(
      {mapKernel(
           "tanh_f64", Type::f64(), n, 1, [](Expr x, Expr) { return call("tanh", {x}); }, Type::f64()),
       mapKernel(
           "exp_f64", Type::f64(), n, 4, [](Expr x, Expr) { return call("exp", {x}) + x; }, Type::f64())});
  std::vector<double> x(n), y(n), out(n);
  for (int i = 0; i < n; ++i) x[i] = -2.0 + 0.25 * i;
  runKernel(*lib, "tanh_f64", {x.data(), y.data(), out.data()});
  for (int i = 0; i < n; ++i) ASSERT_TRUE(closeRel(std::tanh(x[i]), out[i], 1e-12));
  runKernel(*lib, "exp_f64", {x.data(), y.data(), out.data()});
  for (int i = 0; i < n; ++i) ASSERT_TRUE(closeRel(std::exp(x[i]) + x[i], out[i], 1e-12));
}

TEST(JitExprs, IntegerArithmeticTruncatesLikeC) {
  const int64_t n = 40;
  std::vector<PrimFunc> funcs = {
      mapKernel(
          "idiv", Type::i64(), n, 1, [](Expr a, Expr b) { return a / b; }, Type::i64()),
      mapKernel(
          "imod", Type::i64(), n, 1, [](Expr a, Expr b) { return a % b; }, Type::i64()),
      mapKernel(
          "imin", Type::i64(), n, 1, [](Expr a, Expr b) { return min(a, b); }, Type::i64()),
      mapKernel(
          "imax", Type::i64(), n, 4, [](Expr a, Expr b) { return max(a, b); }, Type::i64()),
      mapKernel(
          "iarith", Type::i64(), n, 1, [](Expr a, Expr b) { return a * b - (a + b); }, Type::i64()),
      mapKernel(
          "isel", Type::i64(), n, 8, [](Expr a, Expr b) { return select(a < b, a * 2, b - 1); }, Type::i64()),
  };
  auto lib = jit(funcs);
  std::vector<int64_t> a(n), b(n), out(n);
  for (int64_t i = 0; i < n; ++i) {
    a[i] = (i * 37) % 23 - 11;
    b[i] = (i % 7) - 3;
    if (b[i] == 0) b[i] = 5;
  }
  auto check = [&](const std::string& name, const std::function<int64_t(int64_t, int64_t)>& ref) {
    runKernel(*lib, name, {a.data(), b.data(), out.data()});
    for (int64_t i = 0; i < n; ++i)
      ASSERT_EQ(out[i], ref(a[i], b[i])) << name << "(" << a[i] << ", " << b[i] << ")";
  };
  check("idiv", [](int64_t x, int64_t y) { return x / y; });
  check("imod", [](int64_t x, int64_t y) { return x % y; });
  check("imin", [](int64_t x, int64_t y) { return std::min(x, y); });
  check("imax", [](int64_t x, int64_t y) { return std::max(x, y); });
  check("iarith", [](int64_t x, int64_t y) { return x * y - (x + y); });
  check("isel", [](int64_t x, int64_t y) { return x < y ? x * 2 : y - 1; });
}

TEST(JitExprs, FloatMinMaxAndRelu) {
  const int64_t n = 32;
  auto lib =
      jit({mapKernel(
               "fmin", Type::f32(), n, 8, [](Expr a, Expr b) { return min(a, b); }, Type::f32()),
           mapKernel(
               "relu", Type::f32(), n, 1, [](Expr a, Expr) { return max(a, f32(0)); }, Type::f32()),
           mapKernel(
               "fdivmod", Type::f32(), n, 1, [](Expr a, Expr b) { return a / b + a % b; }, Type::f32())});
  std::vector<float> a = randomFloats(n, -3, 3, 21), b = randomFloats(n, 0.5, 3, 22), out(n);
  runKernel(*lib, "fmin", {a.data(), b.data(), out.data()});
  for (int i = 0; i < n; ++i) ASSERT_EQ(out[i], std::min(a[i], b[i]));
  runKernel(*lib, "relu", {a.data(), b.data(), out.data()});
  for (int i = 0; i < n; ++i) ASSERT_EQ(out[i], std::max(a[i], 0.0f));
  runKernel(*lib, "fdivmod", {a.data(), b.data(), out.data()});
  for (int i = 0; i < n; ++i) ASSERT_TRUE(closeRel(a[i] / b[i] + std::fmod(a[i], b[i]), out[i], 1e-6));
}

TEST(JitExprs, CastsAndBoolOps) {
  const int64_t n = 24;
  Buffer xf = makeBuffer("xf", Type::f32(), {n});
  Buffer xi = makeBuffer("xi", Type::i32(), {n});
  Buffer flags = makeBuffer("flags", Type::u8(), {n});  // how runtime bool tensors are stored
  Buffer toI32 = makeBuffer("to_i32", Type::i32(), {n});
  Buffer toF32 = makeBuffer("to_f32", Type::f32(), {n});
  Buffer toI64 = makeBuffer("to_i64", Type::i64(), {n});
  Buffer logic = makeBuffer("logic", Type::u8(), {n});
  Buffer boolBuf = makeBuffer("bools", Type::boolean(), {n});  // i1 elements live as bytes in memory
  Expr i = Var::make("i");
  Expr f = Load::make(xf, i), v = Load::make(xi, i);
  Expr flag = cast(Type::boolean(), Load::make(flags, i));
  Expr positive = f > f32(0);
  Expr logicValue = (positive && flag) || (!flag && eq(v % 3, IntImm::make(Type::i32(), 0))) || ne(v, v);
  Stmt body = For::make(
      i, i64(0), i64(n), ForKind::Serial,
      Seq::make({Store::make(toI32, i, cast(Type::i32(), f) + cast(Type::i32(), flag)),
                 Store::make(toF32, i, cast(Type::f32(), v) + cast(Type::f32(), positive)),
                 Store::make(toI64, i, cast(Type::i64(), v) * 3 + cast(Type::i64(), cast(Type::u8(), v))),
                 Store::make(boolBuf, i, positive),
                 Store::make(logic, i,
                             cast(Type::u8(), logicValue) + cast(Type::u8(), Load::make(boolBuf, i)) * 2)}));
  auto lib = jit({makeFunc("casts", {xf, xi, flags, toI32, toF32, toI64, logic, boolBuf}, body, 5)});
  std::vector<float> xfv = randomFloats(n, -9, 9, 31);
  std::vector<int32_t> xiv(n), i32v(n);
  std::vector<uint8_t> flagv(n), logicv(n), boolv(n);
  std::vector<float> f32v(n);
  std::vector<int64_t> i64v(n);
  for (int k = 0; k < n; ++k) {
    xiv[k] = k * 11 - 130;
    flagv[k] = k % 3 == 0 ? 0 : (k % 3 == 1 ? 1 : 7);  // any non-zero byte is true
  }
  runKernel(*lib, "casts",
            {xfv.data(), xiv.data(), flagv.data(), i32v.data(), f32v.data(), i64v.data(), logicv.data(),
             boolv.data()});
  for (int k = 0; k < n; ++k) {
    bool fl = flagv[k] != 0, pos = xfv[k] > 0;
    ASSERT_EQ(i32v[k], int32_t(xfv[k]) + int32_t(fl)) << k;
    ASSERT_EQ(f32v[k], float(xiv[k]) + float(pos)) << k;
    ASSERT_EQ(i64v[k], int64_t(xiv[k]) * 3 + int64_t(uint8_t(xiv[k]))) << k;
    ASSERT_EQ(boolv[k], pos ? 1 : 0) << k;
    bool lv = (pos && fl) || (!fl && xiv[k] % 3 == 0);
    ASSERT_EQ(logicv[k], uint8_t(lv) + uint8_t(pos) * 2) << k;
  }
}

TEST(JitExprs, LetStmtScalarAndVector) {
  const int64_t n = 32;
  Buffer x = makeBuffer("x", Type::f32(), {n});
  Buffer out = makeBuffer("out", Type::f32(), {n});
  Expr i = Var::make("i"), t = Var::make("t", Type::f32()), v = Var::make("v", Type::f32(8)),
       base = Var::make("base");
  Stmt scalar = For::make(i, i64(0), i64(n / 2), ForKind::Serial,
                          LetStmt::make(t, Load::make(x, i) * f32(2), Store::make(out, i, t + t * t)));
  Expr idx = Ramp::make(base, i64(1), 8);
  Stmt vector = For::make(i, i64(n / 16), i64(n / 16), ForKind::Serial,
                          LetStmt::make(base, i * 8,
                                        LetStmt::make(v, Load::make(x, idx) - Broadcast::make(f32(1), 8),
                                                      Store::make(out, idx, v * v))));
  auto lib = jit({makeFunc("lets", {x, out}, Seq::make({scalar, vector}))});
  std::vector<float> xv = randomFloats(n), outv(n);
  runKernel(*lib, "lets", {xv.data(), outv.data()});
  for (int k = 0; k < n / 2; ++k) ASSERT_FLOAT_EQ(outv[k], xv[k] * 2 + xv[k] * 2 * (xv[k] * 2));
  for (int k = n / 2; k < n; ++k) ASSERT_FLOAT_EQ(outv[k], (xv[k] - 1) * (xv[k] - 1));
}

TEST(JitExprs, EvaluateAndFloatRamp) {
  const int64_t n = 16;
  Buffer out = makeBuffer("out", Type::f32(), {n});
  Expr i = Var::make("i");
  Stmt body = Seq::make({Evaluate::make(i64(0)),
                         For::make(i, i64(0), i64(2), ForKind::Serial,
                                   Store::make(out, Ramp::make(i * 8, i64(1), 8),
                                               Ramp::make(cast(Type::f32(), i) * f32(10), f32(0.5), 8)))});
  auto lib = jit({makeFunc("framp", {out}, body)});
  std::vector<float> outv(n);
  runKernel(*lib, "framp", {outv.data()});
  for (int k = 0; k < n; ++k) ASSERT_FLOAT_EQ(outv[k], float(k / 8) * 10 + 0.5f * float(k % 8));
}

TEST(JitExprs, UnboundVariableIsAnInternalErrorNamingTheKernel) {
  Buffer out = makeBuffer("out", Type::f32(), {4});
  Expr ghost = Var::make("ghost");
  auto func = makeFunc("broken_kernel", {out}, Store::make(out, ghost, f32(1)));
  try {
    jit({func});
    FAIL() << "expected an error";
  } catch (const InternalError& e) {
    EXPECT_NE(std::string(e.what()).find("broken_kernel"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("ghost"), std::string::npos) << e.what();
  }
}

TEST(JitExprs, UnknownBufferAndDuplicateNamesAreErrors) {
  Buffer out = makeBuffer("out", Type::f32(), {4});
  Buffer stray = makeBuffer("stray", Type::f32(), {4});
  EXPECT_THROW(jit({makeFunc("k", {out}, Store::make(out, i64(0), Load::make(stray, i64(0))))}),
               InternalError);
  auto ok = makeFunc("same", {out}, Store::make(out, i64(0), f32(1)));
  try {
    jit({ok, ok});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Usage);
    EXPECT_NE(std::string(e.what()).find("same"), std::string::npos);
  }
}

}  // namespace
}  // namespace kiln::codegen::testing

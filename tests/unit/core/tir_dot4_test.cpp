// The dot4 schedule primitive (core/tir/schedule_dot4.cpp): an int8 GEMM nest over u8 activations
// and i8 weights packed four input channels per word, scheduled into vector dot4_u8i8 calls,
// computes exactly what the plain nest does (checked against a C++ loop, in the TIR interpreter and
// JIT-compiled for this machine: vpdpbusd where it has AVX-512 VNNI), replays from its trace, and
// refuses loops it cannot turn into the call.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>

#include "codegen/llvm/jit.h"
#include "core/lower/interpreter.h"
#include "core/tir/printer.h"
#include "core/tir/schedule.h"
#include "core/tir/trace.h"
#include "runtime/error.h"
#include "tests/unit/core/kernels_test_util.h"

namespace kiln::core::tir {
namespace {

Stmt loop(const Expr& var, int64_t extent, Stmt body) {
  return For::make(var, i64(0), i64(extent), ForKind::Serial, std::move(body));
}

/// y[i, g·16 + l] = Σ_k i32(a[i, k]) · i32(b[g, k/4, l, k%4]) over loops i < m, g < groups, l < 16,
/// k4 < k/4, j < 4 (k = k4·4 + j), the sum starting at 0 on its first step.
struct Int8Gemm {
  int64_t m, groups, k4;
  int64_t n() const { return groups * 16; }
  int64_t k() const { return k4 * 4; }

  PrimFunc plain() const {
    Buffer a = makeBuffer("a", Type::u8(), {m, k()}), b = makeBuffer("b", Type::i8(), {groups * k4 * 64});
    Buffer y = makeBuffer("y", Type::i32(), {m, n()});
    Expr i = Var::make("i"), g = Var::make("g"), l = Var::make("l"), r = Var::make("k4"), j = Var::make("j");
    Expr at = i * n() + g * 16 + l;
    Expr product = cast(Type::i32(), Load::make(a, i * k() + r * 4 + j)) *
                   cast(Type::i32(), Load::make(b, ((g * k4 + r) * 16 + l) * 4 + j));
    Expr first = EQ::make(r, i64(0)) && EQ::make(j, i64(0));
    Stmt update =
        Store::make(y, at, Select::make(first, IntImm::make(Type::i32(), 0), Load::make(y, at)) + product);
    PrimFunc f;
    f.name = "int8_gemm";
    f.params = {a, b, y};
    f.body = loop(i, m, loop(g, groups, loop(l, 16, loop(r, k4, loop(j, 4, update)))));
    return f;
  }

  struct Data {
    std::vector<uint8_t> a;
    std::vector<int8_t> b;
    std::vector<int32_t> y;
    std::vector<void*> args() { return {a.data(), b.data(), y.data()}; }
  };

  /// Bytes over their whole ranges (so a sum of four products reaches ±2^16), y poisoned.
  Data data(uint32_t seed) const {
    std::mt19937 rng(seed);
    std::uniform_int_distribution<int> byte(0, 255);
    Data d;
    for (int64_t e = 0; e < m * k(); ++e) d.a.push_back(static_cast<uint8_t>(byte(rng)));
    for (int64_t e = 0; e < groups * k4 * 64; ++e) d.b.push_back(static_cast<int8_t>(byte(rng) - 128));
    d.y.assign(static_cast<size_t>(m * n()), 0x5a5a5a5a);
    return d;
  }

  std::vector<int32_t> expected(const Data& d) const {
    std::vector<int32_t> y(static_cast<size_t>(m * n()), 0);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t c = 0; c < n(); ++c)
        for (int64_t kk = 0; kk < k(); ++kk)
          y[i * n() + c] +=
              int32_t{d.a[i * k() + kk]} * int32_t{d.b[((c / 16 * k4 + kk / 4) * 16 + c % 16) * 4 + kk % 4]};
    return y;
  }
};

/// The micro-kernel a packed int8 kernel wants: a 16-lane vector of accumulators per row,
/// held over the reduction, each step one dot4_u8i8 of a row's 4-byte word with 64 weight bytes.
void microKernel(Schedule& s) {
  s.reorder({"i", "g", "k4", "l", "j"});
  s.cacheWrite("k4");
  s.dot4("j");
  s.vectorize("l");
  s.vectorize("l_r");
  s.vectorize("l_w");
}

std::string errorOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(TirDot4, SchedulesAnInt8GemmIntoVectorCallsThatComputeTheSame) {
  const Int8Gemm shape{3, 2, 5};
  PrimFunc plain = shape.plain();
  Schedule s(plain);
  microKernel(s);
  const PrimFunc& out = s.func();
  std::string text = print(out);
  // One call per step of the reduction: the accumulators, the row's word, 64 weight bytes.
  EXPECT_NE(text.find("y_local[ramp(0, 1, 16)] = dot4_u8i8(y_local[ramp(0, 1, 16)], a[ramp("),
            std::string::npos)
      << text;
  EXPECT_NE(text.find(", 1, 4)], b[ramp("), std::string::npos) << text;
  EXPECT_NE(text.find(", 1, 64)])"), std::string::npos) << text;
  EXPECT_EQ(text.find("select"), std::string::npos) << text;  // the start went to the copy-in
  EXPECT_EQ(
      out.attrs.at("trace"),
      "reorder(i, g, k4, l, j)\ncache_write(k4)\ndot4(j)\nvectorize(l)\nvectorize(l_r)\nvectorize(l_w)\n");
  EXPECT_EQ(print(Trace::parse(out.attrs.at("trace")).apply(plain)), text);

  // The plain nest, the scheduled one in the interpreter and the scheduled one compiled.
  auto ref = shape.data(11);
  std::vector<int32_t> want = shape.expected(ref);
  for (const PrimFunc* f : std::vector<const PrimFunc*>{&plain, &out}) {
    auto d = shape.data(11);
    lower::interpret(*f, d.args());
    EXPECT_EQ(d.y, want) << print(*f);
  }
  const codegen::Target& host = lower::testing::hostTarget();
  if (host.features.find("+avx512vnni") != std::string::npos) {  // one instruction per call
    EXPECT_NE(codegen::emitAssembly({out}, host).find("vpdpbusd"), std::string::npos);
  }
  auto lib = codegen::JitLibrary::compile({out}, host);
  auto d = shape.data(11);
  std::vector<void*> args = d.args();
  lib->lookup(out.name)(args.data());
  EXPECT_EQ(d.y, want);
}

// Random sizes and random choices around the step (a register tile of rows, unrolled or not,
// staged or not, vectorized or left one accumulator per call, which codegen expands exactly):
// every schedule computes the C++ loop's sums, interpreted and compiled.
TEST(TirDot4, RandomSchedulesAroundTheStepComputeTheSame) {
  std::mt19937 rng(20261207);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  std::vector<PrimFunc> funcs;
  std::vector<Int8Gemm> shapes;
  for (int round = 0; round < 12; ++round) {
    Int8Gemm shape{pick(1, 5), pick(1, 3), pick(1, 9)};
    Schedule s(shape.plain());
    bool tile = pick(0, 1) && shape.m > 1;
    bool stage = pick(0, 1), vector = pick(0, 1);
    std::string rows = "i";
    if (tile) {
      auto [io, ii] = s.split("i", pick(2, 3), TailStrategy::Loop);
      s.reorder({io, "g", "k4", ii, "l", "j"});
      if (pick(0, 1)) s.unroll(ii);
      rows = ii;
    } else {
      s.reorder({"i", "g", "k4", "l", "j"});
    }
    if (stage) s.cacheWrite("k4");
    s.dot4("j");
    if (vector) {
      s.vectorize("l");
      if (stage) {
        s.vectorize("l_r");
        s.vectorize("l_w");
      }
    }
    SCOPED_TRACE(s.trace().str());
    EXPECT_NE(print(s.func()).find("dot4_u8i8("), std::string::npos);
    auto d = shape.data(static_cast<uint32_t>(round));
    lower::interpret(s.func(), d.args());
    EXPECT_EQ(d.y, shape.expected(d));
    PrimFunc f = s.func();
    f.name = "int8_gemm_" + std::to_string(round);
    funcs.push_back(f);
    shapes.push_back(shape);
  }
  auto lib = codegen::JitLibrary::compile(funcs, lower::testing::hostTarget());
  for (size_t r = 0; r < funcs.size(); ++r) {
    SCOPED_TRACE(funcs[r].attrs.at("trace"));
    auto d = shapes[r].data(static_cast<uint32_t>(100 + r));
    std::vector<void*> args = d.args();
    lib->lookup(funcs[r].name)(args.data());
    EXPECT_EQ(d.y, shapes[r].expected(d));
  }
}

TEST(TirDot4, RefusesLoopsItCannotTurnIntoTheCall) {
  const Int8Gemm shape{2, 1, 3};
  Schedule s(shape.plain());
  PrimFunc before = s.func();
  EXPECT_EQ(errorOf([&] { s.dot4("l"); }), "dot4: loop 'l' must have extent 4");
  EXPECT_EQ(errorOf([&] { s.dot4("k4"); }), "dot4: loop 'k4' must have extent 4");
  s.split("k4", 1, TailStrategy::Loop);  // k4_i has one iteration, k4_o three
  EXPECT_EQ(errorOf([&] { s.dot4("k4_o"); }), "dot4: loop 'k4_o' must have extent 4");
  // j is not innermost once l moves inside it.
  Schedule t(shape.plain());
  t.reorder({"i", "g", "k4", "j", "l"});
  EXPECT_EQ(errorOf([&] { t.dot4("j"); }),
            "dot4: the body of loop 'j' is not one store y[f] = y[f] + i32(u8 load) · i32(i8 load)");
  // The element the loop updates moves with it.
  EXPECT_EQ(errorOf([&] { t.dot4("i"); }), "dot4: loop 'i' must have extent 4");
  Int8Gemm four{4, 1, 1};
  Schedule u(four.plain());
  u.reorder({"g", "l", "k4", "j", "i"});
  EXPECT_EQ(errorOf([&] { u.dot4("i"); }), "dot4: loop 'i' moves the element it updates");

  // Words must be four consecutive bytes: weights stored with j the slowest axis are not.
  Buffer a = makeBuffer("a", Type::u8(), {8}), b = makeBuffer("b", Type::i8(), {32}),
         y = makeBuffer("y", Type::i32(), {8});
  Expr l = Var::make("l"), j = Var::make("j");
  PrimFunc strided;
  strided.name = "strided";
  strided.params = {a, b, y};
  strided.body = loop(l, 8,
                      loop(j, 4,
                           Store::make(y, l,
                                       Load::make(y, l) + cast(Type::i32(), Load::make(a, j)) *
                                                              cast(Type::i32(), Load::make(b, j * 8 + l)))));
  Schedule v(strided);
  EXPECT_EQ(errorOf([&] { v.dot4("j"); }),
            "dot4: the index of 'b' does not step by one element with loop 'j'");
  // A float product is not the call's.
  Buffer fa = makeBuffer("a", Type::f32(), {4}), fy = makeBuffer("y", Type::f32(), {1});
  PrimFunc floats;
  floats.name = "floats";
  floats.params = {fa, fy};
  floats.body =
      loop(j, 4, Store::make(fy, i64(0), Load::make(fy, i64(0)) + Load::make(fa, j) * Load::make(fa, j)));
  Schedule w(floats);
  EXPECT_EQ(errorOf([&] { w.dot4("j"); }),
            "dot4: the body of loop 'j' is not one store y[f] = y[f] + i32(u8 load) · i32(i8 load)");
  // Nothing applied, nothing recorded.
  EXPECT_EQ(w.trace().str(), "");
}

}  // namespace
}  // namespace kiln::core::tir

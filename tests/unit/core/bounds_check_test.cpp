// Bounds-checked loop IR (core/tir/bounds_check.h): an out-of-bounds kernel is caught by the
// interpreter (an error) and by JIT-compiled code (one line, then abort: death tests); in-bounds
// kernels and lowered operators compute exactly what they compute without the checks.
#include "core/tir/bounds_check.h"

#include <cstdlib>
#include <functional>

#include "core/compile.h"
#include "core/ir/parser.h"
#include "core/tir/printer.h"
#include "runtime/error.h"
#include "tests/unit/core/kernels_test_util.h"

namespace kiln::core::lower {
namespace {

using namespace tir;
using namespace testing;

tir::PrimFunc makeFunc(const std::string& name, std::vector<Buffer> params, Stmt body) {
  tir::PrimFunc f;
  f.name = name;
  f.params = std::move(params);
  f.numOutputs = 1;
  f.body = std::move(body);
  return f;
}

/// out[i] = in[i + shift] * 2 for i in [0, n): out of bounds when shift != 0.
tir::PrimFunc shiftedCopy(const std::string& name, int64_t n, int64_t shift) {
  Buffer in = makeBuffer("in", Type::f32(), {n});
  Buffer out = makeBuffer("out", Type::f32(), {n});
  Expr i = Var::make("i");
  Stmt body = For::make(i, i64(0), i64(n), ForKind::Serial, Store::make(out, i, Load::make(in, i + shift) * f32(2)));
  return makeFunc(name, {in, out}, body);
}

/// A vector kernel: out[8k .. 8k+7] = in[8k + shift .. 8k + shift + 7] for k in [0, n/8).
tir::PrimFunc shiftedVectorCopy(const std::string& name, int64_t n, int64_t shift) {
  Buffer in = makeBuffer("in", Type::f32(), {n});
  Buffer out = makeBuffer("out", Type::f32(), {n});
  Expr k = Var::make("k");
  Stmt body = For::make(k, i64(0), i64(n / 8), ForKind::Serial,
                        Store::make(out, Ramp::make(k * 8, i64(1), 8), Load::make(in, Ramp::make(k * 8 + shift, i64(1), 8))));
  return makeFunc(name, {in, out}, body);
}

std::shared_ptr<codegen::JitLibrary> jit(const tir::PrimFunc& f) {
  return codegen::JitLibrary::compile({f}, hostTarget());
}

void runJit(const tir::PrimFunc& f, std::vector<float>& in, std::vector<float>& out) {
  auto lib = jit(f);
  KilnKernelFn fn = lib->lookup(f.name);
  ASSERT_NE(fn, nullptr);
  void* args[] = {in.data(), out.data()};
  fn(args);
}

TEST(BoundsCheck, WrapsEveryIndexOnce) {
  BoundsCheckStats stats;
  tir::PrimFunc checked =
      insertBoundsChecks(shiftedVectorCopy("copy", 32, 0), &stats, BoundsCheckMode::Every);
  EXPECT_EQ(stats.checked, 2);
  EXPECT_EQ(stats.proven, 0);
  EXPECT_EQ(stats.unchecked, 0);
  EXPECT_TRUE(hasBoundsChecks(checked));
  EXPECT_EQ(checked.attrs.at("bounds_check"), "in,out");  // in order of first check
  EXPECT_EQ(boundsCheckBufferName(checked, 1), "out");
  EXPECT_EQ(boundsCheckBufferName(checked, 2), "?");
  std::string text = print(checked);
  EXPECT_NE(text.find("out[ramp(bounds_check((k * 8), 0, 7, 32, 1), 1, 8)]"), std::string::npos) << text;
  // Idempotent: a checked function is left as it is.
  BoundsCheckStats again;
  EXPECT_TRUE(insertBoundsChecks(checked, &again).body.same(checked.body));
  EXPECT_EQ(again.checked, 0);
}

/// out[i] = in[f(i)] for i in [0, n) with an index f the loop's range may or may not bound.
tir::PrimFunc gather(const std::string& name, int64_t n, const std::function<Expr(Expr)>& f) {
  Buffer in = makeBuffer("in", Type::f32(), {n});
  Buffer out = makeBuffer("out", Type::f32(), {n});
  Expr i = Var::make("i");
  return makeFunc(name, {in, out},
                  For::make(i, i64(0), i64(n), ForKind::Serial, Store::make(out, i, Load::make(in, f(i)))));
}

// By default only what the loop ranges do not prove is checked: the in-bounds copy keeps no check,
// each lane range and each operation counts, and what interval arithmetic cannot see stays checked.
TEST(BoundsCheck, ChecksWhatTheLoopRangesDoNotProve) {
  BoundsCheckStats stats;
  tir::PrimFunc copy = shiftedVectorCopy("copy", 32, 0);
  tir::PrimFunc checked = insertBoundsChecks(copy, &stats);
  EXPECT_EQ(stats.proven, 2);
  EXPECT_EQ(stats.checked, 0);
  EXPECT_TRUE(checked.body.same(copy.body));
  EXPECT_TRUE(hasBoundsChecks(checked));
  // One past the end in the last lane of the last vector only: in[25 .. 32] of 32.
  stats = {};
  insertBoundsChecks(shiftedVectorCopy("copy", 32, 1), &stats);
  EXPECT_EQ(stats.proven, 1);  // the store
  EXPECT_EQ(stats.checked, 1);
  auto counts = [](const tir::PrimFunc& f) {
    BoundsCheckStats s;
    insertBoundsChecks(f, &s);
    return std::make_pair(s.proven, s.checked);
  };
  using P = std::pair<int, int>;
  EXPECT_EQ(counts(gather("rev", 16, [](Expr i) { return i64(15) - i; })), P(2, 0));
  EXPECT_EQ(counts(gather("rev_over", 16, [](Expr i) { return i64(16) - i; })), P(1, 1));
  EXPECT_EQ(counts(gather("mod", 16, [](Expr i) { return (i * 7) % 16; })), P(2, 0));
  EXPECT_EQ(counts(gather("minmax", 16, [](Expr i) { return max(min(i - 3, i64(15)), i64(0)); })), P(2, 0));
  EXPECT_EQ(counts(gather("unclamped", 16, [](Expr i) { return min(i - 3, i64(15)); })), P(1, 1));
  // A let of a known range is known; an index that loads (a gather's table) is not.
  Buffer in = makeBuffer("in", Type::f32(), {16}), out = makeBuffer("out", Type::f32(), {16});
  Buffer table = makeBuffer("table", Type::i64(), {16});
  Expr i = Var::make("i"), j = Var::make("j");
  Stmt let = For::make(i, i64(0), i64(16), ForKind::Serial,
                       LetStmt::make(j, i64(15) - i, Store::make(out, i, Load::make(in, j))));
  EXPECT_EQ(counts(makeFunc("let", {in, out}, let)), P(2, 0));
  Stmt indirect = For::make(i, i64(0), i64(16), ForKind::Serial,
                            Store::make(out, i, Load::make(in, Load::make(table, i))));
  EXPECT_EQ(counts(makeFunc("indirect", {in, table, out}, indirect)), P(2, 1));
  // Values of 2^31 and beyond are never taken as proof (32-bit index arithmetic could wrap).
  EXPECT_EQ(counts(gather("wide", 16, [](Expr i) { return (i * (int64_t{1} << 31)) / (int64_t{1} << 31); })),
            P(1, 1));
}

TEST(BoundsCheck, InterpreterReportsTheAccess) {
  const int64_t n = 16;
  std::vector<float> in(n + 4, 1.0f), out(n, 0.0f);  // room for the overrun: only the check fails
  tir::PrimFunc f = insertBoundsChecks(shiftedCopy("shifted", n, 1));
  try {
    interpret(f, {in.data(), out.data()});
    FAIL() << "no error";
  } catch (const InternalError& e) {
    EXPECT_STREQ(e.what(), "out-of-bounds access in kernel 'shifted': buffer 'in', index 16, extent 16");
  }
  // Negative indices and vector lanes (the highest lane of the ramp) are reported too.
  try {
    interpret(insertBoundsChecks(shiftedCopy("under", n, -3)), {in.data() + 3, out.data()});
    FAIL() << "no error";
  } catch (const InternalError& e) {
    EXPECT_STREQ(e.what(), "out-of-bounds access in kernel 'under': buffer 'in', index -3, extent 16");
  }
  try {
    interpret(insertBoundsChecks(shiftedVectorCopy("vec", n, 2)), {in.data(), out.data()});
    FAIL() << "no error";
  } catch (const InternalError& e) {
    EXPECT_STREQ(e.what(), "out-of-bounds access in kernel 'vec': buffer 'in', index 17, extent 16");
  }
}

TEST(BoundsCheckDeathTest, JitKernelAbortsWithOneLine) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const int64_t n = 64;
  std::vector<float> in(n + 16, 1.0f), out(n, 0.0f);
  EXPECT_DEATH(runJit(insertBoundsChecks(shiftedCopy("oob_scalar", n, 5)), in, out),
               "kiln: error: out-of-bounds access in kernel 'oob_scalar': buffer 'in', index 64, extent 64");
  EXPECT_DEATH(runJit(insertBoundsChecks(shiftedVectorCopy("oob_vector", n, 3)), in, out),
               "kiln: error: out-of-bounds access in kernel 'oob_vector': buffer 'in', index 66, extent 64");
  // The environment switch alone makes code generation insert the checks.
  EXPECT_DEATH(
      {
        setenv("KILN_BOUNDS_CHECK", "1", 1);
        runJit(shiftedCopy("oob_env", n, 1), in, out);
      },
      "out-of-bounds access in kernel 'oob_env': buffer 'in', index 64, extent 64");
}

TEST(BoundsCheck, InBoundsKernelsComputeTheSame) {
  const int64_t n = 64;
  std::vector<float> in(n), plain(n, 0.0f), checked(n, 0.0f);
  for (int64_t i = 0; i < n; ++i) in[i] = static_cast<float>(i) * 0.25f - 3.0f;
  runJit(shiftedVectorCopy("vec_plain", n, 0), in, plain);
  runJit(insertBoundsChecks(shiftedVectorCopy("vec_checked", n, 0), nullptr, BoundsCheckMode::Every), in,
         checked);
  EXPECT_EQ(plain, checked);
  EXPECT_EQ(plain[9], in[9]);
}

// Lowered operators (register-tiled conv, pooling, dense, softmax, fused groups) with the checks
// from the loop-IR pass bounds-check (core/compile.h): JIT and interpreter results equal the
// unchecked build's.
TEST(BoundsCheck, LoweredNetworkRunsCleanWithChecks) {
  Graph g = parseGraph(R"(graph(%x: f32[1,3,13,11], %w: f32[8,3,3,3], %b: f32[8], %fw: f32[10,8]) {
    %c = conv2d(%x, %w, %b) {stride=[2,2], padding=[1,1], dilation=[1,1], groups=1} : f32[1,8,7,6]
    %r = relu(%c) : f32[1,8,7,6]
    %p = max_pool2d(%r) {kernel=[3,3], stride=[2,2], padding=[1,1], dilation=[1,1], ceil_mode=0} : f32[1,8,4,3]
    %m = mean(%p) {axes=[2,3], keepdims=0} : f32[1,8]
    %d = dense(%m, %fw) : f32[1,10]
    %s = softmax(%d) {axis=1} : f32[1,10]
    return %s
  })");
  std::vector<runtime::Tensor> inputs = {randomTensor({1, 3, 13, 11}, 1), randomTensor({8, 3, 3, 3}, 2),
                                         randomTensor({8}, 3), randomTensor({10, 8}, 4)};
  LoweredModule module = lowerGraph(g);
  std::vector<CompileStep> steps = runLoopPasses(module.funcs, passes::parsePipeline("bounds-check"));
  ASSERT_EQ(steps.size(), 1u);
  EXPECT_EQ(steps[0].detail, std::to_string(module.funcs.size()) + " of " + std::to_string(module.funcs.size()) +
                                 " kernels changed");
  for (const auto& f : module.funcs) EXPECT_TRUE(hasBoundsChecks(f)) << f.name;
  std::vector<float> expected = toVector(evalGraph(g, inputs, Engine::Jit)[0]);
  EXPECT_EQ(toVector(evalModule(module, inputs, Engine::Jit)[0]), expected);
  EXPECT_TRUE(allClose(evalModule(module, inputs, Engine::Interpreter)[0], expected, 1e-5));
  // Twice is once.
  steps = runLoopPasses(module.funcs, passes::parsePipeline("bounds-check"));
  EXPECT_EQ(steps[0].detail, "0 of " + std::to_string(module.funcs.size()) + " kernels changed");
  // Every access checked, proven or not: the same results.
  LoweredModule every = lowerGraph(g);
  BoundsCheckStats stats;
  for (auto& f : every.funcs) f = insertBoundsChecks(f, &stats, BoundsCheckMode::Every);
  EXPECT_GT(stats.checked, 10);
  EXPECT_EQ(toVector(evalModule(every, inputs, Engine::Jit)[0]), expected);
}

}  // namespace
}  // namespace kiln::core::lower

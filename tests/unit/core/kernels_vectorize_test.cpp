// The vectorize primitive (core/tir/vectorize.h): eligible innermost loops become vector code
// that computes exactly what the scalar loop did (interpreter on both, and the JIT), ineligible
// ones (reductions, loop-carried dependences, strided stores, nested loops) stay untouched.
#include "codegen/llvm/jit.h"
#include "core/lower/interpreter.h"
#include "core/tir/vectorize.h"
#include "core/tir/functor.h"
#include "core/tir/printer.h"
#include "core/tir/simplify.h"
#include "tests/unit/core/kernels_test_util.h"

namespace kiln::core::lower {
namespace {

using namespace tir;
using testing::hostTarget;

bool hasRamp(const Stmt& s) {
  struct Finder : IRVisitor {
    bool found = false;
    using IRVisitor::visit;
    void visit(const Ramp*) override { found = true; }
  } f;
  f.visitStmt(s);
  return f.found;
}

/// Runs `func` (params: n-element f32 buffers; the last is the output) in the interpreter, and
/// its vectorized form in the interpreter and the JIT; all three must agree exactly.
void expectSameResults(const PrimFunc& func, int lanes, bool expectVectorized) {
  PrimFunc vec = func;
  vec.name = func.name + "_vec";
  vec.body = simplify(vectorizeInnermostLoops(func.body, lanes));
  SCOPED_TRACE(print(vec));
  EXPECT_EQ(hasRamp(vec.body), expectVectorized);
  if (!expectVectorized) {
    EXPECT_TRUE(vec.body.same(func.body) || print(vec.body) == print(func.body));
  }
  std::vector<std::vector<float>> ref, got, jit;
  for (const Buffer& b : func.params) ref.push_back(testing::toVector(testing::randomTensor(b->shape, 3)));
  got = ref;
  jit = ref;
  auto args = [](std::vector<std::vector<float>>& bufs) {
    std::vector<void*> a;
    for (auto& b : bufs) a.push_back(b.data());
    return a;
  };
  interpret(func, args(ref));
  interpret(vec, args(got));
  auto lib = codegen::JitLibrary::compile({vec}, hostTarget());
  std::vector<void*> jargs = args(jit);
  lib->lookup(vec.name)(jargs.data());
  for (size_t p = 0; p < ref.size(); ++p) {
    EXPECT_EQ(got[p], ref[p]) << "interpreter, param " << p;
    for (size_t i = 0; i < ref[p].size(); ++i)
      ASSERT_NEAR(jit[p][i], ref[p][i], 1e-6 * (1 + std::fabs(ref[p][i]))) << "jit, param " << p << " element " << i;
  }
}

PrimFunc func(const std::string& name, std::vector<Buffer> params, Stmt body) {
  PrimFunc f;
  f.name = name;
  f.params = std::move(params);
  f.body = std::move(body);
  return f;
}

TEST(KernelsVectorize, BroadcastBinaryWithTail) {
  // y[r, c] = a[r, c] * s[c] + 1 over [5, 37]: 37 = 16 + 16 + 4 + 1 with 16 lanes.
  Buffer a = makeBuffer("a", Type::f32(), {5, 37}), s = makeBuffer("s", Type::f32(), {37}),
         y = makeBuffer("y", Type::f32(), {5, 37});
  Expr r = Var::make("r"), c = Var::make("c");
  Stmt body = For::make(r, i64(0), i64(5), ForKind::Parallel,
                        For::make(c, i64(0), i64(37), ForKind::Serial,
                                  Store::make(y, r * 37 + c, Load::make(a, r * 37 + c) * Load::make(s, c) + f32(1))));
  expectSameResults(func("bcast", {a, s, y}, body), 16, true);
  expectSameResults(func("bcast8", {a, s, y}, body), 8, true);
}

TEST(KernelsVectorize, LetSelectCastsAndCalls) {
  Buffer x = makeBuffer("x", Type::f32(), {64}), y = makeBuffer("y", Type::f32(), {64});
  Expr i = Var::make("i"), t = Var::make("t", Type::f32());
  Stmt body = For::make(
      i, i64(0), i64(64), ForKind::Serial,
      LetStmt::make(t, Load::make(x, i) * f32(2),
                    Store::make(y, i, select(t > f32(0), call("sigmoid", {t}), cast(Type::f32(), i) * f32(0.5)))));
  expectSameResults(func("lets", {x, y}, body), 16, true);
}

TEST(KernelsVectorize, GatherLoadsAndInvariantDivisions) {
  // NCHW16c → NCHW: y[c, w] = x[(c / 16 * 9 + w) * 16 + c % 16] (w inner: a stride-16 gather).
  Buffer x = makeBuffer("x", Type::f32(), {2, 9, 16}), y = makeBuffer("y", Type::f32(), {32, 9});
  Expr c = Var::make("c"), w = Var::make("w");
  Stmt body = For::make(c, i64(0), i64(32), ForKind::Serial,
                        For::make(w, i64(0), i64(9), ForKind::Serial,
                                  Store::make(y, c * 9 + w, Load::make(x, (c / 16 * 9 + w) * 16 + c % 16))));
  expectSameResults(func("gather", {x, y}, body), 8, true);
}

TEST(KernelsVectorize, IneligibleLoopsStayScalar) {
  Buffer x = makeBuffer("x", Type::f32(), {40}), y = makeBuffer("y", Type::f32(), {40});
  Expr i = Var::make("i");
  // A reduction into one element.
  expectSameResults(func("reduce", {x, y}, For::make(i, i64(0), i64(40), ForKind::Serial,
                                                      Store::make(y, i64(0), Load::make(y, i64(0)) + Load::make(x, i)))),
                    16, false);
  // A loop-carried dependence (prefix sum).
  Expr j = Var::make("j");
  expectSameResults(func("scan", {x, y}, For::make(j, i64(1), i64(39), ForKind::Serial,
                                                    Store::make(y, j, Load::make(y, j - 1) + Load::make(x, j)))),
                    16, false);
  // A strided store.
  Expr k = Var::make("k");
  expectSameResults(func("strided", {x, y}, For::make(k, i64(0), i64(20), ForKind::Serial,
                                                       Store::make(y, k * 2, Load::make(x, k)))),
                    16, false);
  // An index through integer division of the loop variable.
  Expr m = Var::make("m");
  expectSameResults(func("divided", {x, y}, For::make(m, i64(0), i64(40), ForKind::Serial,
                                                       Store::make(y, m, Load::make(x, m / 2)))),
                    16, false);
}

TEST(KernelsVectorize, ParallelInnermostLoopKeepsParallelChunks) {
  Buffer x = makeBuffer("x", Type::f32(), {1000}), y = makeBuffer("y", Type::f32(), {1000});
  Expr i = Var::make("i");
  Stmt body = For::make(i, i64(0), i64(1000), ForKind::Parallel, Store::make(y, i, call("exp", {Load::make(x, i)})));
  PrimFunc f = func("par", {x, y}, body);
  Stmt vec = vectorizeInnermostLoops(body, 16);
  ASSERT_NE(vec.as<Seq>(), nullptr);
  const auto* main = vec.as<Seq>()->stmts[0].as<For>();
  ASSERT_NE(main, nullptr);
  EXPECT_EQ(main->forKind, ForKind::Parallel);
  EXPECT_EQ(*asConstInt(main->extent), 62);  // 62 × 16 + 8 = 1000
  expectSameResults(f, 16, true);
}

}  // namespace
}  // namespace kiln::core::lower

// Loop kinds and explicit vector code, JIT-compiled for the host and run on real buffers.
#include <thread>

#include "codegen/llvm/jit.h"
#include "core/tir/expr.h"
#include "runtime/thread_pool.h"
#include "tests/unit/codegen/codegen_test_util.h"

namespace kiln::codegen::testing {
namespace {

using namespace core::tir;

struct AddBuffers {
  Buffer a, b, c;
  explicit AddBuffers(int64_t n)
      : a(makeBuffer("a", Type::f32(), {n})),
        b(makeBuffer("b", Type::f32(), {n})),
        c(makeBuffer("c", Type::f32(), {n})) {}
  std::vector<Buffer> params() const { return {a, b, c}; }
  /// for i in [0, n) of `kind`: c[i] = a[i] + b[i]
  Stmt loop(ForKind kind, int64_t n) const {
    Expr i = Var::make("i");
    return For::make(i, i64(0), i64(n), kind, Store::make(c, i, Load::make(a, i) + Load::make(b, i)));
  }
};

void expectAdd(JitLibrary& lib, const std::string& name, int64_t n) {
  std::vector<float> a = randomFloats(n, -2, 2, 1), b = randomFloats(n, -2, 2, 2), c(n, -99.0f);
  runKernel(lib, name, {a.data(), b.data(), c.data()});
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(c[i], a[i] + b[i]) << name << " at " << i;
}

TEST(JitLoops, ScalarAdd) {
  const int64_t n = 1003;
  AddBuffers bufs(n);
  auto lib = jit({makeFunc("add_scalar", bufs.params(), bufs.loop(ForKind::Serial, n))});
  expectAdd(*lib, "add_scalar", n);
}

TEST(JitLoops, VectorizedInnerLoopWithTailGuard) {
  const int64_t n = 1003;  // not a multiple of 8: the last block is guarded
  AddBuffers bufs(n);
  Expr io = Var::make("io"), ii = Var::make("ii");
  Expr idx = io * 8 + ii;
  Stmt store = Store::make(bufs.c, idx, Load::make(bufs.a, idx) + Load::make(bufs.b, idx));
  Stmt inner = For::make(ii, i64(0), i64(8), ForKind::Vectorized, IfThenElse::make(idx < i64(n), store));
  Stmt body = For::make(io, i64(0), i64((n + 7) / 8), ForKind::Serial, inner);
  auto lib = jit({makeFunc("add_vec", bufs.params(), body)});
  expectAdd(*lib, "add_vec", n);
}

TEST(JitLoops, ParallelOuterLoopRunsOnThePool) {
  const int64_t n = 1001;  // odd: chunks differ in size
  AddBuffers bufs(n);
  Stmt body = bufs.loop(ForKind::Parallel, n);
  std::vector<PrimFunc> funcs = {makeFunc("add_par", bufs.params(), body)};
  EXPECT_NE(emitLLVMIR(funcs, hostTarget(), false).find("call i32 @kiln_parallel_launch(ptr @add_par.par0"),
            std::string::npos);
  auto lib = jit(funcs);
  for (int threads : {2, 3, 1}) {
    runtime::setNumThreads(threads);
    expectAdd(*lib, "add_par", n);
  }
  runtime::setNumThreads(0);
}

TEST(JitLoops, ParallelGranularityOfAScheduleTakesTheChunkedLaunch) {
  const int64_t n = 1001;
  AddBuffers bufs(n);
  Stmt body = bufs.loop(ForKind::Parallel, n);
  for (const char* chunks : {"1", "16", "64"}) {
    PrimFunc f = makeFunc("add_chunks", bufs.params(), body);
    f.attrs["parallel_chunks"] = chunks;
    std::string ir = emitLLVMIR({f}, hostTarget(), false);
    EXPECT_NE(ir.find("call i32 @kiln_parallel_launch_chunked(ptr @add_chunks.par0"), std::string::npos) << ir;
    EXPECT_NE(ir.find("i64 1001, i64 " + std::string(chunks) + ")"), std::string::npos) << ir;
    auto lib = jit({f});
    for (int threads : {2, 3}) {
      runtime::setNumThreads(threads);
      expectAdd(*lib, "add_chunks", n);
    }
  }
  runtime::setNumThreads(0);
}

TEST(JitLoops, ParallelLoopCapturesOuterVarsBuffersAndLets) {
  // for r in 0..5: let s = r * 3 + 1: parallel j in 2..(2+9): out[r*16 + j] = a[j] * s + tmp[j]
  // where tmp is an outer Allocate written before the parallel loop; nested parallel runs serially.
  const int64_t rows = 5, cols = 16;
  Buffer a = makeBuffer("a", Type::f32(), {cols});
  Buffer out = makeBuffer("out", Type::f32(), {rows, cols});
  Buffer tmp = makeBuffer("tmp", Type::f32(), {cols});
  Expr r = Var::make("r"), s = Var::make("s", Type::f32()), j = Var::make("j"), k = Var::make("k");
  Stmt fillTmp =
      For::make(j, i64(0), i64(cols), ForKind::Serial, Store::make(tmp, j, cast(Type::f32(), j) * f32(0.5)));
  Stmt inner = For::make(k, i64(0), i64(1), ForKind::Parallel,  // nested parallel: serial inside the task
                         Store::make(out, r * cols + j + k, Load::make(a, j) * s + Load::make(tmp, j)));
  Stmt par = For::make(j, i64(2), i64(9), ForKind::Parallel, inner);
  Stmt perRow = LetStmt::make(s, cast(Type::f32(), r * 3 + 1), par);
  Stmt body =
      Allocate::make(tmp, Seq::make({fillTmp, For::make(r, i64(0), i64(rows), ForKind::Serial, perRow)}));
  std::vector<PrimFunc> funcs = {makeFunc("capture", {a, out}, body)};
  std::string ir = emitLLVMIR(funcs, hostTarget(), false);
  EXPECT_NE(ir.find("@capture.par0"), std::string::npos);
  EXPECT_EQ(ir.find("@capture.par1"), std::string::npos) << "nested parallel loops must not be outlined";
  auto lib = jit(funcs);
  runtime::setNumThreads(2);
  std::vector<float> av = randomFloats(cols), outv(rows * cols, -1.0f);
  runKernel(*lib, "capture", {av.data(), outv.data()});
  runtime::setNumThreads(0);
  for (int64_t ri = 0; ri < rows; ++ri)
    for (int64_t ji = 0; ji < cols; ++ji) {
      float expected = ji >= 2 && ji < 11 ? av[ji] * float(ri * 3 + 1) + float(ji) * 0.5f : -1.0f;
      ASSERT_FLOAT_EQ(outv[ri * cols + ji], expected) << ri << "," << ji;
    }
}

TEST(JitLoops, UnrolledLoops) {
  // out[i*4 + u] = a[i*4 + u] * (u + 1) with u unrolled (replicated), and a 100-long unrolled loop
  // (metadata path) that sums a prefix.
  const int64_t n = 64;
  Buffer a = makeBuffer("a", Type::f32(), {n});
  Buffer out = makeBuffer("out", Type::f32(), {n + 1});
  Expr i = Var::make("i"), u = Var::make("u"), k = Var::make("k");
  Stmt small =
      For::make(i, i64(0), i64(n / 4), ForKind::Serial,
                For::make(u, i64(0), i64(4), ForKind::Unrolled,
                          Store::make(out, i * 4 + u, Load::make(a, i * 4 + u) * cast(Type::f32(), u + 1))));
  Stmt init = Store::make(out, i64(n), f32(0));
  Stmt big = For::make(k, i64(0), i64(100), ForKind::Unrolled,
                       Store::make(out, i64(n), Load::make(out, i64(n)) + Load::make(a, k % n)));
  auto lib = jit({makeFunc("unrolled", {a, out}, Seq::make({small, init, big}))});
  std::vector<float> av = randomFloats(n), outv(n + 1);
  runKernel(*lib, "unrolled", {av.data(), outv.data()});
  float sum = 0;
  for (int k2 = 0; k2 < 100; ++k2) sum += av[k2 % n];
  for (int64_t x = 0; x < n; ++x) ASSERT_FLOAT_EQ(outv[x], av[x] * float(x % 4 + 1));
  EXPECT_NEAR(outv[n], sum, 1e-4);
}

TEST(JitLoops, ExplicitVectorRampAndBroadcast) {
  // c[8i .. 8i+7] = a[8i ..] * 2 + b[8i ..]  as f32x8 vector loads/stores.
  const int64_t n = 64;
  AddBuffers bufs(n);
  Expr i = Var::make("i");
  Expr lanes = Ramp::make(i * 8, i64(1), 8);
  Expr value = Load::make(bufs.a, lanes) * Broadcast::make(f32(2), 8) + Load::make(bufs.b, lanes);
  ASSERT_EQ(value.type(), Type::f32(8));
  auto lib =
      jit({makeFunc("vec8", bufs.params(),
                    For::make(i, i64(0), i64(n / 8), ForKind::Serial, Store::make(bufs.c, lanes, value)))});
  std::vector<float> a = randomFloats(n, -2, 2, 3), b = randomFloats(n, -2, 2, 4), c(n);
  runKernel(*lib, "vec8", {a.data(), b.data(), c.data()});
  for (int64_t x = 0; x < n; ++x) ASSERT_FLOAT_EQ(c[x], a[x] * 2 + b[x]);
}

TEST(JitLoops, StridedRampGatherAndScatter) {
  // Transpose an 8x8 matrix with gathers (column loads) and scatter it back doubled.
  const int64_t n = 8;
  Buffer a = makeBuffer("a", Type::f32(), {n, n});
  Buffer t = makeBuffer("t", Type::f32(), {n, n});
  Buffer s = makeBuffer("s", Type::f32(), {n, n});
  Expr i = Var::make("i");
  Stmt gather = Store::make(t, Ramp::make(i * n, i64(1), 8), Load::make(a, Ramp::make(i, i64(n), 8)));
  Stmt scatter =
      Store::make(s, Ramp::make(i, i64(n), 8), Load::make(t, Ramp::make(i * n, i64(1), 8)) * f32(2));
  auto lib = jit({makeFunc("transpose", {a, t, s},
                           For::make(i, i64(0), i64(n), ForKind::Serial, Seq::make({gather, scatter})), 2)});
  std::vector<float> av = randomFloats(n * n), tv(n * n), sv(n * n);
  runKernel(*lib, "transpose", {av.data(), tv.data(), sv.data()});
  for (int64_t r = 0; r < n; ++r)
    for (int64_t c = 0; c < n; ++c) {
      ASSERT_EQ(tv[r * n + c], av[c * n + r]);
      ASSERT_EQ(sv[c * n + r], 2 * av[c * n + r]);
    }
}

TEST(JitLoops, MatmulWithAllocatedAccumulatorOddSizes) {
  const int64_t m = 7, k = 13, n = 5;
  Buffer a = makeBuffer("a", Type::f32(), {m, k});
  Buffer b = makeBuffer("b", Type::f32(), {k, n});
  Buffer c = makeBuffer("c", Type::f32(), {m, n});
  Buffer acc = makeBuffer("acc", Type::f32(), {1});
  Expr i = Var::make("i"), j = Var::make("j"), r = Var::make("r");
  Stmt reduce =
      For::make(r, i64(0), i64(k), ForKind::Serial,
                Store::make(acc, i64(0),
                            Load::make(acc, i64(0)) + Load::make(a, i * k + r) * Load::make(b, r * n + j)));
  Stmt cell = Allocate::make(acc, Seq::make({Store::make(acc, i64(0), f32(0)), reduce,
                                             Store::make(c, i * n + j, Load::make(acc, i64(0)))}));
  Stmt body =
      For::make(i, i64(0), i64(m), ForKind::Parallel, For::make(j, i64(0), i64(n), ForKind::Serial, cell));
  auto lib = jit({makeFunc("matmul", {a, b, c}, body)});
  std::vector<float> av = randomFloats(m * k, -1, 1, 5), bv = randomFloats(k * n, -1, 1, 6), cv(m * n);
  runKernel(*lib, "matmul", {av.data(), bv.data(), cv.data()});
  for (int64_t x = 0; x < m; ++x)
    for (int64_t y = 0; y < n; ++y) {
      double ref = 0;
      for (int64_t z = 0; z < k; ++z) ref += double(av[x * k + z]) * bv[z * n + y];
      ASSERT_TRUE(closeRel(ref, cv[x * n + y], 1e-5)) << x << "," << y;
    }
}

TEST(JitLoops, Conv2dWithPaddingGuardMatchesReference) {
  for (ConvShape s : {ConvShape{3, 7, 13, 5, 3, 1, 1}, ConvShape{4, 9, 11, 6, 3, 2, 1},
                      ConvShape{2, 8, 8, 3, 5, 1, 2}, ConvShape{5, 6, 7, 4, 1, 1, 0}}) {
    auto lib = jit({makeConv2d("conv", s)});
    std::vector<float> data = randomFloats(s.c * s.h * s.w, -1, 1, 7);
    std::vector<float> weight = randomFloats(s.oc * s.c * s.k * s.k, -1, 1, 8);
    std::vector<float> bias = randomFloats(s.oc, -0.5, 0.5, 9);
    std::vector<float> out(s.oc * s.oh() * s.ow(), -7.0f);
    runtime::setNumThreads(2);
    runKernel(*lib, "conv", {data.data(), weight.data(), bias.data(), out.data()});
    runtime::setNumThreads(0);
    std::vector<float> ref = referenceConv2d(s, data, weight, bias);
    for (size_t x = 0; x < ref.size(); ++x)
      ASSERT_TRUE(closeRel(ref[x], out[x], 1e-5)) << "k=" << s.k << " at " << x;
  }
}

TEST(JitLoops, LargeAllocateUsesTheHeap) {
  const int64_t n = 20000;  // 80 KB: above the stack limit
  Buffer a = makeBuffer("a", Type::f32(), {n});
  Buffer out = makeBuffer("out", Type::f32(), {n});
  Buffer tmp = makeBuffer("tmp", Type::f32(), {n});
  Expr i = Var::make("i");
  Stmt body = Allocate::make(
      tmp,
      Seq::make(
          {For::make(i, i64(0), i64(n), ForKind::Serial, Store::make(tmp, i, Load::make(a, i) * f32(3))),
           For::make(i, i64(0), i64(n), ForKind::Serial, Store::make(out, n - 1 - i, Load::make(tmp, i)))}));
  std::vector<PrimFunc> funcs = {makeFunc("heap", {a, out}, body)};
  std::string ir = emitLLVMIR(funcs, hostTarget(), false);
  EXPECT_NE(ir.find("@aligned_alloc"), std::string::npos);
  EXPECT_NE(ir.find("@free"), std::string::npos);
  auto lib = jit(funcs);
  std::vector<float> av = randomFloats(n), outv(n);
  runKernel(*lib, "heap", {av.data(), outv.data()});
  for (int64_t x = 0; x < n; ++x) ASSERT_EQ(outv[n - 1 - x], av[x] * 3);
}

TEST(JitLoops, DeclinedVectorizationIsSilentAndCorrect) {
  // A loop-carried dependence: LLVM must refuse the vectorize hint. Its "loop not vectorized"
  // warning is swallowed by the diagnostic handler instead of reaching stderr.
  const int64_t n = 100;
  Buffer a = makeBuffer("a", Type::f32(), {n});
  Buffer c = makeBuffer("c", Type::f32(), {n});
  Expr i = Var::make("i");
  Stmt body = For::make(i, i64(1), i64(n - 1), ForKind::Vectorized,
                        Store::make(c, i, Load::make(c, i - 1) + Load::make(a, i)));
  ::testing::internal::CaptureStderr();
  auto lib = jit({makeFunc("scan", {a, c}, body)});
  std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(err, "");
  std::vector<float> av(n, 1.0f), cv(n, 0.0f);
  runKernel(*lib, "scan", {av.data(), cv.data()});
  for (int64_t x = 0; x < n; ++x) ASSERT_EQ(cv[x], float(x)) << x;
}

TEST(JitLoops, I32LoopVariables) {
  const int64_t n = 37;
  AddBuffers bufs(n);
  Expr i = Var::make("i", Type::i32());
  Stmt body = For::make(i, IntImm::make(Type::i32(), 0), IntImm::make(Type::i32(), n), ForKind::Vectorized,
                        Store::make(bufs.c, i, Load::make(bufs.a, i) + Load::make(bufs.b, i)));
  auto lib = jit({makeFunc("add_i32", bufs.params(), body)});
  expectAdd(*lib, "add_i32", n);
}

TEST(JitLoops, SeveralKernelsInOneModuleAndConcurrentCompiles) {
  const int64_t n = 100;
  AddBuffers bufs(n);
  Expr i = Var::make("i");
  Stmt add = For::make(i, i64(0), i64(n), ForKind::Serial,
                       Store::make(bufs.c, i, Load::make(bufs.a, i) + Load::make(bufs.b, i)));
  Stmt mul = For::make(i, i64(0), i64(n), ForKind::Parallel,
                       Store::make(bufs.c, i, Load::make(bufs.a, i) * Load::make(bufs.b, i)));
  std::vector<PrimFunc> funcs = {makeFunc("k_add", bufs.params(), add),
                                 makeFunc("k_mul", bufs.params(), mul)};
  std::vector<std::shared_ptr<JitLibrary>> libs(4);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < libs.size(); ++t) threads.emplace_back([&, t] { libs[t] = jit(funcs); });
  for (auto& t : threads) t.join();
  for (auto& lib : libs) {
    ASSERT_NE(lib, nullptr);
    expectAdd(*lib, "k_add", n);
    std::vector<float> a = randomFloats(n), b = randomFloats(n, -1, 1, 3), c(n);
    runKernel(*lib, "k_mul", {a.data(), b.data(), c.data()});
    for (int64_t x = 0; x < n; ++x) ASSERT_EQ(c[x], a[x] * b[x]);
  }
}

}  // namespace
}  // namespace kiln::codegen::testing

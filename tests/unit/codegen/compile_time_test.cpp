// Compile time by structure: a ResNet-50 has about 60 distinct kernels, and what keeps its JIT
// (codegen + O3 + machine code) fast is that they go through code generation once, as one module,
// into one object of bounded size. This builds 60 distinct conv-like loop nests with
// ResNet-50-style shapes, compiles them, checks that structure and one kernel numerically. The
// seconds it took are printed and recorded (a test property), not asserted: timings belong in
// benchmarks, not on a shared machine's test run.
#include <chrono>
#include <cstdio>

#include "codegen/llvm/jit.h"
#include "runtime/thread_pool.h"
#include "tests/unit/codegen/codegen_test_util.h"

namespace kiln::codegen::testing {
namespace {

std::vector<ConvShape> resnetLikeShapes() {
  std::vector<ConvShape> shapes = {{3, 224, 224, 64, 7, 2, 3}};
  const int64_t stages[4][3] = {{64, 56, 256}, {128, 28, 512}, {256, 14, 1024}, {512, 7, 2048}};
  for (const auto& st : stages) {
    const int64_t mid = st[0], hw = st[1], outC = st[2];
    shapes.push_back({outC, hw, hw, mid, 1, 1, 0});               // 1x1 reduce
    shapes.push_back({mid, hw, hw, mid, 3, 1, 1});                // 3x3
    shapes.push_back({mid, hw, hw, outC, 1, 1, 0});               // 1x1 expand
    shapes.push_back({outC / 2, hw * 2, hw * 2, outC, 1, 2, 0});  // strided projection
    shapes.push_back({mid, hw * 2, hw * 2, mid, 3, 2, 1});        // strided 3x3
  }
  // Fill up to 60 distinct kernels with width/channel variations (as fused variants would be).
  for (int64_t v = 0; shapes.size() < 60; ++v) {
    const ConvShape& base = shapes[1 + v % 20];
    shapes.push_back({base.c, base.h, base.w + 1 + v / 20, base.oc, base.k, base.stride, base.pad});
  }
  return shapes;
}

TEST(CompileTime, SixtyConvKernelsCompileOnceIntoOneObject) {
  std::vector<ConvShape> shapes = resnetLikeShapes();
  shapes.push_back({3, 9, 10, 4, 3, 1, 1});  // small one to run
  std::vector<core::tir::PrimFunc> funcs;
  for (size_t i = 0; i < shapes.size(); ++i)
    funcs.push_back(makeConv2d("conv_" + std::to_string(i), shapes[i]));
  auto start = std::chrono::steady_clock::now();
  auto lib = jit(funcs);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const JitStats& stats = lib->stats();
  std::printf("compiled %zu conv kernels in %.2f s: %d object(s), %zu bytes\n", funcs.size(), seconds,
              stats.objects, stats.objectBytes);
  RecordProperty("compile_seconds", std::to_string(seconds));
  EXPECT_EQ(stats.objects, 1);  // one module through code generation, not one per kernel
  EXPECT_EQ(stats.kernels, static_cast<int>(funcs.size()));
  // No kernel's code explodes (an unrolled loop nest, a duplicated one): they take 1.3 KiB each
  // on average with AVX2, and 8 KiB each bounds them.
  EXPECT_GT(stats.objectBytes, 0u);
  EXPECT_LT(stats.objectBytes, funcs.size() * 8 * 1024);
  for (const auto& f : funcs) ASSERT_NE(lib->lookup(f.name), nullptr) << f.name;

  const ConvShape& s = shapes.back();
  std::vector<float> data = randomFloats(s.c * s.h * s.w, -1, 1, 1);
  std::vector<float> weight = randomFloats(s.oc * s.c * s.k * s.k, -1, 1, 2);
  std::vector<float> bias = randomFloats(s.oc, -1, 1, 3);
  std::vector<float> out(s.oc * s.oh() * s.ow());
  runKernel(*lib, funcs.back().name, {data.data(), weight.data(), bias.data(), out.data()});
  std::vector<float> ref = referenceConv2d(s, data, weight, bias);
  for (size_t i = 0; i < ref.size(); ++i) ASSERT_TRUE(closeRel(ref[i], out[i], 1e-5)) << i;
}

}  // namespace
}  // namespace kiln::codegen::testing

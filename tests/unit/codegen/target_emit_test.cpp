// Target strings, IR/assembly emission (host and cross), and JIT symbol lookup.
#include <sstream>

#include "codegen/llvm/jit.h"
#include "codegen/target.h"
#include "runtime/error.h"
#include "runtime/module.h"
#include "tests/unit/codegen/codegen_test_util.h"

namespace kiln::codegen::testing {
namespace {

using namespace core::tir;

bool hostIsX86() { return hostTarget().triple.rfind("x86_64", 0) == 0; }

ErrorKind parseErrorKind(const std::string& spec, std::string* message) {
  try {
    Target::parse(spec);
  } catch (const Error& e) {
    *message = e.what();
    return e.kind();
  }
  return ErrorKind::Internal;
}

PrimFunc vectorizedAdd(const std::string& name, int64_t n) {
  Buffer a = makeBuffer("a", Type::f32(), {n});
  Buffer b = makeBuffer("b", Type::f32(), {n});
  Buffer c = makeBuffer("c", Type::f32(), {n});
  Expr io = Var::make("io"), ii = Var::make("ii");
  Expr idx = io * 8 + ii;
  Stmt body =
      For::make(io, i64(0), i64(n / 8), ForKind::Parallel,
                For::make(ii, i64(0), i64(8), ForKind::Vectorized,
                          Store::make(c, idx, Load::make(a, idx) * Load::make(b, idx) + Load::make(c, idx))));
  return makeFunc(name, {a, b, c}, body);
}

TEST(Target, HostParsesAndPrintsAsLlvm) {
  Target t = Target::parse("llvm");
  EXPECT_FALSE(t.triple.empty());
  EXPECT_EQ(t.cpu, hostCpuName());
  EXPECT_FALSE(t.cpu.empty());
  EXPECT_TRUE(t.runnable);
  EXPECT_EQ(t.str(), "llvm");
  Target again = Target::parse(t.str());
  EXPECT_EQ(again.cpu, t.cpu);
  EXPECT_EQ(again.features, t.features);
}

// The host target claims only features the runtime's loader finds here: CPUID's features less
// those the OS withholds (/proc/cpuinfo), so a module exported for this machine loads on it.
TEST(Target, HostFeaturesAreOnesTheLoaderFindsHere) {
  Target t = Target::parse("llvm");
  std::vector<std::string> enabled;
  std::stringstream list(t.features);
  for (std::string f; std::getline(list, f, ',');)
    if (!f.empty() && f[0] == '+') enabled.push_back(f.substr(1));
  ASSERT_FALSE(enabled.empty()) << t.features;
  EXPECT_EQ(runtime::missingCpuFeatures(enabled), std::vector<std::string>{}) << t.features;
}

TEST(Target, NamedCpu) {
  if (!hostIsX86()) GTEST_SKIP() << "x86 host only";
  Target t = Target::parse("llvm -mcpu=skylake");
  EXPECT_EQ(t.cpu, "skylake");
  EXPECT_EQ(t.triple, hostTarget().triple);
  EXPECT_EQ(t.str(), "llvm -mcpu=skylake");
  EXPECT_EQ(Target::parse(t.str()).cpu, "skylake");
  // skylake's ISA (AVX2, FMA, ...) is a subset of any x86 host this project runs on; this
  // assertion documents that assumption (the brief's "x86 host: runnable").
  EXPECT_TRUE(t.runnable);
  Target withAttr = Target::parse("llvm -mcpu=haswell -mattr=-avx2,+fma");
  EXPECT_EQ(withAttr.features, "-avx2,+fma");
  EXPECT_EQ(withAttr.str(), "llvm -mcpu=haswell -mattr=-avx2,+fma");
}

TEST(Target, UnknownCpuFeatureFlagOrTargetAreUsageErrors) {
  std::string message;
  EXPECT_EQ(parseErrorKind("llvm -mcpu=nonsense", &message), ErrorKind::Usage);
  EXPECT_NE(message.find("unknown CPU 'nonsense' for target"), std::string::npos) << message;
  EXPECT_EQ(parseErrorKind("tvm", &message), ErrorKind::Usage);
  EXPECT_NE(message.find("'tvm'"), std::string::npos) << message;
  EXPECT_EQ(parseErrorKind("", &message), ErrorKind::Usage);
  EXPECT_EQ(parseErrorKind("llvm -O3", &message), ErrorKind::Usage);
  EXPECT_NE(message.find("-O3"), std::string::npos) << message;
  EXPECT_EQ(parseErrorKind("llvm -mattr=+nosuchfeature", &message), ErrorKind::Usage);
  EXPECT_NE(message.find("nosuchfeature"), std::string::npos) << message;
  EXPECT_EQ(parseErrorKind("llvm -mtriple=potato-unknown-nowhere", &message), ErrorKind::Usage);
  EXPECT_EQ(parseErrorKind("llvm -mcpu=skylake -mcpu=haswell", &message), ErrorKind::Usage);
  EXPECT_EQ(message.find('\n'), std::string::npos) << "one-line messages";
}

TEST(Target, CrossTargetIsNotRunnableButEmitsAssembly) {
  Target t = Target::parse("llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72");
  EXPECT_EQ(t.triple, "aarch64-unknown-linux-gnu");
  EXPECT_EQ(t.cpu, "cortex-a72");
  if (hostIsX86()) {
    EXPECT_FALSE(t.runnable);
    EXPECT_EQ(t.str(), "llvm -mtriple=aarch64-unknown-linux-gnu -mcpu=cortex-a72");
  }
  std::string asmText = emitAssembly({vectorizedAdd("cross_add", 1024)}, t);
  EXPECT_NE(asmText.find("cross_add:"), std::string::npos);
  EXPECT_TRUE(asmText.find("fmla") != std::string::npos || asmText.find("fadd") != std::string::npos)
      << asmText;
  EXPECT_NE(asmText.find("ldr"), std::string::npos);
  EXPECT_NE(asmText.find("kiln_parallel_launch"), std::string::npos);
  if (hostIsX86()) {
    try {
      JitLibrary::compile({vectorizedAdd("cross_add", 64)}, t);
      FAIL() << "a cross target must not JIT";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::Usage);
    }
  }
  if (hostIsX86()) {
    EXPECT_FALSE(Target::parse("llvm -mtriple=x86_64-pc-windows-msvc").runnable) << "other OS: export only";
    EXPECT_TRUE(Target::parse("llvm -mtriple=x86_64-linux-gnu").runnable);
  }
  std::string message;
  EXPECT_EQ(parseErrorKind("llvm -mtriple=aarch64-linux-gnu -mcpu=skylake", &message), ErrorKind::Usage);
  EXPECT_NE(message.find("aarch64"), std::string::npos) << message;
}

TEST(Emit, LlvmIrHasKernelAndWideVectorsOnAvx2) {
  if (!hostIsX86()) GTEST_SKIP() << "x86 host only";
  Target haswell = Target::parse("llvm -mcpu=haswell");
  std::vector<PrimFunc> funcs = {vectorizedAdd("vadd", 1024)};
  std::string raw = emitLLVMIR(funcs, haswell, false);
  EXPECT_NE(raw.find("define void @vadd(ptr noalias"), std::string::npos) << raw;
  EXPECT_NE(raw.find("llvm.loop.vectorize.enable"), std::string::npos);
  EXPECT_NE(raw.find("\"target-cpu\"=\"haswell\""), std::string::npos);
  std::string opt = emitLLVMIR(funcs, haswell, true);
  EXPECT_NE(opt.find("define void @vadd("), std::string::npos) << opt;
  EXPECT_NE(opt.find("<8 x float>"), std::string::npos) << opt;
  // contract lets the backend fuse a*b+c into FMA on haswell
  std::string asmText = emitAssembly(funcs, haswell);
  EXPECT_NE(asmText.find("vfmadd"), std::string::npos) << asmText;
  EXPECT_NE(asmText.find("ymm"), std::string::npos);
}

TEST(Emit, ScalarLoopIsAutoVectorizedWithoutHints) {
  if (!hostIsX86()) GTEST_SKIP() << "x86 host only";
  const int64_t n = 4096;
  Buffer a = makeBuffer("a", Type::f32(), {n});
  Buffer b = makeBuffer("b", Type::f32(), {n});
  Expr i = Var::make("i");
  auto f = makeFunc(
      "relu", {a, b},
      For::make(i, i64(0), i64(n), ForKind::Serial, Store::make(b, i, max(Load::make(a, i), f32(0)))));
  std::string opt = emitLLVMIR({f}, Target::parse("llvm -mcpu=haswell"), true);
  EXPECT_NE(opt.find("<8 x float>"), std::string::npos)
      << "noalias scopes must let LLVM vectorize without runtime checks";
  EXPECT_EQ(opt.find("vector.memcheck"), std::string::npos) << opt;
}

TEST(Emit, FastMathAttributeEnablesReductionVectorization) {
  if (!hostIsX86()) GTEST_SKIP() << "x86 host only";
  const int64_t n = 1024;
  Buffer a = makeBuffer("a", Type::f32(), {n});
  Buffer out = makeBuffer("out", Type::f32(), {1});
  Expr i = Var::make("i");
  Stmt body = Seq::make({Store::make(out, i64(0), f32(0)),
                         For::make(i, i64(0), i64(n), ForKind::Serial,
                                   Store::make(out, i64(0), Load::make(out, i64(0)) + Load::make(a, i)))});
  PrimFunc strict = makeFunc("sum", {a, out}, body);
  PrimFunc relaxed = strict;
  relaxed.attrs["fast_math"] = "reassoc,nsz";
  Target haswell = Target::parse("llvm -mcpu=haswell");
  // IEEE order: a float sum into one accumulator stays scalar; reassoc lets it vectorize.
  EXPECT_EQ(emitLLVMIR({strict}, haswell, true).find("x float>"), std::string::npos);
  EXPECT_NE(emitLLVMIR({relaxed}, haswell, true).find("<8 x float>"), std::string::npos);
  auto lib = jit({relaxed});
  std::vector<float> av = randomFloats(n), outv(1);
  runKernel(*lib, "sum", {av.data(), outv.data()});
  double ref = 0;
  for (float v : av) ref += v;
  EXPECT_NEAR(outv[0], ref, 1e-3);
  relaxed.attrs["fast_math"] = "reassoc,bogus";
  EXPECT_THROW(emitLLVMIR({relaxed}, haswell, false), InternalError);
}

TEST(Jit, MissingSymbolLookupReturnsNull) {
  auto lib = jit({vectorizedAdd("present", 64)});
  EXPECT_NE(lib->lookup("present"), nullptr);
  EXPECT_EQ(lib->lookup("absent"), nullptr);
  EXPECT_EQ(lib->lookup("present.par0"), nullptr) << "outlined tasks are not kernels";
  EXPECT_EQ(lib->lookup(""), nullptr);
}

}  // namespace
}  // namespace kiln::codegen::testing

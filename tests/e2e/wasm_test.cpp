// WebAssembly modules that really run (issue 20): `kiln compile --target "llvm -mtriple=
// wasm32-unknown-unknown -mattr=+simd128"` writes graph.txt, params.bin and kernels.wasm (linked
// by wasm-ld against wasi-libc); Node runs them through the JavaScript runtime in web/
// (web/run_model.mjs), and their outputs must match the host's in-process build within 1e-4
// (networks: 1e-4 of their logits' scale). The schedules use SIMD128-width (4 × f32) vectors and
// `kiln ir --stage asm` shows wasm text with f32x4 instructions; headless Chromium runs the same
// module through the same runtime (web/run_browser.mjs) on MobileNetV2. The five sample CNNs agree in
// Node (each prints "agreement MODEL max|diff| = X (output scale Y)"), and `kiln compile --check`
// and app::checkCrossTarget (the Workbench) make the same check. A missing wasm-ld, a corrupted
// params.bin and kernels.wasm of another export are one-line errors. No mocks: real wasm-ld, real
// Node, real sample models.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include "app/facade.h"
#include "app/inspect.h"
#include "runtime/error.h"
#include "runtime/npy.h"
#include "runtime/tensor.h"
#include "tests/e2e/process.h"

using namespace kiln;
namespace fs = std::filesystem;

namespace {

constexpr const char* kWasmSimd = "llvm -mtriple=wasm32-unknown-unknown -mattr=+simd128";

using kiln::testing_support::kiln;
using kiln::testing_support::modelPath;
using kiln::testing_support::Outcome;
using kiln::testing_support::readBytes;
using kiln::testing_support::runCommand;
using kiln::testing_support::tempRoot;
using kiln::testing_support::writeBytes;

std::string runModelJs(const std::string& args) {
  return std::string(KILN_NODE) + " " + KILN_WEB_DIR + "/run_model.mjs " + args;
}

/// Node and the wasm toolchain (wasm-ld, wasi-libc) were found when the build was configured.
bool haveWasmTools() { return std::string(KILN_NODE) != "" && std::string(KILN_WASM_LD) != ""; }

constexpr const char* kNoWasmTools =
    "no node or wasm-ld-19/wasi-libc when the build was configured: run scripts/install-deps.sh and configure "
    "again";

#define REQUIRE_WASM_TOOLS() \
  if (!haveWasmTools()) GTEST_SKIP() << kNoWasmTools

/// The host build of `model` on `inputs` (in-process, JIT, default target).
std::vector<runtime::Tensor> hostOutputs(std::shared_ptr<const app::Model> model,
                                         const std::vector<runtime::Tensor>& inputs) {
  auto compiled = app::build(model, app::BuildOptions{});
  EXPECT_TRUE(compiled.ok()) << compiled.error().message;
  if (!compiled.ok()) return {};
  auto outputs = app::run(*compiled.value(), inputs);
  EXPECT_TRUE(outputs.ok()) << outputs.error().message;
  return outputs.ok() ? outputs.value() : std::vector<runtime::Tensor>{};
}

/// The largest |got - want| over every float output (infinite for a NaN, a wrong size or a
/// failure to run), reading the outputs `run_model.mjs` wrote as DIR/outK.raw.
double maxDiffOfRawOutputs(const std::string& dir, const std::vector<runtime::Tensor>& want) {
  double worst = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const std::string bytes = readBytes(dir + "/out" + std::to_string(i) + ".raw");
    EXPECT_EQ(bytes.size(), want[i].nbytes()) << "output " << i;
    EXPECT_EQ(want[i].dtype(), runtime::DType::Float32) << "output " << i;
    if (bytes.size() != want[i].nbytes() || want[i].dtype() != runtime::DType::Float32) return INFINITY;
    const float* got = reinterpret_cast<const float*>(bytes.data());
    for (int64_t k = 0; k < want[i].numel(); ++k) {
      double d = std::fabs(double(got[k]) - want[i].data<float>()[k]);
      if (!(d <= worst)) worst = std::isnan(d) ? INFINITY : d;  // a NaN counts as infinitely far
    }
  }
  return worst;
}

/// Runs the module in `dir` in Node on `inputs`; returns the largest |wasm - host| (see above).
double maxDiffInNode(const std::string& dir, const std::vector<runtime::Tensor>& inputs,
                     const std::vector<runtime::Tensor>& want) {
  std::string args = dir;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const std::string in = dir + "/in" + std::to_string(i) + ".raw";
    writeBytes(in, inputs[i].raw(), inputs[i].nbytes());
    args += " --input " + in;
  }
  for (size_t i = 0; i < want.size(); ++i) args += " --output " + dir + "/out" + std::to_string(i) + ".raw";
  Outcome o = runCommand(runModelJs(args));
  EXPECT_EQ(o.exitCode, 0) << runModelJs(args) << "\n" << o.err;
  if (o.exitCode != 0) return INFINITY;
  EXPECT_NE(o.out.find("output 0:"), std::string::npos) << o.out;
  return maxDiffOfRawOutputs(dir, want);
}

/// True when the file starts with the WebAssembly magic and version 1.
bool isWasmBinary(const fs::path& path) {
  const std::string bytes = readBytes(path);
  return bytes.size() >= 8 && bytes.compare(0, 8, std::string("\0asm\1\0\0\0", 8)) == 0;
}

std::string compileOp(const std::string& op, const std::string& tag) {
  const std::string dir = tempRoot() + "/" + tag;
  Outcome o = runCommand(kiln("compile " + modelPath("ops/" + op) + " -o " + dir + " --target '" + kWasmSimd + "'"));
  EXPECT_EQ(o.exitCode, 0) << o.err;
  return dir;
}

// ---- SIMD128-width schedules and wasm code ------------------------------------------------------

TEST(Wasm, SchedulesPickSimd128WidthVectors) {
  // 64 output channels: the packed layout's channel block is the target's f32 lanes (4 for
  // SIMD128's 128-bit vectors; an AVX2 host has 8, AVX-512 16).
  Outcome o = runCommand(kiln("ir " + modelPath("ops/conv_bn_relu") + " --stage optimized --target '" + kWasmSimd + "'"));
  ASSERT_EQ(o.exitCode, 0) << o.err;
  EXPECT_NE(o.out.find("NCHW4c"), std::string::npos) << o.out;
  EXPECT_EQ(o.out.find("NCHW8c"), std::string::npos) << o.out;
  EXPECT_EQ(o.out.find("NCHW16c"), std::string::npos) << o.out;
}

TEST(Wasm, AssemblyIsWasmSimdText) {
  Outcome o = runCommand(kiln("ir " + modelPath("ops/conv_bn_relu") + " --stage asm --target '" + kWasmSimd + "'"));
  ASSERT_EQ(o.exitCode, 0) << o.err;
  // WebAssembly text: 128-bit loads/stores and f32x4 multiply-adds (or multiplies and adds).
  EXPECT_TRUE(std::regex_search(o.out, std::regex(R"(v128\.(load|store))"))) << o.out.substr(0, 4000);
  EXPECT_TRUE(std::regex_search(o.out, std::regex(R"(f32x4\.(mul|add|relaxed_madd))"))) << o.out.substr(0, 4000);
  EXPECT_EQ(o.out.find("%ymm"), std::string::npos);
  EXPECT_EQ(o.out.find("%xmm"), std::string::npos);
}

TEST(Wasm, WorkbenchTargetBoxListsWasm32WithItsWasmText) {
  // The Workbench's target picker (app::targetChoices) offers wasm32 as export-only; inspecting a
  // model for it gives each kernel's code as WebAssembly text.
  std::vector<app::TargetChoice> choices = app::targetChoices();
  auto wasm = std::find_if(choices.begin(), choices.end(),
                           [](const app::TargetChoice& c) { return c.spec == kWasmSimd; });
  ASSERT_NE(wasm, choices.end());
  EXPECT_FALSE(wasm->runnable);
  EXPECT_NE(wasm->label.find("export only"), std::string::npos) << wasm->label;
  auto m = app::openModel(modelPath("ops/gelu"));
  ASSERT_TRUE(m.ok()) << m.error().message;
  app::BuildOptions options;
  options.target = wasm->spec;
  auto inspection = app::inspect(m.value(), options);
  ASSERT_TRUE(inspection.ok()) << inspection.error().message;
  ASSERT_FALSE(inspection.value().loopIrByKernel.empty());
  auto code = app::kernelCode(inspection.value(), inspection.value().loopIrByKernel.begin()->first);
  ASSERT_TRUE(code.ok()) << code.error().message;
  EXPECT_NE(code.value().assembly.find("f32x4."), std::string::npos) << code.value().assembly.substr(0, 2000);
  EXPECT_NE(code.value().llvmIr.find("wasm32"), std::string::npos);
}

// An export-only build as the Workbench shows it (app::checkCrossTarget): the module's size, and
// for wasm32 its outputs in Node against the host build (aarch64's under qemu: test_cross_aarch64).
TEST(Wasm, ExportOnlyBuildReportsItsSizeAndItsAgreementInNode) {
  REQUIRE_WASM_TOOLS();
  auto m = app::openModel(modelPath("ops/conv_bn_relu"));
  ASSERT_TRUE(m.ok()) << m.error().message;
  app::BuildOptions options;
  options.target = kWasmSimd;
  auto checked = app::checkCrossTarget(m.value(), options);
  ASSERT_TRUE(checked.ok()) << checked.error().message;
  const app::CrossCheck& c = checked.value();
  EXPECT_EQ(c.kernelsFile, "kernels.wasm");
  EXPECT_GT(c.kernelsBytes, 0);
  EXPECT_GT(c.moduleBytes, c.kernelsBytes);  // graph.txt and params.bin besides
  EXPECT_EQ(c.runner, "node") << c.note;
  EXPECT_GT(c.outputScale, 0);
  EXPECT_LE(c.maxAbsDiff, 1e-4 * std::max(1.0, c.outputScale));
}

// `kiln compile --check`: the same agreement on the command line, for the module -o wrote.
TEST(Wasm, CompileCheckRunsTheModuleInNode) {
  REQUIRE_WASM_TOOLS();
  const std::string dir = tempRoot() + "/checked";
  Outcome o = runCommand(kiln("compile " + modelPath("ops/conv_bn_relu") + " -o " + dir + " --target '" + kWasmSimd +
                              "' --check"));
  ASSERT_EQ(o.exitCode, 0) << o.out << o.err;
  EXPECT_NE(o.out.find("kernels.wasm"), std::string::npos) << o.out;  // its size, in the file list
  std::smatch line;
  ASSERT_TRUE(std::regex_search(o.out, line,
                                std::regex(R"(check: ran it in node on random inputs: max \|diff\| vs this )"
                                           R"(machine's build (\S+) \(output scale (\S+), bound \S+\): agrees)")))
      << o.out;
  EXPECT_LE(std::stod(line[1].str()), 1e-4 * std::stod(line[2].str()));
  EXPECT_TRUE(isWasmBinary(fs::path(dir) / "kernels.wasm"));
  // Without Node it cannot check: one line saying what to install, exit 6 (I/O).
  o = runCommand("env PATH=/nonexistent KILN_WASM_LD=" + std::string(KILN_WASM_LD) + " " + kiln("compile " + modelPath("ops/conv_bn_relu") + " -o " + dir +
                                                 " --target '" + kWasmSimd + "' --check"));
  EXPECT_EQ(o.exitCode, static_cast<int>(ErrorKind::Io)) << o.err;
  EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << o.err;
  EXPECT_NE(o.err.find("--check cannot run it here: no node on PATH"), std::string::npos) << o.err;
}

// ---- the module directory and clean errors -------------------------------------------------------

TEST(Wasm, ModuleHoldsKernelsWasmAndIsRefusedByTheNativeRuntime) {
  REQUIRE_WASM_TOOLS();
  const std::string dir = compileOp("relu", "relu_module");
  EXPECT_TRUE(isWasmBinary(fs::path(dir) / "kernels.wasm"));
  EXPECT_FALSE(fs::exists(fs::path(dir) / "kernels.so"));
  EXPECT_FALSE(fs::exists(fs::path(dir) / "kernels.o"));
  EXPECT_NE(readBytes(fs::path(dir) / "graph.txt").find("library kernels.wasm\n"), std::string::npos);
  // `kiln run DIR` (the native runtime) refuses it in one line, exit 9.
  auto m = app::openModel(modelPath("ops/relu"));
  ASSERT_TRUE(m.ok()) << m.error().message;
  const std::string in = tempRoot() + "/relu_in.npy";
  runtime::writeNpy(in, app::randomInputs(*m.value(), 3)[0]);
  Outcome o = runCommand(kiln("run " + dir + " --input " + in + " --output " + tempRoot() + "/relu_out.npy"));
  EXPECT_EQ(o.exitCode, static_cast<int>(ErrorKind::IncompatibleModule)) << o.err;
  EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << o.err;
  EXPECT_NE(o.err.find("wasm32"), std::string::npos) << o.err;
  // Node runs it (the pattern input) and prints its output's shape.
  o = runCommand(runModelJs(dir));
  EXPECT_EQ(o.exitCode, 0) << o.err;
  EXPECT_TRUE(std::regex_search(o.out, std::regex(R"(output 0: \S+ f32 \[1,8,16,16\])"))) << o.out;
}

TEST(Wasm, MissingWasmLinkerOrWasiLibcIsOneLineError) {
  const std::string dir = tempRoot() + "/no_wasm_ld";
  Outcome o = runCommand("env KILN_WASM_LD=/nonexistent/wasm-ld PATH=/nonexistent " +
                         kiln("compile " + modelPath("ops/relu") + " -o " + dir + " --target '" + kWasmSimd + "'"));
  EXPECT_EQ(o.exitCode, static_cast<int>(ErrorKind::Io)) << o.err;
  EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << o.err;
  EXPECT_EQ(o.err.rfind("error: ", 0), 0u) << o.err;
  EXPECT_NE(o.err.find("no wasm-ld"), std::string::npos) << o.err;
  EXPECT_NE(o.err.find("lld-19"), std::string::npos) << o.err;
  EXPECT_FALSE(fs::exists(fs::path(dir) / "graph.txt"));
  EXPECT_FALSE(fs::exists(fs::path(dir) / "kernels.wasm"));
  // wasi-libc (libm, memcpy, aligned_alloc) missing: the same, naming its package.
  o = runCommand("env KILN_WASI_LIBC=/nonexistent/libc.a " +
                 kiln("compile " + modelPath("ops/relu") + " -o " + dir + " --target '" + kWasmSimd + "'"));
  EXPECT_EQ(o.exitCode, static_cast<int>(ErrorKind::Io)) << o.err;
  EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << o.err;
  EXPECT_NE(o.err.find("KILN_WASI_LIBC=/nonexistent/libc.a is not a file (install wasi-libc"), std::string::npos)
      << o.err;
  EXPECT_FALSE(fs::exists(fs::path(dir) / "graph.txt"));
}

TEST(Wasm, AnOutputPathNamedLikeTheLibraryIsRefused) {
  // `-o model.wasm`: a module is a directory; nothing is written.
  const std::string out = tempRoot() + "/model.wasm";
  Outcome o = runCommand(kiln("compile " + modelPath("ops/relu") + " -o " + out + " --target '" + kWasmSimd + "'"));
  EXPECT_EQ(o.exitCode, static_cast<int>(ErrorKind::Usage)) << o.err;
  EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << o.err;
  EXPECT_NE(o.err.find("a module is a directory"), std::string::npos) << o.err;
  EXPECT_FALSE(fs::exists(out));
}

TEST(Wasm, JavaScriptRuntimeRefusesBrokenModulesInOneLine) {
  REQUIRE_WASM_TOOLS();
  const std::string a = compileOp("relu", "relu_a");
  const std::string b = compileOp("conv_bn_relu", "conv_bn_relu_b");
  // kernels.wasm of another export: the signatures differ.
  fs::copy_file(fs::path(b) / "kernels.wasm", fs::path(a) / "kernels.wasm", fs::copy_options::overwrite_existing);
  Outcome o = runCommand(runModelJs(a));
  EXPECT_EQ(o.exitCode, static_cast<int>(ErrorKind::InvalidModel)) << o.err;
  EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << o.err;
  EXPECT_NE(o.err.find("belongs to another export"), std::string::npos) << o.err;
  // A flipped byte in params.bin: the checksum.
  std::string params = readBytes(fs::path(b) / "params.bin");
  ASSERT_GT(params.size(), 16u);
  params.back() ^= 1;
  writeBytes(fs::path(b) / "params.bin", params.data(), params.size());
  o = runCommand(runModelJs(b));
  EXPECT_EQ(o.exitCode, static_cast<int>(ErrorKind::InvalidModel)) << o.err;
  EXPECT_NE(o.err.find("checksum mismatch"), std::string::npos) << o.err;
  // An input file of the wrong size.
  const std::string c = compileOp("relu", "relu_c");
  writeBytes(fs::path(c) / "short.raw", "abcd", 4);
  o = runCommand(runModelJs(c + " --input " + c + "/short.raw"));
  EXPECT_EQ(o.exitCode, static_cast<int>(ErrorKind::InvalidInput)) << o.err;
  EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << o.err;
  EXPECT_NE(o.err.find("expected 8192"), std::string::npos) << o.err;
}

// ---- kiln compare's WebAssembly rows ---------------------------------------------------------------

/// Where scripts/install-deps.sh puts npm's onnxruntime-web (the path facade_web.cpp looks at).
bool haveOnnxruntimeWeb() {
  const char* npm = std::getenv("KILN_NPM_DIR");
  const char* home = std::getenv("HOME");
  const fs::path dir = npm && *npm ? fs::path(npm) : fs::path(home ? home : "/tmp") / ".cache/kiln/npm";
  return fs::exists(dir / "node_modules/onnxruntime-web/package.json");
}

app::CompareOptions quickCompare(std::vector<std::string> backends) {
  app::CompareOptions o;
  o.backends = std::move(backends);
  o.build.threads = 1;
  o.warmup = 1;
  o.repeat = 3;
  o.minRepeatMs = 1;
  o.processes = 1;
  o.store.enabled = false;
  return o;
}

const app::BackendResult* rowOf(const app::CompareResult& r, const std::string& name) {
  for (const auto& b : r.backends)
    if (b.backend == name) return &b;
  return nullptr;
}

TEST(WasmCompare, NodeRowsAgreeWithEagerAndAreTimedInTheirOwnProcesses) {
  REQUIRE_WASM_TOOLS();
  if (!haveOnnxruntimeWeb()) GTEST_SKIP() << "npm onnxruntime-web is not installed: run scripts/install-deps.sh";
  auto result = app::compare(modelPath("ops/conv_bn_relu"),
                             quickCompare({"pytorch-eager", "kiln-wasm", "onnxruntime-web"}));
  ASSERT_TRUE(result) << result.error().message;
  const app::CompareResult& r = result.value();
  const app::BackendResult* eager = rowOf(r, "pytorch-eager");
  ASSERT_NE(eager, nullptr);
  ASSERT_TRUE(eager->available) << eager->reason;
  for (const char* name : {"kiln-wasm", "onnxruntime-web"}) {
    SCOPED_TRACE(name);
    const app::BackendResult* row = rowOf(r, name);
    ASSERT_NE(row, nullptr);
    ASSERT_TRUE(row->available) << row->reason;
    EXPECT_LE(row->maxAbsDiff, 1e-4);
    EXPECT_GE(row->maxAbsDiff, 0);
    EXPECT_EQ(row->timing.samplesMs.size(), 3u);
    for (double ms : row->timing.samplesMs) EXPECT_GT(ms, 0);
    // Its own Node process, not the coordinator nor the Python worker.
    ASSERT_EQ(row->pids.size(), 1u);
    EXPECT_NE(row->pids[0], ::getpid());
    EXPECT_NE(row->pids[0], eager->pids.empty() ? -1 : eager->pids[0]);
    EXPECT_EQ(app::backendDisplayName(name, row->facts), std::string(name) + " (node)");
    EXPECT_NE(row->facts.find("\"node_version\""), std::string::npos) << row->facts;
  }
  EXPECT_NE(rowOf(r, "onnxruntime-web")->facts.find("\"onnxruntime_web_version\""), std::string::npos);
  EXPECT_NE(rowOf(r, "kiln-wasm")->facts.find("wasm32"), std::string::npos) << rowOf(r, "kiln-wasm")->facts;
}

TEST(WasmCompare, WithoutNodeTheRowsAreUnavailableAndSayWhy) {
  // PATH without node: the rows are not started and name what is missing; nothing is measured.
  const std::string saved = std::getenv("PATH") ? std::getenv("PATH") : "";
  ::setenv("PATH", "/nonexistent", 1);
  auto result = app::compare(modelPath("ops/relu"), quickCompare({"kiln-wasm", "onnxruntime-web"}));
  ::setenv("PATH", saved.c_str(), 1);
  ASSERT_TRUE(result) << result.error().message;
  for (const char* name : {"kiln-wasm", "onnxruntime-web"}) {
    const app::BackendResult* row = rowOf(result.value(), name);
    ASSERT_NE(row, nullptr) << name;
    EXPECT_FALSE(row->available) << name;
    EXPECT_NE(row->reason.find("no node on PATH"), std::string::npos) << row->reason;
    EXPECT_TRUE(row->timing.samplesMs.empty());
  }
}

// ---- headless Chromium ----------------------------------------------------------------------------

/// Chromium was found when the build was configured (Debian's chromium, scripts/install-deps.sh).
bool haveChromium() { return std::string(KILN_CHROMIUM) != ""; }

std::string runBrowserJs(const std::string& args) {
  return std::string(KILN_NODE) + " " + KILN_WEB_DIR + "/run_browser.mjs --chromium " + KILN_CHROMIUM + " " + args;
}

TEST(WasmBrowser, MissingChromiumIsOneLineError) {
  REQUIRE_WASM_TOOLS();
  const std::string dir = compileOp("relu", "relu_no_browser");
  Outcome o = runCommand("env -u KILN_CHROMIUM PATH=/nonexistent " + std::string(KILN_NODE) + " " + KILN_WEB_DIR +
                         "/run_browser.mjs " + dir);
  EXPECT_EQ(o.exitCode, static_cast<int>(ErrorKind::Io)) << o.err;
  EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << o.err;
  EXPECT_NE(o.err.find("error: no chromium on PATH"), std::string::npos) << o.err;
}

TEST(WasmBrowser, MobileNetV2InHeadlessChromiumAgreesWithTheHostBuild) {
  REQUIRE_WASM_TOOLS();
  if (!haveChromium()) GTEST_SKIP() << "no chromium when the build was configured: run scripts/install-deps.sh";
  auto m = app::openModel(modelPath("mobilenet_v2"));
  ASSERT_TRUE(m.ok()) << m.error().message;
  const std::vector<runtime::Tensor> inputs = app::randomInputs(*m.value(), 5);
  const std::vector<runtime::Tensor> want = hostOutputs(m.value(), inputs);
  ASSERT_FALSE(want.empty());
  double scale = 0;
  for (const runtime::Tensor& t : want)
    for (int64_t k = 0; k < t.numel(); ++k) scale = std::max(scale, double(std::fabs(t.data<float>()[k])));
  const std::string dir = tempRoot() + "/mobilenet_v2_browser";
  app::BuildOptions options;
  options.target = kWasmSimd;
  auto exported = app::exportModel(m.value(), options, dir);
  ASSERT_TRUE(exported.ok()) << exported.error().message;
  std::string args = dir;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const std::string in = dir + "/in" + std::to_string(i) + ".raw";
    writeBytes(in, inputs[i].raw(), inputs[i].nbytes());
    args += " --input " + in;
  }
  for (size_t i = 0; i < want.size(); ++i) args += " --output " + dir + "/out" + std::to_string(i) + ".raw";
  Outcome o = runCommand(runBrowserJs(args));
  ASSERT_EQ(o.exitCode, 0) << o.err;
  EXPECT_NE(o.out.find("HeadlessChrome"), std::string::npos) << o.out;
  EXPECT_TRUE(std::regex_search(o.out, std::regex(R"(output 0: \S+ f32 \[1,1000\])"))) << o.out;
  const double worst = maxDiffOfRawOutputs(dir, want);
  std::printf("agreement | %-18s | %-55s | max |chromium - host| %.3g | max |host| %.3g\n", "mobilenet_v2",
              "wasm32 in headless Chromium", worst, scale);
  EXPECT_LE(worst, 1e-4 * std::max(1.0, scale));
}

// ---- op modules in Node ---------------------------------------------------------------------------

/// The parameter itself as the test's name ("conv_bn_relu", "resnet18").
std::string paramName(const ::testing::TestParamInfo<std::string>& info) { return info.param; }

class WasmOps : public ::testing::TestWithParam<std::string> {};

TEST_P(WasmOps, RunsInNodeLikeTheHostBuild) {
  REQUIRE_WASM_TOOLS();
  const std::string op = GetParam();
  const std::string dir = compileOp(op, op);
  ASSERT_TRUE(isWasmBinary(fs::path(dir) / "kernels.wasm"));
  auto m = app::openModel(modelPath("ops/" + op));
  ASSERT_TRUE(m.ok()) << m.error().message;
  const std::vector<runtime::Tensor> inputs = app::randomInputs(*m.value(), 29);
  const std::vector<runtime::Tensor> want = hostOutputs(m.value(), inputs);
  ASSERT_FALSE(want.empty());
  const double worst = maxDiffInNode(dir, inputs, want);
  std::printf("%s: max |wasm - host| %.3g\n", op.c_str(), worst);
  EXPECT_LE(worst, 1e-4) << op;
}

// Each schedule family at SIMD128 width: packed direct, depthwise and strided convolutions,
// dense/matmul, softmax and layer norm (reductions), pooling, elementwise with exp/tanh (the
// vector math), attention.
INSTANTIATE_TEST_SUITE_P(Ops, WasmOps,
                         ::testing::Values("conv_bn_relu", "conv2d_depthwise_stride2", "conv2d_5x5_stride2_nonsquare",
                                           "conv2d_groups2", "linear_bias", "addmm", "bmm", "softmax_last",
                                           "log_softmax", "layer_norm", "max_pool2d", "avg_pool2d_pad_count",
                                           "adaptive_avg_pool2d_2x3", "tanh", "sigmoid", "gelu", "gelu_tanh",
                                           "sum_exp_broadcast", "math_unary", "hardswish", "attention_causal",
                                           "cat_three", "classifier_head"),
                         paramName);

// ---- the sample CNNs ------------------------------------------------------------------------------

/// One network: the host build, then its wasm32 module run in Node on the same input. Prints one
/// row of the agreement table (`ctest -R wasm_ -V`).
class WasmNetworks : public ::testing::TestWithParam<std::string> {};

TEST_P(WasmNetworks, AgreesWithTheHostBuild) {
  REQUIRE_WASM_TOOLS();
  const std::string name = GetParam();
  auto m = app::openModel(modelPath(name));
  ASSERT_TRUE(m.ok()) << m.error().message;
  const std::vector<runtime::Tensor> inputs = app::randomInputs(*m.value(), 5);
  const std::vector<runtime::Tensor> want = hostOutputs(m.value(), inputs);
  ASSERT_FALSE(want.empty());
  double scale = 0;
  for (const runtime::Tensor& t : want)
    for (int64_t k = 0; k < t.numel(); ++k) scale = std::max(scale, double(std::fabs(t.data<float>()[k])));
  const std::string dir = tempRoot() + "/" + name;
  app::BuildOptions options;
  options.target = kWasmSimd;
  auto exported = app::exportModel(m.value(), options, dir);
  ASSERT_TRUE(exported.ok()) << exported.error().message;
  ASSERT_TRUE(exported.value().linked) << exported.value().note;
  ASSERT_TRUE(isWasmBinary(fs::path(dir) / "kernels.wasm"));
  const double worst = maxDiffInNode(dir, inputs, want);
  std::printf("agreement %s max|diff| = %.3g (output scale %.3g)\n", name.c_str(), worst, scale);
  // The bound is 1e-4 of the logits' scale (O(1) for the sample models): 4-lane blocks sum each
  // output's products in another order than the host's 8- or 16-lane ones.
  EXPECT_LE(worst, 1e-4 * std::max(1.0, scale)) << name;
  std::error_code ec;
  fs::remove_all(dir, ec);  // ResNet-50's module alone is ~100 MB
}

INSTANTIATE_TEST_SUITE_P(Networks, WasmNetworks,
                         ::testing::Values("mobilenet_v2", "efficientnet_b0", "resnet18", "resnet50",
                                           "mobilenet_v3_small"),
                         paramName);

}  // namespace

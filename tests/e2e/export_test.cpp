// Exported modules end to end: `exportModel` / `kiln compile` writes a module directory; the
// runtime alone (runtime::Module, the C API, the C example program linked only against
// libkiln_runtime_shared.so) loads and runs it; outputs must be bit-identical to the in-process
// JIT build on the same input. Broken modules (another format version, missing or mixed files,
// another CPU or architecture) must fail with one clear error.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "app/facade.h"
#include "runtime/c_api.h"
#include "runtime/module.h"
#include "runtime/npy.h"
#include "tests/e2e/process.h"

using namespace kiln;
namespace fs = std::filesystem;

namespace {

using kiln::testing_support::modelPath;
using kiln::testing_support::Outcome;
using kiln::testing_support::runCommand;
using kiln::testing_support::tempRoot;

std::shared_ptr<const app::Model> open(const std::string& file) {
  auto model = app::openModel(file);
  EXPECT_TRUE(model.ok()) << model.error().message;
  return model.ok() ? model.value() : nullptr;
}

/// In-process build (JIT) outputs.
std::vector<runtime::Tensor> inProcess(std::shared_ptr<const app::Model> model, const app::BuildOptions& options,
                                       const std::vector<runtime::Tensor>& inputs) {
  auto compiled = app::build(model, options);
  EXPECT_TRUE(compiled.ok()) << compiled.error().message;
  if (!compiled.ok()) return {};
  auto outputs = app::run(*compiled.value(), inputs);
  EXPECT_TRUE(outputs.ok()) << outputs.error().message;
  return outputs.ok() ? outputs.value() : std::vector<runtime::Tensor>{};
}

app::ExportResult exportTo(std::shared_ptr<const app::Model> model, const std::string& dir,
                           const app::BuildOptions& options = {}) {
  auto result = app::exportModel(model, options, dir);
  EXPECT_TRUE(result.ok()) << result.error().message;
  return result.ok() ? result.value() : app::ExportResult{};
}

/// "" when identical, else what differs.
std::string difference(const std::vector<runtime::Tensor>& got, const std::vector<runtime::Tensor>& want) {
  if (got.size() != want.size()) return "output count " + std::to_string(got.size()) + " vs " + std::to_string(want.size());
  for (size_t o = 0; o < got.size(); ++o) {
    const runtime::Tensor& g = got[o];
    const runtime::Tensor& w = want[o];
    if (g.dtype() != w.dtype() || g.shape() != w.shape())
      return "output " + std::to_string(o) + " is " + runtime::shapeString(g.shape()) + ", expected " +
             runtime::shapeString(w.shape());
    if (std::memcmp(g.raw(), w.raw(), g.nbytes()) == 0) continue;
    double worst = 0;
    if (g.dtype() == runtime::DType::Float32) {
      for (int64_t i = 0; i < g.numel(); ++i)
        worst = std::max(worst, std::fabs(double(g.data<float>()[i]) - w.data<float>()[i]));
    }
    return "output " + std::to_string(o) + " differs, max |diff| " + std::to_string(worst);
  }
  return "";
}

std::string readText(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void writeText(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

/// A fresh copy of a module directory to break.
std::string copyModule(const std::string& from, const std::string& name) {
  const std::string to = tempRoot() + "/" + name;
  fs::remove_all(to);
  fs::copy(from, to, fs::copy_options::recursive);
  return to;
}

/// The exported conv_bn_relu module, shared by the error tests (exported once).
const std::string& sharedModule() {
  static const std::string dir = [] {
    std::string d = tempRoot() + "/conv_bn_relu";
    exportTo(open(modelPath("ops/conv_bn_relu.pt")), d);
    return d;
  }();
  return dir;
}

std::string loadError(const std::string& dir) {
  try {
    runtime::Module::load(dir);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// ---- outputs equal the in-process build ------------------------------------------------------

class ExportOps : public ::testing::TestWithParam<std::string> {};

TEST_P(ExportOps, RuntimeModuleMatchesInProcessBuild) {
  auto model = open(modelPath("ops/" + GetParam() + ".pt"));
  ASSERT_TRUE(model);
  const std::vector<runtime::Tensor> inputs = app::randomInputs(*model, 7);
  const std::vector<runtime::Tensor> want = inProcess(model, {}, inputs);
  ASSERT_FALSE(want.empty());

  const std::string dir = tempRoot() + "/op_" + GetParam();
  app::ExportResult exported = exportTo(model, dir);
  ASSERT_TRUE(exported.linked) << exported.note;
  EXPECT_TRUE(fs::exists(fs::path(dir) / "kernels.so"));
  EXPECT_FALSE(fs::exists(fs::path(dir) / "kernels.o"));

  std::unique_ptr<runtime::Module> module = runtime::Module::load(dir);
  // Version 2 only for control flow (its sub-plans as region blocks); version 1 otherwise.
  const bool control = GetParam().find("_on_value") != std::string::npos;
  EXPECT_EQ(runtime::readModule(dir).plan.regions.empty(), !control);
  EXPECT_EQ(module->info().formatVersion, control ? 2 : 1);
  EXPECT_EQ(module->info().kilnVersion, app::version());
  EXPECT_EQ(difference(module->run(inputs), want), "");
  // A second run on the same module gives the same again (storage reuse is per run).
  EXPECT_EQ(difference(module->run(inputs), want), "");
}

INSTANTIATE_TEST_SUITE_P(Ops, ExportOps,
                         ::testing::Values("conv_bn_relu", "residual_block", "se_block", "add_broadcast",
                                           "classifier_head", "cat_three", "softmax_last", "gelu",
                                           "max_pool2d_ceil", "matmul_3d", "mean_keepdim",
                                           "adaptive_avg_pool2d_2x3", "branch_on_value", "loop_on_value"));

class ExportNetworks : public ::testing::TestWithParam<int> {};

TEST_P(ExportNetworks, Resnet18MatchesInProcessBuild) {
  auto model = open(modelPath("resnet18"));
  ASSERT_TRUE(model);
  app::BuildOptions options;
  options.optLevel = GetParam();
  const std::vector<runtime::Tensor> inputs = app::randomInputs(*model, 3);
  const std::vector<runtime::Tensor> want = inProcess(model, options, inputs);
  ASSERT_FALSE(want.empty());
  const std::string dir = tempRoot() + "/resnet18_O" + std::to_string(GetParam());
  app::ExportResult exported = exportTo(model, dir, options);
  ASSERT_TRUE(exported.linked);
  std::printf("resnet18 -O%d export: %.2f s, %d kernels, %d calls;", GetParam(), exported.compileSeconds,
              exported.numKernels, exported.numCalls);
  for (const auto& f : exported.files) std::printf(" %s %llu B", f.name.c_str(), (unsigned long long)f.bytes);
  std::printf("\n");
  std::unique_ptr<runtime::Module> module = runtime::Module::load(dir);
  EXPECT_EQ(difference(module->run(inputs), want), "");
  module.reset();
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(OptLevels, ExportNetworks, ::testing::Values(3, 1));

// ---- the C API and the C example program ------------------------------------------------------

TEST(ExportCApi, LoadSetRunGetMatchesInProcessBuild) {
  auto model = open(modelPath("ops/add_broadcast.pt"));
  ASSERT_TRUE(model);
  const std::vector<runtime::Tensor> inputs = app::randomInputs(*model, 11);
  const std::vector<runtime::Tensor> want = inProcess(model, {}, inputs);
  const std::string dir = tempRoot() + "/capi_add_broadcast";
  exportTo(model, dir);

  KilnModule* m = nullptr;
  char err[256];
  ASSERT_EQ(kiln_module_load(dir.c_str(), &m, err, sizeof err), KILN_OK) << err;
  int32_t numInputs = 0, numOutputs = 0;
  ASSERT_EQ(kiln_module_num_inputs(m, &numInputs), KILN_OK);
  ASSERT_EQ(kiln_module_num_outputs(m, &numOutputs), KILN_OK);
  ASSERT_EQ(numInputs, 2);
  ASSERT_EQ(numOutputs, static_cast<int32_t>(want.size()));
  for (int32_t i = 0; i < numInputs; ++i) {
    KilnTensorInfo info;
    ASSERT_EQ(kiln_module_input_info(m, i, &info), KILN_OK);
    EXPECT_EQ(info.dtype, KILN_FLOAT32);
    EXPECT_EQ(runtime::Shape(info.shape, info.shape + info.ndim), inputs[i].shape());
    EXPECT_EQ(info.nbytes, inputs[i].nbytes());
    // Wrong sizes and indices are errors with a message, not crashes.
    EXPECT_EQ(kiln_module_set_input(m, i, inputs[i].raw(), info.nbytes - 1), KILN_ERROR_INVALID_INPUT);
    EXPECT_NE(std::string(kiln_last_error()).find("bytes"), std::string::npos) << kiln_last_error();
    ASSERT_EQ(kiln_module_set_input(m, i, inputs[i].raw(), info.nbytes), KILN_OK) << kiln_last_error();
  }
  KilnTensorInfo info;
  EXPECT_EQ(kiln_module_input_info(m, 5, &info), KILN_ERROR_USAGE);
  EXPECT_EQ(kiln_module_num_inputs(nullptr, &numInputs), KILN_ERROR_USAGE);
  ASSERT_EQ(kiln_set_num_threads(2), KILN_OK);
  ASSERT_EQ(kiln_module_run(m), KILN_OK) << kiln_last_error();
  std::vector<runtime::Tensor> got;
  for (int32_t i = 0; i < numOutputs; ++i) {
    ASSERT_EQ(kiln_module_output_info(m, i, &info), KILN_OK);
    runtime::Tensor t = runtime::Tensor::zeros(static_cast<runtime::DType>(info.dtype),
                                               runtime::Shape(info.shape, info.shape + info.ndim));
    ASSERT_EQ(kiln_module_get_output(m, i, t.raw(), t.nbytes()), KILN_OK) << kiln_last_error();
    got.push_back(t);
  }
  EXPECT_EQ(difference(got, want), "");
  EXPECT_EQ(kiln_module_free(m), KILN_OK);
  EXPECT_EQ(kiln_module_free(nullptr), KILN_OK);
}

TEST(ExportCApi, LoadErrorsFillTheBuffer) {
  KilnModule* m = reinterpret_cast<KilnModule*>(0x1);
  char err[64];
  EXPECT_EQ(kiln_module_load("/nonexistent/kiln_module", &m, err, sizeof err), KILN_ERROR_IO);
  EXPECT_EQ(m, nullptr);
  EXPECT_NE(std::string(err).find("no such module directory"), std::string::npos) << err;
  EXPECT_LT(std::strlen(err), sizeof err);
  EXPECT_EQ(kiln_module_load(nullptr, &m, nullptr, 0), KILN_ERROR_USAGE);
}

class ExportCExample : public ::testing::TestWithParam<std::string> {};

// The C example (examples/run_model.c: the C API alone) on a plain model and on one whose module
// holds a loop (sub-plans run by the runtime).
TEST_P(ExportCExample, ProgramMatchesInProcessBuild) {
  auto model = open(modelPath("ops/" + GetParam() + ".pt"));
  ASSERT_TRUE(model);
  const std::vector<runtime::Tensor> inputs = app::randomInputs(*model, 5);
  const std::vector<runtime::Tensor> want = inProcess(model, {}, inputs);
  const std::string dir = tempRoot() + "/c_example_" + GetParam();
  exportTo(model, dir);
  const std::string in = tempRoot() + "/c_example_in.raw", out = tempRoot() + "/c_example_out.raw";
  writeText(in, std::string(static_cast<const char*>(inputs[0].raw()), inputs[0].nbytes()));

  Outcome o = runCommand(std::string(KILN_RUN_MODEL) + " " + dir + " --threads 2 --input " + in + " --output " + out);
  ASSERT_EQ(o.exitCode, 0) << o.err;
  EXPECT_NE(o.out.find("output 0:"), std::string::npos) << o.out;
  runtime::Tensor got = runtime::Tensor::zeros(want[0].dtype(), want[0].shape());
  const std::string bytes = readText(out);
  ASSERT_EQ(bytes.size(), got.nbytes());
  std::memcpy(got.raw(), bytes.data(), bytes.size());
  EXPECT_EQ(difference({got}, want), "");
}

INSTANTIATE_TEST_SUITE_P(Models, ExportCExample, ::testing::Values("conv_bn_relu", "loop_on_value"));

TEST(ExportCApi, CExampleProgramReportsABrokenModuleInOneLine) {
  const std::string broken = copyModule(sharedModule(), "c_example_broken");
  fs::remove(fs::path(broken) / "kernels.so");
  Outcome o = runCommand(std::string(KILN_RUN_MODEL) + " " + broken);
  EXPECT_EQ(o.exitCode, KILN_ERROR_INVALID_MODEL);
  EXPECT_NE(o.err.find("kernels.so"), std::string::npos) << o.err;
}

TEST(ExportCApi, CExampleLinksOnlyTheRuntime) {
  Outcome o = runCommand("readelf -d " + std::string(KILN_RUN_MODEL));
  if (o.exitCode != 0) GTEST_SKIP() << "readelf is not available";
  EXPECT_NE(o.out.find("libkiln_runtime_shared.so"), std::string::npos) << o.out;
  for (const char* heavy : {"LLVM", "torch", "c10"}) EXPECT_EQ(o.out.find(heavy), std::string::npos) << o.out;
  // The kernels need at most libc, libm and the runtime's launcher: nothing of the compiler.
  o = runCommand("readelf -d --dyn-syms " + sharedModule() + "/kernels.so");
  ASSERT_EQ(o.exitCode, 0);
  EXPECT_NE(o.out.find("kiln_parallel_launch"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("kiln_module_signature"), std::string::npos) << o.out;
  for (const char* heavy : {"LLVM", "torch", "stdc++"}) EXPECT_EQ(o.out.find(heavy), std::string::npos) << o.out;
}

// ---- broken modules ---------------------------------------------------------------------------

TEST(ExportErrors, OtherFormatVersionIsRefused) {
  const std::string dir = copyModule(sharedModule(), "version");
  std::string graph = readText(fs::path(dir) / "graph.txt");
  graph.replace(0, graph.find('\n'), "kiln-module 99");
  writeText(fs::path(dir) / "graph.txt", graph);
  const std::string err = loadError(dir);
  EXPECT_NE(err.find("module format version 99"), std::string::npos) << err;
  EXPECT_NE(err.find("reads versions 1 to 2"), std::string::npos) << err;
  EXPECT_NE(err.find("written by Kiln " + app::version()), std::string::npos) << err;

  KilnModule* m = nullptr;
  char buf[512];
  EXPECT_EQ(kiln_module_load(dir.c_str(), &m, buf, sizeof buf), KILN_ERROR_INCOMPATIBLE_MODULE);
  EXPECT_NE(std::string(buf).find("format version 99"), std::string::npos) << buf;
}

TEST(ExportErrors, MissingLibraryIsNamed) {
  const std::string dir = copyModule(sharedModule(), "no_library");
  fs::remove(fs::path(dir) / "kernels.so");
  const std::string err = loadError(dir);
  EXPECT_NE(err.find("kernels.so: no such file"), std::string::npos) << err;
}

TEST(ExportErrors, LibraryOfAnotherExportIsRefused) {
  auto model = open(modelPath("ops/conv_bn_relu.pt"));
  const std::string other = tempRoot() + "/other_export";
  exportTo(model, other);
  const std::string dir = copyModule(sharedModule(), "mixed");
  fs::copy_file(fs::path(other) / "kernels.so", fs::path(dir) / "kernels.so", fs::copy_options::overwrite_existing);
  const std::string err = loadError(dir);
  EXPECT_NE(err.find("signature mismatch"), std::string::npos) << err;
}

// A module directory exported again while its first library is still loaded in this process
// (kiln.compile's cache entry compiled again, `kiln compile -o DIR` twice in a host program): the
// second load runs the new kernels, and the first module keeps running its own.
TEST(ExportOps, ExportedAgainIntoALoadedDirectoryRunsTheNewKernels) {
  auto first = open(modelPath("ops/gelu.pt"));
  auto second = open(modelPath("ops/softmax_last.pt"));
  ASSERT_TRUE(first && second);
  const std::vector<runtime::Tensor> firstInputs = app::randomInputs(*first, 5);
  const std::vector<runtime::Tensor> secondInputs = app::randomInputs(*second, 6);
  const std::string dir = tempRoot() + "/exported_again";
  exportTo(first, dir);
  std::unique_ptr<runtime::Module> a = runtime::Module::load(dir);
  EXPECT_EQ(difference(a->run(firstInputs), inProcess(first, {}, firstInputs)), "");
  for (bool removedFirst : {false, true}) {
    SCOPED_TRACE(removedFirst ? "directory removed before" : "files overwritten");
    if (removedFirst) fs::remove_all(dir);
    exportTo(second, dir);
    std::unique_ptr<runtime::Module> b = runtime::Module::load(dir);
    EXPECT_EQ(difference(b->run(secondInputs), inProcess(second, {}, secondInputs)), "");
  }
  EXPECT_EQ(difference(a->run(firstInputs), inProcess(first, {}, firstInputs)), "");
}

TEST(ExportErrors, CorruptOrTruncatedParamsAreRefused) {
  std::string dir = copyModule(sharedModule(), "corrupt_params");
  std::string params = readText(fs::path(dir) / "params.bin");
  ASSERT_GT(params.size(), 100u);
  params[params.size() - 3] ^= 0x5a;
  writeText(fs::path(dir) / "params.bin", params);
  std::string err = loadError(dir);
  EXPECT_NE(err.find("checksum mismatch"), std::string::npos) << err;

  dir = copyModule(sharedModule(), "truncated_params");
  writeText(fs::path(dir) / "params.bin", params.substr(0, params.size() / 2));
  err = loadError(dir);
  EXPECT_NE(err.find("truncated"), std::string::npos) << err;
}

TEST(ExportErrors, MalformedGraphNamesTheLine) {
  const std::string dir = copyModule(sharedModule(), "malformed");
  std::string graph = readText(fs::path(dir) / "graph.txt");
  size_t call = graph.find("\ncall ");
  ASSERT_NE(call, std::string::npos);
  graph.insert(call + 1, "call k 1 9999 node\n");
  writeText(fs::path(dir) / "graph.txt", graph);
  std::string err = loadError(dir);
  EXPECT_NE(err.find("graph.txt:"), std::string::npos) << err;
  EXPECT_NE(err.find("not a slot"), std::string::npos) << err;

  writeText(fs::path(dir) / "graph.txt", graph.substr(0, graph.size() / 2));
  err = loadError(dir);
  EXPECT_FALSE(err.empty());
}

TEST(ExportErrors, MissingCpuFeaturesAreReportedNotExecuted) {
  // A feature this machine lacks, among extensions the runtime can check.
  std::string lacking;
  for (const char* f : {"avx512fp16", "amx-tile", "avx512vp2intersect", "xop", "fma4", "avx512f", "avx2", "sve2", "sve"}) {
    if (!runtime::missingCpuFeatures({f}).empty()) {
      lacking = f;
      break;
    }
  }
  if (lacking.empty()) GTEST_SKIP() << "this CPU has every feature the test knows";
  const std::string dir = copyModule(sharedModule(), "features");
  std::string graph = readText(fs::path(dir) / "graph.txt");
  size_t line = graph.find("\nfeatures");
  ASSERT_NE(line, std::string::npos);
  graph.insert(graph.find('\n', line + 1), " " + lacking);
  writeText(fs::path(dir) / "graph.txt", graph);
  const std::string err = loadError(dir);
  EXPECT_NE(err.find("need CPU features this machine lacks: " + lacking), std::string::npos) << err;
}

TEST(ExportErrors, HostExportNeedsNothingThisCpuLacks) {
  runtime::ModuleContents contents = runtime::readModule(sharedModule());
  EXPECT_FALSE(contents.info.cpuFeatures.empty());
  EXPECT_EQ(runtime::missingCpuFeatures(contents.info.cpuFeatures), std::vector<std::string>{});
}

TEST(ExportErrors, BadOutputPaths) {
  auto model = open(modelPath("ops/relu.pt"));
  const std::string file = tempRoot() + "/a_file";
  writeText(file, "x");
  auto r = app::exportModel(model, {}, file);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("not a directory"), std::string::npos) << r.error().message;

  const std::string busy = tempRoot() + "/busy_dir";
  fs::create_directories(busy);
  writeText(busy + "/notes.txt", "keep me");
  r = app::exportModel(model, {}, tempRoot() + "/model.so");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("a module is a directory"), std::string::npos) << r.error().message;

  r = app::exportModel(model, {}, busy);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("holds no Kiln module"), std::string::npos) << r.error().message;
  EXPECT_TRUE(fs::exists(busy + "/notes.txt"));

  EXPECT_NE(loadError(tempRoot()).find("not a Kiln module"), std::string::npos);
  EXPECT_NE(loadError(file).find("not a module directory"), std::string::npos);
}

TEST(ExportErrors, PlanRoundTripsWithOddNames) {
  runtime::GraphPlan plan;
  runtime::Tensor c = runtime::Tensor::zeros(runtime::DType::Float32, {2, 3});
  for (int i = 0; i < 6; ++i) c.data<float>()[i] = 0.5f * i - 1;
  plan.constants.push_back(c);
  plan.constants.push_back(runtime::Tensor::zeros(runtime::DType::Int64, {}));
  plan.slots = {{"in put %1", runtime::DType::Float32, {2, 3}, runtime::SlotKind::Input, 0},
                {"", runtime::DType::Float32, {2, 3}, runtime::SlotKind::Constant, 0},
                {"ünï\tcode", runtime::DType::Int64, {}, runtime::SlotKind::Constant, 1},
                {"out", runtime::DType::Float32, {2, 3}, runtime::SlotKind::Intermediate, -1}};
  plan.calls = {{"k_add", {0, 1, 3}, 1, "node with spaces"}, {"k_touch", {2}, 0, ""}};
  plan.inputs = {0};
  plan.outputs = {3};
  runtime::ModuleInfo info;
  info.kilnVersion = "9.9.9";
  info.target = "llvm -mcpu=x86-64 -mattr=+avx2";
  info.triple = "x86_64-pc-linux-gnu";
  info.cpu = "x86-64";
  info.cpuFeatures = {"avx2", "sse2"};
  info.signature = runtime::newModuleSignature();
  const std::string dir = tempRoot() + "/roundtrip";
  runtime::saveModule(dir, plan, info);
  runtime::ModuleContents back = runtime::readModule(dir);
  EXPECT_EQ(back.info.target, info.target);
  EXPECT_EQ(back.info.cpuFeatures, info.cpuFeatures);
  EXPECT_EQ(back.info.signature, info.signature);
  ASSERT_EQ(back.plan.slots.size(), plan.slots.size());
  for (size_t i = 0; i < plan.slots.size(); ++i) {
    EXPECT_EQ(back.plan.slots[i].name, plan.slots[i].name);
    EXPECT_EQ(back.plan.slots[i].shape, plan.slots[i].shape);
    EXPECT_EQ(back.plan.slots[i].kind, plan.slots[i].kind);
  }
  ASSERT_EQ(back.plan.calls.size(), 2u);
  EXPECT_EQ(back.plan.calls[0].node, "node with spaces");
  EXPECT_EQ(back.plan.calls[1].args, std::vector<int>{2});
  EXPECT_EQ(back.plan.calls[1].node, "");
  EXPECT_EQ(difference(back.plan.constants, plan.constants), "");
}

TEST(ExportErrors, PlanWithRegionsRoundTrips) {
  auto scalar = [](runtime::DType dtype, double value) {
    runtime::Tensor t = runtime::Tensor::zeros(dtype, {});
    if (dtype == runtime::DType::Int64) *t.data<int64_t>() = static_cast<int64_t>(value);
    else *t.data<float>() = static_cast<float>(value);
    return t;
  };
  using runtime::SlotKind;
  // A loop whose body holds an if: sub-plans two deep, each with constants of its own.
  runtime::GraphPlan branch;
  branch.slots = {{"a", runtime::DType::Float32, {}, SlotKind::Input, 0},
                  {"k", runtime::DType::Float32, {}, SlotKind::Constant, 0},
                  {"r", runtime::DType::Float32, {}, SlotKind::Intermediate, -1}};
  branch.calls = {{"k_mul", {0, 1, 2}, 1, "then | r"}};
  branch.inputs = {0};
  branch.outputs = {2};
  branch.constants = {scalar(runtime::DType::Float32, 0.25)};
  runtime::GraphPlan other = branch;
  other.constants = {scalar(runtime::DType::Float32, -4)};
  runtime::GraphPlan body;
  body.slots = {{"i", runtime::DType::Int64, {}, SlotKind::Input, 0},
                {"h", runtime::DType::Float32, {}, SlotKind::Input, 1},
                {"go", runtime::DType::Float32, {}, SlotKind::Constant, 0},
                {"y", runtime::DType::Float32, {}, SlotKind::Intermediate, -1}};
  runtime::KernelCall inner{"", {2, 1, 3}, 1, "body | y = if"};
  inner.kind = runtime::CallKind::If;
  inner.regions = {0, 1};
  body.calls = {inner};
  body.inputs = {0, 1};
  body.outputs = {2, 3};
  body.constants = {scalar(runtime::DType::Float32, 1)};
  body.regions = {branch, other};
  runtime::GraphPlan plan;
  plan.slots = {{"x", runtime::DType::Float32, {}, SlotKind::Input, 0},
                {"trip", runtime::DType::Int64, {}, SlotKind::Constant, 0},
                {"y", runtime::DType::Float32, {}, SlotKind::Intermediate, -1}};
  runtime::KernelCall loop{"", {1, 0, 0, 2}, 1, "y = loop"};
  loop.kind = runtime::CallKind::Loop;
  loop.regions = {0};
  plan.calls = {loop};
  plan.inputs = {0};
  plan.outputs = {2};
  plan.constants = {scalar(runtime::DType::Int64, 3)};
  plan.regions = {body};
  runtime::ModuleInfo info;
  info.target = "llvm";
  info.triple = "x86_64-pc-linux-gnu";
  info.cpu = "x86-64";
  info.signature = runtime::newModuleSignature();
  const std::string dir = tempRoot() + "/roundtrip_regions";
  runtime::saveModule(dir, plan, info);
  EXPECT_EQ(readText(fs::path(dir) / "graph.txt").rfind("kiln-module 2\n", 0), 0u);
  runtime::ModuleContents back = runtime::readModule(dir);
  EXPECT_EQ(back.info.formatVersion, 2);
  ASSERT_EQ(back.plan.calls.size(), 1u);
  EXPECT_EQ(back.plan.calls[0].kind, runtime::CallKind::Loop);
  EXPECT_EQ(back.plan.calls[0].regions, std::vector<int>{0});
  EXPECT_EQ(back.plan.calls[0].args, loop.args);
  EXPECT_EQ(difference(back.plan.constants, plan.constants), "");
  ASSERT_EQ(back.plan.regions.size(), 1u);
  const runtime::GraphPlan& b = back.plan.regions[0];
  EXPECT_EQ(b.inputs, body.inputs);
  EXPECT_EQ(b.outputs, body.outputs);
  ASSERT_EQ(b.calls.size(), 1u);
  EXPECT_EQ(b.calls[0].kind, runtime::CallKind::If);
  EXPECT_EQ(b.calls[0].regions, (std::vector<int>{0, 1}));
  EXPECT_EQ(b.calls[0].node, "body | y = if");
  EXPECT_EQ(difference(b.constants, body.constants), "");
  ASSERT_EQ(b.regions.size(), 2u);
  EXPECT_EQ(difference(b.regions[0].constants, branch.constants), "");
  EXPECT_EQ(difference(b.regions[1].constants, other.constants), "");
  EXPECT_EQ(b.regions[1].calls[0].kernel, "k_mul");
}

// A module with a loop, its graph.txt broken in each way a region can be: one line naming the
// problem (the line, where it can), never a crash.
TEST(ExportErrors, BrokenRegionsAreRefusedInOneLine) {
  const std::string good = tempRoot() + "/loop_module";
  exportTo(open(modelPath("ops/loop_on_value.pt")), good);
  const std::string graph = readText(fs::path(good) / "graph.txt");
  ASSERT_NE(graph.find("\nregion 0\n"), std::string::npos) << graph;
  auto replaced = [&](const std::string& from, const std::string& to) {
    std::string g = graph;
    size_t at = g.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return at == std::string::npos ? g : g.replace(at, from.size(), to);
  };
  // The body's first slot (the index) turned into an f32: the loop call no longer fits its body.
  size_t region = graph.find("\nregion 0\n");
  std::string wrongIndex = graph;
  size_t slot = wrongIndex.find("slot 0 input 0 i64", region);
  ASSERT_NE(slot, std::string::npos);
  wrongIndex.replace(slot, 18, "slot 0 input 0 f32");
  const std::string loopLine = graph.substr(graph.find("\ncontrol loop") + 1);
  const std::string loopRegions = loopLine.substr(0, loopLine.find('\n'));
  struct Case {
    const char* name;
    std::string text;
    const char* expected;
  };
  const Case cases[] = {
      {"unclosed", replaced("endregion\n", ""), "'end' inside a region"},
      {"stray endregion", replaced("\nregion 0\n", "\nendregion\nregion 0\n"), "'endregion' without 'region'"},
      {"missing region", replaced(loopRegions, loopRegions.substr(0, loopRegions.rfind(' ')) + " 7"),
       "names region 7, which is not defined"},
      {"version 1", replaced("kiln-module 2", "kiln-module 1"), "needs module format version 2"},
      {"header inside", replaced("\nregion 0\n", "\nregion 0\ncpu x\n"), "'cpu' inside a region"},
      {"unknown kind", replaced("control loop", "control while"), "unknown control kind 'while'"},
      {"index type", wrongIndex, "index is not one i64"},
      {"carried shape", replaced("intermediate -1 f32 [2,8] h0", "intermediate -1 f32 [2,9] h0"),
       "a carried value changes its type"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string dir = copyModule(good, "broken_region");
    writeText(fs::path(dir) / "graph.txt", c.text);
    const std::string err = loadError(dir);
    EXPECT_NE(err.find(c.expected), std::string::npos) << err;
    EXPECT_EQ(err.find('\n'), std::string::npos) << err;
  }
}

// ---- cross-compilation ------------------------------------------------------------------------

TEST(ExportCross, Aarch64ExportWritesAnObjectAndRefusesToLoadHere) {
  auto model = open(modelPath("ops/conv_bn_relu.pt"));
  ASSERT_TRUE(model);
  app::BuildOptions options;
  options.target = "llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72";
  const std::string dir = tempRoot() + "/aarch64";
  app::ExportResult r = exportTo(model, dir, options);
  ASSERT_FALSE(r.files.empty());
  const std::string kernels = (fs::path(dir) / (r.linked ? "kernels.so" : "kernels.o")).string();
  const std::string elf = readText(kernels);
  ASSERT_GT(elf.size(), 20u);
  EXPECT_EQ(elf.substr(0, 4), "\x7f" "ELF");
  EXPECT_EQ(static_cast<unsigned char>(elf[18]), 183);  // e_machine: EM_AARCH64
  if (!r.linked) {
    EXPECT_NE(r.note.find("object file only"), std::string::npos) << r.note;
  }

  runtime::ModuleContents contents = runtime::readModule(dir);
  EXPECT_NE(contents.info.triple.find("aarch64"), std::string::npos);
  EXPECT_EQ(contents.info.cpu, "cortex-a72");
  EXPECT_NE(std::find(contents.info.cpuFeatures.begin(), contents.info.cpuFeatures.end(), "neon"),
            contents.info.cpuFeatures.end());
  if (runtime::hostArchitecture() != "aarch64") {
    const std::string err = loadError(dir);
    EXPECT_NE(err.find("compiled for aarch64"), std::string::npos) << err;
  }
}

/// The line `kiln compile --check` prints: {runner, max |diff|, output scale}, or {} when missing.
std::vector<std::string> checkLine(const std::string& out) {
  std::smatch m;
  if (!std::regex_search(out, m,
                         std::regex(R"(check: ran it in (.+) on random inputs: max \|diff\| vs this machine's build )"
                                    R"((\S+) \(output scale (\S+), bound \S+\): agrees)")))
    return {};
  return {m[1].str(), m[2].str(), m[3].str()};
}

// The aarch64 module really runs: `kiln compile` links its kernels with the cross gcc, and
// `--check` runs it with the runtime and the C example cross-compiled for aarch64 (runtime/
// CMakeLists.txt) under qemu-aarch64; the outputs match the host's in-process build within 1e-4.
class ExportCrossRun : public ::testing::TestWithParam<std::string> {};

TEST_P(ExportCrossRun, Aarch64ModuleRunsUnderQemuLikeTheHostBuild) {
  ASSERT_STRNE(KILN_AARCH64_RUN_MODEL, "")
      << "no aarch64-linux-gnu-gcc/g++ or qemu-aarch64 when the build was configured: run "
         "scripts/install-deps.sh and configure again";
  const std::string model = modelPath("ops/" + GetParam() + ".pt");
  const std::string dir = tempRoot() + "/aarch64_" + GetParam();
  Outcome o = runCommand(std::string(KILN_BINARY) + " compile " + model + " -o " + dir +
                         " --target 'llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72' --check");
  ASSERT_EQ(o.exitCode, 0) << o.out << o.err;
  const std::string kernels = readText(fs::path(dir) / "kernels.so");
  ASSERT_GT(kernels.size(), 20u) << "kernels.so was not linked: " << o.out;
  EXPECT_EQ(static_cast<unsigned char>(kernels[18]), 183);  // e_machine: EM_AARCH64
  const std::vector<std::string> check = checkLine(o.out);
  ASSERT_EQ(check.size(), 3u) << o.out;
  EXPECT_EQ(check[0], "qemu-aarch64");
  std::printf("%s: max |aarch64 - host| %s (output scale %s)\n", GetParam().c_str(), check[1].c_str(),
              check[2].c_str());
  EXPECT_LE(std::stod(check[1]), 1e-4) << GetParam() << ": max |aarch64 - host|";
}

INSTANTIATE_TEST_SUITE_P(Ops, ExportCrossRun,
                         ::testing::Values("conv_bn_relu", "residual_block", "se_block", "softmax_last",
                                           "matmul_3d", "max_pool2d_ceil", "loop_on_value"));

TEST(ExportCross, NewerCpuOfThisArchitectureIsRefusedBeforeRunning) {
  // Same architecture, so the host driver links it; but this CPU may lack the features.
  const std::string target = runtime::hostArchitecture() == "x86_64" ? "llvm -mcpu=sapphirerapids" : "llvm -mcpu=neoverse-v2";
  auto model = open(modelPath("ops/relu.pt"));
  ASSERT_TRUE(model);
  app::BuildOptions options;
  options.target = target;
  const std::string dir = tempRoot() + "/newer_cpu";
  app::ExportResult r = exportTo(model, dir, options);
  EXPECT_TRUE(r.linked) << r.note;
  runtime::ModuleContents contents = runtime::readModule(dir);
  std::vector<std::string> missing = runtime::missingCpuFeatures(contents.info.cpuFeatures);
  if (missing.empty()) GTEST_SKIP() << "this CPU runs " << target;
  const std::string err = loadError(dir);
  EXPECT_NE(err.find("need CPU features this machine lacks: " + missing.front()), std::string::npos) << err;
}

// ---- the command line ---------------------------------------------------------------------------

// `kiln compile --check` on this machine's own target: the runtime loads the module in process;
// its outputs are the JIT build's, bit for bit.
TEST(ExportCli, CompileCheckRunsTheHostModuleInTheRuntime) {
  const std::string dir = tempRoot() + "/cli_checked";
  Outcome o = runCommand(std::string(KILN_BINARY) + " compile " + modelPath("ops/se_block.pt") + " -o " + dir +
                         " --check");
  ASSERT_EQ(o.exitCode, 0) << o.out << o.err;
  const std::vector<std::string> check = checkLine(o.out);
  ASSERT_EQ(check.size(), 3u) << o.out;
  EXPECT_EQ(check[0], "kiln runtime");
  EXPECT_EQ(std::stod(check[1]), 0.0) << o.out;
  EXPECT_GT(std::stod(check[2]), 0.0) << o.out;
  EXPECT_TRUE(fs::exists(fs::path(dir) / "kernels.so"));
}

TEST(ExportCli, CompileThenRunTheDirectoryMatchesRunningTheModel) {
  const std::string dir = tempRoot() + "/cli_module";
  const std::string model = modelPath("ops/se_block.pt");
  Outcome o = runCommand(std::string(KILN_BINARY) + " compile " + model + " -o " + dir);
  ASSERT_EQ(o.exitCode, 0) << o.err;
  EXPECT_NE(o.out.find("kernels.so"), std::string::npos) << o.out;

  auto m = open(model);
  ASSERT_TRUE(m);
  const std::vector<runtime::Tensor> inputs = app::randomInputs(*m, 1);
  const std::string in = tempRoot() + "/cli_in.npy";
  runtime::writeNpy(in, inputs[0]);
  o = runCommand(std::string(KILN_BINARY) + " run " + dir + " --input " + in + " --output " + tempRoot() + "/cli_a.npy");
  ASSERT_EQ(o.exitCode, 0) << o.err;
  o = runCommand(std::string(KILN_BINARY) + " run " + model + " --input " + in + " --output " + tempRoot() + "/cli_b.npy");
  ASSERT_EQ(o.exitCode, 0) << o.err;
  EXPECT_EQ(difference({runtime::readNpy(tempRoot() + "/cli_a.npy")}, {runtime::readNpy(tempRoot() + "/cli_b.npy")}), "");

  // Errors are one line.
  o = runCommand(std::string(KILN_BINARY) + " run " + tempRoot() + " --input " + in);
  EXPECT_NE(o.exitCode, 0);
  EXPECT_NE(o.err.find("error: "), std::string::npos) << o.err;
  EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << o.err;
  o = runCommand(std::string(KILN_BINARY) + " compile " + model);
  EXPECT_NE(o.exitCode, 0);
}

}  // namespace

// aarch64 modules that really run (issue 20): `kiln compile --target "llvm -mtriple=aarch64-linux-gnu
// -mcpu=..."` links kernels.so with Debian's cross gcc; the runtime and the C example, cross-built
// for aarch64 by the main build (runtime/CMakeLists.txt, build/aarch64/), load the module under
// qemu-aarch64, and its outputs must match the host's in-process build within 1e-4 (networks: 1e-4
// of their logits' scale). The same check as the Workbench and `kiln compile --check` make it
// (app::checkCrossTarget). The schedules use NEON-width (4 × f32) vectors, which `kiln ir --stage
// asm` shows. A missing cross linker and an aarch64 module on this x86 host are one-line errors, a
// missing emulator a note. No mocks: real cross compilers, real emulation, real sample models.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include "app/facade.h"
#include "runtime/error.h"
#include "runtime/module.h"
#include "runtime/npy.h"
#include "tests/e2e/process.h"

using namespace kiln;
namespace fs = std::filesystem;

namespace {

constexpr const char* kNeoverseN1 = "llvm -mtriple=aarch64-linux-gnu -mcpu=neoverse-n1";
constexpr const char* kGenericNeon = "llvm -mtriple=aarch64-linux-gnu -mcpu=generic -mattr=+neon";

using kiln::testing_support::kiln;
using kiln::testing_support::modelPath;
using kiln::testing_support::Outcome;
using kiln::testing_support::readBytes;
using kiln::testing_support::runCommand;
using kiln::testing_support::tempRoot;
using kiln::testing_support::writeBytes;

/// A short tag for a target in file names ("neoverse-n1", "generic").
std::string tagOf(const std::string& target) {
  std::smatch m;
  std::regex_search(target, m, std::regex("-mcpu=([^ ]+)"));
  return m[1].str();
}

bool haveCrossTools() { return std::string(KILN_AARCH64_RUN_MODEL) != "" && std::string(KILN_QEMU_AARCH64) != ""; }

constexpr const char* kNoCrossTools =
    "no aarch64-linux-gnu-gcc/g++ or qemu-aarch64 when the build was configured: run scripts/install-deps.sh "
    "and configure again";

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

/// Runs the module in `dir` with the aarch64 C example under qemu-aarch64 on `inputs`; returns
/// the largest |aarch64 - host| over every float output (infinite for a NaN or a failure), after
/// checking each output's size.
double maxDiffUnderQemu(const std::string& dir, const std::vector<runtime::Tensor>& inputs,
                        const std::vector<runtime::Tensor>& want) {
  std::string command = std::string(KILN_QEMU_AARCH64) + " -L /usr/aarch64-linux-gnu " + KILN_AARCH64_RUN_MODEL + " " +
                        dir + " --threads 2";
  for (size_t i = 0; i < inputs.size(); ++i) {
    const std::string in = dir + "/in" + std::to_string(i) + ".raw";
    writeBytes(in, inputs[i].raw(), inputs[i].nbytes());
    command += " --input " + in;
  }
  for (size_t i = 0; i < want.size(); ++i) command += " --output " + dir + "/out" + std::to_string(i) + ".raw";
  Outcome o = runCommand(command);
  EXPECT_EQ(o.exitCode, 0) << command << "\n" << o.err;
  if (o.exitCode != 0) return INFINITY;
  EXPECT_NE(o.out.find("output 0:"), std::string::npos) << o.out;
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

/// ELF e_machine of a file (183: EM_AARCH64), or -1.
int elfMachine(const fs::path& path) {
  const std::string bytes = readBytes(path);
  if (bytes.size() < 20 || bytes.substr(0, 4) != "\x7f" "ELF") return -1;
  return static_cast<unsigned char>(bytes[18]) | static_cast<unsigned char>(bytes[19]) << 8;
}

// ---- NEON-width schedules and NEON code ---------------------------------------------------------

TEST(CrossAarch64, SchedulesPickNeonWidthVectors) {
  // 64 output channels: the packed layout's channel block is the target's f32 lanes (4 for
  // NEON's 128-bit vectors; an AVX2 host has 8, AVX-512 16).
  const std::string model = modelPath("ops/conv_bn_relu");
  for (const char* target : {kNeoverseN1, kGenericNeon}) {
    SCOPED_TRACE(target);
    Outcome o = runCommand(kiln("ir " + model + " --stage optimized --target '" + target + "'"));
    ASSERT_EQ(o.exitCode, 0) << o.err;
    EXPECT_NE(o.out.find("NCHW4c"), std::string::npos) << o.out;
    EXPECT_EQ(o.out.find("NCHW8c"), std::string::npos) << o.out;
    EXPECT_EQ(o.out.find("NCHW16c"), std::string::npos) << o.out;
  }
}

TEST(CrossAarch64, AssemblyIsNeonCode) {
  const std::string model = modelPath("ops/conv_bn_relu");
  for (const char* target : {kNeoverseN1, kGenericNeon}) {
    SCOPED_TRACE(target);
    Outcome o = runCommand(kiln("ir " + model + " --stage asm --target '" + target + "'"));
    ASSERT_EQ(o.exitCode, 0) << o.err;
    // Vector fused multiply-adds on four f32 lanes (by vector or by element): `fmla v0.4s, v1.4s, v2.s[0]`.
    EXPECT_TRUE(std::regex_search(o.out, std::regex(R"(fmla\s+v[0-9]+\.4s, v[0-9]+\.4s, v[0-9]+\.(4s|s\[[0-3]\]))")))
        << o.out.substr(0, 4000);
    // 128-bit loads or stores of q registers, and no x86 (ymm/zmm) code.
    EXPECT_TRUE(std::regex_search(o.out, std::regex(R"((ldr|str|ldp|stp|ld1|st1)\s+(q[0-9]+|\{v[0-9]+\.4s))")))
        << o.out.substr(0, 4000);
    EXPECT_EQ(o.out.find("%ymm"), std::string::npos);
    EXPECT_EQ(o.out.find("%zmm"), std::string::npos);
  }
}

// ---- clean errors -------------------------------------------------------------------------------

TEST(CrossAarch64, MissingCrossLinkerIsOneLineError) {
  // PATH without the cross gcc (and without KILN_CC): compile stops with one line naming the
  // driver and Debian's package, exit 6 (I/O: a tool is missing), and writes no module.
  const std::string dir = tempRoot() + "/no_linker";
  Outcome o = runCommand("env -u KILN_CC PATH=/nonexistent " +
                         kiln("compile " + modelPath("ops/relu") + " -o " + dir + " --target '" + kNeoverseN1 + "'"));
  EXPECT_EQ(o.exitCode, static_cast<int>(ErrorKind::Io)) << o.err;
  EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << o.err;
  EXPECT_EQ(o.err.rfind("error: ", 0), 0u) << o.err;
  EXPECT_NE(o.err.find("no cross linker aarch64-linux-gnu-gcc"), std::string::npos) << o.err;
  EXPECT_NE(o.err.find("gcc-aarch64-linux-gnu"), std::string::npos) << o.err;
  EXPECT_FALSE(fs::exists(fs::path(dir) / "graph.txt"));
  EXPECT_FALSE(fs::exists(fs::path(dir) / "kernels.so"));
}

TEST(CrossAarch64, ModuleIsRefusedOnAnotherArchitectureAndRunsUnderQemu) {
  if (!haveCrossTools()) FAIL() << kNoCrossTools;
  const std::string dir = tempRoot() + "/refused";
  const std::string model = modelPath("ops/relu");
  Outcome o = runCommand(kiln("compile " + model + " -o " + dir + " --target '" + kNeoverseN1 + "'"));
  ASSERT_EQ(o.exitCode, 0) << o.err;
  EXPECT_EQ(elfMachine(fs::path(dir) / "kernels.so"), 183);  // EM_AARCH64
  if (runtime::hostArchitecture() != "aarch64") {
    // This x86 host: `kiln run DIR` refuses before dlopen, in one line, exit 9.
    auto m = app::openModel(model);
    ASSERT_TRUE(m.ok()) << m.error().message;
    const std::string in = tempRoot() + "/relu_in.npy";
    runtime::writeNpy(in, app::randomInputs(*m.value(), 3)[0]);
    o = runCommand(kiln("run " + dir + " --input " + in + " --output " + tempRoot() + "/relu_out.npy"));
    EXPECT_EQ(o.exitCode, static_cast<int>(ErrorKind::IncompatibleModule)) << o.err;
    EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << o.err;
    EXPECT_NE(o.err.find("compiled for aarch64"), std::string::npos) << o.err;
  }
  // The aarch64 runtime accepts it (its CPU-feature check passes under qemu) and runs it.
  o = runCommand(std::string(KILN_QEMU_AARCH64) + " -L /usr/aarch64-linux-gnu " + KILN_AARCH64_RUN_MODEL + " " + dir);
  EXPECT_EQ(o.exitCode, 0) << o.err;
  EXPECT_TRUE(std::regex_search(o.out, std::regex(R"(output 0: \S+ f32 \[1,8,16,16\])"))) << o.out;
}

// ---- an export-only build's agreement: app::checkCrossTarget and `kiln compile --check` ------------

// What the Workbench's status line shows for an aarch64 build: the module's size, and its outputs
// under qemu-aarch64 (the aarch64 run_model that the build writes next to kiln) against the host
// build on the same random inputs.
TEST(CrossAarch64, ExportOnlyBuildReportsItsSizeAndItsAgreementUnderQemu) {
  if (!haveCrossTools()) FAIL() << kNoCrossTools;
  auto m = app::openModel(modelPath("ops/conv_bn_relu"));
  ASSERT_TRUE(m.ok()) << m.error().message;
  app::BuildOptions options;
  options.target = kNeoverseN1;
  auto checked = app::checkCrossTarget(m.value(), options);
  ASSERT_TRUE(checked.ok()) << checked.error().message;
  const app::CrossCheck& c = checked.value();
  EXPECT_NE(c.targetString.find("-mtriple=aarch64"), std::string::npos) << c.targetString;
  EXPECT_NE(c.targetString.find("-mcpu=neoverse-n1"), std::string::npos) << c.targetString;
  EXPECT_EQ(c.kernelsFile, "kernels.so");
  EXPECT_GT(c.kernelsBytes, 0);
  EXPECT_GT(c.moduleBytes, c.kernelsBytes);  // graph.txt and params.bin besides
  EXPECT_EQ(c.runner, "qemu-aarch64") << c.note;
  EXPECT_TRUE(c.note.empty()) << c.note;
  EXPECT_GT(c.outputScale, 0);
  EXPECT_LE(c.maxAbsDiff, 1e-4 * std::max(1.0, c.outputScale));
  std::printf("agreement ops/conv_bn_relu (checkCrossTarget, %s) max|diff| = %.3g (output scale %.3g)\n", kNeoverseN1,
              c.maxAbsDiff, c.outputScale);
}

TEST(CrossAarch64, MissingQemuOrRunnerIsANoteNotAnError) {
  if (!haveCrossTools()) FAIL() << kNoCrossTools;
  auto m = app::openModel(modelPath("ops/relu"));
  ASSERT_TRUE(m.ok()) << m.error().message;
  app::BuildOptions options;
  options.target = kGenericNeon;
  // Each override names what is missing and what installs it; the module is still measured.
  struct Case {
    const char* variable;
    const char* value;
    const char* says;
  };
  for (const Case& k : {Case{"KILN_QEMU_AARCH64", "/nonexistent/qemu-aarch64", "installs qemu-user"},
                        Case{"KILN_AARCH64_RUNNER", "/nonexistent/run_model", "does not exist"}}) {
    SCOPED_TRACE(k.variable);
    ::setenv(k.variable, k.value, 1);
    auto checked = app::checkCrossTarget(m.value(), options);
    ::unsetenv(k.variable);
    ASSERT_TRUE(checked.ok()) << checked.error().message;
    EXPECT_TRUE(checked.value().runner.empty());
    EXPECT_GT(checked.value().kernelsBytes, 0);
    EXPECT_NE(checked.value().note.find(k.value), std::string::npos) << checked.value().note;
    EXPECT_NE(checked.value().note.find(k.says), std::string::npos) << checked.value().note;
  }
}

TEST(CrossAarch64, CompileCheckRunsTheModuleUnderQemu) {
  if (!haveCrossTools()) FAIL() << kNoCrossTools;
  const std::string dir = tempRoot() + "/checked";
  Outcome o = runCommand(kiln("compile " + modelPath("ops/gelu") + " -o " + dir + " --target '" + kNeoverseN1 +
                              "' --check"));
  ASSERT_EQ(o.exitCode, 0) << o.out << o.err;
  std::smatch line;
  ASSERT_TRUE(std::regex_search(o.out, line,
                                std::regex(R"(check: ran it in qemu-aarch64 on random inputs: max \|diff\| vs this )"
                                           R"(machine's build (\S+) \(output scale (\S+), bound \S+\): agrees)")))
      << o.out;
  EXPECT_LE(std::stod(line[1].str()), 1e-4 * std::stod(line[2].str()));
  EXPECT_GT(std::stod(line[2].str()), 0);
  EXPECT_EQ(elfMachine(fs::path(dir) / "kernels.so"), 183);  // the module stays where -o put it
  // Without the emulator it cannot check: one line saying what to install, exit 6 (I/O).
  o = runCommand("env KILN_QEMU_AARCH64=/nonexistent/qemu-aarch64 " +
                 kiln("compile " + modelPath("ops/gelu") + " -o " + dir + " --target '" + kNeoverseN1 + "' --check"));
  EXPECT_EQ(o.exitCode, static_cast<int>(ErrorKind::Io)) << o.err;
  EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << o.err;
  EXPECT_EQ(o.err.rfind("error: " + dir + ": --check cannot run it here: ", 0), 0u) << o.err;
  EXPECT_NE(o.err.find("qemu-user"), std::string::npos) << o.err;
}

// ---- op modules under qemu ----------------------------------------------------------------------

struct OpCase {
  std::string op;
  std::string target;
};

void PrintTo(const OpCase& c, std::ostream* os) { *os << c.op << " on " << c.target; }

class CrossAarch64Ops : public ::testing::TestWithParam<OpCase> {};

TEST_P(CrossAarch64Ops, RunsUnderQemuLikeTheHostBuild) {
  if (!haveCrossTools()) FAIL() << kNoCrossTools;
  const OpCase& c = GetParam();
  const std::string model = modelPath("ops/" + c.op);
  const std::string dir = tempRoot() + "/" + c.op + "_" + tagOf(c.target);
  Outcome o = runCommand(kiln("compile " + model + " -o " + dir + " --target '" + c.target + "'"));
  ASSERT_EQ(o.exitCode, 0) << o.err;
  ASSERT_EQ(elfMachine(fs::path(dir) / "kernels.so"), 183) << "kernels.so was not linked for aarch64: " << o.out;

  auto m = app::openModel(model);
  ASSERT_TRUE(m.ok()) << m.error().message;
  const std::vector<runtime::Tensor> inputs = app::randomInputs(*m.value(), 29);
  const std::vector<runtime::Tensor> want = hostOutputs(m.value(), inputs);
  ASSERT_FALSE(want.empty());
  const double worst = maxDiffUnderQemu(dir, inputs, want);
  std::printf("%s on %s: max |aarch64 - host| %.3g\n", c.op.c_str(), c.target.c_str(), worst);
  EXPECT_LE(worst, 1e-4) << c.op << " on " << c.target;
}

std::vector<OpCase> opCases() {
  // Each schedule family at NEON width: packed direct and depthwise convolutions with odd
  // shapes, Winograd-sized 3×3, pooling, dense/matmul, reductions, vector math, concatenation.
  const std::vector<std::string> ops = {"conv2d_depthwise_stride2", "conv2d_5x5_stride2_nonsquare", "conv2d_groups2",
                                        "avg_pool2d_pad_count",     "adaptive_avg_pool2d_2x3",       "addmm",
                                        "bmm",                      "attention_causal",              "gelu",
                                        "hardswish",                "cat_three",                     "classifier_head"};
  std::vector<OpCase> cases;
  for (const std::string& op : ops) {
    cases.push_back({op, kNeoverseN1});
    cases.push_back({op, kGenericNeon});
  }
  return cases;
}

std::string opCaseName(const ::testing::TestParamInfo<OpCase>& info) {
  std::string tag = tagOf(info.param.target);
  for (char& ch : tag) ch = std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
  return info.param.op + "_" + tag;
}

INSTANTIATE_TEST_SUITE_P(Ops, CrossAarch64Ops, ::testing::ValuesIn(opCases()), opCaseName);

// ---- the sample CNNs ------------------------------------------------------------------------------

/// One network: the host build once, then a module for each aarch64 target run under qemu.
/// Prints one row of the agreement table per target (`ctest -R cross_aarch64 -V`).
class CrossAarch64Networks : public ::testing::TestWithParam<std::string> {};

TEST_P(CrossAarch64Networks, AgreesWithTheHostBuild) {
  if (!haveCrossTools()) FAIL() << kNoCrossTools;
  const std::string name = GetParam();
  auto m = app::openModel(modelPath(name));
  ASSERT_TRUE(m.ok()) << m.error().message;
  const std::vector<runtime::Tensor> inputs = app::randomInputs(*m.value(), 5);
  const std::vector<runtime::Tensor> want = hostOutputs(m.value(), inputs);
  ASSERT_FALSE(want.empty());
  // The bound is 1e-4 of the logits' scale (they are O(1): the sample models are rescaled so).
  // A 4-channel block sums each output's products in another order than the host's 8-channel
  // one, and through ResNet-50's 53 convolutions (Winograd F(4×4) among them) that alone moves
  // its logits (|y| ≤ ~3.3) by 0.8-1.2e-4 (five random inputs, measured here): about as far as the
  // host build is from PyTorch itself (1.4-1.6e-4 on the same inputs).
  double scale = 0;
  for (const runtime::Tensor& t : want)
    for (int64_t k = 0; k < t.numel(); ++k) scale = std::max(scale, double(std::fabs(t.data<float>()[k])));
  for (const char* target : {kNeoverseN1, kGenericNeon}) {
    SCOPED_TRACE(target);
    const std::string dir = tempRoot() + "/" + name + "_" + tagOf(target);
    app::BuildOptions options;
    options.target = target;
    auto exported = app::exportModel(m.value(), options, dir);
    ASSERT_TRUE(exported.ok()) << exported.error().message;
    ASSERT_TRUE(exported.value().linked) << exported.value().note;
    ASSERT_EQ(elfMachine(fs::path(dir) / "kernels.so"), 183);
    const double worst = maxDiffUnderQemu(dir, inputs, want);
    std::printf("agreement | %-18s | %-58s | max |aarch64 - host| %.3g | max |host| %.3g\n", name.c_str(), target,
                worst, scale);
    EXPECT_LE(worst, 1e-4 * std::max(1.0, scale)) << name << " on " << target;
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
}

INSTANTIATE_TEST_SUITE_P(Cnns, CrossAarch64Networks,
                         ::testing::Values("mobilenet_v2", "efficientnet_b0", "resnet18", "resnet50",
                                           "mobilenet_v3_small"),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

}  // namespace

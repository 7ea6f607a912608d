// The `kiln` command line run as a user would: real processes, real files. Bad input must give
// one clear line on stderr and a non-zero exit, never a crash.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "runtime/npy.h"
#include "tests/e2e/process.h"

namespace {

using kiln::testing_support::Outcome;

/// This test process's scratch folder, emptied on first use (an earlier process of the same pid
/// may have left its stores there).
std::string tempDir() {
  static const auto d = [] {
    auto fresh = std::filesystem::temp_directory_path() / ("kiln_cli_test_" + std::to_string(::getpid()));
    std::filesystem::remove_all(fresh);
    return fresh;
  }();
  std::filesystem::create_directories(d);
  return d.string();
}

Outcome runKiln(const std::string& args) {
  return kiln::testing_support::runProcess(std::string(KILN_BINARY) + " " + args, tempDir() + "/stderr.txt");
}

std::string models() { return KILN_MODELS_DIR; }

void expectCleanError(const Outcome& o, const std::string& needle) {
  EXPECT_FALSE(o.signaled) << "crashed: " << o.err;
  EXPECT_NE(o.exitCode, 0);
  EXPECT_NE(o.err.find("error: "), std::string::npos) << o.err;
  EXPECT_NE(o.err.find(needle), std::string::npos) << o.err;
  // One line.
  EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << o.err;
}

std::string writeInput(const std::string& name, kiln::runtime::Shape shape) {
  kiln::runtime::Tensor t = kiln::runtime::Tensor::zeros(kiln::runtime::DType::Float32, shape);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = static_cast<float>((i * 37 % 101) - 50) / 25.0f;
  std::string path = tempDir() + "/" + name;
  kiln::runtime::writeNpy(path, t);
  return path;
}

}  // namespace

TEST(Cli, RunWritesOutputsThatMatchTheInputBatch) {
  std::string in = writeInput("x.npy", {2, 8, 16, 16});
  std::string out = tempDir() + "/y.npy";
  Outcome o = runKiln("run " + models() + "/ops/relu.pt --input " + in + " --output " + out + " -O3");
  ASSERT_EQ(o.exitCode, 0) << o.err;
  kiln::runtime::Tensor x = kiln::runtime::readNpy(in);
  kiln::runtime::Tensor y = kiln::runtime::readNpy(out);
  ASSERT_EQ(y.shape(), x.shape());
  for (int64_t i = 0; i < y.numel(); ++i) ASSERT_EQ(y.data<float>()[i], std::max(0.0f, x.data<float>()[i]));
}

// A sweep of a file that is not a model fails once, clearly, instead of recording every point
// as failed.
TEST(Cli, SweepOfACorruptModelIsOneError) {
  auto o = runKiln("sweep " + models() + "/bad/truncated.pt --no-store --batches 1,2 --backends kiln");
  expectCleanError(o, "truncated.pt");
  EXPECT_EQ(o.out.find("median latency"), std::string::npos) << o.out;
}

TEST(Cli, TruncatedModel) {
  std::string in = writeInput("x1.npy", {1, 3, 224, 224});
  expectCleanError(runKiln("run " + models() + "/bad/truncated.pt --input " + in), "not a TorchScript archive");
}

TEST(Cli, NotAModel) {
  std::string in = writeInput("x2.npy", {1, 3, 8, 8});
  expectCleanError(runKiln("run " + models() + "/bad/not_a_model.pt --input " + in), "not_a_model.pt");
}

TEST(Cli, UnsupportedOpIsNamed) {
  auto o = runKiln("ir " + models() + "/bad/unsupported_op.pt --stage graph");
  expectCleanError(o, "aten::grid_sampler");
  EXPECT_EQ(o.exitCode, 4);  // ErrorKind::Unsupported
}

TEST(Cli, MissingFileAndBadFlags) {
  expectCleanError(runKiln("ir /nonexistent/model.pt"), "no such file");
  expectCleanError(runKiln("ir " + models() + "/ops/relu.pt --stage nonsense"), "unknown stage");
  expectCleanError(runKiln("ir " + models() + "/ops/relu.pt --stage llvm --target 'llvm -mcpu=nonsense'"), "nonsense");
}

TEST(Cli, WrongInputShapeOrCount) {
  std::string bad = writeInput("bad.npy", {1, 5, 16, 16});
  auto o = runKiln("run " + models() + "/ops/conv2d_plain.pt --input " + bad);
  EXPECT_NE(o.exitCode, 0);
  EXPECT_FALSE(o.signaled);
  std::ofstream(tempDir() + "/garbage.npy") << "not numpy";
  expectCleanError(runKiln("run " + models() + "/ops/relu.pt --input " + tempDir() + "/garbage.npy"), "garbage.npy");
}

TEST(Cli, IrShowsTheOptimizedGraphAndPassStats) {
  auto optimized = runKiln("ir " + models() + "/ops/conv_bn_relu.pt --stage optimized -O2");
  ASSERT_EQ(optimized.exitCode, 0) << optimized.err;
  EXPECT_EQ(optimized.out.find("batch_norm("), std::string::npos) << optimized.out;
  EXPECT_NE(optimized.out.find("group @fused_conv2d_mul_add_relu_0 {"), std::string::npos) << optimized.out;
  auto stats = runKiln("ir " + models() + "/ops/conv_bn_relu.pt --stats -O3");
  ASSERT_EQ(stats.exitCode, 0) << stats.err;
  for (const char* text : {"fold-scale-axis", "fuse-ops", "fused functions", "ops per function", "calls per inference"})
    EXPECT_NE(stats.out.find(text), std::string::npos) << text << " in:\n" << stats.out;
  auto custom = runKiln("ir " + models() + "/ops/conv_bn_relu.pt --stage optimized --passes fuse-ops{max-depth=2}");
  ASSERT_EQ(custom.exitCode, 0) << custom.err;
  EXPECT_NE(custom.out.find("group @fused_conv2d_batch_norm_0 {"), std::string::npos) << custom.out;
  expectCleanError(runKiln("ir " + models() + "/ops/relu.pt --stage optimized --passes fold,fuse-ops"), "unknown pass 'fold'");
  auto list = runKiln("ir --list-passes");
  ASSERT_EQ(list.exitCode, 0) << list.err;
  EXPECT_NE(list.out.find("fold-constants"), std::string::npos);
  EXPECT_NE(list.out.find("-O2  simplify-inference"), std::string::npos);
}

// --winograd caps the Winograd tile of the -O3 graph (ResNet-18's 56×56 and 28×28 layers run
// F(4×4) by default); anything but 4, 2 or 0 is a usage error.
TEST(Cli, WinogradFlagCapsTheTile) {
  auto tiles = [](const std::string& out, const std::string& tile) {
    size_t n = 0;
    for (size_t at = out.find("conv2d_winograd_nchwc("); at != std::string::npos; at = out.find("conv2d_winograd_nchwc(", at + 1)) {
      size_t end = out.find('\n', at);
      n += out.substr(at, end - at).find("tile=" + tile) != std::string::npos;
    }
    return n;
  };
  auto base = runKiln("ir " + models() + "/resnet18.pt --stage optimized");
  ASSERT_EQ(base.exitCode, 0) << base.err;
  EXPECT_GT(tiles(base.out, "4"), 0u) << base.out.substr(0, 2000);
  auto two = runKiln("ir " + models() + "/resnet18.pt --stage optimized --winograd 2");
  ASSERT_EQ(two.exitCode, 0) << two.err;
  EXPECT_EQ(tiles(two.out, "4"), 0u);
  EXPECT_GE(tiles(two.out, "2"), tiles(base.out, "4"));
  auto none = runKiln("ir " + models() + "/resnet18.pt --stage optimized --winograd 0");
  ASSERT_EQ(none.exitCode, 0) << none.err;
  EXPECT_EQ(none.out.find("conv2d_winograd_nchwc("), std::string::npos);
  auto bad = runKiln("ir " + models() + "/resnet18.pt --stage optimized --winograd 3");
  expectCleanError(bad, "--winograd");
  EXPECT_EQ(bad.exitCode, 2);
}

TEST(Cli, IrStagesPrint) {
  auto graph = runKiln("ir " + models() + "/ops/conv_bn_relu.pt --stage graph");
  ASSERT_EQ(graph.exitCode, 0) << graph.err;
  EXPECT_NE(graph.out.find("conv2d("), std::string::npos);
  EXPECT_NE(graph.out.find("batch_norm("), std::string::npos);
  auto lowered = runKiln("ir " + models() + "/ops/conv_bn_relu.pt --stage lowered");
  ASSERT_EQ(lowered.exitCode, 0) << lowered.err;
  // A kernel computing the convolution (alone, or fused with its epilogue at -O2 and above).
  EXPECT_NE(lowered.out.find("func "), std::string::npos) << lowered.out.substr(0, 500);
  EXPECT_NE(lowered.out.find("conv2d"), std::string::npos) << lowered.out.substr(0, 500);
  auto unfused = runKiln("ir " + models() + "/ops/conv_bn_relu.pt --stage lowered -O0");
  ASSERT_EQ(unfused.exitCode, 0) << unfused.err;
  EXPECT_NE(unfused.out.find("func conv2d"), std::string::npos) << unfused.out.substr(0, 500);
  EXPECT_NE(unfused.out.find("func batch_norm"), std::string::npos) << unfused.out.substr(0, 500);
  auto llvm = runKiln("ir " + models() + "/ops/relu.pt --stage llvm");
  ASSERT_EQ(llvm.exitCode, 0) << llvm.err;
  EXPECT_NE(llvm.out.find("define"), std::string::npos);
}

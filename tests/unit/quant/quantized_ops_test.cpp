// Quantized operators (issue 9): each case is a small converted module around one quantized op (the
// manifest's "quantized_op" entries, from resources/models/export_models.py: torch.ao.nn.quantized
// modules with random int8 weights and shapes that do not divide the kernels' tiles), run through
// Kiln's importer, passes and int8 kernels at -O0 (plain qnn kernels) and -O3 (packed u8
// NCHW[x]c with the dot-product kernel), with the host target and with Haswell (AVX2: the exact
// generic expansion). Every build's outputs must lie within one step of the exact int8 reference
// exported with the module (export_models.py, _exact_reference), and equal it on 99 % of the
// elements (convolutions and linear layers: all of them). libtorch's oneDNN kernels are
// printed beside it; where they are exact (VNNI, tests/int8_reference.h) they must lie within one
// step of that reference on 99 % of the elements too, which checks the reference itself.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <algorithm>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "app/facade.h"
#include "runtime/npy.h"
#include "tests/int8_reference.h"
#include "profiler/torch_baseline.h"

using namespace kiln;

namespace {

struct Fixture {
  std::string name;
  std::string path;
  double outputStep = 0;
  std::string exactInput, exactOutput;  // the exact reference's .npy files
};

/// gtest prints a parameter with this (test names listed by ctest stay short and stable).
void PrintTo(const Fixture& f, std::ostream* os) { *os << f.name; }

/// The manifest's "quantized_op" modules (resources/models/export_models.py QUANTIZED_OPS).
std::vector<Fixture> quantizedOps() {
  std::ifstream in(std::string(KILN_MODELS_DIR) + "/manifest.json");
  if (!in) return {};
  nlohmann::json doc = nlohmann::json::parse(in);
  std::vector<Fixture> out;
  for (const auto& m : doc.at("models")) {
    if (m.at("kind") != "quantized_op") continue;
    const std::string dir = std::string(KILN_MODELS_DIR) + "/";
    Fixture f;
    f.name = m.at("name");
    f.path = dir + m.at("file").get<std::string>();
    f.outputStep = m.at("output_step").get<double>();
    const nlohmann::json exact = m.value("exact_reference", nlohmann::json::object());
    for (const auto& [batch, files] : exact.items()) {
      f.exactInput = dir + files.at("input").get<std::string>();
      f.exactOutput = dir + files.at("output").get<std::string>();
    }
    out.push_back(f);
  }
  return out;
}

/// The share of `a`'s elements within `steps` output steps of `b`'s; the largest distance in steps.
std::pair<double, double> shareWithin(const runtime::Tensor& a, const runtime::Tensor& b, double step, double steps) {
  int64_t within = 0;
  double worst = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    double off = std::fabs(a.data<float>()[i] - b.data<float>()[i]) / step;
    within += off <= steps + 1e-3;
    worst = std::max(worst, off);
  }
  return {static_cast<double>(within) / static_cast<double>(a.numel()), worst};
}

/// Runs `f` through Kiln at -O0 and -O3 (host and Haswell) and checks every output against the
/// exact reference; libtorch's share is printed (and checked where its kernels are exact).
void expectMatches(const Fixture& f) {
  ASSERT_FALSE(f.exactInput.empty()) << f.name << " has no exact_reference in the manifest: re-export the sample models";
  app::OpenOptions open;
  auto model = app::openModel(f.path, open);
  ASSERT_TRUE(model.ok()) << model.error().message;
  const std::vector<runtime::Tensor> inputs = {runtime::readNpy(f.exactInput)};
  const runtime::Tensor exact = runtime::readNpy(f.exactOutput);
  profiler::TorchModel torchModel(f.path, profiler::TorchMode::Eager, 1);
  std::vector<runtime::Tensor> reference = torchModel.run(inputs);
  ASSERT_EQ(reference.size(), 1u);
  ASSERT_EQ(reference[0].shape(), exact.shape());
  auto [torchShare, torchWorst] = shareWithin(reference[0], exact, f.outputStep, 1);
  std::printf("  libtorch: %.4f of %lld elements within 1 step of the exact reference (max %.2f steps)\n", torchShare,
              static_cast<long long>(exact.numel()), torchWorst);
  if (testing_support::int8ReferenceIsExact()) {
    EXPECT_GE(torchShare, 0.99) << "libtorch vs the exact reference";
  }
  struct Config {
    int opt;
    const char* target;
  };
  for (Config cfg : {Config{0, "llvm"}, Config{3, "llvm"}, Config{3, "llvm -mcpu=haswell"}}) {
    app::BuildOptions options;
    options.optLevel = cfg.opt;
    options.target = cfg.target;
    options.threads = 2;
    options.verifyPasses = true;
    auto compiled = app::build(model.value(), options);
    ASSERT_TRUE(compiled.ok()) << compiled.error().message;
    // -O3 runs convolutions as the packed int8 kernel (qnn-alter-layout): the convolution sketch
    // under a u8 key, with dot4 steps unless depthwise; -O0 as the NCHW int8 nest under its sketch
    // (conv_search.h "NCHW"), keyed "conv2d:...:u8", without dot4 steps.
    if (f.name.rfind("q_conv", 0) == 0) {
      bool packed = false;
      for (const core::Node& node : compiled.value()->graph.nodes()) packed = packed || node.op == "qnn.conv2d_nchwc";
      EXPECT_EQ(packed, cfg.opt >= 3) << "-O" << cfg.opt;
      auto ir = app::irText(model.value(), app::IrStage::Lowered, options);
      ASSERT_TRUE(ir.ok()) << ir.error().message;
      const bool keyed = ir.value().find("tune_key: conv2d_nchwc:") != std::string::npos;
      EXPECT_EQ(keyed, cfg.opt >= 3) << f.name << " -O" << cfg.opt;
      const size_t planar = ir.value().find("tune_key: conv2d:");
      EXPECT_EQ(planar != std::string::npos && ir.value().find(":u8", planar) != std::string::npos,
                cfg.opt < 3)
          << f.name << " -O" << cfg.opt;
      const bool dot4 = ir.value().find("// trace: dot4(") != std::string::npos;
      EXPECT_EQ(dot4, cfg.opt >= 3 && f.name.find("depthwise") == std::string::npos)
          << f.name << " -O" << cfg.opt;
    }
    // A linear layer runs the dense sketch (dot4 steps, a tuning key) when K is a multiple of 4 and
    // its products need no zero point: the zero point's share an input (-O3) or the zero point 0.
    if (f.name.rfind("q_linear", 0) == 0) {
      auto ir = app::irText(model.value(), app::IrStage::Lowered, options);
      ASSERT_TRUE(ir.ok()) << ir.error().message;
      bool keyed = ir.value().find("tune_key: dense:") != std::string::npos;
      EXPECT_EQ(keyed, f.name != "q_linear_k50" && (cfg.opt >= 3 || f.name == "q_linear_relu_zp0"))
          << f.name << " -O" << cfg.opt << " " << cfg.target;
    }
    auto out = app::run(*compiled.value(), inputs);
    ASSERT_TRUE(out.ok()) << out.error().message;
    const runtime::Tensor& k = out.value()[0];
    ASSERT_EQ(k.shape(), exact.shape());
    auto [share, worst] = shareWithin(k, exact, f.outputStep, 0);
    std::printf("  -O%d %-20s %lld elements: %.4f equal to the exact reference (max %.2f steps)\n", cfg.opt, cfg.target,
                static_cast<long long>(k.numel()), share, worst);
    // Convolutions and linear layers are bit-exact; the other ops (add, pooling) are libtorch's own
    // in the reference, whose f32 rounding may differ from Kiln's at a tie: one step, rarely.
    EXPECT_LE(worst, 1.001) << "-O" << cfg.opt << " " << cfg.target;
    EXPECT_GE(share, 0.99) << "-O" << cfg.opt << " " << cfg.target << ": max " << worst << " steps off";
  }
}

class QuantizedOp : public testing::TestWithParam<Fixture> {};

TEST_P(QuantizedOp, MatchesTheExactInt8Reference) { expectMatches(GetParam()); }

INSTANTIATE_TEST_SUITE_P(Manifest, QuantizedOp, testing::ValuesIn(quantizedOps()),
                         [](const testing::TestParamInfo<Fixture>& info) { return info.param.name; });

TEST(QuantizedOps, ManifestListsThem) { EXPECT_GE(quantizedOps().size(), 10u); }

}  // namespace

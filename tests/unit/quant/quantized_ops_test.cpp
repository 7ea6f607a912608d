// Quantized operators (issue 9) against libtorch's own quantized kernels (oneDNN engine): each case
// is a small converted module around one quantized op (the manifest's "quantized_op" entries, from
// resources/models/export_models.py: torch.ao.nn.quantized modules with random int8 weights and
// shapes that do not divide the kernels' tiles), run through Kiln's importer, passes and int8
// kernels at -O0 (plain qnn kernels) and -O3 (packed u8 NCHW[x]c with the dot-product
// kernel), with the host target (VNNI here) and with Haswell (AVX2: the exact generic expansion).
// Outputs must lie within one output quantization step of libtorch's on at least 99 % of the
// elements where libtorch's int8 kernels are exact (tests/int8_reference.h), and Kiln's three
// builds must agree; the measured share is printed (bit-exact is the norm with VNNI).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "app/facade.h"
#include "tests/int8_reference.h"
#include "profiler/torch_baseline.h"

using namespace kiln;

namespace {

struct Fixture {
  std::string name;
  std::string path;
  double outputStep = 0;
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
    out.push_back({m.at("name"), std::string(KILN_MODELS_DIR) + "/" + m.at("file").get<std::string>(),
                   m.at("output_step").get<double>()});
  }
  return out;
}

/// Runs `f` through libtorch and through Kiln at -O0 and -O3 (host and Haswell) and checks the
/// share of outputs within one step.
void expectMatches(const Fixture& f) {
  app::OpenOptions open;
  auto model = app::openModel(f.path, open);
  ASSERT_TRUE(model.ok()) << model.error().message;
  std::vector<runtime::Tensor> inputs = app::randomInputs(*model.value(), 3);
  profiler::TorchModel torchModel(f.path, profiler::TorchMode::Eager, 1);
  std::vector<runtime::Tensor> reference = torchModel.run(inputs);
  ASSERT_EQ(reference.size(), 1u);
  struct Config {
    int opt;
    const char* target;
  };
  std::optional<runtime::Tensor> first;  // the -O0 output
  for (Config cfg : {Config{0, "llvm"}, Config{3, "llvm"}, Config{3, "llvm -mcpu=haswell"}}) {
    app::BuildOptions options;
    options.optLevel = cfg.opt;
    options.target = cfg.target;
    options.threads = 2;
    options.verifyPasses = true;
    auto compiled = app::build(model.value(), options);
    ASSERT_TRUE(compiled.ok()) << compiled.error().message;
    // -O3 runs convolutions as the packed int8 kernel (qnn-alter-layout), -O0 as the plain one.
    if (f.name.rfind("q_conv", 0) == 0) {
      bool packed = false;
      for (const core::Node& node : compiled.value()->graph.nodes()) packed = packed || node.op == "qnn.conv2d_nchwc";
      EXPECT_EQ(packed, cfg.opt >= 3) << "-O" << cfg.opt;
    }
    auto out = app::run(*compiled.value(), inputs);
    ASSERT_TRUE(out.ok()) << out.error().message;
    const runtime::Tensor &k = out.value()[0], &t = reference[0];
    ASSERT_EQ(k.shape(), t.shape());
    int64_t within = 0, exact = 0;
    for (int64_t i = 0; i < k.numel(); ++i) {
      double steps = std::fabs(k.data<float>()[i] - t.data<float>()[i]) / f.outputStep;
      within += steps <= 1.001;
      exact += steps <= 1e-3;
    }
    double share = static_cast<double>(within) / static_cast<double>(k.numel());
    std::printf("  -O%d %-20s %lld elements: %.4f within 1 step, %.4f exact\n", cfg.opt, cfg.target,
                static_cast<long long>(k.numel()), share, static_cast<double>(exact) / static_cast<double>(k.numel()));
    EXPECT_GE(share, testing_support::requiredInt8Share(0.99)) << "-O" << cfg.opt << " " << cfg.target;
    // Kiln's plain, packed and AVX2 int8 kernels agree with each other whatever the reference.
    if (!first) {
      first = k;
      continue;
    }
    ASSERT_EQ(first->numel(), k.numel());
    for (int64_t i = 0; i < k.numel(); ++i)
      ASSERT_LE(std::fabs(k.data<float>()[i] - first->data<float>()[i]) / f.outputStep, 1.001)
          << "-O" << cfg.opt << " " << cfg.target << " vs -O0 at element " << i;
  }
}

class QuantizedOp : public testing::TestWithParam<Fixture> {};

TEST_P(QuantizedOp, MatchesLibtorch) { expectMatches(GetParam()); }

INSTANTIATE_TEST_SUITE_P(Manifest, QuantizedOp, testing::ValuesIn(quantizedOps()),
                         [](const testing::TestParamInfo<Fixture>& info) { return info.param.name; });

TEST(QuantizedOps, ManifestListsThem) { EXPECT_GE(quantizedOps().size(), 10u); }

}  // namespace

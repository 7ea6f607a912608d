// End to end: every model in the exported manifest is imported, compiled, run through Kiln and
// compared with libtorch's own output on the same input, at the model's batch and at a larger
// one. Networks are named Networks/<name>, op modules Ops/<name>. Float outputs match within the
// manifest's tolerances, integer and bool outputs exactly. Quantized networks are checked against
// the exact int8 reference exported with them (libtorch's own int8 kernels are exact only with
// VNNI; there they must agree with that reference as well).
#include <gtest/gtest.h>

#include <cmath>
#include <algorithm>
#include <cstdlib>
#include <map>
#include <sstream>
#include <fstream>

#include <nlohmann/json.hpp>

#include "app/facade.h"
#include "runtime/npy.h"
#include "runtime/tensor_values.h"
#include "tests/int8_reference.h"
#include "profiler/torch_baseline.h"

using namespace kiln;

namespace {

struct Case {
  std::string name;
  std::string file;
  std::string kind;
  double rtol = 1e-4, atol = 1e-4;
  // Quantized networks (kind "quantized_network"): the output's quantization step; Kiln's outputs
  // lie within `steps` steps of the exact int8 reference computed at export (export_models.py,
  // _exact_reference; batch -> input .npy, output .npy) on at least `minShare` of the elements
  // (all of them, bit for bit, on the sample networks here), and so do libtorch's where exact.
  double step = 0, steps = 1, minShare = 1;
  std::map<int64_t, std::pair<std::string, std::string>> exact;
};

std::vector<Case> loadManifest() {
  std::ifstream in(std::string(KILN_MODELS_DIR) + "/manifest.json");
  if (!in) return {};
  nlohmann::json j = nlohmann::json::parse(in);
  std::vector<Case> cases;
  const std::string dir = std::string(KILN_MODELS_DIR) + "/";
  for (const auto& m : j["models"]) {
    cases.push_back({m["name"], dir + m["file"].get<std::string>(), m["kind"], m["rtol"], m["atol"],
                     m.value("output_step", 0.0), m.value("steps", 1.0), m.value("min_share", 1.0), {}});
    if (m.contains("exact_reference"))
      for (const auto& [batch, files] : m["exact_reference"].items())
        cases.back().exact[std::stoll(batch)] = {dir + files["input"].get<std::string>(),
                                                 dir + files["output"].get<std::string>()};
  }
  return cases;
}


// Integer and bool outputs: "" when equal element by element, else a description.
std::string compareExactly(size_t o, const runtime::Tensor& k, const runtime::Tensor& t) {
  int64_t bad = 0, first = -1;
  for (int64_t i = 0; i < k.numel(); ++i) {
    if (runtime::elementAsDouble(k, i) == runtime::elementAsDouble(t, i)) continue;
    if (first < 0) first = i;
    ++bad;
  }
  if (first < 0) return "";
  std::ostringstream s;
  s << "output " << o << " (" << runtime::dtypeName(k.dtype()) << "): " << bad << "/" << k.numel()
    << " elements differ, first at " << first << " (kiln " << runtime::elementAsDouble(k, first) << " vs torch "
    << runtime::elementAsDouble(t, first) << ")";
  return s.str();
}

// Returns "" when every element satisfies |k - t| <= atol + rtol |t| (float outputs) or is equal
// (integer and bool outputs), else a description.
std::string compareOutputs(const std::vector<runtime::Tensor>& kiln, const std::vector<runtime::Tensor>& torch,
                           double rtol, double atol) {
  if (kiln.size() != torch.size())
    return "output count " + std::to_string(kiln.size()) + " vs " + std::to_string(torch.size());
  for (size_t o = 0; o < kiln.size(); ++o) {
    const auto& k = kiln[o];
    const auto& t = torch[o];
    if (k.shape() != t.shape())
      return "output " + std::to_string(o) + " shape " + runtime::shapeString(k.shape()) + " vs " +
             runtime::shapeString(t.shape());
    if (k.dtype() != t.dtype())
      return "output " + std::to_string(o) + " dtype " + std::string(runtime::dtypeName(k.dtype())) + " vs " +
             std::string(runtime::dtypeName(t.dtype()));
    if (k.dtype() != runtime::DType::Float32 && k.dtype() != runtime::DType::Float64) {
      if (std::string diff = compareExactly(o, k, t); !diff.empty()) return diff;
      continue;
    }
    int64_t bad = 0, first = -1;
    double worst = 0;
    for (int64_t i = 0; i < k.numel(); ++i) {
      double kv = runtime::elementAsDouble(k, i), tv = runtime::elementAsDouble(t, i);
      double err = std::fabs(kv - tv);
      if (!(err <= atol + rtol * std::fabs(tv))) {
        if (first < 0) first = i;
        ++bad;
      }
      if (!(err <= worst)) worst = err;
    }
    if (bad)
      return "output " + std::to_string(o) + ": " + std::to_string(bad) + "/" + std::to_string(k.numel()) +
             " elements differ, max |diff| " + std::to_string(worst) + ", first at " + std::to_string(first) +
             " (kiln " + std::to_string(runtime::elementAsDouble(k, first)) + " vs torch " +
             std::to_string(runtime::elementAsDouble(t, first)) + ")";
  }
  return "";
}

// Quantized outputs: "" when at least `needed` of the elements lie within `steps` output
// quantization steps of the reference's (the share is printed either way), else a description.
std::string compareQuantized(const std::vector<runtime::Tensor>& kiln, const std::vector<runtime::Tensor>& torch,
                             const Case& c, const char* against, double steps, double needed) {
  if (kiln.size() != torch.size() || kiln.empty()) return "output count differs";
  const auto& k = kiln[0];
  const auto& t = torch[0];
  if (k.shape() != t.shape() || k.dtype() != runtime::DType::Float32) return "output shape or dtype differs";
  int64_t within = 0;
  double worst = 0;
  for (int64_t i = 0; i < k.numel(); ++i) {
    double off = std::fabs(k.data<float>()[i] - t.data<float>()[i]) / c.step;
    within += off <= steps + 1e-3;
    worst = std::max(worst, off);
  }
  double share = static_cast<double>(within) / static_cast<double>(k.numel());
  std::printf("  %s: %.4f of %lld outputs within %g step of %s (max %.2f steps)\n", c.name.c_str(), share,
              static_cast<long long>(k.numel()), steps, against, worst);
  if (share >= needed) return "";
  return "only " + std::to_string(share) + " of the outputs within " + std::to_string(steps) +
         " quantization steps (needs " + std::to_string(needed) + "), max " + std::to_string(worst) + " steps";
}

// Op modules run at every opt level. Networks (slow to compile) run at O0 and O3, plus O1, O2
// and O4 at their own batch.
std::vector<int> optLevelsFor(const Case& c, int64_t batch) {
  // Quantized networks: the plain int8 kernels (O0) and the packed ones (O3).
  if (c.kind == "quantized_network") return batch == 0 ? std::vector<int>{0, 3} : std::vector<int>{3};
  if (c.kind != "network" || batch == 0) return {0, 1, 2, 3, 4};
  return {0, 3};
}

// O4 lets code generation reassociate, contract and approximate (fast math): results may move
// by a few ulps more than at O3, so its tolerances are 10× the manifest's.
constexpr double kFastMathToleranceFactor = 10.0;

void checkModel(const Case& c, int64_t batch) {
  app::OpenOptions open;
  open.batch = batch;
  // Inputs follow the file's declared specs with dimension 0 set to the batch.
  app::Model specs;
  specs.inputs = importers::readInputSpecs(c.file);
  ASSERT_FALSE(specs.inputs.empty()) << c.file << " declares no inputs";
  if (batch > 0) {
    for (auto& in : specs.inputs) in.shape[0] = batch;
  }
  std::vector<runtime::Tensor> inputs = app::randomInputs(specs, 42);
  // Quantized networks and ops: the inputs the exact reference was computed on.
  const bool quantized = c.kind.rfind("quantized_", 0) == 0;
  const int64_t exactBatch = batch ? batch : specs.inputs[0].shape[0];
  std::vector<runtime::Tensor> exact;
  if (quantized) {
    ASSERT_TRUE(c.exact.count(exactBatch)) << c.name << " has no exact_reference at batch " << exactBatch
                                           << ": re-export the sample models";
  }
  if (auto it = c.exact.find(exactBatch); it != c.exact.end()) {
    inputs = {runtime::readNpy(it->second.first)};
    exact = {runtime::readNpy(it->second.second)};
  }

  std::vector<runtime::Tensor> reference;
  try {
    profiler::TorchModel torchModel(c.file, profiler::TorchMode::Eager, 2);
    reference = torchModel.run(inputs);
  } catch (const Error& e) {
    // Modules with hard-coded shapes (view(8, 256), two-input matmul) have no other batch.
    if (batch > 0) GTEST_SKIP() << "libtorch itself cannot run this module at batch " << batch << ": " << e.what();
    FAIL() << e.what();
  }
  auto model = app::openModel(c.file, open);
  ASSERT_TRUE(model.ok()) << model.error().message;
  // Where libtorch's int8 kernels are exact (VNNI), they must agree with the exact reference too:
  // that checks the reference itself. Elsewhere libtorch's share is only printed.
  if (!exact.empty()) {
    std::string torchDiff = compareQuantized(reference, exact, c, "the exact reference (libtorch)", c.steps, c.minShare);
    if (testing_support::int8ReferenceIsExact()) {
      EXPECT_EQ(torchDiff, "") << "libtorch vs the exact reference";
    }
  }

  for (int opt : optLevelsFor(c, batch)) {
    app::BuildOptions options;
    options.optLevel = opt;
    options.threads = 2;
    options.verifyPasses = true;  // the graph and loop-IR verifiers after every pass
    // KILN_TEST_SKIP_PASSES=alter-layout,fuse-ops: bisect a failure down to a pass.
    if (const char* skip = std::getenv("KILN_TEST_SKIP_PASSES")) {
      std::stringstream names(skip);
      for (std::string name; std::getline(names, name, ',');) options.skipPasses.push_back(name);
    }
    auto compiled = app::build(model.value(), options);
    ASSERT_TRUE(compiled.ok()) << "-O" << opt << ": " << compiled.error().message;
    auto outputs = app::run(*compiled.value(), inputs);
    ASSERT_TRUE(outputs.ok()) << "-O" << opt << ": " << outputs.error().message;
    double factor = opt >= 4 ? kFastMathToleranceFactor : 1.0;
    std::string diff = quantized
                           ? compareQuantized(outputs.value(), exact, c, "the exact reference", c.steps, c.minShare)
                           : compareOutputs(outputs.value(), reference, c.rtol * factor, c.atol * factor);
    EXPECT_EQ(diff, "") << c.name << " at -O" << opt << " batch " << (batch ? batch : 1);
  }
}

class ModelTest : public testing::Test {
 public:
  ModelTest(Case c, int64_t batch) : m_case(std::move(c)), m_batch(batch) {}
  void TestBody() override { checkModel(m_case, m_batch); }

 private:
  Case m_case;
  int64_t m_batch;
};

// Dynamic batch: a model built once at batch 1 runs batch-3 inputs through a build specialized
// on first use and cached; every sample's output equals its batch-1 run, and PyTorch's.
TEST(DynamicBatch, OneBuildRunsOtherBatchSizes) {
  std::string path = std::string(KILN_MODELS_DIR) + "/ops/residual_block.pt";
  auto model = app::openModel(path);
  ASSERT_TRUE(model) << model.error().message;
  auto compiled = app::build(model.value(), app::BuildOptions{});
  ASSERT_TRUE(compiled) << compiled.error().message;
  auto open3 = app::OpenOptions{};
  open3.batch = 3;
  auto model3 = app::openModel(path, open3);
  ASSERT_TRUE(model3);
  std::vector<runtime::Tensor> x3 = app::randomInputs(*model3.value(), 5);
  auto out3 = app::run(*compiled.value(), x3);
  ASSERT_TRUE(out3) << out3.error().message;
  EXPECT_EQ(compiled.value()->batchVariants.size(), 1u);
  ASSERT_EQ(out3.value()[0].shape()[0], 3);
  profiler::TorchModel torch(path, profiler::TorchMode::Eager, 1);
  std::vector<runtime::Tensor> expected = torch.run(x3);
  int64_t per = x3[0].numel() / 3, outPer = out3.value()[0].numel() / 3;
  for (int64_t b = 0; b < 3; ++b) {
    runtime::Tensor one = runtime::Tensor::zeros(runtime::DType::Float32, model.value()->inputs[0].shape);
    std::copy_n(x3[0].data<float>() + b * per, per, one.data<float>());
    auto out1 = app::run(*compiled.value(), {one});
    ASSERT_TRUE(out1);
    for (int64_t i = 0; i < outPer; ++i) {
      EXPECT_NEAR(out3.value()[0].data<float>()[b * outPer + i], out1.value()[0].data<float>()[i], 1e-5);
      EXPECT_NEAR(out3.value()[0].data<float>()[b * outPer + i], expected[0].data<float>()[b * outPer + i], 1e-4);
    }
  }
  // A second call reuses the specialized build; an input that differs elsewhere is an error.
  ASSERT_TRUE(app::run(*compiled.value(), x3));
  EXPECT_EQ(compiled.value()->batchVariants.size(), 1u);
  runtime::Tensor wrong = runtime::Tensor::zeros(runtime::DType::Float32, {1, 3, 16, 16});
  auto bad = app::run(*compiled.value(), {wrong});
  EXPECT_FALSE(bad);
}

}  // namespace

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  std::vector<Case> cases = loadManifest();
  if (cases.empty()) {
    std::fprintf(stderr, "no manifest in %s: export the sample models first\n", KILN_MODELS_DIR);
    return 1;
  }
  for (const Case& c : cases) {
    bool network = c.kind == "network" || c.kind == "quantized_network";
    std::string suite = c.kind == "quantized_network" ? "QuantizedNetworks" : network ? "Networks" : "Ops";
    // The model's own batch (1), and a larger one.
    for (int64_t batch : {int64_t{0}, network ? int64_t{2} : int64_t{3}}) {
      std::string name = c.name + (batch ? "_batch" + std::to_string(batch) : "_batch1");
      testing::RegisterTest(suite.c_str(), name.c_str(), nullptr, nullptr, __FILE__, __LINE__,
                            [c, batch]() -> testing::Test* { return new ModelTest(c, batch); });
    }
  }
  return RUN_ALL_TESTS();
}

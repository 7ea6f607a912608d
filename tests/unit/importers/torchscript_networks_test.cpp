// The five torchvision sample networks import with the expected operator mix and output types,
// also with an overridden batch size.
#include <gtest/gtest.h>

#include <chrono>
#include <iostream>

#include "importer_test_util.h"
#include "torch_reference.h"

namespace kiln::importers {
namespace {

using Histogram = std::map<std::string, int>;

struct NetworkCase {
  std::string name;
  Histogram ops;  // the exact Kiln operator histogram
};

/// gtest prints a parameter with this (test names listed by ctest stay short and stable).
void PrintTo(const NetworkCase& c, std::ostream* os) { *os << c.name << ".pt"; }

std::vector<NetworkCase> networkCases() {
  return {
      {"resnet18",
       {{"conv2d", 20}, {"batch_norm", 20}, {"relu", 17}, {"add", 8}, {"max_pool2d", 1},
        {"adaptive_avg_pool2d", 1}, {"reshape", 1}, {"dense", 1}}},
      {"resnet50",
       {{"conv2d", 53}, {"batch_norm", 53}, {"relu", 49}, {"add", 16}, {"max_pool2d", 1},
        {"adaptive_avg_pool2d", 1}, {"reshape", 1}, {"dense", 1}}},
      {"mobilenet_v2",
       {{"conv2d", 52}, {"batch_norm", 52}, {"clamp", 35}, {"add", 10}, {"adaptive_avg_pool2d", 1},
        {"reshape", 1}, {"dense", 1}}},
      {"mobilenet_v3_small",
       {{"conv2d", 52}, {"batch_norm", 34}, {"hardswish", 19}, {"relu", 14}, {"hardsigmoid", 9}, {"mul", 9},
        {"add", 6}, {"adaptive_avg_pool2d", 10}, {"reshape", 1}, {"dense", 2}}},
      {"efficientnet_b0",
       {{"conv2d", 81}, {"batch_norm", 49}, {"silu", 49}, {"sigmoid", 16}, {"mul", 16}, {"add", 9},
        {"adaptive_avg_pool2d", 17}, {"reshape", 1}, {"dense", 1}}},
  };
}

class NetworkTest : public ::testing::TestWithParam<NetworkCase> {};

TEST_P(NetworkTest, ImportsWithExpectedOperators) {
  const NetworkCase& c = GetParam();
  ImportedModel model = importTorchScript(testing::modelPath(c.name + ".pt"));
  EXPECT_EQ(testing::opHistogram(model.graph), c.ops);

  ASSERT_EQ(model.inputs.size(), 1u);
  EXPECT_EQ(model.inputs[0].name, "x");
  EXPECT_EQ(model.inputs[0].shape, (runtime::Shape{1, 3, 224, 224}));
  ASSERT_EQ(model.graph.inputs().size(), 1u);
  EXPECT_EQ(model.graph.type(model.graph.inputs()[0]).str(), "f32[1,3,224,224]");
  ASSERT_EQ(model.graph.outputs().size(), 1u);
  EXPECT_EQ(model.graph.type(model.graph.outputs()[0]).str(), "f32[1,1000]");
  EXPECT_FALSE(model.description.empty());

  for (const core::Node& node : model.graph.nodes()) {
    EXPECT_FALSE(node.location.empty()) << node.op << " has no source location";
  }
  // Weights are bound constants; batch norm is kept for Kiln's own folding pass.
  size_t constants = 0;
  for (const core::Value& v : model.graph.values()) constants += v.isConstant() ? 1 : 0;
  EXPECT_GT(constants, static_cast<size_t>(c.ops.at("conv2d")));
}

TEST_P(NetworkTest, MatchesLibtorchNumerically) {
  const NetworkCase& c = GetParam();
  std::string path = testing::modelPath(c.name + ".pt");
  testing::expectMatchesLibtorch(path, importTorchScript(path), 1e-3, 1e-3);
}

TEST_P(NetworkTest, OverriddenBatch) {
  const NetworkCase& c = GetParam();
  ImportOptions options;
  options.inputs = {InputSpec{"x", runtime::DType::Float32, {2, 3, 224, 224}}};
  ImportedModel model = importTorchScript(testing::modelPath(c.name + ".pt"), options);
  ASSERT_EQ(model.graph.outputs().size(), 1u);
  EXPECT_EQ(model.graph.type(model.graph.outputs()[0]).str(), "f32[2,1000]");
  EXPECT_EQ(testing::opHistogram(model.graph), c.ops);
}

INSTANTIATE_TEST_SUITE_P(Torchvision, NetworkTest, ::testing::ValuesIn(networkCases()),
                         [](const ::testing::TestParamInfo<NetworkCase>& info) { return info.param.name; });

// The transformer encoders (issue 8): embeddings become take, attention matmul/softmax, the fused
// nn.TransformerEncoderLayer kernel its decomposition; both match libtorch through the reference.
TEST(Transformers, BertEncoderImportsAndMatchesLibtorch) {
  std::string path = testing::modelPath("bert_encoder.pt");
  ImportedModel model = importTorchScript(path);
  Histogram ops = testing::opHistogram(model.graph);
  EXPECT_EQ(ops["take"], 3);
  EXPECT_EQ(ops["softmax"], 4);
  EXPECT_EQ(ops["matmul"], 8);
  EXPECT_EQ(ops["dense"], 4 * 6 + 1);
  ASSERT_EQ(model.graph.outputs().size(), 2u);
  EXPECT_EQ(model.graph.type(model.graph.outputs()[0]).str(), "f32[1,128,256]");
  torch::manual_seed(3);
  at::Tensor ids = torch::randint(0, 1000, {1, 128}, torch::kLong);
  testing::expectMatchesLibtorchOn(path, model, {ids}, 1e-3, 1e-3);
}

TEST(Transformers, TransformerEncoderFastPathImportsAndMatchesLibtorch) {
  std::string path = testing::modelPath("transformer_encoder.pt");
  ImportedModel model = importTorchScript(path);
  Histogram ops = testing::opHistogram(model.graph);
  EXPECT_EQ(ops["softmax"], 4);
  EXPECT_EQ(ops["gelu"], 4);
  EXPECT_EQ(ops["dense"], 4 * 6);
  testing::expectMatchesLibtorch(path, model, 1e-3, 1e-3);
}

TEST(Networks, ManifestNetworksAreCovered) {
  std::set<std::string> covered{"bert_encoder", "transformer_encoder"};
  for (const NetworkCase& c : networkCases()) covered.insert(c.name);
  for (const auto& entry : testing::readManifest("network")) EXPECT_TRUE(covered.count(entry.name)) << entry.name;
}

TEST(Networks, ResNet50ImportTime) {
  auto start = std::chrono::steady_clock::now();
  ImportedModel model = importTorchScript(testing::modelPath("resnet50.pt"));
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << "resnet50 import: " << seconds << " s, " << model.graph.nodes().size() << " nodes\n";
  ::testing::Test::RecordProperty("resnet50_import_ms", static_cast<int>(seconds * 1000));
  EXPECT_LT(seconds, 10.0);  // ~1 s expected; generous for a loaded machine
}

}  // namespace
}  // namespace kiln::importers

// Every op module in the sample manifest imports, and its Kiln output types match what libtorch
// computes when it runs the module; a few small modules are checked against golden IR text.
#include <gtest/gtest.h>

#include "core/ir/parser.h"
#include "core/ir/printer.h"
#include "importer_test_util.h"
#include "torch_reference.h"
#include "runtime/error.h"

namespace kiln::importers {
namespace {

using testing::ManifestEntry;

class OpModuleTest : public ::testing::TestWithParam<ManifestEntry> {};

TEST_P(OpModuleTest, ImportsWithLibtorchOutputShapes) {
  const ManifestEntry& entry = GetParam();
  std::string path = testing::modelPath(entry.file);
  ImportedModel model = importTorchScript(path);

  ASSERT_EQ(model.inputs.size(), entry.inputs.size());
  for (size_t i = 0; i < entry.inputs.size(); ++i) EXPECT_EQ(model.inputs[i].shape, entry.inputs[i].shape);
  EXPECT_GT(model.graph.nodes().size(), 0u);

  std::vector<at::Tensor> expected = testing::runWithLibtorch(path, entry.inputs);
  const auto& outputs = model.graph.outputs();
  ASSERT_EQ(outputs.size(), expected.size());
  for (size_t i = 0; i < outputs.size(); ++i) {
    const core::TensorType& type = model.graph.type(outputs[i]);
    EXPECT_EQ(type.shape, runtime::Shape(expected[i].sizes().begin(), expected[i].sizes().end()))
        << "output " << i << " is " << type.str();
    EXPECT_EQ(testing::torchDType(type.dtype), expected[i].scalar_type()) << "output " << i << " is " << type.str();
  }
  // Each node keeps the traced module's source location.
  for (const core::Node& node : model.graph.nodes()) EXPECT_FALSE(node.location.empty()) << node.op;
  // Same values as libtorch, evaluating the Kiln graph by its documented operator semantics.
  testing::expectMatchesLibtorch(path, model, entry.rtol, entry.atol);
}

INSTANTIATE_TEST_SUITE_P(Manifest, OpModuleTest, ::testing::ValuesIn(testing::readManifest("op")),
                         [](const ::testing::TestParamInfo<ManifestEntry>& info) { return info.param.name; });

TEST(OpModules, ManifestListsTheOpModules) { EXPECT_GE(testing::readManifest("op").size(), 70u); }

core::PrintOptions structureOnly() {
  core::PrintOptions options;
  options.inlineLimit = 0;    // constants print as "elided": the golden text is about structure
  options.locations = false;  // torch's own line numbers change with the installed version
  return options;
}

TEST(OpModulesGolden, Relu) {
  ImportedModel model = importTorchScript(testing::modelPath("ops/relu.pt"));
  EXPECT_EQ(core::printGraph(model.graph, structureOnly()),
            "graph(%x: f32[1,8,16,16]) {\n"
            "  %relu = relu(%x) : f32[1,8,16,16]\n"
            "  return %relu\n"
            "}\n");
  ASSERT_EQ(model.graph.nodes().size(), 1u);
  const std::string& loc = model.graph.nodes()[0].location;
  EXPECT_EQ(loc.rfind("export_models.py:", 0), 0u) << loc;
  EXPECT_GT(std::stoi(loc.substr(loc.find(':') + 1)), 0);
}

TEST(OpModulesGolden, ConvBnRelu) {
  ImportedModel model = importTorchScript(testing::modelPath("ops/conv_bn_relu.pt"));
  EXPECT_EQ(core::printGraph(model.graph, structureOnly()),
            "graph(%x: f32[1,8,16,16]) {\n"
            "  %conv.weight = constant f32[16,8,3,3] elided\n"
            "  %input = conv2d(%x, %conv.weight) {dilation=[1,1], groups=1, padding=[1,1], stride=[1,1]} "
            ": f32[1,16,16,16]\n"
            "  %bn.weight = constant f32[16] elided\n"
            "  %bn.bias = constant f32[16] elided\n"
            "  %bn.running_mean = constant f32[16] elided\n"
            "  %bn.running_var = constant f32[16] elided\n"
            "  %input_1 = batch_norm(%input, %bn.weight, %bn.bias, %bn.running_mean, %bn.running_var) "
            "{epsilon=1.0000000000000001e-05} : f32[1,16,16,16]\n"
            "  %relu = relu(%input_1) : f32[1,16,16,16]\n"
            "  return %relu\n"
            "}\n");
}

TEST(OpModulesGolden, AddmmBecomesDenseWithTransposedWeight) {
  ImportedModel model = importTorchScript(testing::modelPath("ops/addmm.pt"));
  EXPECT_EQ(core::printGraph(model.graph, structureOnly()),
            "graph(%x: f32[4,8]) {\n"
            "  %addmm_weight = constant f32[6,8] elided\n"
            "  %b = constant f32[6] elided\n"
            "  %dense = dense(%x, %addmm_weight, %b) : f32[4,6]\n"
            "  return %dense\n"
            "}\n");
}

TEST(OpModulesGolden, ScalarOperandsAndShapeQueries) {
  ImportedModel rsub = importTorchScript(testing::modelPath("ops/rsub.pt"));
  EXPECT_EQ(core::printGraph(rsub.graph, structureOnly()),
            "graph(%x: f32[1,8,16,16]) {\n"
            "  %scalar = constant f32[] elided\n"
            "  %sub = sub(%scalar, %x) : f32[1,8,16,16]\n"
            "  return %sub\n"
            "}\n");
  ImportedModel reshape = importTorchScript(testing::modelPath("ops/reshape_infer.pt"));
  EXPECT_EQ(core::printGraph(reshape.graph, structureOnly()),
            "graph(%x: f32[1,8,16,16]) {\n"
            "  %reshape = reshape(%x) {shape=[1,2048]} : f32[1,2048]\n"
            "  return %reshape\n"
            "}\n");
}

TEST(OpModulesGolden, PrintedGraphParsesBack) {
  for (const char* f : {"ops/relu.pt", "ops/conv_bn_relu.pt", "ops/se_block.pt", "ops/clamp_min.pt"}) {
    core::Graph graph = importTorchScript(testing::modelPath(f)).graph;
    core::PrintOptions full;
    full.fullConstants = true;
    std::string text = core::printGraph(graph, full);
    EXPECT_TRUE(core::parseGraph(text) == graph) << f << "\n" << text;
  }
}

}  // namespace
}  // namespace kiln::importers

// Error paths (unreadable files, unsupported operators, input-spec mismatches) and the walker's
// handling of scripted constructs: control flow, shape arithmetic, tuples, in-place updates.
// Scripted fixtures are compiled with libtorch's Module::define and saved to a temp folder.
#include <gtest/gtest.h>

#include <filesystem>

#include "core/ir/printer.h"
#include "importer_test_util.h"
#include "importers/onnx.h"
#include "torch_reference.h"
#include "runtime/error.h"

namespace kiln::importers {
namespace {

/// The kiln::Error thrown by `fn`, failing the test when nothing (or something else) is thrown.
template <typename Fn>
Error errorOf(Fn fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "not a kiln::Error: " << e.what();
    return Error(e.what(), ErrorKind::Internal);
  }
  ADD_FAILURE() << "no error thrown";
  return Error("", ErrorKind::Internal);
}

bool oneLine(const std::string& s) { return s.find('\n') == std::string::npos; }

/// A scripted module saved to a temp file (importer_test_util.h), the spec optional.
std::string saveScripted(const std::string& name, const std::string& source, const std::string& specJson = {},
                         const std::vector<std::pair<std::string, at::Tensor>>& buffers = {}) {
  return testing::saveScriptedModule(name, source, specJson, buffers);
}

std::string spec(const std::string& shape) {
  return R"({"inputs": [{"name": "x", "shape": )" + shape + R"(, "dtype": "float32"}], "source": "test"})";
}

// --- unreadable files and unsupported operators -------------------------------------------

TEST(ImporterErrors, TruncatedFile) {
  Error e = errorOf([] { importTorchScript(testing::modelPath("bad/truncated.pt")); });
  EXPECT_EQ(e.kind(), ErrorKind::InvalidModel);
  EXPECT_NE(std::string(e.what()).find("not a TorchScript archive"), std::string::npos) << e.what();
  EXPECT_NE(std::string(e.what()).find("truncated.pt"), std::string::npos) << e.what();
  EXPECT_TRUE(oneLine(e.what())) << e.what();
}

TEST(ImporterErrors, NotAModel) {
  Error e = errorOf([] { importTorchScript(testing::modelPath("bad/not_a_model.pt")); });
  EXPECT_EQ(e.kind(), ErrorKind::InvalidModel);
  EXPECT_NE(std::string(e.what()).find("not a TorchScript archive"), std::string::npos) << e.what();
  EXPECT_TRUE(oneLine(e.what())) << e.what();
}

TEST(ImporterErrors, ReadInputSpecsOfBadFiles) {
  for (const char* f : {"bad/truncated.pt", "bad/not_a_model.pt"}) {
    Error e = errorOf([&] { readInputSpecs(testing::modelPath(f)); });
    EXPECT_EQ(e.kind(), ErrorKind::InvalidModel);
    EXPECT_NE(std::string(e.what()).find("not a TorchScript archive"), std::string::npos) << e.what();
  }
}

TEST(ImporterErrors, MissingFile) {
  Error e = errorOf([] { importTorchScript(testing::modelPath("does_not_exist.pt")); });
  EXPECT_EQ(e.kind(), ErrorKind::Io);
  EXPECT_NE(std::string(e.what()).find("does_not_exist.pt"), std::string::npos);
}

TEST(ImporterErrors, UnsupportedOperatorNamesItAndItsLocation) {
  Error e = errorOf([] { importTorchScript(testing::modelPath("bad/unsupported_op.pt")); });
  EXPECT_EQ(e.kind(), ErrorKind::Unsupported);
  std::string msg = e.what();
  EXPECT_EQ(msg.rfind("aten::grid_sampler is not supported", 0), 0u) << msg;
  EXPECT_NE(msg.find(".py:"), std::string::npos) << msg;  // e.g. (functional.py:4235)
  EXPECT_TRUE(oneLine(msg)) << msg;
}

TEST(ImporterErrors, BadPaddingAndRecurrentWeightsAreOneLine) {
  // A reflect pad as large as its axis is the model's error; an LSTM with a projection
  // (proj_size: five weights per layer) is not supported, named.
  std::string pad = saveScripted("BadReflect", "def forward(self, x):\n  return torch.pad(x, [0, 4], 'reflect')\n",
                                 spec("[1, 2, 4]"));
  Error e = errorOf([&] { importTorchScript(pad); });
  EXPECT_EQ(e.kind(), ErrorKind::InvalidModel);
  EXPECT_EQ(std::string(e.what()).rfind("aten::pad: reflect padding (0, 4) of dimension 2 must be less than its size 4", 0),
            0u)
      << e.what();
  EXPECT_TRUE(oneLine(e.what())) << e.what();
  std::string lstm = saveScripted("ProjLstm",
                                  "def forward(self, x):\n"
                                  "  z = torch.zeros(1, 2, 3)\n"
                                  "  return torch.lstm(x, [z, z], [self.a, self.b, self.c, self.d, self.p], True, 1, 0.0, "
                                  "False, False, False)[0]\n",
                                  spec("[5, 2, 4]"),
                                  {{"a", torch::randn({12, 4})}, {"b", torch::randn({12, 3})}, {"c", torch::randn({12})},
                                   {"d", torch::randn({12})}, {"p", torch::randn({3, 3})}});
  e = errorOf([&] { importTorchScript(lstm); });
  EXPECT_EQ(e.kind(), ErrorKind::Unsupported);
  EXPECT_EQ(std::string(e.what()).rfind("aten::lstm is not supported: 5 weights for 1 layers and directions", 0), 0u)
      << e.what();
  EXPECT_TRUE(oneLine(e.what())) << e.what();
}

TEST(ImporterErrors, ManifestBadEntriesMatchTheirExpectation) {
  std::ifstream in(testing::modelPath("manifest.json"));
  ASSERT_TRUE(in.good());
  nlohmann::json doc = nlohmann::json::parse(in);
  ASSERT_EQ(doc.at("bad").size(), 6u);
  for (const auto& bad : doc.at("bad")) {
    std::string file = testing::modelPath(bad.at("file"));
    Error e = errorOf([&] { isOnnxFile(file) ? importOnnx(file) : importTorchScript(file); });
    EXPECT_NE(std::string(e.what()).find(bad.at("expect").get<std::string>()), std::string::npos) << e.what();
  }
}

// --- input specs ---------------------------------------------------------------------------

TEST(ImporterInputs, ReadInputSpecsFromKilnJson) {
  std::vector<InputSpec> specs = readInputSpecs(testing::modelPath("resnet18.pt"));
  ASSERT_EQ(specs.size(), 1u);
  EXPECT_EQ(specs[0].name, "x");
  EXPECT_EQ(specs[0].dtype, runtime::DType::Float32);
  EXPECT_EQ(specs[0].shape, (runtime::Shape{1, 3, 224, 224}));
}

TEST(ImporterInputs, WrongNumberOfInputSpecs) {
  ImportOptions options;
  options.inputs = {InputSpec{"a", runtime::DType::Float32, {1, 8, 16, 16}},
                    InputSpec{"b", runtime::DType::Float32, {1, 8, 16, 16}}};
  Error e = errorOf([&] { importTorchScript(testing::modelPath("ops/relu.pt"), options); });
  EXPECT_EQ(e.kind(), ErrorKind::InvalidInput);
  EXPECT_NE(std::string(e.what()).find("takes 1 input (x) but 2 input specs were given"), std::string::npos)
      << e.what();
}

TEST(ImporterInputs, IncompatibleInputShapeIsReportedNotCrashing) {
  ImportOptions options;
  options.inputs = {InputSpec{"x", runtime::DType::Float32, {1, 5, 16, 16}}};  // conv expects 8 channels
  Error e = errorOf([&] { importTorchScript(testing::modelPath("ops/conv2d_plain.pt"), options); });
  EXPECT_EQ(e.kind(), ErrorKind::InvalidModel);
  EXPECT_EQ(std::string(e.what()).rfind("aten::_convolution: conv2d:", 0), 0u) << e.what();
}

TEST(ImporterInputs, NoShapesAnywhere) {
  std::string path = saveScripted("NoSpec", "def forward(self, x):\n  return x.relu()\n");
  EXPECT_TRUE(readInputSpecs(path).empty());
  Error e = errorOf([&] { importTorchScript(path); });
  EXPECT_EQ(e.kind(), ErrorKind::InvalidInput);
  EXPECT_NE(std::string(e.what()).find("input shapes"), std::string::npos) << e.what();

  ImportOptions options;
  options.inputs = {InputSpec{"", runtime::DType::Float32, {2, 3}}};
  ImportedModel model = importTorchScript(path, options);
  EXPECT_EQ(model.inputs[0].name, "x");
  EXPECT_EQ(model.graph.type(model.graph.outputs()[0]).str(), "f32[2,3]");
}

TEST(ImporterInputs, NonTensorArgument) {
  std::string path = saveScripted("IntArg", "def forward(self, x, n: int):\n  return x * n\n",
                                  R"({"inputs": [{"name": "x", "shape": [2], "dtype": "float32"},
                                                 {"name": "n", "shape": [], "dtype": "int64"}]})");
  Error e = errorOf([&] { importTorchScript(path); });
  EXPECT_EQ(e.kind(), ErrorKind::Unsupported);
  EXPECT_NE(std::string(e.what()).find("'n'"), std::string::npos) << e.what();
}

// --- scripted constructs -------------------------------------------------------------------

TEST(ImporterScripted, LoopOverAShapeIsUnrolled) {
  std::string path = saveScripted("Loop",
                                  "def forward(self, x):\n"
                                  "  for i in range(x.size(0)):\n"
                                  "    x = x + 1.0\n"
                                  "  return x\n",
                                  spec("[3, 4]"));
  ImportedModel model = importTorchScript(path);
  EXPECT_EQ(testing::opHistogram(model.graph), (std::map<std::string, int>{{"add", 3}}));
}

TEST(ImporterScripted, LoopOverAComputedCountBecomesALoopNode) {
  std::string path = saveScripted("ValueLoop",
                                  "def forward(self, x):\n"
                                  "  n = int(x.abs().sum())\n"
                                  "  for i in range(n):\n"
                                  "    x = x * 0.5\n"
                                  "  return x\n",
                                  spec("[3, 4]"));
  ImportedModel model = importTorchScript(path);
  auto ops = testing::opHistogram(model.graph);
  EXPECT_EQ(ops["loop"], 1);
  EXPECT_EQ(ops.count("mul"), 0u) << "the body's mul is inside the loop node";
}

TEST(ImporterScripted, ControlFlowWithDataDependentShapesIsRejectedWithAHint) {
  std::string path = saveScripted("GrowIf",
                                  "def forward(self, x):\n"
                                  "  if bool(x.sum() > 0):\n"
                                  "    return x[:, :2]\n"
                                  "  return -x\n",
                                  spec("[3, 4]"));
  Error e = errorOf([&] { importTorchScript(path); });
  EXPECT_EQ(e.kind(), ErrorKind::Unsupported);
  std::string what = e.what();
  EXPECT_EQ(what.rfind("prim::If: if: the then branch returns (f32[3,2]), the else branch (f32[3,4])", 0), 0u) << what;
  EXPECT_NE(what.find("shapes depend on the data"), std::string::npos) << what;
  EXPECT_NE(what.find(":2)"), std::string::npos) << what;  // the line of the if
  EXPECT_TRUE(oneLine(what));

  path = saveScripted("GrowLoop",
                      "def forward(self, x):\n"
                      "  for i in range(int(x.abs().sum())):\n"
                      "    x = torch.cat([x, x], 1)\n"
                      "  return x\n",
                      spec("[3, 4]"));
  e = errorOf([&] { importTorchScript(path); });
  EXPECT_EQ(e.kind(), ErrorKind::Unsupported);
  what = e.what();
  EXPECT_EQ(what.rfind("prim::Loop: loop: the body returns", 0), 0u) << what;
  EXPECT_NE(what.find("carried values keep their types"), std::string::npos) << what;
  EXPECT_TRUE(oneLine(what));
}

TEST(ImporterScripted, ShapeDependentIfIsResolvedAtImportTime) {
  std::string path = saveScripted("ShapeIf",
                                  "def forward(self, x):\n"
                                  "  if x.size(1) == 4:\n"
                                  "    y = torch.relu(x)\n"
                                  "  else:\n"
                                  "    y = torch.sigmoid(x)\n"
                                  "  return y\n",
                                  spec("[3, 4]"));
  ImportedModel model = importTorchScript(path);
  EXPECT_EQ(testing::opHistogram(model.graph), (std::map<std::string, int>{{"relu", 1}}));

  ImportOptions options;
  options.inputs = {InputSpec{"x", runtime::DType::Float32, {3, 5}}};
  EXPECT_EQ(testing::opHistogram(importTorchScript(path, options).graph),
            (std::map<std::string, int>{{"sigmoid", 1}}));
}

TEST(ImporterScripted, DataDependentIfBecomesAnIfNode) {
  std::string path = saveScripted("DataIf",
                                  "def forward(self, x):\n"
                                  "  if bool(x.sum() > 0):\n"
                                  "    return x\n"
                                  "  return -x\n",
                                  spec("[3, 4]"));
  ImportedModel model = importTorchScript(path);
  auto ops = testing::opHistogram(model.graph);
  EXPECT_EQ(ops["if"], 1);
  for (const core::Node& n : model.graph.nodes()) {
    if (n.op != "if") continue;
    ASSERT_EQ(n.regions.size(), 2u);
    EXPECT_EQ(n.location.substr(n.location.size() - 2), ":2") << n.location;
    EXPECT_EQ(testing::opHistogram(*n.regions[1]), (std::map<std::string, int>{{"neg", 1}}));
  }
}

TEST(ImporterScripted, ShapeArithmeticFeedsReshape) {
  std::string path = saveScripted("ShapeMath",
                                  "def forward(self, x):\n"
                                  "  n = int(torch.tensor(x.size(0)) * 2)\n"  // tensor → scalar folding
                                  "  c = x.shape[1] // 2\n"
                                  "  y = x.reshape(n, c, -1)\n"
                                  "  z = y.view([y.size(0), y.dim() * 2, -1])\n"
                                  "  return torch.flatten(z, 1)\n",
                                  spec("[2, 8, 3]"));
  ImportedModel model = importTorchScript(path);
  std::vector<at::Tensor> expected = testing::runWithLibtorch(path, model.inputs);
  ASSERT_EQ(expected.size(), 1u);
  EXPECT_EQ(model.graph.type(model.graph.outputs()[0]).shape,
            runtime::Shape(expected[0].sizes().begin(), expected[0].sizes().end()));
  EXPECT_EQ(model.graph.type(model.graph.outputs()[0]).str(), "f32[4,12]");
  EXPECT_EQ(testing::opHistogram(model.graph), (std::map<std::string, int>{{"reshape", 3}}));
  testing::expectMatchesLibtorch(path, model);
}

TEST(ImporterScripted, TupleOutputsAreFlattenedInOrder) {
  std::string path = saveScripted("Tuple",
                                  "def forward(self, x):\n"
                                  "  return x + 1.0, (x.transpose(0, 1), x)\n",
                                  spec("[2, 3]"));
  ImportedModel model = importTorchScript(path);
  const auto& outs = model.graph.outputs();
  ASSERT_EQ(outs.size(), 3u);
  EXPECT_EQ(model.graph.type(outs[0]).str(), "f32[2,3]");
  EXPECT_EQ(model.graph.type(outs[1]).str(), "f32[3,2]");
  EXPECT_EQ(model.graph.type(outs[2]).str(), "f32[2,3]");
  // A returned input is copied so every output is a node result.
  ASSERT_GE(model.graph.value(outs[2]).producer, 0);
  EXPECT_EQ(model.graph.node(model.graph.value(outs[2]).producer).op, "copy");
  testing::expectMatchesLibtorch(path, model);
}

TEST(ImporterScripted, TransposedConvolutionThroughConvolution) {
  std::string path = saveScripted("ConvT",
                                  "def forward(self, x):\n"
                                  "  return torch._convolution(x, self.w, None, [1, 1], [0, 0], [1, 1], True, [0, 0],"
                                  " 1, False, False, True, True)\n",
                                  spec("[1, 2, 5, 5]"), {{"w", torch::randn({2, 3, 3, 3})}});
  ImportedModel model = importTorchScript(path);
  EXPECT_EQ(testing::opHistogram(model.graph), (std::map<std::string, int>{{"conv_transpose2d", 1}}));
  testing::expectMatchesLibtorch(path, model);
}

TEST(ImporterScripted, Conv1dBecomesConv2d) {
  std::string path = saveScripted("Conv1d",
                                  "def forward(self, x):\n"
                                  "  return torch.conv1d(x, self.w, self.b, [2], [1], [1], 1)\n",
                                  spec("[1, 3, 9]"), {{"w", torch::randn({4, 3, 3})}, {"b", torch::randn({4})}});
  ImportedModel model = importTorchScript(path);
  EXPECT_EQ(model.graph.type(model.graph.outputs()[0]).str(), "f32[1,4,5]");
  EXPECT_EQ(testing::opHistogram(model.graph), (std::map<std::string, int>{{"conv2d", 1}, {"reshape", 3}}));
  testing::expectMatchesLibtorch(path, model);
}

TEST(ImporterScripted, InPlaceUpdateOfTheInputIsRejected) {
  std::string path = saveScripted("InplaceInput",
                                  "def forward(self, x):\n"
                                  "  x.relu_()\n"
                                  "  return x + 1.0\n",
                                  spec("[2, 3]"));
  Error e = errorOf([&] { importTorchScript(path); });
  EXPECT_EQ(e.kind(), ErrorKind::Unsupported);
  EXPECT_EQ(std::string(e.what()).rfind("aten::relu_ is not supported: it updates the model input", 0), 0u)
      << e.what();
}

TEST(ImporterScripted, InPlaceUpdateThroughAViewIsRejected) {
  std::string path = saveScripted("InplaceView",
                                  "def forward(self, x):\n"
                                  "  y = x * 2.0\n"
                                  "  z = y.view(-1)\n"
                                  "  z.relu_()\n"
                                  "  return y\n",
                                  spec("[2, 3]"));
  Error e = errorOf([&] { importTorchScript(path); });
  EXPECT_EQ(e.kind(), ErrorKind::Unsupported);
  EXPECT_EQ(std::string(e.what()).rfind("aten::relu_ is not supported", 0), 0u) << e.what();
}

TEST(ImporterScripted, InPlaceOnAFreshTensorIsFunctional) {
  std::string path = saveScripted("InplaceFresh",
                                  "def forward(self, x):\n"
                                  "  y = x * 2.0\n"
                                  "  y.add_(1.0)\n"
                                  "  y.relu_()\n"
                                  "  return y\n",
                                  spec("[2, 3]"));
  ImportedModel model = importTorchScript(path);
  EXPECT_EQ(testing::opHistogram(model.graph), (std::map<std::string, int>{{"add", 1}, {"mul", 1}, {"relu", 1}}));
  EXPECT_EQ(model.graph.node(model.graph.value(model.graph.outputs()[0]).producer).op, "relu");
  testing::expectMatchesLibtorch(path, model);
}

TEST(ImporterScripted, AddmmWithAlphaBetaAndComputedWeight) {
  std::string path = saveScripted("Addmm",
                                  "def forward(self, x):\n"
                                  "  return torch.addmm(self.b, x, x.t(), beta=0.5, alpha=2.0)\n",
                                  spec("[3, 4]"), {{"b", torch::randn({3})}});
  ImportedModel model = importTorchScript(path);
  EXPECT_EQ(model.graph.type(model.graph.outputs()[0]).str(), "f32[3,3]");
  EXPECT_EQ(testing::opHistogram(model.graph),
            (std::map<std::string, int>{{"add", 1}, {"matmul", 1}, {"mul", 2}, {"transpose", 1}}));
  testing::expectMatchesLibtorch(path, model);
}

TEST(ImporterScripted, IntegerTensorsKeepTheirDtype) {
  std::string path = saveScripted("Int64",
                                  "def forward(self, x):\n"
                                  "  return (x + 2) * x\n",
                                  R"({"inputs": [{"name": "x", "shape": [4], "dtype": "int64"}]})");
  ImportedModel model = importTorchScript(path);
  EXPECT_EQ(model.graph.type(model.graph.outputs()[0]).str(), "i64[4]");
  testing::expectMatchesLibtorch(path, model);
}

TEST(ImporterScripted, MixedDtypesAreCastLikePyTorch) {
  std::string path = saveScripted("Mixed",
                                  "def forward(self, x):\n"
                                  "  return x / 2\n",
                                  R"({"inputs": [{"name": "x", "shape": [4], "dtype": "int64"}]})");
  ImportedModel model = importTorchScript(path);
  EXPECT_EQ(model.graph.type(model.graph.outputs()[0]).str(), "f32[4]");
  EXPECT_EQ(testing::opHistogram(model.graph)["cast"], 1);
  testing::expectMatchesLibtorch(path, model);
}


TEST(ImporterScripted, LayerNormFromExistingOps) {
  std::string path = saveScripted("LayerNorm",
                                  "def forward(self, x):\n"
                                  "  y = torch.layer_norm(x, [4, 5], self.w, self.b, 1e-5)\n"
                                  "  return torch.layer_norm(y * 3.0 + 1.0, [5], None, None, 1e-3)\n",
                                  spec("[2, 3, 4, 5]"), {{"w", torch::randn({4, 5})}, {"b", torch::randn({4, 5})}});
  ImportedModel model = importTorchScript(path);
  EXPECT_EQ(model.graph.type(model.graph.outputs()[0]).str(), "f32[2,3,4,5]");
  testing::expectMatchesLibtorch(path, model);
}

TEST(ImporterScripted, AssortedShapeAndElementwiseOps) {
  std::string path = saveScripted("Assorted",
                                  "def forward(self, x):\n"
                                  "  a = torch.stack([x, x * 2.0], 1)\n"
                                  "  b = torch.clamp(a, max=0.5) - torch.clamp_max(a, 0.25)\n"
                                  "  c = torch.rsub(b, 2.0, alpha=3) + torch.sub(b, x.unsqueeze(1), alpha=2)\n"
                                  "  d = torch.max_pool2d(c.reshape(6, 4, 4), [2, 2], [1, 1])\n"
                                  "  e = torch.softmax(d.sum([2], keepdim=True), 0) + torch.mean(d)\n"
                                  "  return e.transpose(0, 2).contiguous(), e.squeeze(2).t(), torch.leaky_relu(x, 0.2), torch.gelu(x, approximate='tanh')\n",
                                  spec("[3, 4, 4]"));
  ImportedModel model = importTorchScript(path);
  testing::expectMatchesLibtorch(path, model);
}

TEST(ImporterScripted, BatchNormWithoutAffineParameters) {
  std::string path = saveScripted("BnNoAffine",
                                  "def forward(self, x):\n"
                                  "  return torch.batch_norm(x, None, None, self.m, self.v, False, 0.1, 1e-5, False)\n",
                                  spec("[2, 3, 4]"), {{"m", torch::randn({3})}, {"v", torch::rand({3}) + 0.5}});
  ImportedModel model = importTorchScript(path);
  EXPECT_EQ(testing::opHistogram(model.graph), (std::map<std::string, int>{{"batch_norm", 1}}));
  testing::expectMatchesLibtorch(path, model);
}

TEST(ImporterScripted, TrainingModeBatchNormIsRejected) {
  std::string path = saveScripted("BnTrain",
                                  "def forward(self, x):\n"
                                  "  return torch.batch_norm(x, None, None, self.m, self.v, True, 0.1, 1e-5, False)\n",
                                  spec("[2, 3, 4]"), {{"m", torch::zeros({3})}, {"v", torch::ones({3})}});
  Error e = errorOf([&] { importTorchScript(path); });
  EXPECT_EQ(e.kind(), ErrorKind::Unsupported);
  EXPECT_EQ(std::string(e.what()).rfind("aten::batch_norm: batch_norm in training mode", 0), 0u) << e.what();
}

}  // namespace
}  // namespace kiln::importers

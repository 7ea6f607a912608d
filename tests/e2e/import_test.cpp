// Import breadth end to end (issue 8): the import doctor's reports, the BERT encoder on random
// token ids (model_test.cpp feeds integer inputs zeros), and ONNX vs TorchScript imports of the
// same sample models (the export script's "onnx" manifest entries), both against libtorch.
// Integer and bool outputs are compared exactly.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <unistd.h>
#include <ostream>
#include <random>
#include <set>

#include <nlohmann/json.hpp>

#include "app/doctor.h"
#include "app/facade.h"
#include "runtime/npy.h"
#include "runtime/tensor_values.h"
#include "importers/torchscript.h"
#include "profiler/torch_baseline.h"
#include "tests/e2e/expect_matches.h"

using namespace kiln;

namespace {

std::string modelPath(const std::string& relative) { return std::string(KILN_MODELS_DIR) + "/" + relative; }


/// The largest |a - b| (NaN when either holds a NaN; infinity when shapes or dtypes differ).
/// Integer and bool outputs differ by at least 1 where they differ, so any tolerance below 1
/// compares them exactly.
double maxAbsDiff(const runtime::Tensor& a, const runtime::Tensor& b) {
  EXPECT_EQ(a.shape(), b.shape());
  EXPECT_EQ(runtime::dtypeName(a.dtype()), runtime::dtypeName(b.dtype()));
  if (a.shape() != b.shape() || a.dtype() != b.dtype()) return INFINITY;
  double worst = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    double d = std::fabs(runtime::elementAsDouble(a, i) - runtime::elementAsDouble(b, i));
    if (std::isnan(d)) return d;
    worst = std::max(worst, d);
  }
  return worst;
}

std::vector<runtime::Tensor> runKiln(const std::string& path, const std::vector<runtime::Tensor>& inputs, int opt) {
  auto model = app::openModel(path);
  EXPECT_TRUE(model.ok()) << model.error().message;
  if (!model.ok()) return {};
  app::BuildOptions options;
  options.optLevel = opt;
  options.threads = 2;
  auto compiled = app::build(model.value(), options);
  EXPECT_TRUE(compiled.ok()) << compiled.error().message;
  if (!compiled.ok()) return {};
  auto outputs = app::run(*compiled.value(), inputs);
  EXPECT_TRUE(outputs.ok()) << outputs.error().message;
  return outputs.ok() ? outputs.value() : std::vector<runtime::Tensor>{};
}

// --- the import doctor -----------------------------------------------------------------------

TEST(Doctor, NamesTheUnsupportedOperatorAndPricesTheRest) {
  auto report = app::diagnoseModel(modelPath("bad/unsupported_op.pt"));
  ASSERT_TRUE(report.ok()) << report.error().message;
  const app::DoctorReport& r = report.value();
  EXPECT_FALSE(r.importable);
  EXPECT_EQ(r.unsupported, 1);
  EXPECT_TRUE(r.complete);  // libtorch's value stood in for the grid sampler's output
  auto it = std::find_if(r.ops.begin(), r.ops.end(), [](const app::DoctorOp& op) { return op.status == "unsupported"; });
  ASSERT_NE(it, r.ops.end());
  EXPECT_EQ(it->kind, "aten::grid_sampler");
  EXPECT_NE(it->message.find("aten::grid_sampler is not supported"), std::string::npos) << it->message;
  EXPECT_FALSE(it->location.empty());
  // The convolution after it is still imported and priced.
  EXPECT_EQ(r.supported, 2);
  EXPECT_GT(r.compiledShare, 0.5);
  EXPECT_LT(r.compiledShare, 1.0);
  EXPECT_NE(app::doctorText(r).find("aten::grid_sampler is not supported"), std::string::npos);
  nlohmann::json j = nlohmann::json::parse(app::doctorJson(r));
  EXPECT_EQ(j["summary"]["unsupported"], 1);
  EXPECT_EQ(j["kinds"][0]["kind"], "aten::grid_sampler");
  EXPECT_FALSE(j["hints"].empty());
}

TEST(Doctor, SupportedModelCompilesEverythingAndFoldsShapeArithmetic) {
  auto report = app::diagnoseModel(modelPath("ops/attention_causal.pt"));
  ASSERT_TRUE(report.ok()) << report.error().message;
  const app::DoctorReport& r = report.value();
  EXPECT_TRUE(r.importable);
  EXPECT_EQ(r.unsupported, 0);
  EXPECT_GT(r.supported, 5);
  EXPECT_DOUBLE_EQ(r.compiledShare, 1.0);
  EXPECT_GT(r.totalFlops, 0);
  bool matmul = std::any_of(r.ops.begin(), r.ops.end(), [](const app::DoctorOp& op) {
    return std::find(op.kilnOps.begin(), op.kilnOps.end(), "matmul") != op.kilnOps.end();
  });
  EXPECT_TRUE(matmul);
}

TEST(Doctor, OnnxReportNamesTheFailingNode) {
  auto report = app::diagnoseModel(modelPath("bad/unsupported_op.onnx"));
  ASSERT_TRUE(report.ok()) << report.error().message;
  EXPECT_EQ(report->format, "onnx");
  EXPECT_EQ(report->unsupported, 1);
  ASSERT_FALSE(report->ops.empty());
  EXPECT_EQ(report->ops.back().kind, "onnx::CumSum");
  auto supported = app::diagnoseModel(modelPath("onnx/bert_encoder.onnx"));
  ASSERT_TRUE(supported.ok()) << supported.error().message;
  EXPECT_TRUE(supported->importable);
  EXPECT_GT(supported->totalFlops, 1e8);
}

TEST(Doctor, ListsSupportedOperatorsFromTheRegistries) {
  app::SupportedOps ops = app::supportedOps();
  auto has = [&](const std::string& kind) {
    return std::find(ops.torchScriptOps.begin(), ops.torchScriptOps.end(), kind) != ops.torchScriptOps.end();
  };
  EXPECT_TRUE(has("aten::embedding"));
  EXPECT_TRUE(has("aten::_native_multi_head_attention"));
  EXPECT_TRUE(has("aten::conv_transpose2d"));
  EXPECT_GT(ops.torchScriptOps.size(), 100u);
  EXPECT_NE(app::supportedOpsMarkdown(ops).find("`take`"), std::string::npos);
}

// --- BERT on random token ids ----------------------------------------------------------------

TEST(Transformers, BertEncoderOnRandomIdsMatchesLibtorch) {
  std::string path = modelPath("bert_encoder.pt");
  runtime::Tensor ids = runtime::Tensor::zeros(runtime::DType::Int64, {1, 128});
  std::mt19937_64 rng(7);
  for (int64_t i = 0; i < ids.numel(); ++i) ids.data<int64_t>()[i] = static_cast<int64_t>(rng() % 1000);
  ids.data<int64_t>()[5] = 0;  // a padding token: exercises the attention mask
  profiler::TorchModel torchModel(path, profiler::TorchMode::Eager, 2);
  std::vector<runtime::Tensor> expected = torchModel.run({ids});
  for (int opt : {0, 3}) {
    std::vector<runtime::Tensor> actual = runKiln(path, {ids}, opt);
    ASSERT_EQ(actual.size(), expected.size());
    for (size_t o = 0; o < actual.size(); ++o) EXPECT_LT(maxAbsDiff(actual[o], expected[o]), 1e-3) << "-O" << opt;
  }
}

// The inputs compare, profile and tune time with: token ids span the embedding table (all zeros
// would be all padding, and the output check would see one id).
TEST(Transformers, RandomInputsSpanTheEmbeddingTable) {
  auto model = app::openModel(modelPath("bert_encoder.pt"));
  ASSERT_TRUE(model.ok()) << model.error().message;
  std::vector<runtime::Tensor> inputs = app::randomInputs(*model.value(), 3);
  ASSERT_EQ(inputs.size(), 1u);
  ASSERT_EQ(inputs[0].dtype(), runtime::DType::Int64);
  std::set<int64_t> ids(inputs[0].data<int64_t>(), inputs[0].data<int64_t>() + inputs[0].numel());
  EXPECT_GT(ids.size(), 50u);
  EXPECT_GE(*ids.begin(), 0);
  EXPECT_LT(*ids.rbegin(), 1000);  // the vocabulary; the position table (128 rows) is indexed by a constant
  profiler::TorchModel torchModel(modelPath("bert_encoder.pt"), profiler::TorchMode::Eager, 2);
  std::vector<runtime::Tensor> expected = torchModel.run(inputs);
  std::vector<runtime::Tensor> actual = runKiln(modelPath("bert_encoder.pt"), inputs, 3);
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t o = 0; o < actual.size(); ++o) EXPECT_LT(maxAbsDiff(actual[o], expected[o]), 1e-3);
}

// --- ONNX vs TorchScript ----------------------------------------------------------------------

struct OnnxCase {
  std::string name, torchscript, onnx;
  std::vector<importers::InputSpec> inputs;
};

/// gtest prints a parameter with this (failure lines and test listings name the case).
void PrintTo(const OnnxCase& c, std::ostream* os) { *os << c.onnx; }

std::vector<OnnxCase> onnxCases() {
  std::ifstream in(modelPath("manifest.json"));
  if (!in) return {};
  std::vector<OnnxCase> cases;
  nlohmann::json doc = nlohmann::json::parse(in);
  for (const auto& m : doc["models"]) {
    if (!m.contains("onnx")) continue;
    std::string pt = modelPath(m["file"].get<std::string>());
    cases.push_back({m["name"], pt, modelPath(m["onnx"].get<std::string>()), importers::readInputSpecs(pt)});
  }
  return cases;
}

/// Random inputs: floats N(0, 1), integer ids uniform in [0, 1000).
std::vector<runtime::Tensor> randomInputs(const std::vector<importers::InputSpec>& specs) {
  std::mt19937_64 rng(11);
  std::normal_distribution<float> normal;
  std::vector<runtime::Tensor> out;
  for (const importers::InputSpec& spec : specs) {
    runtime::Tensor t = runtime::Tensor::zeros(spec.dtype, spec.shape);
    for (int64_t i = 0; i < t.numel(); ++i) {
      if (spec.dtype == runtime::DType::Int64) t.data<int64_t>()[i] = static_cast<int64_t>(rng() % 1000);
      else if (spec.dtype == runtime::DType::Float32) t.data<float>()[i] = normal(rng);
    }
    out.push_back(std::move(t));
  }
  return out;
}

class OnnxVsTorchScript : public ::testing::TestWithParam<OnnxCase> {};

TEST_P(OnnxVsTorchScript, SameOutputs) {
  const OnnxCase& c = GetParam();
  auto onnx = app::openModel(c.onnx);
  ASSERT_TRUE(onnx.ok()) << onnx.error().message;
  ASSERT_EQ(onnx.value()->inputs.size(), c.inputs.size());
  for (size_t i = 0; i < c.inputs.size(); ++i) EXPECT_EQ(onnx.value()->inputs[i].shape, c.inputs[i].shape);
  std::vector<runtime::Tensor> inputs = randomInputs(c.inputs);
  std::vector<runtime::Tensor> fromTorchScript = runKiln(c.torchscript, inputs, 3);
  std::vector<runtime::Tensor> fromOnnx = runKiln(c.onnx, inputs, 3);
  profiler::TorchModel torchModel(c.torchscript, profiler::TorchMode::Eager, 2);
  std::vector<runtime::Tensor> reference = torchModel.run(inputs);
  ASSERT_EQ(fromOnnx.size(), fromTorchScript.size());
  for (size_t o = 0; o < fromOnnx.size(); ++o) {
    EXPECT_LT(maxAbsDiff(fromOnnx[o], fromTorchScript[o]), 1e-3) << "output " << o;
    EXPECT_LT(maxAbsDiff(fromOnnx[o], reference[o]), 1e-3) << "output " << o << " vs libtorch";
  }
}

INSTANTIATE_TEST_SUITE_P(Manifest, OnnxVsTorchScript, ::testing::ValuesIn(onnxCases()),
                         [](const ::testing::TestParamInfo<OnnxCase>& info) { return info.param.name; });

// The ctest entries e2e_onnx_cnns, e2e_onnx_transformers and e2e_onnx_ops select their cases by
// name and run this guard too: without it, a manifest that lost its ONNX versions would run zero
// cases there and pass.
TEST(OnnxManifest, ListsTheOnnxVersionsOfTheSampleModels) {
  std::vector<OnnxCase> cases = onnxCases();
  EXPECT_GE(cases.size(), 5u);
  for (const char* name : {"resnet18", "mobilenet_v2", "bert_encoder", "transformer_encoder", "compare_mask"}) {
    auto it = std::find_if(cases.begin(), cases.end(), [&](const OnnxCase& c) { return c.name == name; });
    ASSERT_TRUE(it != cases.end()) << name << " has no ONNX version in " << modelPath("manifest.json");
    EXPECT_TRUE(std::filesystem::is_regular_file(it->onnx)) << it->onnx;
    EXPECT_FALSE(it->inputs.empty()) << it->torchscript;
  }
}

TEST(Onnx, UnsupportedOperatorIsNamedWithItsNode) {
  auto model = app::openModel(modelPath("bad/unsupported_op.onnx"));
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.error().kind, ErrorKind::Unsupported);
  EXPECT_NE(model.error().message.find("onnx::CumSum is not supported (node"), std::string::npos)
      << model.error().message;
}

}  // namespace

// --- models saved by today's PyTorch --------------------------------------------------------
// resources/models/export_today.py, run by Kiln's Python environment: a default torch.jit.trace
// archive (today's layout, with traced_inputs.pkl and no kiln.json, so the shapes are given here
// as a user would) and the dynamo exporter's ONNX file (opset 20, weights as external data), both
// against today's torch's own outputs.

namespace {

struct TodayModel {
  std::string name, pt, onnx;
  std::vector<importers::InputSpec> specs;
  std::vector<std::string> inputs, outputs;
};

std::vector<TodayModel> todayModels() {
  std::ifstream in(modelPath("today/manifest.json"));
  EXPECT_TRUE(in.good()) << "no " << modelPath("today/manifest.json") << " (the build exports it)";
  if (!in) return {};
  nlohmann::json manifest = nlohmann::json::parse(in);
  std::vector<TodayModel> models;
  for (const auto& m : manifest.at("models")) {
    TodayModel t{m.at("name"), modelPath("today/" + m.at("pt").get<std::string>()),
                 modelPath("today/" + m.at("onnx").get<std::string>()), {}, {}, {}};
    for (const auto& s : m.at("input_specs")) {
      std::optional<runtime::DType> dtype = runtime::parseDType(s.value("dtype", "f32"));
      EXPECT_TRUE(dtype) << s;
      t.specs.push_back({s.at("name"), dtype.value_or(runtime::DType::Float32), s.at("shape").get<runtime::Shape>()});
    }
    for (const auto& p : m.at("inputs")) t.inputs.push_back(modelPath("today/" + p.get<std::string>()));
    for (const auto& p : m.at("outputs")) t.outputs.push_back(modelPath("today/" + p.get<std::string>()));
    models.push_back(std::move(t));
  }
  return models;
}

}  // namespace

TEST(TodayExporters, TracedArchivesAndDynamoOnnxMatchTodaysTorch) {
  std::vector<TodayModel> models = todayModels();
  ASSERT_GE(models.size(), 4u);  // ResNet-18, MobileNetV2, a two-input network, bert_encoder (int64 ids)
  for (const TodayModel& m : models) {
    SCOPED_TRACE(m.name);
    std::vector<runtime::Tensor> inputs, expected;
    for (const auto& p : m.inputs) inputs.push_back(runtime::readNpy(p));
    for (const auto& p : m.outputs) expected.push_back(runtime::readNpy(p));
    app::OpenOptions open;
    open.inputs = m.specs;
    testing_support::expectBuildMatches(m.pt, open, inputs, expected);
    testing_support::expectBuildMatches(m.onnx, {}, inputs, expected);
  }
}

TEST(TodayExporters, ExternalDataOutsideTheModelsFolderIsRefused) {
  // The dynamo exporter's file, its external-data location rewritten to climb out of the folder.
  const std::string dir = (std::filesystem::temp_directory_path() / ("kiln_today_" + std::to_string(::getpid()))).string();
  std::filesystem::create_directories(dir);
  std::ifstream in(modelPath("today/two_input_net.onnx"), std::ios::binary);
  ASSERT_TRUE(in.good());
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string from = "two_input_net.onnx.data", to = "../../etc/passwd.onnx.d";
  ASSERT_EQ(from.size(), to.size());
  size_t at = bytes.find(from);
  ASSERT_NE(at, std::string::npos);
  for (; at != std::string::npos; at = bytes.find(from, at)) bytes.replace(at, from.size(), to);
  const std::string path = dir + "/escaping.onnx";
  std::ofstream(path, std::ios::binary) << bytes;
  auto model = app::openModel(path);
  ASSERT_FALSE(model.ok());
  EXPECT_NE(model.error().message.find("outside the model's folder"), std::string::npos) << model.error().message;
  // Without its .data file beside it, the model names the missing file.
  std::filesystem::copy_file(modelPath("today/two_input_net.onnx"), dir + "/alone.onnx");
  model = app::openModel(dir + "/alone.onnx");
  ASSERT_FALSE(model.ok());
  EXPECT_NE(model.error().message.find("cannot be read"), std::string::npos) << model.error().message;
  std::filesystem::remove_all(dir);
}

// The comparison's output check and its JSON: max |diff| over tensors of every dtype (a NaN
// anywhere shows as NaN, integer and bool outputs are compared exactly), and how a row that was
// not checked, failed or NaN is written. Then today's engines measured for real on tiny models,
// each in its worker process (Engines.*): every row agrees with pytorch-eager, carries its
// versions and thread settings, and a backend that cannot run is a row with its reason.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <limits>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "app/facade.h"

namespace kiln {
namespace {

using runtime::DType;
using runtime::Tensor;

Tensor floats(std::vector<float> values) {
  Tensor t = Tensor::zeros(DType::Float32, {static_cast<int64_t>(values.size())});
  std::copy(values.begin(), values.end(), t.data<float>());
  return t;
}

template <typename T>
Tensor ints(DType dtype, std::vector<T> values) {
  Tensor t = Tensor::zeros(dtype, {static_cast<int64_t>(values.size())});
  std::copy(values.begin(), values.end(), t.data<T>());
  return t;
}

TEST(MaxAbsDiff, ANanAnywhereShowsAsNan) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(std::isnan(app::maxAbsDiff({floats({nan, nan})}, {floats({nan, nan})})));  // all NaN: not 0
  EXPECT_TRUE(std::isnan(app::maxAbsDiff({floats({1, 2, 3})}, {floats({1, nan, 3})})));
  EXPECT_TRUE(std::isnan(app::maxAbsDiff({floats({1, nan, 3})}, {floats({1, 2, 3})})));
  // A NaN in a later output is not hidden by a large difference in an earlier one.
  EXPECT_TRUE(std::isnan(app::maxAbsDiff({floats({0}), floats({nan})}, {floats({100}), floats({1})})));
  EXPECT_DOUBLE_EQ(app::maxAbsDiff({floats({1, 2, 3})}, {floats({1, 2.5f, 2})}), 1.0);
}

TEST(MaxAbsDiff, IntegerAndBoolOutputsAreComparedExactly) {
  EXPECT_EQ(app::maxAbsDiff({ints<int64_t>(DType::Int64, {4, 2, 9})}, {ints<int64_t>(DType::Int64, {4, 2, 9})}), 0);
  EXPECT_EQ(app::maxAbsDiff({ints<int64_t>(DType::Int64, {4, 2, 9})}, {ints<int64_t>(DType::Int64, {4, 3, 9})}), 1);
  // Large indices differ by one: exact, not lost to float rounding.
  int64_t big = (int64_t{1} << 40) + 1;
  EXPECT_EQ(app::maxAbsDiff({ints<int64_t>(DType::Int64, {big})}, {ints<int64_t>(DType::Int64, {big - 1})}), 1);
  EXPECT_EQ(app::maxAbsDiff({ints<bool>(DType::Bool, {true, false})}, {ints<bool>(DType::Bool, {true, false})}), 0);
  EXPECT_EQ(app::maxAbsDiff({ints<bool>(DType::Bool, {true, false})}, {ints<bool>(DType::Bool, {true, true})}), 1);
  EXPECT_EQ(app::maxAbsDiff({ints<int32_t>(DType::Int32, {-7})}, {ints<int32_t>(DType::Int32, {7})}), 14);
  // Outputs that differ in count, shape or dtype cannot be compared: infinity.
  EXPECT_TRUE(std::isinf(app::maxAbsDiff({ints<int32_t>(DType::Int32, {1})}, {floats({1})})));
  EXPECT_TRUE(std::isinf(app::maxAbsDiff({floats({1})}, {floats({1, 2})})));
  EXPECT_TRUE(std::isinf(app::maxAbsDiff({floats({1})}, {})));
}

TEST(CompareJson, NanUncheckedAndFailedRowsAreWrittenAsSuch) {
  app::CompareResult r;
  app::BackendResult nanRow;
  nanRow.backend = "kiln";
  nanRow.maxAbsDiff = std::nan("");
  app::BackendResult unchecked;
  unchecked.backend = "torchscript-optimized";
  unchecked.maxAbsDiff = -1;
  app::BackendResult wrong;  // as TorchScript-optimized on mobilenet_v3_small (torch 1.13): 7.7 off
  wrong.backend = "torchscript-optimized";
  wrong.maxAbsDiff = 7.7;
  wrong.outputBound = 0.0066;
  app::BackendResult failed;
  failed.backend = "kiln-untuned";
  failed.available = false;
  failed.status = "timeout";
  failed.reason = "a run timed out after 30 s in fused_conv2d_0";
  r.backends = {nanRow, unchecked, failed, wrong};
  nlohmann::json j = nlohmann::json::parse(app::compareJson(r));
  EXPECT_EQ(j["backends"][0]["max_abs_diff_vs_eager"], "nan");
  EXPECT_TRUE(j["backends"][1]["max_abs_diff_vs_eager"].is_null());
  EXPECT_EQ(j["backends"][2]["status"], "timeout");
  EXPECT_EQ(j["backends"][2]["reason"], failed.reason);
  EXPECT_TRUE(j["backends"][2]["median_ms"].is_null());
  // Whether each row's outputs agree with eager's: null where not checked or the scale is unknown.
  EXPECT_TRUE(j["backends"][0]["outputs_agree"].is_null());
  EXPECT_TRUE(j["backends"][1]["outputs_agree"].is_null());
  EXPECT_EQ(j["backends"][3]["outputs_agree"], false);
  EXPECT_EQ(j["backends"][3]["output_bound"], 0.0066);
}

// ---- today's engines, measured ----------------------------------------------------------------

namespace fs = std::filesystem;

std::string modelPath(const std::string& rel) { return std::string(KILN_MODELS_DIR) + "/" + rel; }

fs::path scratch() {
  static const fs::path dir = [] {
    fs::path d = fs::temp_directory_path() / ("kiln-engines-test-" + std::to_string(getpid()));
    fs::remove_all(d);
    fs::create_directories(d);
    return d;
  }();
  return dir;
}

/// The ONNX exports of these tests go to a cache of their own, not the user's.
class Engines : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { setenv("XDG_CACHE_HOME", (scratch() / "cache").c_str(), 1); }
  static void TearDownTestSuite() { fs::remove_all(scratch()); }

  static app::CompareOptions quick(std::vector<std::string> backends) {
    app::CompareOptions o;
    o.backends = std::move(backends);
    o.build.threads = 2;
    o.warmup = 1;
    o.repeat = 2;
    o.minRepeatMs = 1;
    o.processes = 1;
    o.store.enabled = false;
    return o;
  }
  static const app::BackendResult& row(const app::CompareResult& r, const std::string& name) {
    for (const auto& b : r.backends)
      if (b.backend == name) return b;
    ADD_FAILURE() << "no row " << name;
    static const app::BackendResult none;
    return none;
  }
  static nlohmann::json facts(const app::BackendResult& b) {
    return b.facts.empty() ? nlohmann::json::object() : nlohmann::json::parse(b.facts);
  }
  static size_t cachedExports() {
    size_t n = 0;
    fs::path dir = scratch() / "cache" / "kiln" / "onnx";
    if (fs::exists(dir))
      for (const auto& e : fs::directory_iterator(dir)) n += e.path().extension() == ".onnx";
    return n;
  }
};

TEST_F(Engines, EveryRowOfATorchScriptFileAgreesWithEagerAndSaysWhatRanIt) {
  // A user's .pt without a torchvision architecture: today's torch runs the TorchScript file
  // itself (labelled so), ONNX Runtime and OpenVINO run its ONNX export, torch.compile has no
  // Python module to compile.
  app::CompareOptions o = quick({});
  o.store.enabled = true;
  o.store.dbPath = (scratch() / "store.db").string();
  auto result = app::compare(modelPath("ops/conv_bn_relu.pt"), o);
  ASSERT_TRUE(result) << result.error().message;
  const app::CompareResult& r = result.value();
  std::vector<std::string> names;
  for (const auto& b : r.backends) names.push_back(b.backend);
  // max-autotune only when asked for; pytorch-eager (the reference) first.
  EXPECT_EQ(names, (std::vector<std::string>{"pytorch-eager", "torch-compile", "torchscript-optimized", "onnxruntime",
                                             "openvino", "kiln", "kiln-wasm", "onnxruntime-web"}));

  const app::BackendResult& eager = row(r, "pytorch-eager");
  ASSERT_TRUE(eager.available) << eager.reason;
  EXPECT_EQ(facts(eager)["module"], "torchscript");
  EXPECT_EQ(app::backendDisplayName("pytorch-eager", eager.facts), "pytorch-eager (TorchScript)");
  EXPECT_EQ(facts(eager)["intra_op_threads"], 2);
  EXPECT_EQ(std::atoi(facts(eager)["torch_version"].get<std::string>().c_str()), 2) << eager.facts;
  EXPECT_EQ(eager.maxAbsDiff, 0);

  const app::BackendResult& compiled = row(r, "torch-compile");
  EXPECT_EQ(compiled.status, "unavailable");
  EXPECT_NE(compiled.reason.find("Python module"), std::string::npos) << compiled.reason;

  for (const char* name : {"torchscript-optimized", "onnxruntime", "openvino", "kiln"}) {
    const app::BackendResult& b = row(r, name);
    ASSERT_TRUE(b.available) << name << ": " << b.status << ": " << b.reason;
    EXPECT_GE(b.maxAbsDiff, 0) << name;
    EXPECT_LT(b.maxAbsDiff, 1e-4) << name;
    EXPECT_GT(b.outputBound, 0) << name;
    EXPECT_FALSE(b.outputsDiffer()) << name;
    EXPECT_EQ(b.timing.samplesMs.size(), 2u) << name;
  }
  nlohmann::json ort = facts(row(r, "onnxruntime"));
  EXPECT_EQ(ort["intra_op_threads"], 2) << ort;
  EXPECT_EQ(ort["inter_op_threads"], 1);
  EXPECT_EQ(ort["graph_optimization_level"], "ORT_ENABLE_ALL");
  EXPECT_EQ(ort["execution_mode"], "ORT_SEQUENTIAL");
  EXPECT_EQ(ort["providers"], nlohmann::json::array({"CPUExecutionProvider"}));
  EXPECT_FALSE(ort["onnxruntime_version"].get<std::string>().empty());
  nlohmann::json ov = facts(row(r, "openvino"));
  EXPECT_EQ(ov["inference_num_threads"], "2") << ov;
  EXPECT_EQ(ov["performance_hint"], "LATENCY");
  EXPECT_EQ(ov["inference_precision_hint"], "f32");
  EXPECT_FALSE(ov["openvino_version"].get<std::string>().empty());
  EXPECT_EQ(facts(row(r, "torchscript-optimized"))["libtorch_version"], r.torchVersion);

  // --json shows them per backend, and the store keeps them with each measurement.
  nlohmann::json j = nlohmann::json::parse(app::compareJson(r));
  for (const auto& b : j["backends"]) {
    if (b["backend"] == "onnxruntime") {
      EXPECT_EQ(b["facts"]["intra_op_threads"], 2) << b.dump();
    }
  }
  // The host's placement of the CPUs, probed before each round and after the last (this machine
  // has two CPUs; with one there is nothing to probe).
  if (sysconf(_SC_NPROCESSORS_ONLN) >= 2) {
    EXPECT_GE(r.coreRoundTripNs.size(), 2u);
    EXPECT_EQ(j["core_round_trip_ns"].size(), r.coreRoundTripNs.size());
    EXPECT_EQ(j["placement_changed"], r.placementChanged);
  }
  auto session = app::loadSession(o.store.dbPath, r.stored.sessionId);
  ASSERT_TRUE(session) << session.error().message;
  int withFacts = 0;
  for (const auto& m : session.value().measurements) {
    if (m.measurement.backend != "openvino") continue;
    ++withFacts;
    EXPECT_EQ(nlohmann::json::parse(m.measurement.facts)["performance_hint"], "LATENCY");
  }
  EXPECT_EQ(withFacts, 1);

  // The export is cached: both ONNX rows ran one file, and the next comparison reuses it.
  EXPECT_EQ(cachedExports(), 1u);
  EXPECT_EQ(ort["onnx"], ov["onnx"]);
  auto again = app::compare(modelPath("ops/conv_bn_relu.pt"), quick({"pytorch-eager", "onnxruntime"}));
  ASSERT_TRUE(again) << again.error().message;
  EXPECT_EQ(facts(row(again.value(), "onnxruntime"))["onnx_source"], "export (cached)");
  EXPECT_LT(row(again.value(), "onnxruntime").maxAbsDiff, 1e-4);
  EXPECT_EQ(cachedExports(), 1u);
}

TEST_F(Engines, ABackendThatCannotRunIsARowWithItsReason) {
  // Debian's python3 has torch 1.13 and neither ONNX Runtime nor OpenVINO: the Python rows say
  // so, the others are measured.
  app::CompareOptions o = quick({});
  o.python = "/usr/bin/python3";
  auto result = app::compare(modelPath("ops/conv_bn_relu.pt"), o);
  ASSERT_TRUE(result) << result.error().message;
  const app::CompareResult& r = result.value();
  for (const char* name : {"pytorch-eager", "torch-compile"}) {
    EXPECT_EQ(row(r, name).status, "unavailable") << name;
    EXPECT_NE(row(r, name).reason.find("needs torch >= 2.0"), std::string::npos) << row(r, name).reason;
  }
  for (const char* name : {"onnxruntime", "openvino"}) {
    EXPECT_EQ(row(r, name).status, "unavailable") << name;
    EXPECT_NE(row(r, name).reason.find(std::string(name) + " is not installed"), std::string::npos)
        << row(r, name).reason;
  }
  for (const char* name : {"torchscript-optimized", "kiln"}) {
    EXPECT_TRUE(row(r, name).available) << name << ": " << row(r, name).reason;
    EXPECT_LT(row(r, name).maxAbsDiff, 0) << "no reference without pytorch-eager";
  }

  // An ONNX model has no PyTorch module: the torch rows are unavailable, ONNX Runtime and
  // OpenVINO run the file itself.
  auto onnx = app::compare(modelPath("onnx/compare_mask.onnx"), quick({}));
  ASSERT_TRUE(onnx) << onnx.error().message;
  for (const char* name : {"pytorch-eager", "torch-compile", "torchscript-optimized"}) {
    EXPECT_EQ(row(onnx.value(), name).status, "unavailable") << name;
    EXPECT_NE(row(onnx.value(), name).reason.find("ONNX model has no"), std::string::npos) << row(onnx.value(), name).reason;
  }
  for (const char* name : {"onnxruntime", "openvino", "kiln"})
    EXPECT_TRUE(row(onnx.value(), name).available) << name << ": " << row(onnx.value(), name).reason;
  EXPECT_EQ(facts(row(onnx.value(), "onnxruntime"))["onnx_source"], "the model file");

  // An unknown name is bad usage, listing the names there are.
  auto bad = app::compare(modelPath("ops/conv_bn_relu.pt"), quick({"pytorch-compiled"}));
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("torchscript-optimized"), std::string::npos) << bad.error().message;
}

TEST_F(Engines, OnnxRowsRunATracedTransformerFastPath) {
  // nn.TransformerEncoderLayer traced without gradients records its fused fast path
  // (aten::_transformer_encoder_layer_fwd), which torch.onnx cannot export by itself: the worker
  // gives it its composite form (python/kiln_workers/onnx_symbolics.py). Post-norm with ReLU and
  // pre-norm with GELU, both against today's torch running the file.
  for (const char* file : {"ops/transformer_layer.pt", "ops/transformer_layer_norm_first_gelu.pt"}) {
    auto result = app::compare(modelPath(file), quick({"pytorch-eager", "onnxruntime", "openvino"}));
    ASSERT_TRUE(result) << file << ": " << result.error().message;
    for (const char* name : {"onnxruntime", "openvino"}) {
      const app::BackendResult& b = row(result.value(), name);
      ASSERT_TRUE(b.available) << file << " " << name << ": " << b.status << ": " << b.reason;
      EXPECT_GE(b.maxAbsDiff, 0) << file << " " << name;
      EXPECT_LT(b.maxAbsDiff, 1e-4) << file << " " << name;
    }
  }
}

TEST_F(Engines, SlowTorchCompileOfATorchvisionNetworkAgreesWithEager) {
  // A sample model names its torchvision architecture: today's torch rebuilds it with the file's
  // weights (eager, torch.compile) and exports it with the dynamo exporter for ONNX Runtime.
  // SqueezeNet 1.1 at 64x64, written by Debian's torch like the sample models: the smallest
  // torchvision network, so torch.compile takes ~20 s rather than a minute.
  fs::path model = scratch() / "squeezenet.pt";
  std::string script =
      "import json, torch, torchvision\n"
      "torch.manual_seed(0)\n"
      "m = torchvision.models.squeezenet1_1().eval()\n"
      "t = torch.jit.trace(m, torch.randn(1, 3, 64, 64))\n"
      "meta = {'inputs': [{'name': 'x', 'shape': [1, 3, 64, 64], 'dtype': 'float32'}],\n"
      "        'source': 'torchvision squeezenet1_1, random weights, seed 0'}\n"
      "torch.jit.save(t, '" + model.string() + "', _extra_files={'kiln.json': json.dumps(meta)})\n";
  std::string command = "/usr/bin/python3 -W ignore -c \"" + script + "\" 2>&1";
  ASSERT_EQ(std::system(command.c_str()), 0) << command;

  auto result = app::compare(model.string(), quick({"pytorch-eager", "torch-compile", "onnxruntime", "kiln"}));
  ASSERT_TRUE(result) << result.error().message;
  const app::CompareResult& r = result.value();
  for (const auto& b : r.backends) ASSERT_TRUE(b.available) << b.backend << ": " << b.status << ": " << b.reason;
  EXPECT_EQ(facts(row(r, "pytorch-eager"))["module"], "torchvision");
  EXPECT_EQ(app::backendDisplayName("pytorch-eager", row(r, "pytorch-eager").facts), "pytorch-eager");
  nlohmann::json tc = facts(row(r, "torch-compile"));
  EXPECT_EQ(tc["module"], "torchvision");
  EXPECT_EQ(tc["compile_mode"], "default");
  EXPECT_GT(tc["compile_seconds"].get<double>(), 0);
  EXPECT_EQ(facts(row(r, "onnxruntime"))["onnx_exporter"], "torch.onnx.export (dynamo)");
  for (const char* name : {"torch-compile", "onnxruntime", "kiln"}) {
    EXPECT_GE(row(r, name).maxAbsDiff, 0) << name;
    EXPECT_LT(row(r, name).maxAbsDiff, 1e-3) << name;
  }
}

}  // namespace
}  // namespace kiln

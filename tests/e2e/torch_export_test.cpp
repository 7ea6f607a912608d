// torch.export import (issue 18): `.pt2` programs written by today's torch in Kiln's Python
// environment (resources/models/export_today.py, build/models/today/) imported by Kiln's own reader
// and run, against torch's own outputs: the today models (ResNet-18, MobileNetV2, a two-input
// network), a transformer encoder, a program with a dynamic batch at batch 1 and 3. Bad archives
// (truncated, another archive or schema version, a weight past its record, not a zip) and an
// operator Kiln does not map give one line and their exit code, through the façade, the import
// doctor and the `kiln` command line.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "app/doctor.h"
#include "app/facade.h"
#include "importers/torch_export.h"
#include "runtime/npy.h"
#include "runtime/tensor_values.h"
#include "tests/e2e/expect_matches.h"
#include "tests/e2e/process.h"

using namespace kiln;

namespace {

std::string today(const std::string& relative) { return std::string(KILN_MODELS_DIR) + "/today/" + relative; }

std::string tempDir() {
  auto d = std::filesystem::temp_directory_path() / ("kiln_pt2_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(d);
  return d.string();
}

nlohmann::json manifest() {
  std::ifstream in(today("manifest.json"));
  EXPECT_TRUE(in.good()) << "no " << today("manifest.json") << " (the build exports it)";
  if (!in) return nlohmann::json::object();
  return nlohmann::json::parse(in);
}

std::vector<runtime::Tensor> readAll(const nlohmann::json& files) {
  std::vector<runtime::Tensor> out;
  for (const auto& f : files) out.push_back(runtime::readNpy(today(f.get<std::string>())));
  return out;
}

/// The façade's error for opening `path`: its kind and its one-line message, which names the file.
app::Diagnostic openError(const std::string& path, const app::OpenOptions& open = {}) {
  auto model = app::openModel(path, open);
  EXPECT_FALSE(model.ok()) << path << " opened";
  if (model.ok()) return {"", ErrorKind::Internal};
  EXPECT_EQ(model.error().message.rfind(path + ": ", 0), 0u) << model.error().message;
  EXPECT_EQ(model.error().message.find('\n'), std::string::npos) << model.error().message;
  return model.error();
}

std::string copyOf(const std::string& from, const std::string& name, std::uintmax_t keepBytes = 0) {
  std::string to = tempDir() + "/" + name;
  std::filesystem::copy_file(from, to, std::filesystem::copy_options::overwrite_existing);
  if (keepBytes) std::filesystem::resize_file(to, keepBytes);
  return to;
}

}  // namespace

// --- programs against torch's outputs --------------------------------------------------------

TEST(TorchExport, TodayModelsMatchTodaysTorch) {
  nlohmann::json m = manifest();
  ASSERT_GE(m.value("models", nlohmann::json::array()).size(), 3u);
  for (const auto& model : m.at("models")) {
    ASSERT_TRUE(model.contains("pt2")) << model.at("name");
    // The shapes come from the program itself (no --input-shapes needed, unlike a traced .pt).
    testing_support::expectBuildMatches(today(model.at("pt2")), {}, readAll(model.at("inputs")), readAll(model.at("outputs")));
  }
}

TEST(TorchExport, TwoInputNetAtEveryOptLevel) {
  for (int opt : {0, 2}) {
    testing_support::expectBuildMatches(today("two_input_net.pt2"), {}, readAll(nlohmann::json{"two_input_net.in0.npy", "two_input_net.in1.npy"}),
                  readAll(nlohmann::json{"two_input_net.out0.npy", "two_input_net.out1.npy"}), opt);
  }
}

TEST(TorchExport, TransformerEncoderMatchesTodaysTorch) {
  nlohmann::json m = manifest();
  auto programs = m.value("programs", nlohmann::json::array());
  auto it = std::find_if(programs.begin(), programs.end(), [](const auto& p) { return p.at("name") == "tiny_encoder"; });
  ASSERT_NE(it, programs.end());
  testing_support::expectBuildMatches(today(it->at("pt2")), {}, readAll(it->at("inputs")), readAll(it->at("outputs")));
}

TEST(TorchExport, AttentionUnderMasksMatchesTodaysTorch) {
  // A boolean mask that hides every key from one query (PyTorch gives it 0, a plain softmax NaN)
  // and an additive causal mask; as exported (scaled_dot_product_attention) and decomposed
  // (run_decompositions: bmm, and the safe softmax as _softmax, any and where), at -O0 and -O3.
  nlohmann::json m = manifest();
  auto programs = m.value("programs", nlohmann::json::array());
  for (const char* name : {"masked_attention", "masked_attention_decomposed"}) {
    SCOPED_TRACE(name);
    auto it = std::find_if(programs.begin(), programs.end(), [&](const auto& p) { return p.at("name") == name; });
    ASSERT_NE(it, programs.end());
    const auto targets = it->at("targets").get<std::vector<std::string>>();
    const std::string expected = std::string(name) == "masked_attention" ? "aten.scaled_dot_product_attention"
                                                                          : "aten.any";
    EXPECT_TRUE(std::any_of(targets.begin(), targets.end(), [&](const std::string& t) { return t.starts_with(expected); }))
        << "the program holds no " << expected;
    for (int opt : {0, 3})
      testing_support::expectBuildMatches(today(it->at("pt2")), {}, readAll(it->at("inputs")), readAll(it->at("outputs")), opt);
  }
}

TEST(TorchExport, DynamicBatchRunsAtBatchOneAndThree) {
  nlohmann::json m = manifest();
  auto programs = m.value("programs", nlohmann::json::array());
  auto it = std::find_if(programs.begin(), programs.end(), [](const auto& p) { return p.contains("dynamic_batch"); });
  ASSERT_NE(it, programs.end());
  const std::string path = today(it->at("pt2"));
  // Without shapes: the example batch the program was exported with.
  importers::InputSignature sig = importers::readTorchExportSignature(path);
  ASSERT_EQ(sig.names, (std::vector<std::string>{"image", "extra"}));
  ASSERT_EQ(sig.specs.size(), 2u);
  EXPECT_EQ(sig.specs[0].shape, (runtime::Shape{2, 3, 32, 32}));
  EXPECT_EQ(sig.specs[1].shape, (runtime::Shape{2, 8}));
  const auto& cases = it->at("dynamic_batch").at("cases");
  ASSERT_EQ(cases.size(), 2u);
  for (const auto& c : cases) {
    int64_t batch = c.at("batch").get<int64_t>();
    SCOPED_TRACE("batch " + std::to_string(batch));
    std::vector<runtime::Tensor> inputs = readAll(c.at("inputs")), expected = readAll(c.at("outputs"));
    app::OpenOptions byBatch;
    byBatch.batch = batch;  // --batch N
    testing_support::expectBuildMatches(path, byBatch, inputs, expected);
    app::OpenOptions byShapes;  // --input-shapes "extra:[N,8],image:[N,3,32,32]" (by name, any order)
    byShapes.inputs = {{"extra", runtime::DType::Float32, {batch, 8}}, {"image", runtime::DType::Float32, {batch, 3, 32, 32}}};
    testing_support::expectBuildMatches(path, byShapes, inputs, expected);
  }
}

TEST(TorchExport, ShapesTheProgramDoesNotAllowAreRefused) {
  nlohmann::json m = manifest();
  auto programs = m.value("programs", nlohmann::json::array());
  auto it = std::find_if(programs.begin(), programs.end(), [](const auto& p) { return p.contains("dynamic_batch"); });
  ASSERT_NE(it, programs.end());
  const std::string dynamic = today(it->at("pt2"));
  int64_t max = it->at("dynamic_batch").at("max").get<int64_t>();
  app::OpenOptions tooLarge;
  tooLarge.batch = max + 1;
  app::Diagnostic e = openError(dynamic, tooLarge);
  EXPECT_EQ(e.kind, ErrorKind::InvalidInput);
  EXPECT_NE(e.message.find("the export's range"), std::string::npos) << e.message;
  // Both inputs share the symbolic batch: different sizes are refused.
  app::OpenOptions mismatched;
  mismatched.inputs = {{"image", runtime::DType::Float32, {2, 3, 32, 32}}, {"extra", runtime::DType::Float32, {3, 8}}};
  e = openError(dynamic, mismatched);
  EXPECT_EQ(e.kind, ErrorKind::InvalidInput);
  EXPECT_NE(e.message.find("symbolic size"), std::string::npos) << e.message;
  // A static export's sizes are fixed.
  app::OpenOptions batch3;
  batch3.batch = 3;
  e = openError(today("two_input_net.pt2"), batch3);
  EXPECT_EQ(e.kind, ErrorKind::InvalidInput);
  EXPECT_NE(e.message.find("is static (2)"), std::string::npos) << e.message;
  // The program's dtypes too.
  app::OpenOptions ints;
  ints.inputs = {{"image", runtime::DType::Int64, {2, 3, 32, 32}}, {"extra", runtime::DType::Float32, {2, 8}}};
  e = openError(today("two_input_net.pt2"), ints);
  EXPECT_EQ(e.kind, ErrorKind::InvalidInput);
  EXPECT_NE(e.message.find("input 'image' is f32 in the exported program, got i64"), std::string::npos)
      << e.message;
}

// --- bad archives and unmapped operators -----------------------------------------------------

TEST(TorchExport, TruncatedArchiveIsOneLine) {
  const std::string source = today("two_input_net.pt2");
  auto size = std::filesystem::file_size(source);
  for (std::uintmax_t keep : {size / 2, size - 10, std::uintmax_t{100}}) {
    SCOPED_TRACE("kept " + std::to_string(keep) + " of " + std::to_string(size) + " bytes");
    app::Diagnostic e = openError(copyOf(source, "truncated.pt2", keep));
    EXPECT_EQ(e.kind, ErrorKind::InvalidModel);
    EXPECT_NE(e.message.find("truncated or corrupt zip"), std::string::npos) << e.message;
  }
}

TEST(TorchExport, EditedArchivesAreRefusedWithTheirReason) {
  nlohmann::json bad = manifest().value("bad_programs", nlohmann::json::object());
  ASSERT_TRUE(bad.contains("version") && bad.contains("schema") && bad.contains("weights"));
  app::Diagnostic e = openError(today(bad.at("version")));
  EXPECT_EQ(e.kind, ErrorKind::InvalidModel);
  EXPECT_NE(e.message.find("PT2 archive version '1' is not supported"), std::string::npos) << e.message;
  e = openError(today(bad.at("schema")));
  EXPECT_EQ(e.kind, ErrorKind::InvalidModel);
  EXPECT_NE(e.message.find("schema version 99."), std::string::npos) << e.message;
  e = openError(today(bad.at("weights")));
  EXPECT_EQ(e.kind, ErrorKind::InvalidModel);
  EXPECT_NE(e.message.find("reaches past its record"), std::string::npos) << e.message;
}

TEST(TorchExport, OtherFilesNamedPt2AreRefused) {
  app::Diagnostic e = openError(copyOf(today("two_input_net.pt"), "traced.pt2"));
  EXPECT_EQ(e.kind, ErrorKind::InvalidModel);
  EXPECT_NE(e.message.find("a TorchScript archive"), std::string::npos) << e.message;
  const std::string text = tempDir() + "/text.pt2";
  std::ofstream(text) << "not a model\n";
  e = openError(text);
  EXPECT_EQ(e.kind, ErrorKind::InvalidModel);
  EXPECT_NE(e.message.find("not a zip file"), std::string::npos) << e.message;
  e = openError(tempDir() + "/missing.pt2");
  EXPECT_EQ(e.kind, ErrorKind::Io);
}

TEST(TorchExport, UnmappedOperatorIsNamedAndListedByTheDoctor) {
  const std::string path = today(manifest().value("bad_programs", nlohmann::json::object()).value("unmapped", ""));
  app::Diagnostic e = openError(path);
  EXPECT_EQ(e.kind, ErrorKind::Unsupported);
  EXPECT_NE(e.message.find("aten::cumsum is not supported"), std::string::npos) << e.message;
  auto report = app::diagnoseModel(path);
  ASSERT_TRUE(report.ok()) << report.error().message;
  EXPECT_EQ(report.value().format, "torch.export");
  EXPECT_FALSE(report.value().importable);
  bool conv = false, cumsum = false;
  for (const app::DoctorOp& op : report.value().ops) {
    if (op.kind == "aten::conv2d") conv = op.status == "supported";
    if (op.kind == "aten::cumsum") cumsum = op.status == "unsupported";
  }
  EXPECT_TRUE(conv) << app::doctorText(report.value(), true);
  EXPECT_TRUE(cumsum) << app::doctorText(report.value(), true);
}

TEST(TorchExport, DoctorReportsAnImportableProgram) {
  auto report = app::diagnoseModel(today("resnet18.pt2"));
  ASSERT_TRUE(report.ok()) << report.error().message;
  EXPECT_TRUE(report.value().importable) << app::doctorText(report.value());
  EXPECT_EQ(report.value().unsupported, 0);
  EXPECT_GT(report.value().supported, 20);
}

// --- the command line ------------------------------------------------------------------------

namespace {

kiln::testing_support::Outcome runKiln(const std::string& args) {
  return kiln::testing_support::runProcess(std::string(KILN_BINARY) + " " + args, tempDir() + "/stderr.txt");
}

void expectSameArrays(const std::string& gotPath, const std::string& wantPath) {
  runtime::Tensor got = runtime::readNpy(gotPath), want = runtime::readNpy(wantPath);
  ASSERT_EQ(got.shape(), want.shape());
  double worst = 0, scale = 0;
  for (int64_t k = 0; k < want.numel(); ++k) {
    scale = std::max(scale, std::fabs(runtime::elementAsDouble(want, k)));
    worst = std::max(worst, std::fabs(runtime::elementAsDouble(got, k) - runtime::elementAsDouble(want, k)));
  }
  EXPECT_LE(worst, 1e-4 * std::max(1.0, scale)) << gotPath;
}

}  // namespace

TEST(TorchExportCli, RunAndCompileAProgram) {
  const std::string dir = tempDir();
  const std::string ins = " --input " + today("two_input_net.in0.npy") + " --input " + today("two_input_net.in1.npy");
  auto o = runKiln("run " + today("two_input_net.pt2") + ins + " --output " + dir + "/a0.npy --output " + dir + "/a1.npy");
  ASSERT_EQ(o.exitCode, 0) << o.err;
  expectSameArrays(dir + "/a0.npy", today("two_input_net.out0.npy"));
  expectSameArrays(dir + "/a1.npy", today("two_input_net.out1.npy"));
  o = runKiln("compile " + today("two_input_net.pt2") + " -o " + dir + "/module");
  ASSERT_EQ(o.exitCode, 0) << o.err;
  o = runKiln("run " + dir + "/module" + ins + " --output " + dir + "/b0.npy --output " + dir + "/b1.npy");
  ASSERT_EQ(o.exitCode, 0) << o.err;
  expectSameArrays(dir + "/b0.npy", today("two_input_net.out0.npy"));
  expectSameArrays(dir + "/b1.npy", today("two_input_net.out1.npy"));
}

TEST(TorchExportCli, BadProgramsGiveOneLineAndTheirExitCode) {
  const std::string truncated = copyOf(today("two_input_net.pt2"), "cli_truncated.pt2", 4096);
  auto o = runKiln("ir " + truncated + " --stage graph");
  EXPECT_FALSE(o.signaled);
  EXPECT_EQ(o.exitCode, static_cast<int>(ErrorKind::InvalidModel)) << o.err;
  EXPECT_EQ(o.err.rfind("error: " + truncated + ": ", 0), 0u) << o.err;
  EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << o.err;
  const std::string unmapped = today("unmapped_op.pt2");
  o = runKiln("ir " + unmapped + " --stage graph");
  EXPECT_EQ(o.exitCode, static_cast<int>(ErrorKind::Unsupported)) << o.err;
  EXPECT_NE(o.err.find("aten::cumsum is not supported"), std::string::npos) << o.err;
  EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << o.err;
  o = runKiln("doctor " + unmapped);
  EXPECT_FALSE(o.signaled);
  EXPECT_NE(o.out.find("aten::cumsum"), std::string::npos) << o.out << o.err;
}

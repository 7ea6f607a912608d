// The TorchScript importer's fuzz findings of tests/fuzz/README.md ("Findings") by their outcome,
// beyond the regression runner's no-crash check. Mainly archives whose source maps
// (code/**.debug_pkl, which libtorch unpickles lazily when a node's source location is asked for)
// are corrupt: such a map costs the Python source locations only, the model imports as it does
// with its map and its nodes point at the archive's serialized code; the intact sample models keep
// their locations. Then corrupt storages and pickles: one-line InvalidModel errors.
#include <caffe2/serialize/inline_container.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "core/ir/printer.h"
#include "importers/torchscript.h"
#include "runtime/error.h"

namespace kiln::importers {
namespace {

namespace fs = std::filesystem;

std::string modelPath(const std::string& relative) { return std::string(KILN_MODELS_DIR) + "/" + relative; }

std::string regressionPath(const std::string& name) {
  return std::string(KILN_SOURCE_DIR) + "/tests/fuzz/regressions/torchscript/" + name;
}

/// A copy of `model` (in a scratch folder) with every code/**.debug_pkl record's bytes replaced by
/// `corrupt(original bytes)`.
std::string withSourceMaps(const std::string& model, const std::function<std::string(const std::string&)>& corrupt) {
  fs::path dir = fs::temp_directory_path() / ("kiln_source_map_" + std::to_string(getpid()));
  fs::create_directories(dir);
  std::string out = (dir / fs::path(model).filename()).string();
  caffe2::serialize::PyTorchStreamReader reader(model);
  caffe2::serialize::PyTorchStreamWriter writer(out);
  writer.setMinVersion(reader.version());
  int changed = 0;
  for (const std::string& name : reader.getAllRecords()) {
    if (name == "version" || name == ".data/version") continue;  // the writer writes its own
    auto [data, size] = reader.getRecord(name);
    std::string bytes(static_cast<const char*>(data.get()), size);
    if (name.size() > 10 && name.compare(name.size() - 10, 10, ".debug_pkl") == 0) {
      std::string corrupted = corrupt(bytes);
      changed += corrupted != bytes;
      bytes = corrupted;
    }
    writer.writeRecord(name, bytes.data(), bytes.size());
  }
  writer.writeEndOfFile();
  EXPECT_GT(changed, 0) << model << ": no source map changed";
  return out;
}

core::PrintOptions withoutLocations() {
  core::PrintOptions options;
  options.fullConstants = true;
  options.locations = false;
  return options;
}

/// REDUCE applied to an integer (libtorch calls whatever its table of globals holds there).
std::string reduceOnNonCallable(const std::string&) { return std::string("\x80\x02K\x00)R.", 7); }

/// The first text index of a source (an int list: EMPTY_LIST, MARK, BININT1 ...) made larger than
/// the string table; maps without one stay as they are.
std::string textIndexOutOfRange(const std::string& bytes) {
  std::string out = bytes;
  if (size_t at = out.find("](K"); at != std::string::npos) out[at + 3] = static_cast<char>(0xF0);
  return out;
}

TEST(TorchScriptSourceMap, IntactModelsKeepTheirLocations) {
  ImportedModel model = importTorchScript(modelPath("ops/conv2d_plain.pt"));
  ASSERT_FALSE(model.graph.nodes().empty());
  for (const core::Node& node : model.graph.nodes())
    EXPECT_EQ(node.location.rfind("conv.py:", 0), 0u) << node.op << ": " << node.location;  // torch's Conv2d
}

/// Whether a location names the archive's serialized code (code/__torch__/**.py) rather than the
/// model's Python source: what a node gets when its file's source map is not used.
bool serializedCode(const std::string& location) { return location.rfind("__torch__", 0) == 0 || location.rfind("___torch_mangle_", 0) == 0; }

std::vector<std::string> sampleModels(bool networks) {
  std::vector<std::string> paths;
  for (const auto& entry : fs::directory_iterator(networks ? modelPath("") : modelPath("ops")))
    if (entry.path().extension() == ".pt") paths.push_back(entry.path().string());
  std::sort(paths.begin(), paths.end());
  return paths;
}

/// Every sample model's source maps pass the importer's check: its nodes name the Python source.
void expectPythonLocations(const std::vector<std::string>& paths) {
  ASSERT_FALSE(paths.empty());
  for (const std::string& path : paths) {
    ImportedModel model;
    try {
      model = importTorchScript(path);
    } catch (const Error& e) {
      if (e.kind() == ErrorKind::Unsupported) continue;  // a Kiln gap, not this test's subject
      throw;
    }
    size_t located = 0;
    for (const core::Node& node : model.graph.nodes()) {
      EXPECT_FALSE(serializedCode(node.location)) << path << ": " << node.op << " at " << node.location;
      located += node.location.find(".py:") != std::string::npos;
    }
    EXPECT_GT(located, 0u) << path;
  }
}

TEST(TorchScriptSourceMap, SampleOpModelsKeepTheirLocations) { expectPythonLocations(sampleModels(false)); }

TEST(TorchScriptSourceMap, SampleNetworksKeepTheirLocations) { expectPythonLocations(sampleModels(true)); }

TEST(TorchScriptSourceMap, CorruptMapCostsOnlyTheLocations) {
  const std::string original = modelPath("ops/conv2d_plain.pt");
  ImportedModel expected = importTorchScript(original);
  for (auto corrupt : {reduceOnNonCallable, textIndexOutOfRange}) {
    ImportedModel model = importTorchScript(withSourceMaps(original, corrupt));
    // The same graph and weights; the locations name the archive's serialized code
    // (code/__torch__/...py), not the Python source.
    EXPECT_EQ(core::printGraph(model.graph, withoutLocations()), core::printGraph(expected.graph, withoutLocations()));
    for (const core::Node& node : model.graph.nodes()) {
      EXPECT_TRUE(serializedCode(node.location)) << node.op << ": " << node.location;
    }
  }
}

TEST(TorchScriptSourceMap, UnsupportedOpErrorWithoutTheMap) {
  // With its map the error names the Python line (tests/e2e bad-input matrix); without, still one
  // line naming the operator.
  try {
    importTorchScript(modelPath("bad/unsupported_op.pt"));
    ADD_FAILURE() << "imported";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Unsupported);
    EXPECT_NE(std::string(e.what()).find(".py:"), std::string::npos) << e.what();
  }
  try {
    importTorchScript(withSourceMaps(modelPath("bad/unsupported_op.pt"), textIndexOutOfRange));
    ADD_FAILURE() << "imported";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Unsupported);
    EXPECT_EQ(std::string(e.what()).rfind("aten::grid_sampler is not supported (__torch__.py:", 0), 0u) << e.what();
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
  }
}

TEST(TorchScriptSourceMap, FuzzerFindings) {
  // A quantized depthwise convolution whose map indexes past its string table: imports.
  ImportedModel model = importTorchScript(regressionPath("debug_pkl_text_index_out_of_range.pt"));
  EXPECT_FALSE(model.graph.nodes().empty());
  // The same defect in an archive whose code also fails to parse (the parser's error message asks
  // the map for context): the parse error.
  try {
    importTorchScript(regressionPath("debug_pkl_text_index_out_of_range_and_bad_code.pt"));
    ADD_FAILURE() << "imported";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::InvalidModel);
    EXPECT_NE(std::string(e.what()).find("cannot load TorchScript: "), std::string::npos) << e.what();
  }
}

TEST(TorchScriptFuzzFindings, CorruptWeightsAndPicklesAreRejected) {
  // The other findings of the same run (README "Findings"): one-line InvalidModel errors naming
  // what is corrupt, before libtorch reads it.
  auto errorOf = [](const std::string& name) -> std::string {
    try {
      importTorchScript(regressionPath(name));
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::InvalidModel) << e.what();
      EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
      return e.what();
    }
    ADD_FAILURE() << name << " imported";
    return {};
  };
  // Storage records shorter than the element count data.pkl gives them (libtorch copies that many).
  for (const char* name : {"weight_storage_record_empty.pt", "storage_record_shorter_than_numel.pt",
                           "storage_record_shorter_than_numel_conv.pt"}) {
    std::string storage = errorOf(name);
    EXPECT_NE(storage.find(": not a TorchScript archive (corrupt data.pkl: storage '"), std::string::npos) << storage;
    EXPECT_NE(storage.find(" bytes, its record holds "), std::string::npos) << storage;
  }
  std::string pickle = errorOf("data_pkl_build_without_operands.pt");
  EXPECT_NE(pickle.find("corrupt data.pkl: opcode 'b' at byte 24 has too few values on the stack"), std::string::npos)
      << pickle;
}

}  // namespace
}  // namespace kiln::importers

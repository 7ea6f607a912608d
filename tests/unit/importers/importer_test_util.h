// Helpers shared by the TorchScript importer tests: the sample-model manifest, op histograms and
// libtorch as the reference for output shapes.
#pragma once

#include <gtest/gtest.h>
#include <torch/script.h>

#include <fstream>
#include <ostream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/ir/graph.h"
#include "importers/torchscript.h"

namespace kiln::importers::testing {

inline std::string modelPath(const std::string& relative) { return std::string(KILN_MODELS_DIR) + "/" + relative; }

struct ManifestEntry {
  std::string name;
  std::string file;
  std::string kind;  // "network" or "op"
  std::vector<InputSpec> inputs;
  double rtol = 1e-4, atol = 1e-4;
};

/// gtest prints a parameter with this (test names listed by ctest stay short and stable).
inline void PrintTo(const ManifestEntry& e, std::ostream* os) { *os << e.file; }

inline std::vector<ManifestEntry> readManifest(const std::string& kind) {
  std::ifstream in(modelPath("manifest.json"));
  if (!in) return {};
  nlohmann::json doc = nlohmann::json::parse(in);
  std::vector<ManifestEntry> out;
  for (const auto& m : doc.at("models")) {
    if (m.at("kind") != kind) continue;
    ManifestEntry e{m.at("name"), m.at("file"), m.at("kind"), {}, m.value("rtol", 1e-4), m.value("atol", 1e-4)};
    for (const auto& i : m.at("inputs")) {
      InputSpec spec;
      spec.name = i.at("name");
      spec.shape = i.at("shape").get<std::vector<int64_t>>();
      if (i.value("dtype", std::string("float32")) == "int64") spec.dtype = runtime::DType::Int64;
      e.inputs.push_back(spec);
    }
    out.push_back(std::move(e));
  }
  return out;
}

inline std::map<std::string, int> opHistogram(const core::Graph& graph) {
  std::map<std::string, int> counts;
  for (const core::Node& n : graph.nodes()) ++counts[n.op];
  return counts;
}

inline void flattenTensors(const c10::IValue& v, std::vector<at::Tensor>& out) {
  if (v.isTensor()) {
    out.push_back(v.toTensor());
  } else if (v.isTuple()) {
    for (const auto& e : v.toTupleRef().elements()) flattenTensors(e, out);
  } else if (v.isList()) {
    for (const auto& e : v.toListRef()) flattenTensors(e, out);
  }
}

/// Saves a scripted module named `name` with `source` (its methods) and buffers to a temp file;
/// `specJson`, when given, is embedded as kiln.json. Returns the path.
inline std::string saveScriptedModule(const std::string& name, const std::string& source, const std::string& specJson,
                                      const std::vector<std::pair<std::string, at::Tensor>>& buffers = {}) {
  torch::jit::Module module("__torch__." + name);
  for (const auto& [bufferName, value] : buffers) module.register_buffer(bufferName, value);
  module.define(source);
  std::string path = ::testing::TempDir() + "kiln_importer_" + name + ".pt";
  torch::jit::ExtraFilesMap extra;
  if (!specJson.empty()) extra["kiln.json"] = specJson;
  module.save(path, extra);
  return path;
}

/// Random inputs for the given specs (fixed seed).
inline std::vector<at::Tensor> randomInputs(const std::vector<InputSpec>& inputs) {
  torch::manual_seed(0);
  std::vector<at::Tensor> out;
  for (const InputSpec& spec : inputs) {
    out.push_back(spec.dtype == runtime::DType::Int64 ? torch::randint(-5, 5, spec.shape, torch::kLong)
                                                      : torch::randn(spec.shape));
  }
  return out;
}

/// Runs the module with libtorch; the outputs flattened.
inline std::vector<at::Tensor> runWithLibtorch(const std::string& path, const std::vector<at::Tensor>& inputs) {
  torch::jit::Module module = torch::jit::load(path);
  module.eval();
  torch::NoGradGuard noGrad;
  std::vector<c10::IValue> args;
  for (const at::Tensor& t : inputs) args.emplace_back(t.clone());  // the module may update inputs in place
  std::vector<at::Tensor> out;
  flattenTensors(module.forward(args), out);
  return out;
}

inline std::vector<at::Tensor> runWithLibtorch(const std::string& path, const std::vector<InputSpec>& inputs) {
  return runWithLibtorch(path, randomInputs(inputs));
}

}  // namespace kiln::importers::testing

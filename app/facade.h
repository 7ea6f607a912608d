// Kiln's application API: the one façade that the `kiln` command line and the Workbench GUI call.
// It opens models, builds them for a target, runs them, prints each IR stage and compares with
// PyTorch. No Qt here. Exceptions stop at this layer: every call returns a Result holding either
// a value or a one-line Diagnostic with an ErrorKind that front ends map to exit codes.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "core/ir/graph.h"
#include "importers/torchscript.h"
#include "runtime/error.h"
#include "runtime/tensor.h"

namespace kiln::runtime {
class GraphExecutor;
}

namespace kiln::app {

struct Diagnostic {
  std::string message;  // "model.pt: aten::grid_sampler is not supported (model.py:42)"
  ErrorKind kind = ErrorKind::Internal;
};

template <typename T>
class Result {
 public:
  Result(T value) : m_v(std::move(value)) {}
  Result(Diagnostic d) : m_v(std::move(d)) {}
  bool ok() const { return m_v.index() == 0; }
  explicit operator bool() const { return ok(); }
  T& value() { return std::get<0>(m_v); }
  const T& value() const { return std::get<0>(m_v); }
  T* operator->() { return &value(); }
  const Diagnostic& error() const { return std::get<1>(m_v); }

 private:
  std::variant<T, Diagnostic> m_v;
};

using InputSpec = importers::InputSpec;

struct Model {
  std::string path;
  std::string name;         // file stem
  std::string description;  // from the file's metadata, if any
  std::vector<InputSpec> inputs;
  core::Graph graph;        // as imported
  double importSeconds = 0;
};

struct OpenOptions {
  std::vector<InputSpec> inputs;  // override the file's input shapes
  int64_t batch = 0;              // > 0: replace dimension 0 of every input
};

struct BuildOptions {
  std::string target = "llvm";
  int optLevel = 3;
  int threads = 0;  // 0: KILN_NUM_THREADS or all hardware threads
};

struct CompiledModel {
  std::shared_ptr<const Model> model;
  BuildOptions options;
  std::string targetString;   // canonical, e.g. "llvm -mcpu=znver3"
  core::Graph graph;          // the graph that was lowered (after passes)
  int numKernels = 0;         // distinct compiled functions
  int numCalls = 0;           // kernel calls per inference
  size_t planBytes = 0;       // intermediate memory after planning
  size_t unplannedBytes = 0;  // without storage reuse
  double compileSeconds = 0;
  std::shared_ptr<runtime::GraphExecutor> executor;
};

enum class IrStage { Graph, Optimized, Lowered, Llvm, Assembly };
std::optional<IrStage> parseIrStage(const std::string& name);

Result<std::shared_ptr<const Model>> openModel(const std::string& path, const OpenOptions& options = {});
Result<std::shared_ptr<CompiledModel>> build(std::shared_ptr<const Model> model, const BuildOptions& options);
/// Runs one inference; inputs in forward-argument order.
Result<std::vector<runtime::Tensor>> run(CompiledModel& compiled, const std::vector<runtime::Tensor>& inputs);
Result<std::string> irText(std::shared_ptr<const Model> model, IrStage stage, const BuildOptions& options);

/// Deterministic pseudo-random inputs (normal(0,1), fixed seed) matching the model's specs.
std::vector<runtime::Tensor> randomInputs(const Model& model, uint64_t seed = 0);

// ---- measuring against PyTorch --------------------------------------------------------------

struct CompareOptions {
  BuildOptions build;
  int64_t batch = 0;  // 0: the model's own batch
  int warmup = 3;
  int repeat = 15;
  double minRepeatMs = 20;
};

struct BackendResult {
  std::string backend;  // "pytorch-eager", "pytorch-compiled", "kiln"
  bool available = true;
  std::string reason;   // why not available
  double medianMs = 0, minMs = 0, maxMs = 0, meanMs = 0, stddevMs = 0;
  std::vector<double> samplesMs;
  double maxAbsDiff = 0;  // of the outputs vs PyTorch eager
  std::vector<float> preview;  // the first few values of output 0
  int top1 = -1;               // argmax of output 0's first row
};

struct CompareResult {
  std::string model;
  int64_t batch = 1;
  int threads = 1;
  std::string target;
  int optLevel = 3;
  std::string torchVersion;
  std::string blas;
  std::string cpu;
  double compileSeconds = 0;
  std::vector<BackendResult> backends;
};

Result<CompareResult> compare(const std::string& path, const CompareOptions& options);
std::string compareJson(const CompareResult& result);

std::string version();
/// The CPU's marketing name from /proc/cpuinfo.
std::string cpuModelName();

}  // namespace kiln::app

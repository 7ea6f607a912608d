// Kiln for libtorch users: kiln::torch::optimize(module) returns a module whose forward runs the
// Kiln-compiled graph and leaves what Kiln cannot compile to libtorch.
//
//   torch::jit::Module m = torch::jit::load("model.pt");
//   kiln::torch::OptimizedModule fast = kiln::torch::optimize(m, {.threads = 2});
//   at::Tensor y = fast.forward({x}).toTensor();   // compiles on the first call for x's shape
//   std::cout << fast.report().text();
//
// The module's forward graph is frozen and inlined once. On the first call with a new input
// signature (shape and dtype of every input) the importer judges each node for those shapes; the
// nodes it can compile are grouped into maximal convex subgraphs (no path between two nodes of a
// subgraph leaves it), each imported and JIT-compiled as one Kiln function; the other nodes run
// in libtorch sub-graphs. One executor runs the segments in dependency order and passes tensors
// between them. The plan is cached per signature (thread-safe); a new signature compiles again.
//
// Errors (bad usage: no forward, non-tensor arguments, wrong argument count) throw kiln::Error.
// A subgraph that Kiln fails to import or build runs in libtorch instead, with the reason in the
// report. libtorch headers: this header needs torch::jit::Module and c10::IValue.
#pragma once

#include <torch/csrc/jit/api/module.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace kiln::torch {

struct OptimizeOptions {
  std::string target = "llvm";  // LLVM-style target string (a runnable one)
  int optLevel = 3;             // 0-4, as for `kiln build`
  int threads = 0;              // Kiln's thread pool; 0: KILN_NUM_THREADS or all hardware threads
  std::string records;          // tuning records file ("" none; "store" or a .db: a session store)
  /// Compiled subgraphs with fewer aten:: operators run in libtorch (a tiny subgraph costs more
  /// in tensor hand-over than it saves).
  int minSubgraphOps = 1;
};

/// One segment of a plan, in execution order.
struct SubgraphReport {
  bool compiled = false;          // true: a Kiln function; false: a libtorch sub-graph
  std::vector<std::string> ops;   // its aten:: operators in graph order ("aten::conv2d", ...)
  std::string reason;             // libtorch: why these nodes are not compiled
  int kernels = 0;                // compiled: distinct kernels
  double compileSeconds = 0;      // compiled: import + build
  double totalMs = 0;             // measured time of this segment over all calls
  int64_t dynamicShapeRuns = 0;   // compiled: calls whose inputs had other shapes (run by libtorch)
};

/// An operator kind that ran in libtorch, with why.
struct FallbackOp {
  std::string kind;      // "aten::grid_sampler"
  int count = 0;         // nodes of this kind and reason
  std::string reason;    // the importer's message, or why the node was left out of a subgraph
};

/// One cached plan: one input signature.
struct ShapeEntryReport {
  std::string signature;   // "x:f32[1,3,224,224]"
  int64_t calls = 0;
  int totalOps = 0;        // aten:: operators executed (folded shape arithmetic excluded)
  int compiledOps = 0;     // of those, in compiled subgraphs
  double compileSeconds = 0;
  double totalMs = 0;      // measured time of all segments over all calls
  double compiledMs = 0;   // of that, in compiled subgraphs
  std::vector<SubgraphReport> subgraphs;
  std::vector<FallbackOp> fallbacks;
  double compiledOpShare() const { return totalOps ? double(compiledOps) / totalOps : 0; }
  double compiledTimeShare() const { return totalMs > 0 ? compiledMs / totalMs : 0; }
};

struct Report {
  std::vector<ShapeEntryReport> entries;  // in order of first use
  /// Human-readable: per signature, the share compiled, the subgraphs and the fallbacks.
  std::string text() const;
};

/// A handle (copies share the compiled plans) to a module optimized by Kiln.
class OptimizedModule {
 public:
  /// Runs the module's forward on `inputs` (tensors, forward-argument order); compiles a plan on
  /// the first call with their signature. Returns what the module's forward returns.
  c10::IValue forward(std::vector<c10::IValue> inputs);
  c10::IValue operator()(std::vector<c10::IValue> inputs) { return forward(std::move(inputs)); }

  Report report() const;
  /// Number of cached plans (input signatures seen).
  size_t cacheSize() const;
  const OptimizeOptions& options() const;
  /// The module it was made from (left unchanged).
  const ::torch::jit::Module& original() const;

  struct Impl;
  explicit OptimizedModule(std::shared_ptr<Impl> impl) : m_impl(std::move(impl)) {}

 private:
  std::shared_ptr<Impl> m_impl;
};

/// Prepares `module` (eval-mode freeze and inline of a copy; the module is not changed). Throws
/// kiln::Error: Usage for bad options, InvalidModel without a forward method, Unsupported when a
/// forward argument is not a tensor.
OptimizedModule optimize(const ::torch::jit::Module& module, const OptimizeOptions& options = {});

}  // namespace kiln::torch

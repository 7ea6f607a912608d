// Kiln's application API: the one façade that the `kiln` command line and the Workbench GUI call.
// It opens models, builds them for a target, runs them, prints each IR stage and compares with
// PyTorch. No Qt here. Exceptions stop at this layer: every call returns a Result holding either
// a value or a one-line Diagnostic with an ErrorKind that front ends map to exit codes.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "core/ir/graph.h"
#include "importers/torchscript.h"
#include "profiler/records.h"
#include "profiler/time_evaluator.h"
#include "runtime/error.h"
#include "runtime/tensor.h"

namespace kiln::runtime {
class GraphExecutor;
class Module;
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
  std::string path;         // the file imported (for a Python reference: the traced .pt in the cache)
  std::string name;         // file stem; for a Python reference "my_models.py:build"
  std::string source;       // what was opened: the path, or the Python reference as given
  std::string pythonRef;    // a Python reference's canonical form ("/abs/my_models.py:build"), else empty
  std::string stateDict;    // that reference's weights (torch.save of its state_dict), else empty
  std::string description;  // from the file's metadata, if any
  std::vector<InputSpec> inputs;
  core::Graph graph;        // as imported
  double importSeconds = 0;
};

struct OpenOptions {
  /// Override the file's input shapes (--input-shapes, app/input_shapes.h). Named specs are
  /// matched to the forward arguments by name, unnamed ones by position. Needed for a file that
  /// records no shapes (a module traced and saved by the user).
  std::vector<InputSpec> inputs;
  int64_t batch = 0;              // > 0: replace dimension 0 of every input
};

struct BuildOptions {
  std::string target = "llvm";
  int optLevel = 3;  // 0-4: the default pass pipeline (core/passes/pipeline.h); 4 adds fast math
  int threads = 0;  // 0: KILN_NUM_THREADS or all hardware threads
  std::optional<std::string> passes;     // a pass pipeline replacing the -O level's ("" runs none)
  std::vector<std::string> skipPasses;   // pass names not to run
  bool verifyPasses = false;             // run the graph verifier after every pass
  bool keepPassIr = false;               // optimize(): keep the graph text after each changing pass
  /// Tuning records (JSON lines, app/tune.h) whose best entry per workload picks that kernel's
  /// schedule; workloads without a record keep the heuristic. "" : none; "store" or a .db file:
  /// the records kept in that session store (the default one for "store").
  std::string records;
  /// Bounds-check every kernel load/store (core/tir/bounds_check.h; a debug mode, slower).
  bool boundsCheck = false;
  /// The largest Winograd output tile at -O3/-O4 (`--winograd`): 4 (F(4×4, 3×3), the fastest),
  /// 2 (F(2×2) where F(4×4) would run: less rounding) or 0 (direct convolutions only).
  int winograd = 4;
};

struct CompiledModel {
  std::shared_ptr<const Model> model;
  BuildOptions options;
  std::string targetString;   // canonical, e.g. "llvm -mcpu=znver3"
  core::Graph graph;          // the graph that was lowered (after passes)
  std::string pipeline;       // the pass pipeline that ran
  int numFusedFunctions = 0;  // fused groups in `graph`
  int numKernels = 0;         // distinct compiled functions
  int numCalls = 0;           // kernel calls per inference
  size_t planBytes = 0;       // intermediate memory after planning
  size_t unplannedBytes = 0;  // without storage reuse
  double compileSeconds = 0;
  std::shared_ptr<runtime::GraphExecutor> executor;
  /// The same model built for other batch sizes: run() specializes one on the first call with
  /// inputs of another batch and reuses it afterwards (dynamic batch, no rebuild by the caller).
  std::map<int64_t, std::shared_ptr<CompiledModel>> batchVariants;
};

enum class IrStage { Graph, Optimized, Lowered, Llvm, Assembly };
std::optional<IrStage> parseIrStage(const std::string& name);

/// `path` is a model file (.pt, .onnx) or a Python reference (app/model_ref.h), traced first.
Result<std::shared_ptr<const Model>> openModel(const std::string& path, const OpenOptions& options = {});

/// What a model says about its inputs without importing it: the forward arguments' names and the
/// specs the file records (kiln.json, complete tensor types, ONNX inputs). `recorded` empty with
/// names present: the shapes must be given (OpenOptions::inputs). References are traced first.
struct ModelSignature {
  std::vector<std::string> names;
  std::vector<InputSpec> recorded;
  bool needsShapes() const { return recorded.empty() && !names.empty(); }
};
Result<ModelSignature> modelSignature(const std::string& path);
Result<std::shared_ptr<CompiledModel>> build(std::shared_ptr<const Model> model, const BuildOptions& options);
/// Runs one inference; inputs in forward-argument order. Inputs whose shapes differ from the
/// compiled ones only in dimension 0, all by the same batch size, run on a build specialized for
/// that batch (made on first use and cached in compiled.batchVariants).
Result<std::vector<runtime::Tensor>> run(CompiledModel& compiled, const std::vector<runtime::Tensor>& inputs);
Result<std::string> irText(std::shared_ptr<const Model> model, IrStage stage, const BuildOptions& options);

// ---- exported modules (kiln compile) -----------------------------------------------------------

struct ExportedFile {
  std::string name;  // inside the module directory: graph.txt, params.bin, kernels.so or kernels.o
  uint64_t bytes = 0;
};

struct ExportResult {
  std::string path;          // the module directory (format: runtime/module.h)
  std::string targetString;  // canonical
  bool linked = false;       // kernels.so was written; false: a cross target's kernels.o only
  std::string linker;        // the compiler driver that linked kernels.so
  std::string note;          // why the kernels were not linked
  int numKernels = 0;
  int numCalls = 0;
  std::vector<ExportedFile> files;
  double compileSeconds = 0;
};

/// Compiles the model for options.target, exactly as build() does, and writes a module directory
/// at `outPath` that runtime/ alone can load and run (runtime::Module, runtime/c_api.h). An
/// existing directory is reused only when it is empty or holds an earlier module.
Result<ExportResult> exportModel(std::shared_ptr<const Model> model, const BuildOptions& options,
                                 const std::string& outPath);
/// What an export-only build shows instead of a run: the size of its module and, where this
/// machine can run it (wasm32 in Node, aarch64 Linux under qemu-aarch64), how far its outputs lie
/// from the host build's (JIT) on the same pseudo-random inputs.
struct CrossCheck {
  std::string targetString;
  int64_t moduleBytes = 0;   // every file of the module directory (graph, weights, kernels)
  std::string kernelsFile;   // "kernels.wasm", "kernels.so" or "kernels.o"
  int64_t kernelsBytes = 0;
  std::string runner;        // what ran it here ("node", "qemu-aarch64", "kiln runtime"); "" when nothing could
  std::string note;          // why it did not run (what to install)
  double maxAbsDiff = 0;     // over every output element, vs the host build
  double outputScale = 0;    // max |host output|: the scale the difference is read against
};
/// Exports the model for options.target into a scratch folder (or checks `moduleDir`, an export of
/// it for that target already written), measures the module and runs it where it can beside a
/// host build: wasm32 with Node (web/run_model.mjs); aarch64 Linux with the aarch64 C example
/// built with the runtime (build/aarch64/run_model, $KILN_AARCH64_RUNNER) under qemu-aarch64
/// (PATH, else found at configure time; $KILN_QEMU_AARCH64); a module of this machine in
/// process. A missing tool is a note, not an error. `cancelled` (may be empty) stops a run in
/// another process ("cancelled"). Errors: the export's, a failed run (its stderr's last line).
Result<CrossCheck> checkCrossTarget(std::shared_ptr<const Model> model, const BuildOptions& options,
                                    const std::string& moduleDir = "", const std::function<bool()>& cancelled = {});
/// True when `path` is a directory holding a module's graph.txt.
bool isModuleDirectory(const std::string& path);
/// Loads an exported module (checks version, architecture, CPU features, files). threads > 0 sets
/// the runtime's thread count.
Result<std::shared_ptr<runtime::Module>> loadModule(const std::string& path, int threads = 0);
/// Runs one inference of a loaded module; inputs in forward-argument order.
Result<std::vector<runtime::Tensor>> runModule(runtime::Module& module, const std::vector<runtime::Tensor>& inputs);

// ---- what the optimizer did (kiln ir --stats) ------------------------------------------------

struct PassRun {
  std::string name;        // "fuse-ops"
  std::string invocation;  // "fuse-ops{max-depth=64}"
  bool skipped = false;
  bool changed = false;
  double ms = 0;
  int nodesBefore = 0, nodesAfter = 0;
  std::map<std::string, int64_t> counters;  // what the pass reported ("folded" → 12)
  std::string irAfter;  // the graph after the pass, when it changed it and keepPassIr was set
};

struct FusedFunctionInfo {
  std::string name;              // "fused_conv2d_add_relu_3"
  std::string kernel;            // the kernel it runs (groups with equal workload keys share one)
  std::vector<std::string> ops;  // in order
  std::string workloadKey;
};

struct OptimizeReport {
  std::string model;
  int optLevel = 3;
  std::string pipeline;
  std::vector<PassRun> passes;
  double passMs = 0;
  int nodesBefore = 0, nodesAfter = 0;
  std::vector<FusedFunctionInfo> functions;
  int numKernels = 0;  // distinct kernels after lowering
  int numCalls = 0;    // kernel calls per inference
  core::Graph graph;   // the optimized graph
  /// The compile driver's steps (core/compile.h): graph passes, lower, each loop-IR pass.
  struct Step {
    std::string name;
    double ms = 0;
    std::string detail;
  };
  std::vector<Step> steps;
};

/// Runs the pass pipeline of the options and lowering (no code generation) and reports.
Result<OptimizeReport> optimize(std::shared_ptr<const Model> model, const BuildOptions& options);
/// The report as text: pipeline, per-pass table, fused functions with their ops.
std::string optimizeReportText(const OptimizeReport& report);
/// The registered passes (name, -O level, summary, options) and the default pipeline per -O.
std::string passListText();

/// Deterministic pseudo-random inputs (normal(0,1), fixed seed) matching the model's specs.
std::vector<runtime::Tensor> randomInputs(const Model& model, uint64_t seed = 0);

// ---- measuring against PyTorch --------------------------------------------------------------

/// Where measurements are kept (profiler/store.h): every compare, profile and sweep is stored.
struct StoreOptions {
  bool enabled = true;
  std::string dbPath;   // empty: $XDG_DATA_HOME/kiln/kiln.db (~/.local/share/kiln/kiln.db)
  int64_t session = 0;  // 0: the model's latest session; -1: a new session; > 0: that session
};

/// What a stored result was filed under (all 0 when not stored).
struct StoredIds {
  std::string dbPath;
  int64_t sessionId = 0, runId = 0, buildId = 0;
};

/// Running generated code in a child process (`kiln measure-worker`) with time limits: a kernel
/// that crashes or hangs is then a failure with a one-line reason ("kernel crashed (signal 11) in
/// fused_conv2d_relu_3", "timed out after 30 s in ...", ErrorKind::KernelFault) instead of taking
/// the caller down. The worker runs the same code as the in-process path, so results match.
struct IsolationOptions {
  bool enabled = false;
  double timeoutSeconds = 30;          // for running kernels (after compilation)
  double compileTimeoutSeconds = 600;  // for importing and compiling
  std::string workerCommand;           // the kiln program; "": the one beside this program, else PATH
  /// Polled about twice a second while a worker runs (and before one starts): true kills the
  /// worker and its process group and fails the call with "cancelled" (the workbench's Cancel).
  std::function<bool()> cancelled;
};

/// Every row compare and sweep know, in table order: pytorch-eager (today's torch, the nn.Module
/// under inference_mode; the reference for max |diff|), torch-compile (inductor, default mode),
/// torch-compile-max-autotune (only when asked for), torchscript-optimized (Debian's libtorch 1.13,
/// freeze + optimize_for_inference), onnxruntime, openvino, kiln, kiln-wasm (Kiln's wasm32 module in
/// Node, one thread) and onnxruntime-web (npm onnxruntime-web's WASM backend in Node, on the
/// onnxruntime row's ONNX file). The Python rows run in python/kiln_workers/bench_worker.py
/// (profiler/python_worker.h), the two WebAssembly rows in web/bench_worker.mjs (compare only).
const std::vector<std::string>& backendNames();
/// compare's rows when none are asked for: every name but torch-compile-max-autotune.
const std::vector<std::string>& defaultCompareBackends();

/// Every backend of a comparison runs in worker processes of its own (profiler/bench.h); their
/// repeats alternate round-robin, the idle workers' thread pools parked.
struct CompareOptions {
  BuildOptions build;
  int64_t batch = 0;  // 0: the model's own batch
  std::vector<InputSpec> inputs;  // override the file's input shapes (OpenOptions::inputs)
  int warmup = 3;
  int repeat = 15;  // timed repeats per backend, spread over its processes
  double minRepeatMs = 20;
  /// Worker processes per backend: > 1 shows whether a backend's speed depends on the process
  /// (code layout, memory and thread placement); a row whose processes' medians differ by more
  /// than 10 % is flagged.
  int processes = 2;
  bool torchCompile = true;  // false: no torch-compile rows (they compile for 20-60 s)
  /// The Python backends' interpreter; empty: $KILN_TORCH_PYTHON, Kiln's Python environment,
  /// python3, /usr/bin/python3 (the first with torch >= 2).
  std::string python;
  /// Which rows, of backendNames() (kiln-untuned comes with kiln when there are records); empty:
  /// defaultCompareBackends(). Without pytorch-eager nothing is checked against a reference
  /// (maxAbsDiff < 0).
  std::vector<std::string> backends;
  StoreOptions store;
  IsolationOptions isolate;  // the workers' time limits, program and cancel (`enabled` is ignored)
};

struct BackendResult {
  std::string backend;  // a name of backendNames(), or "kiln-untuned"
  bool available = true;
  std::string status = "ok";  // ok | unavailable | failed | timeout | out-of-memory (profiler::Status)
  std::string reason;         // why not available
  bool kernelFault = false;   // failed because generated code crashed or hung (exit code 7)
  profiler::Timing timing;              // every repeat's per-call time; empty when it did not run
  std::vector<double> processMedianMs;  // one per worker process
  bool processesDisagree = false;       // their medians differ by more than 10 %
  std::vector<int> pids;                // the worker processes that ran it
  double maxAbsDiff = -1;  // of the outputs vs PyTorch eager (NaN when either has a NaN; exact for
                           // ints); < 0: not checked
  double outputBound = -1;  // the max |diff| it is held to (profiler::outputBound); < 0: not checked
  std::vector<float> preview;  // the first few values of output 0
  int top1 = -1;               // argmax of output 0's first row
  /// What the worker reported about the backend, a JSON object: versions, BLAS/oneDNN/MKL
  /// builds, thread settings, "module" ("python", "torchvision" or "torchscript" for the PyTorch
  /// rows), compile_seconds, the ONNX file; empty when it did not run. backendFactsLine() says it
  /// in one line.
  std::string facts;
  /// Median, quartiles, min–max, ... as the views and reports show them.
  profiler::Spread spread() const { return profiler::spreadOf(timing, processMedianMs, processesDisagree); }
  /// Its outputs lie beyond outputBound from eager's: it computes something else.
  bool outputsDiffer() const { return profiler::outputsDiffer(maxAbsDiff, outputBound); }
};

struct CompareResult {
  std::string model;
  int64_t batch = 1;
  int threads = 1;
  std::string target;
  int optLevel = 3;
  std::string torchVersion;  // Debian's libtorch (the importer's, torchscript-optimized's)
  std::string blas;          // the BLAS it calls; each row's own versions are in its facts
  std::string cpu;
  double compileSeconds = 0;
  int processes = 1;     // worker processes per backend
  int parkTimeouts = 0;  // repeats started while another worker still had a runnable thread
  /// Core-to-core round trips probed through the run (profiler/core_latency.h); when they
  /// differ (placementChanged) the host moved the CPUs and the timings mix two machine states.
  std::vector<double> coreRoundTripNs;
  bool placementChanged = false;
  std::vector<BackendResult> backends;
  StoredIds stored;
};

Result<CompareResult> compare(const std::string& path, const CompareOptions& options);
/// The largest |a - b| over all outputs: exact for integer and bool outputs, NaN when either side
/// holds a NaN anywhere, infinity when the outputs differ in count, shape or dtype.
double maxAbsDiff(const std::vector<runtime::Tensor>& a, const std::vector<runtime::Tensor>& b);
/// How far a backend's outputs may lie from `reference` (eager's) and still compute the same thing:
/// profiler::outputBound of the reference's largest finite |value|, with the int8 tolerance when
/// the model is quantized.
double outputBoundFor(const Model& model, const std::vector<runtime::Tensor>& reference);
std::string compareJson(const CompareResult& result);
/// The row's name as tables show it: "pytorch-eager (TorchScript)" when today's torch ran the
/// TorchScript file because the model has no Python module.
std::string backendDisplayName(const std::string& backend, const std::string& factsJson);
/// A row's facts in one line: "torch 2.15.0 (mkl, oneDNN v3.13.3), 2 threads, module torchvision".
std::string backendFactsLine(const std::string& factsJson);

std::string version();
/// The CPU's marketing name from /proc/cpuinfo.
std::string cpuModelName();

}  // namespace kiln::app

// Profiles, sweeps, the session store and reports.
#include "app/measure.h"
// --input-shapes and Python model references (`file.py:build`).
#include "app/input_shapes.h"
#include "app/model_ref.h"

// Helpers shared by the measurement façade files (facade_compare/profile/sweep/store.cpp).
// Not a public header.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "app/facade.h"
#include "app/measure.h"
#include "profiler/bench.h"
#include "profiler/store.h"

namespace kiln::core::lower {
struct ScheduleConfigs;
}

namespace kiln::app {

/// Opens the store the options name, or returns nullptr when storing is disabled. Opening first
/// means a bad database fails before minutes of measuring. Throws kiln::Error.
std::unique_ptr<profiler::Store> openStoreFor(const StoreOptions& options);

/// What every measuring command needs before it measures.
struct PreparedMeasurement {
  std::unique_ptr<profiler::Store> store;  // nullptr when storing is disabled
  std::shared_ptr<const Model> model;
  std::shared_ptr<CompiledModel> compiled;
};

/// Opens the store (first, so a bad database fails before anything is compiled or measured),
/// then imports the model at `batch` (0: its own) and builds it.
Result<PreparedMeasurement> prepareMeasurement(const std::string& path, const OpenOptions& open,
                                               const BuildOptions& build, const StoreOptions& storeOptions);

/// Input specs as JSON ([{"name", "shape", "dtype"}]) for worker requests, and back.
nlohmann::json toJson(const std::vector<InputSpec>& specs);
std::vector<InputSpec> inputSpecsFromJson(const nlohmann::json& j);

/// Files a run of `kind` for the model at `modelPath` (hashing the file) in the session the
/// options choose. Call inside a transaction. Returns the ids (buildId 0).
StoredIds beginStoredRun(profiler::Store& store, const StoreOptions& options, const std::string& modelPath,
                         const std::string& modelName, const std::string& kind,
                         const profiler::RunContext& context);

/// The host context completed with the build's facts.
profiler::RunContext runContextFor(const BuildOptions& build, int threads, const std::string& target,
                                   double compileSeconds);

/// The build's stored description.
profiler::BuildRecord buildRecordOf(const CompiledModel& compiled, int threads, int64_t batch);

/// The batch (dimension 0 of the first input) of a model; 1 when it has none.
int64_t modelBatch(const Model& model);

/// True when an error message says memory ran out (libtorch's allocator, std::bad_alloc).
bool looksOutOfMemory(const std::string& message);

// ---- isolation (facade_isolate.cpp) -------------------------------------------------------------

/// The program that serves a worker subcommand ("tune-worker", "measure-worker"): `command` if
/// given, else $KILN_WORKER or $KILN_TUNE_WORKER, else the `kiln` this process is or finds beside
/// itself (one folder up for the workbench, in app/ for tests), else `kiln` on PATH.
std::vector<std::string> workerArgv(const std::string& command, const std::string& subcommand);

/// Sends `request` to a `kiln measure-worker` and returns its result object. A crash or a time
/// limit gives ErrorKind::KernelFault with the reason; errors the worker reports keep their kind.
/// `cancelled` (else `isolation.cancelled`) true kills the worker: ErrorKind::Usage, "cancelled".
Result<nlohmann::json> callMeasureWorker(const nlohmann::json& request, const IsolationOptions& isolation,
                                         const std::function<bool()>& cancelled = {});
/// Worker side: tells the parent that compilation is done and kernels run from now on.
void workerMeasuring();

// ---- side by side, one process per backend (facade_bench.cpp, profiler/bench.h) -----------------

/// A temporary folder (under $TMPDIR), removed with its contents when this goes.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& label);
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::string& path() const { return m_path; }

 private:
  std::string m_path;
};

/// What every backend of one side-by-side measurement shares.
struct BenchSpec {
  std::string path;                 // the model file (a Python reference's traced file)
  std::vector<InputSpec> inputSpecs;  // the model's input specs when given (OpenOptions::inputs)
  std::string pythonRef;            // the Python reference the model was traced from, canonical
  std::string stateDict;            // its weights (torch.save), for the Python backends
  int64_t batch = 0;                // 0: the model's own
  int threads = 1;                  // the same for every backend
  std::vector<std::string> inputs;  // .npy files (writeBenchInputs)
  std::string workerCommand;        // IsolationOptions::workerCommand
  std::string python;               // the Python backends' interpreter (--python); empty: the default
};

/// The spec's model fields (path, input specs, Python reference) for an opened model.
/// `explicitShapes`: the model was opened with OpenOptions::inputs, which the workers need too.
BenchSpec benchSpecOf(const Model& model, bool explicitShapes);

/// Writes the inputs as in0.npy, in1.npy, ... into `dir`; returns their paths.
std::vector<std::string> writeBenchInputs(const std::string& dir, const std::vector<runtime::Tensor>& inputs);
/// The outputs a row's worker wrote after its first run.
std::vector<runtime::Tensor> readBenchOutputs(const profiler::BenchRow& row);
/// Kiln built with `build` (and explicit tuned configurations when `schedules` is given).
profiler::BenchBackend kilnBenchBackend(const std::string& name, const BuildOptions& build, const BenchSpec& spec,
                                        const core::lower::ScheduleConfigs* schedules = nullptr);
/// Any row but Kiln's (backendNames()): torchscript-optimized in a `kiln measure-worker`, the
/// others in the Python worker (profiler/python_worker.h; unavailable rows say why).
profiler::BenchBackend baselineBenchBackend(const std::string& name, const BenchSpec& spec);
/// The WebAssembly rows (facade_web.cpp): kiln-wasm (Kiln's wasm32 module in Node) and
/// onnxruntime-web (npm onnxruntime-web's WASM backend in Node), served by web/bench_worker.mjs;
/// kiln-wasm's module is compiled (`kiln compile`, `build`'s -O level) by each worker's setup.
bool isWebBackend(const std::string& name);
profiler::BenchBackend webBenchBackend(const std::string& name, const BuildOptions& build, const BenchSpec& spec);
/// The checkout's web/ ($KILN_WEB_DIR overrides it) and where install-deps.sh puts npm's
/// onnxruntime-web ($KILN_NPM_DIR/node_modules/onnxruntime-web, else where scripts/install-deps.sh put
/// it when the build was configured: CMake's KILN_NPM_DIR, ~/.cache/kiln/npm by default).
std::string webDirectory();
std::string onnxruntimeWebDirectory();
/// A worker's setup result as the backend's stored facts (JSON object text; "" when none): the
/// result without the per-run fields (outputs, first_ms, pid, Kiln's build record).
std::string backendFacts(const std::string& resultJson);
/// A row of the engine as the façade reports it (no outputs compared yet).
BackendResult backendResultOf(const profiler::BenchRow& row);
/// The engine's limits and cancel from the isolation options.
profiler::BenchOptions benchOptionsFor(const IsolationOptions& isolation, const std::string& workDir);
/// Worker side: serves the bench protocol, `firstLine` being its setup request.
int serveBenchWorker(const std::string& firstLine);

// The exact JSON forms the worker's results travel in (every field, doubles round-trip).
nlohmann::json toJson(const BuildOptions& b);
BuildOptions buildOptionsFromJson(const nlohmann::json& j);
nlohmann::json toJson(const profiler::RunContext& c);
profiler::RunContext runContextFromJson(const nlohmann::json& j);
nlohmann::json toJson(const profiler::BuildRecord& b);
profiler::BuildRecord buildRecordFromJson(const nlohmann::json& j);
nlohmann::json toJson(const profiler::Timing& t);
profiler::Timing timingFromJson(const nlohmann::json& j);
nlohmann::json toJson(const profiler::ProfileRecord& p);
profiler::ProfileRecord profileRecordFromJson(const nlohmann::json& j);
nlohmann::json toJson(const profiler::Measurement& m);
profiler::Measurement measurementFromJson(const nlohmann::json& j);

// Worker-side handler of a one-shot profile request (facade_profile.cpp).
nlohmann::json serveProfileRequest(const nlohmann::json& request);
/// Worker side of measureCeilingsIsolated: {"op": "ceilings", "threads": N} → the ceilings' JSON.
nlohmann::json serveCeilingsRequest(const nlohmann::json& request);
/// The machine's ceilings measured in a `kiln measure-worker` (profiler/ceilings.h): nothing
/// else of the caller's process (a GUI's other jobs, its thread pool) runs beside them, and
/// the caller's runtime pool is left alone. Throws kiln::Error.
profiler::MachineCeilings measureCeilingsIsolated(int threads, const IsolationOptions& isolate);
profiler::MachineCeilings ceilingsFromJson(const nlohmann::json& j);

}  // namespace kiln::app

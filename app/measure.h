// The measurement half of the façade: per-operator profiles, batch-size sweeps, the session store
// (sessions list/show/diff) and reports. Included by app/facade.h; same rules: plain value
// results, a Diagnostic instead of an exception, progress through a callback that can cancel.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "app/facade.h"
#include "profiler/records.h"
#include "profiler/roofline.h"
#include "profiler/store.h"

namespace kiln::app {

/// Called with a one-line status before each step; return false to cancel the operation.
using ProgressFn = std::function<bool(const std::string& message)>;

/// The store path the options mean (the default when empty).
std::string resolveDbPath(const std::string& dbPath);

// ---- kiln profile ------------------------------------------------------------------------------

struct ProfileOptions {
  BuildOptions build;
  int64_t batch = 0;  // 0: the model's own batch
  std::vector<InputSpec> inputs;  // override the file's input shapes (OpenOptions::inputs)
  int warmup = 3;
  int repeat = 20;  // timed passes (call by call, and end to end)
  double minRepeatMs = 20;
  StoreOptions store;
  IsolationOptions isolate;
  /// Place every call on the machine's roofline (ProfileResult::roofline): the ceilings for the
  /// thread count come from the store, measured first (a second or two, in this process, before
  /// the profile) when it has none for this machine. Without it, stored ceilings are still
  /// referred to by the run, never measured.
  bool roofline = false;
  bool remeasureCeilings = false;  // measure the ceilings again even if stored (kiln roofline --measure)
};

struct ProfileResult {
  std::string model;
  std::string modelPath;
  profiler::RunContext context;
  profiler::BuildRecord build;
  int numFusedFunctions = 0;
  profiler::ProfileRecord profile;
  StoredIds stored;
  /// The machine's ceilings for the profile's threads, when known (measured with --roofline, or
  /// stored earlier), and whether they came from the store.
  std::optional<profiler::MachineCeilings> ceilings;
  bool ceilingsReused = false;
  /// One point per call, in execution order, when the roofline was asked for.
  std::vector<profiler::RooflinePoint> roofline;
};

Result<ProfileResult> profile(const std::string& path, const ProfileOptions& options);
/// Calls grouped by operator kind (the anchor op of each call), largest total time first.
std::vector<profiler::OpRecord> operatorSummary(const profiler::ProfileRecord& profile);
/// Summary, context and one object per call.
std::string profileResultJson(const ProfileResult& result);
/// The timeline of one pass in Chrome trace-event JSON (Perfetto, chrome://tracing).
std::string profileTraceJson(const ProfileResult& result);

// ---- kiln roofline: the machine's ceilings ----------------------------------------------------

struct CeilingsOptions {
  int threads = 0;         // 0: KILN_NUM_THREADS or every hardware thread (as profile's default)
  bool remeasure = false;  // measure even when the store holds valid ceilings
  StoreOptions store;      // where they are kept (disabled: measured, not kept)
};

struct CeilingsResult {
  profiler::MachineCeilings ceilings;
  bool reused = false;  // from the store, not measured now
  std::string dbPath;   // empty when not stored
};

/// The ceilings of this machine for a thread count (profiler/ceilings.h): stored ones while
/// valid, else measured here and stored.
Result<CeilingsResult> machineCeilings(const CeilingsOptions& options);
/// The ceilings as a JSON object (id, machine_key, cpu, threads, vector_bits, peak_gflops,
/// bandwidth [{level, capacity_bytes, working_set_bytes, gb_per_second}], method, measured_at).
std::string ceilingsJson(const profiler::MachineCeilings& ceilings, bool reused);

// ---- kiln sweep --------------------------------------------------------------------------------

/// Backend names a sweep accepts: backendNames() (facade.h).
const std::vector<std::string>& sweepBackendNames();

struct SweepOptions {
  BuildOptions build;
  std::vector<InputSpec> inputs;  // override the file's input shapes (OpenOptions::inputs; the
                                  //   sweep's batches replace dimension 0)
  std::vector<int64_t> batches{1, 4, 16, 64};
  /// torch.compile recompiles at every batch size (20-60 s each): asked for, not a default.
  std::vector<std::string> backends{"kiln", "pytorch-eager", "torchscript-optimized", "onnxruntime", "openvino"};
  int warmup = 2;
  int repeat = 10;
  double minRepeatMs = 10;
  /// Per backend and batch size, compilation excluded. A backend over budget, out of memory or
  /// failing is stopped: its larger batches are recorded as skipped.
  double budgetSeconds = 60;
  int processes = 1;   // worker processes per backend and batch (profiler/bench.h)
  std::string python;  // the Python backends' interpreter (CompareOptions::python)
  StoreOptions store;
  /// The workers' time limits, program and cancel. Every backend runs in worker processes of its
  /// own (`enabled` is ignored): a crash or a hang fails that point only.
  IsolationOptions isolate;
  /// Continue the latest unfinished sweep of this model with the same batches, backends, budget
  /// and build in the store's session instead of starting a new one: points already stored are
  /// kept and not measured again. Without such a sweep, a new one starts.
  bool resume = false;
  /// Called after each point is measured and stored (each point is committed on its own once
  /// its batch is measured, so a killed sweep loses at most the batch in flight).
  std::function<void(const profiler::Measurement&)> onPoint;
};

struct SweepResult {
  std::string model;
  profiler::RunContext context;
  std::vector<int64_t> batches;
  std::vector<std::string> backends;
  std::vector<profiler::Measurement> points;  // batch-major, in the order run
  StoredIds stored;
  int resumedPoints = 0;  // points taken from the store (resume), not measured again
  /// Core-to-core round trips probed between the rounds of each measured batch
  /// (profiler/core_latency.h); placementChanged when any two of them disagree: the host moved
  /// the CPUs during the sweep, and multi-threaded points before and after the move differ.
  std::map<int64_t, std::vector<double>> coreRoundTripNs;
  bool placementChanged = false;
};

Result<SweepResult> sweep(const std::string& path, const SweepOptions& options,
                          const ProgressFn& progress = {});
std::string sweepJson(const SweepResult& result);

/// A stored sweep that misses points (killed or cancelled): what SweepOptions::resume continues
/// when run with its batches, backends, budget and build (context: threads, -O, target, records).
struct UnfinishedSweep {
  int64_t sessionId = 0, runId = 0;
  std::vector<int64_t> batches;
  std::vector<std::string> backends;
  double budgetSeconds = 0;
  profiler::RunContext context;
  int storedPoints = 0, totalPoints = 0;
};

/// The latest sweep of `path`'s model in the session `store` chooses (as a sweep would), when it
/// is unfinished; nothing when it is complete or there is none. Never creates the store.
Result<std::optional<UnfinishedSweep>> unfinishedSweep(const std::string& path,
                                                       const StoreOptions& store = {});

/// Serves one request of an isolated measurement on stdin/stdout (`kiln measure-worker`,
/// profiler/measure_worker.h); returns the process exit code.
int runMeasureWorker();

/// Context and stored ids as JSON objects (shared by the JSON writers).
std::string contextJson(const profiler::RunContext& context);

// ---- kiln sessions -----------------------------------------------------------------------------

/// Every session in the store (empty when the store does not exist yet).
Result<std::vector<profiler::SessionSummary>> listSessions(const std::string& dbPath);
Result<profiler::SessionData> loadSession(const std::string& dbPath, int64_t sessionId);

/// One operator (matched by its output value names) in two builds' latest profiles.
struct OpDiffRow {
  std::string key;
  std::string opsA, opsB;  // "conv2d+add+relu"; empty when absent from that build
  std::string kernelA, kernelB;
  double timeUsA = -1, timeUsB = -1;  // < 0: absent
  std::string change;                 // "", "only in A", "only in B", "fused differently", "kernel renamed"
};

struct BuildDiff {
  int64_t buildA = 0, buildB = 0;
  profiler::BuildRecord a, b;
  double endToEndMsA = 0, endToEndMsB = 0;
  double sumMsA = 0, sumMsB = 0;
  std::vector<OpDiffRow> rows;  // in B's execution order, then operators only in A
  profiler::ProfileRecord profileA, profileB;  // the latest profile of each build
  /// The ceilings each profile's run refers to (a roofline of both builds needs them).
  std::optional<profiler::MachineCeilings> ceilingsA, ceilingsB;
};

/// Needs a stored profile of each build (kiln profile).
Result<BuildDiff> diffBuilds(const std::string& dbPath, int64_t buildA, int64_t buildB);

// ---- kiln report -------------------------------------------------------------------------------

enum class ReportFormat { Html, Csv };
Result<std::string> sessionReport(const std::string& dbPath, int64_t sessionId, ReportFormat format,
                                  int topN = 15);

}  // namespace kiln::app

// The records the measurement layer produces and keeps: plain value structs shared by the
// profiler, the session store (profiler/store.h), the reports and the application façade.
// Console, JSON, CSV, HTML and SQLite output are all views over these.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "profiler/time_evaluator.h"

namespace kiln::profiler {

/// Where and with what a result was measured.
struct RunContext {
  std::string cpu;  // marketing name from /proc/cpuinfo
  int physicalCores = 0;
  int hardwareThreads = 0;
  int threads = 0;     // threads used by every backend
  std::string target;  // canonical target string
  int optLevel = 3;
  std::string kilnVersion, llvmVersion;
  std::string torchVersion;  // Debian's libtorch (the importer's, torchscript-optimized's)
  std::string blas;  // the BLAS Debian's libtorch calls (torchscript-optimized's; each row's own in its facts)
  std::string tuningRecords = "none";
  std::string date;  // ISO 8601, UTC
  std::string hostname;
  double compileSeconds = 0;  // Kiln's build time for the (first) build measured
  /// The machine's roofline ceilings valid when it ran (profiler/ceilings.h, the store's
  /// machine_ceilings); 0: none measured for this machine and thread count.
  int64_t ceilingsId = 0;
};

/// Status of one measurement point. Anything but Ok carries a reason and no numbers.
enum class Status { Ok, Unavailable, Failed, OutOfMemory, Timeout, Skipped };
const char* statusName(Status status);  // "ok", "unavailable", "failed", "out-of-memory", ...
Status parseStatus(const std::string& name);

/// How far a row of a comparison may lie from PyTorch eager's outputs and still compute the same
/// thing: a tolerance of the reference outputs' largest magnitude (their scale, at least 1). Float
/// models: 1e-3 (Kiln and the float engines stay within 1.7e-4 of it on the sample models); int8
/// models: 0.2, since int8 engines requantize differently and the differences compound over the
/// layers (today's torch and torch 1.13 lie 6 output steps, 5.6 % of the scale, apart on
/// quantized_mobilenet_v2; Kiln matches 1.13 there). A row beyond it computes something else: a
/// wrong rewrite, another precision.
inline constexpr double kOutputTolerance = 1e-3;
inline constexpr double kQuantizedOutputTolerance = 0.2;
inline double outputBound(double outputScale, double tolerance) { return tolerance * (outputScale > 1 ? outputScale : 1); }

/// Whether a checked row's outputs lie beyond `outputBound` from eager's: a NaN difference (a NaN
/// on one side) and an infinite one (another shape) do; an unchecked row (maxAbsDiff < 0) or one
/// whose bound is unknown (outputBound < 0: rows stored before Kiln kept it) does not.
bool outputsDiffer(double maxAbsDiff, double outputBound);

/// One backend at one batch size.
struct Measurement {
  /// "pytorch-eager", "torch-compile", "torch-compile-max-autotune", "torchscript-optimized",
  /// "onnxruntime", "openvino", "kiln-untuned", "kiln" (sessions of older Kiln: "pytorch-compiled")
  std::string backend;
  int64_t batch = 1;
  Status status = Status::Ok;
  std::string reason;
  Timing timing;
  double maxAbsDiff = -1;  // of the outputs vs PyTorch eager; < 0: not checked
  double outputBound = -1;  // the max |diff| it was held to (outputBound()); < 0: not checked, or unknown
  /// Medians of the worker processes that measured it (profiler/bench.h), and whether they
  /// differ by more than 10 %: the figure then depends on the process, not only on the code.
  std::vector<double> processMedianMs;
  bool processesDisagree = false;
  /// What the backend's worker reported about itself, a JSON object (versions, BLAS/oneDNN/MKL
  /// build, thread settings, "module": "torchscript" for a TorchScript module, compile time);
  /// empty when it did not run.
  std::string facts;
  bool ok() const { return status == Status::Ok; }
  bool outputsDiffer() const { return profiler::outputsDiffer(maxAbsDiff, outputBound); }
  /// Median, quartiles, min–max, ... as the views and reports show them.
  Spread spread() const { return spreadOf(timing, processMedianMs, processesDisagree); }
  /// Items per second at the median latency.
  double throughput() const { return ok() && timing.medianMs > 0 ? batch * 1000.0 / timing.medianMs : 0; }
};

/// One call of the compiled graph (one fused function application) in a per-operator profile.
struct OpRecord {
  int index = 0;                 // position in execution order
  std::string name;              // the call's label ("%x = conv2d (model.py:3)")
  std::string key;               // output value name(s): matches the same operator across builds
  std::string kernel;            // compiled function symbol
  std::vector<std::string> ops;  // original graph operators inside the function
  double timeUs = 0;             // median over repeats
  double meanUs = 0, minUs = 0;
  double percent = 0;       // of the sum of all calls' medians
  int calls = 1;            // executions per inference (a loop body's calls: the iterations)
  /// A call inside an if/loop: the index of the top-level if/loop call whose time includes its
  /// own (not counted again in sums and percent totals); -1 for a top-level call.
  int parent = -1;
  std::string outputShape;  // "f32[1,64,112,112]" (several joined by ", ")
  std::vector<std::string> inputShapes;
  double flops = 0;                    // per inference (over all `calls` executions)
  double bytes = 0;                    // inputs + outputs, per inference
  double startUs = 0, durationUs = 0;  // in the timeline run (the median-total repeat)
  double gflops() const { return timeUs > 0 ? flops / (timeUs * 1e3) : 0; }
};

/// A per-operator profile of one build. End-to-end runs and call-by-call passes alternate, so
/// both see the same machine.
///
/// The gap compares means: the mean of a sum is the sum of the means, so Σ per-call means against
/// the end-to-end mean isolates what per-call timing misses (launch overhead between calls,
/// clock reads). Medians do not add up that way: under a load that only ever slows calls down,
/// Σ per-call medians falls below the median pass even when nothing is missing.
struct ProfileRecord {
  int64_t batch = 1;
  int repeat = 0;
  std::vector<OpRecord> ops;
  Timing endToEnd;       // whole-graph runs
  double sumMs = 0;      // Σ per-call medians (what the % column divides by)
  double sumMeanMs = 0;  // Σ per-call means
  double gapPercent() const {
    return endToEnd.meanMs > 0 ? 100.0 * (endToEnd.meanMs - sumMeanMs) / endToEnd.meanMs : 0;
  }
};

/// Everything about one Kiln build that a result refers to.
struct BuildRecord {
  std::string target;
  int optLevel = 3;
  int threads = 0;
  int64_t batch = 1;
  std::string tuningRecords = "none";
  double compileSeconds = 0;
  int numKernels = 0;
  int numCalls = 0;
  int64_t planBytes = 0;
};

/// A tuning record (for the autotuner; the store keeps them).
struct TuningRecord {
  std::string workloadKey;
  std::string target;
  std::string config;  // JSON
  double costMs = 0;
};

}  // namespace kiln::profiler

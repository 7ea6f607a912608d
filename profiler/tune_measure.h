// Measuring tuning candidates in isolation (core/tune proposes them; the façade drives the loop).
//
// A candidate is a tuning key (core/lower/schedule_config.h) plus knob values. It runs in a
// worker process, never in the tuner's: a schedule that crashes the generated code, or loops
// forever, takes down only the worker, which the runner kills after a time limit, records as
// failed and replaces. Workers are long-lived (one JIT and one set of reference outputs per
// task, not per candidate) and talk JSON lines over stdin/stdout:
//
//   → {"op":"compile","id":7,"key":"conv2d_nchwc:...","knobs":"oc_vecs=2,...","target":"llvm",
//      "threads":2,"opt_level":3,"repeat":5,"min_repeat_ms":10,"cold_operands":true}
//   ← {"id":7,"ok":true,"compile_s":0.08,"schedule":"mi=7,oc_vecs=2,po=1"}
//   → {"op":"measure","id":7}
//   ← {"id":7,"ok":true,"samples_ms":[...],"median_ms":0.041,"max_abs_diff":2e-6}
//   → {"op":"measure_together","id":0,"ids":[8,9,10]}   (several compiled candidates, timed
//   ← {"id":0,"ok":true,"results":[{"id":8,"ok":true,"median_ms":...},...]}   side by side)
//
// Compiles of one batch run on all workers at once (code generation is the slow part); the
// measurements then run one at a time so candidates never share the cores they are timed on.
// A worker checks each candidate's output against the task's default-schedule output on the
// same inputs: a candidate that computes something else is an error, however fast.
//
// For tests, KILN_TUNE_FAULT="crash:<substring>" or "hang:<substring>" makes a worker crash
// (SIGSEGV) or hang when measuring a candidate whose knob text followed by a comma contains the
// substring ("crash:mi=1," hits mi=1 only).
#pragma once

#include <functional>
#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

#include "core/tune/tune_loop.h"

namespace kiln::profiler {

struct CandidateRequest {
  std::string key;     // tuning key
  std::string knobs;   // knob text; "" for the heuristic schedule
  std::string target = "llvm";
  int threads = 1;
  int optLevel = 3;    // 4 adds fast math, as in builds
  int repeat = 5;
  double minRepeatMs = 10;
  /// Every operand of the kernel but its first input evicted from the caches before each timed
  /// call (time_evaluator.h evictFromCaches), as a model's weights are when their layer comes
  /// round; the first input stays warm, as the previous layer just wrote it.
  bool coldOperands = false;
};

struct CandidateResult {
  std::string error;  // "" when measured and correct
  double medianMs = 0;
  std::vector<double> samplesMs;
  double maxAbsDiff = 0;       // vs the default schedule
  double compileSeconds = 0;
  std::string schedule;        // the knobs the kernel was actually built with
  bool ok() const { return error.empty(); }
};

/// Serves the worker protocol on `in`/`out` until end of input; returns the process exit code.
int serveTuneWorker(std::istream& in, std::ostream& out);

/// The parent side: a pool of worker processes started from `workerArgv` (e.g. {"kiln",
/// "tune-worker"}), restarted after a crash or a timeout.
class TuneRunner {
 public:
  TuneRunner(std::vector<std::string> workerArgv, int workers, double timeoutSeconds);
  ~TuneRunner();
  TuneRunner(const TuneRunner&) = delete;
  TuneRunner& operator=(const TuneRunner&) = delete;

  /// Compiles the batch in parallel over the workers, then measures the candidates one by one.
  /// Never throws for a candidate's failure: its result carries the error ("timeout", "crashed
  /// (signal 11)", "wrong result (max |diff| 3.2)", "compile error: ..."). Throws kiln::Error
  /// (Internal) only when no worker can be started at all.
  /// `done` (optional) is called with each candidate's index and result as soon as it is final, so
  /// the caller can record it at once: a killed tuner then loses only the candidates in flight.
  std::vector<CandidateResult> run(const std::vector<CandidateRequest>& batch,
                                   const std::function<void(size_t, const CandidateResult&)>& done = {});
  /// Compiles the batch in one worker and times the correct candidates side by side, their
  /// repeats alternating (time_evaluator.h timeSideBySide), so that a burst of load on the
  /// machine falls on all of them alike: for comparing a few finalists whose separate
  /// measurements, minutes apart, are not comparable. Errors as for run(); a worker failure
  /// during the measurement fails every candidate of the batch.
  std::vector<CandidateResult> runSideBySide(const std::vector<CandidateRequest>& batch);
  /// Workers started so far, restarts included.
  int workersStarted() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> m_impl;
};

/// The tuning loop's Measurer (core/tune/tune_loop.h) over a TuneRunner's workers: each candidate
/// compiled for `target` at `optLevel` exactly as the build compiles it, and timed with `threads`
/// threads; a confirmation round takes `sideBySideRepeat` alternating repeats per candidate.
/// `coldOperands`: see CandidateRequest.
class WorkerMeasurer : public core::tune::Measurer {
 public:
  WorkerMeasurer(TuneRunner& runner, std::string target, int threads, int optLevel, bool coldOperands,
                 int sideBySideRepeat = 15);
  void measure(const std::string& key, const std::vector<std::string>& knobs,
               const std::function<void(size_t, const core::tune::Measurement&)>& done) override;
  std::vector<core::tune::Measurement> measureSideBySide(const std::string& key,
                                                         const std::vector<std::string>& knobs) override;

 private:
  std::vector<CandidateRequest> requests(const std::string& key, const std::vector<std::string>& knobs,
                                         int repeat) const;
  TuneRunner& m_runner;
  std::string m_target;
  int m_threads, m_optLevel;
  bool m_coldOperands;
  int m_sideBySideRepeat;
};

}  // namespace kiln::profiler

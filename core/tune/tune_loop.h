// The tuning loop: for each task, learn from what earlier runs measured (records), search the
// task's space with a tuner (tuner.h), measure each proposed batch, hand every record on as soon
// as it is measured (a killed run loses only the candidates in flight), stop on budget, early
// stopping, the time limit or cancellation, then time the finalists side by side in a
// confirmation round (records.h kConfirmTuner) whose best a build takes.
//
// Measuring is not core's business: the caller passes a Measurer. profiler::WorkerMeasurer
// (profiler/tune_measure.h) measures in isolated worker processes; `kiln tune`, the Slurm array
// tasks and the workbench all run this one loop through it.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/lower/lower.h"
#include "core/tune/records.h"
#include "core/tune/task.h"
#include "core/tune/tune_result.h"
#include "core/tune/tuner.h"

namespace kiln::core::tune {

/// One measurement of one candidate.
struct Measurement {
  std::string error;  // "" when measured and correct; else "timeout", "crashed (signal 11)", ...
  double medianMs = 0;
  std::vector<double> samplesMs;
  bool ok() const { return error.empty(); }
};

class Measurer {
 public:
  virtual ~Measurer() = default;
  /// Measures each candidate of task `key` (knob text; "" for the heuristic schedule), calling
  /// `done(i, m)` as soon as candidate i is final. A candidate's failure is its Measurement's
  /// error, never an exception.
  virtual void measure(const std::string& key, const std::vector<std::string>& knobs,
                       const std::function<void(size_t, const Measurement&)>& done) = 0;
  /// Times the candidates side by side, their repeats alternating, so that load on the machine
  /// falls on all of them alike.
  virtual std::vector<Measurement> measureSideBySide(const std::string& key, const std::vector<std::string>& knobs) = 0;
};

/// The task as reports show it (tune_result.h), its space sized for the target.
TuneTaskInfo taskInfo(const TuneTask& task, const lower::LowerOptions& lower);

/// Points the task's summary (best and default) at the latest confirmation round of its key in
/// `records`, when there is one: builds take that round (records.h), so the summary does too.
/// Returns how many of the round's records are error-free (0: no round).
int takeLatestRound(TuneTaskResult& tr, const TuneTask& task, const std::vector<TuneRecord>& records);

struct TuneLoopOptions {
  std::string tuner = "xgb";  // tuner.h makeTuner
  TunerOptions tunerOptions;  // what the xgb tuner's model sees
  uint64_t seed = 1;          // task i's tuner gets seed + i
  int batchSize = 8;          // candidates proposed and measured per round
  int earlyStopping = 0;      // stop a task after this many trials without improvement (0: never)
  std::function<bool()> outOfTime;  // the run's time limit (unset: none)
  int confirmTop = 3;         // finalists of a confirmation round besides the default (0: no round)
  std::string target;         // the records' target
  std::string version;        // the records' Kiln version
  std::function<std::string()> now;  // the records' UTC timestamps ("2026-11-27T08:30:00Z"; required)
  lower::LowerOptions lower;  // the target's, for the configuration spaces
};

struct TuneLoopResult {
  std::vector<TuneTaskResult> tasks;
  int totalMeasured = 0, totalErrors = 0;
  bool cancelled = false;
};

/// Runs the loop over `tasks` with `budgets[i]` trials for task i. `prior` are the records
/// measured before (they count towards the budget and teach the tuner); `keep` gets every new
/// record at once; `progress` returning false cancels (the candidates in flight are kept).
TuneLoopResult runTuneLoop(const std::vector<TuneTask>& tasks, const std::vector<int>& budgets,
                           const std::vector<TuneRecord>& prior, Measurer& measurer, const TuneLoopOptions& options,
                           const std::function<void(const TuneRecord&)>& keep,
                           const std::function<bool(const TuneLoopProgress&)>& progress = {});

}  // namespace kiln::core::tune

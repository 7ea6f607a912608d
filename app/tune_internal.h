// What the local tuning loop (facade_tune.cpp) shares with the Slurm coordinator
// (slurm_tune.cpp): the model opened and lowered for tuning, its tasks and budgets, the records
// already measured, and the end-to-end untuned-vs-tuned timing. Internal to app/.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "app/facade_internal.h"
#include "app/tune.h"
#include "core/lower/schedule.h"
#include "core/lower/schedule_config.h"
#include "core/tune/records.h"
#include "core/tune/task.h"
#include "profiler/store.h"

namespace kiln::app {

/// A model opened and lowered as the build being tuned would be, with its tuning tasks (only the
/// requested ones when `onlyTasks` is set).
struct PreparedTune {
  std::shared_ptr<const Model> model;
  Lowered lowered;
  core::lower::LowerOptions lower;
  std::vector<core::tune::TuneTask> tasks;
  int kernelCalls = 0;   // kernel calls per inference (the plan's calls of generated kernels)
  int tunableCalls = 0;  // those whose kernel has a tuning key (before --tasks picks some)
  // tuning key -> its calls, where the untuned kernel is a sketch's
  std::map<std::string, int> untunedSketchCalls;
};
/// Throws kiln::Error (a model that does not open, a cross target, no requested task).
PreparedTune prepareTune(const std::string& path, const TuneOptions& options);

/// Measured budgets per task: `taskBudgets` when given, else trialsPerTask each, or totalTrials
/// split by share of the FLOPs (at least two per task, so each gets its default and one alternative).
std::vector<int> tuneBudgets(const std::vector<core::tune::TuneTask>& tasks, const TuneOptions& options);

/// Records of these keys for the target from the records file and the store.
std::vector<core::tune::TuneRecord> priorTuneRecords(const TuneOptions& options, profiler::Store* store,
                                                     const std::vector<core::tune::TuneTask>& tasks,
                                                     const std::string& target, int& badLines, std::string& problem);

/// What a tune run (local or on Slurm) starts from: the result's identity fields, the stored run
/// (when `store` is set), its model's id in the store and the records already measured.
struct TuneStart {
  std::string target;
  int threads = 0;
  int64_t modelId = 0;
  TuneResult result;
  std::vector<core::tune::TuneRecord> prior;
};
TuneStart beginTune(const PreparedTune& p, const TuneOptions& options, profiler::Store* store);

/// Leaves the records file at `path` holding what a build of these tasks would choose from `all`
/// (the file's records, the store's and this run's): for each task whose choice from the file alone
/// differs, appends the records that decide it (core::tune::decidingRecords), so `--records path`
/// builds the same as `--records store`. Creates the file when it is missing, even with nothing to
/// copy. Returns how many records it appended.
int completeRecordsFile(const std::string& path, const std::vector<core::tune::TuneRecord>& all,
                        const std::vector<core::tune::TuneTask>& tasks, const std::string& target);

/// Median end-to-end latency of the untuned and the tuned build, each in a worker process of its
/// own, their repeats alternating (profiler/bench.h); 0 for a build that failed.
std::pair<double, double> tuneSideBySide(const std::string& path, const Model& model, const TuneOptions& options,
                                         const core::lower::ScheduleConfigs& tuned);

/// tune() with options.slurm.enabled (slurm_tune.cpp). Throws kiln::Error.
TuneResult tuneOnSlurm(const std::string& path, const TuneOptions& options, const TuneProgressFn& progress);

}  // namespace kiln::app

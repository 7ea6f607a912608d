// The tuning half of the façade (kiln tune, the Workbench's Tuning view): extract a model's
// tuning tasks, search their schedule knobs by measuring candidates, keep the records, and build
// with the best ones. Same rules as facade.h: plain values, a Diagnostic instead of an exception,
// progress through a callback whose `false` cancels (what was measured is kept).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "app/facade.h"
#include "core/tune/tune_result.h"

namespace kiln::app {

/// Tuning spread over a Slurm cluster (app/slurm.h): the tasks are split over the tasks of one job
/// array; each array task runs this same search for its share (`kiln tune-slurm-task`) on its node
/// and appends records to a file of its own in `workDir`; the coordinator polls the array, merges
/// the records by tuning key into the records file and the store, and builds with them.
struct SlurmOptions {
  bool enabled = false;
  std::string partition;  // "": the cluster's default partition
  int arraySize = 2;      // array tasks (at most one per tuning task)
  std::string workDir;    // plan, job script, per-task records and logs; must be on a filesystem
                          //   every node sees. "": <records file>.slurm, else ./kiln-tune-slurm
  double pollSeconds = 1;  // how often the coordinator asks slurmctld about the array
};

struct TuneOptions {
  BuildOptions build;        // target, -O level (tasks are the kernels this build would have), threads
  int64_t batch = 0;         // 0: the model's own batch
  std::vector<InputSpec> inputs;  // override the file's input shapes (OpenOptions::inputs)
  std::string tuner = "xgb";  // "xgb" (XGBoost cost model + simulated annealing), "random", "grid"
  std::string features = "knobs";  // what xgb's cost model sees: "knobs", "loops" or "both" (core/tune/features.h)
  bool cacheFlush = false;   // time each candidate with its operands but the first input evicted from
                             //   the caches before every call (profiler/tune_measure.h coldOperands)
  int trialsPerTask = 32;    // measured candidates per task (the budget is shared by weight when
  int totalTrials = 0;       //   totalTrials > 0: split over tasks by their share of the FLOPs)
  int earlyStopping = 0;     // stop a task after this many trials without improvement (0: never)
  double timeLimitSeconds = 0;       // the whole run's wall-clock budget (0: none)
  double measureTimeoutSeconds = 10;  // per candidate, in the child process
  int batchSize = 8;         // candidates proposed, compiled and measured per round
  std::string recordsPath;   // JSON-lines records file (read to resume, appended to); "" none
  // Tune only these kernel names, tuning keys or kinds ("conv2d_nchwc", "conv2d", "nest", "reduce", "pool",
  // "window",
  // ...) (empty: all).
  std::vector<std::string> onlyTasks;
  uint64_t seed = 1;
  StoreOptions store;        // records are also kept in the session store
  int confirmTop = 3;         // after a task's search, its best N configurations and the default
                             //   are measured again side by side; builds prefer that round
                             //   (core/tune/records.h kConfirmTuner). 0: no confirmation
  bool compareEndToEnd = true;  // after tuning, time the whole model untuned vs tuned
  std::string workerCommand;    // the `kiln` that serves `kiln tune-worker` ("": found next to
                                //   this program, else $KILN_TUNE_WORKER, else on PATH)
  std::map<std::string, int> taskBudgets;  // trials per task name or key, replacing the above (a Slurm
                                           //   array task gets the coordinator's split)
  SlurmOptions slurm;
};

/// A tuning task, one trial and a task's summary: the tuning loop's own (core/tune/tune_result.h).
using TuneTaskInfo = core::tune::TuneTaskInfo;
using TuneTrial = core::tune::TuneTrial;
using TuneTaskResult = core::tune::TuneTaskResult;

/// One task of a Slurm job array, as the coordinator last saw it.
struct SlurmArrayTask {
  int index = 0;             // SLURM_ARRAY_TASK_ID
  std::string state;         // Slurm's: PENDING, RUNNING, COMPLETED, FAILED, CANCELLED, TIMEOUT, ...
  std::string exitCode;      // "1:0" (exit code:signal) once it ended
  int trials = 0, budget = 0;  // candidates it measured (records beyond the prior ones) / planned
  int records = 0;           // records it wrote, confirmation rounds included
  std::vector<std::string> tasks;  // the tuning tasks (kernel names) it searches
  std::string log;           // its stdout/stderr file
  std::string reason;        // when it failed: the last "error:" line of its log, if any
  bool done() const;         // ended (whatever the outcome)
  bool failed() const;       // ended other than COMPLETED
};

/// The tuning loop's progress (core/tune/tune_result.h), with the run's clock and, with --slurm,
/// the array's state.
struct TuneProgress : core::tune::TuneLoopProgress {
  double elapsedSeconds = 0, etaSeconds = 0;
  std::string slurmJob;                 // --slurm: the array's job id, and its tasks
  std::vector<SlurmArrayTask> slurmTasks;
};
/// Return false to cancel: the run stops after the candidates in flight, keeping their records.
using TuneProgressFn = std::function<bool(const TuneProgress&)>;

struct TuneResult {
  std::string model;
  std::string target;
  std::string tuner;
  std::vector<TuneTaskResult> tasks;
  int totalMeasured = 0, totalErrors = 0;
  double wallSeconds = 0;
  bool cancelled = false;
  std::string recordsPath;
  int recordsWritten = 0;
  int recordsCopied = 0;  // earlier runs' records (the store's) appended so the file builds the same
  double untunedMs = 0, tunedMs = 0;  // end-to-end medians, measured side by side after tuning
  int badRecordLines = 0;             // lines of the records file that were skipped
  std::string badRecordProblem;       // the first one's problem ("line 7: not a JSON object")
  int workersStarted = 0;             // worker processes, restarts after failures included
  bool cacheFlushed = false;          // candidates were timed with cold operands (TuneOptions::cacheFlush)
  int kernelCalls = 0;                // kernel calls per inference
  int tunableCalls = 0;               // of those, calls of kernels with a tuning key
  std::map<std::string, int> untunedSketchCalls;  // tuning key -> calls, where untuned runs a sketch
  /// Calls of kernels that run a schedule of primitives (a sketch's trace) rather than a
  /// hand-written builder's after this run: every tuned task's (a tunable kernel's configurations
  /// are sketch annotations), any other key's when its untuned kernel is a sketch's.
  int searchedCalls() const;
  StoredIds stored;
  // --slurm: the job, where its files are, and each array task's end; its records were merged
  // (recordsWritten counts them) whatever the task's state
  std::string slurmJob, slurmDir;
  std::vector<SlurmArrayTask> slurmTasks;
  int recordsMerged = 0;
};

/// The names TuneOptions::tuner and TuneOptions::features accept (core/tune's lists), the default
/// first.
const std::vector<std::string>& tunerNames();
const std::vector<std::string>& featureSetNames();

/// The tasks a build with these options would tune (no measuring).
Result<std::vector<TuneTaskInfo>> tuneTasks(const std::string& path, const TuneOptions& options);
Result<TuneResult> tune(const std::string& path, const TuneOptions& options,
                        const TuneProgressFn& progress = {});
std::string tuneResultJson(const TuneResult& result);

/// What a tuning-records file holds, read the way a build reads it (bad lines are skipped).
struct RecordsCheck {
  int records = 0;           // valid records
  int badLines = 0;          // skipped lines
  std::string firstProblem;  // "line 7: not a JSON object"
};
/// Checks `--records PATH` before a build: a missing file or a directory is an Io error, a
/// non-empty file without one valid record an InvalidInput error (it is not a records file). Session
/// stores ("store", *.db) are not read here (the build opens them). Never throws.
Result<RecordsCheck> checkRecords(const std::string& path);

/// The body of `kiln tune-slurm-task PLAN`: one array task's share of a --slurm run (the plan the
/// coordinator wrote, the share picked by $SLURM_ARRAY_TASK_ID). Prints progress lines on stdout
/// (the task's Slurm log) and errors as `error: ...`; returns the exit code.
int runSlurmArrayTask(const std::string& planPath);

/// Serves the candidate-measurement protocol on stdin/stdout (profiler/tune_measure.h); the
/// body of `kiln tune-worker`. Returns the exit code.
int runTuneWorker();

}  // namespace kiln::app

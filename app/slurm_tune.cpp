// kiln tune --slurm: the coordinator that spreads a tuning run over a Slurm job array, and the
// array task's side (`kiln tune-slurm-task PLAN`).
//
// The coordinator opens the model as a local run does, splits the tasks over N array tasks
// (largest budget first, each to the least loaded), and writes into the work folder:
//   plan.json           the run's options and each array index's tasks with their budgets
//   tune.sh             the batch script: `kiln tune-slurm-task plan.json`, then its exit code to
//                       status-<index>
//   records-<index>.jsonl  seeded with the records already measured for that index's keys, so the
//                       array task resumes from them; it appends one line per candidate measured
//   slurm-<job>_<index>.out  each task's log (Slurm writes it)
// It submits the array (sbatch --array=0-(N-1)), polls scontrol every pollSeconds for each task's
// state and counts the records each file gained (the progress), cancels the array (scancel) when
// the progress callback says so, and when every task has ended merges what each file gained,
// grouped by tuning key, into the run's records file and the session store: a task that was
// killed loses only the candidate it was measuring. The summary per task and the end-to-end check
// are then computed from the records, as a local run would have them.
// Task states come from `scontrol show job` (no accounting database needed); once slurmctld has
// purged the job, from sacct when the cluster keeps accounting, else from the status files. A
// rerun in the same folder first keeps the records an earlier, killed coordinator never merged.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "app/input_shapes.h"
#include "app/measure_internal.h"
#include "app/slurm.h"
#include "app/tune_internal.h"
#include "core/tune/tune_loop.h"
#include "core/tune/space.h"
#include "profiler/context.h"
#include "runtime/thread_pool.h"

namespace kiln::app {

namespace fs = std::filesystem;
using core::tune::TuneRecord;
using nlohmann::json;

bool SlurmArrayTask::done() const { return isFinalJobState(state); }
bool SlurmArrayTask::failed() const { return done() && state != "COMPLETED"; }

namespace {

constexpr const char* kPlanFormat = "kiln-tune-slurm-plan-1";

fs::path recordsFileOf(const fs::path& dir, int index) { return dir / ("records-" + std::to_string(index) + ".jsonl"); }
fs::path statusFileOf(const fs::path& dir, int index) { return dir / ("status-" + std::to_string(index)); }

/// Splits tasks over `n` shares: largest budget first, each to the share with the least so far.
std::vector<std::vector<size_t>> splitTasks(const std::vector<int>& budget, int n) {
  std::vector<size_t> order(budget.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return budget[a] > budget[b]; });
  std::vector<std::vector<size_t>> shares(static_cast<size_t>(n));
  std::vector<int> load(static_cast<size_t>(n), 0);
  for (size_t t : order) {
    size_t least = static_cast<size_t>(std::min_element(load.begin(), load.end()) - load.begin());
    shares[least].push_back(t);
    load[least] += budget[t];
  }
  for (auto& share : shares) std::sort(share.begin(), share.end());  // the model's order within a share
  return shares;
}

/// The work folder: the option, else beside the records file, else in the working directory.
fs::path workDirFor(const TuneOptions& options) {
  fs::path dir = !options.slurm.workDir.empty()      ? fs::path(options.slurm.workDir)
                 : !options.recordsPath.empty() ? fs::path(options.recordsPath + ".slurm")
                                                : fs::path("kiln-tune-slurm");
  std::error_code ec;
  dir = fs::absolute(dir, ec);
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir)) throw Error(dir.string() + ": cannot create the Slurm work folder", ErrorKind::Io);
  return dir;
}

/// What identifies a record (a rerun's seeds are copies of records already kept).
std::string identityOf(const TuneRecord& r) {
  return r.key + "|" + r.target + "|" + core::lower::knobsText(r.knobs) + "|" + r.tuner + "|" + r.timestamp + "|" +
         r.error + "|" + std::to_string(r.costMs);
}

/// Records an earlier run left in the work folder that were never merged (its coordinator was
/// killed before the array ended): those not among `kept`.
std::vector<TuneRecord> unmergedLeftovers(const fs::path& dir, const std::vector<TuneRecord>& kept) {
  std::set<std::string> known;
  for (const TuneRecord& r : kept) known.insert(identityOf(r));
  std::vector<TuneRecord> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    std::string name = entry.path().filename().string();
    if (!name.starts_with("records-") || !name.ends_with(".jsonl")) continue;
    for (TuneRecord& r : core::tune::readRecords(entry.path().string()).records)
      if (known.insert(identityOf(r)).second) out.push_back(std::move(r));
  }
  return out;
}

/// Removes what an earlier run left (its records are merged by then): it would be counted again.
void clearWorkDir(const fs::path& dir) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    std::string name = entry.path().filename().string();
    if (name.starts_with("records-") || name.starts_with("status-") || name == "plan.json" || name == "tune.sh" ||
        name == "job-id")
      fs::remove(entry.path(), ec);
  }
}

void writeText(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  if (!out || !(out << text) || !out.flush()) throw Error(path.string() + ": cannot write file", ErrorKind::Io);
}

/// The model as the array tasks (another working directory, another node) can open it.
std::string portableModel(const std::string& path) {
  std::error_code ec;
  if (fs::exists(path, ec)) return fs::absolute(path, ec).string();
  return path;  // a Python reference: resolved from the working directory the tasks share (--chdir)
}

json planJson(const std::string& model, const TuneOptions& o, const PreparedTune& p, const std::vector<int>& budget,
              const std::vector<std::vector<size_t>>& shares, const fs::path& dir) {
  json j;
  j["format"] = kPlanFormat;
  j["model"] = portableModel(model);
  j["target"] = o.build.target;
  j["opt_level"] = o.build.optLevel;
  j["threads"] = o.build.threads;
  j["bounds_check"] = o.build.boundsCheck;
  j["winograd"] = o.build.winograd;
  j["batch"] = o.batch;
  j["input_shapes"] = o.inputs.empty() ? "" : inputShapesText(o.inputs);
  j["tuner"] = o.tuner;
  j["features"] = o.features;
  j["cache_flush"] = o.cacheFlush;
  j["early_stopping"] = o.earlyStopping;
  j["time_limit_s"] = o.timeLimitSeconds;
  j["timeout_s"] = o.measureTimeoutSeconds;
  j["batch_size"] = o.batchSize;
  j["seed"] = o.seed;
  j["confirm"] = o.confirmTop;
  j["dir"] = dir.string();
  j["shares"] = json::array();
  for (const auto& share : shares) {
    json tasks = json::array();
    for (size_t t : share)
      tasks.push_back({{"key", p.tasks[t].key}, {"name", p.tasks[t].name}, {"budget", budget[t]}});
    j["shares"].push_back(std::move(tasks));
  }
  return j;
}

std::string jobScript(const std::string& kiln, const fs::path& dir) {
  std::string q = shellQuote(dir.string());
  return "#!/bin/sh\n"
         "# kiln tune --slurm: one array task's share of the tuning tasks (written by the coordinator)\n" +
         shellQuote(kiln) + " tune-slurm-task " + shellQuote((dir / "plan.json").string()) +
         "\n"
         "rc=$?\n"
         "echo $rc > " + q + "/status-$SLURM_ARRAY_TASK_ID\n"
         "exit $rc\n";
}

/// The last "error: ..." line of a log, "" when it has none.
std::string lastErrorLine(const std::string& log) {
  std::ifstream in(log);
  std::string line, last;
  while (std::getline(in, line))
    if (line.starts_with("error: ")) last = line.substr(7);
  return last;
}

/// Records a task file holds beyond the `seeded` ones it started with.
std::vector<TuneRecord> gained(const fs::path& file, size_t seeded) {
  core::tune::RecordFile f = core::tune::readRecords(file.string());
  if (f.records.size() <= seeded) return {};
  return {std::make_move_iterator(f.records.begin() + static_cast<std::ptrdiff_t>(seeded)),
          std::make_move_iterator(f.records.end())};
}

/// The summary of one task from its records, as the local loop would have built it.
TuneTaskResult summarize(const core::tune::TuneTask& task, const core::lower::LowerOptions& lower,
                         const std::vector<TuneRecord>& prior, const std::vector<TuneRecord>& fresh) {
  TuneTaskResult tr;
  tr.info = core::tune::taskInfo(task, lower);
  tr.defaultKnobs = task.defaultKnobs;
  auto add = [&](const TuneRecord& r, bool fromRecords) {
    if (r.key != task.key || r.tuner == core::tune::kConfirmTuner) return;
    std::string text = core::lower::knobsText(r.knobs);
    tr.trials.push_back({static_cast<int>(tr.trials.size()) + 1, text, r.costMs,
                         r.ok() ? task.flops / (r.costMs * 1e6) : 0, r.error, fromRecords});
    if (fromRecords) ++tr.skipped;
    else ++tr.measured;
    if (!fromRecords && !r.ok()) ++tr.errors;
    if (r.ok() && (tr.bestMs == 0 || r.costMs < tr.bestMs)) {
      tr.bestMs = r.costMs;
      tr.bestKnobs = text;
    }
    if (r.ok() && text == task.defaultKnobs && (tr.defaultMs == 0 || r.costMs < tr.defaultMs)) tr.defaultMs = r.costMs;
  };
  for (const TuneRecord& r : prior) add(r, true);
  for (const TuneRecord& r : fresh) add(r, false);
  // Builds take the latest round (records.h): so does the summary. It counts as confirmed here
  // when this run timed it.
  std::vector<TuneRecord> all = prior;
  all.insert(all.end(), fresh.begin(), fresh.end());
  int round = core::tune::takeLatestRound(tr, task, all);
  bool freshRound = std::any_of(fresh.begin(), fresh.end(), [&](const TuneRecord& r) {
    return r.key == task.key && r.tuner == core::tune::kConfirmTuner;
  });
  if (freshRound) tr.confirmed = round;
  if (tr.bestMs > 0) tr.bestGflops = task.flops / (tr.bestMs * 1e6);
  return tr;
}

/// Cancels the array unless it ended: whatever makes the coordinator leave early (an error,
/// an exception) does not leave the cluster working for nobody.
class ArrayGuard {
 public:
  explicit ArrayGuard(std::string job) : m_job(std::move(job)) {}
  ~ArrayGuard() {
    if (!m_released) cancelJob(m_job);
  }
  ArrayGuard(const ArrayGuard&) = delete;
  ArrayGuard& operator=(const ArrayGuard&) = delete;
  void release() { m_released = true; }

 private:
  std::string m_job;
  bool m_released = false;
};

}  // namespace

TuneResult tuneOnSlurm(const std::string& path, const TuneOptions& options, const TuneProgressFn& progress) {
  auto start = std::chrono::steady_clock::now();
  const SlurmOptions& so = options.slurm;
  if (so.arraySize < 1) throw Error("--array-size must be at least 1", ErrorKind::Usage);
  checkSlurm(so.partition);
  std::unique_ptr<profiler::Store> store = openStoreFor(options.store);
  PreparedTune p = [&] {
    try {
      return prepareTune(path, options);
    } catch (const Error& e) {
      std::string message = e.what();
      throw Error(message.starts_with(path + ": ") ? message : path + ": " + message, e.kind());
    }
  }();
  TuneStart begun = beginTune(p, options, store.get());
  const std::string& target = begun.target;
  int64_t modelId = begun.modelId;
  TuneResult& result = begun.result;
  std::vector<TuneRecord>& prior = begun.prior;

  // Budgets as a local run plans them (no more than a space holds), split over the array.
  std::vector<int> budget = tuneBudgets(p.tasks, options);
  for (size_t t = 0; t < p.tasks.size(); ++t)
    budget[t] = static_cast<int>(std::min<int64_t>(budget[t], core::tune::ConfigSpace::forKey(p.tasks[t].key, p.lower).size()));
  int n = std::min(so.arraySize, static_cast<int>(p.tasks.size()));
  std::vector<std::vector<size_t>> shares = splitTasks(budget, n);

  // Records the task files gained are kept like a local run keeps its own: in the records file
  // and the store, each a line and a row.
  auto keep = [&](const std::vector<TuneRecord>& records) {
    if (records.empty()) return;
    if (!options.recordsPath.empty()) core::tune::appendRecords(options.recordsPath, records);
    if (!store) return;
    store->transaction([&] {
      for (const TuneRecord& r : records) {
        profiler::TuningRecord sr{r.key, r.target, core::tune::recordJson(r), r.costMs};
        store->addTuningRecord(sr, modelId, version());
      }
    });
  };

  fs::path dir = workDirFor(options);
  result.slurmDir = dir.string();
  // An earlier run in this folder whose coordinator was killed before it merged: keep its records
  // now (they count as measured before this run), then start afresh.
  {
    std::vector<TuneRecord> kept = prior;
    if (!options.recordsPath.empty())
      for (TuneRecord& r : core::tune::readRecords(options.recordsPath).records) kept.push_back(std::move(r));
    std::vector<TuneRecord> leftovers = unmergedLeftovers(dir, kept);
    keep(leftovers);
    for (TuneRecord& r : leftovers)
      if (r.target == target) prior.push_back(std::move(r));
    clearWorkDir(dir);
  }
  std::vector<size_t> seeded(static_cast<size_t>(n), 0);
  std::vector<SlurmArrayTask> tasks(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    std::set<std::string> keys;
    SlurmArrayTask& at = tasks[static_cast<size_t>(i)];
    at.index = i;
    at.state = "SUBMITTING";
    for (size_t t : shares[static_cast<size_t>(i)]) {
      keys.insert(p.tasks[t].key);
      at.tasks.push_back(p.tasks[t].name);
      at.budget += budget[t];
    }
    std::vector<TuneRecord> seed;
    for (const TuneRecord& r : prior)
      if (keys.count(r.key)) seed.push_back(r);
    fs::path file = recordsFileOf(dir, i);
    writeText(file, "");
    if (!seed.empty()) core::tune::appendRecords(file.string(), seed);
    seeded[static_cast<size_t>(i)] = seed.size();
  }
  writeText(dir / "plan.json", planJson(path, options, p, budget, shares, dir).dump(2) + "\n");
  std::string kiln = workerArgv(options.workerCommand, "tune-slurm-task")[0];
  if (kiln.find('/') == std::string::npos) kiln = findOnPath(kiln).empty() ? kiln : findOnPath(kiln);
  writeText(dir / "tune.sh", jobScript(kiln, dir));
  fs::permissions(dir / "tune.sh", fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                                       fs::perms::others_read | fs::perms::others_exec);

  ArraySubmission submission;
  submission.script = (dir / "tune.sh").string();
  submission.jobName = "kiln-tune";
  submission.arraySize = n;
  submission.output = (dir / "slurm-%A_%a.out").string();
  submission.chdir = fs::current_path().string();
  submission.partition = so.partition;
  submission.cpusPerTask = options.build.threads > 0 ? options.build.threads : 0;
  std::string job = submitArray(submission);
  ArrayGuard guard(job);
  result.slurmJob = job;
  writeText(dir / "job-id", job + "\n");
  for (auto& at : tasks) {
    at.state = "PENDING";
    at.log = (dir / ("slurm-" + job + "_" + std::to_string(at.index) + ".out")).string();
  }

  int totalBudget = 0;
  for (int b : budget) totalBudget += b;
  bool cancelled = false;
  auto cancelledAt = std::chrono::steady_clock::now();
  double poll = so.pollSeconds > 0 ? so.pollSeconds : 1;
  while (true) {
    bool known = true;
    std::map<int, ArrayTaskStatus> statuses = arrayTaskStatuses(job, known);
    std::map<int, ArrayTaskStatus> accounted;
    if (!known) accounted = accountedArrayTasks(job);
    int totalTrials = 0, done = 0;
    for (SlurmArrayTask& at : tasks) {
      if (auto it = statuses.find(at.index); it != statuses.end()) {
        at.state = it->second.state;
        at.exitCode = it->second.exitCode;
        if (!it->second.log.empty() && it->second.log.find('%') == std::string::npos) at.log = it->second.log;
      } else if (auto ac = accounted.find(at.index); ac != accounted.end()) {
        at.state = ac->second.state;
        at.exitCode = ac->second.exitCode;
      } else if (!at.done()) {
        // Not (or no longer) known to slurmctld: cancelled while pending, or purged. The script
        // wrote its exit code when it ran to its end.
        std::ifstream status(statusFileOf(dir, at.index));
        int rc = -1;
        if (status >> rc) {
          at.state = rc == 0 ? "COMPLETED" : "FAILED";
          at.exitCode = std::to_string(rc) + ":0";
        } else {
          at.state = "CANCELLED";
        }
      }
      std::vector<TuneRecord> fresh = gained(recordsFileOf(dir, at.index), seeded[static_cast<size_t>(at.index)]);
      at.records = static_cast<int>(fresh.size());
      at.trials = static_cast<int>(std::count_if(fresh.begin(), fresh.end(), [](const TuneRecord& r) {
        return r.tuner != core::tune::kConfirmTuner;
      }));
      totalTrials += at.trials;
      done += at.done();
    }
    if (progress) {
      TuneProgress pr;
      pr.numTasks = static_cast<int>(p.tasks.size());
      pr.taskIndex = 0;
      pr.taskName = "job " + job;
      pr.taskTrials = totalTrials;
      pr.taskBudget = totalBudget;
      pr.totalTrials = totalTrials;
      pr.totalBudget = totalBudget;
      pr.elapsedSeconds = secondsSince(start);
      pr.etaSeconds = totalTrials > 0 ? pr.elapsedSeconds / totalTrials * std::max(0, totalBudget - totalTrials) : 0;
      pr.message = "job " + job + ": " + std::to_string(done) + "/" + std::to_string(n) + " array tasks ended, " +
                   std::to_string(totalTrials) + "/" + std::to_string(totalBudget) + " trials";
      pr.slurmJob = job;
      pr.slurmTasks = tasks;
      if (!progress(pr) && !cancelled) {
        cancelled = true;
        cancelledAt = std::chrono::steady_clock::now();
        cancelJob(job);
      }
    }
    if (done == n) break;
    // A cancelled array whose tasks slurmctld does not report as ended within a minute: merge
    // what they wrote and leave.
    if (cancelled && secondsSince(cancelledAt) > 60) break;
    std::this_thread::sleep_for(std::chrono::duration<double>(poll));
  }
  guard.release();

  // Merge: every record each task file gained, grouped by tuning key in the model's task order.
  std::vector<TuneRecord> fresh;
  for (const SlurmArrayTask& at : tasks) {
    std::vector<TuneRecord> mine = gained(recordsFileOf(dir, at.index), seeded[static_cast<size_t>(at.index)]);
    fresh.insert(fresh.end(), std::make_move_iterator(mine.begin()), std::make_move_iterator(mine.end()));
  }
  std::map<std::string, size_t> order;
  for (size_t t = 0; t < p.tasks.size(); ++t) order.emplace(p.tasks[t].key, t);
  std::stable_sort(fresh.begin(), fresh.end(), [&](const TuneRecord& a, const TuneRecord& b) {
    return order[a.key] < order[b.key];
  });
  keep(fresh);
  result.recordsMerged = result.recordsWritten = static_cast<int>(fresh.size());
  if (!options.recordsPath.empty()) {
    std::vector<TuneRecord> all = prior;
    all.insert(all.end(), fresh.begin(), fresh.end());
    result.recordsCopied = completeRecordsFile(options.recordsPath, all, p.tasks, target);
  }

  for (const auto& task : p.tasks) {
    TuneTaskResult tr = summarize(task, p.lower, prior, fresh);
    result.totalMeasured += tr.measured;
    result.totalErrors += tr.errors;
    result.tasks.push_back(std::move(tr));
  }
  for (SlurmArrayTask& at : tasks)
    if (at.failed() && !cancelled) at.reason = lastErrorLine(at.log);
  result.slurmTasks = tasks;
  result.cancelled = cancelled;

  // The whole model, untuned and with the merged records' best configurations, side by side.
  bool anyTuned = std::any_of(result.tasks.begin(), result.tasks.end(), [](const auto& t) { return !t.bestKnobs.empty(); });
  if (!cancelled && options.compareEndToEnd && anyTuned) {
    core::lower::ScheduleConfigs configs;
    for (const auto& t : result.tasks)
      if (!t.bestKnobs.empty()) configs.byKey[t.info.workloadKey] = core::lower::parseKnobs(t.bestKnobs);
    auto [a, b] = tuneSideBySide(path, *p.model, options, configs);
    result.untunedMs = a;
    result.tunedMs = b;
  }
  result.wallSeconds = secondsSince(start);
  return result;
}

int runSlurmArrayTask(const std::string& planPath) {
  auto fail = [](const std::string& message, ErrorKind kind) {
    std::cout << std::flush;
    std::fprintf(stderr, "error: %s\n", message.c_str());
    return static_cast<int>(kind);
  };
  std::ifstream in(planPath);
  if (!in) return fail(planPath + ": cannot read the plan", ErrorKind::Io);
  json plan = json::parse(in, nullptr, false);
  if (plan.is_discarded() || !plan.is_object() || plan.value("format", "") != kPlanFormat)
    return fail(planPath + ": not a kiln tune --slurm plan", ErrorKind::InvalidInput);
  const char* indexText = std::getenv("SLURM_ARRAY_TASK_ID");
  if (!indexText || !*indexText) return fail("SLURM_ARRAY_TASK_ID is not set (run by sbatch --array only)", ErrorKind::Usage);
  int index = std::atoi(indexText);
  const json& shares = plan["shares"];
  if (index < 0 || index >= static_cast<int>(shares.size()))
    return fail(planPath + ": no share for array index " + std::to_string(index), ErrorKind::InvalidInput);

  try {
    TuneOptions o;
    o.build.target = plan.value("target", "llvm");
    o.build.optLevel = plan.value("opt_level", 3);
    o.build.threads = plan.value("threads", 0);
    o.build.boundsCheck = plan.value("bounds_check", false);
    o.build.winograd = plan.value("winograd", 4);
    o.batch = plan.value("batch", int64_t{0});
    if (std::string shapes = plan.value("input_shapes", ""); !shapes.empty()) {
      auto specs = parseInputShapes(shapes);
      if (!specs) return fail(specs.error().message, specs.error().kind);
      o.inputs = specs.value();
    }
    o.tuner = plan.value("tuner", "xgb");
    o.features = plan.value("features", "knobs");
    o.cacheFlush = plan.value("cache_flush", false);
    o.earlyStopping = plan.value("early_stopping", 0);
    o.timeLimitSeconds = plan.value("time_limit_s", 0.0);
    o.measureTimeoutSeconds = plan.value("timeout_s", 10.0);
    o.batchSize = plan.value("batch_size", 8);
    o.seed = plan.value("seed", uint64_t{1});
    o.confirmTop = plan.value("confirm", 3);
    o.compareEndToEnd = false;
    o.store.enabled = false;  // the coordinator merges into the store
    for (const json& t : shares[static_cast<size_t>(index)]) {
      o.onlyTasks.push_back(t.at("key").get<std::string>());
      o.taskBudgets[t.at("key").get<std::string>()] = t.at("budget").get<int>();
    }
    o.recordsPath = (fs::path(plan.value("dir", "")) / ("records-" + std::to_string(index) + ".jsonl")).string();
    std::string model = plan.value("model", "");
    std::printf("array task %d on %s: %zu tuning task(s), records %s\n", index,
                std::getenv("SLURMD_NODENAME") ? std::getenv("SLURMD_NODENAME") : "?", o.onlyTasks.size(),
                o.recordsPath.c_str());
    std::fflush(stdout);
    int lastTotal = -1;
    auto r = tune(model, o, [&](const TuneProgress& p) {
      if (p.totalTrials != lastTotal) {
        std::printf("  task %d/%d %s: %d/%d trials, %d measured by this run\n", p.taskIndex + 1, p.numTasks,
                    p.taskName.c_str(), p.taskTrials, p.taskBudget, p.totalTrials);
        std::fflush(stdout);
        lastTotal = p.totalTrials;
      }
      return true;
    });
    if (!r) return fail(r.error().message, r.error().kind);
    std::printf("done: %d measured, %d failed, %d records written\n", r->totalMeasured, r->totalErrors,
                r->recordsWritten);
    return 0;
  } catch (const Error& e) {
    return fail(e.what(), e.kind());
  } catch (const std::exception& e) {
    return fail(std::string("internal error: ") + e.what(), ErrorKind::Internal);
  }
}

}  // namespace kiln::app

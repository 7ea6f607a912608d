// kiln tune: the façade's tuning loop over core/tune (tasks, spaces, tuners, records) and
// profiler/tune_measure (candidates measured in worker processes). See app/tune.h.
#include "app/tune.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>
#include <iostream>
#include <thread>
#include <utility>

#include <nlohmann/json.hpp>

#include "app/facade_internal.h"
#include "app/measure_internal.h"
#include "app/tune_internal.h"
#include "core/tune/tune_loop.h"
#include "codegen/llvm/jit.h"
#include "core/lower/schedule.h"
#include "core/lower/schedule_config.h"
#include "core/tune/records.h"
#include "core/tune/space.h"
#include "core/tune/task.h"
#include "core/tune/tuner.h"
#include "profiler/context.h"
#include "profiler/time_evaluator.h"
#include "profiler/tune_measure.h"
#include "runtime/graph_executor.h"
#include "runtime/thread_pool.h"

namespace kiln::app {

namespace fs = std::filesystem;
using core::tune::TuneRecord;

namespace {

/// The program that serves the worker protocol (measure_internal.h: workerArgv).
std::vector<std::string> tuneWorkerArgv(const TuneOptions& options) {
  return workerArgv(options.workerCommand, "tune-worker");
}

}  // namespace

PreparedTune prepareTune(const std::string& path, const TuneOptions& options) {
  OpenOptions open;
  open.batch = options.batch;
  open.inputs = options.inputs;
  auto model = openModel(path, open);
  if (!model) throw Error(model.error().message, model.error().kind);
  PreparedTune p{model.value(), lowerFor(*model.value(), options.build), {}, {}, 0, 0, {}};
  if (!p.lowered.target.runnable)
    throw Error("target '" + options.build.target + "' is for cross-compilation, candidates cannot run here",
                ErrorKind::Usage);
  p.lower = core::lower::lowerOptionsFor(p.lowered.target.cpu, p.lowered.target.features);
  p.lower.winograd = options.build.winograd;  // --winograd 0 or 2: no candidate the build would not run
  p.tasks = core::tune::extractTasks(p.lowered.module);
  std::set<std::string> kernels;
  for (const auto& f : p.lowered.module.funcs) kernels.insert(f.name);
  for (const auto& call : p.lowered.module.plan.calls) p.kernelCalls += kernels.count(call.kernel) > 0;
  for (const auto& t : p.tasks) p.tunableCalls += t.weight;
  for (const auto& f : p.lowered.module.funcs) {
    auto key = f.attrs.find("tune_key");
    if (key == f.attrs.end() || !f.attrs.count("trace")) continue;
    for (const auto& t : p.tasks)
      if (t.key == key->second) p.untunedSketchCalls[t.key] = t.weight;
  }
  if (!options.onlyTasks.empty()) {
    std::set<std::string> wanted(options.onlyTasks.begin(), options.onlyTasks.end());
    std::erase_if(p.tasks, [&](const auto& t) {
      return !wanted.count(t.name) && !wanted.count(t.key) && !wanted.count(t.kind);
    });
    if (p.tasks.empty()) throw Error("none of the requested tasks is in the model", ErrorKind::Usage);
  }
  return p;
}

const std::vector<std::string>& tunerNames() { return core::tune::tunerNames(); }
const std::vector<std::string>& featureSetNames() { return core::tune::featureSetNames(); }

std::vector<int> tuneBudgets(const std::vector<core::tune::TuneTask>& tasks, const TuneOptions& options) {
  std::vector<int> out(tasks.size(), std::max(1, options.trialsPerTask));
  if (!options.taskBudgets.empty()) {
    for (size_t i = 0; i < tasks.size(); ++i) {
      auto it = options.taskBudgets.find(tasks[i].key);
      if (it == options.taskBudgets.end()) it = options.taskBudgets.find(tasks[i].name);
      if (it != options.taskBudgets.end()) out[i] = std::max(1, it->second);
    }
    return out;
  }
  if (options.totalTrials <= 0 || tasks.empty()) return out;
  double total = 0;
  for (const auto& t : tasks) total += t.weight * t.flops;
  for (size_t i = 0; i < tasks.size(); ++i) {
    double share = total > 0 ? tasks[i].weight * tasks[i].flops / total : 1.0 / static_cast<double>(tasks.size());
    out[i] = std::max(2, static_cast<int>(std::lround(share * options.totalTrials)));
  }
  return out;
}

std::vector<TuneRecord> priorTuneRecords(const TuneOptions& options, profiler::Store* store,
                                         const std::vector<core::tune::TuneTask>& tasks, const std::string& target,
                                         int& badLines, std::string& problem) {
  std::vector<TuneRecord> out;
  if (!options.recordsPath.empty()) {
    core::tune::RecordFile file = core::tune::readRecords(options.recordsPath);
    badLines = file.badLines;
    problem = file.firstProblem;
    for (auto& r : file.records)
      if (r.target == target) out.push_back(std::move(r));
  }
  if (store) {
    for (const auto& task : tasks) {
      for (const auto& sr : store->tuningRecords(task.key, target)) {
        TuneRecord r;
        if (core::tune::parseRecord(sr.config, r)) out.push_back(std::move(r));
      }
    }
  }
  return out;
}

int completeRecordsFile(const std::string& path, const std::vector<TuneRecord>& all,
                        const std::vector<core::tune::TuneTask>& tasks, const std::string& target) {
  std::vector<TuneRecord> inFile = core::tune::readRecords(path).records;
  core::lower::ScheduleConfigs fromFile = core::tune::bestConfigs(inFile, target);
  core::lower::ScheduleConfigs fromAll = core::tune::bestConfigs(all, target);
  std::set<std::string> missing;
  for (const auto& task : tasks) {
    auto want = fromAll.byKey.find(task.key);
    if (want == fromAll.byKey.end()) continue;
    auto have = fromFile.byKey.find(task.key);
    if (have == fromFile.byKey.end() || have->second != want->second) missing.insert(task.key);
  }
  std::vector<TuneRecord> copied;
  for (TuneRecord& r : core::tune::decidingRecords(all, target))
    if (missing.count(r.key)) copied.push_back(std::move(r));
  core::tune::appendRecords(path, copied);
  return static_cast<int>(copied.size());
}

std::pair<double, double> tuneSideBySide(const std::string& path, const Model& model, const TuneOptions& options,
                                         const core::lower::ScheduleConfigs& tuned) {
  ScratchDir scratch("tune");
  BenchSpec spec = benchSpecOf(model, !options.inputs.empty());
  spec.batch = options.batch;
  spec.threads = options.build.threads > 0 ? options.build.threads : runtime::numThreads();
  spec.inputs = writeBenchInputs(scratch.path(), randomInputs(model));
  spec.workerCommand = options.workerCommand;
  BuildOptions build = options.build;
  build.threads = spec.threads;
  profiler::BenchOptions bench;
  bench.workDir = scratch.path();
  bench.warmup = 1;
  bench.repeat = 15;
  bench.minRepeatMs = 20;
  profiler::BenchResult r = profiler::runSideBySide(
      {kilnBenchBackend("kiln-untuned", build, spec), kilnBenchBackend("kiln", build, spec, &tuned)}, bench);
  auto median = [](const profiler::BenchRow& row) { return row.ok() ? row.timing.medianMs : 0.0; };
  return {median(r.rows[0]), median(r.rows[1])};
}

std::shared_ptr<const core::lower::ScheduleConfigs> schedulesFor(const BuildOptions& options, const std::string& target) {
  if (options.records.empty()) return nullptr;
  // "store" (the default session store) or a store file: the records every tuning run kept.
  bool isStore = options.records == "store" || options.records.ends_with(".db");
  if (isStore) {
    std::string db = resolveDbPath(options.records == "store" ? "" : options.records);
    if (!fs::exists(db)) throw Error(db + ": no such session store", ErrorKind::Io);
    profiler::Store store(db);
    std::vector<TuneRecord> records;
    for (const auto& sr : store.tuningRecords("", target)) {
      TuneRecord r;
      if (core::tune::parseRecord(sr.config, r)) records.push_back(std::move(r));
    }
    return std::make_shared<core::lower::ScheduleConfigs>(core::tune::bestConfigs(records, target));
  }
  if (!fs::exists(options.records)) throw Error(options.records + ": no such tuning-records file", ErrorKind::Io);
  core::tune::RecordFile file = core::tune::readRecords(options.records);
  return std::make_shared<core::lower::ScheduleConfigs>(core::tune::bestConfigs(file.records, target));
}

Result<RecordsCheck> checkRecords(const std::string& path) {
  return guarded<RecordsCheck>(path, [&] {
    RecordsCheck check;
    if (path.empty() || path == "store" || path.ends_with(".db")) return check;
    std::error_code ec;
    if (!fs::exists(path, ec)) throw Error("no such tuning-records file", ErrorKind::Io);
    if (fs::is_directory(path, ec)) throw Error("is a directory, expected a tuning-records file", ErrorKind::Io);
    core::tune::RecordFile file = core::tune::readRecords(path);
    check.records = static_cast<int>(file.records.size());
    check.badLines = file.badLines;
    check.firstProblem = file.firstProblem;
    if (check.records == 0 && check.badLines > 0)
      throw Error("not a tuning-records file: none of its " + std::to_string(check.badLines) +
                      " line(s) is a record (" + check.firstProblem + ")",
                  ErrorKind::InvalidInput);
    return check;
  });
}

Result<std::vector<TuneTaskInfo>> tuneTasks(const std::string& path, const TuneOptions& options) {
  return guarded<std::vector<TuneTaskInfo>>(path, [&] {
    PreparedTune p = prepareTune(path, options);
    std::vector<TuneTaskInfo> out;
    for (const auto& t : p.tasks) out.push_back(core::tune::taskInfo(t, p.lower));
    return out;
  });
}

TuneStart beginTune(const PreparedTune& p, const TuneOptions& options, profiler::Store* store) {
  TuneStart s;
  s.target = p.lowered.target.strWithCpu();
  s.threads = options.build.threads > 0 ? options.build.threads : runtime::numThreads();
  s.result.model = p.model->name;
  s.result.target = s.target;
  s.result.tuner = options.tuner;
  s.result.cacheFlushed = options.cacheFlush;
  s.result.recordsPath = options.recordsPath;
  if (store) {
    s.result.stored = store->transaction([&] {
      return beginStoredRun(*store, options.store, p.model->path, p.model->name, "tune",
                            runContextFor(options.build, s.threads, s.target, 0));
    });
    if (auto session = store->loadSession(s.result.stored.sessionId)) s.modelId = session->summary.model.id;
  }
  s.prior = priorTuneRecords(options, store, p.tasks, s.target, s.result.badRecordLines, s.result.badRecordProblem);
  return s;
}

Result<TuneResult> tune(const std::string& path, const TuneOptions& options, const TuneProgressFn& progress) {
  // With --slurm, errors of the cluster name what failed (sbatch, slurmctld, --partition), not
  // the model; tuneOnSlurm names the model in its own errors.
  return guarded<TuneResult>(options.slurm.enabled ? "" : path, [&] {
    auto start = std::chrono::steady_clock::now();
    if (std::find(core::tune::tunerNames().begin(), core::tune::tunerNames().end(), options.tuner) ==
        core::tune::tunerNames().end())
      throw Error("unknown tuner '" + options.tuner + "' (expected xgb, random or grid)", ErrorKind::Usage);
    core::tune::featureSetNamed(options.features);  // a bad name fails here, before any work starts
    if (options.recordsPath == "store" || options.recordsPath.ends_with(".db"))
      throw Error("--records of a tuning run names a JSON-lines file (every record is kept in the session store "
                  "as well)",
                  ErrorKind::Usage);
    if (options.slurm.enabled) return tuneOnSlurm(path, options, progress);
    std::unique_ptr<profiler::Store> store = openStoreFor(options.store);
    PreparedTune p = prepareTune(path, options);
    TuneStart begun = beginTune(p, options, store.get());
    const std::string& target = begun.target;
    int threads = begun.threads;
    int64_t modelId = begun.modelId;
    TuneResult& result = begun.result;
    std::vector<TuneRecord>& prior = begun.prior;
    result.kernelCalls = p.kernelCalls;
    result.tunableCalls = p.tunableCalls;
    result.untunedSketchCalls = p.untunedSketchCalls;

    std::vector<TuneRecord> fresh;  // this run's records
    auto write = [&](const TuneRecord& r) {
      fresh.push_back(r);
      if (!options.recordsPath.empty()) core::tune::appendRecords(options.recordsPath, {r});
      if (store) {
        // The store keeps the whole record as its config JSON (parseRecord reads it back).
        profiler::TuningRecord sr{r.key, r.target, core::tune::recordJson(r), r.costMs};
        store->transaction([&] { return store->addTuningRecord(sr, modelId, version()); });
      }
      ++result.recordsWritten;
    };

    int workers = std::clamp(static_cast<int>(std::thread::hardware_concurrency()), 1, 2);
    profiler::TuneRunner runner(tuneWorkerArgv(options), workers, options.measureTimeoutSeconds);
    // Candidates are compiled exactly as the build compiles them (target, -O level).
    profiler::WorkerMeasurer measurer(runner, options.build.target, threads, options.build.optLevel,
                                      options.cacheFlush);
    core::tune::TuneLoopOptions loop;
    loop.tuner = options.tuner;
    loop.tunerOptions.features = core::tune::featureSetNamed(options.features);
    loop.tunerOptions.threads = threads;
    loop.seed = options.seed;
    loop.batchSize = options.batchSize;
    loop.earlyStopping = options.earlyStopping;
    if (options.timeLimitSeconds > 0)
      loop.outOfTime = [&] { return secondsSince(start) > options.timeLimitSeconds; };
    loop.confirmTop = options.confirmTop;
    loop.target = target;
    loop.version = version();
    loop.now = profiler::utcNow;
    loop.lower = p.lower;
    auto report = [&](const core::tune::TuneLoopProgress& lp) {
      if (!progress) return true;
      TuneProgress pr;
      static_cast<core::tune::TuneLoopProgress&>(pr) = lp;
      pr.elapsedSeconds = secondsSince(start);
      pr.etaSeconds = lp.totalTrials > 0
                          ? pr.elapsedSeconds / lp.totalTrials * std::max(0, lp.totalBudget - lp.totalTrials)
                          : 0;
      return progress(pr);
    };
    core::tune::TuneLoopResult searched =
        core::tune::runTuneLoop(p.tasks, tuneBudgets(p.tasks, options), prior, measurer, loop, write, report);
    result.tasks = std::move(searched.tasks);
    result.totalMeasured = searched.totalMeasured;
    result.totalErrors = searched.totalErrors;
    result.cancelled = searched.cancelled;

    // The whole model, untuned and with the best configurations, timed side by side.
    if (!result.cancelled && options.compareEndToEnd) {
      core::lower::ScheduleConfigs configs;
      for (const auto& t : result.tasks)
        if (!t.bestKnobs.empty()) configs.byKey[t.info.workloadKey] = core::lower::parseKnobs(t.bestKnobs);
      auto [a, b] = tuneSideBySide(path, *p.model, options, configs);
      result.untunedMs = a;
      result.tunedMs = b;
    }
    if (!options.recordsPath.empty()) {
      std::vector<TuneRecord> all = prior;
      all.insert(all.end(), fresh.begin(), fresh.end());
      result.recordsCopied = completeRecordsFile(options.recordsPath, all, p.tasks, target);
    }
    result.workersStarted = runner.workersStarted();
    result.wallSeconds = secondsSince(start);
    return result;
  });
}

int TuneResult::searchedCalls() const {
  int calls = 0;
  std::set<std::string> tuned;
  for (const auto& t : tasks) {
    if (t.bestKnobs.empty()) continue;  // nothing chosen: the build runs the default, counted below
    tuned.insert(t.info.workloadKey);
    // Every tunable kernel is a sketch: its best configuration is an annotation (an old record of
    // a retired builder's knobs builds the annotation it stands for, or the default's).
    calls += t.info.weight;
  }
  for (const auto& [key, n] : untunedSketchCalls)
    if (!tuned.count(key)) calls += n;
  return calls;
}

std::string tuneResultJson(const TuneResult& r) {
  nlohmann::json j;
  j["model"] = r.model;
  j["target"] = r.target;
  j["tuner"] = r.tuner;
  j["wall_seconds"] = r.wallSeconds;
  j["measured"] = r.totalMeasured;
  j["errors"] = r.totalErrors;
  j["cancelled"] = r.cancelled;
  j["records"] = r.recordsPath;
  j["records_written"] = r.recordsWritten;
  j["records_copied"] = r.recordsCopied;
  j["untuned_ms"] = r.untunedMs;
  j["tuned_ms"] = r.tunedMs;
  j["kernel_calls"] = r.kernelCalls;
  j["tunable_calls"] = r.tunableCalls;
  j["searched_calls"] = r.searchedCalls();
  j["cache_flush"] = r.cacheFlushed;
  j["tasks"] = nlohmann::json::array();
  for (const auto& t : r.tasks) {
    nlohmann::json tj{{"name", t.info.name},         {"key", t.info.workloadKey}, {"op", t.info.op},
                      {"weight", t.info.weight},     {"flops", t.info.flops},     {"space", t.info.spaceSize},
                      {"default_knobs", t.defaultKnobs}, {"default_ms", t.defaultMs}, {"best_knobs", t.bestKnobs},
                      {"best_ms", t.bestMs},         {"best_gflops", t.bestGflops}, {"measured", t.measured},
                      {"skipped", t.skipped},        {"errors", t.errors},          {"confirmed", t.confirmed}};
    tj["trials"] = nlohmann::json::array();
    for (const auto& trial : t.trials)
      tj["trials"].push_back({{"index", trial.index}, {"knobs", trial.knobs}, {"ms", trial.ms},
                              {"gflops", trial.gflops}, {"error", trial.error}, {"from_records", trial.fromRecords}});
    j["tasks"].push_back(std::move(tj));
  }
  return j.dump(2);
}

int runTuneWorker() { return profiler::serveTuneWorker(std::cin, std::cout); }

}  // namespace kiln::app

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

TuneTaskInfo tuneTaskInfo(const core::tune::TuneTask& task, const core::lower::LowerOptions& lower) {
  TuneTaskInfo info;
  info.name = task.name;
  info.workloadKey = task.key;
  info.op = task.kind;
  info.weight = task.weight;
  info.flops = task.flops;
  info.spaceSize = core::tune::ConfigSpace::forKey(task.key, lower).size();
  return info;
}

PreparedTune prepareTune(const std::string& path, const TuneOptions& options) {
  OpenOptions open;
  open.batch = options.batch;
  open.inputs = options.inputs;
  auto model = openModel(path, open);
  if (!model) throw Error(model.error().message, model.error().kind);
  PreparedTune p{model.value(), lowerFor(*model.value(), options.build), {}, {}};
  if (!p.lowered.target.runnable)
    throw Error("target '" + options.build.target + "' is for cross-compilation, candidates cannot run here",
                ErrorKind::Usage);
  p.lower = core::lower::lowerOptionsFor(p.lowered.target.cpu, p.lowered.target.features);
  p.tasks = core::tune::extractTasks(p.lowered.module);
  if (!options.onlyTasks.empty()) {
    std::set<std::string> wanted(options.onlyTasks.begin(), options.onlyTasks.end());
    std::erase_if(p.tasks, [&](const auto& t) { return !wanted.count(t.name) && !wanted.count(t.key); });
    if (p.tasks.empty()) throw Error("none of the requested tasks is in the model", ErrorKind::Usage);
  }
  return p;
}

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

int takeLatestRound(TuneTaskResult& tr, const core::tune::TuneTask& task, const std::vector<TuneRecord>& records) {
  std::string latest;
  for (const TuneRecord& r : records)
    if (r.key == task.key && r.tuner == core::tune::kConfirmTuner) latest = std::max(latest, r.timestamp);
  if (latest.empty()) return 0;
  int count = 0;
  double best = 0;
  for (const TuneRecord& r : records) {
    if (r.key != task.key || r.tuner != core::tune::kConfirmTuner || r.timestamp != latest || !r.ok()) continue;
    ++count;
    std::string text = core::lower::knobsText(r.knobs);
    if (text == task.defaultKnobs) tr.defaultMs = r.costMs;
    if (best == 0 || r.costMs < best) {
      best = r.costMs;
      tr.bestKnobs = text;
    }
  }
  if (best > 0) {
    tr.bestMs = best;
    tr.bestGflops = task.flops / (best * 1e6);
  }
  return count;
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

namespace {

/// The configurations a confirmation round times: the `top` fastest distinct error-free trials,
/// fastest first, and the default's when it ran.
std::vector<std::string> finalists(const TuneTaskResult& tr, int top) {
  std::map<std::string, double> fastest;
  for (const TuneTrial& t : tr.trials) {
    if (!t.error.empty() || t.ms <= 0) continue;
    auto [it, fresh] = fastest.emplace(t.knobs, t.ms);
    if (!fresh) it->second = std::min(it->second, t.ms);
  }
  std::vector<std::pair<double, std::string>> ranked;
  for (const auto& [knobs, ms] : fastest) ranked.emplace_back(ms, knobs);
  std::sort(ranked.begin(), ranked.end());
  std::vector<std::string> out;
  for (const auto& entry : ranked)
    if (static_cast<int>(out.size()) < top) out.push_back(entry.second);
  if (fastest.count(tr.defaultKnobs) && std::find(out.begin(), out.end(), tr.defaultKnobs) == out.end())
    out.push_back(tr.defaultKnobs);
  return out;
}

}  // namespace

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
    for (const auto& t : p.tasks) out.push_back(tuneTaskInfo(t, p.lower));
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

    std::vector<int> budget = tuneBudgets(p.tasks, options);
    int totalBudget = 0;
    for (int b : budget) totalBudget += b;
    int workers = std::clamp(static_cast<int>(std::thread::hardware_concurrency()), 1, 2);
    profiler::TuneRunner runner(tuneWorkerArgv(options), workers, options.measureTimeoutSeconds);
    int totalTrials = 0;
    bool stop = false;

    // What earlier tasks measured guides the model-guided tuner on later ones (tuner.h).
    auto history = std::make_shared<core::tune::TuningHistory>();
    for (size_t ti = 0; ti < p.tasks.size() && !stop; ++ti) {
      const core::tune::TuneTask& task = p.tasks[ti];
      core::tune::ConfigSpace space = core::tune::ConfigSpace::forKey(task.key, p.lower);
      auto tuner = core::tune::makeTuner(options.tuner, space, options.seed + ti, history);
      TuneTaskResult tr;
      tr.info = tuneTaskInfo(task, p.lower);
      tr.defaultKnobs = task.defaultKnobs;
      double defaultMs = 0;
      auto consider = [&](const std::string& knobs, double ms) {
        if (ms > 0 && (tr.bestMs == 0 || ms < tr.bestMs)) {
          tr.bestMs = ms;
          tr.bestKnobs = knobs;
          tr.bestGflops = task.flops / (ms * 1e6);
          return true;
        }
        return false;
      };
      // What earlier runs measured counts towards the budget and teaches the tuner.
      // A confirmation round is due when the search has records newer than the latest round.
      std::string latestSearch, latestRound;
      for (const TuneRecord& r : prior) {
        if (r.key != task.key) continue;
        if (r.tuner == core::tune::kConfirmTuner) {
          latestRound = std::max(latestRound, r.timestamp);
          continue;
        }
        latestSearch = std::max(latestSearch, r.timestamp);
        auto index = space.indexOf(r.knobs);
        if (!index || tuner->visited(*index)) continue;
        tuner->update({*index}, {r.ok() ? r.costMs : -1.0});
        std::string text = core::lower::knobsText(r.knobs);
        tr.trials.push_back({static_cast<int>(tr.trials.size()) + 1, text, r.costMs,
                             r.ok() ? task.flops / (r.costMs * 1e6) : 0, r.error, true});
        ++tr.skipped;
        consider(text, r.ok() ? r.costMs : 0);
        if (text == task.defaultKnobs && r.ok()) defaultMs = r.costMs;
      }
      int sinceBest = 0;
      int planned = std::min<int64_t>(budget[ti], space.size());
      auto report = [&](const std::string& message) {
        if (!progress) return true;
        TuneProgress pr;
        pr.taskIndex = static_cast<int>(ti);
        pr.numTasks = static_cast<int>(p.tasks.size());
        pr.taskName = task.name;
        pr.taskTrials = tr.measured + tr.skipped;
        pr.taskBudget = planned;
        pr.totalTrials = totalTrials;
        pr.totalBudget = totalBudget;
        pr.errors = result.totalErrors + tr.errors;
        pr.bestGflops = tr.bestGflops;
        pr.defaultGflops = defaultMs > 0 ? task.flops / (defaultMs * 1e6) : 0;
        pr.elapsedSeconds = secondsSince(start);
        pr.etaSeconds = totalTrials > 0 ? pr.elapsedSeconds / totalTrials * std::max(0, totalBudget - totalTrials) : 0;
        pr.message = message;
        return progress(pr);
      };
      if (!report("task " + std::to_string(ti + 1) + "/" + std::to_string(p.tasks.size()) + ": " + task.name)) {
        result.cancelled = stop = true;
        break;
      }

      // The heuristic's own configuration first: the baseline every candidate is compared to.
      std::vector<int64_t> first;
      if (auto index = space.indexOf(core::lower::parseKnobs(task.defaultKnobs)); index && !tuner->visited(*index))
        first.push_back(*index);

      while (tr.measured + tr.skipped < planned && !tuner->exhausted()) {
        if (options.timeLimitSeconds > 0 && secondsSince(start) > options.timeLimitSeconds) {
          stop = true;
          break;
        }
        int want = std::min(options.batchSize, planned - tr.measured - tr.skipped);
        std::vector<int64_t> batch = first.empty() ? tuner->propose(want) : std::exchange(first, {});
        if (batch.empty()) break;
        std::vector<profiler::CandidateRequest> requests;
        for (int64_t index : batch) {
          profiler::CandidateRequest r;
          r.key = task.key;
          r.knobs = core::lower::knobsText(space.config(index));
          r.target = options.build.target;  // compiled exactly as the build compiles
          r.threads = threads;
          r.optLevel = options.build.optLevel;
          requests.push_back(std::move(r));
        }
        // Each record is written as soon as its candidate is measured: a killed run loses only
        // the candidates still in flight, and resuming skips every record written.
        std::vector<double> costs(batch.size(), -1.0);
        runner.run(requests, [&](size_t k, const profiler::CandidateResult& m) {
          TuneRecord rec;
          rec.key = task.key;
          rec.target = target;
          rec.knobs = space.config(batch[k]);
          rec.costMs = m.ok() ? m.medianMs : 0;
          rec.costsMs = m.samplesMs;
          rec.error = m.error;
          rec.tuner = options.tuner;
          rec.timestamp = profiler::utcNow();
          rec.version = version();
          write(rec);
          costs[k] = m.ok() ? m.medianMs : -1.0;
          std::string text = core::lower::knobsText(rec.knobs);
          tr.trials.push_back({static_cast<int>(tr.trials.size()) + 1, text, rec.costMs,
                               m.ok() ? task.flops / (m.medianMs * 1e6) : 0, m.error, false});
          ++tr.measured;
          ++totalTrials;
          if (!m.ok()) ++tr.errors;
          if (text == task.defaultKnobs && m.ok()) defaultMs = m.medianMs;
          sinceBest = consider(text, rec.costMs) ? 0 : sinceBest + 1;
          report(task.name + ": " + std::to_string(tr.measured + tr.skipped) + "/" + std::to_string(planned) +
                 " trials");
        });
        tuner->update(batch, costs);
        if (!report(task.name + ": " + std::to_string(tr.measured + tr.skipped) + "/" + std::to_string(planned) +
                    " trials")) {
          result.cancelled = stop = true;
          break;
        }
        if (options.earlyStopping > 0 && sinceBest >= options.earlyStopping) break;
      }
      tuner->finish();
      tr.defaultMs = defaultMs;
      if (!stop && options.confirmTop > 0 && (tr.measured > 0 || latestSearch > latestRound)) {
        std::vector<std::string> names = finalists(tr, options.confirmTop);
        if (names.size() >= 2 &&
            !report(task.name + ": timing the best " + std::to_string(names.size()) + " side by side")) {
          result.cancelled = stop = true;
        } else if (names.size() >= 2) {
          std::vector<profiler::CandidateRequest> requests;
          for (const std::string& knobs : names) {
            profiler::CandidateRequest r;
            r.key = task.key;
            r.knobs = knobs;
            r.target = options.build.target;
            r.threads = threads;
            r.optLevel = options.build.optLevel;
            r.repeat = 15;
            requests.push_back(std::move(r));
          }
          std::vector<profiler::CandidateResult> confirmed = runner.runSideBySide(requests);
          // One timestamp for the round: builds take the latest round of a key (records.h).
          std::string round = profiler::utcNow();
          double bestMs = 0;
          for (size_t k = 0; k < names.size(); ++k) {
            const profiler::CandidateResult& m = confirmed[k];
            if (!m.ok()) continue;
            TuneRecord rec;
            rec.key = task.key;
            rec.target = target;
            rec.knobs = core::lower::parseKnobs(names[k]);
            rec.costMs = m.medianMs;
            rec.costsMs = m.samplesMs;
            rec.tuner = core::tune::kConfirmTuner;
            rec.timestamp = round;
            rec.version = version();
            write(rec);
            ++tr.confirmed;
            if (names[k] == tr.defaultKnobs) tr.defaultMs = m.medianMs;
            if (bestMs == 0 || m.medianMs < bestMs) {
              bestMs = m.medianMs;
              tr.bestKnobs = names[k];
            }
          }
          if (bestMs > 0) {
            tr.bestMs = bestMs;
            tr.bestGflops = task.flops / (bestMs * 1e6);
          }
        }
      }
      // No round this time: builds take an earlier run's latest round, and so does the summary.
      if (tr.confirmed == 0) takeLatestRound(tr, task, prior);
      result.totalMeasured += tr.measured;
      result.totalErrors += tr.errors;
      result.tasks.push_back(std::move(tr));
    }

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

// kiln sweep: latency and throughput per backend over batch sizes. A backend that runs out of
// memory, fails or exceeds its time budget is stopped; its larger batch sizes are recorded as
// skipped with the reason, and the other backends go on. Each point is committed to the store as
// soon as it is measured, so a killed sweep can be resumed (SweepOptions::resume).
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
#include <optional>
#include <set>

#include <nlohmann/json.hpp>

#include "app/facade.h"
#include "app/facade_internal.h"
#include "app/measure_internal.h"
#include "profiler/sha256.h"
#include "profiler/torch_baseline.h"
#include "profiler/torch_compile.h"
#include "runtime/thread_pool.h"

namespace kiln::app {
namespace {

using profiler::Measurement;
using profiler::Status;

Measurement failure(const std::string& backend, int64_t batch, Status status, const std::string& reason) {
  Measurement m;
  m.backend = backend;
  m.batch = batch;
  m.status = status;
  m.reason = reason;
  return m;
}

/// Times `runOnce` within the budget: one untimed run first (a single run over budget is a
/// timeout), then the time evaluator with the rest of the budget.
Measurement timePoint(const std::string& backend, int64_t batch, const std::function<void()>& runOnce,
                      const SweepOptions& o) {
  double budgetMs = o.budgetSeconds * 1000;
  try {
    auto start = std::chrono::steady_clock::now();
    runOnce();
    double firstMs = secondsSince(start) * 1000;
    if (budgetMs > 0 && firstMs > budgetMs)
      return failure(backend, batch, Status::Timeout,
                     "one run took " + std::to_string(static_cast<int>(firstMs)) +
                         " ms, over the budget of " + std::to_string(static_cast<int>(budgetMs)) + " ms");
    profiler::TimingOptions t;
    t.warmup = o.warmup;
    t.repeat = o.repeat;
    t.minRepeatMs = o.minRepeatMs;
    t.budgetMs = budgetMs > 0 ? std::max(1.0, budgetMs - firstMs) : 0;
    Measurement m;
    m.backend = backend;
    m.batch = batch;
    m.timing = profiler::timeIt(runOnce, t);
    if (m.timing.budgetExceeded)
      m.reason = "time budget reached after " + std::to_string(m.timing.samplesMs.size()) + " of " +
                 std::to_string(o.repeat) + " repeats";
    return m;
  } catch (const std::bad_alloc&) {
    return failure(backend, batch, Status::OutOfMemory, "out of memory");
  } catch (const Error& e) {
    return failure(backend, batch, looksOutOfMemory(e.what()) ? Status::OutOfMemory : Status::Failed,
                   e.what());
  }
}

}  // namespace

const std::vector<std::string>& sweepBackendNames() {
  static const auto* names =
      new std::vector<std::string>{"kiln", "pytorch-eager", "pytorch-compiled", "torch-compile"};
  return *names;
}

namespace {

/// A Kiln point measured in this process: build at the batch, then time it.
Measurement timeKilnHere(const std::shared_ptr<const Model>& model, const std::vector<runtime::Tensor>& inputs,
                         int64_t batch, int threads, const SweepOptions& options,
                         std::optional<profiler::BuildRecord>& buildRecord, std::string& target,
                         double& compileSeconds, bool inWorker) {
  auto compiled = build(model, options.build);
  if (!compiled)
    return failure("kiln", batch,
                   looksOutOfMemory(compiled.error().message) ? Status::OutOfMemory : Status::Failed,
                   compiled.error().message);
  CompiledModel& c = *compiled.value();
  target = c.targetString;
  compileSeconds = c.compileSeconds;
  buildRecord = buildRecordOf(c, threads, batch);
  if (inWorker) workerMeasuring();
  return timePoint(
      "kiln", batch,
      [&] {
        auto r = run(c, inputs);
        if (!r) throw Error(r.error().message, r.error().kind);
      },
      options);
}

/// A Kiln point measured in a `kiln measure-worker`: a crash or a hang fails this point only.
/// A cancel (IsolationOptions::cancelled) kills the worker and sets `cancelled`: the point is
/// then neither measured nor failed.
Measurement timeKilnIsolated(const std::string& path, int64_t batch, const SweepOptions& options,
                             std::optional<profiler::BuildRecord>& buildRecord, std::string& target,
                             double& compileSeconds, bool& cancelled) {
  nlohmann::json request = {{"op", "time"},
                            {"path", path},
                            {"batch", batch},
                            {"build", toJson(options.build)},
                            {"warmup", options.warmup},
                            {"repeat", options.repeat},
                            {"min_repeat_ms", options.minRepeatMs},
                            {"budget_seconds", options.budgetSeconds}};
  IsolationOptions isolation = options.isolate;
  // A point may run for its whole budget: the limit is never shorter than that.
  isolation.timeoutSeconds = std::max(isolation.timeoutSeconds, options.budgetSeconds * 1.5 + 5);
  auto reply = callMeasureWorker(request, isolation);
  if (!reply) {
    const std::string& why = reply.error().message;
    if (isolation.cancelled && isolation.cancelled()) {
      cancelled = true;
      return failure("kiln", batch, Status::Skipped, "cancelled");
    }
    bool timedOut = why.find("timed out") != std::string::npos;
    return failure("kiln", batch, timedOut ? Status::Timeout : Status::Failed, why);
  }
  const nlohmann::json& j = reply.value();
  if (j.contains("build")) buildRecord = buildRecordFromJson(j["build"]);
  target = j.value("target", target);
  compileSeconds = j.value("compile_seconds", 0.0);
  return measurementFromJson(j.at("measurement"));
}

/// Where a sweep's points go in the store, one committed transaction per point.
struct SweepFiling {
  int64_t runId = 0, sweepId = 0;
  StoredIds ids;
  std::map<std::pair<std::string, int64_t>, Measurement> done;  // (backend, batch) → stored point
};

/// The latest sweep of this model in the session the options choose, if it has the same
/// batches, backends, budget and build and misses some points.
std::optional<SweepFiling> findUnfinished(profiler::Store& store, const std::string& path, const SweepResult& r,
                                          const SweepOptions& o, int threads) {
  std::string sha = profiler::sha256File(path);
  int64_t session = o.store.session;
  if (session < 0) return std::nullopt;  // a new session holds nothing to resume
  if (session == 0)
    for (const auto& s : store.listSessions())
      if (s.model.sha256 == sha) session = s.id;
  if (session <= 0) return std::nullopt;
  auto data = store.loadSession(session);
  if (!data || data->summary.model.sha256 != sha) return std::nullopt;
  std::string target = codegen::Target::parse(o.build.target).str();
  std::string records = o.build.records.empty() ? "none" : o.build.records;
  for (auto it = data->sweeps.rbegin(); it != data->sweeps.rend(); ++it) {
    const profiler::StoredRun* run = data->run(it->runId);
    if (!run || it->batches != r.batches || it->backends != r.backends || it->budgetSeconds != o.budgetSeconds ||
        run->context.threads != threads || run->context.optLevel != o.build.optLevel ||
        run->context.tuningRecords != records ||
        (run->context.target != target && run->context.target != o.build.target))
      continue;
    SweepFiling f;
    f.runId = it->runId;
    f.sweepId = it->id;
    f.ids = StoredIds{store.path(), session, it->runId, 0};
    for (const auto& m : data->measurements)
      if (m.sweepId == it->id) f.done[{m.measurement.backend, m.measurement.batch}] = m.measurement;
    if (f.done.size() >= r.batches.size() * r.backends.size()) return std::nullopt;  // finished
    return f;
  }
  return std::nullopt;
}

}  // namespace

nlohmann::json serveTimeRequest(const nlohmann::json& q) {
  std::string path = q.at("path").get<std::string>();
  SweepOptions o;
  int64_t batch = q.at("batch").get<int64_t>();
  o.build = buildOptionsFromJson(q.at("build"));
  o.warmup = q.at("warmup").get<int>();
  o.repeat = q.at("repeat").get<int>();
  o.minRepeatMs = q.at("min_repeat_ms").get<double>();
  o.budgetSeconds = q.at("budget_seconds").get<double>();
  int threads = o.build.threads > 0 ? o.build.threads : runtime::numThreads();
  runtime::setNumThreads(threads);
  OpenOptions open;
  open.batch = batch;
  auto model = openModel(path, open);
  if (!model) throw Error(model.error().message, model.error().kind);
  std::vector<runtime::Tensor> inputs = randomInputs(*model.value());
  std::optional<profiler::BuildRecord> record;
  std::string target;
  double compileSeconds = 0;
  Measurement m = timeKilnHere(model.value(), inputs, batch, threads, o, record, target, compileSeconds, true);
  nlohmann::json reply = {{"measurement", toJson(m)}, {"target", target}, {"compile_seconds", compileSeconds}};
  if (record) reply["build"] = toJson(*record);
  return reply;
}

Result<SweepResult> sweep(const std::string& path, const SweepOptions& options, const ProgressFn& progress) {
  return guarded<SweepResult>(path, [&] {
    const auto& known = sweepBackendNames();
    for (const auto& b : options.backends)
      if (std::find(known.begin(), known.end(), b) == known.end())
        throw Error(
            "unknown backend '" + b + "' (expected kiln, pytorch-eager, pytorch-compiled or torch-compile)",
            ErrorKind::Usage);
    if (options.backends.empty()) throw Error("no backends to sweep", ErrorKind::Usage);
    std::set<int64_t> batchSet;
    for (int64_t b : options.batches) {
      if (b < 1) throw Error("batch sizes must be positive, got " + std::to_string(b), ErrorKind::Usage);
      batchSet.insert(b);
    }
    if (batchSet.empty()) throw Error("no batch sizes to sweep", ErrorKind::Usage);
    std::unique_ptr<profiler::Store> store = openStoreFor(options.store);
    // A file that is not a model fails here, once, not as a failure of every point.
    if (auto model = openModel(path); !model) throw Error(model.error().message, model.error().kind);
    parseTarget(options.build.target);  // so does an unknown target

    SweepResult result;
    result.batches.assign(batchSet.begin(), batchSet.end());
    result.backends = options.backends;
    int threads = options.build.threads > 0 ? options.build.threads : runtime::numThreads();
    runtime::setNumThreads(threads);

    std::map<std::string, std::string> stopped;  // backend → why its larger batches are skipped
    std::map<std::string, std::unique_ptr<profiler::TorchModel>> torchModels;
    std::string target = options.build.target;
    double compileSeconds = 0;
    bool cancelled = false;

    std::optional<SweepFiling> filing;
    if (store && options.resume) filing = findUnfinished(*store, path, result, options, threads);
    bool targetKnown = false;
    // Each point is committed on its own: a killed sweep loses only the point in flight.
    auto file = [&](const Measurement& m, const std::optional<profiler::BuildRecord>& record) {
      if (!store) return;
      store->transaction([&] {
        if (!filing) {
          filing.emplace();
          filing->ids = beginStoredRun(*store, options.store, path, result.model, "sweep",
                                       runContextFor(options.build, threads, target, compileSeconds));
          filing->runId = filing->ids.runId;
          filing->sweepId = store->addSweep(filing->runId, result.batches, result.backends, options.budgetSeconds);
        } else if (record && !targetKnown) {
          store->updateRunBuild(filing->runId, target, compileSeconds);
        }
        if (record) targetKnown = true;
        int64_t buildId = record ? store->addBuild(filing->runId, *record) : 0;
        store->addMeasurement(filing->runId, buildId, filing->sweepId, m);
      });
    };

    for (int64_t batch : result.batches) {
      std::shared_ptr<const Model> model;
      std::string modelError;
      std::vector<runtime::Tensor> inputs;
      auto needModel = [&]() -> bool {
        if (model || !modelError.empty()) return static_cast<bool>(model);
        OpenOptions open;
        open.batch = batch;
        auto opened = openModel(path, open);
        if (!opened) {
          modelError = opened.error().message;
          return false;
        }
        model = opened.value();
        inputs = randomInputs(*model);
        return true;
      };
      if (result.model.empty() && needModel()) result.model = model->name;
      for (const std::string& backend : options.backends) {
        if (filing) {
          auto it = filing->done.find({backend, batch});
          if (it != filing->done.end()) {
            // Measured by the run being resumed: kept as it is, not measured again.
            const Measurement& m = it->second;
            if (!m.ok() && m.status != Status::Unavailable && m.status != Status::Skipped)
              stopped[backend] = std::string("stopped after ") + profiler::statusName(m.status) + " at batch " +
                                 std::to_string(batch);
            else if (m.status == Status::Skipped && !stopped.count(backend))
              stopped[backend] = m.reason;
            result.points.push_back(m);
            ++result.resumedPoints;
            continue;
          }
        }
        std::string step = backend + " at batch " + std::to_string(batch);
        if (!cancelled && options.isolate.cancelled && options.isolate.cancelled()) cancelled = true;
        if (!cancelled && progress && !progress(step)) cancelled = true;
        if (cancelled) {
          // Not filed: a resumed sweep measures it.
          result.points.push_back(failure(backend, batch, Status::Skipped, "cancelled"));
          continue;
        }
        Measurement m;
        std::optional<profiler::BuildRecord> record;
        if (stopped.count(backend)) {
          m = failure(backend, batch, Status::Skipped, stopped[backend]);
        } else if (!needModel()) {
          m = failure(backend, batch, Status::Failed, modelError);
        } else if (backend == "kiln") {
          double seconds = 0;
          m = options.isolate.enabled
                  ? timeKilnIsolated(path, batch, options, record, target, seconds, cancelled)
                  : timeKilnHere(model, inputs, batch, threads, options, record, target, seconds, false);
          if (cancelled) {
            // Its worker was killed: not filed, so a resumed sweep measures it.
            result.points.push_back(std::move(m));
            continue;
          }
          if (compileSeconds == 0) compileSeconds = seconds;
        } else if (backend == "torch-compile") {
          profiler::TorchCompileOptions tc;
          tc.python = options.python;
          tc.modelPath = path;
          tc.batch = batch;
          tc.threads = threads;
          tc.warmup = options.warmup;
          tc.repeat = options.repeat;
          tc.minRepeatMs = options.minRepeatMs;
          tc.timeoutSeconds = std::max(120.0, options.budgetSeconds * 4);
          tc.cancelled = options.isolate.cancelled;
          m = profiler::measureTorchCompile(tc);
          m.batch = batch;
          if (options.isolate.cancelled && options.isolate.cancelled()) {
            // Killed by the cancel: not filed, so a resumed sweep measures it.
            cancelled = true;
            m = failure(backend, batch, Status::Skipped, "cancelled");
            result.points.push_back(std::move(m));
            continue;
          }
        } else {
          auto mode = backend == "pytorch-eager" ? profiler::TorchMode::Eager : profiler::TorchMode::Compiled;
          try {
            if (!torchModels[backend])
              torchModels[backend] = std::make_unique<profiler::TorchModel>(path, mode, threads);
            profiler::TorchModel& tm = *torchModels[backend];
            m = timePoint(
                backend, batch, [&] { tm.run(inputs); }, options);
          } catch (const Error& e) {
            m = failure(backend, batch, Status::Failed, e.what());
          }
        }
        if (!m.ok() && m.status != Status::Unavailable && m.status != Status::Skipped)
          stopped[backend] = std::string("stopped after ") + profiler::statusName(m.status) + " at batch " +
                             std::to_string(batch);
        if (result.model.empty()) result.model = std::filesystem::path(path).stem().string();
        file(m, record);
        if (options.onPoint) options.onPoint(m);
        result.points.push_back(std::move(m));
      }
    }
    if (result.model.empty()) result.model = std::filesystem::path(path).stem().string();
    result.context = runContextFor(options.build, threads, target, compileSeconds);
    if (store && !filing) {
      // Nothing measured (all cancelled): the run is still filed, empty.
      result.stored = store->transaction([&] {
        StoredIds ids = beginStoredRun(*store, options.store, path, result.model, "sweep", result.context);
        store->addSweep(ids.runId, result.batches, result.backends, options.budgetSeconds);
        return ids;
      });
    } else if (filing) {
      result.stored = filing->ids;
    }
    return result;
  });
}

Result<std::optional<UnfinishedSweep>> unfinishedSweep(const std::string& path, const StoreOptions& options) {
  return guarded<std::optional<UnfinishedSweep>>(path, [&]() -> std::optional<UnfinishedSweep> {
    if (!options.enabled || options.session < 0) return std::nullopt;
    std::string db = resolveDbPath(options.dbPath);
    if (!std::filesystem::exists(db)) return std::nullopt;  // asking never creates the store
    profiler::Store store(db);
    std::string sha = profiler::sha256File(path);
    int64_t session = options.session;
    if (session == 0)
      for (const auto& s : store.listSessions())
        if (s.model.sha256 == sha) session = s.id;
    if (session <= 0) return std::nullopt;
    auto data = store.loadSession(session);
    if (!data || data->summary.model.sha256 != sha || data->sweeps.empty()) return std::nullopt;
    const profiler::StoredSweep& latest = data->sweeps.back();
    const profiler::StoredRun* run = data->run(latest.runId);
    if (!run) return std::nullopt;
    UnfinishedSweep u;
    u.sessionId = session;
    u.runId = latest.runId;
    u.batches = latest.batches;
    u.backends = latest.backends;
    u.budgetSeconds = latest.budgetSeconds;
    u.context = run->context;
    u.totalPoints = static_cast<int>(latest.batches.size() * latest.backends.size());
    for (const auto& m : data->measurements)
      if (m.sweepId == latest.id) ++u.storedPoints;
    if (u.storedPoints >= u.totalPoints) return std::nullopt;
    return u;
  });
}

std::string sweepJson(const SweepResult& r) {
  nlohmann::json j;
  j["model"] = r.model;
  j["context"] = toJson(r.context);
  j["batches"] = r.batches;
  j["backends"] = r.backends;
  j["points"] = nlohmann::json::array();
  for (const auto& m : r.points) {
    nlohmann::json p = {
        {"backend", m.backend}, {"batch", m.batch}, {"status", profiler::statusName(m.status)}};
    if (!m.reason.empty()) p["reason"] = m.reason;
    if (m.ok()) {
      p["median_ms"] = m.timing.medianMs;
      p["min_ms"] = m.timing.minMs;
      p["mean_ms"] = m.timing.meanMs;
      p["max_ms"] = m.timing.maxMs;
      p["stddev_ms"] = m.timing.stddevMs;
      p["cv"] = m.timing.cv();
      p["noisy"] = m.timing.noisy();
      p["throughput_per_s"] = m.throughput();
      p["number"] = m.timing.number;
      p["samples_ms"] = m.timing.samplesMs;
    }
    j["points"].push_back(std::move(p));
  }
  if (r.stored.sessionId)
    j["stored"] = {{"db", r.stored.dbPath}, {"session", r.stored.sessionId}, {"run", r.stored.runId}};
  return j.dump(2);
}

}  // namespace kiln::app

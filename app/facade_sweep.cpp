// kiln sweep: latency and throughput per backend over batch sizes. At each batch size the
// backends are timed side by side, each in worker processes of its own (profiler/bench.h). A
// backend that runs out of memory, fails, crashes or exceeds its time budget is stopped; its
// larger batch sizes are recorded as skipped with the reason, and the other backends go on. Each
// point is committed to the store once its batch is measured, so a killed sweep can be resumed
// (SweepOptions::resume).
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
#include "profiler/core_latency.h"
#include "profiler/sha256.h"
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

}  // namespace

const std::vector<std::string>& sweepBackendNames() {
  // The WebAssembly rows are compare's only (their Node worker compiles one module, at one batch).
  static const auto* names = [] {
    auto* v = new std::vector<std::string>;
    for (const auto& b : backendNames())
      if (!isWebBackend(b)) v->push_back(b);
    return v;
  }();
  return *names;
}

namespace {

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

Result<SweepResult> sweep(const std::string& path, const SweepOptions& options, const ProgressFn& progress) {
  return guarded<SweepResult>(path, [&] {
    const auto& known = sweepBackendNames();
    for (const auto& b : options.backends)
      if (std::find(known.begin(), known.end(), b) == known.end()) {
        std::string list;
        for (size_t i = 0; i < known.size(); ++i) list += (i ? ", " : "") + known[i];
        throw Error("unknown backend '" + b + "' (expected " + list + ")", ErrorKind::Usage);
      }
    if (options.backends.empty()) throw Error("no backends to sweep", ErrorKind::Usage);
    std::set<int64_t> batchSet;
    for (int64_t b : options.batches) {
      if (b < 1) throw Error("batch sizes must be positive, got " + std::to_string(b), ErrorKind::Usage);
      batchSet.insert(b);
    }
    if (batchSet.empty()) throw Error("no batch sizes to sweep", ErrorKind::Usage);
    std::unique_ptr<profiler::Store> store = openStoreFor(options.store);
    // A file that is not a model fails here, once, not as a failure of every point.
    OpenOptions firstOpen;
    firstOpen.inputs = options.inputs;
    auto firstModel = openModel(path, firstOpen);
    if (!firstModel) throw Error(firstModel.error().message, firstModel.error().kind);
    // What the store hashes and the workers open (a Python reference's traced file).
    const std::string modelFile = firstModel.value()->path;
    parseTarget(options.build.target);  // so does an unknown target

    SweepResult result;
    result.batches.assign(batchSet.begin(), batchSet.end());
    result.backends = options.backends;
    int threads = options.build.threads > 0 ? options.build.threads : runtime::numThreads();
    runtime::setNumThreads(threads);

    std::map<std::string, std::string> stopped;  // backend → why its larger batches are skipped
    std::string target = options.build.target;
    double compileSeconds = 0;
    bool cancelled = false;
    // The workbench's Cancel, or a progress callback that said stop.
    auto isCancelled = [&] {
      if (!cancelled && options.isolate.cancelled && options.isolate.cancelled()) cancelled = true;
      return cancelled;
    };

    std::optional<SweepFiling> filing;
    if (store && options.resume) filing = findUnfinished(*store, modelFile, result, options, threads);
    bool targetKnown = false;
    // Each point is committed on its own: a killed sweep loses only the batch in flight.
    auto file = [&](const Measurement& m, const std::optional<profiler::BuildRecord>& record) {
      if (!store) return;
      store->transaction([&] {
        if (!filing) {
          filing.emplace();
          filing->ids = beginStoredRun(*store, options.store, modelFile, result.model, "sweep",
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
    auto stopAfter = [&](const Measurement& m) {
      if (!m.ok() && m.status != Status::Unavailable && m.status != Status::Skipped)
        stopped[m.backend] = std::string("stopped after ") + profiler::statusName(m.status) + " at batch " +
                             std::to_string(m.batch);
      else if (m.status == Status::Skipped && !stopped.count(m.backend))
        stopped[m.backend] = m.reason;
    };

    ScratchDir scratch("sweep");
    for (int64_t batch : result.batches) {
      // Per backend in the sweep's order: a point resumed, skipped, failed, or to measure.
      std::map<std::string, Measurement> points;
      std::vector<std::string> toMeasure;
      std::string modelError;
      std::shared_ptr<const Model> model;
      for (const std::string& backend : options.backends) {
        if (filing) {
          auto it = filing->done.find({backend, batch});
          if (it != filing->done.end()) {
            // Measured by the run being resumed: kept as it is, not measured again.
            points[backend] = it->second;
            stopAfter(it->second);
            ++result.resumedPoints;
            continue;
          }
        }
        if (stopped.count(backend)) {
          points[backend] = failure(backend, batch, Status::Skipped, stopped[backend]);
          continue;
        }
        toMeasure.push_back(backend);
      }
      BenchSpec spec = benchSpecOf(*firstModel.value(), !options.inputs.empty());
      spec.batch = batch;
      spec.threads = threads;
      spec.workerCommand = options.isolate.workerCommand;
      spec.python = options.python;
      if (!toMeasure.empty()) {
        OpenOptions open;
        open.batch = batch;
        open.inputs = options.inputs;
        auto opened = openModel(path, open);
        if (opened) {
          model = opened.value();
          if (result.model.empty()) result.model = model->name;
          std::string dir = scratch.path() + "/batch-" + std::to_string(batch);
          std::filesystem::create_directories(dir);
          spec.inputs = writeBenchInputs(dir, randomInputs(*model));
        } else {
          modelError = opened.error().message;
        }
      }
      std::vector<profiler::BenchBackend> backends;
      for (const std::string& backend : toMeasure) {
        if (!model) {
          points[backend] = failure(backend, batch, Status::Failed, modelError);
          continue;
        }
        if (backend == "kiln")
          backends.push_back(kilnBenchBackend("kiln", options.build, spec));
        else
          backends.push_back(baselineBenchBackend(backend, spec));
      }
      std::optional<profiler::BuildRecord> record;
      bool batchCancelled = isCancelled();
      if (!batchCancelled && progress && !backends.empty()) {
        std::string step = "batch " + std::to_string(batch) + ":";
        for (const auto& b : backends) step += " " + b.name;
        if (!progress(step)) batchCancelled = cancelled = true;
      }
      if (!backends.empty() && !batchCancelled) {
        profiler::BenchOptions bench = benchOptionsFor(options.isolate, spec.inputs.empty() ? scratch.path() :
                                                       std::filesystem::path(spec.inputs[0]).parent_path().string());
        bench.warmup = options.warmup;
        bench.repeat = options.repeat;
        bench.minRepeatMs = options.minRepeatMs;
        bench.processes = std::max(1, options.processes);
        bench.budgetSeconds = options.budgetSeconds;
        // A repeat may run for its whole budget: the limit is never shorter than that.
        bench.runTimeoutSeconds = std::max(bench.runTimeoutSeconds, options.budgetSeconds * 1.5 + 5);
        bench.cancelled = isCancelled;
        profiler::BenchResult measured = profiler::runSideBySide(backends, bench);
        if (!measured.coreRoundTripNs.empty()) result.coreRoundTripNs[batch] = measured.coreRoundTripNs;
        if (measured.cancelled) {
          batchCancelled = cancelled = true;
        } else {
          std::vector<runtime::Tensor> reference;
          for (const profiler::BenchRow& row : measured.rows)
            if (row.name == "pytorch-eager" && row.ok()) reference = readBenchOutputs(row);
          const double bound = reference.empty() ? -1 : outputBoundFor(*model, reference);
          for (const profiler::BenchRow& row : measured.rows) {
            Measurement m;
            m.backend = row.name;
            m.batch = batch;
            m.status = row.status;
            m.reason = row.reason;
            if (row.ok()) {
              m.facts = backendFacts(row.resultJson);
              m.timing = row.timing;
              m.processMedianMs = row.processMedianMs;
              m.processesDisagree = row.processesDisagree;
              if (!reference.empty()) {
                m.maxAbsDiff = maxAbsDiff(readBenchOutputs(row), reference);
                m.outputBound = bound;
              }
              if (m.timing.budgetExceeded)
                m.reason = "time budget reached after " + std::to_string(m.timing.samplesMs.size()) + " of " +
                           std::to_string(options.repeat) + " repeats";
            }
            if (row.name == "kiln" && row.ok()) {
              auto facts = nlohmann::json::parse(row.resultJson);
              record = buildRecordFromJson(facts.at("build"));
              target = facts.value("target", target);
              if (compileSeconds == 0) compileSeconds = facts.value("compile_seconds", 0.0);
            }
            points[row.name] = std::move(m);
          }
        }
      }
      for (const std::string& backend : options.backends) {
        auto it = points.find(backend);
        if (it == points.end()) {
          // Cancelled: not filed, so a resumed sweep measures it.
          result.points.push_back(failure(backend, batch, Status::Skipped, "cancelled"));
          continue;
        }
        Measurement& m = it->second;
        bool resumed = filing && filing->done.count({backend, batch});
        if (!resumed) {
          stopAfter(m);
          if (result.model.empty()) result.model = firstModel.value()->name;
          file(m, backend == "kiln" && m.ok() ? record : std::nullopt);
          if (options.onPoint) options.onPoint(m);
        }
        result.points.push_back(std::move(m));
      }
    }
    if (result.model.empty()) result.model = firstModel.value()->name;
    result.context = runContextFor(options.build, threads, target, compileSeconds);
    if (store && !filing) {
      // Nothing measured (all cancelled): the run is still filed, empty.
      result.stored = store->transaction([&] {
        StoredIds ids = beginStoredRun(*store, options.store, modelFile, result.model, "sweep", result.context);
        store->addSweep(ids.runId, result.batches, result.backends, options.budgetSeconds);
        return ids;
      });
    } else if (filing) {
      result.stored = filing->ids;
    }
    std::vector<double> probes;
    for (const auto& [batch, ns] : result.coreRoundTripNs) probes.insert(probes.end(), ns.begin(), ns.end());
    result.placementChanged = profiler::placementChanged(probes);
    return result;
  });
}

Result<std::optional<UnfinishedSweep>> unfinishedSweep(const std::string& path, const StoreOptions& options) {
  return guarded<std::optional<UnfinishedSweep>>(path, [&]() -> std::optional<UnfinishedSweep> {
    if (!options.enabled || options.session < 0) return std::nullopt;
    std::string db = resolveDbPath(options.dbPath);
    if (!std::filesystem::exists(db)) return std::nullopt;  // asking never creates the store
    profiler::Store store(db);
    std::string sha = profiler::sha256File(resolveSource(path).file);
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
      p["facts"] = m.facts.empty() ? nlohmann::json::object() : nlohmann::json::parse(m.facts);
    }
    j["points"].push_back(std::move(p));
  }
  j["core_round_trip_ns"] = nlohmann::json::object();
  for (const auto& [batch, probes] : r.coreRoundTripNs) j["core_round_trip_ns"][std::to_string(batch)] = probes;
  j["placement_changed"] = r.placementChanged;
  if (r.stored.sessionId)
    j["stored"] = {{"db", r.stored.dbPath}, {"session", r.stored.sessionId}, {"run", r.stored.runId}};
  return j.dump(2);
}

}  // namespace kiln::app

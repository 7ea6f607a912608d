// kiln sweep: latency and throughput per backend over batch sizes. A backend that runs out of
// memory, fails or exceeds its time budget is stopped; its larger batch sizes are recorded as
// skipped with the reason, and the other backends go on.
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "app/facade.h"
#include "app/facade_internal.h"
#include "app/measure_internal.h"
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

    SweepResult result;
    result.batches.assign(batchSet.begin(), batchSet.end());
    result.backends = options.backends;
    int threads = options.build.threads > 0 ? options.build.threads : runtime::numThreads();
    runtime::setNumThreads(threads);

    std::map<std::string, std::string> stopped;  // backend → why its larger batches are skipped
    std::map<std::string, std::unique_ptr<profiler::TorchModel>> torchModels;
    std::vector<std::pair<size_t, profiler::BuildRecord>> builds;  // point index → Kiln build
    std::string target = options.build.target;
    double compileSeconds = 0;
    bool cancelled = false;

    for (int64_t batch : result.batches) {
      OpenOptions open;
      open.batch = batch;
      auto model = openModel(path, open);
      if (model && result.model.empty()) result.model = model.value()->name;
      std::vector<runtime::Tensor> inputs =
          model ? randomInputs(*model.value()) : std::vector<runtime::Tensor>{};
      for (const std::string& backend : options.backends) {
        std::string step = backend + " at batch " + std::to_string(batch);
        if (!cancelled && progress && !progress(step)) cancelled = true;
        if (cancelled) {
          result.points.push_back(failure(backend, batch, Status::Skipped, "cancelled"));
          continue;
        }
        if (stopped.count(backend)) {
          result.points.push_back(failure(backend, batch, Status::Skipped, stopped[backend]));
          continue;
        }
        if (!model) {
          result.points.push_back(failure(backend, batch, Status::Failed, model.error().message));
          continue;
        }
        Measurement m;
        if (backend == "kiln") {
          auto compiled = build(model.value(), options.build);
          if (!compiled) {
            m = failure(backend, batch,
                        looksOutOfMemory(compiled.error().message) ? Status::OutOfMemory : Status::Failed,
                        compiled.error().message);
          } else {
            CompiledModel& c = *compiled.value();
            target = c.targetString;
            if (compileSeconds == 0) compileSeconds = c.compileSeconds;
            m = timePoint(
                backend, batch,
                [&] {
                  auto r = run(c, inputs);
                  if (!r) throw Error(r.error().message, r.error().kind);
                },
                options);
            builds.emplace_back(result.points.size(), buildRecordOf(c, threads, batch));
          }
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
          m = profiler::measureTorchCompile(tc);
          m.batch = batch;
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
        if (!m.ok() && m.status != Status::Unavailable)
          stopped[backend] = std::string("stopped after ") + profiler::statusName(m.status) + " at batch " +
                             std::to_string(batch);
        result.points.push_back(std::move(m));
      }
    }
    if (result.model.empty()) result.model = std::filesystem::path(path).stem().string();
    result.context = runContextFor(options.build, threads, target, compileSeconds);

    if (store) {
      result.stored = store->transaction([&] {
        StoredIds ids = beginStoredRun(*store, options.store, path, result.model, "sweep", result.context);
        int64_t sweepId = store->addSweep(ids.runId, result.batches, result.backends, options.budgetSeconds);
        std::map<size_t, int64_t> buildIds;
        for (const auto& [index, record] : builds) buildIds[index] = store->addBuild(ids.runId, record);
        for (size_t i = 0; i < result.points.size(); ++i)
          store->addMeasurement(ids.runId, buildIds.count(i) ? buildIds[i] : 0, sweepId, result.points[i]);
        return ids;
      });
    }
    return result;
  });
}

std::string sweepJson(const SweepResult& r) {
  nlohmann::json j;
  j["model"] = r.model;
  j["context"] = nlohmann::json::parse(contextJson(r.context));
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

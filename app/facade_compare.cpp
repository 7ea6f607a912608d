// kiln compare: PyTorch eager, compiled PyTorch and Kiln on one input, timed side by side.
#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>

#include <nlohmann/json.hpp>

#include "app/facade.h"
#include "app/facade_internal.h"
#include "app/measure_internal.h"
#include "profiler/time_evaluator.h"
#include "profiler/torch_baseline.h"
#include "profiler/torch_compile.h"
#include "runtime/thread_pool.h"

namespace kiln::app {

// ---- compare ----------------------------------------------------------------------------------

namespace {

double maxAbsDiff(const std::vector<runtime::Tensor>& a, const std::vector<runtime::Tensor>& b) {
  if (a.size() != b.size()) return INFINITY;
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].shape() != b[i].shape() || a[i].dtype() != runtime::DType::Float32 ||
        b[i].dtype() != runtime::DType::Float32)
      return INFINITY;
    for (int64_t k = 0; k < a[i].numel(); ++k)
      worst = std::max(worst, static_cast<double>(std::fabs(a[i].data<float>()[k] - b[i].data<float>()[k])));
  }
  return worst;
}

void describeOutputs(BackendResult& r, const std::vector<runtime::Tensor>& out) {
  if (out.empty() || out[0].dtype() != runtime::DType::Float32 || out[0].numel() == 0) return;
  const runtime::Tensor& t = out[0];
  for (int64_t i = 0; i < std::min<int64_t>(5, t.numel()); ++i) r.preview.push_back(t.data<float>()[i]);
  int64_t row = t.shape().empty() ? 1 : t.shape().back();
  r.top1 = static_cast<int>(std::max_element(t.data<float>(), t.data<float>() + row) - t.data<float>());
}

BackendResult fromTiming(const std::string& name, const profiler::Timing& t) {
  BackendResult r;
  r.backend = name;
  r.medianMs = t.medianMs;
  r.minMs = t.minMs;
  r.maxMs = t.maxMs;
  r.meanMs = t.meanMs;
  r.stddevMs = t.stddevMs;
  r.samplesMs = t.samplesMs;
  return r;
}

/// The stored form of a backend's result.
profiler::Measurement measurementOf(const BackendResult& b, int64_t batch, int warmup) {
  profiler::Measurement m;
  m.backend = b.backend;
  m.batch = batch;
  m.status = b.available ? profiler::Status::Ok : profiler::Status::Unavailable;
  m.reason = b.reason;
  m.timing = profiler::timingFromSamples(b.samplesMs);
  m.timing.warmup = warmup;
  m.maxAbsDiff = b.available ? b.maxAbsDiff : -1;
  return m;
}

nlohmann::json outputsJson(const std::vector<runtime::Tensor>& out) {
  nlohmann::json j = nlohmann::json::array();
  for (const runtime::Tensor& t : out) {
    // Only float outputs are compared (maxAbsDiff); others travel as empty placeholders.
    bool f32 = t.dtype() == runtime::DType::Float32;
    std::vector<float> data = f32 ? std::vector<float>(t.data<float>(), t.data<float>() + t.numel()) : std::vector<float>{};
    j.push_back({{"shape", f32 ? t.shape() : std::vector<int64_t>{0}}, {"data", data}});
  }
  return j;
}

std::vector<runtime::Tensor> outputsFromJson(const nlohmann::json& j) {
  std::vector<runtime::Tensor> out;
  for (const auto& o : j) {
    auto shape = o.at("shape").get<std::vector<int64_t>>();
    auto data = o.at("data").get<std::vector<float>>();
    runtime::Tensor t = runtime::Tensor::zeros(runtime::DType::Float32, shape);
    if (static_cast<int64_t>(data.size()) != t.numel()) throw Error("malformed outputs from the measuring worker", ErrorKind::Internal);
    std::copy(data.begin(), data.end(), t.data<float>());
    out.push_back(std::move(t));
  }
  return out;
}

/// One backend of a comparison: a name, a call, and the outputs of its first call.
struct Contender {
  std::string name;
  std::function<std::vector<runtime::Tensor>()> call;
  std::vector<runtime::Tensor> outputs;
  profiler::Timing timing;
};

Contender kilnContender(const std::string& name, CompiledModel& c, const std::vector<runtime::Tensor>& inputs) {
  return {name, [&c, &inputs] {
            auto r = run(c, inputs);
            if (!r) throw Error(r.error().message, r.error().kind);
            return std::move(r.value());
          }, {}, {}};
}

/// Throws "cancelled" once `cancelled` (may be empty) says so: the workbench's Cancel.
void stopIfCancelled(const std::function<bool()>& cancelled) {
  if (cancelled && cancelled()) throw Error("cancelled", ErrorKind::Usage);
}

/// Runs each contender once (its outputs), then times them side by side: their repeats
/// alternate, so load on the shared machine falls on all of them alike. `cancelled` is polled
/// before every call, for each contender alike: a cancelled comparison stops within one call.
void timeContenders(std::vector<Contender>& contenders, const profiler::TimingOptions& timing,
                    const std::function<bool()>& cancelled = {}) {
  std::vector<std::function<void()>> calls;
  for (Contender& c : contenders) {
    stopIfCancelled(cancelled);
    c.outputs = c.call();
    calls.push_back([&c, &cancelled] {
      stopIfCancelled(cancelled);
      c.call();
    });
  }
  std::vector<profiler::Timing> timings = profiler::timeSideBySide(calls, timing);
  for (size_t i = 0; i < contenders.size(); ++i) contenders[i].timing = std::move(timings[i]);
}

nlohmann::json contenderJson(const Contender& c) {
  return {{"name", c.name}, {"timing", toJson(c.timing)}, {"outputs", outputsJson(c.outputs)}};
}

}  // namespace

nlohmann::json serveCompareRequest(const nlohmann::json& q) {
  std::string path = q.at("path").get<std::string>();
  BuildOptions build = buildOptionsFromJson(q.at("build"));
  StoreOptions noStore;
  noStore.enabled = false;
  auto prepared = prepareMeasurement(path, q.at("batch").get<int64_t>(), build, noStore);
  if (!prepared) throw Error(prepared.error().message, prepared.error().kind);
  const Model& m = *prepared->model;
  int threads = q.at("threads").get<int>();
  int64_t batch = q.at("model_batch").get<int64_t>();
  runtime::setNumThreads(threads);
  std::shared_ptr<CompiledModel> untuned;
  if (!build.records.empty()) {
    BuildOptions plain = build;
    plain.records.clear();
    auto u = app::build(prepared->model, plain);
    if (!u) throw Error(u.error().message, u.error().kind);
    untuned = u.value();
  }
  std::vector<runtime::Tensor> inputs = randomInputs(m);
  profiler::TimingOptions timing{q.at("warmup").get<int>(), 1, q.at("repeat").get<int>(), q.at("min_repeat_ms").get<double>()};
  workerMeasuring();
  CompiledModel& c = *prepared->compiled;
  std::vector<Contender> contenders;
  if (untuned) contenders.push_back(kilnContender("kiln-untuned", *untuned, inputs));
  contenders.push_back(kilnContender("kiln", c, inputs));
  timeContenders(contenders, timing);
  nlohmann::json backends = nlohmann::json::array();
  for (const Contender& k : contenders) backends.push_back(contenderJson(k));
  return {{"target", c.targetString},
          {"compile_seconds", c.compileSeconds},
          {"build", toJson(buildRecordOf(c, threads, batch))},
          {"backends", std::move(backends)}};
}

Result<CompareResult> compare(const std::string& path, const CompareOptions& options) {
  bool isolated = options.isolate.enabled;
  Result<PreparedMeasurement> prepared = PreparedMeasurement{};
  if (!isolated) {
    prepared = prepareMeasurement(path, options.batch, options.build, options.store);
  } else {
    // Isolated, the worker builds and runs Kiln: here only the store (first) and the model.
    auto opened = guarded<bool>(path, [&] {
      prepared->store = openStoreFor(options.store);
      return true;
    });
    if (!opened) return opened.error();
    OpenOptions open;
    open.batch = options.batch;
    auto model = openModel(path, open);
    if (!model) return model.error();
    prepared->model = model.value();
  }
  if (!prepared) return prepared.error();
  std::unique_ptr<profiler::Store>& store = prepared->store;
  std::shared_ptr<CompiledModel>& compiledModel = prepared->compiled;
  // The workbench's Cancel stops the in-process part too (PyTorch's timing, between stages), not
  // only the worker (callMeasureWorker polls the same predicate).
  const std::function<bool()>& cancelled = options.isolate.cancelled;
  return guarded<CompareResult>(path, [&] {
    stopIfCancelled(cancelled);
    CompareResult result;
    const Model& m = *prepared->model;
    result.model = m.name;
    result.batch = m.inputs.empty() || m.inputs[0].shape.empty() ? 1 : m.inputs[0].shape[0];
    result.threads = options.build.threads > 0 ? options.build.threads : runtime::numThreads();
    runtime::setNumThreads(result.threads);
    if (compiledModel) result.target = compiledModel->targetString;
    result.optLevel = options.build.optLevel;
    result.torchVersion = profiler::torchVersion();
    result.cpu = cpuModelName();
    if (compiledModel) result.compileSeconds = compiledModel->compileSeconds;

    std::vector<runtime::Tensor> inputs = randomInputs(m);
    profiler::TimingOptions timing{options.warmup, 1, options.repeat, options.minRepeatMs};

    // PyTorch eager (the reference) and compiled, and in-process Kiln's builds, all timed side by
    // side; an isolated Kiln is timed in its worker (its builds side by side there).
    std::vector<std::unique_ptr<profiler::TorchModel>> torchModels;
    std::vector<Contender> contenders;
    for (profiler::TorchMode mode : {profiler::TorchMode::Eager, profiler::TorchMode::Compiled}) {
      profiler::TorchModel* model =
          torchModels.emplace_back(std::make_unique<profiler::TorchModel>(path, mode, result.threads)).get();
      contenders.push_back({profiler::torchModeName(mode), [model, &inputs] { return model->run(inputs); }, {}, {}});
    }
    std::shared_ptr<CompiledModel> untuned;
    if (!isolated) {
      if (!options.build.records.empty()) {
        BuildOptions plain = options.build;
        plain.records.clear();
        auto u = build(prepared->model, plain);
        if (!u) throw Error(u.error().message, u.error().kind);
        untuned = u.value();
        contenders.push_back(kilnContender("kiln-untuned", *untuned, inputs));
      }
      contenders.push_back(kilnContender("kiln", *compiledModel, inputs));
    }
    timeContenders(contenders, timing, cancelled);
    const std::vector<runtime::Tensor>& reference = contenders.front().outputs;
    std::vector<BackendResult> kilnResults;
    for (const Contender& c : contenders) {
      BackendResult r = fromTiming(c.name, c.timing);
      r.maxAbsDiff = maxAbsDiff(c.outputs, reference);
      describeOutputs(r, c.outputs);
      (c.name.starts_with("kiln") ? kilnResults : result.backends).push_back(std::move(r));
    }
    result.blas = profiler::torchBlasLibrary();

    if (options.torchCompile) {
      stopIfCancelled(cancelled);
      profiler::TorchCompileOptions tc;
      tc.python = options.python;
      tc.modelPath = path;
      tc.batch = result.batch;
      tc.threads = result.threads;
      tc.warmup = options.warmup;
      tc.repeat = options.repeat;
      tc.minRepeatMs = options.minRepeatMs;
      tc.cancelled = cancelled;
      profiler::Measurement tcm = profiler::measureTorchCompile(tc);
      stopIfCancelled(cancelled);
      BackendResult r = fromTiming("torch-compile", tcm.timing);
      r.available = tcm.ok();
      if (tcm.status != profiler::Status::Ok && tcm.status != profiler::Status::Unavailable)
        r.reason = std::string(profiler::statusName(tcm.status)) + ": " + tcm.reason;
      else
        r.reason = tcm.reason;
      result.backends.push_back(std::move(r));
    }

    // Kiln as built, after the PyTorch rows; with tuning records, the untuned build first.
    profiler::BuildRecord kilnBuild;
    if (isolated) {
      nlohmann::json request = {{"op", "compare-kiln"}, {"path", path}, {"batch", options.batch},
                                {"model_batch", result.batch}, {"threads", result.threads},
                                {"build", toJson(options.build)}, {"warmup", options.warmup},
                                {"repeat", options.repeat}, {"min_repeat_ms", options.minRepeatMs}};
      auto reply = callMeasureWorker(request, options.isolate);
      if (!reply) throw Error(reply.error().message, reply.error().kind);
      const nlohmann::json& j = reply.value();
      result.target = j.at("target").get<std::string>();
      result.compileSeconds = j.at("compile_seconds").get<double>();
      kilnBuild = buildRecordFromJson(j.at("build"));
      for (const auto& b : j.at("backends")) {
        std::vector<runtime::Tensor> out = outputsFromJson(b.at("outputs"));
        BackendResult k = fromTiming(b.at("name").get<std::string>(), timingFromJson(b.at("timing")));
        k.maxAbsDiff = maxAbsDiff(out, reference);
        describeOutputs(k, out);
        result.backends.push_back(std::move(k));
      }
    } else {
      for (BackendResult& k : kilnResults) result.backends.push_back(std::move(k));
      kilnBuild = buildRecordOf(*compiledModel, result.threads, result.batch);
    }

    if (store) {
      result.stored = store->transaction([&] {
        profiler::RunContext context = runContextFor(options.build, result.threads, result.target, result.compileSeconds);
        StoredIds ids = beginStoredRun(*store, options.store, path, m.name, "compare", context);
        ids.buildId = store->addBuild(ids.runId, kilnBuild);
        for (const BackendResult& b : result.backends)
          store->addMeasurement(ids.runId, b.backend == "kiln" ? ids.buildId : 0, 0,
                                measurementOf(b, result.batch, options.warmup));
        return ids;
      });
    }
    return result;
  });
}

std::string compareJson(const CompareResult& r) {
  nlohmann::json j;
  j["model"] = r.model;
  j["batch"] = r.batch;
  j["threads"] = r.threads;
  j["target"] = r.target;
  j["opt_level"] = r.optLevel;
  j["cpu"] = r.cpu;
  j["torch_version"] = r.torchVersion;
  j["blas"] = r.blas;
  j["kiln_version"] = version();
  j["compile_seconds"] = r.compileSeconds;
  if (r.stored.sessionId)
    j["stored"] = {{"db", r.stored.dbPath}, {"session", r.stored.sessionId}, {"run", r.stored.runId},
                   {"build", r.stored.buildId}};
  j["backends"] = nlohmann::json::array();
  for (const auto& b : r.backends) {
    nlohmann::json e;
    e["backend"] = b.backend;
    e["available"] = b.available;
    if (!b.available) {
      // Never a made-up number: an unavailable backend has its reason and null timings.
      e["reason"] = b.reason;
      for (const char* k : {"median_ms", "min_ms", "max_ms", "mean_ms", "stddev_ms"}) e[k] = nullptr;
      e["samples"] = nlohmann::json::array();
      j["backends"].push_back(std::move(e));
      continue;
    }
    e["median_ms"] = b.medianMs;
    e["min_ms"] = b.minMs;
    e["max_ms"] = b.maxMs;
    e["mean_ms"] = b.meanMs;
    e["stddev_ms"] = b.stddevMs;
    e["samples"] = b.samplesMs;
    e["max_abs_diff_vs_eager"] = b.maxAbsDiff;
    e["output_preview"] = b.preview;
    e["top1"] = b.top1;
    j["backends"].push_back(std::move(e));
  }
  return j.dump(2);
}

}  // namespace kiln::app

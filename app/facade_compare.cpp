// kiln compare: today's PyTorch eager and torch.compile, TorchScript-optimized (libtorch 1.13),
// ONNX Runtime, OpenVINO and Kiln on one input, each in worker processes of its own, timed side by
// side (profiler/bench.h).
#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>

#include <nlohmann/json.hpp>

#include "app/facade.h"
#include "app/facade_internal.h"
#include "app/measure_internal.h"
#include "profiler/core_latency.h"
#include "profiler/time_evaluator.h"
#include "profiler/torch_baseline.h"
#include "runtime/tensor_values.h"
#include "runtime/thread_pool.h"

namespace kiln::app {

// ---- compare ----------------------------------------------------------------------------------

namespace {

void describeOutputs(BackendResult& r, const std::vector<runtime::Tensor>& out) {
  if (out.empty() || out[0].dtype() != runtime::DType::Float32 || out[0].numel() == 0) return;
  const runtime::Tensor& t = out[0];
  for (int64_t i = 0; i < std::min<int64_t>(5, t.numel()); ++i) r.preview.push_back(t.data<float>()[i]);
  int64_t row = t.shape().empty() ? 1 : t.shape().back();
  r.top1 = static_cast<int>(std::max_element(t.data<float>(), t.data<float>() + row) - t.data<float>());
}

/// The stored form of a backend's result.
profiler::Measurement measurementOf(const BackendResult& b, int64_t batch, int warmup) {
  profiler::Measurement m;
  m.backend = b.backend;
  m.batch = batch;
  m.status = profiler::parseStatus(b.status);
  m.reason = b.reason;
  m.timing = b.timing;
  m.timing.warmup = warmup;  // also for a backend that did not run
  m.maxAbsDiff = b.available ? b.maxAbsDiff : -1;
  m.outputBound = b.available ? b.outputBound : -1;
  m.processMedianMs = b.processMedianMs;
  m.processesDisagree = b.processesDisagree;
  m.facts = b.facts;
  return m;
}

/// Throws "cancelled" once `cancelled` (may be empty) says so: the workbench's Cancel.
void stopIfCancelled(const std::function<bool()>& cancelled) {
  if (cancelled && cancelled()) throw Error("cancelled", ErrorKind::Usage);
}

}  // namespace

const std::vector<std::string>& backendNames() {
  static const auto* names =
      new std::vector<std::string>{"pytorch-eager", "torch-compile", "torch-compile-max-autotune", "torchscript-optimized",
                                   "onnxruntime",   "openvino",      "kiln",      "kiln-wasm",        "onnxruntime-web"};
  return *names;
}

const std::vector<std::string>& defaultCompareBackends() {
  static const auto* names = [] {
    auto* v = new std::vector<std::string>;
    for (const auto& b : backendNames())
      if (b != "torch-compile-max-autotune") v->push_back(b);
    return v;
  }();
  return *names;
}

std::string backendFacts(const std::string& resultJson) {
  if (resultJson.empty()) return "";
  nlohmann::json facts = nlohmann::json::parse(resultJson, nullptr, /*allow_exceptions=*/false);
  if (!facts.is_object()) return "";
  // The coordinator's scratch files and the per-run fields are not facts about the backend.
  for (const char* k : {"outputs", "first_ms", "pid", "build"}) facts.erase(k);
  return facts.dump();
}

std::string backendDisplayName(const std::string& backend, const std::string& factsJson) {
  if (isWebBackend(backend)) return backend + " (node)";
  if (backend != "pytorch-eager" || factsJson.empty()) return backend;
  nlohmann::json facts = nlohmann::json::parse(factsJson, nullptr, false);
  if (facts.is_object() && facts.value("module", "") == "torchscript") return backend + " (TorchScript)";
  return backend;
}

std::string backendFactsLine(const std::string& factsJson) {
  nlohmann::json f = nlohmann::json::parse(factsJson.empty() ? "{}" : factsJson, nullptr, false);
  if (!f.is_object()) return "";
  auto text = [&](const char* key) { return f.contains(key) && f[key].is_string() ? f[key].get<std::string>() : ""; };
  std::vector<std::string> parts;
  std::string version;
  if (!text("onnxruntime_version").empty()) version = "onnxruntime " + text("onnxruntime_version");
  else if (!text("onnxruntime_web_version").empty()) version = "onnxruntime-web " + text("onnxruntime_web_version");
  else if (!text("openvino_version").empty()) version = "openvino " + text("openvino_version");
  else if (!text("libtorch_version").empty()) version = "libtorch " + text("libtorch_version");
  else if (!text("torch_version").empty()) version = "torch " + text("torch_version");
  std::vector<std::string> libs;
  if (!text("blas").empty()) libs.push_back(text("blas"));
  if (std::string d = text("onednn"); !d.empty()) {
    size_t v = d.find(" v");
    libs.push_back("oneDNN" + (v == std::string::npos ? std::string() : d.substr(v, d.find(' ', v + 2) - v)));
  }
  if (!text("inference_precision_hint").empty()) libs.push_back("precision " + text("inference_precision_hint"));
  if (!version.empty()) {
    std::string libsText;
    for (size_t i = 0; i < libs.size(); ++i) libsText += (i ? ", " : "") + libs[i];
    parts.push_back(version + (libsText.empty() ? "" : " (" + libsText + ")"));
  }
  if (f.contains("intra_op_threads") && f["intra_op_threads"].is_number()) {
    std::string threads = std::to_string(f["intra_op_threads"].get<int>()) + " threads";
    if (f.contains("inter_op_threads") && f["inter_op_threads"].is_number())
      threads += " (inter-op " + std::to_string(f["inter_op_threads"].get<int>()) + ")";
    parts.push_back(threads);
  } else if (!text("inference_num_threads").empty()) {
    parts.push_back(text("inference_num_threads") + " threads");
  }
  if (!text("node_version").empty()) parts.push_back("node " + text("node_version"));
  if (!text("module").empty()) parts.push_back("module " + text("module"));
  if (!text("compile_mode").empty()) parts.push_back("mode " + text("compile_mode"));
  if (f.contains("compile_seconds") && f["compile_seconds"].is_number()) {
    char buf[48];
    std::snprintf(buf, sizeof buf, "compiled in %.1f s", f["compile_seconds"].get<double>());
    parts.push_back(buf);
  }
  if (!text("onnx_source").empty()) parts.push_back("ONNX: " + text("onnx_source"));
  std::string line;
  for (size_t i = 0; i < parts.size(); ++i) line += (i ? ", " : "") + parts[i];
  return line;
}

double maxAbsDiff(const std::vector<runtime::Tensor>& a, const std::vector<runtime::Tensor>& b) {
  if (a.size() != b.size()) return INFINITY;
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].shape() != b[i].shape() || a[i].dtype() != b[i].dtype()) return INFINITY;
    for (int64_t k = 0; k < a[i].numel(); ++k) {
      double x = runtime::elementAsDouble(a[i], k), y = runtime::elementAsDouble(b[i], k);
      if (std::isnan(x) || std::isnan(y)) return NAN;  // std::max would drop it
      worst = std::max(worst, std::fabs(x - y));
    }
  }
  return worst;
}

double outputBoundFor(const Model& model, const std::vector<runtime::Tensor>& reference) {
  double scale = 0;
  for (const runtime::Tensor& t : reference)
    for (int64_t k = 0; k < t.numel(); ++k)
      if (double v = std::fabs(runtime::elementAsDouble(t, k)); std::isfinite(v)) scale = std::max(scale, v);
  const auto& nodes = model.graph.nodes();
  const bool quantized =
      std::any_of(nodes.begin(), nodes.end(), [](const core::Node& n) { return n.op.starts_with("qnn."); });
  return profiler::outputBound(scale, quantized ? profiler::kQuantizedOutputTolerance : profiler::kOutputTolerance);
}

BackendResult backendResultOf(const profiler::BenchRow& row) {
  BackendResult r;
  r.backend = row.name;
  r.status = profiler::statusName(row.status);
  r.available = row.ok();
  r.reason = row.reason;
  r.kernelFault = row.kernelFault;
  r.pids = row.pids;
  if (!row.ok()) return r;
  r.timing = row.timing;
  r.processMedianMs = row.processMedianMs;
  r.processesDisagree = row.processesDisagree;
  return r;
}

Result<CompareResult> compare(const std::string& path, const CompareOptions& options) {
  std::unique_ptr<profiler::Store> store;
  // The store first: a bad database fails before anything is compiled or measured.
  auto opened = guarded<bool>(path, [&] {
    store = openStoreFor(options.store);
    return true;
  });
  if (!opened) return opened.error();
  OpenOptions open;
  open.batch = options.batch;
  open.inputs = options.inputs;
  auto model = openModel(path, open);
  if (!model) return model.error();
  const std::function<bool()>& cancelled = options.isolate.cancelled;
  return guarded<CompareResult>(path, [&] {
    stopIfCancelled(cancelled);
    const std::vector<std::string>& known = backendNames();
    for (const std::string& b : options.backends)
      if (std::find(known.begin(), known.end(), b) == known.end()) {
        std::string list;
        for (size_t i = 0; i < known.size(); ++i) list += (i ? ", " : "") + known[i];
        throw Error("unknown backend '" + b + "' (expected " + list + ")", ErrorKind::Usage);
      }
    const Model& m = *model.value();
    // Bad options fail here, once, not as a failed row: the target, then the records file.
    codegen::Target target = parseTarget(options.build.target);
    if (!target.runnable)
      throw Error("target '" + options.build.target + "' is for cross-compilation (export only), it cannot run here",
                  ErrorKind::Usage);
    if (!options.build.records.empty()) schedulesFor(options.build, target.str());

    CompareResult result;
    result.model = m.name;
    result.batch = modelBatch(m);
    result.threads = options.build.threads > 0 ? options.build.threads : runtime::numThreads();
    result.target = target.str();
    result.optLevel = options.build.optLevel;
    result.cpu = cpuModelName();
    result.processes = std::max(1, options.processes);

    // Every backend in worker processes of its own, fed the same inputs from .npy files.
    ScratchDir scratch("compare");
    BenchSpec spec = benchSpecOf(m, !options.inputs.empty());
    spec.batch = options.batch;
    spec.threads = result.threads;
    spec.inputs = writeBenchInputs(scratch.path(), randomInputs(m));
    spec.workerCommand = options.isolate.workerCommand;
    spec.python = options.python;
    BuildOptions build = options.build;
    build.threads = result.threads;
    const std::vector<std::string>& asked = options.backends.empty() ? defaultCompareBackends() : options.backends;
    auto wanted = [&](const std::string& name) { return std::find(asked.begin(), asked.end(), name) != asked.end(); };
    // In backendNames()' order, whatever the order asked: pytorch-eager (the reference) first.
    std::vector<profiler::BenchBackend> backends;
    for (const std::string& name : known) {
      if (!wanted(name) || (!options.torchCompile && name.starts_with("torch-compile"))) continue;
      if (isWebBackend(name)) {
        backends.push_back(webBenchBackend(name, build, spec));
        continue;
      }
      if (name != "kiln") {
        backends.push_back(baselineBenchBackend(name, spec));
        continue;
      }
      if (!build.records.empty()) {
        BuildOptions plain = build;
        plain.records.clear();
        backends.push_back(kilnBenchBackend("kiln-untuned", plain, spec));
      }
      backends.push_back(kilnBenchBackend("kiln", build, spec));
    }

    profiler::BenchOptions bench = benchOptionsFor(options.isolate, scratch.path());
    bench.warmup = options.warmup;
    bench.repeat = options.repeat;
    bench.minRepeatMs = options.minRepeatMs;
    bench.processes = result.processes;
    profiler::BenchResult measured = profiler::runSideBySide(backends, bench);
    if (measured.cancelled) throw Error("cancelled", ErrorKind::Usage);
    result.parkTimeouts = measured.parkTimeouts;
    result.coreRoundTripNs = measured.coreRoundTripNs;
    result.placementChanged = profiler::placementChanged(measured.coreRoundTripNs);

    // Outputs against PyTorch eager's (the reference), when it ran.
    std::vector<runtime::Tensor> reference;
    bool haveReference = !measured.rows.empty() && measured.rows.front().name == "pytorch-eager" &&
                         measured.rows.front().ok();
    if (haveReference) reference = readBenchOutputs(measured.rows.front());
    const double bound = haveReference ? outputBoundFor(m, reference) : -1;
    profiler::BuildRecord kilnBuild;
    for (const profiler::BenchRow& row : measured.rows) {
      BackendResult r = backendResultOf(row);
      if (row.ok()) {
        std::vector<runtime::Tensor> out = readBenchOutputs(row);
        if (haveReference) {
          r.maxAbsDiff = maxAbsDiff(out, reference);
          r.outputBound = bound;
        }
        describeOutputs(r, out);
      }
      nlohmann::json facts = row.resultJson.empty() ? nlohmann::json::object() : nlohmann::json::parse(row.resultJson);
      if (row.ok()) r.facts = backendFacts(row.resultJson);
      if (row.name == "torchscript-optimized" && row.ok()) {
        result.torchVersion = facts.value("libtorch_version", "");
        result.blas = facts.value("blas", "");
      }
      if (row.name == "kiln" && row.ok()) {
        result.target = facts.value("target", result.target);
        result.compileSeconds = facts.value("compile_seconds", 0.0);
        kilnBuild = buildRecordFromJson(facts.at("build"));
      }
      result.backends.push_back(std::move(r));
    }
    if (result.torchVersion.empty()) result.torchVersion = profiler::torchVersion();
    if (result.blas.empty()) result.blas = profiler::torchBlasLibrary();

    if (store) {
      result.stored = store->transaction([&] {
        profiler::RunContext context = runContextFor(options.build, result.threads, result.target, result.compileSeconds);
        StoredIds ids = beginStoredRun(*store, options.store, m.path, m.name, "compare", context);
        bool kilnOk = std::any_of(result.backends.begin(), result.backends.end(),
                                  [](const BackendResult& b) { return b.backend == "kiln" && b.available; });
        if (kilnOk) ids.buildId = store->addBuild(ids.runId, kilnBuild);
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
  j["processes"] = r.processes;
  j["park_timeouts"] = r.parkTimeouts;
  j["core_round_trip_ns"] = r.coreRoundTripNs;
  j["placement_changed"] = r.placementChanged;
  if (r.stored.sessionId)
    j["stored"] = {{"db", r.stored.dbPath}, {"session", r.stored.sessionId}, {"run", r.stored.runId},
                   {"build", r.stored.buildId}};
  j["backends"] = nlohmann::json::array();
  for (const auto& b : r.backends) {
    nlohmann::json e;
    e["backend"] = b.backend;
    e["available"] = b.available;
    e["status"] = b.status;
    if (!b.available) {
      // Never a made-up number: an unavailable backend has its reason and null timings.
      e["reason"] = b.reason;
      for (const char* k : {"median_ms", "min_ms", "max_ms", "mean_ms", "stddev_ms"}) e[k] = nullptr;
      e["samples"] = nlohmann::json::array();
      e["pids"] = b.pids;
      j["backends"].push_back(std::move(e));
      continue;
    }
    const profiler::Spread spread = b.spread();
    e["median_ms"] = spread.medianMs;
    e["min_ms"] = spread.minMs;
    e["max_ms"] = spread.maxMs;
    e["mean_ms"] = spread.meanMs;
    e["stddev_ms"] = spread.stddevMs;
    e["q1_ms"] = spread.q1Ms;
    e["q3_ms"] = spread.q3Ms;
    e["samples"] = b.timing.samplesMs;
    e["number"] = spread.number;
    e["process_median_ms"] = spread.processMedianMs;
    e["processes_disagree"] = spread.processesDisagree;
    e["pids"] = b.pids;
    // NaN is not JSON: a NaN difference travels as the string "nan"; not checked is null.
    if (std::isnan(b.maxAbsDiff))
      e["max_abs_diff_vs_eager"] = "nan";
    else if (b.maxAbsDiff < 0)
      e["max_abs_diff_vs_eager"] = nullptr;
    else
      e["max_abs_diff_vs_eager"] = b.maxAbsDiff;
    // Whether the outputs agree with eager's within the bound (profiler::outputBound; null: not
    // checked).
    if (b.outputBound >= 0) {
      e["output_bound"] = b.outputBound;
      e["outputs_agree"] = !b.outputsDiffer();
    } else {
      e["output_bound"] = nullptr;
      e["outputs_agree"] = nullptr;
    }
    e["output_preview"] = b.preview;
    e["top1"] = b.top1;
    e["facts"] = b.facts.empty() ? nlohmann::json::object() : nlohmann::json::parse(b.facts);
    e["label"] = backendDisplayName(b.backend, b.facts);
    j["backends"].push_back(std::move(e));
  }
  return j.dump(2);
}

}  // namespace kiln::app

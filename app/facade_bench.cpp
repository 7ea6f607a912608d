// The backends of side-by-side measurements (profiler/bench.h), as the façade sets them up:
// the coordinator's side (a BenchBackend per row, inputs written once to .npy files, outputs
// read back) and the worker's side (`kiln measure-worker` answering a "setup" request: load one
// backend, run it once, write its outputs, then time it on request).
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "app/facade.h"
#include "app/facade_internal.h"
#include "app/measure_internal.h"
#include "core/lower/schedule_config.h"
#include "profiler/torch_baseline.h"
#include "profiler/python_worker.h"
#include "runtime/npy.h"
#include "runtime/thread_pool.h"

namespace kiln::app {

namespace fs = std::filesystem;
using nlohmann::json;

// ---- the coordinator's side ---------------------------------------------------------------------

ScratchDir::ScratchDir(const std::string& label) {
  static std::atomic<int> counter{0};
  fs::path base = fs::temp_directory_path();
  if (const char* tmp = std::getenv("TMPDIR"); tmp && *tmp) base = tmp;
  m_path = (base / ("kiln-" + label + "-" + std::to_string(getpid()) + "-" + std::to_string(counter++))).string();
  fs::remove_all(m_path);
  fs::create_directories(m_path);
}

ScratchDir::~ScratchDir() {
  std::error_code ec;
  fs::remove_all(m_path, ec);
}

std::vector<std::string> writeBenchInputs(const std::string& dir, const std::vector<runtime::Tensor>& inputs) {
  std::vector<std::string> paths;
  for (size_t i = 0; i < inputs.size(); ++i) {
    std::string p = (fs::path(dir) / ("in" + std::to_string(i) + ".npy")).string();
    runtime::writeNpy(p, inputs[i]);
    paths.push_back(p);
  }
  return paths;
}

std::vector<runtime::Tensor> readBenchOutputs(const profiler::BenchRow& row) {
  std::vector<runtime::Tensor> out;
  for (const std::string& p : row.outputs) out.push_back(runtime::readNpy(p));
  return out;
}

namespace {

constexpr const char* kTorchscriptOptimized = "torchscript-optimized";

profiler::BenchBackend workerBackend(const std::string& name, json setup, const BenchSpec& spec) {
  setup["path"] = spec.path;
  setup["batch"] = spec.batch;
  setup["threads"] = spec.threads;
  setup["inputs"] = spec.inputs;
  if (!spec.inputSpecs.empty()) setup["input_specs"] = toJson(spec.inputSpecs);
  if (!spec.pythonRef.empty()) setup["python_ref"] = spec.pythonRef;
  if (!spec.stateDict.empty()) setup["state_dict"] = spec.stateDict;
  return {name, workerArgv(spec.workerCommand, "measure-worker"), setup.dump(), ""};
}

}  // namespace

profiler::BenchBackend kilnBenchBackend(const std::string& name, const BuildOptions& build, const BenchSpec& spec,
                                        const core::lower::ScheduleConfigs* schedules) {
  json setup = {{"backend", "kiln"}, {"build", toJson(build)}};
  if (schedules) {
    json s = json::object();
    for (const auto& [key, knobs] : schedules->byKey) s[key] = core::lower::knobsText(knobs);
    setup["schedules"] = std::move(s);
  }
  return workerBackend(name, std::move(setup), spec);
}

profiler::BenchBackend baselineBenchBackend(const std::string& name, const BenchSpec& spec) {
  bool onnx = fs::path(spec.path).extension() == ".onnx";
  if (name == kTorchscriptOptimized) {
    if (onnx) return {name, {}, "", "an ONNX model has no TorchScript module to optimize"};
    if (fs::path(spec.path).extension() == ".pt2" && spec.pythonRef.empty())
      return {name, {}, "", "a torch.export program has no TorchScript module to optimize"};
    return workerBackend(name, {{"backend", name}}, spec);
  }
  if (!profiler::isPythonBackend(name)) throw Error("unknown backend '" + name + "'", ErrorKind::Usage);
  if (onnx && spec.pythonRef.empty() && name != "onnxruntime" && name != "openvino")
    return {name, {}, "", "an ONNX model has no PyTorch module to run"};
  profiler::PythonBenchSpec p;
  p.python = spec.python;
  p.path = spec.path;
  p.pythonRef = spec.pythonRef;
  p.stateDict = spec.stateDict;
  p.batch = spec.batch;
  p.threads = spec.threads;
  p.inputs = spec.inputs;
  return profiler::pythonBenchBackend(name, p);
}

profiler::BenchOptions benchOptionsFor(const IsolationOptions& isolation, const std::string& workDir) {
  profiler::BenchOptions o;
  o.workDir = workDir;
  o.cancelled = isolation.cancelled;
  o.setupTimeoutSeconds = isolation.compileTimeoutSeconds > 0 ? isolation.compileTimeoutSeconds : 600;
  o.runTimeoutSeconds = isolation.timeoutSeconds > 0 ? isolation.timeoutSeconds : 30;
  return o;
}

// ---- the worker's side --------------------------------------------------------------------------

namespace {

/// What a worker keeps alive between requests: the loaded backend and its inputs.
struct Loaded {
  std::vector<runtime::Tensor> inputs;
  std::shared_ptr<CompiledModel> kiln;
  std::unique_ptr<profiler::TorchModel> torch;

  std::vector<runtime::Tensor> call() {
    if (torch) return torch->run(inputs);
    auto r = run(*kiln, inputs);
    if (!r) throw Error(r.error().message, r.error().kind);
    return std::move(r.value());
  }
};

profiler::BenchWorkerSetup serveBenchSetup(const std::string& line) {
  json q = json::parse(line);
  std::string backend = q.at("backend").get<std::string>();
  std::string path = q.at("path").get<std::string>();
  int threads = q.at("threads").get<int>();
  auto loaded = std::make_shared<Loaded>();
  for (const auto& p : q.at("inputs")) loaded->inputs.push_back(runtime::readNpy(p.get<std::string>()));
  json result = {{"pid", static_cast<int>(getpid())}};
  if (backend == "kiln") {
    runtime::setNumThreads(threads);
    OpenOptions open;
    open.batch = q.at("batch").get<int64_t>();
    if (q.contains("input_specs")) open.inputs = inputSpecsFromJson(q["input_specs"]);
    auto model = openModel(path, open);
    if (!model) throw Error(model.error().message, model.error().kind);
    BuildOptions build = buildOptionsFromJson(q.at("build"));
    std::shared_ptr<core::lower::ScheduleConfigs> schedules;
    if (q.contains("schedules")) {
      schedules = std::make_shared<core::lower::ScheduleConfigs>();
      for (const auto& [key, knobs] : q["schedules"].items())
        schedules->byKey[key] = core::lower::parseKnobs(knobs.get<std::string>());
    }
    auto compiled = schedules ? buildWithSchedules(model.value(), build, schedules) : app::build(model.value(), build);
    if (!compiled) throw Error(compiled.error().message, compiled.error().kind);
    loaded->kiln = compiled.value();
    result["target"] = loaded->kiln->targetString;
    result["compile_seconds"] = loaded->kiln->compileSeconds;
    result["build"] = toJson(buildRecordOf(*loaded->kiln, threads, modelBatch(*model.value())));
    workerMeasuring();
  } else if (backend == kTorchscriptOptimized) {
    // Debian's libtorch: the TorchScript file frozen and passed through optimize_for_inference.
    loaded->torch = std::make_unique<profiler::TorchModel>(path, profiler::TorchMode::Optimized, threads);
    result["libtorch_version"] = profiler::torchVersion();
    result["torch_version"] = profiler::torchVersion();
    result["blas"] = profiler::torchBlasLibrary();
    result["intra_op_threads"] = threads;
    result["module"] = "torchscript";
  } else {
    throw Error("unknown backend '" + backend + "'", ErrorKind::Usage);
  }
  auto start = std::chrono::steady_clock::now();
  std::vector<runtime::Tensor> outputs = loaded->call();
  result["first_ms"] = secondsSince(start) * 1000;
  json paths = json::array();
  for (size_t i = 0; i < outputs.size(); ++i) {
    std::string p = (fs::path(q.at("output_dir").get<std::string>()) / ("out" + std::to_string(i) + ".npy")).string();
    runtime::writeNpy(p, outputs[i]);
    paths.push_back(p);
  }
  result["outputs"] = std::move(paths);
  return {[loaded] { loaded->call(); }, result.dump()};
}

}  // namespace

int serveBenchWorker(const std::string& firstLine) { return profiler::serveBenchWorker(serveBenchSetup, firstLine); }

}  // namespace kiln::app

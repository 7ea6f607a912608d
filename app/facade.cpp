#include "app/facade.h"

#include <chrono>
#include <filesystem>
#include <algorithm>
#include <cmath>
#include <fstream>
#include <random>
#include <sstream>

#include <nlohmann/json.hpp>

#include "codegen/llvm/jit.h"
#include "codegen/target.h"
#include "core/ir/printer.h"
#include "core/lower/lower.h"
#include "core/tir/printer.h"
#include "profiler/time_evaluator.h"
#include "profiler/torch_baseline.h"
#include "runtime/graph_executor.h"
#include "runtime/thread_pool.h"

namespace kiln::app {
namespace {

double secondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Runs `fn`, turning every exception into a Diagnostic: exceptions stop here.
template <typename T, typename Fn>
Result<T> guarded(const std::string& context, Fn&& fn) {
  std::string prefix = context.empty() ? "" : context + ": ";
  try {
    return Result<T>(fn());
  } catch (const Error& e) {
    return Diagnostic{prefix + e.what(), e.kind()};
  } catch (const std::bad_alloc&) {
    return Diagnostic{prefix + "out of memory", ErrorKind::Internal};
  } catch (const std::exception& e) {
    return Diagnostic{prefix + "internal error: " + e.what(), ErrorKind::Internal};
  }
}

struct Lowered {
  core::lower::LoweredModule module;
  codegen::Target target;
};

Lowered lowerFor(const Model& model, const BuildOptions& options) {
  if (options.optLevel < 0 || options.optLevel > 3)
    throw Error("opt level must be 0-3, got " + std::to_string(options.optLevel), ErrorKind::Usage);
  Lowered l{core::lower::lowerGraph(model.graph), codegen::Target::parse(options.target)};
  return l;
}

}  // namespace

std::optional<IrStage> parseIrStage(const std::string& name) {
  if (name == "graph") return IrStage::Graph;
  if (name == "optimized") return IrStage::Optimized;
  if (name == "lowered" || name == "tir") return IrStage::Lowered;
  if (name == "llvm") return IrStage::Llvm;
  if (name == "asm" || name == "assembly") return IrStage::Assembly;
  return std::nullopt;
}

Result<std::shared_ptr<const Model>> openModel(const std::string& path, const OpenOptions& options) {
  return guarded<std::shared_ptr<const Model>>(path, [&] {
    if (!std::filesystem::exists(path)) throw Error("no such file", ErrorKind::Io);
    if (std::filesystem::is_directory(path)) throw Error("is a directory, expected a model file", ErrorKind::Io);
    auto start = std::chrono::steady_clock::now();
    importers::ImportOptions io;
    io.inputs = options.inputs;
    if (io.inputs.empty()) io.inputs = importers::readInputSpecs(path);
    if (options.batch > 0) {
      for (auto& spec : io.inputs) {
        if (spec.shape.empty()) throw Error("cannot set the batch of scalar input '" + spec.name + "'", ErrorKind::Usage);
        spec.shape[0] = options.batch;
      }
    }
    importers::ImportedModel imported = importers::importTorchScript(path, io);
    auto model = std::make_shared<Model>();
    model->path = path;
    model->name = std::filesystem::path(path).stem().string();
    model->description = imported.description;
    model->inputs = imported.inputs;
    model->graph = std::move(imported.graph);
    model->importSeconds = secondsSince(start);
    return std::shared_ptr<const Model>(std::move(model));
  });
}

Result<std::shared_ptr<CompiledModel>> build(std::shared_ptr<const Model> model, const BuildOptions& options) {
  return guarded<std::shared_ptr<CompiledModel>>(model ? model->path : "", [&] {
    KILN_ASSERT(model != nullptr, "build() needs a model");
    auto start = std::chrono::steady_clock::now();
    Lowered lowered = lowerFor(*model, options);
    if (!lowered.target.runnable)
      throw Error("target '" + options.target + "' is for cross-compilation (export only), it cannot run here",
                  ErrorKind::Usage);
    auto library = codegen::JitLibrary::compile(lowered.module.funcs, lowered.target);
    if (options.threads > 0) runtime::setNumThreads(options.threads);
    auto compiled = std::make_shared<CompiledModel>();
    compiled->model = model;
    compiled->options = options;
    compiled->targetString = lowered.target.str();
    compiled->graph = model->graph;
    compiled->numKernels = static_cast<int>(lowered.module.funcs.size());
    compiled->numCalls = static_cast<int>(lowered.module.plan.calls.size());
    compiled->executor = std::make_shared<runtime::GraphExecutor>(std::move(lowered.module.plan), library);
    compiled->planBytes = compiled->executor->memoryPlan().totalBytes();
    compiled->unplannedBytes = compiled->executor->memoryPlan().unplannedBytes;
    compiled->compileSeconds = secondsSince(start);
    return compiled;
  });
}

Result<std::vector<runtime::Tensor>> run(CompiledModel& compiled, const std::vector<runtime::Tensor>& inputs) {
  return guarded<std::vector<runtime::Tensor>>("", [&] {
    runtime::GraphExecutor& ex = *compiled.executor;
    if (static_cast<int>(inputs.size()) != ex.numInputs())
      throw Error("the model takes " + std::to_string(ex.numInputs()) + " input(s), got " +
                      std::to_string(inputs.size()),
                  ErrorKind::InvalidInput);
    for (size_t i = 0; i < inputs.size(); ++i) ex.setInput(static_cast<int>(i), inputs[i]);
    ex.run();
    std::vector<runtime::Tensor> out;
    for (int i = 0; i < ex.numOutputs(); ++i) out.push_back(ex.output(i));
    return out;
  });
}

Result<std::string> irText(std::shared_ptr<const Model> model, IrStage stage, const BuildOptions& options) {
  return guarded<std::string>(model ? model->path : "", [&]() -> std::string {
    KILN_ASSERT(model != nullptr, "irText() needs a model");
    if (stage == IrStage::Graph || stage == IrStage::Optimized) return core::printGraph(model->graph);
    Lowered lowered = lowerFor(*model, options);
    if (stage == IrStage::Lowered) {
      std::string text;
      for (const auto& f : lowered.module.funcs) text += core::tir::print(f) + "\n";
      return text;
    }
    if (stage == IrStage::Llvm) return codegen::emitLLVMIR(lowered.module.funcs, lowered.target, true);
    return codegen::emitAssembly(lowered.module.funcs, lowered.target);
  });
}

std::vector<runtime::Tensor> randomInputs(const Model& model, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<runtime::Tensor> inputs;
  for (const auto& spec : model.inputs) {
    runtime::Tensor t = runtime::Tensor::zeros(spec.dtype, spec.shape);
    if (spec.dtype == runtime::DType::Float32) {
      for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = normal(rng);
    }
    inputs.push_back(std::move(t));
  }
  return inputs;
}

std::string version() { return "0.1.0"; }

std::string cpuModelName() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      size_t colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
    }
  }
  return "unknown";
}

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

}  // namespace

Result<CompareResult> compare(const std::string& path, const CompareOptions& options) {
  OpenOptions open;
  open.batch = options.batch;
  auto model = openModel(path, open);
  if (!model) return model.error();
  auto compiled = build(model.value(), options.build);
  if (!compiled) return compiled.error();
  return guarded<CompareResult>(path, [&] {
    CompareResult result;
    const Model& m = *model.value();
    result.model = m.name;
    result.batch = m.inputs.empty() || m.inputs[0].shape.empty() ? 1 : m.inputs[0].shape[0];
    result.threads = options.build.threads > 0 ? options.build.threads : runtime::numThreads();
    runtime::setNumThreads(result.threads);
    result.target = compiled.value()->targetString;
    result.optLevel = options.build.optLevel;
    result.torchVersion = profiler::torchVersion();
    result.cpu = cpuModelName();
    result.compileSeconds = compiled.value()->compileSeconds;

    std::vector<runtime::Tensor> inputs = randomInputs(m);
    profiler::TimingOptions timing{options.warmup, 1, options.repeat, options.minRepeatMs};

    std::vector<runtime::Tensor> reference;
    for (profiler::TorchMode mode : {profiler::TorchMode::Eager, profiler::TorchMode::Compiled}) {
      profiler::TorchModel torchModel(path, mode, result.threads);
      std::vector<runtime::Tensor> out = torchModel.run(inputs);
      BackendResult r = fromTiming(profiler::torchModeName(mode), profiler::timeIt([&] { torchModel.run(inputs); }, timing));
      if (mode == profiler::TorchMode::Eager) reference = out;
      r.maxAbsDiff = maxAbsDiff(out, reference);
      describeOutputs(r, out);
      result.backends.push_back(std::move(r));
    }
    result.blas = profiler::torchBlasLibrary();

    CompiledModel& c = *compiled.value();
    std::vector<runtime::Tensor> out;
    auto runOnce = [&] {
      auto r = run(c, inputs);
      if (!r) throw Error(r.error().message, r.error().kind);
      out = std::move(r.value());
    };
    runOnce();
    double diff = maxAbsDiff(out, reference);
    BackendResult k = fromTiming("kiln", profiler::timeIt(runOnce, timing));
    k.maxAbsDiff = diff;
    describeOutputs(k, out);
    result.backends.push_back(std::move(k));
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
  j["backends"] = nlohmann::json::array();
  for (const auto& b : r.backends) {
    nlohmann::json e;
    e["backend"] = b.backend;
    e["available"] = b.available;
    if (!b.available) e["reason"] = b.reason;
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

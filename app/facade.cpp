#include "app/facade.h"

#include "app/facade_internal.h"

#include <chrono>
#include <filesystem>
#include <algorithm>
#include <cmath>
#include <fstream>
#include <random>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "codegen/llvm/jit.h"
#include "codegen/target.h"
#include "core/ir/printer.h"
#include "profiler/context.h"
#include "core/lower/lower.h"
#include "core/lower/schedule.h"
#include "core/lower/schedule_config.h"
#include "core/tir/printer.h"
#include "app/input_shapes.h"
#include "app/model_ref.h"
#include "importers/onnx.h"
#include "importers/torch_export.h"
#include "profiler/time_evaluator.h"
#include "profiler/torch_baseline.h"
#include "runtime/graph_executor.h"
#include "runtime/thread_pool.h"

namespace kiln::app {

codegen::Target parseTarget(const std::string& spec) {
  try {
    return codegen::Target::parse(spec);
  } catch (const InternalError&) {
    throw;
  } catch (const Error& e) {
    std::string what = e.what();
    bool nameProblem = what.rfind("unknown CPU", 0) == 0 || what.rfind("unknown feature", 0) == 0;
    if (what.rfind("unknown target '", 0) != 0) what = "unknown target '" + spec + "': " + what;
    // LLVM's own tools list what this LLVM knows (Kiln's CPU and feature names are LLVM's).
    if (nameProblem) what += "; `llc-19 -mcpu=help` lists the CPU and feature names";
    throw Error(what, ErrorKind::UnknownTarget);
  }
}

core::CompileOptions compileOptionsFor(const BuildOptions& options, const codegen::Target& target,
                                       std::shared_ptr<const core::lower::ScheduleConfigs> schedules) {
  if (options.optLevel < 0 || options.optLevel > core::passes::kMaxOptLevel)
    throw Error("opt level must be 0-" + std::to_string(core::passes::kMaxOptLevel) + ", got " +
                    std::to_string(options.optLevel),
                ErrorKind::Usage);
  core::CompileOptions c;
  c.optLevel = options.optLevel;
  c.passes = options.passes;
  c.skipPasses.insert(options.skipPasses.begin(), options.skipPasses.end());
  c.verify = options.verifyPasses;
  c.keepIr = options.keepPassIr;
  c.boundsCheck = options.boundsCheck;
  // Schedules pick vector widths, register tiles and the packed layout's channel block from the
  // target (schedule.h), or take the tuned knobs of a record.
  c.lower = core::lower::lowerOptionsFor(target.triple, target.cpu, target.features);
  c.lower.schedules = schedules ? std::move(schedules) : schedulesFor(options, target.strWithCpu());
  c.lower.winograd = options.winograd;
  return c;
}

core::OptimizedGraph optimizeFor(const Model& model, const BuildOptions& options) {
  return core::optimizeGraph(model.graph, compileOptionsFor(options, parseTarget(options.target)));
}

Lowered lowerFor(const Model& model, const BuildOptions& options,
                 std::shared_ptr<const core::lower::ScheduleConfigs> schedules) {
  codegen::Target target = parseTarget(options.target);
  core::CompiledKernels c = core::compile(model.graph, compileOptionsFor(options, target, std::move(schedules)));
  return Lowered{std::move(c.module), target, std::move(c.graph), std::move(c.passes), std::move(c.pipeline),
                 std::move(c.steps)};
}

std::optional<IrStage> parseIrStage(const std::string& name) {
  if (name == "graph") return IrStage::Graph;
  if (name == "optimized") return IrStage::Optimized;
  if (name == "lowered" || name == "tir") return IrStage::Lowered;
  if (name == "llvm") return IrStage::Llvm;
  if (name == "asm" || name == "assembly") return IrStage::Assembly;
  return std::nullopt;
}

ResolvedSource resolveSource(const std::string& path) {
  ResolvedSource r{path, "", "", std::filesystem::path(path).stem().string()};
  auto ref = parsePythonReference(path);
  if (!ref) return r;
  auto traced = traceReference(*ref);
  if (!traced) throw Error(traced.error().message, traced.error().kind);
  r.file = traced->model;
  r.pythonRef = ref->canonical();
  r.stateDict = traced->stateDict;
  r.name = ref->file.empty() ? ref->text : std::filesystem::path(ref->file).filename().string() + ":" + ref->attr;
  return r;
}

namespace {

std::string unknownShapesMessage(const std::vector<std::string>& names) {
  std::string example;
  for (const std::string& n : names) example += (example.empty() ? "" : ",") + n + ":[...]";
  return "input shapes are unknown (the file records none); pass them with --input-shapes \"" + example + "\"";
}

}  // namespace

std::vector<InputSpec> inputSpecsFor(const std::string& file, const OpenOptions& options) {
  if (!std::filesystem::exists(file)) throw Error("no such file", ErrorKind::Io);
  if (std::filesystem::is_directory(file)) throw Error("is a directory, expected a model file", ErrorKind::Io);
  std::vector<InputSpec> specs;
  if (importers::isOnnxFile(file)) {
    specs = importers::readOnnxInputSpecs(file);
    if (!options.inputs.empty()) {
      std::vector<std::string> names;
      for (const InputSpec& s : specs) names.push_back(s.name);
      specs = matchInputNames(options.inputs, names);
    }
  } else if (importers::isTorchExportFile(file)) {
    // The program records its inputs (a symbolic size as its example size); the importer checks
    // given shapes against the export's static sizes and ranges.
    importers::InputSignature sig = importers::readTorchExportSignature(file);
    specs = options.inputs.empty() ? sig.specs : matchInputNames(options.inputs, sig.names);
  } else {
    // kiln.json is one record of the archive (cheap); the forward signature needs a load.
    std::vector<InputSpec> recorded = importers::readInputSpecs(file);
    std::vector<std::string> names;
    for (const InputSpec& s : recorded) names.push_back(s.name);
    bool namesKnown = !recorded.empty() && std::none_of(names.begin(), names.end(), [](const auto& n) { return n.empty(); });
    if (!options.inputs.empty()) {
      if (!namesKnown) names = importers::readInputSignature(file).names;
      specs = matchInputNames(options.inputs, names);
    } else if (!recorded.empty()) {
      specs = recorded;
    } else {
      importers::InputSignature sig = importers::readInputSignature(file);
      if (sig.specs.empty() && !sig.names.empty()) throw Error(unknownShapesMessage(sig.names), ErrorKind::InvalidInput);
      specs = sig.specs;
    }
  }
  if (options.batch > 0) {
    for (auto& spec : specs) {
      if (spec.shape.empty()) throw Error("cannot set the batch of scalar input '" + spec.name + "'", ErrorKind::Usage);
      spec.shape[0] = options.batch;
    }
  }
  return specs;
}

Result<std::shared_ptr<const Model>> openModel(const std::string& path, const OpenOptions& options) {
  return guarded<std::shared_ptr<const Model>>(path, [&] {
    auto start = std::chrono::steady_clock::now();
    ResolvedSource source = resolveSource(path);
    const std::string& file = source.file;
    importers::ImportOptions io;
    importers::ImportedModel imported;
    try {
      io.inputs = inputSpecsFor(file, options);
      imported = importers::isOnnxFile(file)          ? importers::importOnnx(file, io)
                 : importers::isTorchExportFile(file) ? importers::importTorchExport(file, io)
                                                      : importers::importTorchScript(file, io);
    } catch (const Error& e) {
      // A reference's traced file is Kiln's own: the error names the reference instead.
      std::string message = e.what();
      if (file != path && message.rfind(file + ": ", 0) == 0) message = message.substr(file.size() + 2);
      throw Error(message, e.kind());
    }
    auto model = std::make_shared<Model>();
    model->path = file;
    model->name = source.name;
    model->source = path;
    model->pythonRef = source.pythonRef;
    model->stateDict = source.stateDict;
    model->description = imported.description;
    model->inputs = imported.inputs;
    model->graph = std::move(imported.graph);
    model->importSeconds = secondsSince(start);
    return std::shared_ptr<const Model>(std::move(model));
  });
}

Result<ModelSignature> modelSignature(const std::string& path) {
  return guarded<ModelSignature>(path, [&] {
    ResolvedSource source = resolveSource(path);
    if (!std::filesystem::is_regular_file(source.file)) throw Error("no such file", ErrorKind::Io);
    ModelSignature sig;
    if (importers::isOnnxFile(source.file)) {
      sig.recorded = importers::readOnnxInputSpecs(source.file);
      for (const InputSpec& s : sig.recorded) sig.names.push_back(s.name);
      return sig;
    }
    if (importers::isTorchExportFile(source.file)) {
      importers::InputSignature program = importers::readTorchExportSignature(source.file);
      sig.names = program.names;
      sig.recorded = program.specs;
      return sig;
    }
    // kiln.json is one record of the archive: no need to load the whole module.
    sig.recorded = importers::readInputSpecs(source.file);
    if (!sig.recorded.empty() && std::none_of(sig.recorded.begin(), sig.recorded.end(),
                                              [](const InputSpec& s) { return s.name.empty(); })) {
      for (const InputSpec& s : sig.recorded) sig.names.push_back(s.name);
      return sig;
    }
    importers::InputSignature ts = importers::readInputSignature(source.file);
    sig.names = ts.names;
    sig.recorded = ts.specs;
    return sig;
  });
}

Result<std::shared_ptr<CompiledModel>> build(std::shared_ptr<const Model> model, const BuildOptions& options) {
  return buildWithSchedules(std::move(model), options, nullptr);
}

Result<std::shared_ptr<CompiledModel>> buildWithSchedules(std::shared_ptr<const Model> model, const BuildOptions& options,
                                                          std::shared_ptr<const core::lower::ScheduleConfigs> schedules) {
  return guarded<std::shared_ptr<CompiledModel>>(model ? sourceOf(*model) : "", [&] {
    KILN_ASSERT(model != nullptr, "build() needs a model");
    auto start = std::chrono::steady_clock::now();
    Lowered lowered = lowerFor(*model, options, schedules);
    if (!lowered.target.runnable)
      throw Error("target '" + options.target + "' is for cross-compilation (export only), it cannot run here",
                  ErrorKind::Usage);
    auto library = codegen::JitLibrary::compile(lowered.module.funcs, lowered.target);
    if (options.threads > 0) runtime::setNumThreads(options.threads);
    auto compiled = std::make_shared<CompiledModel>();
    compiled->model = model;
    compiled->options = options;
    compiled->targetString = lowered.target.str();
    compiled->graph = std::move(lowered.graph);
    compiled->numFusedFunctions = static_cast<int>(compiled->graph.groups().size());
    compiled->pipeline = lowered.pipeline;
    compiled->numKernels = static_cast<int>(lowered.module.funcs.size());
    compiled->numCalls = static_cast<int>(lowered.module.plan.calls.size());
    compiled->executor = std::make_shared<runtime::GraphExecutor>(std::move(lowered.module.plan), library);
    compiled->planBytes = compiled->executor->memoryPlan().totalBytes();
    compiled->unplannedBytes = compiled->executor->memoryPlan().unplannedBytes;
    compiled->compileSeconds = secondsSince(start);
    return compiled;
  });
}

namespace {

/// The batch size the inputs ask for when they differ from the compiled shapes only in
/// dimension 0, all by the same amount; 0 otherwise (the executor then names the mismatch).
int64_t otherBatch(const runtime::GraphExecutor& ex, const std::vector<runtime::Tensor>& inputs) {
  int64_t batch = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const runtime::Shape& want = ex.inputSlot(static_cast<int>(i)).shape;
    const runtime::Shape& got = inputs[i].shape();
    if (got == want) return 0;
    if (got.empty() || got.size() != want.size() || got[0] <= 0 ||
        !std::equal(got.begin() + 1, got.end(), want.begin() + 1))
      return 0;
    if (batch != 0 && got[0] != batch) return 0;
    batch = got[0];
  }
  return batch;
}

}  // namespace

Result<std::vector<runtime::Tensor>> run(CompiledModel& compiled, const std::vector<runtime::Tensor>& inputs) {
  return guarded<std::vector<runtime::Tensor>>("", [&] {
    if (static_cast<int>(inputs.size()) != compiled.executor->numInputs())
      throw Error("the model takes " + std::to_string(compiled.executor->numInputs()) + " input(s), got " +
                      std::to_string(inputs.size()),
                  ErrorKind::InvalidInput);
    CompiledModel* target = &compiled;
    if (int64_t batch = otherBatch(*compiled.executor, inputs); batch > 0 && compiled.model) {
      std::shared_ptr<CompiledModel>& variant = compiled.batchVariants[batch];
      if (!variant) {
        OpenOptions open;
        open.inputs = compiled.model->inputs;
        open.batch = batch;
        auto model = openModel(compiled.model->path, open);
        if (!model) throw Error(model.error().message, model.error().kind);
        auto built = build(model.value(), compiled.options);
        if (!built) throw Error(built.error().message, built.error().kind);
        variant = built.value();
      }
      target = variant.get();
    }
    runtime::GraphExecutor& ex = *target->executor;
    for (size_t i = 0; i < inputs.size(); ++i) ex.setInput(static_cast<int>(i), inputs[i]);
    ex.run();
    std::vector<runtime::Tensor> out;
    for (int i = 0; i < ex.numOutputs(); ++i) out.push_back(ex.output(i));
    return out;
  });
}

Result<std::string> irText(std::shared_ptr<const Model> model, IrStage stage, const BuildOptions& options) {
  return guarded<std::string>(model ? sourceOf(*model) : "", [&]() -> std::string {
    KILN_ASSERT(model != nullptr, "irText() needs a model");
    if (stage == IrStage::Graph) return core::printGraph(model->graph);
    if (stage == IrStage::Optimized) return core::printGraph(optimizeFor(*model, options).graph);
    Lowered lowered = lowerFor(*model, options);
    if (stage == IrStage::Lowered) {
      std::string text;
      for (const auto& f : lowered.module.funcs) {
        // The knobs a kernel was scheduled with, and the key tuning records name it by.
        for (const char* attr : {"schedule", "tune_key"})
          if (auto it = f.attrs.find(attr); it != f.attrs.end()) text += std::string("// ") + attr + ": " + it->second + "\n";
        // The schedule primitives that made a primitive-scheduled kernel (gemm_search.h), a step a line.
        if (auto it = f.attrs.find("trace"); it != f.attrs.end())
          for (size_t start = 0, end; start < it->second.size(); start = end + 1) {
            end = it->second.find('\n', start);
            if (end == std::string::npos) end = it->second.size();
            if (end > start) text += "// trace: " + it->second.substr(start, end - start) + "\n";
          }
        text += core::tir::print(f) + "\n";
      }
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
  for (size_t i = 0; i < model.inputs.size(); ++i) {
    const InputSpec& spec = model.inputs[i];
    runtime::Tensor t = runtime::Tensor::zeros(spec.dtype, spec.shape);
    if (spec.dtype == runtime::DType::Float32) {
      for (int64_t e = 0; e < t.numel(); ++e) t.data<float>()[e] = normal(rng);
    } else if (spec.dtype == runtime::DType::Int64 || spec.dtype == runtime::DType::Int32) {
      // Token ids and other indices: uniform over the rows of the table they index, so the output
      // check sees varied ids (all zeros would be all padding in a language model). Integers that
      // index nothing stay zero.
      int64_t bound =
          i < model.graph.inputs().size() ? core::indexBound(model.graph, model.graph.inputs()[i]) : 0;
      if (bound > 1) {
        std::uniform_int_distribution<int64_t> ids(0, bound - 1);
        for (int64_t e = 0; e < t.numel(); ++e) {
          if (spec.dtype == runtime::DType::Int64) t.data<int64_t>()[e] = ids(rng);
          else t.data<int32_t>()[e] = static_cast<int32_t>(ids(rng));
        }
      }
    }
    inputs.push_back(std::move(t));
  }
  return inputs;
}

std::string version() { return "0.1.0"; }

std::string cpuModelName() { return profiler::cpuModelName(); }

}  // namespace kiln::app

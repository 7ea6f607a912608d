// kiln::torch::optimize: per-signature plans (partition.h), their executor, and the report.
#include "app/torch/optimize.h"

#include <ATen/ATen.h>
#include <torch/csrc/jit/api/function_impl.h>
#include <torch/csrc/jit/ir/ir.h>

#include <chrono>
#include <cstring>
#include <iomanip>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <unordered_map>

#include "app/facade.h"
#include "app/tune.h"
#include "app/torch/partition.h"
#include "codegen/target.h"
#include "core/passes/pipeline.h"
#include "importers/torchscript.h"
#include "runtime/error.h"
#include "runtime/graph_executor.h"
#include "runtime/tensor.h"

namespace kiln::torch {

namespace jit = ::torch::jit;

namespace {

std::optional<runtime::DType> kilnDType(c10::ScalarType type) {
  switch (type) {
    case c10::kFloat: return runtime::DType::Float32;
    case c10::kDouble: return runtime::DType::Float64;
    case c10::kLong: return runtime::DType::Int64;
    case c10::kInt: return runtime::DType::Int32;
    case c10::kBool: return runtime::DType::Bool;
    case c10::kChar: return runtime::DType::Int8;
    case c10::kByte: return runtime::DType::UInt8;
    default: return std::nullopt;
  }
}

c10::ScalarType torchDType(runtime::DType type) {
  switch (type) {
    case runtime::DType::Float32: return c10::kFloat;
    case runtime::DType::Float64: return c10::kDouble;
    case runtime::DType::Int64: return c10::kLong;
    case runtime::DType::Int32: return c10::kInt;
    case runtime::DType::Bool: return c10::kBool;
    case runtime::DType::Int8: return c10::kChar;
    case runtime::DType::UInt8: return c10::kByte;
  }
  return c10::kFloat;
}

std::string dtypeText(c10::ScalarType type) {
  if (auto k = kilnDType(type)) return std::string(runtime::dtypeName(*k));
  return c10::toString(type);
}

double msSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

struct Segment {
  detail::PlannedSegment plan;
  SubgraphReport report;
  std::unique_ptr<jit::GraphFunction> function;  // libtorch runs (made on first use)
  std::shared_ptr<app::CompiledModel> compiled;  // compiled: made on the first run
  std::vector<runtime::Tensor> staging;          // compiled: one per input
};

/// One input signature's plan.
struct Entry {
  std::mutex mutex;
  std::string signature;
  bool planned = false;
  std::vector<Segment> segments;
  std::vector<const jit::Value*> results;
  bool tupleResult = false;
  int64_t calls = 0;
  double planSeconds = 0;
};

std::vector<c10::IValue> runTorch(Segment& seg, size_t index, std::vector<c10::IValue> inputs) {
  if (!seg.function)
    seg.function = std::make_unique<jit::GraphFunction>("kiln_libtorch_segment_" + std::to_string(index),
                                                        seg.plan.graph->copy(), nullptr);
  seg.function->run(inputs);
  KILN_ASSERT(inputs.size() == 1 && inputs[0].isTuple(), "a libtorch segment returned no tuple");
  const auto& elements = inputs[0].toTupleRef().elements();
  return std::vector<c10::IValue>(elements.begin(), elements.end());
}

}  // namespace

struct OptimizedModule::Impl {
  ::torch::jit::Module original;
  OptimizeOptions options;
  std::shared_ptr<jit::Graph> graph;  // prepared: frozen, inlined; inputs are the forward arguments
  std::vector<std::string> argNames;
  mutable std::mutex mutex;  // guards cache and order
  std::map<std::string, std::shared_ptr<Entry>> cache;
  std::vector<std::string> order;

  std::shared_ptr<Entry> entryFor(const std::string& signature) {
    std::lock_guard<std::mutex> lock(mutex);
    std::shared_ptr<Entry>& entry = cache[signature];
    if (!entry) {
      entry = std::make_shared<Entry>();
      entry->signature = signature;
      order.push_back(signature);
    }
    return entry;
  }

  void plan(Entry& entry, const std::vector<at::Tensor>& inputs);
  void compile(Segment& seg, size_t index, const std::vector<c10::IValue>& inputs);
  std::vector<c10::IValue> runCompiled(Segment& seg, size_t index, std::vector<c10::IValue> inputs);
};

void OptimizedModule::Impl::plan(Entry& entry, const std::vector<at::Tensor>& inputs) {
  auto start = std::chrono::steady_clock::now();
  std::vector<importers::InputSpec> specs;
  std::string forceReason;
  for (size_t i = 0; i < inputs.size(); ++i) {
    auto dtype = kilnDType(inputs[i].scalar_type());
    if (!dtype) {
      forceReason = "input '" + argNames[i] + "' has dtype " + c10::toString(inputs[i].scalar_type()) +
                    ", which Kiln does not compile";
      break;
    }
    specs.push_back({argNames[i], *dtype, runtime::Shape(inputs[i].sizes().begin(), inputs[i].sizes().end())});
  }
  std::vector<importers::NodeSupport> verdicts;
  if (forceReason.empty()) {
    try {
      verdicts = importers::classifyTorchScriptGraph(graph, specs);
    } catch (const Error& e) {
      forceReason = e.what();
    }
  }
  detail::Partition partition = detail::partitionGraph(graph, verdicts, options.minSubgraphOps, forceReason);
  for (detail::PlannedSegment& planned : partition.segments) {
    Segment seg;
    seg.report.compiled = planned.compiled;
    seg.report.ops = planned.ops;
    for (const std::string& r : planned.reasons) {
      if (seg.report.reason.find(r) == std::string::npos) seg.report.reason += (seg.report.reason.empty() ? "" : "; ") + r;
    }
    seg.plan = std::move(planned);
    entry.segments.push_back(std::move(seg));
  }
  entry.results = std::move(partition.results);
  entry.tupleResult = partition.tupleResult;
  entry.planSeconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  entry.planned = true;
}

/// Imports and builds a compiled segment for the shapes of its first inputs; on failure the
/// segment runs in libtorch from then on, with the reason in the report.
void OptimizedModule::Impl::compile(Segment& seg, size_t index, const std::vector<c10::IValue>& inputs) {
  auto start = std::chrono::steady_clock::now();
  try {
    std::vector<importers::InputSpec> specs;
    for (size_t i = 0; i < inputs.size(); ++i) {
      const at::Tensor& t = inputs[i].toTensor();
      auto dtype = kilnDType(t.scalar_type());
      if (!dtype) throw Error("boundary tensor of dtype " + std::string(c10::toString(t.scalar_type())), ErrorKind::Unsupported);
      const jit::Value* in = seg.plan.graph->inputs()[i];
      specs.push_back({in->hasDebugName() ? in->debugNameBase() : "in" + std::to_string(i), *dtype,
                       runtime::Shape(t.sizes().begin(), t.sizes().end())});
    }
    importers::ImportedModel imported = importers::importTorchScriptGraph(seg.plan.graph, specs);
    auto model = std::make_shared<app::Model>();
    model->name = "subgraph_" + std::to_string(index);
    model->inputs = imported.inputs;
    model->graph = std::move(imported.graph);
    app::BuildOptions build;
    build.target = options.target;
    build.optLevel = options.optLevel;
    build.threads = options.threads;
    build.records = options.records;
    auto built = app::build(model, build);
    if (!built) throw Error(built.error().message, built.error().kind);
    std::shared_ptr<app::CompiledModel> compiled = built.value();
    if (compiled->executor->numOutputs() != static_cast<int>(seg.plan.outputs.size()))
      throw Error("the compiled subgraph has " + std::to_string(compiled->executor->numOutputs()) + " outputs, expected " +
                      std::to_string(seg.plan.outputs.size()),
                  ErrorKind::Unsupported);
    for (int i = 0; i < compiled->executor->numInputs(); ++i) {
      const runtime::TensorSlot& slot = compiled->executor->inputSlot(i);
      seg.staging.push_back(runtime::Tensor::zeros(slot.dtype, slot.shape));
    }
    seg.compiled = std::move(compiled);
    seg.report.kernels = seg.compiled->numKernels;
  } catch (const InternalError&) {
    throw;
  } catch (const std::exception& e) {
    seg.plan.compiled = false;
    seg.report.compiled = false;
    seg.report.reason = std::string("the subgraph did not compile: ") + e.what();
  }
  seg.report.compileSeconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

std::vector<c10::IValue> OptimizedModule::Impl::runCompiled(Segment& seg, size_t index, std::vector<c10::IValue> inputs) {
  runtime::GraphExecutor& ex = *seg.compiled->executor;
  // Shapes computed by libtorch from data may differ from the compiled ones: run in libtorch.
  for (size_t i = 0; i < inputs.size(); ++i) {
    const at::Tensor& t = inputs[i].toTensor();
    const runtime::TensorSlot& slot = ex.inputSlot(static_cast<int>(i));
    if (kilnDType(t.scalar_type()) != slot.dtype || !t.sizes().equals(slot.shape)) {
      ++seg.report.dynamicShapeRuns;
      return runTorch(seg, index, std::move(inputs));
    }
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    at::Tensor t = inputs[i].toTensor().contiguous();
    runtime::Tensor& staging = seg.staging[i];
    if (staging.nbytes()) std::memcpy(staging.raw(), t.data_ptr(), staging.nbytes());
    ex.setInput(static_cast<int>(i), staging);
  }
  ex.run();
  std::vector<c10::IValue> out;
  for (int i = 0; i < ex.numOutputs(); ++i) {
    runtime::Tensor r = ex.output(i);  // a copy of its own: the at::Tensor keeps it alive
    std::vector<int64_t> sizes(r.shape().begin(), r.shape().end());
    out.emplace_back(at::from_blob(
        r.raw(), sizes, [r](void*) {}, at::TensorOptions().dtype(torchDType(r.dtype()))));
  }
  return out;
}

c10::IValue OptimizedModule::forward(std::vector<c10::IValue> inputs) {
  Impl& impl = *m_impl;
  if (inputs.size() != impl.argNames.size()) {
    std::string names;
    for (const std::string& n : impl.argNames) names += (names.empty() ? "" : ", ") + n;
    throw Error("forward takes " + std::to_string(impl.argNames.size()) + " argument" +
                    (impl.argNames.size() == 1 ? "" : "s") + " (" + names + "), got " + std::to_string(inputs.size()),
                ErrorKind::InvalidInput);
  }
  std::vector<at::Tensor> tensors;
  std::string signature;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const c10::IValue& v = inputs[i];
    if (!v.isTensor())
      throw Error("forward argument '" + impl.argNames[i] + "' is a " + v.tagKind() + ", expected a tensor",
                  ErrorKind::InvalidInput);
    const at::Tensor& t = v.toTensor();
    if (!t.defined()) throw Error("forward argument '" + impl.argNames[i] + "' is an undefined tensor", ErrorKind::InvalidInput);
    if (!t.device().is_cpu())
      throw Error("forward argument '" + impl.argNames[i] + "' is on " + t.device().str() + "; Kiln runs on the CPU",
                  ErrorKind::InvalidInput);
    tensors.push_back(t);
    signature += (i ? ", " : "") + impl.argNames[i] + ":" + dtypeText(t.scalar_type()) +
                 runtime::shapeString(runtime::Shape(t.sizes().begin(), t.sizes().end()));
  }

  std::shared_ptr<Entry> entry = impl.entryFor(signature);
  std::lock_guard<std::mutex> lock(entry->mutex);
  at::NoGradGuard noGrad;
  if (!entry->planned) impl.plan(*entry, tensors);
  ++entry->calls;

  std::unordered_map<const jit::Value*, c10::IValue> env;
  for (size_t i = 0; i < inputs.size(); ++i) env[impl.graph->inputs()[i]] = inputs[i];
  for (size_t s = 0; s < entry->segments.size(); ++s) {
    Segment& seg = entry->segments[s];
    auto start = std::chrono::steady_clock::now();
    std::vector<c10::IValue> in;
    in.reserve(seg.plan.inputs.size());
    for (const jit::Value* v : seg.plan.inputs) in.push_back(env.at(v));
    if (seg.plan.compiled && !seg.compiled) {
      impl.compile(seg, s, in);
      start = std::chrono::steady_clock::now();  // compile time is reported on its own
    }
    std::vector<c10::IValue> out = seg.plan.compiled ? impl.runCompiled(seg, s, std::move(in)) : runTorch(seg, s, std::move(in));
    KILN_ASSERT(out.size() == seg.plan.outputs.size(), "segment " + std::to_string(s) + " returned a wrong number of values");
    for (size_t i = 0; i < out.size(); ++i) env[seg.plan.outputs[i]] = std::move(out[i]);
    seg.report.totalMs += msSince(start);
  }
  if (entry->results.size() == 1 && !entry->tupleResult) return env.at(entry->results[0]);
  std::vector<c10::IValue> results;
  for (const jit::Value* v : entry->results) results.push_back(env.at(v));
  return c10::ivalue::Tuple::create(std::move(results));
}

Report OptimizedModule::report() const {
  Report report;
  std::lock_guard<std::mutex> lock(m_impl->mutex);
  for (const std::string& signature : m_impl->order) {
    Entry& entry = *m_impl->cache.at(signature);
    std::lock_guard<std::mutex> entryLock(entry.mutex);
    ShapeEntryReport r;
    r.signature = signature;
    r.calls = entry.calls;
    r.compileSeconds = entry.planSeconds;
    std::map<std::pair<std::string, std::string>, int> fallbacks;
    std::vector<std::pair<std::string, std::string>> fallbackOrder;
    for (const Segment& seg : entry.segments) {
      r.subgraphs.push_back(seg.report);
      r.totalOps += static_cast<int>(seg.report.ops.size());
      r.totalMs += seg.report.totalMs;
      r.compileSeconds += seg.report.compileSeconds;
      if (seg.report.compiled) {
        r.compiledOps += static_cast<int>(seg.report.ops.size());
        r.compiledMs += seg.report.totalMs;
        continue;
      }
      for (size_t i = 0; i < seg.report.ops.size(); ++i) {
        // Planned for libtorch: per-op reasons; planned compiled but failed: the segment's.
        std::string reason = i < seg.plan.reasons.size() ? seg.plan.reasons[i] : seg.report.reason;
        auto key = std::make_pair(seg.report.ops[i], reason);
        if (fallbacks[key]++ == 0) fallbackOrder.push_back(key);
      }
    }
    for (const auto& key : fallbackOrder) r.fallbacks.push_back({key.first, fallbacks[key], key.second});
    report.entries.push_back(std::move(r));
  }
  return report;
}

size_t OptimizedModule::cacheSize() const {
  std::lock_guard<std::mutex> lock(m_impl->mutex);
  return m_impl->cache.size();
}

const OptimizeOptions& OptimizedModule::options() const { return m_impl->options; }
const ::torch::jit::Module& OptimizedModule::original() const { return m_impl->original; }

std::string Report::text() const {
  std::ostringstream os;
  os << std::fixed;
  if (entries.empty()) os << "kiln::torch: no plan yet (nothing has run)\n";
  for (const ShapeEntryReport& e : entries) {
    os << "plan for " << e.signature << " (" << e.calls << " call" << (e.calls == 1 ? "" : "s") << ")\n";
    os << "  compiled " << e.compiledOps << " of " << e.totalOps << " operators (" << std::setprecision(1)
       << 100 * e.compiledOpShare() << " %), " << 100 * e.compiledTimeShare() << " % of measured time; "
       << std::setprecision(2) << e.compileSeconds << " s to plan and compile\n";
    for (size_t i = 0; i < e.subgraphs.size(); ++i) {
      const SubgraphReport& s = e.subgraphs[i];
      os << "  #" << i << (s.compiled ? " kiln    " : " libtorch") << std::setw(5) << s.ops.size() << " ops";
      if (s.compiled) os << std::setw(4) << s.kernels << " kernels";
      os << std::setprecision(3) << std::setw(10) << (e.calls ? s.totalMs / e.calls : 0) << " ms/call";
      if (s.dynamicShapeRuns) os << "  (" << s.dynamicShapeRuns << " runs in libtorch: other shapes)";
      std::map<std::string, int> kinds;
      for (const std::string& op : s.ops) ++kinds[op];
      std::string list;
      for (const auto& [k, n] : kinds) list += (list.empty() ? "" : ", ") + k + (n > 1 ? " x" + std::to_string(n) : "");
      if (list.size() > 100) list = list.substr(0, 97) + "...";
      os << "  " << list << "\n";
    }
    if (!e.fallbacks.empty()) os << "  in libtorch:\n";
    for (const FallbackOp& f : e.fallbacks)
      os << "    " << f.kind << " x" << f.count << ": " << f.reason << "\n";
  }
  return os.str();
}

OptimizedModule optimize(const ::torch::jit::Module& module, const OptimizeOptions& options) {
  if (options.optLevel < 0 || options.optLevel > core::passes::kMaxOptLevel)
    throw Error("opt level must be 0-" + std::to_string(core::passes::kMaxOptLevel) + ", got " +
                    std::to_string(options.optLevel),
                ErrorKind::Usage);
  if (options.threads < 0) throw Error("threads must be >= 0, got " + std::to_string(options.threads), ErrorKind::Usage);
  if (options.minSubgraphOps < 0)
    throw Error("minSubgraphOps must be >= 0, got " + std::to_string(options.minSubgraphOps), ErrorKind::Usage);
  codegen::Target target = codegen::Target::parse(options.target);
  if (!target.runnable)
    throw Error("target '" + options.target + "' is for cross-compilation, it cannot run here", ErrorKind::Usage);
  // A records file that cannot be used is an error now, not a silent libtorch fallback later.
  if (auto check = app::checkRecords(options.records); !check) throw Error(check.error().message, check.error().kind);

  auto impl = std::make_shared<OptimizedModule::Impl>();
  impl->original = module;
  impl->options = options;
  impl->graph = importers::prepareTorchScriptModule(module);
  for (const jit::Value* v : impl->graph->inputs()) {
    if (v->type()->kind() != c10::TypeKind::TensorType)
      throw Error("forward argument '" + v->debugNameBase() + "' has type " + v->type()->repr_str() +
                      "; kiln::torch::optimize takes modules whose forward arguments are tensors",
                  ErrorKind::Unsupported);
    impl->argNames.push_back(v->debugNameBase());
  }
  return OptimizedModule(std::move(impl));
}

}  // namespace kiln::torch

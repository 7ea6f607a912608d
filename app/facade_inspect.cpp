// The façade's inspection calls (app/inspect.h): the graph as the runtime's calls, each stage's
// text, one kernel's code on demand, the target picker's entries and a line diff.
#include "app/inspect.h"

#include <algorithm>
#include <chrono>
#include <sstream>

#include "app/facade_internal.h"
#include "codegen/llvm/jit.h"
#include "codegen/target.h"
#include "core/ir/printer.h"
#include "core/tir/printer.h"
#include "profiler/op_cost.h"

namespace kiln::app {

struct InspectState {
  std::vector<core::tir::PrimFunc> funcs;
  codegen::Target target;
};

namespace {

std::string slotShape(const runtime::TensorSlot& slot) {
  return core::TensorType{slot.dtype, slot.shape}.str();
}

std::string joinTitle(const std::vector<std::string>& ops) {
  std::string s;
  for (size_t i = 0; i < ops.size(); ++i) s += (i ? " + " : "") + ops[i];
  return s;
}

// The runtime plan is the truth about what runs: one node per call, inputs and outputs around
// them, an edge wherever a call reads a slot another call (or an input) wrote. Constants (weights)
// are left out: they would triple the node count and say nothing about the dataflow.
// An if/loop call's sub-plans are described the same way, right after the call, each as a region
// whose inputs the call binds (an edge from the call to each). Calls inside regions take the
// profile's row numbers (GraphNode::call): after the top-level calls, depth-first.
class GraphDescriber {
 public:
  explicit GraphDescriber(const runtime::GraphPlan& plan) : m_nextNested(static_cast<int>(plan.calls.size())) {}

  /// Describes `plan` (lowered from `graph`) into region `region` (-1: the top level).
  void describe(const core::Graph& graph, const runtime::GraphPlan& plan, int region) {
    std::vector<int> producer(plan.slots.size(), -1);
    int control = region < 0 ? -1 : m_d.regions[region].node;
    // A loop body's first input counts the iterations, its first output says whether to go on.
    bool body = region >= 0 && m_d.regions[region].name == "body";
    for (size_t i = 0; i < plan.inputs.size(); ++i) {
      int slot = plan.inputs[i];
      std::string title = plan.slots[slot].name + (body && i == 0 ? " (iteration)" : "");
      producer[slot] = addBoundary(GraphNodeKind::Input, title, plan.slots[slot], region);
      if (control >= 0) m_d.edges.push_back(GraphEdge{control, producer[slot], slotShape(plan.slots[slot])});
    }

    std::map<std::string, core::ValueId> valueByName;
    for (core::ValueId v = 0; v < static_cast<core::ValueId>(graph.values().size()); ++v)
      valueByName.emplace(graph.value(v).name, v);

    std::vector<profiler::CallCost> costs = profiler::describeCalls(graph, plan);
    for (int c = 0; c < static_cast<int>(plan.calls.size()); ++c) {
      const runtime::KernelCall& call = plan.calls[c];
      GraphNode n;
      n.call = region < 0 ? c : m_nextNested++;
      n.region = region;
      n.kernel = call.kernel;
      n.function = call.node.empty() ? call.kernel : call.node;
      n.ops = costs[c].ops;
      n.key = costs[c].key;
      n.inputShapes = costs[c].inputShapes;
      n.outputShape = costs[c].outputShape;
      n.flops = costs[c].flops;
      n.bytes = costs[c].bytes;
      n.title = n.ops.empty() ? call.kernel : joinTitle(n.ops);
      const core::Node* root = nullptr;
      int firstOut = static_cast<int>(call.args.size()) - call.numOutputs;
      if (firstOut < static_cast<int>(call.args.size())) {
        auto it = valueByName.find(plan.slots[call.args[firstOut]].name);
        if (it != valueByName.end() && graph.value(it->second).producer >= 0) {
          root = &graph.node(graph.value(it->second).producer);
          n.group = root->group;
          n.location = root->location;
          if (root->group >= 0) n.function = graph.groups()[root->group].name;
        }
      }
      int self = static_cast<int>(m_d.nodes.size());
      for (int a = 0; a < firstOut; ++a) {
        int slot = call.args[a];
        bool again = std::find(call.args.begin(), call.args.begin() + a, slot) != call.args.begin() + a;
        if (producer[slot] >= 0 && !again)
          m_d.edges.push_back(GraphEdge{producer[slot], self, slotShape(plan.slots[slot])});
      }
      for (int a = firstOut; a < static_cast<int>(call.args.size()); ++a) producer[call.args[a]] = self;
      m_d.nodes.push_back(std::move(n));
      if (!call.regions.empty()) describeRegions(graph, plan, call, root, self, region);
    }

    for (size_t i = 0; i < plan.outputs.size(); ++i) {
      int slot = plan.outputs[i];
      std::string title = plan.outputs.size() == 1 ? "output" : "output " + std::to_string(i);
      if (region >= 0) title = plan.slots[slot].name + (body && i == 0 ? " (condition)" : "");
      int self = addBoundary(GraphNodeKind::Output, title, plan.slots[slot], region);
      if (producer[slot] >= 0) m_d.edges.push_back(GraphEdge{producer[slot], self, m_d.nodes[self].outputShape});
    }
  }

  GraphDescription take() { return std::move(m_d); }

 private:
  // The sub-plans of if/loop call `call` (node `self`); `root` is its graph node, whose regions
  // pair with the call's in order (as profiler::profileExecutor pairs them).
  void describeRegions(const core::Graph& graph, const runtime::GraphPlan& plan, const runtime::KernelCall& call,
                       const core::Node* root, int self, int region) {
    KILN_ASSERT(root && root->regions.size() == call.regions.size(),
                "if/loop call " + call.node + " has no graph node with its regions");
    static const char* const kIfNames[] = {"then", "else"};
    for (size_t r = 0; r < call.regions.size(); ++r) {
      GraphRegion g;
      g.node = self;
      g.parent = region;
      g.name = call.kind == runtime::CallKind::If ? kIfNames[r] : "body";
      g.label = "%" + graph.value(root->outputs[0]).name + " " + root->op + " · " + g.name;
      int index = static_cast<int>(m_d.regions.size());
      m_d.regions.push_back(std::move(g));
      m_d.nodes[self].regions.push_back(index);
      describe(*root->regions[r], plan.regions.at(call.regions[r]), index);
    }
  }

  int addBoundary(GraphNodeKind kind, const std::string& title, const runtime::TensorSlot& slot, int region) {
    GraphNode n;
    n.kind = kind;
    n.title = title;
    n.key = slot.name;
    n.outputShape = slotShape(slot);
    n.region = region;
    m_d.nodes.push_back(std::move(n));
    return static_cast<int>(m_d.nodes.size()) - 1;
  }

  GraphDescription m_d;
  int m_nextNested;  // the profile row of the next call inside a region
};

GraphDescription describeGraph(const core::Graph& graph, const runtime::GraphPlan& plan) {
  GraphDescriber describer(plan);
  describer.describe(graph, plan, -1);
  return describer.take();
}

std::vector<std::string> splitLines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

}  // namespace

int GraphDescription::nodeOfCall(int call) const {
  for (int i = 0; i < static_cast<int>(nodes.size()); ++i)
    if (nodes[i].call == call) return i;
  return -1;
}

std::vector<TargetChoice> targetChoices() {
  struct Candidate {
    std::string label, spec, description;
  };
  std::string host = codegen::hostCpuName();
  std::string cpu = cpuModelName();
  std::vector<Candidate> candidates{
      {"Host CPU: " + host + (cpu.empty() ? "" : " (" + cpu + ")"), "llvm",
       "the CPU this machine has, with every feature it supports"},
      {"Generic x86-64 (SSE2)", "llvm -mcpu=x86-64", "any 64-bit x86 CPU: SSE2 only, 4 float lanes"},
      {"x86-64 AVX2 (Haswell)", "llvm -mcpu=haswell", "AVX2 + FMA, 8 float lanes"},
      {"x86-64 AVX-512 (Skylake-AVX512)", "llvm -mcpu=skylake-avx512", "AVX-512, 16 float lanes"},
      {"AArch64 Neoverse-N1", "llvm -mtriple=aarch64-linux-gnu -mcpu=neoverse-n1",
       "64-bit Arm servers (Graviton2, Ampere Altra), NEON 4 float lanes: cross-compilation"},
      {"AArch64 Cortex-A72", "llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72",
       "64-bit Arm boards (Raspberry Pi 4), NEON 4 float lanes: cross-compilation"},
      {"AArch64 generic (armv8-a)", "llvm -mtriple=aarch64-linux-gnu -mcpu=generic -mattr=+neon",
       "any 64-bit Arm CPU, NEON 4 float lanes: cross-compilation"},
      {"WebAssembly wasm32 (SIMD128)", "llvm -mtriple=wasm32-unknown-unknown -mattr=+simd128",
       "browsers and Node: kernels.wasm run by web/kiln_runtime.mjs, SIMD128 4 float lanes, one thread"},
  };
  std::vector<TargetChoice> out;
  for (const auto& c : candidates) {
    TargetChoice t{c.label, c.spec, c.description, true, c.spec == "llvm"};
    try {
      t.runnable = codegen::Target::parse(c.spec).runnable;
    } catch (const std::exception&) {
      continue;  // this LLVM lacks the backend: leave the entry out rather than offer an error
    }
    if (!t.runnable) {
      t.label += " — export only";
      t.description += "; cannot run on this machine, only be exported";
    }
    out.push_back(std::move(t));
  }
  return out;
}

Result<Inspection> inspect(std::shared_ptr<const Model> model, const BuildOptions& options) {
  return guarded<Inspection>(model ? sourceOf(*model) : "", [&] {
    KILN_ASSERT(model != nullptr, "inspect() needs a model");
    auto start = std::chrono::steady_clock::now();
    BuildOptions withIr = options;
    withIr.keepPassIr = true;  // the IR view diffs the graph before and after each pass
    Lowered lowered = lowerFor(*model, withIr);
    Inspection r;
    r.model = model->name;
    r.targetString = lowered.target.str();
    r.optLevel = options.optLevel;
    r.runnable = lowered.target.runnable;
    r.pipeline = lowered.pipeline;
    r.graph = describeGraph(lowered.graph, lowered.module.plan);
    r.importedText = core::printGraph(model->graph);
    r.optimizedText = core::printGraph(lowered.graph);
    for (const auto& f : lowered.module.funcs) {
      std::string text = core::tir::print(f);
      r.loweredText += text + "\n";
      r.loopIrByKernel[f.name] = std::move(text);
    }
    for (const auto& p : lowered.passes.passes)
      r.passes.push_back(PassRun{p.name, p.invocation, p.skipped, p.changed, p.seconds * 1e3, p.nodesBefore,
                                 p.nodesAfter, p.counters, p.irAfter});
    r.numKernels = static_cast<int>(lowered.module.funcs.size());
    r.numCalls = static_cast<int>(lowered.module.plan.calls.size());
    r.state = std::make_shared<const InspectState>(InspectState{std::move(lowered.module.funcs), lowered.target});
    r.seconds = secondsSince(start);
    return r;
  });
}

Result<KernelCode> kernelCode(const Inspection& inspection, const std::string& kernel) {
  return guarded<KernelCode>(kernel, [&] {
    if (!inspection.state) throw Error("nothing inspected yet", ErrorKind::Usage);
    const auto& funcs = inspection.state->funcs;
    auto it = std::find_if(funcs.begin(), funcs.end(), [&](const auto& f) { return f.name == kernel; });
    if (it == funcs.end()) throw Error("no such kernel in this build", ErrorKind::Usage);
    std::vector<core::tir::PrimFunc> one{*it};
    KernelCode code;
    code.kernel = kernel;
    code.loopIr = core::tir::print(*it);
    code.llvmIr = codegen::emitLLVMIR(one, inspection.state->target, true);
    code.assembly = codegen::emitAssembly(one, inspection.state->target);
    return code;
  });
}

Result<std::string> moduleText(const Inspection& inspection, IrStage stage) {
  return guarded<std::string>(inspection.model, [&]() -> std::string {
    if (stage == IrStage::Graph) return inspection.importedText;
    if (stage == IrStage::Optimized) return inspection.optimizedText;
    if (stage == IrStage::Lowered) return inspection.loweredText;
    if (!inspection.state) throw Error("nothing inspected yet", ErrorKind::Usage);
    if (stage == IrStage::Llvm) return codegen::emitLLVMIR(inspection.state->funcs, inspection.state->target, true);
    return codegen::emitAssembly(inspection.state->funcs, inspection.state->target);
  });
}

std::vector<DiffLine> lineDiff(const std::string& a, const std::string& b) {
  std::vector<std::string> x = splitLines(a), y = splitLines(b);
  size_t prefix = 0;
  while (prefix < x.size() && prefix < y.size() && x[prefix] == y[prefix]) ++prefix;
  size_t suffix = 0;
  while (suffix < x.size() - prefix && suffix < y.size() - prefix &&
         x[x.size() - 1 - suffix] == y[y.size() - 1 - suffix])
    ++suffix;
  std::vector<DiffLine> out;
  for (size_t i = 0; i < prefix; ++i)
    out.push_back({DiffKind::Same, x[i], static_cast<int>(i + 1), static_cast<int>(i + 1)});

  size_t n = x.size() - prefix - suffix, m = y.size() - prefix - suffix;
  auto removed = [&](size_t i) {
    out.push_back({DiffKind::Removed, x[prefix + i], static_cast<int>(prefix + i + 1), -1});
  };
  auto added = [&](size_t j) {
    out.push_back({DiffKind::Added, y[prefix + j], -1, static_cast<int>(prefix + j + 1)});
  };
  if (n * m > 40'000'000) {
    // Too large for the quadratic table: show the middle as replaced wholesale.
    for (size_t i = 0; i < n; ++i) removed(i);
    for (size_t j = 0; j < m; ++j) added(j);
  } else {
    // lcs[i][j]: longest common subsequence of x[prefix+i..] and y[prefix+j..].
    std::vector<uint32_t> lcs((n + 1) * (m + 1), 0);
    auto at = [&](size_t i, size_t j) -> uint32_t& { return lcs[i * (m + 1) + j]; };
    for (size_t i = n; i-- > 0;)
      for (size_t j = m; j-- > 0;)
        at(i, j) = x[prefix + i] == y[prefix + j] ? at(i + 1, j + 1) + 1 : std::max(at(i + 1, j), at(i, j + 1));
    size_t i = 0, j = 0;
    while (i < n || j < m) {
      if (i < n && j < m && x[prefix + i] == y[prefix + j]) {
        out.push_back({DiffKind::Same, x[prefix + i], static_cast<int>(prefix + i + 1),
                       static_cast<int>(prefix + j + 1)});
        ++i, ++j;
      } else if (i < n && (j == m || at(i + 1, j) >= at(i, j + 1))) {
        removed(i++);
      } else {
        added(j++);
      }
    }
  }
  for (size_t k = suffix; k > 0; --k)
    out.push_back({DiffKind::Same, x[x.size() - k], static_cast<int>(x.size() - k + 1),
                   static_cast<int>(y.size() - k + 1)});
  return out;
}

}  // namespace kiln::app

// The façade's optimizer report: what each pass did and which fused functions came out
// (`kiln ir MODEL --stats`, the workbench's pass view).
#include <algorithm>
#include <cstdio>
#include <map>

#include "app/facade.h"
#include "app/facade_internal.h"
#include "core/lower/lower.h"
#include "core/compile.h"
#include "core/passes/pipeline.h"

namespace kiln::app {

Result<OptimizeReport> optimize(std::shared_ptr<const Model> model, const BuildOptions& options) {
  return guarded<OptimizeReport>(model ? sourceOf(*model) : "", [&] {
    KILN_ASSERT(model != nullptr, "optimize() needs a model");
    Lowered lowered = lowerFor(*model, options);
    OptimizeReport r;
    r.model = model->name;
    r.optLevel = options.optLevel;
    r.pipeline = lowered.pipeline;
    r.passMs = lowered.passes.seconds * 1e3;
    r.nodesBefore = static_cast<int>(model->graph.nodes().size());
    r.nodesAfter = static_cast<int>(lowered.graph.nodes().size());
    for (const auto& p : lowered.passes.passes) {
      r.passes.push_back(PassRun{p.name, p.invocation, p.skipped, p.changed, p.seconds * 1e3, p.nodesBefore,
                                 p.nodesAfter, p.counters, p.irAfter});
    }
    std::map<std::string, std::string> kernelByKey;
    const core::Graph& g = lowered.graph;
    for (int i = 0; i < static_cast<int>(g.groups().size()); ++i) {
      FusedFunctionInfo f;
      f.name = g.groups()[i].name;
      f.workloadKey = core::lower::groupWorkloadKey(g, i);
      f.kernel = kernelByKey.emplace(f.workloadKey, f.name).first->second;
      for (core::NodeId n = g.groups()[i].first; n < g.groups()[i].end; ++n) f.ops.push_back(g.node(n).op);
      r.functions.push_back(std::move(f));
    }
    r.numKernels = static_cast<int>(lowered.module.funcs.size());
    r.numCalls = static_cast<int>(lowered.module.plan.calls.size());
    for (const core::CompileStep& step : lowered.steps)
      r.steps.push_back(OptimizeReport::Step{step.name, step.seconds * 1e3, step.detail});
    r.graph = std::move(lowered.graph);
    return r;
  });
}

std::string optimizeReportText(const OptimizeReport& r) {
  std::string out;
  char line[512];
  out += "model " + r.model + " at -O" + std::to_string(r.optLevel) + "\n";
  out += "pipeline: " + (r.pipeline.empty() ? std::string("(none)") : r.pipeline) + "\n\n";
  std::snprintf(line, sizeof line, "%-34s %9s  %-7s %15s  %s\n", "pass", "time ms", "changed", "nodes",
                "counters");
  out += line;
  int changed = 0;
  for (const PassRun& p : r.passes) {
    std::string counters;
    for (const auto& [k, v] : p.counters)
      counters += (counters.empty() ? "" : ", ") + k + "=" + std::to_string(v);
    std::string nodes = std::to_string(p.nodesBefore) + " -> " + std::to_string(p.nodesAfter);
    std::snprintf(line, sizeof line, "%-34s %9.2f  %-7s %15s  %s\n", p.invocation.c_str(), p.ms,
                  p.skipped ? "skipped" : (p.changed ? "yes" : "no"), nodes.c_str(), counters.c_str());
    out += line;
    changed += p.changed;
  }
  std::snprintf(line, sizeof line, "passes: %zu run, %d changed the graph, %.2f ms\n\n", r.passes.size(),
                changed, r.passMs);
  out += line;
  if (!r.steps.empty()) {
    out += "compile steps (core/compile.h):\n";
    for (const auto& step : r.steps) {
      std::snprintf(line, sizeof line, "  %-34s %9.2f ms  %s\n", step.name.c_str(), step.ms, step.detail.c_str());
      out += line;
    }
    out += "\n";
  }

  size_t fusedOps = 0, widest = 0;
  std::map<size_t, int> histogram;
  for (const auto& f : r.functions) {
    fusedOps += f.ops.size();
    widest = std::max(widest, f.name.size());
    ++histogram[f.ops.size()];
  }
  std::snprintf(
      line, sizeof line,
      "graph: %d -> %d nodes; %zu fused functions holding %zu ops; %d kernels, %d calls per inference\n",
      r.nodesBefore, r.nodesAfter, r.functions.size(), fusedOps, r.numKernels, r.numCalls);
  out += line;
  if (r.functions.empty()) return out;
  out += "ops per function:";
  for (const auto& [ops, count] : histogram) out += " " + std::to_string(ops) + "×" + std::to_string(count);
  out += "\n\nfused functions:\n";
  for (const auto& f : r.functions) {
    std::string ops;
    for (const auto& op : f.ops) ops += (ops.empty() ? "" : ", ") + op;
    std::string shared = f.kernel == f.name ? "" : "  (runs " + f.kernel + ")";
    std::snprintf(line, sizeof line, "  %-*s %2zu ops: %s%s\n", static_cast<int>(widest), f.name.c_str(),
                  f.ops.size(), ops.c_str(), shared.c_str());
    out += line;
  }
  return out;
}

std::string passListText() {
  std::string out = core::passes::describePasses() + "\ndefault pipelines:\n";
  for (int level = 0; level <= core::passes::kMaxOptLevel; ++level) {
    std::string text = core::optLevelPipelineText(level);
    out += "  -O" + std::to_string(level) + "  " + (text.empty() ? "(none)" : text) + "\n";
  }
  return out;
}

}  // namespace kiln::app

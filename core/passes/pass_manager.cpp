#include "core/passes/pass_manager.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "core/ir/printer.h"
#include "core/passes/verifier.h"
#include "runtime/error.h"

namespace kiln::core::passes {
namespace {

int countConstants(const Graph& g) {
  return static_cast<int>(
      std::count_if(g.values().begin(), g.values().end(), [](const Value& v) { return v.isConstant(); }));
}

}  // namespace

int PipelineResult::changedCount() const {
  return static_cast<int>(
      std::count_if(passes.begin(), passes.end(), [](const PassRecord& r) { return r.changed; }));
}

PassManager::PassManager(Pipeline pipeline, PassManagerOptions options)
    : m_pipeline(std::move(pipeline)), m_options(std::move(options)) {}

PipelineResult PassManager::run(Graph& graph) const {
  using Clock = std::chrono::steady_clock;
  PipelineResult result;
  auto start = Clock::now();
  if (m_options.verify) verifyGraphOrThrow(graph, "before the first pass");
  for (const PassInvocation& inv : m_pipeline) {
    if (m_options.cancel && m_options.cancel->load()) {
      result.cancelled = true;
      break;
    }
    PassRecord record;
    record.name = inv.pass->name;
    record.invocation = inv.text();
    record.nodesBefore = static_cast<int>(graph.nodes().size());
    record.constantsBefore = countConstants(graph);
    if (m_options.skip.count(record.name)) {
      record.skipped = true;
      record.nodesAfter = record.nodesBefore;
      record.constantsAfter = record.constantsBefore;
      result.passes.push_back(std::move(record));
      continue;
    }
    if (inv.pass->kind != PassKind::Graph)
      throw Error("'" + record.name + "' is a loop-IR pass: it runs on the kernels after lowering, not on the graph",
                  ErrorKind::Usage);
    auto passStart = Clock::now();
    PassOptions options = inv.options;
    options.schedules = m_options.schedules;
    record.changed = inv.pass->run(graph, options, &record.counters);
    record.seconds = std::chrono::duration<double>(Clock::now() - passStart).count();
    record.nodesAfter = static_cast<int>(graph.nodes().size());
    record.constantsAfter = countConstants(graph);
    if (m_options.verify) verifyGraphOrThrow(graph, "after pass " + record.invocation);
    if (m_options.keepIr && record.changed) record.irAfter = printGraph(graph);
    result.passes.push_back(std::move(record));
  }
  result.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return result;
}

std::string formatPipelineResult(const PipelineResult& result) {
  std::string out;
  char line[256];
  std::snprintf(line, sizeof line, "%-34s %9s  %-7s %15s  %s\n", "pass", "time ms", "changed", "nodes",
                "counters");
  out += line;
  for (const PassRecord& r : result.passes) {
    std::string counters;
    for (const auto& [k, v] : r.counters)
      counters += (counters.empty() ? "" : ", ") + k + "=" + std::to_string(v);
    std::string nodes = std::to_string(r.nodesBefore) + " -> " + std::to_string(r.nodesAfter);
    std::snprintf(line, sizeof line, "%-34s %9.2f  %-7s %15s  %s\n", r.invocation.c_str(), r.seconds * 1e3,
                  r.skipped ? "skipped" : (r.changed ? "yes" : "no"), nodes.c_str(), counters.c_str());
    out += line;
  }
  std::snprintf(line, sizeof line, "total %.2f ms, %d of %zu passes changed the graph%s\n",
                result.seconds * 1e3, result.changedCount(), result.passes.size(),
                result.cancelled ? " (cancelled)" : "");
  return out + line;
}

}  // namespace kiln::core::passes

// The pass manager runs a pipeline (core/passes/pipeline.h) over a graph. It instruments and
// does not decide (STYLE "Passes"): it times every pass, records whether it changed the graph
// and the counters it reported, keeps the IR text after a pass only when that pass changed
// something (and only when asked), runs the verifier after every pass when asked (tests do),
// skips passes by name and stops between passes when the cancel flag is raised.
#pragma once

#include <atomic>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "core/ir/graph.h"
#include "core/passes/pipeline.h"

namespace kiln::core::passes {

struct PassManagerOptions {
  bool verify = false;                        // verifyGraph after the input and after every pass
  bool keepIr = false;                        // record printGraph after each pass that changed the graph
  std::set<std::string> skip;                 // pass names not to run (recorded as skipped)
  const std::atomic<bool>* cancel = nullptr;  // checked before each pass
  std::shared_ptr<const lower::ScheduleConfigs> schedules;  // handed to every pass (PassOptions)
};

struct PassRecord {
  std::string name;        // "fuse-ops"
  std::string invocation;  // "fuse-ops{max-depth=64}"
  bool skipped = false;
  bool changed = false;
  double seconds = 0;
  int nodesBefore = 0, nodesAfter = 0;
  int constantsBefore = 0, constantsAfter = 0;
  PassCounters counters;
  std::string irAfter;  // set when keepIr and the pass changed the graph
};

struct PipelineResult {
  std::vector<PassRecord> passes;  // one per pipeline entry that started (or was skipped)
  double seconds = 0;
  bool cancelled = false;  // stopped early; the graph is as after the last pass run
  int changedCount() const;
};

class PassManager {
 public:
  explicit PassManager(Pipeline pipeline, PassManagerOptions options = {});

  /// Runs the pipeline in place. A pass that throws leaves the graph as the previous pass left
  /// it and the exception propagates (user errors as they are; a verifier failure is an
  /// InternalError naming the pass).
  PipelineResult run(Graph& graph) const;

  const Pipeline& pipeline() const { return m_pipeline; }

 private:
  Pipeline m_pipeline;
  PassManagerOptions m_options;
};

/// A table of a pipeline run: pass, time, changed, nodes before → after, counters.
std::string formatPipelineResult(const PipelineResult& result);

}  // namespace kiln::core::passes

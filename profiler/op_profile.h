// Per-operator profiles of a compiled graph (TVM's debug executor, PyTorch's profiler tables):
// the debug executor's per-call timings joined with what each call computes (op_cost.h), the
// end-to-end time of ordinary runs beside them, and exports (Chrome trace-event JSON, JSON).
#pragma once

#include <string>
#include <vector>

#include "core/ir/graph.h"
#include "profiler/records.h"
#include "runtime/graph_executor.h"

namespace kiln::profiler {

struct ProfileOptions {
  int warmup = 3;
  int repeat = 20;          // timed passes, call by call
  double minRepeatMs = 20;  // for the end-to-end timing
};

/// Profiles `executor` (inputs already set) call by call, then times whole runs the ordinary way.
/// `graph` is the graph the plan was lowered from (for operator names and FLOPs).
ProfileRecord profileExecutor(runtime::GraphExecutor& executor, const core::Graph& graph,
                              const ProfileOptions& options);

/// Rows grouped by operator kind (the anchor op of each call, e.g. all conv2d calls together):
/// name = op, calls = number of calls, times and FLOPs summed. Sorted by time, largest first.
std::vector<OpRecord> groupByOperator(const std::vector<OpRecord>& ops);

/// The timeline run as Chrome trace-event JSON (one complete "X" event per call, µs), for
/// Perfetto or chrome://tracing. `title` names the process row.
std::string chromeTraceJson(const ProfileRecord& profile, const std::string& title);

/// The profile as JSON: summary and one object per call.
std::string profileJson(const ProfileRecord& profile);

/// "conv2d+add+relu"
std::string joinOps(const std::vector<std::string>& ops, const std::string& separator = "+");

}  // namespace kiln::profiler

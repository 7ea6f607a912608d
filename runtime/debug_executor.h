// Runs a compiled graph call by call and times every call: the raw material of per-operator
// profiles (profiler/op_profile.h turns it into named, costed rows) and of timeline exports.
//
// The calls run in plan order, exactly as GraphExecutor::run would run them, with a steady-clock
// reading around each call; so caches and thread-pool state between calls match an ordinary
// inference and the sum of call times stays close to the end-to-end time. Each timed repeat is
// kept whole (per-call start offsets and durations), so a timeline of one real run can be shown.
#pragma once

#include <vector>

#include "runtime/graph_executor.h"

namespace kiln::runtime {

/// One timed pass over the graph.
struct DebugRepeat {
  std::vector<double> startUs;     // per call, from the start of the pass
  std::vector<double> durationUs;  // per call
  double totalUs = 0;              // first call's start to last call's end
  std::vector<double> nestedUs;    // per nested call (DebugExecutor::nestedCalls): its total in the pass
  std::vector<int64_t> nestedRuns; // and how often it ran (a loop body's calls once per iteration)
};

/// A call inside a sub-plan of an If/Loop call, at any depth.
struct NestedCall {
  const KernelCall* call = nullptr;
  const GraphExecutor* executor = nullptr;  // the sub-plan's executor
  int index = 0;                            // the call's index in that sub-plan
  int topCall = 0;                          // the top-level If/Loop call it runs inside
};

class DebugExecutor {
 public:
  /// The executor's inputs must be set (GraphExecutor::setInput) before run().
  explicit DebugExecutor(GraphExecutor& executor);

  int numCalls() const { return static_cast<int>(m_executor.plan().calls.size()); }
  const KernelCall& call(int index) const { return m_executor.plan().calls.at(index); }
  const GraphPlan& plan() const { return m_executor.plan(); }
  /// Every call inside If/Loop calls, depth-first (a nested If/Loop before the calls inside it).
  /// Their time is part of their top-level call's: passes time them too, split by call.
  const std::vector<NestedCall>& nestedCalls() const { return m_nested; }

  /// `warmup` untimed passes, then `repeat` timed passes (at least one).
  std::vector<DebugRepeat> run(int warmup, int repeat);

 private:
  GraphExecutor& m_executor;
  std::vector<NestedCall> m_nested;
};

/// The median of each call's durations over `repeats`, in µs.
std::vector<double> medianCallTimesUs(const std::vector<DebugRepeat>& repeats);

}  // namespace kiln::runtime

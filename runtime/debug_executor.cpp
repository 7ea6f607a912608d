#include "runtime/debug_executor.h"

#include <algorithm>
#include <chrono>

namespace kiln::runtime {
namespace {

using Clock = std::chrono::steady_clock;

double microsBetween(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::micro>(b - a).count();
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/// The calls inside If/Loop call `c` of `executor`, each followed by the calls inside it.
void addCallsInside(const GraphExecutor& executor, size_t c, int topCall, std::vector<NestedCall>& out) {
  for (int r : executor.plan().calls[c].regions) {
    const GraphExecutor& sub = *executor.regions().at(r);
    for (size_t k = 0; k < sub.plan().calls.size(); ++k) {
      out.push_back(NestedCall{&sub.plan().calls[k], &sub, static_cast<int>(k), topCall});
      addCallsInside(sub, k, topCall, out);
    }
  }
}

}  // namespace

DebugExecutor::DebugExecutor(GraphExecutor& executor) : m_executor(executor) {
  for (size_t c = 0; c < executor.plan().calls.size(); ++c)
    addCallsInside(executor, c, static_cast<int>(c), m_nested);
}

std::vector<DebugRepeat> DebugExecutor::run(int warmup, int repeat) {
  const int calls = numCalls();
  for (int w = 0; w < warmup; ++w)
    for (int c = 0; c < calls; ++c) m_executor.runCall(c);

  std::vector<DebugRepeat> repeats(std::max(1, repeat));
  std::vector<Clock::time_point> stamps(calls + 1);
  const bool nested = !m_nested.empty();
  if (nested) m_executor.setCallTiming(true);
  for (DebugRepeat& r : repeats) {
    if (nested) m_executor.resetCallTotals();
    // Record raw clock readings only; converting them happens after the pass.
    stamps[0] = Clock::now();
    for (int c = 0; c < calls; ++c) {
      m_executor.runCall(c);
      stamps[c + 1] = Clock::now();
    }
    r.startUs.resize(calls);
    r.durationUs.resize(calls);
    for (int c = 0; c < calls; ++c) {
      r.startUs[c] = microsBetween(stamps[0], stamps[c]);
      r.durationUs[c] = microsBetween(stamps[c], stamps[c + 1]);
    }
    r.totalUs = microsBetween(stamps[0], stamps[calls]);
    for (const NestedCall& n : m_nested) {
      r.nestedUs.push_back(n.executor->callTotals().us.at(n.index));
      r.nestedRuns.push_back(n.executor->callTotals().runs.at(n.index));
    }
  }
  if (nested) m_executor.setCallTiming(false);
  return repeats;
}

std::vector<double> medianCallTimesUs(const std::vector<DebugRepeat>& repeats) {
  if (repeats.empty()) return {};
  size_t calls = repeats.front().durationUs.size();
  std::vector<double> out(calls);
  std::vector<double> samples;
  for (size_t c = 0; c < calls; ++c) {
    samples.clear();
    for (const DebugRepeat& r : repeats) samples.push_back(r.durationUs[c]);
    out[c] = median(samples);
  }
  return out;
}

}  // namespace kiln::runtime
